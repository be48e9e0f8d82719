//! Scans beside cumsum / cumprod: `cummax` / `cummin` (values and indices),
//! `logcumsumexp`, the `dtype` forms of `cumsum` / `cumprod`, and `diff`.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call1, call2};
use crate::layout::normalize_dim;
use crate::ops::binary::where_;
use crate::ops::grad_util::{SAVES_INDICES, grad0, picked_values_backward, values_and_indices};
use crate::ops::promote::Operand;
use crate::{DType, Error, Result, Scalar, Tensor};

/// Dispatch table of `cummax`.
pub static CUMMAX: OpEntry = OpEntry::differentiable("cummax");
/// Dispatch table of `cummin`.
pub static CUMMIN: OpEntry = OpEntry::differentiable("cummin");
/// Dispatch table of `logcumsumexp`.
pub static LOGCUMSUMEXP: OpEntry = OpEntry::differentiable("logcumsumexp");

/// The running maximum (or minimum) along `dim` and where it was reached
/// (the last index among equal values; a NaN sticks, with its index).
#[derive(Debug, Clone, Copy)]
pub struct CumExtreme {
    /// `cummax` (true) or `cummin`.
    pub max: bool,
    /// The normalised dim (0 for a 0-d input).
    pub dim: usize,
}

impl Op for CumExtreme {
    fn entry(&self) -> &'static OpEntry {
        if self.max { &CUMMAX } else { &CUMMIN }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        Ok(values_and_indices(x.dims(), x.dtype()))
    }

    fn saves(&self) -> Saves {
        SAVES_INDICES
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // PyTorch's cummaxmin_backward: each gradient goes to the element
        // that was the running extreme (summed: several outputs pick one).
        picked_values_backward(ctx, grads, self.dim, true, true)
    }
}

/// `log(cumsum(exp(x)))` along `dim`, computed stably in the accumulation
/// dtype (f64 for f32 and f64, f32 for f16 and bf16), as PyTorch's kernel.
#[derive(Debug, Clone, Copy)]
pub struct LogCumSumExp {
    /// The normalised dim (0 for a 0-d input).
    pub dim: usize,
}

impl Op for LogCumSumExp {
    fn entry(&self) -> &'static OpEntry {
        &LOGCUMSUMEXP
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        if !x.is_floating_point() {
            return Err(Error::dtype(
                "logcumsumexp",
                x.dtype(),
                format!(
                    "\"logcumsumexp_out_cpu\" not implemented for '{}'",
                    x.dtype().scalar_type_name()
                ),
            ));
        }
        Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())])
    }

    fn saves(&self) -> Saves {
        Saves { inputs: 1, outputs: 1 }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // PyTorch's logcumsumexp_backward: the positive and the negative
        // parts of the gradient through reversed logcumsumexps.
        let g = grad0(grads)?;
        let (x, y) = (ctx.input(0)?, ctx.output(0)?);
        if x.ndim() == 0 {
            return Ok(vec![Some(g)]);
        }
        let d = self.dim as i64;
        let lowest = Tensor::scalar_tensor(Scalar::Float(lowest_of(g.dtype())), g.dtype());
        let reverse = |t: &Tensor| -> Result<Tensor> { t.flip(d)?.logcumsumexp(d)?.flip(d) };
        let log_abs = g.abs()?.log()?;
        let pos = where_(&g.gt(0)?, Operand::Tensor(&log_abs), Operand::Tensor(&lowest))?;
        let neg = where_(&g.lt(0)?, Operand::Tensor(&log_abs), Operand::Tensor(&lowest))?;
        let out_pos = reverse(&pos.sub(&y)?)?.add(&x)?.exp()?;
        let out_neg = reverse(&neg.sub(&y)?)?.add(&x)?.exp()?;
        Ok(vec![Some(out_pos.sub(&out_neg)?)])
    }
}

/// The lowest finite value of a float dtype.
fn lowest_of(dtype: DType) -> f64 {
    -crate::ops::float_class::float_max(dtype).unwrap_or(f64::MAX)
}

/// # More scans
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([1.0f32, 3.0, 2.0, 3.0])?;
/// let (v, i) = x.cummax(0)?;
/// assert_eq!((v.to_vec::<f32>()?, i.to_vec::<i64>()?), (vec![1.0, 3.0, 3.0, 3.0], vec![0, 1, 1, 3]));
/// assert_eq!(x.diff(1, 0, None, None)?.to_vec::<f32>()?, [2.0, -1.0, 1.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    fn cum_extreme(&self, max: bool, dim: i64) -> Result<(Tensor, Tensor)> {
        let name = if max { "cummax" } else { "cummin" };
        if self.ndim() == 0 && dim != 0 && dim != -1 {
            return Err(Error::invalid(
                name,
                format!("{name}(): Expected reduction dim -1 or 0 for scalar but got {dim}"),
            ));
        }
        let d = normalize_dim(name, dim, self.ndim())?;
        call2(&CumExtreme { max, dim: d }, &[self])
    }

    /// The running maximum along `dim` and the index where it was reached
    /// (`torch.cummax`).
    pub fn cummax(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        self.cum_extreme(true, dim)
    }

    /// The running minimum along `dim` and its index (`torch.cummin`).
    pub fn cummin(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        self.cum_extreme(false, dim)
    }

    /// `log(cumsum(exp(self)))` along `dim` without overflow (float tensors).
    pub fn logcumsumexp(&self, dim: i64) -> Result<Tensor> {
        let d = normalize_dim("logcumsumexp", dim, self.ndim())?;
        call1(&LogCumSumExp { dim: d }, &[self])
    }

    /// The running sum along `dim` computed in `dtype` (`x.cumsum(dim, dtype=...)`).
    pub fn cumsum_dtype(&self, dim: i64, dtype: DType) -> Result<Tensor> {
        self.scan_dtype(false, dim, Some(dtype))
    }

    /// The running product along `dim` computed in `dtype`.
    pub fn cumprod_dtype(&self, dim: i64, dtype: DType) -> Result<Tensor> {
        self.scan_dtype(true, dim, Some(dtype))
    }

    /// `torch.diff(self, n, dim, prepend, append)`: the `n`-th forward
    /// difference along `dim` (`x[1:] - x[:-1]`, `!=` for bool tensors),
    /// after joining `prepend` and `append` to `self` along `dim`. Errors for
    /// a 0-d input or a negative `n`.
    pub fn diff(&self, n: i64, dim: i64, prepend: Option<&Tensor>, append: Option<&Tensor>) -> Result<Tensor> {
        if self.ndim() == 0 {
            return Err(Error::invalid(
                "diff",
                "diff expects input to be at least one-dimensional",
            ));
        }
        if n < 0 {
            return Err(Error::invalid(
                "diff",
                format!("order must be non-negative but got {n}"),
            ));
        }
        // PyTorch checks prepend / append (same rank, same sizes outside
        // `dim`) before anything else, then ignores them for n = 0.
        for other in prepend.iter().chain(append.iter()) {
            let d = normalize_dim("diff", dim, self.ndim())?;
            if other.ndim() != self.ndim() {
                return Err(Error::invalid(
                    "diff",
                    "diff expects prepend or append to be the same dimension as input",
                ));
            }
            if let Some(i) = (0..self.ndim()).find(|&i| i != d && other.shape()[i] != self.shape()[i]) {
                return Err(Error::invalid(
                    "diff",
                    format!(
                        "diff expects the shape of tensor to prepend or append to match that of input except \
                         along the differencing dimension; input.size({i}) = {}, but got tensor.size({i}) = {}",
                        self.shape()[i],
                        other.shape()[i]
                    ),
                ));
            }
        }
        if n == 0 {
            // PyTorch returns a copy (node CopyBackwards) without looking at `dim`.
            let out = crate::TensorOptions::like(self).empty(self.shape())?;
            return out.copy_(self);
        }
        let d = normalize_dim("diff", dim, self.ndim())? as i64;
        let mut x = self.clone();
        if prepend.is_some() || append.is_some() {
            let mut parts: Vec<&Tensor> = Vec::with_capacity(3);
            parts.extend(prepend);
            parts.push(self);
            parts.extend(append);
            x = Tensor::cat(&parts, d)?;
        }
        for _ in 0..n {
            let len = x.shape()[d as usize] as i64;
            if len == 0 {
                break;
            }
            let (hi, lo) = (x.narrow(d, 1, len - 1)?, x.narrow(d, 0, len - 1)?);
            x = if x.dtype() == DType::Bool {
                hi.logical_xor(&lo)?
            } else {
                hi.sub(&lo)?
            };
        }
        Ok(x)
    }
}
