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

/// A new process (`thread == false`) or thread, created by `parent_tid`.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Fork {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub parent_pid: u32,
    pub parent_tid: u32,
    pub thread: bool,
}

/// A successful execve/execveat: `filename` is the executed path, `argv` the
/// NUL-separated argument list.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Exec {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub filename: StrId,
    pub argv: StrId,
    pub trunc: u8,
}

/// A thread's name (comm) as of `ts`: set at exec and by prctl(PR_SET_NAME).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Comm {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: StrId,
}

/// A thread ended; `process_exit` when it was the last one of its process.
/// `status` is in wait(2) form (exit code << 8, or the signal number).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Exit {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub status: i32,
    pub process_exit: bool,
}

/// open/openat/openat2/creat.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Open {
    pub ts: u64,
    pub dur: u64,
    pub pid: u32,
    pub tid: u32,
    pub op: OpenOp,
    /// The dirfd argument (`AT_FDCWD` = -100 when relative to the cwd).
    pub dirfd: i32,
    /// The path exactly as passed.
    pub path: StrId,
    /// The absolute path: the kernel's own path of the opened file, or for a
    /// failed open the passed path resolved against dirfd / cwd.
    pub abs_path: StrId,
    pub flags: u32,
    pub mode: u32,
    /// The new fd, or -errno, or [`RET_UNKNOWN`].
    pub ret: i64,
    pub kind: FileKind,
    /// [`trunc`] bits.
    pub trunc: u8,
    /// Block requests this call started (directory and inode reads).
    pub block_reqs: u32,
}

/// A read or write family syscall on one fd.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Io {
    pub ts: u64,
    pub dur: u64,
    pub pid: u32,
    pub tid: u32,
    pub op: IoOp,
    pub fd: i32,
    pub path: StrId,
    pub kind: FileKind,
    pub offset: u64,
    pub offset_src: OffsetSrc,
    /// Bytes asked for (sum of iovecs for the vector calls).
    pub requested: u64,
    /// Bytes moved, or -errno, or [`RET_UNKNOWN`].
    pub ret: i64,
    /// Block requests this call started (each [`Block`] names its cause).
    pub block_reqs: u32,
}

/// close(2).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Close {
    pub ts: u64,
    pub dur: u64,
    pub pid: u32,
    pub tid: u32,
    pub fd: i32,
    pub path: StrId,
    pub kind: FileKind,
    /// 0, or -errno, or [`RET_UNKNOWN`].
    pub ret: i64,
}

/// sendfile / copy_file_range: bytes read from `in_fd` and written to `out_fd`.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Transfer {
    pub ts: u64,
    pub dur: u64,
    pub pid: u32,
    pub tid: u32,
    pub op: TransferOp,
    pub in_fd: i32,
    pub in_path: StrId,
    pub out_fd: i32,
    pub out_path: StrId,
    pub requested: u64,
    /// Bytes moved, or -errno, or [`RET_UNKNOWN`].
    pub ret: i64,
    pub block_reqs: u32,
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
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Block {
    pub ts: u64,
    pub queue: u64,
    pub device: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: StrId,
    /// The disk: major << 20 | minor.
    pub dev: u32,
    pub disk: StrId,
    pub sector: u64,
    pub bytes: u64,
    pub op: BlockOp,
    /// [`blk`] bits.
    pub flags: u16,
    /// The kernel's blk_status_t (0 = success).
    pub error: i32,
    pub cause_ts: u64,
    pub cause_idx: u32,
}

impl Block {
    pub fn end_ts(&self) -> u64 {
        self.ts.saturating_add(self.queue).saturating_add(self.device)
    }
}

/// `count` events of some kind were lost in the interval ending at `ts`.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Lost {
    pub ts: u64,
    pub kind: LostKind,
    pub count: u64,
}

/// One sample of a counter. A counter is the triple (`group`, `name`,
/// `pid`): `group` says where it belongs (`CPU`, `CPU 3`, `Memory`,
/// `Disk vda`, `GPU 0 (NVIDIA H100)`), `name` what it measures (`iowait`,
/// `SM`), `pid` the process it is about (0 for machine-wide counters).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Counter {
    pub ts: u64,
    pub group: StrId,
    pub name: StrId,
    pub unit: CounterUnit,
    pub pid: u32,
    pub value: f64,
}

/// Bits of [`Phase::flags`].
pub mod phase {
    /// The phase had started but not ended when the log ended.
    pub const UNFINISHED: u8 = 1;
}

/// A training phase (`INIT`, `EPOCH 3`...), from MLPerf logging's
/// `*_start`/`*_stop` pairs. `rank` is the rank that logged it, or -1 when
/// the ranks agreed or were not given.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Phase {
    pub ts: u64,
    pub dur: u64,
    pub kind: PhaseKind,
    pub name: StrId,
    pub rank: i32,
    pub pid: u32,
    pub flags: u8,
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

/// Something a GPU reported at one instant (clock throttling, an XID
/// error, ECC errors): `group` is the GPU's counter group
/// (`GPU 0 (NVIDIA H100)`), so it shows on that GPU's track. `pid` is 0,
/// as for machine-wide counters (a merged log's host number rides in it).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct GpuEvent {
    pub ts: u64,
    pub group: StrId,
    pub kind: GpuEventKind,
    pub code: u64,
    pub pid: u32,
}

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

/// A point event with a value (MLLOG keys such as `eval_accuracy`):
/// `value` is the JSON text of the value.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Mark {
    pub ts: u64,
    pub name: StrId,
    pub value: StrId,
    pub rank: i32,
    pub pid: u32,
}

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

/// One thread's I/O counters as the kernel keeps them (`task_struct->ioac`,
/// what `/proc/PID/task/TID/io` shows): the thread's own, since it was
/// created, never its reaped children's. A process's count is the sum over
/// its threads of (count at exit or end - count at its last exec, or 0).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct IoAccounting {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub at: AcctPoint,
    /// [`acct`] bits; counters the kernel does not keep are 0.
    pub have: u8,
    /// Bytes read and written by read/write-family calls (and sendfile,
    /// copy_file_range, the kernel's own reads at exec).
    pub rchar: u64,
    pub wchar: u64,
    /// Read and write calls the kernel counted.
    pub syscr: u64,
    pub syscw: u64,
    /// Bytes this thread caused to be read from storage (block reads it submitted).
    pub read_bytes: u64,
    /// Bytes of page cache this thread dirtied (to be written to storage).
    pub write_bytes: u64,
    /// Dirty bytes this thread dropped before they were written (truncate, unlink).
    pub cancelled_write_bytes: u64,
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

/// Pages a traced thread brought into the page cache
/// (filemap:mm_filemap_add_to_page_cache, which fires in the task that
/// caused the insertion): outside writes, bytes read from storage for it,
/// whether by a read, a fault on a mapping or readahead.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct PageCache {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    /// The file's filesystem (its superblock's dev: major << 20 | minor) and inode.
    pub dev: u32,
    pub ino: u64,
    /// The file's path when known (opened or mapped while recording, or
    /// found in /proc/PID/maps or fds), else empty.
    pub path: StrId,
    /// Byte offset in the file of the first page, and how many bytes.
    pub offset: u64,
    pub bytes: u64,
    pub during: CacheDuring,
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
    pub fn is_write(self) -> bool {
        matches!(self, UringOp::Writev | UringOp::WriteFixed | UringOp::Write)
    }

    pub fn is_read(self) -> bool {
        matches!(self, UringOp::Readv | UringOp::ReadFixed | UringOp::Read)
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

/// One io_uring read or write request, from its submission (in the
/// submitting thread: `pid`/`tid`, `ts`) to its completion `dur` later.
/// The kernel does these without read/write syscalls, and does not count
/// them in the process's syscr/rchar (see [`IoAccounting`]).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct IoUring {
    pub ts: u64,
    pub dur: u64,
    pub pid: u32,
    pub tid: u32,
    pub op: UringOp,
    /// The sqe's fd (an index with [`uring::FIXED_FILE`]); -1 if unknown.
    pub fd: i32,
    pub path: StrId,
    pub kind: FileKind,
    pub offset: u64,
    pub offset_src: OffsetSrc,
    /// Bytes asked for (sum of iovecs for readv/writev).
    pub requested: u64,
    /// The completion's result: bytes moved, or -errno.
    pub ret: i64,
    /// The sqe's user_data, as the program tagged the request.
    pub user_data: u64,
    /// The thread the completion ran in (an io-wq worker, the submitter's
    /// task work...).
    pub complete_tid: u32,
    /// [`uring`] bits.
    pub flags: u8,
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

/// io_submit, io_getevents or io_pgetevents. For io_submit `nr` is the
/// iocbs passed, `read_bytes`/`write_bytes` the aio_nbytes of its pread
/// and pwrite iocbs, and `fd`/`path`, `cmd`, `offset` are the first
/// iocb's; for the getevents calls `nr` and `min_nr` bound the events
/// wanted, `read_bytes`/`write_bytes` sum the res of the returned events
/// of reads and of writes, `errors` counts those that failed, and
/// `fd`/`path`/`cmd` are the first event's iocb's, when the program still
/// had it. `ret` is the call's: iocbs submitted or events returned, or
/// -errno. At most 16 iocbs or events are read ([`aio::PARTIAL`]).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Aio {
    pub ts: u64,
    pub dur: u64,
    pub pid: u32,
    pub tid: u32,
    pub op: AioOp,
    /// The aio_context_t.
    pub ctx: u64,
    /// -1 when no iocb was read.
    pub fd: i32,
    pub path: StrId,
    pub kind: FileKind,
    pub cmd: AioCmd,
    pub offset: u64,
    pub nr: i64,
    pub min_nr: i64,
    pub ret: i64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// iocbs or events summed into the bytes.
    pub counted: u16,
    pub errors: u16,
    /// [`aio`] bits.
    pub flags: u8,
    /// Block requests the call started (io_submit of O_DIRECT iocbs).
    pub block_reqs: u32,
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

/// A context switch on `cpu` in which at least one side is a traced thread
/// (`traced` says which). The untraced side is named as the kernel saw it:
/// another task that ran on the same CPU (or the idle task, pid 0).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct SchedSwitch {
    pub ts: u64,
    pub cpu: u32,
    pub prev_pid: u32,
    pub prev_tid: u32,
    pub prev_comm: StrId,
    /// The kernel's priority (120 = nice 0).
    pub prev_prio: i32,
    pub prev_state: SchedState,
    pub next_pid: u32,
    pub next_tid: u32,
    pub next_comm: StrId,
    pub next_prio: i32,
    /// [`sched`] bits.
    pub traced: u8,
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

/// A traced thread woken (made runnable) by the task running on `cpu`
/// (`waker_pid`/`waker_tid`), to run on `target_cpu`; or moved from `cpu`
/// to `target_cpu` ([`WakeOp::Migrate`], the waker fields are the task that
/// moved it).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct SchedWake {
    pub ts: u64,
    pub op: WakeOp,
    pub cpu: u32,
    pub target_cpu: u32,
    pub pid: u32,
    pub tid: u32,
    pub comm: StrId,
    pub prio: i32,
    pub waker_pid: u32,
    pub waker_tid: u32,
    /// [`sched`] bits (WAKER when the waker is traced too).
    pub traced: u8,
}

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

/// mmap, munmap or mremap (see [`MapOp`]). File mmaps are recorded with
/// their file; anonymous ones are only counted ([`MapOp::Anonymous`]),
/// except those with `MAP_FIXED`, which replace what was mapped there.
/// munmap and mremap say only addresses: which file they touched is for a
/// reader's mapping table to say.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Mapping {
    pub ts: u64,
    pub dur: u64,
    pub pid: u32,
    pub tid: u32,
    pub op: MapOp,
    /// mmap: the fd argument (-1 for anonymous memory); otherwise -1.
    pub fd: i32,
    /// mmap: the mapped file's path (empty for none), kind, filesystem
    /// (its superblock's dev: major << 20 | minor) and inode.
    pub path: StrId,
    pub kind: FileKind,
    pub dev: u32,
    pub ino: u64,
    /// [`mapf`] bits.
    pub file_flags: u8,
    /// mmap: the offset in the file.
    pub offset: u64,
    /// mmap: the address asked for (0: any); munmap: the address;
    /// mremap: the old address.
    pub addr: u64,
    /// mmap, munmap: the length; mremap: the old length.
    pub len: u64,
    /// mremap: the new length.
    pub new_len: u64,
    /// mmap: PROT_* bits.
    pub prot: u32,
    /// mmap: MAP_* flags; mremap: MREMAP_* flags.
    pub flags: u32,
    /// mmap, mremap: the mapped address, or -errno; munmap: 0 or -errno.
    pub ret: i64,
}

impl Mapping {
    /// The address a successful mmap or mremap mapped at.
    pub fn mapped_at(&self) -> Option<u64> {
        (self.op != MapOp::Anonymous && self.op != MapOp::Munmap && self.ret >= 0).then_some(self.ret as u64)
    }
}

/// Bits of [`MajorFault::flags`].
pub mod fault {
    /// The kernel said which file page it read in (filemap:mm_filemap_fault
    /// on the faulting thread): `dev`, `ino`, `offset` and the stall's
    /// start (`ts`, with `dur` to its end) are known.
    pub const FILE: u8 = 1;
}

/// A major page fault of a traced thread: it stalled while the page was
/// read from storage (or swap). Without [`fault::FILE`], `ts` is when the
/// fault ended and `dur` is 0; `addr` is for a reader's mapping table.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct MajorFault {
    pub ts: u64,
    pub dur: u64,
    pub pid: u32,
    pub tid: u32,
    /// The faulting address.
    pub addr: u64,
    /// [`fault`] bits.
    pub flags: u8,
    pub dev: u32,
    pub ino: u64,
    /// The file's path when known, else empty.
    pub path: StrId,
    /// Byte offset in the file of the page faulted in.
    pub offset: u64,
}

/// One log record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Record {
    Fork(Fork),
    Exec(Exec),
    Comm(Comm),
    Exit(Exit),
    Open(Open),
    Io(Io),
    Close(Close),
    Transfer(Transfer),
    Lost(Lost),
    Block(Block),
    Counter(Counter),
    Phase(Phase),
    Mark(Mark),
    IoAccounting(IoAccounting),
    PageCache(PageCache),
    Mapping(Mapping),
    MajorFault(MajorFault),
    IoUring(IoUring),
    Aio(Aio),
    SchedSwitch(SchedSwitch),
    SchedWake(SchedWake),
    GpuEvent(GpuEvent),
}

impl Record {
    pub fn ts(&self) -> u64 {
        match self {
            Record::Fork(r) => r.ts,
            Record::Exec(r) => r.ts,
            Record::Comm(r) => r.ts,
            Record::Exit(r) => r.ts,
            Record::Open(r) => r.ts,
            Record::Io(r) => r.ts,
            Record::Close(r) => r.ts,
            Record::Transfer(r) => r.ts,
            Record::Lost(r) => r.ts,
            Record::Block(r) => r.ts,
            Record::Counter(r) => r.ts,
            Record::Phase(r) => r.ts,
            Record::Mark(r) => r.ts,
            Record::IoAccounting(r) => r.ts,
            Record::PageCache(r) => r.ts,
            Record::Mapping(r) => r.ts,
            Record::MajorFault(r) => r.ts,
            Record::IoUring(r) => r.ts,
            Record::Aio(r) => r.ts,
            Record::SchedSwitch(r) => r.ts,
            Record::SchedWake(r) => r.ts,
            Record::GpuEvent(r) => r.ts,
        }
    }

    /// The time the record's operation ended (`ts + dur` for syscalls;
    /// a damaged log's sum stops at the end of time).
    pub fn end_ts(&self) -> u64 {
        match self {
            Record::Open(r) => r.ts.saturating_add(r.dur),
            Record::Io(r) => r.ts.saturating_add(r.dur),
            Record::Close(r) => r.ts.saturating_add(r.dur),
            Record::Transfer(r) => r.ts.saturating_add(r.dur),
            Record::IoUring(r) => r.ts.saturating_add(r.dur),
            Record::Aio(r) => r.ts.saturating_add(r.dur),
            Record::Block(r) => r.end_ts(),
            Record::Phase(r) => r.ts.saturating_add(r.dur),
            Record::Mapping(r) => r.ts.saturating_add(r.dur),
            Record::MajorFault(r) => r.ts.saturating_add(r.dur),
            r => r.ts(),
        }
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
