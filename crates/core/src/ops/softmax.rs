//! `softmax` and `log_softmax` along one dim.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call1};
use crate::layout::normalize_dim;
use crate::ops::grad_util::grad0;
use crate::{Error, Result, Tensor};

/// Dispatch table of `_softmax`, the operator with the kernel and the
/// derivative (`SoftmaxBackward0`) that PyTorch's `softmax.int` calls.
pub static SOFTMAX: OpEntry = OpEntry::differentiable("_softmax");
/// Dispatch table of `_log_softmax`, what PyTorch's `log_softmax.int` calls.
pub static LOG_SOFTMAX: OpEntry = OpEntry::differentiable("_log_softmax");

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
        let d = self.dim as i64;
        let r = if self.log {
            g.sub(&y.exp()?.mul(&g.sum_dim(d, true)?)?)?
        } else {
            let gy = g.mul(&y)?;
            gy.sub(&y.mul(&gy.sum_dim(d, true)?)?)?
        };
        Ok(vec![Some(r)])
    }
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
}
