//! CPU kernels of fused scaled dot-product attention
//! (`_scaled_dot_product_flash_attention_for_cpu`) and its derivative.
//!
//! Forward: for each block of [`QB`] query rows of one batch entry (tasks
//! take contiguous chunks of entries, or of blocks when there are few
//! entries, with one scratch per chunk), the keys the block can see (a
//! causal block stops at its last row) are multiplied by its queries into
//! a scratch block of *transposed* scores, one row per key and one column
//! per query, so the softmax over each query's keys runs down the rows
//! with whole vectors across the queries (the maximum subtracted, the sum
//! in fixed blocks of keys); the result is the probabilities (read through
//! a transposed view) times the values, each row divided by its sum; the
//! row's log-sum-exp is saved. Backward: per batch entry (tasks take
//! contiguous chunks of entries, one scratch each), with its query blocks
//! transposed as the forward's: the probabilities recomputed from the
//! saved log-sum-exp, `dPᵀ = v dOᵀ`, `dSᵀ = Pᵀ (dPᵀ - rowsum(dO · O)) ·
//! scale`, then `dQ = dS k` and `dK += dSᵀ q`, `dV += Pᵀ dO` accumulated
//! block by block from the last (which sees every key the others see, so
//! its products initialise them), so the result does not depend on the
//! thread count. Each block's queries and result gradient, when their rows
//! are contiguous, are first transposed, so that the score products read
//! them in place, unpacked (the bits of the packed products); the keys,
//! the values and the blocks are read in place as they lie (by the
//! AVX-512 products unpacked, where their row strides allow). The
//! result and the gradients are written with their own row
//! strides (the operators lay them out like their inputs). f16 / bf16
//! compute in f32.

use super::access::access;
use super::gemm::{BSrc, Gemm, Mat};
use super::math::exp_f32_fma;
use super::norm::{Real, sum2};
use super::simd::multiversion;
use super::transpose::{transpose_f32, transpose_scalar};
use super::warm::par_for_each;
use crate::dispatch::{Op, downcast_op};
use crate::ops::attention::{SdpaFlash, SdpaFlashBackward};
use crate::{DType, Error, Result, Tensor, TensorOptions};

/// Query rows per block.
const QB: usize = 32;

/// Products of at least this many multiply-adds may use several threads
/// when the operator has a single task.
const PARALLEL_GEMM: usize = 1 << 22;

const NAME: &str = "scaled_dot_product_attention";

/// The score-block kernels of one float type. A block holds the scores
/// of `m` query rows (from query row `i0`) against the keys `0..ncols`
/// *transposed*: row `j` is key `j`, its columns the queries (`ld`
/// apart, a multiple of [`W`]; the columns from `m` are padding, computed
/// in their own lanes and never read), so every per-query reduction runs down the rows
/// with whole vectors across the queries (no short rows, no horizontal
/// sums), its accumulators in registers.
pub(crate) trait AttnFloat: Real + Gemm {
    /// Softmax over the keys of each query column of `sc` after the scale:
    /// the unnormalised probabilities in place (0 where a causal query
    /// cannot see the key), each query's log-sum-exp
    /// into `lse` and the reciprocal of its sum into `inv` (-inf and 0 for
    /// a query that sees no key, or only -inf scores).
    #[allow(clippy::too_many_arguments)]
    fn softmax_cols(
        sc: &mut [Self],
        ld: usize,
        m: usize,
        i0: usize,
        causal: bool,
        scale: Self,
        lse: &mut [Self],
        inv: &mut [Self],
    );
    /// The probabilities `exp(s · scale - lse)` of the block, in place (0
    /// where a causal query cannot see the key, and for a query whose
    /// log-sum-exp is -inf).
    #[allow(clippy::too_many_arguments)]
    fn prob_cols(sc: &mut [Self], ld: usize, m: usize, i0: usize, causal: bool, scale: Self, lse: &[Self]);
    /// `dp ← p (dp - d[c]) · scale` for column `c < m` of the rows of `ld`
    /// (exactly 0 where `p` is 0).
    fn grad_score_cols(p: &[Self], dp: &mut [Self], ld: usize, m: usize, d: &[Self], scale: Self);
    /// `d[r] = sum(g[r] · o[r])` over `d.len()` rows of `n`, row `r` of
    /// `g` starting at `r * gs` and of `o` at `r * os`.
    fn row_dots(g: &[Self], gs: usize, o: &[Self], os: usize, n: usize, d: &mut [Self]);
    /// `dst[j * ldd + i] = src[i * lds + j]` for `i < rows`, `j < cols`.
    ///
    /// # Safety
    /// As [`transpose_f32`].
    unsafe fn transpose(src: *const Self, rows: usize, cols: usize, lds: usize, dst: *mut Self, ldd: usize);
}

/// Query columns per vector pass of the block kernels (their accumulators
/// stay in registers); the block's row stride is a multiple of it.
const W: usize = 16;

/// The row stride of a score block of `m` query columns.
fn block_ld(m: usize) -> usize {
    m.next_multiple_of(W)
}

/// Lane indices of a [`W`]-column pass.
const LANE: [i32; W] = {
    let mut l = [0; W];
    let mut k = 0;
    while k < W {
        l[k] = k as i32;
        k += 1;
    }
    l
};

/// The first of the [`W`] query columns from query row `q0` that sees key
/// `j`: lane `k` sees it when `LANE[k] >= first`. -1 when all do (no
/// causal mask, or `j <= q0`; -1 rather than 0 keeps every lane's test a
/// comparison, which vectorises), [`W`] when none does (query `i` sees
/// the keys `0..=i`).
#[inline(always)]
fn first_seeing(j: usize, q0: usize, causal: bool) -> i32 {
    if !causal || j <= q0 { -1 } else { (j - q0).min(W) as i32 }
}

/// Keys summed per partial sum of a query's softmax denominator: the
/// partial sums are added in order, so a long row's rounding grows with
/// `SUM_BLOCK + S / SUM_BLOCK`, not `S`, and never with the thread count.
const SUM_BLOCK: usize = 64;

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn softmax_cols_generic<T: Real>(
    sc: &mut [T],
    ld: usize,
    m: usize,
    i0: usize,
    causal: bool,
    scale: T,
    lse: &mut [T],
    inv: &mut [T],
    exp: impl Fn(T) -> T,
) {
    let neg_inf = T::of(f64::NEG_INFINITY);
    let ncols = sc.len() / ld;
    // The padding columns (from m) are computed like the others, each in
    // its own lane, and never read.
    for c0 in (0..m).step_by(W) {
        let q0 = i0 + c0;
        // Keys past the chunk's last query are hidden from all of it.
        let seen = if causal { ncols.min(q0 + W) } else { ncols };
        // The columns' maxima (NaN ignored: it reaches the result through
        // the exponentials).
        let mut mx = [neg_inf; W];
        for j in 0..seen {
            let from = first_seeing(j, q0, causal);
            let Some(row) = sc[j * ld + c0..].first_chunk_mut::<W>() else {
                continue; // never: c0 + W <= ld (block_ld)
            };
            for k in 0..W {
                let x = row[k] * scale;
                row[k] = x;
                let s = if LANE[k] >= from { x } else { neg_inf };
                mx[k] = if s > mx[k] { s } else { mx[k] };
            }
        }
        // A column with no finite maximum subtracts 0: its exponentials
        // are 0 (only -inf scores) or NaN (a NaN or +inf score).
        let mut shift = [T::ZERO; W];
        for k in 0..W {
            shift[k] = if mx[k] == neg_inf { T::ZERO } else { mx[k] };
        }
        let mut total = [T::ZERO; W];
        for j0 in (0..seen).step_by(SUM_BLOCK) {
            let mut part = [T::ZERO; W];
            for j in j0..seen.min(j0 + SUM_BLOCK) {
                let from = first_seeing(j, q0, causal);
                let Some(row) = sc[j * ld + c0..].first_chunk_mut::<W>() else {
                    continue; // never: c0 + W <= ld (block_ld)
                };
                for k in 0..W {
                    let e = exp(row[k] - shift[k]);
                    let e = if LANE[k] >= from { e } else { T::ZERO };
                    row[k] = e;
                    part[k] = part[k] + e;
                }
            }
            for k in 0..W {
                total[k] = total[k] + part[k];
            }
        }
        for j in seen..ncols {
            sc[j * ld + c0..j * ld + c0 + W].fill(T::ZERO);
        }
        for k in 0..W.min(m - c0) {
            if mx[k] == neg_inf {
                // No key, or every score -inf: the query attends to nothing.
                (lse[c0 + k], inv[c0 + k]) = (neg_inf, T::ZERO);
            } else {
                (lse[c0 + k], inv[c0 + k]) = (mx[k] + T::of(total[k].wide().ln()), T::ONE / total[k]);
            }
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn prob_cols_generic<T: Real>(
    sc: &mut [T],
    ld: usize,
    m: usize,
    i0: usize,
    causal: bool,
    scale: T,
    lse: &[T],
    exp: impl Fn(T) -> T,
) {
    let neg_inf = T::of(f64::NEG_INFINITY);
    let ncols = sc.len() / ld;
    for c0 in (0..m).step_by(W) {
        let q0 = i0 + c0;
        let seen = if causal { ncols.min(q0 + W) } else { ncols };
        // A query with log-sum-exp -inf sees nothing: its lane subtracts
        // +inf (exponentials 0, or NaN from a NaN score) and is masked.
        let (mut shift, mut live) = ([T::ZERO; W], [false; W]);
        for k in 0..W.min(m - c0) {
            (shift[k], live[k]) = (lse[c0 + k], lse[c0 + k] != neg_inf);
        }
        for j in 0..seen {
            let from = first_seeing(j, q0, causal);
            let Some(row) = sc[j * ld + c0..].first_chunk_mut::<W>() else {
                continue; // never: c0 + W <= ld (block_ld)
            };
            for k in 0..W {
                let e = exp(row[k] * scale - shift[k]);
                row[k] = if live[k] && LANE[k] >= from { e } else { T::ZERO };
            }
        }
        for j in seen..ncols {
            sc[j * ld + c0..j * ld + c0 + W].fill(T::ZERO);
        }
    }
}

#[inline(always)]
fn grad_score_cols_generic<T: Real>(p: &[T], dp: &mut [T], ld: usize, m: usize, d: &[T], scale: T) {
    let ncols = p.len() / ld;
    for c0 in (0..m).step_by(W) {
        let mut dd = [T::ZERO; W];
        dd[..W.min(m - c0)].copy_from_slice(&d[c0..m.min(c0 + W)]);
        for j in 0..ncols {
            let (Some(pr), Some(gr)) = (
                p[j * ld + c0..].first_chunk::<W>(),
                dp[j * ld + c0..].first_chunk_mut::<W>(),
            ) else {
                continue; // never: c0 + W <= ld (block_ld)
            };
            for k in 0..W {
                // A hidden key (p = 0) gets exactly 0, even beside an infinite dP.
                let g = pr[k] * (gr[k] - dd[k]) * scale;
                gr[k] = if pr[k] == T::ZERO { T::ZERO } else { g };
            }
        }
    }
}

#[inline(always)]
fn row_dots_generic<T: Real>(g: &[T], gs: usize, o: &[T], os: usize, n: usize, d: &mut [T]) {
    for (r, dv) in d.iter_mut().enumerate() {
        *dv = sum2(&g[r * gs..r * gs + n], &o[r * os..r * os + n], |a, b| a * b);
    }
}

/// The multiversioned block kernels of one float type and its
/// [`AttnFloat`] impl.
macro_rules! attn_float {
    ($t:ty, $exp:expr, $soft:ident, $prob:ident, $gs:ident, $dots:ident, $transpose:path) => {
        multiversion! {
            #[allow(clippy::too_many_arguments)]
            fn $soft(sc: &mut [$t], ld: usize, m: usize, i0: usize, causal: bool, scale: $t, lse: &mut [$t], inv: &mut [$t]) {
                softmax_cols_generic(sc, ld, m, i0, causal, scale, lse, inv, $exp)
            }
        }
        multiversion! {
            #[allow(clippy::too_many_arguments)]
            fn $prob(sc: &mut [$t], ld: usize, m: usize, i0: usize, causal: bool, scale: $t, lse: &[$t]) {
                prob_cols_generic(sc, ld, m, i0, causal, scale, lse, $exp)
            }
        }
        multiversion! {
            fn $gs(p: &[$t], dp: &mut [$t], ld: usize, m: usize, d: &[$t], scale: $t) {
                grad_score_cols_generic(p, dp, ld, m, d, scale)
            }
        }
        multiversion! {
            fn $dots(g: &[$t], gs: usize, o: &[$t], os: usize, n: usize, d: &mut [$t]) {
                row_dots_generic(g, gs, o, os, n, d)
            }
        }
        impl AttnFloat for $t {
            fn softmax_cols(
                sc: &mut [$t],
                ld: usize,
                m: usize,
                i0: usize,
                causal: bool,
                scale: $t,
                lse: &mut [$t],
                inv: &mut [$t],
            ) {
                $soft(sc, ld, m, i0, causal, scale, lse, inv)
            }
            fn prob_cols(sc: &mut [$t], ld: usize, m: usize, i0: usize, causal: bool, scale: $t, lse: &[$t]) {
                $prob(sc, ld, m, i0, causal, scale, lse)
            }
            fn grad_score_cols(p: &[$t], dp: &mut [$t], ld: usize, m: usize, d: &[$t], scale: $t) {
                $gs(p, dp, ld, m, d, scale)
            }
            fn row_dots(g: &[$t], gs: usize, o: &[$t], os: usize, n: usize, d: &mut [$t]) {
                $dots(g, gs, o, os, n, d)
            }
            unsafe fn transpose(src: *const $t, rows: usize, cols: usize, lds: usize, dst: *mut $t, ldd: usize) {
                // SAFETY: the caller's contract.
                unsafe { $transpose(src, rows, cols, lds, dst, ldd) }
            }
        }
    };
}

attn_float!(
    f32,
    exp_f32_fma,
    softmax_cols_f32,
    prob_cols_f32,
    grad_score_cols_f32,
    row_dots_f32,
    transpose_f32
);
attn_float!(
    f64,
    f64::exp,
    softmax_cols_f64,
    prob_cols_f64,
    grad_score_cols_f64,
    row_dots_f64,
    transpose_scalar
);

/// One operand's geometry: element offsets of each batch entry (any
/// strides) and its row / column strides.
struct Geo {
    batch: Vec<usize>,
    rs: usize,
    cs: usize,
}

impl Geo {
    fn of(t: &Tensor) -> Geo {
        let nd = t.ndim();
        let (shape, strides) = (&t.shape()[..nd - 2], &t.strides()[..nd - 2]);
        let nb: usize = shape.iter().product();
        let mut batch = Vec::with_capacity(nb);
        let mut idx = vec![0usize; shape.len()];
        for _ in 0..nb {
            batch.push(idx.iter().zip(strides).map(|(i, s)| i * s).sum());
            for d in (0..shape.len()).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        Geo {
            batch,
            rs: t.strides()[nd - 2],
            cs: t.strides()[nd - 1],
        }
    }

    /// Rows `r0..` of batch entry `b` at `base`.
    fn rows<T>(&self, base: usize, b: usize, r0: usize) -> Mat<T> {
        Mat {
            ptr: (base as *const T).wrapping_add(self.batch[b] + r0 * self.rs),
            rs: self.rs,
            cs: self.cs,
        }
    }

    /// The transpose of rows `r0..` of batch entry `b` at `base`.
    fn transposed<T>(&self, base: usize, b: usize, r0: usize) -> Mat<T> {
        Mat {
            ptr: (base as *const T).wrapping_add(self.batch[b] + r0 * self.rs),
            rs: self.cs,
            cs: self.rs,
        }
    }
}

/// A row-major `_ x cols` matrix at `ptr` (or its transpose).
fn dense<T>(ptr: *const T, cols: usize, transposed: bool) -> Mat<T> {
    if transposed {
        Mat { ptr, rs: 1, cs: cols }
    } else {
        Mat { ptr, rs: cols, cs: 1 }
    }
}

/// `C = A B` (`+=` with `acc`), row-major `c` of row stride `ldc`.
///
/// # Safety
/// `a` and `b` view readable `m x k` / `k x n` matrices and `c` a
/// writable `m x n` one not overlapping them, all alive for the call.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm<T: Gemm>(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<T>,
    b: Mat<T>,
    c: *mut T,
    ldc: usize,
    acc: bool,
    par: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !acc {
            for r in 0..m {
                // SAFETY: row r of c has n writable elements (the contract).
                unsafe { std::slice::from_raw_parts_mut(c.add(r * ldc), n) }.fill(T::default());
            }
        }
        return;
    }
    let parallel = par && m * n * k >= PARALLEL_GEMM;
    // SAFETY: the caller's contract.
    unsafe { T::gemm(m, n, k, a, BSrc::Mat(b), c, ldc, parallel, acc) }
}

/// Whether the rows of `g` (`d` values each) are contiguous, so that
/// [`rows_transposed`] may read them.
fn contiguous_rows(g: &Geo, d: usize) -> bool {
    d <= 1 || g.cs == 1
}

/// Rows `r0..r0 + n` of batch entry `b` of the operand `g` (at `base`,
/// `d` values each, [`contiguous_rows`]) transposed into `dst`: `d` rows of
/// `ld >= n` values (the columns from `n` are left as they were).
///
/// # Safety
/// `base` is the locked data of the tensor `g` describes, with those rows
/// in bounds, and `dst` holds `d * ld` values.
unsafe fn rows_transposed<T: AttnFloat>(
    g: &Geo,
    base: usize,
    (b, r0, n, d): (usize, usize, usize, usize),
    dst: &mut [T],
    ld: usize,
) {
    assert!(
        ld >= n && dst.len() >= d * ld,
        "attention: transposed operand scratch too small"
    );
    if n == 0 || d == 0 {
        return;
    }
    // SAFETY: the caller's contract (rows r0..r0 + n of entry b, d unit-stride
    // values each, readable); dst holds d rows of ld >= n values.
    unsafe { T::transpose(g.rows::<T>(base, b, r0).ptr, n, d, g.rs, dst.as_mut_ptr(), ld) }
}

/// The transposed scores `sc = k qᵀ`: `k` views the keys' rows, `qt` the
/// queries' transpose (`e` rows of `m` queries: a transposed copy, read in
/// place, or a transposed view of the queries); `sc` gets the first `ncols
/// = sc.len() / ld` keys (rows, `ld` apart) by the `m` queries; nothing
/// when `ncols` is 0. (With the values for `k` and the result's gradient
/// for `q`, over `ev` dims, the transposed `dPᵀ = v dOᵀ`.)
///
/// # Safety
/// `k` views at least `ncols` readable rows of `e` values and `qt` `e`
/// readable rows of `m`, neither overlapping `sc`.
unsafe fn scores<T: Gemm>(k: Mat<T>, qt: Mat<T>, m: usize, e: usize, sc: &mut [T], ld: usize, par: bool) {
    let ncols = sc.len() / ld;
    assert!(ld >= m, "attention: score block narrower than its queries");
    if ncols == 0 {
        return;
    }
    // SAFETY: the caller's contract; sc is ncols x ld, ld >= m.
    unsafe { gemm(ncols, m, e, k, qt, sc.as_mut_ptr(), ld, false, par) }
}

/// Runs `f` over the items `0..items` in contiguous chunks (each chunk
/// allocates its scratch once): one chunk when there is one thread or
/// little work, else up to four per thread, in parallel. Each item is
/// computed the same way in any chunk.
fn run_chunks(items: usize, work: usize, f: impl Fn(std::ops::Range<usize>) + Sync + Send) {
    let threads = rayon::current_num_threads();
    if items <= 1 || threads <= 1 || work < 1 << 15 {
        f(0..items);
    } else {
        let chunks = items.min(4 * threads);
        par_for_each(chunks, |c| f(items * c / chunks..items * (c + 1) / chunks));
    }
}

/// The sizes of an attention call: batch entries, L, S, E, Ev.
fn sizes(q: &Tensor, k: &Tensor, v: &Tensor) -> (usize, usize, usize, usize, usize) {
    let nd = q.ndim();
    let nb = q.shape()[..nd - 2].iter().product();
    (
        nb,
        q.shape()[nd - 2],
        k.shape()[nd - 2],
        q.shape()[nd - 1],
        v.shape()[nd - 1],
    )
}

/// An error unless the rows of `geo` have unit column stride (when they
/// hold more than one element): the products write and read whole rows.
fn unit_columns(geo: &Geo, cols: usize, what: &str) -> Result<()> {
    if cols > 1 && geo.cs != 1 {
        return Err(Error::invalid(
            NAME,
            format!("{what} must have unit stride in its last dim (internal layout error)"),
        ));
    }
    Ok(())
}

/// Inputs widened to f32 for f16 / bf16.
fn widen(ts: &[&Tensor]) -> Result<Vec<Tensor>> {
    ts.iter().map(|t| t.to_dtype(DType::F32)).collect()
}

/// Meta-device kernel of the fused attention and its backward: for f16 /
/// bf16 the temporaries the CPU kernels hold (the widened inputs and f32
/// results); f32 / f64 hold none. So a memory plan sees the fused kernels,
/// not the composite the meta device would otherwise run.
pub(crate) fn sdpa_flash_meta_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    if !inputs.iter().any(|t| matches!(t.dtype(), DType::F16 | DType::BF16)) {
        return Ok(());
    }
    let _w = widen(inputs)?;
    let _tmp = super::copy::f32_twins(outputs)?;
    Ok(())
}

pub(crate) fn sdpa_flash_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<SdpaFlash>(op)?;
    match inputs[0].dtype() {
        DType::F32 => forward_typed::<f32>(op, inputs, outputs),
        DType::F64 => forward_typed::<f64>(op, inputs, outputs),
        DType::F16 | DType::BF16 => {
            let w = widen(inputs)?;
            let out = TensorOptions::new().dtype(DType::F32).zeros(outputs[0].shape())?;
            forward_typed::<f32>(op, &[&w[0], &w[1], &w[2]], &[&out, outputs[1]])?;
            outputs[0].copy_(&out)?;
            Ok(())
        }
        d => Err(Error::dtype(NAME, d, "expects floating-point query, key and value")),
    }
}

fn forward_typed<T: AttnFloat>(op: SdpaFlash, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
    let (nb, l, s, e, ev) = sizes(q, k, v);
    if nb * l == 0 {
        return Ok(());
    }
    let (gq, gk, gv, go) = (Geo::of(q), Geo::of(k), Geo::of(v), Geo::of(outputs[0]));
    unit_columns(&go, ev, "the result")?;
    let acc = access(NAME, &[q, k, v], outputs)?;
    let (qp, kp, vp) = (acc.ins[0] as usize, acc.ins[1] as usize, acc.ins[2] as usize);
    let (op_, lp) = (acc.outs[0] as usize, acc.outs[1] as usize);
    let blocks = l.div_ceil(QB);
    // One task per batch entry when there are enough entries for the
    // threads (its query blocks share the scratch), else one per query
    // block; each block's rows are computed the same way either way.
    let per_entry = nb >= 4 * rayon::current_num_threads();
    let tasks = if per_entry { nb } else { nb * blocks };
    let scale = T::of(op.scale);
    let transposed = contiguous_rows(&gq, e);
    run_chunks(tasks, nb * l * s * (e + ev), |chunk| {
        // Scratch for the largest block, reused (each block overwrites what it reads).
        let (mut sc_buf, mut inv_buf) = (vec![T::ZERO; block_ld(QB.min(l)) * s], vec![T::ZERO; QB]);
        // Each block's queries transposed, when their rows are contiguous:
        // the score products then read them in place, unpacked.
        let mut qt = if transposed {
            vec![T::ZERO; e * block_ld(QB.min(l))]
        } else {
            Vec::new()
        };
        for t in chunk {
            let (b, first, last) = if per_entry {
                (t, 0, blocks)
            } else {
                (t / blocks, t % blocks, t % blocks + 1)
            };
            for blk in first..last {
                let (i0, i1) = (blk * QB, ((blk + 1) * QB).min(l));
                let m = i1 - i0;
                let ncols = if op.causal { s.min(i1) } else { s };
                let row0 = b * l + i0;
                // Rows i0..i1 of entry b of the result (rows go.rs apart, unit
                // column stride; any layout without overlap).
                let out = (op_ as *mut T).wrapping_add(go.batch[b] + i0 * go.rs);
                // SAFETY: this task alone writes entries row0..row0+m of the
                // contiguous log-sum-exp output locked by `acc`.
                let lse = unsafe { std::slice::from_raw_parts_mut((lp as *mut T).add(row0), m) };
                let ld = block_ld(m);
                let (sc, inv) = (&mut sc_buf[..ld * ncols], &mut inv_buf[..m]);
                if transposed {
                    // SAFETY: q's rows i0..i1 and k's first ncols rows of entry b
                    // are readable (locked inputs).
                    unsafe {
                        rows_transposed(&gq, qp, (b, i0, m, e), &mut qt, ld);
                        scores(
                            gk.rows(kp, b, 0),
                            dense(qt.as_ptr(), ld, false),
                            m,
                            e,
                            sc,
                            ld,
                            tasks == 1,
                        );
                    }
                } else {
                    // SAFETY: q's rows i0..i1 and k's first ncols rows of entry b are
                    // readable (locked inputs, in bounds).
                    unsafe { scores(gk.rows(kp, b, 0), gq.transposed(qp, b, i0), m, e, sc, ld, tasks == 1) };
                }
                T::softmax_cols(sc, ld, m, i0, op.causal, scale, lse, inv);
                // SAFETY: sc is ncols x m (the transposed probabilities), v's
                // first ncols rows of entry b are readable, the result rows are
                // this task's (above).
                unsafe {
                    gemm(
                        m,
                        ev,
                        ncols,
                        dense(sc.as_ptr(), ld, true),
                        gv.rows(vp, b, 0),
                        out,
                        go.rs,
                        false,
                        tasks == 1,
                    )
                };
                for (r, &f) in inv.iter().enumerate() {
                    // SAFETY: row r of this task's rows of the result (above): ev
                    // elements with unit stride, written by this task alone (the
                    // result's layout does not overlap).
                    let row = unsafe { std::slice::from_raw_parts_mut(out.add(r * go.rs), ev) };
                    for x in row {
                        *x = *x * f;
                    }
                }
            }
        }
    });
    Ok(())
}

pub(crate) fn sdpa_flash_backward_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<SdpaFlashBackward>(op)?;
    match inputs[1].dtype() {
        DType::F32 => backward_typed::<f32>(op, inputs, outputs),
        DType::F64 => backward_typed::<f64>(op, inputs, outputs),
        DType::F16 | DType::BF16 => {
            let w = widen(inputs)?;
            let tmp: Vec<Tensor> = outputs
                .iter()
                .map(|o| TensorOptions::new().dtype(DType::F32).zeros(o.shape()))
                .collect::<Result<_>>()?;
            let wr: Vec<&Tensor> = w.iter().collect();
            backward_typed::<f32>(op, &wr, &[&tmp[0], &tmp[1], &tmp[2]])?;
            for (o, t) in outputs.iter().zip(&tmp) {
                o.copy_(t)?;
            }
            Ok(())
        }
        d => Err(Error::dtype(
            "_scaled_dot_product_flash_attention_for_cpu_backward",
            d,
            "expects floating-point query, key and value",
        )),
    }
}

fn backward_typed<T: AttnFloat>(op: SdpaFlashBackward, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let (q, k, v) = (inputs[1], inputs[2], inputs[3]);
    let (nb, l, s, e, ev) = sizes(q, k, v);
    if outputs.iter().all(|o| o.numel() == 0) {
        return Ok(());
    }
    // The result's gradient and the result read in place when their rows
    // have unit column stride (the result's own layout, and its gradient
    // through a transpose back to it), the log-sum-exp row by row.
    let unit_rows = |t: &Tensor| -> Result<Tensor> {
        if ev <= 1 || t.strides()[t.ndim() - 1] == 1 {
            Ok(t.clone())
        } else {
            t.contiguous()
        }
    };
    let (g, o, lse) = (unit_rows(inputs[0])?, unit_rows(inputs[4])?, inputs[5].contiguous()?);
    let (gq, gk, gv, gg, go) = (Geo::of(q), Geo::of(k), Geo::of(v), Geo::of(&g), Geo::of(&o));
    let (gdq, gdk, gdv) = (Geo::of(outputs[0]), Geo::of(outputs[1]), Geo::of(outputs[2]));
    unit_columns(&gdq, e, "the query's gradient")?;
    unit_columns(&gdk, e, "the key's gradient")?;
    unit_columns(&gdv, ev, "the value's gradient")?;
    let acc = access(
        "_scaled_dot_product_flash_attention_for_cpu_backward",
        &[q, k, v, &g, &o, &lse],
        outputs,
    )?;
    let p = |i: usize| acc.ins[i] as usize;
    let (qp, kp, vp, gp, opp, lp) = (p(0), p(1), p(2), p(3), p(4), p(5));
    let (dqp, dkp, dvp) = (acc.outs[0] as usize, acc.outs[1] as usize, acc.outs[2] as usize);
    let blocks = l.div_ceil(QB);
    let scale = T::of(op.scale);
    // The keys the last query block sees: every block sees a prefix of them.
    let seen = if op.causal { s.min(l) } else { s };
    let transposed = contiguous_rows(&gq, e) && contiguous_rows(&gg, ev);
    run_chunks(nb, nb * l * s * (e + ev), |chunk| {
        // Scratch for the largest block, reused (every block overwrites what it reads).
        let most = block_ld(QB.min(l)) * s;
        let (mut pr_buf, mut ds_buf, mut d_buf) = (vec![T::ZERO; most], vec![T::ZERO; most], vec![T::ZERO; QB]);
        // Each block's queries and result gradient transposed: the score
        // products then read them in place, unpacked.
        let tr = |n: usize| if transposed { vec![T::ZERO; n] } else { Vec::new() };
        let ldq = block_ld(QB.min(l));
        let (mut qt, mut gt) = (tr(e * ldq), tr(ev * ldq));
        for b in chunk {
            // Entry b of dk and dv: s rows each, rows gdk.rs / gdv.rs apart.
            let (dk, dv) = (
                (dkp as *mut T).wrapping_add(gdk.batch[b]),
                (dvp as *mut T).wrapping_add(gdv.batch[b]),
            );
            for r in seen..s {
                // Keys no query sees get zero gradients. SAFETY: entry b's rows
                // of dk and dv are this task's alone (outputs locked by `acc`,
                // laid out without overlap; unit column stride, checked above).
                unsafe {
                    std::slice::from_raw_parts_mut(dk.add(r * gdk.rs), e).fill(T::ZERO);
                    std::slice::from_raw_parts_mut(dv.add(r * gdv.rs), ev).fill(T::ZERO);
                }
            }
            let par = nb == 1;
            // The last block first: it sees every key any block sees, so its
            // products write dk's and dv's rows 0..seen and the others add to them.
            for blk in (0..blocks).rev() {
                let first = blk + 1 == blocks;
                let (i0, i1) = (blk * QB, ((blk + 1) * QB).min(l));
                let m = i1 - i0;
                let ncols = if op.causal { s.min(i1) } else { s };
                let row0 = b * l + i0;
                let dq = (dqp as *mut T).wrapping_add(gdq.batch[b] + i0 * gdq.rs);
                // This block's rows of the result's gradient and of the result.
                let (gm, om) = (gg.rows::<T>(gp, b, i0), go.rows::<T>(opp, b, i0));
                // SAFETY: entries row0..row0+m of the contiguous log-sum-exp are
                // readable (locked input, in bounds).
                let lr = unsafe { std::slice::from_raw_parts((lp as *const T).add(row0), m) };
                let ld = block_ld(m);
                let (pr, ds, d) = (&mut pr_buf[..ld * ncols], &mut ds_buf[..ld * ncols], &mut d_buf[..m]);
                if transposed {
                    // SAFETY: q's and the gradient's rows i0..i1 and k's and v's
                    // first ncols rows of entry b are readable (locked inputs).
                    unsafe {
                        rows_transposed(&gq, qp, (b, i0, m, e), &mut qt, ld);
                        rows_transposed(&gg, gp, (b, i0, m, ev), &mut gt, ld);
                        scores(gk.rows(kp, b, 0), dense(qt.as_ptr(), ld, false), m, e, pr, ld, par);
                        scores(gv.rows(vp, b, 0), dense(gt.as_ptr(), ld, false), m, ev, ds, ld, par);
                    }
                } else {
                    // SAFETY: as in the forward: q's rows, k's and v's first ncols
                    // rows of entry b and the gradient rows are readable; the
                    // scratch blocks are ncols x ld.
                    unsafe {
                        scores(gk.rows(kp, b, 0), gq.transposed(qp, b, i0), m, e, pr, ld, par);
                        scores(gv.rows(vp, b, 0), gg.transposed(gp, b, i0), m, ev, ds, ld, par);
                    }
                }
                T::prob_cols(pr, ld, m, i0, op.causal, scale, lr);
                if ev > 0 {
                    // SAFETY: the block's m rows of the gradient and of the
                    // result (rows gg.rs / go.rs apart, ev unit-stride elements
                    // each) are readable (locked inputs, in bounds).
                    let (gr, or) = unsafe {
                        (
                            std::slice::from_raw_parts(gm.ptr, (m - 1) * gg.rs + ev),
                            std::slice::from_raw_parts(om.ptr, (m - 1) * go.rs + ev),
                        )
                    };
                    T::row_dots(gr, gg.rs, or, go.rs, ev, d);
                } else {
                    d.fill(T::ZERO);
                }
                T::grad_score_cols(pr, ds, ld, m, d, scale);
                // SAFETY: dq's rows of this block, and dk's / dv's first ncols
                // rows of entry b, are this task's (unit column stride, rows
                // gdq.rs / gdk.rs / gdv.rs apart); the sources are the scratch
                // blocks, k, q and the gradient rows (readable, in bounds).
                unsafe {
                    gemm(
                        m,
                        e,
                        ncols,
                        dense(ds.as_ptr(), ld, true),
                        gk.rows(kp, b, 0),
                        dq,
                        gdq.rs,
                        false,
                        par,
                    );
                }
                // SAFETY: dk's and dv's first ncols rows of entry b are this task's
                // (as above); the sources are the scratch blocks (row-major
                // ncols x m, read in place where the product can), q and the
                // gradient rows (readable, in bounds).
                unsafe {
                    let (ds_a, pr_a) = (dense(ds.as_ptr(), ld, false), dense(pr.as_ptr(), ld, false));
                    gemm(ncols, e, m, ds_a, gq.rows(qp, b, i0), dk, gdk.rs, !first, par);
                    gemm(ncols, ev, m, pr_a, gm, dv, gdv.rs, !first, par);
                }
            }
        }
    });
    Ok(())
}
