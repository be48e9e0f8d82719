//! `softmax` and `log_softmax` along one dim.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call1, downcast_op};
use crate::layout::normalize_dim;
use crate::ops::grad_util::grad0;
use crate::{DType, Error, Result, Tensor};

/// Dispatch table of `_softmax`, the operator with the kernel and the
/// derivative (`SoftmaxBackward0`) that PyTorch's `softmax.int` calls.
pub static SOFTMAX: OpEntry = OpEntry::differentiable("_softmax");
/// Dispatch table of `_log_softmax`, what PyTorch's `log_softmax.int` calls.
pub static LOG_SOFTMAX: OpEntry = OpEntry::differentiable("_log_softmax");

/// Dispatch table of `_softmax_backward_data`: `y * (g - sum(g * y))`.
pub static SOFTMAX_BACKWARD_DATA: OpEntry = OpEntry::differentiable("_softmax_backward_data");
/// Dispatch table of `_log_softmax_backward_data`: `g - exp(y) * sum(g)`.
pub static LOG_SOFTMAX_BACKWARD_DATA: OpEntry = OpEntry::differentiable("_log_softmax_backward_data");

/// Softmax (or its logarithm) along `dim`, computed stably (the row's maximum
/// is subtracted first).
#[derive(Debug, Clone, Copy)]
pub struct Softmax {
    /// The normalised dim (0 for a 0-d input).
    pub dim: usize,
    /// Return `log_softmax`.
    pub log: bool,
}

impl Softmax {
    /// The operator's name in error messages: the function called
    /// (`softmax`, `log_softmax`), not the entry's `_softmax`.
    pub(crate) fn error_name(&self) -> &'static str {
        if self.log { "log_softmax" } else { "softmax" }
    }
}

impl Op for Softmax {
    fn entry(&self) -> &'static OpEntry {
        if self.log { &LOG_SOFTMAX } else { &SOFTMAX }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        // As PyTorch: an empty tensor of any dtype gives an empty result of
        // its dtype (its kernel never runs).
        if !x.dtype().is_floating_point() && x.numel() != 0 {
            return Err(Error::dtype(
                self.error_name(),
                x.dtype(),
                "expects a floating-point input",
            ));
        }
        Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())])
    }

    fn saves(&self) -> Saves {
        Saves::OUTPUT
    }

    fn backward_name(&self) -> String {
        if self.log {
            "LogSoftmaxBackward0".into()
        } else {
            "SoftmaxBackward0".into()
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let y = ctx.output(0)?;
        let op = SoftmaxBackward {
            dim: self.dim,
            log: self.log,
        };
        Ok(vec![Some(call1(&op, &[&g, &y])?)])
    }
}

/// The derivative of [`Softmax`] as one operator (PyTorch's
/// `_softmax_backward_data` / `_log_softmax_backward_data`): inputs
/// `[grad, output]` of one shape and float dtype; `y * (g - sum(g * y))`
/// for softmax, `g - exp(y) * sum(g)` for log_softmax, the sums along
/// `dim`. Differentiable (its own derivatives written in operators).
#[derive(Debug, Clone, Copy)]
pub struct SoftmaxBackward {
    /// The normalised dim (0 for a 0-d input).
    pub dim: usize,
    /// The derivative of `log_softmax`.
    pub log: bool,
}

impl Op for SoftmaxBackward {
    fn entry(&self) -> &'static OpEntry {
        if self.log {
            &LOG_SOFTMAX_BACKWARD_DATA
        } else {
            &SOFTMAX_BACKWARD_DATA
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        crate::ops::activation_backward::grad_pair_spec(self.entry().base_name(), inputs[0], inputs[1], "output")
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let gg = grad0(grads)?;
        let (g, y) = (ctx.input(0)?, ctx.input(1)?);
        let d = self.dim as i64;
        let (d_g, d_y) = if self.log {
            let e = y.exp()?;
            let d_g = ctx
                .needs_grad(0)
                .then(|| gg.sub(&gg.mul(&e)?.sum_dim(d, true)?))
                .transpose()?;
            let d_y = ctx
                .needs_grad(1)
                .then(|| g.sum_dim(d, true)?.neg()?.mul(&e)?.mul(&gg))
                .transpose()?;
            (d_g, d_y)
        } else {
            let d_g = ctx.needs_grad(0).then(|| call1(self, &[&gg, &y])).transpose()?;
            let d_y = ctx
                .needs_grad(1)
                .then(|| -> Result<Tensor> {
                    let s = g.mul(&y)?.sum_dim(d, true)?;
                    let t = gg.mul(&y)?.sum_dim(d, true)?;
                    gg.mul(&g.sub(&s)?)?.sub(&g.mul(&t)?)
                })
                .transpose()?;
            (d_g, d_y)
        };
        Ok(vec![d_g, d_y])
    }
}

/// The composite form of [`SoftmaxBackward`] (backends without a kernel).
fn backward_composite_kernel(call: &Call) -> Result<Tensors> {
    let op: &SoftmaxBackward = downcast_op(call.op)?;
    op.infer(call.inputs)?;
    let (g, y) = (call.inputs[0], call.inputs[1]);
    let d = op.dim as i64;
    let r = if op.log {
        g.sub(&y.exp()?.mul(&g.sum_dim(d, true)?)?)?
    } else {
        y.mul(&g.sub(&g.mul(y)?.sum_dim(d, true)?)?)?
    };
    Ok(smallvec::smallvec![r])
}

/// Registers the composite backward for backends without a kernel.
pub(crate) fn register() -> Result<()> {
    for e in [&SOFTMAX_BACKWARD_DATA, &LOG_SOFTMAX_BACKWARD_DATA] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(backward_composite_kernel))?;
    }
    Ok(())
}

/// # Softmax
///
/// `softmax` and `log_softmax` along a dim.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([1.0f32, 2.0, 3.0])?;
/// let p = x.softmax(0)?;
/// assert!((p.sum()?.item::<f32>()? - 1.0).abs() < 1e-6);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `exp(x) / sum(exp(x))` along `dim`.
    pub fn softmax(&self, dim: i64) -> Result<Tensor> {
        let d = normalize_dim("softmax", dim, self.ndim())?;
        call1(&Softmax { dim: d, log: false }, &[self])
    }

    /// `x - log(sum(exp(x)))` along `dim`.
    pub fn log_softmax(&self, dim: i64) -> Result<Tensor> {
        let d = normalize_dim("log_softmax", dim, self.ndim())?;
        call1(&Softmax { dim: d, log: true }, &[self])
    }

    /// `torch.softmax(x, dim, dtype=dtype)`: the input cast to `dtype`
    /// first (nodes `ToCopyBackward0`, then `SoftmaxBackward0`); errors as
    /// softmax for an integer `dtype`.
    pub fn softmax_dtype(&self, dim: i64, dtype: DType) -> Result<Tensor> {
        self.to_dtype(dtype)?.softmax(dim)
    }

    /// `torch.log_softmax(x, dim, dtype=dtype)`, as [`Tensor::softmax_dtype`].
    pub fn log_softmax_dtype(&self, dim: i64, dtype: DType) -> Result<Tensor> {
        self.to_dtype(dtype)?.log_softmax(dim)
    }
}
