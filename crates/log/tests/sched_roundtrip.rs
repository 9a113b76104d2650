//! Scheduling records through the real file format: every field survives,
//! across frames, and they stay small (they are the most frequent kind).

use std::io::Cursor;
use std::path::Path;

use mltrace_log::*;

fn switch(i: u64) -> SchedSwitch {
    SchedSwitch {
        ts: 5_000_000_000 + i * 997,
        cpu: (i % 4) as u32,
        prev_pid: 100,
        prev_tid: 100 + (i % 3) as u32,
        prev_comm: StrId(0),
        prev_prio: if i.is_multiple_of(7) { 139 } else { 120 },
        prev_state: SchedState::from_u8((i % 6) as u8),
        next_pid: if i.is_multiple_of(2) { 0 } else { 4242 },
        next_tid: if i.is_multiple_of(2) { 0 } else { 4243 },
        next_comm: StrId(0),
        next_prio: if i.is_multiple_of(5) { -1 } else { 120 },
        traced: sched::PREV,
        prev_call: SleepCall::from_u8((i % 25) as u8),
        prev_ran_us: if i.is_multiple_of(4) { 0 } else { (i * 7919 % 4000) as u32 },
    }
}

fn wake(i: u64) -> SchedWake {
    SchedWake {
        ts: 5_000_000_000 + i * 991,
        op: if i.is_multiple_of(3) { WakeOp::Migrate } else { WakeOp::Waking },
        cpu: 3,
        target_cpu: (i % 2) as u32,
        pid: 100,
        tid: 101,
        comm: StrId(0),
        prio: 120,
        waker_pid: 200,
        waker_tid: 201 + (i % 2) as u32,
        traced: if i.is_multiple_of(4) { 0 } else { sched::WAKER },
        by: WakeBy::from_u8((i % 5) as u8),
    }
}

#[test]
fn sched_records_round_trip_compactly() {
    let header = Header { mltrace_version: VERSION.into(), source: "test".into(), ..Default::default() };
    let mut w = RecordWriter::new(Vec::new(), &header).unwrap().with_frame_records(1000);
    let n = 5000u64;
    for i in 0..n {
        w.push_with(|e| {
            let mut s = switch(i);
            s.prev_comm = e.intern(b"python3");
            s.next_comm = e.intern(if i.is_multiple_of(2) { b"swapper/0".as_slice() } else { b"kworker/u8:1" });
            Record::SchedSwitch(s)
        })
        .unwrap();
        w.push_with(|e| {
            let mut r = wake(i);
            r.comm = e.intern(b"pt_data_worker");
            Record::SchedWake(r)
        })
        .unwrap();
    }
    let bytes = w.finish(&Trailer::default()).unwrap();
    assert!(bytes.len() < (2 * n as usize) * 4, "{} bytes for {} records", bytes.len(), 2 * n);

    let mut r = LogReader::new(Path::new("mem.bin"), Cursor::new(bytes)).unwrap();
    let (mut si, mut wi) = (0u64, 0u64);
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(rec) = f.next_record() {
            match rec {
                Record::SchedSwitch(s) => {
                    assert_eq!(f.str(s.prev_comm), b"python3");
                    let mut e = switch(si);
                    (e.prev_comm, e.next_comm) = (s.prev_comm, s.next_comm);
                    assert_eq!(s, e);
                    si += 1;
                }
                Record::SchedWake(x) => {
                    assert_eq!(f.str(x.comm), b"pt_data_worker");
                    let mut e = wake(wi);
                    e.comm = x.comm;
                    assert_eq!(x, e);
                    wi += 1;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert!(r.take_diagnostics().is_empty());
    assert_eq!((si, wi), (n, n));
}
