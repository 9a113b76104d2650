//! Helpers for the end-to-end tests: the built `mltrace` binary, C
//! workloads compiled on the spot, Perfetto's importer, logs as records.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use mltrace_log::{LogReader, Record, Value};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

pub mod allow;
mod binary;
pub mod proc;
pub mod stand_in;
pub mod steal;
pub mod tools;

pub use binary::mltrace_bin;
pub use proc::{spawn, Spawned};
pub use tools::{perfetto_tp, skip, skip_optional, torchrun, tp_query};

/// `mltrace ARGS` in `cwd`, to completion (stdin empty, output captured).
pub fn mltrace(args: &[&str], cwd: &Path) -> Output {
    proc::output(Command::new(mltrace_bin()).args(args).current_dir(cwd))
}

/// Whether the tests run in a fully emulated guest (scripts/test-kernels.sh
/// sets MLTRACE_EMULATED there): timings against a workload's own clock
/// are stretched by the emulator, and bounds on them widen.
pub fn emulated() -> bool {
    std::env::var_os("MLTRACE_EMULATED").is_some()
}

/// The modules whose tests hold figures against a workload's own clock
/// (CPU shares, waits, noise): each of their tests runs alone on the
/// machine, every other test shares it (one process runs them all, two at
/// a time by default, and a busy neighbour shows in a verdict's figures).
pub const TIMED: &[&str] = &[
    "breakdown_e2e",
    "diff_e2e",
    "gil_e2e",
    "jitter_e2e",
    // The kind must turn cpu-bound when the trainer computes: a
    // neighbour's load would make it wait for a CPU instead.
    "metrics_e2e",
    "ranks_e2e",
    "sched_e2e",
    "step_waits_e2e",
    "suggest_e2e",
    "thread_loaders_e2e",
    "wakeups_e2e",
];

static MACHINE: RwLock<()> = RwLock::new(());

/// A test's turn on the machine, held while it runs (see [`TIMED`]).
pub enum Turn {
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
}

/// The turn of a test in `module` (a `module_path!()`).
pub fn turn(module: &str) -> Turn {
    let name = module.rsplit("::").next().unwrap_or(module);
    // A test that panicked held its turn: the others go on.
    if TIMED.contains(&name) || name == ALONE {
        Turn::Alone(MACHINE.write().unwrap_or_else(|e| e.into_inner()))
    } else {
        Turn::Shared(MACHINE.read().unwrap_or_else(|e| e.into_inner()))
    }
}

/// BPF tests need root. Without it they fail, unless the developer opts
/// out explicitly with MLTRACE_SKIP_BPF_TESTS=1 (never set in CI). With
/// root, the test's turn on the machine ([`require_root!`]).
pub fn root_turn(module: &str) -> Option<Turn> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Some(turn(module));
    }
    if std::env::var_os("MLTRACE_SKIP_BPF_TESTS").is_some() {
        skip_optional("BPF end-to-end test", "needs root (MLTRACE_SKIP_BPF_TESTS is set)");
        return None;
    }
    panic!("the BPF end-to-end tests need root (or set MLTRACE_SKIP_BPF_TESTS=1 to skip them)");
}

/// The turn of one test that must have the machine to itself though its
/// module need not: it reads machine-wide counters a neighbour's traffic
/// shows in (`require_root!(alone)`).
pub const ALONE: &str = "alone";

/// `let Some(_turn) = require_root!() else { return };` at a BPF test's
/// start: root, and the test's turn on the machine, held to its end;
/// `require_root!(alone)`: that turn alone on the machine ([`ALONE`]).
#[macro_export]
macro_rules! require_root {
    () => {
        $crate::root_turn(module_path!())
    };
    (alone) => {
        $crate::root_turn($crate::ALONE)
    };
}

/// Compiles tests/workloads/<name>.c into `dir`.
pub fn compile_workload(name: &str, dir: &Path) -> PathBuf {
    let src = repo().join("tests/workloads").join(format!("{name}.c"));
    let out = dir.join(name);
    let st = Command::new("cc").args(["-O2", "-pthread", "-o"]).arg(&out).arg(&src).status().expect("running cc");
    assert!(st.success(), "compiling {}", src.display());
    out
}

/// `key value` lines, as the workloads print them.
pub fn key_values(text: &str) -> HashMap<String, i64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// A record with its strings resolved (for assertions).
#[derive(Clone, Debug)]
pub struct Rec {
    pub rec: Record,
    /// The record's strings in field order (path, abs path, ...).
    pub strs: Vec<String>,
}

/// Every record of a log, strings resolved; panics on any diagnostic.
pub fn read_log(path: &Path) -> Vec<Rec> {
    let mut r = LogReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(rec) = f.next_record() {
            let mut strs = Vec::new();
            rec.visit(&mut |_, v| {
                if let Value::Str(id) = v {
                    strs.push(f.str_lossy(id).into_owned());
                }
            });
            out.push(Rec { rec, strs });
        }
    }
    let d = r.take_diagnostics();
    assert!(d.is_empty(), "diagnostics: {d:?}");
    assert!(r.trailer().is_some(), "log has no trailer");
    out
}

/// The processes whose counter samples come in the log before the
/// record of their fork (pid, the sample's and the fork's places): the
/// model learns a process from its first record, so a worker sampled
/// first is not seen as its parent's worker.
pub fn sampled_before_forked(recs: &[Rec]) -> Vec<(u32, usize, usize)> {
    let mut first_sample: HashMap<u32, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        match &r.rec {
            Record::Counter(c) if c.pid != 0 => {
                first_sample.entry(c.pid).or_insert(i);
            }
            Record::Fork(f) if !f.thread => {
                if let Some(&s) = first_sample.get(&f.pid) {
                    out.push((f.pid, s, i));
                }
            }
            // Its pid may be another process's later.
            Record::Exit(e) if e.process_exit => {
                first_sample.remove(&e.pid);
            }
            _ => {}
        }
    }
    out
}

/// Mapping calls and major faults of process `pid` (or all) that the
/// trace draws (those about data files), by replaying the log through the
/// model's mapping tables.
pub fn drawn_mappings(recs: &[Rec], pid: Option<u32>) -> usize {
    use mltrace_model::maps::{MapClass, Maps};
    let mut maps = Maps::default();
    let mut n = 0;
    for r in recs {
        match r.rec {
            Record::MajorFault(f) if pid.is_none_or(|p| p == f.pid) => {
                n += usize::from(maps.find(f.pid, f.addr).is_some())
            }
            Record::Mapping(m) => {
                let a = maps.apply_path(&r.rec, r.strs.first().map_or(&b""[..], |s| s.as_bytes()));
                n += usize::from(pid.is_none_or(|p| p == m.pid) && a.class == Some(MapClass::Data));
            }
            _ => {
                maps.apply_path(&r.rec, b"");
            }
        }
    }
    n
}

/// The machine's Python interpreter itself: `python3` resolved past
/// launchers such as pyenv's shims (shell scripts whose forks would be
/// recorded too). Without one the check is skipped (and fails in CI).
pub fn system_python() -> Option<String> {
    let out = Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output();
    match out {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        _ => {
            skip("a Python workload", "python3 is missing");
            None
        }
    }
}

/// Process `pid`'s first exec in a log.
fn exec_ts(recs: &[Rec], pid: u32) -> Option<u64> {
    recs.iter().find_map(|r| match r.rec {
        Record::Exec(x) if x.pid == pid => Some(x.ts),
        _ => None,
    })
}

/// Process `pid`'s life in a log, its exec to its exit, in ns: what the
/// verdict's shares of a trainer are of.
pub fn exec_to_exit(recs: &[Rec], pid: u32) -> u64 {
    let exit = recs.iter().find_map(|r| match r.rec {
        Record::Exit(x) if x.pid == pid && x.process_exit => Some(x.ts),
        _ => None,
    });
    exit.expect("the process's exit") - exec_ts(recs, pid).expect("the process's exec")
}

/// Process `pid`'s fork to its exec in a log, in ns (0 without its fork
/// in the log): the clocks of its main thread (CPU time, run delay) count
/// this time, which is before its life in the verdict.
pub fn fork_to_exec(recs: &[Rec], pid: u32) -> u64 {
    let fork = recs.iter().find_map(|r| match r.rec {
        Record::Fork(x) if x.tid == pid => Some(x.ts),
        _ => None,
    });
    match (fork, exec_ts(recs, pid)) {
        (Some(f), Some(e)) => e.saturating_sub(f),
        _ => 0,
    }
}

/// A finished recording: its log, the workload's `key value` lines (its
/// stdout), and `stats --json` of the log.
pub struct Recorded {
    pub log: PathBuf,
    pub kv: HashMap<String, i64>,
    pub json: serde_json::Value,
}

/// `record`'s `out` checked (exit 0, nothing lost), then `stats --json` of `log`.
pub fn recorded(out: &Output, log: PathBuf, dir: &Path) -> Recorded {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    if !stderr.contains(" 0 lost") {
        // What the lost paths were in: the records that name a file `?`,
        // and the calls whose passed path or arguments could not be read.
        let recs = read_log(&log);
        let show = |r: &Rec| format!("{:?} {:?}", r.rec, r.strs);
        let unknown: Vec<String> =
            recs.iter().filter(|r| r.strs.iter().any(|s| s == "?" || s.starts_with("/?"))).take(5).map(show).collect();
        let unreadable = |t: u8| t & mltrace_log::trunc::UNREADABLE != 0;
        let unreadable: Vec<String> = recs
            .iter()
            .filter(|r| match &r.rec {
                Record::Open(o) => unreadable(o.trunc),
                Record::MetaCall(m) => unreadable(m.trunc),
                Record::Exec(e) => unreadable(e.trunc),
                _ => false,
            })
            .take(5)
            .map(show)
            .collect();
        panic!("{stderr}records with an unknown path: {unknown:#?}\ncalls with an unreadable string: {unreadable:#?}");
    }
    let kv = key_values(&String::from_utf8_lossy(&out.stdout));
    let js = mltrace(&["stats", "--json", log.to_str().unwrap()], dir);
    assert!(js.status.success(), "{}", String::from_utf8_lossy(&js.stderr));
    Recorded { log, kv, json: serde_json::from_slice(&js.stdout).unwrap() }
}

/// `export --parquet` of `log` into `dir`; the rows of each table named.
pub fn parquet_rows(log: &Path, dir: &Path, tables: &[&str]) -> Vec<usize> {
    let o = mltrace(&["export", "--parquet", log.to_str().unwrap(), "-o", dir.to_str().unwrap()], Path::new("."));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    tables
        .iter()
        .map(|t| {
            let f = std::fs::File::open(dir.join(format!("{t}.parquet"))).unwrap();
            let reader =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).unwrap().build().unwrap();
            reader.map(|b| b.unwrap().num_rows()).sum()
        })
        .collect()
}

/// A figure of a `--detail summary` recording within `tol` of full
/// detail's for the same workload, run twice: beyond `tol`, only by as
/// much as the workload's own measurements of its two runs differ.
/// Each pair is (what the verdict says, what the workload measured).
pub fn summary_agrees(what: &str, full: (f64, f64), summary: (f64, f64), tol: f64) {
    summary_agrees_queued(what, full, summary, tol, 0.0)
}

/// [`summary_agrees`] where up to `queued` of what each run measured
/// (in the same shares) was time its own clock counted as waiting that
/// the kernel counts as queued for a CPU: after a wake-up on a busy
/// machine, which the verdict's waits end at. Each run's figure may sit
/// that far below its measurement, so the two by as much apart.
pub fn summary_agrees_queued(what: &str, full: (f64, f64), summary: (f64, f64), tol: f64, queued: f64) {
    let own = (full.1 - summary.1).abs() + queued;
    let got = (full.0 - summary.0).abs();
    assert!(
        got <= tol + own,
        "{what}: full detail {:.4}, summary {:.4} (the workload measured {:.4} and {:.4}, \
         up to {queued:.4} of it queued for a CPU)",
        full.0,
        summary.0,
        full.1,
        summary.1
    );
    eprintln!(
        "{what}: full {:.4} summary {:.4} (measured {:.4} / {:.4}, queued up to {queued:.4})",
        full.0, summary.0, full.1, summary.1
    );
}

/// How many records of `log` are scheduling ones: (switches and wake-ups, summed spans).
pub fn sched_records(log: &Path) -> (usize, usize) {
    let recs = read_log(log);
    let switches = recs.iter().filter(|r| matches!(r.rec, Record::SchedSwitch(_) | Record::SchedWake(_))).count();
    let spans = recs.iter().filter(|r| matches!(r.rec, Record::SchedSpan(_))).count();
    (switches, spans)
}

/// The syscall routes to record on: the one make test-kernels names
/// (MLTRACE_SYSCALL_PROBES), else the three every machine here has (the
/// trampoline route only where it is named: these VMs have no trampolines).
pub fn routes() -> Vec<&'static str> {
    match std::env::var("MLTRACE_SYSCALL_PROBES").ok().as_deref() {
        Some("fast") => vec!["fast"],
        Some("per-call") => vec!["per-call"],
        Some("compat") => vec!["compat"],
        Some("trampoline") => vec!["trampoline"],
        _ => vec!["fast", "per-call", "compat"],
    }
}

/// A cgroup made for a test (its directory), removed (its processes
/// gone) on drop.
pub struct TestCgroup(pub PathBuf);

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}
