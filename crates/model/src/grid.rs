//! Time grids: the overview's intervals and the planner's weight bins,
//! fixed from the log's span before the records are read.

/// `n` equal steps of `step` ns from `start`; times outside fall in the
/// first or last step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    pub start: u64,
    pub step: u64,
    pub n: usize,
}

impl Grid {
    /// About `target` steps over `[start, end]`, each a round length
    /// (1, 2 or 5 times a power of ten, in ms from 1 ms up).
    pub fn nice(start: u64, end: u64, target: usize) -> Grid {
        let span = end.saturating_sub(start).max(1);
        let raw = span.div_ceil(target.max(1) as u64);
        let mut step = 1_000_000u64;
        'outer: loop {
            for m in [1, 2, 5] {
                if step * m >= raw {
                    step *= m;
                    break 'outer;
                }
            }
            step *= 10;
        }
        Grid::with_step(start, end, step)
    }

    /// Exactly `n` steps over `[start, end]`.
    pub fn even(start: u64, end: u64, n: usize) -> Grid {
        let span = end.saturating_sub(start).max(1);
        Grid::with_step(start, end, span.div_ceil(n.max(1) as u64).max(1))
    }

    fn with_step(start: u64, end: u64, step: u64) -> Grid {
        let n = (end.saturating_sub(start) / step + 1) as usize;
        Grid { start, step, n }
    }

    #[inline]
    pub fn index(&self, ts: u64) -> usize {
        ((ts.saturating_sub(self.start) / self.step) as usize).min(self.n - 1)
    }

    pub fn time(&self, i: usize) -> u64 {
        self.start + i as u64 * self.step
    }

    pub fn end(&self) -> u64 {
        self.time(self.n)
    }
}

/// A step length for people: `100 ms`, `2 s`, `5 min`.
pub fn describe_step(ns: u64) -> String {
    let ms = ns / 1_000_000;
    match ms {
        0 => format!("{ns} ns"),
        m if m < 1000 => format!("{m} ms"),
        m if m < 60_000 || m % 60_000 != 0 => format!("{} s", m as f64 / 1000.0),
        m if m < 3_600_000 || m % 3_600_000 != 0 => format!("{} min", m / 60_000),
        m => format!("{} h", m / 3_600_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        let h = 3_600_000_000_000u64;
        let g = Grid::nice(0, 24 * h, 2000);
        assert_eq!(g.step, 50_000_000_000);
        assert!(g.n <= 2000 && g.n > 1000, "{}", g.n);
        assert_eq!(describe_step(g.step), "50 s");
        let g = Grid::nice(5, 5 + 10_000_000_000, 2000);
        assert_eq!(g.step, 5_000_000);
        assert_eq!(g.index(5), 0);
        assert_eq!(g.index(u64::MAX), g.n - 1);
        assert_eq!(g.index(0), 0);
        assert_eq!(describe_step(120_000_000_000), "2 min");
        assert_eq!(describe_step(100_000_000), "100 ms");
    }

    #[test]
    fn even_grid_covers_the_end() {
        let g = Grid::even(100, 1100, 10);
        assert_eq!(g.step, 100);
        assert_eq!(g.index(1100), 10);
        assert_eq!(g.n, 11);
    }
}
