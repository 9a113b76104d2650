//! `mltrace record` on real processes with the real BPF programs, checked
//! against what the workload did and against the kernel's own counters.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use mltrace_log::*;
use mltrace_tests::*;

const DIRNAME: &str =
    "dir_with_a_rather_long_name_to_check_that_paths_are_not_cut_at_sixty_three_bytes_like_bpftrace_0123456789";
const FILENAME: &str = "file_whose_name_alone_is_longer_than_one_hundred_characters_so_the_absolute_path_is_far_beyond_any_small_limit_abcdefghij.bin";

struct Run {
    _tmp: tempfile::TempDir,
    work: std::path::PathBuf,
    log: std::path::PathBuf,
    kv: HashMap<String, i64>,
    recs: Vec<Rec>,
}

/// Records tests/workloads/known_io.c once.
fn known_io(extra: &[&str]) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload("known_io", tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let log = tmp.path().join("run.bin");
    let mut args = vec!["record", "-q", "-o", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(["--", bin.to_str().unwrap()]);
    let out = mltrace(&args, &work);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.contains("0 lost"), "{stderr}");
    let kv = key_values(&String::from_utf8_lossy(&out.stdout));
    let recs = read_log(&log);
    Run { work: work.canonicalize().unwrap(), _tmp: tmp, log, kv, recs }
}

fn is_read(r: &Record) -> bool {
    matches!(r, Record::Io(x) if !x.op.is_write()) || matches!(r, Record::Transfer(_))
}

fn is_write(r: &Record) -> bool {
    matches!(r, Record::Io(x) if x.op.is_write()) || matches!(r, Record::Transfer(_))
}

fn moved(r: &Record) -> u64 {
    match r {
        Record::Io(x) => x.ret.max(0) as u64,
        Record::Transfer(x) => x.ret.max(0) as u64,
        _ => 0,
    }
}

/// The process a record is about (the model's owner), else its `pid`
/// field (a thread's kernel counts, an untraced block request), else 0.
fn pid_of(r: &Record) -> u32 {
    r.owner().unwrap_or_else(|| {
        let mut pid = 0;
        r.visit(&mut |name, v| {
            if let ("pid", Value::U(x)) = (name, v) {
                pid = x as u32;
            }
        });
        pid
    })
}

/// (rchar, wchar, syscr, syscw) as the kernel would count them for `recs`.
fn io_counters<'a>(recs: impl Iterator<Item = &'a Rec>) -> [u64; 4] {
    let mut c = [0u64; 4];
    for r in recs {
        if is_read(&r.rec) {
            c[0] += moved(&r.rec);
            c[2] += 1;
        }
        if is_write(&r.rec) {
            c[1] += moved(&r.rec);
            c[3] += 1;
        }
    }
    c
}

fn snapshot(kv: &HashMap<String, i64>, tag: &str) -> [u64; 4] {
    ["rchar", "wchar", "syscr", "syscw"].map(|k| kv[&format!("{tag}_{k}")] as u64)
}

fn is_proc_io_read(r: &Rec) -> bool {
    matches!(r.rec, Record::Io(x) if !x.op.is_write()) && r.strs[0].starts_with("/proc/") && r.strs[0].ends_with("/io")
}

#[test]
fn known_io_is_recorded_exactly_and_matches_proc_pid_io() {
    let Some(_turn) = require_root!() else {
        return;
    };
    // `make test-kernels` may force the route for a whole run.
    let forced = std::env::var("MLTRACE_SYSCALL_PROBES").unwrap_or_default();
    let mechanism: &[&str] = match forced.as_str() {
        "compat" => &["raw_tp"],
        "per-call" => &["per-call tracepoints"],
        "trampoline" => &["fentry/fexit"],
        _ => &["tp_btf"],
    };
    check_known_io(known_io(&[]), mechanism);
}

/// The same on the route attached to each recorded call's tracepoints.
#[test]
fn known_io_on_the_per_call_route() {
    let Some(_turn) = require_root!() else {
        return;
    };
    check_known_io(known_io(&["--syscall-probes", "per-call"]), &["per-call tracepoints"]);
}

/// The per-call route's promise: a call mltrace does not record runs no
/// program. 200,000 lseek calls and 2,000 reads, recorded on each route
/// with the kernel counting program runs: the fast route's entry program
/// runs on every call, the per-call route's only on the reads (and the
/// machine's other recorded-kind calls, far fewer than the lseeks). Not
/// fstat: glibc's is newfstatat(fd, "", AT_EMPTY_PATH), and newfstatat is
/// a metadata call its per-call program looks at (and drops).
#[test]
fn the_per_call_route_runs_nothing_on_calls_it_does_not_record() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("calls.c");
    std::fs::write(
        &src,
        "#include <fcntl.h>\n#include <sys/stat.h>\n#include <unistd.h>\n\
         int main(void) { char b[16]; int fd = open(\"/proc/self/stat\", O_RDONLY);\n\
         for (int i = 0; i < 200000; i++) lseek(fd, 0, SEEK_SET);\n\
         for (int i = 0; i < 2000; i++) pread(fd, b, sizeof b, 0);\n return 0; }\n",
    )
    .unwrap();
    let bin = tmp.path().join("calls");
    assert!(Command::new("cc").arg("-O2").arg("-o").arg(&bin).arg(&src).status().unwrap().success());
    let sysctl = "/proc/sys/kernel/bpf_stats_enabled";
    let before = std::fs::read_to_string(sysctl).unwrap_or_default();
    std::fs::write(sysctl, "1").unwrap();
    let runs = |route: &str, prog: &str| -> u64 {
        let log = tmp.path().join(format!("{route}.bin"));
        let stats = tmp.path().join(format!("{route}.stats"));
        let out = Command::new(mltrace_bin())
            .args(["record", "-q", "--gpu", "off", "--sched", "off", "--syscall-probes", route, "-o"])
            .arg(&log)
            .arg("--")
            .arg(&bin)
            .env("MLTRACE_BPF_STATS", &stats)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let reads = read_log(&log)
            .iter()
            .filter(|r| matches!(r.rec, Record::Io(x) if x.op == IoOp::Pread64 && x.requested == 16))
            .count();
        assert_eq!(reads, 2000, "{route}: every pread recorded");
        let text = std::fs::read_to_string(&stats).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(prog)?.strip_prefix(' ')?.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("{route}: no {prog} in {text}"))
    };
    let fast = runs("fast", "fast_sys_enter");
    let per_call = runs("per-call", "call_enter");
    std::fs::write(sysctl, before.trim()).unwrap();
    eprintln!("entry program runs: fast route {fast}, per-call route {per_call}");
    assert!(fast >= 202_000, "the fast route's entry program ran {fast} times");
    assert!((2_000..50_000).contains(&per_call), "the per-call route's entry program ran {per_call} times");
}

/// The same on the route kernels before 5.11 take (raw_tp, hash maps).
#[test]
fn known_io_on_the_compat_route() {
    let Some(_turn) = require_root!() else {
        return;
    };
    check_known_io(known_io(&["--syscall-probes", "compat"]), &["raw_tp"]);
}

fn check_known_io(run: Run, mechanism: &[&str]) {
    let h = LogReader::open(&run.log).unwrap().header().clone();
    let on = |p: &mltrace_log::Probe| mechanism.iter().any(|m| p.mechanism.starts_with(m));
    assert!(h.probes.iter().any(|p| p.subsystem == "syscalls" && on(p)), "{mechanism:?}: {:?}", h.probes);
    let kv = &run.kv;
    let (pid, child) = (kv["pid"] as u32, kv["child_pid"] as u32);
    let thread = kv["thread_tid"] as u32;
    let file_abs = format!("{}/{DIRNAME}/{FILENAME}", run.work.display());
    let recs = &run.recs;

    // Process tree: the command, its thread, its child, exec and exits.
    let exec = recs.iter().find(|r| matches!(r.rec, Record::Exec(x) if x.pid == pid)).expect("exec record");
    assert!(exec.strs[0].ends_with("/known_io"), "{:?}", exec.strs);
    assert!(recs.iter().any(|r| r.rec
        == Record::Fork(match r.rec {
            Record::Fork(f) => Fork { pid, tid: thread, parent_pid: pid, parent_tid: pid, thread: true, ts: f.ts },
            _ => return false,
        })));
    assert!(recs.iter().any(
        |r| matches!(r.rec, Record::Fork(f) if f.pid == child && f.tid == child && f.parent_pid == pid && !f.thread)
    ));
    assert!(recs
        .iter()
        .any(|r| matches!(r.rec, Record::Exit(x) if x.pid == child && x.process_exit && x.status == 3 << 8)));
    assert!(recs.iter().any(|r| matches!(r.rec, Record::Exit(x) if x.pid == pid && x.process_exit && x.status == 0)));
    assert!(recs.iter().any(|r| matches!(r.rec, Record::Exit(x) if x.tid == thread && !x.process_exit)));

    // The pages its writes put in the page cache (5200 bytes: two 4 KiB
    // pages, one of 16 KiB), each once, inside the writes; its reads found
    // them cached.
    let mut filled: Vec<(u64, u64, CacheDuring, u32)> = recs
        .iter()
        .filter_map(|r| match r.rec {
            Record::PageCache(c) if r.strs[0] == file_abs => Some((c.offset, c.bytes, c.during, c.pid)),
            _ => None,
        })
        .collect();
    filled.sort_by_key(|f| f.0);
    // SAFETY: statfs on a path we own, into a zeroed struct.
    let tmpfs = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        let p = std::ffi::CString::new(run.work.to_str().unwrap()).unwrap();
        libc::statfs(p.as_ptr(), &mut st) == 0 && st.f_type == 0x0102_1994 // TMPFS_MAGIC
    };
    if tmpfs {
        assert!(filled.is_empty(), "tmpfs pages never pass the page-cache tracepoint: {filled:?}");
    } else {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        let pages: Vec<_> = (0..5200u64.div_ceil(page)).map(|i| (i * page, page, CacheDuring::Write, pid)).collect();
        assert_eq!(filled, pages);
    }

    // Every operation on the long-named file, in order, exactly.
    let on_file: Vec<&Rec> = recs
        .iter()
        .filter(|r| !matches!(r.rec, Record::PageCache(_)) && r.strs.iter().any(|s| s.ends_with(FILENAME)))
        .collect();
    let ops: Vec<String> = on_file
        .iter()
        .map(|r| match r.rec {
            Record::Open(o) => {
                assert_eq!(r.strs[1], file_abs, "absolute path");
                format!(
                    "{} open {} dirfd={} flags={:#o} mode={:#o} ok={}",
                    o.pid,
                    r.strs[0],
                    if o.dirfd == -100 { "cwd".into() } else { "dir".to_string() },
                    o.flags,
                    o.mode,
                    o.ret >= 0
                )
            }
            Record::Io(x) => {
                assert_eq!(r.strs[0], file_abs);
                let tid = if x.tid == thread {
                    "thread"
                } else if x.tid == pid {
                    "main"
                } else {
                    "child"
                };
                format!(
                    "{} {} {} req={} ret={} off={} ({})",
                    x.pid,
                    tid,
                    x.op.name(),
                    x.requested,
                    x.ret,
                    x.offset,
                    x.offset_src.name()
                )
            }
            Record::Close(x) => format!("{} close", x.pid),
            Record::Transfer(x) => {
                assert_eq!(r.strs[1], format!("{}/copy.bin", run.work.display()));
                format!("{} {} req={} ret={}", x.pid, x.op.name(), x.requested, x.ret)
            }
            _ => panic!("unexpected {:?}", r.rec),
        })
        .collect();
    let rel = format!("{DIRNAME}/{FILENAME}");
    let expect = vec![
        format!("{pid} open {rel} dirfd=cwd flags=0o1101 mode=0o640 ok=true"),
        format!("{pid} main write req=1000 ret=1000 off=0 (file position)"),
        format!("{pid} main pwrite64 req=200 ret=200 off=5000 (explicit)"),
        format!("{pid} main writev req=700 ret=700 off=1000 (file position)"),
        format!("{pid} close"),
        format!("{pid} open {FILENAME} dirfd=dir flags=0o0 mode=0o0 ok=true"),
        format!("{pid} main read req=100 ret=100 off=0 (file position)"),
        format!("{pid} main pread64 req=50 ret=50 off=10 (explicit)"),
        format!("{pid} main readv req=100 ret=100 off=100 (file position)"),
        format!("{pid} main preadv req=16 ret=16 off=4096 (explicit)"),
        format!("{pid} main read req=4096 ret=4096 off=200 (file position)"),
        format!("{pid} main read req=4096 ret=904 off=4296 (file position)"),
        format!("{pid} main read req=4096 ret=0 off=5200 (file position)"),
        format!("{pid} thread pread64 req=33 ret=33 off=1 (explicit)"),
        format!("{child} open {FILENAME} dirfd=dir flags=0o0 mode=0o0 ok=true"),
        format!("{child} child read req=777 ret=777 off=0 (file position)"),
        format!("{child} close"),
        format!("{pid} copy_file_range req=128 ret=128"),
        format!("{pid} close"),
    ];
    assert_eq!(ops, expect);

    // The failed relative open is resolved against the cwd.
    let failed = recs
        .iter()
        .find(|r| matches!(r.rec, Record::Open(o) if o.ret == -2) && r.strs[0] == "does/not/exist.txt")
        .expect("failed open");
    assert_eq!(
        failed.strs,
        vec!["does/not/exist.txt".to_string(), format!("{}/does/not/exist.txt", run.work.display())]
    );

    // Nothing from other processes (block I/O is recorded system-wide), nothing lost.
    assert!(recs.iter().all(|r| matches!(
        r.rec,
        Record::Lost(_) | Record::Block(_) | Record::Counter(_) | Record::SchedSwitch(SchedSwitch { traced: 0, .. })
    ) || [pid, child].contains(&pid_of(&r.rec))));
    assert!(!recs.iter().any(|r| matches!(r.rec, Record::Lost(_))));

    // The kernel's own accounting. The child started at zero (no exec):
    // its counters at its last snapshot equal everything traced before it.
    let child_recs: Vec<&Rec> = recs.iter().filter(|r| pid_of(&r.rec) == child).collect();
    let last = child_recs.iter().rposition(|r| is_proc_io_read(r)).unwrap();
    assert_eq!(io_counters(child_recs[..last].iter().copied()), snapshot(kv, "child_end"), "child");
    assert_eq!(snapshot(kv, "child_start"), [0; 4]);
    // The command's counters also hold what exec read inside the kernel
    // (no syscall sees that), so compare its two snapshots: the difference
    // is what the trace saw between them, plus the reaped child's totals,
    // which the kernel adds to its parent.
    let main_recs: Vec<&Rec> = recs.iter().filter(|r| pid_of(&r.rec) == pid).collect();
    let first = main_recs.iter().position(|r| is_proc_io_read(r)).unwrap();
    let last = main_recs.iter().rposition(|r| is_proc_io_read(r)).unwrap();
    let mut want = io_counters(main_recs[first..last].iter().copied());
    for (w, c) in want.iter_mut().zip(io_counters(child_recs.iter().copied())) {
        *w += c;
    }
    let (start, end) = (snapshot(kv, "start"), snapshot(kv, "end"));
    let got: Vec<u64> = end.iter().zip(start).map(|(e, s)| e - s).collect();
    assert_eq!(got, want.to_vec(), "command: (rchar, wchar, syscr, syscw) between its snapshots");
    assert!(start[2] > 0, "exec's own reads show in the first snapshot");

    // The Perfetto export, loaded by Perfetto's own importer.
    let Some(tp) = perfetto_tp() else { return };
    let trace = run.log.with_extension("perfetto-trace");
    let out = mltrace(&["export", run.log.to_str().unwrap(), "-o", trace.to_str().unwrap()], &run.work);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = tp_query(
        &tp,
        &trace,
        &[
            "select p.pid, p.name, count(*), sum(s.dur < 0) from slice s join thread_track t on s.track_id = t.id \
             join thread using(utid) join process p using(upid) group by p.pid order by p.pid",
            "select count(*) from slice where dur < 0",
            "select count(distinct s.id) from slice s join args a using(arg_set_id) \
             where a.string_value like '%/' || 'file_whose_name_alone%limit_abcdefghij.bin'",
        ],
    );
    let mut want_rows = Vec::new();
    for p in [pid, child] {
        let of = |f: &dyn Fn(&Record) -> bool| recs.iter().filter(|r| pid_of(&r.rec) == p && f(&r.rec)).count();
        // Lookups too (the dynamic loader's access of ld.so.preload).
        let opens = of(&|r| matches!(r, Record::Open(_) | Record::Close(_) | Record::MetaCall(_)));
        let reads = of(&|r| matches!(r, Record::Io(x) if !x.op.is_write()) || matches!(r, Record::Transfer(_)));
        let writes = of(&|r| matches!(r, Record::Io(x) if x.op.is_write()));
        // mmap and munmap of data files (ld.so.cache) too.
        let maps = drawn_mappings(recs, Some(p));
        // A child forked without exec is its parent's worker; each call
        // is on its thread's track.
        let name = if p == pid { "known_io".to_string() } else { "known_io worker 0".to_string() };
        want_rows.push(vec![p.to_string(), name, (opens + reads + writes + maps).to_string(), "0".into()]);
    }
    // The query's order: by pid (the child's is the smaller after pids wrap).
    want_rows.sort_by_key(|r| r[0].parse::<u32>().unwrap());
    assert_eq!(rows[0], want_rows);
    assert_eq!(rows[1], vec![vec!["0".to_string()]]);
    assert_eq!(rows[2], vec![vec![on_file.len().to_string()]], "every slice on the file carries its full path");
}

#[test]
fn exit_status_is_the_commands() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("r.bin");
    let l = log.to_str().unwrap();
    let out = mltrace(&["record", "-q", "-o", l, "--", "sh", "-c", "exit 7"], tmp.path());
    assert_eq!(out.status.code(), Some(7));
    let out = mltrace(&["record", "-q", "-f", "-o", l, "--", "sh", "-c", "kill -TERM $$"], tmp.path());
    assert_eq!(out.status.code(), Some(128 + 15));
    let recs = read_log(&log);
    assert!(recs.iter().any(|r| matches!(r.rec, Record::Exit(x) if x.process_exit && x.status == 15)));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("events in") && stderr.contains("written to"), "one-line summary: {stderr}");
}

#[test]
fn a_command_that_cannot_run_leaves_no_log() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("r.bin");
    let l = log.to_str().unwrap();
    let out = mltrace(&["record", "-q", "-o", l, "--", "no-such-command-for-mltrace"], tmp.path());
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("command not found"));
    let script = tmp.path().join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let out = mltrace(&["record", "-q", "-o", l, "--", script.to_str().unwrap()], tmp.path());
    assert_eq!(out.status.code(), Some(126));
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1, "only the script is left");
}

#[test]
fn a_mistyped_option_is_an_error_not_the_command() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("r.bin");
    let l = log.to_str().unwrap();
    let out = mltrace(&["record", "-o", l, "--detial", "summary", "--", "touch", "ran"], tmp.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("'--detial'") && !err.contains("command not found"), "{err}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "nothing ran, no log");
    let Some(_turn) = require_root!() else {
        return;
    };
    // The command's own options stay its own, with or without `--`.
    for args in [
        &["--", "sh", "-c", "echo \"$@\" > ran", "sh", "-u", "x"][..],
        &["sh", "-c", "echo \"$@\" > ran", "sh", "--lr", "1"],
    ] {
        let mut argv = vec!["record", "-q", "--gpu", "off", "-o", l, "--force"];
        argv.extend_from_slice(args);
        let out = mltrace(&argv, tmp.path());
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let want = args[args.len() - 2..].join(" ");
        assert_eq!(std::fs::read_to_string(tmp.path().join("ran")).unwrap().trim(), want);
    }
}

#[test]
fn without_privileges_one_clear_error_and_no_file() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let log = tmp.path().join("r.bin");
    // Drop to nobody with no capabilities, as an unprivileged user would run it.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"])
        .arg(mltrace_bin())
        .args(["record", "-o", log.to_str().unwrap(), "--", "true"])
        .output()
        .expect("setpriv (util-linux)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("needs root") && err.contains("CAP_BPF") && err.contains("CAP_PERFMON"), "{err}");
    assert_eq!(err.lines().count(), 2, "one message (two lines): {err}");
    assert!(!log.exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn unrelated_processes_are_not_recorded() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // A busy process started outside the recording.
    let mut busy = spawn(Command::new("sh").args(["-c", "while :; do cat /etc/hostname > /dev/null; done"]));
    let log = tmp.path().join("r.bin");
    let out = mltrace(
        &["record", "-q", "-o", log.to_str().unwrap(), "--", "sh", "-c", "sleep 0.3; cat /etc/hostname"],
        tmp.path(),
    );
    let _ = busy.kill();
    let _ = busy.wait();
    assert!(out.status.success());
    let recs = read_log(&log);
    let pids: std::collections::BTreeSet<u32> = recs
        .iter()
        .filter(|r| {
            !matches!(
                r.rec,
                Record::Lost(_)
                    | Record::Block(_)
                    | Record::Counter(_)
                    | Record::SchedSwitch(SchedSwitch { traced: 0, .. })
            )
        })
        .map(|r| pid_of(&r.rec))
        .collect();
    // sh, sleep and cat: three processes, all descendants of the command.
    assert_eq!(pids.len(), 3, "{pids:?}");
    assert!(!pids.contains(&busy.id()));
    let forks = recs.iter().filter(|r| matches!(r.rec, Record::Fork(f) if !f.thread)).count();
    assert_eq!(forks, 3);
    assert!(recs.iter().any(|r| matches!(&r.rec, Record::Io(x) if !x.op.is_write()) && r.strs[0] == "/etc/hostname"));
}

#[test]
fn non_files_are_named_by_kind() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload("fd_kinds", tmp.path());
    let log = tmp.path().join("r.bin");
    let mut child = spawn(
        Command::new(mltrace_bin())
            .args(["record", "-q", "-o", log.to_str().unwrap(), "--", bin.to_str().unwrap()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped()),
    );
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"!").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let kv = key_values(&String::from_utf8_lossy(&out.stdout));
    let recs = read_log(&log);
    let io_on = |fd: i64| -> (String, FileKind) {
        let r = recs
            .iter()
            .find(|r| matches!(r.rec, Record::Io(x) if i64::from(x.fd) == fd && x.ret == if fd == kv["eventfd"] { 8 } else { 1 }))
            .unwrap_or_else(|| panic!("no io on fd {fd}"));
        let Record::Io(x) = r.rec else { unreachable!() };
        (r.strs[0].clone(), x.kind)
    };
    let (stdin, kind) = io_on(0);
    assert!(stdin.starts_with("pipe:[") && kind == FileKind::Pipe, "{stdin}");
    assert_eq!(io_on(kv["eventfd"]), ("anon_inode:[eventfd]".into(), FileKind::AnonInode));
    assert_eq!(io_on(kv["memfd"]), ("memfd:weights".into(), FileKind::Memfd));
    let (sock, kind) = io_on(kv["socket"]);
    assert!(sock.starts_with("socket:[") && kind == FileKind::Socket, "{sock}");
    let (pipe, kind) = io_on(kv["pipe"]);
    assert!(pipe.starts_with("pipe:[") && pipe != stdin && kind == FileKind::Pipe, "{pipe}");
    assert_eq!(io_on(kv["null"]), ("/dev/null".into(), FileKind::CharDev));
    assert_eq!(io_on(kv["shm"]), ("/dev/shm/mltrace-test-shm".into(), FileKind::Regular));
}

#[test]
fn too_deep_paths_say_they_were_cut() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let deep: std::path::PathBuf = std::iter::repeat_n("d", 80).collect();
    std::fs::create_dir_all(tmp.path().join(&deep)).unwrap();
    let file = deep.join("leaf.txt");
    std::fs::write(tmp.path().join(&file), "x").unwrap();
    let log = tmp.path().join("r.bin");
    let out = mltrace(&["record", "-q", "-o", log.to_str().unwrap(), "--", "cat", file.to_str().unwrap()], tmp.path());
    assert!(out.status.success());
    let recs = read_log(&log);
    let open = recs
        .iter()
        .find(|r| matches!(r.rec, Record::Open(_)) && r.strs[0].ends_with("leaf.txt"))
        .expect("open of the deep file");
    let Record::Open(o) = open.rec else { unreachable!() };
    assert!(o.trunc & trunc::ABS != 0, "trunc flag set");
    assert!(open.strs[1].starts_with("...") && open.strs[1].ends_with("/d/d/d/leaf.txt"), "{}", open.strs[1]);
    // The path as passed is never cut.
    assert_eq!(open.strs[0], file.to_str().unwrap());
    let read = recs
        .iter()
        .find(|r| matches!(r.rec, Record::Io(x) if x.ret == 1 && !x.op.is_write()) && r.strs[0].ends_with("leaf.txt"))
        .unwrap();
    assert!(read.strs[0].starts_with("..."));
}

#[test]
fn sigterm_to_record_reaches_the_command() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("r.bin");
    let child = spawn(
        Command::new(mltrace_bin())
            .args(["record", "-q", "-o", log.to_str().unwrap(), "--", "sleep", "30"])
            .stderr(std::process::Stdio::piped()),
    );
    std::thread::sleep(std::time::Duration::from_millis(700));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed().as_secs() < 10, "sleep was not killed");
    assert_eq!(out.status.code(), Some(128 + 15), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = read_log(&log);
    assert!(recs.iter().any(|r| matches!(r.rec, Record::Exit(x) if x.process_exit && x.status == libc::SIGTERM)));
}

#[test]
fn doctor_reports_real_checks_and_the_probe_choice() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let out = mltrace(&["doctor"], Path::new("."));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let line =
        |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}: {text}")).to_string();
    // Every route is loaded for real, each reported on its own line.
    for route in ["per-call route", "fast route", "compat route"] {
        assert!(line(route).contains(" ok ") && line(route).contains("loaded and attached"), "{text}");
    }
    // The per-call route: two tracepoints per recorded call. This kernel
    // (6.18) has task storage: the fast route is chosen (the per-call one
    // is asked for).
    assert!(line("per-call route").contains(" per-call tracepoints (with"), "{text}");
    // The trampoline route where fentry loads (not on these VMs: the
    // route says why not); record takes the fast one either way.
    if line("fentry/fexit").contains(" ok ") {
        assert!(line("trampoline route").contains(" ok ") && line("trampoline route").contains("loaded and attached"));
    } else {
        assert!(line("trampoline route").contains("absent  needs BPF trampolines (fentry here:"), "{text}");
    }
    assert!(line("programs").contains(" ok ") && line("programs").contains("record uses the fast route"), "{text}");
    assert!(line("syscall probes").contains("tp_btf, per-task storage: sys_enter + sys_exit"), "{text}");
    // This kernel (6.18) has block_io_start: the 6.5+ route is chosen.
    assert!(line("block probes").contains("block_io_start, block_rq_issue, block_rq_complete"), "{text}");
    // This kernel (6.18) inserts large folios: the tracepoint has their order.
    assert!(line("page-cache probe").contains("filemap:mm_filemap_add_to_page_cache, PAGE_SIZE << order"), "{text}");
    // These machines have no kprobes: reported, not needed.
    assert!(line("kprobes").contains("absent"), "{text}");
    assert!(text.contains("mltrace record can run here."));

    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"])
        .arg(mltrace_bin())
        .arg("doctor")
        .current_dir("/")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.lines().any(|l| l.starts_with("privileges") && l.contains("FAIL") && l.contains("CAP_BPF")), "{text}");
    assert!(text.contains("cannot run here"));
}

#[test]
fn chrome_json_and_perfetto_exports_agree_on_a_recording() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(tp) = perfetto_tp() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("r.bin");
    let script = "for i in 1 2 3; do cat /etc/hostname /etc/passwd > /dev/null; done; \
                  dd if=/dev/zero of=x bs=64k count=8 oflag=direct 2>/dev/null; sleep 0.3";
    let out =
        mltrace(&["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--", "sh", "-c", script], tmp.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pf = tmp.path().join("r.perfetto-trace");
    let js = tmp.path().join("r.json");
    for (flag, path) in [("--perfetto", &pf), ("--chrome", &js)] {
        let out = mltrace(&["export", flag, log.to_str().unwrap(), "-o", path.to_str().unwrap()], tmp.path());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let q = [
        "select count(*), sum(dur < 0) from slice",
        "select count(*) from counter",
        "select count(*) from flow",
        "select distinct name from process where name is not null and pid < 1000000000 order by name",
    ];
    let a = tp_query(&tp, &pf, &q);
    let b = tp_query(&tp, &js, &q);
    assert_eq!(a[0], b[0], "slices");
    assert_eq!(a[0][0][1], "0");
    assert_eq!(a[1], b[1], "counter samples");
    assert_eq!(a[2], b[2], "flows");
    // JSON has one name per pid: a process shown before its exec under its
    // parent's name keeps only the exec'd name there.
    assert!(b[3].iter().all(|n| a[3].contains(n)), "{:?} vs {:?}", a[3], b[3]);
}

#[test]
fn file_names_stay_right_when_the_recorder_forgets_them() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload("forget", tmp.path());
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    let n = 300;
    for i in 0..n {
        std::fs::write(dir.join(i.to_string()), format!("{i}\n")).unwrap();
    }
    let keep = tmp.path().join("keep.txt");
    std::fs::write(&keep, "kept\n").unwrap();
    for route in ["fast", "compat"] {
        let log = tmp.path().join(format!("{route}.bin"));
        // A table of 16 names per generation: the child's files make it
        // forget the main thread's file between its two reads.
        let out = Command::new(mltrace_bin())
            .args(["record", "-q", "--gpu", "off", "--file-generation", "16", "--syscall-probes", route])
            .args(["-o", log.to_str().unwrap(), "--"])
            .arg(&bin)
            .args([keep.to_str().unwrap(), dir.to_str().unwrap(), &n.to_string(), "500"])
            .env("MLTRACE_DEBUG", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{route}: {err}");
        let forgotten: u64 = err
            .lines()
            .find_map(|l| l.strip_prefix("mltrace: debug: file names: "))
            .and_then(|l| l.split(", ").nth(1)?.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("{route}: no debug line: {err}"));
        assert!(forgotten >= n as u64 / 2, "{route}: {forgotten} forgotten");
        let recs = read_log(&log);
        assert!(recs.iter().all(|r| !matches!(r.rec, Record::Lost(_))), "{route}: losses");
        let keep_reads: Vec<&Rec> = recs
            .iter()
            .filter(|r| matches!(r.rec, Record::Io(x) if !x.op.is_write() && x.ret == 1))
            .filter(|r| !r.strs[0].starts_with(dir.to_str().unwrap()))
            .collect();
        assert_eq!(keep_reads.len(), 2, "{route}: {keep_reads:?}");
        assert!(keep_reads.iter().all(|r| r.strs[0] == keep.to_str().unwrap()), "{route}: {keep_reads:?}");
        // Each of the child's reads names its own file.
        for i in 0..n {
            let want = dir.join(i.to_string());
            assert!(
                recs.iter()
                    .any(|r| matches!(r.rec, Record::Io(x) if x.ret == 1) && r.strs[0] == want.to_str().unwrap()),
                "{route}: no read of {}",
                want.display()
            );
        }
    }
}

#[test]
fn files_used_by_other_tasks_and_in_turns_keep_their_names() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload("shared_fds", tmp.path());
    let files: Vec<std::path::PathBuf> = ["a.bin", "b.bin", "c.bin"].iter().map(|n| tmp.path().join(n)).collect();
    for (i, f) in files.iter().enumerate() {
        std::fs::write(f, vec![b'a' + i as u8; 8192]).unwrap();
    }
    for route in ["fast", "compat"] {
        let log = tmp.path().join(format!("{route}.bin"));
        let out = Command::new(mltrace_bin())
            .args(["record", "-q", "--gpu", "off", "--syscall-probes", route, "-o", log.to_str().unwrap(), "--"])
            .arg(&bin)
            .args(&files)
            .output()
            .unwrap();
        assert!(out.status.success(), "{route}: {}", String::from_utf8_lossy(&out.stderr));
        let kv = key_values(&String::from_utf8_lossy(&out.stdout));
        let recs = read_log(&log);
        let reads: Vec<&Rec> = recs
            .iter()
            .filter(|r| matches!(r.rec, Record::Io(x) if !x.op.is_write() && x.ret == 1024 && x.fd >= 3))
            .collect();
        assert_eq!(reads.len() as i64, kv["reads"], "{route}: {reads:?}");
        let count = |f: &Path| reads.iter().filter(|r| r.strs[0] == f.to_str().unwrap()).count();
        // The thread's 4, the child's 4, then 4 of each in turns.
        assert_eq!([count(&files[0]), count(&files[1]), count(&files[2])], [8, 4, 4], "{route}: {reads:?}");
        let pids: std::collections::HashSet<u32> =
            reads.iter().filter(|r| r.strs[0] == files[0].to_str().unwrap()).map(|r| pid_of(&r.rec)).collect();
        assert_eq!(pids.len(), 2, "{route}: the child's reads are its own");
    }
}

#[test]
fn absolute_paths_are_named_as_passed_and_others_as_the_kernel_resolves_them() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let real = root.join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::write(real.join("a.bin"), b"a").unwrap();
    std::fs::write(real.join("b.bin"), b"b").unwrap();
    std::fs::write(real.join("c.bin"), b"c").unwrap();
    std::os::unix::fs::symlink(&real, root.join("link")).unwrap();
    for route in ["fast", "compat"] {
        let log = root.join(format!("{route}.bin"));
        // a.bin through the symlinked directory with a "..", b.bin relative
        // to a cwd reached through the link, c.bin through /proc/self/fd.
        let script = format!(
            "cat {l}/../link/./a.bin; cd {l} && cat b.bin; exec 3<{r}/c.bin; cat /proc/self/fd/3",
            l = root.join("link").display(),
            r = real.display()
        );
        let out = Command::new(mltrace_bin())
            .args(["record", "-q", "--gpu", "off", "--syscall-probes", route, "-o", log.to_str().unwrap(), "--"])
            .args(["sh", "-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{route}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, b"abc");
        let recs = read_log(&log);
        let named = |passed: &str| -> Vec<String> {
            recs.iter()
                .filter(|r| matches!(r.rec, Record::Open(o) if o.ret >= 0) && r.strs[0] == passed)
                .map(|r| r.strs[1].clone())
                .collect()
        };
        let link = root.join("link");
        let a = format!("{}/../link/./a.bin", link.display());
        assert_eq!(named(&a), [link.join("a.bin").display().to_string()], "{route}: as passed, normalised");
        assert_eq!(named("b.bin"), [real.join("b.bin").display().to_string()], "{route}: resolved");
        assert_eq!(named("/proc/self/fd/3"), [real.join("c.bin").display().to_string()], "{route}: resolved");
        // cat writes each chunk to stdout between its reads: the file keeps
        // the name its open gave it (2 reads each: the byte, then EOF).
        for (name, want) in [(link.join("a.bin"), "a"), (real.join("b.bin"), "b")] {
            let reads: Vec<&Rec> = recs
                .iter()
                .filter(|r| {
                    matches!(r.rec, Record::Io(x) if !x.op.is_write() && x.fd >= 3)
                        && r.strs[0].ends_with(&format!("/{want}.bin"))
                })
                .collect();
            assert_eq!(reads.len(), 2, "{route}: {reads:?}");
            assert!(reads.iter().all(|r| r.strs[0] == name.display().to_string()), "{route}: {reads:?}");
        }
    }
}

/// Batched records: opens of every path length (so every record size,
/// 8-aligned or not) fill each CPU's batch to every possible end, with
/// reads and closes between. Every open, read byte and close the workload
/// counts itself is in the log, on every route, with nothing lost. (A batch
/// filled to exactly its bound was once sent empty, its records lost
/// without a count: a third of a Python loader's records.)
#[test]
fn opens_of_every_length_fill_batches_and_lose_nothing() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let script = tmp.path().join("opens.py");
    std::fs::write(
        &script,
        "import os, sys\n\
         d = sys.argv[1]\n\
         names = [os.path.join(d, 'f' * (i % 233 + 1) + str(i)) for i in range(1500)]\n\
         for i, n in enumerate(names):\n    open(n, 'wb').write(b'x' * (i % 97 + 1))\n\
         opened = got = 0\n\
         for _ in range(2):\n    for n in names:\n        with open(n, 'rb', buffering=0) as f:\n            opened += 1\n            while True:\n                b = f.read(65536)\n                if not b:\n                    break\n                got += len(b)\n\
         print('opened', opened)\nprint('bytes', got)\n",
    )
    .unwrap();
    for route in routes() {
        let log = tmp.path().join(format!("{route}.bin"));
        let out = Command::new(mltrace_bin())
            .args(["record", "-q", "--gpu", "off", "--syscall-probes", route, "-o"])
            .arg(&log)
            .arg("--")
            .arg(&py)
            .arg(&script)
            .arg(&dir)
            .output()
            .unwrap();
        let r = recorded(&out, log, tmp.path());
        let recs = read_log(&r.log);
        let under = |s: &str| s.starts_with(dir.to_str().unwrap());
        // The reading passes' opens (read-only), not the writing one's.
        let opens = recs
            .iter()
            .filter(|x| matches!(x.rec, Record::Open(o) if o.ret >= 0 && o.flags & 3 == 0) && under(&x.strs[1]))
            .count();
        let read: u64 = recs
            .iter()
            .filter(|x| matches!(x.rec, Record::Io(io) if !io.op.is_write()) && under(&x.strs[0]))
            .map(|x| match x.rec {
                Record::Io(io) => io.ret.max(0) as u64,
                _ => 0,
            })
            .sum();
        let closes = recs.iter().filter(|x| matches!(x.rec, Record::Close(_)) && under(&x.strs[0])).count();
        assert_eq!(opens as i64, r.kv["opened"], "{route}: opens");
        assert_eq!(read as i64, r.kv["bytes"], "{route}: bytes read");
        // Each file closed after writing and after each reading pass.
        assert_eq!(closes as i64, r.kv["opened"] * 3 / 2, "{route}: closes");
    }
}
