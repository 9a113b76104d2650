//! The log's header (written first) and trailer (written last), both JSON:
//! they are read once per log, and JSON lets later versions add fields that
//! older readers ignore. Unknown fields are kept out of the hot path entirely.

use serde::{Deserialize, Serialize};

/// The names of [`Probe::subsystem`]: what a recorder writes and what
/// readers look for (part of the log's contract: a name spelt two ways
/// would turn a reader's feature off silently).
pub mod subsystem {
    pub const SYSCALLS: &str = "syscalls";
    pub const PROCESSES: &str = "processes";
    pub const PAGE_CACHE: &str = "page cache";
    pub const IO_URING: &str = "io_uring";
    pub const SCHEDULING: &str = "scheduling";
    pub const MAPPINGS: &str = "mappings";
    pub const MAJOR_FAULTS: &str = "major faults";
    pub const BLOCK: &str = "block";
    pub const COUNTERS: &str = "counters";
    pub const GPU: &str = "gpu";
    pub const PHASES: &str = "phases";
    pub const CUDA: &str = "cuda";
    pub const NCCL: &str = "nccl";
    pub const IMPORT: &str = "import";
    pub const PYTHON: &str = "python stacks";
}

/// Simultaneous readings of the clocks, taken by the recorder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClockAnchor {
    pub boottime_ns: u64,
    pub realtime_ns: u64,
    pub monotonic_ns: u64,
}

/// One line of /proc/diskstats (whole disks and partitions).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiskStat {
    pub major: u32,
    pub minor: u32,
    pub name: String,
    pub reads: u64,
    pub read_sectors: u64,
    pub writes: u64,
    pub write_sectors: u64,
    pub discards: u64,
    pub discard_sectors: u64,
    pub flushes: u64,
}

/// /proc/diskstats read between two BOOTTIME readings: block requests that
/// completed before `ts_before` are in it, those after `ts_after` are not.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiskSnapshot {
    pub ts_before: u64,
    pub ts_after: u64,
    pub disks: Vec<DiskStat>,
}

/// One probe that was active: which subsystem, which kernel mechanism, and
/// what exactly was attached (e.g. `raw_tp:sys_enter`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Probe {
    pub subsystem: String,
    pub mechanism: String,
    pub detail: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Header {
    /// Version of the mltrace that wrote the log.
    pub mltrace_version: String,
    /// `record`, or `import` for converted traces.
    pub source: String,
    pub host: String,
    /// `uname -r` of the recording machine.
    pub kernel: String,
    pub cpu_count: u32,
    /// /proc/sys/kernel/random/boot_id: BOOTTIME stamps only compare within one boot.
    pub boot_id: String,
    /// The traced command line.
    pub command: Vec<String>,
    pub cwd: String,
    /// pid of the traced command (0 for imports).
    pub root_pid: u32,
    pub recorder_pid: u32,
    pub probes: Vec<Probe>,
    /// The clock of every record timestamp; always `boottime` for now.
    pub clock: String,
    pub start: ClockAnchor,
    /// The kernel's disk counters once the probes were attached.
    pub diskstats: Option<DiskSnapshot>,
    /// A merged log's hosts, by host number (see [`crate::hosts`]); empty
    /// for a log of one host. The fields above are then host 0's, and
    /// `start` is the anchor of the log's clock.
    pub hosts: Vec<crate::hosts::HostInfo>,
    /// What `record -p` or `record -a` attached to; `None` when the
    /// recording started `command` itself (and for imports).
    pub attach: Option<Attach>,
    /// `record --detail summary --slow T`: T in ns. Reads, writes, syncs
    /// and closes are summed per second in [`crate::IoSummary`] records;
    /// only those that failed or took T or more are also recorded one by
    /// one. `None`: every call is recorded (`--detail full`).
    pub summary_slow_ns: Option<u64>,
    /// `record --time-resolution`: every time was rounded to a multiple of
    /// this many ns (a call's end too). `None`: times as measured (ns).
    pub time_resolution_ns: Option<u64>,
}

impl Header {
    /// Whether the recorder attached `subsystem`'s probes (a name of
    /// [`subsystem`]).
    pub fn has_probe(&self, subsystem: &str) -> bool {
        self.probes.iter().any(|p| p.subsystem == subsystem)
    }

    /// Whether calls were summed (this log's host, or any host of a merged log).
    pub fn is_summary(&self) -> bool {
        self.summary_slow_ns.is_some() || self.hosts.iter().any(|h| h.header.summary_slow_ns.is_some())
    }
}

/// The running processes a recording attached to instead of starting a
/// command, and its filters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Attach {
    /// `record -p`: the processes (their threads and the children they
    /// started while recording were traced too); empty with `-a`.
    pub pids: Vec<u32>,
    /// `record -a`: every process on the machine that passed the filters.
    pub all: bool,
    /// `--comm`: only processes of this name.
    pub comm: Option<String>,
    /// `--cgroup`: only processes in this cgroup (or below it).
    pub cgroup: Option<String>,
    /// `--path`: only file events on paths under this prefix.
    pub path: Option<String>,
    /// `--duration`, in nanoseconds.
    pub duration_ns: Option<u64>,
}

impl Attach {
    /// One line: `-p 4242,4243` or `-a --comm python --path /data`.
    pub fn describe(&self) -> String {
        let mut s = if self.all {
            "-a".to_string()
        } else {
            format!("-p {}", self.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
        };
        for (flag, v) in [("--comm", &self.comm), ("--cgroup", &self.cgroup), ("--path", &self.path)] {
            if let Some(v) = v {
                s.push_str(&format!(" {flag} {v}"));
            }
        }
        if let Some(d) = self.duration_ns {
            s.push_str(&format!(" --duration {}s", d as f64 / 1e9));
        }
        s
    }
}

/// Per-kind loss totals, as in [`crate::LostKind`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LostTotal {
    pub kind: String,
    pub count: u64,
}

/// io_uring submissions of one opcode by the traced processes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UringOpCount {
    /// IORING_OP_*.
    pub opcode: u8,
    pub name: String,
    pub count: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Trailer {
    pub end: ClockAnchor,
    /// wait(2) status of the traced command, when it was reaped.
    pub exit_status: Option<i32>,
    pub records: u64,
    pub frames: u64,
    pub lost: Vec<LostTotal>,
    /// Why the recording stopped early, if it did (e.g. a write error).
    pub stopped_early: Option<String>,
    /// The kernel's disk counters before the probes were detached.
    pub diskstats: Option<DiskSnapshot>,
    /// CPU time the samplers used (their cost, for benchmarks).
    pub sampler_cpu_ns: u64,
    /// What stopped working during the recording (e.g. a GPU's metrics).
    pub warnings: Vec<String>,
    /// io_uring submissions by opcode, every opcode (reads and writes are
    /// also records; the others are only counted here).
    pub uring_ops: Vec<UringOpCount>,
}
