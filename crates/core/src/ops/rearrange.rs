//! Front ends PyTorch users reach for that are compositions of other
//! operators (so their gradients come for free): `repeat`, `flip`,
//! `view_as`/`reshape_as`/`type_as`, the dtype shortcuts (`float()`,
//! `long()`, ...) and `new_zeros`/`new_ones`/`new_full`/`new_empty`.
//! Their nodes are those of the operators they are written in (for
//! example `repeat` records an expand and a reshape, not PyTorch's
//! `RepeatBackward0`); the values and gradients are PyTorch's.

use crate::layout::normalize_dims;
use crate::{DType, Error, IntoShape, Result, Scalar, Tensor, TensorOptions};

/// # Rearranging, shortcuts and `new_*`
///
/// ```
/// use ferrotorch_core::{DType, Tensor};
/// let x = Tensor::new([[1i64, 2], [3, 4]])?;
/// assert_eq!(x.repeat((1, 2))?.to_vec2::<i64>()?, [[1, 2, 1, 2], [3, 4, 3, 4]]); // x.repeat(1, 2)
/// assert_eq!(x.flip(0)?.to_vec::<i64>()?, [3, 4, 1, 2]);                        // x.flip(0)
/// assert_eq!(x.float()?.dtype(), DType::F32);                                     // x.float()
/// assert_eq!(x.new_ones(3)?.dtype(), DType::I64);                                 // x.new_ones(3)
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// The tensor tiled `repeats[d]` times along each dim (`x.repeat(2, 3)`);
    /// extra leading repeats add dims. An error when there are fewer repeats
    /// than dims or a repeat is negative.
    pub fn repeat(&self, repeats: impl IntoShape) -> Result<Tensor> {
        let reps = repeats.into_shape();
        if reps.len() < self.ndim() {
            return Err(Error::invalid(
                "repeat",
                "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor",
            ));
        }
        if let Some(&r) = reps.iter().find(|&&r| r < 0) {
            return Err(Error::invalid(
                "repeat",
                format!("Trying to create tensor with negative dimension {r}: {reps:?}"),
            ));
        }
        // [s0, s1] repeated [r0, r1] = [1, s0, 1, s1] expanded to
        // [r0, s0, r1, s1], then merged to [r0 * s0, r1 * s1].
        let lead = reps.len() - self.ndim();
        let mut padded: Vec<i64> = vec![1; lead];
        padded.extend(self.shape().iter().map(|&s| s as i64));
        let mut split = Vec::with_capacity(2 * reps.len());
        let mut expanded = Vec::with_capacity(2 * reps.len());
        let mut merged = Vec::with_capacity(reps.len());
        for (&r, &s) in reps.iter().zip(&padded) {
            split.extend([1, s]);
            expanded.extend([r, s]);
            let m = r.checked_mul(s).ok_or_else(|| {
                Error::overflow("repeat", format!("repeating {:?} by {reps:?} overflows", self.shape()))
            })?;
            merged.push(m);
        }
        self.reshape(split)?.expand(expanded)?.reshape(merged)
    }

    /// The elements in reverse order along each of `dims` (`x.flip(dims)`): a
    /// copy, as PyTorch's (no tensor here has negative strides).
    pub fn flip(&self, dims: impl IntoShape) -> Result<Tensor> {
        let dims = normalize_dims("flip", &dims.into_shape(), self.ndim())?;
        let mut out = self.clone();
        for &d in &dims {
            let n = self.shape()[d] as i64;
            if n <= 1 {
                continue;
            }
            let rev = TensorOptions::new()
                .dtype(DType::I64)
                .device(self.device())
                .arange(n - 1, -1, -1)?;
            out = out.index_select(d as i64, &rev)?;
        }
        if out.is_same(self) {
            self.clone_tensor()
        } else {
            Ok(out)
        }
    }

    /// `self` viewed with `other`'s shape (`x.view_as(y)`).
    pub fn view_as(&self, other: &Tensor) -> Result<Tensor> {
        self.view(other.shape())
    }

    /// `self` reshaped to `other`'s shape (`x.reshape_as(y)`).
    pub fn reshape_as(&self, other: &Tensor) -> Result<Tensor> {
        self.reshape(other.shape())
    }

    /// `self` in `other`'s dtype (`x.type_as(y)`).
    pub fn type_as(&self, other: &Tensor) -> Result<Tensor> {
        self.to_dtype(other.dtype())
    }

    /// `x.float()`: `self` as f32 (itself when it already is).
    pub fn float(&self) -> Result<Tensor> {
        self.to_dtype(DType::F32)
    }

    /// `x.double()`: `self` as f64.
    pub fn double(&self) -> Result<Tensor> {
        self.to_dtype(DType::F64)
    }

    /// `x.half()`: `self` as f16.
    pub fn half(&self) -> Result<Tensor> {
        self.to_dtype(DType::F16)
    }

    /// `x.bfloat16()`: `self` as bf16.
    pub fn bfloat16(&self) -> Result<Tensor> {
        self.to_dtype(DType::BF16)
    }

    /// `x.long()`: `self` as i64.
    pub fn long(&self) -> Result<Tensor> {
        self.to_dtype(DType::I64)
    }

    /// `x.int()`: `self` as i32.
    pub fn int(&self) -> Result<Tensor> {
        self.to_dtype(DType::I32)
    }

    /// `x.bool()`: `self` as bool (nonzero is true).
    pub fn bool(&self) -> Result<Tensor> {
        self.to_dtype(DType::Bool)
    }

    /// `x.new_zeros(size)`: zeros with `self`'s dtype and device.
    pub fn new_zeros(&self, shape: impl IntoShape) -> Result<Tensor> {
        TensorOptions::like(self).zeros(shape)
    }

    /// `x.new_ones(size)`: ones with `self`'s dtype and device.
    pub fn new_ones(&self, shape: impl IntoShape) -> Result<Tensor> {
        TensorOptions::like(self).ones(shape)
    }

    /// `x.new_full(size, value)`: `value` with `self`'s dtype and device (a
    /// value the dtype cannot hold is an error).
    pub fn new_full(&self, shape: impl IntoShape, value: impl Into<Scalar>) -> Result<Tensor> {
        TensorOptions::like(self).full(shape, value)
    }

    /// `x.new_empty(size)`: a tensor with `self`'s dtype and device (zeroed).
    pub fn new_empty(&self, shape: impl IntoShape) -> Result<Tensor> {
        TensorOptions::like(self).empty(shape)
    }
}
