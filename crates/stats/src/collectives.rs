//! NCCL calls per process (rank) and operation: calls, bytes and the time
//! spent enqueueing them (the wait for a collective itself shows in the
//! CUDA calls that synchronise).

use std::collections::{BTreeMap, HashMap};

use mltrace_log::Collective;
use serde_json::{json, Value};

use crate::kind_tables::KindTable;
use crate::{bytes, duration, table};
use std::fmt::Write as _;

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
}

impl KindTable for Collectives {
    const KEY: &'static str = "collectives";

    fn to_json(&self) -> Value {
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

    /// Per rank and operation.
    fn render(&self, o: &mut String, _top: usize, _who: &dyn Fn(u32) -> String) {
        if self.0.is_empty() {
            return;
        }
        let _ = writeln!(o, "\nNCCL calls (enqueued; their wait shows in the CUDA calls that synchronise):");
        let mut rows = vec![["pid", "rank", "op", "calls", "bytes", "in calls"].map(String::from).to_vec()];
        for (&(pid, op), t) in &self.0 {
            let rank = if t.rank >= 0 { format!("{} of {}", t.rank, t.nranks) } else { "-".into() };
            rows.push(vec![pid.to_string(), rank, op.to_string(), t.calls.to_string(), bytes(t.bytes), duration(t.ns)]);
        }
        o.push_str(&table(&rows));
    }
}

/// Arrivals kept per rank (8 bytes each).
pub const MAX_ARRIVALS: usize = 1 << 20;

/// When each process called its NCCL collectives, in order: the k-th
/// call of every rank is the same collective (NCCL requires it).
#[derive(Default)]
pub struct Arrivals {
    pub by_pid: HashMap<u32, Vec<u64>>,
    /// Calls past [`MAX_ARRIVALS`] of a rank, not kept.
    pub dropped: u64,
}

impl Arrivals {
    pub fn arrive(&mut self, pid: u32, ts: u64) {
        let v = self.by_pid.entry(pid).or_default();
        if v.len() < MAX_ARRIVALS {
            v.push(ts);
        } else {
            self.dropped += 1;
        }
    }
}
