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
             u8 => Int as i64, usize => Int as i64, u32 => Int as i64, i8 => Int as i64, i16 => Int as i64);

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
