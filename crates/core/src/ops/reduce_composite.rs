//! Reductions written in other operators but recorded as one graph node with
//! PyTorch's name and derivative formula (PyTorch's
//! CompositeExplicitAutograd ops): `mean`, `var` / `std`,
//! `linalg_vector_norm` and `logsumexp`. The forward runs below autograd in
//! the `AnyBackend` slot, so every backend with the pieces runs them; f16
//! and bf16 inputs are computed in f32 (and f32 variances and norms in f64)
//! and rounded once, as PyTorch's CPU kernels accumulate them (a half sum of
//! squares overflows long before the norm does). The backward formulas are PyTorch's, masks at singular
//! points included (the norm at zero, the std of a constant row).

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, downcast_op};
use crate::layout::Dims;
use crate::ops::grad_util::{dims_i64, expand_reduced, grad0, unsqueeze_reduced};
use crate::ops::reduce::reduced_shape;
use crate::{DType, Result, Tensor};

/// Dispatch table of `mean.dim` (optional dims), which also runs PyTorch's
/// full reduction `mean`.
pub static MEAN: OpEntry = OpEntry::differentiable("mean.dim");
/// Dispatch table of `var.correction` (optional dims, any correction), which
/// also runs PyTorch's `var` and `var.dim`.
pub static VAR: OpEntry = OpEntry::differentiable("var.correction");
/// Dispatch table of `std.correction`, which also runs PyTorch's `std` and `std.dim`.
pub static STD: OpEntry = OpEntry::differentiable("std.correction");
/// Dispatch table of `linalg_vector_norm` (`Tensor::norm`).
pub static VECTOR_NORM: OpEntry = OpEntry::differentiable("linalg_vector_norm");
/// Dispatch table of `logsumexp`.
pub static LOGSUMEXP: OpEntry = OpEntry::differentiable("logsumexp");

/// Which composite reduction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CompositeKind {
    /// Arithmetic mean.
    Mean,
    /// Variance with Bessel's `correction`.
    Var {
        /// Subtracted from the element count in the divisor.
        correction: f64,
    },
    /// Standard deviation with `correction`.
    Std {
        /// Subtracted from the element count in the divisor.
        correction: f64,
    },
    /// `p`-norm (2 Euclidean; inf / -inf max / min of |x|; 0 counts nonzeros).
    Norm {
        /// The order.
        p: f64,
    },
    /// `log(sum(exp(x)))`, computed stably.
    LogSumExp,
}

/// A composite reduction over `dims` (all dims when `None`) of a
/// floating-point input; the front ends (`Tensor::mean`, `var_dim`, ...)
/// validate the arguments.
#[derive(Debug, Clone)]
pub struct CompositeReduce {
    /// What to compute.
    pub kind: CompositeKind,
    /// Normalised dims to reduce, sorted; `None` for all.
    pub dims: Option<Dims>,
    /// Keep reduced dims as size 1.
    pub keepdim: bool,
    /// `mean(dtype=...)`: the output dtype, the input read as that dtype (as
    /// f32 for f16 and bf16, PyTorch's sum, divide, round once); `None`:
    /// the input's.
    pub dtype: Option<DType>,
}

impl CompositeReduce {
    fn dims_i64(&self, ndim: usize) -> Vec<i64> {
        dims_i64(self.dims.as_deref(), ndim)
    }

    /// The number of elements reduced into each output.
    fn count(&self, shape: &[usize]) -> usize {
        match &self.dims {
            None => shape.iter().product(),
            Some(ds) => ds.iter().map(|&d| shape.get(d).copied().unwrap_or(1)).product(),
        }
    }

    /// The result in the input's (float) dtype, computed in `x`'s dtype.
    fn compute(&self, x: &Tensor) -> Result<Tensor> {
        let dv = self.dims_i64(x.ndim());
        let keep = self.keepdim;
        let n = self.count(x.shape()) as f64;
        match self.kind {
            CompositeKind::Mean => x.sum_dim(dv, keep)?.div(n),
            CompositeKind::Var { correction } => variance(x, dv, n, correction, keep),
            CompositeKind::Std { correction } => variance(x, dv, n, correction, keep)?.sqrt(),
            CompositeKind::Norm { p } => {
                if p == f64::INFINITY {
                    x.abs()?.amax(dv, keep)
                } else if p == f64::NEG_INFINITY {
                    x.abs()?.amin(dv, keep)
                } else {
                    norm_root(&self.norm_sum(x, p)?, p)
                }
            }
            CompositeKind::LogSumExp => {
                if x.numel() == 0 {
                    // No maximum to subtract: log of an empty sum (-inf), as PyTorch.
                    return x.exp()?.sum_dim(dv, keep)?.log();
                }
                let m = x.amax(dv.clone(), true)?;
                let m = m.masked_fill(&m.abs()?.eq(f64::INFINITY)?, 0.0)?;
                let s = x.sub(&m)?.exp()?.sum_dim(dv.clone(), keep)?.log()?;
                let m = if keep { m } else { m.squeeze_dims(&dv)? };
                s.add(&m)
            }
        }
    }

    /// The sum a finite-`p` norm takes the root of: `Σ x²` for 2, `Σ |x|^p`,
    /// `Σ |x|` for 1, the count of nonzeros for 0.
    fn norm_sum(&self, x: &Tensor, p: f64) -> Result<Tensor> {
        let (dv, keep) = (self.dims_i64(x.ndim()), self.keepdim);
        if p == 2.0 {
            return x.mul(x)?.sum_dim(dv, keep);
        }
        let a = x.abs()?;
        if p == 1.0 {
            a.sum_dim(dv, keep)
        } else if p == 0.0 {
            a.ne(0.0)?.to_dtype(x.dtype())?.sum_dim(dv, keep)
        } else {
            a.pow(p)?.sum_dim(dv, keep)
        }
    }

    /// `g` with the reduced dims put back (size 1), to broadcast against the input.
    fn unsqueezed(&self, g: &Tensor, ndim: usize) -> Result<Tensor> {
        unsqueeze_reduced(g, ndim, self.dims.as_deref(), self.keepdim)
    }

    /// PyTorch's `var_backward`: `2 / (n - correction) * g * (x - mean)`; a
    /// full reduction (or any of a 0-d input) with no degrees of freedom
    /// gives NaN where x equals the mean and inf elsewhere.
    pub(crate) fn var_backward(&self, g: &Tensor, x: &Tensor, correction: f64) -> Result<Tensor> {
        let dof = self.count(x.shape()) as f64 - correction;
        if (self.dims.is_none() || x.ndim() == 0) && dof <= 0.0 {
            let at_mean = x.eq(&x.mean()?)?;
            let nan_or_inf = crate::ops::binary::where_(
                &at_mean,
                crate::ops::Operand::Scalar(f64::NAN.into()),
                crate::ops::Operand::Scalar(f64::INFINITY.into()),
            )?;
            return g.mul(&nan_or_inf.to_dtype(x.dtype())?);
        }
        let g = self.unsqueezed(g, x.ndim())?;
        let mean = x.mean_dim(self.dims_i64(x.ndim()), true)?;
        g.mul(2.0 / dof)?.mul(&x.sub(&mean)?)
    }

    /// PyTorch's `norm_backward`.
    fn norm_backward(&self, g: &Tensor, x: &Tensor, norm: &Tensor, p: f64) -> Result<Tensor> {
        let (g, norm) = (self.unsqueezed(g, x.ndim())?, self.unsqueezed(norm, x.ndim())?);
        if p == 1.0 {
            return x.sign()?.mul(&g);
        }
        let at_zero = norm.eq(0.0)?;
        if p == 2.0 {
            return g.mul(&x.div(&norm)?.masked_fill(&at_zero, 0.0)?);
        }
        if p.is_infinite() {
            // Shared evenly among the elements reaching the norm or NaN (a != a).
            let a = x.abs()?;
            let hit = a.eq(&norm)?.logical_or(&a.ne(&a)?)?.to_dtype(x.dtype())?;
            let ties = hit.sum_dim(self.dims_i64(x.ndim()), true)?;
            return x.sign()?.mul(&g.div(&ties)?.mul(&hit)?);
        }
        let a = x.abs()?;
        if p < 1.0 {
            let scaled = x.sign()?.mul(&a.pow(p - 1.0)?.masked_fill(&x.eq(0.0)?, 0.0)?)?;
            return scaled.mul(&g)?.mul(&norm.pow(1.0 - p)?);
        }
        let scaled = if p < 2.0 {
            x.sign()?.mul(&a.pow(p - 1.0)?)?
        } else {
            x.mul(&a.pow(p - 2.0)?)?
        };
        let scale = g.div(&norm.pow(p - 1.0)?)?.masked_fill(&at_zero, 0.0)?;
        scaled.mul(&scale)
    }
}

/// The sum of squared deviations from the mean over `dims`, divided by
/// `n - correction` (at least 0).
fn variance(x: &Tensor, dims: Vec<i64>, n: f64, correction: f64, keepdim: bool) -> Result<Tensor> {
    let mean = x.sum_dim(dims.clone(), true)?.div(n)?;
    let dev = x.sub(&mean)?;
    dev.mul(&dev)?.sum_dim(dims, keepdim)?.div((n - correction).max(0.0))
}

impl Op for CompositeReduce {
    fn entry(&self) -> &'static OpEntry {
        match self.kind {
            CompositeKind::Mean => &MEAN,
            CompositeKind::Var { .. } => &VAR,
            CompositeKind::Std { .. } => &STD,
            CompositeKind::Norm { .. } => &VECTOR_NORM,
            CompositeKind::LogSumExp => &LOGSUMEXP,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        Ok(smallvec::smallvec![OutSpec::new(
            reduced_shape(x.shape(), self.dims.as_deref(), self.keepdim),
            self.dtype.unwrap_or(x.dtype())
        )])
    }

    fn saves(&self) -> Saves {
        match self.kind {
            CompositeKind::Mean => Saves::NONE,
            CompositeKind::Var { .. } => Saves::INPUTS,
            CompositeKind::Std { .. } | CompositeKind::Norm { .. } | CompositeKind::LogSumExp => {
                Saves { inputs: 1, outputs: 1 }
            }
        }
    }

    fn backward_name(&self) -> String {
        match (self.kind, &self.dims) {
            (CompositeKind::Mean, Some(_)) => "MeanBackward1".into(),
            (CompositeKind::Mean, None) => "MeanBackward0".into(),
            (CompositeKind::Var { .. }, _) => "VarBackward0".into(),
            (CompositeKind::Std { .. }, _) => "StdBackward0".into(),
            (CompositeKind::Norm { .. }, _) => "LinalgVectorNormBackward0".into(),
            (CompositeKind::LogSumExp, _) => "LogsumexpBackward0".into(),
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let shape = ctx.input_shape(0).to_vec();
        let r = match self.kind {
            CompositeKind::Mean => {
                let n = self.count(&shape) as f64;
                expand_reduced(&g, &shape, self.dims.as_deref(), self.keepdim)?.div(n)?
            }
            CompositeKind::Var { correction } => self.var_backward(&g, &ctx.input(0)?, correction)?,
            CompositeKind::Std { correction } => {
                // PyTorch's std_backward: var_backward of g / (2 std), 0 where std is 0.
                let y = ctx.output(0)?;
                let gv = g.div(&y.mul(2.0)?)?.masked_fill(&y.eq(0.0)?, 0.0)?;
                self.var_backward(&gv, &ctx.input(0)?, correction)?
            }
            // PyTorch's norm_backward returns no gradient for p = 0 (the
            // count of nonzeros): the input's .grad stays None.
            CompositeKind::Norm { p: 0.0 } => return Ok(vec![None]),
            CompositeKind::Norm { p } => self.norm_backward(&g, &ctx.input(0)?, &ctx.output(0)?, p)?,
            CompositeKind::LogSumExp => {
                let (x, y) = (ctx.input(0)?, ctx.output(0)?);
                let (g, y) = (self.unsqueezed(&g, x.ndim())?, self.unsqueezed(&y, x.ndim())?);
                g.mul(&x.sub(&y)?.exp()?)?
            }
        };
        Ok(vec![Some(r)])
    }
}

/// The forward of every composite reduction, in PyTorch's CPU accumulation
/// type, rounded once at the end: f32 for half-precision inputs, f64 for
/// every variance and for f32 norms (PyTorch's `acc_type<float>` on the CPU,
/// whose squares of 1e20 do not overflow).
fn composite_kernel(call: &Call) -> Result<Tensors> {
    let op: &CompositeReduce = downcast_op(call.op)?;
    let x = call.inputs[0];
    if let CompositeKind::Norm { p } = op.kind
        && p != 0.0
        && op.count(x.shape()) == 1
    {
        // As PyTorch: a norm of one element is its absolute value, whatever
        // the order (no power of it to overflow or underflow).
        let a = x.abs()?.sum_dim(op.dims_i64(x.ndim()), op.keepdim)?;
        return Ok(smallvec::smallvec![a.to_dtype(op.dtype.unwrap_or(x.dtype()))?]);
    }
    if let Some(dt) = op.dtype {
        let acc = if matches!(dt, DType::F16 | DType::BF16) {
            DType::F32
        } else {
            dt
        };
        let r = op.compute(&x.to_dtype(acc)?)?.to_dtype(dt)?;
        return Ok(smallvec::smallvec![r]);
    }
    if let (DType::F32, CompositeKind::Norm { p }) = (x.dtype(), op.kind)
        && p.is_finite()
    {
        // PyTorch accumulates an f32 norm in f32 and takes the root in f32:
        // the sum, exact in f64 here, is rounded to f32 first, so a norm
        // whose sum of powers overflows (or underflows) f32 does so as in
        // PyTorch, and the root rounds once, as PyTorch's.
        let sum = op.norm_sum(&x.to_dtype(DType::F64)?, p)?.to_dtype(DType::F32)?;
        return Ok(smallvec::smallvec![norm_root(&sum, p)?]);
    }
    let wide = match (x.dtype(), op.kind) {
        // PyTorch's CPU variance is a Welford reduction in f64 for every
        // floating dtype, half-precision ones included.
        (DType::F16 | DType::BF16 | DType::F32, CompositeKind::Var { .. } | CompositeKind::Std { .. }) => {
            Some(DType::F64)
        }
        (DType::F16 | DType::BF16, _) => Some(DType::F32),
        (DType::F32, CompositeKind::Norm { .. }) => Some(DType::F64),
        _ => None,
    };
    let r = match wide {
        Some(dt) => op.compute(&x.to_dtype(dt)?)?.to_dtype(x.dtype())?,
        None => op.compute(x)?,
    };
    Ok(smallvec::smallvec![r])
}

pub(crate) fn register() -> Result<()> {
    for e in [&MEAN, &VAR, &STD, &VECTOR_NORM, &LOGSUMEXP] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(composite_kernel))?;
    }
    Ok(())
}

/// The root of a norm's sum of powers: `sqrt` for 2, the `1/p`-th power
/// for other `p` but 1 and 0.
fn norm_root(sum: &Tensor, p: f64) -> Result<Tensor> {
    if p == 2.0 {
        sum.sqrt()
    } else if p == 1.0 || p == 0.0 {
        Ok(sum.clone())
    } else {
        sum.pow(1.0 / p)
    }
}
