//! The trainer's wait for each batch (`verdict.step_waits`), held against
//! the waits the trainer measured itself around each `get`.

use std::process::Command;

use mltrace_tests::*;
use serde_json::Value;

/// Nearest-rank percentile, as `step_waits` takes it.
fn pctl(sorted: &[u64], q: f64) -> u64 {
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// One worker hashing each batch for about 30 ms of a CPU, the trainer
/// computing 5 ms a step with a step mark each: it waits most of every
/// step, and its own clock says how long.
#[test]
fn step_waits_are_what_the_trainer_measured() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let data = dir.join("data.bin");
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    std::fs::write(&data, chunk.repeat(8)).unwrap();
    let steps = 40usize;
    let log = dir.join("run.bin");
    let script = repo().join("tests/workloads/step_trainer.py");
    let out = proc::output(
        Command::new(mltrace_bin())
            .args(["record", "-q", "-f", "--gpu", "off", "-o", log.to_str().unwrap(), "--", &py])
            .arg(&script)
            .args([data.to_str().unwrap(), &steps.to_string(), "5", "sleep"])
            .env("PYTHONPATH", repo().join("python"))
            .env("STEP_TRAINER_WORKERS", "1")
            .env("STEP_TRAINER_MARKS", "1")
            .current_dir(dir),
    );
    let r = recorded(&out, log.clone(), dir);
    // Steps run from one mark to the next: the last has no end; the
    // first two are left out (the worker starting).
    let mut own: Vec<u64> = (2..steps - 1).map(|i| r.kv[&format!("wait{i}")] as u64).collect();
    own.sort_unstable();

    let json = mltrace(&["stats", "--json", log.to_str().unwrap()], dir);
    assert!(json.status.success(), "{}", String::from_utf8_lossy(&json.stderr));
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let s = &v["verdict"]["step_waits"];
    assert_eq!(s["from"], "marks", "{s}");
    let run = &s["run"];
    assert_eq!(run["steps"].as_u64(), Some(own.len() as u64), "{s}");
    assert_eq!(run["left_out"].as_u64(), Some(2), "{s}");
    let ns = |k: &str| run[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}")) as f64;
    // mltrace counts the trainer asleep until a loader woke it; its own
    // clock adds taking the batch off the queue and waiting for a CPU.
    for (k, q) in [("p50_ns", 0.5), ("p95_ns", 0.95)] {
        let want = pctl(&own, q) as f64;
        allow::WAIT_TIME.check_relative(ns(k), want, 3e6, format_args!("{k} (ns)"));
    }
    assert!(ns("p50_ns") <= ns("p95_ns") && ns("p95_ns") <= ns("p99_ns") && ns("p99_ns") <= ns("max_ns"), "{s}");
    let hist: u64 = s["histogram"].as_array().unwrap().iter().map(|b| b["steps"].as_u64().unwrap()).sum();
    assert_eq!(hist, own.len() as u64, "{s}");
    eprintln!(
        "step waits: mltrace p50 {:.1} ms p95 {:.1} ms; the trainer's own p50 {:.1} ms p95 {:.1} ms",
        ns("p50_ns") / 1e6,
        ns("p95_ns") / 1e6,
        pctl(&own, 0.5) as f64 / 1e6,
        pctl(&own, 0.95) as f64 / 1e6
    );

    // The text and the report say it too.
    let text = mltrace(&["stats", log.to_str().unwrap()], dir);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("step waits (the trainer's wait for each batch, from its step marks"), "{text}");
    let html = dir.join("run.html");
    let rep = mltrace(&["report", "-o", html.to_str().unwrap(), log.to_str().unwrap()], dir);
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("step waits (the trainer"), "the report's line");
    assert!(page.contains("wait for the batch"), "the report's histogram");
}
