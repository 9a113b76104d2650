//! The exporters on the test logs of `mltrace-testlog`, and Perfetto's importer.

#![allow(dead_code)]

use std::io::Cursor;
use std::path::{Path, PathBuf};

use mltrace_log::*;
pub use mltrace_testlog::sample_log::*;

#[path = "../../../../tests/src/tools.rs"]
mod tools;

pub fn reader(log: &[u8]) -> LogReader<Cursor<&[u8]>> {
    LogReader::new(Path::new("test.bin"), Cursor::new(log)).unwrap()
}

pub fn perfetto(log: &[u8]) -> (Vec<u8>, mltrace_perfetto::ExportStats) {
    let mut diags = Vec::new();
    let r = mltrace_perfetto::export(&mut reader(log), Vec::new(), &mut |d| diags.push(d)).unwrap();
    assert!(diags.is_empty(), "{diags:?}");
    r
}

pub fn chrome(log: &[u8]) -> (Vec<u8>, mltrace_chrome::ExportStats) {
    let mut diags = Vec::new();
    let r = mltrace_chrome::export(&mut reader(log), Vec::new(), &mut |d| diags.push(d)).unwrap();
    assert!(diags.is_empty(), "{diags:?}");
    r
}

/// A fresh directory for this test's files.
pub fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mltrace-chrome-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[allow(unused_imports)] // not every test binary asks Perfetto
pub use tools::{perfetto_tp as tp, tp_query};
