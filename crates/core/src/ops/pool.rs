//! Pooling, as PyTorch's operators: `max_pool2d_with_indices` (values and
//! flat `H * W` indices; node `MaxPool2DWithIndicesBackward0`),
//! `avg_pool2d` (`AvgPool2DBackward0`), `_adaptive_avg_pool2d`
//! (`AdaptiveAvgPool2DBackward0`) and `adaptive_max_pool2d`
//! (`AdaptiveMaxPool2DBackward0`), each with its backward operator, whose
//! own derivative PyTorch's formulas give (a gather at the indices for the
//! max pools, the pool itself for the average pools), so double backward
//! works. Front ends: `max_pool1d/2d(_with_indices)`, `avg_pool1d/2d`,
//! `adaptive_avg_pool1d/2d`, `adaptive_max_pool1d/2d`, with PyTorch's
//! keyword defaults in [`MaxPoolOptions`] and [`AvgPoolOptions`].
//!
//! The CPU kernels are in `backend/cpu/pool.rs`.

use crate::autograd::{BackwardCtx, Saves, TensorMeta};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call, call1};
use crate::layout::Dims;
use crate::ops::grad_util::grad0;
use crate::shape_arg::{IntoShape, ShapeVec};
use crate::{DType, Error, Result, Tensor, TensorOptions};

/// Dispatch table of `max_pool2d_with_indices` (node `MaxPool2DWithIndicesBackward0`).
pub static MAX_POOL2D: OpEntry = OpEntry::differentiable("max_pool2d_with_indices");
/// Dispatch table of `max_pool2d_with_indices_backward`.
pub static MAX_POOL2D_BACKWARD: OpEntry = OpEntry::differentiable("max_pool2d_with_indices_backward");
/// Dispatch table of `avg_pool2d` (node `AvgPool2DBackward0`).
pub static AVG_POOL2D: OpEntry = OpEntry::differentiable("avg_pool2d");
/// Dispatch table of `avg_pool2d_backward`.
pub static AVG_POOL2D_BACKWARD: OpEntry = OpEntry::differentiable("avg_pool2d_backward");
/// Dispatch table of `_adaptive_avg_pool2d` (node `AdaptiveAvgPool2DBackward0`).
pub static ADAPTIVE_AVG_POOL2D: OpEntry = OpEntry::differentiable("_adaptive_avg_pool2d");
/// Dispatch table of `_adaptive_avg_pool2d_backward`.
pub static ADAPTIVE_AVG_POOL2D_BACKWARD: OpEntry = OpEntry::differentiable("_adaptive_avg_pool2d_backward");
/// Dispatch table of `adaptive_max_pool2d` (node `AdaptiveMaxPool2DBackward0`).
pub static ADAPTIVE_MAX_POOL2D: OpEntry = OpEntry::differentiable("adaptive_max_pool2d");
/// Dispatch table of `adaptive_max_pool2d_backward`.
pub static ADAPTIVE_MAX_POOL2D_BACKWARD: OpEntry = OpEntry::differentiable("adaptive_max_pool2d_backward");

/// The window of a 2-d pooling: `[height, width]` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool2dParams {
    /// Window size.
    pub kernel: [usize; 2],
    /// Step between windows.
    pub stride: [usize; 2],
    /// Implicit padding on both sides (`-inf` for max, zeros for average).
    pub padding: [usize; 2],
    /// Spacing of the window's taps (1 for average pooling).
    pub dilation: [usize; 2],
    /// Round the output size up (windows starting in the padding on the
    /// right are dropped), not down.
    pub ceil_mode: bool,
}

/// PyTorch's `pooling_output_shape`: the output size along one dim, with
/// its checks (`stride should not be zero`, the padding limit).
fn pooling_output_size(
    op: &'static str,
    input: usize,
    k: usize,
    pad: usize,
    s: usize,
    d: usize,
    ceil: bool,
) -> Result<i64> {
    if s == 0 {
        return Err(Error::invalid(op, "stride should not be zero"));
    }
    let (input, k, pad, s, d) = (input as i64, k as i64, pad as i64, s as i64, d as i64);
    let limit = (k - 1).saturating_mul(d).saturating_add(1) / 2;
    if pad > limit {
        return Err(Error::invalid(
            op,
            format!(
                "pad should be at most half of effective kernel size, but got pad={pad}, kernel_size={k} and dilation={d}"
            ),
        ));
    }
    let num = input
        .saturating_add(2 * pad)
        .saturating_sub(d.saturating_mul(k - 1))
        .saturating_sub(1)
        .saturating_add(if ceil { s - 1 } else { 0 });
    let mut out = num.div_euclid(s) + 1;
    if ceil && (out - 1).saturating_mul(s) >= input + pad {
        out -= 1;
    }
    Ok(out)
}

/// PyTorch's `pool2d_shape_check` after the output sizes: the window, the
/// input's rank and sizes, the padding and the output size.
fn pool2d_check(op: &'static str, x: &Tensor, p: &Pool2dParams, out: [i64; 2]) -> Result<()> {
    let [kh, kw] = p.kernel;
    if kh == 0 || kw == 0 {
        return Err(Error::invalid(
            op,
            format!("kernel size should be greater than zero, but got kH: {kh} kW: {kw}"),
        ));
    }
    if p.dilation.contains(&0) {
        return Err(Error::invalid(
            op,
            format!(
                "dilation should be greater than zero, but got dilationH: {} dilationW: {}",
                p.dilation[0], p.dilation[1]
            ),
        ));
    }
    let s = x.shape();
    let valid = match s.len() {
        3 => s[0] != 0 && s[1] != 0 && s[2] != 0,
        4 => s[1] != 0 && s[2] != 0 && s[3] != 0,
        _ => false,
    };
    if !valid {
        return Err(Error::invalid(
            op,
            format!("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:{s:?}"),
        ));
    }
    if kw / 2 < p.padding[1] || kh / 2 < p.padding[0] {
        return Err(Error::invalid(
            op,
            format!(
                "pad should be smaller than or equal to half of kernel size, but got padW = {}, padH = {}, kW = {kw}, \
                 kH = {kh}",
                p.padding[1], p.padding[0]
            ),
        ));
    }
    if out[0] < 1 || out[1] < 1 {
        let n = s.len();
        let (c, h, w) = (s[n - 3], s[n - 2], s[n - 1]);
        return Err(Error::invalid(
            op,
            format!(
                "Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{}x{}). Output size is too small",
                out[0], out[1]
            ),
        ));
    }
    Ok(())
}

/// The output shape of a 2-d pooling of `x`, with PyTorch's checks.
pub(crate) fn pool2d_output_shape(op: &'static str, x: &Tensor, p: &Pool2dParams) -> Result<Dims> {
    let n = x.ndim();
    if n < 3 {
        return Err(Error::DimOutOfRange { op, dim: -3, ndim: n });
    }
    let (h, w) = (x.shape()[n - 2], x.shape()[n - 1]);
    let oh = pooling_output_size(
        op,
        h,
        p.kernel[0],
        p.padding[0],
        p.stride[0],
        p.dilation[0],
        p.ceil_mode,
    )?;
    let ow = pooling_output_size(
        op,
        w,
        p.kernel[1],
        p.padding[1],
        p.stride[1],
        p.dilation[1],
        p.ceil_mode,
    )?;
    pool2d_check(op, x, p, [oh, ow])?;
    let mut out = x.dims();
    out[n - 2] = oh as usize;
    out[n - 1] = ow as usize;
    Ok(out)
}

/// The dtypes PyTorch's max pools run on: floats and integers, not bool.
fn check_max_dtype(op: &'static str, dt: DType) -> Result<()> {
    if dt == DType::Bool {
        return Err(Error::dtype(op, dt, format!("\"{op}\" not implemented for 'Bool'")));
    }
    Ok(())
}

/// A gradient with the shape of a pool's input (saved as metadata): zeros,
/// as PyTorch's `zeros_like(self)` for the backward operators' `self`.
fn zeros_of(meta: &TensorMeta) -> Result<Tensor> {
    TensorOptions::new()
        .dtype(meta.dtype)
        .device(meta.device)
        .zeros(meta.shape.as_slice())
}

/// PyTorch's `max_pool_double_backward`: the gradient of a max pool's
/// backward with respect to its `grad_output`: `gg` picked at the indices.
fn gather_at_indices(gg: &Tensor, indices: &Tensor) -> Result<Tensor> {
    let flat = gg.flatten((-2, -1))?;
    let idx = indices.flatten((-2, -1))?;
    flat.gather(-1, &idx)?.reshape(indices.shape())
}

/// `max_pool2d_with_indices(self)`: the maximum of each window (NaN wins,
/// the last NaN of a window when several) and its flat position in the
/// `H * W` plane (the first one among equal maxima). Input `[N, C, H, W]`
/// or `[C, H, W]`; outputs values and int64 indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxPool2d {
    /// The window.
    pub params: Pool2dParams,
}

impl Op for MaxPool2d {
    fn entry(&self) -> &'static OpEntry {
        &MAX_POOL2D
    }

    fn backward_name(&self) -> String {
        "MaxPool2DWithIndicesBackward0".into()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        if !(3..=4).contains(&x.ndim()) {
            return Err(Error::invalid(
                "max_pool2d",
                "non-empty 3D or 4D (batch mode) tensor expected for input",
            ));
        }
        let shape = pool2d_output_shape("max_pool2d", x, &self.params)?;
        check_max_dtype("max_pool2d", x.dtype())?;
        Ok(crate::ops::grad_util::values_and_indices(shape, x.dtype()))
    }

    fn saves(&self) -> Saves {
        Saves {
            inputs: 0b1,
            outputs: 0b10,
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let (x, idx) = (ctx.input(0)?, ctx.output(1)?);
        let (g, idx) = drop_padding_windows(&self.params, &x, g, idx)?;
        Ok(vec![Some(call1(
            &MaxPool2dBackward { params: self.params },
            &[&g, &x, &idx],
        )?)])
    }
}

/// With dilation, a window can hold no input element at all (every tap in
/// the padding): its value is -inf and its index, PyTorch's, points past
/// the plane. Such windows pass no gradient (PyTorch's CPU kernel writes
/// out of bounds there); their gradient is zeroed and their index set to 0,
/// so the backward operator's bounds check holds. A no-op without dilation.
fn drop_padding_windows(p: &Pool2dParams, x: &Tensor, g: Tensor, idx: Tensor) -> Result<(Tensor, Tensor)> {
    if p.dilation.iter().all(|&d| d <= 1) {
        return Ok((g, idx));
    }
    let hw = x.shape()[x.ndim() - 2..].iter().product::<usize>() as i64;
    let outside = idx.ge(hw)?;
    Ok((g.masked_fill(&outside, 0.0)?, idx.masked_fill(&outside, 0i64)?))
}

/// Checks the inputs of a max pool's backward operator (`[grad_output,
/// self, indices]`) and returns the spec of its gradient (`self`'s shape).
fn max_backward_spec(op: &'static str, inputs: &[&Tensor], want: Option<Dims>) -> Result<OutSpecs> {
    if inputs.len() != 3 {
        return Err(Error::invalid(op, "expected grad_output, self and indices"));
    }
    let (g, x, idx) = (inputs[0], inputs[1], inputs[2]);
    if idx.dtype() != DType::I64 {
        return Err(Error::dtype(op, idx.dtype(), "expected int64 indices"));
    }
    let n = x.ndim();
    let lead_ok = g.ndim() == n && n >= 2 && g.shape()[..n - 2] == x.shape()[..n - 2];
    if !lead_ok || idx.shape() != g.shape() || want.as_ref().is_some_and(|w| w.as_slice() != g.shape()) {
        return Err(Error::shape(
            op,
            g.shape(),
            x.shape(),
            "grad_output and indices must have the pooling's output shape",
        ));
    }
    if g.dtype() != x.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            detail: format!(
                "expected scalar type {} but found {}",
                x.dtype().scalar_type_name(),
                g.dtype().scalar_type_name()
            ),
        });
    }
    Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())])
}

/// `max_pool2d_with_indices_backward(grad_output, self, indices)`: the
/// gradient of [`MaxPool2d`]: each output's gradient added at its index
/// (inputs `[grad_output, self, indices]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxPool2dBackward {
    /// The window.
    pub params: Pool2dParams,
}

impl Op for MaxPool2dBackward {
    fn entry(&self) -> &'static OpEntry {
        &MAX_POOL2D_BACKWARD
    }

    fn backward_name(&self) -> String {
        "MaxPool2DWithIndicesBackwardBackward0".into()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        const OP: &str = "max_pool2d_with_indices_backward";
        let want = match inputs.get(1) {
            Some(x) if (3..=4).contains(&x.ndim()) => Some(pool2d_output_shape(OP, x, &self.params)?),
            _ => None,
        };
        max_backward_spec(OP, inputs, want)
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i != 2
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b100)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let gg = grad0(grads)?;
        let dg = if ctx.needs_grad(0) {
            // Indices reach here through `drop_padding_windows`: in the plane.
            Some(gather_at_indices(&gg, &ctx.input(2)?)?)
        } else {
            None
        };
        let dx = if ctx.needs_grad(1) {
            Some(zeros_of(ctx.meta(1))?)
        } else {
            None
        };
        Ok(vec![dg, dx, None])
    }
}

/// `avg_pool2d(self)`: the mean of each window; zeros of the padding count
/// (`count_include_pad`) or not, or a fixed divisor (`divisor_override`).
/// Input `[N, C, H, W]` or `[C, H, W]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AvgPool2d {
    /// The window (dilation 1).
    pub params: Pool2dParams,
    /// Divide by the whole window, padding included (clipped at the end of
    /// the padded input), not only by its part inside the input.
    pub count_include_pad: bool,
    /// Divide by this instead (nonzero).
    pub divisor_override: Option<i64>,
}

impl AvgPool2d {
    fn output_shape(&self, op: &'static str, x: &Tensor) -> Result<Dims> {
        if self.divisor_override == Some(0) {
            return Err(Error::invalid(op, "divisor must be not zero"));
        }
        if self.params.dilation != [1, 1] {
            return Err(Error::invalid(op, "average pooling has no dilation"));
        }
        pool2d_output_shape(op, x, &self.params)
    }
}

/// PyTorch's average pools run on floats and int64.
fn check_avg_dtype(op: &'static str, dt: DType) -> Result<()> {
    if !(dt.is_floating_point() || dt == DType::I64) {
        return Err(Error::dtype(
            op,
            dt,
            format!("\"{op}\" not implemented for '{}'", dt.scalar_type_name()),
        ));
    }
    Ok(())
}

impl Op for AvgPool2d {
    fn entry(&self) -> &'static OpEntry {
        &AVG_POOL2D
    }

    fn backward_name(&self) -> String {
        "AvgPool2DBackward0".into()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let shape = self.output_shape("avg_pool2d", x)?;
        check_avg_dtype("avg_pool2d", x.dtype())?;
        Ok(smallvec::smallvec![OutSpec::new(shape, x.dtype())])
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b1)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let x = ctx.input(0)?;
        Ok(vec![Some(call1(&AvgPool2dBackward(*self), &[&g, &x])?)])
    }
}

/// `avg_pool2d_backward(grad_output, self)`: the gradient of [`AvgPool2d`]:
/// each output's gradient divided by its divisor and added over its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AvgPool2dBackward(pub AvgPool2d);

impl Op for AvgPool2dBackward {
    fn entry(&self) -> &'static OpEntry {
        &AVG_POOL2D_BACKWARD
    }

    fn backward_name(&self) -> String {
        "AvgPool2DBackwardBackward0".into()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        const OP: &str = "avg_pool2d_backward";
        if inputs.len() != 2 {
            return Err(Error::invalid(OP, "expected grad_output and self"));
        }
        let (g, x) = (inputs[0], inputs[1]);
        let want = self.0.output_shape(OP, x)?;
        if g.shape() != want.as_slice() {
            return Err(Error::shape(
                OP,
                g.shape(),
                &want,
                "grad_output must have the pooling's output shape",
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
        check_avg_dtype(OP, x.dtype())?;
        Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())])
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let gg = grad0(grads)?;
        let dg = if ctx.needs_grad(0) {
            Some(call1(&self.0, &[&gg])?)
        } else {
            None
        };
        let dx = if ctx.needs_grad(1) {
            Some(zeros_of(ctx.meta(1))?)
        } else {
            None
        };
        Ok(vec![dg, dx])
    }
}

/// PyTorch's adaptive window along one dim: output `o` of `out` over an
/// input of `input` covers `[floor(o * input / out), ceil((o + 1) * input / out))`.
pub(crate) fn adaptive_window(o: usize, out: usize, input: usize) -> (usize, usize) {
    let start = (o * input) / out;
    let end = ((o + 1) * input).div_ceil(out);
    (start, end)
}

/// Checks an adaptive pool's input (3-d or 4-d, the dims from `first`
/// nonempty) and returns its output shape.
fn adaptive_shape(op: &'static str, x: &Tensor, out: [usize; 2], first: usize) -> Result<Dims> {
    let n = x.ndim();
    if !(3..=4).contains(&n) {
        let colon = if op == "adaptive_max_pool2d" { ":" } else { "" };
        return Err(Error::invalid(
            op,
            format!("{op}(): Expected 3D or 4D tensor, but got{colon} {:?}", x.shape()),
        ));
    }
    for i in first.min(n)..n {
        if x.shape()[i] == 0 {
            return Err(Error::invalid(
                op,
                format!(
                    "{op}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes {:?} \
                     with dimension {i} being empty",
                    x.shape()
                ),
            ));
        }
    }
    if !x.dtype().is_floating_point() {
        return Err(Error::dtype(
            op,
            x.dtype(),
            format!("\"{op}\" not implemented for '{}'", x.dtype().scalar_type_name()),
        ));
    }
    let mut shape = x.dims();
    shape[n - 2] = out[0];
    shape[n - 1] = out[1];
    Ok(shape)
}

/// `_adaptive_avg_pool2d(self, output_size)`: output `(i, j)` is the mean
/// of PyTorch's adaptive window (`adaptive_window`). Floating-point input
/// `[N, C, H, W]` or `[C, H, W]` with `H, W > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveAvgPool2d {
    /// `[height, width]` of the output.
    pub output_size: [usize; 2],
}

impl Op for AdaptiveAvgPool2d {
    fn entry(&self) -> &'static OpEntry {
        &ADAPTIVE_AVG_POOL2D
    }

    fn backward_name(&self) -> String {
        "AdaptiveAvgPool2DBackward0".into()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let first = x.ndim().saturating_sub(2);
        let shape = adaptive_shape("adaptive_avg_pool2d", x, self.output_size, first)?;
        Ok(smallvec::smallvec![OutSpec::new(shape, x.dtype())])
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b1)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let x = ctx.input(0)?;
        Ok(vec![Some(call1(&AdaptiveAvgPool2dBackward, &[&g, &x])?)])
    }
}

/// `_adaptive_avg_pool2d_backward(grad_output, self)`: the gradient of
/// [`AdaptiveAvgPool2d`] (the output size is `grad_output`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveAvgPool2dBackward;

impl Op for AdaptiveAvgPool2dBackward {
    fn entry(&self) -> &'static OpEntry {
        &ADAPTIVE_AVG_POOL2D_BACKWARD
    }

    fn backward_name(&self) -> String {
        "AdaptiveAvgPool2DBackwardBackward0".into()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        const OP: &str = "adaptive_avg_pool2d_backward";
        if inputs.len() != 2 {
            return Err(Error::invalid(OP, "expected grad_output and self"));
        }
        let (g, x) = (inputs[0], inputs[1]);
        let n = x.ndim();
        if g.ndim() != n || n < 3 || g.shape()[..n - 2] != x.shape()[..n - 2] || g.dtype() != x.dtype() {
            return Err(Error::shape(
                OP,
                g.shape(),
                x.shape(),
                "grad_output does not match self",
            ));
        }
        let out = [g.shape()[n - 2], g.shape()[n - 1]];
        adaptive_shape("adaptive_avg_pool2d", x, out, n - 2)?;
        Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())])
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let gg = grad0(grads)?;
        let dg = if ctx.needs_grad(0) {
            let s = &ctx.meta(0).shape;
            let n = s.len();
            Some(call1(
                &AdaptiveAvgPool2d {
                    output_size: [s[n - 2], s[n - 1]],
                },
                &[&gg],
            )?)
        } else {
            None
        };
        let dx = if ctx.needs_grad(1) {
            Some(zeros_of(ctx.meta(1))?)
        } else {
            None
        };
        Ok(vec![dg, dx])
    }
}

/// `adaptive_max_pool2d(self, output_size)`: the maximum of each adaptive
/// window and its flat `H * W` index (NaN as [`MaxPool2d`]).
/// Floating-point input `[N, C, H, W]` or `[C, H, W]` with `C, H, W > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveMaxPool2d {
    /// `[height, width]` of the output.
    pub output_size: [usize; 2],
}

impl Op for AdaptiveMaxPool2d {
    fn entry(&self) -> &'static OpEntry {
        &ADAPTIVE_MAX_POOL2D
    }

    fn backward_name(&self) -> String {
        "AdaptiveMaxPool2DBackward0".into()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let shape = adaptive_shape("adaptive_max_pool2d", x, self.output_size, 1)?;
        Ok(crate::ops::grad_util::values_and_indices(shape, x.dtype()))
    }

    fn saves(&self) -> Saves {
        Saves {
            inputs: 0b1,
            outputs: 0b10,
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let (x, idx) = (ctx.input(0)?, ctx.output(1)?);
        Ok(vec![Some(call1(&AdaptiveMaxPool2dBackward, &[&g, &x, &idx])?)])
    }
}

/// `adaptive_max_pool2d_backward(grad_output, self, indices)`: the
/// gradient of [`AdaptiveMaxPool2d`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveMaxPool2dBackward;

impl Op for AdaptiveMaxPool2dBackward {
    fn entry(&self) -> &'static OpEntry {
        &ADAPTIVE_MAX_POOL2D_BACKWARD
    }

    fn backward_name(&self) -> String {
        "AdaptiveMaxPool2DBackwardBackward0".into()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        const OP: &str = "adaptive_max_pool2d_backward";
        let specs = max_backward_spec(OP, inputs, None)?;
        adaptive_shape("adaptive_max_pool2d", inputs[1], [1, 1], 1)?;
        Ok(specs)
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i != 2
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b100)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let gg = grad0(grads)?;
        let dg = if ctx.needs_grad(0) {
            // Indices reach here through `drop_padding_windows`: in the plane.
            Some(gather_at_indices(&gg, &ctx.input(2)?)?)
        } else {
            None
        };
        let dx = if ctx.needs_grad(1) {
            Some(zeros_of(ctx.meta(1))?)
        } else {
            None
        };
        Ok(vec![dg, dx, None])
    }
}

/// The keyword arguments of `max_pool1d` / `max_pool2d` with PyTorch's
/// defaults (`stride=kernel_size, padding=0, dilation=1, ceil_mode=False`).
/// Each list holds one value for every spatial dim or one per dim. Any
/// [`IntoShape`] is the options of that kernel size: `x.max_pool2d(2)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaxPoolOptions {
    /// `kernel_size`.
    pub kernel_size: ShapeVec,
    /// `stride` (`None`: the kernel size).
    pub stride: Option<ShapeVec>,
    /// `padding` (default 0).
    pub padding: ShapeVec,
    /// `dilation` (default 1).
    pub dilation: ShapeVec,
    /// `ceil_mode` (default false).
    pub ceil_mode: bool,
}

impl MaxPoolOptions {
    /// A window of `kernel_size`, PyTorch's other defaults.
    pub fn new(kernel_size: impl IntoShape) -> Self {
        MaxPoolOptions {
            kernel_size: kernel_size.into_shape(),
            stride: None,
            padding: smallvec::smallvec![0],
            dilation: smallvec::smallvec![1],
            ceil_mode: false,
        }
    }

    /// Sets `stride`.
    pub fn stride(mut self, s: impl IntoShape) -> Self {
        self.stride = Some(s.into_shape());
        self
    }

    /// Sets `padding`.
    pub fn padding(mut self, p: impl IntoShape) -> Self {
        self.padding = p.into_shape();
        self
    }

    /// Sets `dilation`.
    pub fn dilation(mut self, d: impl IntoShape) -> Self {
        self.dilation = d.into_shape();
        self
    }

    /// Sets `ceil_mode`.
    pub fn ceil_mode(mut self, on: bool) -> Self {
        self.ceil_mode = on;
        self
    }
}

impl<T: IntoShape> From<T> for MaxPoolOptions {
    fn from(k: T) -> Self {
        MaxPoolOptions::new(k)
    }
}

/// The keyword arguments of `avg_pool1d` / `avg_pool2d` with PyTorch's
/// defaults (`stride=kernel_size, padding=0, ceil_mode=False,
/// count_include_pad=True, divisor_override=None`). Any [`IntoShape`] is
/// the options of that kernel size: `x.avg_pool2d(2)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AvgPoolOptions {
    /// `kernel_size`.
    pub kernel_size: ShapeVec,
    /// `stride` (`None`: the kernel size).
    pub stride: Option<ShapeVec>,
    /// `padding` (default 0).
    pub padding: ShapeVec,
    /// `ceil_mode` (default false).
    pub ceil_mode: bool,
    /// `count_include_pad` (default true).
    pub count_include_pad: bool,
    /// `divisor_override` (default none; 2-d only).
    pub divisor_override: Option<i64>,
}

impl AvgPoolOptions {
    /// A window of `kernel_size`, PyTorch's other defaults.
    pub fn new(kernel_size: impl IntoShape) -> Self {
        AvgPoolOptions {
            kernel_size: kernel_size.into_shape(),
            stride: None,
            padding: smallvec::smallvec![0],
            ceil_mode: false,
            count_include_pad: true,
            divisor_override: None,
        }
    }

    /// Sets `stride`.
    pub fn stride(mut self, s: impl IntoShape) -> Self {
        self.stride = Some(s.into_shape());
        self
    }

    /// Sets `padding`.
    pub fn padding(mut self, p: impl IntoShape) -> Self {
        self.padding = p.into_shape();
        self
    }

    /// Sets `ceil_mode`.
    pub fn ceil_mode(mut self, on: bool) -> Self {
        self.ceil_mode = on;
        self
    }

    /// Sets `count_include_pad`.
    pub fn count_include_pad(mut self, on: bool) -> Self {
        self.count_include_pad = on;
        self
    }

    /// Sets `divisor_override`.
    pub fn divisor_override(mut self, d: i64) -> Self {
        self.divisor_override = Some(d);
        self
    }
}

impl<T: IntoShape> From<T> for AvgPoolOptions {
    fn from(k: T) -> Self {
        AvgPoolOptions::new(k)
    }
}

/// An int-or-pair argument of a 2-d pooling as two sizes: PyTorch's
/// "kernel_size must either be a single int, or a tuple of two ints" and
/// the negative-value errors.
fn pair(op: &'static str, what: &str, v: &[i64], detail: &str) -> Result<[usize; 2]> {
    let (a, b) = match v {
        [a] => (*a, *a),
        [a, b] => (*a, *b),
        _ => return Err(Error::invalid(op, format!("{op}: {what} {detail}"))),
    };
    if a < 0 || b < 0 {
        let msg = match what {
            "padding" => format!("pad must be non-negative, but got pad: {}", a.min(b)),
            "kernel_size" => format!("kernel size should be greater than zero, but got kH: {a} kW: {b}"),
            "stride" => format!("stride should be greater than zero, but got dH: {a} dW: {b}"),
            _ => format!("dilation should be greater than zero, but got dilationH: {a} dilationW: {b}"),
        };
        return Err(Error::invalid(op, msg));
    }
    let big = |v: i64| usize::try_from(v).map_err(|_| Error::overflow(op, format!("{what} too large")));
    Ok([big(a)?, big(b)?])
}

/// The window of a 2-d max pool from its options.
fn max_params(op: &'static str, o: &MaxPoolOptions) -> Result<Pool2dParams> {
    let kernel = pair(
        op,
        "kernel_size",
        &o.kernel_size,
        "must either be a single int, or a tuple of two ints",
    )?;
    let stride = match &o.stride {
        Some(s) if !s.is_empty() => pair(
            op,
            "stride",
            s,
            "must either be omitted, a single int, or a tuple of two ints",
        )?,
        _ => kernel,
    };
    let padding = pair(
        op,
        "padding",
        &o.padding,
        "must either be a single int, or a tuple of two ints",
    )?;
    let dilation = pair(
        op,
        "dilation",
        &o.dilation,
        "must be either a single int, or a tuple of two ints",
    )?;
    Ok(Pool2dParams {
        kernel,
        stride,
        padding,
        dilation,
        ceil_mode: o.ceil_mode,
    })
}

/// The average pool operator from its options.
fn avg_op(op: &'static str, o: &AvgPoolOptions) -> Result<AvgPool2d> {
    let kernel = pair(
        op,
        "kernel_size",
        &o.kernel_size,
        "must either be a single int, or a tuple of two ints",
    )?;
    let stride = match &o.stride {
        Some(s) if !s.is_empty() => pair(
            op,
            "stride",
            s,
            "must either be omitted, a single int, or a tuple of two ints",
        )?,
        _ => kernel,
    };
    let padding = pair(
        op,
        "padding",
        &o.padding,
        "must either be a single int, or a tuple of two ints",
    )?;
    Ok(AvgPool2d {
        params: Pool2dParams {
            kernel,
            stride,
            padding,
            dilation: [1, 1],
            ceil_mode: o.ceil_mode,
        },
        count_include_pad: o.count_include_pad,
        divisor_override: o.divisor_override,
    })
}

/// PyTorch's `check1d`: a 1-d pooling's argument holds one value.
fn one(op: &'static str, what: &str, v: &[i64]) -> Result<i64> {
    match v {
        [a] => Ok(*a),
        _ => Err(Error::invalid(
            op,
            format!("{op}() argument '{what}' should contain one int (got {})", v.len()),
        )),
    }
}

/// PyTorch's `checkDimRange(op, self, 2, 4)` of the 1-d poolings.
fn check_1d_input(op: &'static str, x: &Tensor) -> Result<()> {
    if !(2..4).contains(&x.ndim()) {
        return Err(Error::invalid(
            op,
            format!(
                "Expected 2 to 3 dimensions, but got {}-dimensional tensor for argument #1 'self' (while checking \
                 arguments for {op})",
                x.ndim()
            ),
        ));
    }
    Ok(())
}

/// An adaptive pool's output size: one value for both dims or two, none negative.
fn adaptive_size(op: &'static str, v: &[i64], k: usize) -> Result<Vec<usize>> {
    let v: Vec<i64> = match (v.len(), k) {
        (1, _) => vec![v[0]; k],
        (n, k) if n == k => v.to_vec(),
        _ => return Err(Error::invalid(op, format!("{op}: output_size must be {k}"))),
    };
    if v.iter().any(|&s| s < 0) {
        let list = v.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ");
        return Err(Error::invalid(
            op,
            format!("{op}: elements of output_size must be greater than or equal to 0 but received {{{list}}}"),
        ));
    }
    Ok(v.into_iter().map(|s| s as usize).collect())
}

/// # Pooling
///
/// `max_pool1d`, `max_pool2d` (with or without indices), `avg_pool1d`,
/// `avg_pool2d`, `adaptive_avg_pool1d/2d` and `adaptive_max_pool1d/2d`
/// with PyTorch's semantics: flat `H * W` indices, NaN propagating through
/// max pools, `ceil_mode`, `count_include_pad`, `divisor_override`, the
/// adaptive windows `[floor(i * H / h), ceil((i + 1) * H / h))`. Inputs are
/// batched (`[N, C, *spatial]`) or not (`[C, *spatial]`).
///
/// ```
/// use ferrotorch_core::{MaxPoolOptions, Tensor};
/// let x = Tensor::arange_step(0.0, 16.0, 1.0)?.reshape([1, 1, 4, 4])?;
/// let (v, i) = x.max_pool2d_with_indices(2)?;
/// assert_eq!(v.to_vec::<f32>()?, [5.0, 7.0, 13.0, 15.0]);
/// assert_eq!(i.to_vec::<i64>()?, [5, 7, 13, 15]);
/// let y = x.max_pool2d(MaxPoolOptions::new(3).stride(1).padding(1))?;
/// assert_eq!(y.shape(), &[1, 1, 4, 4]);
/// assert_eq!(x.avg_pool2d(4)?.item::<f32>()?, 7.5);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `torch.nn.functional.max_pool2d(input, kernel_size, stride, padding,
    /// dilation, ceil_mode)` of `[N, C, H, W]` or `[C, H, W]`.
    ///
    /// Errors, with PyTorch's messages, for another rank or an empty
    /// non-batch dim, a zero or negative kernel size, stride or dilation, a
    /// padding above half the kernel, an output smaller than 1, bool input,
    /// and argument lists of other lengths than 1 or 2.
    pub fn max_pool2d(&self, opts: impl Into<MaxPoolOptions>) -> Result<Tensor> {
        Ok(self.max_pool2d_with_indices(opts)?.0)
    }

    /// `max_pool2d(..., return_indices=True)`: the values and the int64 flat
    /// position of each maximum in its `H * W` plane. Errors as
    /// [`Tensor::max_pool2d`].
    pub fn max_pool2d_with_indices(&self, opts: impl Into<MaxPoolOptions>) -> Result<(Tensor, Tensor)> {
        let params = max_params("max_pool2d", &opts.into())?;
        let mut r = call(&MaxPool2d { params }, &[self])?.into_iter();
        match (r.next(), r.next()) {
            (Some(v), Some(i)) => Ok((v, i)),
            _ => Err(Error::invalid("max_pool2d", "expected values and indices")),
        }
    }

    /// `torch.nn.functional.max_pool1d` of `[N, C, L]` or `[C, L]`: the
    /// 2-d pool of a height-1 view. Errors, with PyTorch's `max_pool1d()`
    /// messages, for another rank, a non-positive kernel size or stride,
    /// negative padding or dilation, a padding above half the kernel or an
    /// empty output.
    pub fn max_pool1d(&self, opts: impl Into<MaxPoolOptions>) -> Result<Tensor> {
        Ok(self.max_pool1d_with_indices(opts)?.0)
    }

    /// `max_pool1d(..., return_indices=True)`: values and int64 positions
    /// along `L`. Errors as [`Tensor::max_pool1d`].
    pub fn max_pool1d_with_indices(&self, opts: impl Into<MaxPoolOptions>) -> Result<(Tensor, Tensor)> {
        const OP: &str = "max_pool1d";
        let o = opts.into();
        if !(2..=3).contains(&self.ndim()) || self.shape()[self.ndim() - 2] == 0 && self.ndim() == 2 {
            return Err(Error::invalid(
                OP,
                format!(
                    "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, but \
                     got:{:?}",
                    self.shape()
                ),
            ));
        }
        let k = one(OP, "kernel_size", &o.kernel_size)?;
        let s = match &o.stride {
            Some(s) if !s.is_empty() => one(OP, "stride", s)?,
            _ => k,
        };
        let p = one(OP, "padding", &o.padding)?;
        let d = one(OP, "dilation", &o.dilation)?;
        if k <= 0 {
            return Err(Error::invalid(
                OP,
                format!("max_pool1d() kernel_size must be greater than zero, but got {k}"),
            ));
        }
        if s <= 0 {
            return Err(Error::invalid(
                OP,
                format!("max_pool1d() stride must be greater than zero, but got {s}"),
            ));
        }
        if p < 0 {
            return Err(Error::invalid(
                OP,
                format!("max_pool1d() padding must be non-negative, but got {p}"),
            ));
        }
        if p > k / 2 {
            return Err(Error::invalid(
                OP,
                format!(
                    "max_pool1d() padding should be at most half of kernel size, but got padding={p} and kernel_size={k}"
                ),
            ));
        }
        if d <= 0 {
            return Err(Error::invalid(
                OP,
                format!("max_pool1d() dilation must be greater than zero, but got {d}"),
            ));
        }
        let len = self.shape()[self.ndim() - 1] as i64;
        let out = pooling_output_size(
            OP,
            len as usize,
            k as usize,
            p as usize,
            s as usize,
            d as usize,
            o.ceil_mode,
        )?;
        if out < 1 {
            return Err(Error::invalid(
                OP,
                format!("max_pool1d() Invalid computed output size: {out}"),
            ));
        }
        let o2 = MaxPoolOptions {
            kernel_size: smallvec::smallvec![1, k],
            stride: Some(smallvec::smallvec![1, s]),
            padding: smallvec::smallvec![0, p],
            dilation: smallvec::smallvec![1, d],
            ceil_mode: o.ceil_mode,
        };
        let (v, i) = self.unsqueeze(-2)?.max_pool2d_with_indices(o2)?;
        Ok((v.squeeze_dim(-2)?, i.squeeze_dim(-2)?))
    }

    /// `torch.nn.functional.avg_pool2d(input, kernel_size, stride, padding,
    /// ceil_mode, count_include_pad, divisor_override)` of `[N, C, H, W]` or
    /// `[C, H, W]` (floats or int64).
    ///
    /// Errors, with PyTorch's messages, as [`Tensor::max_pool2d`], and for
    /// `divisor_override` 0.
    pub fn avg_pool2d(&self, opts: impl Into<AvgPoolOptions>) -> Result<Tensor> {
        let op = avg_op("avg_pool2d", &opts.into())?;
        call1(&op, &[self])
    }

    /// `torch.nn.functional.avg_pool1d(input, kernel_size, stride, padding,
    /// ceil_mode, count_include_pad)` of `[N, C, L]` or `[C, L]`: the 2-d
    /// pool of a height-1 view. Errors as [`Tensor::avg_pool2d`], for
    /// another rank, lists of more than one value and a `divisor_override`.
    pub fn avg_pool1d(&self, opts: impl Into<AvgPoolOptions>) -> Result<Tensor> {
        const OP: &str = "avg_pool1d";
        let o = opts.into();
        check_1d_input(OP, self)?;
        let k = one(OP, "kernel_size", &o.kernel_size)?;
        let s = match &o.stride {
            Some(s) if !s.is_empty() => one(OP, "stride", s)?,
            _ => k,
        };
        let p = one(OP, "padding", &o.padding)?;
        if o.divisor_override.is_some() {
            return Err(Error::invalid(
                OP,
                "avg_pool1d() got an unexpected keyword argument 'divisor_override'",
            ));
        }
        let o2 = AvgPoolOptions {
            kernel_size: smallvec::smallvec![1, k],
            stride: Some(smallvec::smallvec![1, s]),
            padding: smallvec::smallvec![0, p],
            ..o
        };
        self.unsqueeze(-2)?.avg_pool2d(o2)?.squeeze_dim(-2)
    }

    /// `torch.nn.functional.adaptive_avg_pool2d(input, output_size)` of
    /// `[N, C, H, W]` or `[C, H, W]`: one size for both dims or two. An
    /// output of `1 x 1` is the mean over the last two dims, as PyTorch
    /// computes it.
    ///
    /// Errors, with PyTorch's messages, for another rank, an empty `H` or
    /// `W`, a negative size, more than two sizes, and non-float input.
    pub fn adaptive_avg_pool2d(&self, output_size: impl IntoShape) -> Result<Tensor> {
        const OP: &str = "adaptive_avg_pool2d";
        let out = adaptive_size(OP, &output_size.into_shape(), 2)?;
        if out == [1, 1] {
            return self.mean_dim([-1, -2], true);
        }
        // As PyTorch: the mean above takes any input of 2 dims or more, the
        // pooling kernel only a 3-d or 4-d one.
        if !(3..=4).contains(&self.ndim()) {
            return Err(Error::invalid(
                OP,
                format!(
                    "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {:?}",
                    self.shape()
                ),
            ));
        }
        call1(
            &AdaptiveAvgPool2d {
                output_size: [out[0], out[1]],
            },
            &[self],
        )
    }

    /// `torch.nn.functional.adaptive_avg_pool1d(input, output_size)` of
    /// `[N, C, L]` or `[C, L]`. Errors as [`Tensor::adaptive_avg_pool2d`].
    pub fn adaptive_avg_pool1d(&self, output_size: impl IntoShape) -> Result<Tensor> {
        const OP: &str = "adaptive_avg_pool1d";
        check_1d_input(OP, self)?;
        let out = one(OP, "output_size", &output_size.into_shape())?;
        self.unsqueeze(-2)?.adaptive_avg_pool2d([1, out])?.squeeze_dim(-2)
    }

    /// `torch.nn.functional.adaptive_max_pool2d(input, output_size,
    /// return_indices=True)` of `[N, C, H, W]` or `[C, H, W]`: values and
    /// int64 flat `H * W` indices.
    ///
    /// Errors, with PyTorch's messages, for another rank, an empty non-batch
    /// dim, a negative size, more than two sizes, and non-float input.
    pub fn adaptive_max_pool2d(&self, output_size: impl IntoShape) -> Result<(Tensor, Tensor)> {
        const OP: &str = "adaptive_max_pool2d";
        let sizes = output_size.into_shape();
        if sizes.iter().any(|&s| s < 0) {
            let mut shape: Vec<i64> = self.shape_i64();
            let n = shape.len();
            if n >= 2 && sizes.len() <= 2 {
                shape[n - 2] = sizes[0];
                shape[n - 1] = *sizes.last().unwrap_or(&sizes[0]);
            }
            return Err(Error::invalid(
                OP,
                format!(
                    "Trying to create tensor with negative dimension {}: {shape:?}",
                    sizes.iter().copied().filter(|&s| s < 0).min().unwrap_or(-1)
                ),
            ));
        }
        let out = adaptive_size(OP, &sizes, 2)?;
        let mut r = call(
            &AdaptiveMaxPool2d {
                output_size: [out[0], out[1]],
            },
            &[self],
        )?
        .into_iter();
        match (r.next(), r.next()) {
            (Some(v), Some(i)) => Ok((v, i)),
            _ => Err(Error::invalid(OP, "expected values and indices")),
        }
    }

    /// `torch.nn.functional.adaptive_max_pool1d(input, output_size,
    /// return_indices=True)` of `[N, C, L]` or `[C, L]`. Errors as
    /// [`Tensor::adaptive_max_pool2d`].
    pub fn adaptive_max_pool1d(&self, output_size: impl IntoShape) -> Result<(Tensor, Tensor)> {
        const OP: &str = "adaptive_max_pool1d";
        check_1d_input(OP, self)?;
        let out = one(OP, "output_size", &output_size.into_shape())?;
        let (v, i) = self.unsqueeze(-2)?.adaptive_max_pool2d([1, out])?;
        Ok((v.squeeze_dim(-2)?, i.squeeze_dim(-2)?))
    }
}
