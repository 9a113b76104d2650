//! The verdict for the trace: computed by the stats crate in the pass
//! that takes the model's survey, handed to the model as annotations (the
//! model decides how they are drawn).

use std::io::{Read, Seek};

use mltrace_log::{LogError, LogReader};
use mltrace_model::annotate::{Annotation, RankSeries};
use mltrace_model::{ArgKey, Found, Survey, Surveying};
use mltrace_stats::Stats;

fn pct(f: f64) -> String {
    format!("{:.0}%", f * 100.0)
}

/// The survey of the run, with the run's verdict and each epoch's and
/// the ranks' data waits drawn in it (nothing for a log without
/// scheduling: there is no verdict to show). One pass: the survey rides
/// along the verdict's. The reader is rewound.
pub fn survey<R: Read + Seek>(reader: &mut LogReader<R>) -> Result<Survey, LogError> {
    if !reader.header().probes.iter().any(|p| p.subsystem == "scheduling") {
        return Survey::of(reader);
    }
    let mut pass = Surveying::new(reader)?.alongside();
    let stats = Stats::from_reader_with(reader, |f, rec| pass.add(f, rec));
    if stats.is_err() {
        reader.rewind();
    }
    let stats = stats?;
    let found = Found { diagnostics: stats.diagnostics.clone(), checkpoints: stats.checkpoints.clone() };
    let mut survey = pass.finish(reader, Some(found));
    survey.ranks = rank_series(&stats);
    survey.annotations = verdict(&stats);
    Ok(survey)
}

/// Each rank's data wait over time, in rank order (none for one rank:
/// the verdict says it).
fn rank_series(stats: &Stats) -> Vec<RankSeries> {
    let ranks = stats.ranks();
    let Some(waits) = stats.sched.rank_waits.as_ref().filter(|_| ranks.len() >= 2) else { return Vec::new() };
    ranks
        .iter()
        .map(|r| {
            let host = stats.host_name(r.pid).map(|h| format!("{h}, ")).unwrap_or_default();
            let label = format!("rank {} ({host}pid {})", r.rank, mltrace_log::local_pid(r.pid));
            let s = waits.series(r.pid);
            let percent = s.fractions.iter().map(|f| (f * 1000.0).round() / 10.0).collect();
            RankSeries { label, start: s.start, step: s.step, percent }
        })
        .collect()
}

fn verdict(stats: &Stats) -> Vec<Annotation> {
    let v = stats.verdict();
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
    let mut out = vec![Annotation { start, end, label: v.text.clone(), args: run }];
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
        }
        if let Some(g) = e.gpu {
            if let Some(i) = g.idle_fraction {
                args.push((ArgKey::GpuIdle, pct(i)));
            }
            if let Some(d) = g.idle_during_data_wait_fraction {
                args.push((ArgKey::GpuIdleInDataWait, pct(d)));
            }
        }
        out.push(Annotation { start: e.start, end: e.end, label, args });
    }
    out
}
