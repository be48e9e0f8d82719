//! CPU kernels of the fused LSTM cell and its first derivative.
//!
//! Rows of the batch run in parallel (each element depends on its own
//! row only, so the split never changes a bit). Inside a row the cell runs
//! in short passes over the row's gates (add, activations, the cell state,
//! the output), each the loop the composite form's operator runs, with
//! the same functions and roundings: f32 through the vectorised math of
//! [`super::math`], f64 through the standard library; f16/bf16 compute in
//! f32 and round once.

use super::access::access;
use super::math::{sigmoid_f32, tanh_f32};
use super::simd::multiversion;
use super::warm::par_for_each;
use crate::dispatch::{Op, downcast_op};
use crate::ops::rnn_cell::FusedLstmCellBackward;
use crate::{DType, Element, Error, Result, Tensor, TensorOptions};

/// The arithmetic of the cell in one float type, and its row kernels.
pub(super) trait CellFloat:
    Element + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> + std::ops::Sub<Output = Self>
{
    /// 1.
    const ONE: Self;
    /// 0.
    const ZERO: Self;
    /// The logistic function, as the `sigmoid` kernel computes it.
    fn sigmoid(self) -> Self;
    /// tanh, as the `tanh` kernel computes it.
    fn tanh(self) -> Self;
    /// [`cell_block`], vectorised where the type has a fast path.
    fn block(h: usize, ig: &[Self], hg: &[Self], cx: &[Self], hy: &mut [Self], cy: &mut [Self], ws: &mut [Self]);
    /// [`cell_backward_block`], likewise.
    fn backward_block(
        h: usize,
        grads: (Option<&[Self]>, Option<&[Self]>),
        cx: &[Self],
        cy: &[Self],
        ws: &[Self],
        dg: &mut [Self],
        dcx: &mut [Self],
    );
}

/// [`CellFloat`] for one type: its sigmoid and tanh, and its row kernels.
macro_rules! cell_float {
    ($t:ty, $sigmoid:expr, $tanh:expr, $block:expr, $backward:expr) => {
        impl CellFloat for $t {
            const ONE: $t = 1.0;
            const ZERO: $t = 0.0;
            #[inline(always)]
            fn sigmoid(self) -> $t {
                $sigmoid(self)
            }
            #[inline(always)]
            fn tanh(self) -> $t {
                $tanh(self)
            }
            fn block(h: usize, ig: &[$t], hg: &[$t], cx: &[$t], hy: &mut [$t], cy: &mut [$t], ws: &mut [$t]) {
                $block(h, ig, hg, cx, hy, cy, ws)
            }
            fn backward_block(
                h: usize,
                grads: (Option<&[$t]>, Option<&[$t]>),
                cx: &[$t],
                cy: &[$t],
                ws: &[$t],
                dg: &mut [$t],
                dcx: &mut [$t],
            ) {
                $backward(h, grads, cx, cy, ws, dg, dcx)
            }
        }
    };
}

cell_float!(f32, sigmoid_f32, tanh_f32, cell_block_f32, cell_backward_block_f32);
cell_float!(
    f64,
    |x: f64| 1.0 / (1.0 + (-x).exp()),
    f64::tanh,
    cell_block::<f64>,
    cell_backward_block::<f64>
);

/// One row of the cell: `ig`, `hg`, `ws` hold `4h` values, the others `h`.
#[inline(always)]
fn cell_row<T: CellFloat>(ig: &[T], hg: &[T], cx: &[T], hy: &mut [T], cy: &mut [T], ws: &mut [T]) {
    let h = cx.len();
    for ((w, &a), &b) in ws.iter_mut().zip(ig).zip(hg) {
        *w = a + b;
    }
    let (ifg, o) = ws.split_at_mut(3 * h);
    let (if_, g) = ifg.split_at_mut(2 * h);
    // (Separate loops: a chained iterator does not vectorise.)
    for v in if_.iter_mut() {
        *v = v.sigmoid();
    }
    for v in o.iter_mut() {
        *v = v.sigmoid();
    }
    for v in g.iter_mut() {
        *v = v.tanh();
    }
    let (i, f) = if_.split_at(h);
    for ((((c, &fv), &xv), &iv), &gv) in cy.iter_mut().zip(f).zip(cx).zip(i).zip(g.iter()) {
        *c = fv * xv + iv * gv;
    }
    for ((y, &c), &ov) in hy.iter_mut().zip(cy.iter()).zip(o.iter()) {
        *y = ov * c.tanh();
    }
}

/// One row of the derivative: `ws` and `dg` hold `4h` values, the others
/// `h`; `dhy` / `dcy` absent when that gradient is.
#[inline(always)]
fn cell_backward_row<T: CellFloat>(
    dhy: Option<&[T]>,
    dcy: Option<&[T]>,
    cx: &[T],
    cy: &[T],
    ws: &[T],
    dg: &mut [T],
    dcx: &mut [T],
) {
    let h = cx.len();
    let (i, rest) = ws.split_at(h);
    let (f, rest) = rest.split_at(h);
    let (g, o) = rest.split_at(h);
    let (di, rest) = dg.split_at_mut(h);
    let (df, rest) = rest.split_at_mut(h);
    let (dgg, d_o) = rest.split_at_mut(h);
    // dcx first holds dc, the gradient reaching cy in all.
    match (dhy, dcy) {
        (Some(dh), dc_in) => {
            for j in 0..h {
                let t = cy[j].tanh();
                let local = (dh[j] * o[j]) * (T::ONE - t * t);
                dcx[j] = match dc_in {
                    Some(d) => d[j] + local,
                    None => local,
                };
                d_o[j] = (dh[j] * t) * (T::ONE - o[j]) * o[j];
            }
        }
        (None, Some(d)) => {
            dcx.copy_from_slice(d);
            d_o.fill(T::ZERO);
        }
        (None, None) => {
            dcx.fill(T::ZERO);
            d_o.fill(T::ZERO);
        }
    }
    for j in 0..h {
        let dc = dcx[j];
        di[j] = (dc * g[j]) * (T::ONE - i[j]) * i[j];
        df[j] = (dc * cx[j]) * (T::ONE - f[j]) * f[j];
        dgg[j] = (dc * i[j]) * (T::ONE - g[j] * g[j]);
        dcx[j] = dc * f[j];
    }
}

/// Consecutive rows of the cell (`h` values per state row).
#[inline(always)]
fn cell_block<T: CellFloat>(h: usize, ig: &[T], hg: &[T], cx: &[T], hy: &mut [T], cy: &mut [T], ws: &mut [T]) {
    let h = h.max(1);
    let rows = ig
        .chunks_exact(4 * h)
        .zip(hg.chunks_exact(4 * h))
        .zip(cx.chunks_exact(h))
        .zip(hy.chunks_exact_mut(h))
        .zip(cy.chunks_exact_mut(h))
        .zip(ws.chunks_exact_mut(4 * h));
    for (((((a, b), c), y), cc), w) in rows {
        cell_row::<T>(a, b, c, y, cc, w);
    }
}

/// Consecutive rows of the derivative.
#[inline(always)]
fn cell_backward_block<T: CellFloat>(
    h: usize,
    (dhy, dcy): (Option<&[T]>, Option<&[T]>),
    cx: &[T],
    cy: &[T],
    ws: &[T],
    dg: &mut [T],
    dcx: &mut [T],
) {
    let rows = cx.len() / h.max(1);
    for r in 0..rows {
        let s = r * h..(r + 1) * h;
        let w = 4 * r * h..4 * (r + 1) * h;
        cell_backward_row::<T>(
            dhy.map(|d| &d[s.clone()]),
            dcy.map(|d| &d[s.clone()]),
            &cx[s.clone()],
            &cy[s.clone()],
            &ws[w.clone()],
            &mut dg[w],
            &mut dcx[s],
        );
    }
}

multiversion! {
    /// [`cell_block`] for f32, vectorised for the CPU.
    fn cell_block_f32(h: usize, ig: &[f32], hg: &[f32], cx: &[f32], hy: &mut [f32], cy: &mut [f32], ws: &mut [f32]) {
        cell_block::<f32>(h, ig, hg, cx, hy, cy, ws)
    }
}

multiversion! {
    /// [`cell_backward_block`] for f32, vectorised for the CPU.
    fn cell_backward_block_f32(
        h: usize,
        grads: (Option<&[f32]>, Option<&[f32]>),
        cx: &[f32],
        cy: &[f32],
        ws: &[f32],
        dg: &mut [f32],
        dcx: &mut [f32],
    ) {
        cell_backward_block::<f32>(h, grads, cx, cy, ws, dg, dcx)
    }
}

/// Rows `[r0, r1)` of an `h`-wide operand at `p` (`w` values per row).
///
/// # Safety
/// `p` addresses a live contiguous operand of at least `r1` rows of `w`
/// values of `T`, which nothing writes during the borrow.
pub(super) unsafe fn rows_of<'a, T>(p: usize, w: usize, r0: usize, r1: usize) -> &'a [T] {
    // SAFETY: the caller's contract: rows [r0, r1) lie inside the operand.
    unsafe { std::slice::from_raw_parts((p as *const T).add(r0 * w), (r1 - r0) * w) }
}

/// Rows `[r0, r1)` of an output at `p`, mutably.
///
/// # Safety
/// As [`rows_of`], and no one else reads or writes those rows during the
/// borrow.
#[allow(clippy::mut_from_ref)]
pub(super) unsafe fn rows_of_mut<'a, T>(p: usize, w: usize, r0: usize, r1: usize) -> &'a mut [T] {
    // SAFETY: the caller's contract: rows [r0, r1) lie inside the output and are this borrow's alone.
    unsafe { std::slice::from_raw_parts_mut((p as *mut T).add(r0 * w), (r1 - r0) * w) }
}

/// Runs `rows(r0, r1)` over `n` rows of `work` elements each, in parallel
/// when there is enough work (about 8192 transcendental elements a task).
pub(super) fn over_rows(n: usize, work: usize, rows: impl Fn(usize, usize) + Sync + Send) {
    let per = (8192usize).div_ceil(work.max(1)).max(1);
    let tasks = n.div_ceil(per).min(rayon::current_num_threads()).max(1);
    if tasks <= 1 {
        rows(0, n);
    } else {
        par_for_each(tasks, |t| rows(t * n / tasks, (t + 1) * n / tasks));
    }
}

/// Contiguous copies of `ts` (in f32 for f16/bf16).
pub(super) fn prep(ts: &[&Tensor]) -> Result<Vec<Tensor>> {
    ts.iter()
        .map(|t| match t.dtype() {
            DType::F16 | DType::BF16 => t.to_dtype(DType::F32)?.contiguous(),
            _ => t.contiguous(),
        })
        .collect()
}

/// f32 scratch outputs for a half-precision call (else the outputs themselves).
pub(super) fn work_outputs(outputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    outputs
        .iter()
        .map(|o| match o.dtype() {
            DType::F16 | DType::BF16 => TensorOptions::new().dtype(DType::F32).zeros(o.shape()),
            _ => Ok((*o).clone()),
        })
        .collect()
}

/// Copies f32 scratch outputs back into half-precision outputs.
pub(super) fn finish(outputs: &[&Tensor], work: &[Tensor]) -> Result<()> {
    for (o, w) in outputs.iter().zip(work) {
        if !o.is_same(w) {
            o.copy_(w)?;
        }
    }
    Ok(())
}

pub(crate) fn fused_lstm_cell_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let name = "_thnn_fused_lstm_cell";
    let (n, h) = (inputs[2].shape()[0], inputs[2].shape()[1]);
    if n == 0 || h == 0 {
        return Ok(());
    }
    let ins = prep(inputs)?;
    let outs = work_outputs(outputs)?;
    let (ir, or): (Vec<&Tensor>, Vec<&Tensor>) = (ins.iter().collect(), outs.iter().collect());
    let dtype = ins[0].dtype();
    {
        let acc = access(name, &ir, &or)?;
        let p = |k: usize| {
            if k < 3 {
                acc.ins[k] as usize
            } else {
                acc.outs[k - 3] as usize
            }
        };
        let ptrs = [p(0), p(1), p(2), p(3), p(4), p(5)];
        macro_rules! run {
            ($t:ty, $f:expr) => {
                over_rows(n, 4 * h, |r0, r1| {
                    // SAFETY: contiguous operands of the shapes `infer` checked ([n, 4h] gates, [n, h] states), kept
                    // alive and locked by `acc`; the outputs are distinct from the inputs, and each task writes only
                    // its own rows [r0, r1).
                    let (ig, hg, cx, hy, cy, ws) = unsafe {
                        (
                            rows_of::<$t>(ptrs[0], 4 * h, r0, r1),
                            rows_of::<$t>(ptrs[1], 4 * h, r0, r1),
                            rows_of::<$t>(ptrs[2], h, r0, r1),
                            rows_of_mut::<$t>(ptrs[3], h, r0, r1),
                            rows_of_mut::<$t>(ptrs[4], h, r0, r1),
                            rows_of_mut::<$t>(ptrs[5], 4 * h, r0, r1),
                        )
                    };
                    $f(h, ig, hg, cx, hy, cy, ws)
                })
            };
        }
        match dtype {
            DType::F32 => run!(f32, f32::block),
            DType::F64 => run!(f64, f64::block),
            d => return Err(Error::dtype(name, d, "expects floating-point gates")),
        }
    }
    finish(outputs, &outs)
}

pub(crate) fn fused_lstm_cell_backward_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let name = "_thnn_fused_lstm_cell_backward";
    let op = *downcast_op::<FusedLstmCellBackward>(op)?;
    let k = op.n_grads();
    let (n, h) = (inputs[k].shape()[0], inputs[k].shape()[1]);
    if n == 0 || h == 0 {
        return Ok(());
    }
    let ins = prep(inputs)?;
    let outs = work_outputs(outputs)?;
    let (ir, or): (Vec<&Tensor>, Vec<&Tensor>) = (ins.iter().collect(), outs.iter().collect());
    let dtype = ins[k].dtype();
    {
        let acc = access(name, &ir, &or)?;
        let at = |present: bool, i: usize| if present { acc.ins[i] as usize } else { 0 };
        let ptrs = [
            at(op.has_dhy, 0),
            at(op.has_dcy, op.has_dhy as usize),
            acc.ins[k] as usize,
            acc.ins[k + 1] as usize,
            acc.ins[k + 2] as usize,
            acc.outs[0] as usize,
            acc.outs[1] as usize,
        ];
        macro_rules! run {
            ($t:ty, $f:expr) => {
                over_rows(n, 4 * h, |r0, r1| {
                    // SAFETY: as in the forward kernel: contiguous operands of the checked shapes, locked by `acc`,
                    // outputs distinct from the inputs, rows [r0, r1) written by this task alone; absent gradients
                    // (pointer 0) are never read.
                    let (dhy, dcy, cx, cy, ws, dg, dcx) = unsafe {
                        let opt = |p: usize| (p != 0).then(|| rows_of::<$t>(p, h, r0, r1));
                        (
                            opt(ptrs[0]),
                            opt(ptrs[1]),
                            rows_of::<$t>(ptrs[2], h, r0, r1),
                            rows_of::<$t>(ptrs[3], h, r0, r1),
                            rows_of::<$t>(ptrs[4], 4 * h, r0, r1),
                            rows_of_mut::<$t>(ptrs[5], 4 * h, r0, r1),
                            rows_of_mut::<$t>(ptrs[6], h, r0, r1),
                        )
                    };
                    $f(h, (dhy, dcy), cx, cy, ws, dg, dcx)
                })
            };
        }
        match dtype {
            DType::F32 => run!(f32, f32::backward_block),
            DType::F64 => run!(f64, f64::backward_block),
            d => return Err(Error::dtype(name, d, "expects floating-point gates")),
        }
    }
    finish(outputs, &outs)
}
