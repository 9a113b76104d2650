//! Conclusions about the run that the caller computed (the CLI: the
//! verdict, from the stats crate, which the model does not depend on),
//! drawn as the first top-level track: one slice per annotation, those
//! inside another on the lane below it (the run's verdict, then its
//! epochs').

use std::io;

use crate::args::{ArgKey, ArgSink, FnArgs};
use crate::encoder::{Encoder, Name, Slice, Track, TrackId, TrackKind};

/// The track's name, as the viewer shows it.
pub const VERDICT_TRACK: &str = "Verdict";

/// One conclusion over `[start, end)`: a slice named `label`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Annotation {
    pub start: u64,
    pub end: u64,
    pub label: String,
    pub args: Vec<(ArgKey, String)>,
}

/// Draws the annotations that meet `[from, to)` on a top-level slice
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
    let mut n = 0;
    for a in shown {
        let lane = match lanes.iter().position(|(end, _)| *end <= a.start) {
            Some(l) => l,
            None => {
                let id = next();
                let name = "epochs";
                enc.track(&Track { id, parent: Some(top), name, rank: lanes.len() as i32, kind: TrackKind::Slices })?;
                lanes.push((0, id));
                lanes.len() - 1
            }
        };
        lanes[lane].0 = a.end.max(a.start + 1);
        let s = Slice {
            track: lanes[lane].1,
            ts: a.start,
            dur: a.end.saturating_sub(a.start),
            name: Name::Str(&a.label),
            flows_out: &[],
            flows_in: &[],
        };
        enc.slice(
            &s,
            &FnArgs(|sink: &mut dyn ArgSink| {
                for (k, v) in &a.args {
                    sink.str(*k, v.as_bytes());
                }
            }),
        )?;
        n += 1;
    }
    Ok(n)
}
