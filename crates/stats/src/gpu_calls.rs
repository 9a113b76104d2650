//! CUDA driver calls per process and call: the ones that waited for the
//! GPU (recorded one by one, with their time) and the ones only counted in
//! the kernel (queries; launches when asked for).

use std::collections::BTreeMap;

use mltrace_log::{GpuCall, GpuCount};
use serde_json::{json, Value};

use crate::kind_tables::KindTable;
use crate::Stats;
use crate::{duration, table};
use mltrace_log::{Accept, Collective, Frame, GpuEvent, Record};
use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallTotals {
    pub calls: u64,
    /// Time inside them; `None` for calls only counted.
    pub ns: Option<u64>,
}

/// By (pid, call name).
#[derive(Default)]
pub struct GpuCalls(pub BTreeMap<(u32, &'static str), CallTotals>);

impl GpuCalls {
    pub fn call(&mut self, r: &GpuCall) {
        let t = self.0.entry((r.pid, r.call.name())).or_default();
        t.calls += 1;
        t.ns = Some(t.ns.unwrap_or(0) + r.dur);
    }

    pub fn count(&mut self, r: &GpuCount) {
        if r.count > 0 {
            self.0.entry((r.pid, r.call.name())).or_default().calls += r.count;
        }
    }
}

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

// What its records add to the figures (see [`mltrace_log::Accept`]).

impl Accept<GpuCall> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, _rec: &Record, r: GpuCall) {
        self.gpu_call(&r)
    }
}

impl Accept<Collective> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, _rec: &Record, r: Collective) {
        self.nccl_call(&r)
    }
}

impl Accept<GpuCount> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, _rec: &Record, r: GpuCount) {
        self.tables.gpu_calls.count(&r)
    }
}

impl Accept<GpuEvent> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, e: GpuEvent) {
        let gpu = self.on_host(mltrace_log::hosts::host_of(e.pid), f.str_lossy(e.group));
        match self.gpu_events.iter_mut().find(|(g, k, _)| *g == gpu && *k == e.kind) {
            Some((_, _, n)) => *n += 1,
            None => self.gpu_events.push((gpu.into_owned(), e.kind, 1)),
        }
    }
}
