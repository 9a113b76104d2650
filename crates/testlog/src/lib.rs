//! Logs made up for mltrace's tests and benches, written with the log
//! crate's own writer: [`synthetic`], a training run of any length and
//! rate; [`sample_log`], a hand-made log with every kind the exporters draw,
//! and random interleavings of many processes' I/O. The log crate's own
//! round-trip tests build theirs in place (they cannot depend on a crate
//! that depends on it).

pub mod sample_log;
pub mod synthetic;

use mltrace_log::{Counter, CounterUnit, FrameEncoder, Phase, PhaseKind, Record};

/// A counter sample, its names interned in `e`.
pub fn counter(
    e: &mut FrameEncoder,
    ts: u64,
    group: &str,
    name: &str,
    unit: CounterUnit,
    pid: u32,
    value: f64,
) -> Record {
    Record::Counter(Counter {
        ts,
        group: e.intern(group.as_bytes()),
        name: e.intern(name.as_bytes()),
        unit,
        pid,
        value,
    })
}

/// An epoch from `start` to `end`, as MLLOG's `epoch_start`/`epoch_stop` make one.
pub fn epoch(e: &mut FrameEncoder, n: u32, start: u64, end: u64) -> Record {
    Record::Phase(Phase {
        ts: start,
        dur: end - start,
        kind: PhaseKind::Epoch,
        name: e.intern(format!("EPOCH {n}").as_bytes()),
        rank: -1,
        pid: 0,
        flags: 0,
    })
}
