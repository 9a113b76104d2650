//! Asynchronous I/O: io_uring requests and libaio calls (ev_uring,
//! ev_aio).

use libbpf_rs::{MapCore, MapFlags};
use mltrace_log::*;

use super::io::{offset_src, IOF_REQ_PARTIAL};
use super::{read, KernelDecoder};
use crate::skel::types::{self, ev_aio, ev_hdr, ev_uring, op};
use crate::skel::MltraceSkel;

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[
    super::Event {
        kind: IoUring::CODE,
        min: size_of::<ev_uring>(),
        commands_io: true,
        decode: |d, h, b, e| d.uring(h, b, e),
    },
    super::Event { kind: Aio::CODE, min: size_of::<ev_aio>(), commands_io: true, decode: |d, h, b, e| d.aio(h, b, e) },
];

/// BPF's URF_* bits (events.h).
const URF_FIXED_FILE: u16 = types::uring_bits::URF_FIXED_FILE.0 as u16;
const URF_SQPOLL: u16 = types::uring_bits::URF_SQPOLL.0 as u16;
const URF_FILEPOS: u16 = types::uring_bits::URF_FILEPOS.0 as u16;
const URF_NO_OFFSET: u16 = types::uring_bits::URF_NO_OFFSET.0 as u16;
const URF_REQ_PARTIAL: u16 = types::uring_bits::URF_REQ_PARTIAL.0 as u16;
const URF_BUF_SELECT: u16 = types::uring_bits::URF_BUF_SELECT.0 as u16;

/// BPF's URF_* bits (events.h) to the log's [`uring`] bits.
fn uring_flags(f: u16) -> u8 {
    const MAP: [(u16, u8); 4] = [
        (URF_FIXED_FILE, uring::FIXED_FILE),
        (URF_SQPOLL, uring::SQPOLL),
        (URF_REQ_PARTIAL, uring::REQ_PARTIAL),
        (URF_BUF_SELECT, uring::BUF_SELECT),
    ];
    MAP.iter().filter(|(from, _)| f & from != 0).fold(0, |acc, (_, to)| acc | to)
}

pub(super) fn aio_op(o: u8) -> AioOp {
    match op(o.into()) {
        op::OP_IO_GETEVENTS => AioOp::Getevents,
        op::OP_IO_PGETEVENTS => AioOp::Pgetevents,
        _ => AioOp::Submit,
    }
}

impl KernelDecoder {
    /// Names a ring's SQPOLL thread (`iou-sqp-PID`), whose requests go on
    /// its own track: a Comm record, from /proc while it runs.
    #[cold]
    fn name_sqpoll(&mut self, h: &ev_hdr, enc: &mut FrameEncoder) {
        if self.sqpoll_named.len() >= 1024 {
            self.sqpoll_named.clear();
        }
        self.sqpoll_named.push(h.tid);
        let comm = std::fs::read_to_string(format!("/proc/{}/task/{}/comm", h.pid, h.tid))
            .map(|c| c.trim_end().to_string())
            .unwrap_or_else(|_| format!("iou-sqp-{}", h.pid));
        let comm = enc.intern(comm.as_bytes());
        enc.push(&Comm { ts: h.ts, pid: h.pid, tid: h.tid, comm });
    }

    /// An io_uring request, from its submission to its completion.
    pub(super) fn uring(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_uring = read(data);
        if !self.keeps(e.file) {
            return;
        }
        if h.flags & URF_SQPOLL != 0 && !self.sqpoll_named.contains(&h.tid) {
            self.name_sqpoll(h, enc);
        }
        let (path, kind) = self.file(e.file, enc);
        let offset_src = offset_src(h.flags & URF_NO_OFFSET != 0, h.flags & URF_FILEPOS != 0, kind);
        enc.push(&IoUring {
            ts: h.ts,
            dur: e.dur,
            pid: h.pid,
            tid: h.tid,
            op: UringOp::from_u8(h.op),
            fd: e.fd,
            path,
            kind,
            offset: if offset_src == OffsetSrc::None { 0 } else { e.offset },
            offset_src,
            requested: e.requested,
            ret: e.ret,
            user_data: e.user_data,
            complete_tid: e.complete_tid,
            flags: uring_flags(h.flags),
        });
    }

    /// An io_submit or io_getevents call.
    pub(super) fn aio(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_aio = read(data);
        if e.fd >= 0 && !self.keeps(e.file) {
            return;
        }
        let (path, kind) = self.file(e.file, enc);
        enc.push(&Aio {
            ts: h.ts,
            dur: e.dur,
            pid: h.pid,
            tid: h.tid,
            op: aio_op(h.op),
            ctx: e.ctx,
            fd: e.fd,
            path,
            kind,
            cmd: if e.fd < 0 { AioCmd::Other } else { AioCmd::from_u8(e.aio_op.min(255) as u8) },
            offset: e.offset,
            nr: e.nr,
            min_nr: e.min_nr,
            ret: e.ret,
            read_bytes: e.read_bytes,
            write_bytes: e.write_bytes,
            counted: e.counted,
            errors: e.errors,
            flags: if h.flags & IOF_REQ_PARTIAL != 0 { aio::PARTIAL } else { 0 },
            block_reqs: e.nblk,
        });
    }
}

/// io_uring submissions of traced processes by opcode, summed over CPUs
/// (every opcode: only reads and writes become records).
pub fn read_uring_ops(skel: &MltraceSkel<'_>) -> Vec<mltrace_log::UringOpCount> {
    let mut out = Vec::new();
    for code in 0..=u8::MAX {
        if let Ok(Some(per_cpu)) = skel.maps.uring_ops.lookup_percpu(&u32::from(code).to_ne_bytes(), MapFlags::ANY) {
            let n: u64 =
                per_cpu.iter().filter_map(|v| v.get(..8).map(|b| u64::from_ne_bytes(b.try_into().unwrap()))).sum();
            if n > 0 {
                out.push(mltrace_log::UringOpCount {
                    opcode: code,
                    name: mltrace_log::show::uring_opcode(code),
                    count: n,
                });
            }
        }
    }
    out
}
