//! GPM (GPU Performance Monitoring, Hopper and later): the driver computes
//! DCGM's profiling metrics (SM active, occupancy, tensor pipe, DRAM) between
//! two samples of the device's counters, so each tick takes a sample and asks
//! for the metrics since the previous one.

use mltrace_log::CounterUnit;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::{Device, GpmSample, Nvml};
use nvml_wrapper_sys::bindings::nvmlGpmSample_t;

/// NVML reports GPM's PCIe and NVLink rates in MiB/s.
const MIB: f64 = 1024.0 * 1024.0;

/// The metrics asked for: id, counter name, unit, factor to that unit.
pub const METRICS: [(GpmMetricId, &str, CounterUnit, f64); 8] = [
    (GpmMetricId::SmUtil, "SM active", CounterUnit::Percent, 1.0),
    (GpmMetricId::SmOccupancy, "SM occupancy", CounterUnit::Percent, 1.0),
    (GpmMetricId::AnyTensorUtil, "tensor active", CounterUnit::Percent, 1.0),
    (GpmMetricId::DramBwUtil, "DRAM bandwidth used", CounterUnit::Percent, 1.0),
    (GpmMetricId::PcieRxPerSec, "PCIe rx", CounterUnit::BytesPerSec, MIB),
    (GpmMetricId::PcieTxPerSec, "PCIe tx", CounterUnit::BytesPerSec, MIB),
    (GpmMetricId::NvlinkTotalRxPerSec, "NVLink rx", CounterUnit::BytesPerSec, MIB),
    (GpmMetricId::NvlinkTotalTxPerSec, "NVLink tx", CounterUnit::BytesPerSec, MIB),
];

/// A sample handle kept between ticks. The wrapper's `GpmSample` borrows
/// the `Nvml` it came from, which lives in the same sampler, so the handle
/// is kept raw and rewrapped (and so freed) through that same library.
struct Raw(nvmlGpmSample_t);

// SAFETY: a GPM sample is plain driver memory; only the sampler's thread
// touches it, one call at a time.
unsafe impl Send for Raw {}

#[derive(Default)]
pub struct Gpm {
    prev: Option<Raw>,
}

impl Gpm {
    /// Takes a sample; returns each metric of [`METRICS`] since the previous
    /// one (none on the first tick), each with its own outcome.
    pub fn sample(&mut self, nvml: &Nvml, dev: &Device) -> Result<Vec<Result<f64, NvmlError>>, NvmlError> {
        self.sample_from(nvml, dev.gpm_sample())
    }

    /// As [`Gpm::sample`], with the new sample taken by the caller (a MIG
    /// device's GPU instance is sampled on its parent).
    pub fn sample_from<'n>(
        &mut self,
        nvml: &'n Nvml,
        now: Result<GpmSample<'n>, NvmlError>,
    ) -> Result<Vec<Result<f64, NvmlError>>, NvmlError> {
        let now = now?;
        let Some(prev) = self.prev.take() else {
            self.prev = Some(Raw(now.into_handle()));
            return Ok(Vec::new());
        };
        // SAFETY: `prev` came from `into_handle` on a sample of this same
        // `nvml`, and nothing else holds it: rewrapping frees it once.
        let prev = unsafe { GpmSample::from_handle(nvml, prev.0) };
        let ids: Vec<GpmMetricId> = METRICS.iter().map(|m| m.0).collect();
        let got = gpm_metrics_get(nvml, &prev, &now, &ids);
        self.prev = Some(Raw(now.into_handle()));
        let got = got?;
        Ok(got.into_iter().zip(METRICS.iter()).map(|(r, m)| r.map(|r| r.value * m.3)).collect())
    }

    /// Frees the kept sample (the sampler is done with this device).
    pub fn free(&mut self, nvml: &Nvml) {
        if let Some(prev) = self.prev.take() {
            // SAFETY: as in `sample`.
            let _ = unsafe { GpmSample::from_handle(nvml, prev.0) }.free();
        }
    }
}
