//! `mltrace export --parquet` of a real recording, read back with pyarrow:
//! every syscall of a known workload is a row of `syscalls`.

use std::path::Path;
use std::process::Command;

use mltrace_model::event::is_call;
use mltrace_tests::*;

/// Runs a Python script (with the tests' pyarrow) with `dir` as argv[1];
/// its stdout as `key value` lines. Runs in `cwd` (the workload's directory).
fn python(py: &Path, script: &str, dir: &Path, cwd: &Path) -> std::collections::HashMap<String, i64> {
    let out = Command::new(py).arg("-c").arg(script).arg(dir).current_dir(cwd).output().expect("running python");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python failed: {stderr}");
    key_values(&String::from_utf8_lossy(&out.stdout))
}

const CHECK: &str = r#"
import sys, os
import pyarrow.parquet as pq
import pyarrow.compute as pc
d = sys.argv[1]
s = pq.read_table(os.path.join(d, "syscalls.parquet"))
print("rows", s.num_rows)
path = os.path.realpath("data.bin")
p = s.filter(pc.and_(pc.equal(s["syscall"], "pread64"), pc.equal(s["path"], path)))
print("preads", p.num_rows)
print("preads_pids", len(pc.unique(p["pid"])))
print("preads_pid", p["pid"][0].as_py())
print("preads_worker", p["worker"][0].as_py())
print("preads_role_worker", int(pc.all(pc.equal(p["role"], "worker")).as_py()))
print("preads_name_ok", int(pc.all(pc.equal(p["name"], "pread64 4 KiB")).as_py()))
print("preads_bytes", pc.sum(p["bytes"]).as_py())
print("preads_offsets", len(pc.unique(p["offset"])))
print("preads_null_wall", p["wall"].null_count)
print("preads_kind_syscall", int(pc.all(pc.equal(p["kind"], "syscall")).as_py()))
w = s.filter(pc.and_(pc.equal(s["syscall"], "write"), pc.equal(s["path"], path)))
print("writes", w.num_rows)
pr = pq.read_table(os.path.join(d, "processes.parquet"))
print("procs", pr.num_rows)
wk = pr.filter(pc.equal(pr["role"], "worker"))
print("worker_pid", wk["pid"][0].as_py())
print("worker_exit", wk["exit_code"][0].as_py())
print("worker_syscalls", wk["syscalls"][0].as_py())
for t in ["block", "counters", "phases", "page_cache", "mappings", "faults", "sched", "wakeups", "marks",
          "io_accounting", "lost"]:
    print("table_" + t, pq.read_table(os.path.join(d, t + ".parquet")).num_rows)
pc_ = pq.read_table(os.path.join(d, "page_cache.parquet"))
print("page_cache_file_bytes", pc.sum(pc_.filter(pc.equal(pc_["path"], path))["bytes"]).as_py() or 0)
"#;

#[test]
fn every_syscall_is_a_row() {
    if !require_root() {
        return;
    }
    let Some(py) = tools::python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload("preads", tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let log = tmp.path().join("run.bin");
    let out = mltrace(&["record", "-q", "-o", log.to_str().unwrap(), "--", bin.to_str().unwrap()], &work);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.contains("0 lost"), "{stderr}");
    let kv = key_values(&String::from_utf8_lossy(&out.stdout));
    let recs = read_log(&log);
    let calls = recs.iter().filter(|r| is_call(&r.rec)).count() as i64;

    let dir = tmp.path().join("tables");
    let out = mltrace(&["export", "--parquet", log.to_str().unwrap(), "-o", dir.to_str().unwrap()], &work);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.contains(&format!("syscalls {calls}")), "{stderr}");

    let got = python(&py, CHECK, &dir, &work);
    let g = |k: &str| *got.get(k).unwrap_or_else(|| panic!("{k} missing: {got:?}"));
    assert_eq!(g("rows"), calls, "every syscall record is a row");
    assert_eq!(g("preads"), 5000, "{got:?}");
    assert_eq!(g("preads_pids"), 1);
    assert_eq!(g("preads_pid"), kv["worker"]);
    assert_eq!(g("preads_worker"), 0);
    assert_eq!(g("preads_role_worker"), 1);
    assert_eq!(g("preads_name_ok"), 1);
    assert_eq!(g("preads_bytes"), 5000 * 4096);
    assert_eq!(g("preads_offsets"), 64);
    assert_eq!(g("preads_null_wall"), 0, "a recording's header anchors the wall clock");
    assert_eq!(g("preads_kind_syscall"), 1);
    assert_eq!(g("writes"), 64);
    assert_eq!(g("procs"), 2);
    assert_eq!(g("worker_pid"), kv["worker"]);
    assert_eq!(g("worker_exit"), 0);
    assert_eq!(g("worker_syscalls"), 5002, "openat, 5,000 preads, close");
    for t in ["block", "counters", "phases", "page_cache", "mappings", "faults", "sched", "wakeups", "marks"] {
        assert!(got.contains_key(&format!("table_{t}")), "{t} missing: {got:?}");
    }
    assert!(g("table_counters") > 0);
    assert!(g("table_mappings") > 0);

    // Row groups of 100 rows read back the same (bounded memory: a table
    // holds one row group at a time).
    let mut reader = mltrace_log::LogReader::open(&log).unwrap();
    let small = tmp.path().join("small");
    let (_, tables) =
        mltrace_parquet::export_log(&mut reader, &small, &mltrace_parquet::Options { row_group: 100 }).unwrap();
    assert_eq!(tables.iter().find(|t| t.name == "syscalls").unwrap().rows, calls as u64);
    let again = python(&py, CHECK, &small, &work);
    assert_eq!(again, got);
}
