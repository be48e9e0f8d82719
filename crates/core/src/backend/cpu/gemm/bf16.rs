//! The native bf16 product kernel for CPUs with AVX512-BF16 (`vdpbf16ps`:
//! 16 f32 lanes, each adding two bf16 products per instruction; Cooper
//! Lake, Sapphire Rapids, Zen 4 and later), run by `half::gemm`.
//!
//! The operands stay bf16 and are packed in depth pairs: A's panel holds,
//! per pair `q`, the `MR` rows' values at depths `2q` and `2q + 1` side by
//! side (one 32-bit word per row, broadcast by the kernel), and B's panel,
//! per pair, the `NR` columns' two values side by side (two vectors of 16
//! words). An odd depth is padded with a zero. `vdpbf16ps` treats
//! subnormal inputs and results as zero (as oneDNN's bf16 products, which
//! PyTorch runs, do).

use half::bf16;

use super::Mat;
use super::half::HalfKernel;

/// Rows of the register tile.
const MR: usize = 12;
/// Columns of the register tile.
const NR: usize = 32;

/// Whether this CPU runs the native bf16 product (AVX-512 chosen by
/// `isa()` and AVX512-BF16 present). `FERROTORCH_ISA=avx2|scalar` turns it
/// off, like the other AVX-512 paths.
pub(crate) fn native() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static NATIVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *NATIVE.get_or_init(|| super::isa() == super::Isa::Avx512 && std::arch::is_x86_feature_detected!("avx512bf16"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The bits of `m[i][p]`.
///
/// # Safety
/// `(i, p)` lies inside the matrix `m` views.
#[inline(always)]
unsafe fn at(m: Mat<bf16>, i: usize, p: usize) -> u16 {
    // SAFETY: the caller's contract.
    unsafe { (*m.ptr.add(i * m.rs + p * m.cs)).to_bits() }
}

/// Packs rows `[i0, i0 + rows)` (`rows <= MR`) at depth `[p0, p0 + kc)` of A
/// into one pair-interleaved panel, zero-padded:
/// `dst[(q * MR + r) * 2 + s] = A[i0 + r][p0 + 2q + s]`.
///
/// # Safety
/// The rows and depths lie inside `a`; `dst` is writable for
/// `MR * 2 * kc.div_ceil(2)` values; `native()` holds.
unsafe fn pack_a(a: Mat<bf16>, i0: usize, rows: usize, p0: usize, kc: usize, dst: *mut u16) {
    #[cfg(target_arch = "x86_64")]
    if rows == MR {
        if a.cs == 1 {
            // SAFETY: the caller's contract; native() implies AVX-512F/BW/VL.
            return unsafe { x86::pack_a_rows(a.ptr.add(i0 * a.rs + p0) as *const u16, a.rs, kc, dst) };
        }
        if a.rs == 1 {
            // SAFETY: as above.
            return unsafe { x86::pack_a_columns(a.ptr.add(i0 + p0 * a.cs) as *const u16, a.cs, kc, dst) };
        }
    }
    for q in 0..kc.div_ceil(2) {
        for r in 0..MR {
            for s in 0..2 {
                let p = 2 * q + s;
                // SAFETY: (i0 + r, p0 + p) is read only inside A; the slot is inside `dst`.
                unsafe { *dst.add((q * MR + r) * 2 + s) = if r < rows && p < kc { at(a, i0 + r, p0 + p) } else { 0 } };
            }
        }
    }
}

/// Packs depth `[p0, p0 + kc)` of the `NR`-column panels `[pj0, pj1)` of B
/// (`n` columns; the last panel zero-padded), panel `pj0` first:
/// `dst[(pj - pj0) * NR * kc2 * 2 + (q * NR + j) * 2 + s] = B[p0 + 2q + s][pj * NR + j]`
/// with `kc2 = kc.div_ceil(2)` (an odd depth's last pair padded with zero).
///
/// # Safety
/// The depths and the panels' columns below `n` lie inside `b`; `dst` is
/// writable for `NR * 2 * kc2` values per panel; `native()` holds.
#[allow(clippy::too_many_arguments)]
unsafe fn pack_b(b: Mat<bf16>, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, dst: *mut u16) {
    let kc2 = kc.div_ceil(2);
    for pj in pj0..pj1 {
        let j0 = pj * NR;
        let cols = NR.min(n - j0);
        let panel = dst.wrapping_add((pj - pj0) * NR * kc2 * 2);
        #[cfg(target_arch = "x86_64")]
        if cols == NR {
            if b.cs == 1 {
                // SAFETY: kc rows of NR columns from (p0, j0) are inside B; the panel
                // holds NR * 2 * kc2 values; native() implies AVX-512F/BW.
                unsafe { x86::pack_b_rows(b.ptr.add(p0 * b.rs + j0) as *const u16, b.rs, kc, panel) };
                continue;
            }
            if b.rs == 1 {
                // SAFETY: NR columns of kc values from (p0, j0) are inside B; as above.
                unsafe { x86::pack_b_columns(b.ptr.add(p0 + j0 * b.cs) as *const u16, b.cs, kc, panel) };
                continue;
            }
        }
        for q in 0..kc2 {
            for j in 0..NR {
                for s in 0..2 {
                    let p = 2 * q + s;
                    // SAFETY: read only inside B (p < kc, j < cols); the slot is inside the panel.
                    unsafe {
                        *panel.add((q * NR + j) * 2 + s) = if j < cols && p < kc { at(b, p0 + p, j0 + j) } else { 0 }
                    };
                }
            }
        }
    }
}

/// The AVX512-BF16 kernel: a 12 x 32 tile of `vdpbf16ps` accumulators.
pub(crate) struct Native;

impl HalfKernel<bf16> for Native {
    type P = u16;
    const MR: usize = MR;
    const NR: usize = NR;
    const WIDENS: bool = false;

    fn span(kc: usize) -> usize {
        kc.div_ceil(2) * 2
    }

    unsafe fn pack_a(a: Mat<bf16>, i0: usize, rows: usize, p0: usize, kc: usize, dst: *mut u16, _tmp: *mut f32) {
        // SAFETY: the same contract (the panel of MR * span(kc) values).
        unsafe { pack_a(a, i0, rows, p0, kc, dst) }
    }

    unsafe fn pack_b(
        b: Mat<bf16>,
        p0: usize,
        kc: usize,
        n: usize,
        pj0: usize,
        pj1: usize,
        dst: *mut u16,
        _tmp: *mut f32,
    ) {
        // SAFETY: the same contract (panels of NR * span(kc) values).
        unsafe { pack_b(b, p0, kc, n, pj0, pj1, dst) }
    }

    unsafe fn run(kc: usize, a: *const u16, b: *const u16, c: *mut f32, ldc: usize, accumulate: bool) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the same contract; the kernel takes the depth in pairs.
        unsafe {
            x86::kernel(kc.div_ceil(2), a, b, c, ldc, accumulate)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (kc, a, b, c, ldc, accumulate);
            unreachable!("the native bf16 kernel runs only where native() holds");
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{MR, NR};
    use crate::backend::cpu::gemm::kernels::transpose16;

    /// `C[12 x 32] (+)= A_panel * B_panel` over `kc2` depth pairs.
    ///
    /// # Safety
    /// `a` holds `24 * kc2` and `b` `64 * kc2` values; `c` is writable (and,
    /// with `accumulate`, readable) for 12 rows of 32 values `ldc` apart; the
    /// CPU has AVX-512F and AVX512-BF16.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn kernel(kc2: usize, a: *const u16, b: *const u16, c: *mut f32, ldc: usize, accumulate: bool) {
        // SAFETY: this function's contract covers every load and store; the
        // transmutes reinterpret 512-bit vectors (same size, any bits valid).
        unsafe {
            for i in 0..MR {
                _mm_prefetch::<_MM_HINT_T0>(c.add(i * ldc) as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(c.add(i * ldc + 16) as *const i8);
            }
            let mut acc = [[_mm512_setzero_ps(); 2]; MR];
            let (mut a, mut b) = (a, b);
            let step = |acc: &mut [[__m512; 2]; MR], a: *const u16, b: *const u16| {
                let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(b as *const __m512i));
                let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(32) as *const __m512i));
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai: __m512bh =
                        std::mem::transmute(_mm512_set1_epi32((a.add(2 * i) as *const i32).read_unaligned()));
                    row[0] = _mm512_dpbf16_ps(row[0], ai, b0);
                    row[1] = _mm512_dpbf16_ps(row[1], ai, b1);
                }
            };
            for _ in 0..kc2 / 2 {
                _mm_prefetch::<_MM_HINT_T0>(b.add(512) as *const i8);
                step(&mut acc, a, b);
                step(&mut acc, a.add(2 * MR), b.add(2 * NR));
                a = a.add(4 * MR);
                b = b.add(4 * NR);
            }
            if kc2 % 2 == 1 {
                step(&mut acc, a, b);
            }
            for (i, row) in acc.iter().enumerate() {
                let cp = c.add(i * ldc);
                let (mut v0, mut v1) = (row[0], row[1]);
                if accumulate {
                    v0 = _mm512_add_ps(v0, _mm512_loadu_ps(cp));
                    v1 = _mm512_add_ps(v1, _mm512_loadu_ps(cp.add(16)));
                }
                _mm512_storeu_ps(cp, v0);
                _mm512_storeu_ps(cp.add(16), v1);
            }
        }
    }

    /// The scalar end of the pair packers: pairs `[q0, kc.div_ceil(2))` of
    /// `lines` lines (`line(l)` points at depth 0 of line `l`, unit stride),
    /// `dst[q * stride + 2 * l + s] = line(l)[2q + s]` (0 past `kc`).
    ///
    /// # Safety
    /// Each line is readable for `kc` values; `dst` is writable there.
    #[inline(always)]
    unsafe fn pair_tail(
        lines: usize,
        line: impl Fn(usize) -> *const u16,
        q0: usize,
        kc: usize,
        dst: *mut u16,
        stride: usize,
    ) {
        for q in q0..kc.div_ceil(2) {
            for l in 0..lines {
                for s in 0..2 {
                    let p = 2 * q + s;
                    // SAFETY: the caller's contract (p < kc is read; the slot is inside dst).
                    unsafe { *dst.add(q * stride + 2 * l + s) = if p < kc { *line(l).add(p) } else { 0 } };
                }
            }
        }
    }

    /// Packs 12 rows (`lda` apart, unit stride) of `kc` bf16 values into a
    /// pair panel: each row's pair `q` is one 32-bit word, so the panel is a
    /// 32-bit transpose (16 x 16 in registers, 12 rows kept).
    ///
    /// # Safety
    /// The rows are readable for `kc` values; `dst` is writable for
    /// `24 * kc.div_ceil(2)` values; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn pack_a_rows(a: *const u16, lda: usize, kc: usize, dst: *mut u16) {
        // SAFETY: this function's contract covers the reads (full blocks of 32 values per row lie below kc) and the
        // masked 12-word stores (inside the panel).
        unsafe {
            let blocks = kc / 32;
            for blk in 0..blocks {
                let mut r = [_mm512_setzero_ps(); 16];
                for (i, v) in r.iter_mut().enumerate().take(MR) {
                    *v = _mm512_loadu_ps(a.add(i * lda + 32 * blk) as *const f32);
                }
                for (qq, col) in transpose16(r).iter().enumerate() {
                    _mm512_mask_storeu_ps(dst.add((16 * blk + qq) * 2 * MR) as *mut f32, 0x0fff, *col);
                }
            }
            pair_tail(MR, |l| a.add(l * lda), 16 * blocks, kc, dst, 2 * MR);
        }
    }

    /// Packs 12 rows of a column-major A (depth `p` at `p * lda`, rows
    /// adjacent) into a pair panel: per pair, two 12-value columns
    /// interleaved.
    ///
    /// # Safety
    /// The 12 rows are readable at the `kc` depths; `dst` is writable for
    /// `24 * kc.div_ceil(2)` values; the CPU has AVX-512F/BW/VL.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
    pub(super) unsafe fn pack_a_columns(a: *const u16, lda: usize, kc: usize, dst: *mut u16) {
        // SAFETY: the masked loads read only the 12 rows of each column below kc; the stores write 24 values per
        // pair inside the panel.
        unsafe {
            for q in 0..kc.div_ceil(2) {
                let c0 = _mm256_maskz_loadu_epi16(0x0fff, a.add(2 * q * lda) as *const i16);
                let c1 = if 2 * q + 1 < kc {
                    _mm256_maskz_loadu_epi16(0x0fff, a.add((2 * q + 1) * lda) as *const i16)
                } else {
                    _mm256_setzero_si256()
                };
                // Rows 0-3 | 8-11 and 4-7 | 12-15, each row's two depths side by side.
                let lo = _mm256_unpacklo_epi16(c0, c1);
                let hi = _mm256_unpackhi_epi16(c0, c1);
                let out = dst.add(q * 2 * MR);
                _mm256_storeu_si256(out as *mut __m256i, _mm256_permute2x128_si256::<0x20>(lo, hi));
                _mm_storeu_si128(
                    out.add(16) as *mut __m128i,
                    _mm256_castsi256_si128(_mm256_permute2x128_si256::<0x31>(lo, hi)),
                );
            }
        }
    }

    /// Packs one full 32-column panel of a row-major B (`ldb` apart):
    /// per pair, rows `2q` and `2q + 1` interleaved.
    ///
    /// # Safety
    /// `kc` rows of 32 values are readable; `dst` is writable for
    /// `64 * kc.div_ceil(2)` values; the CPU has AVX-512F/BW.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn pack_b_rows(b: *const u16, ldb: usize, kc: usize, dst: *mut u16) {
        // SAFETY: reads rows below kc (32 values each); writes 64 values per pair inside the panel.
        unsafe {
            let lo_idx = _mm512_set_epi16(
                47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2,
                33, 1, 32, 0,
            );
            let hi_idx = _mm512_set_epi16(
                63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23, 54, 22, 53, 21, 52, 20, 51, 19,
                50, 18, 49, 17, 48, 16,
            );
            for q in 0..kc.div_ceil(2) {
                let r0 = _mm512_loadu_si512(b.add(2 * q * ldb) as *const __m512i);
                let r1 = if 2 * q + 1 < kc {
                    _mm512_loadu_si512(b.add((2 * q + 1) * ldb) as *const __m512i)
                } else {
                    _mm512_setzero_si512()
                };
                let out = dst.add(q * 2 * NR);
                _mm512_storeu_si512(out as *mut __m512i, _mm512_permutex2var_epi16(r0, lo_idx, r1));
                _mm512_storeu_si512(out.add(32) as *mut __m512i, _mm512_permutex2var_epi16(r0, hi_idx, r1));
            }
        }
    }

    /// Packs one full 32-column panel of a column-major B (column `j` at
    /// `j * ldb`, depths adjacent): each column's pair is one 32-bit word,
    /// so 16 columns at a time are a 32-bit transpose.
    ///
    /// # Safety
    /// 32 columns of `kc` values are readable; `dst` is writable for
    /// `64 * kc.div_ceil(2)` values; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn pack_b_columns(b: *const u16, ldb: usize, kc: usize, dst: *mut u16) {
        // SAFETY: full blocks read 32 values below kc from each column; stores land inside the panel.
        unsafe {
            let blocks = kc / 32;
            for half in 0..2 {
                let src = b.add(16 * half * ldb);
                for blk in 0..blocks {
                    let r: [__m512; 16] =
                        std::array::from_fn(|j| _mm512_loadu_ps(src.add(j * ldb + 32 * blk) as *const f32));
                    for (qq, col) in transpose16(r).iter().enumerate() {
                        _mm512_storeu_ps(dst.add((16 * blk + qq) * 2 * NR + 32 * half) as *mut f32, *col);
                    }
                }
                pair_tail(16, |l| src.add(l * ldb), 16 * blocks, kc, dst.add(32 * half), 2 * NR);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn native_kernel_matches_the_exact_product() {
        if !super::native() {
            eprintln!("SKIPPED: this CPU has no AVX512-BF16; the native bf16 kernel is not tested here");
            return;
        }
        crate::backend::cpu::gemm::half::tests::check_kernel::<half::bf16, super::Native>();
    }
}
