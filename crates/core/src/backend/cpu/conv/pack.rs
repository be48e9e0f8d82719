//! How the convolution kernels' products read their column matrices
//! without writing them: the tap offsets of a band of output rows
//! ([`tap_offsets`], [`band_tables`], [`sample_tables`] for several
//! samples at once), and the B sources that pack GEMM panels straight from
//! the input through them: [`ColPack`] (the column matrix, for the forward
//! pass) and [`ColPackT`] (its transpose, for the weight gradient), each
//! with a portable packer and AVX2 / AVX-512 f32 ones.

use super::super::gemm::PackB;
use super::{Geom, Num};

/// For each tap `(i, j)` of the kernel and each output position of the
/// rows `[r0, r1)`: the offset in an input plane of the value the tap reads
/// there (where it would be, in the padding) and whether it is inside the
/// plane (-1) or padding (0): two tables of `kh * kw` rows of `(r1 - r0) *
/// ow`. `None` when an offset does not fit an `i32`.
pub(super) fn tap_offsets(ge: &Geom, r0: usize, r1: usize) -> Option<(Vec<i32>, Vec<i32>)> {
    let (kk, lt) = (ge.kh * ge.kw, (r1 - r0) * ge.ow);
    let (mut offs, mut valid) = (vec![0i32; kk * lt], vec![0i32; kk * lt]);
    let (h, w) = (ge.h as i64, ge.w as i64);
    for i in 0..ge.kh {
        for j in 0..ge.kw {
            let at = (i * ge.kw + j) * lt;
            for r in r0..r1 {
                let ih = (r * ge.sh + i * ge.dh) as i64 - ge.ph as i64;
                for q in 0..ge.ow {
                    let iw = (q * ge.sw + j * ge.dw) as i64 - ge.pw as i64;
                    let l = at + (r - r0) * ge.ow + q;
                    offs[l] = i32::try_from(ih * w + iw).ok()?;
                    valid[l] = -i32::from((0..h).contains(&ih) && (0..w).contains(&iw));
                }
            }
        }
    }
    Some((offs, valid))
}

/// The column matrix of one group of one sample for a band of output rows
/// (`kg x lt`), packed straight into the GEMM's B panels from the input
/// through [`tap_offsets`]: the matrix itself is never written.
pub(super) struct ColPack<'a, T> {
    /// The group's first input plane.
    pub(super) x: *const T,
    /// Elements of the input tensor before `x`.
    pub(super) before: usize,
    /// Elements of the input tensor.
    pub(super) total: usize,
    /// Plane size.
    pub(super) hw: usize,
    /// Taps per channel (`kh * kw`).
    pub(super) kk: usize,
    /// Columns (output positions of the band).
    pub(super) lt: usize,
    /// Length of a tap's row of the tables (at least `lt`).
    pub(super) tl: usize,
    /// [`tap_offsets`] of the band (or of several samples' whole outputs,
    /// [`SampleTables`]).
    pub(super) offs: &'a [i32],
    /// Their validity.
    pub(super) valid: &'a [i32],
    /// Every row's offsets are its first plus the column (stride 1, output
    /// as wide as the input).
    pub(super) flat: bool,
    pub(super) pack: PackFn<T>,
}

// SAFETY: the packer only reads the input (locked by the kernel for the
// whole call) and its own offset table.
unsafe impl<T> Sync for ColPack<'_, T> {}

/// Row `(c, ij)` of a [`ColPack`]'s column matrix (channel `c`, tap `ij`),
/// stepped through in order without divisions.
#[derive(Clone, Copy)]
struct RowCursor {
    c: usize,
    ij: usize,
}

impl RowCursor {
    #[inline(always)]
    fn next(&mut self, kk: usize) {
        self.ij += 1;
        if self.ij == kk {
            self.ij = 0;
            self.c += 1;
        }
    }
}

impl<'a, T> ColPack<'a, T> {
    /// The cursor at row `k`.
    fn cursor(&self, k: usize) -> RowCursor {
        RowCursor {
            c: k / self.kk,
            ij: k % self.kk,
        }
    }

    /// A row of the column matrix: its input plane, tap offsets and validity.
    #[inline(always)]
    fn row(&self, at: RowCursor) -> (*const T, &'a [i32], &'a [i32]) {
        let t = at.ij * self.tl..at.ij * self.tl + self.lt;
        (
            self.x.wrapping_add(at.c * self.hw),
            &self.offs[t.clone()],
            &self.valid[t],
        )
    }

    /// The input elements after a row's plane start (negative: before it)
    /// that a load may touch: `[lo, hi)`.
    #[inline(always)]
    fn reach(&self, at: RowCursor) -> (isize, isize) {
        let start = self.before + at.c * self.hw;
        (-(start as isize), (self.total - start) as isize)
    }
}

impl<T: Num> PackB<T> for ColPack<'_, T> {
    unsafe fn pack(&self, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, nr: usize, dst: *mut T) {
        // SAFETY: rows below kg are channels of the group (inside the input),
        // the valid offsets point inside their planes, the tables hold lt >=
        // n values, and the panels are writable (the caller's contract).
        unsafe { (self.pack)(self, p0, kc, n, pj0, pj1, nr, dst) }
    }
}

/// The bands of output rows of a forward pass and their [`tap_offsets`],
/// when the tables are small enough (else the column matrix is built).
pub(super) type BandTables = Vec<(usize, usize, Vec<i32>, Vec<i32>)>;

pub(super) fn band_tables(ge: &Geom) -> Option<BandTables> {
    let kk = ge.kh * ge.kw;
    if ge.hw() > i32::MAX as usize || kk.saturating_mul(ge.l()) > 1 << 22 {
        return None;
    }
    let band = ge.band();
    let mut out = Vec::new();
    let mut r0 = 0;
    while r0 < ge.oh {
        let r1 = (r0 + band).min(ge.oh);
        let (offs, valid) = tap_offsets(ge, r0, r1)?;
        out.push((r0, r1, offs, valid));
        r0 = r1;
    }
    Some(out)
}

/// Products that take several samples' whole outputs as their columns
/// (`ColPack` reading each sample's input), when one band covers an output:
/// a small output fills the GEMM's 32-column panels badly alone (14 x 14 =
/// 196 positions: 7 panels, the last one 4 columns wide), and its
/// samples together fill them (8 x 196 = 49 panels).
pub(super) struct SampleTables {
    /// Samples per product.
    pub(super) samples: usize,
    /// [`tap_offsets`] of the whole output, repeated for each sample with
    /// its offset from the first sample's input added: `kh * kw` rows of
    /// `samples * oh * ow`.
    pub(super) offs: Vec<i32>,
    /// Their validity.
    pub(super) valid: Vec<i32>,
}

/// The [`SampleTables`] of `ge` from its single band's `tables`, when
/// taking several samples improves the column panels' fill enough to pay
/// for the copy out (and the offsets fit an `i32`).
pub(super) fn sample_tables(ge: &Geom, tables: Option<&BandTables>) -> Option<SampleTables> {
    const PANEL: usize = 32;
    // Columns of one product at most (its output block stays in L2).
    const MAX_COLS: usize = 2048;
    let [(0, r1, offs, valid)] = tables?.as_slice() else {
        return None;
    };
    let l = ge.l();
    if *r1 != ge.oh || l == 0 || l.is_multiple_of(PANEL) {
        return None;
    }
    let waste = |s: usize| (s * l).div_ceil(PANEL) * PANEL - s * l;
    // The copy out costs a few cycles per 16 outputs; one sample's idle
    // columns cost `kg` multiply-adds each. Worth it only when those add up
    // to at least 16 per output (not for a first layer's 9-deep product).
    if waste(1) * ge.kg() < 16 * l {
        return None;
    }
    let most = (MAX_COLS / l).min(ge.n);
    // The fewest samples that fill the panels within 2%, else the best fill.
    let samples = (2..=most)
        .find(|&s| waste(s) * 50 <= s * l)
        .or_else(|| (2..=most).min_by_key(|&s| waste(s) * 1000 / (s * l)))?;
    let step = i32::try_from(ge.c.checked_mul(ge.hw())?).ok()?;
    let kk = ge.kh * ge.kw;
    let (mut mo, mut mv) = (
        Vec::with_capacity(kk * samples * l),
        Vec::with_capacity(kk * samples * l),
    );
    for t in 0..kk {
        for sample in 0..samples {
            let add = step.checked_mul(i32::try_from(sample).ok()?)?;
            for q in t * l..(t + 1) * l {
                mo.push(offs[q].checked_add(add)?);
                mv.push(valid[q]);
            }
        }
    }
    Some(SampleTables {
        samples,
        offs: mo,
        valid: mv,
    })
}

/// The value a tap-offset table entry names: `plane[offs[i]]` where `live`
/// and `valid[i]` is set, else 0 (padding, or a column past the matrix).
///
/// # Safety
/// Where `live` and `valid[i]` is set, `offs[i]` lies inside the plane.
#[inline(always)]
unsafe fn tap_value<T: Copy + Default>(plane: *const T, offs: &[i32], valid: &[i32], i: usize, live: bool) -> T {
    if live && valid[i] != 0 {
        // SAFETY: the caller's contract.
        unsafe { *plane.offset(offs[i] as isize) }
    } else {
        T::default()
    }
}

/// Writes [`ColPack`]'s panels (the arguments of [`PackB::pack`]).
pub(super) type PackFn<T> = unsafe fn(&ColPack<'_, T>, usize, usize, usize, usize, usize, usize, *mut T);

/// [`PackFn`] in plain code, panel by panel (each written in order).
///
/// # Safety
/// As [`PackB::pack`], for the packer's group of channels.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn pack_scalar<T: Num>(
    cp: &ColPack<'_, T>,
    p0: usize,
    kc: usize,
    n: usize,
    pj0: usize,
    pj1: usize,
    nr: usize,
    dst: *mut T,
) {
    for pj in pj0..pj1 {
        let panel = dst.wrapping_add((pj - pj0) * nr * kc);
        let mut at = cp.cursor(p0);
        for p in 0..kc {
            let (plane, offs, valid) = cp.row(at);
            at.next(cp.kk);
            for j in 0..nr {
                let l = pj * nr + j;
                // SAFETY: a valid entry's offset is inside the plane.
                let v = unsafe { tap_value(plane, offs, valid, l, l < n) };
                // SAFETY: the panel holds nr * kc values.
                unsafe { *panel.add(p * nr + j) = v };
            }
        }
    }
}

/// [`PackFn`] for f32 with AVX2, 8 values at a time: a masked load where
/// the 8 offsets are consecutive (a stride-1 convolution's rows), a masked
/// gather elsewhere; invalid lanes are never read. Panel by panel, so the
/// stores run in order.
///
/// # Safety
/// As [`pack_scalar`], on a CPU with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn pack_f32_avx2(
    cp: &ColPack<'_, f32>,
    p0: usize,
    kc: usize,
    n: usize,
    pj0: usize,
    pj1: usize,
    nr: usize,
    dst: *mut f32,
) {
    use std::arch::x86_64::*;
    let iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    // Panels in groups, row by row within a group: the row's setup is shared
    // (measured best at about 16, all the panels of a 14 x 14 image).
    let group = 16;
    let mut ga = pj0;
    while ga < pj1 {
        let gb = (ga + group).min(pj1);
        let mut at = cp.cursor(p0);
        for p in 0..kc {
            let (plane, offs, valid) = cp.row(at);
            let (lo, hi) = cp.reach(at);
            at.next(cp.kk);
            if cp.flat && !offs.is_empty() {
                // Offsets `first + l`: 8 lanes from l are one plain load when
                // they stay inside the input, `l` in `[safe_lo, safe_hi]`.
                let first = offs[0] as isize;
                let (safe_lo, safe_hi) = (lo - first, hi - first - 8);
                for pj in ga..gb {
                    let out = dst.wrapping_add((pj - pj0) * nr * kc + p * nr);
                    let l0 = pj * nr;
                    let full = l0 + (nr.min(n.saturating_sub(l0)) / 8) * 8;
                    let mut l = l0;
                    while l < full {
                        // SAFETY: lanes l..l + 8 of `valid` exist (below n) and of
                        // the panel row; a plain load stays inside the input
                        // (`reach`); otherwise lanes whose `valid` is 0 are masked
                        // off (never read) and the others lie inside the plane.
                        unsafe {
                            let mask = _mm256_loadu_si256(valid.as_ptr().add(l) as *const __m256i);
                            let li = l as isize;
                            let v = if li >= safe_lo && li <= safe_hi {
                                _mm256_and_ps(_mm256_loadu_ps(plane.offset(first + li)), _mm256_castsi256_ps(mask))
                            } else {
                                _mm256_maskload_ps(plane.wrapping_offset(first + li), mask)
                            };
                            _mm256_storeu_ps(out.add(l - l0), v);
                        }
                        l += 8;
                    }
                    for j in full - l0..nr {
                        let l = l0 + j;
                        // SAFETY: a valid entry's offset is inside the plane.
                        let v = unsafe { tap_value(plane, offs, valid, l, l < n) };
                        // SAFETY: the panel row holds nr values.
                        unsafe { *out.add(j) = v };
                    }
                }
                continue;
            }
            for pj in ga..gb {
                let out = dst.wrapping_add((pj - pj0) * nr * kc + p * nr);
                let l0 = pj * nr;
                // Lanes [l0, full) come 8 at a time, the rest one by one.
                let full = l0 + (nr.min(n.saturating_sub(l0)) / 8) * 8;
                let mut l = l0;
                while l < full {
                    // SAFETY: lanes l..l + 8 of `offs` and `valid` exist (below n)
                    // and of the panel row; a plain load stays inside the input
                    // (`reach`); otherwise lanes whose `valid` is 0 are masked
                    // off (never read) and the others lie inside the plane.
                    unsafe {
                        let idx = _mm256_loadu_si256(offs.as_ptr().add(l) as *const __m256i);
                        let mask = _mm256_loadu_si256(valid.as_ptr().add(l) as *const __m256i);
                        let first = *offs.get_unchecked(l);
                        let steps = _mm256_sub_epi32(idx, _mm256_set1_epi32(first));
                        let linear = _mm256_movemask_epi8(_mm256_cmpeq_epi32(steps, iota)) == -1;
                        let at = first as isize;
                        let v = if linear && at >= lo && at + 8 <= hi {
                            // Inside the input: a plain load, padding lanes cleared.
                            _mm256_and_ps(_mm256_loadu_ps(plane.offset(at)), _mm256_castsi256_ps(mask))
                        } else if linear {
                            _mm256_maskload_ps(plane.wrapping_offset(at), mask)
                        } else {
                            _mm256_mask_i32gather_ps::<4>(_mm256_setzero_ps(), plane, idx, _mm256_castsi256_ps(mask))
                        };
                        _mm256_storeu_ps(out.add(l - l0), v);
                    }
                    l += 8;
                }
                for j in full - l0..nr {
                    let l = l0 + j;
                    // SAFETY: a valid entry's offset is inside the plane.
                    let v = unsafe { tap_value(plane, offs, valid, l, l < n) };
                    // SAFETY: the panel row holds nr values.
                    unsafe { *out.add(j) = v };
                }
            }
        }
        ga = gb;
    }
}

/// The 16 values of a packer's lanes: `plane[offs[k]]` where lane `k` of
/// `lanes` is set and `valid[k]` is not 0, else 0. One load masked by the
/// validity where the offsets are consecutive (a stride-1 convolution's
/// rows within a sample: masked-off lanes are never read, and cannot
/// fault), a masked gather elsewhere.
///
/// # Safety
/// `offs` and `valid` are readable for the set lanes of `lanes` (a prefix),
/// the offsets of the valid ones lie inside the plane, and the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn load16(plane: *const f32, offs: *const i32, valid: *const i32, lanes: u16) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    if lanes == 0 {
        return _mm512_setzero_ps();
    }
    let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // SAFETY: the table reads are masked to `lanes` (lane 0 is set, so
    // `offs` is readable); the input read to the valid lanes (the contract).
    unsafe {
        let idx = _mm512_maskz_loadu_epi32(lanes, offs);
        let ok = _mm512_mask_cmpneq_epi32_mask(lanes, _mm512_maskz_loadu_epi32(lanes, valid), _mm512_setzero_si512());
        let first = *offs;
        let step = _mm512_sub_epi32(idx, _mm512_set1_epi32(first));
        if _mm512_mask_cmpeq_epi32_mask(lanes, step, iota) == lanes {
            _mm512_maskz_loadu_ps(ok, plane.wrapping_offset(first as isize))
        } else {
            _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), ok, idx, plane)
        }
    }
}

/// [`PackFn`] for f32 with AVX-512, 16 values at a time: where the 16
/// offsets are consecutive (a stride-1 convolution's rows within one
/// sample), one load masked by the validity (masked-off lanes are never
/// read, and cannot fault); elsewhere a masked gather. `nr` a multiple of
/// 16 (the AVX-512 kernels' 32), else the AVX2 packer runs.
///
/// # Safety
/// As [`pack_scalar`], on a CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn pack_f32_avx512(
    cp: &ColPack<'_, f32>,
    p0: usize,
    kc: usize,
    n: usize,
    pj0: usize,
    pj1: usize,
    nr: usize,
    dst: *mut f32,
) {
    use std::arch::x86_64::*;
    if !nr.is_multiple_of(16) {
        // SAFETY: the same contract; AVX-512F implies AVX2 here (`isa()`).
        return unsafe { pack_f32_avx2(cp, p0, kc, n, pj0, pj1, nr, dst) };
    }
    // Panels in groups, row by row within a group (as the AVX2 packer).
    let group = 16;
    let mut ga = pj0;
    while ga < pj1 {
        let gb = (ga + group).min(pj1);
        let mut at = cp.cursor(p0);
        for p in 0..kc {
            let (plane, offs, valid) = cp.row(at);
            at.next(cp.kk);
            for pj in ga..gb {
                let out = dst.wrapping_add((pj - pj0) * nr * kc + p * nr);
                for j in (0..nr).step_by(16) {
                    let l = pj * nr + j;
                    let live = n.saturating_sub(l).min(16);
                    let lanes = ((1u32 << live) - 1) as u16;
                    // SAFETY: the tables hold the `live` lanes from l (below
                    // n), the valid offsets lie inside the plane, and the panel
                    // row holds nr values from `out`.
                    unsafe {
                        let v = load16(
                            plane,
                            offs.as_ptr().wrapping_add(l),
                            valid.as_ptr().wrapping_add(l),
                            lanes,
                        );
                        _mm512_storeu_ps(out.add(j), v);
                    }
                }
            }
        }
        ga = gb;
    }
}

/// The transposed column matrix of one group of one sample for a band of
/// output rows (`lt x kg`: row `q` holds what output position `q` reads,
/// column `(c, ij)` channel `c`'s tap `ij`), packed straight into the
/// GEMM's B panels from the input through the band's [`tap_offsets`]: the
/// weight gradient's `col^T`, never written out.
pub(super) struct ColPackT<'a, T> {
    /// The group's first input plane.
    pub(super) x: *const T,
    /// Plane size.
    pub(super) hw: usize,
    /// Taps per channel (`kh * kw`).
    pub(super) kk: usize,
    /// Output positions of the band (rows, the product's depth).
    pub(super) lt: usize,
    /// [`tap_offsets`] of the band.
    pub(super) offs: &'a [i32],
    /// Their validity.
    pub(super) valid: &'a [i32],
    pub(super) pack: PackTFn<T>,
}

// SAFETY: the packer only reads the input (locked by the kernel for the
// whole call) and its own offset table.
unsafe impl<T> Sync for ColPackT<'_, T> {}

impl<T> ColPackT<'_, T> {
    /// Column `j` (channel `j / kk`, tap `j % kk`): its input plane and where
    /// its tap's rows start in the tables.
    #[inline(always)]
    fn column(&self, j: usize) -> (*const T, usize) {
        (self.x.wrapping_add(j / self.kk * self.hw), j % self.kk * self.lt)
    }
}

impl<T: Num> PackB<T> for ColPackT<'_, T> {
    unsafe fn pack(&self, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, nr: usize, dst: *mut T) {
        // SAFETY: columns below n (= kg) are channels of the group (inside
        // the input), the valid offsets point inside their planes, depth
        // [p0, p0 + kc) is inside the tables' lt rows, and the panels are
        // writable (the caller's contract).
        unsafe { (self.pack)(self, p0, kc, n, pj0, pj1, nr, dst) }
    }
}

/// Writes [`ColPackT`]'s panels (the arguments of [`PackB::pack`]).
pub(super) type PackTFn<T> = unsafe fn(&ColPackT<'_, T>, usize, usize, usize, usize, usize, usize, *mut T);

/// [`PackTFn`] in plain code.
///
/// # Safety
/// As [`PackB::pack`], for the packer's group of channels.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn pack_t_scalar<T: Num>(
    cp: &ColPackT<'_, T>,
    p0: usize,
    kc: usize,
    n: usize,
    pj0: usize,
    pj1: usize,
    nr: usize,
    dst: *mut T,
) {
    for pj in pj0..pj1 {
        let panel = dst.wrapping_add((pj - pj0) * nr * kc);
        for jj in 0..nr {
            let j = pj * nr + jj;
            let (plane, t) = cp.column(j);
            for p in 0..kc {
                let q = t + p0 + p;
                // SAFETY: a valid entry's offset is inside the plane.
                let v = unsafe { tap_value(plane, cp.offs, cp.valid, q, j < n) };
                // SAFETY: the panel holds nr * kc values.
                unsafe { *panel.add(p * nr + jj) = v };
            }
        }
    }
}

/// [`PackTFn`] for f32 with AVX-512: 16 columns by 16 depth steps at a
/// time, each column's 16 values one load masked by their validity (a
/// masked gather where the offsets are not consecutive), then a register
/// transpose. `nr` a multiple of 16, else the portable packer runs.
///
/// # Safety
/// As [`pack_t_scalar`], on a CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn pack_t_f32_avx512(
    cp: &ColPackT<'_, f32>,
    p0: usize,
    kc: usize,
    n: usize,
    pj0: usize,
    pj1: usize,
    nr: usize,
    dst: *mut f32,
) {
    use std::arch::x86_64::*;

    use super::super::gemm::transpose16;
    if !nr.is_multiple_of(16) {
        // SAFETY: the same contract.
        return unsafe { pack_t_scalar(cp, p0, kc, n, pj0, pj1, nr, dst) };
    }
    for pj in pj0..pj1 {
        let panel = dst.wrapping_add((pj - pj0) * nr * kc);
        for half in (0..nr).step_by(16) {
            let j0 = pj * nr + half;
            let cols = n.saturating_sub(j0).min(16);
            let at: [(*const f32, usize); 16] = std::array::from_fn(|r| cp.column(j0 + r));
            let mut p = 0;
            while p < kc {
                let live = (kc - p).min(16);
                let lanes = ((1u32 << live) - 1) as u16;
                let mut rows = [_mm512_setzero_ps(); 16];
                for (r, row) in rows.iter_mut().enumerate().take(cols) {
                    let (plane, t) = at[r];
                    let q = t + p0 + p;
                    // SAFETY: the tables hold the `live` depth steps from q
                    // (inside the band's lt rows); the valid offsets lie
                    // inside the plane.
                    *row = unsafe { load16(plane, cp.offs.as_ptr().add(q), cp.valid.as_ptr().add(q), lanes) };
                }
                // SAFETY: register shuffles (AVX-512F present).
                let out = unsafe { transpose16(rows) };
                for (i, v) in out.iter().enumerate().take(live) {
                    // SAFETY: depth step p + i < kc of the panel, columns half..half + 16 < nr.
                    unsafe { _mm512_storeu_ps(panel.add((p + i) * nr + half), *v) };
                }
                p += 16;
            }
        }
    }
}
