//! Per-process byte rates computed from records, in fixed bins: bytes
//! read by calls, and bytes read from storage for the process (page-cache
//! insertions). Side by side they show a cache that serves the reads, or
//! a job waiting on the disk.
//!
//! Records come in about the order they happened (syscalls by their end,
//! insertions when they happen), so a bin is written once no record can
//! still fall into it: a horizon behind the latest time seen. A record
//! older than that counts in the oldest open bin, and is counted as late.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use crate::disk_counters::BIN_NS;
use crate::procs::ProcIdx;

const HORIZON_NS: u64 = 1_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rate {
    /// Bytes returned by read-family calls.
    Read,
    /// Bytes brought into the page cache for the process, outside writes.
    Storage,
}

impl Rate {
    pub fn name(self) -> &'static str {
        match self {
            Rate::Read => "read",
            Rate::Storage => "read from storage",
        }
    }
}

/// One counter value to write.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateSample {
    pub idx: ProcIdx,
    pub rate: Rate,
    pub ts: u64,
    pub bytes_per_s: f64,
}

#[derive(Default)]
struct Series {
    /// The bin records are coming into, kept out of `bins` so that a run
    /// of records in one bin (the usual case) costs no tree lookup each.
    cur: (u64, u64),
    bins: BTreeMap<u64, u64>,
    /// The bin after the last one written.
    next_bin: Option<u64>,
    last: f64,
}

impl Series {
    /// Writes the bins that end by `upto`; an idle stretch is one 0.
    fn add(&mut self, bin: u64, bytes: u64) {
        if self.cur.0 != bin {
            self.settle();
            self.cur.0 = bin;
        }
        self.cur.1 += bytes;
    }

    /// Moves the current bin's bytes into `bins`.
    fn settle(&mut self) {
        if self.cur.1 > 0 {
            *self.bins.entry(self.cur.0).or_default() += self.cur.1;
            self.cur.1 = 0;
        }
    }

    fn flush(&mut self, idx: ProcIdx, rate: Rate, upto: u64, out: &mut Vec<RateSample>) {
        self.settle();
        loop {
            let first = self.bins.keys().next().copied();
            let start = match (self.next_bin, first) {
                (Some(n), Some(b)) => n.min(b),
                (Some(n), None) => n,
                (None, Some(b)) => b,
                (None, None) => break,
            };
            if start.saturating_add(BIN_NS) > upto {
                break;
            }
            let bytes = if Some(start) == first { self.bins.remove(&start).unwrap_or(0) } else { 0 };
            let v = bytes as f64 / (BIN_NS as f64 / 1e9);
            if v != self.last || self.next_bin.is_none() {
                out.push(RateSample { idx, rate, ts: start, bytes_per_s: v });
            }
            self.last = v;
            // After a bin with bytes, the next idle one writes the 0.
            self.next_bin = if v == 0.0 { None } else { Some(start + BIN_NS) };
        }
    }

    fn idle(&self) -> bool {
        self.cur.1 == 0 && self.bins.is_empty() && self.next_bin.is_none()
    }
}

#[derive(Default)]
pub struct ProcRates {
    series: HashMap<(ProcIdx, Rate), Series>,
    latest: u64,
    /// Bins before this are written.
    watermark: u64,
    pub late: u64,
}

impl ProcRates {
    /// `bytes` for process `idx` at `ts` (0 bytes: nothing to count).
    pub fn add(&mut self, idx: ProcIdx, rate: Rate, ts: u64, bytes: u64, out: &mut Vec<RateSample>) {
        if bytes == 0 {
            return;
        }
        let mut bin = ts / BIN_NS * BIN_NS;
        if bin < self.watermark {
            self.late += 1;
            bin = self.watermark;
        }
        self.series.entry((idx, rate)).or_default().add(bin, bytes);
        if ts > self.latest {
            self.latest = ts;
            let wm = ts.saturating_sub(HORIZON_NS) / BIN_NS * BIN_NS;
            if wm > self.watermark {
                self.flush_until(wm, out);
            }
        }
    }

    /// Writes every bin that ends by `upto`, whatever may still come (a
    /// part of a big run ends there).
    pub fn flush_until(&mut self, upto: u64, out: &mut Vec<RateSample>) {
        self.watermark = self.watermark.max(upto / BIN_NS * BIN_NS);
        for (&(idx, rate), s) in self.series.iter_mut() {
            s.flush(idx, rate, upto, out);
        }
        // Processes long idle (or gone) cost nothing more.
        self.series.retain(|_, s| !s.idle());
    }

    /// At the end of the log: everything, then each rate back to 0.
    pub fn finish(&mut self, out: &mut Vec<RateSample>) {
        // An idle bin follows every busy one, so each rate ends at 0.
        for (&(idx, rate), s) in self.series.iter_mut() {
            s.flush(idx, rate, u64::MAX, out);
        }
        self.series.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(out: &[RateSample], rate: Rate) -> Vec<(u64, f64)> {
        let mut v: Vec<(u64, f64)> =
            out.iter().filter(|s| s.rate == rate).map(|s| (s.ts / BIN_NS, s.bytes_per_s)).collect();
        v.sort_by_key(|x| x.0);
        v
    }

    #[test]
    fn bins_idle_zero_and_end() {
        let mut r = ProcRates::default();
        let mut out = Vec::new();
        // 1 MB in bin 0, 1 MB in bin 1, then idle until bin 30.
        r.add(0, Rate::Read, 10, 1_000_000, &mut out);
        r.add(0, Rate::Read, BIN_NS + 5, 1_000_000, &mut out);
        r.add(0, Rate::Storage, BIN_NS + 6, 500_000, &mut out);
        r.add(0, Rate::Read, 30 * BIN_NS, 2_000_000, &mut out);
        // Bins 0 and 1 were written once the horizon passed them.
        assert_eq!(values(&out, Rate::Read), vec![(0, 1e7), (2, 0.0)]);
        r.finish(&mut out);
        assert_eq!(values(&out, Rate::Read), vec![(0, 1e7), (2, 0.0), (30, 2e7), (31, 0.0)]);
        assert_eq!(values(&out, Rate::Storage), vec![(1, 5e6), (2, 0.0)]);
        assert_eq!(r.late, 0);
    }

    #[test]
    fn a_record_behind_the_horizon_counts_late_in_the_open_bin() {
        let mut r = ProcRates::default();
        let mut out = Vec::new();
        r.add(1, Rate::Read, 50 * BIN_NS, 100, &mut out);
        r.add(1, Rate::Read, 0, 100, &mut out);
        assert_eq!(r.late, 1);
        r.finish(&mut out);
        let total: f64 = values(&out, Rate::Read).iter().map(|v| v.1).sum();
        // Nothing is lost: both records' bytes are in some bin.
        assert_eq!(total * (BIN_NS as f64 / 1e9), 200.0);
    }

    #[test]
    fn idle_processes_are_dropped() {
        let mut r = ProcRates::default();
        let mut out = Vec::new();
        for p in 0..1000 {
            r.add(p, Rate::Read, u64::from(p) * BIN_NS, 1, &mut out);
        }
        // Only the processes within the horizon (and just behind it) are held.
        assert!(r.series.len() < 20, "{}", r.series.len());
    }
}
