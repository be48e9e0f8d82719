//! CPU kernels of fused scaled dot-product attention
//! (`_scaled_dot_product_flash_attention_for_cpu`) and its derivative.
//!
//! Forward: for each block of [`QB`] query rows of one batch entry (one
//! task per entry, whose blocks share the scratch, or per block when there
//! are few entries), the block's queries are multiplied by the keys they
//! can see (a causal block stops at its last row) into a scratch block,
//! the rows' softmax is taken there (the maximum subtracted, sums in fixed
//! lanes), the result is multiplied by the values and each row divided by
//! its sum; the row's log-sum-exp is saved. Backward: one task per batch entry, its
//! query blocks in order: the probabilities recomputed from the saved
//! log-sum-exp, `dP = dO vᵀ`, `dS = P (dP - rowsum(dO · O)) · scale`,
//! then `dQ = dS k` and `dK += dSᵀ q`, `dV += Pᵀ dO` accumulated block by
//! block in order, so the result does not depend on the thread count.
//! Queries, keys and values are read in place with any strides; the
//! result and the gradients are written with their own row strides (the
//! operators lay them out like their inputs). f16 / bf16 compute in f32.

use super::access::access;
use super::gemm::{BSrc, Gemm, Mat};
use super::math::exp_f32_fma;
use super::norm::{Real, sum1, sum2};
use super::simd::multiversion;
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

/// The row kernels of one float type.
pub(crate) trait AttnFloat: Real + Gemm {
    /// Softmax of the first `m` score rows of `sc` (rows of `ncols`, block
    /// starting at query row `i0`) after the scale: the unnormalised
    /// probabilities in place (0 for keys a causal row cannot see), each
    /// row's log-sum-exp into `lse` and the reciprocal of its sum into
    /// `inv` (0 for a row that sees no key).
    #[allow(clippy::too_many_arguments)]
    fn softmax_rows(
        sc: &mut [Self],
        ncols: usize,
        i0: usize,
        causal: bool,
        scale: Self,
        lse: &mut [Self],
        inv: &mut [Self],
    );
    /// The probabilities `exp(s · scale - lse)` of the score rows, in place
    /// (0 where a causal row cannot see the key).
    fn prob_rows(sc: &mut [Self], ncols: usize, i0: usize, causal: bool, scale: Self, lse: &[Self]);
    /// `dp ← p (dp - d[r]) · scale`, per row of `ncols`.
    fn grad_score_rows(p: &[Self], dp: &mut [Self], ncols: usize, d: &[Self], scale: Self);
    /// `d[r] = sum(g[r] · o[r])` over `d.len()` rows of `n`, row `r` of
    /// `g` starting at `r * gs` and of `o` at `r * os`.
    fn row_dots(g: &[Self], gs: usize, o: &[Self], os: usize, n: usize, d: &mut [Self]);
}

/// Keys row `i` of a block can see.
#[inline(always)]
fn live(i: usize, ncols: usize, causal: bool) -> usize {
    if causal { (i + 1).min(ncols) } else { ncols }
}

/// Lanes of the rows' maximum.
const ML: usize = 16;

/// Multiplies `xs` by `scale` in place and returns the maximum (NaN
/// ignored: it reaches the result through the exponentials), in [`ML`]
/// lanes so the loop vectorises.
#[inline(always)]
fn scale_max<T: Real>(xs: &mut [T], scale: T) -> T {
    let mut acc = [T::of(f64::NEG_INFINITY); ML];
    let mut chunks = xs.chunks_exact_mut(ML);
    for c in &mut chunks {
        for k in 0..ML {
            let v = c[k] * scale;
            c[k] = v;
            acc[k] = if v > acc[k] { v } else { acc[k] };
        }
    }
    let rest = chunks.into_remainder();
    for v in rest.iter_mut() {
        *v = *v * scale;
    }
    max_finish(&acc, rest)
}

/// [`scale_max`]'s end: the lanes and the tail. Out of line, as
/// `norm::finish`, so the main loop keeps whole vectors.
#[inline(never)]
fn max_finish<T: Real>(acc: &[T; ML], rest: &[T]) -> T {
    acc.iter()
        .chain(rest)
        .fold(T::of(f64::NEG_INFINITY), |m, &v| if v > m { v } else { m })
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn softmax_rows_generic<T: Real>(
    sc: &mut [T],
    ncols: usize,
    i0: usize,
    causal: bool,
    scale: T,
    lse: &mut [T],
    inv: &mut [T],
    exp: impl Fn(T) -> T,
) {
    let neg_inf = T::of(f64::NEG_INFINITY);
    if ncols == 0 {
        lse.fill(neg_inf);
        inv.fill(T::ZERO);
        return;
    }
    for (r, row) in sc.chunks_exact_mut(ncols).enumerate() {
        let (seen, hidden) = row.split_at_mut(live(i0 + r, ncols, causal));
        hidden.fill(T::ZERO);
        let mx = scale_max(seen, scale);
        if mx == neg_inf {
            // No key, or every score -inf: the row attends to nothing.
            seen.fill(T::ZERO);
            lse[r] = neg_inf;
            inv[r] = T::ZERO;
            continue;
        }
        for v in seen.iter_mut() {
            *v = exp(*v - mx);
        }
        let sum = sum1(seen, |v| v);
        lse[r] = mx + T::of(sum.wide().ln());
        inv[r] = T::ONE / sum;
    }
}

#[inline(always)]
fn prob_rows_generic<T: Real>(
    sc: &mut [T],
    ncols: usize,
    i0: usize,
    causal: bool,
    scale: T,
    lse: &[T],
    exp: impl Fn(T) -> T,
) {
    let neg_inf = T::of(f64::NEG_INFINITY);
    if ncols == 0 {
        return;
    }
    for (r, row) in sc.chunks_exact_mut(ncols).enumerate() {
        let (seen, hidden) = row.split_at_mut(live(i0 + r, ncols, causal));
        hidden.fill(T::ZERO);
        let l = lse[r];
        if l == neg_inf {
            seen.fill(T::ZERO);
            continue;
        }
        for v in seen.iter_mut() {
            *v = exp(*v * scale - l);
        }
    }
}

#[inline(always)]
fn grad_score_rows_generic<T: Real>(p: &[T], dp: &mut [T], ncols: usize, d: &[T], scale: T) {
    for ((pr, dr), &dv) in p.chunks_exact(ncols).zip(dp.chunks_exact_mut(ncols)).zip(d) {
        for (o, &pv) in dr.iter_mut().zip(pr) {
            // A hidden key (p = 0) gets exactly 0, even beside an infinite dP.
            *o = if pv == T::ZERO { T::ZERO } else { pv * (*o - dv) * scale };
        }
    }
}

#[inline(always)]
fn row_dots_generic<T: Real>(g: &[T], gs: usize, o: &[T], os: usize, n: usize, d: &mut [T]) {
    for (r, dv) in d.iter_mut().enumerate() {
        *dv = sum2(&g[r * gs..r * gs + n], &o[r * os..r * os + n], |a, b| a * b);
    }
}

/// The multiversioned row kernels of one float type and its
/// [`AttnFloat`] impl.
macro_rules! attn_float {
    ($t:ty, $exp:expr, $soft:ident, $prob:ident, $gs:ident, $dots:ident) => {
        multiversion! {
            #[allow(clippy::too_many_arguments)]
            fn $soft(sc: &mut [$t], ncols: usize, i0: usize, causal: bool, scale: $t, lse: &mut [$t], inv: &mut [$t]) {
                softmax_rows_generic(sc, ncols, i0, causal, scale, lse, inv, $exp)
            }
        }
        multiversion! {
            fn $prob(sc: &mut [$t], ncols: usize, i0: usize, causal: bool, scale: $t, lse: &[$t]) {
                prob_rows_generic(sc, ncols, i0, causal, scale, lse, $exp)
            }
        }
        multiversion! {
            fn $gs(p: &[$t], dp: &mut [$t], ncols: usize, d: &[$t], scale: $t) {
                grad_score_rows_generic(p, dp, ncols, d, scale)
            }
        }
        multiversion! {
            fn $dots(g: &[$t], gs: usize, o: &[$t], os: usize, n: usize, d: &mut [$t]) {
                row_dots_generic(g, gs, o, os, n, d)
            }
        }
        impl AttnFloat for $t {
            fn softmax_rows(
                sc: &mut [$t],
                ncols: usize,
                i0: usize,
                causal: bool,
                scale: $t,
                lse: &mut [$t],
                inv: &mut [$t],
            ) {
                $soft(sc, ncols, i0, causal, scale, lse, inv)
            }
            fn prob_rows(sc: &mut [$t], ncols: usize, i0: usize, causal: bool, scale: $t, lse: &[$t]) {
                $prob(sc, ncols, i0, causal, scale, lse)
            }
            fn grad_score_rows(p: &[$t], dp: &mut [$t], ncols: usize, d: &[$t], scale: $t) {
                $gs(p, dp, ncols, d, scale)
            }
            fn row_dots(g: &[$t], gs: usize, o: &[$t], os: usize, n: usize, d: &mut [$t]) {
                $dots(g, gs, o, os, n, d)
            }
        }
    };
}

attn_float!(
    f32,
    exp_f32_fma,
    softmax_rows_f32,
    prob_rows_f32,
    grad_score_rows_f32,
    row_dots_f32
);
attn_float!(
    f64,
    f64::exp,
    softmax_rows_f64,
    prob_rows_f64,
    grad_score_rows_f64,
    row_dots_f64
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

    /// The transpose of batch entry `b`'s matrix at `base`.
    fn transposed<T>(&self, base: usize, b: usize) -> Mat<T> {
        Mat {
            ptr: (base as *const T).wrapping_add(self.batch[b]),
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

/// `sc = q kᵀ` for batch entry `b`, query rows `i0..` (as many as `sc`
/// holds rows of `ncols`) and the first `ncols` keys, over `e` dims; nothing
/// when `ncols` is 0.
///
/// # Safety
/// `qp` / `kp` are the locked data of the tensors `gq` / `gk` describe,
/// with those rows in bounds.
#[allow(clippy::too_many_arguments)]
unsafe fn scores_into<T: Gemm>(
    gq: &Geo,
    qp: usize,
    gk: &Geo,
    kp: usize,
    (b, i0, e): (usize, usize, usize),
    sc: &mut [T],
    ncols: usize,
    par: bool,
) {
    if ncols == 0 {
        return;
    }
    let m = sc.len() / ncols;
    // SAFETY: the caller's contract; `sc` is m x ncols.
    unsafe {
        gemm(
            m,
            ncols,
            e,
            gq.rows(qp, b, i0),
            gk.transposed(kp, b),
            sc.as_mut_ptr(),
            ncols,
            false,
            par,
        )
    }
}

/// Runs `f(task)` for `tasks` tasks, in parallel when there are several
/// and the work is large.
fn run_tasks(tasks: usize, work: usize, f: impl Fn(usize) + Sync + Send) {
    if tasks <= 1 || work < 1 << 15 {
        (0..tasks).for_each(f);
    } else {
        par_for_each(tasks, f);
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
    run_tasks(tasks, nb * l * s * (e + ev), |t| {
        let (b, first, last) = if per_entry {
            (t, 0, blocks)
        } else {
            (t / blocks, t % blocks, t % blocks + 1)
        };
        // Scratch for the largest block, reused (each block overwrites what it reads).
        let (mut sc_buf, mut inv_buf) = (vec![T::ZERO; QB.min(l) * s], vec![T::ZERO; QB]);
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
            let (sc, inv) = (&mut sc_buf[..m * ncols], &mut inv_buf[..m]);
            // SAFETY: q's rows i0..i1 and k's first ncols rows of entry b are
            // readable (locked inputs, in bounds).
            unsafe { scores_into(&gq, qp, &gk, kp, (b, i0, e), sc, ncols, tasks == 1) };
            T::softmax_rows(sc, ncols, i0, op.causal, scale, lse, inv);
            // SAFETY: sc is m x ncols, v's first ncols rows of entry b are
            // readable, the result rows are this task's (above).
            unsafe {
                gemm(
                    m,
                    ev,
                    ncols,
                    dense(sc.as_ptr(), ncols, false),
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
    run_tasks(nb, nb * l * s * (e + ev), |b| {
        // Entry b of dk and dv: s rows each, rows gdk.rs / gdv.rs apart.
        let (dk, dv) = (
            (dkp as *mut T).wrapping_add(gdk.batch[b]),
            (dvp as *mut T).wrapping_add(gdv.batch[b]),
        );
        for r in 0..s {
            // SAFETY: entry b's rows of dk and dv are this task's alone
            // (outputs locked by `acc`, laid out without overlap; unit
            // column stride, checked above).
            unsafe {
                std::slice::from_raw_parts_mut(dk.add(r * gdk.rs), e).fill(T::ZERO);
                std::slice::from_raw_parts_mut(dv.add(r * gdv.rs), ev).fill(T::ZERO);
            }
        }
        let par = nb == 1;
        // Scratch for the largest block, reused (every block overwrites what it reads).
        let most = QB.min(l) * s;
        let (mut pr_buf, mut ds_buf, mut d_buf) = (vec![T::ZERO; most], vec![T::ZERO; most], vec![T::ZERO; QB]);
        for blk in 0..blocks {
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
            let (pr, ds, d) = (&mut pr_buf[..m * ncols], &mut ds_buf[..m * ncols], &mut d_buf[..m]);
            if ncols > 0 {
                // SAFETY: as in the forward: q's rows, k's and v's first ncols
                // rows of entry b and the gradient rows are readable; the
                // scratch blocks are m x ncols.
                unsafe {
                    scores_into(&gq, qp, &gk, kp, (b, i0, e), pr, ncols, par);
                    gemm(
                        m,
                        ncols,
                        ev,
                        gm,
                        gv.transposed(vp, b),
                        ds.as_mut_ptr(),
                        ncols,
                        false,
                        par,
                    );
                }
            }
            T::prob_rows(pr, ncols, i0, op.causal, scale, lr);
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
            T::grad_score_rows(pr, ds, ncols.max(1), d, scale);
            // SAFETY: dq's rows of this block, and dk's / dv's first ncols
            // rows of entry b, are this task's (unit column stride, rows
            // gdq.rs / gdk.rs / gdv.rs apart); the sources are the scratch
            // blocks, k, q and the gradient rows (readable, in bounds).
            unsafe {
                gemm(
                    m,
                    e,
                    ncols,
                    dense(ds.as_ptr(), ncols, false),
                    gk.rows(kp, b, 0),
                    dq,
                    gdq.rs,
                    false,
                    par,
                );
                gemm(
                    ncols,
                    e,
                    m,
                    dense(ds.as_ptr(), ncols, true),
                    gq.rows(qp, b, i0),
                    dk,
                    gdk.rs,
                    true,
                    par,
                );
                gemm(ncols, ev, m, dense(pr.as_ptr(), ncols, true), gm, dv, gdv.rs, true, par);
            }
        }
    });
    Ok(())
}
