//! Image transforms (torchvision's `transforms`): [`ToTensor`],
//! [`Normalize`] and [`Compose`], on tensors (an image is a `u8` tensor of
//! shape `[H, W]` or `[H, W, C]`, as the NumPy array behind a PIL image).

use std::fmt;
use std::sync::Arc;

use ferrotorch_core::{DType, Tensor, default_dtype};

use crate::error::{DataError, Result};

/// A function from tensor to tensor applied to each item
/// (torchvision's transform callables). Closures
/// `Fn(&Tensor) -> Result<Tensor>` are transforms too.
pub trait Transform: Send + Sync {
    /// The transformed tensor.
    fn apply(&self, x: &Tensor) -> Result<Tensor>;
}

impl<F: Fn(&Tensor) -> Result<Tensor> + Send + Sync> Transform for F {
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        self(x)
    }
}

/// A shared transform, as datasets keep one.
pub type ArcTransform = Arc<dyn Transform>;

/// torchvision's `ToTensor`: an image `[H, W]` or `[H, W, C]` becomes
/// `[C, H, W]` (`C = 1` for `[H, W]`); `u8` values are scaled to `[0, 1]`
/// in the default float dtype (`x.to(float32).div(255)`), other dtypes
/// only change layout, as torchvision leaves non-byte arrays unscaled.
///
/// ```
/// use ferrotorch_core::Tensor;
/// use ferrotorch_data::transforms::{ToTensor, Transform};
/// let img = Tensor::from_vec(vec![0u8, 51, 255, 102], (2, 2))?;
/// let t = ToTensor.apply(&img)?;
/// assert_eq!(t.shape(), [1, 2, 2]);
/// assert_eq!(t.to_vec::<f32>()?, [0.0, 0.2, 1.0, 0.4]);
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ToTensor;

impl Transform for ToTensor {
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let chw = match x.dim() {
            2 => x.unsqueeze(0)?,
            3 => x.permute([2, 0, 1])?.contiguous()?,
            d => {
                return Err(DataError::invalid(
                    "ToTensor",
                    format!("pic should be 2/3 dimensional. Got {d} dimensions."),
                ));
            }
        };
        if x.dtype() == DType::U8 {
            Ok(chw.to_dtype(default_dtype())?.div(255.0)?)
        } else {
            Ok(chw)
        }
    }
}

/// torchvision's `Normalize(mean, std)`: `(x - mean[c]) / std[c]` for each
/// channel `c` of a float tensor `[..., C, H, W]`, with `mean` and `std`
/// converted to the tensor's dtype first (one value each broadcasts over
/// all channels).
///
/// ```
/// use ferrotorch_core::Tensor;
/// use ferrotorch_data::transforms::{Normalize, Transform};
/// let x = Tensor::full((1, 2, 2), 0.5f32)?;
/// let y = Normalize::new([0.1307], [0.3081]).apply(&x)?;
/// assert!((y.to_vec::<f32>()?[0] - (0.5 - 0.1307) / 0.3081).abs() < 1e-6);
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Normalize {
    mean: Vec<f64>,
    std: Vec<f64>,
}

impl Normalize {
    /// The transform with per-channel `mean` and `std`.
    pub fn new(mean: impl Into<Vec<f64>>, std: impl Into<Vec<f64>>) -> Self {
        Normalize {
            mean: mean.into(),
            std: std.into(),
        }
    }
}

impl Transform for Normalize {
    /// Errors, as torchvision's: a tensor that is not floating point or has
    /// fewer than 3 dims, a `std` with a zero (after conversion to the
    /// tensor's dtype), and `mean`/`std` lengths that do not broadcast
    /// against the channels.
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        if !x.is_floating_point() {
            return Err(DataError::invalid(
                "Normalize",
                format!("Input tensor should be a float tensor. Got {}.", x.dtype()),
            ));
        }
        if x.dim() < 3 {
            return Err(DataError::invalid(
                "Normalize",
                format!(
                    "Expected tensor to be a tensor image of size (..., C, H, W). Got tensor.size() = {:?}",
                    x.shape()
                ),
            ));
        }
        let as_tensor = |v: &[f64]| -> Result<Tensor> {
            let t = Tensor::from_slice(v).to_dtype(x.dtype())?;
            Ok(t.view([-1i64, 1, 1])?)
        };
        let mean = as_tensor(&self.mean)?;
        let std = as_tensor(&self.std)?;
        if std.to_dtype(DType::F64)?.to_vec::<f64>()?.contains(&0.0) {
            return Err(DataError::invalid(
                "Normalize",
                format!(
                    "std evaluated to zero after conversion to {}, leading to division by zero.",
                    x.dtype()
                ),
            ));
        }
        Ok(x.sub(&mean)?.div(&std)?)
    }
}

/// Transforms applied one after another (torchvision's `Compose`).
///
/// ```
/// use ferrotorch_core::Tensor;
/// use ferrotorch_data::transforms::{Compose, Normalize, ToTensor, Transform};
/// let t = Compose::new().then(ToTensor).then(Normalize::new([0.5], [0.5]));
/// let y = t.apply(&Tensor::from_vec(vec![0u8, 255], (1, 2))?)?;
/// assert_eq!(y.to_vec::<f32>()?, [-1.0, 1.0]);
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
#[derive(Clone, Default)]
pub struct Compose {
    transforms: Vec<ArcTransform>,
}

impl Compose {
    /// No transforms (the identity).
    pub fn new() -> Self {
        Compose::default()
    }

    /// Appends `t`.
    pub fn then(mut self, t: impl Transform + 'static) -> Self {
        self.transforms.push(Arc::new(t));
        self
    }
}

impl fmt::Debug for Compose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Compose({} transforms)", self.transforms.len())
    }
}

impl Transform for Compose {
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        for t in &self.transforms {
            y = t.apply(&y)?;
        }
        Ok(y)
    }
}
