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
//! (about 4 MiB at most), not whole images, or never written: the GEMM's
//! panels are packed straight from the input through tables of tap offsets
//! (`pack.rs`: the forward's `col`, and on AVX-512 the weight gradient's
//! `col^T`). When one band covers a small output (14 x 14: 196 columns, 7
//! panels of 32 with the last 4 wide), the forward's product takes several
//! samples' outputs as its columns (5 x 196: 31 panels, nearly full) and
//! copies them out. None of this changes a bit: each output element's FMA
//! chain is the same. Samples are independent in the
//! first two (split among threads, or the GEMM splits when there are fewer
//! samples than threads: the GEMM's bits do not depend on its split). The
//! weight gradient sums over samples in fixed chunks (a function of the
//! shapes only), each chunk in sample order, and the chunks in order, so
//! every result is the same for any number of threads.
//!
//! On AVX-512 and AVX2, f32 convolutions of one group with enough channels skip the
//! column matrix: `indirect.rs` runs the forward and the weight gradient as
//! indirect GEMMs (register tiles read the input through per-tap
//! pointers), and a stride-1 input gradient as the flipped convolution's
//! indirect forward. Their bits differ from the GEMM paths' (the products
//! are summed tap by tap) and are the same for any number of threads.

#[cfg(target_arch = "x86_64")]
mod indirect;
mod pack;

use super::access::access;
use super::copy::cast_into;
use super::gemm::{BSrc, Gemm, Mat};
use super::simd::multiversion;
use super::warm::par_for_each;
use crate::dispatch::{Op, call, downcast_op};
use crate::ops::conv::{ConvParams, Convolution, ConvolutionBackward};
use crate::{DType, Error, Result, Tensor};
use pack::{ColPack, ColPackT, PackFn, PackTFn, SampleTables, band_tables, pack_scalar, sample_tables};
#[cfg(target_arch = "x86_64")]
use pack::{pack_f32_avx2, pack_f32_avx512, pack_t_f32_avx512};

/// The element types the kernels compute in (others are converted).
trait Num: Gemm {
    /// Accumulator of sums (f64 for floats, wrapping i64 for integers).
    type Acc: Copy;
    const ACC0: Self::Acc;
    fn add(self, o: Self) -> Self;
    fn acc(a: Self::Acc, v: Self) -> Self::Acc;
    fn from_acc(a: Self::Acc) -> Self;
    /// The panel writer of [`ColPack`] for this type.
    fn packer() -> PackFn<Self> {
        pack_scalar::<Self>
    }
    /// The panel writer of [`ColPackT`], where it beats building the column
    /// matrix and packing its transpose.
    fn packer_t() -> Option<PackTFn<Self>> {
        None
    }
    /// The indirect-GEMM forward ([`indirect`]) of `ge`, where this type
    /// and CPU have one for it.
    fn indirect(_ge: &Geom) -> Option<ForwardFn<Self>> {
        None
    }
    /// The indirect-GEMM weight gradient ([`indirect`]) of `ge`, where this
    /// type and CPU have one for it.
    fn indirect_weight(_ge: &Geom) -> Option<WeightFn<Self>> {
        None
    }
    /// `dst[i] += src[i]` where `mask[i]` is -1; where it is 0, `dst[i]` stays.
    #[inline(always)]
    fn masked_add(dst: &mut [Self], src: &[Self], mask: &[i32]) {
        masked_add_generic(dst, src, mask)
    }
    /// The sum of a row, in 8 interleaved lanes (then the lanes in order).
    #[inline(always)]
    fn row_sum(v: &[Self]) -> Self {
        let mut lanes = [Self::default(); 8];
        let chunks = v.chunks_exact(8);
        let rest = chunks.remainder();
        for c in chunks {
            for k in 0..8 {
                lanes[k] = lanes[k].add(c[k]);
            }
        }
        for (k, &x) in rest.iter().enumerate() {
            lanes[k] = lanes[k].add(x);
        }
        lanes.iter().fold(Self::default(), |a, &b| a.add(b))
    }
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
    fn masked_add(dst: &mut [f32], src: &[f32], mask: &[i32]) {
        masked_add_f32(dst, src, mask)
    }
    fn indirect(ge: &Geom) -> Option<ForwardFn<f32>> {
        #[cfg(target_arch = "x86_64")]
        if indirect::applies(ge) {
            return Some(indirect::forward);
        }
        let _ = ge;
        None
    }
    fn indirect_weight(ge: &Geom) -> Option<WeightFn<f32>> {
        #[cfg(target_arch = "x86_64")]
        if indirect::applies_weight(ge) {
            return Some(indirect::backward_weight);
        }
        let _ = ge;
        None
    }
    fn packer_t() -> Option<PackTFn<f32>> {
        #[cfg(target_arch = "x86_64")]
        if super::simd::isa() >= super::simd::Isa::Avx512 {
            return Some(pack_t_f32_avx512);
        }
        None
    }
    fn packer() -> PackFn<f32> {
        #[cfg(target_arch = "x86_64")]
        if super::simd::isa() >= super::simd::Isa::Avx512 {
            return pack_f32_avx512;
        }
        #[cfg(target_arch = "x86_64")]
        if super::simd::isa() >= super::simd::Isa::Avx2 {
            return pack_f32_avx2;
        }
        pack_scalar::<f32>
    }
}

/// A forward convolution: `(geometry, x, weight, bias, y)`, with the
/// contract of [`forward`].
type ForwardFn<T> = unsafe fn(&Geom, *const T, *const T, Option<*const T>, *mut T);

/// A weight gradient (and the bias gradient, when asked for): `(geometry,
/// x, y, wt, bias)`, with the contract of [`backward_weight`].
type WeightFn<T> = unsafe fn(&Geom, *const T, *const T, *mut T, Option<*mut T>);

/// [`Num::masked_add`] in plain code (it vectorises as a blend).
#[inline(always)]
fn masked_add_generic<T: Num>(dst: &mut [T], src: &[T], mask: &[i32]) {
    for ((d, &v), &m) in dst.iter_mut().zip(src).zip(mask) {
        let sum = d.add(v);
        *d = if m != 0 { sum } else { *d };
    }
}

multiversion! {
    /// [`Num::masked_add`] for f32 with masks of -1 or 0 ([`tap_offsets`]'
    /// validity), vectorised as a bitwise select (a conditional store
    /// would become a masked store, slow on some CPUs).
    fn masked_add_f32(dst: &mut [f32], src: &[f32], mask: &[i32]) {
        for ((d, &v), &m) in dst.iter_mut().zip(src).zip(mask) {
            let (sum, m) = ((*d + v).to_bits(), m as u32);
            *d = f32::from_bits((sum & m) | (d.to_bits() & !m));
        }
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

    /// The input gradient of a stride-1 convolution as a convolution: of
    /// the output gradient with the weight flipped and its channel dims
    /// swapped ([`flip_weight`]), padded by `dilation * (kernel - 1) -
    /// padding` (when that is not negative and gives exactly the input's size).
    fn flipped(&self) -> Option<Geom> {
        let (eh, ew) = ((self.kh - 1) * self.dh, (self.kw - 1) * self.dw);
        let fits = self.sh == 1
            && self.sw == 1
            && self.ph <= eh
            && self.pw <= ew
            && self.oh + eh == self.h + 2 * self.ph
            && self.ow + ew == self.w + 2 * self.pw;
        fits.then(|| Geom {
            c: self.o,
            h: self.oh,
            w: self.ow,
            o: self.c,
            oh: self.h,
            ow: self.w,
            ph: eh - self.ph,
            pw: ew - self.pw,
            ..*self
        })
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
///
/// With stride 1 and an output as wide as the input (a "same" convolution),
/// a row of the column matrix is the input plane shifted by a constant
/// offset: one block copy, then the columns that wrapped around an edge
/// are zeroed.
fn im2col<T: Num>(ge: &Geom, x: &[T], r0: usize, r1: usize, col: &mut [T]) {
    let lt = (r1 - r0) * ge.ow;
    let zero = T::default();
    let (h, w, ow) = (ge.h, ge.w, ge.ow);
    let flat = ge.sh == 1 && ge.sw == 1 && ow == w;
    for ci in 0..ge.cg() {
        let plane = &x[ci * h * w..(ci + 1) * h * w];
        for i in 0..ge.kh {
            // Output rows r read input row r * sh + delta; those inside: [ra, rb).
            let delta = (i * ge.dh) as isize - ge.ph as isize;
            let (ra, rb) = valid_range(r1, ge.sh, delta, h);
            let (ra, rb) = (ra.max(r0), rb.max(r0));
            for j in 0..ge.kw {
                let row = ((ci * ge.kh + i) * ge.kw + j) * lt;
                let row = &mut col[row..row + lt];
                let off = (j * ge.dw) as isize - ge.pw as isize;
                let (lo, hi) = valid_range(ow, ge.sw, off, w);
                row[..(ra - r0) * ow].fill(zero);
                row[(rb - r0) * ow..].fill(zero);
                if ra >= rb {
                    continue;
                }
                if flat && lo < hi {
                    let t0 = (ra - r0) * ow + lo;
                    let t1 = (rb - 1 - r0) * ow + hi;
                    let s0 = ((ra as isize + delta) * w as isize + lo as isize + off) as usize;
                    row[t0..t1].copy_from_slice(&plane[s0..s0 + (t1 - t0)]);
                    if lo > 0 || hi < ow {
                        for r in ra..rb {
                            let d = &mut row[(r - r0) * ow..(r - r0 + 1) * ow];
                            d[..lo].fill(zero);
                            d[hi..].fill(zero);
                        }
                    }
                    continue;
                }
                for r in ra..rb {
                    let dst = &mut row[(r - r0) * ow..(r - r0 + 1) * ow];
                    let ih = ((r * ge.sh) as isize + delta) as usize;
                    let src = &plane[ih * w..(ih + 1) * w];
                    dst[..lo].fill(zero);
                    dst[hi..].fill(zero);
                    if lo == hi {
                        // Every tap of this row falls in the padding (the
                        // start below would lie before the row).
                    } else if ge.sw == 1 {
                        let s0 = (lo as isize + off) as usize;
                        for (d, &v) in dst[lo..hi].iter_mut().zip(&src[s0..]) {
                            *d = v;
                        }
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
/// positions it was read from (`x`: `[c / g, h, w]`), in a fixed order
/// (each input position receives its taps in the order of the rows).
///
/// With `valid`, the band's [`tap_offsets`] validity, and a "same"
/// geometry (stride 1, output as wide as the input), a row's valid values
/// land on the input plane shifted by a constant offset: one masked add
/// over the row (a value is added where its tap is inside the plane, the
/// others leave the input as it is).
fn col2im<T: Num>(ge: &Geom, col: &[T], r0: usize, r1: usize, valid: Option<&[i32]>, x: &mut [T]) {
    let lt = (r1 - r0) * ge.ow;
    let (h, w, ow) = (ge.h, ge.w, ge.ow);
    let flat = ge.sh == 1 && ge.sw == 1 && ow == w;
    for ci in 0..ge.cg() {
        let plane = &mut x[ci * h * w..(ci + 1) * h * w];
        for i in 0..ge.kh {
            let delta = (i * ge.dh) as isize - ge.ph as isize;
            for j in 0..ge.kw {
                let row = ((ci * ge.kh + i) * ge.kw + j) * lt;
                let row = &col[row..row + lt];
                let off = (j * ge.dw) as isize - ge.pw as isize;
                let (lo, hi) = valid_range(ow, ge.sw, off, w);
                if let Some(valid) = valid.filter(|_| flat) {
                    let (ra, rb) = valid_range(r1, 1, delta, h);
                    let (ra, rb) = (ra.max(r0), rb.max(r0));
                    if ra >= rb || lo >= hi {
                        continue;
                    }
                    let t0 = (ra - r0) * ow + lo;
                    let t1 = (rb - 1 - r0) * ow + hi;
                    let s0 = ((ra as isize + delta) * w as isize + lo as isize + off) as usize;
                    let mask = &valid[(i * ge.kw + j) * lt..][t0..t1];
                    T::masked_add(&mut plane[s0..s0 + (t1 - t0)], &row[t0..t1], mask);
                    continue;
                }
                for r in r0..r1 {
                    let ih = (r * ge.sh) as isize + delta;
                    if ih < 0 || ih >= h as isize {
                        continue;
                    }
                    let src = &row[(r - r0) * ow..(r - r0 + 1) * ow];
                    let dst = &mut plane[ih as usize * w..(ih as usize + 1) * w];
                    if ge.sw == 1 {
                        if lo < hi {
                            let s0 = (lo as isize + off) as usize;
                            for (d, &v) in dst[s0..s0 + (hi - lo)].iter_mut().zip(&src[lo..hi]) {
                                *d = d.add(v);
                            }
                        }
                        continue;
                    }
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

/// Asks the CPU to bring `len` elements from `p` into L2 (a hint: it
/// reads nothing and never faults).
#[inline(always)]
fn prefetch_l2<T>(p: *const T, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
        let bytes = len * std::mem::size_of::<T>();
        let base = p as *const i8;
        for off in (0..bytes).step_by(64) {
            // SAFETY: a prefetch is a hint; it does not access memory
            // architecturally, so no address can fault or race.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(base.wrapping_add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// `y = conv(x, wt) (+ bias)`: writes all of `y`.
///
/// # Safety
/// `x`, `wt`, `bias` (`[o]`) and `y` hold the contiguous tensors of `ge`,
/// `y` writable and disjoint from the others.
unsafe fn forward<T: Num>(ge: &Geom, x: *const T, wt: *const T, bias: Option<*const T>, y: *mut T) {
    if let Some(run) = T::indirect(ge) {
        // SAFETY: the same contract; `indirect` chose `run` for `ge`.
        return unsafe { run(ge, x, wt, bias, y) };
    }
    // SAFETY: the same contract.
    unsafe { forward_with(ge, x, wt, bias, y, true) }
}

/// [`forward`] without the indirect GEMM, taking several samples per
/// product ([`SampleTables`]) only where `samples` allows it (the tests
/// compare both paths).
///
/// # Safety
/// As [`forward`].
unsafe fn forward_with<T: Num>(ge: &Geom, x: *const T, wt: *const T, bias: Option<*const T>, y: *mut T, samples: bool) {
    let (og, kg, l, cg) = (ge.og(), ge.kg(), ge.l(), ge.cg());
    let (xp, wp, yp) = (Ptr(x as *mut T), Ptr(wt as *mut T), Ptr(y));
    let bp = bias.map(|b| Ptr(b as *mut T));
    let pointwise = ge.pointwise();
    let band = ge.band();
    let tables = if pointwise { None } else { band_tables(ge) };
    let multi = sample_tables(ge, tables.as_ref()).filter(|_| samples);
    let pack = T::packer();
    let body = |lo: usize, hi: usize, par: bool| {
        if let Some(st) = &multi {
            // SAFETY: the caller's contract, forwarded.
            unsafe { forward_samples(ge, st, lo, hi, par, (xp, wp, bp, yp), pack) };
            return;
        }
        let direct = pointwise || tables.is_some();
        let mut col = vec![T::default(); if direct { 0 } else { kg * band * ge.ow }];
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
                    unsafe { T::gemm(og, l, kg, a, BSrc::Mat(b), yg, l, par, bp.is_some()) };
                    continue;
                }
                if let Some(tables) = &tables {
                    // The packer reads the input in an order the hardware
                    // prefetcher does not follow: fetch the next group's
                    // input into L2 while this one's product runs.
                    let next = (n * ge.c + g * cg + cg) * ge.hw();
                    if next < ge.n * ge.c * ge.hw() {
                        prefetch_l2(xp.at(next) as *const T, cg * ge.hw());
                    }
                    for (r0, r1, offs, valid) in tables {
                        let lt = (r1 - r0) * ge.ow;
                        let packer = ColPack {
                            x: xg,
                            before: (n * ge.c + g * cg) * ge.hw(),
                            total: ge.n * ge.c * ge.hw(),
                            hw: ge.hw(),
                            kk: ge.kh * ge.kw,
                            lt,
                            tl: lt,
                            offs,
                            valid,
                            flat: ge.sh == 1 && ge.sw == 1 && ge.ow == ge.w,
                            pack,
                        };
                        // SAFETY: the packer reads x[n, g] (cg planes of h x w); the
                        // band's columns of y[n, g] (row stride l) are inside y.
                        unsafe {
                            T::gemm(
                                og,
                                lt,
                                kg,
                                a,
                                BSrc::Pack(&packer),
                                yg.add(r0 * ge.ow),
                                l,
                                par,
                                bp.is_some(),
                            )
                        };
                    }
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
                    unsafe { T::gemm(og, lt, kg, a, BSrc::Mat(b), yg.add(r0 * ge.ow), l, par, bp.is_some()) };
                    r0 = r1;
                }
            }
        }
    };
    over_samples(ge.n, ge.flops(), &body);
}

/// [`forward`] of samples `[lo, hi)` with [`SampleTables`]: each product
/// takes `st.samples` samples' whole outputs as its columns, into a
/// scratch block that is then copied to each sample's output, plus the bias.
///
/// # Safety
/// As [`forward`] (`x`, `wt`, `bias`, `y` in that order), for samples
/// `[lo, hi)` written by this call only.
unsafe fn forward_samples<T: Num>(
    ge: &Geom,
    st: &SampleTables,
    lo: usize,
    hi: usize,
    par: bool,
    (xp, wp, bp, yp): (Ptr<T>, Ptr<T>, Option<Ptr<T>>, Ptr<T>),
    pack: PackFn<T>,
) {
    let (og, kg, l, cg, hw) = (ge.og(), ge.kg(), ge.l(), ge.cg(), ge.hw());
    let mut out = vec![T::default(); og * st.samples * l];
    let mut n0 = lo;
    while n0 < hi {
        let count = st.samples.min(hi - n0);
        let lt = count * l;
        for g in 0..ge.g {
            let a = Mat {
                ptr: wp.at(g * og * kg) as *const T,
                rs: kg,
                cs: 1,
            };
            let packer = ColPack {
                x: xp.at((n0 * ge.c + g * cg) * hw) as *const T,
                before: (n0 * ge.c + g * cg) * hw,
                total: ge.n * ge.c * hw,
                hw,
                kk: ge.kh * ge.kw,
                lt,
                tl: st.samples * l,
                offs: &st.offs,
                valid: &st.valid,
                flat: false,
                pack,
            };
            if let Some(bp) = bp {
                // The product adds onto the bias, as in `forward`'s other paths
                // (the same bits whatever the batch).
                for (oc, row) in out[..og * lt].chunks_exact_mut(lt).enumerate() {
                    // SAFETY: channel g * og + oc < o of the bias.
                    row.fill(unsafe { *bp.at(g * og + oc) });
                }
            }
            // SAFETY: the packer reads the group's planes of samples n0..n0 +
            // count (inside x: their offsets were built from x's sizes); `out`
            // holds og x lt values.
            unsafe {
                T::gemm(
                    og,
                    lt,
                    kg,
                    a,
                    BSrc::Pack(&packer),
                    out.as_mut_ptr(),
                    lt,
                    par,
                    bp.is_some(),
                )
            };
            for s in 0..count {
                for oc in 0..og {
                    // SAFETY: row g * og + oc of sample n0 + s of y (l values), written by this call only.
                    let dst = unsafe { std::slice::from_raw_parts_mut(yp.at(((n0 + s) * ge.o + g * og + oc) * l), l) };
                    dst.copy_from_slice(&out[oc * lt + s * l..][..l]);
                }
            }
        }
        n0 += count;
    }
}

/// The weight `[o, c / g, kh, kw]` of `ge` as the weight of its
/// [`Geom::flipped`] convolution: `[c, o / g, kh, kw]`, taps reversed.
///
/// # Safety
/// `wt` holds the weight.
unsafe fn flip_weight<T: Num>(ge: &Geom, wt: *const T) -> Vec<T> {
    let (og, cg, kk) = (ge.og(), ge.cg(), ge.kh * ge.kw);
    // SAFETY: per the contract.
    let w = unsafe { std::slice::from_raw_parts(wt, ge.o * cg * kk) };
    let mut f = vec![T::default(); w.len()];
    for g in 0..ge.g {
        for o in 0..og {
            for c in 0..cg {
                let src = &w[((g * og + o) * cg + c) * kk..][..kk];
                let dst = &mut f[((g * cg + c) * og + o) * kk..][..kk];
                for (d, &v) in dst.iter_mut().zip(src.iter().rev()) {
                    *d = v;
                }
            }
        }
    }
    f
}

/// `x = conv_input_grad(y, wt)` (`x` starts as zeros, or the bias per
/// channel): writes all of `x`. A stride-1 convolution's runs as the
/// [`Geom::flipped`] convolution, the others as a GEMM and col2im.
///
/// # Safety
/// As [`forward`], with `x` the written tensor and `bias` `[c]`.
unsafe fn backward_input<T: Num>(ge: &Geom, y: *const T, wt: *const T, bias: Option<*const T>, x: *mut T) {
    // The flipped convolution's GEMM has c / g rows: with few, the GEMM of
    // the col2im path (kh * kw times as many rows) runs better. With a
    // "same" geometry (col2im's masked adds), it also runs better with
    // fewer input than output channels: the flipped convolution packs its
    // column matrix of o / g * kh * kw rows, col2im adds c / g * kh * kw.
    let flat = ge.sh == 1 && ge.sw == 1 && ge.ow == ge.w;
    // The indirect GEMM runs the flipped convolution as fast as a forward.
    let flip = !ge.pointwise() && ge.cg() >= 16 && (!flat || ge.cg() >= ge.og());
    if let Some(fg) = ge.flipped().filter(|fg| flip || T::indirect(fg).is_some()) {
        // SAFETY: the caller's contract; the flipped weight is `fg`'s.
        unsafe {
            let wf = flip_weight(ge, wt);
            return forward(&fg, y, wf.as_ptr(), bias, x);
        }
    }
    let (og, kg, l, cg, hw) = (ge.og(), ge.kg(), ge.l(), ge.cg(), ge.hw());
    let (xp, wp, yp) = (Ptr(x), Ptr(wt as *mut T), Ptr(y as *mut T));
    let bp = bias.map(|b| Ptr(b as *mut T));
    let pointwise = ge.pointwise();
    let band = ge.band();
    // The bands' validity tables for [`col2im`]'s masked adds.
    let tables = if pointwise || !flat { None } else { band_tables(ge) };
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
                    unsafe { T::gemm(kg, l, og, a, BSrc::Mat(b), xg, l, par, bp.is_some()) };
                    continue;
                }
                // SAFETY: x[n, g] holds cg planes of h x w, written by this task only.
                let xs = unsafe { std::slice::from_raw_parts_mut(xg, cg * hw) };
                let (mut r0, mut bi) = (0, 0);
                while r0 < ge.oh {
                    let r1 = (r0 + band).min(ge.oh);
                    let lt = (r1 - r0) * ge.ow;
                    let b = Mat {
                        ptr: yg.wrapping_add(r0 * ge.ow),
                        rs: l,
                        cs: 1,
                    };
                    // SAFETY: the band's columns of y[n, g] are inside y; col holds kg x lt values.
                    unsafe { T::gemm(kg, lt, og, a, BSrc::Mat(b), col.as_mut_ptr(), lt, par, false) };
                    let valid = tables.as_ref().map(|t| &t[bi].3[..]);
                    col2im(ge, &col[..kg * lt], r0, r1, valid, xs);
                    bi += 1;
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

/// `wt = conv_weight_grad(x, y)`: writes all of `wt`; where the pass over
/// `y` can also give the bias gradient `[o]` (the indirect GEMM's), into
/// `bias` when given. Returns whether it wrote `bias` (with the bits of
/// [`bias_grad`]).
///
/// # Safety
/// As [`forward`], with `wt` (and `bias`) the written tensors.
unsafe fn backward_weight<T: Num>(ge: &Geom, x: *const T, y: *const T, wt: *mut T, bias: Option<*mut T>) -> bool {
    if let Some(run) = T::indirect_weight(ge) {
        // SAFETY: the same contract; `indirect_weight` chose `run` for `ge`.
        unsafe { run(ge, x, y, wt, bias) };
        return bias.is_some();
    }
    // SAFETY: the same contract.
    unsafe { backward_weight_with(ge, x, y, wt, true) };
    false
}

/// [`backward_weight`] without the indirect GEMM, packing the transposed
/// column matrix straight from the input ([`ColPackT`]) only where `direct` allows it (the tests
/// compare both paths).
///
/// # Safety
/// As [`backward_weight`].
unsafe fn backward_weight_with<T: Num>(ge: &Geom, x: *const T, y: *const T, wt: *mut T, direct: bool) {
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
    // The transposed column matrix packed straight from the input, where
    // this CPU has a packer for it (else built by im2col, then packed).
    let direct = if flip || pointwise || !direct {
        None
    } else {
        T::packer_t().zip(band_tables(ge))
    };
    // Every group block of a chunk's partial sum is written whole by the
    // chunk's first product (not accumulated), so the buffer starts uninit.
    let mut partials: Box<[std::mem::MaybeUninit<T>]> = Box::new_uninit_slice(chunks * wsize);
    let pp = Ptr(partials.as_mut_ptr() as *mut T);
    let threads = rayon::current_num_threads();
    let big = ge.flops() >= 1 << 20;
    let par_gemm = big && threads > chunks;
    // Chunk `ch`'s samples, in order, into its partial sum.
    let chunk = |ch: usize, col: &mut [T]| {
        let (lo, hi) = (ch * ge.n / chunks, (ch + 1) * ge.n / chunks);
        let part = pp.at(ch * wsize);
        for n in lo..hi {
            for g in 0..ge.g {
                let c = part.wrapping_add(g * og * kg);
                let yg = yp.at((n * ge.o + g * og) * l) as *const T;
                let xg = xp.at((n * ge.c + g * cg) * hw) as *const T;
                let mut first = n == lo;
                if let Some((pack, tables)) = &direct {
                    // The packer reads the input in an order the hardware
                    // prefetcher does not follow: fetch the next sample's
                    // input and output gradient into L2 while this one's runs.
                    if n + 1 < hi {
                        prefetch_l2(xg.wrapping_add(ge.c * hw), cg * hw);
                        prefetch_l2(yg.wrapping_add(ge.o * l), og * l);
                    }
                    for (r0, r1, offs, valid) in tables {
                        let lt = (r1 - r0) * ge.ow;
                        let packer = ColPackT {
                            x: xg,
                            hw,
                            kk: ge.kh * ge.kw,
                            lt,
                            offs,
                            valid,
                            pack: *pack,
                        };
                        let a = Mat {
                            ptr: yg.wrapping_add(r0 * ge.ow),
                            rs: l,
                            cs: 1,
                        };
                        // SAFETY: y[n, g]'s band (og x lt, row stride l) is inside y, the
                        // packer reads x[n, g]'s planes, and the group's block of this
                        // chunk's partial sum (og x kg) is written by this task only,
                        // whole by its first product.
                        unsafe { T::gemm(og, kg, lt, a, BSrc::Pack(&packer), c, kg, par_gemm, !first) };
                        first = false;
                    }
                    continue;
                }
                let mut product = |colp: *const T, ldcol: usize, r0: usize, lt: usize| {
                    let ys = yg.wrapping_add(r0 * ge.ow);
                    // SAFETY: y[n, g] (og x l) and the column band (kg x lt, row
                    // stride ldcol) are inside their buffers; the group's block
                    // of this chunk's partial sum (og * kg values) is written by
                    // this task only, whole by its first product.
                    unsafe {
                        if flip {
                            let a = Mat {
                                ptr: colp,
                                rs: ldcol,
                                cs: 1,
                            };
                            let b = Mat { ptr: ys, rs: 1, cs: l };
                            T::gemm(kg, og, lt, a, BSrc::Mat(b), c, og, par_gemm, !first);
                        } else {
                            let a = Mat { ptr: ys, rs: l, cs: 1 };
                            let b = Mat {
                                ptr: colp,
                                rs: 1,
                                cs: ldcol,
                            };
                            T::gemm(og, kg, lt, a, BSrc::Mat(b), c, kg, par_gemm, !first);
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
                    im2col(ge, xs, r0, r1, col);
                    product(col.as_ptr(), lt, r0, lt);
                    r0 = r1;
                }
            }
        }
    };
    let col_len = if pointwise { 0 } else { kg * band * ge.ow };
    // Workers take fixed chunks (`t`, `t + tasks`, ...): which worker sums a
    // chunk changes nothing, each chunk is summed alone.
    let tasks = if big && threads > 1 { chunks.min(threads) } else { 1 };
    let worker = |t: usize| {
        let mut col = vec![T::default(); col_len];
        for ch in (t..chunks).step_by(tasks) {
            chunk(ch, &mut col);
        }
    };
    if tasks > 1 {
        par_for_each(tasks, worker);
    } else {
        worker(0);
    }
    // SAFETY: every chunk's blocks were written whole above.
    let partials: &mut [T] = unsafe { std::slice::from_raw_parts_mut(pp.at(0), chunks * wsize) };
    // The chunks in order, element by element, into the first.
    let (sum, rest) = partials.split_at_mut(wsize);
    for part in rest.chunks_exact(wsize) {
        for (a, &b) in sum.iter_mut().zip(part) {
            *a = a.add(b);
        }
    }
    if !flip {
        out.copy_from_slice(sum);
        return;
    }
    // Each group's block back from [kg, og] to [og, kg].
    for g in 0..ge.g {
        let block = &sum[g * og * kg..(g + 1) * og * kg];
        for oc in 0..og {
            for k in 0..kg {
                out[(g * og + oc) * kg + k] = block[k * og + oc];
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
            s = T::acc(s, T::row_sum(&ys[(i * c + ch) * l..(i * c + ch + 1) * l]));
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

/// The meta-device kernel of the operators whose CPU kernels compute f16 /
/// bf16 by widening (matrix products, convolutions): it makes the same
/// temporaries (the widened inputs and the widened op's outputs) without
/// computing, so that a memory plan (`memory::predict_peak_memory`) sees
/// the bytes the CPU kernel holds while it runs.
pub(crate) fn widened_meta_kernel(op: &dyn Op, inputs: &[&Tensor], _outputs: &[&Tensor]) -> Result<()> {
    if !inputs
        .first()
        .is_some_and(|t| matches!(t.dtype(), DType::F16 | DType::BF16))
    {
        return Ok(());
    }
    if inputs.iter().any(|t| t.numel() == 0) {
        return Ok(());
    }
    let ins: Vec<Tensor> = inputs.iter().map(|t| t.to_dtype(DType::F32)).collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = ins.iter().collect();
    let _results = call(op, &refs)?;
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
            let mut bias_done = false;
            if p.transposed {
                let ge = Geom::new(p, g.shape(), w.shape(), x.shape());
                if mi && gi.numel() > 0 {
                    forward(&ge, gp, wp, None, gip);
                }
                if mw && gw.numel() > 0 {
                    backward_weight(&ge, gp, xp, gwp, None);
                }
            } else {
                let ge = Geom::new(p, x.shape(), w.shape(), g.shape());
                if mi && gi.numel() > 0 {
                    backward_input(&ge, gp, wp, None, gip);
                }
                if mw && gw.numel() > 0 {
                    let bias = (mb && gb.numel() > 0).then_some(gbp);
                    bias_done = backward_weight(&ge, xp, gp, gwp, bias);
                }
            }
            if mb && gb.numel() > 0 && !bias_done {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from a fixed LCG in [-1, 1).
    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// A 3x3 convolution with padding 1 and the given stride, dilation and groups.
    fn geom((n, c, h, w, o): (usize, usize, usize, usize, usize), s: usize, d: usize, g: usize) -> Geom {
        let out = |len: usize| (len + 2 - d * 2 - 1) / s + 1;
        Geom {
            n,
            c,
            h,
            w,
            o,
            oh: out(h),
            ow: out(w),
            kh: 3,
            kw: 3,
            sh: s,
            sw: s,
            ph: 1,
            pw: 1,
            dh: d,
            dw: d,
            g,
        }
    }

    /// Several samples per product give each sample's bits of one sample
    /// per product (bias included), and the weight gradient packed straight
    /// from the input gives the bits of im2col's, on whatever kernels and
    /// packers this CPU runs, at 1 and 2 threads.
    #[test]
    fn fused_paths_give_the_plain_paths_bits() {
        for ((n, c, h, w, o), s, d, g) in [
            ((10, 8, 7, 7, 16), 1, 1, 1),
            ((9, 32, 14, 14, 64), 1, 1, 1),
            ((5, 4, 5, 7, 24), 1, 1, 1),
            ((6, 16, 7, 7, 32), 1, 1, 2),
            ((7, 8, 13, 13, 16), 2, 1, 1),
            ((6, 8, 9, 9, 16), 1, 2, 1),
        ] {
            let ge = geom((n, c, h, w, o), s, d, g);
            let (l, kg) = (ge.l(), ge.kg());
            let what = format!("{n} {c} {h} {w} {o}, stride {s}, dilation {d}, groups {g}");
            assert!(sample_tables(&ge, band_tables(&ge).as_ref()).is_some(), "{what}");
            let x = values(n * c * h * w, 1);
            let wt = values(o * kg, 2);
            let bias = values(o, 3);
            let gy = values(n * o * l, 4);
            for threads in [1, 2] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                pool.install(|| {
                    let run = |samples: bool| {
                        let mut y = vec![0f32; n * o * l];
                        // SAFETY: the buffers hold the contiguous tensors of `ge`.
                        unsafe {
                            forward_with(
                                &ge,
                                x.as_ptr(),
                                wt.as_ptr(),
                                Some(bias.as_ptr()),
                                y.as_mut_ptr(),
                                samples,
                            )
                        };
                        y
                    };
                    assert_eq!(run(true), run(false), "forward {what}");
                    let grad = |direct: bool| {
                        let mut gw = vec![0f32; o * kg];
                        // SAFETY: as above.
                        unsafe { backward_weight_with(&ge, x.as_ptr(), gy.as_ptr(), gw.as_mut_ptr(), direct) };
                        gw
                    };
                    assert_eq!(grad(true), grad(false), "weight gradient {what}");
                });
            }
        }
    }

    /// `(y, x grad, weight grad)` of `ge` (one group) by the defining sums
    /// in f64, each with the sum of its terms' magnitudes (for a tolerance).
    #[allow(clippy::type_complexity)]
    fn direct_sums(ge: &Geom, x: &[f32], wt: &[f32], bias: &[f32], gy: &[f32]) -> [(Vec<f64>, Vec<f64>); 3] {
        let (c, o, kk, l, hw) = (ge.c, ge.o, ge.kh * ge.kw, ge.l(), ge.hw());
        let bias: Vec<f64> = (0..ge.n * o * l).map(|i| bias[i / l % o] as f64).collect();
        let mut y = (bias, vec![0.0; ge.n * o * l]);
        let mut gx = (vec![0.0; ge.n * c * hw], vec![0.0; ge.n * c * hw]);
        let mut gw = (vec![0.0; o * c * kk], vec![0.0; o * c * kk]);
        for n in 0..ge.n {
            for oc in 0..o {
                for p in 0..l {
                    let yi = (n * o + oc) * l + p;
                    for ci in 0..c {
                        for t in 0..kk {
                            let ih = ((p / ge.ow) * ge.sh + (t / ge.kw) * ge.dh).checked_sub(ge.ph);
                            let iw = ((p % ge.ow) * ge.sw + (t % ge.kw) * ge.dw).checked_sub(ge.pw);
                            let Some((ih, iw)) = ih.zip(iw).filter(|&(a, b)| a < ge.h && b < ge.w) else {
                                continue;
                            };
                            let (xi, wi) = ((n * c + ci) * hw + ih * ge.w + iw, (oc * c + ci) * kk + t);
                            let (xv, wv, gv) = (x[xi] as f64, wt[wi] as f64, gy[yi] as f64);
                            y.0[yi] += xv * wv;
                            y.1[yi] += (xv * wv).abs();
                            gx.0[xi] += gv * wv;
                            gx.1[xi] += (gv * wv).abs();
                            gw.0[wi] += gv * xv;
                            gw.1[wi] += (gv * xv).abs();
                        }
                    }
                }
            }
        }
        [y, gx, gw]
    }

    /// The indirect GEMM's forward, input gradient (the flipped
    /// convolution's forward) and weight gradient against the defining sums,
    /// over strides, dilations, paddings, non-square kernels, several blocks
    /// of output channels and work units that end inside a sample, with the
    /// same bits at 1 and 2 threads. On an AVX-512 CPU every geometry here
    /// runs the indirect forward (the others check the same results on
    /// their own paths).
    #[test]
    fn indirect_paths_match_direct_sums() {
        // ((n, c, h, w, o), (kh, kw), stride, padding, dilation)
        for ((n, c, h, w, o), (kh, kw), s, (ph, pw), d) in [
            ((3, 32, 14, 14, 64), (3, 3), 1, (1, 1), 1),
            ((2, 16, 9, 11, 16), (3, 3), 1, (1, 1), 1),
            ((3, 48, 7, 5, 48), (3, 2), 1, (1, 0), 1),
            ((2, 16, 13, 13, 80), (3, 3), 2, (1, 1), 1),
            ((1, 16, 6, 6, 128), (3, 3), 1, (2, 2), 2),
            ((5, 24, 5, 5, 32), (3, 3), 1, (1, 1), 1),
            ((2, 64, 8, 8, 32), (5, 5), 1, (2, 2), 1),
            ((6, 16, 14, 14, 16), (3, 3), 1, (1, 1), 1),
            ((1, 16, 2, 2, 64), (2, 2), 1, (0, 0), 1),
            ((2, 16, 1, 20, 32), (1, 3), 1, (0, 1), 1),
            ((2, 16, 1, 1, 16), (3, 3), 1, (1, 1), 1),
        ] {
            let out = |len: usize, k: usize, p: usize| (len + 2 * p - d * (k - 1) - 1) / s + 1;
            let ge = Geom {
                n,
                c,
                h,
                w,
                o,
                oh: out(h, kh, ph),
                ow: out(w, kw, pw),
                kh,
                kw,
                sh: s,
                sw: s,
                ph,
                pw,
                dh: d,
                dw: d,
                g: 1,
            };
            let what = format!("{n} {c} {h} {w} {o}, kernel {kh}x{kw}, stride {s}, padding {ph},{pw}, dilation {d}");
            #[cfg(target_arch = "x86_64")]
            if super::super::simd::isa() >= super::super::simd::Isa::Avx512 {
                assert!(indirect::applies(&ge), "{what}");
                assert_eq!(indirect::applies_weight(&ge), c % 16 == 0, "{what}");
            }
            let (l, hw, kg) = (ge.l(), ge.hw(), ge.kg());
            let x = values(n * c * hw, 11);
            let wt = values(o * kg, 12);
            let bias = values(o, 13);
            let gy = values(n * o * l, 14);
            let want = direct_sums(&ge, &x, &wt, &bias, &gy);
            let mut plain_gb = vec![0f32; o];
            // SAFETY: gy holds n x o x l values, plain_gb o.
            unsafe { bias_grad(n, o, l, gy.as_ptr(), plain_gb.as_mut_ptr()) };
            let mut runs = Vec::new();
            for threads in [1, 2] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                runs.push(pool.install(|| {
                    let mut y = vec![0f32; n * o * l];
                    let mut gx = vec![0f32; n * c * hw];
                    let mut gw = vec![0f32; o * kg];
                    // SAFETY: the buffers hold the contiguous tensors of `ge`.
                    unsafe {
                        forward(&ge, x.as_ptr(), wt.as_ptr(), Some(bias.as_ptr()), y.as_mut_ptr());
                        backward_input(&ge, gy.as_ptr(), wt.as_ptr(), None, gx.as_mut_ptr());
                        let mut gb = vec![0f32; o];
                        if backward_weight(&ge, x.as_ptr(), gy.as_ptr(), gw.as_mut_ptr(), Some(gb.as_mut_ptr())) {
                            assert_eq!(gb, plain_gb, "bias gradient with the weight gradient's: {what}");
                        }
                    }
                    [y, gx, gw]
                }));
            }
            assert_eq!(runs[0], runs[1], "1 and 2 threads: {what}");
            let close = |got: &[f32], (sum, mag): &(Vec<f64>, Vec<f64>), k: usize, how: &str| {
                for (i, (&g, (&e, &m))) in got.iter().zip(sum.iter().zip(mag)).enumerate() {
                    assert!(
                        (g as f64 - e).abs() <= 1e-5 * m + 1e-6,
                        "{how} result {k}, element {i}: {g} against {e}: {what}"
                    );
                }
            };
            for (k, got) in runs[0].iter().enumerate() {
                close(got, &want[k], k, "dispatched");
            }
            // On an AVX-512 CPU (which ran its own kernels above), the AVX2 ones too.
            #[cfg(target_arch = "x86_64")]
            if super::super::simd::isa() >= super::super::simd::Isa::Avx512 {
                let avx2 = super::super::simd::Isa::Avx2;
                let mut runs = Vec::new();
                for threads in [1, 2] {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                    runs.push(pool.install(|| {
                        let mut y = vec![0f32; n * o * l];
                        let mut gw = vec![0f32; o * kg];
                        let mut gb = vec![0f32; o];
                        // SAFETY: the buffers hold the contiguous tensors of `ge`; the CPU has AVX2.
                        unsafe {
                            indirect::forward_on(
                                avx2,
                                &ge,
                                x.as_ptr(),
                                wt.as_ptr(),
                                Some(bias.as_ptr()),
                                y.as_mut_ptr(),
                            );
                            if indirect::applies_weight(&ge) {
                                let gbp = Some(gb.as_mut_ptr());
                                indirect::backward_weight_on(avx2, &ge, x.as_ptr(), gy.as_ptr(), gw.as_mut_ptr(), gbp);
                                assert_eq!(gb, plain_gb, "AVX2 bias gradient: {what}");
                            }
                        }
                        (y, gw)
                    }));
                }
                assert_eq!(runs[0], runs[1], "AVX2, 1 and 2 threads: {what}");
                close(&runs[0].0, &want[0], 0, "AVX2");
                if indirect::applies_weight(&ge) {
                    close(&runs[0].1, &want[2], 2, "AVX2");
                }
            }
        }
    }
}
