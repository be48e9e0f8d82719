//! The defaults creation functions use when no dtype or device is given:
//! `torch.get_default_dtype` / `set_default_dtype` and the default device
//! (`with torch.device(...)`).

use std::sync::atomic::{AtomicU8, Ordering};

use crate::device::Device;
use crate::dtype::{ALL_DTYPES, DType};
use crate::error::{Error, Result};

thread_local! {
    /// The device creation functions use when none is given.
    static DEFAULT_DEVICE: std::cell::Cell<Device> = const { std::cell::Cell::new(Device::Cpu) };
}

/// The device creation functions (`Tensor::zeros`, `randn`, the layers'
/// parameters) use when none is given: the CPU, unless a
/// [`default_device_scope`] is open on this thread.
pub fn default_device() -> Device {
    DEFAULT_DEVICE.with(std::cell::Cell::get)
}

/// Makes `device` this thread's default device until the returned guard
/// drops (`with torch.device("meta"):`): modules built inside have their
/// parameters there.
///
/// ```
/// use ferrotorch_core::{Device, Tensor, default_device_scope};
/// let t = {
///     let _meta = default_device_scope(Device::Meta);
///     Tensor::zeros([1 << 20, 1024])? // 4 GiB of shape, no memory
/// };
/// assert_eq!(t.device(), Device::Meta);
/// assert_eq!(Tensor::zeros([2])?.device(), Device::Cpu);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn default_device_scope(device: Device) -> DefaultDeviceScope {
    DefaultDeviceScope {
        previous: DEFAULT_DEVICE.with(|d| d.replace(device)),
        _not_send: std::marker::PhantomData,
    }
}

/// Restores the previous default device when dropped (see [`default_device_scope`]).
#[must_use = "the default device is restored when this guard is dropped"]
pub struct DefaultDeviceScope {
    previous: Device,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for DefaultDeviceScope {
    fn drop(&mut self) {
        let _ = DEFAULT_DEVICE.try_with(|d| d.set(self.previous));
    }
}

/// The default dtype, as its discriminant (`ALL_DTYPES` is in declaration order).
static DEFAULT_DTYPE: AtomicU8 = AtomicU8::new(DType::F32 as u8);

/// The default floating-point dtype (f32 unless changed).
pub fn default_dtype() -> DType {
    ALL_DTYPES[DEFAULT_DTYPE.load(Ordering::Relaxed) as usize]
}

/// Sets the default floating-point dtype (`torch.set_default_dtype`); only
/// floating-point dtypes are accepted.
pub fn set_default_dtype(dtype: DType) -> Result<()> {
    if !dtype.is_floating_point() {
        return Err(Error::dtype(
            "set_default_dtype",
            dtype,
            "only floating-point types are supported as the default type",
        ));
    }
    DEFAULT_DTYPE.store(dtype as u8, Ordering::Relaxed);
    Ok(())
}
