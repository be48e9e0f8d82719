//! `unique` and `unique_consecutive`, over all elements or over slices
//! along a dim. Outputs have data-dependent sizes, so the kernels are
//! functional (no shape rule: the meta device refuses them, as PyTorch's).

use crate::autograd::BackwardCtx;
use crate::dispatch::{Op, OpEntry, call};
use crate::layout::normalize_dim;
use crate::{Error, Result, Tensor};

// As in PyTorch, the values of a tensor that requires grad require grad
// too, through a node whose backward is an error.
/// Dispatch table of `_unique2` (`torch.unique` without a dim).
pub static UNIQUE: OpEntry = OpEntry::differentiable("_unique2");
/// Dispatch table of `unique_dim`.
pub static UNIQUE_DIM: OpEntry = OpEntry::differentiable("unique_dim");
/// Dispatch table of `unique_consecutive`.
pub static UNIQUE_CONSECUTIVE: OpEntry = OpEntry::differentiable("unique_consecutive");

/// The unique elements (or slices along `dim`) of a tensor: outputs the
/// values, the inverse indices and the counts (the last two empty unless
/// asked for).
#[derive(Debug, Clone, Copy)]
pub struct Unique {
    /// Only merge runs of equal neighbours (`unique_consecutive`); else
    /// sort first.
    pub consecutive: bool,
    /// The normalised dim whose slices are compared; `None`: elements.
    pub dim: Option<usize>,
    /// Compute the index of each input element's unique value.
    pub return_inverse: bool,
    /// Compute how often each unique value occurs.
    pub return_counts: bool,
}

impl Op for Unique {
    fn entry(&self) -> &'static OpEntry {
        match (self.consecutive, self.dim) {
            (true, _) => &UNIQUE_CONSECUTIVE,
            (false, None) => &UNIQUE,
            (false, Some(_)) => &UNIQUE_DIM,
        }
    }

    fn backward(&self, _ctx: &BackwardCtx, _grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let name = self.entry().base_name();
        Err(Error::invalid(
            name,
            format!("the derivative for '{name}' is not implemented."),
        ))
    }
}

/// Options of [`Tensor::unique_with`] and [`Tensor::unique_consecutive_with`]
/// (PyTorch's keyword arguments).
#[derive(Debug, Clone, Copy, Default)]
pub struct UniqueOptions {
    /// Also return, for each input element (or slice), the index of its
    /// unique value (`return_inverse`).
    pub return_inverse: bool,
    /// Also return how often each unique value occurs (`return_counts`).
    pub return_counts: bool,
    /// Compare slices along this dim instead of elements (`dim`).
    pub dim: Option<i64>,
}

/// What [`Tensor::unique_with`] returns.
#[derive(Debug, Clone)]
pub struct UniqueOutput {
    /// The unique values (sorted, for `unique`), or unique slices along the dim.
    pub values: Tensor,
    /// For each input element (input-shaped) or slice (1-D), the index of
    /// its unique value, when asked for.
    pub inverse: Option<Tensor>,
    /// How often each unique value occurs, when asked for.
    pub counts: Option<Tensor>,
}

/// # Unique values
///
/// ```
/// use ferrotorch_core::{Tensor, UniqueOptions};
/// let x = Tensor::new([5i64, 3, 5, 1, 3])?;
/// assert_eq!(x.unique()?.to_vec::<i64>()?, [1, 3, 5]);
/// let opts = UniqueOptions { return_inverse: true, return_counts: true, dim: None };
/// let u = x.unique_with(opts)?;
/// assert_eq!(u.inverse.unwrap().to_vec::<i64>()?, [2, 1, 2, 0, 1]);
/// assert_eq!(u.counts.unwrap().to_vec::<i64>()?, [1, 2, 2]);
/// assert_eq!(Tensor::new([1i64, 1, 2, 1])?.unique_consecutive()?.to_vec::<i64>()?, [1, 2, 1]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// The sorted unique elements, as a 1-D tensor (`torch.unique(x)`;
    /// every NaN is its own value, sorted last; `-0.0` and `0.0` are one).
    pub fn unique(&self) -> Result<Tensor> {
        Ok(self.unique_with(UniqueOptions::default())?.values)
    }

    /// `torch.unique(x, sorted=True, return_inverse, return_counts, dim)`.
    /// Errors for a dim out of range, or slices along `dim` that are
    /// empty while `dim` is not.
    pub fn unique_with(&self, opts: UniqueOptions) -> Result<UniqueOutput> {
        self.unique_impl(false, opts)
    }

    /// The tensor with every run of equal neighbours merged into one
    /// element (`torch.unique_consecutive(x)`).
    pub fn unique_consecutive(&self) -> Result<Tensor> {
        Ok(self.unique_consecutive_with(UniqueOptions::default())?.values)
    }

    /// `torch.unique_consecutive(x, return_inverse, return_counts, dim)`.
    pub fn unique_consecutive_with(&self, opts: UniqueOptions) -> Result<UniqueOutput> {
        self.unique_impl(true, opts)
    }

    fn unique_impl(&self, consecutive: bool, opts: UniqueOptions) -> Result<UniqueOutput> {
        let name = if consecutive { "unique_consecutive" } else { "unique" };
        if let (Some(d), 0) = (opts.dim, self.ndim()) {
            return Err(Error::invalid(
                name,
                format!("Dimension specified as {d} but tensor has no dimensions"),
            ));
        }
        let dim = opts.dim.map(|d| normalize_dim(name, d, self.ndim())).transpose()?;
        if dim.is_some() && self.shape().iter().filter(|&&s| s == 0).count() > 1 {
            return Err(Error::invalid(
                name,
                "Number of zero sized dimensions is more than one, so unique cannot be applied ",
            ));
        }
        if let Some(d) = dim
            && self.numel() == 0
            && self.shape()[d] != 0
        {
            return Err(Error::invalid(
                name,
                "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied",
            ));
        }
        let op = Unique {
            consecutive,
            dim,
            return_inverse: opts.return_inverse,
            return_counts: opts.return_counts,
        };
        let mut out = call(&op, &[self])?.into_vec();
        let counts = out.pop().filter(|_| opts.return_counts);
        let inverse = out.pop().filter(|_| opts.return_inverse);
        let values = out
            .pop()
            .ok_or_else(|| Error::invalid(name, "the kernel returned no values"))?;
        Ok(UniqueOutput {
            values,
            inverse,
            counts,
        })
    }
}
