//! Time per step and lateness at the collectives, rank by rank: what the
//! straggler is judged on (see docs/verdict.md). Pure functions over
//! times, so that each rule is tested on its own.

use crate::acc::sched::Episode;

/// Where a rank's step time came from, best first: the job's own step
/// marks, its collectives (NCCL calls, or its waits for the other ranks),
/// its batches (its waits for data), or, with none of those for every
/// rank, its whole run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepFrom {
    Marks,
    Collectives,
    Batches,
    Run,
}

impl StepFrom {
    pub fn name(self) -> &'static str {
        match self {
            StepFrom::Marks => "marks",
            StepFrom::Collectives => "collectives",
            StepFrom::Batches => "batches",
            StepFrom::Run => "run",
        }
    }
}

/// Points a step time needs (two periods at least).
pub const MIN_POINTS: usize = 3;

pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// The median period between successive points (ns), `None` with fewer
/// than [`MIN_POINTS`].
pub fn period(points: &[u64]) -> Option<f64> {
    if points.len() < MIN_POINTS {
        return None;
    }
    median(points.windows(2).map(|w| w[1].saturating_sub(w[0]) as f64).collect())
}

/// Steps per second over successive points (ns): (points - 1) / (last -
/// first), the mean rate. Not the median period: steps that alternate
/// (two loaders in phase hand over batches in pairs: 60, 10, 60, 10 ms)
/// have a median period of either, and a rate of one step per 35 ms.
/// `None` with fewer than [`MIN_POINTS`], or no time between them.
pub fn rate(points: &[u64]) -> Option<f64> {
    if points.len() < MIN_POINTS {
        return None;
    }
    let (lo, hi) = points.iter().fold((u64::MAX, 0), |(a, b), &p| (a.min(p), b.max(p)));
    (hi > lo).then(|| (points.len() - 1) as f64 / ((hi - lo) as f64 / 1e9))
}

/// One collective as the ranks met it: each rank's arrival (ns), by its
/// index among the ranks given.
#[derive(Clone, Debug, PartialEq)]
pub struct Meeting {
    pub arrivals: Vec<u64>,
    /// When each rank left it (waits only: NCCL's calls say no end).
    pub leaves: Vec<u64>,
}

impl Meeting {
    /// The rank that arrived last.
    pub fn last(&self) -> usize {
        (0..self.arrivals.len()).max_by_key(|&i| (self.arrivals[i], i)).unwrap_or(0)
    }

    /// How late rank `i` arrived against the median rank (ns, never negative).
    pub fn lateness(&self, i: usize) -> f64 {
        let m = median(self.arrivals.iter().map(|&a| a as f64).collect()).unwrap_or(0.0);
        (self.arrivals[i] as f64 - m).max(0.0)
    }
}

/// NCCL calls: the k-th call of every rank is the same collective.
pub fn meetings_by_order(calls: &[&[u64]]) -> Vec<Meeting> {
    let n = calls.iter().map(|c| c.len()).min().unwrap_or(0);
    (0..n).map(|k| Meeting { arrivals: calls.iter().map(|c| c[k]).collect(), leaves: Vec::new() }).collect()
}

/// Waits for the other ranks (gloo): every rank leaves a collective at
/// about the same moment, so waits that end within `tol` ns of each other,
/// one per rank, are one collective, and each began when its rank arrived.
/// A collective in which some rank did not wait (it arrived when the
/// others' data was there) is left out: its arrival is not known.
pub fn meetings_by_end(waits: &[&[Episode]], tol: u64) -> Vec<Meeting> {
    let n = waits.len();
    let mut all: Vec<(u64, usize, u64)> =
        waits.iter().enumerate().flat_map(|(r, w)| w.iter().map(move |e| (e.to, r, e.from))).collect();
    all.sort_unstable();
    let mut out = Vec::new();
    let mut group: Vec<Option<(u64, u64)>> = vec![None; n];
    let meeting = |g: &[Option<(u64, u64)>]| Meeting {
        arrivals: g.iter().map(|a| a.map_or(0, |a| a.0)).collect(),
        leaves: g.iter().map(|a| a.map_or(0, |a| a.1)).collect(),
    };
    let (mut first_end, mut members) = (0u64, 0usize);
    for (end, r, from) in all {
        if members > 0 && (end.saturating_sub(first_end) > tol || group[r].is_some()) {
            if members == n {
                out.push(meeting(&group));
            }
            group.iter_mut().for_each(|a| *a = None);
            members = 0;
        }
        if members == 0 {
            first_end = end;
        }
        group[r] = Some((from, end));
        members += 1;
    }
    if members == n && n > 0 {
        out.push(meeting(&group));
    }
    out
}

/// Per rank, over the meetings: at how many it arrived last, the median
/// of how late it was then (ns, against the median rank), and how long
/// it held the median rank back in all (ns: what the others waited for it).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Late {
    pub last_at: usize,
    pub late_ns: f64,
    pub held_ns: f64,
}

pub fn lateness(meetings: &[Meeting], ranks: usize) -> Vec<Late> {
    let mut when_last: Vec<Vec<f64>> = vec![Vec::new(); ranks];
    for m in meetings {
        let i = m.last();
        if i < ranks {
            when_last[i].push(m.lateness(i));
        }
    }
    when_last
        .into_iter()
        .map(|v| Late { last_at: v.len(), held_ns: v.iter().sum(), late_ns: median(v).unwrap_or(0.0) })
        .collect()
}

/// Per rank, the median of how much later than the median rank it left
/// the collectives (ns): ranks leave together, so on one clock this is
/// about 0, and on a merged log it is how far its host's clock is off.
/// `None` without leave times.
pub fn leave_offsets(meetings: &[Meeting], ranks: usize) -> Vec<Option<f64>> {
    (0..ranks)
        .map(|i| {
            let d: Vec<f64> = meetings
                .iter()
                .filter(|m| m.leaves.len() == ranks)
                .map(|m| m.leaves[i] as f64 - median(m.leaves.iter().map(|&l| l as f64).collect()).unwrap_or(0.0))
                .collect();
            median(d)
        })
        .collect()
}

/// The median period between meetings (ns): the same for every rank.
pub fn meeting_period(meetings: &[Meeting]) -> Option<f64> {
    let times: Vec<u64> = meetings.iter().map(|m| m.arrivals.iter().copied().max().unwrap_or(0)).collect();
    period(&times)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(from: u64, to: u64) -> Episode {
        Episode { from, to }
    }

    #[test]
    fn periods_and_medians() {
        assert_eq!(period(&[0, 100]), None);
        assert_eq!(period(&[0, 100, 250, 350]), Some(100.0));
        assert_eq!(median(vec![0.4, 0.1, 0.2, 0.3]), Some(0.25));
        assert_eq!(median(vec![]), None);
        assert_eq!(rate(&[0, 100_000_000]), None);
        // Alternating steps: the mean rate, whatever the median period.
        let alternating = [0, 60, 70, 130, 140, 200, 210].map(|ms| ms * 1_000_000);
        assert_eq!(rate(&alternating), Some(6.0 / 0.21));
        assert_eq!(rate(&[5, 5, 5]), None);
    }

    /// Three ranks leave together every 100 ns; rank 1 arrives last at
    /// each (it waits least), 40 ns after the median one.
    #[test]
    fn waits_that_end_together_are_one_collective() {
        let r0 = [ep(10, 100), ep(110, 200), ep(215, 300)];
        let r1 = [ep(60, 101), ep(160, 201), ep(260, 301)];
        let r2 = [ep(20, 99), ep(120, 199), ep(205, 299)];
        let m = meetings_by_end(&[&r0, &r1, &r2], 25);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].arrivals, vec![10, 60, 20]);
        assert!(m.iter().all(|m| m.last() == 1));
        let l = lateness(&m, 3);
        // 40, 40 and 45 ns late (the third time the median arrived at 215).
        assert_eq!(l[1], Late { last_at: 3, late_ns: 40.0, held_ns: 125.0 });
        assert_eq!(l[0].last_at + l[2].last_at, 0);
        assert_eq!(meeting_period(&m), Some(100.0));
        // They left within a nanosecond of each other.
        assert_eq!(leave_offsets(&m, 3), vec![Some(0.0), Some(1.0), Some(-1.0)]);
    }

    /// A collective one rank did not wait in is left out; a rank's second
    /// wait within the tolerance starts a new group, not a second arrival.
    #[test]
    fn incomplete_collectives_are_left_out() {
        let r0 = [ep(10, 100), ep(110, 200)];
        let r1 = [ep(60, 101)];
        let m = meetings_by_end(&[&r0, &r1], 50);
        assert_eq!(m, vec![Meeting { arrivals: vec![10, 60], leaves: vec![100, 101] }]);
        let r0 = [ep(10, 100), ep(101, 102)];
        let r1 = [ep(60, 103)];
        assert_eq!(meetings_by_end(&[&r0, &r1], 50).len(), 1);
    }

    #[test]
    fn nccl_calls_meet_in_order() {
        let a = [100, 200, 300];
        let b = [150, 260];
        let m = meetings_by_order(&[&a, &b]);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].last(), m[1].last()), (1, 1));
        assert_eq!(m[1].lateness(1), 30.0);
    }
}
