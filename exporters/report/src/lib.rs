//! `mltrace report`: a one-page HTML job summary of a log, to paste into a
//! lab report or an issue. Everything it shows is computed by the model
//! (the survey's per-interval aggregates, the export plan) and the stats
//! crate (tables, histograms, the verdict); this crate lays it out and
//! draws it with plotters into one self-contained file (inline SVG and
//! CSS, nothing fetched), readable in a browser's print view.
//!
//! The log is read twice, as by `mltrace export`: the survey, then the
//! stats with the top files' heat map. Memory follows the run's length,
//! processes and files, not its number of events.

mod charts;
mod page;

use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

use mltrace_log::{LogError, LogReader};
use mltrace_model::heat::FileHeat;
use mltrace_model::plan::{self, Plan, Split};
use mltrace_model::window::{self, WindowRequest};
use mltrace_model::Survey;
use mltrace_run::Want;
use mltrace_stats::diff::{Diff, RunFigures};
use mltrace_stats::Stats;

pub use charts::ChartError;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Chart(#[from] ChartError),
    #[error("{0}")]
    Window(#[from] window::WindowError),
}

/// Files in the time x file heat map.
pub const HEAT_FILES: usize = 12;

/// What the report shows, gathered from the log.
pub struct Report {
    pub survey: Survey,
    pub stats: Stats,
    pub heat: FileHeat,
    /// What `mltrace export` of the log makes, with its default output.
    pub plan: Plan,
    /// The log's path as the user gave it, and the trace export would write.
    pub log: PathBuf,
    pub trace: PathBuf,
}

/// `run.bin` -> `run.perfetto-trace`, as `mltrace export` names it.
pub fn default_trace(log: &Path) -> PathBuf {
    let mut name = log.file_stem().map(|s| s.to_os_string()).unwrap_or_else(|| "trace".into());
    name.push(".perfetto-trace");
    log.with_file_name(name)
}

impl Report {
    /// Reads the log (twice) at `log`.
    pub fn gather<R: Read + Seek>(reader: &mut LogReader<R>, log: &Path) -> Result<Report, ReportError> {
        Self::gather_with_budget(reader, log, plan::PERFETTO_BUDGET)
    }

    /// The same, planning the Perfetto files for `budget` events per file
    /// (what `mltrace export --budget` would use).
    pub fn gather_with_budget<R: Read + Seek>(
        reader: &mut LogReader<R>,
        log: &Path,
        budget: u64,
    ) -> Result<Report, ReportError> {
        let run = mltrace_run::read(reader, Want::Stats)?;
        let (survey, stats) = (run.survey, run.stats.unwrap_or_else(|| unreachable!("asked for")));
        // The files to chart are known once the survey is: a second pass.
        let mut heat = FileHeat::top(&survey, HEAT_FILES);
        let mut rec = mltrace_log::Record::Lost(Default::default());
        while let Some(mut frame) = reader.next_frame()? {
            while frame.next_into(&mut rec) {
                heat.add(&frame, &rec);
            }
        }
        reader.rewind();
        let win = window::resolve(&survey, &WindowRequest::default())?;
        let trace = default_trace(log);
        let plan = plan::plan(&survey, &win, &trace, ".perfetto-trace", Split::Auto, budget);
        Ok(Report { survey, stats, heat, plan, log: log.to_path_buf(), trace })
    }

    /// The whole page.
    pub fn html(&self) -> Result<String, ReportError> {
        Ok(page::render(self)?)
    }

    /// What `mltrace diff` compares of this run (from the stats the page shows).
    pub fn figures(&self) -> RunFigures {
        RunFigures::of(&self.stats, &self.log.display().to_string())
    }
}

/// Two runs on one page: a section comparing them (`mltrace diff`'s
/// figures, [`mltrace_stats::diff`]), then each run's report.
pub fn html_pair(before: &Report, after: &Report) -> Result<String, ReportError> {
    let diff = Diff::new(before.figures(), after.figures(), mltrace_stats::diff::TOP);
    Ok(page::render_pair(before, after, &diff)?)
}
