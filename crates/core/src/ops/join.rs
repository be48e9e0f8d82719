//! `cat` and `stack`.

use crate::autograd::BackwardCtx;
use crate::dispatch::{Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, call1, downcast_op};
use crate::layout::{normalize_dim, normalize_insert_dim};
use crate::ops::grad_util::grad0;
use crate::ops::promote::{Operand, result_type};
use crate::{Error, Result, Tensor};

/// Dispatch table of `cat`.
pub static CAT: OpEntry = OpEntry::differentiable("cat");

/// Concatenation along `dim` of tensors with equal other dims.
#[derive(Debug, Clone, Copy)]
pub struct Cat {
    /// The normalised dim.
    pub dim: usize,
}

impl Op for Cat {
    fn entry(&self) -> &'static OpEntry {
        &CAT
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let any = inputs
            .first()
            .ok_or_else(|| Error::invalid("cat", "expected a non-empty list of tensors"))?;
        let Some(first) = inputs.iter().find(|t| !legacy_empty(t)) else {
            // Only skipped empties: an empty result.
            return Ok(smallvec::smallvec![OutSpec::new([0usize].as_slice(), any.dtype())]);
        };
        let mut shape = first.dims();
        let mut total = 0;
        for t in inputs.iter().filter(|t| !legacy_empty(t)) {
            if t.ndim() != first.ndim() {
                return Err(Error::shape(
                    "cat",
                    first.shape(),
                    t.shape(),
                    "tensors must have the same number of dimensions",
                ));
            }
            if t.dtype() != first.dtype() {
                return Err(Error::DTypeMismatch {
                    op: "cat",
                    detail: format!(
                        "kernel inputs must share a dtype, got {} and {}",
                        first.dtype(),
                        t.dtype()
                    ),
                });
            }
            for d in 0..t.ndim() {
                if d != self.dim && t.shape()[d] != first.shape()[d] {
                    return Err(Error::shape(
                        "cat",
                        first.shape(),
                        t.shape(),
                        format!("sizes of tensors must match except in dimension {}", self.dim),
                    ));
                }
            }
            total = usize::checked_add(total, t.shape()[self.dim]).ok_or_else(|| {
                Error::overflow(
                    "cat",
                    format!("the sizes of dimension {} add up to more than usize::MAX", self.dim),
                )
            })?;
        }
        shape[self.dim] = total;
        Ok(smallvec::smallvec![OutSpec::new(shape, first.dtype())])
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let mut start = 0;
        (0..ctx.num_inputs())
            .map(|i| {
                let shape = ctx.input_shape(i);
                if shape == [0] && g.ndim() != 1 {
                    // A skipped empty input: an empty gradient, as PyTorch's.
                    return crate::TensorOptions::like(&g).zeros([0]).map(Some);
                }
                let len = shape[self.dim];
                let piece = g.narrow(self.dim as i64, start as i64, len as i64);
                start += len;
                piece.map(Some)
            })
            .collect()
    }
}

/// A 1-D empty tensor, which cat skips whatever the other inputs' shapes
/// (PyTorch's legacy rule) but which still takes part in autograd.
fn legacy_empty(t: &Tensor) -> bool {
    t.ndim() == 1 && t.numel() == 0
}

/// Backend-independent: each input is copied into its slice of the output.
fn cat_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op: &Cat = downcast_op(op)?;
    let out = outputs[0];
    let mut start = 0;
    for t in inputs.iter().filter(|t| !legacy_empty(t)) {
        let len = t.shape()[op.dim];
        if len > 0 {
            out.narrow(op.dim as i64, start as i64, len as i64)?.copy_(t)?;
        }
        start += len;
    }
    Ok(())
}

pub(crate) fn register() -> Result<()> {
    CAT.register_builtin(Slot::AnyBackend, Kernel::Structured(cat_kernel))
}

/// # Joining
///
/// `torch.cat` and `torch.stack`.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let a = Tensor::zeros((2, 3))?;
/// let b = Tensor::ones((2, 3))?;
/// assert_eq!(Tensor::cat(&[&a, &b], 0)?.shape(), [4, 3]);
/// assert_eq!(Tensor::stack(&[&a, &b], 0)?.shape(), [2, 2, 3]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// Concatenates `tensors` along `dim` (promoting to a common dtype).
    /// 1-D empty tensors are skipped, as in PyTorch.
    pub fn cat<T: AsRef<Tensor>>(tensors: &[T], dim: i64) -> Result<Tensor> {
        let list: Vec<&Tensor> = tensors.iter().map(AsRef::as_ref).collect();
        let tensors = list.as_slice();
        if tensors.is_empty() {
            return Err(Error::invalid("cat", "expected a non-empty list of tensors"));
        }
        // With only skipped empties any dim goes, as in PyTorch.
        let d = match tensors.iter().position(|t| !legacy_empty(t)).map(|i| (i, tensors[i])) {
            Some((i, first)) if first.ndim() == 0 => {
                return Err(Error::invalid(
                    "cat",
                    format!("zero-dimensional tensor (at position {i}) cannot be concatenated"),
                ));
            }
            Some((_, first)) => normalize_dim("cat", dim, first.ndim())?,
            None => 0,
        };
        // Skipped empties still take part in type promotion, as in PyTorch.
        let ops: Vec<Operand> = tensors.iter().map(|t| Operand::Tensor(t)).collect();
        let dt = result_type(&ops);
        // Skipped empties still get a gradient (empty), as in PyTorch.
        let cast: Vec<Tensor> = tensors.iter().map(|t| t.to_dtype(dt)).collect::<Result<_>>()?;
        let refs: Vec<&Tensor> = cast.iter().collect();
        call1(&Cat { dim: d }, &refs)
    }

    /// Stacks equally shaped `tensors` along a new dim `dim`.
    pub fn stack<T: AsRef<Tensor>>(tensors: &[T], dim: i64) -> Result<Tensor> {
        let list: Vec<&Tensor> = tensors.iter().map(AsRef::as_ref).collect();
        let tensors = list.as_slice();
        let first = tensors
            .first()
            .ok_or_else(|| Error::invalid("stack", "expects a non-empty list of tensors"))?;
        let d = normalize_insert_dim("stack", dim, first.ndim())?;
        for t in tensors {
            if t.shape() != first.shape() {
                return Err(Error::shape(
                    "stack",
                    first.shape(),
                    t.shape(),
                    "stack expects each tensor to be equal size",
                ));
            }
        }
        let ops: Vec<Operand> = tensors.iter().map(|t| Operand::Tensor(t)).collect();
        let dt = result_type(&ops);
        let cast: Vec<Tensor> = tensors.iter().map(|t| t.to_dtype(dt)).collect::<Result<_>>()?;
        let refs: Vec<&Tensor> = cast.iter().collect();
        call1(&crate::ops::composite::CompositeOp::Stack { dim: d }, &refs)
    }
}
