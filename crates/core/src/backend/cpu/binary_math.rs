//! CPU kernels of [`crate::ops::binary_math`]: `atan2`, `hypot`,
//! `logaddexp(2)`, `copysign`, `remainder`, `fmod`, the bitwise ops, shifts
//! and `bitwise_not`.
//!
//! The transcendental ones compute f32 (and f16/bf16, through f32) in f64
//! and round once; `remainder`, `fmod` and `copysign` are exact in the
//! dtype itself, as PyTorch's kernels.

use std::sync::atomic::{AtomicBool, Ordering};

use half::{bf16, f16};

use super::pointwise::{Cost, map1, map2};
use crate::dispatch::{Op, downcast_op};
use crate::ops::binary_math::{BinaryMath, MathKind};
use crate::{DType, Element, Error, Result, Tensor, with_dtype};

/// Python's float modulus as PyTorch computes it: `fmod`, then the
/// divisor added when the signs differ.
macro_rules! float_remainder {
    ($a:expr, $b:expr) => {{
        let (a, b) = ($a, $b);
        let m = a % b;
        if m != 0.0 && (b < 0.0) != (m < 0.0) { m + b } else { m }
    }};
}

/// `log(e^a + e^b)` (`base2`: `log2(2^a + 2^b)`), as PyTorch's kernel.
fn logaddexp_f64(a: f64, b: f64, base2: bool) -> f64 {
    if a.is_infinite() && a == b {
        return a;
    }
    let m = if a < b { b } else { a };
    let d = -(a - b).abs();
    if base2 {
        m + d.exp2().ln_1p() * std::f64::consts::LOG2_E
    } else {
        m + d.exp().ln_1p()
    }
}

/// The ops computed in f64 whatever the float dtype (rounded once after).
fn transcendental(kind: MathKind, a: f64, b: f64) -> f64 {
    match kind {
        MathKind::Atan2 => a.atan2(b),
        MathKind::Hypot => a.hypot(b),
        MathKind::LogAddExp => logaddexp_f64(a, b, false),
        MathKind::LogAddExp2 => logaddexp_f64(a, b, true),
        MathKind::Copysign => a.copysign(b),
        MathKind::Remainder => float_remainder!(a, b),
        MathKind::Fmod => a % b,
        _ => unreachable!("integer-only kinds have no float kernel"),
    }
}

/// A float op of `kind` in f32, rounded as PyTorch's f32 kernel rounds.
#[inline(always)]
fn f32_one(kind: MathKind, a: f32, b: f32) -> f32 {
    match kind {
        MathKind::Copysign => a.copysign(b),
        MathKind::Remainder => float_remainder!(a, b),
        MathKind::Fmod => a % b,
        k => transcendental(k, a as f64, b as f64) as f32,
    }
}

/// Integer ops; `None` on division by zero. `bits` is the dtype's width,
/// `signed` whether it is signed.
fn int_one(kind: MathKind, a: i64, b: i64, bits: i64, signed: bool) -> Option<i64> {
    use MathKind::*;
    Some(match kind {
        Remainder | Fmod => {
            if b == 0 {
                return None;
            }
            let r = a.wrapping_rem(b);
            if kind == Remainder && r != 0 && (r < 0) != (b < 0) {
                r.wrapping_add(b)
            } else {
                r
            }
        }
        BitwiseAnd => a & b,
        BitwiseOr => a | b,
        BitwiseXor => a ^ b,
        LeftShift if !(0..bits).contains(&b) => 0,
        LeftShift => ((a as u64) << b) as i64,
        RightShift if !(0..bits).contains(&b) => {
            if signed {
                a >> (bits - 1)
            } else {
                0
            }
        }
        RightShift => a >> b,
        _ => unreachable!("float-only kinds have no integer kernel"),
    })
}

fn cost(kind: MathKind) -> Cost {
    match kind {
        MathKind::Atan2 | MathKind::Hypot | MathKind::LogAddExp | MathKind::LogAddExp2 => Cost::Heavy,
        _ => Cost::Cheap,
    }
}

/// `kind` on a float dtype computed through f32 (f16, bf16).
fn via_f32<H: Element>(kind: MathKind, x: &[H], y: &[H], o: &mut [H]) {
    for ((p, q), r) in x.iter().zip(y).zip(o.iter_mut()) {
        *r = H::from_f64(f32_one(kind, p.to_f64() as f32, q.to_f64() as f32) as f64);
    }
}

pub(crate) fn binary_math_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<BinaryMath>(op)?;
    let (a, b, out) = (inputs[0], inputs[1], outputs[0]);
    let kind = op.kind;
    let name = kind.entry().base_name();
    let c = cost(kind);
    match op.dtype(a, b) {
        DType::F32 => map2::<f32, f32, f32>(name, out, a, b, c, |x, y, o| {
            for ((p, q), r) in x.iter().zip(y).zip(o.iter_mut()) {
                *r = f32_one(kind, *p, *q);
            }
        }),
        DType::F64 => map2::<f64, f64, f64>(name, out, a, b, c, |x, y, o| {
            for ((p, q), r) in x.iter().zip(y).zip(o.iter_mut()) {
                *r = transcendental(kind, *p, *q);
            }
        }),
        DType::F16 => map2::<f16, f16, f16>(name, out, a, b, c, |x, y, o| via_f32(kind, x, y, o)),
        DType::BF16 => map2::<bf16, bf16, bf16>(name, out, a, b, c, |x, y, o| via_f32(kind, x, y, o)),
        dt => {
            let zero_div = AtomicBool::new(false);
            let signed = dt != DType::U8;
            with_dtype!(dt, T => {
                let bits = 8 * std::mem::size_of::<T>() as i64;
                map2::<T, T, T>(name, out, a, b, c, |x, y, o| {
                    for ((p, q), r) in x.iter().zip(y).zip(o.iter_mut()) {
                        match int_one(kind, p.to_i64(), q.to_i64(), bits, signed) {
                            Some(v) => *r = T::from_i64(v),
                            None => zero_div.store(true, Ordering::Relaxed),
                        }
                    }
                })?
            });
            if zero_div.load(Ordering::Relaxed) {
                return Err(Error::invalid(name, "ZeroDivisionError"));
            }
            Ok(())
        }
    }
}

pub(crate) fn bitwise_not_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let (x, out) = (inputs[0], outputs[0]);
    match x.dtype() {
        DType::Bool => map1::<bool, bool>("bitwise_not", out, x, Cost::Cheap, |a, o| {
            for (p, r) in a.iter().zip(o.iter_mut()) {
                *r = !*p;
            }
        }),
        dt => with_dtype!(dt, T => {
            map1::<T, T>("bitwise_not", out, x, Cost::Cheap, |a, o| {
                for (p, r) in a.iter().zip(o.iter_mut()) {
                    *r = T::from_i64(!p.to_i64());
                }
            })
        }),
    }
}
