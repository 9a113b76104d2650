//! Records as the parsers produce them: owning their strings, so they can
//! wait in the reordering buffers; interned only when written to a frame.

use std::rc::Rc;

use mltrace_log::{
    Block, BlockOp, Close, Comm, Counter, CounterUnit, FileKind, FrameEncoder, Io, IoOp, Lost, LostKind, Mark,
    OffsetSrc, Open, OpenOp, Phase, PhaseKind, Record, RET_UNKNOWN,
};

/// `AT_FDCWD`: the traces do not print openat's dirfd; this is the value
/// exporters treat as "not worth showing".
const AT_FDCWD: i32 = -100;

#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Comm {
        ts: u64,
        pid: u32,
        comm: Rc<str>,
    },
    Open {
        ts: u64,
        dur: u64,
        pid: u32,
        tid: u32,
        op: OpenOp,
        path: String,
        flags: u32,
        mode: u32,
        ret: i64,
        kind: FileKind,
    },
    Io {
        ts: u64,
        dur: u64,
        pid: u32,
        tid: u32,
        op: IoOp,
        fd: i32,
        path: String,
        offset: Option<u64>,
        requested: u64,
        ret: i64,
    },
    Close {
        ts: u64,
        dur: u64,
        pid: u32,
        tid: u32,
        fd: i32,
        path: String,
    },
    Block {
        ts: u64,
        queue: u64,
        device: u64,
        pid: u32,
        tid: u32,
        comm: Rc<str>,
        disk: Rc<str>,
        sector: u64,
        bytes: u64,
        op: BlockOp,
        flags: u16,
    },
    Counter {
        ts: u64,
        group: Rc<str>,
        name: Rc<str>,
        unit: CounterUnit,
        pid: u32,
        value: f64,
    },
    Phase {
        ts: u64,
        dur: u64,
        kind: PhaseKind,
        name: String,
        rank: i32,
        pid: u32,
        flags: u8,
    },
    Mark {
        ts: u64,
        name: String,
        value: String,
        rank: i32,
        pid: u32,
    },
    Lost {
        ts: u64,
        count: u64,
    },
}

fn file_kind(path: &str) -> FileKind {
    if path.is_empty() {
        FileKind::Unknown
    } else {
        FileKind::Regular
    }
}

impl Item {
    pub fn ts(&self) -> u64 {
        match *self {
            Item::Comm { ts, .. }
            | Item::Open { ts, .. }
            | Item::Io { ts, .. }
            | Item::Close { ts, .. }
            | Item::Block { ts, .. }
            | Item::Counter { ts, .. }
            | Item::Phase { ts, .. }
            | Item::Mark { ts, .. }
            | Item::Lost { ts, .. } => ts,
        }
    }

    /// The process it is about, if any.
    pub fn pid(&self) -> Option<u32> {
        let pid = match *self {
            Item::Comm { pid, .. }
            | Item::Open { pid, .. }
            | Item::Io { pid, .. }
            | Item::Close { pid, .. }
            | Item::Block { pid, .. }
            | Item::Counter { pid, .. }
            | Item::Mark { pid, .. }
            | Item::Phase { pid, .. } => pid,
            Item::Lost { .. } => 0,
        };
        (pid != 0).then_some(pid)
    }

    /// When it ended (its start for instants).
    pub fn end_ts(&self) -> u64 {
        match *self {
            Item::Open { ts, dur, .. }
            | Item::Io { ts, dur, .. }
            | Item::Close { ts, dur, .. }
            | Item::Phase { ts, dur, .. } => ts.saturating_add(dur),
            Item::Block { ts, queue, device, .. } => ts.saturating_add(queue).saturating_add(device),
            _ => self.ts(),
        }
    }

    /// The log record, its strings interned in `enc`'s current frame.
    pub fn to_record(&self, enc: &mut FrameEncoder) -> Record {
        match self {
            Item::Comm { ts, pid, comm } => {
                Record::Comm(Comm { ts: *ts, pid: *pid, tid: *pid, comm: enc.intern(comm.as_bytes()) })
            }
            Item::Open { ts, dur, pid, tid, op, path, flags, mode, ret, kind } => {
                let p = enc.intern(path.as_bytes());
                Record::Open(Open {
                    stack: 0,
                    ts: *ts,
                    dur: *dur,
                    pid: *pid,
                    tid: *tid,
                    op: *op,
                    dirfd: AT_FDCWD,
                    path: p,
                    // No cwd in the traces to resolve a relative path against.
                    abs_path: p,
                    flags: *flags,
                    mode: *mode,
                    ret: *ret,
                    kind: *kind,
                    trunc: 0,
                    block_reqs: 0,
                })
            }
            Item::Io { ts, dur, pid, tid, op, fd, path, offset, requested, ret } => Record::Io(Io {
                stack: 0,
                ts: *ts,
                dur: *dur,
                pid: *pid,
                tid: *tid,
                op: *op,
                fd: *fd,
                path: enc.intern(path.as_bytes()),
                kind: file_kind(path),
                offset: offset.unwrap_or(0),
                offset_src: if offset.is_some() { OffsetSrc::FilePos } else { OffsetSrc::None },
                requested: *requested,
                ret: *ret,
                block_reqs: 0,
                summed: false,
            }),
            Item::Close { ts, dur, pid, tid, fd, path } => Record::Close(Close {
                stack: 0,
                ts: *ts,
                dur: *dur,
                pid: *pid,
                tid: *tid,
                fd: *fd,
                path: enc.intern(path.as_bytes()),
                kind: file_kind(path),
                // The traces never print close's result.
                ret: RET_UNKNOWN,
                summed: false,
            }),
            Item::Block { ts, queue, device, pid, tid, comm, disk, sector, bytes, op, flags } => Record::Block(Block {
                ts: *ts,
                queue: *queue,
                device: *device,
                pid: *pid,
                tid: *tid,
                comm: enc.intern(comm.as_bytes()),
                dev: 0,
                disk: enc.intern(disk.as_bytes()),
                sector: *sector,
                bytes: *bytes,
                op: *op,
                flags: *flags,
                error: 0,
                cause_ts: 0,
                cause_idx: 0,
            }),
            Item::Counter { ts, group, name, unit, pid, value } => Record::Counter(Counter {
                ts: *ts,
                group: enc.intern(group.as_bytes()),
                name: enc.intern(name.as_bytes()),
                unit: *unit,
                pid: *pid,
                value: *value,
            }),
            Item::Phase { ts, dur, kind, name, rank, pid, flags } => Record::Phase(Phase {
                ts: *ts,
                dur: *dur,
                kind: *kind,
                name: enc.intern(name.as_bytes()),
                rank: *rank,
                pid: *pid,
                flags: *flags,
            }),
            Item::Mark { ts, name, value, rank, pid } => Record::Mark(Mark {
                ts: *ts,
                name: enc.intern(name.as_bytes()),
                value: enc.intern(value.as_bytes()),
                rank: *rank,
                pid: *pid,
            }),
            Item::Lost { ts, count } => Record::Lost(Lost { ts: *ts, kind: LostKind::RingFull, count: *count }),
        }
    }
}
