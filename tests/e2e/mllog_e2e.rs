//! Training phases during `record`: MLLOG lines the command prints become
//! phases and marks on the trace clock, while its output passes through
//! byte for byte (pipes, or a pty when we run on a terminal).

use std::path::Path;
use std::process::{Command, Stdio};

use mltrace_log::*;
use mltrace_tests::*;

/// A job that logs INIT, three epochs (one on stderr) with an eval each,
/// with real time between them, and does some file I/O.
const JOB: &str = r#"#!/bin/sh
now() { echo $(( $(date +%s%N) / 1000000 )); }
ml() { echo ":::MLLOG {\"namespace\": \"\", \"time_ms\": $(now), \"event_type\": \"$1\", \"key\": \"$2\", \"value\": $3, \"metadata\": {\"epoch_num\": $4}}"; }
ml INTERVAL_START init_start null 0
sleep 0.1
ml INTERVAL_END init_stop null 0
for e in 1 2 3; do
  ml INTERVAL_START epoch_start null $e >&2
  head -c 100000 /dev/urandom > data.$e
  sleep 0.1
  ml INTERVAL_END epoch_stop null $e >&2
  ml POINT_IN_TIME eval_accuracy 0.$e $e
done
echo ':::MLLOG {"key": broken}'
"#;

fn job(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("job.sh");
    std::fs::write(&p, JOB).unwrap();
    Command::new("chmod").arg("+x").arg(&p).status().unwrap();
    p
}

struct Phases {
    /// (name, ts, dur) sorted by ts.
    phases: Vec<(String, u64, u64)>,
    marks: Vec<(String, String, u64)>,
    header: Header,
    trailer: Trailer,
}

fn phases_of(log: &Path) -> Phases {
    let recs = read_log(log);
    let mut phases = Vec::new();
    let mut marks = Vec::new();
    for r in &recs {
        match r.rec {
            Record::Phase(p) => phases.push((r.strs[0].clone(), p.ts, p.dur)),
            Record::Mark(m) => marks.push((r.strs[0].clone(), r.strs[1].clone(), m.ts)),
            _ => {}
        }
    }
    phases.sort_by_key(|p| p.1);
    marks.sort_by_key(|m| m.2);
    let r = LogReader::open(log).unwrap();
    let header = r.header().clone();
    let mut r = r;
    while r.next_frame().unwrap().is_some() {}
    Phases { phases, marks, header, trailer: r.trailer().cloned().unwrap() }
}

fn check_job_phases(p: &Phases) {
    let names: Vec<&str> = p.phases.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(names, ["INIT", "EPOCH 1", "EPOCH 2", "EPOCH 3"], "{:?}", p.phases);
    let start = p.header.start.boottime_ns;
    let end = p.trailer.end.boottime_ns;
    for (name, ts, dur) in &p.phases {
        // Milliseconds in MLLOG: allow that much around the recording.
        assert!(*ts + 1_000_000 >= start && ts + dur <= end + 1_000_000, "{name} outside the recording");
        assert!((90_000_000..2_000_000_000).contains(dur), "{name}: {dur} ns for a 0.1 s sleep");
    }
    // Epochs follow each other, each eval after its epoch.
    for w in p.phases.windows(2) {
        assert!(w[0].1 + w[0].2 <= w[1].1 + 1_000_000, "{:?} overlaps {:?}", w[0], w[1]);
    }
    let evals: Vec<(&str, &str)> = p.marks.iter().map(|m| (m.0.as_str(), m.1.as_str())).collect();
    assert_eq!(evals, [("eval_accuracy", "0.1"), ("eval_accuracy", "0.2"), ("eval_accuracy", "0.3")]);
    for (i, m) in p.marks.iter().enumerate() {
        let epoch = &p.phases[i + 1];
        assert!(m.2 + 1_000_000 >= epoch.1 + epoch.2, "eval {i} before its epoch ended");
    }
    let probe = p.header.probes.iter().find(|x| x.subsystem == "phases").expect("phases probe in the header");
    assert_eq!(probe.mechanism, "MLLOG");
}

#[test]
fn mllog_lines_in_the_output_become_phases_and_output_passes_through() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let script = job(tmp.path());
    let log = tmp.path().join("run.bin");
    let out = mltrace(&["record", "-q", "-o", log.to_str().unwrap(), "--", script.to_str().unwrap()], tmp.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The command's own lines, in its order, on the stream it used.
    assert_eq!(stdout.lines().filter(|l| l.contains("init_")).count(), 2);
    assert_eq!(stdout.lines().filter(|l| l.contains("eval_accuracy")).count(), 3);
    assert_eq!(stderr.lines().filter(|l| l.contains("epoch_st")).count(), 6);
    assert!(stderr.contains("warning: 1 MLLOG lines did not parse"), "{stderr}");
    let p = phases_of(&log);
    check_job_phases(&p);
    assert!(p.header.probes.iter().any(|x| x.detail.contains("stdout (pipe)")), "{:?}", p.header.probes);

    // The Perfetto export puts them on the "Training phases" track.
    let Some(tp) = perfetto_tp() else { return };
    let trace = tmp.path().join("run.perfetto-trace");
    let o = mltrace(&["export", "--perfetto", log.to_str().unwrap(), "-o", trace.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let q = "select count(*) from slice s join track t on s.track_id = t.id \
             where s.name in ('INIT', 'EPOCH 1', 'EPOCH 2', 'EPOCH 3') and s.dur > 0";
    assert_eq!(tp_query(&tp, &trace, &[q])[0], vec![vec!["4".to_string()]]);
}

#[test]
fn output_bytes_pass_through_unchanged() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // Every byte value, carriage returns, NULs, no final newline, and
    // more than a pipe holds.
    let mut blob: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    blob.extend_from_slice(b"\r\n:::MLLOG {\"key\": \"x\"}\rno newline");
    let err_blob: Vec<u8> = blob.iter().rev().copied().collect();
    std::fs::write(tmp.path().join("out.bin"), &blob).unwrap();
    std::fs::write(tmp.path().join("err.bin"), &err_blob).unwrap();
    let log = tmp.path().join("run.bin");
    let out = mltrace(
        &[
            "record",
            "-q",
            "--gpu",
            "off",
            "-o",
            log.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "cat out.bin; cat err.bin >&2; exit 3",
        ],
        tmp.path(),
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout == blob, "stdout changed ({} bytes, expected {})", out.stdout.len(), blob.len());
    // Then our summary.
    assert!(out.stderr.starts_with(&err_blob), "stderr changed");
    assert!(out.stderr[err_blob.len()..].starts_with(b"mltrace: "));
}

#[test]
fn on_a_terminal_the_command_still_has_one() {
    let Some(_turn) = require_root!() else {
        return;
    };
    // script(1) gives us a terminal; skip where util-linux lacks it.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipping: script(1) not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("run.bin");
    let typescript = tmp.path().join("typescript");
    let inner = format!(
        "{} record -q -o {} -- sh -c 'test -t 1 && echo OUT-TTY; test -t 2 && echo ERR-TTY >&2; printf \"a\\nb\\n\"'",
        mltrace_bin().display(),
        log.display()
    );
    let st = Command::new("script")
        .args(["-qec", &inner])
        .arg(&typescript)
        .stdin(Stdio::null())
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let t = std::fs::read(&typescript).unwrap();
    let text = String::from_utf8_lossy(&t);
    // One \r\n per line: the outer terminal's translation, not ours too;
    // stdout and stderr share the terminal, so their order is kept.
    assert!(text.contains("OUT-TTY\r\nERR-TTY\r\na\r\nb\r\n"), "{text:?}");
    let h = LogReader::open(&log).unwrap().header().clone();
    assert!(h.probes.iter().any(|p| p.detail.contains("stdout and stderr (one pty")), "{:?}", h.probes);
}

#[test]
fn stdout_and_stderr_into_one_pipe_keep_their_order() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("run.bin");
    // `record ... 2>&1 | cat`: one pipe for both, as the shell made it.
    let script = format!(
        "{} record -q --gpu off -o {} -- sh -c 'for i in $(seq 1 300); do echo out$i; echo err$i >&2; done' 2>&1 | cat",
        mltrace_bin().display(),
        log.display()
    );
    let out = Command::new("sh").args(["-c", &script]).current_dir(tmp.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let want: String = (1..=300).map(|i| format!("out{i}\nerr{i}\n")).collect();
    assert!(text.starts_with(&want), "{text}");
    let h = LogReader::open(&log).unwrap().header().clone();
    assert!(h.probes.iter().any(|p| p.detail.contains("stdout and stderr (one pipe")), "{:?}", h.probes);
}

#[test]
fn mllog_file_is_followed_from_where_it_ended() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let script = job(tmp.path());
    let mllog = tmp.path().join("mllog.txt");
    // A previous run's line, before recording: not this run's phases.
    std::fs::write(&mllog, ":::MLLOG {\"time_ms\": 1000, \"key\": \"init_start\", \"value\": null}\n").unwrap();
    let log = tmp.path().join("run.bin");
    let cmd = format!("{} >> {} 2>&1", script.display(), mllog.display());
    let out = mltrace(
        &["record", "-q", "-o", log.to_str().unwrap(), "--mllog", mllog.to_str().unwrap(), "--", "sh", "-c", &cmd],
        tmp.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warning: 1 MLLOG lines did not parse"), "{stderr}");
    let p = phases_of(&log);
    check_job_phases(&p);
    assert!(p.header.probes.iter().any(|x| x.detail.contains("mllog.txt")), "{:?}", p.header.probes);
}

#[test]
fn no_mllog_leaves_output_alone() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let script = job(tmp.path());
    let log = tmp.path().join("run.bin");
    let out = mltrace(
        &["record", "-q", "--no-mllog", "-o", log.to_str().unwrap(), "--", script.to_str().unwrap()],
        tmp.path(),
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains("eval_accuracy")).count(), 3);
    let p = phases_of(&log);
    assert!(p.phases.is_empty() && p.marks.is_empty());
    assert!(!p.header.probes.iter().any(|x| x.subsystem == "phases"));
}

#[test]
fn a_closed_reader_gives_the_command_its_sigpipe() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("run.bin");
    // `yes | head -1` under mltrace: yes must die of SIGPIPE as it would
    // without us, not run forever or take the recorder down.
    let mut child = spawn(
        Command::new(mltrace_bin())
            .args(["record", "-q", "-o", log.to_str().unwrap(), "--", "yes"])
            .current_dir(tmp.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut first = [0u8; 2];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    assert_eq!(&first, b"y\n");
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGPIPE), "{stderr}");
    assert!(stderr.contains("command exited with 141"), "{stderr}");
    assert!(LogReader::open(&log).is_ok());
}

/// INIT from the command's own shell (no pid in the metadata), EPOCH 1 from
/// a child that puts its pid there (as the mltrace_ebpf Python module does).
const PIDS_JOB: &str = r#"#!/bin/sh
now() { echo $(( $(date +%s%N) / 1000000 )); }
ml() { echo ":::MLLOG {\"namespace\": \"\", \"time_ms\": $(now), \"key\": \"$1\", \"value\": null, \"metadata\": {$2}}"; }
if [ "$1" = child ]; then
  echo $$ > child.pid
  ml epoch_start "\"epoch_num\": 1, \"pid\": $$"
  sleep 0.05
  ml epoch_stop "\"epoch_num\": 1, \"pid\": $$"
  exit
fi
ml init_start ""
sleep 0.05
ml init_stop ""
sh "$0" child
"#;

#[test]
fn each_phase_carries_the_pid_that_logged_it_into_parquet() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("job.sh");
    std::fs::write(&script, PIDS_JOB).unwrap();
    let log = tmp.path().join("run.bin");
    let out = mltrace(&["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--", "sh", "job.sh"], tmp.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let child: i64 = std::fs::read_to_string(tmp.path().join("child.pid")).unwrap().trim().parse().unwrap();
    let root = i64::from(LogReader::open(&log).unwrap().header().root_pid);
    assert_ne!(child, root);
    let dir = tmp.path().join("tables");
    let out = mltrace(&["export", "--parquet", log.to_str().unwrap(), "-o", dir.to_str().unwrap()], tmp.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let f = std::fs::File::open(dir.join("phases.parquet")).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).unwrap().build().unwrap();
    let mut rows = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let (names, pids) = (b.column_by_name("name").unwrap(), b.column_by_name("pid").unwrap());
        let (names, pids) = (names.as_string::<i32>(), pids.as_primitive::<Int64Type>());
        rows.extend((0..b.num_rows()).map(|i| (names.value(i).to_string(), pids.value(i))));
    }
    rows.sort();
    assert_eq!(rows, [("EPOCH 1".to_string(), child), ("INIT".to_string(), root)]);
}
