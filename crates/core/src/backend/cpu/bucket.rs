//! CPU kernel of `searchsorted`, `bincount` and `histc` (PyTorch's
//! comparisons, accumulation dtypes and bin arithmetic).

use crate::dispatch::{Call, Tensors, downcast_op};
use crate::ops::bucket::Bucket;
use crate::{DType, Element, Error, Result, Scalar, Tensor, with_dtype};

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

/// 2^63: the first f64 past `i64::MAX` (C++'s conversion range of int64).
const I64_RANGE: f64 = 9_223_372_036_854_775_808.0;

/// histc's bin counts, computed in the input's float type `T` as PyTorch's
/// linear-interpolation kernel does: the outer edges are those
/// `linspace(lo, hi, bins + 1)` gives in `T` (`start + step * 0` and
/// `end - step * 0`: NaN when the step overflows, and then nothing is
/// counted), each element's bin is `(e - left) * bins / (right - left)`
/// rounded in `T` at every step, and the counts accumulate in `T` too.
fn histc_counts<T>(data: &[T], bins: usize, lo: f64, hi: f64) -> Vec<T>
where
    T: Element
        + std::ops::Add<Output = T>
        + std::ops::Sub<Output = T>
        + std::ops::Mul<Output = T>
        + std::ops::Div<Output = T>,
{
    let (start, end, n) = (T::from_f64(lo), T::from_f64(hi), T::from_f64(bins as f64));
    let zero = T::from_f64(0.0);
    let step = (end - start) / n;
    let (left, right) = (start + step * zero, end - step * zero);
    let (one, mut counts) = (T::from_f64(1.0), vec![zero; bins]);
    for &e in data {
        if !(e >= left && e <= right) {
            continue;
        }
        let p = ((e - left) * n / (right - left)).to_f64();
        // C++'s float-to-int64 conversion on x86-64: NaN and out-of-range
        // values become i64::MIN, whose element offset wraps to bin 0.
        let pos = if !(-I64_RANGE..I64_RANGE).contains(&p) {
            0
        } else {
            (p as i64).clamp(0, bins as i64) as usize
        };
        let pos = if pos == bins { bins - 1 } else { pos };
        counts[pos] = counts[pos] + one;
    }
    counts
}

fn histc(call: &Call, bins: usize, min: f64, max: f64) -> Result<Tensor> {
    let x = call.inputs[0];
    let (mut lo, mut hi) = (min, max);
    if lo == hi && x.numel() > 0 {
        // PyTorch's aminmax of the data (NaN propagates, and is an error below).
        let v = x.to_dtype(DType::F64)?.contiguous()?.to_vec::<f64>()?;
        if v.iter().any(|e| e.is_nan()) {
            (lo, hi) = (f64::NAN, f64::NAN);
        } else {
            lo = v.iter().fold(f64::INFINITY, |a, &b| a.min(b));
            hi = v.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        }
    }
    if lo == hi {
        // PyTorch's bins_edges_correction: the neighbouring values of the
        // input's float type, or 1 away if that is further (16-bit floats: 1).
        (lo, hi) = match x.dtype() {
            DType::F32 => (
                f64::from(next_f32(lo as f32, false)).min(lo - 1.0),
                f64::from(next_f32(hi as f32, true)).max(hi + 1.0),
            ),
            DType::F64 => (next_f64(lo, false).min(lo - 1.0), next_f64(hi, true).max(hi + 1.0)),
            _ => (lo - 1.0, hi + 1.0),
        };
    }
    if !(lo.is_finite() && hi.is_finite()) {
        return Err(Error::invalid(
            "histc",
            format!("torch.histc: range of [{lo}, {hi}] is not finite"),
        ));
    }
    if lo >= hi {
        return Err(Error::invalid("histc", "torch.histc: max must be larger than min"));
    }
    // linspace converts the edges to the input's dtype, refusing overflow.
    Scalar::Float(lo).check_fits("histc", x.dtype())?;
    Scalar::Float(hi).check_fits("histc", x.dtype())?;
    let xs = x.contiguous()?;
    match x.dtype() {
        DType::F32 => Tensor::from_vec(histc_counts(&xs.to_vec::<f32>()?, bins, lo, hi), [bins]),
        DType::F16 => Tensor::from_vec(histc_counts(&xs.to_vec::<half::f16>()?, bins, lo, hi), [bins]),
        DType::BF16 => Tensor::from_vec(histc_counts(&xs.to_vec::<half::bf16>()?, bins, lo, hi), [bins]),
        _ => Tensor::from_vec(histc_counts(&xs.to_vec::<f64>()?, bins, lo, hi), [bins]),
    }
}

/// C's `nexttoward` of a finite f32 towards +max (`up`) or -max.
fn next_f32(v: f32, up: bool) -> f32 {
    if v == 0.0 {
        let tiny = f32::from_bits(1);
        return if up { tiny } else { -tiny };
    }
    if (v == f32::MAX && up) || (v == f32::MIN && !up) {
        return v;
    }
    let bits = v.to_bits();
    f32::from_bits(if (v > 0.0) == up { bits + 1 } else { bits - 1 })
}

/// C's `nexttoward` of a finite f64 towards +max (`up`) or -max.
fn next_f64(v: f64, up: bool) -> f64 {
    if v == 0.0 {
        let tiny = f64::from_bits(1);
        return if up { tiny } else { -tiny };
    }
    if (v == f64::MAX && up) || (v == f64::MIN && !up) {
        return v;
    }
    let bits = v.to_bits();
    f64::from_bits(if (v > 0.0) == up { bits + 1 } else { bits - 1 })
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
