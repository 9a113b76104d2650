//! Read, write and sync calls, closes and transfers (ev_io, ev_close,
//! ev_xfer).

use mltrace_log::*;

use super::{read, KernelDecoder};
use crate::skel::types::{self, ev_close, ev_hdr, ev_io, ev_xfer, op};

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[
    super::Event { kind: Io::CODE, min: size_of::<ev_io>(), commands_io: true, decode: |d, h, b, e| d.io(h, b, e) },
    super::Event {
        kind: Close::CODE,
        min: size_of::<ev_close>(),
        commands_io: true,
        decode: |d, h, b, e| d.close(h, b, e),
    },
    super::Event {
        kind: Transfer::CODE,
        min: size_of::<ev_xfer>(),
        commands_io: true,
        decode: |d, h, b, e| d.xfer(h, b, e),
    },
];

/// BPF's IOF_* bits (events.h).
const IOF_FILEPOS: u16 = types::io_bits::IOF_FILEPOS.0 as u16;
pub(super) const IOF_REQ_PARTIAL: u16 = types::io_bits::IOF_REQ_PARTIAL.0 as u16;
const IOF_NO_OFFSET: u16 = types::io_bits::IOF_NO_OFFSET.0 as u16;
const IOF_SUMMED: u16 = types::io_bits::IOF_SUMMED.0 as u16;

/// Where a call's or request's offset came from: none, its own argument,
/// or the file position (which only a seekable file has).
pub(super) fn offset_src(no_offset: bool, filepos: bool, kind: FileKind) -> OffsetSrc {
    if no_offset {
        OffsetSrc::None
    } else if !filepos {
        OffsetSrc::Explicit
    } else if matches!(kind, FileKind::Regular | FileKind::BlockDev) {
        OffsetSrc::FilePos
    } else {
        OffsetSrc::None
    }
}

pub(super) fn transfer_op(o: u8) -> TransferOp {
    if op(o.into()) == op::OP_SENDFILE {
        TransferOp::Sendfile
    } else {
        TransferOp::CopyFileRange
    }
}

pub(crate) fn io_op(o: u8) -> IoOp {
    match op(o.into()) {
        op::OP_PREAD64 => IoOp::Pread64,
        op::OP_READV => IoOp::Readv,
        op::OP_PREADV => IoOp::Preadv,
        op::OP_PREADV2 => IoOp::Preadv2,
        op::OP_WRITE => IoOp::Write,
        op::OP_PWRITE64 => IoOp::Pwrite64,
        op::OP_WRITEV => IoOp::Writev,
        op::OP_PWRITEV => IoOp::Pwritev,
        op::OP_PWRITEV2 => IoOp::Pwritev2,
        op::OP_FSYNC => IoOp::Fsync,
        op::OP_FDATASYNC => IoOp::Fdatasync,
        op::OP_SYNC_FILE_RANGE => IoOp::SyncFileRange,
        _ => IoOp::Read,
    }
}

impl KernelDecoder {
    /// A read, write or sync call.
    pub(super) fn io(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_io = read(data);
        if !self.keeps(e.file) {
            return;
        }
        let (path, kind) = self.file(e.file, enc);
        let offset_src = offset_src(h.flags & IOF_NO_OFFSET != 0, h.flags & IOF_FILEPOS != 0, kind);
        enc.push(&Io {
            stack: h.stack,
            ts: h.ts,
            dur: e.dur,
            pid: h.pid,
            tid: h.tid,
            op: io_op(h.op),
            fd: e.fd,
            path,
            kind,
            offset: if offset_src == OffsetSrc::None { 0 } else { e.offset },
            offset_src,
            requested: e.requested,
            ret: e.ret,
            block_reqs: e.nblk,
            summed: h.flags & IOF_SUMMED != 0,
        });
    }

    /// A close.
    pub(super) fn close(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_close = read(data);
        if !self.keeps(e.file) {
            return;
        }
        let (path, kind) = self.file(e.file, enc);
        enc.push(&Close {
            stack: h.stack,
            ts: h.ts,
            dur: e.dur,
            pid: h.pid,
            tid: h.tid,
            fd: e.fd,
            path,
            kind,
            ret: e.ret,
            summed: h.flags & IOF_SUMMED != 0,
        });
    }

    /// A sendfile or copy_file_range: kept when either file is.
    pub(super) fn xfer(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_xfer = read(data);
        if self.path_filter.is_some() && !self.keeps(e.in_file) && !self.keeps(e.out_file) {
            return;
        }
        let (in_path, _) = self.file(e.in_file, enc);
        let (out_path, _) = self.file(e.out_file, enc);
        enc.push(&Transfer {
            stack: h.stack,
            ts: h.ts,
            dur: e.dur,
            pid: h.pid,
            tid: h.tid,
            op: transfer_op(h.op),
            in_fd: e.in_fd,
            in_path,
            out_fd: e.out_fd,
            out_path,
            requested: e.requested,
            ret: e.ret,
            block_reqs: e.nblk,
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::skel::types::op;
    use crate::syscalls::op_name;

    /// Each op code of a family `leave()` (syscalls.bpf.h) dispatches by
    /// range decodes to the log's operation of its name: an op whose arm
    /// is missing would take the family's fallback (a read, an openat...).
    #[test]
    fn each_op_decodes_to_the_log_operation_of_its_name() {
        let family = |from: op, to: op, name: &dyn Fn(u8) -> &'static str| {
            for o in from.0..=to.0 {
                assert_eq!(name(o as u8), op_name(o), "op code {o}");
            }
        };
        family(op::OP_READ, op::OP_PWRITEV2, &|o| super::io_op(o).name());
        family(op::OP_FSYNC, op::OP_SYNC_FILE_RANGE, &|o| super::io_op(o).name());
        family(op::OP_SENDFILE, op::OP_COPY_FILE_RANGE, &|o| super::transfer_op(o).name());
        family(op::OP_OPEN, op::OP_CREAT, &|o| super::super::open::open_op(o).name());
        family(op::OP_IO_SUBMIT, op::OP_IO_PGETEVENTS, &|o| super::super::aio::aio_op(o).name());
        family(op::OP_MMAP, op::OP_MREMAP, &|o| super::super::mem::map_op(o).name());
        family(op::OP_SENDTO, op::OP_RECVMMSG, &|o| super::super::net::net_op(o).name());
    }
}
