//! Front ends PyTorch users reach for: `repeat` and `flip` (operators
//! with PyTorch's nodes `RepeatBackward0` and `FlipBackward0`, their
//! forwards written in other operators below autograd), and compositions
//! of other operators (so their gradients come for free):
//! `view_as`/`reshape_as`/`type_as`, the dtype shortcuts (`float()`,
//! `long()`, ...) and `new_zeros`/`new_ones`/`new_full`/`new_empty`.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call1, downcast_op};
use crate::layout::{Dims, normalize_dims};
use crate::ops::grad_util::grad0;
use crate::{DType, Error, IntoShape, Result, Scalar, Tensor, TensorOptions};

/// Dispatch table of `repeat`.
pub static REPEAT: OpEntry = OpEntry::differentiable("repeat");
/// Dispatch table of `flip`.
pub static FLIP: OpEntry = OpEntry::differentiable("flip");

/// `repeat` and `flip`, each one node with PyTorch's backward formula.
#[derive(Debug, Clone)]
pub enum Rearrange {
    /// `x.repeat(reps)` (`reps` at least as long as `x`'s dims, none negative).
    Repeat {
        /// Repeats per output dim.
        reps: Vec<i64>,
    },
    /// `x.flip(dims)`.
    Flip {
        /// Normalised dims, without repeats.
        dims: Dims,
    },
}

impl Rearrange {
    /// `repeat`'s output shape: the input padded with leading 1s, times `reps`.
    fn repeat_shape(shape: &[usize], reps: &[i64]) -> Dims {
        let lead = reps.len() - shape.len();
        // A negative repeat of an empty dim gives 0, as PyTorch's sizes.
        reps.iter()
            .enumerate()
            .map(|(i, &r)| (r * if i < lead { 1 } else { shape[i - lead] as i64 }).max(0) as usize)
            .collect()
    }
}

impl Op for Rearrange {
    fn entry(&self) -> &'static OpEntry {
        match self {
            Rearrange::Repeat { .. } => &REPEAT,
            Rearrange::Flip { .. } => &FLIP,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let shape = match self {
            Rearrange::Repeat { reps } => Self::repeat_shape(x.shape(), reps),
            Rearrange::Flip { .. } => x.dims(),
        };
        Ok(smallvec::smallvec![OutSpec::new(shape, x.dtype())])
    }

    fn saves(&self) -> Saves {
        Saves::NONE
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let r = match self {
            Rearrange::Repeat { reps } => repeat_backward(g, reps, ctx.input_shape(0))?,
            Rearrange::Flip { dims } => g.flip(dims.iter().map(|&d| d as i64).collect::<Vec<_>>())?,
        };
        Ok(vec![Some(r)])
    }
}

/// PyTorch's `repeat_backward`: leading repeat dims summed away one at a
/// time, then the gradient reshaped to `[..., repeat, size, ...]` and summed
/// over every repeat in one reduction (zeros when some repeat is 0).
fn repeat_backward(mut g: Tensor, reps: &[i64], input_shape: &[usize]) -> Result<Tensor> {
    if reps.contains(&0) {
        return TensorOptions::like(&g).zeros(input_shape);
    }
    let nd = input_shape.len();
    let lead = g.ndim() - nd;
    for _ in 0..lead {
        g = g.sum_dim(0, false)?;
    }
    let (mut grad_size, mut sum_dims) = (Vec::new(), Vec::new());
    for (dim, &size) in input_shape.iter().enumerate() {
        let r = reps[dim + lead];
        if r != 1 {
            grad_size.push(r);
            sum_dims.push(grad_size.len() as i64 - 1);
        }
        grad_size.push(size as i64);
    }
    if !sum_dims.is_empty() {
        g = g.reshape(grad_size)?.sum_dim(sum_dims, false)?;
    }
    Ok(g)
}

fn rearrange_kernel(call: &Call) -> Result<Tensors> {
    let op: &Rearrange = downcast_op(call.op)?;
    let x = call.inputs[0];
    let r = match op {
        Rearrange::Repeat { reps } if op_numel(x, reps) == 0 => {
            TensorOptions::like(x).zeros(Rearrange::repeat_shape(x.shape(), reps).as_slice())?
        }
        Rearrange::Repeat { reps } => {
            // [s0, s1] repeated [r0, r1] = [1, s0, 1, s1] expanded to
            // [r0, s0, r1, s1], copied, then viewed as [r0 * s0, r1 * s1].
            let lead = reps.len() - x.ndim();
            let mut padded: Vec<i64> = vec![1; lead];
            padded.extend(x.shape().iter().map(|&s| s as i64));
            let mut split = Vec::with_capacity(2 * reps.len());
            let mut expanded = Vec::with_capacity(2 * reps.len());
            for (&r, &s) in reps.iter().zip(&padded) {
                split.extend([1, s]);
                expanded.extend([r, s]);
            }
            let out: Vec<i64> = Rearrange::repeat_shape(x.shape(), reps)
                .iter()
                .map(|&s| s as i64)
                .collect();
            x.reshape(split)?.expand(expanded)?.clone_contiguous()?.view(out)?
        }
        Rearrange::Flip { dims } => {
            let mut out = x.clone();
            for &d in dims {
                let n = x.shape()[d] as i64;
                if n <= 1 {
                    continue;
                }
                let rev = TensorOptions::new()
                    .dtype(DType::I64)
                    .device(x.device())
                    .arange(n - 1, -1, -1)?;
                out = out.index_select(d as i64, &rev)?;
            }
            out
        }
    };
    Ok(smallvec::smallvec![r.into_result(call.inputs)?])
}

/// The number of elements `x.repeat(reps)` has.
fn op_numel(x: &Tensor, reps: &[i64]) -> usize {
    Rearrange::repeat_shape(x.shape(), reps).iter().product()
}

/// Registers the backend-independent kernels of `repeat` and `flip`.
pub(crate) fn register() -> Result<()> {
    for e in [&REPEAT, &FLIP] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(rearrange_kernel))?;
    }
    Ok(())
}

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
        // As PyTorch, a negative repeat is an error only where it makes a
        // negative size (times an empty dim it gives 0).
        let lead = reps.len() - self.ndim();
        let target: Vec<i64> = reps
            .iter()
            .enumerate()
            .map(|(i, &r)| r.saturating_mul(if i < lead { 1 } else { self.shape()[i - lead] as i64 }))
            .collect();
        if let Some(&t) = target.iter().find(|&&t| t < 0) {
            return Err(Error::invalid(
                "repeat",
                format!("Trying to create tensor with negative dimension {t}: {target:?}"),
            ));
        }
        let padded: Vec<usize> = std::iter::repeat_n(1, reps.len() - self.ndim())
            .chain(self.shape().iter().copied())
            .collect();
        for (&r, &s) in reps.iter().zip(&padded) {
            r.checked_mul(s as i64).ok_or_else(|| {
                Error::overflow("repeat", format!("repeating {:?} by {reps:?} overflows", self.shape()))
            })?;
        }
        call1(&Rearrange::Repeat { reps: reps.to_vec() }, &[self])
    }

    /// The elements in reverse order along each of `dims` (`x.flip(dims)`): a
    /// copy, as PyTorch's (no tensor here has negative strides).
    pub fn flip(&self, dims: impl IntoShape) -> Result<Tensor> {
        let dims = normalize_dims("flip", &dims.into_shape(), self.ndim())?;
        // A 0-d tensor has nothing to reverse (its dims 0 and -1 are allowed).
        let dims = if self.ndim() == 0 { Dims::new() } else { dims };
        call1(&Rearrange::Flip { dims }, &[self])
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
