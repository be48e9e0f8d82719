//! `softmax` and `log_softmax` along one dim.

use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call1};
use crate::layout::normalize_dim;
use crate::{Error, Result, Tensor};

/// Dispatch table of `softmax`.
pub static SOFTMAX: OpEntry = OpEntry::new("softmax");
/// Dispatch table of `log_softmax`.
pub static LOG_SOFTMAX: OpEntry = OpEntry::new("log_softmax");

/// Softmax (or its logarithm) along `dim`, computed stably (the row's maximum
/// is subtracted first).
#[derive(Debug, Clone, Copy)]
pub struct Softmax {
    /// The normalised dim (0 for a 0-d input).
    pub dim: usize,
    /// Return `log_softmax`.
    pub log: bool,
}

impl Op for Softmax {
    fn entry(&self) -> &'static OpEntry {
        if self.log { &LOG_SOFTMAX } else { &SOFTMAX }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        if !x.dtype().is_floating_point() {
            return Err(Error::dtype(
                self.entry().name(),
                x.dtype(),
                "expects a floating-point input",
            ));
        }
        Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())])
    }
}

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
