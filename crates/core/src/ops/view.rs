//! View operators: new shapes and strides over the same storage, no copy.
//!
//! Every view kind is an operator of its own (so autograd can give each its
//! backward formula) sharing one backend-independent kernel that computes
//! the new [`Layout`]. `reshape`, `flatten`, `t`, `split`... are front ends
//! built on them.

use crate::autograd::BackwardCtx;
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call1, downcast_op};
use crate::layout::{Dims, Layout, normalize_dim};
use crate::ops::grad_util::{grad0, sum_to};
use crate::{Error, IntoShape, Result, Tensor, TensorOptions};

/// What a view does.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewKind {
    /// `view(shape)`; one entry may be -1.
    View(Vec<i64>),
    /// `permute(dims)`.
    Permute(Vec<i64>),
    /// `transpose(d0, d1)`.
    Transpose(i64, i64),
    /// `t()`: transposes a matrix, leaves 0-d and 1-d tensors as they are.
    T,
    /// `expand(shape)`; -1 keeps a size.
    Expand(Vec<i64>),
    /// Python slicing of one dim.
    Slice {
        /// The dim.
        dim: i64,
        /// First index (may be negative).
        start: Option<i64>,
        /// One past the last index (may be negative).
        end: Option<i64>,
        /// Step (positive).
        step: i64,
    },
    /// `narrow(dim, start, length)`.
    Narrow {
        /// The dim.
        dim: i64,
        /// First index (may be negative).
        start: i64,
        /// Number of elements.
        length: usize,
    },
    /// `select(dim, index)`: removes the dim.
    Select {
        /// The dim.
        dim: i64,
        /// The index (may be negative).
        index: i64,
    },
    /// `squeeze(dims)`; `None` drops every size-1 dim.
    Squeeze(Option<Vec<i64>>),
    /// `squeeze(dim)`: the one-dim overload (node `SqueezeBackward1`).
    SqueezeDim(i64),
    /// `unsqueeze(dim)`.
    Unsqueeze(i64),
    /// `as_strided(size, stride, offset)`.
    AsStrided {
        /// Shape.
        shape: Vec<usize>,
        /// Strides in elements.
        strides: Vec<usize>,
        /// Storage offset in elements.
        offset: usize,
        /// Strides of the input, in the same storage coordinates (the
        /// backward writes the gradient through the result's geometry and
        /// reads it back through the input's).
        input_strides: Vec<usize>,
        /// Storage offset of the input.
        input_offset: usize,
    },
    /// `alias()`: the same layout (what `detach` returns).
    Alias,
    /// `_unsafe_view(shape)`: `view` of a fresh temporary, the last step of
    /// a `reshape` that copies (node `UnsafeViewBackward0`, as PyTorch's).
    UnsafeView(Vec<i64>),
    /// `_reshape_alias(shape)`: the view `reshape` makes of a tensor that
    /// is not contiguous but whose strides allow one (node
    /// `ReshapeAliasBackward0`, as PyTorch's).
    ReshapeAlias(Vec<i64>),
    /// `squeeze_(dim)` of a temporary (the end of `matmul` of a vector and
    /// a matrix), a new tensor rather than a view (node `SqueezeBackward4`).
    SqueezeInplace(i64),
    /// `diagonal(offset, dim1, dim2)`: the diagonal as a new last dim.
    Diagonal {
        /// Above (positive) or below (negative) the main diagonal.
        offset: i64,
        /// First dim of the matrices.
        dim1: i64,
        /// Second dim of the matrices.
        dim2: i64,
    },
    /// `unfold(dim, size, step)`: overlapping windows along `dim`.
    Unfold {
        /// The dim.
        dim: i64,
        /// Window length.
        size: usize,
        /// Distance between window starts.
        step: usize,
    },
}

/// Dispatch table of `view`.
pub static VIEW: OpEntry = OpEntry::differentiable("view");
/// Dispatch table of `permute`.
pub static PERMUTE: OpEntry = OpEntry::differentiable("permute");
/// Dispatch table of `transpose.int`.
pub static TRANSPOSE: OpEntry = OpEntry::differentiable("transpose.int");
/// Dispatch table of `t`.
pub static T: OpEntry = OpEntry::differentiable("t");
/// Dispatch table of `expand`.
pub static EXPAND: OpEntry = OpEntry::differentiable("expand");
/// Dispatch table of `slice.Tensor`.
pub static SLICE: OpEntry = OpEntry::differentiable("slice.Tensor");
/// Dispatch table of `narrow`.
pub static NARROW: OpEntry = OpEntry::differentiable("narrow");
/// Dispatch table of `select.int`.
pub static SELECT: OpEntry = OpEntry::differentiable("select.int");
/// Dispatch table of `squeeze.dims`, which also runs PyTorch's `squeeze`
/// (every size-1 dim) and `squeeze.dim`.
pub static SQUEEZE: OpEntry = OpEntry::differentiable("squeeze.dims");
/// Dispatch table of `unsqueeze`.
pub static UNSQUEEZE: OpEntry = OpEntry::differentiable("unsqueeze");
/// Dispatch table of `as_strided`.
pub static AS_STRIDED: OpEntry = OpEntry::differentiable("as_strided");
/// Dispatch table of `alias`.
pub static ALIAS: OpEntry = OpEntry::differentiable("alias");

/// Dispatch table of `_unsafe_view`.
pub static UNSAFE_VIEW: OpEntry = OpEntry::differentiable("_unsafe_view");

/// Dispatch table of `_reshape_alias`.
pub static RESHAPE_ALIAS: OpEntry = OpEntry::differentiable("_reshape_alias");
/// Dispatch table of `squeeze_.dim`.
pub static SQUEEZE_INPLACE: OpEntry = OpEntry::differentiable("squeeze_.dim");
/// Dispatch table of `diagonal`.
pub static DIAGONAL: OpEntry = OpEntry::differentiable("diagonal");
/// Dispatch table of `unfold`.
pub static UNFOLD: OpEntry = OpEntry::differentiable("unfold");

/// Every view operator's table.
pub const VIEW_ENTRIES: [&OpEntry; 17] = [
    &VIEW,
    &PERMUTE,
    &TRANSPOSE,
    &T,
    &EXPAND,
    &SLICE,
    &NARROW,
    &SELECT,
    &SQUEEZE,
    &UNSQUEEZE,
    &AS_STRIDED,
    &ALIAS,
    &UNSAFE_VIEW,
    &RESHAPE_ALIAS,
    &SQUEEZE_INPLACE,
    &DIAGONAL,
    &UNFOLD,
];

/// A view operator instance.
#[derive(Debug, Clone)]
pub struct ViewOp(pub ViewKind);

impl ViewOp {
    /// The layout of the view of a tensor with layout `l`.
    pub fn apply(&self, l: &Layout, storage_elems: usize) -> Result<Layout> {
        let name = self.entry().base_name();
        match &self.0 {
            ViewKind::View(shape) | ViewKind::UnsafeView(shape) | ViewKind::ReshapeAlias(shape) => l.view(name, shape),
            ViewKind::Permute(p) => l.permute(name, p),
            ViewKind::Transpose(a, b) => l.transpose(name, *a, *b),
            ViewKind::T if l.ndim() < 2 => Ok(l.clone()),
            ViewKind::T => l.transpose(name, 0, 1),
            ViewKind::Expand(shape) => l.expand(name, shape),
            ViewKind::Slice { dim, start, end, step } => l.slice(name, *dim, *start, *end, *step),
            ViewKind::Narrow { dim, start, length } => l.narrow(name, *dim, *start, *length),
            ViewKind::Select { dim, index } => l.select(name, *dim, *index),
            ViewKind::Squeeze(dims) => l.squeeze(name, dims.as_deref()),
            ViewKind::SqueezeDim(d) | ViewKind::SqueezeInplace(d) => l.squeeze(name, Some(&[*d])),
            ViewKind::Unsqueeze(d) => l.unsqueeze(name, *d),
            ViewKind::AsStrided {
                shape, strides, offset, ..
            } => {
                if shape.len() != strides.len() {
                    return Err(Error::invalid(
                        name,
                        format!(
                            "mismatch in length of strides ({}) and shape ({})",
                            strides.len(),
                            shape.len()
                        ),
                    ));
                }
                let nl = Layout {
                    shape: shape.as_slice().into(),
                    strides: strides.as_slice().into(),
                    offset: *offset,
                };
                if nl.numel() > 0 && nl.storage_end() > storage_elems {
                    return Err(Error::invalid(
                        name,
                        format!(
                            "setting a view with size {shape:?}, stride {strides:?}, offset {offset} needs {} elements \
                             but the storage holds {storage_elems}",
                            nl.storage_end()
                        ),
                    ));
                }
                Ok(nl)
            }
            ViewKind::Alias => Ok(l.clone()),
            ViewKind::Diagonal { offset, dim1, dim2 } => l.diagonal(name, *offset, *dim1, *dim2),
            ViewKind::Unfold { dim, size, step } => l.unfold(name, *dim, *size, *step),
        }
    }
}

impl Op for ViewOp {
    fn entry(&self) -> &'static OpEntry {
        match &self.0 {
            ViewKind::View(_) => &VIEW,
            ViewKind::Permute(_) => &PERMUTE,
            ViewKind::Transpose(..) => &TRANSPOSE,
            ViewKind::T => &T,
            ViewKind::Expand(_) => &EXPAND,
            ViewKind::Slice { .. } => &SLICE,
            ViewKind::Narrow { .. } => &NARROW,
            ViewKind::Select { .. } => &SELECT,
            ViewKind::Squeeze(_) | ViewKind::SqueezeDim(_) => &SQUEEZE,
            ViewKind::Unsqueeze(_) => &UNSQUEEZE,
            ViewKind::AsStrided { .. } => &AS_STRIDED,
            ViewKind::Alias => &ALIAS,
            ViewKind::UnsafeView(_) => &UNSAFE_VIEW,
            ViewKind::ReshapeAlias(_) => &RESHAPE_ALIAS,
            ViewKind::SqueezeInplace(_) => &SQUEEZE_INPLACE,
            ViewKind::Diagonal { .. } => &DIAGONAL,
            ViewKind::Unfold { .. } => &UNFOLD,
        }
    }

    fn backward_name(&self) -> String {
        match &self.0 {
            ViewKind::View(_) => "ViewBackward0",
            ViewKind::Permute(_) => "PermuteBackward0",
            ViewKind::Transpose(..) => "TransposeBackward0",
            ViewKind::T => "TBackward0",
            ViewKind::Expand(_) => "ExpandBackward0",
            ViewKind::Slice { .. } => "SliceBackward0",
            // PyTorch's narrow is a slice.
            ViewKind::Narrow { .. } => "SliceBackward0",
            ViewKind::Select { .. } => "SelectBackward0",
            ViewKind::Squeeze(None) => "SqueezeBackward0",
            ViewKind::SqueezeDim(_) => "SqueezeBackward1",
            ViewKind::Squeeze(Some(_)) => "SqueezeBackward2",
            ViewKind::Unsqueeze(_) => "UnsqueezeBackward0",
            ViewKind::AsStrided { .. } => "AsStridedBackward0",
            ViewKind::Alias => "AliasBackward0",
            ViewKind::UnsafeView(_) => "UnsafeViewBackward0",
            ViewKind::ReshapeAlias(_) => "ReshapeAliasBackward0",
            ViewKind::SqueezeInplace(_) => "SqueezeBackward4",
            ViewKind::Diagonal { .. } => "DiagonalBackward0",
            ViewKind::Unfold { .. } => "UnfoldBackward0",
        }
        .into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let shape = ctx.input_shape(0).to_vec();
        let shape_i: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
        let r = match &self.0 {
            ViewKind::View(_)
            | ViewKind::UnsafeView(_)
            | ViewKind::ReshapeAlias(_)
            | ViewKind::SqueezeInplace(_)
            | ViewKind::Squeeze(_)
            | ViewKind::SqueezeDim(_)
            | ViewKind::Unsqueeze(_) => g.reshape(&shape_i)?,
            ViewKind::Alias => g,
            ViewKind::Permute(p) => {
                let nd = p.len();
                let p: Vec<usize> = p
                    .iter()
                    .map(|&d| normalize_dim("permute", d, nd))
                    .collect::<Result<_>>()?;
                let mut inv = vec![0i64; nd];
                for (i, &d) in p.iter().enumerate() {
                    inv[d] = i as i64;
                }
                g.permute(&inv)?
            }
            ViewKind::Transpose(a, b) => g.transpose(*a, *b)?,
            ViewKind::T => g.t()?,
            ViewKind::Expand(_) => sum_to(&g, &shape)?,
            ViewKind::AsStrided { input_strides, .. }
                if as_strided_layouts(&self.0, &shape).is_some_and(|(_, input)| input.has_overlapping_elements()) =>
            {
                return Err(Error::invalid(
                    "as_strided",
                    format!(
                        "backward through as_strided of an input whose elements overlap in memory (shape \
                         {shape:?}, strides {input_strides:?}) is not supported; clone() the input first"
                    ),
                ));
            }
            ViewKind::Unfold { dim, size, step } => unfold_backward(&g, &shape, *dim, *size, *step)?,
            ViewKind::Slice { .. }
            | ViewKind::Narrow { .. }
            | ViewKind::Select { .. }
            | ViewKind::AsStrided { .. }
            | ViewKind::Diagonal { .. } => call1(
                &ViewScatter {
                    view: self.0.clone(),
                    input_shape: shape.as_slice().into(),
                },
                &[&g],
            )?,
        };
        Ok(vec![Some(r)])
    }
}

/// The gradient of `unfold(dim, size, step)` of a tensor of `shape`: each
/// window's gradient added back where the window looked (windows overlap
/// when `step < size`), as one `index_add` along `dim`.
fn unfold_backward(g: &Tensor, shape: &[usize], dim: i64, size: usize, step: usize) -> Result<Tensor> {
    let nd = shape.len();
    if nd == 0 {
        // The one window holds the element (size 1) or nothing (size 0).
        return if g.numel() == 0 {
            crate::TensorOptions::like(g).zeros(())
        } else {
            g.reshape(())
        };
    }
    let d = normalize_dim("unfold", dim, nd)?;
    let windows = g.shape()[d];
    // (..., windows, ..., size) -> (..., windows, size, ...) -> (..., windows * size, ...)
    let moved = g.movedim(-1, d as i64 + 1)?;
    let mut merged: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
    merged[d] = (windows * size) as i64;
    let src = moved.reshape(&merged)?;
    let index: Vec<i64> = (0..windows)
        .flat_map(|w| (0..size).map(move |j| (w * step + j) as i64))
        .collect();
    let index = Tensor::from_vec(index, [windows * size])?.to_device(g.device())?;
    crate::TensorOptions::like(g)
        .zeros(shape)?
        .index_add(d as i64, &index, &src, 1)
}

/// Dispatch table of `ferrotorch::view_scatter`, the backward of slicing
/// views (not a PyTorch operator: it stands for PyTorch's `slice_backward`,
/// `select_backward` and `as_strided_scatter`).
pub static VIEW_SCATTER: OpEntry = OpEntry::differentiable("ferrotorch::view_scatter");

/// Zeros of `input_shape` with the gradient written where the view `view`
/// of such a tensor would look: the backward of slice, narrow, select and
/// as_strided. Its own backward is the view applied to the gradient.
#[derive(Debug, Clone)]
pub struct ViewScatter {
    /// The view whose backward this is.
    pub view: ViewKind,
    /// Shape of the viewed tensor.
    pub input_shape: Dims,
}

impl Op for ViewScatter {
    fn entry(&self) -> &'static OpEntry {
        &VIEW_SCATTER
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        Ok(smallvec::smallvec![OutSpec::new(
            self.input_shape.clone(),
            inputs[0].dtype()
        )])
    }

    fn backward(&self, _ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let gg = grad0(grads)?;
        if let Some((result, input)) = as_strided_layouts(&self.view, &self.input_shape) {
            // The transpose of the scatter: the same storage-span trick with
            // the two geometries swapped.
            let gather = ViewScatter {
                view: ViewKind::AsStrided {
                    shape: input.shape.to_vec(),
                    strides: input.strides.to_vec(),
                    offset: input.offset,
                    input_strides: result.strides.to_vec(),
                    input_offset: result.offset,
                },
                input_shape: result.shape,
            };
            return Ok(vec![Some(call1(&gather, &[&gg])?)]);
        }
        Ok(vec![Some(call1(&ViewOp(self.view.clone()), &[&gg])?)])
    }
}

fn view_scatter_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op: &ViewScatter = downcast_op(op)?;
    let out = outputs[0];
    if let Some((result, input)) = as_strided_layouts(&op.view, out.shape()) {
        return as_strided_scatter(inputs[0], out, &result, &input);
    }
    out.zero_()?;
    call1(&ViewOp(op.view.clone()), &[out])?.copy_(inputs[0])?;
    Ok(())
}

/// The result and input geometries of an `as_strided` view of an input of
/// `input_shape` (`None` for other views).
fn as_strided_layouts(view: &ViewKind, input_shape: &[usize]) -> Option<(Layout, Layout)> {
    let ViewKind::AsStrided {
        shape,
        strides,
        offset,
        input_strides,
        input_offset,
    } = view
    else {
        return None;
    };
    let layout = |shape: &[usize], strides: &[usize], offset| Layout {
        shape: shape.into(),
        strides: strides.into(),
        offset,
    };
    Some((
        layout(shape, strides, *offset),
        layout(input_shape, input_strides, *input_offset),
    ))
}

/// The backward of `as_strided` (PyTorch's `as_strided_backward` for inputs
/// without overlapping memory, checked by the caller): `grad` is written into
/// a zeroed copy of the storage span through the `result` geometry (summed
/// where result elements share a slot), then read into `out` through the
/// `input` geometry, so input strides and storage offsets are honoured.
/// With the geometries swapped it is the forward gather (its transpose).
fn as_strided_scatter(grad: &Tensor, out: &Tensor, result: &Layout, input: &Layout) -> Result<()> {
    let lo = result.offset.min(input.offset);
    let span_len = result.storage_end().max(input.storage_end()) - lo;
    let span = TensorOptions::like(grad).zeros([span_len])?;
    let (shape, strides) = (result.shape.as_slice(), result.strides.as_slice());
    if result.has_overlapping_elements() {
        // Several result elements share a storage slot: their gradients add
        // up, at the slots the result's geometry reads.
        let slots = Tensor::arange(span_len as i64)?
            .as_strided(shape, strides, result.offset - lo)?
            .reshape([-1])?
            .to(grad.device())?;
        span.scatter_add_(0, &slots, &grad.reshape([-1])?)?;
    } else {
        span.as_strided(shape, strides, result.offset - lo)?.copy_(grad)?;
    }
    out.copy_(&span.as_strided(&input.shape, &input.strides, input.offset - lo)?)?;
    Ok(())
}

fn view_kernel(call: &Call) -> Result<Tensors> {
    let op: &ViewOp = downcast_op(call.op)?;
    let x = call.inputs[0];
    let elems = x.storage().nbytes() / x.element_size();
    let layout = op.apply(x.layout(), elems)?;
    // `view_with_layout` checks that the view stays inside its storage.
    let v = match op.0 {
        ViewKind::UnsafeView(_) | ViewKind::SqueezeInplace(_) => x.unsafe_view_for(op.entry().base_name(), layout)?,
        _ => x.view_for(op.entry().base_name(), layout)?,
    };
    Ok(smallvec::smallvec![v])
}

pub(crate) fn register() -> Result<()> {
    for e in VIEW_ENTRIES {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(view_kernel))?;
    }
    VIEW_SCATTER.register_builtin(Slot::AnyBackend, Kernel::Structured(view_scatter_kernel))
}

fn view_op(x: &Tensor, kind: ViewKind) -> Result<Tensor> {
    let v = call1(&ViewOp(kind), &[x])?;
    crate::autograd::graph::mark_view(x, &v);
    Ok(v)
}

/// `_unsafe_view(x, shape)`: `x` (a temporary the caller made, e.g. a
/// matmul's output) seen with another shape, as a new tensor rather than a
/// view (node `UnsafeViewBackward0`).
pub(crate) fn unsafe_view(x: &Tensor, shape: &[i64]) -> Result<Tensor> {
    view_op(x, ViewKind::UnsafeView(shape.to_vec()))
}

/// `squeeze_(dim)` of a temporary the caller made (node `SqueezeBackward4`).
pub(crate) fn squeeze_temporary(x: &Tensor, dim: i64) -> Result<Tensor> {
    view_op(x, ViewKind::SqueezeInplace(dim))
}

fn to_i64(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&s| s as i64).collect()
}

/// # Views
///
/// New shapes and strides over the same storage, never copying (`reshape`
/// copies only when the strides require it, as PyTorch's).
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::arange(6)?.reshape((2, 3))?;
/// assert_eq!(x.t()?.shape(), [3, 2]);
/// assert_eq!(x.unsqueeze(0)?.shape(), [1, 2, 3]);
/// assert_eq!(x.narrow(1, 1, 2)?.to_vec::<i64>()?, [1, 2, 4, 5]);
/// assert_eq!(x.flatten((0, -1))?.shape(), [6]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// The same elements with another shape, never copying; an error when
    /// the strides do not allow it (then use [`Tensor::reshape`]). One entry may be -1.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// let x = Tensor::arange(12)?;
    /// assert_eq!(x.view((3, -1))?.shape(), &[3, 4]); // x.view(3, -1)
    /// assert_eq!(x.view([2, 2, 3])?.shape(), &[2, 2, 3]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn view(&self, shape: impl IntoShape) -> Result<Tensor> {
        view_op(self, ViewKind::View(shape.into_shape().to_vec()))
    }

    /// Like [`Tensor::view`], copying only when the strides require it.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// let x = Tensor::arange(6)?.view((2, 3))?.t()?; // not contiguous
    /// let y = x.reshape(-1)?;                         // a copy, as PyTorch's
    /// assert_eq!(y.to_vec::<i64>()?, [0, 3, 1, 4, 2, 5]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn reshape(&self, shape: impl IntoShape) -> Result<Tensor> {
        self.reshape_i64(&shape.into_shape())
    }

    fn reshape_i64(&self, shape: &[i64]) -> Result<Tensor> {
        let target = crate::layout::infer_shape("reshape", shape, self.numel())?;
        if self.is_contiguous() {
            self.view(shape)
        } else if crate::layout::view_strides(self.shape(), self.strides(), &target).is_some() {
            view_op(self, ViewKind::ReshapeAlias(shape.to_vec()))
        } else {
            // As PyTorch: `_unsafe_view(clone(contiguous), shape)`.
            view_op(&self.contiguous()?, ViewKind::UnsafeView(shape.to_vec()))
        }
    }

    /// Reorders the dims.
    pub fn permute(&self, dims: impl IntoShape) -> Result<Tensor> {
        view_op(self, ViewKind::Permute(dims.into_shape().to_vec()))
    }

    /// Swaps two dims.
    pub fn transpose(&self, dim0: i64, dim1: i64) -> Result<Tensor> {
        view_op(self, ViewKind::Transpose(dim0, dim1))
    }

    /// Transpose of a matrix (a 0-d or 1-d tensor is returned as is).
    pub fn t(&self) -> Result<Tensor> {
        match self.ndim() {
            0..=2 => view_op(self, ViewKind::T),
            n => Err(Error::invalid(
                "t",
                format!("t() expects a tensor with <= 2 dimensions, but self is {n}D"),
            )),
        }
    }

    /// Broadcasts to `shape` without copying (-1 keeps a size).
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// let x = Tensor::arange(3)?;
    /// assert_eq!(x.expand((2, -1))?.shape(), &[2, 3]); // x.expand(2, -1)
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn expand(&self, shape: impl IntoShape) -> Result<Tensor> {
        view_op(self, ViewKind::Expand(shape.into_shape().to_vec()))
    }

    /// Broadcasts to `other`'s shape.
    pub fn expand_as(&self, other: &Tensor) -> Result<Tensor> {
        self.expand(other.shape())
    }

    /// Broadcasts to `shape` (`torch.broadcast_to`: as `expand`, -1 keeps a size).
    pub fn broadcast_to(&self, shape: impl IntoShape) -> Result<Tensor> {
        self.expand(shape)
    }

    /// `self[start:end:step]` along `dim` (Python slice semantics).
    pub fn slice(&self, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Result<Tensor> {
        view_op(self, ViewKind::Slice { dim, start, end, step })
    }

    /// `length` elements of `dim` from `start` (negative `start` counts
    /// from the end; a negative `length` is an error).
    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Tensor> {
        let length =
            usize::try_from(length).map_err(|_| Error::invalid("narrow", "narrow(): length must be non-negative."))?;
        view_op(self, ViewKind::Narrow { dim, start, length })
    }

    /// The slice at `index` of `dim`, which is removed.
    pub fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        view_op(self, ViewKind::Select { dim, index })
    }

    /// Removes every size-1 dim.
    pub fn squeeze(&self) -> Result<Tensor> {
        view_op(self, ViewKind::Squeeze(None))
    }

    /// Removes `dim` if its size is 1.
    pub fn squeeze_dim(&self, dim: i64) -> Result<Tensor> {
        view_op(self, ViewKind::SqueezeDim(dim))
    }

    /// Removes those of `dims` whose size is 1.
    pub fn squeeze_dims(&self, dims: impl IntoShape) -> Result<Tensor> {
        view_op(self, ViewKind::Squeeze(Some(dims.into_shape().to_vec())))
    }

    /// Inserts a size-1 dim at `dim`.
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        view_op(self, ViewKind::Unsqueeze(dim))
    }

    /// The `offset`-th diagonal of the matrices over `dim1` and `dim2`, as a
    /// view whose last dim is the diagonal (`torch.diagonal`; positive
    /// `offset` above the main diagonal). Errors for equal or bad dims.
    pub fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        view_op(self, ViewKind::Diagonal { offset, dim1, dim2 })
    }

    /// Windows of `size` elements every `step` along `dim`, as a view with
    /// one more (last) dim of `size` (`Tensor.unfold`; windows overlap
    /// when `step < size`). Errors when `size` is negative or exceeds the
    /// dim, or `step` is not positive (PyTorch's messages).
    pub fn unfold(&self, dim: i64, size: i64, step: i64) -> Result<Tensor> {
        let Ok(size) = usize::try_from(size) else {
            return Err(Error::invalid("unfold", format!("size is {size} but must be >= 0")));
        };
        let step = match usize::try_from(step) {
            Ok(s) if s > 0 => s,
            _ => return Err(Error::invalid("unfold", format!("step is {step} but must be > 0"))),
        };
        view_op(self, ViewKind::Unfold { dim, size, step })
    }

    /// A view with explicit sizes, strides and storage offset (checked
    /// against the storage's size; negative sizes or strides are errors).
    pub fn as_strided(&self, shape: impl IntoShape, strides: impl IntoShape, offset: usize) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("as_strided", &shape.into_shape())?;
        let strides = strides.into_shape();
        if strides.iter().any(|&s| s < 0) {
            return Err(Error::invalid(
                "as_strided",
                format!("as_strided: Negative strides are not supported at the moment, got strides: {strides:?}"),
            ));
        }
        let strides: Vec<usize> = strides.iter().map(|&s| s as usize).collect();
        view_op(
            self,
            ViewKind::AsStrided {
                shape: shape.to_vec(),
                strides: strides.to_vec(),
                offset,
                input_strides: self.strides().to_vec(),
                input_offset: self.storage_offset(),
            },
        )
    }

    /// Another tensor handle over the same data and layout (a view).
    pub fn alias(&self) -> Result<Tensor> {
        view_op(self, ViewKind::Alias)
    }

    /// Merges dims `start_dim..=end_dim` into one (`torch.flatten`):
    /// `x.flatten(())` every dim, `x.flatten(1)` from dim 1 to the last,
    /// `x.flatten((1, 2))` dims 1 and 2.
    ///
    /// ```
    /// # use ferrotorch_core::Tensor;
    /// let x = Tensor::zeros([2, 3, 4])?;
    /// assert_eq!(x.flatten(())?.shape(), [24]);
    /// assert_eq!(x.flatten(1)?.shape(), [2, 12]);
    /// assert_eq!(x.flatten((0, 1))?.shape(), [6, 4]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn flatten(&self, dims: impl FlattenDims) -> Result<Tensor> {
        let (start_dim, end_dim) = dims.start_end();
        let s = normalize_dim("flatten", start_dim, self.ndim())?;
        let e = normalize_dim("flatten", end_dim, self.ndim())?;
        if self.ndim() == 0 {
            return self.reshape([1]);
        }
        if s > e {
            return Err(Error::invalid("flatten", "start_dim cannot come after end_dim"));
        }
        if s == e {
            // Nothing to merge: the tensor itself, as PyTorch returns `self`.
            return Ok(self.clone());
        }
        let mut shape: Vec<i64> = to_i64(&self.shape()[..s]);
        shape.push(self.shape()[s..=e].iter().product::<usize>() as i64);
        shape.extend(to_i64(&self.shape()[e + 1..]));
        self.reshape(shape)
    }

    /// Splits `dim` into `sizes` (one entry may be -1).
    pub fn unflatten(&self, dim: i64, sizes: impl IntoShape) -> Result<Tensor> {
        let sizes = sizes.into_shape();
        let d = normalize_dim("unflatten", dim, self.ndim())?;
        if self.ndim() == 0 {
            // PyTorch wraps the dim, then asks the 0-d tensor for its size.
            return Err(crate::layout::no_dims("unflatten", d as i64));
        }
        if sizes.is_empty() {
            return Err(Error::invalid("unflatten", "unflatten: sizes must be non-empty"));
        }
        let inner = crate::layout::infer_shape("unflatten", &sizes, self.shape()[d])?;
        let mut shape: Vec<i64> = to_i64(&self.shape()[..d]);
        shape.extend(to_i64(&inner));
        shape.extend(to_i64(&self.shape()[d + 1..]));
        self.view(shape)
    }

    /// The shape as signed sizes (for passing to `view`/`expand`).
    pub fn shape_i64(&self) -> Vec<i64> {
        to_i64(self.shape())
    }
}

/// The dims [`Tensor::flatten`] merges: `()` (all, PyTorch's defaults), a
/// start dim (to the last) or `(start_dim, end_dim)`.
pub trait FlattenDims {
    /// `(start_dim, end_dim)`, inclusive; negative counts from the end.
    fn start_end(self) -> (i64, i64);
}

impl FlattenDims for () {
    fn start_end(self) -> (i64, i64) {
        (0, -1)
    }
}

impl FlattenDims for i64 {
    fn start_end(self) -> (i64, i64) {
        (self, -1)
    }
}

impl FlattenDims for i32 {
    fn start_end(self) -> (i64, i64) {
        (i64::from(self), -1)
    }
}

impl FlattenDims for (i64, i64) {
    fn start_end(self) -> (i64, i64) {
        self
    }
}

impl FlattenDims for (i32, i32) {
    fn start_end(self) -> (i64, i64) {
        (i64::from(self.0), i64::from(self.1))
    }
}
