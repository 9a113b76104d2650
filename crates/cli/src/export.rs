//! `mltrace export`.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::Context;

#[derive(clap::Args)]
pub struct Args {
    /// Write a Perfetto protobuf trace (the default; open it at https://ui.perfetto.dev)
    #[arg(long, conflicts_with = "chrome")]
    perfetto: bool,
    /// Write Chrome trace-event JSON instead (chrome://tracing, Perfetto, other viewers)
    #[arg(long)]
    chrome: bool,
    /// The log written by `mltrace record` or `mltrace import`
    log: PathBuf,
    /// Output file (default: the log's name with .perfetto-trace)
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write plain Perfetto packets instead of deflate-compressed batches
    /// (for tools that read the protobuf themselves; Perfetto reads both)
    #[arg(long, conflicts_with = "chrome")]
    uncompressed: bool,
}

fn default_output(log: &Path, ext: &str) -> PathBuf {
    let stem = log.file_stem().map(|s| s.to_os_string()).unwrap_or_else(|| "trace".into());
    let mut name = stem;
    name.push(ext);
    log.with_file_name(name)
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let ext = if a.chrome { ".json" } else { ".perfetto-trace" };
    let out_path = a.output.unwrap_or_else(|| default_output(&a.log, ext));
    let mut reader = crate::open_log(&a.log)?;
    let file = File::create(&out_path).with_context(|| format!("creating {}", out_path.display()))?;
    let log_name = a.log.display().to_string();
    let mut diag = |d: String| eprintln!("mltrace: {log_name}: {d}");
    let out = BufWriter::with_capacity(1 << 20, file);
    if a.chrome {
        let (_, stats) = mltrace_chrome::export(&mut reader, out, &mut diag)
            .with_context(|| format!("writing {}", out_path.display()))?;
        eprintln!(
            "mltrace: {} records -> {} slices, {} counter samples in {} processes; {} written ({} bytes)",
            stats.records,
            stats.slices,
            stats.counters,
            stats.processes,
            out_path.display(),
            stats.bytes
        );
        if stats.lost_events > 0 {
            eprintln!(
                "mltrace: the recording lost {} events; see the \"mltrace: lost events\" track",
                stats.lost_events
            );
        }
        return Ok(0);
    }
    let opts = mltrace_perfetto::ExportOptions {
        compress: if a.uncompressed { None } else { mltrace_perfetto::ExportOptions::default().compress },
    };
    let (_, stats) = mltrace_perfetto::export_with(&mut reader, out, opts, &mut diag)
        .with_context(|| format!("writing {}", out_path.display()))?;
    eprintln!(
        "mltrace: {} records -> {} slices in {} processes; {} written ({} bytes{})",
        stats.records,
        stats.slices,
        stats.processes,
        out_path.display(),
        stats.bytes,
        if stats.bytes != stats.raw_bytes {
            format!(", {} before compression", stats.raw_bytes)
        } else {
            String::new()
        }
    );
    if stats.lost_events > 0 {
        eprintln!("mltrace: the recording lost {} events; see the \"mltrace: lost events\" track", stats.lost_events);
    }
    eprintln!("mltrace: open it at https://ui.perfetto.dev (Open trace file)");
    Ok(0)
}
