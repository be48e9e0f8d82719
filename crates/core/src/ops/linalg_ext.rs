//! Products built from the GEMM: `einsum`, `tensordot`, `linalg.cross`,
//! `kron` and batched outer products (the `addmm` family is in
//! `ops/addmm.rs`). Composites of `mm`/`bmm`/`mul`/`sum` and views:
//! autograd records the pieces.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call1, downcast_op};
use crate::ops::grad_util::grad0;
use crate::{DType, Error, Result, Tensor};

/// Dispatch table of `linalg_cross`.
pub static LINALG_CROSS: OpEntry = OpEntry::differentiable("linalg_cross");

/// `linalg_cross(a, b, dim)`: inputs `[a, b]` of one rank and dtype, size 3
/// along `dim` (normalised), the other dims broadcast. Computed in the
/// `AnyBackend` slot from `index_select`, `mul` and `sub`; its derivative
/// is PyTorch's (`ga = cross(b, g)`, `gb = cross(g, a)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cross {
    /// The dim of size 3.
    pub dim: usize,
}

impl Op for Cross {
    fn entry(&self) -> &'static OpEntry {
        &LINALG_CROSS
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (a, b) = (inputs[0], inputs[1]);
        if a.dtype() != b.dtype() {
            return Err(Error::DTypeMismatch {
                op: "linalg.cross",
                detail: format!(
                    "expected scalar type {} but found {}",
                    a.dtype().scalar_type_name(),
                    b.dtype().scalar_type_name()
                ),
            });
        }
        if a.dtype() == DType::Bool {
            return Err(Error::dtype(
                "linalg.cross",
                DType::Bool,
                "\"cross\" not implemented for 'Bool'",
            ));
        }
        let shape = crate::layout::broadcast_shapes("linalg.cross", a.shape(), b.shape())?;
        Ok(smallvec::smallvec![OutSpec::new(shape, a.dtype())])
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn saves_for(&self, needs: u64) -> Saves {
        Saves::cross(needs)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let d = self.dim as i64;
        let ga = if ctx.needs_grad(0) {
            Some(ctx.input(1)?.linalg_cross(&g, d)?)
        } else {
            None
        };
        let gb = if ctx.needs_grad(1) {
            Some(g.linalg_cross(&ctx.input(0)?, d)?)
        } else {
            None
        };
        Ok(vec![ga, gb])
    }
}

fn cross_kernel(c: &Call) -> Result<Tensors> {
    let op: &Cross = downcast_op(c.op)?;
    op.infer(c.inputs)?;
    let (a, b) = (c.inputs[0], c.inputs[1]);
    let d = op.dim as i64;
    let i1 = Tensor::from_vec(vec![1i64, 2, 0], [3])?.to_device(a.device())?;
    let i2 = Tensor::from_vec(vec![2i64, 0, 1], [3])?.to_device(a.device())?;
    let l = a.index_select(d, &i1)?.mul(&b.index_select(d, &i2)?)?;
    let r = a.index_select(d, &i2)?.mul(&b.index_select(d, &i1)?)?;
    Ok(smallvec::smallvec![l.sub(&r)?])
}

/// Registers `linalg_cross`'s kernel (one composite for every backend).
pub(crate) fn register() -> Result<()> {
    LINALG_CROSS.register_builtin(Slot::AnyBackend, Kernel::Functional(cross_kernel))
}

/// # Contractions
///
/// `einsum`, `tensordot`, `linalg_cross`, `kron`, `batch_outer`.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let q = Tensor::ones((2, 1, 5, 4))?;
/// assert_eq!(Tensor::einsum("bhqd,bhkd->bhqk", &[&q, &q])?.shape(), [2, 1, 5, 5]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `torch.einsum(equation, operands)`: any subscripts, `...`
    /// broadcasting, repeated subscripts as diagonals (views); contracted
    /// pairwise in the order of fewest flops, each pair one batched GEMM.
    ///
    /// Errors (PyTorch's messages): an equation that does not parse, a
    /// number of operands or subscripts that does not match, sizes that do
    /// not broadcast, operands of different dtypes summed together.
    pub fn einsum<T: AsRef<Tensor>>(equation: &str, operands: &[T]) -> Result<Tensor> {
        let operands: Vec<&Tensor> = operands.iter().map(AsRef::as_ref).collect();
        crate::ops::einsum::einsum(equation, &operands)
    }

    /// `torch.tensordot(self, other, dims=(dims_a, dims_b))`: contracts
    /// `dims_a` of `self` with `dims_b` of `other` (one GEMM).
    ///
    /// Errors (PyTorch's messages): lists of different lengths, dims out of
    /// range, contracted sizes that differ, different dtypes.
    pub fn tensordot(&self, other: &Tensor, dims_a: &[i64], dims_b: &[i64]) -> Result<Tensor> {
        if dims_a.len() != dims_b.len() {
            return Err(Error::invalid(
                "tensordot",
                "both dimension lists should have same length",
            ));
        }
        if self.dtype() != other.dtype() {
            return Err(Error::DTypeMismatch {
                op: "tensordot",
                detail: "both inputs should have same dtype".into(),
            });
        }
        let da = crate::layout::normalize_dims("tensordot", dims_a, self.ndim())?;
        let db = crate::layout::normalize_dims("tensordot", dims_b, other.ndim())?;
        let mut k = 1i64;
        for (&i, &j) in da.iter().zip(&db) {
            let (si, sj) = (self.shape()[i], other.shape()[j]);
            if si != sj {
                return Err(Error::invalid(
                    "tensordot",
                    format!(
                        "contracted dimensions need to match, but first has size {si} in dim {i} and second has size {sj} in dim {j}"
                    ),
                ));
            }
            k *= si as i64;
        }
        let free_a: Vec<usize> = (0..self.ndim()).filter(|d| !da.contains(d)).collect();
        let free_b: Vec<usize> = (0..other.ndim()).filter(|d| !db.contains(d)).collect();
        let mut pa: Vec<i64> = free_a.iter().map(|&d| d as i64).collect();
        pa.extend(da.iter().map(|&d| d as i64));
        let mut pb: Vec<i64> = db.iter().map(|&d| d as i64).collect();
        pb.extend(free_b.iter().map(|&d| d as i64));
        let n: i64 = free_a.iter().map(|&d| self.shape()[d] as i64).product();
        let m: i64 = free_b.iter().map(|&d| other.shape()[d] as i64).product();
        let a = self.permute(pa)?.reshape([n, k])?;
        let b = other.permute(pb)?.reshape([k, m])?;
        let mut shape: Vec<i64> = free_a.iter().map(|&d| self.shape()[d] as i64).collect();
        shape.extend(free_b.iter().map(|&d| other.shape()[d] as i64));
        a.mm(&b)?.reshape(shape)
    }

    /// `torch.tensordot(self, other, dims=n)`: the last `n` dims of `self`
    /// with the first `n` of `other`; errors as [`Tensor::tensordot`], and
    /// for `n` past either rank.
    pub fn tensordot_n(&self, other: &Tensor, n: usize) -> Result<Tensor> {
        if n > self.ndim() || n > other.ndim() {
            return Err(Error::invalid(
                "tensordot",
                format!("tensordot expects dims < ndim_a or ndim_b, but got dims={n}"),
            ));
        }
        let da: Vec<i64> = (self.ndim() - n..self.ndim()).map(|d| d as i64).collect();
        let db: Vec<i64> = (0..n as i64).collect();
        self.tensordot(other, &da, &db)
    }

    /// `torch.linalg.cross(self, other, dim)`: the cross product along
    /// `dim` (of size 3), broadcasting the other dims. One node,
    /// `LinalgCrossBackward0`.
    ///
    /// Errors (PyTorch's messages): inputs of different ranks or dtypes,
    /// `dim` out of range or not of size 3 in both, bool inputs, other
    /// dims that do not broadcast.
    pub fn linalg_cross(&self, other: &Tensor, dim: i64) -> Result<Tensor> {
        let op = "linalg.cross";
        if self.ndim() != other.ndim() {
            return Err(Error::invalid(op, "inputs must have the same number of dimensions."));
        }
        let d = crate::layout::normalize_dim_strict(op, dim, self.ndim())?;
        if self.shape()[d] != 3 || other.shape()[d] != 3 {
            return Err(Error::invalid(
                op,
                format!(
                    "inputs dimension {dim} must have length 3. Got {} and {}",
                    self.shape()[d],
                    other.shape()[d]
                ),
            ));
        }
        call1(&Cross { dim: d }, &[self, other])
    }

    /// `torch.cross(self, other, dim)`: [`Tensor::linalg_cross`] along
    /// `dim`, or without one along the first dim of size 3 (PyTorch's
    /// deprecated default).
    ///
    /// Errors: no dim of size 3 (`dim` `None`), and those of `linalg_cross`.
    pub fn cross(&self, other: &Tensor, dim: Option<i64>) -> Result<Tensor> {
        let dim = match dim {
            Some(d) => d,
            None => match self.shape().iter().position(|&s| s == 3) {
                Some(d) => d as i64,
                None => return Err(Error::invalid("cross", "no dimension of size 3 in input")),
            },
        };
        self.linalg_cross(other, dim)
    }

    /// `torch.kron(self, other)`: the Kronecker product (the shorter shape
    /// padded with leading 1s; dtypes promote). Never fails on valid
    /// tensors (PyTorch 2.15 fails on a transposed operand; this does not).
    pub fn kron(&self, other: &Tensor) -> Result<Tensor> {
        let n = self.ndim().max(other.ndim());
        let pad = |t: &Tensor| -> Vec<i64> {
            let mut s = vec![1i64; n - t.ndim()];
            s.extend(t.shape_i64());
            s
        };
        let (sa, sb) = (pad(self), pad(other));
        let mut ea = Vec::with_capacity(2 * n);
        let mut eb = Vec::with_capacity(2 * n);
        for i in 0..n {
            ea.extend([sa[i], 1]);
            eb.extend([1, sb[i]]);
        }
        let out: Vec<i64> = (0..n).map(|i| sa[i] * sb[i]).collect();
        self.reshape(ea)?.mul(&other.reshape(eb)?)?.reshape(out)
    }

    /// Outer products of batches: `[..., n]` and `[..., m]` (batch dims
    /// broadcast) give `[..., n, m]`; an error for 0-d operands or batch
    /// dims that do not broadcast.
    pub fn batch_outer(&self, other: &Tensor) -> Result<Tensor> {
        if self.ndim() == 0 || other.ndim() == 0 {
            return Err(Error::shape(
                "batch_outer",
                self.shape(),
                other.shape(),
                "both arguments need at least 1 dimension",
            ));
        }
        self.unsqueeze(-1)?.mul(&other.unsqueeze(-2)?)
    }
}
