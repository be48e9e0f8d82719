//! CPU kernels of the pooling operators (`ops/pool.rs`), one `H x W` plane
//! at a time as PyTorch's kernels: max pools record the flat index of each
//! maximum (NaN wins, as `(val > max) || isnan(val)`), their backward adds
//! each output's gradient at its index; average pools sum their window in
//! row-major order and divide (PyTorch's divisors). Planes are independent
//! and each is computed in one fixed order, so results do not depend on the
//! thread count.

use half::{bf16, f16};

use super::access::access;
use super::copy::cast_into;
use super::simd::multiversion;
use super::warm::par_for_each;
use crate::dispatch::{Op, downcast_op};
use crate::ops::pool::{
    AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool2d, AvgPool2dBackward, MaxPool2d, Pool2dParams, adaptive_window,
};
use crate::{DType, Element, Error, Result, Tensor};

/// The arithmetic the pools need, as PyTorch's kernels do it for the type
/// (`opmath`: half types in f32, integers wrapping).
trait Arith: Element {
    /// The type sums are accumulated in.
    type Acc: Copy;
    const ZERO: Self::Acc;
    fn add(self, o: Self) -> Self;
    fn acc(a: Self::Acc, v: Self) -> Self::Acc;
    /// `a / d` back in this type (integers truncate).
    fn div_acc(a: Self::Acc, d: i64) -> Self;
    /// `a / d1 / d2` back in this type.
    fn div2_acc(a: Self::Acc, d1: i64, d2: i64) -> Self;
    /// `self / d` in this type.
    fn div(self, d: i64) -> Self;
}

macro_rules! float_arith {
    ($t:ty) => {
        impl Arith for $t {
            type Acc = $t;
            const ZERO: $t = 0.0;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn acc(a: $t, v: Self) -> $t {
                a + v
            }
            fn div_acc(a: $t, d: i64) -> Self {
                a / d as $t
            }
            fn div2_acc(a: $t, d1: i64, d2: i64) -> Self {
                a / d1 as $t / d2 as $t
            }
            fn div(self, d: i64) -> Self {
                self / d as $t
            }
        }
    };
}
float_arith!(f32);
float_arith!(f64);

macro_rules! half_arith {
    ($t:ty) => {
        impl Arith for $t {
            type Acc = f32;
            const ZERO: f32 = 0.0;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32() + o.to_f32())
            }
            #[inline(always)]
            fn acc(a: f32, v: Self) -> f32 {
                a + v.to_f32()
            }
            fn div_acc(a: f32, d: i64) -> Self {
                <$t>::from_f32(a / d as f32)
            }
            fn div2_acc(a: f32, d1: i64, d2: i64) -> Self {
                <$t>::from_f32(a / d1 as f32 / d2 as f32)
            }
            fn div(self, d: i64) -> Self {
                <$t>::from_f32(self.to_f32() / d as f32)
            }
        }
    };
}
half_arith!(f16);
half_arith!(bf16);

macro_rules! int_arith {
    ($t:ty) => {
        impl Arith for $t {
            type Acc = i64;
            const ZERO: i64 = 0;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn acc(a: i64, v: Self) -> i64 {
                a.wrapping_add(v as i64)
            }
            fn div_acc(a: i64, d: i64) -> Self {
                a.wrapping_div(d) as $t
            }
            fn div2_acc(a: i64, d1: i64, d2: i64) -> Self {
                a.wrapping_div(d1).wrapping_div(d2) as $t
            }
            fn div(self, d: i64) -> Self {
                (self as i64).wrapping_div(d) as $t
            }
        }
    };
}
int_arith!(i64);
int_arith!(i32);
int_arith!(u8);

/// A raw pointer shared by the threads of one kernel call.
#[derive(Clone, Copy)]
struct Ptr<T>(*mut T);
// SAFETY: threads read shared inputs and write disjoint planes of the
// outputs through these; the buffers outlive the parallel region.
unsafe impl<T> Send for Ptr<T> {}
// SAFETY: as for Send.
unsafe impl<T> Sync for Ptr<T> {}

impl<T> Ptr<T> {
    /// The pointer `off` elements on (a method, so closures capture the `Ptr`).
    fn at(self, off: usize) -> *mut T {
        self.0.wrapping_add(off)
    }
}

/// Runs `f(p0, p1)` over ranges of `planes` planes, in parallel when the
/// work (`per_plane` steps each) is large.
fn over_planes(planes: usize, per_plane: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    let threads = rayon::current_num_threads();
    if threads > 1 && planes > 1 && planes.saturating_mul(per_plane) >= 1 << 15 {
        let tasks = planes.min(threads * 4);
        par_for_each(tasks, |t| f(t * planes / tasks, (t + 1) * planes / tasks));
    } else {
        f(0, planes);
    }
}

/// Plane geometry: input `h x w`, output `oh x ow`.
#[derive(Clone, Copy)]
struct Planes {
    n: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
}

impl Planes {
    fn of(x: &Tensor, out: &Tensor) -> Planes {
        let (xs, os) = (x.shape(), out.shape());
        let k = xs.len();
        let (h, w) = (xs[k - 2], xs[k - 1]);
        Planes {
            n: x.numel().checked_div(h * w).unwrap_or(0),
            h,
            w,
            oh: os[k - 2],
            ow: os[k - 1],
        }
    }
}

/// A contiguous tensor to write `out`'s values into (itself, or a temporary
/// [`finish`] copies in).
fn target(out: &Tensor) -> Result<Tensor> {
    if out.is_contiguous() {
        Ok(out.clone())
    } else {
        crate::TensorOptions::like(out).zeros(out.shape())
    }
}

fn finish(out: &Tensor, t: &Tensor) -> Result<()> {
    if t.is_same(out) { Ok(()) } else { cast_into(out, t) }
}

/// The window of output `(r, q)` along one dim of a (dilated) pool:
/// PyTorch's `[start, end)` clipped to the input, `start` moved past the
/// padding by whole dilation steps.
#[inline(always)]
fn window(o: usize, s: usize, p: usize, k: usize, d: usize, len: usize) -> (usize, usize) {
    let mut lo = (o * s) as isize - p as isize;
    let hi = (lo + ((k - 1) * d + 1) as isize).min(len as isize);
    while lo < 0 {
        lo += d as isize;
    }
    (lo as usize, hi.max(lo) as usize)
}

/// One plane of a max pool over the windows `win_h(r)` x `win_w(q)` with
/// taps every `dh` / `dw`: values and flat indices.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn max_plane<T: Element>(
    x: &[T],
    w: usize,
    oh: usize,
    ow: usize,
    (dh, dw): (usize, usize),
    win_h: impl Fn(usize) -> (usize, usize),
    win_w: impl Fn(usize) -> (usize, usize),
    vals: &mut [T],
    idx: &mut [i64],
) {
    let lowest = T::from_f64(f64::NEG_INFINITY);
    for r in 0..oh {
        let (h0, h1) = win_h(r);
        for q in 0..ow {
            let (w0, w1) = win_w(q);
            let mut best = lowest;
            let mut at = h0 * w + w0;
            let mut ih = h0;
            while ih < h1 {
                let row = &x[ih * w..ih * w + w];
                let mut iw = w0;
                while iw < w1 {
                    let v = row[iw];
                    #[allow(clippy::eq_op)]
                    if v > best || v != v {
                        best = v;
                        at = ih * w + iw;
                    }
                    iw += dw;
                }
                ih += dh;
            }
            vals[r * ow + q] = best;
            idx[r * ow + q] = at as i64;
        }
    }
}

/// The 2x2, stride 2 window without padding or dilation (the common case).
#[inline(always)]
fn max_plane_2x2<T: Element>(x: &[T], w: usize, oh: usize, ow: usize, vals: &mut [T], idx: &mut [i64]) {
    for r in 0..oh {
        let (a, b) = (&x[2 * r * w..2 * r * w + w], &x[(2 * r + 1) * w..(2 * r + 2) * w]);
        let (vr, ir) = (&mut vals[r * ow..(r + 1) * ow], &mut idx[r * ow..(r + 1) * ow]);
        max_row_2x2(a, b, 2 * r * w, w, vr, ir);
    }
}

/// One output row of [`max_plane_2x2`] from input rows `a` and `b` (the
/// first at flat index `base`), without branches, so it vectorises.
#[inline(always)]
fn max_row_2x2<T: Element>(a: &[T], b: &[T], base: usize, w: usize, vr: &mut [T], ir: &mut [i64]) {
    let ow = vr.len();
    let (a, b, ir) = (&a[..2 * ow], &b[..2 * ow], &mut ir[..ow]);
    for q in 0..ow {
        let c = 2 * q;
        // PyTorch's order: (0, 0), (0, 1), (1, 0), (1, 1); a NaN replaces the best so far.
        #[allow(clippy::eq_op)]
        let take = |v: T, best: T| v > best || v != v;
        let (mut best, mut off) = (a[c], 0);
        for (v, o) in [(a[c + 1], 1), (b[c], w), (b[c + 1], w + 1)] {
            let t = take(v, best);
            best = if t { v } else { best };
            off = if t { o } else { off };
        }
        vr[q] = best;
        ir[q] = (base + c + off) as i64;
    }
}

multiversion! {
    /// [`max_plane_2x2`] for f32, vectorised.
    fn max_plane_2x2_f32(x: &[f32], w: usize, oh: usize, ow: usize, vals: &mut [f32], idx: &mut [i64]) {
        max_plane_2x2(x, w, oh, ow, vals, idx)
    }
}

/// One plane of a max pool: input, values, indices.
type MaxPlaneFn<'a, T> = &'a (dyn Fn(&[T], &mut [T], &mut [i64]) + Sync);

/// Runs `plane(x_plane, vals_plane, idx_plane)` for every plane of a max
/// pool's contiguous input into its contiguous outputs.
fn max_pool_run<T: Element>(
    name: &'static str,
    x: &Tensor,
    outputs: &[&Tensor],
    plane: MaxPlaneFn<T>,
    per_plane: usize,
) -> Result<()> {
    let x = x.contiguous()?;
    let (vals, idx) = (target(outputs[0])?, target(outputs[1])?);
    let pl = Planes::of(&x, &vals);
    {
        let acc = access(name, &[&x], &[&vals, &idx])?;
        let (xp, vp, ip) = (
            Ptr(acc.ins[0] as *mut T),
            Ptr(acc.outs[0] as *mut T),
            Ptr(acc.outs[1] as *mut i64),
        );
        let (hw, ol) = (pl.h * pl.w, pl.oh * pl.ow);
        over_planes(pl.n, per_plane, &|p0, p1| {
            for p in p0..p1 {
                // SAFETY: plane p of the contiguous input and outputs, each
                // plane written by one task.
                let (xs, vs, is) = unsafe {
                    (
                        std::slice::from_raw_parts(xp.at(p * hw), hw),
                        std::slice::from_raw_parts_mut(vp.at(p * ol), ol),
                        std::slice::from_raw_parts_mut(ip.at(p * ol), ol),
                    )
                };
                plane(xs, vs, is);
            }
        });
    }
    finish(outputs[0], &vals)?;
    finish(outputs[1], &idx)
}

fn max_pool_typed<T: Element>(p: &Pool2dParams, x: &Tensor, outputs: &[&Tensor]) -> Result<()> {
    let pl = Planes::of(x, outputs[0]);
    let (h, w) = (pl.h, pl.w);
    let per = pl.oh * pl.ow * p.kernel[0] * p.kernel[1];
    let p = *p;
    if p.kernel == [2, 2] && p.stride == [2, 2] && p.padding == [0, 0] && p.dilation == [1, 1] && !p.ceil_mode {
        let (oh, ow) = (pl.oh, pl.ow);
        return max_pool_run::<T>(
            "max_pool2d",
            x,
            outputs,
            &|xs, vs, is| {
                if T::DTYPE == DType::F32 {
                    // SAFETY: T is f32 (checked above): the slices are reinterpreted as their own type.
                    let (xs, vs) = unsafe {
                        (
                            std::slice::from_raw_parts(xs.as_ptr() as *const f32, xs.len()),
                            std::slice::from_raw_parts_mut(vs.as_mut_ptr() as *mut f32, vs.len()),
                        )
                    };
                    max_plane_2x2_f32(xs, w, oh, ow, vs, is)
                } else {
                    max_plane_2x2(xs, w, oh, ow, vs, is)
                }
            },
            per,
        );
    }
    let (oh, ow) = (pl.oh, pl.ow);
    max_pool_run::<T>(
        "max_pool2d",
        x,
        outputs,
        &|xs, vs, is| {
            max_plane(
                xs,
                w,
                oh,
                ow,
                (p.dilation[0], p.dilation[1]),
                |r| window(r, p.stride[0], p.padding[0], p.kernel[0], p.dilation[0], h),
                |q| window(q, p.stride[1], p.padding[1], p.kernel[1], p.dilation[1], w),
                vs,
                is,
            )
        },
        per,
    )
}

fn adaptive_max_typed<T: Element>(x: &Tensor, outputs: &[&Tensor]) -> Result<()> {
    let pl = Planes::of(x, outputs[0]);
    let (h, w, oh, ow) = (pl.h, pl.w, pl.oh, pl.ow);
    let per = h * w + oh * ow;
    max_pool_run::<T>(
        "adaptive_max_pool2d",
        x,
        outputs,
        &|xs, vs, is| {
            max_plane(
                xs,
                w,
                oh,
                ow,
                (1, 1),
                |r| adaptive_window(r, oh, h),
                |q| adaptive_window(q, ow, w),
                vs,
                is,
            )
        },
        per,
    )
}

pub(crate) fn max_pool2d_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let p = downcast_op::<MaxPool2d>(op)?.params;
    if outputs[0].numel() == 0 {
        return Ok(());
    }
    let x = inputs[0];
    match x.dtype() {
        DType::F32 => max_pool_typed::<f32>(&p, x, outputs),
        DType::F64 => max_pool_typed::<f64>(&p, x, outputs),
        DType::F16 => max_pool_typed::<f16>(&p, x, outputs),
        DType::BF16 => max_pool_typed::<bf16>(&p, x, outputs),
        DType::I64 => max_pool_typed::<i64>(&p, x, outputs),
        DType::I32 => max_pool_typed::<i32>(&p, x, outputs),
        DType::U8 => max_pool_typed::<u8>(&p, x, outputs),
        d => Err(Error::dtype(
            "max_pool2d",
            d,
            "\"max_pool2d\" not implemented for 'Bool'",
        )),
    }
}

pub(crate) fn adaptive_max_pool2d_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    downcast_op::<AdaptiveMaxPool2d>(op)?;
    if outputs[0].numel() == 0 {
        return Ok(());
    }
    let x = inputs[0];
    match x.dtype() {
        DType::F32 => adaptive_max_typed::<f32>(x, outputs),
        DType::F64 => adaptive_max_typed::<f64>(x, outputs),
        DType::F16 => adaptive_max_typed::<f16>(x, outputs),
        DType::BF16 => adaptive_max_typed::<bf16>(x, outputs),
        d => Err(Error::dtype(
            "adaptive_max_pool2d",
            d,
            format!("\"adaptive_max_pool2d\" not implemented for '{}'", d.scalar_type_name()),
        )),
    }
}

/// The input gradient of one plane of a max pool whose indices each lie in
/// their output's own 2x2 block (rows `2r, 2r + 1`, columns `2q, 2q + 1`):
/// the blocks are disjoint, so every input element receives at most one
/// gradient and the plane is written in one pass, row by row, as zeros plus
/// that gradient (the bits of the fill-and-add). `false` (the plane
/// partly written) when an index lies elsewhere.
#[inline(always)]
fn scatter_2x2<T: Arith>(gs: &[T], is: &[i64], os: &mut [T], w: usize, oh: usize, ow: usize) -> bool {
    let zero = T::default();
    for r in 0..oh {
        let (top, bot) = os[2 * r * w..(2 * r + 2) * w].split_at_mut(w);
        let (g, ix) = (&gs[r * ow..(r + 1) * ow], &is[r * ow..(r + 1) * ow]);
        let (top2, bot2) = (&mut top[..2 * ow], &mut bot[..2 * ow]);
        let base = (2 * r * w) as i64;
        let wi = w as i64;
        let mut ok = true;
        for q in 0..ow {
            let d = ix[q] - base - 2 * q as i64;
            let v = zero.add(g[q]);
            top2[2 * q] = if d == 0 { v } else { zero };
            top2[2 * q + 1] = if d == 1 { v } else { zero };
            bot2[2 * q] = if d == wi { v } else { zero };
            bot2[2 * q + 1] = if d == wi + 1 { v } else { zero };
            ok &= d == 0 || d == 1 || d == wi || d == wi + 1;
        }
        if !ok {
            return false;
        }
        top[2 * ow..].fill(zero);
        bot[2 * ow..].fill(zero);
    }
    os[2 * oh * w..].fill(zero);
    true
}

multiversion! {
    /// [`scatter_2x2`] for f32, vectorised.
    fn scatter_2x2_f32(gs: &[f32], is: &[i64], os: &mut [f32], w: usize, oh: usize, ow: usize) -> bool {
        scatter_2x2(gs, is, os, w, oh, ow)
    }
}

/// `grad_input` of a max pool: zeros, then each output's gradient added at
/// its index, in output order. An index outside the plane is an error.
fn max_backward_typed<T: Arith>(name: &'static str, g: &Tensor, x: &Tensor, idx: &Tensor, out: &Tensor) -> Result<()> {
    let (g, idx) = (g.contiguous()?, idx.contiguous()?);
    let gi = target(out)?;
    let pl = Planes::of(x, &g);
    let (hw, ol) = (pl.h * pl.w, pl.oh * pl.ow);
    let bad = std::sync::atomic::AtomicBool::new(false);
    // Outputs that may each own a 2x2 block of the input ([`scatter_2x2`]).
    let blocks = pl.ow > 0 && 2 * pl.oh <= pl.h && 2 * pl.ow <= pl.w;
    {
        let acc = access(name, &[&g, &idx], &[&gi])?;
        let (gp, ip, op) = (
            Ptr(acc.ins[0] as *mut T),
            Ptr(acc.ins[1] as *mut i64),
            Ptr(acc.outs[0] as *mut T),
        );
        over_planes(pl.n, hw + ol, &|p0, p1| {
            for p in p0..p1 {
                // SAFETY: plane p of the contiguous inputs and output, each
                // output plane written by one task.
                let (gs, is, os) = unsafe {
                    (
                        std::slice::from_raw_parts(gp.at(p * ol), ol),
                        std::slice::from_raw_parts(ip.at(p * ol), ol),
                        std::slice::from_raw_parts_mut(op.at(p * hw), hw),
                    )
                };
                if blocks {
                    let done = if T::DTYPE == DType::F32 {
                        // SAFETY: T is f32 (checked): the slices are reinterpreted as their own type.
                        let (gs, os) = unsafe {
                            (
                                std::slice::from_raw_parts(gs.as_ptr() as *const f32, gs.len()),
                                std::slice::from_raw_parts_mut(os.as_mut_ptr() as *mut f32, os.len()),
                            )
                        };
                        scatter_2x2_f32(gs, is, os, pl.w, pl.oh, pl.ow)
                    } else {
                        scatter_2x2(gs, is, os, pl.w, pl.oh, pl.ow)
                    };
                    if done {
                        continue;
                    }
                }
                os.fill(T::default());
                for (&v, &i) in gs.iter().zip(is) {
                    match usize::try_from(i).ok().filter(|&i| i < hw) {
                        Some(i) => os[i] = os[i].add(v),
                        None => bad.store(true, std::sync::atomic::Ordering::Relaxed),
                    }
                }
            }
        });
    }
    if bad.into_inner() {
        return Err(Error::invalid(
            name,
            format!("an index is outside the input plane of {hw} elements"),
        ));
    }
    finish(out, &gi)
}

/// Kernel of `max_pool2d_with_indices_backward` and `adaptive_max_pool2d_backward`.
pub(crate) fn max_pool_backward_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let name = op.entry().base_name();
    let (g, x, idx, out) = (inputs[0], inputs[1], inputs[2], outputs[0]);
    if out.numel() == 0 {
        return Ok(());
    }
    match x.dtype() {
        DType::F32 => max_backward_typed::<f32>(name, g, x, idx, out),
        DType::F64 => max_backward_typed::<f64>(name, g, x, idx, out),
        DType::F16 => max_backward_typed::<f16>(name, g, x, idx, out),
        DType::BF16 => max_backward_typed::<bf16>(name, g, x, idx, out),
        DType::I64 => max_backward_typed::<i64>(name, g, x, idx, out),
        DType::I32 => max_backward_typed::<i32>(name, g, x, idx, out),
        DType::U8 => max_backward_typed::<u8>(name, g, x, idx, out),
        d => Err(Error::dtype(name, d, "not implemented for 'Bool'")),
    }
}

/// The window of average-pool output `o` along one dim and its share of the
/// divisor: PyTorch's `[start, end)` inside the padded input, then clipped
/// to the input.
#[inline(always)]
fn avg_window(o: usize, s: usize, p: usize, k: usize, len: usize) -> (usize, usize, usize) {
    let lo = (o * s) as isize - p as isize;
    let hi = (lo + k as isize).min((len + p) as isize);
    let padded = (hi - lo).max(0) as usize;
    let (lo, hi) = (lo.max(0) as usize, (hi.min(len as isize)).max(0) as usize);
    (lo, hi.max(lo), padded)
}

/// The divisor of an average-pool window (`None`: an empty window, output 0).
fn avg_divisor(
    op: &AvgPool2d,
    (h0, h1, ph): (usize, usize, usize),
    (w0, w1, pw): (usize, usize, usize),
) -> Option<i64> {
    if h0 >= h1 || w0 >= w1 {
        return None;
    }
    Some(match op.divisor_override {
        Some(d) => d,
        None if op.count_include_pad => (ph * pw) as i64,
        None => ((h1 - h0) * (w1 - w0)) as i64,
    })
}

/// Runs `plane(input_plane, output_plane)` for every plane (`a` read, `b`
/// written; contiguous), writing all of `out`.
fn planes_run<T: Element>(
    name: &'static str,
    a: &Tensor,
    pa: usize,
    out: &Tensor,
    pb: usize,
    per_plane: usize,
    plane: &(dyn Fn(&[T], &mut [T]) + Sync),
) -> Result<()> {
    let a = a.contiguous()?;
    let b = target(out)?;
    let n = b.numel().checked_div(pb).unwrap_or(0);
    {
        let acc = access(name, &[&a], &[&b])?;
        let (ap, bp) = (Ptr(acc.ins[0] as *mut T), Ptr(acc.outs[0] as *mut T));
        over_planes(n, per_plane, &|p0, p1| {
            for p in p0..p1 {
                // SAFETY: plane p of the contiguous input and output, each
                // output plane written by one task.
                let (s, d) = unsafe {
                    (
                        std::slice::from_raw_parts(ap.at(p * pa), pa),
                        std::slice::from_raw_parts_mut(bp.at(p * pb), pb),
                    )
                };
                plane(s, d);
            }
        });
    }
    finish(out, &b)
}

fn avg_forward_typed<T: Arith>(op: &AvgPool2d, x: &Tensor, out: &Tensor) -> Result<()> {
    let pl = Planes::of(x, out);
    let (h, w, oh, ow) = (pl.h, pl.w, pl.oh, pl.ow);
    let p = op.params;
    let op = *op;
    planes_run::<T>(
        "avg_pool2d",
        x,
        h * w,
        out,
        oh * ow,
        oh * ow * p.kernel[0] * p.kernel[1],
        &|xs, ys| {
            for r in 0..oh {
                let wh = avg_window(r, p.stride[0], p.padding[0], p.kernel[0], h);
                for q in 0..ow {
                    let ww = avg_window(q, p.stride[1], p.padding[1], p.kernel[1], w);
                    ys[r * ow + q] = match avg_divisor(&op, wh, ww) {
                        None => T::default(),
                        Some(d) => {
                            let mut s = T::ZERO;
                            for ih in wh.0..wh.1 {
                                for &v in &xs[ih * w + ww.0..ih * w + ww.1] {
                                    s = T::acc(s, v);
                                }
                            }
                            T::div_acc(s, d)
                        }
                    };
                }
            }
        },
    )
}

fn avg_backward_typed<T: Arith>(op: &AvgPool2d, g: &Tensor, out: &Tensor) -> Result<()> {
    let pl = Planes::of(out, g);
    let (h, w, oh, ow) = (pl.h, pl.w, pl.oh, pl.ow);
    let p = op.params;
    let op = *op;
    planes_run::<T>(
        "avg_pool2d_backward",
        g,
        oh * ow,
        out,
        h * w,
        oh * ow * p.kernel[0] * p.kernel[1],
        &|gs, xs| {
            xs.fill(T::default());
            for r in 0..oh {
                let wh = avg_window(r, p.stride[0], p.padding[0], p.kernel[0], h);
                for q in 0..ow {
                    let ww = avg_window(q, p.stride[1], p.padding[1], p.kernel[1], w);
                    if let Some(d) = avg_divisor(&op, wh, ww) {
                        let delta = gs[r * ow + q].div(d);
                        for ih in wh.0..wh.1 {
                            for v in &mut xs[ih * w + ww.0..ih * w + ww.1] {
                                *v = v.add(delta);
                            }
                        }
                    }
                }
            }
        },
    )
}

fn adaptive_avg_typed<T: Arith>(x: &Tensor, out: &Tensor) -> Result<()> {
    let pl = Planes::of(x, out);
    let (h, w, oh, ow) = (pl.h, pl.w, pl.oh, pl.ow);
    planes_run::<T>(
        "adaptive_avg_pool2d",
        x,
        h * w,
        out,
        oh * ow,
        h * w + oh * ow,
        &|xs, ys| {
            for r in 0..oh {
                let (h0, h1) = adaptive_window(r, oh, h);
                for q in 0..ow {
                    let (w0, w1) = adaptive_window(q, ow, w);
                    let mut s = T::ZERO;
                    for ih in h0..h1 {
                        for &v in &xs[ih * w + w0..ih * w + w1] {
                            s = T::acc(s, v);
                        }
                    }
                    ys[r * ow + q] = T::div2_acc(s, (h1 - h0) as i64, (w1 - w0) as i64);
                }
            }
        },
    )
}

fn adaptive_avg_backward_typed<T: Arith>(g: &Tensor, out: &Tensor) -> Result<()> {
    let pl = Planes::of(out, g);
    let (h, w, oh, ow) = (pl.h, pl.w, pl.oh, pl.ow);
    planes_run::<T>(
        "adaptive_avg_pool2d_backward",
        g,
        oh * ow,
        out,
        h * w,
        h * w + oh * ow,
        &|gs, xs| {
            xs.fill(T::default());
            for r in 0..oh {
                let (h0, h1) = adaptive_window(r, oh, h);
                for q in 0..ow {
                    let (w0, w1) = adaptive_window(q, ow, w);
                    let delta = gs[r * ow + q].div((h1 - h0) as i64).div((w1 - w0) as i64);
                    for ih in h0..h1 {
                        for v in &mut xs[ih * w + w0..ih * w + w1] {
                            *v = v.add(delta);
                        }
                    }
                }
            }
        },
    )
}

macro_rules! float_or_long {
    ($name:expr, $dt:expr, $f:ident, $($arg:expr),*) => {
        match $dt {
            DType::F32 => $f::<f32>($($arg),*),
            DType::F64 => $f::<f64>($($arg),*),
            DType::F16 => $f::<f16>($($arg),*),
            DType::BF16 => $f::<bf16>($($arg),*),
            DType::I64 => $f::<i64>($($arg),*),
            d => Err(Error::dtype($name, d, format!("\"{}\" not implemented for '{}'", $name, d.scalar_type_name()))),
        }
    };
}

pub(crate) fn avg_pool2d_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<AvgPool2d>(op)?;
    if outputs[0].numel() == 0 {
        return Ok(());
    }
    float_or_long!(
        "avg_pool2d",
        inputs[0].dtype(),
        avg_forward_typed,
        op,
        inputs[0],
        outputs[0]
    )
}

pub(crate) fn avg_pool2d_backward_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<AvgPool2dBackward>(op)?;
    if outputs[0].numel() == 0 {
        return Ok(());
    }
    float_or_long!(
        "avg_pool2d_backward",
        inputs[0].dtype(),
        avg_backward_typed,
        &op.0,
        inputs[0],
        outputs[0]
    )
}

pub(crate) fn adaptive_avg_pool2d_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    downcast_op::<AdaptiveAvgPool2d>(op)?;
    if outputs[0].numel() == 0 {
        return Ok(());
    }
    float_or_long!(
        "adaptive_avg_pool2d",
        inputs[0].dtype(),
        adaptive_avg_typed,
        inputs[0],
        outputs[0]
    )
}

pub(crate) fn adaptive_avg_pool2d_backward_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    if outputs[0].numel() == 0 {
        return Ok(());
    }
    float_or_long!(
        "adaptive_avg_pool2d_backward",
        inputs[0].dtype(),
        adaptive_avg_backward_typed,
        inputs[0],
        outputs[0]
    )
}
