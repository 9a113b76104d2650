//! Log records -> Perfetto TrackEvent packets, streamed.
//!
//! Layout in the UI: one group per process (`python train.py 1234`), with
//! child tracks `reads`, `writes` and `opens` (closes go with opens). Slices
//! on one track must nest, so operations that overlap in time (threads,
//! async I/O) are spread over lanes: tracks with the same name under the
//! same process, which the UI shows together. Each lane is its own packet
//! sequence whose default track is the lane, so events need no track id;
//! names and string args are interned per sequence.
//!
//! Memory is bounded by the live processes and lanes, not by the log.

// Keys are our own pids, ids and strings: a fast non-DoS-resistant hash.
use rustc_hash::FxHashMap as HashMap;
use std::io::{self, Read, Seek, Write};

use mltrace_log::labels::{self, DiskIds, Outcome, NAME_MAX};
use mltrace_log::names;
use mltrace_log::*;

use crate::disk_counters::{DiskCounters, Sample};
use crate::packets::{Arg, PacketSink, Seq};
use crate::proto::{
    clock_snapshot::Clock, counter_descriptor::Unit, trace_packet::SequenceFlags,
    track_descriptor::ChildTracksOrdering, track_event::Type, BuiltinClock, ClockSnapshot, CounterDescriptor,
    InternedData, ProcessDescriptor, TracePacket, TrackDescriptor, TrackEvent,
};
use crate::wire;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lanes {
    Reads = 0,
    Writes = 1,
    Opens = 2,
    Block = 3,
}

const LANE_NAMES: [&str; 4] = ["reads", "writes", "opens", "block I/O"];

/// Whose tracks a slice goes on: a process's, or a disk's (by its
/// [`DiskIds`] index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Proc(u32, Lanes),
    Disk(usize),
}

/// Where a slice goes: whose tracks, when.
#[derive(Clone, Copy)]
struct At {
    owner: Owner,
    ts: u64,
    dur: u64,
}

/// A disk's group: request lanes and counter tracks.
struct Disk {
    uuid: u64,
    lanes: Vec<Lane>,
    counters: DiskCounters,
    /// (uuid, sequence) of the in-flight, read and write counter tracks.
    tracks: Vec<(u64, Seq)>,
}

struct Lane {
    seq: Seq,
    /// End of the latest slice: a new slice fits only if it starts after it.
    max_end: u64,
    /// Slice-name iids by (op, size/errno) key, so names are formatted once.
    name_keys: HashMap<u64, u64>,
}

struct Process {
    uuid: u64,
    /// Descriptors are sent when the first event needs them, by which time
    /// an exec has usually named the process: Perfetto keeps a process's
    /// first name.
    described: bool,
    pid: u32,
    name: String,
    cmdline: Vec<String>,
    lanes: [Vec<Lane>; 4],
    /// For instants (exec, exit, marks) on the process track itself.
    seq: Seq,
}

/// What an export produced.
#[derive(Clone, Debug, Default)]
pub struct ExportStats {
    pub records: u64,
    pub slices: u64,
    pub processes: u64,
    pub packets: u64,
    /// Bytes written, and the packets' size before compression.
    pub bytes: u64,
    pub raw_bytes: u64,
    pub lost_events: u64,
    pub block_requests: u64,
    pub flows: u64,
    /// In-flight counter changes that arrived after later ones were written.
    pub late_counter_changes: u64,
}

/// Reusable packet parts, so emitting an event allocates nothing once the
/// vectors have grown. Args are encoded as they are added.
#[derive(Default)]
struct Scratch {
    pkt: TracePacket,
    /// The event, less its args (in `args`, already encoded).
    ev: TrackEvent,
    args: Vec<u8>,
    interned: InternedData,
    /// A slice end: nothing else in it.
    end: TrackEvent,
}

impl Scratch {
    fn clear(&mut self) {
        let p = &mut self.pkt;
        p.timestamp = None;
        p.timestamp_clock_id = None;
        p.sequence_flags = None;
        p.trace_packet_defaults = None;
        p.interned_data = None;
        let e = &mut self.ev;
        e.r#type = None;
        e.name_iid = None;
        e.counter_value = None;
        e.double_counter_value = None;
        e.flow_ids.clear();
        e.terminating_flow_ids.clear();
        self.args.clear();
        self.interned.event_names.clear();
        self.interned.debug_annotation_names.clear();
        self.interned.debug_annotation_string_values.clear();
        self.interned.event_categories.clear();
    }

    #[inline]
    fn arg_int(&mut self, a: Arg, v: i64) {
        wire::annotation_int(&mut self.args, a as u64, v);
    }

    #[inline]
    fn arg_uint(&mut self, a: Arg, v: u64) {
        wire::annotation_uint(&mut self.args, a as u64, v);
    }

    fn arg_str(&mut self, seq: &mut Seq, a: Arg, v: &[u8]) {
        let iid = seq.string(v, &mut self.interned);
        wire::annotation_string_iid(&mut self.args, a as u64, iid);
    }

    /// Writes the packet with the event (and any new interned data) in it.
    fn emit<W: Write>(&mut self, sink: &mut PacketSink<W>, seq: &mut Seq, ts: u64) -> io::Result<()> {
        let has_interned = !(self.interned.event_names.is_empty()
            && self.interned.debug_annotation_names.is_empty()
            && self.interned.debug_annotation_string_values.is_empty());
        let needs = SequenceFlags::SeqNeedsIncrementalState as u32;
        if !has_interned
            && self.pkt.sequence_flags == Some(needs)
            && self.pkt.trace_packet_defaults.is_none()
            && seq.plain_ready(ts)
        {
            return seq.write_plain(sink, ts, &self.ev, &self.args);
        }
        if has_interned {
            self.pkt.interned_data = Some(std::mem::take(&mut self.interned));
        }
        let r = seq.write(sink, &mut self.pkt, ts, Some((&self.ev, &self.args)));
        if let Some(i) = self.pkt.interned_data.take() {
            self.interned = i;
        }
        r
    }
}

pub struct Exporter<W: Write> {
    sink: PacketSink<W>,
    header: Header,
    global: Seq,
    procs: HashMap<u32, Process>,
    /// Names of exited processes, for their late records.
    exited: labels::ExitedNames,
    next_uuid: u64,
    next_seq: u32,
    scratch: Scratch,
    lost_track: Option<(u64, Seq)>,
    disks: Vec<Disk>,
    disk_ids: DiskIds,
    samples: Vec<Sample>,
    /// Flow ids for the next slice: leaving it, and ending on it.
    flow_out: Vec<u64>,
    flow_in: Vec<u64>,
    /// Counter tracks by "group\0name\0pid", and top-level groups by name.
    counters: HashMap<String, (u64, Seq)>,
    groups: HashMap<String, u64>,
    /// Each core's latest iowait sample, to pair with its idle sample.
    core_iowait: HashMap<u32, (u64, f64)>,
    /// Phases and pid-0 (MLLOG) marks are few: kept to the end, then laid
    /// out nested. A process's marks go on its track as they come.
    phases: Vec<(Phase, String)>,
    marks: Vec<(Mark, String, String)>,
    pub stats: ExportStats,
}

/// A flow id, never 0 (splitmix64 of the parts).
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

/// `exit 0`, `exit 2`, `killed by SIGKILL`.
pub use mltrace_log::labels::describe_status;

/// How to write the trace.
#[derive(Clone, Copy, Debug)]
pub struct ExportOptions {
    /// Deflate level (0-9) for batches of packets, which Perfetto reads
    /// natively (`compressed_packets`); `None` writes plain packets.
    pub compress: Option<u32>,
}

impl Default for ExportOptions {
    fn default() -> Self {
        // Level 1: most of the gain on these repetitive packets, at a
        // fraction of the CPU of the default level.
        ExportOptions { compress: Some(1) }
    }
}

impl<W: Write> Exporter<W> {
    pub fn new(out: W, header: &Header) -> Self {
        Self::with_options(out, header, ExportOptions::default())
    }

    pub fn with_options(out: W, header: &Header, opts: ExportOptions) -> Self {
        Exporter {
            sink: PacketSink::new(out, opts.compress),
            header: header.clone(),
            global: Seq::new(1, None),
            procs: HashMap::default(),
            exited: labels::ExitedNames::default(),
            next_uuid: 0x6d6c_7472_0000_0000,
            next_seq: 2,
            scratch: Scratch {
                end: TrackEvent { r#type: Some(Type::SliceEnd as i32), ..Default::default() },
                ..Default::default()
            },
            lost_track: None,
            disks: Vec::new(),
            disk_ids: DiskIds::default(),
            samples: Vec::new(),
            flow_out: Vec::new(),
            flow_in: Vec::new(),
            counters: HashMap::default(),
            groups: HashMap::default(),
            core_iowait: HashMap::default(),
            phases: Vec::new(),
            marks: Vec::new(),
            stats: ExportStats::default(),
        }
    }

    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid
    }

    fn seq(&mut self, track: Option<u64>) -> Seq {
        self.next_seq += 1;
        Seq::new(self.next_seq, track)
    }

    /// Writes the clock snapshot that maps BOOTTIME to wall-clock time.
    pub fn start(&mut self) -> io::Result<()> {
        self.clock_snapshot(self.header.start)
    }

    fn clock_snapshot(&mut self, a: ClockAnchor) -> io::Result<()> {
        if a.boottime_ns == 0 {
            return Ok(());
        }
        let clock =
            |id: BuiltinClock, ts: u64| Clock { clock_id: Some(id as u32), timestamp: Some(ts), ..Default::default() };
        let mut clocks = vec![clock(BuiltinClock::Boottime, a.boottime_ns)];
        if a.realtime_ns != 0 {
            clocks.push(clock(BuiltinClock::Realtime, a.realtime_ns));
        }
        if a.monotonic_ns != 0 {
            clocks.push(clock(BuiltinClock::Monotonic, a.monotonic_ns));
        }
        let p = TracePacket {
            timestamp: Some(a.boottime_ns),
            trusted_packet_sequence_id: Some(self.global.id),
            clock_snapshot: Some(ClockSnapshot { clocks, primary_trace_clock: Some(BuiltinClock::Boottime as i32) }),
            ..Default::default()
        };
        self.sink.write(&p)
    }

    fn describe(&mut self, d: TrackDescriptor) -> io::Result<()> {
        let p = TracePacket {
            trusted_packet_sequence_id: Some(self.global.id),
            track_descriptor: Some(d),
            ..Default::default()
        };
        self.sink.write(&p)
    }

    fn describe_process(&mut self, pid: u32) -> io::Result<()> {
        let p = self.procs.get_mut(&pid).unwrap();
        if p.described {
            return Ok(());
        }
        p.described = true;
        let p = &self.procs[&pid];
        let d = TrackDescriptor {
            uuid: Some(p.uuid),
            child_ordering: Some(ChildTracksOrdering::Explicit as i32),
            process: Some(ProcessDescriptor {
                pid: Some(p.pid as i32),
                process_name: Some(p.name.clone()),
                cmdline: p.cmdline.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.describe(d)
    }

    /// A new process entry (a fork, or the first sight of a pid).
    fn new_process(&mut self, pid: u32, name: String, cmdline: Vec<String>) -> io::Result<()> {
        let uuid = self.uuid();
        let seq = self.seq(Some(uuid));
        self.procs.insert(pid, Process { uuid, described: false, pid, name, cmdline, lanes: Default::default(), seq });
        self.stats.processes += 1;
        Ok(())
    }

    fn ensure_process(&mut self, pid: u32) -> io::Result<()> {
        if !self.procs.contains_key(&pid) {
            self.new_process(pid, self.exited.name_of(pid), vec![])?;
        }
        self.describe_process(pid)
    }

    fn lanes_mut(&mut self, owner: Owner) -> &mut Vec<Lane> {
        match owner {
            Owner::Proc(pid, kind) => &mut self.procs.get_mut(&pid).unwrap().lanes[kind as usize],
            Owner::Disk(d) => &mut self.disks[d].lanes,
        }
    }

    /// Picks (or creates) a lane of `owner`'s tracks free at `ts`.
    fn lane(&mut self, owner: Owner, ts: u64, end: u64) -> io::Result<usize> {
        // Most slices land on a known process's free lane: one lookup.
        if let Owner::Proc(pid, kind) = owner {
            if let Some(p) = self.procs.get_mut(&pid).filter(|p| p.described) {
                if let Some(i) = take_free(&mut p.lanes[kind as usize], ts, end) {
                    return Ok(i);
                }
            }
        }
        let (parent, name, rank) = match owner {
            Owner::Proc(pid, kind) => {
                self.ensure_process(pid)?;
                (self.procs[&pid].uuid, LANE_NAMES[kind as usize], kind as i32)
            }
            Owner::Disk(d) => (self.disks[d].uuid, "requests", 0),
        };
        if let Some(i) = take_free(self.lanes_mut(owner), ts, end) {
            return Ok(i);
        }
        let uuid = self.uuid();
        let seq = self.seq(Some(uuid));
        self.describe(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some(name.into()),
            sibling_order_rank: Some(rank),
            ..Default::default()
        })?;
        let lanes = self.lanes_mut(owner);
        lanes.push(Lane { seq, max_end: end, name_keys: HashMap::default() });
        Ok(lanes.len() - 1)
    }

    /// Emits one slice: `fill` adds args and returns the (cached) name.
    fn slice(
        &mut self,
        at: At,
        name_key: u64,
        make_name: &dyn Fn() -> String,
        fill: &mut dyn FnMut(&mut Scratch, &mut Seq),
    ) -> io::Result<()> {
        let At { owner, ts, dur } = at;
        let end = ts.saturating_add(dur);
        let i = self.lane(owner, ts, end)?;
        let (flow_out, flow_in) = (std::mem::take(&mut self.flow_out), std::mem::take(&mut self.flow_in));
        self.stats.flows += flow_out.len() as u64;
        let lane = match owner {
            Owner::Proc(pid, kind) => &mut self.procs.get_mut(&pid).unwrap().lanes[kind as usize][i],
            Owner::Disk(d) => &mut self.disks[d].lanes[i],
        };
        let s = &mut self.scratch;
        s.clear();
        lane.seq.begin_packet(&mut s.pkt, &mut s.interned);
        if s.pkt.sequence_flags.unwrap_or(0) & 1 != 0 {
            lane.name_keys.clear();
        }
        let name_iid = match lane.name_keys.get(&name_key) {
            Some(&iid) => iid,
            None => {
                let iid = lane.seq.name(&make_name(), &mut s.interned);
                lane.name_keys.insert(name_key, iid);
                iid
            }
        };
        s.ev.r#type = Some(Type::SliceBegin as i32);
        s.ev.name_iid = Some(name_iid);
        s.ev.flow_ids.extend_from_slice(&flow_out);
        s.ev.terminating_flow_ids.extend_from_slice(&flow_in);
        fill(s, &mut lane.seq);
        s.emit(&mut self.sink, &mut lane.seq, ts)?;
        // Hand the (emptied) vectors back to keep their capacity.
        self.flow_out = flow_out;
        self.flow_out.clear();
        self.flow_in = flow_in;
        self.flow_in.clear();
        if lane.seq.plain_ready(end) {
            lane.seq.write_plain(&mut self.sink, end, &s.end, &[])?;
        } else {
            s.clear();
            lane.seq.begin_packet(&mut s.pkt, &mut s.interned);
            if s.pkt.sequence_flags.unwrap_or(0) & 1 != 0 {
                // The sequence reset here: names cached before are gone.
                lane.name_keys.clear();
            }
            s.ev.r#type = Some(Type::SliceEnd as i32);
            s.emit(&mut self.sink, &mut lane.seq, end)?;
        }
        self.stats.slices += 1;
        Ok(())
    }

    /// An instant on the process track itself (exec, exit, a process's
    /// marks): `fill` adds its args.
    fn process_instant(
        &mut self,
        pid: u32,
        ts: u64,
        name: &str,
        fill: &mut dyn FnMut(&mut Scratch, &mut Seq),
    ) -> io::Result<()> {
        self.ensure_process(pid)?;
        let p = self.procs.get_mut(&pid).unwrap();
        let s = &mut self.scratch;
        s.clear();
        p.seq.begin_packet(&mut s.pkt, &mut s.interned);
        s.ev.r#type = Some(Type::Instant as i32);
        s.ev.name_iid = Some(p.seq.name(name, &mut s.interned));
        fill(s, &mut p.seq);
        s.emit(&mut self.sink, &mut p.seq, ts)
    }

    fn lost(&mut self, r: &Lost) -> io::Result<()> {
        self.stats.lost_events += r.count;
        if self.lost_track.is_none() {
            let uuid = self.uuid();
            self.describe(TrackDescriptor {
                uuid: Some(uuid),
                name: Some("mltrace: lost events (total)".into()),
                counter: Some(CounterDescriptor { unit: Some(Unit::Count as i32), ..Default::default() }),
                ..Default::default()
            })?;
            let seq = self.seq(Some(uuid));
            self.lost_track = Some((uuid, seq));
        }
        let total = self.stats.lost_events;
        let (_, seq) = self.lost_track.as_mut().unwrap();
        let s = &mut self.scratch;
        s.clear();
        seq.begin_packet(&mut s.pkt, &mut s.interned);
        s.ev.r#type = Some(Type::Counter as i32);
        s.ev.counter_value = Some(total as i64);
        s.emit(&mut self.sink, seq, r.ts)?;
        // And a marker where it happened, named for what was lost.
        s.clear();
        seq.begin_packet(&mut s.pkt, &mut s.interned);
        s.ev.r#type = Some(Type::Instant as i32);
        let name = labels::lost(r.count, r.kind);
        s.ev.name_iid = Some(seq.name(&name, &mut s.interned));
        s.arg_uint(Arg::Lost, r.count);
        s.emit(&mut self.sink, seq, r.ts)
    }

    /// Converts one record.
    pub fn record(&mut self, f: &Frame<'_>, rec: &Record) -> io::Result<()> {
        self.stats.records += 1;
        match *rec {
            Record::Fork(r) => {
                if !r.thread {
                    let (name, cmdline) = match self.procs.get(&r.parent_pid) {
                        // A forked worker runs its parent's program: say whose.
                        Some(p) => (labels::fork_name(&p.name, r.parent_pid), p.cmdline.clone()),
                        // The recorded command itself: named by its command line.
                        None if r.pid == self.header.root_pid => {
                            (names::command_name(&self.header.command, NAME_MAX), self.header.command.clone())
                        }
                        None => (labels::pid_name(r.pid), vec![]),
                    };
                    self.new_process(r.pid, name, cmdline)?;
                }
            }
            Record::Exec(r) => {
                let (argv, filename) = (f.str(r.argv), f.str(r.filename));
                let name = labels::exec_name(argv, filename);
                let cmdline: Vec<String> =
                    argv.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                match self.procs.get_mut(&r.pid) {
                    // Already on screen under its old program: the new program
                    // gets its own group, as Perfetto keeps a process's first name.
                    Some(p) if p.described && p.name != name => {
                        self.procs.remove(&r.pid);
                        self.new_process(r.pid, name, cmdline)?;
                    }
                    Some(p) => {
                        p.name = name;
                        p.cmdline = cmdline;
                    }
                    None => self.new_process(r.pid, name, cmdline)?,
                }
                self.process_instant(r.pid, r.ts, &labels::exec_instant(filename), &mut |s, seq| {
                    s.arg_str(seq, Arg::Path, filename);
                    s.arg_str(seq, Arg::Command, argv);
                })?;
            }
            Record::Comm(r) => {
                // A process never exec'd in the log (started before it, or
                // imported: known only by its comm) is at least named by it.
                if r.tid == r.pid {
                    match self.procs.get_mut(&r.pid) {
                        Some(p) => {
                            if p.cmdline.is_empty() && !p.described {
                                p.name = f.str_lossy(r.comm).into_owned();
                            }
                        }
                        None => self.new_process(r.pid, f.str_lossy(r.comm).into_owned(), vec![])?,
                    }
                }
            }
            Record::Exit(r) => {
                if r.process_exit {
                    let status = labels::describe_status(r.status);
                    self.process_instant(r.pid, r.ts, &status, &mut |_, _| {})?;
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
            Record::Phase(r) => {
                self.phases.push((r, f.str_lossy(r.name).into_owned()));
            }
            Record::Mark(r) => {
                let (name, value) = (f.str_lossy(r.name), f.str_lossy(r.value));
                if r.pid == 0 {
                    self.marks.push((r, name.into_owned(), value.into_owned()));
                } else {
                    // A process's own event (an imported mmap, unlink...): on its track.
                    let label = labels::mark(&name, &value);
                    self.process_instant(r.pid, r.ts, &label, &mut |s, seq| mark_args(s, seq, &r, &value))?;
                }
            }
        }
        Ok(())
    }

    fn io(&mut self, f: &Frame<'_>, r: &Io) -> io::Result<()> {
        let kind = if r.op.is_write() { Lanes::Writes } else { Lanes::Reads };
        let op = r.op;
        let ret = r.ret;
        let key = ((op as u64) << 56) ^ (ret as u64 & ((1 << 56) - 1));
        let make = move || labels::syscall(op.name(), ret);
        let path = f.str(r.path);
        let r = *r;
        self.flow_out.extend((0..r.block_reqs).map(|k| flow_from_syscall(r.tid, r.ts, k)));
        self.slice(At { owner: Owner::Proc(r.pid, kind), ts: r.ts, dur: r.dur }, key, &make, &mut |s, seq| {
            s.arg_str(seq, Arg::Path, path);
            s.arg_int(Arg::Fd, i64::from(r.fd));
            if r.offset_src != OffsetSrc::None {
                s.arg_uint(Arg::Offset, r.offset);
            }
            s.arg_uint(Arg::Requested, r.requested);
            returned(s, seq, r.ret);
            s.arg_int(Arg::Tid, i64::from(r.tid));
            if r.kind != FileKind::Regular {
                s.arg_str(seq, Arg::Kind, r.kind.name().as_bytes());
            }
        })
    }

    fn open(&mut self, f: &Frame<'_>, r: &Open) -> io::Result<()> {
        let abs = f.str(r.abs_path);
        // Names differ per file; string ids do not survive frames, so the
        // key hashes what the name is made of and the name is formatted
        // only when the lane has not seen it.
        let key = name_key(r.op as u8, r.ret, abs);
        let (op, ret) = (r.op, r.ret);
        let make = move || labels::open(op, abs, ret);
        let passed = f.str(r.path);
        let r = *r;
        self.flow_out.extend((0..r.block_reqs).map(|k| flow_from_syscall(r.tid, r.ts, k)));
        self.slice(At { owner: Owner::Proc(r.pid, Lanes::Opens), ts: r.ts, dur: r.dur }, key, &make, &mut |s, seq| {
            s.arg_str(seq, Arg::Path, passed);
            s.arg_str(seq, Arg::AbsPath, abs);
            s.arg_str(seq, Arg::Flags, names::open_flags(r.flags).as_bytes());
            if r.flags & 0o100 != 0 || r.flags & 0o20200000 == 0o20200000 {
                s.arg_str(seq, Arg::Mode, format!("{:#o}", r.mode).as_bytes());
            }
            if r.dirfd != -100 {
                s.arg_int(Arg::Dirfd, i64::from(r.dirfd));
            }
            if let Some(fd) = outcome_args(s, seq, r.ret) {
                s.arg_int(Arg::Fd, fd as i64);
            }
            // What was opened, unless nothing was.
            if !matches!(labels::outcome(r.ret), Outcome::Err(_)) && r.kind != FileKind::Regular {
                s.arg_str(seq, Arg::Kind, r.kind.name().as_bytes());
            }
            s.arg_int(Arg::Tid, i64::from(r.tid));
        })
    }

    fn close(&mut self, f: &Frame<'_>, r: &Close) -> io::Result<()> {
        let path = f.str(r.path);
        let key = name_key(u8::MAX, r.ret, path);
        let ret = r.ret;
        let make = move || labels::close(path, ret);
        let r = *r;
        self.slice(At { owner: Owner::Proc(r.pid, Lanes::Opens), ts: r.ts, dur: r.dur }, key, &make, &mut |s, seq| {
            s.arg_str(seq, Arg::Path, path);
            s.arg_int(Arg::Fd, i64::from(r.fd));
            outcome_args(s, seq, r.ret);
            s.arg_int(Arg::Tid, i64::from(r.tid));
        })
    }

    fn transfer(&mut self, f: &Frame<'_>, r: &Transfer) -> io::Result<()> {
        let (op, ret) = (r.op, r.ret);
        let key = (1u64 << 63) ^ ((op as u64) << 56) ^ (ret as u64 & ((1 << 56) - 1));
        let make = move || labels::syscall(op.name(), ret);
        let (inp, outp) = (f.str(r.in_path), f.str(r.out_path));
        let r = *r;
        self.flow_out.extend((0..r.block_reqs).map(|k| flow_from_syscall(r.tid, r.ts, k)));
        self.slice(At { owner: Owner::Proc(r.pid, Lanes::Reads), ts: r.ts, dur: r.dur }, key, &make, &mut |s, seq| {
            s.arg_str(seq, Arg::InPath, inp);
            s.arg_str(seq, Arg::OutPath, outp);
            s.arg_int(Arg::InFd, i64::from(r.in_fd));
            s.arg_int(Arg::OutFd, i64::from(r.out_fd));
            s.arg_uint(Arg::Requested, r.requested);
            returned(s, seq, r.ret);
            s.arg_int(Arg::Tid, i64::from(r.tid));
        })
    }

    /// The disk's index in `disks`, made on first sight.
    fn disk(&mut self, b: &Block, name: &[u8]) -> io::Result<usize> {
        let (d, new) = self.disk_ids.id(b.dev, name);
        if !new {
            return Ok(d);
        }
        // The same group as the disk's sampled counters (throughput, IOPS...).
        let uuid = self.group(&labels::disk(name, b.dev))?;
        let mut tracks = Vec::new();
        // Throughput from the requests themselves, unless the recording
        // sampled /proc/diskstats, whose read and write say the same.
        let sampled = self.header.probes.iter().any(|p| p.subsystem == "counters");
        let names: &[(&str, Unit)] = if sampled {
            &[("requests in flight", Unit::Count)]
        } else {
            &[("requests in flight", Unit::Count), ("read", Unit::Unspecified), ("write", Unit::Unspecified)]
        };
        for &(name, unit) in names {
            let t = self.uuid();
            self.describe(TrackDescriptor {
                uuid: Some(t),
                parent_uuid: Some(uuid),
                name: Some(name.into()),
                counter: Some(CounterDescriptor {
                    unit: Some(unit as i32),
                    unit_name: (unit == Unit::Unspecified).then(|| "B/s".to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            })?;
            let seq = self.seq(Some(t));
            tracks.push((t, seq));
        }
        self.disks.push(Disk { uuid, lanes: Vec::new(), counters: DiskCounters::default(), tracks });
        Ok(d)
    }

    /// Writes the counter samples gathered for disk `d`.
    fn emit_samples(&mut self, d: usize) -> io::Result<()> {
        let samples = std::mem::take(&mut self.samples);
        let disk = &mut self.disks[d];
        for smp in &samples {
            let (i, ts, v) = match *smp {
                Sample::InFlight { ts, value } => (0, ts, value as f64),
                Sample::ReadRate { ts, bytes_per_s } => (1, ts, bytes_per_s),
                Sample::WriteRate { ts, bytes_per_s } => (2, ts, bytes_per_s),
            };
            if i >= disk.tracks.len() {
                continue;
            }
            let s = &mut self.scratch;
            s.clear();
            disk.tracks[i].1.begin_packet(&mut s.pkt, &mut s.interned);
            s.ev.r#type = Some(Type::Counter as i32);
            if i == 0 {
                s.ev.counter_value = Some(v as i64);
            } else {
                s.ev.double_counter_value = Some(v);
            }
            s.emit(&mut self.sink, &mut disk.tracks[i].1, ts)?;
        }
        self.samples = samples;
        self.samples.clear();
        Ok(())
    }

    fn block(&mut self, f: &Frame<'_>, b: &Block) -> io::Result<()> {
        self.stats.block_requests += 1;
        let d = self.disk(b, f.str(b.disk))?;
        let dur = b.queue + b.device;
        let (op, bytes, failed) = (b.op, b.bytes, b.error != 0);
        let key = ((op as u64) << 56) ^ (u64::from(failed) << 55) ^ (bytes & ((1 << 55) - 1));
        let make = move || labels::block(op, bytes, failed);
        let traced = b.flags & blk::TRACED != 0;
        let traced_name = if traced { self.procs.get(&b.pid).map(|p| p.name.as_str()) } else { None };
        let (mut who, mut flags) = (String::new(), String::new());
        labels::block_who(&mut who, b, f.str(b.comm), traced_name);
        labels::block_flags(&mut flags, b.flags);
        let b = *b;
        let disk_name = f.str(b.disk);
        let mut fill = |s: &mut Scratch, seq: &mut Seq| {
            s.arg_uint(Arg::Sector, b.sector);
            s.arg_uint(Arg::Bytes, b.bytes);
            s.arg_uint(Arg::QueueNs, b.queue);
            s.arg_uint(Arg::DeviceNs, b.device);
            s.arg_str(seq, Arg::Process, who.as_bytes());
            if traced {
                s.arg_int(Arg::Tid, i64::from(b.tid));
            }
            if !flags.is_empty() {
                s.arg_str(seq, Arg::RqFlags, flags.as_bytes());
            }
            if b.error != 0 {
                s.arg_int(Arg::Status, i64::from(b.error));
            }
            s.arg_str(seq, Arg::Disk, disk_name);
        };
        if traced {
            if b.cause_ts != 0 {
                self.flow_in.push(flow_from_syscall(b.tid, b.cause_ts, b.cause_idx));
            }
            self.flow_out.push(flow_to_disk(&b));
            self.slice(At { owner: Owner::Proc(b.pid, Lanes::Block), ts: b.ts, dur }, key, &make, &mut fill)?;
            self.flow_in.push(flow_to_disk(&b));
        }
        self.slice(At { owner: Owner::Disk(d), ts: b.ts, dur }, key, &make, &mut fill)?;
        let (read, write) = (b.op == BlockOp::Read, b.op == BlockOp::Write);
        self.disks[d].counters.add(b.ts, b.end_ts(), b.bytes, read, write, &mut self.samples);
        self.emit_samples(d)
    }

    /// A top-level group track (CPU, Memory, GPU 0...), made once.
    fn group(&mut self, name: &str) -> io::Result<u64> {
        if let Some(&u) = self.groups.get(name) {
            return Ok(u);
        }
        let uuid = self.uuid();
        self.describe(TrackDescriptor { uuid: Some(uuid), name: Some(name.into()), ..Default::default() })?;
        self.groups.insert(name.to_string(), uuid);
        Ok(uuid)
    }

    /// Per-core counters (group `CPU n`) become one "busy" track per core,
    /// 100 - idle - iowait, in a `per core` group under `CPU`: ten tracks
    /// per core would bury everything else on a many-core machine. The log
    /// keeps every column (`dump`, `stats`).
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
                if !self.groups.contains_key("CPU\0per core") {
                    let cpu = self.group("CPU")?;
                    let uuid = self.uuid();
                    self.describe(TrackDescriptor {
                        uuid: Some(uuid),
                        parent_uuid: Some(cpu),
                        name: Some("per core (busy %)".into()),
                        ..Default::default()
                    })?;
                    self.groups.insert("CPU\0per core".into(), uuid);
                }
                let width = self.header.cpu_count.max(1).saturating_sub(1).to_string().len();
                let busy = Counter { value: (100.0 - c.value - iowait).max(0.0), ..*c };
                self.counter_on(&format!("CPU {core:0width$} busy"), "CPU\0per core", &busy)
            }
            _ => Ok(()),
        }
    }

    /// A counter sample on the named track under the named group.
    fn counter_on(&mut self, track: &str, group: &str, c: &Counter) -> io::Result<()> {
        let key = format!("{group}\0{track}\0{}", c.pid);
        if !self.counters.contains_key(&key) {
            let parent = self.groups[group];
            let uuid = self.uuid();
            self.describe(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(parent),
                name: Some(track.into()),
                counter: Some(CounterDescriptor { unit_name: Some("%".into()), ..Default::default() }),
                ..Default::default()
            })?;
            let seq = self.seq(Some(uuid));
            self.counters.insert(key.clone(), (uuid, seq));
        }
        self.counter_value(&key, c)
    }

    fn counter_value(&mut self, key: &str, c: &Counter) -> io::Result<()> {
        let (_, seq) = self.counters.get_mut(key).unwrap();
        let s = &mut self.scratch;
        s.clear();
        seq.begin_packet(&mut s.pkt, &mut s.interned);
        s.ev.r#type = Some(Type::Counter as i32);
        s.ev.double_counter_value = Some(c.value);
        s.emit(&mut self.sink, seq, c.ts)
    }

    fn counter(&mut self, f: &Frame<'_>, c: &Counter) -> io::Result<()> {
        let (group, name) = (f.str_lossy(c.group), f.str_lossy(c.name));
        if c.pid == 0 {
            if let Some(core) = group.strip_prefix("CPU ").and_then(|n| n.parse::<u32>().ok()) {
                return self.core_counter(c, core, &name);
            }
        }
        let key = format!("{group}\0{name}\0{}", c.pid);
        if !self.counters.contains_key(&key) {
            // Machine-wide counters go in their group; a process's go in its own group.
            let (parent, track_name) = if c.pid == 0 {
                (self.group(&group)?, name.to_string())
            } else {
                self.ensure_process(c.pid)?;
                let n = if group.is_empty() { name.to_string() } else { format!("{group} {name}") };
                (self.procs[&c.pid].uuid, n)
            };
            let uuid = self.uuid();
            let unit = match c.unit {
                CounterUnit::Bytes => Some(Unit::SizeBytes),
                CounterUnit::Count => Some(Unit::Count),
                _ => None,
            };
            let unit_name = match c.unit {
                CounterUnit::Bytes | CounterUnit::Count | CounterUnit::None => None,
                u => Some(u.name().to_string()),
            };
            self.describe(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(parent),
                name: Some(track_name),
                counter: Some(CounterDescriptor { unit: unit.map(|u| u as i32), unit_name, ..Default::default() }),
                ..Default::default()
            })?;
            let seq = self.seq(Some(uuid));
            self.counters.insert(key.clone(), (uuid, seq));
        }
        self.counter_value(&key, c)
    }

    /// Lays out the phases, nested where they nest, on lanes of the
    /// "Training phases" group, with the pid-0 marks beside them.
    fn emit_phases(&mut self) -> io::Result<()> {
        if self.phases.is_empty() && self.marks.is_empty() {
            return Ok(());
        }
        let group = self.group("Training phases")?;
        let mut phases = std::mem::take(&mut self.phases);
        phases.sort_by(|a, b| a.0.ts.cmp(&b.0.ts).then(b.0.dur.cmp(&a.0.dur)));
        // Each lane holds slices that nest: a stack of the open ones' ends.
        // Per lane: the ends of the open phases, and (ts, is_begin, tie-break, phase) events.
        type PhaseLane = (Vec<u64>, Vec<(u64, bool, u64, usize)>);
        let mut lanes: Vec<PhaseLane> = Vec::new();
        for (i, (p, _)) in phases.iter().enumerate() {
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
                    lanes.push((Vec::new(), Vec::new()));
                    lanes.len() - 1
                }
            };
            lanes[lane].0.push(e);
            // (ts, is_begin, tie-break, phase index)
            lanes[lane].1.push((s, true, u64::MAX - e, i));
            lanes[lane].1.push((e, false, u64::MAX - s, i));
        }
        for (_, mut events) in lanes {
            // Ends before begins at one instant; inner ends first, outer begins first.
            events.sort_by_key(|&(ts, begin, tie, _)| (ts, begin, tie));
            let uuid = self.uuid();
            self.describe(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(group),
                name: Some("phases".into()),
                ..Default::default()
            })?;
            let mut seq = self.seq(Some(uuid));
            for (ts, begin, _, i) in events {
                let (p, name) = &phases[i];
                let s = &mut self.scratch;
                s.clear();
                seq.begin_packet(&mut s.pkt, &mut s.interned);
                if begin {
                    s.ev.r#type = Some(Type::SliceBegin as i32);
                    s.ev.name_iid = Some(seq.name(&labels::phase(name, p.flags), &mut s.interned));
                    s.arg_str(&mut seq, Arg::PhaseKind, p.kind.name().as_bytes());
                    if p.rank >= 0 {
                        s.arg_int(Arg::Rank, i64::from(p.rank));
                    }
                    self.stats.slices += 1;
                } else {
                    s.ev.r#type = Some(Type::SliceEnd as i32);
                }
                s.emit(&mut self.sink, &mut seq, ts)?;
            }
        }
        let marks = std::mem::take(&mut self.marks);
        if !marks.is_empty() {
            let uuid = self.uuid();
            self.describe(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(group),
                name: Some("events".into()),
                ..Default::default()
            })?;
            let mut seq = self.seq(Some(uuid));
            for (m, name, value) in &marks {
                let s = &mut self.scratch;
                s.clear();
                seq.begin_packet(&mut s.pkt, &mut s.interned);
                s.ev.r#type = Some(Type::Instant as i32);
                s.ev.name_iid = Some(seq.name(&labels::mark(name, value), &mut s.interned));
                mark_args(s, &mut seq, m, value);
                s.emit(&mut self.sink, &mut seq, m.ts)?;
            }
        }
        Ok(())
    }

    /// Ends the trace (a second clock snapshot from the trailer, if any).
    pub fn finish(mut self, trailer: Option<&Trailer>) -> io::Result<(W, ExportStats)> {
        self.emit_phases()?;
        for d in 0..self.disks.len() {
            let disk = &mut self.disks[d];
            disk.counters.finish(&mut self.samples);
            self.stats.late_counter_changes += disk.counters.late;
            self.emit_samples(d)?;
        }
        if let Some(t) = trailer {
            self.clock_snapshot(t.end)?;
        }
        let mut stats = self.stats.clone();
        stats.packets = self.sink.packets;
        stats.raw_bytes = self.sink.raw_bytes;
        let (out, bytes) = self.sink.into_inner()?;
        stats.bytes = bytes;
        Ok((out, stats))
    }
}

/// Takes the first of `lanes` free at `ts`, busy until `end`.
fn take_free(lanes: &mut [Lane], ts: u64, end: u64) -> Option<usize> {
    let i = lanes.iter().position(|l| l.max_end < ts)?;
    lanes[i].max_end = end;
    Some(i)
}

/// A syscall's result: adds `errno`, or that it is unknown, and returns
/// the value when the call succeeded (for the caller to name).
fn outcome_args(s: &mut Scratch, seq: &mut Seq, ret: i64) -> Option<u64> {
    match labels::outcome(ret) {
        Outcome::Ok(n) => return Some(n),
        Outcome::Err(e) => s.arg_str(seq, Arg::Errno, names::errno(e).as_bytes()),
        Outcome::Unknown => s.arg_str(seq, Arg::Result, labels::RESULT_UNKNOWN.as_bytes()),
    }
    None
}

/// A syscall's result args: `returned`, `errno`, or that it is unknown.
fn returned(s: &mut Scratch, seq: &mut Seq, ret: i64) {
    if let Some(n) = outcome_args(s, seq, ret) {
        s.arg_int(Arg::Returned, n as i64);
    }
}

fn mark_args(s: &mut Scratch, seq: &mut Seq, m: &Mark, value: &str) {
    s.arg_str(seq, Arg::Value, value.as_bytes());
    if m.rank >= 0 {
        s.arg_int(Arg::Rank, i64::from(m.rank));
    }
}

/// A slice-name key for opens and closes from what their names are made
/// of: `tag` (the call), the outcome and the path. Bit 62 keeps these keys
/// apart from the op-and-size keys of reads and writes.
fn name_key(tag: u8, ret: i64, path: &[u8]) -> u64 {
    use std::hash::Hasher;
    let outcome = match labels::outcome(ret) {
        Outcome::Ok(_) => 0,
        Outcome::Err(e) => e,
        Outcome::Unknown => -1,
    };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write_u8(tag);
    h.write_i64(outcome);
    h.write(path);
    h.finish() | (1 << 62)
}

/// Exports a whole log with the default options. `on_diag` receives each
/// problem the reader worked around (already described for people).
pub fn export<R: Read + Seek, W: Write>(
    reader: &mut LogReader<R>,
    out: W,
    on_diag: &mut dyn FnMut(String),
) -> io::Result<(W, ExportStats)> {
    export_with(reader, out, ExportOptions::default(), on_diag)
}

pub fn export_with<R: Read + Seek, W: Write>(
    reader: &mut LogReader<R>,
    out: W,
    opts: ExportOptions,
    on_diag: &mut dyn FnMut(String),
) -> io::Result<(W, ExportStats)> {
    let header = reader.header().clone();
    let mut ex = Exporter::with_options(out, &header, opts);
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
