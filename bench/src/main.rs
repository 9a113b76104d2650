//! `make bench`: what tracing costs, measured side by side in one run.
//!
//! Every configuration of a workload runs in turn, round after round, so a
//! machine that gets busier or quieter affects them all alike; the table
//! shows medians. Times are the workloads' own loop times (printed by the
//! C programs), so a tracer's start-up is not counted against it, except in
//! the start-up row, which measures exactly that.

use std::fs;
use std::io::Write;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use mltrace_log::*;

mod cold;
mod cuda;
mod job;
mod stages;

#[allow(clippy::all, non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code, unused_imports)]
mod floor {
    include!(concat!(env!("OUT_DIR"), "/floor.skel.rs"));
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tool {
    Untraced,
    Floor,
    /// The count-only programs on each recorded call's own tracepoints:
    /// the per-call route's floor.
    CallsFloor,
    LatencyFloor,
    Mltrace,
    /// mltrace on the per-call route (--syscall-probes per-call), side by
    /// side with the default (the fast route: tp_btf on every syscall).
    MltracePerCall,
    /// mltrace without scheduling capture: what scheduling costs.
    MltraceNoSched,
    /// Another build of mltrace (BENCH_BASELINE=PATH), run side by side:
    /// whether a change made the recorder slower.
    MltraceBaseline,
    /// `record --detail summary --slow 1ms`: the mode meant to be left on
    /// every job (only where this build of mltrace has `--detail`).
    MltraceSummary,
    /// The baseline build's summary (with BENCH_BASELINE): whether a change
    /// made the summary slower.
    MltraceBaselineSummary,
    Bpftrace,
    Strace,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Untraced => "untraced",
            Tool::Floor => "count-only BPF",
            Tool::CallsFloor => "count per call",
            Tool::LatencyFloor => "latency floor",
            Tool::Mltrace => "mltrace record",
            Tool::MltracePerCall => "mltrace per-call route",
            Tool::MltraceNoSched => "mltrace --sched off",
            Tool::MltraceBaseline => "mltrace baseline",
            Tool::MltraceSummary => "mltrace summary",
            Tool::MltraceBaselineSummary => "mltrace baseline summary",
            Tool::Bpftrace => "bpftrace printf",
            Tool::Strace => "strace -f",
        }
    }
}

struct Workload {
    key: &'static str,
    title: &'static str,
    bin: PathBuf,
    args: Vec<String>,
    /// The name of the traced processes (bpftrace's filter).
    comm: String,
    /// Runs per tool in each round: a workload of a tenth of a second needs
    /// more samples than a round count that suits the others.
    repeat: usize,
}

struct Bench {
    dir: PathBuf,
    mltrace: PathBuf,
    baseline: Option<PathBuf>,
    script: String,
    reps: usize,
    tools: Vec<Tool>,
    skipped: Vec<String>,
}

/// One run's outcome.
#[derive(Default, Clone)]
struct Run {
    loop_ns: u64,
    /// Bytes of output (log, text) and events in it.
    out_bytes: u64,
    events: u64,
    lost: u64,
    /// The tracer's peak RSS (KiB), where measured.
    rss_kib: u64,
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    if v.is_empty() {
        0
    } else {
        v[v.len() / 2]
    }
}

/// Runs `cmd`, returns its stdout.
fn run_measured(cmd: &mut Command) -> Result<String> {
    let out = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().context("spawning")?.wait_with_output()?;
    if !out.status.success() {
        bail!("{:?} failed ({:?}): {}", cmd, out.status.code(), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `cmd` and returns (stdout, its peak RSS in KiB). Linux keeps a
/// process's peak RSS across fork and exec, so a child of this (large)
/// process would report at least our own: the command is started through
/// a fresh, small copy of this binary (`--peak-rss`) that reports it.
fn rss_of(cmd: &mut Command) -> Result<(String, u64)> {
    rss_with(cmd, Stdio::piped())
}

/// [`rss_of`] with `cmd`'s output thrown away (not read into the bench).
fn rss_quiet(cmd: &mut Command) -> Result<u64> {
    Ok(rss_with(cmd, Stdio::null())?.1)
}

fn rss_with(cmd: &mut Command, stdout: Stdio) -> Result<(String, u64)> {
    let report = tempfile_path("rss");
    let mut launcher = Command::new(std::env::current_exe()?);
    launcher.arg("--peak-rss").arg(&report).arg(cmd.get_program()).args(cmd.get_args());
    if let Some(d) = cmd.get_current_dir() {
        launcher.current_dir(d);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => launcher.env(k, v),
            None => launcher.env_remove(k),
        };
    }
    let out = launcher.stdout(stdout).stderr(Stdio::null()).output()?;
    if !out.status.success() {
        bail!("{cmd:?} failed ({:?})", out.status.code());
    }
    let kib = fs::read_to_string(&report)?.trim().parse().context("peak RSS report")?;
    let _ = fs::remove_file(&report);
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), kib))
}

fn tempfile_path(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("mltrace-bench-{what}-{}", std::process::id()))
}

/// Runs `w` under the latency floor (bpf/floor.bpf.c): per-thread start
/// times in task storage, one ring record per syscall, drained by a thread
/// of ours as mltrace's consumer drains its ring.
fn latency_floor(w: &Workload) -> Result<String> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let mut storage = MaybeUninit::uninit();
    let mut open = floor::FloorSkelBuilder::default().open(&mut storage)?;
    open.progs.floor_enter.set_autoload(false);
    open.progs.floor_exit.set_autoload(false);
    let mut skel = open.load()?;
    skel.attach()?;
    let records = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    // An owned handle the consumer thread can hold (the skeleton's is not Sync).
    let records_map = libbpf_rs::MapHandle::try_from(&skel.maps.records)?;
    let target = &mut skel.maps.bss_data.as_deref_mut().context("floor .bss")?.target_tgid;
    let out = std::thread::scope(|s| -> Result<String> {
        let consumer = s.spawn(|| -> Result<()> {
            let mut rb = libbpf_rs::RingBufferBuilder::new();
            rb.add(&records_map, |_| {
                records.fetch_add(1, Ordering::Relaxed);
                0
            })?;
            let rb = rb.build()?;
            while !done.load(Ordering::Relaxed) {
                let _ = rb.poll(std::time::Duration::from_millis(50));
                let _ = rb.consume();
            }
            let _ = rb.consume();
            Ok(())
        });
        let child = Command::new(&w.bin).args(&w.args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        // Set as soon as it runs: its timed loop starts after exec and
        // loading, well after this.
        *target = child.id();
        let out = child.wait_with_output()?;
        done.store(true, Ordering::Relaxed);
        consumer.join().expect("latency floor consumer panicked")?;
        if !out.status.success() {
            bail!("{} failed under the latency floor", w.bin.display());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    })?;
    if records.load(Ordering::Relaxed) == 0 {
        bail!("the latency floor recorded nothing");
    }
    Ok(out)
}

/// `--peak-rss FILE CMD...`: runs CMD, writes its peak RSS (KiB) to FILE,
/// exits with its status.
fn peak_rss_launcher(args: &[String]) -> ! {
    let status = (|| -> Result<i32> {
        let mut child = Command::new(&args[1]).args(&args[2..]).spawn()?;
        let mut status = 0;
        // SAFETY: rusage is plain data; we reap our own child.
        let ru = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::wait4(child.id() as i32, &mut status, 0, &mut ru);
            ru
        };
        let _ = child.try_wait();
        fs::write(&args[0], ru.ru_maxrss.to_string())?;
        Ok(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) })
    })();
    std::process::exit(status.unwrap_or(125))
}

fn first_number(s: &str) -> Result<u64> {
    s.lines().rev().find_map(|l| l.trim().parse::<f64>().ok()).map(|v| v as u64).context("no number in the output")
}

/// (records, lost, syscall records) of a log.
fn log_counts(p: &Path) -> Result<(u64, u64, u64)> {
    let mut r = LogReader::open(p)?;
    let (mut n, mut lost, mut sys) = (0, 0, 0);
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            n += 1;
            match rec {
                Record::Lost(l) => lost += l.count,
                Record::Io(_) | Record::Open(_) | Record::Close(_) | Record::Transfer(_) => sys += 1,
                _ => {}
            }
        }
    }
    Ok((n, lost, sys))
}

impl Bench {
    fn run(&self, tool: Tool, w: &Workload) -> Result<Run> {
        let out = self.dir.join(format!("out-{}", w.key));
        let mut run = Run::default();
        let stdout = match tool {
            Tool::Untraced => run_measured(Command::new(&w.bin).args(&w.args))?,
            Tool::Floor | Tool::CallsFloor => {
                let per_call = tool == Tool::CallsFloor;
                let mut storage = MaybeUninit::uninit();
                let mut open = floor::FloorSkelBuilder::default().open(&mut storage)?;
                open.progs.latency_enter.set_autoload(false);
                open.progs.latency_exit.set_autoload(false);
                open.progs.latency_fork.set_autoload(false);
                open.progs.floor_enter.set_autoload(!per_call);
                open.progs.floor_exit.set_autoload(!per_call);
                open.progs.floor_call_enter.set_autoload(per_call);
                open.progs.floor_call_exit.set_autoload(per_call);
                open.progs.floor_call_enter.set_autoattach(false);
                open.progs.floor_call_exit.set_autoattach(false);
                let mut skel = open.load()?;
                skel.attach()?;
                let mut links = Vec::new();
                if per_call {
                    // What mltrace's per-call route attaches (mappings on).
                    for name in mltrace_capture::bpf::call_names(true, false) {
                        for (p, tp) in
                            [(&skel.progs.floor_call_enter, "sys_enter"), (&skel.progs.floor_call_exit, "sys_exit")]
                        {
                            let tp = format!("{tp}_{name}");
                            links.push(
                                p.attach_tracepoint(libbpf_rs::TracepointCategory::Syscalls, &tp)
                                    .with_context(|| format!("attaching to syscalls:{tp}"))?,
                            );
                        }
                    }
                }
                let s = run_measured(Command::new(&w.bin).args(&w.args))?;
                drop(links);
                drop(skel);
                s
            }
            Tool::LatencyFloor => latency_floor(w)?,
            Tool::Mltrace
            | Tool::MltracePerCall
            | Tool::MltraceNoSched
            | Tool::MltraceBaseline
            | Tool::MltraceSummary
            | Tool::MltraceBaselineSummary => {
                let log = out.with_extension("bin");
                let sched = if tool == Tool::MltraceNoSched { "off" } else { "on" };
                let bin = match (tool, &self.baseline) {
                    (Tool::MltraceBaseline | Tool::MltraceBaselineSummary, Some(b)) => b,
                    _ => &self.mltrace,
                };
                let mode: &[&str] = match tool {
                    Tool::MltraceSummary | Tool::MltraceBaselineSummary => &["--detail", "summary", "--slow", "1ms"],
                    Tool::MltracePerCall => &["--sched", "on", "--syscall-probes", "per-call"],
                    _ => &["--sched", sched],
                };
                let (s, rss) = rss_of(
                    Command::new(bin)
                        .args(["record", "-q", "-f", "--gpu", "off"])
                        .args(mode)
                        .arg("-o")
                        .arg(&log)
                        .arg("--")
                        .arg(&w.bin)
                        .args(&w.args),
                )?;
                let (n, lost, _) = log_counts(&log)?;
                run.out_bytes = fs::metadata(&log)?.len();
                run.events = n;
                run.lost = lost;
                run.rss_kib = rss;
                s
            }
            Tool::Bpftrace => {
                let txt = out.with_extension("bt.txt");
                let script = self.script.replace("WORKLOAD", &w.comm);
                let cmdline =
                    std::iter::once(w.bin.display().to_string()).chain(w.args.iter().cloned()).collect::<Vec<_>>();
                let s = run_measured(Command::new("bpftrace").args(["-q", "-o"]).arg(&txt).args([
                    "-c",
                    &cmdline.join(" "),
                    "-e",
                    &script,
                ]))?;
                run.out_bytes = fs::metadata(&txt)?.len();
                run.events = fs::read(&txt)?.iter().filter(|&&b| b == b'\n').count() as u64;
                s
            }
            Tool::Strace => {
                let txt = out.with_extension("strace.txt");
                run_measured(Command::new("strace").args(["-f", "-qq", "-o"]).arg(&txt).arg(&w.bin).args(&w.args))?
            }
        };
        run.loop_ns = first_number(&stdout)?;
        Ok(run)
    }
}

fn cc(src: &Path, out: &Path) -> Result<()> {
    let st = Command::new("cc").args(["-O2", "-pthread", "-o"]).arg(out).arg(src).status()?;
    if !st.success() {
        bail!("compiling {}", src.display());
    }
    Ok(())
}

fn write_file(p: &Path, len: usize, seed: u64) -> Result<()> {
    let mut s = seed | 1;
    let data: Vec<u8> = (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect();
    fs::write(p, data)?;
    Ok(())
}

fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--peak-rss") && argv.len() > 3 {
        peak_rss_launcher(&argv[2..]);
    }
    // `--synthetic-run PATH EPOCHS EPOCH_SECS RATE`: a made-up training run
    // (workers, phases, counters, block I/O) for export checks and `make soak`.
    if argv.get(1).map(String::as_str) == Some("--synthetic-run") && argv.len() == 6 {
        let n = |i: usize| -> Result<u64> { argv[i].parse().with_context(|| format!("{}: a number", argv[i])) };
        let spec = mltrace_testlog::synthetic::Spec {
            epochs: n(3)? as u32,
            epoch_ns: n(4)? * 1_000_000_000,
            rate: n(5)?,
            workers: 4,
        };
        let f = std::io::BufWriter::new(fs::File::create(&argv[2])?);
        let calls = mltrace_testlog::synthetic::write(f, spec)?;
        println!("{calls} syscall records written to {}", argv[2]);
        return Ok(());
    }
    // `--synthetic-log PATH N`: just the export benchmark's input, for profiling.
    if argv.get(1).map(String::as_str) == Some("--synthetic-log") && argv.len() == 4 {
        return synthetic_log(Path::new(&argv[2]), argv[3].parse().context("N: a number of events")?);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("target/bench");
    fs::create_dir_all(&dir)?;
    let mltrace = root.join("target/release/mltrace");
    if !mltrace.exists() {
        bail!("{} missing: `cargo build --release -p mltrace` first (make bench does)", mltrace.display());
    }
    let reps: usize = std::env::var("BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    // The long recording's length (0 skips it).
    let long_secs: u64 = std::env::var("BENCH_LONG_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(600);
    // BENCH_TOOLS=untraced,floor,mltrace and BENCH_ONLY=a,b,e,f,job,export,long: quick partial runs.
    let only_tools = std::env::var("BENCH_TOOLS").ok();
    let wanted = |t: Tool| only_tools.as_deref().is_none_or(|l| l.split(',').any(|n| t.name().starts_with(n.trim())));
    let mut tools: Vec<Tool> = [
        Tool::Untraced,
        Tool::Floor,
        Tool::CallsFloor,
        Tool::LatencyFloor,
        Tool::Mltrace,
        Tool::MltracePerCall,
        Tool::MltraceNoSched,
    ]
    .into_iter()
    .filter(|&t| wanted(t))
    .collect();
    let mut skipped = Vec::new();
    let baseline = std::env::var_os("BENCH_BASELINE").map(PathBuf::from);
    if let Some(b) = &baseline {
        if !b.exists() {
            bail!("BENCH_BASELINE={}: no such file", b.display());
        }
        if wanted(Tool::MltraceBaseline) {
            tools.push(Tool::MltraceBaseline);
        }
    }
    // `record --detail summary`, once this build has it (its --help says so).
    if wanted(Tool::MltraceSummary) {
        let help = Command::new(&mltrace).args(["record", "--help"]).output()?;
        if String::from_utf8_lossy(&help.stdout).contains("--detail") {
            tools.push(Tool::MltraceSummary);
            if baseline.is_some() && wanted(Tool::MltraceBaselineSummary) {
                tools.push(Tool::MltraceBaselineSummary);
            }
        } else {
            skipped.push(format!("{}: this mltrace has no `record --detail`", Tool::MltraceSummary.name()));
        }
    }
    for (t, bin) in [(Tool::Bpftrace, "bpftrace"), (Tool::Strace, "strace")] {
        if !wanted(t) {
            continue;
        }
        if Command::new("sh").args(["-c", &format!("command -v {bin}")]).output()?.status.success() {
            tools.push(t);
        } else {
            skipped.push(format!("{}: {bin} is not installed", t.name()));
        }
    }
    let wl = root.join("bench/workloads");
    for name in ["pread_loop", "loader", "direct", "mapped", "paced", "churn"] {
        cc(&wl.join(format!("{name}.c")), &dir.join(name))?;
    }
    eprintln!("bench: preparing data in {}", dir.display());
    let cached = dir.join("cached.bin");
    write_file(&cached, 1 << 20, 1)?;
    let files = dir.join("files");
    let nfiles = 4000usize;
    if !files.join((nfiles - 1).to_string()).exists() {
        fs::create_dir_all(&files)?;
        for i in 0..nfiles {
            write_file(&files.join(i.to_string()), 4096 + (i * 7919) % (60 << 10), i as u64)?;
        }
    }
    let big = dir.join("direct.bin");
    if fs::metadata(&big).map(|m| m.len()).unwrap_or(0) != 256 << 20 {
        write_file(&big, 256 << 20, 3)?;
    }
    let mapped = dir.join("mapped.bin");
    if fs::metadata(&mapped).map(|m| m.len()).unwrap_or(0) != 256 << 20 {
        write_file(&mapped, 256 << 20, 4)?;
    }
    let _ = Command::new("sync").status();
    // Warm the page cache for (a) and (b); (c) bypasses it.
    let _ = Command::new("sh")
        .args(["-c", &format!("cat {} {}/* > /dev/null", cached.display(), files.display())])
        .status();
    let mut bench = Bench {
        dir: dir.clone(),
        mltrace: mltrace.clone(),
        baseline,
        script: fs::read_to_string(wl.join("study.bt"))?,
        reps,
        tools,
        skipped,
    };
    let only = std::env::var("BENCH_ONLY").ok();
    let run_w = |k: &str| only.as_deref().is_none_or(|l| l.split(',').any(|x| x.trim() == k));
    let quick = only.is_some();
    let mut workloads = vec![
        Workload {
            key: "a",
            title: "(a) 1M preads of 4 KiB, cached",
            bin: dir.join("pread_loop"),
            args: vec![cached.display().to_string(), "1000000".into()],
            comm: "pread_loop".into(),
            repeat: 1,
        },
        Workload {
            key: "b",
            title: "(b) data loader: 4 workers, 4000 small files x5",
            bin: dir.join("loader"),
            args: vec![files.display().to_string(), nfiles.to_string(), "4".into(), "5".into()],
            comm: "loader".into(),
            repeat: 5,
        },
        Workload {
            key: "c",
            title: "(c) 300 O_DIRECT reads of 1 MiB",
            bin: dir.join("direct"),
            args: vec![big.display().to_string(), "300".into()],
            comm: "direct".into(),
            repeat: 1,
        },
        Workload {
            key: "d",
            title: "(d) cold 256 MiB file through mmap, 4 KiB stride",
            bin: dir.join("mapped"),
            args: vec![mapped.display().to_string()],
            comm: "mapped".into(),
            repeat: 1,
        },
    ];
    if run_w("p") {
        match small_files(&dir, &wl) {
            Ok(w) => workloads.push(w),
            Err(e) => bench.skipped.push(format!("(p) the Python small-file loader: {e:#}")),
        }
    }
    // 1. Overhead, alternating tools round by round.
    let mut results: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); bench.tools.len()]; workloads.len()];
    for round in 0..bench.reps {
        for (wi, w) in workloads.iter().enumerate() {
            if !run_w(w.key) {
                continue;
            }
            // Whatever runs first after another workload finds colder
            // caches (dentries, the host's disk cache): an untimed warm-up
            // run, and the order of the tools turns each round.
            eprint!("\rbench: round {}/{} {} {:<16}", round + 1, bench.reps, w.key, "warm-up");
            let _ = bench.run(Tool::Untraced, w);
            let n = bench.tools.len();
            for ti in (0..n).map(|j| (j + round) % n) {
                let t = bench.tools[ti];
                // The slow tools run at most 3 rounds: a median of 3 is enough
                // to show a 10x difference.
                if matches!(t, Tool::Bpftrace | Tool::Strace) && round >= 3 {
                    continue;
                }
                let repeat = if matches!(t, Tool::Bpftrace | Tool::Strace) { 1 } else { w.repeat };
                for _ in 0..repeat {
                    eprint!("\rbench: round {}/{} {} {:<16}", round + 1, bench.reps, w.key, t.name());
                    let _ = std::io::stderr().flush();
                    match bench.run(t, w) {
                        Ok(r) => results[wi][ti].push(r),
                        Err(e) => eprintln!("\nbench: {} on {}: {e:#}", t.name(), w.key),
                    }
                }
            }
        }
    }
    eprintln!();
    let med = |wi: usize, t: Tool| -> Option<u64> {
        let ti = bench.tools.iter().position(|&x| x == t)?;
        let mut v: Vec<u64> = results[wi][ti].iter().map(|r| r.loop_ns).collect();
        (!v.is_empty()).then(|| median(&mut v))
    };
    let mut table = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(
        table,
        "\n== 1. Capture overhead (median loop time of {} rounds, 5 runs a round on (b), 3 on (p); x = traced / \
         untraced) ==",
        bench.reps
    );
    let _ = write!(table, "{:<48}", "workload");
    for t in &bench.tools {
        let _ = write!(table, "{:>22}", t.name());
    }
    let _ = writeln!(table);
    for (wi, w) in workloads.iter().enumerate() {
        let _ = write!(table, "{:<48}", w.title);
        let base = med(wi, Tool::Untraced).unwrap_or(1).max(1);
        for &t in &bench.tools {
            let cell =
                med(wi, t).map(|m| format!("{} (x{:.2})", secs(m), m as f64 / base as f64)).unwrap_or("-".into());
            let _ = write!(table, "{cell:>22}");
        }
        let _ = writeln!(table);
    }
    for s in &bench.skipped {
        let _ = writeln!(table, "skipped: {s}");
    }
    let _ = writeln!(table, "\ntargets:");
    let added = |wi: usize, t: Tool| med(wi, t).map(|m| m as f64 - med(wi, Tool::Untraced).unwrap_or(0) as f64);
    if let (Some(m), Some(f)) = (added(0, Tool::Mltrace), added(0, Tool::Floor)) {
        let r = m / f.max(1.0);
        let _ = writeln!(table, "  (a) mltrace's added time <= 1.3x the floor's: {r:.2}x  {}", verdict(r <= 1.3));
    }
    if let (Some(m), Some(f)) = (added(0, Tool::Mltrace), added(0, Tool::LatencyFloor)) {
        let _ = writeln!(
            table,
            "      (for reference: {:.2}x the latency floor's, the least a tracer that times every syscall does)",
            m / f.max(1.0)
        );
    }
    match (added(0, Tool::Bpftrace), added(0, Tool::Mltrace)) {
        (Some(b), Some(m)) => {
            let r = b / m.max(1.0);
            let _ = writeln!(table, "  (a) >= 8x less added time than bpftrace: {r:.1}x  {}", verdict(r >= 8.0));
        }
        _ => {
            let _ = writeln!(table, "  (a) vs bpftrace: not measured (bpftrace missing)");
        }
    }
    if let (Some(m), Some(f)) = (added(1, Tool::Mltrace), added(1, Tool::LatencyFloor)) {
        if m <= 0.0 || f <= 0.0 {
            // An untraced run slower than a traced one: the machine was busy.
            let _ = writeln!(table, "  (b) mltrace vs the latency floor: not measurable (an added time <= 0: noise)");
        } else {
            let r = m / f;
            let _ =
                writeln!(table, "  (b) mltrace's added time <= 2x the latency floor's: {r:.2}x  {}", verdict(r <= 2.0));
        }
    }
    // (p) is there when it runs (it needs python3).
    let p = workloads.iter().position(|w| w.key == "p").map(|wi| (wi, "p"));
    for (wi, key) in [(0, "a"), (1, "b")].into_iter().chain(p) {
        if let (Some(on), Some(off)) = (med(wi, Tool::Mltrace), med(wi, Tool::MltraceNoSched)) {
            let cost = (on as f64 / off.max(1) as f64 - 1.0) * 100.0;
            let _ = writeln!(
                table,
                "  ({key}) scheduling on vs --sched off: {cost:+.1}% (for reference: noise is a few %)"
            );
        }
    }
    // What the per-call route saves: its floor and itself beside the
    // route that runs on every syscall.
    for (wi, key) in [(0, "a"), (1, "b")].into_iter().chain(p) {
        let u = med(wi, Tool::Untraced).unwrap_or(0) as f64;
        let pct = |t: Tool| med(wi, t).map(|m| (m as f64 / u.max(1.0) - 1.0) * 100.0);
        if let (Some(every), Some(calls)) = (pct(Tool::Floor), pct(Tool::CallsFloor)) {
            let _ = writeln!(
                table,
                "  ({key}) count-only floor: {every:+.1}% on every syscall (raw_tp), {calls:+.1}% on the recorded \
                 calls' own tracepoints"
            );
        }
        if let (Some(fast), Some(calls)) = (pct(Tool::Mltrace), pct(Tool::MltracePerCall)) {
            let _ = writeln!(table, "  ({key}) mltrace: fast route (default) {fast:+.1}%, per-call route {calls:+.1}%");
        }
    }
    for (wi, key) in [(0, "a"), (1, "b"), (2, "c"), (3, "d")].into_iter().chain(p) {
        if let (Some(m), Some(b), Some(u)) =
            (med(wi, Tool::Mltrace), med(wi, Tool::MltraceBaseline), med(wi, Tool::Untraced))
        {
            let (added, base) = (m as f64 - u as f64, b as f64 - u as f64);
            let _ = writeln!(
                table,
                "  ({key}) this mltrace vs the baseline build: {:+.1}% time, added time {:.2}x the baseline's",
                (m as f64 / b.max(1) as f64 - 1.0) * 100.0,
                if base > 0.0 { added / base } else { f64::NAN }
            );
        }
    }
    for (wi, key) in [(1, "b"), (2, "c"), (3, "d")] {
        if let (Some(m), Some(u)) = (med(wi, Tool::Mltrace), med(wi, Tool::Untraced)) {
            let slow = (m as f64 / u as f64 - 1.0) * 100.0;
            let _ = writeln!(table, "  ({key}) slowdown < 10%: {slow:+.1}%  {}", verdict(slow < 10.0));
        }
    }
    if let Some((wi, _)) = p {
        if let (Some(m), Some(u)) = (med(wi, Tool::Mltrace), med(wi, Tool::Untraced)) {
            let slow = (m as f64 / u as f64 - 1.0) * 100.0;
            let _ = writeln!(
                table,
                "  (p) python small-file loader: mltrace slowdown < 15%: {slow:+.1}%  {}",
                verdict(slow < 15.0)
            );
        }
        if let (Some(m), Some(f)) = (added(wi, Tool::Mltrace), added(wi, Tool::LatencyFloor)) {
            if m <= 0.0 || f <= 0.0 {
                let _ = writeln!(table, "      vs the latency floor: not measurable (an added time <= 0: noise)");
            } else {
                let _ = writeln!(
                    table,
                    "      added time {:.0} ms, {:.2}x the latency floor's ({:.0} ms)",
                    m / 1e6,
                    m / f,
                    f / 1e6
                );
            }
        }
    }
    for (wi, key) in [(0, "a"), (1, "b")].into_iter().chain(p) {
        if let (Some(m), Some(b), Some(u)) =
            (med(wi, Tool::MltraceSummary), med(wi, Tool::MltraceBaselineSummary), med(wi, Tool::Untraced))
        {
            let (added, base) = (m as f64 - u as f64, b as f64 - u as f64);
            let _ = writeln!(
                table,
                "  ({key}) this summary vs the baseline build's: {:+.1}% time, added time {:.2}x the baseline's",
                (m as f64 / b.max(1) as f64 - 1.0) * 100.0,
                if base > 0.0 { added / base } else { f64::NAN }
            );
        }
    }
    // The mode meant to be left on every job.
    for (wi, key) in [(1, "b")].into_iter().chain(p) {
        if let (Some(m), Some(u)) = (med(wi, Tool::MltraceSummary), med(wi, Tool::Untraced)) {
            let slow = (m as f64 / u as f64 - 1.0) * 100.0;
            let _ = writeln!(table, "  ({key}) summary slowdown < 5%: {slow:+.1}%  {}", verdict(slow < 5.0));
        }
    }
    // 1b. Per stage, for (b) and (p): with BENCH_STAGES=1, and in quick
    // runs (BENCH_ONLY) of either unless BENCH_STAGES=0.
    let want_stages = match std::env::var("BENCH_STAGES").ok().as_deref() {
        Some("0") => false,
        Some(_) => true,
        None => quick,
    };
    let staged: Vec<usize> =
        (0..workloads.len()).filter(|&wi| matches!(workloads[wi].key, "b" | "p") && run_w(workloads[wi].key)).collect();
    if want_stages && !staged.is_empty() {
        let _ = writeln!(
            table,
            "\n== 1b. Where the cost goes, per stage (one recording of each; BPF: kernel.bpf_stats_enabled, with the \
             calls of other processes the programs filter out; the recorder: its threads' CPU from the first run to \
             the last; ns/event: per record in the log) =="
        );
        for wi in staged {
            eprint!("\rbench: per stage, {}{:<20}", workloads[wi].key, "");
            let _ = std::io::stderr().flush();
            // Full detail, and the summary where section 1 ran it.
            let mut modes: Vec<(&[&str], Tool)> = vec![(&[], Tool::Mltrace)];
            if bench.tools.contains(&Tool::MltraceSummary) {
                modes.push((&["--detail", "summary", "--slow", "1ms"], Tool::MltraceSummary));
            }
            for (mode, tool) in modes {
                match stages::stages(&bench, &workloads[wi], mode, added(wi, tool)) {
                    Ok(rows) => table.push_str(&rows),
                    Err(e) => {
                        let _ = writeln!(table, "  {} {}: failed: {e:#}", workloads[wi].title, mode.join(" "));
                    }
                }
            }
        }
        eprintln!();
    }

    if quick {
        if !workloads.iter().any(|w| run_w(w.key)) {
            table.clear();
        }
        if run_w("export") {
            table.push_str(&export_bench(&dir, &mltrace, reps)?);
        }
        if run_w("files") {
            table.push_str(&many_files_bench(&dir, &mltrace)?);
        }
        if run_w("long") && long_secs > 0 {
            table.push_str(&long_run(&dir, &mltrace, long_secs, &[])?);
        }
        if run_w("long") || run_w("summary") {
            table.push_str(&long_summary_runs(&dir, &mltrace)?);
        }
        if run_w("e") {
            table.push_str(&cold::cold_bench(&dir, &mltrace, bench.baseline.as_deref(), reps)?);
        }
        if run_w("f") {
            table.push_str(&cuda::cuda_bench(&dir, &mltrace, reps)?);
        }
        if run_w("job") {
            table.push_str(&job::job_bench(&dir, &mltrace)?);
        }
        println!("{table}");
        return Ok(());
    }
    // 3. Sizes, from the runs above.
    let last = |wi: usize, t: Tool| -> Option<Run> {
        let ti = bench.tools.iter().position(|&x| x == t)?;
        results[wi][ti].last().cloned()
    };
    let _ = writeln!(table, "\n== 3. Size per event ==");
    let mut perfetto_a = None;
    for (wi, key) in [(0, "a"), (1, "b")] {
        let Some(m) = last(wi, Tool::Mltrace) else { continue };
        let log = dir.join(format!("out-{key}.bin"));
        let trace = dir.join(format!("out-{key}.perfetto-trace"));
        let (_, _, sys) = log_counts(&log)?;
        // The default (compressed batches) and plain packets.
        let size = |extra: &[&str]| -> Result<f64> {
            let st = Command::new(&mltrace)
                .arg("export")
                .args(extra)
                .arg(&log)
                .arg("-o")
                .arg(&trace)
                .stderr(Stdio::null())
                .status()?;
            Ok(if st.success() { fs::metadata(&trace)?.len() as f64 / sys.max(1) as f64 } else { f64::NAN })
        };
        let raw = size(&["--uncompressed"])?;
        let pf = size(&[])?;
        if key == "a" {
            perfetto_a = Some(pf);
        }
        let bt = last(wi, Tool::Bpftrace).map(|b| b.out_bytes as f64 / b.events.max(1) as f64);
        let _ = writeln!(
            table,
            "  ({key}) run.bin {:.2} B/event ({} events, {} lost); Perfetto {:.1} B/syscall ({:.1} uncompressed); \
             bpftrace text {}",
            m.out_bytes as f64 / m.events.max(1) as f64,
            m.events,
            m.lost,
            pf,
            raw,
            bt.map(|v| format!("{v:.1} B/event")).unwrap_or("-".into())
        );
        if key == "a" {
            let v = m.out_bytes as f64 / m.events.max(1) as f64;
            let _ = writeln!(table, "      target run.bin <= 3 B/event on (a): {}", verdict(v <= 3.0));
            let _ = writeln!(table, "      target Perfetto <= 20 B/syscall on (a): {}", verdict(pf <= 20.0));
        } else if let Some(b) = bt {
            let v = m.out_bytes as f64 / m.events.max(1) as f64;
            let _ = writeln!(
                table,
                "      target run.bin <= 1/10 of bpftrace's text on (b): {:.1}x smaller  {}",
                b / v,
                verdict(b / v >= 10.0)
            );
        }
    }
    let _ = perfetto_a;

    // 2. Sustained rate with zero drops, and the recorder's RSS at 1M/s.
    // Two threads: one traced thread cannot issue 1M syscalls/s here.
    let _ = writeln!(table, "\n== 2. Sustained rate (paced 1-byte preads for 3 s, 2 threads) ==");
    let mut best = 0.0;
    let mut rss_1m = None;
    for rate in [250_000.0, 500_000.0, 750_000.0, 1_000_000.0, 1_250_000.0, 1_500_000.0, 2_000_000.0] {
        let w = Workload {
            key: "paced",
            title: "",
            bin: dir.join("paced"),
            args: vec![cached.display().to_string(), format!("{rate}"), "3".into(), "2".into()],
            comm: "paced".into(),
            repeat: 1,
        };
        let r = match bench.run(Tool::Mltrace, &w) {
            Ok(r) => r,
            Err(e) => {
                let _ = writeln!(table, "  {rate:>9.0}/s: failed: {e:#}");
                break;
            }
        };
        let achieved = r.loop_ns as f64;
        let _ = writeln!(
            table,
            "  asked {:>9.0}/s  achieved {:>9.0}/s  lost {:>8}  recorder peak RSS {:>6.1} MiB",
            rate,
            achieved,
            r.lost,
            r.rss_kib as f64 / 1024.0
        );
        if rate == 1_000_000.0 {
            rss_1m = Some((r.rss_kib, r.lost, achieved));
        }
        if r.lost == 0 && achieved > best {
            best = achieved;
        }
    }
    let _ = writeln!(
        table,
        "  highest rate with zero drops: {best:.0} events/s  (target 1M/s: {})",
        verdict(best >= 950_000.0)
    );
    if let Some((rss, lost, achieved)) = rss_1m {
        let _ = writeln!(
            table,
            "  recorder peak RSS at {achieved:.0}/s: {:.1} MiB, {lost} lost  (target < 100 MiB: {})",
            rss as f64 / 1024.0,
            verdict(rss < 100 * 1024)
        );
    }

    // 4. Export of a 10M-event log.
    table.push_str(&export_bench(&dir, &mltrace, reps)?);
    table.push_str(&many_files_bench(&dir, &mltrace)?);

    // 5. Start-up: from launching mltrace until the command execs.
    let _ = writeln!(table, "\n== 5. Start-up (launch of mltrace record until the command's exec) ==");
    let mut startups = Vec::new();
    for _ in 0..5 {
        let log = dir.join("startup.bin");
        let t0 = boottime();
        run_measured(
            Command::new(&mltrace).args(["record", "-q", "-f", "--gpu", "off", "-o"]).arg(&log).args(["--", "true"]),
        )?;
        let mut r = LogReader::open(&log)?;
        let mut exec_ts = None;
        while let Some(mut f) = r.next_frame()? {
            while let Some(rec) = f.next_record() {
                if let Record::Exec(e) = rec {
                    exec_ts.get_or_insert(e.ts);
                }
            }
        }
        startups.push(exec_ts.context("no exec in the log")?.saturating_sub(t0));
    }
    let s = median(&mut startups);
    let _ = writeln!(table, "  median {} (target < 0.3 s: {})", secs(s), verdict(s < 300_000_000));
    // The samplers' own cost at the default 100 ms.
    let log = dir.join("out-a.bin");
    if let Ok(mut r) = LogReader::open(&log) {
        while r.next_frame()?.is_some() {}
        if let Some(t) = r.trailer() {
            let span = (t.end.boottime_ns - r.header().start.boottime_ns).max(1) as f64;
            let pct = t.sampler_cpu_ns as f64 / span * 100.0;
            let _ = writeln!(
                table,
                "  samplers' CPU at 100 ms: {pct:.2}% of one core (target < 1%: {})",
                verdict(pct < 1.0)
            );
        }
    }
    match cold::cold_bench(&dir, &mltrace, bench.baseline.as_deref(), reps) {
        Ok(rows) => table.push_str(&rows),
        Err(e) => {
            let _ = writeln!(table, "\n== 7. Cold-cache loader: failed: {e:#}");
        }
    }
    match cuda::cuda_bench(&dir, &mltrace, reps) {
        Ok(rows) => table.push_str(&rows),
        Err(e) => {
            let _ = writeln!(table, "\n== 8. CUDA uprobes: failed: {e:#}");
        }
    }
    match job::job_bench(&dir, &mltrace) {
        Ok(rows) => table.push_str(&rows),
        Err(e) => {
            let _ = writeln!(table, "\n== 9. A job of N hosts x 8 ranks: failed: {e:#}");
        }
    }
    if long_secs > 0 {
        match long_run(&dir, &mltrace, long_secs, &[]) {
            Ok(rows) => table.push_str(&rows),
            Err(e) => {
                let _ = writeln!(table, "\n== 6. Long recording: failed: {e:#}");
            }
        }
        match long_summary_runs(&dir, &mltrace) {
            Ok(rows) => table.push_str(&rows),
            Err(e) => {
                let _ = writeln!(table, "\n== 6b. Long recording, --detail summary: failed: {e:#}");
            }
        }
    }
    println!("{table}");
    Ok(())
}

/// Section 4: export of a 10M-event log, each mode in turn.
fn export_bench(dir: &Path, mltrace: &Path, reps: usize) -> Result<String> {
    use std::fmt::Write as _;
    let mut table = String::new();
    let _ = writeln!(table, "\n== 4. Export of a 10M-event log (no phases: parts are time windows) ==");
    let big_log = dir.join("export-10m.bin");
    if !big_log.exists() {
        synthetic_log(&big_log, 10_000_000)?;
    }
    // Each mode in turn, `reps` times; medians of time and RSS. The
    // overview alone is the survey pass plus its few counters; the parts
    // cost that plus one pass that writes every event.
    let out = dir.join("export-10m.perfetto-trace");
    let modes: [(&str, &[&str]); 4] = [
        ("overview only", &["--overview"]),
        ("overview + parts", &[]),
        ("one file (--no-split)", &["--no-split"]),
        ("one file, uncompressed", &["--no-split", "--uncompressed"]),
    ];
    let mut runs: Vec<(Vec<u64>, Vec<u64>, u64)> = vec![(Vec::new(), Vec::new(), 0); modes.len()];
    for _ in 0..reps.max(1) {
        for (m, (_, extra)) in modes.iter().enumerate() {
            // Each mode's own files only: the previous mode's parts go.
            for e in fs::read_dir(dir)?.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("export-10m.") && e.path() != big_log {
                    fs::remove_file(e.path())?;
                }
            }
            let t0 = Instant::now();
            let (_, rss) = rss_of(Command::new(mltrace).arg("export").args(*extra).arg(&big_log).arg("-o").arg(&out))?;
            runs[m].0.push(t0.elapsed().as_nanos() as u64);
            runs[m].1.push(rss);
            // The output and its parts beside it.
            runs[m].2 = fs::read_dir(dir)?
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("export-10m.") && e.path() != big_log)
                .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
                .sum();
        }
    }
    let med: Vec<(f64, u64, u64)> =
        runs.iter_mut().map(|(t, r, size)| (median(t) as f64 / 1e9, median(r), *size)).collect();
    for ((what, _), (dt, rss, size)) in modes.iter().zip(&med) {
        let _ = writeln!(
            table,
            "  {what:<24} {dt:.2} s, peak RSS {:.1} MiB (target < 256 MiB: {}), {:.0} MB written",
            *rss as f64 / 1024.0,
            verdict(*rss < 256 * 1024),
            *size as f64 / 1e6
        );
    }
    let (t_ov, t_parts) = (med[0].0, med[1].0);
    let pass = (t_parts - t_ov).max(1e-9);
    let _ = writeln!(
        table,
        "  parts pass: {pass:.2} s, {:.2}M events/s (target >= 2M/s: {}); the overview adds {t_ov:.2} s, \
         {:.2} of a parts pass (target <= 1: {})",
        10.0 / pass,
        verdict(10.0 / pass >= 2.0),
        t_ov / pass,
        verdict(t_ov <= pass)
    );
    let _ = writeln!(table, "  (median of {} runs each, in turn)", reps.max(1));
    table.push_str(&recorded_export(dir, mltrace, reps)?);
    Ok(table)
}

/// Section 4, on a recorded log: a made-up log is cheaper to survey than
/// a recording (its calls, processes and scheduling are few and regular),
/// and `stats`' per-record cost once hid there: 4 epochs of 1M preads of
/// `tests/workloads/epochs.c` (with MLLOG phases, so parts are epochs),
/// recorded here, then `stats`, the overview and overview + parts timed.
fn recorded_export(dir: &Path, mltrace: &Path, reps: usize) -> Result<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let (exe, data, log) = (dir.join("epochs"), dir.join("epochs-data.bin"), dir.join("export-rec.bin"));
    if !log.exists() {
        cc(&root.join("tests/workloads/epochs.c"), &exe)?;
        fs::write(&data, vec![0u8; 1 << 20])?;
        let st = Command::new(mltrace)
            .args(["record", "-q", "-f", "--gpu", "off", "-o"])
            .arg(&log)
            .arg("--")
            .arg(&exe)
            .arg(&data)
            .args(["4", "1000000"])
            .stdout(Stdio::null())
            .status()?;
        if !st.success() {
            bail!("recording tests/workloads/epochs.c for the export bench");
        }
    }
    let (records, _, _) = log_counts(&log)?;
    let out = dir.join("export-rec.perfetto-trace");
    let runs: [(&str, &[&str]); 3] =
        [("stats", &["stats"]), ("overview only", &["export", "--overview"]), ("overview + parts", &["export"])];
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); runs.len()];
    for _ in 0..reps.max(1) {
        for (i, (_, args)) in runs.iter().enumerate() {
            let mut cmd = Command::new(mltrace);
            cmd.args(*args).arg(&log).stdout(Stdio::null()).stderr(Stdio::null());
            if args[0] == "export" {
                // The budget that makes parts of a log this size.
                cmd.args(["--budget", "1000000", "-o"]).arg(&out);
            }
            let t0 = Instant::now();
            if !cmd.status()?.success() {
                bail!("mltrace {} on {}", args.join(" "), log.display());
            }
            times[i].push(t0.elapsed().as_nanos() as u64);
        }
    }
    let t: Vec<f64> = times.iter_mut().map(|v| median(v) as f64 / 1e9).collect();
    let pass = (t[2] - t[1]).max(1e-9);
    let m = records as f64 / 1e6;
    Ok(format!(
        "  a recorded log ({m:.1}M records, tests/workloads/epochs.c): stats {:.2} s ({:.1}M records/s), \
         overview {:.2} s, overview + parts {:.2} s: the overview is {:.2} of a parts pass (target <= 1: {})\n",
        t[0],
        m / t[0],
        t[1],
        t[2],
        t[1] / pass,
        verdict(t[1] <= pass)
    ))
}

/// ImageFolder's layout: 100 class directories of 200 files of 16 KiB.
const SMALL_DIRS: usize = 100;
const SMALL_PER_DIR: usize = 200;
const SMALL_BYTES: usize = 16 << 10;

/// (p): bench/workloads/smallfiles.py's 4 forked workers reading the
/// 20,000 files of target/bench/small16k (made here, then read once to
/// be cached) with the interpreter itself (not a pyenv shim, whose own
/// processes would be traced too).
fn small_files(dir: &Path, wl: &Path) -> Result<Workload> {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .context("python3 is not installed")?;
    let python = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !python.is_absolute() {
        bail!("python3 -c 'import sys; print(sys.executable)' gave no interpreter");
    }
    let data = dir.join("small16k");
    let last = data.join(format!("c{:03}/{:05}.bin", SMALL_DIRS - 1, SMALL_DIRS * SMALL_PER_DIR - 1));
    if fs::metadata(&last).map(|m| m.len()).unwrap_or(0) != SMALL_BYTES as u64 {
        eprintln!("bench: preparing {} files of 16 KiB in {}", SMALL_DIRS * SMALL_PER_DIR, data.display());
        for d in 0..SMALL_DIRS {
            let sub = data.join(format!("c{d:03}"));
            fs::create_dir_all(&sub)?;
            for f in 0..SMALL_PER_DIR {
                let i = d * SMALL_PER_DIR + f;
                write_file(&sub.join(format!("{i:05}.bin")), SMALL_BYTES, 1_000_003 + i as u64)?;
            }
        }
        let _ = Command::new("sync").status();
    }
    let _ = Command::new("sh").args(["-c", &format!("cat {}/*/* > /dev/null", data.display())]).status();
    // The kernel's comm: the name exec'd, at most 15 bytes.
    let comm = python.file_name().map(|n| n.to_string_lossy().chars().take(15).collect()).unwrap_or_default();
    Ok(Workload {
        key: "p",
        title: "(p) python loader: 4 workers, 20k files x 16 KiB",
        bin: python,
        args: vec![wl.join("smallfiles.py").display().to_string(), data.display().to_string(), "4".into()],
        comm,
        repeat: 3,
    })
}

fn boottime() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The export benchmark's input (`mltrace_testlog::synthetic::flat`).
fn synthetic_log(path: &Path, n: u64) -> Result<()> {
    mltrace_testlog::synthetic::flat(std::io::BufWriter::new(fs::File::create(path)?), n)?;
    Ok(())
}

/// ImageNet's training set in files: every reader of a log keeps
/// something per distinct file, so that is what a dataset of small files
/// costs them.
const MANY_FILES: u64 = 1_281_167;

/// Section 4b: the readers on a log where each of MANY_FILES files is
/// opened and read once (2.6M records).
fn many_files_bench(dir: &Path, mltrace: &Path) -> Result<String> {
    use std::fmt::Write as _;
    let mut table = String::new();
    let _ = writeln!(table, "\n== 4b. A dataset of {MANY_FILES} small files, each opened and read once ==");
    let log = dir.join("many-files.bin");
    if !log.exists() {
        many_files_log(&log, MANY_FILES)?;
    }
    let out = dir.join("many-files.out");
    let runs: [(&str, Vec<&std::ffi::OsStr>); 5] = [
        ("stats", vec!["stats".as_ref(), log.as_os_str()]),
        ("stats --json", vec!["stats".as_ref(), "--json".as_ref(), log.as_os_str()]),
        ("report", vec!["report".as_ref(), log.as_os_str(), "-o".as_ref(), out.as_os_str()]),
        (
            "export --no-split",
            vec!["export".as_ref(), "--no-split".as_ref(), log.as_os_str(), "-o".as_ref(), out.as_os_str()],
        ),
        (
            "export --parquet",
            vec!["export".as_ref(), "--parquet".as_ref(), log.as_os_str(), "-o".as_ref(), out.as_os_str()],
        ),
    ];
    for (name, args) in runs {
        let _ = fs::remove_dir_all(&out).or_else(|_| fs::remove_file(&out));
        let t0 = Instant::now();
        let rss = rss_quiet(Command::new(mltrace).args(&args))?;
        let _ = writeln!(
            table,
            "  {name:<20} {:>9}  peak RSS {:>7.1} MiB  ({:.0} B per file)",
            secs(t0.elapsed().as_nanos() as u64),
            rss as f64 / 1024.0,
            rss as f64 * 1024.0 / MANY_FILES as f64
        );
    }
    let _ = fs::remove_dir_all(&out).or_else(|_| fs::remove_file(&out));
    Ok(table)
}

fn many_files_log(path: &Path, files: u64) -> Result<()> {
    let f = std::io::BufWriter::new(fs::File::create(path)?);
    let header = Header { source: "bench".into(), clock: "boottime".into(), ..Default::default() };
    let mut w = RecordWriter::new(f, &header)?;
    let mut ts = 1_000_000_000u64;
    for i in 0..files {
        let (pid, file) = (1000 + (i % 8) as u32, format!("/data/train/n{:08}/{:08}.JPEG", i / 1300, i));
        ts += 1000;
        w.push_with(|e| {
            let p = e.intern(file.as_bytes());
            Record::Open(Open {
                ts,
                dur: 2000,
                pid,
                tid: pid,
                path: p,
                abs_path: p,
                ret: 3,
                kind: FileKind::Regular,
                ..Default::default()
            })
        })?;
        ts += 3000;
        w.push_with(|e| {
            Record::Io(Io {
                ts,
                dur: 1500,
                pid,
                tid: pid,
                op: IoOp::Read,
                fd: 3,
                path: e.intern(file.as_bytes()),
                kind: FileKind::Regular,
                offset_src: OffsetSrc::FilePos,
                requested: 131072,
                ret: 110_000,
                ..Default::default()
            })
        })?;
    }
    w.finish(&Trailer::default())?;
    Ok(())
}

/// Records so far in a log being written, from its frame headers alone
/// (read on from where the last call stopped; a frame still being written
/// is left for the next call).
#[derive(Default)]
struct LogScan {
    offset: u64,
    records: u64,
}

impl LogScan {
    fn update(&mut self, path: &Path) -> Result<u64> {
        use mltrace_log::frame::{FrameHeader, FILE_HEADER_LEN, FRAME_HEADER_LEN};
        use std::io::{Read, Seek, SeekFrom};
        let mut f = fs::File::open(path)?;
        let len = f.metadata()?.len();
        if self.offset == 0 {
            let mut fh = [0u8; FILE_HEADER_LEN];
            if f.read_exact(&mut fh).is_err() {
                return Ok(0);
            }
            self.offset = (FILE_HEADER_LEN as u64) + u64::from(u32::from_le_bytes(fh[12..16].try_into().unwrap()));
        }
        let mut h = [0u8; FRAME_HEADER_LEN];
        while self.offset + FRAME_HEADER_LEN as u64 <= len {
            f.seek(SeekFrom::Start(self.offset))?;
            f.read_exact(&mut h)?;
            let Some(fh) = FrameHeader::decode(&h) else { break };
            let end = self.offset + (FRAME_HEADER_LEN as u64) + u64::from(fh.payload_len);
            if end > len {
                break;
            }
            self.records += u64::from(fh.records);
            self.offset = end;
        }
        Ok(self.records)
    }
}

/// VmRSS, VmHWM and RssAnon of a live process, in KiB. VmRSS counts the
/// BPF ring buffer's pages twice (it is mapped twice, back to back): a fixed
/// 2x the ring once it has wrapped. RssAnon is the recorder's own memory.
fn rss_kib(pid: u32) -> Option<(u64, u64, u64)> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        s.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?, field("RssAnon:")?))
}

/// Least-squares slope of y over x.
fn slope(pts: &[(f64, f64)]) -> f64 {
    let n = pts.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let cov: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let var: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    if var > 0.0 {
        cov / var
    } else {
        0.0
    }
}

/// Section 6: a long recording of a data loader at a steady rate, with
/// process, thread and file churn: the recorder's RSS over time and the
/// log's growth, extrapolated to hours. Returns the table's rows.
/// The long recording: in full (`extra` empty, the 8-hour projection of
/// RSS and log), or with `extra` options (`--detail summary`), whose log
/// growth is the figure.
/// Section 6b: the long run's workload under `record --detail summary`,
/// with scheduling and without (`BENCH_SUMMARY_SECS` each, 120 by
/// default, 0 skips them), and where the log's bytes go by record kind.
fn long_summary_runs(dir: &Path, mltrace: &Path) -> Result<String> {
    let secs: u64 = std::env::var("BENCH_SUMMARY_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(120);
    if secs == 0 {
        return Ok(String::new());
    }
    let mut t = format!(
        "\n== 6b. The long run's workload under record --detail summary --slow 1ms, {secs} s each: \
         log growth (target < 50 MB/h at 100k calls/s) ==\n"
    );
    t.push_str(&long_run(dir, mltrace, secs, &["--detail", "summary", "--slow", "1ms"])?);
    t.push_str(&long_run(dir, mltrace, secs, &["--detail", "summary", "--slow", "1ms", "--sched", "off"])?);
    // The long run opens a new file every 16 calls, and each file's sums
    // are a record a second: the same rate of reads on files kept open.
    t.push_str(&format!("  100k 1-byte preads/s from 4 threads on one cached file (paced), {secs} s:\n"));
    for extra in [&[][..], &["--sched", "off"][..]] {
        t.push_str(&summary_paced(dir, mltrace, secs, extra)?);
    }
    Ok(t)
}

/// A line of section 6b for the paced preads (`bench/workloads/paced.c`).
fn summary_paced(dir: &Path, mltrace: &Path, secs: u64, extra: &[&str]) -> Result<String> {
    let log = dir.join("paced-summary.bin");
    let t0 = Instant::now();
    let out = Command::new(mltrace)
        .args(["record", "-q", "-f", "--gpu", "off", "--detail", "summary", "--slow", "1ms"])
        .args(extra)
        .arg("-o")
        .arg(&log)
        .arg("--")
        .arg(dir.join("paced"))
        .arg(dir.join("cached.bin"))
        .args(["100000", &secs.to_string(), "4"])
        .output()?;
    if !out.status.success() {
        bail!("paced under summary: {}", String::from_utf8_lossy(&out.stderr));
    }
    let duration = t0.elapsed().as_secs_f64();
    let achieved = first_number(&String::from_utf8_lossy(&out.stdout))?;
    let (records, lost, _) = log_counts(&log)?;
    let size = fs::metadata(&log)?.len();
    Ok(summary_growth(&log, extra, secs, duration, achieved, records, lost, size))
}

/// One line of section 6b: the log's growth, and its records by kind.
#[allow(clippy::too_many_arguments)]
fn summary_growth(
    log: &Path,
    extra: &[&str],
    secs: u64,
    duration: f64,
    achieved: u64,
    records: u64,
    lost: u64,
    size: u64,
) -> String {
    let mb_per_hour = size as f64 / duration * 3600.0 / 1e6;
    let label = if extra.contains(&"--sched") { "--sched off" } else { "scheduling recorded" };
    let kinds = kinds_of(log).unwrap_or_else(|e| format!("({e:#})"));
    format!(
        "  {label:<20} {achieved} syscalls/s, {records} records ({lost} lost), log {:.1} MB in {secs} s: \
         {mb_per_hour:.0} MB/h  {}\n      records by kind: {kinds}\n",
        size as f64 / 1e6,
        verdict(mb_per_hour < 50.0),
    )
}

/// A log's records counted by kind, the most first.
fn kinds_of(p: &Path) -> Result<String> {
    let mut r = LogReader::open(p)?;
    let mut n: std::collections::BTreeMap<&'static str, u64> = Default::default();
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            *n.entry(rec.kind_name()).or_default() += 1;
        }
    }
    let mut v: Vec<_> = n.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    Ok(v.iter().map(|(k, c)| format!("{k} {c}")).collect::<Vec<_>>().join(", "))
}

fn long_run(dir: &Path, mltrace: &Path, secs: u64, extra: &[&str]) -> Result<String> {
    use std::fmt::Write as _;
    const RATE: u64 = 100_000;
    const FILES: usize = 20_000;
    const WORKERS: u32 = 4;
    const EPOCH_SECS: u64 = 15;
    let many = dir.join("many");
    if !many.join(format!("{:02}/{}", (FILES - 1) % 100, FILES - 1)).exists() {
        eprintln!("bench: preparing {FILES} files in {}", many.display());
        for i in 0..FILES {
            let d = many.join(format!("{:02}", i % 100));
            if i < 100 {
                fs::create_dir_all(&d)?;
            }
            write_file(&d.join(i.to_string()), 4096, i as u64 + 7)?;
        }
    }
    let _ = Command::new("sh").args(["-c", &format!("cat {}/*/* > /dev/null", many.display())]).status();
    let log = dir.join("long.bin");
    let errors = dir.join("long.stderr");
    let mut child = Command::new(mltrace)
        .args(["record", "-q", "-f", "--gpu", "off"])
        .args(extra)
        .arg("-o")
        .arg(&log)
        .arg("--")
        .arg(dir.join("churn"))
        .arg(&many)
        .args([FILES.to_string(), RATE.to_string(), secs.to_string(), WORKERS.to_string(), EPOCH_SECS.to_string()])
        .stdout(Stdio::piped())
        .stderr(fs::File::create(&errors)?)
        .spawn()?;
    let pid = child.id();
    let every = if secs >= 120 { 5.0 } else { 2.0 };
    let t0 = Instant::now();
    struct Point {
        t: f64,
        rss: u64,
        anon: u64,
        bytes: u64,
        records: u64,
    }
    let mut curve: Vec<Point> = Vec::new();
    let mut hwm = 0;
    let mut scan = LogScan::default();
    let status = loop {
        let next = every * (curve.len() + 1) as f64;
        while t0.elapsed().as_secs_f64() < next && child.try_wait()?.is_none() {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        let Some((rss, peak, anon)) = rss_kib(pid) else { continue };
        hwm = hwm.max(peak);
        let bytes = fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        let records = scan.update(&log).unwrap_or(scan.records);
        let t = t0.elapsed().as_secs_f64();
        eprint!(
            "\rbench: long run {t:>5.0}/{secs} s: RSS {:.1} MiB, log {:.1} MB   ",
            rss as f64 / 1024.0,
            bytes as f64 / 1e6
        );
        let _ = std::io::stderr().flush();
        curve.push(Point { t, rss, anon, bytes, records });
    };
    eprintln!();
    let duration = t0.elapsed().as_secs_f64();
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().context("stdout")?, &mut stdout)?;
    if !status.success() {
        bail!("the long run failed ({:?}): {}", status.code(), fs::read_to_string(&errors).unwrap_or_default());
    }
    if curve.is_empty() {
        bail!("the long run ended before its first sample");
    }
    let achieved = first_number(&stdout)?;
    let (records, lost, _) = log_counts(&log)?;
    let size = fs::metadata(&log)?.len();
    let mut t = String::new();
    if !extra.is_empty() {
        return Ok(summary_growth(&log, extra, secs, duration, achieved, records, lost, size));
    }
    let _ = writeln!(
        t,
        "\n== 6. Long recording: {secs} s of a data loader at {RATE} syscalls/s ({WORKERS} workers x 2 threads \
         respawned every {EPOCH_SECS} s, a short-lived thread per thread per second, {FILES} files) =="
    );
    let _ = writeln!(
        t,
        "  {:>7} {:>9} {:>9} {:>9} {:>12}   (VmRSS includes the 32 MiB BPF ring, mapped twice; anon = the recorder's heap)",
        "t (s)",
        "RSS MiB",
        "anon MiB",
        "log MB",
        "events"
    );
    let mib = |k: u64| k as f64 / 1024.0;
    let stride = curve.len().div_ceil(20);
    for (i, p) in curve.iter().enumerate() {
        if i % stride == 0 || i + 1 == curve.len() {
            let _ = writeln!(
                t,
                "  {:>7.0} {:>9.1} {:>9.1} {:>9.1} {:>12}",
                p.t,
                mib(p.rss),
                mib(p.anon),
                p.bytes as f64 / 1e6,
                p.records
            );
        }
    }
    let (first, last) = (&curve[0], &curve[curve.len() - 1]);
    let max = curve.iter().map(|p| p.rss).max().unwrap_or(0);
    // Slopes in MiB/h after the start-up (the ring and buffers filling),
    // and over the second half: what is left of growth once buffers sized
    // by the largest frame so far have settled, projected to 8 hours.
    let warm = (duration / 4.0).min(60.0);
    let slope_from = |from: f64, f: &dyn Fn(&Point) -> u64| {
        slope(&curve.iter().filter(|p| p.t >= from).map(|p| (p.t / 3600.0, mib(f(p)))).collect::<Vec<_>>())
    };
    let (per_hour, anon_per_hour) = (slope_from(warm, &|p| p.rss), slope_from(warm, &|p| p.anon));
    let late_per_hour = slope_from(duration / 2.0, &|p| p.rss);
    let at_8h = mib(last.rss) + late_per_hour.max(0.0) * (8.0 - duration / 3600.0).max(0.0);
    let gb_per_hour = size as f64 / duration * 3600.0 / 1e9;
    let _ = writeln!(
        t,
        "  {records} events ({:.0}/s; the workload did {achieved} syscalls/s), {lost} lost, log {:.1} MB \
         ({:.2} B/event)",
        records as f64 / duration,
        size as f64 / 1e6,
        size as f64 / records.max(1) as f64
    );
    let _ = writeln!(
        t,
        "  recorder RSS: first {:.1}, last {:.1}, max {:.1} MiB, peak (VmHWM) {:.1} MiB; slope after {warm:.0} s \
         {per_hour:+.1} MiB/h (anon {anon_per_hour:+.1} MiB/h), over the second half {late_per_hour:+.1} MiB/h: \
         {at_8h:.1} MiB at 8 h  (target < 100 MiB, flat: {})",
        mib(first.rss),
        mib(last.rss),
        mib(max),
        mib(hwm),
        verdict(hwm < 100 * 1024 && at_8h < 100.0)
    );
    let _ = writeln!(
        t,
        "  log growth: {gb_per_hour:.2} GB/h, {:.1} GB in 8 h  (target < 1 GB/h: {})",
        gb_per_hour * 8.0,
        verdict(gb_per_hour < 1.0)
    );
    let coarse = rounded_size(&log, &dir.join("long-128ns.bin"), 128)?;
    let per_event = coarse as f64 / records.max(1) as f64;
    let _ = writeln!(
        t,
        "  the same records at record --time-resolution 128ns (rewritten frame by frame): {:.1} MB, {per_event:.2} \
         B/event, {:.2} GB/h  (target <= 2.8 B/event: {}; as recorded, in ns: {})",
        coarse as f64 / 1e6,
        coarse as f64 / duration * 3600.0 / 1e9,
        verdict(per_event <= 2.8),
        verdict(size as f64 / records.max(1) as f64 <= 2.8)
    );
    Ok(t)
}

/// Writes `log`'s records again into `out`, frame for frame, with every
/// time rounded to `ns` as `record --time-resolution` does; its size.
fn rounded_size(log: &Path, out: &Path, ns: u64) -> Result<u64> {
    let mut r = LogReader::open(log)?;
    let mut header = r.header().clone();
    header.time_resolution_ns = Some(ns);
    let file = std::io::BufWriter::new(fs::File::create(out)?);
    let mut w = RecordWriter::new(file, &header)?.with_frame_records(usize::MAX);
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            w.push_with(|e| {
                let mut rec = rec;
                rec.map_strs(|id| e.intern(f.str(id)));
                rec
            })?;
        }
        w.cut()?;
    }
    w.finish(&r.trailer().cloned().unwrap_or_default())?;
    let size = fs::metadata(out)?.len();
    let _ = fs::remove_file(out);
    Ok(size)
}
