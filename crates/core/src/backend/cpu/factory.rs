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
    // PyTorch's linspace_kernel, as its x86-64 build computes it: the first
    // half `start + step * i`, the second `end - step * (steps - 1 - i)`,
    // each a fused multiply-add (one rounding), except for f16, whose
    // float arithmetic is not fused.
    with_dtype!(out.dtype(), T => {
        if steps == 1 {
            // A single value is `start` (PyTorch fills with it).
            let v = if T::DTYPE.is_floating_point() { l.start } else { l.start.trunc() };
            fill_contiguous::<T>("linspace", out, |_| T::from_f64(v))
        } else if T::DTYPE == DType::F64 || !T::DTYPE.is_floating_point() {
            // Integer outputs convert start and end to the integer type
            // first, step in f64, and truncate.
            let (s, e) = if T::DTYPE.is_floating_point() { (l.start, l.end) } else { (l.start.trunc(), l.end.trunc()) };
            let step = (e - s) / (steps - 1) as f64;
            fill_contiguous::<T>("linspace", out, |i| {
                T::from_f64(if i < half {
                    step.mul_add(i as f64, s)
                } else {
                    (-step).mul_add((steps - i - 1) as f64, e)
                })
            })
        } else {
            // f32 in f32; f16 and bf16 from their own start and end, in f32.
            let (s, e) = (T::from_f64(l.start).to_f64() as f32, T::from_f64(l.end).to_f64() as f32);
            let step = (e - s) / (steps - 1) as f32;
            let fused = T::DTYPE != DType::F16;
            fill_contiguous::<T>("linspace", out, |i| {
                let (base, k, st) = if i < half { (s, i, step) } else { (e, steps - i - 1, -step) };
                let v = if fused { st.mul_add(k as f32, base) } else { base + st * k as f32 };
                T::from_f64(v as f64)
            })
        }
    })
}
