//! GPUs through NVML (nvml-wrapper): per device utilisation, memory,
//! power, temperature, clocks, PCIe and codec use; per process the samples
//! `nvidia-smi pmon` shows, and framebuffer used.
//!
//! NVML is loaded at run time from a path that can be set
//! (`--nvml-library`, `MLTRACE_NVML_LIBRARY`): machines keep it in odd
//! places, and the tests load a stand-in. A metric the library or the GPU
//! does not support is left out; a device whose calls start failing stops
//! being sampled (with a warning), and the rest of the recording goes on.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Arc;

use mltrace_log::CounterUnit;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

use crate::{Sample, SampleSink};

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
    "SM",
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
/// Per-process metrics (pmon's sm, mem, enc, dec, and fb).
const PROC_NAMES: [&str; 5] = ["SM", "memory", "encoder", "decoder", "framebuffer"];

struct Device {
    index: u32,
    group: Arc<str>,
    /// NVML's timestamp (µs) of the newest process sample already taken.
    last_seen: u64,
    stopped: bool,
    /// Metrics this device or library does not support (left out).
    unsupported: [bool; 12],
}

pub struct GpuSampler {
    nvml: Nvml,
    devices: Vec<Device>,
    names: Vec<Arc<str>>,
    proc_names: Vec<Arc<str>>,
    /// Why sampling of some device stopped, for the log's trailer.
    pub warnings: Vec<String>,
}

/// The outcome of trying to open NVML.
pub struct GpuOpen {
    pub sampler: Option<GpuSampler>,
    /// One line for the user when GPUs will not be recorded (auto mode).
    pub note: Option<String>,
    /// "GPU 0 (NVIDIA H100)", ...
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

pub fn open(cfg: &GpuConfig) -> Result<GpuOpen, GpuError> {
    let lib = library(cfg);
    let none = |note: Option<String>| GpuOpen { sampler: None, note, devices: vec![], library: lib.clone() };
    if cfg.mode == GpuMode::Off {
        return Ok(none(None));
    }
    let nvml = match Nvml::builder().lib_path(OsStr::new(&lib)).init() {
        Ok(n) => n,
        Err(e) => {
            if cfg.mode == GpuMode::Required {
                return Err(GpuError::Unavailable { library: lib, reason: e.to_string() });
            }
            return Ok(none(Some(format!("no GPU metrics: NVML not loaded from {lib} ({e})"))));
        }
    };
    let count = nvml.device_count().unwrap_or(0);
    if count == 0 {
        if cfg.mode == GpuMode::Required {
            return Err(GpuError::NoDevice { library: lib });
        }
        return Ok(none(Some(format!("no GPU metrics: NVML ({lib}) found no GPU"))));
    }
    let mut devices = Vec::new();
    for index in 0..count {
        let name = nvml.device_by_index(index).and_then(|d| d.name()).unwrap_or_else(|_| "unknown".into());
        devices.push(Device {
            index,
            group: Arc::from(format!("GPU {index} ({name})")),
            last_seen: 0,
            stopped: false,
            unsupported: [false; 12],
        });
    }
    let names = devices.iter().map(|d| d.group.to_string()).collect();
    Ok(GpuOpen {
        sampler: Some(GpuSampler {
            nvml,
            devices,
            names: DEVICE_NAMES.iter().map(|n| Arc::from(*n)).collect(),
            proc_names: PROC_NAMES.iter().map(|n| Arc::from(*n)).collect(),
            warnings: Vec::new(),
        }),
        note: None,
        devices: names,
        library: lib,
    })
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
    pub fn sample(&mut self, ts: u64, traced: &[u32], out: &mut SampleSink) {
        for d in self.devices.iter_mut().filter(|d| !d.stopped) {
            let dev = match self.nvml.device_by_index(d.index) {
                Ok(dev) => dev,
                Err(e) => {
                    d.stopped = true;
                    self.warnings.push(format!("{}: sampling stopped: {e}", d.group));
                    continue;
                }
            };
            let util = dev.utilization_rates().map_err(fail);
            let mem = dev.memory_info().map_err(fail);
            let pct = |v: u32| (f64::from(v), CounterUnit::Percent);
            let vals: [Result<(f64, CounterUnit), Fail>; 12] = [
                util.clone().map(|u| pct(u.gpu)),
                util.clone().map(|u| pct(u.memory)),
                mem.clone().map(|m| (m.used as f64, CounterUnit::Bytes)),
                mem.clone().map(|m| (m.total as f64, CounterUnit::Bytes)),
                dev.power_usage().map(|mw| (f64::from(mw) / 1000.0, CounterUnit::Watts)).map_err(fail),
                dev.temperature(TemperatureSensor::Gpu).map(|c| (f64::from(c), CounterUnit::Celsius)).map_err(fail),
                dev.clock_info(Clock::SM).map(|m| (f64::from(m), CounterUnit::Megahertz)).map_err(fail),
                dev.clock_info(Clock::Memory).map(|m| (f64::from(m), CounterUnit::Megahertz)).map_err(fail),
                dev.pcie_throughput(PcieUtilCounter::Receive)
                    .map(|k| (f64::from(k) * 1024.0, CounterUnit::BytesPerSec))
                    .map_err(fail),
                dev.pcie_throughput(PcieUtilCounter::Send)
                    .map(|k| (f64::from(k) * 1024.0, CounterUnit::BytesPerSec))
                    .map_err(fail),
                dev.encoder_utilization().map(|u| pct(u.utilization)).map_err(fail),
                dev.decoder_utilization().map(|u| pct(u.utilization)).map_err(fail),
            ];
            let mut failure = None;
            for (i, v) in vals.into_iter().enumerate() {
                match v {
                    Ok((value, unit)) => out.push(Sample {
                        ts,
                        group: d.group.clone(),
                        name: self.names[i].clone(),
                        unit,
                        pid: 0,
                        value,
                    }),
                    Err(Fail::Unsupported) => d.unsupported[i] = true,
                    Err(Fail::Error(e)) => failure = failure.or(Some(e)),
                }
            }
            // The core metric failing for another reason means the GPU or
            // the library is gone: stop here rather than log garbage.
            if let Err(Fail::Error(e)) = &util {
                d.stopped = true;
                self.warnings.push(format!("{}: sampling stopped: {e}", d.group));
                continue;
            }
            if let Some(e) = failure {
                self.warnings.push(format!("{}: a metric failed: {e}", d.group));
            }
            let owner = |pid: u32, name: &Arc<str>| -> (u32, Arc<str>) {
                if traced.contains(&pid) {
                    (pid, name.clone())
                } else {
                    (0, Arc::from(format!("pid {pid} {name}")))
                }
            };
            if let Ok(samples) = dev.process_utilization_stats(d.last_seen) {
                for s in samples.iter().filter(|s| s.timestamp > d.last_seen || d.last_seen == 0) {
                    for (i, v) in [s.sm_util, s.mem_util, s.enc_util, s.dec_util].into_iter().enumerate() {
                        let (pid, name) = owner(s.pid, &self.proc_names[i]);
                        out.push(Sample {
                            ts,
                            group: d.group.clone(),
                            name,
                            unit: CounterUnit::Percent,
                            pid,
                            value: f64::from(v),
                        });
                    }
                }
                d.last_seen = samples.iter().map(|s| s.timestamp).max().unwrap_or(d.last_seen).max(d.last_seen);
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
