//! Loaders that are threads of the trainer's own process, with real BPF:
//! a Python thread pool reading and hashing cold files into a
//! `queue.Queue`, and a real TensorFlow `tf.data` pipeline (parallel map,
//! batch, prefetch). Each trainer times its own waits for batches; the
//! verdict must find its loader threads, count the sleeps they ended as
//! data waits within 0.3 s (or 20%) of that clock, name them in `stats`
//! and in the trace.

use std::path::Path;

use mltrace_tests::*;

use mltrace_tests::Recorded as Run;

/// Records `thread_loader.py MODE` with `py`, computing 30 ms per step by `how`.
fn record(dir: &Path, py: &str, mode: &str, steps: &str, how: &str, route: &[&str]) -> Run {
    let log = dir.join(format!("{mode}-{how}{}.bin", route.join("")));
    let script = repo().join("tests/workloads/thread_loader.py");
    let data = dir.join("data");
    let mut args = vec!["record", "-q", "-f", "--gpu", "off", "-o", log.to_str().unwrap()];
    args.extend_from_slice(route);
    args.extend(["--", py, script.to_str().unwrap(), mode, data.to_str().unwrap(), steps, "30", how]);
    let out = mltrace(&args, dir);
    recorded(&out, log, dir)
}

/// The verdict's data wait, in seconds of the trainer's life, within
/// 0.3 s (or 20%) of the trainer's own clock; its loaders are `word`s,
/// threads of its process, listed with their role in `threads[]`.
fn check(run: &Run, what: &str, word: &str) {
    let v = &run.json["verdict"];
    let pid = run.kv["pid"] as u32;
    assert_eq!(v["trainer_pid"], pid, "{v}");
    let recs = read_log(&run.log);
    let life = exec_to_exit(&recs, pid) as f64 / 1e9;
    let got = v["data_wait_fraction"].as_f64().unwrap_or_else(|| panic!("{what}: no data wait: {v}")) * life;
    let want = run.kv["blocked_ns"] as f64 / 1e9;
    assert!(want > 0.3, "{what}: the workload should wait for data ({want:.2} s)");
    allow::THREAD_WAIT.check_relative(got, want, 0.3, format_args!("{what}: s waiting for data (verdict {v})"));
    let w = &v["workers"];
    assert_eq!(w["kind"], "threads", "{what}: {v}");
    assert_eq!(w["count"], 2, "{what}: {v}");
    let text = v["text"].as_str().unwrap();
    assert!(text.contains(&format!("its 2 {word}s")), "{what}: {text}");
    assert!(text.contains("/data/*.bin"), "{what}: {text}");
    // Per thread, under the trainer's process.
    let procs = run.json["processes"].as_array().unwrap();
    let trainer = procs.iter().find(|p| p["pid"] == pid).unwrap();
    let threads = trainer["threads"].as_array().unwrap();
    let role = |r: &str| threads.iter().filter(|t| t["role"] == r).collect::<Vec<_>>();
    assert_eq!(role("main").len(), 1, "{what}: {threads:?}");
    assert_eq!(role("main")[0]["tid"], pid);
    let loaders = role("loader");
    let mut names: Vec<&str> = loaders.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, [format!("{word} 1"), format!("{word} 2")], "{what}: {threads:?}");
    for t in loaders {
        for k in ["cpu_fraction", "read_fraction", "io_wait_fraction"] {
            let f = t[k].as_f64().unwrap_or_else(|| panic!("{what}: {k} of {t}"));
            assert!((0.0..=1.0).contains(&f), "{what}: {t}");
        }
        assert!(t["read_fraction"].as_f64().unwrap() > 0.0, "{what}: {t}");
    }
    assert!(trainer["thread_count"].as_u64().unwrap() >= 2, "{what}: {trainer}");
}

#[test]
fn a_thread_pool_loader_waits_as_it_measured() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for (how, route) in [
        ("sleep", &[][..]),
        ("spin", &[][..]),
        ("sleep", &["--syscall-probes", "compat"][..]),
        ("sleep", &["--detail", "summary"][..]),
    ] {
        let run = record(dir.path(), &py, "pool", "40", how, route);
        check(&run, &format!("pool, {how}{route:?}"), "loader thread");
        runs.push(run);
    }
    // Summed scheduling (summary detail) finds the wait full detail finds.
    summary_agrees("pool data wait", data_wait(&runs[0]), data_wait(&runs[3]), 0.02);
}

/// The verdict's data wait and what the trainer measured, in shares of its life.
fn data_wait(run: &Run) -> (f64, f64) {
    let pid = run.kv["pid"] as u32;
    let life = exec_to_exit(&read_log(&run.log), pid) as f64;
    (run.json["verdict"]["data_wait_fraction"].as_f64().unwrap(), run.kv["blocked_ns"] as f64 / life)
}

#[test]
fn a_tf_data_pipeline_waits_as_it_measured() {
    let Some(_turn) = require_root!() else {
        return;
    };
    // The tests' own Python, with TensorFlow (scripts/test-tools.sh).
    let Some(py) = tools::python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = record(dir.path(), py.to_str().unwrap(), "tfdata", "24", "sleep", &[]);
    check(&run, "tf.data", "tf.data thread");
    // Its batches handed on thread to thread, from summed scheduling too.
    let sum = record(dir.path(), py.to_str().unwrap(), "tfdata", "24", "sleep", &["--detail", "summary"]);
    check(&sum, "tf.data, summary detail", "tf.data thread");
    summary_agrees("tf.data data wait", data_wait(&run), data_wait(&sum), 0.02);
}

/// In Perfetto: the loader threads' tracks are named as `stats` names them.
#[test]
fn the_trace_names_the_loader_threads() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = record(dir.path(), &py, "pool", "20", "sleep", &[]);
    let Some(tp) = perfetto_tp() else { return };
    let trace = dir.path().join("run.perfetto-trace");
    let out = mltrace(&["export", run.log.to_str().unwrap(), "-o", trace.to_str().unwrap()], dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid = run.kv["pid"];
    let q = format!(
        "select t.name from thread t join process p using(upid) where p.pid = {pid} \
         and t.name like 'loader thread%' order by t.name"
    );
    let rows = tp_query(&tp, &trace, &[&q]);
    let names: Vec<&str> = rows[0].iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, ["loader thread 1", "loader thread 2"], "{rows:?}");
}
