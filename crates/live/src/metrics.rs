//! Every metric, declared once: its name (OpenTelemetry's semantic
//! conventions where one exists, `mltrace.*` otherwise), kind, unit,
//! labels and meaning. Prometheus' names, OTLP's and docs/metrics.md all
//! come from this table.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    /// Monotonic since the recording started.
    Counter,
    Histogram,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Ratio,
    Seconds,
    Bytes,
    Calls,
    Records,
    Frames,
    Pushes,
    Rank,
}

impl Unit {
    /// UCUM, as OTLP carries it.
    pub fn otel(self) -> &'static str {
        match self {
            Unit::Ratio => "1",
            Unit::Seconds => "s",
            Unit::Bytes => "By",
            Unit::Calls => "{call}",
            Unit::Records => "{record}",
            Unit::Frames => "{frame}",
            Unit::Pushes => "{push}",
            Unit::Rank => "{rank}",
        }
    }

    /// Prometheus' name suffix (none for ratios and counts).
    pub fn prometheus(self) -> Option<prometheus_client::registry::Unit> {
        use prometheus_client::registry::Unit as P;
        match self {
            Unit::Seconds => Some(P::Seconds),
            Unit::Bytes => Some(P::Bytes),
            _ => None,
        }
    }
}

#[derive(Debug)]
pub struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Unit,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

impl Metric {
    /// Its Prometheus name: dots become underscores; the encoder adds the
    /// unit's suffix and a counter's `_total`.
    pub fn prometheus_name(&self) -> String {
        self.name.replace('.', "_")
    }

    /// The name a Prometheus query uses (with the suffixes).
    pub fn prometheus_series(&self) -> String {
        let mut n = self.prometheus_name();
        if let Some(u) = self.unit.prometheus() {
            n = format!("{n}_{}", u.as_str());
        }
        if self.kind == Kind::Counter {
            n.push_str("_total");
        }
        n
    }
}

/// A label's Prometheus name (label names have no dots there).
pub fn prometheus_label(key: &str) -> String {
    key.replace('.', "_")
}

macro_rules! metrics {
    ($($id:ident: $name:literal, $kind:ident, $unit:ident, [$($label:literal),*], $help:literal;)*) => {
        $(pub const $id: Metric = Metric {
            name: $name,
            kind: Kind::$kind,
            unit: Unit::$unit,
            labels: &[$($label),*],
            help: $help,
        };)*
        /// Every metric, in the order they are exported and documented.
        pub const ALL: &[&Metric] = &[$(&$id),*];
    };
}

metrics! {
    BREAKDOWN: "mltrace.breakdown.share", Gauge, Ratio, ["window", "share"],
        "Share of the trainer's main thread's time in each state (the verdict's breakdown), over the last interval or the run so far";
    VERDICT: "mltrace.verdict", Gauge, Ratio, ["window", "kind"],
        "The verdict's kind over the window: 1 for the kind it is, 0 for the others";
    WINDOW_START: "mltrace.window.start", Gauge, Seconds, ["window"],
        "Start of the window the shares are over, in seconds since the Unix epoch";
    WINDOW_END: "mltrace.window.end", Gauge, Seconds, ["window"],
        "End of the window the shares are over, in seconds since the Unix epoch";
    RANK_DATA_WAIT: "mltrace.rank.data_wait.share", Gauge, Ratio, ["window", "rank"],
        "Share of the window each rank's main thread spent asleep until one of its loaders woke it";
    STEP_DURATION: "mltrace.step.duration", Gauge, Seconds, ["window", "percentile"],
        "The trainer's time per step (from its step marks, collectives or batches), p50 and p99";
    STRAGGLER_RANK: "mltrace.straggler.rank", Gauge, Rank, [],
        "The rank holding the job back, as stats names it (absent while there is none)";
    STRAGGLER_LATENESS: "mltrace.straggler.lateness", Gauge, Seconds, [],
        "How late the straggler arrives at the collectives against the median rank (median)";
    DISK_IO: "process.disk.io", Counter, Bytes, ["disk.io.direction", "role"],
        "Bytes read and written by the traced processes' calls, by role (trainer, loader, other)";
    READ_DURATION: "mltrace.read.duration", Histogram, Seconds, ["role"],
        "Latency of the read calls, by role";
    STORAGE_READ: "mltrace.storage.read", Counter, Bytes, ["role"],
        "Bytes the reads brought from storage into the page cache (the rest were cache hits)";
    CACHE_HITS: "mltrace.page_cache.hit.share", Gauge, Ratio, ["role"],
        "Share of the bytes read that the page cache held, over the run so far";
    METADATA_CALLS: "mltrace.metadata.calls", Counter, Calls, ["role"],
        "Metadata calls (stat, getdents64, rename...) and opens";
    NETWORK_IO: "process.network.io", Counter, Bytes, ["network.io.direction", "role"],
        "Bytes sent and received on sockets";
    GPU_UTILIZATION: "hw.gpu.utilization", Gauge, Ratio, ["hw.id"],
        "Share of the last interval a kernel ran on each GPU (NVML)";
    GPU_MEMORY: "hw.gpu.memory.usage", Gauge, Bytes, ["hw.id"],
        "GPU memory in use (NVML), over the last interval (mean)";
    LOST: "mltrace.records.lost", Counter, Records, ["kind"],
        "Events the kernel could not hand over (ring full), by kind";
    RECORDS: "mltrace.records", Counter, Records, [],
        "Records the live view has read";
    FRAMES_MISSED: "mltrace.live.frames.missed", Counter, Frames, [],
        "Frames of the log the live view fell behind on and did not read (its figures undercount)";
    PUSHES_DROPPED: "mltrace.otlp.pushes.dropped", Counter, Pushes, [],
        "OTLP pushes dropped: the collector was down, slow, or refused them";
}

/// docs/metrics.md's row for `m`.
pub fn doc_row(m: &Metric) -> String {
    let kind = match m.kind {
        Kind::Gauge => "gauge",
        Kind::Counter => "counter",
        Kind::Histogram => "histogram",
    };
    let labels: Vec<String> = m.labels.iter().map(|l| format!("`{l}`")).collect();
    let labels = if labels.is_empty() { "none".to_string() } else { labels.join(", ") };
    format!("| `{}` | `{}` | {kind} | `{}` | {labels} | {} |", m.name, m.prometheus_series(), m.unit.otel(), m.help)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_list_every_metric_as_declared() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let missing: Vec<String> = ALL.iter().map(|m| doc_row(m)).filter(|r| !doc.contains(r.as_str())).collect();
        assert!(
            missing.is_empty(),
            "docs/metrics.md lacks these rows (or has them otherwise):\n{}",
            missing.join("\n")
        );
    }

    #[test]
    fn names_are_unique_and_labels_never_name_a_process_or_file() {
        let mut names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        for m in ALL {
            for l in m.labels {
                assert!(!["pid", "tid", "path", "file", "comm"].contains(l), "{}: {l}", m.name);
            }
        }
    }

    #[test]
    fn prometheus_series_carry_unit_and_total() {
        assert_eq!(DISK_IO.prometheus_series(), "process_disk_io_bytes_total");
        assert_eq!(BREAKDOWN.prometheus_series(), "mltrace_breakdown_share");
        assert_eq!(READ_DURATION.prometheus_series(), "mltrace_read_duration_seconds");
        assert_eq!(prometheus_label("disk.io.direction"), "disk_io_direction");
    }
}

#[cfg(test)]
mod dashboard {
    use super::*;

    /// Every query of docs/grafana-dashboard.json names series this
    /// table exports (a renamed metric breaks the dashboard here first).
    #[test]
    fn the_dashboard_queries_only_exported_series() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/grafana-dashboard.json");
        let d: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut known: Vec<String> = ALL.iter().map(|m| m.prometheus_series()).collect();
        known.extend(
            ALL.iter().filter(|m| m.kind == Kind::Histogram).map(|m| format!("{}_bucket", m.prometheus_series())),
        );
        let mut exprs: Vec<String> = d["panels"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["targets"].as_array().unwrap().iter().map(|t| t["expr"].as_str().unwrap().to_string()))
            .collect();
        exprs.extend(
            d["templating"]["list"].as_array().unwrap().iter().map(|v| v["definition"].as_str().unwrap().into()),
        );
        assert!(exprs.len() >= 10);
        for e in &exprs {
            let names: Vec<&str> = e
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("mltrace_") || w.starts_with("process_") || w.starts_with("hw_"))
                .collect();
            assert!(!names.is_empty(), "{e}");
            for n in names {
                assert!(known.iter().any(|k| k == n), "{e}: {n} is not exported");
            }
        }
        // Labels it groups or filters by are the metrics' own.
        for label in ["window", "share", "kind", "rank", "percentile", "role", "disk_io_direction", "hw_id", "le"] {
            let declared = ALL.iter().any(|m| m.labels.iter().any(|l| prometheus_label(l) == label));
            assert!(declared || label == "le", "{label}");
        }
    }
}
