//! The mltrace log: the one contract between capture, importers and
//! exporters.
//!
//! A log is a small JSON header, then frames of records, then a JSON trailer.
//! Each frame is self-contained (its own string table, its own delta state)
//! and checksummed, so a reader needs memory for one frame only, a damaged
//! frame costs only its own records, and a log cut short by a killed recorder
//! reads up to its last complete frame. Inside a frame, records are stored
//! column by column (see [`codec`](crate::codec)) and zstd-compressed.
//!
//! Writing: [`FrameEncoder`] + [`LogWriter`], or [`RecordWriter`] for both.
//! Reading: [`LogReader`] yields [`Frame`]s, which yield [`Record`]s.

mod codec;
#[macro_use]
mod declare;
mod error;
pub mod frame;
mod header;
pub mod hosts;
pub mod labels;
mod reader;
pub mod record;
pub mod show;
pub mod tap;
mod v1;
mod varint;
mod writer;

pub use declare::{Encode, FieldValue, Value};
pub use error::LogError;
pub use header::{
    subsystem, Attach, ClockAnchor, DiskSnapshot, DiskStat, Header, LostTotal, Probe, Trailer, UringOpCount,
};
pub use hosts::{global_pid, host_of, local_pid, HostInfo};
pub use reader::{describe_ts, CutFrame, Diagnostic, Frame, FrameSpan, LogReader, PayloadReader};
pub use record::*;
pub use writer::{hash_bytes, EncodedFrame, FrameEncoder, LogWriter, RecordWriter, DEFAULT_FRAME_RECORDS};

/// Version of this crate, written into headers.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// NVML's device utilisation (nvidia-smi's `sm` and GPU-Util): the share of
/// time any kernel ran, however few SMs it used. Logs recorded or imported
/// before it was named for what it is call it [`GPU_UTILISATION_OLD`].
pub const GPU_UTILISATION: &str = "utilisation (any kernel running)";
/// The old name of [`GPU_UTILISATION`], still read.
pub const GPU_UTILISATION_OLD: &str = "SM";
