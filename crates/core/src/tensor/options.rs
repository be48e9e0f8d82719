//! [`TensorOptions`]: the dtype, device and generator of a creation
//! function (its creation methods are in `creation.rs`, above the
//! operators they run).

use crate::defaults::{default_device, default_dtype};
use crate::device::Device;
use crate::dtype::DType;
use crate::random::Generator;
use crate::tensor::Tensor;

/// dtype, device and generator for creation functions (PyTorch's keyword
/// arguments), used as a builder:
///
/// ```
/// use ferrotorch_core::{DType, Device, TensorOptions};
/// let t = TensorOptions::new().dtype(DType::F64).zeros(&[2, 3])?;
/// assert_eq!(t.dtype(), DType::F64);
/// let m = TensorOptions::new().device(Device::Meta).randn(&[1024, 1024])?;
/// assert_eq!(m.shape(), &[1024, 1024]); // shape only, no memory
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct TensorOptions {
    pub(crate) dtype: Option<DType>,
    pub(crate) device: Device,
    pub(crate) generator: Option<Generator>,
}

impl Default for TensorOptions {
    fn default() -> Self {
        TensorOptions {
            dtype: None,
            device: default_device(),
            generator: None,
        }
    }
}

impl TensorOptions {
    /// Defaults: the default dtype, the default device (the CPU unless a
    /// [`default_device_scope`](crate::default_device_scope) says
    /// otherwise), the global generator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Options matching an existing tensor's dtype and device (for `*_like`).
    pub fn like(t: &Tensor) -> Self {
        TensorOptions {
            dtype: Some(t.dtype()),
            device: t.device(),
            generator: None,
        }
    }

    /// Sets the dtype.
    pub fn dtype(mut self, dtype: DType) -> Self {
        self.dtype = Some(dtype);
        self
    }

    /// Sets the device.
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// Samples from `generator` instead of the global one.
    pub fn generator(mut self, generator: &Generator) -> Self {
        self.generator = Some(generator.clone());
        self
    }

    pub(crate) fn dt(&self) -> DType {
        self.dtype.unwrap_or_else(default_dtype)
    }
}
