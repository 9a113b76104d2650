//! Writes small valid logs (every record kind, several frames, one cut,
//! one with a damaged frame) into the directory given: seeds for the fuzzer.

use mltrace_log::*;

fn log(n: u64, frame: usize) -> Vec<u8> {
    let h = Header {
        command: vec!["seed".into()],
        start: ClockAnchor { boottime_ns: 1, realtime_ns: 2, monotonic_ns: 3 },
        ..Default::default()
    };
    let mut w = RecordWriter::new(Vec::new(), &h).unwrap().with_frame_records(frame);
    for i in 0..n {
        let ts = 1000 + i * 17;
        w.push_with(|e| match i % 12 {
            0 => Record::Io(Io {
                ts,
                dur: 5,
                pid: 1,
                tid: 2,
                path: e.intern(b"/data/x"),
                requested: 4096,
                ret: 4096,
                ..Default::default()
            }),
            1 => Record::Open(Open {
                ts,
                path: e.intern(b"x"),
                abs_path: e.intern(b"/data/x"),
                ret: 3,
                ..Default::default()
            }),
            2 => Record::Block(Block {
                ts,
                comm: e.intern(b"kworker"),
                disk: e.intern(b"vda"),
                bytes: 512,
                ..Default::default()
            }),
            3 => Record::Counter(Counter {
                ts,
                group: e.intern(b"CPU"),
                name: e.intern(b"usr"),
                value: 1.5,
                ..Default::default()
            }),
            4 => Record::Phase(Phase { ts, dur: 9, name: e.intern(b"EPOCH 1"), ..Default::default() }),
            6 => Record::PageCache(PageCache {
                ts,
                pid: 1,
                tid: 2,
                dev: 254 << 20,
                ino: 12,
                path: e.intern(b"/data/x"),
                offset: 4096 * i,
                bytes: 16384,
                during: CacheDuring::Fault,
            }),
            7 => Record::Mapping(Mapping {
                ts,
                pid: 1,
                tid: 2,
                fd: 3,
                path: e.intern(b"/data/x"),
                kind: FileKind::Regular,
                len: 1 << 20,
                prot: 1,
                flags: 1,
                ret: 0x7f00_0000_0000,
                ..Default::default()
            }),
            8 => Record::MajorFault(MajorFault {
                ts,
                dur: 5,
                pid: 1,
                tid: 2,
                addr: 0x7f00_0000_0000 + 4096 * i,
                flags: fault::FILE,
                path: e.intern(b"/data/x"),
                ..Default::default()
            }),
            5 => Record::IoAccounting(IoAccounting {
                ts,
                pid: 1,
                tid: 2,
                at: AcctPoint::Exit,
                have: acct::CHARS | acct::BYTES,
                rchar: 4096 * i,
                syscr: i,
                read_bytes: 8192,
                ..Default::default()
            }),
            9 => Record::IoUring(IoUring {
                ts,
                dur: 700,
                pid: 1,
                tid: 2,
                op: UringOp::Read,
                fd: 4,
                path: e.intern(b"/data/x"),
                requested: 4096,
                ret: 4096,
                complete_tid: 3,
                ..Default::default()
            }),
            10 => Record::Aio(Aio {
                ts,
                dur: 90,
                pid: 1,
                tid: 2,
                op: AioOp::Submit,
                fd: 4,
                path: e.intern(b"/data/x"),
                nr: 2,
                ret: 2,
                read_bytes: 8192,
                counted: 2,
                ..Default::default()
            }),
            _ => Record::Lost(Lost { ts, kind: LostKind::RingFull, count: i }),
        })
        .unwrap();
    }
    w.finish(&Trailer::default()).unwrap()
}

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("usage: seed_logs DIR"));
    std::fs::create_dir_all(&dir).unwrap();
    let full = log(60, 10);
    std::fs::write(dir.join("full.bin"), &full).unwrap();
    std::fs::write(dir.join("cut.bin"), &full[..full.len() * 2 / 3]).unwrap();
    let mut damaged = full.clone();
    let mid = damaged.len() / 2;
    damaged[mid] ^= 0x40;
    std::fs::write(dir.join("damaged.bin"), &damaged).unwrap();
    std::fs::write(dir.join("one.bin"), log(1, 1)).unwrap();
}
