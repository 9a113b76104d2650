//! The trainer's main thread over the run, in a fixed number of time bins,
//! so that the verdict can be given per training phase (epoch) whatever
//! the log's length: memory is [`BINS`] bins, not one entry per event.
//! Epochs are known only when they end (their records come last), hence
//! bins rather than running totals. An interval is split exactly across
//! the bins it covers; a window that cuts a bin takes the cut share of it
//! (so an epoch's figures are exact to within a bin at each edge).

use crate::acc::grid::{merge_pairs, Grid};

/// Bins over the log's span (a 1 h run: 0.22 s each).
pub const BINS: usize = 16_384;

/// Nanoseconds of one bin (or a window) in each state of the trainer's
/// main thread, and of the GPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Span {
    pub cpu: f64,
    pub runnable: f64,
    pub io_wait: f64,
    pub sleep: f64,
    pub other: f64,
    /// Asleep until a worker woke it (within `sleep` + `io_wait`).
    pub data_wait: f64,
    /// Asleep until a collective library's thread woke it (within the
    /// sleeps), and in a sync call with a collective outstanding (taken
    /// out of the states, as `gpu_wait` is).
    pub collective_wait: f64,
    pub collective_call: f64,
    /// Asleep waiting for its Python's GIL (within the sleeps).
    pub gil_wait: f64,
    /// Bytes the trainer's loaders read from files by calls, and of them
    /// brought from storage into the page cache (at the call's end).
    pub read_bytes: f64,
    pub storage_bytes: f64,
    /// Inside a CUDA call that waited for the GPU, and inside its own file
    /// calls: time taken out of the states above, so that `total` counts
    /// it once.
    pub gpu_wait: f64,
    pub own_io: f64,
    /// GPU time sampled, idle, and idle during a data wait (summed over GPUs).
    pub gpu_sampled: f64,
    pub gpu_idle: f64,
    pub gpu_idle_data_wait: f64,
}

impl Span {
    pub fn total(&self) -> f64 {
        self.cpu
            + self.runnable
            + self.io_wait
            + self.sleep
            + self.other
            + self.gpu_wait
            + self.own_io
            + self.collective_call
    }

    fn add_scaled(&mut self, o: &Span, k: f64) {
        self.cpu += o.cpu * k;
        self.runnable += o.runnable * k;
        self.io_wait += o.io_wait * k;
        self.sleep += o.sleep * k;
        self.other += o.other * k;
        self.data_wait += o.data_wait * k;
        self.collective_wait += o.collective_wait * k;
        self.collective_call += o.collective_call * k;
        self.gil_wait += o.gil_wait * k;
        self.read_bytes += o.read_bytes * k;
        self.storage_bytes += o.storage_bytes * k;
        self.gpu_wait += o.gpu_wait * k;
        self.own_io += o.own_io * k;
        self.gpu_sampled += o.gpu_sampled * k;
        self.gpu_idle += o.gpu_idle * k;
        self.gpu_idle_data_wait += o.gpu_idle_data_wait * k;
    }
}

/// Which figure an interval adds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Cpu,
    Runnable,
    IoWait,
    Sleep,
    Other,
    DataWait,
    CollectiveWait,
    CollectiveCall,
    GilWait,
    ReadBytes,
    StorageBytes,
    GpuWait,
    OwnIo,
    GpuSampled,
    GpuIdle,
    GpuIdleDataWait,
}

fn slot(s: &mut Span, f: Field) -> &mut f64 {
    match f {
        Field::Cpu => &mut s.cpu,
        Field::Runnable => &mut s.runnable,
        Field::IoWait => &mut s.io_wait,
        Field::Sleep => &mut s.sleep,
        Field::Other => &mut s.other,
        Field::DataWait => &mut s.data_wait,
        Field::CollectiveWait => &mut s.collective_wait,
        Field::CollectiveCall => &mut s.collective_call,
        Field::GilWait => &mut s.gil_wait,
        Field::ReadBytes => &mut s.read_bytes,
        Field::StorageBytes => &mut s.storage_bytes,
        Field::GpuWait => &mut s.gpu_wait,
        Field::OwnIo => &mut s.own_io,
        Field::GpuSampled => &mut s.gpu_sampled,
        Field::GpuIdle => &mut s.gpu_idle,
        Field::GpuIdleDataWait => &mut s.gpu_idle_data_wait,
    }
}

pub struct Timeline {
    grid: Grid,
    bins: Vec<Span>,
}

impl Timeline {
    /// Bins over `[lo, hi]`; times outside go to the first or last bin.
    pub fn new(lo: u64, hi: u64) -> Self {
        let grid = Grid::over(lo, hi, BINS);
        Timeline { grid, bins: vec![Span::default(); grid.n] }
    }

    /// Bins of `width` ns from `lo` on, added as later times come (a run
    /// being recorded, whose end is not known); past [`BINS`] bins, pairs
    /// are merged (the width doubles), so memory stays bounded however
    /// long the run.
    pub fn growing(lo: u64, width: u64) -> Self {
        Timeline { grid: Grid::growing(lo, width, BINS), bins: vec![Span::default()] }
    }

    /// The bins' width in ns (a growing timeline's doubles as it ages).
    pub fn width(&self) -> u64 {
        self.grid.width
    }

    /// A growing timeline reaches `ts`.
    fn reach(&mut self, ts: u64) {
        let merges = self.grid.reach(ts);
        merge_pairs(&mut self.bins, merges, |a, b| a.add_scaled(b, 1.0));
        self.bins.resize(self.grid.n, Span::default());
    }

    /// Forgets everything added.
    pub fn clear(&mut self) {
        self.bins.fill(Span::default());
    }

    /// Adds `[from, to)` to `field`, split across the bins it covers.
    pub fn add(&mut self, field: Field, from: u64, to: u64) {
        self.add_signed(field, from, to, 1.0);
    }

    /// Adds `amount` (bytes) to `field` at `ts`.
    pub fn add_at(&mut self, field: Field, ts: u64, amount: f64) {
        self.reach(ts);
        let i = self.grid.index(ts);
        *slot(&mut self.bins[i], field) += amount;
    }

    /// Adds `amount` (bytes) to `field` spread evenly over `[from, to)`
    /// (at `from` when that is empty).
    pub fn spread(&mut self, field: Field, from: u64, to: u64, amount: f64) {
        match to > from {
            true => self.add_signed(field, from, to, amount / (to - from) as f64),
            false => self.add_at(field, from, amount),
        }
    }

    /// Takes `[from, to)` out of `field` (time moved to another field).
    pub fn sub(&mut self, field: Field, from: u64, to: u64) {
        self.add_signed(field, from, to, -1.0);
    }

    fn add_signed(&mut self, field: Field, from: u64, to: u64, sign: f64) {
        if to <= from {
            return;
        }
        self.reach(to - 1);
        for (i, ns) in self.grid.split(from, to) {
            *slot(&mut self.bins[i], field) += sign * ns as f64;
        }
    }

    /// The figures of `[from, to)`: whole bins, and the cut share of the
    /// bins at its edges.
    pub fn window(&self, from: u64, to: u64) -> Span {
        let mut out = Span::default();
        for (i, share) in self.grid.cuts(from, to) {
            out.add_scaled(&self.bins[i], share);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_split_exactly_and_windows_prorate() {
        let mut t = Timeline::new(0, BINS as u64 * 10 - 1);
        assert_eq!(t.width(), 10);
        t.add(Field::Cpu, 5, 35);
        t.add(Field::DataWait, 100, 200);
        assert_eq!(t.window(0, 40).cpu, 30.0);
        assert_eq!(t.window(10, 20).cpu, 10.0);
        // Half of bin 0 (which holds 5 ns) is cut: 2.5.
        assert_eq!(t.window(5, 10).cpu, 2.5);
        assert_eq!(t.window(0, 1000).data_wait, 100.0);
        assert_eq!(t.window(150, 1000).data_wait, 50.0);
        assert_eq!(t.window(7, 7), Span::default());
    }

    #[test]
    fn spread_bytes_split_by_time() {
        let mut t = Timeline::new(0, BINS as u64 * 10 - 1);
        // A second's sums (here 0..400) over which two epochs fall.
        t.spread(Field::ReadBytes, 0, 400, 4000.0);
        t.spread(Field::ReadBytes, 500, 500, 7.0);
        assert_eq!(t.window(0, 100).read_bytes, 1000.0);
        assert_eq!(t.window(100, 400).read_bytes, 3000.0);
        assert_eq!(t.window(490, 510).read_bytes, 7.0);
    }

    #[test]
    fn a_growing_timeline_merges_pairs_and_keeps_every_ns() {
        let mut t = Timeline::growing(1000, 10);
        t.add(Field::Cpu, 1000, 1025);
        assert_eq!(t.bins.len(), 3);
        assert_eq!(t.window(1000, 1020).cpu, 20.0);
        // Nothing yet past the last bin.
        assert_eq!(t.window(1030, 5000).cpu, 0.0);
        // Far on: the bins merge (the width doubles) and nothing is lost.
        let far = 1000 + BINS as u64 * 10 * 3;
        t.add(Field::Sleep, far - 40, far);
        assert!(t.bins.len() <= BINS && t.width() == 40);
        assert_eq!(t.window(0, u64::MAX).cpu, 25.0);
        assert_eq!(t.window(0, u64::MAX).sleep, 40.0);
        assert_eq!(t.window(1000, 1040).cpu, 25.0);
    }

    #[test]
    fn tiny_and_odd_spans() {
        let mut t = Timeline::new(100, 100);
        t.add(Field::Sleep, 0, 1000);
        assert_eq!(t.window(0, u64::MAX).sleep, 1000.0);
        let t = Timeline::new(0, u64::MAX);
        assert!(t.bins.len() <= BINS);
    }
}
