//! The `mltrace_ebpf` Python module (python/mltrace_ebpf) under `mltrace record`:
//! `phase` and `mark` reach the log through the recorder's own pipe, on
//! the script's clock, and the script's output holds none of it;
//! `mltrace_ebpf.load` reads a real Parquet export into DataFrames.

use std::path::{Path, PathBuf};
use std::process::Command;

use mltrace_log::*;
use mltrace_tests::*;

fn python_src() -> PathBuf {
    repo().join("python")
}

/// The module's own unit tests (no recorder needed): calls are no-ops
/// without one, and the lines it writes to a pipe.
#[test]
fn module_unit_tests() {
    let out = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s"])
        .arg(python_src().join("tests"))
        .env("PYTHONPATH", python_src())
        .output()
        .expect("running python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn phases_and_marks_from_the_module_reach_the_log() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let log = d.join("run.bin");
    let clock_file = d.join("clock.json");
    let script = repo().join("tests/workloads/phases.py");
    let out = Command::new(mltrace_bin())
        .args(["record", "-q", "--gpu", "off", "-o"])
        .arg(&log)
        .args(["--", "python3"])
        .arg(&script)
        .arg(&clock_file)
        .env("PYTHONPATH", python_src())
        .current_dir(d)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Its output is its own: no MLLOG lines were printed.
    assert_eq!(stdout, "recording: True\ndone\n");
    assert!(!stderr.contains("MLLOG"), "{stderr}");
    // The decoy at the fd number in a subprocess got nothing.
    assert_eq!(std::fs::read(d.join("decoy")).unwrap(), b"");

    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&clock_file).unwrap()).unwrap();
    let header = LogReader::open(&log).unwrap().header().clone();
    // The script's Unix nanoseconds on the recording's boottime clock.
    let to_boot =
        |unix: i64| (unix as i128 - header.start.realtime_ns as i128 + header.start.boottime_ns as i128) as i64;
    let at = |what: &str| -> i64 {
        let c = v["clock"].as_array().unwrap().iter().find(|c| c[0] == what).unwrap();
        to_boot(c[1].as_i64().unwrap())
    };
    // Realtime and boottime read apart when recording starts: a little slack.
    let slack = 2_000_000;
    let within = |ts: i64, lo: &str, hi: &str| ts + slack >= at(lo) && ts <= at(hi) + slack;

    let recs = read_log(&log);
    let mut phases: Vec<(String, i64, i64)> = Vec::new();
    let mut marks: Vec<(String, String, i64)> = Vec::new();
    for r in &recs {
        match r.rec {
            Record::Phase(p) => phases.push((r.strs[0].clone(), p.ts as i64, (p.ts + p.dur) as i64)),
            Record::Mark(m) => marks.push((r.strs[0].clone(), r.strs[1].clone(), m.ts as i64)),
            _ => {}
        }
    }
    phases.sort_by_key(|p| p.1);
    marks.sort_by_key(|m| m.2);
    let names: Vec<&str> = phases.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(names, ["EVAL (epoch 1)", "DATA_LOAD", "DATA_LOAD"], "{phases:?}");
    let (_, s, e) = &phases[0];
    assert!(within(*s, "eval<", "eval>") && within(*e, "/eval<", "/eval>"), "{phases:?} {v}");
    for i in 0..2 {
        let (_, s, e) = &phases[1 + i];
        assert!(within(*s, &format!("load{i}<"), &format!("/load{i}>")), "{phases:?} {v}");
        assert!(within(*e, &format!("load{i}<"), &format!("/load{i}>")), "{phases:?} {v}");
        assert!(e - s >= 19_000_000, "{phases:?}");
    }
    let worker = v["worker"].as_i64().unwrap().to_string();
    let got: Vec<(&str, &str)> = marks.iter().map(|m| (m.0.as_str(), m.1.as_str())).collect();
    assert_eq!(got, [("loss", "0.5"), ("loss", "0.5"), ("worker", worker.as_str())], "{marks:?}");
    assert!(within(marks[0].2, "loss<", "loss>"), "{marks:?} {v}");
    assert!(marks[1].2 > phases[2].2 - slack, "{marks:?}");
    let probe = header.probes.iter().find(|p| p.subsystem == "phases").unwrap();
    assert!(probe.detail.contains("MLTRACE_MLLOG_FD"), "{probe:?}");
}

/// A venv under target/ with pandas and pyarrow (never the system Python's
/// packages), made on first use.
fn pandas_python() -> PathBuf {
    let venv = repo().join("target/py-venv");
    let py = venv.join("bin/python");
    let have = |py: &Path| Command::new(py).args(["-c", "import pandas, pyarrow"]).status().is_ok_and(|s| s.success());
    if !have(&py) {
        let st = Command::new("python3").args(["-m", "venv"]).arg(&venv).status().unwrap();
        assert!(st.success(), "python3 -m venv {}", venv.display());
        let st = Command::new(&py).args(["-m", "pip", "install", "-q", "pandas", "pyarrow"]).status().unwrap();
        assert!(st.success(), "pip install pandas pyarrow into {}", venv.display());
    }
    py
}

#[test]
fn load_reads_a_parquet_export_into_dataframes() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let log = d.join("run.bin");
    let o = mltrace(
        &[
            "record",
            "-q",
            "--gpu",
            "off",
            "-o",
            log.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "head -c 300000 /dev/urandom > data.bin; cat data.bin > /dev/null",
        ],
        d,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pq = d.join("run.parquet");
    let o = mltrace(&["export", "--parquet", log.to_str().unwrap(), "-o", pq.to_str().unwrap()], d);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let script = r#"
import os, sys, mltrace_ebpf as mltrace
t = mltrace.load(sys.argv[1])
files = sorted(f[:-8] for f in os.listdir(sys.argv[1]) if f.endswith(".parquet"))
assert sorted(t) == files, (sorted(t), files)
s = t["syscalls"]
path = os.path.realpath("data.bin")
reads = s[(s["path"] == path) & (s["syscall"] == "read")]
print("tables", len(t))
print("read_bytes", int(reads["bytes"].sum()))
"#;
    let out = Command::new(pandas_python())
        .arg("-c")
        .arg(script)
        .arg(&pq)
        .env("PYTHONPATH", python_src())
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let kv = key_values(&String::from_utf8_lossy(&out.stdout));
    assert!(kv["tables"] >= 5, "{kv:?}");
    assert_eq!(kv["read_bytes"], 300_000, "{kv:?}");
}
