//! Indexing operators with PyTorch's graph nodes: `roll`, `diag_embed`,
//! `trace`, `block_diag`, `masked_select`, `masked_scatter`, `take`
//! (forwards written in other operators, registered backend-independent),
//! and `index_add` / `index_copy` / `index_fill` (a CPU kernel: rows are
//! independent outputs, each accumulated in index order, so the result
//! does not depend on the thread count).

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call_out, call1, downcast_op};
use crate::layout::{Dims, broadcast_shapes, normalize_dim};
use crate::ops::grad_util::{grad0, sum_to};
use crate::ops::promote::{Operand, result_type};
use crate::{DType, Error, IntoShape, Result, Scalar, Tensor, TensorOptions};

/// Dispatch table of `roll`.
pub static ROLL: OpEntry = OpEntry::differentiable("roll");
/// Dispatch table of `diag_embed`.
pub static DIAG_EMBED: OpEntry = OpEntry::differentiable("diag_embed");
/// Dispatch table of `trace`.
pub static TRACE: OpEntry = OpEntry::differentiable("trace");
/// Dispatch table of `block_diag`.
pub static BLOCK_DIAG: OpEntry = OpEntry::differentiable("block_diag");
/// Dispatch table of `masked_select`.
pub static MASKED_SELECT: OpEntry = OpEntry::differentiable("masked_select");
/// Dispatch table of `masked_scatter`.
pub static MASKED_SCATTER: OpEntry = OpEntry::differentiable("masked_scatter");
/// Dispatch table of `take`.
pub static TAKE: OpEntry = OpEntry::differentiable("take");
/// Dispatch table of `index_add`.
pub static INDEX_ADD: OpEntry = OpEntry::differentiable("index_add");
/// Dispatch table of `index_copy`.
pub static INDEX_COPY: OpEntry = OpEntry::differentiable("index_copy");
/// Dispatch table of `index_fill.int_Scalar`.
pub static INDEX_FILL: OpEntry = OpEntry::differentiable("index_fill.int_Scalar");

/// The operators of this module whose forward is written in other operators.
#[derive(Debug, Clone)]
pub enum Composed {
    /// `roll(shifts, dims)`; no dims: the flattened tensor rolls.
    Roll {
        /// Shift per dim.
        shifts: Vec<i64>,
        /// Normalised dims (empty: flattened).
        dims: Vec<usize>,
    },
    /// `diag_embed(offset, dim1, dim2)`.
    DiagEmbed {
        /// Diagonal offset.
        offset: i64,
        /// Normalised first matrix dim of the output.
        dim1: usize,
        /// Normalised second matrix dim of the output.
        dim2: usize,
    },
    /// `trace` of a matrix.
    Trace,
    /// `block_diag(*tensors)` (inputs as 2-d, in the result dtype).
    BlockDiag,
    /// `masked_select(mask)`: inputs `[x, mask]`.
    MaskedSelect,
    /// `masked_scatter(mask, source)`: inputs `[x, mask, source]`.
    MaskedScatter,
    /// `take(index)`: inputs `[x, index]`.
    Take,
}

impl Op for Composed {
    fn entry(&self) -> &'static OpEntry {
        match self {
            Composed::Roll { .. } => &ROLL,
            Composed::DiagEmbed { .. } => &DIAG_EMBED,
            Composed::Trace => &TRACE,
            Composed::BlockDiag => &BLOCK_DIAG,
            Composed::MaskedSelect => &MASKED_SELECT,
            Composed::MaskedScatter => &MASKED_SCATTER,
            Composed::Take => &TAKE,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let spec = match self {
            Composed::Roll { .. } => OutSpec::new(x.dims(), x.dtype()),
            Composed::DiagEmbed { offset, dim1, dim2 } => {
                OutSpec::new(diag_embed_shape(x.shape(), *offset, *dim1, *dim2), x.dtype())
            }
            Composed::Trace => OutSpec::new(Dims::new(), trace_dtype(x.dtype())),
            Composed::BlockDiag => {
                let (r, c) = inputs
                    .iter()
                    .fold((0, 0), |(r, c), t| (r + t.shape()[0], c + t.shape()[1]));
                OutSpec::new(Dims::from_slice(&[r, c]), x.dtype())
            }
            Composed::MaskedScatter => OutSpec::new(
                broadcast_shapes("masked_scatter", x.shape(), inputs[1].shape())?,
                x.dtype(),
            ),
            Composed::Take => OutSpec::new(inputs[1].dims(), x.dtype()),
            Composed::MaskedSelect => {
                return Err(Error::invalid(
                    "masked_select",
                    "the output size depends on the mask's values: no shape rule",
                ));
            }
        };
        Ok(smallvec::smallvec![spec])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        match self {
            Composed::MaskedSelect | Composed::Take => i == 0,
            Composed::MaskedScatter => i != 1,
            _ => true,
        }
    }

    fn saves(&self) -> Saves {
        match self {
            Composed::MaskedSelect | Composed::Take => Saves::inputs(0b10),
            Composed::MaskedScatter => Saves::inputs(0b110),
            _ => Saves::NONE,
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let shape0 = ctx.input_shape(0).to_vec();
        Ok(match self {
            Composed::Roll { shifts, dims } => {
                let back: Vec<i64> = shifts.iter().map(|s| -s).collect();
                let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
                vec![Some(g.roll(back, dims)?)]
            }
            Composed::DiagEmbed { offset, dim1, dim2 } => {
                vec![Some(g.diagonal(*offset, *dim1 as i64, *dim2 as i64)?)]
            }
            Composed::Trace => {
                let eye = TensorOptions::like(&g).eye(shape0[0] as i64, shape0[1] as i64)?;
                vec![Some(eye.mul(&g)?)]
            }
            Composed::BlockDiag => {
                let (mut r, mut c) = (0i64, 0i64);
                let mut out = Vec::new();
                for i in 0..ctx.num_inputs() {
                    let s = ctx.input_shape(i);
                    let (h, w) = (s[0] as i64, s[1] as i64);
                    out.push(Some(g.narrow(0, r, h)?.narrow(1, c, w)?));
                    r += h;
                    c += w;
                }
                out
            }
            Composed::MaskedSelect => {
                let mask = ctx.input(1)?;
                let full = broadcast_shapes("masked_select", &shape0, mask.shape())?;
                let zeros = TensorOptions::like(&g).zeros(full.as_slice())?;
                let mask = mask.expand(dims_i64(&full))?;
                vec![Some(sum_to(&zeros.masked_scatter(&mask, &g)?, &shape0)?), None]
            }
            Composed::MaskedScatter => {
                let (mask, source) = (ctx.input(1)?, ctx.input(2)?);
                let mask = mask.expand(dims_i64(g.shape()))?;
                let gx = g.masked_fill(&mask, 0.0)?;
                let picked = g.masked_select(&mask)?;
                let pad = source.numel() - picked.numel();
                let zeros = TensorOptions::like(&g).zeros([pad])?;
                let gs = Tensor::cat(&[&picked, &zeros], 0)?.reshape(dims_i64(source.shape()))?;
                vec![Some(gx), None, Some(gs)]
            }
            Composed::Take => {
                let index = wrap_take_index(&ctx.input(1)?, shape0.iter().product())?;
                let numel: usize = shape0.iter().product();
                let zeros = TensorOptions::like(&g).zeros([numel])?;
                let flat = zeros.index_add(0, &index.reshape([-1])?, &g.reshape([-1])?, 1)?;
                vec![Some(flat.reshape(dims_i64(&shape0))?), None]
            }
        })
    }
}

fn dims_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

/// trace's dtype: integers and bool sum to int64.
fn trace_dtype(dt: DType) -> DType {
    if dt.is_integral(true) { DType::I64 } else { dt }
}

/// The shape `diag_embed` makes of an input of `shape`: its last dim
/// becomes two (at `dim1`, `dim2`) of size `n + |offset|`.
fn diag_embed_shape(shape: &[usize], offset: i64, dim1: usize, dim2: usize) -> Dims {
    let n = shape.last().copied().unwrap_or(1) + offset.unsigned_abs() as usize;
    let mut out: Dims = shape[..shape.len().saturating_sub(1)].iter().copied().collect();
    let (lo, hi) = (dim1.min(dim2), dim1.max(dim2));
    out.insert(lo, n);
    out.insert(hi, n);
    out
}

/// `take`'s flat indices with negative ones wrapped; errors out of range.
fn wrap_take_index(index: &Tensor, numel: usize) -> Result<Tensor> {
    let n = numel as i64;
    let v = index.to_dtype(DType::I64)?.contiguous()?.to_vec::<i64>()?;
    let mut out = Vec::with_capacity(v.len());
    for i in v {
        if i < -n || i >= n {
            return Err(Error::invalid(
                "take",
                format!("out of range: tried to access index {i} on a tensor of {numel} elements."),
            ));
        }
        out.push(if i < 0 { i + n } else { i });
    }
    Tensor::from_vec(out, index.shape())?.to_device(index.device())
}

fn composed_kernel(call: &Call) -> Result<Tensors> {
    let op: &Composed = downcast_op(call.op)?;
    let x = call.inputs[0];
    let r = match op {
        Composed::Roll { shifts, dims } => {
            if dims.is_empty() {
                roll_dim(&x.reshape([-1])?, shifts[0], 0)?.reshape(dims_i64(x.shape()))?
            } else {
                let mut r = x.clone();
                for (&s, &d) in shifts.iter().zip(dims) {
                    r = roll_dim(&r, s, d)?;
                }
                r
            }
        }
        Composed::DiagEmbed { offset, dim1, dim2 } => {
            let out = TensorOptions::like(x).zeros(diag_embed_shape(x.shape(), *offset, *dim1, *dim2).as_slice())?;
            out.diagonal(*offset, *dim1 as i64, *dim2 as i64)?.copy_(x)?;
            out
        }
        Composed::Trace => x.diagonal(0, 0, 1)?.sum()?,
        Composed::BlockDiag => {
            let (r, c) = call
                .inputs
                .iter()
                .fold((0, 0), |(r, c), t| (r + t.shape()[0], c + t.shape()[1]));
            let out = TensorOptions::like(x).zeros([r, c])?;
            let (mut r0, mut c0) = (0i64, 0i64);
            for t in call.inputs {
                let (h, w) = (t.shape()[0] as i64, t.shape()[1] as i64);
                out.narrow(0, r0, h)?.narrow(1, c0, w)?.copy_(t)?;
                r0 += h;
                c0 += w;
            }
            out
        }
        Composed::MaskedSelect => {
            let mask = call.inputs[1];
            let full = broadcast_shapes("masked_select", x.shape(), mask.shape())?;
            let f = dims_i64(&full);
            x.expand(&f)?.i(&mask.expand(&f)?)?.contiguous()?
        }
        Composed::MaskedScatter => {
            let (mask, source) = (call.inputs[1], call.inputs[2]);
            let full = dims_i64(&broadcast_shapes("masked_scatter", x.shape(), mask.shape())?);
            let mask = mask.expand(&full)?;
            let count = mask.to_dtype(DType::I64)?.sum()?.item::<i64>()? as usize;
            if source.numel() < count {
                return Err(Error::invalid(
                    "masked_scatter",
                    "Number of elements of source < number of ones in mask",
                ));
            }
            let out = x.expand(&full)?.clone_tensor()?;
            let values = source.reshape([-1])?.narrow(0, 0, count as i64)?;
            if count > 0 {
                out.i_set(&mask, &values)?;
            }
            out
        }
        Composed::Take => {
            let index = wrap_take_index(call.inputs[1], x.numel())?;
            x.reshape([-1])?
                .index_select(0, &index.reshape([-1])?)?
                .reshape(dims_i64(index.shape()))?
        }
    };
    Ok(smallvec::smallvec![r.into_result(call.inputs)?])
}

/// `x` rolled by `shift` along `d`: two slices joined the other way round.
fn roll_dim(x: &Tensor, shift: i64, d: usize) -> Result<Tensor> {
    let n = x.shape()[d] as i64;
    if n == 0 {
        return Ok(x.clone());
    }
    let s = shift.rem_euclid(n);
    if s == 0 {
        return Ok(x.clone());
    }
    let (tail, head) = (x.narrow(d as i64, n - s, s)?, x.narrow(d as i64, 0, n - s)?);
    Tensor::cat(&[&tail, &head], d as i64)
}

/// What the index kernel writes into the selected slices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IndexWrite {
    /// `index_add`: `alpha * source` added.
    Add(Scalar),
    /// `index_copy`: `source` copied.
    Copy,
    /// `index_fill`: one value.
    Fill(Scalar),
}

/// `index_add` / `index_copy` / `index_fill` along `dim`: inputs
/// `[self, index, source]` (no source for fill).
#[derive(Debug, Clone, Copy)]
pub struct IndexRows {
    /// The normalised dim (0 for a 0-d self).
    pub dim: usize,
    /// What is written.
    pub write: IndexWrite,
}

impl Op for IndexRows {
    fn entry(&self) -> &'static OpEntry {
        match self.write {
            IndexWrite::Add(_) => &INDEX_ADD,
            IndexWrite::Copy => &INDEX_COPY,
            IndexWrite::Fill(_) => &INDEX_FILL,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (x, index) = (inputs[0], inputs[1]);
        match self.write {
            IndexWrite::Add(alpha) => self.check_add(x, index, inputs[2], alpha)?,
            IndexWrite::Copy => self.check_copy(x, index, inputs[2])?,
            IndexWrite::Fill(value) => {
                // PyTorch's index_fill_: the index dtype, its rank, and the
                // value's conversion (always made, even when nothing is written).
                if index.dtype() != DType::I64 {
                    return Err(Error::dtype(
                        "index_fill",
                        index.dtype(),
                        "index_fill_(): Expected dtype int64 for index.",
                    ));
                }
                if index.ndim() > 1 {
                    return Err(Error::invalid("index_fill", "Index has to be a vector/scalar"));
                }
                value.check_fits("index_fill", x.dtype())?;
            }
        }
        Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i != 1
    }

    /// As PyTorch (which only warns that it is deprecated): `index_fill_`
    /// of an expanded tensor writes the value through every alias of the
    /// selected slices.
    fn allows_overlapping_out(&self) -> bool {
        matches!(self.write, IndexWrite::Fill(_))
    }

    /// `self` is copied into the output before anything is written, so the
    /// output may be `self` itself.
    fn alias_safe_input(&self, i: usize) -> bool {
        i == 0
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b10)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let index = ctx.input(1)?;
        let d = self.dim as i64;
        let pick = |g: &Tensor| -> Result<Tensor> {
            let src_shape = ctx.input_shape(2);
            if g.ndim() == 0 {
                // PyTorch's index_select of a 0-d gradient, expanded as source.
                return g.reshape(dims_i64(src_shape));
            }
            g.index_select(d, &index)?.reshape(dims_i64(src_shape))
        };
        Ok(match self.write {
            IndexWrite::Add(alpha) => {
                let gs = if ctx.needs_grad(2) {
                    let s = pick(&g)?;
                    Some(if alpha == Scalar::Int(1) { s } else { s.mul(alpha)? })
                } else {
                    None
                };
                vec![Some(g), None, gs]
            }
            IndexWrite::Copy => {
                let gs = if ctx.needs_grad(2) { Some(pick(&g)?) } else { None };
                vec![Some(g.index_fill(d, &index, 0.0)?), None, gs]
            }
            IndexWrite::Fill(_) => vec![Some(g.index_fill(d, &index, 0.0)?), None],
        })
    }
}

impl IndexRows {
    /// Whether the kernel visits any element (and so checks the indices):
    /// PyTorch's index_copy / index_fill iterate `self` restrided to
    /// `index.numel()` slices along `dim`; its index_add of a tensor of two
    /// or more dims returns at once for an empty index or `self`.
    pub(crate) fn visits(&self, x: &Tensor, index: &Tensor) -> bool {
        let k = index.numel();
        match self.write {
            IndexWrite::Add(_) if x.ndim() > 1 => k > 0 && x.numel() > 0,
            IndexWrite::Add(_) => true,
            _ => {
                let rest: usize = x
                    .shape()
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i != self.dim)
                    .map(|(_, &s)| s)
                    .product();
                k > 0 && rest > 0
            }
        }
    }

    /// PyTorch's `index_func_meta_impl` checks of index_add, in its order,
    /// then the conversion of `alpha` where the kernel makes it.
    fn check_add(&self, x: &Tensor, index: &Tensor, src: &Tensor, alpha: Scalar) -> Result<()> {
        let (name, d) = ("index_add", self.dim);
        if index.ndim() > 1 {
            return Err(Error::invalid(
                name,
                format!(
                    "index_add_(): Index is supposed to be a vector, but got dim: {} with type: {} and size: {:?}",
                    index.ndim(),
                    index.dtype().scalar_type_name(),
                    index.shape()
                ),
            ));
        }
        if !matches!(index.dtype(), DType::I64 | DType::I32) {
            return Err(Error::dtype(
                name,
                index.dtype(),
                format!(
                    "index_add_(): Expected dtype int32/int64 for index but got: {}",
                    index.dtype().scalar_type_name()
                ),
            ));
        }
        if src.dtype() != x.dtype() {
            return Err(Error::dtype(
                name,
                src.dtype(),
                format!(
                    "index_add_(): self ({}) and source ({}) must have the same scalar type",
                    x.dtype().scalar_type_name(),
                    src.dtype().scalar_type_name()
                ),
            ));
        }
        if d != 0 && d >= src.ndim() {
            return Err(Error::invalid(
                name,
                format!(
                    "index_add_(): Indexing dim {d} is out of bounds of the source tensor with dim {}",
                    src.ndim()
                ),
            ));
        }
        let n_src = if src.ndim() == 0 { 1 } else { src.shape()[d] };
        if index.numel() != n_src {
            return Err(Error::invalid(
                name,
                format!(
                    "index_add_(): Number of indices ({}) should be equal to source.size(dim): ({n_src}), for dim: {d}",
                    index.numel()
                ),
            ));
        }
        let (mut xs, mut ss) = (x.shape().to_vec(), src.shape().to_vec());
        if x.ndim() != 0 && src.ndim() != 0 {
            xs.remove(d);
            ss.remove(d);
        }
        if xs != ss {
            return Err(Error::invalid(
                name,
                format!(
                    "source tensor shape must match self tensor shape, excluding the specified dimension. Got \
                     self.shape = {:?} source.shape = {:?}",
                    x.shape(),
                    src.shape()
                ),
            ));
        }
        if self.visits(x, index) {
            alpha.check_fits(name, x.dtype())?;
        }
        Ok(())
    }

    /// PyTorch's index_copy meta checks, in its order.
    fn check_copy(&self, x: &Tensor, index: &Tensor, src: &Tensor) -> Result<()> {
        let (name, d) = ("index_copy", self.dim);
        if index.ndim() >= 2 {
            return Err(Error::invalid(
                name,
                format!(
                    "index_copy_(): Index should have dimension 1 or 0 (got {})",
                    index.ndim()
                ),
            ));
        }
        let k = index.numel();
        if src.ndim() == 0 && k != 1 {
            return Err(Error::invalid(
                name,
                format!("index_copy_(): When source is scalar, index should have one element (got {k})"),
            ));
        }
        if src.ndim() != 0 && x.ndim() != 0 && src.ndim() != x.ndim() {
            return Err(Error::invalid(
                name,
                format!(
                    "index_copy_(): When source and destination are not scalars, their dimensionality must match. \
                     Source dimensionality ({}), destination dimensionality ({})",
                    src.ndim(),
                    x.ndim()
                ),
            ));
        }
        if index.dtype() != DType::I64 {
            return Err(Error::dtype(
                name,
                index.dtype(),
                format!(
                    "index_copy_(): Expected a long tensor for index, but got {}",
                    index.dtype().scalar_type_name()
                ),
            ));
        }
        if src.dtype() != x.dtype() {
            return Err(Error::dtype(
                name,
                src.dtype(),
                format!(
                    "index_copy_(): self and source expected to have the same dtype, but got (self) {} and \
                     (source) {}",
                    x.dtype().scalar_type_name(),
                    src.dtype().scalar_type_name()
                ),
            ));
        }
        let sliced = |t: &Tensor| -> Vec<usize> {
            let mut s = t.shape().to_vec();
            if !s.is_empty() {
                s.remove(d);
            }
            s
        };
        if sliced(x) != sliced(src) {
            return Err(Error::invalid(
                name,
                format!(
                    "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice \
                     shape: {:?} at dimension {d} and source slice shape: {:?} at dimension 0.",
                    sliced(x),
                    sliced(src)
                ),
            ));
        }
        if src.ndim() != 0 && k != src.shape()[d] {
            return Err(Error::invalid(
                name,
                format!(
                    "index_copy_(): Number of indices ({k}) should be equal to source.size(dim) ({})",
                    src.shape()[d]
                ),
            ));
        }
        Ok(())
    }
}

/// Registers the backend-independent kernels.
pub(crate) fn register() -> Result<()> {
    for e in [
        &ROLL,
        &DIAG_EMBED,
        &TRACE,
        &BLOCK_DIAG,
        &MASKED_SELECT,
        &MASKED_SCATTER,
        &TAKE,
    ] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(composed_kernel))?;
    }
    Ok(())
}

fn index_rows(
    x: &Tensor,
    dim: i64,
    index: &Tensor,
    source: Option<&Tensor>,
    write: IndexWrite,
    inplace: bool,
) -> Result<Tensor> {
    let name = match write {
        IndexWrite::Add(_) => "index_add",
        IndexWrite::Copy => "index_copy",
        IndexWrite::Fill(_) => "index_fill",
    };
    let d = normalize_dim(name, dim, x.ndim())?;
    let op = IndexRows { dim: d, write };
    let mut inputs = vec![x, index];
    inputs.extend(source);
    if inplace {
        call_out(&op, &inputs, &[x])?;
        Ok(x.clone())
    } else {
        call1(&op, &inputs)
    }
}

/// # Indexed writes and selections
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::zeros([3, 2])?;
/// let idx = Tensor::new([0i64, 2, 0])?;
/// let src = Tensor::new([[1.0f32, 1.0], [2.0, 2.0], [3.0, 3.0]])?;
/// assert_eq!(x.index_add(0, &idx, &src, 1)?.to_vec::<f32>()?, [4.0, 4.0, 0.0, 0.0, 2.0, 2.0]);
/// let v = Tensor::new([1i64, 2, 3, 4])?;
/// assert_eq!(v.roll(1, 0)?.to_vec::<i64>()?, [4, 1, 2, 3]);
/// assert_eq!(v.take(&Tensor::new([-1i64, 0])?)?.to_vec::<i64>()?, [4, 1]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `torch.roll(self, shifts, dims)`: elements shifted along each dim,
    /// wrapping around (`dims` `()`: the flattened tensor rolls by one shift).
    pub fn roll(&self, shifts: impl IntoShape, dims: impl IntoShape) -> Result<Tensor> {
        let (shifts, dims) = (shifts.into_shape().to_vec(), dims.into_shape().to_vec());
        if dims.is_empty() && shifts.len() != 1 || !dims.is_empty() && shifts.len() != dims.len() {
            return Err(Error::invalid(
                "roll",
                format!(
                    "shifts and dimensions must align. shifts: {}, dims:{}",
                    shifts.len(),
                    dims.len()
                ),
            ));
        }
        let dims = dims
            .iter()
            .map(|&d| crate::layout::normalize_dim_strict("roll", d, self.ndim()))
            .collect::<Result<Vec<_>>>()?;
        call1(&Composed::Roll { shifts, dims }, &[self])
    }

    /// `torch.diag_embed(self, offset, dim1, dim2)`: the last dim becomes the
    /// `offset`-th diagonal of matrices over the output dims `dim1`, `dim2`.
    pub fn diag_embed(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        let nd = self.ndim() + 1;
        let (d1, d2) = (
            normalize_dim("diag_embed", dim1, nd)?,
            normalize_dim("diag_embed", dim2, nd)?,
        );
        if d1 == d2 {
            return Err(Error::invalid(
                "diag_embed",
                format!("diagonal dimensions cannot be identical {dim1}, {dim2}"),
            ));
        }
        call1(
            &Composed::DiagEmbed {
                offset,
                dim1: d1,
                dim2: d2,
            },
            &[self],
        )
    }

    /// `torch.trace`: the sum of a matrix's main diagonal (integers as int64).
    pub fn trace(&self) -> Result<Tensor> {
        if self.ndim() != 2 {
            return Err(Error::invalid(
                "trace",
                format!("trace: expected a matrix, but got tensor with dim {}", self.ndim()),
            ));
        }
        if self.dtype() == DType::Bool {
            return Err(Error::dtype(
                "trace",
                DType::Bool,
                "\"trace\" not implemented for 'Bool'",
            ));
        }
        let x = self.to_dtype(trace_dtype(self.dtype()))?;
        call1(&Composed::Trace, &[&x])
    }

    /// `torch.block_diag(*tensors)`: the inputs (0-d, 1-d as a row, or 2-d)
    /// as blocks down the diagonal of a zero matrix, in their result dtype.
    pub fn block_diag<T: AsRef<Tensor>>(tensors: &[T]) -> Result<Tensor> {
        let list: Vec<&Tensor> = tensors.iter().map(AsRef::as_ref).collect();
        let tensors = list.as_slice();
        if tensors.is_empty() {
            return Tensor::zeros([1, 0]);
        }
        let ops: Vec<Operand> = tensors.iter().map(|t| Operand::Tensor(t)).collect();
        let dt = result_type(&ops);
        let mut blocks = Vec::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            let b = match t.ndim() {
                0 => t.reshape([1, 1])?,
                1 => t.reshape([1, -1])?,
                2 => (*t).clone(),
                n => {
                    return Err(Error::invalid(
                        "block_diag",
                        format!(
                            "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has {n} dimensions"
                        ),
                    ));
                }
            };
            blocks.push(b.to_dtype(dt)?);
        }
        let refs: Vec<&Tensor> = blocks.iter().collect();
        call1(&Composed::BlockDiag, &refs)
    }

    /// `torch.masked_select(self, mask)`: the elements where the bool
    /// `mask` holds (both broadcast), as a 1-d tensor.
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            return Err(Error::dtype(
                "masked_select",
                mask.dtype(),
                format!("masked_select: expected BoolTensor for mask, but got {}", mask.dtype()),
            ));
        }
        broadcast_shapes("masked_select", self.shape(), mask.shape())?;
        call1(&Composed::MaskedSelect, &[self, mask])
    }

    /// `self.masked_scatter(mask, source)`: `self` with the elements where
    /// `mask` (broadcast to `self`) holds taken, in order, from `source`.
    /// Errors when `source` has fewer elements than the mask selects.
    pub fn masked_scatter(&self, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            return Err(Error::dtype(
                "masked_scatter",
                mask.dtype(),
                format!(
                    "masked_scatter_: expected BoolTensor for mask, but got {}",
                    mask.dtype()
                ),
            ));
        }
        if source.dtype() != self.dtype() {
            return Err(Error::dtype(
                "masked_scatter",
                source.dtype(),
                format!(
                    "masked_scatter: expected self and source to have same dtypes but got {} and {}",
                    self.dtype().scalar_type_name(),
                    source.dtype().scalar_type_name()
                ),
            ));
        }
        // As PyTorch's out-of-place masked_scatter: self and mask broadcast
        // against each other (the gradient of self is summed back).
        broadcast_shapes("masked_scatter", self.shape(), mask.shape())?;
        call1(&Composed::MaskedScatter, &[self, mask, source])
    }

    /// In-place [`Tensor::masked_scatter`] (`self.masked_scatter_(mask,
    /// source)`): `mask` broadcasts to `self`, which keeps its shape.
    /// Errors as the out-of-place form, and when `mask` does not broadcast
    /// to `self` (PyTorch's messages).
    pub fn masked_scatter_(&self, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            return Err(Error::dtype(
                "masked_scatter_",
                mask.dtype(),
                format!(
                    "masked_scatter_ only supports boolean masks, but got mask with dtype {}",
                    mask.dtype().scalar_type_name()
                ),
            ));
        }
        let shape: Vec<i64> = self.shape().iter().map(|&s| s as i64).collect();
        let mask = mask.expand(&shape)?;
        if source.dtype() != self.dtype() {
            return Err(Error::dtype(
                "masked_scatter_",
                source.dtype(),
                format!(
                    "masked_scatter_: expected self and source to have same dtypes but got{} and {}",
                    self.dtype().scalar_type_name(),
                    source.dtype().scalar_type_name()
                ),
            ));
        }
        call_out(&Composed::MaskedScatter, &[self, &mask, source], &[self])?;
        Ok(self.clone())
    }

    /// `torch.take(self, index)`: elements of the flattened tensor at
    /// `index` (negative counts from the end), shaped like `index`.
    pub fn take(&self, index: &Tensor) -> Result<Tensor> {
        if index.dtype() != DType::I64 {
            return Err(Error::dtype(
                "take",
                index.dtype(),
                format!(
                    "take(): Expected a long tensor for index, but got {}",
                    index.dtype().scalar_type_name()
                ),
            ));
        }
        call1(&Composed::Take, &[self, index])
    }

    /// `self.index_add(dim, index, source, alpha)`: `self` with
    /// `alpha * source[i]` added to slice `index[i]` of `dim` (repeated
    /// indices accumulate, in index order).
    pub fn index_add(&self, dim: i64, index: &Tensor, source: &Tensor, alpha: impl Into<Scalar>) -> Result<Tensor> {
        index_rows(self, dim, index, Some(source), IndexWrite::Add(alpha.into()), false)
    }

    /// In-place [`Tensor::index_add`]; returns `self`.
    pub fn index_add_(&self, dim: i64, index: &Tensor, source: &Tensor, alpha: impl Into<Scalar>) -> Result<Tensor> {
        index_rows(self, dim, index, Some(source), IndexWrite::Add(alpha.into()), true)
    }

    /// `self.index_copy(dim, index, source)`: `self` with slice `index[i]`
    /// of `dim` replaced by `source[i]` (the last write wins on repeats).
    pub fn index_copy(&self, dim: i64, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        index_rows(self, dim, index, Some(source), IndexWrite::Copy, false)
    }

    /// In-place [`Tensor::index_copy`]; returns `self`.
    pub fn index_copy_(&self, dim: i64, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        index_rows(self, dim, index, Some(source), IndexWrite::Copy, true)
    }

    /// `self.index_fill(dim, index, value)`: the slices `index` of `dim` set to `value`.
    pub fn index_fill(&self, dim: i64, index: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        index_rows(self, dim, index, None, IndexWrite::Fill(value.into()), false)
    }

    /// In-place [`Tensor::index_fill`]; returns `self`.
    pub fn index_fill_(&self, dim: i64, index: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        index_rows(self, dim, index, None, IndexWrite::Fill(value.into()), true)
    }

    /// `self.index_fill(dim, index, value)` with a 0-d tensor `value`
    /// (cast to `self`'s dtype; its gradient is the sum of the filled
    /// positions' gradients). Errors for a `value` with dims (PyTorch's
    /// message) and as [`Tensor::index_fill`].
    pub fn index_fill_tensor(&self, dim: i64, index: &Tensor, value: &Tensor) -> Result<Tensor> {
        index_fill_tensor(self, dim, index, value, false)
    }

    /// In-place [`Tensor::index_fill_tensor`]; returns `self`.
    pub fn index_fill_tensor_(&self, dim: i64, index: &Tensor, value: &Tensor) -> Result<Tensor> {
        index_fill_tensor(self, dim, index, value, true)
    }
}

/// `index_fill` with a 0-d tensor value: the scalar fill, or, when the value
/// requires grad, a `where` over the filled positions (so the value gets its
/// gradient).
fn index_fill_tensor(x: &Tensor, dim: i64, index: &Tensor, value: &Tensor, inplace: bool) -> Result<Tensor> {
    if value.ndim() != 0 {
        return Err(Error::invalid(
            "index_fill_",
            format!(
                "index_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
                value.ndim()
            ),
        ));
    }
    if !value.requires_grad() || !x.is_floating_point() {
        let v = match value.dtype() {
            DType::Bool => Scalar::Bool(value.item::<bool>()?),
            d if d.is_floating_point() => Scalar::Float(value.item::<f64>()?),
            _ => Scalar::Int(value.item::<i64>()?),
        };
        return index_rows(x, dim, index, None, IndexWrite::Fill(v), inplace);
    }
    let mask = TensorOptions::like(x)
        .dtype(DType::Bool)
        .zeros(x.shape())?
        .index_fill(dim, index, true)?;
    let filled = value.to_dtype(x.dtype())?.where_cond(&mask, x)?;
    if inplace {
        x.copy_(&filled)?;
        Ok(x.clone())
    } else {
        Ok(filled)
    }
}
