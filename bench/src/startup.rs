//! Section 5: start-up, from launching `mltrace record` until the
//! command's exec; and the samplers' own CPU.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use mltrace_log::*;

use super::{boottime, median, run_measured, secs, verdict};

pub fn startup(dir: &Path, mltrace: &Path) -> Result<String> {
    let mut table = String::new();
    // 5. Start-up: from launching mltrace until the command execs.
    let _ = writeln!(table, "\n== 5. Start-up (launch of mltrace record until the command's exec) ==");
    let mut startups = Vec::new();
    for _ in 0..5 {
        let log = dir.join("startup.bin");
        let t0 = boottime();
        run_measured(
            Command::new(mltrace).args(["record", "-q", "-f", "--gpu", "off", "-o"]).arg(&log).args(["--", "true"]),
        )?;
        let mut r = LogReader::open(&log)?;
        let mut exec_ts = None;
        while let Some(mut f) = r.next_frame()? {
            while let Some(rec) = f.next_record() {
                if let Record::Exec(e) = rec {
                    exec_ts.get_or_insert(e.ts);
                }
            }
        }
        startups.push(exec_ts.context("no exec in the log")?.saturating_sub(t0));
    }
    let s = median(&mut startups);
    let _ = writeln!(table, "  median {} (target < 0.3 s: {})", secs(s), verdict(s < 300_000_000));
    // The samplers' own cost at the default 100 ms.
    let log = dir.join("out-a.bin");
    if let Ok(mut r) = LogReader::open(&log) {
        while r.next_frame()?.is_some() {}
        if let Some(t) = r.trailer() {
            let span = (t.end.boottime_ns - r.header().start.boottime_ns).max(1) as f64;
            let pct = t.sampler_cpu_ns as f64 / span * 100.0;
            let _ = writeln!(
                table,
                "  samplers' CPU at 100 ms: {pct:.2}% of one core (target < 1%: {})",
                verdict(pct < 1.0)
            );
        }
    }
    Ok(table)
}
