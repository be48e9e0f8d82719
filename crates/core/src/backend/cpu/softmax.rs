//! CPU softmax / log_softmax: one line at a time (max, exp-sum, scale), lines in parallel.

use half::{bf16, f16};
use smallvec::SmallVec;

use super::access::access;
use super::math::{exp_f32_fma, log_f32};
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
                lanes[k] += exp_f32_fma(c[k] - max);
            }
        }
    } else {
        for (c, o) in x[..split].chunks_exact(L).zip(y[..split].chunks_exact_mut(L)) {
            for k in 0..L {
                let e = exp_f32_fma(c[k] - max);
                o[k] = e;
                lanes[k] += e;
            }
        }
    }
    for (k, (v, o)) in x[split..].iter().zip(y[split..].iter_mut()).enumerate() {
        let e = exp_f32_fma(*v - max);
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

/// One contiguous line of the softmax derivatives: `g - exp(y) * sum(g)`
/// (log) or `y * (g - sum(g * y))`, the sums in 16 fixed lanes.
#[inline(always)]
fn backward_line<T: super::norm::Real>(g: &[T], y: &[T], out: &mut [T], log: bool, exp: impl Fn(T) -> T) {
    use super::norm::{sum1, sum2};
    if log {
        let s = sum1(g, |v| v);
        for ((o, &gv), &yv) in out.iter_mut().zip(g).zip(y) {
            *o = gv - exp(yv) * s;
        }
    } else {
        let s = sum2(g, y, |a, b| a * b);
        for ((o, &gv), &yv) in out.iter_mut().zip(g).zip(y) {
            *o = yv * (gv - s);
        }
    }
}

multiversion! {
    /// [`backward_line`] over `rows` contiguous f32 lines of `n`.
    fn backward_rows_f32(g: &[f32], y: &[f32], out: &mut [f32], n: usize, log: bool) {
        for ((gr, yr), or) in g.chunks_exact(n).zip(y.chunks_exact(n)).zip(out.chunks_exact_mut(n)) {
            backward_line(gr, yr, or, log, exp_f32_fma);
        }
    }
}

fn backward_rows_f64(g: &[f64], y: &[f64], out: &mut [f64], n: usize, log: bool) {
    for ((gr, yr), or) in g.chunks_exact(n).zip(y.chunks_exact(n)).zip(out.chunks_exact_mut(n)) {
        backward_line(gr, yr, or, log, f64::exp);
    }
}

pub(crate) fn softmax_backward_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<crate::ops::softmax::SoftmaxBackward>(op)?;
    let name = op.entry().base_name();
    let out = outputs[0];
    if out.numel() == 0 {
        return Ok(());
    }
    let nd = out.ndim();
    let shape = out.shape().to_vec();
    // Lines along `dim` made contiguous: move `dim` last.
    let (g, y) = (inputs[0], inputs[1]);
    let last = nd == 0 || op.dim + 1 == nd;
    let (gc, yc) = if last {
        (g.contiguous()?, y.contiguous()?)
    } else {
        (
            g.movedim(op.dim as i64, -1)?.contiguous()?,
            y.movedim(op.dim as i64, -1)?.contiguous()?,
        )
    };
    let n = if nd == 0 { 1 } else { shape[op.dim] };
    let work = if last && out.is_contiguous() {
        out.clone()
    } else {
        crate::TensorOptions::like(out).zeros(gc.shape())?
    };
    match out.dtype() {
        DType::F32 | DType::F64 => {
            let acc = access(name, &[&gc, &yc], &[&work])?;
            let total = work.numel();
            let rows = total / n;
            let (gp, yp, op_) = (acc.ins[0] as usize, acc.ins[1] as usize, acc.outs[0] as usize);
            let per = (1usize << 14).div_ceil(n).max(1);
            let chunks = rows.div_ceil(per);
            let log = op.log;
            let f64_ = out.dtype() == DType::F64;
            let task = |c: usize| {
                let (r0, r1) = (c * per, ((c + 1) * per).min(rows));
                let (at, len) = (r0 * n, (r1 - r0) * n);
                // SAFETY: chunk `c` reads and writes rows r0..r1 of the
                // contiguous inputs and output (disjoint between chunks).
                unsafe {
                    if f64_ {
                        backward_rows_f64(
                            std::slice::from_raw_parts((gp as *const f64).add(at), len),
                            std::slice::from_raw_parts((yp as *const f64).add(at), len),
                            std::slice::from_raw_parts_mut((op_ as *mut f64).add(at), len),
                            n,
                            log,
                        );
                    } else {
                        backward_rows_f32(
                            std::slice::from_raw_parts((gp as *const f32).add(at), len),
                            std::slice::from_raw_parts((yp as *const f32).add(at), len),
                            std::slice::from_raw_parts_mut((op_ as *mut f32).add(at), len),
                            n,
                            log,
                        );
                    }
                }
            };
            if chunks <= 1 {
                (0..chunks).for_each(task);
            } else {
                super::warm::par_for_each(chunks, task);
            }
        }
        DType::F16 | DType::BF16 => {
            let (g32, y32) = (gc.to_dtype(DType::F32)?, yc.to_dtype(DType::F32)?);
            let w32 = crate::TensorOptions::new().dtype(DType::F32).zeros(gc.shape())?;
            {
                let acc = access(name, &[&g32, &y32], &[&w32])?;
                let len = w32.numel();
                // SAFETY: contiguous f32 buffers of `len` elements, locked.
                unsafe {
                    backward_rows_f32(
                        std::slice::from_raw_parts(acc.ins[0] as *const f32, len),
                        std::slice::from_raw_parts(acc.ins[1] as *const f32, len),
                        std::slice::from_raw_parts_mut(acc.outs[0] as *mut f32, len),
                        n,
                        op.log,
                    );
                }
            }
            work.copy_(&w32)?;
        }
        d => return Err(Error::dtype(name, d, "expects a floating-point input")),
    }
    if !work.is_same(out) {
        let back = if last { work } else { work.movedim(-1, op.dim as i64)? };
        out.copy_(&back)?;
    }
    Ok(())
}
