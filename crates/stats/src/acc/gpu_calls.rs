//! CUDA driver calls per process and call: the ones that waited for the
//! GPU (recorded one by one, with their time) and the ones only counted in
//! the kernel (queries; launches when asked for).

use std::collections::BTreeMap;

use mltrace_log::{GpuCall, GpuCount};

use crate::{sched, Stats};
use mltrace_log::{Accept, Collective, Frame, GpuApi, GpuEvent, Record};

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

// What its records add to the figures (see [`mltrace_log::Accept`]).

impl Stats {
    /// A CUDA call that waited for the GPU: for the other ranks, when an
    /// NCCL collective it covers was outstanding (a sync call covers the
    /// stream it names, or every stream when it names none or is not a
    /// stream sync: the context, an event, a blocking copy).
    fn gpu_call(&mut self, r: &GpuCall) {
        self.proc(r.pid).gpu_wait_ns += r.dur;
        self.tables.gpu_calls.call(r);
        let mut kind = sched::CallKind::Gpu;
        if let Some(streams) = self.nccl_outstanding.get_mut(&r.pid) {
            let before = streams.len();
            if r.call == GpuApi::StreamSynchronize && r.stream != 0 {
                streams.retain(|&s| s != r.stream);
            } else {
                streams.clear();
            }
            if streams.len() < before {
                kind = sched::CallKind::Collective;
            }
        }
        if kind == sched::CallKind::Collective {
            self.sched.episode(r.pid, r.ts, r.ts.saturating_add(r.dur));
        }
        self.sched.call(r.pid, r.tid, r.ts, r.ts.saturating_add(r.dur), kind);
    }

    /// An NCCL call: a rank arriving at a collective.
    fn nccl_call(&mut self, r: &Collective) {
        self.tables.collectives.add(r);
        if r.op.is_group() {
            return;
        }
        self.arrivals.arrive(r.pid, r.ts);
        let streams = self.nccl_outstanding.entry(r.pid).or_default();
        if !streams.contains(&r.stream) && streams.len() < 64 {
            streams.push(r.stream);
        }
    }
}

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

/// A CUDA call on `pid`'s main thread that waited for the GPU from `ts`
/// for `dur` ns: the other modules' tests' GPU wait.
#[cfg(test)]
pub(crate) fn gpu_wait(ts: u64, dur: u64, pid: u32) -> Record {
    Record::GpuCall(GpuCall { ts, dur, pid, tid: pid, ..Default::default() })
}
