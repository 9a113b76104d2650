//! Where training phases (MLLOG lines) are read from: the command's
//! output, the Python module's pipe, a file; and the threads that read
//! them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};

use crossbeam_channel::Sender;
use mltrace_log::*;

use crate::mllog::{ClockMap, FileFollower, MllogMsg, MllogSource};
use crate::relay::{Copier, ModuleChannel, OutputRelay};

/// The readers of a recording's phases, not yet started.
pub(super) struct Readers {
    /// The phases' line in the header's probes.
    pub probe: Option<Probe>,
    pub copiers: Vec<Copier>,
    pub follower: Option<FileFollower>,
}

/// The readers for the command's output (`relay`), the module's pipe
/// (`channel`) and `--mllog FILE`.
pub(super) fn readers(
    relay: Option<OutputRelay>,
    channel: Option<ModuleChannel>,
    mllog: &MllogSource,
    clock: ClockMap,
) -> Readers {
    let from_output = match (&relay, mllog) {
        (Some(r), _) => Some(r.describe()),
        (None, MllogSource::File(f)) => Some(format!("MLLOG lines appended to {}", f.display())),
        _ => None,
    };
    let from_module = channel.as_ref().map(|_| "the mltrace_ebpf Python module's pipe ($MLTRACE_MLLOG_FD)".to_string());
    let phases_probe = match (from_output, from_module) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
    .map(|detail| Probe { subsystem: mltrace_log::subsystem::PHASES.into(), mechanism: "MLLOG".into(), detail });
    let mut copiers = relay.map(|r| r.into_copiers(clock)).unwrap_or_default();
    let relaying = !copiers.is_empty();
    copiers.extend(channel.map(|c| c.into_copier(clock)));
    let follower = match mllog {
        MllogSource::File(f) => Some(FileFollower::new(f.clone(), clock)),
        _ => None,
    };
    if relaying {
        // A write to our closed stdout must fail, not kill us (and the
        // recording); the command gets its SIGPIPE when we close its pipe.
        // SAFETY: setting a disposition; the command resets its own.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    }
    Readers { probe: phases_probe, copiers, follower }
}

/// The reader threads, running.
pub(super) struct Relays<'scope, 'env> {
    handles: Vec<ScopedJoinHandle<'scope, ()>>,
    stop: &'env AtomicBool,
}

/// Starts a thread per reader, each sending to `tx`.
pub(super) fn start<'scope, 'env>(
    s: &'scope Scope<'scope, 'env>,
    copiers: Vec<Copier>,
    follower: Option<FileFollower>,
    mllog_tx: Sender<MllogMsg>,
    relay_stop: &'env AtomicBool,
) -> Relays<'scope, 'env> {
    let mut relay_h = Vec::new();
    for c in copiers {
        let tx = mllog_tx.clone();
        relay_h.push(s.spawn(move || c.run(&tx, relay_stop)));
    }
    if let Some(f) = follower {
        let tx = mllog_tx.clone();
        relay_h.push(s.spawn(move || f.run(&tx, relay_stop)));
    }
    drop(mllog_tx);
    Relays { handles: relay_h, stop: relay_stop }
}

impl Relays<'_, '_> {
    /// Stops the readers (after the command ended) and waits for them.
    pub(super) fn stop(self) {
        self.stop.store(true, Ordering::Release);
        for h in self.handles {
            h.join().expect("output relay thread panicked");
        }
    }
}
