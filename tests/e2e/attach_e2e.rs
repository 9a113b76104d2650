//! `record -p` and `record -a`: attaching to processes that are already
//! running, the kernel-side filters, and who may trace what.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mltrace_log::*;
use mltrace_tests::*;

/// A running `attach_reader` over `files`, started through `wrap` (e.g.
/// setpriv), once it said it is ready (its files are open before any
/// recording starts).
struct Reader {
    // Killed when the reader is dropped.
    _child: Spawned,
    pid: u32,
}

impl Reader {
    fn start(bin: &Path, files: &[&Path], wrap: &[&str]) -> Reader {
        let mut cmd = match wrap.split_first() {
            Some((w, rest)) => {
                let mut c = Command::new(w);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let mut child = spawn(cmd.args(files).stdout(Stdio::piped()));
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        let pid = child.id();
        Reader { _child: child, pid }
    }

    /// Still running (not exited, not a zombie), and still reading.
    fn alive_and_reading(&self) -> bool {
        let syscr = || {
            let io = std::fs::read_to_string(format!("/proc/{}/io", self.pid)).unwrap_or_default();
            io.lines().find_map(|l| l.strip_prefix("syscr: ")).and_then(|v| v.trim().parse::<u64>().ok())
        };
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        let state = stat.rsplit(')').next().and_then(|s| s.split_whitespace().next()).unwrap_or("?").to_string();
        let before = syscr();
        std::thread::sleep(Duration::from_millis(200));
        state != "Z" && state != "?" && before.is_some() && syscr() > before
    }
}

fn data_file(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, vec![7u8; 8192]).unwrap();
    p
}

fn record(args: &[&str], log: &Path) -> std::process::Output {
    let out = Command::new(mltrace_bin())
        .args(["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    out
}

fn header(log: &Path) -> Header {
    LogReader::open(log).unwrap().header().clone()
}

/// (pid, tid, path) of every read call in the log.
fn reads(recs: &[Rec]) -> Vec<(u32, u32, String)> {
    recs.iter()
        .filter_map(|r| match r.rec {
            Record::Io(io) if !io.op.is_write() => Some((io.pid, io.tid, r.strs[0].clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn attaching_records_reads_of_files_opened_before_and_leaves_the_process_running() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload("attach_reader", tmp.path());
    let data = data_file(tmp.path(), "data.bin");
    let reader = Reader::start(&bin, &[&data], &[]);
    let log = tmp.path().join("attach.bin");
    let t0 = Instant::now();
    let out = record(&["-p", &reader.pid.to_string(), "--duration", "2s"], &log);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(t0.elapsed() >= Duration::from_secs(2), "stopped before --duration");
    assert!(err.contains("stopped after --duration 2s"), "{err}");
    // Nothing was sent to it: it goes on reading.
    assert!(reader.alive_and_reading(), "the attached process stopped");

    let h = header(&log);
    let a = h.attach.as_ref().expect("the header says what was attached");
    assert_eq!((a.pids.clone(), a.all, a.duration_ns), (vec![reader.pid], false, Some(2_000_000_000)));
    assert_eq!(h.root_pid, reader.pid);
    assert_eq!(h.command.first().map(String::as_str), Some(bin.to_str().unwrap()));

    let recs = read_log(&log);
    let path = data.to_str().unwrap();
    let rd = reads(&recs);
    let main: Vec<_> = rd.iter().filter(|(p, t, _)| *p == reader.pid && *t == reader.pid).collect();
    let thread: Vec<_> = rd.iter().filter(|(p, t, _)| *p == reader.pid && *t != reader.pid).collect();
    // Every 5 ms for 2 s in each thread: about 400 each on an idle machine.
    assert!(main.len() >= 40 && thread.len() >= 40, "main thread {} reads, other thread {}", main.len(), thread.len());
    // The fd was opened before the attach: named all the same.
    assert!(main.iter().chain(&thread).all(|(_, _, p)| p == path), "{:?}", &main[..3]);
    assert!(!recs.iter().any(|r| matches!(r.rec, Record::Open(_))), "no open was recorded: it came before");
    // Children it started while recorded are followed (a fork every 300 ms).
    let kids: HashSet<u32> = recs
        .iter()
        .filter_map(|r| match r.rec {
            Record::Fork(f) if !f.thread && f.parent_pid == reader.pid => Some(f.pid),
            _ => None,
        })
        .collect();
    assert!(kids.len() >= 2, "children forked while recording: {kids:?}");
    assert!(rd.iter().any(|(p, _, f)| kids.contains(p) && f == path), "the children's reads");
    // Named by its comm (it has no exec in the log).
    assert!(recs
        .iter()
        .any(|r| matches!(r.rec, Record::Comm(c) if c.pid == reader.pid) && r.strs[0] == "attach_reader"));

    let json = mltrace(&["stats", "--json", log.to_str().unwrap()], tmp.path());
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["attach"]["pids"][0].as_u64(), Some(u64::from(reader.pid)));
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == reader.pid).unwrap().clone();
    assert_eq!(p["name"].as_str(), Some("attach_reader"));
    assert_eq!(p["kernel"]["check"].as_str(), Some("started before"), "{p}");
    let text = String::from_utf8_lossy(&mltrace(&["stats", log.to_str().unwrap()], tmp.path()).stdout).into_owned();
    assert!(text.contains(&format!("attached: record -p {} --duration 2s", reader.pid)), "{text}");

    // The trace: the attached process, named, with its reads on its threads.
    let trace = tmp.path().join("attach.perfetto-trace");
    let ex = mltrace(&["export", "-o", trace.to_str().unwrap(), log.to_str().unwrap()], tmp.path());
    assert!(ex.status.success(), "{}", String::from_utf8_lossy(&ex.stderr));
    if let Some(tp) = perfetto_tp() {
        let q = format!(
            "select count(distinct t.tid) from slice s join thread_track tt on s.track_id = tt.id \
             join thread t using(utid) join process p using(upid) \
             where p.pid = {} and p.name like '%attach_reader%' and s.name like 'pread64%'",
            reader.pid
        );
        let rows = tp_query(&tp, &trace, &[&q]);
        assert_eq!(rows[0][0][0], "2", "both threads' reads in the trace: {rows:?}");
    }
}

#[test]
fn a_signal_or_the_processes_exiting_stops_an_attached_recording() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload("attach_reader", tmp.path());
    let data = data_file(tmp.path(), "data.bin");
    let reader = Reader::start(&bin, &[&data], &[]);
    let log = tmp.path().join("int.bin");
    let rec = spawn(
        Command::new(mltrace_bin())
            .args(["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "-p", &reader.pid.to_string()])
            .stderr(Stdio::piped()),
    );
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling the recorder we started.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let out = rec.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("stopped by a signal"), "{err}");
    assert!(reader.alive_and_reading(), "Ctrl-C reached the attached process");
    assert!(!reads(&read_log(&log)).is_empty());

    // The process ends while recorded: so does the recording.
    let log = tmp.path().join("exit.bin");
    let pid = reader.pid;
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: the workload this test started.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    });
    let t0 = Instant::now();
    let out = record(&["-p", &pid.to_string(), "--duration", "60s"], &log);
    killer.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("the traced processes exited"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(30), "waited for the duration");
    let recs = read_log(&log);
    assert!(recs.iter().any(|r| matches!(r.rec, Record::Exit(e) if e.pid == pid && e.process_exit)));
}

#[test]
fn all_with_comm_records_only_the_named_program() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload("attach_reader", tmp.path());
    let named = tmp.path().join("mlt_named");
    let other = tmp.path().join("mlt_other");
    std::fs::copy(&bin, &named).unwrap();
    std::fs::copy(&bin, &other).unwrap();
    let a = data_file(tmp.path(), "a.bin");
    let b = data_file(tmp.path(), "b.bin");
    let rn = Reader::start(&named, &[&a], &[]);
    let ro = Reader::start(&other, &[&b], &[]);
    for route in ["auto", "compat"] {
        let log = tmp.path().join(format!("all-{route}.bin"));
        let out = record(
            &["-a", "--comm", "mlt_named", "--duration", "1500ms", "--syscall-probes", route, "--sample-interval", "0"],
            &log,
        );
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let h = header(&log);
        let at = h.attach.clone().unwrap();
        assert!(at.all && at.comm.as_deref() == Some("mlt_named") && at.pids.is_empty(), "{at:?}");
        let recs = read_log(&log);
        let rd = reads(&recs);
        let pids: HashSet<u32> = recs
            .iter()
            .filter_map(|r| match r.rec {
                Record::Io(x) => Some(x.pid),
                Record::Open(x) => Some(x.pid),
                Record::Close(x) => Some(x.pid),
                Record::Mapping(x) => Some(x.pid),
                Record::Comm(x) => Some(x.pid),
                Record::Exec(x) => Some(x.pid),
                _ => None,
            })
            .collect();
        // Only the named program and the children it forked (named like it).
        let kids: HashSet<u32> = recs
            .iter()
            .filter_map(|r| match r.rec {
                Record::Fork(f) if f.parent_pid == rn.pid => Some(f.pid),
                _ => None,
            })
            .collect();
        assert!(pids.iter().all(|p| *p == rn.pid || kids.contains(p)), "{route}: other processes: {pids:?}");
        assert!(!pids.contains(&ro.pid) && !pids.contains(&h.recorder_pid), "{route}");
        let n = rd.iter().filter(|(p, _, f)| *p == rn.pid && f == a.to_str().unwrap()).count();
        assert!(n >= 30, "{route}: {n} reads of the named program");
        assert!(recs.iter().any(|r| matches!(r.rec, Record::Comm(c) if c.pid == rn.pid) && r.strs[0] == "mlt_named"));
    }
    assert!(rn.alive_and_reading() && ro.alive_and_reading());
}

#[test]
fn path_prefix_keeps_only_file_events_under_it() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload("attach_reader", tmp.path());
    let keep = data_file(tmp.path(), "keep/in.bin");
    // A sibling whose name starts like the prefix is not under it.
    let near = data_file(tmp.path(), "keepsake.bin");
    let out_of = data_file(tmp.path(), "other/out.bin");
    let reader = Reader::start(&bin, &[&keep, &near, &out_of], &[]);
    let prefix = tmp.path().join("keep");
    for route in ["auto", "compat"] {
        let log = tmp.path().join(format!("path-{route}.bin"));
        let out = Command::new(mltrace_bin())
            .args(["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--syscall-probes", route])
            .args(["-p", &reader.pid.to_string(), "--path", prefix.to_str().unwrap(), "--duration", "1500ms"])
            .env("MLTRACE_DEBUG", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{route}: {err}");
        let recs = read_log(&log);
        let files: Vec<&String> = recs
            .iter()
            .filter(|r| matches!(r.rec, Record::Io(_) | Record::Open(_) | Record::Close(_) | Record::PageCache(_)))
            .flat_map(|r| r.strs.iter())
            .collect();
        let kept = files.iter().filter(|f| f.as_str() == keep.to_str().unwrap()).count();
        assert!(kept >= 30, "{route}: {kept} events on the kept file");
        let outside = files.iter().find(|f| !f.starts_with(&format!("{}/", prefix.display())));
        assert!(outside.is_none(), "{route}: {outside:?}");
        // The reads of the two other files (as many as the kept one's) were
        // dropped in the kernel: user space saw hardly any.
        let in_user_space: u64 = err
            .lines()
            .find_map(|l| l.split("; ").nth(1)?.strip_suffix(" file events left out by --path in user space"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{route}: no debug line: {err}"));
        assert!(in_user_space < kept as u64 / 4, "{route}: {in_user_space} left out in user space, {kept} kept");
        assert_eq!(header(&log).attach.unwrap().path.as_deref(), prefix.to_str());
        let json = mltrace(&["stats", "--json", log.to_str().unwrap()], tmp.path());
        let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let p = v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == reader.pid).unwrap().clone();
        assert_eq!(p["kernel"]["check"].as_str(), Some("path filter"), "{p}");
    }
}

/// A user who is not root (made if missing): (uid, gid).
fn test_user() -> (u32, u32) {
    const NAME: &str = "mltrace-test";
    if passwd(NAME).is_none() {
        let st = Command::new("useradd")
            .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", NAME])
            .status()
            .expect("useradd (passwd package)");
        assert!(st.success(), "useradd {NAME}");
    }
    passwd(NAME).unwrap()
}

fn passwd(name: &str) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&name)).then(|| (f[2].parse().unwrap(), f[3].parse().unwrap()))
    })
}

#[test]
fn with_capabilities_a_user_may_watch_only_their_own_processes() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let (uid, gid) = test_user();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The binary as a user would install it for use without sudo.
    let bin = tmp.path().join("mltrace");
    std::fs::copy(mltrace_bin(), &bin).unwrap();
    let st = Command::new("setcap").args(["cap_bpf,cap_perfmon+ep"]).arg(&bin).status().expect("setcap (libcap2-bin)");
    assert!(st.success());
    let outdir = tmp.path().join("out");
    std::fs::create_dir(&outdir).unwrap();
    std::fs::set_permissions(&outdir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let reader_bin = compile_workload("attach_reader", tmp.path());
    std::fs::set_permissions(&reader_bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = data_file(tmp.path(), "data.bin");
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o644)).unwrap();
    let ids = [format!("--reuid={uid}"), format!("--regid={gid}")];
    let as_user: Vec<&str> = vec!["setpriv", &ids[0], &ids[1], "--clear-groups"];
    let run = |args: &[&str], log: &Path| {
        Command::new(as_user[0])
            .args(&as_user[1..])
            .arg(&bin)
            .args(["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap()
    };
    let roots = Reader::start(&reader_bin, &[&data], &[]);
    let own = Reader::start(&reader_bin, &[&data], &as_user);

    // Another user's process (root's): refused, by pid and name, no log.
    let log = outdir.join("refused.bin");
    let out = run(&["-p", &format!("{},{}", own.pid, roots.pid), "--duration", "1s"], &log);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("-p {} (attach_reader): not permitted", roots.pid)) && err.contains("uid 0"),
        "{err}"
    );
    assert!(!log.exists(), "a refusal leaves no log");
    // The whole machine, or a cgroup: only root.
    for args in [
        &["-a", "--duration", "1s"][..],
        &["-a", "--cgroup", "/", "--duration", "1s"],
        &["-a", "--comm", "attach_reader"],
    ] {
        let out = run(args, &log);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("needs root"), "{args:?}: {err}");
        assert!(!log.exists());
    }
    assert_eq!(std::fs::read_dir(&outdir).unwrap().count(), 0);
    assert!(roots.alive_and_reading());

    // Their own process: recorded, with the capabilities alone. The probes
    // that need tracefs (root's only) are left out, and record says so.
    // Root writes to disk meanwhile: the disk's requests are shown, not
    // whose they are.
    let log = outdir.join("own.bin");
    let sink = tmp.path().join("root-writes.bin");
    let mut writer = spawn(Command::new("sh").arg("-c").arg(format!(
        "while :; do dd if=/dev/zero of={} bs=64k count=64 oflag=direct 2>/dev/null; done",
        sink.display()
    )));
    let out = run(&["-p", &own.pid.to_string(), "--duration", "1s"], &log);
    let _ = writer.kill();
    let _ = writer.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("tracefs cannot be read"), "{err}");
    // Kernel threads' (writeback, journal) keep their names: no user's.
    let blocks: Vec<u32> = read_log(&log)
        .into_iter()
        .filter_map(|r| match r.rec {
            Record::Block(b) if b.flags & mltrace_log::blk::KTHREAD == 0 => Some(b.pid),
            _ => None,
        })
        .collect();
    assert!(blocks.contains(&0), "root's direct writes show as requests of no one: {blocks:?}");
    assert!(blocks.iter().all(|&p| p == 0 || p == own.pid), "{blocks:?}");
    let rd = reads(&read_log(&log));
    assert!(rd.iter().filter(|(p, _, f)| *p == own.pid && f == data.to_str().unwrap()).count() >= 20);
    assert!(!rd.iter().any(|(p, _, _)| *p == roots.pid));
    assert!(own.alive_and_reading());

    // Their process runs a setuid program (passwd, as root, reads
    // /etc/shadow): traced up to its exec, not after. Root sees it all.
    let script = format!(
        "echo ready; while :; do cat {} >/dev/null; /usr/bin/passwd -S >/dev/null 2>&1; sleep 0.05; done",
        data.display()
    );
    let mut sh =
        spawn(Command::new(as_user[0]).args(&as_user[1..]).args(["/bin/sh", "-c", &script]).stdout(Stdio::piped()));
    let mut line = String::new();
    BufReader::new(sh.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let off = ["--page-cache", "off", "--io-uring", "off", "--mappings", "off"];
    let execs = |log: &Path| -> (Vec<String>, bool) {
        let recs = read_log(log);
        let execs = recs.iter().filter(|r| matches!(r.rec, Record::Exec(_))).map(|r| r.strs[0].clone()).collect();
        (execs, recs.iter().any(|r| r.strs.iter().any(|s| s.contains("shadow"))))
    };
    let log = outdir.join("setuid.bin");
    let mut args = vec!["-p".to_string(), sh.id().to_string(), "--duration".into(), "1500ms".into()];
    args.extend(off.iter().map(|s| s.to_string()));
    let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>(), &log);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (user_execs, user_shadow) = execs(&log);
    let root_log = tmp.path().join("setuid-root.bin");
    let out = record(&args.iter().map(String::as_str).collect::<Vec<_>>(), &root_log);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (root_execs, _) = execs(&root_log);
    let _ = sh.kill();
    let _ = sh.wait();
    assert!(user_execs.iter().any(|e| e.ends_with("/cat")), "{user_execs:?}");
    assert!(!user_execs.iter().any(|e| e.contains("passwd")) && !user_shadow, "{user_execs:?}");
    assert!(root_execs.iter().any(|e| e == "/usr/bin/passwd"), "root's recording sees it: {root_execs:?}");
}

#[test]
fn all_with_cgroup_records_only_the_processes_in_it() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let root = mounts
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .expect("a cgroup v2 mount");
    let name = format!("mltrace-test-{}", std::process::id());
    let cg = TestCgroup(root.join(&name));
    std::fs::create_dir(&cg.0).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let bin = compile_workload("attach_reader", tmp.path());
    let a = data_file(tmp.path(), "a.bin");
    let b = data_file(tmp.path(), "b.bin");
    let inside = Reader::start(&bin, &[&a], &[]);
    let outside = Reader::start(&bin, &[&b], &[]);
    std::fs::write(cg.0.join("cgroup.procs"), inside.pid.to_string()).unwrap();
    let log = tmp.path().join("cg.bin");
    // As /proc/PID/cgroup shows it: relative to the mount.
    let out = record(&["-a", "--cgroup", &format!("/{name}"), "--duration", "1500ms", "--sample-interval", "0"], &log);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = read_log(&log);
    let rd = reads(&recs);
    let pids: HashSet<u32> = rd.iter().map(|r| r.0).collect();
    let kids: HashSet<u32> = recs
        .iter()
        .filter_map(|r| match r.rec {
            Record::Fork(f) if f.parent_pid == inside.pid => Some(f.pid),
            _ => None,
        })
        .collect();
    assert!(pids.iter().all(|p| *p == inside.pid || kids.contains(p)), "{pids:?}");
    assert!(rd.iter().filter(|r| r.0 == inside.pid && r.2 == a.to_str().unwrap()).count() >= 30);
    assert!(!pids.contains(&outside.pid));
    assert_eq!(header(&log).attach.unwrap().cgroup, Some(format!("/{name}")));
    // A cgroup that does not exist: one error, no log.
    let log = tmp.path().join("none.bin");
    let out = record(&["-a", "--cgroup", "/no-such-cgroup-here"], &log);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--cgroup /no-such-cgroup-here: no such cgroup"), "{err}");
    assert!(!log.exists());
    drop(inside);
}

/// Who may trace what: recording as a user (the binary given
/// cap_bpf,cap_perfmon), the traced command runs a setuid-root helper
/// that reads a file only root may read, and a program with cap_setuid
/// that reads a file, calls setuid(), then reads another. Nothing of the
/// helper, nor of the program after setuid(), is in the log; the stop of
/// each is, with what came before it; `stats` says so. As root, the same
/// command is recorded whole.
#[test]
fn a_process_that_becomes_another_user_is_let_go() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let (uid, gid) = test_user();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.join("mltrace");
    std::fs::copy(mltrace_bin(), &bin).unwrap();
    let setcap = |caps: &str, file: &Path| {
        let st = Command::new("setcap").arg(caps).arg(file).status().expect("setcap (libcap2-bin)");
        assert!(st.success(), "setcap {caps} {}", file.display());
    };
    setcap("cap_bpf,cap_perfmon+ep", &bin);
    let become_bin = compile_workload("become", dir);
    // The helper: setuid root. The dropper: may setuid().
    let helper = dir.join("suid-helper");
    let dropper = dir.join("dropper");
    for (copy, mode) in [(&helper, 0o4755), (&dropper, 0o755)] {
        std::fs::copy(&become_bin, copy).unwrap();
        std::fs::set_permissions(copy, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    setcap("cap_setuid+ep", &dropper);
    let secret = dir.join("root-only-secret");
    std::fs::write(&secret, b"only root may read this\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (before, after) = (dir.join("before-setuid.txt"), dir.join("after-setuid.txt"));
    for f in [&before, &after] {
        std::fs::write(f, vec![b'x'; 5000]).unwrap();
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let outdir = dir.join("out");
    std::fs::create_dir(&outdir).unwrap();
    std::fs::set_permissions(&outdir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let script = format!(
        "{} read {} && {} drop {} {} 65534",
        helper.display(),
        secret.display(),
        dropper.display(),
        before.display(),
        after.display()
    );
    let ids = [format!("--reuid={uid}"), format!("--regid={gid}")];
    let record = |as_user: bool, log: &Path, route: &[&str]| {
        let mut c = if as_user {
            // Before 5.11 BPF memory counts against RLIMIT_MEMLOCK (after,
            // the memory cgroup): a user recording there needs it raised
            // (limits.conf), as the two capabilities cannot.
            let mut c = Command::new(if memlock_counts() { "prlimit" } else { "setpriv" });
            if memlock_counts() {
                c.args(["--memlock=unlimited:unlimited", "setpriv"]);
            }
            c.args([&ids[0], &ids[1], "--clear-groups"]).arg(&bin);
            // The per-call route names its tracepoints in tracefs, which
            // only root reads: a user's recording takes the fast route
            // (`make test-kernels` forcing per-call means it here).
            if std::env::var("MLTRACE_SYSCALL_PROBES").as_deref() == Ok("per-call") {
                c.env("MLTRACE_SYSCALL_PROBES", "fast");
            }
            c
        } else {
            Command::new(mltrace_bin())
        };
        c.args(["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap()]).args(route);
        c.args(["--", "/bin/sh", "-c", &script]);
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("read 24"), "the helper read the secret: {err}");
        (read_log(log), err)
    };
    // The shell's own command line names both files: not what it did.
    let mentions = |recs: &[Rec], p: &Path| {
        let p = p.to_str().unwrap();
        recs.iter().filter(|r| !matches!(r.rec, Record::Exec(_)) && r.strs.iter().any(|s| s.contains(p))).count()
    };
    let marks = |recs: &[Rec]| -> Vec<(u32, String)> {
        recs.iter()
            .filter_map(|r| match r.rec {
                Record::Mark(m) if r.strs.first().map(String::as_str) == Some(labels::UNTRACED_MARK) => {
                    Some((m.pid, r.strs[1].clone()))
                }
                _ => None,
            })
            .collect()
    };

    for route in [&[][..], &["--syscall-probes", "compat"]] {
        let log = outdir.join(format!("user{}.bin", route.len()));
        let (recs, err) = record(true, &log, route);
        assert_eq!(mentions(&recs, &secret), 0, "the setuid helper's open of the secret is not recorded");
        assert_eq!(mentions(&recs, &after), 0, "nothing after setuid() is recorded");
        assert!(mentions(&recs, &before) >= 1, "what the program did before setuid() is");
        let m = marks(&recs);
        assert_eq!(m.len(), 2, "{m:?}");
        let helper_name = helper.file_name().unwrap().to_str().unwrap();
        let want = format!("became uid 0 (setuid exec of {}): not recorded from here", helper.display());
        assert!(m.iter().any(|(_, t)| t.contains(helper_name) && t.contains(&want)), "{m:?}");
        assert!(m.iter().any(|(_, t)| t.contains("became uid 65534 (setuid()): not recorded from here")), "{m:?}");
        // No record of either process after its stop: not an exec, a read, a switch.
        for (pid, _) in &m {
            let stop = recs.iter().find_map(|r| match r.rec {
                Record::Mark(k) if k.pid == *pid => Some(k.ts),
                _ => None,
            });
            let later: Vec<&Rec> = recs
                .iter()
                .filter(|r| !matches!(r.rec, Record::Mark(_) | Record::Exit(_) | Record::IoAccounting(_)))
                .filter(|r| r.rec.owner() == Some(*pid) && r.rec.ts() > stop.unwrap())
                .collect();
            assert!(
                later.is_empty(),
                "pid {pid} after its stop: {:?}",
                later.iter().map(|r| r.rec).collect::<Vec<_>>()
            );
        }
        assert!(err.contains(&want), "the recorder says so: {err}");
        let o = mltrace(&["stats", log.to_str().unwrap()], dir);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains(&format!("let go:   {helper_name} [")), "{text}");
        let o = mltrace(&["stats", "--json", log.to_str().unwrap()], dir);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["untraced"].as_array().unwrap().len(), 2, "{}", v["untraced"]);
    }

    // Root may trace anything: the same command, recorded whole.
    let (recs, _) = record(false, &dir.join("root.bin"), &[]);
    assert!(mentions(&recs, &secret) >= 1, "root's recording has the helper's open");
    assert!(mentions(&recs, &after) >= 1, "and the read after setuid()");
    assert!(marks(&recs).is_empty());
}

/// Whether this kernel charges BPF memory to RLIMIT_MEMLOCK (before 5.11).
fn memlock_counts() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = release.trim().split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse::<u32>().ok());
    (v.next().unwrap_or(99), v.next().unwrap_or(99)) < (5, 11)
}
