//! Bytes read per interval of the run's most-read files, for a heat map
//! (time x file). Which files is decided from the survey's whole-run
//! totals, so a second pass needs memory for those files only.

use mltrace_log::{Frame, Record};
use rustc_hash::FxHashMap as HashMap;

use crate::grid::Grid;
use crate::survey::{file_read, path_key, Survey};

/// One chosen file: its path (once seen) and bytes read per interval.
pub struct FileRow {
    pub path: String,
    /// The whole run's bytes read by calls (from the survey).
    pub total: u64,
    pub bytes: Vec<u64>,
}

pub struct FileHeat {
    pub grid: Grid,
    pub rows: Vec<FileRow>,
    index: HashMap<u64, usize>,
}

impl FileHeat {
    /// The `n` files the run read most (by calls and io_uring requests),
    /// on the overview's intervals.
    pub fn top(run: &Survey, n: usize) -> FileHeat {
        let mut files: Vec<(u64, u64)> = run.files.iter().map(|(&k, t)| (k, t.read)).filter(|f| f.1 > 0).collect();
        files.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        files.truncate(n);
        let grid = run.overview.grid;
        let rows = files.iter().map(|&(_, total)| FileRow { path: String::new(), total, bytes: vec![0; grid.n] });
        let index = files.iter().enumerate().map(|(i, &(k, _))| (k, i)).collect();
        FileHeat { grid, rows: rows.collect(), index }
    }

    /// A record of the second pass: reads of a chosen file count, as the
    /// survey counts them ([`file_read`]).
    pub fn add(&mut self, f: &Frame<'_>, rec: &Record) {
        let Some((path, n, ts)) = file_read(rec) else { return };
        let path = f.str(path);
        if path.is_empty() {
            return;
        }
        let Some(&i) = self.index.get(&path_key(path)) else { return };
        let row = &mut self.rows[i];
        if row.path.is_empty() {
            row.path = String::from_utf8_lossy(path).into_owned();
        }
        row.bytes[self.grid.index(ts)] += n;
    }
}
