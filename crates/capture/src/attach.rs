//! `record -p` and `record -a`: tracing processes that are already running.
//!
//! Who may trace what: `record` may run from a binary given `cap_bpf` and
//! `cap_perfmon` (file capabilities), by a user who is not root. Those
//! capabilities let the kernel side see every process, so user space
//! decides, before anything is loaded or written, what the calling (real)
//! user may watch: `-p` only processes they could ptrace (their own uid and
//! gid, no capabilities the user lacks), `-a` and `--cgroup` only root.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mltrace_log::{Comm, FrameEncoder};

/// What to attach to, and the filters.
#[derive(Clone, Debug, Default)]
pub struct AttachOptions {
    /// `-p`: these processes, their threads, and the children they start.
    pub pids: Vec<u32>,
    /// `-a`: every process on the machine (but the recorder).
    pub all: bool,
    /// `--comm`: only processes of this name (`-a`).
    pub comm: Option<String>,
    /// `--cgroup`: only processes in this cgroup or below it (`-a`).
    pub cgroup: Option<PathBuf>,
    /// `--path`: only file events on paths under this prefix.
    pub path: Option<String>,
    /// `--duration`: stop after this long.
    pub duration: Option<Duration>,
}

/// Why an attach is refused, before anything is recorded.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("-p {pid}: no such process")]
    NoProcess { pid: u32 },
    #[error("-p {pid}: that is mltrace itself")]
    Recorder { pid: u32 },
    #[error(
        "-p {pid} ({comm}): not permitted: {why}; only root may trace another user's processes \
         (run mltrace with sudo)"
    )]
    NotPermitted { pid: u32, comm: String, why: String },
    #[error("{what} needs root: it would show other users' processes (run mltrace with sudo)")]
    NeedsRoot { what: &'static str },
    #[error("--cgroup {}: {why}", path.display())]
    Cgroup { path: PathBuf, why: String },
    #[error("--comm {0}: a process name is at most 15 bytes (the kernel's comm); got {1}")]
    CommTooLong(String, usize),
    #[error("--path {0}: expected an absolute path prefix of at most 255 bytes")]
    Path(String),
}

/// The calling user's real ids: what `sudo`-less use may watch.
fn real_ids() -> (u32, u32) {
    // SAFETY: getuid/getgid have no preconditions.
    unsafe { (libc::getuid(), libc::getgid()) }
}

/// The `Uid:`, `Gid:` (real, effective, saved, fs) and `CapPrm:` of a process.
struct Creds {
    uids: Vec<u32>,
    gids: Vec<u32>,
    cap_prm: u64,
}

fn creds(pid: u32) -> Option<Creds> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    let ids = |s: &str| s.split_whitespace().filter_map(|v| v.parse().ok()).collect::<Vec<u32>>();
    Some(Creds {
        uids: ids(field("Uid:")?),
        gids: ids(field("Gid:")?),
        cap_prm: u64::from_str_radix(field("CapPrm:")?, 16).ok()?,
    })
}

pub fn comm_of(pid: u32, tid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok().map(|c| c.trim_end().to_string())
}

/// Whether the caller (real `uid`, `gid`; root when `uid` is 0) may watch
/// `pid`, by the rule ptrace applies to a caller without CAP_SYS_PTRACE:
/// every uid and gid of the target is the caller's, and it holds no
/// capabilities (a setuid or setcap program the user started included).
fn may_watch(pid: u32, uid: u32, gid: u32) -> Result<(), AttachError> {
    let c = creds(pid).ok_or(AttachError::NoProcess { pid })?;
    if uid == 0 {
        return Ok(());
    }
    let comm = comm_of(pid, pid).unwrap_or_default();
    let why = if let Some(&other) = c.uids.iter().find(|&&u| u != uid) {
        Some(format!("it runs as uid {other}, you are uid {uid}"))
    } else if let Some(&other) = c.gids.iter().find(|&&g| g != gid) {
        Some(format!("it runs with gid {other}, you have gid {gid}"))
    } else if c.cap_prm != 0 {
        Some(format!("it holds capabilities ({:#x})", c.cap_prm))
    } else {
        None
    };
    match why {
        Some(why) => Err(AttachError::NotPermitted { pid, comm, why }),
        None => Ok(()),
    }
}

/// Checks what the calling user asked for, before anything is loaded.
/// Returns the cgroup directory to filter on, opened.
pub fn check(opts: &AttachOptions) -> Result<Option<fs::File>, AttachError> {
    let (uid, gid) = real_ids();
    if opts.all && uid != 0 {
        return Err(AttachError::NeedsRoot { what: "record -a" });
    }
    if opts.cgroup.is_some() && uid != 0 {
        return Err(AttachError::NeedsRoot { what: "--cgroup" });
    }
    if let Some(c) = &opts.comm {
        if c.len() > 15 {
            return Err(AttachError::CommTooLong(c.clone(), c.len()));
        }
    }
    if let Some(p) = &opts.path {
        if !p.starts_with('/') || p.len() > 255 {
            return Err(AttachError::Path(p.clone()));
        }
    }
    for &pid in &opts.pids {
        if pid == std::process::id() {
            return Err(AttachError::Recorder { pid });
        }
        may_watch(pid, uid, gid)?;
    }
    opts.cgroup.as_deref().map(open_cgroup).transpose()
}

/// A cgroup v2 directory: a path under the cgroup2 mount, or as
/// `/proc/PID/cgroup` shows it (relative to the mount, `/system.slice/...`).
fn open_cgroup(path: &Path) -> Result<fs::File, AttachError> {
    let err = |why: String| AttachError::Cgroup { path: path.to_path_buf(), why };
    let mount = cgroup2_mount().ok_or_else(|| err("no cgroup v2 file system is mounted".into()))?;
    let candidates = [path.to_path_buf(), mount.join(path.strip_prefix("/").unwrap_or(path))];
    for c in candidates {
        if c.is_dir() && c.starts_with(&mount) {
            return fs::File::open(&c).map_err(|e| err(e.to_string()));
        }
    }
    Err(err(format!("no such cgroup (looked under {})", mount.display())))
}

fn cgroup2_mount() -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (_, dir, kind) = (f.next()?, f.next()?, f.next()?);
        (kind == "cgroup2").then(|| PathBuf::from(dir))
    })
}

/// The command line of `pid` (for the header), from /proc.
pub fn cmdline(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
        })
        .unwrap_or_default()
}

fn tids(pid: u32) -> Vec<u32> {
    let mut v: Vec<u32> = fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// What the log says of an attached process at the start: its threads'
/// names (it has no exec in the log), its launcher variables and, per thread, the kernel's I/O
/// counts then, the baseline the kernel check compares from.
pub fn snapshot(pid: u32, ts: u64, enc: &mut FrameEncoder) {
    crate::environ::push(pid, ts, enc);
    for tid in tids(pid) {
        if let Some(c) = comm_of(pid, tid) {
            let comm = enc.intern(c.as_bytes());
            enc.push(&Comm { ts, pid, tid, comm });
        }
    }
}

/// What `record -p`/`-a` would let the calling user trace here, for
/// `mltrace doctor`.
pub fn who_may_trace() -> String {
    let (uid, _) = real_ids();
    let who = if uid == 0 {
        "root: record -p any process, record -a (--comm, --cgroup)".to_string()
    } else {
        format!("uid {uid}: record -p your own processes only; record -a and --cgroup need root")
    };
    let cgroup = match cgroup2_mount() {
        Some(m) => format!("--cgroup paths under {}", m.display()),
        None => "no cgroup v2 mount: --cgroup cannot be used".to_string(),
    };
    format!("{who}; {cgroup}")
}

/// Whether `path` is under `prefix` (whole components: `/data` takes
/// `/data/x`, not `/database`).
pub fn under(path: &[u8], prefix: &[u8]) -> bool {
    let prefix = prefix.strip_suffix(b"/").unwrap_or(prefix);
    path.starts_with(prefix) && (path.len() == prefix.len() || path[prefix.len()] == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_prefix_takes_whole_components() {
        assert!(under(b"/data/x.bin", b"/data"));
        assert!(under(b"/data/x.bin", b"/data/"));
        assert!(under(b"/data", b"/data"));
        assert!(!under(b"/database/x", b"/data"));
        assert!(under(b"/anything", b"/"));
        assert!(!under(b"pipe:[12]", b"/"));
    }

    #[test]
    fn own_processes_may_be_watched_others_not() {
        let me = std::process::id();
        let (uid, gid) = real_ids();
        assert!(may_watch(me, uid, gid).is_ok() || uid == 0 || creds(me).unwrap().cap_prm != 0);
        // pid 1 runs as root: a user who is not root is refused, by name.
        let e = may_watch(1, 4242, 4242).unwrap_err().to_string();
        assert!(e.contains("-p 1") && e.contains("uid 0"), "{e}");
        assert!(may_watch(1, 0, 0).is_ok());
        assert!(matches!(may_watch(u32::MAX - 1, 0, 0), Err(AttachError::NoProcess { .. })));
    }
}
