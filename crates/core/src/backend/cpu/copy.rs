//! CPU kernels: casting copies and fills.

use half::{bf16, f16};

use super::pointwise::{Cost, fill_with, map1};
use super::simd::multiversion;
use crate::dispatch::{Op, downcast_op};
use crate::ops::{Fill, FillInplace};
use crate::{DType, Element, Result, Scalar, Tensor, with_dtype};

/// `v` rounded (to nearest even) to f16 or bf16, as an exact f64.
#[inline(always)]
pub(crate) fn round_to_half(v: f32, dtype: DType) -> f64 {
    // `from_f32` rounds on all bits; `bf16::from_f64` would first drop the
    // low 32 bits of the f64.
    if dtype == DType::BF16 {
        bf16::from_f32(v).to_f64()
    } else {
        f16::from_f32(v).to_f64()
    }
}

/// Converts one element as a C++ `static_cast` would (bool: nonzero).
/// f16 and bf16 convert through f32, as `c10::Half` / `c10::BFloat16` do,
/// so f64 and integer values round twice, exactly as in PyTorch.
#[inline(always)]
pub(crate) fn convert<S: Element, D: Element>(v: S) -> D {
    if D::DTYPE == DType::Bool {
        D::from_i64(v.is_nonzero() as i64)
    } else if matches!(D::DTYPE, DType::F16 | DType::BF16) {
        let f = if S::DTYPE.is_floating_point() {
            v.to_f64() as f32
        } else {
            v.to_i64() as f32
        };
        // The rounded value is exact in D: from_f64 does not round again.
        D::from_f64(round_to_half(f, D::DTYPE))
    } else if D::DTYPE.is_floating_point() || S::DTYPE.is_floating_point() {
        D::from_f64(v.to_f64())
    } else {
        D::from_i64(v.to_i64())
    }
}

/// `y = x` converted elementwise, with vectorised f32 <-> f16 / bf16 paths.
pub(crate) fn cast_block<S: Element, D: Element>(x: &[S], y: &mut [D]) {
    match (S::DTYPE, D::DTYPE) {
        (a, b) if a == b => {
            // SAFETY: S and D are the same type here.
            let x: &[D] = unsafe { std::slice::from_raw_parts(x.as_ptr() as *const D, x.len()) };
            y.copy_from_slice(x);
        }
        (DType::F32, DType::F16) => {
            // SAFETY: S is f32 and D is f16 in this arm.
            let (x, y) = unsafe { (&*(x as *const [S] as *const [f32]), &mut *(y as *mut [D] as *mut [f16])) };
            half::slice::HalfFloatSliceExt::convert_from_f32_slice(y, x);
        }
        (DType::F16, DType::F32) => {
            // SAFETY: S is f16 and D is f32 in this arm.
            let (x, y) = unsafe { (&*(x as *const [S] as *const [f16]), &mut *(y as *mut [D] as *mut [f32])) };
            half::slice::HalfFloatSliceExt::convert_to_f32_slice(x, y);
        }
        (DType::F32, DType::BF16) => {
            // SAFETY: S is f32 and D is bf16 in this arm.
            let (x, y) = unsafe {
                (
                    &*(x as *const [S] as *const [f32]),
                    &mut *(y as *mut [D] as *mut [bf16]),
                )
            };
            f32_to_bf16_slice(x, y);
        }
        (DType::BF16, DType::F32) => {
            // SAFETY: S is bf16 and D is f32 in this arm.
            let (x, y) = unsafe {
                (
                    &*(x as *const [S] as *const [bf16]),
                    &mut *(y as *mut [D] as *mut [f32]),
                )
            };
            bf16_to_f32_slice(x, y);
        }
        _ => {
            for (a, b) in x.iter().zip(y.iter_mut()) {
                *b = convert::<S, D>(*a);
            }
        }
    }
}

multiversion! {
    /// `y = bf16(x)` rounded to nearest even, a NaN kept as a quiet NaN of
    /// its sign (`bf16::from_f32`, bit for bit), branch-free so the loop
    /// vectorises.
    pub(crate) fn f32_to_bf16_slice(x: &[f32], y: &mut [bf16]) {
        for (o, v) in y.iter_mut().zip(x) {
            let b = v.to_bits();
            let rounded = (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16;
            let nan = ((b >> 16) as u16) | 0x40;
            *o = bf16::from_bits(if b & 0x7fff_ffff > 0x7f80_0000 { nan } else { rounded });
        }
    }
}

multiversion! {
    /// `y = f32(x)` (exact: the bf16 bits are the f32's upper half).
    pub(crate) fn bf16_to_f32_slice(x: &[bf16], y: &mut [f32]) {
        for (o, v) in y.iter_mut().zip(x) {
            *o = f32::from_bits((v.to_bits() as u32) << 16);
        }
    }
}

/// f32 zeros shaped as each f16 / bf16 tensor of `ts`, on its device: the
/// temporaries a kernel computing half precision in f32 writes before
/// rounding (the meta kernels make them to mirror the CPU's bytes).
pub(crate) fn f32_twins(ts: &[&Tensor]) -> Result<Vec<Tensor>> {
    ts.iter()
        .filter(|t| matches!(t.dtype(), DType::F16 | DType::BF16))
        .map(|t| {
            crate::TensorOptions::new()
                .dtype(DType::F32)
                .device(t.device())
                .zeros(t.shape())
        })
        .collect()
}

/// A converting copy of `n` elements: `(src, src_stride, dst, dst_stride,
/// n)`, strides in elements of each side's type (0 repeats one element).
///
/// # Safety
/// `src` is aligned and readable for `n` elements of the source type
/// `src_stride` apart, `dst` aligned and writable for `n` elements of the
/// destination type `dst_stride` apart, and the two do not overlap.
pub(crate) type CastFn = unsafe fn(*const u8, usize, *mut u8, usize, usize);

/// The [`CastFn`] from `S` to `D`, converting as [`cast_block`] does.
///
/// # Safety
/// As [`CastFn`].
unsafe fn cast_run<S: Element, D: Element>(src: *const u8, ss: usize, dst: *mut u8, ds: usize, n: usize) {
    if ss == 1 && ds == 1 {
        // SAFETY: the contract: n aligned, contiguous, non-overlapping elements on each side.
        let (x, y) = unsafe {
            (
                std::slice::from_raw_parts(src as *const S, n),
                std::slice::from_raw_parts_mut(dst as *mut D, n),
            )
        };
        cast_block(x, y);
        return;
    }
    for i in 0..n {
        // SAFETY: the contract: element i lies i * stride elements from each base.
        unsafe {
            let v = (src as *const S).add(i * ss).read();
            (dst as *mut D).add(i * ds).write(convert::<S, D>(v));
        }
    }
}

/// The converting copy from `from` to `to` (how the pointwise engine casts
/// operands inside its loop, as PyTorch's TensorIterator does).
pub(crate) fn caster(from: DType, to: DType) -> CastFn {
    with_dtype!(from, S => with_dtype!(to, D => cast_run::<S, D> as CastFn))
}

/// `out = cast(x)` elementwise (also plain strided copies).
pub(crate) fn cast_into(out: &Tensor, x: &Tensor) -> Result<()> {
    with_dtype!(x.dtype(), S => with_dtype!(out.dtype(), D => {
        map1::<S, D>("_to_copy", out, x, Cost::Cheap, cast_block::<S, D>)
    }))
}

pub(crate) fn cast_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    cast_into(outputs[0], inputs[0])
}

pub(crate) fn copy_inplace_kernel(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    cast_into(outputs[0], inputs[1])
}

/// The value of a scalar as element type `T` (converted as [`convert`] does).
pub(crate) fn scalar_as<T: Element>(s: Scalar) -> T {
    match s {
        Scalar::Float(f) => convert::<f64, T>(f),
        Scalar::Int(i) => convert::<i64, T>(i),
        Scalar::Bool(b) => T::from_i64(b as i64),
    }
}

pub(crate) fn fill_inplace_kernel(op: &dyn Op, _inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    fill_value(outputs[0], downcast_op::<FillInplace>(op)?.value)
}

pub(crate) fn fill_kernel(op: &dyn Op, _inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    fill_value(outputs[0], downcast_op::<Fill>(op)?.value)
}

/// Writes `value` (cast to the output's dtype) into every element of `out`.
fn fill_value(out: &Tensor, value: Scalar) -> Result<()> {
    with_dtype!(out.dtype(), T => {
        let v: T = scalar_as(value);
        fill_with::<T>("fill_", out, Cost::Cheap, |o| o.fill(v))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectorised conversions agree with `half`'s on every class of
    /// value: ties, rounding up into the exponent and to infinity,
    /// subnormals, zeros, infinities and NaNs of both signs.
    #[test]
    fn bf16_conversions_match_half_bit_for_bit() {
        let mut xs: Vec<f32> = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            1e-40,
            -1e-40,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xff80_0001),
            f32::from_bits(0x3f80_8000),
            f32::from_bits(0x3f81_8000),
            f32::from_bits(0x3f80_8001),
            f32::from_bits(0x7f7f_8000),
            f32::from_bits(0x3fff_ffff),
        ];
        let mut state = 0x9e37_79b9u32;
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            xs.push(f32::from_bits(state));
        }
        let mut got = vec![bf16::ZERO; xs.len()];
        f32_to_bf16_slice(&xs, &mut got);
        for (x, g) in xs.iter().zip(&got) {
            assert_eq!(g.to_bits(), bf16::from_f32(*x).to_bits(), "{x:e} ({:#x})", x.to_bits());
        }
        let mut back = vec![0f32; got.len()];
        bf16_to_f32_slice(&got, &mut back);
        for (g, b) in got.iter().zip(&back) {
            assert_eq!(b.to_bits(), g.to_f32().to_bits());
        }
    }
}
