//! Index-driven operators: gather, scatter / scatter_add, index_select,
//! advanced (integer-tensor) indexing, nonzero; and the composites tril,
//! triu and one_hot.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call_out, call1};
use crate::layout::{Dims, broadcast_shapes, normalize_dim};
use crate::ops::grad_util::grad0;
use crate::{DType, Error, Result, Scalar, Tensor};

/// Dispatch table of `gather`.
pub static GATHER: OpEntry = OpEntry::differentiable("gather");
/// Dispatch table of `scatter.src` (a source tensor; `scatter_add` is [`SCATTER_ADD`]).
pub static SCATTER: OpEntry = OpEntry::differentiable("scatter.src");
/// Dispatch table of `scatter_add`.
pub static SCATTER_ADD: OpEntry = OpEntry::differentiable("scatter_add");
/// Dispatch table of `index_select`.
pub static INDEX_SELECT: OpEntry = OpEntry::differentiable("index_select");
/// Dispatch table of `index.Tensor` (advanced indexing).
pub static INDEX: OpEntry = OpEntry::differentiable("index.Tensor");
/// Dispatch table of `index_put` (`x[indices] = values`, and `+=` with accumulate).
pub static INDEX_PUT: OpEntry = OpEntry::differentiable("index_put");
/// Dispatch table of `nonzero`.
pub static NONZERO: OpEntry = OpEntry::new("nonzero");

fn check_index_dtype(op: &'static str, index: &Tensor) -> Result<()> {
    if index.dtype() != DType::I64 && index.dtype() != DType::I32 {
        return Err(Error::dtype(
            op,
            index.dtype(),
            "index must be an int64 (or int32) tensor",
        ));
    }
    Ok(())
}

/// `out[i][j][k] = x[index[i][j][k]][j][k]` (for `dim` 0), inputs `[x, index]`.
#[derive(Debug, Clone, Copy)]
pub struct Gather {
    /// The normalised dim.
    pub dim: usize,
}

impl Op for Gather {
    fn entry(&self) -> &'static OpEntry {
        &GATHER
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (x, index) = (inputs[0], inputs[1]);
        // As PyTorch: an empty index is not checked (any dtype, any dims);
        // the result is empty, shaped like it.
        if index.numel() == 0 {
            return Ok(smallvec::smallvec![OutSpec::new(index.dims(), x.dtype())]);
        }
        check_index_dtype("gather", index)?;
        // As PyTorch, a 0-d tensor counts as 1-d of one element here.
        if index.ndim().max(1) != x.ndim().max(1) {
            return Err(Error::shape(
                "gather",
                x.shape(),
                index.shape(),
                "index must have as many dims as the input",
            ));
        }
        for d in 0..index.ndim().min(x.ndim()) {
            if d != self.dim && index.shape()[d] > x.shape()[d] {
                return Err(Error::shape(
                    "gather",
                    x.shape(),
                    index.shape(),
                    format!("size of index at dim {d} must not exceed the input's"),
                ));
            }
        }
        Ok(smallvec::smallvec![OutSpec::new(index.dims(), x.dtype())])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i == 0
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b10)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let zeros = crate::TensorOptions::like(&g).zeros(ctx.input_shape(0))?;
        if g.numel() == 0 {
            return Ok(vec![Some(zeros), None]);
        }
        if zeros.ndim() == 0 {
            return Ok(vec![Some(g.sum()?.reshape(())?), None]);
        }
        Ok(vec![
            Some(zeros.scatter_add(self.dim as i64, &ctx.input(1)?, &g)?),
            None,
        ])
    }
}

/// `out = x` with `out[index[i][j]][j] = src[i][j]` (dim 0), or `+=` when
/// `add`; inputs `[x, index, src]`. Equal indices under `add` accumulate
/// in a fixed order.
#[derive(Debug, Clone, Copy)]
pub struct Scatter {
    /// The normalised dim.
    pub dim: usize,
    /// Accumulate instead of overwrite.
    pub add: bool,
    /// `src` is a wrapped scalar (`scatter(dim, index, value)`, whose node
    /// is `ScatterBackward1`).
    pub value: bool,
}

impl Op for Scatter {
    fn entry(&self) -> &'static OpEntry {
        if self.add { &SCATTER_ADD } else { &SCATTER }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (x, index, src) = (inputs[0], inputs[1], inputs[2]);
        let name = self.entry().base_name();
        check_index_dtype(name, index)?;
        if x.dtype() != src.dtype() {
            return Err(Error::DTypeMismatch {
                op: name,
                detail: format!(
                    "expected self and src to have the same dtype, got {} and {}",
                    x.dtype(),
                    src.dtype()
                ),
            });
        }
        // As PyTorch, an empty index scatters nothing and is not checked.
        if index.numel() == 0 {
            return Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())]);
        }
        // As PyTorch, a 0-d tensor counts as 1-d of one element here (and
        // a one-element src broadcasts).
        if index.ndim().max(1) != x.ndim().max(1) || (src.ndim().max(1) != index.ndim().max(1) && src.numel() > 1) {
            return Err(Error::shape(
                name,
                x.shape(),
                index.shape(),
                "index, src and self must have the same number of dims",
            ));
        }
        for d in 0..index.ndim() {
            if (d != self.dim && index.shape()[d] > x.shape().get(d).copied().unwrap_or(1))
                || (src.ndim() == index.ndim() && index.shape()[d] > src.shape()[d])
            {
                return Err(Error::shape(
                    name,
                    index.shape(),
                    src.shape(),
                    format!(
                        "size of index at dim {d} must not exceed the sizes of src and (except at dim {}) self",
                        self.dim
                    ),
                ));
            }
        }
        Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i != 1
    }

    fn backward_name(&self) -> String {
        match (self.add, self.value) {
            (true, _) => "ScatterAddBackward0",
            (false, true) => "ScatterBackward1",
            (false, false) => "ScatterBackward0",
        }
        .into()
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b110)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let index = ctx.input(1)?;
        let d = self.dim as i64;
        // Overwritten positions of `self` get no gradient; `src` gets what reached its targets.
        let gx = if self.add {
            g.clone()
        } else {
            g.scatter_value(d, &index, 0.0)?
        };
        let gsrc = if ctx.needs_grad(2) {
            // The index's shape: the engine sums it to a src that
            // broadcasts to it (a 0-d src, or one of size-1 dims) and
            // refuses a larger src, as PyTorch's validate_outputs does.
            Some(g.gather(d, &index)?)
        } else {
            None
        };
        Ok(vec![Some(gx), None, gsrc])
    }
}

/// Picks entries of `x` along `dim` by a 1-D index; inputs `[x, index]`.
#[derive(Debug, Clone, Copy)]
pub struct IndexSelect {
    /// The normalised dim.
    pub dim: usize,
}

impl Op for IndexSelect {
    fn entry(&self) -> &'static OpEntry {
        &INDEX_SELECT
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (x, index) = (inputs[0], inputs[1]);
        check_index_dtype("index_select", index)?;
        if index.ndim() > 1 {
            return Err(Error::shape(
                "index_select",
                x.shape(),
                index.shape(),
                "index must be a vector",
            ));
        }
        if x.ndim() == 0 && index.numel() != 1 {
            return Err(Error::invalid(
                "index_select",
                format!("index to scalar can have only 1 value, got {} value(s)", index.numel()),
            ));
        }
        let mut shape = x.dims();
        if x.ndim() > 0 {
            shape[self.dim] = index.numel();
        }
        Ok(smallvec::smallvec![OutSpec::new(shape, x.dtype())])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i == 0
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b10)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let shape = ctx.input_shape(0).to_vec();
        if shape.is_empty() {
            return Ok(vec![Some(g.sum()?.reshape(())?), None]);
        }
        // index_add: scatter_add of the gradient along `dim` with the index broadcast.
        let idx = ctx.input(1)?.reshape([-1])?;
        let d = self.dim;
        let mut view: Vec<i64> = vec![1; g.ndim()];
        view[d] = idx.numel() as i64;
        let idx = idx.reshape(&view)?.expand(g.shape())?;
        let zeros = crate::TensorOptions::like(&g).zeros(&shape)?;
        Ok(vec![Some(zeros.scatter_add(d as i64, &idx, &g)?), None])
    }
}

/// Advanced indexing of `count` consecutive dims starting at `start` by
/// index tensors of one (broadcast) shape; inputs `[x, idx_0, ..., idx_{count-1}]`.
/// The output replaces the indexed dims with the index shape.
#[derive(Debug, Clone, Copy)]
pub struct IndexTensors {
    /// First indexed dim.
    pub start: usize,
}

impl Op for IndexTensors {
    fn entry(&self) -> &'static OpEntry {
        &INDEX
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let idx = &inputs[1..];
        if self.start + idx.len() > x.ndim() {
            return Err(Error::invalid(
                "index",
                format!("too many indices for tensor of dimension {}", x.ndim()),
            ));
        }
        let mut bshape = Dims::new();
        for t in idx {
            check_index_dtype("index", t)?;
            bshape = broadcast_shapes("index", &bshape, t.shape())?;
        }
        let mut shape: Dims = x.shape()[..self.start].into();
        shape.extend_from_slice(&bshape);
        shape.extend_from_slice(&x.shape()[self.start + idx.len()..]);
        Ok(smallvec::smallvec![OutSpec::new(shape, x.dtype())])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i == 0
    }

    fn saves(&self) -> Saves {
        Saves::inputs(u64::MAX - 1)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let shape = ctx.input_shape(0).to_vec();
        let n: usize = shape.iter().product();
        // Where each output element came from: the same indexing applied to
        // the positions 0..n of the input; the gradient is added back there.
        let positions = flat_positions(&shape, g.device())?;
        let idx: Vec<Tensor> = (1..ctx.num_inputs()).map(|i| ctx.input(i)).collect::<Result<_>>()?;
        let mut inputs = vec![&positions];
        inputs.extend(idx.iter());
        let source = call1(self, &inputs)?.reshape([-1])?;
        let flat = crate::TensorOptions::like(&g).zeros([n])?;
        let gx = flat.scatter_add(0, &source, &g.reshape([-1])?)?.reshape(&shape)?;
        let mut out = vec![Some(gx)];
        out.resize(ctx.num_inputs(), None);
        Ok(out)
    }
}

/// `out = x` with the elements at `positions` (flat row-major positions in
/// `x`, one per element of the indexed shape) set to `values` broadcast to
/// that shape, or increased by them with `accumulate`; inputs
/// `[x, values, positions]`. The front ends ([`Tensor::index_put_`],
/// [`Tensor::i_set`](crate::Tensor::i_set)) turn PyTorch's index list into
/// the positions. Equal positions are written in row-major order (the last
/// wins; with `accumulate` every value is added).
#[derive(Debug, Clone, Copy)]
pub struct IndexPut {
    /// Add instead of overwrite.
    pub accumulate: bool,
}

impl Op for IndexPut {
    fn entry(&self) -> &'static OpEntry {
        &INDEX_PUT
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (x, values, positions) = (inputs[0], inputs[1], inputs[2]);
        if values.dtype() != x.dtype() {
            return Err(Error::DTypeMismatch {
                op: "index_put",
                detail: format!(
                    "Index put requires the source and destination dtypes match, got {} for the destination and {} \
                     for the source.",
                    x.dtype().scalar_type_name(),
                    values.dtype().scalar_type_name(),
                ),
            });
        }
        if positions.dtype() != DType::I64 {
            return Err(Error::dtype("index_put", positions.dtype(), "positions must be int64"));
        }
        let fits = broadcast_shapes("index_put", values.shape(), positions.shape())
            .is_ok_and(|b| b.as_slice() == positions.shape());
        if !fits {
            return Err(Error::shape(
                "index_put",
                values.shape(),
                positions.shape(),
                format!(
                    "shape mismatch: value tensor of shape {:?} cannot be broadcast to indexing result of shape {:?}",
                    values.shape(),
                    positions.shape()
                ),
            ));
        }
        Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i != 2
    }

    /// As PyTorch (which only warns): an expanded `self` is written element
    /// by element in order, the last write to a shared element winning.
    fn allows_overlapping_out(&self) -> bool {
        true
    }

    /// `x` is copied into the output before anything is written, so the
    /// output may be `x` itself; `values` aliasing it goes through a
    /// temporary.
    fn alias_safe_input(&self, i: usize) -> bool {
        i == 0
    }

    fn backward_name(&self) -> String {
        "IndexPutBackward0".into()
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b100)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let positions = ctx.input(2)?;
        let flat_pos = positions.reshape([-1])?;
        let flat_g = g.reshape([-1])?;
        // Overwritten elements of `x` get no gradient; `values` gets what
        // reached its targets (the engine sums it to a broadcast values).
        let gx = if self.accumulate || flat_pos.numel() == 0 {
            g.clone()
        } else {
            flat_g.scatter_value(0, &flat_pos, 0.0)?.reshape(g.shape())?
        };
        let gv = if ctx.needs_grad(1) {
            Some(flat_g.gather(0, &flat_pos)?.reshape(positions.shape())?)
        } else {
            None
        };
        Ok(vec![Some(gx), gv, None])
    }
}

/// `0..numel` as int64 in `shape` on `device`: the row-major position of
/// every element, which indexing maps to where each indexed element lives.
fn flat_positions(shape: &[usize], device: crate::Device) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    crate::TensorOptions::new()
        .dtype(DType::I64)
        .device(device)
        .arange(0, n as i64, 1)?
        .reshape(shape)
}

/// Indices of the nonzero elements as a `[n, ndim]` int64 tensor
/// (data-dependent shape: a functional kernel per backend).
#[derive(Debug, Clone, Copy)]
pub struct Nonzero;

impl Op for Nonzero {
    fn entry(&self) -> &'static OpEntry {
        &NONZERO
    }
}

/// # Gathering and scattering
///
/// `gather`, `scatter`, `index_select`, advanced indexing, `tril`/`triu`, `one_hot`.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]])?;
/// let idx = Tensor::new([[1i64], [0]])?;
/// assert_eq!(x.gather(1, &idx)?.to_vec::<f32>()?, [2.0, 3.0]);
/// assert_eq!(x.index_select(0, &Tensor::new([1i64])?)?.to_vec::<f32>()?, [3.0, 4.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `torch.gather(self, dim, index)`.
    pub fn gather(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("gather", dim, self.ndim())?;
        call1(&Gather { dim: d }, &[self, index])
    }

    fn scatter_impl(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        add: bool,
        value: bool,
        inplace: bool,
    ) -> Result<Tensor> {
        let d = normalize_dim("scatter", dim, self.ndim())?;
        if src.dtype() != self.dtype() {
            return Err(Error::DTypeMismatch {
                op: if add { "scatter_add" } else { "scatter" },
                detail: format!(
                    "expected self.dtype to be equal to src.dtype, got {} and {}",
                    self.dtype(),
                    src.dtype()
                ),
            });
        }
        let op = Scatter { dim: d, add, value };
        if inplace {
            call_out(&op, &[self, index, src], &[self])?;
            Ok(self.clone())
        } else {
            call1(&op, &[self, index, src])
        }
    }

    /// A copy of `self` with `src` written at `index` along `dim`.
    pub fn scatter(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.scatter_impl(dim, index, src, false, false, false)
    }

    /// A copy of `self` with `value` written at `index` along `dim`; an
    /// error when the value does not fit self's dtype (as PyTorch).
    pub fn scatter_value(&self, dim: i64, index: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let value = value.into();
        // As PyTorch, an empty index skips the checks.
        if index.numel() != 0 {
            value.check_fits("scatter", self.dtype())?;
        }
        let v = Tensor::scalar_tensor(value, self.dtype());
        self.scatter_impl(dim, index, &v, false, true, false)
    }

    /// In-place [`Tensor::scatter`].
    pub fn scatter_(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.scatter_impl(dim, index, src, false, false, true)
    }

    /// A copy of `self` with `src` added at `index` along `dim`.
    pub fn scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.scatter_impl(dim, index, src, true, false, false)
    }

    /// In-place [`Tensor::scatter_add`].
    pub fn scatter_add_(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.scatter_impl(dim, index, src, true, false, true)
    }

    /// Entries of `dim` picked by the 1-D `index`.
    pub fn index_select(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("index_select", dim, self.ndim())?;
        call1(&IndexSelect { dim: d }, &[self, index])
    }

    /// `self[indices] = values` in place (`x.index_put_(indices, values,
    /// accumulate)`): `indices` as for [`Tensor::index`] (`None` for `:`,
    /// integer or bool tensors), `values` broadcast to the indexed shape and
    /// of `self`'s dtype; with `accumulate` the values are added (equal
    /// positions add up). Recorded by autograd as `IndexPutBackward0`.
    /// Returns `self`.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// let x = Tensor::zeros(5)?;
    /// let idx = Tensor::new([0i64, 2, 2])?;
    /// x.index_put_(&[Some(idx)], &Tensor::new([1.0f32, 2.0, 3.0])?, true)?;
    /// assert_eq!(x.to_vec::<f32>()?, [1.0, 0.0, 5.0, 0.0, 0.0]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn index_put_(&self, indices: &[Option<Tensor>], values: &Tensor, accumulate: bool) -> Result<Tensor> {
        let positions = self.flat_positions()?.index(indices)?;
        let values = self.put_value(indices, values, accumulate)?;
        self.put_positions(&positions, &values, accumulate)?;
        Ok(self.clone())
    }

    /// Out-of-place [`Tensor::index_put_`]: a copy of `self` with the values put.
    pub fn index_put(&self, indices: &[Option<Tensor>], values: &Tensor, accumulate: bool) -> Result<Tensor> {
        let positions = self.flat_positions()?.index(indices)?;
        let values = self.put_value(indices, values, accumulate)?;
        call1(&IndexPut { accumulate }, &[self, &values, &positions])
    }

    /// PyTorch runs `x[mask] = v` with one bool mask and a one-element `v`
    /// as `masked_fill_(mask, v.item())`, which takes a value of any dtype:
    /// such a value is cast to `self`'s dtype (its gradient flows back
    /// through the cast). Any other value must have `self`'s dtype.
    fn put_value(&self, indices: &[Option<Tensor>], values: &Tensor, accumulate: bool) -> Result<Tensor> {
        let mut defined = indices.iter().flatten();
        let single_mask = matches!((defined.next(), defined.next()), (Some(m), None) if m.dtype() == DType::Bool);
        if !accumulate && single_mask && values.numel() == 1 && values.dtype() != self.dtype() {
            // `v.item()` converted as masked_fill_ converts a Scalar (checked).
            let v = values.detach();
            let item = match v.dtype() {
                DType::Bool => crate::Scalar::Bool(v.item::<bool>()?),
                d if d.is_floating_point() => crate::Scalar::Float(v.to_dtype(DType::F64)?.item::<f64>()?),
                _ => crate::Scalar::Int(v.to_dtype(DType::I64)?.item::<i64>()?),
            };
            item.check_fits("index_put", self.dtype())?;
            values.to_dtype(self.dtype())
        } else {
            Ok(values.clone())
        }
    }

    /// The row-major position of every element, shaped like `self` (int64).
    pub(crate) fn flat_positions(&self) -> Result<Tensor> {
        flat_positions(self.shape(), self.device())
    }

    /// Runs [`IndexPut`] in place with precomputed positions.
    pub(crate) fn put_positions(&self, positions: &Tensor, values: &Tensor, accumulate: bool) -> Result<()> {
        call_out(&IndexPut { accumulate }, &[self, values, positions], &[self])?;
        Ok(())
    }

    /// Advanced indexing (`x[idx0, idx1, ...]` with `None` for `:`), as
    /// `aten::index`: bool masks become their nonzero positions; when the
    /// indexed dims are not adjacent, the index dims come first in the result.
    pub fn index(&self, indices: &[Option<Tensor>]) -> Result<Tensor> {
        if indices.len() > self.ndim() {
            return Err(Error::invalid(
                "index",
                format!("too many indices for tensor of dimension {}", self.ndim()),
            ));
        }
        // Expand bool masks into one long index per masked dim.
        let mut expanded: Vec<Option<Tensor>> = Vec::new();
        for (pos, ix) in indices.iter().enumerate() {
            match ix {
                Some(t) if t.dtype() == DType::Bool || t.dtype() == DType::U8 => {
                    let d = expanded.len();
                    for k in 0..t.ndim() {
                        if self.shape()[d + k] != t.shape()[k] {
                            return Err(Error::shape(
                                "index",
                                self.shape(),
                                t.shape(),
                                format!("the shape of the mask at index {pos} does not match the indexed tensor"),
                            ));
                        }
                    }
                    let nz = t.nonzero()?;
                    for k in 0..t.ndim() {
                        expanded.push(Some(nz.select(1, k as i64)?));
                    }
                }
                other => expanded.push(other.clone()),
            }
        }
        let positions: Vec<usize> = expanded
            .iter()
            .enumerate()
            .filter(|(_, t)| t.is_some())
            .map(|(i, _)| i)
            .collect();
        let Some(&first) = positions.first() else {
            // No index tensor: a copy (aten::index always returns a new
            // tensor, node IndexBackward0; PyTorch 2.15 stops with an
            // internal assert for a nonempty input).
            return call1(&IndexTensors { start: 0 }, &[self]);
        };
        let adjacent = positions.windows(2).all(|w| w[1] == w[0] + 1);
        let (x, start) = if adjacent {
            (self.clone(), first)
        } else {
            let mut perm: Vec<i64> = positions.iter().map(|&p| p as i64).collect();
            perm.extend((0..self.ndim() as i64).filter(|d| !positions.contains(&(*d as usize))));
            (self.permute(&perm)?, 0)
        };
        let idx: Vec<&Tensor> = positions.iter().map(|&p| expanded[p].as_ref().unwrap()).collect();
        let mut inputs = vec![&x];
        inputs.extend(idx);
        call1(&IndexTensors { start }, &inputs)
    }

    /// Indices of nonzero elements, `[n, ndim]` int64.
    pub fn nonzero(&self) -> Result<Tensor> {
        call1(&Nonzero, &[self])
    }

    /// Lower triangle of the last two dims (`diagonal` shifts it); the rest is zero.
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle(diagonal, false)
    }

    /// Upper triangle of the last two dims (`diagonal` shifts it); the rest is zero.
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle(diagonal, true)
    }

    /// In-place [`Tensor::tril`] (node `TrilBackward0`).
    pub fn tril_(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle_(diagonal, false)
    }

    /// In-place [`Tensor::triu`] (node `TriuBackward0`): `mask.triu_(1)`.
    pub fn triu_(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle_(diagonal, true)
    }

    fn triangle_(&self, k: i64, upper: bool) -> Result<Tensor> {
        let name = if upper { "triu_" } else { "tril_" };
        if self.ndim() < 2 {
            return Err(Error::invalid(name, "input tensor must have at least 2 dimensions"));
        }
        crate::dispatch::call_out(
            &crate::ops::composite::CompositeOp::Triangle { diagonal: k, upper },
            &[self],
            &[self],
        )?;
        Ok(self.clone())
    }

    fn triangle(&self, k: i64, upper: bool) -> Result<Tensor> {
        let name = if upper { "triu" } else { "tril" };
        if self.ndim() < 2 {
            return Err(Error::invalid(name, "input tensor must have at least 2 dimensions"));
        }
        call1(
            &crate::ops::composite::CompositeOp::Triangle { diagonal: k, upper },
            &[self],
        )
    }

    /// One-hot encoding of an int64 tensor (`F.one_hot`): a new last dim of
    /// size `num_classes` (max + 1 when `None` or `Some(-1)`). Errors
    /// (PyTorch's messages): another dtype, an empty input without a
    /// positive `num_classes`, negative values, values not below
    /// `num_classes`.
    pub fn one_hot(&self, num_classes: Option<i64>) -> Result<Tensor> {
        if self.dtype() != DType::I64 {
            return Err(Error::dtype(
                "one_hot",
                self.dtype(),
                "one_hot is only applicable to index tensor of type LongTensor.",
            ));
        }
        let num_classes = num_classes.unwrap_or(-1);
        let c = if self.numel() == 0 {
            match usize::try_from(num_classes) {
                Ok(c) if c > 0 => c,
                _ => {
                    return Err(Error::invalid(
                        "one_hot",
                        "Can not infer total number of classes from empty tensor.",
                    ));
                }
            }
        } else {
            if self.min()?.item::<i64>()? < 0 {
                return Err(Error::invalid("one_hot", "Class values must be non-negative."));
            }
            let max = self.max()?.item::<i64>()?;
            if num_classes == -1 {
                max as usize + 1
            } else if num_classes > max {
                num_classes as usize
            } else {
                return Err(Error::invalid(
                    "one_hot",
                    "Class values must be smaller than num_classes.",
                ));
            }
        };
        let mut shape: Vec<usize> = self.shape().to_vec();
        shape.push(c);
        let z = crate::TensorOptions::new()
            .dtype(DType::I64)
            .device(self.device())
            .zeros(&shape)?;
        z.scatter_value(-1, &self.unsqueeze(-1)?, 1)
    }
}
