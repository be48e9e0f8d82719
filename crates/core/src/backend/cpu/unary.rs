//! CPU kernels of the unary pointwise operators.
//!
//! f32 runs through the vectorised math of [`super::math`] under the best
//! instruction set; f16/bf16 compute in f32 per block; f64 uses the
//! standard library; integers only take the operators defined for them.

use half::{bf16, f16};

use super::math::*;
use super::pointwise::{BLOCK, Cost, map1};
use super::simd::multiversion;
use crate::dispatch::{Op, downcast_op};
use crate::ops::{Clamp, PowScalar, Softplus, Unary, UnaryKind};
use crate::{DType, Element, Error, Result, Scalar, Tensor};

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const GELU_COEF: f64 = 0.044715;

#[inline(always)]
fn f32_block(kind: UnaryKind, x: &[f32], y: &mut [f32]) {
    use UnaryKind::*;
    macro_rules! each {
        ($f:expr) => {
            for (a, b) in x.iter().zip(y.iter_mut()) {
                let v: f32 = *a;
                *b = $f(v);
            }
        };
    }
    match kind {
        Neg => each!(|v: f32| -v),
        Abs => each!(|v: f32| v.abs()),
        Exp => each!(exp_f32),
        Log => each!(log_f32),
        Log1p => each!(log1p_f32),
        Expm1 => each!(expm1_f32),
        Sqrt => each!(|v: f32| v.sqrt()),
        Rsqrt => each!(|v: f32| 1.0 / v.sqrt()),
        Reciprocal => each!(|v: f32| 1.0 / v),
        Sin => each!(|v: f32| (v as f64).sin() as f32),
        Cos => each!(|v: f32| (v as f64).cos() as f32),
        Tanh => each!(tanh_f32),
        Sigmoid => each!(sigmoid_f32),
        Erf => each!(erf_f32),
        Erfinv => each!(erfinv_f32),
        Relu => each!(|v: f32| if v > 0.0 || v.is_nan() { v } else { 0.0 }),
        Gelu => each!(gelu_f32),
        GeluTanh => each!(|v: f32| {
            let inner = SQRT_2_OVER_PI as f32 * (v + GELU_COEF as f32 * v * v * v);
            0.5 * v * (1.0 + tanh_f32(inner))
        }),
        Silu => each!(|v: f32| v / (1.0 + exp_f32(-v))),
        Floor => each!(|v: f32| v.floor()),
        Ceil => each!(|v: f32| v.ceil()),
        Round => each!(|v: f32| v.round_ties_even()),
        Trunc => each!(|v: f32| v.trunc()),
        Sign => each!(|v: f32| if v > 0.0 {
            1.0
        } else if v < 0.0 {
            -1.0
        } else {
            0.0
        }),
    }
}

multiversion! {
    /// A block of an f32 unary op, vectorised for the CPU.
    fn unary_f32(kind: UnaryKind, x: &[f32], y: &mut [f32]) {
        f32_block(kind, x, y)
    }
}

fn f64_one(kind: UnaryKind, v: f64) -> f64 {
    use UnaryKind::*;
    match kind {
        Neg => -v,
        Abs => v.abs(),
        Exp => v.exp(),
        Log => v.ln(),
        Log1p => v.ln_1p(),
        Expm1 => v.exp_m1(),
        Sqrt => v.sqrt(),
        Rsqrt => 1.0 / v.sqrt(),
        Reciprocal => 1.0 / v,
        Sin => v.sin(),
        Cos => v.cos(),
        Tanh => v.tanh(),
        Sigmoid => 1.0 / (1.0 + (-v).exp()),
        Erf => erf_f64(v),
        Erfinv => erfinv_f64(v),
        Relu => {
            if v > 0.0 || v.is_nan() {
                v
            } else {
                0.0
            }
        }
        Gelu => v * 0.5 * (1.0 + erf_f64(v * std::f64::consts::FRAC_1_SQRT_2)),
        GeluTanh => 0.5 * v * (1.0 + (SQRT_2_OVER_PI * (v + GELU_COEF * v * v * v)).tanh()),
        Silu => v / (1.0 + (-v).exp()),
        Floor => v.floor(),
        Ceil => v.ceil(),
        Round => v.round_ties_even(),
        Trunc => v.trunc(),
        Sign => {
            if v > 0.0 {
                1.0
            } else if v < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
    }
}

/// Applies an f32 block function to a half-precision block through f32 buffers.
#[inline(always)]
pub(crate) fn via_f32<H: Element>(x: &[H], y: &mut [H], f: impl Fn(&[f32], &mut [f32])) {
    let mut a = [0f32; BLOCK];
    let mut b = [0f32; BLOCK];
    for (xs, ys) in x.chunks(BLOCK).zip(y.chunks_mut(BLOCK)) {
        let n = xs.len();
        super::copy::cast_block::<H, f32>(xs, &mut a[..n]);
        f(&a[..n], &mut b[..n]);
        super::copy::cast_block::<f32, H>(&b[..n], ys);
    }
}

/// [`via_f32`] for two operands: `o = f(x, y)` over f32 copies of the
/// elements, rounded back once.
pub(crate) fn via_f32_2<H: Element>(x: &[H], y: &[H], o: &mut [H], f: impl Fn(&[f32], &[f32], &mut [f32])) {
    let (mut a, mut b, mut c) = ([0f32; BLOCK], [0f32; BLOCK], [0f32; BLOCK]);
    for ((xs, ys), os) in x.chunks(BLOCK).zip(y.chunks(BLOCK)).zip(o.chunks_mut(BLOCK)) {
        let n = xs.len();
        super::copy::cast_block::<H, f32>(xs, &mut a[..n]);
        super::copy::cast_block::<H, f32>(ys, &mut b[..n]);
        f(&a[..n], &b[..n], &mut c[..n]);
        super::copy::cast_block::<f32, H>(&c[..n], os);
    }
}

fn cost(kind: UnaryKind) -> Cost {
    use UnaryKind::*;
    match kind {
        Neg | Abs | Relu | Floor | Ceil | Round | Trunc | Sign => Cost::Cheap,
        Exp | Log | Log1p | Expm1 | Sqrt | Rsqrt | Reciprocal | Sin | Cos | Tanh | Sigmoid | Erf | Erfinv | Gelu
        | GeluTanh | Silu => Cost::Heavy,
    }
}

/// The integer form of `kind` (wrapping, as PyTorch's C++: `-i64::MIN` and
/// `abs(i64::MIN)` are `i64::MIN`), or `None` for a float-domain kind.
fn int_fn(kind: UnaryKind) -> Option<fn(i64) -> i64> {
    use UnaryKind::*;
    Some(match kind {
        Neg => i64::wrapping_neg,
        Abs => i64::wrapping_abs,
        Relu => |v| v.max(0),
        Sign => i64::signum,
        // Rounding is the identity on integers.
        Floor | Ceil | Round | Trunc => |v| v,
        // The front end promotes integer inputs of these to a float dtype.
        Exp | Log | Log1p | Expm1 | Sqrt | Rsqrt | Reciprocal | Sin | Cos | Tanh | Sigmoid | Erf | Erfinv | Gelu
        | GeluTanh | Silu => return None,
    })
}

/// Runs an f32 block function over any float dtype.
pub(crate) fn float_map(
    name: &'static str,
    out: &Tensor,
    x: &Tensor,
    cost: Cost,
    f32_fn: impl Fn(&[f32], &mut [f32]) + Sync,
    f64_fn: impl Fn(f64) -> f64 + Sync,
) -> Result<()> {
    match x.dtype() {
        DType::F32 => map1::<f32, f32>(name, out, x, cost, f32_fn),
        DType::F64 => map1::<f64, f64>(name, out, x, cost, |a, b| {
            for (s, d) in a.iter().zip(b.iter_mut()) {
                *d = f64_fn(*s);
            }
        }),
        DType::F16 => map1::<f16, f16>(name, out, x, cost, |a, b| via_f32(a, b, &f32_fn)),
        DType::BF16 => map1::<bf16, bf16>(name, out, x, cost, |a, b| via_f32(a, b, &f32_fn)),
        d => Err(Error::dtype(name, d, "expects a floating-point input")),
    }
}

fn int_map(name: &'static str, out: &Tensor, x: &Tensor, cost: Cost, f: impl Fn(i64) -> i64 + Sync) -> Result<()> {
    crate::with_dtype!(x.dtype(), T => {
        map1::<T, T>(name, out, x, cost, |a, b| {
            for (s, d) in a.iter().zip(b.iter_mut()) {
                *d = T::from_i64(f(s.to_i64()));
            }
        })
    })
}

pub(crate) fn unary_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let kind = downcast_op::<Unary>(op)?.0;
    let (x, out) = (inputs[0], outputs[0]);
    let name = kind.error_name();
    if x.dtype().is_floating_point() {
        float_map(
            name,
            out,
            x,
            cost(kind),
            |a, b| unary_f32(kind, a, b),
            |v| f64_one(kind, v),
        )
    } else {
        let f = int_fn(kind).ok_or_else(|| Error::dtype(name, x.dtype(), "expects a floating-point input"))?;
        int_map(name, out, x, cost(kind), f)
    }
}

/// Integer power as PyTorch's `powi` (negative exponents give 0 except for bases ±1).
pub(crate) fn int_pow(mut base: i64, mut exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 => {
                if exp % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let mut acc: i64 = 1;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exp >>= 1;
    }
    acc
}

pub(crate) fn pow_scalar_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let e = downcast_op::<PowScalar>(op)?.exponent;
    let (x, out) = (inputs[0], outputs[0]);
    if !x.dtype().is_floating_point() {
        let ei = e.to_i64();
        return int_map("pow", out, x, Cost::Cheap, move |v| int_pow(v, ei));
    }
    // As PyTorch, the exponent is first converted to the tensor's dtype
    // (1e-40 is 0 for an f16 tensor, so x ** 1e-40 is 1 there).
    let ef = match x.dtype() {
        DType::F16 => f16::from_f64(e.to_f64()).to_f64(),
        DType::BF16 => bf16::from_f64(e.to_f64()).to_f64(),
        DType::F32 => e.to_f64() as f32 as f64,
        _ => e.to_f64(),
    };
    macro_rules! special {
        ($body32:expr, $body64:expr) => {
            float_map(
                "pow",
                out,
                x,
                Cost::Cheap,
                |a, b| {
                    for (s, d) in a.iter().zip(b.iter_mut()) {
                        *d = $body32(*s);
                    }
                },
                $body64,
            )
        };
    }
    match ef {
        0.0 => special!(|_v: f32| 1.0f32, |_v: f64| 1.0),
        1.0 => special!(|v: f32| v, |v: f64| v),
        2.0 => special!(|v: f32| v * v, |v: f64| v * v),
        3.0 => special!(|v: f32| v * v * v, |v: f64| v * v * v),
        0.5 => special!(|v: f32| v.sqrt(), |v: f64| v.sqrt()),
        -0.5 => special!(|v: f32| 1.0 / v.sqrt(), |v: f64| 1.0 / v.sqrt()),
        -1.0 => special!(|v: f32| 1.0 / v, |v: f64| 1.0 / v),
        -2.0 => special!(|v: f32| 1.0 / (v * v), |v: f64| 1.0 / (v * v)),
        _ => {
            let e32 = ef as f32;
            float_map(
                "pow",
                out,
                x,
                Cost::Heavy,
                |a, b| {
                    for (s, d) in a.iter().zip(b.iter_mut()) {
                        *d = s.powf(e32);
                    }
                },
                move |v| v.powf(ef),
            )
        }
    }
}

pub(crate) fn clamp_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let c = downcast_op::<Clamp>(op)?;
    let (x, out) = (inputs[0], outputs[0]);
    if x.dtype().is_floating_point() {
        let lo = c.min.map_or(f64::NEG_INFINITY, Scalar::to_f64);
        let hi = c.max.map_or(f64::INFINITY, Scalar::to_f64);
        let (lo32, hi32) = (lo as f32, hi as f32);
        // A NaN bound makes every element NaN, as in PyTorch.
        let nan_bound = lo.is_nan() || hi.is_nan();
        // min(max(x, lo), hi) with NaN passing through.
        float_map(
            "clamp",
            out,
            x,
            Cost::Cheap,
            |a, b| {
                for (s, d) in a.iter().zip(b.iter_mut()) {
                    let v = *s;
                    let m = if v < lo32 { lo32 } else { v };
                    let m = if m > hi32 { hi32 } else { m };
                    *d = if v.is_nan() {
                        v
                    } else if nan_bound {
                        f32::NAN
                    } else {
                        m
                    };
                }
            },
            move |v| {
                if v.is_nan() {
                    v
                } else if nan_bound {
                    f64::NAN
                } else {
                    v.max(lo).min(hi)
                }
            },
        )
    } else {
        let lo = c.min.map_or(i64::MIN, Scalar::to_i64);
        let hi = c.max.map_or(i64::MAX, Scalar::to_i64);
        int_map("clamp", out, x, Cost::Cheap, move |v| v.max(lo).min(hi))
    }
}

pub(crate) fn softplus_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let s = downcast_op::<Softplus>(op)?;
    let (beta, th) = (s.beta, s.threshold);
    let (b32, t32) = (beta as f32, th as f32);
    float_map(
        "softplus",
        outputs[0],
        inputs[0],
        Cost::Heavy,
        |a, b| {
            for (x, y) in a.iter().zip(b.iter_mut()) {
                let z = *x * b32;
                *y = if z > t32 { *x } else { log1p_f32(exp_f32(z)) / b32 };
            }
        },
        move |x| {
            if x * beta > th {
                x
            } else {
                (x * beta).exp().ln_1p() / beta
            }
        },
    )
}
