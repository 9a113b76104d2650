//! The verdict as `stats` prints it after the tables and as `verdict` of
//! `stats --json`: its breakdown, epochs, step waits and suggestions.

use serde_json::{json, Map, Value};

use crate::acc::steps::StepFrom;
use crate::judge::step_waits::{StepWaits, Waits, HIST_UPPER_NS, WARMUP_STEPS};
use crate::judge::suggest::Suggestion;
use crate::judge::verdict::{Breakdown, EpochVerdict, GpuOverlap, Verdict};
use crate::{pct, Stats};

impl Breakdown {
    pub fn to_json(self) -> Value {
        Value::Object(self.shares().map(|s| (s.key.to_string(), Value::from((s.of)(&self)))).collect())
    }
}

/// `gpu_idle_fraction` and `gpu_idle_during_data_wait_fraction` (null
/// without GPU counters).
fn gpu_json(g: &Option<GpuOverlap>) -> (Value, Value) {
    match g {
        Some(g) => (Value::from(g.idle_fraction), Value::from(g.idle_during_data_wait_fraction)),
        None => (Value::Null, Value::Null),
    }
}

impl Verdict {
    pub fn to_json(&self) -> Value {
        let (idle, during) = gpu_json(&self.gpu);
        let workers = self.workers.as_ref().map_or(Value::Null, |w| {
            json!({
                "kind": w.kind,
                "count": w.count,
                "at_once": w.at_once,
                "read_fraction": w.read_fraction,
                "io_wait_fraction": w.io_wait_fraction,
                "cpu_fraction": w.cpu_fraction,
                "runnable_fraction": w.runnable_fraction,
                "files": w.files.as_ref().map(|f| f.0.clone()),
                "files_share": w.files.as_ref().map(|f| f.1),
                "read_bytes": w.read_bytes,
                "read_ns": w.read_ns,
                "read_p50_ns": w.read_p50_ns,
                "read_p99_ns": w.read_p99_ns,
                "cache_fraction": w.cache_fraction,
            })
        });
        let epochs: Vec<Value> = self.epochs.iter().map(EpochVerdict::to_json).collect();
        json!({
            "kind": self.kind,
            "text": self.text,
            "trainer_pid": self.trainer_pid,
            "data_wait_fraction": self.data_wait_fraction,
            "breakdown": self.breakdown.map(|b| b.to_json()),
            "workers": workers,
            "gpu_idle_fraction": idle,
            "gpu_idle_during_data_wait_fraction": during,
            "epochs": epochs,
            "step_waits": self.step_waits.as_ref().map_or(Value::Null, |s| s.to_json()),
            "straggler": self.straggler,
            "suggestions": self.suggestions.iter().map(|s| s.to_json()).collect::<Vec<_>>(),
            "suggestions_note": self.suggestions_note,
        })
    }
}

impl EpochVerdict {
    /// An epoch's entry of `verdict.epochs` (and `stats --from/--to`'s
    /// `window`).
    pub fn to_json(&self) -> Value {
        let (idle, during) = gpu_json(&self.gpu);
        json!({
            "name": self.name,
            "start": self.start,
            "end": self.end,
            "kind": self.kind,
            "data_wait_fraction": self.data_wait_fraction,
            "cpu_fraction": self.cpu_fraction,
            "breakdown": self.breakdown.map(|b| b.to_json()),
            "gpu_idle_fraction": idle,
            "gpu_idle_during_data_wait_fraction": during,
            "read_bytes": self.read_bytes.round() as u64,
            "from_storage_bytes": self.storage_bytes.map(|b| b.round() as u64),
            "cache_hit_fraction": self.cache_hit_fraction(),
            "read_mb_per_s": self.read_mb_per_s(),
        })
    }
}

/// The first epoch against the others, from what the loaders read:
/// `EPOCH 1: its loaders read 16.0 MiB, bringing 15.9 MiB from storage, at
/// 410.2 MB/s; later epochs: 100% from the page cache, at 2100.0 MB/s`.
/// `None` when no epoch read anything.
pub fn epoch_reads_line(epochs: &[EpochVerdict]) -> Option<String> {
    let first = epochs.first().filter(|e| e.read_bytes > 0.0)?;
    let rate = |e: &EpochVerdict| e.read_mb_per_s().map_or_else(String::new, |r| format!(", at {r:.1} MB/s"));
    let storage = |e: &EpochVerdict| match e.storage_bytes {
        Some(s) => format!(", bringing {} from storage", crate::bytes(s.round() as u64)),
        None => String::new(),
    };
    let mut t = format!(
        "{}: its loaders read {}{}{}",
        first.name,
        crate::bytes(first.read_bytes.round() as u64),
        storage(first),
        rate(first)
    );
    let later: Vec<&EpochVerdict> = epochs[1..].iter().filter(|e| e.read_bytes > 0.0).collect();
    if !later.is_empty() {
        let hits: Vec<f64> = later.iter().filter_map(|e| e.cache_hit_fraction()).collect();
        let rates: Vec<f64> = later.iter().filter_map(|e| e.read_mb_per_s()).collect();
        let range = |v: &[f64], f: &dyn Fn(f64) -> String| {
            let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            if f(lo) == f(hi) {
                f(lo)
            } else {
                format!("{} to {}", f(lo), f(hi))
            }
        };
        t += "; later epochs: ";
        if !hits.is_empty() {
            t += &format!("{} from the page cache", range(&hits, &|x| pct(x)));
        } else {
            t += &format!(
                "{} read",
                range(&later.iter().map(|e| e.read_bytes).collect::<Vec<_>>(), &|x| crate::bytes(x.round() as u64))
            );
        }
        if !rates.is_empty() {
            t += &format!(", at {} MB/s", range(&rates, &|x| format!("{x:.1}")));
        }
    }
    Some(t)
}

impl Suggestion {
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("rule".into(), self.rule.into());
        m.insert("text".into(), self.text.clone().into());
        m.insert("explains".into(), self.explains.into());
        for (k, v) in &self.figures {
            m.insert((*k).into(), v.clone());
        }
        Value::Object(m)
    }
}

/// The block `stats` prints after the verdict.
pub fn render_suggestions(v: &Verdict, o: &mut String) {
    use std::fmt::Write as _;
    if v.suggestions.is_empty() {
        if let Some(n) = &v.suggestions_note {
            let _ = writeln!(o, "next:     {n}");
        }
        return;
    }
    let _ = writeln!(o, "What to try next (from the figures of this log):");
    for (i, s) in v.suggestions.iter().enumerate() {
        let _ = writeln!(o, "  {}. {}", i + 1, s.text);
    }
}

impl Waits {
    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "steps": self.steps,
            "left_out": self.left_out,
            "p50_ns": self.p50_ns,
            "p95_ns": self.p95_ns,
            "p99_ns": self.p99_ns,
            "max_ns": self.max_ns,
        })
    }
}

impl StepWaits {
    pub fn to_json(&self) -> Value {
        json!({
            "from": self.from.name(),
            "warmup_steps_left_out_per_epoch": WARMUP_STEPS,
            "run": self.run.to_json(),
            "epochs": self.epochs.iter().map(Waits::to_json).collect::<Vec<_>>(),
            "histogram": HIST_UPPER_NS.iter().map(|&u| Some(u)).chain([None]).zip(&self.hist)
                .map(|(u, n)| json!({"below_ns": u, "steps": n})).collect::<Vec<_>>(),
            "ranks": self.ranks.iter().map(|(pid, rank, w)| {
                let mut v = w.to_json();
                v["pid"] = json!(pid);
                v["rank"] = json!(rank);
                v
            }).collect::<Vec<_>>(),
        })
    }

    /// `step waits (the trainer's wait for each batch, from its step
    /// marks, 118 steps; the first 2 of each epoch left out: loaders
    /// starting): p50 1.2 ms, p95 40.1 ms, p99 52.0 ms, max 60.3 ms`.
    pub fn line(&self) -> String {
        let r = &self.run;
        let from = match self.from {
            StepFrom::Marks => "from its step marks",
            _ => "from its waits for data (a step whose batch was ready is not seen)",
        };
        format!(
            "step waits (the trainer's wait for each batch, {from}, {} steps; the first {WARMUP_STEPS} of each \
             epoch left out: loaders starting): p50 {}, p95 {}, p99 {}, max {}",
            r.steps,
            crate::duration(r.p50_ns),
            crate::duration(r.p95_ns),
            crate::duration(r.p99_ns),
            crate::duration(r.max_ns)
        )
    }
}

impl Stats {
    /// The verdict per epoch, as a table (nothing without epochs).
    pub(crate) fn render_epochs(&self, v: &Verdict, o: &mut String) {
        use std::fmt::Write as _;
        if v.epochs.is_empty() {
            return;
        }
        let gpus = v.epochs.iter().any(|e| e.gpu.is_some());
        let _ = writeln!(o, "verdict per epoch (the trainer's main thread; GPU idle: SM below 10%):");
        let mut head = vec!["epoch", "start", "duration", "data wait", "GPU wait", "own I/O", "on CPU"];
        if gpus {
            head.extend(["GPU idle", "of it in data waits"]);
        }
        head.push("verdict");
        let mut rows = vec![head.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        let t0 = self.first_ts.unwrap_or(0);
        let opt = |f: Option<f64>| f.map_or_else(|| "-".to_string(), pct);
        for e in &v.epochs {
            let mut r = vec![
                e.name.clone(),
                format!("+{}", crate::duration(e.start.saturating_sub(t0))),
                crate::duration(e.end.saturating_sub(e.start)),
                opt(e.data_wait_fraction),
                opt(e.breakdown.map(|b| b.gpu_wait)),
                opt(e.breakdown.map(|b| b.own_io)),
                opt(e.cpu_fraction),
            ];
            if gpus {
                r.push(opt(e.gpu.and_then(|g| g.idle_fraction)));
                r.push(opt(e.gpu.and_then(|g| g.idle_during_data_wait_fraction)));
            }
            r.push(e.kind.to_string());
            rows.push(r);
        }
        o.push_str(&crate::show::render::table(&rows));
        if let Some(line) = epoch_reads_line(&v.epochs) {
            let _ = writeln!(o, "{line}");
        }
        o.push('\n');
    }

    /// The trainer's step waits: one line, and a table per epoch and rank.
    pub(crate) fn render_step_waits(v: &Verdict, o: &mut String) {
        use std::fmt::Write as _;
        let Some(s) = &v.step_waits else { return };
        let _ = writeln!(o, "{}", s.line());
        if s.epochs.len() > 1 || !s.ranks.is_empty() {
            let mut rows = vec![["", "steps", "p50", "p95", "p99", "max"].map(String::from).to_vec()];
            let row = |name: String, w: &crate::judge::step_waits::Waits| {
                let d = crate::duration;
                vec![name, w.steps.to_string(), d(w.p50_ns), d(w.p95_ns), d(w.p99_ns), d(w.max_ns)]
            };
            rows.extend(s.epochs.iter().map(|w| row(w.name.clone(), w)));
            rows.extend(s.ranks.iter().map(|(pid, rank, w)| row(format!("rank {rank} ({pid})"), w)));
            o.push_str(&crate::show::render::table(&rows));
        }
        o.push('\n');
    }
}

#[cfg(test)]
mod tests {
    /// Epoch 1 from storage, the later ones from the page cache: one line.
    #[test]
    fn the_first_epoch_against_the_later_ones() {
        use super::{epoch_reads_line, EpochVerdict};
        let e = |name: &str, start: u64, read: f64, storage: f64| EpochVerdict {
            name: name.into(),
            start,
            end: start + 1_000_000_000,
            kind: "input-bound",
            data_wait_fraction: None,
            cpu_fraction: None,
            breakdown: None,
            gpu: None,
            read_bytes: read,
            storage_bytes: Some(storage),
        };
        let gib = (1u64 << 30) as f64;
        let epochs = [
            e("EPOCH 1", 0, 17.0 * gib, 16.9 * gib),
            e("EPOCH 2", 1, 17.0 * gib, 0.0),
            e("EPOCH 3", 2, 17.0 * gib, 0.0),
        ];
        assert_eq!(
            epoch_reads_line(&epochs).unwrap(),
            "EPOCH 1: its loaders read 17.0 GiB, bringing 16.9 GiB from storage, at 18253.6 MB/s; later epochs: \
             100% from the page cache, at 18253.6 MB/s"
        );
        assert!(epoch_reads_line(&[e("EPOCH 1", 0, 0.0, 0.0)]).is_none());
    }
}
