//! io_uring requests and libaio calls of real programs (raw syscalls, no
//! liburing or libaio), recorded with the real BPF programs on both
//! routes: each request with its bytes, path, offset and latency,
//! attributed to the submitting process and thread; the kernel's own
//! syscr/rchar still match the traced calls exactly (it counts neither);
//! and the Perfetto export, loaded by Perfetto's importer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mltrace_log::*;
use mltrace_tests::*;

const KIB: u64 = 1024;

struct Run {
    log: PathBuf,
    kv: HashMap<String, i64>,
    recs: Vec<Rec>,
    json: serde_json::Value,
}

fn record(dir: &Path, extra: &[&str], cmd: &[&str]) -> Run {
    let log = dir.join("run.bin");
    let mut args = vec!["record", "-q", "-f", "--gpu", "off", "-o", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    let out = mltrace(&args, dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("0 lost"), "{stderr}");
    assert!(!stderr.contains("io_uring requests are not recorded"), "{stderr}");
    let kv = key_values(&String::from_utf8_lossy(&out.stdout));
    let js = mltrace(&["stats", "--json", log.to_str().unwrap()], dir);
    assert!(js.status.success(), "{}", String::from_utf8_lossy(&js.stderr));
    Run { kv, recs: read_log(&log), json: serde_json::from_slice(&js.stdout).unwrap(), log }
}

/// A 256 KiB input file (on a disk, not a tmpfs) and the output's path.
fn files(dir: &Path) -> (PathBuf, PathBuf) {
    let input = dir.join("in.bin");
    std::fs::write(&input, (0..256 * KIB).map(|i| (i % 251) as u8).collect::<Vec<u8>>()).unwrap();
    (input.canonicalize().unwrap(), dir.canonicalize().unwrap().join("out.bin"))
}

fn process(run: &Run, pid: u32) -> &serde_json::Value {
    run.json["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap()
}

fn file<'a>(run: &'a Run, path: &Path) -> &'a serde_json::Value {
    let p = path.to_str().unwrap();
    run.json["files"].as_array().unwrap().iter().find(|f| f["path"] == p).unwrap_or_else(|| panic!("{p} not in files"))
}

/// Exports the log and runs `queries` on it with `tp --strict`.
fn perfetto(run: &Run, dir: &Path, queries: &[&str]) -> Option<Vec<Vec<Vec<String>>>> {
    let tp = perfetto_tp()?;
    let trace = run.log.with_extension("perfetto-trace");
    let out = mltrace(&["export", run.log.to_str().unwrap(), "-o", trace.to_str().unwrap()], dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(tp_query(&tp, &trace, queries))
}

fn uring(extra: &[&str]) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = compile_workload("uring_io", tmp.path());
    let (input, output) = files(tmp.path());
    let run = record(tmp.path(), extra, &[bin.to_str().unwrap(), input.to_str().unwrap(), output.to_str().unwrap()]);
    let pid = run.kv["pid"] as u32;
    let sqpoll = run.kv["sqpoll_tid"] as u32;
    let reqs: HashMap<u64, (IoUring, String)> = run
        .recs
        .iter()
        .filter_map(|r| match r.rec {
            Record::IoUring(x) => Some((x.user_data, (x, r.strs[0].clone()))),
            _ => None,
        })
        .collect();
    // (user_data, op, offset, offset source, requested, path)
    let (inp, outp) = (input.to_str().unwrap(), output.to_str().unwrap());
    let mut want = vec![
        (1, UringOp::Read, 0, OffsetSrc::Explicit, 64 * KIB, inp),
        (2, UringOp::Read, 64 * KIB, OffsetSrc::Explicit, 64 * KIB, inp),
        (3, UringOp::Read, 128 * KIB, OffsetSrc::Explicit, 64 * KIB, inp),
        (4, UringOp::Read, 192 * KIB, OffsetSrc::Explicit, 64 * KIB, inp),
        (5, UringOp::Readv, 0, OffsetSrc::Explicit, 64 * KIB, inp),
        (6, UringOp::ReadFixed, 4096, OffsetSrc::Explicit, 32 * KIB, inp),
        (7, UringOp::Read, 8192, OffsetSrc::FilePos, 4 * KIB, inp),
        (8, UringOp::Write, 0, OffsetSrc::Explicit, 100_000, outp),
    ];
    if sqpoll != 0 {
        want.push((10, UringOp::Read, 0, OffsetSrc::Explicit, 4 * KIB, inp));
    }
    let mut got: Vec<u64> = reqs.keys().copied().collect();
    got.sort();
    assert_eq!(got, want.iter().map(|w| w.0).collect::<Vec<_>>(), "each read/write once; the NOP (9) not at all");
    for (tag, op, offset, src, requested, path) in want {
        let (r, p) = &reqs[&tag];
        let res = run.kv[&format!("res_{tag}")];
        assert_eq!(
            (r.op, r.offset, r.offset_src, r.requested, r.ret, p.as_str(), r.pid),
            (op, offset, src, requested, res, path, pid),
            "request {tag}: {r:?}"
        );
        assert_eq!(r.ret as u64, requested, "request {tag} did all it asked");
        // Submission to completion: more than nothing, less than the run.
        assert!(r.dur > 0 && r.dur < 5_000_000_000, "request {tag}: {} ns", r.dur);
        assert_ne!(r.complete_tid, 0);
        if tag == 10 {
            // Submitted by the ring's kernel thread, a thread of the process.
            assert_eq!((r.tid, r.flags & uring::SQPOLL), (sqpoll, uring::SQPOLL));
            let named = run
                .recs
                .iter()
                .any(|c| matches!(c.rec, Record::Comm(x) if x.tid == sqpoll) && c.strs[0].starts_with("iou-sqp"));
            assert!(named, "the SQPOLL thread is named");
        } else {
            assert_eq!((r.tid, r.flags & uring::SQPOLL), (pid, 0), "request {tag}");
        }
        let fixed = if tag == 6 { uring::FIXED_FILE } else { 0 };
        assert_eq!(r.flags & uring::FIXED_FILE, fixed, "request {tag}");
        let fd = match tag {
            6 => 0, // the registered file's index
            8 => run.kv["out_fd"],
            _ => run.kv["in_fd"],
        };
        assert_eq!(i64::from(r.fd), fd, "request {tag}");
    }
    // 1-4 were in flight together: each was submitted before any completed.
    let quad: Vec<&IoUring> = (1..=4).map(|t| &reqs[&t].0).collect();
    let last_submit = quad.iter().map(|r| r.ts).max().unwrap();
    let first_done = quad.iter().map(|r| r.ts + r.dur).min().unwrap();
    assert!(last_submit < first_done, "submitted together, completed after");

    // stats: io_uring apart from the calls; the kernel's counts match the calls.
    let read_bytes: u64 = (4 * 64 + 64 + 32 + 4) * KIB + if sqpoll != 0 { 4 * KIB } else { 0 };
    let n_reads = if sqpoll != 0 { 8 } else { 7 };
    let p = process(&run, pid);
    assert_eq!(
        (p["uring_reads"].as_u64(), p["uring_read_bytes"].as_u64(), p["uring_writes"].as_u64()),
        (Some(n_reads), Some(read_bytes), Some(1))
    );
    assert_eq!((p["uring_write_bytes"].as_u64(), p["uring_errors"].as_u64()), (Some(100_000), Some(0)));
    let calls = p["read_bytes"].as_u64().unwrap();
    assert_eq!(p["total_read_bytes"].as_u64(), Some(calls + read_bytes));
    assert_eq!(p["kernel"]["check"], "match", "{}", p["kernel"]);
    let f = file(&run, &input);
    assert_eq!((f["uring_reads"].as_u64(), f["uring_read_bytes"].as_u64()), (Some(n_reads), Some(read_bytes)));
    assert_eq!(file(&run, &output)["uring_write_bytes"].as_u64(), Some(100_000));
    // Every opcode submitted is counted, the NOP too.
    let ops = &run.json["uring_opcodes"];
    let count = |k: &str| ops[k].as_u64();
    assert_eq!(
        (count("read"), count("readv"), count("read_fixed"), count("write"), count("nop")),
        (Some(n_reads - 2), Some(1), Some(1), Some(1), Some(1)),
        "{ops}"
    );

    // The trace: every request a slice with its args, on the process's threads.
    let Some(rows) = perfetto(
        &run,
        tmp.path(),
        &[
            "select s.name, a.int_value from slice s join args a using(arg_set_id) \
             where a.key = 'debug.user_data' order by a.int_value",
            "select count(*), count(distinct s.track_id) from slice s where s.name = 'io_uring read 64 KiB'",
            "select distinct a.int_value from slice s join args a using(arg_set_id) \
             where s.name like 'io_uring %' and a.key = 'debug.tid'",
            "select distinct th.tid, p.pid from slice s join thread_track t on s.track_id = t.id \
             join thread th using(utid) join process p using(upid) where s.name like 'io_uring %'",
            "select a.string_value from slice s join args a using(arg_set_id) \
             where s.name = 'io_uring read_fixed 32 KiB' and a.key = 'debug.path'",
        ],
    ) else {
        return;
    };
    let mut names = vec![
        ("1", "io_uring read 64 KiB"),
        ("2", "io_uring read 64 KiB"),
        ("3", "io_uring read 64 KiB"),
        ("4", "io_uring read 64 KiB"),
        ("5", "io_uring readv 64 KiB"),
        ("6", "io_uring read_fixed 32 KiB"),
        ("7", "io_uring read 4 KiB"),
        ("8", "io_uring write 97.7 KiB"),
    ];
    if sqpoll != 0 {
        names.push(("10", "io_uring read 4 KiB"));
    }
    let want_rows: Vec<Vec<String>> = names.iter().map(|(t, n)| vec![n.to_string(), t.to_string()]).collect();
    assert_eq!(rows[0], want_rows);
    // In flight together: on the thread's track and its overlapping-calls lanes.
    let lanes: u64 = rows[1][0][1].parse().unwrap();
    assert_eq!(rows[1][0][0], "4");
    assert!(lanes >= 2, "overlapping requests on separate lanes: {:?}", rows[1]);
    let mut tids: Vec<String> = rows[2].iter().map(|r| r[0].clone()).collect();
    tids.sort();
    let mut want_tids = vec![pid.to_string()];
    if sqpoll != 0 {
        want_tids.push(sqpoll.to_string());
    }
    want_tids.sort();
    assert_eq!(tids, want_tids, "submitted by the process's threads");
    assert!(rows[3].iter().all(|r| want_tids.contains(&r[0]) && r[1] == pid.to_string()), "{:?}", rows[3]);
    assert_eq!(rows[4], vec![vec![inp.to_string()]], "a fixed file is named");
}

#[test]
fn io_uring_requests_with_bytes_paths_and_latency() {
    let Some(_turn) = require_root!() else {
        return;
    };
    uring(&[]);
}

#[test]
fn io_uring_requests_on_the_compat_route() {
    let Some(_turn) = require_root!() else {
        return;
    };
    uring(&["--syscall-probes", "compat"]);
}

fn libaio(extra: &[&str]) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = compile_workload("aio_io", tmp.path());
    let (input, output) = files(tmp.path());
    let run = record(tmp.path(), extra, &[bin.to_str().unwrap(), input.to_str().unwrap(), output.to_str().unwrap()]);
    let pid = run.kv["pid"] as u32;
    let calls: Vec<(Aio, String)> = run
        .recs
        .iter()
        .filter_map(|r| match r.rec {
            Record::Aio(x) => Some((x, r.strs[0].clone())),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    let inp = input.to_str().unwrap();
    let (submit, p) = &calls[0];
    assert_eq!(
        (submit.op, submit.pid, submit.fd, p.as_str(), submit.cmd, submit.offset),
        (AioOp::Submit, pid, run.kv["in_fd"] as i32, inp, AioCmd::Pread, 0)
    );
    assert_eq!((submit.nr, submit.ret, submit.counted), (3, 3, 3));
    assert_eq!((submit.read_bytes, submit.write_bytes, submit.flags), (12288, 5000, 0));
    let (get, p) = &calls[1];
    assert_eq!((get.op, get.min_nr, get.nr, get.ret), (AioOp::Getevents, 3, 8, run.kv["got"]));
    assert_eq!((get.read_bytes, get.write_bytes), (run.kv["read"] as u64, run.kv["written"] as u64));
    assert_eq!((get.fd >= 0, p.is_empty()), (true, false), "the first event's iocb names its file");
    let (none, _) = &calls[2];
    assert_eq!((none.op, none.min_nr, none.nr, none.ret, none.fd), (AioOp::Pgetevents, 0, 4, 0, -1));
    assert!(calls.iter().all(|(c, _)| c.dur > 0 && c.dur < 5_000_000_000));

    let j = process(&run, pid);
    let n = |k: &str| j[k].as_u64().unwrap_or_else(|| panic!("{k}: {}", j[k]));
    assert_eq!((n("aio_submits"), n("aio_iocbs"), n("aio_requested_read_bytes")), (1, 3, 12288));
    assert_eq!((n("aio_getevents"), n("aio_events"), n("aio_read_bytes"), n("aio_write_bytes")), (2, 3, 12288, 5000));
    assert_eq!(j["kernel"]["check"], "match", "the kernel counts no aio: {}", j["kernel"]);

    let Some(rows) = perfetto(
        &run,
        tmp.path(),
        &[
            "select s.name, th.tid from slice s join thread_track t on s.track_id = t.id join thread th using(utid) \
             where s.name like 'io_%' order by s.ts",
            "select a.string_value from slice s join args a using(arg_set_id) \
             where s.name = 'io_submit 3 iocbs' and a.key = 'debug.path'",
        ],
    ) else {
        return;
    };
    let want: Vec<Vec<String>> = ["io_submit 3 iocbs", "io_getevents 3 events", "io_pgetevents 0 events"]
        .iter()
        .map(|n| vec![n.to_string(), pid.to_string()])
        .collect();
    assert_eq!(rows[0], want);
    assert_eq!(rows[1], vec![vec![inp.to_string()]]);
}

#[test]
fn libaio_calls_with_fd_path_and_counts() {
    let Some(_turn) = require_root!() else {
        return;
    };
    libaio(&[]);
}

#[test]
fn libaio_calls_on_the_compat_route() {
    let Some(_turn) = require_root!() else {
        return;
    };
    libaio(&["--syscall-probes", "compat"]);
}
