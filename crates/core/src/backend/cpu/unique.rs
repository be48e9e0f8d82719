//! CPU kernels of `unique` and `unique_consecutive`.
//!
//! Elements sort by an order-preserving 64-bit key with a stable LSD radix
//! sort (only the key bytes that vary get a pass). Where equal elements
//! can be told apart (float NaNs, each its own value, and zeros of either
//! sign, one value), they sort as PyTorch's own sort leaves them, so the
//! inverse indices and the reported zero are PyTorch's.
//! Integers whose values span no more than about the element count skip
//! the sort: a counting pass over a table indexed by value (per-part
//! tables summed exactly, so the result does not depend on the thread
//! count) gives the values, the counts and each value's rank at once.
//! Slices along a dim sort with libstdc++'s `std::sort` and a lexicographic
//! comparison, PyTorch's algorithm, so NaN-holding slices land where
//! PyTorch puts them.

// Comparisons are generic over every dtype, bool included, where `a < b` is intended.
#![allow(clippy::bool_comparison)]

use rayon::prelude::*;

use super::sort::key_value_less;
use super::stl_algo;
use crate::dispatch::{Call, Tensors, downcast_op};
use crate::ops::unique::Unique;
use crate::{Element, Result, Tensor, with_dtype};

/// An order-preserving key: integers by value, floats by value with
/// `-0.0` as `0.0` and NaN above everything.
#[inline]
fn order_key<T: Element>(v: T) -> u64 {
    if T::DTYPE.is_floating_point() {
        let f = v.to_f64();
        if f.is_nan() {
            return u64::MAX;
        }
        let b = (f + 0.0).to_bits();
        if b >> 63 == 1 { !b } else { b | 1 << 63 }
    } else {
        (v.to_i64() as u64) ^ (1 << 63)
    }
}

/// Whether `v` makes equal elements tell apart in unique's outputs: a NaN
/// (never equal to anything) or `-0.0` (equal to `0.0`).
#[inline]
fn distinguishable_ties<T: Element>(v: T) -> bool {
    let f = v.to_f64();
    f.is_nan() || (f == 0.0 && f.is_sign_negative())
}

/// The permutation sorting `keys` stably, and the sorted keys.
fn radix_argsort(keys: Vec<u64>) -> (Vec<u64>, Vec<usize>) {
    let n = keys.len();
    if n < 256 || u32::try_from(n).is_err() {
        let mut p: Vec<usize> = (0..n).collect();
        p.sort_by_key(|&i| keys[i]);
        let sorted = p.iter().map(|&i| keys[i]).collect();
        return (sorted, p);
    }
    let (mut or, mut and) = (0u64, !0u64);
    for &k in &keys {
        or |= k;
        and &= k;
    }
    let varying = or ^ and;
    let mut k_cur = keys;
    let mut i_cur: Vec<u32> = (0..n as u32).collect();
    let mut k_tmp = vec![0u64; n];
    let mut i_tmp = vec![0u32; n];
    for shift in (0..64).step_by(8) {
        if (varying >> shift) & 0xff == 0 {
            continue;
        }
        let mut offsets = [0usize; 256];
        for &k in &k_cur {
            offsets[((k >> shift) & 0xff) as usize] += 1;
        }
        let mut total = 0;
        for o in offsets.iter_mut() {
            let c = *o;
            *o = total;
            total += c;
        }
        for (&k, &i) in k_cur.iter().zip(&i_cur) {
            let b = ((k >> shift) & 0xff) as usize;
            let p = offsets[b];
            offsets[b] += 1;
            k_tmp[p] = k;
            i_tmp[p] = i;
        }
        std::mem::swap(&mut k_cur, &mut k_tmp);
        std::mem::swap(&mut i_cur, &mut i_tmp);
    }
    (k_cur, i_cur.into_iter().map(|i| i as usize).collect())
}

/// Elements a parallel pass takes at least.
const PAR_GRAIN: usize = 1 << 15;

/// Sorted unique integers by counting, when their values span at most
/// `max(n, 65536)`: the values, the inverse indices (when `want_inverse`)
/// and the counts; `None` for floats, wider spans or more than `u32::MAX`
/// elements.
fn unique_dense<T: Element>(data: &[T], want_inverse: bool) -> Option<(Vec<T>, Vec<i64>, Vec<i64>)> {
    let n = data.len();
    if T::DTYPE.is_floating_point() || n == 0 || u32::try_from(n).is_err() {
        return None;
    }
    let parallel = n >= 2 * PAR_GRAIN && rayon::current_num_threads() > 1;
    let min_max = |c: &[T]| {
        c.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &v| {
            (lo.min(v.to_i64()), hi.max(v.to_i64()))
        })
    };
    let (lo, hi) = if parallel {
        data.par_chunks(PAR_GRAIN)
            .map(min_max)
            .reduce(|| (i64::MAX, i64::MIN), |a, b| (a.0.min(b.0), a.1.max(b.1)))
    } else {
        min_max(data)
    };
    let span = usize::try_from(hi.abs_diff(lo)).ok()?.checked_add(1)?;
    if span > n.max(1 << 16) {
        return None;
    }
    // The slot of a value: its distance from the minimum (< span).
    let slot = move |v: T| v.to_i64().abs_diff(lo) as usize;
    let histogram = |c: &[T]| {
        let mut h = vec![0u32; span];
        for &v in c {
            h[slot(v)] += 1;
        }
        h
    };
    let table = if parallel {
        // One table per part; integer sums are exact, so the number of
        // parts (the thread count) cannot change the result.
        let parts = rayon::current_num_threads().min(n / PAR_GRAIN);
        let tables: Vec<Vec<u32>> = data.par_chunks(n.div_ceil(parts)).map(histogram).collect();
        let mut total = vec![0u32; span];
        total.par_chunks_mut(PAR_GRAIN).enumerate().for_each(|(b, out)| {
            for t in &tables {
                for (o, &c) in out.iter_mut().zip(&t[b * PAR_GRAIN..]) {
                    *o += c;
                }
            }
        });
        total
    } else {
        histogram(data)
    };
    // The table becomes each slot's rank among the present values.
    let (mut values, mut counts) = (Vec::new(), Vec::new());
    let mut rank = table;
    for (j, r) in rank.iter_mut().enumerate() {
        if *r > 0 {
            counts.push(i64::from(*r));
            values.push(T::from_i64(lo + j as i64));
            *r = (values.len() - 1) as u32;
        }
    }
    let mut inverse = Vec::new();
    if want_inverse {
        inverse = vec![0i64; n];
        let fill = |(o, c): (&mut [i64], &[T])| {
            for (o, &v) in o.iter_mut().zip(c) {
                *o = i64::from(rank[slot(v)]);
            }
        };
        if parallel {
            inverse
                .par_chunks_mut(PAR_GRAIN)
                .zip(data.par_chunks(PAR_GRAIN))
                .for_each(fill);
        } else {
            fill((&mut inverse, data));
        }
    }
    Some((values, inverse, counts))
}

/// The unique elements of `data` (sorted unless `consecutive`), the
/// inverse indices (when `want_inverse`; else possibly empty) and the
/// counts.
fn unique_elements<T: Element>(data: &[T], consecutive: bool, want_inverse: bool) -> (Vec<T>, Vec<i64>, Vec<i64>) {
    if !consecutive && let Some(r) = unique_dense(data, want_inverse) {
        return r;
    }
    let n = data.len();
    let mut values: Vec<T> = Vec::new();
    let mut inverse = vec![0i64; n];
    let mut counts: Vec<i64> = Vec::new();
    if n == 0 {
        return (values, inverse, counts);
    }
    let mut run_start = 0;
    if consecutive {
        // PyTorch compares each later element with its run's first one
        // (a NaN starts a run of its own).
        values.push(data[0]);
        for (i, &v) in data.iter().enumerate() {
            if i > 0 && v != values[values.len() - 1] {
                counts.push((i - run_start) as i64);
                run_start = i;
                values.push(v);
            }
            inverse[i] = values.len() as i64 - 1;
        }
    } else if T::DTYPE.is_floating_point() && data.iter().any(|&v| distinguishable_ties(v)) {
        // NaNs, or zeros of either sign: which of the equal elements comes
        // first shows (in the inverse indices, or as the reported zero), so
        // sort as PyTorch does (its default sort, then `a[i] != a[i - 1]`).
        let mut items: Vec<(T, usize)> = data.iter().copied().zip(0..).collect();
        stl_algo::sort(&mut items, &|a: &(T, usize), b: &(T, usize)| {
            key_value_less(a.0, b.0, false)
        });
        for (j, &(v, p)) in items.iter().enumerate() {
            if j == 0 || v != items[j - 1].0 {
                if j > 0 {
                    counts.push((j - run_start) as i64);
                }
                run_start = j;
                values.push(v);
            }
            inverse[p] = values.len() as i64 - 1;
        }
    } else {
        // Equal elements are indistinguishable: any stable order will do.
        let float = T::DTYPE.is_floating_point();
        let (keys, perm) = radix_argsort(data.iter().map(|&v| order_key(v)).collect());
        for (j, &p) in perm.iter().enumerate() {
            if j == 0 || keys[j] != keys[j - 1] || (float && keys[j] == u64::MAX) {
                if j > 0 {
                    counts.push((j - run_start) as i64);
                }
                run_start = j;
                values.push(data[p]);
            }
            inverse[p] = values.len() as i64 - 1;
        }
    }
    counts.push((n - run_start) as i64);
    (values, inverse, counts)
}

/// The unique rows of the `n x m` row-major `rows` (sorted unless
/// `consecutive`): the kept rows' data, the inverse indices and the counts.
fn unique_rows<T: Element>(rows: &[T], n: usize, m: usize, consecutive: bool) -> (Vec<T>, Vec<i64>, Vec<i64>) {
    let row = |i: usize| &rows[i * m..(i + 1) * m];
    let mut order: Vec<usize> = (0..n).collect();
    if !consecutive {
        stl_algo::sort(&mut order, &|&a: &usize, &b: &usize| {
            for (l, r) in row(a).iter().zip(row(b)) {
                if l < r {
                    return true;
                }
                if l > r {
                    return false;
                }
            }
            false
        });
    }
    let mut kept: Vec<T> = Vec::new();
    let mut inverse = vec![0i64; n];
    let mut counts: Vec<i64> = Vec::new();
    if n == 0 {
        return (kept, inverse, counts);
    }
    // PyTorch's _unique_dim_cpu_impl: each row against its run's first (a
    // NaN makes rows unequal, even to themselves).
    let (mut rep, mut run_start) = (order[0], 0);
    kept.extend_from_slice(row(rep));
    let mut k = 0i64;
    for (j, &i) in order.iter().enumerate() {
        if j > 0 && !row(i).iter().zip(row(rep)).all(|(a, b)| a == b) {
            counts.push((j - run_start) as i64);
            run_start = j;
            rep = i;
            kept.extend_from_slice(row(i));
            k += 1;
        }
        inverse[i] = k;
    }
    counts.push((n - run_start) as i64);
    (kept, inverse, counts)
}

pub(crate) fn unique_kernel(call: &Call) -> Result<Tensors> {
    let op = *downcast_op::<Unique>(call.op)?;
    let x = call.inputs[0];
    let maybe = |v: Vec<i64>, shape: &[usize], wanted: bool| -> Result<Tensor> {
        if wanted {
            Tensor::from_vec(v, shape)
        } else {
            Tensor::from_vec(Vec::<i64>::new(), [0])
        }
    };
    with_dtype!(x.dtype(), T => {
        match op.dim {
            None => {
                let data = x.contiguous()?.to_vec::<T>()?;
                let (values, inverse, counts) = unique_elements(&data, op.consecutive, op.return_inverse);
                let k = values.len();
                Ok(smallvec::smallvec![
                    Tensor::from_vec(values, [k])?,
                    maybe(inverse, x.shape(), op.return_inverse)?,
                    maybe(counts, &[k], op.return_counts)?,
                ])
            }
            Some(d) => {
                // Slices along `d` become rows (PyTorch's moveaxis(dim, 0)).
                let nd = x.ndim().max(1);
                let x1 = if x.ndim() == 0 { x.reshape([1])? } else { x.clone() };
                let mut perm: Vec<i64> = vec![d as i64];
                perm.extend((0..nd as i64).filter(|&i| i != d as i64));
                let moved = x1.permute(&perm)?;
                let n = moved.shape()[0];
                let m: usize = moved.shape()[1..].iter().product();
                let data = moved.contiguous()?.to_vec::<T>()?;
                let (kept, inverse, counts) = unique_rows(&data, n, m, op.consecutive);
                let k = counts.len();
                let mut shape = moved.shape().to_vec();
                shape[0] = k;
                let mut back = vec![0i64; nd];
                for (i, &p) in perm.iter().enumerate() {
                    back[p as usize] = i as i64;
                }
                let values = Tensor::from_vec(kept, shape)?.permute(&back)?.contiguous()?;
                Ok(smallvec::smallvec![
                    values,
                    maybe(inverse, &[n], op.return_inverse)?,
                    maybe(counts, &[k], op.return_counts)?,
                ])
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sorting path's answer (the dense path switched off).
    fn by_sorting(data: &[i64]) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
        let (keys, perm) = radix_argsort(data.iter().map(|&v| order_key(v)).collect());
        let (mut values, mut inverse, mut counts) = (Vec::new(), vec![0i64; data.len()], Vec::new());
        for (j, &p) in perm.iter().enumerate() {
            if j == 0 || keys[j] != keys[j - 1] {
                values.push(data[p]);
                counts.push(0);
            }
            *counts.last_mut().unwrap() += 1;
            inverse[p] = values.len() as i64 - 1;
        }
        (values, inverse, counts)
    }

    #[test]
    fn counting_path_agrees_with_sorting_path() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for (n, span, base) in [
            (1usize, 1u64, 0i64),
            (7, 3, -2),
            (100_000, 50_000, -25_000),
            (200_000, 1_000, i64::MIN),
            (200_000, 65_536, i64::MAX - 65_535),
            (70_000, 70_000, 5),
        ] {
            let data: Vec<i64> = (0..n).map(|_| base.wrapping_add((next() % span) as i64)).collect();
            let dense = unique_dense(&data, true).expect("span fits the counting path");
            assert_eq!(dense, by_sorting(&data), "n={n} span={span} base={base}");
            let without = unique_dense(&data, false).unwrap();
            assert_eq!((&without.0, &without.2), (&dense.0, &dense.2));
            assert!(without.1.is_empty());
        }
        // Spans wider than the element count (and than 65536) sort instead.
        assert!(unique_dense(&[0i64, 1 << 20], true).is_none());
        assert!(unique_dense(&[i64::MIN, i64::MAX], true).is_none());
        assert!(unique_dense(&[0.5f32, 1.0], true).is_none());
    }
}
