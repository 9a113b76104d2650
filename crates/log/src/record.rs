//! The records a log holds. They are plain `Copy` values: strings are
//! referenced by [`StrId`], valid within the frame that carries the record
//! (see `Frame::str`), so reading a record never allocates.
//!
//! Timestamps are CLOCK_BOOTTIME nanoseconds (the header's anchors relate them
//! to wall-clock time); `dur` is nanoseconds. `pid` is the process (tgid),
//! `tid` the thread.

/// `ret` of a syscall record whose result the source did not record (an
/// importer's text trace that never printed it). No real errno is 4095
/// (Linux reserves -4095..-1 for errnos and uses far fewer), so this cannot
/// be mistaken for a result; readers show it as unknown, never as an error.
pub const RET_UNKNOWN: i64 = -4095;

/// A string interned in the current frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct StrId(pub u32);

/// Declares a `#[repr(u8)]` enum with a lossless `from_u8` (unknown codes map
/// to the given fallback, so newer writers do not break older readers) and a
/// display name.
macro_rules! code_enum {
    ($(#[$m:meta])* $name:ident, fallback $fb:ident, { $($(#[$vm:meta])* $var:ident = $val:expr => $s:expr),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum $name { $($(#[$vm])* $var = $val),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$var),+];
            pub fn from_u8(v: u8) -> $name {
                match v { $($val => $name::$var,)+ _ => $name::$fb }
            }
            pub fn name(self) -> &'static str {
                match self { $($name::$var => $s),+ }
            }
        }
        impl Default for $name {
            fn default() -> Self { $name::$fb }
        }
        impl $crate::declare::FieldValue for $name {
            #[inline(always)]
            fn to_col(self) -> u64 { self as u64 }
            #[inline(always)]
            fn from_col(v: u64) -> Option<Self> { u8::try_from(v).ok().map($name::from_u8) }
            fn to_i(self) -> i64 { self as i64 }
            fn from_i(v: i64) -> Option<Self> { u8::try_from(v).ok().map($name::from_u8) }
            fn value(self) -> $crate::declare::Value { $crate::declare::Value::Code(self.name()) }
        }
    };
}

code_enum!(
    /// The syscall behind an [`Open`].
    OpenOp, fallback Openat, {
        Open = 0 => "open",
        Openat = 1 => "openat",
        Openat2 = 2 => "openat2",
        Creat = 3 => "creat",
    }
);

code_enum!(
    /// The syscall behind an [`Io`].
    IoOp, fallback Read, {
        Read = 0 => "read",
        Pread64 = 1 => "pread64",
        Readv = 2 => "readv",
        Preadv = 3 => "preadv",
        Preadv2 = 4 => "preadv2",
        Write = 16 => "write",
        Pwrite64 = 17 => "pwrite64",
        Writev = 18 => "writev",
        Pwritev = 19 => "pwritev",
        Pwritev2 = 20 => "pwritev2",
        Fsync = 21 => "fsync",
        Fdatasync = 22 => "fdatasync",
        SyncFileRange = 23 => "sync_file_range",
    }
);

impl IoOp {
    pub fn is_write(self) -> bool {
        (self as u8) >= 16
    }
}

code_enum!(
    /// The calls an [`IoSummary`] sums: [`IoOp`]'s codes, and close.
    SumOp, fallback Read, {
        Read = 0 => "read",
        Pread64 = 1 => "pread64",
        Readv = 2 => "readv",
        Preadv = 3 => "preadv",
        Preadv2 = 4 => "preadv2",
        Write = 16 => "write",
        Pwrite64 = 17 => "pwrite64",
        Writev = 18 => "writev",
        Pwritev = 19 => "pwritev",
        Pwritev2 = 20 => "pwritev2",
        Fsync = 21 => "fsync",
        Fdatasync = 22 => "fdatasync",
        SyncFileRange = 23 => "sync_file_range",
        Close = 32 => "close",
    }
);

impl SumOp {
    /// The [`IoOp`] it sums; `None` for close.
    pub fn io(self) -> Option<IoOp> {
        (self != SumOp::Close).then(|| IoOp::from_u8(self as u8))
    }

    pub fn from_io(op: IoOp) -> SumOp {
        SumOp::from_u8(op as u8)
    }
}

#[cfg(test)]
mod sum_op_tests {
    use super::*;

    /// SumOp repeats IoOp's list (the log's codes are its contract): each
    /// I/O call sums as itself, so a call added to one list only fails here.
    #[test]
    fn each_io_op_is_summed_as_itself() {
        for &o in IoOp::ALL {
            let s = SumOp::from_io(o);
            assert_eq!((s.io(), s.name()), (Some(o), o.name()), "{o:?}");
        }
        assert_eq!(SumOp::ALL.len(), IoOp::ALL.len() + 1, "SumOp has a call IoOp lacks");
    }
}

code_enum!(
    /// The syscall behind a [`Transfer`] (data moved between two fds in the kernel).
    TransferOp, fallback Sendfile, {
        Sendfile = 0 => "sendfile",
        CopyFileRange = 1 => "copy_file_range",
    }
);

code_enum!(
    /// What an fd refers to; non-files carry a kind-style path such as `pipe:[1234]`.
    FileKind, fallback Unknown, {
        Unknown = 0 => "unknown",
        Regular = 1 => "file",
        Directory = 2 => "directory",
        Pipe = 3 => "pipe",
        Socket = 4 => "socket",
        Tty = 5 => "tty",
        CharDev = 6 => "char device",
        BlockDev = 7 => "block device",
        AnonInode = 8 => "anon inode",
        Memfd = 9 => "memfd",
        Symlink = 10 => "symlink",
    }
);

code_enum!(
    /// Where an [`Io`]'s offset came from.
    OffsetSrc, fallback None, {
        None = 0 => "none",
        /// The call's own offset argument (pread64, preadv...).
        Explicit = 1 => "explicit",
        /// The file position when the call started (read, write on a seekable file).
        FilePos = 2 => "file position",
    }
);

code_enum!(
    /// A block request's operation (the kernel's REQ_OP_*).
    BlockOp, fallback Other, {
        Read = 0 => "read",
        Write = 1 => "write",
        Flush = 2 => "flush",
        Discard = 3 => "discard",
        SecureErase = 5 => "secure erase",
        WriteZeroes = 9 => "write zeroes",
        Other = 255 => "other",
    }
);

impl BlockOp {
    /// One letter, like blktrace's rwbs: R, W, F, D, E, Z, ?.
    pub fn letter(self) -> &'static str {
        match self {
            BlockOp::Read => "R",
            BlockOp::Write => "W",
            BlockOp::Flush => "F",
            BlockOp::Discard => "D",
            BlockOp::SecureErase => "E",
            BlockOp::WriteZeroes => "Z",
            BlockOp::Other => "?",
        }
    }
}

/// Bits of [`Block::flags`].
pub mod blk {
    /// The kernel's request flags.
    pub const SYNC: u16 = 1;
    pub const META: u16 = 2;
    pub const PRIO: u16 = 4;
    pub const FUA: u16 = 8;
    pub const PREFLUSH: u16 = 16;
    pub const READAHEAD: u16 = 32;
    pub const BACKGROUND: u16 = 64;
    /// Started in a traced process (`pid`/`tid` are one of ours).
    pub const TRACED: u16 = 0x100;
    /// Started in a kernel thread (a kworker flushing, jbd2...).
    pub const KTHREAD: u16 = 0x200;
    /// In flight before tracing began: `ts` is the issue or completion time.
    pub const START_UNKNOWN: u16 = 0x400;
    /// Issue not seen: `queue` is 0 and `device` spans the whole request.
    pub const ISSUE_UNKNOWN: u16 = 0x800;
    /// A partial completion: more of this request completes later.
    pub const PARTIAL: u16 = 0x1000;

    /// Names of the request-flag bits, for display.
    pub const NAMES: [(u16, &str); 7] = [
        (SYNC, "sync"),
        (META, "meta"),
        (PRIO, "prio"),
        (FUA, "fua"),
        (PREFLUSH, "preflush"),
        (READAHEAD, "readahead"),
        (BACKGROUND, "background"),
    ];
}

code_enum!(
    /// The unit of a [`Counter`].
    CounterUnit, fallback None, {
        None = 0 => "",
        Percent = 1 => "%",
        Bytes = 2 => "B",
        BytesPerSec = 3 => "B/s",
        PerSec = 4 => "/s",
        Watts = 5 => "W",
        Celsius = 6 => "°C",
        Megahertz = 7 => "MHz",
        Count = 8 => "count",
    }
);

code_enum!(
    /// What a [`Phase`] of training is (MLPerf logging's vocabulary).
    PhaseKind, fallback Other, {
        Other = 0 => "phase",
        Init = 1 => "INIT",
        Run = 2 => "RUN",
        Epoch = 3 => "EPOCH",
        Block = 4 => "BLOCK",
        Eval = 5 => "EVAL",
        Checkpoint = 6 => "CHECKPOINT",
    }
);

code_enum!(
    /// Why events were lost; see [`Lost`].
    LostKind, fallback Other, {
        Other = 0 => "other",
        /// The BPF ring buffer was full when an event was to be written.
        RingFull = 1 => "ring buffer full",
        /// A BPF hash map (threads in a syscall, traced processes) was full.
        MapFull = 2 => "BPF map full",
        /// A path or argument string could not be read from memory.
        StringRead = 3 => "string unreadable",
        /// A record from the kernel that user space could not decode.
        Malformed = 4 => "malformed kernel record",
        /// A file identity whose path never reached user space.
        UnknownFile = 5 => "file path unknown",
        /// Runs of mltrace's BPF programs the kernel skipped (their
        /// `recursion_misses`: the program was already running on that
        /// CPU, or, on some kernels, another tracing program was): the
        /// event they would have seen is missing.
        Skipped = 6 => "BPF program skipped",
        /// Records still in a CPU's batch when the recording ended, the
        /// batch never sent into its ring (its CPU had gone offline).
        Unsent = 7 => "batch never sent",
    }
);

/// Bits of [`Open::trunc`] / [`Exec::trunc`]: which strings were cut.
pub mod trunc {
    /// The path as passed (or argv) was cut at the capture limit.
    pub const ARG: u8 = 1;
    /// The resolved absolute path was cut (too long or too deep).
    pub const ABS: u8 = 2;
    /// The string could not be read at all.
    pub const UNREADABLE: u8 = 4;
}

impl Block {
    /// Its completion: `ts` plus its `queue` and `device` times.
    pub fn end_ts(&self) -> u64 {
        self.span_end()
    }
}

/// Bits of [`Phase::flags`].
pub mod phase {
    /// The phase had started but not ended when the log ended.
    pub const UNFINISHED: u8 = 1;
}

code_enum!(
    /// What a [`GpuEvent`] says happened.
    GpuEventKind, fallback Throttle, {
        /// The clocks' event reasons changed: `code` is NVML's new reason
        /// mask (`nvmlClocksEventReason*`, 0 when nothing holds them back).
        Throttle = 0 => "clocks",
        /// An XID error (critical driver-reported error): `code` is its number.
        Xid = 1 => "XID",
        /// Corrected (single-bit) ECC errors: `code` is how many since the
        /// previous sample (volatile counter).
        EccCorrected = 2 => "ECC corrected",
        /// Uncorrected (double-bit) ECC errors, likewise.
        EccUncorrected = 3 => "ECC uncorrected",
    }
);

/// NVML's clock event reason bits (`nvmlClocksEventReason*`) and what
/// they mean, for labels.
pub const GPU_CLOCK_REASONS: [(u64, &str); 9] = [
    (0x1, "GPU idle"),
    (0x2, "application clocks setting"),
    (0x4, "power cap"),
    (0x8, "hardware slowdown"),
    (0x10, "sync boost"),
    (0x20, "thermal (software)"),
    (0x40, "thermal (hardware)"),
    (0x80, "power brake"),
    (0x100, "display clock setting"),
];

code_enum!(
    /// When an [`IoAccounting`] was read.
    AcctPoint, fallback Exit, {
        /// At exec (in the kernel, after the new program was loaded): the
        /// baseline its later counts are compared from.
        Exec = 0 => "exec",
        /// At the thread's exit (in the kernel): its final counts.
        Exit = 1 => "exit",
        /// When recording ended, the thread still alive (from
        /// `/proc/PID/task/TID/io`).
        End = 2 => "end",
    }
);

/// Bits of [`IoAccounting::have`]: which counters the kernel keeps.
pub mod acct {
    /// rchar, wchar, syscr, syscw (CONFIG_TASK_XACCT).
    pub const CHARS: u8 = 1;
    /// read_bytes, write_bytes, cancelled_write_bytes (CONFIG_TASK_IO_ACCOUNTING).
    pub const BYTES: u8 = 2;
}

code_enum!(
    /// What the thread was doing when a [`PageCache`] insertion happened.
    CacheDuring, fallback Other, {
        /// Outside any recorded syscall: a fault on a file mapping, or a
        /// call mltrace does not record (readahead(2), fadvise, exec).
        Fault = 0 => "fault or untraced call",
        /// A read-family call.
        Read = 1 => "read",
        /// A write-family call: pages a write filled, not reads from storage.
        Write = 2 => "write",
        /// sendfile or copy_file_range (source or destination).
        Transfer = 3 => "transfer",
        /// Another recorded call (open, close, fsync...).
        Other = 4 => "other call",
    }
);

impl CacheDuring {
    /// Whether the pages were read from storage (not filled by a write or
    /// a transfer into a file).
    pub fn is_storage_read(self) -> bool {
        matches!(self, CacheDuring::Fault | CacheDuring::Read | CacheDuring::Other)
    }
}

code_enum!(
    /// The opcode of an [`IoUring`] request (the kernel's IORING_OP_*).
    UringOp, fallback Other, {
        Readv = 1 => "readv",
        Writev = 2 => "writev",
        ReadFixed = 4 => "read_fixed",
        WriteFixed = 5 => "write_fixed",
        Read = 22 => "read",
        Write = 23 => "write",
        Other = 255 => "other",
    }
);

impl UringOp {
    // Exhaustive: a new opcode must say whether it reads or writes.
    pub fn is_write(self) -> bool {
        match self {
            UringOp::Writev | UringOp::WriteFixed | UringOp::Write => true,
            UringOp::Readv | UringOp::ReadFixed | UringOp::Read | UringOp::Other => false,
        }
    }

    pub fn is_read(self) -> bool {
        match self {
            UringOp::Readv | UringOp::ReadFixed | UringOp::Read => true,
            UringOp::Writev | UringOp::WriteFixed | UringOp::Write | UringOp::Other => false,
        }
    }
}

/// Bits of [`IoUring::flags`].
pub mod uring {
    /// IOSQE_FIXED_FILE: `fd` is an index into the ring's registered files.
    pub const FIXED_FILE: u8 = 1;
    /// Submitted by the ring's SQPOLL thread (`tid` is that thread).
    pub const SQPOLL: u8 = 2;
    /// More iovecs than summed: `requested` is a lower bound.
    pub const REQ_PARTIAL: u8 = 4;
    /// IOSQE_BUFFER_SELECT: the kernel picked a provided buffer; `requested`
    /// is the limit asked for (0 for the vectored ops).
    pub const BUF_SELECT: u8 = 8;
}

code_enum!(
    /// The syscall behind an [`Aio`] (Linux native AIO, as libaio calls it).
    AioOp, fallback Submit, {
        Submit = 0 => "io_submit",
        Getevents = 1 => "io_getevents",
        Pgetevents = 2 => "io_pgetevents",
    }
);

code_enum!(
    /// An iocb's opcode (IOCB_CMD_*).
    AioCmd, fallback Other, {
        Pread = 0 => "pread",
        Pwrite = 1 => "pwrite",
        Fsync = 2 => "fsync",
        Fdsync = 3 => "fdsync",
        Poll = 5 => "poll",
        Noop = 6 => "noop",
        Preadv = 7 => "preadv",
        Pwritev = 8 => "pwritev",
        Other = 255 => "other",
    }
);

/// Bits of [`Aio::flags`].
pub mod aio {
    /// More iocbs or events than summed, vectored iocbs (whose byte
    /// counts are not read) or events whose iocb was gone: the bytes are a
    /// lower bound.
    pub const PARTIAL: u8 = 1;
}

code_enum!(
    /// The state a thread left the CPU in at a [`SchedSwitch`] (the
    /// kernel's `prev_state`, as ftrace letters it).
    SchedState, fallback Other, {
        /// Preempted, or woken before it got off the CPU: still runnable (R).
        Runnable = 0 => "R",
        /// Interruptible sleep: waiting for an event (a pipe, a futex...) (S).
        Sleeping = 1 => "S",
        /// Uninterruptible sleep: usually waiting for I/O (D).
        Uninterruptible = 2 => "D",
        /// Stopped or traced (T, t).
        Stopped = 3 => "T",
        /// Exiting (X, Z).
        Dead = 4 => "X",
        /// Idle kernel waits (I) and anything else.
        Other = 5 => "?",
    }
);

impl SchedState {
    /// The kernel's TASK_* bits for this state, as Perfetto reads `prev_state`.
    pub fn kernel_bits(self) -> i64 {
        match self {
            SchedState::Runnable => 0,
            SchedState::Sleeping => 1,
            SchedState::Uninterruptible => 2,
            SchedState::Stopped => 4,
            SchedState::Dead => 16,
            SchedState::Other => 0x80,
        }
    }
}

/// Bits of [`SchedSwitch::traced`] and [`SchedWake::traced`]: which side is
/// a thread of a traced process (the other side is whoever it was).
pub mod sched {
    pub const PREV: u8 = 1;
    pub const NEXT: u8 = 2;
    /// In a [`super::SchedWake`]: the waker (the wakee is always traced).
    pub const WAKER: u8 = 4;
}

/// Bits of [`SchedSpan::flags`].
pub mod span {
    /// A wake-up ended the sleep (else the thread was seen running again
    /// without one: the sleep's end is known, not who ended it).
    pub const WOKEN: u8 = 1;
    /// The waker is a thread of a traced process.
    pub const WAKER: u8 = 2;
    /// On a CPU from `ts` (else runnable, or gone at its exit).
    pub const RUNNING: u8 = 4;
}

code_enum!(
    /// What raised a [`SchedWake`]: the running task, or an interrupt that
    /// cut into it (which then woke nobody: the waker fields are 0).
    WakeBy, fallback Unknown, {
        /// The task running on `cpu` (`waker_pid`/`waker_tid`).
        Task = 0 => "task",
        /// A timer expiring (hrtimer interrupt): a timed sleep or a timeout.
        Timer = 1 => "timer",
        /// Another hard interrupt: a device completing.
        Hardirq = 2 => "hardirq",
        /// A softirq: network receive, block completion, timer wheel.
        Softirq = 3 => "softirq",
        /// Not known (a log of format 1, or a kernel where mltrace could
        /// not find preempt_count): the waker fields name the running
        /// task, which an interrupt may have cut into.
        Unknown = 4 => "unknown",
    }
);

impl WakeBy {
    /// Whether an interrupt, not a task, raised the wake-up.
    pub fn interrupt(self) -> bool {
        matches!(self, WakeBy::Timer | WakeBy::Hardirq | WakeBy::Softirq)
    }
}

code_enum!(
    /// The system call a thread went to sleep in ([`SchedSwitch::prev_call`]),
    /// by family: the verdict needs to know a sleep the thread asked for
    /// (nanosleep) from a wait for something, and the trace names it.
    SleepCall, fallback Other, {
        None = 0 => "",
        /// A call outside the families below.
        Other = 1 => "other call",
        Futex = 2 => "futex",
        /// poll, ppoll.
        Poll = 3 => "poll",
        /// select, pselect6.
        Select = 4 => "select",
        /// epoll_wait, epoll_pwait, epoll_pwait2.
        EpollWait = 5 => "epoll_wait",
        /// nanosleep, clock_nanosleep: a sleep the thread asked for.
        Nanosleep = 6 => "nanosleep",
        /// read, readv, pread64, preadv, preadv2.
        Read = 7 => "read",
        /// write, writev, pwrite64, pwritev, pwritev2.
        Write = 8 => "write",
        /// recvfrom, recvmsg, recvmmsg.
        Recv = 9 => "recv",
        /// sendto, sendmsg, sendmmsg.
        Send = 10 => "send",
        /// accept, accept4.
        Accept = 11 => "accept",
        Connect = 12 => "connect",
        /// wait4, waitid.
        Wait = 13 => "wait",
        /// pause, rt_sigsuspend, rt_sigtimedwait.
        Signal = 14 => "signal wait",
        /// ioctl: how GPU drivers wait for the device.
        Ioctl = 15 => "ioctl",
        /// io_getevents, io_pgetevents, io_uring_enter.
        AsyncIo = 16 => "async I/O wait",
        /// open, openat, openat2, close.
        OpenClose = 17 => "open/close",
        /// fsync, fdatasync, sync_file_range, msync.
        Sync = 18 => "fsync",
        /// mmap, munmap, mremap, mprotect, madvise.
        Mapping = 19 => "mmap",
        /// flock, fcntl.
        Lock = 20 => "file lock",
        /// semop, semtimedop, msgrcv, msgsnd, mq_timedreceive, mq_timedsend.
        Ipc = 21 => "SysV/POSIX IPC",
        /// sendfile, splice, tee, copy_file_range, vmsplice.
        Splice = 22 => "splice",
        /// exit, exit_group.
        Exit = 23 => "exit",
        /// A futex on the process's Python GIL: waiting for the GIL.
        Gil = 24 => "GIL",
    }
);

impl SleepCall {
    /// A sleep the thread asked for, ended by its own timer.
    pub fn timed_sleep(self) -> bool {
        self == SleepCall::Nanosleep
    }
}

code_enum!(
    /// What a [`SchedWake`] is.
    WakeOp, fallback Waking, {
        /// sched_waking: the waker (the running task) makes the thread runnable.
        Waking = 0 => "waking",
        /// sched_migrate_task: the thread moves from `cpu` to `target_cpu`.
        Migrate = 1 => "migrate",
    }
);

code_enum!(
    /// The call behind a [`Mapping`].
    MapOp, fallback Mmap, {
        Mmap = 0 => "mmap",
        Munmap = 1 => "munmap",
        Mremap = 2 => "mremap",
        /// Not a call: the process's anonymous mmaps, counted in the kernel
        /// (they are too many to record one by one) and logged at its exit
        /// or when recording ends: `ret` calls, `len` bytes in all.
        Anonymous = 3 => "anonymous mmaps",
    }
);

/// Bits of [`Mapping::file_flags`].
pub mod mapf {
    /// The file lives in memory (tmpfs, shmem, ramfs, hugetlbfs): a mapping
    /// of it is shared memory, not storage.
    pub const MEMORY_FS: u8 = 1;
}

impl Mapping {
    /// The address a successful mmap or mremap mapped at.
    pub fn mapped_at(&self) -> Option<u64> {
        (self.op != MapOp::Anonymous && self.op != MapOp::Munmap && self.ret >= 0).then_some(self.ret as u64)
    }
}

code_enum!(
    /// The syscall behind a [`NetCall`].
    NetOp, fallback Recvfrom, {
        Sendto = 0 => "sendto",
        Recvfrom = 1 => "recvfrom",
        Sendmsg = 2 => "sendmsg",
        Recvmsg = 3 => "recvmsg",
        Sendmmsg = 4 => "sendmmsg",
        Recvmmsg = 5 => "recvmmsg",
    }
);

impl NetOp {
    pub fn is_send(self) -> bool {
        matches!(self, NetOp::Sendto | NetOp::Sendmsg | NetOp::Sendmmsg)
    }
}

/// Bits of [`NetCall::flags`].
pub mod net {
    /// The peer is the call's own address argument (`sendto` to an
    /// address, `recvfrom` that filled one).
    pub const PEER_FROM_CALL: u8 = 1;
    /// The peer is the socket's: a connected socket's remote end, or the
    /// path a unix socket's peer (or, accepted, the socket itself) is bound to.
    pub const PEER_FROM_SOCKET: u8 = 2;
    /// More messages or iovecs than summed: `bytes` or `requested` are a lower bound.
    pub const PARTIAL: u8 = 4;
}

code_enum!(
    /// The syscall behind a [`MetaCall`]: listing a directory, looking a
    /// path up (the stat and access families, readlink), and changing a
    /// directory's entries (what checkpoint rotation does).
    MetaOp, fallback Other, {
        Getdents64 = 0 => "getdents64",
        Stat = 1 => "stat",
        Lstat = 2 => "lstat",
        Newfstatat = 3 => "newfstatat",
        Statx = 4 => "statx",
        Access = 5 => "access",
        Faccessat = 6 => "faccessat",
        Faccessat2 = 7 => "faccessat2",
        Readlink = 8 => "readlink",
        Readlinkat = 9 => "readlinkat",
        Rename = 16 => "rename",
        Renameat = 17 => "renameat",
        Renameat2 = 18 => "renameat2",
        Unlink = 19 => "unlink",
        Unlinkat = 20 => "unlinkat",
        Mkdir = 21 => "mkdir",
        Mkdirat = 22 => "mkdirat",
        Rmdir = 23 => "rmdir",
        Other = 255 => "other",
    }
);

impl MetaOp {
    /// Whether it lists a directory (its path is the directory itself,
    /// not an entry of one).
    pub fn lists(self) -> bool {
        self == MetaOp::Getdents64
    }

    /// Whether it changes a directory's entries (codes 16 and up).
    pub fn changes(self) -> bool {
        (16..255).contains(&(self as u8))
    }
}

code_enum!(
    /// The CUDA driver call behind a [`GpuCall`]: the calls that make the
    /// host wait for the GPU (`_v2` and `_ptsz` entry points are the same call).
    GpuApi, fallback StreamSynchronize, {
        StreamSynchronize = 0 => "cuStreamSynchronize",
        CtxSynchronize = 1 => "cuCtxSynchronize",
        EventSynchronize = 2 => "cuEventSynchronize",
        /// The blocking copies (the `Async` ones enqueue and return).
        Memcpy = 8 => "cuMemcpy",
        MemcpyDtoH = 9 => "cuMemcpyDtoH",
        MemcpyHtoD = 10 => "cuMemcpyHtoD",
        MemcpyDtoD = 11 => "cuMemcpyDtoD",
        MemcpyPeer = 12 => "cuMemcpyPeer",
        Memcpy2D = 13 => "cuMemcpy2D",
        Memcpy3D = 14 => "cuMemcpy3D",
    }
);

code_enum!(
    /// A CUDA driver call counted in the kernel, not recorded call by call
    /// (see [`GpuCount`]): the polls that ask without waiting, and, when
    /// asked for (`record --cuda-launches`), kernel and graph launches.
    GpuCounted, fallback StreamQuery, {
        StreamQuery = 0 => "cuStreamQuery",
        EventQuery = 1 => "cuEventQuery",
        /// cuLaunchKernel, cuLaunchKernelEx and cuLaunchCooperativeKernel.
        LaunchKernel = 8 => "cuLaunchKernel",
        GraphLaunch = 9 => "cuGraphLaunch",
    }
);

impl GpuApi {
    /// A copy (its `bytes` are known), not a synchronisation.
    pub fn is_copy(self) -> bool {
        (self as u8) >= 8
    }
}

code_enum!(
    /// The NCCL call behind a [`Collective`].
    NcclOp, fallback AllReduce, {
        AllReduce = 0 => "ncclAllReduce",
        AllGather = 1 => "ncclAllGather",
        ReduceScatter = 2 => "ncclReduceScatter",
        Broadcast = 3 => "ncclBroadcast",
        Reduce = 4 => "ncclReduce",
        Send = 5 => "ncclSend",
        Recv = 6 => "ncclRecv",
        /// Calls between a GroupStart and its GroupEnd are launched together at the end.
        GroupStart = 16 => "ncclGroupStart",
        GroupEnd = 17 => "ncclGroupEnd",
    }
);

/// Bytes of one element of NCCL datatype `dt` (ncclDataType_t), 0 for one
/// this version does not know.
pub fn nccl_type_size(dt: u8) -> u64 {
    match dt {
        0 | 1 | 10 | 11 => 1, // int8, uint8, fp8 e4m3, fp8 e5m2
        2 | 3 | 7 => 4,       // int32, uint32, float32
        4 | 5 | 8 => 8,       // int64, uint64, float64
        6 | 9 => 2,           // float16, bfloat16
        _ => 0,
    }
}

impl NcclOp {
    /// A group bracket, not a transfer.
    pub fn is_group(self) -> bool {
        matches!(self, NcclOp::GroupStart | NcclOp::GroupEnd)
    }
}

/// The variables of [`Env`] records: what launchers (torchrun, mpirun,
/// srun, Horovod) tell each process about its place in the job.
pub mod env {
    /// Recorded when set: the rank ones, then the job's size and the
    /// process's GPUs.
    pub const NAMES: &[&str] = &[
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_NTASKS",
        "SLURM_JOB_ID",
        "PMI_RANK",
        "PMI_SIZE",
        "CUDA_VISIBLE_DEVICES",
    ];

    /// The variables that give a process's rank, most specific first:
    /// under `srun torchrun`, `SLURM_PROCID` numbers the node's launcher
    /// and `RANK` the process.
    pub const RANK: [&str; 4] = ["RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"];

    /// The rank `vars` give, and the variable it came from.
    pub fn rank<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)> + Clone) -> Option<(u32, &'static str)> {
        RANK.iter().find_map(|&name| {
            let (_, v) = vars.clone().into_iter().find(|(n, _)| *n == name)?;
            Some((v.trim().parse().ok()?, name))
        })
    }

    /// `NAME=value` entries of an environment block (NUL-separated, as
    /// /proc/PID/environ holds it) whose name is in [`NAMES`].
    pub fn launcher_vars(block: &[u8]) -> Vec<(&'static str, &[u8])> {
        let mut out = Vec::new();
        for entry in block.split(|&b| b == 0) {
            let Some(eq) = entry.iter().position(|&b| b == b'=') else { continue };
            let (name, value) = (&entry[..eq], &entry[eq + 1..]);
            if let Some(&n) = NAMES.iter().find(|n| n.as_bytes() == name) {
                if !out.iter().any(|(m, _)| *m == n) {
                    out.push((n, value));
                }
            }
        }
        out
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_process_rank_wins_over_the_launchers() {
            let v = [("SLURM_PROCID", "1"), ("RANK", "9")];
            assert_eq!(rank(v.iter().copied()), Some((9, "RANK")));
            assert_eq!(rank([("PMI_RANK", " 3 ")].iter().copied()), Some((3, "PMI_RANK")));
            assert_eq!(rank([("RANK", "x"), ("PMI_RANK", "2")].iter().copied()), Some((2, "PMI_RANK")));
            assert_eq!(rank([("LOCAL_RANK", "1")].iter().copied()), None);
        }

        #[test]
        fn environ_blocks_are_filtered() {
            let b = b"PATH=/bin\0RANK=3\0WORLD_SIZE=8\0RANK=4\0junk\0MY_RANK=1\0";
            assert_eq!(launcher_vars(b), vec![("RANK", &b"3"[..]), ("WORLD_SIZE", &b"8"[..])]);
        }
    }
}

/// Bits of [`MajorFault::flags`].
pub mod fault {
    /// The kernel said which file page it read in (filemap:mm_filemap_fault
    /// on the faulting thread): `dev`, `ino`, `offset` and the stall's
    /// start (`ts`, with `dur` to its end) are known.
    pub const FILE: u8 = 1;
}

records! {
    /// A new process (`thread == false`) or thread, created by `parent_tid`.
    1 Fork "fork" table "processes" {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        2 ts: u64 = ts,
        3 parent_tid: u32 = tid_of(tid),
        4 parent_pid: u32 = pid_of(parent_tid),
        5 thread: bool = plain,
    }

    /// A successful execve/execveat: `filename` is the executed path, `argv` the
    /// NUL-separated argument list.
    2 Exec "exec" table "processes" {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        2 ts: u64 = ts,
        3 filename: StrId = str,
        4 argv: StrId = str,
        5 trunc: u8 = plain,
    }

    /// A thread's name (comm) as of `ts`: set at exec and by prctl(PR_SET_NAME).
    3 Comm "comm" table "processes" {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        2 ts: u64 = ts,
        3 comm: StrId = str,
    }

    /// A thread ended; `process_exit` when it was the last one of its process.
    /// `status` is in wait(2) form (exit code << 8, or the signal number).
    4 Exit "exit" table "processes" {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        2 ts: u64 = ts,
        3 status: i32 = plain,
        4 process_exit: bool = plain,
    }

    /// open/openat/openat2/creat.
    5 Open "open" table "syscalls" [call] {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 op: OpenOp = plain,
        /// The dirfd argument (`AT_FDCWD` = -100 when relative to the cwd).
        5 dirfd: i32 = plain,
        /// The path exactly as passed.
        6 path: StrId = str,
        /// The absolute path: the kernel's own path of the opened file, or for a
        /// failed open the passed path resolved against dirfd / cwd.
        7 abs_path: StrId = str,
        8 flags: u32 = plain,
        9 mode: u32 = plain,
        /// The new fd, or -errno, or [`RET_UNKNOWN`].
        10 ret: i64 = plain,
        11 kind: FileKind = plain,
        /// [`trunc`] bits.
        12 trunc: u8 = plain,
        /// Block requests this call started (directory and inode reads).
        13 block_reqs: u32 = plain,
        /// The Python stack the call was made from ([`PyFrame::stack`] of
        /// the same `pid`), 0 when none.
        14 stack: u32 = seq(4, stack as u64),
    }

    /// A read or write family syscall on one fd.
    6 Io "io" table "syscalls" [call] {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 op: IoOp = plain,
        5 fd: i32 = fd,
        6 path: StrId = path,
        7 kind: FileKind = plain,
        8 offset: u64 = seq(0, offset.wrapping_add(ret.max(0) as u64)),
        9 offset_src: OffsetSrc = plain,
        /// Bytes asked for (sum of iovecs for the vector calls).
        10 requested: u64 = plain,
        /// Bytes moved, or -errno, or [`RET_UNKNOWN`].
        11 ret: i64 = less(requested),
        /// Block requests this call started (each [`Block`] names its cause).
        12 block_reqs: u32 = plain,
        /// `record --detail summary`: the call is also counted in an
        /// [`IoSummary`] (it is here because it was slow or failed).
        13 summed: bool = plain,
        /// The Python stack the call was made from ([`PyFrame::stack`] of
        /// the same `pid`), 0 when none.
        14 stack: u32 = seq(4, stack as u64),
    }

    /// close(2).
    7 Close "close" table "syscalls" [call] {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 fd: i32 = fd,
        5 path: StrId = path,
        6 kind: FileKind = plain,
        /// 0, or -errno, or [`RET_UNKNOWN`].
        7 ret: i64 = plain,
        /// Also counted in an [`IoSummary`] (see [`Io::summed`]).
        8 summed: bool = plain,
        /// The Python stack the call was made from ([`PyFrame::stack`] of
        /// the same `pid`), 0 when none.
        9 stack: u32 = seq(4, stack as u64),
    }

    /// sendfile / copy_file_range: bytes read from `in_fd` and written to `out_fd`.
    8 Transfer "transfer" table "syscalls" [call] {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 op: TransferOp = plain,
        5 in_fd: i32 = fd,
        6 in_path: StrId = path,
        7 out_fd: i32 = plain,
        8 out_path: StrId = str,
        9 requested: u64 = plain,
        /// Bytes moved, or -errno, or [`RET_UNKNOWN`].
        10 ret: i64 = less(requested),
        11 block_reqs: u32 = plain,
        /// The Python stack the call was made from ([`PyFrame::stack`] of
        /// the same `pid`), 0 when none.
        12 stack: u32 = seq(4, stack as u64),
    }

    /// `count` events of some kind were lost in the interval ending at `ts`.
    9 Lost "lost" table "lost" {
        0 ts: u64 = ts,
        1 kind: LostKind = plain,
        2 count: u64 = plain,
    }

    /// One block request (or a partial completion of one), on any disk.
    ///
    /// `ts` is when it started, in the context of `pid`/`tid` (a traced
    /// process when [`blk::TRACED`] is set, otherwise whoever it was: `comm`
    /// names it, e.g. a kworker). It waited `queue` ns before the device got
    /// it and the device took `device` ns. When it was started by a recorded
    /// syscall, `cause_ts` is that syscall's `ts` (same `tid`) and `cause_idx`
    /// which of its requests this is (0-based, below the syscall's
    /// `block_reqs`); `cause_ts` is 0 otherwise.
    10 Block "block" table "block"
    // A request no traced process issued is the machine's.
    owner(r => (r.flags & blk::TRACED != 0).then_some(r.pid)) {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        2 ts: u64 = ts,
        3 queue: u64 = dur,
        4 device: u64 = dur,
        5 comm: StrId = str,
        /// The disk: major << 20 | minor.
        6 dev: u32 = plain,
        7 disk: StrId = str,
        8 sector: u64 = seq(1, sector.wrapping_add(bytes >> 9)),
        9 bytes: u64 = plain,
        10 op: BlockOp = plain,
        /// [`blk`] bits.
        11 flags: u16 = plain,
        /// The kernel's blk_status_t (0 = success).
        12 error: i32 = plain,
        13 cause_ts: u64 = since(ts),
        14 cause_idx: u32 = plain,
    }

    /// One sample of a counter. A counter is the triple (`group`, `name`,
    /// `pid`): `group` says where it belongs (`CPU`, `CPU 3`, `Memory`,
    /// `Disk vda`, `GPU 0 (NVIDIA H100)`), `name` what it measures (`iowait`,
    /// `SM`), `pid` the process it is about (0 for machine-wide counters).
    11 Counter "counter" table "counters"
    // pid 0 of any host: the machine's counters.
    owner(r => (crate::hosts::local_pid(r.pid) != 0).then_some(r.pid)) {
        0 ts: u64 = ts,
        1 group: StrId = str,
        2 name: StrId = str,
        3 unit: CounterUnit = plain,
        4 pid: u32 = pid,
        5 value: f64 = f64,
    }

    /// A training phase (`INIT`, `EPOCH 3`...), from MLPerf logging's
    /// `*_start`/`*_stop` pairs. `rank` is the rank that logged it, or -1 when
    /// the ranks agreed or were not given.
    12 Phase "phase" table "phases"
    // The run's: a phase is every rank's, whichever logged it.
    owner(r => None) {
        1 dur: u64 = dur,
        0 ts: u64 = ts_end(dur),
        2 kind: PhaseKind = plain,
        3 name: StrId = str,
        4 rank: i32 = plain,
        5 pid: u32 = pid,
        6 flags: u8 = plain,
    }

    /// A point event with a value (MLLOG keys such as `eval_accuracy`):
    /// `value` is the JSON text of the value.
    13 Mark "mark" table "marks"
    // pid 0 of any host: the run's marks.
    owner(r => (crate::hosts::local_pid(r.pid) != 0).then_some(r.pid)) {
        0 ts: u64 = ts,
        1 name: StrId = str,
        2 value: StrId = str,
        3 rank: i32 = plain,
        4 pid: u32 = pid,
    }

    /// One thread's I/O counters as the kernel keeps them (`task_struct->ioac`,
    /// what `/proc/PID/task/TID/io` shows): the thread's own, since it was
    /// created, never its reaped children's. A process's count is the sum over
    /// its threads of (count at exit or end - count at its last exec, or 0).
    14 IoAccounting "io_accounting" table "io_accounting"
    // A thread's kernel counts go with every view of the log.
    owner(r => None) {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        2 ts: u64 = ts,
        3 at: AcctPoint = plain,
        /// [`acct`] bits; counters the kernel does not keep are 0.
        4 have: u8 = plain,
        /// Bytes read and written by read/write-family calls (and sendfile,
        /// copy_file_range, the kernel's own reads at exec).
        5 rchar: u64 = plain,
        6 wchar: u64 = plain,
        /// Read and write calls the kernel counted.
        7 syscr: u64 = plain,
        8 syscw: u64 = plain,
        /// Bytes this thread caused to be read from storage (block reads it submitted).
        9 read_bytes: u64 = plain,
        /// Bytes of page cache this thread dirtied (to be written to storage).
        10 write_bytes: u64 = plain,
        /// Dirty bytes this thread dropped before they were written (truncate, unlink).
        11 cancelled_write_bytes: u64 = plain,
    }

    /// Pages a traced thread brought into the page cache
    /// (filemap:mm_filemap_add_to_page_cache, which fires in the task that
    /// caused the insertion): outside writes, bytes read from storage for it,
    /// whether by a read, a fault on a mapping or readahead. Inside a call,
    /// a run of consecutive insertions into one file is one record (`ts`
    /// its first); outside calls, one insertion (a folio).
    15 PageCache "page_cache" table "page_cache" {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        2 ts: u64 = ts,
        /// The file's filesystem (its superblock's dev: major << 20 | minor) and inode.
        3 dev: u32 = plain,
        4 ino: u64 = plain,
        /// The file's path when known (opened or mapped while recording, or
        /// found in /proc/PID/maps or fds), else empty.
        5 path: StrId = path,
        /// Byte offset in the file of the first page, and how many bytes.
        6 offset: u64 = seq(2, offset.wrapping_add(bytes)),
        7 bytes: u64 = plain,
        8 during: CacheDuring = plain,
    }

    /// mmap, munmap or mremap (see [`MapOp`]). File mmaps are recorded with
    /// their file; anonymous ones are only counted ([`MapOp::Anonymous`]),
    /// except those with `MAP_FIXED`, which replace what was mapped there.
    /// munmap and mremap say only addresses: which file they touched is for a
    /// reader's mapping table to say.
    16 Mapping "mapping" table "mappings" {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 op: MapOp = plain,
        /// mmap: the fd argument (-1 for anonymous memory); otherwise -1.
        5 fd: i32 = fd,
        /// mmap: the mapped file's path (empty for none), kind, filesystem
        /// (its superblock's dev: major << 20 | minor) and inode.
        6 path: StrId = path,
        7 kind: FileKind = plain,
        8 dev: u32 = plain,
        9 ino: u64 = plain,
        /// [`mapf`] bits.
        10 file_flags: u8 = plain,
        /// mmap: the offset in the file.
        11 offset: u64 = plain,
        /// mmap: the address asked for (0: any); munmap: the address;
        /// mremap: the old address.
        12 addr: u64 = plain,
        /// mmap, munmap: the length; mremap: the old length.
        13 len: u64 = plain,
        /// mremap: the new length.
        14 new_len: u64 = plain,
        /// mmap: PROT_* bits.
        15 prot: u32 = plain,
        /// mmap: MAP_* flags; mremap: MREMAP_* flags.
        16 flags: u32 = plain,
        /// mmap, mremap: the mapped address, or -errno; munmap: 0 or -errno.
        17 ret: i64 = guess(ret_guess(op, addr)),
    }

    /// A major page fault of a traced thread: it stalled while the page was
    /// read from storage (or swap). Without [`fault::FILE`], `ts` is when the
    /// fault ended and `dur` is 0; `addr` is for a reader's mapping table.
    17 MajorFault "major_fault" table "faults" {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        /// The faulting address.
        4 addr: u64 = seq(3, addr),
        /// [`fault`] bits.
        5 flags: u8 = plain,
        6 dev: u32 = plain,
        7 ino: u64 = plain,
        /// The file's path when known, else empty.
        8 path: StrId = path,
        /// Byte offset in the file of the page faulted in.
        9 offset: u64 = plain,
    }

    /// One io_uring read or write request, from its submission (in the
    /// submitting thread: `pid`/`tid`, `ts`) to its completion `dur` later.
    /// The kernel does these without read/write syscalls, and does not count
    /// them in the process's syscr/rchar (see [`IoAccounting`]).
    18 IoUring "io_uring" table "syscalls" [call] {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 op: UringOp = plain,
        /// The sqe's fd (an index with [`uring::FIXED_FILE`]); -1 if unknown.
        5 fd: i32 = fd,
        6 path: StrId = path,
        7 kind: FileKind = plain,
        8 offset: u64 = seq(0, offset.wrapping_add(ret.max(0) as u64)),
        9 offset_src: OffsetSrc = plain,
        /// Bytes asked for (sum of iovecs for readv/writev).
        10 requested: u64 = plain,
        /// The completion's result: bytes moved, or -errno.
        11 ret: i64 = less(requested),
        /// The sqe's user_data, as the program tagged the request.
        12 user_data: u64 = plain,
        /// The thread the completion ran in (an io-wq worker, the submitter's
        /// task work...).
        13 complete_tid: u32 = tid_of(tid),
        /// [`uring`] bits.
        14 flags: u8 = plain,
    }

    /// io_submit, io_getevents or io_pgetevents. For io_submit `nr` is the
    /// iocbs passed, `read_bytes`/`write_bytes` the aio_nbytes of its pread
    /// and pwrite iocbs, and `fd`/`path`, `cmd`, `offset` are the first
    /// iocb's; for the getevents calls `nr` and `min_nr` bound the events
    /// wanted, `read_bytes`/`write_bytes` sum the res of the returned events
    /// of reads and of writes, `errors` counts those that failed, and
    /// `fd`/`path`/`cmd` are the first event's iocb's, when the program still
    /// had it. `ret` is the call's: iocbs submitted or events returned, or
    /// -errno. At most 16 iocbs or events are read ([`aio::PARTIAL`]).
    19 Aio "aio" table "syscalls" [call] {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 op: AioOp = plain,
        /// The aio_context_t.
        5 ctx: u64 = plain,
        /// -1 when no iocb was read.
        6 fd: i32 = fd,
        7 path: StrId = path,
        8 kind: FileKind = plain,
        9 cmd: AioCmd = plain,
        10 offset: u64 = plain,
        11 nr: i64 = plain,
        12 min_nr: i64 = plain,
        13 ret: i64 = plain,
        14 read_bytes: u64 = plain,
        15 write_bytes: u64 = plain,
        /// iocbs or events summed into the bytes.
        16 counted: u16 = plain,
        17 errors: u16 = plain,
        /// [`aio`] bits.
        18 flags: u8 = plain,
        /// Block requests the call started (io_submit of O_DIRECT iocbs).
        19 block_reqs: u32 = plain,
    }

    /// A context switch on `cpu` in which at least one side is a traced thread
    /// (`traced` says which). The untraced side is named as the kernel saw it:
    /// another task that ran on the same CPU (or the idle task, pid 0).
    20 SchedSwitch "sched_switch" table "sched"
    // Its traced side's (the outgoing one when both are); a switch
    // between untraced tasks is no process's.
    owner(r => if r.traced & sched::PREV != 0 {
        Some(r.prev_pid)
    } else if r.traced & sched::NEXT != 0 {
        Some(r.next_pid)
    } else {
        None
    }) {
        0 prev_tid: u32 = thread,
        1 prev_pid: u32 = pid_of(prev_tid),
        2 ts: u64 = ts,
        3 cpu: u32 = plain,
        4 prev_comm: StrId = str,
        /// The kernel's priority (120 = nice 0).
        5 prev_prio: i32 = bias(120),
        6 prev_state: SchedState = plain,
        7 next_tid: u32 = tid,
        8 next_pid: u32 = pid_of(next_tid),
        9 next_comm: StrId = str,
        10 next_prio: i32 = bias(120),
        /// [`sched`] bits.
        11 traced: u8 = plain,
        /// The system call prev went to sleep in; [`SleepCall::None`] when
        /// it is not asleep, or asleep outside a call (a page fault), or
        /// the call is not known.
        12 prev_call: SleepCall = plain,
        /// µs a traced prev had been on a CPU since it got one, by the
        /// kernel's account of its run time (which leaves out time a
        /// hypervisor stole); 0 when not known (older logs, prev
        /// untraced) or under 1 µs. The kernel's trace sometimes lacks a
        /// switch-in: this places it.
        13 prev_ran_us: u32 = plain,
    }

    /// A traced thread woken (made runnable) by the task running on `cpu`
    /// (`waker_pid`/`waker_tid`) or by an interrupt there (`by`; the waker
    /// fields are then 0), to run on `target_cpu`; or moved from `cpu`
    /// to `target_cpu` ([`WakeOp::Migrate`], the waker fields are the task that
    /// moved it).
    21 SchedWake "sched_wake" table "wakeups" {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        2 ts: u64 = ts,
        3 op: WakeOp = plain,
        4 cpu: u32 = plain,
        5 target_cpu: u32 = rel(cpu),
        6 comm: StrId = str,
        7 prio: i32 = bias(120),
        8 waker_tid: u32 = tid,
        9 waker_pid: u32 = pid_of(waker_tid),
        /// [`sched`] bits (WAKER when the waker is traced too).
        10 traced: u8 = plain,
        /// What raised it (a task, or an interrupt: then no waker).
        11 by: WakeBy = plain,
    }

    /// A call that sends or receives on a socket (see [`NetOp`]): `bytes`
    /// moved (for the mmsg calls, summed over up to 8 messages; `ret` is
    /// then the messages), and the peer as text: `127.0.0.1:8080`,
    /// `[::1]:8080`, a unix socket's path, or empty when unknown. Plain
    /// read and write on a socket are [`Io`] records of kind socket.
    22 NetCall "net_call" table "net_calls" [call] {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 op: NetOp = plain,
        5 fd: i32 = fd,
        /// The socket, as its file is named (`socket:[1234]`).
        6 path: StrId = path,
        7 peer: StrId = str,
        /// Bytes asked for (the iovecs' sum for the msg calls).
        8 requested: u64 = plain,
        /// Bytes moved, or messages for the mmsg calls, or -errno.
        9 ret: i64 = plain,
        10 bytes: u64 = plain,
        /// [`net`] bits.
        11 flags: u8 = plain,
        /// The Python stack the call was made from ([`PyFrame::stack`] of
        /// the same `pid`), 0 when none.
        12 stack: u32 = seq(4, stack as u64),
    }

    /// A CUDA driver call that waited for the GPU (see [`GpuApi`]), seen by
    /// a uprobe on `libcuda.so.1`: from entry to return, spinning or
    /// asleep. `stream` is the stream waited on (0: the default stream,
    /// or the call has none), for `cuEventSynchronize` the event; `bytes`
    /// a copy's size; `ret` the CUresult (0 = success).
    24 GpuCall "gpu_call" table "gpu_calls" [call] {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 call: GpuApi = plain,
        5 stream: u64 = plain,
        6 bytes: u64 = plain,
        7 ret: i32 = plain,
        /// The Python stack the call was made from ([`PyFrame::stack`] of
        /// the same `pid`), 0 when none.
        8 stack: u32 = seq(4, stack as u64),
    }

    /// An NCCL call, seen by a uprobe on `libnccl.so.2`. It enqueues the
    /// collective on `stream` and returns: the wait for it shows in the
    /// [`GpuCall`]s that synchronise. `count` elements of NCCL datatype
    /// `datatype` make `bytes` (per rank: what this rank contributes, or
    /// for AllGather what it sends). `comm` is the communicator, and
    /// `rank` of `nranks` this process's place in it when its creation
    /// was seen (else -1 and 0); `peer` is ncclSend/ncclRecv's peer, or
    /// the root of a Broadcast or Reduce (-1 otherwise); `ret` the
    /// ncclResult_t (0 = success).
    25 Collective "collective" table "collectives" [call] {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 op: NcclOp = plain,
        5 count: u64 = plain,
        6 datatype: u8 = plain,
        7 bytes: u64 = plain,
        8 comm: u64 = plain,
        9 rank: i32 = plain,
        10 nranks: i32 = plain,
        11 peer: i32 = plain,
        12 stream: u64 = plain,
        13 ret: i32 = plain,
        /// The Python stack the call was made from ([`PyFrame::stack`] of
        /// the same `pid`), 0 when none.
        14 stack: u32 = seq(4, stack as u64),
    }

    /// A metadata call (see [`MetaOp`]). `path` is the path as passed
    /// (rename: the old one), `abs_path` it made absolute: lexically
    /// joined to the directory of `dirfd` (or the working directory) when
    /// relative, symlinks not followed; for getdents64, `path` is empty
    /// and `abs_path` the directory listed (the fd's). `new_path` and
    /// `new_abs_path` are a rename's new name, else empty.
    32 MetaCall "meta_call" table "metadata_calls" [call] {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 op: MetaOp = plain,
        /// The dirfd argument (`AT_FDCWD` = -100 for the working
        /// directory, and for the calls without one); getdents64: its fd.
        5 dirfd: i32 = plain,
        6 path: StrId = str,
        7 abs_path: StrId = path,
        /// rename*: the new name's dirfd; else -100.
        8 new_dirfd: i32 = plain,
        9 new_path: StrId = str,
        10 new_abs_path: StrId = str,
        /// The call's flags or mode argument: newfstatat's, statx's,
        /// unlinkat's and renameat2's flags; access's mode (`R_OK`...),
        /// with faccessat2's `AT_*` flags (other bits); mkdir's mode.
        11 flags: u32 = plain,
        /// 0 or -errno; readlink*: the length read; getdents64: the bytes
        /// of entries returned (0 at the end of the directory).
        12 ret: i64 = plain,
        /// [`trunc`] bits (of either path).
        13 trunc: u8 = plain,
        /// Block requests this call started (directory and inode reads).
        14 block_reqs: u32 = plain,
        /// The Python stack the call was made from ([`PyFrame::stack`] of
        /// the same `pid`), 0 when none.
        15 stack: u32 = seq(4, stack as u64),
    }

    /// `count` calls of `call` by process `pid`'s threads in the `dur` ns
    /// ending at `ts + dur`, counted in the kernel and handed over about
    /// once a second (a period with none after one with some says 0).
    28 GpuCount "gpu_count" table "gpu_counts" {
        0 pid: u32 = pid,
        2 dur: u64 = dur,
        1 ts: u64 = ts_end(dur),
        3 call: GpuCounted = plain,
        4 count: u64 = plain,
    }

    /// One launcher variable in a process's environment as of its exec
    /// (see [`env::NAMES`]): which rank of a job it is (`RANK`,
    /// `SLURM_PROCID`...) and of how many. The recorder reads
    /// /proc/PID/environ when it sees the exec (or, for a process running
    /// before the recording, at the start: `ts` then is that time).
    29 Env "env" table "env" {
        0 pid: u32 = pid,
        1 ts: u64 = ts,
        2 name: StrId = str,
        3 value: StrId = str,
    }

    /// `record --detail summary`: `calls` calls of `op` by thread `tid` on
    /// one file (`path`; none for close, summed per thread) that ended in
    /// the second `ts`..`ts + dur` (cut at an exec inside it), summed in
    /// the kernel: the bytes the successful ones moved, how many failed,
    /// their latencies summed (`time`, ns) and as a log2 histogram: `h0`
    /// under 1,024 ns, `hN` from 2^(N+9) to 2^(N+10) ns (`h10` about
    /// 0.5-1 ms), `h20` 2^29 ns (0.54 s) and over. The calls that failed
    /// or were slow are also recorded one by one, marked `summed`.
    /// With Python stacks, per stack too.
    30 IoSummary "io_summary" table "io_summaries" {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        3 dur: u64 = dur,
        2 ts: u64 = ts_end(dur),
        4 op: SumOp = plain,
        5 path: StrId = str,
        6 kind: FileKind = plain,
        7 calls: u64 = plain,
        8 bytes: u64 = plain,
        9 failed: u64 = plain,
        10 time: u64 = plain,
        11 h0: u32 = plain,
        12 h1: u32 = plain,
        13 h2: u32 = plain,
        14 h3: u32 = plain,
        15 h4: u32 = plain,
        16 h5: u32 = plain,
        17 h6: u32 = plain,
        18 h7: u32 = plain,
        19 h8: u32 = plain,
        20 h9: u32 = plain,
        21 h10: u32 = plain,
        22 h11: u32 = plain,
        23 h12: u32 = plain,
        24 h13: u32 = plain,
        25 h14: u32 = plain,
        26 h15: u32 = plain,
        27 h16: u32 = plain,
        28 h17: u32 = plain,
        29 h18: u32 = plain,
        30 h19: u32 = plain,
        31 h20: u32 = plain,
        /// `record --py-stacks on`: the Python stack the calls were made
        /// from ([`PyFrame::stack`] of the same `pid`; 0 when none): calls
        /// from two lines are two sums.
        32 stack: u32 = plain,
    }

    /// Something a GPU reported at one instant (clock throttling, an XID
    /// error, ECC errors): `group` is the GPU's counter group
    /// (`GPU 0 (NVIDIA H100)`), so it shows on that GPU's track. `pid` is 0,
    /// as for machine-wide counters (a merged log's host number rides in it).
    27 GpuEvent "gpu_event" table "gpu_events"
    // The run's: a GPU's event, whichever process it names.
    owner(r => None) {
        0 ts: u64 = ts,
        1 group: StrId = str,
        2 kind: GpuEventKind = plain,
        3 code: u64 = plain,
        4 pid: u32 = pid,
    }

    /// A traced thread's scheduling, summed (`record --detail summary`
    /// records these instead of its [`SchedSwitch`]es and [`SchedWake`]s):
    /// from `from` to `sleep_from` it was on a CPU `cpu` ns, waiting for
    /// one `runnable` ns and stopped or otherwise `other` ns; then, when
    /// `slept` is [`SchedState::Sleeping`] or
    /// [`SchedState::Uninterruptible`], asleep in `call` until `ts`, when
    /// `waker_tid` of `waker_pid` woke it, or an interrupt did (`by`; see
    /// [`span`] for a sleep whose end was not seen). A thread that does not
    /// sleep has one about every second, and one at its exit: `slept` is
    /// then [`SchedState::Runnable`] (no sleep) and `sleep_from` is `ts`.
    /// Short sleeps it asked for (nanosleep under 10 ms) that its own
    /// timer ended are summed in `timed` (asleep, waiting for nothing)
    /// between `from` and `sleep_from`, not spans of their own.
    31 SchedSpan "sched_span" table "sched_spans" {
        0 tid: u32 = thread,
        1 pid: u32 = pid_of(tid),
        2 ts: u64 = ts,
        3 from: u64 = since(ts),
        4 sleep_from: u64 = since(ts),
        5 cpu: u64 = plain,
        6 runnable: u64 = plain,
        7 other: u64 = plain,
        8 slept: SchedState = plain,
        9 call: SleepCall = plain,
        10 waker_tid: u32 = tid,
        11 waker_pid: u32 = pid_of(waker_tid),
        12 by: WakeBy = plain,
        /// [`span`] bits.
        13 flags: u8 = plain,
        14 timed: u64 = plain,
    }

    /// One frame of a Python stack that calls were made from: frame
    /// `depth` (0 the innermost) of stack `stack` of process `pid`, first
    /// seen at `ts`. `function` is the code's qualified name (its name
    /// before 3.11), `line` the line executing (0 when unknown). A
    /// stack's frames are written together, before or after the calls
    /// that name it.
    33 PyFrame "py_frame" table "py_stacks" {
        0 pid: u32 = pid,
        1 ts: u64 = ts,
        2 stack: u32 = plain,
        3 depth: u32 = plain,
        4 function: StrId = str,
        5 file: StrId = str,
        6 line: u32 = plain,
        /// [`pyf`] bits.
        7 flags: u8 = plain,
    }

    /// What the recorder made of a Python process's interpreter, once per
    /// program it ran: `version` (`3.11.7`; `3.13t` for a free-threaded
    /// build), and whether its calls carry stacks; when not, `why`.
    34 PyInterp "py_interp" table "python" {
        0 pid: u32 = pid,
        1 ts: u64 = ts,
        2 version: StrId = str,
        3 stacks: bool = plain,
        4 why: StrId = str,
    }
}

/// Bits of [`PyFrame::flags`].
pub mod pyf {
    /// The stack was deeper than the recorder walks: this, its last frame,
    /// is not the outermost.
    pub const TRUNCATED: u8 = 1;
    /// The frame's code object never reached the recorder: its function
    /// and file are `?`.
    pub const UNKNOWN_CODE: u8 = 2;
    /// A name, a file name or the line table was longer than the kernel
    /// side reads: cut (the line may be unknown).
    pub const CUT: u8 = 4;
}

impl Record {
    /// The time the record's operation ended (`ts + dur` for syscalls;
    /// a damaged log's sum stops at the end of time).
    pub fn end_ts(&self) -> u64 {
        self.span_end()
    }

    /// Moves the record by `by` ns (saturating at 0 and at the end of time).
    pub fn shift_ts(&mut self, by: i64) {
        self.map_times(|t| t.saturating_add_signed(by));
    }
}

impl crate::declare::Encode for Record {
    #[inline]
    fn code(&self) -> u8 {
        Record::code(self)
    }
    #[inline]
    fn ts(&self) -> u64 {
        Record::ts(self)
    }
    #[inline]
    fn span_end(&self) -> u64 {
        self.end_ts()
    }
    #[inline]
    fn round_times(&mut self, q: u64) {
        Record::round_times(self, q)
    }
    #[inline]
    fn encode(&self, w: &mut crate::codec::W<'_>) {
        Record::encode(self, w)
    }
}

/// Slots of [`IoSummary`]'s latency histogram.
pub const SUM_BUCKETS: usize = 21;

impl IoSummary {
    /// The latency histogram (see the record).
    pub fn hist(&self) -> [u32; SUM_BUCKETS] {
        [
            self.h0, self.h1, self.h2, self.h3, self.h4, self.h5, self.h6, self.h7, self.h8, self.h9, self.h10,
            self.h11, self.h12, self.h13, self.h14, self.h15, self.h16, self.h17, self.h18, self.h19, self.h20,
        ]
    }

    /// Sets the histogram.
    pub fn set_hist(&mut self, h: &[u32; SUM_BUCKETS]) {
        [
            self.h0, self.h1, self.h2, self.h3, self.h4, self.h5, self.h6, self.h7, self.h8, self.h9, self.h10,
            self.h11, self.h12, self.h13, self.h14, self.h15, self.h16, self.h17, self.h18, self.h19, self.h20,
        ] = *h;
    }

    /// The lowest latency of slot `i` (ns); slot 0 starts at 0.
    pub fn slot_floor(i: usize) -> u64 {
        if i == 0 {
            0
        } else {
            1 << (i + 9)
        }
    }
}

/// What a [`Mapping`]'s `ret` is likely to be: the address asked for
/// (MAP_FIXED, an mremap in place), else 0 (munmap, a count).
fn ret_guess(op: MapOp, addr: u64) -> i64 {
    match op {
        MapOp::Mmap | MapOp::Mremap => addr as i64,
        _ => 0,
    }
}

#[cfg(test)]
mod end_tests {
    use super::*;

    /// A damaged log can hold any ts and dur (the fuzzer found one).
    #[test]
    fn end_of_a_damaged_record_saturates() {
        let r = Record::IoUring(IoUring { ts: u64::MAX - 5, dur: 10, ..Default::default() });
        assert_eq!(r.end_ts(), u64::MAX);
        let b = Block { ts: u64::MAX - 1, queue: 5, device: 5, ..Default::default() };
        assert_eq!(Record::Block(b).end_ts(), u64::MAX);
    }
}

#[cfg(test)]
mod owner_tests {
    use super::*;

    fn build(kind: &str, value: impl Fn(&str) -> u64) -> Record {
        let code =
            Record::TABLES.iter().map(|&(c, _)| c).find(|&c| Record::build(c, |_| 0).unwrap().kind_name() == kind);
        Record::build(code.unwrap_or_else(|| panic!("no kind {kind}")), value).unwrap()
    }

    /// A record is its thread's process's; the exceptions each say whose
    /// they are.
    #[test]
    fn each_kind_names_its_owner() {
        let ids = |n: &str| match n {
            "pid" | "tid" => 7,
            "prev_pid" | "prev_tid" => 5,
            "next_pid" | "next_tid" => 6,
            _ => 0,
        };
        for &(code, _) in Record::TABLES {
            let r = Record::build(code, ids).unwrap();
            let want = match r.kind_name() {
                // No traced side, not a traced process's request, the run's.
                "sched_switch" | "block" | "lost" | "phase" | "gpu_event" | "io_accounting" => None,
                _ => Some(7),
            };
            assert_eq!(r.owner(), want, "{}", r.kind_name());
        }
        let with =
            |kind: &str, field: &'static str, v: u64| build(kind, move |n| if n == field { v } else { ids(n) }).owner();
        assert_eq!(with("sched_switch", "traced", u64::from(sched::PREV | sched::NEXT)), Some(5));
        assert_eq!(with("sched_switch", "traced", u64::from(sched::NEXT)), Some(6));
        assert_eq!(with("block", "flags", u64::from(blk::TRACED)), Some(7));
        for kind in ["counter", "mark"] {
            assert_eq!(with(kind, "pid", 0), None, "the machine's {kind}");
            assert_eq!(with(kind, "pid", 1 << 22), None, "host 1's machine {kind}");
            assert_eq!(with(kind, "pid", (1 << 22) + 7), Some((1 << 22) + 7));
        }
    }
}
