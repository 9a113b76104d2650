//! `record --detail summary`: the calls the kernel summed, as counters. A
//! process gets its bytes read and written and its calls per second; a
//! file it read or wrote at 1 MiB/s or more in some second gets its own
//! rate (at most [`FILES_PER_PROC`] a process: the big shards, not every
//! image of a folder). The calls that were slow or failed are slices, as
//! in full detail.

use std::fmt::Write as _;
use std::io;

use mltrace_log::*;
use rustc_hash::FxHashMap as HashMap;

use super::Scene;
use crate::encoder::{Encoder, TrackId, Unit};
use crate::procs::ProcIdx;

/// Bytes in one second that earn a file its own counter.
const FILE_RATE_MIN: u64 = 1 << 20;
pub(super) const FILES_PER_PROC: usize = 8;

/// One process's sums of the second being read.
#[derive(Clone, Copy, Default)]
pub(super) struct SecondSums {
    ts: u64,
    dur: u64,
    read: u64,
    written: u64,
    calls: u64,
}

#[derive(Default)]
pub(super) struct SummaryState {
    /// By process: the second its records are coming for.
    seconds: HashMap<ProcIdx, SecondSums>,
    /// File counters made, by process.
    files: HashMap<ProcIdx, usize>,
}

impl Scene<'_> {
    pub(super) fn io_summary<E: Encoder>(
        &mut self,
        enc: &mut E,
        f: &Frame<'_>,
        idx: ProcIdx,
        r: &IoSummary,
    ) -> io::Result<()> {
        self.stats.saw(r.ts.saturating_add(r.dur));
        let cur = self.summary.seconds.get(&idx).copied();
        if let Some(s) = cur.filter(|s| s.ts != r.ts) {
            self.write_second(enc, idx, &s)?;
        }
        let s = self.summary.seconds.entry(idx).or_default();
        if s.ts != r.ts {
            *s = SecondSums { ts: r.ts, dur: r.dur.max(1), ..Default::default() };
        }
        s.calls += r.calls;
        let write = r.op.io().is_some_and(|o| o.is_write());
        if write {
            s.written += r.bytes;
        } else {
            s.read += r.bytes;
        }
        if r.bytes >= FILE_RATE_MIN && r.op != SumOp::Close {
            self.file_rate(enc, f, idx, r, write)?;
        }
        Ok(())
    }

    /// A big file's rate for one second (tracks made for at most
    /// FILES_PER_PROC files a process).
    fn file_rate<E: Encoder>(
        &mut self,
        enc: &mut E,
        f: &Frame<'_>,
        idx: ProcIdx,
        r: &IoSummary,
        write: bool,
    ) -> io::Result<()> {
        let path = f.str_lossy(r.path);
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        let _ = write!(key, "summary file\0{idx}\0{}\0{path}", if write { "w" } else { "r" });
        let t = match self.out.counters.get(&key) {
            Some(&t) => Some(t),
            None if self.summary.files.get(&idx).copied().unwrap_or(0) < FILES_PER_PROC => {
                *self.summary.files.entry(idx).or_default() += 1;
                let g = self.proc_group(enc, idx)?;
                let name = format!("{} {path}", if write { "written to" } else { "read from" });
                Some(self.counter_track_ranked(enc, &key, g, &name, Unit::from_log(CounterUnit::BytesPerSec), 31)?)
            }
            None => None,
        };
        self.key = key;
        match t {
            Some(t) => self.period_value(enc, t, r.ts, r.dur, r.bytes as f64, true),
            None => Ok(()),
        }
    }

    /// A process's second: bytes read and written, and calls, per second.
    fn write_second<E: Encoder>(&mut self, enc: &mut E, idx: ProcIdx, s: &SecondSums) -> io::Result<()> {
        let g = self.proc_group(enc, idx)?;
        let bps = Unit::from_log(CounterUnit::BytesPerSec);
        for (what, unit, v) in [
            ("read (summed)", bps, s.read),
            ("written (summed)", bps, s.written),
            ("I/O calls/s (summed)", Unit::Named("calls/s"), s.calls),
        ] {
            let mut key = std::mem::take(&mut self.key);
            key.clear();
            let _ = write!(key, "summary\0{idx}\0{what}");
            let t = self.counter_track_ranked(enc, &key, g, what, unit, 30);
            self.key = key;
            self.period_value(enc, t?, s.ts, s.dur, v as f64, v > 0)?;
        }
        Ok(())
    }

    /// Every process's last second, at the end of a file.
    pub(super) fn finish_summaries<E: Encoder>(&mut self, enc: &mut E) -> io::Result<()> {
        let mut left: Vec<(ProcIdx, SecondSums)> = self.summary.seconds.drain().collect();
        left.sort_unstable_by_key(|(i, _)| *i);
        for (idx, s) in left {
            self.write_second(enc, idx, &s)?;
        }
        Ok(())
    }

    /// `amount` over the `dur` ns from `ts`, as a rate on counter `t`; the
    /// counter falls to 0 where a period is not followed by another.
    pub(super) fn period_value<E: Encoder>(
        &mut self,
        enc: &mut E,
        t: TrackId,
        ts: u64,
        dur: u64,
        amount: f64,
        busy: bool,
    ) -> io::Result<()> {
        if let Some(end) = self.count_ends.remove(&t).filter(|&e| e < ts) {
            self.stats.counters += 1;
            enc.counter(t, end, 0.0)?;
        }
        if busy {
            self.count_ends.insert(t, ts.saturating_add(dur));
        }
        self.stats.counters += 1;
        self.stats.saw(ts.saturating_add(dur));
        enc.counter(t, ts, amount / (dur.max(1) as f64 / 1e9))
    }
}
