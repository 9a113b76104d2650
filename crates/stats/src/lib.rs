//! `mltrace stats`: what a log says, in tables. Streams the log once;
//! memory grows with processes and distinct files, not with events.

// Three trees, each using only those before it: accumulation, judgement,
// presentation.
pub mod acc;
pub mod judge;
pub mod show;

// The modules' paths before the trees, for the crate's users.
pub use acc::{
    calls, collectives, gpu_calls, gpu_idle, hosts, kernel, kind_tables, mapped, metadata, network, peers,
    python_lines, rank_waits, sched, steps, timeline,
};
use acc::{summary, summed_reads};
pub use judge::{diff, ranks, step_waits, suggest};

// One way to print each number, shared with the report and the CLI.
pub use judge::verdict::{Breakdown, Share, Verdict};
pub(crate) use mltrace_model::fmt::{bytes, duration, pct, pct_or_dash};
pub use show::verdict::epoch_reads_line;

kind_tables::kind_tables! {
    /// CUDA driver calls per process and call.
    gpu_calls: gpu_calls::GpuCalls,
    /// NCCL calls per process and operation.
    collectives: collectives::Collectives,
    /// Traffic per peer, from the send/recv calls.
    peers: peers::Peers,
    /// Metadata calls (stat, getdents64, rename...) per process and directory.
    metadata: metadata::Metadata,
}

// Fx, not SipHash: the tables are keyed by pids and paths, looked up
// several times a record (SipHash took a third of `stats` on 42M records).
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::io::{Read, Seek};

pub use acc::async_io::{AioStats, UringStats};
pub use acc::hist::Histogram;
pub use calls::{CallDist, Calls};
use kernel::{Check, KernelIo, TracedIo};
use mapped::{FileMaps, ProcMaps};
use mltrace_log::labels::{self, DiskIds, Outcome};
use mltrace_log::*;
use mltrace_model::maps::{MapClass, Maps};
use mltrace_model::procs::{is_data_path, ProcIdx, ProcInfo};

const NAME_MAX: usize = 40;
/// Processes let go ([`Stats::untraced`]) listed.
const MAX_UNTRACED: usize = 256;

/// `s` cut to `max` characters, its tail kept (`…` in front).
pub(crate) fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let tail: String = s.chars().rev().take(max - 1).collect::<Vec<_>>().into_iter().rev().collect();
    format!("…{tail}")
}

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
    /// regular files and block devices, metadata calls).
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
    /// Time in opens (failed ones too), closes and metadata calls on data
    /// files ([`is_data_path`]), and the opens: what a loader spends on
    /// metadata.
    pub meta_ns: u64,
    pub data_opens: u64,
    /// Latency of the read calls on data files ([`mltrace_model::procs::is_data_path`])
    /// by the threads that can be loaders: every thread of a forked
    /// process that runs its parent's program (a worker), the threads
    /// other than the main one otherwise (loader threads). Not their waits
    /// on a pipe for requests; `None` until one.
    pub loader_read_latency: Option<Histogram>,
    /// A data-loader worker as the trace's roles have it (forked and never
    /// exec'd another program, or exec'd Python's multiprocessing spawn),
    /// known once the log is read: a data loader when its parent is the
    /// trainer.
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
    /// Time in opens, closes and metadata calls on data files, and the opens (see
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
    /// A run being recorded ([`Stats::live`]): its summed threads' data
    /// reads so far, to learn its loader threads as they pass the bound
    /// (the whole log's pass knows them from the start).
    live_loaders: Option<HashMap<(u32, u32), u64>>,
    summed_reads: summed_reads::SummedReads,
    pub files: HashMap<String, FileStats>,
    pub lost: Vec<(LostKind, u64)>,
    pub disks: Vec<DiskStats>,
    disk_ids: DiskIds,
    /// Machine-wide counters worth summarising.
    pub utilisation: Vec<(CounterKey, Summary)>,
    /// Each network interface's and RDMA port's traffic, from its counters.
    pub network: Vec<network::NetStats>,
    /// The kinds' own tables.
    pub tables: Tables,
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
    /// What the record being added did to its process's mappings.
    mapped: mltrace_model::maps::Applied,
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
    /// The Python stacks the calls name, and the reads made from them.
    pub python: python_lines::PythonLines,
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
pub fn is_gpu_utilisation(name: &str) -> bool {
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
        if let Some(t) = s.sched.timeline.as_mut() {
            s.summed_reads.finish(t);
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

    /// A run still being recorded, read as its frames are written (the
    /// live metrics): [`Stats::add`] each record; the trainer's timeline
    /// and the ranks' waits grow from the recording's start in bins of
    /// `bin_ns`, so [`Stats::window_verdict`] gives any window so far.
    /// The whole-log pass's end ([`Stats::from_reader_with`]) is not run:
    /// a state still going on is not counted until it ends.
    pub fn live(header: Header, bin_ns: u64) -> Stats {
        let mut s = Stats::new(header);
        let lo = s.header.start.boottime_ns;
        s.sched.timeline = Some(timeline::Timeline::growing(lo, bin_ns));
        s.sched.rank_waits = Some(rank_waits::RankWaits::growing(lo, bin_ns));
        if s.header.is_summary() {
            s.live_loaders = Some(HashMap::default());
        }
        s
    }

    /// A live run's summed loader threads, learnt as their data reads pass
    /// the bound the whole-log pass uses ([`summed_loaders`]).
    pub(crate) fn learn_summed_loader(&mut self, f: &Frame<'_>, r: &IoSummary) {
        let Some(seen) = self.live_loaders.as_mut() else { return };
        if r.tid == r.pid || !is_summed_loader_read(f, r) {
            return;
        }
        let n = seen.entry((r.pid, r.tid)).or_default();
        *n += r.bytes;
        if *n >= mltrace_model::procs::LOADER_BYTES {
            self.summed_loaders.insert((r.pid, r.tid));
        }
    }

    /// Gives each process the name the trace gives it (the model's roles),
    /// matching its incarnation by pid and fork time.
    pub fn name_as_the_trace(&mut self) {
        let mut roles = std::mem::take(&mut self.roles);
        let epochs: Vec<(u64, u64, String)> = (self.epochs.iter().enumerate())
            .map(|(i, (a, b, name))| (*a, *b, mltrace_model::survey::epoch_label(i, name)))
            .collect();
        roles.finish(&self.header, &self.tracker, &epochs);
        let mut by_pid: HashMap<u32, Vec<(ProcIdx, &ProcInfo)>> = HashMap::default();
        for (i, info) in roles.list.iter().enumerate().filter(|(_, info)| info.seen) {
            by_pid.entry(info.pid).or_default().push((i as ProcIdx, info));
        }
        for p in &mut self.processes {
            let Some(all) = by_pid.get(&p.pid) else { continue };
            let same_fork = all.iter().find(|(_, i)| i.forked && Some(i.first_ts) == p.started);
            let &(i, info) = same_fork.or_else(|| all.iter().find(|(_, i)| !i.forked)).unwrap_or(&all[0]);
            p.trace_name = Some(info.name.clone());
            p.loader = roles.is_worker(i);
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

    /// [`Stats::name_as_the_trace`] for a run still being read (the live
    /// metrics): the roles are finished on a copy, the reading goes on.
    pub fn name_as_the_trace_so_far(&mut self) {
        let reading = std::mem::take(&mut self.roles);
        self.roles = reading.clone();
        self.name_as_the_trace();
        self.roles = reading;
    }

    /// Whether the log holds scheduling: recorded with it on (a recording
    /// that had none to record still says so), or has its records.
    pub fn has_sched(&self) -> bool {
        self.sched.records > 0 || self.header.has_probe(mltrace_log::subsystem::SCHEDULING)
    }

    /// The trainer: the command `record` ran (its first incarnation).
    pub fn trainer(&self) -> Option<&ProcStats> {
        let t = self.trainer;
        self.processes.iter().find(|p| p.pid == t && t != 0)
    }

    /// Its data-loader workers: children it forked that did not exec
    /// another program (or exec'd Python's multiprocessing spawn), as the
    /// trace's roles have it.
    pub fn workers_of(&self, trainer: &ProcStats) -> Vec<&ProcStats> {
        self.processes.iter().filter(|p| p.parent == trainer.pid && p.pid != trainer.pid && p.loader).collect()
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
        self.header.has_probe(subsystem::PAGE_CACHE)
    }

    /// Whether the log has mmap, munmap and mremap records.
    pub fn has_mappings(&self) -> bool {
        self.header.has_probe(subsystem::MAPPINGS)
    }

    /// Whether the log has major faults (their probe was attached).
    pub fn has_major_faults(&self) -> bool {
        self.header.has_probe(subsystem::MAJOR_FAULTS)
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
            if r.tid != r.pid && is_summed_loader_read(&f, &r) {
                *bytes.entry((r.pid, r.tid)).or_default() += r.bytes;
            }
        }
    }
    Ok(bytes.into_iter().filter(|&(_, b)| b >= LOADER_BYTES).map(|(k, _)| k).collect())
}

/// Sums of data reads (files, sockets): what makes a summed thread a loader.
fn is_summed_loader_read(f: &Frame<'_>, r: &IoSummary) -> bool {
    let data = match r.kind {
        FileKind::Regular | FileKind::BlockDev => is_data_path(f.str(r.path)),
        FileKind::Socket => true,
        _ => false,
    };
    data && r.op.io().is_some_and(|o| !o.is_write())
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
                    stack: 0,
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
