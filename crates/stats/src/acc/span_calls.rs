//! Under `--detail summary` a main thread's states before its latest
//! span are not known yet: a call's record comes when it returns, the
//! span that lays out the time the call covered comes at the thread's
//! next wake-up. A call split at its return would take the state the
//! last span left open (runnable after a wake-up) for all of it: a
//! checkpoint's writes, on a CPU, would read as waiting for one. So a
//! call that ends past what the spans have laid out waits here for the
//! span that covers it.

use std::collections::{HashMap, VecDeque};

use crate::acc::sched::CallKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub pid: u32,
    pub tid: u32,
    pub from: u64,
    pub to: u64,
    pub kind: CallKind,
}

/// Calls kept per thread. A thread that makes more between two spans
/// is one that is not switched out (spans come at switches): it is on a
/// CPU, the state its oldest calls are then split by.
const KEEP: usize = 4096;

#[derive(Default)]
pub struct SpanCalls {
    /// By main thread: up to when its spans have laid out its states.
    laid: HashMap<u32, u64>,
    waiting: HashMap<u32, VecDeque<Call>>,
}

impl SpanCalls {
    /// Thread `tid`'s span ended at `ts`: its states are known to there.
    /// The calls that ended by then, to split now.
    pub fn laid(&mut self, tid: u32, ts: u64) -> Vec<Call> {
        let to = self.laid.entry(tid).or_default();
        *to = (*to).max(ts);
        let to = *to;
        let Some(q) = self.waiting.get_mut(&tid) else { return Vec::new() };
        let mut due = Vec::new();
        while q.front().is_some_and(|c| c.to <= to) {
            due.extend(q.pop_front());
        }
        if q.is_empty() {
            self.waiting.remove(&tid);
        }
        due
    }

    /// Whether a call of thread `tid` that ended at `to` must wait: its
    /// time is not laid out yet (a full-detail log has no spans: one
    /// length check per call).
    #[inline]
    pub fn waits(&self, tid: u32, to: u64) -> bool {
        !self.laid.is_empty() && self.laid.get(&tid).is_some_and(|&laid| to > laid)
    }

    /// Keeps a call that [`waits`](Self::waits); returns the oldest
    /// kept past [`KEEP`], to split now.
    pub fn wait(&mut self, c: Call) -> Option<Call> {
        let q = self.waiting.entry(c.tid).or_default();
        q.push_back(c);
        if q.len() > KEEP {
            q.pop_front()
        } else {
            None
        }
    }

    /// Thread `tid` exits or the log ends: its calls still waiting, to
    /// split by what is known.
    pub fn end(&mut self, tid: u32) -> Vec<Call> {
        self.laid.remove(&tid);
        self.waiting.remove(&tid).map(Vec::from).unwrap_or_default()
    }

    /// Process `pid` ran a new program: its main thread's calls so far
    /// were the old one's.
    pub fn exec(&mut self, pid: u32) {
        self.waiting.remove(&pid);
    }

    pub fn threads(&self) -> Vec<u32> {
        self.waiting.keys().copied().collect()
    }
}
