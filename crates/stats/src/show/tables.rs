//! The record kinds' own tables ([`crate::acc::kind_tables`]) as text
//! and JSON: CUDA calls, NCCL calls, socket peers, metadata calls.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::acc::collectives::Collectives;
use crate::acc::gpu_calls::GpuCalls;
use crate::acc::kind_tables::KindTable;
use crate::acc::metadata::Metadata;
use crate::acc::peers::Peers;
use crate::show::render::table;
use crate::{bytes, duration, shorten};

impl KindTable for GpuCalls {
    const KEY: &'static str = "gpu_calls";

    fn to_json(&self) -> Value {
        self.0
            .iter()
            .map(|(&(pid, call), t)| json!({ "pid": pid, "call": call, "calls": t.calls, "call_ns": t.ns }))
            .collect()
    }

    /// Per process and call.
    fn render(&self, o: &mut String, _top: usize, _who: &dyn Fn(u32) -> String) {
        if self.0.is_empty() {
            return;
        }
        let _ = writeln!(o, "\nCUDA driver calls (queries and launches only counted):");
        let mut rows = vec![["pid", "call", "calls", "in calls"].map(String::from).to_vec()];
        for (&(pid, call), t) in &self.0 {
            let ns = t.ns.map_or_else(|| "-".into(), duration);
            rows.push(vec![pid.to_string(), call.to_string(), t.calls.to_string(), ns]);
        }
        o.push_str(&table(&rows));
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

impl KindTable for Peers {
    const KEY: &'static str = "peers";

    fn to_json(&self) -> Value {
        self.sorted()
            .into_iter()
            .map(|(a, p)| json!({"address": a, "send_bytes": p.send_bytes, "recv_bytes": p.recv_bytes, "calls": p.calls}))
            .collect::<Vec<_>>()
            .into()
    }

    /// The `top` peers by bytes moved.
    fn render(&self, o: &mut String, top: usize, _who: &dyn Fn(u32) -> String) {
        let peers = self.sorted();
        if peers.is_empty() {
            return;
        }
        let _ = writeln!(o, "\nsockets, the traced processes' peers (send and receive calls):");
        let mut rows = vec![["peer", "received", "sent", "calls"].iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        for (a, p) in peers.iter().take(top) {
            rows.push(vec![a.to_string(), bytes(p.recv_bytes), bytes(p.send_bytes), p.calls.to_string()]);
        }
        o.push_str(&table(&rows));
        if peers.len() > top {
            let _ = writeln!(o, "  ({} more)", peers.len() - top);
        }
    }
}

impl KindTable for Metadata {
    const KEY: &'static str = "metadata";

    fn to_json(&self) -> Value {
        self.sorted()
            .into_iter()
            .map(|(pid, dir, m)| {
                let (slow_ns, slow_op, slow_path) = match &m.slowest {
                    Some((ns, op, p)) => (Value::from(*ns), Value::from(*op), Value::from(p.as_str())),
                    None => (Value::Null, Value::Null, Value::Null),
                };
                json!({
                    "pid": pid,
                    "directory": dir,
                    "calls": m.calls,
                    "failed": m.failed,
                    "time_ns": m.ns,
                    "ops": m.ops,
                    "slowest_ns": slow_ns,
                    "slowest_op": slow_op,
                    "slowest_path": slow_path,
                })
            })
            .collect()
    }

    /// The `top` directories by time.
    fn render(&self, o: &mut String, top: usize, who: &dyn Fn(u32) -> String) {
        if self.is_empty() {
            return;
        }
        let _ =
            writeln!(o, "\nmetadata calls by process and directory (stat, getdents64, rename...), most time first:");
        let mut rows = vec![["directory", "process", "calls", "failed", "time", "slowest"].map(String::from).to_vec()];
        let all = self.sorted();
        for (pid, dir, m) in all.iter().take(top) {
            let slowest = m.slowest.as_ref().map_or(String::new(), |(ns, op, _)| format!("{} ({op})", duration(*ns)));
            rows.push(vec![
                shorten(dir, 60),
                who(*pid),
                m.calls.to_string(),
                m.failed.to_string(),
                duration(m.ns),
                slowest,
            ]);
        }
        o.push_str(&table(&rows));
        if all.len() > top {
            let _ = writeln!(o, "  ({} more)", all.len() - top);
        }
    }
}
