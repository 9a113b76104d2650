//! Section 4: export of a 10M-event log (made up), and of a recorded one.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Result};

use super::{cc, log_counts, median, rss_of, verdict};

/// Section 4: export of a 10M-event log, each mode in turn.
pub fn export_bench(dir: &Path, mltrace: &Path, baseline: Option<&Path>, reps: usize) -> Result<String> {
    use std::fmt::Write as _;
    let mut table = String::new();
    let _ = writeln!(table, "\n== 4. Export of a 10M-event log (no phases: parts are time windows) ==");
    let big_log = dir.join("export-10m.bin");
    if !big_log.exists() {
        synthetic_log(&big_log, 10_000_000)?;
    }
    // Each mode in turn, `reps` times; medians of time and RSS. The
    // overview alone is the survey pass plus its few counters; the parts
    // cost that plus one pass that writes every event.
    let out = dir.join("export-10m.perfetto-trace");
    let modes: [(&str, &[&str]); 4] = [
        ("overview only", &["--overview"]),
        ("overview + parts", &[]),
        ("one file (--no-split)", &["--no-split"]),
        ("one file, uncompressed", &["--no-split", "--uncompressed"]),
    ];
    let mut runs: Vec<(Vec<u64>, Vec<u64>, u64)> = vec![(Vec::new(), Vec::new(), 0); modes.len()];
    for _ in 0..reps.max(1) {
        for (m, (_, extra)) in modes.iter().enumerate() {
            // Each mode's own files only: the previous mode's parts go.
            for e in fs::read_dir(dir)?.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("export-10m.") && e.path() != big_log {
                    fs::remove_file(e.path())?;
                }
            }
            let t0 = Instant::now();
            let (_, rss) = rss_of(Command::new(mltrace).arg("export").args(*extra).arg(&big_log).arg("-o").arg(&out))?;
            runs[m].0.push(t0.elapsed().as_nanos() as u64);
            runs[m].1.push(rss);
            // The output and its parts beside it.
            runs[m].2 = fs::read_dir(dir)?
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("export-10m.") && e.path() != big_log)
                .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
                .sum();
        }
    }
    let med: Vec<(f64, u64, u64)> =
        runs.iter_mut().map(|(t, r, size)| (median(t) as f64 / 1e9, median(r), *size)).collect();
    for ((what, _), (dt, rss, size)) in modes.iter().zip(&med) {
        let _ = writeln!(
            table,
            "  {what:<24} {dt:.2} s, peak RSS {:.1} MiB (target < 256 MiB: {}), {:.0} MB written",
            *rss as f64 / 1024.0,
            verdict(*rss < 256 * 1024),
            *size as f64 / 1e6
        );
    }
    let (t_ov, t_parts) = (med[0].0, med[1].0);
    let pass = (t_parts - t_ov).max(1e-9);
    let _ = writeln!(
        table,
        "  parts pass: {pass:.2} s, {:.2}M events/s (target >= 2M/s: {}); the overview adds {t_ov:.2} s, \
         {:.2} of a parts pass (target <= 1: {})",
        10.0 / pass,
        verdict(10.0 / pass >= 2.0),
        t_ov / pass,
        verdict(t_ov <= pass)
    );
    let _ = writeln!(table, "  (median of {} runs each, in turn)", reps.max(1));
    table.push_str(&recorded_export(dir, mltrace, reps)?);
    if let Some(b) = baseline {
        table.push_str(&against_baseline(dir, mltrace, b, reps)?);
    }
    Ok(table)
}

/// Section 4, on a recorded log: a made-up log is cheaper to survey than
/// a recording (its calls, processes and scheduling are few and regular),
/// and `stats`' per-record cost once hid there: 4 epochs of 1M preads of
/// `tests/workloads/epochs.c` (with MLLOG phases, so parts are epochs),
/// recorded here, then `stats`, the overview and overview + parts timed.
fn recorded_export(dir: &Path, mltrace: &Path, reps: usize) -> Result<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let (exe, data, log) = (dir.join("epochs"), dir.join("epochs-data.bin"), dir.join("export-rec.bin"));
    if !log.exists() {
        cc(&root.join("tests/workloads/epochs.c"), &exe)?;
        fs::write(&data, vec![0u8; 1 << 20])?;
        let st = Command::new(mltrace)
            .args(["record", "-q", "-f", "--gpu", "off", "-o"])
            .arg(&log)
            .arg("--")
            .arg(&exe)
            .arg(&data)
            .args(["4", "1000000"])
            .stdout(Stdio::null())
            .status()?;
        if !st.success() {
            bail!("recording tests/workloads/epochs.c for the export bench");
        }
    }
    let (records, _, _) = log_counts(&log)?;
    let out = dir.join("export-rec.perfetto-trace");
    let runs: [(&str, &[&str]); 3] =
        [("stats", &["stats"]), ("overview only", &["export", "--overview"]), ("overview + parts", &["export"])];
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); runs.len()];
    for _ in 0..reps.max(1) {
        for (i, (_, args)) in runs.iter().enumerate() {
            let mut cmd = Command::new(mltrace);
            cmd.args(*args).arg(&log).stdout(Stdio::null()).stderr(Stdio::null());
            if args[0] == "export" {
                // The budget that makes parts of a log this size.
                cmd.args(["--budget", "1000000", "-o"]).arg(&out);
            }
            let t0 = Instant::now();
            if !cmd.status()?.success() {
                bail!("mltrace {} on {}", args.join(" "), log.display());
            }
            times[i].push(t0.elapsed().as_nanos() as u64);
        }
    }
    let t: Vec<f64> = times.iter_mut().map(|v| median(v) as f64 / 1e9).collect();
    let pass = (t[2] - t[1]).max(1e-9);
    let m = records as f64 / 1e6;
    Ok(format!(
        "  a recorded log ({m:.1}M records, tests/workloads/epochs.c): stats {:.2} s ({:.1}M records/s), \
         overview {:.2} s, overview + parts {:.2} s: the overview is {:.2} of a parts pass (target <= 1: {})\n",
        t[0],
        m / t[0],
        t[1],
        t[2],
        t[1] / pass,
        verdict(t[1] <= pass)
    ))
}

/// Section 4 with BENCH_BASELINE: each reader of the recorded log (and
/// the 10M-event one's overview + parts) by this build and by the
/// baseline build, in turn, `reps` rounds: whether a change made reading
/// slower. (A baseline older than the log skips record kinds it does not
/// know, so it reads a little less.)
fn against_baseline(dir: &Path, mltrace: &Path, baseline: &Path, reps: usize) -> Result<String> {
    let (rec, big) = (dir.join("export-rec.bin"), dir.join("export-10m.bin"));
    let (trace, parquet) = (dir.join("export-cmp.perfetto-trace"), dir.join("export-cmp.parquet"));
    let runs: [(&str, &Path, Vec<&std::ffi::OsStr>); 5] = [
        ("stats", &rec, vec!["stats".as_ref()]),
        ("overview", &rec, vec!["export".as_ref(), "--overview".as_ref(), "-o".as_ref(), trace.as_os_str()]),
        // The budget that makes parts of a log this size (as above).
        (
            "overview + parts",
            &rec,
            vec!["export".as_ref(), "--budget".as_ref(), "1000000".as_ref(), "-o".as_ref(), trace.as_os_str()],
        ),
        ("parquet", &rec, vec!["export".as_ref(), "--parquet".as_ref(), "-o".as_ref(), parquet.as_os_str()]),
        ("10M overview + parts", &big, vec!["export".as_ref(), "-o".as_ref(), trace.as_os_str()]),
    ];
    // [run][build]: this build's times, the baseline's.
    let mut times = vec![[Vec::new(), Vec::new()]; runs.len()];
    for _ in 0..reps.max(1) {
        for (i, (what, log, args)) in runs.iter().enumerate() {
            for (b, bin) in [mltrace, baseline].into_iter().enumerate() {
                let t0 = Instant::now();
                let st = Command::new(bin).args(args).arg(log).stdout(Stdio::null()).stderr(Stdio::null()).status()?;
                if !st.success() {
                    bail!("{} {what} on {}", bin.display(), log.display());
                }
                times[i][b].push(t0.elapsed().as_nanos() as u64);
            }
        }
    }
    let mut out = String::from("  this build against the baseline (BENCH_BASELINE), medians, in turn:");
    for ((what, _, _), [this, base]) in runs.iter().zip(&mut times) {
        let (t, b) = (median(this) as f64 / 1e9, median(base) as f64 / 1e9);
        out.push_str(&format!(" {what} {t:.2} s vs {b:.2} s ({:+.1}%);", 100.0 * (t / b - 1.0)));
    }
    out.pop();
    out.push('\n');
    Ok(out)
}

/// The export benchmark's input (`mltrace_testlog::synthetic::flat`).
pub fn synthetic_log(path: &Path, n: u64) -> Result<()> {
    mltrace_testlog::synthetic::flat(std::io::BufWriter::new(fs::File::create(path)?), n)?;
    Ok(())
}
