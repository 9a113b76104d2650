//! What a person sees first in Perfetto, on a real main-plus-4-workers
//! job: one group per process, workers named and linked to the main
//! process, bounded rows, no counter that says nothing.

use std::path::Path;

use mltrace_log::Record;
use mltrace_tests::*;

#[test]
fn a_trainer_and_its_workers_read_at_a_glance() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("run.bin");
    let script = repo().join("tests/workloads/loader.py");
    let data = tmp.path().join("data");
    let args =
        ["record", "-f", "-o", log.to_str().unwrap(), "--", &py, script.to_str().unwrap(), data.to_str().unwrap()];
    let out = mltrace(&args, Path::new("."));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let Some(tp) = perfetto_tp() else { return };
    let trace = tmp.path().join("run.perfetto-trace");
    let out = mltrace(&["export", log.to_str().unwrap(), "-o", trace.to_str().unwrap()], Path::new("."));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = tp_query(
        &tp,
        &trace,
        &[
            // Every pid once.
            "select pid, count(*) from process where pid > 0 group by pid having count(*) > 1",
            // The workers: name, and parent's name.
            "select p.name, q.name from process p join process q on p.parent_upid = q.upid \
             where p.name glob 'DataLoader worker *' order by p.name",
            "select name from process where pid > 0 and parent_upid is null and pid != 4194303",
            // Rows of slices per process group: its slice tracks outside
            // overflow groups (collapsed), each one row (calls do not nest).
            "select coalesce(tp.upid, th.upid) u, count(distinct s.track_id) from slice s \
             left join process_track tp on tp.id = s.track_id \
             left join thread_track tt on tt.id = s.track_id left join thread th on th.utid = tt.utid \
             join track t on t.id = s.track_id left join track g on g.id = t.parent_id \
             where coalesce(g.name, '') not glob '*: more at once' and s.dur > 0 \
             group by u having count(distinct s.track_id) > 16",
            "select s.name, s.ts, s.dur, x.name, x.ts, x.dur from slice s join thread_track tt on tt.id = s.track_id \
             join slice x on x.id = s.parent_id where s.depth > 0 limit 5",
            // No counter track that is 0 for the whole run.
            "select t.name from counter c join counter_track t on t.id = c.track_id group by t.id having max(abs(c.value)) = 0",
            // The traced processes' threads are named (an untraced task
            // that woke one of them is known by its tid alone).
            "select tid from thread where tid > 0 and upid in (select upid from process where pid != 4194303) \
             and (name is null or name = '')",
            "select str_value from metadata where name = 'cr-mltrace.contents'",
            // Untraced tasks (kernel threads, mltrace's own, other programs)
            // are one group, not a top-level row each.
            "select tid from thread where tid > 0 and upid is null",
            // Its threads, the idle pool among them, are the trainer's.
            "select count(*) from thread t join process p using(upid) where p.name = 'python3 loader.py'",
        ],
    );
    assert!(rows[0].is_empty(), "pids shown twice: {:?}", rows[0]);
    let workers: Vec<(String, String)> = rows[1].iter().map(|r| (r[0].clone(), r[1].clone())).collect();
    let want: Vec<(String, String)> =
        (0..4).map(|i| (format!("DataLoader worker {i}"), "python3 loader.py".to_string())).collect();
    assert_eq!(workers, want);
    // Only the command itself has no parent in the trace.
    assert_eq!(rows[2], vec![vec!["python3 loader.py".to_string()]]);
    assert!(rows[3].is_empty(), "groups with more than 16 rows: {:?}", rows[3]);
    assert!(rows[4].is_empty(), "calls nested on a thread's track: {:?}", rows[4]);
    assert!(rows[5].is_empty(), "counters 0 for the whole run: {:?}", rows[5]);
    assert!(rows[6].is_empty(), "threads without a name: {:?}", rows[6]);
    assert_eq!(rows[7], vec![vec!["whole run".to_string()]]);
    assert!(rows[8].is_empty(), "threads in no process: {:?}", rows[8]);
    let threads: usize = rows[9][0][0].parse().unwrap();
    assert!(threads >= 18, "main, the writer and 16 idle ones: {threads}");
    // `stats` names the processes as the trace does.
    let out = mltrace(&["stats", "--json", log.to_str().unwrap()], Path::new("."));
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["processes"].as_array().unwrap().iter().filter_map(|p| p["trace_name"].as_str()).collect();
    let mut workers: Vec<&str> = names.iter().copied().filter(|n| n.starts_with("DataLoader worker")).collect();
    workers.sort();
    assert_eq!(workers, (0..4).map(|i| format!("DataLoader worker {i}")).collect::<Vec<_>>(), "{names:?}");
    assert!(names.contains(&"python3 loader.py"), "{names:?}");
}

/// `record`s loader.py (its data in `dir/data`) through `launcher` (the
/// words before the script), then `stats --json` of it.
fn loader_through(dir: &Path, launcher: &[&str]) -> serde_json::Value {
    let log = dir.join("run.bin");
    let script = repo().join("tests/workloads/loader.py");
    let data = dir.join("data");
    let mut args = vec!["record", "-f", "--gpu", "off", "-o", log.to_str().unwrap(), "--"];
    args.extend_from_slice(launcher);
    args.extend([script.to_str().unwrap(), data.to_str().unwrap()]);
    let out = mltrace(&args, Path::new("."));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = mltrace(&["stats", "--json", log.to_str().unwrap()], Path::new("."));
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The trainer's main thread's CPU share in `stats --json` is the trainer
/// program's, from its last exec (a launcher's exec came before): as the
/// log's switches have it, within 0.05.
fn main_thread_from_exec(dir: &Path, trainer: &serde_json::Value) {
    let recs = read_log(&dir.join("run.bin"));
    let pid = trainer["pid"].as_u64().unwrap() as u32;
    let exec = recs
        .iter()
        .rev()
        .find_map(|r| match r.rec {
            Record::Exec(x) if x.pid == pid => Some(x.ts),
            _ => None,
        })
        .unwrap();
    // The thread's switches in time order: the log is in about the order
    // things happen, but two CPUs' records can cross (a switch-out read
    // before the switch-in it ends counted its run from the exec again).
    let mut switches: Vec<(u64, bool)> = Vec::new();
    let mut end = exec;
    for r in &recs {
        match r.rec {
            Record::SchedSwitch(x) if x.ts >= exec && x.prev_tid == pid => switches.push((x.ts, false)),
            Record::SchedSwitch(x) if x.ts >= exec && x.next_tid == pid => switches.push((x.ts, true)),
            Record::Exit(x) if x.tid == pid => end = end.max(x.ts),
            _ => {}
        }
    }
    switches.sort_unstable();
    // It runs at its exec.
    let (mut on, mut since) = (0u64, Some(exec));
    for (ts, switched_in) in switches {
        if switched_in {
            since = Some(ts);
        } else if let Some(s) = since.take() {
            on += ts - s;
            end = end.max(ts);
        }
    }
    let want = on as f64 / (end - exec) as f64;
    let main = trainer["threads"].as_array().unwrap().iter().find(|t| t["role"] == "main").unwrap();
    let got = main["cpu_fraction"].as_f64().unwrap();
    assert!((got - want).abs() < 0.05, "main thread on CPU {got}; from its exec, as the log has it, {want}");
}

/// Under a launcher that is a shell (pyenv's shims, `conda run`, a
/// `train.sh` that ends in `exec python`): the shell's subshells, forked
/// before it became the trainer, are not workers; the trainer's 4 are.
#[test]
fn a_shell_launcher_forks_subshells_not_workers() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(py) = system_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let shim = tmp.path().join("python3");
    // As pyenv's shim does: a few command substitutions, then exec; first
    // a second's wait (a wrapper waiting for its turn), which is not the
    // trainer's time.
    std::fs::write(
        &shim,
        format!(
            "#!/usr/bin/env bash\nset -e\nv=\"$(echo 3.11)\"\nw=\"$(basename \"$0\")\"\n\
             x=\"$(printf '%s' \"$v\" | wc -c)\"\nsleep 1\nexec {py} \"$@\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let v = loader_through(tmp.path(), &[shim.to_str().unwrap()]);
    let names: Vec<&str> = v["processes"].as_array().unwrap().iter().filter_map(|p| p["trace_name"].as_str()).collect();
    let mut workers: Vec<&str> = names.iter().copied().filter(|n| n.contains("worker")).collect();
    workers.sort();
    assert_eq!(workers, (0..4).map(|i| format!("DataLoader worker {i}")).collect::<Vec<_>>(), "{names:?}");
    let w = &v["verdict"]["workers"];
    assert_eq!((w["count"].as_u64(), w["at_once"].as_u64()), (Some(4), Some(4)), "{}", v["verdict"]);
    assert!(v["verdict"]["text"].as_str().unwrap().contains("its 4 workers spent"), "{}", v["verdict"]);
    let procs = v["processes"].as_array().unwrap();
    let trainer = procs.iter().find(|p| p["pid"] == v["verdict"]["trainer_pid"]).unwrap();
    main_thread_from_exec(tmp.path(), trainer);
}

/// Under `uv run` (which runs Python as its child, not by exec): the
/// trainer is the Python process, its 4 workers are named as such, and
/// the verdict is about it.
#[test]
fn a_uv_launcher_runs_the_trainer_as_its_child() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let (Some(py), Some(uv)) = (system_python(), tools::uv()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let uv = uv.to_str().unwrap();
    let v =
        loader_through(tmp.path(), &[uv, "run", "--no-project", "--no-cache", "--offline", "--python", &py, "python"]);
    let procs = v["processes"].as_array().unwrap();
    let trainer = procs.iter().find(|p| p["trace_name"] == "python3 loader.py").unwrap_or_else(|| panic!("{procs:?}"));
    assert_eq!(v["verdict"]["trainer_pid"], trainer["pid"], "{}", v["verdict"]);
    let mut workers: Vec<&str> =
        procs.iter().filter_map(|p| p["trace_name"].as_str()).filter(|n| n.contains("worker")).collect();
    workers.sort();
    assert_eq!(workers, (0..4).map(|i| format!("DataLoader worker {i}")).collect::<Vec<_>>());
    assert!(v["verdict"]["text"].as_str().unwrap().contains("its 4 workers spent"), "{}", v["verdict"]);
}

/// Under `poetry run` (in a project of its own, using the venv it runs
/// in): poetry starts Python subprocesses to inspect its interpreter, then
/// execs Python in its own pid. The trainer is that pid, named for
/// loader.py; poetry's subprocesses are not workers; the verdict's time is
/// the trainer program's, from its exec (poetry's second of start-up and
/// its own file reads are not the trainer's).
#[test]
fn a_poetry_launcher_execs_the_trainer() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let Some(poetry) = tools::poetry() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("pyproject.toml"),
        "[project]\nname = \"trainer\"\nversion = \"0.1.0\"\nrequires-python = \">=3.9\"\n\n\
         [tool.poetry]\npackage-mode = false\n",
    )
    .unwrap();
    let (venv, cache) = (
        "POETRY_VIRTUALENVS_CREATE=false".to_string(),
        format!("POETRY_CACHE_DIR={}", tmp.path().join("cache").display()),
    );
    let v = loader_through(
        tmp.path(),
        &["env", &venv, &cache, poetry.to_str().unwrap(), "-C", project.to_str().unwrap(), "run", "python"],
    );
    let procs = v["processes"].as_array().unwrap();
    let trainer = procs.iter().find(|p| p["trace_name"] == "python loader.py").unwrap_or_else(|| panic!("{procs:?}"));
    assert_eq!(v["verdict"]["trainer_pid"], trainer["pid"], "{}", v["verdict"]);
    let names: Vec<&str> = procs.iter().filter_map(|p| p["trace_name"].as_str()).collect();
    let mut workers: Vec<&str> = names.iter().copied().filter(|n| n.contains("worker")).collect();
    workers.sort();
    assert_eq!(workers, (0..4).map(|i| format!("DataLoader worker {i}")).collect::<Vec<_>>(), "{names:?}");
    assert!(v["verdict"]["text"].as_str().unwrap().contains("its 4 workers spent"), "{}", v["verdict"]);
    main_thread_from_exec(tmp.path(), trainer);
}
