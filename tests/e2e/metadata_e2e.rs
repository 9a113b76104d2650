//! Metadata calls: a walk over 20,000 small files (os.walk, os.stat of
//! each) recorded while strace watches the same run, on every syscall
//! route and in summary detail. The trace's getdents64 and stat-family
//! calls are strace's, call for call, and so are `stats --json`'s
//! `metadata[]` per directory, the Parquet table and the slices in
//! Perfetto.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use mltrace_log::*;
use mltrace_tests::*;

const FILES_PER_DIR: usize = 100;

/// Directories of the tree: 200 (20,000 files), a tenth under full
/// emulation (test-kernels' guests), where strace's stops crawl.
fn dirs() -> usize {
    if emulated() {
        20
    } else {
        200
    }
}

/// Every call mltrace records as a metadata call: what strace is told to
/// show (x86_64's names).
const CALLS: &str = "getdents64,stat,lstat,newfstatat,statx,access,faccessat,faccessat2,readlink,readlinkat,\
                     rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,rmdir";

/// [`dirs`] directories of FILES_PER_DIR files of 1 to 64 bytes.
fn tree(dir: &Path) -> PathBuf {
    let root = dir.join("tree");
    for d in 0..dirs() {
        let sub = root.join(format!("d{d:03}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..FILES_PER_DIR {
            std::fs::write(sub.join(format!("f{f:03}")), vec![b'x'; 1 + (d * 7 + f) % 64]).unwrap();
        }
    }
    root
}

/// One call as strace printed it (`-f -y`): its process, name, the fd's
/// path of its first argument (`3</a/b>`), its quoted strings, and
/// whether it is fstat on a fd (AT_EMPTY_PATH with no path).
#[derive(Debug)]
struct Traced {
    pid: u32,
    name: String,
    fd_path: Option<String>,
    strings: Vec<String>,
    fstat: bool,
}

/// The quoted strings of `s` (strace escapes `"` and `\`; the tree's
/// paths have neither).
fn quoted(s: &str) -> Vec<String> {
    s.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

/// strace's output, its unfinished and resumed halves joined.
fn parse_strace(text: &str) -> Vec<Traced> {
    let mut pending: HashMap<u32, String> = HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((pid, rest)) = line.split_once(' ') else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        let rest = rest.trim_start();
        let call = if let Some(tail) = rest.strip_prefix("<... ") {
            let Some(start) = pending.remove(&pid) else { continue };
            let Some((_, after)) = tail.split_once("resumed>") else { continue };
            start + after
        } else if let Some(start) = rest.strip_suffix("<unfinished ...>") {
            pending.insert(pid, start.to_string());
            continue;
        } else {
            rest.to_string()
        };
        let Some((name, args)) = call.split_once('(') else { continue };
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // "--- SIGCHLD", "+++ exited"
        }
        let fd_path = args.split_once('<').and_then(|(fd, p)| {
            let (p, _) = p.split_once('>')?;
            fd.chars().all(|c| c.is_ascii_digit()).then(|| p.to_string())
        });
        let strings = quoted(args);
        let fstat = matches!(name, "newfstatat" | "statx")
            && strings.first().is_some_and(|s| s.is_empty())
            && args.contains("AT_EMPTY_PATH");
        out.push(Traced { pid, name: name.to_string(), fd_path, strings, fstat });
    }
    out
}

/// The directory a call is about, as `stats` files it: getdents64's own,
/// else the one holding its (absolute) path; None for a relative path.
fn directory(name: &str, fd_path: Option<&str>, path: Option<&str>) -> Option<String> {
    if name == "getdents64" {
        return fd_path.map(str::to_string);
    }
    let p = path?;
    let (dir, _) = p.rsplit_once('/')?;
    p.starts_with('/').then(|| if dir.is_empty() { "/".to_string() } else { dir.to_string() })
}

fn inc<K: Ord>(m: &mut BTreeMap<K, u64>, k: K) {
    *m.entry(k).or_default() += 1;
}

/// Parquet's `metadata_calls` rows of `pid`: (op, abs_path).
fn parquet_calls(dir: &Path, pid: u32) -> Vec<(String, String)> {
    let f = std::fs::File::open(dir.join("metadata_calls.parquet")).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).unwrap().build().unwrap();
    let mut rows = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let pids = b.column_by_name("pid").unwrap().as_primitive::<Int64Type>();
        let ops = b.column_by_name("op").unwrap().as_string::<i32>();
        let paths = b.column_by_name("abs_path").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            if pids.value(i) == i64::from(pid) {
                rows.push((ops.value(i).to_string(), paths.value(i).to_string()));
            }
        }
    }
    rows
}

#[test]
fn a_walk_over_small_files_is_straces_calls_per_directory() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Ok(strace) = std::process::Command::new("strace").arg("-V").output() else {
        skip("metadata calls against strace", "strace is missing");
        return;
    };
    assert!(strace.status.success());
    let python = system_python().expect("python3");
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path());
    let root_s = root.to_str().unwrap().to_string();
    let script = repo().join("tests/workloads/walk_stat.py");
    let mut perfetto_done = false;
    // Each route in full detail; the first in summary detail too, which
    // records metadata calls one by one as well.
    let first = routes()[0];
    let runs = routes().into_iter().map(|r| (r, "full")).chain([(first, "summary")]);
    for (route, detail) in runs {
        let name = format!("{route}-{detail}");
        let log = tmp.path().join(format!("walk-{name}.bin"));
        let text = tmp.path().join(format!("strace-{name}.txt"));
        let args = [
            "record",
            "-q",
            "--gpu",
            "off",
            "--detail",
            detail,
            "--syscall-probes",
            route,
            "-o",
            log.to_str().unwrap(),
            "--",
            "strace",
            "-f",
            "-qq",
            "-y",
            "-s",
            "4096",
            "-o",
            text.to_str().unwrap(),
            "-e",
            &format!("trace={CALLS}"),
            &python,
            script.to_str().unwrap(),
            &root_s,
        ];
        let r = recorded(&mltrace(&args, tmp.path()), log, tmp.path());
        assert_eq!((r.kv["dirs"], r.kv["files"]), ((dirs() + 1) as i64, (dirs() * FILES_PER_DIR) as i64), "{name}");
        let pid = r.kv["pid"] as u32;

        // strace's calls of the walker, by operation and by directory of
        // the tree (fstat on a fd is not a lookup: not recorded).
        let (fstats, traced): (Vec<Traced>, Vec<Traced>) = parse_strace(&std::fs::read_to_string(&text).unwrap())
            .into_iter()
            .filter(|t| t.pid == pid)
            .partition(|t| t.fstat);
        let in_tree = |d: &str| d == root_s || d.strip_prefix(&root_s).is_some_and(|rest| rest.starts_with('/'));
        let mut want_ops: BTreeMap<String, u64> = BTreeMap::new();
        let mut want_dirs: BTreeMap<String, u64> = BTreeMap::new();
        // The stats of the tree's entries, and the listings of its subdirectories.
        let (mut want_stats, mut want_lists) = (0u64, 0u64);
        let sub = format!("{root_s}/d");
        for t in &traced {
            inc(&mut want_ops, t.name.clone());
            let path = t.strings.first().map(String::as_str);
            want_stats += u64::from(t.name == "newfstatat" && path.is_some_and(|p| p.starts_with(&sub)));
            want_lists +=
                u64::from(t.name == "getdents64" && t.fd_path.as_deref().is_some_and(|p| p.starts_with(&sub)));
            if let Some(d) = directory(&t.name, t.fd_path.as_deref(), path) {
                if in_tree(&d) {
                    inc(&mut want_dirs, d);
                }
            }
        }
        // Not vacuous: a stat a file and a listing to its end (two calls
        // at least) a directory.
        assert!(want_ops.get("newfstatat").copied().unwrap_or(0) >= (dirs() * FILES_PER_DIR) as u64, "{want_ops:?}");
        assert!(want_ops.get("getdents64").copied().unwrap_or(0) >= 2 * (dirs() + 1) as u64, "{want_ops:?}");
        assert_eq!(want_dirs.len(), dirs() + 1, "{name}: strace's directories");

        // The log: the walker's calls from its exec on (before it, it was
        // strace's child getting ready).
        let recs = read_log(&r.log);
        let exec = recs
            .iter()
            .find_map(|x| match x.rec {
                Record::Exec(e) if e.pid == pid => Some(e.ts),
                _ => None,
            })
            .expect("the walker's exec");
        let mut got_ops: BTreeMap<String, u64> = BTreeMap::new();
        let mut pid_ops: BTreeMap<String, u64> = BTreeMap::new();
        let mut all = 0;
        for x in &recs {
            if let Record::MetaCall(m) = x.rec {
                all += 1;
                if m.pid == pid {
                    inc(&mut pid_ops, m.op.name().to_string());
                }
                if m.pid == pid && m.ts >= exec {
                    inc(&mut got_ops, m.op.name().to_string());
                    assert!(m.dur > 0, "{name}: {x:?}");
                }
            }
        }
        assert_eq!(got_ops, want_ops, "{name}: the walker's metadata calls (mltrace, strace)");
        eprintln!(
            "{name}: the walker's calls, as strace and the trace count them: {got_ops:?} ({} fstat on a fd left out)",
            fstats.len()
        );

        // stats --json: metadata[] per directory of the tree.
        let got_dirs: BTreeMap<String, u64> = r.json["metadata"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["pid"] == pid && in_tree(m["directory"].as_str().unwrap()))
            .map(|m| (m["directory"].as_str().unwrap().to_string(), m["calls"].as_u64().unwrap()))
            .collect();
        assert_eq!(got_dirs, want_dirs, "{name}: metadata[] calls per directory (stats, strace)");
        let d0 = r.json["metadata"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["pid"] == pid && m["directory"].as_str() == Some(&format!("{root_s}/d000")))
            .unwrap();
        assert_eq!(d0["ops"]["newfstatat"].as_u64(), Some(FILES_PER_DIR as u64), "{d0}");
        assert_eq!(d0["failed"].as_u64(), Some(0), "{d0}");
        assert!(d0["slowest_ns"].as_u64().unwrap() > 0 && d0["time_ns"].as_u64() >= d0["slowest_ns"].as_u64());

        // Parquet: a row a call, the walker's as strace's.
        let pq = tmp.path().join(format!("walk-{name}.parquet"));
        assert_eq!(parquet_rows(&r.log, &pq, &["metadata_calls"]), vec![all], "{name}");
        let mut pq_ops: BTreeMap<String, u64> = BTreeMap::new();
        let mut pq_stats = 0;
        for (op, path) in parquet_calls(&pq, pid) {
            pq_stats += u64::from(op == "newfstatat" && path.starts_with(&sub));
            inc(&mut pq_ops, op);
        }
        assert_eq!(pq_ops, pid_ops, "{name}: the walker's rows (Parquet, log)");
        assert_eq!(pq_stats, want_stats, "{name}: the tree's entries stat'ed (Parquet, strace)");

        // Perfetto (once: the export does not depend on the route): the
        // stats of the tree's entries and the listings of its
        // subdirectories, as slices of the walker's thread.
        if perfetto_done {
            continue;
        }
        perfetto_done = true;
        let Some(tp) = perfetto_tp() else { continue };
        let trace = tmp.path().join("walk.perfetto-trace");
        let o = mltrace(&["export", r.log.to_str().unwrap(), "-o", trace.to_str().unwrap()], tmp.path());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let of_walker = |slice: &str| {
            format!(
                "select count(*) from slice s join args t on t.arg_set_id = s.arg_set_id \
                 join args p on p.arg_set_id = s.arg_set_id where s.name like '{slice}' and s.dur >= 0 \
                 and t.key = 'debug.tid' and t.int_value = {pid} and p.key = 'debug.path' \
                 and p.string_value like '{sub}%'"
            )
        };
        let (stats, lists) = (of_walker("newfstatat %"), of_walker("getdents64 d%"));
        let res = tp_query(&tp, &trace, &[&stats, &lists]);
        let counts: Vec<u64> = res.iter().map(|q| q[0][0].parse().unwrap()).collect();
        assert_eq!(counts, [want_stats, want_lists], "stats of the tree's entries, listings of its directories");
    }
}
