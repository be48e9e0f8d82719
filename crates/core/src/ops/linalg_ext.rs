//! Products built from the GEMM: `addmm`, `addmv`, `addbmm`, `baddbmm`
//! (with `beta` / `alpha`), `einsum`, `tensordot`, `linalg.cross`, `kron`
//! and batched outer products. All composites of `mm`/`bmm`/`mul`/`sum`
//! and views: autograd records the pieces.

use crate::layout::broadcast_shapes;
use crate::{Error, Result, Tensor};

/// `beta * input + alpha * prod`, with `input` broadcast to `prod`'s shape
/// (an error naming `op` when it does not broadcast to exactly that shape)
/// and ignored when `beta` is 0 (NaN in it does not propagate, as PyTorch).
fn scale_add(op: &'static str, input: &Tensor, prod: Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
    let b = broadcast_shapes(op, input.shape(), prod.shape())?;
    if b.as_slice() != prod.shape() {
        return Err(Error::shape(
            op,
            input.shape(),
            prod.shape(),
            format!(
                "The expanded size of the tensor ({:?}) must match the result's size {:?}",
                input.shape(),
                prod.shape()
            ),
        ));
    }
    let scaled = if alpha == 1.0 { prod } else { prod.mul(alpha)? };
    if beta == 0.0 {
        return Ok(scaled);
    }
    let inp = if beta == 1.0 { input.clone() } else { input.mul(beta)? };
    inp.add(&scaled)
}

fn need_dims(op: &'static str, what: &str, t: &Tensor, n: usize) -> Result<()> {
    if t.ndim() != n {
        let kind = match n {
            1 => "vector",
            2 => "matrix",
            _ => "3D tensor",
        };
        return Err(Error::invalid(
            op,
            format!("{what} must be a {kind}, got {}-D tensor", t.ndim()),
        ));
    }
    Ok(())
}

/// # Fused products and contractions
///
/// `addmm` & co. with PyTorch's `beta` / `alpha`, `einsum`, `tensordot`,
/// `linalg_cross`, `kron`, `batch_outer`.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let a = Tensor::ones((2, 3))?;
/// let b = Tensor::ones((3, 4))?;
/// let c = Tensor::zeros((2, 4))?;
/// assert_eq!(c.addmm(&a, &b, 1.0, 2.0)?.to_vec2::<f32>()?[0], [6.0; 4]);
/// let q = Tensor::ones((2, 1, 5, 4))?;
/// assert_eq!(Tensor::einsum("bhqd,bhkd->bhqk", &[&q, &q])?.shape(), [2, 1, 5, 5]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `beta * self + alpha * (mat1 @ mat2)` (`torch.addmm`).
    pub fn addmm(&self, mat1: &Tensor, mat2: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        need_dims("addmm", "mat1", mat1, 2)?;
        need_dims("addmm", "mat2", mat2, 2)?;
        if mat1.shape()[1] != mat2.shape()[0] {
            return Err(Error::shape(
                "addmm",
                mat1.shape(),
                mat2.shape(),
                format!(
                    "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
                    mat1.shape()[0],
                    mat1.shape()[1],
                    mat2.shape()[0],
                    mat2.shape()[1]
                ),
            ));
        }
        scale_add("addmm", self, mat1.mm(mat2)?, beta, alpha)
    }

    /// `beta * self + alpha * (mat @ vec)` (`torch.addmv`).
    pub fn addmv(&self, mat: &Tensor, vec: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        need_dims("addmv", "mat", mat, 2)?;
        need_dims("addmv", "vec", vec, 1)?;
        let p = mat.mv(vec).map_err(|e| rename(e, "addmv"))?;
        scale_add("addmv", self, p, beta, alpha)
    }

    /// `beta * self + alpha * sum_b(batch1[b] @ batch2[b])` (`torch.addbmm`):
    /// one GEMM over the batch folded into the inner dim.
    pub fn addbmm(&self, batch1: &Tensor, batch2: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        need_dims("addbmm", "batch1", batch1, 3)?;
        need_dims("addbmm", "batch2", batch2, 3)?;
        let (b, n, k) = (batch1.shape()[0], batch1.shape()[1], batch1.shape()[2]);
        if batch2.shape()[0] != b || batch2.shape()[1] != k {
            return Err(Error::shape(
                "addbmm",
                batch1.shape(),
                batch2.shape(),
                "batch1 and batch2 must have same number of batches and matching inner dims",
            ));
        }
        let m = batch2.shape()[2];
        let a = batch1.permute([1, 0, 2])?.reshape([n as i64, (b * k) as i64])?;
        let c = batch2.reshape([(b * k) as i64, m as i64])?;
        scale_add("addbmm", self, a.mm(&c)?, beta, alpha)
    }

    /// `beta * self + alpha * (batch1 @ batch2)` (`torch.baddbmm`).
    pub fn baddbmm(&self, batch1: &Tensor, batch2: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        need_dims("baddbmm", "batch1", batch1, 3)?;
        need_dims("baddbmm", "batch2", batch2, 3)?;
        let p = batch1.bmm(batch2).map_err(|e| rename(e, "baddbmm"))?;
        scale_add("baddbmm", self, p, beta, alpha)
    }

    /// `torch.einsum(equation, operands)`: any subscripts, `...`
    /// broadcasting, repeated subscripts as diagonals; contracted pairwise
    /// in the order of fewest flops, each pair one batched GEMM.
    pub fn einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
        crate::ops::einsum::einsum(equation, operands)
    }

    /// `torch.tensordot(self, other, dims=(dims_a, dims_b))`.
    pub fn tensordot(&self, other: &Tensor, dims_a: &[i64], dims_b: &[i64]) -> Result<Tensor> {
        if dims_a.len() != dims_b.len() {
            return Err(Error::invalid(
                "tensordot",
                "both dimension lists should have same length",
            ));
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
    /// with the first `n` of `other`.
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
    /// `dim` (of size 3), broadcasting the other dims.
    pub fn linalg_cross(&self, other: &Tensor, dim: i64) -> Result<Tensor> {
        if self.ndim() != other.ndim() {
            return Err(Error::invalid(
                "linalg.cross",
                "inputs must have the same number of dimensions.",
            ));
        }
        let d = crate::layout::normalize_dim("linalg.cross", dim, self.ndim())?;
        if self.shape()[d] != 3 || other.shape()[d] != 3 {
            return Err(Error::invalid(
                "linalg.cross",
                format!(
                    "inputs dimension {dim} must have length 3. Got {} and {}",
                    self.shape()[d],
                    other.shape()[d]
                ),
            ));
        }
        let i1 = Tensor::new([1i64, 2, 0])?;
        let i2 = Tensor::new([2i64, 0, 1])?;
        let d = d as i64;
        let l = self.index_select(d, &i1)?.mul(&other.index_select(d, &i2)?)?;
        let r = self.index_select(d, &i2)?.mul(&other.index_select(d, &i1)?)?;
        l.sub(&r)
    }

    /// `torch.kron(self, other)`: the Kronecker product (the shorter shape
    /// padded with leading 1s).
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
    /// broadcast) give `[..., n, m]`.
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

/// The same error, naming `op` (the op the user called).
pub(crate) fn rename(e: Error, op: &'static str) -> Error {
    match e {
        Error::ShapeMismatch { lhs, rhs, detail, .. } => Error::ShapeMismatch { op, lhs, rhs, detail },
        Error::InvalidArgument { detail, .. } => Error::InvalidArgument { op, detail },
        Error::DTypeMismatch { detail, .. } => Error::DTypeMismatch { op, detail },
        e => e,
    }
}
