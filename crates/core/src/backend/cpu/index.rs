//! CPU kernels of the index-driven operators.

use smallvec::SmallVec;

use super::access::access;
use crate::dispatch::{Call, Op, Tensors, downcast_op};
use crate::layout::{Dims, Layout, contiguous_strides};
use crate::ops::{Gather, IndexPut, IndexSelect, IndexTensors, Scatter};
use crate::{DType, Element, Error, Result, Tensor, with_dtype};

/// Calls `f` with the storage offsets of every position of `shape`, in
/// row-major order, for each of the given stride lists.
fn odometer<const K: usize>(shape: &[usize], strides: [&[usize]; K], mut f: impl FnMut([usize; K])) {
    let n: usize = shape.iter().product();
    if n == 0 {
        return;
    }
    let nd = shape.len();
    let mut idx: SmallVec<[usize; 6]> = smallvec::smallvec![0; nd];
    let mut off = [0usize; K];
    for _ in 0..n {
        f(off);
        let mut d = nd;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            for k in 0..K {
                off[k] += strides[k][d];
            }
            if idx[d] < shape[d] {
                break;
            }
            for k in 0..K {
                off[k] -= strides[k][d] * shape[d];
            }
            idx[d] = 0;
        }
    }
}

/// The index values as a contiguous i64 vector.
fn index_values(index: &Tensor) -> Result<Vec<i64>> {
    index.to_vec::<i64>()
}

fn check_bound(op: &'static str, v: i64, dim: usize, size: usize, allow_negative: bool) -> Result<usize> {
    let w = if allow_negative && v < 0 { v + size as i64 } else { v };
    if w < 0 || w >= size as i64 {
        return Err(Error::IndexOutOfRange {
            op,
            index: v,
            dim,
            size,
        });
    }
    Ok(w as usize)
}

macro_rules! with_size {
    ($esize:expr, $T:ident => $body:expr) => {
        match $esize {
            1 => {
                type $T = u8;
                $body
            }
            2 => {
                type $T = u16;
                $body
            }
            4 => {
                type $T = u32;
                $body
            }
            _ => {
                type $T = u64;
                $body
            }
        }
    };
}

pub(crate) fn gather_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let dim = downcast_op::<Gather>(op)?.dim;
    let (x, index, out) = (inputs[0], inputs[1], outputs[0]);
    if index.numel() == 0 {
        return Ok(());
    }
    let idx = index_values(index)?;
    let size = x.shape().get(dim).copied().unwrap_or(1);
    let xst = x.strides().to_vec();
    let dst = xst.get(dim).copied().unwrap_or(0);
    // Offsets of x at the index's positions with the gathered dim at 0.
    let mut xst0 = xst.clone();
    if let Some(s) = xst0.get_mut(dim) {
        *s = 0;
    }
    let xst0: Vec<usize> = if x.ndim() == 0 { vec![0; index.ndim()] } else { xst0 };
    let acc = access("gather", &[x], &[out])?;
    let (xp, op_) = (acc.ins[0], acc.outs[0]);
    let ost = out.strides().to_vec();
    let mut k = 0;
    let mut err = None;
    with_size!(x.element_size(), T => {
        odometer(index.shape(), [&xst0, &ost], |[xo, oo]| {
            if err.is_some() {
                return;
            }
            match check_bound("gather", idx[k], dim, size, false) {
                // SAFETY: `oo` walks out's layout; `xo` walks x with the gather
                // dim's stride zeroed, and `i < size` (checked just above)
                // adds `i * dst` inside that dim; both buffers are locked.
                Ok(i) => unsafe { *(op_ as *mut T).add(oo) = *(xp as *const T).add(xo + i * dst) },
                Err(e) => err = Some(e),
            }
            k += 1;
        });
    });
    err.map_or(Ok(()), Err)
}

pub(crate) fn scatter_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<Scatter>(op)?;
    let (x, index, src, out) = (inputs[0], inputs[1], inputs[2], outputs[0]);
    let name = op.entry().base_name();
    super::copy::cast_into(out, x)?;
    let idx = index_values(index)?;
    let dim = op.dim;
    // A 0-d output counts as 1-d of one element (as the shape rule allows).
    let size = out.shape().get(dim).copied().unwrap_or(1);
    let dst = out.strides().get(dim).copied().unwrap_or(0);
    let ost0: Vec<usize> = if out.ndim() == 0 {
        vec![0; index.ndim()]
    } else {
        let mut s = out.strides().to_vec();
        s[dim] = 0;
        s
    };
    // A one-element src (a scalar value) broadcasts.
    let sst: Vec<usize> = if src.ndim() == index.ndim() {
        src.strides().to_vec()
    } else {
        vec![0; index.ndim()]
    };
    let acc = access(name, &[src], &[out])?;
    let (sp, op_) = (acc.ins[0], acc.outs[0]);
    let mut k = 0;
    let mut err = None;
    with_dtype!(out.dtype(), T => {
        odometer(index.shape(), [&sst, &ost0], |[so, oo]| {
            if err.is_some() {
                return;
            }
            match check_bound(name, idx[k], dim, size, false) {
                // The shape rule checked that src covers the index's shape
                // (or is one element, strides zero) and that out does too
                // outside `dim` (a 0-d out counts as 1-d, strides zero).
                Ok(i) => {
                    // SAFETY: `so` walks src in its layout, `oo` walks out with
                    // `dim` zeroed and `i < size` (checked) adds `i * dst`
                    // inside that dim; src and out are locked by `acc`.
                    unsafe {
                        let v = *(sp as *const T).add(so);
                        let d = (op_ as *mut T).add(oo + i * dst);
                        *d = if op.add { add_elems(*d, v) } else { v };
                    }
                }
                Err(e) => err = Some(e),
            }
            k += 1;
        });
    });
    err.map_or(Ok(()), Err)
}

pub(crate) fn index_put_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let accumulate = downcast_op::<IndexPut>(op)?.accumulate;
    let (x, values, positions, out) = (inputs[0], inputs[1], inputs[2], outputs[0]);
    super::copy::cast_into(out, x)?;
    let pos = index_values(positions)?;
    let n = out.numel();
    // The storage offset of each flat row-major position of `out`.
    let offset_of = |p: i64| -> Result<usize> {
        if p < 0 || p as usize >= n {
            return Err(Error::IndexOutOfRange {
                op: "index_put",
                index: p,
                dim: 0,
                size: n,
            });
        }
        let mut rest = p as usize;
        let mut off = 0;
        for d in (0..out.ndim()).rev() {
            let size = out.shape()[d];
            off += (rest % size) * out.strides()[d];
            rest /= size;
        }
        Ok(off)
    };
    let offsets: Vec<usize> = pos.iter().map(|&p| offset_of(p)).collect::<Result<_>>()?;
    let vst = values.layout().broadcast_strides(positions.shape());
    let acc = access("index_put", &[values], &[out])?;
    let (vp, op_) = (acc.ins[0], acc.outs[0]);
    let mut k = 0;
    with_dtype!(out.dtype(), T => {
        odometer(positions.shape(), [&vst], |[vo]| {
            // SAFETY: `vo` walks values broadcast to the positions' shape
            // (the shape rule checked it broadcasts); every offset was
            // computed from an in-range position of out's layout; values
            // and out are locked by `acc`.
            unsafe {
                let v = *(vp as *const T).add(vo);
                let d = (op_ as *mut T).add(offsets[k]);
                *d = if accumulate { add_elems(*d, v) } else { v };
            }
            k += 1;
        });
    });
    Ok(())
}

#[inline]
fn add_elems<T: Element>(a: T, b: T) -> T {
    if T::DTYPE.is_floating_point() {
        T::from_f64(a.to_f64() + b.to_f64())
    } else if T::DTYPE == DType::Bool {
        T::from_i64((a.is_nonzero() || b.is_nonzero()) as i64)
    } else {
        T::from_i64(a.to_i64().wrapping_add(b.to_i64()))
    }
}

pub(crate) fn index_select_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let dim = downcast_op::<IndexSelect>(op)?.dim;
    let (x, index, out) = (inputs[0], inputs[1], outputs[0]);
    let idx = index_values(index)?;
    if x.ndim() == 0 {
        for &v in &idx {
            check_bound("index_select", v, 0, 1, false)?;
        }
        return super::copy::cast_into(out, x);
    }
    let size = x.shape()[dim];
    let rows: Vec<usize> = idx
        .iter()
        // Unlike indexing with `[]`, index_select rejects negative indices (as PyTorch).
        .map(|&v| check_bound("index_select", v, dim, size, false))
        .collect::<Result<_>>()?;
    let mut xst = x.strides().to_vec();
    let dst = xst[dim];
    xst[dim] = 0;
    // Position along `dim` of the output selects row rows[i].
    let mut shape_wo = out.shape().to_vec();
    shape_wo[dim] = 1;
    let ost = out.strides().to_vec();
    let acc = access("index_select", &[x], &[out])?;
    let (xp, op_) = (acc.ins[0], acc.outs[0]);
    with_size!(x.element_size(), T => {
        for (i, &r) in rows.iter().enumerate() {
            let xo0 = r * dst;
            let oo0 = i * ost[dim];
            odometer(&shape_wo, [&xst, &ost], |[xo, oo]| {
                // SAFETY: in bounds.
                unsafe { *(op_ as *mut T).add(oo0 + oo) = *(xp as *const T).add(xo0 + xo) };
            });
        }
    });
    Ok(())
}

pub(crate) fn index_tensors_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let start = downcast_op::<IndexTensors>(op)?.start;
    let x = inputs[0];
    let idx_t = &inputs[1..];
    let out = outputs[0];
    let k = idx_t.len();
    let mut bshape = Dims::new();
    for t in idx_t {
        bshape = crate::layout::broadcast_shapes("index", &bshape, t.shape())?;
    }
    let nb: usize = bshape.iter().product();
    // As PyTorch, whose kernel checks each index as it reads: an empty
    // result reads nothing and checks nothing, except that a non-empty
    // (broadcast) index into a dim of size 0 is always out of range.
    if out.numel() == 0 {
        if nb > 0
            && let Some(j) = (0..k).find(|&j| x.shape()[start + j] == 0)
        {
            return Err(Error::IndexOutOfRange {
                op: "index",
                index: index_values(idx_t[j])?.first().copied().unwrap_or(0),
                dim: start + j,
                size: 0,
            });
        }
        return Ok(());
    }
    // x offset contributed by each broadcast index position.
    let mut boff = vec![0usize; nb];
    for (j, t) in idx_t.iter().enumerate() {
        let shape_i: Vec<i64> = bshape.iter().map(|&s| s as i64).collect();
        let vals = index_values(&t.expand(&shape_i)?)?;
        let d = start + j;
        let (size, st) = (x.shape()[d], x.strides()[d]);
        for (b, &v) in vals.iter().enumerate() {
            boff[b] += check_bound("index", v, d, size, true)? * st;
        }
    }
    let pre = Layout {
        shape: x.shape()[..start].into(),
        strides: x.strides()[..start].into(),
        offset: 0,
    };
    let post_shape: Dims = x.shape()[start + k..].into();
    let post_st: Dims = x.strides()[start + k..].into();
    let post_n: usize = post_shape.iter().product();
    let post_cont = contiguous_strides(&post_shape);
    let acc = access("index", &[x], &[out])?;
    let (xp, op_) = (acc.ins[0], acc.outs[0]);
    let mut o = 0usize; // out is contiguous
    with_size!(x.element_size(), T => {
        odometer(&pre.shape, [&pre.strides], |[po]| {
            for &bo in &boff {
                let base = po + bo;
                odometer(&post_shape, [&post_st, &post_cont], |[so, co]| {
                    // SAFETY: in bounds by the checks above.
                    unsafe { *(op_ as *mut T).add(o + co) = *(xp as *const T).add(base + so) };
                });
                o += post_n;
            }
        });
    });
    Ok(())
}

pub(crate) fn nonzero_kernel(call: &Call) -> Result<Tensors> {
    let x = call.inputs[0].contiguous()?;
    let flags: Vec<bool> = x.to_vec::<bool>()?;
    let nd = x.ndim();
    let shape = x.shape().to_vec();
    let n = flags.iter().filter(|f| **f).count();
    // Column-major, as PyTorch's (strides (1, n)): dim d's indices are row d
    // of an [nd, n] buffer, transposed.
    let mut out: Vec<i64> = vec![0; n * nd];
    let mut k = 0;
    for (i, &f) in flags.iter().enumerate() {
        if f {
            let mut rem = i;
            for d in (0..nd).rev() {
                out[d * n + k] = (rem % shape[d]) as i64;
                rem /= shape[d];
            }
            k += 1;
        }
    }
    let r = Tensor::from_vec(out, [nd, n])?.t()?;
    Ok(smallvec::smallvec![r.into_result(&[])?])
}
