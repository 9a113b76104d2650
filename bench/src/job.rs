//! (job) A 64 x 8 job: merge, stats, report and export of a whole job's
//! logs, their time and peak memory, at 16, 32 and 64 hosts so that the
//! growth shows.
//!
//! One host is recorded for real: 8 ranks (`RANK` 0-7), each
//! step_trainer.py with 4 forked workers; and once more with rank 5's
//! workers slowed down. The job is those recordings copied under other
//! host names (`node00`...), the ranks renumbered as a launcher would
//! (`RANK` = 8 x host + local rank): the records are real, only their host
//! is made up. Host 37 is the slow copy, so the verdict must name rank
//! 8 x 37 + 5 = 301.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use mltrace_log::*;

use super::{rss_quiet, run_measured};

const RANKS: usize = 8;
const SLOW_HOST: usize = 37;
const SLOW_RANK: usize = 5;
/// Steps per rank: about 8 s of recording.
const STEPS: &str = "240";

/// Records one host's 8 ranks; `slow`: rank 5's workers sleep per batch.
fn record_host(dir: &Path, mltrace: &Path, data: &Path, slow: bool) -> Result<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = repo.join("tests/workloads/step_trainer.py");
    // The interpreter itself, not a shim (pyenv's runs a dozen shell
    // processes per start, which a cluster's Python does not).
    let py = run_measured(Command::new("python3").args(["-c", "import sys; print(sys.executable)"]))?;
    let mut sh = String::new();
    for r in 0..RANKS {
        let sleep = if slow && r == SLOW_RANK { 200 } else { 0 };
        let _ = writeln!(
            sh,
            "RANK={r} LOCAL_RANK={r} WORLD_SIZE=512 STEP_TRAINER_WORKER_SLEEP_MS={sleep} {} {} {} {STEPS} 20 sleep \
             > /dev/null &",
            py.trim(),
            script.display(),
            data.display()
        );
    }
    sh.push_str("wait\n");
    let log = dir.join(if slow { "job-host-slow.bin" } else { "job-host.bin" });
    run_measured(
        Command::new(mltrace)
            .args(["record", "-q", "-f", "--gpu", "off", "-o"])
            .arg(&log)
            .args(["--", "sh", "-c", &sh])
            .env("STEP_TRAINER_ROUNDS", "2"),
    )?;
    Ok(log)
}

/// `src` as host `name`'s log: its header says that host (and a boot of
/// its own), its ranks' `RANK` is `8 x host + local`.
fn copy_as(src: &Path, dst: &Path, host: usize) -> Result<u64> {
    let mut r = LogReader::open(src)?;
    let mut header = r.header().clone();
    header.host = format!("node{host:02}");
    header.boot_id = format!("{:032x}", host + 1);
    let out = std::io::BufWriter::new(fs::File::create(dst).with_context(|| format!("creating {}", dst.display()))?);
    let mut w = RecordWriter::new(out, &header)?;
    let mut n = 0;
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            let rank = match rec {
                Record::Env(e) if f.str(e.name) == b"RANK" => {
                    let local: usize = f.str_lossy(e.value).parse().context("RANK in the recording")?;
                    Some((RANKS * host + local).to_string())
                }
                _ => None,
            };
            w.push_with(|enc| {
                let mut rec = rec;
                rec.map_strs(|id| enc.intern(f.str(id)));
                if let (Record::Env(e), Some(v)) = (&mut rec, &rank) {
                    e.value = enc.intern(v.as_bytes());
                }
                rec
            })?;
            n += 1;
        }
    }
    let trailer = r.trailer().cloned().unwrap_or_default();
    w.finish(&trailer)?;
    Ok(n)
}

/// Seconds and peak RSS (MiB) of one command.
fn timed(cmd: &mut Command) -> Result<(f64, f64)> {
    let t = Instant::now();
    let kib = rss_quiet(cmd)?;
    Ok((t.elapsed().as_secs_f64(), kib as f64 / 1024.0))
}

pub fn job_bench(dir: &Path, mltrace: &Path) -> Result<String> {
    let dir = dir.join("job");
    fs::create_dir_all(&dir)?;
    let data = dir.join("data.bin");
    super::write_file(&data, 16 << 20, 5)?;
    eprintln!("bench: recording one host of 8 ranks, twice");
    let normal = record_host(&dir, mltrace, &data, false)?;
    let slow = record_host(&dir, mltrace, &data, true)?;
    let mut logs = Vec::new();
    let mut per_host = 0;
    for h in 0..64 {
        let p = dir.join(format!("node{h:02}.bin"));
        let n = copy_as(if h == SLOW_HOST { &slow } else { &normal }, &p, h)?;
        per_host = per_host.max(n);
        logs.push(p);
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\n== 9. A job of N hosts x 8 ranks (one real host's recording, about {per_host} records, copied per host) =="
    );
    let _ = writeln!(
        t,
        "{:<8}{:>12}{:>18}{:>18}{:>18}{:>18}{:>10}{:>22}",
        "hosts", "records", "merge", "stats --json", "report", "export", "files", "export --parquet"
    );
    let cell = |(s, m): (f64, f64)| format!("{s:.1} s {m:>5.0} MiB");
    let mut last = None;
    for hosts in [16, 32, 64] {
        eprintln!("bench: a job of {hosts} hosts");
        let job = dir.join(format!("job{hosts}.bin"));
        let merge = timed(Command::new(mltrace).args(["merge", "-f", "-o"]).arg(&job).args(&logs[..hosts]))?;
        let stats = timed(Command::new(mltrace).args(["stats", "--json"]).arg(&job))?;
        let html = dir.join(format!("job{hosts}.html"));
        let report = timed(Command::new(mltrace).arg("report").arg(&job).arg("-o").arg(&html))?;
        let out = dir.join(format!("job{hosts}"));
        let _ = fs::remove_dir_all(&out);
        fs::create_dir_all(&out)?;
        let trace = out.join("job.perfetto-trace");
        let export = timed(Command::new(mltrace).arg("export").arg(&job).arg("-o").arg(&trace))?;
        let files: Vec<PathBuf> = fs::read_dir(&out)?.flatten().map(|e| e.path()).collect();
        let records = super::log_counts(&job)?.0;
        // The hosts' own logs, unmerged, as one Hive dataset.
        let dataset = dir.join(format!("job{hosts}.parquet"));
        let _ = fs::remove_dir_all(&dataset);
        let parquet =
            timed(Command::new(mltrace).args(["export", "--parquet"]).args(&logs[..hosts]).arg("-o").arg(&dataset))?;
        let _ = writeln!(
            t,
            "{hosts:<8}{records:>12}{:>18}{:>18}{:>18}{:>18}{:>10}{:>22}",
            cell(merge),
            cell(stats),
            cell(report),
            cell(export),
            files.len(),
            cell(parquet)
        );
        last = Some((hosts, job, files, dataset));
    }
    let Some((hosts, job, files, dataset)) = last else { bail!("no job") };
    // The answer, and every file in Perfetto's importer when it is here.
    let json = run_measured(Command::new(mltrace).args(["stats", "--json"]).arg(&job))?;
    let want = format!("\"rank\": {}", RANKS * SLOW_HOST + SLOW_RANK);
    let named = json.find("\"straggler\"").map(|i| &json[i..]).and_then(|s| s.find(&want).map(|j| j < 400));
    let _ = writeln!(
        t,
        "  {hosts} hosts: verdict.straggler is rank {} (node{SLOW_HOST}): {}",
        RANKS * SLOW_HOST + SLOW_RANK,
        if named == Some(true) { "yes" } else { "NO" }
    );
    // Perfetto's importer (make test-tools fetches it), strict: any import
    // problem fails the file.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if repo.join("target/test-tools/perfetto/engine_bundle.js").exists() {
        let mut bad = Vec::new();
        for f in &files {
            let o = Command::new("node")
                .arg(repo.join("tests/tools/tp.js"))
                .arg("--strict")
                .arg(f)
                .arg("select 1")
                .output();
            if !o.is_ok_and(|o| o.status.success()) {
                bad.push(f.display().to_string());
            }
        }
        let all = if bad.is_empty() { "all".to_string() } else { format!("NOT {}", bad.join(", ")) };
        let _ = writeln!(t, "  {} exported files load in Perfetto's importer (--strict): {all}", files.len());
    } else {
        let _ = writeln!(t, "  Perfetto's importer not fetched (make test-tools): files not loaded");
    }
    let _ = writeln!(
        t,
        "  {hosts} hosts' Hive dataset in DuckDB, read calls and bytes per host = each log's stats: {}",
        dataset_check(mltrace, &logs[..hosts], &dataset)
    );
    Ok(t)
}

/// Reads per host in DuckDB against each host's `stats --json`.
fn dataset_check(mltrace: &Path, logs: &[PathBuf], dataset: &Path) -> String {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-tools/venv/bin/python");
    if !py.exists() {
        return "not checked (no DuckDB: make test-tools)".into();
    }
    let q = "import duckdb, json, sys\n\
             R = ('read', 'pread64', 'readv', 'preadv', 'preadv2', 'sendfile', 'copy_file_range')\n\
             rows = duckdb.sql(f\"SELECT host, count(*), coalesce(sum(bytes), 0) FROM read_parquet('{sys.argv[1]}/syscalls/*/*.parquet', \
             hive_partitioning = true) WHERE kind = 'syscall' AND syscall IN {R} GROUP BY host\").fetchall()\n\
             print(json.dumps({h: [int(n), int(b)] for h, n, b in rows}))";
    let got = match run_measured(Command::new(&py).arg("-c").arg(q).arg(dataset)) {
        Ok(o) => o,
        Err(e) => return format!("FAILED: {e:#}"),
    };
    let mut bad = Vec::new();
    for (h, log) in logs.iter().enumerate() {
        let name = format!("node{h:02}");
        let Ok(json) = run_measured(Command::new(mltrace).args(["stats", "--json"]).arg(log)) else {
            bad.push(format!("{name}: stats failed"));
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        let procs = v["processes"].as_array().cloned().unwrap_or_default();
        let sum = |k: &str| procs.iter().filter_map(|p| p[k].as_u64()).sum::<u64>();
        let want = serde_json::json!([sum("reads"), sum("read_bytes")]);
        let g: serde_json::Value = serde_json::from_str(&got).unwrap_or_default();
        if g[&name] != want {
            bad.push(format!("{name}: {} against {want}", g[&name]));
        }
    }
    if bad.is_empty() {
        "equal".into()
    } else {
        format!("NOT EQUAL: {}", bad.join("; "))
    }
}
