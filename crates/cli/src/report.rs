//! `mltrace report`: the log as one self-contained HTML page; with two
//! logs, both runs on one page and a section comparing them.

use std::path::{Path, PathBuf};

use anyhow::Context;

#[derive(clap::Args)]
pub struct Args {
    /// The log written by `mltrace record` or `mltrace import`; two logs (BEFORE AFTER): both runs on one page, compared as `mltrace diff` compares them
    #[arg(required = true, num_args = 1..=2, value_name = "LOG")]
    logs: Vec<PathBuf>,
    /// Output file (default: the log's name with .html; for two logs, BEFORE-vs-AFTER.html beside AFTER)
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Events per Perfetto file before export splits a run (as export's --budget)
    #[arg(long, value_name = "EVENTS", hide = true)]
    budget: Option<u64>,
}

/// One log's report, its reader's diagnostics said with its name.
fn gather(log: &Path, budget: u64) -> anyhow::Result<mltrace_report::Report> {
    let mut reader = crate::open_log(log)?;
    let name = log.display().to_string();
    let report = mltrace_report::Report::gather_with_budget(&mut reader, log, budget)
        .with_context(|| format!("reading {name}"))?;
    for d in &report.survey.diagnostics {
        eprintln!("mltrace: {name}: {d}");
    }
    Ok(report)
}

/// `before.bin`, `after.bin` -> `before-vs-after.html`, beside the after log.
fn pair_name(before: &Path, after: &Path) -> PathBuf {
    let stem = |p: &Path| p.file_stem().map_or_else(|| "run".into(), |s| s.to_string_lossy().into_owned());
    after.with_file_name(format!("{}-vs-{}.html", stem(before), stem(after)))
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let budget = a.budget.unwrap_or(mltrace_model::plan::PERFETTO_BUDGET);
    let (out, html) = match a.logs.as_slice() {
        [log] => {
            let report = gather(log, budget)?;
            let name = log.display().to_string();
            let html = report.html().with_context(|| format!("drawing the report of {name}"))?;
            (a.output.clone().unwrap_or_else(|| log.with_extension("html")), html)
        }
        [before, after] => {
            let (b, af) = (gather(before, budget)?, gather(after, budget)?);
            let html = mltrace_report::html_pair(&b, &af)
                .with_context(|| format!("drawing the report of {} and {}", before.display(), after.display()))?;
            (a.output.clone().unwrap_or_else(|| pair_name(before, after)), html)
        }
        _ => unreachable!("clap takes one or two logs"),
    };
    std::fs::write(&out, html).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("mltrace: wrote {} (open it in any browser; it needs no network)", out.display());
    Ok(0)
}
