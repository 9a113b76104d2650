//! Log records -> Chrome trace events, streamed, with the content and
//! layout of the Perfetto export (`mltrace_perfetto::export`).
//!
//! Chrome JSON has no tracks, only (pid, tid). A process's `reads`,
//! `writes`, `opens` and `block I/O` tracks become threads of its pid with
//! made-up tids, named by `thread_name` metadata; operations that overlap
//! in time go to several lanes (threads) of one name, chosen as the
//! Perfetto exporter chooses its lanes, so slices on one thread never
//! overlap. What is not a process there (disks, counter groups, training
//! phases, lost events) is a pseudo-process here, with a pid above any
//! real one.
//!
//! Memory is bounded by the live processes and lanes, not by the log;
//! phases and pid-0 (MLLOG) marks are kept to the end, as in the Perfetto
//! export; a process's marks are instants on its own track.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Read, Seek, Write};

use mltrace_log::labels::{self, DiskIds, Outcome, NAME_MAX};
use mltrace_log::names;
use mltrace_log::*;
use mltrace_perfetto::disk_counters::{DiskCounters, Sample};
use serde_json::json;

use crate::json::Sink;
use crate::naming;

/// Pseudo-processes get pids from here (Linux pids stay below 2^22).
const PSEUDO_PID: u32 = 0x4000_0000;
/// Lane threads get tids from here: unique in the whole trace, as
/// trace_processor treats a tid seen under two pids as a new thread.
const LANE_TID: u32 = 0x5000_0000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lanes {
    Reads = 0,
    Writes = 1,
    Opens = 2,
    Block = 3,
}

const LANE_NAMES: [&str; 4] = ["reads", "writes", "opens", "block I/O"];

const LOST_GROUP: &str = "mltrace: lost events";
const LOST_TRACK: &str = "mltrace: lost events (total)";

/// Whose lanes a slice goes on: a process's, or a disk's (by its
/// [`DiskIds`] index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Proc(u32, Lanes),
    Disk(usize),
}

struct Lane {
    tid: u32,
    /// End of the latest slice: a new slice fits only if it starts after
    /// it (by [`rounding_slack`]).
    max_end: u64,
}

struct Process {
    /// The name is written when the first event needs it, by which time
    /// an exec has usually named the process.
    described: bool,
    name: String,
    has_cmdline: bool,
    lanes: [Vec<Lane>; 4],
}

struct Disk {
    dev: u32,
    name: Vec<u8>,
    pid: u32,
    lanes: Vec<Lane>,
    counters: DiskCounters,
}

/// Where a counter's samples go, and the event name and arg key that
/// make trace_processor name its track as the Perfetto export does.
struct CounterTrack {
    pid: u32,
    name: String,
    key: String,
}

impl CounterTrack {
    fn new(pid: u32, track: &str, unit: &str) -> Self {
        let (name, key) = naming::counter_parts(track, unit);
        CounterTrack { pid, name: name.into(), key: key.into() }
    }
}

/// Slice names formatted once per (kind, key); cleared when this large.
const MAX_NAMES: usize = 4096;

/// What an export produced.
#[derive(Clone, Debug, Default)]
pub struct ExportStats {
    pub records: u64,
    /// Complete ("X") events: syscalls, block requests, phases.
    pub slices: u64,
    /// Counter ("C") samples.
    pub counters: u64,
    /// Flow starts ("s"), as the Perfetto export counts them; each has an
    /// end ("f") on the request it led to, when the log has that request.
    pub flows: u64,
    pub processes: u64,
    /// Every JSON event, metadata included.
    pub events: u64,
    pub bytes: u64,
    pub lost_events: u64,
    pub block_requests: u64,
    /// In-flight counter changes that arrived after later ones were written.
    pub late_counter_changes: u64,
}

/// A flow id, never 0 (splitmix64 of the parts), as the Perfetto export makes them.
fn flow_id(parts: [u64; 4]) -> u64 {
    let mut h: u64 = 0x6d6c_7472_6163_6521;
    for p in parts {
        h ^= p;
        h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h = z ^ (z >> 31);
    }
    h | 1
}

/// From a syscall to the k-th block request it started.
fn flow_from_syscall(tid: u32, ts: u64, k: u32) -> u64 {
    flow_id([1, u64::from(tid), ts, u64::from(k)])
}

/// From a process's copy of a block request to the disk's.
fn flow_to_disk(b: &Block) -> u64 {
    flow_id([2, u64::from(b.dev) << 32 | u64::from(b.tid), b.sector, b.end_ts()])
}

/// How far apart two slices of a lane must be so that readers, which turn
/// `ts` into a double of µs and back, cannot make them overlap: 0 below
/// 2^53 ns (104 days of uptime), where trace_processor reads them exactly,
/// so lanes are the Perfetto export's; above (realtime-clock imports), the
/// two roundings' ulps.
fn rounding_slack(ts: u64) -> u64 {
    if ts < 1 << 53 {
        return 0;
    }
    let ulp = |x: f64| f64::from_bits(x.to_bits() + 1) - x;
    let us = ts as f64 / 1000.0;
    (ulp(us) * 1000.0 + ulp(ts as f64)).ceil() as u64 + 1
}

/// A slice's name: formatted on first use of its key, or given.
enum Name<'a> {
    Cached(u8, u64, &'a dyn Fn() -> String),
    Given(&'a str),
}

type Args<'a, W> = &'a mut dyn FnMut(&mut Sink<W>) -> io::Result<()>;

/// Converts records one by one: [`Exporter::start`], [`Exporter::record`]
/// for each, [`Exporter::finish`]; or all of it with [`export`].
pub struct Exporter<W: Write> {
    sink: Sink<W>,
    header: Header,
    procs: HashMap<u32, Process>,
    /// Names of exited processes, for their late records.
    exited: labels::ExitedNames,
    disks: Vec<Disk>,
    disk_ids: DiskIds,
    next_pid: u32,
    next_tid: u32,
    samples: Vec<Sample>,
    /// Flow ids for the next slice: leaving it, and ending on it.
    flow_out: Vec<u64>,
    flow_in: Vec<u64>,
    /// Counter tracks by "group\0name\0pid", and group pseudo-processes by name.
    counters: HashMap<String, CounterTrack>,
    groups: HashMap<String, u32>,
    /// Each core's latest iowait sample, to pair with its idle sample.
    core_iowait: HashMap<u32, (u64, f64)>,
    /// The recording sampled /proc/diskstats: no throughput from requests.
    diskstats_sampled: bool,
    /// The lost-events pseudo-process and its marker thread.
    lost: Option<(u32, u32)>,
    names: HashMap<(u8, u64), String>,
    /// Reused for counter keys and block args.
    key: String,
    who: String,
    flags: String,
    phases: Vec<(Phase, String)>,
    marks: Vec<(Mark, String, String)>,
    pub stats: ExportStats,
}

impl<W: Write> Exporter<W> {
    pub fn new(out: W, header: &Header) -> Self {
        Exporter {
            sink: Sink::new(out),
            header: header.clone(),
            procs: HashMap::new(),
            exited: labels::ExitedNames::default(),
            disks: Vec::new(),
            disk_ids: DiskIds::default(),
            next_pid: PSEUDO_PID,
            next_tid: LANE_TID,
            samples: Vec::new(),
            flow_out: Vec::new(),
            flow_in: Vec::new(),
            counters: HashMap::new(),
            groups: HashMap::new(),
            core_iowait: HashMap::new(),
            diskstats_sampled: header.probes.iter().any(|p| p.subsystem == "counters"),
            lost: None,
            names: HashMap::new(),
            key: String::new(),
            who: String::new(),
            flags: String::new(),
            phases: Vec::new(),
            marks: Vec::new(),
            stats: ExportStats::default(),
        }
    }

    /// Opens the file; the header and its clock anchor go in `metadata`,
    /// so that `ts` can be turned into wall-clock time.
    pub fn start(&mut self) -> io::Result<()> {
        let h = &self.header;
        let meta = json!({
            "source": "mltrace",
            "ts": "µs of the log's clock (header.clock, CLOCK_BOOTTIME when recorded); \
                   wall-clock ns = ts * 1000 - start.boottime_ns + start.realtime_ns",
            "start": h.start,
            "header": h,
        });
        self.sink.begin_file(&meta)
    }

    fn pseudo_process(&mut self, name: &str) -> io::Result<u32> {
        let pid = self.next_pid;
        self.next_pid += 1;
        self.sink.meta_name(pid, pid, "process_name", name)?;
        Ok(pid)
    }

    fn thread(&mut self, pid: u32, name: &str, sort: i64) -> io::Result<u32> {
        let tid = self.next_tid;
        self.next_tid += 1;
        self.sink.meta_name(pid, tid, "thread_name", name)?;
        self.sink.meta_sort(pid, tid, "thread_sort_index", sort)?;
        Ok(tid)
    }

    fn new_process(&mut self, pid: u32, name: String, has_cmdline: bool) {
        self.procs.insert(pid, Process { described: false, name, has_cmdline, lanes: Default::default() });
        self.stats.processes += 1;
    }

    fn ensure_process(&mut self, pid: u32) -> io::Result<()> {
        if !self.procs.contains_key(&pid) {
            self.new_process(pid, self.exited.name_of(pid), false);
        }
        let p = self.procs.get_mut(&pid).unwrap();
        if !p.described {
            p.described = true;
            self.sink.meta_name(pid, pid, "process_name", &p.name)?;
        }
        Ok(())
    }

    fn lanes_mut(&mut self, owner: Owner) -> &mut Vec<Lane> {
        match owner {
            Owner::Proc(pid, kind) => &mut self.procs.get_mut(&pid).unwrap().lanes[kind as usize],
            Owner::Disk(d) => &mut self.disks[d].lanes,
        }
    }

    /// Picks (or creates) a lane of `owner`'s free at `ts`: (pid, tid).
    fn lane(&mut self, owner: Owner, ts: u64, end: u64) -> io::Result<(u32, u32)> {
        let (pid, name, rank) = match owner {
            Owner::Proc(pid, kind) => {
                self.ensure_process(pid)?;
                (pid, LANE_NAMES[kind as usize], kind as i64)
            }
            Owner::Disk(d) => (self.disks[d].pid, "requests", 0),
        };
        let slack = rounding_slack(ts);
        let lanes = self.lanes_mut(owner);
        if let Some(l) = lanes.iter_mut().find(|l| l.max_end.saturating_add(slack) < ts) {
            l.max_end = end;
            return Ok((pid, l.tid));
        }
        let tid = self.thread(pid, name, rank)?;
        self.lanes_mut(owner).push(Lane { tid, max_end: end });
        Ok((pid, tid))
    }

    /// Emits one slice with the pending flows; `args` writes its args.
    fn slice(&mut self, owner: Owner, ts: u64, dur: u64, name: Name<'_>, args: Args<'_, W>) -> io::Result<()> {
        let (pid, tid) = self.lane(owner, ts, ts.saturating_add(dur))?;
        let name: &str = match name {
            Name::Given(s) => s,
            Name::Cached(kind, key, make) => {
                if self.names.len() >= MAX_NAMES && !self.names.contains_key(&(kind, key)) {
                    self.names.clear();
                }
                self.names.entry((kind, key)).or_insert_with(make)
            }
        };
        let s = &mut self.sink;
        s.begin('X', pid, tid, Some(ts))?;
        s.dur(dur)?;
        s.name(name)?;
        args(s)?;
        s.end()?;
        for &id in &self.flow_out {
            s.flow('s', pid, tid, ts, id)?;
        }
        // Ends go inside the slice, not at its start: the importer takes
        // events of one ts in file order, and a request that started in its
        // call's first ns has its record (so its flow end) written first.
        let mid = ts + dur / 2;
        for &id in &self.flow_in {
            s.flow('f', pid, tid, mid, id)?;
        }
        self.stats.flows += self.flow_out.len() as u64;
        self.flow_out.clear();
        self.flow_in.clear();
        self.stats.slices += 1;
        Ok(())
    }

    /// An instant on the process itself (exec, exit, a process's marks).
    fn process_instant(&mut self, pid: u32, ts: u64, name: &str, args: Args<'_, W>) -> io::Result<()> {
        self.ensure_process(pid)?;
        let s = &mut self.sink;
        s.begin('i', pid, pid, Some(ts))?;
        s.raw("s", "p")?;
        s.name(name)?;
        args(s)?;
        s.end()
    }

    fn counter_sample(&mut self, pid: u32, name: &str, key: &str, ts: u64, value: f64) -> io::Result<()> {
        let s = &mut self.sink;
        s.begin('C', pid, pid, Some(ts))?;
        s.name(name)?;
        s.arg_f64(key, value)?;
        s.end()?;
        self.stats.counters += 1;
        Ok(())
    }

    fn lost(&mut self, r: &Lost) -> io::Result<()> {
        self.stats.lost_events += r.count;
        let (pid, tid) = match self.lost {
            Some(l) => l,
            None => {
                let pid = self.pseudo_process(LOST_GROUP)?;
                let tid = self.thread(pid, LOST_TRACK, 0)?;
                self.lost = Some((pid, tid));
                (pid, tid)
            }
        };
        let (name, key) = naming::counter_parts(LOST_TRACK, "count");
        self.counter_sample(pid, name, key, r.ts, self.stats.lost_events as f64)?;
        // And a marker where it happened, named for what was lost.
        let s = &mut self.sink;
        s.begin('i', pid, tid, Some(r.ts))?;
        s.raw("s", "t")?;
        s.name(&labels::lost(r.count, r.kind))?;
        s.arg_u64("lost", r.count)?;
        s.end()
    }

    /// Converts one record.
    pub fn record(&mut self, f: &Frame<'_>, rec: &Record) -> io::Result<()> {
        self.stats.records += 1;
        match *rec {
            Record::Fork(r) => {
                if !r.thread {
                    let (name, has_cmdline) = match self.procs.get(&r.parent_pid) {
                        Some(p) => (labels::fork_name(&p.name, r.parent_pid), p.has_cmdline),
                        // The recorded command itself: named by its command line.
                        None if r.pid == self.header.root_pid => {
                            (names::command_name(&self.header.command, NAME_MAX), !self.header.command.is_empty())
                        }
                        None => (labels::pid_name(r.pid), false),
                    };
                    self.new_process(r.pid, name, has_cmdline);
                }
            }
            Record::Exec(r) => {
                let (argv, filename) = (f.str(r.argv), f.str(r.filename));
                let name = labels::exec_name(argv, filename);
                match self.procs.get_mut(&r.pid) {
                    // Already shown under its old program: named anew. (Chrome
                    // JSON has one name per pid; the importer keeps the last.)
                    Some(p) if p.described && p.name != name => {
                        self.procs.remove(&r.pid);
                        self.new_process(r.pid, name, true);
                    }
                    Some(p) => {
                        p.name = name;
                        p.has_cmdline = true;
                    }
                    None => self.new_process(r.pid, name, true),
                }
                self.process_instant(r.pid, r.ts, &labels::exec_instant(filename), &mut |s| {
                    s.arg_bytes("path", filename)?;
                    s.arg_argv("command", argv)
                })?;
            }
            Record::Comm(r) => {
                // A process never exec'd in the log (started before it, or
                // imported: known only by its comm) is at least named by it.
                if r.tid == r.pid {
                    match self.procs.get_mut(&r.pid) {
                        Some(p) => {
                            if !p.has_cmdline && !p.described {
                                p.name = f.str_lossy(r.comm).into_owned();
                            }
                        }
                        None => self.new_process(r.pid, f.str_lossy(r.comm).into_owned(), false),
                    }
                }
            }
            Record::Exit(r) => {
                if r.process_exit {
                    self.process_instant(r.pid, r.ts, &labels::describe_status(r.status), &mut |_| Ok(()))?;
                    if let Some(p) = self.procs.remove(&r.pid) {
                        self.exited.remember(r.pid, p.name);
                    }
                }
            }
            Record::Io(r) => self.io(f, &r)?,
            Record::Open(r) => self.open(f, &r)?,
            Record::Close(r) => self.close(f, &r)?,
            Record::Transfer(r) => self.transfer(f, &r)?,
            Record::Lost(r) => self.lost(&r)?,
            Record::Block(r) => self.block(f, &r)?,
            Record::Counter(r) => self.counter(f, &r)?,
            Record::Phase(r) => self.phases.push((r, f.str_lossy(r.name).into_owned())),
            Record::Mark(r) => {
                let (name, value) = (f.str_lossy(r.name), f.str_lossy(r.value));
                if r.pid == 0 {
                    self.marks.push((r, name.into_owned(), value.into_owned()));
                } else {
                    // A process's own event (an imported mmap, unlink...): on its track.
                    self.process_instant(r.pid, r.ts, &labels::mark(&name, &value), &mut |s| mark_args(s, &r, &value))?;
                }
            }
        }
        Ok(())
    }

    fn io(&mut self, f: &Frame<'_>, r: &Io) -> io::Result<()> {
        let kind = if r.op.is_write() { Lanes::Writes } else { Lanes::Reads };
        let (op, ret) = (r.op, r.ret);
        let key = ((op as u64) << 56) ^ (ret as u64 & ((1 << 56) - 1));
        let make = move || labels::syscall(op.name(), ret);
        let path = f.str(r.path);
        let r = *r;
        self.flow_out.extend((0..r.block_reqs).map(|k| flow_from_syscall(r.tid, r.ts, k)));
        self.slice(Owner::Proc(r.pid, kind), r.ts, r.dur, Name::Cached(0, key, &make), &mut |s| {
            s.arg_bytes("path", path)?;
            s.arg_i64("fd", i64::from(r.fd))?;
            if r.offset_src != OffsetSrc::None {
                s.arg_u64("offset", r.offset)?;
            }
            s.arg_u64("requested", r.requested)?;
            returned(s, r.ret)?;
            s.arg_i64("tid", i64::from(r.tid))?;
            if r.kind != FileKind::Regular {
                s.arg_str("file kind", r.kind.name())?;
            }
            Ok(())
        })
    }

    fn open(&mut self, f: &Frame<'_>, r: &Open) -> io::Result<()> {
        let (passed, abs) = (f.str(r.path), f.str(r.abs_path));
        let name = labels::open(r.op, abs, r.ret);
        let r = *r;
        self.flow_out.extend((0..r.block_reqs).map(|k| flow_from_syscall(r.tid, r.ts, k)));
        self.slice(Owner::Proc(r.pid, Lanes::Opens), r.ts, r.dur, Name::Given(&name), &mut |s| {
            s.arg_bytes("path", passed)?;
            s.arg_bytes("absolute path", abs)?;
            s.arg_str("flags", &names::open_flags(r.flags))?;
            if r.flags & 0o100 != 0 || r.flags & 0o20200000 == 0o20200000 {
                s.arg_str("mode", &format!("{:#o}", r.mode))?;
            }
            if r.dirfd != -100 {
                s.arg_i64("dirfd", i64::from(r.dirfd))?;
            }
            if let Some(fd) = outcome_args(s, r.ret)? {
                s.arg_u64("fd", fd)?;
            }
            // What was opened, unless nothing was.
            if !matches!(labels::outcome(r.ret), Outcome::Err(_)) && r.kind != FileKind::Regular {
                s.arg_str("file kind", r.kind.name())?;
            }
            s.arg_i64("tid", i64::from(r.tid))
        })
    }

    fn close(&mut self, f: &Frame<'_>, r: &Close) -> io::Result<()> {
        let path = f.str(r.path);
        let name = labels::close(path, r.ret);
        let r = *r;
        self.slice(Owner::Proc(r.pid, Lanes::Opens), r.ts, r.dur, Name::Given(&name), &mut |s| {
            s.arg_bytes("path", path)?;
            s.arg_i64("fd", i64::from(r.fd))?;
            outcome_args(s, r.ret)?;
            s.arg_i64("tid", i64::from(r.tid))
        })
    }

    fn transfer(&mut self, f: &Frame<'_>, r: &Transfer) -> io::Result<()> {
        let (op, ret) = (r.op, r.ret);
        let key = ((op as u64) << 56) ^ (ret as u64 & ((1 << 56) - 1));
        let make = move || labels::syscall(op.name(), ret);
        let (inp, outp) = (f.str(r.in_path), f.str(r.out_path));
        let r = *r;
        self.flow_out.extend((0..r.block_reqs).map(|k| flow_from_syscall(r.tid, r.ts, k)));
        self.slice(Owner::Proc(r.pid, Lanes::Reads), r.ts, r.dur, Name::Cached(1, key, &make), &mut |s| {
            s.arg_bytes("in path", inp)?;
            s.arg_bytes("out path", outp)?;
            s.arg_i64("in fd", i64::from(r.in_fd))?;
            s.arg_i64("out fd", i64::from(r.out_fd))?;
            s.arg_u64("requested", r.requested)?;
            returned(s, r.ret)?;
            s.arg_i64("tid", i64::from(r.tid))
        })
    }

    /// The disk's index in `disks`, made on first sight.
    fn disk(&mut self, b: &Block, name: &[u8]) -> io::Result<usize> {
        let (d, new) = self.disk_ids.id(b.dev, name);
        if new {
            // The same pseudo-process as the disk's sampled counters.
            let pid = self.group(&labels::disk(name, b.dev))?;
            let counters = DiskCounters::default();
            self.disks.push(Disk { dev: b.dev, name: name.to_vec(), pid, lanes: Vec::new(), counters });
        }
        Ok(d)
    }

    /// Writes the counter samples gathered for disk `d`.
    fn emit_samples(&mut self, d: usize) -> io::Result<()> {
        let pid = self.disks[d].pid;
        let mut samples = std::mem::take(&mut self.samples);
        for smp in &samples {
            let (track, unit, ts, v) = match *smp {
                Sample::InFlight { ts, value } => ("requests in flight", "count", ts, value as f64),
                // Throughput from the requests themselves, unless the
                // recording sampled /proc/diskstats, which says the same.
                _ if self.diskstats_sampled => continue,
                Sample::ReadRate { ts, bytes_per_s } => ("read", "B/s", ts, bytes_per_s),
                Sample::WriteRate { ts, bytes_per_s } => ("write", "B/s", ts, bytes_per_s),
            };
            let (name, key) = naming::counter_parts(track, unit);
            self.counter_sample(pid, name, key, ts, v)?;
        }
        samples.clear();
        self.samples = samples;
        Ok(())
    }

    fn block(&mut self, f: &Frame<'_>, b: &Block) -> io::Result<()> {
        self.stats.block_requests += 1;
        let disk_name = f.str(b.disk);
        let d = self.disk(b, disk_name)?;
        let dur = b.queue + b.device;
        let (op, bytes, failed) = (b.op, b.bytes, b.error != 0);
        let key = ((op as u64) << 56) ^ (u64::from(failed) << 55) ^ (bytes & ((1 << 55) - 1));
        let make = move || labels::block(op, bytes, failed);
        let traced = b.flags & blk::TRACED != 0;
        let traced_name = if traced { self.procs.get(&b.pid).map(|p| p.name.as_str()) } else { None };
        labels::block_who(&mut self.who, b, f.str(b.comm), traced_name);
        labels::block_flags(&mut self.flags, b.flags);
        let (who, flags) = (std::mem::take(&mut self.who), std::mem::take(&mut self.flags));
        let b = *b;
        let mut args = |s: &mut Sink<W>| {
            s.arg_u64("sector", b.sector)?;
            s.arg_u64("bytes", b.bytes)?;
            s.arg_u64("queue ns", b.queue)?;
            s.arg_u64("device ns", b.device)?;
            s.arg_str("process", &who)?;
            if traced {
                s.arg_i64("tid", i64::from(b.tid))?;
            }
            if !flags.is_empty() {
                s.arg_str("request flags", &flags)?;
            }
            if b.error != 0 {
                s.arg_i64("status", i64::from(b.error))?;
            }
            s.arg_bytes("disk", disk_name)
        };
        if traced {
            if b.cause_ts != 0 {
                self.flow_in.push(flow_from_syscall(b.tid, b.cause_ts, b.cause_idx));
            }
            self.flow_out.push(flow_to_disk(&b));
            self.slice(Owner::Proc(b.pid, Lanes::Block), b.ts, dur, Name::Cached(2, key, &make), &mut args)?;
            self.flow_in.push(flow_to_disk(&b));
        }
        self.slice(Owner::Disk(d), b.ts, dur, Name::Cached(2, key, &make), &mut args)?;
        (self.who, self.flags) = (who, flags);
        let (read, write) = (b.op == BlockOp::Read, b.op == BlockOp::Write);
        self.disks[d].counters.add(b.ts, b.end_ts(), b.bytes, read, write, &mut self.samples);
        self.emit_samples(d)
    }

    /// A pseudo-process for a counter group (CPU, Memory, GPU 0...), made once.
    fn group(&mut self, name: &str) -> io::Result<u32> {
        if let Some(&pid) = self.groups.get(name) {
            return Ok(pid);
        }
        let pid = self.pseudo_process(name)?;
        self.groups.insert(name.to_string(), pid);
        Ok(pid)
    }

    /// Per-core counters (group `CPU n`) become one "busy" track per core,
    /// 100 - idle - iowait, in a `CPU per core (busy %)` pseudo-process, as
    /// the Perfetto export does; the other per-core columns are left out.
    fn core_counter(&mut self, c: &Counter, core: u32, name: &str) -> io::Result<()> {
        match name {
            "iowait" => {
                self.core_iowait.insert(core, (c.ts, c.value));
                Ok(())
            }
            "idle" => {
                let iowait = match self.core_iowait.get(&core) {
                    Some(&(ts, v)) if ts == c.ts => v,
                    _ => 0.0,
                };
                let width = self.header.cpu_count.max(1).saturating_sub(1).to_string().len();
                let mut key = std::mem::take(&mut self.key);
                key.clear();
                let _ = write!(key, "CPU\0per core\0{core}");
                if !self.counters.contains_key(&key) {
                    let pid = self.group("CPU per core (busy %)")?;
                    let track = CounterTrack::new(pid, &format!("CPU {core:0width$} busy"), "%");
                    self.counters.insert(key.clone(), track);
                }
                let r = self.counter_value(&key, c.ts, (100.0 - c.value - iowait).max(0.0));
                self.key = key;
                r
            }
            _ => Ok(()),
        }
    }

    fn counter_value(&mut self, key: &str, ts: u64, value: f64) -> io::Result<()> {
        let t = &self.counters[key];
        let s = &mut self.sink;
        s.begin('C', t.pid, t.pid, Some(ts))?;
        s.name(&t.name)?;
        s.arg_f64(&t.key, value)?;
        s.end()?;
        self.stats.counters += 1;
        Ok(())
    }

    fn counter(&mut self, f: &Frame<'_>, c: &Counter) -> io::Result<()> {
        let (group, name) = (f.str_lossy(c.group), f.str_lossy(c.name));
        if c.pid == 0 {
            if let Some(core) = group.strip_prefix("CPU ").and_then(|n| n.parse::<u32>().ok()) {
                return self.core_counter(c, core, &name);
            }
        }
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        let _ = write!(key, "{group}\0{name}\0{}", c.pid);
        if !self.counters.contains_key(&key) {
            // Machine-wide counters go in their group; a process's in its process.
            let (pid, track) = if c.pid == 0 {
                (self.group(&group)?, name.to_string())
            } else {
                self.ensure_process(c.pid)?;
                let n = if group.is_empty() { name.to_string() } else { format!("{group} {name}") };
                (c.pid, n)
            };
            self.counters.insert(key.clone(), CounterTrack::new(pid, &track, c.unit.name()));
        }
        let r = self.counter_value(&key, c.ts, c.value);
        self.key = key;
        r
    }

    /// Lays out the phases, nested where they nest, on lanes of the
    /// "Training phases" pseudo-process, with the pid-0 marks beside them; the
    /// lanes are those of the Perfetto export.
    fn emit_phases(&mut self) -> io::Result<()> {
        if self.phases.is_empty() && self.marks.is_empty() {
            return Ok(());
        }
        let pid = self.group("Training phases")?;
        let mut phases = std::mem::take(&mut self.phases);
        phases.sort_by(|a, b| a.0.ts.cmp(&b.0.ts).then(b.0.dur.cmp(&a.0.dur)));
        // Each lane holds slices that nest: a stack of the open ones' ends.
        let mut lanes: Vec<(Vec<u64>, u32)> = Vec::new();
        for (p, name) in &phases {
            let (s, e) = (p.ts, p.ts + p.dur);
            let fits = |stack: &mut Vec<u64>| {
                while stack.last().is_some_and(|&end| end <= s) {
                    stack.pop();
                }
                stack.last().is_none_or(|&end| e <= end)
            };
            let lane = match lanes.iter_mut().position(|(stack, _)| fits(stack)) {
                Some(l) => l,
                None => {
                    let tid = self.thread(pid, "phases", 0)?;
                    lanes.push((Vec::new(), tid));
                    lanes.len() - 1
                }
            };
            lanes[lane].0.push(e);
            let sink = &mut self.sink;
            sink.begin('X', pid, lanes[lane].1, Some(p.ts))?;
            sink.dur(p.dur)?;
            sink.name(&labels::phase(name, p.flags))?;
            sink.arg_str("phase", p.kind.name())?;
            if p.rank >= 0 {
                sink.arg_i64("rank", i64::from(p.rank))?;
            }
            sink.end()?;
            self.stats.slices += 1;
        }
        let marks = std::mem::take(&mut self.marks);
        if !marks.is_empty() {
            let tid = self.thread(pid, "events", 1)?;
            for (m, name, value) in &marks {
                let s = &mut self.sink;
                s.begin('i', pid, tid, Some(m.ts))?;
                s.raw("s", "t")?;
                s.name(&labels::mark(name, value))?;
                mark_args(s, m, value)?;
                s.end()?;
            }
        }
        Ok(())
    }

    /// Ends the trace; the trailer (end clocks, losses) follows the events.
    pub fn finish(mut self, trailer: Option<&Trailer>) -> io::Result<(W, ExportStats)> {
        self.emit_phases()?;
        let mut order: Vec<usize> = (0..self.disks.len()).collect();
        order.sort_by(|&a, &b| (self.disks[a].dev, &self.disks[a].name).cmp(&(self.disks[b].dev, &self.disks[b].name)));
        for d in order {
            let disk = &mut self.disks[d];
            disk.counters.finish(&mut self.samples);
            self.stats.late_counter_changes += disk.counters.late;
            self.emit_samples(d)?;
        }
        let mut stats = self.stats.clone();
        stats.events = self.sink.events;
        let (out, bytes) = self.sink.end_file(&json!(trailer))?;
        stats.bytes = bytes;
        Ok((out, stats))
    }
}

/// A syscall's result args: `returned`, `errno`, or that it is unknown.
/// A syscall's result: adds `errno`, or that it is unknown, and returns
/// the value when the call succeeded (for the caller to name).
fn outcome_args<W: Write>(s: &mut Sink<W>, ret: i64) -> io::Result<Option<u64>> {
    match labels::outcome(ret) {
        Outcome::Ok(n) => return Ok(Some(n)),
        Outcome::Err(e) => s.arg_str("errno", &names::errno(e))?,
        Outcome::Unknown => s.arg_str(labels::RESULT_ARG, labels::RESULT_UNKNOWN)?,
    }
    Ok(None)
}

fn returned<W: Write>(s: &mut Sink<W>, ret: i64) -> io::Result<()> {
    match outcome_args(s, ret)? {
        Some(n) => s.arg_u64("returned", n),
        None => Ok(()),
    }
}

fn mark_args<W: Write>(s: &mut Sink<W>, m: &Mark, value: &str) -> io::Result<()> {
    s.arg_str("value", value)?;
    if m.rank >= 0 {
        s.arg_i64("rank", i64::from(m.rank))?;
    }
    Ok(())
}

/// Exports a whole log as Chrome JSON. `on_diag` receives each problem the
/// reader worked around (already described for people).
pub fn export<R: Read + Seek, W: Write>(
    reader: &mut LogReader<R>,
    out: W,
    on_diag: &mut dyn FnMut(String),
) -> io::Result<(W, ExportStats)> {
    let header = reader.header().clone();
    let mut ex = Exporter::new(out, &header);
    ex.start()?;
    loop {
        let frame = reader.next_frame().map_err(io::Error::other)?;
        let Some(mut frame) = frame else { break };
        while let Some(rec) = frame.next_record() {
            ex.record(&frame, &rec)?;
        }
        for d in reader.take_diagnostics() {
            on_diag(d.describe(&header));
        }
    }
    for d in reader.take_diagnostics() {
        on_diag(d.describe(&header));
    }
    ex.finish(reader.trailer())
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
        // A reader's value of `ts` is off by at most half the slack.
        for ts in [1u64 << 53, 1_661_659_198_374_991_713, 1_661_659_198_374_991_999] {
            let read = format!("{}.{:03}", ts / 1000, ts % 1000).parse::<f64>().unwrap() * 1000.0;
            assert!((read as i128 - ts as i128).abs() <= i128::from(rounding_slack(ts) / 2), "{ts}");
        }
    }
}
