//! A B operand packed once and multiplied many times (the recurrent
//! weight of an RNN layer, used once per time step): every depth block's
//! panels are packed up front, in the layout the GEMM loops read, and
//! handed to them in place ([`PackB::direct`]) instead of being packed
//! again on every call.

use super::kernels::MicroKernel;
use super::{Mat, PackB};

/// A `k x n` B packed for one micro-kernel: depth block `kb` (rows
/// `[kb * kc, kb * kc + kcb)`, `kcb` its depth) holds the `NR`-column panels
/// of all `n` columns, panel `pj` at `kb * kc * panels * nr + pj * nr * kcb`.
pub(crate) struct PackedB<T> {
    data: Vec<T>,
    k: usize,
    n: usize,
    kc: usize,
    nr: usize,
}

impl<T: Copy + Default> PackedB<T> {
    /// Packs `b` (`k x n`) with kernel `K`'s packer and the GEMM's depth blocking.
    ///
    /// # Safety
    /// `b` views a readable `k x n` matrix.
    pub(super) unsafe fn new<K: MicroKernel<T>>(b: Mat<T>, k: usize, n: usize) -> Self {
        let kc = super::kernel_blocking::<T, K>().kc;
        let (nr, panels) = (K::NR, n.div_ceil(K::NR));
        let mut data = vec![T::default(); k * panels * nr];
        let mut p0 = 0;
        while p0 < k {
            let kcb = kc.min(k - p0);
            // SAFETY: depth [p0, p0 + kcb) of B's n columns lies inside `b` (the caller's contract); the block's
            // slot holds `panels` panels of nr * kcb values, inside `data`.
            unsafe { K::pack_b(b, p0, kcb, n, 0, panels, data.as_mut_ptr().add(p0 * panels * nr)) };
            p0 += kcb;
        }
        PackedB { data, k, n, kc, nr }
    }

    fn panels(&self) -> usize {
        self.n.div_ceil(self.nr)
    }

    /// `B[p][j]`.
    fn at(&self, p: usize, j: usize) -> T {
        let p0 = p / self.kc * self.kc;
        let kcb = self.kc.min(self.k - p0);
        self.data[p0 * self.panels() * self.nr + (j / self.nr) * self.nr * kcb + (p - p0) * self.nr + j % self.nr]
    }

    /// Rows of B.
    pub(crate) fn rows(&self) -> usize {
        self.k
    }

    /// Columns of B.
    pub(crate) fn cols(&self) -> usize {
        self.n
    }
}

impl<T: Copy + Default + Sync> PackB<T> for PackedB<T> {
    /// A layout other than the packed one (another kernel or blocking):
    /// element by element.
    unsafe fn pack(&self, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, nr: usize, dst: *mut T) {
        for pj in pj0..pj1 {
            for p in 0..kc {
                for j in 0..nr {
                    let col = pj * nr + j;
                    let v = if col < n.min(self.n) {
                        self.at(p0 + p, col)
                    } else {
                        T::default()
                    };
                    // SAFETY: the caller's contract: `dst` holds nr * kc values per panel of [pj0, pj1).
                    unsafe { *dst.add((pj - pj0) * nr * kc + p * nr + j) = v };
                }
            }
        }
    }

    fn packed_nr(&self) -> Option<usize> {
        Some(self.nr)
    }

    fn direct(&self, p0: usize, kc: usize, pj0: usize, nr: usize) -> Option<*const T> {
        let same =
            nr == self.nr && p0.is_multiple_of(self.kc) && kc == self.kc.min(self.k.saturating_sub(p0)) && kc > 0;
        (same && pj0 < self.panels()).then(|| self.data[p0 * self.panels() * self.nr + pj0 * self.nr * kc..].as_ptr())
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernels::{Generic, Packer};
    use super::super::{BSrc, Gemm, Prepack, gemm_with};
    use super::*;

    /// The portable kernel in the other loop order (`gemm_with`, which only
    /// AVX-512 kernels choose), so that order's reading of packed panels is
    /// tested on every machine.
    struct OtherOrder;

    impl Packer<f32> for OtherOrder {
        unsafe fn pack_a(a: Mat<f32>, i0: usize, rows: usize, p0: usize, kc: usize, dst: *mut f32) {
            // SAFETY: the same contract, forwarded.
            unsafe { <Generic as Packer<f32>>::pack_a(a, i0, rows, p0, kc, dst) }
        }
        unsafe fn pack_b(b: Mat<f32>, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, dst: *mut f32) {
            // SAFETY: the same contract, forwarded.
            unsafe { <Generic as Packer<f32>>::pack_b(b, p0, kc, n, pj0, pj1, dst) }
        }
    }

    impl MicroKernel<f32> for OtherOrder {
        const MR: usize = <Generic as MicroKernel<f32>>::MR;
        const NR: usize = <Generic as MicroKernel<f32>>::NR;
        const B_RESIDENT: bool = false;
        unsafe fn run(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
            // SAFETY: the same contract, forwarded.
            unsafe { <Generic as MicroKernel<f32>>::run(kc, a, b, c, ldc, accumulate) }
        }
    }

    /// Both splits of `gemm_with` (by rows, and by columns when there are
    /// few rows) read packed panels in place and give the packing path's bits.
    #[test]
    fn the_other_loop_order_reads_packed_panels() {
        for (m, k, n) in [(40, 300, 70), (2, 260, 200), (9, 7, 9)] {
            let a: Vec<f32> = (0..m * k).map(|i| ((i * 29 % 89) as f32 - 44.0) / 20.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| ((i * 31 % 83) as f32 - 41.0) / 20.0).collect();
            let am = Mat {
                ptr: a.as_ptr(),
                rs: k,
                cs: 1,
            };
            let bm = Mat {
                ptr: b.as_ptr(),
                rs: n,
                cs: 1,
            };
            // SAFETY: `b` holds k x n values.
            let packed = unsafe { PackedB::new::<OtherOrder>(bm, k, n) };
            for parallel in [false, true] {
                let (mut want, mut got) = (vec![0f32; m * n], vec![0f32; m * n]);
                // SAFETY: a, b, c hold m x k, k x n and m x n values.
                unsafe {
                    gemm_with::<f32, OtherOrder>(
                        m,
                        n,
                        k,
                        am,
                        BSrc::Mat(bm),
                        want.as_mut_ptr(),
                        n,
                        parallel,
                        false,
                        None,
                    );
                    gemm_with::<f32, OtherOrder>(
                        m,
                        n,
                        k,
                        am,
                        BSrc::Pack(&packed),
                        got.as_mut_ptr(),
                        n,
                        parallel,
                        false,
                        None,
                    );
                }
                assert_eq!(want, got, "{m}x{k}x{n} parallel={parallel}");
                let kc = super::super::kernel_blocking::<f32, OtherOrder>().kc;
                assert!(packed.direct(0, k.min(kc), 0, OtherOrder::NR).is_some());
            }
        }
    }

    /// Products with a packed-once B give the bits of products packing B on
    /// every call (depths over one block, ragged panels, both layouts of B,
    /// parallel or not); the element-wise fallback packs the same values.
    #[test]
    fn packed_b_gives_the_products_bits() {
        for (m, k, n) in [(32, 256, 1024), (5, 300, 37), (70, 513, 20), (1, 1, 1)] {
            let a: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| ((i * 53 % 97) as f32 - 48.0) / 30.0).collect();
            let am = Mat {
                ptr: a.as_ptr(),
                rs: k,
                cs: 1,
            };
            for (bm, what) in [
                (
                    Mat {
                        ptr: b.as_ptr(),
                        rs: n,
                        cs: 1,
                    },
                    "row-major",
                ),
                (
                    Mat {
                        ptr: b.as_ptr(),
                        rs: 1,
                        cs: k,
                    },
                    "column-major",
                ),
            ] {
                // SAFETY: `b` holds k * n values in either layout.
                let packed = unsafe { f32::prepack_b(bm, k, n) };
                for parallel in [false, true] {
                    let (mut want, mut got) = (vec![0f32; m * n], vec![0f32; m * n]);
                    // SAFETY: a, b, c hold m x k, k x n and m x n values.
                    unsafe {
                        f32::gemm(m, n, k, am, BSrc::Mat(bm), want.as_mut_ptr(), n, parallel, false);
                        f32::gemm(m, n, k, am, BSrc::Pack(&packed), got.as_mut_ptr(), n, parallel, false);
                    }
                    assert_eq!(want, got, "{m}x{k}x{n} {what} parallel={parallel}");
                }
                // The fallback: panels of another width.
                let mut dst = vec![0f32; 3 * 5 * k.min(7)];
                // SAFETY: dst holds 3 panels of 5 x kc values.
                unsafe { packed.pack(0, k.min(7), n, 0, 3, 5, dst.as_mut_ptr()) };
                for pj in 0..3 {
                    for p in 0..k.min(7) {
                        for j in 0..5 {
                            let col = pj * 5 + j;
                            let v = if col < n {
                                // SAFETY: (p, col) lies inside B when col < n.
                                unsafe { *bm.ptr.add(p * bm.rs + col * bm.cs) }
                            } else {
                                0.0
                            };
                            assert_eq!(dst[pj * 5 * k.min(7) + p * 5 + j], v);
                        }
                    }
                }
            }
        }
    }
}
