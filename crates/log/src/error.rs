//! Errors for input that is not a readable log at all. Damage inside a
//! readable log is reported as a [`crate::Diagnostic`] instead.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: the file is empty; expected an mltrace log (written by `mltrace record` or `mltrace import`)", path.display())]
    Empty { path: PathBuf },
    #[error("{}: this is {looks_like}; expected an mltrace log starting with \"MLTRACE\\0\"", path.display())]
    NotALog { path: PathBuf, looks_like: String },
    #[error("{}: the log header is cut short after {len} bytes; the file was truncated before any event was written", path.display())]
    TruncatedHeader { path: PathBuf, len: u64 },
    #[error("{}: nothing readable: {why}", path.display())]
    NothingReadable { path: PathBuf, why: String },
    #[error("{}: damaged log header: {reason}", path.display())]
    BadHeader { path: PathBuf, reason: String },
    #[error("{}: log format {found} is not supported by this mltrace (reads {supported}); use a newer mltrace", path.display())]
    UnsupportedVersion { path: PathBuf, found: String, supported: String },
}
