//! CPU kernels of `clamp` with tensor bounds, `lerp` and `nan_to_num`.

// Comparisons are generic over every dtype, bool included, where `a < b` is intended.
#![allow(clippy::bool_comparison)]

use half::{bf16, f16};

use super::pointwise::{Cost, map1, map2, map3};
use crate::dispatch::{Op, downcast_op};
use crate::ops::clamp_lerp::{ClampTensor, Lerp};
use crate::ops::float_class::{NanToNum, float_max};
use crate::{DType, Element, Result, Tensor, with_dtype};

/// Whether `v` is NaN (never, for integers and bool).
#[inline(always)]
#[allow(clippy::eq_op)]
fn is_nan<T: Element>(v: T) -> bool {
    v != v
}

pub(crate) fn clamp_tensor_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<ClampTensor>(op)?;
    let out = outputs[0];
    let dt = ClampTensor::dtype(inputs);
    with_dtype!(dt, T => {
        let nan = T::from_f64(f64::NAN);
        if op.has_min && op.has_max {
            // As PyTorch: NaN bounds give NaN, else min(max(x, lo), hi) with
            // std::max/std::min (a NaN x passes through both).
            map3::<T, T, T, T>("clamp", out, inputs[0], inputs[1], inputs[2], Cost::Cheap, |x, lo, hi, o| {
                for (((a, l), h), r) in x.iter().zip(lo).zip(hi).zip(o.iter_mut()) {
                    *r = if is_nan(*l) || is_nan(*h) {
                        nan
                    } else {
                        let v = if *a < *l { *l } else { *a };
                        if *h < v { *h } else { v }
                    };
                }
            })
        } else {
            // One bound: maximum / minimum, NaN from either side propagating.
            let lower = op.has_min;
            map2::<T, T, T>("clamp", out, inputs[0], inputs[1], Cost::Cheap, |x, b, o| {
                for ((a, b), r) in x.iter().zip(b).zip(o.iter_mut()) {
                    *r = if is_nan(*a) || is_nan(*b) {
                        nan
                    } else if (*a < *b) == lower {
                        *b
                    } else {
                        *a
                    };
                }
            })
        }
    })
}

/// One lerp element as PyTorch's CPU kernel: a fused multiply-add from
/// `start` for `|w| < 0.5`, else from `end`.
macro_rules! lerp_one {
    ($s:expr, $e:expr, $w:expr) => {{
        let (s, e, w) = ($s, $e, $w);
        if w.abs() < 0.5 {
            w.mul_add(e - s, s)
        } else {
            (w - 1.0).mul_add(e - s, e)
        }
    }};
}

fn lerp_via_f32<H: Element>(s: &[H], e: &[H], w: impl Fn(usize) -> f32, o: &mut [H]) {
    for (i, ((a, b), r)) in s.iter().zip(e).zip(o.iter_mut()).enumerate() {
        *r = H::from_f64(lerp_one!(a.to_f64() as f32, b.to_f64() as f32, w(i)) as f64);
    }
}

pub(crate) fn lerp_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<Lerp>(op)?;
    let (s, e, out) = (inputs[0], inputs[1], outputs[0]);
    let name = op.entry().base_name();
    match (op.weight, s.dtype()) {
        (Some(w), DType::F64) => {
            let w = w.to_f64();
            map2::<f64, f64, f64>(name, out, s, e, Cost::Cheap, |x, y, o| {
                for ((a, b), r) in x.iter().zip(y).zip(o.iter_mut()) {
                    *r = lerp_one!(*a, *b, w);
                }
            })
        }
        (Some(w), DType::F32) => {
            let w = w.to_f64() as f32;
            map2::<f32, f32, f32>(name, out, s, e, Cost::Cheap, |x, y, o| {
                for ((a, b), r) in x.iter().zip(y).zip(o.iter_mut()) {
                    *r = lerp_one!(*a, *b, w);
                }
            })
        }
        (Some(w), dt) => {
            let w = w.to_f64() as f32;
            with_dtype!(dt, T => map2::<T, T, T>(name, out, s, e, Cost::Cheap, |x, y, o| lerp_via_f32(x, y, |_| w, o)))
        }
        (None, DType::F64) => map3::<f64, f64, f64, f64>(name, out, s, e, inputs[2], Cost::Cheap, |x, y, w, o| {
            for (((a, b), w), r) in x.iter().zip(y).zip(w).zip(o.iter_mut()) {
                *r = lerp_one!(*a, *b, *w);
            }
        }),
        (None, DType::F32) => map3::<f32, f32, f32, f32>(name, out, s, e, inputs[2], Cost::Cheap, |x, y, w, o| {
            for (((a, b), w), r) in x.iter().zip(y).zip(w).zip(o.iter_mut()) {
                *r = lerp_one!(*a, *b, *w);
            }
        }),
        (None, DType::F16) => map3::<f16, f16, f16, f16>(name, out, s, e, inputs[2], Cost::Cheap, |x, y, w, o| {
            lerp_via_f32(x, y, |i| w[i].to_f32(), o)
        }),
        (None, _) => map3::<bf16, bf16, bf16, bf16>(name, out, s, e, inputs[2], Cost::Cheap, |x, y, w, o| {
            lerp_via_f32(x, y, |i| w[i].to_f32(), o)
        }),
    }
}

pub(crate) fn nan_to_num_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<NanToNum>(op)?;
    let (x, out) = (inputs[0], outputs[0]);
    let dt = x.dtype();
    with_dtype!(dt, T => {
        match float_max(dt) {
            Some(max) => {
                let nan = T::from_f64(op.nan);
                let pos = T::from_f64(op.posinf.unwrap_or(max));
                let neg = T::from_f64(op.neginf.unwrap_or(-max));
                map1::<T, T>("nan_to_num", out, x, Cost::Cheap, |a, o| {
                    for (v, r) in a.iter().zip(o.iter_mut()) {
                        let f = v.to_f64();
                        *r = if f.is_nan() {
                            nan
                        } else if f == f64::INFINITY {
                            pos
                        } else if f == f64::NEG_INFINITY {
                            neg
                        } else {
                            *v
                        };
                    }
                })
            }
            None => map1::<T, T>("nan_to_num", out, x, Cost::Cheap, |a, o| o.copy_from_slice(a)),
        }
    })
}
