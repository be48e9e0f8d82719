//! CPU kernels of `cummax` / `cummin` and `logcumsumexp`.

// Comparisons are generic over every dtype, bool included, where `a < b` is intended.
#![allow(clippy::bool_comparison)]

use half::{bf16, f16};

use super::access::access;
use super::reduce::scan_lines;
use super::sort::line_kernel;
use crate::dispatch::{Op, downcast_op};
use crate::ops::scans::{CumExtreme, LogCumSumExp};
use crate::{DType, Element, Result, Tensor, with_dtype};

#[inline(always)]
#[allow(clippy::eq_op)]
fn nan<T: Element>(v: T) -> bool {
    v != v
}

pub(crate) fn cum_extreme_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<CumExtreme>(op)?;
    let name = op.entry().base_name();
    with_dtype!(inputs[0].dtype(), T => {
        line_kernel::<T>(name, inputs[0], outputs[0], outputs[1], op.dim, |items| {
            // PyTorch's cummax_cummin_helper: take x when it is NaN (every
            // NaN, so a run of NaNs gives each its own index), or when the
            // running value is not NaN and x is not worse (the last index on ties).
            let Some(&first) = items.first() else {
                return 0..0;
            };
            let mut best = first;
            for item in items.iter_mut() {
                let x = item.0;
                let better = if op.max { x >= best.0 } else { x <= best.0 };
                if nan(x) || (!nan(best.0) && better) {
                    best = *item;
                }
                *item = best;
            }
            0..items.len()
        })
    })
}

macro_rules! log_add_exp {
    ($(#[$doc:meta])* $name:ident, $T:ty) => {
        $(#[$doc])*
        #[inline]
        fn $name(x: $T, y: $T) -> $T {
            let (lo, hi) = if y.is_nan() {
                (y, y)
            } else {
                (if y < x { y } else { x }, if x < y { y } else { x })
            };
            if lo != hi || lo.is_finite() {
                (lo - hi).exp().ln_1p() + hi
            } else {
                x
            }
        }
    };
}

log_add_exp!(
    /// PyTorch's `_log_add_exp_helper`: `log(e^x + e^y)`, NaN propagating,
    /// with equal infinities returned as they are.
    log_add_exp, f64
);
log_add_exp!(
    /// The same in f32, the accumulation type of f16 and bf16.
    log_add_exp_f32, f32
);

pub(crate) fn logcumsumexp_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<LogCumSumExp>(op)?;
    let (x, out) = (inputs[0], outputs[0]);
    if x.ndim() == 0 {
        return super::copy::cast_into(out, x);
    }
    let acc = access("logcumsumexp", &[x], &[out])?;
    let d = op.dim;
    let n = x.shape()[d];
    let (st, ost) = (x.strides()[d], out.strides()[d]);
    let (xp, yp) = (acc.ins[0] as usize, acc.outs[0] as usize);
    macro_rules! run {
        ($T:ty, $A:ty, $add:expr) => {
            scan_lines(x, out, d, |ib, ob| {
                let (xp, yp) = (xp as *const $T, yp as *mut $T);
                let mut cum = <$A>::NEG_INFINITY;
                for i in 0..n {
                    // SAFETY: element i of this line of the input and the output.
                    unsafe {
                        cum = $add((*xp.add(ib + i * st)).to_f64() as $A, cum);
                        *yp.add(ob + i * ost) = <$T>::from_f64(cum as f64);
                    }
                }
            })
        };
    }
    match x.dtype() {
        DType::F64 => run!(f64, f64, log_add_exp),
        DType::F32 => run!(f32, f64, log_add_exp),
        DType::F16 => run!(f16, f32, log_add_exp_f32),
        _ => run!(bf16, f32, log_add_exp_f32),
    }
    Ok(())
}
