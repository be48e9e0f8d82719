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

/// Dispatch table of `bmm.dtype`.
pub static BMM_DTYPE: OpEntry = OpEntry::new("bmm.dtype");

/// `a @ b` of two f16 or two bf16 operands with an f32 result (PyTorch's
/// `torch.bmm(a, b, out_dtype=torch.float32)`): the product's f32
/// accumulators, not rounded to the operands' dtype. Shapes as
/// [`MatMul`]. Not differentiable: it runs below autograd, in the f16 /
/// bf16 forms of `mm` / `bmm` (which round its result once) and `addmm`
/// (which adds the bias before rounding).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MatMulF32;

impl Op for MatMulF32 {
    fn entry(&self) -> &'static OpEntry {
        &BMM_DTYPE
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let mut specs = infer_matmul("bmm", inputs)?;
        let dt = inputs[0].dtype();
        if !matches!(dt, crate::DType::F16 | crate::DType::BF16) {
            return Err(Error::dtype(
                "bmm",
                dt,
                "out_dtype float32 is only supported for float16 and bfloat16 inputs",
            ));
        }
        specs[0].dtype = crate::DType::F32;
        Ok(specs)
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
            Some(mm_mat1_grad(&g, ctx.meta(0).column_major, &ctx.input(1)?)?)
        } else {
            None
        };
        let gb = if ctx.needs_grad(1) {
            Some(mm_mat2_grad(&g, &ctx.input(0)?, ctx.meta(1).column_major)?)
        } else {
            None
        };
        Ok(vec![ga, gb])
    }
}

/// The gradient of `mat1` in `mat1 @ mat2` given the output's `g`:
/// `g @ mat2^T`, laid out like `mat1` (PyTorch's `mm_mat1_backward`):
/// for a column-major `mat1` it is computed as `(mat2 @ g^T)^T`, whose
/// transposing view hands its source a contiguous gradient. Both forms
/// sum every element in the same order, so the values are the same bits.
pub(crate) fn mm_mat1_grad(g: &Tensor, mat1_column_major: bool, mat2: &Tensor) -> Result<Tensor> {
    if mat1_column_major {
        mat2.mm(&g.t()?)?.t()
    } else {
        g.mm(&mat2.t()?)
    }
}

/// The gradient of `mat2` in `mat1 @ mat2`: `mat1^T @ g`, laid out like
/// `mat2` (PyTorch's `mm_mat2_backward`): for a column-major `mat2` (a
/// Linear's `weight.t()`) computed as `(g^T @ mat1)^T`, so the weight's
/// gradient arrives contiguous (no copy in the optimizer, no strided
/// accumulation). Same bits either way.
pub(crate) fn mm_mat2_grad(g: &Tensor, mat1: &Tensor, mat2_column_major: bool) -> Result<Tensor> {
    if mat2_column_major {
        g.t()?.mm(mat1)?.t()
    } else {
        mat1.t()?.mm(g)
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
    // As PyTorch, an empty operand (an empty result, or zeros from an
    // empty contraction) is computed before the kernel's dtype checks: bool
    // is then allowed, and bmm also takes mixed dtypes (the result has the
    // second operand's dtype, as PyTorch 2.15's).
    let empty = a.numel() == 0 || b.numel() == 0;
    if a.dtype() != b.dtype() && !(empty && name == "bmm") {
        return Err(Error::DTypeMismatch {
            op: name,
            detail: format!(
                "expected both matrices to have the same dtype, but got {} != {}",
                a.dtype(),
                b.dtype()
            ),
        });
    }
    if a.dtype() == crate::DType::Bool && !empty {
        return Err(Error::dtype(name, a.dtype(), "not implemented for bool"));
    }
    if !b.dtype().is_floating_point() && (a.requires_grad() || b.requires_grad()) && crate::autograd::is_grad_enabled()
    {
        // An empty product in an integer dtype with a float operand that
        // requires grad: PyTorch's error.
        return Err(crate::autograd::graph::autograd_dtype_error(name, b.dtype()));
    }
    let mut shape: Dims = a.shape()[..na - 1].into();
    shape.push(b.shape()[nb - 1]);
    Ok(smallvec::smallvec![OutSpec::new(shape, b.dtype())])
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

/// PyTorch's `should_fold`: whether `matmul(a, b)` folds the operand with
/// three or more dims into a matrix (one mm/mv) instead of a batched
/// product: when the other has one or two dims, and either it requires
/// grad or the fold needs no copy.
fn should_fold(a: &Tensor, b: &Tensor) -> bool {
    let (na, nb) = (a.ndim(), b.ndim());
    let larger_first = na >= nb;
    let (dim_t1, dim_t2) = if larger_first { (na, nb) } else { (nb, na) };
    if !(dim_t1 >= 3 && dim_t2 <= 2) {
        return false;
    }
    let (large, small) = if larger_first { (a, b) } else { (b, a) };
    if small.requires_grad() {
        return true;
    }
    if a.ndim() == 2 {
        return false;
    }
    if large.numel() == 0 {
        return true;
    }
    // The fold is a view when the batch dims (of the larger operand as it
    // is multiplied: transposed when it is on the right) are contiguous.
    let (shape, strides) = if larger_first {
        (large.shape().to_vec(), large.strides().to_vec())
    } else {
        let mut sh = large.shape().to_vec();
        let mut st = large.strides().to_vec();
        let n = sh.len();
        sh.swap(n - 1, n - 2);
        st.swap(n - 1, n - 2);
        (sh, st)
    };
    (0..dim_t1 - 2).all(|i| strides[i] == strides[i + 1] * shape[i + 1])
}

/// # Matrix products
///
/// `matmul` with PyTorch's broadcasting rules, and `mm`, `bmm`, `mv`,
/// `dot`, `outer`.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let a = Tensor::ones((2, 3))?;
/// let b = Tensor::ones((3, 4))?;
/// assert_eq!(a.matmul(&b)?.shape(), [2, 4]);
/// assert_eq!(Tensor::ones((5, 2, 3))?.matmul(&b)?.shape(), [5, 2, 4]);
/// assert!(a.matmul(&a).is_err()); // matmul: mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
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
        if self.dtype() == crate::DType::Bool {
            return Err(Error::dtype("dot", self.dtype(), "\"dot\" not implemented for 'Bool'"));
        }
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
        // An empty batched product takes mixed dtypes (see bmm); mm, mv
        // and dot check theirs.
        if a.numel() != 0 && b.numel() != 0 {
            same_dtype("matmul", a, b)?;
        }
        // Checked here so that the error names matmul, the op called, with
        // both shapes (the mm/mv/dot below would name themselves).
        let ka = a.shape()[na - 1];
        let kb = b.shape()[nb.saturating_sub(2)];
        if ka != kb {
            let rows = |t: &Tensor| t.shape()[..t.ndim() - 1].iter().product::<usize>();
            let detail = match (na, nb) {
                (1, 1) => format!("inconsistent tensor size: {ka} and {kb} elements"),
                (_, 1) => format!("size mismatch, got input ({}x{ka}), vec ({kb})", rows(a)),
                _ => format!(
                    "mat1 and mat2 shapes cannot be multiplied ({}x{ka} and {kb}x{})",
                    rows(a),
                    b.shape()[nb - 1]
                ),
            };
            return Err(Error::shape("matmul", a.shape(), b.shape(), detail));
        }
        match (na, nb) {
            (1, 1) => a.dot(b),
            (2, 1) => a.mv(b),
            // As PyTorch: `a.unsqueeze(0).mm(b).squeeze_(0)`.
            (1, 2) => crate::ops::view::squeeze_temporary(&a.unsqueeze(0)?.mm(b)?, 0),
            (2, 2) => a.mm(b),
            _ if should_fold(a, b) => {
                // As PyTorch: fold the larger operand's batch dims into the
                // rows of one mm/mv (the smaller one, transposed, on the
                // right when the larger one is on the right).
                let transpose = nb > na;
                let t1 = if transpose { b.transpose(-1, -2)? } else { a.clone() };
                let t2 = match (transpose, na) {
                    (true, 2) => a.t()?,
                    (true, _) => a.clone(),
                    (false, _) => b.clone(),
                };
                let k = t1.shape()[t1.ndim() - 1];
                if t2.shape()[0] != k {
                    return Err(Error::shape("matmul", a.shape(), b.shape(), "inner dimensions differ"));
                }
                let mut shape: Vec<i64> = t1.shape()[..t1.ndim() - 1].iter().map(|&s| s as i64).collect();
                let rows = shape.iter().product::<i64>();
                let folded = t1.reshape([rows, k as i64])?;
                if t2.ndim() == 2 {
                    shape.push(t2.shape()[1] as i64);
                    let out = crate::ops::view::unsafe_view(&folded.mm(&t2)?, &shape)?;
                    if transpose {
                        out.transpose(-1, -2)?.contiguous()
                    } else {
                        Ok(out)
                    }
                } else {
                    crate::ops::view::unsafe_view(&folded.mv(&t2)?, &shape)
                }
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
                // As PyTorch, the batched product is `_unsafe_view`ed to the
                // result's shape (node `UnsafeViewBackward0`).
                let mut shape: Vec<i64> = batch.iter().map(|&s| s as i64).collect();
                if na >= 2 {
                    shape.push(n as i64);
                }
                if nb >= 2 {
                    shape.push(m as i64);
                }
                crate::ops::view::unsafe_view(&out, &shape)
            }
        }
    }
}
