//! Streaming packet output and per-sequence interning.
//!
//! A Perfetto trace is `Trace.packet` repeated: each packet is written as
//! `0x0A <varint len> <TracePacket>` as soon as it is made, so the exporter
//! never holds more than one packet.

use std::collections::HashMap;
use std::io::{self, Write};

use prost::Message;

use crate::proto::{
    trace_packet::SequenceFlags, DebugAnnotationName, EventName, InternedData, InternedString, TracePacket,
    TracePacketDefaults, TrackEventDefaults,
};

pub struct PacketSink<W: Write> {
    out: W,
    buf: Vec<u8>,
    pub bytes: u64,
    pub packets: u64,
}

impl<W: Write> PacketSink<W> {
    pub fn new(out: W) -> Self {
        PacketSink { out, buf: Vec::with_capacity(256), bytes: 0, packets: 0 }
    }

    pub fn write(&mut self, p: &TracePacket) -> io::Result<()> {
        self.buf.clear();
        self.buf.push(0x0a);
        let len = p.encoded_len();
        prost::encoding::encode_varint(len as u64, &mut self.buf);
        p.encode(&mut self.buf).map_err(io::Error::other)?;
        self.out.write_all(&self.buf)?;
        self.bytes += self.buf.len() as u64;
        self.packets += 1;
        Ok(())
    }

    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Names of the debug annotations (slice args) we use. Every sequence
/// interns all of them when its state is (re)set, so an arg costs a 1-byte
/// iid instead of its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Arg {
    Path = 1,
    Fd,
    Offset,
    Requested,
    Returned,
    Errno,
    Tid,
    Flags,
    Mode,
    AbsPath,
    Dirfd,
    Kind,
    InPath,
    OutPath,
    InFd,
    OutFd,
    Status,
    Command,
    Lost,
    Sector,
    Bytes,
    QueueNs,
    DeviceNs,
    Process,
    RqFlags,
    Disk,
    Rank,
    Value,
    PhaseKind,
    Result,
}

impl Arg {
    const ALL: [(Arg, &'static str); 30] = [
        (Arg::Path, "path"),
        (Arg::Fd, "fd"),
        (Arg::Offset, "offset"),
        (Arg::Requested, "requested"),
        (Arg::Returned, "returned"),
        (Arg::Errno, "errno"),
        (Arg::Tid, "tid"),
        (Arg::Flags, "flags"),
        (Arg::Mode, "mode"),
        (Arg::AbsPath, "absolute path"),
        (Arg::Dirfd, "dirfd"),
        (Arg::Kind, "file kind"),
        (Arg::InPath, "in path"),
        (Arg::OutPath, "out path"),
        (Arg::InFd, "in fd"),
        (Arg::OutFd, "out fd"),
        (Arg::Status, "status"),
        (Arg::Command, "command"),
        (Arg::Lost, "lost"),
        (Arg::Sector, "sector"),
        (Arg::Bytes, "bytes"),
        (Arg::QueueNs, "queue ns"),
        (Arg::DeviceNs, "device ns"),
        (Arg::Process, "process"),
        (Arg::RqFlags, "request flags"),
        (Arg::Disk, "disk"),
        (Arg::Rank, "rank"),
        (Arg::Value, "value"),
        (Arg::PhaseKind, "phase"),
        (Arg::Result, mltrace_log::labels::RESULT_ARG),
    ];
}

/// Interning tables are reset (and the sequence's incremental state
/// cleared) once they hold this many strings: bounded memory on any log.
const MAX_INTERNED: usize = 20_000;

/// One packet sequence: its id, what it has interned, its default track.
pub struct Seq {
    pub id: u32,
    pub track: Option<u64>,
    started: bool,
    names: HashMap<String, u64>,
    strings: HashMap<Vec<u8>, u64>,
}

impl Seq {
    pub fn new(id: u32, track: Option<u64>) -> Self {
        Seq { id, track, started: false, names: HashMap::new(), strings: HashMap::new() }
    }

    /// Prepares `p` for a packet on this sequence: sets the sequence id and
    /// flags, and on the first packet after a reset clears the incremental
    /// state, sets the defaults and interns the arg names into `interned`.
    pub fn begin_packet(&mut self, p: &mut TracePacket, interned: &mut InternedData) {
        p.trusted_packet_sequence_id = Some(self.id);
        let mut flags = SequenceFlags::SeqNeedsIncrementalState as u32;
        if self.names.len() + self.strings.len() > MAX_INTERNED {
            self.started = false;
            self.names.clear();
            self.strings.clear();
        }
        if !self.started {
            self.started = true;
            flags |= SequenceFlags::SeqIncrementalStateCleared as u32;
            p.trace_packet_defaults = Some(TracePacketDefaults {
                timestamp_clock_id: None,
                track_event_defaults: self
                    .track
                    .map(|t| TrackEventDefaults { track_uuid: Some(t), ..Default::default() }),
            });
            for (a, n) in Arg::ALL {
                interned.debug_annotation_names.push(DebugAnnotationName { iid: Some(a as u64), name: Some(n.into()) });
            }
        }
        p.sequence_flags = Some(flags);
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

    /// The iid of a string arg value, defining it in `interned` if new.
    pub fn string(&mut self, s: &[u8], interned: &mut InternedData) -> u64 {
        if let Some(&iid) = self.strings.get(s) {
            return iid;
        }
        let iid = self.strings.len() as u64 + 1;
        self.strings.insert(s.to_vec(), iid);
        interned.debug_annotation_string_values.push(InternedString { iid: Some(iid), str: Some(s.to_vec()) });
        iid
    }
}
