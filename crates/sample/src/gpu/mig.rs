//! MIG: a GPU split into instances (A100, H100 in MIG mode) is sampled as
//! the GPU and, as devices of their own, each MIG device the driver shows:
//! its memory, its processes, and GPM's metrics of its GPU instance.

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, GpmSample, Nvml};

/// Where a MIG device is: its parent GPU's index, its own index under it,
/// and its GPU instance (what GPM samples), when NVML says.
#[derive(Clone, Copy, Debug)]
pub struct Mig {
    pub parent: u32,
    pub index: u32,
    pub gpu_instance: Option<u32>,
}

/// The MIG devices of `parent` (index `p`): none when MIG mode is off or
/// the GPU or library has no MIG.
pub fn devices<'n>(nvml: &'n Nvml, parent: &Device<'n>, p: u32) -> Vec<(Mig, Device<'n>)> {
    let on = parent.mig_mode().is_ok_and(|m| m.current == 1);
    let max = if on { parent.mig_device_count().unwrap_or(0) } else { 0 };
    (0..max)
        .filter_map(|index| {
            // Slots without an instance answer NotFound.
            let dev = parent.mig_device_by_index(index).ok()?;
            let gpu_instance = gpu_instance_id(nvml, &dev).ok();
            Some((Mig { parent: p, index, gpu_instance }, dev))
        })
        .collect()
}

/// nvmlDeviceGetGpuInstanceId, which the wrapper lacks, through its `sys`
/// bindings on the same library.
fn gpu_instance_id(nvml: &Nvml, dev: &Device) -> Result<u32, NvmlError> {
    let sym = nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref().map_err(|_| NvmlError::FunctionNotFound)?;
    let mut id = 0;
    // SAFETY: a live device handle and a valid out pointer.
    nvml_try(unsafe { sym(dev.handle(), &mut id) })?;
    Ok(id)
}

/// The device a [`Mig`] is, looked up again for a sample.
pub fn handle<'n>(nvml: &'n Nvml, m: &Mig) -> Result<(Device<'n>, Device<'n>), NvmlError> {
    let parent = nvml.device_by_index(m.parent)?;
    let dev = parent.mig_device_by_index(m.index)?;
    Ok((parent, dev))
}

/// A GPM sample of the MIG device's GPU instance (taken on its parent).
pub fn gpm_sample<'n>(parent: &Device<'n>, m: &Mig) -> Result<GpmSample<'n>, NvmlError> {
    parent.gpm_mig_sample(m.gpu_instance.ok_or(NvmlError::NotSupported)?)
}
