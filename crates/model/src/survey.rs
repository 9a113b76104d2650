//! The first pass over a log: who the processes are, the training phases,
//! how many events there are when (to plan parts), and the overview's
//! aggregates. Memory is bounded by the processes, the files read and the
//! overview's intervals, not by the number of events.

use std::io::{Read, Seek};

use rustc_hash::FxHashMap as HashMap;

use mltrace_log::*;

use crate::event::FileTotals;
use crate::grid::Grid;
use crate::overview_agg::{OverviewAgg, TARGET_INTERVALS};
use crate::procs::{ProcIdx, ProcTracker, Procs};

/// Bins of the planner's event-count timeline.
const WEIGHT_BINS: usize = 16_384;

/// A training phase, owned.
#[derive(Clone, Debug)]
pub struct PhaseInfo {
    pub ts: u64,
    pub dur: u64,
    pub kind: PhaseKind,
    pub name: String,
    pub rank: i32,
    pub flags: u8,
}

/// A run-wide (MLLOG) mark, owned.
#[derive(Clone, Debug)]
pub struct MarkInfo {
    pub ts: u64,
    pub name: String,
    pub value: String,
    pub rank: i32,
}

/// A GPU's event (throttling, XID, ECC), owned: the overview shows them all.
#[derive(Clone, Debug)]
pub struct GpuEventInfo {
    pub ts: u64,
    pub group: String,
    pub kind: GpuEventKind,
    pub code: u64,
    pub pid: u32,
}

#[derive(Clone, Copy, Debug)]
pub struct LostInfo {
    pub ts: u64,
    pub kind: LostKind,
    pub count: u64,
}

/// What the first pass learnt; see the module docs.
pub struct Survey {
    pub header: Header,
    pub trailer: Option<Trailer>,
    /// Problems the reader worked around, described for people.
    pub diagnostics: Vec<String>,
    pub procs: Procs,
    /// Sorted by start, longer first.
    pub phases: Vec<PhaseInfo>,
    pub marks: Vec<MarkInfo>,
    pub gpu_events: Vec<GpuEventInfo>,
    pub lost: Vec<LostInfo>,
    /// By start.
    pub checkpoints: Vec<crate::checkpoints::Checkpoint>,
    /// Earliest start and latest end of any record.
    pub first_ts: u64,
    pub last_ts: u64,
    pub records: u64,
    /// Syscall records (opens, reads, writes, closes, transfers).
    pub syscalls: u64,
    pub blocks: u64,
    pub counters: u64,
    /// Output events (slices, instants, counter values) by time.
    pub weights: Grid,
    pub weight: Vec<u64>,
    pub overview: OverviewAgg,
    /// Each counter (group, name, pid) by [`counter_key`]: whether any
    /// value was not zero.
    pub counter_seen: HashMap<u64, ((String, String, u32), bool)>,
    /// Whole-run totals of each file read, by [`path_key`].
    pub files: HashMap<u64, FileTotals>,
    /// What the caller concluded about the run (the verdict, from the
    /// stats crate), drawn on top: empty unless set after the survey.
    pub annotations: Vec<crate::annotate::Annotation>,
    /// Each rank's data wait over the run (from the stats crate too),
    /// in rank order: empty unless set after the survey.
    pub ranks: Vec<crate::annotate::RankSeries>,
    /// Each rank's lateness at the collectives over the run (the highest
    /// in each bin, in ms), in rank order: empty unless set.
    pub lateness: Vec<crate::annotate::RankSeries>,
    /// Main threads' waits for the other ranks, by start: slices on
    /// their tracks. Empty unless set.
    pub collective_waits: Vec<crate::annotate::WaitSlice>,
    /// Python stacks by (pid, stack id), as the calls made from them show
    /// them (see [`crate::pystack`]).
    pub py_stacks: crate::pystack::Stacks,
}

/// A file's identity in [`Survey::files`]: its path, hashed.
pub fn path_key(path: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write(path);
    h.finish()
}

/// A counter's identity, hashed so that a sample is looked up without
/// allocating.
pub fn counter_key(group: &[u8], name: &[u8], pid: u32) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    (group, name, pid).hash(&mut h);
    h.finish()
}

/// Epoch phases as (start, end, label): `epoch 3` from a name that holds
/// a number, else by their order.
pub fn epochs_of(phases: &[PhaseInfo]) -> Vec<(u64, u64, String)> {
    phases
        .iter()
        .filter(|p| p.kind == PhaseKind::Epoch)
        .enumerate()
        .map(|(i, p)| (p.ts, p.ts + p.dur, epoch_label(i, &p.name)))
        .collect()
}

/// How a respawned worker's name says its epoch (`epoch 3`): the number in
/// the phase's name, else its place (`i`, from 0) among the epochs.
pub fn epoch_label(i: usize, phase: &str) -> String {
    let digits: String = phase.chars().skip_while(|c| !c.is_ascii_digit()).take_while(|c| c.is_ascii_digit()).collect();
    let n = if digits.is_empty() { (i + 1).to_string() } else { digits };
    format!("epoch {n}")
}

/// The file (or socket) a record read from, the bytes and when, for the
/// per-file reads (the survey's totals, the report's heat): a call's
/// read, at its start, or a summary's reads, at its middle.
pub fn file_read(rec: &Record) -> Option<(StrId, u64, u64)> {
    match rec {
        Record::IoSummary(r) => (r.op.io().is_some_and(|o| !o.is_write()) && r.bytes > 0).then_some((
            r.path,
            r.bytes,
            r.ts.saturating_add(r.dur / 2),
        )),
        _ => {
            let c = crate::event::split(rec).ok()?;
            c.data_read().map(|(path, n)| (path, n, c.timing().1))
        }
    }
}

/// Output events one record makes in the detail view (a slice per
/// syscall; two per traced block request, plus its in-flight changes...).
fn weight_of(rec: &Record) -> u64 {
    use crate::event::NotCall;
    match crate::event::split(rec) {
        Ok(_) => 1,
        Err(n) => match n {
            NotCall::Fork(r) => u64::from(!r.thread),
            NotCall::Exit(e) => u64::from(e.process_exit),
            NotCall::Exec(_) | NotCall::Mark(_) | NotCall::Counter(_) => 1,
            // At most one slice each (only data mappings are drawn).
            NotCall::Mapping(_) | NotCall::MajorFault(_) => 1,
            NotCall::Block(b) if b.flags & blk::TRACED != 0 => 4,
            NotCall::Block(_) => 3,
            NotCall::Lost(_) => 2,
            NotCall::IoSummary(_) | NotCall::GpuCount(_) | NotCall::GpuEvent(_) => 1,
            // Each an ftrace event the UI turns into thread states and CPU
            // slices: they count towards a part's budget like any other.
            NotCall::SchedSwitch(_) => 1,
            NotCall::SchedWake(w) => u64::from(w.op == WakeOp::Waking),
            // Drawn from the survey, or not drawn (a page cache fill adds to
            // a rate counter the budget does not count).
            NotCall::Comm(_)
            | NotCall::Env(_)
            | NotCall::Phase(_)
            | NotCall::PageCache(_)
            | NotCall::IoAccounting(_)
            | NotCall::SchedSpan(_)
            | NotCall::PyFrame(_)
            | NotCall::PyInterp(_) => 0,
        },
    }
}

/// What another reader of a survey's pass found for it (see
/// [`Surveying::alongside`]).
pub struct Found {
    pub diagnostics: Vec<String>,
    pub checkpoints: Vec<crate::checkpoints::Checkpoint>,
}

/// A survey being taken: fed every record of one pass over the log, by
/// [`Survey::of`] or alongside another reader of the same pass (`export`
/// takes it during the verdict's pass, saving a read of the log).
pub struct Surveying {
    s: Survey,
    tracker: ProcTracker,
    /// `None` when the reader it rides along finds the checkpoints itself.
    checkpoints: Option<crate::checkpoints::Detector>,
}

impl Surveying {
    /// Before the pass: the log's span sets the grids.
    pub fn new<R: Read + Seek>(reader: &mut LogReader<R>) -> Result<Surveying, LogError> {
        let header = reader.header().clone();
        let span = reader.scan_span()?;
        let (lo, hi) = match (span.first_ts, span.last_ts) {
            (Some(a), Some(b)) => (a, b.max(a)),
            _ => (header.start.boottime_ns, header.start.boottime_ns),
        };
        let weights = Grid::even(lo, hi, WEIGHT_BINS);
        let s = Survey {
            header,
            trailer: None,
            diagnostics: Vec::new(),
            procs: Procs::default(),
            phases: Vec::new(),
            marks: Vec::new(),
            gpu_events: Vec::new(),
            lost: Vec::new(),
            checkpoints: Vec::new(),
            first_ts: u64::MAX,
            last_ts: 0,
            records: 0,
            syscalls: 0,
            blocks: 0,
            counters: 0,
            weight: vec![0; weights.n],
            weights,
            overview: OverviewAgg::new(Grid::nice(lo, hi, TARGET_INTERVALS)),
            counter_seen: HashMap::default(),
            files: HashMap::default(),
            annotations: Vec::new(),
            ranks: Vec::new(),
            lateness: Vec::new(),
            collective_waits: Vec::new(),
            py_stacks: Default::default(),
        };
        Ok(Surveying { s, tracker: ProcTracker::default(), checkpoints: Some(Default::default()) })
    }

    /// Rides along a reader that finds the checkpoints itself (the stats
    /// pass) and hands them to [`Surveying::finish`].
    pub fn alongside(mut self) -> Self {
        self.checkpoints = None;
        self
    }

    /// Every record of the log, in order.
    #[inline]
    pub fn add(&mut self, frame: &Frame<'_>, rec: &Record) {
        let idx = self.tracker.observe(rec);
        if let Some(c) = &mut self.checkpoints {
            c.add(frame, rec);
        }
        self.s.take(frame, rec, idx, &self.tracker);
    }

    /// After the pass: the trailer, and the damage the reader found and
    /// the checkpoints (`found`, when another reader of the pass took the
    /// one and found the others, the same way); the reader is rewound.
    pub fn finish<R: Read + Seek>(self, reader: &mut LogReader<R>, found: Option<Found>) -> Survey {
        let Surveying { mut s, tracker, checkpoints } = self;
        match found {
            Some(f) => (s.diagnostics, s.checkpoints) = (f.diagnostics, f.checkpoints),
            None => {
                s.checkpoints = checkpoints.map(|c| c.finish()).unwrap_or_default();
                s.diagnostics = reader.take_diagnostics().iter().map(|d| d.describe(&s.header)).collect();
            }
        }
        s.trailer = reader.trailer().cloned();
        if s.first_ts == u64::MAX {
            s.first_ts = s.header.start.boottime_ns;
            s.last_ts = s.first_ts;
        }
        s.phases.sort_by(|a, b| a.ts.cmp(&b.ts).then(b.dur.cmp(&a.dur)));
        s.procs.finish(&s.header, &tracker, &s.epochs());
        reader.rewind();
        s
    }
}

impl Survey {
    /// Reads the whole log once; the reader is rewound afterwards.
    pub fn of<R: Read + Seek>(reader: &mut LogReader<R>) -> Result<Survey, LogError> {
        let mut pass = Surveying::new(reader)?;
        let mut rec = Record::Lost(Default::default());
        while let Some(mut frame) = reader.next_frame()? {
            while frame.next_into(&mut rec) {
                pass.add(&frame, &rec);
            }
        }
        Ok(pass.finish(reader, None))
    }

    fn file_read(&mut self, f: &Frame<'_>, rec: &Record) {
        let Some((path, n, _)) = file_read(rec) else { return };
        let path = f.str(path);
        if !path.is_empty() {
            self.files.entry(path_key(path)).or_default().read += n;
        }
    }

    fn take(&mut self, f: &Frame<'_>, rec: &Record, idx: Option<ProcIdx>, tracker: &ProcTracker) {
        let ts = rec.ts();
        self.records += 1;
        self.first_ts = self.first_ts.min(ts);
        self.last_ts = self.last_ts.max(rec.end_ts());
        let w = weight_of(rec);
        self.weight[self.weights.index(ts)] += w;
        if let Some(i) = idx {
            self.procs.note(f, rec, i, tracker);
            self.procs.list[i as usize].weight += w;
        }
        match *rec {
            ref r if crate::event::is_call(r) => {
                self.file_read(f, rec);
                self.syscalls += 1;
                if let Some(i) = idx {
                    self.overview.syscall(f, rec, i);
                }
            }
            Record::IoSummary(r) => {
                self.file_read(f, rec);
                if let Some(i) = idx {
                    self.overview.summary(&r, i);
                }
            }
            Record::Block(b) => {
                self.blocks += 1;
                self.overview.block(f, &b, idx);
            }
            Record::Counter(c) => {
                self.counters += 1;
                self.overview.counter(f, &c, idx);
                let (g, n) = (f.str(c.group), f.str(c.name));
                let key = counter_key(g, n, c.pid);
                match self.counter_seen.get_mut(&key) {
                    Some(e) => e.1 |= c.value != 0.0,
                    None => {
                        let name = (f.str_lossy(c.group).into_owned(), f.str_lossy(c.name).into_owned(), c.pid);
                        self.counter_seen.insert(key, (name, c.value != 0.0));
                    }
                }
            }
            Record::Phase(p) => self.phases.push(PhaseInfo {
                ts: p.ts,
                dur: p.dur,
                kind: p.kind,
                name: f.str_lossy(p.name).into_owned(),
                rank: p.rank,
                flags: p.flags,
            }),
            Record::Mark(m) if local_pid(m.pid) == 0 => self.marks.push(MarkInfo {
                ts: m.ts,
                name: f.str_lossy(m.name).into_owned(),
                value: f.str_lossy(m.value).into_owned(),
                rank: m.rank,
            }),
            Record::PageCache(c) if c.during.is_storage_read() => {
                let path = f.str(c.path);
                if !path.is_empty() {
                    self.files.entry(path_key(path)).or_default().storage += c.bytes;
                }
            }
            Record::Lost(l) => self.lost.push(LostInfo { ts: l.ts, kind: l.kind, count: l.count }),
            Record::PyFrame(r) => self.py_stacks.add(f, &r),
            Record::GpuEvent(e) => self.gpu_events.push(GpuEventInfo {
                ts: e.ts,
                group: f.str_lossy(e.group).into_owned(),
                kind: e.kind,
                code: e.code,
                pid: e.pid,
            }),
            _ => {}
        }
    }

    /// In a log of several hosts, the name of host `host` (for labels);
    /// `None` for a log of one host, whose labels say nothing of it.
    pub fn host_label(&self, host: usize) -> Option<&str> {
        self.header.hosts.get(host).map(|h| h.name.as_str())
    }

    /// Where process `idx` goes among the process groups (0 first).
    pub fn order_of(&self, idx: ProcIdx) -> i32 {
        self.procs.get(idx).order
    }

    /// The epochs, as (start, end, label), for naming respawned workers.
    pub fn epochs(&self) -> Vec<(u64, u64, String)> {
        epochs_of(&self.phases)
    }

    /// The run's totals for the file at `path`, if it was read.
    pub fn file_totals(&self, path: &[u8]) -> Option<FileTotals> {
        self.files.get(&path_key(path)).copied()
    }

    /// Whether the counter (group, name, pid) was ever other than zero.
    pub fn counter_nonzero(&self, group: &[u8], name: &[u8], pid: u32) -> bool {
        self.counter_seen.get(&counter_key(group, name, pid)).is_none_or(|e| e.1)
    }

    /// Machine counters zero for the whole run, `group name`, sorted:
    /// left out of the trace.
    pub fn zero_counters(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .counter_seen
            .values()
            .filter(|(k, nz)| !nz && local_pid(k.2) == 0 && !k.0.starts_with("CPU "))
            .map(|(k, _)| format!("{} {}", k.0, k.1))
            .collect();
        v.sort();
        v
    }

    /// Output events between `from` and `to` (by the weight bins).
    pub fn weight_between(&self, from: u64, to: u64) -> u64 {
        if to <= from {
            return 0;
        }
        let (a, b) = (self.weights.index(from), self.weights.index(to.saturating_sub(1)));
        self.weight[a..=b].iter().sum()
    }

    pub fn total_weight(&self) -> u64 {
        self.weight.iter().sum()
    }

    /// When the run started: see [`run_span`].
    pub fn start(&self) -> u64 {
        run_span(&self.header, self.trailer.as_ref(), self.first_ts, self.last_ts).0
    }

    /// When the run ended: see [`run_span`].
    pub fn end(&self) -> u64 {
        run_span(&self.header, self.trailer.as_ref(), self.first_ts, self.last_ts).1
    }
}

/// The run's span, the one every tool shows: from the recording's start
/// (else its first record) to the recording's end (else, in a cut log, its
/// last record), widened to any record outside.
pub fn run_span(header: &Header, trailer: Option<&Trailer>, first_ts: u64, last_ts: u64) -> (u64, u64) {
    let start = match header.start.boottime_ns {
        0 => first_ts,
        b => b.min(first_ts),
    };
    let end = match trailer.map(|t| t.end.boottime_ns) {
        Some(e) if e != 0 => e.max(last_ts),
        _ => last_ts,
    };
    (start, end.max(start))
}
