//! Per-process utilisation samples (`nvmlDeviceGetProcessUtilization`,
//! what `nvidia-smi pmon` shows), taken so that none is lost.
//!
//! NVML returns the samples newer than a timestamp; the driver holds one
//! per process, renewed at its own times (every 200 ms to 1.8 s with two
//! processes on an H100), so one process's new sample can be older than
//! another's already taken. Asking from the newest timestamp seen lost
//! those: in 6 s at 10 Hz on that H100 the driver had 12 and 23 distinct
//! samples of two processes; that way took 12 and 21, this one all. So
//! each call looks back a while, and each process keeps its own newest.

use std::collections::HashMap;

/// How far back each call asks (µs): longer than any lag seen.
const LOOKBACK_US: u64 = 2_000_000;
/// A process with no sample for this long is forgotten (µs).
const FORGET_US: u64 = 10_000_000;

/// One process's share of a sampling period: its kernels running, memory
/// reads and writes, encoder, decoder (%).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Utilisation {
    pub pid: u32,
    pub values: [f64; 4],
}

/// What a device's per-process samples have given so far.
#[derive(Default)]
pub struct ProcSamples {
    /// Each process's newest sample taken (NVML's µs).
    newest: HashMap<u32, u64>,
    /// The newest of all.
    latest: u64,
}

impl ProcSamples {
    /// The timestamp to ask NVML from.
    pub fn ask_from(&self) -> u64 {
        self.latest.saturating_sub(LOOKBACK_US)
    }

    /// The samples of one call, `(pid, timestamp µs, [sm, mem, enc, dec])`:
    /// per process, the mean of those it had not given yet.
    pub fn take(&mut self, samples: impl IntoIterator<Item = (u32, u64, [u32; 4])>) -> Vec<Utilisation> {
        let mut new: Vec<(u32, [f64; 4], u32, u64)> = Vec::new();
        for (pid, ts, v) in samples {
            if self.newest.get(&pid).is_some_and(|&n| ts <= n) {
                continue;
            }
            let i = match new.iter().position(|e| e.0 == pid) {
                Some(i) => i,
                None => {
                    new.push((pid, [0.0; 4], 0, 0));
                    new.len() - 1
                }
            };
            let e = &mut new[i];
            for (sum, x) in e.1.iter_mut().zip(v) {
                *sum += f64::from(x);
            }
            e.2 += 1;
            e.3 = e.3.max(ts);
        }
        for &(pid, _, _, ts) in &new {
            self.newest.insert(pid, ts);
            self.latest = self.latest.max(ts);
        }
        let latest = self.latest;
        self.newest.retain(|_, &mut n| latest.saturating_sub(n) <= FORGET_US);
        new.into_iter().map(|(pid, sums, n, _)| Utilisation { pid, values: sums.map(|s| s / f64::from(n)) }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_whose_samples_lag_loses_none() {
        let mut p = ProcSamples::default();
        // Process 2's sample for a window is filed after process 1's newer one.
        let got = p.take([(1, 1_000_000, [90, 10, 0, 0]), (2, 900_000, [40, 4, 0, 0])]);
        assert_eq!(got.len(), 2);
        assert_eq!(p.ask_from(), 0);
        let got = p.take([(1, 1_000_000, [90, 10, 0, 0]), (1, 1_100_000, [80, 10, 0, 0]), (2, 950_000, [20, 2, 0, 0])]);
        assert_eq!(
            got,
            [
                Utilisation { pid: 1, values: [80.0, 10.0, 0.0, 0.0] },
                Utilisation { pid: 2, values: [20.0, 2.0, 0.0, 0.0] }
            ]
        );
        // Two new samples of one process in one call: their mean.
        let got = p.take([(2, 960_000, [10, 0, 0, 0]), (2, 970_000, [30, 4, 0, 0])]);
        assert_eq!(got, [Utilisation { pid: 2, values: [20.0, 2.0, 0.0, 0.0] }]);
        // Gone for longer than FORGET_US: forgotten.
        p.take([(1, 1_100_000 + FORGET_US + 1, [1, 1, 0, 0])]);
        assert!(!p.newest.contains_key(&2));
        assert_eq!(p.ask_from(), 1_100_000 + FORGET_US + 1 - LOOKBACK_US);
    }
}
