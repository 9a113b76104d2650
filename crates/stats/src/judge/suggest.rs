//! What to try next, after the verdict: at most three suggestions, each
//! from figures the log holds and said with them, none when the evidence
//! is not there. Each rule is a function of [`Evidence`] (gathered once
//! from the verdict's own figures) with its thresholds as constants;
//! docs/verdict.md lists them and why.

use std::sync::Arc;

use serde_json::Value;

use crate::judge::verdict::{Breakdown, Workers};
use crate::{duration, pct, Stats};

/// The trainer waited for data at least this share of its time: below it
/// its input is not what holds it back, and nothing is suggested.
pub const DATA_WAIT_MIN: f64 = 0.1;
/// At most this many suggestions, those explaining most first.
pub const MAX_SUGGESTIONS: usize = 3;

/// `more_workers`: the loading threads were on CPU at least this share of
/// their time...
pub const LOADER_CPU_MIN: f64 = 0.8;
/// ...while at least this many CPUs sat idle on average (idle or iowait).
pub const IDLE_CPUS_MIN: f64 = 0.5;

/// `deeper_prefetch`: the loading threads were asleep (not on CPU, not
/// waiting for one, not in uninterruptible I/O) at least this share.
pub const LOADER_SLEEP_MIN: f64 = 0.5;

/// `storage_bound`: the loading threads were in reads or in
/// uninterruptible I/O sleep at least this share of their time...
pub const LOADER_STORAGE_MIN: f64 = 0.5;
/// ...the page cache held at most this share of what they read (when the
/// page-cache probe says)...
pub const LOADER_CACHE_MAX: f64 = 0.5;
/// ...and the disk that read most had requests in flight at least this
/// share of the recording: one reader keeps a disk busy only while each
/// request is in it (measured: 52-68%), an idle one is at 0-2%.
pub const DISK_BUSY_MIN: f64 = 0.3;

/// `slow_path`: one file (or, failing that, one directory) took at least
/// this share of the loaders' read time...
pub const PATH_SHARE_MIN: f64 = 0.5;
/// ...and their reads took at least this share of their time.
pub const READS_MATTER: f64 = 0.2;

/// `metadata`: opens, closes and metadata calls (stat, getdents64...)
/// took at least this share of the loaders' time in calls on their data
/// files...
pub const META_SHARE_MIN: f64 = 0.5;
/// ...and those calls at least this share of their time.
pub const FILE_TIME_MATTER: f64 = 0.1;

/// `gil`: the trainer waited for its GIL at least this share of its time
/// while it had loader threads (a tenth, as for data: beyond what two
/// recordings of one job differ by).
pub const GIL_WAIT_MIN: f64 = 0.1;

/// One suggestion: the rule that made it, its sentence, what it explains
/// (the share of the loaders' time its cause accounts for: the rank) and
/// the figures it used.
#[derive(Clone, Debug, PartialEq)]
pub struct Suggestion {
    pub rule: &'static str,
    pub text: String,
    pub explains: f64,
    pub figures: Vec<(&'static str, Value)>,
}

/// The disk the job read most from, as its counters sampled it.
#[derive(Clone, Debug, PartialEq)]
pub struct Disk {
    pub name: String,
    /// Mean share of the time it had requests in flight.
    pub busy: f64,
    /// Mean bytes read per second.
    pub read_per_s: f64,
}

/// A data file the loaders read: the time all calls spent reading it, the
/// bytes the loaders read of it, and the Python lines those calls came
/// from with their time on it (none without stacks).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathRead {
    pub path: String,
    pub read_ns: u64,
    pub bytes: u64,
    pub lines: Vec<(Arc<str>, u64)>,
}

/// What the rules look at, from the verdict's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    /// The trainer's share of its time waiting for data.
    pub data_wait: f64,
    /// Its share waiting for its GIL, and its loader threads.
    pub gil_wait: f64,
    pub loader_threads: usize,
    /// Loaders alive at once, what one is called, and whether threads.
    pub loaders: usize,
    pub word: &'static str,
    pub threads: bool,
    /// Shares of the loading threads' time (see [`Workers::loading`]).
    pub cpu: f64,
    pub runnable: f64,
    pub sleep: f64,
    pub io_wait: f64,
    /// Their time in read calls on files, and in opens, closes and
    /// metadata calls on data files, as shares of their time; and the raw
    /// figures.
    pub reads: f64,
    pub meta: f64,
    pub read_ns: u64,
    pub meta_ns: u64,
    pub opens: u64,
    pub cache_fraction: Option<f64>,
    pub cpus: u32,
    /// The machine's share of CPU time idle (idle and iowait), sampled.
    pub cpu_idle: Option<f64>,
    pub disk: Option<Disk>,
    pub paths: Vec<PathRead>,
    /// The Python line with most of the loaders' time in opens, closes
    /// and metadata calls, and its share of `meta_ns`.
    pub meta_line: Option<(String, f64)>,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl Evidence {
    /// `its 2 workers`, `its 1 loader thread`.
    fn who(&self) -> String {
        let s = if self.loaders == 1 { "" } else { "s" };
        format!("its {} {}{s}", self.loaders, self.word)
    }

    fn was(&self) -> &'static str {
        if self.loaders == 1 {
            "was"
        } else {
            "were"
        }
    }

    /// Gathered from `stats`, the trainer's breakdown and its loaders.
    pub fn of(stats: &Stats, b: &Breakdown, w: &Workers) -> Evidence {
        let loading = w.loading;
        let share = |ns: u64| loading.fraction(ns).unwrap_or(0.0);
        // The trainer's host's counters (a merged log names each host's).
        let host = stats.trainer().map_or(0, |t| mltrace_log::host_of(t.pid));
        let cpu_group = stats.on_host(host, "CPU".into()).into_owned();
        let disk_prefix = stats.on_host(host, "Disk ".into()).into_owned();
        let mean = |group: &str, name: &str| {
            stats.utilisation.iter().find(|((g, n, _), _)| g == group && n == name).map(|(_, (s, n, _))| s / *n as f64)
        };
        let cpu_idle = match (mean(&cpu_group, "idle"), mean(&cpu_group, "iowait")) {
            (Some(i), w) => Some(((i + w.unwrap_or(0.0)) / 100.0).clamp(0.0, 1.0)),
            _ => None,
        };
        // The disk that read most: the one the loaders waited on, if any.
        let disk = stats
            .utilisation
            .iter()
            .filter(|((g, n, _), _)| g.starts_with(&disk_prefix) && n == "read")
            .filter_map(|((g, _, _), (s, n, _))| {
                let read = s / *n as f64;
                let busy = mean(g, "utilisation")? / 100.0;
                let name = g.strip_prefix(&disk_prefix).unwrap_or(g);
                let name = name.split(" (").next().unwrap_or(name).to_string();
                Some(Disk { name, busy: busy.clamp(0.0, 1.0), read_per_s: read })
            })
            .filter(|d| d.read_per_s > 0.0)
            .max_by(|a, b| a.read_per_s.total_cmp(&b.read_per_s));
        let mut labels = Default::default();
        let paths = stats
            .worker_files
            .iter()
            .filter(|(p, _)| mltrace_model::procs::is_data_path(p.as_bytes()))
            .map(|(p, &bytes)| PathRead {
                path: p.clone(),
                read_ns: stats.files.get(p).map_or(0, |f| f.read_ns),
                bytes,
                lines: stats.python_lines_on(p, &mut labels),
            })
            .collect();
        // The loaders `w` counts: the trainer's loader threads, or its workers.
        let meta_line = stats.trainer().and_then(|t| {
            let workers: Vec<u32> = stats.workers_of(t).iter().map(|p| p.pid).collect();
            let threads = w.kind == "threads";
            let is_loader = |pid: u32, tid: u32| match threads {
                true => pid == t.pid && t.loader_threads.contains(&tid),
                false => workers.contains(&pid),
            };
            stats.python_meta_line(is_loader, w.meta_ns)
        });
        Evidence {
            data_wait: b.data_wait,
            gil_wait: b.gil_wait.unwrap_or(0.0),
            loader_threads: stats.trainer().map_or(0, |t| t.loader_threads.len()),
            loaders: w.at_once,
            word: w.word,
            threads: w.kind == "threads",
            cpu: share(loading.cpu),
            runnable: share(loading.runnable),
            sleep: share(loading.sleep),
            io_wait: share(loading.io_wait),
            reads: share(w.read_ns).min(1.0),
            meta: share(w.meta_ns).min(1.0),
            read_ns: w.read_ns,
            meta_ns: w.meta_ns,
            opens: w.opens,
            cache_fraction: w.cache_fraction,
            cpus: stats.header.cpu_count,
            cpu_idle,
            disk,
            paths,
            meta_line,
        }
    }
}

/// `, most of it from dataset.py:41 in Dataset.__getitem__` (`, 30% of
/// it from ...` when under half), and its figures; nothing without a line.
fn from_line(line: &Option<(String, f64)>) -> (String, Vec<(&'static str, Value)>) {
    let Some((label, share)) = line else { return (String::new(), Vec::new()) };
    let most = if *share >= 0.5 { "most".to_string() } else { pct(*share) };
    let figures = vec![("python_line", label.clone().into()), ("python_line_share", (*share).into())];
    (format!(", {most} of it from {label}"), figures)
}

/// Loaders on CPU nearly all their time while CPUs sat idle: more of them.
pub fn more_workers(e: &Evidence) -> Option<Suggestion> {
    let idle = e.cpu_idle?;
    let idle_cpus = idle * f64::from(e.cpus);
    if e.cpu < LOADER_CPU_MIN || idle_cpus < IDLE_CPUS_MIN {
        return None;
    }
    // As many more as the idle CPUs hold, each using what one uses now.
    let more = ((idle_cpus / e.cpu.max(0.01)).floor() as usize).max(1);
    let to = e.loaders + more;
    let (head, what, knob) = if e.threads {
        (format!("more {}s", e.word), format!("{} {}s", to, e.word), "a bigger pool, num_parallel_calls")
    } else {
        ("more workers".to_string(), format!("{to} workers"), "num_workers")
    };
    Some(Suggestion {
        rule: "more_workers",
        text: format!(
            "{head}: {} {} on CPU {} of {} time while {:.1} of {} CPUs sat idle ({}): {what} ({knob}) would use them",
            e.who(),
            e.was(),
            pct(e.cpu),
            if e.loaders == 1 { "its" } else { "their" },
            idle_cpus,
            e.cpus,
            pct(idle),
        ),
        explains: e.cpu,
        figures: vec![
            ("loaders", e.loaders.into()),
            ("loaders_cpu_fraction", e.cpu.into()),
            ("cpu_idle_fraction", idle.into()),
            ("idle_cpus", idle_cpus.into()),
            ("cpus", e.cpus.into()),
            ("suggested_loaders", to.into()),
        ],
    })
}

/// Loaders asleep (not on CPU, not in I/O) while the trainer waited for
/// data: they could have worked ahead.
pub fn deeper_prefetch(e: &Evidence) -> Option<Suggestion> {
    if e.sleep < LOADER_SLEEP_MIN {
        return None;
    }
    Some(Suggestion {
        rule: "deeper_prefetch",
        text: format!(
            "a deeper prefetch: {} {} asleep {} of {} time (not on CPU, not in I/O) while the trainer waited for data \
             {} of its own: let {} work further ahead (prefetch_factor, a deeper queue)",
            e.who(),
            e.was(),
            pct(e.sleep),
            if e.loaders == 1 { "its" } else { "their" },
            pct(e.data_wait),
            if e.loaders == 1 { "it" } else { "them" },
        ),
        explains: e.sleep,
        figures: vec![
            ("loaders", e.loaders.into()),
            ("loaders_sleep_fraction", e.sleep.into()),
            ("data_wait_fraction", e.data_wait.into()),
        ],
    })
}

/// Loader threads that decode holding the GIL take it from the trainer at
/// every switch interval (and when a batch comes): it waits for the GIL.
pub fn gil(e: &Evidence) -> Option<Suggestion> {
    if e.gil_wait < GIL_WAIT_MIN || e.loader_threads == 0 {
        return None;
    }
    let n = e.loader_threads;
    Some(Suggestion {
        rule: "gil",
        text: format!(
            "the GIL: its {n} loader thread{} held the GIL while the trainer waited for it {} of its time: use worker \
             processes (DataLoader num_workers > 0) or a decode that releases the GIL",
            if n == 1 { "" } else { "s" },
            pct(e.gil_wait)
        ),
        explains: e.gil_wait,
        figures: vec![("loader_threads", e.loader_threads.into()), ("gil_wait_fraction", e.gil_wait.into())],
    })
}

/// Loaders waiting on reads (in the calls, or in uninterruptible sleep)
/// with the disk busy: storage is the limit.
pub fn storage_bound(e: &Evidence) -> Option<Suggestion> {
    let d = e.disk.as_ref()?;
    let waiting = e.reads.max(e.io_wait);
    let missed = e.cache_fraction.is_none_or(|c| c <= LOADER_CACHE_MAX);
    if waiting < LOADER_STORAGE_MIN || !missed || d.busy < DISK_BUSY_MIN {
        return None;
    }
    let cache = e.cache_fraction.map(|c| format!(", {} of the bytes from the page cache", pct(c))).unwrap_or_default();
    Some(Suggestion {
        rule: "storage_bound",
        text: format!(
            "storage-bound: {} {} in reads {} of {} time ({} in uninterruptible I/O sleep{cache}) while disk {} was \
             busy {} of the time, reading {:.1} MB/s: serve the data from memory (a warm page cache, more RAM), a \
             local copy, or faster storage",
            e.who(),
            e.was(),
            pct(e.reads),
            if e.loaders == 1 { "its" } else { "their" },
            pct(e.io_wait),
            d.name,
            pct(d.busy),
            d.read_per_s / 1e6,
        ),
        explains: waiting,
        figures: vec![
            ("loaders", e.loaders.into()),
            ("loaders_read_fraction", e.reads.into()),
            ("loaders_io_wait_fraction", e.io_wait.into()),
            ("cache_fraction", e.cache_fraction.into()),
            ("disk", d.name.clone().into()),
            ("disk_busy_fraction", d.busy.into()),
            ("disk_read_mb_per_s", (d.read_per_s / 1e6).into()),
        ],
    })
}

/// The directory a path is in (`/` for one at the root).
fn parent(path: &str) -> Option<&str> {
    let (dir, _) = path.rsplit_once('/')?;
    path.starts_with('/').then_some(if dir.is_empty() { "/" } else { dir })
}

/// One file, or else one directory, taking most of the loaders' read
/// time, among others they read.
pub fn slow_path(e: &Evidence) -> Option<Suggestion> {
    let total: u64 = e.paths.iter().map(|p| p.read_ns).sum();
    let bytes: u64 = e.paths.iter().map(|p| p.bytes).sum();
    if e.reads < READS_MATTER || total == 0 || e.paths.len() < 2 {
        return None;
    }
    let top = |list: Vec<PathRead>| list.into_iter().max_by_key(|p| (p.read_ns, std::cmp::Reverse(p.path.clone())));
    let file = top(e.paths.clone()).filter(|p| p.read_ns as f64 >= PATH_SHARE_MIN * total as f64);
    let (kind, p) = match file {
        Some(p) => ("file", p),
        None => {
            let mut dirs: Vec<PathRead> = Vec::new();
            for f in &e.paths {
                let Some(d) = parent(&f.path) else { continue };
                match dirs.iter_mut().find(|x| x.path == d) {
                    Some(x) => {
                        x.read_ns += f.read_ns;
                        x.bytes += f.bytes;
                        x.lines.extend(f.lines.iter().cloned());
                    }
                    None => dirs.push(PathRead { path: d.to_string(), ..f.clone() }),
                }
            }
            if dirs.len() < 2 {
                return None;
            }
            ("directory", top(dirs).filter(|p| p.read_ns as f64 >= PATH_SHARE_MIN * total as f64)?)
        }
    };
    let share = p.read_ns as f64 / total as f64;
    let of_bytes = if bytes > 0 { p.bytes as f64 / bytes as f64 } else { 0.0 };
    let (from, line_figures) =
        from_line(&crate::acc::python_lines::top_line(p.lines.iter().map(|(l, ns)| (l.clone(), *ns)), p.read_ns));
    let mut figures = vec![
        ("path", p.path.clone().into()),
        ("kind", kind.into()),
        ("read_time_share", share.into()),
        ("read_s", secs(p.read_ns).into()),
        ("bytes_share", of_bytes.into()),
        ("loaders_read_fraction", e.reads.into()),
    ];
    figures.extend(line_figures);
    Some(Suggestion {
        rule: "slow_path",
        text: format!(
            "one {kind} is most of the reading: {} took {} of {} read time ({} in all{from}), for {} of the bytes {} \
             read: that is where to look (its storage, its page-cache warmth, its layout)",
            p.path,
            pct(share),
            if e.loaders == 1 { "its loader's" } else { "its loaders'" },
            duration(p.read_ns),
            pct(of_bytes),
            if e.loaders == 1 { "it" } else { "they" },
        ),
        explains: share * e.reads,
        figures,
    })
}

/// Opens, closes and metadata calls taking most of the loaders' time in
/// file calls.
pub fn metadata(e: &Evidence) -> Option<Suggestion> {
    let file_ns = e.read_ns + e.meta_ns;
    if file_ns == 0 || e.reads + e.meta < FILE_TIME_MATTER {
        return None;
    }
    let share = e.meta_ns as f64 / file_ns as f64;
    if share < META_SHARE_MIN {
        return None;
    }
    let each = e.meta_ns.checked_div(e.opens).map_or_else(String::new, |ns| format!(", {} a file", duration(ns)));
    let (from, line_figures) = from_line(&e.meta_line);
    let mut figures = vec![
        ("meta_share", share.into()),
        ("meta_s", secs(e.meta_ns).into()),
        ("read_s", secs(e.read_ns).into()),
        ("opens", e.opens.into()),
        ("loaders_file_time_fraction", (e.reads + e.meta).into()),
    ];
    figures.extend(line_figures);
    Some(Suggestion {
        rule: "metadata",
        text: format!(
            "metadata: opens, closes and metadata calls (stat, getdents64...) took {} of {} time in calls on data \
             files ({}{from}, {} files opened{each}, against {} in reads): many small files; pack them into shards \
             (tar or WebDataset, TFRecord) read in large pieces",
            pct(share),
            if e.loaders == 1 { "its loader's" } else { "its loaders'" },
            duration(e.meta_ns),
            e.opens,
            duration(e.read_ns),
        ),
        explains: e.meta,
        figures,
    })
}

/// Every rule, in a fixed order (ties in what they explain keep it).
const RULES: [fn(&Evidence) -> Option<Suggestion>; 5] =
    [more_workers, deeper_prefetch, storage_bound, slow_path, metadata];

/// The suggestions for `e`, most explaining first, at most
/// [`MAX_SUGGESTIONS`]; or why there are none.
pub fn rules(e: &Evidence) -> (Vec<Suggestion>, Option<String>) {
    // Loader threads holding the GIL slow the trainer whatever its data wait.
    let gil = gil(e);
    if e.data_wait < DATA_WAIT_MIN {
        if let Some(g) = gil {
            return (vec![g], None);
        }
        let why = format!(
            "nothing about its input: the trainer waited for data {} of its time (below {})",
            pct(e.data_wait),
            pct(DATA_WAIT_MIN)
        );
        return (Vec::new(), Some(why));
    }
    let mut all: Vec<Suggestion> = RULES.iter().filter_map(|r| r(e)).chain(gil).collect();
    all.sort_by(|a, b| b.explains.total_cmp(&a.explains));
    all.truncate(MAX_SUGGESTIONS);
    if all.is_empty() {
        let idle = e.cpu_idle.map(|i| format!("; the CPUs were idle {}", pct(i))).unwrap_or_default();
        let why = format!(
            "no rule fits: while the trainer waited for data {}, {} {} on CPU {}, waiting for a CPU {}, asleep {}, in \
             reads {}, in opens, closes and metadata calls {} of {} time{idle}",
            pct(e.data_wait),
            e.who(),
            e.was(),
            pct(e.cpu),
            pct(e.runnable),
            pct(e.sleep),
            pct(e.reads),
            pct(e.meta),
            if e.loaders == 1 { "its" } else { "their" },
        );
        return (all, Some(why));
    }
    (all, None)
}

/// The suggestions for the trainer of `stats`, given its breakdown and
/// its loaders (`None`: it has none).
pub fn suggest(stats: &Stats, b: &Breakdown, w: Option<&Workers>) -> (Vec<Suggestion>, Option<String>) {
    match w {
        None => (Vec::new(), Some("nothing about its input: it has no data loaders".into())),
        Some(w) => rules(&Evidence::of(stats, b, w)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trainer waiting for data half its time, fed by one worker.
    fn base() -> Evidence {
        Evidence { data_wait: 0.5, loaders: 1, word: "worker", cpus: 2, ..Default::default() }
    }

    fn fired(e: &Evidence) -> Vec<&'static str> {
        rules(e).0.iter().map(|s| s.rule).collect()
    }

    #[test]
    fn more_workers_needs_busy_loaders_and_idle_cpus() {
        let e = Evidence { cpu: 0.95, cpu_idle: Some(0.45), ..base() };
        let s = more_workers(&e).unwrap();
        assert!(s.text.contains("on CPU 95% of its time while 0.9 of 2 CPUs sat idle (45%)"), "{}", s.text);
        assert!(s.text.contains("2 workers (num_workers)"), "{}", s.text);
        // Either short of its threshold: none.
        assert!(more_workers(&Evidence { cpu: LOADER_CPU_MIN - 0.01, ..e.clone() }).is_none());
        let busy = IDLE_CPUS_MIN / 2.0 - 0.01;
        assert!(more_workers(&Evidence { cpu_idle: Some(busy), ..e.clone() }).is_none());
        assert!(more_workers(&Evidence { cpu_idle: None, ..e.clone() }).is_none());
        // Four idle CPUs on a 16-CPU machine, two loaders each on one: four more.
        let big = Evidence { loaders: 2, cpus: 16, cpu: 1.0, cpu_idle: Some(0.25), ..e };
        assert_eq!(more_workers(&big).unwrap().figures.last().unwrap().1, 6);
    }

    #[test]
    fn gil_needs_loader_threads_and_a_trainer_waiting_for_its_gil() {
        let e = Evidence { gil_wait: 0.3, loader_threads: 2, ..base() };
        let s = gil(&e).unwrap();
        let held = "its 2 loader threads held the GIL while the trainer waited for it 30% of its time: use worker";
        assert!(s.text.contains(held), "{}", s.text);
        assert_eq!(fired(&e), ["gil"]);
        // Below the data-wait threshold too: the GIL is not data.
        assert_eq!(fired(&Evidence { data_wait: 0.0, ..e.clone() }), ["gil"]);
        assert!(gil(&Evidence { gil_wait: GIL_WAIT_MIN - 0.01, ..e.clone() }).is_none());
        assert!(gil(&Evidence { loader_threads: 0, ..e }).is_none());
    }

    #[test]
    fn deeper_prefetch_needs_sleeping_loaders() {
        let e = Evidence { sleep: 0.8, ..base() };
        assert_eq!(fired(&e), ["deeper_prefetch"]);
        assert!(deeper_prefetch(&Evidence { sleep: LOADER_SLEEP_MIN - 0.01, ..e }).is_none());
    }

    #[test]
    fn storage_bound_needs_waiting_loaders_and_a_busy_disk() {
        let disk = |busy| Some(Disk { name: "vda".into(), busy, read_per_s: 12e6 });
        let e = Evidence { reads: 0.9, io_wait: 0.85, cache_fraction: Some(0.0), disk: disk(0.9), ..base() };
        let s = storage_bound(&e).unwrap();
        assert!(s.text.contains("in reads 90% of its time (85% in uninterruptible I/O sleep, 0% of the bytes from"));
        assert!(s.text.contains("disk vda was busy 90% of the time, reading 12.0 MB/s"), "{}", s.text);
        assert!(storage_bound(&Evidence { disk: disk(DISK_BUSY_MIN - 0.01), ..e.clone() }).is_none());
        // Reads the page cache served, the disk busy for someone else.
        assert!(storage_bound(&Evidence { cache_fraction: Some(LOADER_CACHE_MAX + 0.01), ..e.clone() }).is_none());
        assert!(storage_bound(&Evidence { cache_fraction: None, ..e.clone() }).is_some());
        let idle = Evidence { reads: LOADER_STORAGE_MIN - 0.01, io_wait: 0.1, ..e.clone() };
        assert!(storage_bound(&idle).is_none());
        // Faults on a mapping: no read calls, uninterruptible all the same.
        assert!(storage_bound(&Evidence { reads: 0.0, io_wait: 0.7, ..e }).is_some());
    }

    fn read(path: &str, ms: u64, kib: u64) -> PathRead {
        PathRead { path: path.into(), read_ns: ms * 1_000_000, bytes: kib << 10, ..Default::default() }
    }

    #[test]
    fn slow_path_names_a_file_else_a_directory() {
        let e = Evidence {
            reads: 0.6,
            paths: vec![read("/d/slow/big", 90, 100), read("/d/fast/a", 5, 200), read("/d/fast/b", 5, 200)],
            ..base()
        };
        let s = slow_path(&e).unwrap();
        assert!(s.text.contains("one file is most of the reading: /d/slow/big took 90% of its loader's read time"));
        assert!(s.text.contains("for 20% of the bytes it read"), "{}", s.text);
        // No file holds half, one directory does.
        let spread = Evidence {
            paths: vec![read("/d/slow/a", 30, 1), read("/d/slow/b", 30, 1), read("/d/fast/c", 40, 1)],
            ..e.clone()
        };
        let s = slow_path(&spread).unwrap();
        assert_eq!((s.figures[0].1.as_str(), s.figures[1].1.as_str()), (Some("/d/slow"), Some("directory")));
        // Even reads, one file, or reads that barely matter: none.
        let even = Evidence { paths: vec![read("/d/a", 30, 1), read("/e/b", 30, 1), read("/f/c", 30, 1)], ..e.clone() };
        assert!(slow_path(&even).is_none());
        assert!(slow_path(&Evidence { paths: vec![read("/d/a", 30, 1)], ..e.clone() }).is_none());
        assert!(slow_path(&Evidence { reads: READS_MATTER - 0.01, ..e }).is_none());
    }

    /// With Python stacks, the line that took most of the time is named.
    #[test]
    fn slow_path_and_metadata_name_the_python_line() {
        let line = |l: &str, ms: u64| (Arc::<str>::from(l), ms * 1_000_000);
        let (a, b) = ("dataset.py:41 in Dataset.__getitem__", "dataset.py:50 in Dataset.label");
        let big = PathRead { lines: vec![line(a, 60), line(b, 20), line(a, 10)], ..read("/d/slow/big", 90, 100) };
        let e =
            Evidence { reads: 0.6, paths: vec![big, read("/d/fast/a", 5, 200), read("/d/fast/b", 5, 200)], ..base() };
        let s = slow_path(&e).unwrap();
        assert!(s
            .text
            .contains("read time (90.0 ms in all, most of it from dataset.py:41 in Dataset.__getitem__), for 20%"));
        let j = s.to_json();
        assert_eq!(j["python_line"], a);
        assert!((j["python_line_share"].as_f64().unwrap() - 70.0 / 90.0).abs() < 1e-9);
        // A directory's files' lines together; under half, said as a share.
        let spread = Evidence {
            paths: vec![
                PathRead { lines: vec![line(a, 10)], ..read("/d/slow/a", 30, 1) },
                PathRead { lines: vec![line(b, 12)], ..read("/d/slow/b", 30, 1) },
                read("/d/fast/c", 40, 1),
            ],
            ..e.clone()
        };
        let s = slow_path(&spread).unwrap();
        assert!(s
            .text
            .contains("/d/slow took 60% of its loader's read time (60.0 ms in all, 20% of it from dataset.py:50"));
        // Without stacks, the sentence is as it was.
        let plain = slow_path(&Evidence { paths: vec![read("/d/slow/big", 90, 100), read("/d/fast/a", 5, 200)], ..e });
        assert!(plain.as_ref().unwrap().text.contains("(90.0 ms in all), for"), "{plain:?}");
        assert!(plain.unwrap().to_json().get("python_line").is_none());
        let m = Evidence {
            meta: 0.3,
            reads: 0.1,
            meta_ns: 300_000_000,
            read_ns: 100_000_000,
            opens: 10_000,
            meta_line: Some(("dataset.py:38 in Dataset.__getitem__".into(), 0.9)),
            ..base()
        };
        let s = metadata(&m).unwrap();
        assert!(
            s.text.contains(
                "(300.0 ms, most of it from dataset.py:38 in Dataset.__getitem__, 10000 files opened, 30.0 µs a file, \
                 against 100.0 ms in reads)"
            ),
            "{}",
            s.text
        );
    }

    #[test]
    fn metadata_needs_opens_to_dominate_file_time_that_matters() {
        let e = Evidence { meta: 0.3, reads: 0.1, meta_ns: 300_000_000, read_ns: 100_000_000, opens: 10_000, ..base() };
        let s = metadata(&e).unwrap();
        assert!(s
            .text
            .contains("metadata calls (stat, getdents64...) took 75% of its loader's time in calls on data files"));
        assert!(
            s.text.contains("(300.0 ms, 10000 files opened, 30.0 µs a file, against 100.0 ms in reads)"),
            "{}",
            s.text
        );
        let reads = Evidence { meta_ns: 100_000_000, read_ns: 101_000_000, ..e.clone() };
        assert!(metadata(&reads).is_none());
        assert!(metadata(&Evidence { meta: 0.05, reads: 0.04, ..e }).is_none());
    }

    /// Every rule, threshold and figure is documented: docs/verdict.md
    /// names each rule and constant, docs/stats-json.md each key.
    #[test]
    fn every_rule_and_figure_is_documented() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let verdict = std::fs::read_to_string(root.join("docs/verdict.md")).unwrap();
        let json = std::fs::read_to_string(root.join("docs/stats-json.md")).unwrap();
        let src = include_str!("suggest.rs");
        for name in src.lines().filter_map(|l| l.strip_prefix("pub const ")?.split(':').next()) {
            if name != "MAX_SUGGESTIONS" {
                assert!(verdict.contains(&format!("`{name}`")), "docs/verdict.md does not name {name}");
            }
        }
        let disk = Some(Disk { name: "vda".into(), busy: 1.0, read_per_s: 1.0 });
        let e = Evidence {
            cpu: 1.0,
            cpu_idle: Some(1.0),
            sleep: 1.0,
            reads: 1.0,
            meta: 1.0,
            read_ns: 1,
            meta_ns: 2,
            disk,
            paths: vec![PathRead { lines: vec![("a.py:1 in f".into(), 2)], ..read("/d/a", 3, 1) }, read("/d/b", 1, 1)],
            meta_line: Some(("a.py:1 in f".into(), 1.0)),
            gil_wait: 1.0,
            loader_threads: 1,
            ..base()
        };
        for rule in RULES.iter().chain(&[gil as fn(&Evidence) -> Option<Suggestion>]) {
            let s = rule(&e).unwrap();
            assert!(verdict.contains(&format!("| `{}` |", s.rule)), "docs/verdict.md does not list {}", s.rule);
            assert!(json.contains(&format!("`{}`", s.rule)), "docs/stats-json.md does not name {}", s.rule);
            for key in s.to_json().as_object().unwrap().keys() {
                assert!(json.contains(&format!("`{key}`")), "docs/stats-json.md does not name {key} of {}", s.rule);
            }
        }
        assert!(json.contains("`suggestions`") && json.contains("`suggestions_note`"));
    }

    /// Only when the trainer waits for data; at most three, most explaining first.
    #[test]
    fn ranked_kept_to_three_and_only_when_held_back() {
        let e = Evidence {
            cpu: 0.82,
            cpu_idle: Some(0.5),
            sleep: 0.55,
            reads: 0.6,
            io_wait: 0.58,
            meta: 0.35,
            read_ns: 100,
            meta_ns: 300,
            opens: 3,
            disk: Some(Disk { name: "vda".into(), busy: 0.9, read_per_s: 1e6 }),
            ..base()
        };
        assert_eq!(fired(&e), ["more_workers", "storage_bound", "deeper_prefetch"]);
        let (none, why) = rules(&Evidence { data_wait: DATA_WAIT_MIN - 0.01, ..e });
        assert!(none.is_empty());
        assert_eq!(why.unwrap(), "nothing about its input: the trainer waited for data 9% of its time (below 10%)");
        let (none, why) = rules(&Evidence { cpu: 0.5, ..base() });
        assert!(none.is_empty() && why.unwrap().starts_with("no rule fits: while the trainer waited for data 50%"));
    }
}
