//! The trainer's wait for its batch, step by step: the tail a user tuning
//! `prefetch_factor` looks at, not the mean share of its time.

use crate::acc::sched::Episode;
use crate::acc::steps::{StepFrom, MIN_POINTS};

/// Steps at the start of each epoch left out: the first batches wait for
/// the loaders to start and fill their queue, a cost paid once an epoch.
pub const WARMUP_STEPS: usize = 2;

/// Per-step waits over a span (an epoch, a rank, the run).
#[derive(Clone, Debug, PartialEq)]
pub struct Waits {
    pub name: String,
    /// Steps counted (after those left out).
    pub steps: usize,
    pub left_out: usize,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl Waits {
    /// `None` when no step is left after the warm-up ones.
    fn of(name: &str, mut waits: Vec<u64>, left_out: usize) -> Option<Waits> {
        if waits.is_empty() {
            return None;
        }
        waits.sort_unstable();
        // Nearest rank: the smallest wait that q of the steps do not exceed.
        let q = |q: f64| waits[((q * waits.len() as f64).ceil() as usize).clamp(1, waits.len()) - 1];
        Some(Waits {
            name: name.to_string(),
            steps: waits.len(),
            left_out,
            p50_ns: q(0.50),
            p95_ns: q(0.95),
            p99_ns: q(0.99),
            max_ns: *waits.last().unwrap(),
        })
    }
}

/// The trainer's step waits (and each rank's, with several).
#[derive(Clone, Debug, PartialEq)]
pub struct StepWaits {
    pub from: StepFrom,
    /// Every epoch's steps together (or the run's, without epochs).
    pub run: Waits,
    pub epochs: Vec<Waits>,
    /// (pid, rank, its run's waits), by rank.
    pub ranks: Vec<(u32, usize, Waits)>,
    /// The run's steps counted, by wait: [`HIST_UPPER_NS`]'s buckets.
    pub hist: Vec<u64>,
}

/// Upper bounds of the histogram's buckets (the last is open).
pub const HIST_UPPER_NS: [u64; 10] = [
    100_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
];

/// The buckets' labels: `< 0.1 ms`, `1-2 ms`, ..., `>= 500 ms`.
pub fn hist_labels() -> Vec<String> {
    let ms = |ns: u64| format!("{}", ns as f64 / 1e6);
    let mut out = vec![format!("< {} ms", ms(HIST_UPPER_NS[0]))];
    out.extend(HIST_UPPER_NS.windows(2).map(|w| format!("{}-{} ms", ms(w[0]), ms(w[1]))));
    out.push(format!(">= {} ms", ms(HIST_UPPER_NS[HIST_UPPER_NS.len() - 1])));
    out
}

/// Steps counted per bucket of [`HIST_UPPER_NS`].
pub fn histogram(waits: &[u64]) -> Vec<u64> {
    let mut h = vec![0; HIST_UPPER_NS.len() + 1];
    for &w in waits {
        h[HIST_UPPER_NS.partition_point(|&u| u <= w)] += 1;
    }
    h
}

/// One process's steps as (start, wait): from its step marks, each step
/// from one mark to the next, its wait the data waits inside (zero when
/// its batch was ready); else from its waits for data, one step each (a
/// step whose batch was ready is then not seen).
pub fn steps_of(marks: Option<&[u64]>, batches: &[Episode]) -> Option<(StepFrom, Vec<(u64, u64)>)> {
    if let Some(m) = marks.filter(|m| m.len() >= MIN_POINTS) {
        let mut steps = Vec::with_capacity(m.len());
        let mut i = batches.partition_point(|b| b.to <= m[0]);
        for w in m.windows(2) {
            let (from, to) = (w[0], w[1]);
            let mut wait = 0;
            while let Some(b) = batches.get(i) {
                if b.from >= to {
                    break;
                }
                wait += b.to.min(to).saturating_sub(b.from.max(from));
                if b.to > to {
                    break;
                }
                i += 1;
            }
            steps.push((from, wait));
        }
        return Some((StepFrom::Marks, steps));
    }
    (batches.len() >= MIN_POINTS)
        .then(|| (StepFrom::Batches, batches.iter().map(|b| (b.from, b.to.saturating_sub(b.from))).collect()))
}

/// Waits per epoch (`epochs`: name, start, end; none: the run as one),
/// each epoch's first [`WARMUP_STEPS`] left out, all of them pooled, and
/// the pooled waits' [`histogram`].
pub fn by_epoch(steps: &[(u64, u64)], epochs: &[(String, u64, u64)]) -> (Option<Waits>, Vec<Waits>, Vec<u64>) {
    let whole = [("run".to_string(), 0, u64::MAX)];
    let spans: &[(String, u64, u64)] = if epochs.is_empty() { &whole } else { epochs };
    let (mut pooled, mut out, mut left) = (Vec::new(), Vec::new(), 0);
    for (name, start, end) in spans {
        let mine: Vec<u64> = steps.iter().filter(|s| s.0 >= *start && s.0 < *end).map(|s| s.1).collect();
        let skip = mine.len().min(WARMUP_STEPS);
        left += skip;
        let kept = mine[skip..].to_vec();
        pooled.extend_from_slice(&kept);
        if let Some(w) = Waits::of(name, kept, skip) {
            out.push(w);
        }
    }
    let hist = histogram(&pooled);
    (Waits::of("run", pooled, left), if epochs.is_empty() { Vec::new() } else { out }, hist)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(from: u64, to: u64) -> Episode {
        Episode { from, to }
    }

    #[test]
    fn marks_give_every_step_its_wait_even_none() {
        let marks = [0, 100, 200, 300, 400];
        // Waits in steps 0 and 2; one crossing from step 2 into step 3.
        let batches = [ep(10, 30), ep(210, 320)];
        let (from, steps) = steps_of(Some(&marks), &batches).unwrap();
        assert_eq!(from, StepFrom::Marks);
        assert_eq!(steps, vec![(0, 20), (100, 0), (200, 90), (300, 20)]);
    }

    #[test]
    fn without_marks_each_wait_is_a_step() {
        let batches = [ep(0, 5), ep(10, 30), ep(40, 41)];
        let (from, steps) = steps_of(None, &batches).unwrap();
        assert_eq!(from, StepFrom::Batches);
        assert_eq!(steps, vec![(0, 5), (10, 20), (40, 1)]);
        assert!(steps_of(Some(&[1]), &batches[..1]).is_none());
    }

    #[test]
    fn warmup_steps_are_left_out_per_epoch_and_percentiles_are_nearest_rank() {
        // Two epochs of 12 steps: a 1000 ns warm-up wait, then 1..=10.
        let mut steps = Vec::new();
        for e in 0..2u64 {
            let base = e * 1000;
            steps.push((base, 1000));
            steps.push((base + 1, 1000));
            for k in 1..=10 {
                steps.push((base + 10 + k, k));
            }
        }
        let epochs = vec![("EPOCH 1".to_string(), 0, 1000), ("EPOCH 2".to_string(), 1000, 2000)];
        let (run, per, hist) = by_epoch(&steps, &epochs);
        assert_eq!(hist.iter().sum::<u64>(), 20);
        assert_eq!(hist[0], 20, "all under 0.1 ms");
        assert_eq!(histogram(&[100_000, 99_999, 600_000_000]), vec![1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(hist_labels().len(), HIST_UPPER_NS.len() + 1);
        assert_eq!(hist_labels()[2], "1-2 ms");
        let run = run.unwrap();
        assert_eq!((run.steps, run.left_out, run.max_ns), (20, 4, 10));
        assert_eq!((run.p50_ns, run.p95_ns, run.p99_ns), (5, 10, 10));
        assert_eq!(per.len(), 2);
        assert_eq!((per[0].name.as_str(), per[0].steps, per[0].p50_ns, per[0].p95_ns), ("EPOCH 1", 10, 5, 10));
        // Without epochs: the run is one, its first two left out.
        let (run, per, _) = by_epoch(&steps, &[]);
        assert!(per.is_empty());
        assert_eq!((run.unwrap().left_out, per.len()), (2, 0));
    }
}
