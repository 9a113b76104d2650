//! The `mltrace` command line.

mod dump;
mod export;
mod record;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "mltrace", version, about = "I/O and utilisation tracer for machine-learning jobs")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a command and record its file I/O (needs root or CAP_BPF + CAP_PERFMON)
    Record(record::Args),
    /// Convert a log to a Perfetto trace
    Export(export::Args),
    /// Summarise a log: per-process I/O, latencies, top files, losses
    Stats {
        log: PathBuf,
        /// How many files to list
        #[arg(long, default_value_t = 10)]
        top: usize,
    },
    /// Check what this machine can trace, and which probes record will use
    Doctor,
    /// Print a log's records as text, one per line (for debugging)
    Dump { log: PathBuf },
}

fn stats(log: &std::path::Path, top: usize) -> anyhow::Result<i32> {
    let mut r = mltrace_log::LogReader::open(log)?;
    let s = mltrace_stats::Stats::from_reader(&mut r)?;
    print!("{}", s.render(top));
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
    let cli = Cli::parse();
    // libbpf's own log is for debugging; our errors say what failed.
    if std::env::var_os("MLTRACE_DEBUG").is_none() {
        libbpf_rs::set_print(None);
    }
    let r = match cli.cmd {
        Cmd::Record(a) => record::run(a),
        Cmd::Export(a) => export::run(a),
        Cmd::Stats { log, top } => stats(&log, top),
        Cmd::Doctor => doctor(),
        Cmd::Dump { log } => dump::run(&log).map(|_| 0),
    };
    match r {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("mltrace: {e:#}");
            ExitCode::from(e.downcast_ref::<mltrace_capture::CaptureError>().map_or(1, |c| c.exit_code()) as u8)
        }
    }
}
