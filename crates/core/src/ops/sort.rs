//! `sort`, `argsort` and `topk`.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpecs, call2};
use crate::layout::normalize_dim;
use crate::ops::grad_util::{SAVES_INDICES, picked_values_backward, values_and_indices};
use crate::{DType, Error, Result, Tensor};

/// Dispatch table of `sort.stable`, which also runs PyTorch's default
/// overload `sort` (`stable=False`).
pub static SORT: OpEntry = OpEntry::differentiable("sort.stable");
/// Dispatch table of `topk`.
pub static TOPK: OpEntry = OpEntry::differentiable("topk");

/// Sorts along `dim`; outputs values and int64 indices. NaN sorts above
/// every number. With `stable`, equal elements keep their order; without,
/// they come in the order PyTorch's default CPU sort leaves them in.
#[derive(Debug, Clone, Copy)]
pub struct Sort {
    /// The normalised dim.
    pub dim: usize,
    /// Largest first.
    pub descending: bool,
    /// Called as `sort(stable=True)` (`sort.stable`, node `SortBackward1`):
    /// equal elements keep their order.
    pub stable: bool,
}

impl Op for Sort {
    fn entry(&self) -> &'static OpEntry {
        &SORT
    }

    fn backward_name(&self) -> String {
        if self.stable { "SortBackward1" } else { "SortBackward0" }.into()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        Ok(values_and_indices(x.dims(), x.dtype()))
    }

    fn saves(&self) -> Saves {
        SAVES_INDICES
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        picked_values_backward(ctx, grads, self.dim, true, false)
    }
}

/// The `k` largest (or smallest) entries along `dim`, with their indices,
/// in sorted order.
#[derive(Debug, Clone, Copy)]
pub struct TopK {
    /// How many.
    pub k: usize,
    /// The normalised dim.
    pub dim: usize,
    /// Largest (true) or smallest.
    pub largest: bool,
}

impl Op for TopK {
    fn entry(&self) -> &'static OpEntry {
        &TOPK
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        if x.dtype() == DType::Bool {
            return Err(Error::dtype("topk", x.dtype(), "topk does not support bool dtypes"));
        }
        let size = if x.ndim() == 0 { 1 } else { x.shape()[self.dim] };
        if self.k > size {
            return Err(Error::invalid(
                "topk",
                format!("selected index k ({}) out of range for dim of size {size}", self.k),
            ));
        }
        let mut shape = x.dims();
        if x.ndim() > 0 {
            shape[self.dim] = self.k;
        }
        Ok(values_and_indices(shape, x.dtype()))
    }

    fn saves(&self) -> Saves {
        SAVES_INDICES
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        picked_values_backward(ctx, grads, self.dim, true, false)
    }
}

/// # Sorting
///
/// `sort`, `argsort` and `topk`.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([3.0f32, 1.0, 2.0])?;
/// let (values, indices) = x.sort(0, false)?;
/// assert_eq!((values.to_vec::<f32>()?, indices.to_vec::<i64>()?), (vec![1.0, 2.0, 3.0], vec![1, 2, 0]));
/// assert_eq!(x.topk(1, 0, true)?.0.to_vec::<f32>()?, [3.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// Sorted values and their original indices along `dim`
    /// (`torch.sort(x, dim, descending)`: equal elements in the order
    /// PyTorch's CPU sort leaves them, which is not their input order past
    /// 16 elements; see [`Tensor::sort_stable`]).
    pub fn sort(&self, dim: i64, descending: bool) -> Result<(Tensor, Tensor)> {
        self.sort_impl(dim, descending, false)
    }

    /// `torch.sort(self, dim, descending, stable=True)`: equal elements keep
    /// their order (node `SortBackward1`).
    pub fn sort_stable(&self, dim: i64, descending: bool) -> Result<(Tensor, Tensor)> {
        self.sort_impl(dim, descending, true)
    }

    fn sort_impl(&self, dim: i64, descending: bool, stable: bool) -> Result<(Tensor, Tensor)> {
        let d = normalize_dim("sort", dim, self.ndim())?;
        call2(
            &Sort {
                dim: d,
                descending,
                stable,
            },
            &[self],
        )
    }

    /// Indices that sort `dim` (`torch.argsort`, as [`Tensor::sort`]).
    pub fn argsort(&self, dim: i64, descending: bool) -> Result<Tensor> {
        Ok(self.sort(dim, descending)?.1)
    }

    /// Indices that sort `dim`, equal elements in their input order
    /// (`torch.argsort(x, stable=True)`).
    pub fn argsort_stable(&self, dim: i64, descending: bool) -> Result<Tensor> {
        Ok(self.sort_stable(dim, descending)?.1)
    }

    /// The `k` largest (`largest`) or smallest entries along `dim` and their
    /// indices, sorted. Errors for a `k` outside `[0, size]` ("selected
    /// index k out of range").
    pub fn topk(&self, k: i64, dim: i64, largest: bool) -> Result<(Tensor, Tensor)> {
        let d = normalize_dim("topk", dim, self.ndim())?;
        let Ok(k) = usize::try_from(k) else {
            return Err(Error::invalid("topk", "selected index k out of range"));
        };
        call2(&TopK { k, dim: d, largest }, &[self])
    }
}
