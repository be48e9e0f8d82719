//! Convolutions, as PyTorch's `aten::convolution`: one operator for 1-d and
//! 2-d convolutions, transposed or not, with stride, padding, dilation,
//! output padding and groups (node `ConvolutionBackward0`), and
//! `convolution_backward`, the three gradients (input, weight, bias) as one
//! operator whose own backward is written in these two operators again
//! (node `ConvolutionBackwardBackward0`), so every order of derivative
//! exists. Front ends: [`Tensor::conv1d`], [`Tensor::conv2d`],
//! [`Tensor::conv_transpose1d`], [`Tensor::conv_transpose2d`] with
//! PyTorch's keyword defaults in [`ConvOptions`] / [`ConvTransposeOptions`],
//! and [`Tensor::convolution`] for the operator itself.
//!
//! The CPU kernel is in `backend/cpu/conv.rs` (im2col and the GEMM).

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call, call1};
use crate::layout::Dims;
use crate::shape_arg::{IntoShape, ShapeVec};
use crate::{DType, Error, Result, Tensor, TensorOptions};

/// Dispatch table of `convolution` (PyTorch's `aten::convolution`; node
/// `ConvolutionBackward0`).
pub static CONVOLUTION: OpEntry = OpEntry::differentiable("convolution");
/// Dispatch table of `convolution_backward` (node
/// `ConvolutionBackwardBackward0`).
pub static CONVOLUTION_BACKWARD: OpEntry = OpEntry::differentiable("convolution_backward");

/// The non-tensor arguments of `aten::convolution`, one value per spatial
/// dim (1 or 2 of them) in each list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvParams {
    /// Step of the kernel over the input (of the output's positions over
    /// the input, for a transposed convolution).
    pub stride: Dims,
    /// Zeros added on both sides of each spatial dim of the input (taken
    /// off the output of a transposed convolution).
    pub padding: Dims,
    /// Spacing of the kernel's taps.
    pub dilation: Dims,
    /// A transposed convolution (the gradient of a convolution with
    /// respect to its input).
    pub transposed: bool,
    /// Extra size added on one side of a transposed convolution's output.
    pub output_padding: Dims,
    /// Number of groups the channels are split into.
    pub groups: usize,
}

impl ConvParams {
    /// Number of spatial dims.
    pub fn spatial(&self) -> usize {
        self.stride.len()
    }
}

/// `convolution(input, weight, bias?)`: inputs `[input, weight]` or
/// `[input, weight, bias]`, with `input: [N, C_in, *spatial]` and `weight:
/// [C_out, C_in / groups, *kernel]` (transposed: `[C_in, C_out / groups,
/// *kernel]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Convolution {
    /// The convolution's arguments.
    pub params: ConvParams,
}

/// Validates a convolution's arguments and returns its output shape, with
/// PyTorch's checks and messages (`check_shape_forward` and the transposed
/// kernels' shape checks).
pub(crate) fn conv_output_shape(p: &ConvParams, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Dims> {
    const OP: &str = "convolution";
    let k = p.spatial();
    if !(1..=2).contains(&k)
        || p.padding.len() != k
        || p.dilation.len() != k
        || (p.transposed && p.output_padding.len() != k)
    {
        return Err(Error::invalid(
            OP,
            format!(
                "expected stride, padding, dilation (and output_padding) with one value per spatial dim (1 or 2), got \
                 stride={:?}, padding={:?}, dilation={:?}, output_padding={:?}",
                p.stride.as_slice(),
                p.padding.as_slice(),
                p.dilation.as_slice(),
                p.output_padding.as_slice()
            ),
        ));
    }
    if x.dtype() == DType::Bool {
        let kernel = if p.transposed {
            "slow_conv_transpose2d_out_cpu"
        } else {
            "slow_conv2d_cpu"
        };
        return Err(Error::dtype(
            OP,
            x.dtype(),
            format!("\"{kernel}\" not implemented for 'Bool'"),
        ));
    }
    if w.dtype() != x.dtype() {
        return Err(Error::DTypeMismatch {
            op: OP,
            detail: format!(
                "expected scalar type {} but found {}",
                x.dtype().scalar_type_name(),
                w.dtype().scalar_type_name()
            ),
        });
    }
    if let Some(b) = bias
        && b.dtype() != x.dtype()
    {
        return Err(Error::DTypeMismatch {
            op: OP,
            detail: format!(
                "Input type ({}) and bias type ({}) should be the same",
                x.dtype().cpp_type_name(),
                b.dtype().cpp_type_name()
            ),
        });
    }
    if p.transposed && x.dtype().is_integral(false) && x.dtype() != DType::I64 {
        return Err(Error::dtype(
            OP,
            x.dtype(),
            format!(
                "\"slow_conv_transpose2d_out_cpu\" not implemented for '{}'",
                x.dtype().scalar_type_name()
            ),
        ));
    }
    if p.stride.contains(&0) {
        return Err(Error::invalid(OP, "non-positive stride is not supported"));
    }
    if p.dilation.contains(&0) {
        return Err(Error::invalid(
            OP,
            format!(
                "dilation should be greater than zero, but got {:?}",
                p.dilation.as_slice()
            ),
        ));
    }
    if p.groups == 0 {
        return Err(Error::invalid(OP, "non-positive groups is not supported"));
    }
    // Kernels index with these in machine integers: keep every position
    // they compute far from overflowing (PyTorch fails allocating instead).
    const LIMIT: usize = 1 << 60;
    let params = [&p.stride, &p.padding, &p.dilation, &p.output_padding];
    if params.iter().any(|v| v.iter().any(|&s| s >= LIMIT)) {
        return Err(Error::overflow(
            OP,
            "stride, padding, dilation and output_padding must be below 2^60",
        ));
    }
    let (xs, ws) = (x.shape(), w.shape());
    if ws.len() != k + 2 || xs.len() != k + 2 {
        return Err(Error::invalid(
            OP,
            format!(
                "Expected {}-dimensional input for {}-dimensional weight {:?}, but got {}-dimensional input of size \
                 {:?} instead",
                ws.len(),
                ws.len(),
                ws,
                xs.len(),
                xs
            ),
        ));
    }
    let g = p.groups;
    if ws[0] < g {
        return Err(Error::invalid(
            OP,
            format!(
                "Given groups={g}, expected weight to be at least {g} at dimension 0, but got weight of size {ws:?} \
                 instead"
            ),
        ));
    }
    if ws[0] % g != 0 {
        return Err(Error::invalid(
            OP,
            format!(
                "Given groups={g}, expected weight to be divisible by {g} at dimension 0, but got weight of size \
                 [{ws:?}] instead"
            ),
        ));
    }
    let bias_len = if p.transposed {
        ws[1].checked_mul(g)
    } else {
        Some(ws[0])
    };
    let bias_len = bias_len.ok_or_else(|| Error::overflow(OP, "output channels overflow"))?;
    let mut out = Dims::new();
    out.push(xs[0]);
    if !p.transposed {
        let want = ws[1].saturating_mul(g);
        if xs[1] != want {
            return Err(Error::invalid(
                OP,
                format!(
                    "Given groups={g}, weight of size {ws:?}, expected input{xs:?} to have {want} channels, but got \
                     {} channels instead",
                    xs[1]
                ),
            ));
        }
    } else if xs[1] != ws[0] {
        return Err(Error::invalid(
            OP,
            format!(
                "Given transposed=1, weight of size {ws:?}, expected input{xs:?} to have {} channels, but got {} \
                 channels instead",
                ws[0], xs[1]
            ),
        ));
    }
    if let Some(b) = bias
        && (b.ndim() != 1 || b.shape()[0] != bias_len)
    {
        let head = if p.transposed {
            format!("Given transposed=1, weight of size {ws:?}")
        } else {
            format!("Given weight of size {ws:?}")
        };
        return Err(Error::invalid(
            OP,
            format!(
                "{head}, expected bias to be 1-dimensional with {bias_len} elements, but got bias of size {:?} instead",
                b.shape()
            ),
        ));
    }
    out.push(bias_len);
    let big = |v: i128| usize::try_from(v).map_err(|_| Error::overflow(OP, "output size overflows"));
    if !p.transposed {
        let mut padded = Vec::with_capacity(k);
        let mut kernel = Vec::with_capacity(k);
        let mut fits = true;
        for i in 0..k {
            let pi = xs[i + 2] as i128 + 2 * p.padding[i] as i128;
            let ki = p.dilation[i] as i128 * (ws[i + 2] as i128 - 1) + 1;
            fits &= pi >= ki;
            padded.push(pi);
            kernel.push(ki);
        }
        if !fits {
            let join = |v: &[i128]| v.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" x ");
            return Err(Error::invalid(
                OP,
                format!(
                    "Calculated padded input size per channel: ({}). Kernel size: ({}). Kernel size can't be greater \
                     than actual input size",
                    join(&padded),
                    join(&kernel)
                ),
            ));
        }
        if padded.iter().chain(&kernel).any(|&v| v >= 1 << 61) {
            return Err(Error::overflow(
                OP,
                "the padded input or the dilated kernel is too large",
            ));
        }
        for i in 0..k {
            out.push(big((padded[i] - kernel[i]) / p.stride[i] as i128 + 1)?);
        }
    } else {
        let bad_pad = (0..k).any(|i| p.output_padding[i] >= p.stride[i] && p.output_padding[i] >= p.dilation[i]);
        if bad_pad {
            // A 1-d convolution runs as a 2-d one of height 1 (PyTorch's message says so).
            let hw = |v: &Dims, one: usize| if k == 2 { (v[0], v[1]) } else { (one, v[0]) };
            let ((oph, opw), (sh, sw), (dh, dw)) = (hw(&p.output_padding, 0), hw(&p.stride, 1), hw(&p.dilation, 1));
            return Err(Error::invalid(
                OP,
                format!(
                    "output padding must be smaller than either stride or dilation, but got output_padding_height: \
                     {oph} output_padding_width: {opw} stride_height: {sh} stride_width: {sw} dilation_height: {dh} \
                     dilation_width: {dw}"
                ),
            ));
        }
        let mut sizes = Vec::with_capacity(k);
        for i in 0..k {
            sizes.push(
                (xs[i + 2] as i128 - 1) * p.stride[i] as i128 - 2 * p.padding[i] as i128
                    + p.dilation[i] as i128 * (ws[i + 2] as i128 - 1)
                    + p.output_padding[i] as i128
                    + 1,
            );
        }
        if sizes.iter().any(|&s| s < 1) {
            let join = |v: &[String]| v.join(" x ");
            let ins: Vec<String> = xs[2..].iter().map(|d| d.to_string()).collect();
            let outs: Vec<String> = sizes.iter().map(|d| d.to_string()).collect();
            return Err(Error::invalid(
                OP,
                format!(
                    "Given input size per channel: ({}). Calculated output size per channel: ({}). Output size is too \
                     small",
                    join(&ins),
                    join(&outs)
                ),
            ));
        }
        let spans = (0..k).map(|i| (xs[i + 2] as i128 - 1) * p.stride[i] as i128);
        if sizes.iter().copied().chain(spans).any(|v| v >= 1 << 61) {
            return Err(Error::overflow(
                OP,
                "the output of the transposed convolution is too large",
            ));
        }
        for s in sizes {
            out.push(big(s)?);
        }
    }
    Ok(out)
}

impl Op for Convolution {
    fn entry(&self) -> &'static OpEntry {
        &CONVOLUTION
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        if !(2..=3).contains(&inputs.len()) {
            return Err(Error::invalid(
                "convolution",
                "expected input, weight and an optional bias",
            ));
        }
        let shape = conv_output_shape(&self.params, inputs[0], inputs[1], inputs.get(2).copied())?;
        Ok(smallvec::smallvec![OutSpec::new(shape, inputs[0].dtype())])
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b011)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = grads.first().cloned().flatten() else {
            return Ok(vec![None; ctx.num_inputs()]);
        };
        let has_bias = ctx.num_inputs() == 3;
        let mask = [ctx.needs_grad(0), ctx.needs_grad(1), has_bias && ctx.needs_grad(2)];
        let (x, w) = (ctx.input(0)?, ctx.input(1)?);
        let [gi, gw, gb] = convolution_backward(&g, &x, &w, &self.params, mask)?;
        let mut out = vec![gi, gw];
        if has_bias {
            out.push(gb);
        }
        Ok(out)
    }
}

/// `convolution_backward(grad_output, input, weight)`: the gradients of a
/// convolution with respect to its input, weight and bias (those in
/// `output_mask`; the others are empty tensors of shape `[0]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvolutionBackward {
    /// The convolution's arguments.
    pub params: ConvParams,
    /// Which gradients to compute: input, weight, bias.
    pub output_mask: [bool; 3],
}

impl Op for ConvolutionBackward {
    fn entry(&self) -> &'static OpEntry {
        &CONVOLUTION_BACKWARD
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        const OP: &str = "convolution_backward";
        if inputs.len() != 3 {
            return Err(Error::invalid(OP, "expected grad_output, input and weight"));
        }
        let (g, x, w) = (inputs[0], inputs[1], inputs[2]);
        let want = conv_output_shape(&self.params, x, w, None)?;
        if g.shape() != want.as_slice() {
            return Err(Error::shape(
                OP,
                g.shape(),
                &want,
                "grad_output must have the convolution's output shape",
            ));
        }
        if g.dtype() != x.dtype() {
            return Err(Error::DTypeMismatch {
                op: OP,
                detail: format!(
                    "expected scalar type {} but found {}",
                    x.dtype().scalar_type_name(),
                    g.dtype().scalar_type_name()
                ),
            });
        }
        let dt = x.dtype();
        let spec = |on: bool, shape: &[usize]| {
            if on {
                OutSpec::new(shape, dt)
            } else {
                OutSpec::new([0usize].as_slice(), dt)
            }
        };
        let [mi, mw, mb] = self.output_mask;
        Ok(smallvec::smallvec![
            spec(mi, x.shape()),
            spec(mw, w.shape()),
            spec(mb, &[want[1]]),
        ])
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b111)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // The gradients are bilinear in (grad_output, weight) and (input,
        // grad_output): with y = B(x, w) + b, gI = B_x'(gO; w), gW = B_w'(gO; x),
        // gB = sum(gO), the second derivatives are dgO = B(ggI, w) + B(x, ggW)
        // + ggB, dx = B_x'(gO; ggW), dw = B_w'(gO; ggI).
        let pick = |i: usize| {
            if self.output_mask[i] {
                grads.get(i).cloned().flatten()
            } else {
                None
            }
        };
        let (ggi, ggw, ggb) = (pick(0), pick(1), pick(2));
        let (go, x, w) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        let p = &self.params;
        let dgo = if ctx.needs_grad(0) {
            // The bias term joins the first convolution (as its bias).
            let mut bias = ggb;
            let mut acc: Option<Tensor> = None;
            for (a, b) in [(ggi.as_ref(), Some(&w)), (Some(&x), ggw.as_ref())] {
                if let (Some(a), Some(b)) = (a, b) {
                    let t = convolution_op(a, b, bias.take().as_ref(), p)?;
                    acc = Some(match acc {
                        Some(s) => s.add(&t)?,
                        None => t,
                    });
                }
            }
            match (acc, bias) {
                (None, Some(b)) => {
                    let mut shape = vec![1i64; go.ndim()];
                    shape[1] = -1;
                    Some(b.reshape(shape)?.expand(go.shape())?)
                }
                (acc, _) => acc,
            }
        } else {
            None
        };
        let dx = match &ggw {
            Some(ggw) if ctx.needs_grad(1) => convolution_backward(&go, &x, ggw, p, [true, false, false])?[0].take(),
            _ => None,
        };
        let dw = match &ggi {
            Some(ggi) if ctx.needs_grad(2) => convolution_backward(&go, ggi, &w, p, [false, true, false])?[1].take(),
            _ => None,
        };
        Ok(vec![dgo, dx, dw])
    }
}

/// `convolution(input, weight, bias)` with `params`, through the dispatcher.
fn convolution_op(x: &Tensor, w: &Tensor, b: Option<&Tensor>, p: &ConvParams) -> Result<Tensor> {
    let op = Convolution { params: p.clone() };
    match b {
        Some(b) => call1(&op, &[x, w, b]),
        None => call1(&op, &[x, w]),
    }
}

/// The gradients of `convolution(input, weight, bias)` for `grad_output`,
/// those in `mask` (input, weight, bias); one operator call.
pub(crate) fn convolution_backward(
    g: &Tensor,
    x: &Tensor,
    w: &Tensor,
    p: &ConvParams,
    mask: [bool; 3],
) -> Result<[Option<Tensor>; 3]> {
    if !mask.iter().any(|&m| m) {
        return Ok([None, None, None]);
    }
    let op = ConvolutionBackward {
        params: p.clone(),
        output_mask: mask,
    };
    let mut outs = call(&op, &[g, x, w])?.into_iter();
    let mut next = |on: bool| outs.next().filter(|_| on);
    Ok([next(mask[0]), next(mask[1]), next(mask[2])])
}

/// How a convolution pads its input: PyTorch's `padding` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Padding {
    /// Zeros on both sides of each spatial dim: one value for every dim,
    /// or one per dim (PyTorch's int or tuple).
    Explicit(ShapeVec),
    /// `padding='same'`: the output has the input's size (stride 1 only);
    /// an odd total padding puts the extra zero at the end, as PyTorch.
    Same,
    /// `padding='valid'`: no padding.
    Valid,
}

impl<T: IntoShape> From<T> for Padding {
    fn from(v: T) -> Self {
        Padding::Explicit(v.into_shape())
    }
}

/// The keyword arguments of `conv1d` / `conv2d` with PyTorch's defaults
/// (`stride=1, padding=0, dilation=1, groups=1`). Each list holds one value
/// for every spatial dim or one per dim, as PyTorch's int-or-tuple.
///
/// ```
/// use ferrotorch_core::{ConvOptions, Padding};
/// let o = ConvOptions::new().stride(2).padding(1).groups(4);
/// assert_eq!(o.padding, Padding::Explicit([1].into_iter().collect()));
/// let same = ConvOptions::new().padding(Padding::Same);
/// # let _ = same;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvOptions {
    /// `stride` (default 1).
    pub stride: ShapeVec,
    /// `padding` (default 0).
    pub padding: Padding,
    /// `dilation` (default 1).
    pub dilation: ShapeVec,
    /// `groups` (default 1).
    pub groups: i64,
}

impl Default for ConvOptions {
    fn default() -> Self {
        ConvOptions {
            stride: smallvec::smallvec![1],
            padding: Padding::Explicit(smallvec::smallvec![0]),
            dilation: smallvec::smallvec![1],
            groups: 1,
        }
    }
}

impl ConvOptions {
    /// PyTorch's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `stride`.
    pub fn stride(mut self, s: impl IntoShape) -> Self {
        self.stride = s.into_shape();
        self
    }

    /// Sets `padding`: sizes (`1`, `(1, 2)`) or [`Padding::Same`] / [`Padding::Valid`].
    pub fn padding(mut self, p: impl Into<Padding>) -> Self {
        self.padding = p.into();
        self
    }

    /// Sets `dilation`.
    pub fn dilation(mut self, d: impl IntoShape) -> Self {
        self.dilation = d.into_shape();
        self
    }

    /// Sets `groups`.
    pub fn groups(mut self, g: i64) -> Self {
        self.groups = g;
        self
    }
}

/// The keyword arguments of `conv_transpose1d` / `conv_transpose2d` with
/// PyTorch's defaults (`stride=1, padding=0, output_padding=0, groups=1,
/// dilation=1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvTransposeOptions {
    /// `stride` (default 1).
    pub stride: ShapeVec,
    /// `padding` (default 0): `dilation * (kernel_size - 1) - padding` zeros
    /// on both sides of the input.
    pub padding: ShapeVec,
    /// `output_padding` (default 0): extra size on one side of the output.
    pub output_padding: ShapeVec,
    /// `groups` (default 1).
    pub groups: i64,
    /// `dilation` (default 1).
    pub dilation: ShapeVec,
}

impl Default for ConvTransposeOptions {
    fn default() -> Self {
        ConvTransposeOptions {
            stride: smallvec::smallvec![1],
            padding: smallvec::smallvec![0],
            output_padding: smallvec::smallvec![0],
            groups: 1,
            dilation: smallvec::smallvec![1],
        }
    }
}

impl ConvTransposeOptions {
    /// PyTorch's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `stride`.
    pub fn stride(mut self, s: impl IntoShape) -> Self {
        self.stride = s.into_shape();
        self
    }

    /// Sets `padding`.
    pub fn padding(mut self, p: impl IntoShape) -> Self {
        self.padding = p.into_shape();
        self
    }

    /// Sets `output_padding`.
    pub fn output_padding(mut self, p: impl IntoShape) -> Self {
        self.output_padding = p.into_shape();
        self
    }

    /// Sets `groups`.
    pub fn groups(mut self, g: i64) -> Self {
        self.groups = g;
        self
    }

    /// Sets `dilation`.
    pub fn dilation(mut self, d: impl IntoShape) -> Self {
        self.dilation = d.into_shape();
        self
    }
}

/// One value per spatial dim from an int-or-tuple argument (`k` dims),
/// with PyTorch's "expected stride to be a single integer value or a list
/// of k values" error.
fn per_dim(op: &'static str, what: &str, v: &[i64], k: usize) -> Result<Vec<i64>> {
    match v.len() {
        1 => Ok(vec![v[0]; k]),
        n if n == k => Ok(v.to_vec()),
        _ => Err(Error::invalid(
            op,
            format!(
                "expected {what} to be a single integer value or a list of {k} values to match the convolution \
                 dimensions, but got {what}={v:?}"
            ),
        )),
    }
}

/// `v` as sizes, refusing negative values (or non-positive ones with
/// `positive`) with PyTorch's message `msg` (`{v}` stands for the list).
fn to_sizes(op: &'static str, v: &[i64], positive: bool, msg: &str) -> Result<Dims> {
    if v.iter().any(|&x| x < 0 || (positive && x == 0)) {
        return Err(Error::invalid(op, msg.replace("{v}", &format!("{v:?}"))));
    }
    Ok(v.iter().map(|&x| x as usize).collect())
}

/// Adds a batch dim to an unbatched input (`k + 1` dims) and says whether it
/// did, with PyTorch's "Expected 3D (unbatched) or 4D (batched) input"
/// error for other ranks.
fn batchify(op: &'static str, x: &Tensor, k: usize) -> Result<(Tensor, bool)> {
    if x.ndim() == k + 2 {
        Ok((x.clone(), false))
    } else if x.ndim() == k + 1 {
        Ok((x.unsqueeze(0)?, true))
    } else {
        Err(Error::invalid(
            op,
            format!(
                "Expected {}D (unbatched) or {}D (batched) input to {op}, but got input of size: {:?}",
                k + 1,
                k + 2,
                x.shape()
            ),
        ))
    }
}

fn groups_of(op: &'static str, g: i64) -> Result<usize> {
    if g <= 0 {
        return Err(Error::invalid(op, "non-positive groups is not supported"));
    }
    usize::try_from(g).map_err(|_| Error::invalid(op, "groups too large"))
}

/// `convolution` of a (batched or not) input, `k` spatial dims.
fn conv_nd(op: &'static str, x: &Tensor, w: &Tensor, b: Option<&Tensor>, o: &ConvOptions, k: usize) -> Result<Tensor> {
    let (x, unbatched) = batchify(op, x, k)?;
    let stride = per_dim(op, "stride", &o.stride, k)?;
    let dilation = per_dim(op, "dilation", &o.dilation, k)?;
    let groups = groups_of(op, o.groups)?;
    let stride = to_sizes(op, &stride, true, "non-positive stride is not supported")?;
    let dilation = to_sizes(op, &dilation, true, "dilation should be greater than zero, but got {v}")?;
    let mut x = x;
    let padding: Dims = match &o.padding {
        Padding::Explicit(p) => to_sizes(
            op,
            &per_dim(op, "padding", p, k)?,
            false,
            "negative padding is not supported",
        )?,
        Padding::Valid => smallvec::smallvec![0; k],
        Padding::Same => {
            if stride.iter().any(|&s| s != 1) {
                return Err(Error::invalid(
                    op,
                    "padding='same' is not supported for strided convolutions",
                ));
            }
            // PyTorch's `_convolution_mode`: total padding d * (k - 1) per
            // dim, half on each side; an odd one gets its extra zero at the
            // end through a zero-padded copy of the input. (A weight of the
            // wrong rank gets no padding: the operator's shape check fails.)
            let mut left = Dims::new();
            for i in 0..k {
                let ksize = if w.ndim() == k + 2 { w.shape()[i + 2] } else { 1 };
                let total = dilation[i]
                    .checked_mul(ksize.saturating_sub(1))
                    .ok_or_else(|| Error::overflow(op, "padding overflows"))?;
                let l = total / 2;
                if total - l > l {
                    let mut zshape = x.dims();
                    zshape[i + 2] = total - 2 * l;
                    let z = TensorOptions::like(&x).zeros(zshape.as_slice())?;
                    x = Tensor::cat(&[&x, &z], (i + 2) as i64)?;
                }
                left.push(l);
            }
            left
        }
    };
    let params = ConvParams {
        stride,
        padding,
        dilation,
        transposed: false,
        output_padding: smallvec::smallvec![0; k],
        groups,
    };
    let y = x.convolution(w, b, &params)?;
    if unbatched { y.squeeze_dim(0) } else { Ok(y) }
}

/// Transposed `convolution` of a (batched or not) input, `k` spatial dims.
fn conv_transpose_nd(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    o: &ConvTransposeOptions,
    k: usize,
) -> Result<Tensor> {
    let (x, unbatched) = batchify(op, x, k)?;
    let groups = groups_of(op, o.groups)?;
    let stride = to_sizes(
        op,
        &per_dim(op, "stride", &o.stride, k)?,
        true,
        "non-positive stride is not supported",
    )?;
    let padding = to_sizes(
        op,
        &per_dim(op, "padding", &o.padding, k)?,
        false,
        "negative padding is not supported",
    )?;
    let output_padding = to_sizes(
        op,
        &per_dim(op, "output_padding", &o.output_padding, k)?,
        false,
        "negative output_padding is not supported",
    )?;
    let dilation = to_sizes(
        op,
        &per_dim(op, "dilation", &o.dilation, k)?,
        true,
        "dilation should be greater than zero, but got {v}",
    )?;
    let params = ConvParams {
        stride,
        padding,
        dilation,
        transposed: true,
        output_padding,
        groups,
    };
    let y = x.convolution(w, b, &params)?;
    if unbatched { y.squeeze_dim(0) } else { Ok(y) }
}

/// # Convolution
///
/// `conv1d`, `conv2d`, `conv_transpose1d`, `conv_transpose2d` (PyTorch's
/// `torch.nn.functional` forms, keyword arguments in [`ConvOptions`] /
/// [`ConvTransposeOptions`]) and the operator they call, `convolution`.
/// Inputs are batched (`[N, C, *spatial]`) or not (`[C, *spatial]`);
/// f32, f64, f16 and bf16 (and integers, as PyTorch's CPU kernels).
///
/// ```
/// use ferrotorch_core::{ConvOptions, Tensor};
/// let x = Tensor::ones([1, 1, 4, 4])?;
/// let w = Tensor::ones([2, 1, 3, 3])?;
/// let b = Tensor::new([0.0f32, 1.0])?;
/// let y = x.conv2d(&w, Some(&b), ConvOptions::new().padding(1))?;
/// assert_eq!(y.shape(), &[1, 2, 4, 4]);
/// assert_eq!(y.to_vec::<f32>()?[..4], [4.0, 6.0, 6.0, 4.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `torch.nn.functional.conv2d(input, weight, bias, stride, padding,
    /// dilation, groups)`: `self` is `[N, C_in, H, W]` or `[C_in, H, W]`,
    /// `weight` `[C_out, C_in / groups, kH, kW]`, `bias` `[C_out]`.
    ///
    /// Errors, with PyTorch's messages, for a wrong input rank, channel
    /// count or bias size, groups not dividing the channels, a kernel larger
    /// than the padded input, non-positive stride, dilation or groups,
    /// negative padding, `Padding::Same` with a stride other than 1, and
    /// mismatched or unsupported (bool) dtypes.
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, opts: ConvOptions) -> Result<Tensor> {
        conv_nd("conv2d", self, weight, bias, &opts, 2)
    }

    /// `torch.nn.functional.conv1d`: `self` is `[N, C_in, L]` or `[C_in, L]`,
    /// `weight` `[C_out, C_in / groups, k]`. Errors as [`Tensor::conv2d`].
    pub fn conv1d(&self, weight: &Tensor, bias: Option<&Tensor>, opts: ConvOptions) -> Result<Tensor> {
        conv_nd("conv1d", self, weight, bias, &opts, 1)
    }

    /// `torch.nn.functional.conv_transpose2d(input, weight, bias, stride,
    /// padding, output_padding, groups, dilation)`: `self` is `[N, C_in, H,
    /// W]` or `[C_in, H, W]`, `weight` `[C_in, C_out / groups, kH, kW]`,
    /// `bias` `[C_out]`; the output has `(H - 1) * stride - 2 * padding +
    /// dilation * (kH - 1) + output_padding + 1` rows (likewise columns).
    ///
    /// Errors, with PyTorch's messages, for a wrong rank, channel count or
    /// bias size, an output padding not smaller than the stride or the
    /// dilation, an output smaller than 1, and the argument errors of
    /// [`Tensor::conv2d`].
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: ConvTransposeOptions,
    ) -> Result<Tensor> {
        conv_transpose_nd("conv_transpose2d", self, weight, bias, &opts, 2)
    }

    /// `torch.nn.functional.conv_transpose1d`: `self` is `[N, C_in, L]` or
    /// `[C_in, L]`. Errors as [`Tensor::conv_transpose2d`].
    pub fn conv_transpose1d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: ConvTransposeOptions,
    ) -> Result<Tensor> {
        conv_transpose_nd("conv_transpose1d", self, weight, bias, &opts, 1)
    }

    /// `torch.convolution(input, weight, bias, stride, padding, dilation,
    /// transposed, output_padding, groups)`: the operator behind the front
    /// ends (batched input only, explicit symmetric padding), recorded as
    /// `ConvolutionBackward0`.
    ///
    /// Errors as [`Tensor::conv2d`] / [`Tensor::conv_transpose2d`], and for
    /// parameter lists whose lengths do not match the input's spatial dims.
    pub fn convolution(&self, weight: &Tensor, bias: Option<&Tensor>, params: &ConvParams) -> Result<Tensor> {
        convolution_op(self, weight, bias, params)
    }
}
