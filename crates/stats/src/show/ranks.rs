//! The ranks as `stats` prints them, and `ranks`/`clock_check` of
//! `stats --json`.

use mltrace_log::local_pid;
use serde_json::{json, Value};

use crate::judge::ranks::Rank;
use crate::judge::verdict::Breakdown;
use crate::{pct_or_dash, Stats};

impl Stats {
    pub fn rank_json(&self, r: &Rank) -> Value {
        let b = r.breakdown;
        let f = |x: fn(&Breakdown) -> f64| b.as_ref().map(x);
        let mut v = json!({
            "host": self.host_name(r.pid).map_or_else(|| self.header.host.clone(), str::to_string),
            "pid": local_pid(r.pid),
            "rank": r.rank,
            "rank_from": r.rank_from.unwrap_or("order"),
            "data_wait_fraction": r.data_wait_fraction,
            "collective_wait_fraction": r.collective_wait_fraction,
            "gpu_wait_fraction": f(|b| b.gpu_wait),
            "own_io_fraction": f(|b| b.own_io),
            "on_cpu_fraction": f(|b| b.on_cpu),
            "runnable_fraction": f(|b| b.runnable),
            "other_fraction": f(|b| b.other),
            "loaders": r.loaders,
            "read_bytes": r.read_bytes,
            "read_mb_per_s": r.read_mb_per_s,
            "read_p50_us": r.read_p50_ns.map(|n| n as f64 / 1e3),
            "read_p99_us": r.read_p99_ns.map(|n| n as f64 / 1e3),
            "run_s": r.life_ns as f64 / 1e9,
            "step_s": r.step_ns.map(|n| n / 1e9),
            "step_from": r.step_from.name(),
            "late_collectives": r.last_at,
            "median_lateness_s": (r.last_at > 0).then(|| r.late_ns / 1e9),
            "held_others_s": r.held_ns / 1e9,
            "collectives": r.collectives,
        });
        if let Some(g) = b.and_then(|b| b.gil_wait) {
            v["gil_wait_fraction"] = g.into();
        }
        v
    }

    pub fn clock_check_json(&self, ranks: &[Rank]) -> Value {
        let rows: Vec<Value> = self
            .clock_check(ranks)
            .into_iter()
            .map(|(host, ns, n)| json!({"host": host, "offset_ms": ns / 1e6, "ranks": n}))
            .collect();
        Value::Array(rows)
    }

    /// The ranks as a table (nothing for one).
    pub(crate) fn render_ranks(&self, ranks: &[Rank], o: &mut String) {
        if ranks.len() < 2 {
            return;
        }
        let step_word = ranks.first().map_or("run", |r| r.step_from.name());
        let _ = std::fmt::Write::write_fmt(
            o,
            format_args!("\nranks (processes with data loaders of their own, or in collectives; steps from their {step_word}):\n"),
        );
        let mut rows = vec![[
            "rank",
            "host",
            "pid",
            "step",
            "late",
            "data wait",
            "coll. wait",
            "GPU wait",
            "own I/O",
            "on CPU",
            "read",
            "MB/s",
            "p50",
            "p99",
        ]
        .map(String::from)
        .to_vec()];
        for r in ranks {
            let b = r.breakdown;
            rows.push(vec![
                r.rank.to_string(),
                self.host_name(r.pid).unwrap_or(&self.header.host).to_string(),
                local_pid(r.pid).to_string(),
                r.step_ns.map_or_else(|| "-".into(), |n| crate::duration(n as u64)),
                if r.collectives > 0 { format!("{}/{}", r.last_at, r.collectives) } else { "-".into() },
                pct_or_dash(r.data_wait_fraction),
                pct_or_dash(r.collective_wait_fraction),
                pct_or_dash(b.map(|b| b.gpu_wait)),
                pct_or_dash(b.map(|b| b.own_io)),
                pct_or_dash(b.map(|b| b.on_cpu)),
                crate::bytes(r.read_bytes),
                r.read_mb_per_s.map_or_else(|| "-".into(), |m| format!("{m:.1}")),
                r.read_p50_ns.map_or_else(|| "-".into(), crate::duration),
                r.read_p99_ns.map_or_else(|| "-".into(), crate::duration),
            ]);
        }
        o.push_str(&crate::show::render::table(&rows));
        let clocks = self.clock_check(ranks);
        if !clocks.is_empty() {
            let each: Vec<String> = clocks.iter().map(|(h, ns, _)| format!("{h} {:+.2} ms", ns / 1e6)).collect();
            let _ = std::fmt::Write::write_fmt(
                o,
                format_args!(
                    "clocks, checked by the collectives' ends (ranks leave them together; against the median rank): {}\n",
                    each.join(", ")
                ),
            );
        }
    }
}
