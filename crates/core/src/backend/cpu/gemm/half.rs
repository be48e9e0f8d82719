//! f16 and bf16 matrix products with f32 accumulators and an f32 result,
//! without widening whole operands: the operands are converted (or, for
//! the native bf16 kernel, kept) tile by tile while they are packed.
//!
//! One driver, [`gemm`], in `gemm_with`'s loop order (an A micro-panel in
//! L1 streaming over a column block of B panels in L2; threads split the
//! rows of C, or its columns when there are few rows), runs a
//! [`HalfKernel`]:
//! - `bf16::Native`, where the CPU has AVX512-BF16: bf16 panels packed in
//!   depth pairs and `vdpbf16ps`;
//! - [`Widen`] elsewhere (and for f16): each panel converted to f32 while
//!   it is packed, then the f32 micro-kernel of the instruction set.
//!
//! Like every GEMM here, the depth is never split across threads and each
//! output element adds its depth blocks in order, so the bits do not depend
//! on the thread count.

use half::{bf16, f16};

use super::kernels::{Generic, MicroKernel};
use super::{Mat, OutPtr, Scratch, Split};
use crate::Element;
use crate::backend::cpu::copy::cast_block;
use crate::backend::cpu::simd::{Isa, isa};

/// The two half-precision element types.
pub(crate) trait Half: Element {
    /// The value as f32 (exact).
    fn widen(self) -> f32;
}

impl Half for bf16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        f32::from_bits((self.to_bits() as u32) << 16)
    }
}

impl Half for f16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

/// A micro-kernel with its own packing of half-precision operands into
/// panels of `P`, multiplying one A panel by one B panel into f32.
pub(crate) trait HalfKernel<S>: Sync {
    /// The packed element.
    type P: Copy + Default;
    /// Rows of the register tile.
    const MR: usize;
    /// Columns of the register tile.
    const NR: usize;
    /// The tile rows the depth blocking is derived from (as
    /// `MicroKernel::depth_mr`).
    fn depth_mr() -> usize {
        Self::MR
    }
    /// The depth of a packed block and the columns of a B block on this
    /// CPU: the A-in-L1 order's rule (`plan::blocking`) for panels of `P`.
    fn blocking() -> (usize, usize) {
        let order = super::plan::Order::AResident;
        let b = super::plan::blocking(order, Self::depth_mr(), Self::NR, std::mem::size_of::<Self::P>());
        (b.kc, b.nc)
    }
    /// Whether the packers use the f32 scratch `tmp` (the widening ones).
    const WIDENS: bool = true;

    /// Packed values per row (A) or column (B) of a block of depth `kc`.
    fn span(kc: usize) -> usize {
        kc
    }

    /// Packs rows `[i0, i0 + rows)` (`rows <= MR`) at depth `[p0, p0 + kc)`
    /// of A into one panel of `MR * span(kc)` values (zero-padded).
    /// `tmp` is a scratch area of `max(MR, NR) * kc` f32.
    ///
    /// # Safety
    /// The rows and depths lie inside `a`; `dst` is writable for the
    /// panel; the CPU runs the kernel.
    #[allow(clippy::too_many_arguments)]
    unsafe fn pack_a(a: Mat<S>, i0: usize, rows: usize, p0: usize, kc: usize, dst: *mut Self::P, tmp: *mut f32);

    /// Packs depth `[p0, p0 + kc)` of the `NR`-column panels `[pj0, pj1)`
    /// of B (`n` columns; the last panel zero-padded), panel `pj0` at `dst`,
    /// `NR * span(kc)` values each. `tmp` as for `pack_a`.
    ///
    /// # Safety
    /// The depths and the panels' columns below `n` lie inside `b`; `dst`
    /// is writable for the panels; the CPU runs the kernel.
    #[allow(clippy::too_many_arguments)]
    unsafe fn pack_b(
        b: Mat<S>,
        p0: usize,
        kc: usize,
        n: usize,
        pj0: usize,
        pj1: usize,
        dst: *mut Self::P,
        tmp: *mut f32,
    );

    /// `C[MR x NR] (+)= A_panel * B_panel` over depth `kc`.
    ///
    /// # Safety
    /// The panels were packed for depth `kc`; `c` is writable (and, with
    /// `accumulate`, readable) for `MR` rows of `NR` values `ldc` apart;
    /// the CPU runs the kernel.
    unsafe fn run(kc: usize, a: *const Self::P, b: *const Self::P, c: *mut f32, ldc: usize, accumulate: bool);
}

/// `C = A * B` for half-precision `A: m x k`, `B: k x n` into the f32
/// `C: m x n` (row stride `ldc`, unit column stride), accumulating in f32,
/// with the best kernel for this CPU.
///
/// # Safety
/// `a` and `b` view readable `m x k` and `k x n` matrices, `c` is writable
/// for `m` rows of `n` values `ldc` apart, and nothing else accesses them
/// during the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn half_gemm<S: Half>(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<S>,
    b: Mat<S>,
    c: *mut f32,
    ldc: usize,
    parallel: bool,
) {
    // SAFETY: in every arm, this function's contract; each kernel's instruction set was detected.
    unsafe {
        if S::DTYPE == crate::DType::BF16 && super::bf16::native() {
            let (a, b) = (super::cast_mat::<S, bf16>(a), super::cast_mat::<S, bf16>(b));
            return gemm::<bf16, super::bf16::Native>(m, n, k, a, b, c, ldc, parallel);
        }
        #[cfg(target_arch = "x86_64")]
        match isa() {
            Isa::Avx512 => {
                use super::kernels::{Avx512F32, Avx512F32R8, Avx512F32W48, Avx512F32W64};
                use super::plan::Tile;
                // The f32 product's tile for the shape (the depth blocking is
                // Widen's own, so every tile gives the same bits).
                return match super::plan::f32_tile(m, n) {
                    Tile::R12C32 => gemm::<S, Widen<Avx512F32>>(m, n, k, a, b, c, ldc, parallel),
                    Tile::R8C32 => gemm::<S, Widen<Avx512F32R8>>(m, n, k, a, b, c, ldc, parallel),
                    Tile::R8C48 => gemm::<S, Widen<Avx512F32W48>>(m, n, k, a, b, c, ldc, parallel),
                    Tile::R6C64 => gemm::<S, Widen<Avx512F32W64>>(m, n, k, a, b, c, ldc, parallel),
                };
            }
            Isa::Avx2 => return gemm::<S, Widen<super::kernels::Avx2F32>>(m, n, k, a, b, c, ldc, parallel),
            Isa::Baseline => {}
        }
        gemm::<S, Widen<Generic>>(m, n, k, a, b, c, ldc, parallel)
    }
}

/// The driver: `C = A * B` with the kernel `K` (see the module doc).
///
/// # Safety
/// As [`half_gemm`], and the CPU runs `K`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm<S: Half, K: HalfKernel<S>>(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<S>,
    b: Mat<S>,
    c: *mut f32,
    ldc: usize,
    parallel: bool,
) {
    let (mr, nr) = (K::MR, K::NR);
    if m == 0 || n == 0 {
        return;
    }
    let c = OutPtr(c);
    if k == 0 {
        for i in 0..m {
            // SAFETY: row i of C holds n values.
            unsafe { std::ptr::write_bytes(c.get().add(i * ldc), 0, n) };
        }
        return;
    }
    let threads = if parallel { rayon::current_num_threads() } else { 1 };
    let (m_panels, n_panels) = (m.div_ceil(mr), n.div_ceil(nr));
    let (kc_blk, nc_blk) = K::blocking();
    let kblocks = k.div_ceil(kc_blk);
    let split = Split::new(m_panels, n_panels, threads);
    let (by_rows, tasks) = (split.by_rows, split.tasks);
    let nc_panels = (nc_blk / nr).max(1);
    let span_max = K::span(kc_blk.min(k));
    let task = |t: usize| {
        let (lo, hi) = split.range(t);
        if lo >= hi {
            return;
        }
        let own_len = (hi - lo) * if by_rows { mr } else { nr };
        let mut own = Scratch::<K::P>::new(own_len * span_max);
        let op = own.as_mut_ptr();
        let other_len = if by_rows {
            nc_panels.min(n_panels) * nr
        } else {
            m_panels * mr
        };
        let mut other = Scratch::<K::P>::new(other_len * span_max);
        let ot = other.as_mut_ptr();
        let mut conv = Scratch::<f32>::new(if K::WIDENS { mr.max(nr) * kc_blk.min(k) } else { 0 });
        let tmp = conv.as_mut_ptr();
        let mut edge = [0f32; EDGE];
        for kb in 0..kblocks {
            let (p0, kc) = (kb * kc_blk, kc_blk.min(k - kb * kc_blk));
            let span = K::span(kc);
            let accumulate = kb > 0;
            // Panel pi of A lies at a_base + (pi - a_first) * mr * span.
            let (a_base, a_first);
            // SAFETY: the panels packed lie inside A / B (this function's contract), and the scratch buffers hold
            // `own_len` / `other_len` values per depth slot (span <= span_max).
            unsafe {
                if by_rows {
                    for pi in lo..hi {
                        let rows = mr.min(m - pi * mr);
                        K::pack_a(a, pi * mr, rows, p0, kc, op.add((pi - lo) * mr * span), tmp);
                    }
                    (a_base, a_first) = (op as *const K::P, lo);
                } else {
                    K::pack_b(b, p0, kc, n, lo, hi, op, tmp);
                    for pi in 0..m_panels {
                        let rows = mr.min(m - pi * mr);
                        K::pack_a(a, pi * mr, rows, p0, kc, ot.add(pi * mr * span), tmp);
                    }
                    (a_base, a_first) = (ot as *const K::P, 0);
                }
            }
            let (i_lo, i_hi) = if by_rows { (lo, hi) } else { (0, m_panels) };
            let (j_lo, j_hi) = if by_rows { (0, n_panels) } else { (lo, hi) };
            let mut jc = j_lo;
            while jc < j_hi {
                let jc_end = (jc + nc_panels).min(j_hi);
                let (b_base, b_first) = if by_rows {
                    // SAFETY: panels [jc, jc_end) at depth [p0, p0 + kc) lie inside B; the scratch holds
                    // `nc_panels` panels of nr * span.
                    unsafe { K::pack_b(b, p0, kc, n, jc, jc_end, ot, tmp) };
                    (ot as *const K::P, jc)
                } else {
                    (op as *const K::P, lo)
                };
                for pi in i_lo..i_hi {
                    let rows = mr.min(m - pi * mr);
                    let apanel = a_base.wrapping_add((pi - a_first) * mr * span);
                    for pj in jc..jc_end {
                        let cols = nr.min(n - pj * nr);
                        let bpanel = b_base.wrapping_add((pj - b_first) * nr * span);
                        // SAFETY: the panels were packed for depth kc; the tile at (pi * mr, pj * nr), rows x cols,
                        // lies inside C, and no other task writes it; a partial tile goes through `edge`
                        // (mr * nr <= EDGE values, row stride nr).
                        unsafe {
                            let cptr = c.get().add(pi * mr * ldc + pj * nr);
                            if rows == mr && cols == nr {
                                K::run(kc, apanel, bpanel, cptr, ldc, accumulate);
                                continue;
                            }
                            let e = edge.as_mut_ptr();
                            for r in 0..rows {
                                if accumulate {
                                    std::ptr::copy_nonoverlapping(cptr.add(r * ldc), e.add(r * nr), cols);
                                }
                            }
                            K::run(kc, apanel, bpanel, e, nr, accumulate);
                            for r in 0..rows {
                                std::ptr::copy_nonoverlapping(e.add(r * nr), cptr.add(r * ldc), cols);
                            }
                        }
                    }
                }
                jc = jc_end;
            }
        }
    };
    if tasks > 1 {
        super::super::warm::par_for_each(tasks, task);
    } else {
        task(0);
    }
}

/// Size of the partial-tile scratch (the largest `MR x NR`: 12 x 32 = 8 x 48 = 6 x 64).
const EDGE: usize = 12 * 32;

/// An f32 micro-kernel `K` fed with half-precision operands converted to
/// f32 while they are packed.
pub(crate) struct Widen<K>(std::marker::PhantomData<K>);

impl<S: Half, K: MicroKernel<f32>> HalfKernel<S> for Widen<K> {
    type P = f32;
    const MR: usize = K::MR;
    const NR: usize = K::NR;
    /// The f32 kernel's, so that its tiles block alike (its panels are f32 once packed).
    fn depth_mr() -> usize {
        K::depth_mr()
    }

    unsafe fn pack_a(a: Mat<S>, i0: usize, rows: usize, p0: usize, kc: usize, dst: *mut f32, tmp: *mut f32) {
        // SAFETY: in all blocks, reads stay inside the rows / depths of the contract; `tmp` holds MR * kc f32 and
        // `dst` MR * kc.
        unsafe {
            if rows == K::MR && a.rs == 1 {
                // Column-major A: each depth's MR values are adjacent, as in the panel.
                for p in 0..kc {
                    let col = a.ptr.add(i0 + (p0 + p) * a.cs);
                    for r in 0..K::MR {
                        *dst.add(p * K::MR + r) = (*col.add(r)).widen();
                    }
                }
            } else if a.cs == 1 {
                // Row-major A: widen the rows into `tmp`, then the f32 packer.
                for r in 0..rows {
                    let row = std::slice::from_raw_parts(a.ptr.add((i0 + r) * a.rs + p0), kc);
                    cast_block(row, std::slice::from_raw_parts_mut(tmp.add(r * kc), kc));
                }
                let t = Mat {
                    ptr: tmp as *const f32,
                    rs: kc,
                    cs: 1,
                };
                K::pack_a(t, 0, rows, 0, kc, dst);
            } else {
                for p in 0..kc {
                    for r in 0..K::MR {
                        *dst.add(p * K::MR + r) = if r < rows {
                            (*a.ptr.add((i0 + r) * a.rs + (p0 + p) * a.cs)).widen()
                        } else {
                            0.0
                        };
                    }
                }
            }
        }
    }

    unsafe fn pack_b(b: Mat<S>, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, dst: *mut f32, tmp: *mut f32) {
        let nr = K::NR;
        for pj in pj0..pj1 {
            let j0 = pj * nr;
            let cols = nr.min(n - j0);
            let panel = dst.wrapping_add((pj - pj0) * nr * kc);
            // SAFETY: in all blocks, reads stay inside depth [p0, p0 + kc) and the panel's columns below n; `panel`
            // holds nr * kc values and `tmp` nr * kc f32.
            unsafe {
                if b.cs == 1 {
                    // Row-major B: each depth's columns are adjacent, as in the panel.
                    for p in 0..kc {
                        let row = std::slice::from_raw_parts(b.ptr.add((p0 + p) * b.rs + j0), cols);
                        let out = std::slice::from_raw_parts_mut(panel.add(p * nr), nr);
                        cast_block(row, &mut out[..cols]);
                        out[cols..].fill(0.0);
                    }
                } else if b.rs == 1 {
                    // Column-major B: widen the columns into `tmp`, then the f32 packer.
                    for j in 0..cols {
                        let col = std::slice::from_raw_parts(b.ptr.add(p0 + (j0 + j) * b.cs), kc);
                        cast_block(col, std::slice::from_raw_parts_mut(tmp.add(j * kc), kc));
                    }
                    let t = Mat {
                        ptr: tmp as *const f32,
                        rs: 1,
                        cs: kc,
                    };
                    K::pack_b(t, 0, kc, cols, 0, 1, panel);
                } else {
                    for p in 0..kc {
                        for j in 0..nr {
                            *panel.add(p * nr + j) = if j < cols {
                                (*b.ptr.add((p0 + p) * b.rs + (j0 + j) * b.cs)).widen()
                            } else {
                                0.0
                            };
                        }
                    }
                }
            }
        }
    }

    unsafe fn run(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        // SAFETY: the caller's contract, forwarded (the panels are K's f32 layout).
        unsafe { K::run(kc, a, b, c, ldc, accumulate) }
    }
}

#[cfg(test)]
pub(in crate::backend::cpu::gemm) mod tests {
    use half::{bf16, f16};

    use super::{Half, HalfKernel, Widen, gemm};
    use crate::backend::cpu::gemm::Mat;
    use crate::backend::cpu::gemm::kernels::Generic;

    /// Small integers: every product and partial sum is exact in f32, so
    /// any summation order gives the same bits as the plain triple loop.
    fn ints<S: Half>(len: usize, seed: u64) -> Vec<S> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                S::from_f64(((s >> 33) % 17) as f64 - 8.0)
            })
            .collect()
    }

    /// Runs kernel `K` on every layout of A and B over shapes around the
    /// tiles, the depth pairs and blocks, serial and parallel, against the
    /// exact product.
    pub(in crate::backend::cpu::gemm) fn check_kernel<S: Half, K: HalfKernel<S>>() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (12, 32, 2),
            (13, 33, 3),
            (25, 70, 37),
            (40, 64, 64),
            (24, 96, 600),
            (7, 300, 1031),
        ] {
            let a_data = ints::<S>(m * k, 1 + m as u64);
            let b_data = ints::<S>(k * n, 2 + n as u64);
            for (a_rm, b_rm) in [(true, true), (true, false), (false, true), (false, false)] {
                let a = if a_rm {
                    Mat {
                        ptr: a_data.as_ptr(),
                        rs: k,
                        cs: 1,
                    }
                } else {
                    Mat {
                        ptr: a_data.as_ptr(),
                        rs: 1,
                        cs: m,
                    }
                };
                let b = if b_rm {
                    Mat {
                        ptr: b_data.as_ptr(),
                        rs: n,
                        cs: 1,
                    }
                } else {
                    Mat {
                        ptr: b_data.as_ptr(),
                        rs: 1,
                        cs: k,
                    }
                };
                let mut want = vec![0f32; m * n];
                for i in 0..m {
                    for j in 0..n {
                        // SAFETY: (i, p) and (p, j) are inside the data.
                        want[i * n + j] = (0..k)
                            .map(|p| unsafe {
                                (*a.ptr.add(i * a.rs + p * a.cs)).widen() * (*b.ptr.add(p * b.rs + j * b.cs)).widen()
                            })
                            .sum();
                    }
                }
                for parallel in [false, true] {
                    let mut got = vec![f32::NAN; m * n];
                    // SAFETY: the caller checked the CPU runs K; the views cover the data; `got` holds m x n.
                    unsafe { gemm::<S, K>(m, n, k, a, b, got.as_mut_ptr(), n, parallel) };
                    assert_eq!(
                        got, want,
                        "m {m} n {n} k {k} a_rm {a_rm} b_rm {b_rm} parallel {parallel}"
                    );
                }
            }
        }
    }

    #[test]
    fn widening_kernels_match_the_exact_product() {
        check_kernel::<bf16, Widen<Generic>>();
        check_kernel::<f16, Widen<Generic>>();
        #[cfg(target_arch = "x86_64")]
        {
            use crate::backend::cpu::gemm::kernels::{Avx2F32, Avx512F32};
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                check_kernel::<bf16, Widen<Avx2F32>>();
                check_kernel::<f16, Widen<Avx2F32>>();
            } else {
                eprintln!("SKIPPED: this CPU has no AVX2 + FMA; the AVX2 widening kernel is not tested here");
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                check_kernel::<bf16, Widen<Avx512F32>>();
                check_kernel::<f16, Widen<Avx512F32>>();
                check_kernel::<bf16, Widen<super::super::kernels::Avx512F32W64>>();
                check_kernel::<f16, Widen<super::super::kernels::Avx512F32W48>>();
            } else {
                eprintln!("SKIPPED: this CPU has no AVX-512F; the AVX-512 widening kernel is not tested here");
            }
        }
    }
}
