//! The one-sentence answer to "is the job input-bound?", from the
//! scheduling records: how long the trainer slept until one of its
//! data loaders woke it (worker processes or loader threads), against its
//! time on CPU, and what the loaders did meanwhile. Without scheduling
//! records it says so.

use serde_json::Value;

use crate::{pct, ProcStats, Stats};

/// The trainer stalled (for data, or in its own file I/O) at least this
/// share of its time.
const STALL_BOUND: f64 = 0.2;
/// The trainer waited for the GPU, or was on CPU, at least this share.
const BUSY_BOUND: f64 = 0.5;

/// Where the trainer's main thread's time went, as shares that add up
/// to 1 (see docs/verdict.md).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Breakdown {
    /// Asleep until one of its loaders woke it.
    pub data_wait: f64,
    /// Waiting for the other ranks: asleep until a collective library's
    /// thread woke it (gloo), or in a sync call while an NCCL collective
    /// was outstanding.
    pub collective_wait: f64,
    /// Inside CUDA calls that waited for the GPU (spinning or asleep).
    pub gpu_wait: f64,
    /// Inside its own calls on files (checkpoint writes, fsync, its reads).
    pub own_io: f64,
    /// On a CPU outside those calls.
    pub on_cpu: f64,
    /// Waiting for a CPU outside those calls.
    pub runnable: f64,
    /// Everything else: other sleeps and waits.
    pub other: f64,
    /// Asleep waiting for its Python's GIL (taken from `other`); `None`
    /// in a log with no wait for a GIL, where the share is not shown.
    pub gil_wait: Option<f64>,
}

/// One share of a [`Breakdown`]: its key in `verdict.breakdown`, what a
/// table calls it, how the verdict's sentence says it, and its value.
pub struct Share {
    pub key: &'static str,
    pub name: &'static str,
    pub phrase: &'static str,
    pub of: fn(&Breakdown) -> f64,
}

impl Share {
    /// Whether `b` has this share: all but `gil_wait` always.
    pub fn shown_in(&self, b: &Breakdown) -> bool {
        self.key != "gil_wait" || b.gil_wait.is_some()
    }
}

impl Breakdown {
    /// The eight shares, in the order they are listed (each named once:
    /// the JSON, the sentence, `diff` and the report's bars read these;
    /// see [`Share::shown_in`]).
    pub const SHARES: [Share; 8] = [
        Share { key: "data_wait", name: "data wait", phrase: "waiting for data", of: |b| b.data_wait },
        Share {
            key: "collective_wait",
            name: "waiting for other ranks",
            phrase: "waiting for other ranks",
            of: |b| b.collective_wait,
        },
        Share { key: "gpu_wait", name: "GPU wait", phrase: "waiting for the GPU", of: |b| b.gpu_wait },
        Share { key: "own_io", name: "own file I/O", phrase: "in its own file I/O", of: |b| b.own_io },
        Share { key: "on_cpu", name: "on CPU", phrase: "on CPU", of: |b| b.on_cpu },
        Share { key: "runnable", name: "waiting for a CPU", phrase: "waiting for a CPU", of: |b| b.runnable },
        Share {
            key: "gil_wait",
            name: "waiting for the GIL",
            phrase: "waiting for the GIL",
            of: |b| b.gil_wait.unwrap_or(0.0),
        },
        Share { key: "other", name: "otherwise asleep", phrase: "otherwise asleep", of: |b| b.other },
    ];

    /// The shares this breakdown has.
    pub fn shares(&self) -> impl Iterator<Item = &'static Share> + '_ {
        Self::SHARES.iter().filter(move |s| s.shown_in(self))
    }

    /// With `ns` of the total waiting for the GIL (`None`: a log with no
    /// such wait), out of `other`, where those sleeps were; scaled with
    /// the other parts where records out of order make them overlap.
    pub(crate) fn with_gil(mut self, total: f64, ns: Option<f64>) -> Breakdown {
        let Some(ns) = ns.filter(|_| total > 0.0) else { return self };
        let mut g = (ns / total).clamp(0.0, 1.0);
        let sum = 1.0 - self.other + g;
        if sum > 1.0 {
            let parts = [
                &mut self.data_wait,
                &mut self.collective_wait,
                &mut self.gpu_wait,
                &mut self.own_io,
                &mut self.on_cpu,
                &mut self.runnable,
                &mut g,
            ];
            for x in parts {
                *x /= sum;
            }
        }
        self.other = (1.0 - sum).max(0.0);
        self.gil_wait = Some(g);
        self
    }

    /// From ns: the total, and each part but `other` (the rest).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn of(
        total: f64,
        data_wait: f64,
        collective_wait: f64,
        gpu_wait: f64,
        own_io: f64,
        on_cpu: f64,
        runnable: f64,
    ) -> Option<Breakdown> {
        if total <= 0.0 {
            return None;
        }
        let f = |x: f64| (x / total).clamp(0.0, 1.0);
        let mut b = Breakdown {
            data_wait: f(data_wait),
            collective_wait: f(collective_wait),
            gpu_wait: f(gpu_wait),
            own_io: f(own_io),
            on_cpu: f(on_cpu),
            runnable: f(runnable),
            other: 0.0,
            gil_wait: None,
        };
        // Records a few microseconds out of order can make the parts
        // overlap by as much: they are scaled to fit.
        let sum = b.data_wait + b.collective_wait + b.gpu_wait + b.own_io + b.on_cpu + b.runnable;
        if sum > 1.0 {
            let parts = [
                &mut b.data_wait,
                &mut b.collective_wait,
                &mut b.gpu_wait,
                &mut b.own_io,
                &mut b.on_cpu,
                &mut b.runnable,
            ];
            for x in parts {
                *x /= sum;
            }
        }
        b.other = (1.0 - sum).max(0.0);
        Some(b)
    }

    /// Every kind [`Breakdown::kind`] gives.
    pub const KINDS: [&'static str; 6] =
        ["input-bound", "io-bound", "collective-bound", "gpu-bound", "cpu-bound", "mixed"];

    /// The kind: a stall (data, own I/O, the other ranks) of a fifth of
    /// the time names it (the largest); else waiting for the GPU or on CPU
    /// half the time; else `mixed`.
    pub fn kind(&self) -> &'static str {
        let stall = self.data_wait.max(self.own_io).max(self.collective_wait);
        if stall >= STALL_BOUND {
            if self.data_wait >= self.own_io && self.data_wait >= self.collective_wait {
                "input-bound"
            } else if self.own_io >= self.collective_wait {
                "io-bound"
            } else {
                "collective-bound"
            }
        } else if self.gpu_wait >= BUSY_BOUND && self.gpu_wait >= self.on_cpu {
            "gpu-bound"
        } else if self.on_cpu >= BUSY_BOUND {
            "cpu-bound"
        } else {
            "mixed"
        }
    }

    /// `on CPU 40%, waiting for data 31%, ...`: the parts over 0.5%,
    /// largest first, but `skip` (the one the sentence leads with).
    fn text(&self, skip: &str) -> String {
        let mut parts: Vec<(f64, &str)> = self.shares().map(|s| ((s.of)(self), s.phrase)).collect();
        parts.sort_by(|a, b| b.0.total_cmp(&a.0));
        let shown: Vec<String> = parts
            .iter()
            .filter(|p| p.0 >= 0.005 && p.1 != skip)
            .map(|(f, what)| format!("{what} {}", pct(*f)))
            .collect();
        shown.join(", ")
    }
}

/// What the trainer's workers did, over their threads' time together.
#[derive(Clone, Debug, PartialEq)]
pub struct Workers {
    /// `processes` (forked workers) or `threads` (the trainer's own
    /// loader threads): whichever ended more of its data waits.
    pub kind: &'static str,
    /// What one is called: `worker`, `loader thread`, `tf.data thread`.
    pub word: &'static str,
    pub count: usize,
    /// The most alive at once (fewer than `count` when respawned per epoch).
    pub at_once: usize,
    /// Time in read calls on files (their waits on pipes not included).
    pub read_fraction: f64,
    pub io_wait_fraction: f64,
    pub cpu_fraction: f64,
    pub runnable_fraction: f64,
    /// The files they read most, as one path or pattern, and the share of
    /// their bytes read those files hold.
    pub files: Option<(String, f64)>,
    /// Bytes they read from files by calls and io_uring requests.
    pub read_bytes: u64,
    /// Time in their read calls on files (summed over them).
    pub read_ns: u64,
    /// Their read calls on data files: latency percentiles (ns; `None`
    /// without any). See [`crate::ProcStats::loader_read_latency`].
    pub read_p50_ns: Option<u64>,
    pub read_p99_ns: Option<u64>,
    /// Share of the bytes their calls read that the page cache already held
    /// (null without the page-cache probe, or when they read nothing).
    pub cache_fraction: Option<f64>,
    /// The times of the threads that load, summed: each worker's main
    /// thread, or each loader thread. A worker's other threads (the
    /// queue's feeder, asleep all run) would halve each of its shares.
    pub loading: crate::acc::sched::Times,
    /// Time in their opens, closes and metadata calls on data files, and
    /// their opens.
    pub meta_ns: u64,
    pub opens: u64,
}

/// GPU idle time against the trainer's data waits, summed over GPUs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuOverlap {
    /// Share of the sampled GPU time that was idle.
    pub idle_fraction: Option<f64>,
    /// Share of the idle GPU time during which the trainer waited for data.
    pub idle_during_data_wait_fraction: Option<f64>,
}

/// The verdict over one epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochVerdict {
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub kind: &'static str,
    pub data_wait_fraction: Option<f64>,
    pub cpu_fraction: Option<f64>,
    pub breakdown: Option<Breakdown>,
    pub gpu: Option<GpuOverlap>,
    /// What the trainer's loaders read in it by calls (bytes), and of it
    /// from storage (`None` without the page-cache probe).
    pub read_bytes: f64,
    pub storage_bytes: Option<f64>,
}

impl EpochVerdict {
    /// The share of its loaders' reads the page cache held.
    pub fn cache_hit_fraction(&self) -> Option<f64> {
        let s = self.storage_bytes?;
        (self.read_bytes > 0.0).then(|| (1.0 - s / self.read_bytes).clamp(0.0, 1.0))
    }

    /// Its loaders' reads per second of the epoch (MB/s).
    pub fn read_mb_per_s(&self) -> Option<f64> {
        let secs = self.end.saturating_sub(self.start) as f64 / 1e9;
        (secs > 0.0).then(|| self.read_bytes / secs / 1e6)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// `input-bound`, `gpu-bound`, `cpu-bound`, `io-bound`, `mixed`, or
    /// `no-scheduling-data`.
    pub kind: &'static str,
    pub text: String,
    /// The trainer's pid (the command's, or below a wrapper), if in the log.
    pub trainer_pid: Option<u32>,
    pub data_wait_fraction: Option<f64>,
    pub breakdown: Option<Breakdown>,
    pub workers: Option<Workers>,
    /// Null without GPU counters.
    pub gpu: Option<GpuOverlap>,
    pub epochs: Vec<EpochVerdict>,
    /// The trainer's wait for each batch: percentiles per epoch and rank.
    pub step_waits: Option<crate::judge::step_waits::StepWaits>,
    /// The rank that waited for data clearly more than the median, as JSON.
    pub straggler: Value,
    /// What to try next ([`crate::judge::suggest`]): at most three, most
    /// explaining first; and why there are none, when there are none.
    pub suggestions: Vec<crate::judge::suggest::Suggestion>,
    pub suggestions_note: Option<String>,
}

fn ratio(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0).then(|| (part / whole).clamp(0.0, 1.0))
}

impl Stats {
    /// The trainer's main thread's share of its time asleep until one of
    /// its loaders (a worker or a loader thread) woke it.
    pub fn data_wait_fraction(&self, trainer: &ProcStats) -> Option<f64> {
        if !self.has_sched() {
            return None;
        }
        let workers: Vec<u32> = self.workers_of(trainer).iter().map(|w| w.pid).collect();
        if workers.is_empty() && trainer.loader_threads.is_empty() {
            return None;
        }
        let main = self.sched.main_thread.get(&trainer.pid)?;
        main.fraction(self.sched.data_wait(trainer.pid, &workers))
    }

    /// A process's main thread's share of its time waiting for the other
    /// ranks (see [`Breakdown::collective_wait`]); `None` without scheduling.
    pub fn collective_wait_fraction(&self, p: &ProcStats) -> Option<f64> {
        if !self.has_sched() {
            return None;
        }
        let main = self.sched.main_thread.get(&p.pid)?;
        let ic = self.sched.in_calls.get(&p.pid).copied().unwrap_or_default();
        let ns = self.sched.collective_wait(p.pid).saturating_sub(ic.collective_wait) + ic.collective;
        main.fraction(ns).map(|f| f.min(1.0))
    }

    /// A process's main thread's share of its time waiting for its
    /// Python's GIL; `None` without scheduling or in a log with no such wait.
    pub fn gil_wait_fraction(&self, p: &ProcStats) -> Option<f64> {
        if !self.has_sched() || !self.sched.gil_seen {
            return None;
        }
        let main = self.sched.main_thread.get(&p.pid)?;
        let ic = self.sched.in_calls.get(&p.pid).copied().unwrap_or_default();
        main.fraction(self.sched.gil_wait(p.pid).saturating_sub(ic.gil_wait))
    }

    /// What the trainer's loaders did, and what they read: its worker
    /// processes, or its loader threads.
    fn workers_summary(&self, t: &ProcStats, workers: &[&ProcStats]) -> Workers {
        let threads = self.loaders_are_threads(t, workers);
        // Each loader's times (all its threads', and its loading thread's),
        // read time, bytes from storage, and opens and closes.
        type Each<'a> =
            (Option<&'a crate::acc::sched::Times>, Option<&'a crate::acc::sched::Times>, u64, u64, u64, u64);
        let each: Vec<Each> = if threads {
            let times = |tid| self.sched.thread_times.get(&tid).filter(|x| x.0 == t.pid).map(|x| &x.1);
            let reads = |tid| self.thread_reads.get(tid);
            t.loader_threads
                .iter()
                .map(|&tid| {
                    let r = reads(tid);
                    (times(tid), times(tid), r.read_ns, r.from_storage, r.meta_ns, r.opens)
                })
                .collect()
        } else {
            workers
                .iter()
                .map(|w| {
                    let main = self.sched.main_thread.get(&w.pid);
                    (self.sched.procs.get(&w.pid), main, w.read_ns, w.cache.during_reads, w.meta_ns, w.data_opens)
                })
                .collect()
        };
        let add = |into: &mut crate::acc::sched::Times, x: &crate::acc::sched::Times| {
            into.cpu += x.cpu;
            into.runnable += x.runnable;
            into.io_wait += x.io_wait;
            into.sleep += x.sleep;
            into.other += x.other;
        };
        let (mut wt, mut loading) = (crate::acc::sched::Times::default(), crate::acc::sched::Times::default());
        let (mut read_ns, mut from_storage, mut meta_ns, mut opens) = (0, 0, 0, 0);
        for (times, main, ns, storage, meta, o) in &each {
            if let Some(x) = times {
                add(&mut wt, x);
            }
            if let Some(x) = main {
                add(&mut loading, x);
            }
            read_ns += ns;
            from_storage += storage;
            meta_ns += meta;
            opens += o;
        }
        let wf = |n| wt.fraction(n).unwrap_or(0.0);
        // Their data reads' latency: the workers', or the trainer's threads'
        // other than its main one.
        let mut latency = crate::Histogram::default();
        let sources: Vec<&ProcStats> = if threads { vec![t] } else { workers.to_vec() };
        for h in sources.iter().filter_map(|p| p.loader_read_latency.as_ref()) {
            latency.merge(h);
        }
        let files: Vec<(&str, u64)> = self.worker_files.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        // Bytes from files (not pipes or sockets): what the cache could hold.
        let read_bytes = files.iter().map(|f| f.1).sum();
        Workers {
            kind: if threads { "threads" } else { "processes" },
            word: if threads { t.loader_word } else { "worker" },
            count: each.len(),
            at_once: if threads { each.len() } else { most_at_once(workers) },
            read_fraction: wf(read_ns).min(1.0),
            io_wait_fraction: wf(wt.io_wait),
            cpu_fraction: wf(wt.cpu),
            runnable_fraction: wf(wt.runnable),
            files: crate::judge::glob::name_files(&files),
            read_bytes,
            read_ns,
            read_p50_ns: latency.quantile(0.5),
            read_p99_ns: latency.quantile(0.99),
            cache_fraction: if self.has_page_cache() {
                crate::CacheFill { during_reads: from_storage, ..Default::default() }.hit_ratio(read_bytes)
            } else {
                None
            },
            loading,
            meta_ns,
            opens,
        }
    }

    /// Whether the trainer's loaders are its own threads: it has loader
    /// threads, and they ended more of its data waits than its workers.
    fn loaders_are_threads(&self, t: &ProcStats, workers: &[&ProcStats]) -> bool {
        if t.loader_threads.is_empty() {
            return false;
        }
        let pids: Vec<u32> = workers.iter().map(|w| w.pid).collect();
        let by_threads = self.sched.by_threads.get(&t.pid).copied().unwrap_or(0);
        let by_workers = self.sched.data_wait(t.pid, &pids) - by_threads;
        workers.is_empty() || by_threads > by_workers
    }

    /// GPU idle time against data waits, over the whole run.
    fn gpu_overlap(&self) -> Option<GpuOverlap> {
        let g = &self.sched.gpu;
        g.has_gpus().then(|| GpuOverlap {
            idle_fraction: ratio(g.idle_ns as f64, g.sampled as f64),
            idle_during_data_wait_fraction: ratio(g.idle_in_data_wait as f64, g.idle_ns as f64),
        })
    }

    /// The trainer's calls that began before the scheduling history kept
    /// to split them (a call longer than two minutes, or one preempted
    /// more than 65,536 times): said, never silent.
    pub fn split_warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        // The ranks' waits and NCCL calls past what is kept for lateness.
        let dropped = self.sched.episodes_dropped + self.arrivals.dropped;
        if dropped > 0 {
            w.push(format!(
                "{dropped} waits for other ranks or NCCL calls past the ones kept were left out of the ranks' \
                 step times and lateness (their time is still in the breakdown)"
            ));
        }
        let Some(t) = self.trainer() else { return w };
        if let Some(ic) = self.sched.in_calls.get(&t.pid).filter(|ic| ic.cut > 0) {
            w.push(format!(
                "{} of the trainer's calls began before the scheduling history kept to split them: {} of \
                 their time stays in the state it was in (not in GPU wait or own I/O)",
                ic.cut,
                crate::duration(ic.cut_ns)
            ));
        }
        w
    }

    /// The verdict over each epoch phase, from the trainer's timeline.
    /// Process `pid`'s wait for each batch ([`crate::judge::step_waits`]), per
    /// epoch, and each rank's when there are several.
    fn step_waits(&self, pid: u32, ranks: &[crate::judge::ranks::Rank]) -> Option<crate::judge::step_waits::StepWaits> {
        use crate::judge::step_waits::{by_epoch, steps_of};
        let mut epochs = self.epochs.clone();
        epochs.sort_by_key(|e| (e.0, e.1));
        let epochs: Vec<(String, u64, u64)> = epochs.into_iter().map(|(s, e, n)| (n, s, e)).collect();
        let of = |pid: u32| {
            let marks = [self.step_marks.get(&pid), self.step_marks.get(&0)].into_iter().flatten().next();
            let none = Vec::new();
            let batches = self.sched.batches.get(&pid).unwrap_or(&none);
            let (from, steps) = steps_of(marks.map(Vec::as_slice), batches)?;
            let (run, per, hist) = by_epoch(&steps, &epochs);
            Some((from, run?, per, hist))
        };
        let (from, run, epochs, hist) = of(pid)?;
        let ranks = if ranks.len() > 1 {
            ranks.iter().filter_map(|r| Some((r.pid, r.rank, of(r.pid)?.1))).collect()
        } else {
            Vec::new()
        };
        Some(crate::judge::step_waits::StepWaits { from, run, epochs, ranks, hist })
    }

    fn epoch_verdicts(&self) -> Vec<EpochVerdict> {
        let mut epochs = self.epochs.clone();
        epochs.sort_by_key(|e| (e.0, e.1));
        epochs.into_iter().filter_map(|(start, end, name)| self.window_verdict(start, end, name)).collect()
    }

    /// The verdict over `[start, end)` of the trainer's timeline: an
    /// epoch's, `stats --from/--to`'s, and the live metrics' windows (one
    /// computation for all three); `None` without scheduling records.
    pub fn window_verdict(&self, start: u64, end: u64, name: String) -> Option<EpochVerdict> {
        let tl = self.sched.timeline.as_ref()?;
        let w = tl.window(start, end);
        let b = Breakdown::of(
            w.total(),
            w.data_wait,
            w.collective_wait + w.collective_call,
            w.gpu_wait,
            w.own_io,
            w.cpu,
            w.runnable,
        )
        .map(|b| b.with_gil(w.total(), self.sched.gil_seen.then_some(w.gil_wait)));
        Some(EpochVerdict {
            name,
            start,
            end,
            kind: b.map_or("no-scheduling-data", |b| b.kind()),
            data_wait_fraction: b.map(|b| b.data_wait),
            cpu_fraction: b.map(|b| b.on_cpu),
            breakdown: b,
            gpu: self.sched.gpu.has_gpus().then(|| GpuOverlap {
                idle_fraction: ratio(w.gpu_idle, w.gpu_sampled),
                idle_during_data_wait_fraction: ratio(w.gpu_idle_data_wait, w.gpu_idle),
            }),
            read_bytes: w.read_bytes,
            storage_bytes: self.has_page_cache().then_some(w.storage_bytes),
        })
    }

    /// Process `pid`'s main thread's share of `[start, end)` asleep until
    /// one of its loaders woke it (a rank's data wait over a window).
    pub fn window_data_wait(&self, pid: u32, start: u64, end: u64) -> Option<f64> {
        let rw = self.sched.rank_waits.as_ref()?;
        (end > start).then(|| (rw.window(pid, start, end) / (end - start) as f64).clamp(0.0, 1.0))
    }

    pub fn verdict(&self) -> Verdict {
        self.verdict_with(&self.ranks())
    }

    /// The verdict, given the ranks ([`Stats::ranks`]: matching their
    /// collectives is the dearest part; callers that show both compute
    /// them once).
    pub fn verdict_with(&self, ranks: &[crate::judge::ranks::Rank]) -> Verdict {
        let trainer_pid = self.trainer().map(|t| t.pid);
        let none = |kind, text: String| Verdict {
            kind,
            text,
            trainer_pid,
            data_wait_fraction: None,
            breakdown: None,
            workers: None,
            gpu: None,
            epochs: Vec::new(),
            step_waits: None,
            straggler: Value::Null,
            suggestions: Vec::new(),
            suggestions_note: None,
        };
        if !self.has_sched() {
            return none(
                "no-scheduling-data",
                "no verdict: this log has no scheduling records (recorded with --sched off, or imported)".into(),
            );
        }
        let Some(t) = self.trainer() else {
            return none("no-scheduling-data", "no verdict: the command's process is not in this log".into());
        };
        let Some(b) = self.split(t) else {
            return none("no-scheduling-data", "no verdict: no scheduling records of the trainer".into());
        };
        let workers = self.workers_of(t);
        let has_loaders = !workers.is_empty() || !t.loader_threads.is_empty();
        let kind = b.kind();
        // Named when it is not the command itself (a wrapper ran it).
        let trainer = if t.pid == self.header.root_pid {
            "the trainer".to_string()
        } else {
            format!("the trainer ({} [{}])", t.trace_name.as_deref().unwrap_or(&t.name), t.pid)
        };
        // The rest of its time, in brackets; nothing when the one share is all.
        let rest = |skip: &str| match b.text(skip) {
            r if r.is_empty() => r,
            r => format!(" ({r})"),
        };
        let head = match kind {
            "input-bound" => {
                format!("{trainer} waited for data {} of its time{}", pct(b.data_wait), rest("waiting for data"))
            }
            "io-bound" => {
                format!(
                    "{trainer} was in its own file I/O {} of its time{}",
                    pct(b.own_io),
                    rest("in its own file I/O")
                )
            }
            "gpu-bound" => {
                format!("{trainer} waited for the GPU {} of its time{}", pct(b.gpu_wait), rest("waiting for the GPU"))
            }
            "cpu-bound" => format!("{trainer} was on CPU {} of its time{}", pct(b.on_cpu), rest("on CPU")),
            "collective-bound" => format!(
                "{trainer} waited for the other ranks in collectives {} of its time{}",
                pct(b.collective_wait),
                rest("waiting for other ranks")
            ),
            _ => format!("{trainer} spent its time {}", b.text("")),
        };
        let head = format!("{kind}: {head}");
        let w = has_loaders.then(|| self.workers_summary(t, &workers));
        let of_workers = match &w {
            None => "; no data loaders (worker processes or loader threads)".to_string(),
            Some(w) => {
                let n = w.count;
                let what = match &w.files {
                    Some((files, _)) => format!("reads of {files}"),
                    None => "file reads".to_string(),
                };
                let cache = w.cache_fraction.map(|c| format!("{} from cache; ", pct(c))).unwrap_or_default();
                // Respawned workers (a new set each epoch) are counted once per set.
                let plural = |k: usize| if k == 1 { "" } else { "s" };
                let who = if w.at_once < n {
                    format!("its {} {}{} ({n} over the run)", w.at_once, w.word, plural(w.at_once))
                } else {
                    format!("its {n} {}{}", w.word, plural(n))
                };
                format!(
                    "; {who} spent {} in {what} ({cache}{} in uninterruptible I/O sleep), {} on CPU, {} waiting for a CPU",
                    pct(w.read_fraction),
                    pct(w.io_wait_fraction),
                    pct(w.cpu_fraction),
                    pct(w.runnable_fraction),
                )
            }
        };
        // Other processes with workers of their own (torchrun's other
        // ranks): how long they waited, in a range.
        let feeders = &self.fed;
        let others: Vec<f64> = self
            .processes
            .iter()
            .filter(|p| p.pid != t.pid && feeders.contains(&p.pid))
            .filter_map(|p| self.data_wait_fraction(p))
            .collect();
        let straggler = self.straggler(ranks);
        let others_text = match others.len() {
            _ if straggler.is_some() => {
                let s = straggler.as_ref().unwrap();
                format!("; of {} ranks, {}", ranks.len(), self.straggler_text(s))
            }
            0 => String::new(),
            1 => format!("; 1 other process has workers too (data waits {})", pct(others[0])),
            n => {
                let (lo, hi) = others.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                format!("; {n} other processes have workers too (data waits {} to {})", pct(lo), pct(hi))
            }
        };
        let (suggestions, suggestions_note) = crate::judge::suggest::suggest(self, &b, w.as_ref());
        let gpu = self.gpu_overlap();
        let gpu_text = match gpu {
            Some(GpuOverlap { idle_fraction: Some(i), idle_during_data_wait_fraction: Some(d) }) => format!(
                "; the GPUs were idle {} of the time, {} of it while the trainer waited for data",
                pct(i),
                pct(d)
            ),
            Some(GpuOverlap { idle_fraction: Some(_), .. }) => "; the GPUs were never idle".to_string(),
            _ => String::new(),
        };
        Verdict {
            kind,
            text: format!("{head}{of_workers}{others_text}{gpu_text}"),
            trainer_pid,
            // As every process's `data_wait_fraction` (the split's share can
            // differ by what it scales away when records overlap).
            data_wait_fraction: self.data_wait_fraction(t),
            breakdown: Some(b),
            workers: w,
            gpu,
            epochs: self.epoch_verdicts(),
            step_waits: self.step_waits(t.pid, ranks),
            straggler: straggler.map_or(Value::Null, |s| self.straggler_json(&s)),
            suggestions,
            suggestions_note,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::path::Path;

    use mltrace_log::*;

    use crate::Stats;

    fn stats(recs: &[Record], probes: Vec<Probe>) -> Stats {
        let header = Header { root_pid: 10, command: vec!["train".into()], probes, ..Default::default() };
        let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
        for r in recs {
            w.push_with(|e| {
                let comm = e.intern(b"t");
                match *r {
                    Record::SchedSwitch(mut x) => {
                        (x.prev_comm, x.next_comm) = (comm, comm);
                        Record::SchedSwitch(x)
                    }
                    Record::SchedWake(mut x) => {
                        x.comm = comm;
                        Record::SchedWake(x)
                    }
                    other => other,
                }
            })
            .unwrap();
        }
        let log = w.finish(&Trailer::default()).unwrap();
        Stats::from_reader(&mut LogReader::new(Path::new("t"), Cursor::new(log)).unwrap()).unwrap()
    }

    fn sw(ts: u64, prev: u32, state: SchedState, next: u32) -> Record {
        let traced = if prev != 0 { sched::PREV } else { 0 } | if next != 0 { sched::NEXT } else { 0 };
        Record::SchedSwitch(SchedSwitch {
            ts,
            prev_pid: prev,
            prev_tid: prev,
            prev_state: state,
            next_pid: next,
            next_tid: next,
            traced,
            ..Default::default()
        })
    }

    fn wake(ts: u64, who: u32, by: u32) -> Record {
        Record::SchedWake(SchedWake { ts, pid: who, tid: who, waker_pid: by, waker_tid: by, ..Default::default() })
    }

    fn fork(ts: u64, pid: u32, parent: u32) -> Record {
        Record::Fork(Fork { ts, pid, tid: pid, parent_pid: parent, parent_tid: parent, thread: false })
    }

    /// 1000 ns of the trainer: 200 on CPU, a 300 ns sync call (spinning
    /// 100, asleep 200), a 100 ns write to a file (on CPU), 200 asleep
    /// until its worker woke it, 100 runnable, 100 in a timed sleep.
    #[test]
    fn the_breakdown_adds_up_with_gpu_waits_and_own_io() {
        let gpu = crate::acc::gpu_calls::gpu_wait(300, 300, 10);
        let write = Record::Io(Io {
            ts: 600,
            dur: 100,
            pid: 10,
            tid: 10,
            op: IoOp::Write,
            kind: FileKind::Regular,
            ret: 4096,
            requested: 4096,
            ..Default::default()
        });
        let s = stats(
            &[
                fork(0, 11, 10),
                sw(100, 0, SchedState::Runnable, 10),
                // In the sync call from 300: spins to 400, sleeps to 600.
                sw(400, 10, SchedState::Sleeping, 0),
                wake(600, 10, 0),
                sw(600, 0, SchedState::Runnable, 10),
                gpu,
                write,
                // Waits for its worker 700..900.
                sw(700, 10, SchedState::Sleeping, 11),
                wake(900, 10, 11),
                sw(900, 11, SchedState::Sleeping, 0),
                // Runnable 900..1000, on CPU 1000..1000.
                sw(1000, 0, SchedState::Runnable, 10),
                sw(1000, 10, SchedState::Sleeping, 0),
                // A timed sleep (an interrupt ends it) 1000..1100.
                Record::SchedWake(SchedWake { ts: 1100, pid: 10, tid: 10, by: WakeBy::Timer, ..Default::default() }),
                sw(1100, 0, SchedState::Runnable, 10),
            ],
            vec![],
        );
        let v = s.verdict();
        let b = v.breakdown.unwrap();
        let sum = b.data_wait + b.collective_wait + b.gpu_wait + b.own_io + b.on_cpu + b.runnable + b.other;
        assert!((sum - 1.0).abs() < 1e-9, "{b:?}");
        let close = |a: f64, e: f64| (a - e).abs() < 1e-9;
        assert!(close(b.gpu_wait, 0.3) && close(b.own_io, 0.1) && close(b.data_wait, 0.2), "{b:?}");
        assert!(close(b.on_cpu, 0.2) && close(b.runnable, 0.1) && close(b.other, 0.1), "{b:?}");
        assert_eq!(v.kind, "input-bound", "{}", v.text);
        let j = s.to_json();
        let keys: Vec<&String> = j["verdict"]["breakdown"].as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 7, "{keys:?}");
        let t = j["processes"].as_array().unwrap().iter().find(|p| p["pid"] == 10).unwrap();
        assert!(t["gpu_wait_fraction"].as_f64().unwrap() > 0.25, "{t}");
        assert!(t["own_io_fraction"].as_f64().unwrap() > 0.05, "{t}");
    }

    #[test]
    fn the_gil_wait_comes_out_of_other_and_the_shares_still_add_up() {
        let close = |a: f64, e: f64| (a - e).abs() < 1e-9;
        let sum = |b: &super::Breakdown| super::Breakdown::SHARES.iter().map(|s| (s.of)(b)).sum::<f64>();
        let of = |data, cpu, gil| super::Breakdown::of(1.0, data, 0.0, 0.0, 0.0, cpu, 0.1).unwrap().with_gil(1.0, gil);
        let b = of(0.2, 0.3, Some(0.25));
        assert!(close(b.gil_wait.unwrap(), 0.25) && close(b.other, 0.15) && close(sum(&b), 1.0), "{b:?}");
        assert_eq!(b.to_json().as_object().unwrap().len(), 8);
        // Overlapping by records out of order: scaled with the rest.
        let b = of(0.5, 0.4, Some(0.25));
        assert!(close(b.gil_wait.unwrap(), 0.2) && close(b.other, 0.0) && close(sum(&b), 1.0), "{b:?}");
        // A log without a wait for a GIL: no such share.
        let b = of(0.2, 0.3, None);
        assert!(b.gil_wait.is_none() && close(b.other, 0.4), "{b:?}");
        assert_eq!(b.to_json().as_object().unwrap().len(), 7);
    }

    /// A call that began before the history kept to split it is said.
    #[test]
    fn a_call_longer_than_the_history_is_said() {
        let s_ = 1_000_000_000u64;
        let gpu = crate::acc::gpu_calls::gpu_wait(120 * s_, 150 * s_, 10);
        let s = stats(
            &[
                sw(100, 0, SchedState::Runnable, 10),
                sw(130 * s_, 10, SchedState::Runnable, 0),
                sw(131 * s_, 0, SchedState::Runnable, 10),
                sw(260 * s_, 10, SchedState::Runnable, 0),
                sw(261 * s_, 0, SchedState::Runnable, 10),
                gpu,
            ],
            vec![],
        );
        let w = s.split_warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("1 of the trainer's calls began before"), "{w:?}");
        let b = s.verdict().breakdown.unwrap();
        assert!(b.gpu_wait > 0.4, "{b:?}");
    }

    #[test]
    fn kinds_from_the_breakdown() {
        let b = |data_wait, gpu_wait, own_io, on_cpu| super::Breakdown {
            data_wait,
            gpu_wait,
            own_io,
            on_cpu,
            ..Default::default()
        };
        assert_eq!(b(0.3, 0.5, 0.0, 0.2).kind(), "input-bound");
        assert_eq!(b(0.2, 0.0, 0.3, 0.5).kind(), "io-bound");
        assert_eq!(b(0.05, 0.6, 0.0, 0.3).kind(), "gpu-bound");
        assert_eq!(b(0.05, 0.1, 0.0, 0.7).kind(), "cpu-bound");
        assert_eq!(b(0.1, 0.4, 0.1, 0.4).kind(), "mixed");
    }

    /// Workers respawned: one at a time, two over the run ("its 1 worker
    /// (2 over the run)", not "1 workers").
    #[test]
    fn one_worker_at_a_time_is_one_worker() {
        let exit = |ts, pid| Record::Exit(Exit { ts, pid, tid: pid, process_exit: true, ..Default::default() });
        let s = stats(
            &[
                fork(0, 11, 10),
                sw(100, 0, SchedState::Runnable, 10),
                sw(200, 10, SchedState::Sleeping, 11),
                wake(400, 10, 11),
                sw(400, 11, SchedState::Sleeping, 10),
                exit(450, 11),
                fork(500, 12, 10),
                sw(600, 10, SchedState::Sleeping, 12),
                wake(900, 10, 12),
                sw(900, 12, SchedState::Sleeping, 10),
                sw(1000, 10, SchedState::Sleeping, 0),
            ],
            vec![],
        );
        let v = s.verdict();
        assert!(v.text.contains("; its 1 worker (2 over the run) spent"), "{v:?}");
    }

    /// A trainer that did nothing else: no empty brackets after its share.
    #[test]
    fn a_trainer_that_only_waited_says_nothing_more() {
        let s = stats(
            &[
                fork(0, 11, 10),
                sw(100, 0, SchedState::Runnable, 10),
                sw(101, 10, SchedState::Sleeping, 11),
                sw(200, 11, SchedState::Uninterruptible, 0),
                wake(300, 11, 0),
                sw(400, 0, SchedState::Runnable, 11),
                wake(100_000, 10, 11),
                sw(100_000, 11, SchedState::Sleeping, 10),
                sw(100_000, 10, SchedState::Runnable, 0),
            ],
            vec![],
        );
        let v = s.verdict();
        assert!(v.text.starts_with("input-bound: the trainer waited for data 100% of its time; its 1 worker"), "{v:?}");
    }

    #[test]
    fn the_trainer_waits_for_its_worker() {
        let s = stats(
            &[
                fork(0, 11, 10),
                sw(100, 0, SchedState::Runnable, 10),
                // On CPU 400 ns, then asleep 600 ns until the worker wakes it.
                sw(500, 10, SchedState::Sleeping, 11),
                sw(600, 11, SchedState::Uninterruptible, 0),
                wake(700, 11, 0),
                sw(1000, 0, SchedState::Runnable, 11),
                wake(1100, 10, 11),
                sw(1100, 11, SchedState::Sleeping, 10),
                sw(1100, 10, SchedState::Runnable, 0),
            ],
            vec![],
        );
        let v = s.verdict();
        assert_eq!(v.kind, "input-bound", "{v:?}");
        assert_eq!(v.data_wait_fraction, Some(0.6));
        assert!(
            v.text.starts_with("input-bound: the trainer waited for data 60% of its time (on CPU 40%); its 1 worker"),
            "{v:?}"
        );
        let j = s.to_json();
        assert_eq!(j["verdict"]["kind"], "input-bound");
        assert_eq!(j["verdict"]["data_wait_fraction"].as_f64(), Some(0.6));
        let by_pid = |pid: u64| j["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap();
        let t = by_pid(10);
        assert_eq!((t["cpu_fraction"].as_f64(), t["sleep_fraction"].as_f64()), (Some(0.4), Some(0.6)));
        assert_eq!(t["data_wait_fraction"].as_f64(), Some(0.6));
        let w = by_pid(11);
        // Worker 11: on CPU 100, D 100 (woken at 700), runnable 400 until 1100.
        assert_eq!(w["io_wait_fraction"].as_f64(), Some(100.0 / 600.0));
        assert!(w["data_wait_fraction"].is_null());
    }

    #[test]
    fn without_scheduling_records_nothing_is_guessed() {
        let s = stats(&[fork(0, 11, 10), Record::Exit(Exit { ts: 5, pid: 11, tid: 11, ..Default::default() })], vec![]);
        let j = s.to_json();
        assert_eq!(j["verdict"]["kind"], "no-scheduling-data");
        assert!(j["verdict"]["data_wait_fraction"].is_null());
        for k in ["cpu_fraction", "runnable_fraction", "io_wait_fraction", "sleep_fraction", "data_wait_fraction"] {
            assert!(j["processes"][0][k].is_null(), "{k}");
        }
        assert!(s.render(5).starts_with("verdict:  no verdict: this log has no scheduling records"));
    }

    /// A record made with the frame's string table at hand.
    type Rec = Box<dyn Fn(&mut FrameEncoder) -> Record>;

    /// A log from records that need strings (paths, counter and phase names).
    fn stats_with(recs: Vec<Rec>, probes: Vec<Probe>) -> Stats {
        let header = Header { root_pid: 10, command: vec!["train".into()], probes, ..Default::default() };
        let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
        for r in &recs {
            w.push_with(|e| r(e)).unwrap();
        }
        let log = w.finish(&Trailer::default()).unwrap();
        Stats::from_reader(&mut LogReader::new(Path::new("t"), Cursor::new(log)).unwrap()).unwrap()
    }

    fn plain(r: Record) -> Rec {
        Box::new(move |e| match r {
            Record::SchedSwitch(mut x) => {
                (x.prev_comm, x.next_comm) = (e.intern(b"t"), e.intern(b"t"));
                Record::SchedSwitch(x)
            }
            Record::SchedWake(mut x) => {
                x.comm = e.intern(b"t");
                Record::SchedWake(x)
            }
            other => other,
        })
    }

    fn sm(ts: u64, value: f64) -> Rec {
        Box::new(move |e| {
            let (group, name) = (e.intern(b"GPU 0 (Fake H100)"), e.intern(b"SM"));
            Record::Counter(Counter { ts, group, name, unit: CounterUnit::Percent, pid: 0, value })
        })
    }

    fn epoch(ts: u64, n: u32) -> Rec {
        Box::new(move |e| {
            let name = e.intern(format!("EPOCH {n}").as_bytes());
            Record::Phase(Phase { ts, dur: 1000, kind: PhaseKind::Epoch, name, rank: -1, pid: 0, flags: 0 })
        })
    }

    /// Epoch 1: the trainer waits 600 of 1000 ns for its worker while the
    /// GPU idles; epoch 2: it computes and the GPU is busy.
    #[test]
    fn per_epoch_gpu_idle_and_what_the_workers_read() {
        let read = |path: &'static [u8], ret: i64| -> Rec {
            Box::new(move |e| {
                Record::Io(Io {
                    ts: 600,
                    dur: 100,
                    pid: 11,
                    tid: 11,
                    op: IoOp::Read,
                    path: e.intern(path),
                    kind: FileKind::Regular,
                    ret,
                    ..Default::default()
                })
            })
        };
        let cache = Box::new(|e: &mut FrameEncoder| {
            Record::PageCache(PageCache {
                ts: 650,
                pid: 11,
                tid: 11,
                path: e.intern(b"/data/train/a.npz"),
                bytes: 1024,
                during: CacheDuring::Read,
                ..Default::default()
            })
        });
        let probes = vec![Probe { subsystem: subsystem::PAGE_CACHE.into(), ..Default::default() }];
        let s = stats_with(
            vec![
                plain(fork(0, 11, 10)),
                sm(100, 50.0),
                plain(sw(100, 0, SchedState::Runnable, 10)),
                plain(sw(500, 10, SchedState::Sleeping, 11)),
                read(b"/data/train/a.npz", 3000),
                read(b"/data/train/b.npz", 1096),
                read(b"/usr/lib/x.so", 10),
                cache,
                sm(700, 0.0),
                plain(wake(1100, 10, 11)),
                plain(sw(1100, 11, SchedState::Sleeping, 10)),
                epoch(100, 1),
                sm(1100, 0.0),
                sm(2100, 90.0),
                plain(sw(2100, 10, SchedState::Runnable, 0)),
                epoch(1100, 2),
            ],
            probes,
        );
        let v = s.verdict();
        assert_eq!((v.kind, v.data_wait_fraction), ("input-bound", Some(0.3)), "{v:?}");
        let w = v.workers.as_ref().unwrap();
        assert_eq!(w.files.as_ref().unwrap().0, "/data/train/*.npz");
        assert_eq!(w.cache_fraction, Some(1.0 - 1024.0 / 4106.0));
        let g = v.gpu.unwrap();
        assert_eq!((g.idle_fraction, g.idle_during_data_wait_fraction), (Some(0.5), Some(0.6)));
        assert!(
            v.text.contains("in reads of /data/train/*.npz (75% from cache; ")
                && v.text.ends_with("the GPUs were idle 50% of the time, 60% of it while the trainer waited for data"),
            "{}",
            v.text
        );
        let e: Vec<_> =
            v.epochs.iter().map(|e| (e.name.as_str(), e.kind, e.data_wait_fraction, e.cpu_fraction)).collect();
        assert_eq!(
            e,
            [("EPOCH 1", "input-bound", Some(0.6), Some(0.4)), ("EPOCH 2", "cpu-bound", Some(0.0), Some(1.0))]
        );
        let (g1, g2) = (v.epochs[0].gpu.unwrap(), v.epochs[1].gpu.unwrap());
        assert_eq!((g1.idle_fraction, g1.idle_during_data_wait_fraction), (Some(1.0), Some(0.6)));
        assert_eq!((g2.idle_fraction, g2.idle_during_data_wait_fraction), (Some(0.0), None));
        let j = s.to_json();
        assert_eq!(j["verdict"]["epochs"][0]["start"].as_u64(), Some(100));
        assert_eq!(j["verdict"]["epochs"][1]["kind"], "cpu-bound");
        assert_eq!(j["verdict"]["gpu_idle_during_data_wait_fraction"].as_f64(), Some(0.6));
        assert_eq!(j["verdict"]["workers"]["files"], "/data/train/*.npz");
        // The first epoch explained: its loaders' reads (all three,
        // 4106 B, in epoch 1), 1024 B of them from storage.
        let reads: Vec<_> = v.epochs.iter().map(|e| (e.read_bytes, e.storage_bytes)).collect();
        assert_eq!(reads, [(4106.0, Some(1024.0)), (0.0, Some(0.0))]);
        assert_eq!(v.epochs[0].cache_hit_fraction(), Some(1.0 - 1024.0 / 4106.0));
        assert_eq!(j["verdict"]["epochs"][0]["from_storage_bytes"], 1024);
        let text = s.render(5);
        assert!(text.contains("verdict per epoch") && text.contains("EPOCH 2"), "{text}");
        assert!(text.contains("EPOCH 1: its loaders read 4.0 KiB, bringing 1.0 KiB from storage, at "), "{text}");
    }

    #[test]
    fn without_gpus_or_epochs_their_figures_are_null() {
        let s = stats(
            &[
                fork(0, 11, 10),
                sw(100, 0, SchedState::Runnable, 10),
                sw(500, 10, SchedState::Sleeping, 11),
                wake(1100, 10, 11),
                sw(1100, 11, SchedState::Sleeping, 10),
            ],
            vec![],
        );
        let j = s.to_json();
        let v = &j["verdict"];
        assert!(v["gpu_idle_fraction"].is_null() && v["gpu_idle_during_data_wait_fraction"].is_null(), "{v}");
        assert_eq!(v["epochs"].as_array().map(Vec::len), Some(0));
        assert!(v["workers"]["cache_fraction"].is_null() && v["workers"]["files"].is_null(), "{v}");
        assert!(!s.render(5).contains("verdict per epoch"));
    }
}

/// The most of `procs` alive at one time (a process not seen starting
/// or ending is taken as alive from the start or to the end).
fn most_at_once(procs: &[&ProcStats]) -> usize {
    let mut ev: Vec<(u64, i32)> = Vec::with_capacity(2 * procs.len());
    for p in procs {
        ev.push((p.started.unwrap_or(0), 1));
        ev.push((p.ended.unwrap_or(u64::MAX), -1));
    }
    // At the same instant an exit goes before a start.
    ev.sort_unstable();
    let (mut n, mut most) = (0i32, 0i32);
    for (_, d) in ev {
        n += d;
        most = most.max(n);
    }
    most as usize
}

#[cfg(test)]
mod at_once_tests {
    use super::*;

    fn p(started: Option<u64>, ended: Option<u64>) -> ProcStats {
        ProcStats { started, ended, ..Default::default() }
    }

    #[test]
    fn respawned_sets_count_once() {
        // Two epochs of two workers, the second set forked as the first exits.
        let w = [p(Some(0), Some(10)), p(Some(1), Some(10)), p(Some(10), Some(20)), p(Some(10), None)];
        let refs: Vec<&ProcStats> = w.iter().collect();
        assert_eq!(most_at_once(&refs), 2);
        let all = [p(None, None), p(None, Some(5)), p(Some(3), None)];
        let refs: Vec<&ProcStats> = all.iter().collect();
        assert_eq!(most_at_once(&refs), 3);
    }
}
