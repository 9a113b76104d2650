//! `nvidia-smi dmon`: per GPU, machine-wide metrics every second (power,
//! temperatures, utilisations, clocks, memory, PCIe...), whichever `-s`
//! selected; the `#` header names the columns and the second gives units.

use std::collections::{HashMap, VecDeque};
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

pub struct DmonSource {
    lines: Lines,
    /// The line being read (its memory reused).
    buf: String,
    report: FileReport,
    cols: Columns,
    clock: LocalClock,
    queue: VecDeque<Item>,
    groups: HashMap<u32, Rc<str>>,
    names: HashMap<usize, (Rc<str>, CounterUnit, f64)>,
}

impl DmonSource {
    /// `date`: the day of the first row, for `-o T` output.
    pub fn new(lines: Lines, report: FileReport, tz: Tz, date: NaiveDate) -> Self {
        DmonSource {
            lines,
            buf: String::new(),
            report,
            cols: Columns::default(),
            clock: LocalClock::new(tz, date),
            queue: VecDeque::new(),
            groups: HashMap::new(),
            names: HashMap::new(),
        }
    }

    fn counter(&mut self, i: usize) -> (Rc<str>, CounterUnit, f64) {
        if let Some(c) = self.names.get(&i) {
            return c.clone();
        }
        let (unit, factor) = nvsmi::unit(self.cols.unit(i));
        let c = (Rc::from(nvsmi::counter_name(&self.cols.names[i], false)), unit, factor);
        self.names.insert(i, c.clone());
        c
    }

    fn line(&mut self, no: u64, line: &str) {
        if self.cols.header(line) {
            self.names.clear();
            self.report.skipped += 1;
            return;
        }
        if self.cols.names.is_empty() {
            self.report.malformed(no, "a row before any '# gpu ...' header line");
            return;
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        let n = self.cols.names.len();
        if w.len() != n {
            self.report.malformed(no, format!("{} columns, the header has {n}", w.len()));
            return;
        }
        let Some(gi) = self.cols.index("gpu") else {
            self.report.malformed(no, "the header names no gpu column");
            return;
        };
        let Ok(gpu) = w[gi].parse::<u32>() else {
            self.report.malformed(no, format!("expected a GPU index, found '{}'", w[gi]));
            return;
        };
        let ts = match nvsmi::when(&self.cols, &w).and_then(|t| nvsmi::instant(&mut self.clock, t)) {
            Ok(ts) => ts,
            Err(e) => {
                self.report.malformed(no, e);
                return;
            }
        };
        let group = self.groups.entry(gpu).or_insert_with(|| Rc::from(format!("GPU {gpu}"))).clone();
        for (i, cell) in w.iter().enumerate() {
            let col = &self.cols.names[i];
            if ["Date", "Time", "gpu"].iter().any(|k| k.eq_ignore_ascii_case(col)) {
                continue;
            }
            let Some(v) = nvsmi::value(cell) else {
                if !matches!(*cell, "-" | "N/A") {
                    self.report.malformed(no, format!("expected a number or '-' for {col}, found '{cell}'"));
                }
                continue;
            };
            let (name, unit, factor) = self.counter(i);
            self.queue.push_back(Item::Counter { ts, group: group.clone(), name, unit, pid: 0, value: v * factor });
        }
    }
}

impl Source for DmonSource {
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
