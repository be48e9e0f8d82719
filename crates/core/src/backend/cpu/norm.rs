//! CPU kernels of layer, group and batch normalisation and their fused
//! first derivatives.
//!
//! Work is split into independent pieces: rows of a layer norm, `(n,
//! group)` rows of a group norm, channels of a batch norm. A sum inside a
//! piece runs in 16 fixed lanes (layer and group norm, in the dtype, as
//! PyTorch's vectorised kernels) or in f64 (batch norm, as PyTorch's CPU
//! kernel accumulates). The weight's and bias's gradients of a layer norm
//! sum over rows: each fixed chunk of rows (the chunking depends only on
//! the row count) sums into its own buffer and the buffers are added in
//! chunk order, so results are bitwise the same for any thread count.
//! f16 and bf16 compute in f32. Group norm's backward sums `dy * (x -
//! mean)` where PyTorch sums `dy * x` and subtracts `mean * sum(dy)`: the
//! same value without the cancellation that costs PyTorch's f32 kernel
//! digits when the mean is large against the spread.

use std::ops::{Add, Div, Mul, Neg, Sub};

use super::access::access;
use super::layer_norm_rows;
use super::simd::multiversion;
use super::warm::par_for_each;
use crate::dispatch::{Op, downcast_op};
use crate::ops::norm::{Norm, NormBackward, NormKind};
use crate::{DType, Error, Result, Tensor, TensorOptions};

/// The float types the kernels compute in.
pub(crate) trait Real:
    Copy
    + Send
    + Sync
    + 'static
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + crate::Element
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// From f64 (rounded).
    fn of(v: f64) -> Self;
    /// To f64 (exact).
    fn wide(self) -> f64;
    /// Square root.
    fn root(self) -> Self;
    /// Lanes of PyTorch's vectors of this type in its layer-norm kernels
    /// (256 bits wide in its x86-64 build: 8 f32, 4 f64).
    const LANES: usize;
    /// `self * a + b` rounded once.
    fn fma(self, a: Self, b: Self) -> Self;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    #[inline(always)]
    fn of(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn wide(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn root(self) -> f32 {
        self.sqrt()
    }
    const LANES: usize = 8;
    #[inline(always)]
    fn fma(self, a: f32, b: f32) -> f32 {
        self.mul_add(a, b)
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    #[inline(always)]
    fn of(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn wide(self) -> f64 {
        self
    }
    #[inline(always)]
    fn root(self) -> f64 {
        self.sqrt()
    }
    const LANES: usize = 4;
    #[inline(always)]
    fn fma(self, a: f64, b: f64) -> f64 {
        self.mul_add(a, b)
    }
}

/// Lanes of the in-row sums.
const L: usize = 16;

/// Adds the tail's terms `t[..r]` to the first lanes, then folds the
/// lanes pairwise, halving. Kept out of line: inlined, LLVM's SLP
/// vectoriser regroups the whole sum's lanes around the tail and the fold
/// (scalar and 2-wide pieces in the main loop, several times slower).
#[inline(never)]
fn finish<T: Real>(acc: &[T; L], t: &[T; L], r: usize) -> T {
    let mut a = *acc;
    for k in 0..r {
        a[k] = a[k] + t[k];
    }
    let mut w = L / 2;
    while w > 0 {
        for k in 0..w {
            a[k] = a[k] + a[k + w];
        }
        w /= 2;
    }
    a[0]
}

/// `sum(f(a[i]))` in PyTorch's order (its `map_reduce_all`): in [`L`]
/// fixed lanes, the tail's terms added to the first lanes; a line shorter
/// than [`L`] in order.
#[inline(always)]
pub(crate) fn sum1<T: Real>(a: &[T], f: impl Fn(T) -> T) -> T {
    if a.len() < L {
        return a.iter().map(|&v| f(v)).reduce(|s, v| s + v).unwrap_or(T::ZERO);
    }
    let mut acc = [T::ZERO; L];
    let ca = a.chunks_exact(L);
    let ra = ca.remainder();
    for c in ca {
        for k in 0..L {
            acc[k] = acc[k] + f(c[k]);
        }
    }
    let mut t = [T::ZERO; L];
    for (o, &v) in t.iter_mut().zip(ra) {
        *o = f(v);
    }
    finish(&acc, &t, ra.len())
}

/// `sum(f(a[i], b[i]))` in PyTorch's order (as [`sum1`]).
#[inline(always)]
pub(crate) fn sum2<T: Real>(a: &[T], b: &[T], f: impl Fn(T, T) -> T) -> T {
    let mut acc = [T::ZERO; L];
    let n = a.len().min(b.len());
    if n < L {
        return a
            .iter()
            .zip(b)
            .map(|(&x, &y)| f(x, y))
            .reduce(|s, v| s + v)
            .unwrap_or(T::ZERO);
    }
    let split = n - n % L;
    for (ca, cb) in a[..split].chunks_exact(L).zip(b[..split].chunks_exact(L)) {
        for k in 0..L {
            acc[k] = acc[k] + f(ca[k], cb[k]);
        }
    }
    let mut t = [T::ZERO; L];
    for (o, (&x, &y)) in t.iter_mut().zip(a[split..n].iter().zip(&b[split..n])) {
        *o = f(x, y);
    }
    finish(&acc, &t, n - split)
}

/// The mean as `shift + delta` (`shift` the first element, `delta` the
/// mean of the offsets from it, so a large mean costs no precision: `x -
/// mean` is computed as `(x - shift) - delta`) and the reciprocal standard
/// deviation (biased variance, a second pass).
#[inline(always)]
fn moments<T: Real>(x: &[T], eps: T) -> (T, T, T) {
    let n = T::of(x.len() as f64);
    let shift = x.first().copied().unwrap_or(T::ZERO);
    let delta = sum1(x, |v| v - shift) / n;
    let var = sum1(x, |v| {
        let d = (v - shift) - delta;
        d * d
    }) / n;
    (shift, delta, T::ONE / (var + eps).root())
}

/// `y = (x - center) * scale + shift` over a run.
#[inline(always)]
fn affine_run<T: Real>(x: &[T], y: &mut [T], center: T, scale: T, shift: T) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = (v - center) * scale + shift;
    }
}

/// The rows' part of a layer norm's backward: `dx` of each row, and the
/// rows' terms of the weight's and bias's gradients added into `dw` / `db`
/// (PyTorch's formulas: `layer_norm_rows`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn ln_bwd_rows<T: Real>(
    dy: &[T],
    x: &[T],
    mean: &[T],
    rstd: &[T],
    w: Option<&[T]>,
    mut dx: Option<&mut [T]>,
    mut dw: Option<&mut [T]>,
    mut db: Option<&mut [T]>,
    n: usize,
) {
    for r in 0..mean.len() {
        let (dyr, xr) = (&dy[r * n..(r + 1) * n], &x[r * n..(r + 1) * n]);
        let (m, a) = (mean[r], rstd[r]);
        layer_norm_rows::param_grad_row(dyr, xr, m, a, dw.as_deref_mut(), db.as_deref_mut());
        if let Some(dx) = dx.as_deref_mut() {
            layer_norm_rows::input_grad_row(dyr, xr, w, m, a, &mut dx[r * n..(r + 1) * n]);
        }
    }
}

/// Per-dtype entry points (vectorised for the CPU through `multiversion!`).
pub(crate) trait NormFloat: Real {
    /// Layer norm of the rows of `x` (rows of `n`).
    #[allow(clippy::too_many_arguments)]
    fn ln_rows(
        x: &[Self],
        y: &mut [Self],
        mean: &mut [Self],
        rstd: &mut [Self],
        w: Option<&[Self]>,
        b: Option<&[Self]>,
        eps: Self,
        n: usize,
    );
    /// [`ln_bwd_rows`].
    #[allow(clippy::too_many_arguments)]
    fn ln_bwd(
        dy: &[Self],
        x: &[Self],
        mean: &[Self],
        rstd: &[Self],
        w: Option<&[Self]>,
        dx: Option<&mut [Self]>,
        dw: Option<&mut [Self]>,
        db: Option<&mut [Self]>,
        n: usize,
    );
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn ln_rows_generic<T: Real>(
    x: &[T],
    y: &mut [T],
    mean: &mut [T],
    rstd: &mut [T],
    w: Option<&[T]>,
    b: Option<&[T]>,
    eps: T,
    n: usize,
) {
    for r in 0..mean.len() {
        let (m, s) = layer_norm_rows::forward_row(&x[r * n..(r + 1) * n], &mut y[r * n..(r + 1) * n], w, b, eps);
        mean[r] = m;
        rstd[r] = s;
    }
}

/// The multiversioned layer-norm row kernels of one float type and its
/// [`NormFloat`] impl calling them.
macro_rules! norm_float {
    ($t:ty, $rows:ident, $bwd:ident) => {
        multiversion! {
            /// [`ln_rows_generic`] for one float type.
            #[allow(clippy::too_many_arguments)]
            fn $rows(x: &[$t], y: &mut [$t], mean: &mut [$t], rstd: &mut [$t], w: Option<&[$t]>, b: Option<&[$t]>, eps: $t, n: usize) {
                ln_rows_generic(x, y, mean, rstd, w, b, eps, n)
            }
        }

        multiversion! {
            /// [`ln_bwd_rows`] for one float type.
            #[allow(clippy::too_many_arguments)]
            fn $bwd(dy: &[$t], x: &[$t], mean: &[$t], rstd: &[$t], w: Option<&[$t]>, dx: Option<&mut [$t]>, dw: Option<&mut [$t]>, db: Option<&mut [$t]>, n: usize) {
                ln_bwd_rows(dy, x, mean, rstd, w, dx, dw, db, n)
            }
        }

        impl NormFloat for $t {
            fn ln_rows(
                x: &[$t],
                y: &mut [$t],
                mean: &mut [$t],
                rstd: &mut [$t],
                w: Option<&[$t]>,
                b: Option<&[$t]>,
                eps: $t,
                n: usize,
            ) {
                $rows(x, y, mean, rstd, w, b, eps, n)
            }
            fn ln_bwd(
                dy: &[$t],
                x: &[$t],
                mean: &[$t],
                rstd: &[$t],
                w: Option<&[$t]>,
                dx: Option<&mut [$t]>,
                dw: Option<&mut [$t]>,
                db: Option<&mut [$t]>,
                n: usize,
            ) {
                $bwd(dy, x, mean, rstd, w, dx, dw, db, n)
            }
        }
    };
}

norm_float!(f32, ln_rows_f32, ln_bwd_f32);
norm_float!(f64, ln_rows_f64, ln_bwd_f64);

/// A raw slice shared with the tasks of a parallel loop.
#[derive(Clone, Copy)]
struct Raw<T> {
    ptr: usize,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T> Raw<T> {
    fn new(ptr: *const u8, len: usize) -> Self {
        Raw {
            ptr: ptr as usize,
            len,
            _t: std::marker::PhantomData,
        }
    }

    /// `self[at..at + n]`.
    ///
    /// # Safety
    /// The pointer is valid for `len` elements of `T` while the kernel holds
    /// its `access` (the slice must not outlive it), and `at + n <= len`.
    unsafe fn get<'a>(self, at: usize, n: usize) -> &'a [T] {
        debug_assert!(at + n <= self.len);
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts((self.ptr as *const T).add(at), n) }
    }

    /// `self[at..at + n]`, mutable.
    ///
    /// # Safety
    /// As [`Raw::get`], and no other task touches these elements while the
    /// slice lives.
    unsafe fn get_mut<'a>(self, at: usize, n: usize) -> &'a mut [T] {
        debug_assert!(at + n <= self.len);
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut((self.ptr as *mut T).add(at), n) }
    }
}

/// Rows per chunk for `m` rows: at most 64 chunks (a function of `m`
/// only, so the column sums' order is fixed).
fn chunk_rows(m: usize) -> usize {
    m.div_ceil(64).max(1)
}

/// Runs `f(chunk)` for `chunks` chunks, in parallel when the work is large.
fn run_chunks(chunks: usize, work: usize, f: impl Fn(usize) + Sync + Send) {
    if chunks <= 1 || work < 1 << 14 {
        (0..chunks).for_each(f);
    } else {
        par_for_each(chunks, f);
    }
}

/// The inputs made contiguous, converted to `dt` when given.
fn prep(ts: &[&Tensor], dt: Option<DType>) -> Result<Vec<Tensor>> {
    ts.iter()
        .map(|t| match dt {
            Some(d) => t.to_dtype(d)?.contiguous(),
            None => t.contiguous(),
        })
        .collect()
}

/// Meta-device kernel of the fused norms and their backward operators:
/// the temporaries [`norm_kernel`] / [`norm_backward_kernel`] hold (the
/// prepared inputs; for f16 / bf16 the widened inputs and f32 results),
/// without computing, so that a memory plan sees the fused kernels rather
/// than the composite the meta device would otherwise run.
pub(crate) fn norm_meta_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    if outputs.iter().all(|o| o.numel() == 0) || inputs.iter().any(|t| t.numel() == 0) {
        return Ok(());
    }
    let half = inputs.iter().any(|t| matches!(t.dtype(), DType::F16 | DType::BF16));
    let _ins = prep(inputs, half.then_some(DType::F32))?;
    let _wide = if half {
        super::copy::f32_twins(outputs)?
    } else {
        Vec::new()
    };
    Ok(())
}

pub(crate) fn norm_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<Norm>(op)?;
    let x = inputs[0];
    if x.numel() == 0 {
        return Ok(());
    }
    let ins = match x.dtype() {
        DType::F32 => {
            let ins = prep(inputs, None)?;
            norm_typed::<f32>(op, &ins, outputs)?;
            ins
        }
        DType::F64 => {
            let ins = prep(inputs, None)?;
            norm_typed::<f64>(op, &ins, outputs)?;
            ins
        }
        DType::F16 | DType::BF16 => {
            let ins = prep(inputs, Some(DType::F32))?;
            let y = TensorOptions::new().dtype(DType::F32).zeros(x.shape())?;
            norm_typed::<f32>(op, &ins, &[&y, outputs[1], outputs[2]])?;
            outputs[0].copy_(&y)?;
            ins
        }
        d => {
            return Err(Error::dtype(
                op.entry().base_name(),
                d,
                "expects a floating-point input",
            ));
        }
    };
    // Running statistics updated in a contiguous or f32 copy go back.
    if op.running && matches!(op.kind, NormKind::Batch { training: true, .. }) {
        let r = 1 + op.weight as usize + op.bias as usize;
        for k in [r, r + 1] {
            if ins[k].is_same(inputs[k]) {
                inputs[k].bump_version();
            } else {
                inputs[k].copy_(&ins[k])?;
            }
        }
    }
    Ok(())
}

fn norm_typed<T: NormFloat>(op: &Norm, ins: &[Tensor], outs: &[&Tensor]) -> Result<()> {
    let name = op.entry().base_name();
    let x = &ins[0];
    let shape = x.shape().to_vec();
    let numel = x.numel();
    let w_at = op.weight.then_some(1);
    let b_at = op.bias.then_some(1 + op.weight as usize);
    let r_at = op.running.then_some(1 + op.weight as usize + op.bias as usize);
    // Running statistics are written in place: locked as outputs.
    let mut in_refs: Vec<&Tensor> = vec![x];
    let mut out_refs: Vec<&Tensor> = outs.to_vec();
    let training = matches!(op.kind, NormKind::Batch { training: true, .. });
    for at in [w_at, b_at].into_iter().flatten() {
        in_refs.push(&ins[at]);
    }
    if let Some(r) = r_at {
        if training {
            out_refs.push(&ins[r]);
            out_refs.push(&ins[r + 1]);
        } else {
            in_refs.push(&ins[r]);
            in_refs.push(&ins[r + 1]);
        }
    }
    let acc = access(name, &in_refs, &out_refs)?;
    let xr = Raw::<T>::new(acc.ins[0], numel);
    let mut k = 1;
    let mut next_in = |len: usize| {
        let r = Raw::<T>::new(acc.ins[k], len);
        k += 1;
        r
    };
    let param_len = match &op.kind {
        NormKind::Layer { normalized } => normalized.iter().product(),
        _ => shape[1],
    };
    let w = w_at.map(|_| next_in(param_len));
    let b = b_at.map(|_| next_in(param_len));
    let running_in = (r_at.is_some() && !training).then(|| (next_in(param_len), next_in(param_len)));
    let y = Raw::<T>::new(acc.outs[0], numel);
    let eps = T::of(op.eps);
    match &op.kind {
        NormKind::Layer { normalized } => {
            let n: usize = normalized.iter().product();
            let m = numel / n;
            let (mean, rstd) = (Raw::<T>::new(acc.outs[1], m), Raw::<T>::new(acc.outs[2], m));
            let rows = chunk_rows(m);
            run_chunks(m.div_ceil(rows), numel, |c| {
                let (r0, r1) = (c * rows, ((c + 1) * rows).min(m));
                // SAFETY: chunk `c` reads rows r0..r1 of x and writes them of y,
                // mean and rstd (disjoint between chunks); the parameters are
                // read only; every range lies inside its tensor.
                unsafe {
                    T::ln_rows(
                        xr.get(r0 * n, (r1 - r0) * n),
                        y.get_mut(r0 * n, (r1 - r0) * n),
                        mean.get_mut(r0, r1 - r0),
                        rstd.get_mut(r0, r1 - r0),
                        w.map(|w| w.get(0, n)),
                        b.map(|b| b.get(0, n)),
                        eps,
                        n,
                    )
                }
            });
        }
        NormKind::Group { groups } => {
            let (nb, c) = (shape[0], shape[1]);
            let s = numel / (nb * c);
            let d = c / groups;
            let rows = nb * groups;
            let len = d * s;
            let (mean, rstd) = (Raw::<T>::new(acc.outs[1], rows), Raw::<T>::new(acc.outs[2], rows));
            run_chunks(rows, numel, |r| {
                let g = r % groups;
                // SAFETY: row `r` of x / y (contiguous, `len` long) and entry
                // `r` of mean / rstd are this task's alone.
                unsafe {
                    let (xs, ys) = (xr.get(r * len, len), y.get_mut(r * len, len));
                    let (shift, delta, rs) = moments(xs, eps);
                    mean.get_mut(r, 1)[0] = shift + delta;
                    rstd.get_mut(r, 1)[0] = rs;
                    for j in 0..d {
                        let ch = g * d + j;
                        let wv = w.map_or(T::ONE, |w| w.get(ch, 1)[0]);
                        let bv = b.map_or(T::ZERO, |b| b.get(ch, 1)[0]);
                        let scale = rs * wv;
                        // (x - shift) * scale + (b - delta * scale).
                        affine_run(
                            &xs[j * s..(j + 1) * s],
                            &mut ys[j * s..(j + 1) * s],
                            shift,
                            scale,
                            bv - delta * scale,
                        );
                    }
                }
            });
        }
        NormKind::Batch { training, momentum } => {
            let (nb, c) = (shape[0], shape[1]);
            let s = numel / (nb * c);
            let count = nb * s;
            let (sm, si) = if *training {
                (Raw::<T>::new(acc.outs[1], c), Raw::<T>::new(acc.outs[2], c))
            } else {
                (Raw::<T>::new(acc.outs[1], 0), Raw::<T>::new(acc.outs[2], 0))
            };
            let running_out =
                (r_at.is_some() && *training).then(|| (Raw::<T>::new(acc.outs[3], c), Raw::<T>::new(acc.outs[4], c)));
            let mom = *momentum;
            run_chunks(c, numel, |ch| {
                // SAFETY: channel `ch`'s runs of x and y, and entry `ch` of the
                // per-channel tensors, are this task's alone; all in bounds.
                unsafe {
                    let run = |n: usize| xr.get((n * c + ch) * s, s);
                    let (mean, invstd) = if *training {
                        let mut sum = 0.0f64;
                        for n in 0..nb {
                            sum += run(n).iter().map(|v| v.wide()).sum::<f64>();
                        }
                        let mean = sum / count as f64;
                        let mut var_sum = 0.0f64;
                        for n in 0..nb {
                            var_sum += run(n)
                                .iter()
                                .map(|v| {
                                    let dv = v.wide() - mean;
                                    dv * dv
                                })
                                .sum::<f64>();
                        }
                        let invstd = 1.0 / (var_sum / count as f64 + op.eps).sqrt();
                        sm.get_mut(ch, 1)[0] = T::of(mean);
                        si.get_mut(ch, 1)[0] = T::of(invstd);
                        if let Some((rm, rv)) = running_out {
                            let m = T::of(mom);
                            let keep = T::ONE - m;
                            let rm = &mut rm.get_mut(ch, 1)[0];
                            *rm = m * T::of(mean) + keep * *rm;
                            let unbiased = var_sum / (count as f64 - 1.0);
                            let rv = &mut rv.get_mut(ch, 1)[0];
                            *rv = T::of(m.wide() * unbiased + keep.wide() * rv.wide());
                        }
                        (mean, invstd)
                    } else {
                        let (rm, rv) = running_in.expect("evaluation has running statistics");
                        let mean = rm.get(ch, 1)[0].wide();
                        (mean, 1.0 / (rv.get(ch, 1)[0].wide() + op.eps).sqrt())
                    };
                    let wv = w.map_or(T::ONE, |w| w.get(ch, 1)[0]);
                    let bv = b.map_or(T::ZERO, |b| b.get(ch, 1)[0]);
                    let alpha = T::of(invstd) * wv;
                    let beta = bv - T::of(mean) * alpha;
                    for n in 0..nb {
                        affine_run(run(n), y.get_mut((n * c + ch) * s, s), T::ZERO, alpha, beta);
                    }
                }
            });
        }
    }
    Ok(())
}

pub(crate) fn norm_backward_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<NormBackward>(op)?;
    let x = inputs[1];
    match x.dtype() {
        DType::F32 => norm_backward_typed::<f32>(op, &prep(inputs, None)?, outputs),
        DType::F64 => norm_backward_typed::<f64>(op, &prep(inputs, None)?, outputs),
        DType::F16 | DType::BF16 => {
            let ins = prep(inputs, Some(DType::F32))?;
            let tmp: Vec<Tensor> = outputs
                .iter()
                .map(|o| TensorOptions::new().dtype(DType::F32).zeros(o.shape()))
                .collect::<Result<_>>()?;
            let refs: Vec<&Tensor> = tmp.iter().collect();
            norm_backward_typed::<f32>(op, &ins, &refs)?;
            for (o, t) in outputs.iter().zip(&tmp) {
                o.copy_(t)?;
            }
            Ok(())
        }
        d => Err(Error::dtype(
            op.entry().base_name(),
            d,
            "expects a floating-point input",
        )),
    }
}

fn norm_backward_typed<T: NormFloat>(op: &NormBackward, ins: &[Tensor], outs: &[&Tensor]) -> Result<()> {
    let name = op.entry().base_name();
    let norm = &op.norm;
    let x = &ins[1];
    let shape = x.shape().to_vec();
    let numel = x.numel();
    let refs: Vec<&Tensor> = ins.iter().collect();
    let acc = access(name, &refs, outs)?;
    let dy = Raw::<T>::new(acc.ins[0], numel);
    let xr = Raw::<T>::new(acc.ins[1], numel);
    let s0 = Raw::<T>::new(acc.ins[2], ins[2].numel());
    let s1 = Raw::<T>::new(acc.ins[3], ins[3].numel());
    let param_len = match &norm.kind {
        NormKind::Layer { normalized } => normalized.iter().product(),
        _ => shape.get(1).copied().unwrap_or(1),
    };
    let w = norm.weight.then(|| Raw::<T>::new(acc.ins[4], param_len));
    let [mdx, mdw, mdb] = op.mask;
    let dx = Raw::<T>::new(acc.outs[0], if mdx { numel } else { 0 });
    let dw = Raw::<T>::new(acc.outs[1], if mdw { param_len } else { 0 });
    let db = Raw::<T>::new(acc.outs[2], if mdb { param_len } else { 0 });
    if numel == 0 {
        // SAFETY: the parameter gradients have `param_len` elements each.
        unsafe {
            if mdw {
                dw.get_mut(0, param_len).fill(T::ZERO);
            }
            if mdb {
                db.get_mut(0, param_len).fill(T::ZERO);
            }
        }
        return Ok(());
    }
    match &norm.kind {
        NormKind::Layer { normalized } => {
            let n: usize = normalized.iter().product();
            let m = numel / n;
            // The weight's and bias's gradients sum the rows in two halves
            // (each half's rows in order, its terms accumulated fused), then
            // the halves: PyTorch's partition with two threads, the
            // reference machine's, whatever thread count runs here.
            let rows = m.div_ceil(2).max(1);
            let chunks = m.div_ceil(rows);
            let want_partials = mdw || mdb;
            let mut partials = vec![T::ZERO; if want_partials { 2 * chunks * n } else { 0 }];
            let pr = Raw::<T>::new(partials.as_mut_ptr() as *const u8, partials.len());
            run_chunks(chunks, numel, |c| {
                let (r0, r1) = (c * rows, ((c + 1) * rows).min(m));
                let len = (r1 - r0) * n;
                // SAFETY: chunk `c` reads rows r0..r1 and writes them of dx and
                // its own partial sums (disjoint between chunks); in bounds.
                unsafe {
                    T::ln_bwd(
                        dy.get(r0 * n, len),
                        xr.get(r0 * n, len),
                        s0.get(r0, r1 - r0),
                        s1.get(r0, r1 - r0),
                        w.map(|w| w.get(0, n)),
                        mdx.then(|| dx.get_mut(r0 * n, len)),
                        mdw.then(|| pr.get_mut(2 * c * n, n)),
                        mdb.then(|| pr.get_mut((2 * c + 1) * n, n)),
                        n,
                    )
                }
            });
            // Chunk sums in chunk order.
            for (on, out, off) in [(mdw, dw, 0), (mdb, db, 1)] {
                if !on {
                    continue;
                }
                // SAFETY: the gradient has `n` elements, written here alone.
                let o = unsafe { out.get_mut(0, n) };
                o.fill(T::ZERO);
                for c in 0..chunks {
                    let p = &partials[(2 * c + off) * n..(2 * c + off + 1) * n];
                    for (a, &v) in o.iter_mut().zip(p) {
                        *a = *a + v;
                    }
                }
            }
        }
        NormKind::Group { groups } => {
            let (nb, c) = (shape[0], shape[1]);
            let s = numel / (nb * c);
            let d = c / groups;
            let rows = nb * groups;
            let len = d * s;
            let mut sums = vec![T::ZERO; 2 * nb * c];
            let sr = Raw::<T>::new(sums.as_mut_ptr() as *const u8, sums.len());
            let inv_len = T::ONE / T::of(len as f64);
            run_chunks(rows, numel, |r| {
                let (nn, g) = (r / groups, r % groups);
                // SAFETY: row `r` of dy, x and dx, and the entries of its
                // channels in the sums, are this task's alone; in bounds.
                unsafe {
                    let (dys, xs) = (dy.get(r * len, len), xr.get(r * len, len));
                    let (m, rs) = (s0.get(r, 1)[0], s1.get(r, 1)[0]);
                    // Centred sums: `ds = sum(dy * (x - mean))`, where
                    // PyTorch takes `sum(dy * x) - mean * sum(dy)`, which
                    // cancels catastrophically in f32 when the mean is
                    // large against the spread (a 1% error at |mean| / std
                    // = 250). The saved mean is rounded, and that rounding
                    // (an ulp of the mean, against the spread) is as bad:
                    // `x - mean` is taken against the mean plus `fix`, the
                    // mean of `x - mean` (as the forward's shift + delta).
                    let fix = sum1(xs, |q| q - m) * inv_len;
                    let (mut ds_g, mut db_g) = (T::ZERO, T::ZERO);
                    for j in 0..d {
                        let ch = g * d + j;
                        let (a, b) = (&dys[j * s..(j + 1) * s], &xs[j * s..(j + 1) * s]);
                        let ds = sum2(a, b, |p, q| p * ((q - m) - fix));
                        let dbv = sum1(a, |p| p);
                        sr.get_mut(nn * c + ch, 1)[0] = ds;
                        sr.get_mut(nb * c + nn * c + ch, 1)[0] = dbv;
                        let wv = w.map_or(T::ONE, |w| w.get(ch, 1)[0]);
                        ds_g = ds_g + ds * wv;
                        db_g = db_g + dbv * wv;
                    }
                    if mdx {
                        // dx = rstd * w * dy + c2 * (x - mean) + c3.
                        let c2 = -ds_g * rs * rs * rs * inv_len;
                        let c3 = -db_g * rs * inv_len;
                        let dxs = dx.get_mut(r * len, len);
                        for j in 0..d {
                            let ch = g * d + j;
                            let c1 = rs * w.map_or(T::ONE, |w| w.get(ch, 1)[0]);
                            let (a, b) = (&dys[j * s..(j + 1) * s], &xs[j * s..(j + 1) * s]);
                            for ((o, &p), &q) in dxs[j * s..(j + 1) * s].iter_mut().zip(a).zip(b) {
                                *o = c1 * p + c2 * ((q - m) - fix) + c3;
                            }
                        }
                    }
                }
            });
            for ch in 0..c {
                let g = ch / d;
                let (mut gw, mut gb) = (T::ZERO, T::ZERO);
                for nn in 0..nb {
                    let (ds, dbv) = (sums[nn * c + ch], sums[nb * c + nn * c + ch]);
                    // SAFETY: the statistics have `nb * groups` entries.
                    let rs = unsafe { s1.get(nn * groups + g, 1)[0] };
                    gw = gw + ds * rs;
                    gb = gb + dbv;
                }
                // SAFETY: the parameter gradients have `c` elements.
                unsafe {
                    if mdw {
                        dw.get_mut(ch, 1)[0] = gw;
                    }
                    if mdb {
                        db.get_mut(ch, 1)[0] = gb;
                    }
                }
            }
        }
        NormKind::Batch { training, .. } => {
            let (nb, c) = (shape[0], shape[1]);
            let s = numel / (nb * c);
            let count = (nb * s) as f64;
            let eps = norm.eps;
            run_chunks(c, numel, |ch| {
                // SAFETY: channel `ch`'s runs of dy, x and dx, and entry `ch`
                // of the parameter gradients, are this task's alone.
                unsafe {
                    let at = |n: usize| (n * c + ch) * s;
                    let (mean, invstd) = if *training {
                        (s0.get(ch, 1)[0].wide(), s1.get(ch, 1)[0].wide())
                    } else {
                        (s0.get(ch, 1)[0].wide(), 1.0 / (s1.get(ch, 1)[0].wide() + eps).sqrt())
                    };
                    let (mut sum, mut dot) = (0.0f64, 0.0f64);
                    for n in 0..nb {
                        for (&g, &v) in dy.get(at(n), s).iter().zip(xr.get(at(n), s)) {
                            sum += g.wide();
                            dot += (v.wide() - mean) * g.wide();
                        }
                    }
                    let wv = w.map_or(1.0, |w| w.get(ch, 1)[0].wide());
                    if mdx {
                        if *training {
                            let k = dot * invstd * invstd / count;
                            let gm = sum / count;
                            let (k, gm, mean_t, scale) = (T::of(k), T::of(gm), T::of(mean), T::of(invstd * wv));
                            for n in 0..nb {
                                let o = dx.get_mut(at(n), s);
                                for ((o, &g), &v) in o.iter_mut().zip(dy.get(at(n), s)).zip(xr.get(at(n), s)) {
                                    *o = (g - gm - (v - mean_t) * k) * scale;
                                }
                            }
                        } else {
                            let scale = T::of(invstd * wv);
                            for n in 0..nb {
                                let o = dx.get_mut(at(n), s);
                                for (o, &g) in o.iter_mut().zip(dy.get(at(n), s)) {
                                    *o = g * scale;
                                }
                            }
                        }
                    }
                    if mdw {
                        dw.get_mut(ch, 1)[0] = T::of(dot * invstd);
                    }
                    if mdb {
                        db.get_mut(ch, 1)[0] = T::of(sum);
                    }
                }
            });
        }
    }
    Ok(())
}
