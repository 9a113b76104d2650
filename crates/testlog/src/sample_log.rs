//! A hand-made log with every kind of record the exporters draw
//! (`sample_log`), and random interleavings of many processes' I/O
//! (`random_log`), for the exporters' tests: the Perfetto and Chrome JSON
//! writers are checked against each other on these.

use mltrace_log::*;

pub const T0: u64 = 7_000_000_123_456;
pub const ROOT: u32 = 100;
/// A process as `mltrace import` writes one: known only by its comm.
pub const IMPORTED: u32 = 4242;
pub const IMPORTED_COMM: &str = "dl_worker";

pub fn header(diskstats_sampled: bool) -> Header {
    let probes = if diskstats_sampled {
        vec![Probe {
            subsystem: mltrace_log::subsystem::COUNTERS.into(),
            mechanism: "procfs".into(),
            detail: "/proc/diskstats".into(),
        }]
    } else {
        vec![]
    };
    Header {
        probes,
        cpu_count: 16,
        mltrace_version: VERSION.into(),
        source: "test".into(),
        host: "box \"one\"".into(),
        command: vec!["/usr/bin/python3".into(), "/home/u/train.py".into(), "--epochs".into(), "2".into()],
        clock: "boottime".into(),
        root_pid: ROOT,
        start: ClockAnchor { boottime_ns: T0, realtime_ns: 1_760_000_000_000_000_000, monotonic_ns: T0 - 5_000 },
        ..Default::default()
    }
}

/// `us` microseconds (plus a few ns, to check sub-µs precision) after T0.
pub fn t(us: u64) -> u64 {
    T0 + us * 1000 + 7
}

/// Paths that need escaping in JSON, or are not UTF-8.
pub const ODD_PATHS: [&[u8]; 6] = [
    b"/data/we\"ird\\name\n.bin",
    b"/data/\xff\xfe-latin1-\xe9.bin",
    b"/data/tab\there\x01\x1f.bin",
    "/data/日本語 ü.bin".as_bytes(),
    b"/data/</script><!--.bin",
    b"/data/ends in a backslash\\",
];

fn io(ts: u64, dur: u64, pid: u32, tid: u32, op: IoOp, ret: i64, block_reqs: u32) -> impl FnOnce(&[u8], StrId) -> Io {
    move |_, path| Io {
        stack: 0,
        ts,
        dur,
        pid,
        tid,
        op,
        fd: 5,
        path,
        kind: FileKind::Regular,
        offset: 4096,
        offset_src: OffsetSrc::Explicit,
        requested: 65536,
        ret,
        block_reqs,
        summed: false,
    }
}

struct W(RecordWriter<Vec<u8>>);

impl W {
    fn rec(&mut self, r: Record) {
        self.0.push(&r).unwrap();
    }
    fn io(&mut self, path: &[u8], f: impl FnOnce(&[u8], StrId) -> Io) {
        self.0
            .push_with(|e| {
                let id = e.intern(path);
                Record::Io(f(path, id))
            })
            .unwrap();
    }
    #[allow(clippy::too_many_arguments)]
    fn block(
        &mut self,
        ts: u64,
        dur: u64,
        (pid, tid): (u32, u32),
        comm: &[u8],
        disk: (&[u8], u32),
        bytes: u64,
        op: BlockOp,
        flags: u16,
        cause: (u64, u32),
    ) {
        self.0
            .push_with(|e| {
                Record::Block(Block {
                    ts,
                    queue: dur / 4,
                    device: dur - dur / 4,
                    pid,
                    tid,
                    comm: e.intern(comm),
                    dev: disk.1,
                    disk: e.intern(disk.0),
                    sector: ts / 512,
                    bytes,
                    op,
                    flags,
                    error: if flags & 0x8000 != 0 { 10 } else { 0 },
                    cause_ts: cause.0,
                    cause_idx: cause.1,
                })
            })
            .unwrap();
    }
    fn counter(&mut self, ts: u64, group: &str, name: &str, unit: CounterUnit, pid: u32, value: f64) {
        self.0.push_with(|e| crate::counter(e, ts, group, name, unit, pid, value)).unwrap();
    }
}

const VDA: (&[u8], u32) = (b"vda", 254 << 20);
const NVME: (&[u8], u32) = (b"nvme0n1", (259 << 20) | 1);
/// Imported disks: known by name only, dev 0.
const SDA: (&[u8], u32) = (b"sda", 0);
const SDB: (&[u8], u32) = (b"sdb", 0);

/// Every record kind, overlapping threads, odd paths, several frames.
pub fn sample_log(diskstats_sampled: bool) -> Vec<u8> {
    let mut w = W(RecordWriter::new(Vec::new(), &header(diskstats_sampled)).unwrap().with_frame_records(7));
    // The recorded command, a thread, a forked worker.
    w.rec(Record::Fork(Fork { ts: t(1), pid: ROOT, tid: ROOT, parent_pid: 1, parent_tid: 1, thread: false }));
    w.0.push_with(|e| {
        Record::Exec(Exec {
            ts: t(2),
            pid: ROOT,
            tid: ROOT,
            filename: e.intern(b"/usr/bin/python3"),
            argv: e.intern(b"/usr/bin/python3\0/home/u/train.py\0--epochs\x002"),
            trunc: 0,
        })
    })
    .unwrap();
    w.0.push_with(|e| Record::Comm(Comm { ts: t(3), pid: ROOT, tid: ROOT, comm: e.intern(b"python3") })).unwrap();
    w.rec(Record::Fork(Fork { ts: t(4), pid: ROOT, tid: 101, parent_pid: ROOT, parent_tid: ROOT, thread: true }));
    w.rec(Record::Fork(Fork { ts: t(5), pid: ROOT, tid: 102, parent_pid: ROOT, parent_tid: ROOT, thread: true }));
    w.rec(Record::Fork(Fork { ts: t(6), pid: 200, tid: 200, parent_pid: ROOT, parent_tid: ROOT, thread: false }));
    w.0.push_with(|e| Record::Comm(Comm { ts: t(7), pid: 200, tid: 200, comm: e.intern(b"pt_data_worker") })).unwrap();
    // Started before the recording: named by its comm.
    w.rec(Record::Fork(Fork { ts: t(8), pid: 300, tid: 300, parent_pid: 5, parent_tid: 5, thread: false }));
    w.0.push_with(|e| Record::Comm(Comm { ts: t(9), pid: 300, tid: 300, comm: e.intern(b"old \"daemon\"") })).unwrap();

    // Opens: failed, created, relative to a dirfd, a pipe.
    for (i, (path, abs, flags, dirfd, ret, kind)) in [
        (&b"x.bin"[..], &b"/home/u/x.bin"[..], 0o2000000u32, -100, -2i64, FileKind::Unknown),
        (b"out/ckpt.pt", b"/home/u/out/ckpt.pt", 0o1101, -100, 7, FileKind::Regular),
        (b"rel", b"/srv/rel", 0, 9, 8, FileKind::Directory),
        (ODD_PATHS[0], ODD_PATHS[0], 0, -100, 5, FileKind::Regular),
        (ODD_PATHS[1], ODD_PATHS[1], 0o20200002, -100, 6, FileKind::Regular),
    ]
    .into_iter()
    .enumerate()
    {
        w.0.push_with(|e| {
            Record::Open(Open {
                stack: 0,
                ts: t(10 + 10 * i as u64),
                dur: 3_500,
                pid: ROOT,
                tid: ROOT,
                op: if i == 2 { OpenOp::Openat2 } else { OpenOp::Openat },
                dirfd,
                path: e.intern(path),
                abs_path: e.intern(abs),
                flags,
                mode: 0o644,
                ret,
                kind,
                trunc: 0,
                block_reqs: u32::from(i == 1),
            })
        })
        .unwrap();
    }
    // The open of ckpt.pt read its directory.
    w.block(t(21), 900_000, (ROOT, ROOT), b"python3", VDA, 4096, BlockOp::Read, blk::TRACED | blk::META, (t(20), 0));

    // Three threads reading at once: several lanes; one read caused two requests.
    let paths = [ODD_PATHS[2], ODD_PATHS[3], ODD_PATHS[4]];
    for k in 0..4u64 {
        for (j, tid) in [ROOT, 101, 102].into_iter().enumerate() {
            let ts = t(100 + k * 50 + j as u64 * 10);
            let reqs = if k == 1 && j == 1 { 2 } else { 0 };
            w.io(paths[j], io(ts, 40_000, ROOT, tid, IoOp::Pread64, 4096 << j, reqs));
        }
    }
    let cause = t(150 + 10);
    for idx in 0..2u32 {
        w.block(
            cause + 1_000 * (idx as u64 + 1),
            20_000,
            (ROOT, 101),
            b"python3",
            VDA,
            131072,
            BlockOp::Read,
            blk::TRACED | blk::READAHEAD | blk::SYNC,
            (cause, idx),
        );
    }
    // Reads and writes of the worker, errors, a pipe, no offset.
    w.io(b"pipe:[77]", |_, path| Io {
        stack: 0,
        ts: t(400),
        dur: 2_000,
        pid: 200,
        tid: 200,
        op: IoOp::Write,
        fd: 1,
        path,
        kind: FileKind::Pipe,
        offset: 0,
        offset_src: OffsetSrc::None,
        requested: 10,
        ret: -32,
        block_reqs: 0,
        summed: false,
    });
    w.io(b"/data/shard-1.tar", io(t(410), 10_000, 200, 200, IoOp::Read, -5, 0));
    w.io(b"/data/shard-1.tar", io(t(420), 10_000, 200, 200, IoOp::Readv, 1536, 0));
    w.io(b"/home/u/out/ckpt.pt", io(t(430), 50_000, 200, 200, IoOp::Pwrite64, 3 << 20, 1));
    w.io(b"/home/u/out/ckpt.pt", io(t(440), 5_000, 200, 201, IoOp::Fsync, 0, 0));
    w.block(t(431), 30_000, (200, 200), b"pt_data_worker", NVME, 3 << 20, BlockOp::Write, blk::TRACED, (t(430), 0));
    // A request that starts with its call and completes before it returns,
    // so its record comes first; a call whose second request was not seen.
    w.block(t(460), 3_000, (200, 200), b"pt_data_worker", NVME, 8192, BlockOp::Read, blk::TRACED, (t(460), 0));
    w.io(b"/data/shard-2.tar", io(t(460), 9_000, 200, 200, IoOp::Pread64, 8192, 1));
    w.io(b"/data/shard-2.tar", io(t(470), 9_000, 200, 200, IoOp::Pread64, 8192, 2));
    w.block(t(471), 3_000, (200, 200), b"pt_data_worker", NVME, 8192, BlockOp::Read, blk::TRACED, (t(470), 1));
    // Writeback, a flush, one in flight before tracing, a failed one, one
    // traced without a cause.
    w.block(
        t(500),
        80_000,
        (90, 90),
        b"kworker/u4:2",
        NVME,
        1 << 20,
        BlockOp::Write,
        blk::KTHREAD | blk::BACKGROUND,
        (0, 0),
    );
    w.block(t(510), 1_000, (91, 91), b"jbd2/vda1-8", VDA, 0, BlockOp::Flush, blk::KTHREAD | blk::PREFLUSH, (0, 0));
    w.block(t(1), 600_000, (0, 0), b"", VDA, 8192, BlockOp::Read, blk::START_UNKNOWN, (0, 0));
    w.block(t(520), 2_000, (300, 300), b"old \"daemon\"", VDA, 512, BlockOp::Discard, blk::TRACED | 0x8000, (0, 0));
    w.block(t(530), 7_000, (300, 300), b"old \"daemon\"", VDA, 4096, BlockOp::Write, blk::TRACED, (0, 0));
    // The old daemon's I/O names it (first described here).
    w.io(b"/var/log/x.log", io(t(540), 1_000, 300, 300, IoOp::Write, 100, 0));
    w.0.push_with(|e| {
        Record::Close(Close {
            stack: 0,
            ts: t(550),
            dur: 500,
            pid: 300,
            tid: 300,
            fd: 5,
            path: e.intern(ODD_PATHS[5]),
            kind: FileKind::Regular,
            ret: 0,
            summed: false,
        })
    })
    .unwrap();
    w.0.push_with(|e| {
        Record::Close(Close {
            stack: 0,
            ts: t(560),
            dur: 500,
            pid: 300,
            tid: 300,
            fd: 99,
            path: e.intern(b"?"),
            kind: FileKind::Unknown,
            ret: -9,
            summed: false,
        })
    })
    .unwrap();
    // Transfers, one of which read from disk.
    w.0.push_with(|e| {
        Record::Transfer(Transfer {
            stack: 0,
            ts: t(600),
            dur: 30_000,
            pid: 200,
            tid: 200,
            op: TransferOp::Sendfile,
            in_fd: 5,
            in_path: e.intern(b"/data/a.bin"),
            out_fd: 6,
            out_path: e.intern(b"socket:[5]"),
            requested: 1 << 20,
            ret: 1 << 20,
            block_reqs: 1,
        })
    })
    .unwrap();
    w.block(t(601), 20_000, (200, 200), b"pt_data_worker", VDA, 1 << 20, BlockOp::Read, blk::TRACED, (t(600), 0));
    w.0.push_with(|e| {
        Record::Transfer(Transfer {
            stack: 0,
            ts: t(640),
            dur: 100,
            pid: 200,
            tid: 200,
            op: TransferOp::CopyFileRange,
            in_fd: 5,
            in_path: e.intern(b"/data/a.bin"),
            out_fd: 7,
            out_path: e.intern(ODD_PATHS[0]),
            requested: 1 << 20,
            ret: -18,
            block_reqs: 0,
        })
    })
    .unwrap();
    // A process seen only through its I/O, then exec'd under a new name
    // after it was already shown.
    w.rec(Record::Fork(Fork { ts: t(700), pid: 400, tid: 400, parent_pid: 9, parent_tid: 9, thread: false }));
    w.io(b"/etc/passwd", io(t(701), 1_000, 400, 400, IoOp::Read, 10, 0));
    w.0.push_with(|e| {
        Record::Exec(Exec {
            ts: t(710),
            pid: 400,
            tid: 400,
            filename: e.intern(b"/bin/cat"),
            argv: e.intern(b"cat\0/etc/hostname"),
            trunc: 0,
        })
    })
    .unwrap();
    w.io(b"/etc/hostname", io(t(720), 1_000, 400, 400, IoOp::Read, 4, 0));
    // An exec with an empty argv is named by its file.
    w.rec(Record::Fork(Fork { ts: t(730), pid: 500, tid: 500, parent_pid: ROOT, parent_tid: ROOT, thread: false }));
    w.0.push_with(|e| {
        Record::Exec(Exec {
            ts: t(731),
            pid: 500,
            tid: 500,
            filename: e.intern(b"/bin/sh"),
            argv: e.intern(b""),
            trunc: 0,
        })
    })
    .unwrap();

    // An import: a process known only by its comm (and a thread's comm,
    // which names no process), results the source never printed, disks
    // without dev numbers, the process's own events as marks.
    w.0.push_with(|e| {
        Record::Comm(Comm { ts: t(740), pid: IMPORTED, tid: IMPORTED, comm: e.intern(IMPORTED_COMM.as_bytes()) })
    })
    .unwrap();
    w.0.push_with(|e| Record::Comm(Comm { ts: t(740), pid: 4300, tid: 4301, comm: e.intern(b"loader") })).unwrap();
    w.0.push_with(|e| {
        Record::Open(Open {
            ts: t(741),
            dur: 2_000,
            pid: IMPORTED,
            tid: IMPORTED,
            op: OpenOp::Openat,
            dirfd: -100,
            path: e.intern(b"/data/img_0001.npy"),
            abs_path: e.intern(b"/data/img_0001.npy"),
            ret: RET_UNKNOWN,
            kind: FileKind::Regular,
            ..Default::default()
        })
    })
    .unwrap();
    w.io(b"/data/img_0001.npy", io(t(744), 3_000, IMPORTED, IMPORTED, IoOp::Read, RET_UNKNOWN, 0));
    w.io(b"/data/img_0001.npy", io(t(748), 3_000, IMPORTED, IMPORTED + 1, IoOp::Write, 4096, 0));
    w.io(b"/data/img_0002.npy", io(t(749), 1_000, 4300, 4301, IoOp::Read, RET_UNKNOWN, 0));
    w.0.push_with(|e| {
        Record::Close(Close {
            stack: 0,
            ts: t(752),
            dur: 500,
            pid: IMPORTED,
            tid: IMPORTED,
            fd: -1,
            path: e.intern(b"/data/img_0001.npy"),
            kind: FileKind::Regular,
            ret: RET_UNKNOWN,
            summed: false,
        })
    })
    .unwrap();
    w.0.push_with(|e| {
        Record::Transfer(Transfer {
            stack: 0,
            ts: t(754),
            dur: 1_000,
            pid: IMPORTED,
            tid: IMPORTED,
            op: TransferOp::Sendfile,
            in_fd: 5,
            in_path: e.intern(b"/data/img_0001.npy"),
            out_fd: 6,
            out_path: e.intern(b"socket:[9]"),
            requested: 4096,
            ret: RET_UNKNOWN,
            block_reqs: 0,
        })
    })
    .unwrap();
    let traced = blk::TRACED | blk::ISSUE_UNKNOWN;
    w.block(t(756), 4_000, (IMPORTED, IMPORTED), b"dl_worker", SDA, 4096, BlockOp::Read, traced, (0, 0));
    w.block(t(757), 6_000, (IMPORTED, IMPORTED), b"dl_worker", SDB, 8192, BlockOp::Read, blk::ISSUE_UNKNOWN, (0, 0));
    w.block(t(770), 2_000, (90, 90), b"kworker/u4:2", SDB, 1 << 20, BlockOp::Write, blk::ISSUE_UNKNOWN, (0, 0));
    for (ts, name, value) in
        [(t(760), "mmap", r#"{"addr":"0x7f3a2c000000","fd":7,"file":"data.lmdb"}"#), (t(765), "unlink", "null")]
    {
        w.0.push_with(|e| {
            Record::Mark(Mark {
                ts,
                name: e.intern(name.as_bytes()),
                value: e.intern(value.as_bytes()),
                rank: -1,
                pid: IMPORTED,
            })
        })
        .unwrap();
    }

    // Losses.
    w.rec(Record::Lost(Lost { ts: t(800), kind: LostKind::RingFull, count: 12 }));
    w.rec(Record::Lost(Lost { ts: t(900), kind: LostKind::StringRead, count: 1 }));
    // Counters: machine-wide groups and per process, odd values.
    for i in 0..5u64 {
        let ts = t(1000 + i * 100);
        w.counter(ts, "CPU", "iowait", CounterUnit::Percent, 0, i as f64 * 1.5);
        // Per core: only busy (100 - idle - iowait) is shown.
        w.counter(ts, "CPU 3", "user", CounterUnit::Percent, 0, 100.0 / 3.0);
        w.counter(ts, "CPU 3", "iowait", CounterUnit::Percent, 0, 2.5);
        w.counter(ts, "CPU 3", "idle", CounterUnit::Percent, 0, 50.0 + i as f64);
        w.counter(ts + 1, "CPU 12", "idle", CounterUnit::Percent, 0, 99.9);
        w.counter(ts, "Disk vda (254:0)", "read", CounterUnit::BytesPerSec, 0, 1e6 * i as f64);
        w.counter(ts, "Memory", "used", CounterUnit::Bytes, 0, 3e9);
        w.counter(ts, "", "threads", CounterUnit::Count, ROOT, 4.0);
        w.counter(ts, "", "level", CounterUnit::None, ROOT, -1.0);
        w.counter(ts, "GPU 0 (NVIDIA H100)", "SM", CounterUnit::Percent, 0, if i == 2 { f64::NAN } else { 1e-9 });
        w.counter(ts, "GPU 0 (NVIDIA H100)", "memory used", CounterUnit::Bytes, 0, 8e10);
        w.counter(ts, "GPU 0", "memory", CounterUnit::Bytes, ROOT, (i * 1000) as f64);
        w.counter(ts, "", "rss", CounterUnit::Bytes, 200, 1.0e9 + i as f64);
    }
    // Training phases (nested, and two ranks overlapping) and marks.
    let phase = |ts, dur, kind, rank, flags| {
        move |e: &mut FrameEncoder, name: &str| {
            Record::Phase(Phase { ts, dur, kind, name: e.intern(name.as_bytes()), rank, pid: ROOT, flags })
        }
    };
    for (name, p) in [
        ("INIT", phase(t(0), 90_000, PhaseKind::Init, -1, 0)),
        ("RUN", phase(t(100), 1_000_000, PhaseKind::Run, -1, 0)),
        ("EPOCH 1", phase(t(100), 500_000, PhaseKind::Epoch, -1, 0)),
        ("EPOCH 2", phase(t(600), 500_000, PhaseKind::Epoch, -1, 0)),
        ("EVAL", phase(t(1000), 100_000, PhaseKind::Eval, 0, 0)),
        ("EVAL", phase(t(1050), 100_000, PhaseKind::Eval, 1, 0)),
        ("CHECKPOINT \"best\"", phase(t(1100), 900_000, PhaseKind::Checkpoint, -1, phase::UNFINISHED)),
    ] {
        w.0.push_with(|e| p(e, name)).unwrap();
    }
    // MLLOG's marks (pid 0) and one of a process, on its track.
    for (ts, name, value, rank, pid) in [
        (t(1050), "eval_accuracy", "0.9071", 0, 0),
        (t(1060), "submission_status", "null", -1, 0),
        (t(1070), "note", "\"a\\b\"", 1, 0),
        (t(1080), "note", "\"mine\"", 1, ROOT),
    ] {
        w.0.push_with(|e| {
            Record::Mark(Mark { ts, name: e.intern(name.as_bytes()), value: e.intern(value.as_bytes()), rank, pid })
        })
        .unwrap();
    }
    // Exits: a thread, processes (exit status, a signal), one never seen before.
    w.rec(Record::Exit(Exit { ts: t(2000), pid: ROOT, tid: 101, status: 0, process_exit: false }));
    w.rec(Record::Exit(Exit { ts: t(2001), pid: 200, tid: 200, status: 3 << 8, process_exit: true }));
    w.rec(Record::Exit(Exit { ts: t(2002), pid: 300, tid: 300, status: 9 | 0x80, process_exit: true }));
    w.rec(Record::Exit(Exit { ts: t(2003), pid: 600, tid: 600, status: 0, process_exit: true }));
    w.rec(Record::Exit(Exit { ts: t(2004), pid: ROOT, tid: ROOT, status: 0, process_exit: true }));
    finish(w.0)
}

fn finish(w: RecordWriter<Vec<u8>>) -> Vec<u8> {
    let trailer = Trailer {
        end: ClockAnchor { boottime_ns: t(3000), realtime_ns: 1_760_000_000_003_000_000, monotonic_ns: 0 },
        exit_status: Some(0),
        ..Default::default()
    };
    w.finish(&trailer).unwrap()
}

/// xorshift64*.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Many processes and threads doing overlapping I/O with block requests,
/// records in completion order as the recorder writes them.
pub fn random_log(seed: u64, n: usize) -> Vec<u8> {
    let mut rng = Rng(seed | 1);
    let mut w = W(RecordWriter::new(Vec::new(), &header(false)).unwrap().with_frame_records(64));
    w.rec(Record::Fork(Fork { ts: t(0), pid: ROOT, tid: ROOT, parent_pid: 1, parent_tid: 1, thread: false }));
    for p in 1..4u32 {
        let pid = ROOT + p * 100;
        w.rec(Record::Fork(Fork { ts: t(p as u64), pid, tid: pid, parent_pid: ROOT, parent_tid: ROOT, thread: false }));
    }
    // (end, record) pairs, sorted by end before writing.
    let mut recs: Vec<(u64, Vec<u8>, Record)> = Vec::new();
    for i in 0..n {
        let pid = ROOT + rng.below(4) as u32 * 100;
        let tid = pid + rng.below(5) as u32;
        let ts = t(10 + rng.below(200_000));
        let dur = 1 + rng.below(2_000_000);
        let path = format!("/data/f{}.bin", rng.below(50)).into_bytes();
        let reqs = if rng.below(4) == 0 { 1 + rng.below(3) as u32 } else { 0 };
        let op = [IoOp::Read, IoOp::Pread64, IoOp::Write, IoOp::Pwrite64][rng.below(4) as usize];
        let ret = if rng.below(20) == 0 { -(rng.below(40) as i64) - 1 } else { rng.below(1 << 21) as i64 };
        let rec = Record::Io(Io {
            stack: 0,
            ts,
            dur,
            pid,
            tid,
            op,
            fd: 3 + (i % 7) as i32,
            path: StrId(0),
            kind: FileKind::Regular,
            offset: rng.next_u64() >> 20,
            offset_src: OffsetSrc::Explicit,
            requested: 1 << 20,
            ret,
            block_reqs: reqs,
            summed: false,
        });
        recs.push((ts + dur, path, rec));
        for k in 0..reqs {
            // Requests start inside the call (after its first ns: see the
            // sample log for one at the same ns); some complete after it.
            let bts = ts + 1 + rng.below(dur);
            let bdur = 1 + rng.below(3_000_000);
            let disk = if rng.below(3) == 0 { NVME } else { VDA };
            let rec = Record::Block(Block {
                ts: bts,
                queue: bdur / 3,
                device: bdur - bdur / 3,
                pid,
                tid,
                comm: StrId(0),
                dev: disk.1,
                disk: StrId(1),
                sector: rng.next_u64() >> 24,
                bytes: 4096 * (1 + rng.below(64)),
                op: if op.is_write() { BlockOp::Write } else { BlockOp::Read },
                flags: blk::TRACED,
                error: 0,
                cause_ts: ts,
                cause_idx: k,
            });
            recs.push((bts + bdur, disk.0.to_vec(), rec));
        }
        if rng.below(10) == 0 {
            let bts = t(10 + rng.below(200_000));
            let bdur = 1 + rng.below(5_000_000);
            let rec = Record::Block(Block {
                ts: bts,
                queue: 0,
                device: bdur,
                pid: 77,
                tid: 77,
                comm: StrId(0),
                dev: VDA.1,
                disk: StrId(1),
                sector: rng.next_u64() >> 24,
                bytes: 4096 * (1 + rng.below(256)),
                op: BlockOp::Write,
                flags: blk::KTHREAD | blk::BACKGROUND,
                error: 0,
                cause_ts: 0,
                cause_idx: 0,
            });
            recs.push((bts + bdur, VDA.0.to_vec(), rec));
        }
        if rng.below(50) == 0 {
            let ts = t(10 + rng.below(200_000));
            recs.push((ts, vec![], Record::Lost(Lost { ts, kind: LostKind::RingFull, count: 1 + rng.below(9) })));
        }
        if rng.below(20) == 0 {
            let ts = t(10 + rng.below(200_000));
            let c = Record::Counter(Counter {
                ts,
                group: StrId(0),
                name: StrId(1),
                unit: CounterUnit::Percent,
                pid: if rng.below(2) == 0 { 0 } else { pid },
                value: rng.below(1000) as f64 / 7.0,
            });
            recs.push((ts, b"CPU\0busy".to_vec(), c));
        }
    }
    recs.sort_by_key(|r| r.0);
    for (_, s, rec) in recs {
        w.0.push_with(|e| match rec {
            Record::Io(mut r) => {
                r.path = e.intern(&s);
                Record::Io(r)
            }
            Record::Block(mut b) => {
                b.comm = e.intern(if b.pid == 77 { b"kworker/0:1" } else { b"python3" });
                b.disk = e.intern(&s);
                Record::Block(b)
            }
            Record::Counter(mut c) => {
                let (g, n) = s.split_at(s.iter().position(|&b| b == 0).unwrap());
                c.group = e.intern(g);
                c.name = e.intern(&n[1..]);
                Record::Counter(c)
            }
            r => r,
        })
        .unwrap();
    }
    finish(w.0)
}
