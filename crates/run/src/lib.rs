//! One read of a run for the views that show its verdict (the trace, the
//! report): the model's survey, with the run's verdict and each epoch's
//! and rank's data waits drawn in it as annotations (the model decides
//! how they are drawn), and the stats they came from, in one pass. A view
//! without a verdict (Parquet) reads the survey alone: [`Survey::of`].

use std::io::{Read, Seek};

use mltrace_log::{LogError, LogReader};
use mltrace_model::annotate::{Annotation, RankSeries, WaitSlice};
use mltrace_model::{ArgKey, Found, Survey, Surveying};

use mltrace_model::fmt::pct;
use mltrace_stats::ranks::Rank;
use mltrace_stats::Stats;

/// Ranks given a verdict lane of their own (the rest are in `stats`).
const MAX_RANK_LANES: usize = 64;

/// What a caller needs of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// The survey with the verdict drawn in it where the log has
    /// scheduling records (the trace; the stats are computed, then dropped).
    Verdict,
    /// The survey, its verdict, and the stats (the report).
    Stats,
}

/// A run as read once: the survey, and the stats when asked for.
pub struct Run {
    pub survey: Survey,
    pub stats: Option<Stats>,
}

/// The run as `want`ed: its survey; with [`Want::Verdict`] and
/// [`Want::Stats`] the verdict drawn in it (nothing for a log without
/// scheduling: there is no verdict to show); with [`Want::Stats`] the
/// stats. One pass: the survey rides along the stats'. The reader is
/// rewound.
pub fn read<R: Read + Seek>(reader: &mut LogReader<R>, want: Want) -> Result<Run, LogError> {
    let sched = reader.header().has_probe(mltrace_log::subsystem::SCHEDULING);
    if !sched && want == Want::Verdict {
        return Ok(Run { survey: Survey::of(reader)?, stats: None });
    }
    let mut pass = Surveying::new(reader)?.alongside();
    let stats = Stats::from_reader_with(reader, |f, rec| pass.add(f, rec));
    if stats.is_err() {
        reader.rewind();
    }
    let stats = stats?;
    let found = Found { diagnostics: stats.diagnostics.clone(), checkpoints: stats.checkpoints.clone() };
    let mut survey = pass.finish(reader, Some(found));
    if sched {
        let ranks = stats.ranks();
        survey.ranks = rank_series(&stats, &ranks);
        survey.lateness = lateness_series(&stats, &ranks);
        survey.collective_waits = collective_waits(&stats);
        survey.annotations = verdict(&stats, &ranks);
    }
    Ok(Run { survey, stats: (want == Want::Stats).then_some(stats) })
}

/// The survey with its verdict (see [`read`]).
pub fn survey<R: Read + Seek>(reader: &mut LogReader<R>) -> Result<Survey, LogError> {
    Ok(read(reader, Want::Verdict)?.survey)
}

/// `rank 19 (node2, pid 4242)`.
fn rank_label(stats: &Stats, r: &Rank) -> String {
    let host = stats.host_name(r.pid).map(|h| format!("{h}, ")).unwrap_or_default();
    format!("rank {} ({host}pid {})", r.rank, mltrace_log::local_pid(r.pid))
}

/// Each rank's lateness at the collectives, on the data waits' grid: the
/// latest it arrived in each bin, in ms (none without collectives).
fn lateness_series(stats: &Stats, ranks: &[Rank]) -> Vec<RankSeries> {
    let Some(waits) = stats.sched.rank_waits.as_ref() else { return Vec::new() };
    if ranks.len() < 2 || ranks.iter().all(|r| r.late_points.is_empty()) {
        return Vec::new();
    }
    ranks
        .iter()
        .map(|r| {
            let grid = waits.series(r.pid);
            let mut ms = vec![0.0f64; grid.fractions.len()];
            for &(ts, late) in &r.late_points {
                let i = (ts.saturating_sub(grid.start) / grid.step.max(1)) as usize;
                if let Some(v) = ms.get_mut(i.min(grid.fractions.len().saturating_sub(1))) {
                    *v = v.max((late / 1e5).round() / 10.0);
                }
            }
            let label = format!("{} lateness", rank_label(stats, r));
            RankSeries { label, start: grid.start, step: grid.step, percent: ms }
        })
        .collect()
}

/// Every main thread's waits for the other ranks, by start.
fn collective_waits(stats: &Stats) -> Vec<WaitSlice> {
    let mut out: Vec<WaitSlice> = stats
        .sched
        .episodes
        .iter()
        .flat_map(|(&pid, e)| e.iter().map(move |e| WaitSlice { pid, from: e.from, to: e.to }))
        .collect();
    out.sort_unstable_by_key(|w| (w.from, w.pid));
    out
}

/// Each rank's data wait over time, in rank order (none for one rank:
/// the verdict says it).
fn rank_series(stats: &Stats, ranks: &[Rank]) -> Vec<RankSeries> {
    let Some(waits) = stats.sched.rank_waits.as_ref().filter(|_| ranks.len() >= 2) else { return Vec::new() };
    ranks
        .iter()
        .map(|r| {
            let label = rank_label(stats, r);
            let s = waits.series(r.pid);
            let percent = s.fractions.iter().map(|f| (f * 1000.0).round() / 10.0).collect();
            RankSeries { label, start: s.start, step: s.step, percent }
        })
        .collect()
}

fn verdict(stats: &Stats, ranks: &[Rank]) -> Vec<Annotation> {
    let v = stats.verdict_with(ranks);
    let (Some(start), Some(end)) = (stats.first_ts, stats.last_ts) else { return Vec::new() };
    let mut run = vec![(ArgKey::Verdict, v.kind.to_string())];
    if let Some(d) = v.data_wait_fraction {
        run.push((ArgKey::DataWait, pct(d)));
    }
    if let Some(b) = v.breakdown {
        run.extend([
            (ArgKey::GpuWait, pct(b.gpu_wait)),
            (ArgKey::OwnIo, pct(b.own_io)),
            (ArgKey::OnCpu, pct(b.on_cpu)),
        ]);
    }
    if let Some(g) = v.gpu {
        if let Some(i) = g.idle_fraction {
            run.push((ArgKey::GpuIdle, pct(i)));
        }
        if let Some(d) = g.idle_during_data_wait_fraction {
            run.push((ArgKey::GpuIdleInDataWait, pct(d)));
        }
    }
    let mut out = vec![Annotation { start, end, label: v.text.clone(), args: run, lane: None }];
    // Each rank's own verdict on a lane of its own (a job's launcher is the
    // command: the run's sentence is about one rank).
    if ranks.len() >= 2 {
        for r in ranks.iter().take(MAX_RANK_LANES) {
            let Some(b) = r.breakdown else { continue };
            let Some(p) = stats.processes.iter().find(|p| p.pid == r.pid) else { continue };
            let (from, to) = (p.exec_ts.or(p.started).unwrap_or(start).max(start), p.ended.unwrap_or(end).min(end));
            let mut label = format!("{}: {}", rank_label(stats, r), b.kind());
            let shares = [
                (b.data_wait, "waited for data"),
                (b.collective_wait, "for other ranks"),
                (b.gpu_wait, "for the GPU"),
                (b.gil_wait.unwrap_or(0.0), "for the GIL"),
                (b.on_cpu, "on CPU"),
            ];
            for (f, what) in shares.into_iter().filter(|s| s.0 >= 0.005) {
                label.push_str(&format!(", {what} {}", pct(f)));
            }
            if let Some(s) = r.step_ns {
                label.push_str(&format!(", {:.1} ms a step", s / 1e6));
            }
            let args = vec![
                (ArgKey::Verdict, b.kind().to_string()),
                (ArgKey::DataWait, pct(b.data_wait)),
                (ArgKey::OnCpu, pct(b.on_cpu)),
            ];
            out.push(Annotation {
                start: from,
                end: to.max(from),
                label,
                args,
                lane: Some(format!("rank {}", r.rank)),
            });
        }
    }
    for e in &v.epochs {
        let mut args = vec![(ArgKey::Verdict, e.kind.to_string())];
        let mut label = format!("{}: {}", e.name, e.kind);
        if let Some(d) = e.data_wait_fraction {
            args.push((ArgKey::DataWait, pct(d)));
            label.push_str(&format!(", waited for data {}", pct(d)));
        }
        if let Some(c) = e.cpu_fraction {
            args.push((ArgKey::OnCpu, pct(c)));
        }
        if let Some(b) = e.breakdown {
            args.extend([(ArgKey::GpuWait, pct(b.gpu_wait)), (ArgKey::OwnIo, pct(b.own_io))]);
            if b.gpu_wait >= 0.005 {
                label.push_str(&format!(", for the GPU {}", pct(b.gpu_wait)));
            }
            if b.own_io >= 0.005 {
                label.push_str(&format!(", own file I/O {}", pct(b.own_io)));
            }
            // In the label only: a new arg key would be interned in every trace.
            if let Some(g) = b.gil_wait.filter(|&g| g >= 0.005) {
                label.push_str(&format!(", for the GIL {}", pct(g)));
            }
        }
        if let Some(g) = e.gpu {
            if let Some(i) = g.idle_fraction {
                args.push((ArgKey::GpuIdle, pct(i)));
            }
            if let Some(d) = g.idle_during_data_wait_fraction {
                args.push((ArgKey::GpuIdleInDataWait, pct(d)));
            }
        }
        out.push(Annotation { start: e.start, end: e.end, label, args, lane: None });
    }
    out
}
