//! trace_visuals experiment directories: a small one written here at test
//! time (same layout as the study's), and the real one in
//! `../shared/samples` when it is there.

mod common;

use std::path::PathBuf;

use common::*;
use mltrace_import::{Options, Plan};
use mltrace_log::{PhaseKind, Record, GPU_UTILISATION};

const TRACE2: &str = "discslab-dl-bench_trace_visuals/data/trace2_exp_results/ta_8gpu_Sharpening_20220827222401";
const NS: i64 = 1_000_000_000;
/// 2022-08-27 22:24:33 EDT, the first mpstat sample of both directories.
const FIRST_CPU: i64 = 1_661_653_473;

fn toronto() -> Options {
    Options { tz: Some("America/Toronto".into()), ..Default::default() }
}

/// An experiment directory: the master trains on GPU 0, workers 1 and 2
/// are its DataLoader workers.
fn write_dir(name: &str, raw: bool) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mltrace-visuals-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let files: &[(&str, &str)] = &[
        ("pids.json", "{\n    \"101\": \"master\",\n    \"102\": \"worker 1\",\n    \"103\": \"worker 2\"\n}"),
        ("pids", "101\n102\n103\n"),
        (
            "read_data/read_102",
            "2022-08-28T03:24:38.862885533 102 832 5646 libc.so\n\
             2022-08-28T03:24:39.000000000 102 4096 2293 case_00090_y.npy\n\
             this line is damaged\n\
             2022-08-28T03:24:39.500000000 102 0 333892 \n",
        ),
        ("write_data/write_101", "2022-08-28T03:24:40.104164865 101 0x55563cd03120 34275 unet3d.log\n"),
        (
            "open_data/open_101",
            "2022-08-28T03:24:38.855426736 101 10628 /opt/conda/lib/python3.8/lib-dynload/grp.cpython-38-x86_64-linu \
             grp.cpython-38-x86_64-linux-gnu.so\n",
        ),
        ("bio_data/bio_102", "2022-08-28T03:24:38.879303107 102 R 4096 129922 \n"),
        ("st_end_data/st_end_data_102", "2022-08-28T03:24:38.862879887,2022-08-28T03:24:38.862885533,READ\n"),
        ("traces_data/comb_102", "2022-08-28T03:24:38.862885533,READ,5646\n"),
        ("traces_data/comb_111111", "2022-08-28T03:24:38.862885533,READ,5646\n"),
        (
            "mllog_data/timeline.csv",
            "2022-08-28T03:24:40.528,2022-08-28T03:24:41.710,INIT\n\
             2022-08-28T03:24:41.848,2022-08-28T03:24:43.663,EPOCH\n\
             2022-08-28T03:24:43.665,2022-08-28T03:24:44.278,EPOCH\n\
             2022-08-28T03:24:44.279,2022-08-28T03:24:45.832,EVAL\n\
             2022-08-28T03:24:45.833,2022-08-28T03:24:46.266,EPOCH\n",
        ),
        (
            "cpu_data/cpu_all.csv",
            "timestamp,%usr,%nice,%sys,%iowait,%irq,%soft,%steal,%guest,%gnice,%idle\n\
             2022-08-28T03:24:33,4.05,0.00,2.68,1.60,0.00,0.42,0.00,0.00,0.00,91.24\n\
             2022-08-28T03:24:34,0.74,0.00,2.45,0.36,0.00,0.52,0.00,0.00,0.00,95.93\n",
        ),
        ("gpu_data/gpu_avg.csv", "timestamp,sm,mem,fb\n2022-08-28T03:24:50,10,2,500\n"),
        ("notes.txt", "what we ran that day\n"),
    ];
    let raw_files: &[(&str, &str)] = &[
        (
            "cpu_data/cpu.all",
            "10:24:33 PM  all    4.05    0.00    2.68    1.60    0.00    0.42    0.00    0.00    0.00   91.24\n\
             10:24:34 PM  all    0.74    0.00    2.45    0.36    0.00    0.52    0.00    0.00    0.00   95.93\n",
        ),
        ("gpu_data/gpu.all", " 20220827   22:24:50      0    101     C    10     2     -     -   500   python\n"),
    ];
    for (p, text) in files.iter().chain(if raw { raw_files } else { &[] }) {
        let p = d.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    d
}

fn comms(im: &Imported) -> Vec<(u32, String)> {
    im.of(|r| match r.rec {
        Record::Comm(c) => Some((c.pid, r.strs[0].clone())),
        _ => None,
    })
}

fn phases(im: &Imported, kind: PhaseKind) -> Vec<String> {
    im.of(|r| match r.rec {
        Record::Phase(p) if p.kind == kind => Some(r.strs[0].clone()),
        _ => None,
    })
}

fn reads(im: &Imported, pid: u32) -> Vec<(i64, String)> {
    im.of(|r| match r.rec {
        Record::Io(x) if x.pid == pid && x.op == mltrace_log::IoOp::Read => Some((x.ts as i64, r.strs[0].clone())),
        _ => None,
    })
}

fn counters(im: &Imported, group: &str, name: &str) -> Vec<i64> {
    im.of(|r| match r.rec {
        Record::Counter(c) if r.strs[0] == group && r.strs[1] == name => Some(c.ts as i64),
        _ => None,
    })
}

#[test]
fn hand_made_directory() {
    let d = write_dir("full", true);
    let plan = Plan::new(std::slice::from_ref(&d), &toronto()).unwrap();
    let skipped: Vec<String> = plan
        .files()
        .iter()
        .filter(|f| f.skip.is_some())
        .map(|f| f.path.strip_prefix(&d).unwrap().display().to_string())
        .collect();
    assert_eq!(
        skipped,
        [
            "cpu_data/cpu_all.csv",
            "gpu_data/gpu_avg.csv",
            "pids",
            "st_end_data/st_end_data_102",
            "traces_data/comb_102",
            "traces_data/comb_111111"
        ]
    );
    assert!(plan.unrecognised()[0].0.ends_with("notes.txt"));
    assert!(plan.notes().iter().any(|n| n.contains("shifted by -1 h")), "{:?}", plan.notes());

    let im = import(std::slice::from_ref(&d), &toronto());
    // pids.json's names, not pmon's `python`; 103 did nothing.
    let mut c = comms(&im);
    c.sort();
    assert_eq!(c, [(101, "trainer (master)".into()), (102, "DataLoader worker 1".into())]);
    assert_eq!(phases(&im, PhaseKind::Epoch), ["EPOCH 1", "EPOCH 2", "EPOCH 3"]);
    assert_eq!(phases(&im, PhaseKind::Eval), ["EVAL (epoch 2)"]);
    assert_eq!(phases(&im, PhaseKind::Init).len(), 1);

    // Every read, started `lat` before its line, an hour earlier than written.
    let r = reads(&im, 102);
    assert_eq!(r.len(), 3);
    assert_eq!(r[0], ((FIRST_CPU + 5) * NS + 862_885_533 - 5646, "libc.so".into()));
    let rep = im.report("read_102");
    assert_eq!((rep.malformed, rep.examples[0].0), (1, 3));
    // The CPU samples once (cpu.all), not again from cpu_all.csv.
    assert_eq!(counters(&im, "CPU", "usr"), [FIRST_CPU * NS, (FIRST_CPU + 1) * NS]);
    assert!(counters(&im, "GPU (mean of all)", GPU_UTILISATION).is_empty());
    let opens = im.of(|r| matches!(r.rec, Record::Open(_)).then(|| r.strs[0].clone()));
    assert_eq!(opens, ["/opt/conda/lib/python3.8/lib-dynload/grp.cpython-38-x86_64-linux-gnu.so"]);
    let blocks = im.of(|r| match r.rec {
        Record::Block(b) => Some((b.pid, b.bytes, b.device)),
        _ => None,
    });
    assert_eq!(blocks, [(102, 4096, 129_922)]);

    if let Some(tp) = perfetto_tp() {
        let q = tp_query(
            &tp,
            &export(&im.log),
            "visuals",
            &["select name from process where pid = 102", "select count(*) from slice where name like 'EPOCH%'"],
        );
        assert_eq!(q[0][0][0].trim_matches('"'), "DataLoader worker 1");
        assert_eq!(scalar(&q[1]), 3);
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn processed_files_alone_take_tz_or_shift() {
    let d = write_dir("processed", false);
    let first_read = |opts: &Options| reads(&import(std::slice::from_ref(&d), opts), 102)[0].0;
    let written = (FIRST_CPU + 3600 + 5) * NS + 862_885_533 - 5646;
    // The scripts' local time + 5 h, in EDT: an hour ahead.
    assert_eq!(first_read(&toronto()), written - 3600 * NS);
    assert_eq!(first_read(&Options { tz: Some("UTC".into()), ..Default::default() }), written - 5 * 3600 * NS);
    assert_eq!(first_read(&Options { shift: Some(-2 * 3600 * NS), ..toronto() }), written - 2 * 3600 * NS);
    // Without raw files the GPU CSV is the GPU data.
    let im = import(std::slice::from_ref(&d), &toronto());
    assert_eq!(counters(&im, "GPU (mean of all)", GPU_UTILISATION).len(), 1);
    assert_eq!(counters(&im, "CPU", "usr"), [FIRST_CPU * NS, (FIRST_CPU + 1) * NS]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_studys_directory() {
    let Some(s) = samples() else { return };
    let d: PathBuf = s.join(TRACE2);
    let im = import(std::slice::from_ref(&d), &toronto());
    let c = comms(&im);
    assert!(c.contains(&(2_036_324, "launcher (master)".into())), "{c:?}");
    assert!(c.contains(&(2_036_325, "trainer GPU 0 (worker 1)".into())), "{c:?}");
    assert!(c.contains(&(2_036_328, "trainer GPU 3 (worker 4)".into())), "{c:?}");
    assert_eq!(phases(&im, PhaseKind::Epoch).len(), 40);
    assert_eq!(phases(&im, PhaseKind::Eval).len(), 4);
    let r = reads(&im, 2_036_325);
    let rep = im.report("read_2036325");
    assert_eq!((r.len(), rep.lines, rep.malformed), (6034, 6034, 0));
    let cpu = counters(&im, "CPU", "usr");
    assert_eq!((cpu.len(), cpu[0]), (511, FIRST_CPU * NS), "cpu.all only, not cpu_all.csv too");
    let first_io = im.of(|r| matches!(r.rec, Record::Io(_)).then(|| r.rec.ts() as i64)).into_iter().min().unwrap();
    let gap = first_io - cpu[0];
    assert!((0..10 * NS).contains(&gap), "first read {gap} ns after the first CPU sample");
    if let Some(tp) = perfetto_tp() {
        let q = tp_query(
            &tp,
            &export(&im.log),
            "visuals-sample",
            &["select name from process where pid = 2036325", "select count(*) from slice where name like 'EPOCH%'"],
        );
        assert_eq!(q[0][0][0].trim_matches('"'), "trainer GPU 0 (worker 1)");
        assert_eq!(scalar(&q[1]), 40);
    }
}
