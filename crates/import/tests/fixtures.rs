//! Our own fixtures, one per format and quirk (see tests/fixtures/README.md).

mod common;

use common::*;
use mltrace_import::{ClockSpec, Format, ImportError, Options, Plan, RankMode, UNKNOWN_RET};
use mltrace_log::{blk, phase, BlockOp, CounterUnit, FileKind, IoOp, OpenOp, PhaseKind, Record, GPU_UTILISATION};

const S: u64 = 1_000_000_000;
/// nsecs 5000 s of the study's bpftrace traces is 2022-08-27 23:59:58.250 EDT.
const STUDY_BOOT: i128 = 1_661_659_198_250_000_000 - 5_000_000_000_000;

fn study_opts() -> Options {
    Options { tz: Some("America/Toronto".into()), ..Default::default() }
}

/// Unix ns of bpftrace `nsecs` in the study.
fn study_ns(nsecs: u64) -> u64 {
    (nsecs as i128 + STUDY_BOOT) as u64
}

fn near(got: u64, want: u64, slack: u64) -> bool {
    got.abs_diff(want) <= slack
}

fn counters(im: &Imported, group: &str, name: &str, pid: u32) -> Vec<(u64, f64)> {
    im.of(|r| match r.rec {
        Record::Counter(c) if r.strs[0] == group && r.strs[1] == name && c.pid == pid => Some((c.ts, c.value)),
        _ => None,
    })
}

fn malformed_lines(im: &Imported, file: &str) -> Vec<u64> {
    im.report(file).examples.iter().map(|(l, _)| *l).collect()
}

#[test]
fn study_run_lines_up_on_one_clock() {
    let files = fixture_dir("study");
    let im = import(&files, &study_opts());

    // Recognised from content, including headers that name other columns.
    let plan = Plan::new(&files, &study_opts()).unwrap();
    let formats: Vec<(String, Format)> =
        plan.files().iter().map(|f| (f.path.file_name().unwrap().to_string_lossy().into_owned(), f.format)).collect();
    for (name, want) in [
        ("cpu.out", Format::Mpstat),
        ("gpu.out", Format::Pmon),
        ("mllog.log", Format::Mllog),
        ("trace_bio.out", Format::Bio),
        ("trace_close.out", Format::Close),
        ("trace_create_del.out", Format::CreateDel),
        ("trace_mmap.out", Format::Mmap),
        ("trace_openat.out", Format::Openat),
        ("trace_read.out", Format::Read),
        ("trace_time_align.out", Format::TimeAlign),
        ("trace_vfs_rw.out", Format::VfsRw),
        ("trace_write.out", Format::Write),
    ] {
        assert!(formats.contains(&(name.to_string(), want)), "{name}: {formats:?}");
    }
    assert!(plan.notes().iter().any(|n| n.contains("±25 ms")), "{:?}", plan.notes());

    // Header: wall-clock anchor at the first record, what was imported.
    let first = im.recs.iter().map(|r| r.rec.ts()).min().unwrap();
    assert_eq!(im.header.source, "import");
    assert_eq!(im.header.clock, "realtime");
    assert_eq!((im.header.start.boottime_ns, im.header.start.realtime_ns), (first, first));
    assert_eq!((im.header.host.as_str(), im.header.cpu_count), ("dgx-a", 2));
    assert_eq!(im.header.command.len(), files.len());
    assert_eq!(im.trailer.end.boottime_ns, im.summary.last_ts.unwrap());
    // The bio request whose 3 s latency was printed as a negative number
    // started first: 2022-08-27 23:59:55.250 + 0.9 s.
    assert!(near(first, study_ns(4_997_900_000_000), 30_000_000), "{first}");

    // Malformed lines are counted with their numbers, never fatal.
    assert_eq!(malformed_lines(&im, "cpu.out"), [17]);
    assert_eq!(malformed_lines(&im, "gpu.out"), [12]);
    assert_eq!(malformed_lines(&im, "mllog.log"), [23]);
    assert_eq!(malformed_lines(&im, "trace_bio.out"), [6, 7]);
    assert_eq!(malformed_lines(&im, "trace_write.out"), [5, 6]);
    assert!(im.report("trace_write.out").examples[0].1.contains("out of range"));
    assert_eq!(im.report("trace_bio.out").repaired, [("latencies printed as negative 32-bit numbers".to_string(), 1)]);
    assert_eq!(im.report("cpu.out").skipped, 8, "Linux line, 3 headers, 4 Average lines");

    // Block I/O: start = completion - latency, the whole time on the device.
    let blocks = im.of(|r| match r.rec {
        Record::Block(b) => Some((b, r.strs.clone())),
        _ => None,
    });
    assert_eq!(blocks.len(), 4);
    let (b, s) = blocks.iter().find(|(b, _)| b.op == BlockOp::Write && b.bytes == 8192).unwrap();
    assert_eq!((b.pid, b.tid, b.queue, b.device, b.dev), (4250, 4250, 0, 3 * S, 0));
    assert_eq!(b.flags, blk::ISSUE_UNKNOWN | blk::TRACED);
    assert_eq!(s, &["python3", "nvme0n1"]);
    assert!(near(b.ts, study_ns(4_997_900_000_000), 30_000_000));
    let (b, _) = blocks.iter().find(|(b, _)| b.bytes == 131072).unwrap();
    assert!(near(b.end_ts(), study_ns(5_000_600_000_000), 30_000_000));
    assert_eq!(b.device, 1_200_000);
    // "Lost 3 events" is a loss record and a trailer total.
    assert_eq!(im.of(|r| if let Record::Lost(l) = r.rec { Some(l.count) } else { None }), [3]);
    assert_eq!(im.trailer.lost.len(), 1);
    assert_eq!(im.trailer.lost[0].count, 3);

    // Opens (a layout with the command name where the header says FD): the
    // result is not in the trace.
    let opens = im.of(|r| match r.rec {
        Record::Open(o) => Some((o, r.strs[0].clone())),
        _ => None,
    });
    let o = |p: &str| opens.iter().find(|(_, s)| s == p).unwrap_or_else(|| panic!("no open of {p}: {opens:?}")).0;
    assert_eq!(
        (o("/opt/conda/lib/tls/libpthread.so.0").ret, o("/opt/conda/lib/tls/libpthread.so.0").kind),
        (UNKNOWN_RET, FileKind::Unknown)
    );
    assert_eq!(o("/opt/conda/lib/libpthread.so.0").kind, FileKind::Regular);
    let img = o("/data/train/img_0001.npy");
    assert_eq!((img.pid, img.dur, img.op), (4250, 12000, OpenOp::Openat));
    assert!(near(img.ts, study_ns(5_000_200_000_000 - 12000), 30_000_000));
    assert_eq!(o("img_0002.npy").kind, FileKind::Regular, "relative path, filename after it");
    // creat(2) from trace_create_del.
    let c = o("/results/ckpt/model.pt");
    assert_eq!((c.op, c.mode, c.flags, c.ret), (OpenOp::Creat, 420, 0o1101, UNKNOWN_RET));

    // Reads and writes: ts = return - latency, errnos repaired.
    let ios = im.of(|r| match r.rec {
        Record::Io(io) => Some((io, r.strs[0].clone())),
        _ => None,
    });
    let io = |p: &str, ret: i64| {
        ios.iter().find(|(io, s)| s == p && io.ret == ret).unwrap_or_else(|| panic!("{p} {ret}: {ios:?}")).0
    };
    let r = io("img_0001.npy", 131072);
    assert_eq!((r.op, r.pid, r.fd, r.dur, r.requested), (IoOp::Read, 4250, -1, 450_000, 0));
    assert!(near(r.ts, study_ns(5_000_210_000_000 - 450_000), 30_000_000));
    assert_eq!(io("img_0002.npy", -11).op, IoOp::Read, "18446744073709551605 is -EAGAIN");
    let w = io("unet3d.log", 4096);
    assert_eq!((w.op, w.offset, w.requested, w.dur), (IoOp::Write, 1_048_576, 4096, 11963));
    assert_eq!(io("0", 43).op, IoOp::Write, "the tty's dentry name");
    assert_eq!(io("img_0003.npy", 4096).op, IoOp::Read, "vfs_rw R");
    assert_eq!(io("unet3d.log", 100).op, IoOp::Write, "vfs_rw W");

    let closes = im.of(|r| match r.rec {
        Record::Close(c) => Some((c.fd, c.dur, r.strs[0].clone())),
        _ => None,
    });
    assert_eq!(closes, [(5, 1500, "img_0001.npy".to_string()), (6, 1300, String::new())]);

    // Events with no record of their own are marks with their fields.
    let marks = im.of(|r| match r.rec {
        Record::Mark(m) => Some((m.pid, r.strs[0].clone(), r.strs[1].clone())),
        _ => None,
    });
    let mark = |n: &str| marks.iter().find(|m| m.1 == n).unwrap_or_else(|| panic!("no mark {n}: {marks:?}")).clone();
    assert_eq!(
        mark("mkdir"),
        (4242, "mkdir".into(), r#"{"latency_ns":25000,"mode":"0o777","path":"/results/ckpt"}"#.into())
    );
    assert_eq!(mark("unlink").2, r#"{"latency_ns":18000,"name":"old.pt","path":"/results/ckpt/old.pt"}"#);
    assert_eq!(mark("rmdir").2, r#"{"latency_ns":9000,"path":"/results/tmp"}"#);
    assert_eq!(mark("mmap").2, r#"{"addr":"0x7f3a2c000000","fd":7,"file":"data.lmdb","latency_ns":35000}"#);
    assert_eq!(mark("munmap").2, r#"{"addr":"0x7f3a2c000000","latency_ns":12000,"len":1048576}"#);

    // Process names.
    let comms = im.of(|r| match r.rec {
        Record::Comm(c) => Some((c.pid, r.strs[0].clone())),
        _ => None,
    });
    assert!(comms.contains(&(4242, "python3".into())) && comms.contains(&(4250, "python3".into())), "{comms:?}");

    // mpstat: 12-hour clock over midnight, all and per-CPU groups.
    let t = |s: u64| s * S;
    assert_eq!(
        counters(&im, "CPU", "usr", 0),
        [(t(1_661_659_199), 12.5), (t(1_661_659_200), 30.0), (t(1_661_659_201), 25.0)]
    );
    assert_eq!(counters(&im, "CPU 0", "idle", 0)[1], (t(1_661_659_200), 30.0));
    assert_eq!(counters(&im, "CPU 1", "iowait", 0).len(), 3);
    let units = im.of(|r| if let Record::Counter(c) = r.rec { Some(c.unit) } else { None });
    assert!(units.iter().filter(|u| **u == CounterUnit::Percent).count() >= 90);

    // pmon: two processes on GPU 0; one moves to GPU 1 and its GPU 0 use
    // drops to 0; GPU 1 goes idle and it drops there too.
    assert_eq!(
        counters(&im, "GPU 0", GPU_UTILISATION, 4242),
        [(t(1_661_659_199), 35.0), (t(1_661_659_200), 40.0), (t(1_661_659_201), 38.0)]
    );
    assert_eq!(counters(&im, "GPU 0", GPU_UTILISATION, 4250), [(t(1_661_659_199), 5.0), (t(1_661_659_200), 0.0)]);
    assert_eq!(
        counters(&im, "GPU 0", "framebuffer", 4250),
        [(t(1_661_659_199), 300.0 * 1048576.0), (t(1_661_659_200), 0.0)]
    );
    assert_eq!(
        counters(&im, "GPU 1", "framebuffer", 4250),
        [(t(1_661_659_200), 300.0 * 1048576.0), (t(1_661_659_201), 0.0)]
    );
    assert_eq!(counters(&im, "GPU 1", GPU_UTILISATION, 4250), [], "'-' is no value");
    assert_eq!(counters(&im, "GPU 0", "encoder", 4242), [(t(1_661_659_201), 0.0)]);

    // MLLOG: ranks merged, phases paired, unfinished ones kept.
    let ms = |x: u64| x * 1_000_000;
    let phases = im.of(|r| match r.rec {
        Record::Phase(p) => Some((r.strs[0].clone(), p.kind, p.ts, p.dur, p.rank, p.flags)),
        _ => None,
    });
    let mut phases = phases;
    phases.sort_by_key(|p| (p.2, std::cmp::Reverse(p.3)));
    let u = phase::UNFINISHED;
    let base = 1_661_659_198_000;
    assert_eq!(
        phases,
        [
            ("INIT".to_string(), PhaseKind::Init, ms(base + 300), ms(605), -1, 0),
            ("RUN".into(), PhaseKind::Run, ms(base + 950), ms(2950), -1, u),
            ("BLOCK 1-2".into(), PhaseKind::Block, ms(base + 1000), ms(1960), 0, 0),
            ("EPOCH 1".into(), PhaseKind::Epoch, ms(base + 1000), ms(800), 0, 0),
            ("EPOCH 2".into(), PhaseKind::Epoch, ms(base + 1810), ms(790), 0, 0),
            ("EVAL (epoch 2)".into(), PhaseKind::Eval, ms(base + 2610), ms(340), 0, 0),
            ("CHECKPOINT (epoch 2)".into(), PhaseKind::Checkpoint, ms(base + 2970), ms(130), 0, 0),
            ("EPOCH 3".into(), PhaseKind::Epoch, ms(base + 3200), ms(700), 0, u),
        ]
    );
    assert_eq!(mark("eval_accuracy"), (0, "eval_accuracy".into(), "0.8125".into()));
    assert_eq!(marks.iter().filter(|m| m.1 == "eval_accuracy" || m.1 == "global_batch_size").count(), 2, "not doubled");
    assert_eq!(mark("weights_initialization").2, "null");

    // Time order (phases are written when they end).
    let ts: Vec<u64> = im.of(|r| (!matches!(r.rec, Record::Phase(_))).then(|| r.rec.ts()));
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "records out of order");

    // Perfetto: the export loads without import errors and shows it all.
    let trace = export(&im.log);
    if let Some(tp) = perfetto_tp() {
        let q = tp_query(
            &tp,
            &trace,
            "study",
            &[
                "select count(*) from slice where name glob 'EPOCH *'",
                "select count(*) from slice where name glob '* (unfinished)'",
                "select count(*) from slice where name glob 'read *' or name glob 'write *'",
                "select count(*) from slice where name glob 'openat *'",
                "select count(*) from counter_track where name glob '*utilisation (any kernel running)'",
                "select count(*) from slice where dur < 0",
            ],
        );
        assert_eq!(scalar(&q[0]), 3);
        assert_eq!(scalar(&q[1]), 2);
        assert_eq!(scalar(&q[2]), 8);
        assert_eq!(scalar(&q[3]), 4);
        assert!(scalar(&q[4]) >= 1);
        assert_eq!(scalar(&q[5]), 0);
    }
}

fn offset_opts(offset: i64) -> Options {
    Options { clock: Some(ClockSpec::Offset(offset)), ..Default::default() }
}

#[test]
fn two_line_openat_and_vfs_open() {
    let im = import(&[fixture("formats/trace_open.out")], &offset_opts(1_000_000_000_000_000_000));
    let opens = im.of(|r| match r.rec {
        Record::Open(o) => Some((o.ts, o.dur, o.kind, r.strs[0].clone())),
        _ => None,
    });
    let t0 = 1_000_000_000_000_000_000u64;
    assert_eq!(
        opens,
        [
            (t0 + 7_000_000_105_000 - 9000, 9000, FileKind::Regular, "/lib/x86_64-linux-gnu/libc.so.6".into()),
            (t0 + 7_000_000_200_000 - 4000, 4000, FileKind::Unknown, "/usr/lib/nope.so".into()),
        ]
    );
    let r = im.report("trace_open.out");
    assert!(r.format.contains("two-line form") && r.format.contains("local-time column"), "{}", r.format);
    assert!(r.notes.iter().any(|n| n.starts_with("1 vfs_open lines had no openat")), "{:?}", r.notes);
}

#[test]
fn bpftrace_layouts() {
    let opts = offset_opts(0);
    // Later SECTOR layout, with bpftrace's local-time column.
    let im = import(&[fixture("formats/trace_bio_sector.out")], &opts);
    let b = im.of(|r| if let Record::Block(b) = r.rec { Some(b) } else { None });
    assert_eq!((b[0].sector, b[0].bytes, b[0].op, b[0].device), (1_953_525_168, 262_144, BlockOp::Read, 410_000));
    assert_eq!(b[0].ts, 9_100_000_000_000 - 410_000);
    assert_eq!((b[1].sector, b[1].op), (2048, BlockOp::Write));
    // Queue latency: time queued and time on the device.
    let im = import(&[fixture("formats/trace_bio_qlat.out")], &opts);
    let b = im.of(|r| if let Record::Block(b) = r.rec { Some(b) } else { None });
    assert_eq!(
        (b[0].ts, b[0].queue, b[0].device, b[0].flags),
        (9_200_000_000_000 - 900_000, 300_000, 600_000, blk::TRACED)
    );
    // Opens with fds, the filename before the full path, errnos.
    let im = import(&[fixture("formats/trace_openat_fd.out")], &opts);
    let o = im.of(|r| if let Record::Open(o) = r.rec { Some((o.ret, r.strs[0].clone(), o.kind)) } else { None });
    assert_eq!(
        o,
        [
            (3, "/data/train.csv".into(), FileKind::Regular),
            (-2, "/data/missing.csv".into(), FileKind::Unknown),
            (-13, "/root/secret".into(), FileKind::Unknown),
        ]
    );
    assert_eq!(im.report("trace_openat_fd.out").repaired[0].1, 1);
    // Offsets in hex and decimal.
    let im = import(&[fixture("formats/trace_read_offset.out")], &opts);
    let r = im.of(|r| if let Record::Io(io) = r.rec { Some((io.offset, io.offset_src, io.ret)) } else { None });
    assert_eq!(r, [(0x2000, mltrace_log::OffsetSrc::FilePos, 4096), (12288, mltrace_log::OffsetSrc::FilePos, 4096)]);
    // read()/write() in one file, a 7-digit tid run into the function name.
    let im = import(&[fixture("formats/trace_rw_syscalls.out")], &opts);
    let r =
        im.of(
            |r| if let Record::Io(io) = r.rec { Some((io.op, io.pid, io.tid, io.fd, r.strs[0].clone())) } else { None },
        );
    assert_eq!(
        r,
        [
            (IoOp::Read, 2036324, 2036330, 3, "shard-0002.tfrecord".into()),
            (IoOp::Write, 2036324, 2036330, 1, "0".into())
        ]
    );
    assert_eq!(im.report("trace_rw_syscalls.out").malformed, 0);
    // A layout with no return value.
    let im = import(&[fixture("formats/trace_write_tid_comm.out")], &opts);
    let w = im.of(|r| if let Record::Io(io) = r.rec { Some((io.op, io.tid, io.ret, io.dur)) } else { None });
    assert_eq!(w, [(IoOp::Write, 6003, UNKNOWN_RET, 44000)]);
    // mmap()/munmap() and create/delete with FUNCTION and TID columns.
    let im = import(&[fixture("formats/trace_mmap_function.out")], &opts);
    let m = im.of(|r| if let Record::Mark(m) = r.rec { Some((m.pid, r.strs[1].clone())) } else { None });
    assert_eq!(m[0], (6100, r#"{"addr":"0x7f0000000000","fd":9,"file":"data.mdb","flags":"0x1","hint":"0x0","latency_ns":8000,"len":1048576,"prot":"0x1","tid":6101}"#.into()));
    assert_eq!(m[1].1, r#"{"addr":"0x7f0000000000","latency_ns":4000,"len":1048576,"tid":6101}"#);
    let im = import(&[fixture("formats/trace_create_del_tid.out")], &opts);
    let m = im.of(|r| if let Record::Mark(_) = r.rec { Some(r.strs.clone()) } else { None });
    assert_eq!(m[0], ["vfs_mkdir", r#"{"file":"ckpt-10","latency_ns":7000,"mode":"0o755","tid":6201}"#]);
    assert_eq!(m[1], ["unlink", r#"{"file":"ckpt-9.pt","latency_ns":3000,"tid":6201}"#]);
}

#[test]
fn bpftrace_time_column_sets_the_clock() {
    // No trace_time_align output and no clock given: the trace's own
    // `time()` column pins it (to the second here: two lines).
    let opts =
        Options { tz: Some("UTC".into()), date: chrono::NaiveDate::from_ymd_opt(2023, 3, 11), ..Default::default() };
    let f = [fixture("formats/trace_bio_sector.out")];
    let plan = Plan::new(&f, &opts).unwrap();
    assert!(plan.notes().iter().any(|n| n.contains("2 local-time readings in")), "{:?}", plan.notes());
    let im = import(&f, &opts);
    let ten_fifteen = 1_678_529_700 * S; // 2023-03-11 10:15:00 UTC
    let b = im.of(|r| if let Record::Block(b) = r.rec { Some(b) } else { None });
    assert!((ten_fifteen..ten_fifteen + S).contains(&b[0].end_ts()), "{}", b[0].end_ts());
    assert_eq!(b[1].end_ts() - b[0].end_ts(), 100_000);
    assert_eq!(im.header.clock, "realtime");
}

#[test]
fn mpstat_dst_and_locales() {
    // 24-hour clock, ISO date, comma decimals, older column names, and the
    // hour that repeats when DST ends (Toronto, 2022-11-06).
    let im = import(&[fixture("formats/mpstat_24h_dst.txt")], &study_opts());
    let usr = counters(&im, "CPU", "usr", 0);
    let t = |s: u64| s * S;
    assert_eq!(usr, [(t(1_667_714_399), 1.5), (t(1_667_714_400), 2.5), (t(1_667_714_401), 3.5)]);
    assert_eq!(counters(&im, "CPU", "sys", 0).len(), 3);
    assert_eq!(counters(&im, "CPU", "steal", 0).len(), 3);
    assert_eq!(malformed_lines(&im, "mpstat_24h_dst.txt"), [7]);
    // No header at all: the date must be given; New Year's Eve rolls over.
    let f = [fixture("formats/mpstat_no_header.txt")];
    let e = Plan::new(&f, &study_opts()).err().expect("no date").to_string();
    assert!(e.contains("--date") && e.contains("mpstat_no_header.txt"), "{e}");
    let opts = Options { date: chrono::NaiveDate::from_ymd_opt(2022, 12, 31), ..study_opts() };
    let im = import(&f, &opts);
    let usr = counters(&im, "CPU", "usr", 0);
    // 2022-12-31 23:59:58 EST is 2023-01-01 04:59:58 UTC.
    assert_eq!(
        usr.iter().map(|u| u.0 / S).collect::<Vec<_>>(),
        [1_672_549_198, 1_672_549_199, 1_672_549_200, 1_672_549_201]
    );
}

#[test]
fn nvidia_smi_pmon_time_only_and_dmon() {
    let opts =
        Options { date: chrono::NaiveDate::from_ymd_opt(2023, 3, 11), tz: Some("UTC".into()), ..Default::default() };
    let im = import(&[fixture("formats/pmon_time_only.txt")], &opts);
    let t = |s: u64| s * S;
    let day = 1_678_492_800; // 2023-03-11 00:00 UTC
    assert_eq!(counters(&im, "GPU 0", GPU_UTILISATION, 7001), [(t(day + 86399), 80.0), (t(day + 86400), 85.0)]);
    assert_eq!(counters(&im, "GPU 1", "memory", 7001), [(t(day + 86399), 30.0), (t(day + 86400), 0.0)]);
    let comm = im.of(|r| if let Record::Comm(c) = r.rec { Some((c.pid, r.strs[0].clone())) } else { None });
    assert_eq!(comm, [(7001, "train worker".into())], "a command name with a space");

    let im = import(&[fixture("formats/dmon.txt")], &Options { tz: Some("UTC".into()), ..Default::default() });
    let t0 = 1_678_528_800; // 2023-03-11 10:00 UTC
    let all = im.of(|r| match r.rec {
        Record::Counter(c) if c.pid == 0 => Some((r.strs[0].clone(), r.strs[1].clone(), c.unit, c.ts, c.value)),
        _ => None,
    });
    let find = |g: &str, n: &str| {
        all.iter().filter(|c| c.0 == g && c.1 == n).map(|c| (c.2, c.3 / S - t0, c.4)).collect::<Vec<_>>()
    };
    assert_eq!(find("GPU 1", "power"), [(CounterUnit::Watts, 0, 250.0), (CounterUnit::Watts, 1, 248.0)]);
    assert_eq!(find("GPU 0", "temperature")[0], (CounterUnit::Celsius, 0, 34.0));
    assert_eq!(find("GPU 1", GPU_UTILISATION)[0], (CounterUnit::Percent, 0, 97.0));
    assert_eq!(find("GPU 1", "processor clock")[0], (CounterUnit::Megahertz, 0, 1410.0));
    assert_eq!(find("GPU 1", "framebuffer used")[0], (CounterUnit::Bytes, 0, 30000.0 * 1048576.0));
    assert_eq!(find("GPU 1", "PCIe rx"), [(CounterUnit::BytesPerSec, 0, 1200.0 * 1048576.0)], "N/A is no value");
    assert!(find("GPU 0", "memory temperature").is_empty(), "'-' is no value");
    assert_eq!(malformed_lines(&im, "dmon.txt"), [9]);
}

#[test]
fn mllog_bare_json_merged_or_per_rank() {
    let f = [fixture("formats/mllog_bare.jsonl")];
    let phases = |im: &Imported| {
        let mut p = im.of(|r| match r.rec {
            Record::Phase(p) => {
                Some((r.strs[0].clone(), p.ts / 1_000_000 - 1_700_000_000_000, p.dur / 1_000_000, p.rank))
            }
            _ => None,
        });
        p.sort();
        p
    };
    let im = import(&f, &Options::default());
    assert_eq!(phases(&im), [("EPOCH 0".into(), 1000, 1500, -1), ("RUN".into(), 0, 3001, -1)]);
    let marks = im.of(|r| if let Record::Mark(m) = r.rec { Some((r.strs.clone(), m.rank)) } else { None });
    assert_eq!(
        marks,
        [
            (vec!["train_loss".to_string(), "0.25".to_string()], 0),
            (vec!["run_stop".to_string(), r#"{"status":"success"}"#.to_string()], 0)
        ]
    );
    assert_eq!(malformed_lines(&im, "mllog_bare.jsonl"), [10]);

    let im = import(&f, &Options { ranks: RankMode::PerRank, ..Default::default() });
    assert_eq!(
        phases(&im),
        [
            ("EPOCH 0".into(), 1000, 1500, 0),
            ("EPOCH 0".into(), 1002, 998, 1),
            ("RUN".into(), 0, 3000, 0),
            ("RUN".into(), 4, 2997, 1)
        ]
    );
}

#[test]
fn every_fixture_exports_to_perfetto() {
    let mut files = fixture_dir("formats");
    files.retain(|f| f.extension().is_some_and(|e| e != "md"));
    let opts = Options {
        tz: Some("America/Toronto".into()),
        date: chrono::NaiveDate::from_ymd_opt(2022, 12, 31),
        clock: Some(ClockSpec::Offset(1_600_000_000_000_000_000)),
        dcgmi_start: chrono::NaiveDate::from_ymd_opt(2022, 12, 31).and_then(|d| d.and_hms_opt(10, 0, 0)),
        ..Default::default()
    };
    for f in &files {
        let im = import(std::slice::from_ref(f), &opts);
        assert!(im.summary.records > 0, "{}: no records", f.display());
        export(&im.log);
    }
    // Perfetto's importer, once over all of them together.
    let im = import(&files, &opts);
    let trace = export(&im.log);
    if let Some(tp) = perfetto_tp() {
        let q = tp_query(
            &tp,
            &trace,
            "formats",
            &[
                "select count(*) from slice",
                "select count(*) from counter",
                "select count(*) from slice where dur < 0",
                "select count(distinct name) from slice where name glob 'EPOCH*' or name glob 'RUN*'",
            ],
        );
        assert!(scalar(&q[0]) > 20, "{q:?}");
        assert!(scalar(&q[1]) > 50, "{q:?}");
        assert_eq!(scalar(&q[2]), 0, "slices without an end");
        assert_eq!(scalar(&q[3]), 2);
    }
}

#[test]
fn recognition_and_errors() {
    // --format forces one (and picks the layout within it).
    let f = [fixture("study/trace_close.out")];
    let plan = Plan::new(
        &f,
        &Options { format: Some(Format::Close), clock: Some(ClockSpec::Offset(0)), ..Default::default() },
    )
    .unwrap();
    assert_eq!(plan.files()[0].format, Format::Close);
    assert_eq!("trace_vfs_rw".parse::<Format>(), Ok(Format::VfsRw));
    assert!("csv".parse::<Format>().unwrap_err().contains("one of: mllog"));
    // A file nothing recognises: the error names it.
    let dir = std::env::temp_dir().join(format!("mltrace-import-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let odd = dir.join("notes.txt");
    std::fs::write(&odd, "shopping list\neggs\n").unwrap();
    match Plan::new(std::slice::from_ref(&odd), &Options::default()) {
        Err(ImportError::Unrecognised { path, reason }) => {
            assert_eq!(path, odd);
            assert!(reason.contains("shopping list"));
        }
        other => panic!("{:?}", other.err()),
    }
    // bpftrace files beside wall-clock ones, but nothing to align them: say how.
    let files = [fixture("study/trace_read.out"), fixture("study/mllog.log")];
    let e = Plan::new(&files, &study_opts()).err().unwrap().to_string();
    assert!(e.contains("trace_time_align") && e.contains("--clock-ref"), "{e}");
    // bpftrace alone, no reference: imported on its own boot clock, said so.
    let im = import(&[fixture("study/trace_read.out")], &Options::default());
    assert_eq!(im.header.clock, "boottime");
    assert_eq!(im.header.start.realtime_ns, 0);
    assert_eq!(im.recs.iter().map(|r| r.rec.ts()).min(), Some(5_000_110_000_000 - 5978));
    // A reference pair in local time.
    let opts = Options {
        clock: Some(ClockSpec::parse_reference("5000000000000=2022-08-27 23:59:58.25").unwrap()),
        ..study_opts()
    };
    let im = import(&[fixture("study/trace_read.out")], &opts);
    assert_eq!(im.recs.iter().map(|r| r.rec.ts()).min(), Some(study_ns(5_000_110_000_000 - 5978)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn garbage_is_reported_never_a_panic() {
    // Lines made of the words the formats use, in random order and length.
    let words = [
        "5000300000000",
        "4242",
        "python3",
        "-",
        "0x7f00",
        "R",
        "W",
        "-1294967296",
        "18446744073709551614",
        "22:24:33",
        "PM",
        "all",
        "CPU",
        "%usr",
        "#",
        "gpu",
        "pid",
        "20230211",
        ":::MLLOG",
        "{\"key\":",
        "\"time_ms\":",
        "}",
        "[3]",
        "mkdir()",
        "openat",
        "vfs_open",
        "12,5",
        "99999999999999999999999",
        "é",
        "\t",
        "Lost",
        "events",
        "@x[1]:",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let mut text = String::new();
    for _ in 0..3000 {
        let len = next(14);
        let line: Vec<&str> = (0..len).map(|_| words[next(words.len())]).collect();
        text.push_str(&line.join(" "));
        text.push('\n');
    }
    let path = std::env::temp_dir().join(format!("mltrace-import-garbage-{}.txt", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let mut ran = 0;
    for format in Format::ALL {
        let opts = Options {
            format: Some(format),
            tz: Some("Europe/Paris".into()),
            date: chrono::NaiveDate::from_ymd_opt(2023, 2, 11),
            clock: Some(ClockSpec::Offset(0)),
            ..Default::default()
        };
        let Ok(plan) = Plan::new(std::slice::from_ref(&path), &opts) else { continue };
        let mut log = Vec::new();
        if let Ok(s) = plan.run(&mut log) {
            if matches!(format, Format::TimeAlign | Format::VisStEnd | Format::VisComb | Format::Pids) {
                // Read only to align clocks (and the clock was given), or
                // never (copies of other files), or whole as JSON.
                continue;
            }
            let r = &s.files[0];
            ran += 1;
            assert_eq!(r.lines, 3000, "{format}");
            assert!(r.malformed > 0, "{format}: garbage read as data");
            if s.records > 0 {
                export(&log);
            }
        }
    }
    let _ = std::fs::remove_file(&path);
    assert!(ran >= 10, "only {ran} formats read the garbage");
}

#[test]
fn dcgmi_dmon_bare_with_a_start_and_prefixed_by_ts() {
    let f = [fixture("formats/dcgmi_dmon.txt")];
    let utc = || Options { tz: Some("UTC".into()), ..Default::default() };
    // dcgmi prints no time: without a start, a clear error up front.
    let e = Plan::new(&f, &utc()).err().expect("no start").to_string();
    assert!(e.contains("dcgmi_dmon.txt") && e.contains("--dcgmi-start"), "{e}");

    let start = chrono::NaiveDate::from_ymd_opt(2023, 3, 11).unwrap().and_hms_opt(10, 0, 0).unwrap();
    let opts = Options { dcgmi_start: Some(start), dcgmi_interval_ms: 500, ..utc() };
    let plan = Plan::new(&f, &opts).unwrap();
    assert_eq!(plan.files()[0].format, Format::Dcgmi);
    let im = import(&f, &opts);
    let t0 = 1_678_528_800 * S; // 2023-03-11 10:00 UTC
    let ms = 1_000_000;
    let all = im.of(|r| match r.rec {
        Record::Counter(c) if c.pid == 0 => Some((r.strs[0].clone(), r.strs[1].clone(), c.unit, c.ts, c.value)),
        _ => None,
    });
    let find = |g: &str, n: &str| {
        all.iter().filter(|c| c.0 == g && c.1 == n).map(|c| (c.2, (c.3 - t0) / ms, c.4)).collect::<Vec<_>>()
    };
    // One sample is a pass over the entities: GPU 0's rows 500 ms apart.
    let pct = CounterUnit::Percent;
    assert_eq!(find("GPU 0", "SM active"), [(pct, 0, 51.2), (pct, 500, 53.0), (pct, 1000, 53.0)]);
    assert_eq!(find("GPU 1", "SM active"), [(pct, 0, 0.0), (pct, 500, 0.1)]);
    assert_eq!(find("GPU 0", "SM occupancy"), [(pct, 0, 30.1), (pct, 500, 31.0)], "'bad' is no value");
    assert_eq!(find("GPU 0", "tensor active"), [(pct, 0, 24.5), (pct, 1000, 25.0)], "N/A is no value");
    assert_eq!(find("GPU 0", "DRAM active")[0], (pct, 0, 43.3));
    let bps = CounterUnit::BytesPerSec;
    assert_eq!(find("GPU 0", "PCIe tx")[0], (bps, 0, 1_234_567.0));
    assert_eq!(find("GPU 0", "PCIe rx")[0], (bps, 0, 7_654_321.0));
    assert_eq!(find("GPU 0", "NVLink rx")[0], (bps, 0, 0.0));
    assert_eq!(find("GPU 0", GPU_UTILISATION)[0], (pct, 0, 98.0));
    assert_eq!(find("GPU 0", "framebuffer used")[0], (CounterUnit::Bytes, 0, 30512.0 * 1048576.0));
    assert_eq!(malformed_lines(&im, "dcgmi_dmon.txt"), [7, 8]);

    // Rows prefixed by `ts '%F %.T'`: their own times; MIG instances are
    // their own groups.
    let f = [fixture("formats/dcgmi_dmon_ts.txt")];
    let im = import(&f, &utc());
    let all = im.of(|r| match r.rec {
        Record::Counter(c) => Some((r.strs[0].clone(), r.strs[1].clone(), (c.ts - t0) / ms, c.value)),
        _ => None,
    });
    let find = |g: &str, n: &str| all.iter().filter(|c| c.0 == g && c.1 == n).map(|c| (c.2, c.3)).collect::<Vec<_>>();
    assert_eq!(find("GPU 0", "SM active"), [(251, 51.2), (1251, 53.0)]);
    assert_eq!(find("GPU instance 1", "tensor active"), [(251, 10.0)]);
    assert_eq!(find("GPU compute instance 2", "DRAM active"), [(1251, 10.0)]);
    assert!(malformed_lines(&im, "dcgmi_dmon_ts.txt").is_empty());
}
