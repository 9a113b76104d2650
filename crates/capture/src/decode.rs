//! Kernel ring-buffer records -> log records. Runs on the consumer thread
//! for every event, so it allocates only for strings the kernel sends once
//! (file names, exec arguments), never for reads and writes.

use std::mem::{offset_of, size_of, MaybeUninit};

use mltrace_log::*;

mod meta;

use crate::files::{classify, join_normalize, FileFacts, FileTable};
use crate::inodes::InodeNames;
use crate::skel::types::{
    self, ev_aio, ev_block, ev_close, ev_comm, ev_exec, ev_exit, ev_fault, ev_file, ev_fork, ev_gpu, ev_hdr, ev_io,
    ev_ioac, ev_kind, ev_map, ev_meta, ev_nccl, ev_net, ev_open, ev_pcache, ev_sched, ev_span, ev_untraced, ev_uring,
    ev_xfer, op, sum_slot,
};

/// BPF flag bits, as events.h declares them (its enums reach the skeleton).
const TR_ARG: u8 = types::str_bits::TR_ARG.0 as u8;
const TR_ABS: u8 = types::str_bits::TR_ABS.0 as u8;
const TR_UNREADABLE: u8 = types::str_bits::TR_UNREADABLE.0 as u8;
const F_DISCONNECTED: u8 = types::str_bits::F_DISCONNECTED.0 as u8;
const F_PASSED: u8 = types::str_bits::F_PASSED.0 as u8;
const IOF_FILEPOS: u16 = types::io_bits::IOF_FILEPOS.0 as u16;
const IOF_REQ_PARTIAL: u16 = types::io_bits::IOF_REQ_PARTIAL.0 as u16;
const IOF_NO_OFFSET: u16 = types::io_bits::IOF_NO_OFFSET.0 as u16;
const IOF_SUMMED: u16 = types::io_bits::IOF_SUMMED.0 as u16;
const URF_FIXED_FILE: u16 = types::uring_bits::URF_FIXED_FILE.0 as u16;
const URF_SQPOLL: u16 = types::uring_bits::URF_SQPOLL.0 as u16;
const URF_FILEPOS: u16 = types::uring_bits::URF_FILEPOS.0 as u16;
const URF_NO_OFFSET: u16 = types::uring_bits::URF_NO_OFFSET.0 as u16;
const URF_REQ_PARTIAL: u16 = types::uring_bits::URF_REQ_PARTIAL.0 as u16;
const URF_BUF_SELECT: u16 = types::uring_bits::URF_BUF_SELECT.0 as u16;
const SPAN_WOKEN: u16 = types::span_bits::SPAN_WOKEN.0 as u16;
const SPAN_WAKER: u16 = types::span_bits::SPAN_WAKER.0 as u16;
const SPAN_RUNNING: u16 = types::span_bits::SPAN_RUNNING.0 as u16;

/// BPF's URF_* bits (events.h) to the log's [`uring`] bits.
fn uring_flags(f: u16) -> u8 {
    const MAP: [(u16, u8); 4] = [
        (URF_FIXED_FILE, uring::FIXED_FILE),
        (URF_SQPOLL, uring::SQPOLL),
        (URF_REQ_PARTIAL, uring::REQ_PARTIAL),
        (URF_BUF_SELECT, uring::BUF_SELECT),
    ];
    MAP.iter().filter(|(from, _)| f & from != 0).fold(0, |acc, (_, to)| acc | to)
}

/// Where a call's or request's offset came from: none, its own argument,
/// or the file position (which only a seekable file has).
fn offset_src(no_offset: bool, filepos: bool, kind: FileKind) -> OffsetSrc {
    if no_offset {
        OffsetSrc::None
    } else if !filepos {
        OffsetSrc::Explicit
    } else if matches!(kind, FileKind::Regular | FileKind::BlockDev) {
        OffsetSrc::FilePos
    } else {
        OffsetSrc::None
    }
}

const MAPF_ANON_SUMMARY: u16 = types::map_bits::MAPF_ANON_SUMMARY.0 as u16;

/// Super-block magics of file systems in memory: tmpfs and shmem
/// (/dev/shm, memfd), ramfs, hugetlbfs.
const MEMORY_FS_MAGICS: [u64; 3] = [0x0102_1994, 0x8584_58f6, 0x9584_58f6];

/// Copies the first bytes of `data` into a zeroed `T` (a plain C struct from
/// the skeleton, valid for any bytes). Records with strings are shorter than
/// their struct: only what was sent is copied.
fn read<T: Copy>(data: &[u8]) -> T {
    let mut v = MaybeUninit::<T>::zeroed();
    let n = data.len().min(size_of::<T>());
    // SAFETY: `n` bytes fit both buffers; T is a repr(C) struct of integers
    // and integer arrays, so every byte pattern is a valid value.
    unsafe {
        std::ptr::copy_nonoverlapping(data.as_ptr(), v.as_mut_ptr().cast::<u8>(), n);
        v.assume_init()
    }
}

/// A record struct with room for its strings (ev_open carries 8 KiB of
/// them), kept between records: [`read`] would zero all of it for every
/// open, where only the sent prefix is copied here. What lies past that
/// prefix is a previous record's bytes; strings are read from the record.
struct Reused<T>(Option<Box<T>>);

impl<T> Default for Reused<T> {
    fn default() -> Self {
        Reused(None)
    }
}

impl<T: Copy> Reused<T> {
    fn read(&mut self, data: &[u8]) -> Box<T> {
        // SAFETY: T is a repr(C) struct of integers and integer arrays, so
        // all-zero bytes are a valid value.
        let mut b = self.0.take().unwrap_or_else(|| unsafe { Box::<T>::new_zeroed().assume_init() });
        let n = data.len().min(size_of::<T>());
        // SAFETY: `n` bytes fit both; any byte pattern is a valid T.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (&mut *b as *mut T).cast::<u8>(), n) };
        b
    }

    fn give_back(&mut self, b: Box<T>) {
        self.0 = Some(b);
    }
}

/// An absolute path that lexical normalisation leaves as it is (no empty,
/// `.` or `..` component, no trailing `/`).
fn is_normal(p: &[u8]) -> bool {
    p.first() == Some(&b'/')
        && (p.len() == 1
            || (p.last() != Some(&b'/') && p[1..].split(|&b| b == b'/').all(|c| !matches!(c, b"" | b"." | b".."))))
}

fn tail(data: &[u8], offset: usize, len: usize) -> &[u8] {
    data.get(offset..).map(|d| &d[..len.min(d.len())]).unwrap_or(&[])
}

fn cstr(b: &[i8]) -> Vec<u8> {
    b.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect()
}

/// BPF's NETF_* bits (events.h) to the log's [`net`] bits.
fn net_flags(f: u16) -> u8 {
    use types::net_bits as n;
    let f = u32::from(f);
    let mut out = 0;
    for (from, to) in [
        (n::NETF_PEER_USER, net::PEER_FROM_CALL),
        (n::NETF_PEER_SOCK, net::PEER_FROM_SOCKET),
        (n::NETF_PARTIAL, net::PARTIAL),
    ] {
        if f & from.0 != 0 {
            out |= to;
        }
    }
    out
}

fn net_op(o: u8) -> NetOp {
    match op(o.into()) {
        op::OP_SENDTO => NetOp::Sendto,
        op::OP_SENDMSG => NetOp::Sendmsg,
        op::OP_RECVMSG => NetOp::Recvmsg,
        op::OP_SENDMMSG => NetOp::Sendmmsg,
        op::OP_RECVMMSG => NetOp::Recvmmsg,
        _ => NetOp::Recvfrom,
    }
}

/// The peer as people write it, into `out`: `10.0.0.2:8080`,
/// `[::1]:8080`, a unix socket's path, or nothing when unknown (an
/// abstract unix socket's name starts with a NUL, so it reads as empty).
fn net_peer(e: &ev_net, out: &mut Vec<u8>) {
    use std::io::Write;
    const AF_UNIX: u16 = 1;
    const AF_INET: u16 = 2;
    const AF_INET6: u16 = 10;
    out.clear();
    let _ = match e.family {
        AF_INET => {
            let a = std::net::Ipv4Addr::new(e.addr[0], e.addr[1], e.addr[2], e.addr[3]);
            write!(out, "{a}:{}", e.port)
        }
        AF_INET6 => {
            let a = std::net::Ipv6Addr::from(e.addr);
            match a.to_ipv4_mapped() {
                Some(v4) => write!(out, "{v4}:{}", e.port),
                None => write!(out, "[{a}]:{}", e.port),
            }
        }
        AF_UNIX => {
            out.extend(e.path.iter().take_while(|&&c| c != 0).map(|&c| c as u8));
            Ok(())
        }
        _ => Ok(()),
    };
}

/// BPF's BLK_* and RQF_* bits (events.h) to the log's [`blk`] bits.
fn block_flags(h_flags: u16, rq: u16) -> u16 {
    use types::{blk_bits as b, rq_bits as q};
    const MAP: [(b, u16); 5] = [
        (b::BLK_TRACED, blk::TRACED),
        (b::BLK_KTHREAD, blk::KTHREAD),
        (b::BLK_START_UNKNOWN, blk::START_UNKNOWN),
        (b::BLK_ISSUE_UNKNOWN, blk::ISSUE_UNKNOWN),
        (b::BLK_PARTIAL, blk::PARTIAL),
    ];
    const RQ: [(q, u16); 7] = [
        (q::RQF_SYNC, blk::SYNC),
        (q::RQF_META, blk::META),
        (q::RQF_PRIO, blk::PRIO),
        (q::RQF_FUA, blk::FUA),
        (q::RQF_PREFLUSH, blk::PREFLUSH),
        (q::RQF_RAHEAD, blk::READAHEAD),
        (q::RQF_BACKGROUND, blk::BACKGROUND),
    ];
    let mut out = 0;
    for (from, to) in MAP {
        if u32::from(h_flags) & from.0 != 0 {
            out |= to;
        }
    }
    for (from, to) in RQ {
        if u32::from(rq) & from.0 != 0 {
            out |= to;
        }
    }
    out
}

/// Timestamps: the request's own start when known, else the first thing seen.
/// `hide_others`: a request of neither a traced process nor a kernel
/// thread is nobody's (no pid, no name: without root, another user's).
fn block_record(e: &ev_block, enc: &mut FrameEncoder, hide_others: bool) -> Block {
    let h = &e.h;
    let flags = block_flags(h.flags, e.rq_flags);
    let hide = hide_others && flags & (blk::TRACED | blk::KTHREAD) == 0;
    // Its name is never interned: a frame keeps every string it was given.
    let (pid, tid, comm) = if hide { (0, 0, enc.intern(b"")) } else { (h.pid, h.tid, enc.intern(&cstr(&e.comm))) };
    let issue = if flags & blk::ISSUE_UNKNOWN != 0 { None } else { Some(e.issue) };
    let start = if flags & blk::START_UNKNOWN != 0 { None } else { Some(h.ts) };
    let (ts, queue, device) = match (start, issue) {
        (Some(s), Some(i)) => (s, i.saturating_sub(s), e.complete.saturating_sub(i)),
        (Some(s), None) => (s, 0, e.complete.saturating_sub(s)),
        (None, Some(i)) => (i, 0, e.complete.saturating_sub(i)),
        (None, None) => (e.complete, 0, 0),
    };
    Block {
        ts,
        queue,
        device,
        pid,
        tid,
        comm,
        dev: e.dev,
        disk: enc.intern(&cstr(&e.disk)),
        sector: e.sector,
        bytes: u64::from(e.bytes),
        op: BlockOp::from_u8(e.op),
        flags,
        error: e.error,
        cause_ts: e.cause_ts,
        cause_idx: e.cause_idx,
    }
}

/// BPF's SCHED_* ops and ST_* bits (events.h).
const SCHED_SWITCH: u8 = types::sched_op::SCHED_SWITCH.0 as u8;
const SCHED_WAKING: u8 = types::sched_op::SCHED_WAKING.0 as u8;
const SCHED_MIGRATE: u8 = types::sched_op::SCHED_MIGRATE.0 as u8;
const ST_SELF: u8 = types::sched_traced::ST_SELF.0 as u8;
const ST_OTHER: u8 = types::sched_traced::ST_OTHER.0 as u8;

// events.h states prev's state and the ioac bits in the log's own codes.
const _: () = {
    use types::sched_state as ss;
    assert!(ss::SS_RUNNABLE.0 == SchedState::Runnable as u32);
    assert!(ss::SS_SLEEPING.0 == SchedState::Sleeping as u32);
    assert!(ss::SS_UNINTERRUPTIBLE.0 == SchedState::Uninterruptible as u32);
    assert!(ss::SS_STOPPED.0 == SchedState::Stopped as u32);
    assert!(ss::SS_DEAD.0 == SchedState::Dead as u32);
    assert!(ss::SS_OTHER.0 == SchedState::Other as u32);
    assert!(types::wake_by::WB_TASK.0 == WakeBy::Task as u32);
    assert!(types::wake_by::WB_TIMER.0 == WakeBy::Timer as u32);
    assert!(types::wake_by::WB_HARDIRQ.0 == WakeBy::Hardirq as u32);
    assert!(types::wake_by::WB_SOFTIRQ.0 == WakeBy::Softirq as u32);
    assert!(types::wake_by::WB_UNKNOWN.0 == WakeBy::Unknown as u32);
    assert!(types::ioac_bits::IOAC_CHARS.0 == acct::CHARS as u32);
    assert!(types::ioac_bits::IOAC_BYTES.0 == acct::BYTES as u32);
    use types::gpu_api as g;
    assert!(g::GPU_STREAM_SYNC.0 == GpuApi::StreamSynchronize as u32);
    assert!(g::GPU_CTX_SYNC.0 == GpuApi::CtxSynchronize as u32);
    assert!(g::GPU_EVENT_SYNC.0 == GpuApi::EventSynchronize as u32);
    assert!(g::GPU_MEMCPY.0 == GpuApi::Memcpy as u32);
    assert!(g::GPU_MEMCPY_DTOH.0 == GpuApi::MemcpyDtoH as u32);
    assert!(g::GPU_MEMCPY_HTOD.0 == GpuApi::MemcpyHtoD as u32);
    assert!(g::GPU_MEMCPY_DTOD.0 == GpuApi::MemcpyDtoD as u32);
    assert!(g::GPU_MEMCPY_PEER.0 == GpuApi::MemcpyPeer as u32);
    assert!(g::GPU_MEMCPY_2D.0 == GpuApi::Memcpy2D as u32);
    assert!(g::GPU_MEMCPY_3D.0 == GpuApi::Memcpy3D as u32);
    use types::gpu_counted as c;
    assert!(c::GPU_STREAM_QUERY.0 == GpuCounted::StreamQuery as u32);
    assert!(c::GPU_EVENT_QUERY.0 == GpuCounted::EventQuery as u32);
    assert!(c::GPU_LAUNCH_KERNEL.0 == GpuCounted::LaunchKernel as u32);
    assert!(c::GPU_GRAPH_LAUNCH.0 == GpuCounted::GraphLaunch as u32);
    use types::nccl_api as n;
    assert!(n::NCCL_ALL_REDUCE.0 == NcclOp::AllReduce as u32);
    assert!(n::NCCL_ALL_GATHER.0 == NcclOp::AllGather as u32);
    assert!(n::NCCL_REDUCE_SCATTER.0 == NcclOp::ReduceScatter as u32);
    assert!(n::NCCL_BROADCAST.0 == NcclOp::Broadcast as u32);
    assert!(n::NCCL_REDUCE.0 == NcclOp::Reduce as u32);
    assert!(n::NCCL_SEND.0 == NcclOp::Send as u32);
    assert!(n::NCCL_RECV.0 == NcclOp::Recv as u32);
    assert!(n::NCCL_GROUP_START.0 == NcclOp::GroupStart as u32);
    assert!(n::NCCL_GROUP_END.0 == NcclOp::GroupEnd as u32);
};

/// A scheduling event; `None` for an op this version does not know.
fn sched_record(e: &ev_sched, enc: &mut FrameEncoder) -> Option<Record> {
    let h = &e.h;
    let (me, other) = (e.traced & ST_SELF != 0, e.traced & ST_OTHER != 0);
    Some(match h.op {
        SCHED_SWITCH => Record::SchedSwitch(SchedSwitch {
            ts: h.ts,
            cpu: e.cpu,
            prev_pid: h.pid,
            prev_tid: h.tid,
            prev_comm: enc.intern(&cstr(&e.comm)),
            prev_prio: e.prio,
            prev_state: SchedState::from_u8(e.state),
            next_pid: e.other_pid,
            next_tid: e.other_tid,
            next_comm: enc.intern(&cstr(&e.other_comm)),
            next_prio: e.other_prio,
            traced: if me { sched::PREV } else { 0 } | if other { sched::NEXT } else { 0 },
            prev_call: crate::syscalls::sleep_call(e.prev_call),
        }),
        SCHED_WAKING | SCHED_MIGRATE => Record::SchedWake(SchedWake {
            ts: h.ts,
            op: if h.op == SCHED_WAKING { WakeOp::Waking } else { WakeOp::Migrate },
            cpu: e.cpu,
            target_cpu: e.target_cpu,
            pid: h.pid,
            tid: h.tid,
            comm: enc.intern(&cstr(&e.comm)),
            prio: e.prio,
            waker_pid: e.other_pid,
            waker_tid: e.other_tid,
            traced: if other { sched::WAKER } else { 0 },
            by: WakeBy::from_u8(e.state),
        }),
        _ => return None,
    })
}

/// A span of a thread's summed scheduling (summary detail).
pub(crate) fn span_record(e: &ev_span) -> Record {
    let h = &e.h;
    const BITS: [(u16, u8); 3] = [(SPAN_WOKEN, span::WOKEN), (SPAN_WAKER, span::WAKER), (SPAN_RUNNING, span::RUNNING)];
    let flags = BITS.iter().filter(|(from, _)| h.flags & from != 0).fold(0, |acc, (_, to)| acc | to);
    Record::SchedSpan(SchedSpan {
        ts: h.ts,
        pid: h.pid,
        tid: h.tid,
        from: e.from,
        sleep_from: e.sleep_from,
        cpu: e.cpu,
        runnable: e.runnable,
        other: e.other,
        timed: e.timed,
        slept: SchedState::from_u8(e.slept),
        call: crate::syscalls::sleep_call(e.call),
        waker_tid: e.waker_tid,
        waker_pid: e.waker_pid,
        by: WakeBy::from_u8(e.by),
        flags,
    })
}

/// A thread's counters from the kernel (ev_ioac.have uses the log's [`acct`] bits).
fn accounting(h: &ev_hdr, at: AcctPoint, a: &ev_ioac) -> Record {
    Record::IoAccounting(IoAccounting {
        ts: h.ts,
        pid: h.pid,
        tid: h.tid,
        at,
        have: a.have & (acct::CHARS | acct::BYTES),
        rchar: a.rchar,
        wchar: a.wchar,
        syscr: a.syscr,
        syscw: a.syscw,
        read_bytes: a.read_bytes,
        write_bytes: a.write_bytes,
        cancelled_write_bytes: a.cancelled_write_bytes,
    })
}

/// Counts of what the decoder produced and what it could not.
#[derive(Clone, Copy, Debug, Default)]
pub struct DecodeStats {
    pub records: u64,
    pub malformed: u64,
    pub unknown_file: u64,
    /// File events left out by `--path`.
    pub filtered: u64,
    /// Block requests shown without their issuer (see `hide_others_block`).
    pub block_hidden: u64,
}

#[derive(Default)]
pub struct KernelDecoder {
    /// Processes that stopped being traced as they became another user
    /// or group, each said in a sentence (the first 64).
    pub untraced: Vec<String>,
    /// By pid: its last exec's id (low 16 bits) and time, for summaries.
    pub(crate) execs: rustc_hash::FxHashMap<u32, (u16, u64)>,
    /// Summary slots their threads sent, for [`crate::summary::Summaries`].
    pub(crate) sums: Vec<crate::bpf::SlotSum>,
    files: FileTable,
    /// Paths by (dev, inode), for page-cache insertions.
    inodes: InodeNames,
    /// The last page-cache file's path, interned in the current frame:
    /// (dev, inode, frame generation, id).
    last_pcache: Option<(u32, u64, u64, StrId)>,
    page_size: u64,
    /// SQPOLL threads already named (they are never forked where
    /// sched_process_fork sees them).
    sqpoll_named: Vec<u32>,
    /// The command's pid until it has exec'd: its syscalls before that are
    /// mltrace's own launch handshake, not the command's.
    pre_exec: Option<u32>,
    open_buf: Reused<ev_open>,
    meta_buf: Reused<ev_meta>,
    file_buf: Reused<ev_file>,
    /// A network call's peer as text, before it is interned (reused).
    peer_buf: Vec<u8>,
    /// `--path`: only file events on paths under this prefix are kept.
    path_filter: Option<Vec<u8>>,
    /// Without root: block requests of processes not traced (kernel
    /// threads aside) keep their disk, sector and size but not who issued
    /// them (another user's I/O).
    hide_others_block: bool,
    /// Watch mappings for `libcuda.so*` and `libnccl.so*` files (see
    /// [`Self::take_libraries`]).
    lib_watch: bool,
    /// The library paths seen mapped, and those not yet taken.
    lib_seen: Vec<Vec<u8>>,
    lib_new: Vec<Vec<u8>>,
    pub stats: DecodeStats,
}

fn cache_during(o: u8) -> CacheDuring {
    match op(o.into()) {
        op::OP_NONE => CacheDuring::Fault,
        op::OP_READ | op::OP_PREAD64 | op::OP_READV | op::OP_PREADV | op::OP_PREADV2 => CacheDuring::Read,
        op::OP_WRITE | op::OP_PWRITE64 | op::OP_WRITEV | op::OP_PWRITEV | op::OP_PWRITEV2 => CacheDuring::Write,
        op::OP_SENDFILE | op::OP_COPY_FILE_RANGE => CacheDuring::Transfer,
        _ => CacheDuring::Other,
    }
}

fn map_op(o: u8) -> MapOp {
    match op(o.into()) {
        op::OP_MUNMAP => MapOp::Munmap,
        op::OP_MREMAP => MapOp::Mremap,
        _ => MapOp::Mmap,
    }
}

fn open_op(o: u8) -> OpenOp {
    match op(o.into()) {
        op::OP_OPEN => OpenOp::Open,
        op::OP_OPENAT2 => OpenOp::Openat2,
        op::OP_CREAT => OpenOp::Creat,
        _ => OpenOp::Openat,
    }
}

fn aio_op(o: u8) -> AioOp {
    match op(o.into()) {
        op::OP_IO_GETEVENTS => AioOp::Getevents,
        op::OP_IO_PGETEVENTS => AioOp::Pgetevents,
        _ => AioOp::Submit,
    }
}

pub(crate) fn io_op(o: u8) -> IoOp {
    match op(o.into()) {
        op::OP_PREAD64 => IoOp::Pread64,
        op::OP_READV => IoOp::Readv,
        op::OP_PREADV => IoOp::Preadv,
        op::OP_PREADV2 => IoOp::Preadv2,
        op::OP_WRITE => IoOp::Write,
        op::OP_PWRITE64 => IoOp::Pwrite64,
        op::OP_WRITEV => IoOp::Writev,
        op::OP_PWRITEV => IoOp::Pwritev,
        op::OP_PWRITEV2 => IoOp::Pwritev2,
        op::OP_FSYNC => IoOp::Fsync,
        op::OP_FDATASYNC => IoOp::Fdatasync,
        op::OP_SYNC_FILE_RANGE => IoOp::SyncFileRange,
        _ => IoOp::Read,
    }
}

impl KernelDecoder {
    /// A decoder for a recording whose command is `root_pid`.
    pub fn for_command(root_pid: u32) -> Self {
        // SAFETY: sysconf has no preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        KernelDecoder { pre_exec: Some(root_pid), page_size, ..Default::default() }
    }

    /// A decoder whose file table forgets identities unused for
    /// `generation` others (see [`FileTable`]).
    pub fn with_file_generation(root_pid: u32, generation: usize) -> Self {
        KernelDecoder { files: FileTable::with_generation(generation), ..Self::for_command(root_pid) }
    }

    /// A decoder for a recording that attached to running processes
    /// (nothing of theirs is a launch handshake); with `--path`, file
    /// events on other paths are left out.
    /// See `hide_others_block`: a recorder run by a user other than root
    /// (with capabilities) must not show what other users' processes do.
    pub fn hide_others_block_io(&mut self, hide: bool) {
        self.hide_others_block = hide;
    }

    /// Notes the `libcuda.so*` and `libnccl.so*` files traced processes
    /// map, for the recorder to attach the CUDA and NCCL probes to.
    pub fn watch_libraries(&mut self, on: bool) {
        self.lib_watch = on;
    }

    /// The probed libraries' files mapped since the last call (each path once).
    pub fn take_libraries(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.lib_new)
    }

    #[cold]
    fn lib_mapped(&mut self, key: u64) {
        let Some(p) = self.files.path(key) else { return };
        if crate::cuda::library_of(p).is_some() && self.lib_seen.len() < 256 && !self.lib_seen.iter().any(|s| s == p) {
            self.lib_seen.push(p.to_vec());
            self.lib_new.push(p.to_vec());
        }
    }

    pub fn attached(generation: usize, path_filter: Option<Vec<u8>>) -> Self {
        KernelDecoder { pre_exec: None, path_filter, ..Self::with_file_generation(0, generation) }
    }

    /// Whether `--path` keeps an event on file identity `key` (an unknown
    /// file is kept: it is counted as such, never hidden).
    #[inline]
    fn keeps(&mut self, key: u64) -> bool {
        let Some(prefix) = &self.path_filter else { return true };
        let keep = match self.files.path(key) {
            Some(p) => crate::attach::under(p, prefix),
            None => key != 0,
        };
        self.stats.filtered += u64::from(!keep);
        keep
    }

    /// The same for a path already known.
    #[inline]
    fn keeps_path(&mut self, path: Option<&[u8]>) -> bool {
        let Some(prefix) = &self.path_filter else { return true };
        let keep = path.is_some_and(|p| crate::attach::under(p, prefix));
        self.stats.filtered += u64::from(!keep);
        keep
    }

    pub fn files(&self) -> &FileTable {
        &self.files
    }

    pub fn files_mut(&mut self) -> &mut FileTable {
        &mut self.files
    }

    /// The path id and kind of a file identity; key 0 is "no file" (a bad fd).
    #[inline]
    fn file(&mut self, key: u64, enc: &mut FrameEncoder) -> (StrId, FileKind) {
        if key == 0 {
            return (enc.intern(b""), FileKind::Unknown);
        }
        match self.files.lookup(key, enc) {
            Some(v) => v,
            None => {
                self.stats.unknown_file += 1;
                (enc.intern(b"?"), FileKind::Unknown)
            }
        }
    }

    /// The path id and kind of the file an [`IoSummary`](mltrace_log::IoSummary)
    /// sums: by its inode for a regular file (its struct file may have
    /// been reused since, by the next file the loader opened), else by its
    /// identity; none for a close.
    pub fn summed_file(&mut self, key: u64, dev: u32, ino: u64, pid: u32, enc: &mut FrameEncoder) -> (StrId, FileKind) {
        if key == 0 && ino == 0 {
            return (enc.intern(b""), FileKind::Unknown);
        }
        if let Some(p) = self.inodes.known(dev, ino) {
            return (enc.intern(p), FileKind::Regular);
        }
        if let Some(found) = self.files.lookup_ino(key, ino, enc) {
            return found;
        }
        match self.inodes.lookup(dev, ino, pid) {
            Some(p) => (enc.intern(p), FileKind::Regular),
            None => {
                self.stats.unknown_file += 1;
                (enc.intern(b"?"), FileKind::Unknown)
            }
        }
    }

    /// Remembers what file identity `key` is (from an ev_file, or an open
    /// that names its file).
    fn name(&mut self, key: u64, facts: &FileFacts<'_>, flags: u8, dev: u32) {
        if flags & F_PASSED == 0 && self.files.passed_name(key, facts.ino) {
            return;
        }
        let (kind, mut path) = classify(facts);
        if flags & TR_ABS != 0 {
            // Only the end of the path fit: say so in the name itself.
            path.splice(0..0, b"...".iter().copied());
        } else if kind == FileKind::Regular {
            self.inodes.named(dev, facts.ino, &path);
        }
        if flags & F_PASSED != 0 {
            self.files.insert_passed(key, kind, path, facts.ino);
        } else {
            self.files.insert_ino(key, kind, path, facts.ino);
        }
    }

    /// Names a ring's SQPOLL thread (`iou-sqp-PID`), whose requests go on
    /// its own track: a Comm record, from /proc while it runs.
    #[cold]
    fn name_sqpoll(&mut self, h: &ev_hdr, enc: &mut FrameEncoder) {
        if self.sqpoll_named.len() >= 1024 {
            self.sqpoll_named.clear();
        }
        self.sqpoll_named.push(h.tid);
        let comm = std::fs::read_to_string(format!("/proc/{}/task/{}/comm", h.pid, h.tid))
            .map(|c| c.trim_end().to_string())
            .unwrap_or_else(|_| format!("iou-sqp-{}", h.pid));
        let comm = enc.intern(comm.as_bytes());
        enc.push(&Record::Comm(Comm { ts: h.ts, pid: h.pid, tid: h.tid, comm }));
    }

    /// A major fault; with its start, the file and page the kernel said.
    fn fault(&mut self, h: &ev_hdr, e: &ev_fault, enc: &mut FrameEncoder) -> MajorFault {
        let mut r = MajorFault { ts: h.ts, pid: h.pid, tid: h.tid, addr: e.addr, ..Default::default() };
        if e.start != 0 && e.start <= h.ts {
            r.flags = fault::FILE;
            r.dur = h.ts - e.start;
            r.ts = e.start;
            r.dev = e.dev;
            r.ino = e.ino;
            r.offset = e.index.wrapping_mul(self.page_size);
        }
        let path = if r.ino == 0 { None } else { self.inodes.lookup(r.dev, r.ino, h.pid) };
        r.path = enc.intern(path.unwrap_or(b""));
        r
    }

    /// Decodes one ring record into zero or more log records.
    pub fn decode(&mut self, data: &[u8], enc: &mut FrameEncoder) {
        if data.len() < size_of::<ev_hdr>() {
            self.stats.malformed += 1;
            return;
        }
        let h: ev_hdr = read(data);
        let need = match ev_kind(h.kind.into()) {
            ev_kind::EV_IO => size_of::<ev_io>(),
            ev_kind::EV_CLOSE => size_of::<ev_close>(),
            ev_kind::EV_XFER => size_of::<ev_xfer>(),
            ev_kind::EV_FORK => size_of::<ev_fork>(),
            ev_kind::EV_EXIT => size_of::<ev_exit>(),
            ev_kind::EV_COMM => size_of::<ev_comm>(),
            ev_kind::EV_FILE => offset_of!(ev_file, path),
            ev_kind::EV_OPEN => offset_of!(ev_open, path),
            ev_kind::EV_EXEC => offset_of!(ev_exec, data),
            ev_kind::EV_BLOCK => size_of::<ev_block>(),
            ev_kind::EV_PCACHE => size_of::<ev_pcache>(),
            ev_kind::EV_URING => size_of::<ev_uring>(),
            ev_kind::EV_AIO => size_of::<ev_aio>(),
            ev_kind::EV_SCHED => size_of::<ev_sched>(),
            ev_kind::EV_SPAN => size_of::<ev_span>(),
            ev_kind::EV_MAP => size_of::<ev_map>(),
            ev_kind::EV_FAULT => size_of::<ev_fault>(),
            ev_kind::EV_NET => size_of::<ev_net>(),
            ev_kind::EV_GPU => size_of::<ev_gpu>(),
            ev_kind::EV_NCCL => size_of::<ev_nccl>(),
            ev_kind::EV_UNTRACED => size_of::<ev_untraced>(),
            ev_kind::EV_SUM => size_of::<sum_slot>(),
            ev_kind::EV_META => offset_of!(ev_meta, path),
            _ => usize::MAX,
        };
        if data.len() < need {
            self.stats.malformed += 1;
            return;
        }
        let kind = ev_kind(h.kind.into());
        if let Some(root) = self.pre_exec {
            if h.pid == root {
                match kind {
                    ev_kind::EV_EXEC => self.pre_exec = None,
                    ev_kind::EV_IO
                    | ev_kind::EV_OPEN
                    | ev_kind::EV_CLOSE
                    | ev_kind::EV_XFER
                    | ev_kind::EV_PCACHE
                    | ev_kind::EV_URING
                    | ev_kind::EV_AIO
                    | ev_kind::EV_MAP
                    | ev_kind::EV_FAULT
                    | ev_kind::EV_NET
                    | ev_kind::EV_META => return,
                    _ => {}
                }
            }
        }
        self.stats.records += 1;
        match kind {
            ev_kind::EV_SUM => self.sums.extend(crate::bpf::SlotSum::parse(data)),
            ev_kind::EV_IO => {
                let e: ev_io = read(data);
                if !self.keeps(e.file) {
                    return;
                }
                let (path, kind) = self.file(e.file, enc);
                let offset_src = offset_src(h.flags & IOF_NO_OFFSET != 0, h.flags & IOF_FILEPOS != 0, kind);
                enc.push(&Record::Io(Io {
                    ts: h.ts,
                    dur: e.dur,
                    pid: h.pid,
                    tid: h.tid,
                    op: io_op(h.op),
                    fd: e.fd,
                    path,
                    kind,
                    offset: if offset_src == OffsetSrc::None { 0 } else { e.offset },
                    offset_src,
                    requested: e.requested,
                    ret: e.ret,
                    block_reqs: e.nblk,
                    summed: h.flags & IOF_SUMMED != 0,
                }));
            }
            ev_kind::EV_CLOSE => {
                let e: ev_close = read(data);
                if !self.keeps(e.file) {
                    return;
                }
                let (path, kind) = self.file(e.file, enc);
                enc.push(&Record::Close(Close {
                    ts: h.ts,
                    dur: e.dur,
                    pid: h.pid,
                    tid: h.tid,
                    fd: e.fd,
                    path,
                    kind,
                    ret: e.ret,
                    summed: h.flags & IOF_SUMMED != 0,
                }));
            }
            ev_kind::EV_XFER => {
                let e: ev_xfer = read(data);
                if self.path_filter.is_some() && !self.keeps(e.in_file) && !self.keeps(e.out_file) {
                    return;
                }
                let (in_path, _) = self.file(e.in_file, enc);
                let (out_path, _) = self.file(e.out_file, enc);
                enc.push(&Record::Transfer(Transfer {
                    ts: h.ts,
                    dur: e.dur,
                    pid: h.pid,
                    tid: h.tid,
                    op: if op(h.op.into()) == op::OP_SENDFILE {
                        TransferOp::Sendfile
                    } else {
                        TransferOp::CopyFileRange
                    },
                    in_fd: e.in_fd,
                    in_path,
                    out_fd: e.out_fd,
                    out_path,
                    requested: e.requested,
                    ret: e.ret,
                    block_reqs: e.nblk,
                }));
            }
            ev_kind::EV_NET => {
                let e: ev_net = read(data);
                let (path, _) = self.file(e.file, enc);
                net_peer(&e, &mut self.peer_buf);
                let peer = enc.intern(&self.peer_buf);
                enc.push(&Record::NetCall(NetCall {
                    ts: h.ts,
                    dur: e.dur,
                    pid: h.pid,
                    tid: h.tid,
                    op: net_op(h.op),
                    fd: e.fd,
                    path,
                    peer,
                    requested: e.requested,
                    ret: e.ret,
                    bytes: e.bytes,
                    flags: net_flags(h.flags),
                }));
            }
            ev_kind::EV_META => self.meta(&h, data, enc),
            ev_kind::EV_GPU => {
                let e: ev_gpu = read(data);
                enc.push(&Record::GpuCall(GpuCall {
                    ts: h.ts,
                    dur: e.dur,
                    pid: h.pid,
                    tid: h.tid,
                    call: GpuApi::from_u8(h.op),
                    stream: e.stream,
                    bytes: e.bytes,
                    ret: e.ret,
                }));
            }
            ev_kind::EV_UNTRACED => {
                let e: ev_untraced = read(data);
                let text = untraced_text(&h, &e);
                let name = enc.intern(mltrace_log::labels::UNTRACED_MARK.as_bytes());
                let value = enc.intern(json_string(&text).as_bytes());
                enc.push(&Record::Mark(Mark { ts: h.ts, name, value, rank: -1, pid: h.pid }));
                if self.untraced.len() < 64 {
                    self.untraced.push(text);
                }
            }
            ev_kind::EV_NCCL => {
                let e: ev_nccl = read(data);
                enc.push(&Record::Collective(Collective {
                    ts: h.ts,
                    dur: e.dur,
                    pid: h.pid,
                    tid: h.tid,
                    op: NcclOp::from_u8(h.op),
                    count: e.count,
                    datatype: e.datatype,
                    bytes: e.count.saturating_mul(nccl_type_size(e.datatype)),
                    comm: e.comm,
                    rank: e.rank,
                    nranks: e.nranks,
                    peer: e.peer,
                    stream: e.stream,
                    ret: e.ret,
                }));
            }
            ev_kind::EV_FILE => {
                let e = self.file_buf.read(data);
                let raw = tail(data, offset_of!(ev_file, path), e.path_len as usize);
                let facts = FileFacts {
                    mode: e.mode,
                    magic: e.magic,
                    rdev: e.rdev,
                    ino: e.ino,
                    path: raw,
                    disconnected: e.flags & F_DISCONNECTED != 0,
                };
                self.name(e.key, &facts, e.flags, e.dev);
                self.file_buf.give_back(e);
            }
            ev_kind::EV_OPEN => {
                let e = self.open_buf.read(data);
                let passed = tail(data, offset_of!(ev_open, path), e.path_len as usize);
                if e.named != 0 {
                    let at = offset_of!(ev_open, path) + e.path_len as usize;
                    // An absolute passed path names the file itself (the
                    // kernel side did not walk the dentries).
                    let normalized;
                    let path = if e.fflags & F_PASSED != 0 && is_normal(passed) {
                        passed
                    } else if e.fflags & F_PASSED != 0 {
                        normalized = join_normalize(b"/", passed);
                        &normalized[..]
                    } else {
                        tail(data, at, e.abs_len as usize)
                    };
                    let facts = FileFacts {
                        mode: e.fmode,
                        magic: e.magic,
                        rdev: e.rdev,
                        ino: e.ino,
                        path,
                        disconnected: e.fflags & F_DISCONNECTED != 0,
                    };
                    self.name(e.file, &facts, e.fflags, e.dev);
                }
                let mut trunc = 0u8;
                if e.trunc & TR_UNREADABLE != 0 {
                    trunc |= mltrace_log::trunc::UNREADABLE;
                }
                // Most often the file is named by the very path passed: one id.
                let mut same_as_passed = false;
                let (abs, kind) = if e.ret >= 0 {
                    match self.files.lookup(e.file, enc) {
                        Some((id, kind)) => {
                            let name = self.files.path(e.file);
                            if name.is_some_and(|p| p.starts_with(b"...")) {
                                trunc |= mltrace_log::trunc::ABS;
                            }
                            same_as_passed = name == Some(passed);
                            (id, kind)
                        }
                        None => {
                            self.stats.unknown_file += 1;
                            (enc.intern(&join_normalize(b"/", passed)), FileKind::Unknown)
                        }
                    }
                } else {
                    let base: &[u8] = if passed.first() == Some(&b'/') {
                        b"/"
                    } else {
                        match self.files.path(e.base) {
                            Some(p) => p,
                            None => {
                                self.stats.unknown_file += 1;
                                b"?"
                            }
                        }
                    };
                    let joined = join_normalize(base, passed);
                    if !self.keeps_path(Some(&joined)) {
                        self.open_buf.give_back(e);
                        return;
                    }
                    (enc.intern(&joined), FileKind::Unknown)
                };
                if e.ret >= 0 && !self.keeps(e.file) {
                    self.open_buf.give_back(e);
                    return;
                }
                let path = if same_as_passed { abs } else { enc.intern(passed) };
                enc.push(&Record::Open(Open {
                    ts: h.ts,
                    dur: e.dur,
                    pid: h.pid,
                    tid: h.tid,
                    op: open_op(h.op),
                    dirfd: e.dirfd,
                    path,
                    abs_path: abs,
                    flags: e.flags as u32,
                    mode: e.mode,
                    ret: e.ret,
                    kind,
                    trunc,
                    block_reqs: e.nblk,
                }));
                self.open_buf.give_back(e);
            }
            ev_kind::EV_FORK => {
                let e: ev_fork = read(data);
                enc.push(&Record::Fork(Fork {
                    ts: h.ts,
                    pid: h.pid,
                    tid: h.tid,
                    parent_pid: e.parent_pid,
                    parent_tid: e.parent_tid,
                    thread: e.thread != 0,
                }));
            }
            ev_kind::EV_EXEC => {
                let e: ev_exec = read(data);
                if self.execs.len() >= 65536 {
                    // Only the last second's execs matter to summaries.
                    self.execs.clear();
                }
                self.execs.insert(h.pid, (h.flags, h.ts));
                let d = tail(data, offset_of!(ev_exec, data), e.filename_len as usize + e.argv_len as usize);
                let (fname, mut argv) = d.split_at((e.filename_len as usize).min(d.len()));
                if argv.last() == Some(&0) {
                    argv = &argv[..argv.len() - 1];
                }
                let mut trunc = 0;
                if e.trunc & TR_ARG != 0 {
                    trunc |= mltrace_log::trunc::ARG;
                }
                if e.trunc & TR_UNREADABLE != 0 {
                    trunc |= mltrace_log::trunc::UNREADABLE;
                }
                let filename = enc.intern(fname);
                let argv = enc.intern(argv);
                enc.push(&Record::Exec(Exec { ts: h.ts, pid: h.pid, tid: h.tid, filename, argv, trunc }));
                enc.push(&accounting(&h, AcctPoint::Exec, &e.ioac));
                crate::environ::push(h.pid, h.ts, enc);
            }
            ev_kind::EV_EXIT => {
                let e: ev_exit = read(data);
                // Before the exit: a reader drops a process at its exit.
                enc.push(&accounting(&h, AcctPoint::Exit, &e.ioac));
                enc.push(&Record::Exit(Exit {
                    ts: h.ts,
                    pid: h.pid,
                    tid: h.tid,
                    status: e.status,
                    process_exit: e.group_dead != 0,
                }));
            }
            ev_kind::EV_COMM => {
                let e: ev_comm = read(data);
                let comm = enc.intern(&cstr(&e.comm));
                enc.push(&Record::Comm(Comm { ts: h.ts, pid: h.pid, tid: h.tid, comm }));
            }
            ev_kind::EV_PCACHE => {
                let e: ev_pcache = read(data);
                if self.path_filter.is_some() {
                    let p = self.inodes.lookup(e.dev, e.ino, h.pid).map(<[u8]>::to_vec);
                    if !self.keeps_path(p.as_deref()) {
                        return;
                    }
                }
                let path = match self.last_pcache {
                    Some((d, i, g, id)) if d == e.dev && i == e.ino && g == enc.generation() => id,
                    _ => {
                        let id = match self.inodes.lookup(e.dev, e.ino, h.pid) {
                            Some(p) => enc.intern(p),
                            None => enc.intern(b""),
                        };
                        self.last_pcache = Some((e.dev, e.ino, enc.generation(), id));
                        id
                    }
                };
                enc.push(&Record::PageCache(PageCache {
                    ts: h.ts,
                    pid: h.pid,
                    tid: h.tid,
                    dev: e.dev,
                    ino: e.ino,
                    path,
                    offset: e.index.wrapping_mul(self.page_size),
                    bytes: u64::from(e.pages) * self.page_size,
                    during: cache_during(h.op),
                }));
            }
            ev_kind::EV_URING => {
                let e: ev_uring = read(data);
                if !self.keeps(e.file) {
                    return;
                }
                if h.flags & URF_SQPOLL != 0 && !self.sqpoll_named.contains(&h.tid) {
                    self.name_sqpoll(&h, enc);
                }
                let (path, kind) = self.file(e.file, enc);
                let offset_src = offset_src(h.flags & URF_NO_OFFSET != 0, h.flags & URF_FILEPOS != 0, kind);
                enc.push(&Record::IoUring(IoUring {
                    ts: h.ts,
                    dur: e.dur,
                    pid: h.pid,
                    tid: h.tid,
                    op: UringOp::from_u8(h.op),
                    fd: e.fd,
                    path,
                    kind,
                    offset: if offset_src == OffsetSrc::None { 0 } else { e.offset },
                    offset_src,
                    requested: e.requested,
                    ret: e.ret,
                    user_data: e.user_data,
                    complete_tid: e.complete_tid,
                    flags: uring_flags(h.flags),
                }));
            }
            ev_kind::EV_AIO => {
                let e: ev_aio = read(data);
                if e.fd >= 0 && !self.keeps(e.file) {
                    return;
                }
                let (path, kind) = self.file(e.file, enc);
                enc.push(&Record::Aio(Aio {
                    ts: h.ts,
                    dur: e.dur,
                    pid: h.pid,
                    tid: h.tid,
                    op: aio_op(h.op),
                    ctx: e.ctx,
                    fd: e.fd,
                    path,
                    kind,
                    cmd: if e.fd < 0 { AioCmd::Other } else { AioCmd::from_u8(e.aio_op.min(255) as u8) },
                    offset: e.offset,
                    nr: e.nr,
                    min_nr: e.min_nr,
                    ret: e.ret,
                    read_bytes: e.read_bytes,
                    write_bytes: e.write_bytes,
                    counted: e.counted,
                    errors: e.errors,
                    flags: if h.flags & IOF_REQ_PARTIAL != 0 { aio::PARTIAL } else { 0 },
                    block_reqs: e.nblk,
                }));
            }
            ev_kind::EV_SPAN => {
                let e: ev_span = read(data);
                enc.push(&span_record(&e));
            }
            ev_kind::EV_SCHED => {
                let e: ev_sched = read(data);
                match sched_record(&e, enc) {
                    Some(rec) => enc.push(&rec),
                    None => {
                        self.stats.records -= 1;
                        self.stats.malformed += 1;
                    }
                }
            }
            ev_kind::EV_MAP => {
                let e: ev_map = read(data);
                let anon = h.flags & MAPF_ANON_SUMMARY != 0;
                if self.lib_watch && !anon && e.file != 0 {
                    self.lib_mapped(e.file);
                }
                if !anon && e.file != 0 && !self.keeps(e.file) {
                    return;
                }
                let (path, kind) = self.file(e.file, enc);
                enc.push(&Record::Mapping(Mapping {
                    ts: h.ts,
                    dur: e.dur,
                    pid: h.pid,
                    tid: h.tid,
                    op: if anon { MapOp::Anonymous } else { map_op(h.op) },
                    fd: e.fd,
                    path,
                    kind,
                    dev: e.dev,
                    ino: e.ino,
                    file_flags: if MEMORY_FS_MAGICS.contains(&e.magic) { mapf::MEMORY_FS } else { 0 },
                    offset: e.offset,
                    addr: e.addr,
                    len: e.len,
                    new_len: e.new_len,
                    prot: e.prot,
                    flags: e.flags,
                    ret: e.ret,
                }));
            }
            ev_kind::EV_FAULT => {
                let e: ev_fault = read(data);
                if self.path_filter.is_some() {
                    // Only the kernel's own file says where a fault was.
                    let p = (e.start != 0 && e.ino != 0)
                        .then(|| self.inodes.lookup(e.dev, e.ino, h.pid).map(<[u8]>::to_vec))
                        .flatten();
                    if !self.keeps_path(p.as_deref()) {
                        return;
                    }
                }
                let rec = self.fault(&h, &e, enc);
                enc.push(&Record::MajorFault(rec));
            }
            ev_kind::EV_BLOCK => {
                let e: ev_block = read(data);
                let b = block_record(&e, enc, self.hide_others_block);
                if self.hide_others_block && b.flags & (blk::TRACED | blk::KTHREAD) == 0 {
                    self.stats.block_hidden += 1;
                }
                enc.push(&Record::Block(b));
            }
            _ => {
                self.stats.records -= 1;
                self.stats.malformed += 1;
            }
        }
    }
}

/// `passwd [4242] became uid 0 (setuid exec of /usr/bin/passwd): not
/// recorded from here`: what it became, against the recording user's ids.
fn untraced_text(h: &ev_hdr, e: &ev_untraced) -> String {
    let cstr = |b: &[i8]| {
        let b: Vec<u8> = b.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let path = cstr(&e.path[..(e.path_len as usize).min(e.path.len())]);
    let by_call = h.op == crate::skel::types::op::OP_SETID.0 as u8;
    let user = e.uid != uid || e.euid != uid;
    let became = match (user, e.euid != uid, e.egid != gid) {
        (true, true, _) => format!("uid {}", e.euid),
        (true, false, _) => format!("uid {}", e.uid),
        (false, _, true) => format!("gid {}", e.egid),
        (false, _, false) => format!("gid {}", e.gid),
    };
    let why = match (by_call, user) {
        (true, _) => format!("{}()", crate::syscalls::setid_name(e.nr)),
        (false, true) => format!("setuid exec of {path}"),
        (false, false) => format!("setgid exec of {path}"),
    };
    let name = if by_call || path.is_empty() { cstr(&e.comm) } else { mltrace_log::show::basename(&path).to_string() };
    format!("{name} [{}] became {became} ({why}): not recorded from here", h.pid)
}

/// `text` as a JSON string (a mark's value is JSON).
fn json_string(text: &str) -> String {
    let mut o = String::with_capacity(text.len() + 2);
    o.push('"');
    for c in text.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_normal_path_is_what_normalising_it_gives() {
        for p in ["/", "/a", "/data/train/0001.jpg", "/a/.hidden/b", "/a/..b/c", "/a/b.", "/a/..."] {
            assert!(is_normal(p.as_bytes()), "{p}");
            assert_eq!(join_normalize(b"/", p.as_bytes()), p.as_bytes(), "{p}");
        }
        for p in ["", "a/b", "//a", "/a//b", "/a/./b", "/a/../b", "/a/", "/a/.", "/a/.."] {
            assert!(!is_normal(p.as_bytes()), "{p}");
        }
    }
}
