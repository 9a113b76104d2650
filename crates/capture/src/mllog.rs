//! Training phases while recording: MLLOG lines the command prints, or
//! appends to a log file, become Phase and Mark records on the trace clock.
//! The command's output reaches us through [`crate::relay`].

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_channel::Sender;
use mltrace_log::{ClockAnchor, FrameEncoder, Mark, Phase, Record};
use mltrace_mllog::{self as mllog, MllogEvent, PhaseTracker, TrackedRecord};

/// What a reader thread found.
pub enum MllogMsg {
    /// An event, its time already on the recording's clock (boottime ns).
    Event(u64, MllogEvent),
    /// An event from the command's own channel (the Python module's pipe).
    Module(u64, MllogEvent),
    /// A line marked `:::MLLOG` that does not parse: what was wrong.
    Malformed(String),
    /// An event dated before the recording started (an older run's line).
    Stale,
}

/// Where MLLOG events come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MllogSource {
    /// The command's stdout and stderr.
    #[default]
    Output,
    /// Lines appended to this file during the recording.
    File(PathBuf),
    /// Neither: the command's stdout and stderr are left alone.
    Off,
}

/// Converts MLLOG's Unix milliseconds to the recording's boottime clock.
#[derive(Clone, Copy)]
pub struct ClockMap {
    offset: i128,
    start: u64,
}

impl ClockMap {
    pub fn new(start: &ClockAnchor) -> Self {
        ClockMap { offset: start.realtime_ns as i128 - start.boottime_ns as i128, start: start.boottime_ns }
    }

    fn message(&self, ev: MllogEvent, module: bool) -> MllogMsg {
        let ts = ev.time_ns() as i128 - self.offset;
        // MLLOG times are milliseconds: allow that much before the start.
        if ts + 1_000_000 < self.start as i128 || ts < 0 {
            return MllogMsg::Stale;
        }
        let ts = ts.max(0) as u64;
        if module {
            MllogMsg::Module(ts, ev)
        } else {
            MllogMsg::Event(ts, ev)
        }
    }
}

/// Splits a byte stream into lines and sends the MLLOG ones.
pub(crate) struct LineSplitter {
    pub(crate) buf: Vec<u8>,
    /// A file holds only MLLOG, so bare JSON lines count there; in a
    /// command's output only lines tagged `:::MLLOG` do.
    pub(crate) bare_json: bool,
    /// Lines from the module's channel, paired by their own tracker.
    pub(crate) module: bool,
    pub(crate) clock: ClockMap,
}

/// Longer lines are passed through but not parsed.
const MAX_LINE: usize = 1 << 20;

impl LineSplitter {
    pub(crate) fn feed(&mut self, mut data: &[u8], tx: &Sender<MllogMsg>) {
        while let Some(nl) = data.iter().position(|&b| b == b'\n') {
            if self.buf.len() + nl <= MAX_LINE {
                self.buf.extend_from_slice(&data[..nl]);
                self.line(tx);
            }
            self.buf.clear();
            data = &data[nl + 1..];
        }
        if self.buf.len() + data.len() <= MAX_LINE {
            self.buf.extend_from_slice(data);
        } else {
            self.buf.clear();
            self.buf.push(0); // poisons the rest of this line
        }
    }

    fn line(&mut self, tx: &Sender<MllogMsg>) {
        if !self.bare_json && !contains(&self.buf, b":::MLLOG") {
            return;
        }
        let text = String::from_utf8_lossy(&self.buf);
        let line = text.trim_end_matches('\r');
        for parsed in mllog::parse_all(line) {
            let msg = match parsed {
                Ok(Some(ev)) => self.clock.message(ev, self.module),
                Ok(None) => continue,
                Err(e) => MllogMsg::Malformed(e.to_string()),
            };
            let _ = tx.send(msg);
        }
    }

    pub(crate) fn finish(&mut self, tx: &Sender<MllogMsg>) {
        if !self.buf.is_empty() && self.buf[0] != 0 {
            self.line(tx);
        }
        self.buf.clear();
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Turns MLLOG events into Phase and Mark records (on the consumer thread,
/// which owns the frame being built).
pub struct PhaseRecorder {
    /// Whose a phase is when its metadata names no pid: the command's,
    /// whose output (or log file) carried it; 0 when attached.
    default_pid: u32,
    tracker: PhaseTracker,
    /// The module's events: each call is one event of one process, so
    /// nothing is merged as another rank's copy (window 0), and a phase
    /// repeated within seconds stays two phases.
    module: PhaseTracker,
    out: Vec<TrackedRecord>,
    malformed: u64,
    first_malformed: Option<String>,
    stale: u64,
}

impl Default for PhaseRecorder {
    fn default() -> Self {
        PhaseRecorder {
            default_pid: 0,
            tracker: PhaseTracker::default(),
            module: PhaseTracker::with_window(mllog::RankMode::Merge, 0),
            out: Vec::new(),
            malformed: 0,
            first_malformed: None,
            stale: 0,
        }
    }
}

impl PhaseRecorder {
    pub fn new(default_pid: u32) -> Self {
        PhaseRecorder { default_pid, ..Default::default() }
    }

    pub fn take(&mut self, msg: MllogMsg, enc: &mut FrameEncoder) {
        match msg {
            MllogMsg::Event(ts, ev) => self.tracker.push(ts, &ev, &mut self.out),
            MllogMsg::Module(ts, ev) => self.module.push(ts, &ev, &mut self.out),
            MllogMsg::Malformed(why) => {
                self.malformed += 1;
                self.first_malformed.get_or_insert(why);
            }
            MllogMsg::Stale => self.stale += 1,
        }
        self.emit(enc);
    }

    /// Ends phases still open at `end` (marked unfinished).
    pub fn finish(&mut self, end: u64, enc: &mut FrameEncoder) {
        self.tracker.finish(Some(end), &mut self.out);
        self.module.finish(Some(end), &mut self.out);
        self.emit(enc);
    }

    fn emit(&mut self, enc: &mut FrameEncoder) {
        for r in self.out.drain(..) {
            let rec = match r {
                TrackedRecord::Phase { ts, dur, kind, name, rank, pid, flags } => {
                    let name = enc.intern(name.as_bytes());
                    let pid = pid.unwrap_or(self.default_pid);
                    Record::Phase(Phase { ts, dur, kind, name, rank, pid, flags })
                }
                TrackedRecord::Mark { ts, name, value, rank } => {
                    let (name, value) = (enc.intern(name.as_bytes()), enc.intern(value.as_bytes()));
                    Record::Mark(Mark { ts, name, value, rank, pid: 0 })
                }
            };
            enc.push(&rec);
        }
    }

    /// What went wrong or looks odd, for the trailer and the summary.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.malformed > 0 {
            w.push(format!(
                "{} MLLOG lines did not parse and were left out (first: {})",
                self.malformed,
                self.first_malformed.as_deref().unwrap_or("")
            ));
        }
        if self.stale > 0 {
            w.push(format!("{} MLLOG events dated before the recording started were left out", self.stale));
        }
        let unfinished = self.tracker.stats().unfinished + self.module.stats().unfinished;
        if unfinished > 0 {
            w.push(format!(
                "{unfinished} training phases never stopped: kept up to where they ended, marked unfinished"
            ));
        }
        w
    }
}

/// Follows an MLLOG file like `tail -F`: from its end when recording starts
/// (earlier runs' lines are not this run's), from the top when it is
/// created, truncated or replaced during the recording.
pub struct FileFollower {
    path: PathBuf,
    lines: LineSplitter,
    file: Option<(File, u64)>,
    pos: u64,
}

impl FileFollower {
    pub fn new(path: PathBuf, clock: ClockMap) -> Self {
        let (file, pos) = match File::open(&path) {
            Ok(f) => {
                let (ino, len) = f.metadata().map(|m| (m.ino(), m.len())).unwrap_or((0, 0));
                (Some((f, ino)), len)
            }
            Err(_) => (None, 0),
        };
        FileFollower { path, lines: LineSplitter { buf: Vec::new(), bare_json: true, module: false, clock }, file, pos }
    }

    fn step(&mut self, tx: &Sender<MllogMsg>, buf: &mut [u8]) {
        // Replaced (log rotation, a new run): read the new file from the top.
        if let Ok(ino) = std::fs::metadata(&self.path).map(|m| m.ino()) {
            if Some(ino) != self.file.as_ref().map(|(_, i)| *i) {
                if let Ok(f) = File::open(&self.path) {
                    self.lines.finish(tx);
                    self.file = Some((f, ino));
                    self.pos = 0;
                }
            }
        }
        let Some((f, _)) = self.file.as_mut() else { return };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.pos {
            self.lines.finish(tx);
            self.pos = 0;
        }
        if f.seek(SeekFrom::Start(self.pos)).is_err() {
            return;
        }
        while let Ok(n) = f.read(buf) {
            if n == 0 {
                break;
            }
            self.pos += n as u64;
            self.lines.feed(&buf[..n], tx);
        }
    }

    /// Reads new lines every 100 ms until `stop`, then once more.
    pub fn run(mut self, tx: &Sender<MllogMsg>, stop: &AtomicBool) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let stopping = stop.load(Ordering::Acquire);
            self.step(tx, &mut buf);
            if stopping {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.lines.finish(tx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock() -> ClockMap {
        // Unix 1_700_000_000 s is boottime 1_000 s.
        ClockMap::new(&ClockAnchor {
            boottime_ns: 1_000_000_000_000,
            realtime_ns: 1_700_000_000_000_000_000,
            monotonic_ns: 0,
        })
    }

    fn split(bare_json: bool, chunks: &[&[u8]]) -> Vec<MllogMsg> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut s = LineSplitter { buf: Vec::new(), bare_json, module: false, clock: clock() };
        for c in chunks {
            s.feed(c, &tx);
        }
        s.finish(&tx);
        drop(tx);
        rx.iter().collect()
    }

    #[test]
    fn lines_split_across_reads_and_mapped_to_boottime() {
        let line = br#":::MLLOG {"namespace": "", "time_ms": 1700000001500, "event_type": "INTERVAL_START", "key": "epoch_start", "value": null, "metadata": {"epoch_num": 1}}"#;
        let mut chunks: Vec<&[u8]> = vec![b"progress 10%\r"];
        chunks.push(&line[..20]);
        chunks.push(&line[20..]);
        chunks.push(b"\r\nnot mllog {\"key\": 1}\n:::MLLOG {broken\n");
        let msgs = split(false, &chunks);
        assert_eq!(msgs.len(), 2);
        match &msgs[0] {
            MllogMsg::Event(ts, ev) => {
                assert_eq!(*ts, 1_001_500_000_000);
                assert_eq!(ev.key, "epoch_start");
            }
            _ => panic!("expected an event"),
        }
        assert!(matches!(&msgs[1], MllogMsg::Malformed(m) if m.contains("does not parse")));
    }

    /// Two ranks under torchrun, unbuffered: each wrote its record, then
    /// its newline (seen on an H100 run): two records on one line.
    #[test]
    fn two_records_on_one_line_are_both_taken() {
        let a =
            r#":::MLLOG {"time_ms": 1700000001500, "key": "epoch_start", "value": null, "metadata": {"epoch_num": 1}}"#;
        let b =
            r#":::MLLOG {"time_ms": 1700000001501, "key": "epoch_start", "value": null, "metadata": {"epoch_num": 1}}"#;
        let line = format!("{a}{b}\n\n");
        let msgs = split(false, &[line.as_bytes()]);
        let ts: Vec<u64> = msgs
            .iter()
            .map(|m| match m {
                MllogMsg::Event(ts, _) => *ts,
                _ => panic!("expected events"),
            })
            .collect();
        assert_eq!(ts, [1_001_500_000_000, 1_001_501_000_000]);
    }

    #[test]
    fn bare_json_only_in_files_and_old_events_are_stale() {
        let bare = br#"{"time_ms": 1700000002000, "key": "eval_accuracy", "value": 0.5}"#;
        assert_eq!(split(false, &[bare]).len(), 0);
        assert!(matches!(split(true, &[bare]).as_slice(), [MllogMsg::Event(1_002_000_000_000, _)]));
        let old = br#"{"time_ms": 1600000000000, "key": "eval_accuracy", "value": 0.5}"#;
        assert!(matches!(split(true, &[old]).as_slice(), [MllogMsg::Stale]));
    }

    #[test]
    fn overlong_lines_are_not_parsed() {
        let long = vec![b'x'; MAX_LINE + 10];
        let line = br#":::MLLOG {"time_ms": 1700000002000, "key": "k", "value": 1}"#;
        let msgs = split(false, &[line, &long, b"\n", line, b"\n"]);
        // The first line ran into the long one; only the last parses.
        assert_eq!(msgs.len(), 1);
    }

    #[test]
    fn file_follower_starts_at_the_end_and_restarts_on_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mllog.txt");
        let ev = |ms: u64| format!(":::MLLOG {{\"time_ms\": {ms}, \"key\": \"k\", \"value\": 1}}\n");
        std::fs::write(&path, ev(1_700_000_000_500)).unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut f = FileFollower::new(path.clone(), clock());
        let mut buf = vec![0u8; 16];
        f.step(&tx, &mut buf);
        assert!(rx.try_recv().is_err(), "the line written before the start is skipped");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(ev(1_700_000_001_000).as_bytes())
            .unwrap();
        f.step(&tx, &mut buf);
        assert!(matches!(rx.try_recv(), Ok(MllogMsg::Event(1_001_000_000_000, _))));
        std::fs::write(&path, ev(1_700_000_002_000)).unwrap(); // truncated, rewritten
        f.step(&tx, &mut buf);
        assert!(matches!(rx.try_recv(), Ok(MllogMsg::Event(1_002_000_000_000, _))));
    }

    use std::io::Write;
}
