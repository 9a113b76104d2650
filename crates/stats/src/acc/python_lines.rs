//! Python lines: the lines of the job's own code its file reads came
//! from, per role (the loaders, the trainer), from the Python stacks the
//! calls name ([`PyFrame`] records). A stack's frames may come before or
//! after the calls that name it, so calls are summed by stack id and the
//! stacks resolved when asked. Nothing is kept for a log without stacks.

use std::sync::Arc;

use mltrace_log::{pyf, Frame, PyFrame, PyInterp};

use crate::{shorten, HashMap, HashSet, Stats};
use mltrace_log::{Accept, Record};

/// Stacks whose frames are kept ((pid, stack) pairs): past it a stack's
/// calls still count, under an unknown line.
const MAX_STACKS: usize = 1 << 16;
/// (pid, thread, stack) sums kept, and (file, pid, stack) read times.
const MAX_SUMS: usize = 1 << 18;
const MAX_FILE_SUMS: usize = 1 << 20;
/// Interpreters without stacks listed.
const MAX_INTERPS: usize = 256;

/// Read calls, the bytes they returned and the time in them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reads {
    pub calls: u64,
    pub bytes: u64,
    pub time_ns: u64,
}

impl Reads {
    fn add(&mut self, o: Reads) {
        self.calls += o.calls;
        self.bytes += o.bytes;
        self.time_ns += o.time_ns;
    }
}

/// One frame of a stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub function: Arc<str>,
    pub file: Arc<str>,
    /// 0 when not known.
    pub line: u32,
    pub flags: u8,
}

/// Whose code a frame runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// The job's own.
    Own,
    /// An installed package's (site-packages, dist-packages).
    Library,
    /// Python's standard library (`/lib/python3.x/`, `<frozen ...>`).
    Python,
    /// A code object the recorder never got.
    Unknown,
}

impl Site {
    pub fn code(&self) -> Code {
        let f = &*self.file;
        if self.flags & pyf::UNKNOWN_CODE != 0 || f == "?" {
            Code::Unknown
        } else if f.contains("site-packages") || f.contains("dist-packages") {
            Code::Library
        } else if f.contains("/lib/python3") || f.starts_with("<frozen") {
            Code::Python
        } else {
            Code::Own
        }
    }

    /// `file:line in function`, the file as [`short_file`] gives it.
    pub fn label(&self) -> String {
        at(&short_file(&self.file), self.line, &self.function)
    }

    /// The same with the file's name alone (for a sentence).
    pub fn brief(&self) -> String {
        at(self.file.rsplit('/').next().unwrap_or(&self.file), self.line, &self.function)
    }
}

fn at(file: &str, line: u32, function: &str) -> String {
    match line {
        0 => format!("{file}:? in {function}"),
        n => format!("{file}:{n} in {function}"),
    }
}

/// A file as the tables show it: a package's from its package on
/// (`numpy/lib/npyio.py`), the standard library's from below
/// `python3.x/`, the job's own as recorded (its tail when long).
pub fn short_file(file: &str) -> String {
    for mark in ["site-packages/", "dist-packages/"] {
        if let Some((_, rest)) = file.rsplit_once(mark) {
            return rest.to_string();
        }
    }
    if let Some(i) = file.find("/lib/python3") {
        let rest = &file[i + "/lib/".len()..];
        return rest.split_once('/').map_or(rest, |(_, r)| r).to_string();
    }
    shorten(file, 60)
}

/// The loaders (DataLoader workers, loader threads) or the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Loader = 0,
    Trainer = 1,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Loader => "loader",
            Role::Trainer => "trainer",
        }
    }
}

/// One line of the job's code, and what the reads made from it did.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub role: Role,
    /// The frame of the job's code (the innermost such; else the
    /// innermost package frame; else the innermost frame).
    pub site: Site,
    /// The frame it called (the library's, Python's), if any.
    pub called: Option<Site>,
    pub reads: Reads,
    /// The process with most time on it.
    pub pid: u32,
    /// The stack with most time on it, innermost first (empty when the
    /// log lacks its frames).
    pub stack: Vec<Site>,
}

/// The line a stack's calls are put on, and the frame it called.
fn line_of(stack: &[Site]) -> Option<(Site, Option<Site>)> {
    let first = |c: Code| stack.iter().position(|s| s.code() == c);
    let i = first(Code::Own).or_else(|| first(Code::Library)).unwrap_or(0);
    let site = stack.get(i)?.clone();
    Some((site, i.checked_sub(1).map(|j| stack[j].clone())))
}

/// A stack whose frames are not in the log.
fn unknown_site() -> Site {
    Site { function: "?".into(), file: "?".into(), line: 0, flags: pyf::UNKNOWN_CODE }
}

/// What `stats` gathers of the Python stacks while reading.
#[derive(Default)]
pub struct PythonLines {
    /// The log has Python records (frames or interpreters).
    pub seen: bool,
    /// Time in reads of data files by Python processes' threads, with a
    /// stack or without: what the lines' shares are of.
    data_ns: HashMap<(u32, u32), u64>,
    /// Data file reads made from a stack, by (pid, thread, stack).
    reads: HashMap<(u32, u32, u32), Reads>,
    /// Time in opens, closes and metadata calls on data files, likewise.
    meta: HashMap<(u32, u32, u32), u64>,
    /// Read time by (path hash, pid, stack).
    on_file: HashMap<u64, Vec<(u32, u32, u64)>>,
    on_file_sums: usize,
    /// Frames by (pid, stack), innermost first once sorted.
    frames: HashMap<(u32, u32), Vec<(u32, Site)>>,
    names: HashSet<Arc<str>>,
    /// Python processes, from their interpreter's record (or their fork
    /// from one) on: their calls are counted, with a stack or without;
    /// and every process whose calls carried one.
    ready: HashSet<u32>,
    procs: HashSet<u32>,
    /// Calls of processes able to carry one, and those without.
    pub calls: u64,
    pub calls_without_stack: u64,
    /// Interpreters whose calls carry no stacks: (pid, version, why).
    pub without_stacks: Vec<(u32, String, String)>,
}

impl PythonLines {
    fn name(&mut self, s: std::borrow::Cow<'_, str>) -> Arc<str> {
        if let Some(n) = self.names.get(s.as_ref()) {
            return n.clone();
        }
        let n: Arc<str> = s.into();
        self.names.insert(n.clone());
        n
    }

    pub fn frame(&mut self, f: &Frame<'_>, r: &PyFrame) {
        self.seen = true;
        if r.stack == 0 || (self.frames.len() >= MAX_STACKS && !self.frames.contains_key(&(r.pid, r.stack))) {
            return;
        }
        let site = Site {
            function: self.name(f.str_lossy(r.function)),
            file: self.name(f.str_lossy(r.file)),
            line: r.line,
            flags: r.flags,
        };
        let frames = self.frames.entry((r.pid, r.stack)).or_default();
        // A stack written twice (the recorder's pending ones) keeps its first.
        if !frames.iter().any(|(d, _)| *d == r.depth) {
            frames.push((r.depth, site));
        }
    }

    pub fn interp(&mut self, f: &Frame<'_>, r: &PyInterp) {
        self.seen = true;
        // Either way its calls count from here: those of an interpreter
        // without stacks are all without one.
        self.ready.insert(r.pid);
        if r.stacks {
            self.procs.insert(r.pid);
        } else {
            if self.without_stacks.len() < MAX_INTERPS {
                let (v, why) = (f.str_lossy(r.version).into_owned(), f.str_lossy(r.why).into_owned());
                self.without_stacks.push((r.pid, v, why));
            }
        }
    }

    /// A process forked: a child of a walked interpreter is walked too.
    pub fn fork(&mut self, parent: u32, child: u32) {
        if self.ready.contains(&parent) {
            self.ready.insert(child);
            self.procs.insert(child);
        }
    }

    /// It exec'd or exited: its next program is decided anew.
    pub fn gone(&mut self, pid: u32) {
        self.ready.remove(&pid);
    }

    /// `n` calls (a summary's): counted when its kind can carry a stack (io_uring
    /// requests and libaio events never do) and its process can.
    #[inline]
    pub fn call(&mut self, pid: u32, stack: u32, n: u64) {
        if stack != 0 {
            self.calls += n;
        } else if !self.ready.is_empty() && self.ready.contains(&pid) {
            self.calls += n;
            self.calls_without_stack += n;
        }
    }

    /// A file read by thread `tid` of `pid` from stack `stack` (not 0).
    pub fn read(&mut self, pid: u32, tid: u32, stack: u32, path: impl FnOnce() -> u64, r: Reads) {
        if stack == 0 {
            if self.ready.contains(&pid) {
                *self.data_ns.entry((pid, tid)).or_default() += r.time_ns;
            }
            return;
        }
        *self.data_ns.entry((pid, tid)).or_default() += r.time_ns;
        let path = path();
        self.procs.insert(pid);
        if self.reads.len() < MAX_SUMS || self.reads.contains_key(&(pid, tid, stack)) {
            self.reads.entry((pid, tid, stack)).or_default().add(r);
        }
        let on = self.on_file.entry(path).or_default();
        match on.iter_mut().find(|x| x.0 == pid && x.1 == stack) {
            Some(x) => x.2 += r.time_ns,
            None if self.on_file_sums < MAX_FILE_SUMS => {
                on.push((pid, stack, r.time_ns));
                self.on_file_sums += 1;
            }
            None => {}
        }
    }

    /// Time in an open, close or metadata call on a data file.
    pub fn meta(&mut self, pid: u32, tid: u32, stack: u32, ns: u64) {
        if self.meta.len() < MAX_SUMS || self.meta.contains_key(&(pid, tid, stack)) {
            *self.meta.entry((pid, tid, stack)).or_default() += ns;
        }
    }

    /// Stack `stack` of `pid`, innermost first (empty when not in the log).
    pub fn stack(&self, pid: u32, stack: u32) -> Vec<Site> {
        let Some(frames) = self.frames.get(&(pid, stack)) else { return Vec::new() };
        let mut v: Vec<&(u32, Site)> = frames.iter().collect();
        v.sort_by_key(|x| x.0);
        v.into_iter().map(|x| x.1.clone()).collect()
    }

    /// The line of stack `stack` of `pid` and the frame it called.
    fn resolve(&self, pid: u32, stack: u32) -> (Site, Option<Site>, Vec<Site>) {
        let frames = self.stack(pid, stack);
        match line_of(&frames) {
            Some((site, called)) => (site, called, frames),
            None => (unknown_site(), None, frames),
        }
    }
}

/// Who loads: the DataLoader workers of the trainer and of every process
/// fed by workers (as the verdict and the ranks have them), and those
/// processes' loader threads.
pub struct Loaders {
    pids: HashSet<u32>,
    threads: HashSet<(u32, u32)>,
}

impl Loaders {
    pub fn role(&self, pid: u32, tid: u32) -> Role {
        if self.pids.contains(&pid) || self.threads.contains(&(pid, tid)) {
            Role::Loader
        } else {
            Role::Trainer
        }
    }
}

/// A line being summed: its time per process, and the time of the
/// stack it keeps (the one with most).
struct Grouped {
    line: Line,
    by_pid: HashMap<u32, u64>,
    stack_ns: u64,
}

/// Each role's file read time: all of it, and the share from a stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoleTime {
    pub read_ns: u64,
    pub stacked_ns: u64,
}

impl Stats {
    /// The loaders, as [`Stats::workers_of`] and the loader threads of
    /// the trainer and of the processes fed by workers have them.
    pub fn loaders(&self) -> Loaders {
        let mut l = Loaders { pids: HashSet::default(), threads: HashSet::default() };
        for p in self.processes.iter().filter(|p| p.pid == self.trainer || self.fed.contains(&p.pid)) {
            l.pids.extend(self.workers_of(p).iter().map(|w| w.pid));
            l.threads.extend(p.loader_threads.iter().map(|&tid| (p.pid, tid)));
        }
        l
    }

    /// Every line the reads came from, most time first.
    pub fn python_lines(&self) -> Vec<Line> {
        let py = &self.python;
        let loaders = self.loaders();
        let mut by_stack: HashMap<(Role, u32, u32), Reads> = HashMap::default();
        for (&(pid, tid, stack), r) in &py.reads {
            by_stack.entry((loaders.role(pid, tid), pid, stack)).or_default().add(*r);
        }
        let mut lines: HashMap<(Role, Arc<str>, u32, Arc<str>), Grouped> = HashMap::default();
        let mut sorted: Vec<_> = by_stack.into_iter().collect();
        sorted.sort_by_key(|x| x.0);
        for ((role, pid, stack), r) in sorted {
            let (site, called, frames) = py.resolve(pid, stack);
            let key = (role, site.file.clone(), site.line, site.function.clone());
            let g = lines.entry(key).or_insert_with(|| Grouped {
                line: Line { role, site, called: None, reads: Reads::default(), pid, stack: Vec::new() },
                by_pid: HashMap::default(),
                stack_ns: 0,
            });
            g.line.reads.add(r);
            *g.by_pid.entry(pid).or_default() += r.time_ns;
            if r.time_ns > g.stack_ns || (g.line.stack.is_empty() && !frames.is_empty()) {
                (g.line.stack, g.line.called, g.stack_ns) = (frames, called, r.time_ns);
            }
        }
        let mut out: Vec<Line> = lines
            .into_values()
            .map(|mut g| {
                let most = g.by_pid.into_iter().max_by_key(|&(pid, ns)| (ns, std::cmp::Reverse(pid)));
                g.line.pid = most.map_or(0, |x| x.0);
                g.line
            })
            .collect();
        out.sort_by(|a, b| {
            (b.reads.time_ns, b.reads.calls)
                .cmp(&(a.reads.time_ns, a.reads.calls))
                .then(a.role.cmp(&b.role))
                .then(a.site.file.cmp(&b.site.file))
                .then(a.site.line.cmp(&b.site.line))
                .then(a.site.function.cmp(&b.site.function))
        });
        out
    }

    /// Each role's time in reads of data files (its Python processes'),
    /// and of it the time from a stack: loaders first.
    pub fn python_role_times(&self, lines: &[Line]) -> [RoleTime; 2] {
        let loaders = self.loaders();
        let mut t = [RoleTime::default(); 2];
        for (&(pid, tid), &ns) in &self.python.data_ns {
            t[loaders.role(pid, tid) as usize].read_ns += ns;
        }
        for l in lines {
            t[l.role as usize].stacked_ns += l.reads.time_ns;
        }
        t
    }

    /// `(label, ns)` for each line that read `path`, by time on it.
    pub fn python_lines_on(&self, path: &str, labels: &mut HashMap<(u32, u32), Arc<str>>) -> Vec<(Arc<str>, u64)> {
        let py = &self.python;
        if py.on_file.is_empty() {
            return Vec::new();
        }
        let Some(on) = py.on_file.get(&crate::hash_path(path.as_bytes())) else { return Vec::new() };
        on.iter().map(|&(pid, stack, ns)| (self.python_label(pid, stack, labels), ns)).collect()
    }

    /// The line of a stack in a sentence (`dataset.py:41 in
    /// Dataset.__getitem__`), looked up once.
    pub fn python_label(&self, pid: u32, stack: u32, labels: &mut HashMap<(u32, u32), Arc<str>>) -> Arc<str> {
        labels.entry((pid, stack)).or_insert_with(|| self.python.resolve(pid, stack).0.brief().into()).clone()
    }

    /// The line with most of the time in opens, closes and metadata
    /// calls on data files of the loaders `is_loader` picks, its share of
    /// `of_ns`.
    pub fn python_meta_line(&self, is_loader: impl Fn(u32, u32) -> bool, of_ns: u64) -> Option<(String, f64)> {
        if self.python.meta.is_empty() {
            return None;
        }
        let mut labels = HashMap::default();
        let mut by: HashMap<Arc<str>, u64> = HashMap::default();
        for (&(pid, _, stack), &ns) in self.python.meta.iter().filter(|(k, _)| is_loader(k.0, k.1)) {
            *by.entry(self.python_label(pid, stack, &mut labels)).or_default() += ns;
        }
        top_line(by.into_iter(), of_ns)
    }
}

/// The line with most time of `by`, and its share of `of_ns`.
pub fn top_line(by: impl Iterator<Item = (Arc<str>, u64)>, of_ns: u64) -> Option<(String, f64)> {
    let mut v: Vec<(Arc<str>, u64)> = Vec::new();
    for (label, ns) in by {
        match v.iter_mut().find(|x| x.0 == label) {
            Some(x) => x.1 += ns,
            None => v.push((label, ns)),
        }
    }
    let (label, ns) = v.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))?;
    (ns > 0 && of_ns > 0).then(|| (label.to_string(), (ns as f64 / of_ns as f64).min(1.0)))
}

// What its records add to the figures (see [`mltrace_log::Accept`]).

impl Accept<PyFrame> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: PyFrame) {
        self.python.frame(f, &r)
    }
}

impl Accept<PyInterp> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: PyInterp) {
        self.python.interp(f, &r)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::path::Path;

    use mltrace_log::*;

    use crate::Stats;

    const DATASET: &str = "/home/u/proj/dataset.py";
    const NPYIO: &str = "/venv/lib/python3.11/site-packages/numpy/lib/npyio.py";
    const FETCH: &str = "/venv/lib/python3.11/site-packages/torch/utils/data/_utils/fetch.py";

    fn fork(pid: u32, parent: u32) -> Record {
        Record::Fork(Fork { ts: 1, pid, tid: pid, parent_pid: parent, parent_tid: parent, thread: false })
    }

    fn interp(w: &mut RecordWriter<Vec<u8>>, pid: u32, version: &str, why: &str) {
        w.push_with(|e| {
            let stacks = why.is_empty();
            let (version, why) = (e.intern(version.as_bytes()), e.intern(why.as_bytes()));
            Record::PyInterp(PyInterp { pid, ts: 2, version, stacks, why })
        })
        .unwrap();
    }

    fn read(w: &mut RecordWriter<Vec<u8>>, pid: u32, stack: u32, path: &str, dur: u64) {
        w.push_with(|e| {
            Record::Io(Io {
                ts: 10,
                dur,
                pid,
                tid: pid,
                op: IoOp::Pread64,
                fd: 3,
                path: e.intern(path.as_bytes()),
                kind: FileKind::Regular,
                requested: 4096,
                ret: 4096,
                stack,
                ..Default::default()
            })
        })
        .unwrap();
    }

    /// Stack `stack` of `pid`: (function, file, line), innermost first.
    fn stack(w: &mut RecordWriter<Vec<u8>>, pid: u32, stack: u32, frames: &[(&str, &str, u32)]) {
        for (depth, (function, file, line)) in frames.iter().enumerate() {
            w.push_with(|e| {
                let (function, file) = (e.intern(function.as_bytes()), e.intern(file.as_bytes()));
                Record::PyFrame(PyFrame {
                    pid,
                    ts: 5,
                    stack,
                    depth: depth as u32,
                    function,
                    file,
                    line: *line,
                    flags: 0,
                })
            })
            .unwrap();
        }
    }

    fn stats(log: Vec<u8>) -> Stats {
        Stats::from_reader(&mut LogReader::new(Path::new("t"), Cursor::new(log)).unwrap()).unwrap()
    }

    /// The trainer (10) and its worker (11, forked: walked as its parent
    /// is) read; 20's interpreter is not walked. The stacks come last, in
    /// a frame of their own.
    fn job() -> Stats {
        let header = Header { root_pid: 10, command: vec!["python".into(), "train.py".into()], ..Default::default() };
        let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
        w.push(&fork(10, 1)).unwrap();
        interp(&mut w, 10, "3.11.7", "");
        w.push(&fork(11, 10)).unwrap();
        w.push(&fork(20, 1)).unwrap();
        interp(&mut w, 20, "3.13t", "free-threaded builds are not walked");
        // Line 41 by two stacks: through numpy (more time) and through json.
        for _ in 0..3 {
            read(&mut w, 11, 1, "/data/a.bin", 1000);
        }
        read(&mut w, 11, 2, "/data/a.bin", 500);
        read(&mut w, 11, 3, "/data/b.bin", 200);
        read(&mut w, 11, 0, "/data/a.bin", 500);
        read(&mut w, 10, 1, "/data/c.bin", 800);
        read(&mut w, 20, 0, "/data/c.bin", 100);
        w.push_with(|e| {
            let p = e.intern(b"/data/x.jpg");
            Record::Open(Open {
                ts: 20,
                dur: 300,
                pid: 11,
                tid: 11,
                path: p,
                abs_path: p,
                kind: FileKind::Regular,
                stack: 3,
                ..Default::default()
            })
        })
        .unwrap();
        w.cut().unwrap();
        let dataset = ("Dataset.__getitem__", DATASET, 41);
        let fetch = ("fetch", FETCH, 52);
        stack(&mut w, 11, 1, &[("load", NPYIO, 456), dataset, fetch]);
        stack(&mut w, 11, 2, &[("raw_decode", "/usr/lib/python3.11/json/decoder.py", 353), dataset, fetch]);
        stack(&mut w, 11, 3, &[("Dataset.load_label", DATASET, 50), dataset]);
        stack(&mut w, 10, 1, &[("main", "/home/u/proj/train.py", 12), ("<module>", "train.py", 30)]);
        stats(w.finish(&Trailer::default()).unwrap())
    }

    #[test]
    fn reads_grouped_by_the_jobs_line_with_the_call_it_made() {
        let s = job();
        let lines = s.python_lines();
        let got: Vec<(&str, &str, u32, u64, u64, u64, u32)> = lines
            .iter()
            .map(|l| {
                let r = l.reads;
                (l.role.name(), &*l.site.function, l.site.line, r.calls, r.bytes, r.time_ns, l.pid)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("loader", "Dataset.__getitem__", 41, 4, 4 * 4096, 3500, 11),
                ("trainer", "main", 12, 1, 4096, 800, 10),
                ("loader", "Dataset.load_label", 50, 1, 4096, 200, 11),
            ]
        );
        // The stack with most time is the one kept, and what it called.
        assert_eq!(lines[0].called.as_ref().unwrap().label(), "numpy/lib/npyio.py:456 in load");
        assert_eq!(lines[0].stack.len(), 3);
        assert!(lines[2].called.is_none(), "the innermost frame is the job's: it called nothing traced");
        let [loaders, trainer] = s.python_role_times(&lines);
        assert_eq!((loaders.read_ns, loaders.stacked_ns), (4200, 3700));
        // 20, a Python process whose interpreter is not walked, is the
        // trainer's too: its read is without a stack.
        assert_eq!((trainer.read_ns, trainer.stacked_ns), (900, 800));
        // Calls of Python processes: 10's and 11's, and 20's, whose
        // interpreter has no stacks (its call is without one).
        assert_eq!((s.python.calls, s.python.calls_without_stack), (9, 2));

        let text = s.render(10);
        let at = text.find("Python lines").unwrap();
        assert!(at < text.find("process ").unwrap(), "after the verdict's figures, before the tables: {text}");
        for want in [
            "loaders: 4.2 µs in reads of data files, 88% of it from a Python stack\n",
            "/home/u/proj/dataset.py:41 in Dataset.__getitem__",
            "\n    -> numpy/lib/npyio.py:456 in load\n",
            "/home/u/proj/dataset.py:50 in Dataset.load_label",
            "trainer: 900 ns in reads of data files, 89% of it from a Python stack\n",
            "/home/u/proj/train.py:12 in main",
            "calls without a Python stack in Python processes: 2 of 9\n",
            "no Python stacks: pid 20 [20] (Python 3.13t): free-threaded builds are not walked\n",
        ] {
            assert!(text.contains(want), "{want:?} in {text}");
        }
        let row = text.lines().find(|l| l.contains("dataset.py:41")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[cells.len() - 6..], ["83%", "3.5", "µs", "16.0", "KiB", "4"], "{row}");

        let j = s.to_json();
        let l = &j["python_lines"];
        assert_eq!(l.as_array().unwrap().len(), 3);
        assert_eq!(l[0]["pid"], 11);
        assert_eq!(l[0]["role"], "loader");
        assert_eq!((l[0]["file"].as_str(), l[0]["line"].as_u64()), (Some(DATASET), Some(41)));
        assert_eq!(l[0]["function"], "Dataset.__getitem__");
        assert_eq!(
            (l[0]["calls"].as_u64(), l[0]["bytes"].as_u64(), l[0]["time_ns"].as_u64()),
            (Some(4), Some(16384), Some(3500))
        );
        assert_eq!(l[0]["stack"][0], serde_json::json!({"function": "load", "file": NPYIO, "line": 456}));
        assert_eq!(l[1]["role"], "trainer");
        let py = &j["python"];
        assert_eq!((py["calls"].as_u64(), py["calls_without_stack"].as_u64()), (Some(9), Some(2)));
        assert_eq!(
            py["interpreters_without_stacks"],
            serde_json::json!([{"pid": 20, "version": "3.13t", "why": "free-threaded builds are not walked"}])
        );
    }

    /// What the verdict's suggestions name: the line with most time on a
    /// file, and on the loaders' opens and metadata calls.
    #[test]
    fn the_line_with_most_time_on_a_file_and_on_metadata() {
        let s = job();
        let mut labels = Default::default();
        let mut on = s.python_lines_on("/data/a.bin", &mut labels);
        on.sort();
        let on: Vec<(&str, u64)> = on.iter().map(|(l, ns)| (&**l, *ns)).collect();
        assert_eq!(on, [("dataset.py:41 in Dataset.__getitem__", 500), ("dataset.py:41 in Dataset.__getitem__", 3000)]);
        assert!(s.python_lines_on("/data/nothing", &mut labels).is_empty());
        let meta = s.python_meta_line(|pid, _| pid == 11, 600);
        assert_eq!(meta, Some(("dataset.py:50 in Dataset.load_label".to_string(), 0.5)));
        assert_eq!(s.python_meta_line(|pid, _| pid == 10, 600), None);
    }

    /// The same stack id in two threads of the trainer: its loader
    /// thread's reads are the loaders', its main thread's the trainer's.
    #[test]
    fn a_loader_thread_is_a_loader_its_main_thread_the_trainer() {
        use super::Reads;
        let mut s = Stats { trainer: 10, ..Default::default() };
        s.processes.push(crate::ProcStats { pid: 10, loader_threads: vec![12], read_ns: 300, ..Default::default() });
        s.thread_reads.add(12, |t| t.read_ns = 200);
        s.python.read(10, 12, 1, || 0, Reads { calls: 2, bytes: 20, time_ns: 200 });
        s.python.read(10, 10, 1, || 0, Reads { calls: 1, bytes: 10, time_ns: 100 });
        let lines = s.python_lines();
        let roles: Vec<(&str, u64)> = lines.iter().map(|l| (l.role.name(), l.reads.time_ns)).collect();
        assert_eq!(roles, [("loader", 200), ("trainer", 100)]);
        let [loaders, trainer] = s.python_role_times(&lines);
        assert_eq!((loaders.read_ns, trainer.read_ns), (200, 100));
    }

    /// A stack the log lacks still counts, on an unknown line.
    #[test]
    fn a_stack_without_frames_is_an_unknown_line() {
        let mut w = RecordWriter::new(Vec::new(), &Header { root_pid: 10, ..Default::default() }).unwrap();
        w.push(&fork(10, 1)).unwrap();
        interp(&mut w, 10, "3.12.1", "");
        read(&mut w, 10, 7, "/data/a.bin", 900);
        let s = stats(w.finish(&Trailer::default()).unwrap());
        let lines = s.python_lines();
        assert_eq!((lines.len(), &*lines[0].site.file, lines[0].stack.len()), (1, "?", 0));
        let j = s.to_json();
        assert!(j["python_lines"][0]["line"].is_null(), "an unknown line is null, never 0");
        assert!(s.render(5).contains("? (its stack is not in the log)"));
    }

    /// A log without Python records: no section, no keys.
    #[test]
    fn an_old_log_has_neither() {
        let mut w = RecordWriter::new(Vec::new(), &Header { root_pid: 10, ..Default::default() }).unwrap();
        w.push(&fork(10, 1)).unwrap();
        w.push(&fork(11, 10)).unwrap();
        read(&mut w, 11, 0, "/data/a.bin", 900);
        read(&mut w, 10, 0, "/data/a.bin", 900);
        let s = stats(w.finish(&Trailer::default()).unwrap());
        let j = s.to_json();
        assert!(j.get("python_lines").is_none() && j.get("python").is_none(), "{j}");
        let text = s.render(5);
        assert!(!text.contains("Python"), "{text}");
        assert_eq!((s.python.calls, s.python.calls_without_stack), (0, 0));
    }

    #[test]
    fn whose_code_a_frame_runs() {
        use super::{Code, Site};
        let site = |file: &str, flags| Site { function: "f".into(), file: file.into(), line: 1, flags };
        for (file, code) in [
            ("/home/u/train.py", Code::Own),
            ("train.py", Code::Own),
            ("/usr/lib/python3.11/json/decoder.py", Code::Python),
            ("<frozen importlib._bootstrap>", Code::Python),
            ("/usr/lib/python3/dist-packages/yaml/reader.py", Code::Library),
            ("/venv/lib/python3.12/site-packages/torch/serialization.py", Code::Library),
            ("?", Code::Unknown),
        ] {
            assert_eq!(site(file, 0).code(), code, "{file}");
        }
        assert_eq!(site("/home/u/train.py", pyf::UNKNOWN_CODE).code(), Code::Unknown);
        assert_eq!(super::short_file("/usr/lib/python3.11/json/decoder.py"), "json/decoder.py");
        assert_eq!(
            super::short_file("/venv/lib/python3.12/site-packages/torch/serialization.py"),
            "torch/serialization.py"
        );
    }
}
