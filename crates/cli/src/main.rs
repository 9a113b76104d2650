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
    /// Print a log's records as text, one per line (for debugging)
    Dump { log: PathBuf },
}

fn stats(log: &std::path::Path, top: usize) -> anyhow::Result<i32> {
    let mut r = mltrace_log::LogReader::open(log)?;
    let s = mltrace_stats::Stats::from_reader(&mut r)?;
    print!("{}", s.render(top));
    Ok(0)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Record(a) => record::run(a),
        Cmd::Export(a) => export::run(a),
        Cmd::Stats { log, top } => stats(&log, top),
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
