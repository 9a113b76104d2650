//! Section 4b: the readers on a log of a dataset of many small files.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::Result;
use mltrace_log::*;

use super::{rss_quiet, secs};

/// ImageNet's training set in files: every reader of a log keeps
/// something per distinct file, so that is what a dataset of small files
/// costs them.
const MANY_FILES: u64 = 1_281_167;

/// Section 4b: the readers on a log where each of MANY_FILES files is
/// opened and read once (2.6M records).
pub fn many_files_bench(dir: &Path, mltrace: &Path) -> Result<String> {
    use std::fmt::Write as _;
    let mut table = String::new();
    let _ = writeln!(table, "\n== 4b. A dataset of {MANY_FILES} small files, each opened and read once ==");
    let log = dir.join("many-files.bin");
    if !log.exists() {
        many_files_log(&log, MANY_FILES)?;
    }
    let out = dir.join("many-files.out");
    let runs: [(&str, Vec<&std::ffi::OsStr>); 5] = [
        ("stats", vec!["stats".as_ref(), log.as_os_str()]),
        ("stats --json", vec!["stats".as_ref(), "--json".as_ref(), log.as_os_str()]),
        ("report", vec!["report".as_ref(), log.as_os_str(), "-o".as_ref(), out.as_os_str()]),
        (
            "export --no-split",
            vec!["export".as_ref(), "--no-split".as_ref(), log.as_os_str(), "-o".as_ref(), out.as_os_str()],
        ),
        (
            "export --parquet",
            vec!["export".as_ref(), "--parquet".as_ref(), log.as_os_str(), "-o".as_ref(), out.as_os_str()],
        ),
    ];
    for (name, args) in runs {
        let _ = fs::remove_dir_all(&out).or_else(|_| fs::remove_file(&out));
        let t0 = Instant::now();
        let rss = rss_quiet(Command::new(mltrace).args(&args))?;
        let _ = writeln!(
            table,
            "  {name:<20} {:>9}  peak RSS {:>7.1} MiB  ({:.0} B per file)",
            secs(t0.elapsed().as_nanos() as u64),
            rss as f64 / 1024.0,
            rss as f64 * 1024.0 / MANY_FILES as f64
        );
    }
    let _ = fs::remove_dir_all(&out).or_else(|_| fs::remove_file(&out));
    Ok(table)
}

fn many_files_log(path: &Path, files: u64) -> Result<()> {
    let f = std::io::BufWriter::new(fs::File::create(path)?);
    let header = Header { source: "bench".into(), clock: "boottime".into(), ..Default::default() };
    let mut w = RecordWriter::new(f, &header)?;
    let mut ts = 1_000_000_000u64;
    for i in 0..files {
        let (pid, file) = (1000 + (i % 8) as u32, format!("/data/train/n{:08}/{:08}.JPEG", i / 1300, i));
        ts += 1000;
        w.push_with(|e| {
            let p = e.intern(file.as_bytes());
            Record::Open(Open {
                ts,
                dur: 2000,
                pid,
                tid: pid,
                path: p,
                abs_path: p,
                ret: 3,
                kind: FileKind::Regular,
                ..Default::default()
            })
        })?;
        ts += 3000;
        w.push_with(|e| {
            Record::Io(Io {
                ts,
                dur: 1500,
                pid,
                tid: pid,
                op: IoOp::Read,
                fd: 3,
                path: e.intern(file.as_bytes()),
                kind: FileKind::Regular,
                offset_src: OffsetSrc::FilePos,
                requested: 131072,
                ret: 110_000,
                ..Default::default()
            })
        })?;
    }
    w.finish(&Trailer::default())?;
    Ok(())
}
