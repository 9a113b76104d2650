//! Two runs compared, as `mltrace diff` prints them and as its JSON: the
//! conclusion, the tables and the notes, from the figures
//! [`crate::judge::diff`] judges.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::judge::diff::*;
use crate::judge::verdict::Share;
use crate::{bytes, duration, pct};

impl RunFigures {
    pub(crate) fn json(&self) -> Value {
        json!({
            "file": self.file,
            "command": self.command,
            "host": self.host,
            "kernel": self.kernel,
            "cpus": self.cpus,
            "started": self.started,
            "detail": self.detail,
            "complete": self.complete,
            "lost": self.lost,
            "warnings": self.warnings,
            "trainer_pid": self.trainer_pid,
            "verdict": self.verdict,
            "step_from": self.steps.map(|s| s.from.name()),
            "step_points": self.steps.map(|s| s.points),
            "loaders": self.loaders.as_ref().map(|l| json!({"kind": l.kind, "count": l.count})),
            "epochs": self.epochs.len(),
            "ranks": self.ranks.len(),
        })
    }

    /// What may make its figures less than whole: a cut log, lost events,
    /// the warnings `stats` gives.
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.complete {
            out.push("the log was cut (no trailer): its figures end where it ends".to_string());
        }
        if self.lost > 0 {
            out.push(format!("{} events lost", self.lost));
        }
        out.extend(self.warnings.iter().cloned());
        out
    }
}

impl Pair {
    pub(crate) fn json(&self) -> Value {
        json!({
            "before": self.before,
            "after": self.after,
            "delta": self.delta(),
            "ratio": self.ratio(),
        })
    }

    /// As [`Pair::json`], for counts of bytes (integers).
    pub(crate) fn json_bytes(&self) -> Value {
        let int = |v: Option<f64>| v.map(|v| v.round() as i64);
        json!({
            "before": int(self.before),
            "after": int(self.after),
            "delta": int(self.delta()),
            "ratio": self.ratio(),
        })
    }
}

impl Diff {
    /// The one line: what changed, in measured figures only.
    pub fn conclusion(&self) -> String {
        let time = self.time_judged();
        let io: Vec<Judged> = self.io_judged().into_iter().filter(Judged::beyond).collect();
        let io_text = |io: &[Judged]| -> Vec<String> {
            io.iter()
                .filter_map(|j| match j.key.as_str() {
                    "io.from_storage_bytes" => {
                        Some(format!("from storage {}", arrow(&j.pair, |b| bytes(b.round() as u64))))
                    }
                    "io.hit_ratio" => Some(format!("page-cache hits {}", arrow(&j.pair, pct))),
                    _ => None,
                })
                .collect()
        };
        if time.is_empty() {
            return "nothing to compare: neither the time nor the steps of both runs are known".into();
        }
        if time.iter().all(|j| !j.beyond()) {
            let worst_share =
                time.iter().filter(|j| j.key.starts_with("breakdown.")).max_by(|a, b| a.apart.total_cmp(&b.apart));
            let mut parts = Vec::new();
            if let Some(j) = worst_share {
                let name = SHARES.iter().find(|s| j.key.ends_with(s.key)).map_or("", |s| s.name);
                parts.push(format!(
                    "every share of the trainer's time within {} (most apart: {name} {})",
                    bound(j.bound),
                    arrow(&j.pair, pct)
                ));
            }
            for (key, what) in [("wall_s", "wall time"), ("steps_per_s", "steps/s")] {
                if let Some(j) = time.iter().find(|j| j.key == key) {
                    let f = |v: f64| if key == "wall_s" { duration((v * 1e9) as u64) } else { rate(v) };
                    parts.push(format!("{what} within {} ({})", pct(j.bound), arrow(&j.pair, f)));
                }
            }
            let mut t = format!("no measurable difference: {}", parts.join(", "));
            let io = io_text(&io);
            if !io.is_empty() {
                t += &format!("; but its reads differ: {}", io.join(", "));
            }
            return t;
        }
        let mut parts: Vec<String> = Vec::new();
        let (kb, ka) = (self.before.kind, self.after.kind);
        // The stalls first (what the kind is named for), each by its change.
        let stall = |j: &Judged| {
            ["data_wait", "collective_wait", "gpu_wait", "own_io"].iter().any(|k| j.key == format!("breakdown.{k}"))
        };
        let mut shares: Vec<&Judged> = time.iter().filter(|j| j.key.starts_with("breakdown.") && j.beyond()).collect();
        shares.sort_by(|a, b| stall(b).cmp(&stall(a)).then(b.apart.total_cmp(&a.apart)));
        for (i, j) in shares.iter().take(2).enumerate() {
            let name = SHARES.iter().find(|s| j.key.ends_with(s.key)).map_or("", |s| s.name);
            let whose = if i == 0 { " of the trainer's time" } else { "" };
            parts.push(format!("{name} {}{whose}", arrow(&j.pair, pct)));
        }
        let change = |j: &Judged| j.pair.ratio().map_or_else(String::new, |r| format!(" ({})", signed_pct(r - 1.0)));
        let steps = time.iter().find(|j| j.key == "steps_per_s" && j.beyond());
        if let Some(j) = steps {
            parts.push(format!("steps/s {}{}", arrow(&j.pair, rate), change(j)));
        }
        // The wall time when the steps do not say it.
        if let (None, Some(j)) = (steps, time.iter().find(|j| j.key == "wall_s" && j.beyond())) {
            parts.push(format!("wall time {}{}", arrow(&j.pair, |s| duration((s * 1e9) as u64)), change(j)));
        }
        if let (Some(b), Some(a)) = (&self.before.loaders, &self.after.loaders) {
            let r = self.loader_read_mb_per_s();
            let moved = io.iter().any(|j| j.key == "loaders.read_mb_per_s");
            let who = if a.count == b.count {
                format!("its {} {}{}", a.count, a.word, if a.count == 1 { "" } else { "s" })
            } else {
                format!("its {} -> {} {}s", b.count, a.count, a.word)
            };
            if let (true, Some(ratio)) = (moved, r.ratio()) {
                parts.push(format!("{who} read {} ({:.1}x)", arrow(&r, mb), ratio));
            } else if a.count != b.count {
                parts.push(who);
            }
        }
        parts.extend(io_text(&io));
        let lead = if kb != ka { format!("{kb} -> {ka}: ") } else { String::new() };
        format!("{lead}{}", parts.join("; "))
    }

    /// The comparison as one JSON document (docs/diff.md).
    pub fn to_json(&self) -> Value {
        let breakdown = |f: &dyn Fn(&Share) -> Pair| -> Value {
            self.shares()
                .into_iter()
                .map(|s| (s.key.to_string(), f(s).json()))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let judged = |j: &[Judged]| -> Vec<Value> {
            j.iter().map(|j| json!({"key": j.key, "apart": j.apart, "bound": j.bound, "beyond": j.beyond()})).collect()
        };
        let files = |c: Vec<FileChange>| -> Vec<Value> {
            c.iter()
                .map(|c| {
                    json!({
                        "path": c.path,
                        "read_s": c.read_s().json(),
                        "read_bytes": c.read_bytes().json_bytes(),
                        "from_storage_bytes": c.from_storage_bytes().json_bytes(),
                    })
                })
                .collect()
        };
        let epochs: Vec<Value> = self
            .epochs()
            .iter()
            .map(|(b, a)| {
                let p = |f: &dyn Fn(&EpochFigures) -> Option<f64>| Pair::of(f(b), f(a));
                json!({
                    "name": b.name,
                    "duration_s": p(&|e| Some(e.duration_ns as f64 / 1e9)).json(),
                    "kind": {"before": b.kind, "after": a.kind},
                    "breakdown": breakdown(&|k| p(&|e| e.breakdown.map(|x| (k.of)(&x)))),
                    "read_mb_per_s": p(&|e| e.read_mb_per_s).json(),
                    "from_storage_bytes": p(&|e| e.from_storage_bytes).json_bytes(),
                    "cache_hit_fraction": p(&|e| e.cache_hit_fraction).json(),
                })
            })
            .collect();
        let ranks: Vec<Value> = self
            .ranks()
            .iter()
            .map(|(b, a)| {
                let p = |f: &dyn Fn(&RankFigures) -> Option<f64>| Pair::of(f(b), f(a));
                json!({
                    "rank": b.rank,
                    "pid": {"before": b.pid, "after": a.pid},
                    "steps_per_s": p(&|r| r.steps.map(|s| s.per_s)).json(),
                    "breakdown": breakdown(&|k| p(&|r| r.breakdown.map(|x| (k.of)(&x)))),
                    "read_mb_per_s": p(&|r| r.read_mb_per_s).json(),
                })
            })
            .collect();
        let time = self.time_judged();
        let io = self.io_judged();
        json!({
            "before": self.before.json(),
            "after": self.after.json(),
            "same_command": self.same_command(),
            "same_host": self.same_host(),
            "wall_s": self.wall_s().json(),
            "steps_per_s": self.steps_per_s().json(),
            "kind": {"before": self.before.kind, "after": self.after.kind, "changed": self.before.kind != self.after.kind},
            "breakdown": breakdown(&|k| self.share(k)),
            "loaders": {
                "count": self.loader_count().json(),
                "read_bytes": self.loader_read_bytes().json_bytes(),
                "read_mb_per_s": self.loader_read_mb_per_s().json(),
                "read_call_mb_per_s": self.loader_read_call_mb_per_s().json(),
                "read_p50_us": self.loader_read_p50_us().json(),
                "read_p99_us": self.loader_read_p99_us().json(),
                "cache_fraction": self.loader_cache_fraction().json(),
            },
            "io": {
                "read_bytes": self.read_bytes().json_bytes(),
                "from_storage_bytes": self.from_storage_bytes().json_bytes(),
                "hit_ratio": self.hit_ratio().json(),
            },
            "epochs": epochs,
            "ranks": ranks,
            "files": files(self.files()),
            "directories": files(self.directories()),
            "noise": {
                "only_noise": self.noise_only(),
                "time": judged(&time),
                "io": judged(&io),
                "thresholds": {
                    "jitter_s": NOISE_JITTER_S,
                    "share": NOISE_SHARE,
                    "time": NOISE_TIME,
                    "storage": NOISE_STORAGE,
                    "storage_bytes": NOISE_STORAGE_BYTES as u64,
                    "hit_ratio": NOISE_HIT,
                },
            },
            "conclusion": self.conclusion(),
        })
    }

    /// The comparison's tables, as text and the report show them: each a
    /// heading (`None` for the first) and rows, its header row first.
    pub fn tables(&self, path_chars: usize) -> Vec<(Option<String>, Vec<Vec<String>>)> {
        let mut out = vec![(None, self.summary_rows())];
        let epochs = self.epochs();
        if !epochs.is_empty() {
            let (nb, na) = (self.before.epochs.len(), self.after.epochs.len());
            let also = if nb == na && nb == epochs.len() {
                String::new()
            } else {
                format!(" ({} of {nb} before and {na} after, those in both)", epochs.len())
            };
            out.push((Some(format!("per epoch{also}")), self.epoch_rows(&epochs)));
        }
        let ranks = self.ranks();
        if !ranks.is_empty() {
            out.push((Some(format!("per rank ({} in both)", ranks.len())), self.rank_rows(&ranks)));
        }
        for (what, list) in [("files", self.files()), ("directories", self.directories())] {
            if !list.is_empty() {
                let heading = format!("{what} whose reads changed most (by time in read calls, then bytes)");
                out.push((Some(heading), file_rows(&list, path_chars)));
            }
        }
        out
    }

    /// Wall time, steps, the verdict and its shares, the loaders, the page cache.
    fn summary_rows(&self) -> Vec<Vec<String>> {
        let (b, a) = (&self.before, &self.after);
        let mut rows = vec![["", "before", "after", "change"].map(String::from).to_vec()];
        let row = |label: &str, p: Pair, f: &dyn Fn(f64) -> String, change: &dyn Fn(&Pair) -> String| {
            let side = |v: Option<f64>| v.map_or_else(|| "-".to_string(), f);
            vec![label.to_string(), side(p.before), side(p.after), change(&p)]
        };
        rows.push(row("wall time", self.wall_s(), &secs, &relative));
        let from = |r: &RunFigures| r.steps.map_or("-", |s| s.from.name());
        let steps_label = if b.steps.is_none() && a.steps.is_none() {
            "steps/s".to_string()
        } else if from(b) == from(a) {
            format!("steps/s (from {})", from(b))
        } else {
            format!("steps/s (from {} / {})", from(b), from(a))
        };
        rows.push(row(&steps_label, self.steps_per_s(), &rate, &relative));
        rows.push(vec!["verdict".into(), b.kind.into(), a.kind.into(), String::new()]);
        for s in self.shares() {
            rows.push(row(&format!("  {}", s.name), self.share(s), &pct, &points));
        }
        if b.loaders.is_some() || a.loaders.is_some() {
            let who = |r: &RunFigures| {
                r.loaders.as_ref().map_or("none".to_string(), |l| {
                    format!("{} {}{}", l.count, l.word, if l.count == 1 { "" } else { "s" })
                })
            };
            rows.push(vec!["loaders".into(), who(b), who(a), String::new()]);
            rows.push(row("  read", self.loader_read_bytes(), &by, &relative));
            rows.push(row("  read rate (the trainer's time)", self.loader_read_mb_per_s(), &mb, &times));
            rows.push(row("  read rate (in read calls)", self.loader_read_call_mb_per_s(), &mb, &times));
            let us = |v: f64| duration((v * 1e3) as u64);
            rows.push(row("  read p50", self.loader_read_p50_us(), &us, &times));
            rows.push(row("  read p99", self.loader_read_p99_us(), &us, &times));
            rows.push(row("  from the page cache", self.loader_cache_fraction(), &pct, &points));
        }
        rows.push(row("files read by calls", self.read_bytes(), &by, &relative));
        rows.push(row("bytes from storage", self.from_storage_bytes(), &by, &relative));
        rows.push(row("page-cache hit ratio", self.hit_ratio(), &pct, &points));
        rows
    }

    fn epoch_rows(&self, epochs: &[(&EpochFigures, &EpochFigures)]) -> Vec<Vec<String>> {
        let mut rows = vec![["epoch", "duration", "verdict", "data wait", "on CPU", "read", "from cache"]
            .map(String::from)
            .to_vec()];
        for (eb, ea) in epochs {
            let p = |f: &dyn Fn(&EpochFigures) -> Option<f64>| Pair::of(f(eb), f(ea));
            let dur = p(&|e| Some(e.duration_ns as f64 / 1e9));
            rows.push(vec![
                eb.name.clone(),
                format!("{} ({})", arrow(&dur, secs), relative(&dur)),
                if eb.kind == ea.kind { eb.kind.to_string() } else { format!("{} -> {}", eb.kind, ea.kind) },
                arrow(&p(&|e| e.breakdown.map(|x| x.data_wait)), pct),
                arrow(&p(&|e| e.breakdown.map(|x| x.on_cpu)), pct),
                arrow(&p(&|e| e.read_mb_per_s), mb),
                arrow(&p(&|e| e.cache_hit_fraction), pct),
            ]);
        }
        rows
    }

    fn rank_rows(&self, ranks: &[(&RankFigures, &RankFigures)]) -> Vec<Vec<String>> {
        let mut rows = vec![["rank", "steps/s", "data wait", "waiting for other ranks", "on CPU", "read"]
            .map(String::from)
            .to_vec()];
        for (rb, ra) in ranks {
            let p = |f: &dyn Fn(&RankFigures) -> Option<f64>| Pair::of(f(rb), f(ra));
            rows.push(vec![
                rb.rank.to_string(),
                arrow(&p(&|r| r.steps.map(|s| s.per_s)), rate),
                arrow(&p(&|r| r.breakdown.map(|x| x.data_wait)), pct),
                arrow(&p(&|r| r.breakdown.map(|x| x.collective_wait)), pct),
                arrow(&p(&|r| r.breakdown.map(|x| x.on_cpu)), pct),
                arrow(&p(&|r| r.read_mb_per_s), mb),
            ]);
        }
        rows
    }

    /// The comparison as text, as `mltrace diff` prints it.
    pub fn render(&self) -> String {
        let mut o = String::new();
        for (label, r) in [("before", &self.before), ("after", &self.after)] {
            let _ = writeln!(o, "{label}:{}{}", " ".repeat(8 - label.len()), r.file);
            let _ = writeln!(o, "  command: {}", r.command.join(" "));
            let _ = writeln!(o, "  host:    {} (kernel {}, {} CPUs), starting {}", r.host, r.kernel, r.cpus, r.started);
            let _ = writeln!(o, "  verdict: {}", r.verdict);
            for w in r.notes() {
                let _ = writeln!(o, "  warning: {w}");
            }
        }
        let differ = self.differences();
        if !differ.is_empty() {
            let _ = writeln!(o, "note:     the two runs have different {}", differ.join(" and "));
        }
        for (heading, rows) in self.tables(60) {
            match heading {
                Some(h) => {
                    let _ = writeln!(o, "\n{h}:");
                }
                None => o.push('\n'),
            }
            o.push_str(&crate::show::render::table(&rows));
        }
        let _ = writeln!(o, "\n{}", self.conclusion());
        o
    }
}

/// A share's bound: `0.03`, `0.045`.
fn bound(b: f64) -> String {
    let s = format!("{b:.3}");
    s.strip_suffix('0').map_or_else(|| s.clone(), str::to_string)
}

fn signed_pct(f: f64) -> String {
    format!("{:+.0}%", f * 100.0)
}

fn mb(f: f64) -> String {
    if f >= 100.0 {
        format!("{f:.0} MB/s")
    } else {
        format!("{f:.1} MB/s")
    }
}

fn rate(f: f64) -> String {
    if f >= 100.0 {
        format!("{f:.0}")
    } else if f >= 10.0 {
        format!("{f:.1}")
    } else {
        format!("{f:.2}")
    }
}

/// `3.1 -> 5.0`, with `f` for each side ("-" when missing).
fn arrow(p: &Pair, f: impl Fn(f64) -> String) -> String {
    let side = |v: Option<f64>| v.map_or_else(|| "-".to_string(), &f);
    format!("{} -> {}", side(p.before), side(p.after))
}

fn secs(s: f64) -> String {
    duration((s * 1e9) as u64)
}

fn by(v: f64) -> String {
    bytes(v.round() as u64)
}

fn relative(p: &Pair) -> String {
    p.ratio().map_or_else(|| "-".to_string(), |r| signed_pct(r - 1.0))
}

fn times(p: &Pair) -> String {
    p.ratio().map_or_else(|| "-".to_string(), |r| format!("{r:.2}x"))
}

fn points(p: &Pair) -> String {
    p.delta().map_or_else(|| "-".to_string(), |d| format!("{:+.0} pts", d * 100.0))
}

/// Files or directories, each path cut to `path_chars` (0: whole).
fn file_rows(list: &[FileChange], path_chars: usize) -> Vec<Vec<String>> {
    let mut rows = vec![["path", "time in reads", "read", "from storage"].map(String::from).to_vec()];
    for c in list {
        rows.push(vec![
            if path_chars > 0 { crate::shorten(&c.path, path_chars) } else { c.path.clone() },
            arrow(&c.read_s(), secs),
            arrow(&c.read_bytes(), by),
            arrow(&c.from_storage_bytes(), by),
        ]);
    }
    rows
}
