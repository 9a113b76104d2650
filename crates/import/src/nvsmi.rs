//! What `nvidia-smi pmon` and `nvidia-smi dmon` outputs share: `#` header
//! lines (column names, then units), repeated every screenful, rows of
//! space-separated columns, `-` for no value, and with `-o DT` a date
//! (`YYYYMMDD`) and local time in front.

use chrono::{NaiveDate, NaiveTime};
use mltrace_log::CounterUnit;

use crate::clock::{parse_iso_date, parse_tod, LocalClock};

/// The column layout from the `#` header lines.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Columns {
    pub names: Vec<String>,
    pub units: Vec<String>,
}

impl Columns {
    /// Takes one `#` line; true when it was a header line.
    pub fn header(&mut self, line: &str) -> bool {
        let Some(rest) = line.trim_start().strip_prefix('#') else { return false };
        let words: Vec<String> = rest.split_whitespace().map(str::to_string).collect();
        if words.iter().any(|w| w.eq_ignore_ascii_case("gpu")) {
            self.names = words;
        } else if words.iter().any(|w| w == "Idx") {
            self.units = words;
        }
        true
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n.eq_ignore_ascii_case(name))
    }

    pub fn unit(&self, i: usize) -> &str {
        self.units.get(i).map_or("", String::as_str)
    }

    pub fn has_date(&self) -> bool {
        self.index("Date").is_some()
    }

    pub fn has_time(&self) -> bool {
        self.index("Time").is_some()
    }
}

/// Where a row's sample was taken.
pub enum When {
    /// `-o DT`: date and time on each row.
    DateTime(NaiveDate, NaiveTime),
    /// `-o T`: time only.
    Time(NaiveTime),
}

/// The date and time at the front of a row, if the columns have them.
pub fn when(cols: &Columns, row: &[&str]) -> Result<When, String> {
    let t = cols.index("Time").ok_or("the header has no Time column (nvidia-smi was run without -o T or -o DT)")?;
    let tod = row.get(t).and_then(|w| parse_tod(w, None)).ok_or("expected a time (HH:MM:SS)")?;
    match cols.index("Date") {
        Some(d) => {
            let date = row.get(d).and_then(|w| parse_iso_date(w)).ok_or("expected a date (YYYYMMDD)")?;
            Ok(When::DateTime(date, tod))
        }
        None => Ok(When::Time(tod)),
    }
}

pub fn instant(clock: &mut LocalClock, w: When) -> Result<u64, String> {
    match w {
        When::DateTime(d, t) => clock.at_date(d, t),
        When::Time(t) => clock.at(t),
    }
    .map(|t| t.max(0) as u64)
}

/// A unit row entry to a counter unit and the factor to its base unit.
/// nvidia-smi's "MB" are MiB.
pub fn unit(u: &str) -> (CounterUnit, f64) {
    match u {
        "%" => (CounterUnit::Percent, 1.0),
        "W" => (CounterUnit::Watts, 1.0),
        "C" => (CounterUnit::Celsius, 1.0),
        "MHz" => (CounterUnit::Megahertz, 1.0),
        "MB" => (CounterUnit::Bytes, 1048576.0),
        "MB/s" => (CounterUnit::BytesPerSec, 1048576.0),
        "errs" | "count" => (CounterUnit::Count, 1.0),
        _ => (CounterUnit::None, 1.0),
    }
}

/// A value cell: `-` (or `N/A`) is no value.
pub fn value(s: &str) -> Option<f64> {
    match s {
        "-" | "N/A" => None,
        s => s.parse().ok(),
    }
}

/// The names mltrace's own GPU sampler uses, so an imported GPU looks like
/// a recorded one.
pub fn counter_name(col: &str, per_process: bool) -> String {
    match (col.to_ascii_lowercase().as_str(), per_process) {
        ("sm", _) => mltrace_log::GPU_UTILISATION.into(),
        ("mem", _) => "memory".into(),
        ("enc", _) => "encoder".into(),
        ("dec", _) => "decoder".into(),
        ("jpg", _) => "JPEG".into(),
        ("ofa", _) => "OFA".into(),
        ("fb", true) => "framebuffer".into(),
        ("fb", false) => "framebuffer used".into(),
        ("bar1", _) => "BAR1 used".into(),
        ("ccpm", _) => "CC protected memory".into(),
        ("pwr", _) => "power".into(),
        ("gtemp", _) => "temperature".into(),
        ("mtemp", _) => "memory temperature".into(),
        ("mclk", _) => "memory clock".into(),
        ("pclk", _) => "processor clock".into(),
        ("rxpci", _) => "PCIe rx".into(),
        ("txpci", _) => "PCIe tx".into(),
        ("sbecc", _) => "single-bit ECC errors".into(),
        ("dbecc", _) => "double-bit ECC errors".into(),
        ("pci", _) => "PCIe replay errors".into(),
        ("pviol", _) => "power violation".into(),
        ("tviol", _) => "thermal violation".into(),
        _ => col.to_string(),
    }
}
