//! The real traces in `../shared/samples/mlperf-traces` (see its SOURCE.md),
//! read in place: they have no licence, so nothing of them is in this
//! repository. Each test skips, saying so, when the folder is absent.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use chrono::NaiveDateTime;
use common::*;
use mltrace_import::Options;
use mltrace_log::{phase, PhaseKind, Record, GPU_UTILISATION};

const TRACE2: &str = "discslab-dl-bench_trace_visuals/data/trace2_exp_results/ta_8gpu_Sharpening_20220827222401";

/// Montreal, where the study's machines were.
fn montreal() -> Options {
    Options { tz: Some("America/Toronto".into()), ..Default::default() }
}

/// The authors' processed CSVs shifted local time by a hard-coded +5 h
/// (UTC+1 in August): their timestamps as true Unix seconds.
fn csv_time(s: &str) -> i64 {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").unwrap().and_utc().timestamp() - 3600
}

fn csv(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().skip(1).map(|l| l.split(',').map(str::to_string).collect()).collect()
}

#[test]
fn mllog_with_3700_epochs_and_136_evals() {
    let Some(s) = samples() else { return };
    let im = import(&[s.join("jovonho_mlperf-visuals/data/ulog")], &Options::default());
    let phases = im.of(|r| match r.rec {
        Record::Phase(p) => Some((p, r.strs[0].clone())),
        _ => None,
    });
    let count = |k: PhaseKind, unfinished: bool| {
        phases.iter().filter(|(p, _)| p.kind == k && (p.flags & phase::UNFINISHED != 0) == unfinished).count()
    };
    // Two runs in one log: the first died in epoch 1 (its RUN, BLOCK 1 and
    // EPOCH 1 never stopped); 8 ranks logged init_start, 2 run_start...
    assert_eq!(count(PhaseKind::Epoch, false), 3700);
    assert_eq!(count(PhaseKind::Epoch, true), 1);
    assert_eq!(count(PhaseKind::Eval, false), 136);
    assert_eq!(count(PhaseKind::Block, false), 3700);
    assert_eq!(count(PhaseKind::Init, false), 2, "16 init_start lines from 8 ranks, twice");
    assert_eq!((count(PhaseKind::Run, false), count(PhaseKind::Run, true)), (1, 1));
    assert_eq!(count(PhaseKind::Eval, true) + count(PhaseKind::Block, true) + count(PhaseKind::Init, true), 1);
    let names: HashMap<&str, _> = phases.iter().map(|(p, n)| (n.as_str(), p)).collect();
    for n in ["EPOCH 1", "EPOCH 3700", "EVAL (epoch 1000)", "EVAL (epoch 3700)", "BLOCK 3700"] {
        assert!(names.contains_key(n), "{n}");
    }
    let e = names["EPOCH 3700"];
    assert_eq!((e.ts / 1_000_000, (e.ts + e.dur) / 1_000_000), (1_644_172_816_671, 1_644_172_837_388));
    let run = phases.iter().find(|(p, _)| p.kind == PhaseKind::Run && p.flags == 0).unwrap().0;
    assert_eq!((run.ts / 1_000_000, (run.ts + run.dur) / 1_000_000), (1_644_092_874_436, 1_644_172_905_164));

    let marks = im.of(|r| match r.rec {
        Record::Mark(_) => Some((r.strs[0].clone(), r.strs[1].clone())),
        _ => None,
    });
    let acc: Vec<&String> = marks.iter().filter(|m| m.0 == "eval_accuracy").map(|m| &m.1).collect();
    assert_eq!(acc.len(), 136);
    assert_eq!((acc[0].as_str(), acc[135].as_str()), ("0.9032747745513916", "0.9107519388198853"));
    assert_eq!(marks.iter().filter(|m| m.0 == "seed").count(), 2, "one per run, not per rank");
    assert!(marks.contains(&("run_stop".into(), r#"{"status":"success"}"#.into())));
    assert_eq!(marks.iter().filter(|m| m.0 == "weights_initialization").count(), 100);
    assert_eq!(im.header.start.realtime_ns, 1_644_092_760_147_000_000);

    let trace = export(&im.log);
    if let Some(tp) = perfetto_tp() {
        let q = tp_query(
            &tp,
            &trace,
            "ulog",
            &[
                "select count(*) from slice where name glob 'EPOCH *' and name not glob '*(unfinished)'",
                "select count(*) from slice where name glob 'EVAL*'",
                "select count(*) from slice where name glob '*(unfinished)'",
                "select count(*) from slice where name glob 'eval_accuracy = *'",
                "select count(*) from slice where dur < 0",
            ],
        );
        assert_eq!(scalar(&q[0]), 3700);
        assert_eq!(scalar(&q[1]), 136);
        assert_eq!(scalar(&q[2]), 3);
        assert_eq!(scalar(&q[3]), 136);
        assert_eq!(scalar(&q[4]), 0);
    }
}

/// Counter samples by (group, name, pid): (Unix s, value).
fn counters(im: &Imported) -> BTreeMap<(String, String, u32), Vec<(i64, f64)>> {
    let mut m: BTreeMap<_, Vec<_>> = BTreeMap::new();
    for r in &im.recs {
        if let Record::Counter(c) = r.rec {
            m.entry((r.strs[0].clone(), r.strs[1].clone(), c.pid))
                .or_default()
                .push(((c.ts / 1_000_000_000) as i64, c.value));
        }
    }
    m
}

#[test]
fn pmon_with_several_processes_on_one_gpu() {
    let Some(s) = samples() else { return };
    let im = import(&[s.join("discslab-dl-bench_trace_visuals/test_data/gpu_w_multiple_procs")], &montreal());
    let c = counters(&im);
    let key = |g: &str, n: &str, pid: u32| (g.to_string(), n.to_string(), pid);
    let mib = 1048576.0;
    // 2023-02-11 08:11:21 EST.
    let t = |sec: i64| 1_676_121_060 + sec;
    assert_eq!(
        c[&key("GPU 0", "framebuffer", 3_333_333)],
        [(t(21), 13086.0 * mib), (t(22), 13086.0 * mib), (t(23), 13086.0 * mib), (t(24), 13086.0 * mib), (t(25), 0.0)],
        "the second process on GPU 0, gone at :25"
    );
    assert_eq!(c[&key("GPU 0", GPU_UTILISATION, 2_720_661)].len(), 8, ":19 to :25, then 0 when GPU 0 is idle at :26");
    assert_eq!(c[&key("GPU 0", GPU_UTILISATION, 2_720_661)][7], (t(26), 0.0));
    assert_eq!(c[&key("GPU 1", "framebuffer", 2_720_661)][0], (t(19), 16678.0 * mib));
    assert_eq!(c[&key("GPU 1", "memory", 2_720_662)], [(t(27), 0.0), (t(28), 0.0)]);
    assert!(!c.keys().any(|k| k.2 == 2_720_663), "a process row of '-' has no values");
    assert!(!c.keys().any(|k| k.0 != "GPU 0" && k.0 != "GPU 1"), "idle GPUs have no counters");
    assert!(!c.keys().any(|k| k.1 == "encoder" || k.1 == "decoder"), "'-' is no value");
    let comms = im.of(|r| if let Record::Comm(c) = r.rec { Some((c.pid, r.strs[0].clone())) } else { None });
    assert_eq!(comms.len(), 3);
    assert!(comms.iter().all(|(_, n)| n == "python"));
    // 20 process rows with 3 values, 15 drops to 0, 3 names.
    assert_eq!(im.summary.records, 78);
    assert_eq!(im.report("gpu_w_multiple_procs").skipped, 4, "# headers, repeated");
    assert_eq!(im.report("gpu_w_multiple_procs").malformed, 0);
    export(&im.log);
}

#[test]
fn mpstat_12_hour_clock_matches_the_authors_csv() {
    let Some(s) = samples() else { return };
    let dir: PathBuf = s.join(TRACE2);
    // The file is the `all` lines only (no header, no date): the run's
    // folder is dated 20220827.
    let opts = Options { date: chrono::NaiveDate::from_ymd_opt(2022, 8, 27), ..montreal() };
    let im = import(&[dir.join("cpu_data/cpu.all")], &opts);
    assert_eq!(im.summary.records, 5110);
    let c = counters(&im);
    let names = ["usr", "nice", "sys", "iowait", "irq", "soft", "steal", "guest", "gnice", "idle"];
    let rows = csv(&dir.join("cpu_data/cpu_all.csv"));
    assert_eq!(rows.len(), 511);
    for (i, n) in names.iter().enumerate() {
        let got = &c[&("CPU".to_string(), n.to_string(), 0)];
        let want: Vec<(i64, f64)> = rows.iter().map(|r| (csv_time(&r[0]), r[i + 1].parse().unwrap())).collect();
        assert_eq!(got, &want, "{n}");
    }
    // 10:24:33 PM EDT.
    assert_eq!(c[&("CPU".into(), "usr".into(), 0)][0], (1_661_653_473, 4.05));
    let trace = export(&im.log);
    if let Some(tp) = perfetto_tp() {
        let q = tp_query(
            &tp,
            &trace,
            "cpu",
            &["select count(*) from counter c join counter_track t on c.track_id = t.id where t.name = 'idle'"],
        );
        assert_eq!(scalar(&q[0]), 511);
    }
}

#[test]
fn pmon_without_header_matches_the_authors_averages() {
    let Some(s) = samples() else { return };
    let dir = s.join(TRACE2);
    let im = import(&[dir.join("gpu_data/gpu.all")], &montreal());
    let r = im.report("gpu.all");
    assert_eq!((r.lines, r.malformed), (3041, 0));
    let c = counters(&im);
    let pids: std::collections::BTreeSet<u32> = c.keys().map(|k| k.2).collect();
    assert_eq!(pids, (2_036_325..=2_036_332).collect(), "the 8 workers, one per GPU");
    // gpu_avg.csv: per second, the mean over the GPUs' rows of sm, mem, fb
    // ('-' as 0).
    let sum_at = |name: &str| {
        let mut m: BTreeMap<i64, (f64, u32)> = BTreeMap::new();
        for (k, v) in &c {
            if k.1 == name {
                for (t, x) in v {
                    let e = m.entry(*t).or_default();
                    e.0 += x;
                    e.1 += 1;
                }
            }
        }
        m
    };
    let (sm, mem, fb) = (sum_at(GPU_UTILISATION), sum_at("memory"), sum_at("framebuffer"));
    let rows = csv(&dir.join("gpu_data/gpu_avg.csv"));
    assert_eq!((rows.len(), fb.len()), (381, 381));
    for row in rows {
        let t = csv_time(&row[0]);
        let gpus = f64::from(fb[&t].1);
        let mean = |m: &BTreeMap<i64, (f64, u32)>| m.get(&t).map_or(0.0, |e| e.0) / gpus;
        assert!((mean(&sm) - row[1].parse::<f64>().unwrap()).abs() < 1e-9, "sm at {}", row[0]);
        assert!((mean(&mem) - row[2].parse::<f64>().unwrap()).abs() < 1e-9, "mem at {}", row[0]);
        assert!((mean(&fb) / 1048576.0 - row[3].parse::<f64>().unwrap()).abs() < 1e-6, "fb at {}", row[0]);
    }
    export(&im.log);
}
