//! `mltrace import`: old traces (bpftrace, mpstat, nvidia-smi, MLPerf logs)
//! into one mltrace log.

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use mltrace_import::{clock, ClockSpec, Format, Options, Plan, RankMode};

#[derive(clap::Args)]
pub struct Args {
    /// Trace files: the DL I/O study's bpftrace outputs (trace_bio, trace_openat, trace_read, trace_write,
    /// trace_vfs_rw, trace_close, trace_create_del, trace_mmap, trace_time_align), mpstat, nvidia-smi pmon
    /// or dmon output, dcgmi dmon output, MLPerf logs (MLLOG); or directories of them, such as a trace_visuals experiment
    /// directory (read_data/, bio_data/, cpu_data/, mllog_data/timeline.csv, pids.json ...)
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The log to write
    #[arg(short, long)]
    output: PathBuf,
    /// Replace the output file if it exists
    #[arg(long)]
    force: bool,
    /// Read every file as this format instead of recognising it: mllog, mpstat, pmon, dmon, dcgmi, time-align, bio,
    /// openat, read, write, vfs-rw, close, create-del, mmap, and trace_visuals' vis-read, vis-write, vis-open,
    /// vis-bio, timeline, cpu-csv, gpu-csv, vis-st-end, vis-comb, pids
    #[arg(long)]
    format: Option<String>,
    /// Time zone of the local times in the files (IANA name, e.g. America/Toronto) [default: this machine's]
    #[arg(long)]
    tz: Option<String>,
    /// Day (YYYY-MM-DD) of the first line, for files that print only a time of day and have no dated file
    /// beside them
    #[arg(long)]
    date: Option<String>,
    /// bpftrace clock: nanoseconds to add to bpftrace's nsecs to get Unix time
    #[arg(long, allow_hyphen_values = true, conflicts_with = "clock_ref")]
    clock_offset: Option<i64>,
    /// bpftrace clock: an nsecs value and the wall-clock time it was, as NSECS=YYYY-MM-DD HH:MM:SS[.f] (local,
    /// in --tz) or NSECS=RFC3339
    #[arg(long)]
    clock_ref: Option<String>,
    /// Add this to the ISO times of trace_visuals' processed files (read_PID, timeline.csv, cpu_all.csv
    /// ...), e.g. -1h: they are local time + 5 h; by default measured from cpu.all beside cpu_all.csv, else
    /// taken from --tz
    #[arg(long, allow_hyphen_values = true)]
    shift: Option<String>,
    /// Events several ranks logged alike: merge them (one event, rank -1) or keep one per rank
    #[arg(long, default_value = "merge", value_parser = ["merge", "keep"])]
    ranks: String,
    /// How many malformed lines to show per file (all are counted)
    #[arg(long, default_value_t = 20)]
    max_reports: usize,
    /// dcgmi dmon output without times: when its first sample was, as YYYY-MM-DD HH:MM:SS[.f] (local, in
    /// --tz)
    #[arg(long)]
    dcgmi_start: Option<String>,
    /// dcgmi dmon output without times: its sampling interval in ms (dcgmi's -d)
    #[arg(long, default_value_t = 1000)]
    dcgmi_interval: u64,
}

fn options(a: &Args) -> anyhow::Result<Options> {
    let format = a.format.as_deref().map(str::parse::<Format>).transpose().map_err(anyhow::Error::msg)?;
    let date = match &a.date {
        Some(d) => Some(clock::parse_iso_date(d).with_context(|| format!("--date {d}: expected YYYY-MM-DD"))?),
        None => None,
    };
    let clock = match (&a.clock_offset, &a.clock_ref) {
        (Some(o), _) => Some(ClockSpec::Offset(*o)),
        (None, Some(r)) => Some(ClockSpec::parse_reference(r).map_err(|e| anyhow::anyhow!("--clock-ref {r}: {e}"))?),
        (None, None) => None,
    };
    let shift = match &a.shift {
        Some(s) => Some(parse_shift(s).with_context(|| format!("--shift {s}: expected e.g. -1h, +30m, -3600s"))?),
        None => None,
    };
    let dcgmi_start = match &a.dcgmi_start {
        Some(s) => Some(
            s.trim()
                .split_once([' ', 'T'])
                .and_then(|(d, t)| Some(clock::parse_iso_date(d)?.and_time(clock::parse_tod(t, None)?)))
                .with_context(|| format!("--dcgmi-start {s}: expected YYYY-MM-DD HH:MM:SS[.f]"))?,
        ),
        None => None,
    };
    Ok(Options {
        dcgmi_start,
        dcgmi_interval_ms: a.dcgmi_interval,
        shift,
        format,
        tz: a.tz.clone(),
        date,
        clock,
        ranks: if a.ranks == "keep" { RankMode::PerRank } else { RankMode::Merge },
        max_examples: a.max_reports,
    })
}

/// `-1h`, `+30m`, `90s`, `-3600` (seconds) as nanoseconds.
fn parse_shift(s: &str) -> Option<i64> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let secs = match unit {
        "h" => 3600.0,
        "m" | "min" => 60.0,
        "s" => 1.0,
        _ => return None,
    };
    let v: f64 = num.trim().trim_start_matches('+').parse().ok()?;
    v.is_finite().then(|| (v * secs * 1e9).round() as i64)
}

/// The output's temporary name, beside it so the final rename is atomic.
pub(crate) fn temp_path(out: &Path) -> PathBuf {
    let mut name = out.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| "import".into());
    name.push(format!(".tmp{}", std::process::id()));
    out.with_file_name(name)
}

fn span(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    match s {
        0..=59 => format!("{:.1} s", ns as f64 / 1e9),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    if a.output.exists() && !a.force {
        bail!("{} exists (--force replaces it)", a.output.display());
    }
    let opts = options(&a)?;
    let plan = Plan::new(&a.files, &opts)?;
    for f in plan.files() {
        match &f.skip {
            None => eprintln!("mltrace: {}: {}", f.path.display(), f.description),
            Some(why) => eprintln!("mltrace: {}: {}; skipped: {why}", f.path.display(), f.description),
        }
    }
    for (p, why) in plan.unrecognised() {
        eprintln!("mltrace: {}: skipped: {why}", p.display());
    }
    for n in plan.notes() {
        eprintln!("mltrace: {n}");
    }
    let tmp = temp_path(&a.output);
    let file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let summary = match plan.run(BufWriter::with_capacity(1 << 20, file)) {
        Ok(s) => s,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e.into());
        }
    };
    let mut malformed = 0;
    for r in &summary.files {
        malformed += r.malformed;
        let mut line = format!("mltrace: {}: {} lines, {} records", r.path.display(), r.lines, r.records);
        if r.skipped > 0 {
            line.push_str(&format!(", {} skipped (headers, summaries, other output)", r.skipped));
        }
        if r.malformed > 0 {
            line.push_str(&format!(", {} malformed", r.malformed));
        }
        if r.lost > 0 {
            line.push_str(&format!(", {} events lost by the tracer", r.lost));
        }
        eprintln!("{line}");
        for (no, why) in &r.examples {
            eprintln!("    line {no}: {why}");
        }
        if r.malformed > r.examples.len() as u64 {
            eprintln!("    ... and {} more malformed lines", r.malformed - r.examples.len() as u64);
        }
        for (what, n) in &r.repaired {
            eprintln!("    repaired {n} {what}");
        }
        for n in &r.notes {
            eprintln!("    {n}");
        }
    }
    if summary.records == 0 {
        let _ = fs::remove_file(&tmp);
        bail!("no records in {} file(s): nothing written", summary.files.len());
    }
    fs::rename(&tmp, &a.output).with_context(|| format!("renaming {} to {}", tmp.display(), a.output.display()))?;
    let (first, last) = (summary.first_ts.unwrap_or(0), summary.last_ts.unwrap_or(0));
    let when = if summary.clock == "realtime" {
        let tz = match opts.tz.as_deref() {
            Some(z) => clock::parse_tz(z).ok(),
            None => clock::local_tz().map(|(tz, _)| tz),
        };
        format!("from {}, ", clock::describe(first as i64, tz))
    } else {
        String::new()
    };
    eprintln!(
        "mltrace: wrote {}: {} records, {when}{} long{}",
        a.output.display(),
        summary.records,
        span(last.saturating_sub(first)),
        if malformed > 0 { format!("; {malformed} malformed lines skipped (see above)") } else { String::new() }
    );
    eprintln!("mltrace: next: mltrace export {}", a.output.display());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::parse_shift;

    #[test]
    fn shifts() {
        const H: i64 = 3_600_000_000_000;
        assert_eq!(parse_shift("-1h"), Some(-H));
        assert_eq!(parse_shift("+30m"), Some(H / 2));
        assert_eq!(parse_shift("-3600"), Some(-H));
        assert_eq!(parse_shift("1.5h"), Some(3 * H / 2));
        assert_eq!(parse_shift("1d"), None);
    }
}
