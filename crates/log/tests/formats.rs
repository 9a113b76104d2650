//! Format 2 against format 1, and every declared kind through the codec.
//!
//! `data/v1-recorded.bin` is a real recording made by mltrace before format
//! 2 (the bundled sample workload, io_uring, libaio, sendfile and a stand-in
//! GPU: every kind but `lost`), `data/v1-synthetic.bin` a small written one
//! (with `lost`). They stay as they are: format 1 is read, never written.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use mltrace_log::*;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// A record with its strings resolved, comparable across frames and logs.
#[derive(Debug, PartialEq)]
struct Resolved(Record, Vec<String>);

fn resolve(frame: &Frame<'_>, rec: Record) -> Resolved {
    let mut strs = Vec::new();
    rec.visit(&mut |_, v| {
        if let Value::Str(id) = v {
            strs.push(frame.str_lossy(id).into_owned());
        }
    });
    let mut bare = rec;
    bare.map_strs(|_| StrId(0));
    Resolved(bare, strs)
}

fn read(bytes: &[u8]) -> (Header, (u16, u16), Vec<Resolved>, Option<Trailer>) {
    let mut r = LogReader::new(Path::new("mem.bin"), Cursor::new(bytes.to_vec())).unwrap();
    let mut got = Vec::new();
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(rec) = f.next_record() {
            got.push(resolve(&f, rec));
        }
    }
    assert!(r.take_diagnostics().is_empty());
    (r.header().clone(), r.version(), got, r.trailer().cloned())
}

/// Writes the records again, in the current format.
fn rewrite(header: &Header, recs: &[Resolved], trailer: &Trailer) -> Vec<u8> {
    let mut w = RecordWriter::new(Vec::new(), header).unwrap();
    for Resolved(rec, strs) in recs {
        w.push_with(|e| {
            let mut it = strs.iter();
            let mut r = *rec;
            r.map_strs(|_| e.intern(it.next().unwrap().as_bytes()));
            r
        })
        .unwrap();
    }
    w.finish(trailer).unwrap()
}

#[test]
fn format_1_logs_read_and_write_again_as_format_2_unchanged() {
    for name in ["v1-recorded.bin", "v1-synthetic.bin"] {
        let old = std::fs::read(data(name)).unwrap();
        let (header, version, recs, trailer) = read(&old);
        assert_eq!(version, (1, 0), "{name}");
        assert!(recs.len() > 50, "{name}: {} records", recs.len());
        let new = rewrite(&header, &recs, &trailer.clone().unwrap());
        let (header2, version2, recs2, trailer2) = read(&new);
        assert_eq!(version2, (2, 0));
        assert_eq!(header2, header);
        // The writer counts its own frames.
        let frames = |t: Option<Trailer>| t.map(|t| Trailer { frames: 0, ..t });
        assert_eq!(frames(trailer2), frames(trailer));
        assert_eq!(recs2.len(), recs.len());
        for (i, (a, b)) in recs.iter().zip(&recs2).enumerate() {
            assert_eq!(a, b, "{name}: record {i}");
        }
        eprintln!("{name}: {} records, format 1 {} bytes, format 2 {} bytes", recs.len(), old.len(), new.len());
    }
}

#[test]
fn the_recorded_format_1_log_has_every_kind_but_lost() {
    let (_, _, recs, _) = read(&std::fs::read(data("v1-recorded.bin")).unwrap());
    let (_, _, syn, _) = read(&std::fs::read(data("v1-synthetic.bin")).unwrap());
    let mut seen: Vec<u8> = recs.iter().chain(&syn).map(|r| r.0.code()).collect();
    seen.sort();
    seen.dedup();
    // Format 1's kinds (those declared since have no format-1 log to come from).
    let v1_kinds: Vec<u8> = (1..=21).chain([27]).collect();
    assert_eq!(seen, v1_kinds);
}

/// A small PRNG: values of every width, so narrow fields fit sometimes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let x = self.0 ^ (self.0 >> 29);
        x >> (self.0 >> 58)
    }
}

#[test]
fn every_kind_round_trips_with_any_values() {
    const STRINGS: u32 = 5;
    let mut rng = Rng(7);
    let mut expect = Vec::new();
    let mut w = RecordWriter::new(Vec::new(), &Header::default()).unwrap().with_frame_records(97);
    for i in 0..20_000usize {
        let code = Record::CODES[i % Record::CODES.len()];
        let mut rec = Record::build(code, |_| rng.next()).unwrap();
        rec.map_strs(|s| StrId(s.0 % STRINGS));
        // The one value a `since(ts)` field cannot hold: one ns after `ts`.
        let after = |t: &mut u64, ts: u64| {
            if *t == ts.wrapping_add(1) {
                *t = 0;
            }
        };
        match &mut rec {
            Record::Block(b) => after(&mut b.cause_ts, b.ts),
            Record::SchedSpan(s) => {
                after(&mut s.from, s.ts);
                after(&mut s.sleep_from, s.ts);
            }
            _ => {}
        }
        w.push_with(|e| {
            let ids: Vec<StrId> = (0..STRINGS).map(|k| e.intern(format!("s{k}").as_bytes())).collect();
            let mut r = rec;
            r.map_strs(|s| ids[s.0 as usize]);
            r
        })
        .unwrap();
        expect.push(rec);
    }
    let bytes = w.finish(&Trailer::default()).unwrap();
    let mut r = LogReader::new(Path::new("mem.bin"), Cursor::new(bytes)).unwrap();
    let mut got = Vec::new();
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(rec) = f.next_record() {
            let mut names = Vec::new();
            rec.visit(&mut |_, v| {
                if let Value::Str(id) = v {
                    names.push(f.str_lossy(id).into_owned());
                }
            });
            let mut it = names.iter();
            let mut rec = rec;
            rec.map_strs(|_| StrId(it.next().unwrap()[1..].parse().unwrap()));
            got.push(rec);
        }
    }
    assert!(r.take_diagnostics().is_empty());
    assert_eq!(got.len(), expect.len());
    for (i, (a, b)) in expect.iter().zip(&got).enumerate() {
        assert_eq!(a, b, "record {i}");
    }
}

#[test]
fn the_visitor_names_every_field_once() {
    for &code in Record::CODES {
        let rec = Record::build(code, |_| 1).unwrap();
        let mut names = Vec::new();
        rec.visit(&mut |n, _| names.push(n));
        let mut dedup = names.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), names.len(), "{}", rec.kind_name());
        assert_eq!(names[..].iter().filter(|n| **n == "ts").count(), 1, "{}", rec.kind_name());
    }
}

/// `record --time-resolution`: every time of every kind lands on the grid,
/// within half a step of where it was; so do a record's ends (a block
/// request's issue and completion both), and the writer rounds as its
/// header says.
#[test]
fn times_round_to_the_resolution_for_every_kind() {
    const Q: u64 = 128;
    let mut rng = Rng(11);
    let near = |a: u64, b: u64| a.abs_diff(b) <= Q / 2;
    let header = Header { time_resolution_ns: Some(Q), ..Header::default() };
    let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
    let mut expect = Vec::new();
    for i in 0..5_000usize {
        let code = Record::CODES[i % Record::CODES.len()];
        let exact = Record::build(code, |_| rng.next() & 0xffff_ffff).unwrap();
        let mut rec = exact;
        rec.round_times(1);
        assert_eq!(rec, exact, "a resolution of 1 ns changes nothing");
        rec.round_times(Q);
        let mut times = Vec::new();
        exact.visit(&mut |_, v| times.extend(if let Value::Time(t) = v { Some(t) } else { None }));
        let mut rounded = Vec::new();
        rec.visit(&mut |_, v| rounded.extend(if let Value::Time(t) = v { Some(t) } else { None }));
        for (a, b) in times.iter().zip(&rounded) {
            assert!(*b == 0 && *a == 0 || b.is_multiple_of(Q) && near(*a, *b), "{exact:?} -> {rec:?}");
        }
        assert!(rec.end_ts().is_multiple_of(Q) && near(rec.end_ts(), exact.end_ts()), "{exact:?} -> {rec:?}");
        if let (Record::Block(a), Record::Block(b)) = (exact, rec) {
            assert_eq!((b.ts + b.queue) % Q, 0, "the issue on the grid too: {b:?}");
            assert!(near(b.ts + b.queue, a.ts + a.queue));
        }
        w.push_with(|e| {
            let id = e.intern(b"s");
            let mut r = exact;
            r.map_strs(|_| id);
            r
        })
        .unwrap();
        rec.map_strs(|_| StrId(0));
        expect.push(rec);
    }
    let bytes = w.finish(&Trailer::default()).unwrap();
    let mut r = LogReader::new(Path::new("mem.bin"), Cursor::new(bytes)).unwrap();
    assert_eq!(r.header().time_resolution_ns, Some(Q));
    let mut got = Vec::new();
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(mut rec) = f.next_record() {
            rec.map_strs(|_| StrId(0));
            got.push(rec);
        }
    }
    assert!(r.take_diagnostics().is_empty());
    assert_eq!(got, expect);
}
