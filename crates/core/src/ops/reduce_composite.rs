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
/// Dispatch table of `var_mean.correction`.
pub static VAR_MEAN: OpEntry = OpEntry::differentiable("var_mean.correction");
/// Dispatch table of `std_mean.correction`.
pub static STD_MEAN: OpEntry = OpEntry::differentiable("std_mean.correction");
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
    /// `(var, mean)` (`std` false) or `(std, mean)` (`std` true): two
    /// outputs, one node (`VarMeanBackward0` / `StdMeanBackward0`).
    SpreadMean {
        /// Subtracted from the element count in the divisor.
        correction: f64,
        /// The first output is the standard deviation, not the variance.
        std: bool,
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
            CompositeKind::Std { correction } | CompositeKind::SpreadMean { correction, std: true } => {
                variance(x, dv, n, correction, keep)?.sqrt()
            }
            CompositeKind::SpreadMean { correction, std: false } => variance(x, dv, n, correction, keep),
            CompositeKind::Norm { p } => {
                let a = x.abs()?;
                if p == 2.0 {
                    x.mul(x)?.sum_dim(dv, keep)?.sqrt()
                } else if p == 1.0 {
                    a.sum_dim(dv, keep)
                } else if p == f64::INFINITY {
                    a.amax(dv, keep)
                } else if p == f64::NEG_INFINITY {
                    a.amin(dv, keep)
                } else if p == 0.0 {
                    a.ne(0.0)?.to_dtype(x.dtype())?.sum_dim(dv, keep)
                } else {
                    a.pow(p)?.sum_dim(dv, keep)?.pow(1.0 / p)
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

    /// `g` with the reduced dims put back (size 1), to broadcast against the input.
    fn unsqueezed(&self, g: &Tensor, ndim: usize) -> Result<Tensor> {
        unsqueeze_reduced(g, ndim, self.dims.as_deref(), self.keepdim)
    }

    /// PyTorch's `var_backward`: `2 / (n - correction) * g * (x - mean)`; a
    /// full reduction with no degrees of freedom gives NaN where x equals the
    /// mean and inf elsewhere.
    fn var_backward(&self, g: &Tensor, x: &Tensor, correction: f64) -> Result<Tensor> {
        let dof = self.count(x.shape()) as f64 - correction;
        if self.dims.is_none() && dof <= 0.0 {
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

    /// PyTorch's `std_backward`: `var_backward` of `g / (2 std)`, 0 where std is 0.
    fn std_backward(&self, g: &Tensor, x: &Tensor, std: &Tensor, correction: f64) -> Result<Tensor> {
        let gv = g.div(&std.mul(2.0)?)?.masked_fill(&std.eq(0.0)?, 0.0)?;
        self.var_backward(&gv, x, correction)
    }

    /// PyTorch's var_mean / std_mean backward: the spread's gradient plus
    /// the mean's, each where its output has one.
    fn spread_mean_backward(
        &self,
        ctx: &BackwardCtx,
        grads: &[Option<Tensor>],
        correction: f64,
        std: bool,
    ) -> Result<Vec<Option<Tensor>>> {
        let mut total = match &grads[0] {
            Some(g) if std => Some(self.std_backward(g, &ctx.input(0)?, &ctx.output(0)?, correction)?),
            Some(g) => Some(self.var_backward(g, &ctx.input(0)?, correction)?),
            None => None,
        };
        if let Some(g) = grads.get(1).and_then(Option::as_ref) {
            let gm = self.mean_backward(g, ctx.input_shape(0))?;
            total = Some(match total {
                Some(t) => t.add(&gm)?,
                None => gm,
            });
        }
        Ok(vec![total])
    }

    /// The mean's gradient: `g` spread evenly over the reduced elements.
    fn mean_backward(&self, g: &Tensor, shape: &[usize]) -> Result<Tensor> {
        let n = self.count(shape) as f64;
        expand_reduced(g, shape, self.dims.as_deref(), self.keepdim)?.div(n)
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
            CompositeKind::SpreadMean { std: false, .. } => &VAR_MEAN,
            CompositeKind::SpreadMean { std: true, .. } => &STD_MEAN,
            CompositeKind::Norm { .. } => &VECTOR_NORM,
            CompositeKind::LogSumExp => &LOGSUMEXP,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let spec = OutSpec::new(reduced_shape(x.shape(), self.dims.as_deref(), self.keepdim), x.dtype());
        Ok(match self.kind {
            CompositeKind::SpreadMean { .. } => smallvec::smallvec![spec.clone(), spec],
            _ => smallvec::smallvec![spec],
        })
    }

    fn saves(&self) -> Saves {
        match self.kind {
            CompositeKind::Mean => Saves::NONE,
            CompositeKind::Var { .. } | CompositeKind::SpreadMean { std: false, .. } => Saves::INPUTS,
            CompositeKind::Std { .. }
            | CompositeKind::SpreadMean { std: true, .. }
            | CompositeKind::Norm { .. }
            | CompositeKind::LogSumExp => Saves { inputs: 1, outputs: 1 },
        }
    }

    fn backward_name(&self) -> String {
        match (self.kind, &self.dims) {
            (CompositeKind::Mean, Some(_)) => "MeanBackward1".into(),
            (CompositeKind::Mean, None) => "MeanBackward0".into(),
            (CompositeKind::Var { .. }, _) => "VarBackward0".into(),
            (CompositeKind::Std { .. }, _) => "StdBackward0".into(),
            (CompositeKind::SpreadMean { std: false, .. }, _) => "VarMeanBackward0".into(),
            (CompositeKind::SpreadMean { std: true, .. }, _) => "StdMeanBackward0".into(),
            (CompositeKind::Norm { .. }, _) => "LinalgVectorNormBackward0".into(),
            (CompositeKind::LogSumExp, _) => "LogsumexpBackward0".into(),
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let shape = ctx.input_shape(0).to_vec();
        if let CompositeKind::SpreadMean { correction, std } = self.kind {
            return self.spread_mean_backward(ctx, grads, correction, std);
        }
        let g = grad0(grads)?;
        let r = match self.kind {
            CompositeKind::Mean => self.mean_backward(&g, &shape)?,
            CompositeKind::Var { correction } | CompositeKind::SpreadMean { correction, std: false } => {
                self.var_backward(&g, &ctx.input(0)?, correction)?
            }
            CompositeKind::Std { correction } | CompositeKind::SpreadMean { correction, std: true } => {
                self.std_backward(&g, &ctx.input(0)?, &ctx.output(0)?, correction)?
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
/// type, rounded once at the end: f32 for half-precision inputs, and f64
/// for f32 variances and norms (PyTorch's `acc_type<float>` on the CPU,
/// whose squares of 1e20 do not overflow).
fn composite_kernel(call: &Call) -> Result<Tensors> {
    let op: &CompositeReduce = downcast_op(call.op)?;
    let x = call.inputs[0];
    let wide = match (x.dtype(), op.kind) {
        (DType::F16 | DType::BF16, _) => Some(DType::F32),
        (
            DType::F32,
            CompositeKind::Var { .. }
            | CompositeKind::Std { .. }
            | CompositeKind::SpreadMean { .. }
            | CompositeKind::Norm { .. },
        ) => Some(DType::F64),
        _ => None,
    };
    let r = match wide {
        Some(dt) => op.compute(&x.to_dtype(dt)?)?.to_dtype(x.dtype())?,
        None => op.compute(x)?,
    };
    if let CompositeKind::SpreadMean { .. } = op.kind {
        // The mean exactly as `mean` computes it.
        let mean = CompositeReduce {
            kind: CompositeKind::Mean,
            ..op.clone()
        };
        let m = match x.dtype() {
            DType::F16 | DType::BF16 => mean.compute(&x.to_dtype(DType::F32)?)?.to_dtype(x.dtype())?,
            _ => mean.compute(x)?,
        };
        return Ok(smallvec::smallvec![r, m]);
    }
    Ok(smallvec::smallvec![r])
}

pub(crate) fn register() -> Result<()> {
    for e in [&MEAN, &VAR, &STD, &VAR_MEAN, &STD_MEAN, &VECTOR_NORM, &LOGSUMEXP] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(composite_kernel))?;
    }
    Ok(())
}
