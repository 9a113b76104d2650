//! The Chrome JSON export and the Perfetto export of the same log, both
//! loaded by Perfetto's own importer (trace_processor v52): the same slices
//! (time, duration, name, track name, owner, depth), counter samples,
//! flows, process names and args. (Lanes cannot be compared here: the
//! importer merges same-named Perfetto tracks that do not overlap.)

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::*;

const LOST_GROUP: &str = "mltrace: lost events";
const LOST_TRACK: &str = "mltrace: lost events (total)";

/// Strings are selected as hex: names and args hold tabs and newlines.
const SLICES: &str = "select s.ts, s.dur, hex(s.name), hex(coalesce(th.name, t.name, '')), \
     hex(coalesce(case when p.pid < 1073741824 then 'pid ' || p.pid else p.name end, pt.name, '')), \
     s.depth \
     from slice s join track t on s.track_id = t.id \
     left join thread_track tt on tt.id = s.track_id left join thread th on th.utid = tt.utid \
     left join process_track ptk on ptk.id = s.track_id \
     left join process p on p.upid = coalesce(th.upid, ptk.upid) \
     left join track pt on pt.id = t.parent_id";
const COUNTERS: &str = "select hex(coalesce(case when p.pid < 1073741824 then 'pid ' || p.pid else p.name end, \
     case when gp.name is null then pt.name else gp.name || ' ' || pt.name end, '')), \
     hex(ct.name), coalesce(ct.unit, ''), c.ts, coalesce(c.value, 'NaN') \
     from counter c join counter_track ct on ct.id = c.track_id join track t on t.id = c.track_id \
     left join process_counter_track pct on pct.id = c.track_id left join process p on p.upid = pct.upid \
     left join track pt on pt.id = t.parent_id left join track gp on gp.id = pt.parent_id";
const FLOWS: &str = "select a.ts, hex(a.name), b.ts, hex(b.name) from flow f \
     join slice a on a.id = f.slice_out join slice b on b.id = f.slice_in";
const PROCESSES: &str = "select pid, hex(coalesce(name, '')) from process where pid between 1 and 1073741823";
const ARGS: &str =
    "select s.ts, hex(s.name), substr(a.key, instr(a.key, '.') + 1), hex(coalesce(a.display_value, '')) \
     from slice s join args a on a.arg_set_id = s.arg_set_id where a.key glob 'debug.*' or a.key glob 'args.*'";
const NEGATIVE: &str = "select count(*) from slice where dur < 0";

fn unhex(h: &str) -> String {
    let b: Vec<u8> = (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect();
    String::from_utf8_lossy(&b).into_owned()
}

/// trace_processor v52 decodes a JSON string's escapes only when it also
/// holds an escaped quote, and shows the others as written (`\t`,
/// `\u005c`): decode those as a JSON reader would.
fn v52(s: String) -> String {
    if !s.contains('"') && s.contains('\\') {
        if let Ok(d) = serde_json::from_str::<String>(&format!("\"{s}\"")) {
            return d;
        }
    }
    s
}

struct Tables {
    slices: Vec<Vec<String>>,
    counters: Vec<Vec<String>>,
    flows: Vec<Vec<String>>,
    processes: Vec<Vec<String>>,
    args: Vec<Vec<String>>,
}

fn load(tp: &Path, trace: &Path, json: bool) -> Tables {
    let mut r = tp_query(tp, trace, &[SLICES, COUNTERS, FLOWS, PROCESSES, ARGS, NEGATIVE]).into_iter();
    let text = |s: &str| if json { v52(unhex(s)) } else { unhex(s) };
    let mut slices: Vec<Vec<String>> = r
        .next()
        .unwrap()
        .into_iter()
        .map(|row| {
            let (lane, mut owner) = (text(&row[3]), text(&row[4]));
            // Perfetto's lost-events track is top-level; JSON needs a process.
            if !json && lane == LOST_TRACK {
                owner = LOST_GROUP.into();
            }
            // A group with a row of its own: Perfetto names its track
            // `group · what`; JSON puts a top-level track in a process of
            // the group's name.
            owner = owner.split(" · ").next().unwrap_or("").to_string();
            if json && owner == lane {
                owner = String::new();
            }
            vec![row[0].clone(), row[1].clone(), text(&row[2]), lane, owner, row[5].clone()]
        })
        .collect();
    let mut counters: Vec<Vec<String>> = r
        .next()
        .unwrap()
        .into_iter()
        .map(|row| {
            let (mut owner, mut name) = (text(&row[0]), text(&row[1]));
            // Perfetto's owner is the parent group's track, named `group ·
            // what` when the group has a row of its own (and the
            // grandparent's name before a sub-group's); JSON's the
            // pseudo-process of the group.
            if let Some((group, rest)) = owner.clone().split_once(" · ") {
                owner = match rest.split_once(' ') {
                    Some((_, sub)) if sub.starts_with(group) => sub.to_string(),
                    _ => group.to_string(),
                };
            }
            if let (false, Some((group, what))) = (json, name.clone().split_once(" · ")) {
                owner = group.to_string();
                name = format!("{group} {what}");
            }
            if !json {
                // A Chrome counter's track is "<event name> <arg key>": a
                // one-word name gets its unit (or "value") as the key.
                if !name.contains(' ') {
                    let unit = match row[2].as_str() {
                        "" => "value",
                        "bytes" => "B",
                        u => u,
                    };
                    name = format!("{name} {unit}");
                }
                if name == LOST_TRACK {
                    owner = LOST_GROUP.into();
                }
            }
            // 12 digits: the importer's JSON number parser can be 1 ulp off.
            let value = row[4].parse::<f64>().map_or(row[4].clone(), |v| format!("{v:.11e}"));
            vec![owner, name, row[3].clone(), value]
        })
        .collect();
    let mut flows: Vec<Vec<String>> = r
        .next()
        .unwrap()
        .into_iter()
        .map(|row| vec![row[0].clone(), text(&row[1]), row[2].clone(), text(&row[3])])
        .collect();
    let mut processes: Vec<Vec<String>> =
        r.next().unwrap().into_iter().map(|row| vec![row[0].clone(), text(&row[1])]).collect();
    let mut args: Vec<Vec<String>> = r
        .next()
        .unwrap()
        .into_iter()
        .map(|row| vec![row[0].clone(), text(&row[1]), row[2].clone(), text(&row[3])])
        .collect();
    assert_eq!(r.next().unwrap(), vec![vec!["0".to_string()]], "slices with dur < 0 in {}", trace.display());
    for t in [&mut slices, &mut counters, &mut flows, &mut processes, &mut args] {
        t.sort();
    }
    Tables { slices, counters, flows, processes, args }
}

/// Rows of `a` not in `b` (as multisets), for messages.
fn minus(a: &[Vec<String>], b: &[Vec<String>]) -> Vec<Vec<String>> {
    let mut b = b.to_vec();
    let mut out = Vec::new();
    for r in a {
        match b.iter().position(|x| x == r) {
            Some(i) => {
                b.remove(i);
            }
            None => out.push(r.clone()),
        }
    }
    out
}

fn assert_same(what: &str, p: &[Vec<String>], c: &[Vec<String>]) {
    assert!(
        p == c,
        "{what} differ: {} in Perfetto, {} in JSON\nonly in Perfetto: {:?}\nonly in JSON: {:?}",
        p.len(),
        c.len(),
        minus(p, c),
        minus(c, p)
    );
}

/// As [`assert_same`], with the timestamps in `ts_cols` equal within
/// `tol` ns: above 2^53 ns the importer reads JSON times through doubles.
fn assert_close(what: &str, p: &[Vec<String>], c: &[Vec<String>], ts_cols: &[usize], tol: i128) {
    if tol == 0 {
        return assert_same(what, p, c);
    }
    assert_eq!(p.len(), c.len(), "{what}: {} in Perfetto, {} in JSON", p.len(), c.len());
    let split = |rows: &[Vec<String>]| {
        let mut v: Vec<(Vec<String>, Vec<i128>)> = rows
            .iter()
            .map(|r| {
                let mut key = r.clone();
                let ts = ts_cols.iter().map(|&i| std::mem::take(&mut key[i]).parse().unwrap()).collect();
                (key, ts)
            })
            .collect();
        v.sort();
        v
    };
    for (a, b) in split(p).iter().zip(split(c).iter()) {
        let close = a.1.iter().zip(&b.1).all(|(x, y)| (x - y).abs() <= tol);
        assert!(a.0 == b.0 && close, "{what} differ: {a:?} in Perfetto, {b:?} in JSON");
    }
}

struct Exported {
    perfetto: Tables,
    chrome: Tables,
    stats: mltrace_chrome::ExportStats,
    perfetto_stats: mltrace_perfetto::ExportStats,
}

fn export_and_load(name: &str, log: &[u8]) -> Option<Exported> {
    let tp = tp()?;
    let dir = out_dir(name);
    let (pf, perfetto_stats) = perfetto(log);
    let (js, stats) = chrome(log);
    let (pp, jp) = (dir.join("trace.perfetto-trace"), dir.join("trace.json"));
    std::fs::write(&pp, pf).unwrap();
    std::fs::write(&jp, js).unwrap();
    let e = Exported { perfetto: load(&tp, &pp, false), chrome: load(&tp, &jp, true), stats, perfetto_stats };
    let _ = std::fs::remove_dir_all(&dir);
    Some(e)
}

/// Same slices, counters, processes and args; flows compared by the caller.
fn check_common(name: &str, e: &Exported, tol: i128) {
    let (p, c) = (&e.perfetto, &e.chrome);
    eprintln!(
        "{name}: {} slices, {} counter samples, {} flows (Perfetto {}), {} processes, {} args",
        c.slices.len(),
        c.counters.len(),
        c.flows.len(),
        p.flows.len(),
        c.processes.len(),
        c.args.len()
    );
    assert_eq!(p.slices.len(), c.slices.len(), "slice count");
    assert_close("slices", &p.slices, &c.slices, &[0], tol);
    assert_eq!(e.stats.slices, e.perfetto_stats.slices);
    // Per counter track: the same number of samples, then every sample.
    let per_track = |t: &Tables| {
        let names: BTreeSet<(String, String)> = t.counters.iter().map(|r| (r[0].clone(), r[1].clone())).collect();
        names
            .into_iter()
            .map(|(o, n)| {
                let k = t.counters.iter().filter(|r| r[0] == o && r[1] == n).count();
                vec![o, n, k.to_string()]
            })
            .collect::<Vec<_>>()
    };
    assert_same("counter tracks", &per_track(p), &per_track(c));
    assert_close("counter samples", &p.counters, &c.counters, &[2], tol);
    assert_eq!(e.stats.counters as usize, c.counters.len());
    // Args; an exec's command is an array in JSON (Perfetto's string stops at the first NUL).
    let pa: Vec<Vec<String>> = p.args.iter().filter(|r| r[2] != "command").cloned().collect();
    let ca: Vec<Vec<String>> = c.args.iter().filter(|r| !r[2].starts_with("command[")).cloned().collect();
    assert_close("args", &pa, &ca, &[0], tol);
    if tol == 0 {
        for r in p.args.iter().filter(|r| r[2] == "command" && !r[3].is_empty()) {
            let first = c.args.iter().find(|x| x[0] == r[0] && x[1] == r[1] && x[2] == "command[0]");
            assert_eq!(first.map(|x| &x[3]), Some(&r[3]), "{r:?}");
        }
    }
}

#[test]
fn sample_log_exports_the_same() {
    let Some(e) = export_and_load("sample", &sample_log(false)) else { return };
    check_common("sample", &e, 0);
    let (p, c) = (&e.perfetto, &e.chrome);
    assert!(p.slices.len() > 70, "{}", p.slices.len());
    // Both have every flow, also that of a request which started in the
    // same ns as its call: the call is written first.
    assert_same("flows", &c.flows, &p.flows);
    assert!(c.flows.iter().any(|f| f[0] == t(460).to_string() && f[3] == "R 8 KiB"));
    assert!(minus(&p.flows, &c.flows).is_empty());
    assert_eq!(c.flows.len(), 17);
    assert_eq!(e.stats.flows, e.perfetto_stats.flows);
    // One group per process, named for the program it ended up running
    // (pid 400 forks, reads, then execs `cat`).
    assert_same("processes", &p.processes, &c.processes);
    let named =
        |t: &Tables, pid: &str| t.processes.iter().filter(|r| r[0] == pid).map(|r| r[1].clone()).collect::<Vec<_>>();
    assert_eq!(named(c, "400"), vec!["cat hostname".to_string()]);
    assert_eq!(named(p, "400"), vec!["cat hostname".to_string()]);
    let names: Vec<&str> = c.processes.iter().map(|r| r[1].as_str()).collect();
    // Forked without exec from a Python process: a DataLoader worker.
    assert!(names.contains(&"DataLoader worker 0"), "{names:?}");
    assert!(names.contains(&"old \"daemon\""), "{names:?}");
    check_imported(p);
    check_imported(c);
}

/// The sample log's imported process, as either export shows it.
fn check_imported(t: &Tables) {
    let slices = |name: &str| t.slices.iter().filter(|r| r[2] == name).cloned().collect::<Vec<_>>();
    let args = |name: &str| -> Vec<(String, String)> {
        t.args.iter().filter(|r| r[1] == name).map(|r| (r[2].clone(), r[3].clone())).collect()
    };
    // a) Results the source never printed: no size, no errno, no result args.
    assert!(!t.slices.iter().any(|r| r[2].contains("E4095")), "an unknown result shown as an errno");
    for (name, n) in [("read ?", 2), ("openat img_0001.npy", 1), ("close img_0001.npy", 1), ("sendfile ?", 1)] {
        assert_eq!(slices(name).len(), n, "{name}");
        let a = args(name);
        assert_eq!(a.iter().filter(|(k, v)| k == "result" && v == "unknown").count(), n, "{name}: {a:?}");
        let shown = |k: &String| k == "returned" || k == "errno" || (name.starts_with("openat") && k == "fd");
        assert!(!a.iter().any(|(k, _)| shown(k)), "{name}: {a:?}");
    }
    assert!(args("write 4 KiB").contains(&("returned".into(), "4096".into())));
    // b) Named by its comm; a thread's comm names no process.
    let named = |pid: &str| t.processes.iter().filter(|r| r[0] == pid).map(|r| r[1].clone()).collect::<Vec<_>>();
    assert_eq!(named(&IMPORTED.to_string()), [IMPORTED_COMM]);
    assert_eq!(named("4300"), ["pid 4300"]);
    assert!(args("R 4 KiB").contains(&("process".into(), format!("{IMPORTED_COMM} [{IMPORTED}]"))));
    // c) Disks with dev 0 apart, by name.
    let on_disk = |disk: &str| t.slices.iter().filter(|r| r[3] == "requests" && r[4] == disk).count();
    assert_eq!((on_disk("Disk sda (0:0)"), on_disk("Disk sdb (0:0)")), (1, 2));
    for disk in ["Disk sda (0:0)", "Disk sdb (0:0)"] {
        assert!(t.counters.iter().any(|r| r[0] == disk && r[1] == format!("{disk} in flight")), "{disk}");
    }
    // d) A process's marks on its own track, MLLOG's on the events track.
    let owner = |name: &str| slices(name).iter().map(|r| (r[1].clone(), r[4].clone())).collect::<Vec<_>>();
    let mmap = r#"mmap = {"addr":"0x7f3a2c000000","fd":7,"file":"data.lmdb"}"#;
    let mine = format!("pid {IMPORTED}");
    assert_eq!(owner(mmap), [("0".to_string(), mine.clone())]);
    assert_eq!(owner("unlink"), [("0".to_string(), mine)]);
    assert_eq!(owner("note = \"mine\""), [("0".to_string(), format!("pid {ROOT}"))]);
    assert_eq!(args("note = \"mine\""), [("rank".to_string(), "1".to_string()), ("value".into(), "\"mine\"".into())]);
    let events = slices("eval_accuracy = 0.9071");
    assert_eq!(
        events.iter().map(|r| (r[3].as_str(), r[4].as_str())).collect::<Vec<_>>(),
        [("events", "Training phases")]
    );
}

#[test]
fn sampled_disk_counters_export_the_same() {
    // /proc/diskstats sampled: disks get no throughput from their requests.
    let Some(e) = export_and_load("sampled", &sample_log(true)) else { return };
    check_common("sampled", &e, 0);
    assert!(!e.chrome.counters.iter().any(|r| r[0].starts_with("Disk") && r[1] == "write B/s"));
    assert!(e.chrome.counters.iter().any(|r| r[0] == "Disk vda (254:0)" && r[1] == "read B/s"));
}

#[test]
fn random_logs_export_the_same() {
    for seed in [42, 7] {
        let name = format!("random-{seed}");
        let Some(e) = export_and_load(&name, &random_log(seed, 1500)) else { return };
        check_common(&name, &e, 0);
        assert_same("flows", &e.perfetto.flows, &e.chrome.flows);
        assert_eq!(e.chrome.flows.len() as u64, e.stats.flows);
        assert_same("processes", &e.perfetto.processes, &e.chrome.processes);
    }
}

/// Recorded logs, when named: `MLTRACE_PARITY_LOGS=a.bin:b.bin cargo test
/// -p mltrace-chrome --test perfetto_parity recorded`.
#[test]
fn recorded_logs_export_the_same() {
    let Some(paths) = std::env::var_os("MLTRACE_PARITY_LOGS") else { return };
    for path in std::env::split_paths(&paths) {
        let log = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(e) = export_and_load(&name, &log) else { return };
        let huge = e.perfetto.slices.iter().any(|r| r[0].parse::<u64>().unwrap() >= 1 << 53);
        let tol = if huge { 512 } else { 0 };
        check_common(&name, &e, tol);
        let (p, c) = (&e.perfetto, &e.chrome);
        // Perfetto's importer may drop a flow whose request started in the
        // call's first ns (see sample_log_exports_the_same).
        if tol == 0 {
            assert!(minus(&p.flows, &c.flows).is_empty(), "{:?}", minus(&p.flows, &c.flows));
            for r in minus(&c.flows, &p.flows) {
                assert_eq!(r[0], r[2], "{r:?}");
            }
        } else {
            assert_close("flows", &p.flows, &c.flows, &[0, 2], tol);
        }
        // A pid named twice in Perfetto (exec'd after it was shown, or
        // reused) has the last of those names in JSON.
        for (pid, name) in c.processes.iter().map(|r| (&r[0], &r[1])) {
            let names: Vec<&String> = p.processes.iter().filter(|r| &r[0] == pid).map(|r| &r[1]).collect();
            assert!(names.len() > 1 || names == [name], "pid {pid}: {name:?} vs {names:?}");
        }
    }
}
