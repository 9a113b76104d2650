//! The JSON file itself, read back with serde_json: structure, stats,
//! lanes that never overlap, flows that pair up, strings that survive.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};

use common::*;
use mltrace_log::*;
use serde_json::Value;

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("the export is valid JSON")
}

fn events(v: &Value) -> &Vec<Value> {
    v["traceEvents"].as_array().unwrap()
}

/// ts and dur in ns (the file has µs with 3 decimals).
fn ns(v: &Value) -> u64 {
    (v.as_f64().unwrap() * 1000.0).round() as u64
}

fn ph(e: &Value) -> &str {
    e["ph"].as_str().unwrap()
}

fn thread_names(v: &Value) -> HashMap<(u64, u64), String> {
    events(v)
        .iter()
        .filter(|e| ph(e) == "M" && e["name"] == "thread_name")
        .map(|e| ((e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()), e["args"]["name"].to_string()))
        .collect()
}

#[test]
fn structure_and_stats() {
    let log = sample_log(false);
    let (out, stats) = chrome(&log);
    let v = parse(&out);
    assert_eq!(stats.bytes, out.len() as u64);
    let h = header(false);
    assert_eq!(v["metadata"]["start"]["boottime_ns"], h.start.boottime_ns);
    assert_eq!(v["metadata"]["start"]["realtime_ns"], h.start.realtime_ns);
    assert_eq!(v["metadata"]["header"]["command"][1], "/home/u/train.py");
    assert_eq!(v["metadata"]["header"]["host"], "box \"one\"");
    assert_eq!(v["mltraceTrailer"]["end"]["boottime_ns"], t(3000));
    let ev = events(&v);
    assert_eq!(stats.events as usize, ev.len());
    let count = |p: &str| ev.iter().filter(|e| ph(e) == p).count() as u64;
    assert_eq!(stats.slices, count("X"));
    assert_eq!(stats.counters, count("C"));
    assert_eq!(stats.flows, count("s"));
    // One call's second request was never seen: its flow has no end.
    assert_eq!(count("s"), 18);
    assert_eq!(count("f"), 17);
    let mut records = 0;
    let mut r = reader(&log);
    while let Some(mut f) = r.next_frame().unwrap() {
        while f.next_record().is_some() {
            records += 1;
        }
    }
    assert_eq!(stats.records, records);
    assert_eq!(stats.lost_events, 13);
    assert!(count("i") >= 10);
    for e in ev {
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        match ph(e) {
            "X" => assert!(e["dur"].is_number() && e["ts"].is_number() && e["name"].is_string(), "{e}"),
            "C" => assert_eq!(e["args"].as_object().unwrap().len(), 1, "{e}"),
            "M" | "i" | "s" | "f" => {}
            p => panic!("unexpected phase {p}: {e}"),
        }
    }
    // Every thread and process that has events is named.
    let threads = thread_names(&v);
    let procs: HashSet<u64> =
        ev.iter().filter(|e| ph(e) == "M" && e["name"] == "process_name").map(|e| e["pid"].as_u64().unwrap()).collect();
    for e in ev.iter().filter(|e| ph(e) != "M") {
        let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        assert!(procs.contains(&pid), "unnamed process: {e}");
        assert!(pid == tid || threads.contains_key(&(pid, tid)), "unnamed thread: {e}");
    }
    // Nanoseconds survive (the log's timestamps end in 463 ns).
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains(r#""ts":7000000133.463,"dur":3.5,"name":"openat x.bin ENOENT""#));
}

#[test]
fn lanes_never_overlap_and_flows_pair_up() {
    for log in [sample_log(false), random_log(3, 2000)] {
        let (out, _) = chrome(&log);
        let v = parse(&out);
        let threads = thread_names(&v);
        let mut lanes: BTreeMap<(u64, u64), Vec<(u64, u64)>> = BTreeMap::new();
        for e in events(&v).iter().filter(|e| ph(e) == "X") {
            let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            lanes.entry(key).or_default().push((ns(&e["ts"]), ns(&e["dur"])));
        }
        for (key, mut slices) in lanes {
            slices.sort_by_key(|&(ts, dur)| (ts, u64::MAX - dur));
            // The first lane is the group's own row.
            if threads[&key] == "\"phases\"" || threads[&key] == "\"Training phases\"" {
                // Phases nest: a stack of open ends.
                let mut open: Vec<u64> = Vec::new();
                for (ts, dur) in slices {
                    while open.last().is_some_and(|&end| end <= ts) {
                        open.pop();
                    }
                    assert!(open.last().is_none_or(|&end| ts + dur <= end), "{key:?}: phases cross");
                    open.push(ts + dur);
                }
            } else {
                for w in slices.windows(2) {
                    assert!(w[0].0 + w[0].1 < w[1].0, "{key:?} ({}): {:?} overlaps {:?}", threads[&key], w[0], w[1]);
                }
            }
        }
        // Flow starts sit at their slice's start, ends inside theirs.
        let ev = events(&v);
        let slices: HashSet<(u64, u64, u64)> = ev
            .iter()
            .filter(|e| ph(e) == "X")
            .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap(), ns(&e["ts"])))
            .collect();
        let mut by_lane: HashMap<(u64, u64), Vec<(u64, u64)>> = HashMap::new();
        for x in ev.iter().filter(|e| ph(e) == "X") {
            let key = (x["pid"].as_u64().unwrap(), x["tid"].as_u64().unwrap());
            by_lane.entry(key).or_default().push((ns(&x["ts"]), ns(&x["dur"])));
        }
        let within = |e: &Value| {
            let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            let ts = ns(&e["ts"]);
            by_lane[&key].iter().any(|&(s, d)| s <= ts && ts <= s + d)
        };
        let mut starts = HashSet::new();
        for e in ev.iter().filter(|e| ph(e) == "s") {
            let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap(), ns(&e["ts"]));
            assert!(slices.contains(&key), "flow start off its slice: {e}");
            assert!(starts.insert(e["id"].as_str().unwrap().to_string()), "id used twice: {e}");
        }
        for e in ev.iter().filter(|e| ph(e) == "f") {
            assert!(starts.contains(e["id"].as_str().unwrap()), "flow end without start: {e}");
            assert_eq!(e["bp"], "e");
            assert!(within(e), "flow end outside a slice: {e}");
        }
    }
}

#[test]
fn odd_strings_survive() {
    let (out, _) = chrome(&sample_log(false));
    let v = parse(&out);
    let ev = events(&v);
    let paths: HashSet<&str> = ev.iter().filter_map(|e| e["args"]["path"].as_str()).collect();
    for p in ODD_PATHS {
        let want = String::from_utf8_lossy(p);
        assert!(paths.contains(want.as_ref()), "{want:?} not among {paths:?}");
    }
    assert!(ev.iter().any(|e| e["name"] == "openat we\"ird\\name\n.bin"));
    assert!(ev.iter().any(|e| e["name"] == "close ends in a backslash\\"));
    assert!(ev.iter().any(|e| e["name"] == "process_name" && e["args"]["name"] == "old \"daemon\""));
    let exec = ev.iter().find(|e| e["name"] == "exec python3").unwrap();
    assert_eq!(exec["args"]["command"], serde_json::json!(["/usr/bin/python3", "/home/u/train.py", "--epochs", "2"]));
    assert_eq!(exec["s"], "p");
    // The GPU's utilisation is its group's own row, under its name even
    // from a log that calls it "SM" (recorded before it was renamed); its
    // one NaN sample is left out (not a number: not drawn).
    let gpu: Vec<&Value> =
        ev.iter().filter(|e| ph(e) == "C" && !e["args"][mltrace_log::GPU_UTILISATION].is_null()).collect();
    assert!(!gpu.is_empty() && gpu.iter().all(|e| e["name"].as_str().unwrap().starts_with("GPU ")), "{gpu:?}");
    assert!(gpu.iter().all(|e| e["args"][mltrace_log::GPU_UTILISATION].as_f64() == Some(1e-9)), "{gpu:?}");

    // trace_processor v52 reads `"` preceded by `\` as escaped, even when
    // that `\` is itself escaped: such a file loses the rest of its events.
    // Scan as it does and check the structure is the real one.
    let text = std::str::from_utf8(&out).unwrap();
    let (mut depth, mut objects, mut in_str, mut prev) = (0i64, 0usize, false, 0u8);
    for &b in text.as_bytes() {
        match b {
            b'"' if prev != b'\\' => in_str = !in_str,
            b'{' if !in_str => {
                depth += 1;
                objects += 1;
            }
            b'}' if !in_str => depth -= 1,
            _ => {}
        }
        assert!(depth >= 0);
        prev = b;
    }
    fn count(v: &Value) -> usize {
        match v {
            Value::Object(o) => 1 + o.values().map(count).sum::<usize>(),
            Value::Array(a) => a.iter().map(count).sum(),
            _ => 0,
        }
    }
    assert_eq!((depth, in_str, objects), (0, false, count(&v)));
}

#[test]
fn a_cut_log_still_exports() {
    let log = random_log(5, 1000);
    let cut = &log[..log.len() * 2 / 3];
    let mut diags = Vec::new();
    let (out, stats) = mltrace_chrome::export(&mut reader(cut), Vec::new(), &mut |d| diags.push(d)).unwrap();
    assert!(diags.iter().any(|d| d.contains("was cut")), "{diags:?}");
    let v = parse(&out);
    assert!(v["mltraceTrailer"].is_null());
    assert!(stats.slices > 100 && stats.records < 2000, "{stats:?}");
    assert_eq!(events(&v).len() as u64, stats.events);
}

#[test]
fn memory_stays_bounded_on_a_long_log() {
    // Slice names are cached per (op, size), up to a bound: endless
    // distinct sizes.
    let mut w = RecordWriter::new(Vec::new(), &header(false)).unwrap();
    for i in 0..30_000u64 {
        w.push_with(|e| {
            Record::Io(Io {
                ts: t(i * 10),
                dur: 5_000,
                pid: ROOT,
                tid: ROOT,
                op: IoOp::Read,
                path: e.intern(b"/data/x"),
                ret: i as i64,
                ..Default::default()
            })
        })
        .unwrap();
    }
    let log = w.finish(&Trailer::default()).unwrap();
    let (out, stats) = mltrace_chrome::export(&mut reader(&log), Vec::new(), &mut |d| panic!("{d}")).unwrap();
    assert_eq!(stats.slices, 30_000);
    // Each read ends before the next starts: one lane.
    let v = parse(&out);
    let lanes: HashSet<u64> = events(&v).iter().filter(|e| ph(e) == "X").map(|e| e["tid"].as_u64().unwrap()).collect();
    assert_eq!(lanes.len(), 1);
}

#[test]
fn imported_records() {
    let (out, _) = chrome(&sample_log(false));
    let v = parse(&out);
    let ev = events(&v);
    let named = |n: &str| ev.iter().filter(|e| e["name"] == n).collect::<Vec<_>>();
    // Results the source never printed: no size or errno, and args say so.
    assert!(!ev.iter().any(|e| e["name"].as_str().is_some_and(|n| n.contains("E4095"))));
    for (name, n) in [("read ?", 2), ("openat img_0001.npy", 1), ("close img_0001.npy", 1), ("sendfile ?", 1)] {
        let found = named(name);
        assert_eq!(found.len(), n, "{name}");
        for e in found {
            assert_eq!(e["args"]["result"], "unknown", "{e}");
            assert!(e["args"]["returned"].is_null() && e["args"]["errno"].is_null(), "{e}");
        }
    }
    assert!(named("openat img_0001.npy")[0]["args"]["fd"].is_null());
    // A process known only by its comm is named by it.
    let process_name = |pid: u32| {
        ev.iter()
            .filter(|e| ph(e) == "M" && e["name"] == "process_name" && e["pid"] == pid)
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(process_name(IMPORTED), [IMPORTED_COMM]);
    assert_eq!(process_name(4300), ["pid 4300"]);
    // Disks with dev 0, apart by name.
    for (disk, n) in [("Disk sda (0:0)", 1), ("Disk sdb (0:0)", 2)] {
        let pids: Vec<u64> = ev
            .iter()
            .filter(|e| ph(e) == "M" && e["name"] == "process_name" && e["args"]["name"] == disk)
            .map(|e| e["pid"].as_u64().unwrap())
            .collect();
        assert_eq!(pids.len(), 1, "{disk}");
        assert_eq!(ev.iter().filter(|e| ph(e) == "X" && e["pid"] == pids[0]).count(), n, "{disk}");
    }
    // A process's marks on its own track; MLLOG's on the events thread.
    let mmap = named(r#"mmap = {"addr":"0x7f3a2c000000","fd":7,"file":"data.lmdb"}"#);
    assert_eq!(mmap.len(), 1);
    assert_eq!(
        (ph(mmap[0]), &mmap[0]["s"], &mmap[0]["pid"], &mmap[0]["tid"]),
        ("i", &"p".into(), &IMPORTED.into(), &IMPORTED.into())
    );
    assert!(mmap[0]["args"]["rank"].is_null());
    let acc = named("eval_accuracy = 0.9071");
    assert_eq!(acc.len(), 1);
    assert_eq!(acc[0]["s"], "t");
    assert_eq!(thread_names(&v)[&(acc[0]["pid"].as_u64().unwrap(), acc[0]["tid"].as_u64().unwrap())], "\"events\"");
}
