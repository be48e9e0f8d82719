//! CPU sort and topk: per line, a stable sort with NaN above every number.

use std::cmp::Ordering;

use smallvec::SmallVec;

use super::access::access;
use crate::dispatch::{Op, downcast_op};
use crate::layout::Dims;
use crate::ops::Sort;
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

/// The strides of `t` with a size-1 `dim` inserted (stride 0) when `t` has
/// one dim fewer than `nd` (a reduction's output without keepdim).
fn strides_with_dim(t: &Tensor, dim: usize, nd: usize) -> Dims {
    let mut st: Dims = t.strides().iter().copied().collect();
    if t.ndim() + 1 == nd {
        st.insert(dim, 0);
    }
    st
}

/// Runs `pick` on every line along `dim` of `x` (its elements paired with
/// their positions), then writes the picked items, in order, to the
/// lines of `vals` and `idxs` (which may lack `dim`: one item per line).
pub(super) fn line_kernel<T: Element>(
    name: &'static str,
    x: &Tensor,
    vals: &Tensor,
    idxs: &Tensor,
    dim: usize,
    pick: impl Fn(&mut Vec<(T, usize)>) -> std::ops::Range<usize> + Sync,
) -> Result<()> {
    let acc = access(name, &[x], &[vals, idxs])?;
    let nd = x.ndim();
    if nd == 0 {
        // SAFETY: one element each.
        unsafe {
            let mut items = vec![(*(acc.ins[0] as *const T), 0usize)];
            let r = pick(&mut items);
            let (v, i) = items[r.start];
            *(acc.outs[0] as *mut T) = v;
            *(acc.outs[1] as *mut i64) = i as i64;
        }
        return Ok(());
    }
    let (n, st) = (x.shape()[dim], x.strides()[dim]);
    let (vstr, istr) = (strides_with_dim(vals, dim, nd), strides_with_dim(idxs, dim, nd));
    let (vst, ist) = (vstr[dim], istr[dim]);
    let others: SmallVec<[usize; 6]> = (0..nd).filter(|&d| d != dim).collect();
    let outer: Dims = others.iter().map(|&d| x.shape()[d]).collect();
    let xs: Dims = others.iter().map(|&d| x.strides()[d]).collect();
    let vs: Dims = others.iter().map(|&d| vstr[d]).collect();
    let is: Dims = others.iter().map(|&d| istr[d]).collect();
    let lines: usize = outer.iter().product();
    let (xp, vp, ip) = (acc.ins[0] as usize, acc.outs[0] as usize, acc.outs[1] as usize);
    let line = |o: usize| {
        let (xb, vb, ib) = (
            offset_of(o, &outer, &xs),
            offset_of(o, &outer, &vs),
            offset_of(o, &outer, &is),
        );
        // SAFETY: in-bounds reads of the line.
        let mut items: Vec<(T, usize)> = (0..n)
            .map(|i| (unsafe { *(xp as *const T).add(xb + i * st) }, i))
            .collect();
        let r = pick(&mut items);
        for (j, &(v, i)) in items[r].iter().enumerate() {
            // SAFETY: in-bounds writes of the output lines (the range is
            // within the outputs' extent along `dim`).
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
    Ok(())
}

/// Sorts every line along `dim` of `x`: stably with `stable`, else as
/// PyTorch's default CPU sort does (libstdc++'s `std::sort`, NaN last
/// ascending and first descending), whose order among equal elements is
/// PyTorch's.
fn sort_lines(x: &Tensor, vals: &Tensor, idxs: &Tensor, dim: usize, descending: bool, stable: bool) -> Result<()> {
    with_dtype!(x.dtype(), T => {
        line_kernel::<T>("sort", x, vals, idxs, dim, |items| {
            if stable {
                items.sort_by(|a, b| cmp(a.0, b.0, descending));
            } else {
                super::stl_algo::sort(items, &|a: &(T, usize), b: &(T, usize)| key_value_less(a.0, b.0, descending));
            }
            0..items.len()
        })
    })
}

/// PyTorch's `KeyValueCompAsc` / `KeyValueCompDesc`.
#[inline]
pub(super) fn key_value_less<T: Element>(a: T, b: T, descending: bool) -> bool {
    #[allow(clippy::eq_op)]
    let (an, bn) = (a != a, b != b);
    if descending {
        (an && !bn) || a > b
    } else {
        (!an && bn) || a < b
    }
}

pub(crate) fn sort_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<Sort>(op)?;
    sort_lines(inputs[0], outputs[0], outputs[1], op.dim, op.descending, op.stable)
}
