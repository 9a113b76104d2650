use std::path::PathBuf;

/// Why an import could not go on. Bad lines inside a file are not errors:
/// they are counted and reported (see [`crate::FileReport`]).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: format not recognised ({reason}); name it with --format", path.display())]
    Unrecognised { path: PathBuf, reason: String },
    #[error("{}: line {line}: {message}", path.display())]
    Line { path: PathBuf, line: u64, message: String },
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },
    #[error("time zone: {0}")]
    TimeZone(String),
    #[error("clock: {0}")]
    Clock(String),
    #[error("writing the log: {0}")]
    Write(#[from] std::io::Error),
    #[error("nothing to import: no file held a record")]
    Empty,
}

impl ImportError {
    pub(crate) fn line(path: &std::path::Path, line: u64, message: impl Into<String>) -> Self {
        ImportError::Line { path: path.to_path_buf(), line, message: message.into() }
    }

    pub(crate) fn file(path: &std::path::Path, message: impl Into<String>) -> Self {
        ImportError::File { path: path.to_path_buf(), message: message.into() }
    }
}
