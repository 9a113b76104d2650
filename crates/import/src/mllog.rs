//! MLPerf logging files as an import source; the parser is the
//! `mltrace-mllog` crate, shared with the recorder.

use std::collections::VecDeque;

pub use mltrace_mllog::*;

/// An MLLOG file (or a training log holding MLLOG lines) as log records.
pub(crate) struct MllogSource {
    lines: crate::lines::Lines,
    report: crate::lines::FileReport,
    tracker: PhaseTracker,
    out: Vec<TrackedRecord>,
    queue: VecDeque<crate::item::Item>,
    done: bool,
}

impl MllogSource {
    pub fn new(lines: crate::lines::Lines, report: crate::lines::FileReport, mode: RankMode) -> Self {
        MllogSource {
            lines,
            report,
            tracker: PhaseTracker::new(mode),
            out: Vec::new(),
            queue: VecDeque::new(),
            done: false,
        }
    }

    fn drain(&mut self) {
        for r in self.out.drain(..) {
            self.queue.push_back(match r {
                // A log file does not say which process wrote it.
                TrackedRecord::Phase { ts, dur, kind, name, rank, pid, flags } => {
                    crate::item::Item::Phase { ts, dur, kind, name, rank, pid: pid.unwrap_or(0), flags }
                }
                TrackedRecord::Mark { ts, name, value, rank } => {
                    crate::item::Item::Mark { ts, name, value, rank, pid: 0 }
                }
            });
        }
    }

    fn finish_notes(&mut self) {
        let s = self.tracker.stats().clone();
        if s.duplicates > 0 {
            self.report.note(format!("{} events logged again (by other ranks) merged, not doubled", s.duplicates));
        }
        if s.restarts > 0 {
            self.report
                .note(format!("{} restarts (init_start while a run was open): its open phases end there", s.restarts));
        }
        if s.unfinished > 0 {
            self.report.note(format!("{} phases never stopped: kept, marked unfinished", s.unfinished));
        }
        if s.unmatched_stops > 0 {
            self.report.note(format!("{} *_stop events with no start: kept as marks", s.unmatched_stops));
        }
    }
}

impl crate::Source for MllogSource {
    fn next_item(&mut self) -> Result<Option<crate::item::Item>, crate::ImportError> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                self.report.records += 1;
                return Ok(Some(it));
            }
            if self.done {
                return Ok(None);
            }
            let Some((no, l)) = self.lines.next_line()? else {
                self.tracker.finish(None, &mut self.out);
                self.drain();
                self.finish_notes();
                self.done = true;
                continue;
            };
            self.report.lines = no;
            let blank = l.trim().is_empty();
            for parsed in parse_all(l) {
                match parsed {
                    Ok(Some(ev)) => {
                        let ts = ev.time_ns();
                        if ts < 0 {
                            self.report.malformed(no, "time_ms before 1970");
                            continue;
                        }
                        self.tracker.push(ts as u64, &ev, &mut self.out);
                        self.drain();
                    }
                    Ok(None) => {
                        if !blank {
                            self.report.skipped += 1;
                        }
                    }
                    Err(e) => self.report.malformed(no, e.to_string()),
                }
            }
        }
    }

    fn report(&self) -> &crate::lines::FileReport {
        &self.report
    }
}
