//! Waiting for the end of a recording: the command's exit, or (attached)
//! the duration, an interrupt or the processes' exit; with progress
//! reports on the way.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Progress, ProgressFn, Shared};
use crate::attach::AttachOptions;
use crate::bpf::{self, Skeleton};

/// Attached: waits for the duration, an interrupt, or every traced process
/// to exit (`-p`), and says which.
pub(super) fn wait_attached(
    skel: &Skeleton<'_>,
    pids: &bpf::TracedPids,
    a: &AttachOptions,
    shared: &Shared,
    started: Instant,
    progress: &mut Option<ProgressFn>,
) -> String {
    let (mut last, mut last_check) = (Instant::now(), Instant::now());
    let report = |p: &mut ProgressFn| p(&progress_now(shared, started));
    let why = loop {
        if shared.abort.load(Ordering::Relaxed) {
            break "stopped by a signal; the traced processes go on untouched".to_string();
        }
        if let Some(d) = a.duration {
            if started.elapsed() >= d {
                break format!("stopped after --duration {}; the traced processes go on untouched", human_duration(d));
            }
        }
        // Exited processes leave the traced set (children started since
        // keep it going).
        if !a.all && last_check.elapsed() >= Duration::from_millis(100) {
            if pids.get(skel).is_empty() {
                break "the traced processes exited".to_string();
            }
            last_check = Instant::now();
        }
        if let Some(p) = progress.as_mut() {
            if last.elapsed() >= Duration::from_millis(500) {
                last = Instant::now();
                report(p);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if let Some(p) = progress.as_mut() {
        report(p);
    }
    why
}

fn human_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 && s % 3600.0 == 0.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 60.0 && s % 60.0 == 0.0 {
        format!("{}m", s / 60.0)
    } else {
        format!("{s}s")
    }
}

/// Where the recording stands, for the progress line.
fn progress_now(shared: &Shared, started: Instant) -> Progress {
    Progress {
        elapsed: started.elapsed(),
        records: shared.records.load(Ordering::Relaxed),
        lost: shared.lost.load(Ordering::Relaxed),
        log_bytes: shared.log_bytes.load(Ordering::Relaxed),
        write_error: shared.write_error.lock().unwrap().clone(),
    }
}

/// Waits for the command; `None` when a second interrupt asked to stop now.
pub(super) fn wait_child(
    pid: i32,
    shared: &Shared,
    started: Instant,
    progress: &mut Option<ProgressFn>,
) -> Option<i32> {
    let mut last = Instant::now();
    let report = |p: &mut ProgressFn| p(&progress_now(shared, started));
    let exited = ChildExit::open(pid);
    loop {
        let mut status = 0;
        // SAFETY: reaping our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        let ended = if r == pid {
            Some(Some(status))
        } else if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            Some(Some(0))
        } else if shared.abort.load(Ordering::Relaxed) {
            Some(None)
        } else {
            None
        };
        if let Some(end) = ended {
            // A last report: what happened since the previous one (a write
            // error) is told before the summary, however short the run.
            if let Some(p) = progress.as_mut() {
                report(p);
            }
            return end;
        }
        if let Some(p) = progress.as_mut() {
            if last.elapsed() >= Duration::from_millis(500) {
                last = Instant::now();
                report(p);
            }
        }
        exited.wait();
    }
}

/// Wakes the wait for the command when it exits: its pidfd (5.3+),
/// polled; without one, a short sleep. Polling waitpid every 10 ms cost
/// the recorder's main thread about 4 ms of CPU a second on this VM.
struct ChildExit(Option<std::os::fd::OwnedFd>);

impl ChildExit {
    /// How long a wait lasts at most: a second interrupt (`shared.abort`)
    /// and the progress reports are looked at between waits.
    const MOST: Duration = Duration::from_millis(100);

    fn open(pid: i32) -> ChildExit {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags; a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        // SAFETY: a fresh fd of ours when not -1.
        ChildExit((fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }))
    }

    fn wait(&self) {
        use std::os::fd::AsRawFd;
        let Some(fd) = &self.0 else {
            std::thread::sleep(Duration::from_millis(10));
            return;
        };
        let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd. Readable once the child has exited;
        // an interruption or error just ends this wait early.
        let r = unsafe { libc::poll(&mut p, 1, Self::MOST.as_millis() as i32) };
        // Never a busy loop: an error, or a pidfd that says anything but
        // "exited" (waitpid then reaps the child), waits as before.
        let failed = r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR);
        if failed || (r > 0 && p.revents & libc::POLLIN == 0) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
