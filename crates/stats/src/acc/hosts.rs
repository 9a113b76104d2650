//! A merged log's hosts: each one's share of the job (`stats` per host).

use mltrace_log::{host_of, local_pid};

use crate::Stats;

/// One host's totals over its processes and interfaces.
#[derive(Clone, Debug, Default)]
pub struct HostTotals {
    pub processes: u64,
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub opens: u64,
    pub rx_bytes: f64,
    pub tx_bytes: f64,
    pub lost: u64,
}

impl Stats {
    /// `nodeB:1234` in a merged log, `1234` otherwise.
    pub fn pid_label(&self, pid: u32) -> String {
        match self.header.hosts.get(host_of(pid)) {
            Some(h) => format!("{}:{}", h.name, local_pid(pid)),
            None => pid.to_string(),
        }
    }

    /// A machine-wide thing of host `host` (a counter group, a GPU, a
    /// disk): `nodeB · GPU 0 (...)` in a merged log, as is otherwise.
    pub(crate) fn on_host<'a>(&self, host: usize, name: std::borrow::Cow<'a, str>) -> std::borrow::Cow<'a, str> {
        match self.header.hosts.get(host) {
            Some(h) => format!("{} · {name}", h.name).into(),
            None => name,
        }
    }

    /// Totals per host, by host number (empty for a log of one host).
    pub fn host_totals(&self) -> Vec<HostTotals> {
        let mut t = vec![HostTotals::default(); self.header.hosts.len()];
        if t.is_empty() {
            return t;
        }
        for p in &self.processes {
            let Some(h) = t.get_mut(host_of(p.pid)) else { continue };
            h.processes += 1;
            h.reads += p.reads.count;
            h.read_bytes += p.reads.bytes;
            h.writes += p.writes.count;
            h.write_bytes += p.writes.bytes;
            h.opens += p.opens.count;
        }
        for n in &self.network {
            // Loopback never leaves the host.
            if let (Some(h), false) = (t.get_mut(n.host), n.label() == "lo") {
                h.rx_bytes += n.totals[0];
                h.tx_bytes += n.totals[1];
            }
        }
        for (h, info) in t.iter_mut().zip(&self.header.hosts) {
            h.lost = info.trailer.as_ref().map_or(0, |tr| tr.lost.iter().map(|l| l.count).sum());
        }
        t
    }
}
