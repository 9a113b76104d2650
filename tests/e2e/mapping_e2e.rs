//! mmap, munmap, mremap and major faults, recorded with the real BPF
//! programs on files whose pages were dropped first: a cold 256 MiB file
//! read through a mapping, a forked child touching its parent's mapping,
//! and a mapping cut by munmap and moved by mremap, whose faults must land
//! on the file offsets the kernel itself read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mltrace_log::*;
use mltrace_model::maps::Maps;
use mltrace_tests::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;

struct Run {
    log: PathBuf,
    kv: HashMap<String, i64>,
    recs: Vec<Rec>,
    json: Value,
}

fn record(dir: &Path, name: &str, extra: &[&str], cmd: &[&str]) -> Run {
    let log = dir.join(format!("run-{name}.bin"));
    let mut args = vec!["record", "-q", "-f", "--gpu", "off", "-o", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    let out = mltrace(&args, dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{}", String::from_utf8_lossy(&out.stdout));
    assert!(stderr.contains("0 lost"), "{stderr}");
    let kv = key_values(&String::from_utf8_lossy(&out.stdout));
    let js = mltrace(&["stats", "--json", log.to_str().unwrap()], dir);
    assert!(js.status.success(), "{}", String::from_utf8_lossy(&js.stderr));
    Run { recs: read_log(&log), log, kv, json: serde_json::from_slice(&js.stdout).unwrap() }
}

/// A file of `mib` MiB on disk (not a tmpfs /tmp, whose pages never pass
/// the page-cache tracepoint) whose pages are not in the cache.
fn cold_file(dir: &Path, name: &str, mib: u64) -> PathBuf {
    let bin = compile_workload("cold_read", dir);
    let f = dir.join(name);
    let st = Command::new(bin).args(["make", f.to_str().unwrap(), &mib.to_string()]).output().unwrap();
    assert!(st.status.success());
    f
}

fn process(run: &Run, pid: i64) -> &Value {
    run.json["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap()
}

fn file<'a>(run: &'a Run, path: &Path) -> &'a Value {
    let files = run.json["files"].as_array().unwrap();
    files.iter().find(|f| f["path"] == path.to_str().unwrap()).unwrap_or_else(|| panic!("{}", run.json["files"]))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn faults(run: &Run, pid: i64) -> Vec<(MajorFault, String)> {
    let pid = pid as u32;
    run.recs
        .iter()
        .filter_map(|r| match r.rec {
            Record::MajorFault(f) if f.pid == pid => Some((f, r.strs[0].clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_cold_mapped_file_is_attributed_to_its_path_and_process() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let f = cold_file(tmp.path(), "mapped.bin", 256);
    let size = 256 * MIB;
    let bin = compile_workload("cold_read", tmp.path());
    let run = record(tmp.path(), "cold", &[], &[bin.to_str().unwrap(), "mmap", f.to_str().unwrap(), "4096"]);
    let pid = run.kv["pid"];
    let (p, fj) = (process(&run, pid), file(&run, &f));
    // The file, mapped once: its size (the process also maps ld.so.cache).
    assert_eq!(u(&fj["mapped_bytes"]), size);
    assert_eq!(u(&fj["mmaps"]), 1);
    assert!((size..size + MIB).contains(&u(&p["mapped_bytes"])), "{}", p["mapped_bytes"]);
    // Nearly all of it from storage, through the mapping.
    let via = u(&fj["mapped_storage_read_bytes"]);
    assert!(via >= size * 95 / 100 && via <= size, "{via} of {size}");
    assert_eq!(u(&p["mapped_storage_read_bytes"]), via);
    // Major faults on it (readahead keeps most page faults minor).
    assert!(u(&fj["major_faults"]) > 0 && u(&p["major_faults"]) >= u(&fj["major_faults"]), "{fj}");
    // Kernels without filemap:mm_filemap_fault (before 6.x; 5.10 and 6.1
    // here) give each fault's end and address only: it is the file's by
    // the mapping it falls in.
    let header = LogReader::open(&run.log).unwrap().header().clone();
    let starts =
        header.probes.iter().any(|p| p.subsystem == "major faults" && p.detail.contains("+ filemap:mm_filemap_fault"));
    let mapped = run.recs.iter().find_map(|r| match r.rec {
        Record::Mapping(m) if m.pid == pid as u32 && r.strs[0] == f.to_str().unwrap() => m.mapped_at(),
        _ => None,
    });
    let base = mapped.expect("the file's mmap");
    let ours: Vec<_> = faults(&run, pid)
        .into_iter()
        .filter(|(r, path)| if starts { path == f.to_str().unwrap() } else { (base..base + size).contains(&r.addr) })
        .collect();
    assert!(!ours.is_empty());
    for (r, _) in ours.iter().filter(|_| starts) {
        assert!(r.flags & fault::FILE != 0 && r.dur > 0, "the stall from its start: {r:?}");
        assert!(r.offset < size);
    }
    // Libraries: counted, not data.
    assert!(u(&p["mappings"]["code"]["calls"]) > 0);
    trace_shows(tmp.path(), &run, &f, ours.len(), starts);
}

/// In the trace: the mmap and munmap on the thread's track with their
/// args, and the major faults as slices (Perfetto's importer, strict):
/// with a duration where the kernel said when the stall began (`starts`).
fn trace_shows(dir: &Path, run: &Run, f: &Path, faults: usize, starts: bool) {
    let Some(tp) = perfetto_tp() else { return };
    let trace = dir.join("cold.perfetto-trace");
    let out = mltrace(&["export", run.log.to_str().unwrap(), "-o", trace.to_str().unwrap()], dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let name = f.file_name().unwrap().to_str().unwrap();
    let slices = format!(
        "select s.name, count(*), min(s.dur) > 0 from slice s join thread_track t on s.track_id = t.id \
         where s.name like '%{name}' and s.name not like '%open%' and s.name not like 'close%' \
         group by s.name order by s.name"
    );
    let args = format!(
        "select a.key, a.display_value from slice s join args a using(arg_set_id) \
         where s.name = 'mmap {name}' and a.key in ('debug.path', 'debug.length', 'debug.offset', \
         'debug.prot', 'debug.flags') order by a.key"
    );
    let r = tp_query(&tp, &trace, &[&slices, &args]);
    let rows: Vec<Vec<String>> = r[0].clone();
    let want = |n: &str, c: usize| vec![n.to_string(), c.to_string(), "1".to_string()];
    let fault_row = vec![format!("major fault {name}"), faults.to_string(), if starts { "1" } else { "0" }.to_string()];
    assert_eq!(rows, vec![fault_row, want(&format!("mmap {name}"), 1), want(&format!("munmap {name}"), 1)]);
    let args: Vec<(String, String)> = r[1].iter().map(|row| (row[0].clone(), row[1].clone())).collect();
    let s = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        args,
        vec![
            s("debug.flags", "MAP_SHARED"),
            s("debug.length", &(256 * MIB).to_string()),
            s("debug.offset", "0"),
            s("debug.path", f.to_str().unwrap()),
            s("debug.prot", "PROT_READ"),
        ]
    );
}

#[test]
fn a_forked_child_faults_in_its_parents_mapping() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let f = cold_file(tmp.path(), "shared.bin", 64);
    let size = 64 * MIB;
    let bin = compile_workload("maps", tmp.path());
    let run = record(tmp.path(), "fork", &[], &[bin.to_str().unwrap(), "fork", f.to_str().unwrap()]);
    let (parent, child) = (process(&run, run.kv["pid"]), process(&run, run.kv["child"]));
    assert_eq!(u(&child["parent"]), u(&parent["pid"]));
    // The child mapped nothing itself: it inherited the parent's mapping.
    assert_eq!(u(&child["mapped_bytes"]), 0);
    assert_eq!(u(&child["mappings"]["inherited_bytes"]), size);
    assert!(u(&parent["mapped_bytes"]) >= size);
    // Its faults and the pages they read are its own, on the file's path.
    let via = u(&child["mapped_storage_read_bytes"]);
    assert!(via >= size * 95 / 100 && via <= size, "{via} of {size}");
    assert!(u(&child["major_faults"]) > 0);
    assert_eq!(u(&parent["major_faults"]), 0);
    assert_eq!(u(&parent["mapped_storage_read_bytes"]), 0);
    let fj = file(&run, &f);
    assert_eq!((u(&fj["mapped_bytes"]), u(&fj["mapped_storage_read_bytes"])), (size, via));
    assert_eq!(u(&fj["major_faults"]), u(&child["major_faults"]));
    assert!(faults(&run, run.kv["child"]).iter().all(|(_, p)| p == f.to_str().unwrap()));
}

/// munmap splits the mapping and mremap moves a piece of it: every fault
/// the mapping table attributes lands on the page the kernel read.
fn partial(extra: &[&str]) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let f = cold_file(tmp.path(), "partial.bin", 16);
    let bin = compile_workload("maps", tmp.path());
    let run = record(tmp.path(), "partial", extra, &[bin.to_str().unwrap(), "partial", f.to_str().unwrap()]);
    let pid = run.kv["pid"];
    let (base, moved, pages) = (run.kv["addr"] as u64, run.kv["moved"] as u64, run.kv["pages"] as u64);
    // Replay the log through the model's tables, as stats and the trace do.
    let mut maps = Maps::default();
    let (mut checked, mut in_moved) = (0, 0);
    for r in &run.recs {
        if let Record::MajorFault(x) = r.rec {
            if x.pid == pid as u32 {
                let region = maps.find(x.pid, x.addr).unwrap_or_else(|| panic!("{x:?} in no mapping"));
                assert_eq!(&*region.file.path, f.to_str().unwrap().as_bytes());
                assert!(x.flags & fault::FILE != 0, "{x:?}");
                assert_eq!(region.offset_of(x.addr) / 4096, x.offset / 4096, "{x:?}: the kernel read another page");
                if (moved..moved + 4 * MIB).contains(&x.addr) {
                    // The piece that was at 8-12 MiB, touched 32 KiB in.
                    assert_eq!(x.offset % (64 * 1024), 32 * 1024);
                    assert!((8 * MIB..12 * MIB).contains(&x.offset), "{x:?}");
                    in_moved += 1;
                } else {
                    assert!(x.addr >= base && !(base + 4 * MIB..base + 8 * MIB).contains(&x.addr), "{x:?}");
                }
                checked += 1;
            }
        }
        maps.apply_path(&r.rec, r.strs.first().map_or(&b""[..], |s| s.as_bytes()));
    }
    // MADV_RANDOM: one major fault per page touched.
    assert_eq!((checked, in_moved), (pages, 64));
    let p = process(&run, pid);
    assert_eq!(u(&p["major_faults"]), pages);
    assert_eq!(u(&p["mapped_storage_read_bytes"]), pages * 4096);
    // ld.so.cache's munmap, the hole at 4 MiB, then the three pieces'.
    assert_eq!((u(&p["mappings"]["munmaps"]), u(&p["mappings"]["mremaps"])), (5, 2));
    assert_eq!(u(&file(&run, &f)["major_faults"]), pages);
    assert!(maps.is_empty(), "the process's table is dropped at its exit");
}

#[test]
fn munmap_and_mremap_keep_faults_on_their_file_offsets() {
    let Some(_turn) = require_root!() else {
        return;
    };
    partial(&[]);
}

#[test]
fn munmap_and_mremap_keep_faults_on_their_file_offsets_on_the_compat_route() {
    let Some(_turn) = require_root!() else {
        return;
    };
    partial(&["--syscall-probes", "compat"]);
}

#[test]
fn recording_without_mappings_leaves_them_null() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let f = cold_file(tmp.path(), "off.bin", 4);
    let bin = compile_workload("cold_read", tmp.path());
    let run = record(tmp.path(), "off", &["--mappings", "off"], &[bin.to_str().unwrap(), "mmap", f.to_str().unwrap()]);
    assert!(!run.recs.iter().any(|r| matches!(r.rec, Record::Mapping(_) | Record::MajorFault(_))));
    let p = process(&run, run.kv["pid"]);
    for k in ["mapped_bytes", "major_faults", "mapped_storage_read_bytes", "mappings"] {
        assert!(p[k].is_null(), "{k}: {}", p[k]);
    }
    assert!(u(&p["storage_read_bytes"]) >= 4 * MIB * 95 / 100, "the page cache still sees it");
}
