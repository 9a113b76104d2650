//! Records come as the CPUs sent them: one sent from a CPU can come after
//! one another CPU sent a few µs later (a wake-up racing the switch it
//! ends: CI once read a batch that ended before it began, and `stats`
//! panicked). Real logs with every record moved either way, their order
//! kept, must give the same verdict, and `stats`, `export` and `report`
//! must take them without a panic.

use std::path::Path;

use mltrace_log::{LogReader, RecordWriter};
use mltrace_tests::*;

/// xorshift64*: the same shifts on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `src` rewritten to `dst` with each record moved by up to `max_ns`
/// either way, in the order it was.
fn jittered(src: &Path, dst: &Path, seed: u64, max_ns: u64) {
    let mut r = LogReader::open(src).unwrap();
    let trailer = r.peek_trailer().unwrap().expect("a trailer");
    let header = r.header().clone();
    let mut w = RecordWriter::new(std::fs::File::create(dst).unwrap(), &header).unwrap();
    let mut rng = Rng(seed * 2 + 1);
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(mut rec) = f.next_record() {
            let by = (rng.next() % (2 * max_ns + 1)) as i64 - max_ns as i64;
            rec.shift_ts(by);
            w.push_with(|e| {
                rec.map_strs(|id| e.intern(f.str(id)));
                rec
            })
            .unwrap();
        }
    }
    w.finish(&trailer).unwrap();
}

fn shares(json: &serde_json::Value) -> Vec<(String, f64)> {
    let b = json["verdict"]["breakdown"].as_object().unwrap_or_else(|| panic!("no breakdown: {json}"));
    b.iter().map(|(k, v)| (k.clone(), v.as_f64().unwrap())).collect()
}

/// `log` jittered three ways by as much as records come out of order
/// (tens of µs): each share within 0.01 of the log as recorded; and by
/// far more (±2 ms, which made the old code panic): still the same run,
/// within 0.1. Every command takes them all.
fn check(run: &Recorded, dir: &Path, what: &str) {
    let (log, want) = (&run.log, &run.json);
    for (max_ns, bound) in [(50_000, 0.01), (2_000_000, 0.1)] {
        for seed in 1..=3u64 {
            let name = format!("{}-{max_ns}-{seed}.bin", log.file_stem().unwrap().to_string_lossy());
            let moved = dir.join(name);
            jittered(log, &moved, seed, max_ns);
            let what = format!("{what}, ±{} µs, seed {seed}", max_ns / 1000);
            let got = stats_json(&moved, dir);
            assert_eq!(got["verdict"]["trainer_pid"], want["verdict"]["trainer_pid"], "{what}");
            for ((k, a), (_, b)) in shares(&got).into_iter().zip(shares(want)) {
                assert!((a - b).abs() <= bound, "{what}: {k} {a:.3} jittered, {b:.3} as recorded");
            }
            for args in [
                vec!["stats".to_string()],
                vec!["export".into(), "-o".into(), dir.join("t.perfetto-trace").display().to_string()],
                vec!["export".into(), "--chrome".into(), "-o".into(), dir.join("t.json").display().to_string()],
                vec!["report".into(), "-o".into(), dir.join("t.html").display().to_string()],
            ] {
                let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
                a.push(moved.to_str().unwrap());
                let out = mltrace(&a, dir);
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success() && !err.contains("panicked"), "{what}: {a:?}: {err}");
            }
        }
    }
}

fn stats_json(log: &Path, dir: &Path) -> serde_json::Value {
    let out = mltrace(&["stats", "--json", log.to_str().unwrap()], dir);
    assert!(out.status.success(), "{}: {}", log.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn record(dir: &Path, name: &str, args: &[&str], cmd: &[&str], env: Option<(&str, &Path)>) -> Recorded {
    let log = dir.join(name);
    let mut a = vec!["record", "-q", "-f", "--gpu", "off", "-o", log.to_str().unwrap()];
    a.extend_from_slice(args);
    a.push("--");
    a.extend_from_slice(cmd);
    let mut c = std::process::Command::new(mltrace_bin());
    c.args(&a).current_dir(dir);
    if let Some((k, v)) = env {
        c.env(k, v);
    }
    let out = proc::output(&mut c);
    recorded(&out, log, dir)
}

/// A thread-pool loader (the CI failure's workload), and a forked loader
/// with GPU waits and a checkpoint, in full and summary detail.
#[test]
fn jittered_logs_keep_their_verdict() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let pool = repo().join("tests/workloads/thread_loader.py");
    let data = dir.join("data");
    let (pool, data) = (pool.to_str().unwrap(), data.to_str().unwrap());
    let run = record(dir, "pool.bin", &[], &[&py, pool, "pool", data, "20", "30", "sleep"], None);
    check(&run, dir, "thread pool");
    let cuda = stand_in::library(dir, "fake_cuda", "libcuda.so.1");
    let script = repo().join("tests/workloads/breakdown.py");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let (script, out, lib) = (script.to_str().unwrap(), out.to_str().unwrap(), cuda.to_str().unwrap());
    let cmd = [&py, script, out, lib, "8", "0.05", "0.03", "0.02", "64", "sleep"];
    for detail in ["full", "summary"] {
        let run = record(
            dir,
            &format!("forked-{detail}.bin"),
            &["--detail", detail],
            &cmd,
            Some(("MLTRACE_CUDA_LIB", &cuda)),
        );
        check(&run, dir, &format!("forked loader, {detail} detail"));
    }
}
