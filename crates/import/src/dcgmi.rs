//! `dcgmi dmon`: DCGM's field values per entity (GPU, MIG instance) every
//! `-d` ms. A `#Entity` header names the fields by their tags (`SMACT`,
//! `TENSO`, `DRAMA`: what `-e` asked for), an `ID` line follows, then one
//! row per entity and sample: `GPU 0  0.512  0.301 ...`, `N/A` for no value.
//!
//! dcgmi prints no time. A row says when it was taken either by a local
//! `YYYY-MM-DD HH:MM:SS[.f]` in front (what `dcgmi dmon ... | ts '%F %.T'`
//! writes), or else the rows are samples every `--dcgmi-interval` from
//! `--dcgmi-start`, one sample being a pass over the entities.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use chrono::NaiveDateTime;
use chrono_tz::Tz;
use mltrace_log::{CounterUnit, GPU_UTILISATION};

use crate::clock::{self, parse_iso_date, parse_tod};
use crate::error::ImportError;
use crate::item::Item;
use crate::lines::{FileReport, Lines};
use crate::Source;

/// A field tag's counter: the names mltrace's own GPU sampler uses where
/// it records the same thing, unit, factor to that unit. DCGM's profiling
/// fields are ratios (0..1): shown as % like GPM's.
pub fn field(tag: &str) -> (String, CounterUnit, f64) {
    let pct = |n: &str| (n.to_string(), CounterUnit::Percent, 100.0);
    let mib = 1048576.0;
    match tag.to_ascii_uppercase().as_str() {
        "GRACT" => pct("graphics engine active"),
        "SMACT" => pct("SM active"),
        "SMOCC" => pct("SM occupancy"),
        "TENSO" => pct("tensor active"),
        "DRAMA" => pct("DRAM active"),
        "FP64A" => pct("FP64 active"),
        "FP32A" => pct("FP32 active"),
        "FP16A" => pct("FP16 active"),
        "PCITX" => ("PCIe tx".into(), CounterUnit::BytesPerSec, 1.0),
        "PCIRX" => ("PCIe rx".into(), CounterUnit::BytesPerSec, 1.0),
        "NVLTX" => ("NVLink tx".into(), CounterUnit::BytesPerSec, 1.0),
        "NVLRX" => ("NVLink rx".into(), CounterUnit::BytesPerSec, 1.0),
        "GPUTL" => (GPU_UTILISATION.into(), CounterUnit::Percent, 1.0),
        "MCUTL" => ("memory".into(), CounterUnit::Percent, 1.0),
        "ENUTL" => ("encoder".into(), CounterUnit::Percent, 1.0),
        "DEUTL" => ("decoder".into(), CounterUnit::Percent, 1.0),
        "POWER" => ("power".into(), CounterUnit::Watts, 1.0),
        "TMPTR" => ("temperature".into(), CounterUnit::Celsius, 1.0),
        "MMTMP" => ("memory temperature".into(), CounterUnit::Celsius, 1.0),
        "SMCLK" => ("SM clock".into(), CounterUnit::Megahertz, 1.0),
        "MMCLK" => ("memory clock".into(), CounterUnit::Megahertz, 1.0),
        "FBTTL" => ("framebuffer total".into(), CounterUnit::Bytes, mib),
        "FBFRE" => ("framebuffer free".into(), CounterUnit::Bytes, mib),
        "FBUSD" => ("framebuffer used".into(), CounterUnit::Bytes, mib),
        _ => (tag.to_string(), CounterUnit::None, 1.0),
    }
}

/// The group of an entity: `GPU 0`, a MIG GPU instance `GPU-I 1` as
/// `GPU instance 1`, a compute instance `GPU-CI 2` as `GPU compute instance 2`.
fn entity_group(kind: &str, id: &str) -> Option<String> {
    let id: u32 = id.parse().ok()?;
    Some(match kind.to_ascii_uppercase().as_str() {
        "GPU" => format!("GPU {id}"),
        "GPU-I" => format!("GPU instance {id}"),
        "GPU-CI" => format!("GPU compute instance {id}"),
        _ => return None,
    })
}

/// True for a `dcgmi dmon` header line (after a `ts` prefix or not).
pub fn is_header(line: &str) -> bool {
    line.split_once('#').is_some_and(|(_, h)| h.trim_start().to_ascii_lowercase().starts_with("entity"))
}

/// True when the first row under the first header carries no time.
pub fn bare(head: &[String]) -> bool {
    let Some(h) = head.iter().position(|l| is_header(l)) else { return false };
    let tags = head[h].split_once('#').map_or(0, |(_, t)| t.split_whitespace().count().saturating_sub(1));
    head[h + 1..]
        .iter()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| !w.is_empty() && w.last() != Some(&"ID"))
        .is_some_and(|w| w.len() == tags + 2)
}

/// When bare rows were taken: the first sample, and the interval.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub start: NaiveDateTime,
    pub interval_ns: u64,
}

pub struct DcgmiSource {
    lines: Lines,
    buf: String,
    report: FileReport,
    tz: Tz,
    schedule: Option<Schedule>,
    /// Field tags of the current header.
    tags: Vec<String>,
    counters: HashMap<usize, (Rc<str>, CounterUnit, f64)>,
    groups: HashMap<String, Rc<str>>,
    /// Bare rows: the sample number and the entities already in it.
    sample: u64,
    in_sample: Vec<String>,
    prev: Option<i64>,
    queue: VecDeque<Item>,
}

impl DcgmiSource {
    pub fn new(lines: Lines, report: FileReport, tz: Tz, schedule: Option<Schedule>) -> Self {
        DcgmiSource {
            lines,
            buf: String::new(),
            report,
            tz,
            schedule,
            tags: Vec::new(),
            counters: HashMap::new(),
            groups: HashMap::new(),
            sample: 0,
            in_sample: Vec::new(),
            prev: None,
            queue: VecDeque::new(),
        }
    }

    /// When a row with a `ts` prefix (its words before the entity) was
    /// taken, or a bare row (none) by the schedule.
    fn when(&mut self, prefix: &[&str], entity: &str) -> Result<u64, String> {
        let t = match prefix {
            [d, t] => {
                let date = parse_iso_date(d).ok_or_else(|| format!("expected a date (YYYY-MM-DD), found '{d}'"))?;
                let tod = parse_tod(t, None).ok_or_else(|| format!("expected a time (HH:MM:SS), found '{t}'"))?;
                clock::resolve(self.tz, date.and_time(tod), self.prev)?
            }
            [] => {
                let s = self.schedule.ok_or(
                    "a row without a time: dcgmi prints none; give --dcgmi-start (and --dcgmi-interval, dcgmi's -d), \
                     or prefix the rows with `| ts '%F %.T'`",
                )?;
                if self.in_sample.iter().any(|e| e == entity) {
                    self.sample += 1;
                    self.in_sample.clear();
                }
                self.in_sample.push(entity.to_string());
                let t0 = clock::resolve(self.tz, s.start, None)?;
                t0 + (self.sample * s.interval_ns) as i64
            }
            p => return Err(format!("{} words before the entity: expected none or a date and a time", p.len())),
        };
        self.prev = Some(t);
        Ok(t.max(0) as u64)
    }

    fn line(&mut self, no: u64, line: &str) {
        if is_header(line) {
            let (_, h) = line.split_once('#').unwrap_or_default();
            self.tags = h.split_whitespace().skip(1).map(str::to_string).collect();
            self.counters.clear();
            self.report.skipped += 1;
            return;
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        // The line under the header that heads the entity id column.
        if w.last() == Some(&"ID") && w.len() <= 3 {
            self.report.skipped += 1;
            return;
        }
        if self.tags.is_empty() {
            self.report.malformed(no, "a row before any '#Entity ...' header line");
            return;
        }
        let n = self.tags.len();
        let Some(first) = w.len().checked_sub(n + 2) else {
            self.report.malformed(no, format!("{} columns, the header has {} fields after the entity", w.len(), n));
            return;
        };
        let (kind, id) = (w[first], w[first + 1]);
        let Some(group) = entity_group(kind, id) else {
            self.report.malformed(no, format!("expected an entity (GPU N, GPU-I N, GPU-CI N), found '{kind} {id}'"));
            return;
        };
        let ts = match self.when(&w[..first], &group) {
            Ok(ts) => ts,
            Err(e) => {
                self.report.malformed(no, e);
                return;
            }
        };
        let group = self.groups.entry(group).or_insert_with_key(|g| Rc::from(g.as_str())).clone();
        for (i, cell) in w[first + 2..].iter().enumerate() {
            if matches!(*cell, "N/A" | "-") {
                continue;
            }
            let (name, unit, factor) = self
                .counters
                .entry(i)
                .or_insert_with(|| {
                    let (n, u, f) = field(&self.tags[i]);
                    (Rc::from(n), u, f)
                })
                .clone();
            // A ratio to % by moving the decimal point (0.301 is 30.1, not
            // 30.099999999999998).
            let parsed = if factor == 100.0 { format!("{cell}e2").parse::<f64>() } else { cell.parse::<f64>() };
            let value = match parsed {
                Ok(v) if factor == 100.0 => v,
                Ok(v) => v * factor,
                Err(_) => {
                    self.report.malformed(no, format!("expected a number or N/A for {}, found '{cell}'", self.tags[i]));
                    continue;
                }
            };
            self.queue.push_back(Item::Counter { ts, group: group.clone(), name, unit, pid: 0, value });
        }
    }
}

impl Source for DcgmiSource {
    fn next_item(&mut self) -> Result<Option<Item>, ImportError> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                self.report.records += 1;
                return Ok(Some(it));
            }
            let mut l = std::mem::take(&mut self.buf);
            let Some(no) = self.lines.next_content(&mut l, &mut self.report)? else { return Ok(None) };
            self.line(no, &l);
            self.buf = l;
        }
    }

    fn report(&self) -> &FileReport {
        &self.report
    }
}
