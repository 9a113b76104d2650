//! The kernel's own I/O accounting, recorded at every exec and thread
//! exit (and read from /proc for what outlives the command), checked
//! against the trace exactly, as `mltrace stats` checks it on every run.

use std::collections::HashMap;
use std::path::Path;

use mltrace_log::*;
use mltrace_tests::*;

struct Recorded {
    _tmp: tempfile::TempDir,
    log: std::path::PathBuf,
    kv: HashMap<String, i64>,
    recs: Vec<Rec>,
    stats: String,
    json: serde_json::Value,
}

fn record(workload: &str, args: impl Fn(&Path) -> Vec<String>, extra: &[&str]) -> Recorded {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload(workload, tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let log = tmp.path().join("run.bin");
    let mut cmd = vec!["record".to_string(), "-q".into(), "--gpu".into(), "off".into(), "-o".into()];
    cmd.push(log.to_str().unwrap().into());
    cmd.extend(extra.iter().map(|s| s.to_string()));
    cmd.push("--".into());
    cmd.push(bin.to_str().unwrap().into());
    cmd.extend(args(&work));
    let out = mltrace(&cmd.iter().map(String::as_str).collect::<Vec<_>>(), &work);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.contains("0 lost"), "{stderr}");
    let kv = key_values(&String::from_utf8_lossy(&out.stdout));
    let recs = read_log(&log);
    let st = mltrace(&["stats", log.to_str().unwrap()], &work);
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let stats = String::from_utf8_lossy(&st.stdout).into_owned();
    let js = mltrace(&["stats", "--json", log.to_str().unwrap()], &work);
    assert!(js.status.success(), "{}", String::from_utf8_lossy(&js.stderr));
    let json = serde_json::from_slice(&js.stdout).expect("stats --json is JSON");
    Recorded { _tmp: tmp, log, kv, recs, stats, json }
}

/// What the kernel counts, as (rchar, wchar, syscr, syscw).
type Counts = [u64; 4];

fn add(a: &mut Counts, b: Counts) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// Whether Linux (6.18, checked by hand with /proc/self/io) counts a
/// traced call that failed: the vectored calls count even a bad fd; read,
/// write, pread64 and pwrite64 return before counting on a bad fd or a
/// pipe (ESPIPE); sendfile and copy_file_range count nothing on a bad fd
/// or when nothing is asked; a read interrupted by the process's exit
/// (ERESTARTSYS) has reached the file and counts.
fn kernel_counts_failed(op: &str, ret: i64) -> bool {
    const EBADF: i64 = -9;
    const ESPIPE: i64 = -29;
    match op {
        "readv" | "writev" | "preadv" | "pwritev" | "preadv2" | "pwritev2" => true,
        "read" | "write" | "pread64" | "pwrite64" => ret != EBADF && ret != ESPIPE,
        _ => false,
    }
}

/// How many times this kernel counts a copy_file_range between two files
/// of the temporary directory in /proc/PID/io: once, or twice on kernels
/// whose splice fallback counts it again inside (5.10). Measured here,
/// untraced, on the same file system as the workload's files.
fn copy_file_range_counts() -> u64 {
    static TIMES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TIMES.get_or_init(|| {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in"), [7u8; 4096]).unwrap();
        let input = std::fs::File::open(dir.path().join("in")).unwrap();
        let output = std::fs::File::create(dir.path().join("out")).unwrap();
        let wchar = || {
            let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
            io.lines().find_map(|l| l.strip_prefix("wchar: ")).unwrap().trim().parse::<u64>().unwrap()
        };
        let before = wchar();
        // SAFETY: two open fds, no offsets passed.
        let n = unsafe {
            libc::syscall(
                libc::SYS_copy_file_range,
                input.as_raw_fd(),
                std::ptr::null_mut::<i64>(),
                output.as_raw_fd(),
                std::ptr::null_mut::<i64>(),
                1000usize,
                0u32,
            )
        };
        assert_eq!(n, 1000, "copy_file_range failed");
        (wchar() - before) / 1000
    })
}

/// The traced calls as the kernel counts them (see above).
fn traced_counts<'a>(recs: impl Iterator<Item = &'a Rec>) -> Counts {
    let mut c = [0u64; 4];
    for r in recs {
        match r.rec {
            Record::Io(x) => {
                let counted = x.ret >= 0 || kernel_counts_failed(x.op.name(), x.ret);
                let bytes = x.ret.max(0) as u64;
                match x.op {
                    IoOp::Read | IoOp::Pread64 | IoOp::Readv | IoOp::Preadv | IoOp::Preadv2 => {
                        add(&mut c, [bytes, 0, u64::from(counted), 0])
                    }
                    IoOp::Write | IoOp::Pwrite64 | IoOp::Writev | IoOp::Pwritev | IoOp::Pwritev2 => {
                        add(&mut c, [0, bytes, 0, u64::from(counted)])
                    }
                    _ => {}
                }
            }
            Record::Transfer(x) => {
                let times = if x.op == TransferOp::CopyFileRange { copy_file_range_counts() } else { 1 };
                let n = u64::from(x.ret > 0) * times;
                let bytes = x.ret.max(0) as u64 * times;
                add(&mut c, [bytes, bytes, n, n]);
            }
            _ => {}
        }
    }
    c
}

fn pid_of(r: &Record) -> Option<u32> {
    Some(match r {
        Record::Io(x) => x.pid,
        Record::Transfer(x) => x.pid,
        Record::Exec(x) => x.pid,
        Record::IoAccounting(x) => x.pid,
        _ => return None,
    })
}

/// Per process: the kernel's counts (threads' final counts minus their exec
/// baseline) and the trace's over the same span, from the raw records.
fn per_process(recs: &[Rec]) -> HashMap<u32, (Counts, Counts, bool)> {
    let mut out: HashMap<u32, (Counts, Counts, bool)> = HashMap::new();
    let mut base: HashMap<u32, Counts> = HashMap::new();
    let mut since: HashMap<u32, usize> = HashMap::new();
    for (i, r) in recs.iter().enumerate() {
        if let Record::IoAccounting(a) = r.rec {
            assert_eq!(a.have, acct::CHARS | acct::BYTES, "this kernel keeps every counter");
            let now = [a.rchar, a.wchar, a.syscr, a.syscw];
            let e = out.entry(a.pid).or_default();
            match a.at {
                AcctPoint::Exec => {
                    *e = Default::default();
                    base.insert(a.tid, now);
                    since.insert(a.pid, i);
                }
                AcctPoint::Exit | AcctPoint::End => {
                    let b = base.remove(&a.tid).unwrap_or_default();
                    for k in 0..4 {
                        e.0[k] += now[k] - b[k];
                    }
                    e.2 |= a.at == AcctPoint::End;
                }
            }
        }
    }
    for (pid, e) in out.iter_mut() {
        let from = since.get(pid).copied().unwrap_or(0);
        e.1 = traced_counts(recs[from..].iter().filter(|r| pid_of(&r.rec) == Some(*pid)));
    }
    out
}

fn check_mix(run: Recorded) {
    let (pid, child) = (run.kv["pid"] as u32, run.kv["child_pid"] as u32);
    let procs = per_process(&run.recs);
    // The command, the exec'd child, the short-lived fork and the grandchild
    // that outlives the command.
    assert_eq!(procs.len(), 4, "{procs:?}");
    for (p, (kernel, traced, alive)) in &procs {
        if *alive {
            // Read from /proc when the command ended, the grandchild then
            // blocked in (or just back from) its read of the closing pipe:
            // the trace holds everything counted by then, and that read
            // (0 bytes) at most once more.
            assert!(kernel[2] > 10 && kernel[3] > 10, "{p}: {kernel:?}");
            assert_eq!((kernel[0], kernel[1], kernel[3]), (traced[0], traced[1], traced[3]), "pid {p}");
            assert!(traced[2] - kernel[2] <= 1, "pid {p}: {kernel:?} {traced:?}");
            continue;
        }
        assert_eq!(kernel, traced, "pid {p}: (rchar, wchar, syscr, syscw) kernel vs trace");
        if [pid, child].contains(p) {
            assert!(kernel[2] > 50 && kernel[0] > 100_000, "pid {p} did its I/O: {kernel:?}");
        }
    }
    // The exec'd child: exec's own reads are in the kernel's count at exec,
    // not in what is compared.
    let exec_base = run
        .recs
        .iter()
        .find_map(|r| match r.rec {
            Record::IoAccounting(a) if a.pid == child && a.at == AcctPoint::Exec => Some(a),
            _ => None,
        })
        .expect("the child's counts at exec");
    assert!(exec_base.rchar > 0 && exec_base.syscr > 0, "{exec_base:?}");
    // Every thread's final counts: 4 workers, 2 killed inside read(), the main thread.
    let exits = run
        .recs
        .iter()
        .filter(|r| matches!(r.rec, Record::IoAccounting(a) if a.pid == pid && a.at == AcctPoint::Exit))
        .count();
    assert_eq!(exits, 7);
    // The two reads the exit interrupted are in the trace, and counted.
    let interrupted = run
        .recs
        .iter()
        .filter(|r| matches!(r.rec, Record::Io(x) if x.pid == pid && x.op == IoOp::Read && x.ret == -512))
        .count();
    assert_eq!(interrupted, 2);
    // stats says the same, with no warning.
    let s = &run.stats;
    assert!(!s.contains("MISMATCH") && !s.contains("differ from the trace"), "{s}");
    let section = s.split("kernel's own I/O accounting").nth(1).expect("the accounting table");
    let rows: Vec<&str> = section.lines().skip(2).take_while(|l| !l.is_empty()).collect();
    assert_eq!(rows.len(), 4, "{section}");
    assert_eq!(rows.iter().filter(|l| l.ends_with(" match")).count(), 3, "{section}");
    assert_eq!(rows.iter().filter(|l| l.ends_with(" alive at end")).count(), 1, "{section}");
    // And --json, for scripts: the kernel's numbers per process, the same.
    let js = run.json["processes"].as_array().unwrap();
    assert_eq!(js.len(), 4);
    for p in js {
        let (kernel, _, alive) = procs[&(p["pid"].as_u64().unwrap() as u32)];
        let k = &p["kernel"];
        let got = ["rchar", "wchar", "syscr", "syscw"].map(|n| k[n].as_u64().unwrap());
        assert_eq!(got, kernel, "{p}");
        assert_eq!(k["check"], if alive { "alive at end" } else { "match" }, "{p}");
        assert!(k["read_bytes"].is_u64() && k["write_bytes"].is_u64(), "{p}");
        // The page-cache, mapping and fault probes are on by default.
        assert!(p["storage_read_bytes"].is_u64() && p["mapped_bytes"].is_u64(), "{p}");
        assert!(p["major_faults"].is_u64(), "{p}");
    }
    let main = js.iter().find(|p| p["pid"] == pid).unwrap();
    assert_eq!(main["kernel"]["since"], "exec");
    let child = js.iter().find(|p| p["pid"] == child).unwrap();
    assert_eq!((child["parent"].as_u64(), child["kernel"]["since"].as_str()), (Some(u64::from(pid)), Some("exec")));
    assert_eq!(run.json["lost"], 0);
    assert!(run.json["warnings"].as_array().unwrap().is_empty());
}

fn mix_args(work: &Path) -> Vec<String> {
    vec![work.to_str().unwrap().to_string()]
}

#[test]
fn every_process_matches_the_kernels_own_counts() {
    let Some(_turn) = require_root!() else {
        return;
    };
    check_mix(record("acct_mix", mix_args, &[]));
}

#[test]
fn every_process_matches_the_kernels_own_counts_on_the_compat_route() {
    let Some(_turn) = require_root!() else {
        return;
    };
    check_mix(record("acct_mix", mix_args, &["--syscall-probes", "compat"]));
}

/// Three views agree: the child's own /proc/self/io, the kernel side's
/// reading at its exit, and the trace between them.
#[test]
fn the_exit_counts_continue_the_processs_own_proc_reading() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let run = record("known_io", |_| vec![], &[]);
    let child = run.kv["child_pid"] as u32;
    let own = ["rchar", "wchar", "syscr", "syscw"].map(|k| run.kv[&format!("child_end_{k}")] as u64);
    let exit = run
        .recs
        .iter()
        .find_map(|r| match r.rec {
            Record::IoAccounting(a) if a.pid == child && a.at == AcctPoint::Exit => Some(a),
            _ => None,
        })
        .expect("the child's counts at exit");
    // After its last reading of /proc/self/io (that read included: the
    // kernel fills the text before counting the read), the child wrote
    // its report: exactly what the trace shows.
    let child_recs: Vec<&Rec> = run.recs.iter().filter(|r| pid_of(&r.rec) == Some(child)).collect();
    let last_proc_read = child_recs
        .iter()
        .rposition(|r| matches!(r.rec, Record::Io(x) if !x.op.is_write()) && r.strs[0].ends_with("/io"))
        .unwrap();
    let mut want = own;
    add(&mut want, traced_counts(child_recs[last_proc_read..].iter().copied()));
    assert_eq!([exit.rchar, exit.wchar, exit.syscr, exit.syscw], want);
    let procs = per_process(&run.recs);
    for (p, (kernel, traced, _)) in &procs {
        assert_eq!(kernel, traced, "pid {p}");
    }
    assert!(run.stats.matches(" match\n").count() == 2, "{}", run.stats);
    let _ = &run.log;
}

/// A read the trace cannot see (the 32-bit entry) makes the check fail,
/// with the numbers.
#[test]
fn a_read_the_trace_missed_is_a_warning_with_the_numbers() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let run = record("untraced_read", |_| vec!["/etc/passwd".into()], &[]);
    let ret = run.kv["ret"];
    if ret == -38 {
        eprintln!("skipping: this kernel has no 32-bit system call entry (ENOSYS)");
        return;
    }
    assert_eq!(ret, 100);
    let warning = run.stats.lines().find(|l| l.starts_with("warning:")).unwrap_or_else(|| panic!("{}", run.stats));
    assert!(warning.contains("the kernel's I/O counts differ from the trace"), "{warning}");
    // "syscr: kernel K, traced T; rchar: kernel K, traced T": one call and its 100 bytes more.
    let num = |key: &str, side: &str| -> i64 {
        let after = warning.split(&format!("{key}: ")).nth(1).unwrap_or_else(|| panic!("{key} in {warning}"));
        let v = after.split(&format!("{side} ")).nth(1).unwrap();
        v.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    assert_eq!(num("syscr", "kernel") - num("syscr", "traced"), 1, "{warning}");
    assert_eq!(num("rchar", "kernel") - num("rchar", "traced"), 100, "{warning}");
    assert!(!warning.contains("syscw") && !warning.contains("wchar"), "{warning}");
    assert!(run.stats.contains("MISMATCH"), "{}", run.stats);
    let p = &run.json["processes"][0];
    assert_eq!(p["kernel"]["check"], "mismatch");
    assert_eq!(p["kernel"]["differences"].as_array().unwrap().len(), 2, "{p}");
    assert_eq!(run.json["warnings"].as_array().unwrap().len(), 1);
}
