//! CPU kernels of the order statistics (`kthvalue`, `median`,
//! `nanmedian`, `mode`) and of `topk`, with PyTorch's algorithms from
//! [`super::stl_algo`] so that ties resolve to PyTorch's indices.

// Comparisons are generic over every dtype, bool included, where `a < b` is intended.
#![allow(clippy::bool_comparison)]

use super::access::access;
use super::sort::line_kernel;
use super::stl_algo;
use crate::dispatch::{Op, downcast_op};
use crate::ops::TopK;
use crate::ops::select::{MedianAll, SelectDim, SelectKind};
use crate::{Element, Result, Tensor, with_dtype};

#[inline(always)]
#[allow(clippy::eq_op)]
fn nan<T: Element>(v: T) -> bool {
    v != v
}

/// `x > y` with NaN above every number (PyTorch's `gt_or_nan`).
#[inline(always)]
fn gt_or_nan<T: Element>(x: T, y: T) -> bool {
    (nan(x) && !nan(y)) || x > y
}

/// The range of `items` (a line and its positions) holding the line's pick.
fn select_line<T: Element>(kind: SelectKind, items: &mut [(T, usize)]) -> std::ops::Range<usize> {
    let n = items.len();
    match kind {
        SelectKind::Kth(k) => {
            // TH's quickselect with NaN as the largest.
            stl_algo::quick_select(items, k - 1, &|a: &(T, usize), b: &(T, usize)| gt_or_nan(a.0, b.0));
            k - 1..k
        }
        SelectKind::Median => {
            if let Some(p) = items.iter().position(|a| nan(a.0)) {
                return p..p + 1;
            }
            // A total order (value, then position): any selection agrees.
            let nth = (n - 1) / 2;
            stl_algo::nth_element(items, nth, &|a: &(T, usize), b: &(T, usize)| {
                a.0 < b.0 || (a.0 == b.0 && a.1 < b.1)
            });
            nth..nth + 1
        }
        SelectKind::NanMedian => {
            let nans = items.iter().filter(|a| nan(a.0)).count();
            // C++'s (size - num_nan - 1) / 2, truncating toward zero.
            let nth = (n - nans).saturating_sub(1) / 2;
            stl_algo::nth_element(items, nth, &|a: &(T, usize), b: &(T, usize)| {
                a.0 < b.0 || (a.0 == b.0 && a.1 < b.1) || (nan(b.0) && !nan(a.0))
            });
            nth..nth + 1
        }
        SelectKind::Mode => {
            // std::sort by value, then the longest run (the first of equally
            // long ones), reported with the position of its last element.
            stl_algo::sort(items, &|a: &(T, usize), b: &(T, usize)| a.0 < b.0);
            let (mut best, mut best_freq, mut freq) = (0, 0, 0);
            for i in 0..n {
                freq += 1;
                if i == n - 1 || items[i].0 != items[i + 1].0 {
                    if freq > best_freq {
                        best = i;
                        best_freq = freq;
                    }
                    freq = 0;
                }
            }
            best..best + 1
        }
    }
}

pub(crate) fn select_dim_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<SelectDim>(op)?;
    let name = op.entry().base_name();
    with_dtype!(inputs[0].dtype(), T => {
        line_kernel::<T>(name, inputs[0], outputs[0], outputs[1], op.dim, |items| select_line(op.kind, items))
    })
}

pub(crate) fn median_all_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<MedianAll>(op)?;
    let x = inputs[0].contiguous()?;
    let acc = access(op.entry().base_name(), &[&x], &[outputs[0]])?;
    with_dtype!(x.dtype(), T => {
        // SAFETY: a contiguous input of numel elements and a 0-d output.
        let mut v: Vec<T> = unsafe { std::slice::from_raw_parts(acc.ins[0] as *const T, x.numel()) }.to_vec();
        let n = v.len();
        let out = if !op.ignore_nan && v.iter().any(|a| nan(*a)) || n == 0 {
            T::from_f64(f64::NAN)
        } else if !op.ignore_nan {
            let nth = (n - 1) / 2;
            stl_algo::nth_element(&mut v, nth, &|a: &T, b: &T| a < b);
            v[nth]
        } else {
            let nans = v.iter().filter(|a| nan(**a)).count();
            let nth = (n - nans).saturating_sub(1) / 2;
            stl_algo::nth_element(&mut v, nth, &|a: &T, b: &T| a < b || (nan(*b) && !nan(*a)));
            v[nth]
        };
        // SAFETY: the 0-d output.
        unsafe { *(acc.outs[0] as *mut T) = out };
    });
    Ok(())
}

pub(crate) fn topk_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<TopK>(op)?;
    let (k, largest) = (op.k, op.largest);
    with_dtype!(inputs[0].dtype(), T => {
        line_kernel::<T>("topk", inputs[0], outputs[0], outputs[1], op.dim, |items| {
            let n = items.len();
            // A 0-d input's outputs hold its element for k = 0 and 1 alike.
            if n == 1 || k == 0 {
                return 0..k.max(usize::from(outputs[0].ndim() == 0)).min(n);
            }
            // PyTorch's topk_impl_loop: a partial sort for small k, else
            // nth_element and a sort of the first k - 1.
            let before = |a: &(T, usize), b: &(T, usize)| {
                if largest {
                    gt_or_nan(a.0, b.0)
                } else {
                    (!nan(a.0) && nan(b.0)) || a.0 < b.0
                }
            };
            if k * 64 <= n {
                stl_algo::partial_sort(items, k, &before);
            } else {
                stl_algo::nth_element(items, k - 1, &before);
                stl_algo::sort(&mut items[..k - 1], &before);
            }
            0..k
        })
    })
}
