//! CPU kernels of `arange` and `linspace` (random sampling: `sampling/`).

use super::access::access;
use crate::dispatch::{Op, downcast_op};
use crate::ops::{Arange, Linspace};
use crate::{DType, Element, Result, Tensor, with_dtype};

/// Fills a contiguous output from a closure `index -> value`.
fn fill_contiguous<T: Element>(name: &'static str, out: &Tensor, mut f: impl FnMut(usize) -> T) -> Result<()> {
    let target = if out.is_contiguous() {
        out.clone()
    } else {
        out.contiguous()?.clone_tensor()?
    };
    {
        let acc = access(name, &[], &[&target])?;
        let p = acc.outs[0] as *mut T;
        for i in 0..target.numel() {
            // SAFETY: contiguous output of numel elements.
            unsafe { *p.add(i) = f(i) };
        }
    }
    if !target.is_same(out) {
        super::copy::cast_into(out, &target)?;
    }
    Ok(())
}

pub(crate) fn arange_kernel(op: &dyn Op, _inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let a = downcast_op::<Arange>(op)?;
    let out = outputs[0];
    with_dtype!(out.dtype(), T => {
        if T::DTYPE.is_floating_point() {
            fill_contiguous::<T>("arange", out, |i| T::from_f64(a.start + a.step * i as f64))
        } else {
            // Wrapping: the values lie between start and end, but an integer
            // step taken from a float step may exceed them for a narrow dtype.
            let (s, st) = (a.int_start, a.int_step);
            fill_contiguous::<T>("arange", out, |i| T::from_i64(s.wrapping_add(st.wrapping_mul(i as i64))))
        }
    })
}

pub(crate) fn linspace_kernel(op: &dyn Op, _inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let l = downcast_op::<Linspace>(op)?;
    let out = outputs[0];
    let steps = l.steps;
    let half = steps / 2;
    with_dtype!(out.dtype(), T => {
        if steps == 1 {
            // A single value is `start` (PyTorch fills with it).
            let v = if T::DTYPE.is_floating_point() { l.start } else { l.start.trunc() };
            fill_contiguous::<T>("linspace", out, |_| T::from_f64(v))
        } else if T::DTYPE == DType::F64 || !T::DTYPE.is_floating_point() {
            // Integer outputs convert start and end to the integer type
            // first, then step in f64 (as PyTorch).
            let (s, e) = if T::DTYPE.is_floating_point() { (l.start, l.end) } else { (l.start.trunc(), l.end.trunc()) };
            let step = if steps > 1 { (e - s) / (steps - 1) as f64 } else { 0.0 };
            fill_contiguous::<T>("linspace", out, |i| {
                T::from_f64(if i < half { s + step * i as f64 } else { e - step * (steps - i - 1) as f64 })
            })
        } else {
            let (s, e) = (l.start as f32, l.end as f32);
            let step = if steps > 1 { (e - s) / (steps - 1) as f32 } else { 0.0 };
            fill_contiguous::<T>("linspace", out, |i| {
                T::from_f64(if i < half { s + step * i as f32 } else { e - step * (steps - i - 1) as f32 } as f64)
            })
        }
    })
}
