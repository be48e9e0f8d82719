//! Matrix products: `mm`, `bmm` (batched, any number of batch dims) and the
//! front ends `matmul` (PyTorch's full broadcasting rules), `dot`, `outer`, `mv`.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call1};
use crate::layout::{Dims, broadcast_shapes};
use crate::ops::grad_util::grad0;
use crate::{Error, Result, Tensor};

/// Dispatch table of `mm`.
pub static MM: OpEntry = OpEntry::differentiable("mm");
/// Dispatch table of `bmm`.
pub static BMM: OpEntry = OpEntry::differentiable("bmm");

/// `a @ b` for `a: [..., n, k]`, `b: [..., k, m]` with identical batch dims
/// (`mm` when there are none). Inputs may have any strides, including
/// stride-0 (expanded) batch dims; the output is contiguous.
#[derive(Debug, Clone, Copy)]
pub struct MatMul;

impl Op for MatMul {
    fn entry(&self) -> &'static OpEntry {
        &BMM
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        infer_matmul("bmm", inputs)
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b11)
    }

    fn saves_for(&self, needs: u64) -> Saves {
        Saves::cross(needs)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let ga = if ctx.needs_grad(0) {
            Some(call1(&MatMul, &[&g, &ctx.input(1)?.transpose(-1, -2)?])?)
        } else {
            None
        };
        let gb = if ctx.needs_grad(1) {
            Some(call1(&MatMul, &[&ctx.input(0)?.transpose(-1, -2)?, &g])?)
        } else {
            None
        };
        Ok(vec![ga, gb])
    }
}

/// The 2-D case, its own operator as in PyTorch.
#[derive(Debug, Clone, Copy)]
pub struct Mm;

impl Op for Mm {
    fn entry(&self) -> &'static OpEntry {
        &MM
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        if inputs[0].ndim() != 2 || inputs[1].ndim() != 2 {
            return Err(Error::shape(
                "mm",
                inputs[0].shape(),
                inputs[1].shape(),
                "both arguments must be 2-D",
            ));
        }
        infer_matmul("mm", inputs)
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b11)
    }

    fn saves_for(&self, needs: u64) -> Saves {
        Saves::cross(needs)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let ga = if ctx.needs_grad(0) {
            Some(g.mm(&ctx.input(1)?.t()?)?)
        } else {
            None
        };
        let gb = if ctx.needs_grad(1) {
            Some(ctx.input(0)?.t()?.mm(&g)?)
        } else {
            None
        };
        Ok(vec![ga, gb])
    }
}

fn infer_matmul(name: &'static str, inputs: &[&Tensor]) -> Result<OutSpecs> {
    let (a, b) = (inputs[0], inputs[1]);
    let (na, nb) = (a.ndim(), b.ndim());
    if na < 2 || na != nb || a.shape()[..na - 2] != b.shape()[..nb - 2] {
        return Err(Error::shape(
            name,
            a.shape(),
            b.shape(),
            "expected [..., n, k] and [..., k, m] with equal batch dims",
        ));
    }
    if a.shape()[na - 1] != b.shape()[nb - 2] {
        return Err(Error::shape(
            name,
            a.shape(),
            b.shape(),
            format!(
                "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
                a.shape()[na - 2],
                a.shape()[na - 1],
                b.shape()[nb - 2],
                b.shape()[nb - 1]
            ),
        ));
    }
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch {
            op: name,
            detail: format!(
                "expected both matrices to have the same dtype, but got {} != {}",
                a.dtype(),
                b.dtype()
            ),
        });
    }
    if a.dtype() == crate::DType::Bool {
        return Err(Error::dtype(name, a.dtype(), "not implemented for bool"));
    }
    let mut shape: Dims = a.shape()[..na - 1].into();
    shape.push(b.shape()[nb - 1]);
    Ok(smallvec::smallvec![OutSpec::new(shape, a.dtype())])
}

fn same_dtype(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            detail: format!(
                "expected both arguments to have the same dtype, but got {} != {}",
                a.dtype(),
                b.dtype()
            ),
        });
    }
    Ok(())
}

impl Tensor {
    /// Matrix product of two 2-D tensors.
    pub fn mm(&self, other: &Tensor) -> Result<Tensor> {
        call1(&Mm, &[self, other])
    }

    /// Batched matrix product of two 3-D tensors with equal batch size.
    pub fn bmm(&self, other: &Tensor) -> Result<Tensor> {
        if self.ndim() != 3 || other.ndim() != 3 {
            return Err(Error::shape(
                "bmm",
                self.shape(),
                other.shape(),
                "both arguments must be 3-D",
            ));
        }
        call1(&MatMul, &[self, other])
    }

    /// Matrix-vector product.
    pub fn mv(&self, vec: &Tensor) -> Result<Tensor> {
        if self.ndim() != 2 || vec.ndim() != 1 {
            return Err(Error::shape(
                "mv",
                self.shape(),
                vec.shape(),
                "expected a 2-D matrix and a 1-D vector",
            ));
        }
        same_dtype("mv", self, vec)?;
        if self.shape()[1] != vec.shape()[0] {
            return Err(Error::shape(
                "mv",
                self.shape(),
                vec.shape(),
                "size mismatch: the matrix's columns must match the vector's length",
            ));
        }
        call1(&crate::ops::composite::CompositeOp::Mv, &[self, vec])
    }

    /// Inner product of two 1-D tensors of the same size and dtype.
    pub fn dot(&self, other: &Tensor) -> Result<Tensor> {
        if self.ndim() != 1 || other.ndim() != 1 {
            return Err(Error::shape("dot", self.shape(), other.shape(), "1D tensors expected"));
        }
        if self.shape() != other.shape() {
            return Err(Error::shape(
                "dot",
                self.shape(),
                other.shape(),
                "inconsistent tensor size",
            ));
        }
        same_dtype("dot", self, other)?;
        call1(&crate::ops::composite::CompositeOp::Dot, &[self, other])
    }

    /// Outer product of two 1-D tensors.
    pub fn outer(&self, other: &Tensor) -> Result<Tensor> {
        if self.ndim() != 1 || other.ndim() != 1 {
            return Err(Error::shape(
                "outer",
                self.shape(),
                other.shape(),
                "1D tensors expected",
            ));
        }
        self.unsqueeze(1)?.mul(&other.unsqueeze(0)?)
    }

    /// Matrix product with PyTorch's `matmul` rules: 1-D·1-D is a dot
    /// product, a 1-D argument gains (then loses) a dim, and batch dims
    /// broadcast.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let (a, b) = (self, other);
        let (na, nb) = (a.ndim(), b.ndim());
        if na == 0 || nb == 0 {
            return Err(Error::shape(
                "matmul",
                a.shape(),
                b.shape(),
                "both arguments need at least 1 dimension",
            ));
        }
        same_dtype("matmul", a, b)?;
        match (na, nb) {
            (1, 1) => a.dot(b),
            (2, 1) => a.mv(b),
            (1, 2) => a.unsqueeze(0)?.mm(b)?.squeeze_dim(0),
            (2, 2) => a.mm(b),
            (_, 1 | 2) if na >= 3 => {
                // Fold a's batch dims into rows: one big mm.
                let k = a.shape()[na - 1];
                let b2 = if nb == 1 { b.unsqueeze(1)? } else { b.clone() };
                if b2.shape()[0] != k {
                    return Err(Error::shape("matmul", a.shape(), b.shape(), "inner dimensions differ"));
                }
                let rows = a.reshape(&[a.shape()[..na - 1].iter().product::<usize>() as i64, k as i64])?;
                let out = rows.mm(&b2)?;
                let mut shape: Vec<i64> = a.shape()[..na - 1].iter().map(|&s| s as i64).collect();
                if nb == 2 {
                    shape.push(b.shape()[1] as i64);
                }
                out.reshape(&shape)
            }
            _ => {
                let a2 = if na == 1 { a.unsqueeze(0)? } else { a.clone() };
                let b2 = if nb == 1 { b.unsqueeze(1)? } else { b.clone() };
                let (ra, rb) = (a2.ndim(), b2.ndim());
                let (n, k1) = (a2.shape()[ra - 2], a2.shape()[ra - 1]);
                let (k2, m) = (b2.shape()[rb - 2], b2.shape()[rb - 1]);
                if k1 != k2 {
                    return Err(Error::shape("matmul", a.shape(), b.shape(), "inner dimensions differ"));
                }
                let batch = broadcast_shapes("matmul", &a2.shape()[..ra - 2], &b2.shape()[..rb - 2])?;
                let mut sa: Vec<i64> = batch.iter().map(|&s| s as i64).collect();
                let mut sb = sa.clone();
                sa.extend([n as i64, k1 as i64]);
                sb.extend([k2 as i64, m as i64]);
                let out = call1(&MatMul, &[&a2.expand(&sa)?, &b2.expand(&sb)?])?;
                match (na, nb) {
                    (1, _) => out.squeeze_dim(-2),
                    (_, 1) => out.squeeze_dim(-1),
                    _ => Ok(out),
                }
            }
        }
    }
}
