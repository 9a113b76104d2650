//! The overview of a run too big for one file: per process and interval,
//! bytes read and written per second, syscalls, opens and failed calls per
//! second, latency (p50, p99, max) and block I/O; per disk the requests'
//! throughput and latency; every machine and process counter averaged
//! per interval; training phases, marks, GPU events and lost events; and the slowest
//! call of each process in each interval (when it took at least
//! [`SLOW_NS`]) as a real slice with all its args, so stragglers stay
//! visible; and the first failed call of each process in each interval,
//! so errors have their paths and errnos. Its size depends on the run's length (the intervals) and its
//! processes, not on how many events it has.

use std::io;

use mltrace_log::labels;
use mltrace_log::*;
use rustc_hash::FxHashMap as HashMap;

use crate::args::{ArgKey, ArgSink, FnArgs, OwnedArgs, OwnedVal};
use crate::encoder::*;
use crate::event;
use crate::grid::{describe_step, Grid};
use crate::procs::ProcIdx;
use crate::scene::{Filter, Lanes, Scene, SceneStats, LANE_NAMES};
use crate::survey::Survey;

/// About this many intervals over the whole run.
pub const TARGET_INTERVALS: usize = 2000;

/// A call at least this slow is kept as the slowest of its interval.
pub const SLOW_NS: u64 = 1_000_000;

/// The tracks of the slowest and the first failed call of each interval.
pub const SLOWEST_TRACK: &str = "slowest call per interval";
pub const FAILED_TRACK: &str = "first failure per interval";

/// Latency histogram: bin 0 below 1 µs, then two bins per octave.
const HIST_BINS: usize = 48;

#[inline]
fn hist_bin(ns: u64) -> usize {
    let us = ns / 1000;
    if us == 0 {
        return 0;
    }
    let lz = 63 - us.leading_zeros() as usize;
    // The upper half of the octave: us >= 2^lz * sqrt(2).
    let upper = u128::from(us) * u128::from(us) >= 1u128 << (2 * lz + 1);
    (1 + 2 * lz + usize::from(upper)).min(HIST_BINS - 1)
}

/// A bin's middle (geometric), in ns.
fn bin_value(b: usize) -> f64 {
    if b == 0 {
        return 500.0;
    }
    1000.0 * 2f64.powf((b as f64 - 1.0 + 0.5) / 2.0)
}

/// The slowest call of a process in an interval.
#[derive(Clone, Debug)]
pub struct Slow {
    pub ts: u64,
    pub dur: u64,
    pub lane: Lanes,
    pub name: String,
    pub args: OwnedArgs,
}

/// One process's interval.
#[derive(Clone)]
pub struct Agg {
    pub calls: u32,
    pub opens: u32,
    pub errors: u32,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub blk_read: u64,
    pub blk_write: u64,
    /// Ns its threads spent inside CUDA calls that waited for the GPU.
    pub gpu_wait_ns: u64,
    pub lat_max: u64,
    hist: [u32; HIST_BINS],
    pub slowest: Option<Box<Slow>>,
    /// The first failed call of the interval.
    pub failed: Option<Box<Slow>>,
}

impl Default for Agg {
    fn default() -> Self {
        Agg {
            calls: 0,
            opens: 0,
            errors: 0,
            read_bytes: 0,
            write_bytes: 0,
            blk_read: 0,
            blk_write: 0,
            gpu_wait_ns: 0,
            lat_max: 0,
            hist: [0; HIST_BINS],
            slowest: None,
            failed: None,
        }
    }
}

impl Agg {
    /// The latency below which a fraction `q` of the calls were, in ns.
    pub fn quantile(&self, q: f64) -> f64 {
        let n: u64 = self.hist.iter().map(|&c| u64::from(c)).sum();
        if n == 0 {
            return 0.0;
        }
        let want = ((n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, &c) in self.hist.iter().enumerate() {
            seen += u64::from(c);
            if seen >= want {
                return bin_value(b).min(self.lat_max as f64);
            }
        }
        self.lat_max as f64
    }
}

/// A process's intervals, from the first it was busy in to the last.
#[derive(Default)]
pub struct ProcAggs {
    lo: usize,
    aggs: Vec<Agg>,
}

impl ProcAggs {
    fn at(&mut self, i: usize) -> &mut Agg {
        if self.aggs.is_empty() {
            self.lo = i;
        } else if i < self.lo {
            let mut v = vec![Agg::default(); self.lo - i];
            v.append(&mut self.aggs);
            self.aggs = v;
            self.lo = i;
        }
        let k = i - self.lo;
        if k >= self.aggs.len() {
            self.aggs.resize_with(k + 1, Agg::default);
        }
        &mut self.aggs[k]
    }

    pub fn iter(&self) -> impl Iterator<Item = (usize, &Agg)> {
        self.aggs.iter().enumerate().map(move |(k, a)| (self.lo + k, a))
    }
}

/// A disk's intervals, from its block requests.
#[derive(Clone, Copy, Default)]
pub struct DiskAgg {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub requests: u32,
    pub lat_max: u64,
    /// Request time in flight within the interval (queue + device, summed
    /// over requests): divided by the interval, the mean queue depth.
    pub in_flight_ns: u64,
}

/// A counter averaged per interval.
pub struct Series {
    pub group: String,
    pub name: String,
    pub proc: Option<ProcIdx>,
    /// A per-core busy series (group `CPU`, sub-group per core).
    pub core: Option<u32>,
    /// Its host, for a machine series of a merged log.
    pub host: usize,
    pub unit: Unit,
    sums: Vec<(f64, u32)>,
}

impl Series {
    /// The mean of interval `i`, where it has samples.
    pub fn value(&self, i: usize) -> Option<f64> {
        self.sums.get(i).and_then(|&(sum, n)| (n > 0).then(|| sum / f64::from(n)))
    }

    /// (interval, mean) of every interval with samples.
    pub fn values(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.sums.iter().enumerate().filter(|(_, &(_, n))| n > 0).map(|(i, &(sum, n))| (i, sum / f64::from(n)))
    }
}

/// Everything the overview needs, gathered in one pass.
pub struct OverviewAgg {
    pub grid: Grid,
    pub procs: Vec<ProcAggs>,
    /// Each disk's group name, host and intervals.
    pub disks: Vec<(String, usize, Vec<DiskAgg>)>,
    disk_ids: labels::DiskIds,
    pub series: Vec<Series>,
    series_ids: HashMap<String, usize>,
    core_iowait: HashMap<u32, (u64, f64)>,
    key: String,
    args: OwnedArgs,
}

impl OverviewAgg {
    pub fn new(grid: Grid) -> Self {
        OverviewAgg {
            grid,
            procs: Vec::new(),
            disks: Vec::new(),
            disk_ids: labels::DiskIds::default(),
            series: Vec::new(),
            series_ids: HashMap::default(),
            core_iowait: HashMap::default(),
            key: String::new(),
            args: OwnedArgs::default(),
        }
    }

    fn proc(&mut self, idx: ProcIdx, ts: u64) -> &mut Agg {
        let i = idx as usize;
        if self.procs.len() <= i {
            self.procs.resize_with(i + 1, ProcAggs::default);
        }
        let b = self.grid.index(ts);
        self.procs[i].at(b)
    }

    /// A syscall record of incarnation `idx` (or a CUDA call that waited
    /// for the GPU: its time, split across the intervals it covers).
    pub fn syscall(&mut self, f: &Frame<'_>, rec: &Record, idx: ProcIdx) {
        if let Record::GpuCall(r) = rec {
            let (start, end) = (r.ts, r.ts.saturating_add(r.dur));
            let grid = self.grid;
            let (a, z) = (grid.index(start), grid.index(end.saturating_sub(1).max(start)));
            if self.procs.len() <= idx as usize {
                self.procs.resize_with(idx as usize + 1, ProcAggs::default);
            }
            for i in a..=z {
                let (s, e) = (start.max(grid.time(i)), if i == z { end } else { end.min(grid.time(i + 1)) });
                self.procs[idx as usize].at(i).gpu_wait_ns += e.saturating_sub(s);
            }
            return;
        }
        let Ok(call) = event::split(rec) else { return };
        let Some(lane) = call.lane() else { return };
        let (_, ts, dur, ret) = call.timing();
        let failed = ret < 0 && ret != RET_UNKNOWN;
        let summed = call.summed();
        let a = self.proc(idx, ts);
        a.lat_max = a.lat_max.max(dur);
        // A summed call is counted in its summary: here it is an example.
        if !summed {
            a.calls += 1;
            a.hist[hist_bin(dur)] += 1;
            if failed {
                a.errors += 1;
            }
        }
        let (read, written) = call.moved();
        a.read_bytes += read;
        a.write_bytes += written;
        if matches!(call, event::Call::Open(_)) {
            a.opens += 1;
        }
        let slowest = dur >= SLOW_NS && a.slowest.as_ref().is_none_or(|s| dur > s.dur);
        let first_failure = failed && a.failed.is_none();
        if slowest || first_failure {
            let mut args = std::mem::take(&mut self.args);
            if let Some(name) = event::own_call(f, rec, &mut args) {
                let a = self.proc(idx, ts);
                let s = Box::new(Slow { ts, dur, lane, name, args: args.clone() });
                if first_failure {
                    a.failed = Some(s.clone());
                }
                if slowest {
                    a.slowest = Some(s);
                }
            }
            self.args = args;
        }
    }

    /// Calls summed in the kernel (`record --detail summary`), in the
    /// interval their second's middle falls in.
    pub fn summary(&mut self, r: &IoSummary, idx: ProcIdx) {
        let a = self.proc(idx, r.ts.saturating_add(r.dur / 2));
        let n32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        a.calls = a.calls.saturating_add(n32(r.calls));
        a.errors = a.errors.saturating_add(n32(r.failed));
        for (slot, n) in r.hist().into_iter().enumerate() {
            let low = IoSummary::slot_floor(slot);
            let b = &mut a.hist[hist_bin(low + low / 2)];
            *b = b.saturating_add(n);
        }
        match r.op.io() {
            Some(o) if o.is_write() => a.write_bytes += r.bytes,
            Some(_) => a.read_bytes += r.bytes,
            None => {}
        }
    }

    pub fn block(&mut self, f: &Frame<'_>, b: &Block, idx: Option<ProcIdx>) {
        let (read, write) = (b.op == BlockOp::Read, b.op == BlockOp::Write);
        if let Some(i) = idx {
            let a = self.proc(i, b.ts);
            if read {
                a.blk_read += b.bytes;
            }
            if write {
                a.blk_write += b.bytes;
            }
        }
        let name = f.str(b.disk);
        let host = host_of(b.pid);
        let (d, new) = self.disk_ids.id_on(host, b.dev, name);
        if new {
            self.disks.push((labels::disk(name, b.dev), host, vec![DiskAgg::default(); self.grid.n]));
        }
        // In flight from its start to its completion, split exactly
        // across the intervals it covers.
        let (start, end) = (b.ts, b.end_ts());
        let grid = self.grid;
        let (a, z) = (grid.index(start), grid.index(end.saturating_sub(1).max(start)));
        for i in a..=z {
            let (s, e) = (start.max(grid.time(i)), if i == z { end } else { end.min(grid.time(i + 1)) });
            self.disks[d].2[i].in_flight_ns += e.saturating_sub(s);
        }
        let g = &mut self.disks[d].2[self.grid.index(b.end_ts())];
        g.requests += 1;
        g.lat_max = g.lat_max.max(b.queue + b.device);
        if read {
            g.read_bytes += b.bytes;
        }
        if write {
            g.write_bytes += b.bytes;
        }
    }

    pub fn counter(&mut self, f: &Frame<'_>, c: &Counter, idx: Option<ProcIdx>) {
        use std::fmt::Write as _;
        let (group, name) = (f.str_lossy(c.group), f.str_lossy(c.name));
        let mut core = None;
        let mut value = c.value;
        let host = if local_pid(c.pid) == 0 { host_of(c.pid) } else { 0 };
        if local_pid(c.pid) == 0 {
            if let Some(n) = group.strip_prefix("CPU ").and_then(|n| n.parse::<u32>().ok()) {
                match &*name {
                    "iowait" => {
                        self.core_iowait.insert(n, (c.ts, c.value));
                        return;
                    }
                    "idle" => {
                        let iowait = match self.core_iowait.get(&n) {
                            Some(&(ts, v)) if ts == c.ts => v,
                            _ => 0.0,
                        };
                        value = (100.0 - c.value - iowait).max(0.0);
                        core = Some(n);
                    }
                    _ => return,
                }
            }
        }
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        let _ = match core {
            Some(n) => write!(key, "CPU\0per core\0{n}\0{host}"),
            None => write!(key, "{group}\0{name}\0{}\0{host}", idx.map_or(-1, i64::from)),
        };
        let s = match self.series_ids.get(&key) {
            Some(&s) => s,
            None => {
                self.series.push(Series {
                    group: group.into_owned(),
                    name: name.into_owned(),
                    proc: idx,
                    core,
                    host,
                    unit: if core.is_some() { Unit::Named("%") } else { Unit::from_log(c.unit) },
                    sums: vec![(0.0, 0); self.grid.n],
                });
                self.series_ids.insert(key.clone(), self.series.len() - 1);
                self.series.len() - 1
            }
        };
        self.key = key;
        let e = &mut self.series[s].sums[self.grid.index(c.ts)];
        e.0 += value;
        e.1 += 1;
    }
}

/// Writes `values` (one per interval from `lo`) as a step counter: a
/// value where it changes, and 0 after the last interval.
fn steps<E: Encoder>(
    enc: &mut E,
    stats: &mut SceneStats,
    track: TrackId,
    grid: &Grid,
    values: impl Iterator<Item = (usize, f64)>,
) -> io::Result<()> {
    let mut last = None;
    let mut end = 0;
    for (i, v) in values {
        if last != Some(v) {
            enc.counter(track, grid.time(i), v)?;
            stats.counters += 1;
            last = Some(v);
        }
        end = i + 1;
    }
    if last.is_some_and(|v| v != 0.0) {
        enc.counter(track, grid.time(end), 0.0)?;
        stats.counters += 1;
    }
    Ok(())
}

/// Writes the overview of the whole run.
pub fn render<E: Encoder>(run: &Survey, enc: &mut E) -> io::Result<(u64, SceneStats)> {
    let agg = &run.overview;
    let grid = agg.grid;
    let title = format!("overview (intervals of {})", describe_step(grid.step));
    let mut scene = Scene::new(run, Filter::default());
    scene.begin_file(enc, &title, (0, u64::MAX), None)?;
    let secs = grid.step as f64 / 1e9;
    // Machine counters, averaged per interval; CPU busy from idle and iowait.
    let avg = |s: &crate::overview::Series, i: usize| {
        let (sum, n) = s.sums[i];
        (n > 0).then(|| sum / f64::from(n))
    };
    let cpu = |host: usize, name: &str| {
        agg.series
            .iter()
            .find(|s| s.proc.is_none() && s.core.is_none() && s.host == host && s.group == "CPU" && s.name == name)
    };
    for host in 0..run.header.hosts.len().max(1) {
        let Some(idle) = cpu(host, "idle") else { continue };
        let iowait = cpu(host, "iowait");
        scene.host = host;
        let g = scene.group(enc, "CPU")?;
        let busy = (0..idle.sums.len()).filter_map(|i| {
            avg(idle, i).map(|v| (i, (100.0 - v - iowait.and_then(|w| avg(w, i)).unwrap_or(0.0)).max(0.0)))
        });
        steps(enc, &mut scene.stats, g, &grid, busy)?;
    }
    for s in &agg.series {
        scene.host = s.host;
        let track = match (s.proc, s.core) {
            (_, Some(core)) => scene.core_track(enc, core)?,
            (None, None) => match scene.machine_track(enc, &s.group, &s.name, s.unit)? {
                Some(t) => t,
                None => continue,
            },
            (Some(p), None) => {
                let g = scene.proc_group(enc, p)?;
                let n = if s.group.is_empty() { s.name.clone() } else { format!("{} {}", s.group, s.name) };
                let key = format!("{}\0{}\0{p}", s.group, s.name);
                scene.counter_track(enc, &key, g, &n, s.unit)?
            }
        };
        let vals = s.sums.iter().enumerate().filter(|(_, &(_, n))| n > 0).map(|(i, &(sum, n))| (i, sum / f64::from(n)));
        steps(enc, &mut scene.stats, track, &grid, vals)?;
    }
    // Disks, from their requests.
    for (name, host, aggs) in &agg.disks {
        scene.host = *host;
        let g = scene.group(enc, name)?;
        type Get = fn(&DiskAgg, f64) -> f64;
        let tracks: [(&str, Unit, Get); 4] = [
            ("requests: read", Unit::Named("B/s"), |d, s| d.read_bytes as f64 / s),
            ("requests: write", Unit::Named("B/s"), |d, s| d.write_bytes as f64 / s),
            ("requests per s", Unit::Named("/s"), |d, s| f64::from(d.requests) / s),
            ("request latency max", Unit::TimeNs, |d, _| d.lat_max as f64),
        ];
        for (tname, unit, f) in tracks {
            let key = format!("{name}\0{tname}\0{host}");
            let t = scene.counter_track(enc, &key, g, tname, unit)?;
            steps(enc, &mut scene.stats, t, &grid, aggs.iter().enumerate().map(|(i, d)| (i, f(d, secs))))?;
        }
    }
    // Processes: rates, latency and their slowest calls.
    for (idx, pa) in agg.procs.iter().enumerate() {
        let idx = idx as ProcIdx;
        // Helpers (shells, shims, short and with little I/O) are in the
        // parts: a job's hosts start thousands of them, each a group.
        if pa.aggs.is_empty() || run.procs.get(idx).role == crate::procs::Role::Helper {
            continue;
        }
        let g = scene.proc_group(enc, idx)?;
        type Get = fn(&Agg, f64) -> f64;
        let tracks: [(&str, Unit, Get); 11] = [
            ("read", Unit::Named("B/s"), |a, s| a.read_bytes as f64 / s),
            ("write", Unit::Named("B/s"), |a, s| a.write_bytes as f64 / s),
            ("syscalls", Unit::Named("/s"), |a, s| f64::from(a.calls) / s),
            ("opens", Unit::Named("/s"), |a, s| f64::from(a.opens) / s),
            ("failed calls", Unit::Named("/s"), |a, s| f64::from(a.errors) / s),
            ("latency p50", Unit::TimeNs, |a, _| a.quantile(0.5)),
            ("latency p99", Unit::TimeNs, |a, _| a.quantile(0.99)),
            ("latency max", Unit::TimeNs, |a, _| a.lat_max as f64),
            ("block I/O: read", Unit::Named("B/s"), |a, s| a.blk_read as f64 / s),
            ("block I/O: write", Unit::Named("B/s"), |a, s| a.blk_write as f64 / s),
            // Of one thread's time: 100% is a thread waiting throughout.
            ("GPU wait", Unit::Named("%"), |a, s| a.gpu_wait_ns as f64 / 1e9 / s * 100.0),
        ];
        for (rank, (tname, unit, f)) in tracks.into_iter().enumerate() {
            if pa.iter().all(|(_, a)| f(a, secs) == 0.0) {
                continue;
            }
            let key = format!("\0overview\0{tname}\0{idx}");
            let t = scene.counter_track_ranked(enc, &key, g, tname, unit, rank as i32)?;
            steps(enc, &mut scene.stats, t, &grid, pa.iter().map(|(i, a)| (i, f(a, secs))))?;
        }
        let calls = pa.iter().flat_map(|(i, a)| {
            let slow = a.slowest.as_deref().map(|s| (i, SLOWEST_TRACK, s));
            let failed = a.failed.as_deref().map(|s| (i, FAILED_TRACK, s));
            slow.into_iter().chain(failed)
        });
        for (i, track, s) in calls {
            // Calls of neighbouring intervals may overlap: lanes.
            let rank = if track == FAILED_TRACK { 21 } else { 20 };
            let t = scene.lane_in(enc, g, track, rank, s.ts, s.ts + s.dur)?;
            let sl = Slice { track: t, ts: s.ts, dur: s.dur, name: Name::Str(&s.name), flows_out: &[], flows_in: &[] };
            let args = FnArgs(|w: &mut dyn ArgSink| {
                for (k, v) in &s.args.0 {
                    match v {
                        OwnedVal::Int(x) => w.int(*k, *x),
                        OwnedVal::Uint(x) => w.uint(*k, *x),
                        OwnedVal::Str(x) => w.str(*k, x),
                        OwnedVal::Argv(x) => w.argv(*k, x),
                    }
                }
                w.str(ArgKey::Syscall, LANE_NAMES[s.lane as usize].as_bytes());
                w.uint(ArgKey::Interval, grid.time(i) - grid.start);
            });
            enc.slice(&sl, &args)?;
            scene.stats.slices += 1;
        }
    }
    // GPU events (throttling, XID, ECC): rare, and each may explain a slow step.
    for e in &run.gpu_events {
        scene.gpu_instant(enc, e.pid, &e.group, e.ts, e.kind, e.code)?;
    }
    // Lost events, where they happened.
    let mut total = 0;
    for l in &run.lost {
        total += l.count;
        scene.lost_marker(enc, l.ts, l.kind, l.count, total)?;
    }
    scene.end_file(enc, false).map(|(b, mut st)| {
        st.lost_events = total;
        (b, st)
    })
}
