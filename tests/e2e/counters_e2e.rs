//! Counters sampled during `record`: /proc (CPU, memory, disks, traced
//! processes) and GPUs through NVML, tested with a stand-in libnvidia-ml
//! that answers scripted values.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mltrace_log::*;
use mltrace_tests::*;

/// The metric sets `doctor` and the log's header name for the stand-in's GPUs.
const GPM_SET: &str = "GPM metrics (SM active, SM occupancy, tensor active, DRAM bandwidth used, PCIe rx, PCIe tx, \
                       NVLink rx, NVLink tx)";
const FIELDS_SET: &str =
    "NVML metrics, no GPM (utilisation (any kernel running), NVLink rx, NVLink tx from field values)";

/// (group, name, pid) -> samples (ts, value).
type Series = HashMap<(String, String, u32), Vec<(u64, f64)>>;

fn counters(recs: &[Rec]) -> Series {
    let mut m: Series = HashMap::new();
    for r in recs {
        if let Record::Counter(c) = r.rec {
            m.entry((r.strs[0].clone(), r.strs[1].clone(), c.pid)).or_default().push((c.ts, c.value));
        }
    }
    m
}

fn read_counters(log: &Path) -> (Vec<Rec>, Series) {
    let recs = read_log(log);
    // read_log resolves strings of the kinds it knows; add counters' own.
    let mut r = LogReader::open(log).unwrap();
    let mut with = Vec::new();
    let mut i = 0;
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(rec) = f.next_record() {
            let strs = match rec {
                Record::Counter(c) => vec![f.str_lossy(c.group).into_owned(), f.str_lossy(c.name).into_owned()],
                _ => recs[i].strs.clone(),
            };
            with.push(Rec { rec, strs });
            i += 1;
        }
    }
    let series = counters(&with);
    (with, series)
}

fn mean(v: &[(u64, f64)]) -> f64 {
    v.iter().map(|x| x.1).sum::<f64>() / v.len() as f64
}

#[test]
fn proc_samplers_see_a_busy_and_an_idle_process() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("r.bin");
    let pids = tmp.path().join("pids");
    // The burner's statm, then its stat, by one process right before the
    // kill: what it runs after the stat is sampled but not in the stat
    // (a second `cat` took 0.1-0.2 s under emulation).
    let stat = tmp.path().join("burner.stat");
    let script = format!(
        "sh -c 'while :; do :; done' & B=$!; sleep 30 & S=$!; sleep 0.6; sleep 30 & L=$!; \
         echo \"$B $S $L\" > {}; sleep 1.5; cat /proc/$B/statm /proc/$B/stat > {}; kill $B $S $L; wait",
        pids.display(),
        stat.display()
    );
    let out = mltrace(
        &["record", "-q", "--sample-interval", "100ms", "-o", log.to_str().unwrap(), "--", "sh", "-c", &script],
        tmp.path(),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ids: Vec<u32> =
        std::fs::read_to_string(&pids).unwrap().split_whitespace().map(|p| p.parse().unwrap()).collect();
    let (burner, sleeper, late) = (ids[0], ids[1], ids[2]);
    let (recs, series) = read_counters(&log);
    let get = |g: &str, n: &str, pid: u32| series.get(&(g.into(), n.into(), pid)).cloned().unwrap_or_default();
    let busy: Vec<(u64, f64)> =
        get("", "CPU user", burner).iter().zip(get("", "CPU system", burner)).map(|(u, s)| (u.0, u.1 + s.1)).collect();
    assert!(busy.len() >= 10, "{} samples", busy.len());
    // A spinning shell is busy (how busy depends on what else the machine
    // runs), and the samples add up to the CPU time the kernel counted:
    // integrate CPU % over the intervals and compare with utime + stime.
    let m = mean(&busy[1..busy.len() - 1]);
    assert!(m > 20.0, "burner CPU {m:.1}%: {busy:?}");
    let both = std::fs::read_to_string(&stat).unwrap();
    let (statm, text) = both.split_once('\n').unwrap();
    let f: Vec<&str> = text[text.rfind(')').unwrap() + 2..].split(' ').collect();
    // SAFETY: sysconf has no preconditions.
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let kernel_s = (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / tck;
    let first = get("", "RSS", burner)[0].0;
    let mut prev = first;
    let mut sampled_s = 0.0;
    for &(ts, pct) in &busy {
        sampled_s += pct / 100.0 * (ts - prev) as f64 / 1e9;
        prev = ts;
    }
    // The samples miss what ran before the first and after the last one.
    assert!(
        sampled_s <= kernel_s + 0.05 && sampled_s >= kernel_s - 0.4,
        "sampled {sampled_s:.3} s of CPU, kernel says {kernel_s:.3} s"
    );
    let idle = get("", "CPU user", sleeper);
    assert!(idle.len() >= 10 && mean(&idle) < 5.0, "sleeper: {idle:?}");
    // The burner faults nothing once it spins, so its last samples read
    // what the kernel's statm says at the end. Not a fixed size: kernels
    // before 6.2 count a task's recent faults apart until 64 of them
    // (SPLIT_RSS_COUNTING), so a fresh shell's statm can read under 100 kB.
    let rss = get("", "RSS", burner);
    let pages: f64 = statm.split(' ').nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    let kernel_rss = pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as f64;
    let last = rss.last().map_or(0.0, |x| x.1);
    assert!(
        kernel_rss > 0.0 && rss.iter().all(|x| x.1 > 0.0) && (last - kernel_rss).abs() <= kernel_rss * 0.1,
        "burner RSS {rss:?}, the kernel's at the end {kernel_rss}"
    );
    assert!(get("", "threads", sleeper).iter().all(|x| x.1 == 1.0));
    // Started 0.6 s in, after the samplers' first listings of the traced
    // processes (each listing is reused until the kernel side's set changes).
    let late = get("", "threads", late);
    assert!(late.len() >= 10 && late.iter().all(|x| x.1 == 1.0), "late sleeper: {late:?}");
    // Machine-wide counters: mpstat's columns add up to 100%, one sample per
    // interval, covering the whole recording.
    let names = ["usr", "nice", "sys", "iowait", "irq", "soft", "steal", "idle"];
    let all: Vec<Vec<(u64, f64)>> = names.iter().map(|n| get("CPU", n, 0)).collect();
    for k in 0..all[0].len() {
        let sum: f64 = all.iter().map(|s| s[k].1).sum();
        assert!((sum - 100.0).abs() < 0.01, "sample {k}: {sum}");
    }
    // The sampler keeps a fixed grid: a late tick (a loaded machine) is
    // followed by an early-looking one, never by a grid that moved. No
    // tick comes before it is due, so the grid starts where the earliest
    // of them puts it (not at the first: under emulation that one came
    // 42 ms late, and every tick after it looked early). A sampler that
    // drifts (sleeping an interval after each tick) or runs fast puts
    // some ticks ever further past that grid.
    let ts: Vec<u64> = all[0].iter().map(|x| x.0).collect();
    let grid = |k: usize| k as i64 * 100_000_000;
    let origin = ts.iter().enumerate().map(|(k, &t)| t as i64 - grid(k)).min().unwrap();
    for (k, &t) in ts.iter().enumerate() {
        let late = t as i64 - (origin + grid(k));
        assert!(late <= 250_000_000, "sample {k} at +{} ns, {late} ns past the grid: {ts:?}", t - ts[0]);
    }
    // From the command's start (its exec: a block request that completes
    // in the recording carries the time it was issued, before it began,
    // 0.3 s before in a 6.1 guest) to the last record.
    let first_io = recs.iter().filter(|r| matches!(r.rec, Record::Exec(_))).map(|r| r.rec.ts()).min().unwrap();
    let last_io = recs.iter().map(|r| r.rec.end_ts()).max().unwrap();
    let (from, to) = (ts[0], *ts.last().unwrap());
    assert!(
        from < first_io + 250_000_000 && to > last_io - 250_000_000,
        "samples from {from} to {to}, records from {first_io} to {last_io} ns"
    );
    assert!(!get("Memory", "used", 0).is_empty() && !get("Memory", "page cache", 0).is_empty());
    let ncpu = std::thread::available_parallelism().unwrap().get();
    assert!((0..ncpu).all(|c| !get(&format!("CPU {c}"), "idle", 0).is_empty()));
    assert!(series.keys().any(|(g, n, _)| g.starts_with("Disk ") && n == "utilisation"));
}

/// Builds tests/workloads/fake_nvml.c as a libnvidia-ml.so.1 in `dir`.
pub(crate) fn fake_nvml(dir: &Path) -> PathBuf {
    let lib = dir.join("libnvidia-ml.so.1");
    let st = Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(repo().join("tests/workloads/fake_nvml.c"))
        .status()
        .unwrap();
    assert!(st.success());
    lib
}

fn record_with_gpu(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> (std::process::Output, PathBuf) {
    let log = dir.join("gpu.bin");
    let pidfile = dir.join("pid");
    let script = format!("echo $$ > {}; sleep 0.8", pidfile.display());
    let mut args = vec!["record", "-q", "-f", "--sample-interval", "50ms", "-o", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(["--", "sh", "-c", &script]);
    let out = Command::new(mltrace_bin())
        .args(&args)
        .current_dir(dir)
        .env("FAKE_NVML_PID_FILE", &pidfile)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (out, log)
}

#[test]
fn gpu_counters_equal_the_stand_in_values() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let lib = fake_nvml(tmp.path());
    let live = tmp.path().join("gpm-live");
    let (out, log) = record_with_gpu(
        tmp.path(),
        &["--gpu", "required", "--nvml-library", lib.to_str().unwrap()],
        &[("FAKE_NVML_GPM_LIVE_FILE", live.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&live).unwrap().trim(), "0", "every GPM sample freed before nvmlShutdown");
    let pid: u32 = std::fs::read_to_string(tmp.path().join("pid")).unwrap().trim().parse().unwrap();
    let h = LogReader::open(&log).unwrap().header().clone();
    assert!(h.probes.iter().any(|p| p.mechanism == "NVML" && p.detail.contains("GPU 1 (Fake A100)")), "{:?}", h.probes);
    // Each GPU's metric set is in the log's header, as doctor says it.
    assert!(
        h.probes.iter().any(|p| p.detail.contains(&format!("GPU 0 (Fake H100): {GPM_SET}"))
            && p.detail.contains(&format!("GPU 1 (Fake A100): {FIELDS_SET}"))),
        "{:?}",
        h.probes
    );

    let Some(tp) = perfetto_tp() else { return };
    let trace = log.with_extension("perfetto-trace");
    assert!(mltrace(&["export", log.to_str().unwrap(), "-o", trace.to_str().unwrap()], tmp.path()).status.success());
    // Every sample of a track, as "group/track=value" with its distinct values.
    let rows = tp_query(
        &tp,
        &trace,
        &["select coalesce(g.name, 'process ' || p.pid, '') || '/' || t.name, group_concat(distinct c.value) \
             from counter c join track t on c.track_id = t.id left join track g on g.id = t.parent_id \
             left join process_counter_track pt on pt.id = t.id left join process p on p.upid = pt.upid \
             where t.name like '%GPU%' or g.name like 'GPU%' group by 1 order by 1"],
    );
    // A GPU's group is its utilisation counter (`GPU 0 (..) · utilisation
    // (any kernel running)`), top-level.
    let key = |k: &str| match k.strip_prefix('/').and_then(|h| h.split_once(" · ")) {
        Some((group, what)) => format!("{group}/{what}"),
        None => k.replace(&format!(" · {GPU_UTILISATION}/"), "/"),
    };
    let got: HashMap<String, String> = rows[0].iter().map(|r| (key(&r[0]), r[1].clone())).collect();
    let gib = |n: u64| (n << 30).to_string();
    let u = GPU_UTILISATION;
    let mib = |n: u64| (n << 20).to_string();
    let want: Vec<(String, String)> = vec![
        (format!("GPU 0 (Fake H100)/{u}"), "87.0".into()),
        ("GPU 0 (Fake H100)/memory".into(), "45.0".into()),
        ("GPU 0 (Fake H100)/framebuffer used".into(), format!("{}.0", gib(12))),
        ("GPU 0 (Fake H100)/framebuffer total".into(), format!("{}.0", gib(80))),
        ("GPU 0 (Fake H100)/power".into(), "301.5".into()),
        ("GPU 0 (Fake H100)/temperature".into(), "66.0".into()),
        ("GPU 0 (Fake H100)/SM clock".into(), "1755.0".into()),
        ("GPU 0 (Fake H100)/memory clock".into(), "2619.0".into()),
        // GPU 0 has GPM: its profiling metrics, and PCIe from GPM (MiB/s).
        ("GPU 0 (Fake H100)/SM active".into(), "71.5".into()),
        ("GPU 0 (Fake H100)/SM occupancy".into(), "38.25".into()),
        ("GPU 0 (Fake H100)/tensor active".into(), "54.0".into()),
        ("GPU 0 (Fake H100)/DRAM bandwidth used".into(), "62.5".into()),
        ("GPU 0 (Fake H100)/PCIe rx".into(), format!("{}.0", mib(2500))),
        ("GPU 0 (Fake H100)/PCIe tx".into(), format!("{}.0", mib(1500))),
        ("GPU 0 (Fake H100)/NVLink rx".into(), format!("{}.0", mib(12000))),
        ("GPU 0 (Fake H100)/NVLink tx".into(), format!("{}.0", mib(11000))),
        ("GPU 0 (Fake H100)/encoder".into(), "3.0".into()),
        ("GPU 0 (Fake H100)/decoder".into(), "4.0".into()),
        (format!("GPU 0 (Fake H100)/pid 4242 {u}"), "26.0".into()),
        ("GPU 0 (Fake H100)/pid 4242 memory".into(), "23.0".into()),
        ("GPU 0 (Fake H100)/pid 4242 encoder".into(), "2.0".into()),
        ("GPU 0 (Fake H100)/pid 4242 decoder".into(), "3.0".into()),
        ("GPU 0 (Fake H100)/pid 4242 framebuffer".into(), format!("{}.0", gib(4))),
        (format!("GPU 1 (Fake A100)/{u}"), "12.0".into()),
        ("GPU 1 (Fake A100)/power".into(), "65.0".into()),
        // GPU 1 has no GPM: NVML's PCIe (KiB/s) and NVLink from field
        // counters (1 and 2 KiB per us of the field's own clock).
        ("GPU 1 (Fake A100)/PCIe rx".into(), "10240.0".into()),
        ("GPU 1 (Fake A100)/PCIe tx".into(), "20480.0".into()),
        ("GPU 1 (Fake A100)/NVLink rx".into(), "1024000000.0".into()),
        ("GPU 1 (Fake A100)/NVLink tx".into(), "2048000000.0".into()),
        (format!("GPU 1 (Fake A100)/pid 4343 {u}"), "12.0".into()),
        ("GPU 1 (Fake A100)/pid 4343 decoder".into(), "1.0".into()),
        // The traced command's own per-GPU counters are in its process group.
        (format!("process {pid}/GPU 0 (Fake H100) {u}"), "61.0".into()),
        (format!("process {pid}/GPU 0 (Fake H100) memory"), "22.0".into()),
        (format!("process {pid}/GPU 0 (Fake H100) encoder"), "7.0".into()),
        (format!("process {pid}/GPU 0 (Fake H100) decoder"), "9.0".into()),
        (format!("process {pid}/GPU 0 (Fake H100) framebuffer"), format!("{}.0", gib(8))),
    ];
    // Nothing the library did not report: no profiling metric on GPU 1
    // (GPM not supported), and on GPU 0 one PCIe track holding only GPM's
    // values (the distinct values compared below), not NVML's own beside.
    for m in ["SM active", "SM occupancy", "tensor active", "DRAM bandwidth used"] {
        assert!(!got.contains_key(&format!("GPU 1 (Fake A100)/{m}")), "{m}: {got:#?}");
    }
    for (k, v) in want {
        assert_eq!(got.get(&k), Some(&v), "{k}: {got:#?}");
    }

    // Events, as the stand-in scripts them (see fake_nvml.c), in the log
    // and as instants on each GPU's `events` track, in order.
    let mut events: Vec<(String, GpuEventKind, u64)> = Vec::new();
    let (recs, _) = read_counters(&log);
    for r in &recs {
        if let Record::GpuEvent(e) = r.rec {
            events.push((r.strs[0].clone(), e.kind, e.code));
        }
    }
    let (g0, g1) = ("GPU 0 (Fake H100)".to_string(), "GPU 1 (Fake A100)".to_string());
    let of = |g: &String| events.iter().filter(|e| e.0 == *g).map(|e| (e.1, e.2)).collect::<Vec<_>>();
    assert_eq!(
        of(&g0),
        [
            (GpuEventKind::Throttle, 0x4),
            (GpuEventKind::EccCorrected, 2),
            (GpuEventKind::Xid, 79),
            (GpuEventKind::Throttle, 0x14),
            (GpuEventKind::Throttle, 0),
            (GpuEventKind::EccCorrected, 3),
        ]
    );
    assert_eq!(of(&g1), [(GpuEventKind::EccUncorrected, 1)]);
    let rows = tp_query(
        &tp,
        &trace,
        &["select g.name, s.name, s.dur from slice s join track t on s.track_id = t.id \
             join track g on g.id = t.parent_id where t.name = 'events' and g.name like 'GPU%' order by g.name, s.ts, s.id"],
    );
    let shown: Vec<(String, String, String)> =
        rows[0].iter().map(|r| (r[0].split(" · ").next().unwrap().to_string(), r[1].clone(), r[2].clone())).collect();
    let inst = |g: &String, n: &str| (g.clone(), n.to_string(), "0".to_string());
    assert_eq!(
        shown,
        [
            inst(&g0, "clocks held back: power cap"),
            inst(&g0, "2 corrected ECC errors"),
            inst(&g0, "XID 79"),
            inst(&g0, "clocks held back: power cap, sync boost"),
            inst(&g0, "clocks no longer held back"),
            inst(&g0, "3 corrected ECC errors"),
            inst(&g1, "1 uncorrected ECC error"),
        ]
    );
    // A big run's overview shows them too.
    let ov = tmp.path().join("overview.perfetto-trace");
    let out = mltrace(&["export", "--overview", log.to_str().unwrap(), "-o", ov.to_str().unwrap()], tmp.path());
    assert!(out.status.success());
    // Asked for, so not explained with a count of events (it was "about 0").
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(" records, the overview only (--overview)\n"), "{err}");
    let q = tp_query(
        &tp,
        &ov,
        &["select s.name from slice s join track t on s.track_id = t.id \
             join track g on g.id = t.parent_id where t.name = 'events' and g.name like 'GPU%' order by s.ts, s.id"],
    );
    let mut names: Vec<&str> = q[0].iter().map(|r| r[0].as_str()).collect();
    names.sort();
    let mut want: Vec<&str> = shown.iter().map(|s| s.1.as_str()).collect();
    want.sort();
    assert_eq!(names, want);
    // stats counts them by GPU and kind.
    let out = mltrace(&["stats", "--json", log.to_str().unwrap()], tmp.path());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let count = |g: &str, k: &str| {
        j["gpu_events"].as_array().unwrap().iter().find(|e| e["gpu"] == g && e["kind"] == k).map(|e| e["count"].clone())
    };
    assert_eq!(count(&g0, "clocks"), Some(3.into()));
    assert_eq!(count(&g0, "XID"), Some(1.into()));
    assert_eq!(count(&g0, "ECC corrected"), Some(2.into()));
    assert_eq!(count(&g1, "ECC uncorrected"), Some(1.into()));

    // Parquet's gpu_events table holds the same, read back with pyarrow.
    let pq_dir = tmp.path().join("gpu.parquet");
    let out = mltrace(&["export", "--parquet", log.to_str().unwrap(), "-o", pq_dir.to_str().unwrap()], tmp.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Without the `wall` column: to_pylist makes datetimes of timestamps,
    // which hold microseconds, and refuses nanoseconds unless pandas is there.
    let script = "import sys, pyarrow.parquet as pq\n\
                  cols = ['ts', 'gpu', 'kind', 'code', 'name']\n\
                  t = pq.read_table(sys.argv[1] + '/gpu_events.parquet', columns=cols).to_pylist()\n\
                  for r in sorted(t, key=lambda r: (r['gpu'], r['ts'])): print(r['gpu'], '|', r['kind'], '|', r['code'], '|', r['name'])";
    let Some(python) = tools::python() else { return };
    let py = Command::new(python).args(["-c", script]).arg(&pq_dir).output().unwrap();
    assert!(py.status.success(), "pyarrow: {}", String::from_utf8_lossy(&py.stderr));
    let text = String::from_utf8_lossy(&py.stdout);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(
        rows,
        [
            "GPU 0 (Fake H100) | clocks | 4 | clocks held back: power cap",
            "GPU 0 (Fake H100) | ECC corrected | 2 | 2 corrected ECC errors",
            "GPU 0 (Fake H100) | XID | 79 | XID 79",
            "GPU 0 (Fake H100) | clocks | 20 | clocks held back: power cap, sync boost",
            "GPU 0 (Fake H100) | clocks | 0 | clocks no longer held back",
            "GPU 0 (Fake H100) | ECC corrected | 3 | 3 corrected ECC errors",
            "GPU 1 (Fake A100) | ECC uncorrected | 1 | 1 uncorrected ECC error",
        ]
    );
}

#[test]
fn gpu_modes_and_a_library_that_starts_failing() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // Absent library: auto records without GPUs and says so in one line.
    let missing = tmp.path().join("no-such-libnvidia-ml.so");
    let (out, log) = record_with_gpu(tmp.path(), &["--nvml-library", missing.to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.lines().filter(|l| l.contains("no GPU metrics")).count(), 1, "{err}");
    // One quiet line, the loader's details left to `doctor`.
    let gpu: Vec<&str> =
        err.lines().filter(|l| l.contains("NVIDIA") || l.contains("NVML") || l.contains("GPU")).collect();
    assert_eq!(gpu.len(), 1, "{err}");
    assert!(gpu[0].contains("no NVIDIA driver (") && gpu[0].contains("not found)"), "{err}");
    assert!(gpu[0].contains("`mltrace doctor` says more") && !gpu[0].contains("libloading"), "{err}");
    let (_, series) = read_counters(&log);
    assert!(!series.keys().any(|(g, _, _)| g.starts_with("GPU")));
    assert!(series.keys().any(|(g, _, _)| g == "CPU"));
    // required: a clear error up front, and no log.
    std::fs::remove_file(&log).unwrap();
    let (out, log) =
        record_with_gpu(tmp.path(), &["--gpu", "required", "--nvml-library", missing.to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--gpu required") && err.contains("no-such-libnvidia-ml.so"), "{err}");
    assert!(!log.exists());
    // The library fails mid-run: GPU counters stop there, the rest goes on.
    let lib = fake_nvml(tmp.path());
    let live = tmp.path().join("gpm-live");
    let (out, log) = record_with_gpu(
        tmp.path(),
        &["--nvml-library", lib.to_str().unwrap()],
        &[("FAKE_NVML_FAIL_AFTER", "6"), ("FAKE_NVML_GPM_LIVE_FILE", live.to_str().unwrap())],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("warning: GPU 0 (Fake H100): sampling stopped"), "{err}");
    let (_, series) = read_counters(&log);
    let get = |g: &str, n: &str| series.get(&(g.to_string(), n.to_string(), 0)).cloned().unwrap_or_default();
    let sm0 = get("GPU 0 (Fake H100)", GPU_UTILISATION);
    let sm1 = get("GPU 1 (Fake A100)", GPU_UTILISATION);
    // Six utilisation queries succeed (3 per GPU), then every call fails.
    assert_eq!((sm0.len(), sm1.len()), (3, 3));
    // GPM needs two samples: values from the 2nd and 3rd ticks, then none;
    // NVLink field rates likewise on GPU 1 (the 1st read has no rate).
    let active = get("GPU 0 (Fake H100)", "SM active");
    assert_eq!(active.iter().map(|s| s.0).collect::<Vec<_>>(), sm0[1..].iter().map(|s| s.0).collect::<Vec<_>>());
    assert!(active.iter().all(|s| s.1 == 71.5), "{active:?}");
    let nvlink = get("GPU 1 (Fake A100)", "NVLink rx");
    assert_eq!(nvlink.iter().map(|s| s.0).collect::<Vec<_>>(), sm1[1..].iter().map(|s| s.0).collect::<Vec<_>>());
    // The device that stopped gave its GPM sample back.
    assert_eq!(std::fs::read_to_string(&live).unwrap().trim(), "0");

    let cpu = &series[&("CPU".to_string(), "idle".to_string(), 0)];
    assert!(cpu.len() >= 10 && cpu.last().unwrap().0 > sm0.last().unwrap().0 + 300_000_000, "CPU samples go on");
    let mut r = LogReader::open(&log).unwrap();
    while r.next_frame().unwrap().is_some() {}
    assert!(r.trailer().unwrap().warnings.iter().any(|w| w.contains("GPU 0 (Fake H100): sampling stopped")));

    // GPM stops answering mid-run (NOT_SUPPORTED after 3 samples): GPU 0
    // says so once, keeps its NVML metrics, and NVML's PCIe takes over.
    let (out, log) = record_with_gpu(
        tmp.path(),
        &["--nvml-library", lib.to_str().unwrap()],
        &[("FAKE_NVML_GPM_LOST_AFTER", "3"), ("FAKE_NVML_GPM_LIVE_FILE", live.to_str().unwrap())],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("GPU 0 (Fake H100): GPM stopped answering").count(), 1, "{err}");
    let (_, series) = read_counters(&log);
    let get = |n: &str| series.get(&("GPU 0 (Fake H100)".to_string(), n.to_string(), 0)).cloned().unwrap_or_default();
    let (active, util, rx) = (get("SM active"), get(GPU_UTILISATION), get("PCIe rx"));
    assert_eq!(active.len(), 2, "metrics between samples 1-2 and 2-3: {active:?}");
    assert!(util.len() >= 10, "{}", util.len());
    // PCIe: GPM's rate (2500 MiB/s) while it answered, NVML's (1000 KiB/s) after.
    assert_eq!(rx.iter().filter(|s| s.1 == 2500.0 * 1048576.0).count(), 2, "{rx:?}");
    assert!(rx.iter().filter(|s| s.1 == 1024000.0).all(|s| s.0 > active[1].0), "{rx:?}");
    assert!(rx.iter().filter(|s| s.1 == 1024000.0).count() >= 5, "{rx:?}");
    assert_eq!(std::fs::read_to_string(&live).unwrap().trim(), "0");
}

/// The driver renews each process's utilisation sample at its own times,
/// so one's new sample can be older than another's already taken (seen
/// on an H100): the stand-in's traced process lags 1.5 ticks behind pid
/// 4242.
/// Every sample of both is taken, one value per process per tick. And a
/// GPM value that is NaN is left out.
#[test]
fn per_process_samples_that_lag_are_not_lost() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let lib = fake_nvml(tmp.path());
    let (out, log) = record_with_gpu(
        tmp.path(),
        &["--gpu", "required", "--nvml-library", lib.to_str().unwrap()],
        &[("FAKE_NVML_PROC_LAG", "1"), ("FAKE_NVML_GPM_NAN", "3")],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid: u32 = std::fs::read_to_string(tmp.path().join("pid")).unwrap().trim().parse().unwrap();
    let (_, series) = read_counters(&log);
    let g = "GPU 0 (Fake H100)".to_string();
    let ticks = series[&(g.clone(), GPU_UTILISATION.to_string(), 0)].len();
    let traced = series.get(&(g.clone(), GPU_UTILISATION.to_string(), pid)).cloned().unwrap_or_default();
    let other = series.get(&(g, format!("pid 4242 {GPU_UTILISATION}"), 0)).cloned().unwrap_or_default();
    // The traced process's samples start once it is traced (its pid file).
    assert!(
        ticks >= 10 && traced.len() + 3 >= ticks && other.len() + 1 >= ticks,
        "{ticks} ticks: {traced:?} {other:?}"
    );
    assert!(traced.iter().all(|s| s.1 == 61.0) && other.iter().all(|s| s.1 == 26.0));
    // One value per process per tick, never two at one time.
    for v in [&traced, &other] {
        assert!(v.windows(2).all(|w| w[0].0 < w[1].0), "{v:?}");
    }
    // GPM's NaN (its 3rd answer) is left out: one DRAM value fewer than SM active.
    let get = |n: &str| series[&("GPU 0 (Fake H100)".to_string(), n.to_string(), 0)].clone();
    let (dram, active) = (get("DRAM bandwidth used"), get("SM active"));
    assert!(dram.iter().all(|s| s.1 == 62.5) && dram.len() + 1 == active.len(), "{dram:?}");
}

#[test]
fn doctor_names_the_metric_set_per_gpu() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = fake_nvml(tmp.path());
    let out = Command::new(mltrace_bin()).arg("doctor").env("MLTRACE_NVML_LIBRARY", &lib).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let nvml = text.lines().find(|l| l.starts_with("NVML ")).unwrap_or_else(|| panic!("no NVML line: {text}"));
    let want = format!("GPU 0 (Fake H100): {GPM_SET}; GPU 1 (Fake A100): {FIELDS_SET}");
    assert!(nvml.ends_with(&want), "{nvml}\nwant: {want}");
}

#[test]
fn mig_devices_are_gpus_of_their_own() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let lib = fake_nvml(tmp.path());
    let live = tmp.path().join("gpm-live");
    let (out, log) = record_with_gpu(
        tmp.path(),
        &["--gpu", "required", "--nvml-library", lib.to_str().unwrap()],
        &[("FAKE_NVML_MIG", "1"), ("FAKE_NVML_GPM_LIVE_FILE", live.to_str().unwrap())],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("warning"), "MIG devices answer what they have, NOT_SUPPORTED for the rest: {err}");
    assert_eq!(std::fs::read_to_string(&live).unwrap().trim(), "0");
    let (mig0, mig1) = ("GPU 0 MIG 0 (Fake H100 MIG 1g.10gb)", "GPU 0 MIG 1 (Fake H100 MIG 3g.40gb)");

    let doctor = Command::new(mltrace_bin())
        .arg("doctor")
        .env("MLTRACE_NVML_LIBRARY", &lib)
        .env("FAKE_NVML_MIG", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&doctor.stdout);
    let nvml = text.lines().find(|l| l.starts_with("NVML ")).unwrap_or_else(|| panic!("{text}"));
    assert!(nvml.contains(&format!("{mig0}: {GPM_SET}; {mig1}: {GPM_SET}")), "{nvml}");

    let Some(tp) = perfetto_tp() else { return };
    let trace = log.with_extension("perfetto-trace");
    assert!(mltrace(&["export", log.to_str().unwrap(), "-o", trace.to_str().unwrap()], tmp.path()).status.success());
    // "group/track" (a group's own row is `group · what`) = distinct values.
    let rows = tp_query(
        &tp,
        &trace,
        &["select coalesce(g.name || '/' || t.name, replace(t.name, ' · ', '/')), group_concat(distinct c.value) \
             from counter c join track t on c.track_id = t.id left join track g on g.id = t.parent_id \
             where t.name like 'GPU%' or g.name like 'GPU%' group by 1 order by 1"],
    );
    let got: HashMap<String, String> = rows[0]
        .iter()
        .map(|r| match r[0].split_once(" · ") {
            Some((g, rest)) => (format!("{g}/{}", rest.split_once('/').map_or(rest, |x| x.1)), r[1].clone()),
            None => (r[0].clone(), r[1].clone()),
        })
        .collect();
    let gib = |n: u64| format!("{}.0", n << 30);
    let want = [
        // GPM of each MIG device's GPU instance (the stand-in: GPU 0's / 2^N).
        (format!("{mig0}/SM active"), "35.75".to_string()),
        (format!("{mig0}/tensor active"), "27.0".into()),
        (format!("{mig0}/PCIe rx"), format!("{}.0", 1250u64 << 20)),
        (format!("{mig0}/framebuffer used"), gib(2)),
        (format!("{mig0}/framebuffer total"), gib(10)),
        (format!("{mig0}/pid 5151 framebuffer"), gib(1)),
        (format!("{mig1}/SM active"), "17.875".into()),
        (format!("{mig1}/DRAM bandwidth used"), "15.625".into()),
        (format!("{mig1}/framebuffer used"), gib(6)),
        (format!("{mig1}/framebuffer total"), gib(40)),
        (format!("{mig1}/pid 5252 framebuffer"), gib(3)),
        // The GPU itself keeps its own metrics.
        ("GPU 0 (Fake H100)/SM active".into(), "71.5".into()),
        ("GPU 0 (Fake H100)/power".into(), "301.5".into()),
    ];
    for (k, v) in want {
        assert_eq!(got.get(&k), Some(&v), "{k}: {got:#?}");
    }
    // A GPU in MIG mode has no utilisation of its own: nothing drawn.
    assert!(!got.contains_key(&format!("GPU 0 (Fake H100)/{GPU_UTILISATION}")), "{got:#?}");
}
