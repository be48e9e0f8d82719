//! [`Scalar`]: a number that is not a tensor (PyTorch's Python scalars).

use std::fmt;

use crate::DType;

/// A plain number passed to an operator (`x + 2.5`, `clamp(min=0)`).
///
/// Like a Python scalar it has a kind (bool, integer, float) but no precision
/// of its own: type promotion treats it as a "wrapped number", so `f16 + 2.5`
/// stays f16 and `i32 + 2` stays i32, while `i32 + 2.5` becomes f32.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
}

impl Scalar {
    /// Checks that the value can be stored in `dtype` (PyTorch's
    /// `checked_convert` for `fill_`, `masked_fill` and `full`): integers
    /// must lie in the dtype's range (unsigned ones also accept negative
    /// values down to `-max`, which wrap, as in PyTorch), finite floats in
    /// the float dtype's range (inf and NaN pass), and bool takes anything.
    /// The error names `op` and the C++ type PyTorch names.
    ///
    /// ```
    /// use ferrotorch_core::{DType, Scalar};
    /// assert!(Scalar::Int(255).check_fits("fill_", DType::U8).is_ok());
    /// assert!(Scalar::Int(-1).check_fits("fill_", DType::U8).is_ok()); // wraps to 255
    /// let e = Scalar::Int(256).check_fits("fill_", DType::U8).unwrap_err();
    /// assert_eq!(e.to_string(), "fill_: value cannot be converted to type uint8_t without overflow");
    /// assert!(Scalar::Float(1e10).check_fits("fill_", DType::F16).is_err());
    /// assert!(Scalar::Float(f64::INFINITY).check_fits("fill_", DType::F16).is_ok());
    /// ```
    pub fn check_fits(self, op: &'static str, dtype: DType) -> crate::Result<()> {
        let cname = match dtype {
            DType::Bool | DType::F64 => return Ok(()),
            DType::U8 => "uint8_t",
            DType::I32 => "int",
            DType::I64 => "int64_t",
            DType::F16 => "c10::Half",
            DType::BF16 => "c10::BFloat16",
            DType::F32 => "float",
        };
        if self.fits(dtype) {
            Ok(())
        } else {
            Err(crate::Error::invalid(
                op,
                format!("value cannot be converted to type {cname} without overflow"),
            ))
        }
    }

    /// [`Scalar::check_fits`] for a fill of `numel` elements: PyTorch's
    /// one-element fill of an f16 / bf16 tensor (its `fill_inplace` fast
    /// path) skips the check and stores inf, as `torch.tensor` would.
    pub fn check_fits_fill(self, op: &'static str, dtype: DType, numel: usize) -> crate::Result<()> {
        if numel == 1 && matches!(dtype, DType::F16 | DType::BF16) {
            return Ok(());
        }
        self.check_fits(op, dtype)
    }

    /// Whether the value converts to `dtype` without overflow (c10's
    /// `checked_convert`): see [`Scalar::check_fits`].
    pub(crate) fn fits(self, dtype: DType) -> bool {
        let (lo, hi): (f64, f64) = match dtype {
            DType::Bool | DType::F64 => return true,
            DType::U8 => (-255.0, 255.0),
            DType::I32 => (i32::MIN as f64, i32::MAX as f64),
            DType::I64 => (i64::MIN as f64, i64::MAX as f64),
            DType::F16 => (-65504.0, 65504.0),
            DType::BF16 => (-f64::from(half::bf16::MAX), f64::from(half::bf16::MAX)),
            DType::F32 => (f32::MIN as f64, f32::MAX as f64),
        };
        match self {
            Scalar::Bool(_) => true,
            // Exact for every integer dtype (no rounding through f64).
            Scalar::Int(i) => match dtype {
                DType::U8 => (-255..=255).contains(&i),
                DType::I32 => i32::try_from(i).is_ok(),
                DType::I64 => true,
                _ => (i as f64) >= lo && (i as f64) <= hi,
            },
            Scalar::Float(f) if dtype.is_floating_point() => !f.is_finite() || (f >= lo && f <= hi),
            // A float into an integer dtype truncates, so anything below
            // max + 1 fits (PyTorch: 2147483647.9 fills an int32, 2^31 does
            // not); NaN and inf fail. A negative float never fits uint8
            // (-0.5 fails, -0.0 fits), unlike a negative int.
            Scalar::Float(f) => f >= if dtype == DType::U8 { 0.0 } else { lo } && f < hi + 1.0,
        }
    }

    /// The value as f64.
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }

    /// The value as i64 (floats truncate toward zero).
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
        }
    }

    /// The dtype a scalar of this kind contributes to type promotion:
    /// bool, the default integer type (i64), or the default float type (f32).
    pub fn wrapped_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => crate::default_dtype(),
        }
    }

    /// True for a floating-point scalar.
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::Float(_))
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
        }
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident as $c:ty),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Self {
                Scalar::$v(x as $c)
            }
        }
    )*};
}
scalar_from!(f32 => Float as f64, f64 => Float as f64, i32 => Int as i64, i64 => Int as i64,
             u8 => Int as i64, u32 => Int as i64, u16 => Int as i64, i8 => Int as i64, i16 => Int as i64,
             isize => Int as i64);

/// An unsigned 64-bit value above `i64::MAX` has no integer scalar (PyTorch's
/// scalars are 64-bit signed: Python raises "Overflow when unpacking long");
/// it becomes the nearest float rather than wrapping to a negative integer.
macro_rules! scalar_from_unsigned64 {
    ($($t:ty),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Self {
                match i64::try_from(x) {
                    Ok(v) => Scalar::Int(v),
                    Err(_) => Scalar::Float(x as f64),
                }
            }
        }
    )*};
}
scalar_from_unsigned64!(u64, usize);

impl From<bool> for Scalar {
    fn from(b: bool) -> Self {
        Scalar::Bool(b)
    }
}

impl From<half::f16> for Scalar {
    fn from(x: half::f16) -> Self {
        Scalar::Float(x.to_f64())
    }
}

impl From<half::bf16> for Scalar {
    fn from(x: half::bf16) -> Self {
        Scalar::Float(x.to_f64())
    }
}
