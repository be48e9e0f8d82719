//! The f32 forward convolution and weight gradient as indirect GEMMs (as
//! XNNPACK's), on AVX-512 and on AVX2.
//!
//! Forward: register tiles of output positions (rows; the positions of all
//! samples in turn, so a small image of 14 x 14 = 196 positions leaves no
//! tile half idle) by output channels (lanes). A tile row reads tap `t`'s
//! input channels in place, through a pointer to its input position in
//! the first channel's plane (the channels `h * w` apart), or to a block
//! of zeros where the tap falls in the padding: no column matrix is built
//! or packed. The weight is read as `[tap][c][o]`. Every 48 positions'
//! results (channels-last, in L1) are transposed into the NCHW output
//! while the next positions' products run.
//!
//! Weight gradient: register tiles of output channels (rows) by input
//! channels (lanes) of one tap, over the output positions of one sample
//! after another: the sample's input, copied channels-last just before
//! (with a row of zeros for taps in the padding), gives the lanes, the
//! output gradient, read in place, the broadcasts.
//!
//! Each forward output is its bias (or 0) plus its products in the order
//! (tap, input channel), one FMA each; each weight gradient element one
//! FMA chain per fixed chunk of samples, the chunks then summed in order:
//! the same bits for any number of threads (but not the GEMM paths' bits,
//! nor the same on AVX2 as on AVX-512, whose FMA chains are the same but
//! whose tiles need not be).

use super::super::simd::{Isa, isa};
use super::super::transpose::{transpose_avx2, transpose_avx512};
use super::super::warm::par_for_each;
use super::Geom;
use std::arch::x86_64::*;

/// Output positions whose products run before their results (in L1,
/// channels-last) are transposed into the output: a multiple of every tile
/// height and of the transposes' 16.
const SUB: usize = 48;

/// Whether [`forward`] runs the convolution `ge` on this CPU: one group,
/// output channels in whole vectors of 16, enough input channels per tap
/// for the pointer set-up to be small beside the products, and a kernel
/// larger than 1 x 1 (a 1 x 1 one multiplies the input in place).
pub(super) fn applies(ge: &Geom) -> bool {
    isa() >= Isa::Avx2
        && ge.g == 1
        && ge.o.is_multiple_of(16)
        && ge.o > 0
        && ge.c >= 16
        && ge.kh * ge.kw > 1
        && ge.n * ge.l() > 0
}

/// Whether [`backward_weight`] runs the weight gradient of `ge` on this
/// CPU: one group, input channels in whole vectors of 16, a kernel larger
/// than 1 x 1.
pub(super) fn applies_weight(ge: &Geom) -> bool {
    isa() >= Isa::Avx2
        && ge.g == 1
        && ge.c.is_multiple_of(16)
        && ge.c > 0
        && ge.o > 0
        && ge.kh * ge.kw > 1
        && ge.n * ge.l() > 0
        && (ge.hw() + 1) * ge.c <= u32::MAX as usize
}

/// The register-tile kernels and transposes of one instruction set.
trait Kernels {
    /// f32 lanes per vector.
    const LANES: usize;
    /// Most vectors across a tile.
    const MAX_V: usize;
    /// Rows of a forward tile `v` vectors wide.
    fn fwd_rows(v: usize) -> usize;
    /// Rows of a weight-gradient tile `v` vectors wide.
    fn weight_rows(v: usize) -> usize;
    /// A forward tile ([`fwd_tile_avx512`]) `v` vectors wide.
    ///
    /// # Safety
    /// This instruction set is present; the contract of the tile kernels.
    unsafe fn fwd_tile(v: usize, a: FwdA, b: (*const f32, usize), bias: Option<*const f32>, out: (*mut f32, usize));
    /// A weight-gradient tile ([`weight_tile_avx512`]) `v` vectors wide.
    ///
    /// # Safety
    /// This instruction set is present; the contract of the tile kernels.
    unsafe fn weight_tile(v: usize, dy: &[*const f32; 12], x: *const f32, rows: &[u32], acc: (*mut f32, usize));
    /// `dst[j * ldd + i] = src[i * lds + j]` for `i < rows`, `j < cols`.
    ///
    /// # Safety
    /// This instruction set is present; `src` holds `rows` rows of `cols`
    /// values `lds` apart, `dst` `cols` rows of `rows` values `ldd` apart,
    /// not overlapping.
    unsafe fn transpose(src: *const f32, rows: usize, cols: usize, lds: usize, dst: *mut f32, ldd: usize);
}

/// A forward tile's A operand: per tap, the tile rows' input pointers; the
/// input channels; their stride.
type FwdA<'a> = (&'a [[*const f32; 16]], usize, usize);

/// The tile kernels of one instruction set: `$fwd` (forward) and `$wgt`
/// (weight gradient), `R` rows by `V` vectors of `$lanes`.
macro_rules! tile_kernels {
    ($fwd:ident, $wgt:ident, $feat:literal, $v:ty, $lanes:literal, $load:ident, $store:ident, $set1:ident, $fma:ident, $zero:ident) => {
        /// One forward tile: `out[i][..] = bias + sum over (t, ci) of
        /// ptrs[t][i][ci * cs] * b[(t * c + ci) * ldb..][..V lanes]`, in
        /// that order.
        ///
        /// # Safety
        /// The instruction set is present; each `ptrs[t][i]` (`i < R`)
        /// addresses `c` values `cs` apart, `b` holds `ptrs.len() * c` rows
        /// of `V` vectors `ldb` apart, `bias` (when given) `V` vectors, and
        /// `out` `R` rows of `V` vectors `ldo` apart.
        #[target_feature(enable = $feat)]
        unsafe fn $fwd<const R: usize, const V: usize>(
            (ptrs, c, cs): FwdA,
            (b, ldb): (*const f32, usize),
            bias: Option<*const f32>,
            (out, ldo): (*mut f32, usize),
        ) {
            // SAFETY: the reads and writes stay inside the ranges of the contract.
            unsafe {
                let init: [$v; V] = match bias {
                    Some(bp) => std::array::from_fn(|v| $load(bp.add($lanes * v))),
                    None => [$zero(); V],
                };
                let mut acc = [init; R];
                let mut b = b;
                for row in ptrs {
                    let a: [*const f32; R] = std::array::from_fn(|i| row[i]);
                    for ci in 0..c {
                        let bv: [$v; V] = std::array::from_fn(|v| $load(b.add($lanes * v)));
                        for (i, r) in acc.iter_mut().enumerate() {
                            let ai = $set1(*a[i].add(ci * cs));
                            for (rv, &bv) in r.iter_mut().zip(&bv) {
                                *rv = $fma(ai, bv, *rv);
                            }
                        }
                        b = b.add(ldb);
                    }
                }
                for (i, r) in acc.iter().enumerate() {
                    for (v, &rv) in r.iter().enumerate() {
                        $store(out.add(i * ldo + $lanes * v), rv);
                    }
                }
            }
        }

        /// One weight-gradient tile over one sample's output positions:
        /// `acc[i][..] += sum over p of dy[i][p] * x[rows[p]..][..V lanes]`,
        /// one FMA at a time in the order of the positions.
        ///
        /// # Safety
        /// The instruction set is present; `dy[i]` (`i < R`) holds
        /// `rows.len()` values, `x` plus each offset of `rows` holds `V`
        /// vectors, `acc` `R` rows of `V` vectors `ld` apart.
        #[target_feature(enable = $feat)]
        unsafe fn $wgt<const R: usize, const V: usize>(
            dy: &[*const f32; 12],
            x: *const f32,
            rows: &[u32],
            (accp, ld): (*mut f32, usize),
        ) {
            // SAFETY: the reads and writes stay inside the ranges of the contract.
            unsafe {
                let mut acc: [[$v; V]; R] =
                    std::array::from_fn(|i| std::array::from_fn(|v| $load(accp.add(i * ld + $lanes * v))));
                let dy: [*const f32; R] = std::array::from_fn(|i| dy[i]);
                for (p, &row) in rows.iter().enumerate() {
                    let xr = x.add(row as usize);
                    let xv: [$v; V] = std::array::from_fn(|v| $load(xr.add($lanes * v)));
                    for (i, r) in acc.iter_mut().enumerate() {
                        let g = $set1(*dy[i].add(p));
                        for (rv, &xv) in r.iter_mut().zip(&xv) {
                            *rv = $fma(g, xv, *rv);
                        }
                    }
                }
                for (i, r) in acc.iter().enumerate() {
                    for (v, &rv) in r.iter().enumerate() {
                        $store(accp.add(i * ld + $lanes * v), rv);
                    }
                }
            }
        }
    };
}

tile_kernels!(
    fwd_tile_avx512,
    weight_tile_avx512,
    "avx512f",
    __m512,
    16,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_set1_ps,
    _mm512_fmadd_ps,
    _mm512_setzero_ps
);
tile_kernels!(
    fwd_tile_avx2,
    weight_tile_avx2,
    "avx2,fma",
    __m256,
    8,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_set1_ps,
    _mm256_fmadd_ps,
    _mm256_setzero_ps
);

/// AVX-512: 16 lanes, tiles up to 4 vectors wide (32 registers: R x V
/// accumulators, V operand vectors and a broadcast).
struct Avx512;

/// Tile rows by vectors (1 to 4) on AVX-512: forward, weight gradient.
const FWD_512: [usize; 4] = [12, 8, 8, 6];
const WGT_512: [usize; 4] = [8, 8, 8, 6];

impl Kernels for Avx512 {
    const LANES: usize = 16;
    const MAX_V: usize = 4;
    fn fwd_rows(v: usize) -> usize {
        FWD_512[v - 1]
    }
    fn weight_rows(v: usize) -> usize {
        WGT_512[v - 1]
    }
    unsafe fn fwd_tile(v: usize, a: FwdA, b: (*const f32, usize), bias: Option<*const f32>, out: (*mut f32, usize)) {
        // SAFETY: the caller's contract.
        unsafe {
            match v {
                1 => fwd_tile_avx512::<{ FWD_512[0] }, 1>(a, b, bias, out),
                2 => fwd_tile_avx512::<{ FWD_512[1] }, 2>(a, b, bias, out),
                3 => fwd_tile_avx512::<{ FWD_512[2] }, 3>(a, b, bias, out),
                _ => fwd_tile_avx512::<{ FWD_512[3] }, 4>(a, b, bias, out),
            }
        }
    }
    unsafe fn weight_tile(v: usize, dy: &[*const f32; 12], x: *const f32, rows: &[u32], acc: (*mut f32, usize)) {
        // SAFETY: the caller's contract.
        unsafe {
            match v {
                1 => weight_tile_avx512::<{ WGT_512[0] }, 1>(dy, x, rows, acc),
                2 => weight_tile_avx512::<{ WGT_512[1] }, 2>(dy, x, rows, acc),
                3 => weight_tile_avx512::<{ WGT_512[2] }, 3>(dy, x, rows, acc),
                _ => weight_tile_avx512::<{ WGT_512[3] }, 4>(dy, x, rows, acc),
            }
        }
    }
    unsafe fn transpose(src: *const f32, rows: usize, cols: usize, lds: usize, dst: *mut f32, ldd: usize) {
        // SAFETY: the caller's contract.
        unsafe { transpose_avx512(src, rows, cols, lds, dst, ldd) }
    }
}

/// AVX2: 8 lanes, tiles up to 2 vectors wide (16 registers).
struct Avx2;

/// Tile rows by vectors (1 or 2) on AVX2: forward, weight gradient.
const FWD_2: [usize; 2] = [12, 6];
const WGT_2: [usize; 2] = [8, 6];

impl Kernels for Avx2 {
    const LANES: usize = 8;
    const MAX_V: usize = 2;
    fn fwd_rows(v: usize) -> usize {
        FWD_2[v - 1]
    }
    fn weight_rows(v: usize) -> usize {
        WGT_2[v - 1]
    }
    unsafe fn fwd_tile(v: usize, a: FwdA, b: (*const f32, usize), bias: Option<*const f32>, out: (*mut f32, usize)) {
        // SAFETY: the caller's contract.
        unsafe {
            match v {
                1 => fwd_tile_avx2::<{ FWD_2[0] }, 1>(a, b, bias, out),
                _ => fwd_tile_avx2::<{ FWD_2[1] }, 2>(a, b, bias, out),
            }
        }
    }
    unsafe fn weight_tile(v: usize, dy: &[*const f32; 12], x: *const f32, rows: &[u32], acc: (*mut f32, usize)) {
        // SAFETY: the caller's contract.
        unsafe {
            match v {
                1 => weight_tile_avx2::<{ WGT_2[0] }, 1>(dy, x, rows, acc),
                _ => weight_tile_avx2::<{ WGT_2[1] }, 2>(dy, x, rows, acc),
            }
        }
    }
    unsafe fn transpose(src: *const f32, rows: usize, cols: usize, lds: usize, dst: *mut f32, ldd: usize) {
        // SAFETY: the caller's contract.
        unsafe { transpose_avx2(src, rows, cols, lds, dst, ldd) }
    }
}

/// A raw pointer shared by the threads of one call.
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: the threads write disjoint parts of the buffers behind these
// pointers (or only read them), which outlive the parallel regions.
unsafe impl Send for Shared {}
// SAFETY: as for Send.
unsafe impl Sync for Shared {}

impl Shared {
    /// The pointer `off` values on (taken whole: a closure capturing the
    /// field alone would not be `Send`).
    fn at(self, off: usize) -> *mut f32 {
        self.0.wrapping_add(off)
    }
}

/// For each tap `t` and output position `p` of one sample, the offset of
/// the input position tap `t` reads at `p` in a plane of the input
/// (`[tap][p]`), or `None` in the padding.
fn offsets(ge: &Geom) -> Vec<Option<usize>> {
    let l = ge.l();
    let mut offs = Vec::with_capacity(ge.kh * ge.kw * l);
    for i in 0..ge.kh {
        for j in 0..ge.kw {
            for p in 0..l {
                let ih = ((p / ge.ow) * ge.sh + i * ge.dh)
                    .checked_sub(ge.ph)
                    .filter(|&v| v < ge.h);
                let iw = ((p % ge.ow) * ge.sw + j * ge.dw)
                    .checked_sub(ge.pw)
                    .filter(|&v| v < ge.w);
                offs.push(ih.zip(iw).map(|(ih, iw)| ih * ge.w + iw));
            }
        }
    }
    offs
}

/// `y = conv(x, wt) (+ bias)` for a geometry where [`applies`] holds:
/// writes all of `y`.
///
/// # Safety
/// `x`, `wt`, `bias` (`[o]`) and `y` hold the contiguous tensors of `ge`,
/// `y` writable and disjoint from the others; [`applies`] holds.
pub(super) unsafe fn forward(ge: &Geom, x: *const f32, wt: *const f32, bias: Option<*const f32>, y: *mut f32) {
    // SAFETY: the same contract; `applies` checked the instruction set.
    unsafe { forward_on(isa(), ge, x, wt, bias, y) }
}

/// [`forward`] with the kernels of `level` (AVX-512 or AVX2).
///
/// # Safety
/// As [`forward`]; the CPU has `level`.
pub(super) unsafe fn forward_on(
    level: Isa,
    ge: &Geom,
    x: *const f32,
    wt: *const f32,
    bias: Option<*const f32>,
    y: *mut f32,
) {
    // SAFETY: the same contract.
    unsafe {
        if level >= Isa::Avx512 {
            forward_with::<Avx512>(ge, x, wt, bias, y)
        } else {
            forward_with::<Avx2>(ge, x, wt, bias, y)
        }
    }
}

/// [`forward`] with the kernels `K`.
///
/// # Safety
/// As [`forward`]; the CPU has `K`'s instruction set.
unsafe fn forward_with<K: Kernels>(ge: &Geom, x: *const f32, wt: *const f32, bias: Option<*const f32>, y: *mut f32) {
    let (c, o, l, hw, kk) = (ge.c, ge.o, ge.l(), ge.hw(), ge.kh * ge.kw);
    // What a tap in the padding reads: zeros `hw` apart (only c of them are
    // ever touched; a large block is mapped lazily).
    let zeros = vec![0f32; (c - 1) * hw + 1];
    // The weight as [tap][c][o].
    // SAFETY: wt holds o x c x kk values.
    let w = unsafe { std::slice::from_raw_parts(wt, o * c * kk) };
    let mut bt = vec![0f32; kk * c * o];
    for (oc, filt) in w.chunks_exact(c * kk).enumerate() {
        for (ci, taps) in filt.chunks_exact(kk).enumerate() {
            for (t, &v) in taps.iter().enumerate() {
                bt[(t * c + ci) * o + oc] = v;
            }
        }
    }
    // The offsets by position: [p][tap].
    let offs = offsets(ge);
    let offs: Vec<Option<usize>> = (0..l * kk).map(|i| offs[(i % kk) * l + i / kk]).collect();
    let total = ge.n * l;
    // Each task takes an even share of the blocks of SUB positions, in one run.
    let blocks = total.div_ceil(SUB);
    let tasks = rayon::current_num_threads().min(blocks);
    let (bt, offs, zeros, xp, yp) = (&bt, &offs, &zeros, Shared(x as *mut f32), Shared(y));
    let bias = bias.map(|b| Shared(b as *mut f32));
    par_for_each(tasks, |t| {
        let mut out = vec![0f32; (SUB + 16) * o];
        let mut ptrs = vec![[std::ptr::null::<f32>(); 16]; kk];
        for q0 in (t * blocks / tasks * SUB..((t + 1) * blocks / tasks * SUB).min(total)).step_by(SUB) {
            let q1 = (q0 + SUB).min(total);
            let mut nb = 0;
            while nb < o {
                let v = ((o - nb) / K::LANES).min(K::MAX_V);
                let rows = K::fwd_rows(v);
                let mut t0 = q0;
                while t0 < q1 {
                    for i in 0..rows {
                        let gp = t0 + i;
                        if gp >= q1 {
                            ptrs.iter_mut().for_each(|row| row[i] = zeros.as_ptr());
                            continue;
                        }
                        let (s, p) = (gp / l, gp % l);
                        let base = xp.at(s * c * hw) as *const f32;
                        for (row, off) in ptrs.iter_mut().zip(&offs[p * kk..(p + 1) * kk]) {
                            // A valid offset is a position of sample s's first plane.
                            row[i] = off.map_or(zeros.as_ptr(), |v| base.wrapping_add(v));
                        }
                    }
                    // SAFETY: every pointer addresses c values hw apart (in x or
                    // `zeros`); `bt` holds kk * c rows of o values, `bias` o;
                    // `out` holds SUB + 16 rows of o (t0 - q0 + rows <= SUB +
                    // 12); the CPU has K's instruction set.
                    unsafe {
                        K::fwd_tile(
                            v,
                            (&ptrs[..], c, hw),
                            (bt.as_ptr().add(nb), o),
                            bias.map(|b| b.at(nb) as *const f32),
                            (out.as_mut_ptr().add((t0 - q0) * o + nb), o),
                        )
                    };
                    t0 += rows;
                }
                nb += K::LANES * v;
            }
            // The rows, sample by sample, into y[n][o][l]: their stores
            // drain while the next rows' products run.
            let mut gp = q0;
            while gp < q1 {
                let (s, pa) = (gp / l, gp % l);
                let pb = l.min(pa + (q1 - gp));
                // SAFETY: rows gp.. of `out` (o values each) were written
                // above; y[s][..][pa..pb] is this task's only (o rows l apart).
                unsafe { K::transpose(out.as_ptr().add((gp - q0) * o), pb - pa, o, o, yp.at(s * o * l + pa), l) };
                gp += pb - pa;
            }
        }
    });
}

/// Rows of the weight gradient's partial sums per tap: the output channels
/// rounded up to whole tiles of every height.
fn padded_rows(o: usize) -> usize {
    o.next_multiple_of(24)
}

/// `wt = conv_weight_grad(x, y)` for a geometry where [`applies_weight`]
/// holds: writes all of `wt`, and the bias gradient into `bias` when given
/// (each sample's row sums taken while its output gradient is in cache,
/// then summed as [`super::bias_grad`] sums them: the same bits).
///
/// # Safety
/// `x` (`[n, c, h, w]`), `y` (`[n, o, oh, ow]`), `wt` (`[o, c, kh, kw]`)
/// and `bias` (`[o]`) hold the contiguous tensors of `ge`, `wt` and `bias`
/// writable and disjoint from the others; [`applies_weight`] holds.
pub(super) unsafe fn backward_weight(ge: &Geom, x: *const f32, y: *const f32, wt: *mut f32, bias: Option<*mut f32>) {
    // SAFETY: the same contract; `applies_weight` checked the instruction set.
    unsafe { backward_weight_on(isa(), ge, x, y, wt, bias) }
}

/// [`backward_weight`] with the kernels of `level` (AVX-512 or AVX2).
///
/// # Safety
/// As [`backward_weight`]; the CPU has `level`.
pub(super) unsafe fn backward_weight_on(
    level: Isa,
    ge: &Geom,
    x: *const f32,
    y: *const f32,
    wt: *mut f32,
    bias: Option<*mut f32>,
) {
    // SAFETY: the same contract.
    unsafe {
        if level >= Isa::Avx512 {
            backward_weight_with::<Avx512>(ge, x, y, wt, bias)
        } else {
            backward_weight_with::<Avx2>(ge, x, y, wt, bias)
        }
    }
}

/// [`backward_weight`] with the kernels `K`.
///
/// # Safety
/// As [`backward_weight`]; the CPU has `K`'s instruction set.
unsafe fn backward_weight_with<K: Kernels>(
    ge: &Geom,
    x: *const f32,
    y: *const f32,
    wt: *mut f32,
    bias: Option<*mut f32>,
) {
    let (c, o, l, hw, kk) = (ge.c, ge.o, ge.l(), ge.hw(), ge.kh * ge.kw);
    // Per tap and output position, the offset of the input row it reads in
    // a sample's channels-last input (the zero row past the last in the padding).
    let rows: Vec<u32> = offsets(ge).iter().map(|off| (off.unwrap_or(hw) * c) as u32).collect();
    // The tiles: (tap, first output channel, first input channel, vectors).
    let mut tiles = Vec::new();
    for t in 0..kk {
        let mut c0 = 0;
        while c0 < c {
            let v = ((c - c0) / K::LANES).min(K::MAX_V);
            for o0 in (0..o).step_by(K::weight_rows(v)) {
                tiles.push((t, o0, c0, v));
            }
            c0 += K::LANES * v;
        }
    }
    // The samples are summed in fixed chunks (a function of the shapes
    // only), each into its own partial sum [tap][op][c], then the chunks
    // in order.
    let op = padded_rows(o);
    let size = kk * op * c;
    let chunks = super::weight_chunks(ge.n, size);
    let mut acc = vec![0f32; chunks * size];
    let accp = Shared(acc.as_mut_ptr());
    // What the tile rows past the last output channel read.
    let zeros = vec![0f32; l];
    let (xp, yp, zp) = (
        Shared(x as *mut f32),
        Shared(y as *mut f32),
        Shared(zeros.as_ptr() as *mut f32),
    );
    let (rows, tiles) = (&rows, &tiles);
    // Per sample and output channel, the sum of its output gradient row.
    let row_sums = bias.is_some();
    let mut sums = vec![0f32; if row_sums { ge.n * o } else { 0 }];
    let sp = Shared(sums.as_mut_ptr());
    let tasks = rayon::current_num_threads().min(chunks);
    par_for_each(tasks, |task| {
        // One sample's input as [hw + 1][c], its last row zeros.
        let mut xs = vec![0f32; (hw + 1) * c];
        for ch in (task..chunks).step_by(tasks) {
            for s in ch * ge.n / chunks..(ch + 1) * ge.n / chunks {
                // SAFETY: sample s of x is c x hw values; `xs` holds hw x c
                // (and the zero row); the CPU has K's instruction set.
                unsafe { K::transpose(xp.at(s * c * hw), c, hw, hw, xs.as_mut_ptr(), c) };
                for &(t, o0, c0, v) in tiles {
                    let dy: [*const f32; 12] = std::array::from_fn(|i| {
                        let oc = o0 + i;
                        if oc < o {
                            yp.at((s * o + oc) * l) as *const f32
                        } else {
                            zp.at(0) as *const f32
                        }
                    });
                    // SAFETY: dy rows hold l values; offsets (<= hw * c) + v vectors
                    // from c0 lie in `xs`; the tile's block of chunk ch's sum (rows
                    // o0..o0 + R <= op, tap t) is this task's only; K's ISA is present.
                    unsafe {
                        K::weight_tile(
                            v,
                            &dy,
                            xs.as_ptr().add(c0),
                            &rows[t * l..(t + 1) * l],
                            (accp.at(ch * size + (t * op + o0) * c + c0), c),
                        )
                    }
                }
                if row_sums {
                    for oc in 0..o {
                        // SAFETY: row oc of sample s of y holds l values; entry
                        // (s, oc) of `sums` is this task's only.
                        unsafe {
                            let row = std::slice::from_raw_parts(yp.at((s * o + oc) * l), l);
                            *sp.at(s * o + oc) = <f32 as super::Num>::row_sum(row);
                        }
                    }
                }
            }
        }
    });
    if let Some(bias) = bias {
        for oc in 0..o {
            let total = (0..ge.n).fold(0f64, |a, s| a + sums[s * o + oc] as f64);
            // SAFETY: bias holds o values.
            unsafe { *bias.add(oc) = total as f32 };
        }
    }
    let (acc, rest) = acc.split_at_mut(size);
    for part in rest.chunks_exact(size) {
        for (a, &b) in acc.iter_mut().zip(part) {
            *a += b;
        }
    }
    // [tap][o][c] into [o][c][tap].
    // SAFETY: wt holds o x c x kk values.
    let out = unsafe { std::slice::from_raw_parts_mut(wt, o * c * kk) };
    for (oc, filt) in out.chunks_exact_mut(c * kk).enumerate() {
        for (ci, taps) in filt.chunks_exact_mut(kk).enumerate() {
            for (t, v) in taps.iter_mut().enumerate() {
                *v = acc[(t * op + oc) * c + ci];
            }
        }
    }
}
