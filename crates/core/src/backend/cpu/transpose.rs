//! Out-of-place transposes of f32 / f64 blocks (`dst[j][i] = src[i][j]`,
//! both with unit column stride): 16 x 16 register transposes on AVX-512,
//! 8 x 8 ones on AVX2, element by element elsewhere. Used where a kernel
//! wants the other layout of a small operand (the indirect convolution's
//! results and inputs, attention's per-head operands).

#[cfg(target_arch = "x86_64")]
use super::gemm::{transpose8, transpose16};
#[cfg(target_arch = "x86_64")]
use super::simd::{Isa, isa};
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// `dst[j * ldd + i] = src[i * lds + j]` for `i < rows`, `j < cols`, with
/// the widest register transposes this CPU has.
///
/// # Safety
/// `src` is readable for `rows` rows of `cols` values `lds` apart, `dst`
/// writable for `cols` rows of `rows` values `ldd` apart, and the two do
/// not overlap.
pub(crate) unsafe fn transpose_f32(src: *const f32, rows: usize, cols: usize, lds: usize, dst: *mut f32, ldd: usize) {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: the caller's contract; the instruction set was detected.
        Isa::Avx512 => return unsafe { transpose_avx512(src, rows, cols, lds, dst, ldd) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { transpose_avx2(src, rows, cols, lds, dst, ldd) },
        Isa::Baseline => {}
    }
    // SAFETY: the caller's contract.
    unsafe { transpose_scalar(src, rows, cols, lds, dst, ldd) }
}

/// [`transpose_f32`] element by element, for any element type.
///
/// # Safety
/// As [`transpose_f32`].
pub(crate) unsafe fn transpose_scalar<T: Copy>(
    src: *const T,
    rows: usize,
    cols: usize,
    lds: usize,
    dst: *mut T,
    ldd: usize,
) {
    // Blocks of 8 x 8 keep both sides' lines in L1.
    for i0 in (0..rows).step_by(8) {
        for j0 in (0..cols).step_by(8) {
            for i in i0..rows.min(i0 + 8) {
                for j in j0..cols.min(j0 + 8) {
                    // SAFETY: i < rows and j < cols (the caller's contract).
                    unsafe { *dst.add(j * ldd + i) = *src.add(i * lds + j) };
                }
            }
        }
    }
}

/// [`transpose_f32`] on AVX-512, in 16 x 16 register transposes
/// (masked at the edges). Blocks of 16 `dst` rows are written one after
/// the other, each sweeping along its rows (16 streams, which the hardware
/// prefetcher follows).
///
/// # Safety
/// As [`transpose_f32`], with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn transpose_avx512(
    src: *const f32,
    rows: usize,
    cols: usize,
    lds: usize,
    dst: *mut f32,
    ldd: usize,
) {
    let mask = |n: usize| ((1u32 << n) - 1) as u16;
    for j0 in (0..cols).step_by(16) {
        let cj = (cols - j0).min(16);
        let full = rows - rows % 16;
        if cj == 16 {
            for i0 in (0..full).step_by(16) {
                // SAFETY: rows i0..i0 + 16 <= rows, columns j0..j0 + 16 <= cols of
                // src; rows j0..j0 + 16 <= cols, columns i0..i0 + 16 <= rows of dst.
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
            // <= cols; the stores write row j0 + j < cols, columns i0..i0 + ri <=
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

/// [`transpose_f32`] on AVX2: 8 x 8 register transposes, the edges
/// element by element.
///
/// # Safety
/// As [`transpose_f32`], with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn transpose_avx2(src: *const f32, rows: usize, cols: usize, lds: usize, dst: *mut f32, ldd: usize) {
    let (fr, fc) = (rows - rows % 8, cols - cols % 8);
    for j0 in (0..fc).step_by(8) {
        for i0 in (0..fr).step_by(8) {
            // SAFETY: rows i0..i0 + 8 <= rows, columns j0..j0 + 8 <= cols of
            // src; rows j0..j0 + 8 <= cols, columns i0..i0 + 8 <= rows of dst.
            unsafe {
                let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(src.add((i0 + i) * lds + j0)));
                for (j, v) in transpose8(r).into_iter().enumerate() {
                    _mm256_storeu_ps(dst.add((j0 + j) * ldd + i0), v);
                }
            }
        }
    }
    let one = |i: usize, j: usize| {
        // SAFETY: i < rows and j < cols (the loops below).
        unsafe { *dst.add(j * ldd + i) = *src.add(i * lds + j) }
    };
    for i in fr..rows {
        (0..cols).for_each(|j| one(i, j));
    }
    for j in fc..cols {
        (0..fr).for_each(|i| one(i, j));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant this CPU can run writes exactly `src`'s transpose,
    /// for sizes with and without whole register blocks, and leaves the
    /// padding columns of `dst` alone.
    #[test]
    fn every_variant_writes_the_transpose() {
        type Variant = unsafe fn(*const f32, usize, usize, usize, *mut f32, usize);
        let mut variants: Vec<(&str, Variant)> =
            vec![("scalar", transpose_scalar::<f32>), ("dispatched", transpose_f32)];
        #[cfg(target_arch = "x86_64")]
        {
            if isa() >= Isa::Avx2 {
                variants.push(("avx2", transpose_avx2));
            }
            if isa() >= Isa::Avx512 {
                variants.push(("avx512", transpose_avx512));
            }
        }
        for (rows, cols) in [(1, 1), (3, 5), (8, 8), (16, 16), (17, 33), (64, 32), (40, 7), (5, 48)] {
            let (lds, ldd) = (cols + 3, rows + 5);
            let src: Vec<f32> = (0..rows * lds).map(|i| i as f32 * 0.5 - 7.0).collect();
            for (name, f) in &variants {
                let mut dst = vec![f32::NAN; cols * ldd];
                // SAFETY: src holds rows rows of lds >= cols values, dst cols rows of ldd >= rows.
                unsafe { f(src.as_ptr(), rows, cols, lds, dst.as_mut_ptr(), ldd) };
                for j in 0..cols {
                    for i in 0..ldd {
                        let got = dst[j * ldd + i];
                        if i < rows {
                            assert_eq!(got, src[i * lds + j], "{name} {rows}x{cols} at ({i}, {j})");
                        } else {
                            assert!(got.is_nan(), "{name} {rows}x{cols} wrote padding ({i}, {j})");
                        }
                    }
                }
            }
        }
    }
}
