//! `mltrace stats`: what a log says, in tables. Streams the log once;
//! memory grows with processes and distinct files, not with events.

mod async_io;
pub mod calls;
pub mod collectives;
pub mod diff;
mod glob;
pub mod gpu_calls;
pub mod gpu_idle;
mod hist;
pub mod hosts;
mod json;
pub mod kernel;
pub mod mapped;
pub mod network;
pub mod peers;
pub mod rank_waits;
pub mod ranks;
mod render_maps;
pub mod run;
pub mod sched;
pub mod step_waits;
pub mod steps;
pub mod suggest;
mod summary;
pub mod timeline;
mod verdict;

pub use verdict::{epoch_reads_line, Verdict};

// Fx, not SipHash: the tables are keyed by pids and paths, looked up
// several times a record (SipHash took a third of `stats` on 42M records).
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::io::{Read, Seek};

pub use async_io::{AioStats, UringStats};
pub use calls::{CallDist, Calls};
pub use hist::Histogram;
use kernel::{Check, KernelIo, TracedIo};
use mapped::{FileMaps, ProcMaps};
use mltrace_log::labels::{self, DiskIds, Outcome};
use mltrace_log::names;
use mltrace_log::*;
use mltrace_model::maps::{MapClass, Maps};
use mltrace_model::procs::is_data_path;

const NAME_MAX: usize = 40;
/// Processes let go ([`Stats::untraced`]) listed.
const MAX_UNTRACED: usize = 256;

/// Count, bytes and latency of one kind of operation.
#[derive(Clone, Default)]
pub struct OpStats {
    pub count: u64,
    pub bytes: u64,
    pub errors: u64,
    pub latency: Histogram,
}

impl OpStats {
    /// The calls of an [`IoSummary`].
    fn add_summary(&mut self, r: &IoSummary) {
        self.count += r.calls;
        self.bytes += r.bytes;
        self.errors += r.failed;
        for (slot, n) in r.hist().into_iter().enumerate() {
            self.latency.add_n(summary::slot_value(slot), u64::from(n));
        }
    }

    fn add(&mut self, ret: i64, dur: u64) {
        self.count += 1;
        match labels::outcome(ret) {
            Outcome::Ok(n) => self.bytes += n,
            Outcome::Err(_) => self.errors += 1,
            // Imported calls whose result was never printed: neither.
            Outcome::Unknown => {}
        }
        self.latency.add(dur);
    }
}

/// Block requests: how many, how much, how long (queue + device).
#[derive(Clone, Default)]
pub struct BlockStats {
    pub requests: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub other: u64,
    pub errors: u64,
    pub latency: Histogram,
    pub device: Histogram,
}

impl BlockStats {
    fn add(&mut self, b: &Block) {
        self.requests += 1;
        match b.op {
            BlockOp::Read => self.read_bytes += b.bytes,
            BlockOp::Write => self.write_bytes += b.bytes,
            _ => self.other += 1,
        }
        if b.error != 0 {
            self.errors += 1;
        }
        self.latency.add(b.queue + b.device);
        self.device.add(b.device);
    }
}

#[derive(Clone, Default)]
pub struct DiskStats {
    pub dev: u32,
    pub name: String,
    pub block: BlockStats,
}

#[derive(Clone, Default)]
pub struct ProcStats {
    pub pid: u32,
    /// When it last exec'd: summed calls that ended before are the old
    /// program's (not in the kernel's counts since the exec).
    pub exec_ts: Option<u64>,
    /// Ns its threads spent in CUDA calls that waited for the GPU, and in
    /// calls on its files (reads, writes, fsyncs, opens and closes of
    /// regular files and block devices).
    pub gpu_wait_ns: u64,
    pub own_io_ns: u64,
    pub parent: u32,
    pub name: String,
    pub threads: u64,
    pub exit_status: Option<i32>,
    /// When it was forked and when it exited, where seen.
    pub started: Option<u64>,
    pub ended: Option<u64>,
    pub reads: OpStats,
    pub writes: OpStats,
    pub opens: OpStats,
    pub closes: u64,
    /// Block requests this process started.
    pub block: BlockStats,
    /// The kernel's own counts of its I/O (logs recorded with them).
    pub kernel: Option<KernelIo>,
    /// The traced calls over the span `kernel` covers, as the kernel counts.
    pub traced_io: TracedIo,
    /// Bytes it brought into the page cache, by what it was doing.
    pub cache: CacheFill,
    /// io_uring requests it submitted and its libaio calls (not in
    /// `reads`/`writes`: the kernel does not count them as calls).
    pub uring: UringStats,
    pub aio: AioStats,
    /// Bytes it sent and received on sockets.
    pub sockets: peers::SocketBytes,
    /// Its mmaps, munmaps, mremaps and major faults.
    pub maps: ProcMaps,
    files: HashSet<u64>,
    /// Its launcher variables at its last exec ([`mltrace_log::env`]).
    pub env: Vec<(&'static str, String)>,
    /// Named by a command line (exec, or inherited): a comm does not rename it.
    has_cmdline: bool,
    /// Time in read-family calls on files (durations summed over threads).
    pub read_ns: u64,
    /// Time in opens (failed ones too) and closes of data files
    /// ([`is_data_path`]), and the opens: what a loader spends on metadata.
    pub meta_ns: u64,
    pub data_opens: u64,
    /// Latency of the read calls on data files ([`mltrace_model::procs::is_data_path`])
    /// by the threads that can be loaders: every thread of a forked
    /// process that runs its parent's program (a worker), the threads
    /// other than the main one otherwise (loader threads). Not their waits
    /// on a pipe for requests; `None` until one.
    pub loader_read_latency: Option<Histogram>,
    /// Forked and never exec'd another program (or exec'd Python's
    /// multiprocessing spawn): a data loader when its parent is the trainer.
    pub loader: bool,
    /// What the trace calls it (`DataLoader worker 2 (epoch 3)`), from the
    /// model's reading of the same records; `None` before the log is read.
    pub trace_name: Option<String>,
    /// Its threads as the trace names them (tid, name), the main one
    /// first; its loader threads (tids). Both known once the log is read.
    pub thread_names: Vec<(u32, String)>,
    pub loader_threads: Vec<u32>,
    /// Its threads that move collective traffic (gloo's, NCCL's).
    pub collective_threads: Vec<u32>,
    /// What its loader threads are called (`tf.data thread`, `loader thread`).
    pub loader_word: &'static str,
}

/// What one thread read from files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadRead {
    /// Time in read-family calls on files.
    pub read_ns: u64,
    /// Bytes those calls brought into the page cache.
    pub from_storage: u64,
    /// Time in opens and closes of data files, and the opens (see
    /// [`ProcStats::meta_ns`]).
    pub meta_ns: u64,
    pub opens: u64,
}

/// [`ThreadRead`] by tid.
#[derive(Default)]
pub struct ThreadReads(HashMap<u32, ThreadRead>);

/// Threads whose reads are kept one by one.
const MAX_THREAD_READS: usize = 1 << 16;

impl ThreadReads {
    fn add(&mut self, tid: u32, f: impl FnOnce(&mut ThreadRead)) {
        if self.0.len() < MAX_THREAD_READS || self.0.contains_key(&tid) {
            f(self.0.entry(tid).or_default());
        }
    }

    pub fn get(&self, tid: u32) -> ThreadRead {
        self.0.get(&tid).copied().unwrap_or_default()
    }
}

impl ProcStats {
    /// Its name in tables: the trace's, so `stats` and the trace agree.
    pub fn label(&self) -> &str {
        self.trace_name.as_deref().unwrap_or(&self.name)
    }

    /// Distinct files (regular files, directories, devices) opened, read,
    /// written or mapped for data.
    pub fn files_touched(&self) -> usize {
        self.files.len()
    }

    /// Bytes read by any route: calls, io_uring requests, libaio events.
    pub fn total_read_bytes(&self) -> u64 {
        self.reads.bytes + self.uring.reads.bytes + self.aio.read_bytes
    }

    pub fn total_write_bytes(&self) -> u64 {
        self.writes.bytes + self.uring.writes.bytes + self.aio.write_bytes
    }
}

#[derive(Clone, Default, Debug, PartialEq, Eq)]
pub struct FileStats {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub reads: u64,
    pub writes: u64,
    pub opens: u64,
    /// Bytes traced processes brought into the page cache for it.
    pub cache: CacheFill,
    /// io_uring read and write requests on it (apart from the calls).
    pub uring_reads: u64,
    pub uring_read_bytes: u64,
    pub uring_writes: u64,
    pub uring_write_bytes: u64,
    /// Its mappings for data, and faults on them.
    pub maps: FileMaps,
    /// Time in its read and write calls (summed; for the mean latency).
    pub read_ns: u64,
    pub write_ns: u64,
}

impl FileStats {
    /// Bytes read by calls and io_uring requests.
    pub fn total_read_bytes(&self) -> u64 {
        self.read_bytes + self.uring_read_bytes
    }

    pub fn total_write_bytes(&self) -> u64 {
        self.write_bytes + self.uring_write_bytes
    }
}

/// Bytes brought into the page cache (filemap:mm_filemap_add_to_page_cache),
/// by what the thread was doing.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct CacheFill {
    /// Inside read-family calls: the read and its readahead.
    pub during_reads: u64,
    /// Outside recorded calls: faults on file mappings, readahead(2), exec.
    pub faults: u64,
    /// Inside other recorded calls (open, close, fsync).
    pub other: u64,
    /// Inside write-family calls: pages the writes filled, not reads.
    pub writes: u64,
    /// Inside sendfile/copy_file_range (source or destination: not told apart).
    pub transfers: u64,
}

impl CacheFill {
    fn add(&mut self, during: CacheDuring, bytes: u64) {
        *match during {
            CacheDuring::Read => &mut self.during_reads,
            CacheDuring::Fault => &mut self.faults,
            CacheDuring::Other => &mut self.other,
            CacheDuring::Write => &mut self.writes,
            CacheDuring::Transfer => &mut self.transfers,
        } += bytes;
    }

    /// Bytes read from storage: everything not filled by a write or a transfer.
    pub fn storage_read_bytes(&self) -> u64 {
        self.during_reads + self.faults + self.other
    }

    /// The share of `read_bytes` (returned by read calls) that came from
    /// the cache: 1 - (brought in during reads) / read. None when nothing
    /// was read; readahead beyond what the calls returned counts as a miss.
    pub fn hit_ratio(&self, read_bytes: u64) -> Option<f64> {
        (read_bytes > 0).then(|| (1.0 - self.during_reads as f64 / read_bytes as f64).clamp(0.0, 1.0))
    }
}

/// How a file known only by its filesystem and inode is shown.
pub fn dev_inode(dev: u32, ino: u64) -> String {
    format!("[dev {}:{} inode {ino}]", dev >> 20, dev & 0xfffff)
}

/// (group, name, unit) of a counter.
pub type CounterKey = (String, String, CounterUnit);
/// (sum, samples, max) of a counter's values.
pub type Summary = (f64, u64, f64);

#[derive(Default)]
pub struct Stats {
    pub header: Header,
    /// Found while reading ([`Stats::checkpoints`] once read).
    checkpoint_detector: mltrace_model::checkpoints::Detector,
    /// By start, once the log is read.
    pub checkpoints: Vec<mltrace_model::checkpoints::Checkpoint>,
    /// NCCL calls per process and operation.
    pub collectives: collectives::Collectives,
    /// By pid: the streams its NCCL collectives were enqueued on since the
    /// last sync call that waited for them.
    nccl_outstanding: HashMap<u32, Vec<u64>>,
    /// Each rank's arrivals at the collectives: NCCL calls' enqueue times.
    pub arrivals: collectives::Arrivals,
    /// Step marks by pid (`mltrace.mark("step")`, a `STEP` phase).
    pub step_marks: HashMap<u32, Vec<u64>>,
    /// Processes the recorder let go as they became another user or group
    /// (not root): (pid, when, what it said).
    pub untraced: Vec<(u32, u64, String)>,
    /// CUDA driver calls per process and call.
    pub gpu_calls: gpu_calls::GpuCalls,
    pub trailer: Option<Trailer>,
    /// The log's format version (major, minor).
    pub format: (u16, u16),
    pub records: u64,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    /// Processes in order of appearance (a reused pid gets a new entry).
    pub processes: Vec<ProcStats>,
    current: HashMap<u32, usize>,
    /// Processes that exited, until their pid is reused: late records (a
    /// block request completing, another thread's final counts) still
    /// belong to them.
    exited: HashSet<u32>,
    /// The model's reading of the processes (incarnations, roles, names),
    /// fed the same records: see [`Stats::name_as_the_trace`].
    tracker: mltrace_model::procs::ProcTracker,
    roles: mltrace_model::procs::Procs,
    /// A summary's loader threads (pid, tid), known before its records
    /// are read: their sums come a second or two after their wake-ups.
    summed_loaders: HashSet<(u32, u32)>,
    pub files: HashMap<String, FileStats>,
    pub lost: Vec<(LostKind, u64)>,
    pub disks: Vec<DiskStats>,
    disk_ids: DiskIds,
    /// Machine-wide counters worth summarising.
    pub utilisation: Vec<(CounterKey, Summary)>,
    /// Each network interface's and RDMA port's traffic, from its counters.
    pub network: Vec<network::NetStats>,
    /// Traffic per peer, from the send/recv calls.
    pub peers: peers::Peers,
    /// GPU events (throttling, XID, ECC) by GPU and kind: how many.
    pub gpu_events: Vec<(String, GpuEventKind, u64)>,
    /// Block requests started outside traced processes, by task name.
    pub block_others: Vec<(String, BlockStats)>,
    /// Problems the reader worked around, described.
    pub diagnostics: Vec<String>,
    /// Where the traced threads' time went (scheduling records).
    pub sched: sched::SchedTimes,
    /// Every live process's mappings (the model's, as the trace draws them).
    maps: Maps,
    /// Bytes the trainer's workers read by calls and io_uring requests,
    /// by file (a worker as it was when it read: see [`Stats::is_worker_now`]).
    pub worker_files: HashMap<String, u64>,
    /// The trainer: the command's process, unless its workers have read
    /// nothing and another process's workers read first (a wrapper, `sh
    /// train.sh` or `torchrun`, runs the real trainer below it).
    pub trainer: u32,
    /// Whether the trainer's workers have read yet (then it stays).
    trainer_fed: bool,
    /// The processes whose data-loader workers or loader threads read
    /// files (the trainer, or each rank under torchrun).
    pub fed: HashSet<u32>,
    /// What each thread read from files.
    pub thread_reads: ThreadReads,
    /// Epoch phases: (start, end, name), in the order they ended.
    pub epochs: Vec<(u64, u64, String)>,
    /// Per operation over all processes: sizes asked for and latency.
    pub calls: Calls,
}

/// The counters `stats` summarises: the ones that answer "was the GPU
/// busy, was the CPU waiting on I/O".
fn summarised(group: &str, name: &str) -> bool {
    match group {
        "CPU" => matches!(name, "usr" | "sys" | "iowait" | "idle"),
        "Memory" => matches!(name, "used" | "dirty" | "io pressure"),
        // How busy each disk was, and how much it read: is it at its limit?
        g if g.starts_with("Disk ") => matches!(name, "utilisation" | "read"),
        g if g.starts_with("GPU ") => {
            is_gpu_utilisation(name)
                || matches!(
                    name,
                    "SM active" | "tensor active" | "DRAM bandwidth used" | "memory" | "framebuffer used" | "power"
                )
        }
        _ => false,
    }
}

/// NVML's device utilisation, by its name or the one older logs use.
fn is_gpu_utilisation(name: &str) -> bool {
    name == mltrace_log::GPU_UTILISATION || name == mltrace_log::GPU_UTILISATION_OLD
}

fn value(v: f64, unit: CounterUnit) -> String {
    match unit {
        CounterUnit::Bytes => bytes(v as u64),
        CounterUnit::Percent => format!("{v:.1}%"),
        u => format!("{v:.1} {}", u.name()),
    }
}

fn hash_path(p: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    p.hash(&mut h);
    h.finish()
}

fn is_file(k: FileKind) -> bool {
    matches!(k, FileKind::Regular | FileKind::Directory | FileKind::BlockDev | FileKind::Symlink)
}

impl Stats {
    pub fn new(header: Header) -> Self {
        let mut s = Stats { header, ..Default::default() };
        s.format = (mltrace_log::frame::FORMAT_MAJOR, mltrace_log::frame::FORMAT_MINOR);
        s.trainer = s.header.root_pid;
        s.sched.trainer = s.trainer;
        s
    }

    /// The process `pid` is a data-loader worker of, as far as the log has
    /// said so far (forked by it, no other program exec'd), if any.
    fn loader_parent(&self, pid: u32) -> Option<u32> {
        let p = &self.processes[*self.current.get(&pid)?];
        // The command itself is nobody's worker, even between its fork
        // by the recorder and its exec.
        (p.loader && p.parent != 0 && p.parent != pid && pid != self.header.root_pid).then_some(p.parent)
    }

    fn proc(&mut self, pid: u32) -> &mut ProcStats {
        let i = match self.current.get(&pid) {
            Some(&i) => i,
            None => {
                self.processes.push(ProcStats { pid, name: labels::pid_name(pid), ..Default::default() });
                self.current.insert(pid, self.processes.len() - 1);
                self.processes.len() - 1
            }
        };
        &mut self.processes[i]
    }

    /// Whether `pid` is, as far as the log has said so far, a data-loader
    /// worker of the trainer (forked by it, no other program exec'd).
    pub fn is_worker_now(&self, pid: u32) -> bool {
        self.trainer != 0 && self.loader_parent(pid) == Some(self.trainer)
    }

    /// Whether thread `tid` of `pid` is one of its loader threads, as far
    /// as the log has said so far (the model's reading).
    fn is_loader_thread(&self, pid: u32, tid: u32) -> bool {
        if self.summed_loaders.contains(&(pid, tid)) {
            return true;
        }
        let Some(i) = self.tracker.known(pid) else { return false };
        self.roles.list.get(i as usize).is_some_and(|p| p.is_loader_thread(tid))
    }

    /// What thread `tid` of `pid` is to the threads of its process it
    /// wakes, as far as the log has said so far (the model's reading, one
    /// look-up a wake-up): a collective library's, a loader, or neither.
    fn thread_feeder(&self, pid: u32, tid: u32) -> sched::Feeder {
        if self.summed_loaders.contains(&(pid, tid)) {
            return sched::Feeder::Thread;
        }
        let Some(p) = self.tracker.known(pid).and_then(|i| self.roles.list.get(i as usize)) else {
            return sched::Feeder::No;
        };
        if p.is_collective_thread(tid) {
            sched::Feeder::Collective
        } else if p.is_loader_thread(tid) {
            sched::Feeder::Thread
        } else {
            sched::Feeder::No
        }
    }

    /// A step began in `pid` (0: the job's, not a process's).
    fn step_mark(&mut self, pid: u32, ts: u64) {
        let marks = self.step_marks.entry(pid).or_default();
        if marks.len() < collectives::MAX_ARRIVALS {
            marks.push(ts);
        }
    }

    /// Counts `n` bytes read from `path` by a worker or a loader thread,
    /// in a call that ended at `end`.
    fn worker_read(&mut self, pid: u32, tid: u32, path: &[u8], kind: FileKind, n: i64, end: u64) {
        if n <= 0 || !matches!(kind, FileKind::Regular | FileKind::BlockDev) {
            return;
        }
        let parent = match self.loader_parent(pid) {
            Some(parent) => parent,
            None if tid != pid && self.is_loader_thread(pid, tid) => pid,
            None => return,
        };
        self.fed.insert(parent);
        if !self.trainer_fed {
            // The first process whose workers read is the trainer, the
            // command's own if they are its.
            if parent != self.trainer {
                self.trainer = parent;
                self.sched.trainer = parent;
                // Its main thread's times over the run start here.
                if let Some(t) = self.sched.timeline.as_mut() {
                    t.clear();
                }
            }
            self.trainer_fed = true;
        }
        // A worker of the trainer (see `is_worker_now`).
        if self.trainer != 0 && parent == self.trainer {
            if let Some(t) = self.sched.timeline.as_mut() {
                t.add_at(timeline::Field::ReadBytes, end, n as f64);
            }
            let key = String::from_utf8_lossy(path);
            match self.worker_files.get_mut(key.as_ref()) {
                Some(b) => *b += n as u64,
                None => {
                    self.worker_files.insert(key.into_owned(), n as u64);
                }
            }
        }
    }

    /// Calls summed in the kernel (`record --detail summary`): counted as
    /// the calls they sum are in full; only their times are not known (a
    /// thread's own I/O counts the slow calls, recorded on their own).
    fn io_summary(&mut self, f: &Frame<'_>, r: &IoSummary) {
        let Some(op) = r.op.io() else {
            self.calls.add_summary(r.op.name(), r, false);
            self.proc(r.pid).closes += r.calls;
            if is_file(r.kind) && is_data_path(f.str(r.path)) {
                self.meta(r.pid, r.tid, r.time, 0);
            }
            return;
        };
        let path = f.str(r.path);
        if !op.is_write() {
            self.worker_read(r.pid, r.tid, path, r.kind, r.bytes as i64, r.ts.saturating_add(r.dur));
        }
        let data = !matches!(op, IoOp::Fsync | IoOp::Fdatasync | IoOp::SyncFileRange);
        self.calls.add_summary(op.name(), r, data);
        let p = self.proc(r.pid);
        if p.exec_ts.is_none_or(|t| r.ts.saturating_add(r.dur) > t) {
            p.traced_io.summary(op, r.calls, r.failed, r.bytes);
        }
        p.sockets.summary(r.kind, op.is_write(), r.bytes);
        if op.is_write() {
            p.writes.add_summary(r);
        } else {
            p.reads.add_summary(r);
            if matches!(r.kind, FileKind::Regular | FileKind::BlockDev) {
                p.read_ns += r.time;
                if (p.loader || r.tid != r.pid) && is_data_path(path) {
                    let h = p.loader_read_latency.get_or_insert_with(Histogram::default);
                    for (slot, n) in r.hist().into_iter().enumerate() {
                        h.add_n(summary::slot_value(slot), u64::from(n));
                    }
                }
                self.thread_reads.add(r.tid, |t| t.read_ns += r.time);
            }
        }
        if let Some(fs) = self.file(r.pid, path, r.kind) {
            if op.is_write() {
                fs.writes += r.calls;
                fs.write_bytes += r.bytes;
                fs.write_ns += r.time;
            } else {
                fs.reads += r.calls;
                fs.read_bytes += r.bytes;
                fs.read_ns += r.time;
            }
        }
    }

    /// `ns` in an open or close of a data file by thread `tid` of `pid`
    /// (`opens`: 1 for an open).
    fn meta(&mut self, pid: u32, tid: u32, ns: u64, opens: u64) {
        let p = self.proc(pid);
        p.meta_ns += ns;
        p.data_opens += opens;
        self.thread_reads.add(tid, |t| {
            t.meta_ns += ns;
            t.opens += opens;
        });
    }

    /// A CUDA call that waited for the GPU: for the other ranks, when an
    /// NCCL collective it covers was outstanding (a sync call covers the
    /// stream it names, or every stream when it names none or is not a
    /// stream sync: the context, an event, a blocking copy).
    fn gpu_call(&mut self, r: &GpuCall) {
        self.proc(r.pid).gpu_wait_ns += r.dur;
        self.gpu_calls.call(r);
        let mut kind = sched::CallKind::Gpu;
        if let Some(streams) = self.nccl_outstanding.get_mut(&r.pid) {
            let before = streams.len();
            if r.call == GpuApi::StreamSynchronize && r.stream != 0 {
                streams.retain(|&s| s != r.stream);
            } else {
                streams.clear();
            }
            if streams.len() < before {
                kind = sched::CallKind::Collective;
            }
        }
        if kind == sched::CallKind::Collective {
            self.sched.episode(r.pid, r.ts, r.ts.saturating_add(r.dur));
        }
        self.sched.call(r.pid, r.tid, r.ts, r.ts.saturating_add(r.dur), kind);
    }

    /// An NCCL call: a rank arriving at a collective.
    fn nccl_call(&mut self, r: &Collective) {
        self.collectives.add(r);
        if r.op.is_group() {
            return;
        }
        self.arrivals.arrive(r.pid, r.ts);
        let streams = self.nccl_outstanding.entry(r.pid).or_default();
        if !streams.contains(&r.stream) && streams.len() < 64 {
            streams.push(r.stream);
        }
    }

    /// A call of `pid`'s thread `tid` on a file of `kind`: its own I/O when
    /// the file is one (a pipe or socket is how data comes, not I/O).
    fn own_io(&mut self, pid: u32, tid: u32, ts: u64, dur: u64, kind: FileKind) {
        if matches!(kind, FileKind::Regular | FileKind::BlockDev) {
            self.proc(pid).own_io_ns += dur;
            self.sched.call(pid, tid, ts, ts.saturating_add(dur), sched::CallKind::OwnIo);
        }
    }

    fn file(&mut self, pid: u32, path: &[u8], kind: FileKind) -> Option<&mut FileStats> {
        if !is_file(kind) || path.is_empty() {
            return None;
        }
        self.proc(pid).files.insert(hash_path(path));
        let key = String::from_utf8_lossy(path);
        if !self.files.contains_key(key.as_ref()) {
            self.files.insert(key.clone().into_owned(), FileStats::default());
        }
        self.files.get_mut(key.as_ref())
    }

    pub fn add(&mut self, f: &Frame<'_>, rec: &Record) {
        self.records += 1;
        if let Some(i) = self.tracker.observe(rec) {
            self.roles.note(f, rec, i, &self.tracker);
        }
        let mapped = self.maps.apply(f, rec);
        let ts = rec.ts();
        self.first_ts = Some(self.first_ts.map_or(ts, |t| t.min(ts)));
        self.last_ts = Some(self.last_ts.map_or(rec.end_ts(), |t| t.max(rec.end_ts())));
        match *rec {
            Record::Fork(r) => {
                if r.thread {
                    self.proc(r.pid).threads += 1;
                } else {
                    let parent = self.current.get(&r.parent_pid).map(|&i| &self.processes[i]);
                    let parent = parent.map(|p| (p.name.clone(), p.has_cmdline));
                    // A shell's fork is a subshell, not a data loader.
                    let by_shell = parent.as_ref().is_some_and(|p| names::is_shell(&p.0));
                    let root = r.pid == self.header.root_pid;
                    let cmd = names::command_name(&self.header.command, NAME_MAX);
                    let has_cmd = !self.header.command.is_empty();
                    // A new process unless its records came before its fork
                    // (one process, one row).
                    if self.exited.remove(&r.pid) {
                        self.current.remove(&r.pid);
                    }
                    let p = self.proc(r.pid);
                    p.parent = r.parent_pid;
                    p.started = Some(r.ts);
                    p.loader = !by_shell;
                    p.maps.inherited_bytes = mapped.inherited;
                    if let Some((n, has_cmdline)) = parent {
                        p.name = n;
                        p.has_cmdline = has_cmdline;
                    } else if root {
                        p.name = cmd;
                        p.has_cmdline = has_cmd;
                    }
                }
            }
            Record::Exec(r) => {
                let name = names::command_line(f.str(r.argv), NAME_MAX);
                let argv = f.str_lossy(r.argv);
                let spawn = argv.contains("multiprocessing.spawn") || argv.contains("spawn_main");
                self.sched.exec(r.pid, r.ts);
                let p = self.proc(r.pid);
                p.loader &= spawn;
                p.name = name;
                p.has_cmdline = true;
                p.exec_ts = Some(r.ts);
                // Its time in calls is the new program's from here (as its states are).
                (p.gpu_wait_ns, p.own_io_ns) = (0, 0);
                p.env.clear();
            }
            Record::Env(r) => {
                let name = f.str_lossy(r.name);
                if let Some(&n) = env::NAMES.iter().find(|n| **n == name) {
                    let v = f.str_lossy(r.value).into_owned();
                    self.proc(r.pid).env.push((n, v));
                }
            }
            Record::Exit(r) => {
                self.sched.add(rec, sched::Feeder::No);
                if r.process_exit {
                    let p = self.proc(r.pid);
                    p.exit_status = Some(r.status);
                    p.ended = Some(r.ts);
                    if let Some(k) = p.kernel.as_mut() {
                        k.exited = true;
                    }
                    // Late records (a block request completing, a last
                    // sample) still belong to it, until the pid is forked anew.
                    self.exited.insert(r.pid);
                }
            }
            Record::IoAccounting(a) => {
                let p = self.proc(a.pid);
                if p.kernel.get_or_insert_with(KernelIo::default).take(&a) {
                    p.traced_io = TracedIo::default();
                }
            }
            Record::Comm(r) => {
                // Named by its comm when nothing better names it: a process
                // started before the recording, or an imported one.
                if r.tid == r.pid {
                    let p = self.proc(r.pid);
                    if !p.has_cmdline {
                        p.name = f.str_lossy(r.comm).into_owned();
                    }
                }
            }
            // Counted in its summary: only its thread's time is its own.
            Record::Io(r) if r.summed => self.own_io(r.pid, r.tid, r.ts, r.dur, r.kind),
            Record::Close(r) if r.summed => self.own_io(r.pid, r.tid, r.ts, r.dur, r.kind),
            Record::IoSummary(r) => self.io_summary(f, &r),
            Record::Io(r) => {
                self.own_io(r.pid, r.tid, r.ts, r.dur, r.kind);
                if !r.op.is_write() {
                    self.worker_read(r.pid, r.tid, f.str(r.path), r.kind, r.ret, r.ts.saturating_add(r.dur));
                }
                let data = !matches!(r.op, IoOp::Fsync | IoOp::Fdatasync | IoOp::SyncFileRange);
                self.calls.add("", r.op.name(), data.then_some(r.requested), r.dur);
                let p = self.proc(r.pid);
                p.traced_io.io(r.op, r.ret);
                p.sockets.io(&r);
                if r.op.is_write() {
                    p.writes.add(r.ret, r.dur)
                } else {
                    p.reads.add(r.ret, r.dur);
                    // Data reads, not waits on a pipe or socket.
                    if matches!(r.kind, FileKind::Regular | FileKind::BlockDev) {
                        p.read_ns += r.dur;
                        if (p.loader || r.tid != r.pid) && is_data_path(f.str(r.path)) {
                            p.loader_read_latency.get_or_insert_with(Histogram::default).add(r.dur);
                        }
                        self.thread_reads.add(r.tid, |t| t.read_ns += r.dur);
                    }
                }
                if let Some(fs) = self.file(r.pid, f.str(r.path), r.kind) {
                    let moved = r.ret.max(0) as u64;
                    if r.op.is_write() {
                        fs.writes += 1;
                        fs.write_bytes += moved;
                        fs.write_ns += r.dur;
                    } else {
                        fs.reads += 1;
                        fs.read_bytes += moved;
                        fs.read_ns += r.dur;
                    }
                }
            }
            Record::GpuCall(r) => self.gpu_call(&r),
            Record::Collective(r) => self.nccl_call(&r),
            Record::GpuCount(r) => self.gpu_calls.count(&r),
            Record::NetCall(r) => {
                self.calls.add("", r.op.name(), Some(r.requested), r.dur);
                self.proc(r.pid).sockets.net(&r);
                self.peers.add(&f.str_lossy(r.peer), &r);
            }
            Record::Transfer(r) => {
                self.own_io(r.pid, r.tid, r.ts, r.dur, FileKind::Regular);
                self.calls.add("", r.op.name(), Some(r.requested), r.dur);
                let p = self.proc(r.pid);
                p.traced_io.transfer(r.ret);
                p.reads.add(r.ret, r.dur);
                p.writes.add(r.ret, 0);
                let moved = r.ret.max(0) as u64;
                if let Some(fs) = self.file(r.pid, f.str(r.in_path), FileKind::Regular) {
                    fs.reads += 1;
                    fs.read_bytes += moved;
                }
                if let Some(fs) = self.file(r.pid, f.str(r.out_path), FileKind::Regular) {
                    fs.writes += 1;
                    fs.write_bytes += moved;
                }
            }
            Record::Open(r) => {
                self.own_io(r.pid, r.tid, r.ts, r.dur, r.kind);
                self.calls.add("", r.op.name(), None, r.dur);
                // A failed open (a loader looking for its sample) is
                // metadata time too; a pipe's or a socket's is not.
                if (r.ret < 0 || is_file(r.kind)) && is_data_path(f.str(r.abs_path)) {
                    self.meta(r.pid, r.tid, r.dur, 1);
                }
                self.proc(r.pid).opens.add(if r.ret < 0 { r.ret } else { 0 }, r.dur);
                // A result an import did not have still counts for the file
                // when the importer saw it found (`file` skips kind Unknown).
                if r.ret >= 0 || r.ret == RET_UNKNOWN {
                    if let Some(fs) = self.file(r.pid, f.str(r.abs_path), r.kind) {
                        fs.opens += 1;
                    }
                }
            }
            Record::IoUring(r) => {
                if r.op.is_read() {
                    self.worker_read(r.pid, r.tid, f.str(r.path), r.kind, r.ret, r.ts.saturating_add(r.dur));
                }
                self.calls.add("io_uring", r.op.name(), Some(r.requested), r.dur);
                self.proc(r.pid).uring.add(&r);
                if let Some(fs) = self.file(r.pid, f.str(r.path), r.kind) {
                    let moved = r.ret.max(0) as u64;
                    if r.op.is_write() {
                        fs.uring_writes += 1;
                        fs.uring_write_bytes += moved;
                    } else {
                        fs.uring_reads += 1;
                        fs.uring_read_bytes += moved;
                    }
                }
            }
            Record::Aio(r) => {
                self.proc(r.pid).aio.add(&r);
                // Only the first iocb's file is known: it counts as touched.
                self.file(r.pid, f.str(r.path), r.kind);
            }
            Record::Close(r) => {
                self.own_io(r.pid, r.tid, r.ts, r.dur, r.kind);
                self.proc(r.pid).closes += 1;
                if is_file(r.kind) && is_data_path(f.str(r.path)) {
                    self.meta(r.pid, r.tid, r.dur, 0);
                }
            }
            Record::Lost(r) => match self.lost.iter_mut().find(|(k, _)| *k == r.kind) {
                Some((_, n)) => *n += r.count,
                None => self.lost.push((r.kind, r.count)),
            },
            // A value that is not a number (an older recorder kept GPM's
            // NaN) says nothing: left out of every figure.
            Record::Counter(c) if !c.value.is_finite() => {}
            Record::Counter(c) => {
                let (group, name) = (f.str_lossy(c.group), f.str_lossy(c.name));
                let machine = local_pid(c.pid) == 0;
                if c.pid == 0 && group.starts_with("GPU ") && is_gpu_utilisation(&name) {
                    self.sched.gpu_sample(&group, c.ts, c.value);
                }
                if machine {
                    network::add(&mut self.network, host_of(c.pid), &group, &name, c.ts, c.value);
                }
                if machine && summarised(&group, &name) {
                    // A merged log's hosts each have their CPU, memory, GPUs.
                    let group = self.on_host(host_of(c.pid), group).into_owned();
                    let key = (group, name.into_owned(), c.unit);
                    match self.utilisation.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, (sum, n, max))) => {
                            *sum += c.value;
                            *n += 1;
                            *max = max.max(c.value);
                        }
                        None => self.utilisation.push((key, (c.value, 1, c.value))),
                    }
                }
            }
            Record::Phase(p) if p.kind == PhaseKind::Epoch => {
                let name = labels::phase(&f.str_lossy(p.name), p.flags);
                self.epochs.push((p.ts, p.ts.saturating_add(p.dur), name));
            }
            Record::Phase(p) if p.kind == PhaseKind::Other && f.str(p.name).eq_ignore_ascii_case(b"step") => {
                self.step_mark(p.pid, p.ts)
            }
            Record::Mark(m) if f.str(m.name).eq_ignore_ascii_case(b"step") => self.step_mark(m.pid, m.ts),
            Record::Mark(m) if f.str(m.name) == labels::UNTRACED_MARK.as_bytes() => {
                // A JSON string: the sentence the recorder wrote.
                let text = serde_json::from_slice::<String>(f.str(m.value))
                    .unwrap_or_else(|_| f.str_lossy(m.value).into_owned());
                if self.untraced.len() < MAX_UNTRACED {
                    self.untraced.push((m.pid, m.ts, text));
                }
            }
            Record::Phase(_) | Record::Mark(_) => {}
            Record::GpuEvent(e) => {
                let gpu = self.on_host(host_of(e.pid), f.str_lossy(e.group));
                match self.gpu_events.iter_mut().find(|(g, k, _)| *g == gpu && *k == e.kind) {
                    Some((_, _, n)) => *n += 1,
                    None => self.gpu_events.push((gpu.into_owned(), e.kind, 1)),
                }
            }
            Record::SchedSwitch(r) => {
                // A traced process has its row even if it only ran.
                for (bit, pid) in [(mltrace_log::sched::PREV, r.prev_pid), (mltrace_log::sched::NEXT, r.next_pid)] {
                    if r.traced & bit != 0 {
                        self.proc(pid);
                    }
                }
                self.sched.add(rec, sched::Feeder::No);
            }
            Record::SchedWake(r) => {
                self.proc(r.pid);
                // By one of the woken process's own workers (each rank's
                // under torchrun, the trainer's among them) or loader threads.
                let feeder = if self.loader_parent(r.waker_pid) == Some(r.pid) {
                    sched::Feeder::Worker
                } else if r.waker_pid == r.pid && r.waker_tid != r.tid {
                    self.thread_feeder(r.pid, r.waker_tid)
                } else {
                    sched::Feeder::No
                };
                self.sched.add(rec, feeder);
            }
            Record::PageCache(c) => {
                // A fault on a file it has mapped: read through the mapping.
                let through = c.during == CacheDuring::Fault && self.maps.maps_file(c.pid, c.dev, c.ino);
                if c.during == CacheDuring::Read {
                    self.thread_reads.add(c.tid, |t| t.from_storage += c.bytes);
                    // Brought in by a read of one of the trainer's loaders.
                    let loader = self.trainer != 0
                        && (self.loader_parent(c.pid) == Some(self.trainer)
                            || (c.pid == self.trainer && c.tid != c.pid && self.is_loader_thread(c.pid, c.tid)));
                    if let (true, Some(t)) = (loader, self.sched.timeline.as_mut()) {
                        t.add_at(timeline::Field::StorageBytes, c.ts, c.bytes as f64);
                    }
                }
                let p = self.proc(c.pid);
                p.cache.add(c.during, c.bytes);
                if through {
                    p.maps.storage_read_bytes += c.bytes;
                }
                let path = f.str(c.path);
                let key =
                    if path.is_empty() { dev_inode(c.dev, c.ino) } else { String::from_utf8_lossy(path).into_owned() };
                let fs = self.files.entry(key).or_default();
                fs.cache.add(c.during, c.bytes);
                if through {
                    fs.maps.storage_read_bytes += c.bytes;
                }
            }
            Record::Mapping(m) => {
                self.proc(m.pid).maps.add(&m, &mapped);
                if let (Some(MapClass::Data), Some(file), true) = (mapped.class, &mapped.file, m.ret >= 0) {
                    let bytes = match m.op {
                        MapOp::Mmap => m.len,
                        _ => mapped.grown,
                    };
                    if let Some(fs) = self.file(m.pid, &file.path, FileKind::Regular) {
                        fs.maps.mmaps += u64::from(m.op == MapOp::Mmap);
                        fs.maps.mapped_bytes += bytes;
                    }
                }
            }
            Record::MajorFault(r) => {
                let path = self.maps.find(r.pid, r.addr).map(|region| region.file.clone());
                let p = self.proc(r.pid);
                match path {
                    Some(file) => {
                        p.maps.major_faults += 1;
                        if let Some(fs) = self.file(r.pid, &file.path, FileKind::Regular) {
                            fs.maps.major_faults += 1;
                        }
                    }
                    None => p.maps.major_faults_other += 1,
                }
            }
            Record::Block(b) => {
                let host = host_of(b.pid);
                let (i, new) = self.disk_ids.id_on(host, b.dev, f.str(b.disk));
                if new {
                    let name = self.on_host(host, f.str_lossy(b.disk)).into_owned();
                    self.disks.push(DiskStats { dev: b.dev, name, ..Default::default() });
                }
                self.disks[i].block.add(&b);
                if b.flags & blk::TRACED != 0 {
                    self.proc(b.pid).block.add(&b);
                } else {
                    let who = if b.flags & blk::START_UNKNOWN != 0 {
                        "(started before the recording)".to_string()
                    } else {
                        f.str_lossy(b.comm).into_owned()
                    };
                    match self.block_others.iter_mut().find(|(n, _)| *n == who) {
                        Some((_, s)) => s.add(&b),
                        None => {
                            let mut s = BlockStats::default();
                            s.add(&b);
                            self.block_others.push((who, s));
                        }
                    }
                }
            }
        }
    }

    /// The run's span, as the report and the trace give it (the recording's
    /// start and end, not its first and last record); `None` without records.
    pub fn span(&self) -> Option<(u64, u64)> {
        let (a, b) = (self.first_ts?, self.last_ts?);
        Some(mltrace_model::survey::run_span(&self.header, self.trailer.as_ref(), a, b))
    }

    /// Reads a whole log.
    pub fn from_reader<R: Read + Seek>(reader: &mut LogReader<R>) -> Result<Stats, LogError> {
        Self::from_reader_with(reader, |_, _| {})
    }

    /// Reads a whole log, handing each record to `also` too (another
    /// aggregate gathered in the same pass).
    pub fn from_reader_with<R: Read + Seek>(
        reader: &mut LogReader<R>,
        mut also: impl FnMut(&Frame<'_>, &Record),
    ) -> Result<Stats, LogError> {
        let mut s = Stats::new(reader.header().clone());
        s.format = reader.version();
        // The trainer's main thread over time (for epochs) needs the span first.
        let span = reader.scan_span()?;
        if let (Some(a), Some(b)) = (span.first_ts, span.last_ts) {
            s.sched.timeline = Some(timeline::Timeline::new(a, b.max(a)));
            s.sched.rank_waits = Some(rank_waits::RankWaits::new(a, b.max(a)));
        }
        if s.header.is_summary() {
            s.summed_loaders = summed_loaders(reader)?;
            reader.rewind();
        }
        let mut rec = Record::Lost(Default::default());
        while let Some(mut f) = reader.next_frame()? {
            while f.next_into(&mut rec) {
                s.add(&f, &rec);
                s.checkpoint_detector.add(&f, &rec);
                also(&f, &rec);
            }
        }
        if let Some(end) = s.last_ts {
            s.sched.finish(end);
        }
        s.checkpoints = std::mem::take(&mut s.checkpoint_detector).finish();
        s.name_as_the_trace();
        let header = reader.header().clone();
        s.diagnostics = reader.take_diagnostics().iter().map(|d| d.describe(&header)).collect();
        s.trailer = reader.trailer().cloned();
        Ok(s)
    }

    /// Gives each process the name the trace gives it (the model's roles),
    /// matching its incarnation by pid and fork time.
    pub fn name_as_the_trace(&mut self) {
        let mut roles = std::mem::take(&mut self.roles);
        let epochs: Vec<(u64, u64, String)> = (self.epochs.iter().enumerate())
            .map(|(i, (a, b, name))| (*a, *b, mltrace_model::survey::epoch_label(i, name)))
            .collect();
        roles.finish(&self.header, &self.tracker, &epochs);
        let mut by_pid: HashMap<u32, Vec<&mltrace_model::procs::ProcInfo>> = HashMap::default();
        for info in roles.list.iter().filter(|i| i.seen) {
            by_pid.entry(info.pid).or_default().push(info);
        }
        for p in &mut self.processes {
            let Some(all) = by_pid.get(&p.pid) else { continue };
            let same_fork = all.iter().find(|i| i.forked && Some(i.first_ts) == p.started);
            let info = same_fork.or_else(|| all.iter().find(|i| !i.forked)).unwrap_or(&all[0]);
            p.trace_name = Some(info.name.clone());
            let tids =
                std::iter::once(p.pid).chain(info.threads.iter().map(|t| t.0)).chain(info.loaders.iter().copied());
            let mut names: Vec<(u32, String)> = Vec::new();
            for tid in tids {
                if !names.iter().any(|n| n.0 == tid) {
                    names.push((tid, info.thread_name(tid)));
                }
            }
            p.thread_names = names;
            p.loader_threads = info.loaders.clone();
            p.collective_threads = info.collective.clone();
            p.loader_word = info.loader_word();
        }
        self.roles = roles;
    }

    /// CUDA driver calls per process.
    fn render_gpu_calls(&self, o: &mut String) {
        if self.gpu_calls.0.is_empty() {
            return;
        }
        let _ = writeln!(o, "\nCUDA driver calls (queries and launches only counted):");
        let mut rows = vec![["pid", "call", "calls", "in calls"].map(String::from).to_vec()];
        for (&(pid, call), t) in &self.gpu_calls.0 {
            let ns = t.ns.map_or_else(|| "-".into(), duration);
            rows.push(vec![pid.to_string(), call.to_string(), t.calls.to_string(), ns]);
        }
        o.push_str(&table(&rows));
    }

    /// NCCL calls per rank and operation.
    fn render_collectives(&self, o: &mut String) {
        if self.collectives.0.is_empty() {
            return;
        }
        let _ = writeln!(o, "\nNCCL calls (enqueued; their wait shows in the CUDA calls that synchronise):");
        let mut rows = vec![["pid", "rank", "op", "calls", "bytes", "in calls"].map(String::from).to_vec()];
        for (&(pid, op), t) in &self.collectives.0 {
            let rank = if t.rank >= 0 { format!("{} of {}", t.rank, t.nranks) } else { "-".into() };
            rows.push(vec![pid.to_string(), rank, op.to_string(), t.calls.to_string(), bytes(t.bytes), duration(t.ns)]);
        }
        o.push_str(&table(&rows));
    }

    /// Checkpoints: big files (or directories of shards) written in one burst.
    fn render_checkpoints(&self, o: &mut String, top: usize) {
        if self.checkpoints.is_empty() {
            return;
        }
        let _ = writeln!(o, "\ncheckpoints (64 MiB or more written in one burst):");
        let t0 = self.first_ts.unwrap_or(0);
        let mut rows = vec![["start", "duration", "size", "MB/s", "pid", "path"].map(String::from).to_vec()];
        for c in self.checkpoints.iter().take(top) {
            rows.push(vec![
                format!("+{}", duration(c.start.saturating_sub(t0))),
                duration(c.end.saturating_sub(c.start)),
                bytes(c.bytes),
                format!("{:.0}", c.mb_per_s()),
                c.pid.to_string(),
                c.path.clone(),
            ]);
        }
        o.push_str(&table(&rows));
        if self.checkpoints.len() > top {
            let _ = writeln!(o, "  ({} more)", self.checkpoints.len() - top);
        }
    }

    /// Traffic per interface and RDMA port (idle ones counted, not listed).
    /// The traced processes' peers, from their send and receive calls.
    fn render_peers(&self, o: &mut String, top: usize) {
        let peers = self.peers.sorted();
        if peers.is_empty() {
            return;
        }
        let _ = writeln!(o, "\nsockets, the traced processes' peers (send and receive calls):");
        let mut rows = vec![["peer", "received", "sent", "calls"].iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        for (a, p) in peers.iter().take(top) {
            rows.push(vec![a.to_string(), bytes(p.recv_bytes), bytes(p.send_bytes), p.calls.to_string()]);
        }
        o.push_str(&table(&rows));
        if peers.len() > top {
            let _ = writeln!(o, "  ({} more)", peers.len() - top);
        }
    }

    fn render_network(&self, o: &mut String) {
        let busy: Vec<_> = self.network.iter().filter(|n| !n.idle()).collect();
        if self.network.is_empty() {
            return;
        }
        let idle = self.network.len() - busy.len();
        if busy.is_empty() {
            let _ = writeln!(o, "\nnetwork, whole machine: no traffic on the {idle} interfaces sampled");
            return;
        }
        let _ = writeln!(
            o,
            "\nnetwork, whole machine, not only the traced processes (from the sampled counters{}):",
            if idle > 0 { format!("; {idle} idle interfaces not listed") } else { String::new() }
        );
        let mut rows = vec![["interface", "received", "sent", "rx packets", "tx packets", "rx peak/s", "tx peak/s"]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()];
        for n in busy {
            let label = if n.kind() == "infiniband" { format!("{} (InfiniBand)", n.label()) } else { n.label().into() };
            let label = match self.header.hosts.get(n.host) {
                Some(h) => format!("{}:{label}", h.name),
                None => label,
            };
            rows.push(vec![
                label,
                bytes(n.totals[0] as u64),
                bytes(n.totals[1] as u64),
                format!("{:.0}", n.totals[2]),
                format!("{:.0}", n.totals[3]),
                bytes(n.peaks[0] as u64),
                bytes(n.peaks[1] as u64),
            ]);
        }
        if rows.len() > 1 {
            o.push_str(&table(&rows));
        }
    }

    pub fn total_lost(&self) -> u64 {
        self.lost.iter().map(|(_, n)| n).sum()
    }

    /// Each process's trace against the kernel's counts (processes
    /// recorded with them).
    pub fn kernel_checks(&self) -> impl Iterator<Item = (&ProcStats, &KernelIo, Check)> {
        let lossy = self.total_lost() > 0 || !self.diagnostics.is_empty();
        self.processes.iter().filter_map(move |p| p.kernel.as_ref().map(|k| (p, k, self.check_of(p, k, lossy))))
    }

    /// One process's trace against the kernel's counts. Attached: a
    /// process started before the recording has neither an exec nor a
    /// fork to count from, and `--path` leaves calls out on purpose.
    pub fn check_of(&self, p: &ProcStats, k: &KernelIo, lossy: bool) -> Check {
        if self.header.attach.as_ref().is_some_and(|a| a.path.is_some()) {
            Check::Unchecked("path filter")
        } else if Self::started_before(p, k) {
            Check::Unchecked("started before")
        } else {
            k.check(&p.traced_io, lossy)
        }
    }

    /// A process that was running before the recording (attached): its
    /// kernel counts have no baseline in the log.
    pub fn started_before(p: &ProcStats, k: &KernelIo) -> bool {
        p.started.is_none() && !k.since_exec
    }

    /// One line per process whose trace and kernel counts disagree.
    pub fn kernel_warnings(&self) -> Vec<String> {
        self.kernel_checks()
            .filter_map(|(p, _, c)| match c {
                Check::Mismatch(d) => Some(format!(
                    "{} [{}]: the kernel's I/O counts differ from the trace: {}",
                    p.label(),
                    p.pid,
                    d.join("; ")
                )),
                _ => None,
            })
            .collect()
    }

    /// Files by bytes moved, largest first.
    pub fn top_files(&self, n: usize) -> Vec<(&str, &FileStats)> {
        let mut v: Vec<(&str, &FileStats)> = self.files.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let moved = |f: &FileStats| f.total_read_bytes() + f.total_write_bytes();
        v.sort_by(|a, b| moved(b.1).cmp(&moved(a.1)).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }

    /// Whether the log has page-cache insertions (its probe was attached).
    pub fn has_page_cache(&self) -> bool {
        self.has_probe("page cache")
    }

    /// Whether the log has mmap, munmap and mremap records.
    pub fn has_mappings(&self) -> bool {
        self.has_probe("mappings")
    }

    /// Whether the log has major faults (their probe was attached).
    pub fn has_major_faults(&self) -> bool {
        self.has_probe("major faults")
    }

    fn has_probe(&self, subsystem: &str) -> bool {
        self.header.probes.iter().any(|p| p.subsystem == subsystem)
    }

    /// Files by bytes brought from storage, largest first (those with any).
    pub fn top_storage_files(&self, n: usize) -> Vec<(&str, &FileStats)> {
        let mut v: Vec<(&str, &FileStats)> =
            self.files.iter().filter(|(_, f)| f.cache.storage_read_bytes() > 0).map(|(k, v)| (k.as_str(), v)).collect();
        v.sort_by(|a, b| b.1.cache.storage_read_bytes().cmp(&a.1.cache.storage_read_bytes()).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }
}

pub fn bytes(b: u64) -> String {
    const U: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", U[i])
}

pub fn duration(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

fn q(h: &Histogram, q: f64) -> String {
    h.quantile(q).map(duration).unwrap_or_else(|| "-".into())
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let tail: String = s.chars().rev().take(max - 1).collect::<Vec<_>>().into_iter().rev().collect();
    format!("…{tail}")
}

/// "kernel / traced", the traced side a range when failed calls may or may not count.
fn versus(kernel: u64, min: u64, max: u64) -> String {
    if min == max {
        format!("{kernel} / {min}")
    } else {
        format!("{kernel} / {min}-{max}")
    }
}

fn versus_bytes(kernel: u64, traced: u64) -> String {
    if kernel == traced {
        bytes(kernel)
    } else {
        format!("{} / {}", bytes(kernel), bytes(traced))
    }
}

fn ratio(r: Option<f64>) -> String {
    r.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "-".into())
}

impl Stats {
    fn render_page_cache(&self, o: &mut String, top: usize) {
        if !self.has_page_cache() {
            return;
        }
        let _ = writeln!(
            o,
            "\nbytes from storage (pages brought into the page cache; hit = share of the bytes read by calls \
             that the cache already held):"
        );
        let head = |first: &str| {
            [first, "read by calls", "from storage", "during reads", "hit", "faults/other", "filled by writes"]
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
        };
        let row = |label: String, read: u64, c: &CacheFill| {
            vec![
                label,
                bytes(read),
                bytes(c.storage_read_bytes()),
                bytes(c.during_reads),
                ratio(c.hit_ratio(read)),
                bytes(c.faults + c.other),
                bytes(c.writes + c.transfers),
            ]
        };
        let mut rows = vec![head("process")];
        for p in &self.processes {
            rows.push(row(format!("{} [{}]", p.label(), p.pid), p.reads.bytes, &p.cache));
        }
        o.push_str(&table(&rows));
        let files = self.top_storage_files(top);
        if !files.is_empty() {
            let _ = writeln!(o, "\ntop {} files by bytes from storage:", files.len());
            let mut rows = vec![head("file")];
            for (path, f) in files {
                rows.push(row(shorten(path, 60), f.read_bytes, &f.cache));
            }
            o.push_str(&table(&rows));
        }
    }

    fn render_kernel(&self, o: &mut String) {
        let checks: Vec<_> = self.kernel_checks().collect();
        if checks.is_empty() {
            return;
        }
        let _ = writeln!(
            o,
            "\nkernel's own I/O accounting against the trace (kernel / traced; per process, from its exec or fork, \
             reaped children not included):"
        );
        let mut rows = vec![[
            "process",
            "pid",
            "read calls",
            "read",
            "write calls",
            "written",
            "from storage",
            "dirtied",
            "check",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
        for (p, k, c) in checks {
            let (c_, t) = (&k.counts, &p.traced_io);
            let chars = k.have & acct::CHARS != 0;
            let na = || "-".to_string();
            let by = k.have & acct::BYTES != 0;
            rows.push(vec![
                p.label().to_string(),
                p.pid.to_string(),
                if chars { versus(c_.syscr, t.syscr_min, t.syscr_max) } else { na() },
                if chars { versus_bytes(c_.rchar, t.rchar) } else { na() },
                if chars { versus(c_.syscw, t.syscw_min, t.syscw_max) } else { na() },
                if chars { versus_bytes(c_.wchar, t.wchar) } else { na() },
                if by { bytes(c_.read_bytes) } else { na() },
                if by { bytes(c_.write_bytes) } else { na() },
                c.label().to_string(),
            ]);
        }
        o.push_str(&table(&rows));
    }
}

fn block_header(first: &str) -> Vec<String> {
    [first, "requests", "read", "written", "other", "errors", "p50", "p99", "max", "device p50"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn block_row(label: String, b: &BlockStats) -> Vec<String> {
    vec![
        label,
        b.requests.to_string(),
        bytes(b.read_bytes),
        bytes(b.write_bytes),
        b.other.to_string(),
        b.errors.to_string(),
        q(&b.latency, 0.5),
        q(&b.latency, 0.99),
        duration(b.latency.max()),
        q(&b.device, 0.5),
    ]
}

/// Left-aligns the first column and right-aligns the others.
pub(crate) fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..cols).map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        for (c, cell) in r.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            if c == 0 {
                out.push_str(cell);
                out.push_str(&" ".repeat(pad));
            } else {
                out.push_str("  ");
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            }
        }
        out.push('\n');
    }
    out
}

impl Stats {
    /// The report `mltrace stats` prints.
    /// `record --detail summary`'s slow threshold (the smallest of a
    /// merged log's hosts); `None` for a full recording.
    pub fn slow_ns(&self) -> Option<u64> {
        let hosts = self.header.hosts.iter().filter_map(|h| h.header.summary_slow_ns);
        self.header.summary_slow_ns.into_iter().chain(hosts).min()
    }

    /// `record --time-resolution` in ns: the coarsest of a merged log's
    /// hosts; 1 when times are as measured.
    pub fn time_resolution_ns(&self) -> u64 {
        let hosts = self.header.hosts.iter().filter_map(|h| h.header.time_resolution_ns);
        self.header.time_resolution_ns.into_iter().chain(hosts).max().unwrap_or(1)
    }

    /// What a summary recording holds, in a line (`None` for a full one).
    pub fn detail_line(&self) -> Option<String> {
        let slow = self.slow_ns()?;
        Some(format!(
            "summary: reads, writes, syncs and closes summed per thread, file and second in the kernel; \
             only those that took {} or more, or failed, recorded one by one",
            duration(slow)
        ))
    }

    pub fn render(&self, top: usize) -> String {
        let mut o = String::new();
        let h = &self.header;
        let ranks = self.ranks();
        let verdict = self.verdict_with(&ranks);
        let _ = writeln!(o, "verdict:  {}", verdict.text);
        suggest::render(&verdict, &mut o);
        let _ = writeln!(o, "command:  {}", h.command.join(" "));
        if let Some(a) = &h.attach {
            let _ = writeln!(o, "attached: record {}", a.describe());
        }
        if h.is_merged() {
            let _ = writeln!(o, "hosts:    {} (merged; pids below are host:pid)", h.host_names().join(", "));
        } else if !h.host.is_empty() {
            let _ = writeln!(o, "host:     {} (kernel {}, {} CPUs)", h.host, h.kernel, h.cpu_count);
        }
        if let Some((a, b)) = self.span() {
            let _ = writeln!(o, "recorded: {}, starting {}", duration(b - a), describe_ts(h, a));
        }
        let status = match self.trailer.as_ref().and_then(|t| t.exit_status) {
            Some(s) if s & 0x7f == 0 => format!("exited with {}", (s >> 8) & 0xff),
            Some(s) => format!("killed by signal {}", s & 0x7f),
            None if self.trailer.is_none() => "unknown (the log was cut)".into(),
            None if h.attach.is_some() => "none (attached: mltrace did not start it)".into(),
            None => "unknown (recording stopped first)".into(),
        };
        let _ = writeln!(o, "status:   {status}");
        let lost = if self.lost.is_empty() {
            "0".to_string()
        } else {
            format!(
                "{} ({})",
                self.total_lost(),
                self.lost.iter().map(|(k, n)| format!("{n} {}", k.name())).collect::<Vec<_>>().join(", ")
            )
        };
        let _ = writeln!(o, "events:   {} records, lost {lost}", self.records);
        let _ = writeln!(
            o,
            "log:      format {}.{}{}",
            self.format.0,
            self.format.1,
            if h.mltrace_version.is_empty() {
                String::new()
            } else {
                format!(", written by mltrace {}", h.mltrace_version)
            }
        );
        if let Some(line) = self.detail_line() {
            let _ = writeln!(o, "detail:   {line}");
        }
        let grid = self.time_resolution_ns();
        if grid > 1 {
            let _ = writeln!(
                o,
                "times:    rounded to {} (record --time-resolution): a call shorter than that may show as 0",
                duration(grid)
            );
        }
        for d in &self.diagnostics {
            let _ = writeln!(o, "warning:  {d}");
        }
        // Not root: processes let go as they became another user or group.
        for (_, _, text) in &self.untraced {
            let _ = writeln!(o, "let go:   {text}");
        }
        for w in self.kernel_warnings().into_iter().chain(self.split_warnings()) {
            let _ = writeln!(o, "warning:  {w}");
        }
        o.push('\n');
        self.render_epochs(&verdict, &mut o);
        Stats::render_step_waits(&verdict, &mut o);

        let mut rows = vec![[
            "process",
            "pid",
            "reads",
            "read",
            "read p50",
            "read p99",
            "writes",
            "written",
            "write p50",
            "write p99",
            "opens",
            "failed",
            "files",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
        for p in &self.processes {
            rows.push(vec![
                p.label().to_string(),
                self.pid_label(p.pid),
                p.reads.count.to_string(),
                bytes(p.reads.bytes),
                q(&p.reads.latency, 0.5),
                q(&p.reads.latency, 0.99),
                p.writes.count.to_string(),
                bytes(p.writes.bytes),
                q(&p.writes.latency, 0.5),
                q(&p.writes.latency, 0.99),
                p.opens.count.to_string(),
                p.opens.errors.to_string(),
                p.files_touched().to_string(),
            ]);
        }
        o.push_str(&table(&rows));
        self.render_async(&mut o);
        self.render_page_cache(&mut o, top);
        self.render_maps(&mut o, top);
        self.render_kernel(&mut o);
        if !self.utilisation.is_empty() {
            // /proc/stat, /proc/meminfo and NVML count everyone's use.
            let _ = writeln!(o, "\nutilisation, whole machine, not only the traced processes (sampled):");
            let mut rows = vec![["counter", "mean", "max"].iter().map(|s| s.to_string()).collect::<Vec<_>>()];
            let rank = |g: &str| {
                if g == "CPU" {
                    0
                } else if g == "Memory" {
                    1
                } else {
                    2
                }
            };
            let mut u: Vec<_> = self.utilisation.iter().collect();
            u.sort_by_key(|((g, _, _), _)| rank(g));
            for ((g, n, unit), (sum, count, max)) in u {
                rows.push(vec![format!("{g} {n}"), value(sum / *count as f64, *unit), value(*max, *unit)]);
            }
            o.push_str(&table(&rows));
        }
        if !self.gpu_events.is_empty() {
            let _ = writeln!(o, "\nGPU events:");
            let mut rows = vec![["gpu", "event", "count"].iter().map(|s| s.to_string()).collect::<Vec<_>>()];
            for (g, k, n) in &self.gpu_events {
                rows.push(vec![g.clone(), k.name().to_string(), n.to_string()]);
            }
            o.push_str(&table(&rows));
        }
        if !self.disks.is_empty() {
            let _ = writeln!(o, "\nblock I/O by disk, whole machine (latency = queue + device):");
            let mut rows = vec![block_header("disk")];
            for d in &self.disks {
                let label = format!("{} ({}:{})", d.name, d.dev >> 20, d.dev & 0xfffff);
                rows.push(block_row(label, &d.block));
            }
            o.push_str(&table(&rows));
            let _ = writeln!(o, "\nblock I/O by who started it:");
            let mut rows = vec![block_header("process")];
            for p in self.processes.iter().filter(|p| p.block.requests > 0) {
                rows.push(block_row(format!("{} [{}]", p.label(), p.pid), &p.block));
            }
            for (who, b) in &self.block_others {
                rows.push(block_row(format!("{who} (not traced)"), b));
            }
            o.push_str(&table(&rows));
        }
        self.render_checkpoints(&mut o, top);
        self.render_ranks(&ranks, &mut o);
        self.render_gpu_calls(&mut o);
        self.render_collectives(&mut o);
        self.render_peers(&mut o, top);
        self.render_network(&mut o);
        self.render_hosts(&mut o);
        let files = self.top_files(top);
        if !files.is_empty() {
            let uring = files.iter().any(|(_, f)| f.uring_reads + f.uring_writes > 0);
            let by = if uring { " (calls and io_uring requests)" } else { "" };
            let _ = writeln!(o, "\ntop {} files by bytes{by}:", files.len());
            let mut rows =
                vec![["file", "read", "reads", "written", "writes", "opens"].iter().map(|s| s.to_string()).collect()];
            for (path, f) in files {
                rows.push(vec![
                    shorten(path, 60),
                    bytes(f.total_read_bytes()),
                    (f.reads + f.uring_reads).to_string(),
                    bytes(f.total_write_bytes()),
                    (f.writes + f.uring_writes).to_string(),
                    f.opens.to_string(),
                ]);
            }
            o.push_str(&table(&rows));
        }
        o
    }
}

/// The threads of a summary log that are loader threads (see
/// [`mltrace_model::procs::LOADER_BYTES`]) by their summed reads of data
/// files and sockets, read ahead: the sums of a second reach the log a
/// second or two after the wake-ups that the verdict must judge.
fn summed_loaders<R: Read + Seek>(reader: &mut LogReader<R>) -> Result<HashSet<(u32, u32)>, LogError> {
    use mltrace_model::procs::LOADER_BYTES;
    let mut bytes: HashMap<(u32, u32), u64> = HashMap::default();
    while let Some(mut f) = reader.next_frame()? {
        while let Some(rec) = f.next_record() {
            let Record::IoSummary(r) = rec else { continue };
            let data = match r.kind {
                FileKind::Regular | FileKind::BlockDev => is_data_path(f.str(r.path)),
                FileKind::Socket => true,
                _ => false,
            };
            if r.tid != r.pid && data && r.op.io().is_some_and(|o| !o.is_write()) {
                *bytes.entry((r.pid, r.tid)).or_default() += r.bytes;
            }
        }
    }
    Ok(bytes.into_iter().filter(|&(_, b)| b >= LOADER_BYTES).map(|(k, _)| k).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::path::Path;

    #[test]
    fn aggregates_per_process_and_file() {
        let header = Header { root_pid: 10, command: vec!["python".into(), "train.py".into()], ..Default::default() };
        let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
        w.push(&Record::Fork(Fork { ts: 1, pid: 10, tid: 10, parent_pid: 1, parent_tid: 1, thread: false })).unwrap();
        w.push(&Record::Fork(Fork { ts: 2, pid: 11, tid: 11, parent_pid: 10, parent_tid: 10, thread: false })).unwrap();
        for i in 0..100u64 {
            w.push_with(|e| {
                Record::Io(Io {
                    ts: 10 + i,
                    dur: 1000 * (i + 1),
                    pid: 11,
                    tid: 11,
                    op: IoOp::Read,
                    fd: 3,
                    path: e.intern(b"/data/a.bin"),
                    kind: FileKind::Regular,
                    offset: i * 4096,
                    offset_src: OffsetSrc::FilePos,
                    requested: 4096,
                    ret: 4096,
                    block_reqs: 0,
                    summed: false,
                })
            })
            .unwrap();
        }
        w.push_with(|e| {
            Record::Io(Io {
                ts: 500,
                dur: 10,
                pid: 10,
                tid: 10,
                op: IoOp::Write,
                fd: 1,
                path: e.intern(b"pipe:[5]"),
                kind: FileKind::Pipe,
                requested: 10,
                ret: -32,
                ..Default::default()
            })
        })
        .unwrap();
        w.push(&Record::Lost(Lost { ts: 600, kind: LostKind::RingFull, count: 7 })).unwrap();
        for (i, (pid, flags)) in [(11, blk::TRACED), (11, blk::TRACED), (99, blk::KTHREAD)].into_iter().enumerate() {
            w.push_with(|e| {
                Record::Block(Block {
                    ts: 700 + i as u64,
                    queue: 1_000,
                    device: 100_000 * (i as u64 + 1),
                    pid,
                    tid: pid,
                    comm: e.intern(if pid == 99 { b"kworker/u4:2" } else { b"python" }),
                    dev: 254 << 20,
                    disk: e.intern(b"vda"),
                    sector: 8 * i as u64,
                    bytes: 4096,
                    op: if pid == 99 { BlockOp::Write } else { BlockOp::Read },
                    flags,
                    ..Default::default()
                })
            })
            .unwrap();
        }
        let bytes_out = w.finish(&Trailer { exit_status: Some(0), ..Default::default() }).unwrap();
        let mut r = LogReader::new(Path::new("t"), Cursor::new(bytes_out)).unwrap();
        let s = Stats::from_reader(&mut r).unwrap();
        assert_eq!(s.processes.len(), 2);
        let worker = &s.processes[1];
        assert_eq!(worker.name, "python train.py");
        assert!(s.render(1).contains("python train.py"));
        assert_eq!(worker.reads.count, 100);
        assert_eq!(worker.reads.bytes, 409_600);
        assert_eq!(worker.files_touched(), 1);
        let p50 = worker.reads.latency.quantile(0.5).unwrap();
        assert!((48_000..=53_000).contains(&p50), "{p50}");
        assert_eq!(s.processes[0].writes.errors, 1);
        assert_eq!(s.processes[0].files_touched(), 0);
        assert_eq!(s.files.len(), 1);
        assert_eq!(s.files["/data/a.bin"].read_bytes, 409_600);
        assert_eq!(s.total_lost(), 7);
        assert_eq!(s.disks.len(), 1);
        assert_eq!(
            (s.disks[0].block.requests, s.disks[0].block.read_bytes, s.disks[0].block.write_bytes),
            (3, 8192, 4096)
        );
        assert_eq!(s.processes[1].block.requests, 2);
        assert_eq!(s.processes[1].block.latency.max(), 201_000);
        assert_eq!(s.block_others[0].0, "kworker/u4:2");
        let text = s.render(10);
        assert!(text.contains("vda (254:0)") && text.contains("kworker/u4:2 (not traced)"), "{text}");
        assert!(text.contains("/data/a.bin"), "{text}");
        assert!(text.contains("lost 7 (7 ring buffer full)"), "{text}");
        assert!(text.contains("exited with 0"), "{text}");
    }

    #[test]
    fn imports_unknown_results_comms_and_dev_0_disks() {
        let mut w = RecordWriter::new(Vec::new(), &Header::default()).unwrap();
        w.push_with(|e| Record::Comm(Comm { ts: 1, pid: 4242, tid: 4242, comm: e.intern(b"dl_worker") })).unwrap();
        // A thread's comm names no process; a process with a command line keeps it.
        w.push_with(|e| Record::Comm(Comm { ts: 1, pid: 4300, tid: 4301, comm: e.intern(b"loader") })).unwrap();
        w.push(&Record::Fork(Fork { ts: 2, pid: 7, tid: 7, parent_pid: 1, parent_tid: 1, thread: false })).unwrap();
        w.push_with(|e| Record::Exec(Exec { ts: 3, pid: 7, tid: 7, argv: e.intern(b"cat\0x"), ..Default::default() }))
            .unwrap();
        w.push_with(|e| Record::Comm(Comm { ts: 4, pid: 7, tid: 7, comm: e.intern(b"renamed") })).unwrap();
        for (pid, op, ret) in [
            (4242, IoOp::Read, RET_UNKNOWN),
            (4242, IoOp::Read, 100),
            (4242, IoOp::Write, RET_UNKNOWN),
            (4300, IoOp::Read, 1),
        ] {
            w.push_with(|e| {
                let path = e.intern(b"/data/x.npy");
                Record::Io(Io {
                    ts: 10,
                    dur: 5,
                    pid,
                    tid: pid,
                    op,
                    path,
                    kind: FileKind::Regular,
                    ret,
                    ..Default::default()
                })
            })
            .unwrap();
        }
        for (ret, kind) in [(RET_UNKNOWN, FileKind::Regular), (RET_UNKNOWN, FileKind::Unknown), (-2, FileKind::Unknown)]
        {
            w.push_with(|e| {
                let p = e.intern(b"/data/y.npy");
                Record::Open(Open {
                    ts: 20,
                    pid: 4242,
                    tid: 4242,
                    path: p,
                    abs_path: p,
                    ret,
                    kind,
                    ..Default::default()
                })
            })
            .unwrap();
        }
        for (disk, dev) in [(&b"sda"[..], 0), (b"sdb", 0), (b"sdb", 0), (b"vda", 254 << 20), (b"vda1", 254 << 20)] {
            w.push_with(|e| {
                let (comm, disk) = (e.intern(b"dl_worker"), e.intern(disk));
                Record::Block(Block {
                    ts: 30,
                    pid: 4242,
                    tid: 4242,
                    comm,
                    dev,
                    disk,
                    bytes: 4096,
                    ..Default::default()
                })
            })
            .unwrap();
        }
        let log = w.finish(&Trailer::default()).unwrap();
        let s = Stats::from_reader(&mut LogReader::new(Path::new("t"), Cursor::new(log)).unwrap()).unwrap();
        let p = |pid: u32| s.processes.iter().find(|p| p.pid == pid).unwrap();
        assert_eq!(
            (p(4242).name.as_str(), p(4300).name.as_str(), p(7).name.as_str()),
            ("dl_worker", "pid 4300", "cat x")
        );
        // Unknown results count as calls, never as errors or bytes.
        let w = p(4242);
        assert_eq!((w.reads.count, w.reads.bytes, w.reads.errors), (2, 100, 0));
        assert_eq!((w.writes.count, w.writes.bytes, w.writes.errors), (1, 0, 0));
        assert_eq!((w.opens.count, w.opens.errors), (3, 1));
        assert_eq!(s.files["/data/y.npy"].opens, 1, "the unknown open of a file seen found");
        assert_eq!(s.files["/data/x.npy"].read_bytes, 101);
        let disks: Vec<(&str, u32, u64)> = s.disks.iter().map(|d| (d.name.as_str(), d.dev, d.block.requests)).collect();
        assert_eq!(disks, [("sda", 0, 1), ("sdb", 0, 2), ("vda", 254 << 20, 2)]);
        let text = s.render(10);
        assert!(text.contains("sda (0:0)") && text.contains("sdb (0:0)"), "{text}");
        assert!(text.contains("dl_worker"), "{text}");
    }

    #[test]
    fn machine_wide_counters_are_labelled_so() {
        let header = Header { root_pid: 10, command: vec!["python".into()], ..Default::default() };
        let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
        for (i, (group, name, unit, value)) in [
            ("Memory", "dirty", CounterUnit::Bytes, 1.3e9),
            ("Network eth0", "rx", CounterUnit::BytesPerSec, 5e7),
            ("Network eth0", "rx", CounterUnit::BytesPerSec, 6e7),
        ]
        .into_iter()
        .enumerate()
        {
            let ts = 1_000_000_000 * (i as u64 + 1);
            w.push_with(|e| {
                Record::Counter(Counter {
                    ts,
                    group: e.intern(group.as_bytes()),
                    name: e.intern(name.as_bytes()),
                    unit,
                    pid: 0,
                    value,
                })
            })
            .unwrap();
        }
        let log = w.finish(&Trailer::default()).unwrap();
        let s = Stats::from_reader(&mut LogReader::new(Path::new("t"), Cursor::new(log)).unwrap()).unwrap();
        let text = s.render(10);
        let heading_of = |row: &str| {
            let lines: Vec<&str> = text.lines().collect();
            let at = lines.iter().position(|l| l.starts_with(row)).unwrap_or_else(|| panic!("no {row}: {text}"));
            lines[..at].iter().rev().find(|l| l.ends_with(':')).unwrap().to_string()
        };
        assert!(heading_of("Memory dirty").contains("whole machine"), "{text}");
        assert!(heading_of("eth0").contains("whole machine"), "{text}");
    }
}
