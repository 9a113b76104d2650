//! Conclusions about the run that the caller computed (the CLI: the
//! verdict, from the stats crate, which the model does not depend on),
//! drawn as the first top-level track: one slice per annotation, those
//! inside another on the lane below it (the run's verdict, then its
//! epochs'); and each rank's data wait over time, a counter per rank in
//! one group below it, so that a job's slow rank shows at a glance.

use std::io;

use crate::args::{ArgKey, ArgSink, FnArgs};
use crate::encoder::{Encoder, Name, Slice, Track, TrackId, TrackKind, Unit};

/// The track's name, as the viewer shows it.
pub const VERDICT_TRACK: &str = "Verdict";
/// The ranks' group: its own row the highest rank's wait in each bin.
pub const RANKS_GROUP: &str = "Data wait per rank (highest, %)";
/// Each rank's lateness at the collectives: its own row the latest rank's.
pub const LATENESS_GROUP: &str = "Lateness at collectives per rank (highest, ms)";
/// What a main thread's wait for the other ranks is called on its track.
pub const COLLECTIVE_WAIT: &str = "waiting for other ranks";

/// A main thread (`pid`'s) waited for the other ranks over `[from, to)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitSlice {
    pub pid: u32,
    pub from: u64,
    pub to: u64,
}

/// One rank's data wait: the share of each `step` ns from `start` its
/// main thread waited for its loaders, in %.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankSeries {
    /// `rank 19 (node2, pid 4242)`.
    pub label: String,
    pub start: u64,
    pub step: u64,
    pub percent: Vec<f64>,
}

impl RankSeries {
    fn time(&self, i: usize) -> u64 {
        self.start.saturating_add(i as u64 * self.step)
    }

    /// The bins that meet `[from, to)`.
    fn bins(&self, from: u64, to: u64) -> std::ops::Range<usize> {
        let step = self.step.max(1);
        let a = (from.saturating_sub(self.start) / step) as usize;
        let b = (to.saturating_sub(self.start).div_ceil(step) as usize).min(self.percent.len());
        a.min(b)..b
    }

    /// Its values over `[from, to)`: (time, value).
    fn within(&self, from: u64, to: u64) -> impl Iterator<Item = (u64, f64)> + '_ {
        self.bins(from, to).map(move |i| (self.time(i).max(from), self.percent[i]))
    }
}

/// Writes values that differ from the one before, then 0 after the last.
fn steps<E: Encoder>(
    enc: &mut E,
    track: TrackId,
    values: impl Iterator<Item = (u64, f64)>,
    end: u64,
) -> io::Result<u64> {
    let (mut last, mut n) = (None, 0);
    for (ts, v) in values {
        if last != Some(v) {
            enc.counter(track, ts, v)?;
            (last, n) = (Some(v), n + 1);
        }
    }
    if last.is_some_and(|v| v != 0.0) {
        enc.counter(track, end, 0.0)?;
        n += 1;
    }
    Ok(n)
}

/// Draws the ranks' series over `[from, to)`: a top-level counter track
/// named `group` (the ranks' data waits, or their lateness), in `unit`,
/// ranked `rank` (the highest of them per bin) with one counter per rank
/// below, in the order given. Returns the counter values written.
pub fn draw_ranks<E: Encoder>(
    enc: &mut E,
    ranks: &[RankSeries],
    (group, unit): (&str, &'static str),
    (from, to): (u64, u64),
    rank: i32,
    next: &mut dyn FnMut() -> TrackId,
) -> io::Result<u64> {
    let Some(first) = ranks.first() else { return Ok(0) };
    let end = |s: &RankSeries| s.start.saturating_add(s.percent.len() as u64 * s.step).min(to);
    if first.start >= to || end(first) <= from {
        return Ok(0);
    }
    let top = next();
    enc.track(&Track { id: top, parent: None, name: group, rank, kind: TrackKind::Counter(Unit::Named(unit)) })?;
    // The series share one grid (the caller's bins over the run).
    let highest = first.bins(from, to).map(|i| {
        let v = ranks.iter().filter_map(|s| s.percent.get(i)).fold(0.0, |a: f64, &b| a.max(b));
        (first.time(i).max(from), v)
    });
    let mut n = steps(enc, top, highest, end(first))?;
    for (i, s) in ranks.iter().enumerate() {
        let id = next();
        let kind = TrackKind::Counter(Unit::Named(unit));
        enc.track(&Track { id, parent: Some(top), name: &s.label, rank: i as i32, kind })?;
        n += steps(enc, id, s.within(from, to), end(s))?;
    }
    Ok(n)
}

/// One conclusion over `[start, end)`: a slice named `label`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Annotation {
    pub start: u64,
    pub end: u64,
    pub label: String,
    pub args: Vec<(ArgKey, String)>,
    /// A lane of its own under the track, so named (each rank's verdict:
    /// `rank 1`); `None`: the run's and the epochs' lanes.
    pub lane: Option<String>,
}

/// A run-wide slice `[start, end)` cut to a file's window `[from, to)`,
/// with what to say of its whole length when it was cut: a part opens on
/// its own span (the UI's first view is the extent of everything in the
/// file), not on the run's that the verdict or an epoch covers.
pub fn clip(start: u64, end: u64, (from, to): (u64, u64)) -> (u64, u64, Option<String>) {
    let s = start.max(from);
    let e = end.min(to).max(s);
    let whole = (s, e) != (start, end);
    let say = || format!("{:.3} s (this file shows {:.3} s of it)", (end - start) as f64 / 1e9, (e - s) as f64 / 1e9);
    (s, e, whole.then(say))
}

/// Draws the annotations that meet `[from, to)`, cut to it, on a top-level slice
/// track (its own row the first lane, so that it shows collapsed) ranked
/// `rank`; `next` hands out track ids. Returns the slices written.
pub fn draw<E: Encoder>(
    enc: &mut E,
    notes: &[Annotation],
    (from, to): (u64, u64),
    rank: i32,
    next: &mut dyn FnMut() -> TrackId,
) -> io::Result<u64> {
    let mut shown: Vec<&Annotation> = notes.iter().filter(|a| a.end >= from && a.start < to).collect();
    if shown.is_empty() {
        return Ok(0);
    }
    shown.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let top = next();
    enc.track(&Track { id: top, parent: None, name: VERDICT_TRACK, rank, kind: TrackKind::Slices })?;
    // Each lane: the end of its latest slice, and the slice's outer end.
    let mut lanes: Vec<(u64, TrackId)> = vec![(0, top)];
    // Named lanes (one per rank) after the epochs'.
    let mut named: Vec<(&str, TrackId)> = Vec::new();
    let mut n = 0;
    for a in shown {
        let (start, end, whole) = clip(a.start, a.end, (from, to));
        let track = if let Some(name) = a.lane.as_deref() {
            match named.iter().find(|l| l.0 == name) {
                Some(l) => l.1,
                None => {
                    let id = next();
                    let rank = 1000 + named.len() as i32;
                    enc.track(&Track { id, parent: Some(top), name, rank, kind: TrackKind::Slices })?;
                    named.push((name, id));
                    id
                }
            }
        } else {
            let lane = match lanes.iter().position(|(e, _)| *e <= start) {
                Some(l) => l,
                None => {
                    let id = next();
                    let name = "epochs";
                    let rank = lanes.len() as i32;
                    enc.track(&Track { id, parent: Some(top), name, rank, kind: TrackKind::Slices })?;
                    lanes.push((0, id));
                    lanes.len() - 1
                }
            };
            lanes[lane].0 = end.max(start + 1);
            lanes[lane].1
        };
        let s = Slice { track, ts: start, dur: end - start, name: Name::Str(&a.label), flows_out: &[], flows_in: &[] };
        enc.slice(
            &s,
            &FnArgs(|sink: &mut dyn ArgSink| {
                for (k, v) in &a.args {
                    sink.str(*k, v.as_bytes());
                }
                if let Some(w) = &whole {
                    sink.str(ArgKey::Whole, w.as_bytes());
                }
            }),
        )?;
        n += 1;
    }
    Ok(n)
}
