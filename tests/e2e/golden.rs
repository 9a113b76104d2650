//! The exports of committed logs, held to committed digests: a change
//! that alters any output (Perfetto, Chrome JSON, Parquet, the report,
//! `stats`, `stats --json`) fails here, and updates tests/golden/digests
//! in the same commit, on purpose (`MLTRACE_BLESS=1 cargo test -p
//! mltrace-tests --test e2e golden`, then read the diff of the outputs).
//!
//! The logs (tests/golden/*.bin) were recorded here by the tests' own
//! workloads, small enough to commit:
//! - demo.bin: samples/dataloader/train.py, 40 files, 2 workers, 2 epochs;
//! - summary.bin: the same in `--detail summary`;
//! - stacks.bin: tests/workloads/py_stacks.py with `--py-stacks on`
//!   (CPython 3.11: threads, fork, spawn and forkserver children);
//! - gil.bin: tests/workloads/gil_loader.py, loader threads holding the GIL;
//! - cuda.bin: tests/workloads/cuda_trainer.c on the stand-in libcuda.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mltrace_tests::*;
use sha2::{Digest, Sha256};

const LOGS: [&str; 5] = ["demo", "summary", "stacks", "gil", "cuda"];

fn golden() -> PathBuf {
    repo().join("tests/golden")
}

/// Every file under `dir`, by its path from `dir`, sorted.
fn files(dir: &Path, under: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, under, out);
        } else {
            out.push(p.strip_prefix(under).unwrap().to_path_buf());
        }
    }
}

/// `mltrace ARGS` run in tests/golden (the report names the log as given),
/// its stdout.
fn run(args: &[&str]) -> Vec<u8> {
    let o = mltrace(args, &golden());
    assert!(o.status.success(), "mltrace {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o.stdout
}

/// Each log's outputs in `out`, named `<log>.<view>`.
fn export_all(out: &Path) {
    for l in LOGS {
        let (log, o) = (format!("{l}.bin"), |ext: &str| out.join(format!("{l}.{ext}")).to_str().unwrap().to_string());
        run(&["export", &log, "-o", &o("perfetto-trace")]);
        run(&["export", "--chrome", &log, "-o", &o("chrome.json")]);
        run(&["export", "--parquet", &log, "-o", &o("parquet")]);
        run(&["report", &log, "-o", &o("html")]);
        std::fs::write(o("stats.txt"), run(&["stats", &log])).unwrap();
        std::fs::write(o("stats.json"), run(&["stats", "--json", &log])).unwrap();
    }
}

/// `sha256  path` lines, as sha256sum writes them.
fn digests(out: &Path) -> BTreeMap<String, String> {
    let mut all = Vec::new();
    files(out, out, &mut all);
    all.iter()
        .map(|p| {
            let hash = Sha256::digest(std::fs::read(out.join(p)).unwrap());
            (p.to_str().unwrap().to_string(), hash.iter().map(|b| format!("{b:02x}")).collect())
        })
        .collect()
}

fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (h, p) = l.split_once("  ").unwrap_or_else(|| panic!("tests/golden/digests: `{l}`"));
            (p.to_string(), h.to_string())
        })
        .collect()
}

#[test]
fn exports_of_the_committed_logs_are_as_committed() {
    let tmp = tempfile::tempdir().unwrap();
    export_all(tmp.path());
    let got = digests(tmp.path());
    let path = golden().join("digests");
    if std::env::var_os("MLTRACE_BLESS").is_some() {
        let text: String = got.iter().map(|(p, h)| format!("{h}  {p}\n")).collect();
        std::fs::write(&path, text).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let want = parse(&std::fs::read_to_string(&path).expect("tests/golden/digests"));
    let changed: Vec<String> = want
        .keys()
        .chain(got.keys().filter(|k| !want.contains_key(*k)))
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|k| match (want.get(k), got.get(k)) {
            (Some(_), Some(_)) => format!("changed: {k}"),
            (Some(_), None) => format!("gone: {k}"),
            _ => format!("new: {k}"),
        })
        .collect();
    assert!(
        changed.is_empty(),
        "the exports of tests/golden's logs differ from tests/golden/digests:\n  {}\nIf the change is meant, \
         bless it in the same commit: MLTRACE_BLESS=1 cargo test -p mltrace-tests --test e2e golden",
        changed.join("\n  ")
    );
}
