//! CUDA driver calls per process and call: the ones that waited for the
//! GPU (recorded one by one, with their time) and the ones only counted in
//! the kernel (queries; launches when asked for).

use std::collections::BTreeMap;

use mltrace_log::{GpuCall, GpuCount};
use serde_json::{json, Value};

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

    pub fn to_json(&self) -> Value {
        self.0
            .iter()
            .map(|(&(pid, call), t)| json!({ "pid": pid, "call": call, "calls": t.calls, "call_ns": t.ns }))
            .collect()
    }
}
