//! What a writer implements: tracks declared once per output file, then
//! slices, instants and counter values on them. The model has decided
//! everything a writer shows; a writer only encodes it.

use std::io;

use mltrace_log::{ClockAnchor, Header};

use crate::args::Args;

/// A track of one output file: dense, from 1, declared (by
/// [`Encoder::track`]) before anything uses it.
pub type TrackId = u32;

/// A counter track's unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    None,
    Count,
    Bytes,
    TimeNs,
    /// Any other unit, by its symbol (`%`, `B/s`, `W`...).
    Named(&'static str),
}

impl Unit {
    /// How the unit is written where only a string can say it.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::None => "",
            Unit::Count => "count",
            Unit::Bytes => "B",
            Unit::TimeNs => "ns",
            Unit::Named(s) => s,
        }
    }

    pub fn from_log(u: mltrace_log::CounterUnit) -> Unit {
        use mltrace_log::CounterUnit as C;
        match u {
            C::None => Unit::None,
            C::Bytes => Unit::Bytes,
            C::Count => Unit::Count,
            other => Unit::Named(other.name()),
        }
    }
}

/// A process group as the viewer shows it.
#[derive(Clone, Copy, Debug)]
pub struct ProcessDesc<'a> {
    pub pid: u32,
    /// The parent's pid, when the parent is in the trace.
    pub parent_pid: Option<u32>,
    pub cmdline: &'a [String],
    /// When it was forked, if it was while recording.
    pub start_ts: Option<u64>,
}

#[derive(Clone, Copy, Debug)]
pub enum TrackKind<'a> {
    /// A process's group; its children are its tracks.
    Process(ProcessDesc<'a>),
    /// A thread of a process (`parent` is the process): slices of its
    /// calls.
    Thread { pid: u32, tid: u32 },
    /// A named group of tracks that is not a process, or a sub-group
    /// inside one (CPU details, an overflow group).
    Group,
    /// Slices that nest (a lane: tracks of one name under one parent
    /// are shown together). May have children: a top-level one is a group
    /// whose own row shows its slices (Training phases).
    Slices,
    /// A counter. May have children, like slices: CPU's own row is busy %.
    Counter(Unit),
}

#[derive(Clone, Copy, Debug)]
pub struct Track<'a> {
    pub id: TrackId,
    pub parent: Option<TrackId>,
    pub name: &'a str,
    /// Order among its siblings, lowest first.
    pub rank: i32,
    pub kind: TrackKind<'a>,
}

/// An event's name: given, or made on first use of its key (names repeat
/// a lot: `pread64 4 KiB`), so encoders can intern by key without
/// formatting. A key always makes the same name.
#[derive(Clone, Copy)]
pub enum Name<'a> {
    Str(&'a str),
    Keyed(u64, &'a dyn Fn() -> String),
}

impl Name<'_> {
    pub fn to_string_now(&self) -> String {
        match self {
            Name::Str(s) => s.to_string(),
            Name::Keyed(_, f) => f(),
        }
    }
}

/// One slice: `dur` ns from `ts` on `track`, with flows leaving it
/// (`flows_out`) and ending on it (`flows_in`); ids are global to the file.
#[derive(Clone, Copy)]
pub struct Slice<'a> {
    pub track: TrackId,
    pub ts: u64,
    pub dur: u64,
    pub name: Name<'a>,
    pub flows_out: &'a [u64],
    pub flows_in: &'a [u64],
}

/// What an output file is, for its metadata.
#[derive(Clone, Copy, Debug)]
pub struct FileMeta<'a> {
    pub header: &'a Header,
    /// The clock anchor that maps the trace's BOOTTIME stamps to wall-clock time.
    pub anchor: ClockAnchor,
    /// What the file holds: "whole run", "overview", "part 3 of 12: EPOCH 5-6".
    pub title: &'a str,
    /// Machine counters left out because they were 0 for the whole run.
    pub zero_counters: &'a [String],
}

/// A context switch on `cpu` as the kernel's sched_switch tracepoint has
/// it: at least one side is a traced thread, the other is whoever it was.
#[derive(Clone, Copy, Debug)]
pub struct SwitchEvent<'a> {
    pub ts: u64,
    pub cpu: u32,
    pub prev_tid: u32,
    pub prev_comm: &'a [u8],
    pub prev_prio: i32,
    /// The kernel's TASK_* bits (0 = runnable, 1 = S, 2 = D...).
    pub prev_state: i64,
    pub next_tid: u32,
    pub next_comm: &'a [u8],
    pub next_prio: i32,
    /// The system call prev sleeps in ("futex", "nanosleep"...), or "".
    pub prev_call: &'static str,
}

/// A traced thread `tid` made runnable by `waker_tid` (running on `cpu`;
/// for an interrupt, one of the made-up threads "timer interrupt",
/// "hardirq", "softirq" of "other tasks"), to run on `target_cpu`.
#[derive(Clone, Copy, Debug)]
pub struct WakingEvent<'a> {
    pub ts: u64,
    pub cpu: u32,
    pub waker_tid: u32,
    pub tid: u32,
    pub comm: &'a [u8],
    pub prio: i32,
    pub target_cpu: u32,
}

/// A trace writer. Calls come in this order: [`Encoder::begin`], then
/// tracks, slices, instants and counters (a track before its first use),
/// then [`Encoder::end`].
pub trait Encoder {
    fn begin(&mut self, meta: &FileMeta<'_>) -> io::Result<()>;
    /// In a log of several hosts: the host (its number, see
    /// `mltrace_log::hosts`) of the top-level tracks declared from now on
    /// that are not processes (a process's host is in its pid). Writers
    /// without machines ignore it; a wrapper must pass it on.
    fn machine(&mut self, _host: u32) {}
    fn track(&mut self, t: &Track<'_>) -> io::Result<()>;
    fn slice<A: Args>(&mut self, s: &Slice<'_>, args: &A) -> io::Result<()>;
    fn instant<A: Args>(&mut self, track: TrackId, ts: u64, name: Name<'_>, args: &A) -> io::Result<()>;
    fn counter(&mut self, track: TrackId, ts: u64, value: f64) -> io::Result<()>;
    /// Scheduling, for writers whose format has a place for it (the
    /// viewer then draws CPU and thread-state tracks itself); others
    /// leave it out. No default: a wrapper must pass it on.
    fn sched_switch(&mut self, s: &SwitchEvent<'_>) -> io::Result<()>;
    fn sched_waking(&mut self, w: &WakingEvent<'_>) -> io::Result<()>;
    /// Ends the file; `end` is the recording's end anchor, when known.
    /// Returns the bytes written.
    fn end(&mut self, end: Option<ClockAnchor>, trailer: Option<&mltrace_log::Trailer>) -> io::Result<u64>;
}
