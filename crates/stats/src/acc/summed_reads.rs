//! A summary's reads by the trainer's loaders, placed in time. A second's
//! sums keep no times of their calls, so their bytes are spread over the
//! part of the second the thread lived: an epoch that ends inside it gets
//! its share, and none goes past the thread's exit or before its start.

use std::collections::HashMap;

use crate::acc::timeline::{Field, Timeline};

/// Threads remembered (started, or exited recently) before forgetting.
const THREADS_MAX: usize = 1 << 16;

#[derive(Default)]
pub struct SummedReads {
    /// A thread's start, from its fork in the run.
    born: HashMap<u32, u64>,
    /// A thread's exit, for sums that come after it.
    ended: HashMap<u32, u64>,
    /// A thread's latest second: held until its exit or a later second
    /// says where it ends.
    pending: HashMap<u32, Vec<(u64, u64, f64)>>,
}

impl SummedReads {
    pub fn fork(&mut self, tid: u32, ts: u64) {
        if self.born.len() >= THREADS_MAX {
            self.born.clear();
        }
        self.ended.remove(&tid);
        self.born.insert(tid, ts);
    }

    /// `n` bytes thread `tid` read in calls that ended in `[from, to)`.
    pub fn add(&mut self, tid: u32, from: u64, to: u64, n: f64, tl: &mut Timeline) {
        let from = self.born.get(&tid).map_or(from, |&b| from.max(b.min(to)));
        if let Some(&end) = self.ended.get(&tid) {
            tl.spread(Field::ReadBytes, from.min(end), to.min(end), n);
            return;
        }
        let p = self.pending.entry(tid).or_default();
        if p.first().is_some_and(|s| s.1 <= from) {
            for (a, b, n) in p.drain(..) {
                tl.spread(Field::ReadBytes, a, b, n);
            }
        }
        p.push((from, to, n));
    }

    pub fn exit(&mut self, tid: u32, ts: u64, tl: Option<&mut Timeline>) {
        self.born.remove(&tid);
        if self.ended.len() >= THREADS_MAX {
            self.ended.clear();
        }
        self.ended.insert(tid, ts);
        let (Some(p), Some(tl)) = (self.pending.remove(&tid), tl) else { return };
        for (a, b, n) in p {
            tl.spread(Field::ReadBytes, a.min(ts), b.min(ts), n);
        }
    }

    /// The rest, once the log is read.
    pub fn finish(&mut self, tl: &mut Timeline) {
        for (_, p) in self.pending.drain() {
            for (a, b, n) in p {
                tl.spread(Field::ReadBytes, a, b, n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_is_cut_to_the_threads_life() {
        let mut tl = Timeline::new(0, 16_383); // 1 ns bins
        let mut s = SummedReads::default();
        s.fork(7, 200);
        // Its first second (0..1000) from its start; its last to its exit,
        // whether the exit comes before the sums or after them.
        s.add(7, 0, 1000, 800.0, &mut tl);
        s.add(7, 1000, 2000, 500.0, &mut tl);
        s.exit(7, 1500, Some(&mut tl));
        s.add(7, 1000, 2000, 500.0, &mut tl);
        s.finish(&mut tl);
        assert_eq!(tl.window(0, 200).read_bytes, 0.0);
        assert_eq!(tl.window(200, 1000).read_bytes, 800.0);
        assert_eq!(tl.window(1000, 1500).read_bytes, 1000.0);
        assert_eq!(tl.window(1500, 3000).read_bytes, 0.0);
        // A thread that does not exit: its seconds whole.
        s.add(8, 3000, 4000, 100.0, &mut tl);
        s.finish(&mut tl);
        assert!((tl.window(3000, 3500).read_bytes - 50.0).abs() < 1e-6);
    }
}
