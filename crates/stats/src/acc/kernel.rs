//! The kernel's own I/O accounting of each process, against what the
//! trace saw over the same span.
//!
//! What the kernel counts (`task_struct->ioac`, fs/read_write.c and
//! fs/splice.c): `syscr`/`rchar` for read, pread64, readv, preadv, preadv2,
//! and the read side of sendfile and copy_file_range; `syscw`/`wchar` for
//! write, pwrite64, writev, pwritev, pwritev2 and their write side; and
//! the kernel's own reads for the task (`kernel_read`: exec loading the
//! program and its interpreter). Not splice, vmsplice, tee, io_uring,
//! native AIO or page faults on mapped files (`stats` keeps io_uring and
//! libaio apart: see `async_io`). mltrace traces every call of that list, so
//! over a span without exec the two must agree:
//!
//! - `rchar`/`wchar`: the bytes returned by those calls, exactly;
//! - `syscr`/`syscw`: every call that succeeded, plus failed ones the
//!   kernel got far enough to count. Where a failed call is counted
//!   depends on the call and the kernel version (on 6.18 a read of a bad
//!   fd is not counted, a readv of one is; a copy_file_range of 0 bytes is
//!   not), so failed calls make the expected count a range.
//!
//! The span compared is the process's life from its last exec (the
//! kernel's counts then are the baseline: they hold exec's own reads and,
//! for the command, mltrace's start-up handshake) or from its fork, to its
//! exit; per thread, summed. The process's `/proc/PID/io` would also hold
//! its reaped children's counts: these do not.

use std::collections::HashMap;

use mltrace_log::{acct, AcctPoint, IoAccounting, IoOp};

/// The kernel's counters, summed over a process's threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCounts {
    pub rchar: u64,
    pub wchar: u64,
    pub syscr: u64,
    pub syscw: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
}

impl KernelCounts {
    fn of(a: &IoAccounting) -> Self {
        KernelCounts {
            rchar: a.rchar,
            wchar: a.wchar,
            syscr: a.syscr,
            syscw: a.syscw,
            read_bytes: a.read_bytes,
            write_bytes: a.write_bytes,
            cancelled_write_bytes: a.cancelled_write_bytes,
        }
    }

    fn add_delta(&mut self, now: &KernelCounts, base: &KernelCounts) {
        self.rchar += now.rchar.saturating_sub(base.rchar);
        self.wchar += now.wchar.saturating_sub(base.wchar);
        self.syscr += now.syscr.saturating_sub(base.syscr);
        self.syscw += now.syscw.saturating_sub(base.syscw);
        self.read_bytes += now.read_bytes.saturating_sub(base.read_bytes);
        self.write_bytes += now.write_bytes.saturating_sub(base.write_bytes);
        self.cancelled_write_bytes += now.cancelled_write_bytes.saturating_sub(base.cancelled_write_bytes);
    }
}

/// What the kernel counted for one process (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct KernelIo {
    pub counts: KernelCounts,
    /// [`acct`] bits: which counters the kernel keeps.
    pub have: u8,
    /// Counted from an exec (else from the fork).
    pub since_exec: bool,
    /// Threads whose final counts are in `counts`.
    pub threads: u32,
    /// Some threads were still alive when recording ended (their counts
    /// were read from /proc then).
    pub alive_at_end: bool,
    /// The process's exit was seen: every thread is in `counts`.
    pub exited: bool,
    /// Baselines of the threads counted from an exec.
    base: HashMap<u32, KernelCounts>,
}

/// What the trace saw over the same span, as the kernel would count it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TracedIo {
    pub rchar: u64,
    pub wchar: u64,
    /// Calls the kernel certainly counted (the successful ones) ...
    pub syscr_min: u64,
    pub syscw_min: u64,
    /// ... and all of them (failed calls may or may not count).
    pub syscr_max: u64,
    pub syscw_max: u64,
}

fn is_read_call(op: IoOp) -> bool {
    matches!(op, IoOp::Read | IoOp::Pread64 | IoOp::Readv | IoOp::Preadv | IoOp::Preadv2)
}

fn is_write_call(op: IoOp) -> bool {
    matches!(op, IoOp::Write | IoOp::Pwrite64 | IoOp::Writev | IoOp::Pwritev | IoOp::Pwritev2)
}

impl TracedIo {
    /// A read/write-family call (fsync and sync_file_range are not counted).
    pub fn io(&mut self, op: IoOp, ret: i64) {
        let (ok, bytes) = (ret >= 0, ret.max(0) as u64);
        if is_read_call(op) {
            self.syscr_max += 1;
            self.syscr_min += u64::from(ok);
            self.rchar += bytes;
        } else if is_write_call(op) {
            self.syscw_max += 1;
            self.syscw_min += u64::from(ok);
            self.wchar += bytes;
        }
    }

    /// `calls` read/write-family calls summed in the kernel, `failed` of
    /// them failed, moving `bytes`.
    pub fn summary(&mut self, op: IoOp, calls: u64, failed: u64, bytes: u64) {
        if is_read_call(op) {
            self.syscr_max += calls;
            self.syscr_min += calls - failed.min(calls);
            self.rchar += bytes;
        } else if is_write_call(op) {
            self.syscw_max += calls;
            self.syscw_min += calls - failed.min(calls);
            self.wchar += bytes;
        }
    }

    /// sendfile / copy_file_range: one read and one write call. One that
    /// moved nothing may have returned before the kernel counted it.
    pub fn transfer(&mut self, ret: i64) {
        let (sure, bytes) = (ret > 0, ret.max(0) as u64);
        self.syscr_max += 1;
        self.syscw_max += 1;
        self.syscr_min += u64::from(sure);
        self.syscw_min += u64::from(sure);
        self.rchar += bytes;
        self.wchar += bytes;
    }
}

/// The outcome of comparing a process's trace with the kernel's counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// Every counter agrees.
    Match,
    /// The differences, described with their numbers.
    Mismatch(Vec<String>),
    /// Not compared exactly, and why.
    Unchecked(&'static str),
}

impl Check {
    pub fn label(&self) -> &'static str {
        match self {
            Check::Match => "match",
            Check::Mismatch(_) => "MISMATCH",
            Check::Unchecked(why) => why,
        }
    }
}

impl KernelIo {
    /// Takes one thread's counts. Returns true when the trace's counts must
    /// start again (an exec: the new baseline).
    pub fn take(&mut self, a: &IoAccounting) -> bool {
        let now = KernelCounts::of(a);
        self.have |= a.have;
        match a.at {
            AcctPoint::Exec => {
                // The exec'ing thread is the only one left: start over.
                self.counts = KernelCounts::default();
                self.threads = 0;
                self.base.clear();
                self.base.insert(a.tid, now);
                self.since_exec = true;
                // An exec after the end's reading (the recorder traces a
                // little longer) leaves the process alive at the end.
                return true;
            }
            AcctPoint::Exit | AcctPoint::End => {
                let base = self.base.remove(&a.tid).unwrap_or_default();
                self.counts.add_delta(&now, &base);
                self.threads += 1;
                self.alive_at_end |= a.at == AcctPoint::End;
            }
        }
        false
    }

    /// The kernel's counts against the trace's over the same span.
    pub fn check(&self, traced: &TracedIo, lost: bool) -> Check {
        if self.have & acct::CHARS == 0 {
            return Check::Unchecked("no call counters");
        }
        if self.alive_at_end {
            return Check::Unchecked("alive at end");
        }
        if !self.exited {
            return Check::Unchecked("log ends first");
        }
        if lost {
            return Check::Unchecked("events lost");
        }
        let k = &self.counts;
        let mut diffs = Vec::new();
        let calls = |name: &str, kernel: u64, min: u64, max: u64, diffs: &mut Vec<String>| {
            if kernel < min || kernel > max {
                let traced = if min == max { min.to_string() } else { format!("{min}-{max}") };
                diffs.push(format!("{name}: kernel {kernel}, traced {traced}"));
            }
        };
        calls("syscr", k.syscr, traced.syscr_min, traced.syscr_max, &mut diffs);
        calls("syscw", k.syscw, traced.syscw_min, traced.syscw_max, &mut diffs);
        for (name, kernel, t) in [("rchar", k.rchar, traced.rchar), ("wchar", k.wchar, traced.wchar)] {
            if kernel != t {
                diffs.push(format!("{name}: kernel {kernel}, traced {t}"));
            }
        }
        if diffs.is_empty() {
            Check::Match
        } else {
            Check::Mismatch(diffs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(at: AcctPoint, tid: u32, rchar: u64, syscr: u64) -> IoAccounting {
        IoAccounting { pid: 1, tid, at, have: acct::CHARS | acct::BYTES, rchar, syscr, ..Default::default() }
    }

    #[test]
    fn threads_sum_from_the_exec_baseline() {
        let mut k = KernelIo::default();
        assert!(!k.take(&at(AcctPoint::Exit, 5, 999, 9)), "a thread before the exec");
        assert!(k.take(&at(AcctPoint::Exec, 1, 1000, 4)));
        k.take(&at(AcctPoint::Exit, 2, 300, 3));
        k.take(&at(AcctPoint::Exit, 1, 1500, 10));
        k.exited = true;
        assert_eq!((k.counts.rchar, k.counts.syscr, k.threads), (800, 9, 2));
        let mut t = TracedIo::default();
        for _ in 0..8 {
            t.io(IoOp::Read, 100);
        }
        t.io(IoOp::Readv, -9);
        t.io(IoOp::Fsync, 0);
        assert_eq!(k.check(&t, false), Check::Match, "the failed readv may count");
        t.io(IoOp::Read, 1);
        assert_eq!(k.check(&t, false), Check::Mismatch(vec!["rchar: kernel 800, traced 801".into()]));
        t.io(IoOp::Read, 0);
        assert_eq!(
            k.check(&t, false),
            Check::Mismatch(vec!["syscr: kernel 9, traced 10-11".into(), "rchar: kernel 800, traced 801".into()])
        );
        assert_eq!(k.check(&t, true), Check::Unchecked("events lost"));
        k.exited = false;
        assert_eq!(k.check(&t, false), Check::Unchecked("log ends first"));
    }

    #[test]
    fn transfers_count_once_each_way() {
        let mut t = TracedIo::default();
        t.transfer(50);
        t.transfer(0);
        t.io(IoOp::Pwritev2, 7);
        assert_eq!(t, TracedIo { rchar: 50, wchar: 57, syscr_min: 1, syscr_max: 2, syscw_min: 2, syscw_max: 3 });
    }
}
