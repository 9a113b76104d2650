//! Per operation (syscall, or io_uring opcode), over all processes: how
//! many bytes each call asked for (power-of-two bins) and how long it
//! took. Fixed memory per operation, whatever the number of calls.

use crate::acc::hist::Histogram;

/// Power-of-two bins: bin 0 holds 0, bin k holds [2^(k-1), 2^k).
pub const POW2_BINS: usize = 65;

/// The power-of-two bin of `v`.
pub fn pow2_bin(v: u64) -> usize {
    (64 - v.leading_zeros()) as usize
}

/// The smallest value of power-of-two bin `k`.
pub fn pow2_low(k: usize) -> u64 {
    if k == 0 {
        0
    } else {
        1u64 << (k - 1)
    }
}

/// One operation's distributions.
#[derive(Clone)]
pub struct CallDist {
    /// `pread64`, `openat`, `io_uring READ`.
    pub name: String,
    kind: &'static str,
    op: &'static str,
    pub count: u64,
    /// Bytes asked for (calls that move data only), by power-of-two bin.
    pub sizes: [u64; POW2_BINS],
    pub latency: Histogram,
}

impl CallDist {
    fn new(kind: &'static str, op: &'static str) -> Self {
        let name = if kind.is_empty() { op.to_string() } else { format!("{kind} {op}") };
        CallDist { name, kind, op, count: 0, sizes: [0; POW2_BINS], latency: Histogram::default() }
    }

    /// Calls with a size (read or write family).
    pub fn sized(&self) -> u64 {
        self.sizes.iter().sum()
    }
}

/// Every operation seen, in order of first sight.
#[derive(Clone, Default)]
pub struct Calls {
    pub ops: Vec<CallDist>,
    /// The operation found last: runs of one call are the rule, and a
    /// search comparing names took 60% of `stats` on a log of 42M preads.
    last: usize,
}

impl Calls {
    /// The entry of `kind`/`op`, made if new.
    fn entry(&mut self, kind: &'static str, op: &'static str) -> &mut CallDist {
        let hit = self.ops.get(self.last).is_some_and(|o| same(o.op, op) && same(o.kind, kind));
        if !hit {
            self.last = match self.ops.iter().position(|o| o.kind == kind && o.op == op) {
                Some(i) => i,
                None => {
                    self.ops.push(CallDist::new(kind, op));
                    self.ops.len() - 1
                }
            };
        }
        &mut self.ops[self.last]
    }

    /// A call of `kind`/`name` (io_uring requests: `kind` "io_uring") that
    /// asked for `size` bytes (None: not a data transfer) and took `dur`.
    pub fn add(&mut self, kind: &'static str, op: &'static str, size: Option<u64>, dur: u64) {
        let o = self.entry(kind, op);
        o.count += 1;
        if let Some(s) = size {
            o.sizes[pow2_bin(s)] += 1;
        }
        o.latency.add(dur);
    }

    /// The calls an [`IoSummary`](mltrace_log::IoSummary) sums: their
    /// sizes are not known one by one (the mean size stands for them), their
    /// latencies by power of two.
    pub fn add_summary(&mut self, op: &'static str, r: &mltrace_log::IoSummary, sized: bool) {
        let o = self.entry("", op);
        o.count += r.calls;
        if sized && r.calls > 0 {
            o.sizes[pow2_bin(r.bytes / r.calls)] += r.calls;
        }
        for (slot, n) in r.hist().into_iter().enumerate() {
            o.latency.add_n(crate::acc::summary::slot_value(slot), u64::from(n));
        }
    }
}

/// The same name: the same literal (one address) without comparing bytes.
fn same(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b) || a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_and_names() {
        assert_eq!((pow2_bin(0), pow2_bin(1), pow2_bin(4096), pow2_bin(4097)), (0, 1, 13, 13));
        assert_eq!(pow2_low(13), 4096);
        let mut c = Calls::default();
        c.add("", "pread64", Some(4096), 10);
        c.add("", "pread64", Some(4096), 20);
        c.add("io_uring", "READ", Some(1 << 20), 5);
        c.add("", "openat", None, 7);
        let names: Vec<&str> = c.ops.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["pread64", "io_uring READ", "openat"]);
        assert_eq!((c.ops[0].count, c.ops[0].sizes[13], c.ops[0].sized()), (2, 2, 2));
        assert_eq!((c.ops[2].count, c.ops[2].sized()), (1, 0));
        assert_eq!(c.ops[1].latency.max(), 5);
    }
}
