//! MLPerf logging (`mlperf_logging.mllog`): `:::MLLOG {json}` lines, with or
//! without a rank prefix (`[3] `, mpirun's `[1,3]<stdout>:`), or bare JSON
//! objects one per line. Its own crate because both `mltrace record` (which
//! feeds the traced command's output through [`parse_line`] and a
//! [`PhaseTracker`]) and `mltrace import` read it, and the recorder should
//! not link every importer.
//!
//! `*_start`/`*_stop` pairs become phases (INIT, RUN, EPOCH n, BLOCK n, EVAL,
//! CHECKPOINT...), every other key a mark carrying its value.

use std::collections::VecDeque;

use mltrace_log::{phase, PhaseKind};
use serde_json::{Map, Value};

/// One MLLOG event.
#[derive(Clone, Debug, PartialEq)]
pub struct MllogEvent {
    /// Unix time in milliseconds, as logged.
    pub time_ms: f64,
    /// Exact nanoseconds when `time_ms` is an integer (the usual case).
    time_ns: Option<i64>,
    pub key: String,
    /// `INTERVAL_START`, `INTERVAL_END`, `POINT_IN_TIME`, when given.
    pub event_type: Option<String>,
    pub value: Value,
    pub metadata: Map<String, Value>,
    pub namespace: String,
    /// From the line's `[rank]` prefix, or a `rank` in the metadata.
    pub rank: Option<i32>,
    /// The process that logged it, when the metadata says (`"pid"`).
    pub pid: Option<u32>,
}

impl MllogEvent {
    /// The event's time as Unix-epoch nanoseconds.
    pub fn time_ns(&self) -> i64 {
        self.time_ns.unwrap_or((self.time_ms * 1e6).round() as i64)
    }

    /// The value as JSON text (`0.903`, `"sgd"`, `[128, 128]`, `null`).
    pub fn value_text(&self) -> String {
        self.value.to_string()
    }
}

/// Why a line that looks like MLLOG could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MllogError {
    #[error("MLLOG JSON does not parse: {0}")]
    Json(String),
    #[error("MLLOG JSON has no {0}")]
    Missing(&'static str),
}

const TAG: &str = ":::MLLOG";

/// The event on `line`, if it is an MLLOG line.
pub fn parse_line(line: &str) -> Option<MllogEvent> {
    parse(line).ok().flatten()
}

/// Every MLLOG record of a line: usually one, but processes that share
/// an output (ranks under torchrun) and write a record and its newline
/// apart (unbuffered Python's `print`) leave several on one line,
/// `:::MLLOG {...}:::MLLOG {...}`.
pub fn parse_all(line: &str) -> Vec<Result<Option<MllogEvent>, MllogError>> {
    let whole = parse(line);
    let tags: Vec<usize> = line.match_indices(TAG).map(|(i, _)| i).collect();
    if whole.is_ok() || tags.len() < 2 {
        return vec![whole];
    }
    // The text before the first tag (a rank label) stays with the first.
    let mut cuts = tags;
    cuts[0] = 0;
    cuts.push(line.len());
    cuts.windows(2).map(|w| parse(&line[w[0]..w[1]])).collect()
}

/// Like [`parse_line`], but tells a broken MLLOG line (`Err`) from a line
/// that is not MLLOG at all (`Ok(None)`).
pub fn parse(line: &str) -> Result<Option<MllogEvent>, MllogError> {
    let (prefix, json) = match line.find(TAG) {
        Some(i) => (&line[..i], line[i + TAG.len()..].trim()),
        None => {
            let t = line.trim();
            if !t.starts_with('{') {
                return Ok(None);
            }
            ("", t)
        }
    };
    let v: Value = serde_json::from_str(json).map_err(|e| MllogError::Json(e.to_string()))?;
    let Value::Object(mut o) = v else { return Err(MllogError::Json("not a JSON object".into())) };
    let key = match o.remove("key") {
        Some(Value::String(k)) => k,
        _ => return Err(MllogError::Missing("\"key\"")),
    };
    let (time_ms, time_ns) = match o.get("time_ms") {
        Some(Value::Number(n)) => match n.as_i64() {
            Some(ms) => (ms as f64, ms.checked_mul(1_000_000)),
            None => (n.as_f64().ok_or(MllogError::Missing("numeric \"time_ms\""))?, None),
        },
        _ => return Err(MllogError::Missing("\"time_ms\"")),
    };
    let metadata = match o.remove("metadata") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let rank = prefix_rank(prefix).or_else(|| metadata.get("rank").and_then(Value::as_i64).map(|r| r as i32));
    let pid = metadata.get("pid").and_then(Value::as_u64).and_then(|p| u32::try_from(p).ok()).filter(|&p| p > 0);
    Ok(Some(MllogEvent {
        time_ms,
        time_ns,
        key,
        event_type: o.get("event_type").and_then(Value::as_str).map(str::to_string),
        value: o.remove("value").unwrap_or(Value::Null),
        metadata,
        namespace: o.get("namespace").and_then(Value::as_str).unwrap_or("").to_string(),
        rank,
        pid,
    }))
}

/// `[3]` -> 3; mpirun's `[1,3]<stdout>:` (job, rank) -> 3.
fn prefix_rank(prefix: &str) -> Option<i32> {
    let a = prefix.find('[')?;
    let b = a + prefix[a..].find(']')?;
    let inner = &prefix[a + 1..b];
    inner.rsplit(',').next()?.trim().parse().ok()
}

/// What to do when several ranks log the same event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RankMode {
    /// One phase or mark for what the ranks logged together (rank -1 when
    /// more than one logged it).
    #[default]
    Merge,
    /// One per rank (events with no rank are merged among themselves).
    PerRank,
}

/// A phase or a mark, ready to become a log record.
#[derive(Clone, Debug, PartialEq)]
pub enum TrackedRecord {
    /// `pid`: the process that logged it (its first event that says), if
    /// any. Marks stay the run's (pid 0): a mark with a pid is a process's own.
    Phase {
        ts: u64,
        dur: u64,
        kind: PhaseKind,
        name: String,
        rank: i32,
        pid: Option<u32>,
        flags: u8,
    },
    Mark {
        ts: u64,
        name: String,
        value: String,
        rank: i32,
    },
}

impl TrackedRecord {
    pub fn ts(&self) -> u64 {
        match self {
            TrackedRecord::Phase { ts, .. } | TrackedRecord::Mark { ts, .. } => *ts,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrackerStats {
    pub events: u64,
    pub phases: u64,
    pub marks: u64,
    /// Events dropped as the same event logged again (by another rank).
    pub duplicates: u64,
    /// `*_stop` with no open `*_start` (kept as marks).
    pub unmatched_stops: u64,
    /// Phases that never stopped: ended by a restart or by the end of the log.
    pub unfinished: u64,
    /// `init_start` while phases of an earlier run were still open.
    pub restarts: u64,
}

/// The ranks that logged one event.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ranks {
    Unknown,
    One(i32),
    Many,
}

impl Ranks {
    fn of(r: Option<i32>) -> Ranks {
        r.map_or(Ranks::Unknown, Ranks::One)
    }

    fn add(&mut self, r: Option<i32>) {
        *self = match (*self, r) {
            (Ranks::One(a), Some(b)) if a == b => Ranks::One(a),
            (Ranks::Unknown, None) => Ranks::Unknown,
            _ => Ranks::Many,
        };
    }

    fn rank(self) -> i32 {
        match self {
            Ranks::One(r) => r,
            _ => -1,
        }
    }
}

/// Which phase a start or stop is about.
#[derive(Clone, Debug, PartialEq)]
struct PhaseId {
    stem: String,
    number: Option<i64>,
    rank_key: Option<i32>,
}

#[derive(Clone, Debug)]
struct OpenPhase {
    id: PhaseId,
    start: u64,
    /// The first start seen: duplicates are within the window of it.
    first: u64,
    count: Option<i64>,
    ranks: Ranks,
    pid: Option<u32>,
}

#[derive(Clone, Debug)]
struct ClosedPhase {
    open: OpenPhase,
    end: u64,
    flags: u8,
}

#[derive(Clone, Debug)]
struct PendingMark {
    ts: u64,
    ident: String,
    rank_key: Option<i32>,
    name: String,
    value: String,
    ranks: Ranks,
}

/// Pairs `*_start`/`*_stop` events into phases and turns the other events
/// into marks, merging what several ranks logged.
///
/// Duplicates: the same start, stop or point event (same key, same epoch or
/// value) seen again within `window_ns` of the first is the same event
/// logged by another rank: merged (the phase spans the earliest start to the
/// latest stop), never doubled. A start repeated later while the first is
/// still open is a restart: the first is ended there, marked unfinished; an
/// `init_start` likewise ends every phase still open (a new run began).
///
/// Records come out once no duplicate can still change them (one window
/// after their end), so [`PhaseTracker::finish`] must be called at the end.
#[derive(Clone, Debug)]
pub struct PhaseTracker {
    mode: RankMode,
    window: u64,
    open: Vec<OpenPhase>,
    closed: VecDeque<ClosedPhase>,
    marks: VecDeque<PendingMark>,
    last: u64,
    stats: TrackerStats,
}

/// Ranks of one job log the same event within milliseconds to seconds.
pub const DEFAULT_WINDOW_NS: u64 = 5_000_000_000;

impl Default for PhaseTracker {
    fn default() -> Self {
        PhaseTracker::new(RankMode::Merge)
    }
}

impl PhaseTracker {
    pub fn new(mode: RankMode) -> Self {
        Self::with_window(mode, DEFAULT_WINDOW_NS)
    }

    pub fn with_window(mode: RankMode, window_ns: u64) -> Self {
        PhaseTracker {
            mode,
            window: window_ns,
            open: Vec::new(),
            closed: VecDeque::new(),
            marks: VecDeque::new(),
            last: 0,
            stats: TrackerStats::default(),
        }
    }

    pub fn stats(&self) -> &TrackerStats {
        &self.stats
    }

    /// Takes one event at `ts` (on the caller's timeline: Unix ns for
    /// imports, the recording's clock for `record`); appends to `out` the
    /// records that are final.
    pub fn push(&mut self, ts: u64, ev: &MllogEvent, out: &mut Vec<TrackedRecord>) {
        self.stats.events += 1;
        self.last = self.last.max(ts);
        let rank_key = match self.mode {
            RankMode::Merge => None,
            RankMode::PerRank => ev.rank,
        };
        let start = ev
            .key
            .strip_suffix("_start")
            .or_else(|| (ev.event_type.as_deref() == Some("INTERVAL_START")).then_some(ev.key.as_str()));
        let stop = ev
            .key
            .strip_suffix("_stop")
            .or_else(|| (ev.event_type.as_deref() == Some("INTERVAL_END")).then_some(ev.key.as_str()));
        if let Some(stem) = start {
            let id = PhaseId { stem: stem.to_string(), number: number(stem, ev), rank_key };
            self.start(ts, id, ev);
        } else if let Some(stem) = stop {
            let id = PhaseId { stem: stem.to_string(), number: number(stem, ev), rank_key };
            self.stop(ts, id, ev);
        } else {
            self.point(ts, ev.key.clone(), ev, rank_key);
        }
        self.flush(false, out);
    }

    /// Ends the phases still open at `end` (or the last event's time) as
    /// unfinished and emits everything held back.
    pub fn finish(&mut self, end: Option<u64>, out: &mut Vec<TrackedRecord>) {
        let end = end.unwrap_or(0).max(self.last);
        for o in std::mem::take(&mut self.open) {
            self.closed.push_back(ClosedPhase { open: o, end, flags: phase::UNFINISHED });
        }
        self.flush(true, out);
    }

    fn start(&mut self, ts: u64, id: PhaseId, ev: &MllogEvent) {
        if let Some(o) = self.open.iter_mut().find(|o| o.id == id) {
            if ts.abs_diff(o.first) <= self.window {
                o.start = o.start.min(ts);
                o.ranks.add(ev.rank);
                o.pid = o.pid.or(ev.pid);
                self.stats.duplicates += 1;
                return;
            }
        }
        if let Some(c) =
            self.closed.iter_mut().rev().find(|c| c.open.id == id && ts.abs_diff(c.open.first) <= self.window)
        {
            // A late rank starting a phase the others already ended.
            c.open.start = c.open.start.min(ts);
            c.open.ranks.add(ev.rank);
            c.open.pid = c.open.pid.or(ev.pid);
            self.stats.duplicates += 1;
            return;
        }
        let restart = id.stem == "init";
        let before = self.open.len();
        let mut i = 0;
        while i < self.open.len() {
            let o = &self.open[i];
            if o.id == id || (restart && o.id.rank_key == id.rank_key) {
                let o = self.open.remove(i);
                self.closed.push_back(ClosedPhase { open: o, end: ts, flags: phase::UNFINISHED });
            } else {
                i += 1;
            }
        }
        if restart && self.open.len() < before {
            self.stats.restarts += 1;
        }
        let count = ev.metadata.get("epoch_count").and_then(Value::as_i64);
        self.open.push(OpenPhase { id, start: ts, first: ts, count, ranks: Ranks::of(ev.rank), pid: ev.pid });
    }

    fn stop(&mut self, ts: u64, id: PhaseId, ev: &MllogEvent) {
        let exact = self.open.iter().rposition(|o| o.id == id);
        // A stop that names no epoch (or a start that did not) still ends
        // the latest open phase of its kind.
        let loose = || {
            self.open.iter().rposition(|o| {
                o.id.stem == id.stem && o.id.rank_key == id.rank_key && (o.id.number.is_none() || id.number.is_none())
            })
        };
        if let Some(i) = exact.or_else(loose) {
            let mut o = self.open.remove(i);
            o.ranks.add(ev.rank);
            o.pid = o.pid.or(ev.pid);
            self.closed.push_back(ClosedPhase { open: o, end: ts, flags: 0 });
        } else if let Some(c) =
            self.closed.iter_mut().rev().find(|c| c.open.id == id && c.flags == 0 && ts.abs_diff(c.end) <= self.window)
        {
            c.end = c.end.max(ts);
            c.open.ranks.add(ev.rank);
            c.open.pid = c.open.pid.or(ev.pid);
            self.stats.duplicates += 1;
            return;
        } else {
            self.stats.unmatched_stops += 1;
            self.point(ts, ev.key.clone(), ev, id.rank_key);
            return;
        }
        // How the run ended ("success", "aborted") is worth a mark.
        if let Some(status) = ev.metadata.get("status") {
            let mut m = Map::new();
            m.insert("status".into(), status.clone());
            let mut e = ev.clone();
            e.value = Value::Object(m);
            self.point(ts, ev.key.clone(), &e, id.rank_key);
        }
    }

    fn point(&mut self, ts: u64, name: String, ev: &MllogEvent, rank_key: Option<i32>) {
        let value = ev.value_text();
        let mut md = ev.metadata.clone();
        md.remove("file");
        md.remove("lineno");
        md.remove("rank");
        // Each rank's process logs it under its own pid: still one event.
        md.remove("pid");
        let ident = format!("{name}\0{value}\0{}", Value::Object(md));
        if let Some(m) = self
            .marks
            .iter_mut()
            .rev()
            .find(|m| m.ident == ident && m.rank_key == rank_key && ts.abs_diff(m.ts) <= self.window)
        {
            m.ts = m.ts.min(ts);
            m.ranks.add(ev.rank);
            self.stats.duplicates += 1;
            return;
        }
        self.marks.push_back(PendingMark { ts, ident, rank_key, name, value, ranks: Ranks::of(ev.rank) });
    }

    /// Emits the phases and marks no later event can merge into.
    fn flush(&mut self, all: bool, out: &mut Vec<TrackedRecord>) {
        let horizon = self.last.saturating_sub(self.window);
        let mut keep = VecDeque::new();
        while let Some(c) = self.closed.pop_front() {
            if all || c.end < horizon {
                let (kind, name) = phase_name(&c.open.id.stem, c.open.id.number, c.open.count);
                if c.flags & phase::UNFINISHED != 0 {
                    self.stats.unfinished += 1;
                }
                self.stats.phases += 1;
                out.push(TrackedRecord::Phase {
                    ts: c.open.start,
                    dur: c.end.saturating_sub(c.open.start),
                    kind,
                    name,
                    rank: c.open.ranks.rank(),
                    pid: c.open.pid,
                    flags: c.flags,
                });
            } else {
                keep.push_back(c);
            }
        }
        self.closed = keep;
        while let Some(m) = self.marks.front() {
            if !all && m.ts >= horizon {
                break;
            }
            let m = self.marks.pop_front().unwrap();
            self.stats.marks += 1;
            out.push(TrackedRecord::Mark { ts: m.ts, name: m.name, value: m.value, rank: m.ranks.rank() });
        }
    }
}

/// The epoch a phase is about: `block` is numbered by its first epoch.
fn number(stem: &str, ev: &MllogEvent) -> Option<i64> {
    let md = |k: &str| ev.metadata.get(k).and_then(Value::as_i64);
    let n = if stem == "block" { md("first_epoch_num") } else { md("epoch_num") };
    n.or_else(|| match stem {
        "epoch" | "block" | "eval" | "checkpoint" => ev.value.as_i64(),
        _ => None,
    })
}

fn phase_name(stem: &str, n: Option<i64>, count: Option<i64>) -> (PhaseKind, String) {
    let at_epoch = |base: &str| match n {
        Some(n) => format!("{base} (epoch {n})"),
        None => base.to_string(),
    };
    match stem {
        "init" => (PhaseKind::Init, "INIT".into()),
        "run" => (PhaseKind::Run, "RUN".into()),
        "epoch" => (PhaseKind::Epoch, n.map_or("EPOCH".into(), |n| format!("EPOCH {n}"))),
        "block" => (
            PhaseKind::Block,
            match (n, count) {
                (Some(n), Some(c)) if c > 1 => format!("BLOCK {n}-{}", n + c - 1),
                (Some(n), _) => format!("BLOCK {n}"),
                (None, _) => "BLOCK".into(),
            },
        ),
        "eval" => (PhaseKind::Eval, at_epoch("EVAL")),
        "checkpoint" => (PhaseKind::Checkpoint, at_epoch("CHECKPOINT")),
        s => (PhaseKind::Other, n.map_or(s.to_uppercase(), |n| format!("{} {n}", s.to_uppercase()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(line: &str) -> MllogEvent {
        parse_line(line).unwrap_or_else(|| panic!("not MLLOG: {line}"))
    }

    fn line(t: u64, key: &str, md: &str) -> String {
        format!(
            r#":::MLLOG {{"namespace": "", "time_ms": {t}, "event_type": "X", "key": "{key}", "value": null, "metadata": {{{md}}}}}"#
        )
    }

    fn run(mode: RankMode, lines: &[String]) -> (Vec<TrackedRecord>, TrackerStats) {
        let mut t = PhaseTracker::new(mode);
        let mut out = Vec::new();
        for l in lines {
            let e = ev(l);
            t.push(e.time_ns() as u64, &e, &mut out);
        }
        t.finish(None, &mut out);
        (out, t.stats().clone())
    }

    fn phases(out: &[TrackedRecord]) -> Vec<(String, u64, u64, i32, u8)> {
        let mut v: Vec<_> = out
            .iter()
            .filter_map(|r| match r {
                TrackedRecord::Phase { ts, dur, name, rank, flags, .. } => {
                    Some((name.clone(), *ts / 1_000_000, *dur / 1_000_000, *rank, *flags))
                }
                _ => None,
            })
            .collect();
        v.sort_by_key(|p| p.1);
        v
    }

    #[test]
    fn line_shapes() {
        let e = ev(
            r#":::MLLOG {"namespace": "", "time_ms": 1644092760147, "event_type": "INTERVAL_START", "key": "init_start", "value": null, "metadata": {"file": "m.py", "lineno": 28}}"#,
        );
        assert_eq!((e.key.as_str(), e.time_ns(), e.rank), ("init_start", 1_644_092_760_147_000_000, None));
        let e =
            ev(r#"[3] :::MLLOG {"time_ms": 5.5, "key": "eval_accuracy", "value": 0.75, "metadata": {"epoch_num": 2}}"#);
        assert_eq!((e.rank, e.time_ns(), e.value_text().as_str()), (Some(3), 5_500_000, "0.75"));
        let e = ev(r#"[1,7]<stdout>::::MLLOG {"time_ms": 1, "key": "seed", "value": 42}"#);
        assert_eq!(e.rank, Some(7));
        let e = ev(r#"{"time_ms": 2, "key": "opt_name", "value": "sgd", "metadata": {"rank": 4}}"#);
        assert_eq!((e.rank, e.value_text().as_str()), (Some(4), "\"sgd\""));
        assert_eq!(parse("epoch 3 loss 0.1").unwrap(), None);
        // Two ranks' records on one line, the first with its rank label.
        let a = r#"{"time_ms": 1000, "key": "epoch_start", "value": null, "metadata": {"epoch_num": 1}}"#;
        let b = r#"{"time_ms": 1001, "key": "epoch_start", "value": null, "metadata": {"epoch_num": 1}}"#;
        let both = parse_all(&format!("[1,3]<stdout>::::MLLOG {a}:::MLLOG {b}"));
        let ranks: Vec<_> = both.iter().map(|r| r.as_ref().unwrap().as_ref().unwrap().rank).collect();
        assert_eq!(ranks, [Some(3), None]);
        assert_eq!(parse_all(&format!(":::MLLOG {a}")).len(), 1);
        assert!(parse_all(":::MLLOG {broken:::MLLOG {\"time_ms\": 1}").iter().all(|r| r.is_err()));
        assert!(matches!(parse(":::MLLOG {\"time_ms\": 1"), Err(MllogError::Json(_))));
        assert_eq!(parse(":::MLLOG {\"time_ms\": 1}"), Err(MllogError::Missing("\"key\"")));
        assert_eq!(parse("{\"key\": \"a\"}"), Err(MllogError::Missing("\"time_ms\"")));
    }

    #[test]
    fn ranks_merged_not_doubled() {
        let mut l: Vec<String> = (0..8).map(|r| format!("[{r}] {}", line(1000 + r, "init_start", ""))).collect();
        l.push(format!("[0] {}", line(2000, "init_stop", "")));
        l.push(format!("[1] {}", line(2003, "init_stop", "")));
        l.push(format!("[0] {}", line(2100, "epoch_start", "\"epoch_num\": 1")));
        l.push(format!("[0] {}", line(3100, "epoch_stop", "\"epoch_num\": 1")));
        l.push(format!("[0] {}", line(3200, "eval_accuracy", "\"epoch_num\": 1").replace("null", "0.5")));
        l.push(format!("[1] {}", line(3201, "eval_accuracy", "\"epoch_num\": 1").replace("null", "0.5")));
        let (out, st) = run(RankMode::Merge, &l);
        assert_eq!(
            phases(&out),
            vec![("INIT".into(), 1000, 1003, -1, 0), ("EPOCH 1".into(), 2100, 1000, 0, 0)],
            "{out:?}"
        );
        let marks: Vec<_> = out.iter().filter(|r| matches!(r, TrackedRecord::Mark { .. })).collect();
        assert_eq!(marks.len(), 1);
        assert_eq!(st.duplicates, 7 + 1 + 1);

        let (out, _) = run(RankMode::PerRank, &l);
        let p = phases(&out);
        assert_eq!(p.iter().filter(|p| p.0 == "INIT").count(), 8);
        assert_eq!(p.iter().filter(|p| p.0 == "INIT" && p.4 & phase::UNFINISHED != 0).count(), 6);
    }

    #[test]
    fn a_phase_keeps_the_pid_its_metadata_names() {
        let l = vec![
            line(1000, "init_start", ""),
            line(1100, "init_stop", ""),
            // Two ranks' processes log the same epoch and the same eval.
            format!("[0] {}", line(2000, "epoch_start", "\"epoch_num\": 1, \"pid\": 4001")),
            format!("[1] {}", line(2001, "epoch_start", "\"epoch_num\": 1, \"pid\": 4002")),
            format!("[0] {}", line(3000, "epoch_stop", "\"epoch_num\": 1, \"pid\": 4001")),
            format!("[0] {}", line(3100, "eval_accuracy", "\"pid\": 4001").replace("null", "0.5")),
            format!("[1] {}", line(3101, "eval_accuracy", "\"pid\": 4002").replace("null", "0.5")),
        ];
        let (out, _) = run(RankMode::Merge, &l);
        let pids: Vec<(String, Option<u32>)> = out
            .iter()
            .filter_map(|r| match r {
                TrackedRecord::Phase { name, pid, .. } => Some((name.clone(), *pid)),
                _ => None,
            })
            .collect();
        assert_eq!(pids, [("INIT".to_string(), None), ("EPOCH 1".to_string(), Some(4001))]);
        let marks = out.iter().filter(|r| matches!(r, TrackedRecord::Mark { .. })).count();
        assert_eq!(marks, 1, "one eval, whichever process logged it: {out:?}");
    }

    #[test]
    fn restarts_and_unfinished() {
        let l = vec![
            line(0, "init_start", ""),
            line(10, "init_stop", ""),
            line(20, "run_start", ""),
            line(30, "block_start", "\"first_epoch_num\": 1, \"epoch_count\": 2"),
            line(30, "epoch_start", "\"epoch_num\": 1"),
            // The job died and was started again.
            line(100_000, "init_start", ""),
            line(100_010, "init_stop", ""),
            line(100_020, "run_start", ""),
            line(100_030, "epoch_start", "\"epoch_num\": 1"),
            line(101_030, "epoch_stop", "\"epoch_num\": 1"),
            line(101_040, "eval_start", "\"epoch_num\": 1"),
            line(101_050, "eval_stop", "\"epoch_num\": 1"),
            line(101_060, "checkpoint_start", ""),
            line(101_070, "epoch_start", "\"epoch_num\": 2"),
            line(101_080, "checkpoint_stop", ""),
            line(101_100, "run_stop", "\"status\": \"aborted\""),
            line(101_200, "epoch_stop", "\"epoch_num\": 7"),
        ];
        let (out, st) = run(RankMode::Merge, &l);
        let u = phase::UNFINISHED;
        assert_eq!(
            phases(&out),
            vec![
                ("INIT".into(), 0, 10, -1, 0),
                ("RUN".into(), 20, 99_980, -1, u),
                ("BLOCK 1-2".into(), 30, 99_970, -1, u),
                ("EPOCH 1".into(), 30, 99_970, -1, u),
                ("INIT".into(), 100_000, 10, -1, 0),
                ("RUN".into(), 100_020, 1080, -1, 0),
                ("EPOCH 1".into(), 100_030, 1000, -1, 0),
                ("EVAL (epoch 1)".into(), 101_040, 10, -1, 0),
                ("CHECKPOINT".into(), 101_060, 20, -1, 0),
                ("EPOCH 2".into(), 101_070, 130, -1, u),
            ]
        );
        assert_eq!((st.unmatched_stops, st.unfinished), (1, 4));
        let marks: Vec<_> = out
            .iter()
            .filter_map(|r| match r {
                TrackedRecord::Mark { name, value, .. } => Some(format!("{name}={value}")),
                _ => None,
            })
            .collect();
        assert_eq!(marks, vec!["run_stop={\"status\":\"aborted\"}", "epoch_stop=null"]);
    }
}
