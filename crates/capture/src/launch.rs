//! Starting the traced command so that its first syscall is traced: the child
//! is forked, waits on a pipe while the recorder adds its pid to the traced
//! set, then execs. A second, close-on-exec pipe reports an exec failure.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why a command cannot be run, mapped to a shell's exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// 127: no such file, or not found in PATH.
    NotFound(String),
    /// 126: found but not executable (permissions, a directory, bad format).
    NotExecutable(String, String),
}

impl CommandError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CommandError::NotFound(_) => 127,
            CommandError::NotExecutable(..) => 126,
        }
    }
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandError::NotFound(c) => write!(f, "{c}: command not found"),
            CommandError::NotExecutable(c, why) => write!(f, "{c}: cannot execute: {why}"),
        }
    }
}

fn check_executable(p: &Path, shown: &str) -> Result<(), CommandError> {
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => Err(CommandError::NotExecutable(shown.into(), "is a directory".into())),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => {
            Err(CommandError::NotExecutable(shown.into(), "permission denied".into()))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(CommandError::NotFound(shown.into())),
        Err(e) => Err(CommandError::NotExecutable(shown.into(), e.to_string())),
    }
}

/// Finds `cmd` like execvp would: as given when it has a slash, else in PATH.
pub fn resolve(cmd: &OsStr) -> Result<PathBuf, CommandError> {
    let shown = cmd.to_string_lossy().into_owned();
    if cmd.is_empty() {
        return Err(CommandError::NotFound(shown));
    }
    if cmd.as_bytes().contains(&b'/') {
        let p = PathBuf::from(cmd);
        check_executable(&p, &shown)?;
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    let mut denied = None;
    for dir in std::env::split_paths(&path) {
        let p = dir.join(cmd);
        match check_executable(&p, &shown) {
            Ok(()) => return Ok(p),
            Err(e @ CommandError::NotExecutable(..)) if p.is_file() => denied = Some(e),
            Err(_) => {}
        }
    }
    Err(denied.unwrap_or(CommandError::NotFound(shown)))
}

/// Identity the command runs as (used when recording under sudo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// A forked child waiting for [`Paused::release`] before it execs.
pub struct Paused {
    pub pid: i32,
    go: Option<OwnedFd>,
    err: OwnedFd,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid 2-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// How to start the command, beyond what to run.
#[derive(Default)]
pub struct SpawnOptions<'a> {
    /// Drop to this identity first.
    pub run_as: Option<&'a RunAs>,
    /// The environment (default: ours).
    pub env: Option<&'a [(String, String)]>,
    /// Lead a process group of its own (see `recorder` for when).
    pub new_group: bool,
    /// Put these on fd 1 and 2 (the relay that reads MLLOG lines).
    pub stdout: Option<RawFd>,
    pub stderr: Option<RawFd>,
    /// A close-on-exec fd of ours the command gets too (same number).
    pub inherit: Option<RawFd>,
    /// Set on top of the environment (replacing these names there).
    pub extra_env: &'a [(String, String)],
}

/// Forks a child that will exec `program` with `argv` (argv[0] included).
/// The child unblocks all signals and resets their dispositions first.
pub fn spawn_paused(program: &Path, argv: &[OsString], o: &SpawnOptions<'_>) -> io::Result<Paused> {
    let (run_as, env, new_group) = (o.run_as, o.env, o.new_group);
    let (stdout, stderr, inherit) = (o.stdout, o.stderr, o.inherit);
    let to_c = |s: &OsStr| CString::new(s.as_bytes()).map_err(|_| io::Error::other("argument contains a NUL byte"));
    let prog = to_c(program.as_os_str())?;
    let args: Vec<CString> = argv.iter().map(|a| to_c(a)).collect::<Result<_, _>>()?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());
    let nul = |_| io::Error::other("environment contains a NUL byte");
    let extra = |k: &[u8]| o.extra_env.iter().any(|(x, _)| x.as_bytes() == k);
    let mut envs: Option<Vec<CString>> = match env {
        Some(e) => Some(
            e.iter()
                .filter(|(k, _)| !extra(k.as_bytes()))
                .map(|(k, v)| CString::new(format!("{k}={v}")))
                .collect::<Result<_, _>>()
                .map_err(nul)?,
        ),
        // Ours, spelled out, when something must be added to it.
        None if !o.extra_env.is_empty() => Some(
            std::env::vars_os()
                .filter(|(k, _)| !extra(k.as_bytes()))
                .map(|(k, v)| CString::new([k.as_bytes(), b"=", v.as_bytes()].concat()))
                .collect::<Result<_, _>>()
                .map_err(nul)?,
        ),
        None => None,
    };
    if let Some(e) = envs.as_mut() {
        for (k, v) in o.extra_env {
            e.push(CString::new(format!("{k}={v}")).map_err(nul)?);
        }
    }
    let env_ptrs: Option<Vec<*const libc::c_char>> = envs.as_ref().map(|v| {
        let mut p: Vec<*const libc::c_char> = v.iter().map(|e| e.as_ptr()).collect();
        p.push(std::ptr::null());
        p
    });
    let (go_r, go_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let groups: Vec<libc::gid_t> = run_as.map(|r| r.groups.clone()).unwrap_or_default();

    // SAFETY: after fork the child only calls async-signal-safe functions on
    // memory prepared above, then execs or _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        unsafe {
            let fail = |code: i32| -> ! {
                let e = *libc::__errno_location();
                libc::write(err_w.as_raw_fd(), (&e as *const i32).cast(), 4);
                libc::_exit(code)
            };
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            if new_group {
                libc::setpgid(0, 0);
            }
            // dup2 clears close-on-exec on the copy; the originals go at exec.
            if let Some(fd) = stdout {
                libc::dup2(fd, 1);
            }
            if let Some(fd) = stderr {
                libc::dup2(fd, 2);
            }
            if let Some(fd) = inherit {
                libc::fcntl(fd, libc::F_SETFD, 0);
            }
            libc::close(go_w.as_raw_fd());
            let mut b = 0u8;
            loop {
                let n = libc::read(go_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
                if n == 1 {
                    break;
                }
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                // The recorder gave up (or died) before releasing us.
                libc::_exit(127);
            }
            // Raw syscalls: glibc's wrappers would try to tell threads that
            // no longer exist in this forked child.
            if let Some(r) = run_as {
                if libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) != 0
                    || libc::syscall(libc::SYS_setresgid, r.gid, r.gid, r.gid) != 0
                    || libc::syscall(libc::SYS_setresuid, r.uid, r.uid, r.uid) != 0
                {
                    fail(126);
                }
            }
            // Ignored signals survive exec: give the command the defaults.
            // The raw syscall, because glibc refuses to touch its own
            // internal signals (32, 33), which may arrive ignored.
            let dfl = [0usize; 4]; // handler SIG_DFL, flags, restorer, mask
            for sig in 1..65 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::syscall(libc::SYS_rt_sigaction, sig, dfl.as_ptr(), std::ptr::null_mut::<u8>(), 8usize);
                }
            }
            match &env_ptrs {
                Some(e) => libc::execve(prog.as_ptr(), arg_ptrs.as_ptr(), e.as_ptr()),
                None => libc::execv(prog.as_ptr(), arg_ptrs.as_ptr()),
            };
            let e = *libc::__errno_location();
            fail(if e == libc::ENOENT { 127 } else { 126 })
        }
    }
    drop(go_r);
    drop(err_w);
    if new_group {
        // Also from this side, so the group exists before we signal it.
        // SAFETY: our own child, not yet exec'd.
        unsafe { libc::setpgid(pid, pid) };
    }
    Ok(Paused { pid, go: Some(go_w), err: err_r })
}

impl Paused {
    /// Lets the child exec. `Err(errno)` when the exec (or dropping
    /// privileges) failed; the child has then exited.
    pub fn release(mut self) -> Result<(), i32> {
        let go = self.go.take().unwrap();
        // SAFETY: writing one byte from a valid buffer to our pipe.
        unsafe { libc::write(go.as_raw_fd(), b"g".as_ptr().cast(), 1) };
        drop(go);
        let mut e = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            // SAFETY: reading into the remaining part of `e`.
            let n = unsafe { libc::read(self.err.as_raw_fd(), e[got..].as_mut_ptr().cast(), 4 - got) };
            if n == 0 {
                break;
            }
            if n < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                break;
            }
            got += n as usize;
        }
        if got == 4 {
            Err(i32::from_ne_bytes(e))
        } else {
            Ok(())
        }
    }

    /// Makes the child exit without running the command.
    pub fn abort(mut self) {
        self.go.take();
        let mut st = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(self.pid, &mut st, 0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_like_a_shell() {
        assert!(resolve(OsStr::new("sh")).unwrap().is_absolute());
        assert_eq!(resolve(OsStr::new("no-such-command-xyz")).unwrap_err().exit_code(), 127);
        assert_eq!(resolve(OsStr::new("/no/such/file")).unwrap_err().exit_code(), 127);
        assert_eq!(resolve(OsStr::new("/tmp")).unwrap_err().exit_code(), 126);
        let f = std::env::temp_dir().join(format!("mltrace-noexec-{}", std::process::id()));
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        assert_eq!(resolve(f.as_os_str()).unwrap_err().exit_code(), 126);
        std::fs::remove_file(f).unwrap();
    }

    #[test]
    fn paused_child_runs_only_when_released() {
        let marker = std::env::temp_dir().join(format!("mltrace-launch-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let args: Vec<OsString> = vec!["touch".into(), marker.clone().into()];
        let p = spawn_paused(&resolve(OsStr::new("touch")).unwrap(), &args, &SpawnOptions::default()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!marker.exists());
        let pid = p.pid;
        p.release().unwrap();
        let mut st = 0;
        unsafe { libc::waitpid(pid, &mut st, 0) };
        assert!(marker.exists());
        std::fs::remove_file(&marker).unwrap();
        let p = spawn_paused(
            Path::new("/nonexistent"),
            &["x".into()],
            &SpawnOptions { new_group: true, ..Default::default() },
        )
        .unwrap();
        assert_eq!(p.release(), Err(libc::ENOENT));
    }
}
