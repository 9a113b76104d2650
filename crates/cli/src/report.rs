//! `mltrace report`: the log as one self-contained HTML page.

use std::path::PathBuf;

use anyhow::Context;

#[derive(clap::Args)]
pub struct Args {
    /// The log written by `mltrace record` or `mltrace import`
    log: PathBuf,
    /// Output file (default: the log's name with .html)
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Events per Perfetto file before export splits a run (as export's --budget)
    #[arg(long, value_name = "EVENTS", hide = true)]
    budget: Option<u64>,
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let out = a.output.clone().unwrap_or_else(|| a.log.with_extension("html"));
    let mut reader = crate::open_log(&a.log)?;
    let name = a.log.display().to_string();
    let budget = a.budget.unwrap_or(mltrace_model::plan::PERFETTO_BUDGET);
    let report = mltrace_report::Report::gather_with_budget(&mut reader, &a.log, budget)
        .with_context(|| format!("reading {name}"))?;
    for d in &report.survey.diagnostics {
        eprintln!("mltrace: {name}: {d}");
    }
    let html = report.html().with_context(|| format!("drawing the report of {name}"))?;
    std::fs::write(&out, html).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("mltrace: wrote {} (open it in any browser; it needs no network)", out.display());
    Ok(0)
}
