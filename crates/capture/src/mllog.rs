//! Training phases while recording: MLLOG lines the command prints, or
//! appends to a log file, become Phase and Mark records on the trace clock.
//!
//! The command's stdout and stderr go through us so we can see its lines:
//! each stream is a pipe, or a pseudo-terminal when ours is a terminal (so
//! the command still sees a terminal: line buffering, progress bars and
//! colours behave as without mltrace). Bytes are copied unchanged; the pty
//! does no output processing (OPOST off), our terminal does it as before.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_channel::Sender;
use mltrace_log::{ClockAnchor, FrameEncoder, Mark, Phase, Record};
use mltrace_mllog::{self as mllog, MllogEvent, PhaseTracker, TrackedRecord};

/// What a reader thread found.
pub enum MllogMsg {
    /// An event, its time already on the recording's clock (boottime ns).
    Event(u64, MllogEvent),
    /// An event from the command's own channel (the Python module's pipe).
    Module(u64, MllogEvent),
    /// A line marked `:::MLLOG` that does not parse: what was wrong.
    Malformed(String),
    /// An event dated before the recording started (an older run's line).
    Stale,
}

/// Where MLLOG events come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MllogSource {
    /// The command's stdout and stderr.
    #[default]
    Output,
    /// Lines appended to this file during the recording.
    File(PathBuf),
    /// Neither: the command's stdout and stderr are left alone.
    Off,
}

/// Converts MLLOG's Unix milliseconds to the recording's boottime clock.
#[derive(Clone, Copy)]
pub struct ClockMap {
    offset: i128,
    start: u64,
}

impl ClockMap {
    pub fn new(start: &ClockAnchor) -> Self {
        ClockMap { offset: start.realtime_ns as i128 - start.boottime_ns as i128, start: start.boottime_ns }
    }

    fn message(&self, ev: MllogEvent, module: bool) -> MllogMsg {
        let ts = ev.time_ns() as i128 - self.offset;
        // MLLOG times are milliseconds: allow that much before the start.
        if ts + 1_000_000 < self.start as i128 || ts < 0 {
            return MllogMsg::Stale;
        }
        let ts = ts.max(0) as u64;
        if module {
            MllogMsg::Module(ts, ev)
        } else {
            MllogMsg::Event(ts, ev)
        }
    }
}

/// Splits a byte stream into lines and sends the MLLOG ones.
struct LineSplitter {
    buf: Vec<u8>,
    /// A file holds only MLLOG, so bare JSON lines count there; in a
    /// command's output only lines tagged `:::MLLOG` do.
    bare_json: bool,
    /// Lines from the module's channel, paired by their own tracker.
    module: bool,
    clock: ClockMap,
}

/// Longer lines are passed through but not parsed.
const MAX_LINE: usize = 1 << 20;

impl LineSplitter {
    fn feed(&mut self, mut data: &[u8], tx: &Sender<MllogMsg>) {
        while let Some(nl) = data.iter().position(|&b| b == b'\n') {
            if self.buf.len() + nl <= MAX_LINE {
                self.buf.extend_from_slice(&data[..nl]);
                self.line(tx);
            }
            self.buf.clear();
            data = &data[nl + 1..];
        }
        if self.buf.len() + data.len() <= MAX_LINE {
            self.buf.extend_from_slice(data);
        } else {
            self.buf.clear();
            self.buf.push(0); // poisons the rest of this line
        }
    }

    fn line(&mut self, tx: &Sender<MllogMsg>) {
        if !self.bare_json && !contains(&self.buf, b":::MLLOG") {
            return;
        }
        let text = String::from_utf8_lossy(&self.buf);
        let line = text.trim_end_matches('\r');
        for parsed in mllog::parse_all(line) {
            let msg = match parsed {
                Ok(Some(ev)) => self.clock.message(ev, self.module),
                Ok(None) => continue,
                Err(e) => MllogMsg::Malformed(e.to_string()),
            };
            let _ = tx.send(msg);
        }
    }

    fn finish(&mut self, tx: &Sender<MllogMsg>) {
        if !self.buf.is_empty() && self.buf[0] != 0 {
            self.line(tx);
        }
        self.buf.clear();
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

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

/// Turns MLLOG events into Phase and Mark records (on the consumer thread,
/// which owns the frame being built).
pub struct PhaseRecorder {
    /// Whose a phase is when its metadata names no pid: the command's,
    /// whose output (or log file) carried it; 0 when attached.
    default_pid: u32,
    tracker: PhaseTracker,
    /// The module's events: each call is one event of one process, so
    /// nothing is merged as another rank's copy (window 0), and a phase
    /// repeated within seconds stays two phases.
    module: PhaseTracker,
    out: Vec<TrackedRecord>,
    malformed: u64,
    first_malformed: Option<String>,
    stale: u64,
}

impl Default for PhaseRecorder {
    fn default() -> Self {
        PhaseRecorder {
            default_pid: 0,
            tracker: PhaseTracker::default(),
            module: PhaseTracker::with_window(mllog::RankMode::Merge, 0),
            out: Vec::new(),
            malformed: 0,
            first_malformed: None,
            stale: 0,
        }
    }
}

impl PhaseRecorder {
    pub fn new(default_pid: u32) -> Self {
        PhaseRecorder { default_pid, ..Default::default() }
    }

    pub fn take(&mut self, msg: MllogMsg, enc: &mut FrameEncoder) {
        match msg {
            MllogMsg::Event(ts, ev) => self.tracker.push(ts, &ev, &mut self.out),
            MllogMsg::Module(ts, ev) => self.module.push(ts, &ev, &mut self.out),
            MllogMsg::Malformed(why) => {
                self.malformed += 1;
                self.first_malformed.get_or_insert(why);
            }
            MllogMsg::Stale => self.stale += 1,
        }
        self.emit(enc);
    }

    /// Ends phases still open at `end` (marked unfinished).
    pub fn finish(&mut self, end: u64, enc: &mut FrameEncoder) {
        self.tracker.finish(Some(end), &mut self.out);
        self.module.finish(Some(end), &mut self.out);
        self.emit(enc);
    }

    fn emit(&mut self, enc: &mut FrameEncoder) {
        for r in self.out.drain(..) {
            let rec = match r {
                TrackedRecord::Phase { ts, dur, kind, name, rank, pid, flags } => {
                    let name = enc.intern(name.as_bytes());
                    let pid = pid.unwrap_or(self.default_pid);
                    Record::Phase(Phase { ts, dur, kind, name, rank, pid, flags })
                }
                TrackedRecord::Mark { ts, name, value, rank } => {
                    let (name, value) = (enc.intern(name.as_bytes()), enc.intern(value.as_bytes()));
                    Record::Mark(Mark { ts, name, value, rank, pid: 0 })
                }
            };
            enc.push(&rec);
        }
    }

    /// What went wrong or looks odd, for the trailer and the summary.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.malformed > 0 {
            w.push(format!(
                "{} MLLOG lines did not parse and were left out (first: {})",
                self.malformed,
                self.first_malformed.as_deref().unwrap_or("")
            ));
        }
        if self.stale > 0 {
            w.push(format!("{} MLLOG events dated before the recording started were left out", self.stale));
        }
        let unfinished = self.tracker.stats().unfinished + self.module.stats().unfinished;
        if unfinished > 0 {
            w.push(format!(
                "{unfinished} training phases never stopped: kept up to where they ended, marked unfinished"
            ));
        }
        w
    }
}

/// Follows an MLLOG file like `tail -F`: from its end when recording starts
/// (earlier runs' lines are not this run's), from the top when it is
/// created, truncated or replaced during the recording.
pub struct FileFollower {
    path: PathBuf,
    lines: LineSplitter,
    file: Option<(File, u64)>,
    pos: u64,
}

impl FileFollower {
    pub fn new(path: PathBuf, clock: ClockMap) -> Self {
        let (file, pos) = match File::open(&path) {
            Ok(f) => {
                let (ino, len) = f.metadata().map(|m| (m.ino(), m.len())).unwrap_or((0, 0));
                (Some((f, ino)), len)
            }
            Err(_) => (None, 0),
        };
        FileFollower { path, lines: LineSplitter { buf: Vec::new(), bare_json: true, module: false, clock }, file, pos }
    }

    fn step(&mut self, tx: &Sender<MllogMsg>, buf: &mut [u8]) {
        // Replaced (log rotation, a new run): read the new file from the top.
        if let Ok(ino) = std::fs::metadata(&self.path).map(|m| m.ino()) {
            if Some(ino) != self.file.as_ref().map(|(_, i)| *i) {
                if let Ok(f) = File::open(&self.path) {
                    self.lines.finish(tx);
                    self.file = Some((f, ino));
                    self.pos = 0;
                }
            }
        }
        let Some((f, _)) = self.file.as_mut() else { return };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.pos {
            self.lines.finish(tx);
            self.pos = 0;
        }
        if f.seek(SeekFrom::Start(self.pos)).is_err() {
            return;
        }
        while let Ok(n) = f.read(buf) {
            if n == 0 {
                break;
            }
            self.pos += n as u64;
            self.lines.feed(&buf[..n], tx);
        }
    }

    /// Reads new lines every 100 ms until `stop`, then once more.
    pub fn run(mut self, tx: &Sender<MllogMsg>, stop: &AtomicBool) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let stopping = stop.load(Ordering::Acquire);
            self.step(tx, &mut buf);
            if stopping {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.lines.finish(tx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock() -> ClockMap {
        // Unix 1_700_000_000 s is boottime 1_000 s.
        ClockMap::new(&ClockAnchor {
            boottime_ns: 1_000_000_000_000,
            realtime_ns: 1_700_000_000_000_000_000,
            monotonic_ns: 0,
        })
    }

    fn split(bare_json: bool, chunks: &[&[u8]]) -> Vec<MllogMsg> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut s = LineSplitter { buf: Vec::new(), bare_json, module: false, clock: clock() };
        for c in chunks {
            s.feed(c, &tx);
        }
        s.finish(&tx);
        drop(tx);
        rx.iter().collect()
    }

    #[test]
    fn lines_split_across_reads_and_mapped_to_boottime() {
        let line = br#":::MLLOG {"namespace": "", "time_ms": 1700000001500, "event_type": "INTERVAL_START", "key": "epoch_start", "value": null, "metadata": {"epoch_num": 1}}"#;
        let mut chunks: Vec<&[u8]> = vec![b"progress 10%\r"];
        chunks.push(&line[..20]);
        chunks.push(&line[20..]);
        chunks.push(b"\r\nnot mllog {\"key\": 1}\n:::MLLOG {broken\n");
        let msgs = split(false, &chunks);
        assert_eq!(msgs.len(), 2);
        match &msgs[0] {
            MllogMsg::Event(ts, ev) => {
                assert_eq!(*ts, 1_001_500_000_000);
                assert_eq!(ev.key, "epoch_start");
            }
            _ => panic!("expected an event"),
        }
        assert!(matches!(&msgs[1], MllogMsg::Malformed(m) if m.contains("does not parse")));
    }

    /// Two ranks under torchrun, unbuffered: each wrote its record, then
    /// its newline (seen on an H100 run): two records on one line.
    #[test]
    fn two_records_on_one_line_are_both_taken() {
        let a =
            r#":::MLLOG {"time_ms": 1700000001500, "key": "epoch_start", "value": null, "metadata": {"epoch_num": 1}}"#;
        let b =
            r#":::MLLOG {"time_ms": 1700000001501, "key": "epoch_start", "value": null, "metadata": {"epoch_num": 1}}"#;
        let line = format!("{a}{b}\n\n");
        let msgs = split(false, &[line.as_bytes()]);
        let ts: Vec<u64> = msgs
            .iter()
            .map(|m| match m {
                MllogMsg::Event(ts, _) => *ts,
                _ => panic!("expected events"),
            })
            .collect();
        assert_eq!(ts, [1_001_500_000_000, 1_001_501_000_000]);
    }

    #[test]
    fn bare_json_only_in_files_and_old_events_are_stale() {
        let bare = br#"{"time_ms": 1700000002000, "key": "eval_accuracy", "value": 0.5}"#;
        assert_eq!(split(false, &[bare]).len(), 0);
        assert!(matches!(split(true, &[bare]).as_slice(), [MllogMsg::Event(1_002_000_000_000, _)]));
        let old = br#"{"time_ms": 1600000000000, "key": "eval_accuracy", "value": 0.5}"#;
        assert!(matches!(split(true, &[old]).as_slice(), [MllogMsg::Stale]));
    }

    #[test]
    fn overlong_lines_are_not_parsed() {
        let long = vec![b'x'; MAX_LINE + 10];
        let line = br#":::MLLOG {"time_ms": 1700000002000, "key": "k", "value": 1}"#;
        let msgs = split(false, &[line, &long, b"\n", line, b"\n"]);
        // The first line ran into the long one; only the last parses.
        assert_eq!(msgs.len(), 1);
    }

    #[test]
    fn file_follower_starts_at_the_end_and_restarts_on_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mllog.txt");
        let ev = |ms: u64| format!(":::MLLOG {{\"time_ms\": {ms}, \"key\": \"k\", \"value\": 1}}\n");
        std::fs::write(&path, ev(1_700_000_000_500)).unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut f = FileFollower::new(path.clone(), clock());
        let mut buf = vec![0u8; 16];
        f.step(&tx, &mut buf);
        assert!(rx.try_recv().is_err(), "the line written before the start is skipped");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(ev(1_700_000_001_000).as_bytes())
            .unwrap();
        f.step(&tx, &mut buf);
        assert!(matches!(rx.try_recv(), Ok(MllogMsg::Event(1_001_000_000_000, _))));
        std::fs::write(&path, ev(1_700_000_002_000)).unwrap(); // truncated, rewritten
        f.step(&tx, &mut buf);
        assert!(matches!(rx.try_recv(), Ok(MllogMsg::Event(1_002_000_000_000, _))));
    }

    use std::io::Write;
}
