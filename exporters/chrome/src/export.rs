//! The model's tracks and events as Chrome trace events, streamed.
//!
//! Chrome JSON has no tracks, only (pid, tid). A process is its pid; its
//! slice tracks (`reads`, `writes`, `opens`, `block I/O`, one per lane)
//! become threads of that pid with made-up tids, named by `thread_name`
//! metadata; what is not a process (disks, counter groups, training
//! phases, lost events) is a pseudo-process with a pid above any real one.
//! Counters are `C` events named so that trace_processor names their
//! track as in the Perfetto export.

use std::collections::HashMap;
use std::io::{self, Write};

use mltrace_log::{ClockAnchor, Trailer};
use mltrace_model::{ArgKey, ArgSink, Args, Encoder, FileMeta, Name, Slice, Track, TrackId, TrackKind};
use serde_json::json;

use crate::json::Sink;
use crate::naming;

/// Pseudo-processes get pids from here (Linux pids stay below 2^22).
const PSEUDO_PID: u32 = 0x4000_0000;
/// Lane threads get tids from here: unique in the whole trace, as
/// trace_processor treats a tid seen under two pids as a new thread.
const LANE_TID: u32 = 0x5000_0000;

/// Slice names formatted once per key; cleared when this large.
const MAX_NAMES: usize = 4096;

#[derive(Clone, Debug)]
enum Out {
    /// A process, or a pseudo-process for a group: its pid and name.
    Process { pid: u32 },
    /// A thread, or a lane thread under a (pseudo-)process.
    Thread { pid: u32, tid: u32 },
    /// Counter events on `pid`: event name and arg key.
    Counter { pid: u32, name: String, key: String },
}

/// Args straight into the event; the first error is kept.
struct JArgs<'a, W: Write> {
    sink: &'a mut Sink<W>,
    err: Option<io::Error>,
}

impl<W: Write> JArgs<'_, W> {
    fn keep(&mut self, r: io::Result<()>) {
        if let (Err(e), None) = (r, &self.err) {
            self.err = Some(e);
        }
    }
}

impl<W: Write> ArgSink for JArgs<'_, W> {
    fn int(&mut self, k: ArgKey, v: i64) {
        let r = self.sink.arg_i64(k.name(), v);
        self.keep(r);
    }
    fn uint(&mut self, k: ArgKey, v: u64) {
        let r = self.sink.arg_u64(k.name(), v);
        self.keep(r);
    }
    fn str(&mut self, k: ArgKey, v: &[u8]) {
        let r = self.sink.arg_bytes(k.name(), v);
        self.keep(r);
    }
    fn argv(&mut self, k: ArgKey, v: &[u8]) {
        let r = self.sink.arg_argv(k.name(), v);
        self.keep(r);
    }
}

/// A Chrome JSON file; see the module docs.
pub struct ChromeEncoder<W: Write> {
    sink: Sink<W>,
    tracks: Vec<Option<Out>>,
    next_pid: u32,
    next_tid: u32,
    names: HashMap<u64, String>,
    /// Counter samples written.
    pub counters: u64,
}

impl<W: Write> ChromeEncoder<W> {
    pub fn new(out: W) -> Self {
        ChromeEncoder {
            sink: Sink::new(out),
            tracks: Vec::new(),
            next_pid: PSEUDO_PID,
            next_tid: LANE_TID,
            names: HashMap::new(),
            counters: 0,
        }
    }

    /// Every JSON event written, metadata included.
    pub fn events(&self) -> u64 {
        self.sink.events
    }

    pub fn into_inner(self) -> io::Result<W> {
        self.sink.into_inner()
    }

    fn out(&self, t: TrackId) -> io::Result<&Out> {
        self.tracks
            .get(t as usize)
            .and_then(|o| o.as_ref())
            .ok_or_else(|| io::Error::other(format!("track {t} used before it was declared")))
    }

    /// Where events of `t` go: (pid, tid).
    fn place(&self, t: TrackId) -> io::Result<(u32, u32)> {
        Ok(match self.out(t)? {
            Out::Process { pid, .. } => (*pid, *pid),
            Out::Thread { pid, tid } => (*pid, *tid),
            Out::Counter { pid, .. } => (*pid, *pid),
        })
    }

    fn args<A: Args>(&mut self, args: &A) -> io::Result<()> {
        let mut a = JArgs { sink: &mut self.sink, err: None };
        args.write(&mut a);
        match a.err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl<W: Write> Encoder for ChromeEncoder<W> {
    /// Opens the file; the header and its clock anchor go in `metadata`,
    /// so that `ts` can be turned into wall-clock time.
    fn begin(&mut self, meta: &FileMeta<'_>) -> io::Result<()> {
        let m = json!({
            "source": "mltrace",
            "contents": meta.title,
            "ts": "µs of the log's clock (header.clock, CLOCK_BOOTTIME when recorded); \
                   wall-clock ns = ts * 1000 - start.boottime_ns + start.realtime_ns",
            "start": meta.anchor,
            "header": meta.header,
            "counters_always_zero_left_out": meta.zero_counters,
        });
        self.sink.begin_file(&m)
    }

    fn track(&mut self, t: &Track<'_>) -> io::Result<()> {
        let parent = match t.parent {
            Some(p) => Some(self.out(p)?.clone()),
            None => None,
        };
        let parent_pid = match &parent {
            Some(Out::Process { pid, .. }) | Some(Out::Thread { pid, .. }) | Some(Out::Counter { pid, .. }) => {
                Some(*pid)
            }
            None => None,
        };
        // A top-level counter or slice track is a group with a row of its
        // own: a pseudo-process holding it.
        let parent_pid = match (parent_pid, t.kind) {
            (None, TrackKind::Counter(_) | TrackKind::Slices) => {
                let pid = self.next_pid;
                self.next_pid += 1;
                // `CPU · busy` -> `CPU`; `nodeA · CPU · busy` -> `nodeA · CPU`.
                let group = t.name.rsplit_once(" · ").map_or(t.name, |(g, _)| g);
                self.sink.meta_name(pid, pid, "process_name", group)?;
                self.sink.meta_sort(pid, pid, "process_sort_index", i64::from(t.rank))?;
                Some(pid)
            }
            (p, _) => p,
        };
        let out = match t.kind {
            TrackKind::Process(p) => {
                self.sink.meta_name(p.pid, p.pid, "process_name", t.name)?;
                self.sink.meta_sort(p.pid, p.pid, "process_sort_index", i64::from(t.rank))?;
                Out::Process { pid: p.pid }
            }
            TrackKind::Thread { pid, tid } => {
                if !t.name.is_empty() {
                    self.sink.meta_name(pid, tid, "thread_name", t.name)?;
                }
                self.sink.meta_sort(pid, tid, "thread_sort_index", i64::from(t.rank))?;
                Out::Thread { pid, tid }
            }
            // A sub-group of a real process (an overflow group) stays in it:
            // its lanes are the process's threads.
            TrackKind::Group if matches!(&parent, Some(Out::Process { pid, .. }) if *pid < PSEUDO_PID) => {
                parent.clone().unwrap()
            }
            TrackKind::Group => {
                // A sub-group is a pseudo-process of its own: "CPU details".
                let pid = self.next_pid;
                self.next_pid += 1;
                self.sink.meta_name(pid, pid, "process_name", t.name)?;
                self.sink.meta_sort(pid, pid, "process_sort_index", i64::from(t.rank))?;
                Out::Process { pid }
            }
            TrackKind::Slices => {
                let pid = parent_pid.ok_or_else(|| io::Error::other("a slice track without a parent"))?;
                let tid = self.next_tid;
                self.next_tid += 1;
                self.sink.meta_name(pid, tid, "thread_name", t.name)?;
                self.sink.meta_sort(pid, tid, "thread_sort_index", i64::from(t.rank))?;
                Out::Thread { pid, tid }
            }
            TrackKind::Counter(u) => {
                let pid = parent_pid.ok_or_else(|| io::Error::other("a counter track without a parent"))?;
                let (name, key) = naming::counter_parts(t.name, u.symbol());
                Out::Counter { pid, name: name.to_string(), key: key.to_string() }
            }
        };
        let i = t.id as usize;
        if self.tracks.len() <= i {
            self.tracks.resize(i + 1, None);
        }
        self.tracks[i] = Some(out);
        Ok(())
    }

    fn slice<A: Args>(&mut self, sl: &Slice<'_>, args: &A) -> io::Result<()> {
        let (pid, tid) = self.place(sl.track)?;
        let s = &mut self.sink;
        s.begin('X', pid, tid, Some(sl.ts))?;
        s.dur(sl.dur)?;
        match sl.name {
            Name::Str(n) => s.name(n)?,
            Name::Keyed(key, make) => {
                if self.names.len() >= MAX_NAMES && !self.names.contains_key(&key) {
                    self.names.clear();
                }
                s.name(self.names.entry(key).or_insert_with(make))?
            }
        }
        self.args(args)?;
        let s = &mut self.sink;
        s.end()?;
        for &id in sl.flows_out {
            s.flow('s', pid, tid, sl.ts, id)?;
        }
        // Ends go inside the slice, not at its start: the importer takes
        // events of one ts in file order, and a request that started in its
        // call's first ns has its record (so its flow end) written first.
        let mid = sl.ts + sl.dur / 2;
        for &id in sl.flows_in {
            s.flow('f', pid, tid, mid, id)?;
        }
        Ok(())
    }

    fn instant<A: Args>(&mut self, track: TrackId, ts: u64, name: Name<'_>, args: &A) -> io::Result<()> {
        let scope = match self.out(track)? {
            Out::Thread { .. } => "t",
            _ => "p",
        };
        let (pid, tid) = self.place(track)?;
        let s = &mut self.sink;
        s.begin('i', pid, tid, Some(ts))?;
        s.raw("s", scope)?;
        s.name(&name.to_string_now())?;
        self.args(args)?;
        self.sink.end()
    }

    fn counter(&mut self, track: TrackId, ts: u64, value: f64) -> io::Result<()> {
        let Out::Counter { pid, name, key } = self.out(track)? else {
            return Err(io::Error::other(format!("track {track} is not a counter")));
        };
        let (pid, name, key) = (*pid, name.clone(), key.clone());
        let s = &mut self.sink;
        s.begin('C', pid, pid, Some(ts))?;
        s.name(&name)?;
        s.arg_f64(&key, value)?;
        s.end()?;
        self.counters += 1;
        Ok(())
    }

    // Chrome JSON has no place for the kernel's scheduling: left out (docs/verdict.md).
    fn sched_switch(&mut self, _: &mltrace_model::SwitchEvent<'_>) -> io::Result<()> {
        Ok(())
    }
    fn sched_waking(&mut self, _: &mltrace_model::WakingEvent<'_>) -> io::Result<()> {
        Ok(())
    }

    fn end(&mut self, _end: Option<ClockAnchor>, trailer: Option<&Trailer>) -> io::Result<u64> {
        self.sink.end_file(&json!(trailer))
    }
}
