//! Element types: the [`DType`] enum, the [`Element`] trait that ties a Rust
//! type to its dtype, and PyTorch's type promotion.

use std::fmt;

use half::{bf16, f16};

/// The element type of a tensor. `F32` is the default, as in PyTorch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `torch.bool`, one byte per element.
    Bool,
    /// `torch.uint8`.
    U8,
    /// `torch.int32`.
    I32,
    /// `torch.int64`, the default integer type.
    I64,
    /// `torch.float16` (IEEE half).
    F16,
    /// `torch.bfloat16`.
    BF16,
    /// `torch.float32`, the default floating-point type.
    F32,
    /// `torch.float64`.
    F64,
}

/// Every dtype, in declaration order.
pub const ALL_DTYPES: [DType; 8] = [
    DType::Bool,
    DType::U8,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];

impl DType {
    /// PyTorch's `ScalarType` name (`Float`, `Long`, `BFloat16`), as its
    /// messages print dtypes (`torch.FloatTensor`, "not implemented for
    /// 'Long'").
    pub fn scalar_type_name(self) -> &'static str {
        match self {
            DType::Bool => "Bool",
            DType::U8 => "Byte",
            DType::I32 => "Int",
            DType::I64 => "Long",
            DType::F16 => "Half",
            DType::BF16 => "BFloat16",
            DType::F32 => "Float",
            DType::F64 => "Double",
        }
    }

    /// The C++ type name PyTorch's messages print for the dtype
    /// (`caffe2::TypeMeta`'s names: `float`, `double`, `long int`,
    /// `c10::Half`), as in "expected scalar type float but found double".
    ///
    /// ```
    /// use ferrotorch_core::DType;
    /// assert_eq!(DType::I64.cpp_type_name(), "long int");
    /// ```
    pub fn cpp_type_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "unsigned char",
            DType::I32 => "int",
            DType::I64 => "long int",
            DType::F16 => "c10::Half",
            DType::BF16 => "c10::BFloat16",
            DType::F32 => "float",
            DType::F64 => "double",
        }
    }

    /// Bytes per element (`torch.Tensor.element_size()`).
    pub const fn element_size(self) -> usize {
        match self {
            DType::Bool | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// True for f16, bf16, f32 and f64.
    pub const fn is_floating_point(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// True for u8, i32, i64 (and, with `include_bool`, bool).
    pub const fn is_integral(self, include_bool: bool) -> bool {
        match self {
            DType::U8 | DType::I32 | DType::I64 => true,
            DType::Bool => include_bool,
            _ => false,
        }
    }

    /// True for dtypes that can hold negative values.
    pub const fn is_signed(self) -> bool {
        !matches!(self, DType::Bool | DType::U8)
    }

    /// PyTorch's name without the `torch.` prefix, e.g. `float32`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// Parses PyTorch's names (`float32`, `torch.float32`, `float`, `long`, ...).
    pub fn from_name(name: &str) -> Option<DType> {
        let n = name.strip_prefix("torch.").unwrap_or(name);
        Some(match n {
            "bool" => DType::Bool,
            "uint8" => DType::U8,
            "int32" | "int" => DType::I32,
            "int64" | "long" => DType::I64,
            "float16" | "half" => DType::F16,
            "bfloat16" => DType::BF16,
            "float32" | "float" => DType::F32,
            "float64" | "double" => DType::F64,
            _ => return None,
        })
    }

    /// `torch.promote_types`: the smallest dtype both `self` and `other` convert to
    /// without losing their category.
    pub const fn promote(self, other: DType) -> DType {
        use DType::*;
        if self as u8 == other as u8 {
            return self;
        }
        match (self, other) {
            (Bool, x) | (x, Bool) => x,
            (F16, BF16) | (BF16, F16) => F32,
            // Floats win over integers; among floats the wider one wins.
            (a, b) if a.is_floating_point() && !b.is_floating_point() => a,
            (a, b) if b.is_floating_point() && !a.is_floating_point() => b,
            (a, b) => {
                if (a as u8) > (b as u8) {
                    a
                } else {
                    b
                }
            }
        }
    }

    /// Whether a value of dtype `from` may be written into a tensor of `self`
    /// (PyTorch's `can_cast`, used by in-place ops): no float into integer and
    /// no non-bool into bool.
    pub const fn can_cast_from(self, from: DType) -> bool {
        if from.is_floating_point() && !self.is_floating_point() {
            return false;
        }
        !matches!(self, DType::Bool) || matches!(from, DType::Bool)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is the element type of some [`DType`].
///
/// Implemented for `bool`, `u8`, `i32`, `i64`, `half::f16`, `half::bf16`, `f32` and `f64`.
pub trait Element:
    sealed::Sealed + Copy + Send + Sync + Default + PartialEq + PartialOrd + fmt::Debug + 'static
{
    /// The dtype whose elements have this Rust type.
    const DTYPE: DType;
    /// Converts to f64 (exact for every type but i64 beyond 2^53).
    fn to_f64(self) -> f64;
    /// Converts to i64 (floats truncate toward zero).
    fn to_i64(self) -> i64;
    /// Converts from f64 with the same rounding as a C++ `static_cast`.
    fn from_f64(v: f64) -> Self;
    /// Converts from i64 with wrap-around for narrower integers.
    fn from_i64(v: i64) -> Self;
    /// Whether the value is nonzero (its truth value).
    fn is_nonzero(self) -> bool;
}

/// `(int64_t)v` as x86-64 computes it (`cvttsd2si`), which PyTorch's casts
/// compile to: truncation, and `i64::MIN` for NaN and values out of range.
#[inline]
fn x86_f64_to_i64(v: f64) -> i64 {
    if v.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&v) {
        i64::MIN
    } else {
        v as i64
    }
}

/// `(int32_t)v` as x86-64 computes it: truncation, and `i32::MIN` for NaN
/// and values out of range. (`uint8` takes the low bits of the int64
/// conversion, as PyTorch's compiled casts do.)
#[inline]
fn x86_f64_to_i32(v: f64) -> i32 {
    if v.is_nan() || v >= 2_147_483_648.0 || v <= -2_147_483_649.0 {
        i32::MIN
    } else {
        v as i32
    }
}

macro_rules! int_element {
    ($t:ty, $d:ident, $from_f64:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                // As PyTorch on x86-64: -1.0 -> u8 is 255, NaN -> i64 is i64::MIN.
                #[allow(clippy::redundant_closure_call)]
                ($from_f64)(v)
            }
            #[inline]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline]
            fn is_nonzero(self) -> bool {
                self != 0
            }
        }
    };
}
int_element!(u8, U8, |v| x86_f64_to_i64(v) as u8);
int_element!(i32, I32, x86_f64_to_i32);
int_element!(i64, I64, x86_f64_to_i64);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    #[inline]
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    #[inline]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    #[inline]
    fn is_nonzero(self) -> bool {
        self
    }
}

macro_rules! float_element {
    ($t:ty, $d:ident, $to:expr, $from:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_f64(self) -> f64 {
                #[allow(clippy::redundant_closure_call)]
                ($to)(self)
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self.to_f64() as i64
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                #[allow(clippy::redundant_closure_call)]
                ($from)(v)
            }
            #[inline]
            fn from_i64(v: i64) -> Self {
                Self::from_f64(v as f64)
            }
            #[inline]
            fn is_nonzero(self) -> bool {
                self.to_f64() != 0.0
            }
        }
    };
}
float_element!(f32, F32, |x: f32| x as f64, |v: f64| v as f32);
float_element!(f64, F64, |x: f64| x, |v: f64| v);
// Like c10::Half / c10::BFloat16, doubles round to f32 first, then to 16 bits.
float_element!(f16, F16, |x: f16| x.to_f64(), |v: f64| f16::from_f32(v as f32));
float_element!(bf16, BF16, |x: bf16| x.to_f64(), |v: f64| bf16::from_f32(v as f32));

/// Calls `$body` with the type alias `$T` bound to the Rust type of `$dtype`.
///
/// ```ignore
/// with_dtype!(t.dtype(), T => { do_something::<T>() })
/// ```
#[macro_export]
#[doc(hidden)]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::DType::Bool => {
                type $T = bool;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::F16 => {
                type $T = $crate::half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = $crate::half::bf16;
                $body
            }
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::DType::*;
    use super::*;

    #[test]
    fn promotion_matches_torch_promote_types() {
        assert_eq!(Bool.promote(U8), U8);
        assert_eq!(U8.promote(I32), I32);
        assert_eq!(I32.promote(I64), I64);
        assert_eq!(I64.promote(F16), F16);
        assert_eq!(F16.promote(BF16), F32);
        assert_eq!(BF16.promote(F32), F32);
        assert_eq!(F32.promote(F64), F64);
        assert_eq!(U8.promote(F32), F32);
        for (i, d) in ALL_DTYPES.iter().enumerate() {
            // `default_dtype` indexes ALL_DTYPES by discriminant.
            assert_eq!(*d as usize, i, "{d}");
        }
        for a in ALL_DTYPES {
            for b in ALL_DTYPES {
                assert_eq!(a.promote(b), b.promote(a), "{a} {b}");
            }
        }
    }

    #[test]
    fn element_sizes_and_names() {
        assert_eq!(F16.element_size(), 2);
        assert_eq!(I64.element_size(), 8);
        assert_eq!(DType::from_name("torch.float64"), Some(F64));
        assert_eq!(DType::from_name("long"), Some(I64));
        assert_eq!(u8::from_f64(-1.0), 255);
    }

    /// Float to integer casts as PyTorch 2.15 on x86-64
    /// (`torch.tensor([v]).to(dtype)`).
    #[test]
    fn float_to_int_casts_match_torch_on_x86() {
        let nan = f64::NAN;
        let inf = f64::INFINITY;
        for (v, want) in [
            (nan, i64::MIN),
            (inf, i64::MIN),
            (-inf, i64::MIN),
            (1e19, i64::MIN),
            (-1e19, i64::MIN),
            (9.2e18, 9_200_000_000_000_000_000),
            (-9.223_372_036_854_776e18, i64::MIN),
            (-2.7, -2),
            (2.7, 2),
        ] {
            assert_eq!(i64::from_f64(v), want, "{v} -> int64");
        }
        for (v, want) in [
            (nan, i32::MIN),
            (3e9, i32::MIN),
            (4_294_967_295.0, i32::MIN),
            (-2_147_483_648.9, i32::MIN),
            (-2_147_483_649.0, i32::MIN),
            (2_147_483_647.9, i32::MAX),
            (-7.5, -7),
        ] {
            assert_eq!(i32::from_f64(v), want, "{v} -> int32");
        }
        for (v, want) in [
            (300.0, 44u8),
            (-1.0, 255),
            (nan, 0),
            (1e10, 0),
            (255.9, 255),
            (-0.5, 0),
            (4_294_967_295.0, 255),
            (-2_147_483_649.0, 255),
            (-2.7, 254),
            (-7.5, 249),
        ] {
            assert_eq!(u8::from_f64(v), want, "{v} -> uint8");
        }
    }

    /// Every dtype's flags, sizes and names against PyTorch 2.15
    /// (`d.is_signed`, `d.is_floating_point`, `d.itemsize`, `str(d)`).
    #[test]
    fn flags_sizes_and_names_match_torch() {
        /// dtype, is_signed, is_floating_point, itemsize, name, aliases.
        type Row = (DType, bool, bool, usize, &'static str, &'static [&'static str]);
        let table: [Row; 8] = [
            (Bool, false, false, 1, "bool", &[]),
            (U8, false, false, 1, "uint8", &[]),
            (I32, true, false, 4, "int32", &["int"]),
            (I64, true, false, 8, "int64", &["long"]),
            (F16, true, true, 2, "float16", &["half"]),
            (BF16, true, true, 2, "bfloat16", &[]),
            (F32, true, true, 4, "float32", &["float"]),
            (F64, true, true, 8, "float64", &["double"]),
        ];
        assert_eq!(table.len(), ALL_DTYPES.len());
        for (d, signed, float, size, name, aliases) in table {
            assert_eq!(d.is_signed(), signed, "{name}.is_signed");
            assert_eq!(d.is_floating_point(), float, "{name}.is_floating_point");
            assert_eq!(d.element_size(), size, "{name}.itemsize");
            assert_eq!(d.name(), name);
            assert_eq!(DType::from_name(name), Some(d), "{name}");
            assert_eq!(DType::from_name(&format!("torch.{name}")), Some(d), "torch.{name}");
            for a in aliases {
                assert_eq!(DType::from_name(a), Some(d), "{a}");
                assert_eq!(DType::from_name(&format!("torch.{a}")), Some(d), "torch.{a}");
            }
        }
        for bad in [
            "",
            "torch.",
            "float8",
            "Float32",
            "torch.complex64",
            "int8",
            "torch.torch.float32",
        ] {
            assert_eq!(DType::from_name(bad), None, "{bad:?}");
        }
    }

    /// The whole `torch.promote_types` table (row = first argument, in
    /// `ALL_DTYPES` order), as PyTorch 2.15 prints it.
    #[test]
    fn promote_table_matches_torch() {
        let want: [[DType; 8]; 8] = [
            [Bool, U8, I32, I64, F16, BF16, F32, F64],
            [U8, U8, I32, I64, F16, BF16, F32, F64],
            [I32, I32, I32, I64, F16, BF16, F32, F64],
            [I64, I64, I64, I64, F16, BF16, F32, F64],
            [F16, F16, F16, F16, F16, F32, F32, F64],
            [BF16, BF16, BF16, BF16, F32, BF16, F32, F64],
            [F32, F32, F32, F32, F32, F32, F32, F64],
            [F64, F64, F64, F64, F64, F64, F64, F64],
        ];
        for (a, row) in ALL_DTYPES.iter().zip(want) {
            for (b, w) in ALL_DTYPES.iter().zip(row) {
                assert_eq!(a.promote(*b), w, "promote_types({a}, {b})");
            }
        }
    }

    /// `torch.can_cast(from, to)` for every pair (row = `to`, column =
    /// `from`, in `ALL_DTYPES` order), as PyTorch 2.15 prints it.
    #[test]
    fn can_cast_table_matches_torch() {
        let (t, f) = (true, false);
        let want: [[bool; 8]; 8] = [
            [t, f, f, f, f, f, f, f],
            [t, t, t, t, f, f, f, f],
            [t, t, t, t, f, f, f, f],
            [t, t, t, t, f, f, f, f],
            [t; 8],
            [t; 8],
            [t; 8],
            [t; 8],
        ];
        for (to, row) in ALL_DTYPES.iter().zip(want) {
            for (from, w) in ALL_DTYPES.iter().zip(row) {
                assert_eq!(to.can_cast_from(*from), w, "can_cast({from}, {to})");
            }
        }
    }
}
