//! `mltrace record`.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use mltrace_capture::attach::AttachOptions;
use mltrace_capture::bpf::SyscallRoute;
use mltrace_capture::features::BlockRoute;
use mltrace_capture::mllog::MllogSource;
use mltrace_capture::{identity, record, Progress, RecordOptions};
use mltrace_sample::gpu::{self, GpuConfig, GpuMode};

#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("target").required(true).args(["command", "pid", "all"]))]
pub struct Args {
    /// Where to write the log; %h (host name), %r (rank from SLURM_PROCID,
    /// RANK, OMPI_COMM_WORLD_RANK or PMI_RANK), %p (recorder pid), %t (start
    /// time, UTC) and %% are filled in: `-o runs/%h.bin` on every node
    #[arg(short, long, default_value = "mltrace.bin")]
    output: PathBuf,
    /// Overwrite the output file if it exists
    #[arg(short, long)]
    force: bool,
    /// BPF ring buffer space, e.g. 64m or 256k, shared out among the CPUs
    /// online at the start: a ring each, of the largest power of two that
    /// fits its share (at least a page; a page for a CPU offline then)
    /// [default: 64m, at most 32m and at least 1m a CPU]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    ring_size: Option<u32>,
    /// No live status line
    #[arg(short, long)]
    quiet: bool,
    /// Which probes see block requests start: auto (the best the kernel
    /// has), io-start (Linux 6.5+), rq-insert (older kernels), or off
    #[arg(long, default_value = "auto", value_name = "ROUTE")]
    block_probes: String,
    /// Record the pages traced processes bring into the page cache (bytes
    /// from storage per file): on or off
    #[arg(long, default_value = "on", value_name = "ON|OFF")]
    page_cache: String,
    /// Record io_uring read/write requests (submission to completion): on or off
    #[arg(long, default_value = "on", value_name = "ON|OFF")]
    io_uring: String,
    /// Record context switches, wake-ups and migrations of the traced
    /// threads (thread states in the trace, the data-wait verdict in
    /// stats): on or off
    #[arg(long, default_value = "on", value_name = "ON|OFF")]
    sched: String,
    /// How much of the reads, writes, syncs and closes to record: full
    /// (every call, with its offset and latency) or summary (the kernel
    /// sums them per thread, file and second: calls, bytes and a latency
    /// histogram; only calls slower than --slow, and failed ones, are
    /// recorded one by one). Opens, block I/O, scheduling and the counters
    /// are recorded in full either way
    #[arg(long, default_value = "full", value_name = "full|summary")]
    detail: String,
    /// With --detail summary: record a call on its own when it takes this
    /// long or longer (e.g. 1ms, 200us, 0 for every call)
    #[arg(long, value_name = "TIME", value_parser = parse_slow)]
    slow: Option<std::time::Duration>,
    /// Round every recorded time to a multiple of this (e.g. 128ns, 1us):
    /// a smaller log for a coarser clock (make bench's long run: 3.9 B an
    /// event as measured, 2.65 at 128ns). Calls keep their order; a call
    /// shorter than it may show as 0 long. 1ns keeps times as measured
    #[arg(long, default_value = "1ns", value_name = "TIME", value_parser = parse_resolution)]
    time_resolution: u64,
    /// Record mmap, munmap, mremap (files mapped, per process) and major
    /// page faults: on or off
    #[arg(long, default_value = "on", value_name = "ON|OFF")]
    mappings: String,
    /// Record the CUDA driver calls that wait for the GPU
    /// (cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize, blocking
    /// cuMemcpy*) with uprobes on libcuda.so, and the NCCL calls
    /// (collectives, send/recv, groups) with uprobes on libnccl.so: on or off
    #[arg(long, default_value = "on", value_name = "ON|OFF")]
    cuda: String,
    /// Also count CUDA kernel and graph launches (cuLaunchKernel*,
    /// cuGraphLaunch), per process and second: an uprobe on each launch
    /// costs about a microsecond, which launch-bound jobs feel
    #[arg(long)]
    cuda_launches: bool,
    /// The Python stack of every recorded call of a Python process
    /// (CPython 3.9 to 3.14, found without the program's help): on or off.
    /// Off by default: on a small-file loader it adds about a tenth to its
    /// run time (docs/performance.md); waits for the GIL are told apart
    /// either way
    #[arg(long, default_value = "off", value_name = "ON|OFF")]
    py_stacks: String,
    /// How often to sample CPU, memory, disk, process and GPU counters
    /// (e.g. 100ms, 1s; 0 turns the samplers off)
    #[arg(long, default_value = "100ms", value_name = "PERIOD", value_parser = parse_period)]
    sample_interval: std::time::Duration,
    /// GPU metrics through NVML: auto (when it loads), off, or required
    /// (fail up front without them)
    #[arg(long, default_value = "auto", value_name = "MODE")]
    gpu: String,
    /// The NVML library to load (default: $MLTRACE_NVML_LIBRARY, else libnvidia-ml.so.1)
    #[arg(long, value_name = "PATH")]
    nvml_library: Option<PathBuf>,
    /// How syscalls are followed: auto (fast, else compat), trampoline
    /// (fentry/fexit on each recorded call's kernel function and task
    /// storage, Linux 5.11+ with BPF trampolines: other calls run nothing),
    /// fast (tp_btf on
    /// every call and task storage, Linux 5.11+), per-call (each recorded
    /// call's own tracepoints and task storage, Linux 5.15+, root: other
    /// calls run nothing, recorded ones cost more) or compat (raw_tp and
    /// hash maps). The environment sets
    /// it for a whole test run (`make test-kernels` forces each route)
    #[arg(long, env = "MLTRACE_SYSCALL_PROBES", default_value = "auto", value_name = "ROUTE", hide = true)]
    syscall_probes: String,
    /// Records per frame (for tests; frames are also cut every second)
    #[arg(long, hide = true)]
    frame_records: Option<usize>,
    /// How often a frame is cut at the latest (for measuring its cost)
    #[arg(long, hide = true, value_name = "PERIOD", value_parser = parse_period)]
    frame_interval: Option<std::time::Duration>,
    /// File names the decoder keeps per generation (for tests of its bound)
    #[arg(long, hide = true)]
    file_generation: Option<usize>,
    /// Read training phases from this MLPerf log file (lines appended
    /// while recording) instead of from the command's stdout and stderr
    #[arg(long, value_name = "FILE", conflicts_with = "no_mllog")]
    mllog: Option<PathBuf>,
    /// Leave the command's stdout and stderr alone: no training phases
    /// from `:::MLLOG` lines (by default they pass through mltrace unchanged),
    /// nor from the mltrace_ebpf Python module (no MLTRACE_MLLOG_FD)
    #[arg(long)]
    no_mllog: bool,
    /// Run the command as this user (name or uid). Under sudo the default
    /// is the user who called sudo; `--user root` keeps root
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Attach to these running processes (comma-separated pids): their
    /// threads and the children they start from then on. Stopping (Ctrl-C,
    /// --duration, or their exit) leaves them running
    #[arg(short, long = "pid", value_name = "PID,...", value_delimiter = ',')]
    pid: Vec<u32>,
    /// Trace every process on the machine (root only), but mltrace itself;
    /// narrow it with --comm and --cgroup
    #[arg(short, long)]
    all: bool,
    /// With -a: only processes of this name (the kernel's comm, as `ps -o
    /// comm` shows it), filtered in the kernel
    #[arg(long, value_name = "NAME")]
    comm: Option<String>,
    /// With -a: only processes in this cgroup v2 (or below it): a
    /// container's or a Slurm job's, as a path under /sys/fs/cgroup or as
    /// /proc/PID/cgroup shows it (root only)
    #[arg(long, value_name = "PATH")]
    cgroup: Option<PathBuf>,
    /// With -p or -a: only file events (opens, reads, writes, mappings, page
    /// cache) on paths under this prefix
    #[arg(long, value_name = "PREFIX")]
    path: Option<String>,
    /// With -p or -a: stop recording after this long (e.g. 30s, 10m, 1h)
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    duration: Option<std::time::Duration>,
    /// Serve live metrics at http://ADDRESS:PORT/metrics while recording
    /// (Prometheus/OpenMetrics text): a PORT alone listens on loopback,
    /// any other address only when named (0.0.0.0:9400); docs/metrics.md
    #[arg(long, value_name = "[ADDRESS:]PORT")]
    metrics: Option<String>,
    /// Push the same metrics over OTLP/HTTP (protobuf) to a collector every
    /// --metrics-interval (http://HOST[:4318][/v1/metrics])
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
    /// The live metrics' "last interval" window, and how often they are pushed
    #[arg(long, default_value = "10s", value_name = "TIME", value_parser = parse_duration)]
    metrics_interval: std::time::Duration,
    /// After the command ends, how long /metrics stays up for a last scrape
    /// (it closes as soon as a scrape has seen the end; 0: at once)
    #[arg(long, default_value = "15s", value_name = "TIME", value_parser = parse_linger)]
    metrics_linger: std::time::Duration,
    /// The job name pushes carry (resource attribute mltrace.job; default:
    /// the command's name)
    #[arg(long, value_name = "NAME")]
    metrics_job: Option<String>,
    /// The command to run, after `--` (or from its first word on: an
    /// option mltrace does not know before that is an error, not a command)
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    command: Vec<OsString>,
}

fn parse_size(s: &str) -> Result<u32, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t.as_str(), 1),
    };
    let v: u64 = num.parse().map_err(|_| format!("{s}: expected a size such as 32m or 256k"))?;
    let bytes = v.saturating_mul(mult);
    if !(4096..=(1 << 30)).contains(&bytes) {
        return Err(format!("{s}: expected between 4k and 1g"));
    }
    Ok(bytes as u32)
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, mult) = [("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)]
        .iter()
        .find_map(|(u, m)| t.strip_suffix(u).filter(|n| !n.ends_with('m')).map(|n| (n, *m)))
        .unwrap_or((t, 1.0));
    let v: f64 = num.trim().parse().map_err(|_| format!("{s}: expected a time such as 30s, 10m or 1h"))?;
    if !(v > 0.0 && v * mult <= 30.0 * 86400.0) {
        return Err(format!("{s}: expected a time between 0 and 30 days"));
    }
    Ok(std::time::Duration::from_secs_f64(v * mult))
}

fn parse_linger(s: &str) -> Result<std::time::Duration, String> {
    match s.trim() {
        "0" | "0s" => Ok(std::time::Duration::ZERO),
        _ => parse_duration(s),
    }
}

/// The live metrics asked for: bound and started before the recording,
/// so a port in use stops it before it starts.
fn live_options(a: &Args) -> anyhow::Result<Option<mltrace_live::LiveOptions>> {
    if a.metrics.is_none() && a.otlp.is_none() {
        return Ok(None);
    }
    let listen = a.metrics.as_deref().map(mltrace_live::parse_listen).transpose()?;
    let otlp = a.otlp.as_deref().map(mltrace_live::otlp::Target::parse).transpose()?;
    let job = a.metrics_job.clone().unwrap_or_else(|| {
        let cmd = a.command.first().map(|c| std::path::Path::new(c).file_name().unwrap_or(c.as_os_str()));
        cmd.map_or("attached".into(), |c| c.to_string_lossy().into_owned())
    });
    Ok(Some(mltrace_live::LiveOptions {
        listen,
        otlp,
        interval: a.metrics_interval.max(std::time::Duration::from_secs(1)),
        linger: a.metrics_linger,
        job,
        host: mltrace_capture::system::hostname(),
    }))
}

fn live_metrics(
    live_opts: Option<mltrace_live::LiveOptions>,
    opts: &mut RecordOptions,
) -> anyhow::Result<Option<mltrace_live::Live>> {
    let Some(live_opts) = live_opts else { return Ok(None) };
    // Ten seconds of frames: more and the live view has fallen behind.
    let (tap, rx) = mltrace_log::tap::FrameTap::new(10);
    let missed = tap.skipped.clone();
    opts.tap = Some(tap);
    let live = mltrace_live::Live::start(live_opts, rx, missed)?;
    if let Some(addr) = live.listen() {
        eprintln!("mltrace: live metrics at http://{addr}/metrics");
    }
    Ok(Some(live))
}

fn parse_slow(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, mult) = [("ns", 1e-9), ("us", 1e-6), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .iter()
        .find_map(|(u, m)| t.strip_suffix(u).filter(|n| !n.ends_with(['m', 'u', 'n', 'µ'])).map(|n| (n, *m)))
        .unwrap_or((t, if t == "0" { 1.0 } else { f64::NAN }));
    let v: f64 = num.trim().parse().map_err(|_| format!("{s}: expected a time such as 1ms, 200us or 0"))?;
    if !(v >= 0.0 && v * mult <= 3600.0) {
        return Err(format!("{s}: expected a time between 0 and 1h (with its unit: ns, us, ms or s)"));
    }
    Ok(std::time::Duration::from_secs_f64(v * mult))
}

/// `--time-resolution`: whole ns, 1ns to 1ms.
fn parse_resolution(s: &str) -> Result<u64, String> {
    let err = || format!("{s}: expected whole ns between 1ns and 1ms, with the unit: ns, us or ms (e.g. 128ns, 1us)");
    let t = s.trim();
    let (num, mult) = [("ns", 1.0), ("us", 1e3), ("µs", 1e3), ("ms", 1e6)]
        .iter()
        .find_map(|(u, m)| t.strip_suffix(u).map(|n| (n, *m)))
        .ok_or_else(err)?;
    let ns = num.trim().parse::<f64>().map_err(|_| err())? * mult;
    if !(1.0..=1e6).contains(&ns) || (ns - ns.round()).abs() > 1e-6 {
        return Err(err());
    }
    Ok(ns.round() as u64)
}

fn parse_period(s: &str) -> Result<std::time::Duration, String> {
    let (num, mult) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else {
        (s, 1e-3)
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("{s}: expected a period such as 100ms or 1s"))?;
    if !(0.0..=3600.0).contains(&(v * mult)) {
        return Err(format!("{s}: expected a period between 0 and 1 hour"));
    }
    Ok(std::time::Duration::from_secs_f64(v * mult))
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    // (clap's `requires` counts a flag's default as given.)
    if !a.all {
        for (flag, given) in [("--comm", a.comm.is_some()), ("--cgroup", a.cgroup.is_some())] {
            anyhow::ensure!(!given, "{flag} filters `record -a`: add -a (or trace processes by pid with -p)");
        }
    }
    if !a.command.is_empty() {
        for (flag, given) in [("--path", a.path.is_some()), ("--duration", a.duration.is_some())] {
            anyhow::ensure!(!given, "{flag} is for -p and -a; a command is recorded until it ends");
        }
    }
    let live_opts = live_options(&a)?;
    let output = crate::template::expand(&a.output, &crate::template::Values::current())?;
    let mut opts = RecordOptions::new(a.command, output);
    if !a.pid.is_empty() || a.all {
        opts.attach = Some(AttachOptions {
            pids: a.pid,
            all: a.all,
            comm: a.comm,
            cgroup: a.cgroup,
            path: a.path,
            duration: a.duration,
        });
    }
    opts.force = a.force;
    opts.bpf.ring_bytes = a.ring_size.unwrap_or(0);
    if let Some(d) = a.frame_interval {
        opts.flush_interval = d.max(std::time::Duration::from_millis(1));
    }
    if let Some(n) = a.frame_records {
        opts.frame_records = n.max(1);
    }
    if let Some(n) = a.file_generation {
        opts.file_generation = n.max(1);
    }
    opts.bpf.route = match a.syscall_probes.as_str() {
        "auto" => None,
        "per-call" => Some(SyscallRoute::Calls),
        "trampoline" => Some(SyscallRoute::Trampoline),
        "fast" => Some(SyscallRoute::Fast),
        "compat" => Some(SyscallRoute::Compat),
        other => anyhow::bail!("--syscall-probes {other}: expected auto, trampoline, per-call, fast or compat"),
    };
    match a.block_probes.as_str() {
        "auto" => {}
        "off" => opts.bpf.block = false,
        "io-start" => opts.bpf.block_route = Some(BlockRoute::IoStart),
        "rq-insert" => opts.bpf.block_route = Some(BlockRoute::RqInsert),
        other => anyhow::bail!("--block-probes {other}: expected auto, io-start, rq-insert or off"),
    }
    opts.bpf.page_cache = match a.page_cache.as_str() {
        "on" => true,
        "off" => false,
        other => anyhow::bail!("--page-cache {other}: expected on or off"),
    };
    opts.bpf.uring = match a.io_uring.as_str() {
        "on" => true,
        "off" => false,
        other => anyhow::bail!("--io-uring {other}: expected on or off"),
    };
    opts.bpf.summary_slow_ns = match (a.detail.as_str(), a.slow) {
        ("full", None) => None,
        ("full", Some(_)) => anyhow::bail!("--slow: only with --detail summary (full records every call)"),
        ("summary", slow) => Some(slow.map_or(1_000_000, |d| d.as_nanos() as u64)),
        (other, _) => anyhow::bail!("--detail {other}: expected full or summary"),
    };
    opts.time_resolution_ns = a.time_resolution;
    opts.bpf.sched = match a.sched.as_str() {
        "on" => true,
        "off" => false,
        other => anyhow::bail!("--sched {other}: expected on or off"),
    };
    opts.bpf.mappings = match a.mappings.as_str() {
        "on" => true,
        "off" => false,
        other => anyhow::bail!("--mappings {other}: expected on or off"),
    };
    opts.bpf.cuda = match a.cuda.as_str() {
        "on" => true,
        "off" => false,
        other => anyhow::bail!("--cuda {other}: expected on or off"),
    };
    if a.cuda_launches && !opts.bpf.cuda {
        anyhow::bail!("--cuda-launches needs --cuda on");
    }
    opts.bpf.cuda_launches = a.cuda_launches;
    opts.bpf.py_stacks = match a.py_stacks.as_str() {
        "on" => true,
        "off" => false,
        other => anyhow::bail!("--py-stacks {other}: expected on or off"),
    };
    opts.run_as = match a.user.as_deref() {
        None => identity::sudo_caller(),
        Some("root") | Some("0") => None,
        Some(u) => Some(identity::by_name(u).ok_or_else(|| anyhow::anyhow!("--user {u}: no such user"))?),
    };
    opts.mllog = match (a.mllog, a.no_mllog) {
        (Some(f), _) => MllogSource::File(std::path::absolute(&f).unwrap_or(f)),
        (None, true) => MllogSource::Off,
        (None, false) => MllogSource::Output,
    };
    opts.sample_interval = (!a.sample_interval.is_zero()).then_some(a.sample_interval);
    let mode = match a.gpu.as_str() {
        "auto" => GpuMode::Auto,
        "off" => GpuMode::Off,
        "required" => GpuMode::Required,
        other => anyhow::bail!("--gpu {other}: expected auto, off or required"),
    };
    // Privileges first: without them nothing else is worth saying.
    let missing = mltrace_capture::system::missing_privileges();
    if !missing.is_empty() {
        return Err(mltrace_capture::CaptureError::Privileges { missing }.into());
    }
    // Who may trace what, before anything else is opened.
    if let Some(at) = &opts.attach {
        mltrace_capture::attach::check(at)?;
    }
    let gpu = gpu::open(&GpuConfig { mode, library: a.nvml_library })?;
    if let Some(brief) = &gpu.brief {
        eprintln!("mltrace: {brief}");
    }
    opts.gpu = gpu.sampler;
    opts.gpu_devices = gpu.devices;
    let live = !a.quiet && std::io::stderr().is_terminal();
    let mut last_records = (std::time::Duration::ZERO, 0u64);
    let mut told_error = false;
    // An attached recording says when it is live: what the processes do
    // from then on is recorded (scripts wait for this line).
    let mut tell_attached = opts.attach.is_some() && !a.quiet;
    opts.progress = Some(Box::new(move |p: &Progress| {
        if std::mem::take(&mut tell_attached) {
            eprintln!("{}mltrace: attached, recording", if live { "\r\x1b[2K" } else { "" });
        }
        if let (Some(e), false) = (&p.write_error, told_error) {
            told_error = true;
            eprintln!(
                "{}mltrace: writing the log failed: {e}; recording stopped, the command goes on",
                if live { "\r\x1b[2K" } else { "" }
            );
        }
        if live {
            let dt = (p.elapsed - last_records.0).as_secs_f64();
            let rate = if dt > 0.0 { (p.records - last_records.1) as f64 / dt } else { 0.0 };
            last_records = (p.elapsed, p.records);
            eprint!(
                "\r\x1b[2Kmltrace: {:.1} s, {} events ({:.0}/s), {} lost, log {}",
                p.elapsed.as_secs_f64(),
                p.records,
                rate,
                p.lost,
                mltrace_model::fmt::bytes(p.log_bytes)
            );
            let _ = std::io::stderr().flush();
        }
    }));
    let live_metrics = live_metrics(live_opts, &mut opts)?;
    let s = record(opts)?;
    if live {
        eprint!("\r\x1b[2K");
    }
    let lost: u64 = s.lost.iter().map(|(_, n)| n).sum();
    let detail = if lost > 0 {
        format!(" ({})", s.lost.iter().map(|(k, n)| format!("{n} {}", k.name())).collect::<Vec<_>>().join(", "))
    } else {
        String::new()
    };
    let status = match (&s.stopped, s.wait_status) {
        (Some(why), _) => why.clone(),
        (None, Some(_)) => format!("command exited with {}", s.exit_code),
        (None, None) => "stopped before the command ended".to_string(),
    };
    eprintln!(
        "mltrace: {} events in {:.1} s, {} lost{detail}; log {} written to {}; {status}",
        s.records,
        s.duration.as_secs_f64(),
        lost,
        mltrace_model::fmt::bytes(s.log_bytes),
        s.output.display()
    );
    for w in &s.warnings {
        eprintln!("mltrace: warning: {w}");
    }
    // Not root: who became another user or group, and was let go.
    for u in &s.untraced {
        eprintln!("mltrace: {u}");
    }
    if std::env::var_os("MLTRACE_DEBUG").is_some() {
        eprintln!(
            "mltrace: debug: file names: {} held at the end, {} forgotten; {} file events left out by --path in user space",
            s.files_held, s.files_forgotten, s.path_filtered
        );
    }
    if let Some(e) = &s.write_error {
        eprintln!("mltrace: writing the log failed part-way: {e}; what was written before is readable");
    }
    // Last: what the live metrics delivered (a dead collector shows here).
    if let Some(l) = live_metrics {
        let summary = l.finish();
        eprintln!("mltrace: {}", summary.line());
        for p in &summary.problems {
            eprintln!("mltrace: live metrics: {p}");
        }
    }
    Ok(s.exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn slow_thresholds_take_their_unit() {
        let ns = |s: &str| parse_slow(s).map(|d| d.as_nanos() as u64);
        assert_eq!(ns("1ms"), Ok(1_000_000));
        assert_eq!(ns("200us"), Ok(200_000));
        assert_eq!(ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(ns("750ns"), Ok(750));
        assert_eq!(ns("0"), Ok(0));
        assert!(ns("5").is_err(), "a number without its unit");
        assert!(ns("-1ms").is_err());
        assert!(ns("2h").is_err());
    }

    #[test]
    fn time_resolutions_are_whole_ns_up_to_a_ms() {
        assert_eq!(parse_resolution("128ns"), Ok(128));
        assert_eq!(parse_resolution("1us"), Ok(1000));
        assert_eq!(parse_resolution("1ms"), Ok(1_000_000));
        assert!(parse_resolution("0").is_err());
        assert!(parse_resolution("0.5ns").is_err());
        assert!(parse_resolution("2ms").unwrap_err().contains("between 1ns and 1ms"));
    }

    #[test]
    fn durations_as_people_write_them() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("10 minutes").unwrap_err().contains("expected a time"));
        assert!(parse_duration("-1s").is_err());
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Result<Vec<OsString>, String> {
        use clap::Parser;
        let argv = std::iter::once("record").chain(argv.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.args.command).map_err(|e| e.to_string())
    }

    #[test]
    fn an_unknown_option_before_the_command_is_an_error_naming_it() {
        let e = parse(&["-o", "run.bin", "--detial", "summary", "--", "python", "train.py"]).unwrap_err();
        assert!(e.contains("unexpected argument '--detial'"), "{e}");
        let e = parse(&["-o", "run.bin", "-Z", "python", "train.py"]).unwrap_err();
        assert!(e.contains("'-Z'"), "{e}");
    }

    #[test]
    fn the_commands_own_options_are_its_own() {
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let cmd = ["python", "-u", "train.py", "--lr", "1", "-o", "x", "--", "y"];
        assert_eq!(parse(&["-o", "x.bin", "--", "python", "-u", "train.py"]), Ok(os(&cmd[..3])));
        assert_eq!(
            parse(&["-o", "x.bin", "python", "train.py", "--lr", "1"]),
            Ok(os(&["python", "train.py", "--lr", "1"]))
        );
        // After the first word everything is the command's, `--` included.
        assert_eq!(parse(&["-q", "python", "-u", "train.py", "--lr", "1", "-o", "x", "--", "y"]), Ok(os(&cmd)));
        assert_eq!(parse(&["--", "--weird-name"]), Ok(os(&["--weird-name"])));
    }
}
