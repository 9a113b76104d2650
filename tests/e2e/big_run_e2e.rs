//! A recorded run too big for one file (a small budget stands in for the
//! real one): `mltrace export` writes an overview and parts that each load
//! in Perfetto's importer, hold every syscall exactly once between them,
//! and keep a call's arrow to its block requests; Chrome JSON too; a
//! `--from/--to` window holds only that window; bad windows are explained.

use std::path::{Path, PathBuf};

use mltrace_log::*;
use mltrace_tests::*;

struct Run {
    dir: tempfile::TempDir,
    log: PathBuf,
    recs: Vec<Rec>,
}

fn record() -> Option<Run> {
    let _turn = require_root!()?;
    // A real disk, not a tmpfs: O_DIRECT needs one.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = compile_workload("epochs", dir.path());
    let data = dir.path().join("data.bin");
    std::fs::write(&data, vec![7u8; 1 << 20]).unwrap();
    let log = dir.path().join("run.bin");
    let out = mltrace(
        &["record", "-o", log.to_str().unwrap(), "--", bin.to_str().unwrap(), data.to_str().unwrap(), "5", "8000"],
        dir.path(),
    );
    assert!(out.status.success(), "record: {}", String::from_utf8_lossy(&out.stderr));
    let recs = read_log(&log);
    Some(Run { dir, log, recs })
}

fn is_syscall(r: &Record) -> bool {
    matches!(r, Record::Io(_) | Record::Open(_) | Record::Close(_) | Record::Transfer(_) | Record::MetaCall(_))
}

/// Syscall slices in a trace (on their threads' tracks): those with a
/// thread id that are not block requests (which have a sector) nor the
/// overview's copies of the slowest calls (which have an interval).
const SYSCALL_SLICES: &str = "select count(*) from slice s \
     where exists (select 1 from args a where a.arg_set_id = s.arg_set_id and a.key glob '*.tid') \
     and not exists (select 1 from args a where a.arg_set_id = s.arg_set_id \
       and (a.key glob '*.sector' or a.key glob '*.interval'))";

/// Exports with `args`; returns the files export listed, in its order.
fn export(run: &Run, args: &[&str]) -> Vec<PathBuf> {
    let mut all = vec!["export", run.log.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = mltrace(&all, run.dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "export {args:?}: {err}");
    err.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("mltrace: ")?;
            let (_, path) = rest.split_once(": ")?;
            let path = path.split(" (").next()?;
            (path.ends_with(".perfetto-trace") || path.ends_with(".json")).then(|| PathBuf::from(path))
        })
        .collect()
}

fn count(tp: &Path, file: &Path, sql: &str) -> u64 {
    tp_query(tp, file, &[sql])[0][0][0].parse().unwrap()
}

#[test]
fn a_big_run_splits_into_parts_that_add_up() {
    let Some(run) = record() else { return };
    // Calls, and mmaps and munmaps of data files (ld.so.cache): slices with a tid.
    let calls = (run.recs.iter().filter(|r| is_syscall(&r.rec)).count() + drawn_mappings(&run.recs, None)) as u64;
    let phases = run.recs.iter().filter(|r| matches!(r.rec, Record::Phase(_))).count();
    assert!(calls > 40_000, "{calls} syscalls");
    assert_eq!(phases, 6, "INIT and five epochs");
    let Some(tp) = perfetto_tp() else { return };
    for (fmt, ext) in [(None, "perfetto-trace"), (Some("--chrome"), "json")] {
        let mut args = vec!["--budget", "15000"];
        args.extend(fmt);
        let files = export(&run, &args);
        assert!(files.len() >= 4, "{fmt:?}: {files:?}");
        assert_eq!(files[0], run.dir.path().join(format!("run.{ext}")), "the overview at the default -o path");
        let mut total = 0;
        for (i, f) in files.iter().enumerate() {
            assert!(f.exists(), "{}", f.display());
            let q = tp_query(
                &tp,
                f,
                &[SYSCALL_SLICES, "select count(*) from slice where dur < 0", "select count(*) from flow"],
            );
            let n: u64 = q[0][0][0].parse().unwrap();
            assert_eq!(q[1][0][0], "0", "{}: slices without an end", f.display());
            if i == 0 {
                // The overview: the whole run's phases and the processes' rates.
                assert_eq!(n, 0, "the overview has no syscall lanes");
                // Not the verdict's own per-epoch slices (`EPOCH 1: input-bound...`).
                let phases =
                    count(&tp, f, "select count(*) from slice where name glob 'EPOCH *' and name not glob '*: *'");
                assert_eq!(phases, 5, "{}", f.display());
                let rates = count(
                    &tp,
                    f,
                    "select count(*) from track where name in ('read', 'read B/s') and type like '%counter%'",
                );
                assert!(rates >= 2, "main and worker read rates: {rates}");
            } else {
                let name = f.file_name().unwrap().to_string_lossy().into_owned();
                assert!(name.starts_with(&format!("run.part{i:02}.")), "{name}");
                total += n;
            }
        }
        assert_eq!(total, calls, "{fmt:?}: the parts' syscalls add up to the log's");
        // Some part has the arrows from O_DIRECT calls to their requests.
        let flows: u64 = files[1..].iter().map(|f| count(&tp, f, "select count(*) from flow")).sum();
        assert!(flows >= 20, "{fmt:?}: {flows} flows");
    }
}

#[test]
fn a_window_holds_only_that_window_and_bad_ones_are_explained() {
    let Some(run) = record() else { return };
    let epoch = |n: &str| {
        run.recs
            .iter()
            .find_map(|r| match r.rec {
                Record::Phase(p) if r.strs[0] == n => Some((p.ts, p.ts + p.dur)),
                _ => None,
            })
            .unwrap()
    };
    let (from, _) = epoch("EPOCH 2");
    let (_, to) = epoch("EPOCH 3");
    let want = run.recs.iter().filter(|r| is_syscall(&r.rec) && (from..to).contains(&r.rec.ts())).count() as u64;
    assert!(want > 10_000);
    let out = run.dir.path().join("e2-3.perfetto-trace");
    let files = export(&run, &["--from", "EPOCH 2", "--to", "EPOCH 3", "-o", out.to_str().unwrap()]);
    assert_eq!(files, std::slice::from_ref(&out));
    if let Some(tp) = perfetto_tp() {
        assert_eq!(count(&tp, &out, SYSCALL_SLICES), want);
        let outside = format!("{SYSCALL_SLICES} and (s.ts < {from} or s.ts >= {to})");
        assert_eq!(count(&tp, &out, &outside), 0);
    }
    // Bad windows: a clear error naming the run's span or phases.
    for (args, says) in [
        (vec!["--from", "EPOCH 9"], "EPOCH 1 … EPOCH 5 (5)"),
        (vec!["--from", "EPOCH 3", "--to", "EPOCH 2"], "is not before"),
        (vec!["--from", "2h"], "the run spans"),
        (vec!["--pid", "999999999"], "no such process"),
    ] {
        let mut all = vec!["export", run.log.to_str().unwrap()];
        all.extend(args.iter().copied());
        let o = mltrace(&all, run.dir.path());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
