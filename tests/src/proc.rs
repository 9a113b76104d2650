//! Processes a test starts die with it, pass or fail.

use std::ops::{Deref, DerefMut};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output};
use std::time::Duration;

/// A child in a session of its own (so everything it starts, even into
/// process groups of their own as `mltrace record` does, can be found),
/// killed with all of that session when dropped. The child also dies if
/// the test's thread dies first (PR_SET_PDEATHSIG).
pub struct Spawned {
    child: Option<Child>,
    sid: i32,
}

/// Starts `cmd` as a [`Spawned`].
pub fn spawn(cmd: &mut Command) -> Spawned {
    // SAFETY: setsid and prctl are async-signal-safe; nothing else runs
    // between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    let sid = child.id() as i32;
    Spawned { child: Some(child), sid }
}

/// Like `cmd.output()` (stdin empty, stdout and stderr captured), with
/// whatever the command leaves running killed.
pub fn output(cmd: &mut Command) -> Output {
    use std::process::Stdio;
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    spawn(cmd).wait_with_output().expect("waiting for a child")
}

impl Spawned {
    /// `Child::wait_with_output`; the session is still killed after.
    pub fn wait_with_output(mut self) -> std::io::Result<Output> {
        self.child.take().unwrap().wait_with_output()
    }
}

impl Deref for Spawned {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.child.as_ref().unwrap()
    }
}

impl DerefMut for Spawned {
    fn deref_mut(&mut self) -> &mut Child {
        self.child.as_mut().unwrap()
    }
}

/// Live (not zombie) processes of session `sid`.
fn session_members(sid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| {
        let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command name: state, ppid, pgrp, session.
        let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        (f.first() != Some(&"Z") && f.get(3)?.parse::<i32>().ok()? == sid).then_some(pid)
    })
    .collect()
}

impl Drop for Spawned {
    fn drop(&mut self) {
        // The leader first, while unreaped: its pid cannot be reused yet.
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
        }
        // Then the rest, until none is left (they may be forking).
        for _ in 0..50 {
            let left = session_members(self.sid);
            if left.is_empty() {
                break;
            }
            for p in left {
                // SAFETY: plain kill(2) of a process of the test's session.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }
}
