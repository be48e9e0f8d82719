//! Loss functions with PyTorch's operators, nodes and values.
//!
//! - `nll_loss_forward` / `nll_loss2d_forward` (`NllLossBackward0` /
//!   `NllLoss2DBackward0`): a CPU kernel that sums as PyTorch's does (its
//!   cascade of partial sums, one pass in sample order), returning the
//!   loss and the total weight; their derivatives `nll_loss_backward` /
//!   `nll_loss2d_backward` are operators of their own (rows in parallel),
//!   differentiable in turn.
//! - `mse_loss`, `smooth_l1_loss`, `huber_loss`, `binary_cross_entropy`,
//!   `binary_cross_entropy_with_logits`: one node each
//!   (`MseLossBackward0`, ...), computed in other operators (the
//!   `AnyBackend` slot) with PyTorch's derivative formulas, which are
//!   written in operators (so they have higher derivatives).
//! - `cross_entropy` (class indices: `log_softmax` then `nll_loss`; with
//!   label smoothing or class probabilities PyTorch's composite graphs),
//!   `l1_loss` and `kl_div` are front ends in other operators, as in
//!   PyTorch.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call, call1, downcast_op};
use crate::layout::{Dims, broadcast_shapes};
use crate::ops::Operand;
use crate::ops::grad_util::grad0;
use crate::{DType, Error, Result, Tensor};

/// Dispatch table of `nll_loss_forward` (outputs: loss, total_weight).
pub static NLL_LOSS: OpEntry = OpEntry::differentiable("nll_loss_forward");
/// Dispatch table of `nll_loss2d_forward`.
pub static NLL_LOSS2D: OpEntry = OpEntry::differentiable("nll_loss2d_forward");
/// Dispatch table of `nll_loss_backward`.
pub static NLL_LOSS_BACKWARD: OpEntry = OpEntry::differentiable("nll_loss_backward");
/// Dispatch table of `nll_loss2d_backward`.
pub static NLL_LOSS2D_BACKWARD: OpEntry = OpEntry::differentiable("nll_loss2d_backward");
/// Dispatch table of `mse_loss`.
pub static MSE_LOSS: OpEntry = OpEntry::differentiable("mse_loss");
/// Dispatch table of `smooth_l1_loss`.
pub static SMOOTH_L1_LOSS: OpEntry = OpEntry::differentiable("smooth_l1_loss");
/// Dispatch table of `huber_loss`.
pub static HUBER_LOSS: OpEntry = OpEntry::differentiable("huber_loss");
/// Dispatch table of `binary_cross_entropy`.
pub static BINARY_CROSS_ENTROPY: OpEntry = OpEntry::differentiable("binary_cross_entropy");
/// Dispatch table of `binary_cross_entropy_with_logits`.
pub static BINARY_CROSS_ENTROPY_WITH_LOGITS: OpEntry = OpEntry::differentiable("binary_cross_entropy_with_logits");

/// How a loss reduces its per-element values (`reduction=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Reduction {
    /// Per-element losses (`'none'`).
    None,
    /// Their mean (`'mean'`, the default; for weighted losses the weighted
    /// mean).
    #[default]
    Mean,
    /// Their sum (`'sum'`).
    Sum,
}

impl Reduction {
    /// PyTorch's spelling: `none`, `mean` or `sum`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reduction::None => "none",
            Reduction::Mean => "mean",
            Reduction::Sum => "sum",
        }
    }

    /// Parses PyTorch's spelling; any other string is PyTorch's error
    /// ("foo is not a valid value for reduction").
    pub fn parse(s: &str) -> Result<Reduction> {
        match s {
            "none" => Ok(Reduction::None),
            "mean" => Ok(Reduction::Mean),
            "sum" => Ok(Reduction::Sum),
            other => Err(Error::invalid(
                "loss",
                format!("{other} is not a valid value for reduction"),
            )),
        }
    }

    /// Reduces per-element losses.
    pub fn apply(self, loss: &Tensor) -> Result<Tensor> {
        match self {
            Reduction::None => Ok(loss.clone()),
            Reduction::Mean => loss.mean(),
            Reduction::Sum => loss.sum(),
        }
    }
}

fn shape_str(s: &[usize]) -> String {
    format!("{s:?}")
}

// ------------------------------------------------------------------ nll_loss

/// `nll_loss_forward` (inputs `[input [C] or [N, C], target [] or [N],
/// weight?]`) or, with `two_d`, `nll_loss2d_forward` (`[input [N, C, H,
/// W], target [N, H, W], weight?]`): the loss (per sample for
/// [`Reduction::None`], else a scalar) and the total weight of the
/// samples that count (a scalar).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NllLoss {
    /// Reduction.
    pub reduction: Reduction,
    /// Target value that contributes nothing.
    pub ignore_index: i64,
    /// A class weight `[C]` is given.
    pub weight: bool,
    /// The 2-d (image) form.
    pub two_d: bool,
}

impl NllLoss {
    fn name(&self) -> &'static str {
        if self.two_d { "nll_loss2d" } else { "nll_loss" }
    }
}

/// Checks a target's dtype (int64 or uint8, as PyTorch).
fn check_target_dtype(name: &'static str, t: &Tensor) -> Result<()> {
    if !matches!(t.dtype(), DType::I64 | DType::U8) {
        return Err(Error::dtype(
            name,
            t.dtype(),
            format!(
                "expected target dtype to be Long or Byte, but got {}",
                pt_dtype(t.dtype())
            ),
        ));
    }
    Ok(())
}

/// PyTorch's name of a scalar type in messages (`Long`, `Float`).
fn pt_dtype(d: DType) -> &'static str {
    match d {
        DType::F32 => "Float",
        DType::F64 => "Double",
        DType::F16 => "Half",
        DType::BF16 => "BFloat16",
        DType::I64 => "Long",
        DType::I32 => "Int",
        DType::U8 => "Byte",
        DType::Bool => "Bool",
    }
}

impl Op for NllLoss {
    fn entry(&self) -> &'static OpEntry {
        if self.two_d { &NLL_LOSS2D } else { &NLL_LOSS }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let name = self.name();
        let (x, t) = (inputs[0], inputs[1]);
        if !x.dtype().is_floating_point() {
            return Err(Error::dtype(name, x.dtype(), "expects a floating-point input"));
        }
        check_target_dtype(name, t)?;
        let (xs, ts) = (x.shape(), t.shape());
        let mismatch = || {
            Error::invalid(
                name,
                format!(
                    "size mismatch (got input: {} , target: {}",
                    shape_str(xs),
                    shape_str(ts)
                ),
            )
        };
        let out: Dims = if self.two_d {
            if ts.len() != 3 {
                return Err(Error::invalid(
                    name,
                    format!(
                        "only batches of spatial targets supported (3D tensors) but got targets of dimension: {}",
                        ts.len()
                    ),
                ));
            }
            if xs.len() != 4 {
                return Err(Error::invalid(
                    name,
                    format!(
                        "only batches of spatial inputs supported (4D tensors), but got input of dimension: {}",
                        xs.len()
                    ),
                ));
            }
            if xs[0] != ts[0] || xs[2] != ts[1] || xs[3] != ts[2] {
                return Err(mismatch());
            }
            if self.reduction == Reduction::None {
                Dims::from_slice(ts)
            } else {
                Dims::new()
            }
        } else {
            if xs.is_empty() || xs.len() > 2 {
                return Err(Error::invalid(name, "input tensor should be 1D or 2D"));
            }
            if ts.len() > 1 {
                return Err(Error::invalid(
                    name,
                    "0D or 1D target tensor expected, multi-target not supported",
                ));
            }
            let no_batch = xs.len() == 1 && ts.is_empty();
            if !no_batch && (ts.is_empty() || xs[0] != ts[0]) {
                return Err(mismatch());
            }
            if self.reduction == Reduction::None && xs.len() == 2 {
                Dims::from_slice(&[xs[0]])
            } else {
                Dims::new()
            }
        };
        let classes = if xs.len() == 1 { xs[0] } else { xs[1] };
        if self.weight {
            let w = inputs[2];
            if w.ndim() != 1 || w.numel() != classes {
                return Err(Error::invalid(
                    name,
                    format!(
                        "weight tensor should be defined either for all {classes} classes or no classes but got weight \
                         tensor of shape: {}",
                        shape_str(w.shape())
                    ),
                ));
            }
            if w.dtype() != x.dtype() {
                return Err(Error::DTypeMismatch {
                    op: name,
                    detail: format!(
                        "expected scalar type {} but found {}",
                        pt_dtype(x.dtype()),
                        pt_dtype(w.dtype())
                    ),
                });
            }
        }
        Ok(smallvec::smallvec![
            OutSpec::new(out, x.dtype()),
            OutSpec::new(Dims::new(), x.dtype())
        ])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i == 0
    }

    fn saves(&self) -> Saves {
        Saves {
            inputs: 0b110,
            outputs: 0b10,
        }
    }

    fn backward_name(&self) -> String {
        if self.two_d {
            "NllLoss2DBackward0"
        } else {
            "NllLossBackward0"
        }
        .into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let mut out = vec![None; ctx.num_inputs()];
        let Some(g) = grads.first().cloned().flatten() else {
            return Ok(out);
        };
        let target = ctx.input(1)?;
        let total = ctx.output(1)?;
        let weight = self.weight.then(|| ctx.input(2)).transpose()?;
        let op = NllLossBackward {
            loss: *self,
            input_shape: ctx.input_shape(0).into(),
        };
        let mut ins = vec![&g, &target, &total];
        if let Some(w) = &weight {
            ins.push(w);
        }
        out[0] = Some(call1(&op, &ins)?);
        Ok(out)
    }
}

/// The derivative of [`NllLoss`]: inputs `[grad, target, total_weight,
/// weight?]`, output the input's gradient (zeros except `-weight[t] *
/// grad` at each counted sample's target, divided by the total weight
/// for [`Reduction::Mean`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NllLossBackward {
    /// The forward operator.
    pub loss: NllLoss,
    /// The forward input's shape.
    pub input_shape: Dims,
}

impl Op for NllLossBackward {
    fn entry(&self) -> &'static OpEntry {
        if self.loss.two_d {
            &NLL_LOSS2D_BACKWARD
        } else {
            &NLL_LOSS_BACKWARD
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let g = inputs[0];
        if !g.dtype().is_floating_point() {
            return Err(Error::dtype(
                self.entry().base_name(),
                g.dtype(),
                "expects a floating-point grad",
            ));
        }
        check_target_dtype(self.entry().base_name(), inputs[1])?;
        Ok(smallvec::smallvec![OutSpec::new(self.input_shape.clone(), g.dtype())])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i == 0
    }

    fn saves(&self) -> Saves {
        Saves::inputs(!1)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let gg = grad0(grads)?;
        let mut out = vec![None; ctx.num_inputs()];
        if ctx.needs_grad(0) {
            let target = ctx.input(1)?;
            let weight = self.loss.weight.then(|| ctx.input(3)).transpose()?;
            let mut ins = vec![&gg, &target];
            if let Some(w) = &weight {
                ins.push(w);
            }
            out[0] = Some(call(&self.loss, &ins)?.swap_remove(0));
        }
        Ok(out)
    }
}

// ------------------------------------------------------------ pointwise losses

/// Which pointwise loss a [`PointwiseLoss`] computes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PointLoss {
    /// `(x - t)²`.
    Mse,
    /// `0.5 d² / beta` where `|d| < beta`, else `|d| - 0.5 beta`.
    SmoothL1 {
        /// `beta` (> 0 here; 0 is `l1_loss`).
        beta: f64,
    },
    /// `0.5 d²` where `|d| < delta`, else `delta (|d| - 0.5 delta)`.
    Huber {
        /// `delta` (> 0).
        delta: f64,
    },
    /// `-w (t log x + (1 - t) log(1 - x))`, the logs clamped at -100.
    Bce,
    /// `-w (pos_weight t log σ(x) + (1 - t) log(1 - σ(x)))`, computed
    /// stably.
    BceWithLogits {
        /// A `pos_weight` (broadcast over the last dim) is given.
        pos_weight: bool,
    },
}

/// A loss of `[input, target, weight?, pos_weight?]` (one shape; weights
/// broadcast to it), reduced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointwiseLoss {
    /// Which loss.
    pub kind: PointLoss,
    /// Reduction.
    pub reduction: Reduction,
    /// A weight is given (input 2).
    pub weight: bool,
    /// The result's dtype where it is not the input's: `huber_loss`
    /// computes in the promoted dtype of its (converted) operands and
    /// writes into its input's dtype (`None`: the input's; for
    /// `BceWithLogits` the target's, always).
    pub out_dtype: Option<DType>,
}

impl PointwiseLoss {
    fn name(&self) -> &'static str {
        self.entry().base_name()
    }

    /// The dtype of the per-element losses and of the result: the target's
    /// for `BceWithLogits` (PyTorch computes `(1 - target).mul_(input)` in
    /// place), else `out_dtype` or the input's.
    fn result_dtype(&self, x: DType, t: DType) -> DType {
        match self.kind {
            PointLoss::BceWithLogits { .. } => t,
            _ => self.out_dtype.unwrap_or(x),
        }
    }

    fn weight(&self, inputs: &[Tensor]) -> Option<Tensor> {
        self.weight.then(|| inputs[2].clone())
    }

    fn pos_weight(&self, inputs: &[Tensor]) -> Option<Tensor> {
        match self.kind {
            PointLoss::BceWithLogits { pos_weight: true } => Some(inputs[2 + self.weight as usize].clone()),
            _ => None,
        }
    }

    /// The per-element losses, in operators.
    fn elementwise(&self, inputs: &[Tensor]) -> Result<Tensor> {
        let (x, t) = (&inputs[0], &inputs[1]);
        let l = match self.kind {
            PointLoss::Mse => {
                let d = x.sub(t)?;
                d.mul(&d)?
            }
            PointLoss::SmoothL1 { beta } => {
                let d = x.sub(t)?.abs()?;
                let quad = d.mul(&d)?.mul(0.5)?.div(beta)?;
                let lin = d.sub(0.5 * beta)?;
                crate::ops::binary::where_(&d.lt(beta)?, Operand::Tensor(&quad), Operand::Tensor(&lin))?
            }
            PointLoss::Huber { delta } => {
                let d = x.sub(t)?.abs()?;
                let quad = d.mul(&d)?.mul(0.5)?;
                let lin = d.sub(0.5 * delta)?.mul(delta)?;
                crate::ops::binary::where_(&d.lt(delta)?, Operand::Tensor(&quad), Operand::Tensor(&lin))?
            }
            PointLoss::Bce => {
                if x.device() != crate::Device::Meta {
                    let bad = |v: &Tensor| -> Result<bool> {
                        v.ge(0.0)?
                            .logical_and(&v.le(1.0)?)?
                            .logical_not()?
                            .any()?
                            .item::<bool>()
                    };
                    if bad(x)? {
                        return Err(Error::invalid(
                            "binary_cross_entropy",
                            "all elements of input should be between 0 and 1",
                        ));
                    }
                    if bad(t)? {
                        return Err(Error::invalid(
                            "binary_cross_entropy",
                            "all elements of target should be between 0 and 1",
                        ));
                    }
                }
                let log1m = x.neg()?.log1p()?.clamp_min(-100.0)?;
                let logx = x.log()?.clamp_min(-100.0)?;
                t.sub(1.0)?.mul(&log1m)?.sub(&t.mul(&logx)?)?
            }
            PointLoss::BceWithLogits { .. } => {
                // PyTorch's in-place steps, each rounded to the dtype it
                // writes: `log_sigmoid(x).mul_(log_weight)` in the input's,
                // `(1 - t).mul_(x).sub_(...)` in the target's.
                let mut ls = x.log_sigmoid()?;
                if let Some(pw) = self.pos_weight(inputs) {
                    ls = cast(ls.mul(&pw.sub(1.0)?.mul(t)?.add(1.0)?)?, x.dtype())?;
                }
                let l = cast(t.neg()?.add(1.0)?.mul(x)?, t.dtype())?;
                cast(l.sub(&ls)?, t.dtype())?
            }
        };
        // `loss.mul_(weight)`: the product rounded to the loss's dtype.
        let out = self.result_dtype(x.dtype(), t.dtype());
        match self.weight(inputs) {
            Some(w) => cast(l.mul(&w)?, out),
            None => cast(l, out),
        }
    }
}

impl Op for PointwiseLoss {
    fn entry(&self) -> &'static OpEntry {
        match self.kind {
            PointLoss::Mse => &MSE_LOSS,
            PointLoss::SmoothL1 { .. } => &SMOOTH_L1_LOSS,
            PointLoss::Huber { .. } => &HUBER_LOSS,
            PointLoss::Bce => &BINARY_CROSS_ENTROPY,
            PointLoss::BceWithLogits { .. } => &BINARY_CROSS_ENTROPY_WITH_LOGITS,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let name = self.name();
        let (x, t) = (inputs[0], inputs[1]);
        if x.shape() != t.shape() {
            return Err(Error::shape(
                name,
                x.shape(),
                t.shape(),
                "input and target must have one shape",
            ));
        }
        let (xd, td) = (x.dtype(), t.dtype());
        if let PointLoss::BceWithLogits { .. } = self.kind {
            // PyTorch's order: `log_sigmoid(input)`, then `1 - target`,
            // then `mul_(input)` into the target's dtype.
            if !xd.is_floating_point() {
                return Err(Error::dtype(
                    name,
                    xd,
                    format!("\"log_sigmoid_cpu\" not implemented for '{}'", pt_dtype(xd)),
                ));
            }
            if td == DType::Bool {
                return Err(Error::invalid(
                    name,
                    "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or \
                     `logical_xor()` operator instead.",
                ));
            }
            if !td.is_floating_point() {
                return Err(Error::dtype(
                    name,
                    td,
                    format!(
                        "result type {} can't be cast to the desired output type {}",
                        pt_dtype(xd.promote(td)),
                        pt_dtype(td)
                    ),
                ));
            }
        } else {
            // One TensorIterator over input and target: one dtype.
            if xd != td {
                return Err(Error::dtype(
                    name,
                    td,
                    format!("Found dtype {} but expected {}", pt_dtype(td), pt_dtype(xd)),
                ));
            }
            if !xd.is_floating_point() {
                return Err(Error::dtype(name, xd, "expects a floating-point input"));
            }
            if let Some(o) = self.out_dtype
                && !o.can_cast_from(xd)
            {
                return Err(Error::dtype(
                    name,
                    o,
                    format!(
                        "result type {} can't be cast to the desired output type {}",
                        pt_dtype(xd),
                        pt_dtype(o)
                    ),
                ));
            }
        }
        for w in &inputs[2..] {
            broadcast_shapes(name, w.shape(), x.shape())?;
        }
        let out = if self.reduction == Reduction::None {
            x.dims()
        } else {
            Dims::new()
        };
        Ok(smallvec::smallvec![OutSpec::new(out, self.result_dtype(xd, td))])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i < 2
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let inputs: Vec<Tensor> = (0..ctx.num_inputs()).map(|i| ctx.input(i)).collect::<Result<_>>()?;
        let (x, t) = (&inputs[0], &inputs[1]);
        // PyTorch's mse_loss_backward: `norm * (x - t) * grad` with `norm =
        // 2 / numel` for the mean (scaled before the upstream gradient, so
        // a large difference does not overflow on the way).
        let mse_norm = match self.reduction {
            Reduction::Mean => 2.0 / x.numel() as f64,
            _ => 2.0,
        };
        let g_out = g.clone();
        // The upstream gradient per element: `grad / numel` for the mean.
        let g = match self.reduction {
            Reduction::Mean => g.div(x.numel() as f64)?,
            _ => g,
        };
        let weighted = |v: Tensor| -> Result<Tensor> {
            match self.weight(&inputs) {
                Some(w) => v.mul(&w),
                None => Ok(v),
            }
        };
        let (gx, gt) = match self.kind {
            PointLoss::Mse => {
                let gx = x.sub(t)?.mul(mse_norm)?.mul(&g_out)?;
                let gt = ctx.needs_grad(1).then(|| gx.neg()).transpose()?;
                (gx, gt)
            }
            PointLoss::SmoothL1 { beta } => {
                let gx = x.sub(t)?.div(beta)?.clamp(Some(-1.0), Some(1.0))?.mul(&g)?;
                let gt = ctx.needs_grad(1).then(|| gx.neg()).transpose()?;
                (gx, gt)
            }
            PointLoss::Huber { delta } => {
                let gx = x.sub(t)?.clamp(Some(-delta), Some(delta))?.mul(&g)?;
                let gt = ctx.needs_grad(1).then(|| gx.neg()).transpose()?;
                (gx, gt)
            }
            PointLoss::Bce => {
                let denom = x.neg()?.add(1.0)?.mul(x)?.clamp_min(1e-12)?;
                let gx = weighted(g.mul(&x.sub(t)?)?.div(&denom)?)?;
                let gt = ctx
                    .needs_grad(1)
                    .then(|| -> Result<Tensor> {
                        let logit = x.log()?.sub(&x.neg()?.log1p()?)?;
                        weighted(logit.neg()?.mul(&g)?)
                    })
                    .transpose()?;
                (gx, gt)
            }
            PointLoss::BceWithLogits { .. } => {
                let s = x.sigmoid()?;
                let gx = match self.pos_weight(&inputs) {
                    Some(pw) => {
                        let pt = pw.mul(t)?;
                        pt.add(1.0)?.sub(t)?.mul(&s)?.sub(&pt)?
                    }
                    None => s.sub(t)?,
                };
                let gx = weighted(gx.mul(&g)?)?;
                let gt = ctx
                    .needs_grad(1)
                    .then(|| -> Result<Tensor> {
                        let d = match self.pos_weight(&inputs) {
                            Some(pw) => x.neg()?.log_sigmoid()?.sub(&x.log_sigmoid()?.mul(&pw)?)?,
                            None => x.neg()?,
                        };
                        weighted(d.mul(&g)?)
                    })
                    .transpose()?;
                (gx, gt)
            }
        };
        let mut out = vec![None; ctx.num_inputs()];
        out[0] = Some(crate::ops::grad_util::sum_to(&gx, x.shape())?);
        out[1] = gt;
        Ok(out)
    }
}

/// `v` in dtype `d` (itself when it already is).
fn cast(v: Tensor, d: DType) -> Result<Tensor> {
    if v.dtype() == d { Ok(v) } else { v.to_dtype(d) }
}

fn pointwise_loss_kernel(call: &Call) -> Result<Tensors> {
    let op: &PointwiseLoss = downcast_op(call.op)?;
    op.infer(call.inputs)?;
    let inputs: Vec<Tensor> = call.inputs.iter().map(|t| (*t).clone()).collect();
    let l = op.elementwise(&inputs)?;
    Ok(smallvec::smallvec![op.reduction.apply(&l)?])
}

/// Registers the composite kernels.
pub(crate) fn register() -> Result<()> {
    for e in [
        &MSE_LOSS,
        &SMOOTH_L1_LOSS,
        &HUBER_LOSS,
        &BINARY_CROSS_ENTROPY,
        &BINARY_CROSS_ENTROPY_WITH_LOGITS,
    ] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(pointwise_loss_kernel))?;
    }
    Ok(())
}

// ------------------------------------------------------------------ front ends

/// `input` and `target` broadcast to one shape, as `F.mse_loss` & co. do
/// (`torch.broadcast_tensors`) before calling the operator, with
/// `ExpandBackward0` nodes; a 0-d target then joins type promotion as a
/// full tensor. Errors: shapes that do not broadcast.
fn broadcast_pair(name: &'static str, x: &Tensor, t: &Tensor) -> Result<(Tensor, Tensor)> {
    if x.shape() == t.shape() {
        return Ok((x.clone(), t.clone()));
    }
    let s = broadcast_shapes(name, x.shape(), t.shape())?;
    Ok((x.expand(s.as_slice())?, t.expand(s.as_slice())?))
}

/// `x` and `t` converted to their promoted dtype (`torch.promote_types`),
/// which must be a float one: PyTorch's loss kernel `kernel` exists for
/// floats only (its message otherwise).
fn float_pair(name: &'static str, kernel: &str, x: &Tensor, t: &Tensor) -> Result<(Tensor, Tensor)> {
    let dt = x.dtype().promote(t.dtype());
    if !dt.is_floating_point() {
        return Err(Error::dtype(
            name,
            dt,
            format!("\"{kernel}\" not implemented for '{}'", pt_dtype(dt)),
        ));
    }
    Ok((cast(x.clone(), dt)?, cast(t.clone(), dt)?))
}

fn pointwise(
    kind: PointLoss,
    x: &Tensor,
    t: &Tensor,
    reduction: Reduction,
    extra: &[&Tensor],
    weight: bool,
    out_dtype: Option<DType>,
) -> Result<Tensor> {
    let op = PointwiseLoss {
        kind,
        reduction,
        weight,
        out_dtype,
    };
    let mut ins = vec![x, t];
    ins.extend_from_slice(extra);
    call1(&op, &ins)
}

/// The class dim of a cross-entropy / nll input (1, or 0 for a 1-d input).
fn class_dim(x: &Tensor) -> usize {
    if x.ndim() == 1 { 0 } else { 1 }
}

/// # Losses
///
/// `F.cross_entropy`, `F.nll_loss`, `F.mse_loss` & co., with PyTorch's
/// operators and nodes.
///
/// ```
/// use ferrotorch_core::{Reduction, Tensor};
/// let logits = Tensor::new([[2.0f32, 0.5, -1.0], [0.1, 0.2, 3.0]])?;
/// let target = Tensor::new([0i64, 2])?;
/// let loss = logits.cross_entropy(&target, None, Reduction::Mean, -100, 0.0)?;
/// assert!((loss.item::<f32>()? - 0.1755).abs() < 1e-4); // PyTorch: 0.1755
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// The negative log-likelihood loss of log-probabilities `self` (`[C]`,
    /// `[N, C]` or `[N, C, d1, ...]`) for class indices `target` (`[]`,
    /// `[N]` or `[N, d1, ...]`, int64 or uint8), as `F.nll_loss`:
    /// `-weight[t] * self[n, t]` per sample, samples whose target is `ignore_index`
    /// counting for nothing; the mean divides by the total weight of the
    /// samples that count (NaN when none does). A 4-d input is
    /// `nll_loss2d`; 3-d and over 4 are viewed as 4-d (nodes
    /// `NllLossBackward0` / `NllLoss2DBackward0`, with `ViewBackward0`).
    /// Errors (PyTorch's messages): mismatched batch sizes ("Expected input
    /// batch_size (3) to match target batch_size (4)."), a target out of
    /// range ("Target 7 is out of bounds.", with the number of classes),
    /// a target dtype other than int64/uint8, spatial sizes that differ, a
    /// weight not of size C.
    pub fn nll_loss(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        reduction: Reduction,
        ignore_index: i64,
    ) -> Result<Tensor> {
        let name = "nll_loss";
        if self.ndim() < 1 {
            return Err(Error::invalid(
                name,
                format!("Expected 1 or more dimensions (got {})", self.ndim()),
            ));
        }
        if self.ndim() != 1 && target.shape().first() != Some(&self.shape()[0]) {
            return Err(Error::invalid(
                name,
                format!(
                    "Expected input batch_size ({}) to match target batch_size ({}).",
                    self.shape()[0],
                    target.shape().first().copied().unwrap_or(0)
                ),
            ));
        }
        let nll = |x: &Tensor, t: &Tensor, two_d: bool| -> Result<Tensor> {
            let op = NllLoss {
                reduction,
                ignore_index,
                weight: weight.is_some(),
                two_d,
            };
            let mut ins = vec![x, t];
            if let Some(w) = weight {
                ins.push(w);
            }
            Ok(call(&op, &ins)?.swap_remove(0))
        };
        match self.ndim() {
            1 | 2 => nll(self, target, false),
            4 => nll(self, target, true),
            _ => {
                let (n, c) = (self.shape()[0], self.shape()[1]);
                let mut out_size: Vec<usize> = vec![n];
                out_size.extend_from_slice(&self.shape()[2..]);
                if target.shape().get(1..) != Some(&self.shape()[2..]) {
                    return Err(Error::invalid(
                        name,
                        format!(
                            "Expected target size {}, got {}",
                            shape_str(&out_size),
                            shape_str(target.shape())
                        ),
                    ));
                }
                let (x, t) = (self.contiguous()?, target.contiguous()?);
                let (n, c) = (n as i64, c as i64);
                let x = if x.numel() > 0 {
                    x.view([n, c, 1, -1])?
                } else {
                    x.view([n, c, 0, 0])?
                };
                let t = if t.numel() > 0 {
                    t.view([n, 1, -1])?
                } else {
                    t.view([n, 0, 0])?
                };
                let r = nll(&x, &t, true)?;
                if reduction == Reduction::None {
                    r.view(out_size.as_slice())
                } else {
                    Ok(r)
                }
            }
        }
    }

    /// The cross-entropy loss of unnormalised scores `self` (`[C]`, `[N, C]`
    /// or `[N, C, d1, ...]`) as `F.cross_entropy`: with class indices
    /// `target`, `log_softmax` over the class dim then [`Tensor::nll_loss`]
    /// (with `label_smoothing` > 0, PyTorch's composite: `(1 - ls) * nll +
    /// ls / C * smooth`, ignored samples masked); with class probabilities
    /// (`target` of the input's shape, float), `-sum(target * log_softmax)`
    /// (smoothed towards uniform), the mean over samples. Errors
    /// (PyTorch's messages): those of [`Tensor::nll_loss`],
    /// `label_smoothing` outside [0, 1], `ignore_index` with probability
    /// targets, a probability target that is not float, an integer input.
    pub fn cross_entropy(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        reduction: Reduction,
        ignore_index: i64,
        label_smoothing: f64,
    ) -> Result<Tensor> {
        let name = "cross_entropy";
        if self.ndim() == 0 {
            return Err(Error::invalid(name, "Expected 1 or more dimensions (got 0)"));
        }
        if !(0.0..=1.0).contains(&label_smoothing) {
            return Err(Error::invalid(
                name,
                format!("label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"),
            ));
        }
        if self.shape() == target.shape() {
            if !target.dtype().is_floating_point() {
                return Err(Error::dtype(
                    name,
                    target.dtype(),
                    format!(
                        "Expected floating point type for target with class probabilities, got {}",
                        pt_dtype(target.dtype())
                    ),
                ));
            }
            if ignore_index >= 0 {
                return Err(Error::invalid(
                    name,
                    "ignore_index is not supported for floating point target",
                ));
            }
            return self.cross_entropy_probs(target, weight, reduction, label_smoothing);
        }
        let cd = class_dim(self);
        let input = self.log_softmax(cd as i64)?;
        if label_smoothing == 0.0 {
            return input.nll_loss(target, weight, reduction, ignore_index);
        }
        let n_classes = self.shape()[cd];
        let nll = input.nll_loss(target, weight, reduction, ignore_index)?;
        let ignore_mask = target.eq(ignore_index)?;
        let smooth = match weight {
            Some(w) => {
                let mut bs = vec![1i64; self.ndim()];
                bs[cd] = w.numel() as i64;
                input.mul(&w.view(bs)?)?.sum_dim(cd as i64, false)?.neg()?
            }
            None => input.sum_dim(cd as i64, false)?.neg()?,
        };
        let smooth = smooth.masked_fill(&ignore_mask, 0.0)?;
        let ret = match reduction {
            Reduction::Mean => match weight {
                Some(w) => {
                    let kept = target.masked_select(&ignore_mask.logical_not()?)?.flatten((0, -1))?;
                    smooth.sum()?.div(&w.gather(0, &kept.to_dtype(DType::I64)?)?.sum()?)?
                }
                None => smooth.sum()?.div(&ignore_mask.logical_not()?.sum()?)?,
            },
            Reduction::Sum => smooth.sum()?,
            Reduction::None => smooth,
        };
        nll.mul(1.0 - label_smoothing)?
            .add(&ret.mul(label_smoothing / n_classes as f64)?)
    }

    /// Cross entropy with class-probability targets (PyTorch's
    /// `cross_entropy_loss_prob_target`).
    fn cross_entropy_probs(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        reduction: Reduction,
        ls: f64,
    ) -> Result<Tensor> {
        let cd = class_dim(self);
        let n_classes = self.shape()[cd];
        if let Some(w) = weight
            && (w.ndim() != 1 || w.numel() != n_classes)
        {
            return Err(Error::invalid(
                "cross_entropy",
                format!(
                    "weight tensor should be defined either for all {n_classes} classes or no classes but got weight \
                     tensor of shape: {}",
                    shape_str(w.shape())
                ),
            ));
        }
        let input = self.log_softmax(cd as i64)?;
        let target = if ls > 0.0 {
            target.mul(1.0 - ls)?.add(ls / n_classes as f64)?
        } else {
            target.clone()
        };
        let mut prod = input.mul(&target)?;
        if let Some(w) = weight {
            let w = if input.ndim() > 1 {
                let mut bs = vec![1i64; input.ndim()];
                bs[cd] = n_classes as i64;
                w.view(bs)?
            } else {
                w.clone()
            };
            prod = prod.mul(&w)?;
        }
        match reduction {
            Reduction::Mean => {
                if input.numel() == 0 {
                    prod.sum()?.neg()?.mul(f64::NAN)
                } else {
                    prod.sum()?.neg()?.div((input.numel() / n_classes) as f64)
                }
            }
            Reduction::Sum => prod.sum()?.neg(),
            Reduction::None => prod.sum_dim(cd as i64, false)?.neg(),
        }
    }

    /// The mean squared error `(self - target)²` (`F.mse_loss`; node
    /// `MseLossBackward0`); shapes broadcast first (with `ExpandBackward0`
    /// nodes, as PyTorch's `broadcast_tensors`), then the dtypes promote
    /// as two full tensors (`torch.promote_types`: an f64 0-d target makes
    /// an f64 loss). Errors: shapes that do not broadcast, a promoted
    /// dtype that is not a float one (PyTorch's `"mse_cpu" not
    /// implemented` message).
    pub fn mse_loss(&self, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        let (x, t) = broadcast_pair("mse_loss", self, target)?;
        let (x, t) = float_pair("mse_loss", "mse_cpu", &x, &t)?;
        pointwise(PointLoss::Mse, &x, &t, reduction, &[], false, None)
    }

    /// The mean absolute error `|self - target|` (`F.l1_loss`, written in
    /// `sub`, `abs` and the reduction, as PyTorch), after broadcasting as
    /// [`Tensor::mse_loss`]. Integer tensors work with `None` and `Sum`
    /// reductions, as in PyTorch. Errors: shapes that do not broadcast, a
    /// bool operand (`sub`'s error), the mean of integers.
    pub fn l1_loss(&self, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        let (x, t) = broadcast_pair("l1_loss", self, target)?;
        reduction.apply(&x.sub(&t)?.abs()?)
    }

    /// Smooth L1 loss (`F.smooth_l1_loss`): `0.5 d² / beta` where `|d| <
    /// beta`, else `|d| - 0.5 beta`; `beta` 0 is [`Tensor::l1_loss`] (node
    /// `SmoothL1LossBackward0`). Errors: a negative `beta` (PyTorch's
    /// message), as [`Tensor::mse_loss`] (`"smooth_l1_cpu"`).
    pub fn smooth_l1_loss(&self, target: &Tensor, reduction: Reduction, beta: f64) -> Result<Tensor> {
        if beta.is_nan() || beta < 0.0 {
            return Err(Error::invalid(
                "smooth_l1_loss",
                "smooth_l1_loss does not support negative values for beta.",
            ));
        }
        if beta == 0.0 {
            return self.l1_loss(target, reduction);
        }
        let (x, t) = broadcast_pair("smooth_l1_loss", self, target)?;
        let (x, t) = float_pair("smooth_l1_loss", "smooth_l1_cpu", &x, &t)?;
        pointwise(PointLoss::SmoothL1 { beta }, &x, &t, reduction, &[], false, None)
    }

    /// Huber loss (`F.huber_loss`): `0.5 d²` where `|d| < delta`, else
    /// `delta (|d| - 0.5 delta)` (node `HuberLossBackward0`), after
    /// broadcasting as [`Tensor::mse_loss`]. As PyTorch (which writes into
    /// `empty_like(input)`), the loss has the input's dtype: computed in
    /// the promoted dtype, rounded to the input's, then reduced. Errors: a
    /// non-positive `delta`, a promoted dtype the input's cannot hold
    /// ("result type Double can't be cast to the desired output type
    /// Int"), integer operands (PyTorch's messages).
    pub fn huber_loss(&self, target: &Tensor, reduction: Reduction, delta: f64) -> Result<Tensor> {
        let name = "huber_loss";
        if delta.is_nan() || delta <= 0.0 {
            return Err(Error::invalid(
                name,
                "huber_loss does not support non-positive values for delta.",
            ));
        }
        let (x, t) = broadcast_pair(name, self, target)?;
        let (out, common) = (self.dtype(), self.dtype().promote(target.dtype()));
        if !out.can_cast_from(common) {
            return Err(Error::dtype(
                name,
                out,
                format!(
                    "result type {} can't be cast to the desired output type {}",
                    pt_dtype(common),
                    pt_dtype(out)
                ),
            ));
        }
        let (x, t) = float_pair(name, "huber_cpu", &x, &t)?;
        pointwise(PointLoss::Huber { delta }, &x, &t, reduction, &[], false, Some(out))
    }

    /// Binary cross entropy of probabilities `self` (`F.binary_cross_entropy`):
    /// `-weight (t log x + (1 - t) log(1 - x))`, each log clamped at -100
    /// as PyTorch (node `BinaryCrossEntropyBackward0`); `weight`
    /// broadcasts to the input, and the weighted loss is rounded to the
    /// input's dtype (PyTorch's `loss.mul_(weight)`). Errors (PyTorch's
    /// messages): a target of another shape or dtype ("Found dtype Float
    /// but expected Double"), integer inputs, values outside [0, 1], a
    /// weight that does not broadcast.
    pub fn binary_cross_entropy(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        reduction: Reduction,
    ) -> Result<Tensor> {
        let name = "binary_cross_entropy";
        if target.shape() != self.shape() {
            return Err(Error::invalid(
                name,
                format!(
                    "Using a target size ({}) that is different to the input size ({}) is deprecated. Please ensure \
                     they have the same size.",
                    shape_str(target.shape()),
                    shape_str(self.shape())
                ),
            ));
        }
        match weight {
            Some(w) => {
                let s = broadcast_shapes(name, target.shape(), w.shape())?;
                let w = w.expand(s.as_slice())?;
                pointwise(PointLoss::Bce, self, target, reduction, &[&w], true, None)
            }
            None => pointwise(PointLoss::Bce, self, target, reduction, &[], false, None),
        }
    }

    /// Binary cross entropy of logits `self`
    /// (`F.binary_cross_entropy_with_logits`), computed stably through
    /// `log_sigmoid`: `-weight (pos_weight t log σ(x) + (1 - t) log(1 -
    /// σ(x)))`; `weight` and `pos_weight` (per class, the last dim)
    /// broadcast (node `BinaryCrossEntropyWithLogitsBackward0`). As in
    /// PyTorch, which computes `(1 - target).mul_(input)` in place, the
    /// loss has the target's dtype. Errors (PyTorch's messages): a target
    /// of another shape, an integer input, an integer or bool target,
    /// weights that do not broadcast.
    pub fn binary_cross_entropy_with_logits(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        pos_weight: Option<&Tensor>,
        reduction: Reduction,
    ) -> Result<Tensor> {
        if target.shape() != self.shape() {
            return Err(Error::invalid(
                "binary_cross_entropy_with_logits",
                format!(
                    "Target size ({}) must be the same as input size ({})",
                    shape_str(target.shape()),
                    shape_str(self.shape())
                ),
            ));
        }
        let extra: Vec<&Tensor> = weight.into_iter().chain(pos_weight).collect();
        pointwise(
            PointLoss::BceWithLogits {
                pos_weight: pos_weight.is_some(),
            },
            self,
            target,
            reduction,
            &extra,
            weight.is_some(),
            None,
        )
    }

    /// The Kullback-Leibler divergence of log-probabilities `self` from
    /// `target` (probabilities, or log-probabilities with `log_target`), as
    /// `torch.kl_div` (written in operators: `xlogy(t, t) - t * x`, or
    /// `exp(t) * (t - x)`); `F.kl_div`'s `'batchmean'` is the sum divided
    /// by the batch size (the nn crate's front end). Errors: integer
    /// inputs, shapes that do not broadcast.
    pub fn kl_div(&self, target: &Tensor, reduction: Reduction, log_target: bool) -> Result<Tensor> {
        if !self.dtype().is_floating_point() || !target.dtype().is_floating_point() {
            return Err(Error::invalid("kl_div", "kl_div: Integral inputs not supported."));
        }
        let out = if log_target {
            target.exp()?.mul(&target.sub(self)?)?
        } else {
            let zero = target.eq(0.0)?;
            let tlogt = target.mul(&target.log()?)?;
            let tlogt = crate::ops::binary::where_(
                &zero,
                Operand::Scalar(crate::Scalar::Float(0.0)),
                Operand::Tensor(&tlogt),
            )?;
            tlogt.sub(&target.mul(self)?)?
        };
        reduction.apply(&out)
    }
}
