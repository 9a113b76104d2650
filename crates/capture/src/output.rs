//! The log file on disk. It is created at the path asked for from the
//! start, so the log of a recorder killed part-way (SIGKILL, the OOM
//! killer, a lost node) is where the user looks for it, readable up to its
//! last complete frame. Mode 0600 (it holds paths and command lines); the
//! last component is never followed if it is a symlink; an existing file is
//! only replaced with `force`, by unlinking it and creating a new file
//! exclusively (so its owner and permissions are not inherited).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::CaptureError;

pub struct OutputFile {
    pub file: File,
    pub path: PathBuf,
    /// Set once the command runs: from then on the file is the recording.
    keep: bool,
}

fn create_exclusive(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

impl OutputFile {
    pub fn create(path: &Path, force: bool) -> Result<OutputFile, CaptureError> {
        let err = |source| CaptureError::Output { path: path.to_owned(), source };
        // O_CREAT|O_EXCL never follows a symlink, even a dangling one. A few
        // tries, in case something recreates the file between unlink and open.
        for _ in 0..3 {
            match create_exclusive(path) {
                Ok(file) => return Ok(OutputFile { file, path: path.to_owned(), keep: false }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err(e)),
            }
            let m = match std::fs::symlink_metadata(path) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(err(e)),
            };
            if m.file_type().is_symlink() {
                return Err(err(io::Error::other("is a symbolic link; refusing to write through it")));
            }
            if m.is_dir() {
                return Err(err(io::Error::other("is a directory")));
            }
            if !force {
                return Err(CaptureError::OutputExists(path.to_owned()));
            }
            // Never unlink a device or a FIFO (`-o /dev/null --force` as root).
            if !m.is_file() {
                return Err(err(io::Error::other("is not a regular file; refusing to replace it")));
            }
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(err(e)),
            }
        }
        Err(err(io::Error::other("kept being recreated by something else while being replaced")))
    }

    /// Hands the file to `uid:gid` (the user behind sudo).
    pub fn chown(&self, uid: u32, gid: u32) -> Result<(), CaptureError> {
        std::os::unix::fs::fchown(&self.file, Some(uid), Some(gid))
            .map_err(|source| CaptureError::Output { path: self.path.clone(), source })
    }

    /// The command started: whatever happens from now on, the file stays.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Flushes the log to the disk at the end of a recording.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }
}

impl Drop for OutputFile {
    /// Nothing was recorded (the command never started): no log is left,
    /// but only remove the file if the name still points at ours.
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        let ours = match (self.file.metadata(), std::fs::symlink_metadata(&self.path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
