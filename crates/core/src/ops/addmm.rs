//! `addmm`, `addmv`, `addbmm` and `baddbmm`: `beta * input + alpha *
//! product`, one operator each with PyTorch's name, checks, messages,
//! node (`AddmmBackward0`, ...) and derivative formulas. The forward runs
//! in the `AnyBackend` slot, below autograd: the product through the GEMM
//! (`mm` / `bmm`; `addbmm` as one GEMM with the batch folded into the inner
//! dim), then `alpha` and `beta * input` applied to it in place; `beta = 0`
//! never reads `input` (NaN and inf in it do not propagate). Integer
//! tensors take `beta` and `alpha` truncated to integers, as PyTorch's
//! `Scalar::to<int64_t>`; f16 and bf16 are computed in f32 and rounded once.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call1, downcast_op};
use crate::layout::Dims;
use crate::{DType, Error, Result, Scalar, Tensor, TensorOptions};

/// Dispatch table of `addmm`.
pub static ADDMM: OpEntry = OpEntry::differentiable("addmm");
/// Dispatch table of `addmv`.
pub static ADDMV: OpEntry = OpEntry::differentiable("addmv");
/// Dispatch table of `addbmm`.
pub static ADDBMM: OpEntry = OpEntry::differentiable("addbmm");
/// Dispatch table of `baddbmm`.
pub static BADDBMM: OpEntry = OpEntry::differentiable("baddbmm");

/// Which product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddProductKind {
    /// `input [n, m] (broadcast) + mat1 [n, k] @ mat2 [k, m]`.
    Addmm,
    /// `input [n] (broadcast) + mat [n, k] @ vec [k]`.
    Addmv,
    /// `input [n, m] (broadcast) + sum_b batch1[b] @ batch2[b]`.
    Addbmm,
    /// `input [b, n, m] (broadcast) + batch1 [b, n, k] @ batch2 [b, k, m]`.
    Baddbmm,
}

/// `beta * input + alpha * product`: inputs `[input, a, b]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AddProduct {
    /// Which product.
    pub kind: AddProductKind,
    /// Factor of `input` (0: `input` is not read).
    pub beta: f64,
    /// Factor of the product.
    pub alpha: f64,
}

fn name(dt: DType) -> &'static str {
    dt.scalar_type_name()
}

impl AddProduct {
    fn op(&self) -> &'static str {
        self.entry().base_name()
    }

    /// PyTorch's checks, in its order; the product's shape.
    fn check(&self, input: &Tensor, a: &Tensor, b: &Tensor) -> Result<Dims> {
        let op = self.op();
        let (sa, sb) = (a.shape(), b.shape());
        let out: Dims = match self.kind {
            AddProductKind::Addmm => {
                if a.ndim() != 2 {
                    return Err(Error::invalid(
                        op,
                        format!("self must be a matrix, got {}-D tensor", a.ndim()),
                    ));
                }
                if b.ndim() != 2 {
                    return Err(Error::invalid(
                        op,
                        format!("mat2 must be a matrix, got {}-D tensor", b.ndim()),
                    ));
                }
                if sa[1] != sb[0] {
                    return Err(Error::shape(
                        op,
                        sa,
                        sb,
                        format!(
                            "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
                            sa[0], sa[1], sb[0], sb[1]
                        ),
                    ));
                }
                smallvec::smallvec![sa[0], sb[1]]
            }
            AddProductKind::Addmv => {
                if a.ndim() != 2 || b.ndim() != 1 || input.ndim() > 1 {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "vector + matrix @ vector expected, got {}, {}, {}",
                            input.ndim(),
                            a.ndim(),
                            b.ndim()
                        ),
                    ));
                }
                if sa[1] != sb[0] || (input.numel() != sa[0] && input.numel() != 1) {
                    return Err(Error::shape(
                        op,
                        sa,
                        sb,
                        format!(
                            "size mismatch, got input ({}), mat ({}x{}), vec ({})",
                            input.shape().first().copied().unwrap_or(1),
                            sa[0],
                            sa[1],
                            sb[0]
                        ),
                    ));
                }
                smallvec::smallvec![sa[0]]
            }
            AddProductKind::Addbmm | AddProductKind::Baddbmm => {
                for (t, what) in [(a, "batch1"), (b, "batch2")] {
                    if t.ndim() != 3 {
                        return Err(Error::invalid(op, format!("{what} must be a 3D tensor")));
                    }
                }
                if self.kind == AddProductKind::Addbmm {
                    if sa[0] != sb[0] {
                        return Err(Error::shape(
                            op,
                            sa,
                            sb,
                            format!(
                                "batch1 and batch2 must have same number of batches, got {} and {}",
                                sa[0], sb[0]
                            ),
                        ));
                    }
                    if sa[2] != sb[1] {
                        return Err(Error::shape(
                            op,
                            sa,
                            sb,
                            format!(
                                "Incompatible matrix sizes for bmm ({}x{} and {}x{})",
                                sa[1], sa[2], sb[1], sb[2]
                            ),
                        ));
                    }
                    smallvec::smallvec![sa[1], sb[2]]
                } else {
                    if sb[0] != sa[0] || sb[1] != sa[2] {
                        return Err(Error::shape(
                            op,
                            sa,
                            sb,
                            format!(
                                "Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].",
                                sa[0], sa[2], sb[0], sb[1]
                            ),
                        ));
                    }
                    smallvec::smallvec![sa[0], sa[1], sb[2]]
                }
            }
        };
        self.check_dtypes(input, a, b)?;
        // `input` must expand to the result (PyTorch's expand_size and its message).
        let target: Vec<i64> = out.iter().map(|&s| s as i64).collect();
        input.expand(target)?;
        Ok(out)
    }

    fn check_dtypes(&self, input: &Tensor, a: &Tensor, b: &Tensor) -> Result<()> {
        let op = self.op();
        let (di, da, db) = (input.dtype(), a.dtype(), b.dtype());
        let mismatch = |detail: String| Err(Error::DTypeMismatch { op, detail });
        match self.kind {
            AddProductKind::Addmm | AddProductKind::Addbmm => {
                if di != db {
                    return mismatch(format!(
                        "self and mat2 must have the same dtype, but got {} and {}",
                        name(di),
                        name(db)
                    ));
                }
                if da != db {
                    return mismatch(format!(
                        "mat1 and mat2 must have the same dtype, but got {} and {}",
                        name(da),
                        name(db)
                    ));
                }
            }
            AddProductKind::Addmv => {
                if di != da || da != db {
                    return mismatch(format!(
                        "addmv input tensors must have the same dtype, but got {}, {}, and {}",
                        name(di),
                        name(da),
                        name(db)
                    ));
                }
            }
            AddProductKind::Baddbmm => {
                if di != da {
                    return mismatch(format!(
                        "Input dtypes must be the same, got: input {}, batch1: {}, batch2: {}",
                        di.cpp_type_name(),
                        da.cpp_type_name(),
                        db.cpp_type_name()
                    ));
                }
                if db != da {
                    return mismatch(format!("expected scalar type {} but found {}", name(da), name(db)));
                }
            }
        }
        if da == DType::Bool {
            let kernel = match self.kind {
                AddProductKind::Addmm | AddProductKind::Addbmm => "addmm_impl_cpu_",
                AddProductKind::Addmv => "addmv_impl_cpu",
                AddProductKind::Baddbmm => "baddbmm",
            };
            return Err(Error::dtype(op, da, format!("\"{kernel}\" not implemented for 'Bool'")));
        }
        Ok(())
    }

    /// `t * s`, or `t` itself when `s` is 1 (PyTorch's `maybe_multiply`).
    fn scaled(t: Tensor, s: f64) -> Result<Tensor> {
        if s == 1.0 { Ok(t) } else { t.mul(s) }
    }

    /// The product, in other ops; f32 for f16 / bf16 operands (their
    /// accumulators, before any rounding).
    fn product(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let half = matches!(a.dtype(), DType::F16 | DType::BF16);
        let mm = |x: &Tensor, y: &Tensor| {
            if half {
                call1(&crate::ops::linalg::MatMulF32, &[x, y])
            } else {
                x.mm(y)
            }
        };
        match self.kind {
            AddProductKind::Addmm => mm(a, b),
            AddProductKind::Addmv if half => a.to_dtype(DType::F32)?.mv(&b.to_dtype(DType::F32)?),
            AddProductKind::Addmv => a.mv(b),
            AddProductKind::Addbmm => {
                let (nb, n, k) = (a.shape()[0] as i64, a.shape()[1] as i64, a.shape()[2] as i64);
                let m = b.shape()[2] as i64;
                mm(&a.permute([1, 0, 2])?.reshape([n, nb * k])?, &b.reshape([nb * k, m])?)
            }
            AddProductKind::Baddbmm if half => call1(&crate::ops::linalg::MatMulF32, &[a, b]),
            AddProductKind::Baddbmm => a.bmm(b),
        }
    }

    /// The forward, in other ops (runs below autograd). f16 and bf16 add
    /// in f32 and round once, as PyTorch's CPU kernels.
    /// Whether PyTorch's CPU kernel leaves out the product when `alpha` is
    /// 0: its BLAS path does (`addmm`, `addmv`, `addbmm`, and `baddbmm`
    /// from `k * m * n >= 400`); `baddbmm`'s small-product kernel
    /// multiplies the product by alpha, so NaN there stays NaN.
    fn product_ignored_at_zero_alpha(&self, a: &Tensor, b: &Tensor) -> bool {
        match self.kind {
            AddProductKind::Baddbmm => {
                let (m, k, n) = (a.shape()[1], a.shape()[2], b.shape()[2]);
                k.saturating_mul(m).saturating_mul(n) >= 400
            }
            _ => true,
        }
    }

    fn compute(&self, input: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let dt = a.dtype();
        let half = matches!(dt, DType::F16 | DType::BF16);
        if self.alpha == 0.0 && !half && self.product_ignored_at_zero_alpha(a, b) {
            // BLAS's rule: with alpha 0 the product is not computed, so NaN
            // and inf in the factors do not reach the result.
            let shape = self.check(input, a, b)?;
            let shape: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
            if self.beta == 0.0 {
                return TensorOptions::like(a).zeros(&shape[..]);
            }
            let out = input.expand(&shape)?.clone_contiguous()?;
            if self.beta != 1.0 {
                let beta = if dt.is_floating_point() {
                    Scalar::Float(self.beta)
                } else {
                    Scalar::Int(self.beta as i64)
                };
                out.mul_(beta)?;
            }
            return Ok(out);
        }
        let prod = self.product(a, b)?;
        let scalar = |s: f64| -> Scalar {
            if dt.is_floating_point() {
                Scalar::Float(s)
            } else {
                Scalar::Int(s as i64)
            }
        };
        let (alpha, beta) = (scalar(self.alpha), scalar(self.beta));
        let is = |s: Scalar, v: i64| match s {
            Scalar::Float(f) => f == v as f64,
            Scalar::Int(i) => i == v,
            _ => false,
        };
        if !is(alpha, 1) {
            prod.mul_(alpha)?;
        }
        if !is(beta, 0) {
            if half {
                prod.add_scaled_(&input.to_dtype(DType::F32)?, beta)?;
            } else {
                prod.add_scaled_(input, beta)?;
            }
        }
        if half { prod.to_dtype(dt) } else { Ok(prod) }
    }
}

impl Op for AddProduct {
    fn entry(&self) -> &'static OpEntry {
        match self.kind {
            AddProductKind::Addmm => &ADDMM,
            AddProductKind::Addmv => &ADDMV,
            AddProductKind::Addbmm => &ADDBMM,
            AddProductKind::Baddbmm => &BADDBMM,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let shape = self.check(inputs[0], inputs[1], inputs[2])?;
        Ok(smallvec::smallvec![OutSpec::new(shape, inputs[1].dtype())])
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b110)
    }

    fn saves_for(&self, needs: u64) -> Saves {
        // Each factor only when the other needs its gradient.
        Saves::inputs((needs >> 2 & 1) << 1 | (needs >> 1 & 1) << 2)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = grads.first().cloned().flatten() else {
            return Ok(vec![None, None, None]);
        };
        let alpha = self.alpha;
        let gi = if ctx.needs_grad(0) {
            Some(Self::scaled(g.clone(), self.beta)?)
        } else {
            None
        };
        let (need_a, need_b) = (ctx.needs_grad(1), ctx.needs_grad(2));
        let (ga, gb) = match self.kind {
            AddProductKind::Addmm => {
                let ga = if need_a {
                    let mat1_cm = ctx.meta(1).column_major;
                    Some(Self::scaled(
                        crate::ops::linalg::mm_mat1_grad(&g, mat1_cm, &ctx.input(2)?)?,
                        alpha,
                    )?)
                } else {
                    None
                };
                let gb = if need_b {
                    let mat2_cm = ctx.meta(2).column_major;
                    Some(Self::scaled(
                        crate::ops::linalg::mm_mat2_grad(&g, &ctx.input(1)?, mat2_cm)?,
                        alpha,
                    )?)
                } else {
                    None
                };
                (ga, gb)
            }
            AddProductKind::Addmv => {
                let ga = if need_a {
                    Some(Self::scaled(g.outer(&ctx.input(2)?)?, alpha)?)
                } else {
                    None
                };
                let gb = if need_b {
                    Some(Self::scaled(ctx.input(1)?.t()?.mv(&g)?, alpha)?)
                } else {
                    None
                };
                (ga, gb)
            }
            AddProductKind::Addbmm | AddProductKind::Baddbmm => {
                let (sa, sb) = (ctx.input_shape(1).to_vec(), ctx.input_shape(2).to_vec());
                let g3 = if self.kind == AddProductKind::Addbmm {
                    g.unsqueeze(0)?.expand([sa[0] as i64, sa[1] as i64, sb[2] as i64])?
                } else {
                    g
                };
                let ga = if need_a {
                    Some(Self::scaled(g3.bmm(&ctx.input(2)?.transpose(1, 2)?)?, alpha)?)
                } else {
                    None
                };
                let gb = if need_b {
                    Some(Self::scaled(ctx.input(1)?.transpose(1, 2)?.bmm(&g3)?, alpha)?)
                } else {
                    None
                };
                (ga, gb)
            }
        };
        Ok(vec![gi, ga, gb])
    }
}

/// The composite kernel (every backend): `infer`'s checks, then `compute`.
pub(crate) fn add_product_kernel(c: &Call) -> Result<Tensors> {
    let op: &AddProduct = downcast_op(c.op)?;
    op.infer(c.inputs)?;
    let (input, a, b) = (c.inputs[0], c.inputs[1], c.inputs[2]);
    Ok(smallvec::smallvec![op.compute(input, a, b)?])
}

/// Registers the kernels (one composite for every backend).
pub(crate) fn register() -> Result<()> {
    for e in [&ADDMM, &ADDMV, &ADDBMM, &BADDBMM] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(add_product_kernel))?;
    }
    Ok(())
}

fn run(kind: AddProductKind, input: &Tensor, a: &Tensor, b: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
    call1(&AddProduct { kind, beta, alpha }, &[input, a, b])
}

/// # `beta * input + alpha * product`
///
/// ```
/// use ferrotorch_core::Tensor;
/// let a = Tensor::ones((2, 3))?;
/// let b = Tensor::ones((3, 4))?;
/// let c = Tensor::zeros((2, 4))?;
/// assert_eq!(c.addmm(&a, &b, 1.0, 2.0)?.to_vec2::<f32>()?[0], [6.0; 4]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `torch.addmm(self, mat1, mat2, beta=beta, alpha=alpha)`:
    /// `beta * self + alpha * (mat1 @ mat2)`, `self` broadcast to `[n, m]`;
    /// with `beta` 0 `self` is not read. Integer tensors take `beta` and `alpha`
    /// truncated to integers.
    ///
    /// Errors (PyTorch's messages): operands that are not matrices, inner
    /// sizes that differ, `self` that does not expand to the result,
    /// dtypes that differ, bool tensors.
    pub fn addmm(&self, mat1: &Tensor, mat2: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        run(AddProductKind::Addmm, self, mat1, mat2, beta, alpha)
    }

    /// `torch.addmv(self, mat, vec, beta=beta, alpha=alpha)`:
    /// `beta * self + alpha * (mat @ vec)`, `self` of size `n` or 1 (or 0-d).
    ///
    /// Errors as [`Tensor::addmm`]'s, with PyTorch's `addmv` messages.
    pub fn addmv(&self, mat: &Tensor, vec: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        run(AddProductKind::Addmv, self, mat, vec, beta, alpha)
    }

    /// `torch.addbmm(self, batch1, batch2, beta=beta, alpha=alpha)`:
    /// `beta * self + alpha * sum_b(batch1[b] @ batch2[b])`, one GEMM over
    /// the batch folded into the inner dim.
    ///
    /// Errors as [`Tensor::addmm`]'s, for 3-D `batch1` and `batch2` of one
    /// batch size and matching inner sizes.
    pub fn addbmm(&self, batch1: &Tensor, batch2: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        run(AddProductKind::Addbmm, self, batch1, batch2, beta, alpha)
    }

    /// `torch.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)`:
    /// `beta * self + alpha * (batch1 @ batch2)`, `self` broadcast to
    /// `[b, n, m]`.
    ///
    /// Errors as [`Tensor::addbmm`]'s, with PyTorch's `baddbmm` messages.
    pub fn baddbmm(&self, batch1: &Tensor, batch2: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        run(AddProductKind::Baddbmm, self, batch1, batch2, beta, alpha)
    }
}
