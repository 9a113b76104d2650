//! Section 1b: where the cost goes, per stage. One recording of a few runs
//! of a workload, with the kernel counting each BPF program's runs and run
//! time (`kernel.bpf_stats_enabled`, read back through `record`'s
//! `MLTRACE_BPF_STATS`), and the recorder's CPU per thread: the traced
//! command is a shell wrapper, a child of the recorder, that reads
//! /proc/$PPID/task/*/schedstat (ns on a CPU) and comm before the first run
//! and after the last, so the recorder's start-up (loading the programs)
//! and its last drain are left out.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use libbpf_rs::skel::{OpenSkel as _, Skel as _, SkelBuilder as _};

use super::cold::{prog_stats, BpfStats};
use super::{log_counts, run_measured, Bench, Workload};

/// Runs of the workload in the one recording.
const RUNS: usize = 5;

/// The traced command: `sh -c WRAPPER sh OUT N CMD...`.
const WRAPPER: &str = r#"out=$1 n=$2
shift 2
read -r parent < /proc/$PPID/comm
[ "$parent" = mltrace ] || { echo "the wrapper's parent is $parent, not the recorder" >&2; exit 1; }
snap() {
    for t in /proc/$PPID/task/*; do
        read -r ns _ < "$t/schedstat" && read -r c < "$t/comm" && echo "$1 ${t##*/} $ns $c"
    done
}
snap before > "$out"
i=0
while [ "$i" -lt "$n" ]; do
    "$@" || exit 1
    i=$((i + 1))
done
snap after >> "$out"
"#;

/// The recorder's threads: (comm, threads, ns on a CPU between the snapshots).
fn threads(text: &str) -> Vec<(String, usize, u64)> {
    let mut by_tid: BTreeMap<u32, (String, u64, u64)> = BTreeMap::new();
    for l in text.lines() {
        let mut it = l.splitn(4, ' ');
        let (Some(when), Some(tid), Some(ns), Some(comm)) = (it.next(), it.next(), it.next(), it.next()) else {
            continue;
        };
        let (Ok(tid), Ok(ns)) = (tid.parse(), ns.parse::<u64>()) else { continue };
        let e = by_tid.entry(tid).or_insert_with(|| (comm.to_string(), 0, 0));
        e.0 = comm.to_string();
        if when == "before" {
            e.1 = ns;
        } else {
            e.2 = ns;
        }
    }
    let mut by_comm: Vec<(String, usize, u64)> = Vec::new();
    // A thread gone before the last snapshot is not counted (the recorder's
    // threads all live until the command has exited).
    for (comm, before, after) in by_tid.into_values().filter(|t| t.2 > 0) {
        match by_comm.iter_mut().find(|c| c.0 == comm) {
            Some(c) => (c.1, c.2) = (c.1 + 1, c.2 + after.saturating_sub(before)),
            None => by_comm.push((comm, 1, after.saturating_sub(before))),
        }
    }
    by_comm.sort_by_key(|c| std::cmp::Reverse(c.2));
    by_comm
}

/// `record` with `mode` into `log` of [`RUNS`] runs of `w` under the
/// wrapper, which writes the recorder's threads' CPU to `snaps`.
fn recording(bench: &Bench, w: &Workload, mode: &[&str], log: &Path, snaps: &Path) -> Command {
    let mut cmd = Command::new(&bench.mltrace);
    cmd.args(["record", "-q", "-f", "--gpu", "off"])
        .args(mode)
        .arg("-o")
        .arg(log)
        .args(["--", "sh", "-c", WRAPPER, "sh"])
        .arg(snaps)
        .arg(RUNS.to_string())
        .arg(&w.bin)
        .args(&w.args);
    cmd
}

/// Recordings of each workload and mode: each stage's row is the median
/// of theirs, with the spread of its per-unit column (the machine's noise
/// moves one recording's figures by a third).
fn reps() -> usize {
    std::env::var("BENCH_STAGE_REPS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(3)
}

/// A row's figures from each recording: (ns, runs or 0, events).
type Each = Vec<(u64, u64, u64)>;

/// One recording's figures: BPF programs (name, runs, ns), the recorder's
/// threads (comm, threads, ns), events in the log and lost.
struct Recorded {
    progs: Vec<(String, u64, u64)>,
    threads: Vec<(String, usize, u64)>,
    events: u64,
    lost: u64,
}

fn record_once(bench: &Bench, w: &Workload, mode: &[&str]) -> Result<Recorded> {
    let tag = if mode.is_empty() { String::new() } else { format!("-{}", mode.join("-").replace("--", "")) };
    let log = bench.dir.join(format!("stages-{}{tag}.bin", w.key));
    let stats = bench.dir.join(format!("stages-{}{tag}.bpf-stats", w.key));
    let snaps = bench.dir.join(format!("stages-{}{tag}.threads", w.key));
    let _ = fs::remove_file(&stats);
    let _ = fs::remove_file(&snaps);
    {
        let _on = BpfStats::on();
        run_measured(recording(bench, w, mode, &log, &snaps).env("MLTRACE_BPF_STATS", &stats))?;
    }
    let progs: Vec<_> = prog_stats(&stats).into_iter().filter(|p| !p.0.starts_with('(')).collect();
    if progs.is_empty() {
        bail!("no BPF program stats in {} (kernel.bpf_stats_enabled?)", stats.display());
    }
    let threads = threads(&fs::read_to_string(&snaps).context("the wrapper's snapshots")?);
    let (events, lost, _) = log_counts(&log)?;
    Ok(Recorded { progs, threads, events, lost })
}

/// The median of `v` (the lower middle of an even count), and its range.
fn median_and_range(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    match (v.first(), v.last()) {
        (Some(&lo), Some(&hi)) => (v[(v.len() - 1) / 2], lo, hi),
        _ => (0.0, 0.0, 0.0),
    }
}

/// One workload's rows, recorded with `mode` (`record`'s options, e.g.
/// `--detail summary`) [`reps`] times; `added_ns`: section 1's median
/// added time per run.
pub(crate) fn stages(bench: &Bench, w: &Workload, mode: &[&str], added_ns: Option<f64>) -> Result<String> {
    let recs = (0..reps()).map(|_| record_once(bench, w, mode)).collect::<Result<Vec<_>>>()?;
    let n = RUNS as f64;
    let k = recs.len();
    let (events, _, _) = median_and_range(recs.iter().map(|r| r.events as f64).collect());
    let lost: u64 = recs.iter().map(|r| r.lost).sum();
    let mut t = String::new();
    let _ = writeln!(
        t,
        "  {}{}: {RUNS} runs in each of {k} recordings, {:.0} events a run, {lost} lost in all{}",
        w.title,
        if mode.is_empty() { String::new() } else { format!(", record {}", mode.join(" ")) },
        events / n,
        added_ns.map(|a| format!("; section 1's added time {:.1} ms a run", a / 1e6)).unwrap_or_default()
    );
    let _ =
        writeln!(t, "    (each figure the median of the {k} recordings; in brackets the lowest and highest per unit)");
    header(&mut t, "ns/event");
    let row = |t: &mut String, what: &str, each: &Each| {
        let (ms, _, _) = median_and_range(each.iter().map(|e| e.0 as f64 / n / 1e6).collect());
        let (per_ev, lo_ev, hi_ev) = median_and_range(each.iter().map(|e| e.0 as f64 / e.2.max(1) as f64).collect());
        if each.iter().all(|e| e.1 == 0) {
            let _ = writeln!(t, "    {what:<40}{ms:>12.2}{per_ev:>11.0}{:>24}", format!("[{lo_ev:.0}-{hi_ev:.0}]"));
            return;
        }
        let (calls, _, _) = median_and_range(each.iter().map(|e| e.1 as f64 / n).collect());
        let (per_call, lo, hi) = median_and_range(each.iter().map(|e| e.0 as f64 / e.1.max(1) as f64).collect());
        let _ = writeln!(t, "    {what:<40}{ms:>12.2}{per_ev:>11.0}{calls:>14.0}{per_call:>10.0}  [{lo:.0}-{hi:.0}]");
    };
    // Programs by their median time, every one any recording ran.
    let mut names: Vec<&str> = Vec::new();
    for r in &recs {
        for p in &r.progs {
            if !names.contains(&p.0.as_str()) {
                names.push(&p.0);
            }
        }
    }
    let each_of = |name: &str| -> Each {
        recs.iter()
            .map(|r| r.progs.iter().find(|p| p.0 == name).map_or((0, 0, r.events), |p| (p.2, p.1, r.events)))
            .collect()
    };
    let mut progs: Vec<(&str, Each)> = names.iter().map(|&name| (name, each_of(name))).collect();
    progs.sort_by(|a, b| {
        let m = |v: &Each| median_and_range(v.iter().map(|e| e.0 as f64).collect()).0;
        m(&b.1).total_cmp(&m(&a.1))
    });
    for (name, each) in &progs {
        row(&mut t, &format!("BPF {name}"), each);
    }
    // The recorder's threads, by name, in the first recording's order.
    for (comm, count, _) in &recs[0].threads {
        let each: Vec<_> =
            recs.iter().map(|r| (r.threads.iter().find(|c| &c.0 == comm).map_or(0, |c| c.2), 0, r.events)).collect();
        let what = if count > &1 { format!("recorder {comm} ({count} threads)") } else { format!("recorder {comm}") };
        row(&mut t, &what, &each);
    }
    let sum = |f: &dyn Fn(&Recorded) -> u64| -> Each { recs.iter().map(|r| (f(r), 0, r.events)).collect() };
    let bpf_ns = |r: &Recorded| r.progs.iter().map(|p| p.2).sum::<u64>();
    let rec_ns = |r: &Recorded| r.threads.iter().map(|c| c.2).sum::<u64>();
    row(&mut t, "all BPF programs", &sum(&bpf_ns));
    row(&mut t, "the recorder, all threads", &sum(&rec_ns));
    row(&mut t, "in all", &sum(&|r| bpf_ns(r) + rec_ns(r)));
    if mode.is_empty() {
        match replayed(bench, w) {
            Ok(r) => {
                let _ = writeln!(
                    t,
                    "    {:<40}{:>12.2}{:>11.0}  (first pass {:.0}; {} records)",
                    "its decoder alone, replayed (best of 7)",
                    r.best * r.records as f64 / n / 1e6,
                    r.best,
                    r.first,
                    r.records
                );
            }
            Err(e) => {
                let _ = writeln!(t, "    its decoder alone, replayed: failed: {e:#}");
            }
        }
    }
    Ok(t)
}

/// The same runs recorded again with the consumer's records dumped, and
/// replayed through the decoder alone (see replay.rs).
fn replayed(bench: &Bench, w: &Workload) -> Result<super::replay::Replay> {
    let log = bench.dir.join(format!("stages-{}-dumped.bin", w.key));
    let dump = bench.dir.join(format!("stages-{}.ring-dump", w.key));
    let snaps = bench.dir.join(format!("stages-{}-dumped.threads", w.key));
    run_measured(recording(bench, w, &[], &log, &snaps).env("MLTRACE_RING_DUMP", &dump))?;
    let r = super::replay::replay(&dump);
    let _ = fs::remove_file(&dump);
    r
}

/// The latency floor's rows for `w` (the same runs, one load of the
/// floor): what a tracer that only times each call and sends one 32-byte
/// ring record pays per stage on this machine, beside mltrace's; into
/// one ring per CPU (what the one shared ring costs), or per CPU in
/// batches (what a reservation a record costs).
pub(crate) fn floor_stages(w: &Workload, rings: super::FloorRings) -> Result<String> {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do "$@" || exit 1; i=$((i + 1)); done"#, "sh"])
        .arg(RUNS.to_string())
        .arg(&w.bin)
        .args(&w.args);
    let (_, f) = {
        let _on = BpfStats::on();
        super::latency_floor_run(cmd, &w.bin.display().to_string(), rings)?
    };
    if f.progs.iter().all(|p| p.1 == 0) {
        bail!("no BPF program stats for the latency floor (kernel.bpf_stats_enabled?)");
    }
    let n = RUNS as f64;
    let per_rec = |ns: u64| ns as f64 / f.records.max(1) as f64;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "  {}, latency floor{}: {RUNS} runs, {:.0} records a run (one per syscall of the tree, recorded or not)",
        w.title,
        match rings {
            super::FloorRings::Shared => "",
            super::FloorRings::PerCpu => ", one ring per CPU",
            super::FloorRings::Batched => ", one ring per CPU, 64 records a submit",
        },
        f.records as f64 / n
    );
    header(&mut t, "ns/record");
    for (name, runs, ns) in &f.progs {
        program_row(&mut t, name, *runs, *ns, f.records);
    }
    let _ = writeln!(
        t,
        "    {:<40}{:>12.2}{:>11.0}",
        "its consumer (reads each record)",
        f.consumer_cpu_ns as f64 / n / 1e6,
        per_rec(f.consumer_cpu_ns)
    );
    Ok(t)
}

/// The count-only floor's rows for `w` (the same runs): programs on the
/// same two raw tracepoints that only count. What the measurement itself
/// reads for a program that does next to nothing: `kernel.bpf_stats_enabled`
/// reads the clock around every run, which every row above pays once.
pub(crate) fn count_floor_stages(w: &Workload) -> Result<String> {
    let mut storage = std::mem::MaybeUninit::uninit();
    let mut open = super::floor::FloorSkelBuilder::default().open(&mut storage)?;
    for p in [
        &mut open.progs.latency_enter,
        &mut open.progs.latency_exit,
        &mut open.progs.latency_fork,
        &mut open.progs.floor_call_enter,
        &mut open.progs.floor_call_exit,
    ] {
        p.set_autoload(false);
    }
    let mut skel = open.load()?;
    skel.attach()?;
    let ids = [&skel.progs.floor_enter, &skel.progs.floor_exit]
        .map(|p| libbpf_rs::ProgramHandle::try_from(p).map(|h| h.id()).unwrap_or(0));
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do "$@" || exit 1; i=$((i + 1)); done"#, "sh"])
        .arg(RUNS.to_string())
        .arg(&w.bin)
        .args(&w.args);
    {
        let _on = BpfStats::on();
        run_measured(&mut cmd)?;
    }
    let progs: Vec<(String, u64, u64)> = libbpf_rs::query::ProgInfoIter::default()
        .filter(|i| ids.contains(&i.id))
        .map(|i| (i.name.to_string_lossy().into_owned(), i.run_cnt, i.run_time_ns))
        .collect();
    drop(skel);
    if progs.iter().all(|p| p.1 == 0) {
        bail!("no BPF program stats for the count-only floor (kernel.bpf_stats_enabled?)");
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "  {}, count-only floor: {RUNS} runs (every syscall of the machine counted: what the measurement reads for a program that does next to nothing)",
        w.title
    );
    header(&mut t, "");
    for (name, runs, ns) in &progs {
        program_row(&mut t, name, *runs, *ns, 0);
    }
    Ok(t)
}

/// The column heads of a stage table; `per` names the unit of the third.
fn header(t: &mut String, per: &str) {
    let _ = writeln!(t, "    {:<40}{:>12}{:>11}{:>14}{:>10}", "stage", "CPU ms/run", per, "calls/run", "ns/call");
}

/// A BPF program's row: its `runs` and run time `ns` over [`RUNS`] runs
/// of the workload that made `units` records.
fn program_row(t: &mut String, name: &str, runs: u64, ns: u64, units: u64) {
    let n = RUNS as f64;
    // No units (the count-only floor writes no records): no per-unit column.
    let per_unit = if units == 0 { String::new() } else { format!("{:.0}", ns as f64 / units as f64) };
    let _ = writeln!(
        t,
        "    {:<40}{:>12.2}{per_unit:>11}{:>14.0}{:>10.0}",
        format!("BPF {name}"),
        ns as f64 / n / 1e6,
        runs as f64 / n,
        ns as f64 / runs.max(1) as f64
    );
}
