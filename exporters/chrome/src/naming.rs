//! What slices, processes and counters are called: the Perfetto exporter's
//! rules (private there), so both exports read the same.

use std::fmt::Write;

use mltrace_log::names;
use mltrace_log::*;

/// Longest process name shown (the UI truncates long group names).
pub const NAME_MAX: usize = 48;

/// A forked worker runs its parent's program: `python3 train.py (fork of 123)`.
pub fn fork_name(parent: &str, parent_pid: u32) -> String {
    let parent = parent.split(" (fork of ").next().unwrap_or("");
    // Program and script are enough to tell whose; the pid says which.
    let base = if parent.len() > 24 { parent.split(' ').take(2).collect::<Vec<_>>().join(" ") } else { parent.into() };
    format!("{base} (fork of {parent_pid})")
}

/// A process named by its exec: the command line, or the file's name.
pub fn exec_name(argv: &[u8], filename: &[u8]) -> String {
    let name = names::command_line(argv, NAME_MAX);
    if name.is_empty() {
        names::basename(&String::from_utf8_lossy(filename)).to_string()
    } else {
        name
    }
}

/// `pread64 4 KiB`, `read EIO`: reads, writes and transfers.
pub fn syscall(op: &str, ret: i64) -> String {
    if ret < 0 {
        format!("{op} {}", names::errno(-ret))
    } else {
        format!("{op} {}", names::size(ret as u64))
    }
}

/// `openat x.bin ENOENT`.
pub fn open(op: OpenOp, abs_path: &[u8], ret: i64) -> String {
    let base = String::from_utf8_lossy(abs_path);
    let base = names::basename(&base);
    if ret < 0 {
        format!("{} {} {}", op.name(), base, names::errno(-ret))
    } else {
        format!("{} {}", op.name(), base)
    }
}

/// `close x.log`, `close ? EBADF`.
pub fn close(path: &[u8], ret: i64) -> String {
    let p = String::from_utf8_lossy(path);
    match ret {
        0.. => format!("close {}", names::basename(&p)),
        e => format!("close {} {}", names::basename(&p), names::errno(-e)),
    }
}

/// `R 128 KiB`, `F`, `D 512 B error`.
pub fn block(op: BlockOp, bytes: u64, failed: bool) -> String {
    let e = if failed { " error" } else { "" };
    if bytes == 0 {
        format!("{}{e}", op.letter())
    } else {
        format!("{} {}{e}", op.letter(), names::size(bytes))
    }
}

/// Who started a block request, into `out`: `python3 train.py [123]`,
/// `kworker/u4:2 [90] (background writeback)`.
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

/// `Disk vda (254:0)`.
pub fn disk(name: &[u8], dev: u32) -> String {
    format!("Disk {} ({}:{})", String::from_utf8_lossy(name), dev >> 20, dev & 0xfffff)
}

/// A Chrome counter event is a name and an arg key, which trace_processor
/// joins with a space into the track name: split the wanted name at its
/// last space so the track reads the same as in the Perfetto export. A
/// single word cannot be split: its key is the unit (`busy %`, `read B/s`),
/// which JSON has no other place for, or `value` as in Chrome's counters.
pub fn counter_parts<'a>(track: &'a str, unit: &'a str) -> (&'a str, &'a str) {
    match track.rfind(' ') {
        Some(i) if i > 0 && i + 1 < track.len() => (&track[..i], &track[i + 1..]),
        _ if unit.is_empty() => (track, "value"),
        _ => (track, unit),
    }
}

pub fn phase(name: &str, flags: u8) -> String {
    if flags & phase::UNFINISHED != 0 {
        format!("{name} (unfinished)")
    } else {
        name.to_string()
    }
}

pub fn mark(name: &str, value: &str) -> String {
    if value.is_empty() || value == "null" {
        name.to_string()
    } else {
        format!("{name} = {value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(fork_name("python3 train.py --epochs 2 --lr 0.1", 100), "python3 train.py (fork of 100)");
        assert_eq!(fork_name("python3 train.py (fork of 100)", 200), "python3 train.py (fork of 200)");
        assert_eq!(fork_name("pid 9", 9), "pid 9 (fork of 9)");
        assert_eq!(exec_name(b"", b"/bin/sh"), "sh");
        assert_eq!(syscall("pread64", 4096), "pread64 4 KiB");
        assert_eq!(syscall("read", -5), "read EIO");
        assert_eq!(open(OpenOp::Openat, b"/home/u/x.bin", -2), "openat x.bin ENOENT");
        assert_eq!(close(b"?", -9), "close ? EBADF");
        assert_eq!(block(BlockOp::Read, 131072, false), "R 128 KiB");
        assert_eq!(block(BlockOp::Flush, 0, true), "F error");
        assert_eq!(disk(b"vda", 254 << 20), "Disk vda (254:0)");
        let mut s = String::new();
        block_flags(&mut s, blk::SYNC | blk::READAHEAD | blk::TRACED);
        assert_eq!(s, "sync|readahead");
    }

    #[test]
    fn counter_names_split_at_the_last_space() {
        assert_eq!(counter_parts("requests in flight", "count"), ("requests in", "flight"));
        assert_eq!(counter_parts("GPU 0 (NVIDIA H100) SM", "%"), ("GPU 0 (NVIDIA H100)", "SM"));
        assert_eq!(counter_parts("iowait", "%"), ("iowait", "%"));
        assert_eq!(counter_parts("level", ""), ("level", "value"));
        assert_eq!(counter_parts("trailing ", ""), ("trailing ", "value"));
    }
}
