//! What a GPU reports at an instant: its clocks held back (NVML's clock
//! event reasons, when they change), XID errors (an NVML event set, read
//! without waiting at each sample) and ECC errors (the volatile counters
//! going up). Each becomes a [`GpuEventSample`], an instant on the GPU's track.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use mltrace_log::GpuEventKind;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, EventSet, Nvml};
use nvml_wrapper_sys::bindings::nvmlEventSet_t;

/// One event, before it is interned into a log frame.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuEventSample {
    pub ts: u64,
    pub group: Arc<str>,
    pub kind: GpuEventKind,
    pub code: u64,
}

/// The clock event reasons that mean the GPU is held back by its state:
/// software power cap, hardware slowdown, sync boost, software and
/// hardware thermal slowdown, power brake. Not idle, not a clock setting.
pub const THROTTLE_REASONS: u64 = 0x4 | 0x8 | 0x10 | 0x20 | 0x40 | 0x80;

/// An XID event set kept between samples (the wrapper's `EventSet`
/// borrows the `Nvml` that lives beside it), freed through that library.
struct RawSet(nvmlEventSet_t);

// SAFETY: an NVML event set is used by the sampler's thread only.
unsafe impl Send for RawSet {}

#[derive(Default)]
pub struct Events {
    /// Reasons at the previous sample (masked to [`THROTTLE_REASONS`]).
    reasons: u64,
    /// Volatile ECC totals (corrected, uncorrected) at the previous sample.
    ecc: [Option<u64>; 2],
    xid: Option<RawSet>,
}

/// At most this many XID events are read per sample (the rest next time).
const XID_PER_SAMPLE: usize = 64;

impl Events {
    /// Registers `dev` for XID events where the driver has them.
    pub fn open(nvml: &Nvml, dev: &Device) -> Events {
        let xid = nvml
            .create_event_set()
            .ok()
            .and_then(|set| dev.register_events(EventTypes::CRITICAL_XID_ERROR, set).ok())
            // SAFETY: the handle stays valid until `free` releases it.
            .map(|set| RawSet(unsafe { ManuallyDrop::new(set).handle() }));
        Events { xid, ..Default::default() }
    }

    /// This sample's events of `dev` into `out`; the first error that is
    /// not "not supported", if any.
    pub fn sample(
        &mut self,
        nvml: &Nvml,
        dev: &Device,
        ts: u64,
        group: &Arc<str>,
        out: &mut Vec<GpuEventSample>,
    ) -> Option<NvmlError> {
        let mut failure = None;
        let mut push = |kind, code| out.push(GpuEventSample { ts, group: group.clone(), kind, code });
        match dev.current_throttle_reasons() {
            Ok(r) => {
                let r = r.bits() & THROTTLE_REASONS;
                if r != self.reasons {
                    push(GpuEventKind::Throttle, r);
                    self.reasons = r;
                }
            }
            Err(e) => failure = failure.or(error(e)),
        }
        let kinds = [
            (MemoryError::Corrected, GpuEventKind::EccCorrected),
            (MemoryError::Uncorrected, GpuEventKind::EccUncorrected),
        ];
        for ((mem, kind), prev) in kinds.into_iter().zip(self.ecc.iter_mut()) {
            match dev.total_ecc_errors(mem, EccCounter::Volatile) {
                Ok(n) => {
                    if let Some(p) = *prev {
                        if n > p {
                            push(kind, n - p);
                        }
                    }
                    *prev = Some(n);
                }
                Err(e) => failure = failure.or(error(e)),
            }
        }
        if let Some(raw) = &self.xid {
            // SAFETY: `raw` came from a set of this `nvml` and stays ours.
            let set = ManuallyDrop::new(unsafe { EventSet::new(raw.0, nvml) });
            for _ in 0..XID_PER_SAMPLE {
                match set.wait(0) {
                    Ok(ev) => {
                        if let Some(x) = ev.event_data {
                            push(GpuEventKind::Xid, if let XidError::Value(v) = x { v } else { u64::MAX });
                        }
                    }
                    Err(NvmlError::Timeout) => break,
                    Err(e) => {
                        failure = failure.or(error(e));
                        break;
                    }
                }
            }
        }
        failure
    }

    /// Releases the XID event set (the device is done with).
    pub fn free(&mut self, nvml: &Nvml) {
        if let Some(raw) = self.xid.take() {
            // SAFETY: as in `sample`; released once.
            let _ = unsafe { EventSet::new(raw.0, nvml) }.release_events();
        }
    }
}

/// An error worth a warning: not "the GPU does not have it".
fn error(e: NvmlError) -> Option<NvmlError> {
    match e {
        NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) | NvmlError::FunctionNotFound => None,
        e => Some(e),
    }
}
