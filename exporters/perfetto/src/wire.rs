//! Protobuf encoding of the hot packets by hand.
//!
//! prost computes every nested message's length once per enclosing level
//! and goes through `Option`s field by field; a slice begin or end is most
//! of an export, so TracePacket's common fields, TrackEvent and
//! DebugAnnotation are written here directly, nested bodies into reused
//! buffers. Everything else in a packet (descriptors, interned data,
//! defaults, clock snapshots: rare) still goes through prost. The unit
//! tests check that both encodings decode to the same message.

use prost::Message;

use crate::proto::{DebugAnnotation, TracePacket, TrackEvent};

const VARINT: u32 = 0;
const I64: u32 = 1;
const LEN: u32 = 2;

#[inline]
pub fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[inline]
fn key(buf: &mut Vec<u8>, field: u32, wire: u32) {
    varint(buf, u64::from(field << 3 | wire));
}

#[inline]
fn uint(buf: &mut Vec<u8>, field: u32, v: u64) {
    key(buf, field, VARINT);
    varint(buf, v);
}

#[inline]
fn bytes(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(buf, field, LEN);
    varint(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

#[inline]
fn fixed64(buf: &mut Vec<u8>, field: u32, v: u64) {
    key(buf, field, I64);
    buf.extend_from_slice(&v.to_le_bytes());
}

/// A nested message already encoded by prost.
fn message<M: Message>(buf: &mut Vec<u8>, field: u32, m: &M) {
    key(buf, field, LEN);
    varint(buf, m.encoded_len() as u64);
    m.encode_raw(buf);
}

/// Reused buffers for nested bodies.
#[derive(Default)]
pub struct Encoder {
    body: Vec<u8>,
    event: Vec<u8>,
    ann: Vec<u8>,
}

impl Encoder {
    /// Appends `p` to `out` as a `Trace.packet` field (tag, length, body).
    /// `event` (a track event and its args, encoded) goes in as field 11
    /// when `p` has none of its own.
    pub fn packet(&mut self, out: &mut Vec<u8>, p: &TracePacket, event: Option<(&TrackEvent, &[u8])>) {
        let body = &mut self.body;
        body.clear();
        if let Some(ts) = p.timestamp {
            uint(body, 8, ts);
        }
        if let Some(c) = p.timestamp_clock_id {
            uint(body, 58, u64::from(c));
        }
        if let Some(id) = p.trusted_packet_sequence_id {
            uint(body, 10, u64::from(id));
        }
        if let Some(f) = p.sequence_flags {
            uint(body, 13, u64::from(f));
        }
        if let Some(c) = &p.clock_snapshot {
            message(body, 6, c);
        }
        if let Some(d) = &p.track_descriptor {
            message(body, 60, d);
        }
        if let Some(b) = &p.compressed_packets {
            bytes(body, 50, b);
        }
        if let Some(i) = &p.interned_data {
            message(body, 12, i);
        }
        if let Some(d) = &p.trace_packet_defaults {
            message(body, 59, d);
        }
        if let Some(f) = p.first_packet_on_sequence {
            uint(body, 87, u64::from(f));
        }
        if let Some(ev) = &p.track_event {
            self.event.clear();
            self.track_event(ev);
            bytes(&mut self.body, 11, &self.event);
        } else if let Some((ev, args)) = event {
            self.event.clear();
            self.track_event(ev);
            self.event.extend_from_slice(args);
            bytes(&mut self.body, 11, &self.event);
        }
        bytes(out, 1, &self.body);
    }

    fn track_event(&mut self, ev: &TrackEvent) {
        let b = &mut self.event;
        for &c in &ev.category_iids {
            uint(b, 3, c);
        }
        for c in &ev.categories {
            bytes(b, 22, c.as_bytes());
        }
        if let Some(t) = ev.r#type {
            uint(b, 9, t as u64);
        }
        if let Some(n) = ev.name_iid {
            uint(b, 10, n);
        }
        if let Some(n) = &ev.name {
            bytes(b, 23, n.as_bytes());
        }
        if let Some(t) = ev.track_uuid {
            uint(b, 11, t);
        }
        if let Some(v) = ev.counter_value {
            uint(b, 30, v as u64);
        }
        if let Some(v) = ev.double_counter_value {
            fixed64(b, 44, v.to_bits());
        }
        for &u in &ev.extra_counter_track_uuids {
            uint(b, 31, u);
        }
        for &v in &ev.extra_counter_values {
            uint(b, 12, v as u64);
        }
        for &u in &ev.extra_double_counter_track_uuids {
            uint(b, 45, u);
        }
        for &v in &ev.extra_double_counter_values {
            fixed64(b, 46, v.to_bits());
        }
        for &f in &ev.flow_ids {
            fixed64(b, 47, f);
        }
        for &f in &ev.terminating_flow_ids {
            fixed64(b, 48, f);
        }
        for a in &ev.debug_annotations {
            self.ann.clear();
            annotation(&mut self.ann, a);
            bytes(&mut self.event, 4, &self.ann);
        }
    }
}

/// A DebugAnnotation (TrackEvent field 4) with an interned name and one
/// value, appended to `args`. Its body is at most 16 bytes, so its length
/// is one byte.
fn short_annotation(args: &mut Vec<u8>, name_iid: u64, value_field: u32, v: u64) {
    // Built on the stack: one bounds check instead of one per byte.
    let mut b = [0u8; 32];
    b[0] = (4 << 3 | LEN) as u8;
    b[2] = 1 << 3 | VARINT as u8;
    let mut n = 3 + put_varint(&mut b[3..], name_iid);
    n += put_varint(&mut b[n..], u64::from(value_field << 3 | VARINT));
    n += put_varint(&mut b[n..], v);
    b[1] = (n - 2) as u8;
    args.extend_from_slice(&b[..n]);
}

/// Writes `v` as a varint at the start of `b` (at least 10 bytes); returns its size.
#[inline]
fn put_varint(b: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        b[i] = v as u8 | 0x80;
        v >>= 7;
        i += 1;
    }
    b[i] = v as u8;
    i + 1
}

pub fn annotation_int(args: &mut Vec<u8>, name_iid: u64, v: i64) {
    short_annotation(args, name_iid, 4, v as u64);
}

pub fn annotation_uint(args: &mut Vec<u8>, name_iid: u64, v: u64) {
    short_annotation(args, name_iid, 3, v);
}

pub fn annotation_string_iid(args: &mut Vec<u8>, name_iid: u64, iid: u64) {
    short_annotation(args, name_iid, 17, iid);
}

fn annotation(b: &mut Vec<u8>, a: &DebugAnnotation) {
    if let Some(n) = a.name_iid {
        uint(b, 1, n);
    }
    if let Some(n) = &a.name {
        bytes(b, 10, n.as_bytes());
    }
    if let Some(v) = a.bool_value {
        uint(b, 2, u64::from(v));
    }
    if let Some(v) = a.uint_value {
        uint(b, 3, v);
    }
    if let Some(v) = a.int_value {
        uint(b, 4, v as u64);
    }
    if let Some(v) = a.double_value {
        fixed64(b, 5, v.to_bits());
    }
    if let Some(s) = &a.string_value {
        bytes(b, 6, s.as_bytes());
    }
    if let Some(v) = a.pointer_value {
        uint(b, 7, v);
    }
    if let Some(v) = a.string_value_iid {
        uint(b, 17, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        clock_snapshot::Clock, trace_packet::SequenceFlags, track_event::Type, ClockSnapshot, EventName, InternedData,
        TrackDescriptor,
    };

    fn both(p: &TracePacket) {
        let mut ours = Vec::new();
        Encoder::default().packet(&mut ours, p, None);
        let theirs = crate::proto::Trace { packet: vec![p.clone()] }.encode_to_vec();
        let back = crate::proto::Trace::decode(ours.as_slice()).unwrap();
        assert_eq!(back.packet, vec![p.clone()]);
        assert_eq!(ours.len(), theirs.len());
    }

    #[test]
    fn hand_encoding_decodes_like_prost() {
        let ann = |name_iid, f: &dyn Fn(&mut DebugAnnotation)| {
            let mut a = DebugAnnotation { name_iid: Some(name_iid), ..Default::default() };
            f(&mut a);
            a
        };
        let ev = TrackEvent {
            category_iids: vec![1, 300],
            categories: vec!["io".into()],
            r#type: Some(Type::SliceBegin as i32),
            name_iid: Some(7),
            name: Some("pread64 4 KiB".into()),
            track_uuid: Some(u64::MAX),
            counter_value: Some(-5),
            double_counter_value: Some(0.25),
            extra_counter_track_uuids: vec![9],
            extra_counter_values: vec![-1, 1 << 40],
            extra_double_counter_track_uuids: vec![10],
            extra_double_counter_values: vec![1.5],
            flow_ids: vec![u64::MAX, 3],
            terminating_flow_ids: vec![4],
            debug_annotations: vec![
                ann(1, &|a| a.uint_value = Some(1 << 63)),
                ann(2, &|a| a.int_value = Some(-22)),
                ann(3, &|a| a.string_value_iid = Some(12345)),
                ann(4, &|a| a.bool_value = Some(true)),
                ann(5, &|a| a.double_value = Some(-0.5)),
                ann(6, &|a| a.string_value = Some("x".repeat(300))),
                ann(7, &|a| a.pointer_value = Some(0xdead)),
                DebugAnnotation { name: Some("named".into()), int_value: Some(1), ..Default::default() },
            ],
        };
        both(&TracePacket {
            timestamp: Some(1_700_000_000_000_000_000),
            timestamp_clock_id: Some(64),
            trusted_packet_sequence_id: Some(70_000),
            sequence_flags: Some(SequenceFlags::SeqNeedsIncrementalState as u32),
            interned_data: Some(InternedData {
                event_names: vec![EventName { iid: Some(7), name: Some("pread64 4 KiB".into()) }],
                ..Default::default()
            }),
            track_event: Some(ev),
            ..Default::default()
        });
        // Args encoded on their own, as the exporter adds them.
        let mut args = Vec::new();
        annotation_uint(&mut args, 3, u64::MAX);
        annotation_int(&mut args, 4, i64::MIN);
        annotation_string_iid(&mut args, 127, 1 << 35);
        let bare = TrackEvent { r#type: Some(Type::SliceEnd as i32), ..Default::default() };
        let mut ours = Vec::new();
        Encoder::default().packet(
            &mut ours,
            &TracePacket { timestamp: Some(1), ..Default::default() },
            Some((&bare, &args)),
        );
        let back = crate::proto::Trace::decode(ours.as_slice()).unwrap().packet.remove(0);
        let anns = back.track_event.unwrap().debug_annotations;
        assert_eq!(anns.len(), 3);
        assert_eq!((anns[0].name_iid, anns[0].uint_value), (Some(3), Some(u64::MAX)));
        assert_eq!((anns[1].name_iid, anns[1].int_value), (Some(4), Some(i64::MIN)));
        assert_eq!((anns[2].name_iid, anns[2].string_value_iid), (Some(127), Some(1 << 35)));
        both(&TracePacket {
            clock_snapshot: Some(ClockSnapshot {
                clocks: vec![Clock {
                    clock_id: Some(64),
                    timestamp: Some(0),
                    is_incremental: Some(true),
                    ..Default::default()
                }],
                primary_trace_clock: None,
            }),
            ..Default::default()
        });
        both(&TracePacket {
            track_descriptor: Some(TrackDescriptor { uuid: Some(5), name: Some("reads".into()), ..Default::default() }),
            first_packet_on_sequence: Some(true),
            compressed_packets: Some(vec![1, 2, 3]),
            ..Default::default()
        });
    }
}
