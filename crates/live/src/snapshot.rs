//! The figures at one moment, from the live stats: what Prometheus is
//! served and OTLP pushed. Every share comes from the functions `stats`
//! uses ([`Stats::window_verdict`], [`Stats::window_data_wait`]).

use mltrace_stats::Breakdown;
use mltrace_stats::{Histogram, Stats};

use crate::metrics::{self as m, Metric};

/// Upper bounds of the read-latency buckets (s); the last is open.
pub const READ_BOUNDS: [f64; 12] = [10e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 50e-3, 0.1, 1.0];

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    F64(f64),
    /// Counts per bucket (one more than the bounds: the last is open),
    /// their total and the sum of the values.
    Hist {
        bounds: &'static [f64],
        counts: Vec<u64>,
        count: u64,
        sum: f64,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub labels: Vec<(&'static str, String)>,
    pub value: Value,
}

/// Every metric's points at one moment.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// When it was taken, and when the recording started (Unix ns).
    pub taken_unix_ns: u64,
    pub start_unix_ns: u64,
    /// The job's rank when this recording holds one rank that has its rank
    /// from its environment (one recorder per node): a resource attribute.
    pub rank: Option<usize>,
    pub families: Vec<(&'static Metric, Vec<Point>)>,
}

impl Snapshot {
    fn push(&mut self, metric: &'static Metric, labels: &[(&'static str, &str)], value: Value) {
        debug_assert_eq!(labels.len(), metric.labels.len(), "{}", metric.name);
        let p = Point { labels: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(), value };
        match self.families.iter_mut().find(|(m, _)| m.name == metric.name) {
            Some((_, v)) => v.push(p),
            None => self.families.push((metric, vec![p])),
        }
    }

    fn gauge(&mut self, metric: &'static Metric, labels: &[(&'static str, &str)], v: f64) {
        self.push(metric, labels, Value::F64(v));
    }
}

/// A window of the run, on the log's clock (boot time, ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub name: &'static str,
    pub from: u64,
    pub to: u64,
}

/// What is carried from one snapshot to the next: the GPUs' counter sums
/// at the last one (their means over the interval are the differences).
#[derive(Default)]
pub struct Carry {
    gpu: Vec<((String, String), (f64, u64))>,
}

/// Which role a process plays: the trainer, one of its loaders, other.
fn role(stats: &Stats, pid: u32) -> &'static str {
    if pid == stats.trainer {
        "trainer"
    } else if stats.is_worker_now(pid) {
        "loader"
    } else {
        "other"
    }
}

const ROLES: [&str; 3] = ["trainer", "loader", "other"];

/// The read-latency histogram in [`READ_BOUNDS`]' buckets.
fn buckets(h: &Histogram) -> Value {
    let mut counts = vec![0u64; READ_BOUNDS.len() + 1];
    let mut below = 0;
    for (i, b) in READ_BOUNDS.iter().enumerate() {
        let n = h.count_at_most((b * 1e9) as u64);
        counts[i] = n - below;
        below = n;
    }
    counts[READ_BOUNDS.len()] = h.count() - below;
    Value::Hist { bounds: &READ_BOUNDS, counts, count: h.count(), sum: h.approx_sum() as f64 / 1e9 }
}

/// Nearest-rank quantile of sorted `v`.
fn quantile(v: &[u64], q: f64) -> u64 {
    v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
}

/// Unix ns of boot-time `ts`, by the header's anchor.
pub fn unix_ns(stats: &Stats, ts: u64) -> u64 {
    let a = stats.header.start;
    (ts as i128 - a.boottime_ns as i128 + a.realtime_ns as i128).clamp(0, u64::MAX as i128) as u64
}

/// The snapshot of `stats` over `windows` (the last interval, the run so
/// far), with the live view's own counters.
pub fn take(stats: &Stats, windows: &[Window], carry: &mut Carry, frames_missed: u64, pushes_dropped: u64) -> Snapshot {
    let mut s = Snapshot {
        taken_unix_ns: unix_ns(stats, mltrace_sample::boottime_ns()),
        start_unix_ns: unix_ns(stats, stats.header.start.boottime_ns),
        rank: None,
        families: Vec::new(),
    };
    let ranks = stats.ranks();
    if let [r] = ranks.as_slice() {
        s.rank = r.rank_from.map(|_| r.rank);
    }
    for w in windows {
        let Some(v) = stats.window_verdict(w.from, w.to, w.name.to_string()) else { continue };
        let Some(b) = v.breakdown else { continue };
        s.gauge(&m::WINDOW_START, &[("window", w.name)], unix_ns(stats, w.from) as f64 / 1e9);
        s.gauge(&m::WINDOW_END, &[("window", w.name)], unix_ns(stats, w.to) as f64 / 1e9);
        for share in b.shares() {
            s.gauge(&m::BREAKDOWN, &[("window", w.name), ("share", share.key)], (share.of)(&b));
        }
        for kind in Breakdown::KINDS {
            s.gauge(&m::VERDICT, &[("window", w.name), ("kind", kind)], f64::from(u8::from(kind == v.kind)));
        }
        for r in &ranks {
            if let Some(f) = stats.window_data_wait(r.pid, w.from, w.to) {
                s.gauge(&m::RANK_DATA_WAIT, &[("window", w.name), ("rank", &r.rank.to_string())], f);
            }
        }
        if let Some((_, points)) = stats.trainer().and_then(|t| stats.step_points(t.pid)) {
            let mut steps: Vec<u64> =
                points.windows(2).filter(|p| p[0] >= w.from && p[1] <= w.to).map(|p| p[1] - p[0]).collect();
            if !steps.is_empty() {
                steps.sort_unstable();
                for (q, name) in [(0.5, "50"), (0.99, "99")] {
                    let secs = quantile(&steps, q) as f64 / 1e9;
                    s.gauge(&m::STEP_DURATION, &[("window", w.name), ("percentile", name)], secs);
                }
            }
        }
    }
    if let Some(st) = (ranks.len() >= 2).then(|| stats.straggler(&ranks)).flatten() {
        s.gauge(&m::STRAGGLER_RANK, &[], st.rank.rank as f64);
        s.gauge(&m::STRAGGLER_LATENESS, &[], st.rank.late_ns / 1e9);
    }
    per_role(stats, &mut s);
    gpus(stats, carry, &mut s);
    for (kind, n) in &stats.lost {
        s.gauge(&m::LOST, &[("kind", kind.name())], *n as f64);
    }
    s.gauge(&m::RECORDS, &[], stats.records as f64);
    s.gauge(&m::FRAMES_MISSED, &[], frames_missed as f64);
    s.gauge(&m::PUSHES_DROPPED, &[], pushes_dropped as f64);
    s
}

/// Bytes, latency, storage, metadata and sockets, summed by role.
fn per_role(stats: &Stats, s: &mut Snapshot) {
    #[derive(Default)]
    struct Sums {
        read: u64,
        written: u64,
        latency: Histogram,
        storage: u64,
        meta: u64,
        sent: u64,
        received: u64,
    }
    let mut by: [Sums; 3] = Default::default();
    let at = |r: &str| ROLES.iter().position(|x| *x == r).unwrap_or(2);
    for p in &stats.processes {
        let x = &mut by[at(role(stats, p.pid))];
        x.read += p.reads.bytes;
        x.written += p.writes.bytes;
        x.latency.merge(&p.reads.latency);
        x.storage += p.cache.during_reads;
        x.meta += p.opens.count;
        x.sent += p.sockets.send_bytes;
        x.received += p.sockets.recv_bytes;
    }
    for (pid, _, d) in stats.tables.metadata.sorted() {
        by[at(role(stats, pid))].meta += d.calls;
    }
    for (r, x) in ROLES.iter().zip(&by) {
        s.gauge(&m::DISK_IO, &[("disk.io.direction", "read"), ("role", r)], x.read as f64);
        s.gauge(&m::DISK_IO, &[("disk.io.direction", "write"), ("role", r)], x.written as f64);
        s.push(&m::READ_DURATION, &[("role", r)], buckets(&x.latency));
        s.gauge(&m::STORAGE_READ, &[("role", r)], x.storage as f64);
        if x.read > 0 && stats.has_page_cache() {
            let hit = 1.0 - (x.storage as f64 / x.read as f64).min(1.0);
            s.gauge(&m::CACHE_HITS, &[("role", r)], hit);
        }
        s.gauge(&m::METADATA_CALLS, &[("role", r)], x.meta as f64);
        s.gauge(&m::NETWORK_IO, &[("network.io.direction", "transmit"), ("role", r)], x.sent as f64);
        s.gauge(&m::NETWORK_IO, &[("network.io.direction", "receive"), ("role", r)], x.received as f64);
    }
}

/// Each GPU's utilisation and memory over the last interval: the
/// difference of the run's sums since the last snapshot.
fn gpus(stats: &Stats, carry: &mut Carry, s: &mut Snapshot) {
    let mut now = Vec::new();
    for ((group, name, _), (sum, n, _)) in &stats.utilisation {
        // `GPU 0 (H100)`: its index.
        let Some(id) = group.strip_prefix("GPU ").and_then(|g| g.split_whitespace().next()) else { continue };
        let metric = if mltrace_stats::is_gpu_utilisation(name) {
            (&m::GPU_UTILIZATION, 0.01)
        } else if name == "framebuffer used" {
            (&m::GPU_MEMORY, 1.0)
        } else {
            continue;
        };
        let key = (group.clone(), name.clone());
        let (s0, n0) = carry.gpu.iter().find(|(k, _)| *k == key).map_or((0.0, 0), |(_, v)| *v);
        if *n > n0 {
            s.gauge(metric.0, &[("hw.id", id)], (sum - s0) / (n - n0) as f64 * metric.1);
        }
        now.push((key, (*sum, *n)));
    }
    carry.gpu = now;
}
