//! Which syscall numbers the BPF programs record, from this build's own
//! architecture constants (the BPF side only sees the resulting table).

use mltrace_log::{MetaOp, SleepCall};

use crate::skel::types::op;

/// Size of the BPF side's `sys_op` table (MAX_SYSCALL_NR).
pub const TABLE_LEN: usize = 512;

/// The calls that change a thread's user or group ids: not recorded, but
/// a recorder that is not root looks at the credentials they leave.
pub const SETID: [(i64, &str); 8] = [
    (libc::SYS_setuid, "setuid"),
    (libc::SYS_setreuid, "setreuid"),
    (libc::SYS_setresuid, "setresuid"),
    (libc::SYS_setfsuid, "setfsuid"),
    (libc::SYS_setgid, "setgid"),
    (libc::SYS_setregid, "setregid"),
    (libc::SYS_setresgid, "setresgid"),
    (libc::SYS_setfsgid, "setfsgid"),
];

/// The name of syscall `nr` among [`SETID`].
pub fn setid_name(nr: u32) -> &'static str {
    SETID.iter().find(|s| s.0 == i64::from(nr)).map_or("a set*id call", |s| s.1)
}

/// The metadata calls recorded on this arch: (number, operation, the
/// log's name for it, its tracepoint's name where that differs).
#[rustfmt::skip]
pub const META: &[(i64, op, MetaOp, Option<&str>)] = &[
    (libc::SYS_getdents64, op::OP_GETDENTS64, MetaOp::Getdents64, None),
    (libc::SYS_newfstatat, op::OP_NEWFSTATAT, MetaOp::Newfstatat, None),
    (libc::SYS_statx, op::OP_STATX, MetaOp::Statx, None),
    (libc::SYS_faccessat, op::OP_FACCESSAT, MetaOp::Faccessat, None),
    (libc::SYS_faccessat2, op::OP_FACCESSAT2, MetaOp::Faccessat2, None),
    (libc::SYS_readlinkat, op::OP_READLINKAT, MetaOp::Readlinkat, None),
    (libc::SYS_renameat, op::OP_RENAMEAT, MetaOp::Renameat, None),
    (libc::SYS_renameat2, op::OP_RENAMEAT2, MetaOp::Renameat2, None),
    (libc::SYS_unlinkat, op::OP_UNLINKAT, MetaOp::Unlinkat, None),
    (libc::SYS_mkdirat, op::OP_MKDIRAT, MetaOp::Mkdirat, None),
    // Newer architectures (aarch64, riscv) only have the *at calls.
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_stat, op::OP_STAT, MetaOp::Stat, Some("newstat")),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_lstat, op::OP_LSTAT, MetaOp::Lstat, Some("newlstat")),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_access, op::OP_ACCESS, MetaOp::Access, None),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_readlink, op::OP_READLINK, MetaOp::Readlink, None),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_rename, op::OP_RENAME, MetaOp::Rename, None),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_unlink, op::OP_UNLINK, MetaOp::Unlink, None),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mkdir, op::OP_MKDIR, MetaOp::Mkdir, None),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_rmdir, op::OP_RMDIR, MetaOp::Rmdir, None),
];

/// The log's name for metadata operation `o` (BPF's op code).
pub fn meta_op(o: u32) -> Option<MetaOp> {
    META.iter().find(|m| m.1 .0 == o).map(|m| m.2)
}

/// A recorded call: (number, operation, its name, its tracepoint's name
/// where that differs).
type Call = (i64, op, &'static str, Option<&'static str>);

/// The I/O, sync, libaio and socket calls recorded on this arch.
#[rustfmt::skip]
const CALLS: &[Call] = &[
    (libc::SYS_read, op::OP_READ, "read", None),
    (libc::SYS_pread64, op::OP_PREAD64, "pread64", None),
    (libc::SYS_readv, op::OP_READV, "readv", None),
    (libc::SYS_preadv, op::OP_PREADV, "preadv", None),
    (libc::SYS_preadv2, op::OP_PREADV2, "preadv2", None),
    (libc::SYS_write, op::OP_WRITE, "write", None),
    (libc::SYS_pwrite64, op::OP_PWRITE64, "pwrite64", None),
    (libc::SYS_writev, op::OP_WRITEV, "writev", None),
    (libc::SYS_pwritev, op::OP_PWRITEV, "pwritev", None),
    (libc::SYS_pwritev2, op::OP_PWRITEV2, "pwritev2", None),
    (libc::SYS_openat, op::OP_OPENAT, "openat", None),
    (libc::SYS_openat2, op::OP_OPENAT2, "openat2", None),
    (libc::SYS_close, op::OP_CLOSE, "close", None),
    // 64-bit sendfile's tracepoint is defined as sendfile64.
    (libc::SYS_sendfile, op::OP_SENDFILE, "sendfile", Some("sendfile64")),
    (libc::SYS_copy_file_range, op::OP_COPY_FILE_RANGE, "copy_file_range", None),
    (libc::SYS_fsync, op::OP_FSYNC, "fsync", None),
    (libc::SYS_fdatasync, op::OP_FDATASYNC, "fdatasync", None),
    (libc::SYS_sync_file_range, op::OP_SYNC_FILE_RANGE, "sync_file_range", None),
    (libc::SYS_io_submit, op::OP_IO_SUBMIT, "io_submit", None),
    (libc::SYS_io_getevents, op::OP_IO_GETEVENTS, "io_getevents", None),
    (libc::SYS_sendto, op::OP_SENDTO, "sendto", None),
    (libc::SYS_recvfrom, op::OP_RECVFROM, "recvfrom", None),
    (libc::SYS_sendmsg, op::OP_SENDMSG, "sendmsg", None),
    (libc::SYS_recvmsg, op::OP_RECVMSG, "recvmsg", None),
    (libc::SYS_sendmmsg, op::OP_SENDMMSG, "sendmmsg", None),
    (libc::SYS_recvmmsg, op::OP_RECVMMSG, "recvmmsg", None),
    // Newer architectures (aarch64, riscv) only have openat.
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_open, op::OP_OPEN, "open", None),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_creat, op::OP_CREAT, "creat", None),
    // Not in the libc crate for x86_64 (asm/unistd_64.h: 333).
    #[cfg(target_arch = "x86_64")]
    (333, op::OP_IO_PGETEVENTS, "io_pgetevents", None),
    // Nor for aarch64 (asm-generic/unistd.h: 292).
    #[cfg(target_arch = "aarch64")]
    (292, op::OP_IO_PGETEVENTS, "io_pgetevents", None),
];

/// The mapping calls, recorded when mappings are.
const MAPPINGS: &[Call] = &[
    (libc::SYS_mmap, op::OP_MMAP, "mmap", None),
    (libc::SYS_munmap, op::OP_MUNMAP, "munmap", None),
    (libc::SYS_mremap, op::OP_MREMAP, "mremap", None),
];

/// The name of recorded operation `o` (BPF's op code); `?` for one this
/// build does not record.
pub fn op_name(o: u32) -> &'static str {
    match CALLS.iter().chain(MAPPINGS).find(|c| c.1 .0 == o) {
        Some(c) => c.2,
        None => meta_op(o).map_or("?", MetaOp::name),
    }
}

/// The name of recorded call `nr` with operation `o` as its tracepoints
/// name it (`syscalls:sys_enter_NAME`).
pub fn tracepoint_name(nr: i64, o: op) -> &'static str {
    if o == op::OP_SETID {
        return setid_name(nr as u32);
    }
    let tp = CALLS.iter().chain(MAPPINGS).find(|c| c.1 == o).and_then(|c| c.3);
    tp.or_else(|| META.iter().find(|m| m.1 == o).and_then(|m| m.3)).unwrap_or_else(|| op_name(o.0))
}

/// (syscall number, operation) for every recorded syscall on this arch;
/// `mappings`: with mmap, munmap and mremap; `setid`: with [`SETID`].
pub fn traced(mappings: bool, setid: bool) -> Vec<(i64, op)> {
    let mut v: Vec<(i64, op)> = CALLS.iter().map(|c| (c.0, c.1)).collect();
    v.extend(META.iter().map(|m| (m.0, m.1)));
    if setid {
        v.extend(SETID.iter().map(|s| (s.0, op::OP_SETID)));
    }
    if mappings {
        v.extend(MAPPINGS.iter().map(|c| (c.0, c.1)));
    }
    v
}

/// The `sys_op` table for the BPF programs: number -> operation code.
pub fn table(mappings: bool, setid: bool) -> [u8; TABLE_LEN] {
    let mut t = [0u8; TABLE_LEN];
    for (nr, o) in traced(mappings, setid) {
        t[nr as usize] = o.0 as u8;
    }
    t
}

/// events.h's CALL_GIL: the BPF side's code for a futex on the GIL.
pub const CALL_GIL: i16 = 1024;

/// The family of system call `nr` (this arch's number) that a thread went
/// to sleep in; `nr` < 0: none.
#[allow(non_upper_case_globals)] // libc's SYS_* names as patterns
pub fn sleep_call(nr: i16) -> SleepCall {
    use libc::*;
    if nr == CALL_GIL {
        return SleepCall::Gil;
    }
    let nr = i64::from(nr);
    if nr < 0 {
        return SleepCall::None;
    }
    match nr {
        SYS_futex | SYS_futex_waitv => SleepCall::Futex,
        SYS_ppoll => SleepCall::Poll,
        SYS_pselect6 => SleepCall::Select,
        SYS_epoll_pwait | SYS_epoll_pwait2 => SleepCall::EpollWait,
        // The calls that newer architectures (aarch64) only have as the
        // calls above.
        #[cfg(target_arch = "x86_64")]
        SYS_poll => SleepCall::Poll,
        #[cfg(target_arch = "x86_64")]
        SYS_select => SleepCall::Select,
        #[cfg(target_arch = "x86_64")]
        SYS_epoll_wait => SleepCall::EpollWait,
        #[cfg(target_arch = "x86_64")]
        SYS_pause => SleepCall::Signal,
        #[cfg(target_arch = "x86_64")]
        SYS_open => SleepCall::OpenClose,
        SYS_nanosleep | SYS_clock_nanosleep => SleepCall::Nanosleep,
        SYS_read | SYS_readv | SYS_pread64 | SYS_preadv | SYS_preadv2 => SleepCall::Read,
        SYS_write | SYS_writev | SYS_pwrite64 | SYS_pwritev | SYS_pwritev2 => SleepCall::Write,
        SYS_recvfrom | SYS_recvmsg | SYS_recvmmsg => SleepCall::Recv,
        SYS_sendto | SYS_sendmsg | SYS_sendmmsg => SleepCall::Send,
        SYS_accept | SYS_accept4 => SleepCall::Accept,
        SYS_connect => SleepCall::Connect,
        SYS_wait4 | SYS_waitid => SleepCall::Wait,
        SYS_rt_sigsuspend | SYS_rt_sigtimedwait => SleepCall::Signal,
        SYS_ioctl => SleepCall::Ioctl,
        SYS_io_getevents | SYS_io_uring_enter => SleepCall::AsyncIo,
        // io_pgetevents: libc names it on no arch (x86_64's number).
        #[cfg(target_arch = "x86_64")]
        333 => SleepCall::AsyncIo,
        #[cfg(target_arch = "aarch64")]
        292 => SleepCall::AsyncIo,
        SYS_openat | SYS_openat2 | SYS_close => SleepCall::OpenClose,
        SYS_fsync | SYS_fdatasync | SYS_sync_file_range | SYS_msync => SleepCall::Sync,
        SYS_mmap | SYS_munmap | SYS_mremap | SYS_mprotect | SYS_madvise => SleepCall::Mapping,
        SYS_flock | SYS_fcntl => SleepCall::Lock,
        SYS_semop | SYS_semtimedop | SYS_msgrcv | SYS_msgsnd | SYS_mq_timedreceive | SYS_mq_timedsend => SleepCall::Ipc,
        SYS_sendfile | SYS_splice | SYS_tee | SYS_copy_file_range | SYS_vmsplice => SleepCall::Splice,
        SYS_exit | SYS_exit_group => SleepCall::Exit,
        _ => SleepCall::Other,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_has_every_op_once() {
        let t = super::table(true, false);
        let mut seen: Vec<u8> = t.iter().copied().filter(|&o| o != 0).collect();
        seen.sort();
        let n = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), n);
        assert_eq!(n, super::traced(true, false).len());
        assert_eq!(super::traced(false, false).len() + 3, n);
        // Not root: the set*id calls too, all one operation.
        let t = super::table(true, true);
        let setid = t.iter().filter(|&&o| o == crate::skel::types::op::OP_SETID.0 as u8).count();
        assert_eq!(setid, super::SETID.len());
        assert_eq!(super::setid_name(libc::SYS_setresgid as u32), "setresgid");
    }

    #[test]
    #[cfg(target_arch = "x86_64")] // elsewhere the old calls have no number
    fn each_op_of_events_h_is_named_once() {
        use crate::skel::types::op;
        let mut names: Vec<&str> = (1..op::OP__COUNT.0).filter(|&o| o != op::OP_SETID.0).map(super::op_name).collect();
        assert!(!names.contains(&"?"), "an op with no row: {names:?}");
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "an op named twice");
        assert_eq!(super::tracepoint_name(libc::SYS_sendfile, op::OP_SENDFILE), "sendfile64");
        assert_eq!(super::tracepoint_name(libc::SYS_setgid, op::OP_SETID), "setgid");
    }

    #[test]
    fn call_gil_is_events_h_s_and_no_syscall() {
        let h = include_str!("../../../bpf/events.h");
        let v = h.lines().find_map(|l| l.strip_prefix("#define CALL_GIL ")).unwrap();
        assert_eq!(v.trim().parse::<i16>().unwrap(), super::CALL_GIL);
        assert!(super::CALL_GIL as usize >= super::TABLE_LEN);
        assert_eq!(super::sleep_call(super::CALL_GIL), mltrace_log::SleepCall::Gil);
        assert_eq!(super::sleep_call(libc::SYS_futex as i16), mltrace_log::SleepCall::Futex);
    }

    #[test]
    fn metadata_ops_are_one_range_each_named_once() {
        use crate::skel::types::op;
        let mut codes: Vec<u32> = super::META.iter().map(|m| m.1 .0).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), super::META.len());
        // The BPF side dispatches OP_GETDENTS64 ... OP_RENAMEAT2 as one range.
        assert!(codes.iter().all(|&c| (op::OP_GETDENTS64.0..=op::OP_RENAMEAT2.0).contains(&c)));
        let names: Vec<&str> = super::META.iter().map(|m| m.2.name()).collect();
        assert!(names.iter().all(|n| *n != "other"), "{names:?}");
        assert_eq!(super::meta_op(op::OP_NEWFSTATAT.0), Some(mltrace_log::MetaOp::Newfstatat));
        assert_eq!(super::meta_op(op::OP_READ.0), None);
    }
}
