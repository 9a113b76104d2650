//! Columnar encoding of records inside one frame.
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
//! `id = kind << 4 | field`. Values are varints; timestamps are zigzag deltas
//! from the previous record of the same kind, and fields that usually repeat
//! are coded as differences from a prediction, so that zstd sees long runs of
//! zeros. A reader ignores columns it does not know (a newer writer's extra
//! fields) and reads a missing column as zeros (an older writer's), so fields
//! can be added without a format break; a kind it does not know is skipped and
//! counted.

use crate::record::*;
use crate::varint::{get_u64, put_i64, put_u64, unzigzag};

pub(crate) const MAX_KINDS: usize = 32;
pub(crate) const MAX_FIELDS: usize = 16;

const COL_KIND: u64 = 0;
const COL_STR_LEN: u64 = 1;
const COL_STR_BYTES: u64 = 2;

/// Record kind codes, as stored in column 0. Never reuse a code.
pub(crate) mod kind {
    pub const FORK: u8 = 1;
    pub const EXEC: u8 = 2;
    pub const COMM: u8 = 3;
    pub const EXIT: u8 = 4;
    pub const OPEN: u8 = 5;
    pub const IO: u8 = 6;
    pub const CLOSE: u8 = 7;
    pub const TRANSFER: u8 = 8;
    pub const LOST: u8 = 9;
    pub const BLOCK: u8 = 10;
    pub const COUNTER: u8 = 11;
    pub const PHASE: u8 = 12;
    pub const MARK: u8 = 13;
    pub const IO_ACCOUNTING: u8 = 14;
    pub const PAGE_CACHE: u8 = 15;
    pub const MAPPING: u8 = 16;
    pub const MAJOR_FAULT: u8 = 17;
    pub const IO_URING: u8 = 18;
    pub const AIO: u8 = 19;

    pub const SCHED_SWITCH: u8 = 20;
    pub const SCHED_WAKE: u8 = 21;
    pub const GPU_EVENT: u8 = 27;

    /// Whether this version reads kind `k` (codes are not contiguous:
    /// others are reserved for kinds this version does not know).
    pub fn known(k: u8) -> bool {
        matches!(k, FORK..=MAJOR_FAULT | IO_URING | AIO | SCHED_SWITCH | SCHED_WAKE | GPU_EVENT)
    }
}

/// What a [`Mapping`]'s `ret` is likely to be: the address asked for
/// (MAP_FIXED, an mremap in place), else 0 (munmap, a count).
fn ret_guess(op: MapOp, addr: u64) -> i64 {
    match op {
        MapOp::Mmap | MapOp::Mremap => addr as i64,
        _ => 0,
    }
}

/// Per-kind prediction state, reset at every frame.
#[derive(Clone, Copy, Default)]
struct Prev {
    ts: u64,
    offset_end: u64,
}

/// Builds one frame's columns.
pub(crate) struct Columns {
    kinds: Vec<u8>,
    cols: Vec<[Vec<u8>; MAX_FIELDS]>,
    prev: [Prev; MAX_KINDS],
}

struct W<'a> {
    cols: &'a mut [Vec<u8>; MAX_FIELDS],
    prev: &'a mut Prev,
}

impl W<'_> {
    #[inline]
    fn u(&mut self, f: usize, v: u64) {
        put_u64(&mut self.cols[f], v);
    }
    #[inline]
    fn i(&mut self, f: usize, v: i64) {
        put_i64(&mut self.cols[f], v);
    }
    #[inline]
    fn s(&mut self, f: usize, v: StrId) {
        put_u64(&mut self.cols[f], u64::from(v.0));
    }
    /// Raw IEEE bits: counters repeat exact values often, which zstd sees.
    #[inline]
    fn f64(&mut self, f: usize, v: f64) {
        self.cols[f].extend_from_slice(&v.to_bits().to_le_bytes());
    }
    #[inline]
    fn ts(&mut self, f: usize, ts: u64) {
        let d = ts.wrapping_sub(self.prev.ts) as i64;
        self.prev.ts = ts;
        put_i64(&mut self.cols[f], d);
    }
    /// tid, then pid as its distance from tid (0 for a main thread).
    #[inline]
    fn ids(&mut self, tid_f: usize, pid_f: usize, pid: u32, tid: u32) {
        self.u(tid_f, u64::from(tid));
        self.i(pid_f, i64::from(tid) - i64::from(pid));
    }
}

impl Columns {
    pub fn new() -> Self {
        Columns {
            kinds: Vec::new(),
            cols: (0..MAX_KINDS).map(|_| Default::default()).collect(),
            prev: [Prev::default(); MAX_KINDS],
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

    fn w(&mut self, k: u8) -> W<'_> {
        self.kinds.push(k);
        W { cols: &mut self.cols[k as usize], prev: &mut self.prev[k as usize] }
    }

    pub fn push(&mut self, rec: &Record) {
        match rec {
            Record::Fork(r) => {
                let mut w = self.w(kind::FORK);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, u64::from(r.parent_tid));
                w.i(4, i64::from(r.parent_tid) - i64::from(r.parent_pid));
                w.u(5, u64::from(r.thread));
            }
            Record::Exec(r) => {
                let mut w = self.w(kind::EXEC);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.s(3, r.filename);
                w.s(4, r.argv);
                w.u(5, u64::from(r.trunc));
            }
            Record::Comm(r) => {
                let mut w = self.w(kind::COMM);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.s(3, r.comm);
            }
            Record::Exit(r) => {
                let mut w = self.w(kind::EXIT);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.i(3, i64::from(r.status));
                w.u(4, u64::from(r.process_exit));
            }
            Record::Open(r) => {
                let mut w = self.w(kind::OPEN);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, r.dur);
                w.u(4, r.op as u64);
                w.i(5, i64::from(r.dirfd));
                w.s(6, r.path);
                w.s(7, r.abs_path);
                w.u(8, u64::from(r.flags));
                w.u(9, u64::from(r.mode));
                w.i(10, r.ret);
                w.u(11, r.kind as u64);
                w.u(12, u64::from(r.trunc));
                w.u(13, u64::from(r.block_reqs));
            }
            Record::Io(r) => {
                let mut w = self.w(kind::IO);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, r.dur);
                w.u(4, r.op as u64);
                w.i(5, i64::from(r.fd));
                w.s(6, r.path);
                w.u(7, r.kind as u64);
                // Sequential access predicts the next offset exactly.
                let d = r.offset.wrapping_sub(w.prev.offset_end) as i64;
                w.i(8, d);
                w.prev.offset_end = r.offset.wrapping_add(r.ret.max(0) as u64);
                w.u(9, r.offset_src as u64);
                w.u(10, r.requested);
                w.i(11, (r.requested as i64).wrapping_sub(r.ret));
                w.u(12, u64::from(r.block_reqs));
            }
            Record::Close(r) => {
                let mut w = self.w(kind::CLOSE);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, r.dur);
                w.i(4, i64::from(r.fd));
                w.s(5, r.path);
                w.u(6, r.kind as u64);
                w.i(7, r.ret);
            }
            Record::Transfer(r) => {
                let mut w = self.w(kind::TRANSFER);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, r.dur);
                w.u(4, r.op as u64);
                w.i(5, i64::from(r.in_fd));
                w.s(6, r.in_path);
                w.i(7, i64::from(r.out_fd));
                w.s(8, r.out_path);
                w.u(9, r.requested);
                w.i(10, (r.requested as i64).wrapping_sub(r.ret));
                w.u(11, u64::from(r.block_reqs));
            }
            Record::Lost(r) => {
                let mut w = self.w(kind::LOST);
                w.ts(0, r.ts);
                w.u(1, r.kind as u64);
                w.u(2, r.count);
            }
            Record::Block(r) => {
                let mut w = self.w(kind::BLOCK);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, r.queue);
                w.u(4, r.device);
                w.s(5, r.comm);
                w.u(6, u64::from(r.dev));
                w.s(7, r.disk);
                // Sequential requests predict the next sector.
                let d = r.sector.wrapping_sub(w.prev.offset_end) as i64;
                w.i(8, d);
                w.prev.offset_end = r.sector.wrapping_add(r.bytes >> 9);
                w.u(9, r.bytes);
                w.u(10, r.op as u64);
                w.u(11, u64::from(r.flags));
                w.i(12, i64::from(r.error));
                // 0: no cause; else 1 + how long before the start it began.
                w.u(13, if r.cause_ts == 0 { 0 } else { r.ts.wrapping_sub(r.cause_ts).wrapping_add(1) });
                w.u(14, u64::from(r.cause_idx));
            }
            Record::Counter(r) => {
                let mut w = self.w(kind::COUNTER);
                w.ts(0, r.ts);
                w.s(1, r.group);
                w.s(2, r.name);
                w.u(3, r.unit as u64);
                w.u(4, u64::from(r.pid));
                w.f64(5, r.value);
            }
            Record::Phase(r) => {
                let mut w = self.w(kind::PHASE);
                w.ts(0, r.ts);
                w.u(1, r.dur);
                w.u(2, r.kind as u64);
                w.s(3, r.name);
                w.i(4, i64::from(r.rank));
                w.u(5, u64::from(r.pid));
                w.u(6, u64::from(r.flags));
            }
            Record::GpuEvent(r) => {
                let mut w = self.w(kind::GPU_EVENT);
                w.ts(0, r.ts);
                w.s(1, r.group);
                w.u(2, r.kind as u64);
                w.u(3, r.code);
                w.u(4, u64::from(r.pid));
            }
            Record::Mark(r) => {
                let mut w = self.w(kind::MARK);
                w.ts(0, r.ts);
                w.s(1, r.name);
                w.s(2, r.value);
                w.i(3, i64::from(r.rank));
                w.u(4, u64::from(r.pid));
            }
            Record::IoAccounting(r) => {
                let mut w = self.w(kind::IO_ACCOUNTING);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, r.at as u64);
                w.u(4, u64::from(r.have));
                w.u(5, r.rchar);
                w.u(6, r.wchar);
                w.u(7, r.syscr);
                w.u(8, r.syscw);
                w.u(9, r.read_bytes);
                w.u(10, r.write_bytes);
                w.u(11, r.cancelled_write_bytes);
            }
            Record::PageCache(r) => {
                let mut w = self.w(kind::PAGE_CACHE);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, u64::from(r.dev));
                w.u(4, r.ino);
                w.s(5, r.path);
                // Readahead and faults go forward: predict the next offset.
                let d = r.offset.wrapping_sub(w.prev.offset_end) as i64;
                w.i(6, d);
                w.prev.offset_end = r.offset.wrapping_add(r.bytes);
                w.u(7, r.bytes);
                w.u(8, r.during as u64);
            }
            Record::IoUring(r) => {
                let mut w = self.w(kind::IO_URING);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, r.dur);
                w.u(4, r.op as u64);
                w.i(5, i64::from(r.fd));
                w.s(6, r.path);
                w.u(7, r.kind as u64);
                // Requests of one stream usually follow each other.
                let d = r.offset.wrapping_sub(w.prev.offset_end) as i64;
                w.i(8, d);
                w.prev.offset_end = r.offset.wrapping_add(r.ret.max(0) as u64);
                w.u(9, r.offset_src as u64);
                w.u(10, r.requested);
                w.i(11, (r.requested as i64).wrapping_sub(r.ret));
                w.u(12, r.user_data);
                w.i(13, i64::from(r.complete_tid) - i64::from(r.tid));
                w.u(14, u64::from(r.flags));
            }
            Record::Aio(r) => {
                let mut w = self.w(kind::AIO);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, r.dur);
                // Sixteen columns at most: the small codes share one.
                w.u(4, r.op as u64 | (r.cmd as u64) << 8 | u64::from(r.flags) << 16);
                w.u(5, r.ctx);
                w.i(6, i64::from(r.fd));
                w.s(7, r.path);
                w.u(8, r.kind as u64);
                w.u(9, r.offset);
                w.i(10, r.nr);
                w.i(11, r.min_nr);
                w.i(12, r.ret);
                w.u(13, r.read_bytes);
                w.u(14, r.write_bytes);
                w.u(15, u64::from(r.counted) | u64::from(r.errors) << 16 | u64::from(r.block_reqs) << 32);
            }
            Record::SchedSwitch(r) => {
                // Frequent: prios as distances from nice 0 and the next
                // thread's pid from its tid, so most fields are one zero byte.
                let mut w = self.w(kind::SCHED_SWITCH);
                w.ts(0, r.ts);
                w.u(1, u64::from(r.cpu));
                w.ids(2, 3, r.prev_pid, r.prev_tid);
                w.s(4, r.prev_comm);
                w.i(5, i64::from(r.prev_prio) - 120);
                w.u(6, r.prev_state as u64);
                w.ids(7, 8, r.next_pid, r.next_tid);
                w.s(9, r.next_comm);
                w.i(10, i64::from(r.next_prio) - 120);
                w.u(11, u64::from(r.traced));
            }
            Record::SchedWake(r) => {
                let mut w = self.w(kind::SCHED_WAKE);
                w.ts(0, r.ts);
                w.u(1, r.op as u64);
                w.u(2, u64::from(r.cpu));
                w.i(3, i64::from(r.target_cpu) - i64::from(r.cpu));
                w.ids(4, 5, r.pid, r.tid);
                w.s(6, r.comm);
                w.i(7, i64::from(r.prio) - 120);
                w.ids(8, 9, r.waker_pid, r.waker_tid);
                w.u(10, u64::from(r.traced));
            }
            Record::Mapping(r) => {
                let mut w = self.w(kind::MAPPING);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, r.dur);
                // Three small codes in one column (a kind has 16 columns).
                w.u(4, r.op as u64 | (r.kind as u64) << 4 | u64::from(r.file_flags) << 12);
                w.i(5, i64::from(r.fd));
                w.s(6, r.path);
                w.u(7, u64::from(r.dev));
                w.u(8, r.ino);
                w.u(9, r.offset);
                w.u(10, r.addr);
                w.u(11, r.len);
                w.u(12, r.new_len);
                w.u(13, u64::from(r.prot) | u64::from(r.flags) << 32);
                w.i(14, r.ret.wrapping_sub(ret_guess(r.op, r.addr)));
            }
            Record::MajorFault(r) => {
                let mut w = self.w(kind::MAJOR_FAULT);
                w.ts(0, r.ts);
                w.ids(1, 2, r.pid, r.tid);
                w.u(3, r.dur);
                // A scan through a mapping faults page after page.
                let d = r.addr.wrapping_sub(w.prev.offset_end) as i64;
                w.i(4, d);
                w.prev.offset_end = r.addr;
                w.u(5, u64::from(r.flags));
                w.u(6, u64::from(r.dev));
                w.u(7, r.ino);
                w.s(8, r.path);
                w.u(9, r.offset);
            }
        }
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
                    dir.push((((k as u64) << 4) | f as u64, col));
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
        self.prev = [Prev::default(); MAX_KINDS];
    }
}

/// Why a payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrupt(pub String);

#[derive(Clone, Copy, Default)]
struct Col {
    start: usize,
    end: usize,
    pos: usize,
    present: bool,
}

/// Decodes the records of one frame payload. Holds no allocation per record.
pub(crate) struct Decoder {
    cols: Vec<[Col; MAX_FIELDS]>,
    prev: [Prev; MAX_KINDS],
    kinds: Col,
    n_records: usize,
    next: usize,
    str_offsets: Vec<(u32, u32)>,
    pub unknown_kinds: u64,
}

struct R<'a> {
    buf: &'a [u8],
    cols: &'a mut [Col; MAX_FIELDS],
    prev: &'a mut Prev,
    n_strings: u32,
}

/// Why one field could not be decoded. Small and `Copy`, so the per-field
/// hot path returns it in registers; worded once, in [`Bad::describe`].
#[derive(Clone, Copy, Debug)]
enum Bad {
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

impl R<'_> {
    #[inline(always)]
    fn u(&mut self, f: usize) -> Result<u64, Bad> {
        let c = &mut self.cols[f];
        // Most values fit one or two bytes: take those without the general
        // loop. (`reset` checked that every column lies inside `buf`; an
        // absent column is empty, so it goes past here.)
        if c.pos + 1 < c.end {
            if let Some(&[b0, b1]) = self.buf.get(c.pos..c.pos + 2) {
                if b0 < 0x80 {
                    c.pos += 1;
                    return Ok(u64::from(b0));
                }
                if b1 < 0x80 {
                    c.pos += 2;
                    return Ok(u64::from(b0 & 0x7f) | u64::from(b1) << 7);
                }
            }
        } else if !c.present {
            return Ok(0);
        } else if c.pos < c.end {
            if let Some(&b) = self.buf.get(c.pos) {
                if b < 0x80 {
                    c.pos += 1;
                    return Ok(u64::from(b));
                }
            }
        }
        let mut pos = c.pos;
        match get_u64(&self.buf[..c.end], &mut pos) {
            Some(v) => {
                c.pos = pos;
                Ok(v)
            }
            None => Err(Bad::Column(f as u8)),
        }
    }
    #[inline(always)]
    fn i(&mut self, f: usize) -> Result<i64, Bad> {
        self.u(f).map(unzigzag)
    }
    /// An unsigned field narrowed to its type, out of range being corrupt.
    #[inline(always)]
    fn narrow<T: TryFrom<u64>>(&mut self, f: usize) -> Result<T, Bad> {
        T::try_from(self.u(f)?).map_err(|_| Bad::Range(f as u8))
    }
    #[inline(always)]
    fn i32(&mut self, f: usize) -> Result<i32, Bad> {
        i32::try_from(self.i(f)?).map_err(|_| Bad::Range(f as u8))
    }
    #[inline(always)]
    fn u32(&mut self, f: usize) -> Result<u32, Bad> {
        self.narrow(f)
    }
    #[inline(always)]
    fn u16(&mut self, f: usize) -> Result<u16, Bad> {
        self.narrow(f)
    }
    #[inline(always)]
    fn u8(&mut self, f: usize) -> Result<u8, Bad> {
        self.narrow(f)
    }
    #[inline(always)]
    fn s(&mut self, f: usize) -> Result<StrId, Bad> {
        let v = self.u32(f)?;
        if v >= self.n_strings && self.cols[f].present {
            return Err(Bad::String(f as u8, v));
        }
        Ok(StrId(v))
    }
    #[inline(always)]
    fn f64(&mut self, f: usize) -> Result<f64, Bad> {
        let c = &mut self.cols[f];
        if !c.present {
            return Ok(0.0);
        }
        let b = self.buf.get(c.pos..c.pos + 8).filter(|_| c.pos + 8 <= c.end).ok_or(Bad::Column(f as u8))?;
        c.pos += 8;
        Ok(f64::from_bits(u64::from_le_bytes(b.try_into().unwrap())))
    }
    #[inline(always)]
    fn ts(&mut self, f: usize) -> Result<u64, Bad> {
        let d = self.i(f)?;
        let ts = self.prev.ts.wrapping_add(d as u64);
        self.prev.ts = ts;
        Ok(ts)
    }
    /// A pid stored as its difference from a tid.
    #[inline(always)]
    fn pid(&mut self, tid: u32, f: usize) -> Result<u32, Bad> {
        let d = self.i(f)?;
        i64::from(tid).checked_sub(d).and_then(|p| u32::try_from(p).ok()).ok_or(Bad::Range(f as u8))
    }
    /// A priority stored as its distance from 120 (nice 0).
    #[inline(always)]
    fn prio(&mut self, f: usize) -> Result<i32, Bad> {
        i32::try_from(self.i(f)?.saturating_add(120)).map_err(|_| Bad::Range(f as u8))
    }
    #[inline(always)]
    fn ids(&mut self, tid_f: usize, pid_f: usize) -> Result<(u32, u32), Bad> {
        let tid = self.u32(tid_f)?;
        Ok((self.pid(tid, pid_f)?, tid))
    }
}

impl Decoder {
    pub fn new() -> Self {
        Decoder {
            cols: vec![[Col::default(); MAX_FIELDS]; MAX_KINDS],
            prev: [Prev::default(); MAX_KINDS],
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
        self.prev = [Prev::default(); MAX_KINDS];
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
                    let (k, f) = ((id >> 4) as usize, (id & 15) as usize);
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

    /// The next record of the payload `buf` given to [`Decoder::reset`].
    pub fn next(&mut self, buf: &[u8]) -> Option<Result<Record, Corrupt>> {
        loop {
            if self.next >= self.n_records {
                return None;
            }
            let k = buf[self.kinds.start + self.next];
            self.next += 1;
            if k as usize >= MAX_KINDS || !kind::known(k) {
                self.unknown_kinds += 1;
                continue;
            }
            let n_strings = self.str_offsets.len() as u32;
            let mut r = R { buf, cols: &mut self.cols[k as usize], prev: &mut self.prev[k as usize], n_strings };
            return Some(decode_one(k, &mut r).map_err(|b| b.describe(k, n_strings)));
        }
    }
}

fn decode_one(k: u8, r: &mut R<'_>) -> Result<Record, Bad> {
    Ok(match k {
        kind::FORK => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            let parent_tid = r.u32(3)?;
            let parent_pid = r.pid(parent_tid, 4)?;
            Record::Fork(Fork { ts, pid, tid, parent_pid, parent_tid, thread: r.u(5)? != 0 })
        }
        kind::EXEC => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            Record::Exec(Exec { ts, pid, tid, filename: r.s(3)?, argv: r.s(4)?, trunc: r.u8(5)? })
        }
        kind::COMM => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            Record::Comm(Comm { ts, pid, tid, comm: r.s(3)? })
        }
        kind::EXIT => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            Record::Exit(Exit { ts, pid, tid, status: r.i32(3)?, process_exit: r.u(4)? != 0 })
        }
        kind::OPEN => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            Record::Open(Open {
                ts,
                pid,
                tid,
                dur: r.u(3)?,
                op: OpenOp::from_u8(r.u8(4)?),
                dirfd: r.i32(5)?,
                path: r.s(6)?,
                abs_path: r.s(7)?,
                flags: r.u32(8)?,
                mode: r.u32(9)?,
                ret: r.i(10)?,
                kind: FileKind::from_u8(r.u8(11)?),
                trunc: r.u8(12)?,
                block_reqs: r.u32(13)?,
            })
        }
        kind::IO => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            let dur = r.u(3)?;
            let op = IoOp::from_u8(r.u8(4)?);
            let fd = r.i32(5)?;
            let path = r.s(6)?;
            let kind = FileKind::from_u8(r.u8(7)?);
            let offset = r.prev.offset_end.wrapping_add(r.i(8)? as u64);
            let offset_src = OffsetSrc::from_u8(r.u8(9)?);
            let requested = r.u(10)?;
            let ret = (requested as i64).wrapping_sub(r.i(11)?);
            r.prev.offset_end = offset.wrapping_add(ret.max(0) as u64);
            let block_reqs = r.u32(12)?;
            Record::Io(Io { ts, dur, pid, tid, op, fd, path, kind, offset, offset_src, requested, ret, block_reqs })
        }
        kind::CLOSE => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            Record::Close(Close {
                ts,
                pid,
                tid,
                dur: r.u(3)?,
                fd: r.i32(4)?,
                path: r.s(5)?,
                kind: FileKind::from_u8(r.u8(6)?),
                ret: r.i(7)?,
            })
        }
        kind::TRANSFER => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            let dur = r.u(3)?;
            let op = TransferOp::from_u8(r.u8(4)?);
            let in_fd = r.i32(5)?;
            let in_path = r.s(6)?;
            let out_fd = r.i32(7)?;
            let out_path = r.s(8)?;
            let requested = r.u(9)?;
            let ret = (requested as i64).wrapping_sub(r.i(10)?);
            let block_reqs = r.u32(11)?;
            Record::Transfer(Transfer {
                ts,
                dur,
                pid,
                tid,
                op,
                in_fd,
                in_path,
                out_fd,
                out_path,
                requested,
                ret,
                block_reqs,
            })
        }
        kind::LOST => {
            let ts = r.ts(0)?;
            Record::Lost(Lost { ts, kind: LostKind::from_u8(r.u8(1)?), count: r.u(2)? })
        }
        kind::BLOCK => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            let queue = r.u(3)?;
            let device = r.u(4)?;
            let comm = r.s(5)?;
            let dev = r.u32(6)?;
            let disk = r.s(7)?;
            let sector = r.prev.offset_end.wrapping_add(r.i(8)? as u64);
            let bytes = r.u(9)?;
            r.prev.offset_end = sector.wrapping_add(bytes >> 9);
            let op = BlockOp::from_u8(r.u8(10)?);
            let flags = r.u16(11)?;
            let error = r.i32(12)?;
            let c = r.u(13)?;
            let cause_ts = if c == 0 { 0 } else { ts.wrapping_sub(c - 1) };
            let cause_idx = r.u32(14)?;
            Record::Block(Block {
                ts,
                queue,
                device,
                pid,
                tid,
                comm,
                dev,
                disk,
                sector,
                bytes,
                op,
                flags,
                error,
                cause_ts,
                cause_idx,
            })
        }
        kind::COUNTER => {
            let ts = r.ts(0)?;
            Record::Counter(Counter {
                ts,
                group: r.s(1)?,
                name: r.s(2)?,
                unit: CounterUnit::from_u8(r.u8(3)?),
                pid: r.u32(4)?,
                value: r.f64(5)?,
            })
        }
        kind::PHASE => {
            let ts = r.ts(0)?;
            Record::Phase(Phase {
                ts,
                dur: r.u(1)?,
                kind: PhaseKind::from_u8(r.u8(2)?),
                name: r.s(3)?,
                rank: r.i32(4)?,
                pid: r.u32(5)?,
                flags: r.u8(6)?,
            })
        }
        kind::GPU_EVENT => {
            let ts = r.ts(0)?;
            let (group, kind, code) = (r.s(1)?, GpuEventKind::from_u8(r.u8(2)?), r.u(3)?);
            Record::GpuEvent(GpuEvent { ts, group, kind, code, pid: r.u32(4)? })
        }
        kind::MARK => {
            let ts = r.ts(0)?;
            Record::Mark(Mark { ts, name: r.s(1)?, value: r.s(2)?, rank: r.i32(3)?, pid: r.u32(4)? })
        }
        kind::IO_ACCOUNTING => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            Record::IoAccounting(IoAccounting {
                ts,
                pid,
                tid,
                at: AcctPoint::from_u8(r.u8(3)?),
                have: r.u8(4)?,
                rchar: r.u(5)?,
                wchar: r.u(6)?,
                syscr: r.u(7)?,
                syscw: r.u(8)?,
                read_bytes: r.u(9)?,
                write_bytes: r.u(10)?,
                cancelled_write_bytes: r.u(11)?,
            })
        }
        kind::PAGE_CACHE => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            let dev = r.u32(3)?;
            let ino = r.u(4)?;
            let path = r.s(5)?;
            let offset = r.prev.offset_end.wrapping_add(r.i(6)? as u64);
            let bytes = r.u(7)?;
            r.prev.offset_end = offset.wrapping_add(bytes);
            let during = CacheDuring::from_u8(r.u8(8)?);
            Record::PageCache(PageCache { ts, pid, tid, dev, ino, path, offset, bytes, during })
        }
        kind::IO_URING => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            let dur = r.u(3)?;
            let op = UringOp::from_u8(r.u8(4)?);
            let fd = r.i32(5)?;
            let path = r.s(6)?;
            let kind = FileKind::from_u8(r.u8(7)?);
            let offset = r.prev.offset_end.wrapping_add(r.i(8)? as u64);
            let offset_src = OffsetSrc::from_u8(r.u8(9)?);
            let requested = r.u(10)?;
            let ret = (requested as i64).wrapping_sub(r.i(11)?);
            r.prev.offset_end = offset.wrapping_add(ret.max(0) as u64);
            let user_data = r.u(12)?;
            let complete_tid =
                i64::from(tid).checked_add(r.i(13)?).and_then(|t| u32::try_from(t).ok()).ok_or(Bad::Range(13))?;
            let flags = r.u8(14)?;
            Record::IoUring(IoUring {
                ts,
                dur,
                pid,
                tid,
                op,
                fd,
                path,
                kind,
                offset,
                offset_src,
                requested,
                ret,
                user_data,
                complete_tid,
                flags,
            })
        }
        kind::AIO => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            let dur = r.u(3)?;
            let codes = r.u(4)?;
            let ctx = r.u(5)?;
            let fd = r.i32(6)?;
            let path = r.s(7)?;
            let kind = FileKind::from_u8(r.u8(8)?);
            let offset = r.u(9)?;
            let (nr, min_nr, ret) = (r.i(10)?, r.i(11)?, r.i(12)?);
            let (read_bytes, write_bytes) = (r.u(13)?, r.u(14)?);
            let counts = r.u(15)?;
            Record::Aio(Aio {
                ts,
                dur,
                pid,
                tid,
                op: AioOp::from_u8(codes as u8),
                ctx,
                fd,
                path,
                kind,
                cmd: AioCmd::from_u8((codes >> 8) as u8),
                offset,
                nr,
                min_nr,
                ret,
                read_bytes,
                write_bytes,
                counted: counts as u16,
                errors: (counts >> 16) as u16,
                flags: (codes >> 16) as u8,
                block_reqs: (counts >> 32) as u32,
            })
        }
        kind::SCHED_SWITCH => {
            let ts = r.ts(0)?;
            let cpu = r.u32(1)?;
            let (prev_pid, prev_tid) = r.ids(2, 3)?;
            let prev_comm = r.s(4)?;
            let prev_prio = r.prio(5)?;
            let prev_state = SchedState::from_u8(r.u8(6)?);
            let (next_pid, next_tid) = r.ids(7, 8)?;
            let next_comm = r.s(9)?;
            let next_prio = r.prio(10)?;
            let traced = r.u8(11)?;
            Record::SchedSwitch(SchedSwitch {
                ts,
                cpu,
                prev_pid,
                prev_tid,
                prev_comm,
                prev_prio,
                prev_state,
                next_pid,
                next_tid,
                next_comm,
                next_prio,
                traced,
            })
        }
        kind::SCHED_WAKE => {
            let ts = r.ts(0)?;
            let op = WakeOp::from_u8(r.u8(1)?);
            let cpu = r.u32(2)?;
            let target_cpu =
                i64::from(cpu).checked_add(r.i(3)?).and_then(|c| u32::try_from(c).ok()).ok_or(Bad::Range(3))?;
            let (pid, tid) = r.ids(4, 5)?;
            let comm = r.s(6)?;
            let prio = r.prio(7)?;
            let (waker_pid, waker_tid) = r.ids(8, 9)?;
            let traced = r.u8(10)?;
            Record::SchedWake(SchedWake { ts, op, cpu, target_cpu, pid, tid, comm, prio, waker_pid, waker_tid, traced })
        }
        kind::MAPPING => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            let dur = r.u(3)?;
            let codes = r.u(4)?;
            let file_flags = u8::try_from(codes >> 12).map_err(|_| Bad::Range(4))?;
            let fd = r.i32(5)?;
            let path = r.s(6)?;
            let dev = r.u32(7)?;
            let ino = r.u(8)?;
            let offset = r.u(9)?;
            let addr = r.u(10)?;
            let len = r.u(11)?;
            let new_len = r.u(12)?;
            let pf = r.u(13)?;
            let op = MapOp::from_u8((codes & 15) as u8);
            let ret = r.i(14)?.wrapping_add(ret_guess(op, addr));
            Record::Mapping(Mapping {
                ts,
                dur,
                pid,
                tid,
                op,
                fd,
                path,
                kind: FileKind::from_u8((codes >> 4) as u8),
                dev,
                ino,
                file_flags,
                offset,
                addr,
                len,
                new_len,
                prot: pf as u32,
                flags: (pf >> 32) as u32,
                ret,
            })
        }
        kind::MAJOR_FAULT => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            let dur = r.u(3)?;
            let addr = r.prev.offset_end.wrapping_add(r.i(4)? as u64);
            r.prev.offset_end = addr;
            Record::MajorFault(MajorFault {
                ts,
                dur,
                pid,
                tid,
                addr,
                flags: r.u8(5)?,
                dev: r.u32(6)?,
                ino: r.u(7)?,
                path: r.s(8)?,
                offset: r.u(9)?,
            })
        }
        _ => unreachable!("kind checked by caller"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Codes reserved for kinds this version does not have yet (16, 17)
    /// and codes past the last are skipped and counted, never decoded.
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
        assert_eq!(payload[pos], kind::LOST);
        for k in [22u8, 23, 31, 200] {
            let mut p = payload.clone();
            p[pos] = k;
            let mut d = Decoder::new();
            d.reset(&p).unwrap();
            assert!(d.next(&p).is_none(), "kind {k}");
            assert_eq!(d.unknown_kinds, 1, "kind {k}");
        }
    }
}
