//! Protobuf encoding of the hot packets by hand.
//!
//! prost computes every nested message's length once per enclosing level
//! and goes through `Option`s field by field; a slice begin or end is most
//! of an export, so TracePacket's common fields, TrackEvent and
//! DebugAnnotation are written here directly into the output, each nested
//! message behind a one-byte length that is widened in place on the rare
//! message of 128 bytes or more. Everything else in a packet (descriptors,
//! interned data, defaults, clock snapshots: rare) still goes through
//! prost. The unit tests check that both encodings decode to the same
//! message.

use prost::Message;

use crate::proto::{DebugAnnotation, TracePacket, TrackEvent};

const VARINT: u32 = 0;
const I64: u32 = 1;
const LEN: u32 = 2;

/// Appends the first `n` bytes of `b` to `buf` with one fixed-size copy
/// (a small variable-length `extend_from_slice` is a libc call).
#[inline(always)]
fn append<const N: usize>(buf: &mut Vec<u8>, b: &[u8; N], n: usize) {
    assert!(n <= N);
    buf.reserve(N);
    // SAFETY: `reserve` made room for N more bytes, all written here from
    // `b`; the length then covers only the first n, which are initialised.
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), buf.as_mut_ptr().add(buf.len()), N);
        buf.set_len(buf.len() + n);
    }
}

/// Writes `v` as a varint at `b[at..]` (10 bytes must fit); returns the new
/// end. One bounds check, then the common short values unrolled.
#[inline(always)]
fn put_varint<const N: usize>(b: &mut [u8; N], at: usize, v: u64) -> usize {
    let w: &mut [u8; 10] = (&mut b[at..at + 10]).try_into().unwrap();
    if v < 1 << 7 {
        w[0] = v as u8;
        return at + 1;
    }
    w[0] = v as u8 | 0x80;
    if v < 1 << 14 {
        w[1] = (v >> 7) as u8;
        return at + 2;
    }
    w[1] = (v >> 7) as u8 | 0x80;
    if v < 1 << 21 {
        w[2] = (v >> 14) as u8;
        return at + 3;
    }
    let (mut v, mut i) = (v >> 14, 2);
    while v >= 0x80 {
        w[i] = v as u8 | 0x80;
        v >>= 7;
        i += 1;
    }
    w[i] = v as u8;
    at + i + 1
}

#[inline]
fn varint(buf: &mut Vec<u8>, v: u64) {
    let mut b = [0u8; 10];
    let n = put_varint(&mut b, 0, v);
    append(buf, &b, n);
}

#[inline]
fn key(buf: &mut Vec<u8>, field: u32, wire: u32) {
    varint(buf, u64::from(field << 3 | wire));
}

/// A varint field: key and value in one append.
#[inline]
fn uint(buf: &mut Vec<u8>, field: u32, v: u64) {
    let mut b = [0u8; 16];
    let n = put_varint(&mut b, 0, u64::from(field << 3 | VARINT));
    let n = put_varint(&mut b, n, v);
    append(buf, &b, n);
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
    append(buf, &v.to_le_bytes(), 8);
}

/// A nested message already encoded by prost.
fn message<M: Message>(buf: &mut Vec<u8>, field: u32, m: &M) {
    key(buf, field, LEN);
    varint(buf, m.encoded_len() as u64);
    m.encode_raw(buf);
}

/// Starts a length-delimited field whose body follows in `buf`; returns
/// where the body starts, for [`end_nested`].
#[inline]
fn begin_nested(buf: &mut Vec<u8>, field: u32) -> usize {
    key(buf, field, LEN);
    buf.push(0);
    buf.len()
}

/// Sets the length of the field begun at `start`, widening its one-byte
/// length (and moving the body) when the body is 128 bytes or more.
#[inline]
fn end_nested(buf: &mut Vec<u8>, start: usize) {
    let len = buf.len() - start;
    if len < 0x80 {
        buf[start - 1] = len as u8;
        return;
    }
    let mut b = [0u8; 10];
    let n = put_varint(&mut b, 0, len as u64);
    buf.splice(start - 1..start, b[..n].iter().copied());
}

/// The start of a packet holding only `compressed_packets` of `len`
/// bytes, which the caller writes after it (saving a copy of the batch).
pub fn compressed_packets_header(buf: &mut Vec<u8>, len: usize) {
    let field_key = u64::from(50u32 << 3 | LEN);
    key(buf, 1, LEN);
    varint(buf, (varint_len(field_key) + varint_len(len as u64) + len) as u64);
    varint(buf, field_key);
    varint(buf, len as u64);
}

/// Appends `p` to `out` as a `Trace.packet` field (tag, length, body).
/// `event` (a track event and its args, encoded) goes in as field 11
/// when `p` has none of its own.
pub fn packet(out: &mut Vec<u8>, p: &TracePacket, event: Option<(&TrackEvent, &[u8])>) {
    if let Some((ev, args)) = event {
        if is_plain(p, ev) {
            let (seq, flags) = (p.trusted_packet_sequence_id.unwrap_or(0), p.sequence_flags.unwrap_or(0));
            return plain_event(out, p.timestamp, seq, flags, ev, args);
        }
    }
    let body = begin_nested(out, 1);
    if let Some(ts) = p.timestamp {
        uint(out, 8, ts);
    }
    if let Some(c) = p.timestamp_clock_id {
        uint(out, 58, u64::from(c));
    }
    if let Some(id) = p.trusted_packet_sequence_id {
        uint(out, 10, u64::from(id));
    }
    if let Some(f) = p.sequence_flags {
        uint(out, 13, u64::from(f));
    }
    if let Some(c) = &p.clock_snapshot {
        message(out, 6, c);
    }
    if let Some(d) = &p.track_descriptor {
        message(out, 60, d);
    }
    if let Some(b) = &p.compressed_packets {
        bytes(out, 50, b);
    }
    if let Some(i) = &p.interned_data {
        message(out, 12, i);
    }
    if let Some(d) = &p.trace_packet_defaults {
        message(out, 59, d);
    }
    if let Some(f) = p.first_packet_on_sequence {
        uint(out, 87, u64::from(f));
    }
    if let Some(t) = &p.process_tree {
        message(out, 2, t);
    }
    if let Some(c) = &p.chrome_events {
        message(out, 5, c);
    }
    if let Some(b) = &p.ftrace_events {
        message(out, 1, b);
    }
    if let Some(i) = &p.system_info {
        message(out, 45, i);
    }
    if let Some(m) = p.machine_id {
        uint(out, 98, u64::from(m));
    }
    let event = match (&p.track_event, event) {
        (Some(ev), _) => Some((ev, &[][..])),
        (None, e) => e,
    };
    if let Some((ev, args)) = event {
        let e = begin_nested(out, 11);
        track_event(out, ev);
        out.extend_from_slice(args);
        end_nested(out, e);
    }
    end_nested(out, body);
}

/// Whether `p` with `ev` is a slice begin/end or counter value and nothing
/// else: most packets of an export, written by [`plain_event`].
#[inline]
fn is_plain(p: &TracePacket, ev: &TrackEvent) -> bool {
    let TracePacket {
        timestamp: _,
        timestamp_clock_id,
        trusted_packet_sequence_id,
        sequence_flags,
        clock_snapshot,
        track_descriptor,
        compressed_packets,
        interned_data,
        trace_packet_defaults,
        first_packet_on_sequence,
        track_event,
        process_tree,
        chrome_events,
        ftrace_events,
        system_info,
        machine_id,
    } = p;
    timestamp_clock_id.is_none()
        && system_info.is_none()
        && machine_id.is_none()
        && ftrace_events.is_none()
        && process_tree.is_none()
        && chrome_events.is_none()
        && trusted_packet_sequence_id.is_some()
        && sequence_flags.is_some()
        && clock_snapshot.is_none()
        && track_descriptor.is_none()
        && compressed_packets.is_none()
        && interned_data.is_none()
        && trace_packet_defaults.is_none()
        && first_packet_on_sequence.is_none()
        && track_event.is_none()
        && event_is_plain(ev)
}

/// Whether `ev` has no fields but those [`plain_event`] writes.
#[inline]
pub fn event_is_plain(ev: &TrackEvent) -> bool {
    let TrackEvent {
        category_iids,
        categories,
        r#type: _,
        name_iid: _,
        name,
        track_uuid,
        counter_value: _,
        double_counter_value: _,
        extra_counter_track_uuids,
        extra_counter_values,
        extra_double_counter_track_uuids,
        extra_double_counter_values,
        flow_ids: _,
        terminating_flow_ids: _,
        debug_annotations,
    } = ev;
    category_iids.is_empty()
        && categories.is_empty()
        && name.is_none()
        && track_uuid.is_none()
        && extra_counter_track_uuids.is_empty()
        && extra_counter_values.is_empty()
        && extra_double_counter_track_uuids.is_empty()
        && extra_double_counter_values.is_empty()
        && debug_annotations.is_empty()
}

/// Bytes of `v` as a varint.
#[inline(always)]
fn varint_len(v: u64) -> usize {
    // ceil(bits / 7) for 1..=64 significant bits (0 counts as 1 bit),
    // as (bits * 9 + 64) / 64 without a division by 7.
    ((64 - (v | 1).leading_zeros()) as usize * 9 + 64) / 64
}

/// [`packet`] for a packet [`is_plain`] accepts (given its timestamp,
/// sequence id and flags), or for one that never became a [`TracePacket`]:
/// the same bytes, with lengths computed up front instead of fixed up and
/// the scalar fields gathered on the stack for one copy.
pub fn plain_event(out: &mut Vec<u8>, ts: Option<u64>, seq: u32, flags: u32, ev: &TrackEvent, args: &[u8]) {
    let vl = varint_len;
    // Sizes first, so the packet's start can be written in one pass:
    // TracePacket fields in field-number order as `packet` writes them,
    // timestamp (8), sequence id (10), flags (13), then the event (11):
    // type (9), name_iid (10), counter_value (30), double_counter_value
    // (44), flow ids (47, 48: fixed64 under a two-byte key), args.
    let (seq, flags) = (u64::from(seq), u64::from(flags));
    let head = ts.map_or(0, |t| 1 + vl(t)) + 1 + vl(seq) + 1 + vl(flags);
    let scalars = ev.r#type.map_or(0, |t| 1 + vl(t as u64))
        + ev.name_iid.map_or(0, |i| 1 + vl(i))
        + ev.counter_value.map_or(0, |v| 2 + vl(v as u64))
        + ev.double_counter_value.map_or(0, |_| 10);
    let flows = (ev.flow_ids.len() + ev.terminating_flow_ids.len()) * 10;
    let ev_len = scalars + flows + args.len();
    let body_len = head + 1 + vl(ev_len as u64) + ev_len;
    let mut b = [0u8; 128];
    b[0] = 1 << 3 | LEN as u8;
    let mut i = put_varint(&mut b, 1, body_len as u64);
    if let Some(t) = ts {
        b[i] = 8 << 3;
        i = put_varint(&mut b, i + 1, t);
    }
    b[i] = 10 << 3;
    i = put_varint(&mut b, i + 1, seq);
    b[i] = 13 << 3;
    i = put_varint(&mut b, i + 1, flags);
    b[i] = 11 << 3 | LEN as u8;
    i = put_varint(&mut b, i + 1, ev_len as u64);
    if let Some(t) = ev.r#type {
        b[i] = 9 << 3;
        i = put_varint(&mut b, i + 1, t as u64);
    }
    if let Some(iid) = ev.name_iid {
        b[i] = 10 << 3;
        i = put_varint(&mut b, i + 1, iid);
    }
    if let Some(v) = ev.counter_value {
        i = put_varint(&mut b, i, u64::from(30u32 << 3 | VARINT));
        i = put_varint(&mut b, i, v as u64);
    }
    if let Some(v) = ev.double_counter_value {
        i = put_varint(&mut b, i, u64::from(44u32 << 3 | I64));
        b[i..i + 8].copy_from_slice(&v.to_bits().to_le_bytes());
        i += 8;
    }
    out.reserve(i + flows + args.len());
    append(out, &b, i);
    for &f in &ev.flow_ids {
        fixed64(out, 47, f);
    }
    for &f in &ev.terminating_flow_ids {
        fixed64(out, 48, f);
    }
    out.extend_from_slice(args);
}

fn track_event(b: &mut Vec<u8>, ev: &TrackEvent) {
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
        let start = begin_nested(b, 4);
        annotation(b, a);
        end_nested(b, start);
    }
}

/// A DebugAnnotation (TrackEvent field 4) with an interned name and one
/// varint value under `key` (the value field's encoded key), appended to
/// `args`. Its body is at most 23 bytes, so its length is one byte.
#[inline(always)]
fn short_annotation<const K: usize>(args: &mut Vec<u8>, name_iid: u64, key: [u8; K], v: u64) {
    let mut b = [0u8; 32];
    b[0] = (4 << 3 | LEN) as u8;
    b[2] = 1 << 3 | VARINT as u8;
    // Arg names are small iids: one byte, no loop.
    let n = if name_iid < 0x80 {
        b[3] = name_iid as u8;
        4
    } else {
        put_varint(&mut b, 3, name_iid)
    };
    b[n..n + K].copy_from_slice(&key);
    let n = put_varint(&mut b, n + K, v);
    b[1] = (n - 2) as u8;
    append(args, &b, n);
}

#[inline]
pub fn annotation_int(args: &mut Vec<u8>, name_iid: u64, v: i64) {
    short_annotation(args, name_iid, [4 << 3 | VARINT as u8], v as u64);
}

#[inline]
pub fn annotation_uint(args: &mut Vec<u8>, name_iid: u64, v: u64) {
    short_annotation(args, name_iid, [3 << 3 | VARINT as u8], v);
}

#[inline]
pub fn annotation_string_iid(args: &mut Vec<u8>, name_iid: u64, iid: u64) {
    // Field 17: a two-byte key.
    short_annotation(args, name_iid, [0x88, 0x01], iid);
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
        packet(&mut ours, p, None);
        let theirs = crate::proto::Trace { packet: vec![p.clone()] }.encode_to_vec();
        let back = crate::proto::Trace::decode(ours.as_slice()).unwrap();
        assert_eq!(back.packet, vec![p.clone()]);
        assert_eq!(ours.len(), theirs.len());
    }

    #[test]
    fn varints_match_prost() {
        let mut vals = vec![0u64, u64::MAX];
        for shift in 0..64 {
            vals.extend([(1u64 << shift) - 1, 1 << shift, (1 << shift) + 1]);
        }
        for v in vals {
            let mut ours = Vec::new();
            varint(&mut ours, v);
            let mut theirs = Vec::new();
            prost::encoding::encode_varint(v, &mut theirs);
            assert_eq!(ours, theirs, "{v}");
            assert_eq!(varint_len(v), theirs.len(), "{v}");
        }
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
        packet(&mut ours, &TracePacket { timestamp: Some(1), ..Default::default() }, Some((&bare, &args)));
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
        // Slice begins/ends and counter values take the plain path: the
        // same message and size as prost's for the packet with the args in.
        for ev in [
            TrackEvent {
                r#type: Some(Type::SliceBegin as i32),
                name_iid: Some(300),
                flow_ids: vec![u64::MAX, 1],
                terminating_flow_ids: vec![7],
                ..Default::default()
            },
            TrackEvent { r#type: Some(Type::SliceEnd as i32), ..Default::default() },
            TrackEvent { counter_value: Some(-3), double_counter_value: Some(2.5), ..Default::default() },
        ] {
            for (ts, args) in [(Some(1u64 << 40), args.clone()), (None, vec![]), (Some(0), vec![0x22, 0])] {
                let p = TracePacket {
                    timestamp: ts,
                    trusted_packet_sequence_id: Some(200),
                    sequence_flags: Some(2),
                    ..Default::default()
                };
                assert!(is_plain(&p, &ev));
                let mut ours = Vec::new();
                packet(&mut ours, &p, Some((&ev, &args)));
                let mut whole = ev.clone();
                whole.debug_annotations = crate::proto::TrackEvent::decode(args.as_slice()).unwrap().debug_annotations;
                let theirs =
                    crate::proto::Trace { packet: vec![TracePacket { track_event: Some(whole), ..p.clone() }] };
                assert_eq!(crate::proto::Trace::decode(ours.as_slice()).unwrap(), theirs);
                assert_eq!(ours.len(), theirs.encode_to_vec().len());
            }
        }
        // A 200-byte event body takes a two-byte length.
        let long = [0x22u8, 0].repeat(100);
        let p = TracePacket { trusted_packet_sequence_id: Some(1), sequence_flags: Some(2), ..Default::default() };
        let mut ours = Vec::new();
        packet(&mut ours, &p, Some((&TrackEvent::default(), &long)));
        assert_eq!(
            crate::proto::Trace::decode(ours.as_slice()).unwrap().packet[0]
                .track_event
                .as_ref()
                .unwrap()
                .debug_annotations
                .len(),
            100
        );
        // A compressed batch framed by its header, then written after it.
        for len in [3usize, 200, 70_000] {
            let payload = vec![7u8; len];
            let mut framed = Vec::new();
            compressed_packets_header(&mut framed, len);
            framed.extend_from_slice(&payload);
            let back = crate::proto::Trace::decode(framed.as_slice()).unwrap();
            assert_eq!(back.packet[0].compressed_packets.as_deref(), Some(&payload[..]));
        }
        both(&TracePacket {
            track_descriptor: Some(TrackDescriptor { uuid: Some(5), name: Some("reads".into()), ..Default::default() }),
            first_packet_on_sequence: Some(true),
            compressed_packets: Some(vec![1, 2, 3]),
            ..Default::default()
        });
        // Another machine's packets: the id, and its SystemInfo.
        let m = TracePacket {
            trusted_packet_sequence_id: Some(1),
            machine_id: Some(3),
            system_info: Some(crate::proto::SystemInfo {
                utsname: Some(crate::proto::Utsname {
                    sysname: Some("Linux".into()),
                    release: Some("6.18".into()),
                    ..Default::default()
                }),
                num_cpus: Some(96),
            }),
            ..Default::default()
        };
        both(&m);
        let ev = TrackEvent { r#type: Some(Type::SliceEnd as i32), ..Default::default() };
        let p = TracePacket { machine_id: Some(3), sequence_flags: Some(2), ..m };
        assert!(!is_plain(&TracePacket { system_info: None, ..p }, &ev), "the plain path has no machine id");
    }
}
