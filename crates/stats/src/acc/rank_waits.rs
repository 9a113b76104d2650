//! Each main thread's data waits over the run, in a fixed number of
//! bins, for a counter per rank in the trace: ranks x [`BINS`] numbers
//! whatever the log's length (512 ranks: 4 MB), where the trainer's own
//! [`Timeline`](crate::acc::timeline::Timeline) keeps every state finely.

use std::collections::HashMap;

use crate::acc::grid::{merge_pairs, Grid};

/// Bins over the log's span (a 1 h run: 3.6 s each; the overview's
/// intervals are about 1.8 s).
pub const BINS: usize = 1000;

pub struct RankWaits {
    grid: Grid,
    /// By pid: ns of data wait of its main thread per bin.
    by_pid: HashMap<u32, Vec<f64>>,
}

/// One process's data wait over the run: from `start`, a share of each
/// `step` ns (0 to 1).
#[derive(Clone, Debug, PartialEq)]
pub struct WaitSeries {
    pub start: u64,
    pub step: u64,
    pub fractions: Vec<f64>,
}

impl RankWaits {
    /// Bins over `[lo, hi]`; times outside go to the first or last bin.
    pub fn new(lo: u64, hi: u64) -> Self {
        RankWaits { grid: Grid::over(lo, hi, BINS), by_pid: HashMap::new() }
    }

    /// Bins of `width` ns from `lo` on, added as later times come, as many
    /// as the trainer's growing [`Timeline`](crate::acc::timeline::Timeline)
    /// keeps (so a rank's windows are as exact as the trainer's).
    pub fn growing(lo: u64, width: u64) -> Self {
        RankWaits { grid: Grid::growing(lo, width, crate::acc::timeline::BINS), by_pid: HashMap::new() }
    }

    fn reach(&mut self, ts: u64) {
        let n = self.grid.n;
        let merges = self.grid.reach(ts);
        if merges > 0 || self.grid.n != n {
            for bins in self.by_pid.values_mut() {
                merge_pairs(bins, merges, |a, b| *a += b);
                bins.resize(self.grid.n, 0.0);
            }
        }
    }

    /// Ns `pid`'s main thread waited for data in `[from, to)`: whole
    /// bins, and the cut share of those at its edges.
    pub fn window(&self, pid: u32, from: u64, to: u64) -> f64 {
        let Some(bins) = self.by_pid.get(&pid) else { return 0.0 };
        self.grid.cuts(from, to).map(|(i, share)| bins[i] * share).sum()
    }

    /// Process `pid`'s main thread waited for data over `[from, to)`.
    pub fn add(&mut self, pid: u32, from: u64, to: u64) {
        if to <= from {
            return;
        }
        self.reach(to - 1);
        let n = self.grid.n;
        let bins = self.by_pid.entry(pid).or_insert_with(|| vec![0.0; n]);
        for (i, ns) in self.grid.split(from, to) {
            bins[i] += ns as f64;
        }
    }

    /// An exec: what the process waited for before was another program's.
    pub fn forget(&mut self, pid: u32) {
        self.by_pid.remove(&pid);
    }

    /// `pid`'s waits as shares of each bin (zeros: it never waited for data).
    pub fn series(&self, pid: u32) -> WaitSeries {
        let g = self.grid;
        let fractions = match self.by_pid.get(&pid) {
            Some(bins) => bins.iter().map(|ns| (ns / g.width as f64).min(1.0)).collect(),
            None => vec![0.0; g.n],
        };
        WaitSeries { start: g.lo, step: g.width, fractions }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_split_across_bins() {
        let mut r = RankWaits::new(0, BINS as u64 * 100 - 1);
        r.add(7, 50, 250);
        r.add(7, 900, 1000);
        let s = r.series(7);
        assert_eq!((s.start, s.step, s.fractions.len()), (0, 100, BINS));
        assert_eq!(&s.fractions[..10], &[0.5, 1.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
        assert_eq!(r.series(8).fractions, vec![0.0; BINS]);
        r.forget(7);
        assert_eq!(r.series(7).fractions, vec![0.0; BINS]);
        // A span shorter than BINS ns: one ns per bin.
        let mut r = RankWaits::new(10, 19);
        r.add(1, 0, 100);
        assert_eq!(r.series(1).fractions, vec![1.0; 10]);
    }

    #[test]
    fn growing_waits_and_windows() {
        let mut r = RankWaits::growing(0, 100);
        r.add(7, 50, 250);
        assert_eq!(r.window(7, 0, 300), 200.0);
        assert_eq!(r.window(7, 100, 200), 100.0);
        assert_eq!(r.window(8, 0, 300), 0.0);
        let far = crate::acc::timeline::BINS as u64 * 100 * 3;
        r.add(7, far - 10, far);
        assert_eq!(r.window(7, 0, u64::MAX), 210.0);
    }
}
