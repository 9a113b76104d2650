//! The command: what is traced (a command to start, or processes to
//! attach to), starting it paused, and why its exec failed.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use super::RecordOptions;
use crate::attach::{self, AttachOptions};
use crate::bpf;
use crate::error::CaptureError;
use crate::identity::{self, User};
use crate::launch::{self, CommandError};
use crate::mllog::MllogSource;
use crate::relay::{ModuleChannel, OutputRelay};
use crate::system;

/// Checks the privileges and what is to be traced: the processes to attach
/// to, or the program to start (resolved); and whose ids are watched.
pub(super) fn target(opts: &mut RecordOptions) -> Result<(Option<AttachOptions>, Option<PathBuf>), CaptureError> {
    let missing = system::missing_privileges();
    if !missing.is_empty() {
        return Err(CaptureError::Privileges { missing });
    }
    // Attached: who may watch what is decided before anything is loaded
    // or written (a refusal leaves no log).
    let attaching = opts.attach.clone();
    let program = match &attaching {
        Some(a) => {
            let cgroup = attach::check(a)?;
            opts.bpf.adopt = Some(bpf::Adopt {
                all: a.all,
                comm: a.comm.as_ref().map(|c| c.as_bytes().to_vec()),
                path: a.path.as_ref().map(|p| p.as_bytes().to_vec()),
                cgroup: cgroup.map(std::sync::Arc::new),
            });
            if matches!(opts.mllog, MllogSource::Output) {
                opts.mllog = MllogSource::Off;
            }
            None
        }
        None => {
            let first = opts.command.first().ok_or(CaptureError::Command(CommandError::NotFound(String::new())))?;
            Some(launch::resolve(first).map_err(CaptureError::Command)?)
        }
    };
    // Not root: whoever becomes another user or group is not the caller's
    // to watch (root, or sudo dropping the command to a user, sees all).
    // SAFETY: getuid and getgid have no preconditions.
    opts.bpf.only_ids = match unsafe { (libc::getuid(), libc::getgid()) } {
        (0, _) => None,
        ids => Some(ids),
    };
    Ok((attaching, program))
}

/// A command started paused, and the pipes it was given.
pub(super) struct Started {
    /// It shares our terminal's foreground process group.
    pub interactive: bool,
    /// Its output, relayed (MLLOG lines are read from it).
    pub relay: Option<OutputRelay>,
    /// The Python module's pipe.
    pub channel: Option<ModuleChannel>,
    /// None when attaching.
    pub child: Option<launch::Paused>,
}

/// Starts `program` paused (nothing when attaching), with the pipes its
/// training phases are read from.
pub(super) fn start(program: Option<&PathBuf>, opts: &RecordOptions) -> Result<Started, CaptureError> {
    let env = opts.run_as.as_ref().map(identity::environment);
    let run_as = opts.run_as.as_ref().map(User::run_as);
    // On a terminal the command stays in our process group, so it keeps the
    // terminal and Ctrl-C reaches it (and us) directly. Otherwise it gets a
    // group of its own, and signals sent to us go to that group, reaching
    // its workers without touching a supervisor that may share ours.
    let interactive = {
        // SAFETY: tcgetpgrp/getpgrp have no preconditions.
        let fg = unsafe { libc::tcgetpgrp(libc::STDIN_FILENO) };
        fg > 0 && fg == unsafe { libc::getpgrp() }
    };
    let relay = match opts.mllog {
        MllogSource::Output => Some(
            OutputRelay::new()
                .map_err(|source| CaptureError::Io { what: "making pipes for the command's output".into(), source })?,
        ),
        _ => None,
    };
    // The Python module's own pipe, for a command we start (it leaves the
    // command's output alone, so --mllog FILE keeps it; --no-mllog, no
    // training phases at all, does not).
    let channel = match (&program, &opts.mllog) {
        (None, _) | (_, MllogSource::Off) => None,
        (Some(_), _) => Some(
            ModuleChannel::new()
                .map_err(|source| CaptureError::Io { what: "making the mltrace module's pipe".into(), source })?,
        ),
    };
    let channel_env = match &channel {
        Some(c) => c
            .env()
            .map_err(|source| CaptureError::Io { what: "naming the mltrace module's pipe".into(), source })?
            .to_vec(),
        None => Vec::new(),
    };
    let child = match &program {
        Some(program) => Some(
            launch::spawn_paused(
                program,
                &opts.command,
                &launch::SpawnOptions {
                    run_as: run_as.as_ref(),
                    env: env.as_deref(),
                    new_group: !interactive,
                    stdout: relay.as_ref().map(|r| r.child_stdout.as_raw_fd()),
                    stderr: relay.as_ref().map(|r| r.child_stderr.as_raw_fd()),
                    inherit: channel.as_ref().map(|c| c.child_write.as_raw_fd()),
                    extra_env: &channel_env,
                },
            )
            .map_err(|source| CaptureError::Io { what: "starting the command".into(), source })?,
        ),
        None => None,
    };
    Ok(Started { interactive, relay, channel, child })
}

/// Why the command's exec failed (`errno`, from the paused child).
pub(super) fn exec_error(errno: i32, command: &[OsString]) -> CommandError {
    let why = std::io::Error::from_raw_os_error(errno).to_string();
    let shown = command.first().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    if errno == libc::ENOENT {
        CommandError::NotExecutable(shown, format!("{why} (bad interpreter?)"))
    } else {
        CommandError::NotExecutable(shown, why)
    }
}
