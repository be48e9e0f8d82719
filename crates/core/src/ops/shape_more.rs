//! Shape conveniences written in other operators, as PyTorch's composite
//! ops are (their graphs are those of the pieces, as in PyTorch): `tile`,
//! `repeat_interleave`, `movedim` / `moveaxis`, `swapaxes`,
//! `take_along_dim`, `nonzero_tuple` / `argwhere`, `meshgrid`,
//! `cartesian_prod`, `broadcast_tensors`, `atleast_{1,2,3}d`, `diag`,
//! `tril_indices` / `triu_indices`.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call1, downcast_op};
use crate::layout::{broadcast_shapes, normalize_dim, normalize_dims};
use crate::ops::grad_util::grad0;
use crate::ops::view::{ViewKind, ViewScatter};
use crate::{DType, Error, IntoShape, Result, Tensor};

/// Dispatch table of `diagonal_copy` (what `diag` of a matrix runs).
pub static DIAGONAL_COPY: OpEntry = OpEntry::differentiable("diagonal_copy");

/// `diagonal_copy(offset, dim1, dim2)`: the diagonal as a new tensor, one
/// node (`DiagonalBackward0_copy`) whose gradient is written back on the
/// diagonal of zeros, as PyTorch's `diagonal_backward`.
#[derive(Debug, Clone, Copy)]
pub struct DiagonalCopy {
    /// Above (positive) or below (negative) the main diagonal.
    pub offset: i64,
    /// First dim of the matrices.
    pub dim1: i64,
    /// Second dim of the matrices.
    pub dim2: i64,
}

impl DiagonalCopy {
    fn view(&self) -> ViewKind {
        ViewKind::Diagonal {
            offset: self.offset,
            dim1: self.dim1,
            dim2: self.dim2,
        }
    }
}

impl Op for DiagonalCopy {
    fn entry(&self) -> &'static OpEntry {
        &DIAGONAL_COPY
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let l = x
            .layout()
            .diagonal("diagonal_copy", self.offset, self.dim1, self.dim2)?;
        Ok(smallvec::smallvec![OutSpec::new(l.shape.clone(), x.dtype())])
    }

    fn saves(&self) -> Saves {
        Saves::NONE
    }

    fn backward_name(&self) -> String {
        "DiagonalBackward0_copy".into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let scatter = ViewScatter {
            view: self.view(),
            input_shape: ctx.input_shape(0).into(),
        };
        Ok(vec![Some(call1(&scatter, &[&g])?)])
    }
}

fn diagonal_copy_kernel(call: &Call) -> Result<Tensors> {
    let op: &DiagonalCopy = downcast_op(call.op)?;
    let x = call.inputs[0];
    let r = x.diagonal(op.offset, op.dim1, op.dim2)?.clone_contiguous()?;
    Ok(smallvec::smallvec![r.into_result(call.inputs)?])
}

/// Registers the backend-independent kernel of `diagonal_copy`.
pub(crate) fn register() -> Result<()> {
    DIAGONAL_COPY.register_builtin(Slot::AnyBackend, Kernel::Functional(diagonal_copy_kernel))
}

/// How [`Tensor::meshgrid`] orders its outputs' dims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Indexing {
    /// Matrix indexing: output dim `i` runs along input `i` (`indexing="ij"`).
    #[default]
    Ij,
    /// Cartesian indexing: the first two dims swapped (`indexing="xy"`).
    Xy,
}

/// The `(row, col)` pairs of the lower (`lower`) or upper triangle of a
/// `rows x cols` matrix with `offset`, row by row.
fn triangle_indices(rows: i64, cols: i64, offset: i64, lower: bool) -> Result<Tensor> {
    let name = if lower { "tril_indices" } else { "triu_indices" };
    // PyTorch's checks, in its order and words.
    if rows < 0 {
        return Err(Error::invalid(name, format!("row must be non-negative, got{rows}")));
    }
    if cols < 0 {
        return Err(Error::invalid(name, format!("col must be non-negative, got{cols}")));
    }
    let (mut r, mut c) = (Vec::new(), Vec::new());
    for i in 0..rows {
        for j in 0..cols {
            let keep = if lower { j - i <= offset } else { j - i >= offset };
            if keep {
                r.push(i);
                c.push(j);
            }
        }
    }
    let n = r.len();
    r.extend(c);
    Tensor::from_vec(r, [2, n])
}

/// The `repeats` of [`Tensor::repeat_interleave_with`]: one count for
/// every element or slice, or a tensor of counts.
#[derive(Debug, Clone, Copy)]
pub enum Repeats<'a> {
    /// One count for every element or slice.
    Count(i64),
    /// A 0-d or 1-d tensor of counts.
    Tensor(&'a Tensor),
}

impl From<i64> for Repeats<'_> {
    fn from(r: i64) -> Self {
        Repeats::Count(r)
    }
}

impl<'a> From<&'a Tensor> for Repeats<'a> {
    fn from(r: &'a Tensor) -> Self {
        Repeats::Tensor(r)
    }
}

/// The keyword arguments of [`Tensor::repeat_interleave_with`] (PyTorch's
/// defaults: no dim, flattening the input; no `output_size`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepeatInterleaveOptions {
    /// The dim to repeat along (`None`: the flattened input).
    pub dim: Option<i64>,
    /// The result's length along `dim`, checked (`output_size=`).
    pub output_size: Option<i64>,
}

impl RepeatInterleaveOptions {
    /// PyTorch's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Repeats along `dim`.
    pub fn dim(mut self, dim: i64) -> Self {
        self.dim = Some(dim);
        self
    }

    /// The expected length along `dim` (checked).
    pub fn output_size(mut self, size: i64) -> Self {
        self.output_size = Some(size);
        self
    }
}

/// # Shape conveniences
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([[1i64, 2], [3, 4]])?;
/// assert_eq!(x.tile((1, 2))?.to_vec::<i64>()?, [1, 2, 1, 2, 3, 4, 3, 4]);
/// assert_eq!(x.repeat_interleave(2, Some(0))?.shape(), [4, 2]);
/// assert_eq!(x.movedim(0, 1)?.to_vec::<i64>()?, [1, 3, 2, 4]);
/// assert_eq!(Tensor::tril_indices(2, 2, 0)?.to_vec::<i64>()?, [0, 1, 1, 0, 0, 1]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `torch.tile`: repeats the tensor `reps[i]` times along dim `i`
    /// (`reps` shorter than the tensor's dims is padded with 1s in front).
    pub fn tile(&self, reps: impl IntoShape) -> Result<Tensor> {
        let reps = reps.into_shape().to_vec();
        let mut full = vec![1i64; self.ndim().saturating_sub(reps.len())];
        full.extend(reps);
        self.repeat(full)
    }

    /// `torch.repeat_interleave(self, repeats, dim)` with one repeat count
    /// for every element (flattened when `dim` is `None`). Errors for a
    /// negative count.
    pub fn repeat_interleave(&self, repeats: i64, dim: Option<i64>) -> Result<Tensor> {
        // PyTorch's graph: unsqueeze, expand, a contiguous clone, then a
        // flatten (a view: node ViewBackward0). A 0-d input with a dim fails
        // in the unsqueeze, as PyTorch's does.
        let input = match dim {
            Some(_) => self.clone(),
            None => self.flatten((0, -1))?,
        };
        let d = normalize_dim("repeat_interleave", dim.unwrap_or(0), self.ndim())?;
        if repeats < 0 {
            return Err(Error::invalid("repeat_interleave", "Repeats must be non-negative"));
        }
        let input = input.unsqueeze(d as i64 + 1)?;
        let mut expanded: Vec<i64> = input.shape().iter().map(|&s| s as i64).collect();
        expanded[d + 1] = repeats;
        input
            .expand(&expanded)?
            .clone_contiguous()?
            .flatten((d as i64, d as i64 + 1))
    }

    /// `torch.repeat_interleave(self, repeats, dim)` with a count per slice
    /// (`repeats`: 0-d, or 1-d with the dim's length). Errors for negative
    /// counts or a length mismatch.
    pub fn repeat_interleave_tensor(&self, repeats: &Tensor, dim: Option<i64>) -> Result<Tensor> {
        let name = "repeat_interleave";
        let (x, d) = match dim {
            Some(_) if self.ndim() == 0 => {
                // PyTorch asks the 0-d input for the size of `dim`.
                return Err(Error::invalid(
                    name,
                    format!(
                        "Dimension specified as {} but tensor has no dimensions",
                        dim.unwrap_or(0)
                    ),
                ));
            }
            Some(d) => (self.clone(), normalize_dim(name, d, self.ndim())?),
            None => (self.reshape([-1])?, 0),
        };
        if repeats.ndim() > 1 {
            return Err(Error::invalid(name, "repeats must be 0-dim or 1-dim tensor"));
        }
        if !matches!(repeats.dtype(), DType::I64 | DType::I32 | DType::U8) {
            return Err(Error::dtype(
                name,
                repeats.dtype(),
                format!(
                    "\"repeat_interleave_cpu\" not implemented for '{}'",
                    repeats.dtype().scalar_type_name()
                ),
            ));
        }
        let n = if x.ndim() == 0 { 1 } else { x.shape()[d] };
        let counts: Vec<i64> = repeats.to_dtype(DType::I64)?.to_vec::<i64>()?;
        // One count (0-d, or 1-d of length 1) applies to every slice.
        let counts = if repeats.numel() == 1 && repeats.ndim() <= 1 {
            vec![counts[0]; n]
        } else {
            counts
        };
        if counts.len() != n {
            return Err(Error::invalid(
                name,
                format!(
                    "repeats must have the same size as input along dim, but got repeats.size(0) = {} and input.size({d}) = {n}",
                    counts.len()
                ),
            ));
        }
        if counts.iter().any(|&c| c < 0) {
            return Err(Error::invalid(name, "repeats can not be negative"));
        }
        let index: Vec<i64> = counts
            .iter()
            .enumerate()
            .flat_map(|(i, &c)| std::iter::repeat_n(i as i64, c as usize))
            .collect();
        let len = index.len();
        let index = Tensor::from_vec(index, [len])?.to_device(self.device())?;
        let x = if x.ndim() == 0 { x.reshape([1])? } else { x };
        x.index_select(d as i64, &index)
    }

    /// `torch.repeat_interleave(self, repeats, dim=, output_size=)`:
    /// `repeats` is one count for every element or slice (an integer) or
    /// a count per slice (a 0-d or 1-d tensor). `output_size`, when given,
    /// must be the result's length along `dim` (PyTorch's check: "Invalid
    /// output_size" for an integer count, "allocated size does not match
    /// required size" for a tensor). Errors as the two forms above.
    ///
    /// ```
    /// use ferrotorch_core::{RepeatInterleaveOptions, Tensor};
    /// let x = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]])?;
    /// let y = x.repeat_interleave_with(2, RepeatInterleaveOptions::new().dim(0).output_size(4))?;
    /// assert_eq!(y.shape(), [4, 2]);
    /// let r = Tensor::new([1i64, 2])?;
    /// assert_eq!(x.repeat_interleave_with(&r, RepeatInterleaveOptions::new().dim(1))?.shape(), [2, 3]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn repeat_interleave_with<'a>(
        &self,
        repeats: impl Into<Repeats<'a>>,
        opts: RepeatInterleaveOptions,
    ) -> Result<Tensor> {
        let name = "repeat_interleave";
        let (out, count) = match repeats.into() {
            Repeats::Count(r) => (self.repeat_interleave(r, opts.dim)?, true),
            Repeats::Tensor(r) => (self.repeat_interleave_tensor(r, opts.dim)?, false),
        };
        if let Some(size) = opts.output_size {
            let d = match opts.dim {
                Some(d) => normalize_dim(name, d, out.ndim())?,
                None => 0,
            };
            let got = if out.ndim() == 0 { 1 } else { out.shape()[d] } as i64;
            if got != size {
                return Err(if count {
                    Error::invalid(
                        name,
                        format!("repeat_interleave: Invalid output_size, expected {got} but got {size}"),
                    )
                } else {
                    Error::invalid(name, "allocated size does not match required size")
                });
            }
        }
        Ok(out)
    }

    /// `torch.repeat_interleave(repeats)` of a 1-d count tensor `self`:
    /// each index `i` repeated `self[i]` times (`[1, 0, 3]` gives `[0, 2,
    /// 2, 2]`), in `self`'s dtype. `output_size`, when given, must be the
    /// total. Errors (PyTorch's messages): a tensor that is not 1-d,
    /// negative counts, a float dtype, a wrong `output_size`.
    pub fn repeat_interleave_counts(&self, output_size: Option<i64>) -> Result<Tensor> {
        let name = "repeat_interleave";
        if self.ndim() != 1 {
            return Err(Error::invalid(
                name,
                "repeat_interleave only accept 1D vector as repeat",
            ));
        }
        if !matches!(self.dtype(), DType::I64 | DType::I32) {
            return Err(Error::dtype(
                name,
                self.dtype(),
                format!(
                    "\"repeat_interleave_cpu\" not implemented for '{}'",
                    self.dtype().scalar_type_name()
                ),
            ));
        }
        let counts: Vec<i64> = self.to_dtype(DType::I64)?.to_vec()?;
        if counts.iter().any(|&c| c < 0) {
            return Err(Error::invalid(name, "repeats can not be negative"));
        }
        let total = counts.iter().try_fold(0i64, |a, &c| a.checked_add(c));
        if output_size.is_some_and(|s| Some(s) != total) {
            return Err(Error::invalid(name, "allocated size does not match required size"));
        }
        let index: Vec<i64> = counts
            .iter()
            .enumerate()
            .flat_map(|(i, &c)| std::iter::repeat_n(i as i64, c as usize))
            .collect();
        let len = index.len();
        Tensor::from_vec(index, [len])?
            .to_dtype(self.dtype())?
            .to_device(self.device())
    }

    /// `torch.movedim(self, source, destination)`: the dims in `source`
    /// moved to the positions in `destination`, the others keeping their
    /// order (a permute view).
    pub fn movedim(&self, source: impl IntoShape, destination: impl IntoShape) -> Result<Tensor> {
        let nd = self.ndim();
        let (src, dst) = (source.into_shape(), destination.into_shape());
        if src.len() != dst.len() {
            return Err(Error::invalid(
                "movedim",
                format!(
                    "Invalid source or destination dims: source ({src:?} dims) should contain the same number of \
                     dims as destination ({dst:?} dims)"
                ),
            ));
        }
        let src = normalize_dims("movedim", &src, nd)?;
        let dst = normalize_dims("movedim", &dst, nd)?;
        if nd == 0 {
            // As PyTorch: a 0-d tensor moves nothing (an alias).
            return self.alias();
        }
        let mut order = vec![usize::MAX; nd];
        for (&s, &d) in src.iter().zip(&dst) {
            order[d] = s;
        }
        let mut rest = (0..nd).filter(|d| !src.contains(d));
        for slot in order.iter_mut().filter(|o| **o == usize::MAX) {
            *slot = rest.next().unwrap_or(0);
        }
        let perm: Vec<i64> = order.into_iter().map(|d| d as i64).collect();
        self.permute(&perm)
    }

    /// Alias of [`Tensor::movedim`] (`torch.moveaxis`).
    pub fn moveaxis(&self, source: impl IntoShape, destination: impl IntoShape) -> Result<Tensor> {
        self.movedim(source, destination)
    }

    /// `torch.swapaxes`: [`Tensor::transpose`] under NumPy's name.
    pub fn swapaxes(&self, axis0: i64, axis1: i64) -> Result<Tensor> {
        self.transpose(axis0, axis1)
    }

    /// `torch.swapdims`: [`Tensor::transpose`].
    pub fn swapdims(&self, dim0: i64, dim1: i64) -> Result<Tensor> {
        self.transpose(dim0, dim1)
    }

    /// `torch.take_along_dim(self, indices, dim)`: `gather` with `self` and
    /// `indices` broadcast against each other outside `dim` (both
    /// flattened when `dim` is `None`).
    pub fn take_along_dim(&self, indices: &Tensor, dim: Option<i64>) -> Result<Tensor> {
        let Some(dim) = dim else {
            // PyTorch views both flat (an error for a tensor that cannot be viewed so).
            return self.view([-1])?.gather(0, &indices.view([-1])?);
        };
        if self.ndim() != indices.ndim() {
            return Err(Error::invalid(
                "take_along_dim",
                format!(
                    "torch.take_along_dim(): input and indices should have the same number of dimensions, but got \
                     {} dimensions for input, and {} dimensions for indices",
                    self.ndim(),
                    indices.ndim()
                ),
            ));
        }
        if indices.dtype() != DType::I64 {
            return Err(Error::dtype(
                "take_along_dim",
                indices.dtype(),
                format!(
                    "torch.take_along_dim(): dtype of indices should be Long but got {}",
                    indices.dtype().scalar_type_name()
                ),
            ));
        }
        let d = normalize_dim("take_along_dim", dim, self.ndim())?;
        if self.ndim() == 0 {
            // PyTorch wraps the dim, then asks the 0-d tensor for its size.
            return Err(crate::layout::no_dims("take_along_dim", d as i64));
        }
        let (mut sx, mut si) = (self.shape().to_vec(), indices.shape().to_vec());
        sx[d] = 1;
        si[d] = 1;
        let common = broadcast_shapes("take_along_dim", &sx, &si)?;
        let target = |n: usize| -> Vec<i64> {
            let mut s: Vec<i64> = common.iter().map(|&c| c as i64).collect();
            if !s.is_empty() {
                s[d] = n as i64;
            }
            s
        };
        let n_x = self.shape().get(d).copied().unwrap_or(1);
        let n_i = indices.shape().get(d).copied().unwrap_or(1);
        let x = self.expand(target(n_x))?;
        let mut idx = indices.expand(target(n_i))?;
        if idx.numel() > 0 {
            // PyTorch 2.15 wraps every index into range (a Python-style
            // remainder by the dim's size; a zero size is a division by zero).
            if n_x == 0 {
                return Err(Error::invalid("take_along_dim", "ZeroDivisionError"));
            }
            idx = idx.remainder(n_x as i64)?;
        }
        x.gather(d as i64, &idx)
    }

    /// `torch.nonzero(self, as_tuple=True)`: one int64 index tensor per dim
    /// (one for a 0-d tensor).
    pub fn nonzero_tuple(&self) -> Result<Vec<Tensor>> {
        let x = if self.ndim() == 0 {
            self.reshape([1])?
        } else {
            self.clone()
        };
        let nz = x.nonzero()?;
        (0..x.ndim() as i64).map(|d| nz.select(1, d)?.contiguous()).collect()
    }

    /// `torch.argwhere`: the indices of the nonzero elements, one row each
    /// (as [`Tensor::nonzero`]).
    pub fn argwhere(&self) -> Result<Tensor> {
        self.nonzero()
    }

    /// `torch.meshgrid(*tensors, indexing=...)`: for 0-d or 1-d inputs of
    /// sizes `n_0, n_1, ...`, views of shape `(n_0, n_1, ...)` (the first two
    /// swapped with [`Indexing::Xy`]) each varying along its own dim.
    pub fn meshgrid<T: AsRef<Tensor>>(tensors: &[T], indexing: Indexing) -> Result<Vec<Tensor>> {
        let list: Vec<&Tensor> = tensors.iter().map(AsRef::as_ref).collect();
        let tensors = list.as_slice();
        if tensors.is_empty() {
            return Err(Error::invalid(
                "meshgrid",
                "torch.meshgrid expects a non-empty TensorList",
            ));
        }
        for t in tensors {
            if t.ndim() > 1 {
                return Err(Error::invalid(
                    "meshgrid",
                    format!(
                        "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {}D",
                        t.ndim()
                    ),
                ));
            }
        }
        let dt = tensors[0].dtype();
        if tensors.iter().any(|t| t.dtype() != dt) {
            return Err(Error::invalid(
                "meshgrid",
                "torch.meshgrid: Expected all tensors in the tensor list to have the same dtype",
            ));
        }
        let swap = indexing == Indexing::Xy && tensors.len() >= 2;
        let mut order: Vec<usize> = (0..tensors.len()).collect();
        if swap {
            order.swap(0, 1);
        }
        let sizes: Vec<i64> = order.iter().map(|&i| tensors[i].numel() as i64).collect();
        let mut out = Vec::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            let pos = order.iter().position(|&o| o == i).unwrap_or(i);
            let mut view = vec![1i64; tensors.len()];
            view[pos] = -1;
            out.push(t.reshape(&view)?.expand(&sizes)?);
        }
        Ok(out)
    }

    /// `torch.cartesian_prod`: every combination of the 1-d inputs' elements,
    /// one row each (a single input is returned as it is).
    pub fn cartesian_prod<T: AsRef<Tensor>>(tensors: &[T]) -> Result<Tensor> {
        let list: Vec<&Tensor> = tensors.iter().map(AsRef::as_ref).collect();
        let tensors = list.as_slice();
        for t in tensors {
            if t.ndim() != 1 {
                return Err(Error::invalid(
                    "cartesian_prod",
                    format!("Expect a 1D vector, but got shape {:?}", t.shape()),
                ));
            }
        }
        if tensors.len() == 1 {
            return Ok(tensors[0].clone());
        }
        let grids = Tensor::meshgrid(tensors, Indexing::Ij)?;
        let flat: Vec<Tensor> = grids.iter().map(|g| g.reshape([-1])).collect::<Result<_>>()?;
        let refs: Vec<&Tensor> = flat.iter().collect();
        Tensor::stack(&refs, 1)
    }

    /// `torch.broadcast_tensors`: every input expanded to their common
    /// shape (an input already of that shape is returned as it is).
    pub fn broadcast_tensors<T: AsRef<Tensor>>(tensors: &[T]) -> Result<Vec<Tensor>> {
        let list: Vec<&Tensor> = tensors.iter().map(AsRef::as_ref).collect();
        let tensors = list.as_slice();
        let mut shape: Vec<usize> = Vec::new();
        for t in tensors {
            shape = broadcast_shapes("broadcast_tensors", &shape, t.shape())?.to_vec();
        }
        let target: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
        tensors
            .iter()
            .map(|t| {
                if t.shape() == shape.as_slice() {
                    Ok((*t).clone())
                } else {
                    t.expand(&target)
                }
            })
            .collect()
    }

    /// `torch.atleast_1d`: a 0-d tensor as shape `[1]`, others as they are.
    pub fn atleast_1d(&self) -> Result<Tensor> {
        match self.ndim() {
            0 => self.reshape([1]),
            _ => Ok(self.clone()),
        }
    }

    /// `torch.atleast_2d`: 0-d as `[1, 1]`, 1-d as `[1, n]`.
    pub fn atleast_2d(&self) -> Result<Tensor> {
        match self.ndim() {
            0 => self.reshape([1, 1]),
            1 => self.unsqueeze(0),
            _ => Ok(self.clone()),
        }
    }

    /// `torch.atleast_3d`: 0-d as `[1, 1, 1]`, 1-d as `[1, n, 1]`, 2-d as `[m, n, 1]`.
    pub fn atleast_3d(&self) -> Result<Tensor> {
        match self.ndim() {
            0 => self.reshape([1, 1, 1]),
            1 => self.unsqueeze(0)?.unsqueeze(-1),
            2 => self.unsqueeze(-1),
            _ => Ok(self.clone()),
        }
    }

    /// `torch.diag`: a 1-d input becomes the `diagonal`-th diagonal of a
    /// square matrix; a 2-d input gives its `diagonal`-th diagonal (a copy).
    /// Errors for other ranks.
    pub fn diag(&self, diagonal: i64) -> Result<Tensor> {
        match self.ndim() {
            1 => self.diag_embed(diagonal, 0, 1),
            2 => self.diagonal_copy(diagonal, 0, 1),
            n => Err(Error::invalid(
                "diag",
                format!("diag(): Supports 1D or 2D tensors. Got {n}D"),
            )),
        }
    }

    /// `torch.diagonal_copy`: [`Tensor::diagonal`] as a new tensor (node
    /// `DiagonalBackward0_copy`).
    pub fn diagonal_copy(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        call1(&DiagonalCopy { offset, dim1, dim2 }, &[self])
    }

    /// `torch.tril_indices(row, col, offset)`: the `[2, N]` int64 row and
    /// column indices of the lower triangle, row by row.
    pub fn tril_indices(row: i64, col: i64, offset: i64) -> Result<Tensor> {
        triangle_indices(row, col, offset, true)
    }

    /// `torch.triu_indices(row, col, offset)`: the upper triangle's indices.
    pub fn triu_indices(row: i64, col: i64, offset: i64) -> Result<Tensor> {
        triangle_indices(row, col, offset, false)
    }
}

#[cfg(test)]
mod tests {
    use crate::Tensor;

    /// PyTorch's answers (2.15): the pairs row by row, empty `[2, 0]`
    /// results for a zero size, one message per negative size.
    #[test]
    fn triangle_indices_as_pytorch() {
        let pairs = |t: Tensor| (t.shape().to_vec(), t.to_vec::<i64>().unwrap());
        let t = Tensor::tril_indices(3, 2, 0).unwrap();
        assert_eq!(pairs(t), (vec![2, 5], vec![0, 1, 1, 2, 2, 0, 0, 1, 0, 1]));
        let t = Tensor::triu_indices(2, 3, 1).unwrap();
        assert_eq!(pairs(t), (vec![2, 3], vec![0, 0, 1, 1, 2, 2]));
        let t = Tensor::tril_indices(2, 3, -1).unwrap();
        assert_eq!(pairs(t), (vec![2, 1], vec![1, 0]));
        for (r, c) in [(0, 3), (3, 0), (0, 0)] {
            for f in [Tensor::tril_indices, Tensor::triu_indices] {
                assert_eq!(pairs(f(r, c, 0).unwrap()), (vec![2, 0], vec![]), "({r}, {c})");
            }
        }
        for (r, c, want) in [
            (-1, 3, "row must be non-negative, got-1"),
            (-1, -2, "row must be non-negative, got-1"),
            (3, -2, "col must be non-negative, got-2"),
        ] {
            for (f, name) in [
                (
                    Tensor::tril_indices as fn(i64, i64, i64) -> crate::Result<Tensor>,
                    "tril_indices",
                ),
                (Tensor::triu_indices, "triu_indices"),
            ] {
                let e = f(r, c, 0).unwrap_err().to_string();
                assert!(e.contains(name) && e.ends_with(want), "{e}");
            }
        }
    }
}
