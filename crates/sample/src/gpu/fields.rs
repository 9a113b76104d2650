//! NVML field values for GPUs without GPM (before Hopper): NVLink traffic,
//! which they count in KiB since boot, as rates.
//!
//! Through the wrapper's `sys` bindings on the same loaded library: the
//! wrapper's `field_values_for` cannot set a field's scope, and NVLink
//! counters are per link unless the scope asks for all links summed.

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{field_id, nvmlFieldValue_t};

/// The fields read: id, counter name (as GPM's rates, in B/s).
pub const FIELDS: [(u32, &str); 2] = [
    (field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, "NVLink rx"),
    (field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, "NVLink tx"),
];
/// A field's scope that sums all links.
const ALL_LINKS: u32 = u32::MAX;

#[derive(Default)]
pub struct Fields {
    /// Each field's previous (NVML timestamp µs, KiB), to make rates.
    prev: [Option<(i64, u64)>; 2],
}

impl Fields {
    /// Reads the counters; returns each field's rate in B/s since the
    /// previous read (`Ok(None)` on the first read or when the clock did
    /// not move), or why it could not be read.
    pub fn sample(&mut self, nvml: &Nvml, dev: &Device) -> Result<Vec<Result<Option<f64>, NvmlError>>, NvmlError> {
        let sym = nvml.lib().nvmlDeviceGetFieldValues.as_ref().map_err(|_| NvmlError::FunctionNotFound)?;
        let mut vals: Vec<nvmlFieldValue_t> = FIELDS
            .iter()
            .map(|&(id, _)| {
                // SAFETY: a plain C struct; all zeroes is a valid request.
                let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
                v.fieldId = id;
                v.scopeId = ALL_LINKS;
                v
            })
            .collect();
        // SAFETY: `vals` holds FIELDS.len() requests, the device handle is
        // live for `dev`'s lifetime, and `sym` comes from the loaded library.
        let rc = unsafe { sym(dev.handle(), vals.len() as i32, vals.as_mut_ptr()) };
        nvml_try(rc)?;
        Ok(vals
            .iter()
            .zip(self.prev.iter_mut())
            .map(|(v, prev)| {
                nvml_try(v.nvmlReturn)?;
                // SAFETY: the union member read is the one valueType names.
                let kib = unsafe {
                    match v.valueType {
                        1 => u64::from(v.value.uiVal),
                        2 => v.value.ulVal,
                        3 => v.value.ullVal,
                        4 => v.value.sllVal.max(0) as u64,
                        _ => return Err(NvmlError::UnexpectedVariant(v.valueType)),
                    }
                };
                let rate = match *prev {
                    Some((t0, k0)) if v.timestamp > t0 && kib >= k0 => {
                        Some((kib - k0) as f64 * 1024.0 * 1e6 / (v.timestamp - t0) as f64)
                    }
                    _ => None,
                };
                *prev = Some((v.timestamp, kib));
                Ok(rate)
            })
            .collect())
    }
}
