//! An experiment directory: its files, which of them repeat others, and
//! what `pids.json` names each process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::ImportError;
use crate::Format;

/// The files to import: those given, and every file under the directories
/// given (sorted; hidden ones left out). `true` marks files found in a
/// directory, which may be of no known format without stopping the import.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<(PathBuf, bool)>, ImportError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else {
            out.push((p.clone(), false));
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<(PathBuf, bool)>) -> Result<(), ImportError> {
    let read = |e| ImportError::Read { path: dir.to_path_buf(), source: e };
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).map_err(read)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>().map_err(read)?;
    entries.sort();
    for p in entries {
        if p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
            continue;
        }
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.is_file() {
            out.push((p, true));
        }
    }
    Ok(())
}

/// The pid in a per-pid file's name (`read_2036325`, `st_end_data_2036324`).
pub fn name_pid(path: &Path) -> Option<u32> {
    path.file_name()?.to_string_lossy().rsplit('_').next()?.parse().ok()
}

/// Why each file is not imported, if it is not: the scripts' processed
/// copies of data another file holds, so nothing is counted twice.
pub fn duplicates(files: &[(&Path, Format)]) -> Vec<Option<String>> {
    let beside = |p: &Path, f: &[Format]| {
        files.iter().find(|(q, g)| f.contains(g) && q.parent() == p.parent()).map(|(q, _)| file_name(q))
    };
    let io = [Format::VisRead, Format::VisWrite, Format::VisOpen, Format::VisBio];
    let io_pids: Vec<u32> = files.iter().filter(|(_, g)| io.contains(g)).filter_map(|(q, _)| name_pid(q)).collect();
    let has_json = files.iter().any(|(q, g)| *g == Format::Pids && q.extension().is_some_and(|e| e == "json"));
    files
        .iter()
        .map(|&(p, f)| match f {
            Format::CpuCsv => beside(p, &[Format::Mpstat]).map(|raw| {
                format!("the samples of {raw}, converted by the scripts: {raw} used (this file only sets the clock)")
            }),
            Format::GpuCsv => beside(p, &[Format::Pmon, Format::Dmon])
                .map(|raw| format!("the mean over GPUs of {raw}'s rows: {raw} used")),
            Format::VisStEnd | Format::VisComb => Some(match name_pid(p) {
                Some(pid) if io_pids.contains(&pid) => {
                    "times, kinds and latencies of the calls in the bio/open/read/write files of this pid \
                     (made from them by the scripts): those are used"
                        .to_string()
                }
                _ => "times, kinds and latencies only (no files, sizes) made from bio/open/read/write files \
                      that are not here (or of all pids together): not imported"
                    .to_string(),
            }),
            Format::Pids if p.extension().is_none_or(|e| e != "json") => Some(if has_json {
                "the pids of pids.json, without their roles".to_string()
            } else {
                "a list of pids without roles: nothing to import".to_string()
            }),
            _ => None,
        })
        .collect()
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap_or_default().to_string_lossy().into_owned()
}

/// Names for the processes `pids.json` gives roles to. The scripts call
/// "master" the process that started the others and "worker N" the ones it
/// started; which of them trained shows in the GPU trace (`gpu_pids`: pid
/// to GPU): when the workers each hold a GPU and the master none, the
/// master launched one trainer per GPU (torch.distributed.launch);
/// otherwise the master trained and the workers were its DataLoader
/// workers. Returns the names and a sentence saying which reading it took.
pub fn role_names(roles: &[(u32, String)], gpu_pids: &HashMap<u32, u32>) -> (Vec<(u32, String)>, String) {
    let worker_n = |r: &str| r.strip_prefix("worker ").map(str::trim).map(str::to_string);
    let is_master = |r: &str| r.eq_ignore_ascii_case("master");
    let workers_on_gpu = roles.iter().filter(|(p, r)| worker_n(r).is_some() && gpu_pids.contains_key(p)).count();
    let master_on_gpu = roles.iter().any(|(p, r)| is_master(r) && gpu_pids.contains_key(p));
    let launcher = workers_on_gpu > 0 && !master_on_gpu;
    let names = roles
        .iter()
        .map(|(pid, r)| {
            let name = match (worker_n(r), launcher) {
                (Some(n), true) => match gpu_pids.get(pid) {
                    Some(g) => format!("trainer GPU {g} (worker {n})"),
                    None => format!("worker {n}"),
                },
                (Some(n), false) => format!("DataLoader worker {n}"),
                (None, true) if is_master(r) => "launcher (master)".to_string(),
                (None, false) if is_master(r) => "trainer (master)".to_string(),
                (None, _) => r.clone(),
            };
            (*pid, name)
        })
        .collect();
    let note = if launcher {
        format!(
            "processes named from pids.json: {workers_on_gpu} workers each hold a GPU in the GPU trace and the \
             master none, so the workers are the trainers (one per GPU) and the master their launcher"
        )
    } else {
        "processes named from pids.json: the master as the trainer, the workers as its DataLoader workers".to_string()
    };
    (names, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_gpu_trace() {
        let roles = vec![(10, "master".to_string()), (11, "worker 1".to_string()), (12, "worker 2".to_string())];
        let (n, _) = role_names(&roles, &HashMap::new());
        assert_eq!(n[0].1, "trainer (master)");
        assert_eq!(n[2].1, "DataLoader worker 2");
        let (n, note) = role_names(&roles, &HashMap::from([(11, 0), (12, 1)]));
        assert_eq!(n[0].1, "launcher (master)");
        assert_eq!(n[2].1, "trainer GPU 1 (worker 2)");
        assert!(note.contains("launcher"));
    }

    #[test]
    fn processed_copies_are_skipped() {
        let files = [
            (Path::new("d/cpu_data/cpu.all"), Format::Mpstat),
            (Path::new("d/cpu_data/cpu_all.csv"), Format::CpuCsv),
            (Path::new("d/gpu_data/gpu_avg.csv"), Format::GpuCsv),
            (Path::new("d/read_data/read_7"), Format::VisRead),
            (Path::new("d/traces_data/comb_7"), Format::VisComb),
            (Path::new("d/pids"), Format::Pids),
            (Path::new("d/pids.json"), Format::Pids),
        ];
        let d = duplicates(&files);
        assert!(d[0].is_none() && d[3].is_none() && d[6].is_none());
        assert!(d[1].as_deref().unwrap().contains("cpu.all used"));
        assert!(d[2].is_none(), "no gpu.all beside it: the CSV is the GPU data");
        assert!(d[4].as_deref().unwrap().contains("those are used"));
        assert!(d[5].is_some());
    }
}
