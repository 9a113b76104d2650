//! Columnar encoding of records inside one frame (format 2).
//!
//! A frame's payload (before zstd) is:
//!
//! ```text
//! varint n_records, varint n_strings, varint n_columns
//! n_columns x (varint column_id, varint byte_len)
//! the column bytes, in directory order
//! ```
//!
//! Column 0 holds one kind byte per record, in record order. Columns 1 and 2
//! hold the frame's string table (lengths, then the bytes); string ids are
//! their index. Every other column is one field of one record kind:
//! `id = kind << 5 | field` (format 1: `kind << 4 | field`); fields 32 to
//! 63 of a kind are `id = EXT_FIELDS + (kind << 5 | field - 32)`, which an
//! older reader takes for an unknown kind's column and skips. Values are
//! varints, mostly differences from a prediction made per thread (see
//! [`crate::declare`]), so that zstd sees long runs of small numbers. A
//! reader ignores columns it does not know (a newer writer's extra fields)
//! and reads a missing column as zeros (an older writer's), so fields can be
//! added without a format break; a kind it does not know is skipped and
//! counted.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::declare::Encode;
use crate::record::*;
use crate::varint::{get_u64, put_i64, put_u64, unzigzag};

/// Kind codes a frame may have columns for; a record of a code at or
/// above it is skipped as unknown.
pub(crate) const MAX_KINDS: usize = 64;
pub(crate) const MAX_FIELDS: usize = 64;
/// Column ids of fields 32 and up: past every kind's first 32.
const EXT_FIELDS: u64 = (MAX_KINDS as u64) << 5;

/// The column id of field `f` of kind `k` (format 2).
fn column_id(k: usize, f: usize) -> u64 {
    if f < 32 {
        ((k as u64) << 5) | f as u64
    } else {
        EXT_FIELDS + (((k as u64) << 5) | (f - 32) as u64)
    }
}

const COL_KIND: u64 = 0;
const COL_STR_LEN: u64 = 1;
const COL_STR_BYTES: u64 = 2;

/// Whether this version reads kind `k`.
#[cfg(test)]
fn known_kind(k: u8) -> bool {
    KNOWN_KINDS.contains(&k)
}

/// What a thread's next record is predicted from.
#[derive(Clone, Copy, Default)]
pub(crate) struct Track {
    /// The thread's process, once a record has said it (`pid_known`).
    pid: u32,
    pid_known: bool,
    fd: i32,
    path: u32,
    /// Where the last run of each `seq` slot ended (file offset, sector...).
    seq: [u64; 5],
}

/// Tids are spread well enough: a multiply is all the hashing they need.
#[derive(Default)]
struct TidHasher(u64);

impl Hasher for TidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = u64::from(v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// How many recent threads a tid field is coded against.
const RECENT: usize = 16;

/// The predictions of one frame: one track per kind (for records of no
/// thread) and one per thread, the recent threads (most recent first) and
/// the last time.
pub(crate) struct Tracks {
    list: Vec<Track>,
    by_tid: HashMap<u32, u32, BuildHasherDefault<TidHasher>>,
    recent: [u32; RECENT],
    /// Each recent thread's track, once looked up ([`NO_TRACK`] before):
    /// most records find their thread here, without hashing.
    recent_track: [u32; RECENT],
    last_ts: u64,
}

const NO_TRACK: u32 = u32::MAX;

impl Tracks {
    fn new() -> Self {
        Tracks {
            list: vec![Track::default(); MAX_KINDS],
            by_tid: HashMap::default(),
            recent: [0; RECENT],
            recent_track: [NO_TRACK; RECENT],
            last_ts: 0,
        }
    }

    fn reset(&mut self) {
        self.list.clear();
        self.list.resize(MAX_KINDS, Track::default());
        self.by_tid.clear();
        self.recent = [0; RECENT];
        self.recent_track = [NO_TRACK; RECENT];
        self.last_ts = 0;
    }

    /// A tid as its place among the recent threads, or `RECENT + tid` for
    /// one not among them; it becomes the most recent.
    #[inline]
    fn tid_code(&mut self, tid: u32) -> u64 {
        match self.recent.iter().position(|&t| t == tid) {
            Some(i) => {
                self.bring_forward(i, tid);
                i as u64
            }
            None => {
                self.bring_forward(RECENT - 1, tid);
                self.recent_track[0] = NO_TRACK;
                RECENT as u64 + u64::from(tid)
            }
        }
    }

    /// Moves recent entry `i` (or, for a new thread, the last) to the front.
    #[inline]
    fn bring_forward(&mut self, i: usize, tid: u32) {
        let t = self.recent_track[i];
        // Most records are by the thread before or the one before that: a
        // copy_within would call memmove for one element, or none.
        match i {
            0 => {}
            1 => {
                self.recent[1] = self.recent[0];
                self.recent_track[1] = self.recent_track[0];
            }
            _ => {
                self.recent.copy_within(0..i, 1);
                self.recent_track.copy_within(0..i, 1);
            }
        }
        self.recent[0] = tid;
        self.recent_track[0] = t;
    }

    /// The tid of a code from [`Tracks::tid_code`].
    #[inline]
    fn tid_of_code(&mut self, code: u64) -> Option<u32> {
        if code < RECENT as u64 {
            let i = code as usize;
            let tid = self.recent[i];
            self.bring_forward(i, tid);
            Some(tid)
        } else {
            let tid = u32::try_from(code - RECENT as u64).ok()?;
            self.bring_forward(RECENT - 1, tid);
            self.recent_track[0] = NO_TRACK;
            Some(tid)
        }
    }

    /// The track of thread `tid`: the most recent thread's without hashing.
    #[inline]
    fn track(&mut self, tid: u32) -> usize {
        if self.recent[0] != tid {
            return self.of_thread(tid);
        }
        if self.recent_track[0] == NO_TRACK {
            self.recent_track[0] = self.of_thread(tid) as u32;
        }
        self.recent_track[0] as usize
    }

    #[inline]
    fn of_thread(&mut self, tid: u32) -> usize {
        let next = self.list.len() as u32;
        let i = *self.by_tid.entry(tid).or_insert(next);
        if i == next {
            self.list.push(Track::default());
        }
        i as usize
    }
}

/// Builds one frame's columns.
pub(crate) struct Columns {
    kinds: Vec<u8>,
    cols: Vec<[Vec<u8>; MAX_FIELDS]>,
    tracks: Tracks,
}

/// Writes one record's fields (the encoder side of [`crate::declare`]).
pub struct W<'a> {
    cols: &'a mut [Vec<u8>; MAX_FIELDS],
    tracks: &'a mut Tracks,
    cur: usize,
}

impl W<'_> {
    #[inline]
    pub fn u(&mut self, f: usize, v: u64) {
        put_u64(&mut self.cols[f], v);
    }
    #[inline]
    pub fn i(&mut self, f: usize, v: i64) {
        put_i64(&mut self.cols[f], v);
    }
    /// Raw IEEE bits: counters repeat exact values often, which zstd sees.
    #[inline]
    pub fn f64(&mut self, f: usize, v: f64) {
        self.cols[f].extend_from_slice(&v.to_bits().to_le_bytes());
    }
    #[inline]
    pub fn thread(&mut self, f: usize, tid: u32) {
        let code = self.tracks.tid_code(tid);
        self.u(f, code);
        self.cur = self.tracks.track(tid);
    }
    #[inline]
    pub fn tid(&mut self, f: usize, tid: u32) {
        let code = self.tracks.tid_code(tid);
        self.u(f, code);
    }
    /// 0 when the thread `tid`'s process is known to be `pid`, else
    /// 1 + (tid - pid) zigzagged (1 for a main thread).
    #[inline]
    pub fn pid_of(&mut self, f: usize, tid: u32, pid: u32) {
        let i = self.tracks.track(tid);
        let t = &mut self.tracks.list[i];
        if t.pid_known && t.pid == pid {
            self.u(f, 0);
        } else {
            t.pid = pid;
            t.pid_known = true;
            self.u(f, crate::varint::zigzag(i64::from(tid) - i64::from(pid)) + 1);
        }
    }
    /// Records are written in about the order they happen: the distance
    /// from the last record's time, whatever its kind.
    #[inline]
    pub fn ts(&mut self, f: usize, ts: u64) {
        let d = ts.wrapping_sub(self.tracks.last_ts) as i64;
        self.tracks.last_ts = ts;
        put_i64(&mut self.cols[f], d);
    }
    #[inline]
    pub fn fd(&mut self, f: usize, fd: i32) {
        let t = &mut self.tracks.list[self.cur];
        let d = i64::from(fd) - i64::from(t.fd);
        t.fd = fd;
        self.i(f, d);
    }
    #[inline]
    pub fn path(&mut self, f: usize, s: StrId) {
        let t = &mut self.tracks.list[self.cur];
        let v = if s.0 == t.path { 0 } else { u64::from(s.0) + 1 };
        t.path = s.0;
        self.u(f, v);
    }
    #[inline]
    pub fn seq(&mut self, f: usize, slot: usize, v: u64) {
        let d = v.wrapping_sub(self.tracks.list[self.cur].seq[slot]) as i64;
        self.i(f, d);
    }
    #[inline]
    pub fn set_seq(&mut self, slot: usize, end: u64) {
        self.tracks.list[self.cur].seq[slot] = end;
    }
}

impl Columns {
    pub fn new() -> Self {
        Columns {
            kinds: Vec::new(),
            cols: (0..MAX_KINDS).map(|_| std::array::from_fn(|_| Vec::new())).collect(),
            tracks: Tracks::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Bytes held so far (a cheap size estimate for deciding when to cut a frame).
    pub fn approx_bytes(&self) -> usize {
        // Records average well under 24 bytes before compression.
        self.kinds.len() * 24
    }

    #[inline]
    pub fn push<T: Encode>(&mut self, rec: &T) {
        let k = rec.code();
        self.kinds.push(k);
        let mut w = W { cols: &mut self.cols[k as usize], tracks: &mut self.tracks, cur: k as usize };
        rec.encode(&mut w);
    }

    /// Appends the payload to `out` (string table given as lengths + bytes)
    /// and resets for the next frame.
    pub fn finish(&mut self, n_strings: usize, str_lens: &[u8], str_bytes: &[u8], out: &mut Vec<u8>) {
        let mut dir: Vec<(u64, &[u8])> = Vec::with_capacity(16);
        dir.push((COL_KIND, &self.kinds));
        dir.push((COL_STR_LEN, str_lens));
        dir.push((COL_STR_BYTES, str_bytes));
        for (k, fields) in self.cols.iter().enumerate() {
            for (f, col) in fields.iter().enumerate() {
                if !col.is_empty() {
                    dir.push((column_id(k, f), col));
                }
            }
        }
        put_u64(out, self.kinds.len() as u64);
        put_u64(out, n_strings as u64);
        put_u64(out, dir.len() as u64);
        for (id, col) in &dir {
            put_u64(out, *id);
            put_u64(out, col.len() as u64);
        }
        for (_, col) in &dir {
            out.extend_from_slice(col);
        }
        self.kinds.clear();
        for fields in &mut self.cols {
            for c in fields.iter_mut() {
                c.clear();
            }
        }
        self.tracks.reset();
    }
}

/// Why a payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrupt(pub String);

#[derive(Clone, Copy, Default)]
pub(crate) struct Col {
    pub start: usize,
    pub end: usize,
    pub pos: usize,
    pub present: bool,
}

/// Reads the next varint of column `c`; an absent column reads as zeros.
#[inline(always)]
pub(crate) fn col_u(buf: &[u8], c: &mut Col) -> Option<u64> {
    // Most values fit one or two bytes: take those without the general
    // loop. (`reset` checked that every column lies inside `buf`; an
    // absent column is empty, so it goes past here.)
    if c.pos + 1 < c.end {
        if let Some(&[b0, b1]) = buf.get(c.pos..c.pos + 2) {
            if b0 < 0x80 {
                c.pos += 1;
                return Some(u64::from(b0));
            }
            if b1 < 0x80 {
                c.pos += 2;
                return Some(u64::from(b0 & 0x7f) | u64::from(b1) << 7);
            }
        }
    } else if !c.present {
        return Some(0);
    } else if c.pos < c.end {
        if let Some(&b) = buf.get(c.pos) {
            if b < 0x80 {
                c.pos += 1;
                return Some(u64::from(b));
            }
        }
    }
    let mut pos = c.pos;
    let v = get_u64(&buf[..c.end], &mut pos)?;
    c.pos = pos;
    Some(v)
}

/// Reads 8 raw bytes of column `c` as an f64; an absent column reads as 0.
#[inline(always)]
pub(crate) fn col_f64(buf: &[u8], c: &mut Col) -> Option<f64> {
    if !c.present {
        return Some(0.0);
    }
    let b = buf.get(c.pos..c.pos + 8).filter(|_| c.pos + 8 <= c.end)?;
    c.pos += 8;
    Some(f64::from_bits(u64::from_le_bytes(b.try_into().unwrap())))
}

/// Why one field could not be decoded. Small and `Copy`, so the per-field
/// hot path returns it in registers; worded once, in [`Bad::describe`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Bad {
    /// The column ends early or holds a bad varint.
    Column(u8),
    /// The value does not fit the field's type.
    Range(u8),
    /// A string id past the frame's strings.
    String(u8, u32),
}

impl Bad {
    fn describe(self, kind: u8, n_strings: u32) -> Corrupt {
        Corrupt(match self {
            Bad::Column(f) => format!("column {f} of record kind {kind} ends early or holds a bad varint"),
            Bad::Range(f) => format!("field {f} of record kind {kind} out of range"),
            Bad::String(f, v) => {
                format!("field {f} of record kind {kind} refers to string {v}, the frame has {n_strings}")
            }
        })
    }
}

/// Reads one record's fields (the decoder side of [`crate::declare`]).
pub(crate) struct R<'a> {
    buf: &'a [u8],
    cols: &'a mut [Col; MAX_FIELDS],
    tracks: &'a mut Tracks,
    cur: usize,
    n_strings: u32,
}

impl R<'_> {
    #[inline(always)]
    pub fn u(&mut self, f: usize) -> Result<u64, Bad> {
        col_u(self.buf, &mut self.cols[f]).ok_or(Bad::Column(f as u8))
    }
    #[inline(always)]
    pub fn i(&mut self, f: usize) -> Result<i64, Bad> {
        self.u(f).map(unzigzag)
    }
    /// A field stored as its value, narrowed to its type.
    #[inline(always)]
    pub fn narrow<T: crate::declare::FieldValue>(&mut self, f: usize) -> Result<T, Bad> {
        T::from_col(self.u(f)?).ok_or(Bad::Range(f as u8))
    }
    /// A field stored as its distance from `base`.
    #[inline(always)]
    pub fn rel<T: crate::declare::FieldValue>(&mut self, f: usize, base: i64) -> Result<T, Bad> {
        let d = self.i(f)?;
        base.checked_add(d).and_then(T::from_i).ok_or(Bad::Range(f as u8))
    }
    #[inline(always)]
    fn str_id(&self, f: usize, v: u64) -> Result<StrId, Bad> {
        let v = u32::try_from(v).map_err(|_| Bad::Range(f as u8))?;
        if v >= self.n_strings && self.cols[f].present {
            return Err(Bad::String(f as u8, v));
        }
        Ok(StrId(v))
    }
    #[inline(always)]
    pub fn s(&mut self, f: usize) -> Result<StrId, Bad> {
        let v = self.u(f)?;
        self.str_id(f, v)
    }
    #[inline(always)]
    pub fn path(&mut self, f: usize) -> Result<StrId, Bad> {
        let v = self.u(f)?;
        let s = if v == 0 { StrId(self.tracks.list[self.cur].path) } else { self.str_id(f, v - 1)? };
        self.tracks.list[self.cur].path = s.0;
        Ok(s)
    }
    #[inline(always)]
    pub fn fd(&mut self, f: usize) -> Result<i32, Bad> {
        let d = self.i(f)?;
        let t = &mut self.tracks.list[self.cur];
        let fd = i64::from(t.fd).checked_add(d).and_then(|v| i32::try_from(v).ok()).ok_or(Bad::Range(f as u8))?;
        t.fd = fd;
        Ok(fd)
    }
    #[inline(always)]
    pub fn f64(&mut self, f: usize) -> Result<f64, Bad> {
        col_f64(self.buf, &mut self.cols[f]).ok_or(Bad::Column(f as u8))
    }
    #[inline(always)]
    pub fn thread(&mut self, f: usize) -> Result<u32, Bad> {
        let tid = self.tid(f)?;
        self.cur = self.tracks.track(tid);
        Ok(tid)
    }
    #[inline(always)]
    pub fn tid(&mut self, f: usize) -> Result<u32, Bad> {
        let code = self.u(f)?;
        self.tracks.tid_of_code(code).ok_or(Bad::Range(f as u8))
    }
    #[inline(always)]
    pub fn pid_of(&mut self, f: usize, tid: u32) -> Result<u32, Bad> {
        let v = self.u(f)?;
        let i = self.tracks.track(tid);
        let t = &mut self.tracks.list[i];
        if v == 0 {
            return Ok(t.pid);
        }
        let pid = i64::from(tid)
            .checked_sub(unzigzag(v - 1))
            .and_then(|p| u32::try_from(p).ok())
            .ok_or(Bad::Range(f as u8))?;
        t.pid = pid;
        t.pid_known = true;
        Ok(pid)
    }
    #[inline(always)]
    pub fn ts(&mut self, f: usize) -> Result<u64, Bad> {
        let d = self.i(f)?;
        self.tracks.last_ts = self.tracks.last_ts.wrapping_add(d as u64);
        Ok(self.tracks.last_ts)
    }
    #[inline(always)]
    pub fn seq(&mut self, f: usize, slot: usize) -> Result<u64, Bad> {
        let d = self.i(f)?;
        Ok(self.tracks.list[self.cur].seq[slot].wrapping_add(d as u64))
    }
    #[inline(always)]
    pub fn set_seq(&mut self, slot: usize, end: u64) {
        self.tracks.list[self.cur].seq[slot] = end;
    }
}

/// Decodes the records of one frame payload. Holds no allocation per record.
pub(crate) struct Decoder {
    /// The log's format (1 or 2).
    major: u16,
    cols: Vec<[Col; MAX_FIELDS]>,
    tracks: Tracks,
    v1: crate::v1::State,
    kinds: Col,
    n_records: usize,
    next: usize,
    str_offsets: Vec<(u32, u32)>,
    pub unknown_kinds: u64,
}

impl Decoder {
    pub fn new(major: u16) -> Self {
        Decoder {
            major,
            cols: vec![[Col::default(); MAX_FIELDS]; MAX_KINDS],
            tracks: Tracks::new(),
            v1: Default::default(),
            kinds: Col::default(),
            n_records: 0,
            next: 0,
            str_offsets: Vec::new(),
            unknown_kinds: 0,
        }
    }

    /// Parses the directory of `buf` (a whole payload). Afterwards
    /// [`Decoder::next`] yields the records and [`Decoder::str`] the strings.
    pub fn reset(&mut self, buf: &[u8]) -> Result<usize, Corrupt> {
        for fields in &mut self.cols {
            *fields = [Col::default(); MAX_FIELDS];
        }
        self.tracks.reset();
        self.v1 = Default::default();
        self.kinds = Col::default();
        self.next = 0;
        self.str_offsets.clear();
        let bad = |what: &str| Corrupt(format!("frame directory: {what}"));
        let mut pos = 0usize;
        let n_records = get_u64(buf, &mut pos).ok_or_else(|| bad("record count"))? as usize;
        let n_strings = get_u64(buf, &mut pos).ok_or_else(|| bad("string count"))? as usize;
        let n_cols = get_u64(buf, &mut pos).ok_or_else(|| bad("column count"))? as usize;
        if n_cols > buf.len() || n_records > buf.len() || n_strings > buf.len() {
            return Err(bad("counts larger than the frame"));
        }
        let mut entries = Vec::with_capacity(n_cols.min(64));
        for _ in 0..n_cols {
            let id = get_u64(buf, &mut pos).ok_or_else(|| bad("column id"))?;
            let len = get_u64(buf, &mut pos).ok_or_else(|| bad("column length"))?;
            entries.push((id, len));
        }
        let field_bits = if self.major == 1 { 4 } else { 5 };
        let mut start = pos;
        let mut str_lens = Col::default();
        let mut str_bytes = Col::default();
        for (id, len) in entries {
            let end = usize::try_from(len)
                .ok()
                .and_then(|l| start.checked_add(l))
                .filter(|&e| e <= buf.len())
                .ok_or_else(|| bad("column runs past the end of the frame"))?;
            let col = Col { start, end, pos: start, present: true };
            match id {
                COL_KIND => self.kinds = col,
                COL_STR_LEN => str_lens = col,
                COL_STR_BYTES => str_bytes = col,
                _ => {
                    let (k, f) = if self.major > 1 && id >= EXT_FIELDS {
                        (((id - EXT_FIELDS) >> 5) as usize, 32 + ((id - EXT_FIELDS) & 31) as usize)
                    } else {
                        ((id >> field_bits) as usize, (id & ((1 << field_bits) - 1)) as usize)
                    };
                    if k < MAX_KINDS {
                        self.cols[k][f] = col;
                    }
                }
            }
            start = end;
        }
        if self.kinds.end - self.kinds.start != n_records {
            return Err(bad("kind column length differs from the record count"));
        }
        let mut lp = str_lens.start;
        let mut bp = str_bytes.start;
        for _ in 0..n_strings {
            let l = get_u64(&buf[..str_lens.end], &mut lp).ok_or_else(|| bad("string length"))? as usize;
            let e =
                bp.checked_add(l).filter(|&e| e <= str_bytes.end).ok_or_else(|| bad("string runs past its column"))?;
            self.str_offsets.push((bp as u32, e as u32));
            bp = e;
        }
        self.n_records = n_records;
        Ok(n_records)
    }

    pub fn str<'b>(&self, buf: &'b [u8], id: StrId) -> Option<&'b [u8]> {
        let (s, e) = *self.str_offsets.get(id.0 as usize)?;
        buf.get(s as usize..e as usize)
    }

    /// The next record of the payload `buf` given to [`Decoder::reset`],
    /// decoded into `out` in place; `None` at the end.
    #[inline]
    pub fn next_into(&mut self, buf: &[u8], out: &mut Record) -> Option<Result<(), Corrupt>> {
        loop {
            if self.next >= self.n_records {
                return None;
            }
            let k = buf[self.kinds.start + self.next];
            self.next += 1;
            let n_strings = self.str_offsets.len() as u32;
            let cols = match self.cols.get_mut(k as usize) {
                Some(c) => c,
                None => {
                    self.unknown_kinds += 1;
                    continue;
                }
            };
            let got = if self.major == 1 {
                crate::v1::decode(k, buf, cols, &mut self.v1, n_strings).map(|r| r.map(|rec| *out = rec))
            } else {
                let mut r = R { buf, cols, tracks: &mut self.tracks, cur: k as usize, n_strings };
                Record::decode_into(k, &mut r, out)
            };
            match got {
                Some(res) => return Some(res.map_err(|b| b.describe(k, n_strings))),
                None => self.unknown_kinds += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind's fields have columns (a field past MAX_FIELDS would
    /// panic the writer).
    #[test]
    fn every_field_has_a_column() {
        for &code in Record::CODES {
            let r = Record::build(code, |_| 0).unwrap();
            let (_, cols) = r.fields();
            assert!(cols.iter().all(|&c| usize::from(c) < MAX_FIELDS), "{}: {cols:?}", r.kind_name());
        }
    }

    /// Fields 32 and up round-trip, in columns a reader that knows only
    /// `kind << 5 | field` takes for an unknown kind's and skips.
    #[test]
    fn fields_past_31_round_trip_and_older_readers_skip_them() {
        let r = Record::IoSummary(IoSummary {
            tid: 7,
            pid: 7,
            ts: 10,
            dur: 5,
            calls: 3,
            h20: 4,
            stack: 99,
            ..Default::default()
        });
        let mut cols = Columns::new();
        cols.push(&r);
        let mut payload = Vec::new();
        cols.finish(1, &[1], b"x", &mut payload);
        let mut d = Decoder::new(2);
        d.reset(&payload).unwrap();
        let mut got = Record::Lost(Lost::default());
        d.next_into(&payload, &mut got).unwrap().unwrap();
        assert_eq!(got, r);
        let id = column_id(usize::from(IoSummary::CODE), 32);
        assert!((id >> 5) as usize >= MAX_KINDS, "{id}");
    }

    /// Codes reserved for kinds this version does not have yet and codes
    /// past the last are skipped and counted, never decoded.
    #[test]
    fn reserved_and_future_kinds_are_skipped() {
        let mut cols = Columns::new();
        cols.push(&Record::Lost(Lost { ts: 5, kind: LostKind::RingFull, count: 1 }));
        let mut payload = Vec::new();
        cols.finish(0, &[], &[], &mut payload);
        // The directory, then the columns in its order: kinds first.
        let mut pos = 0;
        let _ = (get_u64(&payload, &mut pos), get_u64(&payload, &mut pos));
        let n_cols = get_u64(&payload, &mut pos).unwrap();
        for _ in 0..2 * n_cols {
            get_u64(&payload, &mut pos).unwrap();
        }
        assert_eq!(payload[pos], Lost::CODE);
        for k in [23u8, 26, 35, 63, 64, 200] {
            assert!(!known_kind(k));
            let mut p = payload.clone();
            p[pos] = k;
            let mut d = Decoder::new(2);
            d.reset(&p).unwrap();
            assert!(d.next_into(&p, &mut Record::Lost(Lost::default())).is_none(), "kind {k}");
            assert_eq!(d.unknown_kinds, 1, "kind {k}");
        }
    }
}
