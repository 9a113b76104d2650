//! Where each traced thread's time went, from the scheduling records:
//! on CPU, runnable (waiting for a CPU), asleep in uninterruptible I/O
//! waits (D), asleep otherwise (S), and which process woke it: one of
//! its data-loader workers or loader threads, or not. See docs/verdict.md
//! for the exact definitions.

use std::collections::{HashMap, HashSet, VecDeque};

use mltrace_log::*;

use crate::acc::gpu_idle::GpuIdle;
use crate::acc::rank_waits::RankWaits;
use crate::acc::span_calls::{Call, SpanCalls};
use crate::acc::timeline::{Field, Timeline};
use crate::Stats;
use mltrace_log::{Accept, Frame, Record};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Running,
    Runnable,
    Sleeping,
    IoWait,
    Other,
    /// On a CPU and waiting for one, mixed throughout: `cpu` 65535ths of
    /// it on a CPU (a summary's span: how they interleaved is not known;
    /// its exact sums are the thread's [`Thread::mix`]). Small, as every
    /// kept interval holds one.
    Busy {
        cpu: u16,
    },
}

impl St {
    /// `cpu` and `runnable` ns mixed.
    fn busy(cpu: u64, runnable: u64) -> St {
        let all = u128::from(cpu + runnable).max(1);
        let share = (u128::from(cpu) * 65_535 + all / 2) / all;
        St::Busy { cpu: share as u16 }
    }

    /// Of `ns` in this state, the ns on a CPU (all, some or none).
    fn cpu_of(self, ns: u64) -> u64 {
        match self {
            St::Running => ns,
            St::Busy { cpu } => ((u128::from(ns) * u128::from(cpu) + 32_767) / 65_535) as u64,
            _ => 0,
        }
    }
}

fn after_switch(s: SchedState) -> St {
    match s {
        SchedState::Runnable => St::Runnable,
        SchedState::Sleeping => St::Sleeping,
        SchedState::Uninterruptible => St::IoWait,
        _ => St::Other,
    }
}

/// Nanoseconds of one process's threads (summed) in each state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Times {
    pub cpu: u64,
    pub runnable: u64,
    pub io_wait: u64,
    pub sleep: u64,
    /// Stopped, exiting, idle kernel waits.
    pub other: u64,
}

impl Times {
    pub fn total(&self) -> u64 {
        self.cpu + self.runnable + self.io_wait + self.sleep + self.other
    }
    fn add(&mut self, st: St, ns: u64) {
        self.add_split(st, ns, st.cpu_of(ns));
    }
    /// `ns` in `st`, `cpu` of them on a CPU (for [`St::Busy`]).
    fn add_split(&mut self, st: St, ns: u64, cpu: u64) {
        match st {
            St::Running => self.cpu += ns,
            St::Busy { .. } => {
                let cpu = cpu.min(ns);
                self.cpu += cpu;
                self.runnable += ns - cpu;
            }
            St::Runnable => self.runnable += ns,
            St::IoWait => self.io_wait += ns,
            St::Sleeping => self.sleep += ns,
            St::Other => self.other += ns,
        }
    }
    /// `ns` counted as `st` (runnable or other) that were on a CPU.
    fn move_to_cpu(&mut self, st: St, ns: u64) {
        let from = match st {
            St::Runnable => &mut self.runnable,
            St::Other => &mut self.other,
            _ => return,
        };
        let ns = ns.min(*from);
        *from -= ns;
        self.cpu += ns;
    }
    /// `part` of the total, `None` when nothing was tracked.
    pub fn fraction(&self, part: u64) -> Option<f64> {
        let t = self.total();
        (t > 0).then(|| part as f64 / t as f64)
    }
}

struct Thread {
    pid: u32,
    st: St,
    since: u64,
    /// How many hops from a loader its last wake-up was (0: not from
    /// one): if it then wakes another thread of its process, it hands a
    /// batch on (PyTorch's pin-memory thread, tf.data's prefetch thread).
    fed: u8,
    /// The call it sleeps in (while asleep).
    call: SleepCall,
    /// Waits that timed out (ended by an interrupt) and were retried: if
    /// the retried wait ends by a worker, they were waits for data too
    /// (a DataLoader polls its queue with a 5 s timeout). (start, end).
    retried: Vec<(u64, u64)>,
    /// Ns on CPU since the last timed-out wait: past [`RETRY_WORK`], the
    /// thread did work in between and the timed-out waits are dropped.
    ran: u64,
    /// While [`St::Busy`]: the span's ns on a CPU and runnable, exact.
    mix: (u64, u64),
    /// While runnable or [`St::Other`]: the parts of this interval that
    /// calls took (as that state), for an untraced switch-in that turns
    /// part of it into time on a CPU.
    taken: Vec<(u64, u64)>,
}

/// How far a run time may exceed the wait it ends (clocks apart) and
/// still place an untraced switch-in.
const RAN_SLACK: u64 = 100_000;

/// Parts of an open interval kept in [`Thread::taken`].
const MAX_TAKEN: usize = 256;

/// A call a main thread spent time in, taken out of its states so that
/// the verdict's breakdown adds up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// A CUDA call that waited for the GPU.
    Gpu,
    /// A call on one of its files (not a pipe or socket: a wait for data
    /// on those is a data wait).
    OwnIo,
    /// A CUDA call that waited while an NCCL collective was outstanding
    /// on what it synchronises: a wait for the other ranks.
    Collective,
}

/// A main thread's time inside its calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InCalls {
    pub gpu: u64,
    pub own_io: u64,
    pub collective: u64,
    /// Both, by the state the thread was in.
    pub states: Times,
    /// Both, asleep until a loader woke it (never expected: kept so the
    /// split cannot count time twice), or a collective thread.
    pub data_wait: u64,
    pub collective_wait: u64,
    pub gil_wait: u64,
    /// Calls that began before the thread's kept history, and the ns of
    /// them it did not cover (left in the states they were in).
    pub cut: u64,
    pub cut_ns: u64,
}

/// A closed interval of a main thread: `data` when it was a data wait.
#[derive(Clone, Copy)]
struct Interval {
    from: u64,
    to: u64,
    st: St,
    data: bool,
    /// A collective wait.
    coll: bool,
    /// A wait for the GIL.
    gil: bool,
}

/// Closed intervals are kept per main thread for the calls that end
/// later (a call's record comes when it returns): those of the last
/// [`KEEP_NS`], at most [`KEEP_INTERVALS`] (a thread preempted every
/// millisecond for a minute). A call that began before a thread's
/// history is split for the part the history covers, and counted
/// ([`InCalls::cut`]).
const KEEP_NS: u64 = 120_000_000_000;
const KEEP_INTERVALS: usize = 1 << 16;

/// Who did a wake-up, as far as the log has said so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Feeder {
    /// Not one of the sleeper's data loaders.
    #[default]
    No,
    /// One of the sleeper's process's data-loader worker processes.
    Worker,
    /// One of the sleeper's process's own loader threads.
    Thread,
    /// A thread of the sleeper's process that moves a collective
    /// library's traffic (gloo's, NCCL's): the sleeper waited for the
    /// other ranks, never for data.
    Collective,
}

/// Most hops from a loader to the thread it hands a batch on to
/// (tf.data: a reader wakes the map's runner, which wakes the prefetch
/// thread, which wakes the trainer).
const MAX_HOPS: u8 = 3;

/// Threads whose times are kept one by one (beyond: counted per process only).
const MAX_THREAD_TIMES: usize = 1 << 16;

/// CPU time after a timed-out wait beyond which the next wait is not a retry.
const RETRY_WORK: u64 = 10_000_000;
/// Timed-out waits kept per thread (a 5 s timeout: 10 minutes' worth).
const RETRY_KEEP: usize = 128;

/// The accumulator; see the module docs.
#[derive(Default)]
pub struct SchedTimes {
    threads: HashMap<u32, Thread>,
    /// By pid: all its threads.
    pub procs: HashMap<u32, Times>,
    /// By pid: its main thread (tid == pid) alone.
    pub main_thread: HashMap<u32, Times>,
    /// By (sleeper tid, waker pid): ns asleep (S or D) that a thread of
    /// the waker's process ended by waking it.
    pub woken_by: HashMap<(u32, u32), u64>,
    /// By sleeper tid: ns asleep that one of its process's loader threads ended.
    pub by_threads: HashMap<u32, u64>,
    /// By sleeper tid: ns asleep that another thread of its own process
    /// ended, that thread having been woken by a worker (a hand-on).
    pub handed_on: HashMap<u32, u64>,
    /// By tid (threads other than a process's main one): (pid, its times).
    pub thread_times: HashMap<u32, (u32, Times)>,
    /// The pids with threads in `thread_times` (an exec forgets them
    /// without scanning the map).
    threaded: HashSet<u32>,
    /// Scheduling records seen.
    pub records: u64,
    /// Switch-ins the kernel's trace lacked, placed from the run time
    /// the thread's next switch-out gave.
    pub switch_ins_untraced: u64,
    /// The trainer's pid (its main thread is followed over time), or 0.
    pub trainer: u32,
    /// The trainer's main thread over time, for the verdict per epoch.
    pub timeline: Option<Timeline>,
    /// Every main thread's data waits over time, for a counter per rank.
    pub rank_waits: Option<RankWaits>,
    /// GPU idle time against the trainer's data waits.
    pub gpu: GpuIdle,
    /// By pid: its main thread's latest closed intervals, and where
    /// those let go of ended.
    recent: HashMap<u32, VecDeque<Interval>>,
    forgot: HashMap<u32, u64>,
    /// By pid: its main thread's time inside calls.
    pub in_calls: HashMap<u32, InCalls>,
    /// Summary detail: main threads' calls waiting for the span that lays
    /// out their time.
    span_calls: SpanCalls,
    /// By sleeper tid: ns asleep that a collective thread of its process ended.
    pub by_collective: HashMap<u32, u64>,
    /// By sleeper tid: ns asleep waiting for its Python's GIL.
    pub by_gil: HashMap<u32, u64>,
    /// Whether any thread slept waiting for a GIL (the shares say
    /// `gil_wait` only then, so older logs read as they did).
    pub gil_seen: bool,
    /// By pid: its main thread's waits for the other ranks, one per
    /// collective (sleeps less than [`EPISODE_GAP`] apart are one).
    pub episodes: HashMap<u32, Vec<Episode>>,
    /// By pid: its main thread's waits for data, the same way (a batch each).
    pub batches: HashMap<u32, Vec<Episode>>,
    episodes_kept: usize,
    /// Collective waits not kept past [`MAX_EPISODES`].
    pub episodes_dropped: u64,
}

/// A main thread's wait in one collective: from when it began to wait
/// (it had arrived) to when the collective let it go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Episode {
    pub from: u64,
    pub to: u64,
}

fn push_episode(list: &mut Vec<Episode>, kept: &mut usize, dropped: &mut u64, from: u64, to: u64) {
    match list.last_mut() {
        Some(e) if from <= e.to.saturating_add(EPISODE_GAP) => e.to = e.to.max(to),
        _ if *kept >= MAX_EPISODES => *dropped += 1,
        _ => {
            list.push(Episode { from, to });
            *kept += 1;
        }
    }
}

/// Collective waits this close (the thread ran less in between) are one
/// collective's: DDP waits for each bucket in turn.
pub const EPISODE_GAP: u64 = 1_000_000;
/// Collective waits kept over all ranks (16 bytes each: 64 MiB).
const MAX_EPISODES: usize = 1 << 22;

/// Who ended a sleep.
#[derive(Clone, Copy)]
struct Waker {
    /// An interrupt (a timer, a device), not a task: no waker process.
    interrupt: bool,
    pid: u32,
    /// One of the sleeper's loaders (as far as the log has told so far).
    feeder: Feeder,
    /// A thread of the sleeper's process, woken by a loader before.
    handed_on: bool,
    /// Hops from a loader the sleeper is now (see [`Thread::fed`]).
    fed: u8,
}

/// Adds (`sign` 1) or takes out (-1) `[from, to)` in state `st` to the
/// timeline's fields.
fn timeline_add(tl: &mut Timeline, st: St, from: u64, to: u64, sign: f64) {
    let field = match st {
        St::Running => Field::Cpu,
        St::Runnable => Field::Runnable,
        St::IoWait => Field::IoWait,
        St::Sleeping => Field::Sleep,
        St::Other => Field::Other,
        St::Busy { .. } => {
            let ns = to.saturating_sub(from);
            let cpu = st.cpu_of(ns);
            tl.spread(Field::Cpu, from, to, sign * cpu as f64);
            tl.spread(Field::Runnable, from, to, sign * (ns - cpu) as f64);
            return;
        }
    };
    match sign > 0.0 {
        true => tl.add(field, from, to),
        false => tl.sub(field, from, to),
    }
}

impl SchedTimes {
    /// Ends thread `tid`'s current interval at `ts` and starts `st`
    /// (asleep in `call`); `waker`: who ended it, for a wake-up.
    fn set(&mut self, pid: u32, tid: u32, ts: u64, st: Option<St>, call: SleepCall, waker: Option<Waker>) {
        let (mut fed, mut retried, mut ran) = (0, Vec::new(), 0);
        let mut gil = false;
        let mut ts = ts;
        if let Some(t) = self.threads.get_mut(&tid) {
            // Records come as the CPUs sent them: a wake-up sent from
            // another CPU can come after the switch it raced, a few µs
            // before it. No state of a thread ends before it began.
            ts = ts.max(t.since);
            let (since, was, tpid, was_call) = (t.since, t.st, t.pid, t.call);
            (fed, ran) = (t.fed, t.ran);
            retried = std::mem::take(&mut t.retried);
            let ns = ts.saturating_sub(since);
            // A span's mix, split by its exact sums (its whole length, but
            // for clocks out of step).
            let cpu = match (was, t.mix) {
                (St::Busy { .. }, (c, r)) if c + r > 0 => (u128::from(ns) * u128::from(c) / u128::from(c + r)) as u64,
                _ => was.cpu_of(ns),
            };
            self.procs.entry(tpid).or_default().add_split(was, ns, cpu);
            if tid == tpid {
                self.main_thread.entry(tpid).or_default().add_split(was, ns, cpu);
            } else if self.thread_times.len() < MAX_THREAD_TIMES || self.thread_times.contains_key(&tid) {
                self.thread_times.entry(tid).or_insert((tpid, Times::default())).1.add_split(was, ns, cpu);
                self.threaded.insert(tpid);
            }
            if cpu > 0 {
                ran += cpu;
                if ran > RETRY_WORK {
                    retried.clear();
                }
            }
            let asleep = matches!(was, St::Sleeping | St::IoWait);
            // A wait for the GIL is for no loader's data, whoever drops it.
            gil = asleep && was_call == SleepCall::Gil;
            if gil {
                *self.by_gil.entry(tid).or_default() += ns;
                self.gil_seen = true;
            }
            // The waits whose end decides whether they were for data: this
            // one, and the timed-out ones it retried.
            let mut ended: Vec<(u64, u64)> = Vec::new();
            match waker {
                _ if gil => {}
                // A sleep the thread asked for is never a wait for data.
                Some(_) if asleep && was_call.timed_sleep() => retried.clear(),
                Some(w) if asleep && w.interrupt => {
                    if retried.len() < RETRY_KEEP {
                        retried.push((since, ts));
                    }
                    ran = 0;
                }
                Some(w) if asleep => {
                    let retried_ns: u64 = retried.iter().map(|&(a, b)| b.saturating_sub(a)).sum();
                    let total = retried_ns + ts.saturating_sub(since);
                    if w.feeder == Feeder::Collective {
                        *self.by_collective.entry(tid).or_default() += total;
                    } else if w.handed_on {
                        *self.handed_on.entry(tid).or_default() += total;
                    } else if w.feeder == Feeder::Thread {
                        *self.by_threads.entry(tid).or_default() += total;
                    } else {
                        *self.woken_by.entry((tid, w.pid)).or_default() += total;
                    }
                    // Only a data wait's intervals go on (most wake-ups are
                    // not: no list is built for them).
                    if w.feeder != Feeder::No || w.handed_on {
                        ended = std::mem::take(&mut retried);
                        ended.push((since, ts));
                    } else {
                        retried.clear();
                    }
                }
                _ => {}
            }
            // A collective wait is not a data wait: its intervals go apart.
            let coll_ended = if waker.is_some_and(|w| w.feeder == Feeder::Collective) {
                std::mem::take(&mut ended)
            } else {
                Vec::new()
            };
            if tid == tpid {
                let data = ended.last() == Some(&(since, ts));
                let coll = coll_ended.last() == Some(&(since, ts));
                let q = self.recent.entry(tid).or_default();
                while q.len() >= KEEP_INTERVALS || q.front().is_some_and(|i| i.to.saturating_add(KEEP_NS) < ts) {
                    if let Some(i) = q.pop_front() {
                        self.forgot.insert(tid, i.to);
                    }
                }
                q.push_back(Interval { from: since, to: ts, st: was, data, coll, gil });
                if let (Some(&(a, _)), Some(&(_, b))) = (coll_ended.first(), coll_ended.last()) {
                    self.episode(tpid, a, b);
                }
                if let (Some(&(a, _)), Some(&(_, b))) = (ended.first(), ended.last()) {
                    self.batch(tpid, a, b);
                }
            }
            if tid == tpid {
                if let Some(rw) = self.rank_waits.as_mut() {
                    for &(a, b) in &ended {
                        rw.add(tpid, a, b);
                    }
                }
            }
            if tid == self.trainer && tpid == self.trainer {
                if let Some(tl) = self.timeline.as_mut() {
                    timeline_add(tl, was, since, ts, 1.0);
                    for &(a, b) in &ended {
                        tl.add(Field::DataWait, a, b);
                    }
                    for &(a, b) in &coll_ended {
                        tl.add(Field::CollectiveWait, a, b);
                    }
                    if gil {
                        tl.add(Field::GilWait, since, ts);
                    }
                }
                for &(a, b) in &ended {
                    self.gpu.data_wait(a, b, self.timeline.as_mut());
                }
            }
        }
        // A thread handed the GIL was handed no batch.
        if let Some(w) = waker {
            fed = if gil { 0 } else { w.fed };
        }
        match st {
            Some(st) => {
                let mix = (0, 0);
                self.threads
                    .insert(tid, Thread { pid, st, since: ts, fed, call, retried, ran, mix, taken: Vec::new() });
            }
            None => {
                self.threads.remove(&tid);
                // Its calls have all come (a call's record precedes the exit).
                self.recent.remove(&tid);
                self.forgot.remove(&tid);
            }
        }
    }

    /// Takes one record; `feeder`: for a wake-up, whether its waker is
    /// one of the woken process's data loaders.
    pub fn add(&mut self, rec: &Record, feeder: Feeder) {
        match *rec {
            Record::SchedSwitch(r) => {
                self.records += 1;
                if r.traced & sched::PREV != 0 {
                    self.untraced_switch_in(&r);
                    let st = (r.prev_state != SchedState::Dead).then(|| after_switch(r.prev_state));
                    self.set(r.prev_pid, r.prev_tid, r.ts, st, r.prev_call, None);
                }
                if r.traced & sched::NEXT != 0 {
                    self.set(r.next_pid, r.next_tid, r.ts, Some(St::Running), SleepCall::None, None);
                }
            }
            Record::SchedWake(r) if r.op == WakeOp::Waking => {
                self.records += 1;
                self.wake(r.pid, r.tid, r.ts, (r.waker_pid, r.waker_tid, r.by), feeder, St::Runnable);
            }
            Record::SchedWake(_) => self.records += 1,
            Record::SchedSpan(ref r) => self.span(r, feeder),
            Record::Exit(e) if self.threads.contains_key(&e.tid) => {
                self.split_waiting(e.tid);
                self.set(e.pid, e.tid, e.ts, None, SleepCall::None, None)
            }
            _ => {}
        }
    }

    /// A thread switching out that its records left waiting for a CPU:
    /// the kernel's trace lacked its switch-in (it does, about one
    /// switch in 150 on a 6.18 VM: ftrace lacks it too). It got the CPU
    /// its last stint (the kernel's run time, `prev_ran_us`) before; else
    /// the whole wait would read as runnable.
    fn untraced_switch_in(&mut self, r: &SchedSwitch) {
        let ran = u64::from(r.prev_ran_us) * 1000;
        // Older logs: no lookup.
        if ran == 0 {
            return;
        }
        let Some(t) = self.threads.get_mut(&r.prev_tid) else { return };
        // A run time longer than the wait is not this stint's alone (the
        // kernel's count can span two): the wait is left as it reads.
        if !matches!(t.st, St::Runnable | St::Other) || ran > r.ts.saturating_sub(t.since) + RAN_SLACK {
            return;
        }
        self.switch_ins_untraced += 1;
        let at = r.ts.saturating_sub(ran).max(t.since);
        let (was, pid) = (t.st, t.pid);
        // Calls that took part of the interval took it as `was`: from
        // `at` it was on a CPU.
        let taken = std::mem::take(&mut t.taken);
        if r.prev_tid == pid {
            let ic = self.in_calls.entry(pid).or_default();
            let mut tl = self.timeline.as_mut().filter(|_| pid == self.trainer);
            for (a, b) in taken {
                let a = a.max(at);
                if b > a {
                    ic.states.move_to_cpu(was, b - a);
                    if let Some(tl) = tl.as_mut() {
                        timeline_add(tl, was, a, b, 1.0);
                        timeline_add(tl, St::Running, a, b, -1.0);
                    }
                }
            }
        }
        self.set(r.prev_pid, r.prev_tid, at, Some(St::Running), SleepCall::None, None);
    }

    /// Thread `tid` of `pid` woken at `ts` by `waker` (pid, tid, what
    /// raised it), then in state `then`.
    fn wake(&mut self, pid: u32, tid: u32, ts: u64, waker: (u32, u32, WakeBy), feeder: Feeder, then: St) {
        let (waker_pid, waker_tid, by) = waker;
        // A thread of the sleeper's own process that a loader woke
        // (or one it woke, up to MAX_HOPS) hands the batch on.
        let relay = (waker_pid == pid && waker_tid != tid)
            .then(|| self.threads.get(&waker_tid).map_or(0, |w| w.fed))
            .filter(|&h| (1..=MAX_HOPS).contains(&h));
        let handed_on = feeder == Feeder::No && relay.is_some();
        match self.threads.get(&tid).map(|t| t.st) {
            // Woken before it got off the CPU: still running.
            Some(St::Running | St::Runnable | St::Busy { .. }) => {}
            _ => {
                let interrupt = by.interrupt();
                let feeder = if interrupt { Feeder::No } else { feeder };
                // The thread waiting for data (a main thread) is
                // never a relay: what it wakes is not fed.
                let fed = match (feeder, relay) {
                    _ if interrupt || tid == pid || feeder == Feeder::Collective => 0,
                    (Feeder::No, Some(h)) => h + 1,
                    (Feeder::No, None) => 0,
                    _ => 1,
                };
                let waker = Waker { interrupt, pid: waker_pid, feeder, handed_on: handed_on && !interrupt, fed };
                self.set(pid, tid, ts, Some(then), SleepCall::None, Some(waker))
            }
        }
    }

    /// A span of summed scheduling (summary detail), taken as the
    /// switches and the wake-ups would have been: its time on a CPU and
    /// runnable (mixed in their ratio: a thread preempted inside a call
    /// waited there, one woken waited briefly), otherwise and in short
    /// timed sleeps laid end to end from its start (their order within
    /// the span is not known, their sums are exact), then its sleep and
    /// what ended it.
    fn span(&mut self, r: &SchedSpan, feeder: Feeder) {
        self.records += 1;
        let sleep = match r.slept {
            SchedState::Sleeping => Some(St::Sleeping),
            SchedState::Uninterruptible => Some(St::IoWait),
            _ => None,
        };
        let then = if r.flags & span::RUNNING != 0 { St::Running } else { St::Runnable };
        // Each part begins where the last ended; the sleep at its own start.
        let mut at = r.from;
        let mut steps = [(0, St::Other, SleepCall::None); 4];
        let mut n = 0;
        let busy = match (r.cpu, r.runnable) {
            (_, 0) => St::Running,
            (0, _) => St::Runnable,
            (cpu, runnable) => St::busy(cpu, runnable),
        };
        let parts = [
            (busy, r.cpu + r.runnable, SleepCall::None),
            (St::Other, r.other, SleepCall::None),
            (St::Sleeping, r.timed, SleepCall::Nanosleep),
        ];
        for (st, ns, call) in parts {
            if ns > 0 {
                steps[n] = (at, st, call);
                at = at.saturating_add(ns);
                n += 1;
            }
        }
        steps[n] = match sleep {
            Some(st) => (r.sleep_from, st, r.call),
            None => (r.ts, then, SleepCall::None),
        };
        // A timed sleep ends by its timer: a wait for nothing.
        let timer = Waker { interrupt: true, pid: 0, feeder: Feeder::No, handed_on: false, fed: 0 };
        for (i, &(ts, st, call)) in steps[..=n].iter().enumerate() {
            // The thread already in it from there (the last span left it so).
            if i == 0 && self.threads.get(&r.tid).is_some_and(|t| t.st == st && t.since == ts) {
                continue;
            }
            let woke =
                (i > 0 && steps[i - 1].2 == SleepCall::Nanosleep && steps[i - 1].1 == St::Sleeping).then_some(timer);
            self.set(r.pid, r.tid, ts, Some(st), call, woke);
            if let (St::Busy { .. }, Some(t)) = (st, self.threads.get_mut(&r.tid)) {
                t.mix = (r.cpu, r.runnable);
            }
        }
        match sleep {
            Some(_) if r.flags & span::WOKEN != 0 => {
                self.wake(r.pid, r.tid, r.ts, (r.waker_pid, r.waker_tid, r.by), feeder, then)
            }
            // Seen running again without a wake-up: the sleep's end, by no one known.
            Some(_) => self.set(r.pid, r.tid, r.ts, Some(then), SleepCall::None, None),
            None => {}
        }
        if r.tid == r.pid {
            for c in self.span_calls.laid(r.tid, r.ts) {
                self.split_call(c);
            }
        }
    }

    /// Thread `tid`'s calls still waiting for a span, split by what is known.
    fn split_waiting(&mut self, tid: u32) {
        for c in self.span_calls.end(tid) {
            self.split_call(c);
        }
    }

    /// Process `pid` ran a new program from `ts` (an exec): what it did
    /// before is not that program's. A launcher that execs the trainer (a
    /// shell shim, `poetry run`) spends its start-up in the trainer's pid,
    /// and its own file reads would read as the trainer's I/O.
    pub fn exec(&mut self, pid: u32, ts: u64) {
        if let Some(t) = self.threads.get(&pid) {
            // The interval in progress ends here, its state kept.
            let (st, call) = (t.st, t.call);
            self.set(pid, pid, ts, Some(st), call, None);
        }
        // Only a thread that slept has wake-ups to forget, and only a
        // process that had other threads their times: an exec right after
        // its fork (most of them) scans nothing.
        let slept = self.main_thread.get(&pid).is_some_and(|t| t.sleep + t.io_wait > 0);
        self.procs.remove(&pid);
        if let Some(rw) = self.rank_waits.as_mut() {
            rw.forget(pid);
        }
        self.main_thread.remove(&pid);
        self.in_calls.remove(&pid);
        self.span_calls.exec(pid);
        self.recent.remove(&pid);
        self.forgot.remove(&pid);
        self.by_threads.remove(&pid);
        self.handed_on.remove(&pid);
        self.by_collective.remove(&pid);
        self.by_gil.remove(&pid);
        for e in [self.episodes.remove(&pid), self.batches.remove(&pid)].into_iter().flatten() {
            self.episodes_kept -= e.len();
        }
        if slept {
            self.woken_by.retain(|&(tid, _), _| tid != pid);
        }
        if self.threaded.remove(&pid) {
            self.thread_times.retain(|_, (p, _)| *p != pid);
        }
    }

    /// Thread `tid` of `pid` was inside a call of `kind` over
    /// `[from, to)`: for a main thread, that time moves out of the states
    /// it was in (and out of a data wait) into the call's kind.
    pub fn call(&mut self, pid: u32, tid: u32, from: u64, to: u64, kind: CallKind) {
        if tid != pid || to <= from {
            return;
        }
        // Under summary detail, once the span that lays out its time has come.
        if !self.span_calls.waits(tid, to) {
            self.split_call(Call { pid, tid, from, to, kind });
        } else if let Some(c) = self.span_calls.wait(Call { pid, tid, from, to, kind }) {
            self.split_call(c);
        }
    }

    fn split_call(&mut self, Call { pid, tid, from, to, kind }: Call) {
        let Self { threads, recent, forgot, in_calls, timeline, trainer, .. } = self;
        let ic = in_calls.entry(pid).or_default();
        // History let go of (not the recording's start: a call begun
        // before the first switch has nothing to split).
        if let Some(&k) = forgot.get(&tid).filter(|&&k| k > from) {
            ic.cut += 1;
            ic.cut_ns += k.min(to) - from;
        }
        let mut tl = timeline.as_mut().filter(|_| pid == *trainer);
        let mut take = |a: u64, b: u64, st: St, iv: Option<&Interval>| {
            let ns = b - a;
            let (data, coll, gil) = iv.map_or((false, false, false), |i| (i.data, i.coll, i.gil));
            ic.states.add(st, ns);
            if data {
                ic.data_wait += ns;
            }
            if coll {
                ic.collective_wait += ns;
            }
            if gil {
                ic.gil_wait += ns;
            }
            match kind {
                CallKind::Gpu => ic.gpu += ns,
                CallKind::OwnIo => ic.own_io += ns,
                CallKind::Collective => ic.collective += ns,
            }
            if let Some(tl) = tl.as_mut() {
                timeline_add(tl, st, a, b, -1.0);
                if data {
                    tl.sub(Field::DataWait, a, b);
                }
                if coll {
                    tl.sub(Field::CollectiveWait, a, b);
                }
                if gil {
                    tl.sub(Field::GilWait, a, b);
                }
                let to = match kind {
                    CallKind::Gpu => Field::GpuWait,
                    CallKind::OwnIo => Field::OwnIo,
                    CallKind::Collective => Field::CollectiveCall,
                };
                tl.add(to, a, b);
            }
        };
        // The open interval (closed later, whole), then the closed ones
        // back to the call's start.
        if let Some(t) = threads.get_mut(&tid).filter(|t| t.pid == pid && t.since < to) {
            // Whether it is a data wait is known when it ends; a wait for the GIL, now.
            let gil = matches!(t.st, St::Sleeping | St::IoWait) && t.call == SleepCall::Gil;
            let open = Interval { from: t.since, to, st: t.st, data: false, coll: false, gil };
            take(t.since.max(from), to, t.st, Some(&open));
            if matches!(t.st, St::Runnable | St::Other) && t.taken.len() < MAX_TAKEN {
                t.taken.push((t.since.max(from), to));
            }
        }
        for iv in recent.get(&tid).into_iter().flat_map(|q| q.iter().rev()) {
            if iv.to <= from {
                break;
            }
            let (a, b) = (iv.from.max(from), iv.to.min(to));
            if b > a {
                take(a, b, iv.st, Some(iv));
            }
        }
    }

    /// A sample of a GPU's SM utilisation.
    pub fn gpu_sample(&mut self, group: &str, ts: u64, sm: f64) {
        self.gpu.sample(group, ts, sm, self.timeline.as_mut());
        let asleep =
            self.threads.get(&self.trainer).filter(|t| matches!(t.st, St::Sleeping | St::IoWait)).map(|t| t.since);
        self.gpu.prune(asleep);
    }

    /// Closes every thread's interval at the log's end.
    pub fn finish(&mut self, end: u64) {
        for tid in self.span_calls.threads() {
            self.split_waiting(tid);
        }
        let tids: Vec<(u32, u32)> = self.threads.iter().map(|(&tid, t)| (t.pid, tid)).collect();
        for (pid, tid) in tids {
            self.set(pid, tid, end, None, SleepCall::None, None);
        }
    }

    /// The main thread of `pid` waited for the other ranks over
    /// `[from, to)`: a collective of its own, or the one it waits in.
    pub fn episode(&mut self, pid: u32, from: u64, to: u64) {
        let list = self.episodes.entry(pid).or_default();
        push_episode(list, &mut self.episodes_kept, &mut self.episodes_dropped, from, to);
    }

    /// The main thread of `pid` waited for a batch over `[from, to)`.
    fn batch(&mut self, pid: u32, from: u64, to: u64) {
        let list = self.batches.entry(pid).or_default();
        push_episode(list, &mut self.episodes_kept, &mut self.episodes_dropped, from, to);
    }

    /// Ns the main thread of `pid` slept until a collective thread of its
    /// process woke it.
    pub fn collective_wait(&self, pid: u32) -> u64 {
        self.by_collective.get(&pid).copied().unwrap_or(0)
    }

    /// Ns the main thread of `pid` slept waiting for its Python's GIL.
    pub fn gil_wait(&self, pid: u32) -> u64 {
        self.by_gil.get(&pid).copied().unwrap_or(0)
    }

    /// Ns the main thread of `pid` slept until a thread of one of
    /// `workers` woke it, one of its loader threads, or a thread of its
    /// own that one of those had woken.
    pub fn data_wait(&self, pid: u32, workers: &[u32]) -> u64 {
        let direct: u64 = workers.iter().map(|w| self.woken_by.get(&(pid, *w)).copied().unwrap_or(0)).sum();
        direct + self.by_threads.get(&pid).copied().unwrap_or(0) + self.handed_on.get(&pid).copied().unwrap_or(0)
    }
}

// What its records add to the figures (see [`mltrace_log::Accept`]).

impl Accept<SchedSwitch> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, rec: &Record, r: SchedSwitch) {
        // A traced process has its row even if it only ran.
        for (bit, pid) in [(mltrace_log::sched::PREV, r.prev_pid), (mltrace_log::sched::NEXT, r.next_pid)] {
            if r.traced & bit != 0 {
                self.proc(pid);
            }
        }
        self.sched.add(rec, Feeder::No);
    }
}

impl Accept<SchedWake> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, rec: &Record, r: SchedWake) {
        self.proc(r.pid);
        let feeder = self.feeder(r.pid, r.tid, r.waker_pid, r.waker_tid);
        self.sched.add(rec, feeder);
    }
}

impl Accept<SchedSpan> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, rec: &Record, r: SchedSpan) {
        self.proc(r.pid);
        let woken = r.flags & mltrace_log::span::WOKEN != 0;
        let feeder = if woken { self.feeder(r.pid, r.tid, r.waker_pid, r.waker_tid) } else { Feeder::No };
        self.sched.add(rec, feeder);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(ts: u64, prev: (u32, u32), state: SchedState, next: (u32, u32), traced: u8) -> Record {
        Record::SchedSwitch(SchedSwitch {
            ts,
            prev_pid: prev.0,
            prev_tid: prev.1,
            prev_state: state,
            next_pid: next.0,
            next_tid: next.1,
            traced,
            ..Default::default()
        })
    }

    fn wake(ts: u64, who: (u32, u32), by: (u32, u32)) -> Record {
        Record::SchedWake(SchedWake {
            ts,
            pid: who.0,
            tid: who.1,
            waker_pid: by.0,
            waker_tid: by.1,
            ..Default::default()
        })
    }

    impl SchedTimes {
        fn add_t(&mut self, r: &Record) {
            self.add(r, Feeder::No)
        }
    }

    #[test]
    fn a_sleep_ended_by_a_worker_is_a_data_wait() {
        let mut s = SchedTimes::default();
        let (trainer, worker, idle) = ((10, 10), (20, 21), (0, 0));
        s.add_t(&sw(100, idle, SchedState::Runnable, trainer, sched::NEXT));
        // Runs 100 ns, sleeps on the pipe; the worker wakes it 300 ns later.
        s.add_t(&sw(200, trainer, SchedState::Sleeping, idle, sched::PREV));
        s.add_t(&wake(500, trainer, worker));
        s.add_t(&sw(520, idle, SchedState::Runnable, trainer, sched::NEXT));
        // Preempted, then a sleep that a timer (the idle task) ends.
        s.add_t(&sw(600, trainer, SchedState::Runnable, idle, sched::PREV));
        s.add_t(&sw(650, idle, SchedState::Runnable, trainer, sched::NEXT));
        s.add_t(&sw(700, trainer, SchedState::Uninterruptible, idle, sched::PREV));
        s.add_t(&wake(800, trainer, (0, 0)));
        s.finish(900);
        let t = s.procs[&10];
        assert_eq!(t, Times { cpu: 100 + 80 + 50, runnable: 20 + 50 + 100, io_wait: 100, sleep: 300, other: 0 });
        assert_eq!(s.main_thread[&10], t);
        assert_eq!(s.data_wait(10, &[20]), 300);
        assert_eq!(s.data_wait(10, &[30]), 0);
        assert_eq!(t.total(), 800);
    }

    /// A loader's wake-up sent from another CPU while the trainer was
    /// still getting off its own comes after that switch, stamped a few
    /// µs before it (seen in CI: a batch that ended before it began).
    #[test]
    fn a_wake_up_stamped_before_the_sleep_it_ends_ends_it_there() {
        let mut s = SchedTimes::default();
        let (trainer, worker, idle) = ((10, 10), (20, 21), (0, 0));
        s.add_t(&sw(0, idle, SchedState::Runnable, trainer, sched::NEXT));
        s.add_t(&sw(100, trainer, SchedState::Sleeping, idle, sched::PREV));
        s.add(&wake(95, trainer, worker), Feeder::Worker);
        s.add_t(&sw(110, idle, SchedState::Runnable, trainer, sched::NEXT));
        s.add_t(&sw(200, trainer, SchedState::Sleeping, idle, sched::PREV));
        s.add(&wake(260, trainer, worker), Feeder::Worker);
        s.add_t(&sw(270, idle, SchedState::Runnable, trainer, sched::NEXT));
        s.finish(300);
        let t = s.main_thread[&10];
        assert_eq!(t, Times { cpu: 100 + 90 + 30, runnable: 10 + 10, sleep: 60, ..Default::default() });
        assert_eq!(t.total(), 300);
        let b = &s.batches[&10];
        assert!(b.iter().all(|e| e.from <= e.to), "{b:?}");
        assert_eq!(s.data_wait(10, &[20]), 60);
    }

    /// The kernel's trace lacks a switch-in now and then: the thread's
    /// next switch-out says how long it had run, which places it. Without
    /// it the whole time from the preemption reads as runnable.
    #[test]
    fn a_switch_in_the_trace_lacks_is_placed_by_the_run_time() {
        const US: u64 = 1000;
        let (trainer, other, idle) = ((10, 10), (30, 30), (0, 0));
        // On a CPU from 0, preempted at 100 µs.
        let preempted = || {
            let mut s = SchedTimes::default();
            s.add_t(&sw(0, idle, SchedState::Runnable, trainer, sched::NEXT));
            s.add_t(&sw(100 * US, trainer, SchedState::Runnable, other, sched::PREV));
            s
        };
        let mut s = preempted();
        // Back on at 150 µs (not traced); off again at 300 µs, having run 150.
        let out = |ran: u32| {
            Record::SchedSwitch(SchedSwitch {
                ts: 300 * US,
                prev_pid: 10,
                prev_tid: 10,
                prev_state: SchedState::Runnable,
                next_pid: 30,
                next_tid: 30,
                traced: sched::PREV,
                prev_ran_us: ran,
                ..Default::default()
            })
        };
        // A call from 120 to 250 µs, come before the switch-out: taken as
        // runnable then, on a CPU from 150.
        s.call(10, 10, 120 * US, 250 * US, CallKind::Gpu);
        s.add_t(&out(150));
        s.add_t(&sw(400 * US, other, SchedState::Sleeping, trainer, sched::NEXT));
        s.finish(500 * US);
        assert_eq!(
            s.main_thread[&10],
            Times { cpu: (100 + 150 + 100) * US, runnable: (50 + 100) * US, ..Default::default() }
        );
        let ic = s.in_calls[&10];
        assert_eq!((ic.gpu, ic.states), (130 * US, Times { cpu: 100 * US, runnable: 30 * US, ..Default::default() }));
        assert_eq!(s.switch_ins_untraced, 1);
        // A run time within RAN_SLACK longer than the wait (clocks apart):
        // on CPU from the preemption; beyond, runnable as it reads.
        let mut s = preempted();
        s.add_t(&out(250));
        s.finish(300 * US);
        assert_eq!(s.main_thread[&10], Times { cpu: 300 * US, ..Default::default() });
        let mut s = preempted();
        s.add_t(&out(1000));
        s.finish(300 * US);
        assert_eq!(s.main_thread[&10], Times { cpu: 100 * US, runnable: 200 * US, ..Default::default() });
        // An older log, no run time: runnable as before.
        let mut s = preempted();
        s.add_t(&out(0));
        s.finish(300 * US);
        assert_eq!(s.main_thread[&10], Times { cpu: 100 * US, runnable: 200 * US, ..Default::default() });
        assert_eq!(s.switch_ins_untraced, 0);
    }

    /// A launcher that execs the trainer (`poetry run`, a shell shim): its
    /// time and its waits before the exec are not the trainer's.
    #[test]
    fn an_exec_starts_the_programs_time_afresh() {
        let mut s = SchedTimes::default();
        let (me, helper, idle) = ((10, 10), (20, 20), (0, 0));
        // The launcher runs 400 ns, waits 200 ns for a helper it started.
        s.add_t(&sw(0, idle, SchedState::Runnable, me, sched::NEXT));
        s.add_t(&sw(400, me, SchedState::Sleeping, idle, sched::PREV));
        s.add(&wake(600, me, helper), Feeder::Worker);
        s.add_t(&sw(600, idle, SchedState::Runnable, me, sched::NEXT));
        s.call(10, 10, 100, 300, CallKind::OwnIo);
        // It execs the trainer at 700, which runs 100 ns more, then waits
        // 50 ns for a worker.
        s.exec(10, 700);
        s.add_t(&sw(800, me, SchedState::Sleeping, idle, sched::PREV));
        s.add(&wake(850, me, (30, 30)), Feeder::Worker);
        s.add_t(&sw(850, idle, SchedState::Runnable, me, sched::NEXT));
        s.finish(900);
        assert_eq!(s.main_thread[&10], Times { cpu: 100 + 50, sleep: 50, ..Default::default() });
        assert_eq!(s.procs[&10].total(), 200);
        assert_eq!((s.data_wait(10, &[20]), s.data_wait(10, &[30])), (0, 50));
        assert!(!s.in_calls.contains_key(&10));
    }

    #[test]
    fn a_batch_handed_on_by_a_thread_a_worker_woke_is_a_data_wait() {
        let mut s = SchedTimes::default();
        let (main, pin, logger, worker, idle) = ((10, 10), (10, 11), (10, 12), (20, 21), (0, 0));
        for t in [main, pin, logger] {
            s.add_t(&sw(0, t, SchedState::Sleeping, idle, sched::PREV));
        }
        // The worker wakes the pin thread, which wakes the main thread.
        s.add(&wake(100, pin, worker), Feeder::Worker);
        s.add_t(&wake(150, main, pin));
        // The main thread wakes the logger, which later wakes it: no data.
        s.add_t(&sw(200, main, SchedState::Sleeping, idle, sched::PREV));
        s.add_t(&wake(210, logger, main));
        s.add_t(&wake(300, main, logger));
        // The pin thread, asleep and woken by a timer since, hands nothing on.
        s.add_t(&sw(340, pin, SchedState::Sleeping, idle, sched::PREV));
        s.add_t(&sw(350, main, SchedState::Sleeping, idle, sched::PREV));
        s.add_t(&wake(360, pin, idle));
        s.add_t(&wake(400, main, pin));
        s.finish(500);
        assert_eq!(s.data_wait(10, &[20]), 150);
        assert_eq!(s.main_thread[&10].sleep, 150 + 100 + 50);
    }

    fn sleep_in(ts: u64, who: (u32, u32), call: SleepCall) -> Record {
        Record::SchedSwitch(SchedSwitch {
            ts,
            prev_pid: who.0,
            prev_tid: who.1,
            prev_state: SchedState::Sleeping,
            traced: sched::PREV,
            prev_call: call,
            ..Default::default()
        })
    }

    fn run(ts: u64, who: (u32, u32)) -> Record {
        sw(ts, (0, 0), SchedState::Runnable, who, sched::NEXT)
    }

    fn woken(ts: u64, who: (u32, u32), by: WakeBy, waker: (u32, u32)) -> Record {
        Record::SchedWake(SchedWake {
            ts,
            pid: who.0,
            tid: who.1,
            waker_pid: waker.0,
            waker_tid: waker.1,
            by,
            ..Default::default()
        })
    }

    #[test]
    fn a_sleep_the_thread_asked_for_is_never_a_data_wait() {
        let mut s = SchedTimes::default();
        let (trainer, worker) = ((10, 10), (20, 21));
        s.add_t(&run(0, trainer));
        // time.sleep: ended by its timer, or by a worker's signal.
        s.add_t(&sleep_in(100, trainer, SleepCall::Nanosleep));
        s.add(&woken(400, trainer, WakeBy::Timer, (0, 0)), Feeder::No);
        s.add_t(&run(410, trainer));
        s.add_t(&sleep_in(500, trainer, SleepCall::Nanosleep));
        s.add(&woken(700, trainer, WakeBy::Task, worker), Feeder::Worker);
        s.add_t(&run(710, trainer));
        // A format-1 log names the task a timer interrupted: still not data.
        s.add_t(&sleep_in(800, trainer, SleepCall::Nanosleep));
        s.add(&woken(900, trainer, WakeBy::Unknown, worker), Feeder::Worker);
        s.finish(1000);
        assert_eq!(s.data_wait(10, &[20]), 0);
        assert_eq!(s.main_thread[&10].sleep, 300 + 200 + 100);
    }

    #[test]
    fn an_interrupt_is_never_a_worker() {
        let mut s = SchedTimes::default();
        let (trainer, worker) = ((10, 10), (20, 21));
        s.add_t(&run(0, trainer));
        for (i, by) in [WakeBy::Timer, WakeBy::Hardirq, WakeBy::Softirq].into_iter().enumerate() {
            let t = 1_000_000_000 * (i as u64 + 1);
            s.add_t(&sleep_in(t, trainer, SleepCall::Futex));
            s.add(&woken(t + 100, trainer, by, worker), Feeder::Worker);
            // Works 20 ms: the timed-out wait was not retried.
            s.add_t(&run(t + 110, trainer));
        }
        s.finish(5_000_000_000);
        assert_eq!(s.data_wait(10, &[20]), 0);
    }

    #[test]
    fn waits_that_timed_out_and_were_retried_count_when_a_worker_ends_them() {
        let mut s = SchedTimes::default();
        let (trainer, worker) = ((10, 10), (20, 21));
        s.add_t(&run(0, trainer));
        // A queue get with a timeout: times out twice, then data comes.
        s.add_t(&sleep_in(100, trainer, SleepCall::Poll));
        s.add(&woken(1100, trainer, WakeBy::Timer, (0, 0)), Feeder::No);
        s.add_t(&run(1110, trainer));
        s.add_t(&sleep_in(1150, trainer, SleepCall::Poll));
        s.add(&woken(2150, trainer, WakeBy::Timer, (0, 0)), Feeder::No);
        s.add_t(&run(2160, trainer));
        s.add_t(&sleep_in(2200, trainer, SleepCall::Poll));
        s.add(&woken(2700, trainer, WakeBy::Task, worker), Feeder::Worker);
        s.add_t(&run(2710, trainer));
        // A timed-out wait, then 20 ms of work, then a wait a worker ends:
        // only that last one.
        s.add_t(&sleep_in(3000, trainer, SleepCall::Futex));
        s.add(&woken(4000, trainer, WakeBy::Timer, (0, 0)), Feeder::No);
        s.add_t(&run(4010, trainer));
        s.add_t(&sleep_in(20_004_010, trainer, SleepCall::Futex));
        s.add(&woken(20_004_510, trainer, WakeBy::Task, worker), Feeder::Worker);
        s.finish(20_010_000);
        assert_eq!(s.data_wait(10, &[20]), 1000 + 1000 + 500 + 500);
    }

    /// A loader thread that drops the GIL wakes the trainer waiting for
    /// it: a wait for the GIL, never for data, and no batch handed on.
    #[test]
    fn a_wait_for_the_gil_is_not_a_data_wait() {
        let mut s = SchedTimes::default();
        let (main, loader, pin) = ((10, 10), (10, 11), (10, 12));
        s.add_t(&run(0, main));
        s.add_t(&sleep_in(100, main, SleepCall::Gil));
        s.add(&woken(400, main, WakeBy::Task, loader), Feeder::Thread);
        s.add_t(&run(410, main));
        // Timed out (the switch interval), then a loader drops it.
        s.add_t(&sleep_in(500, main, SleepCall::Gil));
        s.add(&woken(600, main, WakeBy::Timer, (0, 0)), Feeder::No);
        s.add_t(&run(610, main));
        s.add_t(&sleep_in(620, main, SleepCall::Gil));
        s.add(&woken(700, main, WakeBy::Task, loader), Feeder::Thread);
        s.add_t(&run(710, main));
        // The pin thread, handed the GIL by a loader, then wakes the trainer.
        s.add_t(&sleep_in(720, pin, SleepCall::Gil));
        s.add(&woken(730, pin, WakeBy::Task, loader), Feeder::Thread);
        s.add_t(&sleep_in(800, main, SleepCall::Futex));
        s.add_t(&woken(900, main, WakeBy::Task, pin));
        // A real batch.
        s.add_t(&run(910, main));
        s.add_t(&sleep_in(1000, main, SleepCall::Futex));
        s.add(&woken(1050, main, WakeBy::Task, loader), Feeder::Thread);
        // A call that covered part of the first wait takes that part.
        s.call(10, 10, 150, 250, CallKind::OwnIo);
        s.finish(1100);
        assert_eq!(s.data_wait(10, &[]), 50);
        assert_eq!(s.gil_wait(10), 300 + 100 + 80);
        assert_eq!(s.in_calls[&10].gil_wait, 100);
        assert!(s.gil_seen);
    }

    #[test]
    fn a_loader_thread_and_the_relays_it_feeds_end_data_waits() {
        let mut s = SchedTimes::default();
        let (main, reader, runner, prefetch, logger) = ((10, 10), (10, 11), (10, 12), (10, 13), (10, 14));
        s.add_t(&run(0, main));
        // tf.data: the reader wakes the runner, the runner the prefetch
        // thread, the prefetch thread the trainer: three hops, counted.
        s.add_t(&sleep_in(100, main, SleepCall::Futex));
        s.add(&woken(110, runner, WakeBy::Task, reader), Feeder::Thread);
        s.add_t(&woken(120, prefetch, WakeBy::Task, runner));
        s.add_t(&woken(300, main, WakeBy::Task, prefetch));
        s.add_t(&run(310, main));
        // A thread pool's loader wakes the trainer itself.
        s.add_t(&sleep_in(400, main, SleepCall::Futex));
        s.add(&woken(500, main, WakeBy::Task, reader), Feeder::Thread);
        s.add_t(&run(510, main));
        // The trainer, fed, wakes the logger, which wakes it: not data
        // (the one waiting for data relays nothing).
        s.add_t(&woken(520, logger, WakeBy::Task, main));
        s.add_t(&sleep_in(600, main, SleepCall::Futex));
        s.add_t(&woken(700, main, WakeBy::Task, logger));
        s.add_t(&run(710, main));
        // Four hops is too far.
        let (a, b, c) = ((10, 21), (10, 22), (10, 23));
        s.add(&woken(800, a, WakeBy::Task, reader), Feeder::Thread);
        s.add_t(&woken(810, b, WakeBy::Task, a));
        s.add_t(&woken(820, c, WakeBy::Task, b));
        s.add_t(&woken(830, logger, WakeBy::Task, c));
        s.add_t(&sleep_in(900, main, SleepCall::Futex));
        s.add_t(&woken(1000, main, WakeBy::Task, logger));
        s.finish(1100);
        assert_eq!(s.data_wait(10, &[]), 200 + 100);
        assert_eq!(s.by_threads[&10], 100);
        assert_eq!(s.main_thread[&10].sleep, 200 + 100 + 100 + 100);
    }

    /// DDP on gloo: the main thread sleeps in the all-reduce until gloo's
    /// thread (a collective thread of its process) wakes it. A collective
    /// wait, never a data wait, and what it wakes relays no batch; waits
    /// less than a millisecond apart are one collective.
    #[test]
    fn a_sleep_a_collective_thread_ends_is_a_wait_for_other_ranks() {
        let mut s = SchedTimes::default();
        let (main, gloo, other) = ((10, 10), (10, 11), (10, 12));
        s.add_t(&run(0, main));
        s.add_t(&sleep_in(100, main, SleepCall::Futex));
        s.add(&woken(1_000, main, WakeBy::Task, gloo), Feeder::Collective);
        s.add_t(&run(1_010, main));
        s.add_t(&sleep_in(1_200, main, SleepCall::Futex));
        s.add(&woken(2_000, main, WakeBy::Task, gloo), Feeder::Collective);
        s.add_t(&run(2_010, main));
        // gloo's thread woke another, which wakes the main one: not data.
        s.add(&woken(3_000, other, WakeBy::Task, gloo), Feeder::Collective);
        s.add_t(&sleep_in(3_100, main, SleepCall::Futex));
        s.add_t(&woken(3_500, main, WakeBy::Task, other));
        s.add_t(&run(3_510, main));
        // A second collective, 10 ms later.
        s.add_t(&sleep_in(10_003_510, main, SleepCall::Futex));
        s.add(&woken(10_004_510, main, WakeBy::Task, gloo), Feeder::Collective);
        s.finish(10_005_000);
        assert_eq!(s.collective_wait(10), 900 + 800 + 1_000);
        assert_eq!(s.data_wait(10, &[]), 0);
        assert_eq!(s.episodes[&10], [Episode { from: 100, to: 2_000 }, Episode { from: 10_003_510, to: 10_004_510 }]);
        assert!(s.batches.get(&10).is_none_or(|b| b.is_empty()));
    }

    /// Under summary detail a call's record (at its return) comes before
    /// the span that lays out the time it covered: it is split by that
    /// span, not by the state the last span left open.
    #[test]
    fn a_call_is_split_by_the_span_that_covers_it() {
        let span = |ts, from, sleep_from, cpu, runnable, slept| {
            Record::SchedSpan(SchedSpan {
                ts,
                tid: 10,
                pid: 10,
                from,
                sleep_from,
                cpu,
                runnable,
                slept,
                flags: span::WOKEN,
                by: WakeBy::Timer,
                ..Default::default()
            })
        };
        let mut s = SchedTimes::default();
        // Woken at 1000 (runnable from there, as far as the log says yet).
        s.add_t(&span(1_000, 0, 900, 900, 0, SchedState::Sleeping));
        // Two writes, then an fsync that sleeps: their records come first.
        s.call(10, 10, 1_000, 1_600, CallKind::OwnIo);
        s.call(10, 10, 1_600, 2_000, CallKind::OwnIo);
        s.call(10, 10, 2_000, 2_500, CallKind::OwnIo);
        assert_eq!(s.in_calls.get(&10).map(|c| c.own_io), None, "split before its span came");
        // Runnable 100, on CPU 900, asleep in the fsync from 2000 to 2400.
        s.add_t(&span(2_400, 1_000, 2_000, 900, 100, SchedState::Uninterruptible));
        // The fsync's own return comes after the wake-up that ended its sleep.
        s.add_t(&span(3_000, 2_400, 3_000, 600, 0, SchedState::Runnable));
        s.finish(3_000);
        let ic = s.in_calls[&10];
        assert_eq!(ic.own_io, 1_500);
        // The fsync's last 100 ns on CPU after its sleep, in the third span.
        assert_eq!(ic.states, Times { cpu: 1_000, io_wait: 400, runnable: 100, ..Default::default() });
        assert_eq!(s.main_thread[&10], Times { cpu: 2_400, runnable: 100, io_wait: 400, sleep: 100, other: 0 });
    }

    /// A thread that keeps its CPU sends no spans: its calls wait for the
    /// log's end (or its exit), then split by the state it was left in.
    #[test]
    fn calls_past_the_last_span_are_split_at_the_end() {
        let mut s = SchedTimes::default();
        s.add_t(&Record::SchedSpan(SchedSpan {
            ts: 1_000,
            tid: 10,
            pid: 10,
            from: 0,
            sleep_from: 1_000,
            cpu: 1_000,
            slept: SchedState::Runnable,
            flags: span::RUNNING,
            ..Default::default()
        }));
        s.call(10, 10, 1_200, 1_700, CallKind::Gpu);
        assert_eq!(s.in_calls.get(&10).map(|c| c.gpu), None);
        s.finish(2_000);
        assert_eq!(s.in_calls[&10].gpu, 500);
        assert_eq!(s.in_calls[&10].states, Times { cpu: 500, ..Default::default() });
    }

    #[test]
    fn a_dead_thread_stops_counting() {
        let mut s = SchedTimes::default();
        s.add_t(&sw(0, (0, 0), SchedState::Runnable, (5, 6), sched::NEXT));
        s.add_t(&sw(50, (5, 6), SchedState::Dead, (0, 0), sched::PREV));
        s.finish(1000);
        assert_eq!(s.procs[&5], Times { cpu: 50, ..Default::default() });
    }
}
