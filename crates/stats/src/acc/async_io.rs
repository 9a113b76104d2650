//! io_uring requests and libaio calls: I/O the kernel does without
//! read/write syscalls and does not count in a task's syscr/rchar (io_uring
//! and fs/aio.c call the file's read_iter/write_iter directly). So these
//! are kept apart from the syscall counts, which the kernel check compares
//! exactly, and only added to them in totals.

use mltrace_log::{aio, labels, AioOp, IoUring};

use crate::OpStats;

/// A process's io_uring read and write requests (submission to completion).
#[derive(Clone, Default)]
pub struct UringStats {
    pub reads: OpStats,
    pub writes: OpStats,
}

impl UringStats {
    pub fn add(&mut self, r: &IoUring) {
        if r.op.is_write() {
            self.writes.add(r.ret, r.dur)
        } else {
            self.reads.add(r.ret, r.dur)
        }
    }

    pub fn any(&self) -> bool {
        self.reads.count + self.writes.count > 0
    }
}

/// A process's libaio calls.
#[derive(Clone, Default)]
pub struct AioStats {
    /// io_submit calls, the iocbs they submitted, and those that failed.
    pub submits: u64,
    pub iocbs: u64,
    pub submit_errors: u64,
    /// aio_nbytes of the pread and pwrite iocbs passed.
    pub requested_read_bytes: u64,
    pub requested_write_bytes: u64,
    /// io_getevents and io_pgetevents calls, the events they returned.
    pub getevents: u64,
    pub events: u64,
    /// Bytes the returned events of reads and of writes moved.
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Events whose res was an error.
    pub failed_events: u64,
    /// Some bytes were not summed (more than 16 iocbs or events in a call,
    /// vectored iocbs): the byte counts are lower bounds.
    pub lower_bound: bool,
}

impl AioStats {
    pub fn add(&mut self, r: &mltrace_log::Aio) {
        let done = match labels::outcome(r.ret) {
            labels::Outcome::Ok(n) => n,
            _ => 0,
        };
        let failed = r.ret < 0 && r.ret != mltrace_log::RET_UNKNOWN;
        if r.op == AioOp::Submit {
            self.submits += 1;
            self.iocbs += done;
            self.submit_errors += u64::from(failed);
            self.requested_read_bytes += r.read_bytes;
            self.requested_write_bytes += r.write_bytes;
        } else {
            self.getevents += 1;
            self.events += done;
            self.read_bytes += r.read_bytes;
            self.write_bytes += r.write_bytes;
            self.failed_events += u64::from(r.errors);
        }
        self.lower_bound |= r.flags & aio::PARTIAL != 0;
    }

    pub fn any(&self) -> bool {
        self.submits + self.getevents > 0
    }
}
