//! Network counters: per interface bytes and packets from /proc/net/dev,
//! and InfiniBand/RoCE port counters from /sys/class/infiniband, as rates.
//!
//! /proc/net/dev is the recorder's network namespace's view (the host's,
//! for a recorder run as root on the node). RDMA traffic bypasses the
//! kernel's network stack, so an HCA's bytes appear only in its port
//! counters, never in /proc/net/dev.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mltrace_log::CounterUnit;

use crate::{Sample, SampleSink};

/// The counters of every group this sampler writes, in this order.
pub const NAMES: [&str; 4] = ["rx", "tx", "rx packets", "tx packets"];
const UNITS: [CounterUnit; 4] =
    [CounterUnit::BytesPerSec, CounterUnit::BytesPerSec, CounterUnit::PerSec, CounterUnit::PerSec];

/// Totals since boot: rx bytes, tx bytes, rx packets, tx packets.
pub type Totals = [u64; 4];

/// One interface line of /proc/net/dev: `  eth0: rxbytes rxpackets ... (8
/// receive columns) txbytes txpackets ...`.
pub fn parse_net_dev_line(l: &str) -> Option<(&str, Totals)> {
    let (name, rest) = l.split_once(':')?;
    let f: Vec<u64> = rest.split_whitespace().map(|v| v.parse().ok()).collect::<Option<_>>()?;
    if f.len() < 10 {
        return None;
    }
    Some((name.trim(), [f[0], f[8], f[1], f[9]]))
}

/// `Network <interface>`: the group of an interface's counters.
pub fn interface_group(name: &str) -> String {
    format!("Network {name}")
}

/// `InfiniBand <device> port <n>`: the group of an RDMA port's counters.
pub fn port_group(dev: &str, port: &str) -> String {
    format!("InfiniBand {dev} port {port}")
}

/// Every port under `root` (`/sys/class/infiniband`): (device, port, its
/// counters directory).
fn ib_ports(root: &Path) -> Vec<(String, String, PathBuf)> {
    let mut out = Vec::new();
    let Ok(devs) = std::fs::read_dir(root) else { return out };
    for d in devs.flatten() {
        let Ok(ports) = std::fs::read_dir(d.path().join("ports")) else { continue };
        for p in ports.flatten() {
            let counters = p.path().join("counters");
            if counters.is_dir() {
                out.push((
                    d.file_name().to_string_lossy().into_owned(),
                    p.file_name().to_string_lossy().into_owned(),
                    counters,
                ));
            }
        }
    }
    out.sort();
    out
}

/// A port's totals, in bytes and packets: `port_*_data` count 4-byte words
/// (the IBA's PortXmitData/PortRcvData are octets divided by 4).
pub fn read_port(counters: &Path) -> Option<Totals> {
    let r = |n: &str| crate::read_text(counters.join(n)).ok()?.trim().parse::<u64>().ok();
    Some([
        r("port_rcv_data")?.saturating_mul(4),
        r("port_xmit_data")?.saturating_mul(4),
        r("port_rcv_packets").unwrap_or(0),
        r("port_xmit_packets").unwrap_or(0),
    ])
}

pub struct NetworkSampler {
    net_dev: PathBuf,
    /// Interface name -> its group.
    groups: HashMap<String, Arc<str>>,
    /// Ports found at the start (HCAs do not come and go during a job).
    ports: Vec<(Arc<str>, PathBuf)>,
    prev: HashMap<Arc<str>, (u64, Totals)>,
    names: [Arc<str>; 4],
}

impl NetworkSampler {
    pub fn new() -> Self {
        Self::with_paths("/proc/net/dev", "/sys/class/infiniband")
    }

    /// Reading other files than the machine's (for tests).
    pub fn with_paths(net_dev: impl Into<PathBuf>, ib_root: impl Into<PathBuf>) -> Self {
        let ib_root = ib_root.into();
        let ports = ib_ports(&ib_root).into_iter().map(|(d, p, c)| (Arc::from(port_group(&d, &p)), c)).collect();
        NetworkSampler {
            net_dev: net_dev.into(),
            groups: HashMap::new(),
            ports,
            prev: HashMap::new(),
            names: NAMES.map(Arc::from),
        }
    }

    pub fn sample(&mut self, ts: u64, out: &mut SampleSink) {
        let mut now: Vec<(Arc<str>, Totals)> = Vec::new();
        if let Ok(text) = crate::read_text(&self.net_dev) {
            // Two header lines, then one line per interface.
            for l in text.lines().skip(2) {
                let Some((name, t)) = parse_net_dev_line(l) else { continue };
                let group = match self.groups.get(name) {
                    Some(g) => g.clone(),
                    None => {
                        let g: Arc<str> = Arc::from(interface_group(name));
                        self.groups.insert(name.to_string(), g.clone());
                        g
                    }
                };
                now.push((group, t));
            }
        }
        for (group, dir) in &self.ports {
            if let Some(t) = read_port(dir) {
                now.push((group.clone(), t));
            }
        }
        for (group, t) in now {
            if let Some((t0, was)) = self.prev.get(&group) {
                let dt = ts.saturating_sub(*t0) as f64 / 1e9;
                if dt > 0.0 {
                    for i in 0..4 {
                        // A counter that went back (an interface re-created) reads as 0.
                        let v = t[i].saturating_sub(was[i]) as f64 / dt;
                        out.push(Sample {
                            ts,
                            group: group.clone(),
                            name: self.names[i].clone(),
                            unit: UNITS[i],
                            pid: 0,
                            value: v,
                        });
                    }
                }
            }
            self.prev.insert(group, (ts, t));
        }
    }
}

impl Default for NetworkSampler {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NET_DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 5000      50    0    0    0     0          0         0     7000      70    0    0    0     0       0          0
";

    #[test]
    fn parses_proc_net_dev() {
        let l: Vec<_> = NET_DEV.lines().skip(2).filter_map(parse_net_dev_line).collect();
        assert_eq!(l, vec![("lo", [1000, 1000, 10, 10]), ("eth0", [5000, 7000, 50, 70])]);
        assert!(parse_net_dev_line("garbage").is_none());
        assert!(parse_net_dev_line("x: 1 2 3").is_none());
    }

    #[test]
    fn rates_from_interfaces_and_ports() {
        let d = tempfile::tempdir().unwrap();
        let net_dev = d.path().join("dev");
        std::fs::write(&net_dev, NET_DEV).unwrap();
        let c = d.path().join("ib/mlx5_0/ports/1/counters");
        std::fs::create_dir_all(&c).unwrap();
        let set = |rcv: u64, xmit: u64| {
            for (n, v) in
                [("port_rcv_data", rcv), ("port_xmit_data", xmit), ("port_rcv_packets", 3), ("port_xmit_packets", 4)]
            {
                std::fs::write(c.join(n), format!("{v}\n")).unwrap();
            }
        };
        set(100, 200);
        let mut s = NetworkSampler::with_paths(&net_dev, d.path().join("ib"));
        let mut out = Vec::new();
        s.sample(1_000_000_000, &mut out);
        assert!(out.is_empty(), "the first reading has no rate: {out:?}");
        std::fs::write(&net_dev, NET_DEV.replace("5000      50", "9000      60")).unwrap();
        set(100 + 250, 200 + 500);
        s.sample(1_500_000_000, &mut out);
        let get = |g: &str, n: &str| out.iter().find(|x| &*x.group == g && &*x.name == n).map(|x| x.value);
        assert_eq!(get("Network eth0", "rx"), Some(8000.0));
        assert_eq!(get("Network eth0", "rx packets"), Some(20.0));
        assert_eq!(get("Network eth0", "tx"), Some(0.0));
        assert_eq!(get("Network lo", "tx"), Some(0.0));
        // 250 words in 0.5 s: 2000 B/s.
        assert_eq!(get("InfiniBand mlx5_0 port 1", "rx"), Some(2000.0));
        assert_eq!(get("InfiniBand mlx5_0 port 1", "tx"), Some(4000.0));
        assert_eq!(get("InfiniBand mlx5_0 port 1", "rx packets"), Some(0.0));
        assert_eq!(out.len(), 12);
    }
}
