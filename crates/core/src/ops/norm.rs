//! Normalisation operators with PyTorch's nodes: `native_layer_norm`
//! (`NativeLayerNormBackward0`), `native_group_norm`
//! (`NativeGroupNormBackward0`) and `native_batch_norm`
//! (`NativeBatchNormBackward0`, training with running statistics updated
//! in place, or evaluation with them), each returning the output and the
//! saved statistics; `rms_norm`, which PyTorch 2.15 composes on the CPU
//! (`pow`, `mean`, `add`, `rsqrt`, `mul`), is a front end in other ops.
//!
//! Backward: when the gradient is itself being recorded (`create_graph`),
//! the formula is written in differentiable operators with the statistics
//! recomputed from the input (PyTorch's
//! `infinitely_differentiable_native_group_norm_backward`, and what its
//! layer / batch norm double backward formulas compute), so higher
//! derivatives are exact; otherwise it is one fused operator
//! (`native_*_norm_backward`, a CPU kernel: rows of a layer norm, groups
//! of a group norm and channels of a batch norm in parallel, column sums
//! of the weight's gradient in fixed chunks of rows merged in order, so
//! the result does not depend on the thread count).
//!
//! The composite formulas also run the operators on backends without a
//! kernel of their own (the `AnyBackend` slot).

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call, downcast_op};
use crate::layout::Dims;
use crate::{DType, Error, IntoShape, Result, Tensor};

/// Dispatch table of `native_layer_norm` (outputs: result, mean, rstd).
pub static NATIVE_LAYER_NORM: OpEntry = OpEntry::differentiable("native_layer_norm");
/// Dispatch table of `native_layer_norm_backward` (the fused first derivative).
pub static NATIVE_LAYER_NORM_BACKWARD: OpEntry = OpEntry::new("native_layer_norm_backward");
/// Dispatch table of `native_group_norm` (outputs: result, mean, rstd).
pub static NATIVE_GROUP_NORM: OpEntry = OpEntry::differentiable("native_group_norm");
/// Dispatch table of `native_group_norm_backward`.
pub static NATIVE_GROUP_NORM_BACKWARD: OpEntry = OpEntry::new("native_group_norm_backward");
/// Dispatch table of `native_batch_norm` (outputs: result, save_mean, save_invstd).
pub static NATIVE_BATCH_NORM: OpEntry = OpEntry::differentiable("native_batch_norm");
/// Dispatch table of `native_batch_norm_backward`.
pub static NATIVE_BATCH_NORM_BACKWARD: OpEntry = OpEntry::new("native_batch_norm_backward");

/// Which normalisation a [`Norm`] or [`NormBackward`] computes.
#[derive(Debug, Clone, PartialEq)]
pub enum NormKind {
    /// Layer norm over the trailing dims `normalized` (the inner size is
    /// their product).
    Layer {
        /// `normalized_shape`.
        normalized: Dims,
    },
    /// Group norm of an input `[N, C, *]` in `groups` groups of channels.
    Group {
        /// Number of groups (divides C).
        groups: usize,
    },
    /// Batch norm of an input `[N, C, *]` per channel.
    Batch {
        /// Normalise with the batch's statistics (and update the running
        /// ones, when given); otherwise with the running statistics.
        training: bool,
        /// Weight of the batch statistics in the running ones' update.
        momentum: f64,
    },
}

/// A normalisation operator: inputs `[input, weight?, bias?]`, for batch
/// norm then `[running_mean?, running_var?]`; outputs the result and the
/// statistics (mean and reciprocal standard deviation: `[*lead, 1, ...]`
/// for layer norm, `[N, groups]` for group norm, `[C]` for batch norm in
/// training and empty in evaluation), in f32 for f16/bf16 inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Norm {
    /// Which normalisation.
    pub kind: NormKind,
    /// Added to the variance.
    pub eps: f64,
    /// A weight (scale) is given.
    pub weight: bool,
    /// A bias (shift) is given.
    pub bias: bool,
    /// Batch norm: running statistics are given.
    pub running: bool,
}

impl Norm {
    fn name(&self) -> &'static str {
        match self.kind {
            NormKind::Layer { .. } => "layer_norm",
            NormKind::Group { .. } => "group_norm",
            NormKind::Batch { .. } => "batch_norm",
        }
    }

    /// Index of the bias among the inputs.
    fn bias_at(&self) -> usize {
        1 + self.weight as usize
    }

    /// Index of the running mean among the inputs.
    fn running_at(&self) -> usize {
        1 + self.weight as usize + self.bias as usize
    }

    /// The shape of the statistics for an input of `shape`.
    fn stats_shape(&self, shape: &[usize]) -> Dims {
        match &self.kind {
            NormKind::Layer { normalized } => {
                let axis = shape.len() - normalized.len();
                shape[..axis]
                    .iter()
                    .copied()
                    .chain(normalized.iter().map(|_| 1))
                    .collect()
            }
            NormKind::Group { groups } => Dims::from_slice(&[shape[0], *groups]),
            NormKind::Batch { training: true, .. } => Dims::from_slice(&[shape[1]]),
            NormKind::Batch { training: false, .. } => Dims::from_slice(&[0]),
        }
    }

    /// The shape weight and bias must have.
    fn param_shape(&self, shape: &[usize]) -> Dims {
        match &self.kind {
            NormKind::Layer { normalized } => normalized.clone(),
            _ => Dims::from_slice(&[shape[1]]),
        }
    }
}

/// The dtype of the statistics of a `dtype` input.
fn stats_dtype(dtype: DType) -> DType {
    if matches!(dtype, DType::F16 | DType::BF16) {
        DType::F32
    } else {
        dtype
    }
}

fn shape_str(s: &[usize]) -> String {
    format!("{s:?}")
}

impl Op for Norm {
    fn entry(&self) -> &'static OpEntry {
        match self.kind {
            NormKind::Layer { .. } => &NATIVE_LAYER_NORM,
            NormKind::Group { .. } => &NATIVE_GROUP_NORM,
            NormKind::Batch { .. } => &NATIVE_BATCH_NORM,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let name = self.name();
        let x = inputs[0];
        if !x.dtype().is_floating_point() {
            return Err(Error::dtype(name, x.dtype(), "expects a floating-point input"));
        }
        let shape = x.shape();
        match &self.kind {
            NormKind::Layer { normalized } => check_layer_shape(name, shape, normalized, ", ")?,
            NormKind::Group { groups } => check_group_shape(shape, *groups)?,
            NormKind::Batch { training, .. } => {
                if shape.len() < 2 {
                    return Err(Error::invalid(
                        name,
                        format!(
                            "expected an input of 2 or more dims [N, C, *], got {}",
                            shape_str(shape)
                        ),
                    ));
                }
                if !training && !self.running {
                    return Err(Error::invalid(name, "running_mean must be defined in evaluation mode"));
                }
            }
        }
        let want = self.param_shape(shape);
        let mut params: Vec<(&str, &Tensor)> = Vec::new();
        if self.weight {
            params.push(("weight", inputs[1]));
        }
        if self.bias {
            params.push(("bias", inputs[self.bias_at()]));
        }
        if self.running {
            params.push(("running_mean", inputs[self.running_at()]));
            params.push(("running_var", inputs[self.running_at() + 1]));
        }
        for (what, p) in params {
            if p.dtype() != x.dtype() {
                return Err(Error::DTypeMismatch {
                    op: name,
                    detail: format!("expected {what} of dtype {}, got {}", x.dtype(), p.dtype()),
                });
            }
            let ok = match self.kind {
                NormKind::Layer { .. } => p.shape() == want.as_slice(),
                _ => p.ndim() == 1 && p.numel() == want[0],
            };
            if !ok {
                return Err(Error::invalid(
                    name,
                    match (&self.kind, what) {
                        (NormKind::Layer { .. }, _) => format!(
                            "Expected {what} to be of same shape as normalized_shape, but got {what} of shape {} and \
                             normalized_shape = {}",
                            shape_str(p.shape()),
                            shape_str(&want)
                        ),
                        (NormKind::Group { .. }, _) => format!(
                            "Expected {what} to be a vector of size equal to the number of channels in input, but got \
                             {what} of shape {} and input of shape {}",
                            shape_str(p.shape()),
                            shape_str(shape)
                        ),
                        _ => format!("{what} should contain {} elements not {}", want[0], p.numel()),
                    },
                ));
            }
        }
        let sd = stats_dtype(x.dtype());
        let stats = self.stats_shape(shape);
        Ok(smallvec::smallvec![
            OutSpec::new(x.dims(), x.dtype()),
            OutSpec::new(stats.clone(), sd),
            OutSpec::new(stats, sd),
        ])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        !(self.running && i >= self.running_at())
    }

    fn saves(&self) -> Saves {
        let mut inputs = 1 | (self.weight as u64) << 1;
        let eval = matches!(self.kind, NormKind::Batch { training: false, .. });
        if eval {
            let r = self.running_at();
            inputs |= 0b11 << r;
        }
        Saves {
            inputs,
            outputs: if eval { 0 } else { 0b110 },
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let n_in = ctx.num_inputs();
        let mut out = vec![None; n_in];
        let Some(g) = grads.first().cloned().flatten() else {
            return Ok(out);
        };
        let mask = [
            ctx.needs_grad(0),
            self.weight && ctx.needs_grad(1),
            self.bias && ctx.needs_grad(self.bias_at()),
        ];
        let x = ctx.input(0)?;
        let w = self.weight.then(|| ctx.input(1)).transpose()?;
        let (dx, dw, db) = if crate::autograd::is_grad_enabled() {
            let running = match self.kind {
                NormKind::Batch { training: false, .. } => {
                    Some((ctx.input(self.running_at())?, ctx.input(self.running_at() + 1)?))
                }
                _ => None,
            };
            composite_backward(self, &g, &x, w.as_ref(), running.as_ref(), mask)?
        } else {
            let (s0, s1) = match self.kind {
                NormKind::Batch { training: false, .. } => {
                    (ctx.input(self.running_at())?, ctx.input(self.running_at() + 1)?)
                }
                _ => (ctx.output(1)?, ctx.output(2)?),
            };
            let op = NormBackward {
                norm: self.clone(),
                mask,
            };
            let mut ins = vec![&g, &x, &s0, &s1];
            if let Some(w) = &w {
                ins.push(w);
            }
            let mut r = call(&op, &ins)?.into_iter();
            let (a, b, c) = (r.next(), r.next(), r.next());
            (a.filter(|_| mask[0]), b.filter(|_| mask[1]), c.filter(|_| mask[2]))
        };
        out[0] = dx;
        if self.weight {
            out[1] = dw;
        }
        if self.bias {
            out[self.bias_at()] = db;
        }
        Ok(out)
    }
}

/// `input` must end in `normalized` (PyTorch's message; `sep` is `", "`
/// for layer norm and `""` for rms norm, as PyTorch prints them).
fn check_layer_shape(name: &'static str, shape: &[usize], normalized: &[usize], sep: &str) -> Result<()> {
    if normalized.is_empty() {
        return Err(Error::invalid(
            name,
            "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got \
             normalized_shape = []",
        ));
    }
    if shape.len() < normalized.len() || shape[shape.len() - normalized.len()..] != *normalized {
        let ns = normalized.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ");
        return Err(Error::invalid(
            name,
            format!(
                "Given normalized_shape=[{ns}], expected input with shape [*{sep}{ns}], but got input of size{}",
                shape_str(shape)
            ),
        ));
    }
    Ok(())
}

fn check_group_shape(shape: &[usize], groups: usize) -> Result<()> {
    if shape.len() < 2 {
        return Err(Error::invalid(
            "group_norm",
            format!(
                "Expected at least 2 dimensions for input tensor but received {}",
                shape.len()
            ),
        ));
    }
    if groups == 0 || !shape[1].is_multiple_of(groups) {
        return Err(Error::invalid(
            "group_norm",
            format!(
                "Expected number of channels in input to be divisible by num_groups, but got input of shape {} and \
                 num_groups={groups}",
                shape_str(shape)
            ),
        ));
    }
    Ok(())
}

/// The fused first derivative of a [`Norm`]: inputs `[grad, input, s0,
/// s1, weight?]` where `s0`, `s1` are the forward's mean and rstd (for
/// batch norm in evaluation: the running mean and variance); outputs the
/// gradients of input, weight and bias, each empty (`[0]`) where `mask`
/// does not ask for it. Not differentiable: backward formulas call it
/// only when the gradient is not recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct NormBackward {
    /// The forward operator.
    pub norm: Norm,
    /// Which gradients to compute (input, weight, bias).
    pub mask: [bool; 3],
}

impl Op for NormBackward {
    fn entry(&self) -> &'static OpEntry {
        match self.norm.kind {
            NormKind::Layer { .. } => &NATIVE_LAYER_NORM_BACKWARD,
            NormKind::Group { .. } => &NATIVE_GROUP_NORM_BACKWARD,
            NormKind::Batch { .. } => &NATIVE_BATCH_NORM_BACKWARD,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let name = self.entry().base_name();
        let (g, x) = (inputs[0], inputs[1]);
        if g.shape() != x.shape() || g.dtype() != x.dtype() || !x.dtype().is_floating_point() {
            return Err(Error::shape(
                name,
                g.shape(),
                x.shape(),
                "grad and input must have one shape and float dtype",
            ));
        }
        if inputs.len() != 4 + self.norm.weight as usize {
            return Err(Error::invalid(name, "expected [grad, input, mean, rstd, weight?]"));
        }
        let param = self.norm.param_shape(x.shape());
        let pick = |on: bool, s: Dims| if on { s } else { Dims::from_slice(&[0]) };
        Ok(smallvec::smallvec![
            OutSpec::new(pick(self.mask[0], x.dims()), x.dtype()),
            OutSpec::new(pick(self.mask[1], param.clone()), x.dtype()),
            OutSpec::new(pick(self.mask[2], param), x.dtype()),
        ])
    }
}

/// `(x - mean) * rstd` over `dims` and `rstd` (kept dims), in operators.
fn standardize(x: &Tensor, dims: &[i64], eps: f64) -> Result<(Tensor, Tensor, Tensor)> {
    let mean = x.mean_dim(dims, true)?;
    let xc = x.sub(&mean)?;
    let var = xc.mul(&xc)?.mean_dim(dims, true)?;
    let rstd = var.add(eps)?.rsqrt()?;
    Ok((xc.mul(&rstd)?, mean, rstd))
}

/// The gradient of `standardize(x)` given the upstream gradient `gx` of
/// `xhat`: `rstd * (gx - mean(gx) - xhat * mean(gx * xhat))`.
fn standardize_backward(gx: &Tensor, xhat: &Tensor, rstd: &Tensor, dims: &[i64]) -> Result<Tensor> {
    let a = gx.mean_dim(dims, true)?;
    let b = gx.mul(xhat)?.mean_dim(dims, true)?;
    rstd.mul(&gx.sub(&a)?.sub(&xhat.mul(&b)?)?)
}

/// Sums over `dims`; the identity when there are none.
fn sum_over(t: &Tensor, dims: &[i64]) -> Result<Tensor> {
    if dims.is_empty() {
        Ok(t.clone())
    } else {
        t.sum_dim(dims, false)
    }
}

/// A per-channel parameter `[C]` shaped to broadcast over `[N, C, *]`.
fn channel_view(p: &Tensor, ndim: usize) -> Result<Tensor> {
    let mut s = vec![1i64; ndim];
    s[1] = -1;
    p.reshape(s)
}

/// The dims a norm reduces over (layer norm: the normalised ones; batch
/// norm: all but the channels) and those its parameters' gradients sum
/// over (the others).
fn dims_of(kind: &NormKind, ndim: usize) -> (Vec<i64>, Vec<i64>) {
    let all = 0..ndim as i64;
    match kind {
        NormKind::Layer { normalized } => {
            let axis = (ndim - normalized.len()) as i64;
            (
                all.clone().filter(|&d| d >= axis).collect(),
                all.filter(|&d| d < axis).collect(),
            )
        }
        _ => {
            let red: Vec<i64> = all.filter(|&d| d != 1).collect();
            (red.clone(), red)
        }
    }
}

/// The forward in operators: result, mean and rstd (the statistics in the
/// shapes and dtype of [`Norm::infer`]).
fn composite_forward(op: &Norm, x: &Tensor, w: Option<&Tensor>, b: Option<&Tensor>) -> Result<Tensors> {
    let dtype = x.dtype();
    let xf = x.to_dtype(stats_dtype(dtype))?;
    let nd = x.ndim();
    let shape = x.shape().to_vec();
    let affine = |y: Tensor| -> Result<Tensor> {
        let per_channel = !matches!(op.kind, NormKind::Layer { .. });
        let prep = |p: &Tensor| {
            if per_channel {
                channel_view(p, nd)
            } else {
                Ok(p.clone())
            }
        };
        let y = match w {
            Some(w) => y.mul(&prep(w)?)?,
            None => y,
        };
        match b {
            Some(b) => y.add(&prep(b)?),
            None => Ok(y),
        }
    };
    let (y, mean, rstd) = match &op.kind {
        NormKind::Layer { .. } => {
            let (red, _) = dims_of(&op.kind, nd);
            let (xhat, mean, rstd) = standardize(&xf, &red, op.eps)?;
            (xhat, mean, rstd)
        }
        NormKind::Group { groups } => {
            let xg = xf.reshape([shape[0] as i64, *groups as i64, -1])?;
            let (xhat, mean, rstd) = standardize(&xg, &[2], op.eps)?;
            (
                xhat.reshape(shape.as_slice())?,
                mean.squeeze_dims([2])?,
                rstd.squeeze_dims([2])?,
            )
        }
        NormKind::Batch { .. } => {
            let (red, _) = dims_of(&op.kind, nd);
            let (xhat, mean, rstd) = standardize(&xf, &red, op.eps)?;
            (xhat, mean.reshape([-1])?, rstd.reshape([-1])?)
        }
    };
    let y = affine(y.to_dtype(dtype)?)?;
    Ok(smallvec::smallvec![y, mean, rstd])
}

/// The first derivative in operators, differentiable (statistics
/// recomputed from `x`); `running` holds batch norm's running mean and
/// variance in evaluation.
fn composite_backward(
    op: &Norm,
    g: &Tensor,
    x: &Tensor,
    w: Option<&Tensor>,
    running: Option<&(Tensor, Tensor)>,
    mask: [bool; 3],
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    let nd = x.ndim();
    let shape = x.shape().to_vec();
    let (red, outer) = dims_of(&op.kind, nd);
    let per_channel = !matches!(op.kind, NormKind::Layer { .. });
    let wb = match w {
        Some(w) if per_channel => Some(channel_view(w, nd)?),
        Some(w) => Some(w.clone()),
        None => None,
    };
    let gx = match &wb {
        Some(w) => g.mul(w)?,
        None => g.clone(),
    };
    let (dx, xhat) = match (&op.kind, running) {
        (NormKind::Batch { training: false, .. }, Some((rm, rv))) => {
            let invstd = channel_view(&rv.add(op.eps)?.rsqrt()?, nd)?;
            let xhat = x.sub(&channel_view(rm, nd)?)?.mul(&invstd)?;
            (gx.mul(&invstd)?, xhat)
        }
        (NormKind::Group { groups }, _) => {
            let gs = [shape[0] as i64, *groups as i64, -1];
            let (xhat, _, rstd) = standardize(&x.reshape(gs)?, &[2], op.eps)?;
            let dx = standardize_backward(&gx.reshape(gs)?, &xhat, &rstd, &[2])?;
            (dx.reshape(shape.as_slice())?, xhat.reshape(shape.as_slice())?)
        }
        _ => {
            let (xhat, _, rstd) = standardize(x, &red, op.eps)?;
            (standardize_backward(&gx, &xhat, &rstd, &red)?, xhat)
        }
    };
    let dw = if mask[1] {
        Some(sum_over(&g.mul(&xhat)?, &outer)?)
    } else {
        None
    };
    let db = if mask[2] { Some(sum_over(g, &outer)?) } else { None };
    Ok((mask[0].then_some(dx), dw, db))
}

/// The `AnyBackend` kernel of the forward operators.
fn norm_composite_kernel(call: &Call) -> Result<Tensors> {
    let op: &Norm = downcast_op(call.op)?;
    op.infer(call.inputs)?;
    let x = call.inputs[0];
    let w = op.weight.then(|| call.inputs[1]);
    let b = op.bias.then(|| call.inputs[op.bias_at()]);
    match op.kind {
        NormKind::Batch { training: false, .. } => {
            let r = op.running_at();
            let (rm, rv) = (call.inputs[r], call.inputs[r + 1]);
            let nd = x.ndim();
            let invstd = channel_view(&rv.add(op.eps)?.rsqrt()?, nd)?;
            let mut y = x.sub(&channel_view(rm, nd)?)?.mul(&invstd)?;
            if let Some(w) = w {
                y = y.mul(&channel_view(w, nd)?)?;
            }
            if let Some(b) = b {
                y = y.add(&channel_view(b, nd)?)?;
            }
            let empty = crate::TensorOptions::like(x).dtype(stats_dtype(x.dtype())).zeros([0])?;
            Ok(smallvec::smallvec![y, empty.clone(), empty])
        }
        NormKind::Batch {
            training: true,
            momentum,
        } => {
            let out = composite_forward(op, x, w, b)?;
            if op.running {
                let r = op.running_at();
                let (rm, rv) = (call.inputs[r], call.inputs[r + 1]);
                let (red, _) = dims_of(&op.kind, x.ndim());
                let var = x.var_dim(red, 1.0, false)?;
                rm.mul_(1.0 - momentum)?.add_(&out[1].mul(momentum)?)?;
                rv.mul_(1.0 - momentum)?.add_(&var.mul(momentum)?)?;
            }
            Ok(out)
        }
        _ => composite_forward(op, x, w, b),
    }
}

/// The `AnyBackend` kernel of the fused backward operators.
fn norm_backward_composite_kernel(call: &Call) -> Result<Tensors> {
    let op: &NormBackward = downcast_op(call.op)?;
    op.infer(call.inputs)?;
    let (g, x) = (call.inputs[0], call.inputs[1]);
    let w = op.norm.weight.then(|| call.inputs[4]);
    let running = match op.norm.kind {
        NormKind::Batch { training: false, .. } => Some((call.inputs[2].clone(), call.inputs[3].clone())),
        _ => None,
    };
    let (dx, dw, db) = composite_backward(&op.norm, g, x, w, running.as_ref(), op.mask)?;
    let empty = || crate::TensorOptions::like(x).zeros([0]);
    Ok(smallvec::smallvec![
        dx.map_or_else(empty, Ok)?,
        dw.map_or_else(empty, Ok)?,
        db.map_or_else(empty, Ok)?
    ])
}

/// Registers the composite kernels for backends without their own.
pub(crate) fn register() -> Result<()> {
    for e in [&NATIVE_LAYER_NORM, &NATIVE_GROUP_NORM, &NATIVE_BATCH_NORM] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(norm_composite_kernel))?;
    }
    for e in [
        &NATIVE_LAYER_NORM_BACKWARD,
        &NATIVE_GROUP_NORM_BACKWARD,
        &NATIVE_BATCH_NORM_BACKWARD,
    ] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(norm_backward_composite_kernel))?;
    }
    Ok(())
}

fn three(r: Tensors) -> Result<(Tensor, Tensor, Tensor)> {
    let mut it = r.into_iter();
    match (it.next(), it.next(), it.next()) {
        (Some(a), Some(b), Some(c)) => Ok((a, b, c)),
        _ => Err(Error::invalid("norm", "operator returned fewer than three outputs")),
    }
}

fn to_sizes(name: &'static str, shape: impl IntoShape) -> Result<Dims> {
    shape
        .into_shape()
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| Error::invalid(name, format!("normalized_shape has a negative size {d}")))
        })
        .collect()
}

/// PyTorch's CPU mixed type: an f16 / bf16 input whose parameters (and
/// running statistics) are all f32 is normalised in f32 and the result
/// rounded to the input's dtype (its kernels read the input as f32).
fn mixed_dtype(x: &Tensor, params: &[Option<&Tensor>]) -> bool {
    let mut given = params.iter().flatten().peekable();
    matches!(x.dtype(), DType::F16 | DType::BF16) && given.peek().is_some() && given.all(|p| p.dtype() == DType::F32)
}

fn inputs_of<'a>(x: &'a Tensor, params: &[Option<&'a Tensor>]) -> Vec<&'a Tensor> {
    std::iter::once(x).chain(params.iter().flatten().copied()).collect()
}

/// # Normalisation
///
/// Layer, group, batch and RMS normalisation (`F.layer_norm` & co.).
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([[1.0f32, 2.0, 3.0], [2.0, 4.0, 6.0]])?;
/// let y = x.layer_norm([3], None, None, 1e-5)?;
/// assert!(y.sum()?.item::<f32>()?.abs() < 1e-5);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// Layer normalisation over the trailing dims `normalized_shape`
    /// (`F.layer_norm`): `(x - mean) / sqrt(var + eps) * weight + bias`,
    /// with the biased variance; node `NativeLayerNormBackward0`. Errors:
    /// an input that does not end in `normalized_shape`, an empty
    /// `normalized_shape`, weight or bias of another shape or dtype, an
    /// integer input (PyTorch's messages).
    pub fn layer_norm(
        &self,
        normalized_shape: impl IntoShape,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        if mixed_dtype(self, &[weight, bias]) {
            let shape = normalized_shape.into_shape();
            return self
                .to_dtype(DType::F32)?
                .layer_norm(shape, weight, bias, eps)?
                .to_dtype(self.dtype());
        }
        Ok(self.native_layer_norm(normalized_shape, weight, bias, eps)?.0)
    }

    /// `torch.native_layer_norm`: the result of [`Tensor::layer_norm`], the
    /// mean and the reciprocal standard deviation (shape `[*lead, 1, ...]`;
    /// f32 for f16/bf16 inputs). Errors as [`Tensor::layer_norm`].
    pub fn native_layer_norm(
        &self,
        normalized_shape: impl IntoShape,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let normalized = to_sizes("layer_norm", normalized_shape)?;
        let op = Norm {
            kind: NormKind::Layer { normalized },
            eps,
            weight: weight.is_some(),
            bias: bias.is_some(),
            running: false,
        };
        three(call(&op, &inputs_of(self, &[weight, bias]))?)
    }

    /// Group normalisation (`F.group_norm`) of an input `[N, C, *]`: the
    /// channels are split into `num_groups` groups, each `(n, group)`
    /// standardised over its channels and positions, then scaled and
    /// shifted per channel by `weight` / `bias` (`[C]`); node
    /// `NativeGroupNormBackward0`. Errors: fewer than 2 dims, `C` not
    /// divisible by `num_groups`, parameters not of size `C`, an integer
    /// input.
    pub fn group_norm(
        &self,
        num_groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        if mixed_dtype(self, &[weight, bias]) {
            return self
                .to_dtype(DType::F32)?
                .group_norm(num_groups, weight, bias, eps)?
                .to_dtype(self.dtype());
        }
        Ok(self.native_group_norm(num_groups, weight, bias, eps)?.0)
    }

    /// `torch.native_group_norm`: the result of [`Tensor::group_norm`], the
    /// mean and the reciprocal standard deviation per `(n, group)` (`[N,
    /// num_groups]`). Errors as [`Tensor::group_norm`].
    pub fn native_group_norm(
        &self,
        num_groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        check_group_shape(self.shape(), num_groups)?;
        let op = Norm {
            kind: NormKind::Group { groups: num_groups },
            eps,
            weight: weight.is_some(),
            bias: bias.is_some(),
            running: false,
        };
        three(call(&op, &inputs_of(self, &[weight, bias]))?)
    }

    /// Batch normalisation (`F.batch_norm`) of an input `[N, C, *]` per
    /// channel. In training (`training`), with the batch's mean and biased
    /// variance; the running statistics, when given, are updated in place
    /// (`running = momentum * batch + (1 - momentum) * running`, the
    /// variance unbiased, as PyTorch). Otherwise with the running
    /// statistics. Node `NativeBatchNormBackward0`. Errors: fewer than 2
    /// dims, one value per channel in training, running statistics missing
    /// in evaluation or given one without the other, parameters or
    /// statistics not of size `C` (PyTorch's messages).
    #[allow(clippy::too_many_arguments)]
    pub fn batch_norm(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<Tensor> {
        if training {
            let per_channel = self.numel() / self.shape().get(1).copied().unwrap_or(1).max(1);
            if self.ndim() >= 2 && per_channel == 1 {
                return Err(Error::invalid(
                    "batch_norm",
                    format!(
                        "Expected more than 1 value per channel when training, got input size {}",
                        shape_str(self.shape())
                    ),
                ));
            }
        }
        if mixed_dtype(self, &[weight, bias, running_mean, running_var]) {
            return self
                .to_dtype(DType::F32)?
                .batch_norm(running_mean, running_var, weight, bias, training, momentum, eps)?
                .to_dtype(self.dtype());
        }
        Ok(self
            .native_batch_norm(running_mean, running_var, weight, bias, training, momentum, eps)?
            .0)
    }

    /// `torch.native_batch_norm`: the result of [`Tensor::batch_norm`] and
    /// the batch's mean and reciprocal standard deviation (`[C]`; empty in
    /// evaluation). Errors as [`Tensor::batch_norm`], without the check for
    /// one value per channel.
    #[allow(clippy::too_many_arguments)]
    pub fn native_batch_norm(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        if running_mean.is_some() != running_var.is_some() {
            return Err(Error::invalid(
                "batch_norm",
                "running_mean and running_var must be given together",
            ));
        }
        for r in [running_mean, running_var].into_iter().flatten() {
            if r.requires_grad() && training {
                return Err(Error::invalid(
                    "batch_norm",
                    "running statistics updated in place must not require grad",
                ));
            }
        }
        let op = Norm {
            kind: NormKind::Batch { training, momentum },
            eps,
            weight: weight.is_some(),
            bias: bias.is_some(),
            running: running_mean.is_some(),
        };
        three(call(&op, &inputs_of(self, &[weight, bias, running_mean, running_var]))?)
    }

    /// Root-mean-square normalisation over the trailing dims
    /// `normalized_shape` (`F.rms_norm`): `x * rsqrt(mean(x²) + eps) *
    /// weight`, computed in f32 for f16/bf16 inputs; `eps` `None` is the
    /// dtype's machine epsilon. Written in operators as PyTorch 2.15's CPU
    /// version (nodes `MulBackward0`, `RsqrtBackward0`, `AddBackward1`,
    /// `MeanBackward1`, `PowBackward0`). Errors: an input that does not
    /// end in `normalized_shape`, a weight of another shape, an integer
    /// input.
    pub fn rms_norm(
        &self,
        normalized_shape: impl IntoShape,
        weight: Option<&Tensor>,
        eps: Option<f64>,
    ) -> Result<Tensor> {
        let normalized = to_sizes("rms_norm", normalized_shape)?;
        check_layer_shape("rms_norm", self.shape(), &normalized, "")?;
        if !self.dtype().is_floating_point() {
            return Err(Error::dtype("rms_norm", self.dtype(), "expects a floating-point input"));
        }
        if let Some(w) = weight
            && w.shape() != normalized.as_slice()
        {
            return Err(Error::invalid(
                "rms_norm",
                format!(
                    "Expected weight to be of same shape as normalized_shape, but got weight of shape {} and \
                     normalized_shape = {}",
                    shape_str(w.shape()),
                    shape_str(&normalized)
                ),
            ));
        }
        let dtype = self.dtype();
        let up = stats_dtype(dtype);
        let eps = eps.unwrap_or(if up == DType::F64 {
            f64::EPSILON
        } else {
            f32::EPSILON as f64
        });
        let x = self.to_dtype(up)?;
        let dims: Vec<i64> = (self.ndim() - normalized.len()..self.ndim())
            .map(|d| d as i64)
            .collect();
        let r = x.pow(2)?.mean_dim(dims, true)?.add(eps)?.rsqrt()?;
        let mut y = x.mul(&r)?;
        if let Some(w) = weight {
            y = y.mul(w)?;
        }
        y.to_dtype(dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TensorOptions;

    /// The largest absolute difference of two tensors of one shape.
    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        assert_eq!(a.shape(), b.shape());
        let (a, b) = (a.to_dtype(DType::F64).unwrap(), b.to_dtype(DType::F64).unwrap());
        let (a, b) = (a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
        a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
    }

    /// The `AnyBackend` composite (what a backend without its own norm
    /// kernels runs) gives the CPU kernel's outputs and running statistics:
    /// batch norm in training (running statistics updated with the unbiased
    /// variance), in evaluation, layer and group norm, f32 and f64.
    #[test]
    fn composite_kernel_matches_the_cpu_kernel() {
        for dtype in [DType::F32, DType::F64] {
            let o = TensorOptions::new().dtype(dtype);
            let x = o.randn([4, 3, 5]).unwrap();
            let (w, b) = (o.randn([3]).unwrap(), o.randn([3]).unwrap());
            let rm = o.randn([3]).unwrap();
            let rv = o.rand([3]).unwrap().add(0.5).unwrap();
            let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
            let batch = |training| Norm {
                kind: NormKind::Batch {
                    training,
                    momentum: 0.25,
                },
                eps: 1e-5,
                weight: true,
                bias: true,
                running: true,
            };
            for training in [true, false] {
                let op = batch(training);
                let (rm_cpu, rv_cpu) = (rm.clone_tensor().unwrap(), rv.clone_tensor().unwrap());
                let (rm_any, rv_any) = (rm.clone_tensor().unwrap(), rv.clone_tensor().unwrap());
                let cpu = call(&op, &[&x, &w, &b, &rm_cpu, &rv_cpu]).unwrap();
                let inputs = [&x, &w, &b, &rm_any, &rv_any];
                let any = norm_composite_kernel(&Call {
                    op: &op,
                    inputs: &inputs,
                    out: None,
                })
                .unwrap();
                assert!(
                    max_diff(&cpu[0], &any[0]) < tol,
                    "batch_norm (training {training}) output"
                );
                if training {
                    assert!(max_diff(&cpu[1], &any[1]) < tol, "batch_norm mean");
                }
                // Both running statistics moved, each by its own statistic.
                assert!(max_diff(&rm_cpu, &rm_any) < tol, "running_mean (training {training})");
                assert!(max_diff(&rv_cpu, &rv_any) < tol, "running_var (training {training})");
                assert_eq!(max_diff(&rm, &rm_any) > 1e-3, training, "running_mean moved");
                assert_eq!(max_diff(&rv, &rv_any) > 1e-3, training, "running_var moved");
            }
            for kind in [
                NormKind::Layer {
                    normalized: Dims::from_slice(&[5]),
                },
                NormKind::Group { groups: 3 },
            ] {
                let w = if matches!(kind, NormKind::Layer { .. }) {
                    o.randn([5]).unwrap()
                } else {
                    w.clone()
                };
                let op = Norm {
                    kind,
                    eps: 1e-5,
                    weight: true,
                    bias: false,
                    running: false,
                };
                let cpu = call(&op, &[&x, &w]).unwrap();
                let inputs = [&x, &w];
                let any = norm_composite_kernel(&Call {
                    op: &op,
                    inputs: &inputs,
                    out: None,
                })
                .unwrap();
                for (i, (c, a)) in cpu.iter().zip(&any).enumerate() {
                    assert!(max_diff(c, a) < tol, "{:?} output {i}", op.kind);
                }
            }
        }
    }
}
