//! CPU kernels of `embedding` (rows copied byte for byte, output rows in
//! parallel) and `embedding_renorm_` (each distinct row once, in sorted
//! index order, as PyTorch's).

use super::access::access;
use super::warm::par_for_each;
use crate::dispatch::{Op, downcast_op};
use crate::ops::embedding::{EmbeddingRenorm, checked_indices};
use crate::{Element, Error, Result, Tensor, with_dtype};

pub(crate) fn embedding_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let (w, idx, out) = (inputs[0], inputs[1], outputs[0]);
    let (rows, d) = (w.shape()[0], w.shape()[1]);
    let iv = checked_indices("embedding", idx, rows)?;
    if iv.is_empty() || d == 0 {
        return Ok(());
    }
    let w = w.contiguous()?;
    let acc = access("embedding", &[&w], &[out])?;
    let es = w.element_size();
    let row = d * es;
    let (src, dst) = (acc.ins[0] as usize, acc.outs[0] as usize);
    let per = (1usize << 16).div_ceil(row).max(1);
    let tasks = iv.len().div_ceil(per);
    let task = |k: usize| {
        let (i0, i1) = (k * per, ((k + 1) * per).min(iv.len()));
        for (i, &r) in iv[i0..i1].iter().enumerate() {
            // SAFETY: `r < rows` (checked), so the source row lies in the
            // contiguous weight; output row `i0 + i` lies in the contiguous
            // output and is written by this task alone; they do not overlap
            // (distinct tensors).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (src as *const u8).add(r as usize * row),
                    (dst as *mut u8).add((i0 + i) * row),
                    row,
                );
            }
        }
    };
    if tasks <= 1 {
        (0..tasks).for_each(task);
    } else {
        par_for_each(tasks, task);
    }
    Ok(())
}

pub(crate) fn embedding_renorm_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<EmbeddingRenorm>(op)?;
    let (w, idx, out) = (inputs[0], inputs[1], outputs[0]);
    let (rows, d) = (w.shape()[0], w.shape()[1]);
    let mut iv = checked_indices("embedding_renorm_", idx, rows)?;
    iv.sort_unstable();
    iv.dedup();
    // Work on a contiguous buffer holding the weight's values.
    let work = if out.is_contiguous() {
        out.clone()
    } else {
        w.contiguous()?.clone_tensor()?
    };
    if !work.is_same(w) && work.is_same(out) {
        work.copy_(w)?;
    }
    with_dtype!(w.dtype(), T => {
        if !T::DTYPE.is_floating_point() {
            return Err(Error::dtype("embedding_renorm_", T::DTYPE, "expects a floating-point weight"));
        }
        let acc = access("embedding_renorm_", &[], &[&work])?;
        let base = acc.outs[0] as *mut T;
        for &r in &iv {
            // SAFETY: `r < rows`; the row lies in the contiguous buffer, locked for writing.
            let row = unsafe { std::slice::from_raw_parts_mut(base.add(r as usize * d), d) };
            let norm = row_norm(row, op.norm_type);
            if norm > op.max_norm {
                let scale = op.max_norm / (norm + 1e-7);
                let s = T::from_f64(scale).to_f64();
                for v in row.iter_mut() {
                    *v = T::from_f64(v.to_f64() * s);
                }
            }
        }
    });
    if !work.is_same(out) {
        out.copy_(&work)?;
    }
    Ok(())
}

/// The `p`-norm of a row, accumulated in f64 (`p` inf: the largest
/// magnitude; 0: the count of non-zeros).
fn row_norm<T: Element>(row: &[T], p: f64) -> f64 {
    let it = row.iter().map(|v| v.to_f64().abs());
    if p == f64::INFINITY {
        it.fold(0.0, f64::max)
    } else if p == f64::NEG_INFINITY {
        it.fold(f64::INFINITY, f64::min)
    } else if p == 0.0 {
        it.filter(|&v| v != 0.0).count() as f64
    } else if p == 1.0 {
        it.sum()
    } else if p == 2.0 {
        it.map(|v| v * v).sum::<f64>().sqrt()
    } else {
        it.map(|v| v.powf(p)).sum::<f64>().powf(1.0 / p)
    }
}
