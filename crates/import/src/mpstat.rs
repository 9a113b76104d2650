//! `mpstat` (sysstat) output: CPU utilisation per interval, `all` and per
//! CPU (`-P ALL`), 12-hour (`10:24:33 PM`) or 24-hour clock. Lines carry
//! only the time of day: the date comes from the `Linux ... 08/27/2022 ...`
//! line (or the user), and a time that goes back past midnight is the next
//! day.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use chrono::{Datelike, NaiveDate, NaiveTime};
use chrono_tz::Tz;
use mltrace_log::CounterUnit;

use crate::clock::{is_ampm, parse_tod, LocalClock};
use crate::error::ImportError;
use crate::item::Item;
use crate::lines::{FileReport, Lines};
use crate::Source;

/// sysstat's columns when the file has no header line (10: sysstat 10.1+,
/// 9: no %gnice).
const DEFAULT_COLUMNS: [&str; 10] = ["usr", "nice", "sys", "iowait", "irq", "soft", "steal", "guest", "gnice", "idle"];

/// What the `Linux 5.4.0 (host) 08/27/2022 _x86_64_ (80 CPU)` line says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SystemLine {
    pub kernel: String,
    pub host: String,
    pub date: Option<NaiveDate>,
    /// How the date was read, when its order was a guess.
    pub date_note: Option<String>,
    pub cpus: Option<u32>,
}

pub fn system_line(line: &str) -> Option<SystemLine> {
    let rest = line.trim().strip_prefix("Linux ")?;
    let mut s = SystemLine { kernel: rest.split_whitespace().next().unwrap_or("").to_string(), ..Default::default() };
    if let (Some(a), Some(b)) = (rest.find('('), rest.find(')')) {
        if a < b {
            s.host = rest[a + 1..b].to_string();
        }
    }
    for w in rest.split_whitespace() {
        if s.date.is_none() {
            if let Some((d, note)) = parse_date(w) {
                s.date = Some(d);
                s.date_note = note;
            }
        }
    }
    if let Some(i) = rest.rfind(" CPU)") {
        s.cpus = rest[..i].rsplit('(').next().and_then(|n| n.trim().parse().ok());
    }
    Some(s)
}

/// mpstat prints the date in the locale's order: `08/27/2022` (en_US, C),
/// `27/08/2022` (en_GB), `2022-08-27` (ISO), `27.08.2022` (de).
fn parse_date(w: &str) -> Option<(NaiveDate, Option<String>)> {
    if !w.bytes().all(|b| b.is_ascii_digit() || b"/-.".contains(&b)) {
        return None;
    }
    let r = parse_date_digits(w)?;
    (r.0.year() >= 1970).then_some(r)
}

fn parse_date_digits(w: &str) -> Option<(NaiveDate, Option<String>)> {
    if let Some(d) = crate::clock::parse_iso_date(w).filter(|_| w.contains('-')) {
        return Some((d, None));
    }
    if let Ok(d) = NaiveDate::parse_from_str(w, "%d.%m.%Y") {
        return Some((d, None));
    }
    let parts: Vec<&str> = w.split('/').collect();
    if parts.len() != 3 || !parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    let (a, b): (u32, u32) = (parts[0].parse().ok()?, parts[1].parse().ok()?);
    let mut y: i32 = parts[2].parse().ok()?;
    if parts[2].len() == 2 {
        y += 2000;
    }
    if a > 12 {
        return NaiveDate::from_ymd_opt(y, b, a).map(|d| (d, None));
    }
    let d = NaiveDate::from_ymd_opt(y, a, b)?;
    let note =
        (b <= 12 && a != b).then(|| format!("read {w} as month/day (mpstat's C and en_US order); --date overrides"));
    Some((d, note))
}

/// A line's time of day and the words after it (`10:24:33 PM all ...`).
fn split_time(line: &str) -> Option<(NaiveTime, Vec<&str>)> {
    let mut w: Vec<&str> = line.split_whitespace().collect();
    if w.is_empty() {
        return None;
    }
    let ampm = w.get(1).is_some_and(|x| is_ampm(x));
    let tod = parse_tod(w[0], if ampm { Some(w[1]) } else { None })?;
    w.drain(..if ampm { 2 } else { 1 });
    Some((tod, w))
}

/// True when `line` is an mpstat data or header line.
pub fn looks_like(line: &str) -> bool {
    match split_time(line) {
        Some((_, w)) if w.len() >= 5 => {
            (w[0] == "CPU" && w.iter().any(|x| x.starts_with('%')))
                || ((w[0] == "all" || w[0].bytes().all(|b| b.is_ascii_digit()))
                    && w[1..].iter().all(|x| number(x).is_some()))
        }
        _ => false,
    }
}

/// The first data line's time of day.
pub fn first_tod(head: &[String]) -> Option<NaiveTime> {
    head.iter().filter_map(|l| split_time(l)).find(|(_, w)| w.first().is_some_and(|c| *c != "CPU")).map(|(t, _)| t)
}

fn number(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().or_else(|| s.replace(',', ".").parse().ok())
}

fn column(h: &str) -> (Rc<str>, CounterUnit) {
    let unit = if h.starts_with('%') {
        CounterUnit::Percent
    } else if h.ends_with("/s") {
        CounterUnit::PerSec
    } else {
        CounterUnit::None
    };
    let name = match h.trim_start_matches('%') {
        "user" => "usr",
        "system" => "sys",
        n => n,
    };
    (Rc::from(name), unit)
}

pub struct MpstatSource {
    lines: Lines,
    /// The line being read (its memory reused).
    buf: String,
    report: FileReport,
    tz: Tz,
    clock: Option<LocalClock>,
    columns: Vec<(Rc<str>, CounterUnit)>,
    groups: HashMap<String, Rc<str>>,
    queue: VecDeque<Item>,
}

impl MpstatSource {
    /// `date`: the day of the first line, for files with no `Linux` line.
    pub fn new(lines: Lines, report: FileReport, tz: Tz, date: Option<NaiveDate>) -> Self {
        MpstatSource {
            lines,
            buf: String::new(),
            report,
            tz,
            clock: date.map(|d| LocalClock::new(tz, d)),
            columns: Vec::new(),
            groups: HashMap::new(),
            queue: VecDeque::new(),
        }
    }

    fn group(&mut self, cpu: &str) -> Rc<str> {
        if let Some(g) = self.groups.get(cpu) {
            return g.clone();
        }
        let g: Rc<str> = if cpu == "all" { Rc::from("CPU") } else { Rc::from(format!("CPU {cpu}")) };
        self.groups.insert(cpu.to_string(), g.clone());
        g
    }

    fn line(&mut self, no: u64, line: &str) -> Result<(), ImportError> {
        let t = line.trim();
        if let Some(s) = system_line(t) {
            self.report.skipped += 1;
            if let Some(d) = s.date {
                self.clock = Some(LocalClock::new(self.tz, d));
            }
            return Ok(());
        }
        if t.starts_with("Average:") {
            self.report.skipped += 1;
            return Ok(());
        }
        let Some((tod, w)) = split_time(t) else {
            self.report.malformed(no, format!("expected a time (HH:MM:SS [AM|PM]), found '{}'", first_word(t)));
            return Ok(());
        };
        let Some(&cpu) = w.first() else {
            self.report.malformed(no, "expected CPU and values after the time");
            return Ok(());
        };
        if cpu == "CPU" {
            self.columns = w[1..].iter().map(|h| column(h)).collect();
            self.report.skipped += 1;
            return Ok(());
        }
        if cpu != "all" && !cpu.bytes().all(|b| b.is_ascii_digit()) {
            self.report.malformed(no, format!("expected a CPU ('all' or a number), found '{cpu}'"));
            return Ok(());
        }
        let values: Option<Vec<f64>> = w[1..].iter().map(|v| number(v)).collect();
        let Some(values) = values else {
            self.report.malformed(no, "expected numbers after the CPU");
            return Ok(());
        };
        if self.columns.is_empty() {
            let n = match values.len() {
                10 => 10,
                9 => 9,
                n => {
                    self.report.malformed(no, format!("{n} values and no header line to name them (expected 9 or 10)"));
                    return Ok(());
                }
            };
            let cols = DEFAULT_COLUMNS.iter().filter(|c| n == 10 || **c != "gnice");
            self.columns = cols.map(|c| (Rc::from(*c), CounterUnit::Percent)).collect();
            self.report.note(
                "no header line: columns taken as sysstat's usr nice sys iowait irq soft steal guest [gnice] idle",
            );
        }
        if values.len() != self.columns.len() {
            self.report.malformed(no, format!("{} values for {} columns", values.len(), self.columns.len()));
            return Ok(());
        }
        let Some(clock) = self.clock.as_mut() else {
            return Err(ImportError::line(
                self.lines.path(),
                no,
                "mpstat line before any date: the file has no 'Linux ... MM/DD/YYYY' line; give --date",
            ));
        };
        let ts = match clock.at(tod) {
            Ok(ts) => ts.max(0) as u64,
            Err(e) => {
                self.report.malformed(no, e);
                return Ok(());
            }
        };
        let group = self.group(cpu);
        for ((name, unit), v) in self.columns.clone().into_iter().zip(values) {
            self.queue.push_back(Item::Counter { ts, group: group.clone(), name, unit, pid: 0, value: v });
        }
        Ok(())
    }
}

fn first_word(s: &str) -> &str {
    s.split_whitespace().next().unwrap_or("")
}

impl Source for MpstatSource {
    fn next_item(&mut self) -> Result<Option<Item>, ImportError> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                self.report.records += 1;
                return Ok(Some(it));
            }
            let mut l = std::mem::take(&mut self.buf);
            let Some(no) = self.lines.next_content(&mut l, &mut self.report)? else { return Ok(None) };
            let r = self.line(no, &l);
            self.buf = l;
            r?;
        }
    }

    fn report(&self) -> &FileReport {
        &self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_lines() {
        let s = system_line("Linux 5.4.0-122-generic (gpu-node-7) \t08/27/2022 \t_x86_64_\t(80 CPU)").unwrap();
        assert_eq!(s.kernel, "5.4.0-122-generic");
        assert_eq!(s.host, "gpu-node-7");
        assert_eq!(s.date, NaiveDate::from_ymd_opt(2022, 8, 27));
        assert_eq!(s.cpus, Some(80));
        assert!(s.date_note.is_none(), "27 is no month");
        let s = system_line("Linux 6.1.0 (h) 27/08/22 _x86_64_ (8 CPU)").unwrap();
        assert_eq!(s.date, NaiveDate::from_ymd_opt(2022, 8, 27));
        let s = system_line("Linux 6.1.0 (h) 2023-03-05 _x86_64_ (8 CPU)").unwrap();
        assert_eq!(s.date, NaiveDate::from_ymd_opt(2023, 3, 5));
        let s = system_line("Linux 6.1.0 (h) 03/05/2023 _x86_64_ (8 CPU)").unwrap();
        assert_eq!(s.date, NaiveDate::from_ymd_opt(2023, 3, 5));
        assert!(s.date_note.is_some(), "03/05 could be either order");
    }

    #[test]
    fn shapes() {
        assert!(looks_like(
            "10:24:33 PM  all    4.05    0.00    2.68    1.60    0.00    0.42    0.00    0.00    0.00   91.24"
        ));
        assert!(looks_like(
            "22:24:33     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle"
        ));
        assert!(looks_like(
            "22:24:33       3    1,00    0,00    2,00    0,00    0,00    0,00    0,00    0,00    0,00   97,00"
        ));
        assert!(!looks_like("20230211   08:11:18      4          -     -     -     -     -     -     -   -"));
    }
}
