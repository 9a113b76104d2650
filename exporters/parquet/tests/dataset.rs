//! Several hosts' logs as one dataset in Hive layout: every table for
//! every host, the same columns, each host's rows in its partition; and
//! the logs a dataset refuses, named.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use mltrace_log::*;
use mltrace_parquet::dataset::{self, HostTables};
use mltrace_parquet::{Error, Options, PARTITION};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// A log of `host` with `reads` reads of 4 KiB by pid 10; `merged_from`
/// makes it a merged log of those hosts.
fn log(path: &Path, host: &str, reads: u64, merged_from: &[&str]) {
    let header = Header {
        source: "record".into(),
        host: host.into(),
        clock: "boottime".into(),
        start: ClockAnchor { boottime_ns: 1_000, realtime_ns: 1_800_000_000_000_000_000, monotonic_ns: 0 },
        hosts: merged_from
            .iter()
            .map(|h| HostInfo { name: h.to_string(), file: format!("{h}.bin"), ..Default::default() })
            .collect(),
        ..Default::default()
    };
    let mut w = RecordWriter::new(File::create(path).unwrap(), &header).unwrap();
    for k in 0..reads {
        w.push_with(|e| {
            Record::Io(Io {
                ts: 2_000 + k * 1_000,
                dur: 500,
                pid: 10,
                tid: 10,
                op: IoOp::Pread64,
                fd: 3,
                path: e.intern(b"/data/shard.bin"),
                kind: FileKind::Regular,
                requested: 4096,
                ret: 4096,
                ..Default::default()
            })
        })
        .unwrap();
    }
    w.finish(&Trailer { exit_status: Some(0), ..Default::default() }).unwrap();
}

/// Column names and rows of one Parquet file.
fn read(path: &Path) -> (Vec<String>, usize) {
    let b = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    let cols = b.schema().fields().iter().map(|f| f.name().clone()).collect();
    (cols, b.build().unwrap().map(|r| r.unwrap().num_rows()).sum())
}

#[test]
fn each_host_is_a_partition_of_every_table() {
    let tmp = tempfile::tempdir().unwrap();
    let hosts = [("nodeA", 3), ("nodeB", 5), ("node-c.example", 0)];
    let logs: Vec<PathBuf> = hosts
        .iter()
        .map(|&(h, n)| {
            let p = tmp.path().join(format!("{h}.bin"));
            log(&p, h, n, &[]);
            p
        })
        .collect();
    let dir = tmp.path().join("job");
    let seen = Mutex::new(Vec::new());
    let done = |h: &HostTables| seen.lock().unwrap().push(h.host.clone());
    let written = dataset::export(&logs, &dir, &Options { row_group: 2 }, &done).unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(seen, ["node-c.example", "nodeA", "nodeB"], "each host reported once");
    assert_eq!(written.iter().map(|h| h.host.as_str()).collect::<Vec<_>>(), ["nodeA", "nodeB", "node-c.example"]);

    let tables: Vec<&str> = written[0].tables.iter().map(|t| t.name).collect();
    assert!(tables.contains(&"syscalls") && tables.contains(&"gpu_calls"), "{tables:?}");
    let mut columns: HashMap<&str, Vec<String>> = HashMap::new();
    for (h, (host, reads)) in written.iter().zip(hosts) {
        assert_eq!(h.host, host);
        assert_eq!(h.syscalls, reads);
        assert_eq!(h.tables.iter().map(|t| t.name).collect::<Vec<_>>(), tables, "the same tables for every host");
        for t in &h.tables {
            let want = dir.join(t.name).join(format!("host={host}")).join("part-0.parquet");
            assert_eq!(t.path, want);
            let (cols, rows) = read(&want);
            assert_eq!(rows as u64, t.rows, "{}", want.display());
            // The partition column is the directory's alone.
            assert!(!cols.iter().any(|c| c == PARTITION), "{}: a `{PARTITION}` column: {cols:?}", t.name);
            let first = columns.entry(t.name).or_insert_with(|| cols.clone());
            assert_eq!(*first, cols, "{}: the same columns for every host", t.name);
        }
        let syscalls = h.tables.iter().find(|t| t.name == "syscalls").unwrap();
        assert_eq!(syscalls.rows, reads);
    }
    // Only the three partitions of each table.
    let mut parts: Vec<String> = std::fs::read_dir(dir.join("syscalls"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    parts.sort();
    assert_eq!(parts, ["host=node-c.example", "host=nodeA", "host=nodeB"]);

    // One host again: its partition is replaced, the others kept.
    log(&logs[0], "nodeA", 7, &[]);
    let again = dataset::export(&logs[..1], &dir, &Options::default(), &|_| {}).unwrap();
    assert_eq!(again[0].tables.iter().find(|t| t.name == "syscalls").unwrap().rows, 7);
    assert_eq!(read(&dir.join("syscalls/host=nodeA/part-0.parquet")).1, 7);
    assert_eq!(read(&dir.join("syscalls/host=nodeB/part-0.parquet")).1, 5);
}

/// The error's message, which must name `files`.
fn refused(logs: &[PathBuf], files: &[&Path]) -> (Error, String) {
    let tmp = tempfile::tempdir().unwrap();
    let e = dataset::export(logs, &tmp.path().join("job"), &Options::default(), &|_| {}).unwrap_err();
    let msg = e.to_string();
    for f in files {
        assert!(msg.contains(&f.display().to_string()), "{msg} does not name {}", f.display());
    }
    assert!(!tmp.path().join("job").exists(), "nothing written before the logs are checked");
    (e, msg)
}

#[test]
fn logs_a_dataset_cannot_hold_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let p = |n: &str| tmp.path().join(n);
    log(&p("a.bin"), "nodeA", 1, &[]);
    log(&p("b.bin"), "nodeB", 1, &[]);
    log(&p("a-again.bin"), "nodeA", 2, &[]);
    log(&p("job.bin"), "nodeA", 1, &["nodeA", "nodeB"]);
    log(&p("import.bin"), "", 1, &[]);
    log(&p("odd.bin"), "node/1", 1, &[]);
    std::fs::write(p("notes.bin"), "not a log\n").unwrap();

    let (e, msg) = refused(&[p("a.bin"), p("b.bin"), p("a-again.bin")], &[&p("a.bin"), &p("a-again.bin")]);
    assert!(matches!(e, Error::SameHost { .. }) && msg.contains("both of host nodeA"), "{msg}");

    let (e, msg) = refused(&[p("b.bin"), p("job.bin")], &[&p("job.bin")]);
    assert!(matches!(e, Error::Merged { .. }), "{msg}");
    assert!(
        msg.contains("merged log of 2 hosts (nodeA, nodeB)") && msg.contains("merged from nodeA.bin nodeB.bin"),
        "{msg}"
    );

    let (e, msg) = refused(&[p("import.bin")], &[&p("import.bin")]);
    assert!(matches!(e, Error::BadHost { .. }) && msg.contains("it is empty"), "{msg}");
    let (e, msg) = refused(&[p("a.bin"), p("odd.bin")], &[&p("odd.bin")]);
    assert!(matches!(e, Error::BadHost { .. }) && msg.contains("\"node/1\""), "{msg}");

    let (e, msg) = refused(&[p("a.bin"), p("notes.bin")], &[&p("notes.bin")]);
    assert!(matches!(e, Error::Log(LogError::NotALog { .. })), "{msg}");
    let (e, msg) = refused(&[p("a.bin"), p("missing.bin")], &[&p("missing.bin")]);
    assert!(matches!(e, Error::Log(LogError::Io { .. })), "{msg}");
}
