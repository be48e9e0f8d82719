//! Three-operand pointwise ops: `clamp` with tensor bounds
//! ([`ClampTensor`]) and `lerp` ([`Lerp`]), plus the `clamp` front ends
//! that pick the scalar operator ([`crate::ops::Clamp`]) or the tensor one.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpecs, call_out, call1};
use crate::layout::broadcast_shapes;
use crate::ops::binary::broadcast_spec;
use crate::ops::grad_util::{full_or_half, grad0, sum_to};
use crate::ops::promote::{IntoOperand, Operand, result_type, wrapped_scalar};
use crate::ops::unary::clamp_args;
use crate::{DType, Error, Result, Scalar, Tensor};

/// Dispatch table of `clamp.Tensor` (also `clamp_min.Tensor` and
/// `clamp_max.Tensor`).
pub static CLAMP_TENSOR: OpEntry = OpEntry::differentiable("clamp.Tensor");

/// `clamp(x, min, max)` with tensor bounds (broadcast): inputs `[x, min]`,
/// `[x, max]` or `[x, min, max]` as the flags say. A NaN in `x` or in a
/// bound gives NaN; where `min > max` the result is `max`.
#[derive(Debug, Clone, Copy)]
pub struct ClampTensor {
    /// Whether a lower bound is given.
    pub has_min: bool,
    /// Whether an upper bound is given.
    pub has_max: bool,
    /// Called as `clamp_min` / `clamp_max` (nodes `ClampMinBackward1` /
    /// `ClampMaxBackward1`) rather than `clamp` (`ClampBackward0`).
    pub one_sided: bool,
}

impl ClampTensor {
    /// The dtype the op computes in and returns: the inputs' result type.
    pub fn dtype(inputs: &[&Tensor]) -> DType {
        let ops: Vec<Operand> = inputs.iter().map(|t| Operand::Tensor(t)).collect();
        result_type(&ops)
    }
}

impl Op for ClampTensor {
    fn entry(&self) -> &'static OpEntry {
        &CLAMP_TENSOR
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        if !self.has_min && !self.has_max {
            return Err(Error::invalid(
                "clamp",
                "At least one of 'min' or 'max' must not be None",
            ));
        }
        let dt = Self::dtype(inputs);
        if dt == DType::Bool && self.has_min && self.has_max {
            return Err(Error::dtype("clamp", dt, "\"clamp_cpu\" not implemented for 'Bool'"));
        }
        let mut shape = inputs[0].dims();
        for t in &inputs[1..] {
            shape = broadcast_shapes("clamp", &shape, t.shape())?;
        }
        Ok(smallvec::smallvec![broadcast_spec(&shape, inputs, dt)])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn backward_name(&self) -> String {
        match (self.one_sided, self.has_min, self.has_max) {
            (true, true, false) => "ClampMinBackward1",
            (true, false, true) => "ClampMaxBackward1",
            _ => "ClampBackward0",
        }
        .into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // PyTorch's formulas, selecting (never multiplying) the gradient:
        // with one bound, maximum's / minimum's (a tie splits it in halves;
        // where a NaN is involved both sides get all of it); with two, `x`
        // gets it unless it lies beyond a bound (halves at a bound of an
        // interval `min < max`), a bound gets it where `x` lies beyond it
        // (halves at a tie) if `min <= max`, and `max` gets all of it where
        // `max < min`.
        let g = grad0(grads)?;
        let x = ctx.input(0)?;
        let min = self.has_min.then(|| ctx.input(1)).transpose()?;
        let max = self
            .has_max
            .then(|| ctx.input(if self.has_min { 2 } else { 1 }))
            .transpose()?;
        let not = |t: Tensor| t.logical_not();
        let (gx, gmin, gmax) = match (&min, &max) {
            (Some(lo), Some(hi)) => {
                let lo_lt_hi = lo.lt(hi)?;
                let lo_le_hi = lo.le(hi)?;
                let (below, above) = (x.lt(lo)?, x.gt(hi)?);
                let half_lo = x.eq(lo)?.logical_and(&lo_lt_hi)?;
                let half_hi = x.eq(hi)?.logical_and(&lo_lt_hi)?;
                let half_x = half_lo.logical_or(&half_hi)?;
                let full_x = not(below.logical_or(&above)?.logical_or(&half_x)?)?;
                let gx = full_or_half(&g, &full_x, &half_x)?;
                let gmin = full_or_half(&g, &lo_le_hi.logical_and(&below)?, &half_lo)?;
                let full_max = hi.lt(lo)?.logical_or(&lo_le_hi.logical_and(&above)?)?;
                let gmax = full_or_half(&g, &full_max, &half_hi)?;
                (gx, Some(gmin), Some(gmax))
            }
            (Some(b), None) | (None, Some(b)) => {
                let lower = min.is_some();
                let (x_loses, b_loses) = if lower {
                    (x.lt(b)?, x.gt(b)?)
                } else {
                    (x.gt(b)?, x.lt(b)?)
                };
                let tie = x.eq(b)?;
                let gx = full_or_half(&g, &not(x_loses.logical_or(&tie)?)?, &tie)?;
                let gb = full_or_half(&g, &not(b_loses.logical_or(&tie)?)?, &tie)?;
                if lower {
                    (gx, Some(gb), None)
                } else {
                    (gx, None, Some(gb))
                }
            }
            (None, None) => unreachable!("infer requires a bound"),
        };
        let mut out = vec![ctx.needs_grad(0).then(|| sum_to(&gx, ctx.input_shape(0))).transpose()?];
        for (i, gb) in (1..).zip([gmin, gmax].into_iter().flatten()) {
            out.push(ctx.needs_grad(i).then(|| sum_to(&gb, ctx.input_shape(i))).transpose()?);
        }
        Ok(out)
    }
}

/// Dispatch table of `lerp.Scalar`.
pub static LERP_SCALAR: OpEntry = OpEntry::differentiable("lerp.Scalar");
/// Dispatch table of `lerp.Tensor`.
pub static LERP_TENSOR: OpEntry = OpEntry::differentiable("lerp.Tensor");

/// `lerp(start, end, weight) = start + weight * (end - start)`, computed
/// as PyTorch's CPU kernel (one fused multiply-add, from `start` for
/// `|weight| < 0.5`, else from `end`): inputs `[start, end]` with a scalar
/// weight, or `[start, end, weight]`.
#[derive(Debug, Clone, Copy)]
pub struct Lerp {
    /// The scalar weight; `None`: the third input is the weight.
    pub weight: Option<Scalar>,
}

impl Op for Lerp {
    fn entry(&self) -> &'static OpEntry {
        if self.weight.is_some() {
            &LERP_SCALAR
        } else {
            &LERP_TENSOR
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (start, end) = (inputs[0], inputs[1]);
        let dt = start.dtype();
        if end.dtype() != dt {
            return Err(Error::dtype(
                "lerp",
                end.dtype(),
                format!("expected dtype {} for `end` but got dtype {}", dt, end.dtype()),
            ));
        }
        if let Some(w) = inputs.get(2)
            && w.dtype() != dt
        {
            return Err(Error::dtype(
                "lerp",
                w.dtype(),
                format!("expected dtype {} for `weight` but got dtype {}", dt, w.dtype()),
            ));
        }
        if !dt.is_floating_point() {
            let kernel = if self.weight.is_some() {
                "lerp_kernel_scalar"
            } else {
                "lerp_kernel_tensor"
            };
            return Err(Error::dtype(
                "lerp",
                dt,
                format!("\"{kernel}\" not implemented for '{}'", dt.scalar_type_name()),
            ));
        }
        let mut shape = broadcast_shapes("lerp", start.shape(), end.shape())?;
        if let Some(w) = inputs.get(2) {
            shape = broadcast_shapes("lerp", &shape, w.shape())?;
        }
        Ok(smallvec::smallvec![broadcast_spec(&shape, inputs, dt)])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn saves(&self) -> Saves {
        match self.weight {
            Some(_) => Saves::NONE,
            None => Saves::INPUTS,
        }
    }

    fn backward_name(&self) -> String {
        format!("LerpBackward{}", u8::from(self.weight.is_none()))
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let (gs, ge, gw) = match self.weight {
            Some(w) => {
                let w = w.to_f64();
                (
                    ctx.needs_grad(0).then(|| g.mul(1.0 - w)).transpose()?,
                    ctx.needs_grad(1).then(|| g.mul(w)).transpose()?,
                    None,
                )
            }
            None => {
                let w = ctx.input(2)?;
                let gw = if ctx.needs_grad(2) {
                    Some(g.mul(&ctx.input(1)?.sub(&ctx.input(0)?)?)?)
                } else {
                    None
                };
                (
                    ctx.needs_grad(0).then(|| g.mul(&w.neg()?.add(1.0)?)).transpose()?,
                    ctx.needs_grad(1).then(|| g.mul(&w)).transpose()?,
                    gw,
                )
            }
        };
        let mut out = vec![
            gs.map(|t| sum_to(&t, ctx.input_shape(0))).transpose()?,
            ge.map(|t| sum_to(&t, ctx.input_shape(1))).transpose()?,
        ];
        if self.weight.is_none() {
            out.push(gw.map(|t| sum_to(&t, ctx.input_shape(2))).transpose()?);
        }
        Ok(out)
    }
}

/// A clamp bound: a tensor, or a scalar wrapped as a 0-d tensor of the
/// tensors' result type when the other bound is a tensor.
fn bound_tensor(x: &Tensor, b: &Operand, other: &Option<Operand>) -> Tensor {
    match b {
        Operand::Tensor(t) => (*t).clone(),
        Operand::Scalar(s) => {
            let mut ops = vec![Operand::Tensor(x), b.clone()];
            ops.extend(other.clone());
            wrapped_scalar(*s, result_type(&ops))
        }
    }
}

/// How a clamp call runs: the scalar operator on `x` converted to the
/// bounds' result type, or the tensor operator on its inputs.
enum ClampCall {
    Scalar(crate::ops::Clamp, Tensor),
    Tensor(ClampTensor, Vec<Tensor>),
}

fn clamp_call(x: &Tensor, min: Option<Operand>, max: Option<Operand>, one_sided: bool) -> Result<ClampCall> {
    let scalar = |o: &Option<Operand>| match o {
        Some(Operand::Scalar(s)) => Some(Some(*s)),
        Some(Operand::Tensor(_)) => None,
        None => Some(None),
    };
    if let (Some(lo), Some(hi)) = (scalar(&min), scalar(&max)) {
        let (op, x) = clamp_args(x, lo, hi, one_sided)?;
        return Ok(ClampCall::Scalar(op, x));
    }
    let mut inputs = vec![x.clone()];
    inputs.extend(min.as_ref().map(|b| bound_tensor(x, b, &max)));
    inputs.extend(max.as_ref().map(|b| bound_tensor(x, b, &min)));
    let op = ClampTensor {
        has_min: min.is_some(),
        has_max: max.is_some(),
        one_sided,
    };
    Ok(ClampCall::Tensor(op, inputs))
}

fn run_clamp(x: &Tensor, min: Option<Operand>, max: Option<Operand>, one_sided: bool) -> Result<Tensor> {
    match clamp_call(x, min, max, one_sided)? {
        ClampCall::Scalar(op, x) => call1(&op, &[&x]),
        ClampCall::Tensor(op, inputs) => call1(&op, &inputs.iter().collect::<Vec<_>>()),
    }
}

fn run_clamp_(x: &Tensor, min: Option<Operand>, max: Option<Operand>, one_sided: bool) -> Result<Tensor> {
    match clamp_call(x, min, max, one_sided)? {
        ClampCall::Scalar(op, xc) => call_out(&op, &[&xc], &[x])?,
        ClampCall::Tensor(op, inputs) => call_out(&op, &inputs.iter().collect::<Vec<_>>(), &[x])?,
    };
    Ok(x.clone())
}

/// # Clamping and interpolation
///
/// `clamp` takes scalar or tensor bounds (broadcast, type-promoted, either
/// optional); `lerp` interpolates with a scalar or tensor weight.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([-2.0f32, 0.5, 3.0])?;
/// assert_eq!(x.clamp(Some(-1.0), Some(1.0))?.to_vec::<f32>()?, [-1.0, 0.5, 1.0]);
/// let lo = Tensor::new([0.0f32, 1.0, 2.0])?;
/// assert_eq!(x.clamp(Some(&lo), None::<f64>)?.to_vec::<f32>()?, [0.0, 1.0, 3.0]);
/// let end = Tensor::new([2.0f32, 2.5, 5.0])?;
/// assert_eq!(x.lerp(&end, 0.5)?.to_vec::<f32>()?, [0.0, 1.5, 4.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// Clamps into `[min, max]`; each bound is `None`, a scalar or a
    /// tensor (broadcast). NaN stays NaN; where `min > max` the result is
    /// `max`. Errors when both are `None`, or when a scalar bound does not
    /// fit an integer input.
    pub fn clamp<'a, 'b>(
        &self,
        min: Option<impl IntoOperand<'a>>,
        max: Option<impl IntoOperand<'b>>,
    ) -> Result<Tensor> {
        run_clamp(
            self,
            min.map(IntoOperand::into_operand),
            max.map(IntoOperand::into_operand),
            false,
        )
    }

    /// In-place [`Tensor::clamp`]; the broadcast shape must be `self`'s.
    pub fn clamp_<'a, 'b>(
        &self,
        min: Option<impl IntoOperand<'a>>,
        max: Option<impl IntoOperand<'b>>,
    ) -> Result<Tensor> {
        run_clamp_(
            self,
            min.map(IntoOperand::into_operand),
            max.map(IntoOperand::into_operand),
            false,
        )
    }

    /// `torch.clamp_min(self, min)`: `clamp(min=min)`, a scalar or a tensor.
    pub fn clamp_min<'a>(&self, min: impl IntoOperand<'a>) -> Result<Tensor> {
        run_clamp(self, Some(min.into_operand()), None, true)
    }

    /// `torch.clamp_max(self, max)`: `clamp(max=max)`, a scalar or a tensor.
    pub fn clamp_max<'a>(&self, max: impl IntoOperand<'a>) -> Result<Tensor> {
        run_clamp(self, None, Some(max.into_operand()), true)
    }

    /// In-place [`Tensor::clamp_min`].
    pub fn clamp_min_<'a>(&self, min: impl IntoOperand<'a>) -> Result<Tensor> {
        run_clamp_(self, Some(min.into_operand()), None, true)
    }

    /// In-place [`Tensor::clamp_max`].
    pub fn clamp_max_<'a>(&self, max: impl IntoOperand<'a>) -> Result<Tensor> {
        run_clamp_(self, None, Some(max.into_operand()), true)
    }

    /// `torch.lerp(self, end, weight)`: `self + weight * (end - self)`,
    /// with a scalar or tensor weight (broadcast). `end` and a tensor
    /// weight must have `self`'s float dtype.
    pub fn lerp<'a>(&self, end: &Tensor, weight: impl IntoOperand<'a>) -> Result<Tensor> {
        match weight.into_operand() {
            Operand::Scalar(w) => call1(&Lerp { weight: Some(w) }, &[self, end]),
            Operand::Tensor(w) => call1(&Lerp { weight: None }, &[self, end, w]),
        }
    }

    /// In-place [`Tensor::lerp`]; returns `self`.
    pub fn lerp_<'a>(&self, end: &Tensor, weight: impl IntoOperand<'a>) -> Result<Tensor> {
        match weight.into_operand() {
            Operand::Scalar(w) => call_out(&Lerp { weight: Some(w) }, &[self, end], &[self])?,
            Operand::Tensor(w) => call_out(&Lerp { weight: None }, &[self, end, w], &[self])?,
        };
        Ok(self.clone())
    }
}
