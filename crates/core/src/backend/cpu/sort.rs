//! CPU sort and topk: per line, a stable sort with NaN above every number.

use std::cmp::Ordering;

use smallvec::SmallVec;

use super::access::access;
use crate::dispatch::{Op, downcast_op};
use crate::layout::Dims;
use crate::ops::{Sort, TopK};
use crate::{Element, Result, Tensor, with_dtype};

/// Ascending order with NaN last (`descending` reverses, NaN first).
#[inline]
fn cmp<T: Element>(a: T, b: T, descending: bool) -> Ordering {
    #[allow(clippy::eq_op)]
    let (an, bn) = (a != a, b != b);
    let o = match (an, bn) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    };
    if descending { o.reverse() } else { o }
}

fn offset_of(mut rem: usize, shape: &[usize], strides: &[usize]) -> usize {
    let mut off = 0;
    for d in (0..shape.len()).rev() {
        off += (rem % shape[d]) * strides[d];
        rem /= shape[d];
    }
    off
}

/// Sorts every line along `dim` of `x`, writing the first `k` of each line.
fn sort_lines(x: &Tensor, vals: &Tensor, idxs: &Tensor, dim: usize, k: usize, descending: bool) -> Result<()> {
    let acc = access("sort", &[x], &[vals, idxs])?;
    let nd = x.ndim();
    let (n, st) = if nd == 0 {
        (1, 1)
    } else {
        (x.shape()[dim], x.strides()[dim])
    };
    let (vst, ist) = if nd == 0 {
        (1, 1)
    } else {
        (vals.strides()[dim], idxs.strides()[dim])
    };
    let others: SmallVec<[usize; 6]> = (0..nd).filter(|&d| d != dim).collect();
    let outer: Dims = others.iter().map(|&d| x.shape()[d]).collect();
    let xs: Dims = others.iter().map(|&d| x.strides()[d]).collect();
    let vs: Dims = others.iter().map(|&d| vals.strides()[d]).collect();
    let is: Dims = others.iter().map(|&d| idxs.strides()[d]).collect();
    let lines: usize = outer.iter().product();
    let (xp, vp, ip) = (acc.ins[0] as usize, acc.outs[0] as usize, acc.outs[1] as usize);
    with_dtype!(x.dtype(), T => {
        let line = |o: usize| {
            let (xb, vb, ib) = (offset_of(o, &outer, &xs), offset_of(o, &outer, &vs), offset_of(o, &outer, &is));
            // SAFETY: in-bounds reads of the line.
            let mut items: Vec<(T, usize)> = (0..n).map(|i| (unsafe { *(xp as *const T).add(xb + i * st) }, i)).collect();
            items.sort_by(|a, b| cmp(a.0, b.0, descending));
            for (j, (v, i)) in items.into_iter().take(k).enumerate() {
                // SAFETY: in-bounds writes of the output lines.
                unsafe {
                    *(vp as *mut T).add(vb + j * vst) = v;
                    *(ip as *mut i64).add(ib + j * ist) = i as i64;
                }
            }
        };
        if lines * n < 1 << 14 {
            (0..lines).for_each(line);
        } else {
            super::warm::par_for_each(lines, line);
        }
    });
    Ok(())
}

pub(crate) fn sort_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<Sort>(op)?;
    let n = inputs[0].shape().get(op.dim).copied().unwrap_or(1);
    sort_lines(inputs[0], outputs[0], outputs[1], op.dim, n, op.descending)
}

pub(crate) fn topk_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<TopK>(op)?;
    // A 0-d input's outputs hold its one element for k = 0 and 1 alike (as
    // PyTorch's): write as many values per line as the outputs have.
    let k = if outputs[0].ndim() == 0 { 1 } else { op.k };
    sort_lines(inputs[0], outputs[0], outputs[1], op.dim, k, op.largest)
}
