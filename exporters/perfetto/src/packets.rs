//! Streaming packet output and per-sequence interning.
//!
//! A Perfetto trace is `Trace.packet` repeated: each packet is encoded as
//! `0x0A <varint len> <TracePacket>` as soon as it is made; batches of them
//! are written out (deflated into one `compressed_packets` packet when
//! compression is on), so the exporter holds at most one batch.
//!
//! Timestamps on a sequence are deltas on a sequence-scoped incremental
//! clock (2-3 bytes instead of 9); a packet earlier than its sequence's
//! last one carries an absolute BOOTTIME timestamp instead.

// Keys are our own pids, ids and strings: a fast non-DoS-resistant hash.
use rustc_hash::FxHashMap as HashMap;
use std::io::{self, Write};

use crate::proto::{
    clock_snapshot::Clock, trace_packet::SequenceFlags, BuiltinClock, ClockSnapshot, DebugAnnotationName, EventName,
    InternedData, InternedString, TracePacket, TracePacketDefaults, TrackEvent, TrackEventDefaults,
};
use crate::wire;
use mltrace_model::ArgKey;

pub struct PacketSink<W: Write> {
    out: W,
    /// Encoded packets not yet written (compressed together when on).
    pending: Vec<u8>,
    compress: Option<flate2::Compress>,
    compressed: Vec<u8>,
    /// Bytes written to `out`, and before compression.
    pub bytes: u64,
    pub raw_bytes: u64,
    pub packets: u64,
}

/// Packets are compressed in batches of about this many bytes: large
/// enough for deflate to find the repetition, small enough to bound memory.
const BATCH: usize = 1 << 20;

impl<W: Write> PacketSink<W> {
    /// `compress`: deflate level for `compressed_packets` batches (Perfetto
    /// reads them natively), or `None` for plain packets.
    pub fn new(out: W, compress: Option<u32>) -> Self {
        PacketSink {
            out,
            pending: Vec::with_capacity(BATCH + 4096),
            compress: compress.map(|l| flate2::Compress::new(flate2::Compression::new(l), true)),
            compressed: Vec::new(),
            bytes: 0,
            raw_bytes: 0,
            packets: 0,
        }
    }

    pub fn write(&mut self, p: &TracePacket) -> io::Result<()> {
        self.write_event(p, None)
    }

    /// Writes `p` with `event` (a track event and its encoded args) in it.
    pub fn write_event(&mut self, p: &TracePacket, event: Option<(&TrackEvent, &[u8])>) -> io::Result<()> {
        let before = self.pending.len();
        wire::packet(&mut self.pending, p, event);
        self.wrote(before)
    }

    /// Writes a packet of only a timestamp, sequence id, flags and `ev`
    /// (which [`wire::event_is_plain`]) with `args`.
    fn write_plain(&mut self, ts: u64, seq: u32, flags: u32, ev: &TrackEvent, args: &[u8]) -> io::Result<()> {
        debug_assert!(wire::event_is_plain(ev));
        let before = self.pending.len();
        wire::plain_event(&mut self.pending, Some(ts), seq, flags, ev, args);
        self.wrote(before)
    }

    /// Counts the packet appended to `pending` from `before` on, and
    /// writes the batch out once it is full.
    #[inline]
    fn wrote(&mut self, before: usize) -> io::Result<()> {
        self.raw_bytes += (self.pending.len() - before) as u64;
        self.packets += 1;
        if self.pending.len() >= BATCH {
            self.flush_pending()?;
        }
        Ok(())
    }

    fn flush_pending(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let Some(z) = self.compress.as_mut() else {
            self.out.write_all(&self.pending)?;
            self.bytes += self.pending.len() as u64;
            self.pending.clear();
            return Ok(());
        };
        z.reset();
        self.compressed.clear();
        self.compressed.reserve(self.pending.len() / 2 + 1024);
        loop {
            let consumed = z.total_in() as usize;
            let st = z
                .compress_vec(&self.pending[consumed..], &mut self.compressed, flate2::FlushCompress::Finish)
                .map_err(io::Error::other)?;
            if st == flate2::Status::StreamEnd {
                break;
            }
            self.compressed.reserve(self.compressed.capacity().max(4096));
        }
        let mut head = std::mem::take(&mut self.pending);
        head.clear();
        wire::compressed_packets_header(&mut head, self.compressed.len());
        self.out.write_all(&head)?;
        self.out.write_all(&self.compressed)?;
        self.bytes += (head.len() + self.compressed.len()) as u64;
        head.clear();
        self.pending = head;
        Ok(())
    }

    /// Writes what is pending; returns the bytes written so far.
    pub fn flush(&mut self) -> io::Result<u64> {
        self.flush_pending()?;
        self.out.flush()?;
        Ok(self.bytes)
    }

    pub fn into_inner(mut self) -> io::Result<(W, u64)> {
        self.flush()?;
        Ok((self.out, self.bytes))
    }
}

/// The sequence-scoped clock (64..127 are per sequence) whose timestamps
/// are deltas; its value 0 is BOOTTIME 0, so values are BOOTTIME times.
const INCREMENTAL_CLOCK: u32 = 64;

/// Interning tables are reset (and the sequence's incremental state
/// cleared) once they hold this many strings: bounded memory on any log.
const MAX_INTERNED: usize = 20_000;

/// One packet sequence: its id, what it has interned, its default track.
pub struct Seq {
    pub id: u32,
    pub track: Option<u64>,
    /// The machine of every packet (several hosts); `None`: the host.
    pub machine: Option<u32>,
    started: bool,
    /// The incremental clock's value (the last delta-stamped packet's time);
    /// `None` until the clock is defined after a reset.
    clock: Option<u64>,
    names: HashMap<String, u64>,
    strings: HashMap<Vec<u8>, u64>,
    /// The last string looked up and its iid (0: none).
    last_string: (u64, Vec<u8>),
}

impl Seq {
    pub fn new(id: u32, track: Option<u64>) -> Self {
        Seq {
            id,
            track,
            machine: None,
            started: false,
            clock: None,
            names: HashMap::default(),
            strings: HashMap::default(),
            last_string: (0, Vec::new()),
        }
    }

    /// Prepares `p` for a packet on this sequence: sets the sequence id and
    /// flags, and on the first packet after a reset clears the incremental
    /// state, sets the defaults and interns the arg names into `interned`.
    pub fn begin_packet(&mut self, p: &mut TracePacket, interned: &mut InternedData) {
        p.trusted_packet_sequence_id = Some(self.id);
        p.machine_id = self.machine;
        let mut flags = SequenceFlags::SeqNeedsIncrementalState as u32;
        if self.names.len() + self.strings.len() > MAX_INTERNED {
            self.started = false;
            self.clock = None;
            self.names.clear();
            self.strings.clear();
            self.last_string.0 = 0;
        }
        if !self.started {
            self.started = true;
            flags |= SequenceFlags::SeqIncrementalStateCleared as u32;
            p.trace_packet_defaults = Some(TracePacketDefaults {
                timestamp_clock_id: Some(INCREMENTAL_CLOCK),
                track_event_defaults: self
                    .track
                    .map(|t| TrackEventDefaults { track_uuid: Some(t), ..Default::default() }),
            });
            // Every sequence interns all arg names when its state is
            // (re)set, so an arg costs a 1-byte iid instead of its name.
            for a in ArgKey::ALL {
                let name = Some(a.name().into());
                interned.debug_annotation_names.push(DebugAnnotationName { iid: Some(a as u64), name });
            }
        }
        p.sequence_flags = Some(flags);
    }

    /// Writes `p` (prepared by [`Seq::begin_packet`]) stamped `ts`. After a
    /// reset the packet that clears the state, then one defining the
    /// incremental clock, go first: a packet with a clock snapshot carries
    /// nothing else for the importer.
    pub fn write<W: Write>(
        &mut self,
        sink: &mut PacketSink<W>,
        p: &mut TracePacket,
        ts: u64,
        event: Option<(&TrackEvent, &[u8])>,
    ) -> io::Result<()> {
        if self.clock.is_none() {
            let cleared = SequenceFlags::SeqIncrementalStateCleared as u32;
            if p.sequence_flags.unwrap_or(0) & cleared != 0 {
                sink.write(&TracePacket {
                    trusted_packet_sequence_id: Some(self.id),
                    machine_id: self.machine,
                    sequence_flags: Some(cleared),
                    trace_packet_defaults: p.trace_packet_defaults.take(),
                    ..Default::default()
                })?;
                p.sequence_flags = Some(SequenceFlags::SeqNeedsIncrementalState as u32);
            }
            let clock = |id, incremental| Clock {
                clock_id: Some(id),
                timestamp: Some(0),
                is_incremental: incremental,
                ..Default::default()
            };
            sink.write(&TracePacket {
                trusted_packet_sequence_id: Some(self.id),
                machine_id: self.machine,
                clock_snapshot: Some(ClockSnapshot {
                    clocks: vec![clock(INCREMENTAL_CLOCK, Some(true)), clock(BuiltinClock::Boottime as u32, None)],
                    primary_trace_clock: None,
                }),
                ..Default::default()
            })?;
            self.clock = Some(0);
        }
        let last = self.clock.unwrap_or(0);
        if ts >= last {
            p.timestamp = Some(ts - last);
            self.clock = Some(ts);
        } else {
            p.timestamp = Some(ts);
            p.timestamp_clock_id = Some(BuiltinClock::Boottime as u32);
        }
        sink.write_event(p, event)
    }

    /// Whether a packet at `ts` would need nothing from this sequence but
    /// its id and a clock delta: no reset due, clock defined and not past
    /// `ts`. Then [`Seq::write_plain`] may write it without a
    /// [`TracePacket`] (slice ends, and most begins: the hot path).
    #[inline]
    pub fn plain_ready(&self, ts: u64) -> bool {
        // The plain path has no machine id: another machine's packets take the full one.
        self.machine.is_none()
            && self.started
            && self.clock.is_some_and(|c| ts >= c)
            && self.names.len() + self.strings.len() <= MAX_INTERNED
    }

    /// Writes `ev` with `args` at `ts`, which [`Seq::plain_ready`] allowed.
    pub fn write_plain<W: Write>(
        &mut self,
        sink: &mut PacketSink<W>,
        ts: u64,
        ev: &TrackEvent,
        args: &[u8],
    ) -> io::Result<()> {
        debug_assert!(self.plain_ready(ts));
        let delta = ts - self.clock.unwrap_or(0);
        self.clock = Some(ts);
        sink.write_plain(delta, self.id, SequenceFlags::SeqNeedsIncrementalState as u32, ev, args)
    }

    /// The iid of an event name, defining it in `interned` if new.
    pub fn name(&mut self, name: &str, interned: &mut InternedData) -> u64 {
        if let Some(&iid) = self.names.get(name) {
            return iid;
        }
        let iid = self.names.len() as u64 + 1;
        self.names.insert(name.to_string(), iid);
        interned.event_names.push(EventName { iid: Some(iid), name: Some(name.to_string()) });
        iid
    }

    fn remember(&mut self, iid: u64, s: &[u8]) {
        self.last_string.0 = iid;
        self.last_string.1.clear();
        self.last_string.1.extend_from_slice(s);
    }

    /// The iid of a string arg value, defining it in `interned` if new.
    pub fn string(&mut self, s: &[u8], interned: &mut InternedData) -> u64 {
        // A lane mostly repeats its last path: compare before hashing.
        if self.last_string.0 != 0 && self.last_string.1 == s {
            return self.last_string.0;
        }
        if let Some(&iid) = self.strings.get(s) {
            self.remember(iid, s);
            return iid;
        }
        let iid = self.strings.len() as u64 + 1;
        self.strings.insert(s.to_vec(), iid);
        self.remember(iid, s);
        interned.debug_annotation_string_values.push(InternedString { iid: Some(iid), str: Some(s.to_vec()) });
        iid
    }
}
