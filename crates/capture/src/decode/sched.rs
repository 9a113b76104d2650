//! Scheduling: switches, wakeups and migrations, and the summed spans of
//! summary detail (ev_sched, ev_span).

use mltrace_log::*;

use super::{cstr, read, KernelDecoder};
use crate::skel::types::{self, ev_sched, ev_span};

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[
    super::Event {
        kind: SchedSpan::CODE,
        min: size_of::<ev_span>(),
        commands_io: false,
        decode: |_, _, b, e| e.push(&span_record(&read::<ev_span>(b))),
    },
    super::Event {
        kind: SchedSwitch::CODE,
        min: size_of::<ev_sched>(),
        commands_io: false,
        decode: |d, _, b, e| d.sched(b, e),
    },
];

/// BPF's SPAN_* bits (events.h).
const SPAN_WOKEN: u16 = types::span_bits::SPAN_WOKEN.0 as u16;
const SPAN_WAKER: u16 = types::span_bits::SPAN_WAKER.0 as u16;
const SPAN_RUNNING: u16 = types::span_bits::SPAN_RUNNING.0 as u16;

/// BPF's SCHED_* ops and ST_* bits (events.h).
const SCHED_SWITCH: u8 = types::sched_op::SCHED_SWITCH.0 as u8;
const SCHED_WAKING: u8 = types::sched_op::SCHED_WAKING.0 as u8;
const SCHED_MIGRATE: u8 = types::sched_op::SCHED_MIGRATE.0 as u8;
const ST_SELF: u8 = types::sched_traced::ST_SELF.0 as u8;
const ST_OTHER: u8 = types::sched_traced::ST_OTHER.0 as u8;

// events.h states prev's state and the waker's kind in the log's own codes.
const _: () = {
    use types::sched_state as ss;
    assert!(ss::SS_RUNNABLE.0 == SchedState::Runnable as u32);
    assert!(ss::SS_SLEEPING.0 == SchedState::Sleeping as u32);
    assert!(ss::SS_UNINTERRUPTIBLE.0 == SchedState::Uninterruptible as u32);
    assert!(ss::SS_STOPPED.0 == SchedState::Stopped as u32);
    assert!(ss::SS_DEAD.0 == SchedState::Dead as u32);
    assert!(ss::SS_OTHER.0 == SchedState::Other as u32);
    assert!(types::wake_by::WB_TASK.0 == WakeBy::Task as u32);
    assert!(types::wake_by::WB_TIMER.0 == WakeBy::Timer as u32);
    assert!(types::wake_by::WB_HARDIRQ.0 == WakeBy::Hardirq as u32);
    assert!(types::wake_by::WB_SOFTIRQ.0 == WakeBy::Softirq as u32);
    assert!(types::wake_by::WB_UNKNOWN.0 == WakeBy::Unknown as u32);
};

/// A scheduling event; `None` for an op this version does not know.
fn sched_record(e: &ev_sched, enc: &mut FrameEncoder) -> Option<Record> {
    let h = &e.h;
    let (me, other) = (e.traced & ST_SELF != 0, e.traced & ST_OTHER != 0);
    Some(match h.op {
        SCHED_SWITCH => Record::SchedSwitch(SchedSwitch {
            ts: h.ts,
            cpu: e.cpu,
            prev_pid: h.pid,
            prev_tid: h.tid,
            prev_comm: enc.intern(&cstr(&e.comm)),
            prev_prio: e.prio,
            prev_state: SchedState::from_u8(e.state),
            next_pid: e.other_pid,
            next_tid: e.other_tid,
            next_comm: enc.intern(&cstr(&e.other_comm)),
            next_prio: e.other_prio,
            traced: if me { sched::PREV } else { 0 } | if other { sched::NEXT } else { 0 },
            prev_call: crate::syscalls::sleep_call(e.prev_call),
            prev_ran_us: if me { e.ran_us } else { 0 },
        }),
        SCHED_WAKING | SCHED_MIGRATE => Record::SchedWake(SchedWake {
            ts: h.ts,
            op: if h.op == SCHED_WAKING { WakeOp::Waking } else { WakeOp::Migrate },
            cpu: e.cpu,
            target_cpu: e.target_cpu,
            pid: h.pid,
            tid: h.tid,
            comm: enc.intern(&cstr(&e.comm)),
            prio: e.prio,
            waker_pid: e.other_pid,
            waker_tid: e.other_tid,
            traced: if other { sched::WAKER } else { 0 },
            by: WakeBy::from_u8(e.state),
        }),
        _ => return None,
    })
}

/// A span of a thread's summed scheduling (summary detail).
/// Every thread's scheduling span in progress (bpf's `open_spans`:
/// summary detail with scheduling), read at the end of the recording;
/// empty where it is not loaded.
pub(crate) fn open_spans(skel: &crate::skel::MltraceSkel<'_>) -> Result<Vec<Record>, crate::error::CaptureError> {
    let spans =
        crate::bpf::read_iter::<ev_span>(skel.links.open_spans.as_ref(), "reading the threads' scheduling sums")?;
    Ok(spans.iter().map(span_record).collect())
}

pub(crate) fn span_record(e: &ev_span) -> Record {
    let h = &e.h;
    const BITS: [(u16, u8); 3] = [(SPAN_WOKEN, span::WOKEN), (SPAN_WAKER, span::WAKER), (SPAN_RUNNING, span::RUNNING)];
    let flags = BITS.iter().filter(|(from, _)| h.flags & from != 0).fold(0, |acc, (_, to)| acc | to);
    Record::SchedSpan(SchedSpan {
        ts: h.ts,
        pid: h.pid,
        tid: h.tid,
        from: e.from,
        sleep_from: e.sleep_from,
        cpu: e.cpu,
        runnable: e.runnable,
        other: e.other,
        timed: e.timed,
        slept: SchedState::from_u8(e.slept),
        call: crate::syscalls::sleep_call(e.call),
        waker_tid: e.waker_tid,
        waker_pid: e.waker_pid,
        by: WakeBy::from_u8(e.by),
        flags,
    })
}

impl KernelDecoder {
    /// A switch, wakeup or migration (malformed when its op is unknown).
    pub(super) fn sched(&mut self, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_sched = read(data);
        match sched_record(&e, enc) {
            Some(rec) => enc.push(&rec),
            None => {
                self.stats.records -= 1;
                self.stats.malformed += 1;
            }
        }
    }
}
