//! eBPF capture for mltrace.
//!
//! - [`bpf`]: loads and attaches the programs in `bpf/` (built by build.rs).
//! - [`attach`]: `record -p` / `-a`: who may trace what, and the filters.
//! - [`launch`]: starts the command paused so its first syscall is traced.
//! - [`decode`] + [`files`]: kernel records -> log records.
//! - [`recorder`]: `mltrace record` end to end.
//! - [`relay`]: the command's output, copied through us; [`mllog`]: its
//!   MLLOG lines as Phase and Mark records.
//! - [`verifier`]: which program the kernel refused, and why.

pub mod attach;
mod batch;
pub mod bpf;
mod cache;
pub mod cuda;
pub mod decode;
pub mod doctor;
pub mod dump;
mod elfsym;
mod environ;
pub mod error;
pub mod faults;
pub mod features;
pub mod files;
pub mod identity;
pub mod inodes;
pub mod launch;
pub mod mllog;
pub mod name;
mod output;
pub mod python;
pub mod recorder;
pub mod relay;
pub mod ring;
mod summary;
pub mod syscalls;
pub mod system;
pub mod verifier;

#[allow(clippy::all, non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code, unused_imports)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/mltrace.skel.rs"));
}

#[allow(clippy::all, non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code, unused_imports)]
mod probe_skel {
    include!(concat!(env!("OUT_DIR"), "/probe.skel.rs"));
}

pub use error::CaptureError;
pub use recorder::{record, Progress, RecordOptions, RecordSummary};
