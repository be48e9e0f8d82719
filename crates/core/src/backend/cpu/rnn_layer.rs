//! CPU kernels of a whole LSTM layer (`ferrotorch::lstm_layer`) and its
//! derivative: the steps run in order, each a GEMM into a scratch buffer
//! and the fused cell's row kernels (rows in parallel), with no tensor or
//! graph node per step.
//!
//! Forward and backward pack `w_hh` (transposed, then as it is) once per
//! call for every step's product, which reads the panels in place. Backward: per step the cell's derivative (written
//! straight into the gates' gradient) and one product by `w_hh`; then
//! `w_hh`'s gradient as two products over the whole sequence (the first
//! step's, by `h0`, then the rest accumulated, by the saved outputs) and
//! `b_hh`'s as column sums in row order. Every sum runs in a fixed order,
//! so results do not depend on the thread count.

use super::access::access;
use super::gemm::{BSrc, Gemm, Mat, PackedB, Prepack};
use super::rnn_cell::{CellFloat, finish, over_rows, prep, rows_of, rows_of_mut, work_outputs};
use super::warm::par_for_each;
use crate::dispatch::{Op, downcast_op};
use crate::ops::rnn_layer::{LstmLayer, LstmLayerBackward};
use crate::{DType, Error, Result, Tensor};

/// Products below about this many multiply-adds run on one thread (as `mm`).
const PARALLEL_GEMM: usize = 1 << 22;

/// A raw element pointer shared with the tasks of a parallel loop.
fn at<T>(base: usize, offset: usize) -> usize {
    (base as *const T).wrapping_add(offset) as usize
}

/// `C = A * B` (`+=` with `acc`) for row-major `c` with row stride `ldc`.
///
/// # Safety
/// `a`, `b` view readable `m x k` / `k x n` matrices and `c` a writable
/// `m x n` one, none overlapping `c`, all alive for the call.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm<T: Gemm>(m: usize, n: usize, k: usize, a: Mat<T>, b: Mat<T>, c: usize, ldc: usize, acc: bool) {
    let parallel = m * n * k >= PARALLEL_GEMM;
    // SAFETY: the caller's contract.
    unsafe { T::gemm(m, n, k, a, BSrc::Mat(b), c as *mut T, ldc, parallel, acc) }
}

/// `C = A * B` with B packed once ([`PackedB`]), for row-major `c`.
///
/// # Safety
/// `a` views a readable `m x k` matrix, `c` a writable `m x n` one
/// (row stride `n`) distinct from `a`, with `k x n` the packed B's shape.
unsafe fn gemm_packed<T: Prepack>(m: usize, a: Mat<T>, b: &PackedB<T>, c: usize) {
    let (k, n) = (b.rows(), b.cols());
    let parallel = m * n * k >= PARALLEL_GEMM;
    // SAFETY: the caller's contract; the packed B holds k x n.
    unsafe { T::gemm(m, n, k, a, BSrc::Pack(b), c as *mut T, n, parallel, true) }
}

/// A row-major `rows x cols` matrix at `ptr`.
fn mat<T>(ptr: usize, cols: usize) -> Mat<T> {
    Mat {
        ptr: ptr as *const T,
        rs: cols,
        cs: 1,
    }
}

pub(crate) fn lstm_layer_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<LstmLayer>(op)?;
    let ins = prep(inputs)?;
    let outs = work_outputs(outputs)?;
    match ins[0].dtype() {
        DType::F32 => layer_typed::<f32>(op, &ins, &outs)?,
        DType::F64 => layer_typed::<f64>(op, &ins, &outs)?,
        d => {
            return Err(Error::dtype(
                "ferrotorch::lstm_layer",
                d,
                "expects a floating-point input",
            ));
        }
    }
    finish(outputs, &outs)
}

fn layer_typed<T: CellFloat + Prepack>(op: LstmLayer, ins: &[Tensor], outs: &[Tensor]) -> Result<()> {
    let (l, n, h) = (ins[0].shape()[0], ins[0].shape()[1], ins[1].shape()[1]);
    let g4 = 4 * h;
    let k = op.h0_at();
    let ir: Vec<&Tensor> = ins.iter().collect();
    let or: Vec<&Tensor> = outs.iter().collect();
    let acc = access("ferrotorch::lstm_layer", &ir, &or)?;
    let p = |i: usize| acc.ins[i] as usize;
    let q = |i: usize| acc.outs[i] as usize;
    let (xw, w, h0, c0) = (p(0), p(1), p(k), p(k + 1));
    let bias: Option<&[T]> = if op.bias {
        // SAFETY: b_hh is a live contiguous [4H] input, locked for reading by `acc`.
        Some(unsafe { rows_of::<T>(p(2), g4, 0, 1) })
    } else {
        None
    };
    let (out, hn, cn, cs, ws) = (q(0), q(1), q(2), q(3), q(4));
    // w_hh^T ([H, 4H]) packed once for all steps' products.
    let w_t = Mat {
        ptr: w as *const T,
        rs: 1,
        cs: h,
    };
    // SAFETY: w_hh is a live contiguous [4H, H] input, locked for reading, so its transpose is a readable [H, 4H].
    let packed = unsafe { T::prepack_b(w_t, h, g4) };
    let mut hg = vec![T::ZERO; n * g4];
    let (mut h_prev, mut c_prev) = (h0, c0);
    for t in op.order(l) {
        match bias {
            Some(b) => hg.chunks_exact_mut(g4.max(1)).for_each(|r| r.copy_from_slice(b)),
            None => hg.fill(T::ZERO),
        }
        if h > 0 {
            // SAFETY: h_prev is h0 or a step of `out` ([N, H], written before), hg a distinct [N, 4H] scratch.
            unsafe { gemm_packed::<T>(n, mat(h_prev, h), &packed, hg.as_mut_ptr() as usize) };
        }
        let (xt, ot, ct, wst) = (
            at::<T>(xw, t * n * g4),
            at::<T>(out, t * n * h),
            at::<T>(cs, t * n * h),
            at::<T>(ws, t * n * g4),
        );
        let hgp = hg.as_ptr() as usize;
        let cp = c_prev;
        over_rows(n, g4, |r0, r1| {
            // SAFETY: step t's rows of xw / out / cells / gates and the scratch hg lie inside their buffers (shapes
            // checked by `infer`), c_prev is c0 or an earlier step's cells; each task writes only rows [r0, r1) of
            // this step's out, cells and gates, which nothing else reads during the loop.
            unsafe {
                T::block(
                    h,
                    rows_of::<T>(xt, g4, r0, r1),
                    rows_of::<T>(hgp, g4, r0, r1),
                    rows_of::<T>(cp, h, r0, r1),
                    rows_of_mut::<T>(ot, h, r0, r1),
                    rows_of_mut::<T>(ct, h, r0, r1),
                    rows_of_mut::<T>(wst, g4, r0, r1),
                )
            }
        });
        (h_prev, c_prev) = (ot, ct);
    }
    // SAFETY: h_prev / c_prev are h0 / c0 or the last step's rows ([N, H]); h_n / c_n are distinct [N, H] outputs.
    unsafe {
        rows_of_mut::<T>(hn, h, 0, n).copy_from_slice(rows_of::<T>(h_prev, h, 0, n));
        rows_of_mut::<T>(cn, h, 0, n).copy_from_slice(rows_of::<T>(c_prev, h, 0, n));
    }
    Ok(())
}

pub(crate) fn lstm_layer_backward_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<LstmLayerBackward>(op)?;
    let ins = prep(inputs)?;
    let outs = work_outputs(outputs)?;
    match ins[op.n_grads()].dtype() {
        DType::F32 => backward_typed::<f32>(op, &ins, &outs)?,
        DType::F64 => backward_typed::<f64>(op, &ins, &outs)?,
        d => {
            return Err(Error::dtype(
                "ferrotorch::lstm_layer_backward",
                d,
                "expects a floating-point input",
            ));
        }
    }
    finish(outputs, &outs)
}

fn backward_typed<T: CellFloat + Prepack>(op: LstmLayerBackward, ins: &[Tensor], outs: &[Tensor]) -> Result<()> {
    let k = op.n_grads();
    let (l, n, h) = (ins[k].shape()[0], ins[k].shape()[1], ins[k + 1].shape()[1]);
    let g4 = 4 * h;
    let ir: Vec<&Tensor> = ins.iter().collect();
    let or: Vec<&Tensor> = outs.iter().collect();
    let acc = access("ferrotorch::lstm_layer_backward", &ir, &or)?;
    let mut next = 0;
    let mut grad = |present: bool| {
        present.then(|| {
            next += 1;
            acc.ins[next - 1] as usize
        })
    };
    let (dout, dhn, dcn) = (grad(op.has[0]), grad(op.has[1]), grad(op.has[2]));
    let p = |i: usize| acc.ins[k + i] as usize;
    let (w, h0, c0, out, cs, ws) = (p(1), p(2), p(3), p(4), p(5), p(6));
    let q = |i: usize| acc.outs[i] as usize;
    let (dxw, dw, db, dh0, dc0) = (q(0), q(1), q(2), q(3), q(4));
    let nh = n * h;
    // The given gradients as slices: dout [L, N, H], dh_n and dc_n [N, H].
    let read = |ptr: Option<usize>, rows: usize| {
        // SAFETY: a present gradient is a live contiguous input of the shape `infer` checked ([L, N, H] or
        // [N, H]), locked for reading by `acc`, which outlives these slices.
        ptr.map(|p| unsafe { rows_of::<T>(p, nh, 0, rows) })
    };
    let (dout, dhn, dcn) = (read(dout, l), read(dhn, 1), read(dcn, 1));
    // The gradient reaching the next step's h (the product of its gates' gradient by w_hh, or dh_n), and c.
    let mut dh_next: Option<Vec<T>> = dhn.map(|d| d.to_vec());
    let mut dc: Option<Vec<T>> = dcn.map(|d| d.to_vec());
    let (mut dh, mut dc_out) = (vec![T::ZERO; nh], vec![T::ZERO; nh]);
    let order = op.layer.order(l);
    // w_hh ([4H, H]) packed once for every step's product.
    // SAFETY: w_hh is a live contiguous [4H, H] input, locked for reading.
    let packed = unsafe { T::prepack_b(mat(w, h), g4, h) };
    for (i, &t) in order.iter().enumerate().rev() {
        let have_dh = match (dout, dh_next.as_deref()) {
            (Some(d), Some(nx)) => {
                for ((o, &a), &b) in dh.iter_mut().zip(&d[t * nh..(t + 1) * nh]).zip(nx) {
                    *o = a + b;
                }
                true
            }
            (Some(d), None) => {
                dh.copy_from_slice(&d[t * nh..(t + 1) * nh]);
                true
            }
            (None, Some(nx)) => {
                dh.copy_from_slice(nx);
                true
            }
            (None, None) => false,
        };
        let c_prev = if i == 0 { c0 } else { at::<T>(cs, order[i - 1] * nh) };
        let (ct, wst, dgt) = (at::<T>(cs, t * nh), at::<T>(ws, t * n * g4), at::<T>(dxw, t * n * g4));
        let (dhp, dcp, dcop) = (
            have_dh.then_some(dh.as_ptr() as usize),
            dc.as_ref().map(|d| d.as_ptr() as usize),
            dc_out.as_mut_ptr() as usize,
        );
        over_rows(n, g4, |r0, r1| {
            // SAFETY: rows [r0, r1) of step t's buffers lie inside them; this task alone writes its rows of the
            // gates' gradient (step t of dxw) and of the scratch dc_out, which nothing else reads meanwhile.
            unsafe {
                T::backward_block(
                    h,
                    (
                        dhp.map(|p| rows_of::<T>(p, h, r0, r1)),
                        dcp.map(|p| rows_of::<T>(p, h, r0, r1)),
                    ),
                    rows_of::<T>(c_prev, h, r0, r1),
                    rows_of::<T>(ct, h, r0, r1),
                    rows_of::<T>(wst, g4, r0, r1),
                    rows_of_mut::<T>(dgt, g4, r0, r1),
                    rows_of_mut::<T>(dcop, h, r0, r1),
                )
            }
        });
        // dh for the step before: the gates' gradient times w_hh ([N, 4H] x [4H, H]).
        let nx = dh_next.get_or_insert_with(|| vec![T::ZERO; nh]);
        nx.fill(T::ZERO);
        if h > 0 {
            // SAFETY: step t of dxw is [N, 4H] (just written), nx a distinct [N, H] scratch.
            unsafe { gemm_packed::<T>(n, mat(dgt, g4), &packed, nx.as_mut_ptr() as usize) };
        }
        match dc.as_mut() {
            Some(d) => std::mem::swap(d, &mut dc_out),
            None => dc = Some(std::mem::replace(&mut dc_out, vec![T::ZERO; nh])),
        }
    }
    // SAFETY: dh0 / dc0 are distinct contiguous [N, H] outputs.
    unsafe {
        let zero_or = |dst: &mut [T], src: Option<&Vec<T>>| match src {
            Some(s) => dst.copy_from_slice(s),
            None => dst.fill(T::ZERO),
        };
        zero_or(rows_of_mut::<T>(dh0, h, 0, n), dh_next.as_ref());
        zero_or(rows_of_mut::<T>(dc0, h, 0, n), dc.as_ref());
    }
    // w_hh's gradient: sum over steps of dG_t^T h_prev(t); dG^T is a column-major view of dxw.
    // SAFETY: dw is a distinct contiguous [4H, H] output.
    let dwv = unsafe { rows_of_mut::<T>(dw, h, 0, g4) };
    if l == 0 || n == 0 || h == 0 {
        dwv.fill(T::ZERO);
    } else {
        let col_major = |ptr: usize| Mat {
            ptr: ptr as *const T,
            rs: 1,
            cs: g4,
        };
        // The step that started from h0, then the others (each started from an output row block).
        let (first, rest_dg, rest_out) = if op.layer.reverse {
            (l - 1, dxw, at::<T>(out, nh))
        } else {
            (0, at::<T>(dxw, n * g4), out)
        };
        // SAFETY: the A views cover n (then (l - 1) * n) rows of dxw, the B views h0 / the matching output rows,
        // and dw is distinct from both.
        unsafe {
            gemm::<T>(
                g4,
                h,
                n,
                col_major(at::<T>(dxw, first * n * g4)),
                mat(h0, h),
                dw,
                h,
                false,
            );
            if l > 1 {
                gemm::<T>(g4, h, (l - 1) * n, col_major(rest_dg), mat(rest_out, h), dw, h, true);
            }
        }
    }
    if op.layer.bias {
        // SAFETY: db is a distinct contiguous [4H] output; dxw was fully written above.
        let (dbv, dg) = unsafe { (rows_of_mut::<T>(db, g4, 0, 1), rows_of::<T>(dxw, g4, 0, l * n)) };
        column_sums(dg, g4, dbv);
    }
    Ok(())
}

/// `out[j] = sum over rows of m[r][j]` (`cols` per row), rows added in
/// order; column blocks in parallel.
fn column_sums<T: CellFloat>(m: &[T], cols: usize, out: &mut [T]) {
    const BLOCK: usize = 256;
    let rows = m.len() / cols.max(1);
    let blocks = cols.div_ceil(BLOCK);
    let optr = out.as_mut_ptr() as usize;
    let task = |b: usize| {
        let (j0, j1) = (b * BLOCK, ((b + 1) * BLOCK).min(cols));
        // SAFETY: columns [j0, j1) of `out` are this task's alone.
        let o = unsafe { rows_of_mut::<T>(at::<T>(optr, j0), j1 - j0, 0, 1) };
        o.fill(T::ZERO);
        for r in 0..rows {
            for (d, &v) in o.iter_mut().zip(&m[r * cols + j0..r * cols + j1]) {
                *d = *d + v;
            }
        }
    };
    if blocks > 1 && rows * cols >= 1 << 16 {
        par_for_each(blocks, task);
    } else {
        (0..blocks).for_each(task);
    }
}
