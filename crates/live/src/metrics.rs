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
        "Share of each rank's main thread's time asleep until one of its loaders woke it";
    STEP_DURATION: "mltrace.step.duration", Gauge, Seconds, ["window", "quantile"],
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
