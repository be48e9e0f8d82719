//! `randperm`, `multinomial`, `poisson` and `bernoulli_` with a tensor of
//! probabilities: PyTorch's CPU algorithms (`randperm_cpu`,
//! `multinomial_out` and its with-replacement kernel, `_s_poisson_cpu`,
//! `bernoulli_tensor_cpu_kernel`).

use std::cmp::Ordering;

use half::{bf16, f16};

use super::{Sampled, fill_in_order, for_each_in_order, generator_of, memory_order, x86_i64};
use crate::backend::cpu::access::access;
use crate::backend::cpu::stl_algo;
use crate::dispatch::{Op, downcast_op};
use crate::layout::Layout;
use crate::ops::sampling::{BernoulliTensor, Multinomial, Poisson, Randperm};
use crate::random::GeneratorState;
use crate::{DType, Error, Result, Tensor, with_dtype};

/// `randperm`: below this length one 32-bit draw per position
/// (`UINT32_MAX / 20`), from it on the inside-out shuffle with 64-bit draws.
const RANDPERM_SMALL: usize = 214_748_364;

pub(crate) fn randperm_kernel(op: &dyn Op, _inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let r = downcast_op::<Randperm>(op)?;
    let out = outputs[0];
    let n = r.n;
    let generator = generator_of(&r.generator);
    let mut g = generator.lock();
    let perm: Vec<i64> = if n < RANDPERM_SMALL {
        let mut a: Vec<i64> = (0..n as i64).collect();
        for i in 0..n.saturating_sub(1) {
            let z = (g.next_u32() as u64 % (n - i) as u64) as usize;
            a.swap(i, i + z);
        }
        a
    } else {
        let mut a = vec![0i64; n];
        for i in 0..n {
            let z = (g.next_u64() % (i as u64 + 1)) as usize;
            a[i] = a[z];
            a[z] = i as i64;
        }
        a
    };
    drop(g);
    with_dtype!(out.dtype(), T => fill_in_order::<T>("randperm", out, |i| Ok(T::cast_i64(perm[i]))))
}

/// glibc's `lgamma` (what PyTorch's `std::lgamma` calls on Linux); other
/// systems use the `libm` crate's, which may differ in the last bit.
fn lgamma(x: f64) -> f64 {
    #[cfg(target_os = "linux")]
    {
        unsafe extern "C" {
            fn lgamma_r(x: f64, sign: *mut i32) -> f64;
        }
        let mut sign = 0i32;
        // SAFETY: `lgamma_r` reads `x` and writes the sign through a valid pointer.
        unsafe { lgamma_r(x, &mut sign) }
    }
    #[cfg(not(target_os = "linux"))]
    {
        libm::lgamma(x)
    }
}

/// PyTorch's `sample_poisson` (no fused multiply-adds: its file is built
/// without FMA contraction).
fn sample_poisson(lambda: f64, g: &mut GeneratorState) -> Result<i64> {
    if lambda.is_nan() || lambda < 0.0 {
        return Err(Error::invalid(
            "poisson",
            "invalid Poisson rate, expected rate to be non-negative",
        ));
    }
    if lambda >= 10.0 {
        // Transformed rejection (Hörmann, 1993).
        let slam = lambda.sqrt();
        let loglam = lambda.ln();
        let b = 0.931 + 2.53 * slam;
        let a = -0.059 + 0.02483 * b;
        let invalpha = 1.1239 + 1.1328 / (b - 3.4);
        let vr = 0.9277 - 3.6224 / (b - 2.0);
        loop {
            let u = g.uniform_f64() - 0.5;
            let v = g.uniform_f64();
            let us = 0.5 - u.abs();
            let k = x86_i64(((2.0 * a / us + b) * u + lambda + 0.43).floor());
            if us >= 0.07 && v <= vr {
                return Ok(k);
            }
            if k < 0 || (us < 0.013 && v > us) {
                continue;
            }
            if (v.ln() + invalpha.ln() - (a / (us * us) + b).ln())
                <= (-lambda + k as f64 * loglam - lgamma(k as f64 + 1.0))
            {
                return Ok(k);
            }
        }
    } else if lambda == 0.0 {
        Ok(0)
    } else {
        let enlam = (-lambda).exp();
        let mut x = 0i64;
        let mut prod = 1.0f64;
        loop {
            prod *= g.uniform_f64();
            if prod > enlam {
                x += 1;
            } else {
                return Ok(x);
            }
        }
    }
}

pub(crate) fn poisson_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let p = downcast_op::<Poisson>(op)?;
    let rates = inputs[0].to_vec::<f64>()?;
    let out = outputs[0];
    let generator = generator_of(&p.generator);
    let mut g = generator.lock();
    with_dtype!(out.dtype(), T => fill_in_order::<T>("poisson", out, |i| Ok(T::cast_i64(sample_poisson(rates[i], &mut g)?))))
}

pub(crate) fn bernoulli_tensor_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let b = downcast_op::<BernoulliTensor>(op)?;
    let p = inputs[0];
    let out = outputs[0];
    let probs = p.to_vec::<f64>()?;
    let p_strides = Layout::contiguous(p.shape()).broadcast_strides(out.shape());
    let wide = p.dtype() == DType::F64;
    let generator = generator_of(&b.generator);
    let mut g = generator.lock();
    with_dtype!(out.dtype(), T => bernoulli_fill::<T>(out, &probs, &p_strides, wide, &mut g))
}

/// Draws `self.bernoulli_(p)` in `out`'s memory order: a 53-bit uniform
/// against an f64 probability, a 24-bit one against an f32 (f16, bf16) one.
fn bernoulli_fill<T: Sampled>(
    out: &Tensor,
    probs: &[f64],
    p_strides: &[usize],
    wide: bool,
    g: &mut GeneratorState,
) -> Result<()> {
    let acc = access("bernoulli_", &[], &[out])?;
    let ptr = acc.outs[0] as *mut T;
    let bad = || {
        Error::invalid(
            "bernoulli_",
            "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be improved?  \
             If so, please report an enhancement request to PyTorch.)",
        )
    };
    for_each_in_order(out.shape(), out.strides(), p_strides, |off, pi| {
        let pv = probs[pi];
        let hit = if wide {
            if !(0.0..=1.0).contains(&pv) {
                return Err(bad());
            }
            g.uniform_f64() < pv
        } else {
            let pf = pv as f32;
            if !(0.0..=1.0).contains(&pf) {
                return Err(bad());
            }
            g.uniform_f32() < pf
        };
        // SAFETY: `off` is an element of `out`'s layout, inside its storage.
        unsafe { ptr.add(off).write(T::cast_i64(hit as i64)) };
        Ok(())
    })
}

/// `v` rounded to `dtype` (a float dtype), as an f64.
fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F64 => v,
        DType::F16 => f16::from_f32(v as f32).to_f64(),
        DType::BF16 => bf16::from_f32(v as f32).to_f64(),
        _ => v as f32 as f64,
    }
}

/// The accumulator of the with-replacement kernel: the probabilities'
/// dtype for f32 and f64, f32 for f16 and bf16.
trait Acc: Copy + PartialOrd + std::ops::Add<Output = Self> + std::ops::Div<Output = Self> + Into<f64> {
    const ZERO: Self;
    const ONE: Self;
    fn of(v: f64) -> Self;
    fn finite(self) -> bool;
}

impl Acc for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn of(v: f64) -> Self {
        v as f32
    }
    fn finite(self) -> bool {
        self.is_finite()
    }
}

impl Acc for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn of(v: f64) -> Self {
        v
    }
    fn finite(self) -> bool {
        self.is_finite()
    }
}

/// `multinomial_with_replacement_apply` on one row: cumulative sums,
/// normalised, then a binary search per 53-bit uniform.
fn with_replacement<A: Acc>(row: &[f64], n: usize, g: &mut GeneratorState, out: &mut Vec<i64>) -> Result<()> {
    let bad = |what: &str| Error::invalid("multinomial", format!("invalid multinomial distribution ({what})"));
    let mut cum: Vec<A> = Vec::with_capacity(row.len());
    let mut sum = A::ZERO;
    for &v in row {
        let v = A::of(v);
        if matches!(v.partial_cmp(&A::ZERO), None | Some(Ordering::Less)) {
            return Err(bad("encountering probability entry < 0"));
        }
        if !v.finite() {
            return Err(bad("encountering probability entry = infinity or NaN"));
        }
        sum = sum + v;
        cum.push(sum);
    }
    if sum.partial_cmp(&A::ZERO) != Some(Ordering::Greater) || cum.is_empty() {
        return Err(bad("sum of probabilities <= 0"));
    }
    for c in cum.iter_mut() {
        *c = *c / sum;
    }
    let last = cum.len() - 1;
    cum[last] = A::ONE;
    for _ in 0..n {
        let u = g.uniform_f64();
        let (mut l, mut r) = (0usize, cum.len());
        while r > l {
            let m = l + (r - l) / 2;
            let c: f64 = cum[m].into();
            if c < u {
                l = m + 1;
            } else {
                r = m;
            }
        }
        out.push(l as i64);
    }
    Ok(())
}

/// PyTorch's `topk` order on one row (largest first, NaN largest): the
/// indices of the `k` largest values, ties as libstdc++ leaves them.
fn topk_indices(row: &[f64], k: usize) -> impl Iterator<Item = i64> {
    let mut q: Vec<(f64, i64)> = row.iter().enumerate().map(|(j, &v)| (v, j as i64)).collect();
    let less = |x: &(f64, i64), y: &(f64, i64)| (x.0.is_nan() && !y.0.is_nan()) || x.0 > y.0;
    let n = q.len();
    if k * 64 <= n {
        stl_algo::partial_sort(&mut q, k, &less);
    } else {
        stl_algo::nth_element(&mut q, k - 1, &less);
        stl_algo::sort(&mut q[..k - 1], &less);
    }
    q.into_iter().take(k).map(|(_, j)| j)
}

pub(crate) fn multinomial_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let m = downcast_op::<Multinomial>(op)?;
    let (p, out) = (inputs[0], outputs[0]);
    if out.numel() == 0 {
        return Ok(());
    }
    let ncat = p.shape()[p.ndim() - 1];
    let rows = if p.ndim() == 1 { 1 } else { p.shape()[0] };
    let n = m.num_samples;
    let dt = p.dtype();
    let vals = p.to_vec::<f64>()?;
    let generator = generator_of(&m.generator);
    let mut g = generator.lock();
    let mut res: Vec<i64> = Vec::with_capacity(rows * n);
    if !m.replacement || n == 1 {
        let bad = |msg: &str| Error::invalid("multinomial", msg.to_string());
        if vals.is_empty() {
            return Err(bad(
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.",
            ));
        }
        if !vals.iter().all(|v| (0.0..f64::INFINITY).contains(v)) {
            return Err(bad("probability tensor contains either `inf`, `nan` or element < 0"));
        }
        if vals.chunks(ncat).any(|row| row.iter().all(|&v| v == 0.0)) {
            return Err(bad("invalid multinomial distribution (sum of probabilities <= 0)"));
        }
        // q = empty_like(p).exponential_(1), in p's memory order and dtype;
        // then p / q in p's dtype (f16 and bf16 divide in f32).
        let mut q = vec![0.0f64; vals.len()];
        for i in memory_order(p.layout()) {
            q[i] = round_to(dt, -(-g.uniform_f64()).ln_1p());
        }
        drop(g);
        let ratio: Vec<f64> = vals
            .iter()
            .zip(&q)
            .map(|(&a, &b)| match dt {
                DType::F64 => a / b,
                _ => round_to(dt, (a as f32 / b as f32) as f64),
            })
            .collect();
        for row in ratio.chunks(ncat) {
            if n == 1 {
                let mut best = 0;
                for (j, &v) in row.iter().enumerate().skip(1) {
                    let b = row[best];
                    if (v.is_nan() && !b.is_nan()) || v > b {
                        best = j;
                    }
                }
                res.push(best as i64);
            } else {
                res.extend(topk_indices(row, n));
            }
        }
    } else {
        for r in 0..rows {
            let row = &vals[r * ncat..(r + 1) * ncat];
            if dt == DType::F64 {
                with_replacement::<f64>(row, n, &mut g, &mut res)?;
            } else {
                with_replacement::<f32>(row, n, &mut g, &mut res)?;
            }
        }
        drop(g);
    }
    fill_in_order::<i64>("multinomial", out, |i| Ok(res[i]))
}
