//! The Python stack of every recorded read, with real BPF and real
//! interpreters: `py_stacks.py` reads at lines it knows (nested calls, a
//! generator, methods, lambdas, a comprehension, a thread, a forked, a
//! spawned and a forkserver child, numpy between Python frames where it
//! is installed) and writes, for each read, the stack it was made from.
//! The trace's stack of that read must equal it frame for frame.
//!
//! Interpreters: the machine's python3, Debian's /usr/bin/python3.11 (its
//! libpython linked into the executable) and pyenv's 3.9 to 3.13 (a shared
//! libpython) where present, and Debian's 3.9, 3.13 and 3.14 in chroots
//! that `scripts/python-chroots.sh` makes (cached; a few minutes the first
//! time; MLTRACE_PY_CHROOTS=0 leaves them out, and says so).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mltrace_log::Record;
use mltrace_tests::tools;
use mltrace_tests::*;

/// One interpreter: how to run it, and where its files are seen from here.
struct Interp {
    name: String,
    /// The command before the script's arguments.
    argv: Vec<String>,
    /// A chroot's directory: the workload's paths are inside it.
    root: Option<PathBuf>,
}

fn interpreters() -> Vec<Interp> {
    let mut v = Vec::new();
    if let Some(py) = system_python() {
        v.push(Interp { name: format!("python3 ({py})"), argv: vec![py], root: None });
    }
    // Under full emulation (test-kernels' guests) every run is slow: the
    // walk is the same program for every version, so a shared libpython
    // (python3's) and one linked into the executable are enough there.
    let emulated = emulated();
    let mut local: Vec<PathBuf> = vec![PathBuf::from("/usr/bin/python3.11")];
    if !emulated {
        for m in ["3.9", "3.10", "3.11", "3.12", "3.13"] {
            if let Ok(dirs) = std::fs::read_dir("/root/.pyenv/versions") {
                for d in dirs.flatten() {
                    let name = d.file_name().to_string_lossy().into_owned();
                    if name.starts_with(&format!("{m}.")) {
                        local.push(d.path().join(format!("bin/python{m}")));
                    }
                }
            }
        }
    }
    for p in local.into_iter().filter(|p| p.exists()) {
        let s = p.to_string_lossy().into_owned();
        if !v.iter().any(|i| i.argv[0] == s) {
            v.push(Interp { name: s.clone(), argv: vec![s], root: None });
        }
    }
    if emulated {
        skip_optional("Debian's Python 3.9, 3.13 and 3.14", "not under full emulation (the host runs them)");
    } else if std::env::var("MLTRACE_PY_CHROOTS").as_deref() == Ok("0") {
        skip("Debian's Python 3.9, 3.13 and 3.14", "MLTRACE_PY_CHROOTS=0");
    } else {
        let out = Command::new(repo().join("scripts/python-chroots.sh")).output().unwrap();
        assert!(out.status.success(), "python-chroots.sh: {}", String::from_utf8_lossy(&out.stderr));
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            if let [suite, dir, py] = w[..] {
                // Run through a shell in the chroot, the recorder is not told
                // of the interpreter up front (docs/what-is-recorded.md): a
                // first process of it, alive long enough for the recorder
                // to read it (a second: its answer comes in milliseconds,
                // tens of them on a busy machine), comes before the
                // workload, whose processes are then walked from their
                // first call after loading it.
                let first = format!("{py} -c 'import time; time.sleep(1)' && exec {py} \"$@\"");
                v.push(Interp {
                    name: format!("Debian {suite} {py}"),
                    argv: vec!["chroot".into(), dir.into(), "/bin/sh".into(), "-c".into(), first, "sh".into()],
                    root: Some(PathBuf::from(dir)),
                });
            }
        }
    }
    v
}

type Frame = (String, String, u32);
/// A read the workload made: (pid, path, offset, its innermost frame as a slice shows it).
type Read = (u64, String, u64, String);

/// Records the workload under `py`; the expected reads and the log's records.
fn record(py: &Interp, dir: &Path, extra: &[&str]) -> (serde_json::Value, Vec<Rec>, String) {
    let log = dir.join("stacks.bin");
    // Inside a chroot the workload runs from (and writes under) its /tmp.
    let (work, script, data, out) = match &py.root {
        Some(root) => {
            let work = tempfile::tempdir_in(root.join("tmp")).unwrap().keep();
            std::fs::copy(repo().join("tests/workloads/py_stacks.py"), work.join("py_stacks.py")).unwrap();
            let inside = Path::new("/").join(work.strip_prefix(root).unwrap());
            (work, inside.join("py_stacks.py"), inside.join("data"), inside.join("out.json"))
        }
        None => {
            let work = dir.to_path_buf();
            (work.clone(), repo().join("tests/workloads/py_stacks.py"), work.join("data"), work.join("out.json"))
        }
    };
    let mut args = vec!["record", "-q", "-f", "--gpu", "off", "--py-stacks", "on", "-o", log.to_str().unwrap()];
    args.extend(extra);
    args.push("--");
    args.extend(py.argv.iter().map(String::as_str));
    args.extend([script.to_str().unwrap(), data.to_str().unwrap(), out.to_str().unwrap()]);
    let o = mltrace(&args, dir);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}: {stderr}", py.name);
    let out_here = work.join("out.json");
    let want: serde_json::Value = serde_json::from_slice(&std::fs::read(&out_here).unwrap()).unwrap();
    if py.root.is_some() {
        let _ = std::fs::remove_dir_all(&work);
    }
    (want, read_log(&log), stderr)
}

fn frames_of(v: &serde_json::Value) -> Vec<Frame> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["function"].as_str().unwrap().into(),
                f["file"].as_str().unwrap().into(),
                f["line"].as_u64().unwrap() as u32,
            )
        })
        .collect()
}

fn check(py: &Interp, views: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (want, recs, stderr) = record(py, dir.path(), &[]);
    let what = &py.name;
    // The log's stacks, by (pid, id), and its reads by (pid, path, offset).
    let mut stacks: HashMap<(u32, u32), Vec<(u32, Frame)>> = HashMap::new();
    let mut reads: HashMap<(u32, String, u64), u32> = HashMap::new();
    let mut interps = Vec::new();
    for r in &recs {
        match r.rec {
            Record::PyFrame(f) => stacks
                .entry((f.pid, f.stack))
                .or_default()
                .push((f.depth, (r.strs[0].clone(), r.strs[1].clone(), f.line))),
            Record::Io(io) if !io.op.is_write() => {
                // Inside a chroot the trace names files by their path here.
                let path = match &py.root {
                    Some(root) => r.strs[0].strip_prefix(root.to_str().unwrap()).unwrap_or(&r.strs[0]).to_string(),
                    None => r.strs[0].clone(),
                };
                reads.insert((io.pid, path, io.offset), io.stack);
            }
            Record::PyInterp(i) => interps.push((i.pid, i.stacks, r.strs.clone())),
            _ => {}
        }
    }
    let expected = want["reads"].as_array().unwrap();
    assert!(expected.len() >= 20, "{what}: {want}");
    let pids: std::collections::BTreeSet<u64> = expected.iter().map(|r| r["pid"].as_u64().unwrap()).collect();
    assert!(pids.len() >= 4, "{what}: the reads of the children are missing: {pids:?}");
    for r in expected {
        let pid = r["pid"].as_u64().unwrap() as u32;
        let key = (pid, r["path"].as_str().unwrap().to_string(), r["offset"].as_u64().unwrap());
        let case = r["case"].as_str().unwrap();
        let Some(&stack) = reads.get(&key) else { panic!("{what}: {case}: no read {key:?} in the trace") };
        assert_ne!(stack, 0, "{what}: {case}: the read {key:?} has no stack; interpreters: {interps:?}\n{stderr}");
        let mut got =
            stacks.get(&(pid, stack)).unwrap_or_else(|| panic!("{what}: {case}: stack {stack} missing")).clone();
        got.sort_by_key(|f| f.0);
        let got: Vec<Frame> = got.into_iter().map(|f| f.1).collect();
        assert_eq!(got, frames_of(&r["stack"]), "{what}: {case}: the read {key:?}");
    }
    // The interpreter each program run found (a forked child runs its
    // parent's, and gets no record of its own).
    let main = expected[0]["pid"].as_u64().unwrap();
    assert!(interps.iter().any(|i| u64::from(i.0) == main && i.1), "{what}: process {main}: {interps:?}");
    // The views after the reads, each read's stack checked first.
    if views {
        check_views(&want, &dir.path().join("stacks.bin"), dir.path());
    }
}

/// The log's stacks by (pid, id), innermost frame first.
fn stacks_of(recs: &[Rec]) -> HashMap<(u32, u32), Vec<Frame>> {
    let mut stacks: HashMap<(u32, u32), Vec<(u32, Frame)>> = HashMap::new();
    for r in recs {
        if let Record::PyFrame(f) = r.rec {
            stacks.entry((f.pid, f.stack)).or_default().push((f.depth, (r.strs[0].clone(), r.strs[1].clone(), f.line)));
        }
    }
    stacks
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_by_key(|f| f.0);
            (k, v.into_iter().map(|f| f.1).collect())
        })
        .collect()
}

/// Summary detail sums the calls per stack as well: the workload's reads,
/// summed in the kernel, come out per stack with the calls and bytes it
/// made from each (which full detail matches read by read above), and
/// `stats` names their lines as it does in full detail.
#[test]
fn summary_detail_sums_the_reads_of_each_stack() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let py = interpreters().remove(0);
    let dir = tempfile::tempdir().unwrap();
    let (want, recs, stderr) = record(&py, dir.path(), &["--detail", "summary"]);
    let mut by_stack: HashMap<Vec<Frame>, (u64, u64)> = HashMap::new();
    for r in want["reads"].as_array().unwrap() {
        let e = by_stack.entry(frames_of(&r["stack"])).or_default();
        (e.0, e.1) = (e.0 + 1, e.1 + r["size"].as_u64().unwrap());
    }
    let stacks = stacks_of(&recs);
    let mut got: HashMap<Vec<Frame>, (u64, u64)> = HashMap::new();
    let mut sums = 0;
    for r in &recs {
        let Record::IoSummary(s) = r.rec else { continue };
        let data = dir.path().join("data");
        let file = &r.strs[0];
        if s.op.io().is_none_or(|o| o.is_write())
            || !file.starts_with(data.to_str().unwrap())
            || !file.ends_with(".bin")
        {
            continue;
        }
        sums += 1;
        assert_ne!(s.stack, 0, "a sum of reads of {} without a stack\n{stderr}", r.strs[0]);
        let frames = stacks.get(&(s.pid, s.stack)).unwrap_or_else(|| panic!("stack {} of {} missing", s.stack, s.pid));
        let e = got.entry(frames.clone()).or_default();
        (e.0, e.1) = (e.0 + s.calls, e.1 + s.bytes);
    }
    assert!(sums >= by_stack.len(), "{sums} sums for {} stacks", by_stack.len());
    for (stack, n) in &by_stack {
        assert_eq!(got.get(stack), Some(n), "the sums of the reads from {stack:?}");
    }
    assert_eq!(got.len(), by_stack.len(), "sums from stacks the workload did not read from: {got:?}");
    // stats: the workload's lines, with its calls and bytes.
    let (_, by_line) = lines_of(&want);
    let js = mltrace(&["stats", "--json", dir.path().join("stacks.bin").to_str().unwrap()], dir.path());
    assert!(js.status.success(), "{}", String::from_utf8_lossy(&js.stderr));
    let json: serde_json::Value = serde_json::from_slice(&js.stdout).unwrap();
    let mut lines: HashMap<Frame, (u64, u64)> = HashMap::new();
    for l in json["python_lines"].as_array().expect("python_lines") {
        let key = (
            l["function"].as_str().unwrap().into(),
            l["file"].as_str().unwrap().into(),
            l["line"].as_u64().unwrap_or(0) as u32,
        );
        let e = lines.entry(key).or_default();
        (e.0, e.1) = (e.0 + l["calls"].as_u64().unwrap(), e.1 + l["bytes"].as_u64().unwrap());
    }
    // (It also names the line that reads the data directory's manifest, as in full detail.)
    for (line, n) in &by_line {
        assert_eq!(lines.get(line), Some(n), "stats --json python_lines in summary detail: {line:?}");
    }
}

/// Each expected read's innermost frame as `function (file:line)`, and
/// how many reads (and bytes) each such line made.
fn lines_of(want: &serde_json::Value) -> (Vec<Read>, HashMap<Frame, (u64, u64)>) {
    let mut reads = Vec::new();
    let mut by_line: HashMap<Frame, (u64, u64)> = HashMap::new();
    for r in want["reads"].as_array().unwrap() {
        let inner = frames_of(&r["stack"]).remove(0);
        let e = by_line.entry(inner.clone()).or_default();
        (e.0, e.1) = (e.0 + 1, e.1 + r["size"].as_u64().unwrap());
        let shown = format!("{} ({}:{})", inner.0, inner.1, inner.2);
        reads.push((
            r["pid"].as_u64().unwrap(),
            r["path"].as_str().unwrap().into(),
            r["offset"].as_u64().unwrap(),
            shown,
        ));
    }
    (reads, by_line)
}

/// The stacks as a user meets them: each read's slice in the Perfetto
/// trace, the lines `stats --json` names, and Parquet's tables joined by
/// DuckDB, against the reads the workload made.
fn check_views(want: &serde_json::Value, log: &Path, dir: &Path) {
    let (reads, by_line) = lines_of(want);
    // stats: every line of the workload's reads, with its calls and bytes
    // (summed over roles: a child's are a loader's).
    let js = mltrace(&["stats", "--json", log.to_str().unwrap()], dir);
    assert!(js.status.success(), "{}", String::from_utf8_lossy(&js.stderr));
    let json: serde_json::Value = serde_json::from_slice(&js.stdout).unwrap();
    let mut got: HashMap<Frame, (u64, u64)> = HashMap::new();
    for l in json["python_lines"].as_array().expect("python_lines") {
        let key = (
            l["function"].as_str().unwrap().into(),
            l["file"].as_str().unwrap().into(),
            l["line"].as_u64().unwrap_or(0) as u32,
        );
        let e = got.entry(key).or_default();
        (e.0, e.1) = (e.0 + l["calls"].as_u64().unwrap(), e.1 + l["bytes"].as_u64().unwrap());
    }
    for (line, n) in &by_line {
        assert_eq!(got.get(line), Some(n), "stats --json python_lines: {line:?}: {}", json["python_lines"]);
    }
    // Perfetto: each read's slice shows its stack, innermost frame first.
    if let Some(tp) = tools::perfetto_tp() {
        let trace = dir.join("stacks.perfetto-trace");
        let o = mltrace(&["export", log.to_str().unwrap(), "-o", trace.to_str().unwrap()], dir);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let q = "select 0, p.pid, (select display_value from args where arg_set_id = s.arg_set_id and key = 'debug.path'), \
                 (select int_value from args where arg_set_id = s.arg_set_id and key = 'debug.offset'), \
                 replace((select string_value from args where arg_set_id = s.arg_set_id and key = 'debug.python stack'), char(10), '|') \
                 from slice s join thread_track tt on s.track_id = tt.id join thread using(utid) join process p using(upid) \
                 where s.name like 'pread64%' or s.name like 'read %'";
        let rows = &tools::tp_query(&tp, &trace, &[q])[0];
        for (pid, path, offset, inner) in &reads {
            let row = rows
                .iter()
                .find(|r| r[1] == pid.to_string() && r[2] == *path && r[3] == offset.to_string())
                .unwrap_or_else(|| panic!("no slice of the read of {path} at {offset} by {pid}"));
            assert_eq!(row[4].split('|').next(), Some(inner.as_str()), "{row:?}");
        }
    }
    // Parquet: DuckDB groups the read time by line, the query docs/parquet.md gives.
    if let Some(py) = tools::python_with("duckdb") {
        let rows = reads_by_line(&py, log, dir, "s.syscall IN ('read', 'pread64') AND s.path LIKE '%/data/%.bin'");
        let got: HashMap<Frame, (u64, u64)> = rows.into_iter().map(|r| ((r.0, r.1, r.2), (r.3, r.4))).collect();
        assert_eq!(got, by_line, "DuckDB's read calls and bytes by line");
    }
}

/// `log`'s reads that `filter` picks, exported to Parquet and grouped by
/// their innermost frame's line with DuckDB, the query docs/parquet.md
/// gives: (function, file, line, calls, bytes).
fn reads_by_line(py: &Path, log: &Path, dir: &Path, filter: &str) -> Vec<(String, String, u32, u64, u64)> {
    let out = dir.join("pq");
    let o = mltrace(&["export", "--parquet", log.to_str().unwrap(), "-o", out.to_str().unwrap()], dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sql = format!(
        "SELECT f.function, f.file, f.line, count(*), sum(s.bytes) FROM '{d}/syscalls.parquet' s \
         JOIN '{d}/py_stacks.parquet' f ON f.pid = s.pid AND f.stack = s.stack AND f.depth = 0 \
         WHERE {filter} GROUP BY ALL",
        d = out.display()
    );
    let o = Command::new(py)
        .args(["-c", "import duckdb, json, sys; print(json.dumps(duckdb.sql(sys.argv[1]).fetchall()))", &sql])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn every_read_carries_the_stack_it_was_made_from() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let all = interpreters();
    assert!(!all.is_empty());
    for (i, py) in all.iter().enumerate() {
        eprintln!("py_stacks: {}", py.name);
        check(py, i == 0);
    }
}

/// A real PyTorch DataLoader (2 workers, started by fork and by spawn):
/// every worker's read of an item names `__getitem__`'s line, in the log,
/// in `stats --json` and in Parquet.
#[test]
fn a_dataloaders_workers_reads_name_getitems_line() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(torchrun) = tools::torchrun() else { return };
    let py = torchrun.with_file_name("python");
    let script = repo().join("tests/workloads/torch_loader.py");
    let text = std::fs::read_to_string(&script).unwrap();
    let line = 1 + text.lines().position(|l| l.contains("# THE READ")).expect("the marked read") as u32;
    let want: Frame = ("Files.__getitem__".into(), script.to_str().unwrap().into(), line);
    for context in ["fork", "spawn"] {
        let dir = tempfile::tempdir().unwrap();
        let (log, data) = (dir.path().join("loader.bin"), dir.path().join("data"));
        let o = mltrace(
            &[
                "record",
                "-q",
                "-f",
                "--gpu",
                "off",
                "--py-stacks",
                "on",
                "-o",
                log.to_str().unwrap(),
                "--",
                py.to_str().unwrap(),
                script.to_str().unwrap(),
                data.to_str().unwrap(),
                context,
            ],
            dir.path(),
        );
        let run = recorded(&o, log.clone(), dir.path());
        assert_eq!(run.kv["items"], 64, "{context}");
        let recs = read_log(&log);
        let mut stacks: HashMap<(u32, u32), Vec<(u32, Frame)>> = HashMap::new();
        for r in &recs {
            if let Record::PyFrame(f) = r.rec {
                stacks
                    .entry((f.pid, f.stack))
                    .or_default()
                    .push((f.depth, (r.strs[0].clone(), r.strs[1].clone(), f.line)));
            }
        }
        let root = recs.iter().find_map(|r| match r.rec {
            Record::Exec(e) => Some(e.pid),
            _ => None,
        });
        // Every read of an item, by a worker (not the trainer), from the marked line.
        let mut reads = 0;
        for r in &recs {
            let Record::Io(io) = r.rec else { continue };
            if io.op.is_write() || !r.strs[0].starts_with(data.to_str().unwrap()) {
                continue;
            }
            assert_ne!(Some(io.pid), root, "{context}: the trainer read an item");
            let frames =
                stacks.get(&(io.pid, io.stack)).unwrap_or_else(|| panic!("{context}: a read without its stack"));
            let inner = &frames.iter().min_by_key(|f| f.0).unwrap().1;
            assert_eq!(inner, &want, "{context}");
            reads += 1;
        }
        assert!(reads >= 64, "{context}: {reads} reads of 64 items");
        // stats names the line, the loaders', with every read.
        let line_of = run.json["python_lines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["function"] == want.0 && l["file"] == want.1 && l["line"] == want.2)
            .unwrap_or_else(|| panic!("{context}: {}", run.json["python_lines"]))
            .clone();
        assert_eq!((line_of["role"].as_str(), line_of["calls"].as_u64()), (Some("loader"), Some(reads)), "{context}");
        // Parquet: DuckDB finds the same line for the items' reads.
        if let Some(dpy) = tools::python_with("duckdb") {
            let rows = reads_by_line(&dpy, &log, dir.path(), "s.syscall = 'read' AND s.path LIKE '%/item-%.bin'");
            let bytes = rows.first().map_or(0, |r| r.4);
            assert_eq!(rows, [(want.0.clone(), want.1.clone(), want.2, reads, bytes)], "{context}: DuckDB");
        }
    }
}
