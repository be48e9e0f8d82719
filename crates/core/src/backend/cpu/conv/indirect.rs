//! The f32 forward convolution on AVX-512 as an indirect GEMM (as
//! XNNPACK's): output positions are the rows of the register tile, output
//! channels its lanes.
//!
//! The input is copied channels-last once (`[n][h * w][c]`, plus one row of
//! zeros). A tile row reads tap `t`'s `c` input channels through a pointer
//! to its input position, or to the row of zeros where the tap falls in the
//! padding: no column matrix is built or packed, and the tiles run over the
//! positions of all samples, so a small image (14 x 14 = 196 positions)
//! leaves no tile half idle. The weight is read as `[tap][c][o]`; the
//! results, channels-last, are transposed back into the output in blocks
//! of 16 x 16 while they are still in cache.
//!
//! Each output element is its bias (or 0) plus its products in the order
//! (tap, input channel), one FMA each, whatever the split of the work: the
//! same bits for any number of threads.

use super::super::gemm::transpose16;
use super::super::simd::{Isa, isa};
use super::super::warm::par_for_each;
use super::Geom;
use std::arch::x86_64::*;

/// Output positions whose products run before their results (in L1,
/// channels-last) are transposed into the output: a multiple of every tile
/// height and of the transposes' 16.
const SUB: usize = 48;

/// Whether [`forward`] runs the convolution `ge` on this CPU: one group,
/// output channels in whole vectors, enough input channels per tap for the
/// pointer set-up to be small beside the products, and a kernel larger
/// than 1 x 1 (a 1 x 1 one multiplies the input in place).
pub(super) fn applies(ge: &Geom) -> bool {
    isa() >= Isa::Avx512
        && ge.g == 1
        && ge.o.is_multiple_of(16)
        && ge.o > 0
        && ge.c >= 16
        && ge.kh * ge.kw > 1
        && ge.n * ge.l() > 0
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
    let (c, o, l, hw, kk) = (ge.c, ge.o, ge.l(), ge.hw(), ge.kh * ge.kw);
    // What a tap in the padding reads: zeros `hw` apart (only c of them are
    // ever touched; a large block is mapped lazily).
    let zeros = vec![0f32; (c - 1) * hw + 1];
    let threads = rayon::current_num_threads();
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
    let offs = offsets(ge);
    let total = ge.n * l;
    // Each task takes an even share of the blocks of SUB positions, in one run.
    let blocks = total.div_ceil(SUB);
    let tasks = threads.min(blocks);
    let (bt, offs, zeros, xp, yp) = (&bt, &offs, &zeros, Shared(x as *mut f32), Shared(y));
    let bias = bias.map(|b| Shared(b as *mut f32));
    par_for_each(tasks, |t| {
        let mut out = vec![0f32; (SUB + 16) * o];
        let mut ptrs = vec![[std::ptr::null::<f32>(); 16]; kk];
        for q0 in (t * blocks / tasks * SUB..((t + 1) * blocks / tasks * SUB).min(total)).step_by(SUB) {
            let q1 = (q0 + SUB).min(total);
            let mut nb = 0;
            while nb < o {
                let run = Run {
                    ge,
                    x: xp,
                    zeros,
                    offs,
                    b: &bt[nb..],
                    bias: bias.map(|b| b.at(nb) as *const f32),
                    out: &mut out[nb..],
                    ptrs: &mut ptrs,
                };
                // SAFETY: AVX-512F is present (`applies`); `out` holds the
                // rows [q0, q1) rounded up to whole tiles.
                nb += unsafe {
                    match (o - nb) / 16 {
                        1 => run.tiles::<12, 1>(q0, q1),
                        2 => run.tiles::<8, 2>(q0, q1),
                        3 => run.tiles::<8, 3>(q0, q1),
                        _ => run.tiles::<6, 4>(q0, q1),
                    }
                };
            }
            // The rows, sample by sample, into y[n][o][l]: their stores
            // drain while the next rows' products run.
            let mut gp = q0;
            while gp < q1 {
                let (s, pa) = (gp / l, gp % l);
                let pb = l.min(pa + (q1 - gp));
                // SAFETY: rows gp.. of `out` (o values each) were written
                // above; y[s][..][pa..pb] is this task's only (o rows l apart).
                unsafe { transpose(out.as_ptr().add((gp - q0) * o), pb - pa, o, o, yp.at(s * o * l + pa), l) };
                gp += pb - pa;
            }
        }
    });
}

/// The tiles of one block of output channels over one chunk of positions.
struct Run<'a> {
    ge: &'a Geom,
    /// The input.
    x: Shared,
    /// [`forward`]'s zeros.
    zeros: &'a [f32],
    /// [`offsets`].
    offs: &'a [Option<usize>],
    /// The weight `[tap][c][o]` from the block's first output channel.
    b: &'a [f32],
    /// The bias from the block's first output channel.
    bias: Option<*const f32>,
    /// The chunk's results `[p][o]` from the block's first output channel.
    out: &'a mut [f32],
    /// Scratch: per tap, the tile rows' input pointers.
    ptrs: &'a mut [[*const f32; 16]],
}

impl Run<'_> {
    /// Runs `R x (16 V)` tiles over positions `[p0, p1)` (of all samples);
    /// returns the block's width, `16 V`.
    ///
    /// # Safety
    /// AVX-512F is present; `out` holds the rows `[p0, p1)` rounded up to
    /// whole tiles, `16 V` values into rows of `o`; `b` holds `16 V` values
    /// into each of its `kk * c` rows of `o`, `bias` 16 V values.
    #[target_feature(enable = "avx512f")]
    unsafe fn tiles<const R: usize, const V: usize>(self, p0: usize, p1: usize) -> usize {
        let ge = self.ge;
        let (c, o, l, kk) = (ge.c, ge.o, ge.l(), ge.kh * ge.kw);
        let (hw, x, zeros) = (ge.hw(), self.x, self.zeros.as_ptr());
        let mut t0 = p0;
        while t0 < p1 {
            for i in 0..R {
                let gp = t0 + i;
                let (s, p) = (gp / l, gp % l);
                for (t, row) in self.ptrs.iter_mut().enumerate() {
                    let off = if gp < p1 { self.offs[t * l + p] } else { None };
                    // A valid offset is a position of sample s's first plane.
                    row[i] = off.map_or(zeros, |v| x.at(s * c * hw + v) as *const f32);
                }
            }
            // SAFETY: every pointer addresses c values of xcl; `b` holds
            // kk * c rows of 16 V values (o apart); tile row t0 - p0 of
            // `out` (rows o apart) holds 16 V values: the caller's contract.
            unsafe {
                tile::<R, V>(
                    (&self.ptrs[..kk], c, hw),
                    (self.b.as_ptr(), o),
                    self.bias,
                    (self.out.as_mut_ptr().add((t0 - p0) * o), o),
                )
            };
            t0 += R;
        }
        16 * V
    }
}

/// One `R x (16 V)` tile: `out[i][..] = bias + sum over (t, ci) of
/// ptrs[t][i][ci * cs] * b[(t * c + ci) * ldb..][..16 V]`, in that order.
///
/// # Safety
/// AVX-512F is present; each `ptrs[t][i]` (`i < R`) addresses `c` values
/// `cs` apart, `b` holds `ptrs.len() * c` rows of `16 V` values `ldb` apart, `bias`
/// (when given) `16 V` values, and `out` `R` rows of `16 V` values `ldo`
/// apart.
#[target_feature(enable = "avx512f")]
unsafe fn tile<const R: usize, const V: usize>(
    (ptrs, c, cs): (&[[*const f32; 16]], usize, usize),
    (b, ldb): (*const f32, usize),
    bias: Option<*const f32>,
    (out, ldo): (*mut f32, usize),
) {
    // SAFETY: the reads and writes stay inside the ranges of the contract.
    unsafe {
        let init: [__m512; V] = match bias {
            Some(bp) => std::array::from_fn(|v| _mm512_loadu_ps(bp.add(16 * v))),
            None => [_mm512_setzero_ps(); V],
        };
        let mut acc = [init; R];
        let mut b = b;
        for row in ptrs {
            let a: [*const f32; R] = std::array::from_fn(|i| row[i]);
            for ci in 0..c {
                let bv: [__m512; V] = std::array::from_fn(|v| _mm512_loadu_ps(b.add(16 * v)));
                for (i, r) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_ps(*a[i].add(ci * cs));
                    for (rv, &bv) in r.iter_mut().zip(&bv) {
                        *rv = _mm512_fmadd_ps(ai, bv, *rv);
                    }
                }
                b = b.add(ldb);
            }
        }
        for (i, r) in acc.iter().enumerate() {
            for (v, &rv) in r.iter().enumerate() {
                _mm512_storeu_ps(out.add(i * ldo + 16 * v), rv);
            }
        }
    }
}

/// `dst[j * ldd + i] = src[i * lds + j]` for `i < rows`, `j < cols`, in
/// 16 x 16 register transposes (masked at the edges). Blocks of 16 `dst`
/// rows are written one after the other, each sweeping along its rows
/// (16 streams, which the hardware prefetcher follows).
///
/// # Safety
/// AVX-512F is present; `src` holds `rows` rows of `cols` values `lds`
/// apart, `dst` `cols` rows of `rows` values `ldd` apart, not overlapping.
#[target_feature(enable = "avx512f")]
unsafe fn transpose(src: *const f32, rows: usize, cols: usize, lds: usize, dst: *mut f32, ldd: usize) {
    let mask = |n: usize| ((1u32 << n) - 1) as u16;
    for j0 in (0..cols).step_by(16) {
        let cj = (cols - j0).min(16);
        let full = rows - rows % 16;
        if cj == 16 {
            for i0 in (0..full).step_by(16) {
                // SAFETY: rows i0..i0 + 16 < rows, columns j0..j0 + 16 < cols of
                // src; rows j0.. + 16 < cols, columns i0..i0 + 16 < rows of dst.
                unsafe {
                    let r: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(src.add((i0 + i) * lds + j0)));
                    for (j, v) in transpose16(r).into_iter().enumerate() {
                        _mm512_storeu_ps(dst.add((j0 + j) * ldd + i0), v);
                    }
                }
            }
        }
        let start = if cj == 16 { full } else { 0 };
        for i0 in (start..rows).step_by(16) {
            let ri = (rows - i0).min(16);
            let (load, store) = (mask(cj), mask(ri));
            // SAFETY: the masked loads read row i0 + i < rows, columns j0..j0 + cj
            // < cols; the stores write row j0 + j < cols, columns i0..i0 + ri <
            // rows (a lane outside its mask is not accessed, a zero mask
            // accesses nothing).
            unsafe {
                let r: [__m512; 16] = std::array::from_fn(|i| {
                    let m = if i < ri { load } else { 0 };
                    _mm512_maskz_loadu_ps(m, src.wrapping_add((i0 + i) * lds + j0))
                });
                for (j, v) in transpose16(r).into_iter().enumerate().take(cj) {
                    _mm512_mask_storeu_ps(dst.wrapping_add((j0 + j) * ldd + i0), store, v);
                }
            }
        }
    }
}

/// Whether [`backward_weight`] runs the weight gradient of `ge` on this
/// CPU: one group, input channels in whole vectors, a kernel larger than
/// 1 x 1.
pub(super) fn applies_weight(ge: &Geom) -> bool {
    isa() >= Isa::Avx512
        && ge.g == 1
        && ge.c.is_multiple_of(16)
        && ge.c > 0
        && ge.o > 0
        && ge.kh * ge.kw > 1
        && ge.n * ge.l() > 0
        && (ge.hw() + 1) * ge.c <= u32::MAX as usize
}

/// Rows of the weight gradient's scratch per tap: the output channels
/// rounded up to whole tiles of every height below.
fn padded_rows(o: usize) -> usize {
    o.next_multiple_of(24)
}

/// `wt = conv_weight_grad(x, y)` for a geometry where [`applies_weight`]
/// holds: writes all of `wt`.
///
/// Register tiles of `R` output channels by `16 V` input channels, one tap
/// each, run over the output positions of one sample after another: the
/// sample's input, copied channels-last (and a row of zeros for taps in
/// the padding), gives the lanes, the output gradient, read in place, the
/// broadcasts. Each weight element is one FMA chain per fixed chunk of
/// samples ([`super::weight_chunks`]), the chunks then summed in order:
/// the same bits for any number of threads.
///
/// # Safety
/// `x` (`[n, c, h, w]`), `y` (`[n, o, oh, ow]`) and `wt` (`[o, c, kh,
/// kw]`, writable, disjoint from the others) hold the contiguous tensors of
/// `ge`; [`applies_weight`] holds.
pub(super) unsafe fn backward_weight(ge: &Geom, x: *const f32, y: *const f32, wt: *mut f32) {
    let (c, o, l, hw, kk) = (ge.c, ge.o, ge.l(), ge.hw(), ge.kh * ge.kw);
    // Per tap and output position, the offset of the input row it reads in
    // a sample's channels-last input (the zero row past the last in the padding).
    let rows: Vec<u32> = offsets(ge).iter().map(|off| (off.unwrap_or(hw) * c) as u32).collect();
    // The tiles: (tap, first output channel, first input channel, lane vectors).
    let mut tiles = Vec::new();
    for t in 0..kk {
        let mut c0 = 0;
        while c0 < c {
            let v = ((c - c0) / 16).min(4);
            let r = weight_rows(v);
            for o0 in (0..o).step_by(r) {
                tiles.push((t, o0, c0, v));
            }
            c0 += 16 * v;
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
    let tasks = rayon::current_num_threads().min(chunks);
    par_for_each(tasks, |task| {
        // One sample's input as [hw + 1][c], its last row zeros.
        let mut xs = vec![0f32; (hw + 1) * c];
        for ch in (task..chunks).step_by(tasks) {
            for s in ch * ge.n / chunks..(ch + 1) * ge.n / chunks {
                // SAFETY: sample s of x is c x hw values; `xs` holds hw x c
                // (and the zero row); AVX-512F is present (`applies_weight`).
                unsafe { transpose(xp.at(s * c * hw), c, hw, hw, xs.as_mut_ptr(), c) };
                for &(t, o0, c0, v) in tiles {
                    let dy: [*const f32; 12] = std::array::from_fn(|i| {
                        let oc = o0 + i;
                        if oc < o {
                            yp.at((s * o + oc) * l) as *const f32
                        } else {
                            zp.at(0) as *const f32
                        }
                    });
                    let tile = WeightTile {
                        dy,
                        x: xs[c0..].as_ptr(),
                        rows: &rows[t * l..(t + 1) * l],
                        acc: accp.at(ch * size + (t * op + o0) * c + c0),
                        ldacc: c,
                    };
                    // SAFETY: AVX-512F is present; each dy row holds l values;
                    // the rows' offsets (at most hw * c) plus 16 v lanes from c0
                    // lie in `xs`; this tile's block of chunk ch's partial sum
                    // (rows o0..o0 + R < op of tap t, 16 v lanes from c0) is
                    // this task's only.
                    unsafe {
                        match v {
                            1 => tile.run::<8, 1>(),
                            2 => tile.run::<8, 2>(),
                            3 => tile.run::<8, 3>(),
                            _ => tile.run::<6, 4>(),
                        }
                    }
                }
            }
        }
    });
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

/// The weight gradient's tile height for `v` lane vectors (its register
/// budget: R x V accumulators, V input vectors and a broadcast).
fn weight_rows(v: usize) -> usize {
    if v >= 4 { 6 } else { 8 }
}

/// One weight-gradient tile over one sample's output positions.
struct WeightTile<'a> {
    /// The output gradient rows of the tile's output channels.
    dy: [*const f32; 12],
    /// The sample's channels-last input from the tile's first input channel.
    x: *const f32,
    /// Per output position, the offset of the input row its tap reads.
    rows: &'a [u32],
    /// The tile's accumulators (`R` rows `ldacc` apart).
    acc: *mut f32,
    ldacc: usize,
}

impl WeightTile<'_> {
    /// `acc[i][..] += sum over p of dy[i][p] * x[rows[p]..][..16 V]`, one FMA
    /// at a time in the order of the positions.
    ///
    /// # Safety
    /// AVX-512F is present; `dy[i]` (`i < R`) holds `rows.len()` values,
    /// `x` plus each offset of `rows` holds `16 V` values, `acc` `R` rows of
    /// `16 V` values `ldacc` apart.
    #[target_feature(enable = "avx512f")]
    unsafe fn run<const R: usize, const V: usize>(self) {
        // SAFETY: the reads and writes stay inside the ranges of the contract.
        unsafe {
            let mut acc: [[__m512; V]; R] = std::array::from_fn(|i| {
                std::array::from_fn(|v| _mm512_loadu_ps(self.acc.add(i * self.ldacc + 16 * v)))
            });
            let dy: [*const f32; R] = std::array::from_fn(|i| self.dy[i]);
            for (p, &row) in self.rows.iter().enumerate() {
                let xr = self.x.add(row as usize);
                let xv: [__m512; V] = std::array::from_fn(|v| _mm512_loadu_ps(xr.add(16 * v)));
                for (i, r) in acc.iter_mut().enumerate() {
                    let g = _mm512_set1_ps(*dy[i].add(p));
                    for (rv, &xv) in r.iter_mut().zip(&xv) {
                        *rv = _mm512_fmadd_ps(g, xv, *rv);
                    }
                }
            }
            for (i, r) in acc.iter().enumerate() {
                for (v, &rv) in r.iter().enumerate() {
                    _mm512_storeu_ps(self.acc.add(i * self.ldacc + 16 * v), rv);
                }
            }
        }
    }
}
