//! Section 1's start signal: a workload that reads cached files waits for
//! one byte on a FIFO (`BENCH_GO`) before its clock starts, and the bench
//! reads the workload's files just before sending it, whatever the tool.
//!
//! Why: on this VM a cached page left untouched for a few tenths of a
//! second costs tens of µs at its next read (the host maps it back in).
//! An untraced run starts a few ms after the last one ended; a run under
//! `mltrace record` starts after the last recorder has written its log and
//! the next has loaded its programs, 0.7 s later, on colder pages. (b)
//! untraced read 0.090-0.097 s back to back and 0.103-0.112 s after a
//! pause of 0.3 s (2026-12-07): without the signal, that much of section
//! 1's "overhead" was the gap, not the tracer.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::JoinHandle;

use anyhow::{bail, Context, Result};

/// The environment variable naming the FIFO a workload waits on.
pub const VAR: &str = "BENCH_GO";

/// Whether section 1 uses the signal (`BENCH_WARM=0`: it does not, as
/// before 2026-12-07, to compare the two).
pub fn wanted() -> bool {
    std::env::var("BENCH_WARM").map_or(true, |v| v != "0")
}

/// One run's signal: the FIFO, and the thread that waits for the workload
/// to open it, reads the files and sends the byte.
pub struct Go {
    path: PathBuf,
    sender: Option<JoinHandle<Result<()>>>,
}

impl Go {
    /// A FIFO in `dir`; `warm` (a file or a tree of them) is read once the
    /// workload waits on it.
    pub fn start(dir: &Path, warm: &Path) -> Result<Go> {
        let path = dir.join("go.fifo");
        let _ = fs::remove_file(&path);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())?;
        // SAFETY: a NUL-terminated path.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            bail!("mkfifo {}: {}", path.display(), std::io::Error::last_os_error());
        }
        let (p, warm) = (path.clone(), warm.to_path_buf());
        let sender = std::thread::spawn(move || -> Result<()> {
            // Blocks until the workload opens it for reading.
            let mut fifo = fs::OpenOptions::new().write(true).open(&p).with_context(|| p.display().to_string())?;
            read_all(&warm, &mut vec![0u8; 1 << 16])?;
            fifo.write_all(b"g")?;
            Ok(())
        });
        Ok(Go { path, sender: Some(sender) })
    }

    /// Gives `cmd` (and what it starts) the FIFO's name.
    pub fn to(&self, cmd: &mut Command) {
        cmd.env(VAR, &self.path);
    }

    /// After the run: the sender's end (if the workload failed before it
    /// opened the FIFO, opening it here lets the sender's open return).
    pub fn finish(mut self) -> Result<()> {
        let _reader = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&self.path);
        let sent = self.sender.take().map(|t| t.join());
        let _ = fs::remove_file(&self.path);
        match sent {
            Some(Ok(r)) => r,
            Some(Err(_)) => bail!("the start signal's thread panicked"),
            None => Ok(()),
        }
    }
}

/// Reads every regular file under `p` (or `p` itself) to its end.
fn read_all(p: &Path, buf: &mut [u8]) -> Result<()> {
    let meta = fs::metadata(p).with_context(|| p.display().to_string())?;
    if meta.is_dir() {
        for e in fs::read_dir(p)? {
            read_all(&e?.path(), buf)?;
        }
    } else if meta.is_file() {
        let mut f = fs::File::open(p)?;
        while f.read(buf)? > 0 {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mltrace-bench-go-{name}-{}", std::process::id()));
        fs::create_dir_all(d.join("sub")).unwrap();
        fs::write(d.join("sub/a.bin"), [7u8; 5000]).unwrap();
        d
    }

    /// The workload gets the byte after its files were read, and the
    /// FIFO is gone after.
    #[test]
    fn the_workload_starts_on_the_byte() {
        let d = dir("byte");
        let go = Go::start(&d, &d.join("sub")).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", r#"head -c 1 "$BENCH_GO""#]);
        go.to(&mut cmd);
        let out = cmd.output().unwrap();
        go.finish().unwrap();
        assert_eq!(out.stdout, b"g");
        assert!(!d.join("go.fifo").exists());
        fs::remove_dir_all(&d).unwrap();
    }

    /// A workload that fails before it opens the FIFO does not leave the
    /// bench waiting.
    #[test]
    fn a_workload_that_never_opens_it_does_not_hang() {
        let d = dir("never");
        let go = Go::start(&d, &d.join("sub")).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exit 3"]);
        go.to(&mut cmd);
        assert!(!cmd.status().unwrap().success());
        go.finish().unwrap();
        fs::remove_dir_all(&d).unwrap();
    }
}
