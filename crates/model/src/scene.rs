//! The detail view: records -> tracks, lanes, slices, instants, counters
//! and flows, written to an [`Encoder`]. One scene writes one or more
//! files (the parts of a big run) in one pass over the log: what persists
//! across files (who each pid is, disk counters) is kept, what a file
//! must declare itself (tracks, lanes) starts anew in each.
//!
//! Memory is bounded by the live processes and lanes, not by the log.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::fmt::Write as _;
use std::io;

use mltrace_log::labels::{self, DiskIds};
use mltrace_log::*;

use crate::args::{ArgKey, Args, FnArgs, NoArgs};
use crate::disk_counters::{DiskCounters, Sample};
use crate::encoder::*;
use crate::event::{self, flow_from_syscall, flow_to_disk, Call, Lanes, NotCall, LANE_NAMES};
use crate::maps::Maps;
use crate::proc_rates::{ProcRates, Rate, RateSample};
use crate::procs::{ProcIdx, ProcTracker};
use crate::survey::Survey;

mod block;
mod calls;
mod counters;
mod mapped;
mod phases;
mod summary;
mod tasks;

/// Rows of slices a lane set shows; requests that would need a deeper
/// row go on a collapsed overflow group beside it.
pub const MAX_ROWS: usize = 8;
/// Threads of a process with a track of their own; the others share
/// "other threads" lanes.
pub const MAX_THREAD_TRACKS: usize = 12;

/// Group names, as the viewer shows them.
pub const PHASES_GROUP: &str = "Training phases";
pub const CHECKPOINTS_GROUP: &str = "Checkpoints";
pub const CPU_DETAILS: &str = "CPU details";
pub const LOST_GROUP: &str = "mltrace: lost events";
pub const LOST_TRACK: &str = "mltrace: lost events (total)";
pub const PER_CORE: &str = "per core (busy %)";

/// Top-level order: phases, GPUs, CPU, disks, network, memory, other machine
/// groups, then processes (main first), lost events last.
pub fn group_rank(name: &str) -> i32 {
    match name {
        crate::annotate::VERDICT_TRACK => -10,
        crate::annotate::RANKS_GROUP => -5,
        crate::annotate::LATENESS_GROUP => -4,
        PHASES_GROUP => 0,
        CHECKPOINTS_GROUP => 5,
        n if n.starts_with("GPU") => 10,
        "CPU" => 20,
        n if n.starts_with("Disk") => 30,
        n if n.starts_with("Network ") || n.starts_with("InfiniBand ") => 35,
        "Memory" => 40,
        LOST_GROUP => 1_000_000,
        _ => 50,
    }
}

/// First rank of the process groups.
pub const PROCESS_RANK: i32 = 100;
/// After every process: the tasks that shared the CPUs with them.
const OTHER_TASKS_RANK: i32 = PROCESS_RANK + 10_000_000;
/// The made-up process the untraced tasks of scheduling events are
/// shown in: the largest pid Linux can give (pid_max is at most 2^22).
pub const OTHER_TASKS_PID: u32 = (1 << 22) - 1;

/// The made-up thread of "other tasks" that stands for an interrupt that
/// woke a thread (its tid, below the group's pid, and name); `None` for a
/// task's wake-up.
fn interrupt_waker(by: WakeBy) -> Option<(u32, &'static str)> {
    match by {
        WakeBy::Timer => Some((OTHER_TASKS_PID - 1, "timer interrupt")),
        WakeBy::Hardirq => Some((OTHER_TASKS_PID - 2, "device interrupt (hardirq)")),
        WakeBy::Softirq => Some((OTHER_TASKS_PID - 3, "softirq (network, block, timers)")),
        WakeBy::Task | WakeBy::Unknown => None,
    }
}

/// What a file shows of the log: a time window and some processes.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// `[from, to)` on the log's clock; `None`: unbounded.
    pub from: Option<u64>,
    pub to: Option<u64>,
    /// Only these pids (and the machine); `None`: all.
    pub pids: Option<HashSet<u32>>,
}

impl Filter {
    #[inline]
    pub fn keeps_ts(&self, ts: u64) -> bool {
        self.from.is_none_or(|f| ts >= f) && self.to.is_none_or(|t| ts < t)
    }

    #[inline]
    pub fn keeps_pid(&self, pid: u32) -> bool {
        self.pids.as_ref().is_none_or(|p| p.contains(&pid))
    }

    /// Whether `[s, e)` meets the window.
    pub fn meets(&self, s: u64, e: u64) -> bool {
        self.from.is_none_or(|f| e >= f) && self.to.is_none_or(|t| s < t)
    }
}

/// What the scene wrote into one file.
#[derive(Clone, Debug, Default)]
pub struct SceneStats {
    pub records: u64,
    /// Syscall records drawn (each one slice).
    pub syscalls: u64,
    /// mmap, munmap, mremap of data files, and major faults on them, drawn.
    pub mappings: u64,
    pub major_faults: u64,
    pub slices: u64,
    pub instants: u64,
    pub counters: u64,
    pub flows: u64,
    pub processes: u64,
    pub lost_events: u64,
    pub block_requests: u64,
    /// Context switches and wake-ups written as the format's scheduling data.
    pub sched_events: u64,
    /// In-flight counter changes that arrived after later ones were written.
    pub late_counter_changes: u64,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
}

impl SceneStats {
    fn saw(&mut self, ts: u64) {
        self.first_ts = Some(self.first_ts.map_or(ts, |f| f.min(ts)));
        self.last_ts = Some(self.last_ts.map_or(ts, |l| l.max(ts)));
    }
}

struct Lane {
    track: TrackId,
    /// End of the latest slice: a new slice fits only if it starts after it.
    max_end: u64,
}

/// Lanes of one kind of slice: at most [`MAX_ROWS`] shown, the rest in
/// an overflow group (collapsed in the viewer).
#[derive(Default)]
struct LaneSet {
    lanes: Vec<Lane>,
    overflow: Option<TrackId>,
    deep: Vec<Lane>,
}

/// A free lane of `set` at `ts`, busy until `end`; new lanes are named
/// `name` under `parent`.
#[allow(clippy::too_many_arguments)]
fn lane_of<E: Encoder>(
    enc: &mut E,
    next: &mut TrackId,
    set: &mut LaneSet,
    parent: TrackId,
    name: &str,
    rank: i32,
    ts: u64,
    end: u64,
) -> io::Result<TrackId> {
    if let Some(t) = take_free(&mut set.lanes, ts, end) {
        return Ok(t);
    }
    let mut new = |enc: &mut E, parent: TrackId, name: &str, rank: i32, kind: TrackKind<'_>| {
        *next += 1;
        enc.track(&Track { id: *next, parent: Some(parent), name, rank, kind }).map(|_| *next)
    };
    if set.lanes.len() < MAX_ROWS {
        let id = new(enc, parent, name, rank, TrackKind::Slices)?;
        set.lanes.push(Lane { track: id, max_end: end });
        return Ok(id);
    }
    if let Some(t) = take_free(&mut set.deep, ts, end) {
        return Ok(t);
    }
    let group = match set.overflow {
        Some(g) => g,
        None => {
            let g = new(enc, parent, &format!("{name}: more at once"), rank, TrackKind::Group)?;
            set.overflow = Some(g);
            g
        }
    };
    let id = new(enc, group, name, 0, TrackKind::Slices)?;
    set.deep.push(Lane { track: id, max_end: end });
    Ok(id)
}

/// A thread's track: its calls, one at a time.
struct ThreadOut {
    track: TrackId,
    max_end: u64,
    /// Calls that overlap: io_uring requests in flight at once, imports
    /// with odd times.
    extra: LaneSet,
}

struct ProcOut {
    group: TrackId,
    threads: HashMap<u32, ThreadOut>,
    /// Threads declared for their scheduling alone (no calls yet): the
    /// track tells viewers whose thread it is; calls reuse it.
    sched_threads: HashMap<u32, TrackId>,
    /// Threads beyond [`MAX_THREAD_TRACKS`].
    other_threads: LaneSet,
    block: LaneSet,
}

struct DiskOut {
    group: TrackId,
    lanes: LaneSet,
    /// Read, write (when diskstats were not sampled), latency; made at
    /// their first value other than 0, so a counter that stays 0 is left
    /// out (the ts of its first 0 is kept to start it there).
    tracks: [Option<TrackId>; 3],
    first_zero: [Option<u64>; 3],
}

/// A block request held for its call; see [`Scene::syscall_written`].
struct Pending {
    b: Block,
    comm: Vec<u8>,
    disk: Vec<u8>,
    idx: ProcIdx,
    d: usize,
}

/// A request whose call has not come this long after it is written alone.
const PENDING_NS: u64 = 30_000_000_000;
/// Calls remembered per file for their later requests.
const MAX_STARTED: usize = 65_536;

/// The task a CPU's last switch put on: tid, comm, prio, and when.
type OnCpu = Option<(u32, Vec<u8>, i32, u64)>;

struct Disk {
    /// Its host (a merged log has each host's disks).
    host: usize,
    dev: u32,
    name: Vec<u8>,
    counters: DiskCounters,
    /// Requests in flight at `--from` (the last change before it), drawn
    /// at that instant before the window's first change.
    edge: Option<i64>,
}

/// What one file has declared.
#[derive(Default)]
struct Out {
    next_track: TrackId,
    /// By incarnation (dense): no hashing on the hot path.
    procs: Vec<Option<ProcOut>>,
    groups: HashMap<String, TrackId>,
    counters: HashMap<String, TrackId>,
    lost: Option<(TrackId, TrackId)>,
    disks: Vec<Option<DiskOut>>,
    /// Per-core busy tracks are made at their first value other than 0
    /// (an idle core's says nothing); until then, each core's first 0.
    /// By (host, core).
    busy_zero: HashMap<(usize, u32), Option<u64>>,
    /// Lanes of other slice tracks, by parent and name.
    lanes: HashMap<(TrackId, &'static str), LaneSet>,
    /// The "other tasks" group of each host, and the untraced threads
    /// declared in it (see [`Scene::other_task`]).
    other_groups: HashMap<usize, TrackId>,
    other_tids: HashSet<u32>,
}

impl Out {
    fn id(&mut self) -> TrackId {
        self.next_track += 1;
        self.next_track
    }
}

/// See the module docs.
pub struct Scene<'s> {
    run: &'s Survey,
    pub filter: Filter,
    tracker: ProcTracker,
    disk_ids: DiskIds,
    disks: Vec<Disk>,
    diskstats_sampled: bool,
    core_iowait: HashMap<u32, (u64, f64)>,
    cpu_iowait: (u64, f64),
    samples: Vec<Sample>,
    rates: ProcRates,
    rate_samples: Vec<RateSample>,
    /// Counted-call rate tracks whose last period ends at this time: 0
    /// there unless the next period starts then.
    count_ends: HashMap<TrackId, u64>,
    /// `record --detail summary`'s sums being drawn.
    summary: summary::SummaryState,
    /// Every process's mappings, kept through every record (drawn or not).
    maps: Maps,
    out: Out,
    /// The current file's `[from, to)`.
    range: (u64, u64),
    /// Block requests whose call is not written yet, by (tid, call ts).
    pending: HashMap<(u32, u64), Vec<Pending>>,
    pending_count: usize,
    pending_oldest: u64,
    /// Calls written in this file with requests still to come.
    started: HashMap<(u32, u64), u32>,
    lost_total: u64,
    flow_out: Vec<u64>,
    flow_in: Vec<u64>,
    who: String,
    flags: String,
    key: String,
    /// By CPU, in this file: the task the last switch put on it (tid,
    /// comm, prio), to join the chain where untraced tasks ran between.
    /// By host (a merged log's hosts have their own CPUs), then CPU.
    on_cpu: Vec<Vec<OnCpu>>,
    /// The last sample of each machine counter, before this file or in it
    /// (group and name as bytes), in the order first seen: a file that
    /// starts between two samples draws them from its first instant.
    last_machine: Vec<(Vec<u8>, Vec<u8>, Counter)>,
    last_machine_at: HashMap<Vec<u8>, usize>,
    machine_key: Vec<u8>,
    /// Whether this file has yet to draw them (at its first record shown).
    carry_pending: bool,
    /// The host whose machine groups are being drawn (0 but in a merged
    /// log): set from the record before its groups are looked up.
    pub(crate) host: usize,
    /// The next of the run's collective waits to draw.
    next_wait: usize,
    pub stats: SceneStats,
}

impl<'s> Scene<'s> {
    pub fn new(run: &'s Survey, filter: Filter) -> Self {
        Scene {
            run,
            filter,
            tracker: ProcTracker::default(),
            disk_ids: DiskIds::default(),
            disks: Vec::new(),
            diskstats_sampled: run.header.has_probe(mltrace_log::subsystem::COUNTERS),
            core_iowait: HashMap::default(),
            cpu_iowait: (0, 0.0),
            samples: Vec::new(),
            rates: ProcRates::default(),
            rate_samples: Vec::new(),
            count_ends: HashMap::default(),
            summary: Default::default(),
            maps: Maps::default(),
            out: Out::default(),
            range: (0, u64::MAX),
            pending: HashMap::default(),
            pending_count: 0,
            pending_oldest: u64::MAX,
            started: HashMap::default(),
            lost_total: 0,
            flow_out: Vec::new(),
            flow_in: Vec::new(),
            who: String::new(),
            flags: String::new(),
            key: String::new(),
            on_cpu: Vec::new(),
            last_machine: Vec::new(),
            last_machine_at: HashMap::default(),
            machine_key: Vec::new(),
            carry_pending: false,
            host: 0,
            next_wait: 0,
            stats: SceneStats::default(),
        }
    }

    /// Starts a file: its clock anchor and title, then the training phases
    /// and run-wide marks that meet `[from, to)` (all of them, cut to it:
    /// they give the file its context). `part`: what a part of a big run
    /// holds (`EPOCH 2 (2/3)`), shown under the phases.
    pub fn begin_file<E: Encoder>(
        &mut self,
        enc: &mut E,
        title: &str,
        range: (u64, u64),
        part: Option<&str>,
    ) -> io::Result<()> {
        self.out = Out::default();
        self.started.clear();
        self.on_cpu.clear();
        self.stats = SceneStats::default();
        self.range = range;
        self.carry_pending = true;
        let zero = self.run.zero_counters();
        enc.begin(&FileMeta { header: &self.run.header, anchor: self.run.header.start, title, zero_counters: &zero })?;
        // Run-wide tracks (verdict, phases, losses) are the first host's.
        enc.machine(0);
        self.host = 0;
        let rank = group_rank(crate::annotate::VERDICT_TRACK);
        let out = &mut self.out;
        self.stats.slices += crate::annotate::draw(enc, &self.run.annotations, range, rank, &mut || out.id())?;
        for (series, group, unit) in [
            (&self.run.ranks, crate::annotate::RANKS_GROUP, "%"),
            (&self.run.lateness, crate::annotate::LATENESS_GROUP, "ms"),
        ] {
            let rank = group_rank(group);
            let out = &mut self.out;
            self.stats.counters +=
                crate::annotate::draw_ranks(enc, series, (group, unit), range, rank, &mut || out.id())?;
        }
        self.phases(enc, range, part)?;
        self.checkpoints(enc, range)
    }

    /// The checkpoints that meet `[from, to)`, on a top-level track (its
    /// own row: size and MB/s) with a lane below naming each one's path
    /// (a track with a lane is a group of its own in the UI, not one of
    /// the "Global Track Events").
    fn checkpoints<E: Encoder>(&mut self, enc: &mut E, (from, to): (u64, u64)) -> io::Result<()> {
        let run = self.run;
        let mut ids = None;
        for c in run.checkpoints.iter().filter(|c| c.end >= from && c.start < to) {
            let (group, files) = match ids {
                Some(t) => t,
                None => {
                    let (g, f) = (self.out.id(), self.out.id());
                    let rank = group_rank(CHECKPOINTS_GROUP);
                    let kind = TrackKind::Slices;
                    enc.track(&Track { id: g, parent: None, name: CHECKPOINTS_GROUP, rank, kind })?;
                    enc.track(&Track { id: f, parent: Some(g), name: "files", rank: 0, kind })?;
                    ids = Some((g, f));
                    (g, f)
                }
            };
            let size = format!("checkpoint {} ({:.0} MB/s)", mltrace_log::show::size(c.bytes), c.mb_per_s());
            let (start, end, whole) = crate::annotate::clip(c.start, c.end, (from, to));
            for (track, name) in [(group, size.as_str()), (files, c.path.as_str())] {
                let s =
                    Slice { track, ts: start, dur: end - start, name: Name::Str(name), flows_out: &[], flows_in: &[] };
                enc.slice(
                    &s,
                    &FnArgs(|a: &mut dyn crate::ArgSink| {
                        a.str(ArgKey::Path, c.path.as_bytes());
                        a.uint(ArgKey::Bytes, c.bytes);
                        a.uint(ArgKey::Pid, u64::from(c.pid));
                        if let Some(w) = &whole {
                            a.str(ArgKey::Whole, w.as_bytes());
                        }
                    }),
                )?;
                self.stats.slices += 1;
            }
        }
        Ok(())
    }

    /// Ends the file. `last`: the log is done, so disk counters still held
    /// back for ordering are written too.
    pub fn end_file<E: Encoder>(&mut self, enc: &mut E, last: bool) -> io::Result<(u64, SceneStats)> {
        for d in 0..self.disks.len() {
            if last {
                self.disks[d].counters.finish(&mut self.samples);
            } else {
                // What happened in this file's span goes in this file.
                self.disks[d].counters.flush_until(self.range.1, &mut self.samples);
            }
            self.emit_samples(enc, d)?;
        }
        if last {
            self.rates.finish(&mut self.rate_samples);
        } else {
            self.rates.flush_until(self.range.1, &mut self.rate_samples);
        }
        self.emit_rates(enc)?;
        self.finish_summaries(enc)?;
        let mut ends: Vec<(TrackId, u64)> = self.count_ends.drain().collect();
        ends.sort_unstable();
        for (t, end) in ends {
            self.stats.counters += 1;
            enc.counter(t, end, 0.0)?;
        }
        if last {
            self.collective_waits(enc, u64::MAX)?;
            self.flush_pending(enc, u64::MAX)?;
            self.stats.late_counter_changes = self.disks.iter().map(|d| d.counters.late).sum::<u64>() + self.rates.late;
        }
        let end = if last { self.run.trailer.as_ref().map(|t| t.end) } else { None };
        let bytes = enc.end(end, if last { self.run.trailer.as_ref() } else { None })?;
        Ok((bytes, std::mem::take(&mut self.stats)))
    }

    /// A lane of `parent`'s `name` tracks free at `ts`, busy until `end`.
    pub(crate) fn lane_in<E: Encoder>(
        &mut self,
        enc: &mut E,
        parent: TrackId,
        name: &'static str,
        rank: i32,
        ts: u64,
        end: u64,
    ) -> io::Result<TrackId> {
        let Out { next_track, lanes, .. } = &mut self.out;
        let set = lanes.entry((parent, name)).or_default();
        lane_of(enc, next_track, set, parent, name, rank, ts, end)
    }

    /// A machine group (CPU, a disk, Memory...), declared on first use.
    /// Groups with a [`header`] are that counter themselves, so that the
    /// row a viewer shows collapsed says something.
    /// In a merged log, a machine group is the current [`Scene::host`]'s,
    /// and named for it (`nodeA · CPU · busy`).
    pub(crate) fn group<E: Encoder>(&mut self, enc: &mut E, name: &str) -> io::Result<TrackId> {
        let host_label = if name == LOST_GROUP { None } else { self.run.host_label(self.host) };
        // Every machine sample comes here: the key's buffer is reused.
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        match host_label {
            Some(_) => {
                let _ = write!(key, "{}\u{1}{name}", self.host);
            }
            None => key.push_str(name),
        }
        let found = self.out.groups.get(&key).copied();
        self.key = key;
        if let Some(t) = found {
            return Ok(t);
        }
        let key = self.key.clone();
        let id = self.out.id();
        let (shown, kind) = match header(name) {
            Some((what, unit)) => (format!("{name} · {what}"), TrackKind::Counter(unit)),
            None => (name.to_string(), TrackKind::Group),
        };
        let shown = match host_label {
            Some(h) => format!("{h} · {shown}"),
            None => shown,
        };
        enc.machine(if host_label.is_some() { self.host as u32 } else { 0 });
        enc.track(&Track { id, parent: None, name: &shown, rank: group_rank(name), kind })?;
        self.out.groups.insert(key, id);
        Ok(id)
    }

    /// A sub-group `name` of `parent` (rank `rank`), declared on first use.
    fn sub_group<E: Encoder>(&mut self, enc: &mut E, parent: &str, name: &str, rank: i32) -> io::Result<TrackId> {
        let key = format!("{}\0{parent}\0{name}", self.host);
        if let Some(&t) = self.out.groups.get(&key) {
            return Ok(t);
        }
        let p = self.group(enc, parent)?;
        let id = self.out.id();
        enc.track(&Track { id, parent: Some(p), name, rank, kind: TrackKind::Group })?;
        self.out.groups.insert(key, id);
        Ok(id)
    }

    /// The group of process incarnation `idx`, declared on first use.
    pub(crate) fn proc_group<E: Encoder>(&mut self, enc: &mut E, idx: ProcIdx) -> io::Result<TrackId> {
        if let Some(Some(p)) = self.out.procs.get(idx as usize) {
            return Ok(p.group);
        }
        let id = self.out.id();
        let info = self.run.procs.get(idx);
        // The parent when it is in the trace (not mltrace, which started the command).
        let parent_pid = info.parent.map(|q| self.run.procs.get(q)).filter(|q| q.seen).map(|q| q.pid);
        // In a merged log, processes say their host.
        let name: std::borrow::Cow<'_, str> = match self.run.host_label(host_of(info.pid)) {
            Some(h) => format!("{h} · {}", info.name).into(),
            None => info.name.as_str().into(),
        };
        enc.track(&Track {
            id,
            parent: None,
            name: &name,
            rank: PROCESS_RANK + self.run.order_of(idx),
            kind: TrackKind::Process(ProcessDesc {
                pid: info.pid,
                parent_pid,
                cmdline: &info.cmdline,
                start_ts: info.forked.then_some(info.first_ts),
            }),
        })?;
        let i = idx as usize;
        if self.out.procs.len() <= i {
            self.out.procs.resize_with(i + 1, || None);
        }
        self.out.procs[i] = Some(ProcOut {
            group: id,
            threads: HashMap::default(),
            sched_threads: HashMap::default(),
            other_threads: LaneSet::default(),
            block: LaneSet::default(),
        });
        self.stats.processes += 1;
        Ok(id)
    }

    /// The track of thread `tid` of process `idx` free at `ts`, busy
    /// until `end`: its own (declared on first use), or for a process
    /// with many threads a shared lane.
    #[inline]
    fn thread_lane<E: Encoder>(
        &mut self,
        enc: &mut E,
        idx: ProcIdx,
        tid: u32,
        ts: u64,
        end: u64,
    ) -> io::Result<TrackId> {
        let group = self.proc_group(enc, idx)?;
        let info = self.run.procs.get(idx);
        let tid = if tid == 0 { info.pid } else { tid };
        let Out { next_track, procs, .. } = &mut self.out;
        let p = procs[idx as usize].as_mut().unwrap();
        if let Some(t) = p.threads.get_mut(&tid) {
            if t.max_end.saturating_add(rounding_slack(ts)) < ts {
                t.max_end = end;
                return Ok(t.track);
            }
            // Beside the thread, not under it: a thread track's children
            // would be summarised as the thread's own calls.
            return lane_of(enc, next_track, &mut t.extra, group, "overlapping calls", 55, ts, end);
        }
        if p.threads.len() >= MAX_THREAD_TRACKS {
            return lane_of(enc, next_track, &mut p.other_threads, group, "other threads", 50, ts, end);
        }
        let id = match p.sched_threads.remove(&tid) {
            Some(id) => id,
            None => {
                *next_track += 1;
                let id = *next_track;
                let name = info.thread_name(tid);
                let kind = TrackKind::Thread { pid: info.pid, tid };
                enc.track(&Track { id, parent: Some(group), name: &name, rank: i32::from(tid != info.pid), kind })?;
                id
            }
        };
        p.threads.insert(tid, ThreadOut { track: id, max_end: end, extra: LaneSet::default() });
        Ok(id)
    }

    /// A traced thread that a context switch or a wake-up names: declared
    /// under its process (once), else viewers show its thread state as a
    /// process of its own. Threads past [`MAX_THREAD_TRACKS`] too: they
    /// have no calls track, but their scheduling is theirs.
    fn sched_thread<E: Encoder>(&mut self, enc: &mut E, idx: ProcIdx, tid: u32) -> io::Result<()> {
        if let Some(Some(p)) = self.out.procs.get(idx as usize) {
            if p.threads.contains_key(&tid) || p.sched_threads.contains_key(&tid) {
                return Ok(());
            }
        }
        let group = self.proc_group(enc, idx)?;
        let info = self.run.procs.get(idx);
        let id = self.out.id();
        let name = info.thread_name(tid);
        let kind = TrackKind::Thread { pid: info.pid, tid };
        enc.track(&Track { id, parent: Some(group), name: &name, rank: i32::from(tid != info.pid), kind })?;
        self.out.procs[idx as usize].as_mut().expect("declared by proc_group").sched_threads.insert(tid, id);
        Ok(())
    }

    /// A lane of process `idx`'s block I/O free at `ts`, busy until `end`.
    fn block_lane<E: Encoder>(&mut self, enc: &mut E, idx: ProcIdx, ts: u64, end: u64) -> io::Result<TrackId> {
        let group = self.proc_group(enc, idx)?;
        let Out { next_track, procs, .. } = &mut self.out;
        let p = procs[idx as usize].as_mut().unwrap();
        lane_of(enc, next_track, &mut p.block, group, LANE_NAMES[Lanes::Block as usize], 60, ts, end)
    }

    fn disk_lane<E: Encoder>(&mut self, enc: &mut E, d: usize, ts: u64, end: u64) -> io::Result<TrackId> {
        let group = self.disk_out(enc, d)?;
        let Out { next_track, disks, .. } = &mut self.out;
        let out = disks[d].as_mut().unwrap();
        lane_of(enc, next_track, &mut out.lanes, group, "requests", 20, ts, end)
    }

    /// Emits one slice with the pending flows.
    fn slice<E: Encoder>(
        &mut self,
        enc: &mut E,
        track: TrackId,
        ts: u64,
        dur: u64,
        name: Name<'_>,
        args: &impl Args,
    ) -> io::Result<()> {
        self.stats.flows += self.flow_out.len() as u64;
        let s = Slice { track, ts, dur, name, flows_out: &self.flow_out, flows_in: &self.flow_in };
        enc.slice(&s, args)?;
        self.flow_out.clear();
        self.flow_in.clear();
        self.stats.slices += 1;
        self.stats.saw(ts);
        Ok(())
    }

    /// An instant on process `idx`'s own track (exec, exit, its marks).
    fn process_instant<E: Encoder>(
        &mut self,
        enc: &mut E,
        idx: ProcIdx,
        ts: u64,
        name: &str,
        args: &impl Args,
    ) -> io::Result<()> {
        let g = self.proc_group(enc, idx)?;
        self.stats.instants += 1;
        self.stats.saw(ts);
        enc.instant(g, ts, Name::Str(name), args)
    }

    /// The main threads' waits for the other ranks that began by `upto`,
    /// on their tracks (the process as it is then: its pid's incarnation).
    fn collective_waits<E: Encoder>(&mut self, enc: &mut E, upto: u64) -> io::Result<()> {
        while let Some(&w) = self.run.collective_waits.get(self.next_wait) {
            if w.from > upto {
                break;
            }
            self.next_wait += 1;
            let (from, to) = self.range;
            if !self.filter.keeps_pid(w.pid) || !self.filter.meets(w.from, w.to) || w.to < from || w.from >= to {
                continue;
            }
            let Some(idx) = self.tracker.known(w.pid) else { continue };
            let track = self.thread_lane(enc, idx, w.pid, w.from, w.to)?;
            let name = Name::Str(crate::annotate::COLLECTIVE_WAIT);
            self.slice(enc, track, w.from, w.to.saturating_sub(w.from), name, &crate::args::NoArgs)?;
        }
        Ok(())
    }

    /// Converts one record (or skips it when the filter does).
    pub fn record<E: Encoder>(&mut self, enc: &mut E, f: &Frame<'_>, rec: &Record) -> io::Result<()> {
        let idx = self.tracker.observe(rec);
        let mapped = self.maps.apply(f, rec);
        let ts = rec.ts();
        if self.run.collective_waits.get(self.next_wait).is_some_and(|w| w.from <= ts) {
            self.collective_waits(enc, ts)?;
        }
        if self.pending_count > 0 {
            self.flush_pending(enc, ts)?;
        }
        let keep_pid = match rec {
            // A switch between two traced processes shows if either is kept;
            // one between untraced tasks (followed after a traced thread
            // handed them the CPU) unless only some processes are.
            Record::SchedSwitch(r) if r.traced == 0 => self.filter.pids.is_none(),
            Record::SchedSwitch(r) => {
                (r.traced & sched::PREV != 0 && self.filter.keeps_pid(r.prev_pid))
                    || (r.traced & sched::NEXT != 0 && self.filter.keeps_pid(r.next_pid))
            }
            _ => rec.owner().is_none_or(|p| self.filter.keeps_pid(p)),
        };
        if let Record::Counter(c) = rec {
            self.remember(f, c);
        }
        let keep_ts = self.filter.keeps_ts(ts);
        if keep_ts && self.carry_pending {
            self.carry_pending = false;
            self.carry(enc)?;
        }
        if !(keep_ts && keep_pid) {
            // A call left out: requests held for it go alone.
            if let Some((tid, n)) = syscall_blocks(rec) {
                self.syscall_written(enc, tid, ts, n, false)?;
            }
        }
        if !keep_ts {
            // Disk counters see every request, so in-flight values are right
            // at the window's edge; they are written only inside it.
            if let Record::Block(b) = rec {
                let d = self.disk_index(f, b);
                let (read, write) = (b.op == BlockOp::Read, b.op == BlockOp::Write);
                self.disks[d].counters.add(b.ts, b.end_ts(), b.bytes, read, write, &mut self.samples);
                self.samples.clear();
            }
            return Ok(());
        }
        // Block requests count towards the disk's counters whoever made them.
        if !keep_pid && !matches!(rec, Record::Block(_)) {
            return Ok(());
        }
        self.stats.records += 1;
        match event::split(rec) {
            Err(NotCall::Fork(r)) if !r.thread => {
                if let Some(i) = idx {
                    let args = FnArgs(|s: &mut dyn crate::ArgSink| s.uint(ArgKey::Parent, u64::from(r.parent_pid)));
                    self.process_instant(enc, i, r.ts, &format!("started (fork of {})", r.parent_pid), &args)?;
                }
            }
            // A rank's variables name its process (the model's roles).
            Err(NotCall::Fork(_) | NotCall::Comm(_) | NotCall::Env(_)) => {}
            // Shown in the args of the calls made from them.
            Err(NotCall::PyFrame(_) | NotCall::PyInterp(_)) => {}
            Err(NotCall::Exec(r)) => {
                if let Some(idx) = idx {
                    let (argv, filename) = (f.str(r.argv), f.str(r.filename));
                    let args = FnArgs(|s: &mut dyn crate::ArgSink| {
                        s.str(ArgKey::Path, filename);
                        s.argv(ArgKey::Command, argv);
                    });
                    self.process_instant(enc, idx, r.ts, &labels::exec_instant(filename), &args)?;
                }
            }
            Err(NotCall::Exit(r)) => {
                if let (Some(i), true) = (idx, r.process_exit) {
                    let status = labels::describe_status(r.status);
                    self.process_instant(enc, i, r.ts, &status, &NoArgs)?;
                }
            }
            Ok(call) => {
                if let Some(i) = idx {
                    self.call(enc, f, i, call)?;
                }
            }
            Err(NotCall::GpuCount(r)) => {
                if let Some(i) = idx {
                    self.gpu_count(enc, i, r)?;
                }
            }
            Err(NotCall::IoSummary(r)) => {
                if let Some(i) = idx {
                    self.io_summary(enc, f, i, r)?;
                }
            }
            Err(NotCall::Lost(r)) => self.lost(enc, r)?,
            Err(NotCall::Block(r)) => self.block(enc, f, idx, r)?,
            // Not a number (GPM's NaN in logs of older recorders): not drawn.
            Err(NotCall::Counter(r)) if !r.value.is_finite() => {}
            Err(NotCall::Counter(r)) => self.counter(enc, f, idx, r)?,
            // Training phases are drawn from the survey when a file begins.
            Err(NotCall::Phase(_)) => {}
            Err(NotCall::PageCache(r)) => {
                if let (Some(i), true) = (idx, r.during.is_storage_read()) {
                    self.rates.add(i, Rate::Storage, r.ts, r.bytes, &mut self.rate_samples);
                    self.emit_rates(enc)?;
                }
            }
            // The kernel's own I/O counters: checked in `stats`, not drawn.
            Err(NotCall::IoAccounting(_)) => {}
            Err(NotCall::SchedSwitch(r)) => {
                self.stats.sched_events += 1;
                self.stats.saw(r.ts);
                // `idx` is the traced side's, the outgoing one when both are.
                let prev = r.traced & sched::PREV != 0;
                match (prev, idx) {
                    (true, Some(i)) if self.filter.keeps_pid(r.prev_pid) => self.sched_thread(enc, i, r.prev_tid)?,
                    (true, _) => {}
                    (false, _) => self.other_task(enc, r.prev_tid, f.str(r.prev_comm))?,
                }
                if r.traced & sched::NEXT == 0 {
                    self.other_task(enc, r.next_tid, f.str(r.next_comm))?;
                } else if self.filter.keeps_pid(r.next_pid) {
                    let next_idx = if prev { self.tracker.known(r.next_pid) } else { idx };
                    if let Some(i) = next_idx {
                        self.sched_thread(enc, i, r.next_tid)?;
                    }
                }
                self.join_cpu_chain(enc, f, r)?;
                enc.sched_switch(&SwitchEvent {
                    ts: r.ts,
                    cpu: r.cpu,
                    prev_tid: r.prev_tid,
                    prev_comm: f.str(r.prev_comm),
                    prev_prio: r.prev_prio,
                    prev_state: r.prev_state.kernel_bits(),
                    next_tid: r.next_tid,
                    next_comm: f.str(r.next_comm),
                    next_prio: r.next_prio,
                    prev_call: r.prev_call.name(),
                })?;
            }
            Err(NotCall::SchedWake(r)) if r.op == WakeOp::Waking => {
                self.stats.sched_events += 1;
                self.stats.saw(r.ts);
                if let Some(i) = idx {
                    self.sched_thread(enc, i, r.tid)?;
                }
                // An interrupt is a waker of its own, never the task it cut into.
                let waker_tid = match interrupt_waker(r.by) {
                    Some((tid, name)) => {
                        let tid = global_pid(host_of(r.tid), tid);
                        self.other_task(enc, tid, name.as_bytes())?;
                        tid
                    }
                    None if r.traced & sched::WAKER == 0 => {
                        self.other_task(enc, r.waker_tid, b"")?;
                        r.waker_tid
                    }
                    None => r.waker_tid,
                };
                enc.sched_waking(&WakingEvent {
                    ts: r.ts,
                    cpu: r.cpu,
                    waker_tid,
                    tid: r.tid,
                    comm: f.str(r.comm),
                    prio: r.prio,
                    target_cpu: r.target_cpu,
                })?;
            }
            // Migrations show in the switches (a thread's CPU changes).
            Err(NotCall::SchedWake(_)) => {}
            // Summed scheduling (summary detail) has no switch to draw: it
            // is in the verdict and the stats.
            Err(NotCall::SchedSpan(_)) => {}
            Err(NotCall::Mapping(r)) => {
                if let Some(i) = idx {
                    self.mapping(enc, f, i, r, &mapped)?;
                }
            }
            Err(NotCall::MajorFault(r)) => {
                if let Some(i) = idx {
                    self.major_fault(enc, i, r)?;
                }
            }
            Err(NotCall::GpuEvent(r)) => self.gpu_event(enc, f, r)?,
            Err(NotCall::Mark(r)) => {
                // Run-wide (MLLOG) marks too; a process's own are on its track.
                if let (Some(i), true) = (idx, local_pid(r.pid) != 0) {
                    let (name, value) = (f.str_lossy(r.name), f.str_lossy(r.value));
                    let label = labels::mark(&name, &value);
                    let args = event::MarkArgs { rank: r.rank, value: &value };
                    self.process_instant(enc, i, r.ts, &label, &args)?;
                }
            }
        }
        Ok(())
    }

    fn lost<E: Encoder>(&mut self, enc: &mut E, r: &Lost) -> io::Result<()> {
        self.lost_total += r.count;
        self.stats.lost_events += r.count;
        self.lost_marker(enc, r.ts, r.kind, r.count, self.lost_total)
    }

    /// The running total of lost events, and a marker where `count` were lost.
    pub(crate) fn lost_marker<E: Encoder>(
        &mut self,
        enc: &mut E,
        ts: u64,
        kind: LostKind,
        count: u64,
        total: u64,
    ) -> io::Result<()> {
        let (counter, markers) = match self.out.lost {
            Some(t) => t,
            None => {
                // The group's own row is the running total.
                let c = self.group(enc, LOST_GROUP)?;
                let m = self.out.id();
                enc.track(&Track { id: m, parent: Some(c), name: "where", rank: 1, kind: TrackKind::Slices })?;
                self.out.lost = Some((c, m));
                (c, m)
            }
        };
        enc.counter(counter, ts, total as f64)?;
        self.stats.counters += 1;
        // And a marker where it happened, named for what was lost.
        let name = labels::lost(count, kind);
        self.stats.instants += 1;
        self.stats.saw(ts);
        enc.instant(markers, ts, Name::Str(&name), &FnArgs(|s: &mut dyn crate::ArgSink| s.uint(ArgKey::Lost, count)))
    }
}

/// The counter a machine group's own row shows: its name in the group
/// (its value comes from the counter of that name, or is computed: CPU
/// busy, a disk's requests in flight, lost events) and unit.
pub fn header(group: &str) -> Option<(&'static str, Unit)> {
    match group {
        "CPU" => Some(("busy", Unit::Named("%"))),
        "Memory" => Some(("used", Unit::Bytes)),
        LOST_GROUP => Some(("total", Unit::Count)),
        // NVML has no utilisation for a MIG device: its GPU instance's SM
        // activity (GPM) says whether it is busy.
        g if g.starts_with("GPU ") && g.contains(" MIG ") => Some(("SM active", Unit::Named("%"))),
        g if g.starts_with("GPU ") => Some((mltrace_log::GPU_UTILISATION, Unit::Named("%"))),
        g if g.starts_with("Disk ") => Some(("in flight", Unit::Count)),
        _ => None,
    }
}

/// A GPU's utilisation under the name logs had before it said what it is.
fn is_old_gpu_header(group: &str, name: &str) -> bool {
    group.starts_with("GPU ") && name == mltrace_log::GPU_UTILISATION_OLD
}

/// Order of a machine counter in its group: the useful ones first.
fn child_rank(group: &str, name: &str) -> i32 {
    let order: &[&str] = match group {
        "CPU" => &["usr", "sys", "iowait"],
        g if g.starts_with("Disk ") => &["read", "write", "read IOPS", "write IOPS", "utilisation"],
        g if g.starts_with("GPU ") => &[
            "SM active",
            "SM occupancy",
            "tensor active",
            "DRAM bandwidth used",
            "memory",
            "framebuffer used",
            "power",
        ],
        g if g.starts_with("Network ") || g.starts_with("InfiniBand ") => &["rx", "tx", "rx packets", "tx packets"],
        "Memory" => &["page cache", "dirty", "writeback", "io pressure"],
        _ => &[],
    };
    order.iter().position(|&n| n == name).map_or(10, |i| i as i32)
}

/// A call's thread and how many block requests it started.
fn syscall_blocks(rec: &Record) -> Option<(u32, u32)> {
    let c = event::split(rec).ok()?;
    Some((c.timing().0, c.block_reqs()?))
}

/// Takes the first of `lanes` free at `ts`, busy until `end`.
#[inline]
fn take_free(lanes: &mut [Lane], ts: u64, end: u64) -> Option<TrackId> {
    let slack = rounding_slack(ts);
    let l = lanes.iter_mut().find(|l| l.max_end.saturating_add(slack) < ts)?;
    l.max_end = end;
    Some(l.track)
}

/// How far apart two slices of a lane must be so that readers which turn
/// `ts` into a double of µs and back (Chrome JSON) cannot make them
/// overlap: 0 below 2^53 ns (104 days of uptime), where they are exact;
/// above (realtime-clock imports), the two roundings' ulps.
#[inline]
pub fn rounding_slack(ts: u64) -> u64 {
    if ts < 1 << 53 {
        return 0;
    }
    let ulp = |x: f64| f64::from_bits(x.to_bits() + 1) - x;
    let us = ts as f64 / 1000.0;
    (ulp(us) * 1000.0 + ulp(ts as f64)).ceil() as u64 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_covers_double_rounding() {
        assert_eq!(rounding_slack((1 << 53) - 1), 0);
        assert_eq!(rounding_slack(7_000_000_123_456), 0);
        // Realtime-clock imports: ulp of 1.66e15 µs (0.25) plus of 1.66e18 ns (256).
        assert_eq!(rounding_slack(1_661_659_198_374_991_713), 507);
        for ts in [1u64 << 53, 1_661_659_198_374_991_713, 1_661_659_198_374_991_999] {
            let read = format!("{}.{:03}", ts / 1000, ts % 1000).parse::<f64>().unwrap() * 1000.0;
            assert!((read as i128 - ts as i128).abs() <= i128::from(rounding_slack(ts) / 2), "{ts}");
        }
    }
}
