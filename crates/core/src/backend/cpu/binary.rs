//! CPU kernels of the binary pointwise operators and `where`.

// Comparisons are generic over every dtype, bool included, where `a < b` is intended.
#![allow(clippy::bool_comparison)]

use std::sync::atomic::{AtomicBool, Ordering};

use half::{bf16, f16};

use super::pointwise::{Cost, map2, map3};
use super::simd::multiversion;
use super::unary::via_f32_2;
use crate::dispatch::{Op, downcast_op};
use crate::ops::activation_backward::{ActivationBackward, ActivationKind};
use crate::ops::{Binary, BinaryKind, Rounding};
use crate::{DType, Element, Error, Result, Tensor, with_dtype};

/// Floor division of floats, as PyTorch's `div_floor_floating`.
#[inline(always)]
fn div_floor_f64(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && (b < 0.0) != (m < 0.0) {
        div -= 1.0;
    }
    if div != 0.0 {
        let mut f = div.floor();
        if div - f > 0.5 {
            f += 1.0;
        }
        f
    } else {
        0.0f64.copysign(a / b)
    }
}

#[inline(always)]
fn max_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a > b {
        a
    } else {
        b
    }
}

#[inline(always)]
fn min_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a < b {
        a
    } else {
        b
    }
}

#[inline(always)]
fn f32_block(op: &Binary, x: &[f32], y: &[f32], o: &mut [f32]) {
    use BinaryKind::*;
    macro_rules! each {
        ($f:expr) => {
            for ((a, b), c) in x.iter().zip(y).zip(o.iter_mut()) {
                let (a, b): (f32, f32) = (*a, *b);
                *c = $f(a, b);
            }
        };
    }
    let alpha = op.alpha.to_f64() as f32;
    match op.kind {
        Add if alpha == 1.0 => each!(|a, b| a + b),
        // PyTorch's add kernel: `fmadd(b, alpha, a)`, one rounding.
        Add => each!(|a: f32, b: f32| b.mul_add(alpha, a)),
        Sub if alpha == 1.0 => each!(|a, b| a - b),
        Sub => {
            let na = neg_alpha(op) as f32;
            each!(|a: f32, b: f32| b.mul_add(na, a))
        }
        Mul => each!(|a: f32, b: f32| a * b),
        Div => match op.rounding {
            Rounding::None => each!(|a: f32, b: f32| a / b),
            Rounding::Trunc => each!(|a: f32, b: f32| (a / b).trunc()),
            Rounding::Floor => each!(|a: f32, b: f32| div_floor_f64(a as f64, b as f64) as f32),
        },
        Pow => each!(|a: f32, b: f32| a.powf(b)),
        Maximum => each!(|a: f32, b: f32| {
            let m = if a > b { a } else { b };
            if a.is_nan() || b.is_nan() { f32::NAN } else { m }
        }),
        Minimum => each!(|a: f32, b: f32| {
            let m = if a < b { a } else { b };
            if a.is_nan() || b.is_nan() { f32::NAN } else { m }
        }),
        _ => unreachable!("predicates have bool outputs"),
    }
}

multiversion! {
    /// A block of an f32 binary op, vectorised for the CPU.
    fn binary_f32(op: &Binary, x: &[f32], y: &[f32], o: &mut [f32]) {
        f32_block(op, x, y, o)
    }
}

/// `-alpha` of a subtraction, negated as PyTorch's `sub` negates its Scalar
/// before adding (an integer `i64::MIN` stays `i64::MIN`).
#[inline]
fn neg_alpha(op: &Binary) -> f64 {
    match op.alpha {
        crate::Scalar::Int(i) => i.wrapping_neg() as f64,
        a => -a.to_f64(),
    }
}

fn f64_one(op: &Binary, a: f64, b: f64) -> f64 {
    use BinaryKind::*;
    let alpha = op.alpha.to_f64();
    match op.kind {
        Add => b.mul_add(alpha, a),
        Sub => b.mul_add(neg_alpha(op), a),
        Mul => a * b,
        Div => match op.rounding {
            Rounding::None => a / b,
            Rounding::Trunc => (a / b).trunc(),
            Rounding::Floor => div_floor_f64(a, b),
        },
        Pow => a.powf(b),
        Maximum => max_nan(a, b),
        Minimum => min_nan(a, b),
        _ => unreachable!("predicates have bool outputs"),
    }
}

/// [`f64_one`] over a block, the operator chosen once outside the loop
/// (the same expressions, so the same bits).
#[inline(always)]
fn f64_block(op: &Binary, x: &[f64], y: &[f64], o: &mut [f64]) {
    use BinaryKind::*;
    macro_rules! each {
        ($f:expr) => {
            for ((a, b), c) in x.iter().zip(y).zip(o.iter_mut()) {
                let (a, b): (f64, f64) = (*a, *b);
                *c = $f(a, b);
            }
        };
    }
    let alpha = op.alpha.to_f64();
    match op.kind {
        Add => each!(|a: f64, b: f64| b.mul_add(alpha, a)),
        Sub => {
            let na = neg_alpha(op);
            each!(|a: f64, b: f64| b.mul_add(na, a))
        }
        Mul => each!(|a: f64, b: f64| a * b),
        Div => match op.rounding {
            Rounding::None => each!(|a: f64, b: f64| a / b),
            Rounding::Trunc => each!(|a: f64, b: f64| (a / b).trunc()),
            Rounding::Floor => each!(div_floor_f64),
        },
        _ => each!(|a, b| f64_one(op, a, b)),
    }
}

multiversion! {
    /// A block of an f64 binary op, vectorised for the CPU.
    fn binary_f64(op: &Binary, x: &[f64], y: &[f64], o: &mut [f64]) {
        f64_block(op, x, y, o)
    }
}

/// Integer arithmetic; `None` on division by zero.
fn int_one(op: &Binary, a: i64, b: i64) -> Option<i64> {
    use BinaryKind::*;
    let alpha = op.alpha.to_i64();
    Some(match op.kind {
        Add => a.wrapping_add(alpha.wrapping_mul(b)),
        Sub => a.wrapping_sub(alpha.wrapping_mul(b)),
        Mul => a.wrapping_mul(b),
        Div => {
            if b == 0 {
                return None;
            }
            // Wrapping: i64::MIN / -1 is i64::MIN, as in PyTorch (whose
            // `%` of the same operands crashes; `wrapping_rem` gives 0).
            let q = a.wrapping_div(b);
            match op.rounding {
                Rounding::Floor if (a.wrapping_rem(b) != 0) && ((a < 0) != (b < 0)) => q.wrapping_sub(1),
                _ => q,
            }
        }
        Pow => super::unary::int_pow(a, b),
        Maximum => a.max(b),
        Minimum => a.min(b),
        _ => unreachable!("predicates have bool outputs"),
    })
}

fn cost(kind: BinaryKind) -> Cost {
    if kind == BinaryKind::Pow {
        Cost::Heavy
    } else {
        Cost::Cheap
    }
}

/// Arithmetic computed in `dt` (the engine converts operands of other dtypes).
fn arith(op: &Binary, dt: DType, out: &Tensor, a: &Tensor, b: &Tensor) -> Result<()> {
    let name = op.kind.entry().base_name();
    let c = cost(op.kind);
    match dt {
        DType::F32 => map2::<f32, f32, f32>(name, out, a, b, c, |x, y, o| binary_f32(op, x, y, o)),
        DType::F64 => map2::<f64, f64, f64>(name, out, a, b, c, |x, y, o| binary_f64(op, x, y, o)),
        DType::F16 => map2::<f16, f16, f16>(name, out, a, b, c, |x, y, o| {
            via_f32_2(x, y, o, |a, b, c| binary_f32(op, a, b, c))
        }),
        DType::BF16 => map2::<bf16, bf16, bf16>(name, out, a, b, c, |x, y, o| {
            via_f32_2(x, y, o, |a, b, c| binary_f32(op, a, b, c))
        }),
        dt => {
            let zero_div = AtomicBool::new(false);
            with_dtype!(dt, T => {
                map2::<T, T, T>(name, out, a, b, c, |x, y, o| {
                    for ((p, q), r) in x.iter().zip(y).zip(o.iter_mut()) {
                        match int_one(op, p.to_i64(), q.to_i64()) {
                            Some(v) => *r = T::from_i64(v),
                            None => zero_div.store(true, Ordering::Relaxed),
                        }
                    }
                })?
            });
            if zero_div.load(Ordering::Relaxed) {
                return Err(Error::invalid(name, "ZeroDivisionError: integer division by zero"));
            }
            Ok(())
        }
    }
}

/// Comparisons and logical ops, comparing in `dt`.
fn predicate(op: &Binary, dt: DType, out: &Tensor, a: &Tensor, b: &Tensor) -> Result<()> {
    use BinaryKind::*;
    let name = op.kind.entry().base_name();
    let kind = op.kind;
    with_dtype!(dt, T => {
        map2::<T, T, bool>(name, out, a, b, Cost::Cheap, |x, y, o| {
            macro_rules! each {
                ($f:expr) => {
                    for ((p, q), r) in x.iter().zip(y).zip(o.iter_mut()) {
                        *r = $f(*p, *q);
                    }
                };
            }
            match kind {
                Eq => each!(|p: T, q: T| p == q),
                Ne => each!(|p: T, q: T| p != q),
                Lt => each!(|p: T, q: T| p < q),
                Le => each!(|p: T, q: T| p <= q),
                Gt => each!(|p: T, q: T| p > q),
                Ge => each!(|p: T, q: T| p >= q),
                LogicalAnd => each!(|p: T, q: T| p.is_nonzero() && q.is_nonzero()),
                LogicalOr => each!(|p: T, q: T| p.is_nonzero() || q.is_nonzero()),
                LogicalXor => each!(|p: T, q: T| p.is_nonzero() != q.is_nonzero()),
                _ => unreachable!("arithmetic ops are not predicates"),
            }
        })
    })
}

pub(crate) fn binary_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<Binary>(op)?;
    let (a, b, out) = (inputs[0], inputs[1], outputs[0]);
    let (dt, _) = op.dtypes(a, b);
    if op.kind.is_predicate() {
        predicate(op, dt, out, a, b)
    } else if dt == DType::Bool {
        // add/mul on bools are or/and; maximum/minimum likewise. add's
        // alpha is a bool too: `a + False * b` is `a`.
        let kind = op.kind;
        let alpha = op.alpha.to_f64() != 0.0;
        map2::<bool, bool, bool>(kind.entry().base_name(), out, a, b, Cost::Cheap, |x, y, o| {
            for ((p, q), r) in x.iter().zip(y).zip(o.iter_mut()) {
                *r = match kind {
                    BinaryKind::Mul | BinaryKind::Minimum => *p && *q,
                    BinaryKind::Add => *p || (alpha && *q),
                    _ => *p || *q,
                };
            }
        })
    } else {
        arith(op, dt, out, a, b)
    }
}

pub(crate) fn where_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let (c, x, y, out) = (inputs[0], inputs[1], inputs[2], outputs[0]);
    with_dtype!(out.dtype(), T => {
        map3::<bool, T, T, T>("where", out, c, x, y, Cost::Cheap, |m, p, q, r| {
            for (((m, p), q), r) in m.iter().zip(p).zip(q).zip(r.iter_mut()) {
                *r = if *m { *p } else { *q };
            }
        })
    })
}

multiversion! {
    /// relu's backward on f32 blocks, branch-free.
    fn threshold_backward_f32(g: &[f32], y: &[f32], o: &mut [f32]) {
        for ((g, y), o) in g.iter().zip(y).zip(o.iter_mut()) {
            *o = if *y <= 0.0 { 0.0 } else { *g };
        }
    }
}

/// relu's backward: `g` where `y > 0` (NaN passes), else 0.
pub(crate) fn threshold_backward_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let (g, y, out) = (inputs[0], inputs[1], outputs[0]);
    if g.dtype() == DType::F32 {
        return map2::<f32, f32, f32>("threshold_backward", out, g, y, Cost::Cheap, threshold_backward_f32);
    }
    with_dtype!(g.dtype(), T => {
        map2::<T, T, T>("threshold_backward", out, g, y, Cost::Cheap, |gs, ys, os| {
            let zero = T::default();
            for ((g, y), o) in gs.iter().zip(ys).zip(os.iter_mut()) {
                *o = if *y <= zero { zero } else { *g };
            }
        })
    })
}

/// tanh's and sigmoid's backward (`[grad, result]`), in f32 for the 16-bit
/// float types and rounded once, as PyTorch's CPU kernels; sin's and cos's
/// (`[grad, input]`), with the sine or cosine the forward kernels compute,
/// rounded to the dtype before the product as the composite formula does.
pub(crate) fn activation_backward_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<ActivationBackward>(op)?;
    let (g, y, out) = (inputs[0], inputs[1], outputs[0]);
    let name = op.entry().base_name();
    if matches!(op.0, ActivationKind::Sin | ActivationKind::Cos | ActivationKind::Square) {
        return by_input_backward(op, g, y, out);
    }
    match g.dtype() {
        DType::F32 => map2::<f32, f32, f32>(name, out, g, y, Cost::Cheap, |gs, ys, os| {
            for ((g, y), o) in gs.iter().zip(ys).zip(os.iter_mut()) {
                *o = op.apply(*g, *y);
            }
        }),
        DType::F64 => map2::<f64, f64, f64>(name, out, g, y, Cost::Cheap, |gs, ys, os| {
            for ((g, y), o) in gs.iter().zip(ys).zip(os.iter_mut()) {
                *o = op.apply(*g, *y);
            }
        }),
        dt => with_dtype!(dt, T => {
            map2::<T, T, T>(name, out, g, y, Cost::Cheap, |gs, ys, os| {
                for ((g, y), o) in gs.iter().zip(ys).zip(os.iter_mut()) {
                    *o = T::from_f64(op.apply(g.to_f64() as f32, y.to_f64() as f32) as f64);
                }
            })
        }),
    }
}

/// [`activation_backward_kernel`] for sin, cos and square: `grad * cos(x)`,
/// `grad * -sin(x)` or `grad * x + grad * x`.
fn by_input_backward(op: ActivationBackward, g: &Tensor, x: &Tensor, out: &Tensor) -> Result<()> {
    let name = op.entry().base_name();
    // As the f32 forward kernels: through f64, rounded once.
    let (sin32, cos32) = (|v: f32| (v as f64).sin() as f32, |v: f32| (v as f64).cos() as f32);
    match g.dtype() {
        DType::F32 => map2::<f32, f32, f32>(name, out, g, x, Cost::Heavy, |gs, xs, os| {
            for ((g, x), o) in gs.iter().zip(xs).zip(os.iter_mut()) {
                *o = op.by_input(*g, *x, sin32, cos32, |v| v);
            }
        }),
        DType::F64 => map2::<f64, f64, f64>(name, out, g, x, Cost::Heavy, |gs, xs, os| {
            for ((g, x), o) in gs.iter().zip(xs).zip(os.iter_mut()) {
                *o = op.by_input(*g, *x, f64::sin, f64::cos, |v| v);
            }
        }),
        dt => with_dtype!(dt, T => {
            // Each op of the composite formula computes in f32 and rounds
            // its result to the dtype once.
            let round = |v: f32| T::from_f64(v as f64).to_f64() as f32;
            map2::<T, T, T>(name, out, g, x, Cost::Heavy, |gs, xs, os| {
                for ((g, x), o) in gs.iter().zip(xs).zip(os.iter_mut()) {
                    let (g, x) = (g.to_f64() as f32, x.to_f64() as f32);
                    let v = op.by_input(g, x, |v| round(sin32(v)), |v| round(cos32(v)), round);
                    *o = T::from_f64(v as f64);
                }
            })
        }),
    }
}
