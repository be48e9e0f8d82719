//! The BLIS loop order: each B micro-panel stays in L1 while the A
//! micro-panels of a row block stream past it from L2.
//!
//! For each column block of `nc` columns and each depth block of `kc` (`plan.rs`),
//! the block's B panels are packed once, for all threads (each packs a
//! share), into a buffer that stays in the shared L3. Then the threads split
//! the block's tiles of C evenly in row-panel-major order (a row panel may
//! be shared by two threads; or they split the block's columns when there
//! are fewer row panels than threads): each packs `MC` rows of A at a time
//! (`mc` rows, in L2) and, for every B panel of the block, runs the
//! micro-kernel down those rows.
//!
//! Per step of the micro-kernel this reads `MR` values of A from L2 and `NR`
//! of B from L1, against `NR` from L2 in the other order (`gemm_with`): with
//! a tall-narrow register tile (AVX2's 6 x 16) that is the order that keeps
//! the FMA units fed. The inner dimension is never split and every output
//! element accumulates its `kc` blocks in order, as in the other order, so
//! the bits are the same for any number of threads and in both orders.

use super::kernels::MicroKernel;
use super::{BSrc, EDGE, Mat, OutPtr, Scratch, pack_a_panels, plan, tile, tile_bias};
use crate::cpu::warm::par_for_each;

/// The `t`-th of `parts` near-equal shares of `0..len`.
fn share(t: usize, parts: usize, len: usize) -> (usize, usize) {
    (t * len / parts, (t + 1) * len / parts)
}

/// Runs `f(t)` for `t` in `0..tasks`, in parallel when there are several.
fn run(tasks: usize, f: &(dyn Fn(usize) + Sync)) {
    if tasks > 1 {
        par_for_each(tasks, f);
    } else if tasks == 1 {
        f(0);
    }
}

/// `C = A * B` (`m x k` times `k x n`, `k > 0`) into `c` with row stride `ldc`
/// (`C += A * B` with `acc`), in the BLIS loop order with `blocking`;
/// `parallel` allows the pool's threads.
///
/// # Safety
/// As `gemm_with`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm<T, K>(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<T>,
    b: BSrc<'_, T>,
    c: OutPtr<T>,
    ldc: usize,
    parallel: bool,
    acc: bool,
    bias: Option<Mat<T>>,
    blocking: plan::Blocking,
) where
    T: Copy + Default + Send + Sync + super::BiasAdd,
    K: MicroKernel<T>,
{
    let (mr, nr) = (K::MR, K::NR);
    let plan::Blocking {
        kc: kc_blk,
        nc: nc_blk,
        mc: mc_blk,
    } = blocking;
    let threads = if parallel { rayon::current_num_threads() } else { 1 };
    let (m_panels, n_panels) = (m.div_ceil(mr), n.div_ceil(nr));
    let (nc_panels, mc_panels) = ((nc_blk / nr).max(1), (mc_blk / mr).max(1));
    let by_rows = m_panels >= threads;
    let depth = kc_blk.min(k);
    let mut bbuf = Scratch::<T>::new(nc_panels.min(n_panels) * nr * depth);
    let bp = OutPtr(bbuf.as_mut_ptr());
    let mut jc = 0;
    while jc < n_panels {
        let jc_end = (jc + nc_panels).min(n_panels);
        let block_panels = jc_end - jc;
        for kb in 0..k.div_ceil(kc_blk) {
            let (p0, kc) = (kb * kc_blk, kc_blk.min(k - kb * kc_blk));
            let accumulate = acc || kb > 0;
            let last = kb + 1 == k.div_ceil(kc_blk);
            // Panel pj of the block is at base + (pj - jc) * nr * kc: in the
            // source itself when it holds packed panels, else in the buffer.
            let direct = b.direct(p0, kc, jc, nr);
            let base = OutPtr(direct.unwrap_or(bp.get()) as *mut T);
            let bpanel = |pj: usize| base.get().wrapping_add((pj - jc) * nr * kc) as *const T;
            let pack_tasks = if direct.is_some() { 0 } else { threads.min(block_panels) };
            run(pack_tasks, &|t| {
                let (lo, hi) = share(t, pack_tasks, block_panels);
                if lo < hi {
                    // SAFETY: panels [jc + lo, jc + hi) at depth [p0, p0 + kc) lie inside B
                    // (the caller's contract); the block buffer holds the block's panels.
                    unsafe { b.pack::<K>(p0, kc, n, jc + lo, jc + hi, bp.get().wrapping_add(lo * nr * kc)) };
                }
            });
            // Multiplies row panels [i_lo, i_hi) (A packed at `ap`, panel i_lo
            // first) by the block's B panels [j_lo, j_hi), the tiles numbered
            // (row panel major) in `tiles` only.
            let multiply = |ap: *const T, i_lo: usize, i_hi: usize, j_lo: usize, j_hi: usize, tiles: (usize, usize)| {
                let mut edge = [T::default(); EDGE];
                for pj in j_lo..j_hi {
                    let cols = nr.min(n - pj * nr);
                    for pi in i_lo..i_hi {
                        if !(tiles.0..tiles.1).contains(&(pi * block_panels + pj - jc)) {
                            continue;
                        }
                        let rows = mr.min(m - pi * mr);
                        // SAFETY: the packed panels exist for these indices; the tile is inside C.
                        unsafe {
                            let apanel = ap.add((pi - i_lo) * mr * kc);
                            let cptr = c.get().add(pi * mr * ldc + pj * nr);
                            let tb = tile_bias(bias, last, pj * nr);
                            tile::<T, K>(
                                kc,
                                Mat {
                                    ptr: apanel,
                                    rs: 1,
                                    cs: mr,
                                },
                                (bpanel(pj), nr),
                                cptr,
                                ldc,
                                rows,
                                cols,
                                accumulate,
                                &mut edge,
                                tb,
                            );
                        }
                    }
                }
            };
            let pack_a = |ap: *mut T, i_lo: usize, i_hi: usize| {
                // SAFETY: row panels [i_lo, i_hi) at this depth lie inside A, and
                // `ap` is a scratch buffer sized for them (every caller below).
                unsafe { pack_a_panels::<T, K>(a, m, i_lo, i_hi, p0, kc, ap) }
            };
            if by_rows {
                // Each task takes an equal share of the block's tiles, in row
                // panel major order: a row panel may be split between two
                // tasks (each packs it), which balances the work when the
                // row panels do not divide evenly (43 of them in a 256-row product).
                let tasks = threads.min(m_panels);
                let all = m_panels * block_panels;
                run(tasks, &|t| {
                    let tiles = share(t, tasks, all);
                    if tiles.0 == tiles.1 {
                        return;
                    }
                    let (lo, hi) = (tiles.0 / block_panels, (tiles.1 - 1) / block_panels + 1);
                    let mut abuf = Scratch::<T>::new(mc_panels.min(hi - lo) * mr * kc);
                    let ap = abuf.as_mut_ptr();
                    let mut ic = lo;
                    while ic < hi {
                        let ic_end = (ic + mc_panels).min(hi);
                        pack_a(ap, ic, ic_end);
                        multiply(ap, ic, ic_end, jc, jc_end, tiles);
                        ic = ic_end;
                    }
                });
            } else {
                // Fewer row panels than threads: every task packs all of the
                // (small) A and takes a share of the block's columns.
                let tasks = threads.min(block_panels);
                run(tasks, &|t| {
                    let (lo, hi) = share(t, tasks, block_panels);
                    if lo < hi {
                        let mut abuf = Scratch::<T>::new(m_panels * mr * kc);
                        let ap = abuf.as_mut_ptr();
                        pack_a(ap, 0, m_panels);
                        multiply(ap, 0, m_panels, jc + lo, jc + hi, (0, usize::MAX));
                    }
                });
            }
        }
        jc = jc_end;
    }
}
