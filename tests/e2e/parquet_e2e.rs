//! `mltrace export --parquet` of a real recording, read back with pyarrow:
//! every syscall of a known workload is a row of `syscalls`; and several
//! hosts' recordings as one dataset in Hive layout, read back with DuckDB
//! and pyarrow.dataset.

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
    let Some(_turn) = require_root!() else {
        return;
    };
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
    // The dynamic loader's lookups (access of /etc/ld.so.preload) are
    // metadata calls: rows of a table of their own.
    let metas = recs.iter().filter(|r| matches!(r.rec, mltrace_log::Record::MetaCall(_))).count() as i64;
    let calls = recs.iter().filter(|r| is_call(&r.rec)).count() as i64 - metas;

    let dir = tmp.path().join("tables");
    let out = mltrace(&["export", "--parquet", log.to_str().unwrap(), "-o", dir.to_str().unwrap()], &work);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.contains(&format!("syscalls {calls}")), "{stderr}");
    assert!(metas == 0 || stderr.contains(&format!("metadata_calls {metas}")), "{stderr}");

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

/// `mltrace record -q ARGS` in a new UTS namespace whose host name is
/// `host`, run in `dir`.
fn record_as(host: &str, dir: &Path, args: &str) -> std::process::Output {
    let script = format!("hostname {host} && exec {} record -q {args}", mltrace_bin().display());
    proc::output(Command::new("unshare").args(["-u", "sh", "-c", &script]).current_dir(dir))
}

/// Per host, from `syscalls` and `block` of the dataset in argv[1], read
/// by DuckDB and by pyarrow.dataset (JSON: engine -> host -> counts).
const DATASET: &str = r#"
import json, os, sys
import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
d = sys.argv[1]
READS = ["read", "pread64", "readv", "preadv", "preadv2", "sendfile", "copy_file_range"]
OPENS = ["open", "openat", "openat2", "creat"]
TRANSFERS = ["sendfile", "copy_file_range"]
out = {"duckdb": {}, "pyarrow": {}}

def in_(xs):
    return "(" + ", ".join("'" + x + "'" for x in xs) + ")"
rows = duckdb.sql(f"""
    SELECT host, count(*) AS rows,
        count(*) FILTER (kind = 'syscall') AS calls,
        count(*) FILTER (kind = 'syscall' AND syscall IN {in_(READS)}) AS reads,
        coalesce(sum(bytes) FILTER (kind = 'syscall' AND syscall IN {in_(READS)}), 0) AS read_bytes,
        count(*) FILTER (kind = 'syscall' AND syscall IN {in_(OPENS)}) AS opens,
        count(*) FILTER (syscall IN {in_(TRANSFERS)}) AS transfers
    FROM read_parquet('{d}/syscalls/*/*.parquet', hive_partitioning = true)
    GROUP BY host""").fetchall()
for host, *counts in rows:
    out["duckdb"][host] = dict(zip(["rows", "calls", "reads", "read_bytes", "opens", "transfers"], counts), block=0)
for host, n in duckdb.sql(f"""
    SELECT host, count(*) FROM read_parquet('{d}/block/*/*.parquet', hive_partitioning = true)
    GROUP BY host""").fetchall():
    out["duckdb"][host]["block"] = n

s = ds.dataset(os.path.join(d, "syscalls"), format="parquet", partitioning="hive").to_table()
b = ds.dataset(os.path.join(d, "block"), format="parquet", partitioning="hive").to_table()
def count(t, *masks):
    for m in masks:
        t = t.filter(m(t))
    return t
for host in pc.unique(s["host"]).to_pylist():
    h = count(s, lambda t: pc.equal(t["host"], host))
    calls = count(h, lambda t: pc.equal(t["kind"], "syscall"))
    reads = count(calls, lambda t: pc.is_in(t["syscall"], value_set=pa.array(READS)))
    out["pyarrow"][host] = {
        "rows": h.num_rows,
        "calls": calls.num_rows,
        "reads": reads.num_rows,
        "read_bytes": pc.sum(reads["bytes"]).as_py() or 0,
        "opens": count(calls, lambda t: pc.is_in(t["syscall"], value_set=pa.array(OPENS))).num_rows,
        "transfers": count(h, lambda t: pc.is_in(t["syscall"], value_set=pa.array(TRANSFERS))).num_rows,
        "block": count(b, lambda t: pc.equal(t["host"], host)).num_rows,
    }
print(json.dumps(out))
"#;

/// Three hosts (UTS namespaces), each reading a file of its own size,
/// exported together: DuckDB and pyarrow.dataset read one table per kind
/// with a `host` column, whose per-host counts are each host's own
/// `stats --json`.
#[test]
fn hosts_exported_together_read_as_one_dataset() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = tools::python_with("duckdb") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let hosts = ["nodeA", "nodeB", "nodeC"];
    let mut logs = Vec::new();
    let mut want = std::collections::BTreeMap::new();
    for (i, host) in hosts.iter().enumerate() {
        let work = d.join(host);
        std::fs::create_dir(&work).unwrap();
        let log = d.join(format!("{host}.bin"));
        let size = 300_000 * (i + 1);
        let cmd = format!("-o {} -- sh -c 'head -c {size} /dev/zero > data; cat data > /dev/null'", log.display());
        let rec = recorded(&record_as(host, &work, &cmd), log.clone(), &work);
        let procs = rec.json["processes"].as_array().unwrap();
        let sum = |k: &str| procs.iter().map(|p| p[k].as_u64().unwrap()).sum::<u64>();
        let disks = rec.json["disks"].as_array().unwrap();
        want.insert(
            host.to_string(),
            serde_json::json!({
                "reads": sum("reads"),
                "read_bytes": sum("read_bytes"),
                "opens": sum("opens"),
                // Every syscall row; a transfer (sendfile, copy_file_range) is a read and a write.
                "calls_and_transfers": sum("reads") + sum("writes") + sum("opens") + sum("closes"),
                "block": disks.iter().map(|k| k["requests"].as_u64().unwrap()).sum::<u64>(),
            }),
        );
        assert!(sum("read_bytes") >= size as u64, "{host}: cat read its {size} bytes");
        logs.push(log);
    }

    let job = d.join("job");
    let mut args = vec!["export", "--parquet"];
    args.extend(logs.iter().map(|l| l.to_str().unwrap()));
    args.extend(["-o", job.to_str().unwrap()]);
    let out = mltrace(&args, d);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("wrote 3 hosts (nodeA, nodeB, nodeC)"), "{stderr}");
    for (host, log) in hosts.iter().zip(&logs) {
        let calls = want[*host]["calls_and_transfers"].as_u64().unwrap();
        let line = stderr.lines().find(|l| l.contains(&format!("{}: wrote", log.display()))).expect(&stderr);
        assert!(line.contains(&format!("host={host}: syscalls ")), "{line}");
        assert!(job.join(format!("syscalls/host={host}/part-0.parquet")).is_file());
        assert!(job.join(format!("block/host={host}/part-0.parquet")).is_file(), "every table for every host");
        assert!(calls > 0);
    }

    let py_out = Command::new(&py).arg("-c").arg(DATASET).arg(&job).output().expect("running python");
    assert!(py_out.status.success(), "python failed: {}", String::from_utf8_lossy(&py_out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&py_out.stdout).unwrap();
    for engine in ["duckdb", "pyarrow"] {
        let by_host = got[engine].as_object().unwrap();
        assert_eq!(by_host.keys().collect::<Vec<_>>(), hosts, "{engine}: {got}");
        for (host, w) in &want {
            let g = &by_host[host];
            let n = |k: &str| g[k].as_u64().unwrap_or_else(|| panic!("{engine} {host} {k}: {g}"));
            for k in ["reads", "read_bytes", "opens", "block"] {
                assert_eq!(n(k), w[k].as_u64().unwrap(), "{engine}, {host}: {k}: {g} vs stats {w}");
            }
            assert_eq!(
                n("calls") + n("transfers"),
                w["calls_and_transfers"].as_u64().unwrap(),
                "{engine}, {host}: {g}"
            );
            assert_eq!(n("rows"), n("calls"), "{engine}, {host}: only plain syscalls in this workload: {g}");
        }
    }
    // Each host read a file of its own size: the partitions are not mixed up.
    let bytes: Vec<u64> = hosts.iter().map(|h| got["duckdb"][h]["read_bytes"].as_u64().unwrap()).collect();
    assert!(bytes[0] < bytes[1] && bytes[1] < bytes[2], "{bytes:?}");

    // A merged log, and one host twice, are refused by name.
    let o = mltrace(&["merge", "nodeA.bin", "nodeB.bin", "-o", "ab.bin"], d);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = mltrace(&["export", "--parquet", "ab.bin", "nodeC.bin", "-o", "x"], d);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("ab.bin: a merged log of 2 hosts (nodeA, nodeB)"), "{e}");
    std::fs::copy(&logs[0], d.join("again.bin")).unwrap();
    let o = mltrace(&["export", "--parquet", "nodeA.bin", "again.bin", "-o", "x"], d);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("nodeA.bin and again.bin are both of host nodeA"), "{e}");
    assert!(!d.join("x").exists());
}
