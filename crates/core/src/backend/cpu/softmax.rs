//! CPU softmax / log_softmax: lines in blocks of up to [`ROWS`] (each
//! line's max and exp-sum, then every line's shift or scale at once, then
//! the outputs), blocks in parallel.

use half::{bf16, f16};
use smallvec::SmallVec;

use super::access::access;
use super::math::{exp_f32_fma, log_f32};
use super::simd::multiversion;
use crate::dispatch::{Op, downcast_op};
use crate::layout::Dims;
use crate::ops::Softmax;
use crate::{DType, Element, Error, Result, Tensor};

/// Lanes of a line's max and exp-sum.
const L: usize = 16;
/// Lines per block: each pass runs over all of them before the next (so
/// the lines' dependency chains overlap), and their `ln(sum)` (log-softmax
/// is `(x - max) - ln(sum)`) or scales (`1 / sum`) are one vector of [`log_f32`] or
/// divisions, not one scalar chain per line.
const ROWS: usize = 16;

/// The last [`L`] values of a line of at least `L` (overlapping the
/// previous chunk when `L` does not divide the length), or, for a shorter
/// line, its values padded with `pad`.
#[inline(always)]
fn last_chunk(x: &[f32], pad: f32) -> [f32; L] {
    match x.last_chunk::<L>() {
        Some(c) => *c,
        None => {
            let mut t = [pad; L];
            t[..x.len()].copy_from_slice(x);
            t
        }
    }
}

/// The lanes of a sum folded pairwise, halving (the fixed end of every
/// lane sum here).
#[inline(always)]
fn fold_lanes(mut lanes: [f32; L]) -> f32 {
    let mut w = L / 2;
    while w > 0 {
        for k in 0..w {
            lanes[k] += lanes[k + w];
        }
        w /= 2;
    }
    lanes[0]
}

/// A line's max (exact in any order: the lanes fold pairwise); NaN when a
/// value is NaN (PyTorch's: a row of -inf then gives NaN too).
#[inline(always)]
fn line_max(x: &[f32]) -> f32 {
    let split = x.len() - x.len() % L;
    let tail = last_chunk(x, f32::NEG_INFINITY);
    let mut mx = [f32::NEG_INFINITY; L];
    let mut nan = [false; L];
    for c in x[..split].chunks_exact(L).chain(std::iter::once(&tail[..])) {
        for k in 0..L {
            let v = c[k];
            nan[k] |= v.is_nan();
            mx[k] = if v > mx[k] { v } else { mx[k] };
        }
    }
    let mut w = L / 2;
    while w > 0 {
        for k in 0..w {
            mx[k] = if mx[k + w] > mx[k] { mx[k + w] } else { mx[k] };
            nan[k] |= nan[k + w];
        }
        w /= 2;
    }
    if nan[0] { f32::NAN } else { mx[0] }
}

/// A short line's sum in order (PyTorch's `map_reduce_all` for a line
/// shorter than a vector: one lane, each value added in turn).
#[inline(always)]
fn ordered_sum(terms: impl Iterator<Item = f32>) -> f32 {
    terms.reduce(|s, v| s + v).unwrap_or(0.0)
}

/// The sum of `exp(x - max)` over a line in PyTorch's order: in order for
/// a line shorter than [`L`], else in [`L`] fixed lanes, the tail's terms
/// added to the first lanes, folded pairwise. The values of the full
/// chunks are also written to `y` unless `log` (the rest are left to
/// [`block_f32`]'s last pass).
#[inline(always)]
fn line_expsum(x: &[f32], y: &mut [f32], max: f32, log: bool) -> f32 {
    if x.len() < L {
        return ordered_sum(x.iter().map(|&v| exp_f32_fma(v - max)));
    }
    let split = x.len() - x.len() % L;
    let mut lanes = [0f32; L];
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
    for (lane, &v) in lanes.iter_mut().zip(&x[split..]) {
        *lane += exp_f32_fma(v - max);
    }
    fold_lanes(lanes)
}

/// Softmax (or log-softmax) of the contiguous lines of `n` values in `x`
/// (at most [`ROWS`] of them) into `y`: every line's max, then every
/// line's exp-sum, then the shifts or scales at once, then the outputs.
#[inline(always)]
fn block_f32(x: &[f32], y: &mut [f32], n: usize, log: bool) {
    let mut maxs = [0f32; ROWS];
    for (m, xr) in maxs.iter_mut().zip(x.chunks_exact(n)) {
        *m = line_max(xr);
    }
    let mut sums = [1f32; ROWS];
    for ((s, &m), (xr, yr)) in sums
        .iter_mut()
        .zip(&maxs)
        .zip(x.chunks_exact(n).zip(y.chunks_exact_mut(n)))
    {
        *s = line_expsum(xr, yr, m, log);
    }
    let mut f = [0f32; ROWS];
    let split = n - n % L;
    if log {
        // PyTorch's order, `(x - max) - log(sum)`: the max is subtracted
        // exactly first (forming `max + log(sum)` would round it).
        for r in 0..ROWS {
            f[r] = log_f32(sums[r]);
        }
        for (((xr, yr), &lse), &m) in x.chunks_exact(n).zip(y.chunks_exact_mut(n)).zip(&f).zip(&maxs) {
            for (o, v) in yr.iter_mut().zip(xr) {
                *o = (*v - m) - lse;
            }
        }
    } else {
        for r in 0..ROWS {
            f[r] = 1.0 / sums[r];
        }
        for (((xr, yr), &inv), &m) in x.chunks_exact(n).zip(y.chunks_exact_mut(n)).zip(&f).zip(&maxs) {
            for o in yr[..split].iter_mut() {
                *o *= inv;
            }
            for (o, v) in yr[split..].iter_mut().zip(&xr[split..]) {
                *o = exp_f32_fma(*v - m) * inv;
            }
        }
    }
}

multiversion! {
    /// [`block_f32`] vectorised for the CPU.
    fn softmax_block_f32(x: &[f32], y: &mut [f32], n: usize, log: bool) {
        block_f32(x, y, n, log)
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
        let lse = sum.ln();
        for (o, v) in y.iter_mut().zip(x) {
            *o = (*v - max) - lse;
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
    let par = n_lines * n >= 1 << 14;
    if T::DTYPE == DType::F32 && dim + 1 >= l.ndim() && l.is_contiguous() && ol.is_contiguous() {
        // Rows of a matrix: blocks of ROWS lines.
        let block = |b: usize| {
            let (r0, r1) = (b * ROWS, ((b + 1) * ROWS).min(n_lines));
            // SAFETY: block `b` reads and writes rows r0..r1 of the
            // contiguous f32 input and output (disjoint between blocks; the
            // output does not alias the input).
            let (xs, ys) = unsafe {
                (
                    std::slice::from_raw_parts((xp as *const f32).add(r0 * n), (r1 - r0) * n),
                    std::slice::from_raw_parts_mut((yp as *mut f32).add(r0 * n), (r1 - r0) * n),
                )
            };
            softmax_block_f32(xs, ys, n, log);
        };
        let blocks = n_lines.div_ceil(ROWS);
        if par {
            super::warm::par_for_each(blocks, block);
        } else {
            (0..blocks).for_each(block);
        }
        return Ok(());
    }
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
            softmax_block_f32(xs, ys, n, log);
            return;
        }
        // SAFETY: in-bounds strided reads.
        let xs: Vec<f64> = (0..n).map(|i| unsafe { *xp.add(ib + i * st) }.to_f64()).collect();
        if T::DTYPE != DType::F64 {
            let x32: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
            let mut y32 = vec![0f32; n];
            softmax_block_f32(&x32, &mut y32, n, log);
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
    if par {
        super::warm::par_for_each(n_lines, line);
    } else {
        (0..n_lines).for_each(line);
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

/// `sum(a)`, or `sum(a * b)` with `mul`, over a line in PyTorch's order
/// (as [`line_expsum`]).
#[inline(always)]
fn lane_sum(a: &[f32], b: &[f32], mul: bool) -> f32 {
    let term = |(&p, &q): (&f32, &f32)| if mul { p * q } else { p };
    if a.len() < L {
        return ordered_sum(a.iter().zip(b).map(term));
    }
    let split = a.len() - a.len() % L;
    let mut lanes = [0f32; L];
    for (ca, cb) in a[..split].chunks_exact(L).zip(b[..split].chunks_exact(L)) {
        for k in 0..L {
            lanes[k] += if mul { ca[k] * cb[k] } else { ca[k] };
        }
    }
    for (lane, t) in lanes.iter_mut().zip(a[split..].iter().zip(&b[split..])) {
        *lane += term(t);
    }
    fold_lanes(lanes)
}

/// The softmax derivatives of the contiguous lines of `n` values in `g`
/// and `y` (at most [`ROWS`]): every line's sum (`sum(g)` for log,
/// `sum(g * y)` else), then `g - exp(y) * sum` or `y * (g - sum)`. A line
/// of at least [`L`] ends with one overlapping chunk (its values are
/// written twice, the same both times).
#[inline(always)]
fn backward_block_f32(g: &[f32], y: &[f32], out: &mut [f32], n: usize, log: bool) {
    let mut sums = [0f32; ROWS];
    for (s, (gr, yr)) in sums.iter_mut().zip(g.chunks_exact(n).zip(y.chunks_exact(n))) {
        *s = lane_sum(gr, yr, !log);
    }
    let split = n - n % L;
    for (((gr, yr), or), &s) in g
        .chunks_exact(n)
        .zip(y.chunks_exact(n))
        .zip(out.chunks_exact_mut(n))
        .zip(&sums)
    {
        let f = |gv: f32, yv: f32| if log { gv - exp_f32_fma(yv) * s } else { yv * (gv - s) };
        for ((oc, gc), yc) in or[..split]
            .chunks_exact_mut(L)
            .zip(gr[..split].chunks_exact(L))
            .zip(yr[..split].chunks_exact(L))
        {
            for k in 0..L {
                oc[k] = f(gc[k], yc[k]);
            }
        }
        match (or.last_chunk_mut::<L>(), gr.last_chunk::<L>(), yr.last_chunk::<L>()) {
            (Some(oc), Some(gc), Some(yc)) if split < n => {
                for k in 0..L {
                    oc[k] = f(gc[k], yc[k]);
                }
            }
            _ => {
                for ((o, &gv), &yv) in or[split..].iter_mut().zip(&gr[split..]).zip(&yr[split..]) {
                    *o = f(gv, yv);
                }
            }
        }
    }
}

multiversion! {
    /// [`backward_block_f32`] over contiguous f32 lines of `n`, [`ROWS`] at a time.
    fn backward_rows_f32(g: &[f32], y: &[f32], out: &mut [f32], n: usize, log: bool) {
        let b = n * ROWS;
        for ((gb, yb), ob) in g.chunks(b).zip(y.chunks(b)).zip(out.chunks_mut(b)) {
            backward_block_f32(gb, yb, ob, n, log);
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

#[cfg(test)]
mod tests {
    use crate::{Result, Tensor};

    /// Softmax or log-softmax of one line in f64.
    fn reference(x: &[f32], log: bool) -> Vec<f64> {
        let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let sum: f64 = x.iter().map(|&v| (v as f64 - max).exp()).sum();
        x.iter()
            .map(|&v| {
                let z = v as f64 - max;
                if log { z - sum.ln() } else { z.exp() / sum }
            })
            .collect()
    }

    /// Every line length around the lanes (shorter than one chunk, whole
    /// chunks, one more) and row counts around a block: the blocked rows
    /// match f64, and the strided one-line-at-a-time path gives their bits.
    #[test]
    fn blocked_lines_match_f64_and_single_lines() -> Result<()> {
        crate::manual_seed(7);
        for rows in [1usize, 5, 16, 17, 33] {
            for n in (1..=40).chain([64, 65, 100]) {
                let x = Tensor::randn([rows, n])?.mul(3.0)?;
                let xs = x.to_vec::<f32>()?;
                for log in [false, true] {
                    let y = if log { x.log_softmax(1)? } else { x.softmax(1)? };
                    let yt = if log {
                        x.t()?.contiguous()?.log_softmax(0)?
                    } else {
                        x.t()?.contiguous()?.softmax(0)?
                    };
                    let (yv, ytv) = (y.to_vec::<f32>()?, yt.t()?.contiguous()?.to_vec::<f32>()?);
                    for r in 0..rows {
                        let want = reference(&xs[r * n..(r + 1) * n], log);
                        for j in 0..n {
                            let (got, w) = (yv[r * n + j] as f64, want[j]);
                            assert!(
                                (got - w).abs() <= 1e-5 * w.abs().max(1.0),
                                "rows {rows} n {n} log {log}: {got} vs {w}"
                            );
                            assert_eq!(
                                yv[r * n + j].to_bits(),
                                ytv[r * n + j].to_bits(),
                                "rows {rows} n {n} log {log}"
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// A NaN makes its whole line NaN, a line of -inf is NaN (PyTorch's),
    /// and neither touches the other lines of the block.
    #[test]
    fn nan_and_masked_lines_stay_in_their_line() -> Result<()> {
        for n in [3usize, 16, 19] {
            let x = Tensor::randn([4, n])?;
            x.narrow(0, 1, 1)?.narrow(1, n as i64 - 1, 1)?.fill_(f32::NAN)?;
            x.narrow(0, 2, 1)?.fill_(f32::NEG_INFINITY)?;
            for log in [false, true] {
                let y = if log { x.log_softmax(1)? } else { x.softmax(1)? };
                let v = y.to_vec::<f32>()?;
                for r in 0..4 {
                    let line = &v[r * n..(r + 1) * n];
                    let nan = r == 1 || r == 2;
                    assert!(
                        line.iter().all(|v| v.is_nan() == nan),
                        "n {n} log {log} row {r}: {line:?}"
                    );
                }
            }
        }
        Ok(())
    }

    /// The backward of both, blocked, against f64: `g - softmax * sum(g)`
    /// and `y * (g - sum(g * y))`.
    #[test]
    fn blocked_backward_matches_f64() -> Result<()> {
        crate::manual_seed(8);
        for rows in [1usize, 17, 40] {
            for n in [1usize, 7, 16, 17, 31, 65] {
                let x = Tensor::randn([rows, n])?.requires_grad_(true)?;
                let g = Tensor::randn([rows, n])?;
                let (xs, gs) = (x.to_vec::<f32>()?, g.to_vec::<f32>()?);
                for log in [false, true] {
                    let y = if log { x.log_softmax(1)? } else { x.softmax(1)? };
                    let gx = crate::autograd::grad(
                        &[&y],
                        &[&x],
                        crate::autograd::GradOptions {
                            grad_outputs: Some(std::slice::from_ref(&g)),
                            ..Default::default()
                        },
                    )?[0]
                        .to_vec::<f32>()?;
                    for r in 0..rows {
                        let p = reference(&xs[r * n..(r + 1) * n], false);
                        let gr = &gs[r * n..(r + 1) * n];
                        let s: f64 = if log {
                            gr.iter().map(|&v| v as f64).sum()
                        } else {
                            gr.iter().zip(&p).map(|(&a, b)| a as f64 * b).sum()
                        };
                        for j in 0..n {
                            let w = if log {
                                gr[j] as f64 - p[j] * s
                            } else {
                                p[j] * (gr[j] as f64 - s)
                            };
                            let got = gx[r * n + j] as f64;
                            assert!(
                                (got - w).abs() <= 1e-5 * w.abs().max(1.0),
                                "rows {rows} n {n} log {log}: {got} vs {w}"
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
