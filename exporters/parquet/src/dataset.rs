//! Several hosts' logs as one dataset in Hive layout:
//! `dir/<table>/host=<name>/part-0.parquet`, the name from each log's
//! header. Every host gets every table with the same columns, so DuckDB,
//! pyarrow, Polars or Spark read `dir/<table>` as one table with a `host`
//! column.
//!
//! Each log is converted by its own reader on its own thread, at most
//! [`std::thread::available_parallelism`] at a time. One log's export holds
//! one row group per table, so memory is at most that many times one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use mltrace_log::LogReader;

use crate::layout::bad_host_name;
use crate::{export_log_to, Error, Layout, Options, TableStats};

/// One host's partition, written.
#[derive(Clone, Debug)]
pub struct HostTables {
    pub log: PathBuf,
    pub host: String,
    /// Syscall records in the log: each is a row of `syscalls`, `net_calls`
    /// or a call kind's own table.
    pub syscalls: u64,
    /// Damage found in the log, described.
    pub diagnostics: Vec<String>,
    pub tables: Vec<TableStats>,
}

/// The host of each log, in order, from their headers alone. Refuses a
/// log that cannot be read, one that is not of one host (a merged log),
/// a host name that cannot name a directory, and two logs of one host.
pub fn hosts(logs: &[PathBuf]) -> Result<Vec<String>, Error> {
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(logs.len());
    let mut hosts = Vec::with_capacity(logs.len());
    for (i, log) in logs.iter().enumerate() {
        let reader = LogReader::open(log)?;
        let h = reader.header();
        if h.is_merged() {
            let files = h.hosts.iter().map(|x| x.file.clone()).filter(|f| !f.is_empty()).collect();
            return Err(Error::Merged { path: log.clone(), hosts: h.host_names(), files });
        }
        if let Some(why) = bad_host_name(&h.host) {
            return Err(Error::BadHost { path: log.clone(), host: h.host.clone(), why });
        }
        if let Some(&j) = seen.get(&h.host) {
            return Err(Error::SameHost { host: h.host.clone(), first: logs[j].clone(), second: log.clone() });
        }
        seen.insert(h.host.clone(), i);
        hosts.push(h.host.clone());
    }
    Ok(hosts)
}

/// Writes each log's tables as its host's partition of the dataset in
/// `dir` (partitions of other hosts already there are kept; a host's own
/// are replaced). `done` is called, on the converting thread, as each host
/// is written. On an error no further host is started, and the error of
/// the first log (in the order given) that failed is returned.
pub fn export(
    logs: &[PathBuf],
    dir: &Path,
    opts: &Options,
    done: &(dyn Fn(&HostTables) + Sync),
) -> Result<Vec<HostTables>, Error> {
    let hosts = hosts(logs)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(logs.len());
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let mut out: Vec<Option<Result<HostTables, Error>>> = (0..logs.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    while !failed.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let (Some(log), Some(host)) = (logs.get(i), hosts.get(i)) else { break };
                        let r = one(log, host, dir, opts);
                        match &r {
                            Ok(t) => done(t),
                            Err(_) => failed.store(true, Ordering::Relaxed),
                        }
                        mine.push((i, r));
                    }
                    mine
                })
            })
            .collect();
        for w in workers {
            for (i, r) in w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
                out[i] = Some(r);
            }
        }
    });
    // Logs never started (after a failure) are None.
    out.into_iter().flatten().collect()
}

/// One host's partition, read by its own reader.
fn one(log: &Path, host: &str, dir: &Path, opts: &Options) -> Result<HostTables, Error> {
    let at = Layout::Hive { dir: dir.to_path_buf(), host: host.to_string() };
    let mut reader = LogReader::open(log)?;
    let (survey, tables) = export_log_to(&mut reader, &at, opts).map_err(|e| match e {
        Error::Log(_) => e,
        e => Error::Host { path: log.to_path_buf(), source: Box::new(e) },
    })?;
    Ok(HostTables {
        log: log.to_path_buf(),
        host: host.to_string(),
        syscalls: survey.syscalls,
        diagnostics: survey.diagnostics,
        tables,
    })
}
