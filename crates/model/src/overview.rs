//! The overview of a run too big for one file: per process and interval,
//! bytes read and written per second, syscalls, opens and failed calls per
//! second, latency (p50, p99, max) and block I/O; per disk the requests'
//! throughput and latency; every machine and process counter averaged
//! per interval; training phases, marks, GPU events and lost events; and the slowest
//! call of each process in each interval (when it took at least
//! [`SLOW_NS`](crate::overview_agg::SLOW_NS)) as a real slice with all its args, so stragglers stay
//! visible; and the first failed call of each process in each interval,
//! so errors have their paths and errnos. Its size depends on the run's length (the intervals) and its
//! processes, not on how many events it has.

use std::io;

use crate::args::{ArgKey, ArgSink, FnArgs, OwnedVal};
use crate::encoder::*;
use crate::event::LANE_NAMES;
use crate::grid::{describe_step, Grid};
use crate::overview_agg::{Agg, DiskAgg, Series};
use crate::procs::ProcIdx;
use crate::scene::{Filter, Scene, SceneStats};
use crate::survey::Survey;

/// The tracks of the slowest and the first failed call of each interval.
pub const SLOWEST_TRACK: &str = "slowest call per interval";
pub const FAILED_TRACK: &str = "first failure per interval";

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
    let avg = |s: &Series, i: usize| {
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
