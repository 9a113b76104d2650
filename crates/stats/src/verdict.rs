//! The one-sentence answer to "is the job input-bound?", from the
//! scheduling records: how long the trainer slept until one of its
//! data-loader workers woke it, against its time on CPU, and what the
//! workers did meanwhile. Without scheduling records it says so.

use serde_json::{json, Value};

use crate::{ProcStats, Stats};

/// The trainer waited for its workers at least this share of its time.
const INPUT_BOUND: f64 = 0.2;
/// The trainer was on CPU at least this share of its time.
const COMPUTE_BOUND: f64 = 0.5;

#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// `input-bound`, `compute-bound`, `mixed`, `no-workers`, or
    /// `no-scheduling-data`.
    pub kind: &'static str,
    pub text: String,
    pub data_wait_fraction: Option<f64>,
}

impl Verdict {
    pub fn to_json(&self) -> Value {
        json!({ "kind": self.kind, "text": self.text, "data_wait_fraction": self.data_wait_fraction })
    }
}

fn pct(f: f64) -> String {
    format!("{:.0}%", f * 100.0)
}

impl Stats {
    /// Whether the log holds scheduling: recorded with it on (a recording
    /// that had none to record still says so), or has its records.
    pub fn has_sched(&self) -> bool {
        self.sched.records > 0 || self.header.probes.iter().any(|p| p.subsystem == "scheduling")
    }

    /// The trainer: the command `record` ran (its first incarnation).
    pub fn trainer(&self) -> Option<&ProcStats> {
        let root = self.header.root_pid;
        self.processes.iter().find(|p| p.pid == root && root != 0)
    }

    /// Its data-loader workers: children it forked that did not exec
    /// another program (or exec'd Python's multiprocessing spawn), as the
    /// trace's roles have it.
    pub fn workers_of(&self, trainer: &ProcStats) -> Vec<&ProcStats> {
        self.processes.iter().filter(|p| p.parent == trainer.pid && p.pid != trainer.pid && p.loader).collect()
    }

    /// The trainer's main thread's share of its time asleep until a worker woke it.
    pub fn data_wait_fraction(&self, trainer: &ProcStats) -> Option<f64> {
        if !self.has_sched() {
            return None;
        }
        let workers: Vec<u32> = self.workers_of(trainer).iter().map(|w| w.pid).collect();
        if workers.is_empty() {
            return None;
        }
        let main = self.sched.main_thread.get(&trainer.pid)?;
        main.fraction(self.sched.data_wait(trainer.pid, &workers))
    }

    pub fn verdict(&self) -> Verdict {
        let none = |kind, text: String| Verdict { kind, text, data_wait_fraction: None };
        if !self.has_sched() {
            return none(
                "no-scheduling-data",
                "no verdict: this log has no scheduling records (recorded with --sched off, or imported)".into(),
            );
        }
        let Some(t) = self.trainer() else {
            return none("no-scheduling-data", "no verdict: the command's process is not in this log".into());
        };
        let Some(main) = self.sched.main_thread.get(&t.pid).filter(|m| m.total() > 0) else {
            return none("no-scheduling-data", "no verdict: no scheduling records of the trainer".into());
        };
        let frac = |n| main.fraction(n).unwrap_or(0.0);
        let (cpu, run, io, sleep) = (frac(main.cpu), frac(main.runnable), frac(main.io_wait), frac(main.sleep));
        let workers = self.workers_of(t);
        let Some(dw) = self.data_wait_fraction(t) else {
            return none(
                "no-workers",
                format!(
                    "no data-loader workers: the trainer was on CPU {}, runnable {}, in I/O wait {}, asleep {} of its time",
                    pct(cpu),
                    pct(run),
                    pct(io),
                    pct(sleep)
                ),
            );
        };
        // What the workers did, over their threads' time together.
        let mut wt = crate::sched::Times::default();
        let mut read_ns = 0;
        for w in &workers {
            if let Some(x) = self.sched.procs.get(&w.pid) {
                wt.cpu += x.cpu;
                wt.runnable += x.runnable;
                wt.io_wait += x.io_wait;
                wt.sleep += x.sleep;
                wt.other += x.other;
            }
            read_ns += w.read_ns;
        }
        let wf = |n| wt.fraction(n).unwrap_or(0.0);
        let n = workers.len();
        let of_workers = format!(
            "its {n} worker{} spent {} in file reads ({} in uninterruptible I/O sleep), {} on CPU, {} waiting for a CPU",
            if n == 1 { "" } else { "s" },
            pct(wf(read_ns).min(1.0)),
            pct(wf(wt.io_wait)),
            pct(wf(wt.cpu)),
            pct(wf(wt.runnable)),
        );
        let (kind, head) = if dw >= INPUT_BOUND {
            ("input-bound", format!("input-bound: the trainer waited for data {} of its time", pct(dw)))
        } else if cpu >= COMPUTE_BOUND {
            (
                "compute-bound",
                format!(
                    "compute-bound: the trainer was on CPU {} of its time and waited for data {}",
                    pct(cpu),
                    pct(dw)
                ),
            )
        } else {
            (
                "mixed",
                format!(
                    "neither: the trainer waited for data {}, was on CPU {}, runnable {}, otherwise asleep or in I/O {}",
                    pct(dw),
                    pct(cpu),
                    pct(run),
                    pct(io + sleep - dw)
                ),
            )
        };
        Verdict { kind, text: format!("{head}; {of_workers}"), data_wait_fraction: Some(dw) }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::path::Path;

    use mltrace_log::*;

    use crate::Stats;

    fn stats(recs: &[Record], probes: Vec<Probe>) -> Stats {
        let header = Header { root_pid: 10, command: vec!["train".into()], probes, ..Default::default() };
        let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
        for r in recs {
            w.push_with(|e| {
                let comm = e.intern(b"t");
                match *r {
                    Record::SchedSwitch(mut x) => {
                        (x.prev_comm, x.next_comm) = (comm, comm);
                        Record::SchedSwitch(x)
                    }
                    Record::SchedWake(mut x) => {
                        x.comm = comm;
                        Record::SchedWake(x)
                    }
                    other => other,
                }
            })
            .unwrap();
        }
        let log = w.finish(&Trailer::default()).unwrap();
        Stats::from_reader(&mut LogReader::new(Path::new("t"), Cursor::new(log)).unwrap()).unwrap()
    }

    fn sw(ts: u64, prev: u32, state: SchedState, next: u32) -> Record {
        let traced = if prev != 0 { sched::PREV } else { 0 } | if next != 0 { sched::NEXT } else { 0 };
        Record::SchedSwitch(SchedSwitch {
            ts,
            prev_pid: prev,
            prev_tid: prev,
            prev_state: state,
            next_pid: next,
            next_tid: next,
            traced,
            ..Default::default()
        })
    }

    fn wake(ts: u64, who: u32, by: u32) -> Record {
        Record::SchedWake(SchedWake { ts, pid: who, tid: who, waker_pid: by, waker_tid: by, ..Default::default() })
    }

    fn fork(ts: u64, pid: u32, parent: u32) -> Record {
        Record::Fork(Fork { ts, pid, tid: pid, parent_pid: parent, parent_tid: parent, thread: false })
    }

    #[test]
    fn the_trainer_waits_for_its_worker() {
        let s = stats(
            &[
                fork(0, 11, 10),
                sw(100, 0, SchedState::Runnable, 10),
                // On CPU 400 ns, then asleep 600 ns until the worker wakes it.
                sw(500, 10, SchedState::Sleeping, 11),
                sw(600, 11, SchedState::Uninterruptible, 0),
                wake(700, 11, 0),
                sw(1000, 0, SchedState::Runnable, 11),
                wake(1100, 10, 11),
                sw(1100, 11, SchedState::Sleeping, 10),
                sw(1100, 10, SchedState::Runnable, 0),
            ],
            vec![],
        );
        let v = s.verdict();
        assert_eq!(v.kind, "input-bound", "{v:?}");
        assert_eq!(v.data_wait_fraction, Some(0.6));
        assert!(v.text.starts_with("input-bound: the trainer waited for data 60% of its time; its 1 worker"), "{v:?}");
        let j = s.to_json();
        assert_eq!(j["verdict"]["kind"], "input-bound");
        assert_eq!(j["verdict"]["data_wait_fraction"].as_f64(), Some(0.6));
        let by_pid = |pid: u64| j["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap();
        let t = by_pid(10);
        assert_eq!((t["cpu_fraction"].as_f64(), t["sleep_fraction"].as_f64()), (Some(0.4), Some(0.6)));
        assert_eq!(t["data_wait_fraction"].as_f64(), Some(0.6));
        let w = by_pid(11);
        // Worker 11: on CPU 100, D 100 (woken at 700), runnable 400 until 1100.
        assert_eq!(w["io_wait_fraction"].as_f64(), Some(100.0 / 600.0));
        assert!(w["data_wait_fraction"].is_null());
    }

    #[test]
    fn without_scheduling_records_nothing_is_guessed() {
        let s = stats(&[fork(0, 11, 10), Record::Exit(Exit { ts: 5, pid: 11, tid: 11, ..Default::default() })], vec![]);
        let j = s.to_json();
        assert_eq!(j["verdict"]["kind"], "no-scheduling-data");
        assert!(j["verdict"]["data_wait_fraction"].is_null());
        for k in ["cpu_fraction", "runnable_fraction", "io_wait_fraction", "sleep_fraction", "data_wait_fraction"] {
            assert!(j["processes"][0][k].is_null(), "{k}");
        }
        assert!(s.render(5).starts_with("verdict:  no verdict: this log has no scheduling records"));
    }
}
