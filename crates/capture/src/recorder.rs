//! `mltrace record`: runs a command under the BPF programs and writes the log.
//!
//! Threads: the caller's thread starts the command and waits for it; a
//! consumer drains the ring buffer and encodes frames (no allocation per
//! event); a writer compresses and writes frames, so a slow disk backs up
//! into the ring (where losses are counted) instead of stalling the kernel
//! side; a signal thread forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT sent with
//! kill(2) to the command (terminal signals reach it directly).

use std::ffi::OsString;
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use mltrace_log::*;
use mltrace_sample::gpu::GpuEventSample;
use mltrace_sample::gpu::GpuSampler;
use mltrace_sample::SampleSink;

mod command;
mod consumer;
mod header;
mod phases;
mod probes;
mod samplers;
mod signals;
mod wait;
mod writer;

use self::consumer::{consumer_loop, Consumer};
use self::header::header;
use self::signals::{signal_loop, SignalBlock};
use self::wait::{wait_attached, wait_child};
use self::writer::writer_loop;
use crate::attach::{self, AttachOptions};
use crate::bpf::{self, BpfConfig};
use crate::cuda::{self, LibProbes};
use crate::error::CaptureError;
use crate::features::KernelBtf;
use crate::identity::User;
use crate::launch;
use crate::mllog::{ClockMap, MllogMsg, MllogSource, PhaseRecorder};
use crate::output::OutputFile;
use crate::system;

/// Receives a [`Progress`] about twice a second.
pub type ProgressFn = Box<dyn FnMut(&Progress)>;

pub struct RecordOptions {
    /// The command and its arguments.
    pub command: Vec<OsString>,
    pub output: PathBuf,
    /// Overwrite an existing output file.
    pub force: bool,
    pub bpf: BpfConfig,
    pub zstd_level: i32,
    /// A frame is written at least this often: what a killed recorder
    /// loses at most.
    pub flush_interval: Duration,
    pub frame_records: usize,
    /// File identities per generation of the decoder's file table (see
    /// [`crate::files::FileTable`]; small only in tests).
    pub file_generation: usize,
    /// Run the command as this user (sudo's caller) instead of as
    /// ourselves; the log then belongs to them too.
    pub run_as: Option<User>,
    /// Called about twice a second while recording (for a live status line).
    pub progress: Option<ProgressFn>,
    /// Counter sampling period; `None` disables the /proc samplers.
    pub sample_interval: Option<Duration>,
    /// An opened NVML sampler (see `mltrace_sample::gpu::open`).
    pub gpu: Option<GpuSampler>,
    /// The GPUs it will sample, for the log header.
    pub gpu_devices: Vec<String>,
    /// Where training phases (MLLOG lines) are read from.
    pub mllog: MllogSource,
    /// Attach to running processes (`record -p`, `-a`) instead of
    /// starting `command` (which is then empty).
    pub attach: Option<AttachOptions>,
    /// `--time-resolution`: times rounded to multiples of this many ns
    /// before they are written (1: as measured).
    pub time_resolution_ns: u64,
    /// Where a copy of the log's header and of each frame written goes
    /// (the live metrics: `record --metrics`, `--otlp`).
    pub tap: Option<mltrace_log::tap::FrameTap>,
}

/// A `kill -9` loses at most this much. Each frame restarts its string
/// table, its per-thread predictions and its zstd window: the same 4.2
/// million records of `make bench`'s long run (200k events/s) take 3.95
/// B/record in 250 ms frames and 3.75 in 1 s frames (a frame is also cut at
/// `DEFAULT_FRAME_RECORDS`, which bounds its memory at any rate).
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

impl RecordOptions {
    pub fn new(command: Vec<OsString>, output: PathBuf) -> Self {
        RecordOptions {
            command,
            output,
            force: false,
            bpf: BpfConfig::default(),
            zstd_level: 3,
            flush_interval: FLUSH_INTERVAL,
            frame_records: DEFAULT_FRAME_RECORDS,
            file_generation: crate::files::GENERATION,
            run_as: None,
            progress: None,
            sample_interval: Some(Duration::from_millis(100)),
            gpu: None,
            gpu_devices: Vec::new(),
            mllog: MllogSource::Output,
            attach: None,
            time_resolution_ns: 1,
            tap: None,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Progress {
    pub elapsed: Duration,
    pub records: u64,
    pub lost: u64,
    pub log_bytes: u64,
    /// Set once writing the log has failed (recording stopped there).
    pub write_error: Option<String>,
}

#[derive(Clone, Debug)]
pub struct RecordSummary {
    pub output: PathBuf,
    /// wait(2) status of the command; `None` if recording was stopped before it ended.
    pub wait_status: Option<i32>,
    /// What `record` should exit with: the command's code, or 128+signal
    /// (0 after attaching).
    pub exit_code: i32,
    /// After attaching: why recording stopped (the duration, an interrupt,
    /// the processes exiting).
    pub stopped: Option<String>,
    pub records: u64,
    pub log_bytes: u64,
    /// Lost events by kind (only kinds with losses).
    pub lost: Vec<(LostKind, u64)>,
    pub duration: Duration,
    /// Set when writing the log failed part-way; what was written is readable.
    pub write_error: Option<String>,
    /// Things that stopped working during the recording (a GPU's metrics).
    pub warnings: Vec<String>,
    /// Processes no longer recorded because they became another user or
    /// group (not root: see [`crate::bpf::BpfConfig::only_ids`]).
    pub untraced: Vec<String>,
    /// File identities the decoder held at the end, and forgot on the way
    /// (for debugging its bound).
    pub files_held: usize,
    pub files_forgotten: u64,
    /// File events `--path` left out in user space (reads and writes are
    /// mostly dropped in the kernel already).
    pub path_filtered: u64,
}

/// State shared by the threads of one recording.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Stops the samplers first, so their last batch reaches the log.
    stop_samplers: AtomicBool,
    /// Stops the MLLOG readers (after the command ended), before the rest.
    stop_relay: AtomicBool,
    /// Second Ctrl-C: stop now, without waiting for the command.
    abort: AtomicBool,
    interrupts: AtomicU32,
    records: AtomicU64,
    lost: AtomicU64,
    log_bytes: AtomicU64,
    /// Writing failed: capture stops, the command goes on.
    write_error: std::sync::Mutex<Option<String>>,
}

pub fn exit_code_of(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    }
}

/// Records `opts.command` into `opts.output`. See the module docs.
pub fn record(mut opts: RecordOptions) -> Result<RecordSummary, CaptureError> {
    // First: a SIGTERM while the programs load (a second or more on a busy
    // machine) waits for the signal thread, which passes it to the command
    // once it runs, instead of killing us with a log half written.
    let _mask = SignalBlock::new();
    let (attaching, program) = command::target(&mut opts)?;
    let mut out = OutputFile::create(&opts.output, opts.force)?;
    // At once: a recorder killed from here on leaves the log to its user.
    if let Some(u) = &opts.run_as {
        out.chown(u.uid, u.gid)?;
    }
    let mut plan = bpf::Plan::new(&opts.bpf, &KernelBtf::load());
    let mut storage: [MaybeUninit<_>; 6] = std::array::from_fn(|_| MaybeUninit::uninit());
    let loaded_since = system::boottime_ns();
    let bpf::Loaded { skel, call_links: _call_links, rings } = bpf::load(&mut storage, &opts.bpf, &mut plan)?;
    probes::tell_plan(&plan);
    let _fault_links = bpf::attach_faults(&skel, &mut plan);
    if let Some(why) = &plan.fault_fallback {
        eprintln!("mltrace: major faults are not recorded here: {why}");
    }
    let uprobes = probes::lib_probes(&skel, &plan, attaching.as_ref(), &opts.bpf);
    let uprobe_probes: Vec<Probe> = uprobes.iter().map(LibProbes::probe).collect();
    let started = Instant::now();
    let command::Started { interactive, relay, channel, child } = command::start(program.as_ref(), &opts)?;
    // Attached: one process is the run's main process, like a command.
    let pid = match (&child, &attaching) {
        (Some(c), _) => c.pid,
        (None, Some(a)) if a.pids.len() == 1 => a.pids[0] as i32,
        _ => 0,
    };
    let abort_child = |c: Option<launch::Paused>| {
        if let Some(c) = c {
            c.abort();
        }
    };
    let start = system::clock_anchor();
    let clock = ClockMap::new(&start);
    let phases::Readers { probe: phases_probe, copiers, follower } =
        phases::readers(relay, channel, &opts.mllog, clock);
    let io_err = |what: &str| {
        let what = what.to_string();
        move |source| CaptureError::Io { what, source }
    };
    let log_header = header(&opts, &plan, pid as u32, start, phases_probe.clone(), uprobe_probes.clone());
    let tap = opts.tap.take();
    if let Some(t) = &tap {
        let _ = t.tx.send(mltrace_log::tap::Tapped::Header(Box::new(log_header.clone())));
    }
    let writer = match out.file.try_clone().and_then(|f| LogWriter::new(f, &log_header, opts.zstd_level)) {
        Ok(w) => w,
        Err(source) => {
            abort_child(child);
            return Err(CaptureError::Output { path: opts.output.clone(), source });
        }
    };
    let mut enc = FrameEncoder::new();
    enc.set_time_resolution(opts.time_resolution_ns);
    match &attaching {
        None => {
            if let Err(e) = bpf::trace_pid(&skel, pid as u32, plan.route) {
                abort_child(child);
                return Err(e);
            }
            enc.push(&Fork {
                ts: system::boottime_ns(),
                pid: pid as u32,
                tid: pid as u32,
                parent_pid: std::process::id(),
                parent_tid: std::process::id(),
                thread: false,
            });
        }
        Some(a) => {
            for &p in &a.pids {
                // Named first: its threads' comms (it has no exec in the log).
                attach::snapshot(p, system::boottime_ns(), &mut enc);
                bpf::attach_pid(&skel, p, plan.route)?;
            }
        }
    }

    let shared = Shared::default();
    let (samples_tx, samples_rx) = bounded::<SampleSink>(256);
    let (gpu_events_tx, gpu_events_rx) = bounded::<Vec<GpuEventSample>>(256);
    let (mllog_tx, mllog_rx) = bounded::<MllogMsg>(4096);
    let (acct_tx, acct_rx) = bounded::<Vec<IoAccounting>>(1);
    let (frames_tx, frames_rx) = bounded::<EncodedFrame>(4);
    let (free_tx, free_rx) = bounded::<EncodedFrame>(4);
    let summary = opts.bpf.summary_slow_ns.is_some();
    let consumer = Consumer {
        enc,
        dec: consumer::decoder(attaching.as_ref(), pid as u32, opts.file_generation, !uprobes.is_empty(), summary),
        frames: frames_tx,
        free: free_rx,
        frame_records: opts.frame_records,
        last_cut: Instant::now(),
        lost_seen: [0; bpf::LOST_SLOTS],
        unsent_batched: 0,
        skipped: 0,
        shared: &shared,
        samples: samples_rx,
        gpu_events: gpu_events_rx,
        mllog: mllog_rx,
        accounting: acct_rx,
        phases: PhaseRecorder::new(if attaching.is_none() { pid as u32 } else { 0 }),
        gpu_counts: (!uprobes.is_empty()).then(|| cuda::GpuCounts::new(system::boottime_ns())),
        summaries: opts.bpf.summary_slow_ns.map(|_| crate::summary::Summaries::default()),
        uprobes,
        dump: crate::dump::Dump::from_env(pid as u32, summary),
    };
    let mut consumer = consumer;
    consumer.dec.py.walk = opts.bpf.py_stacks;
    if let Some(p) = &program {
        crate::python::prime(&skel, p, &mut consumer.dec.py);
    }
    let flush = opts.flush_interval;
    let interval = opts.sample_interval;
    let gpu = opts.gpu.take();
    let skel_for_pids = &skel;
    let pids_cache = bpf::TracedPids::default();
    let pids_ref = &pids_cache;
    let traced_pids = move || pids_ref.get(skel_for_pids);
    let skel_ref = &skel;
    let shared_ref = &shared;
    let rings_ref = &rings[..];
    let out_ref = &mut out;
    let outcome = std::thread::scope(|s| {
        let writer_h = std::thread::Builder::new()
            .name("mltrace-writer".into())
            .spawn_scoped(s, move || writer_loop(writer, frames_rx, free_tx, tap, shared_ref))
            .map_err(io_err("starting the writer thread"))?;
        let consumer_h = std::thread::Builder::new()
            .name("mltrace-consumer".into())
            .spawn_scoped(s, move || consumer_loop(skel_ref, rings_ref, consumer, flush))
            .map_err(io_err("starting the consumer thread"))?;
        let stop_samplers = &shared_ref.stop_samplers;
        let samplers = samplers::start(s, interval, gpu, traced_pids, samples_tx, gpu_events_tx, stop_samplers);
        let relays = phases::start(s, copiers, follower, mllog_tx, &shared_ref.stop_relay);
        let startup_cpu = mltrace_sample::process_cpu_ns();
        let exec = child.map(launch::Paused::release).unwrap_or(Ok(()));
        let wait_status = match exec {
            Ok(()) => {
                out_ref.keep();
                let target = attaching.is_none().then_some(if interactive { pid } else { -pid });
                let sig_h = s.spawn(move || signal_loop(target, shared_ref));
                let (st, stopped) = match &attaching {
                    None => (wait_child(pid, shared_ref, started, &mut opts.progress), None),
                    Some(a) => {
                        (None, Some(wait_attached(skel_ref, pids_ref, a, shared_ref, started, &mut opts.progress)))
                    }
                };
                relays.stop();
                let (disks, uring_ops) = probes::read_at_end(skel_ref, &plan, &acct_tx, loaded_since, startup_cpu);
                let (sampler_cpu, warnings) = samplers.stop(stop_samplers);
                shared_ref.stop.store(true, Ordering::Release);
                let _ = sig_h.join();
                Ok((st, stopped, disks, sampler_cpu, warnings, uring_ops))
            }
            Err(errno) => {
                // Nothing of the command was recorded: `out` is removed on drop.
                let mut st = 0;
                // SAFETY: reaping our own child, which exits right after a failed exec.
                unsafe { libc::waitpid(pid, &mut st, 0) };
                relays.stop();
                shared_ref.stop_samplers.store(true, Ordering::Release);
                shared_ref.stop.store(true, Ordering::Release);
                Err(command::exec_error(errno, &opts.command))
            }
        };
        let (lost, phase_warnings, files) = consumer_h.join().expect("consumer thread panicked")?;
        let (writer, write_error) = writer_h.join().expect("writer thread panicked");
        Ok::<_, CaptureError>((wait_status, lost, writer, write_error, phase_warnings, files))
    });
    let (wait_status, lost, writer, mut write_error, phase_warnings, files) = outcome?;
    let (wait_status, stopped, diskstats, sampler_cpu_ns, mut warnings, uring_ops) =
        wait_status.map_err(CaptureError::Command)?;
    warnings.extend(phase_warnings);
    let lost_list: Vec<(LostKind, u64)> =
        lost.iter().enumerate().filter(|(_, &n)| n > 0).map(|(k, &n)| (LostKind::from_u8(k as u8), n)).collect();
    let records = writer.records();
    let trailer = writer::trailer(
        wait_status,
        stopped.is_some(),
        &lost_list,
        diskstats,
        sampler_cpu_ns,
        warnings.clone(),
        uring_ops,
    );
    let log_bytes = writer::finish(writer, &trailer, &mut write_error, &mut out);
    Ok(RecordSummary {
        output: opts.output,
        wait_status,
        exit_code: match (&stopped, wait_status) {
            (Some(_), _) => 0,
            (None, st) => st.map(exit_code_of).unwrap_or(130),
        },
        stopped,
        records,
        log_bytes,
        lost: lost_list,
        duration: started.elapsed(),
        write_error,
        warnings,
        files_held: files.0,
        files_forgotten: files.1,
        path_filtered: files.2,
        untraced: files.3,
    })
}
