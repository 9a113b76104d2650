//! Network traffic from the sampled rate counters (`Network <interface>`,
//! `InfiniBand <device> port <n>`): totals are the rates integrated over
//! the sampling periods, peaks the highest rate sampled.

/// One interface's or RDMA port's traffic over the run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NetStats {
    /// Its host's number (see `mltrace_log::hosts`; 0 for a log of one host).
    pub host: usize,
    /// The counters' group: `Network eth0`, `InfiniBand mlx5_0 port 1`.
    pub group: String,
    /// Bytes and packets: rx, tx, rx packets, tx packets.
    pub totals: [f64; 4],
    /// Highest rate sampled, per second, same order.
    pub peaks: [f64; 4],
    /// When each counter's last sample was taken.
    last: [Option<u64>; 4],
    /// A first sample's rate, waiting for the period the next one shows.
    first: [Option<f64>; 4],
    pub samples: u64,
}

/// Which of the four counters `name` is, in a network group.
fn slot(group: &str, name: &str) -> Option<usize> {
    if !(group.starts_with("Network ") || group.starts_with("InfiniBand ")) {
        return None;
    }
    ["rx", "tx", "rx packets", "tx packets"].iter().position(|n| *n == name)
}

/// Adds a machine counter sample if it is a network one.
pub fn add(all: &mut Vec<NetStats>, host: usize, group: &str, name: &str, ts: u64, value: f64) {
    let Some(i) = slot(group, name) else { return };
    let n = match all.iter().position(|n| n.host == host && n.group == group) {
        Some(p) => &mut all[p],
        None => {
            all.push(NetStats { host, group: group.to_string(), ..Default::default() });
            all.last_mut().unwrap()
        }
    };
    n.peaks[i] = n.peaks[i].max(value);
    if i == 0 {
        n.samples += 1;
    }
    match n.last[i] {
        // A rate holds for the period that ends at its sample.
        Some(t0) => {
            let dt = ts.saturating_sub(t0) as f64 / 1e9;
            // The first sample's period started before the log says: take
            // the next one's, the sampler's schedule being fixed.
            if let Some(v) = n.first[i].take() {
                n.totals[i] += v * dt;
            }
            n.totals[i] += value * dt;
        }
        None => n.first[i] = Some(value),
    }
    n.last[i] = Some(ts);
}

impl NetStats {
    /// `eth0` or `mlx5_0 port 1`.
    pub fn label(&self) -> &str {
        self.group.strip_prefix("Network ").or_else(|| self.group.strip_prefix("InfiniBand ")).unwrap_or(&self.group)
    }

    pub fn kind(&self) -> &'static str {
        if self.group.starts_with("InfiniBand ") {
            "infiniband"
        } else {
            "interface"
        }
    }

    pub fn idle(&self) -> bool {
        self.totals.iter().all(|v| *v < 0.5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrates_rates_over_their_periods() {
        let mut all = Vec::new();
        let s = 1_000_000_000u64;
        // 1000 B/s for the first 0.1 s period, then 3000 and 0.
        for (ts, v) in [(s, 1000.0), (s + s / 10, 3000.0), (s + s / 5, 0.0)] {
            add(&mut all, 0, "Network lo", "rx", ts, v);
        }
        add(&mut all, 0, "CPU", "rx", s, 5.0);
        add(&mut all, 0, "Network lo", "bogus", s, 5.0);
        add(&mut all, 1, "Network lo", "rx", s, 5.0);
        assert_eq!(all.pop().map(|n| (n.host, n.samples)), Some((1, 1)));
        assert_eq!(all.len(), 1);
        assert!((all[0].totals[0] - 400.0).abs() < 1e-6, "{:?}", all[0].totals);
        assert_eq!(all[0].peaks[0], 3000.0);
        assert_eq!((all[0].label(), all[0].kind()), ("lo", "interface"));
        assert!(!all[0].idle());
    }
}
