//! CPU kernel of `index_add`, `index_copy` and `index_fill`.
//!
//! The output's slices along `dim` are split into ranges, one task each;
//! the index entries are grouped by range (a stable counting sort), and a
//! task handles its group's entries in index order. Every output slice is written by one task in a
//! fixed order, so the result is the same for any thread count.

use super::copy::{cast_into, scalar_as};
use crate::dispatch::{Op, downcast_op};
use crate::ops::index_more::{IndexRows, IndexWrite};
use crate::{DType, Element, Error, Result, Tensor, with_dtype};

/// Elements of a contiguous run PyTorch's vectorised add handles at a time
/// for 16-bit floats (two AVX-512 vectors; the rest of a run goes through
/// its scalar loop).
const HALF_VECTOR_STEP: usize = 64;

/// One slice's update: `dst op= src` (`src` empty for fill). `fused`: the
/// add of PyTorch's kernel for two or more dims (its `add` with alpha: a
/// fused multiply-add, except in the scalar tail of a 16-bit run, where
/// `alpha * src` is rounded first); otherwise its loop for 0-d and 1-d
/// tensors, `dst += src * alpha` in the element type.
///
/// `run`: where the slice sits in the contiguous run PyTorch's iterator
/// loops over (its offset and the run's length).
fn write_slice<T: Element>(write: IndexWrite, fused: bool, run: (usize, usize), dst: &mut [T], src: &[T]) {
    match write {
        IndexWrite::Copy => dst.copy_from_slice(src),
        IndexWrite::Fill(v) => dst.fill(scalar_as::<T>(v)),
        IndexWrite::Add(alpha) => match T::DTYPE {
            // alpha 1: every path is one rounded sum (fma(s, 1, d) = d + s).
            DType::F32 if alpha.to_f64() == 1.0 => {
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = T::from_f64((d.to_f64() as f32 + s.to_f64() as f32) as f64);
                }
            }
            DType::F64 if alpha.to_f64() == 1.0 => {
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = T::from_f64(d.to_f64() + s.to_f64());
                }
            }
            DType::F32 if fused => {
                let a = alpha.to_f64() as f32;
                for (d, s) in dst.iter_mut().zip(src) {
                    let (dv, sv) = (d.to_f64() as f32, s.to_f64() as f32);
                    *d = T::from_f64(sv.mul_add(a, dv) as f64);
                }
            }
            DType::F64 if fused => {
                let a = alpha.to_f64();
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = T::from_f64(s.to_f64().mul_add(a, d.to_f64()));
                }
            }
            DType::F32 => {
                let a = alpha.to_f64() as f32;
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = T::from_f64((d.to_f64() as f32 + s.to_f64() as f32 * a) as f64);
                }
            }
            DType::F64 => {
                let a = alpha.to_f64();
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = T::from_f64(d.to_f64() + s.to_f64() * a);
                }
            }
            DType::F16 | DType::BF16 => {
                // alpha in the 16-bit type; the vectorised part fused in f32,
                // the rest in the 16-bit type (product rounded, then the sum).
                let a = T::from_f64(alpha.to_f64()).to_f64() as f32;
                let (offset, len) = run;
                let vector_end = if fused {
                    len / HALF_VECTOR_STEP * HALF_VECTOR_STEP
                } else {
                    0
                };
                for (i, (d, s)) in dst.iter_mut().zip(src).enumerate() {
                    let (dv, sv) = (d.to_f64() as f32, s.to_f64() as f32);
                    *d = if offset + i < vector_end {
                        T::from_f64(sv.mul_add(a, dv) as f64)
                    } else {
                        let p = T::from_f64((sv * a) as f64).to_f64() as f32;
                        T::from_f64((dv + p) as f64)
                    };
                }
            }
            DType::Bool => {
                let a = alpha.to_f64() != 0.0;
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = T::from_i64(i64::from(d.is_nonzero() || (a && s.is_nonzero())));
                }
            }
            _ => {
                let a = alpha.to_i64();
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = T::from_i64(d.to_i64().wrapping_add(s.to_i64().wrapping_mul(a)));
                }
            }
        },
    }
}

/// The index as positions along a dim of size `n`: fill wraps negative
/// indices, add and copy reject them (PyTorch's checks and messages).
fn positions(op: &IndexRows, index: &Tensor, n: usize) -> Result<Vec<usize>> {
    let name = op.entry().base_name();
    let raw = index.to_dtype(DType::I64)?.contiguous()?.to_vec::<i64>()?;
    let n_i = n as i64;
    raw.into_iter()
        .map(|i| {
            let wrapped = if matches!(op.write, IndexWrite::Fill(_)) && i < 0 {
                i + n_i
            } else {
                i
            };
            if (0..n_i).contains(&wrapped) {
                Ok(wrapped as usize)
            } else {
                Err(Error::invalid(
                    name,
                    match op.write {
                        IndexWrite::Add(_) => "index out of range in self".to_string(),
                        _ => format!(
                            "{name}(): index {i} is out of bounds for dimension {} with size {n}",
                            op.dim
                        ),
                    },
                ))
            }
        })
        .collect()
}

/// How many entries ahead a task prefetches the source slice.
const PREFETCH_AHEAD: usize = 8;

/// Hints the cache to load the first 256 bytes of `len` elements at `p`
/// (a no-op off x86-64); the address is only a hint, never dereferenced.
#[inline(always)]
fn prefetch_slice<T>(p: *const T, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let bytes = (len * std::mem::size_of::<T>()).min(256);
        for line in (0..bytes).step_by(64) {
            // SAFETY: SSE is part of the x86-64 baseline, and a prefetch
            // never faults or reads memory into the program.
            unsafe { _mm_prefetch::<_MM_HINT_T0>((p as *const i8).wrapping_add(line)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// The entries of `pos` grouped by the range of `per` positions they fall
/// in (`ranges` of them), each group in index order: the groups' starts
/// (`ranges + 1` of them) and the entry numbers (a stable counting sort).
fn group_by_range(pos: &[usize], per: usize, ranges: usize) -> (Vec<usize>, Vec<usize>) {
    let mut starts = vec![0usize; ranges + 1];
    for &p in pos {
        starts[p / per + 1] += 1;
    }
    for r in 0..ranges {
        starts[r + 1] += starts[r];
    }
    let mut next = starts.clone();
    let mut entries = vec![0usize; pos.len()];
    for (i, &p) in pos.iter().enumerate() {
        let slot = &mut next[p / per];
        entries[*slot] = i;
        *slot += 1;
    }
    (starts, entries)
}

pub(crate) fn index_rows_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<IndexRows>(op)?;
    let (x, index, out) = (inputs[0], inputs[1], outputs[0]);
    let shape = x.shape().to_vec();
    let d = op.dim;
    let n = shape.get(d).copied().unwrap_or(1);
    // PyTorch checks (and uses) the indices only where its kernel visits elements.
    let pos = if op.visits(x, index) {
        positions(&op, index, n)?
    } else {
        Vec::new()
    };
    if let IndexWrite::Fill(v) = op.write
        && out.layout().has_internal_overlap()
    {
        // An expanded self filled in place: the value goes through the
        // selected slices' strides (fill_ writes overlapping elements).
        if !out.is_same(x) {
            cast_into(out, x)?;
        }
        for &p in &pos {
            out.select(d as i64, p as i64)?.fill_(v)?;
        }
        return Ok(());
    }
    let outer: usize = shape[..d.min(shape.len())].iter().product();
    let inner: usize = shape.get(d + 1..).map_or(1, |s| s.iter().product());
    let k = pos.len();
    let fused = x.ndim() > 1;
    // Work on a contiguous buffer holding self's values.
    let work = if out.is_contiguous() {
        out.clone()
    } else {
        x.contiguous()?.clone_tensor()?
    };
    if !work.is_same(x) {
        cast_into(&work, x)?;
    }
    let src = inputs.get(2).map(|s| s.contiguous()).transpose()?;
    let src_len = src.as_ref().map_or(0, |s| s.numel());
    with_dtype!(x.dtype(), T => {
        let ins: Vec<&Tensor> = src.iter().collect();
        let acc = super::access::access(op.entry().base_name(), &ins, &[&work])?;
        let base = acc.outs[0] as usize;
        let src_base = acc.ins.first().map_or(0, |p| *p as usize);
        let tasks = if outer * k * inner < 1 << 15 { 1 } else { (rayon::current_num_threads() * 4).min(n.max(1)) };
        let per = n.div_ceil(tasks.max(1)).max(1);
        let (starts, entries) = group_by_range(&pos, per, tasks.max(1));
        let task = |t: usize| {
            for o in 0..outer {
                let group = &entries[starts[t]..starts[t + 1]];
                for (j, &i) in group.iter().enumerate() {
                    // The source slices of a group are scattered: ask for
                    // the one a few entries ahead now, so the loads overlap.
                    if let Some(&ahead) = group.get(j + PREFETCH_AHEAD) {
                        let from = (o * k + ahead) * inner;
                        if from + inner <= src_len {
                            prefetch_slice((src_base as *const T).wrapping_add(from), inner);
                        }
                    }
                    let p = pos[i];
                    let at = (o * n + p) * inner;
                    // SAFETY: `at..at + inner` lies in the contiguous output
                    // (p < n), and only this task writes slices in [lo, hi).
                    let dst = unsafe { std::slice::from_raw_parts_mut((base as *mut T).add(at), inner) };
                    let from = (o * k + i) * inner;
                    let s: &[T] = if from + inner <= src_len {
                        // SAFETY: a slice of the contiguous source, read only.
                        unsafe { std::slice::from_raw_parts((src_base as *const T).add(from), inner) }
                    } else {
                        &[]
                    };
                    // One run per slice, or all of them when the dim has size 1
                    // (PyTorch's iterator then coalesces the slices).
                    let run = if n == 1 && k == 1 { (o * inner, outer * inner) } else { (0, inner) };
                    write_slice(op.write, fused, run, dst, s);
                }
            }
        };
        if tasks <= 1 {
            task(0);
        } else {
            super::warm::par_for_each(tasks, task);
        }
    });
    if !work.is_same(out) {
        cast_into(out, &work)?;
    }
    Ok(())
}
