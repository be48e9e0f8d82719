//! CPU kernels of random sampling, PyTorch's CPU algorithms bit for bit:
//! sequential MT19937 draws under the generator's lock, in the output's
//! memory order (TensorIterator's order for one output), with PyTorch's
//! transforms, fused multiply-adds (its x86-64 AVX2 kernels are compiled
//! with FMA contraction) and conversions.
//!
//! - `mod.rs`: [`random_kernel`] (every elementwise [`Distribution`]), the
//!   memory-order walk and the conversions to each dtype;
//! - `normal.rs`: `normal_` (Box-Muller in blocks of 16 with PyTorch's AVX2
//!   `log`/`sincos` polynomials for float dtypes; the scalar path);
//! - `discrete.rs`: `randperm`, `multinomial`, `poisson`, `bernoulli_` with
//!   a probability tensor;
//! - `stl.rs`: libstdc++'s `partial_sort` / `nth_element` / `sort`, which
//!   decide the order of tied values in `multinomial` without replacement.

mod discrete;
mod normal;

use half::{bf16, f16};

use super::access::access;
use crate::dispatch::{Op, downcast_op};
use crate::layout::{Layout, contiguous_strides};
use crate::ops::factory::{BERNOULLI, CAUCHY, EXPONENTIAL, GEOMETRIC, LOG_NORMAL, NORMAL, RANDINT, RANDOM, UNIFORM};
use crate::ops::sampling::{BERNOULLI_TENSOR, IntDraw, MULTINOMIAL, POISSON, RANDPERM, int_draw};
use crate::ops::{Distribution, Random};
use crate::random::{Generator, GeneratorState, default_generator};
use crate::{DType, Element, Result, Tensor, with_dtype};

/// Registers the sampling kernels.
pub(super) fn register() -> Result<()> {
    for e in [
        &UNIFORM,
        &NORMAL,
        &RANDINT,
        &RANDOM,
        &BERNOULLI,
        &EXPONENTIAL,
        &GEOMETRIC,
        &CAUCHY,
        &LOG_NORMAL,
    ] {
        super::structured(e, random_kernel)?;
    }
    super::structured(&RANDPERM, discrete::randperm_kernel)?;
    super::structured(&MULTINOMIAL, discrete::multinomial_kernel)?;
    super::structured(&POISSON, discrete::poisson_kernel)?;
    super::structured(&BERNOULLI_TENSOR, discrete::bernoulli_tensor_kernel)?;
    Ok(())
}

/// The generator a call draws from.
fn generator_of(g: &Option<Generator>) -> Generator {
    g.clone().unwrap_or_else(default_generator)
}

/// `(int32_t)v` as x86-64 computes it (`cvttsd2si`, 32-bit): truncation,
/// `i32::MIN` for NaN and values out of range.
fn x86_i32(v: f64) -> i32 {
    if v.is_nan() || v >= 2_147_483_648.0 || v <= -2_147_483_649.0 {
        i32::MIN
    } else {
        v as i32
    }
}

/// `(int64_t)v` as x86-64 computes it: truncation, `i64::MIN` for NaN and
/// values out of range.
pub(super) fn x86_i64(v: f64) -> i64 {
    if v.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&v) {
        i64::MIN
    } else {
        v as i64
    }
}

/// PyTorch's `static_cast`s into an element type, as its x86-64 build
/// computes them: from `double` (integers truncate through a 32-bit
/// conversion up to int32, a 64-bit one for int64; f16 and bf16 round
/// through f32), from `int64_t` (wrapping; floats rounded once, f16 and
/// bf16 through f32) and from `float`.
pub(super) trait Sampled: Element {
    /// `static_cast<T>(double)`.
    fn cast_f64(v: f64) -> Self;
    /// `static_cast<T>(int64_t)`.
    fn cast_i64(v: i64) -> Self;
    /// `static_cast<T>(float)`.
    fn cast_f32(v: f32) -> Self {
        Self::cast_f64(v as f64)
    }
}

impl Sampled for bool {
    fn cast_f64(v: f64) -> Self {
        v != 0.0
    }
    fn cast_i64(v: i64) -> Self {
        v != 0
    }
}

impl Sampled for u8 {
    fn cast_f64(v: f64) -> Self {
        x86_i32(v) as u8
    }
    fn cast_i64(v: i64) -> Self {
        v as u8
    }
}

impl Sampled for i32 {
    fn cast_f64(v: f64) -> Self {
        x86_i32(v)
    }
    fn cast_i64(v: i64) -> Self {
        v as i32
    }
}

impl Sampled for i64 {
    fn cast_f64(v: f64) -> Self {
        x86_i64(v)
    }
    fn cast_i64(v: i64) -> Self {
        v
    }
}

impl Sampled for f16 {
    fn cast_f64(v: f64) -> Self {
        f16::from_f32(v as f32)
    }
    fn cast_i64(v: i64) -> Self {
        f16::from_f32(v as f32)
    }
    fn cast_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
}

impl Sampled for bf16 {
    fn cast_f64(v: f64) -> Self {
        bf16::from_f32(v as f32)
    }
    fn cast_i64(v: i64) -> Self {
        bf16::from_f32(v as f32)
    }
    fn cast_f32(v: f32) -> Self {
        bf16::from_f32(v)
    }
}

impl Sampled for f32 {
    fn cast_f64(v: f64) -> Self {
        v as f32
    }
    fn cast_i64(v: i64) -> Self {
        v as f32
    }
    fn cast_f32(v: f32) -> Self {
        v
    }
}

impl Sampled for f64 {
    fn cast_f64(v: f64) -> Self {
        v
    }
    fn cast_i64(v: i64) -> Self {
        v as f64
    }
}

/// Calls `f(offset, other)` for every element of a tensor of `shape` with
/// `strides`, in TensorIterator's order for one output: dims of size 1
/// dropped, the others from the largest stride (outermost) to the smallest
/// (innermost), ties in dim order. `offset` is the element's position in
/// memory (from the first element, by `strides`), `other` its position by
/// `other_strides` (row-major strides give its row-major index, broadcast
/// strides the element of an expanded operand). Stops at the first error.
pub(super) fn for_each_in_order(
    shape: &[usize],
    strides: &[usize],
    other_strides: &[usize],
    mut f: impl FnMut(usize, usize) -> Result<()>,
) -> Result<()> {
    let mut dims: smallvec::SmallVec<[(usize, usize, usize); 6]> = (0..shape.len())
        .filter(|&d| shape[d] != 1)
        .map(|d| (shape[d], strides[d], other_strides[d]))
        .collect();
    if dims.iter().any(|d| d.0 == 0) {
        return Ok(());
    }
    if dims.is_empty() {
        return f(0, 0);
    }
    // Stable: equal strides keep dim order.
    dims.sort_by_key(|d| std::cmp::Reverse(d.1));
    let nd = dims.len();
    let (inner_n, inner_s, inner_o) = dims[nd - 1];
    let mut idx: smallvec::SmallVec<[usize; 6]> = smallvec::smallvec![0; nd];
    let (mut off, mut oth) = (0usize, 0usize);
    loop {
        for k in 0..inner_n {
            f(off + k * inner_s, oth + k * inner_o)?;
        }
        let mut d = nd - 1;
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            let (n, s, o) = dims[d];
            idx[d] += 1;
            off += s;
            oth += o;
            if idx[d] < n {
                break;
            }
            idx[d] = 0;
            off -= s * n;
            oth -= o * n;
        }
    }
}

/// Writes `f(index)` into every element of `out` in PyTorch's fill order
/// ([`for_each_in_order`]), `index` being the element's row-major position.
/// Stops at the first error, as PyTorch's kernels do (earlier elements
/// stay written, their draws taken).
pub(super) fn fill_in_order<T: Element>(
    name: &'static str,
    out: &Tensor,
    mut f: impl FnMut(usize) -> Result<T>,
) -> Result<()> {
    let acc = access(name, &[], &[out])?;
    let p = acc.outs[0] as *mut T;
    if out.is_contiguous() {
        for i in 0..out.numel() {
            let v = f(i)?;
            // SAFETY: a contiguous output holds numel elements from its first one.
            unsafe { p.add(i).write(v) };
        }
        return Ok(());
    }
    let rm = contiguous_strides(out.shape());
    for_each_in_order(out.shape(), out.strides(), &rm, |off, i| {
        let v = f(i)?;
        // SAFETY: `off` is an element of `out`'s layout, inside its storage.
        unsafe { p.add(off).write(v) };
        Ok(())
    })
}

/// The row-major indices of `layout`'s elements in its memory order.
pub(super) fn memory_order(layout: &Layout) -> Vec<usize> {
    let mut order = Vec::with_capacity(layout.numel());
    let rm = contiguous_strides(&layout.shape);
    let _ = for_each_in_order(&layout.shape, &layout.strides, &rm, |_, i| {
        order.push(i);
        Ok(())
    });
    order
}

/// The kernel of every [`Random`] op: fresh samples, or an in-place fill.
pub(crate) fn random_kernel(op: &dyn Op, _inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let r = downcast_op::<Random>(op)?;
    let out = outputs[0];
    let generator = generator_of(&r.generator);
    let mut g = generator.lock();
    with_dtype!(out.dtype(), T => fill::<T>(op.entry().base_name(), out, &r.dist, &mut g))
}

fn fill<T: Sampled>(name: &'static str, out: &Tensor, dist: &Distribution, g: &mut GeneratorState) -> Result<()> {
    if out.numel() == 0 {
        return Ok(());
    }
    match *dist {
        Distribution::Uniform { low, high } => {
            if T::DTYPE == DType::F64 {
                let span = high - low;
                fill_in_order::<T>(name, out, |_| {
                    let v = g.uniform_f64().mul_add(span, low);
                    Ok(T::cast_f64(if v == high { low } else { v }))
                })
            } else {
                // Float arithmetic for f32, f16 and bf16 (PyTorch's opmath);
                // a value that rounds to `to` becomes `from`.
                let (lo, hi) = (low as f32, high as f32);
                let span = hi - lo;
                let (from, to) = (T::cast_f64(low), T::cast_f64(high));
                fill_in_order::<T>(name, out, |_| {
                    let v = T::cast_f32(g.uniform_f32().mul_add(span, lo));
                    Ok(if v == to { from } else { v })
                })
            }
        }
        Distribution::Normal { mean, std } => normal::normal_fill::<T>(name, out, mean, std, g),
        Distribution::RandInt { .. } | Distribution::RandIntFrom { .. } => {
            match int_draw(dist, T::DTYPE, out.numel())? {
                IntDraw::Range { base, range } => {
                    fill_in_order::<T>(name, out, |_| Ok(T::cast_i64(g.int_in_range(base, range))))
                }
                IntDraw::Full64 => fill_in_order::<T>(name, out, |_| Ok(T::cast_i64(g.next_u64() as i64))),
            }
        }
        Distribution::RandomBits => {
            // `uniform_int_distribution<T>`: 64-bit draws for int64 and f64.
            let (wide, modulus): (bool, u64) = match T::DTYPE {
                DType::Bool => (false, 2),
                DType::U8 => (false, 256),
                DType::I32 => (false, 1 << 31),
                DType::I64 => (true, 1 << 63),
                DType::F16 => (false, (1 << 11) + 1),
                DType::BF16 => (false, (1 << 8) + 1),
                DType::F32 => (false, (1 << 24) + 1),
                DType::F64 => (true, (1 << 53) + 1),
            };
            fill_in_order::<T>(name, out, |_| {
                let r = if wide { g.next_u64() } else { g.next_u32() as u64 };
                Ok(T::cast_i64((r % modulus) as i64))
            })
        }
        Distribution::Bernoulli { p } => {
            fill_in_order::<T>(name, out, |_| Ok(T::cast_i64((g.uniform_f64() < p) as i64)))
        }
        Distribution::Exponential { lambd } => {
            let c = -1.0 / lambd;
            fill_in_order::<T>(name, out, |_| Ok(T::cast_f64(c * (-g.uniform_f64()).ln_1p())))
        }
        Distribution::Geometric { p } => {
            let denom = (-p).ln_1p();
            fill_in_order::<T>(name, out, |_| Ok(T::cast_f64((g.uniform_f64().ln() / denom).ceil())))
        }
        Distribution::Cauchy { median, sigma } => fill_in_order::<T>(name, out, |_| {
            let t = (std::f64::consts::PI * (g.uniform_f64() - 0.5)).tan();
            Ok(T::cast_f64(sigma.mul_add(t, median)))
        }),
        Distribution::LogNormal { mean, std } => {
            fill_in_order::<T>(name, out, |_| Ok(T::cast_f64(g.normal_f64().mul_add(std, mean).exp())))
        }
    }
}
