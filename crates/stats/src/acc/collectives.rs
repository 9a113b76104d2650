//! NCCL calls per process (rank) and operation: calls, bytes and the time
//! spent enqueueing them (the wait for a collective itself shows in the
//! CUDA calls that synchronise).

use std::collections::{BTreeMap, HashMap};

use mltrace_log::Collective;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpTotals {
    pub calls: u64,
    pub bytes: u64,
    pub ns: u64,
    /// The rank in the communicator of the last call that knew it (-1: never).
    pub rank: i32,
    pub nranks: i32,
}

/// By (pid, op name).
#[derive(Default)]
pub struct Collectives(pub BTreeMap<(u32, &'static str), OpTotals>);

impl Collectives {
    pub fn add(&mut self, r: &Collective) {
        if r.op.is_group() {
            return;
        }
        let t = self.0.entry((r.pid, r.op.name())).or_insert(OpTotals { rank: -1, ..Default::default() });
        t.calls += 1;
        t.bytes += r.bytes;
        t.ns += r.dur;
        if r.rank >= 0 {
            (t.rank, t.nranks) = (r.rank, r.nranks);
        }
    }
}

/// Arrivals kept per rank (8 bytes each).
pub const MAX_ARRIVALS: usize = 1 << 20;

/// When each process called its NCCL collectives, in order: the k-th
/// call of every rank is the same collective (NCCL requires it).
#[derive(Default)]
pub struct Arrivals {
    pub by_pid: HashMap<u32, Vec<u64>>,
    /// Calls past [`MAX_ARRIVALS`] of a rank, not kept.
    pub dropped: u64,
}

impl Arrivals {
    pub fn arrive(&mut self, pid: u32, ts: u64) {
        let v = self.by_pid.entry(pid).or_default();
        if v.len() < MAX_ARRIVALS {
            v.push(ts);
        } else {
            self.dropped += 1;
        }
    }
}
