//! The `mltrace` command line.

mod completions;
mod diff;
mod dump;
mod export;
mod import;
mod man;
mod merge;
// Wired to `export --open` in a later change.
mod open;
mod record;
mod report;
mod template;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

// `--help` lists every output; `-h` keeps to one line.
pub(crate) const LONG_ABOUT: &str = "\
I/O and utilisation tracer for machine-learning jobs.

`mltrace record` runs a training job under eBPF and logs its file and block I/O,
scheduling, CPU, memory, disk, network and GPU counters, and training phases.
What a log becomes:
  mltrace export run.bin            Perfetto trace: run.perfetto-trace (a big
                                    run: an overview there and parts beside it)
  mltrace export --chrome run.bin   Chrome trace-event JSON: run.json
  mltrace export --parquet run.bin  Parquet tables, one per kind of record:
                                    run.parquet/
  mltrace export --parquet node*.bin -o job/
                                    one dataset of several hosts' logs:
                                    job/<table>/host=<name>/part-0.parquet
  mltrace report run.bin            one-page HTML report: run.html
  mltrace report before.bin after.bin
                                    both runs on one page, compared:
                                    before-vs-after.html
  mltrace stats run.bin             text tables and the data-wait verdict
  mltrace stats --json run.bin      the same as one JSON document
  mltrace diff before.bin after.bin two runs side by side, with the change
                                    and whether it is more than noise
  mltrace merge *.bin -o job.bin    one merged log of several hosts: job.bin

The manual is the docs/ directory of mltrace's source.";

#[derive(Parser)]
#[command(
    name = "mltrace",
    version,
    about = "I/O and utilisation tracer for machine-learning jobs",
    long_about = LONG_ABOUT
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a command, or attach to running processes (-p, -a), and record it into a log (needs root or CAP_BPF + CAP_PERFMON)
    Record(Box<record::Args>),
    /// Convert a log to a Perfetto trace (default), Chrome JSON (--chrome) or Parquet tables (--parquet)
    ///
    /// Perfetto: LOG.perfetto-trace, or for a run too big to open at once an
    /// overview there and parts beside it (--from, --to, --pid, --no-split and
    /// --overview choose). Chrome trace-event JSON: LOG.json. Parquet: a
    /// directory LOG.parquet/ with one table per kind of record (syscalls,
    /// block, counters, processes, phases, sched...; docs/parquet.md); several
    /// hosts' logs (or --hive) become one dataset partitioned by host,
    /// DIR/<table>/host=<name>/part-0.parquet. The HTML report is `mltrace
    /// report`; text and JSON summaries are `mltrace stats`.
    Export(export::Args),
    /// Write a one-page HTML report of a log (charts, top files, verdict; opens offline), or of two runs compared
    Report(report::Args),
    /// Convert old traces (bpftrace outputs, mpstat, nvidia-smi pmon/dmon, MLPerf logs) into a log
    Import(import::Args),
    /// Merge the logs of several hosts (one recorder per node) into one merged log
    Merge(merge::Args),
    /// Summarise a log as text (per-process I/O, latencies, top files, losses, data-wait verdict) or JSON (--json)
    Stats {
        /// The log written by `mltrace record`, `import` or `merge`
        log: PathBuf,
        /// How many files to list
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// The same as one JSON document (every file; names in docs/stats-json.md)
        #[arg(long)]
        json: bool,
        /// Also give the verdict over a window from here: seconds from the
        /// start (90, 1h30m), a UTC time (2026-11-22 21:04:10.5) or a phase
        /// ("EPOCH 12"); the tables stay the whole run's
        #[arg(long, value_name = "TIME")]
        from: Option<String>,
        /// The window's end (default: the run's end)
        #[arg(long, value_name = "TIME")]
        to: Option<String>,
    },
    /// Compare two runs: wall time, steps/s, the verdict's shares, the loaders' reads, the page cache, the files whose reads changed most (text, or JSON with --json)
    Diff(diff::Args),
    /// Check what this machine can trace, and which probes record will use
    Doctor,
    /// Print a log's records as text, one per line (for debugging)
    Dump { log: PathBuf },
    /// Print the shell completion script for bash, zsh or fish
    Completions {
        #[arg(value_enum)]
        shell: completions::Shell,
    },
    /// Print the man page (roff; `mltrace man | man -l -`)
    Man,
}

/// Opens a log, saying plainly when there is none.
pub fn open_log(log: &std::path::Path) -> anyhow::Result<mltrace_log::LogReader<std::io::BufReader<std::fs::File>>> {
    match mltrace_log::LogReader::open(log) {
        Err(mltrace_log::LogError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("{}: no such file", log.display())
        }
        r => Ok(r?),
    }
}

fn stats(
    log: &std::path::Path,
    top: usize,
    json: bool,
    from: Option<String>,
    to: Option<String>,
) -> anyhow::Result<i32> {
    let mut r = open_log(log)?;
    if from.is_some() || to.is_some() {
        return window_stats(&mut r, top, json, from, to);
    }
    let s = mltrace_stats::Stats::from_reader(&mut r)?;
    if json {
        use std::io::Write;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        s.write_json(&mut out)?;
        writeln!(out)?;
        out.flush()?;
    } else {
        print!("{}", s.render(top));
    }
    Ok(0)
}

/// `stats --from/--to`: the whole run's stats, and the verdict over the
/// window (computed as an epoch's, and as the live metrics' windows).
fn window_stats(
    r: &mut mltrace_log::LogReader<std::io::BufReader<std::fs::File>>,
    top: usize,
    json: bool,
    from: Option<String>,
    to: Option<String>,
) -> anyhow::Result<i32> {
    let run = mltrace_run::read(r, mltrace_run::Want::Stats)?;
    let s = run.stats.expect("asked for the stats");
    let req = mltrace_model::window::WindowRequest { from, to, pids: Vec::new() };
    let w = mltrace_model::window::resolve(&run.survey, &req)?;
    let (a, b) = (w.from, w.to);
    let v = s.window_verdict(a, b, "window".into());
    let ranks = s.ranks();
    let rank_waits: Vec<(usize, u32, Option<f64>)> =
        ranks.iter().map(|k| (k.rank, k.pid, s.window_data_wait(k.pid, a, b))).collect();
    let rel = |t: u64| t.saturating_sub(run.survey.start()) as f64 / 1e9;
    if json {
        let mut doc = s.to_json();
        let mut win = v.as_ref().map_or(serde_json::json!({"kind": "no-scheduling-data"}), |v| v.to_json());
        win["from_s"] = rel(a).into();
        win["to_s"] = rel(b).into();
        win["ranks"] = rank_waits
            .iter()
            .map(|(rank, pid, f)| serde_json::json!({"rank": rank, "pid": pid, "data_wait_fraction": f}))
            .collect();
        doc["window"] = win;
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(0);
    }
    print!("{}", s.render(top));
    let span = format!(
        "{} to {}",
        mltrace_model::window::describe(&run.survey, a),
        mltrace_model::window::describe(&run.survey, b)
    );
    match v.as_ref().and_then(|v| v.breakdown.map(|bd| (v, bd))) {
        Some((v, bd)) => {
            let shares: Vec<String> = bd
                .shares()
                .filter(|sh| (sh.of)(&bd) >= 0.005)
                .map(|sh| format!("{} {}", sh.name, mltrace_model::fmt::pct((sh.of)(&bd))))
                .collect();
            println!("\nWindow {span}: {}; {}", v.kind, shares.join(", "));
            for (rank, _, f) in rank_waits.iter().filter(|_| ranks.len() > 1) {
                if let Some(f) = f {
                    println!("  rank {rank}: data wait {}", mltrace_model::fmt::pct(*f));
                }
            }
        }
        None => println!("\nWindow {span}: no verdict (no scheduling records of the trainer in it)"),
    }
    Ok(0)
}

fn doctor() -> anyhow::Result<i32> {
    let checks = mltrace_capture::doctor::run();
    let w = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in &checks {
        println!("{:<w$}  {:<6}  {}", c.name, c.status.label(), c.detail);
    }
    let ready = mltrace_capture::doctor::ready(&checks);
    println!(
        "\n{}",
        if ready { "mltrace record can run here." } else { "mltrace record cannot run here: see FAIL above." }
    );
    Ok(if ready { 0 } else { 1 })
}

fn main() -> ExitCode {
    // Rust starts with SIGPIPE ignored, and an ignored signal survives exec:
    // the traced command must get the default (and `mltrace stats | head`
    // should end quietly, not panic).
    // SAFETY: setting a signal disposition before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    // libbpf's own log is for debugging; our errors say what failed.
    if std::env::var_os("MLTRACE_DEBUG").is_none() {
        libbpf_rs::set_print(None);
    }
    let r = match cli.cmd {
        Cmd::Record(a) => record::run(*a),
        Cmd::Export(a) => export::run(a),
        Cmd::Import(a) => import::run(a),
        Cmd::Report(a) => report::run(a),
        Cmd::Merge(a) => merge::run(a),
        Cmd::Stats { log, top, json, from, to } => stats(&log, top, json, from, to),
        Cmd::Diff(a) => diff::run(a),
        Cmd::Doctor => doctor(),
        Cmd::Dump { log } => dump::run(&log).map(|_| 0),
        Cmd::Completions { shell } => completions::run(shell),
        Cmd::Man => man::run(),
    };
    match r {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("mltrace: {e:#}");
            ExitCode::from(e.downcast_ref::<mltrace_capture::CaptureError>().map_or(1, |c| c.exit_code()) as u8)
        }
    }
}
