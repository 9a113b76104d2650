//! CUDA driver calls seen from the host: a trainer dlopen()s a stand-in
//! libcuda.so.1 (tests/workloads/fake_cuda.c), calls it a known number of
//! times for known durations, spinning and asleep, and the uprobes' records
//! say the same as the trainer's own clock.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use mltrace_log::*;
use mltrace_tests::*;

/// Builds the stand-in as `dir/lib/libcuda.so.1` and the trainer as `dir/cuda_trainer`.
fn build(dir: &Path) -> (PathBuf, PathBuf) {
    (stand_in::library(dir, "fake_cuda", "libcuda.so.1"), stand_in::trainer(dir, "cuda_trainer"))
}

/// `mltrace record` of `cmd`, with `$MLTRACE_CUDA_LIB` set to `cuda_lib` (or unset).
fn record(dir: &Path, name: &str, extra: &[&str], cuda_lib: Option<&Path>, cmd: &[&str]) -> (Output, PathBuf) {
    stand_in::record(dir, name, extra, cuda_lib.map(|l| ("MLTRACE_CUDA_LIB", l)), cmd)
}

fn gpu_calls(recs: &[Rec]) -> Vec<GpuCall> {
    recs.iter()
        .filter_map(|r| match r.rec {
            Record::GpuCall(g) => Some(g),
            _ => None,
        })
        .collect()
}

const APIS: [GpuApi; 10] = [
    GpuApi::StreamSynchronize,
    GpuApi::CtxSynchronize,
    GpuApi::EventSynchronize,
    GpuApi::Memcpy,
    GpuApi::MemcpyDtoH,
    GpuApi::MemcpyHtoD,
    GpuApi::MemcpyDtoD,
    GpuApi::MemcpyPeer,
    GpuApi::Memcpy2D,
    GpuApi::Memcpy3D,
];

/// The calls the kernel counted, by call, summed over their rounds.
fn counted(recs: &[Rec]) -> HashMap<GpuCounted, (u64, usize)> {
    let mut out: HashMap<GpuCounted, (u64, usize)> = HashMap::new();
    for r in recs {
        if let Record::GpuCount(c) = r.rec {
            assert!(c.dur > 0, "{c:?}");
            let e = out.entry(c.call).or_default();
            e.0 += c.count;
            e.1 += 1;
        }
    }
    out
}

/// Each call's count, time and bytes in the log equal what the trainer
/// says it did (`kv`); the time within 10%. Returns the calls.
fn check_calls(calls: &[GpuCall], kv: &HashMap<String, i64>) {
    for api in APIS {
        let mine: Vec<&GpuCall> = calls.iter().filter(|c| c.call == api).collect();
        let name = api.name();
        let want = kv[&format!("{name}_calls")] as usize;
        assert_eq!(mine.len(), want, "{name} calls");
        let dur: u64 = mine.iter().map(|c| c.dur).sum();
        let measured = kv[&format!("{name}_ns")] as f64;
        let off = (dur as f64 - measured).abs() / measured;
        eprintln!(
            "{name}: {} calls, {dur} ns recorded, {measured} ns measured ({:.1}% apart)",
            mine.len(),
            off * 100.0
        );
        // The trainer's clock also counts the two uprobe traps around each
        // call: ~2 us here, milliseconds under full emulation (QEMU).
        let per_call = if emulated() { 5_000_000.0 } else { 50_000.0 };
        let slack = 0.10 * measured + per_call * mine.len() as f64;
        assert!(
            (dur as f64 - measured).abs() <= slack,
            "{name}: {dur} ns recorded, {measured} ns measured by the trainer"
        );
        let bytes: u64 = mine.iter().map(|c| c.bytes).sum();
        assert_eq!(bytes as i64, kv[&format!("{name}_bytes")], "{name} bytes");
    }
}

#[test]
fn driver_calls_are_what_the_trainer_did() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (lib, trainer) = build(tmp.path());
    let (out, log) =
        record(tmp.path(), "cuda.bin", &[], Some(&lib), &[trainer.to_str().unwrap(), lib.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("CUDA probes"), "no attach failures: {stderr}");
    let run = recorded(&out, log, tmp.path());
    let kv = &run.kv;
    let recs = read_log(&run.log);
    let calls = gpu_calls(&recs);
    check_calls(&calls, kv);
    // The queries counted, in several rounds; launches only when asked for.
    let n = counted(&recs);
    for call in [GpuCounted::StreamQuery, GpuCounted::EventQuery] {
        let (sum, rounds) = n.get(&call).copied().unwrap_or_default();
        assert_eq!(sum as i64, kv[&format!("{}_counted", call.name())], "{} counted", call.name());
        assert!(rounds >= 2, "{} in {rounds} rounds", call.name());
    }
    assert!(!n.contains_key(&GpuCounted::LaunchKernel) && !n.contains_key(&GpuCounted::GraphLaunch), "{n:?}");

    // Streams, the thread on each, and the event's handle and result.
    let on = |stream: u64| -> Vec<&GpuCall> {
        calls.iter().filter(|c| c.call == GpuApi::StreamSynchronize && c.stream == stream).collect()
    };
    for (stream, n) in [(0x5100u64, 10usize), (0x5200, 10), (0x5300, 4)] {
        let s = on(stream);
        assert_eq!(s.len(), n, "stream {stream:#x}");
        let tid = kv[&format!("stream_{stream:x}_tid")] as u32;
        assert!(s.iter().all(|c| c.tid == tid && c.ret == 0), "stream {stream:#x} on thread {tid}");
    }
    assert_ne!(kv["stream_5100_tid"], kv["stream_5200_tid"]);
    let events: Vec<&GpuCall> = calls.iter().filter(|c| c.call == GpuApi::EventSynchronize).collect();
    assert_eq!(events.iter().filter(|c| c.stream == 0x7700 && c.ret == 0).count(), 5);
    let bad: Vec<&&GpuCall> = events.iter().filter(|c| c.stream == 0xbad).collect();
    assert_eq!(bad.len(), 1);
    assert_eq!(i64::from(bad[0].ret), kv["event_bad_ret"]);
    // The copies' sizes, one by one (the legacy cuMemcpyDtoH's 32-bit size too).
    let sizes = |api: GpuApi| {
        let mut v: Vec<u64> = calls.iter().filter(|c| c.call == api).map(|c| c.bytes).collect();
        v.sort();
        v
    };
    assert_eq!(sizes(GpuApi::MemcpyDtoH), [vec![65536], vec![1 << 20; 8]].concat());
    assert_eq!(sizes(GpuApi::Memcpy2D), [4096, 4096]);
    assert_eq!(sizes(GpuApi::Memcpy3D), [512]);

    // The header says the probes were on, and where.
    let header = LogReader::open(&run.log).unwrap().header().clone();
    let probe = header.probes.iter().find(|p| p.subsystem == "cuda").expect("a cuda probe in the header");
    assert!(probe.detail.contains(lib.to_str().unwrap()), "{probe:?}");

    // Parquet's gpu_calls table: a row per call.
    assert_eq!(parquet_rows(&run.log, &tmp.path().join("tables"), &["gpu_calls"]), [calls.len()]);

    // In Perfetto: the synchronisations as slices on their threads' tracks.
    let Some(tp) = tools::perfetto_tp() else { return };
    let trace = tmp.path().join("cuda.perfetto-trace");
    let o = mltrace(&["export", run.log.to_str().unwrap(), "-o", trace.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let q = "select th.tid, count(*) from slice s join thread_track t on s.track_id = t.id \
             join thread th using(utid) where s.name = 'cuStreamSynchronize' group by th.tid order by th.tid";
    let r = tools::tp_query(&tp, &trace, &[q]);
    let mut want = vec![
        vec![kv["stream_5100_tid"].to_string(), "14".to_string()],
        vec![kv["stream_5200_tid"].to_string(), "10".to_string()],
    ];
    want.sort_by_key(|r| r[0].parse::<u32>().unwrap());
    assert_eq!(r[0], want, "cuStreamSynchronize slices per thread");
}

/// With `--cuda-launches`: kernel and graph launches counted too (every
/// variant under its family), per process, the same in `stats --json`, in
/// Parquet and as a rate in Perfetto.
#[test]
fn launches_are_counted_when_asked() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (lib, trainer) = build(tmp.path());
    let (out, log) = record(
        tmp.path(),
        "launches.bin",
        &["--cuda-launches"],
        Some(&lib),
        &[trainer.to_str().unwrap(), lib.to_str().unwrap()],
    );
    let run = recorded(&out, log, tmp.path());
    let recs = read_log(&run.log);
    let n = counted(&recs);
    for call in GpuCounted::ALL {
        let (sum, rounds) = n.get(call).copied().unwrap_or_default();
        assert_eq!(sum as i64, run.kv[&format!("{}_counted", call.name())], "{} counted", call.name());
        assert!(rounds >= 2, "{} in {rounds} rounds", call.name());
    }
    let header = LogReader::open(&run.log).unwrap().header().clone();
    let probe = header.probes.iter().find(|p| p.subsystem == "cuda").unwrap();
    assert!(probe.detail.contains("launches counted"), "{probe:?}");

    let o = mltrace(&["stats", "--json", run.log.to_str().unwrap()], tmp.path());
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row =
        |call: &str| v["gpu_calls"].as_array().unwrap().iter().find(|r| r["call"] == call).cloned().unwrap_or_default();
    assert_eq!(row("cuLaunchKernel")["calls"].as_i64(), Some(run.kv["cuLaunchKernel_counted"]), "{}", v["gpu_calls"]);
    assert!(row("cuLaunchKernel")["call_ns"].is_null());
    assert_eq!(row("cuStreamSynchronize")["calls"].as_i64(), Some(24));
    let rows = recs.iter().filter(|r| matches!(r.rec, Record::GpuCount(_))).count();
    assert_eq!(parquet_rows(&run.log, &tmp.path().join("tables"), &["gpu_counts"]), [rows]);

    let Some(tp) = tools::perfetto_tp() else { return };
    let trace = tmp.path().join("launches.perfetto-trace");
    let o = mltrace(&["export", run.log.to_str().unwrap(), "-o", trace.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The rate times each round's length adds up to the calls.
    let q = "select name, cast(round(sum(v * d / 1e9)) as int) from (select t.name, c.value as v, \
             coalesce(lead(c.ts) over (partition by c.track_id order by c.ts) - c.ts, 0) as d from counter c \
             join process_counter_track t on c.track_id = t.id where t.name like 'cu%calls/s') \
             group by name order by name";
    let r = tools::tp_query(&tp, &trace, &[q]);
    let want: Vec<Vec<String>> = ["cuEventQuery", "cuGraphLaunch", "cuLaunchKernel", "cuStreamQuery"]
        .iter()
        .map(|c| vec![format!("{c} calls/s"), run.kv[&format!("{c}_counted")].to_string()])
        .collect();
    assert_eq!(r[0], want);
}

/// A library no probe was on at the start (not where the recorder looks)
/// is attached when the traced process maps it: the trainer waits a while
/// after dlopen, and then every call is seen.
#[test]
fn a_library_mapped_later_is_attached() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (lib, trainer) = build(tmp.path());
    let (out, log) =
        record(tmp.path(), "later.bin", &[], None, &[trainer.to_str().unwrap(), lib.to_str().unwrap(), "700"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("CUDA probes"), "no attach failures: {stderr}");
    let run = recorded(&out, log, tmp.path());
    check_calls(&gpu_calls(&read_log(&run.log)), &run.kv);
}

/// With the probes on the stand-in but no process mapping it, and with
/// `--cuda off`: no GPU calls, and nothing said about them.
#[test]
fn no_calls_without_the_library_or_the_probes() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (lib, trainer) = build(tmp.path());
    let (out, log) = record(tmp.path(), "none.bin", &[], Some(&lib), &["sh", "-c", "cat /etc/hostname"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("CUDA"), "{stderr}");
    let run = recorded(&out, log, tmp.path());
    assert!(gpu_calls(&read_log(&run.log)).is_empty());

    let (out, log) = record(
        tmp.path(),
        "off.bin",
        &["--cuda", "off"],
        Some(&lib),
        &[trainer.to_str().unwrap(), lib.to_str().unwrap()],
    );
    let run = recorded(&out, log, tmp.path());
    assert_eq!(run.kv["cuStreamSynchronize_calls"], 24, "the trainer ran");
    assert!(gpu_calls(&read_log(&run.log)).is_empty());
    let header = LogReader::open(&run.log).unwrap().header().clone();
    assert!(header.probes.iter().all(|p| p.subsystem != "cuda"), "{:?}", header.probes);
}
