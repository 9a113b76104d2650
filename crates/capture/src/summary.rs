//! `record --detail summary`: the kernel sums reads, writes, syncs and
//! closes per thread, file, operation and second (in each thread's slots
//! on the fast routes, in bpf's `io_sums` on the compat one); once a second
//! has ended, its sums become [`IoSummary`] records.

use mltrace_log::{FrameEncoder, IoSummary, Record, SumOp, SUM_BUCKETS};

use crate::bpf::{self, IoSum, SlotSum};
use crate::decode::KernelDecoder;
use crate::skel::types::{self, op};
use crate::skel::MltraceSkel;

const SEC: u64 = 1_000_000_000;

// The kernel's latency histogram (events.h's SUM_BUCKETS) has as many slots
// as the log's: a type error otherwise.
const _: fn(&types::io_sum) -> &[u32; SUM_BUCKETS] = |s| &s.hist;

/// A second's sums are taken this long after it ended: calls that ended
/// in it have been added by then (a program runs for microseconds).
const SETTLE_NS: u64 = 100_000_000;

#[derive(Default)]
pub struct Summaries {
    buf: Vec<IoSum>,
    /// Each sum's (start, end).
    spans: Vec<(u64, u64)>,
    /// Slot sums of seconds that have not ended yet (whole seconds).
    pending: Vec<IoSum>,
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
        if let Err(e) = bpf::slot_sums(skel, &mut self.read) {
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
        bpf::take_io_sums(skel, |sec| full_second(sec, now / SEC) < before, last, &mut self.buf);
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
                self.pending.push(whole(r.sum));
            }
        }
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].key.sec < before {
                self.buf.push(self.pending.swap_remove(i));
            } else {
                i += 1;
            }
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
        // A process's records of one period together: the order the model
        // draws their rates in.
        let mut order: Vec<usize> = (0..self.buf.len()).collect();
        order.sort_unstable_by_key(|&i| {
            let k = &self.buf[i].key;
            (self.spans[i].0, k.tgid, k.tid, k.op, k.dev, k.ino, k.file, k.stack)
        });
        for i in order {
            let (s, (ts, end)) = (&self.buf[i], self.spans[i]);
            let Some(sop) = sum_op(s.key.op) else { continue };
            let (path, kind) = dec.summed_file(s.key.file, s.key.dev, s.key.ino, s.key.tgid, enc);
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
            enc.push(&Record::IoSummary(r));
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
