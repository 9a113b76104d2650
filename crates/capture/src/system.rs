//! Facts about this machine for the log header, clock readings, privileges.

use std::fs;

use mltrace_log::{ClockAnchor, DiskSnapshot, DiskStat};

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec; the clocks used here always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_BOOTTIME now: the clock of every record (`bpf_ktime_get_boot_ns`).
pub fn boottime_ns() -> u64 {
    clock_ns(libc::CLOCK_BOOTTIME)
}

/// Simultaneous BOOTTIME / REALTIME / MONOTONIC readings. REALTIME is read
/// between two BOOTTIME readings, several times; the tightest bracket wins.
pub fn clock_anchor() -> ClockAnchor {
    let mut best: Option<(u64, ClockAnchor)> = None;
    for _ in 0..5 {
        let b0 = boottime_ns();
        let real = clock_ns(libc::CLOCK_REALTIME);
        let mono = clock_ns(libc::CLOCK_MONOTONIC);
        let b1 = boottime_ns();
        let a = ClockAnchor { boottime_ns: b0 + (b1 - b0) / 2, realtime_ns: real, monotonic_ns: mono };
        if best.as_ref().is_none_or(|(w, _)| b1 - b0 < *w) {
            best = Some((b1 - b0, a));
        }
    }
    best.unwrap().1
}

fn read_trim(path: &str) -> String {
    fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

pub fn hostname() -> String {
    read_trim("/proc/sys/kernel/hostname")
}

pub fn kernel_release() -> String {
    read_trim("/proc/sys/kernel/osrelease")
}

pub fn boot_id() -> String {
    read_trim("/proc/sys/kernel/random/boot_id")
}

pub fn cpu_count() -> u32 {
    std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1)
}

/// CPUs in a list such as `0-3,8,10-11` (/sys/devices/system/cpu/online).
pub fn parse_cpu_list(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
            out.extend(a..=b.min(a.saturating_add(65535)));
        }
    }
    out
}

/// The CPUs online now, or why they cannot be read.
pub fn online_cpus() -> Result<Vec<u32>, String> {
    const ONLINE: &str = "/sys/devices/system/cpu/online";
    let list = fs::read_to_string(ONLINE).map_err(|e| format!("reading {ONLINE}: {e}"))?;
    let cpus = parse_cpu_list(&list);
    if cpus.is_empty() {
        return Err(format!("no CPUs in {ONLINE} ({:?})", list.trim()));
    }
    Ok(cpus)
}

/// Whether the `tp/` programs (page cache, io_uring, fault start) can
/// find their tracepoints' ids: libbpf reads them from tracefs, which is
/// root's alone (0700) whatever capabilities a binary has, and is not
/// mounted in every container or minimal VM.
#[derive(Clone, Debug, PartialEq)]
pub enum Tracefs {
    Ready,
    /// It was not mounted; mltrace mounted it here (it stays mounted).
    MountedNow(&'static str),
    /// Why it cannot be used.
    Unusable(String),
}

const TRACEFS: &str = "/sys/kernel/tracing";

pub fn tracefs() -> Tracefs {
    match tracefs_readable() {
        Some(Ok(())) => Tracefs::Ready,
        Some(Err(why)) => Tracefs::Unusable(why),
        // Not mounted where libbpf looks: mount it as `mount -t tracefs
        // nodev /sys/kernel/tracing` would (root, or CAP_SYS_ADMIN).
        None => match mount_tracefs() {
            Ok(()) if tracefs_readable().is_some() => Tracefs::MountedNow(TRACEFS),
            Ok(()) => Tracefs::Unusable(format!("tracefs mounted at {TRACEFS} but has no events")),
            Err(e) => Tracefs::Unusable(format!("tracefs is not mounted and mounting it at {TRACEFS} failed: {e}")),
        },
    }
}

/// `None` when no tracefs is mounted where libbpf looks; an error when one
/// is but this process may not read it.
fn tracefs_readable() -> Option<Result<(), String>> {
    let mut found = None;
    for dir in [TRACEFS, "/sys/kernel/debug/tracing"] {
        match std::fs::read_dir(format!("{dir}/events")) {
            Ok(_) => return Some(Ok(())),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                found.get_or_insert(Err(format!(
                    "tracefs cannot be read: {dir} is readable by root only (run as root)"
                )));
            }
            Err(_) => {}
        }
    }
    found
}

/// Whether tracefs has the tracepoint `group:name` (where libbpf looks).
pub fn tracepoint_exists(group: &str, name: &str) -> bool {
    [TRACEFS, "/sys/kernel/debug/tracing"]
        .iter()
        .any(|dir| std::path::Path::new(&format!("{dir}/events/{group}/{name}/id")).exists())
}

fn mount_tracefs() -> std::io::Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (src, target, fstype) = (c("nodev"), c(TRACEFS), c("tracefs"));
    // SAFETY: all three are NUL-terminated strings that outlive the call.
    let rc = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// (major, minor) of the running kernel.
pub fn kernel_version() -> Option<(u32, u32)> {
    let r = kernel_release();
    let mut it = r.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Parses /proc/diskstats (the 14-field, 18-field and 20-field layouts).
pub fn parse_diskstats(text: &str) -> Vec<DiskStat> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 14 {
                return None;
            }
            let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            Some(DiskStat {
                major: f[0].parse().ok()?,
                minor: f[1].parse().ok()?,
                name: f[2].to_string(),
                reads: n(3),
                read_sectors: n(5),
                writes: n(7),
                write_sectors: n(9),
                discards: n(14),
                discard_sectors: n(16),
                flushes: n(18),
            })
        })
        .collect()
}

/// /proc/diskstats between two BOOTTIME readings.
pub fn disk_snapshot() -> Option<DiskSnapshot> {
    let ts_before = boottime_ns();
    let text = fs::read_to_string("/proc/diskstats").ok()?;
    let ts_after = boottime_ns();
    Some(DiskSnapshot { ts_before, ts_after, disks: parse_diskstats(&text) })
}

pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_PERFMON: u32 = 38;
pub const CAP_BPF: u32 = 39;

/// The effective capability set of this process.
pub fn effective_caps() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0)
}

/// What is missing to load and attach tracing BPF programs; empty when
/// nothing is (root, or CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN on kernels
/// before 5.8).
pub fn missing_privileges() -> Vec<&'static str> {
    let caps = effective_caps();
    let has = |c: u32| caps & (1u64 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return vec![];
    }
    let mut missing = Vec::new();
    if !has(CAP_BPF) {
        missing.push("CAP_BPF");
    }
    if !has(CAP_PERFMON) {
        missing.push("CAP_PERFMON");
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), [0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpu_list("0"), [0]);
        assert!(parse_cpu_list("").is_empty());
        assert!(parse_cpu_list("x-y").is_empty());
    }

    #[test]
    fn anchor_is_consistent() {
        let a = clock_anchor();
        let b = clock_anchor();
        assert!(b.boottime_ns >= a.boottime_ns);
        // REALTIME and BOOTTIME advance together (no suspend within a test).
        let d_boot = b.boottime_ns as i128 - a.boottime_ns as i128;
        let d_real = b.realtime_ns as i128 - a.realtime_ns as i128;
        assert!((d_boot - d_real).abs() < 5_000_000, "{d_boot} vs {d_real}");
    }

    #[test]
    fn diskstats_layouts() {
        let t = " 253       0 vda 3507 1043 382342 1186 4109 3393 143824 6218 0 5548 8149 12 0 4608 3 90 741\n   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0\n";
        let d = parse_diskstats(t);
        assert_eq!(d.len(), 2);
        assert_eq!((d[0].major, d[0].minor, d[0].name.as_str()), (253, 0, "vda"));
        assert_eq!(
            (d[0].read_sectors, d[0].write_sectors, d[0].discard_sectors, d[0].flushes),
            (382342, 143824, 4608, 90)
        );
        assert_eq!(d[1].discards, 0);
        assert!(disk_snapshot().is_some());
    }

    #[test]
    fn kernel_version_parses() {
        let (maj, _) = kernel_version().unwrap();
        assert!(maj >= 4);
    }
}

/// Parses `/proc/PID/task/TID/io` into a record (`have` says which
/// counters the text held).
pub fn parse_proc_io(text: &str, ts: u64, pid: u32, tid: u32) -> Option<mltrace_log::IoAccounting> {
    use mltrace_log::{acct, AcctPoint, IoAccounting};
    let mut a = IoAccounting { ts, pid, tid, at: AcctPoint::End, ..Default::default() };
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else { continue };
        let Ok(v) = v.trim().parse::<u64>() else { continue };
        match k.trim() {
            "rchar" => a.rchar = v,
            "wchar" => a.wchar = v,
            "syscr" => a.syscr = v,
            "syscw" => a.syscw = v,
            "read_bytes" => a.read_bytes = v,
            "write_bytes" => a.write_bytes = v,
            "cancelled_write_bytes" => a.cancelled_write_bytes = v,
            _ => continue,
        }
        a.have |= if k.trim().ends_with("bytes") { acct::BYTES } else { acct::CHARS };
    }
    (a.have != 0).then_some(a)
}

/// The I/O counters of every thread of `pids` still alive, each from its
/// own `/proc/PID/task/TID/io` (the thread's counts, without its reaped
/// children's). Threads that end while this reads are skipped: their exit
/// was recorded in the kernel.
pub fn live_accounting(pids: &[u32]) -> Vec<mltrace_log::IoAccounting> {
    let mut out = Vec::new();
    for &pid in pids {
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            let ts = boottime_ns();
            if let Ok(text) = fs::read_to_string(format!("/proc/{pid}/task/{tid}/io")) {
                out.extend(parse_proc_io(&text, ts, pid, tid));
            }
        }
    }
    out
}

#[cfg(test)]
mod proc_io_tests {
    use super::*;

    #[test]
    fn parses_proc_io() {
        let text =
            "rchar: 1979\nwchar: 7\nsyscr: 6\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 0\ncancelled_write_bytes: 12\n";
        let a = parse_proc_io(text, 5, 10, 11).unwrap();
        assert_eq!((a.rchar, a.wchar, a.syscr, a.syscw), (1979, 7, 6, 1));
        assert_eq!((a.read_bytes, a.write_bytes, a.cancelled_write_bytes), (4096, 0, 12));
        assert_eq!(a.have, mltrace_log::acct::CHARS | mltrace_log::acct::BYTES);
        assert_eq!((a.ts, a.pid, a.tid, a.at), (5, 10, 11, mltrace_log::AcctPoint::End));
        // A kernel without CONFIG_TASK_XACCT shows only the byte counters.
        let b = parse_proc_io("read_bytes: 1\nwrite_bytes: 2\ncancelled_write_bytes: 3\n", 0, 1, 1).unwrap();
        assert_eq!(b.have, mltrace_log::acct::BYTES);
        assert!(parse_proc_io("", 0, 1, 1).is_none());
        assert!(parse_proc_io("garbage\nrchar: x\n", 0, 1, 1).is_none());
    }
}

/// The machine's page size (at least 4 KiB).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize
}
