//! How much of the GPUs' idle time fell while the trainer waited for
//! data. A GPU is idle over a sample's period when its utilisation (any
//! kernel running: NVML's share of the period in which a kernel ran) is below
//! [`IDLE_BELOW`]; the period is from the GPU's previous sample, at most
//! [`MAX_PERIOD`]. Idle periods and data waits reach the log in about time
//! order but from different sources, so each pair is matched when its
//! second half arrives, and only the last [`HORIZON`] of both is kept
//! (plus the idle periods since the trainer's current sleep began).

use std::collections::VecDeque;

use crate::acc::timeline::{Field, Timeline};

/// Utilisation (any kernel running, %) below which a GPU counts as idle.
pub const IDLE_BELOW: f64 = 10.0;
/// The longest period one sample describes (NVML averages over 1/6 to 1 s).
pub const MAX_PERIOD: u64 = 1_000_000_000;
/// How far behind the newest record an interval may still be matched.
const HORIZON: u64 = 30_000_000_000;

#[derive(Default)]
pub struct GpuIdle {
    /// Per GPU (by its counter group): the time of its last sample.
    last: Vec<(String, u64)>,
    idle: VecDeque<(u64, u64)>,
    waits: VecDeque<(u64, u64)>,
    newest: u64,
    /// Summed over GPUs, ns.
    pub sampled: u64,
    pub idle_ns: u64,
    pub idle_in_data_wait: u64,
}

fn overlap(a: (u64, u64), b: (u64, u64)) -> Option<(u64, u64)> {
    let (s, e) = (a.0.max(b.0), a.1.min(b.1));
    (e > s).then_some((s, e))
}

impl GpuIdle {
    /// Whether any GPU was sampled.
    pub fn has_gpus(&self) -> bool {
        !self.last.is_empty()
    }

    /// A sample of `group`'s utilisation (any kernel running) at `ts`.
    pub fn sample(&mut self, group: &str, ts: u64, sm: f64, tl: Option<&mut Timeline>) {
        let prev = match self.last.iter_mut().find(|(g, _)| g == group) {
            Some((_, t)) => std::mem::replace(t, ts),
            None => {
                self.last.push((group.to_string(), ts));
                return;
            }
        };
        let from = prev.max(ts.saturating_sub(MAX_PERIOD));
        if ts <= from {
            return;
        }
        let mut tl = tl;
        self.sampled += ts - from;
        if let Some(t) = tl.as_deref_mut() {
            t.add(Field::GpuSampled, from, ts);
        }
        if sm >= IDLE_BELOW {
            return;
        }
        let iv = (from, ts);
        self.idle_ns += ts - from;
        if let Some(t) = tl.as_deref_mut() {
            t.add(Field::GpuIdle, from, ts);
        }
        for w in &self.waits {
            if let Some((s, e)) = overlap(iv, *w) {
                self.idle_in_data_wait += e - s;
                if let Some(t) = tl.as_deref_mut() {
                    t.add(Field::GpuIdleDataWait, s, e);
                }
            }
        }
        self.idle.push_back(iv);
        self.newest = self.newest.max(ts);
    }

    /// A data wait of the trainer's main thread, `[from, to)`.
    pub fn data_wait(&mut self, from: u64, to: u64, tl: Option<&mut Timeline>) {
        let iv = (from, to);
        let mut tl = tl;
        for i in &self.idle {
            if let Some((s, e)) = overlap(iv, *i) {
                self.idle_in_data_wait += e - s;
                if let Some(t) = tl.as_deref_mut() {
                    t.add(Field::GpuIdleDataWait, s, e);
                }
            }
        }
        self.waits.push_back(iv);
        self.newest = self.newest.max(to);
    }

    /// Forgets what can no longer be matched; `asleep_since`: the start of
    /// the trainer's current sleep (a data wait not yet ended), if any.
    pub fn prune(&mut self, asleep_since: Option<u64>) {
        let cut = self.newest.saturating_sub(HORIZON);
        while self.waits.front().is_some_and(|w| w.1 < cut) {
            self.waits.pop_front();
        }
        let keep = asleep_since.map_or(cut, |s| s.min(cut));
        while self.idle.front().is_some_and(|i| i.1 < keep) {
            self.idle.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_matched_whichever_comes_first() {
        let mut g = GpuIdle::default();
        g.sample("GPU 0", 0, 50.0, None);
        g.sample("GPU 0", 100, 5.0, None); // idle 0..100
        g.data_wait(50, 150, None); // 50 ns of it
        g.sample("GPU 0", 200, 0.0, None); // idle 100..200: 50 more
        g.sample("GPU 0", 300, 90.0, None);
        assert_eq!((g.sampled, g.idle_ns, g.idle_in_data_wait), (300, 200, 100));
        // A second GPU, busy: sampled, never idle.
        g.sample("GPU 1", 0, 12.0, None);
        g.sample("GPU 1", 300, 12.0, None);
        assert_eq!((g.sampled, g.idle_ns), (600, 200));
    }

    #[test]
    fn a_gap_in_samples_is_not_one_long_period() {
        let mut g = GpuIdle::default();
        g.sample("GPU 0", 0, 0.0, None);
        g.sample("GPU 0", 5 * MAX_PERIOD, 0.0, None);
        assert_eq!(g.idle_ns, MAX_PERIOD);
    }

    #[test]
    fn pruning_keeps_the_current_sleep() {
        let mut g = GpuIdle::default();
        g.sample("GPU 0", 0, 0.0, None);
        g.sample("GPU 0", MAX_PERIOD, 0.0, None);
        g.newest = 40 * MAX_PERIOD;
        g.prune(Some(0));
        assert_eq!(g.idle.len(), 1);
        g.prune(None);
        assert!(g.idle.is_empty());
    }
}
