//! The model's tracks and events as Perfetto TrackEvent packets, streamed.
//!
//! Each slice, counter or instant track is its own packet sequence whose
//! default track is that track, so events need no track id; names and
//! string args are interned per sequence; timestamps are deltas on a
//! per-sequence incremental clock. Memory is bounded by the tracks of the
//! file, not by its events.

// Keys are our own ids: a fast non-DoS-resistant hash.
use rustc_hash::FxHashMap as HashMap;
use std::io::{self, Write};

use mltrace_log::{host_of, local_pid, ClockAnchor, Trailer};
use mltrace_model::{
    ArgKey, ArgSink, Args, Encoder, FileMeta, Name, Slice, SwitchEvent, Track, TrackId, TrackKind, Unit, WakingEvent,
};

use crate::packets::{PacketSink, Seq};
use crate::proto::{
    clock_snapshot::Clock, counter_descriptor::Unit as PUnit, process_tree, trace_packet::SequenceFlags,
    track_descriptor::ChildTracksOrdering, track_descriptor::ProcessOrdering, track_event::Type, BuiltinClock,
    ChromeEventBundle, ChromeMetadata, ClockSnapshot, CounterDescriptor, FtraceEvent, FtraceEventBundle, InternedData,
    InternedString, ProcessDescriptor, ProcessTree, SchedBlockedReasonFtraceEvent, SchedSwitchFtraceEvent,
    SchedWakingFtraceEvent, SystemInfo, ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent, Utsname,
};
use crate::wire;

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

/// Args straight into the packet being built.
struct PArgs<'a> {
    args: &'a mut Vec<u8>,
    interned: &'a mut InternedData,
    seq: &'a mut Seq,
}

impl ArgSink for PArgs<'_> {
    #[inline]
    fn int(&mut self, k: ArgKey, v: i64) {
        wire::annotation_int(self.args, k as u64, v);
    }
    #[inline]
    fn uint(&mut self, k: ArgKey, v: u64) {
        wire::annotation_uint(self.args, k as u64, v);
    }
    #[inline]
    fn str(&mut self, k: ArgKey, v: &[u8]) {
        let iid = self.seq.string(v, self.interned);
        wire::annotation_string_iid(self.args, k as u64, iid);
    }
}

/// One declared track: its uuid, and the sequence of its events (made on
/// first use).
struct TrackOut {
    uuid: u64,
    seq: Option<Seq>,
    /// Name iids by name key, so names are formatted once per sequence.
    name_keys: HashMap<u64, u64>,
    count_unit: bool,
    /// Its host's machine (0: the first host, or the only one).
    machine: u32,
}

/// `TracePacket.machine_id`: absent for machine 0, which the importer
/// takes as the host machine.
fn machine_id(m: u32) -> Option<u32> {
    (m != 0).then_some(m)
}

/// A Perfetto trace file; see the module docs.
pub struct PerfettoEncoder<W: Write> {
    sink: PacketSink<W>,
    global: Seq,
    tracks: Vec<TrackOut>,
    next_seq: u32,
    scratch: Scratch,
    /// The file's start, for packets that need a time and have none.
    start_ts: u64,
    /// Scheduling events not yet written, by machine and CPU: written as
    /// one ftrace bundle per CPU when [`SCHED_BATCH`] are waiting, and at
    /// the end.
    sched: HashMap<(u32, u32), Vec<FtraceEvent>>,
    /// By machine (the importer keeps a sequence per machine): the
    /// bundles' own sequence, for their interned names of the calls
    /// threads sleep in (kernel_symbols).
    sched_seqs: HashMap<u32, SchedSeq>,
    /// The machine of the top-level groups declared next.
    machine: u32,
}

/// A machine's ftrace bundles' sequence: its id (0 until the first
/// bundle), the call names' iids, and the names not yet written.
#[derive(Default)]
struct SchedSeq {
    id: u32,
    calls: HashMap<&'static str, u64>,
    new: Vec<InternedString>,
}

/// Scheduling events per ftrace bundle.
const SCHED_BATCH: usize = 512;

const UUID_BASE: u64 = 0x6d6c_7472_0000_0000;

impl<W: Write> PerfettoEncoder<W> {
    pub fn new(out: W, opts: ExportOptions) -> Self {
        PerfettoEncoder {
            sink: PacketSink::new(out, opts.compress),
            global: Seq::new(1, None),
            tracks: Vec::new(),
            next_seq: 2,
            start_ts: 0,
            sched: HashMap::default(),
            sched_seqs: HashMap::default(),
            machine: 0,
            scratch: Scratch {
                end: TrackEvent { r#type: Some(Type::SliceEnd as i32), ..Default::default() },
                ..Default::default()
            },
        }
    }

    /// Packets written, bytes written and bytes before compression.
    pub fn counts(&self) -> (u64, u64, u64) {
        (self.sink.packets, self.sink.bytes, self.sink.raw_bytes)
    }

    pub fn into_inner(self) -> io::Result<(W, u64)> {
        self.sink.into_inner()
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

    /// The parent link, which only a process tree packet can give. The
    /// importer names a process there from cmdline[0] (over the
    /// descriptor's name), so that is the name, with the real command
    /// line after it; with one element it would cut the name at a space.
    fn process_tree(&mut self, p: &mltrace_model::ProcessDesc<'_>, ppid: u32, name: &str) -> io::Result<()> {
        let mut cmdline = Vec::with_capacity(p.cmdline.len() + 1);
        cmdline.push(name.to_string());
        cmdline.extend(p.cmdline.iter().cloned());
        if cmdline.len() == 1 {
            cmdline.push(String::new());
        }
        let proc = process_tree::Process {
            pid: Some(local_pid(p.pid) as i32),
            ppid: Some(local_pid(ppid) as i32),
            cmdline,
            cmdline_is_comm: Some(true),
        };
        self.sink.write(&TracePacket {
            timestamp: Some(p.start_ts.unwrap_or(self.start_ts)),
            trusted_packet_sequence_id: Some(self.global.id),
            machine_id: machine_id(host_of(p.pid) as u32),
            process_tree: Some(ProcessTree { processes: vec![proc], threads: vec![] }),
            ..Default::default()
        })
    }

    /// Queues a scheduling event of `cpu`, writing its bundle when full.
    fn sched_event(&mut self, machine: u32, cpu: u32, ev: FtraceEvent) -> io::Result<()> {
        let q = self.sched.entry((machine, cpu)).or_default();
        q.push(ev);
        if q.len() >= SCHED_BATCH {
            self.flush_sched((machine, cpu))?;
        }
        Ok(())
    }

    /// Writes a CPU's waiting events as one bundle, in time order.
    fn flush_sched(&mut self, (machine, cpu): (u32, u32)) -> io::Result<()> {
        let Some(q) = self.sched.get_mut(&(machine, cpu)) else { return Ok(()) };
        let mut event = std::mem::take(q);
        if event.is_empty() {
            return Ok(());
        }
        // Stable: a sleep's blocked reason stays after its switch.
        event.sort_by_key(|e| e.timestamp);
        let ss = self.sched_seqs.entry(machine).or_default();
        let flags = if ss.id == 0 {
            self.next_seq += 1;
            ss.id = self.next_seq;
            Some(SequenceFlags::SeqIncrementalStateCleared as u32)
        } else {
            None
        };
        let seq = ss.id;
        let interned = (!ss.new.is_empty())
            .then(|| InternedData { kernel_symbols: std::mem::take(&mut ss.new), ..Default::default() });
        let p = TracePacket {
            trusted_packet_sequence_id: Some(seq),
            sequence_flags: flags,
            interned_data: interned,
            machine_id: machine_id(machine),
            ftrace_events: Some(FtraceEventBundle { cpu: Some(cpu), event }),
            ..Default::default()
        };
        self.sink.write(&p)
    }

    /// The track's sequence, made on first use.
    #[inline]
    fn track_seq(&mut self, t: TrackId) -> &mut TrackOut {
        let tr = &mut self.tracks[t as usize];
        if tr.seq.is_none() {
            self.next_seq += 1;
            let mut seq = Seq::new(self.next_seq, Some(tr.uuid));
            seq.machine = machine_id(tr.machine);
            tr.seq = Some(seq);
        }
        tr
    }
}

impl<W: Write> Encoder for PerfettoEncoder<W> {
    fn begin(&mut self, meta: &FileMeta<'_>) -> io::Result<()> {
        self.start_ts = meta.anchor.boottime_ns;
        self.clock_snapshot(meta.anchor)?;
        // The root track: UIs from v57 order top-level tracks and process
        // groups by sibling_order_rank only when it says so. (v52 orders
        // top-level tracks by name and processes by their slice count.)
        let root = TrackDescriptor {
            uuid: Some(0),
            child_ordering: Some(ChildTracksOrdering::Explicit as i32),
            process_ordering: Some(ProcessOrdering::Explicit as i32),
            ..Default::default()
        };
        self.sink.write(&TracePacket {
            trusted_packet_sequence_id: Some(self.global.id),
            track_descriptor: Some(root),
            ..Default::default()
        })?;
        // What the file is and what it leaves out, in the importer's
        // metadata table (as `cr-mltrace.*`).
        let kv = |k: &str, v: String| ChromeMetadata { name: Some(format!("mltrace.{k}")), string_value: Some(v) };
        let mut metadata = vec![kv("contents", meta.title.to_string())];
        if !meta.zero_counters.is_empty() {
            metadata.push(kv("counters_always_zero_left_out", meta.zero_counters.join(", ")));
        }
        self.sink.write(&TracePacket {
            trusted_packet_sequence_id: Some(self.global.id),
            chrome_events: Some(ChromeEventBundle { metadata }),
            ..Default::default()
        })?;
        // Each host of a merged log is a machine (table `machine`); v52
        // has no field for its name, which labels its tracks instead.
        for (h, host) in meta.header.hosts.iter().enumerate() {
            let uts = Utsname {
                sysname: Some("Linux".into()),
                release: (!host.kernel.is_empty()).then(|| host.kernel.clone()),
                ..Default::default()
            };
            self.sink.write(&TracePacket {
                timestamp: Some(self.start_ts),
                trusted_packet_sequence_id: Some(self.global.id),
                machine_id: machine_id(h as u32),
                system_info: Some(SystemInfo {
                    utsname: Some(uts),
                    num_cpus: (host.cpu_count > 0).then_some(host.cpu_count),
                }),
                ..Default::default()
            })?;
        }
        Ok(())
    }

    fn machine(&mut self, host: u32) {
        self.machine = host;
    }

    fn track(&mut self, t: &Track<'_>) -> io::Result<()> {
        let uuid = UUID_BASE + u64::from(t.id);
        // Processes and threads by their pid's host; other tracks by their
        // parent's, top-level groups by the host the model last named.
        let machine = match t.kind {
            TrackKind::Process(p) => host_of(p.pid) as u32,
            TrackKind::Thread { pid, .. } => host_of(pid) as u32,
            _ => match t.parent {
                Some(p) => self.tracks.get(p as usize).map_or(0, |x| x.machine),
                None => self.machine,
            },
        };
        let parent = t.parent.map(|p| UUID_BASE + u64::from(p));
        let mut d = TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: parent,
            sibling_order_rank: Some(t.rank),
            ..Default::default()
        };
        // Groups, and tracks that may have children (top-level ones are
        // groups with a row of their own), order their children by rank.
        if matches!(t.kind, TrackKind::Group | TrackKind::Process(_)) || t.parent.is_none() {
            d.child_ordering = Some(ChildTracksOrdering::Explicit as i32);
        }
        let mut count_unit = false;
        match t.kind {
            TrackKind::Process(p) => {
                d.parent_uuid = None;
                d.process = Some(ProcessDescriptor {
                    pid: Some(local_pid(p.pid) as i32),
                    process_name: Some(t.name.to_string()),
                    cmdline: p.cmdline.to_vec(),
                    start_timestamp_ns: p.start_ts.map(|t| t as i64),
                });
                if let Some(ppid) = p.parent_pid {
                    self.process_tree(&p, ppid, t.name)?;
                }
            }
            TrackKind::Thread { pid, tid } => {
                d.parent_uuid = None;
                d.thread = Some(ThreadDescriptor {
                    pid: Some(local_pid(pid) as i32),
                    tid: Some(i64::from(local_pid(tid))),
                    // An untraced waker's name is not known: its switches name it.
                    thread_name: (!t.name.is_empty()).then(|| t.name.to_string()),
                });
            }
            TrackKind::Group | TrackKind::Slices => {
                d.name = Some(t.name.to_string());
            }
            TrackKind::Counter(u) => {
                d.name = Some(t.name.to_string());
                let (unit, unit_name) = match u {
                    Unit::Bytes => (Some(PUnit::SizeBytes), None),
                    Unit::Count => (Some(PUnit::Count), None),
                    Unit::TimeNs => (Some(PUnit::TimeNs), None),
                    Unit::None => (None, None),
                    Unit::Named(s) => (None, Some(s.to_string())),
                };
                count_unit = u == Unit::Count;
                d.counter = Some(CounterDescriptor { unit: unit.map(|u| u as i32), unit_name, ..Default::default() });
            }
        }
        let i = t.id as usize;
        if self.tracks.len() <= i {
            self.tracks.resize_with(i + 1, || TrackOut {
                uuid: 0,
                seq: None,
                name_keys: HashMap::default(),
                count_unit: false,
                machine: 0,
            });
        }
        self.tracks[i] = TrackOut { uuid, seq: None, name_keys: HashMap::default(), count_unit, machine };
        let p = TracePacket {
            trusted_packet_sequence_id: Some(self.global.id),
            machine_id: machine_id(machine),
            track_descriptor: Some(d),
            ..Default::default()
        };
        self.sink.write(&p)
    }

    fn slice<A: Args>(&mut self, sl: &Slice<'_>, args: &A) -> io::Result<()> {
        let end = sl.ts.saturating_add(sl.dur);
        self.track_seq(sl.track);
        let tr = &mut self.tracks[sl.track as usize];
        let seq = tr.seq.as_mut().unwrap();
        let s = &mut self.scratch;
        s.clear();
        seq.begin_packet(&mut s.pkt, &mut s.interned);
        if s.pkt.sequence_flags.unwrap_or(0) & 1 != 0 {
            tr.name_keys.clear();
        }
        let name_iid = match sl.name {
            Name::Str(n) => seq.name(n, &mut s.interned),
            Name::Keyed(key, make) => match tr.name_keys.get(&key) {
                Some(&iid) => iid,
                None => {
                    let iid = seq.name(&make(), &mut s.interned);
                    tr.name_keys.insert(key, iid);
                    iid
                }
            },
        };
        s.ev.r#type = Some(Type::SliceBegin as i32);
        s.ev.name_iid = Some(name_iid);
        s.ev.flow_ids.extend_from_slice(sl.flows_out);
        s.ev.terminating_flow_ids.extend_from_slice(sl.flows_in);
        args.write(&mut PArgs { args: &mut s.args, interned: &mut s.interned, seq });
        s.emit(&mut self.sink, seq, sl.ts)?;
        if seq.plain_ready(end) {
            seq.write_plain(&mut self.sink, end, &s.end, &[])
        } else {
            s.clear();
            seq.begin_packet(&mut s.pkt, &mut s.interned);
            if s.pkt.sequence_flags.unwrap_or(0) & 1 != 0 {
                // The sequence reset here: names cached before are gone.
                tr.name_keys.clear();
            }
            s.ev.r#type = Some(Type::SliceEnd as i32);
            s.emit(&mut self.sink, seq, end)
        }
    }

    fn instant<A: Args>(&mut self, track: TrackId, ts: u64, name: Name<'_>, args: &A) -> io::Result<()> {
        self.track_seq(track);
        let tr = &mut self.tracks[track as usize];
        let seq = tr.seq.as_mut().unwrap();
        let s = &mut self.scratch;
        s.clear();
        seq.begin_packet(&mut s.pkt, &mut s.interned);
        s.ev.r#type = Some(Type::Instant as i32);
        s.ev.name_iid = Some(seq.name(&name.to_string_now(), &mut s.interned));
        args.write(&mut PArgs { args: &mut s.args, interned: &mut s.interned, seq });
        s.emit(&mut self.sink, seq, ts)
    }

    fn counter(&mut self, track: TrackId, ts: u64, value: f64) -> io::Result<()> {
        self.track_seq(track);
        let tr = &mut self.tracks[track as usize];
        let as_int = tr.count_unit && value.fract() == 0.0 && value.abs() < 9e15;
        let seq = tr.seq.as_mut().unwrap();
        let s = &mut self.scratch;
        s.clear();
        seq.begin_packet(&mut s.pkt, &mut s.interned);
        s.ev.r#type = Some(Type::Counter as i32);
        if as_int {
            s.ev.counter_value = Some(value as i64);
        } else {
            s.ev.double_counter_value = Some(value);
        }
        s.emit(&mut self.sink, seq, ts)
    }

    fn sched_switch(&mut self, e: &SwitchEvent<'_>) -> io::Result<()> {
        // Both sides ran on one CPU of one host: pid 0 (idle) has its host too.
        let machine = host_of(e.prev_tid) as u32;
        let ev = FtraceEvent {
            timestamp: Some(e.ts),
            pid: Some(local_pid(e.prev_tid)),
            sched_switch: Some(SchedSwitchFtraceEvent {
                prev_comm: Some(String::from_utf8_lossy(e.prev_comm).into_owned()),
                prev_pid: Some(local_pid(e.prev_tid) as i32),
                prev_prio: Some(e.prev_prio),
                prev_state: Some(e.prev_state),
                next_comm: Some(String::from_utf8_lossy(e.next_comm).into_owned()),
                next_pid: Some(local_pid(e.next_tid) as i32),
                next_prio: Some(e.next_prio),
            }),
            ..Default::default()
        };
        self.sched_event(machine, e.cpu, ev)?;
        if e.prev_call.is_empty() {
            return Ok(());
        }
        // The call prev sleeps in, as the sleep's "blocked function".
        let ss = self.sched_seqs.entry(machine).or_default();
        let next = ss.calls.len() as u64 + 1;
        let iid = *ss.calls.entry(e.prev_call).or_insert_with(|| {
            ss.new.push(InternedString { iid: Some(next), r#str: Some(e.prev_call.as_bytes().to_vec()) });
            next
        });
        let ev = FtraceEvent {
            timestamp: Some(e.ts),
            pid: Some(local_pid(e.prev_tid)),
            sched_blocked_reason: Some(SchedBlockedReasonFtraceEvent {
                pid: Some(local_pid(e.prev_tid) as i32),
                caller: Some(iid),
                io_wait: None,
            }),
            ..Default::default()
        };
        self.sched_event(machine, e.cpu, ev)
    }

    fn sched_waking(&mut self, w: &WakingEvent<'_>) -> io::Result<()> {
        let machine = host_of(w.tid) as u32;
        let ev = FtraceEvent {
            timestamp: Some(w.ts),
            pid: Some(local_pid(w.waker_tid)),
            sched_waking: Some(SchedWakingFtraceEvent {
                comm: Some(String::from_utf8_lossy(w.comm).into_owned()),
                pid: Some(local_pid(w.tid) as i32),
                prio: Some(w.prio),
                success: Some(1),
                target_cpu: Some(w.target_cpu as i32),
            }),
            ..Default::default()
        };
        self.sched_event(machine, w.cpu, ev)
    }

    fn end(&mut self, end: Option<ClockAnchor>, _trailer: Option<&Trailer>) -> io::Result<u64> {
        let mut queues: Vec<(u32, u32)> = self.sched.keys().copied().collect();
        queues.sort_unstable();
        for q in queues {
            self.flush_sched(q)?;
        }
        if let Some(a) = end {
            self.clock_snapshot(a)?;
        }
        self.sink.flush()
    }
}
