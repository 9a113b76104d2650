//! `mltrace diff`: two runs side by side (the comparison is the stats
//! crate's, [`mltrace_stats::diff`]).

use std::path::{Path, PathBuf};

use anyhow::Context;
use mltrace_stats::diff::{Diff, RunFigures};
use mltrace_stats::Stats;

#[derive(clap::Args)]
pub struct Args {
    /// The log of the run before the change
    before: PathBuf,
    /// The log of the run after it
    after: PathBuf,
    /// How many files and directories to list (those whose reads changed most)
    #[arg(long, default_value_t = mltrace_stats::diff::TOP)]
    top: usize,
    /// The same as one JSON document (names in docs/diff.md)
    #[arg(long)]
    json: bool,
}

/// One run's figures; the log's stats are dropped once taken.
pub fn figures(log: &Path) -> anyhow::Result<RunFigures> {
    let name = log.display().to_string();
    let mut r = crate::open_log(log)?;
    let s = Stats::from_reader(&mut r).with_context(|| format!("reading {name}"))?;
    Ok(RunFigures::of(&s, &name))
}

/// Both runs' figures, read side by side (one thread each).
pub fn both(before: &Path, after: &Path) -> anyhow::Result<(RunFigures, RunFigures)> {
    std::thread::scope(|s| {
        let b = s.spawn(|| figures(before));
        let a = figures(after);
        let b = b.join().map_err(|_| anyhow::anyhow!("reading {} failed", before.display()))?;
        Ok((b?, a?))
    })
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let (before, after) = both(&a.before, &a.after)?;
    let d = Diff::new(before, after, a.top);
    if a.json {
        use std::io::Write;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        serde_json::to_writer_pretty(&mut out, &d.to_json())?;
        writeln!(out)?;
        out.flush()?;
    } else {
        print!("{}", d.render());
    }
    Ok(0)
}
