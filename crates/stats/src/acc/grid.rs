//! Time bins over a run, for the trainer's [`Timeline`] and the ranks'
//! [`RankWaits`]: a fixed number over a known span (times outside go to
//! the first or last bin), or, for a run still being recorded, bins of a
//! given width added as time goes on and merged in pairs past a cap, so
//! memory stays bounded however long the run.
//!
//! [`Timeline`]: crate::acc::timeline::Timeline
//! [`RankWaits`]: crate::acc::rank_waits::RankWaits

#[derive(Clone, Copy, Debug)]
pub struct Grid {
    pub lo: u64,
    pub width: u64,
    /// Bins there are.
    pub n: usize,
    /// Growing: at most this many bins before pairs merge.
    cap: Option<usize>,
}

impl Grid {
    /// At most `bins` bins over `[lo, hi]`.
    pub fn over(lo: u64, hi: u64, bins: usize) -> Grid {
        let len = hi.saturating_sub(lo).saturating_add(1);
        let width = len.div_ceil(bins as u64).max(1);
        let n = (len.div_ceil(width) as usize).clamp(1, bins);
        Grid { lo, width, n, cap: None }
    }

    /// Bins of `width` ns from `lo` on, at most `cap` of them.
    pub fn growing(lo: u64, width: u64, cap: usize) -> Grid {
        Grid { lo, width: width.max(1), n: 1, cap: Some(cap.max(2)) }
    }

    pub fn index(&self, ts: u64) -> usize {
        ((ts.saturating_sub(self.lo) / self.width) as usize).min(self.n - 1)
    }

    pub fn bin_start(&self, i: usize) -> u64 {
        self.lo + i as u64 * self.width
    }

    /// A growing grid reaches `ts`: how many times its holders must merge
    /// their bins in pairs ([`merge_pairs`]) before growing to `n`.
    #[must_use]
    pub fn reach(&mut self, ts: u64) -> u32 {
        let Some(cap) = self.cap else { return 0 };
        let need = |g: &Grid| (ts.saturating_sub(g.lo) / g.width) as usize + 1;
        let mut merges = 0;
        while need(self) > cap {
            self.width *= 2;
            self.n = self.n.div_ceil(2);
            merges += 1;
        }
        self.n = self.n.max(need(self));
        merges
    }

    /// The bins `[from, to)` covers, with the ns it covers of each.
    pub fn split(&self, from: u64, to: u64) -> impl Iterator<Item = (usize, u64)> + '_ {
        let (a, b) = if to > from { (self.index(from), self.index(to - 1)) } else { (1, 0) };
        (a..=b).map(move |i| {
            let s = if i == a { from } else { self.bin_start(i) };
            let e = if i == b { to } else { self.bin_start(i + 1) };
            (i, e.saturating_sub(s))
        })
    }

    /// The bins a window `[from, to)` cuts, with the share of each inside it.
    pub fn cuts(&self, from: u64, to: u64) -> impl Iterator<Item = (usize, f64)> + '_ {
        let (a, b) = if to > from { (self.index(from), self.index(to - 1)) } else { (1, 0) };
        (a..=b).map(move |i| {
            let bs = self.bin_start(i);
            let cut = to.min(bs + self.width).saturating_sub(from.max(bs));
            (i, cut as f64 / self.width as f64)
        })
    }
}

/// Merges `bins` in pairs `times` times (`add` adds the second to the first).
pub fn merge_pairs<T: Copy>(bins: &mut Vec<T>, times: u32, add: impl Fn(&mut T, &T)) {
    for _ in 0..times {
        *bins = bins
            .chunks(2)
            .map(|c| {
                let mut m = c[0];
                if let Some(o) = c.get(1) {
                    add(&mut m, o);
                }
                m
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_growing_grid_doubles_its_width_past_its_cap() {
        let mut g = Grid::growing(100, 10, 4);
        assert_eq!((g.reach(135), g.n, g.width), (0, 4, 10));
        assert_eq!((g.reach(145), g.n, g.width), (1, 3, 20));
        let mut v = vec![1, 2, 3, 4];
        merge_pairs(&mut v, 1, |a, b| *a += b);
        assert_eq!(v, [3, 7]);
        let split: Vec<_> = g.split(105, 150).collect();
        assert_eq!(split, [(0, 15), (1, 20), (2, 10)]);
        let cuts: Vec<_> = g.cuts(110, 130).collect();
        assert_eq!(cuts, [(0, 0.5), (1, 0.5)]);
        assert_eq!(g.split(7, 7).count(), 0);
    }
}
