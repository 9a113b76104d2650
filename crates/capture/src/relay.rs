//! The command's output relay: its stdout and stderr go through us so we
//! can see its lines: each stream is a pipe, or a pseudo-terminal when ours
//! is a terminal (so the command still sees a terminal: line buffering,
//! progress bars and colours behave as without mltrace). Bytes are copied
//! unchanged; the pty does no output processing (OPOST off), our terminal
//! does it as before. The lines go to [`crate::mllog`], as do those of the
//! Python module's channel.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_channel::Sender;

use crate::mllog::{ClockMap, LineSplitter, MllogMsg};

/// One of the command's output streams: our end and where its bytes go
/// (nowhere for the module's channel).
struct Stream {
    read: OwnedFd,
    dest: Option<RawFd>,
    pty: bool,
}

/// The command's ends of the streams, to put on its fd 1 and 2, and ours.
pub struct OutputRelay {
    pub child_stdout: OwnedFd,
    pub child_stderr: OwnedFd,
    streams: Vec<Stream>,
}

fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid 2-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created and are ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A pty pair (master, slave) sized like `like`'s terminal, with output
/// processing off so the command's bytes arrive as written.
fn pty_like(like: RawFd) -> io::Result<(OwnedFd, OwnedFd)> {
    let check = |r: libc::c_int| if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) };
    // SAFETY: plain libc calls on fds we own; buffers are sized as required.
    unsafe {
        let m = check(libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC))?;
        let master = OwnedFd::from_raw_fd(m);
        check(libc::grantpt(m))?;
        check(libc::unlockpt(m))?;
        let mut name = [0 as libc::c_char; 128];
        let r = libc::ptsname_r(m, name.as_mut_ptr(), name.len());
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        let s = check(libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC))?;
        let slave = OwnedFd::from_raw_fd(s);
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(like, &mut t) != 0 {
            check(libc::tcgetattr(s, &mut t))?;
        }
        t.c_oflag &= !libc::OPOST;
        check(libc::tcsetattr(s, libc::TCSANOW, &t))?;
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(like, libc::TIOCGWINSZ, &mut ws) == 0 {
            libc::ioctl(m, libc::TIOCSWINSZ, &ws);
        }
        Ok((master, slave))
    }
}

fn pipe_or_pty(dest: RawFd) -> io::Result<(OwnedFd, OwnedFd)> {
    if is_tty(dest) {
        pty_like(dest)
    } else {
        cloexec_pipe()
    }
}

/// Whether two fds are the same open file (same terminal, same pipe).
fn same_file(a: RawFd, b: RawFd) -> bool {
    // SAFETY: fstat into zeroed stat buffers.
    unsafe {
        let (mut x, mut y): (libc::stat, libc::stat) = (std::mem::zeroed(), std::mem::zeroed());
        libc::fstat(a, &mut x) == 0 && libc::fstat(b, &mut y) == 0 && (x.st_dev, x.st_ino) == (y.st_dev, y.st_ino)
    }
}

fn is_tty(fd: RawFd) -> bool {
    // SAFETY: isatty has no preconditions.
    unsafe { libc::isatty(fd) == 1 }
}

impl OutputRelay {
    /// Makes a pipe or pty for each of our stdout and stderr; one for both
    /// when they are the same file (a terminal, `2>&1`), so the command's
    /// interleaving of the two is kept, as it would be without us.
    pub fn new() -> io::Result<Self> {
        let mut streams = Vec::new();
        let (child_stdout, child_stderr) = if same_file(libc::STDOUT_FILENO, libc::STDERR_FILENO) {
            let (read, write) = pipe_or_pty(libc::STDOUT_FILENO)?;
            streams.push(Stream { read, dest: Some(libc::STDOUT_FILENO), pty: is_tty(libc::STDOUT_FILENO) });
            let dup = write.try_clone()?;
            (write, dup)
        } else {
            let mut ends = Vec::new();
            for dest in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
                let (read, write) = pipe_or_pty(dest)?;
                ends.push(write);
                streams.push(Stream { read, dest: Some(dest), pty: is_tty(dest) });
            }
            let err = ends.pop().unwrap();
            (ends.pop().unwrap(), err)
        };
        Ok(OutputRelay { child_stdout, child_stderr, streams })
    }

    /// What the header says about how output was read.
    pub fn describe(&self) -> String {
        let kind = |s: &Stream| if s.pty { "pty" } else { "pipe" };
        let how = match self.streams.as_slice() {
            [one] => format!("stdout and stderr (one {}, as they share a file)", kind(one)),
            [out, err] => format!("stdout ({}) and stderr ({})", kind(out), kind(err)),
            _ => unreachable!("one or two streams"),
        };
        format!("`:::MLLOG` lines in the command's {how}, passed through unchanged")
    }

    /// Drops the command's ends (it has them now) and returns one copier per
    /// stream, each to run on its own thread until `stop` and then drained.
    pub fn into_copiers(self, clock: ClockMap) -> Vec<Copier> {
        drop(self.child_stdout);
        drop(self.child_stderr);
        self.streams
            .into_iter()
            .map(|s| Copier {
                stream: s,
                lines: LineSplitter { buf: Vec::new(), bare_json: false, module: false, clock },
            })
            .collect()
    }
}

/// The environment variables that name the module's channel to the command.
pub const CHANNEL_FD_ENV: &str = "MLTRACE_MLLOG_FD";
/// The pipe's inode, so a process that did not inherit the fd (a child of
/// `subprocess`, which closes fds) does not write into whatever reuses it.
pub const CHANNEL_INODE_ENV: &str = "MLTRACE_MLLOG_INODE";

/// A pipe of the command's own for MLLOG lines (what `mltrace_ebpf.phase` and
/// `mltrace_ebpf.mark` write), so the command's output is left alone. The write
/// end is inherited by the command and its children; we only read.
pub struct ModuleChannel {
    /// Close-on-exec here; the child clears that on its copy.
    pub child_write: OwnedFd,
    read: OwnedFd,
}

impl ModuleChannel {
    pub fn new() -> io::Result<Self> {
        let (read, write) = cloexec_pipe()?;
        // Above the standard streams even when one of ours was closed (the
        // pipe could have taken fd 0, 1 or 2 and then be replaced in the child).
        // SAFETY: duplicating an fd we own into a new one we then own.
        let high = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
        if high < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just created, ours alone.
        let child_write = unsafe { OwnedFd::from_raw_fd(high) };
        Ok(ModuleChannel { child_write, read })
    }

    /// The variables to give the command.
    pub fn env(&self) -> io::Result<[(String, String); 2]> {
        let ino = File::from(self.child_write.try_clone()?).metadata()?.ino();
        Ok([
            (CHANNEL_FD_ENV.to_string(), self.child_write.as_raw_fd().to_string()),
            (CHANNEL_INODE_ENV.to_string(), ino.to_string()),
        ])
    }

    /// Drops our write end (the command has its copy) and returns the reader.
    pub fn into_copier(self, clock: ClockMap) -> Copier {
        drop(self.child_write);
        Copier {
            stream: Stream { read: self.read, dest: None, pty: false },
            lines: LineSplitter { buf: Vec::new(), bare_json: false, module: true, clock },
        }
    }
}

/// Copies one stream to where it was going, picking out MLLOG lines.
pub struct Copier {
    stream: Stream,
    lines: LineSplitter,
}

/// How long a reader waits before looking at its stop flag again.
const POLL: Duration = Duration::from_millis(50);

fn poll_in(fd: RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as libc::c_int) };
    r > 0
}

fn write_all(fd: RawFd, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        // SAFETY: writing from a valid slice.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        data = &data[n as usize..];
    }
    Ok(())
}

impl Copier {
    /// Runs until the stream ends, or `stop` is set and nothing is left to
    /// read (a background process may keep it open after the command ends).
    pub fn run(mut self, tx: &Sender<MllogMsg>, stop: &AtomicBool) {
        let fd = self.stream.read.as_raw_fd();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let stopping = stop.load(Ordering::Acquire);
            if !poll_in(fd, if stopping { Duration::ZERO } else { POLL }) {
                if stopping {
                    break;
                }
                continue;
            }
            // SAFETY: reading into our buffer.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // EOF, or EIO from a pty whose last slave closed.
            if n <= 0 {
                break;
            }
            let data = &buf[..n as usize];
            if self.stream.dest.is_some_and(|d| write_all(d, data).is_err()) {
                // Our output is gone (`| head` ended): closing our end lets
                // the command find out as it would have, on its next write.
                break;
            }
            self.lines.feed(data, tx);
        }
        self.lines.finish(tx);
    }
}
