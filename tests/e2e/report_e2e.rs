//! `mltrace report` of a real recording and of an imported log: the page
//! says what the workload did (the known file with its bytes, the access
//! sizes, its sections), fetches nothing, and renders in headless
//! Chromium without a page error.

use std::path::{Path, PathBuf};
use std::process::Command;

use mltrace_tests::*;

/// Sections every report has, by id.
const SECTIONS: [&str; 9] =
    ["facts", "throughput", "heatmap", "operations", "sizes", "latency", "files", "processes", "perfetto"];

/// Renders `html` offline; returns the renderer's JSON line, or None (a
/// skip) when the tests' playwright-core or Chromium is missing.
fn render(html: &Path, png: &Path) -> Option<serde_json::Value> {
    let (nm, chrome) = (tools::node_modules()?, tools::chromium()?);
    let home = png.with_extension("home");
    // Chromium, if left running, dies with the test.
    let out = proc::output(
        Command::new("node")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/report_render.js"))
            .arg(html)
            .arg(png)
            .env("NODE_PATH", nm)
            .env("CHROMIUM", chrome)
            // Chromium's crash-report settings and dconf cache: into the
            // test's folder, not $HOME.
            .env("XDG_CONFIG_HOME", &home)
            .env("XDG_CACHE_HOME", &home),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "rendering failed: {}{stdout}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}")))
}

/// Nothing in the page would be fetched: no script, stylesheet, image,
/// frame or font from anywhere (the SVG namespace is a name, not a fetch).
fn assert_self_contained(html: &str) {
    let lower = html.to_ascii_lowercase();
    for bad in ["<script src", "<link", "<img", "<iframe", "@import", "url(", "src=\"http", "href=\"//"] {
        assert!(!lower.contains(bad), "the page has {bad:?}");
    }
    // The one link is to the Perfetto UI, for the reader to click.
    let links = lower.matches("href=\"http").count();
    assert_eq!(links, lower.matches("href=\"https://ui.perfetto.dev\"").count(), "unexpected links");
}

fn report(log: &Path, html: &Path, cwd: &Path) -> String {
    let out = mltrace(&["report", log.to_str().unwrap(), "-o", html.to_str().unwrap()], cwd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    std::fs::read_to_string(html).unwrap()
}

fn check_render(html: &Path, png: &Path) {
    if let Some(r) = render(html, png) {
        assert_eq!(r["errors"], serde_json::json!([]), "page errors: {r}");
        assert_eq!(r["requests"], serde_json::json!([]), "the page fetched: {r}");
        assert!(r["svgs"].as_u64().unwrap() >= 5, "{r}");
        assert!(std::fs::metadata(png).unwrap().len() > 10_000, "an empty screenshot");
    }
}

#[test]
fn a_recording_reports_its_known_file_and_sizes() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload("preads", tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let log = tmp.path().join("run.bin");
    let out = mltrace(&["record", "-q", "-o", log.to_str().unwrap(), "--", bin.to_str().unwrap()], &work);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let kv = key_values(&String::from_utf8_lossy(&out.stdout));
    let html_path = tmp.path().join("run.html");
    let html = report(&log, &html_path, &work);

    for id in SECTIONS.iter().chain(&["verdict", "disks", "utilisation"]) {
        assert!(html.contains(&format!("<section id=\"{id}\">")), "section {id} missing");
    }
    assert!(html.contains(&format!("<code>{}</code>", bin.display())), "the command");
    // The known file is the top file, with its exact bytes: 5,000 preads
    // of 4 KiB, and 64 writes of 4 KiB.
    let path = std::fs::canonicalize(work.join("data.bin")).unwrap();
    let files = &html[html.find("<section id=\"files\">").unwrap()..];
    let first_row = &files[files.find("<td class=\"path\">").unwrap()..];
    let first_row = &first_row[..first_row.find("</tr>").unwrap()];
    assert!(first_row.contains(&format!(">{}<", path.display())), "{first_row}");
    assert!(first_row.contains("data-bytes=\"20480000\""), "{first_row}");
    assert!(first_row.contains("data-bytes=\"262144\""), "{first_row}");
    assert!(first_row.contains("<td>5000</td>") && first_row.contains("<td>64</td>"), "{first_row}");
    // Access sizes: the workload's 5,000 preads and 64 writes all asked
    // for 4 KiB (the dynamic loader's own preads of 512 B are beside them).
    let data = |what: &str, op: &str| -> Vec<(u64, u64)> {
        let key = format!("data-op=\"{op}\" data-{what}=\"");
        let at = html.find(&key).unwrap_or_else(|| panic!("{key} missing")) + key.len();
        let v = &html[at..at + html[at..].find('"').unwrap()];
        v.split(',')
            .map(|b| b.split_once(':').map(|(l, c)| (l.parse().unwrap(), c.parse().unwrap())).unwrap())
            .collect()
    };
    assert!(data("sizes", "pread64").contains(&(4096, 5000)), "{:?}", data("sizes", "pread64"));
    assert!(data("sizes", "write").contains(&(4096, 64)), "{:?}", data("sizes", "write"));
    let total = |v: Vec<(u64, u64)>| v.iter().map(|b| b.1).sum::<u64>();
    assert_eq!(total(data("latency", "pread64")), total(data("sizes", "pread64")), "every pread has its latency");
    assert!(html.contains("pread64: bytes asked for") && html.contains(">4 KiB<"), "the drawn histogram");
    // The worker is in the process heat map under its role's name.
    assert!(html.contains(&format!("[{}]", kv["worker"])), "the worker's row");
    // One file holds the whole run: export names it.
    assert!(html.contains("<code>run.perfetto-trace</code> holds all of it"), "the Perfetto part");
    assert_self_contained(&html);
    let png = tmp.path().join("run.png");
    check_render(&html_path, &png);
    if let Some(dir) = std::env::var_os("MLTRACE_REPORT_KEEP") {
        let _ = std::fs::copy(&html_path, Path::new(&dir).join("recorded.html"));
        let _ = std::fs::copy(&png, Path::new(&dir).join("recorded.png"));
    }
}

#[test]
fn an_imported_log_reports_too() {
    let tmp = tempfile::tempdir().unwrap();
    let study = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/import/tests/fixtures/study");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&study).unwrap().map(|e| e.unwrap().path()).collect();
    inputs.sort();
    let log = tmp.path().join("old.bin");
    let mut args = vec!["import".to_string(), "-o".into(), log.display().to_string()];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = mltrace(&args, tmp.path());
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let html_path = tmp.path().join("old.html");
    let html = report(&log, &html_path, tmp.path());
    for id in SECTIONS.iter().chain(&["disks", "utilisation"]) {
        assert!(html.contains(&format!("<section id=\"{id}\">")), "section {id} missing");
    }
    // No scheduling in old traces: no verdict is made up.
    assert!(!html.contains("<section id=\"verdict\">"));
    assert!(html.contains("imported from older traces"));
    // bpftrace's reads: img_0001.npy, 131072 bytes in one read.
    assert!(html.contains("img_0001.npy"), "the imported file");
    assert!(html.contains("data-bytes=\"131072\""), "its bytes");
    // mpstat's CPU and pmon's GPU over time.
    assert!(html.contains("CPU (all cores)") && html.contains("GPU 0 busy"));
    assert_self_contained(&html);
    check_render(&html_path, &tmp.path().join("old.png"));
}

#[test]
fn gpu_and_cpu_utilisation_come_from_the_samples() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // The stand-in libnvidia-ml (tests/workloads/fake_nvml.c): GPU 0 at 87% SM.
    let lib = tmp.path().join("libnvidia-ml.so.1");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/fake_nvml.c");
    let st = Command::new("cc").args(["-O2", "-shared", "-fPIC", "-o"]).arg(&lib).arg(&src).status().unwrap();
    assert!(st.success());
    let log = tmp.path().join("gpu.bin");
    let pidfile = tmp.path().join("pid");
    let script = format!("echo $$ > {}; sleep 0.6", pidfile.display());
    let out = Command::new(mltrace_bin())
        .args(["record", "-q", "--sample-interval", "50ms", "--gpu", "required", "--nvml-library"])
        .arg(&lib)
        .arg("-o")
        .arg(&log)
        .args(["--", "sh", "-c", &script])
        .env("FAKE_NVML_PID_FILE", &pidfile)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html_path = tmp.path().join("gpu.html");
    let html = report(&log, &html_path, tmp.path());
    let util = &html[html.find("<section id=\"utilisation\">").expect("utilisation")..];
    let util = &util[..util.find("</section>").unwrap()];
    for line in ["GPU 0 (Fake H100) busy", "GPU 0 (Fake H100) SM active", "GPU 1 (Fake A100) busy", "busy", "iowait"] {
        assert!(util.contains(&format!("</i>{line}</span>")), "{line} missing from the legend");
    }
    // A percent axis, fixed to 0-100%.
    assert!(util.contains("100%") && util.contains("80%"));
    assert_self_contained(&html);
    check_render(&html_path, &tmp.path().join("gpu.png"));
}

#[test]
fn stats_and_report_give_the_same_duration_the_recordings_own() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("run.bin");
    let out = mltrace(&["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--", "sleep", "0.3"], tmp.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&mltrace(&["stats", log.to_str().unwrap()], tmp.path()).stdout).into_owned();
    let recorded = text.lines().find_map(|l| l.strip_prefix("recorded: ")).expect(&text);
    let recorded = recorded.split(", starting").next().unwrap();
    let html = report(&log, &tmp.path().join("r.html"), tmp.path());
    let span = html.split("span</td><td>").nth(1).expect("a span row").split(" (").next().unwrap();
    assert_eq!(recorded, span, "stats and report disagree");
    // The span is the recording's: from its start (header) to its end (trailer).
    let out = mltrace(&["stats", "--json", log.to_str().unwrap()], tmp.path());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut r = mltrace_log::LogReader::open(&log).unwrap();
    let start = r.header().start.boottime_ns;
    let end = r.peek_trailer().unwrap().unwrap().end.boottime_ns;
    // Widened to an event just outside (one a few ms before the header's clock reading).
    let recs = read_log(&log);
    let first = recs.iter().map(|r| r.rec.ts()).min().unwrap();
    let last = recs.iter().map(|r| r.rec.end_ts()).max().unwrap();
    let want = end.max(last) - start.min(first);
    assert_eq!(json["duration_ns"].as_u64(), Some(want), "{}", json["duration_ns"]);
}

/// `report BEFORE AFTER`: both runs on one page, each with every section
/// of its own report, and a section comparing them with the figures and
/// the line `mltrace diff` gives (a trainer whose worker decodes 20 ms a
/// batch, then 2 ms).
#[test]
fn two_runs_on_one_page() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin = compile_workload("trainer", dir);
    let data = dir.join("train.bin");
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    std::fs::write(&data, chunk.repeat(4)).unwrap();
    let mut logs = Vec::new();
    for (name, decode_ms) in [("slow", "20"), ("fast", "2")] {
        let log = dir.join(format!("{name}.bin"));
        let args = ["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--", bin.to_str().unwrap()];
        let out = mltrace(&[&args[..], &[data.to_str().unwrap(), "20", "64", decode_ms, "10"]].concat(), dir);
        assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
        logs.push(log);
    }
    let (before, after) = (logs[0].to_str().unwrap(), logs[1].to_str().unwrap());
    // Named after both, beside the second, by default.
    let out = mltrace(&["report", before, after], dir);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let html_path = dir.join("slow-vs-fast.html");
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("<section id=\"compare\">"), "the comparison");
    for side in ["before", "after"] {
        for id in SECTIONS.iter().chain(&["verdict"]) {
            assert!(html.contains(&format!("<section id=\"{side}-{id}\">")), "{side}-{id} missing");
        }
        assert!(!html.contains(&format!("<section id=\"{}\">", SECTIONS[0])), "an id not made the run's");
    }
    // The comparison is diff's: its line, and the trainer's shares in each run.
    let d = mltrace(&["diff", "--json", before, after], dir);
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    let d: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap();
    let line = d["conclusion"].as_str().unwrap().replace('>', "&gt;").replace('\'', "&#39;");
    assert!(html.contains(&format!("id=\"conclusion\">{line}</p>")), "{line}");
    assert!(d["breakdown"]["data_wait"]["delta"].as_f64().unwrap() < -0.2, "{}", d["breakdown"]);
    for side in ["before", "after"] {
        let key = format!("data-run=\"{side}\" data-shares=\"");
        let at = html.find(&key).unwrap_or_else(|| panic!("{key}")) + key.len();
        let shares = &html[at..at + html[at..].find('"').unwrap()];
        let data_wait = shares.split(',').find_map(|s| s.strip_prefix("data_wait:")).unwrap();
        let want = d["breakdown"]["data_wait"][side].as_f64().unwrap();
        assert_eq!(data_wait, format!("{want:.4}"), "{side}: {shares}");
    }
    assert!(html.contains("<th>before</th><th>after</th><th>change</th>"), "the figures' table");
    assert_self_contained(&html);
    check_render(&html_path, &dir.join("pair.png"));
}
