//! `mltrace diff`: two runs side by side, from the figures `stats`
//! computes for each (the verdict, its breakdown, the loaders, the page
//! cache, the files), with the change, and whether the change is more
//! than two recordings of the same job differ by (docs/diff.md).
//!
//! A run is read into [`RunFigures`] (the stats are dropped after), so
//! that two big logs need not be held at once; [`Diff`] compares two.
//! The text and JSON are [`crate::show::diff`]'s.

use std::collections::BTreeMap;

use crate::judge::ranks::StepRate;
use crate::judge::verdict::{Breakdown, Share};
use crate::{CacheFill, Stats};

/// Two recordings of the same job differ by less than these (measured:
/// see docs/diff.md). Their start and end (the interpreter's imports,
/// forking workers, the recorder starting the command) differ by up to
/// this many seconds, which move the wall time and the shares of a short
/// run ...
pub const NOISE_JITTER_S: f64 = 0.15;
/// ... every share of the trainer's time by at most this much, or the
/// jitter over the shorter run's wall time when that is more ...
pub const NOISE_SHARE: f64 = 0.03;
/// ... the wall time by at most this share of the larger, or the jitter
/// when that is more; the steps per second, and the loaders' reads per
/// second, by at most this share of the larger.
pub const NOISE_TIME: f64 = 0.05;
/// Bytes from storage differ beyond noise by this share of the larger,
/// at least [`NOISE_STORAGE_BYTES`] (a recording brings a few hundred KiB
/// of the interpreter's files from storage, or not), and at least
/// [`NOISE_HIT`] of the larger bytes read by calls (the kernel evicts
/// some of a warm dataset between two runs: 1.1 MiB of 134 MB read, once);
/// the page-cache hit ratio by [`NOISE_HIT`].
pub const NOISE_STORAGE: f64 = 0.10;
pub const NOISE_STORAGE_BYTES: f64 = 1048576.0;
pub const NOISE_HIT: f64 = 0.05;

/// Files and directories listed by default.
pub const TOP: usize = 10;

/// The eight shares (see [`Breakdown::SHARES`]; [`Diff::shares`], those compared).
pub const SHARES: [Share; 8] = Breakdown::SHARES;

/// What the trainer's loaders did, in one run.
#[derive(Clone, Debug, PartialEq)]
pub struct LoaderFigures {
    /// `processes` or `threads` (as `verdict.workers.kind`).
    pub kind: &'static str,
    /// What one is called (`worker`, `loader thread`...).
    pub word: &'static str,
    pub count: usize,
    /// Bytes they read from files.
    pub read_bytes: u64,
    /// Those bytes per second of the trainer's main thread's time.
    pub read_mb_per_s: Option<f64>,
    /// Those bytes per second inside their read calls.
    pub read_call_mb_per_s: Option<f64>,
    pub read_p50_ns: Option<u64>,
    pub read_p99_ns: Option<u64>,
    /// Share of their reads the page cache held.
    pub cache_fraction: Option<f64>,
}

/// One epoch of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochFigures {
    pub name: String,
    pub duration_ns: u64,
    pub kind: &'static str,
    pub breakdown: Option<Breakdown>,
    pub read_mb_per_s: Option<f64>,
    pub from_storage_bytes: Option<f64>,
    pub cache_hit_fraction: Option<f64>,
}

/// One rank of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct RankFigures {
    pub rank: usize,
    pub pid: u32,
    pub steps: Option<StepRate>,
    pub breakdown: Option<Breakdown>,
    pub read_mb_per_s: Option<f64>,
}

/// What one file (or directory) had read from it in one run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FileFigures {
    /// Time in read calls on it (summed over calls).
    pub read_ns: u64,
    /// Bytes read by calls and io_uring requests.
    pub read_bytes: u64,
    /// Bytes brought from storage for it (`None` without the page-cache probe).
    pub from_storage_bytes: Option<u64>,
}

/// Everything `diff` compares of one run, taken from its [`Stats`].
#[derive(Clone, Debug, PartialEq)]
pub struct RunFigures {
    /// The log, as named on the command line.
    pub file: String,
    pub command: Vec<String>,
    /// The host (a merged log's hosts, joined by commas).
    pub host: String,
    pub kernel: String,
    pub cpus: u32,
    /// When the recording started (the log's own words).
    pub started: String,
    pub detail: &'static str,
    pub complete: bool,
    pub lost: u64,
    /// Damage found in the log, and the other warnings `stats` gives.
    pub warnings: Vec<String>,
    /// The recording's span (ns).
    pub wall_ns: Option<u64>,
    pub trainer_pid: Option<u32>,
    pub steps: Option<StepRate>,
    pub kind: &'static str,
    pub verdict: String,
    pub breakdown: Option<Breakdown>,
    pub loaders: Option<LoaderFigures>,
    /// Every file read by calls (bytes), of it brought from storage during
    /// those reads, and all bytes from storage (`None` without the
    /// page-cache probe).
    pub read_bytes: u64,
    pub during_reads: Option<u64>,
    pub from_storage_bytes: Option<u64>,
    pub epochs: Vec<EpochFigures>,
    /// With two ranks or more; empty otherwise.
    pub ranks: Vec<RankFigures>,
    pub files: BTreeMap<String, FileFigures>,
}

impl RunFigures {
    /// The figures of `stats` (the log named `file`).
    pub fn of(stats: &Stats, file: &str) -> RunFigures {
        let h = &stats.header;
        let ranks = stats.ranks();
        let v = stats.verdict_with(&ranks);
        let trainer = stats.trainer();
        let life_ns = trainer.and_then(|t| stats.sched.main_thread.get(&t.pid)).map_or(0, |m| m.total());
        let per_s = |b: f64, ns: u64| (ns > 0).then(|| b / (ns as f64 / 1e9) / 1e6);
        let loaders = v.workers.as_ref().map(|w| LoaderFigures {
            kind: w.kind,
            word: w.word,
            count: w.count,
            read_bytes: w.read_bytes,
            read_mb_per_s: per_s(w.read_bytes as f64, life_ns),
            read_call_mb_per_s: per_s(w.read_bytes as f64, w.read_ns),
            read_p50_ns: w.read_p50_ns,
            read_p99_ns: w.read_p99_ns,
            cache_fraction: w.cache_fraction,
        });
        let pc = stats.has_page_cache();
        let (mut read_bytes, mut cache) = (0, CacheFill::default());
        let mut files = BTreeMap::new();
        for (path, f) in &stats.files {
            read_bytes += f.read_bytes;
            cache.during_reads += f.cache.during_reads;
            cache.faults += f.cache.faults;
            cache.other += f.cache.other;
            let storage = f.cache.storage_read_bytes();
            if f.total_read_bytes() > 0 || f.read_ns > 0 || storage > 0 {
                files.insert(
                    path.clone(),
                    FileFigures {
                        read_ns: f.read_ns,
                        read_bytes: f.total_read_bytes(),
                        from_storage_bytes: pc.then_some(storage),
                    },
                );
            }
        }
        let epochs = v
            .epochs
            .iter()
            .map(|e| EpochFigures {
                name: e.name.clone(),
                duration_ns: e.end.saturating_sub(e.start),
                kind: e.kind,
                breakdown: e.breakdown,
                read_mb_per_s: e.read_mb_per_s(),
                from_storage_bytes: e.storage_bytes,
                cache_hit_fraction: e.cache_hit_fraction(),
            })
            .collect();
        let ranks = if ranks.len() >= 2 {
            ranks
                .iter()
                .map(|r| RankFigures {
                    rank: r.rank,
                    pid: r.pid,
                    steps: stats.step_rate(r.pid),
                    breakdown: r.breakdown,
                    read_mb_per_s: r.read_mb_per_s,
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut warnings = stats.diagnostics.clone();
        warnings.extend(stats.kernel_warnings());
        warnings.extend(stats.split_warnings());
        RunFigures {
            file: file.to_string(),
            command: h.command.clone(),
            host: h.host_names().join(", "),
            kernel: h.kernel.clone(),
            cpus: h.cpu_count,
            started: stats.span().map_or_else(String::new, |(a, _)| mltrace_log::describe_ts(h, a)),
            detail: if h.is_summary() { "summary" } else { "full" },
            complete: stats.trailer.is_some(),
            lost: stats.total_lost(),
            warnings,
            wall_ns: stats.span().map(|(a, b)| b - a),
            trainer_pid: v.trainer_pid,
            steps: v.trainer_pid.and_then(|p| stats.step_rate(p)),
            kind: v.kind,
            verdict: v.text.clone(),
            breakdown: v.breakdown,
            loaders,
            read_bytes,
            during_reads: pc.then_some(cache.during_reads),
            from_storage_bytes: pc.then_some(cache.storage_read_bytes()),
            epochs,
            ranks,
            files,
        }
    }

    /// Share of the bytes read by calls that the page cache held.
    pub fn hit_ratio(&self) -> Option<f64> {
        let during = self.during_reads?;
        CacheFill { during_reads: during, ..Default::default() }.hit_ratio(self.read_bytes)
    }

    fn wall_s(&self) -> Option<f64> {
        self.wall_ns.map(|n| n as f64 / 1e9)
    }
}

/// One figure of both runs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pair {
    pub before: Option<f64>,
    pub after: Option<f64>,
}

impl Pair {
    pub fn of(before: Option<f64>, after: Option<f64>) -> Pair {
        Pair { before, after }
    }

    fn both(&self) -> Option<(f64, f64)> {
        Some((self.before?, self.after?))
    }

    /// after - before.
    pub fn delta(&self) -> Option<f64> {
        self.both().map(|(a, b)| b - a)
    }

    /// after / before (`None` when before is 0).
    pub fn ratio(&self) -> Option<f64> {
        self.both().and_then(|(a, b)| (a != 0.0).then(|| b / a))
    }

    /// The change against the larger of the two (0..1): what the noise
    /// rule bounds, the same whichever run comes first.
    pub fn relative(&self) -> Option<f64> {
        let (a, b) = self.both()?;
        let m = a.abs().max(b.abs());
        Some(if m == 0.0 { 0.0 } else { (b - a).abs() / m })
    }
}

/// A figure the noise rule judges: its key (as in the JSON), both values,
/// how far apart they are (points of a share, or the relative change),
/// and the bound.
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    pub key: String,
    pub pair: Pair,
    pub apart: f64,
    pub bound: f64,
}

impl Judged {
    pub fn beyond(&self) -> bool {
        self.apart > self.bound
    }
}

/// Two runs compared.
#[derive(Clone, Debug, PartialEq)]
pub struct Diff {
    pub before: RunFigures,
    pub after: RunFigures,
    /// Files and directories listed.
    pub top: usize,
}

/// A file's or directory's figures in both runs.
#[derive(Clone, Debug, PartialEq)]
pub struct FileChange {
    pub path: String,
    pub before: Option<FileFigures>,
    pub after: Option<FileFigures>,
}

impl FileChange {
    fn pair(&self, f: impl Fn(&FileFigures) -> Option<f64>) -> Pair {
        // A file one run did not read read nothing there.
        let side = |s: &Option<FileFigures>| match s {
            Some(x) => f(x),
            None => f(&FileFigures { from_storage_bytes: Some(0), ..Default::default() }),
        };
        Pair::of(side(&self.before), side(&self.after))
    }

    pub fn read_s(&self) -> Pair {
        self.pair(|f| Some(f.read_ns as f64 / 1e9))
    }

    pub fn read_bytes(&self) -> Pair {
        self.pair(|f| Some(f.read_bytes as f64))
    }

    pub fn from_storage_bytes(&self) -> Pair {
        self.pair(|f| f.from_storage_bytes.map(|b| b as f64))
    }

    /// Ranked by the change in read time, then in bytes read.
    fn key(&self) -> (u64, u64) {
        let ns = |s: &Option<FileFigures>| s.map_or(0, |f| f.read_ns);
        let b = |s: &Option<FileFigures>| s.map_or(0, |f| f.read_bytes);
        (ns(&self.before).abs_diff(ns(&self.after)), b(&self.before).abs_diff(b(&self.after)))
    }
}

fn add(into: &mut FileFigures, f: &FileFigures) {
    into.read_ns += f.read_ns;
    into.read_bytes += f.read_bytes;
    into.from_storage_bytes = match (into.from_storage_bytes, f.from_storage_bytes) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
}

/// The directory a path is in (`/data/train` of `/data/train/x.bin`);
/// `None` for a file known by its inode alone.
fn parent(path: &str) -> Option<&str> {
    let (dir, _) = path.rsplit_once('/')?;
    path.starts_with('/').then_some(if dir.is_empty() { "/" } else { dir })
}

fn by_dir(files: &BTreeMap<String, FileFigures>) -> BTreeMap<String, FileFigures> {
    let mut out: BTreeMap<String, FileFigures> = BTreeMap::new();
    for (path, f) in files {
        if let Some(dir) = parent(path) {
            let d = out
                .entry(dir.to_string())
                .or_insert(FileFigures { from_storage_bytes: f.from_storage_bytes.map(|_| 0), ..Default::default() });
            add(d, f);
        }
    }
    out
}

/// The `top` paths of either run whose reads changed most.
fn changes(
    before: &BTreeMap<String, FileFigures>,
    after: &BTreeMap<String, FileFigures>,
    top: usize,
) -> Vec<FileChange> {
    let mut all: Vec<FileChange> = before
        .keys()
        .chain(after.keys().filter(|k| !before.contains_key(*k)))
        .map(|k| FileChange { path: k.clone(), before: before.get(k).copied(), after: after.get(k).copied() })
        .filter(|c| c.key() != (0, 0))
        .collect();
    all.sort_by(|a, b| b.key().cmp(&a.key()).then_with(|| a.path.cmp(&b.path)));
    all.truncate(top);
    all
}

impl Diff {
    pub fn new(before: RunFigures, after: RunFigures, top: usize) -> Diff {
        Diff { before, after, top }
    }

    pub fn same_command(&self) -> bool {
        self.before.command == self.after.command
    }

    pub fn same_host(&self) -> bool {
        self.before.host == self.after.host
    }

    pub fn wall_s(&self) -> Pair {
        Pair::of(self.before.wall_s(), self.after.wall_s())
    }

    pub fn steps_per_s(&self) -> Pair {
        Pair::of(self.before.steps.map(|s| s.per_s), self.after.steps.map(|s| s.per_s))
    }

    /// The shares compared: those either run has.
    pub fn shares(&self) -> Vec<&'static Share> {
        let has = |s: &Share, r: &RunFigures| r.breakdown.is_some_and(|b| s.shown_in(&b));
        SHARES
            .iter()
            .filter(|s| s.shown_in(&Breakdown::default()) || has(s, &self.before) || has(s, &self.after))
            .collect()
    }

    /// Share `s` of the trainer's time (one of [`SHARES`]).
    pub fn share(&self, s: &Share) -> Pair {
        let of = |r: &RunFigures| r.breakdown.map(|b| (s.of)(&b));
        Pair::of(of(&self.before), of(&self.after))
    }

    fn loader(&self, f: impl Fn(&LoaderFigures) -> Option<f64>) -> Pair {
        Pair::of(self.before.loaders.as_ref().and_then(&f), self.after.loaders.as_ref().and_then(&f))
    }

    pub fn loader_count(&self) -> Pair {
        self.loader(|l| Some(l.count as f64))
    }

    pub fn loader_read_bytes(&self) -> Pair {
        self.loader(|l| Some(l.read_bytes as f64))
    }

    pub fn loader_read_mb_per_s(&self) -> Pair {
        self.loader(|l| l.read_mb_per_s)
    }

    pub fn loader_read_call_mb_per_s(&self) -> Pair {
        self.loader(|l| l.read_call_mb_per_s)
    }

    pub fn loader_read_p50_us(&self) -> Pair {
        self.loader(|l| l.read_p50_ns.map(|n| n as f64 / 1e3))
    }

    pub fn loader_read_p99_us(&self) -> Pair {
        self.loader(|l| l.read_p99_ns.map(|n| n as f64 / 1e3))
    }

    pub fn loader_cache_fraction(&self) -> Pair {
        self.loader(|l| l.cache_fraction)
    }

    pub fn read_bytes(&self) -> Pair {
        Pair::of(Some(self.before.read_bytes as f64), Some(self.after.read_bytes as f64))
    }

    pub fn from_storage_bytes(&self) -> Pair {
        let f = |r: &RunFigures| r.from_storage_bytes.map(|b| b as f64);
        Pair::of(f(&self.before), f(&self.after))
    }

    pub fn hit_ratio(&self) -> Pair {
        Pair::of(self.before.hit_ratio(), self.after.hit_ratio())
    }

    /// The bound on a share: [`NOISE_SHARE`], or [`NOISE_JITTER_S`] over
    /// the shorter run's wall time when more.
    pub fn share_bound(&self) -> f64 {
        let shorter = self.wall_s().both().map(|(a, b)| a.min(b));
        shorter.filter(|&w| w > 0.0).map_or(NOISE_SHARE, |w| NOISE_SHARE.max(NOISE_JITTER_S / w))
    }

    /// The bound on the wall time, relative to the larger: [`NOISE_TIME`],
    /// or [`NOISE_JITTER_S`] over it when more.
    pub fn wall_bound(&self) -> f64 {
        let larger = self.wall_s().both().map(|(a, b)| a.max(b));
        larger.filter(|&w| w > 0.0).map_or(NOISE_TIME, |w| NOISE_TIME.max(NOISE_JITTER_S / w))
    }

    /// The figures the noise rule judges the time by, those both runs
    /// have: each share, the wall time, the steps per second.
    pub fn time_judged(&self) -> Vec<Judged> {
        let (share_bound, wall_bound) = (self.share_bound(), self.wall_bound());
        let mut out = Vec::new();
        let mut judge = |key: String, pair: Pair, apart: Option<f64>, bound: f64| {
            if let Some(apart) = apart {
                out.push(Judged { key, pair, apart, bound });
            }
        };
        for s in self.shares() {
            let p = self.share(s);
            judge(format!("breakdown.{}", s.key), p, p.delta().map(f64::abs), share_bound);
        }
        let w = self.wall_s();
        judge("wall_s".into(), w, w.relative(), wall_bound);
        // Steps counted the same way in both: else not comparable.
        let same_source = matches!((self.before.steps, self.after.steps), (Some(a), Some(b)) if a.from == b.from);
        let s = self.steps_per_s();
        judge("steps_per_s".into(), s, s.relative().filter(|_| same_source), NOISE_TIME);
        out
    }

    /// The figures of the reads judged against their noise: bytes from
    /// storage, the page-cache hit ratio, the loaders' read throughput.
    pub fn io_judged(&self) -> Vec<Judged> {
        let mut out = Vec::new();
        let s = self.from_storage_bytes();
        if let Some((a, b)) = s.both() {
            // Beyond the share and the floor: the smaller of the two
            // apart-ness figures over its bound.
            let read = self.before.read_bytes.max(self.after.read_bytes) as f64;
            let rel = s.relative().unwrap_or(0.0) / NOISE_STORAGE;
            let abs = (b - a).abs() / NOISE_STORAGE_BYTES.max(NOISE_HIT * read);
            out.push(Judged { key: "io.from_storage_bytes".into(), pair: s, apart: rel.min(abs), bound: 1.0 });
        }
        let h = self.hit_ratio();
        if let Some(d) = h.delta() {
            out.push(Judged { key: "io.hit_ratio".into(), pair: h, apart: d.abs(), bound: NOISE_HIT });
        }
        let r = self.loader_read_mb_per_s();
        if let Some(rel) = r.relative() {
            out.push(Judged { key: "loaders.read_mb_per_s".into(), pair: r, apart: rel, bound: NOISE_TIME });
        }
        out
    }

    /// Whether the runs' time differs by noise only: every judged figure
    /// within its bound. `None` when the two runs have no figure in common.
    pub fn noise_only(&self) -> Option<bool> {
        let j = self.time_judged();
        (!j.is_empty()).then(|| j.iter().all(|j| !j.beyond()))
    }

    /// Epochs both runs have (by name, the first of a name): (before, after).
    pub fn epochs(&self) -> Vec<(&EpochFigures, &EpochFigures)> {
        let mut after: std::collections::HashMap<&str, &EpochFigures> = std::collections::HashMap::new();
        for e in &self.after.epochs {
            after.entry(e.name.as_str()).or_insert(e);
        }
        self.before.epochs.iter().filter_map(|b| after.get(b.name.as_str()).map(|a| (b, *a))).collect()
    }

    /// Ranks both runs have (by rank): (before, after).
    pub fn ranks(&self) -> Vec<(&RankFigures, &RankFigures)> {
        let after: std::collections::HashMap<usize, &RankFigures> =
            self.after.ranks.iter().rev().map(|r| (r.rank, r)).collect();
        self.before.ranks.iter().filter_map(|b| after.get(&b.rank).map(|a| (b, *a))).collect()
    }

    pub fn files(&self) -> Vec<FileChange> {
        changes(&self.before.files, &self.after.files, self.top)
    }

    pub fn directories(&self) -> Vec<FileChange> {
        changes(&by_dir(&self.before.files), &by_dir(&self.after.files), self.top)
    }

    /// What differs between the runs besides their figures (`commands`,
    /// `hosts`, `details (full and summary)`); empty when nothing does.
    pub fn differences(&self) -> Vec<&'static str> {
        let mut differ = Vec::new();
        if !self.same_command() {
            differ.push("commands");
        }
        if !self.same_host() {
            differ.push("hosts");
        }
        if self.before.detail != self.after.detail {
            differ.push("details (full and summary)");
        }
        differ
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acc::steps::StepFrom;
    use serde_json::{json, Value};

    fn breakdown(data_wait: f64, on_cpu: f64) -> Breakdown {
        Breakdown { data_wait, on_cpu, other: 1.0 - data_wait - on_cpu, ..Default::default() }
    }

    fn steps(per_s: f64) -> Option<StepRate> {
        Some(StepRate { per_s, points: 100, from: StepFrom::Marks })
    }

    fn run(file: &str, wall_s: f64, per_s: f64, b: Breakdown) -> RunFigures {
        RunFigures {
            file: file.into(),
            command: vec!["python3".into(), "train.py".into()],
            host: "node0".into(),
            kernel: "6.18".into(),
            cpus: 2,
            started: String::new(),
            detail: "full",
            complete: true,
            lost: 0,
            warnings: Vec::new(),
            wall_ns: Some((wall_s * 1e9) as u64),
            trainer_pid: Some(10),
            steps: steps(per_s),
            kind: b.kind(),
            verdict: String::new(),
            breakdown: Some(b),
            loaders: Some(LoaderFigures {
                kind: "processes",
                word: "worker",
                count: 8,
                read_bytes: 1 << 30,
                read_mb_per_s: Some(100.0),
                read_call_mb_per_s: Some(400.0),
                read_p50_ns: Some(50_000),
                read_p99_ns: Some(900_000),
                cache_fraction: Some(0.0),
            }),
            read_bytes: 1 << 30,
            during_reads: Some(1 << 30),
            from_storage_bytes: Some(1 << 30),
            epochs: Vec::new(),
            ranks: Vec::new(),
            files: BTreeMap::new(),
        }
    }

    /// From a log: steps from the trainer's marks, the files, and the
    /// worker's data reads (not its wait on a pipe) in its latency.
    #[test]
    fn figures_of_a_log() {
        use mltrace_log::*;
        use std::io::Cursor;
        let header = Header { root_pid: 10, command: vec!["train".into()], ..Default::default() };
        let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
        w.push(&Record::Fork(Fork { ts: 1, pid: 10, tid: 10, parent_pid: 1, parent_tid: 1, thread: false })).unwrap();
        w.push(&Record::Fork(Fork { ts: 2, pid: 11, tid: 11, parent_pid: 10, parent_tid: 10, thread: false })).unwrap();
        for (i, (path, kind, dur)) in [
            (&b"/data/a.bin"[..], FileKind::Regular, 40_000),
            (b"/data/a.bin", FileKind::Regular, 60_000),
            (b"pipe:[7]", FileKind::Pipe, 900_000_000),
            (b"/usr/lib/python3/os.py", FileKind::Regular, 5_000_000),
        ]
        .into_iter()
        .enumerate()
        {
            w.push_with(|e| {
                Record::Io(Io {
                    ts: 10 + i as u64,
                    dur,
                    pid: 11,
                    tid: 11,
                    op: IoOp::Read,
                    path: e.intern(path),
                    kind,
                    requested: 4096,
                    ret: 4096,
                    ..Default::default()
                })
            })
            .unwrap();
        }
        for k in 0..5u64 {
            w.push_with(|e| {
                Record::Mark(Mark {
                    ts: 1_000 + k * 100_000_000,
                    name: e.intern(b"step"),
                    value: e.intern(b"null"),
                    rank: -1,
                    pid: 10,
                })
            })
            .unwrap();
        }
        let log = w.finish(&Trailer { exit_status: Some(0), ..Default::default() }).unwrap();
        let s = Stats::from_reader(&mut LogReader::new(std::path::Path::new("t"), Cursor::new(log)).unwrap()).unwrap();
        let h = s.processes.iter().find(|p| p.pid == 11).unwrap().loader_read_latency.as_ref().unwrap();
        assert_eq!((h.count(), h.max()), (2, 60_000));
        let r = RunFigures::of(&s, "t.bin");
        let steps = r.steps.unwrap();
        assert_eq!((steps.from, steps.points), (StepFrom::Marks, 5));
        assert!((steps.per_s - 10.0).abs() < 1e-9, "{steps:?}");
        assert_eq!(
            r.files["/data/a.bin"],
            FileFigures { read_ns: 100_000, read_bytes: 8192, from_storage_bytes: None }
        );
        assert!(!r.files.contains_key("pipe:[7]"));
        assert_eq!((r.kind, r.breakdown, r.from_storage_bytes), ("no-scheduling-data", None, None));
        assert_eq!(r.command, ["train"]);
        assert!(r.complete);
    }

    #[test]
    fn pairs() {
        let p = Pair::of(Some(4.0), Some(5.0));
        assert_eq!((p.delta(), p.ratio(), p.relative()), (Some(1.0), Some(1.25), Some(0.2)));
        // The same apart whichever run comes first.
        assert_eq!(Pair::of(Some(5.0), Some(4.0)).relative(), Some(0.2));
        assert_eq!(Pair::of(Some(0.0), Some(3.0)).ratio(), None);
        assert_eq!(Pair::of(Some(0.0), Some(0.0)).relative(), Some(0.0));
        assert_eq!(Pair::of(None, Some(3.0)).delta(), None);
        let j = Pair::of(Some(1.0), None).json();
        assert_eq!(j, json!({"before": 1.0, "after": null, "delta": null, "ratio": null}));
    }

    #[test]
    fn the_conclusion_states_the_measured_figures() {
        let before = run("a.bin", 100.0, 3.1, breakdown(0.41, 0.5));
        let mut after = run("b.bin", 62.0, 5.0, breakdown(0.06, 0.85));
        after.loaders.as_mut().unwrap().read_mb_per_s = Some(210.0);
        after.from_storage_bytes = Some(1 << 30);
        let d = Diff::new(before, after, TOP);
        assert_eq!(d.noise_only(), Some(false));
        assert_eq!(
            d.conclusion(),
            "input-bound -> cpu-bound: data wait 41% -> 6% of the trainer's time; on CPU 50% -> 85%; \
             steps/s 3.10 -> 5.00 (+61%); its 8 workers read 100 MB/s -> 210 MB/s (2.1x)"
        );
        let j = d.to_json();
        assert_eq!(j["kind"], json!({"before": "input-bound", "after": "cpu-bound", "changed": true}));
        assert_eq!(j["noise"]["only_noise"], false);
        let beyond: Vec<&str> = j["noise"]["time"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["beyond"] == true)
            .map(|j| j["key"].as_str().unwrap())
            .collect();
        assert_eq!(beyond, ["breakdown.data_wait", "breakdown.on_cpu", "wall_s", "steps_per_s"]);
        assert!((j["steps_per_s"]["ratio"].as_f64().unwrap() - 5.0 / 3.1).abs() < 1e-9);
        assert!(j["same_command"] == true && j["same_host"] == true);
    }

    /// Within every bound: noise only, and said so with the figures.
    #[test]
    fn within_the_bounds_is_noise() {
        let before = run("a.bin", 100.0, 10.0, breakdown(0.30, 0.50));
        let after = run("b.bin", 104.0, 9.6, breakdown(0.32, 0.48));
        let d = Diff::new(before.clone(), after.clone(), TOP);
        assert_eq!(d.noise_only(), Some(true));
        let c = d.conclusion();
        assert!(c.starts_with("no measurable difference: every share of the trainer's time within 0.03"), "{c}");
        assert!(c.contains("wall time within 5% (100.00 s -> 104.00 s)"), "{c}");
        assert!(c.contains("steps/s within 5% (10.0 -> 9.60)"), "{c}");
        assert!(!c.contains("but"), "{c}");
        // One share just past its bound is a difference.
        let d = Diff::new(before.clone(), run("b.bin", 100.0, 10.0, breakdown(0.34, 0.46)), TOP);
        assert_eq!(d.noise_only(), Some(false));
        assert!(d.conclusion().starts_with("data wait 30% -> 34% of the trainer's time; on CPU 50% -> 46%"));
        // Steps counted another way are not compared: the wall time decides.
        let mut other = after.clone();
        other.steps = Some(StepRate { per_s: 20.0, points: 9, from: StepFrom::Batches });
        let d = Diff::new(before.clone(), other, TOP);
        assert_eq!(d.noise_only(), Some(true));
        assert!(!d.time_judged().iter().any(|j| j.key == "steps_per_s"));
        // The reads differing beyond theirs is said, the time still noise.
        let mut warm = after;
        warm.from_storage_bytes = Some(0);
        warm.during_reads = Some(0);
        let d = Diff::new(before, warm, TOP);
        assert_eq!(d.noise_only(), Some(true));
        let c = d.conclusion();
        assert!(c.ends_with("; but its reads differ: from storage 1.0 GiB -> 0 B, page-cache hits 0% -> 100%"), "{c}");
    }

    /// Bytes from storage differ only when past both the share and the floor.
    #[test]
    fn storage_needs_both_bounds() {
        let mut a = run("a.bin", 10.0, 10.0, breakdown(0.3, 0.5));
        a.read_bytes = 100 << 20;
        let mut b = a.clone();
        a.from_storage_bytes = Some(100 << 10);
        b.from_storage_bytes = Some(900 << 10);
        let storage = |a: &RunFigures, b: &RunFigures| {
            let d = Diff::new(a.clone(), b.clone(), TOP);
            d.io_judged().into_iter().find(|j| j.key == "io.from_storage_bytes").unwrap().beyond()
        };
        assert!(!storage(&a, &b), "800 KiB apart is under the 1 MiB floor");
        a.from_storage_bytes = Some(100 << 20);
        b.from_storage_bytes = Some(105 << 20);
        assert!(!storage(&a, &b), "5% apart");
        b.from_storage_bytes = Some(120 << 20);
        assert!(storage(&a, &b));
        // Nor when it moves the hit ratio of what the job read by less
        // than its bound: 1.1 MiB of 134 MB read, not of 10 MiB.
        a.from_storage_bytes = Some(8 << 10);
        b.from_storage_bytes = Some(1153 << 10);
        (a.read_bytes, b.read_bytes) = (134_000_000, 134_000_000);
        assert!(!storage(&a, &b));
        (a.read_bytes, b.read_bytes) = (10 << 20, 10 << 20);
        assert!(storage(&a, &b), "of 10 MiB read, 1.1 MiB is 11%");
    }

    #[test]
    fn epochs_ranks_files_and_directories() {
        let mut before = run("a.bin", 10.0, 10.0, breakdown(0.3, 0.5));
        let mut after = before.clone();
        let epoch = |name: &str, s: u64| EpochFigures {
            name: name.into(),
            duration_ns: s * 1_000_000_000,
            kind: "input-bound",
            breakdown: Some(breakdown(0.3, 0.5)),
            read_mb_per_s: Some(10.0),
            from_storage_bytes: None,
            cache_hit_fraction: None,
        };
        before.epochs = vec![epoch("EPOCH 1", 5), epoch("EPOCH 2", 5)];
        after.epochs = vec![epoch("EPOCH 2", 3), epoch("EPOCH 3", 3)];
        let rank = |rank, pid| RankFigures { rank, pid, steps: steps(4.0), breakdown: None, read_mb_per_s: None };
        before.ranks = vec![rank(0, 100), rank(1, 101)];
        after.ranks = vec![rank(1, 201), rank(0, 200)];
        let f = |ns: u64, b: u64| FileFigures { read_ns: ns, read_bytes: b, from_storage_bytes: Some(b / 2) };
        before.files = [
            ("/data/a/1.bin", f(9_000_000, 100)),
            ("/data/a/2.bin", f(1_000_000, 100)),
            ("/data/b/1.bin", f(500, 7000)),
            ("/same.bin", f(7, 7)),
            ("[dev 254:1 inode 12]", f(8_000_000, 100)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        after.files =
            [("/data/a/1.bin", f(500_000, 100)), ("/data/c/new.bin", f(3_000_000, 10)), ("/same.bin", f(7, 7))]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
        let d = Diff::new(before, after, 4);
        let names: Vec<(&str, &str)> = d.epochs().iter().map(|(b, a)| (b.name.as_str(), a.name.as_str())).collect();
        assert_eq!(names, [("EPOCH 2", "EPOCH 2")]);
        let pids: Vec<(u32, u32)> = d.ranks().iter().map(|(b, a)| (b.pid, a.pid)).collect();
        assert_eq!(pids, [(100, 200), (101, 201)]);
        // By the change in read time, then bytes; unchanged files left out.
        let files: Vec<String> = d.files().iter().map(|c| c.path.clone()).collect();
        assert_eq!(files, ["/data/a/1.bin", "[dev 254:1 inode 12]", "/data/c/new.bin", "/data/a/2.bin"]);
        let gone = d.files().into_iter().find(|c| c.path == "/data/a/2.bin").unwrap();
        assert_eq!(gone.read_bytes(), Pair::of(Some(100.0), Some(0.0)));
        assert_eq!(gone.from_storage_bytes(), Pair::of(Some(50.0), Some(0.0)));
        // Directories sum their files; one known by its inode is in none.
        let dirs: Vec<(String, Pair)> = d.directories().iter().map(|c| (c.path.clone(), c.read_s())).collect();
        assert_eq!(dirs[0], ("/data/a".to_string(), Pair::of(Some(0.01), Some(0.0005))));
        assert_eq!(dirs.iter().map(|d| d.0.as_str()).collect::<Vec<_>>(), ["/data/a", "/data/c", "/data/b"]);
        let text = d.render();
        assert!(text.contains("per epoch (1 of 2 before and 2 after, those in both):"), "{text}");
        assert!(text.contains("EPOCH 2  5.00 s -> 3.00 s (-40%)"), "{text}");
        assert!(text.contains("per rank (2 in both):"), "{text}");
        let j = d.to_json();
        assert_eq!(j["files"].as_array().unwrap().len(), 4);
        assert_eq!(j["files"][0]["read_bytes"], json!({"before": 100, "after": 100, "delta": 0, "ratio": 1.0}));
        assert_eq!(j["epochs"][0]["duration_s"]["delta"], -2.0);
        assert_eq!(j["ranks"][1]["pid"], json!({"before": 101, "after": 201}));
    }

    /// Every key `diff --json` writes is named in docs/diff.md's section on it.
    #[test]
    fn every_json_key_is_documented() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/diff.md")).unwrap();
        let section = doc.split("## `diff --json`").nth(1).unwrap().split("\n## ").next().unwrap();
        let named: std::collections::HashSet<&str> = section
            .split('`')
            .skip(1)
            .step_by(2)
            .flat_map(|s| s.split(|c: char| !(c.is_alphanumeric() || c == '_')))
            .collect();
        let mut before = run("a.bin", 10.0, 10.0, breakdown(0.3, 0.5));
        let e = EpochFigures {
            name: "EPOCH 1".into(),
            duration_ns: 1,
            kind: "mixed",
            breakdown: None,
            read_mb_per_s: None,
            from_storage_bytes: None,
            cache_hit_fraction: None,
        };
        before.epochs = vec![e];
        before.ranks = vec![RankFigures { rank: 0, pid: 1, steps: None, breakdown: None, read_mb_per_s: None }];
        before.files.insert("/d/f".into(), FileFigures { read_ns: 1, read_bytes: 1, from_storage_bytes: None });
        let d = Diff::new(before.clone(), run("b.bin", 20.0, 10.0, breakdown(0.3, 0.5)), TOP);
        fn walk(v: &Value, path: &str, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    for (k, v) in m {
                        out.push(format!("{path}{k}"));
                        walk(v, &format!("{path}{k}."), out);
                    }
                }
                Value::Array(a) => a.iter().for_each(|v| walk(v, path, out)),
                _ => {}
            }
        }
        let mut keys = Vec::new();
        walk(&d.to_json(), "", &mut keys);
        let missing: Vec<&String> = keys.iter().filter(|k| !named.contains(k.rsplit('.').next().unwrap())).collect();
        assert!(missing.is_empty(), "not in docs/diff.md: {missing:?}");
        assert!(keys.len() > 100, "{keys:?}");
    }

    #[test]
    fn different_commands_and_hosts_are_compared_and_said() {
        let before = run("a.bin", 10.0, 10.0, breakdown(0.3, 0.5));
        let mut after = before.clone();
        after.command.push("--workers=16".into());
        after.host = "node7".into();
        let d = Diff::new(before, after, TOP);
        assert!(!d.same_command() && !d.same_host());
        let text = d.render();
        assert!(text.contains("note:     the two runs have different commands and hosts"), "{text}");
        assert_eq!(d.noise_only(), Some(true));
    }

    #[test]
    fn without_scheduling_only_the_time_is_judged() {
        let mut before = run("a.bin", 10.0, 10.0, breakdown(0.3, 0.5));
        before.breakdown = None;
        before.steps = None;
        let after = run("b.bin", 20.0, 10.0, breakdown(0.3, 0.5));
        let d = Diff::new(before.clone(), after, TOP);
        let keys: Vec<String> = d.time_judged().into_iter().map(|j| j.key).collect();
        assert_eq!(keys, ["wall_s"]);
        assert!(d.conclusion().contains("wall time 10.00 s -> 20.00 s (+100%)"), "{}", d.conclusion());
        before.wall_ns = None;
        let d = Diff::new(before.clone(), before, TOP);
        assert_eq!(d.noise_only(), None);
        assert!(d.conclusion().starts_with("nothing to compare"));
    }
}
