//! Section 6b: the long run's workload under `record --detail summary`,
//! and the paced preads; the log's growth and its records by kind.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Result};
use mltrace_log::*;

use super::long::long_run;
use super::{first_number, log_counts, verdict};

/// Section 6b: the long run's workload under `record --detail summary`,
/// with scheduling and without (`BENCH_SUMMARY_SECS` each, 120 by
/// default, 0 skips them), and where the log's bytes go by record kind.
pub fn long_summary_runs(dir: &Path, mltrace: &Path) -> Result<String> {
    let secs: u64 = std::env::var("BENCH_SUMMARY_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(120);
    if secs == 0 {
        return Ok(String::new());
    }
    let mut t = format!(
        "\n== 6b. The long run's workload under record --detail summary --slow 1ms, {secs} s each: \
         log growth (target < 50 MB/h at 100k calls/s) ==\n"
    );
    t.push_str(&long_run(dir, mltrace, secs, &["--detail", "summary", "--slow", "1ms"])?);
    t.push_str(&long_run(dir, mltrace, secs, &["--detail", "summary", "--slow", "1ms", "--sched", "off"])?);
    // The long run opens a new file every 16 calls, and each file's sums
    // are a record a second: the same rate of reads on files kept open.
    t.push_str(&format!("  100k 1-byte preads/s from 4 threads on one cached file (paced), {secs} s:\n"));
    for extra in [&[][..], &["--sched", "off"][..]] {
        t.push_str(&summary_paced(dir, mltrace, secs, extra)?);
    }
    Ok(t)
}

/// A line of section 6b for the paced preads (`bench/workloads/paced.c`).
fn summary_paced(dir: &Path, mltrace: &Path, secs: u64, extra: &[&str]) -> Result<String> {
    let log = dir.join("paced-summary.bin");
    let t0 = Instant::now();
    let out = Command::new(mltrace)
        .args(["record", "-q", "-f", "--gpu", "off", "--detail", "summary", "--slow", "1ms"])
        .args(extra)
        .arg("-o")
        .arg(&log)
        .arg("--")
        .arg(dir.join("paced"))
        .arg(dir.join("cached.bin"))
        .args(["100000", &secs.to_string(), "4"])
        .output()?;
    if !out.status.success() {
        bail!("paced under summary: {}", String::from_utf8_lossy(&out.stderr));
    }
    let duration = t0.elapsed().as_secs_f64();
    let achieved = first_number(&String::from_utf8_lossy(&out.stdout))?;
    let (records, lost, _) = log_counts(&log)?;
    let size = fs::metadata(&log)?.len();
    Ok(summary_growth(&log, extra, secs, duration, achieved, records, lost, size))
}

/// One line of section 6b: the log's growth, and its records by kind.
#[allow(clippy::too_many_arguments)]
pub fn summary_growth(
    log: &Path,
    extra: &[&str],
    secs: u64,
    duration: f64,
    achieved: u64,
    records: u64,
    lost: u64,
    size: u64,
) -> String {
    let mb_per_hour = size as f64 / duration * 3600.0 / 1e6;
    let label = if extra.contains(&"--sched") { "--sched off" } else { "scheduling recorded" };
    let kinds = kinds_of(log).unwrap_or_else(|e| format!("({e:#})"));
    format!(
        "  {label:<20} {achieved} syscalls/s, {records} records ({lost} lost), log {:.1} MB in {secs} s: \
         {mb_per_hour:.0} MB/h  {}\n      records by kind: {kinds}\n",
        size as f64 / 1e6,
        verdict(mb_per_hour < 50.0),
    )
}

/// A log's records counted by kind, the most first.
fn kinds_of(p: &Path) -> Result<String> {
    let mut r = LogReader::open(p)?;
    let mut n: std::collections::BTreeMap<&'static str, u64> = Default::default();
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            *n.entry(rec.kind_name()).or_default() += 1;
        }
    }
    let mut v: Vec<_> = n.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    Ok(v.iter().map(|(k, c)| format!("{k} {c}")).collect::<Vec<_>>().join(", "))
}
