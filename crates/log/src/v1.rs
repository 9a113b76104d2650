//! Format 1's records, read only. Format 1 stored each field of a kind in
//! a column numbered by hand in two places (the encoder and this decoder)
//! and predicted times and offsets per kind; format 2 declares each kind
//! once ([`crate::declare`]) and predicts per thread. This decoder is
//! frozen: logs written by mltrace before format 2 still read, and no new
//! kind or field ever comes here.

use crate::codec::{col_f64, col_u, Bad, Col, MAX_FIELDS};
use crate::record::*;
use crate::varint::unzigzag;

/// Format 1's codes of the kinds it had.
const KNOWN: &[u8] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 27];

/// Per-kind prediction state, reset at every frame.
#[derive(Clone, Copy, Default)]
struct Prev {
    ts: u64,
    offset_end: u64,
}

/// The predictions of one frame.
#[derive(Default)]
pub(crate) struct State([Prev; 32]);

/// Decodes one format-1 record of kind `k`; `None` for a kind format 1 did not have.
pub(crate) fn decode(
    k: u8,
    buf: &[u8],
    cols: &mut [Col; MAX_FIELDS],
    state: &mut State,
    n_strings: u32,
) -> Option<Result<Record, Bad>> {
    if !KNOWN.contains(&k) {
        return None;
    }
    let mut r = R { buf, cols, prev: &mut state.0[k as usize], n_strings };
    Some(decode_one(k, &mut r))
}

/// What a [`Mapping`]'s `ret` is likely to be: the address asked for
/// (MAP_FIXED, an mremap in place), else 0 (munmap, a count).
fn ret_guess(op: MapOp, addr: u64) -> i64 {
    match op {
        MapOp::Mmap | MapOp::Mremap => addr as i64,
        _ => 0,
    }
}

struct R<'a> {
    buf: &'a [u8],
    cols: &'a mut [Col; MAX_FIELDS],
    prev: &'a mut Prev,
    n_strings: u32,
}

impl R<'_> {
    #[inline(always)]
    fn u(&mut self, f: usize) -> Result<u64, Bad> {
        col_u(self.buf, &mut self.cols[f]).ok_or(Bad::Column(f as u8))
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
        col_f64(self.buf, &mut self.cols[f]).ok_or(Bad::Column(f as u8))
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

fn decode_one(k: u8, r: &mut R<'_>) -> Result<Record, Bad> {
    Ok(match k {
        1 => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            let parent_tid = r.u32(3)?;
            let parent_pid = r.pid(parent_tid, 4)?;
            Record::Fork(Fork { ts, pid, tid, parent_pid, parent_tid, thread: r.u(5)? != 0 })
        }
        2 => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            Record::Exec(Exec { ts, pid, tid, filename: r.s(3)?, argv: r.s(4)?, trunc: r.u8(5)? })
        }
        3 => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            Record::Comm(Comm { ts, pid, tid, comm: r.s(3)? })
        }
        4 => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            Record::Exit(Exit { ts, pid, tid, status: r.i32(3)?, process_exit: r.u(4)? != 0 })
        }
        5 => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            Record::Open(Open {
                stack: 0,
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
        6 => {
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
            Record::Io(Io {
                stack: 0,
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
                block_reqs,
                summed: false,
            })
        }
        7 => {
            let ts = r.ts(0)?;
            let (pid, tid) = r.ids(1, 2)?;
            Record::Close(Close {
                stack: 0,
                ts,
                pid,
                tid,
                dur: r.u(3)?,
                fd: r.i32(4)?,
                path: r.s(5)?,
                kind: FileKind::from_u8(r.u8(6)?),
                ret: r.i(7)?,
                summed: false,
            })
        }
        8 => {
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
                stack: 0,
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
        9 => {
            let ts = r.ts(0)?;
            Record::Lost(Lost { ts, kind: LostKind::from_u8(r.u8(1)?), count: r.u(2)? })
        }
        10 => {
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
        11 => {
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
        12 => {
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
        27 => {
            let ts = r.ts(0)?;
            let (group, kind, code) = (r.s(1)?, GpuEventKind::from_u8(r.u8(2)?), r.u(3)?);
            Record::GpuEvent(GpuEvent { ts, group, kind, code, pid: r.u32(4)? })
        }
        13 => {
            let ts = r.ts(0)?;
            Record::Mark(Mark { ts, name: r.s(1)?, value: r.s(2)?, rank: r.i32(3)?, pid: r.u32(4)? })
        }
        14 => {
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
        15 => {
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
        18 => {
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
        19 => {
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
        20 => {
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
                prev_call: SleepCall::None,
                prev_ran_us: 0,
            })
        }
        21 => {
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
            Record::SchedWake(SchedWake {
                ts,
                op,
                cpu,
                target_cpu,
                pid,
                tid,
                comm,
                prio,
                waker_pid,
                waker_tid,
                traced,
                by: WakeBy::Unknown,
            })
        }
        16 => {
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
        17 => {
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
