//! Helpers: importing fixtures in memory, reading the log back, exporting it
//! to Perfetto and asking Perfetto's own importer about it.

#![allow(dead_code)]

use std::io::Cursor;
use std::path::{Path, PathBuf};

use mltrace_import::{Options, Plan, Summary};

#[path = "../../../../tests/src/tools.rs"]
mod tools;
use mltrace_log::{Header, LogReader, Record, Trailer};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(p)
}

/// Every file of a fixture folder.
pub fn fixture_dir(d: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixture(d)).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

/// The shared sample traces (no licence: read in place, never copied),
/// optional: beside the repository, or at $MLTRACE_SAMPLES.
pub fn samples() -> Option<PathBuf> {
    let p = std::env::var_os("MLTRACE_SAMPLES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/samples/mlperf-traces"));
    if p.is_dir() {
        Some(p)
    } else {
        tools::skip_optional("checks on real traces", &format!("the sample traces are not at {}", p.display()));
        None
    }
}

/// A record with its strings.
#[derive(Clone, Debug)]
pub struct Rec {
    pub rec: Record,
    pub strs: Vec<String>,
}

pub struct Imported {
    pub summary: Summary,
    pub log: Vec<u8>,
    pub header: Header,
    pub trailer: Trailer,
    pub recs: Vec<Rec>,
}

impl Imported {
    pub fn report(&self, name: &str) -> &mltrace_import::FileReport {
        self.summary.files.iter().find(|r| r.path.ends_with(name)).unwrap_or_else(|| panic!("no report for {name}"))
    }

    pub fn of<T>(&self, f: impl Fn(&Rec) -> Option<T>) -> Vec<T> {
        self.recs.iter().filter_map(f).collect()
    }
}

pub fn import(files: &[PathBuf], opts: &Options) -> Imported {
    let plan = Plan::new(files, opts).unwrap_or_else(|e| panic!("planning {files:?}: {e}"));
    let mut log = Vec::new();
    let summary = plan.run(&mut log).unwrap_or_else(|e| panic!("importing {files:?}: {e}"));
    let (header, recs, trailer) = read_log(&log);
    assert_eq!(recs.len() as u64, summary.records);
    Imported { summary, log, header, trailer, recs }
}

pub fn read_log(log: &[u8]) -> (Header, Vec<Rec>, Trailer) {
    let mut r = LogReader::new(Path::new("import.bin"), Cursor::new(log)).unwrap();
    let header = r.header().clone();
    let mut out = Vec::new();
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(rec) = f.next_record() {
            let s = |id| f.str_lossy(id).into_owned();
            let strs = match rec {
                Record::Comm(x) => vec![s(x.comm)],
                Record::Open(x) => vec![s(x.path), s(x.abs_path)],
                Record::Io(x) => vec![s(x.path)],
                Record::Close(x) => vec![s(x.path)],
                Record::Block(x) => vec![s(x.comm), s(x.disk)],
                Record::Counter(x) => vec![s(x.group), s(x.name)],
                Record::Phase(x) => vec![s(x.name)],
                Record::Mark(x) => vec![s(x.name), s(x.value)],
                _ => vec![],
            };
            out.push(Rec { rec, strs });
        }
    }
    let d = r.take_diagnostics();
    assert!(d.is_empty(), "diagnostics: {d:?}");
    let trailer = r.trailer().cloned().expect("log has no trailer");
    (header, out, trailer)
}

/// The log as a Perfetto trace, exported in-process; panics on any problem
/// the reader reports.
pub fn export(log: &[u8]) -> Vec<u8> {
    let mut r = LogReader::new(Path::new("import.bin"), Cursor::new(log)).unwrap();
    let mut diags = Vec::new();
    let (out, stats) = mltrace_perfetto::export(&mut r, Vec::new(), &mut |d| diags.push(d)).unwrap();
    assert!(diags.is_empty(), "export diagnostics: {diags:?}");
    assert_eq!(stats.records as usize, read_log(log).1.len());
    out
}

#[allow(unused_imports)] // not every test binary asks Perfetto
pub use tools::perfetto_tp;

/// Runs SQL on `trace` with `tp --strict` (which fails on any import
/// problem Perfetto records); each query's rows as tab-separated cells.
pub fn tp_query(tp: &Path, trace: &[u8], name: &str, queries: &[&str]) -> Vec<Vec<Vec<String>>> {
    let path = std::env::temp_dir().join(format!("mltrace-import-{}-{name}.perfetto-trace", std::process::id()));
    std::fs::write(&path, trace).unwrap();
    let rows = tools::tp_query(tp, &path, queries);
    let _ = std::fs::remove_file(&path);
    rows
}

/// One number from a query's single row.
pub fn scalar(rows: &[Vec<String>]) -> i64 {
    rows[0][0].parse().unwrap_or_else(|_| panic!("not a number: {rows:?}"))
}
