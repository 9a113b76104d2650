//! Per-disk counters computed from block records: requests in flight, and
//! read/write throughput and mean latency (queue + device) of the
//! requests completed, in fixed bins.
//!
//! Records arrive in completion order, but a request counts as in flight
//! from its start, which lies in the past. Changes are therefore held in a
//! reorder buffer until no record can still bring an earlier one: until the
//! latest completion seen minus a horizon longer than any latency seen so
//! far. A request slower than that arrives late; it is counted and applied
//! at once (its counter may then be off until it ends) and reported.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// Throughput bin width.
pub const BIN_NS: u64 = 100_000_000;
/// The reorder horizon is at least this, and twice the slowest request seen.
const MIN_HORIZON_NS: u64 = 1_000_000_000;

/// One counter value to emit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sample {
    InFlight {
        ts: u64,
        value: i64,
    },
    ReadRate {
        ts: u64,
        bytes_per_s: f64,
    },
    WriteRate {
        ts: u64,
        bytes_per_s: f64,
    },
    /// Mean latency of the requests completed in the bin (0: none).
    Latency {
        ts: u64,
        mean_ns: f64,
    },
}

/// What completed in one bin: bytes read, written, latency sum, requests.
#[derive(Clone, Copy, Default)]
struct Bin {
    read: u64,
    write: u64,
    latency: u64,
    n: u64,
}

#[derive(Default)]
pub struct DiskCounters {
    changes: BinaryHeap<Reverse<(u64, i64)>>,
    bins: BTreeMap<u64, Bin>,
    in_flight: i64,
    /// Next bin whose rates have not been emitted.
    next_bin: Option<u64>,
    last_rates: (f64, f64, f64),
    latest_end: u64,
    slowest: u64,
    watermark: u64,
    pub late: u64,
}

impl DiskCounters {
    /// Adds one request (or partial completion): `read`/`write` say which
    /// throughput its bytes count towards, by completion time.
    pub fn add(&mut self, start: u64, end: u64, bytes: u64, read: bool, write: bool, out: &mut Vec<Sample>) {
        if start < self.watermark {
            self.late += 1;
        }
        self.changes.push(Reverse((start, 1)));
        self.changes.push(Reverse((end, -1)));
        let bin = end / BIN_NS * BIN_NS;
        let e = self.bins.entry(bin).or_default();
        if read {
            e.read += bytes;
        }
        if write {
            e.write += bytes;
        }
        e.latency += end.saturating_sub(start);
        e.n += 1;
        self.latest_end = self.latest_end.max(end);
        self.slowest = self.slowest.max(end.saturating_sub(start));
        let horizon = MIN_HORIZON_NS.max(2 * self.slowest);
        let wm = self.latest_end.saturating_sub(horizon);
        if wm > self.watermark {
            self.watermark = wm;
        }
        self.flush(self.watermark, out);
    }

    /// Requests in flight after the changes emitted so far.
    pub fn in_flight(&self) -> i64 {
        self.in_flight
    }

    /// Emits everything before `upto` now, whatever may still come (a
    /// file of a big run ends there): later changes before it are late.
    pub fn flush_until(&mut self, upto: u64, out: &mut Vec<Sample>) {
        self.watermark = self.watermark.max(upto);
        self.flush(upto, out);
    }

    /// Emits everything before `upto` (`u64::MAX`: everything).
    pub fn flush(&mut self, upto: u64, out: &mut Vec<Sample>) {
        while let Some(&Reverse((ts, _))) = self.changes.peek() {
            if ts >= upto {
                break;
            }
            // Coalesce all changes at the same instant into one value.
            while let Some(&Reverse((t, d))) = self.changes.peek() {
                if t != ts {
                    break;
                }
                self.in_flight += d;
                self.changes.pop();
            }
            out.push(Sample::InFlight { ts, value: self.in_flight });
        }
        while let Some((&bin, _)) = self.bins.iter().next() {
            let start = self.next_bin.map_or(bin, |n| n.min(bin));
            if start.saturating_add(BIN_NS) > upto && upto != u64::MAX {
                break;
            }
            // Bins without completions are idle: rate 0, emitted only when
            // the rate changes.
            let b = if start == bin { self.bins.remove(&bin).unwrap() } else { Bin::default() };
            let secs = BIN_NS as f64 / 1e9;
            let mean = if b.n == 0 { 0.0 } else { b.latency as f64 / b.n as f64 };
            let rates = (b.read as f64 / secs, b.write as f64 / secs, mean);
            if rates.0 != self.last_rates.0 || self.next_bin.is_none() {
                out.push(Sample::ReadRate { ts: start, bytes_per_s: rates.0 });
            }
            if rates.1 != self.last_rates.1 || self.next_bin.is_none() {
                out.push(Sample::WriteRate { ts: start, bytes_per_s: rates.1 });
            }
            if rates.2 != self.last_rates.2 || self.next_bin.is_none() {
                out.push(Sample::Latency { ts: start, mean_ns: rates.2 });
            }
            self.last_rates = rates;
            self.next_bin = Some(start + BIN_NS);
        }
    }

    /// At the end: everything, then rates back to zero after the last bin.
    pub fn finish(&mut self, out: &mut Vec<Sample>) {
        self.flush(u64::MAX, out);
        if let Some(n) = self.next_bin {
            if self.last_rates.0 != 0.0 {
                out.push(Sample::ReadRate { ts: n, bytes_per_s: 0.0 });
            }
            if self.last_rates.1 != 0.0 {
                out.push(Sample::WriteRate { ts: n, bytes_per_s: 0.0 });
            }
            if self.last_rates.2 != 0.0 {
                out.push(Sample::Latency { ts: n, mean_ns: 0.0 });
            }
            self.last_rates = (0.0, 0.0, 0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_is_exact_despite_completion_order() {
        let mut c = DiskCounters::default();
        let mut out = Vec::new();
        // A long request [0, 10ms] completes after a short one inside it.
        c.add(2_000_000, 3_000_000, 4096, true, false, &mut out);
        c.add(0, 10_000_000, 4096, true, false, &mut out);
        c.add(10_000_000, 12_000_000, 8192, false, true, &mut out);
        c.finish(&mut out);
        let inflight: Vec<(u64, i64)> = out
            .iter()
            .filter_map(|s| match *s {
                Sample::InFlight { ts, value } => Some((ts, value)),
                _ => None,
            })
            .collect();
        // At 10ms one ends and one starts: coalesced into a single value.
        assert_eq!(inflight, vec![(0, 1), (2_000_000, 2), (3_000_000, 1), (10_000_000, 1), (12_000_000, 0)]);
        assert_eq!(c.late, 0);
        let lat: Vec<&Sample> = out.iter().filter(|s| matches!(s, Sample::Latency { .. })).collect();
        // Three requests of 1, 10 and 2 ms completed in the first bin.
        assert_eq!(
            lat,
            vec![
                &Sample::Latency { ts: 0, mean_ns: 13_000_000.0 / 3.0 },
                &Sample::Latency { ts: BIN_NS, mean_ns: 0.0 }
            ]
        );
        let rates: Vec<Sample> =
            out.iter().filter(|s| !matches!(s, Sample::InFlight { .. } | Sample::Latency { .. })).copied().collect();
        assert_eq!(
            rates,
            vec![
                Sample::ReadRate { ts: 0, bytes_per_s: 81920.0 },
                Sample::WriteRate { ts: 0, bytes_per_s: 81920.0 },
                Sample::ReadRate { ts: BIN_NS, bytes_per_s: 0.0 },
                Sample::WriteRate { ts: BIN_NS, bytes_per_s: 0.0 },
            ]
        );
    }

    #[test]
    fn idle_bins_are_zero_and_not_repeated() {
        let mut c = DiskCounters::default();
        let mut out = Vec::new();
        c.add(0, 50_000_000, 1000, true, false, &mut out);
        c.add(5 * BIN_NS, 5 * BIN_NS + 1, 1000, true, false, &mut out);
        c.finish(&mut out);
        let reads: Vec<(u64, f64)> = out
            .iter()
            .filter_map(|s| match *s {
                Sample::ReadRate { ts, bytes_per_s } => Some((ts, bytes_per_s)),
                _ => None,
            })
            .collect();
        assert_eq!(reads, vec![(0, 10_000.0), (BIN_NS, 0.0), (5 * BIN_NS, 10_000.0), (6 * BIN_NS, 0.0)]);
    }

    #[test]
    fn a_request_slower_than_the_horizon_is_late() {
        let mut c = DiskCounters::default();
        let mut out = Vec::new();
        for i in 0..100u64 {
            c.add(i * 100_000_000, i * 100_000_000 + 1000, 1, true, false, &mut out);
        }
        c.add(1_000_000, 9_950_000_000, 1, true, false, &mut out);
        assert_eq!(c.late, 1);
    }
}
