//! `make bench`: what tracing costs, measured side by side in one run.
//!
//! Every configuration of a workload runs in turn, round after round, so a
//! machine that gets busier or quieter affects them all alike; the table
//! shows medians. Times are the workloads' own loop times (printed by the
//! C programs), so a tracer's start-up is not counted against it, except in
//! the start-up row, which measures exactly that.

use std::fs;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use mltrace_log::*;

mod cold;
mod cuda;
mod export;
mod go;
mod job;
mod long;
mod many_files;
mod overhead;
mod rate;
mod replay;
mod sizes;
mod stages;
mod startup;
mod summary;

#[allow(clippy::all, non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code, unused_imports)]
mod floor {
    include!(concat!(env!("OUT_DIR"), "/floor.skel.rs"));
}

/// Where the live tools push: a port nothing listens on (a dead collector,
/// the case that must cost nothing).
const LIVE_OTLP: &str = "http://127.0.0.1:9/v1/metrics";

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
    /// mltrace with the Python stacks walked (`--py-stacks on`): what the
    /// walk costs, side by side with the default (off).
    MltraceStacks,
    /// Another build of mltrace (BENCH_BASELINE=PATH), run side by side:
    /// whether a change made the recorder slower.
    MltraceBaseline,
    /// `record --detail summary --slow 1ms`: the mode meant to be left on
    /// every job (only where this build of mltrace has `--detail`).
    MltraceSummary,
    /// The baseline build's summary (with BENCH_BASELINE): whether a change
    /// made the summary slower.
    MltraceBaselineSummary,
    /// Full detail and the summary with the live metrics on (`--metrics`
    /// served, `--otlp` pushed every second to a port nothing listens on):
    /// what the live view adds, side by side with the same mode without.
    MltraceLive,
    MltraceSummaryLive,
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
            Tool::MltraceStacks => "mltrace --py-stacks on",
            Tool::MltraceBaseline => "mltrace baseline",
            Tool::MltraceSummary => "mltrace summary",
            Tool::MltraceBaselineSummary => "mltrace baseline summary",
            Tool::MltraceLive => "mltrace + live metrics",
            Tool::MltraceSummaryLive => "mltrace summary + live metrics",
            Tool::Bpftrace => "bpftrace printf",
            Tool::Strace => "strace -f",
        }
    }
}

#[derive(Clone)]
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
    /// The cached files it reads, read by section 1 just before its clock
    /// starts (it waits for [`go`]'s signal); `None`: it does not wait.
    warm: Option<PathBuf>,
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
fn latency_floor(w: &Workload, cmd: Command) -> Result<String> {
    let (out, _) = latency_floor_run(cmd, &w.bin.display().to_string(), FloorRings::Shared)?;
    Ok(out)
}

/// What the latency floor's stages cost over one run of its command: its
/// programs' runs and run time (`kernel.bpf_stats_enabled`, when on) and
/// its consumer's records and CPU time.
pub(crate) struct FloorStages {
    pub(crate) progs: Vec<(String, u64, u64)>,
    pub(crate) records: u64,
    pub(crate) consumer_cpu_ns: u64,
}

/// Where the latency floor's programs send their records.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum FloorRings {
    /// One ring shared by every CPU.
    Shared,
    /// One ring per CPU.
    PerCpu,
    /// One ring per CPU, records sent 64 at a time (see floor.bpf.c).
    Batched,
}

/// The CPU time of the calling thread.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Runs `cmd` (and its descendants) under the latency floor; its stdout,
/// and what each stage of the floor cost meanwhile. The consumer reads
/// each record's first word, as any consumer must read what it keeps.
/// `rings`: one shared by all CPUs, one per CPU, or one per CPU with
/// records sent in batches.
pub(crate) fn latency_floor_run(mut cmd: Command, what: &str, rings: FloorRings) -> Result<(String, FloorStages)> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let mut storage = MaybeUninit::uninit();
    let mut open = floor::FloorSkelBuilder::default().open(&mut storage)?;
    open.progs.floor_enter.set_autoload(false);
    open.progs.floor_exit.set_autoload(false);
    let per_cpu = rings != FloorRings::Shared;
    let ro = open.maps.rodata_data.as_deref_mut().context("floor .rodata")?;
    ro.per_cpu = per_cpu;
    ro.batched = rings == FloorRings::Batched;
    let mut skel = open.load()?;
    let mut cpu_rings = Vec::new();
    if per_cpu {
        use libbpf_rs::MapCore as _;
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        for cpu in 0..libbpf_rs::num_possible_cpus()? as u32 {
            let m = libbpf_rs::MapHandle::create(libbpf_rs::MapType::RingBuf, None::<&str>, 0, 0, 1 << 22, &opts)?;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(&m));
            skel.maps.cpu_records.update(&cpu.to_ne_bytes(), &fd.to_ne_bytes(), libbpf_rs::MapFlags::ANY)?;
            cpu_rings.push(m);
        }
    }
    skel.attach()?;
    let records = AtomicU64::new(0);
    let checksum = AtomicU64::new(0);
    let consumer_cpu = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    // An owned handle the consumer thread can hold (the skeleton's is not Sync).
    let records_map = libbpf_rs::MapHandle::try_from(&skel.maps.records)?;
    let target = &mut skel.maps.bss_data.as_deref_mut().context("floor .bss")?.target_tgid;
    let out = std::thread::scope(|s| -> Result<String> {
        let consumer = s.spawn(|| -> Result<()> {
            let cpu0 = thread_cpu_ns();
            let sum = std::cell::Cell::new(0u64);
            let on_record = |r: &[u8]| {
                // A batch is its records' 32 bytes each, end to end.
                records.fetch_add((r.len() as u64 / 32).max(1), Ordering::Relaxed);
                let word = r.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]);
                sum.set(sum.get().wrapping_add(u64::from_ne_bytes(word)));
            };
            // Merged as the recorder merges its rings: by each record's
            // start plus duration (the floor's record: ts, dur, ...).
            let key = |r: &[u8]| {
                let w = |at: usize| r.get(at..at + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()));
                w(0).wrapping_add(w(8))
            };
            let mut rings = if cpu_rings.is_empty() {
                mltrace_capture::ring::Merged::open(std::slice::from_ref(&records_map), key)?
            } else {
                mltrace_capture::ring::Merged::open(&cpu_rings, key)?
            };
            while !done.load(Ordering::Relaxed) {
                // The floor sends no wake-ups: this waits out the timeout.
                rings.poll(std::time::Duration::from_millis(50));
                rings.consume(on_record);
            }
            while rings.consume(on_record) > 0 || rings.held_back() {}
            checksum.store(sum.get(), Ordering::Relaxed);
            consumer_cpu.store(thread_cpu_ns() - cpu0, Ordering::Relaxed);
            Ok(())
        });
        let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        // Set as soon as it runs: its timed loop starts after exec and
        // loading, well after this.
        *target = child.id();
        let out = child.wait_with_output()?;
        done.store(true, Ordering::Relaxed);
        consumer.join().expect("latency floor consumer panicked")?;
        if !out.status.success() {
            bail!("{what} failed under the latency floor");
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    })?;
    if records.load(Ordering::Relaxed) == 0 {
        bail!("the latency floor recorded nothing");
    }
    let ids = [&skel.progs.latency_enter, &skel.progs.latency_exit]
        .map(|p| libbpf_rs::ProgramHandle::try_from(p).map(|h| h.id()).unwrap_or(0));
    let progs = libbpf_rs::query::ProgInfoIter::default()
        .filter(|i| ids.contains(&i.id))
        .map(|i| (i.name.to_string_lossy().into_owned(), i.run_cnt, i.run_time_ns))
        .collect();
    std::hint::black_box(checksum.load(Ordering::Relaxed));
    Ok((
        out,
        FloorStages {
            progs,
            records: records.load(Ordering::Relaxed),
            consumer_cpu_ns: consumer_cpu.load(Ordering::Relaxed),
        },
    ))
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
    /// One run of `w` under `tool`, for section 1: the workload's files
    /// read just before its clock starts, whatever the tool ([`go`]).
    fn run(&self, tool: Tool, w: &Workload) -> Result<Run> {
        let go = match &w.warm {
            Some(warm) if go::wanted() => Some(go::Go::start(&self.dir, warm)?),
            _ => None,
        };
        let run = self.run_with(tool, w, &|cmd| {
            if let Some(g) = &go {
                g.to(cmd);
            }
        });
        // The run's own error first: the signal's follows from it.
        let finished = go.map(go::Go::finish);
        let run = run?;
        finished.transpose()?;
        Ok(run)
    }

    fn run_with(&self, tool: Tool, w: &Workload, go: &dyn Fn(&mut Command)) -> Result<Run> {
        let out = self.dir.join(format!("out-{}", w.key));
        let mut run = Run::default();
        let workload = || {
            let mut cmd = Command::new(&w.bin);
            cmd.args(&w.args);
            go(&mut cmd);
            cmd
        };
        let stdout = match tool {
            Tool::Untraced => run_measured(&mut workload())?,
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
                let s = run_measured(&mut workload())?;
                drop(links);
                drop(skel);
                s
            }
            Tool::LatencyFloor => latency_floor(w, workload())?,
            Tool::Mltrace
            | Tool::MltracePerCall
            | Tool::MltraceNoSched
            | Tool::MltraceStacks
            | Tool::MltraceBaseline
            | Tool::MltraceSummary
            | Tool::MltraceBaselineSummary
            | Tool::MltraceLive
            | Tool::MltraceSummaryLive => {
                let log = out.with_extension("bin");
                let sched = if tool == Tool::MltraceNoSched { "off" } else { "on" };
                let bin = match (tool, &self.baseline) {
                    (Tool::MltraceBaseline | Tool::MltraceBaselineSummary, Some(b)) => b,
                    _ => &self.mltrace,
                };
                let mode: &[&str] = match tool {
                    Tool::MltraceSummary | Tool::MltraceBaselineSummary => &["--detail", "summary", "--slow", "1ms"],
                    Tool::MltraceLive => &["--sched", "on", "--metrics", "127.0.0.1:0", "--otlp", LIVE_OTLP],
                    Tool::MltraceSummaryLive => {
                        &["--detail", "summary", "--slow", "1ms", "--metrics", "127.0.0.1:0", "--otlp", LIVE_OTLP]
                    }
                    Tool::MltracePerCall => &["--sched", "on", "--syscall-probes", "per-call"],
                    Tool::MltraceStacks => &["--sched", "on", "--py-stacks", "on"],
                    _ => &["--sched", sched],
                };
                let live: &[&str] = match tool {
                    Tool::MltraceLive | Tool::MltraceSummaryLive => {
                        &["--metrics-interval", "1s", "--metrics-linger", "0"]
                    }
                    _ => &[],
                };
                let mut cmd = Command::new(bin);
                cmd.args(["record", "-q", "-f", "--gpu", "off"])
                    .args(mode)
                    .args(live)
                    .arg("-o")
                    .arg(&log)
                    .arg("--")
                    .arg(&w.bin)
                    .args(&w.args);
                go(&mut cmd);
                let (s, rss) = rss_of(&mut cmd)?;
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
                let mut cmd = Command::new("bpftrace");
                cmd.args(["-q", "-o"]).arg(&txt).args(["-c", &cmdline.join(" "), "-e", &script]);
                go(&mut cmd);
                let s = run_measured(&mut cmd)?;
                run.out_bytes = fs::metadata(&txt)?.len();
                run.events = fs::read(&txt)?.iter().filter(|&&b| b == b'\n').count() as u64;
                s
            }
            Tool::Strace => {
                let txt = out.with_extension("strace.txt");
                let mut cmd = Command::new("strace");
                cmd.args(["-f", "-qq", "-o"]).arg(&txt).arg(&w.bin).args(&w.args);
                go(&mut cmd);
                run_measured(&mut cmd)?
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
    // `--replay DUMP`: a ring dump (`MLTRACE_RING_DUMP`) through the decoder
    // alone, to measure or profile it without a workload.
    if argv.get(1).map(String::as_str) == Some("--replay") && argv.len() == 3 {
        let r = replay::replay(std::path::Path::new(&argv[2]))?;
        println!("{} records: {:.0} ns a record (best of the passes), {:.0} the first", r.records, r.best, r.first);
        return Ok(());
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
        return export::synthetic_log(Path::new(&argv[2]), argv[3].parse().context("N: a number of events")?);
    }
    // Canonical: the workloads open files under it as a job under an
    // absolute dataset root does (a `..` in every path cost the recorder
    // a normalisation and a second string an open, 2026-12-06).
    let root = fs::canonicalize(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))?;
    let dir = root.join("target/bench");
    fs::create_dir_all(&dir)?;
    // BENCH_MLTRACE=PATH measures another build in this build's place (its
    // section 1b, say, which only this build's column has).
    let mltrace = std::env::var_os("BENCH_MLTRACE").map_or_else(|| root.join("target/release/mltrace"), PathBuf::from);
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
        Tool::MltraceStacks,
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
            if String::from_utf8_lossy(&help.stdout).contains("--metrics") {
                for t in [Tool::MltraceLive, Tool::MltraceSummaryLive] {
                    if wanted(t) {
                        tools.push(t);
                    }
                }
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
            warm: None,
        },
        Workload {
            key: "b",
            title: "(b) data loader: 4 workers, 4000 small files x5",
            bin: dir.join("loader"),
            args: vec![files.display().to_string(), nfiles.to_string(), "4".into(), "5".into()],
            comm: "loader".into(),
            repeat: 5,
            warm: Some(files.clone()),
        },
        Workload {
            key: "c",
            title: "(c) 300 O_DIRECT reads of 1 MiB",
            bin: dir.join("direct"),
            args: vec![big.display().to_string(), "300".into()],
            comm: "direct".into(),
            repeat: 1,
            warm: None,
        },
        Workload {
            key: "d",
            title: "(d) cold 256 MiB file through mmap, 4 KiB stride",
            bin: dir.join("mapped"),
            args: vec![mapped.display().to_string()],
            comm: "mapped".into(),
            repeat: 1,
            warm: None,
        },
    ];
    if run_w("p") || run_w("q") {
        match small_files(&dir, &wl) {
            Ok(w) => {
                // (q): the same with some decoding in Python.
                let mut q = Workload {
                    key: "q",
                    title: "(q) python loader decoding: 4 workers, 20k files x 16 KiB",
                    ..w.clone()
                };
                q.args.push("decode".into());
                if run_w("p") {
                    workloads.push(w);
                }
                if run_w("q") {
                    workloads.push(q);
                }
            }
            Err(e) => bench.skipped.push(format!("(p, q) the Python small-file loaders: {e:#}")),
        }
    }
    let (mut table, results) = overhead::overhead(&bench, &workloads, &run_w, quick);
    use std::fmt::Write as _;

    if quick {
        if !workloads.iter().any(|w| run_w(w.key)) {
            table.clear();
        }
        if run_w("export") {
            table.push_str(&export::export_bench(&dir, &mltrace, bench.baseline.as_deref(), reps)?);
        }
        if run_w("files") {
            table.push_str(&many_files::many_files_bench(&dir, &mltrace)?);
        }
        if run_w("long") && long_secs > 0 {
            table.push_str(&long::long_run(&dir, &mltrace, long_secs, &[])?);
        }
        if run_w("long") || run_w("summary") {
            table.push_str(&summary::long_summary_runs(&dir, &mltrace)?);
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
    table.push_str(&sizes::sizes(&bench, &results, &dir, &mltrace)?);

    // 2. Sustained rate with zero drops, and the recorder's RSS at 1M/s.
    table.push_str(&rate::sustained_rate(&bench, &dir, &cached));

    // 4. Export of a 10M-event log.
    table.push_str(&export::export_bench(&dir, &mltrace, bench.baseline.as_deref(), reps)?);
    table.push_str(&many_files::many_files_bench(&dir, &mltrace)?);

    // 5. Start-up: from launching mltrace until the command execs.
    table.push_str(&startup::startup(&dir, &mltrace)?);
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
        match long::long_run(&dir, &mltrace, long_secs, &[]) {
            Ok(rows) => table.push_str(&rows),
            Err(e) => {
                let _ = writeln!(table, "\n== 6. Long recording: failed: {e:#}");
            }
        }
        match summary::long_summary_runs(&dir, &mltrace) {
            Ok(rows) => table.push_str(&rows),
            Err(e) => {
                let _ = writeln!(table, "\n== 6b. Long recording, --detail summary: failed: {e:#}");
            }
        }
    }
    println!("{table}");
    Ok(())
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
        warm: Some(data),
    })
}

fn boottime() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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
