//! Importers: the traces people already have (the DL I/O study's bpftrace
//! outputs, `mpstat`, `nvidia-smi pmon`/`dmon`, `dcgmi dmon`, MLPerf logs) converted into
//! an mltrace log, so `mltrace export` shows them like a recording.
//!
//! ```no_run
//! # fn main() -> Result<(), mltrace_import::ImportError> {
//! let opts = mltrace_import::Options::default();
//! let plan = mltrace_import::Plan::new(&["cpu.out".into(), "ulog".into()], &opts)?;
//! for f in plan.files() {
//!     println!("{}: {}", f.path.display(), f.description);
//! }
//! let summary = plan.run(std::fs::File::create("run.bin")?)?;
//! # Ok(()) }
//! ```
//!
//! Every timestamp of an import is Unix-epoch nanoseconds; the header's
//! start anchor says so (BOOTTIME reading == REALTIME reading), so exporters
//! show true wall-clock times. Lines that cannot be read are counted and
//! reported with their numbers, never fatal.

pub mod bpftrace;
pub mod clock;
pub mod dcgmi;
mod detect;
pub mod dmon;
mod error;
pub mod item;
pub mod lines;
mod merge;
pub mod mllog;
pub mod mpstat;
pub mod nvsmi;
mod plan;
pub mod pmon;
pub mod visuals;

use std::fmt;
use std::str::FromStr;

pub use clock::ClockSpec;
pub use error::ImportError;
pub use item::Item;
pub use lines::FileReport;
pub use mllog::RankMode;
pub use plan::{Plan, PlannedFile, Summary};

/// A result the source trace did not print (close's return value, the fd
/// of an open in layouts that print `comm` in its place): the log's
/// [`RET_UNKNOWN`](mltrace_log::RET_UNKNOWN), under this crate's old name.
pub use mltrace_log::RET_UNKNOWN as UNKNOWN_RET;

/// The formats an input file can be in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    Mllog,
    Mpstat,
    Pmon,
    Dmon,
    /// `dcgmi dmon` (DCGM field values per entity).
    Dcgmi,
    /// bpftrace outputs.
    TimeAlign,
    Bio,
    Openat,
    Read,
    Write,
    VfsRw,
    Close,
    CreateDel,
    Mmap,
    /// The trace_visuals scripts' processed files (ISO times).
    VisRead,
    VisWrite,
    VisOpen,
    VisBio,
    /// Derived from the four above: recognised, never imported.
    VisStEnd,
    VisComb,
    Timeline,
    CpuCsv,
    GpuCsv,
    /// `pids.json` (pid to role) or the bare `pids` list.
    Pids,
}

impl Format {
    pub const ALL: [Format; 24] = [
        Format::Mllog,
        Format::Mpstat,
        Format::Pmon,
        Format::Dmon,
        Format::Dcgmi,
        Format::TimeAlign,
        Format::Bio,
        Format::Openat,
        Format::Read,
        Format::Write,
        Format::VfsRw,
        Format::Close,
        Format::CreateDel,
        Format::Mmap,
        Format::VisRead,
        Format::VisWrite,
        Format::VisOpen,
        Format::VisBio,
        Format::VisStEnd,
        Format::VisComb,
        Format::Timeline,
        Format::CpuCsv,
        Format::GpuCsv,
        Format::Pids,
    ];

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Mllog => "mllog",
            Format::Mpstat => "mpstat",
            Format::Pmon => "pmon",
            Format::Dmon => "dmon",
            Format::Dcgmi => "dcgmi",
            Format::TimeAlign => "time-align",
            Format::Bio => "bio",
            Format::Openat => "openat",
            Format::Read => "read",
            Format::Write => "write",
            Format::VfsRw => "vfs-rw",
            Format::Close => "close",
            Format::CreateDel => "create-del",
            Format::Mmap => "mmap",
            Format::VisRead => "vis-read",
            Format::VisWrite => "vis-write",
            Format::VisOpen => "vis-open",
            Format::VisBio => "vis-bio",
            Format::VisStEnd => "vis-st-end",
            Format::VisComb => "vis-comb",
            Format::Timeline => "timeline",
            Format::CpuCsv => "cpu-csv",
            Format::GpuCsv => "gpu-csv",
            Format::Pids => "pids",
        }
    }

    /// What it is, for people.
    pub fn label(self) -> &'static str {
        match self {
            Format::Mllog => "MLPerf log (MLLOG)",
            Format::Mpstat => "mpstat CPU utilisation",
            Format::Pmon => "nvidia-smi pmon (per-process GPU use)",
            Format::Dmon => "nvidia-smi dmon (GPU metrics)",
            Format::Dcgmi => "dcgmi dmon (DCGM GPU metrics)",
            Format::TimeAlign => "bpftrace trace_time_align (clock alignment)",
            Format::Bio => "bpftrace trace_bio (block I/O)",
            Format::Openat => "bpftrace trace_openat (opens)",
            Format::Read => "bpftrace trace_read (reads)",
            Format::Write => "bpftrace trace_write (writes)",
            Format::VfsRw => "bpftrace trace_vfs_rw (reads and writes)",
            Format::Close => "bpftrace trace_close (closes)",
            Format::CreateDel => "bpftrace trace_create_del (mkdir, rmdir, unlink, creat)",
            Format::Mmap => "bpftrace trace_mmap (mmap, munmap)",
            Format::VisRead => "trace_visuals read_PID (reads: bytes, latency, file)",
            Format::VisWrite => "trace_visuals write_PID (writes: latency, file; no sizes)",
            Format::VisOpen => "trace_visuals open_PID (opens: latency, path)",
            Format::VisBio => "trace_visuals bio_PID (block I/O: R/W, bytes, latency)",
            Format::VisStEnd => "trace_visuals st_end_data (start, end, kind of each call)",
            Format::VisComb => "trace_visuals comb_PID (end, kind, latency of each call)",
            Format::Timeline => "trace_visuals timeline.csv (MLLOG phases: start, end, event)",
            Format::CpuCsv => "trace_visuals cpu_all.csv (mpstat as CSV)",
            Format::GpuCsv => "trace_visuals gpu_avg.csv (mean GPU use over the GPUs)",
            Format::Pids => "trace_visuals pids.json/pids (process roles)",
        }
    }

    /// bpftrace outputs: timestamps are `nsecs` since boot.
    pub fn is_bpftrace(self) -> bool {
        !matches!(self, Format::Mllog | Format::Mpstat | Format::Pmon | Format::Dmon | Format::Dcgmi)
            && !self.is_processed()
    }

    /// The trace_visuals scripts' files: times are ISO, read as UTC and shifted.
    pub fn is_processed(self) -> bool {
        matches!(
            self,
            Format::VisRead
                | Format::VisWrite
                | Format::VisOpen
                | Format::VisBio
                | Format::VisStEnd
                | Format::VisComb
                | Format::Timeline
                | Format::CpuCsv
                | Format::GpuCsv
                | Format::Pids
        )
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase().replace('_', "-");
        let s = s.strip_prefix("trace-").unwrap_or(&s);
        Format::ALL.iter().copied().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            format!("unknown format '{s}' (one of: {})", names.join(", "))
        })
    }
}

/// How to import.
#[derive(Clone, Debug)]
pub struct Options {
    /// Every file is in this format (otherwise recognised from content).
    pub format: Option<Format>,
    /// IANA zone of the local times in the files; default: this machine's.
    pub tz: Option<String>,
    /// The date of the first line, for files whose lines carry only a time.
    pub date: Option<chrono::NaiveDate>,
    /// How bpftrace `nsecs` map to wall-clock time (otherwise from a
    /// trace_time_align output or the traces' own time column).
    pub clock: Option<ClockSpec>,
    pub ranks: RankMode,
    /// Nanoseconds added to the processed files' ISO times (read as UTC);
    /// otherwise found from a raw file beside its processed copy.
    pub shift: Option<i64>,
    /// Malformed lines described per file (the rest are counted).
    pub max_examples: usize,
    /// `dcgmi dmon` rows without a time: the first sample's local time
    /// (in `tz`), and dcgmi's `-d` interval.
    pub dcgmi_start: Option<chrono::NaiveDateTime>,
    pub dcgmi_interval_ms: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            format: None,
            tz: None,
            date: None,
            clock: None,
            ranks: RankMode::Merge,
            shift: None,
            max_examples: 20,
            dcgmi_start: None,
            dcgmi_interval_ms: 1000,
        }
    }
}

/// A converter of one input file: yields records in roughly time order.
pub trait Source {
    fn next_item(&mut self) -> Result<Option<Item>, ImportError>;
    fn report(&self) -> &FileReport;
}
