//! Errors of a recording, each saying what went wrong and what to do.

use std::path::PathBuf;

use crate::launch::CommandError;

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error(
        "mltrace record needs root, or the capabilities CAP_BPF and CAP_PERFMON (missing: {}).\n\
         Run it with sudo, or grant them once: sudo setcap cap_bpf,cap_perfmon+ep $(command -v mltrace)",
        missing.join(", ")
    )]
    Privileges { missing: Vec<&'static str> },
    #[error("{0}")]
    Command(CommandError),
    #[error(transparent)]
    Attach(#[from] crate::attach::AttachError),
    #[error("{}: already exists; pass --force to overwrite it", .0.display())]
    OutputExists(PathBuf),
    #[error("{}: {source}", path.display())]
    Output { path: PathBuf, source: std::io::Error },
    #[error("BPF: {stage}: {source}\n(`mltrace doctor` checks what this kernel supports)")]
    Bpf { stage: String, source: libbpf_rs::Error },
    #[error("{0}")]
    Unsupported(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

impl CaptureError {
    /// The exit status `record` should end with for this error (126/127
    /// like a shell for a command that cannot run).
    pub fn exit_code(&self) -> i32 {
        match self {
            CaptureError::Command(c) => c.exit_code(),
            _ => 1,
        }
    }
}
