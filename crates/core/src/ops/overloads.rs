//! Operator overloads: `&a + &b` (any mix of owned and borrowed tensors),
//! a scalar of any Rust numeric type on the right (`&x * 2.0f32`, `x * 2`,
//! `&g * lr`) and a literal on the left (`2.0 * &x`, `1 - &p`: f64 and
//! i64 there), unary `-`, and compound assignment as in-place
//! operations (`w -= &(g * lr)`, `x += 1.0`, `x *= &y`; each bumps the
//! version counter, as `w.sub_(...)` does).
//!
//! They call the methods of the same name and **panic** with the method's
//! error message on bad input (shape mismatch, dtype error), pointing at
//! the line that used the operator (`#[track_caller]`); use the methods
//! (`a.add(&b)?`, `w.sub_(&g)?`) to handle errors instead.
//!
//! ```
//! use ferrotorch_core::Tensor;
//! let x = Tensor::from_slice(&[1.0f32, 2.0]);
//! let y = &x * 2 + 1.0 - &x / 2.0f32;
//! assert_eq!(y.to_vec::<f32>()?, [2.5, 4.0]);
//! assert_eq!((2.0 * &x).sum()?.item::<f32>()?, 6.0);
//! assert_eq!((3 - &x * 2).to_vec::<f32>()?, [1.0, -1.0]);
//! assert_eq!((1.0 / x.clone()).to_vec::<f32>()?, [1.0, 0.5]);
//! assert_eq!((&x * 0.5f32 + 2u8).to_vec::<f32>()?, [2.5, 3.0]);
//! let mut w = Tensor::from_slice(&[1.0f32, 1.0]);
//! w -= &(&x * 0.5);
//! w *= 2;
//! assert_eq!(w.to_vec::<f32>()?, [1.0, 0.0]);
//! assert_eq!((1 - -&x).to_vec::<f32>()?, [2.0, 3.0]);
//! # Ok::<(), ferrotorch_core::Error>(())
//! ```

use std::ops::{
    Add, AddAssign, BitAnd, BitAndAssign, BitOr, BitOrAssign, BitXor, BitXorAssign, Div, DivAssign, Mul, MulAssign,
    Neg, Not, Rem, RemAssign, Shl, ShlAssign, Shr, ShrAssign, Sub, SubAssign,
};

use crate::ops::BinaryKind;
use crate::ops::binary::{binary, binary_, binary_scalar_lhs};
use crate::ops::binary_math::{MathKind, binary_math, binary_math_};
use crate::{Operand, Result, Scalar, Tensor};

/// The tensor, or a panic with the error's message at the user's line.
#[track_caller]
fn ok(r: Result<Tensor>) -> Tensor {
    match r {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    }
}

macro_rules! tensor_overloads {
    ($trait:ident, $method:ident, $assign:ident, $assign_method:ident) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                ok(binary(BinaryKind::$trait, self, Operand::Tensor(rhs)))
            }
        }

        impl $trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                ok(binary(BinaryKind::$trait, &self, Operand::Tensor(&rhs)))
            }
        }

        impl $trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                ok(binary(BinaryKind::$trait, &self, Operand::Tensor(rhs)))
            }
        }

        impl $trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                ok(binary(BinaryKind::$trait, self, Operand::Tensor(&rhs)))
            }
        }

        impl $assign<&Tensor> for Tensor {
            #[track_caller]
            fn $assign_method(&mut self, rhs: &Tensor) {
                ok(binary_(BinaryKind::$trait, self, Operand::Tensor(rhs)));
            }
        }

        impl $assign<Tensor> for Tensor {
            #[track_caller]
            fn $assign_method(&mut self, rhs: Tensor) {
                ok(binary_(BinaryKind::$trait, self, Operand::Tensor(&rhs)));
            }
        }
    };
}

tensor_overloads!(Add, add, AddAssign, add_assign);
tensor_overloads!(Sub, sub, SubAssign, sub_assign);
tensor_overloads!(Mul, mul, MulAssign, mul_assign);
tensor_overloads!(Div, div, DivAssign, div_assign);

/// A Rust number usable as the scalar operand of an operator overload
/// (`&x * 2`, `x + 0.5f32`); one generic impl per operator, so that the
/// result type is known before the literal's type is (chains such as
/// `(&x * 2.0).sum()` need no annotations).
pub trait OverloadScalar: Into<Scalar> + Copy {}

macro_rules! overload_scalar {
    ($($s:ty),*) => {$( impl OverloadScalar for $s {} )*};
}
overload_scalar!(
    f64,
    f32,
    half::f16,
    half::bf16,
    i64,
    i32,
    i16,
    i8,
    isize,
    u8,
    u16,
    u32,
    u64,
    usize
);

macro_rules! scalar_overloads {
    ($trait:ident, $method:ident, $assign:ident, $assign_method:ident) => {
        impl<S: OverloadScalar> $trait<S> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: S) -> Tensor {
                ok(binary(BinaryKind::$trait, self, Operand::Scalar(rhs.into())))
            }
        }

        impl<S: OverloadScalar> $trait<S> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: S) -> Tensor {
                ok(binary(BinaryKind::$trait, &self, Operand::Scalar(rhs.into())))
            }
        }

        impl<S: OverloadScalar> $assign<S> for Tensor {
            #[track_caller]
            fn $assign_method(&mut self, rhs: S) {
                ok(binary_(BinaryKind::$trait, self, Operand::Scalar(rhs.into())));
            }
        }
    };
}

scalar_overloads!(Add, add, AddAssign, add_assign);
scalar_overloads!(Sub, sub, SubAssign, sub_assign);
scalar_overloads!(Mul, mul, MulAssign, mul_assign);
scalar_overloads!(Div, div, DivAssign, div_assign);

macro_rules! scalar_lhs_overloads {
    ($($s:ty),*) => {$(
        scalar_lhs_overloads!(@one $s, Add, add);
        scalar_lhs_overloads!(@one $s, Sub, sub);
        scalar_lhs_overloads!(@one $s, Mul, mul);
        scalar_lhs_overloads!(@one $s, Div, div);
    )*};
    (@one $s:ty, $trait:ident, $method:ident) => {
        impl $trait<&Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                ok(binary_scalar_lhs(BinaryKind::$trait, Scalar::from(self), rhs))
            }
        }

        impl $trait<Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                ok(binary_scalar_lhs(BinaryKind::$trait, Scalar::from(self), &rhs))
            }
        }
    };
}

// On the left only f64 and i64, what unsuffixed literals become: with one
// float and one integer type there, `(1.0 - &p).log()` needs no annotation
// (with several, the literal's type, and so the result's, would be
// ambiguous until too late). Other types go on the right: `&g * lr`.
scalar_lhs_overloads!(f64, i64);

impl Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        ok(Tensor::neg(self))
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        ok(Tensor::neg(&self))
    }
}

/// `%`, `&`, `|`, `^`, `<<` and `>>` (and their assignments) between
/// tensors, or with a scalar on the right: `remainder` (Python's `%`) and
/// the bitwise ops and shifts.
macro_rules! math_overloads {
    ($trait:ident, $method:ident, $assign:ident, $assign_method:ident, $kind:ident) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                ok(binary_math(MathKind::$kind, self, Operand::Tensor(rhs)))
            }
        }

        impl $trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                ok(binary_math(MathKind::$kind, &self, Operand::Tensor(&rhs)))
            }
        }

        impl $trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                ok(binary_math(MathKind::$kind, &self, Operand::Tensor(rhs)))
            }
        }

        impl $trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                ok(binary_math(MathKind::$kind, self, Operand::Tensor(&rhs)))
            }
        }

        impl<S: OverloadScalar> $trait<S> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: S) -> Tensor {
                ok(binary_math(MathKind::$kind, self, Operand::Scalar(rhs.into())))
            }
        }

        impl<S: OverloadScalar> $trait<S> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: S) -> Tensor {
                ok(binary_math(MathKind::$kind, &self, Operand::Scalar(rhs.into())))
            }
        }

        impl $assign<&Tensor> for Tensor {
            #[track_caller]
            fn $assign_method(&mut self, rhs: &Tensor) {
                ok(binary_math_(MathKind::$kind, self, Operand::Tensor(rhs)));
            }
        }

        impl $assign<Tensor> for Tensor {
            #[track_caller]
            fn $assign_method(&mut self, rhs: Tensor) {
                ok(binary_math_(MathKind::$kind, self, Operand::Tensor(&rhs)));
            }
        }

        impl<S: OverloadScalar> $assign<S> for Tensor {
            #[track_caller]
            fn $assign_method(&mut self, rhs: S) {
                ok(binary_math_(MathKind::$kind, self, Operand::Scalar(rhs.into())));
            }
        }
    };
}

math_overloads!(Rem, rem, RemAssign, rem_assign, Remainder);
math_overloads!(BitAnd, bitand, BitAndAssign, bitand_assign, BitwiseAnd);
math_overloads!(BitOr, bitor, BitOrAssign, bitor_assign, BitwiseOr);
math_overloads!(BitXor, bitxor, BitXorAssign, bitxor_assign, BitwiseXor);
math_overloads!(Shl, shl, ShlAssign, shl_assign, LeftShift);
math_overloads!(Shr, shr, ShrAssign, shr_assign, RightShift);

/// `!x`: bitwise not of an integer tensor, logical not of a bool one
/// (Python's `~x`); panics for float tensors.
impl Not for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        ok(self.bitwise_not())
    }
}

impl Not for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        ok(self.bitwise_not())
    }
}
