//! Signals: blocked in the recorder's threads, forwarded to the command
//! by a thread of their own.

use std::sync::atomic::Ordering;

use super::Shared;

const FORWARDED: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks the forwarded signals in this thread (and the threads it starts),
/// so only the signal thread sees them; restores the old mask on drop.
pub(super) struct SignalBlock(libc::sigset_t);

impl SignalBlock {
    pub(super) fn new() -> Self {
        let set = signal_set();
        // SAFETY: valid sigset pointers.
        unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            SignalBlock(old)
        }
    }
}

impl Drop for SignalBlock {
    fn drop(&mut self) {
        // SAFETY: restoring the mask saved in new().
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// Where forwarded signals go: the command's own process group when it
/// has one, else the command alone.
pub(super) fn signal_loop(target: Option<i32>, shared: &Shared) {
    let set = signal_set();
    let timeout = libc::timespec { tv_sec: 0, tv_nsec: 100_000_000 };
    while !shared.stop.load(Ordering::Relaxed) {
        // SAFETY: valid set, info and timeout pointers.
        let (sig, code, sender) = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let sig = libc::sigtimedwait(&set, &mut info, &timeout);
            (sig, info.si_code, if info.si_code <= 0 { info.si_pid() } else { 0 })
        };
        // Our own forwarding, seen again when we share the target's group.
        if sig <= 0 || sender == std::process::id() as i32 {
            continue;
        }
        if sig == libc::SIGINT && shared.interrupts.fetch_add(1, Ordering::Relaxed) >= 1 {
            shared.abort.store(true, Ordering::Relaxed);
        }
        // Attached: any of them stops the recording, and nothing is sent
        // to the processes, which go on untouched.
        let Some(target) = target else {
            shared.abort.store(true, Ordering::Relaxed);
            continue;
        };
        // A terminal's Ctrl-C (SI_KERNEL) already reached the command's
        // process group; forward only what was sent to us alone.
        if code != libc::SI_KERNEL {
            // SAFETY: signalling our own child or its process group.
            unsafe { libc::kill(target, sig) };
        }
    }
}
