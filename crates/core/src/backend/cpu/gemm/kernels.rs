//! GEMM micro-kernels: `C[MR x NR] (+)= A_panel * B_panel` over `kc` steps,
//! with A packed as `kc` columns of `MR` values and B as `kc` rows of `NR`.
//!
//! Each instruction set has its own register tile; the accumulation order
//! over `k` is the same in all of them (one FMA chain per element), so
//! results differ across instruction sets only by FMA rounding.

/// Packing with the kernel's tile sizes as constants (so the copy loops unroll).
///
/// Both methods write through `dst`, hence `unsafe`.
pub(crate) trait Packer<T> {
    /// Packs one MR-row panel of A (see `pack_a_panel`).
    ///
    /// # Safety
    /// As `pack_a_panel`: rows `[i0, i0 + rows)` at depth `[p0, p0 + kc)` lie
    /// inside `a`, and `dst` is writable for `MR * kc` values.
    unsafe fn pack_a(a: super::Mat<T>, i0: usize, rows: usize, p0: usize, kc: usize, dst: *mut T);
    /// Packs NR-column panels `[pj0, pj1)` of B, panel `pj0` at `dst` (see `pack_b_panels`).
    ///
    /// # Safety
    /// As `pack_b_panels`: depth `[p0, p0 + kc)` and the panels' columns
    /// (below `n`) lie inside `b`, and `dst` is writable for `NR * kc` values
    /// per panel.
    #[allow(clippy::too_many_arguments)]
    unsafe fn pack_b(b: super::Mat<T>, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, dst: *mut T);
}

macro_rules! packer {
    ($k:ty, $t:ty, $mr:literal, $nr:literal) => {
        impl Packer<$t> for $k {
            unsafe fn pack_a(a: super::Mat<$t>, i0: usize, rows: usize, p0: usize, kc: usize, dst: *mut $t) {
                // SAFETY: the same contract, forwarded.
                unsafe { super::pack_a_panel::<$t, $mr>(a, i0, rows, p0, kc, dst) }
            }
            unsafe fn pack_b(b: super::Mat<$t>, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, dst: *mut $t) {
                // SAFETY: the same contract, forwarded.
                unsafe { super::pack_b_panels::<$t, $nr>(b, p0, kc, n, pj0, pj1, dst) }
            }
        }
    };
}
packer!(Generic, f32, 4, 8);
packer!(Generic, f64, 4, 8);
#[cfg(target_arch = "x86_64")]
impl<const R: usize, const V: usize> Packer<f32> for Avx512F32Tile<R, V> {
    // The tiles are 32, 48 or 64 columns wide (V = 2, 3, 4: the kernels' aliases).
    unsafe fn pack_a(a: super::Mat<f32>, i0: usize, rows: usize, p0: usize, kc: usize, dst: *mut f32) {
        if rows == R && a.cs == 1 {
            // SAFETY: R rows of kc elements are inside A; dst holds R * kc.
            unsafe { x86::pack_a_f32::<R>(a.ptr.add(i0 * a.rs + p0), a.rs, kc, dst) }
        } else {
            // SAFETY: this method's contract, forwarded.
            unsafe { super::pack_a_panel::<f32, R>(a, i0, rows, p0, kc, dst) }
        }
    }
    unsafe fn pack_b(b: super::Mat<f32>, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, dst: *mut f32) {
        if b.rs == 1 && b.cs != 1 {
            // Column-major B (a transposed view): transpose 16 columns at a time.
            // SAFETY: the AVX-512 kernel is only chosen on CPUs with AVX-512F.
            return unsafe {
                match V {
                    2 => pack_b_transposed::<32, 16>(b, p0, kc, n, pj0, pj1, dst, x86::pack_rows_f32_16),
                    3 => pack_b_transposed::<48, 16>(b, p0, kc, n, pj0, pj1, dst, x86::pack_rows_f32_16),
                    _ => pack_b_transposed::<64, 16>(b, p0, kc, n, pj0, pj1, dst, x86::pack_rows_f32_16),
                }
            };
        }
        if b.cs == 1 && n >= pj1 * 16 * V {
            // Row-major B, full panels only: 16 V contiguous values per row and panel.
            // SAFETY: rows p0..p0 + kc and columns up to pj1 * 16 V are inside B;
            // dst holds 16 V * kc values per panel.
            unsafe { x86::pack_b_f32_rows::<V>(b.ptr.add(p0 * b.rs), b.rs, kc, pj0, pj1, dst) };
            return;
        }
        // SAFETY: this method's contract, forwarded.
        unsafe {
            match V {
                2 => super::pack_b_panels::<f32, 32>(b, p0, kc, n, pj0, pj1, dst),
                3 => super::pack_b_panels::<f32, 48>(b, p0, kc, n, pj0, pj1, dst),
                _ => super::pack_b_panels::<f32, 64>(b, p0, kc, n, pj0, pj1, dst),
            }
        }
    }
}
#[cfg(target_arch = "x86_64")]
packer!(Avx512F64, f64, 12, 16);
#[cfg(target_arch = "x86_64")]
impl Packer<f32> for Avx2F32 {
    unsafe fn pack_a(a: super::Mat<f32>, i0: usize, rows: usize, p0: usize, kc: usize, dst: *mut f32) {
        if rows == 6 && a.cs == 1 {
            // SAFETY: 6 rows of kc elements are inside A; dst holds 6 * kc; the
            // AVX2 kernel is only chosen on CPUs with AVX2.
            unsafe { x86::pack_a_f32_6(a.ptr.add(i0 * a.rs + p0), a.rs, kc, dst) }
        } else {
            // SAFETY: this method's contract, forwarded.
            unsafe { super::pack_a_panel::<f32, 6>(a, i0, rows, p0, kc, dst) }
        }
    }
    unsafe fn pack_b(b: super::Mat<f32>, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, dst: *mut f32) {
        if b.rs == 1 && b.cs != 1 {
            // Column-major B (a transposed view, as in `x @ w.t()`): transpose 8 columns at a time.
            // SAFETY: the AVX2 kernel is only chosen on CPUs with AVX2.
            return unsafe { pack_b_transposed::<16, 8>(b, p0, kc, n, pj0, pj1, dst, x86::pack_rows_f32_8) };
        }
        // SAFETY: this method's contract, forwarded.
        unsafe { super::pack_b_panels::<f32, 16>(b, p0, kc, n, pj0, pj1, dst) }
    }
}
#[cfg(target_arch = "x86_64")]
packer!(Avx2F64, f64, 6, 8);

/// Packs the `NR`-column panels `[pj0, pj1)` of a column-major B (`b.rs == 1`,
/// panel `pj0` at `dst`; see `pack_b_panels`): full panels `W` columns at a
/// time with `rows`, a transposing copy (`rows(src, ld, kc, dst, stride)`
/// writes `dst[p * stride + r] = src[r * ld + p]` for `r < W`), the partial
/// last panel with the scalar packer.
///
/// # Safety
/// The CPU supports `rows`'s instruction set, and the contract of
/// `Packer::pack_b` holds (the panels lie inside `b`, `dst` holds them).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn pack_b_transposed<const NR: usize, const W: usize>(
    b: super::Mat<f32>,
    p0: usize,
    kc: usize,
    n: usize,
    pj0: usize,
    pj1: usize,
    dst: *mut f32,
    rows: unsafe fn(*const f32, usize, usize, *mut f32, usize),
) {
    for pj in pj0..pj1 {
        let j0 = pj * NR;
        let panel = dst.wrapping_add((pj - pj0) * NR * kc);
        if NR <= n - j0 {
            for part in 0..NR / W {
                // SAFETY: W columns of kc elements are inside B; the panel holds
                // NR * kc; the CPU supports `rows` (the caller's contract).
                unsafe {
                    rows(
                        b.ptr.add((j0 + W * part) * b.cs + p0),
                        b.cs,
                        kc,
                        panel.add(W * part),
                        NR,
                    )
                }
            }
        } else {
            // SAFETY: the caller's contract: panel pj lies inside `b` and at `panel` in `dst`.
            unsafe { super::pack_b_panels::<f32, NR>(b, p0, kc, n, pj, pj + 1, panel) };
        }
    }
}

/// A micro-kernel for element type `T`.
pub(crate) trait MicroKernel<T>: Packer<T> + Sync {
    /// Rows of the register tile.
    const MR: usize;
    /// Columns of the register tile.
    const NR: usize;
    /// The tile rows the depth blocking is derived from (`plan::blocking`):
    /// the CPU's best tile's for kernels with variants, so that they all
    /// block alike and give the same bits.
    fn depth_mr() -> usize {
        Self::MR
    }
    /// Whether the kernel runs in the BLIS loop order (`b_resident.rs`: a B
    /// panel in L1, A streaming from L2) rather than with an A panel in L1
    /// and B streaming from L2 (`gemm_with`). Chosen per kernel by measurement.
    const B_RESIDENT: bool = true;
    /// Computes the tile. `c` points to a full `MR x NR` tile with row stride `ldc`.
    ///
    /// # Safety
    /// `a` holds `kc * MR`, `b` holds `kc * NR` elements; `c` is writable for the tile;
    /// the CPU supports the kernel's instruction set.
    unsafe fn run(kc: usize, a: *const T, b: *const T, c: *mut T, ldc: usize, accumulate: bool);
    /// Whether [`MicroKernel::run_strided`] reads its panels in place at
    /// full speed, so the loops may skip packing a row-major B or a
    /// column-major A with short columns (`gemm_with`).
    const IN_PLACE: bool = false;
    /// As [`MicroKernel::run`] with A's `MR x kc` panel read through the
    /// view `a` (row `i`, step `p` at `a.ptr + i * a.rs + p * a.cs`: in
    /// place from a column-major or a row-major A) and B's `kc` rows of
    /// `NR` values `ldb` apart (in place from a row-major B). This default
    /// copies them into packed panels first; kernels with
    /// [`MicroKernel::IN_PLACE`] read them directly.
    ///
    /// # Safety
    /// As `run`, with `a` readable for `MR` rows by `kc` steps and `b` for
    /// `kc` rows of `NR` values `ldb` apart.
    #[allow(clippy::too_many_arguments)]
    unsafe fn run_strided(
        kc: usize,
        a: super::Mat<T>,
        (b, ldb): (*const T, usize),
        c: *mut T,
        ldc: usize,
        accumulate: bool,
    ) where
        T: Copy,
    {
        let mr = Self::MR;
        // SAFETY: row i < MR, step p < kc of the panel (the contract).
        let ap: Vec<T> = (0..kc * mr)
            .map(|x| unsafe { *a.ptr.add(x % mr * a.rs + x / mr * a.cs) })
            .collect();
        let gather = |src: *const T, ld: usize, w: usize| -> Vec<T> {
            // SAFETY: step p < kc of the panel holds w values (the contract).
            (0..kc * w).map(|i| unsafe { *src.add(i / w * ld + i % w) }).collect()
        };
        let bp = gather(b, ldb, Self::NR);
        // SAFETY: `ap` / `bp` hold the packed kc x MR / kc x NR panels; the rest is the contract.
        unsafe { Self::run(kc, ap.as_ptr(), bp.as_ptr(), c, ldc, accumulate) }
    }
}

/// Portable fallback: 4 x 8 tile in plain arithmetic.
pub(crate) struct Generic;

macro_rules! generic_kernel {
    ($t:ty) => {
        impl MicroKernel<$t> for Generic {
            const MR: usize = 4;
            const NR: usize = 8;
            unsafe fn run(kc: usize, a: *const $t, b: *const $t, c: *mut $t, ldc: usize, accumulate: bool) {
                let mut acc = [[0 as $t; 8]; 4];
                for p in 0..kc {
                    for i in 0..4 {
                        // SAFETY: per the contract.
                        let av = unsafe { *a.add(p * 4 + i) };
                        for j in 0..8 {
                            // SAFETY: per the contract, `b` holds the 8-wide packed panel of kc rows, and p < kc, j <
                            // 8.
                            acc[i][j] = av.mul_add(unsafe { *b.add(p * 8 + j) }, acc[i][j]);
                        }
                    }
                }
                for i in 0..4 {
                    for j in 0..8 {
                        // SAFETY: per the contract.
                        unsafe {
                            let d = c.add(i * ldc + j);
                            *d = if accumulate { *d + acc[i][j] } else { acc[i][j] };
                        }
                    }
                }
            }
        }
    };
}
generic_kernel!(f32);
generic_kernel!(f64);

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::*;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::MicroKernel;

    /// The scalar end of a transposing packer: `dst[p * stride + r] =
    /// src[r * ld + p]` for `r < rows` and `p` in `depths` (the depths that
    /// do not fill a whole register transpose).
    ///
    /// # Safety
    /// The rows are readable at those depths and `dst` writable there.
    #[inline(always)]
    unsafe fn transpose_tail(
        src: *const f32,
        ld: usize,
        rows: usize,
        depths: std::ops::Range<usize>,
        dst: *mut f32,
        stride: usize,
    ) {
        for p in depths {
            for r in 0..rows {
                // SAFETY: per the contract.
                unsafe { *dst.add(p * stride + r) = *src.add(r * ld + p) };
            }
        }
    }

    /// AVX-512 f32: `R x 16 V` tiles (`R V` zmm accumulators, at most 28).
    /// Every element's FMA chain over `k` is the same whatever the tile, so
    /// are the bits: the tile is chosen per CPU and per product for speed only.
    pub(crate) struct Avx512F32Tile<const R: usize, const V: usize>;

    /// The AVX-512 f32 kernel for CPUs issuing one 512-bit FMA per cycle
    /// (AMD Zen 4): 12 x 32 tiles.
    pub(crate) type Avx512F32 = Avx512F32Tile<12, 2>;

    /// The 12 x 32 kernel's variant for products whose rows fill 8-row tiles
    /// better than 12-row ones (64 rows: 8 tiles, not 6 with a third of the
    /// last one idle).
    pub(crate) type Avx512F32R8 = Avx512F32Tile<8, 2>;

    /// The AVX-512 f32 kernel for CPUs issuing two 512-bit FMAs per cycle
    /// (Intel Xeon since Skylake-SP, AMD Zen 5): 6 x 64 tiles, 10 loads per
    /// 24 FMAs against the 12 x 32 tile's 14, which starve the second FMA port.
    pub(crate) type Avx512F32W64 = Avx512F32Tile<6, 4>;

    /// The two-FMA-port kernel's variant for products whose columns fill
    /// 48-column tiles better than 64-column ones (96 columns: two full
    /// tiles, against two 64-column ones a quarter idle): 8 x 48 tiles.
    pub(crate) type Avx512F32W48 = Avx512F32Tile<8, 3>;

    impl<const R: usize, const V: usize> MicroKernel<f32> for Avx512F32Tile<R, V> {
        const MR: usize = R;
        const NR: usize = 16 * V;
        fn depth_mr() -> usize {
            super::super::plan::f32_depth_mr()
        }
        // Measured with the A panel in L1: 12 x 32 at 95% of peak on Zen 4, 6 x 64 at 91-93% on an Ice Lake Xeon.
        const B_RESIDENT: bool = false;
        const IN_PLACE: bool = true;
        unsafe fn run(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
            // SAFETY: forwarded contract.
            unsafe { avx512_f32::<false, R, V>(kc, (a, 1, R), (b, 16 * V), c, ldc, accumulate) }
        }
        unsafe fn run_strided(
            kc: usize,
            a: super::super::Mat<f32>,
            b: (*const f32, usize),
            c: *mut f32,
            ldc: usize,
            accumulate: bool,
        ) {
            // SAFETY: forwarded contract.
            unsafe { avx512_f32::<true, R, V>(kc, (a.ptr, a.rs, a.cs), b, c, ldc, accumulate) }
        }
    }

    /// The `R x 16 V` tile over `kc` steps: A's row `i`, step `p` at
    /// `a + i * ra + p * ca` and B's rows of `16 V` values `ldb` apart (`(1,
    /// R)` and `16 V` in packed panels; `STRIDED` for panels read in place).
    /// Each step prefetches the B rows 8 steps ahead, every cache line of them.
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512_f32<const STRIDED: bool, const R: usize, const V: usize>(
        kc: usize,
        (a, ra, ca): (*const f32, usize, usize),
        (b, ldb): (*const f32, usize),
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        let (ra, ca, ldb) = if STRIDED { (ra, ca, ldb) } else { (1, R, 16 * V) };
        // SAFETY: the caller upholds this function's contract (`a` holds R rows by kc steps at those strides, `b`
        // kc rows of 16 V values `ldb` apart, `c` the R x 16 V tile with row stride `ldc`) and the target feature
        // was detected at runtime. The prefetches only hint (they never fault).
        unsafe {
            for i in 0..R {
                for v in 0..V {
                    _mm_prefetch::<_MM_HINT_T0>(c.add(i * ldc + 16 * v) as *const i8);
                }
            }
            let mut acc = [[_mm512_setzero_ps(); V]; R];
            let (mut a, mut b) = (a, b);
            let step = |acc: &mut [[__m512; V]; R], a: *const f32, b: *const f32| {
                let ahead = b.wrapping_add(8 * ldb);
                for v in 0..V {
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(16 * v) as *const i8);
                }
                let bv: [__m512; V] = std::array::from_fn(|v| _mm512_loadu_ps(b.add(16 * v)));
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_ps(*a.add(i * ra));
                    for (x, bx) in row.iter_mut().zip(&bv) {
                        *x = _mm512_fmadd_ps(ai, *bx, *x);
                    }
                }
            };
            // Two k steps per iteration (fewer loop uops per FMA); same FMA order.
            for _ in 0..kc / 2 {
                step(&mut acc, a, b);
                step(&mut acc, a.wrapping_add(ca), b.wrapping_add(ldb));
                a = a.wrapping_add(2 * ca);
                b = b.wrapping_add(2 * ldb);
            }
            if kc % 2 == 1 {
                step(&mut acc, a, b);
            }
            for (i, row) in acc.iter().enumerate() {
                let cp = c.add(i * ldc);
                for (v, x) in row.iter().enumerate() {
                    let mut x = *x;
                    if accumulate {
                        x = _mm512_add_ps(x, _mm512_loadu_ps(cp.add(16 * v)));
                    }
                    _mm512_storeu_ps(cp.add(16 * v), x);
                }
            }
        }
    }

    /// Packs `R` rows (`lda` apart, unit stride; `R` at most 16) of `kc`
    /// values into an `R`-row panel (`dst[p * R + r] = a[r * lda + p]`)
    /// with 16 x 16 register transposes.
    ///
    /// # Safety
    /// The rows are readable, `dst` holds `R * kc` values, the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn pack_a_f32<const R: usize>(a: *const f32, lda: usize, kc: usize, dst: *mut f32) {
        // SAFETY: this function's contract: R readable rows of kc values `lda` apart, `dst` holds R * kc values,
        // AVX-512F present.
        unsafe {
            let full = kc - kc % 16;
            let mask = ((1u32 << R) - 1) as u16;
            let mut p = 0;
            while p < full {
                let mut r: [__m512; 16] = [_mm512_setzero_ps(); 16];
                for (i, v) in r.iter_mut().enumerate().take(R) {
                    *v = _mm512_loadu_ps(a.add(i * lda + p));
                }
                let cols = transpose16(r);
                for (q, col) in cols.iter().enumerate() {
                    _mm512_mask_storeu_ps(dst.add((p + q) * R), mask, *col);
                }
                p += 16;
            }
            transpose_tail(a, lda, R, full..kc, dst, R);
        }
    }

    /// Packs the `16 V`-column panels `[pj0, pj1)` of `kc` rows of a
    /// row-major B (`ldb` apart), panel `pj0` first:
    /// `dst[(pj - pj0) * 16 V * kc + p * 16 V + j] = b[p * ldb + pj * 16 V + j]`.
    ///
    /// # Safety
    /// The rows and panels are readable, `dst` is writable for the panels, AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn pack_b_f32_rows<const V: usize>(
        b: *const f32,
        ldb: usize,
        kc: usize,
        pj0: usize,
        pj1: usize,
        dst: *mut f32,
    ) {
        let nr = 16 * V;
        // SAFETY: this function's contract: kc readable rows `ldb` apart covering panels [pj0, pj1), `dst` writable
        // for those panels, AVX-512F present.
        unsafe {
            for p in 0..kc {
                let row = b.add(p * ldb);
                for pj in pj0..pj1 {
                    let out = dst.add((pj - pj0) * nr * kc + p * nr);
                    for v in 0..V {
                        _mm512_storeu_ps(out.add(16 * v), _mm512_loadu_ps(row.add(pj * nr + 16 * v)));
                    }
                }
            }
        }
    }

    /// Writes 16 rows (`ld` apart, unit stride) of `kc` values transposed:
    /// `dst[p * stride + r] = src[r * ld + p]` for r < 16.
    ///
    /// # Safety
    /// The rows are readable, `dst` is writable for `kc` rows of `stride`, AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn pack_rows_f32_16(src: *const f32, ld: usize, kc: usize, dst: *mut f32, stride: usize) {
        // SAFETY: this function's contract: 16 readable rows of kc values `ld` apart, `dst` writable for kc rows of
        // `stride`, AVX-512F present.
        unsafe {
            let full = kc - kc % 16;
            let mut p = 0;
            while p < full {
                let r: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(src.add(i * ld + p)));
                let cols = transpose16(r);
                for (q, col) in cols.iter().enumerate() {
                    _mm512_storeu_ps(dst.add((p + q) * stride), *col);
                }
                p += 16;
            }
            transpose_tail(src, ld, 16, full..kc, dst, stride);
        }
    }

    /// Transposes a 16 x 16 block held as 16 row vectors into 16 column vectors.
    #[inline(always)]
    pub(crate) unsafe fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
        // SAFETY: register-only shuffles; the caller runs with AVX-512F (this is only called from AVX-512 functions).
        unsafe {
            let mut t = [_mm512_setzero_ps(); 16];
            for i in 0..8 {
                t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
            }
            let mut u = [_mm512_setzero_ps(); 16];
            for g in 0..4 {
                let b = 4 * g;
                u[b] = _mm512_shuffle_ps::<0x44>(t[b], t[b + 2]);
                u[b + 1] = _mm512_shuffle_ps::<0xEE>(t[b], t[b + 2]);
                u[b + 2] = _mm512_shuffle_ps::<0x44>(t[b + 1], t[b + 3]);
                u[b + 3] = _mm512_shuffle_ps::<0xEE>(t[b + 1], t[b + 3]);
            }
            let mut v = [_mm512_setzero_ps(); 16];
            for h in 0..2 {
                let (b, o) = (8 * h, 8 * h);
                for j in 0..4 {
                    v[o + j] = _mm512_shuffle_f32x4::<0x88>(u[b + j], u[b + 4 + j]);
                    v[o + 4 + j] = _mm512_shuffle_f32x4::<0xDD>(u[b + j], u[b + 4 + j]);
                }
            }
            let mut w = [_mm512_setzero_ps(); 16];
            for j in 0..8 {
                w[j] = _mm512_shuffle_f32x4::<0x88>(v[j], v[8 + j]);
                w[8 + j] = _mm512_shuffle_f32x4::<0xDD>(v[j], v[8 + j]);
            }
            w
        }
    }

    /// AVX-512 f64: 12 x 16 tile.
    pub(crate) struct Avx512F64;

    impl MicroKernel<f64> for Avx512F64 {
        const MR: usize = 12;
        const NR: usize = 16;
        const B_RESIDENT: bool = false;
        unsafe fn run(kc: usize, a: *const f64, b: *const f64, c: *mut f64, ldc: usize, accumulate: bool) {
            // SAFETY: forwarded contract.
            unsafe { avx512_f64(kc, a, b, c, ldc, accumulate) }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn avx512_f64(kc: usize, a: *const f64, b: *const f64, c: *mut f64, ldc: usize, accumulate: bool) {
        // SAFETY: the caller upholds this function's contract (packed 12 x kc and kc x 16 panels, a 12 x 16 tile of C
        // with row stride `ldc`) and the target feature was detected at runtime.
        unsafe {
            let mut acc = [[_mm512_setzero_pd(); 2]; 12];
            let (mut a, mut b) = (a, b);
            for _ in 0..kc {
                let b0 = _mm512_loadu_pd(b);
                let b1 = _mm512_loadu_pd(b.add(8));
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_pd(*a.add(i));
                    row[0] = _mm512_fmadd_pd(ai, b0, row[0]);
                    row[1] = _mm512_fmadd_pd(ai, b1, row[1]);
                }
                a = a.add(12);
                b = b.add(16);
            }
            for (i, row) in acc.iter().enumerate() {
                let cp = c.add(i * ldc);
                let (mut v0, mut v1) = (row[0], row[1]);
                if accumulate {
                    v0 = _mm512_add_pd(v0, _mm512_loadu_pd(cp));
                    v1 = _mm512_add_pd(v1, _mm512_loadu_pd(cp.add(8)));
                }
                _mm512_storeu_pd(cp, v0);
                _mm512_storeu_pd(cp.add(8), v1);
            }
        }
    }

    /// AVX2 f32: 6 x 16 tile (12 ymm accumulators).
    pub(crate) struct Avx2F32;

    impl MicroKernel<f32> for Avx2F32 {
        const MR: usize = 6;
        const NR: usize = 16;
        unsafe fn run(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
            // SAFETY: forwarded contract.
            unsafe { avx2_f32(kc, a, b, c, ldc, accumulate) }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_f32(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        // SAFETY: the caller upholds this function's contract (packed 6 x kc and kc x 16 panels, a 6 x 16 tile of C
        // with row stride `ldc`) and AVX2 + FMA were detected at runtime.
        unsafe {
            // The tile of C is read and written after the k loop: fetch it now.
            for i in 0..6 {
                _mm_prefetch::<_MM_HINT_T0>(c.add(i * ldc) as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(c.add(i * ldc + 15) as *const i8);
            }
            let mut acc = [[_mm256_setzero_ps(); 2]; 6];
            let (mut a, mut b) = (a, b);
            let step = |acc: &mut [[__m256; 2]; 6], a: *const f32, b: *const f32| {
                let b0 = _mm256_loadu_ps(b);
                let b1 = _mm256_loadu_ps(b.add(8));
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai = _mm256_broadcast_ss(&*a.add(i));
                    row[0] = _mm256_fmadd_ps(ai, b0, row[0]);
                    row[1] = _mm256_fmadd_ps(ai, b1, row[1]);
                }
            };
            // Four k steps per iteration (fewer loop uops per FMA); same FMA order.
            for _ in 0..kc / 4 {
                for s in 0..4 {
                    step(&mut acc, a.add(6 * s), b.add(16 * s));
                }
                a = a.add(24);
                b = b.add(64);
            }
            for _ in 0..kc % 4 {
                step(&mut acc, a, b);
                a = a.add(6);
                b = b.add(16);
            }
            for (i, row) in acc.iter().enumerate() {
                let cp = c.add(i * ldc);
                let (mut v0, mut v1) = (row[0], row[1]);
                if accumulate {
                    v0 = _mm256_add_ps(v0, _mm256_loadu_ps(cp));
                    v1 = _mm256_add_ps(v1, _mm256_loadu_ps(cp.add(8)));
                }
                _mm256_storeu_ps(cp, v0);
                _mm256_storeu_ps(cp.add(8), v1);
            }
        }
    }

    /// Packs 6 rows (`lda` apart, unit stride) of `kc` values into a 6-row
    /// panel (`dst[p * 6 + r] = a[r * lda + p]`) with 8 x 8 register transposes.
    ///
    /// # Safety
    /// The rows are readable, `dst` holds `6 * kc` values, the CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn pack_a_f32_6(a: *const f32, lda: usize, kc: usize, dst: *mut f32) {
        // SAFETY: this function's contract: 6 readable rows of kc values `lda` apart, `dst` holds 6 * kc values, AVX2
        // present.
        unsafe {
            let full = kc - kc % 8;
            let mut p = 0;
            while p < full {
                let zero = _mm256_setzero_ps();
                let r: [__m256; 8] = std::array::from_fn(|i| {
                    if i < 6 {
                        _mm256_loadu_ps(a.add(i * lda + p))
                    } else {
                        zero
                    }
                });
                // Column q holds the 6 rows' values at depth p + q (and two zeros).
                let col = transpose8(r);
                // Each 8-wide store's last two lanes are overwritten by the next
                // column's store; the last column stores exactly 6 values.
                let out = dst.add(p * 6);
                for (q, c) in col.iter().enumerate().take(7) {
                    _mm256_storeu_ps(out.add(q * 6), *c);
                }
                _mm_storeu_ps(out.add(42), _mm256_castps256_ps128(col[7]));
                _mm_storel_epi64(
                    out.add(46) as *mut __m128i,
                    _mm_castps_si128(_mm256_extractf128_ps::<1>(col[7])),
                );
                p += 8;
            }
            transpose_tail(a, lda, 6, full..kc, dst, 6);
        }
    }

    /// Writes 8 rows (`ld` apart, unit stride) of `kc` values transposed:
    /// `dst[p * stride + r] = src[r * ld + p]` for r < 8.
    ///
    /// # Safety
    /// The rows are readable, `dst` is writable for `kc` rows of `stride`, AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn pack_rows_f32_8(src: *const f32, ld: usize, kc: usize, dst: *mut f32, stride: usize) {
        // SAFETY: this function's contract: 8 readable rows of kc values `ld` apart, `dst` writable for kc rows of
        // `stride`, AVX2 present.
        unsafe {
            let full = kc - kc % 8;
            let mut p = 0;
            while p < full {
                let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(src.add(i * ld + p)));
                for (q, col) in transpose8(r).iter().enumerate() {
                    _mm256_storeu_ps(dst.add((p + q) * stride), *col);
                }
                p += 8;
            }
            transpose_tail(src, ld, 8, full..kc, dst, stride);
        }
    }

    /// Transposes an 8 x 8 block held as 8 row vectors into 8 column vectors.
    #[inline(always)]
    pub(crate) unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
        // SAFETY: register-only shuffles; the caller runs with AVX2 (this is only called from AVX2 functions).
        unsafe {
            let t: [__m256; 8] = std::array::from_fn(|i| {
                let (x, y) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
                if i % 2 == 0 {
                    _mm256_unpacklo_ps(x, y)
                } else {
                    _mm256_unpackhi_ps(x, y)
                }
            });
            // u[4g + 2h + s]: pairs (t[4g + h], t[4g + h + 2]), low (s = 0) or high halves.
            let u: [__m256; 8] = std::array::from_fn(|i| {
                let (g, h, s) = (i / 4, i / 2 % 2, i % 2);
                let (x, y) = (t[4 * g + h], t[4 * g + h + 2]);
                if s == 0 {
                    _mm256_shuffle_ps::<0x44>(x, y)
                } else {
                    _mm256_shuffle_ps::<0xEE>(x, y)
                }
            });
            std::array::from_fn(|q| {
                let (x, y) = (u[q % 4], u[q % 4 + 4]);
                if q < 4 {
                    _mm256_permute2f128_ps::<0x20>(x, y)
                } else {
                    _mm256_permute2f128_ps::<0x31>(x, y)
                }
            })
        }
    }

    /// AVX2 f64: 6 x 8 tile.
    pub(crate) struct Avx2F64;

    impl MicroKernel<f64> for Avx2F64 {
        const MR: usize = 6;
        const NR: usize = 8;
        unsafe fn run(kc: usize, a: *const f64, b: *const f64, c: *mut f64, ldc: usize, accumulate: bool) {
            // SAFETY: forwarded contract.
            unsafe { avx2_f64(kc, a, b, c, ldc, accumulate) }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_f64(kc: usize, a: *const f64, b: *const f64, c: *mut f64, ldc: usize, accumulate: bool) {
        // SAFETY: the caller upholds this function's contract (packed 6 x kc and kc x 8 panels, a 6 x 8 tile of C with
        // row stride `ldc`) and AVX2 + FMA were detected at runtime.
        unsafe {
            let mut acc = [[_mm256_setzero_pd(); 2]; 6];
            let (mut a, mut b) = (a, b);
            for _ in 0..kc {
                let b0 = _mm256_loadu_pd(b);
                let b1 = _mm256_loadu_pd(b.add(4));
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai = _mm256_broadcast_sd(&*a.add(i));
                    row[0] = _mm256_fmadd_pd(ai, b0, row[0]);
                    row[1] = _mm256_fmadd_pd(ai, b1, row[1]);
                }
                a = a.add(6);
                b = b.add(8);
            }
            for (i, row) in acc.iter().enumerate() {
                let cp = c.add(i * ldc);
                let (mut v0, mut v1) = (row[0], row[1]);
                if accumulate {
                    v0 = _mm256_add_pd(v0, _mm256_loadu_pd(cp));
                    v1 = _mm256_add_pd(v1, _mm256_loadu_pd(cp.add(4)));
                }
                _mm256_storeu_pd(cp, v0);
                _mm256_storeu_pd(cp.add(4), v1);
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    /// The AVX-512 `R`-row A packer against the scalar one.
    fn check_pack_a<const R: usize>() {
        let (lda, kc) = (53, 37);
        let a: Vec<f32> = (0..R * lda).map(|i| i as f32).collect();
        // One guard value past the panel: the packer must not write it.
        let mut fast = vec![-1f32; R * kc + 1];
        let mut slow = vec![-1f32; R * kc + 1];
        // SAFETY: the caller checked AVX-512F; rows 0..R of `a` from column 3 hold kc values each (lda = 53 >= 3 +
        // kc), and `fast` holds R * kc + 1 values.
        unsafe { super::x86::pack_a_f32::<R>(a.as_ptr().add(3), lda, kc, fast.as_mut_ptr()) };
        let m = super::super::Mat {
            ptr: a.as_ptr(),
            rs: lda,
            cs: 1,
        };
        // SAFETY: rows 0..R from column 3 hold kc values each; `slow` holds R * kc + 1.
        unsafe { super::super::pack_a_panel::<f32, R>(m, 0, R, 3, kc, slow.as_mut_ptr()) };
        assert_eq!(fast, slow, "{R} rows");
    }

    #[test]
    fn simd_pack_matches_scalar_pack() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("SKIPPED: this CPU has no avx512f; the avx512f packer is not tested here");
            return;
        }
        check_pack_a::<12>();
        check_pack_a::<8>();
    }

    #[test]
    fn avx2_pack_matches_scalar_pack() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("SKIPPED: this CPU has no avx2; the avx2 packer is not tested here");
            return;
        }
        for kc in [1, 7, 8, 37, 256] {
            let (rows, lda) = (6, 301);
            let a: Vec<f32> = (0..rows * lda).map(|i| i as f32).collect();
            // One guard value past the panel: the packer must not write it.
            let mut fast = vec![-1f32; 6 * kc + 1];
            let mut slow = vec![-1f32; 6 * kc + 1];
            // SAFETY: AVX2 was detected above; rows 0..6 of `a` from column 5 hold kc values each (lda = 301 >= 5 +
            // kc), and `fast` holds 6 * kc + 1 values.
            unsafe { super::x86::pack_a_f32_6(a.as_ptr().add(5), lda, kc, fast.as_mut_ptr()) };
            let m = super::super::Mat {
                ptr: a.as_ptr(),
                rs: lda,
                cs: 1,
            };
            // SAFETY: rows 0..6 from column 5 hold kc values each; `slow` holds 6 * kc + 1.
            unsafe { super::super::pack_a_panel::<f32, 6>(m, 0, 6, 5, kc, slow.as_mut_ptr()) };
            assert_eq!(fast, slow, "kc = {kc}");
            assert_eq!(fast[6 * kc], -1.0);
        }
    }

    #[test]
    fn avx2_column_pack_matches_scalar_pack() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("SKIPPED: this CPU has no avx2; the avx2 packer is not tested here");
            return;
        }
        for kc in [1, 9, 16, 37] {
            // B column-major: column j at j * ld; 16 columns into one 16-wide panel.
            let ld = 53;
            let b: Vec<f32> = (0..16 * ld).map(|i| i as f32).collect();
            let mut fast = vec![-1f32; 16 * kc];
            for half in 0..2 {
                // SAFETY: AVX2 was detected above; the 8 source columns from `8 * half` hold kc values from row 2 (ld
                // = 53 >= 2 + kc), and `fast` holds 16 * kc values, written at stride 16 from column 8 * half.
                unsafe {
                    super::x86::pack_rows_f32_8(
                        b.as_ptr().add(8 * half * ld + 2),
                        ld,
                        kc,
                        fast.as_mut_ptr().add(8 * half),
                        16,
                    )
                };
            }
            let m = super::super::Mat {
                ptr: b.as_ptr(),
                rs: 1,
                cs: ld,
            };
            let mut slow = vec![-1f32; 16 * kc];
            // SAFETY: depth 2..2 + kc of the 16 columns is inside `b`; `slow` holds 16 * kc.
            unsafe { super::super::pack_b_panels::<f32, 16>(m, 2, kc, 16, 0, 1, slow.as_mut_ptr()) };
            assert_eq!(fast, slow, "kc = {kc}");
        }
    }
}
