//! CPU kernels of the activations with hyperparameters and of the fused
//! activation derivatives (`*_backward`, `gelu_backward` included).
//!
//! f32 runs through the vectorised math of [`super::math`] (GELU's erf
//! by the Abramowitz-Stegun formula of PyTorch's vectorised kernel, with
//! one `exp` shared by the erf and the density); f64 through the formulas of
//! [`Act::f64`] / [`Act::grad_f64`]; f16/bf16 compute in f32.

use half::{bf16, f16};

use super::math::{exp_f32, expm1_f32, gelu_grad_f32, log1p_f32, tanh_f32};
use super::pointwise::{Cost, map2};
use super::simd::multiversion;
use super::unary::float_map;
use crate::dispatch::{Op, downcast_op};
use crate::ops::activation::{Act, Activation, ActivationGrad};
use crate::{DType, Element, Error, Result, Tensor};

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const KAPPA: f32 = 0.044_715;

/// The activation on one f32 element.
#[inline(always)]
fn act_one(act: Act, x: f32) -> f32 {
    match act {
        Act::LeakyRelu { slope } => {
            if x > 0.0 {
                x
            } else {
                x * slope as f32
            }
        }
        Act::Elu {
            alpha,
            scale,
            input_scale,
            ..
        } => {
            if x > 0.0 {
                x * scale as f32
            } else {
                expm1_f32(x * input_scale as f32) * (alpha * scale) as f32
            }
        }
        Act::Hardtanh { min, max } => {
            let (lo, hi) = (min as f32, max as f32);
            let m = if x < lo { lo } else { x };
            let m = if m > hi { hi } else { m };
            if x.is_nan() { x } else { m }
        }
        Act::Mish => x * tanh_f32(log1p_f32(exp_f32(x))),
        Act::Hardswish => {
            let r = (x + 3.0).clamp(0.0, 6.0);
            x * r / 6.0
        }
        Act::Hardsigmoid => (x + 3.0).clamp(0.0, 6.0) / 6.0,
        Act::LogSigmoid => {
            let m = if x < 0.0 { x } else { 0.0 };
            m - log1p_f32(exp_f32(-x.abs()))
        }
        Act::Softshrink { lambd } => {
            let l = lambd as f32;
            if x > l {
                x - l
            } else if x < -l {
                x + l
            } else {
                x * 0.0
            }
        }
        Act::Hardshrink { lambd } => {
            let l = lambd as f32;
            if x >= -l && x <= l { 0.0 } else { x }
        }
        Act::Gelu { .. } => f32::NAN,
    }
}

/// `grad * f'(x)` on one f32 element.
#[inline(always)]
fn grad_one(act: Act, g: f32, x: f32) -> f32 {
    match act {
        Act::LeakyRelu { slope } => {
            if x > 0.0 {
                g
            } else {
                g * slope as f32
            }
        }
        Act::Elu {
            alpha,
            scale,
            input_scale,
            ..
        } => {
            let is = input_scale as f32;
            if x <= 0.0 {
                g * is * (alpha * scale) as f32 * exp_f32(x * is)
            } else {
                g * scale as f32
            }
        }
        Act::Hardtanh { min, max } => {
            if x <= min as f32 || x >= max as f32 {
                0.0
            } else {
                g
            }
        }
        Act::Mish => {
            let s = 1.0 / (1.0 + exp_f32(-x));
            let t = tanh_f32(log1p_f32(exp_f32(x)));
            g * (t + x * s * (1.0 - t * t))
        }
        // PyTorch's hardswish_backward: 0 up to and at -3, 1 from 3.
        Act::Hardswish => {
            if x <= -3.0 {
                0.0
            } else if x < 3.0 {
                g * (x / 3.0 + 0.5)
            } else {
                g
            }
        }
        // PyTorch's hardsigmoid_backward multiplies by its f32 `1/6`.
        Act::Hardsigmoid => {
            if x > -3.0 && x < 3.0 {
                g * (1.0f32 / 6.0)
            } else {
                0.0
            }
        }
        Act::LogSigmoid => {
            let neg = x < 0.0;
            let (max_deriv, sign) = if neg { (1.0, 1.0) } else { (0.0, -1.0) };
            let z = exp_f32(-x.abs());
            g * (max_deriv - sign * (z / (1.0 + z)))
        }
        Act::Softshrink { lambd } | Act::Hardshrink { lambd } => {
            let l = lambd as f32;
            if x >= -l && x <= l { 0.0 } else { g }
        }
        Act::Gelu { tanh: false } => gelu_grad_f32(g, x),
        Act::Gelu { tanh: true } => {
            let x_sq = x * x;
            let inner = SQRT_2_OVER_PI * (x + KAPPA * x_sq * x);
            let t = tanh_f32(inner);
            let left = 0.5 * x;
            let right = 1.0 + t;
            let left_derivative = 0.5 * right;
            let right_derivative = left * (1.0 - t * t) * (SQRT_2_OVER_PI * (1.0 + 3.0 * KAPPA * x_sq));
            g * (left_derivative + right_derivative)
        }
    }
}

multiversion! {
    /// A block of an f32 activation, vectorised for the CPU (one loop per
    /// kind, so each vectorises on its own).
    fn act_block_f32(act: Act, x: &[f32], y: &mut [f32]) {
        macro_rules! each {
            ($a:expr) => {
                for (o, &v) in y.iter_mut().zip(x) {
                    *o = act_one($a, v);
                }
            };
        }
        match act {
            Act::LeakyRelu { slope } => each!(Act::LeakyRelu { slope }),
            Act::Elu { alpha, scale, input_scale, celu } => each!(Act::Elu { alpha, scale, input_scale, celu }),
            Act::Hardtanh { min, max } => each!(Act::Hardtanh { min, max }),
            Act::Mish => each!(Act::Mish),
            Act::Hardswish => each!(Act::Hardswish),
            Act::Hardsigmoid => each!(Act::Hardsigmoid),
            Act::LogSigmoid => each!(Act::LogSigmoid),
            Act::Softshrink { lambd } => each!(Act::Softshrink { lambd }),
            Act::Hardshrink { lambd } => each!(Act::Hardshrink { lambd }),
            Act::Gelu { tanh } => each!(Act::Gelu { tanh }),
        }
    }
}

multiversion! {
    /// A block of an f32 activation derivative, vectorised for the CPU (one
    /// loop per kind).
    fn grad_block_f32(act: Act, g: &[f32], x: &[f32], y: &mut [f32]) {
        macro_rules! each {
            ($a:expr) => {
                for ((o, &gv), &xv) in y.iter_mut().zip(g).zip(x) {
                    *o = grad_one($a, gv, xv);
                }
            };
        }
        match act {
            Act::LeakyRelu { slope } => each!(Act::LeakyRelu { slope }),
            Act::Elu { alpha, scale, input_scale, celu } => each!(Act::Elu { alpha, scale, input_scale, celu }),
            Act::Hardtanh { min, max } => each!(Act::Hardtanh { min, max }),
            Act::Mish => each!(Act::Mish),
            Act::Hardswish => each!(Act::Hardswish),
            Act::Hardsigmoid => each!(Act::Hardsigmoid),
            Act::LogSigmoid => each!(Act::LogSigmoid),
            Act::Softshrink { lambd } => each!(Act::Softshrink { lambd }),
            Act::Hardshrink { lambd } => each!(Act::Hardshrink { lambd }),
            Act::Gelu { tanh: false } => each!(Act::Gelu { tanh: false }),
            Act::Gelu { tanh: true } => each!(Act::Gelu { tanh: true }),
        }
    }
}

fn cost(act: Act) -> Cost {
    match act {
        Act::LeakyRelu { .. }
        | Act::Hardtanh { .. }
        | Act::Hardswish
        | Act::Hardsigmoid
        | Act::Softshrink { .. }
        | Act::Hardshrink { .. } => Cost::Cheap,
        _ => Cost::Heavy,
    }
}

pub(crate) fn activation_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let act = downcast_op::<Activation>(op)?.0;
    float_map(
        act.name(),
        outputs[0],
        inputs[0],
        cost(act),
        |a, b| act_block_f32(act, a, b),
        move |v| act.f64(v),
    )
}

pub(crate) fn activation_grad_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<ActivationGrad>(op)?;
    let act = op.0;
    let name = op.entry().base_name();
    let (g, x, out) = (inputs[0], inputs[1], outputs[0]);
    match g.dtype() {
        DType::F32 => map2::<f32, f32, f32>(name, out, g, x, cost(act), |gs, xs, os| grad_block_f32(act, gs, xs, os)),
        DType::F64 => map2::<f64, f64, f64>(name, out, g, x, cost(act), |gs, xs, os| {
            for ((o, &gv), &xv) in os.iter_mut().zip(gs).zip(xs) {
                *o = act.grad_f64(gv, xv);
            }
        }),
        DType::F16 => half_grad::<f16>(name, act, g, x, out),
        DType::BF16 => half_grad::<bf16>(name, act, g, x, out),
        d => Err(Error::dtype(name, d, "expects a floating-point input")),
    }
}

/// f16 / bf16 derivatives: each block widened to f32, run through the
/// vectorised f32 kernel, and rounded once (as PyTorch's reduced-precision
/// kernels compute in f32).
fn half_grad<H: Element>(name: &'static str, act: Act, g: &Tensor, x: &Tensor, out: &Tensor) -> Result<()> {
    map2::<H, H, H>(name, out, g, x, cost(act), |gs, xs, os| {
        super::unary::via_f32_2(gs, xs, os, |g, x, o| grad_block_f32(act, g, x, o))
    })
}
