//! The processed files of the DL I/O study's plotting scripts (the
//! `trace_visuals` experiment directory): bpftrace outputs split by pid
//! with ISO times, the CPU/GPU CSVs, the MLLOG timeline, `pids.json`.
//!
//! Their ISO times are not UTC whatever the scripts say: they were made by
//! adding a fixed offset to local time (see [`crate::plan`] for how the
//! shift is found). Every line is read as UTC, then `shift` is added.

pub mod dir;

use std::collections::VecDeque;
use std::rc::Rc;

use chrono::NaiveDateTime;
use mltrace_log::{blk, BlockOp, CounterUnit, IoOp, OpenOp, PhaseKind, RET_UNKNOWN};

use crate::error::ImportError;
use crate::item::Item;
use crate::lines::{FileReport, Lines};
use crate::{Format, Source};

/// An ISO time as the scripts print it (`2022-08-28T03:24:38.862885533`,
/// to the second in the CSVs, to the ms in timeline.csv), read as UTC.
pub fn parse_iso(s: &str) -> Option<i64> {
    let t = NaiveDateTime::parse_from_str(s.trim(), "%Y-%m-%dT%H:%M:%S%.f").ok()?;
    t.and_utc().timestamp_nanos_opt()
}

fn is_int(s: &str) -> bool {
    s.parse::<i64>().is_ok()
}

/// The format of one line of a per-pid file (`read_PID`...): they differ
/// in their third and fourth columns.
fn split_kind(line: &str) -> Option<Format> {
    let w: Vec<&str> = line.split_whitespace().collect();
    if w.len() < 4 || parse_iso(w[0]).is_none() || w[1].parse::<u32>().is_err() {
        return None;
    }
    Some(if w.len() == 5 && matches!(w[2], "R" | "W") && is_int(w[3]) && is_int(w[4]) {
        Format::VisBio
    } else if w[2].starts_with("0x") && is_int(w[3]) {
        Format::VisWrite
    } else if is_int(w[2]) && is_int(w[3]) {
        Format::VisRead
    } else if is_int(w[2]) {
        Format::VisOpen
    } else {
        return None;
    })
}

/// I/O kinds in `st_end_data` and `comb` files (theirs, not phases).
const IO_EVENTS: [&str; 5] = ["OPENAT", "READ", "WRITE", "BIOR", "BIOW"];

fn csv_kind(line: &str) -> Option<Format> {
    let f: Vec<&str> = line.split(',').map(str::trim).collect();
    match f.as_slice() {
        ["timestamp", rest @ ..] if rest.first().is_some_and(|c| c.starts_with('%')) => Some(Format::CpuCsv),
        ["timestamp", "sm", ..] => Some(Format::GpuCsv),
        [a, b, e] if parse_iso(a).is_some() && parse_iso(b).is_some() => {
            Some(if IO_EVENTS.contains(e) { Format::VisStEnd } else { Format::Timeline })
        }
        [a, e, l] if parse_iso(a).is_some() && IO_EVENTS.contains(e) && is_int(l) => Some(Format::VisComb),
        _ => None,
    }
}

/// `{"2036324": "master", ...}`: pid to role.
pub fn parse_pids_json(text: &str) -> Option<Vec<(u32, String)>> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut out = Vec::new();
    for (k, r) in v.as_object()? {
        out.push((k.trim().parse().ok()?, r.as_str()?.to_string()));
    }
    out.sort();
    Some(out)
}

/// Recognises a processed file from its first lines; `None` if it is none.
pub fn detect(head: &[String]) -> Option<Format> {
    let text = head.join("\n");
    if text.trim_start().starts_with('{') && parse_pids_json(&text).is_some_and(|p| !p.is_empty()) {
        return Some(Format::Pids);
    }
    let lines: Vec<&str> = head.iter().map(|l| l.trim()).filter(|l| !l.is_empty()).take(50).collect();
    let first = *lines.first()?;
    if let Some(f) = csv_kind(first) {
        return Some(f);
    }
    // The most common kind among the lines, if most lines have one.
    let kinds: Vec<Format> = lines.iter().filter_map(|l| split_kind(l)).collect();
    let best = [Format::VisBio, Format::VisWrite, Format::VisRead, Format::VisOpen]
        .into_iter()
        .max_by_key(|f| kinds.iter().filter(|k| *k == f).count())?;
    let n = kinds.iter().filter(|k| **k == best).count();
    if n > 0 && n * 2 >= lines.len() {
        return Some(best);
    }
    if lines.iter().all(|l| l.parse::<u32>().is_ok()) {
        return Some(Format::Pids);
    }
    None
}

/// Column names and units of a CSV header, for counters.
fn csv_columns(format: Format, header: &str) -> Vec<(Rc<str>, CounterUnit, f64)> {
    header
        .split(',')
        .skip(1)
        .map(|c| {
            let c = c.trim();
            match (format, c) {
                (Format::GpuCsv, "fb") => (Rc::from("framebuffer"), CounterUnit::Bytes, 1048576.0),
                (Format::GpuCsv, c) => (Rc::from(crate::nvsmi::counter_name(c, true)), CounterUnit::Percent, 1.0),
                (_, c) => (Rc::from(c.trim_start_matches('%')), CounterUnit::Percent, 1.0),
            }
        })
        .collect()
}

/// One processed file as records.
pub struct VisSource {
    lines: Lines,
    buf: String,
    format: Format,
    /// Added to the ISO times read as UTC.
    shift: i64,
    report: FileReport,
    queue: VecDeque<Item>,
    columns: Vec<(Rc<str>, CounterUnit, f64)>,
    group: Rc<str>,
    empty: Rc<str>,
    epochs: u64,
}

impl VisSource {
    pub fn new(lines: Lines, format: Format, shift: i64, report: FileReport) -> Self {
        let group = Rc::from(if format == Format::GpuCsv { "GPU (mean of all)" } else { "CPU" });
        VisSource {
            lines,
            buf: String::new(),
            format,
            shift,
            report,
            queue: VecDeque::new(),
            columns: Vec::new(),
            group,
            empty: Rc::from(""),
            epochs: 0,
        }
    }

    fn time(&self, s: &str) -> Result<u64, String> {
        let t = parse_iso(s).ok_or_else(|| format!("expected an ISO time, found '{s}'"))?;
        u64::try_from(t + self.shift).map_err(|_| format!("'{s}' is before 1970"))
    }

    fn line(&mut self, line: &str) -> Result<(), String> {
        match self.format {
            Format::CpuCsv | Format::GpuCsv => self.csv_row(line),
            Format::Timeline => self.phase(line),
            _ => self.io(line),
        }
    }

    fn csv_row(&mut self, line: &str) -> Result<(), String> {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f[0] == "timestamp" {
            self.columns = csv_columns(self.format, line);
            self.report.skipped += 1;
            return Ok(());
        }
        if self.columns.is_empty() {
            return Err("a row before the 'timestamp,...' header".into());
        }
        if f.len() != self.columns.len() + 1 {
            return Err(format!("{} columns, the header has {}", f.len(), self.columns.len() + 1));
        }
        let ts = self.time(f[0])?;
        let values: Vec<f64> = f[1..]
            .iter()
            .map(|v| v.parse::<f64>().map_err(|_| format!("expected a number, found '{v}'")))
            .collect::<Result<_, _>>()?;
        for ((name, unit, factor), v) in self.columns.iter().zip(values) {
            let (group, name, unit) = (self.group.clone(), name.clone(), *unit);
            self.queue.push_back(Item::Counter { ts, group, name, unit, pid: 0, value: v * factor });
        }
        Ok(())
    }

    fn phase(&mut self, line: &str) -> Result<(), String> {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let [a, b, ev] = f.as_slice() else { return Err("expected start,end,event".into()) };
        let (ts, end) = (self.time(a)?, self.time(b)?);
        if end < ts {
            return Err("ends before it starts".into());
        }
        let (kind, name) = match ev.to_ascii_uppercase().as_str() {
            "INIT" => (PhaseKind::Init, "INIT".to_string()),
            "RUN" => (PhaseKind::Run, "RUN".into()),
            "EPOCH" => {
                self.epochs += 1;
                (PhaseKind::Epoch, format!("EPOCH {}", self.epochs))
            }
            // The scripts renamed BERT's blocks TRAINING.
            "BLOCK" | "TRAINING" => (PhaseKind::Block, ev.to_string()),
            "EVAL" if self.epochs > 0 => (PhaseKind::Eval, format!("EVAL (epoch {})", self.epochs)),
            "EVAL" => (PhaseKind::Eval, "EVAL".into()),
            "CHECKPOINT" => (PhaseKind::Checkpoint, "CHECKPOINT".into()),
            other => (PhaseKind::Other, other.to_string()),
        };
        self.queue.push_back(Item::Phase { ts, dur: end - ts, kind, name, rank: -1, pid: 0, flags: 0 });
        Ok(())
    }

    /// A per-pid line: printed when the call returned, so it started
    /// `lat` earlier.
    fn io(&mut self, line: &str) -> Result<(), String> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let int = |i: usize, what: &str| -> Result<i64, String> {
            let s = w.get(i).ok_or_else(|| format!("no {what} column"))?;
            s.parse::<i64>().map_err(|_| format!("expected {what}, found '{s}'"))
        };
        let end = self.time(w[0])?;
        let pid = u32::try_from(int(1, "a pid")?).map_err(|_| "pid out of range".to_string())?;
        let (lat_col, min_cols) = match self.format {
            Format::VisOpen => (2, 4),
            Format::VisBio => (4, 5),
            _ => (3, 4),
        };
        if w.len() < min_cols {
            return Err(format!("{} columns, expected at least {min_cols}", w.len()));
        }
        let lat = u64::try_from(int(lat_col, "a latency (ns)")?).map_err(|_| "negative latency".to_string())?;
        let ts = end.saturating_sub(lat);
        let rest = |i: usize| w.get(i..).map(|r| r.join(" ")).unwrap_or_default();
        let item = match self.format {
            Format::VisRead | Format::VisWrite => {
                let write = self.format == Format::VisWrite;
                // read_PID keeps the bytes returned; write_PID the buffer address only.
                let ret = if write { RET_UNKNOWN } else { int(2, "bytes returned")? };
                let op = if write { IoOp::Write } else { IoOp::Read };
                let path = rest(4);
                Item::Io { ts, dur: lat, pid, tid: pid, op, fd: -1, path, offset: None, requested: 0, ret }
            }
            Format::VisOpen => {
                let path = full_path(w[3], w.get(4).copied());
                let kind =
                    if path.is_empty() { mltrace_log::FileKind::Unknown } else { mltrace_log::FileKind::Regular };
                Item::Open {
                    ts,
                    dur: lat,
                    pid,
                    tid: pid,
                    op: OpenOp::Openat,
                    path,
                    flags: 0,
                    mode: 0,
                    ret: RET_UNKNOWN,
                    kind,
                }
            }
            _ => Item::Block {
                ts,
                queue: 0,
                device: lat,
                pid,
                tid: pid,
                comm: self.empty.clone(),
                disk: self.empty.clone(),
                sector: 0,
                bytes: u64::try_from(int(3, "bytes")?).map_err(|_| "negative size".to_string())?,
                op: if w[2] == "W" { BlockOp::Write } else { BlockOp::Read },
                flags: blk::ISSUE_UNKNOWN | blk::TRACED,
            },
        };
        self.queue.push_back(item);
        Ok(())
    }
}

/// trace_openat printed the path cut to 63 bytes, then the file's own
/// name: when the cut fell in the last component, the name completes it.
fn full_path(path: &str, name: Option<&str>) -> String {
    match (path.rsplit_once('/'), name) {
        (Some((dir, last)), Some(n)) if n.starts_with(last) && n != last => format!("{dir}/{n}"),
        _ => path.to_string(),
    }
}

impl Source for VisSource {
    fn next_item(&mut self) -> Result<Option<Item>, ImportError> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                self.report.records += 1;
                return Ok(Some(it));
            }
            let mut l = std::mem::take(&mut self.buf);
            let Some(no) = self.lines.next_content(&mut l, &mut self.report)? else { return Ok(None) };
            if let Err(e) = self.line(&l) {
                self.report.malformed(no, e);
            }
            self.buf = l;
        }
    }

    fn report(&self) -> &FileReport {
        &self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn recognises_each_kind() {
        let d = |v: &[&str]| detect(&lines(v));
        assert_eq!(d(&["2022-08-28T03:24:38.862885533 2036325 832 5646 libc.so"]), Some(Format::VisRead));
        assert_eq!(d(&["2022-08-28T03:24:38.866927996 2036324 0 333892 "]), Some(Format::VisRead));
        assert_eq!(d(&["2022-08-28T03:24:40.104164865 2036328 0x55563cd03120 34275 a.pyc"]), Some(Format::VisWrite));
        assert_eq!(d(&["2022-08-28T03:24:38.817342564 2036324 8287 /opt/lib/x.so x.so"]), Some(Format::VisOpen));
        assert_eq!(d(&["2022-08-28T03:24:38.833924410 2036324 R 4096 176484 "]), Some(Format::VisBio));
        assert_eq!(d(&["2022-08-28T03:24:40.528,2022-08-28T03:24:56.710,INIT"]), Some(Format::Timeline));
        assert_eq!(d(&["2022-08-28T03:24:38.817334277,2022-08-28T03:24:38.817342564,OPENAT"]), Some(Format::VisStEnd));
        assert_eq!(d(&["2022-08-28T03:24:38.817342564,OPENAT,8287"]), Some(Format::VisComb));
        assert_eq!(d(&["timestamp,%usr,%nice", "2022-08-28T03:24:33,4.05,0.00"]), Some(Format::CpuCsv));
        assert_eq!(d(&["timestamp,sm,mem,fb"]), Some(Format::GpuCsv));
        assert_eq!(d(&["{", "  \"12\": \"master\",", "  \"13\": \"worker 1\"", "}"]), Some(Format::Pids));
        assert_eq!(d(&["12", "13"]), Some(Format::Pids));
        assert_eq!(d(&["10:24:33 PM  all    4.05"]), None);
    }

    #[test]
    fn cut_paths_completed() {
        assert_eq!(
            full_path("/lib/lib-dynload/grp.cpython-38-x86_64-linu", Some("grp.cpython-38-x86_64-linux-gnu.so")),
            "/lib/lib-dynload/grp.cpython-38-x86_64-linux-gnu.so"
        );
        assert_eq!(full_path("/a/b/c.so", Some("c.so")), "/a/b/c.so");
        assert_eq!(full_path("/a/verylongdirna", Some("x")), "/a/verylongdirna");
    }
}
