//! GPUs through NVML (nvml-wrapper): per device utilisation, memory,
//! power, temperature, clocks, PCIe and codec use; per process the samples
//! `nvidia-smi pmon` shows, and framebuffer used. On GPUs with GPM (Hopper
//! and later) DCGM's profiling metrics too ([`gpm`]); on older ones the
//! NVLink counters NVML keeps as field values ([`fields`]). Clock
//! throttling, XID and ECC errors are events ([`events`]).
//!
//! NVML is loaded at run time from a path that can be set
//! (`--nvml-library`, `MLTRACE_NVML_LIBRARY`): machines keep it in odd
//! places, and the tests load a stand-in. A metric the library or the GPU
//! does not support is left out; a device whose calls start failing stops
//! being sampled (with a warning), and the rest of the recording goes on.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Arc;

use mltrace_log::{CounterUnit, GPU_UTILISATION};
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

use crate::{Sample, SampleSink};

mod events;
mod fields;
mod gpm;
mod mig;
mod pmon;

pub use events::{GpuEventSample, THROTTLE_REASONS};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuMode {
    /// Record GPUs when NVML loads; say in one line when it does not.
    Auto,
    Off,
    /// Fail up front when NVML does not load or finds no GPU.
    Required,
}

#[derive(Clone, Debug)]
pub struct GpuConfig {
    pub mode: GpuMode,
    /// NVML library to load; default `MLTRACE_NVML_LIBRARY`, else libnvidia-ml.so.1.
    pub library: Option<PathBuf>,
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig { mode: GpuMode::Auto, library: None }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("--gpu required: NVML could not be loaded from {library}: {reason}")]
    Unavailable { library: String, reason: String },
    #[error("--gpu required: NVML ({library}) found no GPU")]
    NoDevice { library: String },
}

/// Metrics of one device, in [`DEVICE_NAMES`] order.
const DEVICE_NAMES: [&str; 12] = [
    GPU_UTILISATION,
    "memory",
    "framebuffer used",
    "framebuffer total",
    "power",
    "temperature",
    "SM clock",
    "memory clock",
    "PCIe rx",
    "PCIe tx",
    "encoder",
    "decoder",
];
/// Indexes of NVML's own PCIe counters, which GPM's replace.
const PCIE: [usize; 2] = [8, 9];
/// Per-process metrics (pmon's sm, mem, enc, dec, and fb).
const PROC_NAMES: [&str; 5] = [GPU_UTILISATION, "memory", "encoder", "decoder", "framebuffer"];

/// The metrics a GPU gets beyond NVML's basic ones, as `doctor` names them.
enum MetricSet {
    Gpm(gpm::Gpm),
    Fields(fields::Fields),
}

impl MetricSet {
    fn describe(&self) -> String {
        let names = |n: &mut dyn Iterator<Item = &str>| n.collect::<Vec<_>>().join(", ");
        match self {
            MetricSet::Gpm(_) => format!("GPM metrics ({})", names(&mut gpm::METRICS.iter().map(|m| m.1))),
            MetricSet::Fields(_) => format!(
                "NVML metrics, no GPM ({GPU_UTILISATION}, {} from field values)",
                names(&mut fields::FIELDS.iter().map(|f| f.1))
            ),
        }
    }
}

struct Device {
    index: u32,
    group: Arc<str>,
    /// The per-process samples taken so far.
    pmon: pmon::ProcSamples,
    stopped: bool,
    /// Metrics this device or library does not support (left out).
    unsupported: [bool; 12],
    set: MetricSet,
    events: events::Events,
    /// A MIG device: where it is (`index` is then its parent's).
    mig: Option<mig::Mig>,
}

pub struct GpuSampler {
    nvml: Nvml,
    devices: Vec<Device>,
    names: Vec<Arc<str>>,
    proc_names: Vec<Arc<str>>,
    traced: RecentPids,
    /// Why sampling of some device stopped, for the log's trailer.
    pub warnings: Vec<String>,
}

/// The outcome of trying to open NVML.
pub struct GpuOpen {
    pub sampler: Option<GpuSampler>,
    /// Why GPUs will not be recorded (auto mode), in full: what `doctor` shows.
    pub note: Option<String>,
    /// The same as one short line for `record`, whose every run on a
    /// machine without a driver says it.
    pub brief: Option<String>,
    /// "GPU 0 (NVIDIA H100): GPM metrics (...)", ...: each GPU and the
    /// metric set it gets.
    pub devices: Vec<String>,
    pub library: String,
}

fn library(cfg: &GpuConfig) -> String {
    cfg.library
        .as_ref()
        .map(|p| p.display().to_string())
        .or_else(|| std::env::var("MLTRACE_NVML_LIBRARY").ok())
        .unwrap_or_else(|| "libnvidia-ml.so.1".into())
}

/// The library is not there at all (no driver installed), as opposed to
/// one that is there but fails to load or start.
fn library_missing(e: &NvmlError) -> bool {
    matches!(e, NvmlError::LibloadingError(_)) && e.to_string().contains("No such file or directory")
}

pub fn open(cfg: &GpuConfig) -> Result<GpuOpen, GpuError> {
    let lib = library(cfg);
    let none = |note: Option<String>, brief: Option<String>| GpuOpen {
        sampler: None,
        brief: brief.or_else(|| note.clone()),
        note,
        devices: vec![],
        library: lib.clone(),
    };
    if cfg.mode == GpuMode::Off {
        return Ok(none(None, None));
    }
    let nvml = match Nvml::builder().lib_path(OsStr::new(&lib)).init() {
        Ok(n) => n,
        Err(e) => {
            if cfg.mode == GpuMode::Required {
                return Err(GpuError::Unavailable { library: lib, reason: e.to_string() });
            }
            let note = format!("no GPU metrics: NVML not loaded from {lib} ({e})");
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            let brief = if library_missing(&e) {
                format!("no NVIDIA driver ({lib} not found): no GPU metrics; `mltrace doctor` says more")
            } else {
                format!("no GPU metrics: NVML ({lib}) did not load: {first}; `mltrace doctor` says more")
            };
            return Ok(none(Some(note), Some(brief)));
        }
    };
    let count = nvml.device_count().unwrap_or(0);
    if count == 0 {
        if cfg.mode == GpuMode::Required {
            return Err(GpuError::NoDevice { library: lib });
        }
        return Ok(none(Some(format!("no GPU metrics: NVML ({lib}) found no GPU")), None));
    }
    let mut devices = Vec::new();
    for index in 0..count {
        let dev = nvml.device_by_index(index);
        let name = dev.as_ref().ok().and_then(|d| d.name().ok()).unwrap_or_else(|| "unknown".into());
        let events = dev.as_ref().map(|d| events::Events::open(&nvml, d)).unwrap_or_default();
        // GPM answers NotSupported (or is missing from an old library)
        // before Hopper.
        let set = match dev.and_then(|d| d.gpm_support()) {
            Ok(true) => MetricSet::Gpm(gpm::Gpm::default()),
            _ => MetricSet::Fields(fields::Fields::default()),
        };
        devices.push(Device {
            index,
            group: Arc::from(format!("GPU {index} ({name})")),
            pmon: pmon::ProcSamples::default(),
            stopped: false,
            unsupported: [false; 12],
            set,
            events,
            mig: None,
        });
    }
    // MIG devices after the GPUs, each a device of its own.
    for p in 0..count {
        let Ok(parent) = nvml.device_by_index(p) else { continue };
        let parent_gpm = parent.gpm_support().unwrap_or(false);
        for (m, dev) in mig::devices(&nvml, &parent, p) {
            let name = dev.name().unwrap_or_else(|_| "unknown".into());
            let set = if parent_gpm && m.gpu_instance.is_some() {
                MetricSet::Gpm(gpm::Gpm::default())
            } else {
                MetricSet::Fields(fields::Fields::default())
            };
            devices.push(Device {
                index: p,
                group: Arc::from(format!("GPU {p} MIG {} ({name})", m.index)),
                pmon: pmon::ProcSamples::default(),
                stopped: false,
                unsupported: [false; 12],
                set,
                events: events::Events::default(),
                mig: Some(m),
            });
        }
    }
    let names = devices.iter().map(|d| format!("{}: {}", d.group, d.set.describe())).collect();
    Ok(GpuOpen {
        sampler: Some(GpuSampler {
            nvml,
            devices,
            names: DEVICE_NAMES.iter().map(|n| Arc::from(*n)).collect(),
            proc_names: PROC_NAMES.iter().map(|n| Arc::from(*n)).collect(),
            traced: RecentPids::default(),
            warnings: Vec::new(),
        }),
        note: None,
        brief: None,
        devices: names,
        library: lib,
    })
}

/// The pids traced now or a moment ago: the driver lists a process for a
/// while after it exits, and its last samples belong to it, not to an
/// anonymous "pid N" track beside the GPU.
#[derive(Default)]
struct RecentPids(HashMap<u32, u64>);

impl RecentPids {
    const GRACE_NS: u64 = 10_000_000_000;

    fn update(&mut self, ts: u64, traced: &[u32]) {
        for &p in traced {
            self.0.insert(p, ts);
        }
        self.0.retain(|_, seen| ts.saturating_sub(*seen) <= Self::GRACE_NS);
    }

    fn contains(&self, pid: u32) -> bool {
        self.0.contains_key(&pid)
    }
}

/// Why a metric could not be read.
#[derive(Clone, Debug)]
enum Fail {
    /// The library or device simply does not have it.
    Unsupported,
    Error(String),
}

fn fail(e: NvmlError) -> Fail {
    match e {
        NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) | NvmlError::FunctionNotFound => Fail::Unsupported,
        e => Fail::Error(e.to_string()),
    }
}

impl GpuSampler {
    /// Samples every device; `traced` are the pids being recorded (their
    /// per-GPU counters go to their process, others stay with the GPU).
    /// Events (throttling, XID, ECC) go to `events`.
    pub fn sample(&mut self, ts: u64, traced: &[u32], out: &mut SampleSink, events: &mut Vec<GpuEventSample>) {
        self.traced.update(ts, traced);
        for d in self.devices.iter_mut().filter(|d| !d.stopped) {
            let (parent, dev) = match &d.mig {
                None => self.nvml.device_by_index(d.index).map(|dev| (None, dev)),
                Some(m) => mig::handle(&self.nvml, m).map(|(p, dev)| (Some(p), dev)),
            }
            .map_or_else(|e| (None, Err(e)), |(p, dev)| (p, Ok(dev)));
            let dev = match dev {
                Ok(dev) => dev,
                Err(e) => {
                    stop(d, &self.nvml, &mut self.warnings, &e.to_string());
                    continue;
                }
            };
            let util = dev.utilization_rates().map_err(fail);
            let mem = dev.memory_info().map_err(fail);
            let pct = |v: u32| (f64::from(v), CounterUnit::Percent);
            let gpm = matches!(d.set, MetricSet::Gpm(_));
            let pcie = |c: PcieUtilCounter| -> Result<(f64, CounterUnit), Fail> {
                if gpm {
                    return Err(Fail::Unsupported); // GPM's own PCIe rates replace these
                }
                dev.pcie_throughput(c).map(|k| (f64::from(k) * 1024.0, CounterUnit::BytesPerSec)).map_err(fail)
            };
            let vals: [Result<(f64, CounterUnit), Fail>; 12] = [
                util.clone().map(|u| pct(u.gpu)),
                util.clone().map(|u| pct(u.memory)),
                mem.clone().map(|m| (m.used as f64, CounterUnit::Bytes)),
                mem.clone().map(|m| (m.total as f64, CounterUnit::Bytes)),
                dev.power_usage().map(|mw| (f64::from(mw) / 1000.0, CounterUnit::Watts)).map_err(fail),
                dev.temperature(TemperatureSensor::Gpu).map(|c| (f64::from(c), CounterUnit::Celsius)).map_err(fail),
                dev.clock_info(Clock::SM).map(|m| (f64::from(m), CounterUnit::Megahertz)).map_err(fail),
                dev.clock_info(Clock::Memory).map(|m| (f64::from(m), CounterUnit::Megahertz)).map_err(fail),
                pcie(PcieUtilCounter::Receive),
                pcie(PcieUtilCounter::Send),
                dev.encoder_utilization().map(|u| pct(u.utilization)).map_err(fail),
                dev.decoder_utilization().map(|u| pct(u.utilization)).map_err(fail),
            ];
            debug_assert!(PCIE.iter().all(|&i| DEVICE_NAMES[i].starts_with("PCIe")));
            let mut failure = None;
            // A value that is not a number (GPM gave NaN once on an H100,
            // with success) is left out, never drawn or averaged.
            let push = |out: &mut SampleSink, name: Arc<str>, value: f64, unit: CounterUnit| {
                if value.is_finite() {
                    out.push(Sample { ts, group: d.group.clone(), name, unit, pid: 0, value })
                }
            };
            for (i, v) in vals.into_iter().enumerate() {
                match v {
                    Ok((value, unit)) => push(out, self.names[i].clone(), value, unit),
                    Err(Fail::Unsupported) => d.unsupported[i] = true,
                    Err(Fail::Error(e)) => failure = failure.or(Some(e)),
                }
            }
            // The core metric failing for another reason means the GPU or
            // the library is gone: stop here rather than log garbage.
            if let Err(Fail::Error(e)) = &util {
                stop(d, &self.nvml, &mut self.warnings, e);
                continue;
            }
            // Profiling metrics (GPM) or field counters: each value as the
            // library gave it, in the unit the counter says.
            let mut lost_gpm = false;
            match &mut d.set {
                MetricSet::Gpm(g) => match match (&parent, &d.mig) {
                    (Some(p), Some(m)) => g.sample_from(&self.nvml, mig::gpm_sample(p, m)),
                    _ => g.sample(&self.nvml, &dev),
                } {
                    Ok(vals) => {
                        for (v, m) in vals.into_iter().zip(gpm::METRICS.iter()) {
                            match v.map_err(fail) {
                                Ok(value) => push(out, Arc::from(m.1), value, m.2),
                                Err(Fail::Unsupported) => {}
                                Err(Fail::Error(e)) => failure = failure.or(Some(e)),
                            }
                        }
                    }
                    Err(e) => match fail(e) {
                        // GPM went away (MIG mode turned on): fall back.
                        Fail::Unsupported => lost_gpm = true,
                        Fail::Error(e) => failure = failure.or(Some(e)),
                    },
                },
                MetricSet::Fields(f) => match f.sample(&self.nvml, &dev) {
                    Ok(vals) => {
                        for (v, fl) in vals.into_iter().zip(fields::FIELDS.iter()) {
                            match v.map_err(fail) {
                                Ok(Some(rate)) => push(out, Arc::from(fl.1), rate, CounterUnit::BytesPerSec),
                                Ok(None) | Err(Fail::Unsupported) => {}
                                Err(Fail::Error(e)) => failure = failure.or(Some(e)),
                            }
                        }
                    }
                    Err(e) => {
                        if let Fail::Error(e) = fail(e) {
                            failure = failure.or(Some(e));
                        }
                    }
                },
            }
            if let Some(e) = d.events.sample(&self.nvml, &dev, ts, &d.group, events) {
                failure = failure.or(Some(e.to_string()));
            }
            if lost_gpm {
                if let MetricSet::Gpm(g) = &mut d.set {
                    g.free(&self.nvml);
                }
                d.set = MetricSet::Fields(fields::Fields::default());
                self.warnings.push(format!("{}: GPM stopped answering: {}", d.group, d.set.describe()));
            }
            if let Some(e) = failure {
                self.warnings.push(format!("{}: a metric failed: {e}", d.group));
            }
            let owner = |pid: u32, name: &Arc<str>| -> (u32, Arc<str>) {
                if self.traced.contains(pid) {
                    (pid, name.clone())
                } else {
                    (0, Arc::from(format!("pid {pid} {name}")))
                }
            };
            // pmon's columns: each process's share of the sample period in
            // which its kernels ran, its memory reads and writes, its codec use.
            if let Ok(samples) = dev.process_utilization_stats(d.pmon.ask_from()) {
                let samples =
                    samples.iter().map(|s| (s.pid, s.timestamp, [s.sm_util, s.mem_util, s.enc_util, s.dec_util]));
                for u in d.pmon.take(samples) {
                    for (i, value) in u.values.into_iter().enumerate() {
                        let (pid, name) = owner(u.pid, &self.proc_names[i]);
                        out.push(Sample { ts, group: d.group.clone(), name, unit: CounterUnit::Percent, pid, value });
                    }
                }
            }
            let mut procs = dev.running_compute_processes().unwrap_or_default();
            procs.extend(dev.running_graphics_processes().unwrap_or_default());
            let mut seen: Vec<u32> = Vec::new();
            for p in procs {
                if seen.contains(&p.pid) {
                    continue;
                }
                seen.push(p.pid);
                if let UsedGpuMemory::Used(bytes) = p.used_gpu_memory {
                    let (pid, name) = owner(p.pid, &self.proc_names[4]);
                    out.push(Sample {
                        ts,
                        group: d.group.clone(),
                        name,
                        unit: CounterUnit::Bytes,
                        pid,
                        value: bytes as f64,
                    });
                }
            }
        }
    }

    /// True once no device is sampled any more.
    pub fn done(&self) -> bool {
        self.devices.iter().all(|d| d.stopped)
    }
}

/// Stops sampling `d` for good, saying why.
fn stop(d: &mut Device, nvml: &Nvml, warnings: &mut Vec<String>, why: &str) {
    d.stopped = true;
    if let MetricSet::Gpm(g) = &mut d.set {
        g.free(nvml);
    }
    d.events.free(nvml);
    warnings.push(format!("{}: sampling stopped: {why}", d.group));
}

impl Drop for GpuSampler {
    /// GPM samples are the driver's memory: give them back before NVML
    /// shuts down (the `nvml` field drops after this).
    fn drop(&mut self) {
        for d in &mut self.devices {
            if let MetricSet::Gpm(g) = &mut d.set {
                g.free(&self.nvml);
            }
            d.events.free(&self.nvml);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RecentPids;

    #[test]
    fn a_process_stays_traced_for_a_while_after_it_leaves_the_list() {
        let s = 1_000_000_000;
        let mut r = RecentPids::default();
        r.update(0, &[7, 8]);
        r.update(5 * s, &[8]);
        assert!(r.contains(7) && r.contains(8));
        r.update(10 * s, &[8]);
        assert!(r.contains(7), "10 s after its last listing");
        r.update(10 * s + 1, &[8]);
        assert!(!r.contains(7) && r.contains(8));
        assert!(!r.contains(9));
    }
}
