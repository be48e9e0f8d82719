//! Matrix multiplication on the CPU, BLIS style.
//!
//! For each block of `KC` steps of the inner dimension, B is packed into
//! panels of `NR` columns and A into panels of `MR` rows (zero-padded), then
//! tiles of `MC` rows by `NC` columns are computed in parallel, each tile by
//! the micro-kernel over its panels. The inner dimension is never split
//! across threads and every output element accumulates its `KC` blocks in
//! order, so the result is identical for any number of threads.

mod kernels;

use rayon::prelude::*;

use kernels::{Generic, MicroKernel};

use super::access::access;
use super::simd::{Isa, isa};
use crate::dispatch::Op;
use crate::{DType, Element, Result, Tensor, with_dtype};

/// Depth of one packed block (A micro-panels of `MR x KC` stay in L1).
const KC: usize = 384;
/// Columns of a tile (its B block of `KC x NC` stays in L2).
const NC: usize = 480;
/// Most rows of a tile.
const MC_MAX: usize = 1536;

/// Blocking `(kc, nc, mc_max)`, overridable with `FERROTORCH_GEMM_BLOCKING=kc,nc,mc`
/// (for tuning on a new machine).
fn blocking() -> (usize, usize, usize) {
    static B: std::sync::OnceLock<(usize, usize, usize)> = std::sync::OnceLock::new();
    *B.get_or_init(|| {
        std::env::var("FERROTORCH_GEMM_BLOCKING")
            .ok()
            .and_then(|v| {
                let p: Vec<usize> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
                (p.len() == 3 && p.iter().all(|&x| x > 0)).then(|| (p[0], p[1], p[2]))
            })
            .unwrap_or((KC, NC, MC_MAX))
    })
}

/// A strided matrix view: element (i, j) at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy)]
pub(crate) struct Mat<T> {
    pub ptr: *const T,
    pub rs: usize,
    pub cs: usize,
}

unsafe impl<T> Send for Mat<T> {}
unsafe impl<T> Sync for Mat<T> {}

#[derive(Clone, Copy)]
struct OutPtr<T>(*mut T);
unsafe impl<T> Send for OutPtr<T> {}
unsafe impl<T> Sync for OutPtr<T> {}

impl<T> OutPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

thread_local! {
    /// Packing buffers kept per thread between calls: fresh memory would be
    /// page-faulted and missed in cache on every call.
    static SCRATCH: std::cell::Cell<Vec<u64>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A 64-byte aligned scratch area of at least `n` elements of `T`, taken from
/// this thread's cache (a nested call on the same thread gets its own).
struct Scratch<T> {
    buf: Vec<u64>,
    off: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T> Scratch<T> {
    fn new(n: usize) -> Self {
        let words = (n * std::mem::size_of::<T>()).div_ceil(8) + 8;
        let mut buf = SCRATCH.with(|c| c.take());
        if buf.len() < words {
            buf = vec![0u64; words];
        }
        let off = (buf.as_ptr() as usize).wrapping_neg() % 64 / 8;
        Scratch {
            buf,
            off,
            _t: std::marker::PhantomData,
        }
    }

    fn as_mut_ptr(&mut self) -> *mut T {
        self.buf[self.off..].as_mut_ptr() as *mut T
    }
}

impl<T> Drop for Scratch<T> {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        SCRATCH.with(|c| {
            let old = c.take();
            c.set(if old.len() > buf.len() { old } else { buf });
        });
    }
}

/// Packs `rows <= MR` rows from `i0` and depth `[p0, p0 + kc)` of A into one
/// MR-row panel (zero-padded): `dst[p * MR + r] = A[i0 + r][p0 + p]`.
#[inline(always)]
fn pack_a_panel<T: Copy + Default, const MR: usize>(
    a: Mat<T>,
    i0: usize,
    rows: usize,
    p0: usize,
    kc: usize,
    dst: *mut T,
) {
    // SAFETY (all blocks): dst holds MR * kc elements; reads are inside A.
    if rows == MR {
        let base: [*const T; MR] = std::array::from_fn(|r| unsafe { a.ptr.add((i0 + r) * a.rs + p0 * a.cs) });
        for p in 0..kc {
            for (r, row) in base.iter().enumerate() {
                unsafe { *dst.add(p * MR + r) = *row.add(p * a.cs) };
            }
        }
    } else {
        for p in 0..kc {
            for r in 0..MR {
                unsafe {
                    *dst.add(p * MR + r) = if r < rows {
                        *a.ptr.add((i0 + r) * a.rs + (p0 + p) * a.cs)
                    } else {
                        T::default()
                    };
                }
            }
        }
    }
}

/// Packs depth `[p0, p0 + kc)` of the NR-column panels `[pj0, pj1)` of B
/// (`n` columns in all; the last panel is zero-padded):
/// `dst[pj * NR * kc + p * NR + j] = B[p0 + p][pj * NR + j]`. Rows of B are
/// read in order, which keeps the reads sequential when B is row-major.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn pack_b_panels<T: Copy + Default, const NR: usize>(
    b: Mat<T>,
    p0: usize,
    kc: usize,
    n: usize,
    pj0: usize,
    pj1: usize,
    dst: *mut T,
) {
    // SAFETY (all blocks): dst holds NR * kc elements per panel; reads are inside B.
    for p in 0..kc {
        let src_row = unsafe { b.ptr.add((p0 + p) * b.rs) };
        for pj in pj0..pj1 {
            let j0 = pj * NR;
            let cols = NR.min(n - j0);
            unsafe {
                let src = src_row.add(j0 * b.cs);
                let out = dst.add(pj * NR * kc + p * NR);
                if cols == NR && b.cs == 1 {
                    std::ptr::copy_nonoverlapping(src, out, NR);
                } else {
                    for j in 0..NR {
                        *out.add(j) = if j < cols { *src.add(j * b.cs) } else { T::default() };
                    }
                }
            }
        }
    }
}

/// `C = A * B` for `A: m x k`, `B: k x n`, `C: m x n` with row stride `ldc` (unit column stride).
#[allow(clippy::too_many_arguments)]
fn gemm_with<T, K>(m: usize, n: usize, k: usize, a: Mat<T>, b: Mat<T>, c: *mut T, ldc: usize, parallel: bool)
where
    T: Copy + Default + Send + Sync + std::ops::Add<Output = T>,
    K: MicroKernel<T>,
{
    let (mr, nr) = (K::MR, K::NR);
    if m == 0 || n == 0 {
        return;
    }
    let c = OutPtr(c);
    if k == 0 {
        for i in 0..m {
            for j in 0..n {
                // SAFETY: inside C.
                unsafe { *c.get().add(i * ldc + j) = T::default() };
            }
        }
        return;
    }
    let (kc_blk, nc_blk, mc_max) = blocking();
    let m_pad = m.div_ceil(mr) * mr;
    let n_pad = n.div_ceil(nr) * nr;
    let kc_max = kc_blk.min(k);
    let mut ap = Scratch::<T>::new(m_pad * kc_max);
    let mut bp = Scratch::<T>::new(n_pad * kc_max);
    let (app, bpp) = (OutPtr(ap.as_mut_ptr()), OutPtr(bp.as_mut_ptr()));
    // Tiles: columns in B blocks of about `nc_blk` (equal widths), rows split
    // so that there are at least two tiles per thread. Which thread computes
    // which tile does not change any element's arithmetic.
    let threads = if parallel { rayon::current_num_threads() } else { 1 };
    let tiles_n = n.div_ceil(nc_blk);
    let nc = n.div_ceil(tiles_n).div_ceil(nr) * nr;
    let tiles_n = n.div_ceil(nc);
    let want_m = (2 * threads).div_ceil(tiles_n).max(m.div_ceil(mc_max));
    let mc = m.div_ceil(want_m).div_ceil(mr).max(1) * mr;
    let tiles_m = m.div_ceil(mc);
    let mut p0 = 0;
    while p0 < k {
        let kc = kc_blk.min(k - p0);
        let accumulate = p0 > 0;
        let a_panels = m_pad / mr;
        let b_panels = n_pad / nr;
        let pack_a = |pi: usize| {
            let rows = mr.min(m - pi * mr);
            K::pack_a(a, pi * mr, rows, p0, kc, unsafe { app.get().add(pi * mr * kc) });
        };
        if parallel && threads > 1 {
            (0..a_panels).into_par_iter().for_each(pack_a);
            let per = b_panels.div_ceil(threads);
            (0..threads).into_par_iter().for_each(|t| {
                let (lo, hi) = ((t * per).min(b_panels), ((t + 1) * per).min(b_panels));
                K::pack_b(b, p0, kc, n, lo, hi, bpp.get());
            });
        } else {
            (0..a_panels).for_each(pack_a);
            K::pack_b(b, p0, kc, n, 0, b_panels, bpp.get());
        }
        let tile = |t: usize| {
            let (tj, ti) = (t / tiles_m, t % tiles_m);
            let (i_lo, i_hi) = (ti * mc, ((ti + 1) * mc).min(m));
            let (j_lo, j_hi) = (tj * nc, ((tj + 1) * nc).min(n));
            let mut edge = [T::default(); 16 * 32];
            // A micro-panel outer (stays in L1), B micro-panels inner (streamed from L2).
            let mut i = i_lo;
            while i < i_hi {
                let rows = mr.min(i_hi - i);
                // SAFETY: the packed panel for rows i.. exists.
                let apanel = unsafe { app.get().add((i / mr) * mr * kc) };
                let mut j = j_lo;
                while j < j_hi {
                    let cols = nr.min(j_hi - j);
                    let bpanel = unsafe { bpp.get().add((j / nr) * nr * kc) };
                    // SAFETY: tile inside C; panels hold kc * MR / kc * NR values.
                    unsafe {
                        let cptr = c.get().add(i * ldc + j);
                        if rows == mr && cols == nr {
                            K::run(kc, apanel, bpanel, cptr, ldc, accumulate);
                        } else {
                            let e = edge.as_mut_ptr();
                            if accumulate {
                                for r in 0..rows {
                                    for q in 0..cols {
                                        *e.add(r * nr + q) = *cptr.add(r * ldc + q);
                                    }
                                }
                            }
                            K::run(kc, apanel, bpanel, e, nr, accumulate);
                            for r in 0..rows {
                                for q in 0..cols {
                                    *cptr.add(r * ldc + q) = *e.add(r * nr + q);
                                }
                            }
                        }
                    }
                    j += nr;
                }
                i += mr;
            }
        };
        let tiles = tiles_m * tiles_n;
        if parallel && threads > 1 && tiles > 1 {
            (0..tiles).into_par_iter().for_each(tile);
        } else {
            (0..tiles).for_each(tile);
        }
        p0 += kc;
    }
}

/// `C = A * B` in f32 with the best kernel for this CPU.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm(m: usize, n: usize, k: usize, a: Mat<f32>, b: Mat<f32>, c: *mut f32, ldc: usize, parallel: bool) {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        Isa::Avx512 => return gemm_with::<f32, kernels::Avx512F32>(m, n, k, a, b, c, ldc, parallel),
        Isa::Avx2 => return gemm_with::<f32, kernels::Avx2F32>(m, n, k, a, b, c, ldc, parallel),
        Isa::Baseline => {}
    }
    gemm_with::<f32, Generic>(m, n, k, a, b, c, ldc, parallel)
}

/// `C = A * B` in f64 with the best kernel for this CPU.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dgemm(m: usize, n: usize, k: usize, a: Mat<f64>, b: Mat<f64>, c: *mut f64, ldc: usize, parallel: bool) {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        Isa::Avx512 => return gemm_with::<f64, kernels::Avx512F64>(m, n, k, a, b, c, ldc, parallel),
        Isa::Avx2 => return gemm_with::<f64, kernels::Avx2F64>(m, n, k, a, b, c, ldc, parallel),
        Isa::Baseline => {}
    }
    gemm_with::<f64, Generic>(m, n, k, a, b, c, ldc, parallel)
}

/// Integer matrix product with wrapping i64 arithmetic (summing in k order).
#[allow(clippy::too_many_arguments)]
fn igemm<T: Element>(m: usize, n: usize, k: usize, a: Mat<T>, b: Mat<T>, c: *mut T, ldc: usize) {
    for i in 0..m {
        for j in 0..n {
            let mut s: i64 = 0;
            for p in 0..k {
                // SAFETY: inside A and B.
                let (x, y) = unsafe { (*a.ptr.add(i * a.rs + p * a.cs), *b.ptr.add(p * b.rs + j * b.cs)) };
                s = s.wrapping_add(x.to_i64().wrapping_mul(y.to_i64()));
            }
            // SAFETY: inside C.
            unsafe { *c.add(i * ldc + j) = T::from_i64(s) };
        }
    }
}

/// Kernel of `mm` and `bmm`: `[..., n, k] @ [..., k, m]` with any input strides.
pub(crate) fn matmul_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let (a, b, out) = (inputs[0], inputs[1], outputs[0]);
    match a.dtype() {
        DType::F16 | DType::BF16 => {
            // Compute in f32 (PyTorch accumulates half products in f32 on the CPU).
            let (a32, b32) = (a.to_dtype(DType::F32)?, b.to_dtype(DType::F32)?);
            let tmp = crate::dispatch::call1(&crate::ops::MatMul, &[&a32, &b32])?;
            super::copy::cast_into(out, &tmp)
        }
        dt => with_dtype!(dt, T => batched::<T>(a, b, out)),
    }
}

fn batched<T: Element>(a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    let nd = a.ndim();
    let (m, k, n) = (a.shape()[nd - 2], a.shape()[nd - 1], b.shape()[nd - 1]);
    let batch_shape = &a.shape()[..nd - 2];
    let nb: usize = batch_shape.iter().product();
    let acc = access("bmm", &[a, b], &[out])?;
    let (ap, bp, cp) = (acc.ins[0] as usize, acc.ins[1] as usize, acc.outs[0] as usize);
    let (ast, bst) = (a.strides(), b.strides());
    let offset = |idx: usize, strides: &[usize]| -> usize {
        let mut rem = idx;
        let mut off = 0;
        for d in (0..batch_shape.len()).rev() {
            off += (rem % batch_shape[d]) * strides[d];
            rem /= batch_shape[d];
        }
        off
    };
    let small = m * n * k < 64 * 64 * 64;
    let one = |bi: usize, parallel: bool| {
        let am = Mat {
            ptr: (ap as *const T).wrapping_add(offset(bi, ast)),
            rs: ast[nd - 2],
            cs: ast[nd - 1],
        };
        let bm = Mat {
            ptr: (bp as *const T).wrapping_add(offset(bi, bst)),
            rs: bst[nd - 2],
            cs: bst[nd - 1],
        };
        let c = (cp as *mut T).wrapping_add(bi * m * n);
        match T::DTYPE {
            DType::F32 => sgemm(m, n, k, cast_mat(am), cast_mat(bm), c as *mut f32, n, parallel),
            DType::F64 => dgemm(m, n, k, cast_mat(am), cast_mat(bm), c as *mut f64, n, parallel),
            _ => igemm(m, n, k, am, bm, c, n),
        }
    };
    if small && nb > 1 && rayon::current_num_threads() > 1 {
        (0..nb).into_par_iter().for_each(|bi| one(bi, false));
    } else {
        (0..nb).for_each(|bi| one(bi, !small));
    }
    Ok(())
}

fn cast_mat<T, U>(m: Mat<T>) -> Mat<U> {
    Mat {
        ptr: m.ptr as *const U,
        rs: m.rs,
        cs: m.cs,
    }
}
