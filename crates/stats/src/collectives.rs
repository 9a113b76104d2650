//! NCCL calls per process (rank) and operation: calls, bytes and the time
//! spent enqueueing them (the wait for a collective itself shows in the
//! CUDA calls that synchronise).

use std::collections::BTreeMap;

use mltrace_log::Collective;
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpTotals {
    pub calls: u64,
    pub bytes: u64,
    pub ns: u64,
    /// The rank in the communicator of the last call that knew it (-1: never).
    pub rank: i32,
    pub nranks: i32,
}

/// By (pid, op name).
#[derive(Default)]
pub struct Collectives(pub BTreeMap<(u32, &'static str), OpTotals>);

impl Collectives {
    pub fn add(&mut self, r: &Collective) {
        if r.op.is_group() {
            return;
        }
        let t = self.0.entry((r.pid, r.op.name())).or_insert(OpTotals { rank: -1, ..Default::default() });
        t.calls += 1;
        t.bytes += r.bytes;
        t.ns += r.dur;
        if r.rank >= 0 {
            (t.rank, t.nranks) = (r.rank, r.nranks);
        }
    }

    pub fn to_json(&self) -> Value {
        self.0
            .iter()
            .map(|(&(pid, op), t)| {
                json!({
                    "pid": pid,
                    "rank": (t.rank >= 0).then_some(t.rank),
                    "ranks": (t.rank >= 0).then_some(t.nranks),
                    "op": op,
                    "calls": t.calls,
                    "bytes": t.bytes,
                    "call_ns": t.ns,
                })
            })
            .collect()
    }
}
