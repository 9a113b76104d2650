//! Live metrics (`record --metrics`, `--otlp`) against a real Prometheus
//! and a real OTLP decoder: a trainer that is input-bound, then CPU-bound
//! (tests/workloads/phased_trainer.py), recorded while Prometheus (the
//! tests' own, Debian's package) scrapes it every second. Each window the
//! endpoint reported gives the data wait `stats --from/--to` gives for the
//! same window of the log, within [`allow::LIVE_AGAINST_LOG`]; the kind
//! turns from input-bound to cpu-bound as the phases do; the endpoint
//! answers nothing but /metrics, on loopback. OTLP: a receiver decoding
//! with OpenTelemetry's Python protos gets the same figures (summary
//! detail); a collector that never answers costs the job nothing and is
//! counted and said; four ranks and their straggler, and the GPUs (the
//! stand-in NVML), arrive as `stats` has them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use mltrace_tests::*;
use serde_json::Value;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One HTTP exchange: the status and the body.
fn http(port: u16, method: &str, target: &str) -> (u16, String) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(c, "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

fn escape(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Prometheus, scraping 127.0.0.1:`target` every second; killed when dropped.
struct Prometheus {
    _child: Spawned,
    port: u16,
}

impl Prometheus {
    fn start(bin: &Path, dir: &Path, target: u16) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: mltrace\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = spawn(
            Command::new(bin)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log),
        );
        let until = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() || http(port, "GET", "/-/ready").0 != 200 {
            assert!(
                Instant::now() < until,
                "Prometheus not ready: {}",
                std::fs::read_to_string(dir.join("prometheus.log")).unwrap()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Prometheus { _child: child, port }
    }

    /// The first series of `query` over `[from, to]` (Unix s), by second.
    fn range(&self, query: &str, from: f64, to: f64) -> Vec<(f64, f64)> {
        let target = format!("/api/v1/query_range?query={}&start={from:.3}&end={to:.3}&step=1", escape(query));
        let (status, body) = http(self.port, "GET", &target);
        assert_eq!(status, 200, "{query}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        let Some(series) = v["data"]["result"].as_array().and_then(|r| r.first()) else { return Vec::new() };
        series["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_f64().unwrap(), p[1].as_str().unwrap().parse().unwrap()))
            .collect()
    }
}

/// `2026-12-06T01:19:48.308298900Z` for Unix seconds `t` (to the ns).
fn utc(t: f64) -> String {
    let out = Command::new("date").args(["-u", "-d", &format!("@{t:.9}"), "+%Y-%m-%dT%H:%M:%S.%NZ"]).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `stats --json --from --to` of `log`: its `window`.
fn window(log: &Path, dir: &Path, from: f64, to: f64) -> Value {
    let out = mltrace(&["stats", "--json", "--from", &utc(from), "--to", &utc(to), log.to_str().unwrap()], dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["window"].clone()
}

/// The trainer's own phases: (name, start, end, data wait).
fn phases(out: &Output) -> Vec<(String, f64, f64, f64)> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.starts_with("{\"phases\"")).unwrap_or_else(|| panic!("no phases: {stdout}"));
    let v: Value = serde_json::from_str(line).unwrap();
    v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let f = |k: &str| p[k].as_f64().unwrap();
            (p["name"].as_str().unwrap().to_string(), f("start"), f("end"), f("data_wait"))
        })
        .collect()
}

fn record_args(log: &Path, extra: &[String], py: &str, phase_s: &str) -> Vec<String> {
    let script = repo().join("tests/workloads/phased_trainer.py");
    let mut a: Vec<String> = ["record", "-f", "--gpu", "off", "-o", log.to_str().unwrap()].map(String::from).to_vec();
    a.extend_from_slice(extra);
    a.extend(["--", py, script.to_str().unwrap(), phase_s, "0.08", "0.02"].map(String::from));
    a
}

fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

#[test]
fn prometheus_scrapes_the_verdict_live_and_each_window_matches_stats() {
    let Some(_turn) = require_root!() else { return };
    let Some(py) = system_python() else { return };
    let Some(prom_bin) = tools::prometheus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let prom = Prometheus::start(&prom_bin, dir.path(), port);
    let log = dir.path().join("live.bin");
    // A port alone: loopback.
    let extra =
        ["--metrics", &port.to_string(), "--metrics-interval", "4s", "--metrics-linger", "10s"].map(String::from);
    let began = unix_now();
    let mut cmd = Command::new(mltrace_bin());
    cmd.args(record_args(&log, &extra, &py, "14")).current_dir(dir.path());
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut rec = spawn(&mut cmd);
    // While it runs: /metrics and nothing else.
    let stderr = rec.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let announced = lines.by_ref().map_while(Result::ok).find(|l| l.contains("live metrics at")).unwrap();
    assert!(announced.contains(&format!("http://127.0.0.1:{port}/metrics")), "{announced}");
    let until = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let (status, body) = http(port, "GET", "/metrics");
        assert_eq!(status, 200);
        if body.contains("mltrace_breakdown_share") || Instant::now() > until {
            break body;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
    assert!(body.contains("# TYPE process_disk_io_bytes counter"), "{body}");
    assert_eq!(http(port, "GET", "/").0, 404);
    assert_eq!(http(port, "GET", "/api/v1/query").0, 404);
    assert_eq!(http(port, "POST", "/metrics").0, 405);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = rec.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{rest:#?}");
    let last = rest.last().unwrap();
    assert!(last.starts_with("mltrace: live metrics: served") && !last.contains("served 0"), "{rest:#?}");
    let ended = unix_now();

    // Each window Prometheus stored, against the log's for the same window.
    let q = |name: &str| prom.range(name, began - 5.0, ended + 2.0);
    let dw = q(r#"mltrace_breakdown_share{window="interval",share="data_wait"}"#);
    let starts = q(r#"mltrace_window_start_seconds{window="interval"}"#);
    let ends = q(r#"mltrace_window_end_seconds{window="interval"}"#);
    assert!(dw.len() >= 10, "{dw:?}");
    let mut windows: Vec<(f64, f64, f64)> = Vec::new();
    for (t, d) in &dw {
        let at = |s: &[(f64, f64)]| s.iter().find(|x| x.0 == *t).map(|x| x.1);
        let (Some(a), Some(b)) = (at(&starts), at(&ends)) else { continue };
        if !windows.iter().any(|w| (w.0 - a).abs() < 1e-3) {
            windows.push((a, b, *d));
        }
    }
    assert!(windows.len() >= 4, "{windows:?}");
    for &(a, b, live) in &windows {
        let w = window(&log, dir.path(), a, b);
        let logged = w["breakdown"]["data_wait"].as_f64().unwrap();
        allow::LIVE_AGAINST_LOG.check(live, logged, format_args!("data wait over {a:.3}-{b:.3} ({w})"));
    }

    // The kind follows the phases, by the trainer's own clock.
    let ph = phases(&out);
    let kind_at = |kind: &str| q(&format!(r#"mltrace_verdict{{window="interval",kind="{kind}"}}"#));
    let (input, cpu) = (kind_at("input-bound"), kind_at("cpu-bound"));
    let is = |s: &[(f64, f64)], t: f64| s.iter().any(|x| x.0 == t && x.1 == 1.0);
    for &(a, b, live) in &windows {
        let within = |p: &(String, f64, f64, f64)| a >= p.1 && b <= p.2;
        let t = dw.iter().find(|x| starts.iter().any(|s| s.0 == x.0 && (s.1 - a).abs() < 1e-3)).unwrap().0;
        if within(&ph[0]) {
            assert!(is(&input, t) && live > 0.5, "input phase {:?}: window {a}-{b} reads {live} at {t}", ph[0]);
        }
        if within(&ph[1]) {
            assert!(is(&cpu, t), "CPU phase {:?}: window {a}-{b} at {t}: {cpu:?}", ph[1]);
        }
    }
    assert!(input.iter().any(|x| x.1 == 1.0) && cpu.iter().any(|x| x.1 == 1.0), "{input:?} {cpu:?}");
    let first_cpu = cpu.iter().find(|x| x.1 == 1.0).unwrap().0;
    assert!(input.iter().any(|x| x.1 == 1.0 && x.0 < first_cpu), "input-bound, then cpu-bound");
}

/// The receiver (tests/workloads/otlp_receiver.py) on a port of its own.
fn receiver(py: &Path, out: &Path) -> (Spawned, u16) {
    let script = repo().join("tests/workloads/otlp_receiver.py");
    let mut cmd = Command::new(py);
    cmd.arg(script).arg(out).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = spawn(&mut cmd);
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port = line.trim().parse().unwrap_or_else(|_| panic!("receiver said {line:?}"));
    (child, port)
}

/// What the receiver got: one JSON value a push.
fn received(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The value of `name`'s point whose attributes include `attrs`.
fn point(push: &Value, name: &str, attrs: &[(&str, &str)]) -> Option<f64> {
    let m = push["metrics"].as_array()?.iter().find(|m| m["name"] == name)?;
    let p = m["points"].as_array()?.iter().find(|p| attrs.iter().all(|(k, v)| p["attrs"][*k] == *v))?;
    p["value"].as_f64()
}

#[test]
fn otlp_delivers_the_same_figures_and_a_dead_collector_is_a_counted_drop() {
    let Some(_turn) = require_root!() else { return };
    let Some(sys_py) = system_python() else { return };
    let Some(py) = tools::python_with("opentelemetry.proto") else { return };
    let dir = tempfile::tempdir().unwrap();
    let pushes = dir.path().join("pushes.jsonl");
    let (_rx, port) = receiver(&py, &pushes);
    let log = dir.path().join("otlp.bin");
    let url = format!("http://127.0.0.1:{port}");
    // The summary, the mode meant to be left on (Prometheus' test records full detail).
    let extra = ["--detail", "summary", "--otlp", &url, "--metrics-interval", "2s", "--metrics-job", "phased"]
        .map(String::from);
    let args = record_args(&log, &extra, &sys_py, "5");
    let out = mltrace(&args.iter().map(String::as_str).collect::<Vec<_>>(), dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(last.contains(&format!("to {url}")) && !last.contains("dropped"), "{stderr}");
    let got = received(&pushes);
    assert!(got.len() >= 3, "{} pushes: {stderr}", got.len());
    let end = got.last().unwrap();
    assert_eq!(end["path"], "/v1/metrics");
    assert_eq!(end["content_type"], "application/x-protobuf");
    let res = &end["resource"];
    assert_eq!((res["service.name"].as_str(), res["mltrace.job"].as_str()), (Some("mltrace"), Some("phased")), "{res}");
    assert!(!res["host.name"].as_str().unwrap_or("").is_empty(), "{res}");
    // Units as OpenTelemetry spells them; no pid, path or tid among the attributes.
    for m in end["metrics"].as_array().unwrap() {
        let unit = m["unit"].as_str().unwrap();
        assert!(["1", "s", "By"].contains(&unit) || unit.starts_with('{'), "{m}");
        for p in m["points"].as_array().unwrap() {
            for k in p["attrs"].as_object().unwrap().keys() {
                assert!(!["pid", "tid", "path", "file"].contains(&k.as_str()), "{m}");
            }
        }
    }
    // The last push is the whole run: the same as the log's, for its window.
    let w = |which: &str, name: &str| point(end, name, &[("window", which)]).unwrap();
    let (a, b) = (w("run", "mltrace.window.start"), w("run", "mltrace.window.end"));
    let live = point(end, "mltrace.breakdown.share", &[("window", "run"), ("share", "data_wait")]).unwrap();
    let logged = window(&log, dir.path(), a, b);
    allow::LIVE_AGAINST_LOG.check(
        live,
        logged["breakdown"]["data_wait"].as_f64().unwrap(),
        format_args!("OTLP run ({logged})"),
    );
    let read = point(end, "process.disk.io", &[("disk.io.direction", "read"), ("role", "loader")]).unwrap();
    assert!(read > 0.0, "the loader's reads: {end}");

    // A collector that takes the connection and never answers.
    let hole = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/v1/metrics", hole.local_addr().unwrap().port());
    let log = dir.path().join("dead.bin");
    let extra = ["--otlp", &url, "--metrics-interval", "2s"].map(String::from);
    let args = record_args(&log, &extra, &sys_py, "4");
    let began = Instant::now();
    let out = mltrace(&args.iter().map(String::as_str).collect::<Vec<_>>(), dir.path());
    let wall = began.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(last.contains("dropped") && last.contains(&url), "{stderr}");
    // The job ran as long as it meant to; the recorder waited at most the
    // last push's few seconds beyond it (besides loading its programs).
    let ph = phases(&out);
    let job = ph[1].2 - ph[0].1;
    assert!(job < 8.0 + 2.0, "the job took {job:.1} s for 8 s of phases");
    assert!(wall - job < 15.0, "record took {wall:.1} s for a {job:.1} s job: {stderr}");
    let ok = mltrace(&["stats", "--json", log.to_str().unwrap()], dir.path());
    assert!(ok.status.success());
}

/// Four plain ranks (tests/workloads/plain_ranks.py), rank 2's loader
/// three times as slow, pushed over OTLP: each rank's data wait in the last
/// push is what `stats --from/--to` gives that rank for the same window,
/// and the straggler is the rank `stats` names.
#[test]
fn each_rank_and_the_straggler_live_as_stats_has_them() {
    let Some(_turn) = require_root!() else { return };
    let Some(sys_py) = system_python() else { return };
    let Some(py) = tools::python_with("opentelemetry.proto") else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("data.bin"), vec![7u8; 1 << 20]).unwrap();
    let pushes = d.join("pushes.jsonl");
    let (_rx, port) = receiver(&py, &pushes);
    let url = format!("http://127.0.0.1:{port}");
    let script = repo().join("tests/workloads/plain_ranks.py");
    let args = [
        "record",
        "-f",
        "--gpu",
        "off",
        "-o",
        "ranks.bin",
        "--otlp",
        &url,
        "--metrics-interval",
        "2s",
        "--",
        &sys_py,
        script.to_str().unwrap(),
        "data.bin",
        "4",
        "30",
        "30",
        "40",
        "2",
        "120",
    ];
    let out = mltrace(&args, d);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let got = received(&pushes);
    let end = got.last().unwrap_or_else(|| panic!("no push: {stderr}"));
    let w = |name: &str| point(end, name, &[("window", "run")]).unwrap();
    let logged = window(&d.join("ranks.bin"), d, w("mltrace.window.start"), w("mltrace.window.end"));
    let ranks = logged["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4, "{logged}");
    for r in ranks {
        let k = r["rank"].to_string();
        let live = point(end, "mltrace.rank.data_wait.share", &[("window", "run"), ("rank", &k)])
            .unwrap_or_else(|| panic!("rank {k} not pushed: {end}"));
        let want = r["data_wait_fraction"].as_f64().unwrap();
        allow::LIVE_AGAINST_LOG.check(live, want, format_args!("rank {k}'s data wait"));
    }
    let whole = mltrace(&["stats", "--json", "ranks.bin"], d);
    let whole: Value = serde_json::from_slice(&whole.stdout).unwrap();
    let straggler = &whole["verdict"]["straggler"];
    assert_eq!(straggler["rank"], 2, "{straggler}");
    assert_eq!(point(end, "mltrace.straggler.rank", &[]), Some(2.0), "{end}");
}

/// The GPUs, with the stand-in NVML (tests/workloads/fake_nvml.c): its
/// scripted utilisation (87% and 12%) and memory in use (12 and 3 GiB)
/// arrive as OpenTelemetry's `hw.gpu.*`, by GPU.
#[test]
fn gpu_utilisation_and_memory_live_as_the_driver_reports_them() {
    let Some(_turn) = require_root!() else { return };
    let Some(py) = tools::python_with("opentelemetry.proto") else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = crate::counters_e2e::fake_nvml(d);
    let pushes = d.join("pushes.jsonl");
    let (_rx, port) = receiver(&py, &pushes);
    let url = format!("http://127.0.0.1:{port}");
    let args = [
        "record",
        "-q",
        "-f",
        "--gpu",
        "required",
        "--nvml-library",
        lib.to_str().unwrap(),
        "--sample-interval",
        "50ms",
        "-o",
        "gpu.bin",
        "--otlp",
        &url,
        "--metrics-interval",
        "1s",
        "--",
        "sleep",
        "3",
    ];
    let out = mltrace(&args, d);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let got = received(&pushes);
    let with_gpus: Vec<&Value> =
        got.iter().filter(|p| point(p, "hw.gpu.utilization", &[("hw.id", "1")]).is_some()).collect();
    assert!(with_gpus.len() >= 2, "{} of {} pushes have GPUs: {stderr}", with_gpus.len(), got.len());
    const GIB: f64 = (1u64 << 30) as f64;
    for p in with_gpus {
        let at = |name: &str, id: &str| point(p, name, &[("hw.id", id)]).unwrap_or(f64::NAN);
        assert!((at("hw.gpu.utilization", "0") - 0.87).abs() < 1e-9, "{p}");
        assert!((at("hw.gpu.utilization", "1") - 0.12).abs() < 1e-9, "{p}");
        assert_eq!((at("hw.gpu.memory.usage", "0"), at("hw.gpu.memory.usage", "1")), (12.0 * GIB, 3.0 * GIB), "{p}");
    }
}
