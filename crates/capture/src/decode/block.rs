//! Block requests, from their start to their completion (ev_block).

use mltrace_log::*;

use super::{cstr, read, KernelDecoder};
use crate::skel::types::{self, ev_block};

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[super::Event {
    kind: Block::CODE,
    min: size_of::<ev_block>(),
    commands_io: false,
    decode: |d, _, b, e| d.block(b, e),
}];

/// BPF's BLK_* and RQF_* bits (events.h) to the log's [`blk`] bits.
fn block_flags(h_flags: u16, rq: u16) -> u16 {
    use types::{blk_bits as b, rq_bits as q};
    const MAP: [(b, u16); 5] = [
        (b::BLK_TRACED, blk::TRACED),
        (b::BLK_KTHREAD, blk::KTHREAD),
        (b::BLK_START_UNKNOWN, blk::START_UNKNOWN),
        (b::BLK_ISSUE_UNKNOWN, blk::ISSUE_UNKNOWN),
        (b::BLK_PARTIAL, blk::PARTIAL),
    ];
    const RQ: [(q, u16); 7] = [
        (q::RQF_SYNC, blk::SYNC),
        (q::RQF_META, blk::META),
        (q::RQF_PRIO, blk::PRIO),
        (q::RQF_FUA, blk::FUA),
        (q::RQF_PREFLUSH, blk::PREFLUSH),
        (q::RQF_RAHEAD, blk::READAHEAD),
        (q::RQF_BACKGROUND, blk::BACKGROUND),
    ];
    let mut out = 0;
    for (from, to) in MAP {
        if u32::from(h_flags) & from.0 != 0 {
            out |= to;
        }
    }
    for (from, to) in RQ {
        if u32::from(rq) & from.0 != 0 {
            out |= to;
        }
    }
    out
}

/// Timestamps: the request's own start when known, else the first thing seen.
/// `hide_others`: a request of neither a traced process nor a kernel
/// thread is nobody's (no pid, no name: without root, another user's).
fn block_record(e: &ev_block, enc: &mut FrameEncoder, hide_others: bool) -> Block {
    let h = &e.h;
    let flags = block_flags(h.flags, e.rq_flags);
    let hide = hide_others && flags & (blk::TRACED | blk::KTHREAD) == 0;
    // Its name is never interned: a frame keeps every string it was given.
    let (pid, tid, comm) = if hide { (0, 0, enc.intern(b"")) } else { (h.pid, h.tid, enc.intern(&cstr(&e.comm))) };
    let issue = if flags & blk::ISSUE_UNKNOWN != 0 { None } else { Some(e.issue) };
    let start = if flags & blk::START_UNKNOWN != 0 { None } else { Some(h.ts) };
    let (ts, queue, device) = match (start, issue) {
        (Some(s), Some(i)) => (s, i.saturating_sub(s), e.complete.saturating_sub(i)),
        (Some(s), None) => (s, 0, e.complete.saturating_sub(s)),
        (None, Some(i)) => (i, 0, e.complete.saturating_sub(i)),
        (None, None) => (e.complete, 0, 0),
    };
    Block {
        ts,
        queue,
        device,
        pid,
        tid,
        comm,
        dev: e.dev,
        disk: enc.intern(&cstr(&e.disk)),
        sector: e.sector,
        bytes: u64::from(e.bytes),
        op: BlockOp::from_u8(e.op),
        flags,
        error: e.error,
        cause_ts: e.cause_ts,
        cause_idx: e.cause_idx,
    }
}

impl KernelDecoder {
    /// A block request; without root, another user's has no issuer.
    pub(super) fn block(&mut self, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_block = read(data);
        let b = block_record(&e, enc, self.hide_others_block);
        if self.hide_others_block && b.flags & (blk::TRACED | blk::KTHREAD) == 0 {
            self.stats.block_hidden += 1;
        }
        enc.push(&b);
    }
}
