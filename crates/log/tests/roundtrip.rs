//! Round trips through the real file format, and the reader's behaviour on
//! damaged and foreign files.

use std::io::{Cursor, Write};
use std::path::Path;

use mltrace_log::*;

fn header() -> Header {
    Header {
        mltrace_version: VERSION.into(),
        source: "test".into(),
        command: vec!["python".into(), "train.py".into()],
        clock: "boottime".into(),
        start: ClockAnchor { boottime_ns: 1_000_000_000, realtime_ns: 1_700_000_000_000_000_000, monotonic_ns: 999 },
        ..Default::default()
    }
}

/// Records with every kind and awkward values; strings given as text so the
/// test can compare after reading.
fn sample(i: u64) -> (Record, Vec<&'static str>) {
    let ts = 1_000_000_000 + i * 1_337;
    match i % 20 {
        0 => (
            Record::Fork(Fork {
                ts,
                pid: 10 + i as u32,
                tid: 10 + i as u32,
                parent_pid: 7,
                parent_tid: 8,
                thread: i.is_multiple_of(2),
            }),
            vec![],
        ),
        1 => (
            Record::Exec(Exec { ts, pid: 7, tid: 7, filename: StrId(0), argv: StrId(1), trunc: trunc::ARG }),
            vec!["/usr/bin/python3", "python3\0train.py"],
        ),
        2 => (Record::Comm(Comm { ts, pid: 7, tid: 9, comm: StrId(0) }), vec!["pt_data_worker"]),
        3 => (Record::Exit(Exit { ts, pid: 7, tid: 7, status: -9, process_exit: true }), vec![]),
        4 => (
            Record::Open(Open {
                stack: 0,
                ts,
                dur: 4_000,
                pid: 7,
                tid: 7,
                op: OpenOp::Openat2,
                dirfd: -100,
                path: StrId(0),
                abs_path: StrId(1),
                flags: 0o2000101,
                mode: 0o644,
                ret: -2,
                kind: FileKind::Unknown,
                trunc: 0,
                block_reqs: 2,
            }),
            vec!["data/x.bin", "/home/u/data/x.bin"],
        ),
        5 => (
            Record::Io(Io {
                stack: 0,
                ts,
                dur: 800 + i,
                pid: 7,
                tid: 8,
                op: if i.is_multiple_of(2) { IoOp::Pread64 } else { IoOp::Writev },
                fd: 3,
                path: StrId(0),
                kind: FileKind::Regular,
                offset: u64::MAX - i,
                offset_src: OffsetSrc::Explicit,
                requested: 65536,
                ret: if i % 4 == 1 { -5 } else { 4096 },
                block_reqs: (i % 3) as u32,
                summed: false,
            }),
            vec!["/data/shard-0001.tar"],
        ),
        6 => (
            Record::Close(Close {
                stack: 0,
                ts,
                dur: 100,
                pid: 7,
                tid: 7,
                fd: 3,
                path: StrId(0),
                kind: FileKind::Pipe,
                ret: 0,
                summed: false,
            }),
            vec!["pipe:[1234]"],
        ),
        7 => (
            Record::Transfer(Transfer {
                stack: 0,
                ts,
                dur: 5,
                pid: 7,
                tid: 7,
                op: TransferOp::CopyFileRange,
                in_fd: 3,
                in_path: StrId(0),
                out_fd: 4,
                out_path: StrId(1),
                requested: 1 << 20,
                ret: 12,
                block_reqs: 1,
            }),
            vec!["/a", "/b"],
        ),
        8 => (Record::Lost(Lost { ts, kind: LostKind::RingFull, count: i }), vec![]),
        10 => (
            Record::Counter(Counter {
                ts,
                group: StrId(0),
                name: StrId(1),
                unit: CounterUnit::Percent,
                pid: (i % 2) as u32 * 77,
                value: i as f64 / 3.0,
            }),
            vec!["GPU 0 (NVIDIA H100)", "SM"],
        ),
        11 => (
            Record::Phase(Phase {
                ts,
                dur: 1_000_000 * i,
                kind: PhaseKind::Epoch,
                name: StrId(0),
                rank: -1,
                pid: 0,
                flags: phase::UNFINISHED,
            }),
            vec!["EPOCH 12"],
        ),
        12 => (
            Record::Mark(Mark { ts, name: StrId(0), value: StrId(1), rank: 3, pid: 9 }),
            vec!["eval_accuracy", "0.9071"],
        ),
        14 => (
            Record::PageCache(PageCache {
                ts,
                pid: 7,
                tid: 8,
                dev: (254 << 20) | 1,
                ino: 1 << 40 | i,
                path: StrId(0),
                offset: if i.is_multiple_of(2) { i * 4096 } else { u64::MAX - 4095 },
                bytes: 4096 << (i % 10),
                during: CacheDuring::from_u8((i % 5) as u8),
            }),
            vec!["/data/shard-0001.arrow"],
        ),
        15 => (
            Record::IoUring(IoUring {
                ts,
                dur: 90_000 + i,
                pid: 7,
                tid: 8,
                op: UringOp::from_u8(if i.is_multiple_of(2) { 22 } else { 2 }),
                fd: if i.is_multiple_of(3) { -1 } else { 5 },
                path: StrId(0),
                kind: FileKind::Regular,
                offset: if i.is_multiple_of(2) { i * 4096 } else { u64::MAX - 1 },
                offset_src: OffsetSrc::from_u8((i % 3) as u8),
                requested: 1 << 20,
                ret: if i % 4 == 1 { -125 } else { 65536 },
                user_data: u64::MAX - i,
                complete_tid: if i.is_multiple_of(3) { 8 } else { 4_000_000 },
                flags: uring::FIXED_FILE | uring::SQPOLL,
            }),
            vec!["/data/shard-0002.bin"],
        ),
        16 => (
            Record::Aio(Aio {
                ts,
                dur: 3_000,
                pid: 7,
                tid: 7,
                op: AioOp::from_u8((i % 3) as u8),
                ctx: 0x7f00_0000_1000,
                fd: if i.is_multiple_of(2) { -1 } else { 9 },
                path: StrId(0),
                kind: FileKind::BlockDev,
                cmd: AioCmd::from_u8(if i.is_multiple_of(2) { 7 } else { 1 }),
                offset: i << 30,
                nr: 64,
                min_nr: i as i64 % 5,
                ret: if i % 4 == 1 { -11 } else { 17 },
                read_bytes: 17 << 20,
                write_bytes: u64::MAX - i,
                counted: 16,
                errors: u16::MAX,
                flags: aio::PARTIAL,
                block_reqs: u32::MAX - 1,
            }),
            vec!["/dev/nvme0n1"],
        ),
        17 => (
            Record::Mapping(Mapping {
                ts,
                dur: 2_000 + i,
                pid: 7,
                tid: 8,
                op: MapOp::from_u8((i % 4) as u8),
                fd: if i.is_multiple_of(2) { 3 } else { -1 },
                path: StrId(0),
                kind: FileKind::Regular,
                dev: (254 << 20) | 1,
                ino: 1 << 33 | i,
                file_flags: mapf::MEMORY_FS,
                offset: 1 << 30,
                addr: if i.is_multiple_of(3) { 0 } else { 0x7f00_0000_0000 + (i << 12) },
                len: 256 << 20,
                new_len: 512 << 20,
                prot: 5,
                flags: 0x0800_0001 | (30 << 26),
                ret: if i % 5 == 1 { -12 } else { 0x7fff_ffff_f000 },
            }),
            vec!["/data/train.arrow"],
        ),
        18 => (
            Record::MajorFault(MajorFault {
                ts,
                dur: if i.is_multiple_of(2) { 0 } else { 3_000_000 },
                pid: 7,
                tid: 9,
                addr: if i.is_multiple_of(4) { 0x7f00_0000_0000 + (i << 12) } else { 4096 },
                flags: fault::FILE,
                dev: 254 << 20,
                ino: i,
                path: StrId(0),
                offset: u64::MAX - 4095,
            }),
            vec!["/data/x.npy"],
        ),
        19 => (
            Record::GpuEvent(GpuEvent {
                ts,
                group: StrId(0),
                kind: GpuEventKind::from_u8((i % 4) as u8),
                code: if i.is_multiple_of(4) { 0x14 } else { u64::MAX - i },
                pid: (i % 3) as u32 * 0x40_0000,
            }),
            vec!["GPU 0 (NVIDIA H100)"],
        ),
        13 => (
            Record::IoAccounting(IoAccounting {
                ts,
                pid: 7,
                tid: 7 + (i % 3) as u32,
                at: AcctPoint::from_u8((i % 3) as u8),
                have: acct::CHARS | acct::BYTES,
                rchar: u64::MAX - i,
                wchar: i << 40,
                syscr: i,
                syscw: 0,
                read_bytes: 4096 * i,
                write_bytes: 1 << 63,
                cancelled_write_bytes: 3,
            }),
            vec![],
        ),
        _ => (
            Record::Block(Block {
                ts,
                queue: 1500,
                device: 80_000 + i,
                pid: 7,
                tid: 8,
                comm: StrId(0),
                dev: (253 << 20) | 16,
                disk: StrId(1),
                sector: 1 << 40 | i,
                bytes: 131072,
                op: if i % 20 == 9 { BlockOp::Write } else { BlockOp::Discard },
                flags: blk::SYNC | blk::TRACED | blk::READAHEAD,
                error: if i.is_multiple_of(3) { 10 } else { 0 },
                cause_ts: if i % 2 == 1 { ts - 777 } else { 0 },
                cause_idx: (i % 5) as u32,
            }),
            vec!["kworker/u4:2", "nvme0n1"],
        ),
    }
}

/// Rewrites the StrIds of `rec` in order to `ids` (repeating the last).
fn with_ids(rec: Record, ids: &[StrId]) -> Record {
    let mut i = 0;
    let mut r = rec;
    r.map_strs(|_| {
        let id = ids[i.min(ids.len() - 1)];
        i += 1;
        id
    });
    r
}

fn strings_of(frame: &Frame<'_>, rec: &Record) -> Vec<String> {
    let mut out = Vec::new();
    rec.visit(&mut |_, v| {
        if let Value::Str(id) = v {
            out.push(frame.str_lossy(id).into_owned());
        }
    });
    out
}

fn write_log(n: u64, frame_records: usize, finish: bool) -> (Vec<u8>, Vec<(Record, Vec<&'static str>)>) {
    let mut w = RecordWriter::new(Vec::new(), &header()).unwrap().with_frame_records(frame_records);
    let mut expect = Vec::new();
    for i in 0..n {
        let (rec, strs) = sample(i);
        w.push_with(|enc| {
            let ids: Vec<StrId> = strs.iter().map(|s| enc.intern(s.as_bytes())).collect();
            with_ids(rec, &ids)
        })
        .unwrap();
        expect.push((rec, strs));
    }
    let out = if finish {
        w.finish(&Trailer { exit_status: Some(0), ..Default::default() }).unwrap()
    } else {
        w.cut().unwrap();
        // Reach in: a cut log is what's on disk when the recorder is killed.
        let RecordWriterParts { out } = into_parts(w);
        out
    };
    (out, expect)
}

struct RecordWriterParts {
    out: Vec<u8>,
}

fn into_parts(w: RecordWriter<Vec<u8>>) -> RecordWriterParts {
    // Finishing then stripping the trailer frame gives the bytes of a log
    // whose recorder died right after its last frame.
    let out = w.finish(&Trailer::default()).unwrap();
    let trailer_len = out.len() - last_frame_start(&out);
    RecordWriterParts { out: out[..out.len() - trailer_len].to_vec() }
}

fn last_frame_start(b: &[u8]) -> usize {
    (0..b.len() - 4).rev().find(|&i| &b[i..i + 4] == b"MLTF").unwrap()
}

type ReadBack = (Vec<(Record, Vec<String>)>, Vec<Diagnostic>, Option<Trailer>);

fn read_all(bytes: &[u8]) -> ReadBack {
    let mut r = LogReader::new(Path::new("mem.bin"), Cursor::new(bytes.to_vec())).unwrap();
    let mut got = Vec::new();
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(rec) = f.next_record() {
            let strs = strings_of(&f, &rec);
            got.push((rec, strs));
        }
    }
    let t = r.trailer().cloned();
    (got, r.take_diagnostics(), t)
}

fn normalise(rec: Record) -> Record {
    with_ids(rec, &[StrId(0); 2])
}

#[test]
fn every_kind_round_trips_across_frames() {
    let (bytes, expect) = write_log(10_000, 777, true);
    let (got, diags, trailer) = read_all(&bytes);
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(got.len(), expect.len());
    for ((g, gs), (e, es)) in got.iter().zip(&expect) {
        assert_eq!(normalise(*g), normalise(*e));
        assert_eq!(gs, es);
    }
    let t = trailer.unwrap();
    assert_eq!(t.records, 10_000);
    assert_eq!(t.frames, 13);
    assert_eq!(t.exit_status, Some(0));
}

#[test]
fn header_round_trips() {
    let (bytes, _) = write_log(1, 10, true);
    let r = LogReader::new(Path::new("h.bin"), Cursor::new(bytes)).unwrap();
    assert_eq!(r.header(), &header());
    assert_eq!(r.version(), (2, 0));
}

#[test]
fn cut_log_reads_up_to_last_frame_and_says_so() {
    let (bytes, expect) = write_log(1000, 100, false);
    // Also cut in the middle of the last frame.
    let last = last_frame_start(&bytes);
    let mid = &bytes[..last + 60];
    let (got, diags, trailer) = read_all(mid);
    assert!(trailer.is_none());
    assert_eq!(got.len(), 900);
    assert_eq!(diags.len(), 1, "{diags:?}");
    match &diags[0] {
        Diagnostic::Cut { offset, end, last_ts, frame, .. } => {
            assert_eq!(*offset as usize, last);
            assert_eq!(*end as usize, last + 60);
            assert_eq!(*last_ts, Some(expect[..900].iter().map(|e| e.0.end_ts()).max().unwrap()));
            let f = frame.expect("the cut frame's header was intact");
            assert_eq!((f.len as usize, f.present, f.records, f.trailer), (bytes.len() - last, 60, 100, false));
            assert_eq!(f.first_ts, expect[900..].iter().map(|e| e.0.ts()).min().unwrap());
            let text = diags[0].describe(&header());
            let missing = bytes.len() - last - 60;
            assert!(text.contains(&format!("cut at byte {}, {missing} of the", last + 60)), "{text}");
            assert!(text.contains(&format!("offset {last}")) && text.contains("100 events"), "{text}");
        }
        d => panic!("{d:?}"),
    }
    let (got, diags, _) = read_all(&bytes);
    assert_eq!(got.len(), 1000);
    assert!(matches!(diags[..], [Diagnostic::Cut { frame: None, .. }]), "{diags:?}");
    // Cut inside a frame header: the bytes it has are named.
    let (_, diags, _) = read_all(&bytes[..last + 20]);
    let text = diags[0].describe(&header());
    assert!(text.contains(&format!("cut at byte {}", last + 20)) && text.contains("20 of the 44 bytes"), "{text}");
}

#[test]
fn cut_trailer_says_every_event_was_read() {
    let (bytes, _) = write_log(300, 100, true);
    let trailer = last_frame_start(&bytes);
    let (got, diags, t) = read_all(&bytes[..bytes.len() - 5]);
    assert!(t.is_none());
    assert_eq!(got.len(), 300);
    match &diags[..] {
        [d @ Diagnostic::Cut { offset, frame: Some(f), .. }] => {
            assert_eq!((*offset as usize, f.trailer, f.len - f.present), (trailer, true, 5));
            let text = d.describe(&header());
            assert!(text.contains("every event was read"), "{text}");
        }
        d => panic!("{d:?}"),
    }
}

/// Reads a log whose only frame is cut: an error, not an empty log.
fn read_err(bytes: &[u8]) -> String {
    let mut r = LogReader::new(Path::new("one.bin"), Cursor::new(bytes.to_vec())).unwrap();
    loop {
        match r.next_frame() {
            Ok(Some(mut f)) => while f.next_record().is_some() {},
            Ok(None) => panic!("read to the end without an error: {:?}", r.take_diagnostics()),
            Err(e) => return e.to_string(),
        }
    }
}

#[test]
fn a_log_with_nothing_readable_is_an_error_naming_the_cut() {
    let (bytes, _) = write_log(100, 1000, false);
    let first = last_frame_start(&bytes);
    let cut = first + 200;
    let e = read_err(&bytes[..cut]);
    let missing = bytes.len() - cut;
    assert!(e.starts_with("one.bin: nothing readable: "), "{e}");
    assert!(e.contains(&format!("cut at byte {cut}, {missing} of the")) && e.contains("100 events"), "{e}");
    // Killed before the first frame: only the header is there.
    let e = read_err(&bytes[..first]);
    assert!(e.contains(&format!("cut at byte {first} (no trailer)")) && e.contains("before its first frame"), "{e}");
    // Damaged, not cut: also nothing to read.
    let mut bad = bytes.clone();
    bad[first + 60] ^= 0xff;
    assert!(read_err(&bad).contains("checksum"));
    // A complete log with no records is not damage.
    let (empty, _) = write_log(0, 10, true);
    let (got, diags, t) = read_all(&empty);
    assert!(got.is_empty() && diags.is_empty() && t.is_some());
}

#[test]
fn damaged_frame_is_skipped_with_its_offset_and_time() {
    let (mut bytes, expect) = write_log(1000, 100, true);
    // Damage the payload of the 4th frame.
    let starts: Vec<usize> = (0..bytes.len() - 4).filter(|&i| &bytes[i..i + 4] == b"MLTF").collect();
    let f4 = starts[3];
    bytes[f4 + 60] ^= 0xff;
    let (got, diags, trailer) = read_all(&bytes);
    assert!(trailer.is_some());
    assert_eq!(got.len(), 900);
    assert_eq!(diags.len(), 1, "{diags:?}");
    match &diags[0] {
        Diagnostic::Skipped { offset, first_ts, last_ts, reason, .. } => {
            assert_eq!(*offset as usize, f4);
            assert_eq!(*first_ts, Some(expect[300..400].iter().map(|e| e.0.ts()).min().unwrap()));
            assert_eq!(*last_ts, Some(expect[300..400].iter().map(|e| e.0.end_ts()).max().unwrap()));
            assert!(reason.contains("checksum"), "{reason}");
            let text = diags[0].describe(&header());
            assert!(text.contains(&format!("offset {f4}")), "{text}");
            assert!(text.contains("UTC"), "{text}");
        }
        d => panic!("{d:?}"),
    }
    // Damage a frame header instead: the reader finds the next frame.
    let (mut bytes, _) = write_log(1000, 100, true);
    bytes[starts[5] + 10] ^= 0x55;
    let (got, diags, trailer) = read_all(&bytes);
    assert!(trailer.is_some());
    assert_eq!(got.len(), 900);
    assert!(matches!(&diags[..], [Diagnostic::Skipped { first_ts: None, .. }]), "{diags:?}");
}

#[test]
fn foreign_and_broken_files_are_refused_clearly() {
    let err = |b: &[u8]| LogReader::new(Path::new("x.bin"), Cursor::new(b.to_vec())).err().unwrap().to_string();
    assert!(err(b"").contains("empty"));
    assert!(err(b"\x0a\x10\x08\x01").contains("Perfetto"));
    assert!(err(b"{\"traceEvents\": []}").contains("JSON"));
    assert!(err(b"Attaching 4 probes...\n").contains("mltrace import"));
    assert!(err(b"MLTR").contains("cut short"));
    let (bytes, _) = write_log(10, 10, true);
    assert!(err(&bytes[..15]).contains("cut short"));
    assert!(err(&bytes[..40]).contains("cut short"));
    let mut newer = bytes.clone();
    newer[8] = 3;
    let e = err(&newer);
    assert!(e.contains("format 3.0") && e.contains("x.bin"), "{e}");
    let mut bad = bytes.clone();
    bad[25] ^= 1;
    assert!(err(&bad).contains("checksum"));
}

#[test]
fn garbage_tail_is_reported_as_cut() {
    let (mut bytes, _) = write_log(100, 50, false);
    bytes.write_all(&[0xAB; 5000]).unwrap();
    let (got, diags, _) = read_all(&bytes);
    assert_eq!(got.len(), 100);
    assert!(matches!(&diags[..], [Diagnostic::Cut { .. }]), "{diags:?}");
}

#[test]
fn sequential_reads_compress_to_few_bytes() {
    // 100k preads of 4 KiB walking a file with jittery timing: the columnar
    // layout should leave little beyond the timing entropy.
    let mut w = RecordWriter::new(Vec::new(), &header()).unwrap();
    let mut ts = 1_000_000_000u64;
    let mut seed = 12345u64;
    for i in 0..100_000u64 {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ts += 1200 + (seed >> 58);
        w.push_with(|e| {
            Record::Io(Io {
                stack: 0,
                ts,
                dur: 500 + (seed >> 60),
                pid: 42,
                tid: 42,
                op: IoOp::Pread64,
                fd: 3,
                path: e.intern(b"/tmp/cached.bin"),
                kind: FileKind::Regular,
                offset: (i % 1024) * 4096,
                offset_src: OffsetSrc::Explicit,
                requested: 4096,
                ret: 4096,
                block_reqs: 0,
                summed: false,
            })
        })
        .unwrap();
    }
    let out = w.finish(&Trailer::default()).unwrap();
    let per_event = out.len() as f64 / 100_000.0;
    eprintln!("{per_event:.3} bytes/event");
    assert!(per_event < 3.0, "{per_event} bytes/event");
}
