//! The tests' own tools, which `make test-tools` (scripts/test-tools.sh)
//! fills into target/test-tools (or $MLTRACE_TOOLS_DIR), and what a test
//! does when one is missing: in CI it fails; elsewhere it skips, says so,
//! and writes it down for `make test` to print at the end.
//!
//! Std only: crates/import and exporters/chrome include this file too.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root: the nearest folder above the crate with Cargo.lock.
pub fn workspace() -> PathBuf {
    let mut d = Path::new(env!("CARGO_MANIFEST_DIR"));
    while !d.join("Cargo.lock").exists() {
        d = d.parent().expect("no Cargo.lock above the crate");
    }
    d.to_path_buf()
}

/// Where `make test-tools` puts the tools.
pub fn tools_dir() -> PathBuf {
    std::env::var_os("MLTRACE_TOOLS_DIR").map(PathBuf::from).unwrap_or_else(|| workspace().join("target/test-tools"))
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `test_binary::test_name`, for the skip list.
fn test_name() -> String {
    let exe = std::env::current_exe().ok();
    let bin = exe.as_deref().and_then(Path::file_stem).and_then(|s| s.to_str()).unwrap_or("?");
    // Cargo names test binaries `<target>-<hash>`.
    let bin = bin.rsplit_once('-').map_or(bin, |(b, _)| b);
    format!("{bin}::{}", std::thread::current().name().unwrap_or("?"))
}

/// Writes a skip where `make test` prints it (the harness hides stderr).
fn note(line: &str) {
    eprintln!("SKIPPED {line}");
    let dir = tools_dir();
    let _ = std::fs::create_dir_all(&dir);
    // One append of a short line: safe with other tests doing the same.
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("skipped.txt")) {
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

/// One line of allowances.txt (see `allow::Allowance::check`).
pub(crate) fn note_allowance(line: &str) {
    let dir = tools_dir();
    let _ = std::fs::create_dir_all(&dir);
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("allowances.txt")) {
        let _ = f.write_all(format!("{} {line}\n", test_name()).as_bytes());
    }
}

/// A check cannot run because a tool is missing: fails in CI, else skips.
pub fn skip(check: &str, why: &str) {
    let line = format!("{}: {check}: {why}", test_name());
    assert!(!in_ci(), "{line} (CI runs every check: `make test-tools` fills the tools)");
    note(&line);
}

/// A check that needs something the repository does not promise (sample
/// data, root): skipped and listed, in CI too.
pub fn skip_optional(check: &str, why: &str) {
    note(&format!("{}: {check}: {why} (optional)", test_name()));
}

fn present(p: &Path, what: &str, check: &str) -> bool {
    if p.exists() {
        return true;
    }
    skip(check, &format!("{what} {} is missing: run `make test-tools`", p.display()));
    false
}

/// Perfetto's trace_processor: tests/tools/tp.js over the engine in the
/// tools dir (MLTRACE_PERFETTO_TP: another runner that takes the same
/// arguments).
pub fn perfetto_tp() -> Option<PathBuf> {
    // Under full emulation (test-kernels' guests) its JavaScript engine can
    // crash; the host loads the guests' exports in the importer instead.
    if std::env::var_os("MLTRACE_EMULATED").is_some() {
        skip_optional("Perfetto's importer check", "not run under full emulation (the host runs it)");
        return None;
    }
    if let Some(p) = std::env::var_os("MLTRACE_PERFETTO_TP") {
        return Some(PathBuf::from(p));
    }
    let engine = tools_dir().join("perfetto/engine_bundle.js");
    present(&engine, "Perfetto's engine", "Perfetto's importer check").then(|| workspace().join("tests/tools/tp.js"))
}

/// The tools' Python, with tests/tools/requirements.txt installed.
pub fn python() -> Option<PathBuf> {
    let p = tools_dir().join("venv/bin/python");
    present(&p, "the tests' Python", "a check in Python").then_some(p)
}

/// PyTorch's venv: its `torchrun` (beside its Python).
pub fn torchrun() -> Option<PathBuf> {
    let p = tools_dir().join("torch/bin/torchrun");
    present(&p, "PyTorch's torchrun", "a real PyTorch job").then_some(p)
}

/// The tools' Python, if it imports `module` (a venv filled before the
/// module joined requirements.txt does not).
pub fn python_with(module: &str) -> Option<PathBuf> {
    let p = python()?;
    let out = Command::new(&p).args(["-c", &format!("import {module}")]).output();
    if out.is_ok_and(|o| o.status.success()) {
        return Some(p);
    }
    skip(
        &format!("a check with Python's {module}"),
        &format!("{} has no {module}: run `make test-tools`", p.display()),
    );
    None
}

/// Prometheus' server (Debian's package, unpacked by `make test-tools`).
pub fn prometheus() -> Option<PathBuf> {
    let p = tools_dir().join("prometheus/prometheus");
    present(&p, "Prometheus", "a real Prometheus scraping the live metrics").then_some(p)
}

/// uv, a launcher that runs Python as its child (from the tests' venv).
pub fn uv() -> Option<PathBuf> {
    let p = tools_dir().join("venv/bin/uv");
    present(&p, "uv", "a trainer run through `uv run`").then_some(p)
}

/// poetry, a launcher that inspects its interpreter in subprocesses,
/// then execs Python (from the tests' venv).
pub fn poetry() -> Option<PathBuf> {
    let p = tools_dir().join("venv/bin/poetry");
    present(&p, "poetry", "a trainer run through `poetry run`").then_some(p)
}

/// node_modules with tests/tools/package.json's packages (playwright-core).
pub fn node_modules() -> Option<PathBuf> {
    let p = tools_dir().join("node/node_modules");
    present(&p.join("playwright-core"), "playwright-core", "rendering in Chromium").then_some(p)
}

/// Chromium: $CHROMIUM, else Debian's (scripts/install-deps.sh installs it).
pub fn chromium() -> Option<PathBuf> {
    let p = std::env::var_os("CHROMIUM").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if p.exists() {
        return Some(p);
    }
    skip("rendering in Chromium", &format!("{} is missing: run `make deps`", p.display()));
    None
}

/// Runs SQL queries on `trace` with `tp --strict`; returns each query's
/// rows (tab-separated cells), panicking on import problems.
pub fn tp_query(tp: &Path, trace: &Path, queries: &[&str]) -> Vec<Vec<Vec<String>>> {
    let out = Command::new(tp).arg("--strict").arg(trace).args(queries).output().expect("running tp");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tp failed on {}:\n{text}\n{}",
        trace.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // Per query: "> query", column names, rows.
    let mut results: Vec<Vec<Vec<String>>> = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        if let Some(q) = l.strip_prefix("> ") {
            if !queries.iter().any(|x| x.trim() == q.trim()) {
                continue; // tp's own stats query under --strict
            }
            lines.next();
            let mut rows = Vec::new();
            while let Some(n) = lines.next_if(|n| !n.starts_with("> ")) {
                rows.push(n.split('\t').map(str::to_string).collect());
            }
            results.push(rows);
        }
    }
    assert_eq!(results.len(), queries.len(), "tp output:\n{text}");
    results
}
