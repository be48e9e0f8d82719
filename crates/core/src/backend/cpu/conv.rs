//! CPU kernels of `convolution` and `convolution_backward`.
//!
//! Everything is a 2-d convolution in the "normal" direction (a 1-d one has
//! height 1; a transposed convolution is the normal convolution whose input
//! is its output), built from three primitives on contiguous data, each a
//! GEMM per sample and group with a column matrix (im2col: row `(c, i, j)`
//! holds the input values tap `(i, j)` of channel `c` sees at each output
//! position):
//!
//! - [`forward`]: `y[n, g] = W[g] @ col(x[n, g])` (plus the bias);
//! - [`backward_input`]: `x[n, g] = col2im(W[g]^T @ y[n, g])`;
//! - [`backward_weight`]: `W[g] = sum_n y[n, g] @ col(x[n, g])^T`.
//!
//! A 1x1 convolution with stride 1 and no padding uses the input itself as
//! its column matrix. Column matrices are built for bands of output rows
//! (about 4 MiB at most), not whole images. Samples are independent in the
//! first two (split among threads, or the GEMM splits when there are fewer
//! samples than threads: the GEMM's bits do not depend on its split). The
//! weight gradient sums over samples in fixed chunks (a function of the
//! shapes only), each chunk in sample order, and the chunks in order, so
//! every result is the same for any number of threads.

use super::access::access;
use super::copy::cast_into;
use super::gemm::{Mat, gemm_acc};
use super::warm::par_for_each;
use crate::dispatch::{Op, call, downcast_op};
use crate::ops::conv::{ConvParams, Convolution, ConvolutionBackward};
use crate::{DType, Element, Error, Result, Tensor};

/// The element types the kernels compute in (others are converted).
trait Num: Element {
    /// Accumulator of sums (f64 for floats, wrapping i64 for integers).
    type Acc: Copy;
    const ACC0: Self::Acc;
    fn add(self, o: Self) -> Self;
    fn acc(a: Self::Acc, v: Self) -> Self::Acc;
    fn from_acc(a: Self::Acc) -> Self;
}

impl Num for f32 {
    type Acc = f64;
    const ACC0: f64 = 0.0;
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn acc(a: f64, v: Self) -> f64 {
        a + v as f64
    }
    fn from_acc(a: f64) -> Self {
        a as f32
    }
}

impl Num for f64 {
    type Acc = f64;
    const ACC0: f64 = 0.0;
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn acc(a: f64, v: Self) -> f64 {
        a + v
    }
    fn from_acc(a: f64) -> Self {
        a
    }
}

impl Num for i64 {
    type Acc = i64;
    const ACC0: i64 = 0;
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
    #[inline(always)]
    fn acc(a: i64, v: Self) -> i64 {
        a.wrapping_add(v)
    }
    fn from_acc(a: i64) -> Self {
        a
    }
}

/// A raw pointer shared by the threads of one kernel call.
#[derive(Clone, Copy)]
struct Ptr<T>(*mut T);
// SAFETY: the kernels below hand each thread disjoint parts of the buffers
// written through these pointers (or only read through them), and the
// buffers outlive the parallel regions (locked by `access`).
unsafe impl<T> Send for Ptr<T> {}
// SAFETY: as for Send.
unsafe impl<T> Sync for Ptr<T> {}

impl<T> Ptr<T> {
    fn at(self, off: usize) -> *mut T {
        self.0.wrapping_add(off)
    }
}

/// A normal 2-d convolution: input `[n, c, h, w]`, weight `[o, c / g, kh,
/// kw]`, output `[n, o, oh, ow]`, all contiguous.
#[derive(Clone, Copy, Debug)]
struct Geom {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    oh: usize,
    ow: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    ph: usize,
    pw: usize,
    dh: usize,
    dw: usize,
    g: usize,
}

impl Geom {
    /// From the normal convolution's input, weight and output shapes.
    fn new(p: &ConvParams, input: &[usize], weight: &[usize], output: &[usize]) -> Geom {
        let two = p.spatial() == 2;
        let pick = |v: &[usize], dflt: usize| if two { (v[0], v[1]) } else { (dflt, v[0]) };
        let (h, w) = pick(&input[2..], 1);
        let (oh, ow) = pick(&output[2..], 1);
        let (kh, kw) = pick(&weight[2..], 1);
        let (sh, sw) = pick(&p.stride, 1);
        let (ph, pw) = pick(&p.padding, 0);
        let (dh, dw) = pick(&p.dilation, 1);
        Geom {
            n: input[0],
            c: input[1],
            h,
            w,
            o: weight[0],
            oh,
            ow,
            kh,
            kw,
            sh,
            sw,
            ph,
            pw,
            dh,
            dw,
            g: p.groups,
        }
    }

    fn cg(&self) -> usize {
        self.c / self.g
    }

    fn og(&self) -> usize {
        self.o / self.g
    }

    /// Rows of the column matrix.
    fn kg(&self) -> usize {
        self.cg() * self.kh * self.kw
    }

    /// Output positions per channel.
    fn l(&self) -> usize {
        self.oh * self.ow
    }

    fn hw(&self) -> usize {
        self.h * self.w
    }

    /// A 1x1 convolution with stride 1, no padding and an output as large as
    /// the input: the input is its own column matrix.
    fn pointwise(&self) -> bool {
        self.kh == 1
            && self.kw == 1
            && self.sh == 1
            && self.sw == 1
            && self.ph == 0
            && self.pw == 0
            && self.oh == self.h
            && self.ow == self.w
    }

    /// Output rows per band of the column matrix (at most about 1M values).
    fn band(&self) -> usize {
        const BUDGET: usize = 1 << 20;
        (BUDGET / (self.kg() * self.ow).max(1)).clamp(1, self.oh.max(1))
    }

    /// Multiply-adds of one primitive (for the parallel threshold).
    fn flops(&self) -> usize {
        self.n
            .saturating_mul(self.o)
            .saturating_mul(self.kg())
            .saturating_mul(self.l())
    }
}

/// The output positions `j` in `0..n` with `0 <= j * s + off < w`: `[lo, hi)`.
fn valid_range(n: usize, s: usize, off: isize, w: usize) -> (usize, usize) {
    let lo = if off < 0 { (off.unsigned_abs()).div_ceil(s) } else { 0 };
    let lim = w as isize - 1 - off;
    let hi = if lim < 0 { 0 } else { lim as usize / s + 1 };
    let lo = lo.min(n);
    (lo, hi.min(n).max(lo))
}

/// The column matrix of one group of one sample (`x`: `[c / g, h, w]`) for
/// output rows `[r0, r1)`: `col[(ci, i, j)][(r - r0) * ow + q]`.
fn im2col<T: Num>(ge: &Geom, x: &[T], r0: usize, r1: usize, col: &mut [T]) {
    let lt = (r1 - r0) * ge.ow;
    let zero = T::default();
    let (h, w, ow) = (ge.h, ge.w, ge.ow);
    for ci in 0..ge.cg() {
        let plane = &x[ci * h * w..(ci + 1) * h * w];
        for i in 0..ge.kh {
            for j in 0..ge.kw {
                let row = ((ci * ge.kh + i) * ge.kw + j) * lt;
                let row = &mut col[row..row + lt];
                let off = (j * ge.dw) as isize - ge.pw as isize;
                let (lo, hi) = valid_range(ow, ge.sw, off, w);
                for r in r0..r1 {
                    let dst = &mut row[(r - r0) * ow..(r - r0 + 1) * ow];
                    let ih = (r * ge.sh + i * ge.dh) as isize - ge.ph as isize;
                    if ih < 0 || ih >= h as isize {
                        dst.fill(zero);
                        continue;
                    }
                    let src = &plane[ih as usize * w..(ih as usize + 1) * w];
                    dst[..lo].fill(zero);
                    dst[hi..].fill(zero);
                    if lo == hi {
                        // Every tap of this row falls in the padding (the
                        // start below would lie before the row).
                    } else if ge.sw == 1 {
                        let s0 = (lo as isize + off) as usize;
                        dst[lo..hi].copy_from_slice(&src[s0..s0 + hi - lo]);
                    } else {
                        for (q, d) in dst[lo..hi].iter_mut().enumerate() {
                            *d = src[(((lo + q) * ge.sw) as isize + off) as usize];
                        }
                    }
                }
            }
        }
    }
}

/// Adds the column matrix of output rows `[r0, r1)` back onto the input
/// positions it was read from (`x`: `[c / g, h, w]`), in a fixed order.
fn col2im<T: Num>(ge: &Geom, col: &[T], r0: usize, r1: usize, x: &mut [T]) {
    let lt = (r1 - r0) * ge.ow;
    let (h, w, ow) = (ge.h, ge.w, ge.ow);
    for ci in 0..ge.cg() {
        let plane = &mut x[ci * h * w..(ci + 1) * h * w];
        for i in 0..ge.kh {
            for j in 0..ge.kw {
                let row = ((ci * ge.kh + i) * ge.kw + j) * lt;
                let row = &col[row..row + lt];
                let off = (j * ge.dw) as isize - ge.pw as isize;
                let (lo, hi) = valid_range(ow, ge.sw, off, w);
                for r in r0..r1 {
                    let ih = (r * ge.sh + i * ge.dh) as isize - ge.ph as isize;
                    if ih < 0 || ih >= h as isize {
                        continue;
                    }
                    let src = &row[(r - r0) * ow..(r - r0 + 1) * ow];
                    let dst = &mut plane[ih as usize * w..(ih as usize + 1) * w];
                    for (q, &v) in src.iter().enumerate().take(hi).skip(lo) {
                        let iw = ((q * ge.sw) as isize + off) as usize;
                        dst[iw] = dst[iw].add(v);
                    }
                }
            }
        }
    }
}

/// Runs `f(lo, hi, parallel_gemm)` over sample ranges: in parallel when the
/// work is large and there are several samples, else once over all of them
/// with the GEMM's own threads. Samples are independent, so the split never
/// changes a result.
fn over_samples(n: usize, flops: usize, f: &(dyn Fn(usize, usize, bool) + Sync)) {
    let threads = rayon::current_num_threads();
    let big = flops >= 1 << 20;
    if big && threads > 1 && n > 1 {
        let tasks = n.min(threads);
        par_for_each(tasks, |t| f(t * n / tasks, (t + 1) * n / tasks, false));
    } else {
        f(0, n, big && threads > 1);
    }
}

/// `y = conv(x, wt) (+ bias)`: writes all of `y`.
///
/// # Safety
/// `x`, `wt`, `bias` (`[o]`) and `y` hold the contiguous tensors of `ge`,
/// `y` writable and disjoint from the others.
unsafe fn forward<T: Num>(ge: &Geom, x: *const T, wt: *const T, bias: Option<*const T>, y: *mut T) {
    let (og, kg, l, cg) = (ge.og(), ge.kg(), ge.l(), ge.cg());
    let (xp, wp, yp) = (Ptr(x as *mut T), Ptr(wt as *mut T), Ptr(y));
    let bp = bias.map(|b| Ptr(b as *mut T));
    let pointwise = ge.pointwise();
    let band = ge.band();
    let body = |lo: usize, hi: usize, par: bool| {
        let mut col = vec![T::default(); if pointwise { 0 } else { kg * band * ge.ow }];
        for n in lo..hi {
            for g in 0..ge.g {
                let yg = yp.at((n * ge.o + g * og) * l);
                if let Some(bp) = bp {
                    for oc in 0..og {
                        // SAFETY: channel g * og + oc < o of the bias; row oc of this sample's group block in y.
                        unsafe {
                            let v = *bp.at(g * og + oc);
                            std::slice::from_raw_parts_mut(yg.add(oc * l), l).fill(v);
                        }
                    }
                }
                let a = Mat {
                    ptr: wp.at(g * og * kg) as *const T,
                    rs: kg,
                    cs: 1,
                };
                let xg = xp.at((n * ge.c + g * cg) * ge.hw()) as *const T;
                if pointwise {
                    let b = Mat { ptr: xg, rs: l, cs: 1 };
                    // SAFETY: W[g] is og x kg, x[n, g] is cg x l (= kg x l), y[n, g] og x l.
                    unsafe { gemm_acc(og, l, kg, a, b, yg, l, par, bp.is_some()) };
                    continue;
                }
                // SAFETY: x[n, g] holds cg planes of h x w.
                let xs = unsafe { std::slice::from_raw_parts(xg, cg * ge.hw()) };
                let mut r0 = 0;
                while r0 < ge.oh {
                    let r1 = (r0 + band).min(ge.oh);
                    let lt = (r1 - r0) * ge.ow;
                    im2col(ge, xs, r0, r1, &mut col);
                    let b = Mat {
                        ptr: col.as_ptr(),
                        rs: lt,
                        cs: 1,
                    };
                    // SAFETY: col holds kg x lt values; the band's columns of y[n, g] (row stride l) are inside y.
                    unsafe { gemm_acc(og, lt, kg, a, b, yg.add(r0 * ge.ow), l, par, bp.is_some()) };
                    r0 = r1;
                }
            }
        }
    };
    over_samples(ge.n, ge.flops(), &body);
}

/// `x = conv_input_grad(y, wt)` (`x` starts as zeros, or the bias per
/// channel): writes all of `x`.
///
/// # Safety
/// As [`forward`], with `x` the written tensor and `bias` `[c]`.
unsafe fn backward_input<T: Num>(ge: &Geom, y: *const T, wt: *const T, bias: Option<*const T>, x: *mut T) {
    let (og, kg, l, cg, hw) = (ge.og(), ge.kg(), ge.l(), ge.cg(), ge.hw());
    let (xp, wp, yp) = (Ptr(x), Ptr(wt as *mut T), Ptr(y as *mut T));
    let bp = bias.map(|b| Ptr(b as *mut T));
    let pointwise = ge.pointwise();
    let band = ge.band();
    let body = |lo: usize, hi: usize, par: bool| {
        let mut col = vec![T::default(); if pointwise { 0 } else { kg * band * ge.ow }];
        for n in lo..hi {
            for g in 0..ge.g {
                let xg = xp.at((n * ge.c + g * cg) * hw);
                // A 1x1 convolution without bias overwrites x[n, g] at once.
                for ci in 0..if pointwise && bp.is_none() { 0 } else { cg } {
                    let v = match bp {
                        // SAFETY: channel g * cg + ci < c of the bias.
                        Some(bp) => unsafe { *bp.at(g * cg + ci) },
                        None => T::default(),
                    };
                    // SAFETY: plane ci of x[n, g].
                    unsafe { std::slice::from_raw_parts_mut(xg.add(ci * hw), hw).fill(v) };
                }
                // W[g]^T: kg x og.
                let a = Mat {
                    ptr: wp.at(g * og * kg) as *const T,
                    rs: 1,
                    cs: kg,
                };
                let yg = yp.at((n * ge.o + g * og) * l) as *const T;
                if pointwise {
                    let b = Mat { ptr: yg, rs: l, cs: 1 };
                    // SAFETY: W[g]^T is kg x og, y[n, g] og x l, x[n, g] kg x l (kg = cg).
                    unsafe { gemm_acc(kg, l, og, a, b, xg, l, par, bp.is_some()) };
                    continue;
                }
                // SAFETY: x[n, g] holds cg planes of h x w, written by this task only.
                let xs = unsafe { std::slice::from_raw_parts_mut(xg, cg * hw) };
                let mut r0 = 0;
                while r0 < ge.oh {
                    let r1 = (r0 + band).min(ge.oh);
                    let lt = (r1 - r0) * ge.ow;
                    let b = Mat {
                        ptr: yg.wrapping_add(r0 * ge.ow),
                        rs: l,
                        cs: 1,
                    };
                    // SAFETY: the band's columns of y[n, g] are inside y; col holds kg x lt values.
                    unsafe { gemm_acc(kg, lt, og, a, b, col.as_mut_ptr(), lt, par, false) };
                    col2im(ge, &col[..kg * lt], r0, r1, xs);
                    r0 = r1;
                }
            }
        }
    };
    over_samples(ge.n, ge.flops(), &body);
}

/// Number of fixed chunks the weight gradient's sum over samples is split
/// into: a function of the shapes only (never of the thread count), with
/// the chunks' partial sums holding at most about 4M values.
fn weight_chunks(n: usize, wsize: usize) -> usize {
    n.min(16).min(((1 << 22) / wsize.max(1)).max(1))
}

/// `wt = conv_weight_grad(x, y)`: writes all of `wt`.
///
/// # Safety
/// As [`forward`], with `wt` the written tensor.
unsafe fn backward_weight<T: Num>(ge: &Geom, x: *const T, y: *const T, wt: *mut T) {
    let (og, kg, l, cg, hw) = (ge.og(), ge.kg(), ge.l(), ge.cg(), ge.hw());
    let wsize = ge.o * kg;
    // SAFETY: wt holds o x kg values.
    let out = unsafe { std::slice::from_raw_parts_mut(wt, wsize) };
    let chunks = weight_chunks(ge.n, wsize);
    if chunks == 0 || wsize == 0 {
        out.fill(T::default());
        return;
    }
    // Each group's block of a partial sum is og x kg, or kg x og (`flip`)
    // when the weight has fewer columns than rows: the GEMM's register tile
    // is wide, so its columns should be the longer side.
    let flip = kg < og;
    let (xp, yp) = (Ptr(x as *mut T), Ptr(y as *mut T));
    let pointwise = ge.pointwise();
    let band = ge.band();
    let mut partials = vec![T::default(); chunks * wsize];
    let pp = Ptr(partials.as_mut_ptr());
    let threads = rayon::current_num_threads();
    let big = ge.flops() >= 1 << 20;
    let par_gemm = big && threads > chunks;
    let chunk = |ch: usize| {
        let (lo, hi) = (ch * ge.n / chunks, (ch + 1) * ge.n / chunks);
        let part = pp.at(ch * wsize);
        let mut col = vec![T::default(); if pointwise { 0 } else { kg * band * ge.ow }];
        for n in lo..hi {
            for g in 0..ge.g {
                let c = part.wrapping_add(g * og * kg);
                let yg = yp.at((n * ge.o + g * og) * l) as *const T;
                let xg = xp.at((n * ge.c + g * cg) * hw) as *const T;
                let mut first = n == lo;
                let mut product = |colp: *const T, ldcol: usize, r0: usize, lt: usize| {
                    let ys = yg.wrapping_add(r0 * ge.ow);
                    // SAFETY: y[n, g] (og x l) and the column band (kg x lt, row
                    // stride ldcol) are inside their buffers; the group's block
                    // of this chunk's partial sum (og * kg values) is written by
                    // this task only.
                    unsafe {
                        if flip {
                            let a = Mat {
                                ptr: colp,
                                rs: ldcol,
                                cs: 1,
                            };
                            let b = Mat { ptr: ys, rs: 1, cs: l };
                            gemm_acc(kg, og, lt, a, b, c, og, par_gemm, !first);
                        } else {
                            let a = Mat { ptr: ys, rs: l, cs: 1 };
                            let b = Mat {
                                ptr: colp,
                                rs: 1,
                                cs: ldcol,
                            };
                            gemm_acc(og, kg, lt, a, b, c, kg, par_gemm, !first);
                        }
                    }
                    first = false;
                };
                if pointwise {
                    product(xg, l, 0, l);
                    continue;
                }
                // SAFETY: x[n, g] holds cg planes of h x w.
                let xs = unsafe { std::slice::from_raw_parts(xg, cg * hw) };
                let mut r0 = 0;
                while r0 < ge.oh {
                    let r1 = (r0 + band).min(ge.oh);
                    let lt = (r1 - r0) * ge.ow;
                    im2col(ge, xs, r0, r1, &mut col);
                    product(col.as_ptr(), lt, r0, lt);
                    r0 = r1;
                }
            }
        }
    };
    if big && threads > 1 && chunks > 1 {
        par_for_each(chunks, chunk);
    } else {
        (0..chunks).for_each(chunk);
    }
    // Chunks in order; each group's block back to [og, kg].
    for g in 0..ge.g {
        for oc in 0..og {
            for k in 0..kg {
                let at = if flip { k * og + oc } else { oc * kg + k } + g * og * kg;
                let mut s = partials[at];
                for ch in 1..chunks {
                    s = s.add(partials[ch * wsize + at]);
                }
                out[(g * og + oc) * kg + k] = s;
            }
        }
    }
}

/// `b[c] = sum of y[:, c, ...]` for `y` `[n, c, l]`: writes all of `b`.
///
/// # Safety
/// `y` holds `n * c * l` values, `b` is writable for `c`.
unsafe fn bias_grad<T: Num>(n: usize, c: usize, l: usize, y: *const T, b: *mut T) {
    // SAFETY: per the contract.
    let (ys, bs) = unsafe {
        (
            std::slice::from_raw_parts(y, n * c * l),
            std::slice::from_raw_parts_mut(b, c),
        )
    };
    for (ch, out) in bs.iter_mut().enumerate() {
        let mut s = T::ACC0;
        for i in 0..n {
            for &v in &ys[(i * c + ch) * l..(i * c + ch + 1) * l] {
                s = T::acc(s, v);
            }
        }
        *out = T::from_acc(s);
    }
}

/// Runs `op` on `inputs` converted to `wide` (f32 for f16/bf16, i64 for the
/// narrower integers) and casts its results into `outputs`.
fn widened(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor], wide: DType) -> Result<()> {
    let ins: Vec<Tensor> = inputs.iter().map(|t| t.to_dtype(wide)).collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = ins.iter().collect();
    let res = call(op, &refs)?;
    for (o, r) in outputs.iter().zip(&res) {
        if o.numel() > 0 {
            cast_into(o, r)?;
        }
    }
    Ok(())
}

/// The type the kernels compute `dt` in, or `None` for a direct one.
fn wide_type(op: &'static str, dt: DType) -> Result<Option<DType>> {
    match dt {
        DType::F32 | DType::F64 | DType::I64 => Ok(None),
        DType::F16 | DType::BF16 => Ok(Some(DType::F32)),
        DType::I32 | DType::U8 => Ok(Some(DType::I64)),
        DType::Bool => Err(Error::dtype(op, dt, "\"convolution\" not implemented for 'Bool'")),
    }
}

/// A contiguous tensor to write `out`'s values into: `out` itself or a
/// temporary copied into it by [`finish`].
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

pub(crate) fn convolution_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let conv = downcast_op::<Convolution>(op)?;
    let out = outputs[0];
    if out.numel() == 0 {
        return Ok(());
    }
    match wide_type("convolution", inputs[0].dtype())? {
        Some(wide) => widened(op, inputs, outputs, wide),
        None => match inputs[0].dtype() {
            DType::F32 => conv_run::<f32>(&conv.params, inputs, out),
            DType::F64 => conv_run::<f64>(&conv.params, inputs, out),
            _ => conv_run::<i64>(&conv.params, inputs, out),
        },
    }
}

pub(crate) fn convolution_backward_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let cb = downcast_op::<ConvolutionBackward>(op)?;
    match wide_type("convolution_backward", inputs[0].dtype())? {
        Some(wide) => widened(op, inputs, outputs, wide),
        None => match inputs[0].dtype() {
            DType::F32 => backward_run::<f32>(cb, inputs, outputs),
            DType::F64 => backward_run::<f64>(cb, inputs, outputs),
            _ => backward_run::<i64>(cb, inputs, outputs),
        },
    }
}

fn conv_run<T: Num>(p: &ConvParams, inputs: &[&Tensor], out: &Tensor) -> Result<()> {
    let x = inputs[0].contiguous()?;
    let w = inputs[1].contiguous()?;
    let b = inputs.get(2).map(|b| b.contiguous()).transpose()?;
    let y = target(out)?;
    {
        let mut ins = vec![&x, &w];
        ins.extend(b.as_ref());
        let acc = access("convolution", &ins, &[&y])?;
        let (xp, wp, yp) = (acc.ins[0] as *const T, acc.ins[1] as *const T, acc.outs[0] as *mut T);
        let bp = acc.ins.get(2).map(|p| *p as *const T);
        // SAFETY: the shape rule checked the shapes; the tensors are
        // contiguous, locked, and y is a fresh (or exclusive) output.
        unsafe {
            if p.transposed {
                let ge = Geom::new(p, y.shape(), w.shape(), x.shape());
                backward_input(&ge, xp, wp, bp, yp);
            } else {
                let ge = Geom::new(p, x.shape(), w.shape(), y.shape());
                forward(&ge, xp, wp, bp, yp);
            }
        }
    }
    finish(out, &y)
}

fn backward_run<T: Num>(op: &ConvolutionBackward, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let p = &op.params;
    let [mi, mw, mb] = op.output_mask;
    let g = inputs[0].contiguous()?;
    let x = inputs[1].contiguous()?;
    let w = inputs[2].contiguous()?;
    let (gi, gw, gb) = (target(outputs[0])?, target(outputs[1])?, target(outputs[2])?);
    {
        let acc = access("convolution_backward", &[&g, &x, &w], &[&gi, &gw, &gb])?;
        let (gp, xp, wp) = (acc.ins[0] as *const T, acc.ins[1] as *const T, acc.ins[2] as *const T);
        let (gip, gwp, gbp) = (acc.outs[0] as *mut T, acc.outs[1] as *mut T, acc.outs[2] as *mut T);
        // SAFETY: the shape rule checked the shapes (outputs not asked for
        // are empty and untouched); the tensors are contiguous and locked,
        // the outputs fresh (or exclusive).
        unsafe {
            if p.transposed {
                let ge = Geom::new(p, g.shape(), w.shape(), x.shape());
                if mi && gi.numel() > 0 {
                    forward(&ge, gp, wp, None, gip);
                }
                if mw && gw.numel() > 0 {
                    backward_weight(&ge, gp, xp, gwp);
                }
            } else {
                let ge = Geom::new(p, x.shape(), w.shape(), g.shape());
                if mi && gi.numel() > 0 {
                    backward_input(&ge, gp, wp, None, gip);
                }
                if mw && gw.numel() > 0 {
                    backward_weight(&ge, xp, gp, gwp);
                }
            }
            if mb && gb.numel() > 0 {
                let s = g.shape();
                bias_grad(s[0], s[1], s[2..].iter().product(), gp, gbp);
            }
        }
    }
    for (o, t) in outputs.iter().zip([&gi, &gw, &gb]) {
        finish(o, t)?;
    }
    Ok(())
}
