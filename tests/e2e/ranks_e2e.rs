//! The rank the others wait for, with real BPF: a real PyTorch
//! `DistributedDataParallel` job under `torchrun` on CPUs (gloo, 3 ranks,
//! a DataLoader of 2 workers each), one rank slowed by its loaders and,
//! in a second run, by its own compute; and four plain ranks (no
//! collectives), one whose loader takes three times as long. Every rank
//! times its own waits for batches and its time in `backward()` (which
//! holds DDP's all-reduce): the verdict's data wait and collective wait
//! must be within 0.1 of those, and the slow rank named with its cause.

use std::path::Path;

use mltrace_tests::*;
use serde_json::Value;

fn ok(o: &std::process::Output) -> &std::process::Output {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

const SLOW: u64 = 1;

/// `ddp_train.py` under `torchrun --standalone --nproc_per_node=3`, rank
/// [`SLOW`] slowed `how`; `stats --json` and each rank's own figures.
fn ddp(dir: &Path, torchrun: &Path, how: &str) -> (Value, Vec<Value>, std::path::PathBuf) {
    let log = dir.join(format!("ddp-{how}.bin"));
    let script = repo().join("tests/workloads/ddp_train.py");
    let (tr, sc, lg, d) =
        (torchrun.to_str().unwrap(), script.to_str().unwrap(), log.to_str().unwrap(), dir.to_str().unwrap());
    let slow = SLOW.to_string();
    let args = [
        "record",
        "-q",
        "-f",
        "--gpu",
        "off",
        "-o",
        lg,
        "--",
        tr,
        "--standalone",
        "--nproc_per_node=3",
        sc,
        d,
        "40",
        &slow,
        how,
    ];
    let out = mltrace(&args, dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let js = mltrace(&["stats", "--json", lg], dir);
    assert!(js.status.success(), "{}", String::from_utf8_lossy(&js.stderr));
    let v: Value = serde_json::from_slice(&js.stdout).unwrap();
    let ranks = (0..3)
        .map(|r| {
            let text = std::fs::read_to_string(dir.join(format!("rank-{r}.json"))).expect("the rank's own figures");
            serde_json::from_str(&text).unwrap()
        })
        .collect();
    (v, ranks, log)
}

/// Each rank's data wait and collective wait within 0.1 of its own clock;
/// the slow rank named as the straggler, for `cause`.
fn check(v: &Value, measured: &[Value], log: &Path, cause: &str) {
    let recs = read_log(log);
    let ranks = v["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 3, "{ranks:?}");
    for m in measured {
        let pid = m["pid"].as_u64().unwrap();
        let r = ranks.iter().find(|r| r["pid"] == pid).unwrap_or_else(|| panic!("rank of pid {pid}: {ranks:?}"));
        assert_eq!(r["rank"], m["rank"], "{r}");
        assert_eq!(r["rank_from"], "RANK", "{r}");
        let life = exec_to_exit(&recs, pid as u32) as f64;
        let (data, backward) = (m["data_wait_ns"].as_f64().unwrap() / life, m["backward_ns"].as_f64().unwrap() / life);
        let (got_data, got_coll) =
            (r["data_wait_fraction"].as_f64().unwrap(), r["collective_wait_fraction"].as_f64().unwrap());
        allow::LATE_CLOCK_SHARE.check(got_data, data, format_args!("rank {}: data wait ({r})", m["rank"]));
        allow::LATE_CLOCK_SHARE.check(
            got_coll,
            backward,
            format_args!("rank {}: collective wait, backward() ({r})", m["rank"]),
        );
        assert_eq!(r["step_from"], "collectives", "{r}");
        // Its threads: gloo's are never loaders.
        let p = v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap();
        let threads = p["threads"].as_array().unwrap();
        assert!(threads.iter().all(|t| t["role"] != "loader"), "{threads:?}");
        assert!(threads.iter().filter(|t| t["role"] == "collective").count() >= 2, "{threads:?}");
        // Its workers say whose they are.
        let workers: Vec<&str> = v["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["parent"] == pid)
            .filter_map(|w| w["trace_name"].as_str())
            .filter(|n| n.contains("DataLoader worker"))
            .collect();
        let want = format!("rank {}: DataLoader worker", m["rank"]);
        assert_eq!(workers.len(), 2, "{workers:?}");
        assert!(workers.iter().all(|n| n.starts_with(&want)), "{workers:?}");
    }
    let s = &v["verdict"]["straggler"];
    assert_eq!(s["rank"], SLOW, "{}", v["verdict"]);
    assert_eq!(s["cause"], cause, "{s}");
    assert_eq!(s["judged_by"], "lateness", "{s}");
    // It arrived last more often than any other rank, and held them most.
    let lasts: Vec<u64> = ranks.iter().map(|r| r["late_collectives"].as_u64().unwrap()).collect();
    assert_eq!(s["late_collectives"].as_u64(), lasts.iter().max().copied(), "{s} {lasts:?}");
    for k in ["step_s", "median_step_s", "median_lateness_s", "held_others_s"] {
        assert!(s[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {s}");
    }
    let text = v["verdict"]["text"].as_str().unwrap();
    assert!(text.contains(&format!("rank {SLOW} (pid {}) arrived last at", s["pid"])), "{text}");
    // Nobody waits for data in a job slowed by compute: not input-bound.
    let b = &v["verdict"]["breakdown"];
    // The seven shares, and gil_wait where the trainer waited for its GIL
    // at all (a DDP rank's threads do, briefly).
    let shares = 7 + usize::from(b.get("gil_wait").is_some());
    assert_eq!(b.as_object().unwrap().len(), shares, "{b}");
    let sum: f64 = b.as_object().unwrap().values().map(|x| x.as_f64().unwrap()).sum();
    assert!((sum - 1.0).abs() < 1e-6, "{b}");
    if cause == "compute" {
        assert_ne!(v["verdict"]["kind"], "input-bound", "{text}");
    }
}

#[test]
fn a_ddp_rank_slowed_by_its_loaders_is_named() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(torchrun) = torchrun() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (v, measured, log) = ddp(dir.path(), &torchrun, "loader");
    check(&v, &measured, &log, "data");
    // The slow rank waited for data, the others for it: its data wait
    // clear of theirs. Not a fixed share: on a busy machine its loaders
    // wait for a CPU too, and it with them (0.133 of its time once, with
    // 0.29 runnable, against 0.15 asked then).
    let ranks = v["ranks"].as_array().unwrap();
    let data = |r: &Value| r["data_wait_fraction"].as_f64().unwrap();
    let slow = ranks.iter().find(|r| r["rank"] == SLOW).unwrap();
    let others = ranks.iter().filter(|r| r["rank"] != SLOW).map(data).fold(0.0, f64::max);
    eprintln!("data wait: the slow rank {:.3}, the others at most {others:.3}", data(slow));
    assert!(data(slow) > others + 0.05, "{slow} against the others' {others:.3}");
}

#[test]
fn a_ddp_rank_slowed_by_its_compute_is_named() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(torchrun) = torchrun() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (v, measured, log) = ddp(dir.path(), &torchrun, "compute");
    check(&v, &measured, &log, "compute");
    let text = v["verdict"]["text"].as_str().unwrap();
    assert!(text.contains("it computed (on CPU)"), "{text}");
    assert!(text.contains("while the others waited for it"), "{text}");
    // The trace: each rank's waits for the others on its main thread's
    // track (as long in all as its collective wait), its lateness as a
    // counter, its verdict on a lane, its workers named with it.
    let Some(tp) = perfetto_tp() else { return };
    let trace = dir.path().join("ddp.perfetto-trace");
    ok(&mltrace(&["export", log.to_str().unwrap(), "-o", trace.to_str().unwrap()], dir.path()));
    let waits = "select t.tid, sum(s.dur) from slice s join thread_track tt on s.track_id = tt.id \
                 join thread t using(utid) where s.name = 'waiting for other ranks' group by t.tid";
    let late = "select t.name, max(c.value) from counter c join counter_track t on c.track_id = t.id \
                where t.name like 'rank % lateness' group by t.name";
    let lanes = "select count(*) from slice where name like 'rank _ (pid %): %'";
    let workers = "select count(*) from process where name like 'rank _: DataLoader worker _'";
    let got = tp_query(&tp, &trace, &[waits, late, lanes, workers]);
    let recs = read_log(&log);
    for m in &measured {
        let pid = m["pid"].as_u64().unwrap();
        let row = got[0].iter().find(|r| r[0] == pid.to_string()).unwrap_or_else(|| panic!("{pid}: {:?}", got[0]));
        let share = row[1].parse::<f64>().unwrap() / exec_to_exit(&recs, pid as u32) as f64;
        let r = v["ranks"].as_array().unwrap().iter().find(|r| r["pid"] == pid).unwrap();
        let want = r["collective_wait_fraction"].as_f64().unwrap();
        assert!((share - want).abs() <= 0.05, "{pid}: slices {share:.3}, collective wait {want:.3}");
    }
    assert_eq!(got[1].len(), 3, "{:?}", got[1]);
    let slow_late = got[1].iter().find(|r| r[0].starts_with(&format!("rank {SLOW} "))).unwrap();
    assert!(slow_late[1].parse::<f64>().unwrap() > 10.0, "{:?}", got[1]);
    assert_eq!(got[2], [["3"]], "a verdict lane per rank");
    assert_eq!(got[3], [["6"]], "each rank's 2 workers");
}

/// Four plain ranks (no collectives): the one whose loader takes 120 ms a
/// batch against 40 ms runs three times as long a step, and is named by it.
#[test]
fn the_slowest_of_four_plain_ranks_is_named_by_its_step_time() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("data.bin"), vec![7u8; 1 << 20]).unwrap();
    let script = repo().join("tests/workloads/plain_ranks.py");
    let args = [
        "record",
        "-q",
        "-f",
        "--gpu",
        "off",
        "-o",
        "p.bin",
        "--",
        &py,
        script.to_str().unwrap(),
        "data.bin",
        "4",
        "20",
        "30",
        "40",
        "2",
        "120",
    ];
    let run = recorded(&mltrace(&args, d), d.join("p.bin"), d);
    let v = &run.json;
    let recs = read_log(&run.log);
    let ranks = v["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4, "{ranks:?}");
    for r in ranks {
        let k = r["rank"].as_u64().unwrap();
        let pid = run.kv[&format!("pid_{k}")];
        assert_eq!(r["pid"], pid, "{r}");
        let want = run.kv[&format!("blocked_ns_{k}")] as f64 / exec_to_exit(&recs, pid as u32) as f64;
        let got = r["data_wait_fraction"].as_f64().unwrap();
        allow::LATE_CLOCK_SHARE.check(got, want, format_args!("rank {k}: data wait"));
        assert_eq!(r["step_from"], "batches", "{r}");
        let step = r["step_s"].as_f64().unwrap();
        let want = if k == 2 { 0.120 } else { 0.040 };
        assert!((step - want).abs() <= 0.2 * want, "rank {k}: step {step:.3} s, its loader's pace {want} s");
    }
    let s = &v["verdict"]["straggler"];
    assert_eq!(
        (s["rank"].as_u64(), s["judged_by"].as_str(), s["cause"].as_str()),
        (Some(2), Some("step_time"), Some("data")),
        "{s}"
    );
    let text = v["verdict"]["text"].as_str().unwrap();
    assert!(text.contains(&format!("of 4 ranks, rank 2 (pid {}) took", s["pid"])), "{text}");
}

/// `mltrace record` as host `host` (a UTS namespace), in the background.
fn record_as(host: &str, dir: &Path, env: &[(&str, String)], args: &[&str]) -> std::process::Child {
    let bin = mltrace_bin();
    let mut script = format!("hostname {host} && exec {} record -q", bin.display());
    for a in args {
        script.push_str(&format!(" '{a}'"));
    }
    let mut c = std::process::Command::new("unshare");
    c.args(["-u", "sh", "-c", &script]).current_dir(dir);
    c.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    c.spawn().expect("running unshare")
}

/// Three "hosts" (UTS namespaces), one DDP rank each (gloo over
/// loopback, rank 1 slowed by its compute), recorded apart and merged
/// with node1's clock moved 20 ms by hand: the ranks leave each
/// all-reduce together, so the clock check says node1 is 20 ms off and
/// the others are not; and the straggler is still named, with its host.
#[test]
fn a_merged_ddp_job_checks_its_hosts_clocks() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(torchrun) = torchrun() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let py = torchrun.with_file_name("python");
    let script = repo().join("tests/workloads/ddp_train.py");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let (py, sc, ds) = (py.to_str().unwrap(), script.to_str().unwrap(), d.to_str().unwrap());
    let children: Vec<_> = (0..3)
        .map(|r| {
            let env = [
                ("RANK", r.to_string()),
                ("LOCAL_RANK", "0".to_string()),
                ("WORLD_SIZE", "3".to_string()),
                ("MASTER_ADDR", "127.0.0.1".to_string()),
                ("MASTER_PORT", port.clone()),
            ];
            let log = format!("node{r}.bin");
            let args = ["-f", "--gpu", "off", "-o", &log, "--", py, sc, ds, "40", "1", "compute"];
            record_as(&format!("node{r}"), d, &env, &args)
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let args = ["merge", "-f", "node0.bin", "node1.bin", "node2.bin", "--offset", "node1=+20ms", "-o", "job.bin"];
    ok(&mltrace(&args, d));
    let js = mltrace(&["stats", "--json", "job.bin"], d);
    assert!(js.status.success(), "{}", String::from_utf8_lossy(&js.stderr));
    let v: Value = serde_json::from_slice(&js.stdout).unwrap();
    let clocks = v["clock_check"].as_array().unwrap();
    assert_eq!(clocks.len(), 3, "{clocks:?}");
    for c in clocks {
        let off = c["offset_ms"].as_f64().unwrap();
        let want = if c["host"] == "node1" { 20.0 } else { 0.0 };
        assert!((off - want).abs() <= 2.0, "{c}: {off:.2} ms against {want}");
    }
    let s = &v["verdict"]["straggler"];
    assert_eq!(
        (s["rank"].as_u64(), s["host"].as_str(), s["cause"].as_str()),
        (Some(1), Some("node1"), Some("compute")),
        "{s}"
    );
    let o = mltrace(&["stats", "job.bin"], d);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("clocks, checked by the collectives' ends"), "{text}");
    assert!(text.contains("node1 +"), "{text}");
}

/// The NCCL path, on the stand-in libraries: three ranks each enqueue an
/// all-reduce a step and sync on its stream (the stand-in holds every rank
/// there until all have come, as NCCL does), then sync on another stream.
/// The first sync is a wait for the other ranks, the second for the GPU,
/// each within 0.1 of what the rank timed; the slow one arrives last.
#[test]
fn nccl_syncs_on_a_collective_are_waits_for_the_other_ranks() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cuda = stand_in::library(d, "fake_cuda", "libcuda.so.1");
    let nccl = stand_in::library(d, "fake_nccl", "libnccl.so.2");
    let trainer = stand_in::trainer(d, "nccl_steps");
    let mut c = std::process::Command::new(mltrace_bin());
    c.args(["record", "-q", "--gpu", "off", "-o", "n.bin", "--"]).arg(&trainer).arg(&cuda).arg(&nccl);
    c.args(["3", "20", "5", "1", "20"]).current_dir(d);
    c.env("MLTRACE_CUDA_LIB", &cuda).env("MLTRACE_NCCL_LIB", &nccl).env("MLTRACE_FAKE_SYNC_NS", "2000000");
    let run = recorded(&c.output().unwrap(), d.join("n.bin"), d);
    let recs = read_log(&run.log);
    let ranks = run.json["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 3, "{ranks:?}");
    for r in ranks {
        let k = r["rank"].as_u64().unwrap();
        assert_eq!(r["rank_from"], "RANK", "{r}");
        let pid = run.kv[&format!("pid_{k}")];
        assert_eq!(r["pid"], pid, "{r}");
        let life = exec_to_exit(&recs, pid as u32) as f64;
        for (key, measured) in [("collective_wait_fraction", "coll_ns"), ("gpu_wait_fraction", "gpu_ns")] {
            let want = run.kv[&format!("{measured}_{k}")] as f64 / life;
            let got = r[key].as_f64().unwrap();
            allow::LATE_CLOCK_SHARE.check(got, want, format_args!("rank {k}: {key}"));
        }
        assert_eq!(r["step_from"], "collectives", "{r}");
        assert_eq!(r["collectives"], 20, "{r}");
    }
    let s = &run.json["verdict"]["straggler"];
    let got = (s["rank"].as_u64(), s["judged_by"].as_str(), s["cause"].as_str());
    assert_eq!(got, (Some(1), Some("lateness"), Some("compute")), "{s}");
    assert!(s["late_collectives"].as_u64().unwrap() >= 18, "{s}");
}
