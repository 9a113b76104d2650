//! Exports decoded back as a viewer reads them (tracks, interned names,
//! args), for what imported logs hold: results never printed, processes
//! known only by their comm, disks without dev numbers, per-process marks.
//! The Chrome crate's parity test also loads these into trace_processor.

use std::collections::HashMap;
use std::io::Cursor;
use std::path::Path;

use mltrace_log::*;
use prost::Message;

use crate::proto::{trace_packet::SequenceFlags, track_event::Type, Trace, TrackDescriptor};

#[derive(Clone, Debug)]
struct Event {
    /// BOOTTIME, decoded as the importer does (incremental clocks included).
    ts: u64,
    track: u64,
    kind: Type,
    name: String,
    args: Vec<(String, String)>,
}

#[derive(Default)]
struct SeqState {
    track: Option<u64>,
    /// The sequence's default clock, and each incremental clock's value.
    clock_id: Option<u32>,
    clocks: HashMap<u32, u64>,
    names: HashMap<u64, String>,
    arg_names: HashMap<u64, String>,
    strings: HashMap<u64, Vec<u8>>,
}

/// The trace's packets, with compressed batches expanded in place.
pub(crate) fn packets(trace: &[u8]) -> Vec<crate::proto::TracePacket> {
    let mut out = Vec::new();
    for p in Trace::decode(trace).unwrap().packet {
        match &p.compressed_packets {
            Some(z) => {
                let mut raw = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(z.as_slice()), &mut raw).unwrap();
                out.extend(packets(&raw));
            }
            None => out.push(p),
        }
    }
    out
}

struct Decoded {
    tracks: HashMap<u64, TrackDescriptor>,
    /// Slice begins and instants.
    events: Vec<Event>,
}

impl Decoded {
    fn new(trace: &[u8]) -> Self {
        let mut tracks = HashMap::new();
        let mut seqs: HashMap<u32, SeqState> = HashMap::new();
        let mut events = Vec::new();
        for p in packets(trace) {
            if let Some(d) = p.track_descriptor {
                tracks.insert(d.uuid.unwrap(), d);
                continue;
            }
            let st = seqs.entry(p.trusted_packet_sequence_id.unwrap_or(0)).or_default();
            if p.sequence_flags.unwrap_or(0) & SequenceFlags::SeqIncrementalStateCleared as u32 != 0 {
                *st = SeqState::default();
            }
            if let Some(d) = p.trace_packet_defaults {
                st.track = d.track_event_defaults.and_then(|d| d.track_uuid);
                st.clock_id = d.timestamp_clock_id;
            }
            if let Some(c) = &p.clock_snapshot {
                for c in &c.clocks {
                    if c.is_incremental == Some(true) {
                        st.clocks.insert(c.clock_id.unwrap(), c.timestamp.unwrap());
                    }
                }
            }
            let ts = match (p.timestamp, p.timestamp_clock_id.or(st.clock_id)) {
                (Some(t), Some(id)) if st.clocks.contains_key(&id) => {
                    let c = st.clocks.get_mut(&id).unwrap();
                    *c += t;
                    *c
                }
                (Some(t), Some(6) | None) => t,
                (t, id) => {
                    assert!(t.is_none(), "timestamp {t:?} on unknown clock {id:?}");
                    0
                }
            };
            if let Some(i) = p.interned_data {
                st.names.extend(i.event_names.into_iter().map(|n| (n.iid.unwrap(), n.name.unwrap())));
                st.arg_names.extend(i.debug_annotation_names.into_iter().map(|n| (n.iid.unwrap(), n.name.unwrap())));
                st.strings
                    .extend(i.debug_annotation_string_values.into_iter().map(|s| (s.iid.unwrap(), s.str.unwrap())));
            }
            let Some(ev) = p.track_event else { continue };
            let kind = Type::try_from(ev.r#type.unwrap_or(0)).unwrap();
            if !matches!(kind, Type::SliceBegin | Type::Instant) {
                continue;
            }
            let args = ev
                .debug_annotations
                .iter()
                .map(|a| {
                    let v = match (a.string_value_iid, a.int_value, a.uint_value) {
                        (Some(i), _, _) => String::from_utf8_lossy(&st.strings[&i]).into_owned(),
                        (_, Some(v), _) => v.to_string(),
                        (_, _, Some(v)) => v.to_string(),
                        _ => panic!("unexpected arg {a:?}"),
                    };
                    (st.arg_names[&a.name_iid.unwrap()].clone(), v)
                })
                .collect();
            let name = st.names[&ev.name_iid.unwrap()].clone();
            events.push(Event { ts, track: ev.track_uuid.or(st.track).unwrap(), kind, name, args });
        }
        Decoded { tracks, events }
    }

    fn named(&self, name: &str) -> Vec<&Event> {
        self.events.iter().filter(|e| e.name == name).collect()
    }

    /// A track's name; a process track's is its process's.
    fn track_name(&self, uuid: u64) -> String {
        let t = &self.tracks[&uuid];
        t.name.clone().or_else(|| t.process.as_ref().and_then(|p| p.process_name.clone())).unwrap_or_default()
    }

    /// The parent's name; a thread track's is its process's.
    fn parent_name(&self, uuid: u64) -> String {
        let t = &self.tracks[&uuid];
        if let Some(pid) = t.thread.as_ref().and_then(|th| th.pid) {
            return self.process_names(pid).join(",");
        }
        self.track_name(t.parent_uuid.unwrap())
    }

    /// The names given to `pid` (one per process track).
    fn process_names(&self, pid: i32) -> Vec<String> {
        let mut v: Vec<String> = self
            .tracks
            .values()
            .filter_map(|t| t.process.as_ref())
            .filter(|p| p.pid == Some(pid))
            .map(|p| p.process_name.clone().unwrap_or_default())
            .collect();
        v.sort();
        v
    }

    fn process_track(&self, pid: i32) -> u64 {
        let mut t = self.tracks.values().filter(|t| t.process.as_ref().is_some_and(|p| p.pid == Some(pid)));
        t.next().unwrap().uuid.unwrap()
    }
}

fn arg<'a>(e: &'a Event, key: &str) -> Option<&'a str> {
    e.args.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

const IMPORTED: u32 = 4242;

/// An import's records, and a recorded process beside them.
fn imported_log() -> Vec<u8> {
    let mut w = RecordWriter::new(Vec::new(), &Header::default()).unwrap();
    let comm = |pid, tid, ts, name: &'static [u8]| {
        move |e: &mut FrameEncoder| Record::Comm(Comm { ts, pid, tid, comm: e.intern(name) })
    };
    let path = |e: &mut FrameEncoder| e.intern(b"/data/img_0001.npy");
    let io = |ts, pid, op, ret| {
        move |e: &mut FrameEncoder| {
            Record::Io(Io {
                ts,
                dur: 10,
                pid,
                tid: pid,
                op,
                fd: 5,
                path: e.intern(b"/data/img_0001.npy"),
                ret,
                ..Default::default()
            })
        }
    };
    w.push_with(comm(IMPORTED, IMPORTED, 1, b"dl_worker")).unwrap();
    // A thread's comm names no process.
    w.push_with(comm(4300, 4301, 2, b"loader")).unwrap();
    w.push_with(|e| {
        let p = path(e);
        Record::Open(Open {
            ts: 10,
            dur: 5,
            pid: IMPORTED,
            tid: IMPORTED,
            path: p,
            abs_path: p,
            dirfd: -100,
            ret: RET_UNKNOWN,
            kind: FileKind::Regular,
            ..Default::default()
        })
    })
    .unwrap();
    w.push_with(io(20, IMPORTED, IoOp::Read, RET_UNKNOWN)).unwrap();
    w.push_with(io(30, IMPORTED, IoOp::Write, 4096)).unwrap();
    w.push_with(io(40, 4300, IoOp::Read, RET_UNKNOWN)).unwrap();
    w.push_with(|e| {
        Record::Close(Close {
            ts: 50,
            dur: 5,
            pid: IMPORTED,
            tid: IMPORTED,
            fd: 5,
            path: path(e),
            ret: RET_UNKNOWN,
            ..Default::default()
        })
    })
    .unwrap();
    w.push_with(|e| {
        let p = path(e);
        Record::Transfer(Transfer {
            ts: 60,
            dur: 5,
            pid: IMPORTED,
            tid: IMPORTED,
            in_path: p,
            out_path: p,
            ret: RET_UNKNOWN,
            ..Default::default()
        })
    })
    .unwrap();
    // Disks as imports write them (dev 0), and a recorded one.
    for (ts, disk, dev, bytes, flags) in [
        (70, &b"sda"[..], 0, 4096, blk::TRACED),
        (71, b"sdb", 0, 8192, 0),
        (72, b"sdb", 0, 1 << 20, 0),
        (73, b"vda", 254 << 20, 512, 0),
    ] {
        w.push_with(|e| {
            Record::Block(Block {
                ts,
                queue: 1,
                device: 2,
                pid: IMPORTED,
                tid: IMPORTED,
                comm: e.intern(b"dl_worker"),
                dev,
                disk: e.intern(disk),
                sector: ts,
                bytes,
                op: BlockOp::Read,
                flags,
                ..Default::default()
            })
        })
        .unwrap();
    }
    // A process's own event, and MLLOG's (pid 0).
    for (ts, name, value, pid) in [(80, "mmap", r#"{"fd":7}"#, IMPORTED), (81, "eval_accuracy", "0.9", 0)] {
        w.push_with(|e| {
            Record::Mark(Mark { ts, name: e.intern(name.as_bytes()), value: e.intern(value.as_bytes()), rank: -1, pid })
        })
        .unwrap();
    }
    // A comm does not rename a process named by its command line.
    w.push(&Record::Fork(Fork { ts: 90, pid: 7, tid: 7, parent_pid: 1, parent_tid: 1, thread: false })).unwrap();
    w.push_with(|e| {
        Record::Exec(Exec {
            ts: 91,
            pid: 7,
            tid: 7,
            filename: e.intern(b"/bin/cat"),
            argv: e.intern(b"cat\0x"),
            trunc: 0,
        })
    })
    .unwrap();
    w.push_with(comm(7, 7, 92, b"renamed")).unwrap();
    w.push_with(io(93, 7, IoOp::Read, 1)).unwrap();
    w.finish(&Trailer::default()).unwrap()
}

fn export_log(log: &[u8]) -> Decoded {
    let mut r = LogReader::new(Path::new("t.bin"), Cursor::new(log)).unwrap();
    let (out, _) = crate::export(&mut r, Vec::new(), &mut |d| panic!("{d}")).unwrap();
    Decoded::new(&out)
}

#[test]
fn unknown_results_have_no_size_errno_or_result_args() {
    let d = export_log(&imported_log());
    assert!(!d.events.iter().any(|e| e.name.contains("E4095")));
    for (name, n) in [("read ?", 2), ("openat img_0001.npy", 1), ("close img_0001.npy", 1), ("sendfile ?", 1)] {
        let found = d.named(name);
        assert_eq!(found.len(), n, "{name}");
        for e in found {
            assert_eq!(arg(e, "result"), Some("unknown"), "{e:?}");
            assert!(arg(e, "returned").is_none() && arg(e, "errno").is_none(), "{e:?}");
        }
    }
    assert_eq!(arg(d.named("openat img_0001.npy")[0], "fd"), None);
    assert_eq!(arg(d.named("write 4 KiB")[0], "returned"), Some("4096"));
}

#[test]
fn a_process_known_by_its_comm_is_named_by_it() {
    let d = export_log(&imported_log());
    assert_eq!(d.process_names(IMPORTED as i32), ["dl_worker"]);
    assert_eq!(d.process_names(4300), ["pid 4300"]);
    assert_eq!(d.process_names(7), ["cat x"]);
    let read = d.named("read ?");
    assert_eq!(d.parent_name(read[0].track), "dl_worker");
    let traced = d.named("R 4 KiB");
    assert_eq!(traced.len(), 2, "on the process and on the disk");
    assert!(traced.iter().all(|e| arg(e, "process") == Some("dl_worker [4242]")), "{traced:?}");
}

#[test]
fn disks_with_dev_0_get_a_group_each() {
    let d = export_log(&imported_log());
    let on = |name: &str| {
        let mut v: Vec<(String, String)> =
            d.named(name).iter().map(|e| (d.track_name(e.track), d.parent_name(e.track))).collect();
        v.sort();
        v
    };
    // The disk's group is its in-flight counter.
    let requests = |disk: &str| ("requests".to_string(), format!("{disk} · in flight"));
    // The traced request is also on its process's block lane.
    assert_eq!(on("R 4 KiB"), [("block I/O".into(), "dl_worker".into()), requests("Disk sda (0:0)")]);
    assert_eq!(on("R 8 KiB"), [requests("Disk sdb (0:0)")]);
    assert_eq!(on("R 1 MiB"), [requests("Disk sdb (0:0)")]);
    assert_eq!(on("R 512 B"), [requests("Disk vda (254:0)")]);
    for disk in ["Disk sda (0:0)", "Disk sdb (0:0)", "Disk vda (254:0)"] {
        // One group per disk, whose own row is requests in flight.
        let want = format!("{disk} · in flight");
        let in_flight = d.tracks.values().filter(|t| t.name.as_deref() == Some(&want) && t.counter.is_some());
        assert_eq!(in_flight.count(), 1, "{disk}");
    }
}

#[test]
fn a_process_marks_go_on_its_track() {
    let d = export_log(&imported_log());
    let mmap = d.named(r#"mmap = {"fd":7}"#);
    assert_eq!(mmap.len(), 1);
    assert_eq!((mmap[0].kind, mmap[0].track), (Type::Instant, d.process_track(IMPORTED as i32)));
    assert_eq!(mmap[0].args, [("value".to_string(), r#"{"fd":7}"#.to_string())]);
    let acc = d.named("eval_accuracy = 0.9");
    assert_eq!(acc.len(), 1);
    assert_eq!((d.track_name(acc[0].track), d.parent_name(acc[0].track)), ("events".into(), "Training phases".into()));
}

/// Timestamps are deltas on each sequence's incremental clock; an event
/// earlier than its sequence's last goes absolute; after an interning
/// reset the clock is defined again.
#[test]
fn timestamps_survive_deltas_going_back_and_resets() {
    let mut w = RecordWriter::new(Vec::new(), &Header::default()).unwrap();
    let mut want = Vec::new();
    // More distinct paths than a sequence interns before it resets.
    for i in 0..20_100u64 {
        let ts = 1_000_000_000 + i * 1_000;
        want.push(ts);
        w.push_with(|e| {
            Record::Io(Io {
                ts,
                dur: 500,
                pid: 7,
                tid: 7,
                op: IoOp::Read,
                fd: 3,
                path: e.intern(format!("/data/{i}").as_bytes()),
                ret: 1,
                ..Default::default()
            })
        })
        .unwrap();
    }
    // Instants on the process track, out of order.
    for ts in [5_000_000_000u64, 3_000_000_000, 4_000_000_000] {
        want.push(ts);
        w.push_with(|e| {
            Record::Mark(Mark { ts, name: e.intern(b"checkpoint"), value: e.intern(b"1"), rank: -1, pid: 7 })
        })
        .unwrap();
    }
    let d = export_log(&w.finish(&Trailer::default()).unwrap());
    let mut got: Vec<u64> = d.events.iter().map(|e| e.ts).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
}

/// A record of a process that arrives after its exit (a block request
/// completing late) keeps the process's name: a nameless `pid N` would
/// rename it in viewers that keep one name per pid.
#[test]
fn late_records_of_an_exited_process_keep_its_name() {
    let mut w = RecordWriter::new(Vec::new(), &Header::default()).unwrap();
    w.push_with(|e| {
        Record::Exec(Exec {
            ts: 10,
            pid: 9,
            tid: 9,
            filename: e.intern(b"/bin/dd"),
            argv: e.intern(b"dd\0if=x"),
            trunc: 0,
        })
    })
    .unwrap();
    w.push_with(|_| Record::Exit(Exit { ts: 20, pid: 9, tid: 9, status: 0, process_exit: true })).unwrap();
    w.push_with(|e| {
        Record::Io(Io {
            ts: 15,
            dur: 1,
            pid: 9,
            tid: 9,
            op: IoOp::Write,
            fd: 3,
            path: e.intern(b"/x"),
            ret: 1,
            ..Default::default()
        })
    })
    .unwrap();
    let d = export_log(&w.finish(&Trailer::default()).unwrap());
    assert_eq!(d.process_names(9).iter().filter(|n| n.starts_with("pid")).count(), 0, "{:?}", d.process_names(9));
}
