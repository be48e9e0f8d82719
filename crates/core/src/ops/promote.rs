//! Operands that are tensors or scalars, and PyTorch's `result_type`.

use crate::{DType, Device, Result, Scalar, Tensor};

/// An argument that may be a tensor or a plain number (`x + y`, `x + 2.0`).
#[derive(Debug, Clone)]
pub enum Operand<'a> {
    /// A tensor.
    Tensor(&'a Tensor),
    /// A number (a "wrapped number" for type promotion).
    Scalar(Scalar),
}

/// Conversion into an [`Operand`]: implemented for `&Tensor` and the
/// numeric types, so `a.add(&b)` and `a.add(2.5)` both work.
pub trait IntoOperand<'a> {
    /// The operand.
    fn into_operand(self) -> Operand<'a>;
}

impl<'a> IntoOperand<'a> for &'a Tensor {
    fn into_operand(self) -> Operand<'a> {
        Operand::Tensor(self)
    }
}

impl<'a> IntoOperand<'a> for Operand<'a> {
    fn into_operand(self) -> Operand<'a> {
        self
    }
}

macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl<'a> IntoOperand<'a> for $t {
            fn into_operand(self) -> Operand<'a> {
                Operand::Scalar(Scalar::from(self))
            }
        }
    )*};
}
scalar_operand!(
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    bool,
    usize,
    u64,
    isize,
    Scalar,
    half::f16,
    half::bf16
);

impl Operand<'_> {
    /// The operand as a tensor of `dtype` (a 0-d CPU tensor for a scalar,
    /// which may join calls on any device, as in PyTorch).
    pub fn to_tensor(&self, dtype: DType) -> Result<Tensor> {
        match self {
            Operand::Tensor(t) => t.to_dtype(dtype),
            Operand::Scalar(s) => Ok(Tensor::scalar_tensor(*s, dtype)),
        }
    }

    /// As [`Self::to_tensor`], for an operator's input: a scalar becomes a
    /// shared, read-only 0-d tensor from a small per-thread cache (wrapping
    /// the same constant again costs a lookup, not an allocation). Never
    /// hand the result to code that might write into it.
    pub(crate) fn to_input(&self, dtype: DType) -> Result<Tensor> {
        match self {
            Operand::Tensor(t) => t.to_dtype(dtype),
            Operand::Scalar(s) => Ok(wrapped_scalar(*s, dtype)),
        }
    }

    /// The device of a tensor operand.
    pub fn device(&self) -> Option<Device> {
        match self {
            Operand::Tensor(t) => Some(t.device()),
            Operand::Scalar(_) => None,
        }
    }
}

/// Slots of the per-thread cache of wrapped scalars.
const WRAPPED_SLOTS: usize = 32;

type WrappedSlot = Option<(Scalar, DType, Tensor)>;

thread_local! {
    static WRAPPED: std::cell::RefCell<[WrappedSlot; WRAPPED_SLOTS]> =
        const { std::cell::RefCell::new([const { None }; WRAPPED_SLOTS]) };
}

/// The 0-d tensor of `value` as `dtype`, from a direct-mapped per-thread
/// cache (constants of backward formulas and `x * 2.0` repeat endlessly).
pub(crate) fn wrapped_scalar(value: Scalar, dtype: DType) -> Tensor {
    let (kind, bits) = match value {
        Scalar::Float(f) => (1u64, f.to_bits()),
        Scalar::Int(i) => (2, i as u64),
        Scalar::Bool(b) => (3, b as u64),
    };
    let h = (bits ^ (kind << 61) ^ ((dtype as u64) << 56)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let slot = (h >> 59) as usize % WRAPPED_SLOTS;
    let same = |s: &Scalar| match (s, value) {
        (Scalar::Float(a), Scalar::Float(b)) => a.to_bits() == b.to_bits(),
        (a, b) => *a == b,
    };
    WRAPPED
        .try_with(|c| {
            let mut cache = c.borrow_mut();
            match &cache[slot] {
                Some((s, d, t)) if *d == dtype && same(s) => t.clone(),
                _ => {
                    // Shared by every later use: in-place writes are refused.
                    let t = Tensor::scalar_tensor_with(value, dtype, true);
                    cache[slot] = Some((value, dtype, t.clone()));
                    t
                }
            }
        })
        // During thread teardown the cache is gone: a fresh tensor.
        .unwrap_or_else(|_| Tensor::scalar_tensor(value, dtype))
}

fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match (higher, lower) {
        (None, l) => l,
        (Some(h), None) => Some(h),
        (Some(h), Some(l)) => {
            if h.is_floating_point() {
                Some(h)
            } else if h == DType::Bool || l.is_floating_point() {
                Some(h.promote(l))
            } else {
                Some(h)
            }
        }
    }
}

/// `torch.result_type`: the dtype an operation on these operands computes
/// in. Tensors with dims outrank 0-d tensors, which outrank scalars; a
/// lower-ranked operand only matters when its category (bool < integer <
/// float) is higher.
pub fn result_type(operands: &[Operand]) -> DType {
    let (mut dim, mut zero, mut wrapped) = (None::<DType>, None::<DType>, None::<DType>);
    let up = |acc: &mut Option<DType>, d: DType| *acc = Some(acc.map_or(d, |a| a.promote(d)));
    for o in operands {
        match o {
            Operand::Tensor(t) if t.ndim() > 0 => up(&mut dim, t.dtype()),
            Operand::Tensor(t) => up(&mut zero, t.dtype()),
            Operand::Scalar(s) => up(&mut wrapped, s.wrapped_dtype()),
        }
    }
    combine(dim, combine(zero, wrapped)).unwrap_or(crate::default_dtype())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operand_devices() {
        let t = Tensor::zeros([2]).unwrap();
        assert_eq!(Operand::Tensor(&t).device(), Some(Device::Cpu));
        let m = crate::TensorOptions::new().device(Device::Meta).zeros([2]).unwrap();
        assert_eq!(Operand::Tensor(&m).device(), Some(Device::Meta));
        assert_eq!(Operand::Scalar(Scalar::Float(1.0)).device(), None);
    }

    #[test]
    fn result_type_rules() {
        let i32t = Tensor::zeros_dtype([2], DType::I32).unwrap();
        let f16t = Tensor::zeros_dtype([2], DType::F16).unwrap();
        let f64z = Tensor::zeros_dtype((), DType::F64).unwrap();
        let f32t = Tensor::zeros([2]).unwrap();
        let b = Tensor::zeros_dtype([2], DType::Bool).unwrap();
        let s = |x: Scalar| Operand::Scalar(x);
        let t = Operand::Tensor;
        assert_eq!(result_type(&[t(&i32t), s(Scalar::Float(2.5))]), DType::F32);
        assert_eq!(result_type(&[t(&i32t), s(Scalar::Int(2))]), DType::I32);
        assert_eq!(result_type(&[t(&f16t), s(Scalar::Float(2.5))]), DType::F16);
        assert_eq!(result_type(&[t(&f32t), t(&f64z)]), DType::F32);
        assert_eq!(result_type(&[t(&i32t), t(&f64z)]), DType::F64);
        assert_eq!(result_type(&[t(&b), s(Scalar::Int(2))]), DType::I64);
        assert_eq!(result_type(&[t(&b), t(&b)]), DType::Bool);
    }
}

#[cfg(test)]
mod read_only_tests {
    use super::*;

    /// A write into a cached wrapped scalar is refused, and the cache keeps its value.
    #[test]
    fn cached_scalars_are_read_only() {
        let two = Operand::Scalar(Scalar::Float(2.0)).to_input(DType::F32).unwrap();
        assert!(two.storage().is_read_only());
        let e = two.fill_(3.0).unwrap_err().to_string();
        assert!(e.contains("shared cached constant"), "{e}");
        assert!(two.add_(1.0).is_err());
        assert!(two.expand([3]).unwrap().mul_(0.0).is_err());
        let again = Operand::Scalar(Scalar::Float(2.0)).to_input(DType::F32).unwrap();
        assert_eq!(again.item::<f32>().unwrap(), 2.0);
        let x = Tensor::from_slice(&[1.0f32, 2.0]);
        assert_eq!(x.mul(2.0).unwrap().to_vec::<f32>().unwrap(), [2.0, 4.0]);
    }
}
