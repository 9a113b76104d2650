//! A report of a made-up run too big for one Perfetto file: it names the
//! overview and every part export would write, and gathering it takes
//! memory that does not follow the number of events.

use std::io::{BufWriter, Write};
use std::path::Path;

use mltrace_log::LogReader;
use mltrace_model::plan::FileRole;
use mltrace_report::Report;
use mltrace_testlog::synthetic::{self, Spec};

/// Peak resident memory since the last reset, in kB (Linux).
fn peak_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn rss_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_big_run_names_its_parts_in_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("run.bin");
    // 6 epochs of 5 s at 40,000 calls per second: 1.2M calls, with their
    // counters and block requests.
    let spec = Spec { epochs: 6, epoch_ns: 5_000_000_000, rate: 40_000, workers: 4 };
    let mut out = BufWriter::new(std::fs::File::create(&log).unwrap());
    let calls = synthetic::write(&mut out, spec).unwrap();
    out.flush().unwrap();
    drop(out);
    assert!(calls > 1_000_000, "{calls}");

    // Reset the peak (clear_refs 5), then gather.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = rss_kb();
    let mut reader = LogReader::open(&log).unwrap();
    let report = Report::gather_with_budget(&mut reader, &log, 300_000).unwrap();
    let html = report.html().unwrap();
    let grew = peak_kb().saturating_sub(before);
    // Holding the calls would take well over 100 MB (a record is ~100
    // bytes in memory); the survey's intervals, the stats' histograms and
    // the top files' heat rows take a few tens.
    eprintln!("{calls} calls: peak grew by {} MB", grew / 1024);
    assert!(grew < 80 * 1024, "gathering the report grew the peak by {} MB", grew / 1024);

    assert_eq!(report.survey.syscalls, calls);
    let parts: Vec<_> = report.plan.files.iter().filter(|f| matches!(f.role, FileRole::Part { .. })).collect();
    assert!(parts.len() >= 3, "{:?}", report.plan.files);
    assert_eq!(report.plan.files[0].role, FileRole::Overview);
    for f in &report.plan.files {
        let name = f.path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(html.contains(&format!("<td class=\"path\">{name}</td>")), "{name} not in the report");
        assert!(
            html.contains(&format!("<td class=\"l\">{}</td>", f.label)) || f.role == FileRole::Overview,
            "{}",
            f.label
        );
    }
    assert!(html.contains("run.part01."), "parts are named as export names them");
    assert!(html.contains("export writes an overview and"), "the report says the run is split");
    // Every epoch is shaded and the workers have their rows.
    for e in 1..=6 {
        assert!(html.contains(&format!("EPOCH {e}")), "EPOCH {e}");
    }
    assert!(!report.heat.rows.is_empty() && report.heat.rows.iter().all(|r| !r.path.is_empty()));
    if let Some(dir) = std::env::var_os("MLTRACE_REPORT_KEEP") {
        std::fs::write(Path::new(&dir).join("big.html"), &html).unwrap();
    }
}

#[test]
fn an_empty_log_still_reports() {
    use mltrace_log::{Header, RecordWriter, Trailer};
    let w = RecordWriter::new(Vec::new(), &Header::default()).unwrap();
    let bytes = w.finish(&Trailer::default()).unwrap();
    let mut reader = LogReader::new(Path::new("empty.bin"), std::io::Cursor::new(bytes)).unwrap();
    let report = Report::gather(&mut reader, Path::new("empty.bin")).unwrap();
    let html = report.html().unwrap();
    for what in ["No bytes were read or written", "No file was read or written", "no CPU or GPU samples"] {
        assert!(html.contains(what), "{what}");
    }
    assert!(html.contains("<code>empty.perfetto-trace</code> holds all of it"));
}

#[test]
fn names_are_escaped_in_tables_and_charts() {
    use mltrace_log::*;
    let header = Header { root_pid: 10, command: vec!["run".into(), "<b>&".into()], ..Default::default() };
    let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
    w.push(&Record::Fork(Fork { ts: 1, pid: 10, tid: 10, parent_pid: 1, parent_tid: 1, thread: false })).unwrap();
    w.push_with(|e| Record::Comm(Comm { ts: 2, pid: 11, tid: 11, comm: e.intern(b"<u>w&") })).unwrap();
    for (i, pid) in [10u32, 11].into_iter().enumerate() {
        w.push_with(|e| {
            Record::Io(Io {
                ts: 10 + i as u64,
                dur: 1000,
                pid,
                tid: pid,
                op: IoOp::Pread64,
                fd: 3,
                path: e.intern(b"/data/<script>x&y\".bin"),
                kind: FileKind::Regular,
                requested: 4096,
                ret: 4096,
                ..Default::default()
            })
        })
        .unwrap();
    }
    let bytes = w.finish(&Trailer::default()).unwrap();
    let mut reader = LogReader::new(Path::new("odd.bin"), std::io::Cursor::new(bytes)).unwrap();
    let html = Report::gather(&mut reader, Path::new("odd.bin")).unwrap().html().unwrap();
    for raw in ["<script>", "<b>", "<u>"] {
        assert!(!html.contains(raw), "{raw} unescaped");
    }
    assert!(html.contains("/data/&lt;script&gt;x&amp;y&quot;.bin"), "the path in the files table");
    assert!(html.contains("&lt;script&gt;x&amp;y"), "the path in the heat map");
    assert!(html.contains("<code>run &lt;b&gt;&amp;</code>"), "the command");
    assert!(html.contains("&lt;u&gt;w&amp;"), "the process name");
}
