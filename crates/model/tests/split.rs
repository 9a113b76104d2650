//! The overview and the parts of a big run, checked on a made-up run with
//! an encoder that checks what every file declares and counts what it holds.

use std::collections::{HashMap, HashSet};
use std::io::{self, Cursor};
use std::path::{Path, PathBuf};

use mltrace_log::*;
use mltrace_model::plan::{self, FileRole, PlannedFile, Split};
use mltrace_model::window::{self, WindowError, WindowRequest};
use mltrace_model::write_plan::{self, Output, Written};
use mltrace_model::*;
use mltrace_testlog::synthetic::{self, Spec};

/// What one file held.
#[derive(Default, Debug, Clone)]
struct FileLog {
    began: bool,
    ended: bool,
    /// Track id -> (kind, name, parent).
    tracks: HashMap<TrackId, (String, String, Option<TrackId>)>,
    /// Syscall slices (on reads/writes/opens tracks of a process), with their ts.
    syscalls: Vec<u64>,
    slices: u64,
    counters: u64,
    flows_out: HashSet<u64>,
    flows_in: Vec<u64>,
    processes: HashSet<u32>,
    /// Slices on tracks outside the processes (verdict, phases): start,
    /// end, and whether they say they were cut to the file.
    run_wide: Vec<(u64, u64, bool)>,
    /// Each counter track's first sample.
    first_sample: HashMap<TrackId, u64>,
}

struct Check {
    files: Vec<(PathBuf, FileLog)>,
}

struct CheckEnc {
    log: FileLog,
    path: PathBuf,
    done: *mut Check,
}

impl CheckEnc {
    fn known(&self, t: TrackId) -> io::Result<&(String, String, Option<TrackId>)> {
        self.log.tracks.get(&t).ok_or_else(|| io::Error::other(format!("track {t} used before it was declared")))
    }
}

/// Whether the args said how long a cut slice is whole.
#[derive(Default)]
struct Sink {
    whole: bool,
}
impl ArgSink for Sink {
    fn int(&mut self, _: ArgKey, _: i64) {}
    fn uint(&mut self, _: ArgKey, _: u64) {}
    fn str(&mut self, k: ArgKey, _: &[u8]) {
        self.whole |= k == ArgKey::Whole;
    }
}

impl Encoder for CheckEnc {
    fn begin(&mut self, _: &FileMeta<'_>) -> io::Result<()> {
        assert!(!self.log.began);
        self.log.began = true;
        Ok(())
    }
    fn track(&mut self, t: &Track<'_>) -> io::Result<()> {
        assert!(self.log.began);
        if let Some(p) = t.parent {
            self.known(p)?;
        }
        let kind = match t.kind {
            TrackKind::Process(p) => {
                assert!(self.log.processes.insert(p.pid), "pid {} declared twice in one file", p.pid);
                "process"
            }
            TrackKind::Thread { .. } => "thread",
            TrackKind::Group => "group",
            TrackKind::Slices => "slices",
            TrackKind::Counter(_) => "counter",
        };
        assert!(self.log.tracks.insert(t.id, (kind.into(), t.name.into(), t.parent)).is_none(), "track id reused");
        Ok(())
    }
    fn slice<A: Args>(&mut self, s: &Slice<'_>, args: &A) -> io::Result<()> {
        let (kind, name, parent) = self.known(s.track)?.clone();
        assert!(kind == "slices" || kind == "thread", "a slice on a {kind} track");
        let mut sink = Sink::default();
        args.write(&mut sink);
        // Calls are on their thread's track (or, past the threads with a
        // track of their own, on shared lanes).
        let in_process = parent.is_some_and(|p| self.log.tracks[&p].0 == "process");
        if kind == "thread" || (in_process && ["other threads", "overlapping calls"].contains(&name.as_str())) {
            self.log.syscalls.push(s.ts);
        }
        if kind == "slices" && !in_process {
            self.log.run_wide.push((s.ts, s.ts + s.dur, sink.whole));
        }
        self.log.slices += 1;
        self.log.flows_out.extend(s.flows_out.iter().copied());
        self.log.flows_in.extend(s.flows_in.iter().copied());
        Ok(())
    }
    fn instant<A: Args>(&mut self, t: TrackId, _: u64, _: Name<'_>, args: &A) -> io::Result<()> {
        self.known(t)?;
        args.write(&mut Sink::default());
        Ok(())
    }
    fn counter(&mut self, t: TrackId, ts: u64, v: f64) -> io::Result<()> {
        let (kind, _, _) = self.known(t)?;
        assert_eq!(kind, "counter");
        assert!(v.is_finite());
        self.log.counters += 1;
        self.log.first_sample.entry(t).or_insert(ts);
        Ok(())
    }
    fn sched_switch(&mut self, _: &SwitchEvent<'_>) -> io::Result<()> {
        Ok(())
    }
    fn sched_waking(&mut self, _: &WakingEvent<'_>) -> io::Result<()> {
        Ok(())
    }
    fn end(&mut self, _: Option<ClockAnchor>, _: Option<&Trailer>) -> io::Result<u64> {
        assert!(self.log.began && !self.log.ended);
        self.log.ended = true;
        // Every arrow that ends here starts here.
        for id in &self.log.flows_in {
            assert!(self.log.flows_out.contains(id), "flow {id:x} ends in {} without its start", self.path.display());
        }
        Ok(0)
    }
}

impl Output for Check {
    type E = CheckEnc;
    fn create(&mut self, f: &PlannedFile) -> io::Result<CheckEnc> {
        Ok(CheckEnc { log: FileLog::default(), path: f.path.clone(), done: self as *mut Check })
    }
    fn finished(&mut self, enc: CheckEnc) -> io::Result<()> {
        assert!(std::ptr::eq(enc.done, self));
        self.files.push((enc.path, enc.log));
        Ok(())
    }
}

fn make(spec: Spec) -> (Vec<u8>, u64) {
    let mut out = Vec::new();
    let calls = synthetic::write(&mut out, spec).unwrap();
    (out, calls)
}

fn reader(log: &[u8]) -> LogReader<Cursor<&[u8]>> {
    LogReader::new(Path::new("run.bin"), Cursor::new(log)).unwrap()
}

/// Runs an export of `log`; returns the plan's files and what each held.
fn export_log(log: &[u8], req: &WindowRequest, split: Split, budget: u64) -> (Survey, Vec<Written>, Vec<FileLog>) {
    let mut r = reader(log);
    let run = Survey::of(&mut r).unwrap();
    let win = window::resolve(&run, req).unwrap();
    let plan = plan::plan(&run, &win, Path::new("out/run.perfetto-trace"), ".perfetto-trace", split, budget);
    let mut check = Check { files: Vec::new() };
    let written = write_plan::run(&mut r, &run, &win, &plan, &mut check, &mut |_| {}).unwrap();
    let logs = check.files.iter().map(|f| f.1.clone()).collect();
    (run, written, logs)
}

const SPEC: Spec = Spec { epochs: 6, epoch_ns: 2_000_000_000, rate: 20_000, workers: 4 };

#[test]
fn a_log_within_the_budget_is_one_file() {
    let (log, calls) = make(SPEC);
    let (run, written, logs) = export_log(&log, &WindowRequest::default(), Split::Auto, 10_000_000);
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].file.role, FileRole::Whole);
    assert_eq!(run.syscalls, calls);
    assert_eq!(logs[0].syscalls.len() as u64, calls);
    assert_eq!(written[0].stats.syscalls, calls);
}

#[test]
fn a_big_log_is_an_overview_and_parts_that_add_up() {
    let (log, calls) = make(SPEC);
    let budget = 70_000;
    let (run, written, logs) = export_log(&log, &WindowRequest::default(), Split::Auto, budget);
    assert_eq!(written[0].file.role, FileRole::Overview);
    assert_eq!(written[0].file.path, Path::new("out/run.perfetto-trace"));
    let parts: Vec<_> = written.iter().zip(&logs).skip(1).collect();
    assert!(parts.len() >= 3, "{} parts", parts.len());
    // Every syscall in exactly one part.
    let total: u64 = parts.iter().map(|(_, l)| l.syscalls.len() as u64).sum();
    assert_eq!(total, calls);
    assert_eq!(run.syscalls, calls);
    let mut names = Vec::new();
    for (k, (w, l)) in parts.iter().enumerate() {
        assert_eq!(w.file.role, FileRole::Part { index: k + 1, count: parts.len() });
        // Parts are cut at epoch starts, within the budget (a little over is
        // the weight bins' rounding).
        assert!(w.stats.slices + w.stats.counters <= budget * 11 / 10, "{}: {}", w.file.label, w.stats.slices);
        assert!(w.file.label.starts_with("EPOCH") || w.file.label.starts_with("INIT"), "{}", w.file.label);
        // Each part declares the processes it shows, and the phases with
        // a lane saying which stretch of them the part holds (a group with
        // a child lane: the UI shows it as its own, not in "Global Track
        // Events", even in a part with no marks).
        let phases = l.tracks.iter().find(|t| t.1 .1 == "Training phases").map(|t| *t.0).expect("phases");
        assert!(l.tracks.values().any(|t| t.1 == "this file" && t.2 == Some(phases)), "{}", w.file.label);
        assert!(!l.processes.is_empty());
        names.push(w.file.path.file_name().unwrap().to_string_lossy().into_owned());
        // Records are logged when they end: a part may start with a few
        // that began just before it, never with ones long before.
        let early = l.syscalls.iter().filter(|&&ts| ts + 100_000_000 < w.file.from).count();
        assert_eq!(early, 0, "{}", w.file.label);
        // Machine counters (CPU, memory: not a process's) start at the
        // part's first instant with the sample before it, not 100 ms in.
        if k > 0 {
            let machine = |t: &TrackId| {
                let mut p = l.tracks[t].2;
                while let Some(id) = p {
                    if l.tracks[&id].0 == "process" {
                        return false;
                    }
                    p = l.tracks[&id].2;
                }
                true
            };
            let firsts: Vec<(&str, u64)> = (l.first_sample.iter().filter(|(t, _)| machine(t)))
                .map(|(t, &ts)| (l.tracks[t].1.as_str(), ts))
                .collect();
            assert!(firsts.len() >= 3, "{}: {} machine counters", w.file.label, firsts.len());
            assert!(firsts.iter().all(|&(_, ts)| ts == w.file.from), "{}: first samples {firsts:?}", w.file.label);
        }
        // Run-wide slices (phases, the verdict) are cut to the part, so
        // that it opens on its own span, and say so.
        for &(start, end, _) in &l.run_wide {
            assert!(start >= w.file.from && end <= w.file.to, "{}: {start}..{end}", w.file.label);
        }
    }
    let cut = parts.iter().flat_map(|(_, l)| &l.run_wide).filter(|s| s.2).count();
    assert!(cut > 0, "no part cut a phase");
    // Names sort in time order and say what they hold.
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(names[0].starts_with("run.part01.INIT"), "{names:?}");
    assert!(names.iter().all(|n| n.ends_with(".perfetto-trace")));
    // The overview: per-process rates, machine counters, the phases.
    let ov = &logs[0];
    assert!(ov.counters > 100);
    assert!(ov.tracks.values().any(|t| t.0 == "counter" && t.1 == "read"));
    assert!(ov.tracks.values().any(|t| t.0 == "counter" && t.1 == "latency p99"));
    assert!(ov.tracks.values().any(|t| t.1 == mltrace_model::overview::SLOWEST_TRACK));
    assert!(ov.tracks.values().any(|t| t.1 == mltrace_model::overview::FAILED_TRACK));
    assert!(ov.tracks.values().any(|t| t.1 == "utilisation"));
    assert!(ov.tracks.values().any(|t| t.1 == "mltrace: lost events · total"));
}

#[test]
fn the_overview_grows_with_duration_and_processes_not_events() {
    let slow = Spec { rate: 4_000, ..SPEC };
    let fast = Spec { rate: 40_000, ..SPEC };
    let size = |spec| {
        let (log, calls) = make(spec);
        let (_, written, _) = export_log(&log, &WindowRequest::default(), Split::OverviewOnly, 1);
        assert_eq!(written.len(), 1);
        (calls, written[0].stats.counters + written[0].stats.slices)
    };
    let (c1, s1) = size(slow);
    let (c2, s2) = size(fast);
    assert!(c2 > 9 * c1);
    assert!((s2 as f64) < 1.3 * s1 as f64, "overview {s1} -> {s2} events for {c1} -> {c2} calls");
}

#[test]
fn a_window_holds_only_that_window() {
    let (log, _) = make(SPEC);
    let req = WindowRequest { from: Some("EPOCH 3".into()), to: Some("EPOCH 4".into()), pids: vec![] };
    let (run, written, logs) = export_log(&log, &req, Split::Auto, 10_000_000);
    assert_eq!(written.len(), 1);
    let e3 = run.phases.iter().find(|p| p.name == "EPOCH 3").unwrap();
    let e4 = run.phases.iter().find(|p| p.name == "EPOCH 4").unwrap();
    let (from, to) = (e3.ts, e4.ts + e4.dur);
    // Exactly the syscalls that started in the window.
    let mut r = reader(&log);
    let mut want = 0;
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(rec) = f.next_record() {
            if matches!(rec, Record::Io(_) | Record::Open(_) | Record::Close(_) | Record::Transfer(_)) {
                want += u64::from(rec.ts() >= from && rec.ts() < to);
            }
        }
    }
    assert!(want > 1000);
    assert_eq!(logs[0].syscalls.len() as u64, want);
    assert!(logs[0].syscalls.iter().all(|&ts| ts >= from && ts < to));
    // Counters start at the window's first instant, the process's too
    // where it has a sample there (the machine's do: carried from before).
    assert!(logs[0].first_sample.values().filter(|&&ts| ts == from).count() >= 3, "{:?}", logs[0].first_sample);
    assert!(logs[0].first_sample.values().all(|&ts| ts >= from && ts < to));
    // In seconds from the start: the same.
    let secs = |t: u64| format!("{:.9}", (t - run.start()) as f64 / 1e9);
    let req = WindowRequest { from: Some(secs(from)), to: Some(secs(to)), pids: vec![] };
    let (_, _, logs) = export_log(&log, &req, Split::Auto, 10_000_000);
    assert!((logs[0].syscalls.len() as i64 - want as i64).abs() <= 1);
}

#[test]
fn a_pid_window_holds_that_process_and_the_machine() {
    let (log, _) = make(SPEC);
    let (run, _, _) = export_log(&log, &WindowRequest::default(), Split::Never, 1);
    let worker = run.procs.list.iter().find(|p| p.syscalls > 100 && p.pid != synthetic::ROOT).unwrap().pid;
    let req = WindowRequest { pids: vec![worker], ..Default::default() };
    let (_, written, logs) = export_log(&log, &req, Split::Auto, 10_000_000);
    assert_eq!(written.len(), 1);
    assert_eq!(logs[0].processes, HashSet::from([worker]));
    assert!(logs[0].tracks.values().any(|t| t.1 == "CPU · busy"), "machine counters stay");
}

#[test]
fn bad_windows_are_explained() {
    let (log, _) = make(SPEC);
    let mut r = reader(&log);
    let run = Survey::of(&mut r).unwrap();
    let req = |from: &str, to: &str| WindowRequest {
        from: (!from.is_empty()).then(|| from.into()),
        to: (!to.is_empty()).then(|| to.into()),
        pids: vec![],
    };
    let e = window::resolve(&run, &req("EPOCH 99", "")).unwrap_err();
    assert!(matches!(e, WindowError::UnknownPhase { .. }));
    let msg = e.to_string();
    assert!(msg.contains("EPOCH 1 … EPOCH 6 (6)") && msg.contains("INIT"), "{msg}");
    let e = window::resolve(&run, &req("EPOCH 4", "EPOCH 2")).unwrap_err();
    assert!(matches!(e, WindowError::Reversed { .. }), "{e}");
    let e = window::resolve(&run, &req("10h", "")).unwrap_err();
    assert!(matches!(e, WindowError::Outside { .. }), "{e}");
    assert!(e.to_string().contains("the run spans +0.000 s"), "{e}");
    let e = window::resolve(&run, &req("12:00:00 tomorrow", "")).unwrap_err();
    assert!(matches!(e, WindowError::UnknownPhase { .. } | WindowError::BadTime { .. }), "{e}");
    let e = window::resolve(&run, &WindowRequest { pids: vec![4242], ..Default::default() }).unwrap_err();
    assert!(matches!(e, WindowError::UnknownPid { pid: 4242, .. }), "{e}");
    assert!(e.to_string().contains("DataLoader worker 0"), "{e}");
}

#[test]
fn without_phases_parts_are_time_windows() {
    // The bench's plain pread storm has no phases.
    let header = Header { source: "test".into(), ..Default::default() };
    let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
    for i in 0..50_000u64 {
        w.push_with(|e| {
            Record::Io(Io {
                ts: 1_000_000_000 + i * 100_000,
                dur: 1000,
                pid: 7,
                tid: 7,
                op: IoOp::Pread64,
                path: e.intern(b"/d/x"),
                ret: 4096,
                ..Default::default()
            })
        })
        .unwrap();
    }
    let log = w.finish(&Trailer::default()).unwrap();
    let (_, written, logs) = export_log(&log, &WindowRequest::default(), Split::Auto, 12_000);
    let parts = &written[1..];
    assert!(parts.len() >= 4 && parts.len() <= 6, "{}", parts.len());
    assert!(parts[0].file.label.starts_with("0h00m00"), "{}", parts[0].file.label);
    assert_eq!(logs[1..].iter().map(|l| l.syscalls.len()).sum::<usize>(), 50_000);
    // --no-split: one file, with a warning in the plan.
    let mut r = reader(&log);
    let run = Survey::of(&mut r).unwrap();
    let win = window::resolve(&run, &WindowRequest::default()).unwrap();
    let p = plan::plan(&run, &win, Path::new("x.json"), ".json", Split::Never, 12_000);
    assert_eq!(p.files.len(), 1);
    assert!(p.warnings[0].contains("without --no-split"), "{:?}", p.warnings);
}
