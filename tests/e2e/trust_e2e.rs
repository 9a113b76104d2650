//! What users must be able to trust: logs that survive a killed recorder, a
//! full disk and damage; losses counted and shown; signals and exit codes;
//! privileges and the output file under sudo.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mltrace_log::*;
use mltrace_tests::*;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn no_panic(o: &std::process::Output) {
    let e = stderr(o);
    assert!(!e.contains("panicked"), "{e}");
}

/// The byte offsets of every frame in a log.
fn frame_offsets(bytes: &[u8]) -> Vec<usize> {
    (0..bytes.len().saturating_sub(44))
        .filter(|&i| {
            &bytes[i..i + 4] == b"MLTF" && frame::FrameHeader::decode(bytes[i..i + 44].try_into().unwrap()).is_some()
        })
        .collect()
}

fn storm(dir: &Path) -> (PathBuf, PathBuf) {
    let bin = compile_workload("storm", dir);
    let data = dir.join("data.bin");
    std::fs::write(&data, b"x").unwrap();
    (bin, data)
}

#[test]
fn a_killed_recorder_leaves_a_readable_log() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (bin, data) = storm(tmp.path());
    let log = tmp.path().join("run.bin");
    // A command that keeps making events; the recorder is killed under it.
    let mut rec = spawn(
        Command::new(mltrace_bin())
            .args(["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--"])
            .arg(&bin)
            .args([data.to_str().unwrap(), "100000000", "10"])
            .current_dir(tmp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    // Wait until frames with the command's events are on disk, however
    // busy the machine is, then kill.
    let t0 = Instant::now();
    let grown = || std::fs::symlink_metadata(&log).map(|m| m.len() > 200_000).unwrap_or(false);
    while !grown() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    rec.kill().unwrap(); // SIGKILL: no chance to finish the log
    rec.wait().unwrap();
    let _ = Command::new("pkill").args(["-KILL", "-f", bin.to_str().unwrap()]).status();
    // The log is where it was asked for, private, and nothing else is left.
    let meta = std::fs::symlink_metadata(&log).expect("the cut log is at -o");
    assert!(meta.is_file());
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777, 0o600);
    let mut names: Vec<String> =
        std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, vec!["data.bin", "run.bin", "storm"]);
    // stats reads it and says it was cut, and when.
    let out = mltrace(&["stats", log.to_str().unwrap()], tmp.path());
    no_panic(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the log was cut") && text.contains("events up to +"), "{text}");
    // Everything up to the last complete frame exports, and it says so once.
    let trace = tmp.path().join("cut.perfetto-trace");
    let out = mltrace(&["export", log.to_str().unwrap(), "-o", trace.to_str().unwrap()], tmp.path());
    no_panic(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out).matches("the log was cut").count(), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("events up to +"), "{}", stderr(&out));
    let mut r = LogReader::open(&log).unwrap();
    let mut reads = 0u64;
    while let Some(mut f) = r.next_frame().unwrap() {
        while let Some(rec) = f.next_record() {
            reads += u64::from(matches!(rec, Record::Io(_)));
        }
    }
    assert!(reads > 10_000, "{reads} reads before the kill");
    let d = r.take_diagnostics();
    assert!(matches!(d[..], [Diagnostic::Cut { last_ts: Some(_), .. }]), "{d:?}");
    if let Some(tp) = perfetto_tp() {
        let rows = tp_query(&tp, &trace, &["select count(*) from slice where dur < 0"]);
        assert_eq!(rows[0], vec![vec!["0".to_string()]]);
    }
}

#[test]
fn frames_are_written_often_enough_that_a_kill_loses_little() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("run.bin");
    // The samplers make records every 100 ms: each frame holds some.
    let out = mltrace(&["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--", "sleep", "3.5"], tmp.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(&log).unwrap();
    let ends: Vec<u64> = frame_offsets(&bytes)
        .iter()
        .map(|&i| frame::FrameHeader::decode(bytes[i..i + 44].try_into().unwrap()).unwrap())
        .filter(|h| h.kind == frame::FrameKind::Records as u8)
        .map(|h| h.last_ts)
        .collect();
    // A frame at least every second (the recorder's FLUSH_INTERVAL).
    assert!(ends.len() >= 3, "{} frames in 3.5 s", ends.len());
    // What a kill loses is the time since the last frame (with slack for
    // a busy machine).
    let gap = ends.windows(2).map(|w| w[1].saturating_sub(w[0])).max().unwrap();
    assert!(gap < 1_600_000_000, "{} ms between frames", gap / 1_000_000);
}

#[test]
fn a_log_cut_inside_its_only_frame_is_an_error_naming_the_cut() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("run.bin");
    let out = mltrace(&["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--", "true"], tmp.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(&log).unwrap();
    let first = frame_offsets(&bytes)[0];
    let h = frame::FrameHeader::decode(bytes[first..first + 44].try_into().unwrap()).unwrap();
    let cut = first + 44 + h.payload_len as usize / 2;
    let missing = 44 + h.payload_len as usize - (cut - first);
    std::fs::write(&log, &bytes[..cut]).unwrap();
    let l = log.to_str().unwrap();
    let o = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let runs: [Vec<String>; 6] = [
        vec!["stats".into(), l.into()],
        vec!["stats".into(), "--json".into(), l.into()],
        vec!["export".into(), l.into(), "-o".into(), o("t.pftrace")],
        vec!["export".into(), "--parquet".into(), l.into(), "-o".into(), o("t.parquet")],
        vec!["report".into(), l.into(), "-o".into(), o("t.html")],
        vec!["dump".into(), l.into()],
    ];
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = mltrace(&args, tmp.path());
        no_panic(&out);
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {e}");
        assert!(e.contains("run.bin: nothing readable"), "{args:?}: {e}");
        assert!(e.contains(&format!("cut at byte {cut}, {missing} of the")), "{args:?}: {e}");
        // (The first event may precede the header's clock reading: -0.004 s.)
        assert!(e.contains(&format!("its {} events from ", h.records)), "{args:?}: {e}");
    }
    for name in ["t.pftrace", "t.html"] {
        assert!(!tmp.path().join(name).exists(), "{name} written from an unreadable log");
    }
}

#[test]
fn a_damaged_frame_is_skipped_and_named() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (bin, data) = storm(tmp.path());
    let log = tmp.path().join("run.bin");
    let out = Command::new(mltrace_bin())
        .args(["record", "-q", "--gpu", "off", "--frame-records", "5000", "-o", log.to_str().unwrap(), "--"])
        .arg(&bin)
        .args([data.to_str().unwrap(), "30000", "50"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let mut bytes = std::fs::read(&log).unwrap();
    let frames = frame_offsets(&bytes);
    assert!(frames.len() >= 5, "{} frames", frames.len());
    let victim = frames[2];
    bytes[victim + 44 + 100] ^= 0xff; // inside the compressed payload
    std::fs::write(&log, &bytes).unwrap();
    let out =
        mltrace(&["export", log.to_str().unwrap(), "-o", tmp.path().join("t.pftrace").to_str().unwrap()], tmp.path());
    no_panic(&out);
    assert!(out.status.success());
    let e = stderr(&out);
    assert!(e.contains(&format!("at offset {victim}")) && e.contains("checksum mismatch"), "{e}");
    assert!(e.contains("events from +") && e.contains(" to +"), "the lost time span: {e}");
    let out = mltrace(&["stats", log.to_str().unwrap()], tmp.path());
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("warning:  skipped"));
}

#[test]
fn input_that_is_not_a_log_is_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let good = {
        let mut w = RecordWriter::new(Vec::new(), &Header::default()).unwrap();
        w.push(&Record::Lost(Lost { ts: 1, kind: LostKind::RingFull, count: 1 })).unwrap();
        w.finish(&Trailer::default()).unwrap()
    };
    let mut newer = good.clone();
    newer[8] = 9;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.bin", vec![], "empty"),
        ("short.bin", good[..12].to_vec(), "cut short"),
        ("garbage.bin", vec![0x9c; 4000], "not an mltrace log"),
        ("trace.perfetto-trace", vec![0x0a, 0x05, 0x08, 0x01, 0x10, 0x02, 0x18], "Perfetto"),
        ("newer.bin", newer, "not supported by this mltrace"),
    ];
    for (name, bytes, expect) in cases {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        for cmd in ["export", "stats", "dump"] {
            let out = mltrace(&[cmd, p.to_str().unwrap()], dir);
            no_panic(&out);
            let e = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{cmd} {name}: {e}");
            assert!(e.contains(name) && e.contains(expect), "{cmd} {name}: {e}");
        }
    }
}

#[test]
fn a_full_disk_stops_capture_but_not_the_command() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (bin, data) = storm(tmp.path());
    let small = tmp.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let st = Command::new("mount").args(["-t", "tmpfs", "-o", "size=96k", "tmpfs"]).arg(&small).status().unwrap();
    assert!(st.success());
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(small.clone());
    let log = small.join("run.bin");
    let done = tmp.path().join("done");
    let script = format!("{} {} 400000 50 && echo ok > {}", bin.display(), data.display(), done.display());
    let out = Command::new(mltrace_bin())
        .args([
            "record",
            "-q",
            "--gpu",
            "off",
            "--frame-records",
            "2000",
            "-o",
            log.to_str().unwrap(),
            "--",
            "sh",
            "-c",
        ])
        .arg(&script)
        .output()
        .unwrap();
    no_panic(&out);
    let e = stderr(&out);
    // The command ran to its end and its status is ours.
    assert_eq!(out.status.code(), Some(0), "{e}");
    assert!(done.exists(), "the command was not killed");
    assert!(e.contains("writing the log failed") && e.contains("No space left on device"), "{e}");
    assert_eq!(e.matches("writing the log failed").count(), 2, "once when it happens, once in the summary: {e}");
    // What was written reads, up to where the disk filled.
    let out = mltrace(&["stats", log.to_str().unwrap()], tmp.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the log was cut"), "{text}");
}

#[test]
fn forced_drops_are_counted_located_and_shown() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (bin, data) = storm(tmp.path());
    let log = tmp.path().join("run.bin");
    let n = 200_000u64;
    // A one-page ring and a burst: the consumer cannot keep up.
    let out = Command::new(mltrace_bin())
        .args(["record", "-q", "--gpu", "off", "--sample-interval", "0", "--block-probes", "off", "--ring-size", "4k"])
        // Only the syscalls: losses are counted by cause, not by kind of event.
        .args(["--sched", "off"])
        .args(["-o", log.to_str().unwrap(), "--"])
        .arg(&bin)
        .args([data.to_str().unwrap(), &n.to_string()])
        .output()
        .unwrap();
    let e = stderr(&out);
    assert!(out.status.success(), "{e}");
    let recs = read_log(&log);
    // The fence read (2 bytes asked) comes 300 ms before the burst; losses
    // of the command's start-up (a one-page ring overflows there too) are
    // reported within 100 ms of happening, before the burst.
    let fence = recs
        .iter()
        .find_map(|r| if let Record::Io(x) = r.rec { (x.requested == 2).then_some(x.ts) } else { None })
        .expect("the fence read was recorded");
    let burst = recs.iter().filter(|r| matches!(r.rec, Record::Io(x) if x.requested == 1)).count() as u64;
    let lost: u64 = recs
        .iter()
        .filter_map(
            |r| if let Record::Lost(l) = r.rec { (l.ts > fence + 200_000_000).then_some(l.count) } else { None },
        )
        .sum();
    let all_lost: u64 =
        recs.iter().filter_map(|r| if let Record::Lost(l) = r.rec { Some(l.count) } else { None }).sum();
    assert!(lost > 0 && burst < n, "lost {lost}, recorded {burst}");
    // Every event of the burst is either in the log or counted as lost.
    assert_eq!(burst + lost, n, "recorded {burst} + lost {lost}");
    // Only the full ring loses events; at start-up it may also drop the
    // record naming a file, so a later use counts as "file path unknown",
    // but not in the burst, whose file the fence named.
    let other: Vec<Lost> = recs
        .iter()
        .filter_map(|r| match r.rec {
            Record::Lost(l) if l.kind == LostKind::UnknownFile && l.ts < fence => None,
            Record::Lost(l) if l.kind != LostKind::RingFull => Some(l),
            _ => None,
        })
        .collect();
    assert!(other.is_empty(), "losses other than a full ring: {other:?} (fence at {fence})");
    // Shown: in the summary, in stats, and in the export where it happened.
    let lost = all_lost;
    let unknown: u64 = recs
        .iter()
        .filter_map(|r| match r.rec {
            Record::Lost(l) if l.kind == LostKind::UnknownFile => Some(l.count),
            _ => None,
        })
        .sum();
    // By kind, in either order.
    let shows = |text: &str, total: &str| {
        text.contains(total)
            && text.contains(&format!("{} ring buffer full", lost - unknown))
            && (unknown == 0 || text.contains(&format!("{unknown} file path unknown")))
    };
    assert!(shows(&e, &format!("{lost} lost (")), "{e}");
    let out = mltrace(&["stats", log.to_str().unwrap()], tmp.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(shows(&text, &format!("lost {lost} (")), "{text}");
    let trace = tmp.path().join("t.perfetto-trace");
    let out = mltrace(&["export", log.to_str().unwrap(), "-o", trace.to_str().unwrap()], tmp.path());
    assert!(stderr(&out).contains(&format!("lost {lost} events")), "{}", stderr(&out));
    let Some(tp) = perfetto_tp() else { return };
    let rows = tp_query(
        &tp,
        &trace,
        &[
            "select max(c.value) from counter c join counter_track t on c.track_id = t.id \
             where t.name = 'mltrace: lost events · total'",
            "select count(*) from slice where name like '% events lost: ring buffer full'",
        ],
    );
    assert_eq!(rows[0][0][0].parse::<f64>().unwrap() as u64, lost);
    assert!(rows[1][0][0].parse::<u64>().unwrap() >= 1);
}

#[test]
fn sigterm_reaches_the_commands_process_group() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let pids = tmp.path().join("pids");
    let log = tmp.path().join("run.bin");
    // Not on a terminal: the command gets its own group, and a SIGTERM sent
    // to mltrace reaches the command's children too.
    let script = format!("sleep 60 & A=$!; sleep 60 & B=$!; echo $A $B > {}; wait", pids.display());
    let child = spawn(
        Command::new(mltrace_bin())
            .args(["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let t0 = Instant::now();
    while !pids.exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{}", stderr(&out));
    for p in std::fs::read_to_string(&pids).unwrap().split_whitespace() {
        let gone = !Path::new(&format!("/proc/{p}")).exists()
            || std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default().contains(") Z");
        assert!(gone, "sleep {p} survived");
    }
}

#[test]
fn a_second_interrupt_stops_recording_at_once() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("run.bin");
    let pidfile = tmp.path().join("pid");
    // A command that ignores SIGINT and would run for a minute.
    let script = format!("trap '' INT; echo $$ > {}; sleep 60", pidfile.display());
    // stderr to a file: the command inherits it and outlives the recorder.
    let err_path = tmp.path().join("stderr");
    let mut child = spawn(
        Command::new(mltrace_bin())
            .args(["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stderr(std::fs::File::create(&err_path).unwrap()),
    );
    let t0 = Instant::now();
    while !pidfile.exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    }
    let stopping = Instant::now();
    let status = child.wait().unwrap();
    assert!(stopping.elapsed() < Duration::from_secs(5));
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("stopped before the command ended"), "{err}");
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", pid.trim())]).status();
    let mut r = LogReader::open(&log).unwrap();
    while r.next_frame().unwrap().is_some() {}
    let t = r.trailer().expect("a finished log").clone();
    assert!(t.stopped_early.is_some() && t.exit_status.is_none());
}

#[test]
fn under_sudo_the_command_runs_as_the_caller_who_owns_the_log() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let log = tmp.path().join("run.bin");
    let nobody = (65534u32, 65534u32);
    let out = Command::new(mltrace_bin())
        .args(["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--", "sh", "-c"])
        .arg("id -u; id -g; id -G; echo $HOME; echo $USER; grep -E '^Sig(Ign|Blk)' /proc/self/status")
        .env("SUDO_UID", nobody.0.to_string())
        .env("SUDO_GID", nobody.1.to_string())
        .env("SUDO_USER", "nobody")
        .env("HOME", "/root")
        .env("USER", "root")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(|l| l.to_string()).collect();
    let pw = passwd_entry("nobody");
    assert_eq!(lines[0], nobody.0.to_string());
    assert_eq!(lines[1], nobody.1.to_string());
    assert_eq!(lines[2], nobody.1.to_string(), "supplementary groups are nobody's own");
    assert_eq!(lines[3], pw.1, "HOME of the caller");
    assert_eq!(lines[4], "nobody");
    // Signal state as after a plain exec: nothing ignored, nothing blocked.
    assert!(lines[5].ends_with("0000000000000000") && lines[6].ends_with("0000000000000000"), "{lines:?}");
    let meta = std::fs::metadata(&log).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((meta.uid(), meta.gid(), meta.mode() & 0o777), (nobody.0, nobody.1, 0o600));
    // --user root keeps root.
    let out = Command::new(mltrace_bin())
        .args(["record", "-q", "-f", "--gpu", "off", "--user", "root", "-o", log.to_str().unwrap(), "--", "id", "-u"])
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
}

/// (name, home) of a passwd entry.
fn passwd_entry(name: &str) -> (String, String) {
    let text = std::fs::read_to_string("/etc/passwd").unwrap();
    let l = text.lines().find(|l| l.starts_with(&format!("{name}:"))).unwrap();
    let f: Vec<&str> = l.split(':').collect();
    (f[0].to_string(), f[5].to_string())
}

#[test]
fn the_output_file_is_never_clobbered_or_followed() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let target = dir.join("precious.txt");
    std::fs::write(&target, "keep me").unwrap();
    let link = dir.join("run.bin");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let rec = |force: bool| {
        let mut args = vec!["record", "-q", "--gpu", "off", "-o", "run.bin"];
        if force {
            args.push("--force");
        }
        args.extend(["--", "true"]);
        mltrace(&args, dir)
    };
    // A symlink planted at the output path: refused, even with --force.
    for force in [false, true] {
        let out = rec(force);
        assert_eq!(out.status.code(), Some(1));
        assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    }
    // A dangling one is not followed either (nothing is created at its target).
    std::fs::remove_file(&link).unwrap();
    let nowhere = dir.join("nowhere.bin");
    std::os::unix::fs::symlink(&nowhere, &link).unwrap();
    for force in [false, true] {
        let out = rec(force);
        assert_eq!(out.status.code(), Some(1));
        assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
        assert!(!nowhere.exists());
    }
    // An existing file: kept without --force.
    std::fs::remove_file(&link).unwrap();
    std::fs::write(&link, "an older log").unwrap();
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    std::fs::set_permissions(&link, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::chown(&link, Some(65534), Some(65534)).unwrap();
    // A second name for the old file shows whether it was written over.
    let old = dir.join("old.bin");
    std::fs::hard_link(&link, &old).unwrap();
    let out = rec(false);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("run.bin: already exists; pass --force"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&link).unwrap(), "an older log");
    // --force replaces it with a new file of our own, mode 0600: nothing of
    // the old one (owner, permissions) carries over.
    let out = rec(true);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(LogReader::open(&link).is_ok());
    let m = std::fs::metadata(&link).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777, m.nlink()), (0, 0o600, 1));
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "an older log");
    std::fs::remove_file(&old).unwrap();
    // Not a regular file: a directory, or a FIFO even with --force.
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let out = mltrace(&["record", "-q", "--gpu", "off", "-f", "-o", "sub", "--", "true"], dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
    std::fs::remove_dir(&sub).unwrap();
    let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let out = mltrace(&["record", "-q", "--gpu", "off", "-f", "-o", "fifo", "--", "true"], dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not a regular file"), "{}", stderr(&out));
    std::fs::remove_file(dir.join("fifo")).unwrap();
    // Nothing else was left behind.
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, vec!["precious.txt", "run.bin"]);
}

#[test]
fn a_command_that_fails_to_exec_leaves_no_log() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Found and executable, so the log is created; its exec then fails.
    let script = dir.join("bad-interpreter.sh");
    std::fs::write(&script, "#!/no/such/interpreter\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = mltrace(&["record", "-q", "--gpu", "off", "-o", "run.bin", "--", script.to_str().unwrap()], dir);
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    assert!(stderr(&out).contains("bad interpreter"), "{}", stderr(&out));
    // Nothing was recorded, so no log is left at -o.
    assert!(std::fs::symlink_metadata(dir.join("run.bin")).is_err());
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 1, "only the script is left");
}
