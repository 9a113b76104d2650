//! A made-up training run, for tests and benchmarks of the export: a main
//! process and data-loader workers respawned each epoch, reading sample
//! files (some slowly, some failing, some from disk with block requests),
//! a checkpoint written per epoch, a shell helper that execs, MLLOG
//! phases and marks, machine and process counters every 100 ms, and one
//! loss of events. Its duration and event rate are chosen by the caller.

use std::io::{self, Write};

use mltrace_log::*;

/// What to make.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub epochs: u32,
    pub epoch_ns: u64,
    /// Syscall records per second, all workers together.
    pub rate: u64,
    pub workers: u32,
}

/// The run's first timestamp (BOOTTIME) and its wall-clock time.
pub const T0: u64 = 1_000_000_000_000;
pub const REALTIME0: u64 = 1_795_000_000_000_000_000;
pub const ROOT: u32 = 100;

pub fn header() -> Header {
    Header {
        source: "synthetic".into(),
        host: "synth".into(),
        clock: "boottime".into(),
        cpu_count: 4,
        command: vec!["python3".into(), "train.py".into()],
        root_pid: ROOT,
        start: ClockAnchor { boottime_ns: T0, realtime_ns: REALTIME0, monotonic_ns: T0 },
        probes: vec![Probe {
            subsystem: mltrace_log::subsystem::COUNTERS.into(),
            mechanism: "procfs".into(),
            detail: String::new(),
        }],
        ..Default::default()
    }
}

struct Gen<W: Write> {
    w: RecordWriter<W>,
    syscalls: u64,
}

impl<W: Write> Gen<W> {
    fn rec(&mut self, r: Record) -> io::Result<()> {
        if matches!(r, Record::Io(_) | Record::Open(_) | Record::Close(_) | Record::Transfer(_)) {
            self.syscalls += 1;
        }
        self.w.push(&r)
    }

    fn with(&mut self, build: impl FnOnce(&mut FrameEncoder) -> Record) -> io::Result<()> {
        let mut syscall = false;
        self.w.push_with(|e| {
            let r = build(e);
            syscall = matches!(r, Record::Io(_) | Record::Open(_) | Record::Close(_) | Record::Transfer(_));
            r
        })?;
        self.syscalls += u64::from(syscall);
        Ok(())
    }

    fn counter(&mut self, ts: u64, group: &str, name: &str, unit: CounterUnit, pid: u32, value: f64) -> io::Result<()> {
        self.with(|e| crate::counter(e, ts, group, name, unit, pid, value))
    }
}

/// Writes the run; returns how many syscall records it has.
pub fn write<W: Write>(out: W, spec: Spec) -> io::Result<u64> {
    let mut g = Gen { w: RecordWriter::new(out, &header())?, syscalls: 0 };
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    g.with(|e| {
        Record::Exec(Exec {
            ts: T0,
            pid: ROOT,
            tid: ROOT,
            filename: e.intern(b"/usr/bin/python3"),
            argv: e.intern(b"python3\0train.py"),
            trunc: 0,
        })
    })?;
    // A shell helper: forks, reads, execs cat.
    g.rec(Record::Fork(Fork { ts: T0 + 1000, pid: 150, tid: 150, parent_pid: ROOT, parent_tid: ROOT, thread: false }))?;
    g.with(|e| {
        Record::Io(Io {
            ts: T0 + 2000,
            dur: 500,
            pid: 150,
            tid: 150,
            op: IoOp::Read,
            fd: 3,
            path: e.intern(b"/etc/ld.so.cache"),
            kind: FileKind::Regular,
            requested: 4096,
            ret: 4096,
            ..Default::default()
        })
    })?;
    g.with(|e| {
        Record::Exec(Exec {
            ts: T0 + 3000,
            pid: 150,
            tid: 150,
            filename: e.intern(b"/usr/bin/cat"),
            argv: e.intern(b"cat\0/etc/hostname"),
            trunc: 0,
        })
    })?;
    g.rec(Record::Exit(Exit { ts: T0 + 5000, pid: 150, tid: 150, status: 0, process_exit: true }))?;
    let init_end = T0 + spec.epoch_ns / 4;
    let end = init_end + u64::from(spec.epochs) * spec.epoch_ns;
    let step = (1_000_000_000 / spec.rate.max(1)).max(1);
    let mut next_counter = T0;
    let mut next_pid = 1000;
    let mut sample = 0u64;
    let mut workers: Vec<u32> = Vec::new();
    let mut epoch = 0u32;
    let mut epoch_start = init_end;
    let mut t = init_end;
    g.with(|e| {
        Record::Phase(Phase {
            ts: T0,
            dur: init_end - T0,
            kind: PhaseKind::Init,
            name: e.intern(b"INIT"),
            rank: -1,
            pid: 0,
            flags: 0,
        })
    })?;
    while t < end {
        // Counters every 100 ms.
        while next_counter <= t {
            let c = next_counter;
            for (name, v) in [("usr", 40.0), ("sys", 10.0), ("iowait", 5.0), ("idle", 45.0), ("steal", 0.0)] {
                g.counter(c, "CPU", name, CounterUnit::Percent, 0, v)?;
            }
            for core in 0..4 {
                let group = format!("CPU {core}");
                g.counter(c, &group, "iowait", CounterUnit::Percent, 0, 2.0)?;
                g.counter(c, &group, "idle", CounterUnit::Percent, 0, 30.0 + f64::from(core) * 10.0)?;
            }
            g.counter(c, "Memory", "used", CounterUnit::Bytes, 0, 8e9 + (c - T0) as f64)?;
            g.counter(
                c,
                "GPU 0 (Synthetic)",
                "utilisation",
                CounterUnit::Percent,
                0,
                if epoch.is_multiple_of(2) { 90.0 } else { 60.0 },
            )?;
            g.counter(c, "", "CPU", CounterUnit::Percent, ROOT, 95.0)?;
            next_counter += 100_000_000;
        }
        // A new epoch: respawn the workers.
        if t >= epoch_start && (workers.is_empty() || t >= epoch_start + spec.epoch_ns) {
            if !workers.is_empty() {
                // The epoch that ended: its workers exit, the main process checkpoints.
                for &w in &workers {
                    g.rec(Record::Exit(Exit { ts: t, pid: w, tid: w, status: 0, process_exit: true }))?;
                }
                for k in 0..4u64 {
                    g.with(|e| {
                        Record::Io(Io {
                            stack: 0,
                            ts: t + k * 10_000,
                            dur: 8000,
                            pid: ROOT,
                            tid: ROOT,
                            op: IoOp::Write,
                            fd: 9,
                            path: e.intern(b"/ckpt/model.pt"),
                            kind: FileKind::Regular,
                            offset: k << 20,
                            offset_src: OffsetSrc::FilePos,
                            requested: 1 << 20,
                            ret: 1 << 20,
                            block_reqs: 0,
                            summed: false,
                        })
                    })?;
                }
                g.with(|e| crate::epoch(e, epoch, epoch_start, t))?;
                let acc = format!("{:.4}", 0.5 + f64::from(epoch) / 100.0);
                g.with(|e| {
                    Record::Mark(Mark {
                        ts: t,
                        name: e.intern(b"eval_accuracy"),
                        value: e.intern(acc.as_bytes()),
                        rank: -1,
                        pid: 0,
                    })
                })?;
                epoch_start = t;
            }
            epoch += 1;
            workers.clear();
            for _ in 0..spec.workers {
                let pid = next_pid;
                next_pid += 1;
                g.rec(Record::Fork(Fork { ts: t, pid, tid: pid, parent_pid: ROOT, parent_tid: ROOT, thread: false }))?;
                workers.push(pid);
            }
            if epoch > spec.epochs {
                epoch -= 1;
                break;
            }
        }
        let w = workers[((sample / 8) % u64::from(spec.workers)) as usize];
        let path = format!("/data/train/sample-{:05}.npz", sample % 20_000);
        let r = rand();
        match sample % 8 {
            0 => {
                let ret = if r % 997 == 0 { -2 } else { 3 };
                g.with(|e| {
                    let p = e.intern(path.as_bytes());
                    Record::Open(Open {
                        ts: t,
                        dur: 3000,
                        pid: w,
                        tid: w,
                        op: OpenOp::Openat,
                        dirfd: -100,
                        path: p,
                        abs_path: p,
                        ret,
                        kind: FileKind::Regular,
                        ..Default::default()
                    })
                })?;
            }
            7 => g.with(|e| {
                Record::Close(Close {
                    stack: 0,
                    ts: t,
                    dur: 400,
                    pid: w,
                    tid: w,
                    fd: 3,
                    path: e.intern(path.as_bytes()),
                    kind: FileKind::Regular,
                    ret: 0,
                    summed: false,
                })
            })?,
            _ => {
                // Now and then slow, from disk.
                let from_disk = r % 64 == 0;
                let dur = if r % 4096 == 1 {
                    40_000_000
                } else if from_disk {
                    300_000
                } else {
                    2_000 + (r >> 50)
                };
                let dur = dur.min(step * 8 * u64::from(spec.workers));
                if from_disk {
                    g.with(|e| {
                        Record::Block(Block {
                            ts: t + 1000,
                            queue: 5000,
                            device: dur.saturating_sub(10_000).max(1),
                            pid: w,
                            tid: w,
                            comm: e.intern(b"python3"),
                            dev: 254 << 20,
                            disk: e.intern(b"vda"),
                            sector: r >> 40,
                            bytes: 65536,
                            op: BlockOp::Read,
                            flags: blk::TRACED,
                            error: 0,
                            cause_ts: t,
                            cause_idx: 0,
                        })
                    })?;
                }
                g.with(|e| {
                    Record::Io(Io {
                        stack: 0,
                        ts: t,
                        dur,
                        pid: w,
                        tid: w,
                        op: IoOp::Pread64,
                        fd: 3,
                        path: e.intern(path.as_bytes()),
                        kind: FileKind::Regular,
                        offset: (sample % 8) * 65536,
                        offset_src: OffsetSrc::Explicit,
                        requested: 65536,
                        ret: 65536,
                        block_reqs: u32::from(from_disk),
                        summed: false,
                    })
                })?;
            }
        }
        if sample == 1000 {
            g.rec(Record::Lost(Lost { ts: t, kind: LostKind::RingFull, count: 17 }))?;
        }
        sample += 1;
        t += step;
    }
    g.with(|e| crate::epoch(e, epoch, epoch_start, t))?;
    g.with(|e| {
        Record::Phase(Phase {
            ts: init_end,
            dur: t - init_end,
            kind: PhaseKind::Run,
            name: e.intern(b"RUN"),
            rank: -1,
            pid: 0,
            flags: 0,
        })
    })?;
    for &w in &workers {
        g.rec(Record::Exit(Exit { ts: t, pid: w, tid: w, status: 0, process_exit: true }))?;
    }
    g.rec(Record::Exit(Exit { ts: t + 1000, pid: ROOT, tid: ROOT, status: 0, process_exit: true }))?;
    let trailer = Trailer {
        end: ClockAnchor { boottime_ns: t + 2000, realtime_ns: REALTIME0 + (t + 2000 - T0), monotonic_ns: t + 2000 },
        exit_status: Some(0),
        ..Default::default()
    };
    g.w.finish(&trailer)?;
    Ok(g.syscalls)
}

/// A flat log like a long recording, for the export benchmark: 8
/// processes x 2 threads reading and opening files with jittery timing,
/// `n` records, no process records or counters.
pub fn flat<W: Write>(f: W, n: u64) -> io::Result<()> {
    let header = Header { source: "bench".into(), clock: "boottime".into(), ..Default::default() };
    let mut w = RecordWriter::new(f, &header)?;
    let mut ts = 1_000_000_000u64;
    let mut s = 7u64;
    for i in 0..n {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ts += 500 + (s & 1023);
        let pid = 1000 + (i % 8) as u32;
        let tid = pid + ((i / 8) % 2) as u32 * 100;
        let file = format!("/data/shard-{:05}.bin", (i / 64) % 5000);
        w.push_with(|e| {
            if i % 16 == 0 {
                Record::Open(Open {
                    ts,
                    dur: 2000,
                    pid,
                    tid,
                    path: e.intern(file.as_bytes()),
                    abs_path: e.intern(file.as_bytes()),
                    ret: 3,
                    kind: FileKind::Regular,
                    ..Default::default()
                })
            } else {
                Record::Io(Io {
                    stack: 0,
                    ts,
                    dur: 300 + (s >> 54),
                    pid,
                    tid,
                    op: IoOp::Read,
                    fd: 3,
                    path: e.intern(file.as_bytes()),
                    kind: FileKind::Regular,
                    offset: (i % 16) * 65536,
                    offset_src: OffsetSrc::FilePos,
                    requested: 65536,
                    ret: 65536,
                    block_reqs: 0,
                    summed: false,
                })
            }
        })?;
    }
    w.finish(&Trailer::default())?;
    Ok(())
}
