//! What exports call things: process names, slice names, block request
//! strings, group names. The Perfetto and Chrome exporters both use these,
//! so their traces cannot drift apart; [`show`](crate::show) has the
//! field formatting (sizes, errnos, flags) these are built from.

use std::collections::HashMap;
use std::fmt::Write;

use crate::record::*;
use crate::show;

/// Longest process name shown (the UI truncates long group names).
pub const NAME_MAX: usize = 48;

/// The mark a traced process leaves when it stops being traced because it
/// became another user or group (`record` not run as root): its value,
/// a JSON string, says who became whom and why.
pub const UNTRACED_MARK: &str = "mltrace.untraced";

/// A process seen before any exec or fork names it.
pub fn pid_name(pid: u32) -> String {
    format!("pid {pid}")
}

/// A forked worker runs its parent's program: `python3 train.py (fork of 123)`.
pub fn fork_name(parent: &str, parent_pid: u32) -> String {
    let parent = parent.split(" (fork of ").next().unwrap_or("");
    // Program and script are enough to tell whose; the pid says which.
    let base = if parent.len() > 24 { parent.split(' ').take(2).collect::<Vec<_>>().join(" ") } else { parent.into() };
    format!("{base} (fork of {parent_pid})")
}

/// A process named by its exec: the command line, or the file's name.
pub fn exec_name(argv: &[u8], filename: &[u8]) -> String {
    let name = show::command_line(argv, NAME_MAX);
    if name.is_empty() {
        show::basename(&String::from_utf8_lossy(filename)).to_string()
    } else {
        name
    }
}

/// The exec marker on a process's track: `exec python3`.
pub fn exec_instant(filename: &[u8]) -> String {
    format!("exec {}", show::basename(&String::from_utf8_lossy(filename)))
}

fn signal_name(sig: i32) -> String {
    const N: [&str; 32] = [
        "0",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    N.get(sig as usize).map(|s| s.to_string()).unwrap_or_else(|| format!("signal {sig}"))
}

/// The exit marker: `exit 0`, `exit 2`, `killed by SIGKILL`.
pub fn describe_status(status: i32) -> String {
    let sig = status & 0x7f;
    if sig == 0 {
        format!("exit {}", (status >> 8) & 0xff)
    } else {
        let core = if status & 0x80 != 0 { " (core dumped)" } else { "" };
        format!("killed by {}{core}", signal_name(sig))
    }
}

/// What a syscall's `ret` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Bytes moved, or the new fd.
    Ok(u64),
    /// The errno (positive).
    Err(i64),
    /// [`RET_UNKNOWN`]: the source did not record it.
    Unknown,
}

/// Reads a syscall record's `ret`.
pub fn outcome(ret: i64) -> Outcome {
    match ret {
        RET_UNKNOWN => Outcome::Unknown,
        0.. => Outcome::Ok(ret as u64),
        e => Outcome::Err(-e),
    }
}

/// The arg an export puts in place of `returned`/`errno`/`fd` when the
/// result is [`Outcome::Unknown`] (its own key: `returned` stays numeric).
pub const RESULT_ARG: &str = "result";
/// That arg's value.
pub const RESULT_UNKNOWN: &str = "unknown";

/// `pread64 4 KiB`, `read EIO`, `read ?`: reads, writes and transfers.
pub fn syscall(op: &str, ret: i64) -> String {
    match outcome(ret) {
        Outcome::Ok(n) => format!("{op} {}", show::size(n)),
        Outcome::Err(e) => format!("{op} {}", show::errno(e)),
        Outcome::Unknown => format!("{op} ?"),
    }
}

/// `io_uring read 64 KiB`, `io_uring readv ECANCELED`: an io_uring request.
pub fn uring(op: UringOp, ret: i64) -> String {
    match outcome(ret) {
        Outcome::Ok(n) => format!("io_uring {} {}", op.name(), show::size(n)),
        Outcome::Err(e) => format!("io_uring {} {}", op.name(), show::errno(e)),
        Outcome::Unknown => format!("io_uring {} ?", op.name()),
    }
}

/// An io_uring request's [`uring`] bits, for display: `fixed file, SQPOLL`.
pub fn uring_flags(flags: u8) -> String {
    const NAMES: [(u8, &str); 4] = [
        (uring::FIXED_FILE, "fixed file"),
        (uring::SQPOLL, "SQPOLL"),
        (uring::REQ_PARTIAL, "more iovecs than summed"),
        (uring::BUF_SELECT, "provided buffer"),
    ];
    NAMES.iter().filter(|(b, _)| flags & b != 0).map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
}

/// What an [`Aio`] with [`aio::PARTIAL`] says about its bytes.
pub const AIO_PARTIAL: &str =
    "bytes: a lower bound (first 16 iocbs or events; vectored iocbs, events whose iocb was gone)";

/// `io_submit 4 iocbs`, `io_getevents 1 event`, `io_submit EAGAIN`.
pub fn aio(op: AioOp, ret: i64) -> String {
    let what = if op == AioOp::Submit { "iocb" } else { "event" };
    match outcome(ret) {
        Outcome::Ok(n) => format!("{} {n} {what}{}", op.name(), if n == 1 { "" } else { "s" }),
        Outcome::Err(e) => format!("{} {}", op.name(), show::errno(e)),
        Outcome::Unknown => format!("{} ?", op.name()),
    }
}

/// `openat x.bin ENOENT`, `openat x.bin`.
pub fn open(op: OpenOp, abs_path: &[u8], ret: i64) -> String {
    let base = String::from_utf8_lossy(abs_path);
    let base = show::basename(&base);
    match outcome(ret) {
        Outcome::Err(e) => format!("{} {} {}", op.name(), base, show::errno(e)),
        _ => format!("{} {}", op.name(), base),
    }
}

/// `close x.log`, `close ? EBADF`.
pub fn close(path: &[u8], ret: i64) -> String {
    // Imports may not know which file an fd was.
    let p = if path.is_empty() { "?".into() } else { String::from_utf8_lossy(path) };
    match outcome(ret) {
        Outcome::Err(e) => format!("close {} {}", show::basename(&p), show::errno(e)),
        _ => format!("close {}", show::basename(&p)),
    }
}

/// `mmap train.arrow`, `munmap train.arrow`, `mmap x.bin ENODEV`.
pub fn mapping(op: MapOp, path: &[u8], ret: i64) -> String {
    let p = if path.is_empty() { "?".into() } else { String::from_utf8_lossy(path) };
    match outcome(ret) {
        Outcome::Err(e) => format!("{} {} {}", op.name(), show::basename(&p), show::errno(e)),
        _ => format!("{} {}", op.name(), show::basename(&p)),
    }
}

/// `major fault train.arrow`.
pub fn major_fault(path: &[u8]) -> String {
    let p = if path.is_empty() { "?".into() } else { String::from_utf8_lossy(path) };
    format!("major fault {}", show::basename(&p))
}

/// `R 128 KiB`, `F`, `D 512 B error`.
pub fn block(op: BlockOp, bytes: u64, failed: bool) -> String {
    let e = if failed { " error" } else { "" };
    if bytes == 0 {
        format!("{}{e}", op.letter())
    } else {
        format!("{} {}{e}", op.letter(), show::size(bytes))
    }
}

/// Who started a block request, into `out`: `python3 train.py [123]`,
/// `kworker/u4:2 [90] (background writeback)`. `traced_name` is the
/// exporter's name of a traced process, when it has one.
pub fn block_who(out: &mut String, b: &Block, comm: &[u8], traced_name: Option<&str>) {
    out.clear();
    if b.flags & blk::TRACED != 0 {
        let _ = match traced_name {
            Some(n) => write!(out, "{n} [{}]", b.pid),
            None => write!(out, "{} [{}]", String::from_utf8_lossy(comm), b.pid),
        };
    } else if b.flags & blk::START_UNKNOWN != 0 {
        out.push_str("(started before the recording)");
    } else {
        let _ = write!(out, "{} [{}]", String::from_utf8_lossy(comm), b.pid);
        if b.flags & blk::KTHREAD != 0 {
            out.push_str(if b.flags & blk::BACKGROUND != 0 { " (background writeback)" } else { " (kernel thread)" });
        }
    }
}

/// The request-flag names, `|`-separated, into `out`.
pub fn block_flags(out: &mut String, flags: u16) {
    out.clear();
    for (bit, name) in blk::NAMES {
        if flags & bit != 0 {
            if !out.is_empty() {
                out.push('|');
            }
            out.push_str(name);
        }
    }
}

/// A disk's group: `Disk vda (254:0)`.
pub fn disk(name: &[u8], dev: u32) -> String {
    format!("Disk {} ({}:{})", String::from_utf8_lossy(name), dev >> 20, dev & 0xfffff)
}

/// Which disk a block request is on, as a dense index in order of first
/// sight: by host and `dev`, or by host and name when `dev` is 0, as
/// imports know disks only by name and write dev 0 for all of them. (A
/// merged log's hosts each have their own `vda`.)
#[derive(Clone, Debug, Default)]
pub struct DiskIds {
    by_dev: HashMap<(usize, u32), usize>,
    by_name: HashMap<(usize, Vec<u8>), usize>,
}

impl DiskIds {
    pub fn get(&self, dev: u32, name: &[u8]) -> Option<usize> {
        self.get_on(0, dev, name)
    }

    /// On host `host` of a merged log (0 otherwise).
    pub fn get_on(&self, host: usize, dev: u32, name: &[u8]) -> Option<usize> {
        match dev {
            0 => self.by_name.get(&(host, name.to_vec())).copied(),
            d => self.by_dev.get(&(host, d)).copied(),
        }
    }

    /// The disk's index, and whether it is new.
    pub fn id(&mut self, dev: u32, name: &[u8]) -> (usize, bool) {
        self.id_on(0, dev, name)
    }

    /// The same on host `host` of a merged log.
    pub fn id_on(&mut self, host: usize, dev: u32, name: &[u8]) -> (usize, bool) {
        if let Some(i) = self.get_on(host, dev, name) {
            return (i, false);
        }
        let i = self.len();
        match dev {
            0 => self.by_name.insert((host, name.to_vec()), i),
            d => self.by_dev.insert((host, d), i),
        };
        (i, true)
    }

    pub fn len(&self) -> usize {
        self.by_dev.len() + self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A training phase: `EPOCH 3`, `RUN (unfinished)`.
pub fn phase(name: &str, flags: u8) -> String {
    if flags & phase::UNFINISHED != 0 {
        format!("{name} (unfinished)")
    } else {
        name.to_string()
    }
}

/// A mark: `eval_accuracy = 0.91`, or its name when it has no value.
pub fn mark(name: &str, value: &str) -> String {
    if value.is_empty() || value == "null" {
        name.to_string()
    } else {
        format!("{name} = {value}")
    }
}

/// A GPU event's instant: `clocks held back: power cap, sync boost`,
/// `clocks no longer held back`, `XID 79`, `2 corrected ECC errors`.
pub fn gpu_event(kind: GpuEventKind, code: u64) -> String {
    let errors = |what: &str| format!("{code} {what} ECC error{}", if code == 1 { "" } else { "s" });
    match kind {
        GpuEventKind::Throttle if code == 0 => "clocks no longer held back".into(),
        GpuEventKind::Throttle => {
            let mut why: Vec<String> =
                GPU_CLOCK_REASONS.iter().filter(|(b, _)| code & b != 0).map(|(_, n)| n.to_string()).collect();
            let known = GPU_CLOCK_REASONS.iter().fold(0, |m, (b, _)| m | b);
            if code & !known != 0 {
                why.push(format!("{:#x}", code & !known));
            }
            format!("clocks held back: {}", why.join(", "))
        }
        GpuEventKind::Xid => format!("XID {code}"),
        GpuEventKind::EccCorrected => errors("corrected"),
        GpuEventKind::EccUncorrected => errors("uncorrected"),
    }
}

/// The marker where events were lost: `12 events lost: ring buffer full`.
pub fn lost(count: u64, kind: LostKind) -> String {
    format!("{count} events lost: {}", kind.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes() {
        assert_eq!(fork_name("python3 train.py --epochs 2 --lr 0.1", 100), "python3 train.py (fork of 100)");
        assert_eq!(fork_name("python3 train.py (fork of 100)", 200), "python3 train.py (fork of 200)");
        assert_eq!(fork_name("pid 9", 9), "pid 9 (fork of 9)");
        assert_eq!(pid_name(9), "pid 9");
        assert_eq!(exec_name(b"", b"/bin/sh"), "sh");
        assert_eq!(exec_name(b"/usr/bin/python3\0train.py", b"/usr/bin/python3"), "python3 train.py");
        assert_eq!(exec_instant(b"/usr/bin/python3"), "exec python3");
        assert_eq!(describe_status(0), "exit 0");
        assert_eq!(describe_status(3 << 8), "exit 3");
        assert_eq!(describe_status(9 | 0x80), "killed by SIGKILL (core dumped)");
        assert_eq!(describe_status(40), "killed by signal 40");
    }

    #[test]
    fn slices() {
        assert_eq!(syscall("pread64", 4096), "pread64 4 KiB");
        assert_eq!(syscall("read", -5), "read EIO");
        assert_eq!(syscall("fsync", 0), "fsync 0 B");
        assert_eq!(uring(UringOp::Read, 65536), "io_uring read 64 KiB");
        assert_eq!(uring(UringOp::Writev, -125), "io_uring writev ECANCELED");
        assert_eq!(aio(AioOp::Submit, 4), "io_submit 4 iocbs");
        assert_eq!(aio(AioOp::Getevents, 1), "io_getevents 1 event");
        assert_eq!(aio(AioOp::Pgetevents, -4), "io_pgetevents EINTR");
        assert_eq!(open(OpenOp::Openat, b"/home/u/x.bin", -2), "openat x.bin ENOENT");
        assert_eq!(open(OpenOp::Creat, b"/home/u/x.bin", 3), "creat x.bin");
        assert_eq!(close(b"?", -9), "close ? EBADF");
        assert_eq!(close(b"/a/x.log", 0), "close x.log");
        assert_eq!(close(b"", 0), "close ?");
        assert_eq!(block(BlockOp::Read, 131072, false), "R 128 KiB");
        assert_eq!(block(BlockOp::Flush, 0, true), "F error");
        assert_eq!(block(BlockOp::Discard, 512, true), "D 512 B error");
        assert_eq!(lost(12, LostKind::RingFull), "12 events lost: ring buffer full");
        assert_eq!(mapping(MapOp::Mmap, b"/d/train.arrow", 0x7f00_0000_0000), "mmap train.arrow");
        assert_eq!(mapping(MapOp::Munmap, b"/d/train.arrow", 0), "munmap train.arrow");
        assert_eq!(mapping(MapOp::Mmap, b"/d/x.bin", -19), "mmap x.bin ENODEV");
        assert_eq!(major_fault(b"/d/train.arrow"), "major fault train.arrow");
        assert_eq!(major_fault(b""), "major fault ?");
    }

    #[test]
    fn unknown_results_have_no_size_or_errno() {
        assert_eq!(outcome(RET_UNKNOWN), Outcome::Unknown);
        assert_eq!(outcome(-4094), Outcome::Err(4094));
        assert_eq!(outcome(0), Outcome::Ok(0));
        assert_eq!(syscall("read", RET_UNKNOWN), "read ?");
        assert_eq!(open(OpenOp::Openat, b"/d/x.bin", RET_UNKNOWN), "openat x.bin");
        assert_eq!(close(b"/d/x.bin", RET_UNKNOWN), "close x.bin");
    }

    #[test]
    fn blocks_and_disks() {
        let b = |pid, flags| Block { pid, flags, ..Default::default() };
        let mut s = String::new();
        block_who(&mut s, &b(5, blk::TRACED), b"python3", Some("python3 train.py"));
        assert_eq!(s, "python3 train.py [5]");
        block_who(&mut s, &b(5, blk::TRACED), b"python3", None);
        assert_eq!(s, "python3 [5]");
        block_who(&mut s, &b(90, blk::KTHREAD | blk::BACKGROUND), b"kworker/u4:2", None);
        assert_eq!(s, "kworker/u4:2 [90] (background writeback)");
        block_who(&mut s, &b(91, blk::KTHREAD), b"jbd2/vda1-8", None);
        assert_eq!(s, "jbd2/vda1-8 [91] (kernel thread)");
        block_who(&mut s, &b(0, blk::START_UNKNOWN), b"", None);
        assert_eq!(s, "(started before the recording)");
        block_flags(&mut s, blk::SYNC | blk::READAHEAD | blk::TRACED);
        assert_eq!(s, "sync|readahead");
        block_flags(&mut s, blk::TRACED);
        assert_eq!(s, "");
        assert_eq!(disk(b"vda", 254 << 20), "Disk vda (254:0)");
        assert_eq!(disk(b"nvme0n1", (259 << 20) | 1), "Disk nvme0n1 (259:1)");
    }

    #[test]
    fn disks_with_dev_0_are_told_apart_by_name() {
        let mut ids = DiskIds::default();
        assert!(ids.is_empty());
        assert_eq!(ids.id(254 << 20, b"vda"), (0, true));
        // A real dev is the disk, whatever it is called.
        assert_eq!(ids.id(254 << 20, b"vda1"), (0, false));
        assert_eq!(ids.id(0, b"sda"), (1, true));
        assert_eq!(ids.id(0, b"sdb"), (2, true));
        assert_eq!(ids.id(0, b"sda"), (1, false));
        assert_eq!(ids.get(0, b"sdc"), None);
        assert_eq!(ids.len(), 3);
        // A merged log: another host's vda (the same dev) is another disk.
        assert_eq!(ids.id_on(1, 254 << 20, b"vda"), (3, true));
        assert_eq!(ids.id_on(1, 0, b"sda"), (4, true));
        assert_eq!(ids.id_on(0, 254 << 20, b"vda"), (0, false));
        assert_eq!(ids.get_on(1, 254 << 20, b"vda"), Some(3));
    }

    #[test]
    fn phases_and_marks() {
        assert_eq!(phase("EPOCH 3", 0), "EPOCH 3");
        assert_eq!(phase("RUN", phase::UNFINISHED), "RUN (unfinished)");
        assert_eq!(mark("eval_accuracy", "0.9"), "eval_accuracy = 0.9");
        assert_eq!(mark("run_start", "null"), "run_start");
        assert_eq!(mark("mmap", ""), "mmap");
    }
}

#[cfg(test)]
mod gpu_event_tests {
    use super::*;

    #[test]
    fn gpu_events_say_what_happened() {
        assert_eq!(gpu_event(GpuEventKind::Throttle, 0x14), "clocks held back: power cap, sync boost");
        assert_eq!(gpu_event(GpuEventKind::Throttle, 0x40 | 0x1000), "clocks held back: thermal (hardware), 0x1000");
        assert_eq!(gpu_event(GpuEventKind::Throttle, 0), "clocks no longer held back");
        assert_eq!(gpu_event(GpuEventKind::Xid, 79), "XID 79");
        assert_eq!(gpu_event(GpuEventKind::EccCorrected, 2), "2 corrected ECC errors");
        assert_eq!(gpu_event(GpuEventKind::EccUncorrected, 1), "1 uncorrected ECC error");
    }
}
