//! Each kind of record as an event: its name (and name key) and its args.
//! The detail scene, the overview's slowest calls and every writer take
//! them from here, so a record reads the same everywhere.

use mltrace_log::labels::{self, Outcome};
use mltrace_log::show;
use mltrace_log::*;

use crate::args::{ArgKey as K, ArgSink, Args, OwnedArgs};

/// A flow id, never 0 (splitmix64 of the parts).
pub fn flow_id(parts: [u64; 4]) -> u64 {
    let mut h: u64 = 0x6d6c_7472_6163_6521;
    for p in parts {
        h ^= p;
        h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h = z ^ (z >> 31);
    }
    h | 1
}

/// From a syscall to the k-th block request it started.
pub fn flow_from_syscall(tid: u32, ts: u64, k: u32) -> u64 {
    flow_id([1, u64::from(tid), ts, u64::from(k)])
}

/// From a process's copy of a block request to the disk's.
pub fn flow_to_disk(b: &Block) -> u64 {
    flow_id([2, u64::from(b.dev) << 32 | u64::from(b.tid), b.sector, b.end_ts()])
}

/// A call kind's args as its slice shows them (its [`Shown`] variant).
pub trait Shows {
    type Args<'a>: Args
    where
        Self: 'a;
}

/// Every kind, from the log's declaration (its `[call]` class): makes
/// [`Call`] (and each call kind's [`Shown`], its args), [`NotCall`] and
/// [`split`].
macro_rules! kinds {
    ($($k:ident [$($class:ident)?]),+ $(,)?) => { kinds!(@sort [] [] $($k [$($class)?],)+); };
    (@sort [$($c:ident)*] [$($o:ident)*] $k:ident [call], $($rest:tt)*) => {
        kinds!(@sort [$($c)* $k] [$($o)*] $($rest)*);
    };
    (@sort [$($c:ident)*] [$($o:ident)*] $k:ident [], $($rest:tt)*) => {
        kinds!(@sort [$($c)*] [$($o)* $k] $($rest)*);
    };
    (@sort [$($c:ident)*] [$($o:ident)*]) => {
        /// A record that is a call drawn as one slice on its thread: the
        /// syscalls, io_uring requests (submission to completion), CUDA
        /// and NCCL calls (the kinds the log declares `[call]`). A match
        /// on [`Call`] or [`NotCall`] (the scene's) does not compile until
        /// it handles a new kind.
        #[derive(Clone, Copy, Debug)]
        pub enum Call<'a> {
            $($c(&'a $c),)*
        }

        /// Every other record (see [`Call`]).
        #[derive(Clone, Copy, Debug)]
        pub enum NotCall<'a> {
            $($o(&'a $o),)*
        }

        /// A record as a call, or as one of the others.
        pub fn split(r: &Record) -> Result<Call<'_>, NotCall<'_>> {
            Ok(match r {
                $(Record::$c(x) => Call::$c(x),)*
                $(Record::$o(x) => return Err(NotCall::$o(x)),)*
            })
        }

        /// A call as its slice shows it: its args, which hold what its
        /// name is made of. [`Call::shown`] is the one place a call kind
        /// says what its slice is called and what its args are; the detail
        /// scene and the overview's slowest calls both take them from here.
        pub enum Shown<'a> {
            $($c(<$c as Shows>::Args<'a>),)*
        }

        impl Args for Shown<'_> {
            #[inline]
            fn write<S: ArgSink>(&self, s: &mut S) {
                match self {
                    $(Shown::$c(a) => a.write(s),)*
                }
            }
        }
    };
}

mltrace_log::with_kinds!(kinds);

/// Each call kind's args (a new call kind does not compile without its line).
macro_rules! shows {
    ($($c:ident => $args:ident),+ $(,)?) => {
        $(impl Shows for $c {
            type Args<'a> = $args<'a>;
        })+
    };
}

shows! {
    Io => IoArgs,
    Open => OpenArgs,
    Close => CloseArgs,
    Transfer => TransferArgs,
    IoUring => UringArgs,
    Aio => AioArgs,
    NetCall => NetArgs,
    MetaCall => MetaArgs,
    GpuCall => GpuArgs,
    Collective => NcclArgs,
}

/// Whether a record is a call (see [`Call`]).
pub fn is_call(r: &Record) -> bool {
    split(r).is_ok()
}

/// Which of a process's slice tracks a call or request is drawn on (the
/// detail scene's lanes, the overview's slowest calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lanes {
    Reads = 0,
    Writes = 1,
    Opens = 2,
    Block = 3,
}

pub const LANE_NAMES: [&str; 4] = ["reads", "writes", "opens", "block I/O"];

/// What each call kind means to the views that count calls, side by side
/// (one exhaustive match per property: a new kind does not compile until
/// it answers each, and no view keeps its own list of kinds).
impl Call<'_> {
    /// The Python stack it was made from ([`mltrace_log::PyFrame::stack`]),
    /// 0 when none; `None` for the kinds that carry none (io_uring and
    /// libaio requests, completed away from where they were made).
    #[inline]
    pub fn stack(&self) -> Option<u32> {
        match *self {
            Call::Io(r) => Some(r.stack),
            Call::Open(r) => Some(r.stack),
            Call::Close(r) => Some(r.stack),
            Call::Transfer(r) => Some(r.stack),
            Call::NetCall(r) => Some(r.stack),
            Call::MetaCall(r) => Some(r.stack),
            Call::GpuCall(r) => Some(r.stack),
            Call::Collective(r) => Some(r.stack),
            Call::IoUring(_) | Call::Aio(_) => None,
        }
    }

    /// Its thread, start, duration and result (bytes, a count, -errno).
    #[inline]
    pub fn timing(&self) -> (u32, u64, u64, i64) {
        match *self {
            Call::Io(r) => (r.tid, r.ts, r.dur, r.ret),
            Call::Open(r) => (r.tid, r.ts, r.dur, r.ret),
            Call::Close(r) => (r.tid, r.ts, r.dur, r.ret),
            Call::Transfer(r) => (r.tid, r.ts, r.dur, r.ret),
            Call::IoUring(r) => (r.tid, r.ts, r.dur, r.ret),
            Call::Aio(r) => (r.tid, r.ts, r.dur, r.ret),
            Call::NetCall(r) => (r.tid, r.ts, r.dur, r.ret),
            Call::MetaCall(r) => (r.tid, r.ts, r.dur, r.ret),
            Call::GpuCall(r) => (r.tid, r.ts, r.dur, i64::from(r.ret)),
            Call::Collective(r) => (r.tid, r.ts, r.dur, i64::from(r.ret)),
        }
    }

    /// Block requests it started (their flows begin at its slice); `None`
    /// for a kind that starts none of its own.
    #[inline]
    pub fn block_reqs(&self) -> Option<u32> {
        match *self {
            Call::Io(r) => Some(r.block_reqs),
            Call::Open(r) => Some(r.block_reqs),
            Call::Transfer(r) => Some(r.block_reqs),
            Call::Aio(r) => Some(r.block_reqs),
            Call::MetaCall(r) => Some(r.block_reqs),
            // io_uring's requests are started by the kernel's workers.
            Call::Close(_) | Call::IoUring(_) | Call::NetCall(_) | Call::GpuCall(_) | Call::Collective(_) => None,
        }
    }

    /// A system call recorded on its own, and the bytes its process's
    /// totals count for it; `None` for a call counted in a summary (a
    /// summed read or close: its summary counts it) or one that is not a
    /// system call (CUDA, NCCL).
    pub fn syscall_bytes(&self) -> Option<u64> {
        let moved = |ret: i64| u64::try_from(ret).unwrap_or(0);
        match *self {
            Call::Io(r) if r.summed => None,
            Call::Close(r) if r.summed => None,
            Call::Io(r) => Some(moved(r.ret)),
            Call::Transfer(r) => Some(moved(r.ret)),
            Call::IoUring(r) => Some(moved(r.ret)),
            Call::NetCall(r) => Some(r.bytes),
            // The events' bytes: an io_submit's are only asked for.
            Call::Aio(r) if r.op != AioOp::Submit => Some(r.read_bytes + r.write_bytes),
            Call::Aio(_) | Call::Open(_) | Call::Close(_) | Call::MetaCall(_) => Some(0),
            Call::GpuCall(_) | Call::Collective(_) => None,
        }
    }

    /// Counted in its thread's summary (`record --detail summary`): here
    /// it is an example, a call that failed or was slow.
    pub fn summed(&self) -> bool {
        matches!(*self, Call::Io(Io { summed: true, .. }) | Call::Close(Close { summed: true, .. }))
    }

    /// Its thread and the socket's file name, for a call made on a socket
    /// (a read or write of one, a network call).
    pub fn socket(&self) -> Option<(u32, StrId)> {
        match *self {
            Call::Io(r) if r.kind == FileKind::Socket => Some((r.tid, r.path)),
            Call::NetCall(r) => Some((r.tid, r.path)),
            _ => None,
        }
    }

    /// Its thread and what it brought in, before its path is looked at: a
    /// read recorded on its own, an io_uring read, a receive. A failed
    /// call brings nothing.
    pub fn brought_in(&self) -> Option<(u32, BroughtIn)> {
        let n = |ret: i64| u64::try_from(ret).ok();
        Some(match *self {
            Call::Io(r) if !r.summed && !r.op.is_write() => (r.tid, BroughtIn::File(r.path, r.kind, n(r.ret)?)),
            Call::IoUring(r) if r.op.is_read() => (r.tid, BroughtIn::Uring(r.path, n(r.ret)?)),
            Call::NetCall(r) if !r.op.is_send() && r.ret >= 0 => (r.tid, BroughtIn::Received(r.bytes)),
            _ => return None,
        })
    }

    /// Whether its time is time waiting for the GPU (a CUDA call).
    pub fn waits_for_gpu(&self) -> bool {
        matches!(self, Call::GpuCall(_))
    }

    /// The overview's lane for it; `None` for a call that has none (CUDA
    /// and NCCL calls: the GPU's wait is counted, not drawn there).
    pub fn lane(&self) -> Option<Lanes> {
        let rw = |write: bool| if write { Lanes::Writes } else { Lanes::Reads };
        Some(match *self {
            Call::Io(r) => rw(r.op.is_write()),
            Call::IoUring(r) => rw(r.op.is_write()),
            Call::NetCall(r) => rw(r.op.is_send()),
            Call::Transfer(_) | Call::Aio(_) => Lanes::Reads,
            Call::Open(_) | Call::Close(_) | Call::MetaCall(_) => Lanes::Opens,
            Call::GpuCall(_) | Call::Collective(_) => return None,
        })
    }
}

/// What a call may have brought into its thread ([`Call::brought_in`]).
pub enum BroughtIn {
    /// From a file of this kind: data when the path is a data file's.
    File(StrId, FileKind, u64),
    /// Through io_uring: data when the path is a data file's.
    Uring(StrId, u64),
    /// Received from the network.
    Received(u64),
}

/// Name keys: the top byte is the record kind's code (never reused), so
/// keys of different kinds never collide in an encoder's cache.
const LOW: u64 = (1 << 56) - 1;

const fn kind_tag(code: u8) -> u64 {
    (code as u64) << 56
}

pub fn io_key(op: IoOp, ret: i64) -> u64 {
    kind_tag(Io::CODE) | ((op as u64) << 48) | (ret as u64 & ((1 << 48) - 1))
}

pub fn transfer_key(op: TransferOp, ret: i64) -> u64 {
    kind_tag(Transfer::CODE) | ((op as u64) << 48) | (ret as u64 & ((1 << 48) - 1))
}

pub fn block_key(op: BlockOp, bytes: u64, failed: bool) -> u64 {
    kind_tag(Block::CODE) | ((op as u64) << 48) | (u64::from(failed) << 47) | (bytes & ((1 << 47) - 1))
}

pub fn uring_key(op: UringOp, ret: i64) -> u64 {
    kind_tag(IoUring::CODE) | ((op as u64) << 48) | (ret as u64 & ((1 << 48) - 1))
}

pub fn aio_key(op: AioOp, ret: i64) -> u64 {
    kind_tag(Aio::CODE) | ((op as u64) << 48) | (ret as u64 & ((1 << 48) - 1))
}

/// A network call is named by its bytes (messages for the mmsg calls are
/// in its args).
pub fn net_key(op: NetOp, ret: i64, bytes: u64) -> u64 {
    let v = if ret < 0 { ret as u64 } else { bytes };
    kind_tag(NetCall::CODE) | ((op as u64) << 48) | (v & ((1 << 48) - 1))
}

/// `recvfrom 64 KiB`, `sendto ECONNRESET`: what a network call is called.
pub fn net_name(r: &NetCall) -> String {
    let v = if r.ret < 0 { r.ret } else { r.bytes as i64 };
    labels::syscall(r.op.name(), v)
}

/// A metadata call is named after its path (a listing after its
/// directory and, having read, its bytes): the key hashes what the name
/// is made of.
pub fn meta_key(r: &MetaCall, abs: &[u8]) -> u64 {
    use std::hash::Hasher;
    let v = if r.ret < 0 || r.op.lists() { r.ret } else { 0 };
    let mut h = rustc_hash::FxHasher::default();
    h.write_u8(r.op as u8);
    h.write_i64(v);
    h.write(abs);
    kind_tag(MetaCall::CODE) | (h.finish() & LOW)
}

/// `newfstatat 000123.jpg`, `unlink ckpt-3.pt ENOENT`, `getdents64 train 32 KiB`.
pub fn meta_name(r: &MetaCall, abs: &[u8]) -> String {
    let p = if abs.is_empty() { "?".into() } else { String::from_utf8_lossy(abs) };
    let base = show::basename(&p);
    match labels::outcome(r.ret) {
        Outcome::Err(e) => format!("{} {base} {}", r.op.name(), show::errno(e)),
        Outcome::Ok(n) if r.op.lists() => format!("{} {base} {}", r.op.name(), show::size(n)),
        _ => format!("{} {base}", r.op.name()),
    }
}

pub fn gpu_key(r: &GpuCall) -> u64 {
    let v = if r.call.is_copy() { r.bytes } else { 0 };
    kind_tag(GpuCall::CODE) | ((r.call as u64) << 48) | (u64::from(r.ret != 0) << 47) | (v & ((1 << 47) - 1))
}

/// `cuStreamSynchronize`, `cuMemcpyDtoH 64 MiB`, `cuCtxSynchronize failed`.
pub fn gpu_name(r: &GpuCall) -> String {
    let mut s = r.call.name().to_string();
    if r.call.is_copy() {
        s.push(' ');
        s.push_str(&mltrace_log::show::size(r.bytes));
    }
    if r.ret != 0 {
        s.push_str(" failed");
    }
    s
}

pub fn nccl_key(r: &Collective) -> u64 {
    kind_tag(Collective::CODE) | ((r.op as u64) << 48) | (u64::from(r.ret != 0) << 47) | (r.bytes & ((1 << 47) - 1))
}

/// `ncclAllReduce 64 MiB`, `ncclGroupEnd`, `ncclSend 1 MiB failed`.
pub fn nccl_name(r: &Collective) -> String {
    let mut s = r.op.name().to_string();
    if !r.op.is_group() {
        s.push(' ');
        s.push_str(&mltrace_log::show::size(r.bytes));
    }
    if r.ret != 0 {
        s.push_str(" failed");
    }
    s
}

/// Opens, closes, mappings and faults are named after their file: the
/// key hashes what the name is made of (the kind's code, its op), so the
/// name is formatted only on a cache miss.
pub fn path_key(code: u8, op: u8, ret: i64, path: &[u8]) -> u64 {
    use std::hash::Hasher;
    let outcome = match labels::outcome(ret) {
        Outcome::Ok(_) => 0,
        Outcome::Err(e) => e,
        Outcome::Unknown => -1,
    };
    let mut h = rustc_hash::FxHasher::default();
    h.write_u8(op);
    h.write_i64(outcome);
    h.write(path);
    kind_tag(code) | (h.finish() & LOW)
}

/// A syscall's result: adds `errno`, or that it is unknown, and returns
/// the value when the call succeeded (for the caller to name).
#[inline]
pub fn outcome_args<S: ArgSink>(s: &mut S, ret: i64) -> Option<u64> {
    match labels::outcome(ret) {
        Outcome::Ok(n) => return Some(n),
        Outcome::Err(e) => s.str(K::Errno, show::errno(e).as_bytes()),
        Outcome::Unknown => s.str(K::Result, labels::RESULT_UNKNOWN.as_bytes()),
    }
    None
}

/// A syscall's result args: `returned`, `errno`, or that it is unknown.
#[inline]
pub fn returned<S: ArgSink>(s: &mut S, ret: i64) {
    if let Some(n) = outcome_args(s, ret) {
        s.int(K::Returned, n as i64);
    }
}

pub struct IoArgs<'a> {
    pub r: &'a Io,
    pub path: &'a [u8],
}

impl Args for IoArgs<'_> {
    #[inline]
    fn write<S: ArgSink>(&self, s: &mut S) {
        let r = self.r;
        s.str(K::Path, self.path);
        s.int(K::Fd, i64::from(r.fd));
        if r.offset_src != OffsetSrc::None {
            s.uint(K::Offset, r.offset);
        }
        s.uint(K::Requested, r.requested);
        returned(s, r.ret);
        s.int(K::Tid, i64::from(r.tid));
        if r.kind != FileKind::Regular {
            s.str(K::Kind, r.kind.name().as_bytes());
        }
    }
}

pub struct UringArgs<'a> {
    pub r: &'a IoUring,
    pub path: &'a [u8],
}

impl Args for UringArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        let r = self.r;
        s.str(K::Path, self.path);
        s.int(K::Fd, i64::from(r.fd));
        s.str(K::Opcode, r.op.name().as_bytes());
        if r.offset_src != OffsetSrc::None {
            s.uint(K::Offset, r.offset);
        }
        s.uint(K::Requested, r.requested);
        returned(s, r.ret);
        s.uint(K::UserData, r.user_data);
        s.int(K::Tid, i64::from(r.tid));
        if r.complete_tid != r.tid {
            s.int(K::CompleteTid, i64::from(r.complete_tid));
        }
        let f = labels::uring_flags(r.flags);
        if !f.is_empty() {
            s.str(K::Flags, f.as_bytes());
        }
        if r.kind != FileKind::Regular {
            s.str(K::Kind, r.kind.name().as_bytes());
        }
    }
}

pub struct AioArgs<'a> {
    pub r: &'a Aio,
    pub path: &'a [u8],
}

impl Args for AioArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        let r = self.r;
        if r.fd >= 0 {
            s.str(K::Path, self.path);
            s.int(K::Fd, i64::from(r.fd));
            s.str(K::Opcode, r.cmd.name().as_bytes());
        }
        s.uint(K::AioCtx, r.ctx);
        s.int(K::Nr, r.nr);
        if r.op == AioOp::Submit {
            if r.fd >= 0 {
                s.uint(K::Offset, r.offset);
            }
            s.uint(K::Requested, r.read_bytes + r.write_bytes);
        } else {
            s.int(K::MinNr, r.min_nr);
            s.uint(K::Bytes, r.read_bytes + r.write_bytes);
            if r.errors > 0 {
                s.uint(K::FailedEvents, u64::from(r.errors));
            }
        }
        returned(s, r.ret);
        if r.flags & aio::PARTIAL != 0 {
            s.str(K::Flags, labels::AIO_PARTIAL.as_bytes());
        }
        s.int(K::Tid, i64::from(r.tid));
    }
}

/// What the whole run read of one file: by calls, and from storage (for
/// any process, through calls or mappings). The survey adds them up; an
/// open shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileTotals {
    pub read: u64,
    pub storage: u64,
}

impl FileTotals {
    /// Share of the bytes read by calls that did not come from storage.
    pub fn hit_percent(&self) -> Option<u64> {
        (self.read > 0).then(|| (self.read.saturating_sub(self.storage) as u128 * 100 / self.read as u128) as u64)
    }
}

pub struct OpenArgs<'a> {
    pub r: &'a Open,
    pub passed: &'a [u8],
    pub abs: &'a [u8],
    /// The whole run's reads of the file, where known.
    pub totals: Option<FileTotals>,
}

impl Args for OpenArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        let r = self.r;
        s.str(K::Path, self.passed);
        s.str(K::AbsPath, self.abs);
        s.str(K::Flags, show::open_flags(r.flags).as_bytes());
        if r.flags & 0o100 != 0 || r.flags & 0o20200000 == 0o20200000 {
            s.str(K::Mode, format!("{:#o}", r.mode).as_bytes());
        }
        if r.dirfd != -100 {
            s.int(K::Dirfd, i64::from(r.dirfd));
        }
        if let Some(fd) = outcome_args(s, r.ret) {
            s.int(K::Fd, fd as i64);
        }
        // What was opened, unless nothing was.
        if !matches!(labels::outcome(r.ret), Outcome::Err(_)) && r.kind != FileKind::Regular {
            s.str(K::Kind, r.kind.name().as_bytes());
        }
        s.int(K::Tid, i64::from(r.tid));
        if let Some(t) = self.totals {
            file_totals(s, &t);
        }
    }
}

/// A file's whole-run totals as args: what opening it led to.
pub fn file_totals<S: ArgSink>(s: &mut S, t: &FileTotals) {
    s.uint(K::FileRead, t.read);
    s.uint(K::FileStorage, t.storage);
    if let Some(h) = t.hit_percent() {
        s.str(K::FileHit, format!("{h}%").as_bytes());
    }
}

pub struct CloseArgs<'a> {
    pub r: &'a Close,
    pub path: &'a [u8],
}

impl Args for CloseArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        s.str(K::Path, self.path);
        s.int(K::Fd, i64::from(self.r.fd));
        outcome_args(s, self.r.ret);
        s.int(K::Tid, i64::from(self.r.tid));
    }
}

pub struct TransferArgs<'a> {
    pub r: &'a Transfer,
    pub inp: &'a [u8],
    pub outp: &'a [u8],
}

impl Args for TransferArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        let r = self.r;
        s.str(K::InPath, self.inp);
        s.str(K::OutPath, self.outp);
        s.int(K::InFd, i64::from(r.in_fd));
        s.int(K::OutFd, i64::from(r.out_fd));
        s.uint(K::Requested, r.requested);
        returned(s, r.ret);
        s.int(K::Tid, i64::from(r.tid));
    }
}

/// A send or receive on a socket, and who is at the other end.
pub struct NetArgs<'a> {
    pub r: &'a NetCall,
    pub path: &'a [u8],
    pub peer: &'a [u8],
}

impl Args for NetArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        let r = self.r;
        if !self.peer.is_empty() {
            s.str(K::Peer, self.peer);
        }
        s.str(K::Path, self.path);
        s.int(K::Fd, i64::from(r.fd));
        s.uint(K::Requested, r.requested);
        returned(s, r.ret);
        s.uint(K::Bytes, r.bytes);
        s.int(K::Tid, i64::from(r.tid));
    }
}

/// A metadata call: the path as passed and made absolute (a rename's
/// new name too), what it returned.
pub struct MetaArgs<'a> {
    pub r: &'a MetaCall,
    pub path: &'a [u8],
    pub abs: &'a [u8],
    pub new_path: &'a [u8],
    pub new_abs: &'a [u8],
}

impl Args for MetaArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        let r = self.r;
        if r.op.lists() {
            s.str(K::Path, self.abs);
            s.int(K::Fd, i64::from(r.dirfd));
        } else {
            s.str(K::Path, self.path);
            s.str(K::AbsPath, self.abs);
            if r.dirfd != -100 {
                s.int(K::Dirfd, i64::from(r.dirfd));
            }
        }
        if !self.new_path.is_empty() {
            s.str(K::NewPath, self.new_path);
            s.str(K::NewAbsPath, self.new_abs);
        }
        if r.flags != 0 {
            s.str(K::Flags, format!("{:#x}", r.flags).as_bytes());
        }
        returned(s, r.ret);
        s.int(K::Tid, i64::from(r.tid));
    }
}

/// A CUDA call that waited for the GPU: what it waited on.
pub struct GpuArgs<'a> {
    pub r: &'a GpuCall,
}

impl Args for GpuArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        let r = self.r;
        match r.call {
            GpuApi::EventSynchronize => s.str(K::Event, hex(r.stream).as_bytes()),
            GpuApi::CtxSynchronize => {}
            _ if r.call.is_copy() => s.uint(K::Bytes, r.bytes),
            _ if r.stream == 0 => s.str(K::Stream, b"default"),
            _ => s.str(K::Stream, hex(r.stream).as_bytes()),
        }
        // CUresult: 0 is CUDA_SUCCESS.
        s.int(K::Result, i64::from(r.ret));
        s.int(K::Tid, i64::from(r.tid));
    }
}

/// An NCCL call: what it moves, on which communicator.
pub struct NcclArgs<'a> {
    pub r: &'a Collective,
}

impl Args for NcclArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        let r = self.r;
        if !r.op.is_group() {
            s.uint(K::Bytes, r.bytes);
            s.uint(K::Count, r.count);
            s.str(K::Comm, hex(r.comm).as_bytes());
            if r.rank >= 0 {
                s.int(K::Rank, i64::from(r.rank));
                s.int(K::NRanks, i64::from(r.nranks));
            }
            if r.peer >= 0 {
                s.int(K::NcclPeer, i64::from(r.peer));
            }
            if r.stream == 0 {
                s.str(K::Stream, b"default");
            } else {
                s.str(K::Stream, hex(r.stream).as_bytes());
            }
        }
        // ncclResult_t: 0 is ncclSuccess.
        s.int(K::Result, i64::from(r.ret));
        s.int(K::Tid, i64::from(r.tid));
    }
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// An mmap, munmap or mremap of a data file; `offset` is the file offset
/// at the call's address (mmap's own argument, or from the mapping table).
pub struct MapArgs<'a> {
    pub r: &'a Mapping,
    pub path: &'a [u8],
    pub offset: u64,
}

impl Args for MapArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        let r = self.r;
        s.str(K::Path, self.path);
        s.uint(K::Offset, self.offset);
        s.uint(K::Length, r.len);
        match r.op {
            MapOp::Mmap => {
                s.int(K::Fd, i64::from(r.fd));
                s.str(K::Prot, show::mmap_prot(r.prot).as_bytes());
                s.str(K::Flags, show::mmap_flags(r.flags).as_bytes());
                if let Some(at) = r.mapped_at() {
                    s.str(K::Address, hex(at).as_bytes());
                }
            }
            MapOp::Mremap => {
                s.str(K::Address, hex(r.addr).as_bytes());
                s.uint(K::NewLength, r.new_len);
                s.str(K::Flags, show::mremap_flags(r.flags).as_bytes());
                if let Some(at) = r.mapped_at() {
                    s.str(K::NewAddress, hex(at).as_bytes());
                }
            }
            _ => s.str(K::Address, hex(r.addr).as_bytes()),
        }
        outcome_args(s, r.ret);
        s.int(K::Tid, i64::from(r.tid));
    }
}

/// A major fault on a data mapping: the file and offset it read.
pub struct FaultArgs<'a> {
    pub r: &'a MajorFault,
    pub path: &'a [u8],
    pub offset: u64,
}

impl Args for FaultArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        s.str(K::Path, self.path);
        s.uint(K::Offset, self.offset);
        s.str(K::Address, hex(self.r.addr).as_bytes());
        s.int(K::Tid, i64::from(self.r.tid));
    }
}

/// A block request's args; `who` and `flags` from [`labels::block_who`]
/// and [`labels::block_flags`].
pub struct BlockArgs<'a> {
    pub b: &'a Block,
    pub who: &'a str,
    pub flags: &'a str,
    pub disk: &'a [u8],
}

impl Args for BlockArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        let b = self.b;
        s.uint(K::Sector, b.sector);
        s.uint(K::Bytes, b.bytes);
        s.uint(K::QueueNs, b.queue);
        s.uint(K::DeviceNs, b.device);
        s.str(K::Process, self.who.as_bytes());
        if b.flags & blk::TRACED != 0 {
            s.int(K::Tid, i64::from(b.tid));
        }
        if !self.flags.is_empty() {
            s.str(K::RqFlags, self.flags.as_bytes());
        }
        if b.error != 0 {
            s.int(K::Status, i64::from(b.error));
        }
        s.str(K::Disk, self.disk);
    }
}

pub struct MarkArgs<'a> {
    pub rank: i32,
    pub value: &'a str,
}

impl Args for MarkArgs<'_> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        s.str(K::Value, self.value.as_bytes());
        if self.rank >= 0 {
            s.int(K::Rank, i64::from(self.rank));
        }
    }
}

/// Copies a call's name and args out of its frame (`None`: not a call).
pub fn own_call(f: &Frame<'_>, rec: &Record, args: &mut OwnedArgs) -> Option<String> {
    args.0.clear();
    let shown = split(rec).ok()?.shown(f, |_| None);
    shown.write(args);
    Some(shown.name())
}

impl<'a> Call<'a> {
    /// Its args, with its strings read out of `f`; `totals` gives the
    /// run's reads of a file where the caller knows them (an open shows
    /// them).
    #[inline]
    pub fn shown(self, f: &'a Frame<'_>, totals: impl FnOnce(&[u8]) -> Option<FileTotals>) -> Shown<'a> {
        match self {
            Call::Io(r) => Shown::Io(IoArgs { r, path: f.str(r.path) }),
            Call::Open(r) => {
                let abs = f.str(r.abs_path);
                Shown::Open(OpenArgs { r, passed: f.str(r.path), abs, totals: totals(abs) })
            }
            Call::Close(r) => Shown::Close(CloseArgs { r, path: f.str(r.path) }),
            Call::Transfer(r) => Shown::Transfer(TransferArgs { r, inp: f.str(r.in_path), outp: f.str(r.out_path) }),
            Call::IoUring(r) => Shown::IoUring(UringArgs { r, path: f.str(r.path) }),
            Call::Aio(r) => Shown::Aio(AioArgs { r, path: f.str(r.path) }),
            Call::NetCall(r) => Shown::NetCall(NetArgs { r, path: f.str(r.path), peer: f.str(r.peer) }),
            Call::MetaCall(r) => Shown::MetaCall(MetaArgs {
                r,
                path: f.str(r.path),
                abs: f.str(r.abs_path),
                new_path: f.str(r.new_path),
                new_abs: f.str(r.new_abs_path),
            }),
            Call::GpuCall(r) => Shown::GpuCall(GpuArgs { r }),
            Call::Collective(r) => Shown::Collective(NcclArgs { r }),
        }
    }

    /// The file (or socket) it read from and the bytes it brought into
    /// its process: the process's read rate, a file's reads; `None` for a
    /// call that read nothing (or whose bytes its summary counts).
    #[inline]
    pub fn data_read(&self) -> Option<(StrId, u64)> {
        let (path, ret, reads) = match *self {
            Call::Io(r) => (r.path, r.ret, !r.op.is_write() && !r.summed),
            Call::IoUring(r) => (r.path, r.ret, r.op.is_read()),
            Call::Open(_)
            | Call::Close(_)
            | Call::Transfer(_)
            | Call::Aio(_)
            | Call::NetCall(_)
            | Call::MetaCall(_)
            | Call::GpuCall(_)
            | Call::Collective(_) => return None,
        };
        (reads && ret > 0).then_some((path, ret as u64))
    }

    /// The bytes it read and wrote through a file descriptor (a transfer
    /// both), for the overview's totals; zero for a summed call (its
    /// summary counts them), an aio call (its result is a count of events
    /// that may be reads or writes), and calls that move no file bytes.
    pub fn moved(&self) -> (u64, u64) {
        let n = |ret: i64| if self.summed() { 0 } else { u64::try_from(ret).unwrap_or(0) };
        match *self {
            Call::Io(r) if r.op.is_write() => (0, n(r.ret)),
            Call::Io(r) => (n(r.ret), 0),
            Call::Transfer(r) => (n(r.ret), n(r.ret)),
            Call::IoUring(r) if r.op.is_write() => (0, n(r.ret)),
            Call::IoUring(r) => (n(r.ret), 0),
            Call::Aio(_)
            | Call::Open(_)
            | Call::Close(_)
            | Call::NetCall(_)
            | Call::MetaCall(_)
            | Call::GpuCall(_)
            | Call::Collective(_) => (0, 0),
        }
    }
}

impl Shown<'_> {
    /// Its name key: calls with one key have one name (an encoder names
    /// each key once).
    #[inline]
    pub fn key(&self) -> u64 {
        match self {
            Shown::Io(a) => io_key(a.r.op, a.r.ret),
            Shown::Open(a) => path_key(Open::CODE, a.r.op as u8, a.r.ret, a.abs),
            Shown::Close(a) => path_key(Close::CODE, 0, a.r.ret, a.path),
            Shown::Transfer(a) => transfer_key(a.r.op, a.r.ret),
            Shown::IoUring(a) => uring_key(a.r.op, a.r.ret),
            Shown::Aio(a) => aio_key(a.r.op, a.r.ret),
            Shown::NetCall(a) => net_key(a.r.op, a.r.ret, a.r.bytes),
            Shown::MetaCall(a) => meta_key(a.r, a.abs),
            Shown::GpuCall(a) => gpu_key(a.r),
            Shown::Collective(a) => nccl_key(a.r),
        }
    }

    /// What its slice is called.
    #[inline]
    pub fn name(&self) -> String {
        match self {
            Shown::Io(a) => labels::syscall(a.r.op.name(), a.r.ret),
            Shown::Open(a) => labels::open(a.r.op, a.abs, a.r.ret),
            Shown::Close(a) => labels::close(a.path, a.r.ret),
            Shown::Transfer(a) => labels::syscall(a.r.op.name(), a.r.ret),
            Shown::IoUring(a) => labels::uring(a.r.op, a.r.ret),
            Shown::Aio(a) => labels::aio(a.r.op, a.r.ret),
            Shown::NetCall(a) => net_name(a.r),
            Shown::MetaCall(a) => meta_name(a.r, a.abs),
            Shown::GpuCall(a) => gpu_name(a.r),
            Shown::Collective(a) => nccl_name(a.r),
        }
    }
}
