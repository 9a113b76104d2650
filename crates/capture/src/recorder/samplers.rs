//! The counter samplers' threads: /proc, and NVML's GPUs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Duration;

use crossbeam_channel::Sender;
use mltrace_sample::gpu::{GpuEventSample, GpuSampler};
use mltrace_sample::SampleSink;

/// The sampler threads, running.
pub(super) struct Samplers<'scope> {
    proc_h: Option<ScopedJoinHandle<'scope, u64>>,
    gpu_h: Option<ScopedJoinHandle<'scope, (u64, Vec<String>)>>,
}

/// Starts the /proc samplers every `interval` (none without one) and the
/// GPU sampler (with `gpu`), sampling the processes `traced_pids` lists.
pub(super) fn start<'scope, 'env, P>(
    s: &'scope Scope<'scope, 'env>,
    interval: Option<Duration>,
    gpu: Option<GpuSampler>,
    traced_pids: P,
    samples_tx: Sender<SampleSink>,
    gpu_events_tx: Sender<Vec<GpuEventSample>>,
    stop_samplers: &'env AtomicBool,
) -> Samplers<'scope>
where
    P: Fn() -> Vec<u32> + Copy + Send + 'scope,
{
    let proc_h = interval.map(|iv| {
        let tx = samples_tx.clone();
        s.spawn(move || mltrace_sample::run_proc_samplers(iv, &traced_pids, &tx, stop_samplers))
    });
    let gpu_h = gpu.map(|g| {
        let tx = samples_tx.clone();
        let iv = interval.unwrap_or(Duration::from_millis(100));
        let events_tx = gpu_events_tx;
        s.spawn(move || mltrace_sample::run_gpu_sampler(g, iv, &traced_pids, &tx, &events_tx, stop_samplers))
    });
    drop(samples_tx);
    Samplers { proc_h, gpu_h }
}

impl Samplers<'_> {
    /// Stops them (their last batch still reaches the log) and waits:
    /// their CPU time and the GPU sampler's warnings.
    pub(super) fn stop(self, stop_samplers: &AtomicBool) -> (u64, Vec<String>) {
        stop_samplers.store(true, Ordering::Release);
        let mut sampler_cpu = self.proc_h.map(|h| h.join().expect("sampler thread panicked")).unwrap_or(0);
        let mut warnings = Vec::new();
        if let Some(h) = self.gpu_h {
            let (cpu, w) = h.join().expect("GPU sampler thread panicked");
            sampler_cpu += cpu;
            warnings = w;
        }
        (sampler_cpu, warnings)
    }
}
