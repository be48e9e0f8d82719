//! Matrix multiplication on the CPU, BLIS style.
//!
//! The inner dimension is cut into blocks of `kc`; for each, B is packed
//! into panels of `NR` columns and A into panels of `MR` rows (zero-padded),
//! and a register-tiled micro-kernel (`kernels.rs`) multiplies one A panel
//! by one B panel. Two loop orders around it, chosen per kernel by
//! measurement (`MicroKernel::B_RESIDENT`):
//!
//! - `gemm_with` (here): threads split the rows of C (or its columns when
//!   there are few rows); each packs its own A panels and walks column blocks
//!   of `nc`, packing the block's B panels itself just before use, with
//!   one A micro-panel in L1 streaming over the block's B panels in L2. Best
//!   for AVX-512's wide 12 x 32 tile, which also reads a row-major B in
//!   place (`MicroKernel::IN_PLACE`: its rows are 32 contiguous values
//!   already, and copying them cost as much as the kernel's reads), and an
//!   A whose panel serves its B panels as well as a packed one would:
//!   column-major with short columns (or any, in narrow products), or
//!   row-major with a row stride that spreads the panel's rows over the
//!   cache's sets (`a_reads_in_place`).
//! - `b_resident::gemm`: the BLIS order, each B panel in L1 with the A
//!   panels of a row block streaming from L2, B packed once per block for
//!   all threads. Best for AVX2's 6 x 16 tile.
//!
//! In both the inner dimension is never split across threads and every
//! output element accumulates its `kc` blocks in order, so the result is
//! identical for any number of threads. The tile, the blocking (`kc`, `nc`,
//! `mc`) and whether B is read in place come from the CPU at hand
//! ([`plan`]; `ferrotorch-bench --cpu` prints them).

mod b_resident;
mod bf16;
mod half;
mod kernels;
pub mod plan;
mod prepacked;
mod scratch;

#[cfg(target_arch = "x86_64")]
pub(crate) use kernels::{transpose8, transpose16};
pub(crate) use prepacked::PackedB;
use scratch::Scratch;

use kernels::{Generic, MicroKernel};

use super::access::access;
use super::simd::{Isa, isa};
use crate::dispatch::Op;
use crate::{DType, Element, Result, Tensor, with_dtype};

/// The widest column stride of a column-major A always read in place (its
/// panel's `kc` steps then span at most `kc * A_IN_PLACE_MAX_LD` values;
/// wider ones only in narrow products, `a_reads_in_place`).
const A_IN_PLACE_MAX_LD: usize = 64;

/// A strided matrix view: element (i, j) at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy)]
pub(crate) struct Mat<T> {
    pub ptr: *const T,
    pub rs: usize,
    pub cs: usize,
}

// SAFETY: a `Mat` only reads the matrix it views, which its creator keeps alive and unchanged (under the storage
// locks) for the whole product, so sharing it across the product's threads is sound.
unsafe impl<T> Send for Mat<T> {}
// SAFETY: as for Send: threads only read through it.
unsafe impl<T> Sync for Mat<T> {}

#[derive(Clone, Copy)]
struct OutPtr<T>(*mut T);
// SAFETY: threads write disjoint tiles of C through it (the split never gives two threads one output element), and C
// outlives the product.
unsafe impl<T> Send for OutPtr<T> {}
// SAFETY: as for Send: writes through copies of the pointer touch disjoint elements.
unsafe impl<T> Sync for OutPtr<T> {}

impl<T> OutPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

/// A source of B's packed panels: a strided matrix (packed by the
/// kernel's packer), or a [`PackB`] that writes its panels itself (the
/// convolution's column matrix, never materialised).
#[derive(Clone, Copy)]
pub(crate) enum BSrc<'a, T> {
    /// A strided matrix.
    Mat(Mat<T>),
    /// Panels written by the source.
    Pack(&'a dyn PackB<T>),
}

/// A `k x n` B that packs its own panels.
pub(crate) trait PackB<T>: Sync {
    /// Writes depth `[p0, p0 + kc)` of the `nr`-column panels `[pj0, pj1)`
    /// of B (`n` columns; zeros past them), panel `pj0` first:
    /// `dst[(pj - pj0) * nr * kc + p * nr + j] = B[p0 + p][pj * nr + j]`.
    ///
    /// # Safety
    /// Depth `[p0, p0 + kc)` lies inside B's `k` rows, and `dst` is writable
    /// for `nr * kc` values per panel.
    #[allow(clippy::too_many_arguments)]
    unsafe fn pack(&self, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, nr: usize, dst: *mut T);

    /// Where the panels from `pj0` of depth block `[p0, p0 + kc)` already
    /// lie in the layout `pack` writes (`nr`-column panels of `kc` rows,
    /// consecutive), if they do: the loops then read them in place. The
    /// pointer stays valid while `self` lives.
    fn direct(&self, p0: usize, kc: usize, pj0: usize, nr: usize) -> Option<*const T> {
        let _ = (p0, kc, pj0, nr);
        None
    }

    /// The panel width this source holds its panels in, if it holds them
    /// packed (the GEMM then picks the tile of that width, so that
    /// [`PackB::direct`] serves them).
    fn packed_nr(&self) -> Option<usize> {
        None
    }
}

impl<T> BSrc<'_, T> {
    /// The packed panels from `pj0` at depth `[p0, p0 + kc)`, when the
    /// source holds them already (see [`PackB::direct`]).
    #[inline(always)]
    fn direct(self, p0: usize, kc: usize, pj0: usize, nr: usize) -> Option<*const T> {
        match self {
            BSrc::Mat(_) => None,
            BSrc::Pack(p) => p.direct(p0, kc, pj0, nr),
        }
    }

    /// Packs panels `[pj0, pj1)` at depth `[p0, p0 + kc)` (as `Packer::pack_b`).
    ///
    /// # Safety
    /// As `Packer::pack_b` (and [`PackB::pack`]).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn pack<K: MicroKernel<T>>(self, p0: usize, kc: usize, n: usize, pj0: usize, pj1: usize, dst: *mut T) {
        // SAFETY: the caller's contract, forwarded.
        unsafe {
            match self {
                BSrc::Mat(b) => K::pack_b(b, p0, kc, n, pj0, pj1, dst),
                BSrc::Pack(p) => p.pack(p0, kc, n, pj0, pj1, K::NR, dst),
            }
        }
    }
}

/// Packs `rows <= MR` rows from `i0` and depth `[p0, p0 + kc)` of A into one
/// MR-row panel (zero-padded): `dst[p * MR + r] = A[i0 + r][p0 + p]`.
///
/// # Safety
/// Rows `[i0, i0 + rows)` at depth `[p0, p0 + kc)` lie inside `a`, and `dst`
/// is writable for `MR * kc` values.
#[inline(always)]
unsafe fn pack_a_panel<T: Copy + Default, const MR: usize>(
    a: Mat<T>,
    i0: usize,
    rows: usize,
    p0: usize,
    kc: usize,
    dst: *mut T,
) {
    // SAFETY (all blocks): dst holds MR * kc elements; reads are inside A.
    if rows == MR && a.rs == 1 {
        // Column-major A (a transposed view): each depth step is MR contiguous values.
        for p in 0..kc {
            // SAFETY: column-major A (rs = 1): column p0 + p has MR rows from i0 inside A (rows == MR), and `dst`
            // holds MR * kc values.
            unsafe { std::ptr::copy_nonoverlapping(a.ptr.add(i0 + (p0 + p) * a.cs), dst.add(p * MR), MR) };
        }
    } else if rows == MR {
        // SAFETY: rows i0..i0 + MR of A exist (rows == MR), so each row's start at depth p0 is inside A.
        let base: [*const T; MR] = std::array::from_fn(|r| unsafe { a.ptr.add((i0 + r) * a.rs + p0 * a.cs) });
        for p in 0..kc {
            for (r, row) in base.iter().enumerate() {
                // SAFETY: row r at depth p0 + p is inside A (p < kc), and p * MR + r < MR * kc, the size of `dst`.
                unsafe { *dst.add(p * MR + r) = *row.add(p * a.cs) };
            }
        }
    } else {
        for p in 0..kc {
            for r in 0..MR {
                // SAFETY: only rows r < rows are read, each inside A at depth p0 + p < p0 + kc; p * MR + r < MR * kc,
                // the size of `dst`.
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
/// (`n` columns in all; the last panel is zero-padded), panel `pj0` first:
/// `dst[(pj - pj0) * NR * kc + p * NR + j] = B[p0 + p][pj * NR + j]`. Rows of B are
/// read in order, which keeps the reads sequential when B is row-major.
///
/// # Safety
/// Depth `[p0, p0 + kc)` of B's first `n` columns lies inside `b`, and `dst`
/// is writable for `NR * kc` values per panel of `[pj0, pj1)`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pack_b_panels<T: Copy + Default, const NR: usize>(
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
        // SAFETY: row p0 + p < p0 + kc of B exists (the caller's depth block lies inside B).
        let src_row = unsafe { b.ptr.add((p0 + p) * b.rs) };
        for pj in pj0..pj1 {
            let j0 = pj * NR;
            let cols = NR.min(n - j0);
            // SAFETY: only columns j < cols (inside B's n columns) are read; the panel slot (pj - pj0) * NR * kc + p *
            // NR + j lies inside `dst`, which holds NR * kc values per panel.
            unsafe {
                let src = src_row.add(j0 * b.cs);
                let out = dst.add((pj - pj0) * NR * kc + p * NR);
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

/// `C = A * B` for `A: m x k`, `B: k x n`, `C: m x n` with row stride `ldc`
/// (unit column stride); with `acc`, `C += A * B` (each element adds its K
/// blocks to its old value, in order).
///
/// The work is split over threads by rows of C when there are enough MR-row
/// panels (else by columns). Each thread packs everything it reads itself,
/// just before it uses it: per depth block its own part of the split operand,
/// then the other operand one column block at a time (so the packed block is
/// still in L2 when the micro-kernel reads it). Packing the other operand
/// once for all threads costs a round trip through memory that is dearer
/// than packing it twice, and a second fork-join.
///
/// With `acc`, `C += A * B` (C is read first). The blocking is this CPU's
/// (`plan.rs`).
///
/// # Safety
/// `a` and `b` view `m x k` and `k x n` readable matrices, `c` is writable
/// (and, with `acc`, readable) for `m` rows of `n` values `ldc` apart, and
/// nothing else accesses them during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_with<T, K>(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<T>,
    b: BSrc<'_, T>,
    c: *mut T,
    ldc: usize,
    parallel: bool,
    acc: bool,
    bias: Option<Mat<T>>,
) where
    T: Copy + Default + Send + Sync + BiasAdd,
    K: MicroKernel<T>,
{
    let blocking = kernel_blocking::<T, K>();
    let in_place = plan::in_place(super::cpu_info::cpu_info());
    // SAFETY: this function's contract, forwarded.
    unsafe { gemm_blocked::<T, K>(m, n, k, a, b, c, ldc, parallel, acc, bias, blocking, in_place) }
}

/// The loop order kernel `K` runs in.
fn kernel_order<T, K: MicroKernel<T>>() -> plan::Order {
    if K::B_RESIDENT {
        plan::Order::BResident
    } else {
        plan::Order::AResident
    }
}

/// This CPU's blocking for kernel `K` on `T` values.
fn kernel_blocking<T, K: MicroKernel<T>>() -> plan::Blocking {
    plan::blocking(kernel_order::<T, K>(), K::depth_mr(), K::NR, std::mem::size_of::<T>())
}

/// [`gemm_with`] with a given blocking, reading operands in place
/// (kernels with `IN_PLACE`) only as `in_place` allows.
///
/// # Safety
/// As `gemm_with`.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_blocked<T, K>(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<T>,
    b: BSrc<'_, T>,
    c: *mut T,
    ldc: usize,
    parallel: bool,
    acc: bool,
    bias: Option<Mat<T>>,
    blocking: plan::Blocking,
    in_place: plan::InPlace,
) where
    T: Copy + Default + Send + Sync + BiasAdd,
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
                // SAFETY: inside C; the bias holds n values.
                unsafe {
                    let at = c.get().add(i * ldc + j);
                    let old = if acc { *at } else { T::default() };
                    *at = match bias {
                        Some(v) => old + *v.ptr.add(j * v.cs),
                        None => old,
                    };
                }
            }
        }
        return;
    }
    if K::B_RESIDENT {
        // SAFETY: this function's contract, forwarded (k > 0 here).
        return unsafe { b_resident::gemm::<T, K>(m, n, k, a, b, c, ldc, parallel, acc, bias, blocking) };
    }
    let plan::Blocking {
        kc: kc_blk, nc: nc_blk, ..
    } = blocking;
    let threads = if parallel { rayon::current_num_threads() } else { 1 };
    let (m_panels, n_panels) = (m.div_ceil(mr), n.div_ceil(nr));
    let kblocks = k.div_ceil(kc_blk);
    let block = |kb: usize| (kb * kc_blk, kc_blk.min(k - kb * kc_blk));
    let split = Split::new(m_panels, n_panels, threads);
    let (by_rows, tasks) = (split.by_rows, split.tasks);
    let nc_panels = (nc_blk / nr).max(1);
    // One task: panels [lo, hi) of its split dimension, all depth blocks.
    let task = |t: usize| {
        let (lo, hi) = split.range(t);
        if lo >= hi {
            return;
        }
        // This task's rows of A (by rows) or columns of B (by columns), one depth block.
        let own_len = (hi - lo) * if by_rows { mr } else { nr };
        let mut own = Scratch::<T>::new(own_len * kc_blk.min(k));
        let op = own.as_mut_ptr();
        // The other operand: one column block of B (by rows) or all of A (by columns).
        let other_len = if by_rows {
            nc_panels.min(n_panels) * nr
        } else {
            m_panels * mr
        };
        let mut other = Scratch::<T>::new(other_len * kc_blk.min(k));
        let ot = other.as_mut_ptr();
        let mut edge = [T::default(); EDGE];
        // A column-major A with short columns is read in place (its full
        // panels: each depth step's MR values are contiguous, and the
        // panel's steps lie within a few KiB, so it stays in L1 as a packed
        // panel would); only a partial last panel is packed, first in `op`.
        let a_in_place = by_rows && K::IN_PLACE && in_place.a && a_reads_in_place(a, n, in_place);
        let partial = if hi * mr > m { Some(hi - 1) } else { None };
        for kb in 0..kblocks {
            let (p0, kc) = block(kb);
            let accumulate = acc || kb > 0;
            // Pack this task's part of the split operand for the block (and,
            // by columns, all of the small A).
            // SAFETY: the panels [lo, hi) (or all of A) at depth [p0, p0 + kc)
            // lie inside A / B (the caller's contract), and the scratch
            // buffers hold `own_len` / `other_len` values per depth step.
            unsafe {
                if a_in_place {
                    if let Some(pi) = partial {
                        pack_a_panels::<T, K>(a, m, pi, pi + 1, p0, kc, op);
                    }
                } else if by_rows {
                    pack_a_panels::<T, K>(a, m, lo, hi, p0, kc, op);
                } else {
                    if b.direct(p0, kc, lo, nr).is_none() {
                        b.pack::<K>(p0, kc, n, lo, hi, op);
                    }
                    pack_a_panels::<T, K>(a, m, 0, m_panels, p0, kc, ot);
                }
            }
            // Panel pi of A is at a_base + (pi - a_first) * mr * kc; likewise B.
            let (a_base, a_first) = if by_rows {
                (op as *const T, lo)
            } else {
                (ot as *const T, 0)
            };
            let (mut b_base, mut b_first) = (b.direct(p0, kc, lo, nr).unwrap_or(op as *const T), lo);
            // A row-major B is read in place (its full panels) by kernels that
            // can: no packed copy to write and read back.
            let in_place = match b {
                BSrc::Mat(bm)
                    if by_rows && K::IN_PLACE && bm.cs == 1 && in_place.reads_b(bm.rs * std::mem::size_of::<T>()) =>
                {
                    Some(bm)
                }
                _ => None,
            };
            let (i_lo, i_hi) = if by_rows { (lo, hi) } else { (0, m_panels) };
            let (j_lo, j_hi) = if by_rows { (0, n_panels) } else { (lo, hi) };
            // Column blocks of about `nc_blk` keep the B panels of a block in L2
            // while every A panel (L1) streams over them.
            let mut jc = j_lo;
            while jc < j_hi {
                let jc_end = (jc + nc_panels).min(j_hi);
                if in_place.is_some() {
                    if jc_end * nr > n {
                        // The partial last panel, packed (zero-padded) at `ot`.
                        // SAFETY: panel jc_end - 1 at depth [p0, p0 + kc) lies inside B; the
                        // scratch holds `nc_panels` panels of nr * kc.
                        unsafe { b.pack::<K>(p0, kc, n, jc_end - 1, jc_end, ot) };
                    }
                } else if by_rows {
                    (b_base, b_first) = match b.direct(p0, kc, jc, nr) {
                        Some(ptr) => (ptr, jc),
                        None => {
                            // SAFETY: panels [jc, jc_end) at depth [p0, p0 + kc) lie inside B;
                            // the scratch holds `nc_panels` panels of nr * kc.
                            unsafe { b.pack::<K>(p0, kc, n, jc, jc_end, ot) };
                            (ot as *const T, jc)
                        }
                    };
                }
                for pi in i_lo..i_hi {
                    let rows = mr.min(m - pi * mr);
                    // SAFETY: packed panels exist for every index used; tiles are inside C.
                    let packed = |ptr: *const T| Mat { ptr, rs: 1, cs: mr };
                    let apanel = if a_in_place && rows == mr {
                        // Rows pi * mr.. at steps p0.. of A, in place.
                        Mat {
                            ptr: a.ptr.wrapping_add(p0 * a.cs + pi * mr * a.rs),
                            ..a
                        }
                    } else if a_in_place {
                        // The partial last panel, packed at `op` above.
                        packed(op as *const T)
                    } else {
                        packed(a_base.wrapping_add((pi - a_first) * mr * kc))
                    };
                    for pj in jc..jc_end {
                        let cols = nr.min(n - pj * nr);
                        let bpanel = match in_place {
                            // Full panels in place: rows p0.. of B's columns from pj * nr.
                            Some(bm) if cols == nr => (bm.ptr.wrapping_add(p0 * bm.rs + pj * nr), bm.rs),
                            // The partial last panel, packed at `ot` above.
                            Some(_) => (ot as *const T, nr),
                            // Panel pj of this column block was packed at b_base + (pj - b_first) * nr * kc.
                            None => (b_base.wrapping_add((pj - b_first) * nr * kc), nr),
                        };
                        let tb = tile_bias(bias, kb + 1 == kblocks, pj * nr);
                        // SAFETY: the A panel holds mr rows by kc steps at its strides and the B panel kc rows of
                        // nr values bpanel.1 apart (packed, or inside A / B); the tile at (pi * mr, pj * nr) with
                        // rows x cols <= mr x nr lies inside C (m x n, row stride ldc), and no other thread writes it.
                        unsafe {
                            let cptr = c.get().add(pi * mr * ldc + pj * nr);
                            tile::<T, K>(kc, apanel, bpanel, cptr, ldc, rows, cols, accumulate, &mut edge, tb);
                        }
                    }
                }
                jc = jc_end;
            }
        }
    };
    if tasks > 1 {
        super::warm::par_for_each(tasks, task);
    } else {
        task(0);
    }
}

/// How `gemm_with`-order products share their tiles among threads: by
/// row panels of C when there are enough of them (or more than column
/// panels), else by column panels; each task takes a contiguous range.
#[derive(Clone, Copy)]
pub(super) struct Split {
    /// Whether tasks take row panels (else column panels).
    pub by_rows: bool,
    /// How many tasks.
    pub tasks: usize,
    /// Panels of the split dimension.
    panels: usize,
}

impl Split {
    pub(super) fn new(m_panels: usize, n_panels: usize, threads: usize) -> Self {
        let by_rows = m_panels >= threads || m_panels >= n_panels;
        let panels = if by_rows { m_panels } else { n_panels };
        Split {
            by_rows,
            tasks: threads.min(panels).max(1),
            panels,
        }
    }

    /// Task `t`'s panels `[lo, hi)` (empty past the last).
    pub(super) fn range(self, t: usize) -> (usize, usize) {
        let per = self.panels.div_ceil(self.tasks);
        ((t * per).min(self.panels), ((t + 1) * per).min(self.panels))
    }
}

/// Packs the `MR`-row panels `[i_lo, i_hi)` of the `m`-row A, depth
/// `[p0, p0 + kc)`, panel `i_lo` at `dst` (a partial last panel zero-padded).
///
/// # Safety
/// Row panels `[i_lo, i_hi)` (rows below `m`) at depth `[p0, p0 + kc)` lie
/// inside `a`, and `dst` is writable for `(i_hi - i_lo) * MR * kc` values.
unsafe fn pack_a_panels<T: Copy, K: MicroKernel<T>>(
    a: Mat<T>,
    m: usize,
    i_lo: usize,
    i_hi: usize,
    p0: usize,
    kc: usize,
    dst: *mut T,
) {
    for pi in i_lo..i_hi {
        let rows = K::MR.min(m - pi * K::MR);
        // SAFETY: the caller's contract covers panel pi and its slot in `dst`.
        unsafe { K::pack_a(a, pi * K::MR, rows, p0, kc, dst.wrapping_add((pi - i_lo) * K::MR * kc)) };
    }
}

/// Whether `gemm_with` reads A's full panels in place (kernels with
/// `IN_PLACE`) in a product of `n` columns, where a panel read in place
/// serves the few B panels it meets as well as a packed one. Measured on
/// Zen 4 against packing:
/// - column-major A (each step's `MR` values contiguous, as in a packed
///   panel): columns at most 64 apart always (the panel's `kc` steps within
///   a few KiB); up to 4096 apart with at most 256 columns 5-26% faster,
///   with 512-2048 columns up to 9% slower (the panel's scattered lines
///   leave L1 while many B panels stream past);
/// - row-major A (each row's `kc` steps contiguous): row strides that are
///   not a multiple of 2 KiB 0-7% faster; odd multiples of 2 KiB (the rows
///   in two groups of L1 sets) 3-9% faster up to 512 columns but 2% slower
///   at 1536; multiples of 4 KiB (every row in the same sets) 2-5% slower.
///
/// `rules` adds the CPU's stride limits (`plan::InPlace::col_stride_ok`).
fn a_reads_in_place<T>(a: Mat<T>, n: usize, rules: plan::InPlace) -> bool {
    if a.rs == 1 {
        return a.cs <= A_IN_PLACE_MAX_LD
            || (n <= 256 && a.cs <= 4096 && rules.col_stride_ok(a.cs * std::mem::size_of::<T>()));
    }
    let bytes = a.rs * std::mem::size_of::<T>();
    a.cs == 1 && (!bytes.is_multiple_of(2048) || (n <= 512 && !bytes.is_multiple_of(4096)))
}

/// Runs the micro-kernel on one `rows x cols` tile of C at `cptr` (row
/// stride `ldc`); a partial tile goes through `edge`, a full `MR x NR`
/// scratch tile. A's `MR x kc` panel is the view `apanel` (strides 1 and
/// `MR` when packed; others when read in place from a column-major or a
/// row-major A) and B's `kc` rows of `NR` values lie `ldb` apart (`NR`
/// when packed, B's row stride when read in place from a row-major B).
///
/// # Safety
/// As `MicroKernel::run`, with the panels readable at those strides and
/// `cptr` writable for `rows x cols`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<T: BiasAdd, K: MicroKernel<T>>(
    kc: usize,
    apanel: Mat<T>,
    (bpanel, ldb): (*const T, usize),
    cptr: *mut T,
    ldc: usize,
    rows: usize,
    cols: usize,
    accumulate: bool,
    edge: &mut [T; EDGE],
    bias: Option<Mat<T>>,
) {
    let nr = K::NR;
    let strided = apanel.rs != 1 || apanel.cs != K::MR || ldb != nr;
    // SAFETY: per the contract; the edge tile holds MR x NR <= EDGE values.
    unsafe {
        let run = |c: *mut T, ldc: usize| {
            if strided {
                K::run_strided(kc, apanel, (bpanel, ldb), c, ldc, accumulate);
            } else {
                K::run(kc, apanel.ptr, bpanel, c, ldc, accumulate);
            }
        };
        if rows == K::MR && cols == nr {
            run(cptr, ldc);
        } else {
            let e = edge.as_mut_ptr();
            if accumulate {
                for r in 0..rows {
                    for q in 0..cols {
                        *e.add(r * nr + q) = *cptr.add(r * ldc + q);
                    }
                }
            }
            run(e, nr);
            for r in 0..rows {
                for q in 0..cols {
                    *cptr.add(r * ldc + q) = *e.add(r * nr + q);
                }
            }
        }
        if let Some(v) = bias {
            // The finished tile, still in L1: add the bias to each row.
            if v.cs == 1 {
                T::add_to_rows(cptr, ldc, rows, cols, v.ptr);
            } else {
                for r in 0..rows {
                    for q in 0..cols {
                        let at = cptr.add(r * ldc + q);
                        *at = *at + *v.ptr.add(q * v.cs);
                    }
                }
            }
        }
    }
}

/// Elements whose GEMM can add a bias row to a finished tile.
pub(crate) trait BiasAdd: Copy + std::ops::Add<Output = Self> {
    /// `c[r * ldc + j] += bias[j]` for `r < rows`, `j < cols`.
    ///
    /// # Safety
    /// The rows of `c` and the `cols` values of `bias` are valid, and
    /// nothing else accesses those rows' `cols` values meanwhile.
    #[inline(always)]
    unsafe fn add_to_rows(c: *mut Self, ldc: usize, rows: usize, cols: usize, bias: *const Self) {
        for r in 0..rows {
            for q in 0..cols {
                // SAFETY: the caller's contract.
                unsafe {
                    let at = c.add(r * ldc + q);
                    *at = *at + *bias.add(q);
                }
            }
        }
    }
}

impl BiasAdd for i64 {}
impl BiasAdd for f64 {}

impl BiasAdd for f32 {
    #[inline(always)]
    unsafe fn add_to_rows(c: *mut f32, ldc: usize, rows: usize, cols: usize, bias: *const f32) {
        #[cfg(target_arch = "x86_64")]
        if isa() == Isa::Avx512 {
            /// The loop compiled for AVX-512.
            ///
            /// # Safety
            /// As `add_to_rows`, on a CPU with AVX-512F.
            #[target_feature(enable = "avx512f")]
            unsafe fn wide(c: *mut f32, ldc: usize, rows: usize, cols: usize, bias: *const f32) {
                for r in 0..rows {
                    for q in 0..cols {
                        // SAFETY: the caller's contract.
                        unsafe { *c.add(r * ldc + q) += *bias.add(q) };
                    }
                }
            }
            // SAFETY: the caller's contract; AVX-512F was detected (isa()).
            return unsafe { wide(c, ldc, rows, cols, bias) };
        }
        for r in 0..rows {
            for q in 0..cols {
                // SAFETY: the caller's contract.
                unsafe { *c.add(r * ldc + q) += *bias.add(q) };
            }
        }
    }
}

/// The bias of the tile whose columns start at `j0`, on the last depth
/// block only (`last`): the product is then complete, and the bias is
/// added once, as a separate `+ bias` would.
#[inline(always)]
fn tile_bias<T>(bias: Option<Mat<T>>, last: bool, j0: usize) -> Option<Mat<T>> {
    bias.filter(|_| last).map(|v| Mat {
        ptr: v.ptr.wrapping_add(j0 * v.cs),
        ..v
    })
}

/// Size of the scratch tile for partial tiles (the largest `MR x NR`).
const EDGE: usize = 16 * 32;

/// `C = A * B` (`C += A * B` with `acc`) in f32 with the best kernel for this CPU.
///
/// # Safety
/// As `gemm_with`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<f32>,
    b: Mat<f32>,
    c: *mut f32,
    ldc: usize,
    parallel: bool,
    acc: bool,
) {
    // SAFETY: the caller's contract, forwarded.
    unsafe { <f32 as Gemm>::gemm(m, n, k, a, BSrc::Mat(b), c, ldc, parallel, acc) }
}

/// `C = A * B` (`C += A * B` with `acc`) in f64 with the best kernel for this CPU.
///
/// # Safety
/// As `gemm_with`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn dgemm(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<f64>,
    b: Mat<f64>,
    c: *mut f64,
    ldc: usize,
    parallel: bool,
    acc: bool,
) {
    // SAFETY: the caller's contract, forwarded.
    unsafe { <f64 as Gemm>::gemm(m, n, k, a, BSrc::Mat(b), c, ldc, parallel, acc) }
}

/// Element types with a GEMM entry taking any [`BSrc`] and accumulating on
/// request (the convolution kernels' entry).
pub(crate) trait Gemm: Element {
    /// `C = A * B`, or `C += A * B` with `acc`.
    ///
    /// # Safety
    /// As `gemm_with` (for B, as [`BSrc::pack`]).
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        m: usize,
        n: usize,
        k: usize,
        a: Mat<Self>,
        b: BSrc<'_, Self>,
        c: *mut Self,
        ldc: usize,
        parallel: bool,
        acc: bool,
    ) {
        // SAFETY: the same contract.
        unsafe { Self::gemm_bias(m, n, k, a, b, c, ldc, parallel, acc, None) }
    }

    /// As [`Gemm::gemm`], then `bias` (element `j` at `bias.ptr + j *
    /// bias.cs`, `n` of them) added to every row of C once the product is
    /// complete: the bits of a separate `C + bias`, without its pass over C.
    ///
    /// # Safety
    /// As `gemm`, and `bias` (when given) is readable for `n` values.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_bias(
        m: usize,
        n: usize,
        k: usize,
        a: Mat<Self>,
        b: BSrc<'_, Self>,
        c: *mut Self,
        ldc: usize,
        parallel: bool,
        acc: bool,
        bias: Option<Mat<Self>>,
    );
}

/// Runs `gemm_with` with the AVX-512 f32 kernel of `tile`.
///
/// # Safety
/// As `gemm_with`, on a CPU with AVX-512.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn avx512_f32_gemm(
    tile: plan::Tile,
    m: usize,
    n: usize,
    k: usize,
    a: Mat<f32>,
    b: BSrc<'_, f32>,
    c: *mut f32,
    ldc: usize,
    parallel: bool,
    acc: bool,
    bias: Option<Mat<f32>>,
) {
    use plan::Tile;
    // SAFETY: in every arm, the caller's contract, forwarded; AVX-512 was detected.
    unsafe {
        match tile {
            Tile::R12C32 => gemm_with::<f32, kernels::Avx512F32>(m, n, k, a, b, c, ldc, parallel, acc, bias),
            Tile::R8C32 => gemm_with::<f32, kernels::Avx512F32R8>(m, n, k, a, b, c, ldc, parallel, acc, bias),
            Tile::R8C48 => gemm_with::<f32, kernels::Avx512F32W48>(m, n, k, a, b, c, ldc, parallel, acc, bias),
            Tile::R6C64 => gemm_with::<f32, kernels::Avx512F32W64>(m, n, k, a, b, c, ldc, parallel, acc, bias),
        }
    }
}

/// The AVX-512 f32 tile for `m x n` with B from `b`: the one whose panels a
/// [`PackedB`] already holds, else this CPU's choice for the shape.
fn f32_tile_for(m: usize, n: usize, b: BSrc<'_, f32>) -> plan::Tile {
    use plan::Tile;
    let chosen = plan::f32_tile(m, n);
    match b {
        BSrc::Pack(p) => match p.packed_nr() {
            Some(32) if chosen.shape().1 != 32 => Tile::R12C32,
            Some(48) => Tile::R8C48,
            Some(64) => Tile::R6C64,
            _ => chosen,
        },
        BSrc::Mat(_) => chosen,
    }
}

macro_rules! float_gemm {
    ($t:ty, $avx512:expr, $avx2:ty) => {
        impl Gemm for $t {
            #[allow(clippy::too_many_arguments)]
            unsafe fn gemm_bias(
                m: usize,
                n: usize,
                k: usize,
                a: Mat<$t>,
                b: BSrc<'_, $t>,
                c: *mut $t,
                ldc: usize,
                parallel: bool,
                acc: bool,
                bias: Option<Mat<$t>>,
            ) {
                #[cfg(target_arch = "x86_64")]
                match isa() {
                    Isa::Avx512 => {
                        // SAFETY: the caller's contract; the kernel's instruction set was detected.
                        return unsafe { $avx512(m, n, k, a, b, c, ldc, parallel, acc, bias) };
                    }
                    // SAFETY: the caller's contract; the kernel's instruction set was detected.
                    Isa::Avx2 => return unsafe { gemm_with::<$t, $avx2>(m, n, k, a, b, c, ldc, parallel, acc, bias) },
                    Isa::Baseline => {}
                }
                // SAFETY: the caller's contract, forwarded.
                unsafe { gemm_with::<$t, Generic>(m, n, k, a, b, c, ldc, parallel, acc, bias) }
            }
        }
    };
}
/// Float types whose B operand can be packed once for many products
/// ([`PackedB`], passed as `BSrc::Pack`).
pub(crate) trait Prepack: Gemm + Copy + Default {
    /// Packs the `k x n` matrix `b` for this machine's kernel.
    ///
    /// # Safety
    /// `b` views a readable `k x n` matrix.
    unsafe fn prepack_b(b: Mat<Self>, k: usize, n: usize) -> PackedB<Self>;
}

macro_rules! prepack {
    ($t:ty, $avx512:ty, $avx2:ty) => {
        impl Prepack for $t {
            unsafe fn prepack_b(b: Mat<$t>, k: usize, n: usize) -> PackedB<$t> {
                #[cfg(target_arch = "x86_64")]
                match isa() {
                    // SAFETY: the caller's contract; packing with the kernel `gemm` will run.
                    Isa::Avx512 => return unsafe { PackedB::new::<$avx512>(b, k, n) },
                    // SAFETY: as above.
                    Isa::Avx2 => return unsafe { PackedB::new::<$avx2>(b, k, n) },
                    Isa::Baseline => {}
                }
                // SAFETY: the caller's contract.
                unsafe { PackedB::new::<Generic>(b, k, n) }
            }
        }
    };
}
prepack!(f64, kernels::Avx512F64, kernels::Avx2F64);

impl Prepack for f32 {
    /// On AVX-512, the panels of the tile this CPU picks for B's columns
    /// (the product's rows are not known yet; see [`f32_tile_for`]).
    unsafe fn prepack_b(b: Mat<f32>, k: usize, n: usize) -> PackedB<f32> {
        #[cfg(target_arch = "x86_64")]
        match isa() {
            Isa::Avx512 => {
                // SAFETY: in every arm, the caller's contract; packing for the kernel `gemm` will run.
                return unsafe {
                    // Rows unknown: a tall product's choice, by the columns' padding.
                    match plan::f32_tile(1 << 20, n).shape().1 {
                        48 => PackedB::new::<kernels::Avx512F32W48>(b, k, n),
                        64 => PackedB::new::<kernels::Avx512F32W64>(b, k, n),
                        _ => PackedB::new::<kernels::Avx512F32>(b, k, n),
                    }
                };
            }
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { PackedB::new::<kernels::Avx2F32>(b, k, n) },
            Isa::Baseline => {}
        }
        // SAFETY: the caller's contract.
        unsafe { PackedB::new::<Generic>(b, k, n) }
    }
}

/// The AVX-512 f32 product with the tile for its shape.
///
/// # Safety
/// As `gemm_with`, on a CPU with AVX-512.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn avx512_f32(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<f32>,
    b: BSrc<'_, f32>,
    c: *mut f32,
    ldc: usize,
    parallel: bool,
    acc: bool,
    bias: Option<Mat<f32>>,
) {
    // SAFETY: the caller's contract.
    unsafe { avx512_f32_gemm(f32_tile_for(m, n, b), m, n, k, a, b, c, ldc, parallel, acc, bias) }
}

float_gemm!(f32, avx512_f32, kernels::Avx2F32);
float_gemm!(f64, gemm_with::<f64, kernels::Avx512F64>, kernels::Avx2F64);

impl Gemm for i64 {
    /// Wrapping arithmetic, summing in k order; a packing B is first
    /// written out as one dense panel.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_bias(
        m: usize,
        n: usize,
        k: usize,
        a: Mat<i64>,
        b: BSrc<'_, i64>,
        c: *mut i64,
        ldc: usize,
        _parallel: bool,
        acc: bool,
        bias: Option<Mat<i64>>,
    ) {
        if m == 0 || n == 0 {
            return;
        }
        let mut dense = Vec::new();
        let b = match b {
            BSrc::Mat(b) => b,
            BSrc::Pack(p) => {
                dense = vec![0i64; k * n];
                // SAFETY: one panel of all n columns and k rows fits `dense`.
                unsafe { p.pack(0, k, n, 0, 1, n.max(1), dense.as_mut_ptr()) };
                Mat {
                    ptr: dense.as_ptr(),
                    rs: n,
                    cs: 1,
                }
            }
        };
        for i in 0..m {
            for j in 0..n {
                let mut s: i64 = 0;
                for p in 0..k {
                    // SAFETY: inside A and B (the caller's contract, or `dense`).
                    let (x, y) = unsafe { (*a.ptr.add(i * a.rs + p * a.cs), *b.ptr.add(p * b.rs + j * b.cs)) };
                    s = s.wrapping_add(x.wrapping_mul(y));
                }
                // SAFETY: inside C and the bias (the caller's contract).
                unsafe {
                    let at = c.add(i * ldc + j);
                    let v = if acc { (*at).wrapping_add(s) } else { s };
                    *at = match bias {
                        Some(bv) => v.wrapping_add(*bv.ptr.add(j * bv.cs)),
                        None => v,
                    };
                }
            }
        }
        drop(dense);
    }
}

/// Integer matrix product with wrapping i64 arithmetic (summing in k order).
///
/// # Safety
/// As `gemm_with`.
#[allow(clippy::too_many_arguments)]
unsafe fn igemm<T: Element>(m: usize, n: usize, k: usize, a: Mat<T>, b: Mat<T>, c: *mut T, ldc: usize) {
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
    if a.numel() == 0 || b.numel() == 0 {
        // An empty result, or an empty contraction: zeros (any dtypes).
        out.zero_()?;
        return Ok(());
    }
    match a.dtype() {
        DType::F16 | DType::BF16 => {
            // Accumulate in f32 and round once (as PyTorch's CPU kernels).
            let tmp = crate::dispatch::call1(&crate::ops::linalg::MatMulF32, &[a, b])?;
            super::copy::cast_into(out, &tmp)
        }
        dt => with_dtype!(dt, T => batched::<T, T>(a, b, out, |m, n, k, am, bm, c, parallel| {
            // SAFETY: `batched`'s contract for the callback: the views and the
            // output block are inside the locked storages, disjoint per batch.
            unsafe {
                match T::DTYPE {
                    DType::F32 => sgemm(m, n, k, cast_mat(am), cast_mat(bm), c.cast(), n, parallel, false),
                    DType::F64 => dgemm(m, n, k, cast_mat(am), cast_mat(bm), c.cast(), n, parallel, false),
                    _ => igemm(m, n, k, am, bm, c, n),
                }
            }
        })),
    }
}

/// CPU kernel of `addmm`: an f32 / f64 `input + a @ b` whose `input` is a
/// contiguous row vector (`[m]` or `[1, m]`, a Linear's bias) with `beta =
/// alpha = 1` adds the bias to each finished tile of the product (the bits
/// of the composite's separate add, without its pass over the result);
/// every other case runs the composite.
pub(crate) fn addmm_kernel(c: &crate::dispatch::Call) -> Result<crate::dispatch::Tensors> {
    use crate::ops::addmm::{AddProduct, AddProductKind};
    let op: &AddProduct = crate::dispatch::downcast_op(c.op)?;
    let (input, a, b) = (c.inputs[0], c.inputs[1], c.inputs[2]);
    let dt = a.dtype();
    let fused = op.kind == AddProductKind::Addmm
        && op.alpha == 1.0
        && op.beta == 1.0
        && matches!(dt, DType::F32 | DType::F64)
        && b.dtype() == dt
        && input.dtype() == dt
        && a.ndim() == 2
        && b.ndim() == 2
        && a.shape()[1] == b.shape()[0]
        && a.shape()[1] > 0
        && input.is_contiguous()
        && input.numel() == b.shape()[1]
        && (input.ndim() == 1 || (input.ndim() == 2 && input.shape()[0] == 1));
    if !fused {
        return crate::ops::addmm::add_product_kernel(c);
    }
    let specs = crate::dispatch::Op::infer(op, c.inputs)?;
    // SAFETY: the product below writes every element of the output (k > 0).
    let out = unsafe { Tensor::uninit_for_spec("addmm", &specs[0], crate::Device::Cpu)? };
    match dt {
        DType::F32 => fused_addmm::<f32>(input, a, b, &out)?,
        _ => fused_addmm::<f64>(input, a, b, &out)?,
    }
    Ok(smallvec::smallvec![out])
}

/// `out = a @ b + bias` for [`addmm_kernel`]: `out` contiguous `n x m`,
/// `bias` `m` contiguous values.
fn fused_addmm<T: Gemm>(bias: &Tensor, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    let (n, k, m) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    let acc = access("addmm", &[a, b, bias], &[out])?;
    let (ast, bst) = (a.strides(), b.strides());
    let view = |p: *const u8, rs: usize, cs: usize| Mat {
        ptr: p as *const T,
        rs,
        cs,
    };
    // Below ~8 MFLOP a parallel region costs more than it saves (as `mm`).
    let parallel = n * m * k >= 1 << 22;
    // SAFETY: the views cover a, b and the bias inside their storages (locked
    // for reading by `acc`), and `out` is a contiguous n x m (locked for writing).
    unsafe {
        T::gemm_bias(
            n,
            m,
            k,
            view(acc.ins[0], ast[0], ast[1]),
            BSrc::Mat(view(acc.ins[1], bst[0], bst[1])),
            acc.outs[0] as *mut T,
            m,
            parallel,
            false,
            Some(view(acc.ins[2], 0, 1)),
        )
    };
    Ok(())
}

/// Kernel of `bmm.dtype` ([`crate::ops::linalg::MatMulF32`]): f16 / bf16
/// operands, f32 result, through `half::half_gemm` (the native bf16
/// product where the CPU has AVX512-BF16, else tiles widened while they
/// are packed: no widened copy of an operand).
pub(crate) fn matmul_f32_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let (a, b, out) = (inputs[0], inputs[1], outputs[0]);
    if a.numel() == 0 || b.numel() == 0 {
        out.zero_()?;
        return Ok(());
    }
    match a.dtype() {
        DType::BF16 => batched::<::half::bf16, f32>(a, b, out, |m, n, k, am, bm, c, parallel| {
            // SAFETY: as in `matmul_kernel`.
            unsafe { half::half_gemm(m, n, k, am, bm, c, n, parallel) }
        }),
        DType::F16 => batched::<::half::f16, f32>(a, b, out, |m, n, k, am, bm, c, parallel| {
            // SAFETY: as in `matmul_kernel`.
            unsafe { half::half_gemm(m, n, k, am, bm, c, n, parallel) }
        }),
        dt => Err(crate::Error::dtype(
            "bmm",
            dt,
            "out_dtype float32 needs float16 or bfloat16 operands",
        )),
    }
}

/// Meta-device kernel of `mm` and `bmm`: for f16 / bf16 operands it makes
/// the CPU kernel's temporary (the f32 product, through `bmm.dtype`), so
/// that a memory plan sees the bytes the CPU holds while it runs.
pub(crate) fn matmul_meta_kernel(_op: &dyn Op, inputs: &[&Tensor], _outputs: &[&Tensor]) -> Result<()> {
    let (a, b) = (inputs[0], inputs[1]);
    if matches!(a.dtype(), DType::F16 | DType::BF16) && a.numel() > 0 && b.numel() > 0 {
        crate::dispatch::call1(&crate::ops::linalg::MatMulF32, &[a, b])?;
    }
    Ok(())
}

/// Runs `gemm(m, n, k, a_i, b_i, c_i, parallel)` for every batch `i` of
/// `a [..., m, k] @ b [..., k, n]` into the contiguous `out`, the batches in
/// parallel when each is small. The callback's views and `c_i` (an `m x n`
/// block with row stride `n`) lie inside the storages, locked for the call,
/// and batches write disjoint blocks.
fn batched<I: Element, O: Element>(
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
    gemm: impl Fn(usize, usize, usize, Mat<I>, Mat<I>, *mut O, bool) + Sync,
) -> Result<()> {
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
    // Below ~8 MFLOP a parallel region costs more (waking threads) than it saves.
    let small = m * n * k < 1 << 22;
    let one = |bi: usize, parallel: bool| {
        let am = Mat {
            ptr: (ap as *const I).wrapping_add(offset(bi, ast)),
            rs: ast[nd - 2],
            cs: ast[nd - 1],
        };
        let bm = Mat {
            ptr: (bp as *const I).wrapping_add(offset(bi, bst)),
            rs: bst[nd - 2],
            cs: bst[nd - 1],
        };
        // Batch bi of `a` and `b` is inside their storages (locked for
        // reading by `acc`), its m x n block of the contiguous output is inside
        // `out` (locked for writing), and batches write disjoint blocks.
        gemm(m, n, k, am, bm, (cp as *mut O).wrapping_add(bi * m * n), parallel);
    };
    if small && nb > 1 && rayon::current_num_threads() > 1 {
        super::warm::par_for_each(nb, |bi| one(bi, false));
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

#[cfg(test)]
mod tests {
    use super::kernels::{Generic, MicroKernel};
    use super::{BSrc, Mat, a_reads_in_place, gemm_blocked, gemm_with, plan};

    /// Both operands packed.
    const NO_IN_PLACE: plan::InPlace = plan::InPlace {
        a: false,
        b: false,
        short_strides: false,
    };
    /// Both read in place wherever the layout allows, at any stride.
    const ANY_STRIDE: plan::InPlace = plan::InPlace {
        a: true,
        b: true,
        short_strides: false,
    };

    fn data(len: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect()
    }

    /// The bias added to each finished tile gives the bits of the product
    /// followed by a separate `+ bias`, in both loop orders, on partial
    /// tiles and over several depth blocks, serial and parallel.
    fn check<K: MicroKernel<f32>>() {
        for &(m, n, k) in &[(1, 1, 1), (13, 37, 5), (40, 70, 300), (25, 33, 600)] {
            let a = data(m * k, 1);
            let b = data(k * n, 2);
            let bias = data(n, 3);
            let am = Mat {
                ptr: a.as_ptr(),
                rs: k,
                cs: 1,
            };
            let bm = Mat {
                ptr: b.as_ptr(),
                rs: 1,
                cs: k,
            };
            let bv = Mat {
                ptr: bias.as_ptr(),
                rs: 0,
                cs: 1,
            };
            for parallel in [false, true] {
                let mut want = vec![0f32; m * n];
                let mut got = vec![f32::NAN; m * n];
                // SAFETY: the views cover the data; the outputs hold m x n; the kernel's ISA was checked.
                unsafe {
                    gemm_with::<f32, K>(m, n, k, am, BSrc::Mat(bm), want.as_mut_ptr(), n, parallel, false, None);
                    gemm_with::<f32, K>(
                        m,
                        n,
                        k,
                        am,
                        BSrc::Mat(bm),
                        got.as_mut_ptr(),
                        n,
                        parallel,
                        false,
                        Some(bv),
                    );
                }
                for (i, w) in want.iter_mut().enumerate() {
                    *w += bias[i % n];
                }
                let same = want.iter().zip(&got).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "m {m} n {n} k {k} parallel {parallel}");
            }
        }
    }

    /// A row-major B and a column-major A with short columns, or a
    /// row-major A, read in place (kernels with `IN_PLACE`; partial last
    /// panels packed) give the bits of the same operands packed from
    /// copies in the other layouts: with and without accumulation and
    /// bias, strides wider than the rows, partial tiles, several depth
    /// blocks, serial and parallel. And the default `run_strided` (a copy,
    /// then `run`) gives `run`'s bits, for column- and row-major A panels.
    fn check_in_place<K: MicroKernel<f32>>() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (13, 37, 5),
            (40, 70, 300),
            (25, 96, 600),
            (12, 32, 257),
            (20, 40, 512),
            (100, 40, 70),
        ] {
            let bias = data(n, 5);
            let bv = Mat {
                ptr: bias.as_ptr(),
                rs: 0,
                cs: 1,
            };
            for pad in [0, 3] {
                let (lda, ldb) = (m + pad, n + pad);
                let a_cm = data(k * lda, 4);
                let a_rm: Vec<f32> = (0..m * k).map(|i| a_cm[(i % k) * lda + i / k]).collect();
                let b_rm = data(k * ldb, 6);
                let b_cm: Vec<f32> = (0..n * k).map(|i| b_rm[(i % k) * ldb + i / k]).collect();
                let mat = |v: &Vec<f32>, rs: usize, cs: usize| Mat {
                    ptr: v.as_ptr(),
                    rs,
                    cs,
                };
                // A row-major with padded rows (k + pad apart: 2 KiB for k = 512 and no pad).
                let lda_rm = k + pad;
                let a_rm_pad: Vec<f32> = (0..m * lda_rm)
                    .map(|x| {
                        if x % lda_rm < k {
                            a_rm[x / lda_rm * k + x % lda_rm]
                        } else {
                            f32::NAN
                        }
                    })
                    .collect();
                let packed = (mat(&a_rm, k, 1), mat(&b_cm, 1, k));
                let in_place = [mat(&a_cm, 1, lda), mat(&a_rm_pad, lda_rm, 1)];
                assert!(in_place.iter().all(|&a| a_reads_in_place(a, n, ANY_STRIDE)));
                for a_in in in_place {
                    for (parallel, acc, bias) in [(false, false, None), (true, true, Some(bv)), (false, true, Some(bv))]
                    {
                        let start = data(m * n, 7);
                        let (mut want, mut got) = (start.clone(), start);
                        // Read in place (where the kernel can) whatever this CPU's choice.
                        let bl = super::kernel_blocking::<f32, K>();
                        let (none, both) = (NO_IN_PLACE, ANY_STRIDE);
                        // SAFETY: the views cover the data; the outputs hold m x n; the kernel's ISA was checked.
                        unsafe {
                            let (a, b) = packed;
                            let w = want.as_mut_ptr();
                            gemm_blocked::<f32, K>(m, n, k, a, BSrc::Mat(b), w, n, parallel, acc, bias, bl, none);
                            let b = mat(&b_rm, ldb, 1);
                            let g = got.as_mut_ptr();
                            gemm_blocked::<f32, K>(m, n, k, a_in, BSrc::Mat(b), g, n, parallel, acc, bias, bl, both);
                        }
                        let same = want.iter().zip(&got).all(|(x, y)| x.to_bits() == y.to_bits());
                        let layout = if a_in.rs == 1 { "column-major" } else { "row-major" };
                        assert!(
                            same,
                            "{layout} A: m {m} n {n} k {k} pad {pad} parallel {parallel} acc {acc}"
                        );
                    }
                }
            }
        }
        let (kc, mr, nr) = (7, K::MR, K::NR);
        let (a, b) = (data(kc * (mr + 2), 8), data(kc * (nr + 5), 9));
        let pa: Vec<f32> = (0..kc * mr).map(|i| a[(i / mr) * (mr + 2) + i % mr]).collect();
        let pb: Vec<f32> = (0..kc * nr).map(|i| b[(i / nr) * (nr + 5) + i % nr]).collect();
        // The same A panel row-major: row i at i * (kc + 3).
        let a_rows: Vec<f32> = (0..mr * (kc + 3))
            .map(|x| {
                if x % (kc + 3) < kc {
                    pa[x % (kc + 3) * mr + x / (kc + 3)]
                } else {
                    f32::NAN
                }
            })
            .collect();
        let (mut want, mut got, mut got_rows) = (vec![0f32; mr * nr], vec![1f32; mr * nr], vec![2f32; mr * nr]);
        // SAFETY: the panels hold kc steps of MR / NR values (mr + 2 / nr + 5 apart, or MR rows kc + 3 apart); the
        // tiles MR x NR; ISA checked.
        unsafe {
            K::run(kc, pa.as_ptr(), pb.as_ptr(), want.as_mut_ptr(), nr, false);
            let cm = Mat {
                ptr: a.as_ptr(),
                rs: 1,
                cs: mr + 2,
            };
            K::run_strided(kc, cm, (b.as_ptr(), nr + 5), got.as_mut_ptr(), nr, false);
            let rm = Mat {
                ptr: a_rows.as_ptr(),
                rs: kc + 3,
                cs: 1,
            };
            K::run_strided(kc, rm, (b.as_ptr(), nr + 5), got_rows.as_mut_ptr(), nr, false);
        }
        assert_eq!(want, got);
        assert_eq!(want, got_rows);
    }

    /// Runs `$check::<K>()` for every f32 kernel `K` this CPU has (the
    /// portable one always), saying which it skips.
    macro_rules! on_every_f32_kernel {
        ($check:ident, $what:literal) => {{
            $check::<Generic>();
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    $check::<super::kernels::Avx2F32>();
                } else {
                    eprintln!(concat!(
                        "SKIPPED: this CPU has no AVX2 + FMA; the AVX2 kernel's ",
                        $what,
                        " is not tested here"
                    ));
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    $check::<super::kernels::Avx512F32>();
                    $check::<super::kernels::Avx512F32R8>();
                    $check::<super::kernels::Avx512F32W48>();
                    $check::<super::kernels::Avx512F32W64>();
                } else {
                    eprintln!(concat!(
                        "SKIPPED: this CPU has no AVX-512F; the AVX-512 kernel's ",
                        $what,
                        " is not tested here"
                    ));
                }
            }
        }};
    }

    /// Every blocking the rule gives for L1d caches of 16-80 KiB and L2
    /// caches of 256 KiB-4 MiB gives the exact product (small integers:
    /// every partial sum is exact in f32) with every kernel, B packed or
    /// read in place, on partial tiles over several depth blocks; and the
    /// same bits, on random values, at 1 and 2 threads.
    fn check_blockings<K: MicroKernel<f32>>() {
        let order = super::kernel_order::<f32, K>();
        let mut seen = Vec::new();
        for l1 in [16 << 10, 32 << 10, 48 << 10, 80 << 10] {
            for l2 in [256 << 10, 1 << 20, 1280 << 10, 2 << 20, 4 << 20] {
                let bl = plan::blocking_for(order, K::depth_mr(), K::NR, 4, l1, l2, 0);
                if !seen.contains(&bl) {
                    seen.push(bl);
                }
            }
        }
        let two = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for bl in seen {
            for &(m, n, k) in &[(37, 150, 600), (130, 70, 1100), (5, 300, 129)] {
                let small = |len: usize, seed: u32| -> Vec<f32> {
                    data(len, seed).iter().map(|x| (x * 16.0).round()).collect()
                };
                let (a, b) = (small(m * k, 11), small(k * n, 12));
                let exact: Vec<f32> = (0..m * n)
                    .map(|x| {
                        (0..k)
                            .map(|p| (a[x / n * k + p] * b[p * n + x % n]) as i64)
                            .sum::<i64>() as f32
                    })
                    .collect();
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
                for ip in [NO_IN_PLACE, ANY_STRIDE] {
                    let mut got = vec![f32::NAN; m * n];
                    // SAFETY: the views cover the data; the output holds m x n; the kernel's ISA was checked.
                    unsafe {
                        let c = got.as_mut_ptr();
                        gemm_blocked::<f32, K>(m, n, k, am, BSrc::Mat(bm), c, n, false, false, None, bl, ip);
                    }
                    assert!(got == exact, "{bl:?} m {m} n {n} k {k} {ip:?}");
                }
                let (a, b) = (data(m * k, 13), data(k * n, 14));
                let (am, bm) = (Mat { ptr: a.as_ptr(), ..am }, Mat { ptr: b.as_ptr(), ..bm });
                let run = |parallel: bool| {
                    let mut c = vec![0f32; m * n];
                    // SAFETY: as above.
                    unsafe {
                        let cp = c.as_mut_ptr();
                        let ip = NO_IN_PLACE;
                        gemm_blocked::<f32, K>(m, n, k, am, BSrc::Mat(bm), cp, n, parallel, false, None, bl, ip);
                    }
                    c
                };
                let one = run(false);
                let both = two.install(|| run(true));
                let same = one.iter().zip(&both).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{bl:?} m {m} n {n} k {k}: 1 and 2 threads differ");
            }
        }
    }

    #[test]
    fn every_blocking_gives_the_product_at_any_thread_count() {
        on_every_f32_kernel!(check_blockings, "blockings");
    }

    /// Every AVX-512 f32 tile blocks its depth alike on a CPU: same bits.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_avx512_tile_gives_the_same_bits() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("SKIPPED: this CPU has no AVX-512F; the AVX-512 tiles are not compared here");
            return;
        }
        let (m, n, k) = (50, 200, 700);
        let (a, b) = (data(m * k, 21), data(k * n, 22));
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
        let run = |tile: plan::Tile| {
            let mut c = vec![0f32; m * n];
            // SAFETY: the views cover the data; the output holds m x n; AVX-512F was detected.
            unsafe { super::avx512_f32_gemm(tile, m, n, k, am, BSrc::Mat(bm), c.as_mut_ptr(), n, false, false, None) };
            c
        };
        use plan::Tile;
        let first = run(Tile::R12C32);
        for t in [Tile::R8C32, Tile::R8C48, Tile::R6C64] {
            assert!(run(t) == first, "{t:?} differs from 12x32");
        }
    }

    #[test]
    fn operands_read_in_place_give_the_packed_bits() {
        on_every_f32_kernel!(check_in_place, "in-place operands");
    }

    #[test]
    fn bias_epilogue_matches_a_separate_add() {
        on_every_f32_kernel!(check, "bias");
    }
}
