//! `mltrace diff` of real recordings of real workloads, held against what
//! each workload measured itself: one change that makes a known
//! difference (a CPU-bound loader given a second worker; a dataset read
//! from a cold page cache, then a warm one), and the same job recorded
//! twice, which must be said to differ by noise only. Bad input is named.

use std::path::{Path, PathBuf};
use std::process::Command;

use mltrace_tests::*;
use serde_json::Value;

/// Steps each run of the decode loader takes.
const DECODE_STEPS: i64 = 60;

/// Records `py script args` with the `mltrace_ebpf` module on its path
/// (its steps and epochs are marked) and `env` set.
fn record(dir: &Path, name: &str, py: &str, script: &str, args: &[&str], env: &[(&str, String)]) -> Recorded {
    let log = dir.join(format!("{name}.bin"));
    let script = repo().join("tests/workloads").join(script);
    let mut cmd = Command::new(mltrace_bin());
    cmd.args(["record", "-q", "-f", "--gpu", "off", "-o", log.to_str().unwrap(), "--", py, script.to_str().unwrap()])
        .args(args)
        .env("PYTHONPATH", repo().join("python"))
        .current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = proc::output(&mut cmd);
    recorded(&out, log, dir)
}

/// `mltrace diff --json BEFORE AFTER`, and the text of the same.
fn diff(before: &Path, after: &Path, dir: &Path) -> (Value, String) {
    let (b, a) = (before.to_str().unwrap(), after.to_str().unwrap());
    let out = mltrace(&["diff", "--json", b, a], dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let out = mltrace(&["diff", b, a], dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // The text ends with the same conclusion as the JSON.
    let last = text.lines().last().unwrap_or("");
    assert_eq!(last, json["conclusion"].as_str().unwrap(), "{text}");
    (json, text)
}

/// The workload's own steps per second: its steps over its own clock.
fn own_steps_per_s(r: &Recorded, steps: i64) -> f64 {
    steps as f64 / (r.kv["total_ns"] as f64 / 1e9)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// `diff`'s steps per second of each run within 10% of the workload's
/// own, counted from its step marks, and its change within 10% of the
/// change the workload measured.
fn steps_as_measured(d: &Value, own: (f64, f64), what: &str) {
    let s = &d["steps_per_s"];
    for (side, mine) in [("before", own.0), ("after", own.1)] {
        let got = f(&s[side]);
        allow::RATE.check_relative(got, mine, 0.0, format_args!("{what}: {side}: steps/s"));
        assert_eq!(d[side]["step_from"], "marks", "{what}: {side}");
    }
    let (got, mine) = (f(&s["ratio"]), own.1 / own.0);
    eprintln!(
        "{what}: steps/s {:.2} -> {:.2} ({got:.3}x); the workload measured {:.2} -> {:.2} ({mine:.3}x); {}",
        f(&s["before"]),
        f(&s["after"]),
        own.0,
        own.1,
        d["conclusion"]
    );
    allow::RATE.check_relative(got, mine, 0.0, format_args!("{what}: speed-up"));
}

/// A CPU-bound decode loader (step_trainer.py: each batch hashed for
/// about 30 ms of one CPU) with one worker, then two, on the same data
/// with the same work per batch: the trainer's steps/s rise as the
/// workload measured them rise, and the diff says so.
#[test]
fn a_second_worker_for_a_cpu_bound_loader() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let data = dir.join("data.bin");
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    std::fs::write(&data, chunk.repeat(16)).unwrap();
    let steps = DECODE_STEPS.to_string();
    let args = [data.to_str().unwrap(), &steps, "5", "sleep"];
    let env = |workers: &str| vec![("STEP_TRAINER_WORKERS", workers.to_string()), ("STEP_TRAINER_MARKS", "1".into())];
    let Some((one, two, own)) = until_measured(
        "two workers faster than one",
        |own| own.1 > 1.25 * own.0,
        || {
            let one = record(dir, "one", &py, "step_trainer.py", &args, &env("1"));
            // The same hashing per batch, measured once on this machine.
            let mut env2 = env("2");
            env2.push(("STEP_TRAINER_ROUNDS", one.kv["rounds"].to_string()));
            let two = record(dir, "two", &py, "step_trainer.py", &args, &env2);
            let own = (own_steps_per_s(&one, DECODE_STEPS), own_steps_per_s(&two, DECODE_STEPS));
            (one, two, own)
        },
    ) else {
        return;
    };

    let (d, text) = diff(&one.log, &two.log, dir);
    steps_as_measured(&d, own, "one -> two workers");
    assert_eq!(d["same_command"], true, "{d}");
    assert_eq!(d["noise"]["only_noise"], false, "{d}");
    let l = &d["loaders"];
    assert_eq!((f(&l["count"]["before"]), f(&l["count"]["after"])), (1.0, 2.0), "{l}");
    // The same bytes read, faster per second of the trainer's time.
    assert_eq!(l["read_bytes"]["before"], l["read_bytes"]["after"], "{l}");
    assert!(f(&l["read_mb_per_s"]["ratio"]) > 1.2, "{l}");
    // Input-bound both times (the worker is the bottleneck), but the
    // trainer waits less.
    assert!(f(&d["breakdown"]["data_wait"]["delta"]) < 0.0, "{}", d["breakdown"]);
    let c = d["conclusion"].as_str().unwrap();
    assert!(c.contains("steps/s ") && c.contains("(+") && c.contains("its 1 -> 2 workers"), "{c}");
    assert!(text.contains("steps/s (from marks)") && text.contains("1 worker") && text.contains("2 workers"), "{text}");
    // The data file reads the most in both, and read as much.
    let file = &d["files"].as_array().unwrap().iter().find(|x| x["path"] == data.to_str().unwrap());
    let file = file.unwrap_or_else(|| panic!("{}", d["files"]));
    assert_eq!(file["read_bytes"]["delta"], 0, "{file}");
}

/// A trainer fed random 4 KiB samples of a 256 MiB file (sample_loader.py,
/// sized by this machine's storage: a batch takes about 30 ms from it),
/// from a cold page cache, then from a warm one: the same command, the
/// same samples. The diff gives the workload's own speed-up, the bytes
/// from storage it read (none the second time) and the hit ratio.
#[test]
fn a_warm_page_cache_against_a_cold_one() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = dir.join("dataset.bin");
    let (epochs, steps) = (2, 30);
    let cal = loader_calibrated(&py, &file, epochs * steps);
    let (samples, compute_ms) = (cal.0.to_string(), cal.1.clone());
    let args = ["run", file.to_str().unwrap(), &epochs.to_string(), &steps.to_string(), &samples, &compute_ms, "spin"];
    let n = epochs * steps;
    let Some((cold, warm, own)) = until_measured(
        "a warm cache faster than a cold one",
        |own| own.1 > 1.5 * own.0,
        || {
            sample_loader(&py, &["drop", file.to_str().unwrap()]);
            let cold = record(dir, "cold", &py, "sample_loader.py", &args, &[]);
            sample_loader(&py, &["warm", file.to_str().unwrap()]);
            let warm = record(dir, "warm", &py, "sample_loader.py", &args, &[]);
            let own = (own_steps_per_s(&cold, n), own_steps_per_s(&warm, n));
            (cold, warm, own)
        },
    ) else {
        return;
    };

    let (d, text) = diff(&cold.log, &warm.log, dir);
    steps_as_measured(&d, own, "cold -> warm");
    assert_eq!(d["same_command"], true, "{d}");
    assert_eq!(d["noise"]["only_noise"], false, "{d}");
    // What the loader read: every sample, from storage the first time.
    let read = (n * cal.0 * 4096) as f64;
    let io = &d["io"];
    let storage = (f(&io["from_storage_bytes"]["before"]), f(&io["from_storage_bytes"]["after"]));
    assert!(storage.0 >= 0.95 * read && storage.0 <= 1.1 * read + 4e6, "{storage:?} against {read} read: {io}");
    assert!(storage.1 < 1e6, "{storage:?}: {io}");
    let l = &d["loaders"];
    assert_eq!(f(&l["read_bytes"]["before"]), read, "{l}");
    assert!(f(&l["cache_fraction"]["before"]) < 0.05 && f(&l["cache_fraction"]["after"]) > 0.95, "{l}");
    assert!(f(&io["hit_ratio"]["after"]) > 0.95, "{io}");
    // Reads from memory are many times faster than from storage.
    assert!(f(&l["read_p50_us"]["ratio"]) < 0.5, "{l}");
    assert!(f(&l["read_call_mb_per_s"]["ratio"]) > 2.0, "{l}");
    // The dataset is the file and the directory whose reads changed most.
    assert_eq!(d["files"][0]["path"], file.to_str().unwrap(), "{}", d["files"]);
    assert_eq!(d["directories"][0]["path"], dir.to_str().unwrap(), "{}", d["directories"]);
    // Warmed, the page cache may still lose a few pages before the run
    // (seen: 8 of 27,480): next to nothing from storage, as for the run.
    let file_after = f(&d["files"][0]["from_storage_bytes"]["after"]);
    assert!(file_after < 1e6 && file_after <= storage.1, "{}", d["files"][0]);
    // Input-bound from storage, not from the cache; both epochs compared.
    assert_eq!(d["kind"]["before"], "input-bound", "{}", d["before"]["verdict"]);
    assert_ne!(d["kind"]["after"], "input-bound", "{}", d["after"]["verdict"]);
    let e = d["epochs"].as_array().unwrap();
    assert_eq!(e.iter().map(|e| e["name"].as_str().unwrap()).collect::<Vec<_>>(), ["EPOCH 1", "EPOCH 2"], "{e:?}");
    for e in e {
        assert!(f(&e["duration_s"]["ratio"]) < 0.8, "{e}");
        assert!(f(&e["cache_hit_fraction"]["before"]) < 0.05, "{e}");
    }
    let c = d["conclusion"].as_str().unwrap();
    assert!(c.starts_with("input-bound -> "), "{c}");
    assert!(c.contains("from storage ") && c.contains("page-cache hits "), "{c}");
    assert!(text.contains("per epoch:") && text.contains("EPOCH 2"), "{text}");
}

/// A tmpfs mounted for a test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let st = Command::new("mount").args(["-t", "tmpfs", "-o", "size=512m", "tmpfs"]).arg(at).status();
        match st {
            Ok(s) if s.success() => Some(Tmpfs(at.to_path_buf())),
            other => {
                skip("a fast directory", &format!("mounting a tmpfs at {} failed: {other:?}", at.display()));
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The same loader (suggest_loader.py: one worker reading random 4 KiB
/// pages of eight 32 MiB files, a batch sized by this machine's storage
/// to take about 30 ms from it, the trainer computing a third of that)
/// reading the same files from a slow directory (on the disk, their pages
/// dropped from the page cache) and then from a fast one (copies on a
/// tmpfs): the diff gives the speed-up the workload measured, and its
/// directories the slow one's read time gone and the fast one's new, each
/// as long as the workload timed its reads there.
#[test]
fn a_slow_directory_against_a_fast_one() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (slow, fast) = (dir.join("slow"), dir.join("fast"));
    std::fs::create_dir_all(&slow).unwrap();
    let names: Vec<String> = (0..8).map(|i| format!("part{i}.bin")).collect();
    for n in &names {
        sample_loader(&py, &["make", slow.join(n).to_str().unwrap(), "32"]);
    }
    let Some(_fast_fs) = Tmpfs::mount(&fast) else { return };
    for n in &names {
        std::fs::copy(slow.join(n), fast.join(n)).unwrap();
    }
    // One page from storage, timed here; a batch of them about 30 ms.
    let probe = sample_loader(&py, &["calibrate", slow.join(&names[0]).to_str().unwrap(), "1"]);
    let read_us: f64 = probe.lines().find_map(|l| l.strip_prefix("read_us ")).unwrap().parse().unwrap();
    let steps = 60;
    let samples = ((30_000.0 / read_us).round() as i64).clamp(10, 8 * 8192 / (2 * steps));
    let compute_ms = format!("{:.2}", samples as f64 * read_us / 3000.0);
    let paths = |d: &Path| names.iter().map(|n| d.join(n).display().to_string()).collect::<Vec<_>>().join(",");
    let (slow_pages, fast_pages) = (paths(&slow), paths(&fast));
    let (steps_s, samples_s) = (steps.to_string(), samples.to_string());
    let args = |pages: &str| {
        let a = ["--steps", &steps_s, "--pages", pages, "--samples", &samples_s, "--compute", &compute_ms];
        let mut a: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        a.extend(["--how", "spin", "--marks"].map(String::from));
        a
    };
    let run = |name: &str, pages: &str| {
        let a = args(pages);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        record(dir, name, &py, "suggest_loader.py", &a, &[])
    };
    let Some((before, after, own)) = until_measured(
        "a fast directory faster than a slow one",
        |own| own.1 > 1.5 * own.0,
        || {
            for n in &names {
                sample_loader(&py, &["drop", slow.join(n).to_str().unwrap()]);
            }
            let before = run("slow", &slow_pages);
            let after = run("fast", &fast_pages);
            let own = (own_steps_per_s(&before, steps), own_steps_per_s(&after, steps));
            (before, after, own)
        },
    ) else {
        return;
    };

    let (d, text) = diff(&before.log, &after.log, dir);
    steps_as_measured(&d, own, "slow -> fast directory");
    assert_eq!(d["same_command"], false, "the directory is in the command: {d}");
    assert_eq!(d["noise"]["only_noise"], false, "{d}");
    // The directories: the slow one read before only, the fast one after
    // only, each for as long as the workload timed its reads there, and
    // every byte it read.
    let dirs = d["directories"].as_array().unwrap();
    let entry = |p: &Path| {
        let p = p.to_str().unwrap();
        dirs.iter().find(|x| x["path"] == p).unwrap_or_else(|| panic!("{p} not in {dirs:?}"))
    };
    let (s, f_) = (entry(&slow), entry(&fast));
    assert_eq!(dirs[0]["path"], slow.to_str().unwrap(), "the slow directory changed most: {dirs:?}");
    let own_read = |r: &Recorded, d: &Path| r.kv[&format!("w0_dir_read_ns:{}", d.display())] as f64 / 1e9;
    let (slow_s, fast_s) = (own_read(&before, &slow), own_read(&after, &fast));
    eprintln!(
        "directories: {} {:.3} s -> {}; {} {} -> {:.4} s; the workload timed {slow_s:.3} s and {fast_s:.4} s",
        slow.display(),
        f(&s["read_s"]["before"]),
        s["read_s"]["after"],
        fast.display(),
        f_["read_s"]["before"],
        f(&f_["read_s"]["after"])
    );
    assert_eq!((f(&s["read_s"]["after"]), f(&f_["read_s"]["before"])), (0.0, 0.0), "{s} {f_}");
    // mltrace times each call inside it, the workload around it (the
    // interpreter's call and the tracing's own cost, a few µs a read):
    // within 15% below for reads from storage (90 µs here); reads from
    // memory take a microsecond or two, as long as what is around them.
    let got = f(&s["read_s"]["before"]);
    assert!(
        got >= 0.85 * slow_s && got <= 1.02 * slow_s,
        "slow: {got:.3} s in reads, the workload timed {slow_s:.3} s"
    );
    let got = f(&f_["read_s"]["after"]);
    assert!(got > 0.2 * fast_s && got <= fast_s, "fast: {got:.4} s in reads, the workload timed {fast_s:.4} s");
    assert!(got < 0.2 * f(&s["read_s"]["before"]), "the fast directory's reads are quicker: {s} {f_}");
    let bytes = before.kv["w0_read_bytes"];
    assert_eq!((s["read_bytes"]["before"].as_i64(), f_["read_bytes"]["after"].as_i64()), (Some(bytes), Some(bytes)));
    // Every sample from storage before, none after.
    let storage = f(&s["from_storage_bytes"]["before"]);
    assert!(storage >= 0.95 * bytes as f64, "{storage} of {bytes} read from storage: {s}");
    assert_eq!(f(&f_["from_storage_bytes"]["after"]), 0.0, "{f_}");
    let c = d["conclusion"].as_str().unwrap();
    assert!(c.contains("steps/s ") && c.contains("(+"), "{c}");
    assert!(text.contains("directories whose reads changed most"), "{text}");
    assert!(text.contains(slow.to_str().unwrap()) && text.contains(fast.to_str().unwrap()), "{text}");
}

/// The same job recorded twice (the warm loader of the test above, the
/// trainer sleeping 10 ms a step, for about 3 s): no measurable difference.
#[test]
fn the_same_job_twice_differs_by_noise_only() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = dir.join("dataset.bin");
    let (epochs, steps) = (2, 150);
    let (samples, _) = loader_calibrated(&py, &file, epochs * steps);
    sample_loader(&py, &["warm", file.to_str().unwrap()]);
    let args =
        ["run", file.to_str().unwrap(), &epochs.to_string(), &steps.to_string(), &samples.to_string(), "10", "sleep"];
    let n = epochs * steps;
    // Steady by its own clocks: else the machine was busy, and the two
    // runs did differ. As fast, and as long on a CPU for it: on a machine
    // whose speed swings, the same work took the trainer 0.36 s of CPU in
    // one run and 0.2 s in the next at the same steps/s (a CI-like run,
    // 2026-12-07), and diff rightly saw its on-CPU share move by 4 points.
    let steady = |own: (f64, f64)| (own.0 - own.1).abs() <= 0.02 * own.0.max(own.1);
    let Some((a, b, own)) = until_steady("the job as fast both times", steady, same_cpu, || {
        let a = record(dir, "a", &py, "sample_loader.py", &args, &[]);
        let b = record(dir, "b", &py, "sample_loader.py", &args, &[]);
        let own = (own_steps_per_s(&a, n), own_steps_per_s(&b, n));
        (a, b, own)
    }) else {
        return;
    };
    let (d, text) = diff(&a.log, &b.log, dir);
    assert_eq!(d["noise"]["only_noise"], true, "{text}\nthe workload measured {:.2} and {:.2} steps/s", own.0, own.1);
    steps_as_measured(&d, own, "the same job");
    let c = d["conclusion"].as_str().unwrap();
    assert!(c.starts_with("no measurable difference: every share of the trainer's time within "), "{c}");
    assert!(!c.contains("but its reads differ"), "{c}");
    assert_eq!(d["kind"]["changed"], false, "{d}");
}

/// Four plain ranks (plain_ranks.py: each a trainer fed by its own loader,
/// 40 ms a batch), rank 2's loader taking 120 ms a batch, then 40 ms like
/// the others: per rank, steps/s as each rank measured them (from its
/// batches: it waits for every one), rank 2 three times as fast, the
/// others as before.
#[test]
fn a_slow_rank_made_as_fast_as_the_others() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("data.bin"), vec![7u8; 1 << 20]).unwrap();
    let steps = 20;
    let run = |name: &str, slow_ms: &str| {
        record(dir, name, &py, "plain_ranks.py", &["data.bin", "4", &steps.to_string(), "30", "40", "2", slow_ms], &[])
    };
    let (slow, even) = (run("slow", "120"), run("even", "40"));
    let (d, text) = diff(&slow.log, &even.log, dir);
    let ranks = d["ranks"].as_array().unwrap();
    assert_eq!(ranks.iter().map(|r| r["rank"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1, 2, 3], "{ranks:?}");
    assert!(text.contains("per rank (4 in both):"), "{text}");
    for r in ranks {
        let k = r["rank"].as_u64().unwrap();
        let own = |run: &Recorded| {
            let total = run.kv.get(&format!("total_ns_{k}"));
            steps as f64 / (*total.unwrap_or_else(|| panic!("rank {k} printed no total: {:?}", run.kv)) as f64 / 1e9)
        };
        let own = (own(&slow), own(&even));
        for (side, run, mine) in [("before", &slow, own.0), ("after", &even, own.1)] {
            assert_eq!(r["pid"][side], run.kv[&format!("pid_{k}")], "{r}");
            let got = f(&r["steps_per_s"][side]);
            allow::RATE.check_relative(got, mine, 0.0, format_args!("rank {k} {side}: steps/s ({r})"));
        }
        let (got, mine) = (f(&r["steps_per_s"]["ratio"]), own.1 / own.0);
        eprintln!("rank {k}: steps/s ratio {got:.3}, its own {mine:.3}");
        allow::RATE.check_relative(got, mine, 0.0, format_args!("rank {k}: speed-up ({r})"));
        if k == 2 {
            assert!(mine > 2.0, "the slow rank should be faster after: {own:?}");
        }
    }
}

/// A log that is not one, one cut short, one that is missing: an error
/// naming the file, whichever side it is on.
#[test]
fn bad_input_is_named() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let good = dir.join("good.bin");
    let out = mltrace(&["record", "-q", "--gpu", "off", "-o", good.to_str().unwrap(), "--", "true"], dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&good).unwrap();
    let text = dir.join("notes.txt");
    std::fs::write(&text, "epoch 1: loss 0.3\n").unwrap();
    let cut = dir.join("cut.bin");
    std::fs::write(&cut, &bytes[..100]).unwrap();
    let missing: PathBuf = dir.join("missing.bin");
    for (bad, says) in [(&text, "expected an mltrace log"), (&cut, "cut short"), (&missing, "no such file")] {
        for args in [[&good, bad], [bad, &good]] {
            let out = mltrace(&["diff", args[0].to_str().unwrap(), args[1].to_str().unwrap()], dir);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{err}");
            assert!(err.contains(bad.to_str().unwrap()) && err.contains(says), "{bad:?}: {err}");
            assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
        }
    }
    // A log against itself is the same run.
    let (d, _) = diff(&good, &good, dir);
    assert_eq!(d["noise"]["only_noise"], true, "{d}");
}

/// Records a pair of runs with `pair` until the workloads' own clocks
/// show what the test is about (`measured` of their steps per second):
/// another program on the machine can take the CPUs a second worker
/// needs (a QEMU kernel test beside these took one). After three tries
/// the check could not run: it fails in CI (whose machine is the tests'
/// own), and elsewhere is skipped and listed (`tools::skip`).
fn until_measured(
    what: &str,
    measured: impl Fn((f64, f64)) -> bool,
    pair: impl FnMut() -> (Recorded, Recorded, (f64, f64)),
) -> Option<(Recorded, Recorded, (f64, f64))> {
    until_steady(what, measured, |_, _| Ok(()), pair)
}

/// As [`until_measured`], where the two runs must also pass `also` (what
/// else their clocks measured, or why not).
fn until_steady(
    what: &str,
    measured: impl Fn((f64, f64)) -> bool,
    also: impl Fn(&Recorded, &Recorded) -> Result<(), String>,
    mut pair: impl FnMut() -> (Recorded, Recorded, (f64, f64)),
) -> Option<(Recorded, Recorded, (f64, f64))> {
    let mut seen = Vec::new();
    for _ in 0..3 {
        let p = pair();
        let why = if measured(p.2) { also(&p.0, &p.1).err() } else { Some(String::new()) };
        let Some(why) = why else {
            return Some(p);
        };
        eprintln!("{what}: not so by the workload's clock ({:.2} -> {:.2} steps/s{why})", p.2 .0, p.2 .1);
        seen.push(format!("{:.2} -> {:.2}{why}", p.2 .0, p.2 .1));
    }
    let why =
        format!("not so by the workload's own clock in 3 tries ({} steps/s): is the machine busy?", seen.join(", "));
    skip(what, &why);
    None
}

/// The trainer's share of its clock on a CPU, both runs within 0.02 (the
/// noise rule allows diff 0.03 or more): its CPU clock and what the
/// hypervisor stole while it held a CPU, which the trace counts too.
fn same_cpu(a: &Recorded, b: &Recorded) -> Result<(), String> {
    let held = |r: &Recorded| {
        let cpu = r.kv["cpu_ns"] as f64 / r.kv["total_ns"] as f64;
        cpu + steal::stolen(cpu, r.kv["steal_ppm"] as f64 / 1e6)
    };
    let (x, y) = (held(a), held(b));
    if (x - y).abs() <= 0.02 {
        Ok(())
    } else {
        Err(format!("; on a CPU {x:.3} -> {y:.3} of its clock"))
    }
}

fn sample_loader(py: &str, args: &[&str]) -> String {
    let script = repo().join("tests/workloads/sample_loader.py");
    let out = proc::output(Command::new(py).arg(script).args(args));
    assert!(out.status.success(), "sample_loader {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `file` (256 MiB) made, and the samples per batch and compute per
/// step for `batches` batches on this machine's storage.
fn loader_calibrated(py: &str, file: &Path, batches: i64) -> (i64, String) {
    sample_loader(py, &["make", file.to_str().unwrap(), "256"]);
    let out = sample_loader(py, &["calibrate", file.to_str().unwrap(), &batches.to_string()]);
    let kv = key_values(&out);
    let compute = out.lines().find_map(|l| l.strip_prefix("compute_ms ")).unwrap().to_string();
    (kv["samples"], compute)
}
