//! The log file on disk: written under a temporary name in the target
//! directory (mode 0600: it holds paths and command lines), never through a
//! symlink, and renamed into place only when the recording ends, so a
//! half-written log never sits under the name the user asked for.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::CaptureError;

pub struct OutputFile {
    pub file: File,
    pub tmp: PathBuf,
    pub target: PathBuf,
    force: bool,
    committed: bool,
}

impl OutputFile {
    pub fn create(target: &Path, force: bool) -> Result<OutputFile, CaptureError> {
        let err = |source| CaptureError::Output { path: target.to_owned(), source };
        match std::fs::symlink_metadata(target) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(err(io::Error::other("is a symbolic link; refusing to write through it")));
            }
            Ok(m) if m.is_dir() => return Err(err(io::Error::other("is a directory"))),
            Ok(_) if !force => return Err(CaptureError::OutputExists(target.to_owned())),
            _ => {}
        }
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let name = target.file_name().ok_or_else(|| err(io::Error::other("not a file name")))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".mltrace-{}.tmp", std::process::id()));
        let tmp = dir.join(tmp_name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(|e| CaptureError::Output { path: tmp.clone(), source: e })?;
        Ok(OutputFile { file, tmp, target: target.to_owned(), force, committed: false })
    }

    /// Hands the file to `uid:gid` (the user behind sudo).
    pub fn chown(&self, uid: u32, gid: u32) -> Result<(), CaptureError> {
        std::os::unix::fs::fchown(&self.file, Some(uid), Some(gid))
            .map_err(|source| CaptureError::Output { path: self.tmp.clone(), source })
    }

    /// Syncs and moves the log to its final name.
    pub fn commit(&mut self) -> Result<(), CaptureError> {
        let err = |source| CaptureError::Output { path: self.target.clone(), source };
        self.file.sync_all().map_err(err)?;
        let from = CString::new(self.tmp.as_os_str().as_bytes()).unwrap();
        let to = CString::new(self.target.as_os_str().as_bytes()).unwrap();
        let flags = if self.force { 0 } else { libc::RENAME_NOREPLACE };
        // SAFETY: two valid NUL-terminated paths.
        let r = unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), flags) };
        if r != 0 {
            // Keep what was recorded under its temporary name.
            self.committed = true;
            let e = io::Error::last_os_error();
            let e = io::Error::new(e.kind(), format!("{e}; the log was left at {}", self.tmp.display()));
            return Err(err(e));
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
