//! Helpers for the end-to-end tests: the built `mltrace` binary, C
//! workloads compiled on the spot, Perfetto's importer, logs as records.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mltrace_log::{LogReader, Record};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The `mltrace` binary of this build (`MLTRACE_BIN` overrides).
pub fn mltrace_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MLTRACE_BIN") {
        return PathBuf::from(p);
    }
    // target/<profile>/deps/<test> -> target/<profile>/mltrace
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().unwrap().parent().unwrap().join("mltrace");
    assert!(p.exists(), "{} missing: build it first (`cargo build -p mltrace`, or `make test`)", p.display());
    p
}

pub fn mltrace(args: &[&str], cwd: &Path) -> Output {
    Command::new(mltrace_bin()).args(args).current_dir(cwd).output().expect("running mltrace")
}

/// BPF tests need root. Without it they fail, unless the developer opts
/// out explicitly with MLTRACE_SKIP_BPF_TESTS=1 (never set in CI).
pub fn require_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var_os("MLTRACE_SKIP_BPF_TESTS").is_some() {
        eprintln!("skipping: needs root (MLTRACE_SKIP_BPF_TESTS is set)");
        return false;
    }
    panic!("the BPF end-to-end tests need root (or set MLTRACE_SKIP_BPF_TESTS=1 to skip them)");
}

/// Compiles tests/workloads/<name>.c into `dir`.
pub fn compile_workload(name: &str, dir: &Path) -> PathBuf {
    let src = repo().join("tests/workloads").join(format!("{name}.c"));
    let out = dir.join(name);
    let st = Command::new("cc").args(["-O2", "-pthread", "-o"]).arg(&out).arg(&src).status().expect("running cc");
    assert!(st.success(), "compiling {}", src.display());
    out
}

/// `key value` lines, as the workloads print them.
pub fn key_values(text: &str) -> HashMap<String, i64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// A record with its strings resolved (for assertions).
#[derive(Clone, Debug)]
pub struct Rec {
    pub rec: Record,
    /// The record's strings in field order (path, abs path, ...).
    pub strs: Vec<String>,
}

/// Every record of a log, strings resolved; panics on any diagnostic.
pub fn read_log(path: &Path) -> Vec<Rec> {
    let mut r = LogReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(rec) = f.next_record() {
            let s = |id| f.str_lossy(id).into_owned();
            let strs = match rec {
                Record::Exec(x) => vec![s(x.filename), s(x.argv)],
                Record::Comm(x) => vec![s(x.comm)],
                Record::Open(x) => vec![s(x.path), s(x.abs_path)],
                Record::Io(x) => vec![s(x.path)],
                Record::Close(x) => vec![s(x.path)],
                Record::Transfer(x) => vec![s(x.in_path), s(x.out_path)],
                Record::Phase(x) => vec![s(x.name)],
                Record::Mark(x) => vec![s(x.name), s(x.value)],
                Record::GpuEvent(x) => vec![s(x.group)],
                Record::PageCache(x) => vec![s(x.path)],
                Record::IoUring(x) => vec![s(x.path)],
                Record::Aio(x) => vec![s(x.path)],
                Record::Mapping(x) => vec![s(x.path)],
                Record::MajorFault(x) => vec![s(x.path)],
                _ => vec![],
            };
            out.push(Rec { rec, strs });
        }
    }
    let d = r.take_diagnostics();
    assert!(d.is_empty(), "diagnostics: {d:?}");
    assert!(r.trailer().is_some(), "log has no trailer");
    out
}

/// Mapping calls and major faults of process `pid` (or all) that the
/// trace draws (those about data files), by replaying the log through the
/// model's mapping tables.
pub fn drawn_mappings(recs: &[Rec], pid: Option<u32>) -> usize {
    use mltrace_model::maps::{MapClass, Maps};
    let mut maps = Maps::default();
    let mut n = 0;
    for r in recs {
        match r.rec {
            Record::MajorFault(f) if pid.is_none_or(|p| p == f.pid) => {
                n += usize::from(maps.find(f.pid, f.addr).is_some())
            }
            Record::Mapping(m) => {
                let a = maps.apply_path(&r.rec, r.strs.first().map_or(&b""[..], |s| s.as_bytes()));
                n += usize::from(pid.is_none_or(|p| p == m.pid) && a.class == Some(MapClass::Data));
            }
            _ => {
                maps.apply_path(&r.rec, b"");
            }
        }
    }
    n
}

/// Perfetto's trace_processor (`../shared/tools/perfetto/tp`), if present.
/// In CI it must be; elsewhere tests that need it say they skipped.
pub fn perfetto_tp() -> Option<PathBuf> {
    let p = std::env::var_os("MLTRACE_PERFETTO_TP")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/tools/perfetto/tp"));
    if p.exists() {
        return Some(p);
    }
    assert!(std::env::var_os("CI").is_none(), "{} is missing in CI", p.display());
    eprintln!("skipping the Perfetto importer check: {} not found", p.display());
    None
}

/// Runs SQL queries on `trace` with `tp --strict`; returns each query's
/// rows (tab-separated cells), panicking on import problems.
pub fn tp_query(tp: &Path, trace: &Path, queries: &[&str]) -> Vec<Vec<Vec<String>>> {
    // tp (Node) exits without flushing a pipe: large outputs go to a file.
    let out_file = tempfile::NamedTempFile::new().unwrap();
    let status = Command::new(tp)
        .arg("--strict")
        .arg(trace)
        .args(queries)
        .stdout(out_file.reopen().unwrap())
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("running tp");
    let text = std::fs::read_to_string(out_file.path()).unwrap();
    assert!(status.status.success(), "tp failed:\n{text}\n{}", String::from_utf8_lossy(&status.stderr));
    // Output: "> query" line, header line, rows; a blank-free stream.
    let mut results: Vec<Vec<Vec<String>>> = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        if let Some(q) = l.strip_prefix("> ") {
            if !queries.iter().any(|x| x.trim() == q.trim()) {
                continue; // tp's own stats query under --strict
            }
            lines.next(); // column names
            let mut rows = Vec::new();
            while let Some(n) = lines.peek() {
                if n.starts_with("> ") {
                    break;
                }
                rows.push(n.split('\t').map(|c| c.to_string()).collect());
                lines.next();
            }
            results.push(rows);
        }
    }
    assert_eq!(results.len(), queries.len(), "tp output:\n{text}");
    results
}
