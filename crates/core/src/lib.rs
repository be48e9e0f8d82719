//! # ferrotorch-core
//!
//! The tensor core of ferrotorch: strided [`Tensor`]s with views and
//! PyTorch's operators, define-by-run [`autograd`], random numbers
//! ([`random`]) and the typed [`Error`]. Backend and operator authors find
//! the dispatcher, storage, layouts and CPU kernels in [`backend`]. See
//! `docs/architecture.md` for the map.
//!
//! ```
//! use ferrotorch_core::Tensor;
//! let x = Tensor::arange_step(0.0, 6.0, 1.0)?.reshape(&[2, 3])?;
//! let y = x.softmax(-1)?.sum_dim(-1, false)?;
//! assert!(y.to_vec::<f32>()?.iter().all(|v| (v - 1.0).abs() < 1e-6));
//! # Ok::<(), ferrotorch_core::Error>(())
//! ```

#![warn(missing_docs)]

pub mod amp;
pub mod autograd;
pub mod backend;
mod builtins;
mod device;
mod dtype;
mod error;
pub mod memory;
pub mod ops;
pub mod profiler;
pub mod random;
mod random_state;
mod scalar;
mod shape_arg;
mod spare;
mod tensor;

// The backend modules, at the crate root for the crate's own paths.
pub(crate) use backend::{cpu, dispatch, layout, storage};

use std::sync::atomic::{AtomicU8, Ordering};

pub use half;

pub use backend::layout::Dims;
pub use backend::storage::{MemoryStats, empty_cache, memory_stats, reset_peak_memory_stats};
pub use device::Device;

pub use dtype::{ALL_DTYPES, DType, Element};
pub use error::{Error, Result};
pub use ops::bucket::SearchSortedOptions;
pub use ops::conv::{ConvOptions, ConvParams, ConvTransposeOptions, Padding};
pub use ops::linalg_norm::MatrixOrd;
pub use ops::loss::Reduction;
pub use ops::pool::{AvgPoolOptions, MaxPoolOptions};
pub use ops::shape_more::Indexing;
pub use ops::unique::{UniqueOptions, UniqueOutput};
pub use ops::{IntoOperand, Operand, Rounding, result_type};
pub use random::{Generator, manual_seed};
pub use random_state::{RNG_STATE_BYTES, get_rng_state, set_rng_state};
pub use scalar::Scalar;
pub use shape_arg::{IntoShape, ShapeInt, ShapeVec};
pub use tensor::{
    Ellipsis, IndexSpec, IntoTensorIndex, NewAxis, PrintOptions, Step, Tensor, TensorData, TensorIndex, TensorOptions,
    VersionCounter, set_print_options,
};

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
