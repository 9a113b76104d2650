//! Samplers for `mltrace record`: counters on the trace's own clock.
//!
//! - [`cpu`], [`memory`], [`disks`], [`network`]: machine-wide, from /proc
//!   (and /sys/class/infiniband).
//! - [`procs`]: each traced process.
//! - [`gpu`]: NVML devices and the processes on them.
//!
//! Samplers run on their own threads and hand batches of [`Sample`]s to
//! the recorder through a channel: the event path never waits for them.

pub mod cpu;
pub mod disks;
pub mod gpu;
pub mod memory;
pub mod network;
pub mod procs;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use mltrace_log::CounterUnit;

/// A /proc or /sys file's text, as `std::fs::read_to_string` gives it,
/// without that function's size hint: a statx and an lseek for every file
/// read, on files that all say they are empty (about a third of a
/// sampler round's syscalls).
pub(crate) fn read_text(path: impl AsRef<std::path::Path>) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::with_capacity(4096);
    std::fs::File::open(path)?.take(u64::MAX).read_to_string(&mut text)?;
    Ok(text)
}

/// One counter value, before it is interned into a log frame.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub ts: u64,
    pub group: Arc<str>,
    pub name: Arc<str>,
    pub unit: CounterUnit,
    pub pid: u32,
    pub value: f64,
}

pub type SampleSink = Vec<Sample>;

/// CLOCK_BOOTTIME, the clock of every record.
pub fn boottime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec; CLOCK_BOOTTIME always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn cpu_clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: as above; both CPU-time clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time this thread has used, in ns (to measure the samplers' cost).
pub fn thread_cpu_ns() -> u64 {
    cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time all of this process's threads have used, in ns.
pub fn process_cpu_ns() -> u64 {
    cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Calls `tick` every `interval` (on a fixed schedule, so slow ticks do not
/// drift the timeline) until `stop` is set; returns the CPU time it used.
pub fn every(interval: Duration, stop: &AtomicBool, mut tick: impl FnMut(u64) -> bool) -> u64 {
    let start = Instant::now();
    let mut next = start;
    loop {
        if !tick(boottime_ns()) {
            break;
        }
        next += interval;
        loop {
            if stop.load(Ordering::Relaxed) {
                return thread_cpu_ns();
            }
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
        }
    }
    thread_cpu_ns()
}

/// The /proc samplers on one thread: machine-wide counters, and the
/// processes `pids()` lists. Returns the CPU time the thread used.
pub fn run_proc_samplers(
    interval: Duration,
    pids: &dyn Fn() -> Vec<u32>,
    tx: &Sender<SampleSink>,
    stop: &AtomicBool,
) -> u64 {
    let (mut cpu, mut mem, mut disks, mut procs) =
        (cpu::CpuSampler::new(), memory::MemorySampler::new(), disks::DiskSampler::new(), procs::ProcSampler::new());
    let mut net = network::NetworkSampler::new();
    every(interval, stop, |ts| {
        let mut out = Vec::with_capacity(64);
        cpu.sample(ts, &mut out);
        mem.sample(ts, &mut out);
        disks.sample(ts, &mut out);
        net.sample(ts, &mut out);
        procs.sample(ts, &pids(), &mut out);
        out.is_empty() || tx.send(out).is_ok()
    })
}

/// The GPU sampler on its own thread (NVML calls can take milliseconds).
/// Counters go to `tx`, events (throttling, XID, ECC) to `events_tx`.
/// Returns its CPU time and the warnings of devices that stopped.
pub fn run_gpu_sampler(
    mut gpu: gpu::GpuSampler,
    interval: Duration,
    pids: &dyn Fn() -> Vec<u32>,
    tx: &Sender<SampleSink>,
    events_tx: &Sender<Vec<gpu::GpuEventSample>>,
    stop: &AtomicBool,
) -> (u64, Vec<String>) {
    let cpu = every(interval, stop, |ts| {
        let mut out = Vec::with_capacity(64);
        let mut events = Vec::new();
        gpu.sample(ts, &pids(), &mut out, &mut events);
        // Events first: the recorder reads counters, then events, so a
        // batch's events never wait behind the next batch's counters.
        (events.is_empty() || events_tx.send(events).is_ok()) && (out.is_empty() || tx.send(out).is_ok()) && !gpu.done()
    });
    (cpu, std::mem::take(&mut gpu.warnings))
}
