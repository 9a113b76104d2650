//! `record --detail summary`: the kernel sums reads, writes, syncs and
//! closes per thread, file, operation and second (in each thread's slots
//! on the fast routes, in bpf's `io_sums` on the compat one); once a second
//! has ended, its sums become [`IoSummary`] records.

use libbpf_rs::{MapCore, MapFlags};
use mltrace_log::{FrameEncoder, IoSummary, SumOp, SUM_BUCKETS};

use crate::bpf::bpf_err;
use crate::decode::KernelDecoder;
use crate::error::CaptureError;
use crate::skel::types::{self, op};
use crate::skel::MltraceSkel;

const SEC: u64 = 1_000_000_000;

// The kernel's latency histogram (events.h's SUM_BUCKETS) has as many slots
// as the log's: a type error otherwise.
const _: fn(&types::io_sum) -> &[u32; SUM_BUCKETS] = |s| &s.hist;

/// A second's sums are taken this long after it ended: calls that ended
/// in it have been added by then (a program runs for microseconds).
const SETTLE_NS: u64 = 100_000_000;

/// How long after its second a sum whose file has no name yet waits for
/// the open that names it: a slot read from its thread can come before
/// that open is decoded, as the ring's reader stops at a record another
/// CPU reserved and has not sent (a guest's CPU held up for longer than
/// the settling time, under full emulation).
const NAME_WAIT_NS: u64 = 3 * SEC;

#[derive(Default)]
pub struct Summaries {
    buf: Vec<IoSum>,
    /// Each sum's (start, end).
    spans: Vec<(u64, u64)>,
    /// The order sums are written in: (start, process, thread, the sum's index).
    order: Vec<(u64, u32, u32, u32)>,
    /// Slot sums of seconds that have not ended yet, by (whole) second:
    /// a round takes the seconds that ended without looking at the rest.
    pending: std::collections::BTreeMap<u64, Vec<IoSum>>,
    /// The threads' slots read by the iterator this round, before the
    /// ring was drained (see [`Self::read_slots`]).
    read: Vec<SlotSum>,
    /// Fillings of slots taken from the iterator, by (thread, slot, seq):
    /// their thread sends each of them later too, which is then dropped.
    taken: rustc_hash::FxHashSet<(u32, u32, u32)>,
    /// Why the slots could not be read, the first time.
    pub error: Option<String>,
    /// Records written, and calls they sum.
    pub records: u64,
    pub calls: u64,
}

impl Summaries {
    /// Reads the threads' slots; before the ring is drained, so that a slot
    /// a thread sent as this read skipped it (being changed) is drained after.
    pub fn read_slots(&mut self, skel: &MltraceSkel<'_>) {
        if let Err(e) = slot_sums(skel, &mut self.read) {
            self.error.get_or_insert_with(|| e.to_string());
        }
    }

    /// Writes every live thread's scheduling span in progress (the
    /// recording is over: they would not be sent).
    pub fn open_spans(&mut self, skel: &MltraceSkel<'_>, enc: &mut FrameEncoder) {
        match crate::decode::open_spans(skel) {
            Ok(spans) => spans.iter().for_each(|r| enc.push(r)),
            Err(e) => {
                self.error.get_or_insert_with(|| e.to_string());
            }
        }
    }

    /// Writes the sums of the seconds that ended (all of them when
    /// `last`: the recording is over) at `now`.
    pub fn round(
        &mut self,
        skel: &MltraceSkel<'_>,
        now: u64,
        last: bool,
        dec: &mut KernelDecoder,
        enc: &mut FrameEncoder,
    ) {
        let before = if last { u64::MAX } else { now.saturating_sub(SETTLE_NS) / SEC };
        let whole = |mut s: IoSum| {
            s.key.sec = full_second(s.key.sec, now / SEC);
            s
        };
        self.buf.clear();
        take_io_sums(skel, |sec| full_second(sec, now / SEC) < before, last, &mut self.buf);
        for s in &mut self.buf {
            s.key.sec = full_second(s.key.sec, now / SEC);
        }
        // Read ones first: a slot read and then sent is taken once.
        for r in self.read.drain(..) {
            let s = whole(r.sum);
            if s.key.sec < before && self.taken.insert((s.key.tid, r.slot, r.seq)) {
                self.buf.push(s);
            }
        }
        for r in dec.sums.drain(..) {
            if !self.taken.remove(&(r.sum.key.tid, r.slot, r.seq)) {
                let s = whole(r.sum);
                self.pending.entry(s.key.sec).or_default().push(s);
            }
        }
        while let Some(e) = self.pending.first_entry().filter(|e| *e.key() < before) {
            self.buf.extend(e.remove());
        }
        // The second of an exec: the calls before it were the old
        // program's, those after the new one's.
        let span = |s: &IoSum| {
            let (mut ts, mut end) = (s.key.sec * SEC, (s.key.sec + 1) * SEC);
            if let Some(&(id, at)) = dec.execs.get(&s.key.tgid) {
                if (ts..end).contains(&at) {
                    if s.key.exec as u16 == id {
                        ts = at;
                    } else {
                        end = at;
                    }
                }
            }
            (ts, end)
        };
        self.spans.clear();
        self.spans.extend(self.buf.iter().map(span));
        // A process's records of one period together, by thread: the order
        // the model draws their rates in; within a thread, as they came.
        // The keys are sorted apart from the sums, and the sums then read
        // in their own order within each thread: sorted by file as well,
        // reading the sums (168 bytes each, a second's worth of them far
        // more than the caches hold) at random was a fifth of the
        // summary's consumer on a small-file loader.
        self.order.clear();
        self.order.extend(
            self.buf
                .iter()
                .zip(&self.spans)
                .enumerate()
                .map(|(i, (s, span))| (span.0, s.key.tgid, s.key.tid, i as u32)),
        );
        self.order.sort_unstable();
        for i in self.order.iter().map(|o| o.3 as usize) {
            let (s, (ts, end)) = (&self.buf[i], self.spans[i]);
            let Some(sop) = sum_op(s.key.op) else { continue };
            let (path, kind) = match dec.summed_file(s.key.file, s.key.dev, s.key.ino, s.key.tgid, enc) {
                Some(found) => found,
                None if !last && now < end + NAME_WAIT_NS => {
                    // Named by an open still in the ring: the next rounds.
                    self.pending.entry(s.key.sec).or_default().push(*s);
                    continue;
                }
                None => dec.unnamed_sum(enc),
            };
            let mut r = IoSummary {
                pid: s.key.tgid,
                tid: s.key.tid,
                ts,
                dur: end - ts,
                op: sop,
                path,
                kind,
                calls: s.sum.calls,
                bytes: s.sum.bytes,
                failed: s.sum.failed,
                time: s.sum.ns,
                stack: s.key.stack,
                ..Default::default()
            };
            r.set_hist(&s.sum.hist);
            self.records += 1;
            self.calls += s.sum.calls;
            enc.push(&r);
        }
    }
}

/// The log's code for a kernel-side operation.
fn sum_op(code: u32) -> Option<SumOp> {
    if code == op::OP_CLOSE.0 {
        return Some(SumOp::Close);
    }
    let io = (op::OP_READ.0..=op::OP_PWRITEV2.0).contains(&code)
        || (op::OP_FSYNC.0..=op::OP_SYNC_FILE_RANGE.0).contains(&code);
    io.then(|| SumOp::from_io(crate::decode::io_op(code as u8)))
}

/// The second a sum's low 24 bits of one name: the latest such second
/// not after `now` (the kernel side keeps 24 bits, 194 days).
fn full_second(low: u64, now: u64) -> u64 {
    const MASK: u64 = 0xff_ffff;
    now - (now.wrapping_sub(low) & MASK)
}

/// One second's sums of one process's calls of one operation on one file
/// (bpf's `io_sums`, `record --detail summary`).
#[derive(Clone, Copy, Debug)]
pub struct IoSum {
    pub key: types::io_sum_key,
    pub sum: types::io_sum,
}

/// Takes the sums of the seconds that have `ended` out of the
/// kernel's map (those still being added to stay); `all`: every sum (the
/// recording is over), each read and deleted at once, so that a call
/// still adding to it cannot be lost between the two. Read in batches
/// (every batch: see [`crate::batch`]); an old kernel without batch
/// operations (before 5.6) is read key by key.
pub fn take_io_sums(skel: &MltraceSkel<'_>, ended: impl Fn(u64) -> bool, all: bool, out: &mut Vec<IoSum>) {
    let map = &skel.maps.io_sums;
    let (ksz, vsz) = (size_of::<types::io_sum_key>(), size_of::<types::io_sum>());
    let mut done: Vec<u8> = Vec::new();
    // Every key taken, back to back: only a failed batch (then read key by
    // key) needs them, to take none twice; no allocation per sum.
    let mut taken: Vec<u8> = Vec::new();
    let mut take = |k: &[u8], v: &[u8], deleted: bool, taken: &mut Vec<u8>| {
        if k.len() != ksz || v.len() < vsz {
            return;
        }
        // SAFETY: plain-data C structs of exactly these sizes, from the kernel.
        let key: types::io_sum_key = unsafe { std::ptr::read_unaligned(k.as_ptr().cast()) };
        if !deleted && !ended(key.sec) {
            return;
        }
        let sum: types::io_sum = unsafe { std::ptr::read_unaligned(v.as_ptr().cast()) };
        out.push(IoSum { key, sum });
        taken.extend_from_slice(k);
        if !deleted {
            done.extend_from_slice(k);
        }
    };
    if crate::batch::for_each(map, all, |k, v| take(k, v, all, &mut taken)).is_err() {
        // Key by key: what a batch gave before it failed is not taken twice.
        let before: std::collections::HashSet<Vec<u8>> = taken.chunks(ksz).map(<[u8]>::to_vec).collect();
        for k in map.keys() {
            if before.contains(&k) {
                continue;
            }
            if let Ok(Some(v)) = map.lookup(&k, MapFlags::ANY) {
                take(&k, &v, false, &mut taken);
            }
        }
    }
    if done.is_empty() {
        return;
    }
    let n = (done.len() / ksz) as u32;
    if map.delete_batch(&done, n, MapFlags::ANY, MapFlags::ANY).is_err() {
        for k in done.chunks(ksz) {
            let _ = map.delete(k);
        }
    }
}

/// One filling of a thread's summary slot (bpf's `struct sum_slot`): sent
/// by its thread, or read by the `sum_slots` iterator.
#[derive(Clone, Copy, Debug)]
pub struct SlotSum {
    pub slot: u32,
    pub seq: u32,
    pub sum: IoSum,
}

impl SlotSum {
    /// From the bytes of a `struct sum_slot`; None when short.
    pub fn parse(b: &[u8]) -> Option<SlotSum> {
        if b.len() < size_of::<types::sum_slot>() {
            return None;
        }
        // SAFETY: a plain-data C struct of at least this size, from the kernel.
        let s: types::sum_slot = unsafe { std::ptr::read_unaligned(b.as_ptr().cast()) };
        Some(SlotSum { slot: s.slot, seq: s.seq, sum: IoSum { key: s.key, sum: s.sum } })
    }
}

/// The threads' summary slots that hold sums and are not being changed
/// (the fast routes' `record --detail summary`), read through the
/// `sum_slots` task iterator; empty where it is not loaded.
pub fn slot_sums(skel: &MltraceSkel<'_>, out: &mut Vec<SlotSum>) -> Result<(), CaptureError> {
    use std::io::Read;
    let Some(link) = skel.links.sum_slots.as_ref() else { return Ok(()) };
    let mut it = libbpf_rs::Iter::new(link).map_err(bpf_err("reading the summary slots"))?;
    let mut buf = Vec::new();
    it.read_to_end(&mut buf).map_err(|e| bpf_err("reading the summary slots")(libbpf_rs::Error::from(e)))?;
    out.extend(buf.chunks_exact(size_of::<types::sum_slot>()).filter_map(SlotSum::parse));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::full_second;

    #[test]
    fn seconds_come_back_whole() {
        let now = 50_000_000;
        assert_eq!(full_second(now & 0xff_ffff, now), now);
        assert_eq!(full_second((now - 3) & 0xff_ffff, now), now - 3);
        // Across the wrap of the low bits.
        let now = 0x300_0002;
        assert_eq!(full_second(0xff_ffff, now), 0x2ff_ffff);
    }
}
