//! Ranks side by side: every process with data loaders of its own (the
//! trainer; each rank under torchrun, mpirun or Slurm; each host's
//! trainer in a merged log), with its split of time and its loaders'
//! reads, and the one that waited for data clearly more than the others.

use std::collections::HashSet;

use mltrace_log::{env, host_of, local_pid};
use serde_json::{json, Value};

use crate::acc::hist::Histogram;
use crate::acc::steps::{self, median, StepFrom};
use crate::judge::verdict::Breakdown;
use crate::{pct, ProcStats, Stats};

/// With fewer ranks there is no median to stand out from (by step time,
/// or by data wait).
const STRAGGLER_MIN_RANKS: usize = 3;
/// A rank is clearly slower when its step takes this many times the
/// median rank's ...
const STEP_RATIO: f64 = 1.25;
/// ... and at least this much longer (ns): steps of a few microseconds
/// differ by noise.
const STEP_MARGIN_NS: f64 = 1e6;
/// The rank the others wait for held them back at least this share of
/// all the time any rank held the others back at the collectives ...
const HELD_SHARE: f64 = 0.5;
/// ... at least this share of the median rank's run ...
const HELD_RUN_SHARE: f64 = 0.05;
/// ... and was at least this late at the median when last (ns).
const LATE_MIN_NS: f64 = 1e6;
/// The old rule, for logs with no step time to judge: a data wait this
/// much over the median ...
const STRAGGLER_MARGIN: f64 = 0.10;
/// ... and this many times it.
const STRAGGLER_RATIO: f64 = 1.5;

#[derive(Clone, Debug, PartialEq)]
pub struct Rank {
    /// The log's pid (a merged log's host rides in it).
    pub pid: u32,
    /// Its rank: from its environment (`rank_from`), or (when some rank
    /// has none, or two say the same) its place by host, then start.
    pub rank: usize,
    /// The variable the rank came from (`RANK`, ...), `None` for its place.
    pub rank_from: Option<&'static str>,
    pub data_wait_fraction: Option<f64>,
    pub collective_wait_fraction: Option<f64>,
    pub breakdown: Option<Breakdown>,
    /// Its loaders: worker processes, or (none forked) its loader threads.
    pub loaders: usize,
    /// What its loaders read, by calls.
    pub read_bytes: u64,
    pub read_p50_ns: Option<u64>,
    pub read_p99_ns: Option<u64>,
    /// Those bytes per second of its main thread's time.
    pub read_mb_per_s: Option<f64>,
    /// Its main thread's counted time (ns).
    pub life_ns: u64,
    /// Its time per step (ns) and where it came from (the same source for
    /// every rank; `None` from its run alone).
    pub step_ns: Option<f64>,
    pub step_from: StepFrom,
    /// Collectives it arrived last at, of the job's `collectives` (0:
    /// none matched); its median lateness then, against the median rank
    /// (ns); and how long it held the median rank back in all (ns).
    pub last_at: usize,
    pub late_ns: f64,
    pub held_ns: f64,
    pub collectives: usize,
    /// Its arrival at each of those collectives, and how late (ns).
    pub late_points: Vec<(u64, f64)>,
    /// How much later than the median rank it left them, at the median
    /// (ns): its host's clock against the others' on a merged log.
    pub leave_offset_ns: Option<f64>,
}

/// Why the straggler is slow: the share of its time that grew most
/// against the other ranks' (per step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    Data,
    Compute,
    Gpu,
    Io,
    CpuContention,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::Data => "data",
            Cause::Compute => "compute",
            Cause::Gpu => "gpu",
            Cause::Io => "io",
            Cause::CpuContention => "cpu_contention",
        }
    }

    fn share(self, b: &Breakdown) -> f64 {
        match self {
            Cause::Data => b.data_wait,
            Cause::Compute => b.on_cpu,
            Cause::Gpu => b.gpu_wait,
            Cause::Io => b.own_io,
            Cause::CpuContention => b.runnable,
        }
    }

    /// `waited for data`, `computed (on CPU)`...
    fn verb(self) -> &'static str {
        match self {
            Cause::Data => "waited for data",
            Cause::Compute => "computed (on CPU)",
            Cause::Gpu => "waited for the GPU",
            Cause::Io => "was in its own file I/O",
            Cause::CpuContention => "waited for a CPU",
        }
    }
}

/// How the straggler was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judged {
    /// It arrived last at the collectives (the others waited for it).
    Late,
    /// Its steps (or its run) took clearly longer than the median rank's.
    StepTime,
    /// Its data wait stood out (no time to judge by).
    DataWait,
}

/// The rank that holds the job back.
#[derive(Clone, Debug, PartialEq)]
pub struct Straggler {
    pub rank: Rank,
    pub judged: Judged,
    pub cause: Option<Cause>,
    pub median_step_ns: Option<f64>,
    pub median_life_ns: f64,
    pub median_data_wait_fraction: f64,
    /// The cause's share of the straggler's time, and the others' median.
    pub cause_fraction: Option<(f64, f64)>,
    /// The other ranks' median share of time waiting for the others.
    pub others_collective_wait_fraction: Option<f64>,
    /// The other ranks' median read p99.
    pub median_read_p99_ns: Option<u64>,
}

/// A process's steps per second, from the best source it has.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepRate {
    /// Steps per second: the mean over the points ([`steps::rate`]).
    pub per_s: f64,
    /// The points it is taken over (one more than the steps between them).
    pub points: usize,
    pub from: StepFrom,
}

impl Stats {
    /// Process `pid`'s steps per second, from the sources step times
    /// come from, best first ([`StepFrom`]): its step marks (or the job's,
    /// logged with no pid), else its collectives (NCCL calls, or its
    /// waits for the other ranks), else its batches (its waits for data: a
    /// batch that was ready when asked for is not seen, so with loaders
    /// ahead at times this counts fewer steps than were taken). `None`
    /// when none has [`steps::MIN_POINTS`].
    pub fn step_rate(&self, pid: u32) -> Option<StepRate> {
        let (from, points) = self.step_points(pid)?;
        steps::rate(&points).map(|per_s| StepRate { per_s, points: points.len(), from })
    }

    /// Process `pid`'s step points (each step's start or end, in order)
    /// from the first source [`Stats::step_rate`] would take.
    pub fn step_points(&self, pid: u32) -> Option<(StepFrom, Vec<u64>)> {
        let ends =
            |e: Option<&Vec<crate::acc::sched::Episode>>| e.map(|e| e.iter().map(|x| x.to).collect::<Vec<u64>>());
        let marks = [self.step_marks.get(&pid), self.step_marks.get(&0)].into_iter().flatten().next().cloned();
        let collectives = match self.arrivals.by_pid.get(&pid) {
            Some(a) if a.len() >= steps::MIN_POINTS => Some(a.clone()),
            _ => ends(self.sched.episodes.get(&pid)),
        };
        let sources = [
            (StepFrom::Marks, marks),
            (StepFrom::Collectives, collectives),
            (StepFrom::Batches, ends(self.sched.batches.get(&pid))),
        ];
        sources.into_iter().find_map(|(from, points)| {
            let points = points?;
            steps::rate(&points).is_some().then_some((from, points))
        })
    }

    /// Where process `p`'s main thread's time went (see [`Breakdown`]).
    pub fn split(&self, p: &ProcStats) -> Option<Breakdown> {
        let main = self.sched.main_thread.get(&p.pid).filter(|m| m.total() > 0)?;
        let pids: Vec<u32> = self.workers_of(p).iter().map(|w| w.pid).collect();
        let has_loaders = !pids.is_empty() || !p.loader_threads.is_empty();
        let dw_ns = if has_loaders { self.sched.data_wait(p.pid, &pids) } else { 0 };
        let ic = self.sched.in_calls.get(&p.pid).copied().unwrap_or_default();
        let cw_ns = self.sched.collective_wait(p.pid).saturating_sub(ic.collective_wait) + ic.collective;
        let gil_ns = self.sched.gil_seen.then(|| self.sched.gil_wait(p.pid).saturating_sub(ic.gil_wait) as f64);
        Breakdown::of(
            main.total() as f64,
            dw_ns.saturating_sub(ic.data_wait) as f64,
            cw_ns as f64,
            ic.gpu as f64,
            ic.own_io as f64,
            main.cpu.saturating_sub(ic.states.cpu) as f64,
            main.runnable.saturating_sub(ic.states.runnable) as f64,
        )
        .map(|b| b.with_gil(main.total() as f64, gil_ns))
    }

    /// Whether process `pid` takes part in collectives: threads of a
    /// collective library (gloo), or NCCL calls.
    fn in_collectives(&self, p: &ProcStats) -> bool {
        self.arrivals.by_pid.contains_key(&p.pid) || self.sched.by_collective.contains_key(&p.pid)
    }

    /// Every process with loaders of its own that the trainer rule would
    /// pick (the trainer, and the others fed by workers), and every
    /// process in collectives, by host and start.
    pub fn ranks(&self) -> Vec<Rank> {
        let mut procs: Vec<&ProcStats> = self
            .processes
            .iter()
            .filter(|p| {
                let fed = (p.pid == self.trainer || self.fed.contains(&p.pid))
                    && (!self.workers_of(p).is_empty() || !p.loader_threads.is_empty());
                fed || self.in_collectives(p)
            })
            .collect();
        procs.sort_by_key(|p| (host_of(p.pid), p.started.unwrap_or(0), local_pid(p.pid)));
        let from_env: Vec<Option<(u32, &'static str)>> =
            procs.iter().map(|p| env::rank(p.env.iter().map(|(n, v)| (*n, v.as_str())))).collect();
        let distinct: HashSet<u32> = from_env.iter().flatten().map(|r| r.0).collect();
        let use_env = from_env.iter().all(Option::is_some) && distinct.len() == procs.len();
        let (step_from, mut steps) = self.step_times(&procs);
        let meetings = self.meetings(&procs, &steps);
        let late = steps::lateness(&meetings, procs.len());
        let leave = steps::leave_offsets(&meetings, procs.len());
        // The collectives make every rank's step as long: the period
        // between the meetings, one figure for all.
        if let (StepFrom::Collectives, Some(p)) = (step_from, steps::meeting_period(&meetings)) {
            steps.iter_mut().for_each(|s| *s = Some(p));
        }
        let mut ranks: Vec<Rank> = procs
            .into_iter()
            .zip(from_env)
            .enumerate()
            .map(|(place, (p, env_rank))| {
                let (rank, rank_from) = match env_rank {
                    Some((r, var)) if use_env => (r as usize, Some(var)),
                    _ => (place, None),
                };
                let workers = self.workers_of(p);
                // Loader threads read in the rank's own process.
                let (loaders, hist, bytes) = if workers.is_empty() {
                    (p.loader_threads.len(), p.reads.latency.clone(), p.reads.bytes)
                } else {
                    let mut h = Histogram::default();
                    for w in &workers {
                        h.merge(&w.reads.latency);
                    }
                    (workers.len(), h, workers.iter().map(|w| w.reads.bytes).sum())
                };
                let life_ns = self.sched.main_thread.get(&p.pid).map_or(0, |m| m.total());
                let secs = life_ns as f64 / 1e9;
                Rank {
                    pid: p.pid,
                    rank,
                    rank_from,
                    data_wait_fraction: self.data_wait_fraction(p),
                    collective_wait_fraction: self.collective_wait_fraction(p),
                    breakdown: self.split(p),
                    loaders,
                    read_bytes: bytes,
                    read_p50_ns: hist.quantile(0.5),
                    read_p99_ns: hist.quantile(0.99),
                    read_mb_per_s: (secs > 0.0).then(|| bytes as f64 / secs / 1e6),
                    life_ns,
                    step_ns: steps[place],
                    step_from,
                    last_at: late[place].last_at,
                    late_ns: late[place].late_ns,
                    held_ns: late[place].held_ns,
                    collectives: meetings.len(),
                    late_points: meetings.iter().map(|m| (m.arrivals[place], m.lateness(place))).collect(),
                    leave_offset_ns: leave[place],
                }
            })
            .collect();
        ranks.sort_by_key(|r| r.rank);
        ranks
    }

    /// Each rank's time per step from the best source every rank has
    /// ([`StepFrom`]), in ns.
    fn step_times(&self, procs: &[&ProcStats]) -> (StepFrom, Vec<Option<f64>>) {
        let ends = |e: Option<&Vec<crate::acc::sched::Episode>>| {
            e.and_then(|e| steps::period(&e.iter().map(|x| x.to).collect::<Vec<_>>()))
        };
        let of = |from: StepFrom, p: &ProcStats| match from {
            StepFrom::Marks => self.step_marks.get(&p.pid).and_then(|m| steps::period(m)),
            StepFrom::Collectives => match self.arrivals.by_pid.get(&p.pid) {
                Some(a) if a.len() >= steps::MIN_POINTS => steps::period(a),
                _ => ends(self.sched.episodes.get(&p.pid)),
            },
            StepFrom::Batches => ends(self.sched.batches.get(&p.pid)),
            StepFrom::Run => None,
        };
        for from in [StepFrom::Marks, StepFrom::Collectives, StepFrom::Batches] {
            let periods: Vec<Option<f64>> = procs.iter().map(|p| of(from, p)).collect();
            if !procs.is_empty() && periods.iter().all(Option::is_some) {
                return (from, periods);
            }
        }
        (StepFrom::Run, vec![None; procs.len()])
    }

    /// The collectives the ranks met at: NCCL calls in order, else their
    /// waits for each other matched by when they ended.
    fn meetings(&self, procs: &[&ProcStats], steps: &[Option<f64>]) -> Vec<steps::Meeting> {
        if procs.len() < 2 {
            return Vec::new();
        }
        let calls: Vec<&[u64]> =
            procs.iter().filter_map(|p| self.arrivals.by_pid.get(&p.pid).map(Vec::as_slice)).collect();
        if calls.len() == procs.len() {
            return steps::meetings_by_order(&calls);
        }
        let waits: Vec<&[crate::acc::sched::Episode]> =
            procs.iter().filter_map(|p| self.sched.episodes.get(&p.pid).map(Vec::as_slice)).collect();
        if waits.len() < procs.len() {
            return Vec::new();
        }
        // Ranks leave together; a quarter of the shortest period between
        // a rank's waits tells one collective from the next.
        let period = waits
            .iter()
            .filter_map(|w| steps::period(&w.iter().map(|e| e.to).collect::<Vec<_>>()))
            .chain(steps.iter().flatten().copied())
            .fold(f64::INFINITY, f64::min);
        let tol = if period.is_finite() { (period / 4.0) as u64 } else { 0 };
        steps::meetings_by_end(&waits, tol)
    }

    /// The rank that holds the job back, judged by time: the one that
    /// held the others back at the collectives most, clearly
    /// ([`HELD_SHARE`], [`HELD_RUN_SHARE`], [`LATE_MIN_NS`]); else, among
    /// [`STRAGGLER_MIN_RANKS`] or more, the one whose step (or, with no
    /// step known, whose run) took [`STEP_RATIO`] times the median's; else,
    /// with no time to judge by, the one whose data wait stands out.
    pub fn straggler(&self, ranks: &[Rank]) -> Option<Straggler> {
        if ranks.len() < 2 {
            return None;
        }
        let times: Vec<f64> = ranks.iter().map(|r| r.step_ns.unwrap_or(r.life_ns as f64)).collect();
        let median_time = median(times.clone())?;
        let median_step = ranks.iter().map(|r| r.step_ns).collect::<Option<Vec<f64>>>().and_then(median);
        let late = ranks.iter().enumerate().max_by(|a, b| a.1.held_ns.total_cmp(&b.1.held_ns));
        let held: f64 = ranks.iter().map(|r| r.held_ns).sum();
        let median_life = median(ranks.iter().map(|r| r.life_ns as f64).collect()).unwrap_or(0.0);
        let judged = match late {
            Some((i, r))
                if r.collectives >= steps::MIN_POINTS
                    && r.held_ns >= HELD_SHARE * held
                    && r.held_ns >= HELD_RUN_SHARE * median_life
                    && r.late_ns >= LATE_MIN_NS =>
            {
                Some((i, Judged::Late))
            }
            // Collectives make every step as long: only lateness tells.
            _ if ranks[0].step_from == StepFrom::Collectives && ranks.iter().all(|r| r.collectives > 0) => None,
            _ if ranks.len() >= STRAGGLER_MIN_RANKS => {
                let (i, &worst) = times.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))?;
                let slow = worst >= STEP_RATIO * median_time && worst - median_time >= STEP_MARGIN_NS;
                // With no step and no run time (no scheduling), the data waits.
                match (slow, median_time > 0.0) {
                    (true, _) => Some((i, Judged::StepTime)),
                    (false, true) => None,
                    (false, false) => self.data_wait_standout(ranks).map(|i| (i, Judged::DataWait)),
                }
            }
            _ => None,
        };
        let (i, judged) = judged?;
        let r = &ranks[i];
        let others: Vec<&Rank> = ranks.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, o)| o).collect();
        let med = |f: &dyn Fn(&Rank) -> Option<f64>| median(others.iter().filter_map(|o| f(o)).collect());
        let cause = self.cause(r, &others);
        let cause_fraction = cause.and_then(|c| {
            let mine = r.breakdown.map(|b| c.share(&b))?;
            Some((mine, med(&|o: &Rank| o.breakdown.map(|b| c.share(&b))).unwrap_or(0.0)))
        });
        Some(Straggler {
            rank: r.clone(),
            judged,
            cause,
            median_step_ns: median_step,
            median_life_ns: median_life,
            median_data_wait_fraction: median(ranks.iter().filter_map(|r| r.data_wait_fraction).collect())
                .unwrap_or(0.0),
            cause_fraction,
            others_collective_wait_fraction: med(&|o: &Rank| o.collective_wait_fraction).filter(|&f| f > 0.0),
            median_read_p99_ns: med(&|o: &Rank| o.read_p99_ns.map(|n| n as f64)).map(|n| n as u64),
        })
    }

    /// The old rule (data wait 10 points over the median and 1.5 times it).
    fn data_wait_standout(&self, ranks: &[Rank]) -> Option<usize> {
        let waits: Vec<(usize, f64)> =
            ranks.iter().enumerate().filter_map(|(i, r)| r.data_wait_fraction.map(|f| (i, f))).collect();
        if waits.len() < STRAGGLER_MIN_RANKS {
            return None;
        }
        let m = median(waits.iter().map(|w| w.1).collect())?;
        let &(i, worst) = waits.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
        (worst - m >= STRAGGLER_MARGIN && worst >= STRAGGLER_RATIO * m).then_some(i)
    }

    /// The share of the straggler's time, per step (or per run), that
    /// exceeds the others' median most: what it spends its extra time on.
    fn cause(&self, r: &Rank, others: &[&Rank]) -> Option<Cause> {
        let b = r.breakdown?;
        let t = |k: &Rank| k.step_ns.unwrap_or(k.life_ns as f64);
        [Cause::Data, Cause::Compute, Cause::Gpu, Cause::Io, Cause::CpuContention]
            .into_iter()
            .map(|c| {
                let theirs = median(others.iter().filter_map(|o| o.breakdown.map(|ob| c.share(&ob) * t(o))).collect());
                (c, c.share(&b) * t(r) - theirs.unwrap_or(0.0))
            })
            .filter(|x| x.1 > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|x| x.0)
    }

    /// A rank's host's name, where the log has several.
    pub fn host_name(&self, pid: u32) -> Option<&str> {
        self.header.hosts.get(host_of(pid)).map(|h| h.name.as_str())
    }

    pub fn straggler_json(&self, s: &Straggler) -> Value {
        let r = &s.rank;
        json!({
            "host": self.host_name(r.pid).map_or_else(|| self.header.host.clone(), str::to_string),
            "pid": local_pid(r.pid),
            "rank": r.rank,
            "judged_by": match s.judged {
                Judged::Late => "lateness",
                Judged::StepTime if r.step_ns.is_some() => "step_time",
                Judged::StepTime => "run_time",
                Judged::DataWait => "data_wait",
            },
            "cause": s.cause.map(Cause::name),
            "step_s": r.step_ns.map(|n| n / 1e9),
            "median_step_s": s.median_step_ns.map(|n| n / 1e9),
            "step_from": r.step_from.name(),
            "run_s": r.life_ns as f64 / 1e9,
            "median_run_s": s.median_life_ns / 1e9,
            "late_collectives": r.last_at,
            "collectives": r.collectives,
            "median_lateness_s": (r.last_at > 0).then(|| r.late_ns / 1e9),
            "held_others_s": r.held_ns / 1e9,
            "data_wait_fraction": r.data_wait_fraction,
            "median_data_wait_fraction": s.median_data_wait_fraction,
            "others_collective_wait_fraction": s.others_collective_wait_fraction,
            "read_p99_us": r.read_p99_ns.map(|n| n as f64 / 1e3),
            "median_read_p99_us": s.median_read_p99_ns.map(|n| n as f64 / 1e3),
        })
    }

    /// `rank 1 (node0, pid 4242) arrived last at 38 of 40 collectives, 95
    /// ms late at the median; it computed (on CPU) 86% of its time against
    /// a median of 40%, while the others waited for it 61% of theirs`.
    pub fn straggler_text(&self, s: &Straggler) -> String {
        let dur = |ns: f64| crate::duration(ns.max(0.0) as u64);
        let r = &s.rank;
        let host = self.host_name(r.pid).map(|h| format!("{h}, ")).unwrap_or_default();
        let who = format!("rank {} ({host}pid {})", r.rank, local_pid(r.pid));
        let mut t = match (s.judged, r.step_ns, s.median_step_ns) {
            (Judged::Late, ..) => format!(
                "{who} arrived last at {} of {} collectives, {} late at the median then",
                r.last_at,
                r.collectives,
                dur(r.late_ns)
            ),
            (Judged::StepTime, Some(step), Some(m)) => format!(
                "{who} took {} a step against a median of {} (steps from its {})",
                dur(step),
                dur(m),
                r.step_from.name()
            ),
            (Judged::StepTime, ..) => {
                format!("{who} ran {} against a median of {}", dur(r.life_ns as f64), dur(s.median_life_ns))
            }
            (Judged::DataWait, ..) => format!(
                "{who} waited for data {} against a median of {}",
                pct(r.data_wait_fraction.unwrap_or(0.0)),
                pct(s.median_data_wait_fraction)
            ),
        };
        if let (Some(c), Some((mine, theirs))) = (s.cause, s.cause_fraction) {
            if s.judged != Judged::DataWait || c != Cause::Data {
                t += &format!("; it {} {} of its time against a median of {}", c.verb(), pct(mine), pct(theirs));
            }
        }
        if let Some(w) = s.others_collective_wait_fraction {
            t += &format!(", while the others waited for it {} of theirs", pct(w));
        }
        if s.cause == Some(Cause::Data) {
            if let (Some(a), Some(b)) = (r.read_p99_ns, s.median_read_p99_ns) {
                t += &format!("; its loaders' reads p99 was {} against {}", crate::duration(a), crate::duration(b));
            }
        }
        t
    }

    /// On a merged log, each host's clock against the median host's, by
    /// when its ranks left the collectives (they leave together): (host,
    /// offset ns, ranks). Empty on one host, or without collective waits.
    pub fn clock_check(&self, ranks: &[Rank]) -> Vec<(String, f64, usize)> {
        if self.header.hosts.len() < 2 {
            return Vec::new();
        }
        let mut by_host: Vec<(usize, Vec<f64>)> = Vec::new();
        for r in ranks {
            let Some(o) = r.leave_offset_ns else { continue };
            let h = host_of(r.pid);
            match by_host.iter_mut().find(|x| x.0 == h) {
                Some(x) => x.1.push(o),
                None => by_host.push((h, vec![o])),
            }
        }
        if by_host.len() < 2 {
            return Vec::new();
        }
        by_host.sort_by_key(|x| x.0);
        by_host
            .into_iter()
            .map(|(h, v)| {
                let name = self.header.hosts.get(h).map_or_else(|| format!("host {h}"), |x| x.name.clone());
                (name, median(v.clone()).unwrap_or(0.0), v.len())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stats;

    fn rank(i: usize, wait: f64, step_ms: Option<f64>, life_ms: f64) -> Rank {
        let b = Breakdown::of(1.0, wait, 0.0, 0.0, 0.0, 1.0 - wait, 0.0);
        Rank {
            pid: 100 + i as u32,
            rank: i,
            rank_from: None,
            data_wait_fraction: Some(wait),
            collective_wait_fraction: Some(0.0),
            breakdown: b,
            loaders: 4,
            read_bytes: 0,
            read_p50_ns: None,
            read_p99_ns: Some(1000 * (i as u64 + 1)),
            read_mb_per_s: None,
            life_ns: (life_ms * 1e6) as u64,
            step_ns: step_ms.map(|m| m * 1e6),
            step_from: if step_ms.is_some() { StepFrom::Batches } else { StepFrom::Run },
            last_at: 0,
            late_ns: 0.0,
            held_ns: 0.0,
            collectives: 0,
            late_points: Vec::new(),
            leave_offset_ns: None,
        }
    }

    /// By time: one rank at twice the median step has one, whatever its
    /// data wait's ratio (1.43 times the median here: the old rule missed it).
    #[test]
    fn a_rank_at_twice_the_median_step_is_the_straggler() {
        let s = Stats::default();
        let r = vec![
            rank(0, 0.55, Some(81.0), 1620.0),
            rank(1, 0.57, Some(82.0), 1640.0),
            rank(2, 0.78, Some(161.0), 3220.0),
            rank(3, 0.55, Some(81.0), 1630.0),
        ];
        let got = s.straggler(&r).unwrap();
        assert_eq!((got.rank.rank, got.judged, got.cause), (2, Judged::StepTime, Some(Cause::Data)));
        assert_eq!(got.median_step_ns, Some(81.5e6));
        // The others' p99s: 1, 2 and 4 us.
        assert_eq!(got.median_read_p99_ns, Some(2000));
        let text = s.straggler_text(&got);
        assert!(text.starts_with("rank 2 (pid 102) took 161.0 ms a step against a median of 81.5 ms"), "{text}");
        // All slow alike: none. Without steps, the run's time.
        let even: Vec<Rank> = (0..4).map(|i| rank(i, 0.5, Some(160.0 + i as f64), 3000.0)).collect();
        assert!(s.straggler(&even).is_none());
        let runs = vec![rank(0, 0.1, None, 1600.0), rank(1, 0.1, None, 3300.0), rank(2, 0.1, None, 1650.0)];
        let got = s.straggler(&runs).unwrap();
        assert_eq!((got.rank.rank, got.judged), (1, Judged::StepTime));
        assert!(s.straggler_text(&got).contains("ran 3.30 s against a median of 1.65 s"), "{}", s.straggler_text(&got));
    }

    /// Steps made equal by the collectives: the one that arrives last.
    #[test]
    fn the_rank_the_others_wait_for_arrives_last() {
        let s = Stats::default();
        let mut r: Vec<Rank> = (0..3).map(|i| rank(i, 0.02, Some(100.0), 4000.0)).collect();
        for (i, k) in r.iter_mut().enumerate() {
            k.collectives = 40;
            (k.last_at, k.late_ns, k.held_ns) = if i == 1 { (38, 60e6, 38.0 * 60e6) } else { (1, 0.5e6, 0.5e6) };
            k.breakdown = Breakdown::of(1.0, 0.02, if i == 1 { 0.05 } else { 0.6 }, 0.0, 0.0, 0.0, 0.0);
            k.breakdown.as_mut().unwrap().on_cpu = if i == 1 { 0.85 } else { 0.3 };
            k.collective_wait_fraction = k.breakdown.map(|b| b.collective_wait);
        }
        let got = s.straggler(&r).unwrap();
        assert_eq!((got.rank.rank, got.judged, got.cause), (1, Judged::Late, Some(Cause::Compute)));
        let text = s.straggler_text(&got);
        assert_eq!(
            text,
            "rank 1 (pid 101) arrived last at 38 of 40 collectives, 60.0 ms late at the median then; it computed \
             (on CPU) 85% of its time against a median of 30%, while the others waited for it 60% of theirs"
        );
        // Last often, but holding the others back little: none.
        r[1].held_ns = 38.0 * 2e6;
        assert!(s.straggler(&r).is_none());
    }

    /// Without scheduling (no times), the old data-wait rule.
    #[test]
    fn without_times_a_data_wait_that_stands_out() {
        let s = Stats::default();
        let mut r: Vec<Rank> =
            [0.08, 0.31, 0.07, 0.09].iter().enumerate().map(|(i, &w)| rank(i, w, None, 0.0)).collect();
        assert_eq!(s.straggler(&r).map(|g| (g.rank.rank, g.judged)), Some((1, Judged::DataWait)));
        r[1].data_wait_fraction = Some(0.12);
        assert!(s.straggler(&r).is_none(), "nobody waits much");
    }
}
