//! Which syscall numbers the BPF programs record, from this build's own
//! architecture constants (the BPF side only sees the resulting table).

use crate::skel::types::op;

/// Size of the BPF side's `sys_op` table (MAX_SYSCALL_NR).
pub const TABLE_LEN: usize = 512;

/// (syscall number, operation) for every recorded syscall on this arch;
/// `mappings`: with mmap, munmap and mremap.
pub fn traced(mappings: bool) -> Vec<(i64, op)> {
    let mut v: Vec<(i64, op)> = vec![
        (libc::SYS_read, op::OP_READ),
        (libc::SYS_pread64, op::OP_PREAD64),
        (libc::SYS_readv, op::OP_READV),
        (libc::SYS_preadv, op::OP_PREADV),
        (libc::SYS_preadv2, op::OP_PREADV2),
        (libc::SYS_write, op::OP_WRITE),
        (libc::SYS_pwrite64, op::OP_PWRITE64),
        (libc::SYS_writev, op::OP_WRITEV),
        (libc::SYS_pwritev, op::OP_PWRITEV),
        (libc::SYS_pwritev2, op::OP_PWRITEV2),
        (libc::SYS_openat, op::OP_OPENAT),
        (libc::SYS_openat2, op::OP_OPENAT2),
        (libc::SYS_close, op::OP_CLOSE),
        (libc::SYS_sendfile, op::OP_SENDFILE),
        (libc::SYS_copy_file_range, op::OP_COPY_FILE_RANGE),
        (libc::SYS_fsync, op::OP_FSYNC),
        (libc::SYS_fdatasync, op::OP_FDATASYNC),
        (libc::SYS_sync_file_range, op::OP_SYNC_FILE_RANGE),
        (libc::SYS_io_submit, op::OP_IO_SUBMIT),
        (libc::SYS_io_getevents, op::OP_IO_GETEVENTS),
        (libc::SYS_sendto, op::OP_SENDTO),
        (libc::SYS_recvfrom, op::OP_RECVFROM),
        (libc::SYS_sendmsg, op::OP_SENDMSG),
        (libc::SYS_recvmsg, op::OP_RECVMSG),
        (libc::SYS_sendmmsg, op::OP_SENDMMSG),
        (libc::SYS_recvmmsg, op::OP_RECVMMSG),
    ];
    if mappings {
        v.push((libc::SYS_mmap, op::OP_MMAP));
        v.push((libc::SYS_munmap, op::OP_MUNMAP));
        v.push((libc::SYS_mremap, op::OP_MREMAP));
    }
    // Newer architectures (aarch64, riscv) only have openat.
    #[cfg(target_arch = "x86_64")]
    {
        v.push((libc::SYS_open, op::OP_OPEN));
        v.push((libc::SYS_creat, op::OP_CREAT));
        // Not in the libc crate for x86_64 (asm/unistd_64.h: 333).
        v.push((333, op::OP_IO_PGETEVENTS));
    }
    v
}

/// The `sys_op` table for the BPF programs: number -> operation code.
pub fn table(mappings: bool) -> [u8; TABLE_LEN] {
    let mut t = [0u8; TABLE_LEN];
    for (nr, o) in traced(mappings) {
        t[nr as usize] = o.0 as u8;
    }
    t
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_has_every_op_once() {
        let t = super::table(true);
        let mut seen: Vec<u8> = t.iter().copied().filter(|&o| o != 0).collect();
        seen.sort();
        let n = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), n);
        assert_eq!(n, super::traced(true).len());
        assert_eq!(super::traced(false).len() + 3, n);
    }
}
