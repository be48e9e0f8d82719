//! CPU kernels of `arange`, `linspace` and random sampling (PyTorch's CPU
//! algorithms: sequential MT19937 draws, Box-Muller in blocks of 16).

use half::{bf16, f16};

use super::access::access;
use super::math::log_f32;
use crate::dispatch::{Op, downcast_op};
use crate::ops::{Arange, Distribution, Linspace, Random};
use crate::random::{GeneratorState, default_generator};
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

/// A uniform draw in [0, 1) with the precision PyTorch uses for `dtype`, as
/// f64: 53 bits for f64, else 24 bits (f16 and bf16 draw as f32 and round).
fn uniform01(g: &mut GeneratorState, dtype: DType) -> f64 {
    match dtype {
        DType::F64 => g.uniform_f64(),
        _ => g.uniform_f32() as f64,
    }
}

/// `v` rounded to f16 or bf16 through f32, as PyTorch converts (other dtypes: unchanged).
fn reduced(v: f64, dtype: DType) -> f64 {
    match dtype {
        DType::F16 => f16::from_f32(v as f32).to_f64(),
        DType::BF16 => bf16::from_f32(v as f32).to_f64(),
        DType::F32 | DType::F64 | DType::Bool | DType::U8 | DType::I32 | DType::I64 => v,
    }
}

/// Box-Muller on 16 uniforms: the first 8 give radii, the last 8 angles.
fn normal_fill_16(d: &mut [f64], mean: f64, std: f64, single: bool) {
    for j in 0..8 {
        if single {
            let u1 = 1.0f32 - d[j] as f32;
            let u2 = d[j + 8] as f32;
            let radius = (-2.0f32 * log_f32(u1)).sqrt();
            let theta = (2.0 * std::f64::consts::PI * u2 as f64) as f32;
            let (s, c) = (theta as f64).sin_cos();
            let (s, c) = (s as f32, c as f32);
            d[j] = (radius * c).mul_add(std as f32, mean as f32) as f64;
            d[j + 8] = (radius * s).mul_add(std as f32, mean as f32) as f64;
        } else {
            let u1 = 1.0 - d[j];
            let u2 = d[j + 8];
            let radius = (-2.0 * u1.ln()).sqrt();
            let theta = 2.0 * std::f64::consts::PI * u2;
            d[j] = radius * theta.cos() * std + mean;
            d[j + 8] = radius * theta.sin() * std + mean;
        }
    }
}

pub(crate) fn random_kernel(op: &dyn Op, _inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let r = downcast_op::<Random>(op)?;
    let name = op.entry().base_name();
    let out = outputs[0];
    let generator = r.generator.clone().unwrap_or_else(default_generator);
    let mut g = generator.lock();
    let n = out.numel();
    let dt = out.dtype();
    let values: Vec<f64> = match r.dist {
        Distribution::Uniform { low, high } => (0..n)
            .map(|_| {
                let u = uniform01(&mut g, dt);
                if dt == DType::F64 {
                    u * (high - low) + low
                } else {
                    let v = (u as f32 * (high - low) as f32 + low as f32) as f64;
                    // f16 / bf16: a value that rounds up to `high` becomes
                    // `low`, keeping samples in [low, high) as PyTorch does.
                    if matches!(dt, DType::F16 | DType::BF16) && reduced(v, dt) == reduced(high, dt) {
                        low
                    } else {
                        v
                    }
                }
            })
            .collect(),
        Distribution::Normal { mean, std } => {
            if n >= 16 {
                // f32 and f64 draw n uniforms before the blocks of 16; f16 and
                // bf16 only those of the full blocks (then the tail's 16).
                let drawn = if matches!(dt, DType::F16 | DType::BF16) {
                    n - n % 16
                } else {
                    n
                };
                let mut d: Vec<f64> = (0..n)
                    .map(|i| if i < drawn { uniform01(&mut g, dt) } else { 0.0 })
                    .collect();
                let single = dt != DType::F64;
                let mut i = 0;
                while i + 16 <= n {
                    normal_fill_16(&mut d[i..i + 16], mean, std, single);
                    i += 16;
                }
                if !n.is_multiple_of(16) {
                    let tail = &mut d[n - 16..];
                    for v in tail.iter_mut() {
                        *v = uniform01(&mut g, dt);
                    }
                    normal_fill_16(tail, mean, std, single);
                }
                d
            } else {
                (0..n).map(|_| g.normal_f64() * std + mean).collect()
            }
        }
        Distribution::RandInt { low, high } => {
            let range = (high as i128 - low as i128) as u64;
            let ints: Vec<i64> = (0..n).map(|_| g.int_in_range(low, range)).collect();
            drop(g);
            return with_dtype!(dt, T => fill_contiguous::<T>(name, out, |i| T::from_i64(ints[i])));
        }
        Distribution::Bernoulli { p } => (0..n).map(|_| ((g.uniform_f32() as f64) < p) as u8 as f64).collect(),
    };
    drop(g);
    match dt {
        // Through f32 (PyTorch's conversion, rounding on all bits).
        DType::F16 => fill_contiguous::<f16>(name, out, |i| f16::from_f32(values[i] as f32)),
        DType::BF16 => fill_contiguous::<bf16>(name, out, |i| bf16::from_f32(values[i] as f32)),
        _ => with_dtype!(dt, T => fill_contiguous::<T>(name, out, |i| T::from_f64(values[i]))),
    }
}
