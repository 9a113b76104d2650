//! `--from`, `--to` and `--pid`: a window of the run in full detail,
//! given as seconds from the start, a wall-clock time or a phase name.

use rustc_hash::FxHashSet as HashSet;

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};

use crate::scene::Filter;
use crate::survey::Survey;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WindowError {
    #[error("--{which} {given:?}: {why}; {span}")]
    BadTime { which: &'static str, given: String, why: String, span: String },
    #[error("--{which} {given:?}: no phase of that name; {phases}")]
    UnknownPhase { which: &'static str, given: String, phases: String },
    #[error("--from ({from}) is not before --to ({to})")]
    Reversed { from: String, to: String },
    #[error("the window {from} to {to} lies outside the run; {span}")]
    Outside { from: String, to: String, span: String },
    #[error("--pid {pid}: no such process in the log; {known}")]
    UnknownPid { pid: u32, known: String },
}

/// What a user asked for.
#[derive(Clone, Debug, Default)]
pub struct WindowRequest {
    pub from: Option<String>,
    pub to: Option<String>,
    pub pids: Vec<u32>,
}

impl WindowRequest {
    pub fn is_empty(&self) -> bool {
        self.from.is_none() && self.to.is_none() && self.pids.is_empty()
    }
}

/// A resolved window: what to keep, and the time range it spans.
#[derive(Clone, Debug)]
pub struct Window {
    pub filter: Filter,
    pub from: u64,
    pub to: u64,
}

/// `+12.500 s (2026-11-22 21:04:10.000 UTC)`: a time of the run for people.
pub fn describe(run: &Survey, ts: u64) -> String {
    let rel = (ts as i128 - run.start() as i128) as f64 / 1e9;
    match wall(run, ts) {
        Some(t) => format!("+{rel:.3} s ({} UTC)", t.format("%Y-%m-%d %H:%M:%S")),
        None => format!("+{rel:.3} s"),
    }
}

/// The wall-clock time of `ts`, when the log has a clock anchor.
pub fn wall(run: &Survey, ts: u64) -> Option<DateTime<Utc>> {
    let a = run.header.start;
    if a.realtime_ns == 0 {
        return None;
    }
    let ns = a.realtime_ns as i128 + ts as i128 - a.boottime_ns as i128;
    DateTime::from_timestamp(ns.div_euclid(1_000_000_000) as i64, ns.rem_euclid(1_000_000_000) as u32)
}

/// "the run spans +0.000 s (...) to +3600.000 s (...)".
pub fn span_text(run: &Survey) -> String {
    format!("the run spans {} to {}", describe(run, run.start()), describe(run, run.end()))
}

/// The phases, compactly: `INIT, EPOCH 1 … EPOCH 40 (40), EVAL 1 … EVAL 4 (4)`.
pub fn phases_text(run: &Survey) -> String {
    if run.phases.is_empty() {
        return "the log has no training phases".into();
    }
    let mut by_kind: Vec<(String, String, String, usize)> = Vec::new();
    for p in &run.phases {
        let word = p.name.split(' ').next().unwrap_or("").to_string();
        match by_kind.iter_mut().find(|k| k.0 == word) {
            Some(k) => {
                k.2 = p.name.clone();
                k.3 += 1;
            }
            None => by_kind.push((word, p.name.clone(), p.name.clone(), 1)),
        }
    }
    let parts: Vec<String> = by_kind
        .into_iter()
        .map(|(_, first, last, n)| if n == 1 { first } else { format!("{first} … {last} ({n})") })
        .collect();
    format!("the log's phases are {}", parts.join(", "))
}

/// Seconds: `90`, `90.5`, `+90s`, `1500ms`, `2m`, `1h30m`, `1h2m3.5s`.
fn parse_seconds(s: &str) -> Option<f64> {
    let s = s.strip_prefix('+').unwrap_or(s);
    if let Ok(v) = s.parse::<f64>() {
        return (v.is_finite() && v >= 0.0).then_some(v);
    }
    if let Some(ms) = s.strip_suffix("ms") {
        return ms.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0).map(|v| v / 1000.0);
    }
    let (mut total, mut num, mut any) = (0.0, String::new(), false);
    for c in s.chars() {
        match c {
            '0'..='9' | '.' => num.push(c),
            'h' | 'm' | 's' => {
                let v: f64 = num.parse().ok()?;
                total += v * match c {
                    'h' => 3600.0,
                    'm' => 60.0,
                    _ => 1.0,
                };
                num.clear();
                any = true;
            }
            _ => return None,
        }
    }
    (any && num.is_empty()).then_some(total)
}

/// A wall-clock time in UTC: RFC 3339 (any offset), `YYYY-MM-DD HH:MM:SS`,
/// or `HH:MM[:SS]` on the run's first day (the next day when that is
/// before the run started).
fn parse_wall(s: &str, run_start: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for f in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Some(Utc.from_utc_datetime(&t));
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Some(Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0)?));
    }
    for f in ["%H:%M:%S%.f", "%H:%M"] {
        if let Ok(t) = NaiveTime::parse_from_str(s, f) {
            let day = run_start.date_naive();
            let mut at = Utc.from_utc_datetime(&day.and_time(t));
            if at < run_start - chrono::Duration::seconds(1) {
                at += chrono::Duration::days(1);
            }
            return Some(at);
        }
    }
    None
}

/// Resolves one of `--from`/`--to` to a time on the log's clock.
fn resolve_time(run: &Survey, which: &'static str, given: &str) -> Result<u64, WindowError> {
    let s = given.trim();
    if let Some(secs) = parse_seconds(s) {
        return Ok(run.start().saturating_add((secs * 1e9) as u64));
    }
    let looks_like_time = s.chars().next().is_some_and(|c| c.is_ascii_digit()) && (s.contains(':') || s.contains('-'));
    if looks_like_time {
        let bad =
            |why: &str| WindowError::BadTime { which, given: given.into(), why: why.into(), span: span_text(run) };
        let start = wall(run, run.start()).ok_or_else(|| bad("this log has no wall-clock anchor; give seconds"))?;
        let t = parse_wall(s, start).ok_or_else(|| {
            bad("not a time: give seconds from the start (90, 1h30m), a UTC time (2026-11-22 21:04:10, 21:04) or a phase name")
        })?;
        let a = run.header.start;
        let ns = t.timestamp_nanos_opt().ok_or_else(|| bad("out of range"))? as i128;
        let boot = ns - a.realtime_ns as i128 + a.boottime_ns as i128;
        return Ok(boot.clamp(0, u64::MAX as i128) as u64);
    }
    let found = run.phases.iter().find(|p| p.name.eq_ignore_ascii_case(s));
    match found {
        Some(p) if which == "to" => Ok(p.ts + p.dur),
        Some(p) => Ok(p.ts),
        None => Err(WindowError::UnknownPhase { which, given: given.into(), phases: phases_text(run) }),
    }
}

/// Checks a request against the run and turns it into a [`Window`].
pub fn resolve(run: &Survey, req: &WindowRequest) -> Result<Window, WindowError> {
    let from = req.from.as_deref().map(|s| resolve_time(run, "from", s)).transpose()?;
    let to = req.to.as_deref().map(|s| resolve_time(run, "to", s)).transpose()?;
    let (f, t) = (from.unwrap_or(run.start()), to.unwrap_or(run.end().saturating_add(1)));
    if (from.is_some() && to.is_some()) && f >= t {
        return Err(WindowError::Reversed { from: describe(run, f), to: describe(run, t) });
    }
    if f > run.end() || t <= run.start() || f >= t {
        return Err(WindowError::Outside { from: describe(run, f), to: describe(run, t), span: span_text(run) });
    }
    let pids = if req.pids.is_empty() {
        None
    } else {
        let known: HashSet<u32> = run.procs.list.iter().map(|p| p.pid).collect();
        for &pid in &req.pids {
            if !known.contains(&pid) {
                let mut busiest: Vec<_> = run.procs.list.iter().filter(|p| p.syscalls > 0).collect();
                busiest.sort_by_key(|p| std::cmp::Reverse(p.syscalls));
                let list: Vec<String> = busiest.iter().take(8).map(|p| format!("{} ({})", p.pid, p.name)).collect();
                let known = if list.is_empty() {
                    "the log has no process with I/O".to_string()
                } else {
                    format!("its busiest processes are {}", list.join(", "))
                };
                return Err(WindowError::UnknownPid { pid, known });
            }
        }
        Some(req.pids.iter().copied().collect())
    };
    Ok(Window { filter: Filter { from, to, pids }, from: f, to: t })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("90"), Some(90.0));
        assert_eq!(parse_seconds("+1.5"), Some(1.5));
        assert_eq!(parse_seconds("1500ms"), Some(1.5));
        assert_eq!(parse_seconds("1h30m"), Some(5400.0));
        assert_eq!(parse_seconds("2m3.5s"), Some(123.5));
        assert_eq!(parse_seconds("EPOCH 3"), None);
        assert_eq!(parse_seconds("21:04"), None);
        assert_eq!(parse_seconds("-3"), None);
    }

    #[test]
    fn wall_clock() {
        let start = Utc.with_ymd_and_hms(2022, 2, 5, 20, 26, 0).unwrap();
        let at = |h, m, s| Utc.with_ymd_and_hms(2022, 2, 5, h, m, s).unwrap();
        assert_eq!(parse_wall("21:04:10", start), Some(at(21, 4, 10)));
        // Before the start: the next day (a run past midnight).
        assert_eq!(parse_wall("01:00", start), Some(at(1, 0, 0) + chrono::Duration::days(1)));
        assert_eq!(parse_wall("2022-02-05 21:04:10", start), Some(at(21, 4, 10)));
        assert_eq!(parse_wall("2022-02-05T22:04:10+01:00", start), Some(at(21, 4, 10)));
        assert_eq!(parse_wall("tomorrow", start), None);
    }
}
