//! `ReduceOp` and the element-wise reductions of the collectives, on the
//! raw little-endian bytes that travel between ranks.

use ferrotorch_core::DType;
use half::{bf16, f16};

use crate::error::{DistError, Result};

/// How a reduction combines the ranks' values (`torch.distributed.ReduceOp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The mean over the group (floating-point dtypes).
    Avg,
    /// The product.
    Product,
    /// The minimum.
    Min,
    /// The maximum.
    Max,
    /// Bitwise and (integer and bool dtypes).
    Band,
    /// Bitwise or (integer and bool dtypes).
    Bor,
    /// Bitwise xor (integer and bool dtypes).
    Bxor,
}

impl ReduceOp {
    /// PyTorch's name (`"SUM"`, `"AVG"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "SUM",
            ReduceOp::Avg => "AVG",
            ReduceOp::Product => "PRODUCT",
            ReduceOp::Min => "MIN",
            ReduceOp::Max => "MAX",
            ReduceOp::Band => "BAND",
            ReduceOp::Bor => "BOR",
            ReduceOp::Bxor => "BXOR",
        }
    }

    /// A small number for the wire (collective fingerprints).
    pub(crate) fn code(self) -> u8 {
        self as u8
    }

    /// Checks that `self` applies to `dtype`: bitwise ops on integers and
    /// bool only, the mean on floating-point dtypes only. `op` names the
    /// collective in the error.
    pub fn check(self, op: &str, dtype: DType) -> Result<()> {
        let bitwise = matches!(self, ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor);
        if bitwise && dtype.is_floating_point() {
            return Err(DistError::InvalidArgument(format!(
                "{op}: ReduceOp.{} needs an integer or bool tensor, got {}",
                self.name(),
                dtype.name()
            )));
        }
        if self == ReduceOp::Avg && !dtype.is_floating_point() {
            return Err(DistError::InvalidArgument(format!(
                "{op}: ReduceOp.AVG needs a floating-point tensor, got {}",
                dtype.name()
            )));
        }
        Ok(())
    }
}

/// `acc[i] = acc[i] op src[i]` over the elements of two equally long byte
/// slices of `dtype`; half types are combined in f32 and rounded once per
/// step. `Avg` sums (its division is [`finish_avg`]'s).
pub(crate) fn reduce_into(dtype: DType, op: ReduceOp, acc: &mut [u8], src: &[u8]) {
    debug_assert_eq!(acc.len(), src.len());
    if fast_sum(dtype, op, acc, src) {
        return;
    }
    macro_rules! ints {
        ($t:ty) => {{
            let f = |a: $t, b: $t| -> $t {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
                    ReduceOp::Product => a.wrapping_mul(b),
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Band => a & b,
                    ReduceOp::Bor => a | b,
                    ReduceOp::Bxor => a ^ b,
                }
            };
            zip::<$t, { size_of::<$t>() }>(acc, src, f)
        }};
    }
    macro_rules! floats {
        ($t:ty, $to:expr, $from:expr) => {{
            let f = |a: $t, b: $t| -> $t {
                let (x, y) = ($to(a), $to(b));
                $from(match op {
                    ReduceOp::Sum | ReduceOp::Avg => x + y,
                    ReduceOp::Product => x * y,
                    // PyTorch's min / max propagate NaN.
                    ReduceOp::Min => {
                        if x.is_nan() || y.is_nan() {
                            x + y
                        } else {
                            x.min(y)
                        }
                    }
                    ReduceOp::Max => {
                        if x.is_nan() || y.is_nan() {
                            x + y
                        } else {
                            x.max(y)
                        }
                    }
                    ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor => {
                        unreachable!("ReduceOp::check refuses bitwise ops on floats")
                    }
                })
            };
            zip::<$t, { size_of::<$t>() }>(acc, src, f)
        }};
    }
    match dtype {
        DType::Bool => {
            for (a, &b) in acc.iter_mut().zip(src) {
                let (x, y) = (*a != 0, b != 0);
                *a = u8::from(match op {
                    ReduceOp::Sum | ReduceOp::Avg | ReduceOp::Max | ReduceOp::Bor => x | y,
                    ReduceOp::Product | ReduceOp::Min | ReduceOp::Band => x & y,
                    ReduceOp::Bxor => x ^ y,
                });
            }
        }
        DType::U8 => ints!(u8),
        DType::I32 => ints!(i32),
        DType::I64 => ints!(i64),
        DType::F16 => floats!(f16, f16::to_f32, f16::from_f32),
        DType::BF16 => floats!(bf16, bf16::to_f32, bf16::from_f32),
        DType::F32 => floats!(f32, |x| x, |x| x),
        DType::F64 => floats!(f64, |x| x, |x| x),
    }
}

/// The common case, f32 / f64 sums on aligned buffers, as plain slices
/// the compiler vectorises (the same additions in the same order, so the
/// same bits as the general path); false when it does not apply.
fn fast_sum(dtype: DType, op: ReduceOp, acc: &mut [u8], src: &[u8]) -> bool {
    if !matches!(op, ReduceOp::Sum | ReduceOp::Avg) {
        return false;
    }
    fn add<T: bytemuck::Pod + std::ops::AddAssign>(acc: &mut [u8], src: &[u8]) -> bool {
        match (
            bytemuck::try_cast_slice_mut::<u8, T>(acc),
            bytemuck::try_cast_slice::<u8, T>(src),
        ) {
            (Ok(a), Ok(b)) => {
                a.iter_mut().zip(b).for_each(|(x, &y)| *x += y);
                true
            }
            _ => false,
        }
    }
    match dtype {
        DType::F32 => add::<f32>(acc, src),
        DType::F64 => add::<f64>(acc, src),
        _ => false,
    }
}

/// Divides every element by `n` (the end of `Avg`), in f32 for half types.
pub(crate) fn finish_avg(dtype: DType, buf: &mut [u8], n: usize) {
    match dtype {
        DType::F16 => map::<f16, 2>(buf, |x| f16::from_f32(x.to_f32() / n as f32)),
        DType::BF16 => map::<bf16, 2>(buf, |x| bf16::from_f32(x.to_f32() / n as f32)),
        DType::F32 => map::<f32, 4>(buf, |x| x / n as f32),
        DType::F64 => map::<f64, 8>(buf, |x| x / n as f64),
        _ => {}
    }
}

/// Element types that travel as little-endian bytes.
trait Le<const N: usize>: Copy {
    fn from_le(b: [u8; N]) -> Self;
    fn to_le(self) -> [u8; N];
}

macro_rules! le {
    ($($t:ty),*) => {$(
        impl Le<{ size_of::<$t>() }> for $t {
            fn from_le(b: [u8; size_of::<$t>()]) -> Self { <$t>::from_le_bytes(b) }
            fn to_le(self) -> [u8; size_of::<$t>()] { self.to_le_bytes() }
        }
    )*};
}
le!(u8, i32, i64, f16, bf16, f32, f64);

fn zip<T: Le<N>, const N: usize>(acc: &mut [u8], src: &[u8], f: impl Fn(T, T) -> T) {
    for (a, b) in acc.chunks_exact_mut(N).zip(src.chunks_exact(N)) {
        let x = T::from_le(a.try_into().expect("chunk of N bytes"));
        let y = T::from_le(b.try_into().expect("chunk of N bytes"));
        a.copy_from_slice(&f(x, y).to_le());
    }
}

fn map<T: Le<N>, const N: usize>(buf: &mut [u8], f: impl Fn(T) -> T) {
    for a in buf.chunks_exact_mut(N) {
        let x = T::from_le(a.try_into().expect("chunk of N bytes"));
        a.copy_from_slice(&f(x).to_le());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Le<N>, const N: usize>(v: &[T]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le()).collect()
    }

    #[test]
    fn reductions_per_dtype() {
        let mut a = bytes(&[1i32, -5, 7]);
        reduce_into(DType::I32, ReduceOp::Max, &mut a, &bytes(&[3i32, -9, 7]));
        assert_eq!(a, bytes(&[3i32, -5, 7]));
        let mut a = bytes(&[0b1100i64]);
        reduce_into(DType::I64, ReduceOp::Bxor, &mut a, &bytes(&[0b1010i64]));
        assert_eq!(a, bytes(&[0b0110i64]));
        let mut a = vec![1u8, 0, 1];
        reduce_into(DType::Bool, ReduceOp::Band, &mut a, &[1, 1, 0]);
        assert_eq!(a, [1, 0, 0]);
        let mut a = bytes(&[f32::NAN, 1.0]);
        reduce_into(DType::F32, ReduceOp::Min, &mut a, &bytes(&[0.0f32, -1.0]));
        let out: Vec<f32> = a.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert!(out[0].is_nan() && out[1] == -1.0);
        // bf16 sums in f32 and rounds once: 256 + 1 is not representable.
        let mut a = bytes(&[bf16::from_f32(256.0)]);
        reduce_into(DType::BF16, ReduceOp::Sum, &mut a, &bytes(&[bf16::from_f32(1.0)]));
        assert_eq!(a, bytes(&[bf16::from_f32(257.0)]));
        let mut a = bytes(&[6.0f64]);
        finish_avg(DType::F64, &mut a, 4);
        assert_eq!(a, bytes(&[1.5f64]));
    }

    #[test]
    fn op_dtype_rules() {
        assert!(ReduceOp::Band.check("all_reduce", DType::F32).is_err());
        assert!(ReduceOp::Avg.check("all_reduce", DType::I64).is_err());
        assert!(ReduceOp::Bor.check("all_reduce", DType::Bool).is_ok());
        assert!(ReduceOp::Avg.check("all_reduce", DType::BF16).is_ok());
    }
}
