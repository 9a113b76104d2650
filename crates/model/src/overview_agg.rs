//! The overview's numbers, gathered in the survey pass (see
//! [`crate::overview`], which draws them): per process and interval, calls,
//! bytes, latency and the slowest and first failed call; per disk its
//! requests; every counter averaged per interval.

use mltrace_log::labels;
use mltrace_log::*;
use rustc_hash::FxHashMap as HashMap;

use crate::args::OwnedArgs;
use crate::encoder::Unit;
use crate::event::{self, Lanes};
use crate::grid::Grid;
use crate::procs::ProcIdx;

/// About this many intervals over the whole run.
pub const TARGET_INTERVALS: usize = 2000;

/// A call at least this slow is kept as the slowest of its interval.
pub const SLOW_NS: u64 = 1_000_000;

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
    pub(crate) aggs: Vec<Agg>,
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
    pub(crate) sums: Vec<(f64, u32)>,
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
        let Ok(call) = event::split(rec) else { return };
        if call.waits_for_gpu() {
            let (_, start, dur, _) = call.timing();
            let end = start.saturating_add(dur);
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
