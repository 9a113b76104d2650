//! `mltrace record`: runs a command under the BPF programs and writes the log.
//!
//! Threads: the caller's thread starts the command and waits for it; a
//! consumer drains the ring buffer and encodes frames (no allocation per
//! event); a writer compresses and writes frames, so a slow disk backs up
//! into the ring (where losses are counted) instead of stalling the kernel
//! side; a signal thread forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT sent with
//! kill(2) to the command (terminal signals reach it directly).

use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::File;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use libbpf_rs::RingBufferBuilder;
use mltrace_log::*;
use mltrace_sample::gpu::GpuEventSample;
use mltrace_sample::gpu::GpuSampler;
use mltrace_sample::SampleSink;

use crate::attach::{self, AttachOptions};
use crate::bpf::{self, BpfConfig, Skeleton, LOST_SLOTS};
use crate::cuda::{self, LibProbes};
use crate::decode::{DecodeStats, KernelDecoder};
use crate::error::CaptureError;
use crate::features::KernelBtf;
use crate::identity::{self, User};
use crate::launch::{self, CommandError};
use crate::mllog::{ClockMap, FileFollower, MllogMsg, MllogSource, ModuleChannel, OutputRelay, PhaseRecorder};
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

const FORWARDED: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks the forwarded signals in this thread (and the threads it starts),
/// so only the signal thread sees them; restores the old mask on drop.
struct SignalBlock(libc::sigset_t);

impl SignalBlock {
    fn new() -> Self {
        let set = signal_set();
        // SAFETY: valid sigset pointers.
        unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            SignalBlock(old)
        }
    }
}

impl Drop for SignalBlock {
    fn drop(&mut self) {
        // SAFETY: restoring the mask saved in new().
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// Where forwarded signals go: the command's own process group when it
/// has one, else the command alone.
fn signal_loop(target: Option<i32>, shared: &Shared) {
    let set = signal_set();
    let timeout = libc::timespec { tv_sec: 0, tv_nsec: 100_000_000 };
    while !shared.stop.load(Ordering::Relaxed) {
        // SAFETY: valid set, info and timeout pointers.
        let (sig, code, sender) = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let sig = libc::sigtimedwait(&set, &mut info, &timeout);
            (sig, info.si_code, if info.si_code <= 0 { info.si_pid() } else { 0 })
        };
        // Our own forwarding, seen again when we share the target's group.
        if sig <= 0 || sender == std::process::id() as i32 {
            continue;
        }
        if sig == libc::SIGINT && shared.interrupts.fetch_add(1, Ordering::Relaxed) >= 1 {
            shared.abort.store(true, Ordering::Relaxed);
        }
        // Attached: any of them stops the recording, and nothing is sent
        // to the processes, which go on untouched.
        let Some(target) = target else {
            shared.abort.store(true, Ordering::Relaxed);
            continue;
        };
        // A terminal's Ctrl-C (SI_KERNEL) already reached the command's
        // process group; forward only what was sent to us alone.
        if code != libc::SI_KERNEL {
            // SAFETY: signalling our own child or its process group.
            unsafe { libc::kill(target, sig) };
        }
    }
}

struct Consumer<'s> {
    enc: FrameEncoder,
    dec: KernelDecoder,
    frames: Sender<EncodedFrame>,
    free: Receiver<EncodedFrame>,
    frame_records: usize,
    last_cut: Instant,
    lost_seen: [u64; 8],
    shared: &'s Shared,
    samples: Receiver<SampleSink>,
    gpu_events: Receiver<Vec<GpuEventSample>>,
    mllog: Receiver<MllogMsg>,
    /// The last counts of the threads still alive when the command ended.
    accounting: Receiver<Vec<IoAccounting>>,
    phases: PhaseRecorder,
    /// The CUDA and NCCL probes, one per library (none when off):
    /// libraries traced processes map are attached as their mappings are
    /// decoded.
    uprobes: Vec<LibProbes>,
    /// The CUDA calls only counted (with the CUDA probes).
    gpu_counts: Option<cuda::GpuCounts>,
    /// `--detail summary`: the calls summed in the kernel.
    summaries: Option<crate::summary::Summaries>,
}

impl Consumer<'_> {
    /// Counter samples from the sampler threads, interned into this frame.
    fn drain_samples(&mut self) {
        while let Ok(batch) = self.samples.try_recv() {
            for s in batch {
                let group = self.enc.intern(s.group.as_bytes());
                let name = self.enc.intern(s.name.as_bytes());
                self.enc.push(&Record::Counter(Counter {
                    ts: s.ts,
                    group,
                    name,
                    unit: s.unit,
                    pid: s.pid,
                    value: s.value,
                }));
            }
        }
        while let Ok(batch) = self.gpu_events.try_recv() {
            for e in batch {
                let group = self.enc.intern(e.group.as_bytes());
                self.enc.push(&Record::GpuEvent(GpuEvent { ts: e.ts, group, kind: e.kind, code: e.code, pid: 0 }));
            }
        }
    }

    fn drain_accounting(&mut self) {
        while let Ok(batch) = self.accounting.try_recv() {
            for a in batch {
                self.enc.push(&Record::IoAccounting(a));
            }
        }
    }

    /// Attaches the CUDA and NCCL probes to the `libcuda.so*` and
    /// `libnccl.so*` files traced processes mapped since the last round
    /// (calls they make before this are missed).
    fn attach_libraries(&mut self, skel: &Skeleton<'_>) {
        if self.uprobes.is_empty() {
            return;
        }
        for p in self.dec.take_libraries() {
            use std::os::unix::ffi::OsStrExt;
            if let Some(probes) = self.uprobes.iter_mut().find(|u| u.lib.matches(&p)) {
                probes.attach(skel, std::path::Path::new(std::ffi::OsStr::from_bytes(&p)));
            }
        }
    }

    /// The CUDA calls counted since the last round.
    fn count_gpu_calls(&mut self, skel: &Skeleton<'_>) {
        if let Some(c) = &mut self.gpu_counts {
            c.round(skel, system::boottime_ns(), &mut self.enc);
        }
    }

    /// The threads' summary slots, read before the ring is drained.
    fn read_slots(&mut self, skel: &Skeleton<'_>) {
        if let Some(s) = &mut self.summaries {
            s.read_slots(skel);
        }
    }

    /// The sums of the seconds that have ended (all, when `last`).
    fn take_summaries(&mut self, skel: &Skeleton<'_>, last: bool) {
        if let Some(s) = &mut self.summaries {
            s.round(skel, system::boottime_ns(), last, &mut self.dec, &mut self.enc);
        }
    }

    /// Warnings about the training phases and the CUDA and NCCL probes.
    fn warnings(&self) -> Vec<String> {
        let mut w = self.phases.warnings();
        if let Some(e) = self.summaries.as_ref().and_then(|s| s.error.as_ref()) {
            w.push(format!("the threads' summary slots could not be read ({e}): sums of threads alive at the end of the recording may be missing"));
        }
        w.extend(self.uprobes.iter().filter_map(LibProbes::warning));
        w
    }

    fn drain_mllog(&mut self) {
        while let Ok(m) = self.mllog.try_recv() {
            self.phases.take(m, &mut self.enc);
        }
    }

    #[inline]
    fn on_event(&mut self, data: &[u8]) {
        self.dec.decode(data, &mut self.enc);
        if self.enc.len() >= self.frame_records {
            self.cut();
        }
    }

    fn cut(&mut self) {
        self.last_cut = Instant::now();
        if self.enc.is_empty() {
            return;
        }
        let mut f = self.free.try_recv().unwrap_or_default();
        self.enc.finish_into(&mut f);
        self.shared.records.fetch_add(u64::from(f.records), Ordering::Relaxed);
        // The writer only goes away after we do.
        let _ = self.frames.send(f);
    }

    /// The anonymous mmaps of processes still alive (the kernel side sends
    /// the others' at their exit).
    fn anon_summaries(&mut self, skel: &Skeleton<'_>) {
        let ts = system::boottime_ns();
        for (pid, calls, bytes) in bpf::anon_counts(skel) {
            let path = self.enc.intern(b"");
            self.enc.push(&Record::Mapping(Mapping {
                ts,
                pid,
                tid: pid,
                op: MapOp::Anonymous,
                fd: -1,
                path,
                len: bytes,
                ret: calls as i64,
                ..Default::default()
            }));
        }
    }

    /// Turns new drops (kernel counters and our own) into Lost records.
    fn account_losses(&mut self, skel: &Skeleton<'_>) {
        let kernel = bpf::read_lost(skel);
        let DecodeStats { malformed, unknown_file, .. } = self.dec.stats;
        let mut now = [0u64; 8];
        now[..LOST_SLOTS.min(8)].copy_from_slice(&kernel[..LOST_SLOTS.min(8)]);
        now[LostKind::Malformed as usize] += malformed;
        now[LostKind::UnknownFile as usize] += unknown_file;
        let ts = system::boottime_ns();
        for (k, (&n, seen)) in now.iter().zip(self.lost_seen.iter_mut()).enumerate() {
            if n > *seen {
                self.enc.push(&Record::Lost(Lost { ts, kind: LostKind::from_u8(k as u8), count: n - *seen }));
                self.shared.lost.fetch_add(n - *seen, Ordering::Relaxed);
                *seen = n;
            }
        }
    }
}

/// Lost counts by kind, warnings about the training phases, and the file
/// table's (held, forgotten) with the events `--path` left out.
/// Losses, warnings, and (file names held, forgotten, left out by --path; processes untraced).
type ConsumerResult = Result<([u64; 8], Vec<String>, (usize, u64, u64, Vec<String>)), CaptureError>;

fn consumer_loop(skel: &Skeleton<'_>, consumer: Consumer<'_>, flush: Duration) -> ConsumerResult {
    let state = RefCell::new(consumer);
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&skel.maps.events, |data| {
            state.borrow_mut().on_event(data);
            0
        })
        .map_err(|source| CaptureError::Bpf { stage: "opening the ring buffer".into(), source })?;
    let rb = builder.build().map_err(|source| CaptureError::Bpf { stage: "opening the ring buffer".into(), source })?;
    let shared = state.borrow().shared;
    let mut last_losses = Instant::now();
    let mut last_counts = Instant::now();
    let mut last_sums = Instant::now();
    // Files the decoder forgot: when the kernel side was told, and how often.
    let mut forgot_at: Option<Instant> = None;
    let mut epoch = 0u64;
    let mut kernel_untold = false;
    loop {
        // Nothing more can be written: stop capturing, let the command run.
        if shared.write_error.lock().unwrap().is_some() {
            let c = state.borrow();
            return Ok((
                c.lost_seen,
                c.warnings(),
                (c.dec.files().len(), c.dec.files().forgotten, c.dec.stats.filtered, c.dec.untraced.clone()),
            ));
        }
        let stopping = shared.stop.load(Ordering::Acquire);
        let round = Instant::now();
        let sums_due = stopping || last_sums.elapsed() >= Duration::from_millis(200);
        if sums_due {
            state.borrow_mut().read_slots(skel);
        }
        // Wakeups are batched in the kernel, so poll() may time out with
        // data waiting: always consume afterwards.
        let _ = rb.poll(Duration::from_millis(50));
        let _ = rb.consume();
        let mut c = state.borrow_mut();
        c.drain_samples();
        c.drain_mllog();
        c.drain_accounting();
        c.attach_libraries(skel);
        // This round drained everything queued since it began: records sent
        // before the kernel side forgot (plus a margin for programs running
        // at that moment) have all been decoded.
        if forgot_at.is_some_and(|t| round >= t + Duration::from_millis(10)) && !kernel_untold {
            c.dec.files_mut().release_retired();
            forgot_at = None;
        }
        let forget = c.dec.files_mut().take_forgotten();
        if !forget.is_empty() {
            epoch += 1;
            match bpf::forget_files(skel, &forget, epoch) {
                Ok(()) => forgot_at = Some(Instant::now()),
                // The kernel side may still trust them: keep them all.
                Err(_) => kernel_untold = true,
            }
        }
        if stopping || last_losses.elapsed() >= Duration::from_millis(100) {
            c.account_losses(skel);
            last_losses = Instant::now();
        }
        if stopping || last_counts.elapsed() >= Duration::from_secs(1) {
            c.count_gpu_calls(skel);
            last_counts = Instant::now();
        }
        if sums_due {
            c.take_summaries(skel, stopping);
            last_sums = Instant::now();
        }
        if stopping {
            // The readers have finished: phases still open end here.
            let c = &mut *c;
            if let Some(s) = &mut c.summaries {
                s.open_spans(skel, &mut c.enc);
            }
            c.phases.finish(system::boottime_ns(), &mut c.enc);
            c.anon_summaries(skel);
            c.cut();
            return Ok((
                c.lost_seen,
                c.warnings(),
                (c.dec.files().len(), c.dec.files().forgotten, c.dec.stats.filtered, c.dec.untraced.clone()),
            ));
        }
        if c.last_cut.elapsed() >= flush {
            c.cut();
        }
    }
}

fn writer_loop(
    mut writer: LogWriter<File>,
    frames: Receiver<EncodedFrame>,
    free: Sender<EncodedFrame>,
    shared: &Shared,
) -> (LogWriter<File>, Option<String>) {
    let mut error = None;
    for f in frames {
        if error.is_none() {
            if let Err(e) = writer.write_frame(&f) {
                error = Some(e.to_string());
                *shared.write_error.lock().unwrap() = error.clone();
            }
            shared.log_bytes.store(writer.bytes_written(), Ordering::Relaxed);
        }
        let _ = free.try_send(f);
    }
    (writer, error)
}

fn header(
    opts: &RecordOptions,
    plan: &bpf::Plan,
    root_pid: u32,
    start: ClockAnchor,
    phases: Option<Probe>,
    uprobes: Vec<Probe>,
) -> Header {
    let command = match &opts.attach {
        // One process attached: its command line names it, like a command's.
        Some(a) if a.pids.len() == 1 => attach::cmdline(a.pids[0]),
        Some(_) => Vec::new(),
        None => opts.command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
    };
    let attach = opts.attach.as_ref().map(|a| mltrace_log::Attach {
        pids: a.pids.clone(),
        all: a.all,
        comm: a.comm.clone(),
        cgroup: a.cgroup.as_ref().map(|p| p.display().to_string()),
        path: a.path.clone(),
        duration_ns: a.duration.map(|d| d.as_nanos() as u64),
    });
    Header {
        mltrace_version: VERSION.into(),
        source: "record".into(),
        host: system::hostname(),
        kernel: system::kernel_release(),
        cpu_count: system::cpu_count(),
        boot_id: system::boot_id(),
        command,
        cwd: std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default(),
        root_pid,
        recorder_pid: std::process::id(),
        probes: {
            let mut p = bpf::probes(plan);
            if let Some(iv) = opts.sample_interval {
                p.push(Probe {
                    subsystem: "counters".into(),
                    mechanism: "/proc".into(),
                    detail: format!(
                        "every {} ms: /proc/stat, /proc/meminfo, /proc/pressure, /proc/diskstats, /proc/net/dev, /sys/class/infiniband, /proc/PID/stat+statm",
                        iv.as_millis()
                    ),
                });
            }
            if opts.gpu.is_some() {
                p.push(Probe {
                    subsystem: "gpu".into(),
                    mechanism: "NVML".into(),
                    detail: opts.gpu_devices.join("; "),
                });
            }
            p.extend(uprobes);
            p.extend(phases);
            p
        },
        clock: "boottime".into(),
        start,
        diskstats: if plan.block.is_some() { system::disk_snapshot() } else { None },
        // One host: `mltrace merge` fills this in.
        hosts: Vec::new(),
        attach,
        summary_slow_ns: opts.bpf.summary_slow_ns,
        time_resolution_ns: (opts.time_resolution_ns > 1).then_some(opts.time_resolution_ns),
    }
}

/// Attached: waits for the duration, an interrupt, or every traced process
/// to exit (`-p`), and says which.
fn wait_attached(
    skel: &Skeleton<'_>,
    a: &AttachOptions,
    shared: &Shared,
    started: Instant,
    progress: &mut Option<ProgressFn>,
) -> String {
    let (mut last, mut last_check) = (Instant::now(), Instant::now());
    let report = |p: &mut ProgressFn| p(&progress_now(shared, started));
    let why = loop {
        if shared.abort.load(Ordering::Relaxed) {
            break "stopped by a signal; the traced processes go on untouched".to_string();
        }
        if let Some(d) = a.duration {
            if started.elapsed() >= d {
                break format!("stopped after --duration {}; the traced processes go on untouched", human_duration(d));
            }
        }
        // Exited processes leave the traced set (children started since
        // keep it going).
        if !a.all && last_check.elapsed() >= Duration::from_millis(100) {
            if bpf::traced_pids(skel).is_empty() {
                break "the traced processes exited".to_string();
            }
            last_check = Instant::now();
        }
        if let Some(p) = progress.as_mut() {
            if last.elapsed() >= Duration::from_millis(500) {
                last = Instant::now();
                report(p);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if let Some(p) = progress.as_mut() {
        report(p);
    }
    why
}

fn human_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 && s % 3600.0 == 0.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 60.0 && s % 60.0 == 0.0 {
        format!("{}m", s / 60.0)
    } else {
        format!("{s}s")
    }
}

/// Where the recording stands, for the progress line.
fn progress_now(shared: &Shared, started: Instant) -> Progress {
    Progress {
        elapsed: started.elapsed(),
        records: shared.records.load(Ordering::Relaxed),
        lost: shared.lost.load(Ordering::Relaxed),
        log_bytes: shared.log_bytes.load(Ordering::Relaxed),
        write_error: shared.write_error.lock().unwrap().clone(),
    }
}

/// Waits for the command; `None` when a second interrupt asked to stop now.
fn wait_child(pid: i32, shared: &Shared, started: Instant, progress: &mut Option<ProgressFn>) -> Option<i32> {
    let mut last = Instant::now();
    let report = |p: &mut ProgressFn| p(&progress_now(shared, started));
    loop {
        let mut status = 0;
        // SAFETY: reaping our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        let ended = if r == pid {
            Some(Some(status))
        } else if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            Some(Some(0))
        } else if shared.abort.load(Ordering::Relaxed) {
            Some(None)
        } else {
            None
        };
        if let Some(end) = ended {
            // A last report: what happened since the previous one (a write
            // error) is told before the summary, however short the run.
            if let Some(p) = progress.as_mut() {
                report(p);
            }
            return end;
        }
        if let Some(p) = progress.as_mut() {
            if last.elapsed() >= Duration::from_millis(500) {
                last = Instant::now();
                report(p);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Records `opts.command` into `opts.output`. See the module docs.
pub fn record(mut opts: RecordOptions) -> Result<RecordSummary, CaptureError> {
    // First: a SIGTERM while the programs load (a second or more on a busy
    // machine) waits for the signal thread, which passes it to the command
    // once it runs, instead of killing us with a log half written.
    let _mask = SignalBlock::new();
    let missing = system::missing_privileges();
    if !missing.is_empty() {
        return Err(CaptureError::Privileges { missing });
    }
    // Attached: who may watch what is decided before anything is loaded
    // or written (a refusal leaves no log).
    let attaching = opts.attach.clone();
    let program = match &attaching {
        Some(a) => {
            let cgroup = attach::check(a)?;
            opts.bpf.adopt = Some(bpf::Adopt {
                all: a.all,
                comm: a.comm.as_ref().map(|c| c.as_bytes().to_vec()),
                path: a.path.as_ref().map(|p| p.as_bytes().to_vec()),
                cgroup: cgroup.map(std::sync::Arc::new),
            });
            if matches!(opts.mllog, MllogSource::Output) {
                opts.mllog = MllogSource::Off;
            }
            None
        }
        None => {
            let first = opts.command.first().ok_or(CaptureError::Command(CommandError::NotFound(String::new())))?;
            Some(launch::resolve(first).map_err(CaptureError::Command)?)
        }
    };
    // Not root: whoever becomes another user or group is not the caller's
    // to watch (root, or sudo dropping the command to a user, sees all).
    // SAFETY: getuid and getgid have no preconditions.
    opts.bpf.only_ids = match unsafe { (libc::getuid(), libc::getgid()) } {
        (0, _) => None,
        ids => Some(ids),
    };
    let mut out = OutputFile::create(&opts.output, opts.force)?;
    // At once: a recorder killed from here on leaves the log to its user.
    if let Some(u) = &opts.run_as {
        out.chown(u.uid, u.gid)?;
    }
    let mut plan = bpf::Plan::new(&opts.bpf, &KernelBtf::load());
    let mut storage: [MaybeUninit<_>; 6] = std::array::from_fn(|_| MaybeUninit::uninit());
    let loaded_since = system::boottime_ns();
    let bpf::Loaded { skel, call_links: _call_links } = bpf::load(&mut storage, &opts.bpf, &mut plan)?;
    if let Some(why) = &plan.fallback {
        // Slower, but everything is still recorded: say so, once.
        eprintln!(
            "mltrace: the {} probes did not load here ({why}); using the {} route ({})",
            match why.split(' ').next() {
                Some("per-call") => "per-call",
                _ => "fast (tp_btf)",
            },
            bpf::route_name(plan.route),
            plan.route.describe()
        );
    }
    if let Some(at) = plan.tracefs_mounted {
        eprintln!(
            "mltrace: tracefs was not mounted; mounted it at {at} (the page-cache, io_uring and fault probes need it)"
        );
    }
    if let Some(why) = &plan.tracefs_unusable {
        eprintln!(
            "mltrace: {why}: page-cache attribution, io_uring requests and major faults' start times are not \
             recorded"
        );
    }
    if let Err(why) = &plan.uring {
        // Absent tracepoints are for `doctor` to explain; a load failure is news.
        if why.starts_with("its programs") {
            eprintln!("mltrace: io_uring requests are not recorded: {why}");
        }
    }
    let _fault_links = bpf::attach_faults(&skel, &mut plan);
    if let Some(why) = &plan.fault_fallback {
        eprintln!("mltrace: major faults are not recorded here: {why}");
    }
    let uprobes: Vec<LibProbes> = if plan.cuda {
        let mapped: Vec<_> = attaching.iter().flat_map(|a| a.pids.iter().flat_map(|&p| cuda::mapped_by(p))).collect();
        cuda::LIBRARIES
            .iter()
            .map(|&lib| {
                let mut c = LibProbes::new(lib, plan.uprobe_multi, opts.bpf.cuda_launches);
                let here = mapped.iter().filter(|p| lib.matches(p.as_os_str().as_encoded_bytes())).cloned();
                for path in lib.candidates().into_iter().chain(here) {
                    c.attach(&skel, &path);
                }
                if let Some(w) = c.warning() {
                    eprintln!("mltrace: {w}");
                }
                c
            })
            .collect()
    } else {
        Vec::new()
    };
    let uprobe_probes: Vec<Probe> = uprobes.iter().map(LibProbes::probe).collect();
    let started = Instant::now();
    let env = opts.run_as.as_ref().map(identity::environment);
    let run_as = opts.run_as.as_ref().map(User::run_as);
    // On a terminal the command stays in our process group, so it keeps the
    // terminal and Ctrl-C reaches it (and us) directly. Otherwise it gets a
    // group of its own, and signals sent to us go to that group, reaching
    // its workers without touching a supervisor that may share ours.
    let interactive = {
        // SAFETY: tcgetpgrp/getpgrp have no preconditions.
        let fg = unsafe { libc::tcgetpgrp(libc::STDIN_FILENO) };
        fg > 0 && fg == unsafe { libc::getpgrp() }
    };
    let relay = match opts.mllog {
        MllogSource::Output => Some(
            OutputRelay::new()
                .map_err(|source| CaptureError::Io { what: "making pipes for the command's output".into(), source })?,
        ),
        _ => None,
    };
    // The Python module's own pipe, for a command we start (it leaves the
    // command's output alone, so --mllog FILE keeps it; --no-mllog, no
    // training phases at all, does not).
    let channel = match (&program, &opts.mllog) {
        (None, _) | (_, MllogSource::Off) => None,
        (Some(_), _) => Some(
            ModuleChannel::new()
                .map_err(|source| CaptureError::Io { what: "making the mltrace module's pipe".into(), source })?,
        ),
    };
    let channel_env = match &channel {
        Some(c) => c
            .env()
            .map_err(|source| CaptureError::Io { what: "naming the mltrace module's pipe".into(), source })?
            .to_vec(),
        None => Vec::new(),
    };
    let child = match &program {
        Some(program) => Some(
            launch::spawn_paused(
                program,
                &opts.command,
                &launch::SpawnOptions {
                    run_as: run_as.as_ref(),
                    env: env.as_deref(),
                    new_group: !interactive,
                    stdout: relay.as_ref().map(|r| r.child_stdout.as_raw_fd()),
                    stderr: relay.as_ref().map(|r| r.child_stderr.as_raw_fd()),
                    inherit: channel.as_ref().map(|c| c.child_write.as_raw_fd()),
                    extra_env: &channel_env,
                },
            )
            .map_err(|source| CaptureError::Io { what: "starting the command".into(), source })?,
        ),
        None => None,
    };
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
    let from_output = match (&relay, &opts.mllog) {
        (Some(r), _) => Some(r.describe()),
        (None, MllogSource::File(f)) => Some(format!("MLLOG lines appended to {}", f.display())),
        _ => None,
    };
    let from_module = channel.as_ref().map(|_| "the mltrace_ebpf Python module's pipe ($MLTRACE_MLLOG_FD)".to_string());
    let phases_probe = match (from_output, from_module) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
    .map(|detail| Probe { subsystem: "phases".into(), mechanism: "MLLOG".into(), detail });
    let mut copiers = relay.map(|r| r.into_copiers(clock)).unwrap_or_default();
    let relaying = !copiers.is_empty();
    copiers.extend(channel.map(|c| c.into_copier(clock)));
    let follower = match &opts.mllog {
        MllogSource::File(f) => Some(FileFollower::new(f.clone(), clock)),
        _ => None,
    };
    if relaying {
        // A write to our closed stdout must fail, not kill us (and the
        // recording); the command gets its SIGPIPE when we close its pipe.
        // SAFETY: setting a disposition; the command resets its own.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    }
    let io_err = |what: &str| {
        let what = what.to_string();
        move |source| CaptureError::Io { what, source }
    };
    let writer = match out.file.try_clone().and_then(|f| {
        LogWriter::new(
            f,
            &header(&opts, &plan, pid as u32, start, phases_probe.clone(), uprobe_probes.clone()),
            opts.zstd_level,
        )
    }) {
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
            enc.push(&Record::Fork(Fork {
                ts: system::boottime_ns(),
                pid: pid as u32,
                tid: pid as u32,
                parent_pid: std::process::id(),
                parent_tid: std::process::id(),
                thread: false,
            }));
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
    let consumer = Consumer {
        enc,
        dec: {
            let mut d = match &attaching {
                None => KernelDecoder::with_file_generation(pid as u32, opts.file_generation),
                Some(a) => {
                    KernelDecoder::attached(opts.file_generation, a.path.as_ref().map(|p| p.as_bytes().to_vec()))
                }
            };
            // SAFETY: getuid has no preconditions.
            d.hide_others_block_io(unsafe { libc::getuid() } != 0);
            d.watch_libraries(!uprobes.is_empty());
            d
        },
        frames: frames_tx,
        free: free_rx,
        frame_records: opts.frame_records,
        last_cut: Instant::now(),
        lost_seen: [0; 8],
        shared: &shared,
        samples: samples_rx,
        gpu_events: gpu_events_rx,
        mllog: mllog_rx,
        accounting: acct_rx,
        phases: PhaseRecorder::new(if attaching.is_none() { pid as u32 } else { 0 }),
        gpu_counts: (!uprobes.is_empty()).then(|| cuda::GpuCounts::new(system::boottime_ns())),
        summaries: opts.bpf.summary_slow_ns.map(|_| crate::summary::Summaries::default()),
        uprobes,
    };
    let flush = opts.flush_interval;
    let interval = opts.sample_interval;
    let gpu = opts.gpu.take();
    let skel_for_pids = &skel;
    let traced_pids = move || bpf::traced_pids(skel_for_pids);
    let skel_ref = &skel;
    let shared_ref = &shared;
    let out_ref = &mut out;
    let outcome = std::thread::scope(|s| {
        let writer_h = std::thread::Builder::new()
            .name("mltrace-writer".into())
            .spawn_scoped(s, move || writer_loop(writer, frames_rx, free_tx, shared_ref))
            .map_err(io_err("starting the writer thread"))?;
        let consumer_h = std::thread::Builder::new()
            .name("mltrace-consumer".into())
            .spawn_scoped(s, move || consumer_loop(skel_ref, consumer, flush))
            .map_err(io_err("starting the consumer thread"))?;
        let stop_samplers = &shared_ref.stop_samplers;
        let proc_h = interval.map(|iv| {
            let tx = samples_tx.clone();
            s.spawn(move || mltrace_sample::run_proc_samplers(iv, &traced_pids, &tx, stop_samplers))
        });
        let gpu_h = gpu.map(|g| {
            let tx = samples_tx.clone();
            let iv = interval.unwrap_or(Duration::from_millis(100));
            let events_tx = gpu_events_tx;
            s.spawn(move || mltrace_sample::run_gpu_sampler(g, iv, &traced_pids, &tx, &events_tx, stop_samplers))
        });
        drop(samples_tx);
        let relay_stop = &shared_ref.stop_relay;
        let mut relay_h = Vec::new();
        for c in copiers {
            let tx = mllog_tx.clone();
            relay_h.push(s.spawn(move || c.run(&tx, relay_stop)));
        }
        if let Some(f) = follower {
            let tx = mllog_tx.clone();
            relay_h.push(s.spawn(move || f.run(&tx, relay_stop)));
        }
        drop(mllog_tx);
        let stop_relay = move || {
            relay_stop.store(true, Ordering::Release);
            for h in relay_h {
                h.join().expect("output relay thread panicked");
            }
        };
        let startup_cpu = mltrace_sample::process_cpu_ns();
        let exec = child.map(launch::Paused::release).unwrap_or(Ok(()));
        let wait_status = match exec {
            Ok(()) => {
                out_ref.keep();
                let target = attaching.is_none().then_some(if interactive { pid } else { -pid });
                let sig_h = s.spawn(move || signal_loop(target, shared_ref));
                let (st, stopped) = match &attaching {
                    None => (wait_child(pid, shared_ref, started, &mut opts.progress), None),
                    Some(a) => (None, Some(wait_attached(skel_ref, a, shared_ref, started, &mut opts.progress))),
                };
                stop_relay();
                // The kernel's counts of processes that outlive the command,
                // read while the probes still trace them.
                let _ = acct_tx.send(system::live_accounting(&bpf::traced_pids(skel_ref)));
                // While the probes are still attached, so the two compare.
                let disks = if plan.block.is_some() { system::disk_snapshot() } else { None };
                let uring_ops = if plan.uring.is_ok() { bpf::read_uring_ops(skel_ref) } else { Vec::new() };
                bpf::write_prog_stats(skel_ref, loaded_since, startup_cpu);
                shared_ref.stop_samplers.store(true, Ordering::Release);
                let mut sampler_cpu = proc_h.map(|h| h.join().expect("sampler thread panicked")).unwrap_or(0);
                let mut warnings = Vec::new();
                if let Some(h) = gpu_h {
                    let (cpu, w) = h.join().expect("GPU sampler thread panicked");
                    sampler_cpu += cpu;
                    warnings = w;
                }
                shared_ref.stop.store(true, Ordering::Release);
                let _ = sig_h.join();
                Ok((st, stopped, disks, sampler_cpu, warnings, uring_ops))
            }
            Err(errno) => {
                // Nothing of the command was recorded: `out` is removed on drop.
                let mut st = 0;
                // SAFETY: reaping our own child, which exits right after a failed exec.
                unsafe { libc::waitpid(pid, &mut st, 0) };
                stop_relay();
                shared_ref.stop_samplers.store(true, Ordering::Release);
                shared_ref.stop.store(true, Ordering::Release);
                let why = std::io::Error::from_raw_os_error(errno).to_string();
                let shown = opts.command.first().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                Err(if errno == libc::ENOENT {
                    CommandError::NotExecutable(shown, format!("{why} (bad interpreter?)"))
                } else {
                    CommandError::NotExecutable(shown, why)
                })
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
    let trailer = Trailer {
        end: system::clock_anchor(),
        exit_status: wait_status,
        lost: lost_list.iter().map(|(k, n)| LostTotal { kind: k.name().into(), count: *n }).collect(),
        stopped_early: if wait_status.is_none() && stopped.is_none() {
            Some("interrupted twice: stopped before the command ended".into())
        } else {
            None
        },
        diskstats,
        sampler_cpu_ns,
        warnings: warnings.clone(),
        uring_ops,
        ..Default::default()
    };
    let mut log_bytes = writer.bytes_written();
    if write_error.is_none() {
        match writer.finish(&trailer) {
            Ok(f) => log_bytes = f.metadata().map(|m| m.len()).unwrap_or(log_bytes),
            Err(e) => write_error = Some(e.to_string()),
        }
    }
    if let Err(e) = out.sync() {
        write_error.get_or_insert(e.to_string());
    }
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
