//! CPU kernel of `searchsorted`, `bincount` and `histc` (PyTorch's
//! comparisons, accumulation dtypes and bin arithmetic).

use crate::dispatch::{Call, Tensors, downcast_op};
use crate::ops::bucket::Bucket;
use crate::{DType, Element, Error, Result, Tensor, with_dtype};

/// PyTorch's `cus_lower_bound` / `cus_upper_bound` over `seq[start..end]`
/// (through `sorter` when given): `!(mid >= v)` / `!(mid > v)` move right,
/// so a NaN value lands past every element.
fn bound<T: Element>(seq: &[T], sorter: Option<&[i64]>, v: T, right: bool) -> usize {
    let (mut lo, mut hi) = (0usize, seq.len());
    while lo < hi {
        let mid = lo + ((hi - lo) >> 1);
        let m = match sorter {
            Some(s) => seq[s[mid] as usize],
            None => seq[mid],
        };
        // The negations are the point: a NaN compares false both ways.
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        let go_right = if right { !(m > v) } else { !(m >= v) };
        if go_right {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

fn searchsorted(call: &Call, right: bool, out_int32: bool) -> Result<Tensor> {
    let (seq, vals) = (call.inputs[0], call.inputs[1]);
    let n = seq.shape().last().copied().unwrap_or(1);
    let rows = if seq.ndim() <= 1 { 1 } else { seq.numel() / n.max(1) };
    let per_row = if seq.ndim() <= 1 {
        vals.numel()
    } else {
        vals.numel() / rows.max(1)
    };
    let sorter = call
        .inputs
        .get(2)
        .map(|s| s.to_dtype(DType::I64)?.contiguous()?.to_vec::<i64>())
        .transpose()?;
    if let Some(s) = &sorter
        && s.iter().any(|&i| i < 0 || i as usize >= n)
    {
        return Err(Error::invalid(
            "searchsorted",
            "torch.searchsorted(): sorter index out of range",
        ));
    }
    let mut out: Vec<i64> = Vec::with_capacity(vals.numel());
    with_dtype!(seq.dtype(), T => {
        let s = seq.contiguous()?.to_vec::<T>()?;
        let v = vals.contiguous()?.to_vec::<T>()?;
        for (i, &x) in v.iter().enumerate() {
            let r = if seq.ndim() <= 1 { 0 } else { i / per_row.max(1) };
            let line = &s[r * n..(r + 1) * n];
            let sl = sorter.as_deref().map(|st| &st[r * n..(r + 1) * n]);
            out.push(bound(line, sl, x, right) as i64);
        }
    });
    let t = Tensor::from_vec(out, vals.shape())?;
    if out_int32 { t.to_dtype(DType::I32) } else { Ok(t) }
}

fn bincount(call: &Call, minlength: usize) -> Result<Tensor> {
    let x = call.inputs[0];
    let idx = x.to_dtype(DType::I64)?.contiguous()?.to_vec::<i64>()?;
    if idx.iter().any(|&i| i < 0) {
        return Err(Error::invalid(
            "bincount",
            "bincount only supports 1-d non-negative integral inputs.",
        ));
    }
    let len = idx.iter().map(|&i| i as usize + 1).max().unwrap_or(0).max(minlength);
    match call.inputs.get(1) {
        None => {
            let mut counts = vec![0i64; len];
            for &i in &idx {
                counts[i as usize] += 1;
            }
            Tensor::from_vec(counts, [len])
        }
        Some(w) if w.dtype() == DType::F32 => {
            let wv = w.contiguous()?.to_vec::<f32>()?;
            let mut sums = vec![0f32; len];
            for (&i, &wi) in idx.iter().zip(&wv) {
                sums[i as usize] += wi;
            }
            Tensor::from_vec(sums, [len])
        }
        Some(w) => {
            let wv = w.to_dtype(DType::F64)?.contiguous()?.to_vec::<f64>()?;
            let mut sums = vec![0f64; len];
            for (&i, &wi) in idx.iter().zip(&wv) {
                sums[i as usize] += wi;
            }
            Tensor::from_vec(sums, [len])
        }
    }
}

/// histc's bin counts, computed in the input's float type `T` as PyTorch's
/// linear-interpolation kernel does.
fn histc_counts<T: Element + std::ops::Sub<Output = T> + std::ops::Mul<Output = T> + std::ops::Div<Output = T>>(
    data: &[T],
    bins: usize,
    lo: T,
    hi: T,
) -> Vec<T> {
    let mut counts = vec![0f64; bins];
    let edges = T::from_f64(bins as f64);
    for &e in data {
        if !(e >= lo && e <= hi) {
            continue;
        }
        let mut pos = ((e - lo) * edges / (hi - lo)).to_f64() as usize;
        if pos >= bins {
            pos = bins - 1;
        }
        counts[pos] += 1.0;
    }
    counts.into_iter().map(T::from_f64).collect()
}

fn histc(call: &Call, bins: usize, min: f64, max: f64) -> Result<Tensor> {
    let x = call.inputs[0];
    let (mut lo, mut hi) = (min, max);
    if lo == hi && x.numel() > 0 {
        let v = x.to_dtype(DType::F64)?.contiguous()?.to_vec::<f64>()?;
        let finite = v.iter().filter(|e| !e.is_nan());
        lo = finite.clone().fold(f64::INFINITY, |a, &b| a.min(b));
        hi = finite.fold(f64::NEG_INFINITY, |a, &b| a.max(b));
    }
    if lo == hi {
        lo -= 1.0;
        hi += 1.0;
    }
    if !(lo.is_finite() && hi.is_finite()) {
        return Err(Error::invalid(
            "histc",
            format!("torch.histc: range of [{lo}, {hi}] is not finite"),
        ));
    }
    match x.dtype() {
        DType::F32 => {
            let d = x.contiguous()?.to_vec::<f32>()?;
            Tensor::from_vec(histc_counts(&d, bins, lo as f32, hi as f32), [bins])
        }
        _ => {
            let d = x.contiguous()?.to_vec::<f64>()?;
            Tensor::from_vec(histc_counts(&d, bins, lo, hi), [bins])
        }
    }
}

pub(crate) fn bucket_kernel(call: &Call) -> Result<Tensors> {
    let op: &Bucket = downcast_op(call.op)?;
    let r = match *op {
        Bucket::SearchSorted { right, out_int32 } => searchsorted(call, right, out_int32)?,
        Bucket::Bincount { minlength } => bincount(call, minlength)?,
        Bucket::Histc { bins, min, max } => histc(call, bins, min, max)?,
    };
    Ok(smallvec::smallvec![r])
}
