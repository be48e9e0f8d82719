//! Multi-output views: `split`, `split_with_sizes` (and `chunk`, which is
//! one of them) and `unbind`. Each is one operator with one node for all
//! its outputs (`SplitBackward0`, `SplitWithSizesBackward0`,
//! `UnbindBackward0`), whose backward concatenates the outputs' gradients
//! (zeros for outputs without one), as PyTorch's.
//!
//! As in PyTorch, the outputs may not be written in place while autograd
//! could see it (see `autograd::view::check_inplace_view`).

use crate::autograd::{BackwardCtx, Saves, ViewCreation};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call, downcast_op};
use crate::layout::normalize_dim;
use crate::{Error, IntoShape, Result, Tensor, TensorOptions};

/// Dispatch table of `split.Tensor`.
pub static SPLIT: OpEntry = OpEntry::differentiable("split.Tensor");
/// Dispatch table of `split_with_sizes`.
pub static SPLIT_WITH_SIZES: OpEntry = OpEntry::differentiable("split_with_sizes");
/// Dispatch table of `unbind.int`.
pub static UNBIND: OpEntry = OpEntry::differentiable("unbind.int");

/// Which multi-output view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitKind {
    /// `split(split_size, dim)`: pieces of one size, the last one smaller.
    Split,
    /// `split_with_sizes(sizes, dim)` (also `chunk` of an empty dim).
    WithSizes,
    /// `unbind(dim)`: every index of `dim`, without the dim.
    Unbind,
}

/// The views of `x` along `dim`: piece `i` is `sizes[i]` long (1 for unbind,
/// whose pieces drop the dim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Which operator.
    pub kind: SplitKind,
    /// The (normalised) dim that is split.
    pub dim: usize,
    /// The pieces' lengths along `dim`; they sum to its size.
    pub sizes: Vec<usize>,
}

impl Split {
    /// Checks the pieces against `x`'s shape.
    fn check(&self, x: &Tensor) -> Result<usize> {
        let name = self.entry().base_name();
        let n = *x.shape().get(self.dim).ok_or_else(|| {
            Error::invalid(
                name,
                format!("dim {} out of range for a {}-d tensor", self.dim, x.ndim()),
            )
        })?;
        let total = self.sizes.iter().try_fold(0usize, |a, &s| a.checked_add(s));
        if total != Some(n) || (self.kind == SplitKind::Unbind && self.sizes.iter().any(|&s| s != 1)) {
            return Err(Error::invalid(
                name,
                format!(
                    "piece sizes {:?} must sum to the size of dim {} ({n})",
                    self.sizes, self.dim
                ),
            ));
        }
        Ok(n)
    }
}

impl Op for Split {
    fn entry(&self) -> &'static OpEntry {
        match self.kind {
            SplitKind::Split => &SPLIT,
            SplitKind::WithSizes => &SPLIT_WITH_SIZES,
            SplitKind::Unbind => &UNBIND,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        self.check(x)?;
        Ok(self
            .sizes
            .iter()
            .map(|&len| {
                let mut shape = x.shape().to_vec();
                if self.kind == SplitKind::Unbind {
                    shape.remove(self.dim);
                } else {
                    shape[self.dim] = len;
                }
                OutSpec::new(shape, x.dtype())
            })
            .collect())
    }

    fn saves(&self) -> Saves {
        Saves::NONE
    }

    fn backward_name(&self) -> String {
        match self.kind {
            SplitKind::Split => "SplitBackward0",
            SplitKind::WithSizes => "SplitWithSizesBackward0",
            SplitKind::Unbind => "UnbindBackward0",
        }
        .into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let Some(like) = grads.iter().flatten().next() else {
            return Ok(vec![None]);
        };
        let opts = TensorOptions::like(like);
        let mut piece_shape = ctx.input_shape(0).to_vec();
        // Outputs past the last one with a gradient have no entry at all.
        let pieces: Vec<Tensor> = (self.sizes.iter().enumerate())
            .map(|(i, &len)| {
                piece_shape[self.dim] = len;
                let g = match grads.get(i).and_then(Option::as_ref) {
                    Some(g) if self.kind == SplitKind::Unbind => g.unsqueeze(self.dim as i64)?,
                    Some(g) => g.clone(),
                    None => opts.zeros(&piece_shape)?,
                };
                Ok(g)
            })
            .collect::<Result<_>>()?;
        let refs: Vec<&Tensor> = pieces.iter().collect();
        Ok(vec![Some(Tensor::cat(&refs, self.dim as i64)?)])
    }
}

/// The views themselves (any backend: they only share the input's storage).
fn split_kernel(call: &Call) -> Result<Tensors> {
    let op: &Split = downcast_op(call.op)?;
    let x = call.inputs[0];
    op.check(x)?;
    let name = op.entry().base_name();
    let mut start = 0usize;
    op.sizes
        .iter()
        .map(|&len| {
            let layout = if op.kind == SplitKind::Unbind {
                x.layout().select(name, op.dim as i64, start as i64)?
            } else {
                x.layout().narrow(name, op.dim as i64, start as i64, len)?
            };
            start += len;
            x.view_for(name, layout)
        })
        .collect()
}

pub(crate) fn register() -> Result<()> {
    for e in [&SPLIT, &SPLIT_WITH_SIZES, &UNBIND] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(split_kernel))?;
    }
    Ok(())
}

/// Runs a multi-output view and marks its outputs as such: with a node,
/// PyTorch's `MULTI_OUTPUT_NODE` views; without one (grad mode off, or an
/// input that does not require grad), views made as if in no-grad mode.
fn run(x: &Tensor, op: Split) -> Result<Vec<Tensor>> {
    let outs = call(&op, &[x])?.into_vec();
    for o in &outs {
        if o.is_floating_point() {
            let creation = if o.grad_fn().is_some() {
                ViewCreation::MultiOutput
            } else {
                ViewCreation::NoGrad { multi: true }
            };
            o.set_view_creation(creation);
        }
    }
    Ok(outs)
}

/// # Splitting
///
/// Pieces of a tensor along a dim, as views.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::arange(6)?;
/// let parts = x.chunk(3, 0)?;
/// assert_eq!(parts[2].to_vec::<i64>()?, [4, 5]);
/// assert_eq!(x.split_sizes([1, 5], 0)?[1].shape(), [5]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// Splits `dim` into pieces of `size` (the last one smaller), as views
    /// (`torch.split` with an int; node `SplitBackward0`). An error for a
    /// 0-d tensor, a bad dim, a negative `size`, or `size == 0` on a
    /// nonempty dim (PyTorch's messages).
    pub fn split(&self, size: i64, dim: i64) -> Result<Vec<Tensor>> {
        if self.ndim() == 0 {
            return Err(Error::invalid("split", "split expects at least a 1-dimensional tensor"));
        }
        let d = normalize_dim("split", dim, self.ndim())?;
        let n = self.shape()[d];
        let Ok(size) = usize::try_from(size) else {
            return Err(Error::invalid(
                "split",
                format!("split expects split_size be non-negative, but got split_size={size}"),
            ));
        };
        if size == 0 && n != 0 {
            return Err(Error::invalid(
                "split",
                "split_size can only be 0 if dimension size is 0",
            ));
        }
        // As PyTorch: one piece when the dim is empty, else ceil(n / size).
        let count = if n == 0 { 1 } else { n.div_ceil(size) };
        let sizes = (0..count).map(|i| size.min(n - (i * size).min(n))).collect();
        run(
            self,
            Split {
                kind: SplitKind::Split,
                dim: d,
                sizes,
            },
        )
    }

    /// Splits `dim` into pieces of the given sizes, as views
    /// (`torch.split` with a list; node `SplitWithSizesBackward0`). An error
    /// when the sizes do not sum to the dim's size.
    pub fn split_sizes(&self, sizes: impl IntoShape, dim: i64) -> Result<Vec<Tensor>> {
        let sizes = sizes.into_shape();
        if sizes.iter().any(|&s| s < 0) {
            return Err(Error::invalid(
                "split_with_sizes",
                format!(
                    "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes={sizes:?}"
                ),
            ));
        }
        let sizes: Vec<usize> = sizes.iter().map(|&s| s as usize).collect();
        if self.ndim() == 0 {
            return Err(Error::invalid(
                "split_with_sizes",
                "split expects at least a 1-dimensional tensor",
            ));
        }
        let d = normalize_dim("split_with_sizes", dim, self.ndim())?;
        let n = self.shape()[d];
        if sizes.iter().try_fold(0usize, |a, &s| a.checked_add(s)) != Some(n) {
            return Err(Error::invalid(
                "split_with_sizes",
                format!("split_sizes {sizes:?} must sum to the size of dim {d} ({n})"),
            ));
        }
        run(
            self,
            Split {
                kind: SplitKind::WithSizes,
                dim: d,
                sizes,
            },
        )
    }

    /// Splits `dim` into `chunks` pieces of equal size (the last may be
    /// smaller, and there may be fewer), as PyTorch's `chunk`: a `split`,
    /// or for an empty dim `chunks` empty pieces. Errors for `chunks < 1`
    /// and a 0-d tensor (PyTorch's messages).
    pub fn chunk(&self, chunks: i64, dim: i64) -> Result<Vec<Tensor>> {
        let chunks = match usize::try_from(chunks) {
            Ok(c) if c > 0 => c,
            _ => {
                return Err(Error::invalid(
                    "chunk",
                    format!("chunk expects `chunks` to be greater than 0, got: {chunks}"),
                ));
            }
        };
        if self.ndim() == 0 {
            return Err(Error::invalid("chunk", "chunk expects at least a 1-dimensional tensor"));
        }
        let d = normalize_dim("chunk", dim, self.ndim())?;
        let n = self.shape()[d];
        if n == 0 {
            return self.split_sizes(vec![0; chunks], dim);
        }
        self.split(n.div_ceil(chunks) as i64, dim)
    }

    /// The slices along `dim`, each without that dim, as views (node
    /// `UnbindBackward0`). An error for a 0-d tensor or a bad dim.
    pub fn unbind(&self, dim: i64) -> Result<Vec<Tensor>> {
        let d = normalize_dim("unbind", dim, self.ndim())?;
        if self.ndim() == 0 {
            // PyTorch wraps the dim, then asks the 0-d tensor for its size.
            return Err(crate::layout::no_dims("unbind", d as i64));
        }
        run(
            self,
            Split {
                kind: SplitKind::Unbind,
                dim: d,
                sizes: vec![1; self.shape()[d]],
            },
        )
    }
}
