//! The tables of a synthetic run and of an import, read back with the
//! parquet crate's own reader.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Cursor;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampNanosecondType};
use arrow_array::{Array, RecordBatch};
use mltrace_log::LogReader;
use mltrace_parquet::{export_log, Options};
use mltrace_testlog::synthetic;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn read(dir: &Path, table: &str) -> (Vec<RecordBatch>, usize) {
    let f = File::open(dir.join(format!("{table}.parquet"))).unwrap();
    let b = ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
    let groups = b.metadata().num_row_groups();
    (b.build().unwrap().map(|r| r.unwrap()).collect(), groups)
}

fn ints(batches: &[RecordBatch], col: &str) -> Vec<Option<i64>> {
    batches
        .iter()
        .flat_map(|b| {
            let a = b.column_by_name(col).unwrap().as_primitive::<Int64Type>();
            (0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))).collect::<Vec<_>>()
        })
        .collect()
}

fn strs(batches: &[RecordBatch], col: &str) -> Vec<Option<String>> {
    batches
        .iter()
        .flat_map(|b| {
            let a = b.column_by_name(col).unwrap().as_string::<i32>();
            (0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i).to_string())).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn synthetic_run() {
    let spec = synthetic::Spec { epochs: 3, epoch_ns: 2_000_000_000, rate: 5_000, workers: 2 };
    let mut buf = Vec::new();
    synthetic::write(&mut buf, spec).unwrap();
    let mut reader = LogReader::new(Path::new("synthetic"), Cursor::new(buf)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (survey, tables) = export_log(&mut reader, tmp.path(), &Options { row_group: 1000 }).unwrap();
    let rows: HashMap<&str, u64> = tables.iter().map(|t| (t.name, t.rows)).collect();
    assert_eq!(rows["syscalls"], survey.syscalls);
    assert_eq!(rows["block"], survey.blocks);
    assert_eq!(rows["counters"], survey.counters);

    let (s, groups) = read(tmp.path(), "syscalls");
    assert_eq!(s.iter().map(|b| b.num_rows() as u64).sum::<u64>(), survey.syscalls);
    assert_eq!(groups as u64, survey.syscalls.div_ceil(1000), "one row group per 1,000 rows");
    // Workers by slot, named as the trace names them, in every epoch.
    let (worker, process, epoch) = (ints(&s, "worker"), strs(&s, "process"), ints(&s, "epoch"));
    let slots: HashSet<i64> = worker.iter().flatten().copied().collect();
    assert_eq!(slots, HashSet::from([0, 1]));
    for (w, p) in worker.iter().zip(&process) {
        if let Some(w) = w {
            let p = p.as_deref().unwrap();
            assert!(p.starts_with(&format!("DataLoader worker {w}")), "{p}");
        }
    }
    let epochs: HashSet<i64> = epoch.iter().flatten().copied().collect();
    assert_eq!(epochs, HashSet::from([1, 2, 3]));
    // Wall = ts + the header's offset.
    let ts = ints(&s, "ts");
    let wall = s[0].column_by_name("wall").unwrap().as_primitive::<TimestampNanosecondType>().value(0);
    assert_eq!(wall - ts[0].unwrap(), (synthetic::REALTIME0 - synthetic::T0) as i64);

    // Each block request caused by a call points at a syscall row.
    let calls: HashSet<(i64, i64)> = ints(&s, "tid").into_iter().flatten().zip(ts.into_iter().flatten()).collect();
    let (b, _) = read(tmp.path(), "block");
    let caused: Vec<(i64, i64)> =
        ints(&b, "cause_tid").into_iter().zip(ints(&b, "cause_ts")).filter_map(|(a, b)| Some((a?, b?))).collect();
    assert!(!caused.is_empty());
    assert!(caused.iter().all(|c| calls.contains(c)));

    let (p, _) = read(tmp.path(), "phases");
    let kinds = strs(&p, "kind");
    let pe: Vec<i64> = kinds
        .iter()
        .zip(ints(&p, "epoch"))
        .filter(|(k, _)| k.as_deref() == Some("EPOCH"))
        .map(|(_, e)| e.unwrap())
        .collect();
    assert_eq!(pe, vec![1, 2, 3]);
    let (pr, _) = read(tmp.path(), "processes");
    assert!(strs(&pr, "role").iter().any(|r| r.as_deref() == Some("main")));
}

#[test]
fn imported_log() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates/import/tests/fixtures/study");
    let files: Vec<_> = ["trace_read.out", "trace_openat.out", "trace_time_align.out", "mllog.log"]
        .iter()
        .map(|f| fixtures.join(f))
        .collect();
    let plan = mltrace_import::Plan::new(&files, &mltrace_import::Options::default()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("run.bin");
    plan.run(File::create(&log).unwrap()).unwrap();
    let mut reader = LogReader::open(&log).unwrap();
    let (survey, tables) = export_log(&mut reader, &tmp.path().join("t"), &Options::default()).unwrap();
    assert!(survey.syscalls > 0);
    assert_eq!(tables.iter().find(|t| t.name == "syscalls").unwrap().rows, survey.syscalls);
    let (s, _) = read(&tmp.path().join("t"), "syscalls");
    // An import's timestamps are Unix time: wall is ts.
    let ts = ints(&s, "ts");
    let wall = s[0].column_by_name("wall").unwrap().as_primitive::<TimestampNanosecondType>().value(0);
    assert_eq!(wall, ts[0].unwrap());
    assert!(strs(&s, "path").iter().flatten().count() > 0);
    // Its MLLOG epochs are phases with their numbers.
    let (p, _) = read(&tmp.path().join("t"), "phases");
    let numbered = strs(&p, "kind")
        .iter()
        .zip(ints(&p, "epoch"))
        .filter(|(k, e)| k.as_deref() == Some("EPOCH") && e.is_some())
        .count();
    assert!(numbered > 0);
}

/// One record of each kind goes to the table its declaration names (a
/// new kind's table is made from its fields unless the exporter writes
/// that table by hand), and to no other; the process kinds are the
/// survey's, in `processes`.
#[test]
fn each_kind_is_a_row_of_the_table_its_declaration_names() {
    use mltrace_log::{Exec, Record, RecordWriter};
    for &(code, table) in Record::TABLES {
        let rec = Record::build(code, |name| match name {
            "ts" => synthetic::T0 + 1_000,
            "pid" | "tid" => u64::from(synthetic::ROOT),
            "dur" => 10,
            _ => 0,
        })
        .unwrap();
        let mut buf = Vec::new();
        let mut w = RecordWriter::new(&mut buf, &synthetic::header()).unwrap();
        let exec = |e: &mut mltrace_log::FrameEncoder| {
            let (filename, argv) = (e.intern(b"/usr/bin/python3"), e.intern(b"python3"));
            Record::Exec(Exec {
                ts: synthetic::T0,
                pid: synthetic::ROOT,
                tid: synthetic::ROOT,
                filename,
                argv,
                trunc: 0,
            })
        };
        w.push_with(exec).unwrap();
        w.push(&rec).unwrap();
        w.finish(&Default::default()).unwrap();
        let mut reader = LogReader::new(Path::new("one"), Cursor::new(buf)).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let (_, tables) = export_log(&mut reader, tmp.path(), &Options { row_group: 1000 }).unwrap();
        let with_rows: Vec<(&str, u64)> =
            tables.iter().filter(|t| t.rows > 0 && t.name != "processes").map(|t| (t.name, t.rows)).collect();
        let want: Vec<(&str, u64)> = if table == "processes" { vec![] } else { vec![(table, 1)] };
        assert_eq!(with_rows, want, "{} (code {code})", rec.kind_name());
    }
}
