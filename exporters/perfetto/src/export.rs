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

use std::collections::HashMap;
use std::io::{self, Read, Seek, Write};

use mltrace_log::names;
use mltrace_log::*;

use crate::packets::{Arg, PacketSink, Seq};
use crate::proto::{
    clock_snapshot::Clock, counter_descriptor::Unit, track_event::Type, BuiltinClock, ClockSnapshot, CounterDescriptor,
    DebugAnnotation, InternedData, ProcessDescriptor, TracePacket, TrackDescriptor, TrackEvent,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lanes {
    Reads = 0,
    Writes = 1,
    Opens = 2,
}

const LANE_NAMES: [&str; 3] = ["reads", "writes", "opens"];

/// Longest process name shown (the UI truncates long group names).
const NAME_MAX: usize = 48;

/// Where a slice goes: which process's which tracks, when.
#[derive(Clone, Copy)]
struct At {
    pid: u32,
    kind: Lanes,
    ts: u64,
    dur: u64,
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
    lanes: [Vec<Lane>; 3],
    /// For instants (exec, exit) on the process track itself.
    seq: Seq,
}

/// What an export produced.
#[derive(Clone, Debug, Default)]
pub struct ExportStats {
    pub records: u64,
    pub slices: u64,
    pub processes: u64,
    pub packets: u64,
    pub bytes: u64,
    pub lost_events: u64,
}

/// Reusable packet parts, so emitting an event allocates nothing once the
/// vectors have grown.
#[derive(Default)]
struct Scratch {
    pkt: TracePacket,
    ev: TrackEvent,
    interned: InternedData,
}

impl Scratch {
    fn clear(&mut self) {
        self.pkt = TracePacket::default();
        let anns = std::mem::take(&mut self.ev.debug_annotations);
        self.ev = TrackEvent { debug_annotations: anns, ..Default::default() };
        self.ev.debug_annotations.clear();
        self.interned.event_names.clear();
        self.interned.debug_annotation_names.clear();
        self.interned.debug_annotation_string_values.clear();
        self.interned.event_categories.clear();
    }

    fn arg_int(&mut self, a: Arg, v: i64) {
        self.ev.debug_annotations.push(DebugAnnotation {
            name_iid: Some(a as u64),
            int_value: Some(v),
            ..Default::default()
        });
    }

    fn arg_uint(&mut self, a: Arg, v: u64) {
        self.ev.debug_annotations.push(DebugAnnotation {
            name_iid: Some(a as u64),
            uint_value: Some(v),
            ..Default::default()
        });
    }

    fn arg_str(&mut self, seq: &mut Seq, a: Arg, v: &[u8]) {
        let iid = seq.string(v, &mut self.interned);
        self.ev.debug_annotations.push(DebugAnnotation {
            name_iid: Some(a as u64),
            string_value_iid: Some(iid),
            ..Default::default()
        });
    }

    /// Writes the packet with the event (and any new interned data) in it.
    fn emit<W: Write>(&mut self, sink: &mut PacketSink<W>, ts: u64) -> io::Result<()> {
        self.pkt.timestamp = Some(ts);
        let has_interned = !(self.interned.event_names.is_empty()
            && self.interned.debug_annotation_names.is_empty()
            && self.interned.debug_annotation_string_values.is_empty());
        self.pkt.track_event = Some(std::mem::take(&mut self.ev));
        if has_interned {
            self.pkt.interned_data = Some(std::mem::take(&mut self.interned));
        }
        let r = sink.write(&self.pkt);
        self.ev = self.pkt.track_event.take().unwrap_or_default();
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
    next_uuid: u64,
    next_seq: u32,
    scratch: Scratch,
    lost_track: Option<(u64, Seq)>,
    pub stats: ExportStats,
}

fn signal_name(sig: i32) -> String {
    const N: [&str; 32] = [
        "0",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    N.get(sig as usize).map(|s| s.to_string()).unwrap_or_else(|| format!("signal {sig}"))
}

/// `exit 0`, `exit 2`, `killed by SIGKILL`.
pub fn describe_status(status: i32) -> String {
    let sig = status & 0x7f;
    if sig == 0 {
        format!("exit {}", (status >> 8) & 0xff)
    } else {
        let core = if status & 0x80 != 0 { " (core dumped)" } else { "" };
        format!("killed by {}{core}", signal_name(sig))
    }
}

impl<W: Write> Exporter<W> {
    pub fn new(out: W, header: &Header) -> Self {
        Exporter {
            sink: PacketSink::new(out),
            header: header.clone(),
            global: Seq::new(1, None),
            procs: HashMap::new(),
            next_uuid: 0x6d6c_7472_0000_0000,
            next_seq: 2,
            scratch: Scratch::default(),
            lost_track: None,
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
            self.new_process(pid, format!("pid {pid}"), vec![])?;
        }
        self.describe_process(pid)
    }

    /// Picks (or creates) a lane of `pid`'s `kind` tracks free at `ts`.
    fn lane(&mut self, pid: u32, kind: Lanes, ts: u64, end: u64) -> io::Result<(u32, usize)> {
        self.ensure_process(pid)?;
        let lanes = &mut self.procs.get_mut(&pid).unwrap().lanes[kind as usize];
        if let Some(i) = lanes.iter().position(|l| l.max_end < ts) {
            lanes[i].max_end = end;
            return Ok((pid, i));
        }
        let parent = self.procs[&pid].uuid;
        let uuid = self.uuid();
        let seq = self.seq(Some(uuid));
        self.describe(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some(LANE_NAMES[kind as usize].into()),
            ..Default::default()
        })?;
        let lanes = &mut self.procs.get_mut(&pid).unwrap().lanes[kind as usize];
        lanes.push(Lane { seq, max_end: end, name_keys: HashMap::new() });
        Ok((pid, lanes.len() - 1))
    }

    /// Emits one slice: `fill` adds args and returns the (cached) name.
    fn slice(
        &mut self,
        at: At,
        name_key: u64,
        make_name: &dyn Fn() -> String,
        fill: &mut dyn FnMut(&mut Scratch, &mut Seq),
    ) -> io::Result<()> {
        let At { pid, kind, ts, dur } = at;
        let end = ts.saturating_add(dur);
        let (pid, i) = self.lane(pid, kind, ts, end)?;
        let lane = &mut self.procs.get_mut(&pid).unwrap().lanes[kind as usize][i];
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
        fill(s, &mut lane.seq);
        s.emit(&mut self.sink, ts)?;
        s.clear();
        lane.seq.begin_packet(&mut s.pkt, &mut s.interned);
        s.ev.r#type = Some(Type::SliceEnd as i32);
        s.emit(&mut self.sink, end)?;
        self.stats.slices += 1;
        Ok(())
    }

    /// An instant on the process track itself (exec, exit).
    fn process_instant(&mut self, pid: u32, ts: u64, name: &str, args: &[(Arg, &[u8])]) -> io::Result<()> {
        self.ensure_process(pid)?;
        let p = self.procs.get_mut(&pid).unwrap();
        let s = &mut self.scratch;
        s.clear();
        p.seq.begin_packet(&mut s.pkt, &mut s.interned);
        s.ev.r#type = Some(Type::Instant as i32);
        s.ev.name_iid = Some(p.seq.name(name, &mut s.interned));
        for (a, v) in args {
            s.arg_str(&mut p.seq, *a, v);
        }
        s.emit(&mut self.sink, ts)
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
        s.emit(&mut self.sink, r.ts)?;
        // And a marker where it happened, named for what was lost.
        s.clear();
        seq.begin_packet(&mut s.pkt, &mut s.interned);
        s.ev.r#type = Some(Type::Instant as i32);
        let name = format!("{} events lost: {}", r.count, r.kind.name());
        s.ev.name_iid = Some(seq.name(&name, &mut s.interned));
        s.arg_uint(Arg::Lost, r.count);
        s.emit(&mut self.sink, r.ts)
    }

    /// Converts one record.
    pub fn record(&mut self, f: &Frame<'_>, rec: &Record) -> io::Result<()> {
        self.stats.records += 1;
        match *rec {
            Record::Fork(r) => {
                if !r.thread {
                    let (name, cmdline) = match self.procs.get(&r.parent_pid) {
                        // A forked worker runs its parent's program: say whose.
                        Some(p) => {
                            let parent = p.name.split(" (fork of ").next().unwrap_or("");
                            // Program and script are enough to tell whose; the pid says which.
                            let base = if parent.len() > 24 {
                                parent.split(' ').take(2).collect::<Vec<_>>().join(" ")
                            } else {
                                parent.to_string()
                            };
                            (format!("{base} (fork of {})", r.parent_pid), p.cmdline.clone())
                        }
                        // The recorded command itself: named by its command line.
                        None if r.pid == self.header.root_pid => {
                            (names::command_name(&self.header.command, NAME_MAX), self.header.command.clone())
                        }
                        None => (format!("pid {}", r.pid), vec![]),
                    };
                    self.new_process(r.pid, name, cmdline)?;
                }
            }
            Record::Exec(r) => {
                let argv = f.str(r.argv);
                let mut name = names::command_line(argv, NAME_MAX);
                if name.is_empty() {
                    name = names::basename(&f.str_lossy(r.filename)).to_string();
                }
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
                let exec_name = format!("exec {}", names::basename(&f.str_lossy(r.filename)));
                self.process_instant(r.pid, r.ts, &exec_name, &[(Arg::Path, f.str(r.filename)), (Arg::Command, argv)])?;
            }
            Record::Comm(r) => {
                // A process never exec'd in the log (started before it) is
                // at least named by its command name.
                if r.tid == r.pid {
                    if let Some(p) = self.procs.get_mut(&r.pid) {
                        if p.cmdline.is_empty() && !p.described {
                            p.name = f.str_lossy(r.comm).into_owned();
                        }
                    }
                }
            }
            Record::Exit(r) => {
                if r.process_exit {
                    let status = describe_status(r.status);
                    self.process_instant(r.pid, r.ts, &status, &[])?;
                    self.procs.remove(&r.pid);
                }
            }
            Record::Io(r) => self.io(f, &r)?,
            Record::Open(r) => self.open(f, &r)?,
            Record::Close(r) => self.close(f, &r)?,
            Record::Transfer(r) => self.transfer(f, &r)?,
            Record::Lost(r) => self.lost(&r)?,
        }
        Ok(())
    }

    fn io(&mut self, f: &Frame<'_>, r: &Io) -> io::Result<()> {
        let kind = if r.op.is_write() { Lanes::Writes } else { Lanes::Reads };
        let op = r.op;
        let ret = r.ret;
        let key = ((op as u64) << 56) ^ (ret as u64 & ((1 << 56) - 1));
        let make = move || {
            if ret < 0 {
                format!("{} {}", op.name(), names::errno(-ret))
            } else {
                format!("{} {}", op.name(), names::size(ret as u64))
            }
        };
        let path = f.str(r.path);
        let r = *r;
        self.slice(At { pid: r.pid, kind, ts: r.ts, dur: r.dur }, key, &make, &mut |s, seq| {
            s.arg_str(seq, Arg::Path, path);
            s.arg_int(Arg::Fd, i64::from(r.fd));
            if r.offset_src != OffsetSrc::None {
                s.arg_uint(Arg::Offset, r.offset);
            }
            s.arg_uint(Arg::Requested, r.requested);
            if r.ret >= 0 {
                s.arg_int(Arg::Returned, r.ret);
            } else {
                s.arg_str(seq, Arg::Errno, names::errno(-r.ret).as_bytes());
            }
            s.arg_int(Arg::Tid, i64::from(r.tid));
            if r.kind != FileKind::Regular {
                s.arg_str(seq, Arg::Kind, r.kind.name().as_bytes());
            }
        })
    }

    fn open(&mut self, f: &Frame<'_>, r: &Open) -> io::Result<()> {
        let abs = f.str(r.abs_path);
        let base = names::basename(&String::from_utf8_lossy(abs)).to_string();
        let (op, ret) = (r.op, r.ret);
        // Names differ per file: key on the path's string id in this frame
        // would not survive frames, so format (opens are rare next to reads).
        let make = move || {
            if ret < 0 {
                format!("{} {} {}", op.name(), base, names::errno(-ret))
            } else {
                format!("{} {}", op.name(), base)
            }
        };
        let name = make();
        let key = hash_str(&name);
        let passed = f.str(r.path);
        let r = *r;
        self.slice(
            At { pid: r.pid, kind: Lanes::Opens, ts: r.ts, dur: r.dur },
            key,
            &move || name.clone(),
            &mut |s, seq| {
                s.arg_str(seq, Arg::Path, passed);
                s.arg_str(seq, Arg::AbsPath, abs);
                s.arg_str(seq, Arg::Flags, names::open_flags(r.flags).as_bytes());
                if r.flags & 0o100 != 0 || r.flags & 0o20200000 == 0o20200000 {
                    s.arg_str(seq, Arg::Mode, format!("{:#o}", r.mode).as_bytes());
                }
                if r.dirfd != -100 {
                    s.arg_int(Arg::Dirfd, i64::from(r.dirfd));
                }
                if r.ret >= 0 {
                    s.arg_int(Arg::Fd, r.ret);
                    if r.kind != FileKind::Regular {
                        s.arg_str(seq, Arg::Kind, r.kind.name().as_bytes());
                    }
                } else {
                    s.arg_str(seq, Arg::Errno, names::errno(-r.ret).as_bytes());
                }
                s.arg_int(Arg::Tid, i64::from(r.tid));
            },
        )
    }

    fn close(&mut self, f: &Frame<'_>, r: &Close) -> io::Result<()> {
        let path = f.str(r.path);
        let name = match r.ret {
            0.. => format!("close {}", names::basename(&String::from_utf8_lossy(path))),
            e => format!("close {} {}", names::basename(&String::from_utf8_lossy(path)), names::errno(-e)),
        };
        let key = hash_str(&name);
        let r = *r;
        self.slice(
            At { pid: r.pid, kind: Lanes::Opens, ts: r.ts, dur: r.dur },
            key,
            &move || name.clone(),
            &mut |s, seq| {
                s.arg_str(seq, Arg::Path, path);
                s.arg_int(Arg::Fd, i64::from(r.fd));
                if r.ret < 0 {
                    s.arg_str(seq, Arg::Errno, names::errno(-r.ret).as_bytes());
                }
                s.arg_int(Arg::Tid, i64::from(r.tid));
            },
        )
    }

    fn transfer(&mut self, f: &Frame<'_>, r: &Transfer) -> io::Result<()> {
        let (op, ret) = (r.op, r.ret);
        let key = (1u64 << 63) ^ ((op as u64) << 56) ^ (ret as u64 & ((1 << 56) - 1));
        let make = move || {
            if ret < 0 {
                format!("{} {}", op.name(), names::errno(-ret))
            } else {
                format!("{} {}", op.name(), names::size(ret as u64))
            }
        };
        let (inp, outp) = (f.str(r.in_path), f.str(r.out_path));
        let r = *r;
        self.slice(At { pid: r.pid, kind: Lanes::Reads, ts: r.ts, dur: r.dur }, key, &make, &mut |s, seq| {
            s.arg_str(seq, Arg::InPath, inp);
            s.arg_str(seq, Arg::OutPath, outp);
            s.arg_int(Arg::InFd, i64::from(r.in_fd));
            s.arg_int(Arg::OutFd, i64::from(r.out_fd));
            s.arg_uint(Arg::Requested, r.requested);
            if r.ret >= 0 {
                s.arg_int(Arg::Returned, r.ret);
            } else {
                s.arg_str(seq, Arg::Errno, names::errno(-r.ret).as_bytes());
            }
            s.arg_int(Arg::Tid, i64::from(r.tid));
        })
    }

    /// Ends the trace (a second clock snapshot from the trailer, if any).
    pub fn finish(mut self, trailer: Option<&Trailer>) -> io::Result<(W, ExportStats)> {
        if let Some(t) = trailer {
            self.clock_snapshot(t.end)?;
        }
        let mut stats = self.stats.clone();
        stats.packets = self.sink.packets;
        stats.bytes = self.sink.bytes;
        Ok((self.sink.into_inner()?, stats))
    }
}

fn hash_str(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish() | (1 << 62)
}

/// Exports a whole log. `on_diag` receives each problem the reader worked
/// around (already described for people).
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
