//! `nvidia-smi pmon`: per process, per GPU utilisation every second. Several
//! processes may share a GPU (one row each), an idle GPU has a row of `-`,
//! and the `#` headers repeat. Needs the time columns (`-o T` or `-o DT`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

use chrono::NaiveDate;
use chrono_tz::Tz;
use mltrace_log::CounterUnit;

use crate::clock::LocalClock;
use crate::error::ImportError;
use crate::item::Item;
use crate::lines::{FileReport, Lines};
use crate::nvsmi::{self, Columns};
use crate::Source;

/// The columns of `nvidia-smi pmon -s um -o DT`, for rows before any header.
const DEFAULT_NAMES: [&str; 11] = ["Date", "Time", "gpu", "pid", "type", "sm", "mem", "enc", "dec", "fb", "command"];
const DEFAULT_UNITS: [&str; 11] = ["YYYYMMDD", "HH:MM:SS", "Idx", "#", "C/G", "%", "%", "%", "%", "MB", "name"];

/// Columns that are not counters.
fn is_key(name: &str) -> bool {
    ["Date", "Time", "gpu", "pid", "type", "command"].iter().any(|k| k.eq_ignore_ascii_case(name))
}

/// A data row of pmon output (with the date and time in front).
pub fn looks_like_row(line: &str) -> bool {
    let w: Vec<&str> = line.split_whitespace().collect();
    w.len() >= 6
        && crate::clock::parse_iso_date(w[0]).is_some()
        && crate::clock::is_tod(w[1])
        && w[2].bytes().all(|b| b.is_ascii_digit())
        && (w[3] == "-" || w[3].bytes().all(|b| b.is_ascii_digit()))
        && ["C", "G", "C+G", "M", "-"].contains(&w[4])
}

/// A counter's name and unit.
type Named = (Rc<str>, CounterUnit);

pub struct PmonSource {
    lines: Lines,
    /// The line being read (its memory reused).
    buf: String,
    report: FileReport,
    cols: Columns,
    clock: LocalClock,
    queue: VecDeque<Item>,
    groups: HashMap<u32, Rc<str>>,
    names: HashMap<usize, (Rc<str>, CounterUnit, f64)>,
    comms: HashMap<u32, String>,
    /// Per GPU, the processes seen on it and the counters they have.
    active: HashMap<u32, HashMap<u32, Vec<Named>>>,
    sample_ts: Option<u64>,
    sample: HashMap<u32, HashSet<u32>>,
}

impl PmonSource {
    /// `date`: the day of the first row, for `-o T` output.
    pub fn new(lines: Lines, report: FileReport, tz: Tz, date: NaiveDate) -> Self {
        PmonSource {
            lines,
            buf: String::new(),
            report,
            cols: Columns::default(),
            clock: LocalClock::new(tz, date),
            queue: VecDeque::new(),
            groups: HashMap::new(),
            names: HashMap::new(),
            comms: HashMap::new(),
            active: HashMap::new(),
            sample_ts: None,
            sample: HashMap::new(),
        }
    }

    fn group(&mut self, gpu: u32) -> Rc<str> {
        self.groups.entry(gpu).or_insert_with(|| Rc::from(format!("GPU {gpu}"))).clone()
    }

    fn counter(&mut self, i: usize) -> (Rc<str>, CounterUnit, f64) {
        if let Some(c) = self.names.get(&i) {
            return c.clone();
        }
        let col = &self.cols.names[i];
        let (unit, factor) = match self.cols.unit(i) {
            "" if col == "fb" => nvsmi::unit("MB"),
            "" => nvsmi::unit("%"),
            u => nvsmi::unit(u),
        };
        let c = (Rc::from(nvsmi::counter_name(col, true)), unit, factor);
        self.names.insert(i, c.clone());
        c
    }

    /// A process missing from a GPU's sample has left it: its counters on
    /// that GPU drop to 0 there (pmon lists every process on a GPU, every
    /// sample), rather than holding their last value to the end.
    fn close_sample(&mut self) {
        let Some(ts) = self.sample_ts else { return };
        for (gpu, pids) in std::mem::take(&mut self.sample) {
            let group = self.group(gpu);
            if let Some(act) = self.active.get_mut(&gpu) {
                act.retain(|pid, counters| {
                    if pids.contains(pid) {
                        return true;
                    }
                    for (name, unit) in counters.iter() {
                        let (name, unit) = (name.clone(), *unit);
                        self.queue.push_back(Item::Counter {
                            ts,
                            group: group.clone(),
                            name,
                            unit,
                            pid: *pid,
                            value: 0.0,
                        });
                    }
                    false
                });
            }
        }
    }

    fn line(&mut self, no: u64, line: &str) {
        if self.cols.header(line) {
            self.names.clear();
            self.report.skipped += 1;
            return;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if self.cols.names.is_empty() {
            if !looks_like_row(line) {
                self.report.malformed(no, "a row before any '# gpu pid ...' header, not in pmon -s um -o DT shape");
                return;
            }
            self.cols.names = DEFAULT_NAMES.iter().map(|s| s.to_string()).collect();
            self.cols.units = DEFAULT_UNITS.iter().map(|s| s.to_string()).collect();
            self.report.note(
                "no header line: columns taken as pmon -s um -o DT (date time gpu pid type sm mem enc dec fb command)",
            );
        }
        let n = self.cols.names.len();
        if words.len() < n {
            self.report.malformed(no, format!("{} columns, the header has {n}", words.len()));
            return;
        }
        let tail: String;
        let w: Vec<&str> = if words.len() > n {
            // A command name with spaces.
            tail = words[n - 1..].join(" ");
            let mut w = words[..n - 1].to_vec();
            w.push(&tail);
            w
        } else {
            words
        };
        let (Some(gi), Some(pi)) = (self.cols.index("gpu"), self.cols.index("pid")) else {
            self.report.malformed(no, "the header names no gpu and pid columns");
            return;
        };
        let Ok(gpu) = w[gi].parse::<u32>() else {
            self.report.malformed(no, format!("expected a GPU index, found '{}'", w[gi]));
            return;
        };
        let pid = match w[pi] {
            "-" => None,
            p => match p.parse::<u32>() {
                Ok(p) => Some(p),
                Err(_) => {
                    self.report.malformed(no, format!("expected a pid or '-', found '{p}'"));
                    return;
                }
            },
        };
        let ts = match nvsmi::when(&self.cols, &w).and_then(|t| nvsmi::instant(&mut self.clock, t)) {
            Ok(ts) => ts,
            Err(e) => {
                self.report.malformed(no, e);
                return;
            }
        };
        if self.sample_ts != Some(ts) {
            self.close_sample();
            self.sample_ts = Some(ts);
        }
        let pids = self.sample.entry(gpu).or_default();
        let Some(pid) = pid else { return };
        pids.insert(pid);
        if let Some(ci) = self.cols.index("command") {
            let c = w[ci];
            if c != "-" && self.comms.get(&pid).is_none_or(|old| old != c) {
                self.comms.insert(pid, c.to_string());
                self.queue.push_back(Item::Comm { ts, pid, comm: Rc::from(c) });
            }
        }
        let group = self.group(gpu);
        for (i, cell) in w.iter().enumerate() {
            if is_key(&self.cols.names[i]) {
                continue;
            }
            let Some(v) = nvsmi::value(cell) else {
                if !matches!(*cell, "-" | "N/A") {
                    self.report
                        .malformed(no, format!("expected a number or '-' for {}, found '{cell}'", self.cols.names[i]));
                }
                continue;
            };
            let (name, unit, factor) = self.counter(i);
            let counters = self.active.entry(gpu).or_default().entry(pid).or_default();
            if !counters.iter().any(|(n, _)| *n == name) {
                counters.push((name.clone(), unit));
            }
            self.queue.push_back(Item::Counter { ts, group: group.clone(), name, unit, pid, value: v * factor });
        }
    }
}

impl Source for PmonSource {
    fn next_item(&mut self) -> Result<Option<Item>, ImportError> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                self.report.records += 1;
                return Ok(Some(it));
            }
            let mut l = std::mem::take(&mut self.buf);
            let Some(no) = self.lines.next_content(&mut l, &mut self.report)? else {
                if self.sample_ts.is_some() {
                    self.close_sample();
                    self.sample_ts = None;
                    continue;
                }
                return Ok(None);
            };
            self.line(no, &l);
            self.buf = l;
        }
    }

    fn report(&self) -> &FileReport {
        &self.report
    }
}
