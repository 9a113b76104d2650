//! Each main thread's data waits over the run, in a fixed number of
//! bins, for a counter per rank in the trace: ranks x [`BINS`] numbers
//! whatever the log's length (512 ranks: 4 MB), where the trainer's own
//! [`Timeline`](crate::acc::timeline::Timeline) keeps every state finely.

use std::collections::HashMap;

/// Bins over the log's span (a 1 h run: 3.6 s each; the overview's
/// intervals are about 1.8 s).
pub const BINS: usize = 1000;

pub struct RankWaits {
    lo: u64,
    width: u64,
    n: usize,
    /// By pid: ns of data wait of its main thread per bin.
    by_pid: HashMap<u32, Vec<f64>>,
    /// A run still being recorded: bins added as time goes on, merged in
    /// pairs past [`BINS`] (see [`RankWaits::growing`]).
    growing: bool,
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
        let len = hi.saturating_sub(lo).saturating_add(1);
        let width = len.div_ceil(BINS as u64).max(1);
        let n = (len.div_ceil(width) as usize).clamp(1, BINS);
        RankWaits { lo, width, n, by_pid: HashMap::new(), growing: false }
    }

    /// Bins of `width` ns from `lo` on, added as later times come (as
    /// [`crate::acc::timeline::Timeline::growing`]).
    pub fn growing(lo: u64, width: u64) -> Self {
        RankWaits { lo, width: width.max(1), n: 1, by_pid: HashMap::new(), growing: true }
    }

    fn reach(&mut self, ts: u64) {
        if !self.growing {
            return;
        }
        let mut need = (ts.saturating_sub(self.lo) / self.width) as usize + 1;
        while need > BINS {
            for bins in self.by_pid.values_mut() {
                *bins = bins.chunks(2).map(|c| c.iter().sum()).collect();
            }
            self.width *= 2;
            self.n = self.n.div_ceil(2);
            need = (ts.saturating_sub(self.lo) / self.width) as usize + 1;
        }
        if need > self.n {
            self.n = need;
            for bins in self.by_pid.values_mut() {
                bins.resize(need, 0.0);
            }
        }
    }

    /// Ns `pid`'s main thread waited for data in `[from, to)`: whole
    /// bins, and the cut share of those at its edges.
    pub fn window(&self, pid: u32, from: u64, to: u64) -> f64 {
        let Some(bins) = self.by_pid.get(&pid) else { return 0.0 };
        let to = to.min(self.lo + self.n as u64 * self.width);
        if to <= from {
            return 0.0;
        }
        let (a, b) = (self.index(from), self.index(to - 1));
        (a..=b)
            .map(|i| {
                let bs = self.lo + i as u64 * self.width;
                let cut = to.min(bs + self.width).saturating_sub(from.max(bs));
                bins[i] * cut as f64 / self.width as f64
            })
            .sum()
    }

    fn index(&self, ts: u64) -> usize {
        ((ts.saturating_sub(self.lo) / self.width) as usize).min(self.n - 1)
    }

    /// Process `pid`'s main thread waited for data over `[from, to)`.
    pub fn add(&mut self, pid: u32, from: u64, to: u64) {
        if to <= from {
            return;
        }
        self.reach(to - 1);
        let (a, b) = (self.index(from), self.index(to - 1));
        let (lo, width, n) = (self.lo, self.width, self.n);
        let bins = self.by_pid.entry(pid).or_insert_with(|| vec![0.0; n]);
        for (i, bin) in bins.iter_mut().enumerate().take(b + 1).skip(a) {
            let s = if i == a { from } else { lo + i as u64 * width };
            let e = if i == b { to } else { lo + (i as u64 + 1) * width };
            *bin += e.saturating_sub(s) as f64;
        }
    }

    /// An exec: what the process waited for before was another program's.
    pub fn forget(&mut self, pid: u32) {
        self.by_pid.remove(&pid);
    }

    /// `pid`'s waits as shares of each bin (zeros: it never waited for data).
    pub fn series(&self, pid: u32) -> WaitSeries {
        let w = self.width as f64;
        let fractions = match self.by_pid.get(&pid) {
            Some(bins) => bins.iter().map(|ns| (ns / w).min(1.0)).collect(),
            None => vec![0.0; self.n],
        };
        WaitSeries { start: self.lo, step: self.width, fractions }
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
        let far = BINS as u64 * 100 * 3;
        r.add(7, far - 10, far);
        assert_eq!(r.window(7, 0, u64::MAX), 210.0);
    }
}
