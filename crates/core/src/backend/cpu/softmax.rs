//! CPU softmax / log_softmax: one line at a time (max, exp-sum, scale), lines in parallel.

use half::{bf16, f16};
use smallvec::SmallVec;

use super::access::access;
use super::math::{exp_f32, log_f32};
use super::simd::multiversion;
use crate::dispatch::{Op, downcast_op};
use crate::layout::Dims;
use crate::ops::Softmax;
use crate::{DType, Element, Error, Result, Tensor};

/// Softmax of one contiguous f32 line into `y`, with 16 fixed lanes for the
/// max and the sum (fixed-size chunks so the loops vectorise).
#[inline(always)]
fn line_f32(x: &[f32], y: &mut [f32], log: bool) {
    const L: usize = 16;
    let mut mx = [f32::NEG_INFINITY; L];
    let mut nan = false;
    let xs = x.chunks_exact(L);
    let xr = xs.remainder();
    for c in xs {
        for k in 0..L {
            let v = c[k];
            nan |= v.is_nan();
            mx[k] = if v > mx[k] { v } else { mx[k] };
        }
    }
    for (k, &v) in xr.iter().enumerate() {
        nan |= v.is_nan();
        mx[k] = if v > mx[k] { v } else { mx[k] };
    }
    // A row of -inf (fully masked) gives NaN, as in PyTorch.
    let max = if nan {
        f32::NAN
    } else {
        mx.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b))
    };
    let mut lanes = [0f32; L];
    let split = x.len() - xr.len();
    if log {
        for c in x[..split].chunks_exact(L) {
            for k in 0..L {
                lanes[k] += exp_f32(c[k] - max);
            }
        }
    } else {
        for (c, o) in x[..split].chunks_exact(L).zip(y[..split].chunks_exact_mut(L)) {
            for k in 0..L {
                let e = exp_f32(c[k] - max);
                o[k] = e;
                lanes[k] += e;
            }
        }
    }
    for (k, (v, o)) in x[split..].iter().zip(y[split..].iter_mut()).enumerate() {
        let e = exp_f32(*v - max);
        if !log {
            *o = e;
        }
        lanes[k] += e;
    }
    let mut w = L / 2;
    while w > 0 {
        for k in 0..w {
            lanes[k] += lanes[k + w];
        }
        w /= 2;
    }
    let sum = lanes[0];
    if log {
        let shift = max + log_f32(sum);
        for (o, v) in y.iter_mut().zip(x) {
            *o = *v - shift;
        }
    } else {
        let inv = 1.0 / sum;
        for o in y.iter_mut() {
            *o *= inv;
        }
    }
}

multiversion! {
    /// [`line_f32`] vectorised for the CPU.
    fn softmax_line_f32(x: &[f32], y: &mut [f32], log: bool) {
        line_f32(x, y, log)
    }
}

fn line_f64(x: &[f64], y: &mut [f64], log: bool) {
    let max = x
        .iter()
        .fold(f64::NEG_INFINITY, |m, &v| if v > m || v.is_nan() { v } else { m });
    let mut sum = 0.0;
    for (o, v) in y.iter_mut().zip(x) {
        let e = (*v - max).exp();
        sum += e;
        *o = e;
    }
    if log {
        let shift = max + sum.ln();
        for (o, v) in y.iter_mut().zip(x) {
            *o = *v - shift;
        }
    } else {
        for o in y.iter_mut() {
            *o /= sum;
        }
    }
}

fn offset_of(mut rem: usize, shape: &[usize], strides: &[usize]) -> usize {
    let mut off = 0;
    for d in (0..shape.len()).rev() {
        off += (rem % shape[d]) * strides[d];
        rem /= shape[d];
    }
    off
}

fn run<T: Element>(x: &Tensor, out: &Tensor, dim: usize, log: bool) -> Result<()> {
    let name = if log { "log_softmax" } else { "softmax" };
    let acc = access(name, &[x], &[out])?;
    let (l, ol) = (x.layout(), out.layout());
    let n = if l.ndim() == 0 { 1 } else { l.shape[dim] };
    let (st, ost) = if l.ndim() == 0 {
        (1, 1)
    } else {
        (l.strides[dim], ol.strides[dim])
    };
    let others: SmallVec<[usize; 6]> = (0..l.ndim()).filter(|&k| k != dim).collect();
    let outer: Dims = others.iter().map(|&k| l.shape[k]).collect();
    let ist: Dims = others.iter().map(|&k| l.strides[k]).collect();
    let ostr: Dims = others.iter().map(|&k| ol.strides[k]).collect();
    let n_lines: usize = outer.iter().product();
    let (xp, yp) = (acc.ins[0] as usize, acc.outs[0] as usize);
    let line = |o: usize| {
        let ib = offset_of(o, &outer, &ist);
        let ob = offset_of(o, &outer, &ostr);
        let (xp, yp) = (xp as *const T, yp as *mut T);
        if T::DTYPE == DType::F32 && st == 1 && ost == 1 {
            // SAFETY: contiguous in-bounds lines of f32; output does not alias input.
            let (xs, ys) = unsafe {
                (
                    std::slice::from_raw_parts(xp.add(ib) as *const f32, n),
                    std::slice::from_raw_parts_mut(yp.add(ob) as *mut f32, n),
                )
            };
            softmax_line_f32(xs, ys, log);
            return;
        }
        // SAFETY: in-bounds strided reads.
        let xs: Vec<f64> = (0..n).map(|i| unsafe { *xp.add(ib + i * st) }.to_f64()).collect();
        if T::DTYPE != DType::F64 {
            let x32: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
            let mut y32 = vec![0f32; n];
            softmax_line_f32(&x32, &mut y32, log);
            for (i, v) in y32.iter().enumerate() {
                // SAFETY: in-bounds strided writes.
                unsafe { *yp.add(ob + i * ost) = T::from_f64(*v as f64) };
            }
        } else {
            let mut ys = vec![0f64; n];
            line_f64(&xs, &mut ys, log);
            for (i, v) in ys.iter().enumerate() {
                // SAFETY: in-bounds strided writes.
                unsafe { *yp.add(ob + i * ost) = T::from_f64(*v) };
            }
        }
    };
    if n_lines * n < 1 << 14 {
        (0..n_lines).for_each(line);
    } else {
        super::warm::par_for_each(n_lines, line);
    }
    Ok(())
}

pub(crate) fn softmax_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<Softmax>(op)?;
    let (x, out, log) = (inputs[0], outputs[0], op.log);
    if x.numel() == 0 {
        return Ok(());
    }
    match x.dtype() {
        DType::F32 => run::<f32>(x, out, op.dim, log),
        DType::F64 => run::<f64>(x, out, op.dim, log),
        DType::F16 => run::<f16>(x, out, op.dim, log),
        DType::BF16 => run::<bf16>(x, out, op.dim, log),
        d => Err(Error::dtype(op.error_name(), d, "expects a floating-point input")),
    }
}
