//! Time: local wall-clock readings to instants (with the zone's real rules),
//! and bpftrace's `nsecs` (time since boot) to wall-clock time.
//!
//! Every imported timestamp is Unix-epoch nanoseconds (UTC).

use chrono::{Datelike, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Timelike};
use chrono_tz::Tz;

use crate::error::ImportError;

pub const NS: i64 = 1_000_000_000;
const HALF_DAY: i64 = 12 * 3600;

/// Finds a zone by IANA name (`Europe/Paris`), case-insensitively.
pub fn parse_tz(name: &str) -> Result<Tz, ImportError> {
    let n = name.trim().trim_start_matches(':');
    if let Ok(tz) = n.parse::<Tz>() {
        return Ok(tz);
    }
    chrono_tz::TZ_VARIANTS.iter().find(|t| t.name().eq_ignore_ascii_case(n)).copied().ok_or_else(|| {
        ImportError::TimeZone(format!("unknown zone '{name}' (use an IANA name such as America/Toronto)"))
    })
}

/// This machine's zone: `TZ`, else `/etc/timezone`, else the target of the
/// `/etc/localtime` link. `None` when none of them names a known zone.
pub fn local_tz() -> Option<(Tz, String)> {
    if let Ok(v) = std::env::var("TZ") {
        if let Ok(tz) = parse_tz(&v) {
            return Some((tz, format!("TZ={v}")));
        }
    }
    if let Ok(s) = std::fs::read_to_string("/etc/timezone") {
        if let Ok(tz) = parse_tz(s.trim()) {
            return Some((tz, "/etc/timezone".into()));
        }
    }
    let target = std::fs::read_link("/etc/localtime").ok()?;
    let t = target.to_string_lossy();
    let name = t.split("zoneinfo/").nth(1)?;
    parse_tz(name).ok().map(|tz| (tz, "/etc/localtime".into()))
}

/// `HH:MM:SS`, `HH:MM:SS.fff`, optionally followed by `AM`/`PM` (12-hour).
pub fn parse_tod(s: &str, ampm: Option<&str>) -> Option<NaiveTime> {
    let (hms, frac) = match s.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let mut it = hms.split(':');
    let (h, m, sec) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || h.is_empty() || h.len() > 2 || m.len() != 2 || sec.len() != 2 {
        return None;
    }
    let digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    if !digits(h) || !digits(m) || !digits(sec) {
        return None;
    }
    let (mut h, m, sec): (u32, u32, u32) = (h.parse().ok()?, m.parse().ok()?, sec.parse().ok()?);
    if let Some(p) = ampm {
        if !(1..=12).contains(&h) {
            return None;
        }
        let pm = p.eq_ignore_ascii_case("PM");
        h = match (h, pm) {
            (12, false) => 0,
            (12, true) => 12,
            (h, true) => h + 12,
            (h, false) => h,
        };
    }
    let nano = match frac {
        Some(f) if !f.is_empty() && f.len() <= 9 && digits(f) => f.parse::<u32>().ok()? * 10u32.pow(9 - f.len() as u32),
        Some(_) => return None,
        None => 0,
    };
    NaiveTime::from_hms_nano_opt(h, m, sec, nano)
}

pub fn is_tod(s: &str) -> bool {
    parse_tod(s, None).is_some()
}

pub fn is_ampm(s: &str) -> bool {
    s.eq_ignore_ascii_case("AM") || s.eq_ignore_ascii_case("PM")
}

/// `YYYY-MM-DD`, `YYYYMMDD`.
pub fn parse_iso_date(s: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok().or_else(|| {
        if s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit()) {
            NaiveDate::parse_from_str(s, "%Y%m%d").ok()
        } else {
            None
        }
    })
}

/// The instant of a local time in `tz`, as Unix ns. `prev` (the instant of
/// the reading before) settles the hour that repeats when DST ends.
pub fn resolve(tz: Tz, local: NaiveDateTime, prev: Option<i64>) -> Result<i64, String> {
    let ns = |t: chrono::DateTime<Tz>| t.timestamp_nanos_opt().ok_or_else(|| "time out of range".to_string());
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => ns(t),
        LocalResult::Ambiguous(a, b) => {
            let a = ns(a)?;
            // The earlier reading, unless the clock has already been past it.
            if prev.is_some_and(|p| p > a) {
                ns(b)
            } else {
                Ok(a)
            }
        }
        LocalResult::None => Err(format!("{local} does not exist in {} (skipped by a DST change)", tz.name())),
    }
}

/// Local time-of-day readings of one clock, in order, on a known start date:
/// a reading more than 12 hours earlier than the one before is the next day
/// (midnight rollover); a smaller step back is the clock being set back (the
/// end of DST), not a new day.
#[derive(Clone, Debug)]
pub struct LocalClock {
    pub tz: Tz,
    date: NaiveDate,
    prev_tod: Option<NaiveTime>,
    prev: Option<i64>,
}

impl LocalClock {
    pub fn new(tz: Tz, date: NaiveDate) -> Self {
        LocalClock { tz, date, prev_tod: None, prev: None }
    }

    pub fn date(&self) -> NaiveDate {
        self.date
    }

    /// The instant of the next reading that carries only a time of day.
    pub fn at(&mut self, tod: NaiveTime) -> Result<i64, String> {
        if let Some(p) = self.prev_tod {
            if (p - tod).num_seconds() > HALF_DAY {
                self.date = self.date.succ_opt().ok_or("date out of range")?;
            }
        }
        self.prev_tod = Some(tod);
        let t = resolve(self.tz, self.date.and_time(tod), self.prev)?;
        self.prev = Some(t);
        Ok(t)
    }

    /// The instant of a reading with its own date.
    pub fn at_date(&mut self, date: NaiveDate, tod: NaiveTime) -> Result<i64, String> {
        self.date = date;
        self.prev_tod = Some(tod);
        let t = resolve(self.tz, date.and_time(tod), self.prev)?;
        self.prev = Some(t);
        Ok(t)
    }
}

/// The date on which a clock showing `tod` (in `tz`) was closest to
/// `instant` (Unix ns): for readings with no date, near an input that has one.
pub fn date_near(tz: Tz, tod: NaiveTime, instant: i64) -> Option<NaiveDate> {
    let local = tz.timestamp_nanos(instant).naive_local().date();
    [local.pred_opt(), Some(local), local.succ_opt()]
        .into_iter()
        .flatten()
        .filter_map(|d| resolve(tz, d.and_time(tod), None).ok().map(|t| (d, (t - instant).abs())))
        .min_by_key(|&(_, diff)| diff)
        .map(|(d, _)| d)
}

/// Estimates `wall - nsecs` from pairs of bpftrace `nsecs` and the
/// second-resolution wall-clock time printed with it. `time()` is formatted
/// in user space after the event, so each pair says the offset is below
/// `wall + 1 s - nsecs`; without delays it is also at or above `wall - nsecs`.
#[derive(Clone, Copy, Debug)]
pub struct Alignment {
    lo: i64,
    hi: i64,
    pub samples: u64,
}

impl Default for Alignment {
    fn default() -> Self {
        Alignment { lo: i64::MIN, hi: i64::MAX, samples: 0 }
    }
}

impl Alignment {
    pub fn add(&mut self, nsecs: u64, wall_second: i64) {
        let Ok(n) = i64::try_from(nsecs) else { return };
        self.lo = self.lo.max(wall_second - n);
        self.hi = self.hi.min(wall_second + NS - n);
        self.samples += 1;
    }

    pub fn merge(&mut self, o: &Alignment) {
        self.lo = self.lo.max(o.lo);
        self.hi = self.hi.min(o.hi);
        self.samples += o.samples;
    }

    /// The offset to add to `nsecs`, and how far off it may be (ns).
    pub fn estimate(&self) -> Option<(i64, i64)> {
        if self.samples == 0 {
            return None;
        }
        if self.lo <= self.hi {
            Some((self.lo + (self.hi - self.lo) / 2, (self.hi - self.lo) / 2))
        } else {
            // Printing lagged: the upper bounds still hold.
            Some((self.hi, self.lo - self.hi))
        }
    }
}

/// How bpftrace `nsecs` become wall-clock time.
#[derive(Clone, Debug, PartialEq)]
pub enum ClockSpec {
    /// Nanoseconds to add to `nsecs` to get Unix-epoch nanoseconds.
    Offset(i64),
    /// One `nsecs` value and the wall-clock time it was.
    Reference { nsecs: u64, wall: String },
}

impl ClockSpec {
    /// `NSECS=WHEN`, WHEN an RFC 3339 time (`2022-08-27T22:24:33.5-04:00`),
    /// or a local `YYYY-MM-DD HH:MM:SS[.f]` in the import's zone.
    pub fn parse_reference(s: &str) -> Result<ClockSpec, String> {
        let (n, w) = s.split_once('=').ok_or("expected NSECS=DATETIME")?;
        let nsecs = n.trim().parse::<u64>().map_err(|_| format!("'{n}' is not a bpftrace nsecs value"))?;
        Ok(ClockSpec::Reference { nsecs, wall: w.trim().to_string() })
    }

    /// The offset, given the zone for local reference times.
    pub fn offset(&self, tz: Option<Tz>) -> Result<i64, ImportError> {
        match self {
            ClockSpec::Offset(o) => Ok(*o),
            ClockSpec::Reference { nsecs, wall } => {
                let t = parse_wall(wall, tz)?;
                Ok(t - *nsecs as i64)
            }
        }
    }
}

/// An RFC 3339 time, or a local date and time in `tz`.
pub fn parse_wall(s: &str, tz: Option<Tz>) -> Result<i64, ImportError> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return t.timestamp_nanos_opt().ok_or_else(|| ImportError::Clock(format!("'{s}' is out of range")));
    }
    let local = ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
        .ok_or_else(|| ImportError::Clock(format!("'{s}' is not a date and time (YYYY-MM-DD HH:MM:SS[.f])")))?;
    let tz = tz.ok_or_else(|| ImportError::Clock(format!("'{s}' has no zone: give --tz or an RFC 3339 offset")))?;
    resolve(tz, local, None).map_err(ImportError::Clock)
}

/// `2022-08-27 22:24:33.123 EDT` for people.
pub fn describe(ns: i64, tz: Option<Tz>) -> String {
    match tz {
        Some(tz) => {
            let t = tz.timestamp_nanos(ns);
            format!(
                "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03} {}",
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute(),
                t.second(),
                t.nanosecond() / 1_000_000,
                t.format("%Z")
            )
        }
        None => chrono::DateTime::from_timestamp_nanos(ns).format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(y: i32, m: u32, dd: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, dd).unwrap()
    }

    #[test]
    fn twelve_hour_clock() {
        assert_eq!(parse_tod("12:00:01", Some("AM")), NaiveTime::from_hms_opt(0, 0, 1));
        assert_eq!(parse_tod("12:30:00", Some("PM")), NaiveTime::from_hms_opt(12, 30, 0));
        assert_eq!(parse_tod("10:24:33", Some("PM")), NaiveTime::from_hms_opt(22, 24, 33));
        assert_eq!(parse_tod("13:00:00", Some("PM")), None);
        assert_eq!(parse_tod("22:24:33.25", None), NaiveTime::from_hms_milli_opt(22, 24, 33, 250));
        assert_eq!(parse_tod("2:4:33", None), None);
    }

    #[test]
    fn midnight_and_dst() {
        let tz: Tz = "America/Toronto".parse().unwrap();
        let mut c = LocalClock::new(tz, d(2022, 11, 5));
        let t = |h, m, s| NaiveTime::from_hms_opt(h, m, s).unwrap();
        let a = c.at(t(23, 59, 59)).unwrap();
        let b = c.at(t(0, 0, 0)).unwrap();
        assert_eq!(b - a, NS, "midnight rollover");
        // 2022-11-06 01:30 happens twice in Toronto: EDT, then EST.
        let e1 = c.at(t(1, 30, 0)).unwrap();
        let e2 = c.at(t(1, 59, 59)).unwrap();
        let s1 = c.at(t(1, 0, 0)).unwrap();
        assert_eq!(e2 - e1, (29 * 60 + 59) * NS);
        assert_eq!(s1 - e2, NS, "clock set back an hour is one second later, not a new day");
        assert_eq!(c.date(), d(2022, 11, 6));
        // Spring forward: 02:30 does not exist.
        let mut c = LocalClock::new(tz, d(2022, 3, 13));
        assert!(c.at(t(2, 30, 0)).is_err());
        assert_eq!(c.at(t(3, 0, 0)).unwrap() - c.at(t(3, 0, 1)).unwrap(), -NS);
    }

    #[test]
    fn alignment_narrows() {
        let mut a = Alignment::default();
        // True offset 1000.4 s: nsecs 0.5 s is wall 1000.9 s, shown as 1000.
        a.add(500_000_000, 1000 * NS);
        a.add(700_000_000, 1001 * NS); // wall 1001.1
        let (o, err) = a.estimate().unwrap();
        assert!((o - 1_000_400_000_000).abs() <= err && err <= 200_000_000, "{o} ± {err}");
    }

    #[test]
    fn zones() {
        assert_eq!(parse_tz("america/toronto").unwrap().name(), "America/Toronto");
        assert_eq!(parse_tz(":UTC").unwrap().name(), "UTC");
        assert!(parse_tz("Mars/Base").is_err());
        let tz = parse_tz("Europe/Paris").unwrap();
        assert_eq!(parse_wall("2022-08-27 12:00:00", Some(tz)).unwrap(), 1_661_594_400 * NS);
        assert_eq!(parse_wall("2022-08-27T10:00:00Z", None).unwrap(), 1_661_594_400 * NS);
        assert_eq!(date_near(tz, NaiveTime::from_hms_opt(23, 0, 0).unwrap(), 1_661_594_400 * NS), Some(d(2022, 8, 27)));
        assert_eq!(date_near(tz, NaiveTime::from_hms_opt(1, 0, 0).unwrap(), 1_661_594_400 * NS), Some(d(2022, 8, 27)));
        assert_eq!(date_near(tz, NaiveTime::from_hms_opt(0, 30, 0).unwrap(), 1_661_637_600 * NS), Some(d(2022, 8, 28)));
    }
}
