//! Metadata calls (stat, getdents64, rename...) per process and
//! directory: how many, how long, the slowest. A job on many small files
//! can spend minutes here before it reads a byte.

use std::collections::BTreeMap;

use mltrace_log::MetaCall;

use crate::HashMap;
use crate::Stats;
use mltrace_log::{Accept, FileKind, Frame, Record};
use mltrace_model::procs::is_data_path;

/// Directories kept apart (over all processes); the calls on any other
/// are summed per process under [`OTHER_DIRS`].
const MAX_DIRS: usize = 1 << 16;
pub const OTHER_DIRS: &str = "(other directories)";

/// One process's calls on one directory's entries (or, for getdents64,
/// on the directory itself).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DirMeta {
    pub calls: u64,
    pub failed: u64,
    /// Time in them, ns.
    pub ns: u64,
    /// Calls by operation (`newfstatat`, `getdents64`...).
    pub ops: BTreeMap<&'static str, u64>,
    /// The slowest: (ns, operation, absolute path).
    pub slowest: Option<(u64, &'static str, String)>,
}

/// By pid, then directory.
#[derive(Default)]
pub struct Metadata {
    by_pid: HashMap<u32, HashMap<Box<[u8]>, DirMeta>>,
    dirs: usize,
}

/// The directory a call is about: the one it lists, else the one holding
/// the last name of its path (`/` for `/x`; the path itself when it has
/// no `/`, as `?` for an unknown one).
pub fn directory<'a>(r: &MetaCall, abs: &'a [u8]) -> &'a [u8] {
    if r.op.lists() {
        return abs;
    }
    match abs.iter().rposition(|&b| b == b'/') {
        Some(0) => b"/",
        Some(i) => &abs[..i],
        None => abs,
    }
}

impl Metadata {
    /// A call whose (old) path made absolute is `abs`.
    pub fn add(&mut self, r: &MetaCall, abs: &[u8]) {
        let dir = directory(r, abs);
        let full = self.dirs >= MAX_DIRS;
        let dirs = self.by_pid.entry(r.pid).or_default();
        let key: &[u8] = if full && !dirs.contains_key(dir) { OTHER_DIRS.as_bytes() } else { dir };
        if !dirs.contains_key(key) {
            dirs.insert(key.into(), DirMeta::default());
            self.dirs += 1;
        }
        let Some(d) = dirs.get_mut(key) else { return };
        d.calls += 1;
        d.failed += u64::from(r.ret < 0);
        d.ns += r.dur;
        *d.ops.entry(r.op.name()).or_default() += 1;
        if d.slowest.as_ref().is_none_or(|s| r.dur > s.0) {
            d.slowest = Some((r.dur, r.op.name(), String::from_utf8_lossy(abs).into_owned()));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.dirs == 0
    }

    /// (pid, directory, its calls), most time first.
    pub fn sorted(&self) -> Vec<(u32, String, &DirMeta)> {
        let mut v: Vec<(u32, String, &DirMeta)> = self
            .by_pid
            .iter()
            .flat_map(|(&pid, dirs)| dirs.iter().map(move |(d, m)| (pid, String::from_utf8_lossy(d).into_owned(), m)))
            .collect();
        v.sort_by(|a, b| b.2.ns.cmp(&a.2.ns).then(b.2.calls.cmp(&a.2.calls)).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
        v
    }
}

// What its records add to the figures (see [`mltrace_log::Accept`]).

impl Accept<MetaCall> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: MetaCall) {
        // A lookup is the thread's own file I/O, as an open is; a
        // loader's on its data, time spent on metadata.
        self.own_io(r.pid, r.tid, r.ts, r.dur, FileKind::Regular);
        self.calls.add("", r.op.name(), None, r.dur);
        let abs = f.str(r.abs_path);
        self.tables.metadata.add(&r, abs);
        if is_data_path(abs) {
            self.meta(r.pid, r.tid, r.dur, 0);
            self.python_meta(r.pid, r.tid, r.stack, r.dur);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acc::kind_tables::KindTable;
    use mltrace_log::MetaOp;

    fn call(pid: u32, op: MetaOp, dur: u64, ret: i64) -> MetaCall {
        MetaCall { pid, tid: pid, op, dur, ret, ..Default::default() }
    }

    #[test]
    fn calls_go_to_the_directory_of_their_path_a_listing_to_its_own() {
        let mut m = Metadata::default();
        m.add(&call(1, MetaOp::Newfstatat, 10, 0), b"/data/a/x.jpg");
        m.add(&call(1, MetaOp::Newfstatat, 30, -2), b"/data/a/y.jpg");
        m.add(&call(1, MetaOp::Getdents64, 5, 4096), b"/data/a");
        m.add(&call(1, MetaOp::Unlink, 7, 0), b"/x");
        m.add(&call(2, MetaOp::Statx, 1, 0), b"?");
        let s = m.sorted();
        let names: Vec<(u32, &str)> = s.iter().map(|(p, d, _)| (*p, d.as_str())).collect();
        assert_eq!(names, [(1, "/data/a"), (1, "/"), (2, "?")]);
        let a = s[0].2;
        assert_eq!((a.calls, a.failed, a.ns), (3, 1, 45));
        assert_eq!(a.ops.get("newfstatat"), Some(&2));
        assert_eq!(a.ops.get("getdents64"), Some(&1));
        assert_eq!(a.slowest, Some((30, "newfstatat", "/data/a/y.jpg".to_string())));
        let j = m.to_json();
        assert_eq!(j[0]["directory"], "/data/a");
        assert_eq!(j[0]["ops"]["newfstatat"], 2);
        assert_eq!(j[0]["slowest_path"], "/data/a/y.jpg");
        let mut o = String::new();
        m.render(&mut o, 2, &|p| format!("p{p}"));
        assert!(o.contains("/data/a") && o.contains("(1 more)"), "{o}");
    }

    #[test]
    fn directories_past_the_limit_are_summed_per_process() {
        let mut m = Metadata { dirs: MAX_DIRS, ..Default::default() };
        m.add(&call(3, MetaOp::Stat, 2, 0), b"/a/x");
        m.add(&call(3, MetaOp::Stat, 2, 0), b"/b/x");
        let s = m.sorted();
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].1.as_str(), s[0].2.calls), (OTHER_DIRS, 2));
    }
}
