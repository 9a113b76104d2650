//! How record fields are shown to people: sizes, errnos, open flags,
//! command lines. Shared by the exporters and `stats`.

use std::fmt::Write;

/// `64 KiB`, `1.5 MiB`, `512 B`: short, exact when it is a round number.
pub fn size(b: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if (v - v.round()).abs() < 1e-9 || v >= 100.0 {
        format!("{:.0} {}", v, UNITS[i])
    } else {
        format!("{:.1} {}", v, UNITS[i])
    }
}

/// The symbolic name of a Linux errno (`ENOENT`), or `E<n>`.
pub fn errno(e: i64) -> String {
    const NAMES: [&str; 134] = [
        "",
        "EPERM",
        "ENOENT",
        "ESRCH",
        "EINTR",
        "EIO",
        "ENXIO",
        "E2BIG",
        "ENOEXEC",
        "EBADF",
        "ECHILD",
        "EAGAIN",
        "ENOMEM",
        "EACCES",
        "EFAULT",
        "ENOTBLK",
        "EBUSY",
        "EEXIST",
        "EXDEV",
        "ENODEV",
        "ENOTDIR",
        "EISDIR",
        "EINVAL",
        "ENFILE",
        "EMFILE",
        "ENOTTY",
        "ETXTBSY",
        "EFBIG",
        "ENOSPC",
        "ESPIPE",
        "EROFS",
        "EMLINK",
        "EPIPE",
        "EDOM",
        "ERANGE",
        "EDEADLK",
        "ENAMETOOLONG",
        "ENOLCK",
        "ENOSYS",
        "ENOTEMPTY",
        "ELOOP",
        "E41",
        "ENOMSG",
        "EIDRM",
        "ECHRNG",
        "EL2NSYNC",
        "EL3HLT",
        "EL3RST",
        "ELNRNG",
        "EUNATCH",
        "ENOCSI",
        "EL2HLT",
        "EBADE",
        "EBADR",
        "EXFULL",
        "ENOANO",
        "EBADRQC",
        "EBADSLT",
        "E58",
        "EBFONT",
        "ENOSTR",
        "ENODATA",
        "ETIME",
        "ENOSR",
        "ENONET",
        "ENOPKG",
        "EREMOTE",
        "ENOLINK",
        "EADV",
        "ESRMNT",
        "ECOMM",
        "EPROTO",
        "EMULTIHOP",
        "EDOTDOT",
        "EBADMSG",
        "EOVERFLOW",
        "ENOTUNIQ",
        "EBADFD",
        "EREMCHG",
        "ELIBACC",
        "ELIBBAD",
        "ELIBSCN",
        "ELIBMAX",
        "ELIBEXEC",
        "EILSEQ",
        "ERESTART",
        "ESTRPIPE",
        "EUSERS",
        "ENOTSOCK",
        "EDESTADDRREQ",
        "EMSGSIZE",
        "EPROTOTYPE",
        "ENOPROTOOPT",
        "EPROTONOSUPPORT",
        "ESOCKTNOSUPPORT",
        "EOPNOTSUPP",
        "EPFNOSUPPORT",
        "EAFNOSUPPORT",
        "EADDRINUSE",
        "EADDRNOTAVAIL",
        "ENETDOWN",
        "ENETUNREACH",
        "ENETRESET",
        "ECONNABORTED",
        "ECONNRESET",
        "ENOBUFS",
        "EISCONN",
        "ENOTCONN",
        "ESHUTDOWN",
        "ETOOMANYREFS",
        "ETIMEDOUT",
        "ECONNREFUSED",
        "EHOSTDOWN",
        "EHOSTUNREACH",
        "EALREADY",
        "EINPROGRESS",
        "ESTALE",
        "EUCLEAN",
        "ENOTNAM",
        "ENAVAIL",
        "EISNAM",
        "EREMOTEIO",
        "EDQUOT",
        "ENOMEDIUM",
        "EMEDIUMTYPE",
        "ECANCELED",
        "ENOKEY",
        "EKEYEXPIRED",
        "EKEYREVOKED",
        "EKEYREJECTED",
        "EOWNERDEAD",
        "ENOTRECOVERABLE",
        "ERFKILL",
        "EHWPOISON",
    ];
    match e {
        512 => "ERESTARTSYS".into(),
        513 => "ERESTARTNOINTR".into(),
        514 => "ERESTARTNOHAND".into(),
        516 => "ERESTART_RESTARTBLOCK".into(),
        1..=133 if !NAMES[e as usize].starts_with("E4") && !NAMES[e as usize].starts_with("E5") => {
            NAMES[e as usize].into()
        }
        _ => format!("E{e}"),
    }
}

/// `O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC` for x86_64 open flags.
/// An io_uring opcode's name (linux/io_uring.h's IORING_OP_*, lower
/// case), or `opcode N` for one newer than this list.
pub fn uring_opcode(op: u8) -> String {
    const N: [&str; 49] = [
        "nop",
        "readv",
        "writev",
        "fsync",
        "read_fixed",
        "write_fixed",
        "poll_add",
        "poll_remove",
        "sync_file_range",
        "sendmsg",
        "recvmsg",
        "timeout",
        "timeout_remove",
        "accept",
        "async_cancel",
        "link_timeout",
        "connect",
        "fallocate",
        "openat",
        "close",
        "files_update",
        "statx",
        "read",
        "write",
        "fadvise",
        "madvise",
        "send",
        "recv",
        "openat2",
        "epoll_ctl",
        "splice",
        "provide_buffers",
        "remove_buffers",
        "tee",
        "shutdown",
        "renameat",
        "unlinkat",
        "mkdirat",
        "symlinkat",
        "linkat",
        "msg_ring",
        "fsetxattr",
        "setxattr",
        "fgetxattr",
        "getxattr",
        "socket",
        "uring_cmd",
        "send_zc",
        "sendmsg_zc",
    ];
    N.get(usize::from(op)).map_or_else(|| format!("opcode {op}"), |n| n.to_string())
}

pub fn open_flags(f: u32) -> String {
    let mut s = String::from(match f & 3 {
        0 => "O_RDONLY",
        1 => "O_WRONLY",
        2 => "O_RDWR",
        _ => "O_ACCMODE",
    });
    const BITS: [(u32, &str); 16] = [
        (0o100, "O_CREAT"),
        (0o200, "O_EXCL"),
        (0o400, "O_NOCTTY"),
        (0o1000, "O_TRUNC"),
        (0o2000, "O_APPEND"),
        (0o4000, "O_NONBLOCK"),
        (0o10000, "O_DSYNC"),
        (0o20000, "O_ASYNC"),
        (0o40000, "O_DIRECT"),
        (0o100000, "O_LARGEFILE"),
        (0o200000, "O_DIRECTORY"),
        (0o400000, "O_NOFOLLOW"),
        (0o1000000, "O_NOATIME"),
        (0o2000000, "O_CLOEXEC"),
        (0o10000000, "O_PATH"),
        (0o20000000, "O_TMPFILE_BIT"),
    ];
    let mut rest = f & !3;
    if rest & 0o4010000 == 0o4010000 {
        s.push_str("|O_SYNC");
        rest &= !0o4010000;
    }
    if rest & 0o20200000 == 0o20200000 {
        s.push_str("|O_TMPFILE");
        rest &= !0o20200000;
    }
    for (bit, name) in BITS {
        if rest & bit != 0 {
            s.push('|');
            s.push_str(name);
            rest &= !bit;
        }
    }
    if rest != 0 {
        let _ = write!(s, "|{rest:#o}");
    }
    s
}

/// Names of the set bits of `f` from `bits`, `|`-separated, after `out`'s
/// text; bits without a name as one hex number.
fn bit_names(out: &mut String, mut f: u32, bits: &[(u32, &str)]) {
    for (bit, name) in bits {
        if f & bit != 0 {
            if !out.is_empty() {
                out.push('|');
            }
            out.push_str(name);
            f &= !bit;
        }
    }
    if f != 0 {
        if !out.is_empty() {
            out.push('|');
        }
        let _ = write!(out, "{f:#x}");
    }
}

/// `PROT_READ|PROT_WRITE`, `PROT_NONE`.
pub fn mmap_prot(p: u32) -> String {
    const BITS: [(u32, &str); 3] = [(1, "PROT_READ"), (2, "PROT_WRITE"), (4, "PROT_EXEC")];
    if p == 0 {
        return "PROT_NONE".into();
    }
    let mut s = String::new();
    bit_names(&mut s, p, &BITS);
    s
}

/// `MAP_SHARED|MAP_POPULATE` (x86_64 values), with the huge page size of
/// `MAP_HUGETLB` (`MAP_HUGE_2MB`).
pub fn mmap_flags(f: u32) -> String {
    const BITS: [(u32, &str); 14] = [
        (0x10, "MAP_FIXED"),
        (0x20, "MAP_ANONYMOUS"),
        (0x40, "MAP_32BIT"),
        (0x100, "MAP_GROWSDOWN"),
        (0x800, "MAP_DENYWRITE"),
        (0x1000, "MAP_EXECUTABLE"),
        (0x2000, "MAP_LOCKED"),
        (0x4000, "MAP_NORESERVE"),
        (0x8000, "MAP_POPULATE"),
        (0x10000, "MAP_NONBLOCK"),
        (0x20000, "MAP_STACK"),
        (0x40000, "MAP_HUGETLB"),
        (0x80000, "MAP_SYNC"),
        (0x100000, "MAP_FIXED_NOREPLACE"),
    ];
    let mut s = String::from(match f & 0xf {
        1 => "MAP_SHARED",
        2 => "MAP_PRIVATE",
        3 => "MAP_SHARED_VALIDATE",
        _ => "",
    });
    // Bits 26-31 are the huge page size with MAP_HUGETLB.
    let huge = f >> 26;
    bit_names(&mut s, f & !0xf & ((1 << 26) - 1), &BITS);
    if huge != 0 {
        if !s.is_empty() {
            s.push('|');
        }
        if f & 0x40000 != 0 {
            s.push_str("MAP_HUGE_");
            s.push_str(&size(1u64 << huge.min(63)).replace([' ', 'i'], "").to_uppercase());
        } else if huge == 1 {
            s.push_str("MAP_UNINITIALIZED");
        } else {
            let _ = write!(s, "{:#x}", huge << 26);
        }
    }
    s
}

/// `MREMAP_MAYMOVE|MREMAP_FIXED`.
pub fn mremap_flags(f: u32) -> String {
    const BITS: [(u32, &str); 3] = [(1, "MREMAP_MAYMOVE"), (2, "MREMAP_FIXED"), (4, "MREMAP_DONTUNMAP")];
    if f == 0 {
        return "0".into();
    }
    let mut s = String::new();
    bit_names(&mut s, f, &BITS);
    s
}

/// The last component of a path, for slice names.
pub fn basename(p: &str) -> &str {
    let t = p.trim_end_matches('/');
    match t.rfind('/') {
        Some(i) => &t[i + 1..],
        None if t.is_empty() => p,
        None => t,
    }
}

/// A process name from its arguments: paths shortened to their last
/// component, at most `max` characters (`python train.py --epochs 10`).
pub fn command_name<S: AsRef<str>>(args: &[S], max: usize) -> String {
    let mut s = String::new();
    for (i, a) in args.iter().map(|a| a.as_ref()).filter(|a| !a.is_empty()).enumerate() {
        if i > 0 {
            s.push(' ');
        }
        // Only a path is shortened, not a script that happens to hold one.
        let path_like = a.contains('/') && !a.starts_with('-') && !a.contains(char::is_whitespace);
        s.push_str(if (i == 0 || path_like) && !a.contains(char::is_whitespace) { basename(a) } else { a });
    }
    if s.chars().count() > max {
        let cut: String = s.chars().take(max.saturating_sub(1)).collect();
        return cut + "…";
    }
    s
}

/// Whether a program (a command line, or its name) is a shell: what a
/// shell forks is a subshell (`$(...)`, a pipeline's stage), never a data
/// loader, even when the shell later execs the trainer (pyenv's shims,
/// conda run, a `train.sh` that ends in `exec python`).
pub fn is_shell(program: &str) -> bool {
    let first = program.split_whitespace().next().unwrap_or("");
    matches!(basename(first), "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "fish" | "busybox")
}

/// [`command_name`] of a NUL-separated argv.
pub fn command_line(argv: &[u8], max: usize) -> String {
    let args: Vec<String> = argv.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    command_name(&args, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(65536), "64 KiB");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 << 20), "3 MiB");
        assert_eq!(size(150 * 1024 + 7), "150 KiB");
    }

    #[test]
    fn uring_opcodes_match_the_record_codes() {
        for op in crate::UringOp::ALL.iter().filter(|o| **o != crate::UringOp::Other) {
            assert_eq!(uring_opcode(*op as u8), op.name());
        }
        assert_eq!(uring_opcode(0), "nop");
        assert_eq!(uring_opcode(200), "opcode 200");
    }

    #[test]
    fn errnos() {
        assert_eq!(errno(2), "ENOENT");
        assert_eq!(errno(13), "EACCES");
        assert_eq!(errno(28), "ENOSPC");
        assert_eq!(errno(133), "EHWPOISON");
        assert_eq!(errno(512), "ERESTARTSYS");
        assert_eq!(errno(41), "E41");
        assert_eq!(errno(999), "E999");
    }

    #[test]
    fn flags() {
        assert_eq!(open_flags(0), "O_RDONLY");
        assert_eq!(open_flags(0o2000000), "O_RDONLY|O_CLOEXEC");
        assert_eq!(open_flags(0o1101), "O_WRONLY|O_CREAT|O_TRUNC");
        assert_eq!(open_flags(0o4010002), "O_RDWR|O_SYNC");
        assert_eq!(open_flags(0o40000), "O_RDONLY|O_DIRECT");
        assert_eq!(mmap_prot(0), "PROT_NONE");
        assert_eq!(mmap_prot(5), "PROT_READ|PROT_EXEC");
        assert_eq!(mmap_prot(9), "PROT_READ|0x8");
        assert_eq!(mmap_flags(0x8001), "MAP_SHARED|MAP_POPULATE");
        assert_eq!(mmap_flags(0x812), "MAP_PRIVATE|MAP_FIXED|MAP_DENYWRITE");
        assert_eq!(mmap_flags(0x40022 | (21 << 26)), "MAP_PRIVATE|MAP_ANONYMOUS|MAP_HUGETLB|MAP_HUGE_2MB");
        assert_eq!(mmap_flags(0x40022 | (30 << 26)), "MAP_PRIVATE|MAP_ANONYMOUS|MAP_HUGETLB|MAP_HUGE_1GB");
        assert_eq!(mmap_flags(0x4000022), "MAP_PRIVATE|MAP_ANONYMOUS|MAP_UNINITIALIZED");
        assert_eq!(mmap_flags(0x200002), "MAP_PRIVATE|0x200000");
        assert_eq!(mremap_flags(3), "MREMAP_MAYMOVE|MREMAP_FIXED");
        assert_eq!(mremap_flags(0), "0");
    }

    #[test]
    fn commands() {
        assert_eq!(command_line(b"/usr/bin/python3\0train.py\0--epochs\x0010", 80), "python3 train.py --epochs 10");
        assert_eq!(basename("/a/b/c.bin"), "c.bin");
        assert_eq!(basename("/"), "/");
        assert_eq!(basename("pipe:[12]"), "pipe:[12]");
        assert_eq!(command_line(b"x\0aaaaaaaaaa", 5), "x aa…");
    }
}
