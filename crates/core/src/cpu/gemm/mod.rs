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

const KC: usize = 256;
const MC: usize = 96;
const NC: usize = 512;

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

/// A 64-byte aligned scratch buffer.
struct Scratch<T> {
    buf: Vec<T>,
    off: usize,
}

impl<T: Copy + Default> Scratch<T> {
    fn new(n: usize) -> Self {
        let extra = 64 / std::mem::size_of::<T>();
        let buf = vec![T::default(); n + extra];
        let off = (buf.as_ptr() as usize).wrapping_neg() % 64 / std::mem::size_of::<T>();
        Scratch { buf, off }
    }

    fn as_mut_ptr(&mut self) -> *mut T {
        self.buf[self.off..].as_mut_ptr()
    }
}

/// Packs rows `[i0, i0 + mc)` and depth `[p0, p0 + kc)` of A into MR-row panels.
fn pack_a<T: Copy + Default>(a: Mat<T>, i0: usize, mc: usize, p0: usize, kc: usize, mr: usize, dst: *mut T) {
    let panels = mc.div_ceil(mr);
    for pi in 0..panels {
        let rows = mr.min(mc - pi * mr);
        // SAFETY: dst holds panels * mr * kc elements; reads are inside A.
        unsafe {
            let d = dst.add(pi * mr * kc);
            for p in 0..kc {
                for r in 0..mr {
                    *d.add(p * mr + r) = if r < rows {
                        *a.ptr.add((i0 + pi * mr + r) * a.rs + (p0 + p) * a.cs)
                    } else {
                        T::default()
                    };
                }
            }
        }
    }
}

/// Packs depth `[p0, p0 + kc)` and columns `[j0, j0 + nc)` of B into NR-column panels.
fn pack_b<T: Copy + Default>(b: Mat<T>, p0: usize, kc: usize, j0: usize, nc: usize, nr: usize, dst: *mut T) {
    let panels = nc.div_ceil(nr);
    for pj in 0..panels {
        let cols = nr.min(nc - pj * nr);
        // SAFETY: dst holds panels * nr * kc elements; reads are inside B.
        unsafe {
            let d = dst.add(pj * nr * kc);
            for p in 0..kc {
                let src = b.ptr.add((p0 + p) * b.rs + (j0 + pj * nr) * b.cs);
                let row = d.add(p * nr);
                if b.cs == 1 {
                    std::ptr::copy_nonoverlapping(src, row, cols);
                } else {
                    for j in 0..cols {
                        *row.add(j) = *src.add(j * b.cs);
                    }
                }
                for j in cols..nr {
                    *row.add(j) = T::default();
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
    let m_pad = m.div_ceil(mr) * mr;
    let n_pad = n.div_ceil(nr) * nr;
    let kc_max = KC.min(k);
    let mut ap = Scratch::<T>::new(m_pad * kc_max);
    let mut bp = Scratch::<T>::new(n_pad * kc_max);
    let (app, bpp) = (OutPtr(ap.as_mut_ptr()), OutPtr(bp.as_mut_ptr()));
    let mc = MC.div_ceil(mr) * mr;
    let nc = NC.div_ceil(nr) * nr;
    let tiles_m = m.div_ceil(mc);
    let tiles_n = n.div_ceil(nc);
    let mut p0 = 0;
    while p0 < k {
        let kc = KC.min(k - p0);
        let accumulate = p0 > 0;
        // Pack A and B for this depth block.
        let a_panels = m_pad / mr;
        let b_panels = n_pad / nr;
        let pack_a_panel = |pi: usize| {
            let rows = mr.min(m - pi * mr);
            pack_a(a, pi * mr, rows, p0, kc, mr, unsafe { app.get().add(pi * mr * kc) });
        };
        let pack_b_panel = |pj: usize| {
            let cols = nr.min(n - pj * nr);
            pack_b(b, p0, kc, pj * nr, cols, nr, unsafe { bpp.get().add(pj * nr * kc) });
        };
        if parallel {
            (0..a_panels).into_par_iter().for_each(pack_a_panel);
            (0..b_panels).into_par_iter().for_each(pack_b_panel);
        } else {
            (0..a_panels).for_each(pack_a_panel);
            (0..b_panels).for_each(pack_b_panel);
        }
        let tile = |t: usize| {
            let (ti, tj) = (t / tiles_n, t % tiles_n);
            let (i_lo, i_hi) = (ti * mc, ((ti + 1) * mc).min(m));
            let (j_lo, j_hi) = (tj * nc, ((tj + 1) * nc).min(n));
            let mut edge = [T::default(); 16 * 32];
            let mut j = j_lo;
            while j < j_hi {
                let cols = nr.min(j_hi - j);
                // SAFETY: the packed panel for columns j.. exists.
                let bpanel = unsafe { bpp.get().add((j / nr) * nr * kc) };
                let mut i = i_lo;
                while i < i_hi {
                    let rows = mr.min(i_hi - i);
                    let apanel = unsafe { app.get().add((i / mr) * mr * kc) };
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
                    i += mr;
                }
                j += nr;
            }
        };
        let tiles = tiles_m * tiles_n;
        if parallel && tiles > 1 {
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
