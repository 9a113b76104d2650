//! CPU time from /proc/stat, as mpstat reports it: the share of each state
//! over an interval, for all CPUs together and for each CPU.

use std::sync::Arc;

use mltrace_log::CounterUnit;

use crate::{Sample, SampleSink};

/// One `cpu` line of /proc/stat, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

/// `None` for the aggregate `cpu` line, `Some(n)` for `cpuN`.
pub fn parse_stat(text: &str) -> Vec<(Option<u32>, CpuTimes)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?;
            let which = match name.strip_prefix("cpu")? {
                "" => None,
                n => Some(n.parse().ok()?),
            };
            let v: Vec<u64> = f.map(|x| x.parse().unwrap_or(0)).collect();
            let g = |i: usize| v.get(i).copied().unwrap_or(0);
            Some((
                which,
                CpuTimes {
                    user: g(0),
                    nice: g(1),
                    system: g(2),
                    idle: g(3),
                    iowait: g(4),
                    irq: g(5),
                    softirq: g(6),
                    steal: g(7),
                    guest: g(8),
                    guest_nice: g(9),
                },
            ))
        })
        .collect()
}

/// mpstat's percentages between two readings: %usr excludes guest time
/// (which the kernel also counts in user), %nice excludes guest_nice.
/// Order: usr, nice, sys, iowait, irq, soft, steal, guest, gnice, idle.
pub fn percentages(a: &CpuTimes, b: &CpuTimes) -> Option<[f64; 10]> {
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
    let (user, nice) = (d(a.user, b.user), d(a.nice, b.nice));
    let (guest, gnice) = (d(a.guest, b.guest), d(a.guest_nice, b.guest_nice));
    let parts = [
        (user - guest).max(0.0),
        (nice - gnice).max(0.0),
        d(a.system, b.system),
        d(a.iowait, b.iowait),
        d(a.irq, b.irq),
        d(a.softirq, b.softirq),
        d(a.steal, b.steal),
        guest,
        gnice,
        d(a.idle, b.idle),
    ];
    let total = user + nice + parts[2..7].iter().sum::<f64>() + parts[9];
    if total <= 0.0 {
        return None;
    }
    Some(parts.map(|p| p * 100.0 / total))
}

pub const NAMES: [&str; 10] = ["usr", "nice", "sys", "iowait", "irq", "soft", "steal", "guest", "gnice", "idle"];

pub struct CpuSampler {
    prev: Vec<(Option<u32>, CpuTimes)>,
    groups: Vec<(Option<u32>, Arc<str>)>,
    names: Vec<Arc<str>>,
}

impl CpuSampler {
    pub fn new() -> Self {
        CpuSampler { prev: Vec::new(), groups: Vec::new(), names: NAMES.iter().map(|n| Arc::from(*n)).collect() }
    }

    fn group(&mut self, which: Option<u32>) -> Arc<str> {
        if let Some((_, g)) = self.groups.iter().find(|(w, _)| *w == which) {
            return g.clone();
        }
        let g: Arc<str> = match which {
            None => Arc::from("CPU"),
            Some(n) => Arc::from(format!("CPU {n}")),
        };
        self.groups.push((which, g.clone()));
        g
    }

    pub fn sample(&mut self, ts: u64, out: &mut SampleSink) {
        let Ok(text) = crate::read_text("/proc/stat") else { return };
        let now = parse_stat(&text);
        for (which, b) in &now {
            let Some((_, a)) = self.prev.iter().find(|(w, _)| w == which) else { continue };
            let Some(p) = percentages(a, b) else { continue };
            let group = self.group(*which);
            for (i, v) in p.iter().enumerate() {
                out.push(Sample {
                    ts,
                    group: group.clone(),
                    name: self.names[i].clone(),
                    unit: CounterUnit::Percent,
                    pid: 0,
                    value: *v,
                });
            }
        }
        self.prev = now;
    }
}

impl Default for CpuSampler {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches_mpstat() {
        let a = parse_stat("cpu  100 10 50 1000 20 5 5 0 30 2\ncpu0 60 5 25 500 10 3 2 0 30 2\nintr 1 2 3\n");
        let b = parse_stat("cpu  200 20 100 1100 40 10 10 0 60 4\ncpu0 110 10 50 550 20 6 4 0 60 4\n");
        assert_eq!(a.len(), 2);
        assert_eq!(a[1].0, Some(0));
        let p = percentages(&a[0].1, &b[0].1).unwrap();
        // deltas: user 100 nice 10 sys 50 idle 100 iowait 20 irq 5 soft 5 steal 0 guest 30 gnice 2
        // total = 100+10+50+20+5+5+0+100 = 290 (guest is inside user)
        let t = 290.0;
        let want = [70.0 / t, 8.0 / t, 50.0 / t, 20.0 / t, 5.0 / t, 5.0 / t, 0.0, 30.0 / t, 2.0 / t, 100.0 / t];
        for (g, w) in p.iter().zip(want) {
            assert!((g - w * 100.0).abs() < 1e-9, "{p:?}");
        }
        // usr + nice + sys + iowait + irq + soft + steal + guest + gnice + idle = 100
        assert!((p.iter().sum::<f64>() - 100.0).abs() < 1e-9);
        assert!(percentages(&a[0].1, &a[0].1).is_none());
    }
}
