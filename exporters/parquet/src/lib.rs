//! Parquet export: an mltrace log as one Parquet table per kind of record,
//! for pandas, polars, DuckDB or Spark.
//!
//! The log is read twice: the survey ([`Survey::of`], as for every other
//! view of a run) names the processes (the same names and roles the
//! Perfetto export shows, e.g. `DataLoader worker 2`) and finds the
//! epochs; the second pass writes each record as a row of its table. Each table is written in row groups of
//! [`Options::row_group`] rows, so memory holds one row group per table
//! whatever the size of the log. The schemas are in [`schema`] and in
//! docs/parquet.md; every timestamp is int64 nanoseconds on the log's clock
//! (CLOCK_BOOTTIME for a recording, Unix time for an import), beside a
//! `wall` column (UTC) when the log's header relates that clock to
//! wall-clock time.
//!
//! A log's tables go into one directory ([`Layout::Flat`]), or, for a job
//! of several hosts, each host's log becomes its partition of one dataset
//! in Hive layout ([`dataset`], [`Layout::Hive`]).

pub mod dataset;
mod layout;
pub mod schema;
mod table;
mod write;

use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

use mltrace_log::{LogError, LogReader};
use mltrace_model::Survey;

pub use layout::{Layout, PARTITION};
pub use write::export;

/// What went wrong writing the tables.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("creating {0}: {1}")]
    Create(PathBuf, std::io::Error),
    /// Names the log itself.
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("writing Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("building a record batch: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// A row did not fill its table's columns in order (a bug).
    #[error("internal error: table {0}, column {1} out of order; please report this")]
    Schema(&'static str, usize),
    /// A kind's declaration names a table written by hand that has no
    /// arm for it (a bug: its records would be lost).
    #[error("internal error: {0} records name table {1}, which has no row for them; please report this")]
    NoRow(&'static str, &'static str),
    /// A dataset's log that holds several hosts: its pids would be the
    /// merged log's, and one partition would hold them all.
    #[error(
        "{}: a merged log of {} hosts ({}); pass each host's own log instead{}",
        path.display(), hosts.len(), hosts.join(", "), merged_from(files)
    )]
    Merged { path: PathBuf, hosts: Vec<String>, files: Vec<String> },
    #[error("{} and {} are both of host {host}: a dataset has one log per host", first.display(), second.display())]
    SameHost { host: String, first: PathBuf, second: PathBuf },
    #[error("{}: its host name {host:?} cannot name a partition directory ({why})", path.display())]
    BadHost { path: PathBuf, host: String, why: &'static str },
    /// Writing one host's partition failed (a log error names its log already).
    #[error("{}: {source}", path.display())]
    Host { path: PathBuf, source: Box<Error> },
}

/// ` (it was merged from a.bin b.bin)`, when its header names them.
fn merged_from(files: &[String]) -> String {
    if files.is_empty() {
        String::new()
    } else {
        format!(" (it was merged from {})", files.join(" "))
    }
}

/// How to write the tables.
#[derive(Clone, Debug)]
pub struct Options {
    /// Rows per row group (and per in-memory batch) of each table.
    pub row_group: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { row_group: 65_536 }
    }
}

/// Rows written to one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableStats {
    pub name: &'static str,
    pub path: PathBuf,
    pub rows: u64,
}

/// Surveys the log, then writes every table into `dir` (created if
/// missing; tables of an earlier export there are replaced).
pub fn export_log<R: Read + Seek>(
    reader: &mut LogReader<R>,
    dir: &Path,
    opts: &Options,
) -> Result<(Survey, Vec<TableStats>), Error> {
    export_log_to(reader, &Layout::Flat(dir.to_path_buf()), opts)
}

/// The same, with the files where `at` says.
pub fn export_log_to<R: Read + Seek>(
    reader: &mut LogReader<R>,
    at: &Layout,
    opts: &Options,
) -> Result<(Survey, Vec<TableStats>), Error> {
    let survey = Survey::of(reader)?;
    let tables = export(reader, &survey, at, opts)?;
    Ok((survey, tables))
}
