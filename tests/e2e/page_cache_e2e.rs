//! Bytes from storage per process and file (filemap:mm_filemap_add_to_page_cache),
//! on files whose pages were dropped first: read twice through read(), read
//! through a mapping (in a memory cgroup too small for it too), written, and
//! mapped through an fd opened before the recording (named from /proc/PID/maps).

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use mltrace_log::*;
use mltrace_tests::*;

const MIB: u64 = 1 << 20;

struct Run {
    log: PathBuf,
    kv: std::collections::HashMap<String, i64>,
    recs: Vec<Rec>,
    json: serde_json::Value,
}

fn record(dir: &Path, extra: &[&str], cmd: &[&str]) -> Run {
    let log = dir.join(format!("run-{}.bin", cmd[1]));
    let mut args = vec!["record", "-q", "-f", "--gpu", "off", "-o", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    let out = mltrace(&args, dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("0 lost"), "{stderr}");
    let kv = key_values(&String::from_utf8_lossy(&out.stdout));
    let js = mltrace(&["stats", "--json", log.to_str().unwrap()], dir);
    assert!(js.status.success(), "{}", String::from_utf8_lossy(&js.stderr));
    Run { recs: read_log(&log), log, kv, json: serde_json::from_slice(&js.stdout).unwrap() }
}

/// Makes a file of `mib` MiB whose pages are not in the cache.
fn cold_file(bin: &Path, dir: &Path, name: &str, mib: u64) -> PathBuf {
    let f = dir.join(name);
    let st = Command::new(bin).args(["make", f.to_str().unwrap(), &mib.to_string()]).output().unwrap();
    assert!(st.status.success());
    f
}

fn file<'a>(run: &'a Run, path: &Path) -> &'a serde_json::Value {
    run.json["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path.to_str().unwrap())
        .unwrap_or_else(|| panic!("{} not in {}", path.display(), run.json["files"]))
}

fn process(run: &Run) -> &serde_json::Value {
    let pid = run.kv["pid"];
    run.json["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap()
}

/// Page-cache records of the workload's own file.
fn insertions<'a>(run: &'a Run, path: &'a Path) -> impl Iterator<Item = PageCache> + 'a {
    run.recs.iter().filter_map(move |r| match r.rec {
        Record::PageCache(c) if r.strs[0] == path.to_str().unwrap() => Some(c),
        _ => None,
    })
}

fn read_twice(extra: &[&str]) {
    // On a disk, not a tmpfs /tmp: tmpfs pages never pass the page-cache tracepoint.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = compile_workload("cold_read", tmp.path());
    let f = cold_file(&bin, tmp.path(), "twice.bin", 32);
    let run = record(tmp.path(), extra, &[bin.to_str().unwrap(), "twice", f.to_str().unwrap()]);
    let size = 32 * MIB;
    assert_eq!(run.kv["bytes"] as u64, 2 * size);
    let pid = run.kv["pid"] as u32;
    // The first pass brought the file in, inside its read() calls; the
    // second found it cached.
    let (mut during_reads, mut other) = (0, 0);
    for c in insertions(&run, &f) {
        assert_eq!(c.pid, pid);
        match c.during {
            CacheDuring::Read => during_reads += c.bytes,
            _ => other += c.bytes,
        }
    }
    // Every page once, inside reads; a loaded machine may evict a few of
    // them before the second pass reads them again (seen once in a full
    // suite run: 8 pages), which the kernel then counts too.
    assert_eq!(other, 0, "inside reads");
    assert!((size..size + MIB).contains(&during_reads), "every page once: {during_reads}");
    // Runs, not one record per folio: the 1 MiB reads bring the file in
    // 32 calls (one record per folio was 8,192 records on 5.10, about
    // 2,000 with large folios).
    let records = insertions(&run, &f).count();
    assert!(records <= 128, "{records} page-cache records for 32 MiB read in 1 MiB calls");
    let fj = file(&run, &f);
    assert_eq!(fj["read_bytes"].as_u64(), Some(2 * size));
    assert_eq!(fj["storage_read_bytes"].as_u64(), Some(during_reads));
    let hit = fj["page_cache"]["hit_ratio"].as_f64().unwrap();
    assert!((hit - (1.0 - during_reads as f64 / (2 * size) as f64)).abs() < 1e-9 && hit > 0.48, "hit {hit}");
    let p = process(&run);
    let storage = p["storage_read_bytes"].as_u64().unwrap();
    assert!((size..size + MIB).contains(&storage), "the process: {storage} (its program's pages too)");
    // The kernel's own count of bytes it read from storage for the process agrees.
    let kernel = p["kernel"]["read_bytes"].as_u64().unwrap();
    assert!(kernel.abs_diff(storage) <= MIB, "kernel read_bytes {kernel}, traced storage {storage}");
    trace_shows_both_rates(tmp.path(), &run, &f, storage, during_reads);
}

/// In the trace: the process's "read" and "read from storage" rates add
/// up to what it read and what came from storage, and the file's opens
/// carry the run's totals for it.
fn trace_shows_both_rates(dir: &Path, run: &Run, f: &Path, storage: u64, file_storage: u64) {
    let Some(tp) = perfetto_tp() else { return };
    let trace = dir.join("twice.perfetto-trace");
    let out = mltrace(&["export", run.log.to_str().unwrap(), "-o", trace.to_str().unwrap()], dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid = run.kv["pid"];
    // A counter holds its value until its next sample (a bin equal to the
    // one before is not written again): bytes are value x time held.
    let rates = format!(
        "select name, cast(sum(v) as int) from (select t.name as name, c.value * \
         (lead(c.ts) over (partition by c.track_id order by c.ts) - c.ts) / 1e9 as v \
         from counter c join process_counter_track t on c.track_id = t.id join process p using(upid) \
         where p.pid = {pid} and t.name in ('read', 'read from storage')) group by name order by name"
    );
    let name = f.file_name().unwrap().to_str().unwrap();
    let args = format!(
        "select a.key, a.display_value from slice s join args a using(arg_set_id) \
         where s.name like 'open% {name}' and a.key like 'debug.file:%' group by a.key order by a.key"
    );
    let r = tp_query(&tp, &trace, &[&rates, &args]);
    let got: Vec<(String, u64)> = r[0].iter().map(|row| (row[0].clone(), row[1].parse().unwrap())).collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].0, "read");
    // The program's own reads (ld.so reading libraries) come on top.
    assert!(got[0].1.abs_diff(2 * 32 * MIB) < 64 * 1024, "{got:?}");
    assert_eq!(got[1].0, "read from storage");
    assert!(got[1].1.abs_diff(storage) < 1024, "{got:?} vs {storage}");
    let args: Vec<(String, String)> = r[1].iter().map(|row| (row[0].clone(), row[1].clone())).collect();
    let hit: f64 = args[0].1.trim_end_matches('%').parse().unwrap_or(-1.0);
    assert!(args[0].0 == "debug.file: page cache hit (run)" && (hit - 50.0).abs() <= 1.0, "{args:?}");
    assert_eq!(
        args[1..],
        vec![
            ("debug.file: read by calls (run)".to_string(), (2 * 32 * MIB).to_string()),
            ("debug.file: read from storage (run)".to_string(), file_storage.to_string()),
        ]
    );
}

#[test]
fn a_file_read_twice_comes_half_from_storage() {
    let Some(_turn) = require_root!() else {
        return;
    };
    read_twice(&[]);
}

#[test]
fn a_file_read_twice_comes_half_from_storage_on_the_compat_route() {
    let Some(_turn) = require_root!() else {
        return;
    };
    read_twice(&["--syscall-probes", "compat"]);
}

#[test]
fn a_cold_mapped_file_is_attributed_to_its_path_and_process() {
    let Some(_turn) = require_root!() else {
        return;
    };
    // On a disk, not a tmpfs /tmp: tmpfs pages never pass the page-cache tracepoint.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = compile_workload("cold_read", tmp.path());
    let f = cold_file(&bin, tmp.path(), "mapped.bin", 256);
    let size = 256 * MIB;
    let run = record(tmp.path(), &[], &[bin.to_str().unwrap(), "mmap", f.to_str().unwrap()]);
    let faults = mapped_faults(&run, &f, size);
    let p = process(&run);
    let kernel = p["kernel"]["read_bytes"].as_u64().unwrap();
    let storage = p["storage_read_bytes"].as_u64().unwrap();
    assert!(kernel.abs_diff(storage) <= 2 * MIB, "kernel read_bytes {kernel}, traced storage {storage}");
    assert!(faults <= storage);
}

/// Checks the faults' records of `size` bytes mapped from `f` by the run's
/// process and returns the bytes they brought in. Pages reclaimed before
/// they were touched are read again (a real read, which the kernel's
/// read_bytes counts too), so a range may come twice, but never twice at
/// one instant: that would be a record duplicated.
fn mapped_faults(run: &Run, f: &Path, size: u64) -> u64 {
    let pid = run.kv["pid"] as u32;
    let mut v: Vec<PageCache> = insertions(run, f).collect();
    for c in &v {
        assert_eq!((c.pid, c.tid), (pid, pid));
        assert_eq!(c.during, CacheDuring::Fault, "no read call: the mapping's faults");
        assert!(c.offset + c.bytes <= size);
    }
    v.sort_by_key(|c| (c.ts, c.offset));
    for w in v.windows(2) {
        let same_time = w[0].ts == w[1].ts && w[1].offset < w[0].offset + w[0].bytes;
        assert!(!same_time, "pages at {} inserted twice at {}: a duplicated record", w[1].offset, w[1].ts);
    }
    v.sort_by_key(|c| c.offset);
    let (mut distinct, mut end) = (0, 0);
    for c in &v {
        distinct += (c.offset + c.bytes).saturating_sub(end.max(c.offset));
        end = end.max(c.offset + c.bytes);
    }
    let faults: u64 = v.iter().map(|c| c.bytes).sum();
    assert!(distinct >= size * 95 / 100 && distinct <= size, "{distinct} of {size} bytes from storage");
    let fj = file(run, f);
    assert_eq!(fj["storage_read_bytes"].as_u64(), Some(faults));
    assert_eq!((fj["reads"].as_u64(), fj["page_cache"]["faults"].as_u64()), (Some(0), Some(faults)));
    faults
}

/// A mapping touched twice, in a memory cgroup that holds half of it: the
/// second pass finds the first one's pages reclaimed and reads them again.
/// Every read counts, as the kernel's own read_bytes counts it.
#[test]
fn a_mapping_twice_its_memory_cgroup_is_read_again_and_each_read_counted() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let size = 128 * MIB;
    let Some(cg) = memory_cgroup(size / 2) else {
        return;
    };
    // On a disk, not a tmpfs /tmp: tmpfs pages never pass the page-cache tracepoint.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = compile_workload("cold_read", tmp.path());
    let f = cold_file(&bin, tmp.path(), "squeezed.bin", 128);
    let procs = cg.0.join("cgroup.procs");
    let join = format!("echo $$ > {} && exec {} mmap {} 4096 2", procs.display(), bin.display(), f.display());
    let run = record(tmp.path(), &[], &["sh", "-c", &join]);
    assert_eq!(run.kv["bytes"] as u64, 2 * size);
    let faults = mapped_faults(&run, &f, size);
    assert!(faults >= size + size / 4, "{faults} bytes from storage for {size} mapped and touched twice");
    let p = process(&run);
    let kernel = p["kernel"]["read_bytes"].as_u64().unwrap();
    let storage = p["storage_read_bytes"].as_u64().unwrap();
    assert!(kernel.abs_diff(storage) <= MIB / 4, "kernel read_bytes {kernel}, traced storage {storage}");
}

/// A memory cgroup of its own with a limit (v1 or v2).
fn memory_cgroup(limit: u64) -> Option<TestCgroup> {
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").is_ok_and(|c| c.contains("memory"));
    let (parent, knob) = match v2 {
        true => ("/sys/fs/cgroup", "memory.max"),
        false if Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() => {
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
        }
        false => {
            skip("a memory cgroup's limit", "no memory controller under /sys/fs/cgroup");
            return None;
        }
    };
    let dir = Path::new(parent).join(format!("mltrace-test-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let cg = TestCgroup(dir);
    std::fs::write(cg.0.join(knob), limit.to_string()).unwrap();
    Some(cg)
}

#[test]
fn pages_a_write_fills_are_not_reads_from_storage() {
    let Some(_turn) = require_root!() else {
        return;
    };
    // On a disk, not a tmpfs /tmp: tmpfs pages never pass the page-cache tracepoint.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = compile_workload("cold_read", tmp.path());
    let f = tmp.path().join("written.bin");
    let run = record(tmp.path(), &[], &[bin.to_str().unwrap(), "make", f.to_str().unwrap(), "16"]);
    let written: u64 = insertions(&run, &f)
        .map(|c| {
            assert_eq!(c.during, CacheDuring::Write);
            c.bytes
        })
        .sum();
    assert_eq!(written, 16 * MIB);
    let fj = file(&run, &f);
    assert_eq!(fj["storage_read_bytes"].as_u64(), Some(0));
    assert_eq!(fj["page_cache"]["filled_by_writes"].as_u64(), Some(16 * MIB));
}

/// A file the command got open (no open traced) and maps: named from its
/// /proc/PID/maps while it runs.
#[test]
fn a_file_mapped_through_an_inherited_fd_is_named_from_proc() {
    let Some(_turn) = require_root!() else {
        return;
    };
    // On a disk, not a tmpfs /tmp: tmpfs pages never pass the page-cache tracepoint.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = compile_workload("cold_read", tmp.path());
    let f = cold_file(&bin, tmp.path(), "inherited.bin", 16);
    let held = std::fs::File::open(&f).unwrap();
    let fd = held.as_raw_fd();
    // SAFETY: clearing FD_CLOEXEC on our own open fd, so mltrace and the command inherit it.
    assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }, 0);
    let fd_s = fd.to_string();
    let run = record(tmp.path(), &[], &[bin.to_str().unwrap(), "mmapfd", &fd_s]);
    drop(held);
    assert!(!run.recs.iter().any(|r| matches!(r.rec, Record::Open(_)) && r.strs[1] == f.to_str().unwrap()));
    let faults: u64 = insertions(&run, &f).map(|c| c.bytes).sum();
    assert!(faults >= 16 * MIB * 95 / 100, "{faults}");
    assert_eq!(file(&run, &f)["storage_read_bytes"].as_u64(), Some(faults));
}

/// Records `sh -c 'write a file, read it'` in a mount namespace of its own
/// where tracefs is not mounted, `prefix` (setpriv ...) before mltrace.
fn record_without_tracefs(dir: &Path, prefix: &str) -> (String, Vec<Rec>) {
    let log = dir.join("no-tracefs.bin");
    let data = dir.join("written.bin");
    let script = format!(
        "umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug/tracing 2>/dev/null; \
         test -e /sys/kernel/tracing/events && exit 99; \
         exec {prefix} {} record -q -f --gpu off -o {} -- sh -c 'head -c 2097152 /dev/zero > {}; cat {} > /dev/null'",
        mltrace_bin().display(),
        log.display(),
        data.display(),
        data.display()
    );
    let out =
        Command::new("unshare").args(["--mount", "--propagation", "private", "sh", "-c", &script]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    (stderr, read_log(&log))
}

#[test]
fn tracefs_is_mounted_when_missing_and_its_probes_are_left_out_when_it_cannot_be() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let pages = |recs: &[Rec]| recs.iter().filter(|r| matches!(r.rec, Record::PageCache(_))).count();
    let reads = |recs: &[Rec]| recs.iter().filter(|r| matches!(&r.rec, Record::Io(x) if !x.op.is_write())).count();

    // Root: mltrace mounts it (in this namespace only) and says so.
    let (stderr, recs) = record_without_tracefs(tmp.path(), "");
    assert!(stderr.contains("tracefs was not mounted; mounted it at /sys/kernel/tracing"), "{stderr}");
    assert!(pages(&recs) > 0, "the written file's pages are recorded: {stderr}");

    // Without CAP_SYS_ADMIN it cannot mount it: the rest is recorded, and
    // what needs tracefs is named as left out.
    let (stderr, recs) = record_without_tracefs(tmp.path(), "setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin");
    assert!(
        stderr.contains("tracefs is not mounted and mounting it at /sys/kernel/tracing failed")
            && stderr
                .contains("page-cache attribution, io_uring requests and major faults' start times are not recorded"),
        "{stderr}"
    );
    assert_eq!(pages(&recs), 0);
    assert!(reads(&recs) > 0, "{stderr}");
    // The machine's own tracefs was never touched.
    assert!(Path::new("/sys/kernel/tracing/events").exists());
}
