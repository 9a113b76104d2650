//! NCCL calls seen from the host: a trainer dlopen()s a stand-in
//! libnccl.so.2 (tests/workloads/fake_nccl.c), creates communicators and
//! calls each collective a known number of times with known counts,
//! datatypes, peers, roots and streams (tests/workloads/nccl_trainer.c);
//! the uprobes' records say the same.

use std::path::{Path, PathBuf};
use std::process::Output;

use mltrace_log::*;
use mltrace_tests::*;

/// Builds the stand-in as `dir/lib/libnccl.so.2` and the trainer as `dir/nccl_trainer`.
fn build(dir: &Path) -> (PathBuf, PathBuf) {
    (stand_in::library(dir, "fake_nccl", "libnccl.so.2"), stand_in::trainer(dir, "nccl_trainer"))
}

/// `mltrace record` of `cmd`, with `$MLTRACE_NCCL_LIB` set to `nccl_lib` (or unset).
fn record(dir: &Path, name: &str, extra: &[&str], nccl_lib: Option<&Path>, cmd: &[&str]) -> (Output, PathBuf) {
    stand_in::record(dir, name, extra, nccl_lib.map(|l| ("MLTRACE_NCCL_LIB", l)), cmd)
}

fn collectives(recs: &[Rec]) -> Vec<Collective> {
    recs.iter()
        .filter_map(|r| match r.rec {
            Record::Collective(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// What the trainer does on its rank-2-of-4 communicator: (op, calls,
/// count, datatype, peer or root, stream).
const ON_COMM: [(NcclOp, usize, u64, u8, i32, u64); 7] = [
    (NcclOp::AllReduce, 5, 1 << 20, 7, -1, 0x5100),
    (NcclOp::AllGather, 3, 1000, 9, -1, 0x5200),
    (NcclOp::ReduceScatter, 2, 4096, 6, -1, 0x5300),
    (NcclOp::Broadcast, 2, 256, 0, 1, 0x5400),
    (NcclOp::Reduce, 4, 100, 8, 3, 0x5500),
    (NcclOp::Send, 3, 10, 2, 3, 0x5600),
    (NcclOp::Recv, 3, 10, 2, 1, 0x5600),
];

/// Every call the trainer made, with its arguments, rank and size.
fn check_calls(calls: &[Collective], kv: &std::collections::HashMap<String, i64>) {
    assert_eq!(kv["failed"], 0, "the stand-in answered every call");
    let tid = kv["tid"] as u32;
    let comm = kv["comm"] as u64;
    assert_eq!((comm, kv["all1"], kv["cfg"]), (0xc033_0002, 0xa110_0001, 0xc033_0000), "the stand-in's handles");
    assert!(calls.iter().all(|c| c.tid == tid && c.pid == tid && c.ret == 0 && c.dur > 0), "{calls:?}");
    for (op, n, count, dt, peer, stream) in ON_COMM {
        let mine: Vec<&Collective> = calls.iter().filter(|c| c.op == op && c.comm == comm).collect();
        assert_eq!(mine.len(), n, "{} calls", op.name());
        let bytes = count * nccl_type_size(dt);
        for c in &mine {
            assert_eq!(
                (c.count, c.datatype, c.bytes, c.peer, c.stream, c.rank, c.nranks),
                (count, dt, bytes, peer, stream, 2, 4),
                "{}",
                op.name()
            );
        }
    }
    for op in [NcclOp::GroupStart, NcclOp::GroupEnd] {
        let g: Vec<&Collective> = calls.iter().filter(|c| c.op == op).collect();
        assert_eq!(g.len(), 3, "{}", op.name());
        assert!(g.iter().all(|c| c.bytes == 0 && c.comm == 0 && c.rank == -1));
    }
    // Other communicators: ncclCommInitAll's second, ncclCommInitRankConfig's,
    // and one whose creation was never seen.
    let other = |stream: u64| -> Vec<&Collective> { calls.iter().filter(|c| c.stream == stream).collect() };
    let (a, cfg, unknown) = (other(0x5700), other(0x5800), other(0x5900));
    assert_eq!((a.len(), cfg.len(), unknown.len()), (1, 1, 1));
    assert_eq!((a[0].comm, a[0].rank, a[0].nranks, a[0].bytes), (0xa110_0001, 1, 2, 128));
    assert_eq!((cfg[0].comm, cfg[0].rank, cfg[0].nranks, cfg[0].bytes), (0xc033_0000, 0, 8, 8));
    assert_eq!((unknown[0].comm, unknown[0].rank, unknown[0].nranks, unknown[0].bytes), (0xdead, -1, 0, 4));
    assert_eq!(calls.len(), 5 + 3 + 2 + 2 + 4 + 3 * 4 + 3);
}

#[test]
fn nccl_calls_are_what_the_trainer_did() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (lib, trainer) = build(tmp.path());
    let (out, log) =
        record(tmp.path(), "nccl.bin", &[], Some(&lib), &[trainer.to_str().unwrap(), lib.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("NCCL probes"), "no attach failures: {stderr}");
    let run = recorded(&out, log, tmp.path());
    let recs = read_log(&run.log);
    let calls = collectives(&recs);
    check_calls(&calls, &run.kv);

    // stats --json: bytes and calls per op for the trainer's pid.
    let pid = run.kv["tid"];
    let rows = run.json["collectives"].as_array().expect("collectives[]");
    let row = |op: &str| rows.iter().find(|r| r["pid"] == pid && r["op"] == op).unwrap_or_else(|| panic!("{op}"));
    for (op, calls, bytes) in [
        ("ncclAllReduce", 8, 5 * (4 << 20) + 128 + 8 + 4),
        ("ncclAllGather", 3, 3 * 2000),
        ("ncclReduceScatter", 2, 2 * 8192),
        ("ncclBroadcast", 2, 2 * 256),
        ("ncclReduce", 4, 4 * 800),
        ("ncclSend", 3, 3 * 40),
        ("ncclRecv", 3, 3 * 40),
    ] {
        let r = row(op);
        assert_eq!((r["calls"].as_u64(), r["bytes"].as_u64()), (Some(calls), Some(bytes)), "{op}: {r}");
    }
    assert_eq!(row("ncclAllGather")["rank"], 2);
    assert_eq!(row("ncclAllGather")["ranks"], 4);
    assert!(rows.iter().all(|r| r["op"] != "ncclGroupStart" && r["op"] != "ncclGroupEnd"));

    // The header says the probes were on, and where.
    let header = LogReader::open(&run.log).unwrap().header().clone();
    let probe = header.probes.iter().find(|p| p.subsystem == "nccl").expect("an nccl probe in the header");
    assert!(probe.detail.contains(lib.to_str().unwrap()), "{probe:?}");
    assert!(probe.detail.contains("(12 entry points)"), "{probe:?}");

    // Parquet's collectives table: a row per call.
    assert_eq!(parquet_rows(&run.log, &tmp.path().join("tables"), &["collectives"]), [calls.len()]);
}

/// A libnccl no probe was on at the start (PyTorch's own copy in
/// site-packages) is attached when the traced process maps it.
#[test]
fn a_library_mapped_later_is_attached() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (lib, trainer) = build(tmp.path());
    let (out, log) =
        record(tmp.path(), "later.bin", &[], None, &[trainer.to_str().unwrap(), lib.to_str().unwrap(), "700"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("NCCL probes"), "no attach failures: {stderr}");
    let run = recorded(&out, log, tmp.path());
    check_calls(&collectives(&read_log(&run.log)), &run.kv);
}

/// With `--cuda off` (which turns the NCCL probes off too): no calls, and
/// no nccl probe in the header.
#[test]
fn no_calls_with_the_probes_off() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (lib, trainer) = build(tmp.path());
    let (out, log) = record(
        tmp.path(),
        "off.bin",
        &["--cuda", "off"],
        Some(&lib),
        &[trainer.to_str().unwrap(), lib.to_str().unwrap()],
    );
    let run = recorded(&out, log, tmp.path());
    assert_eq!(run.kv["failed"], 0, "the trainer ran");
    assert!(collectives(&read_log(&run.log)).is_empty());
    let header = LogReader::open(&run.log).unwrap().header().clone();
    assert!(header.probes.iter().all(|p| p.subsystem != "nccl"), "{:?}", header.probes);
}
