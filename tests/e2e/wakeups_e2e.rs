//! Who woke the trainer, with real BPF: a Python trainer takes batches
//! from 4 forked workers that keep both CPUs busy reading and hashing, and
//! computes each step by sleeping (`time.sleep`, as storage benchmarks
//! emulate an accelerator) or by spinning. Its sleeps end on their timer
//! while a worker runs on that CPU: that interrupt is not the worker, so
//! `data_wait_fraction` must match the trainer's own clock either way, on
//! both syscall routes. And the trace shows a timer-ended sleep as such.

use std::path::Path;

use mltrace_log::*;
use mltrace_tests::*;

use mltrace_tests::Recorded as Run;

/// Records the trainer computing COMPUTE_MS per step by `how` (sleep,
/// spin), with `route`'s options.
fn record(dir: &Path, py: &str, how: &str, route: &[&str]) -> Run {
    let data = dir.join("data.bin");
    if !data.exists() {
        let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        std::fs::write(&data, chunk.repeat(16)).unwrap();
    }
    let log = dir.join(format!("{how}{}.bin", route.join("")));
    let script = repo().join("tests/workloads/step_trainer.py");
    let mut args = vec!["record", "-q", "-f", "--gpu", "off", "-o", log.to_str().unwrap()];
    args.extend_from_slice(route);
    args.extend(["--", py, script.to_str().unwrap(), data.to_str().unwrap(), "100", "10", how]);
    let out = mltrace(&args, dir);
    recorded(&out, log, dir)
}

/// The trainer's life in the log, exec to exit, and its records.
fn life(run: &Run) -> (f64, Vec<Rec>) {
    let recs = read_log(&run.log);
    (exec_to_exit(&recs, run.kv["pid"] as u32) as f64, recs)
}

/// `data_wait_fraction` within 0.05 of the trainer's time in the queue's
/// get, as a share of its life in the log (what the verdict's shares are
/// of); returns the log's records.
fn check(run: &Run, how: &str) -> Vec<Rec> {
    let v = &run.json["verdict"];
    let got = v["data_wait_fraction"].as_f64().unwrap_or_else(|| panic!("no data wait: {v}"));
    let (life_ns, recs) = life(run);
    let want = run.kv["blocked_ns"] as f64 / life_ns;
    allow::WAIT_SHARE.check(got, want, format_args!("{how}: data_wait_fraction of its life in the log (verdict {v})"));
    // A wait of this size is worth reporting, and the job is input-bound.
    assert!(want > 0.2, "{how}: the workload should wait for data ({want:.3})");
    assert_eq!(v["kind"], "input-bound", "{v}");
    recs
}

/// The trainer's sleeps in nanosleep, and how each ended.
fn timed_sleeps(recs: &[Rec], pid: u32) -> (usize, usize, usize) {
    let (mut asleep_in, mut sleeps, mut by_timer, mut by_task) = (SleepCall::None, 0, 0, 0);
    for r in recs {
        match r.rec {
            Record::SchedSwitch(s) if s.prev_tid == pid && s.traced & sched::PREV != 0 => {
                asleep_in = s.prev_call;
                sleeps += usize::from(s.prev_call == SleepCall::Nanosleep);
            }
            Record::SchedWake(w) if w.tid == pid && w.op == WakeOp::Waking && asleep_in == SleepCall::Nanosleep => {
                match w.by {
                    WakeBy::Timer => by_timer += 1,
                    WakeBy::Task => by_task += 1,
                    _ => {}
                }
                // Never the interrupted task.
                assert!(w.by == WakeBy::Task || w.waker_pid == 0, "{w:?}");
            }
            _ => {}
        }
    }
    (sleeps, by_timer, by_task)
}

fn sleeping_trainer(route: &[&str]) {
    let Some(py) = system_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = record(dir.path(), &py, "sleep", route);
    let recs = check(&run, "sleep");
    // Each of the 100 compute sleeps is in nanosleep and ends by its timer.
    let (sleeps, by_timer, by_task) = timed_sleeps(&recs, run.kv["pid"] as u32);
    assert!(sleeps >= 100, "{sleeps} sleeps in nanosleep");
    assert!(by_timer >= 95 && by_task <= 5, "{by_timer} ended by the timer, {by_task} by a task");
}

/// In summary detail (scheduling summed per thread between its sleeps),
/// the same data wait; the compute sleeps its timer ended are summed in
/// the spans (`timed`, under 10 ms) or end spans of their own (timer), and
/// add up to the 100 x 10 ms it asked for (at least 95% of it).
#[test]
fn a_trainer_that_sleeps_to_compute_in_summary_detail() {
    let Some(_turn) = require_root!() else {
        return;
    };
    // The compat route (no task storage) records every switch instead.
    if std::env::var("MLTRACE_SYSCALL_PROBES").as_deref() == Ok("compat") {
        return;
    }
    let Some(py) = system_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = record(dir.path(), &py, "sleep", &["--detail", "summary"]);
    let recs = check(&run, "sleep, summary detail");
    let pid = run.kv["pid"] as u32;
    let (mut timed, mut by_timer) = (0u64, 0u64);
    for r in &recs {
        match r.rec {
            Record::SchedSwitch(_) | Record::SchedWake(_) => panic!("a summary has no switches: {:?}", r.rec),
            Record::SchedSpan(s) if s.tid == pid => {
                timed += s.timed;
                if s.call == SleepCall::Nanosleep && s.by.interrupt() {
                    by_timer += s.ts - s.sleep_from;
                }
            }
            _ => {}
        }
    }
    // At least 95% of the 1 s asked for: a sleep whose wake-up the
    // probes did not see (its span ends when the thread is seen running)
    // names no waker. Under CI's load one run counted 0.996 s.
    let asleep = (timed + by_timer) as f64 / 1e9;
    assert!((0.95..1.5).contains(&asleep), "the trainer's timed sleeps: {asleep:.3} s ({timed} ns summed)");
}

#[test]
fn a_trainer_that_sleeps_to_compute_waits_as_it_measured() {
    if let Some(_turn) = require_root!() {
        sleeping_trainer(&[]);
    }
}

#[test]
fn a_trainer_that_sleeps_to_compute_on_the_compat_route() {
    if let Some(_turn) = require_root!() {
        sleeping_trainer(&["--syscall-probes", "compat"]);
    }
}

#[test]
fn a_trainer_that_spins_to_compute_waits_as_it_measured() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    for route in [&[][..], &["--syscall-probes", "compat"][..]] {
        let run = record(dir.path(), &py, "spin", route);
        let recs = check(&run, "spin");
        // Its waits are reads of the queue's pipe that a worker ends.
        let pid = run.kv["pid"] as u32;
        let by_workers = recs
            .iter()
            .filter(|r| matches!(r.rec, Record::SchedWake(w) if w.tid == pid && w.by == WakeBy::Task && w.waker_pid != pid && w.waker_pid != 0))
            .count();
        assert!(by_workers >= 20, "{by_workers} wake-ups by the workers");
    }
}

/// In Perfetto: the trainer's sleeps name the call they are in, and a
/// sleep its timer ended says it was woken from an interrupt, not by the
/// worker running on that CPU.
#[test]
fn the_trace_shows_a_timer_ended_sleep_as_such() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = record(dir.path(), &py, "sleep", &[]);
    let Some(tp) = perfetto_tp() else { return };
    let trace = dir.path().join("run.perfetto-trace");
    let out = mltrace(&["export", run.log.to_str().unwrap(), "-o", trace.to_str().unwrap()], dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid = run.kv["pid"];
    let sleeps = format!(
        "select ts.blocked_function, count(*) from thread_state ts join thread using(utid) \
         where tid = {pid} and ts.state = 'S' group by 1 order by 2 desc"
    );
    let wakers = format!(
        "select w.name, count(*) from thread_state ts join thread t using(utid) \
         join thread w on w.utid = ts.waker_utid where t.tid = {pid} group by 1 order by 2 desc"
    );
    let rows = tp_query(&tp, &trace, &[&sleeps, &wakers]);
    let count = |rows: &[Vec<String>], name: &str| {
        rows.iter().find(|r| r[0] == name).map_or(0, |r| r[1].parse::<u32>().unwrap())
    };
    // The sleeps name their call: 100 in nanosleep, the waits in read.
    assert!(count(&rows[0], "nanosleep") >= 100, "{:?}", rows[0]);
    assert!(count(&rows[0], "read") >= 20, "{:?}", rows[0]);
    // The timer woke it, not a worker that was running on that CPU.
    assert!(count(&rows[1], "timer interrupt") >= 95, "wakers: {:?}", rows[1]);
    assert!(count(&rows[1], "python3") >= 20, "wakers: {:?}", rows[1]);
}
