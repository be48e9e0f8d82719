//! More binary pointwise operators: `atan2`, `hypot`, `logaddexp`,
//! `logaddexp2`, `copysign`, `remainder`, `fmod`, the bitwise ops and
//! shifts (with `bitwise_not`), declared as [`BinaryMath`].
//!
//! Dtype rules are PyTorch's: `atan2` and `copysign` promote integer
//! operands to the default float dtype (`binary_float_op`); `hypot` and the
//! `logaddexp`s compute in the common dtype and reject integers, as their
//! CPU kernels do ("`\"hypot_cpu\" not implemented for 'Long'`"); bitwise
//! ops take integers and bools, shifts integers only.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpecs, call_out, call1};
use crate::layout::broadcast_shapes;
use crate::ops::binary::{Rounding, broadcast_spec};
use crate::ops::grad_util::{grad0, sum_to};
use crate::ops::promote::{IntoOperand, Operand, result_type, wrapped_scalar};
use crate::ops::unary::same_layout_spec;
use crate::{DType, Error, Result, Scalar, Tensor};

macro_rules! math_kinds {
    ($($(#[$doc:meta])* $kind:ident, $entry:ident, $name:literal, $differentiable:literal;)*) => {
        /// The operators of [`BinaryMath`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum MathKind {
            $($(#[$doc])* $kind,)*
        }

        $(
            #[doc = concat!("Dispatch table of `", $name, "`.")]
            pub static $entry: OpEntry = if $differentiable {
                OpEntry::differentiable($name)
            } else {
                OpEntry::new($name)
            };
        )*

        /// Every [`MathKind`].
        pub const ALL_MATH: &[MathKind] = &[$(MathKind::$kind,)*];

        impl MathKind {
            /// The operator's dispatch table.
            pub fn entry(self) -> &'static OpEntry {
                match self {
                    $(MathKind::$kind => &$entry,)*
                }
            }

            /// Whether the operator has a derivative.
            pub fn differentiable(self) -> bool {
                match self {
                    $(MathKind::$kind => $differentiable,)*
                }
            }
        }
    };
}

math_kinds! {
    /// `atan2(a, b)`, the angle of the point `(b, a)`.
    Atan2, ATAN2, "atan2", true;
    /// `sqrt(a^2 + b^2)` without overflow.
    Hypot, HYPOT, "hypot", true;
    /// `log(e^a + e^b)`.
    LogAddExp, LOGADDEXP, "logaddexp", true;
    /// `log2(2^a + 2^b)`.
    LogAddExp2, LOGADDEXP2, "logaddexp2", true;
    /// `|a|` with the sign of `b`.
    Copysign, COPYSIGN, "copysign.Tensor", true;
    /// Python's `a % b`: the remainder takes the divisor's sign.
    Remainder, REMAINDER, "remainder.Tensor", true;
    /// C's `fmod`: the remainder takes the dividend's sign.
    Fmod, FMOD, "fmod.Tensor", true;
    /// Bitwise (logical, for bools) and.
    BitwiseAnd, BITWISE_AND, "bitwise_and.Tensor", false;
    /// Bitwise (logical, for bools) or.
    BitwiseOr, BITWISE_OR, "bitwise_or.Tensor", false;
    /// Bitwise (logical, for bools) exclusive or.
    BitwiseXor, BITWISE_XOR, "bitwise_xor.Tensor", false;
    /// `a << b`; a shift by a negative amount or by the width or more gives 0.
    LeftShift, LEFT_SHIFT, "bitwise_left_shift.Tensor", false;
    /// `a >> b`, arithmetic for signed types; a shift by a negative amount
    /// or by the width or more fills with the sign bit (0 for unsigned).
    RightShift, RIGHT_SHIFT, "bitwise_right_shift.Tensor", false;
}

/// What an operator's operands may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MathDomain {
    /// Integer operands are promoted to the default float dtype.
    PromoteToFloat,
    /// Float dtypes only (the common dtype is not promoted).
    FloatOnly,
    /// Any dtype but bool.
    Numeric,
    /// Integers and bool.
    Bitwise,
    /// Integers only.
    Shift,
}

impl MathKind {
    fn domain(self) -> MathDomain {
        use MathKind::*;
        match self {
            Atan2 | Copysign => MathDomain::PromoteToFloat,
            Hypot | LogAddExp | LogAddExp2 => MathDomain::FloatOnly,
            Remainder | Fmod => MathDomain::Numeric,
            BitwiseAnd | BitwiseOr | BitwiseXor => MathDomain::Bitwise,
            LeftShift | RightShift => MathDomain::Shift,
        }
    }

    /// The name PyTorch's CPU kernel dispatch reports in "not implemented
    /// for" errors.
    fn kernel_name(self) -> &'static str {
        use MathKind::*;
        match self {
            Atan2 => "atan2_cpu",
            Hypot => "hypot_cpu",
            LogAddExp => "logaddexp_cpu",
            LogAddExp2 => "logaddexp2_cpu",
            Copysign => "copysign_cpu",
            Remainder => "remainder_cpu",
            Fmod => "fmod_cpu",
            BitwiseAnd => "bitwise_and_cpu",
            BitwiseOr => "bitwise_or_cpu",
            BitwiseXor => "bitwise_xor_cpu",
            LeftShift => "lshift_cpu",
            RightShift => "rshift_cpu",
        }
    }
}

/// An instance of one of the operators of [`MathKind`].
#[derive(Debug, Clone, Copy)]
pub struct BinaryMath {
    /// Which operator.
    pub kind: MathKind,
    /// The second operand is a wrapped Python scalar (the `.Scalar`
    /// overloads, whose nodes are numbered apart: `RemainderBackward0` for
    /// `x % 2`, `RemainderBackward1` for `x % y`).
    pub scalar_rhs: bool,
}

impl BinaryMath {
    /// The dtype `a <op> b` computes in and returns.
    pub fn dtype(&self, a: &Tensor, b: &Tensor) -> DType {
        let common = if a.dtype() == b.dtype() {
            a.dtype()
        } else {
            result_type(&[Operand::Tensor(a), Operand::Tensor(b)])
        };
        self.dtype_of(common)
    }

    fn dtype_of(&self, common: DType) -> DType {
        if self.kind.domain() == MathDomain::PromoteToFloat && !common.is_floating_point() {
            crate::default_dtype()
        } else {
            common
        }
    }
}

/// The "not implemented for" error of `kind`'s kernel on `dt`, if it has none.
fn check_dtype(kind: MathKind, dt: DType) -> Result<()> {
    let ok = match kind.domain() {
        MathDomain::PromoteToFloat | MathDomain::FloatOnly => dt.is_floating_point(),
        MathDomain::Numeric => dt != DType::Bool,
        MathDomain::Bitwise => !dt.is_floating_point(),
        MathDomain::Shift => !dt.is_floating_point() && dt != DType::Bool,
    };
    if ok {
        return Ok(());
    }
    Err(Error::dtype(
        kind.entry().base_name(),
        dt,
        format!(
            "\"{}\" not implemented for '{}'",
            kind.kernel_name(),
            dt.scalar_type_name()
        ),
    ))
}

impl Op for BinaryMath {
    fn entry(&self) -> &'static OpEntry {
        self.kind.entry()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (a, b) = (inputs[0], inputs[1]);
        let name = self.kind.entry().base_name();
        let dt = self.dtype(a, b);
        check_dtype(self.kind, dt)?;
        let shape = broadcast_shapes(name, a.shape(), b.shape())?;
        Ok(smallvec::smallvec![broadcast_spec(&shape, &[a, b], dt)])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn output_differentiable(&self) -> bool {
        self.kind.differentiable()
    }

    fn saves(&self) -> Saves {
        use MathKind::*;
        match self.kind {
            Hypot | Copysign => Saves {
                inputs: 0b11,
                outputs: 1,
            },
            _ => Saves::inputs(0b11),
        }
    }

    fn backward_name(&self) -> String {
        use MathKind::*;
        let n = u8::from(!self.scalar_rhs);
        match self.kind {
            Atan2 => "Atan2Backward0".into(),
            Hypot => "HypotBackward0".into(),
            LogAddExp => "LogaddexpBackward0".into(),
            LogAddExp2 => "Logaddexp2Backward0".into(),
            // copysign.Tensor is numbered 0, copysign.Scalar 1.
            Copysign => format!("CopysignBackward{}", u8::from(self.scalar_rhs)),
            Remainder => format!("RemainderBackward{n}"),
            Fmod => format!("FmodBackward{n}"),
            k => format!("{}Backward0", k.entry().base_name()),
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        use MathKind::*;
        let g = grad0(grads)?;
        let (a, b) = (ctx.input(0)?, ctx.input(1)?);
        let (na, nb) = (ctx.needs_grad(0), ctx.needs_grad(1));
        let (ga, gb) = match self.kind {
            Atan2 => {
                // PyTorch's atan2_backward: where `a² + b²` is 0 (the
                // origin, or both squares underflowing) the gradient is 0.
                let denom = a.mul(&a)?.add(&b.mul(&b)?)?;
                let recip = denom.reciprocal()?.masked_fill(&denom.eq(0.0)?, 0.0)?;
                (
                    na.then(|| g.mul(&b)?.mul(&recip)).transpose()?,
                    nb.then(|| g.mul(&a.neg()?)?.mul(&recip)).transpose()?,
                )
            }
            Hypot => {
                let r = ctx.output(0)?;
                (
                    na.then(|| g.mul(&a)?.div(&r)).transpose()?,
                    nb.then(|| g.mul(&b)?.div(&r)).transpose()?,
                )
            }
            LogAddExp => (
                na.then(|| g.div(&b.sub(&a)?.exp()?.add(1.0)?)).transpose()?,
                nb.then(|| g.div(&a.sub(&b)?.exp()?.add(1.0)?)).transpose()?,
            ),
            LogAddExp2 => (
                na.then(|| g.div(&Tensor::scalar_pow(2.0, &b.sub(&a)?)?.add(1.0)?))
                    .transpose()?,
                nb.then(|| g.div(&Tensor::scalar_pow(2.0, &a.sub(&b)?)?.add(1.0)?))
                    .transpose()?,
            ),
            Copysign => {
                // copysign_tensor_self_backward: g * result / a, 0 where a == 0.
                let ratio = ctx.output(0)?.div(&a)?;
                let ratio = ratio.masked_fill(&a.eq(0.0)?, 0.0)?;
                (
                    na.then(|| g.mul(&ratio)).transpose()?,
                    nb.then(|| g.zeros_like()).transpose()?,
                )
            }
            Remainder | Fmod => {
                let rounding = if self.kind == Remainder {
                    Rounding::Floor
                } else {
                    Rounding::Trunc
                };
                (
                    na.then(|| Ok::<_, Error>(g.clone())).transpose()?,
                    nb.then(|| g.neg()?.mul(&a.div_rounding(&b, rounding)?)).transpose()?,
                )
            }
            _ => return Err(Error::invalid(self.kind.entry().base_name(), "is not differentiable")),
        };
        Ok(vec![
            ga.map(|t| sum_to(&t, ctx.input_shape(0))).transpose()?,
            gb.map(|t| sum_to(&t, ctx.input_shape(1))).transpose()?,
        ])
    }
}

/// The kernel inputs of `a <kind> b`: tensors as they are (the kernel
/// converts them to the compute dtype as it reads), a Python scalar as a
/// 0-d tensor of the result dtype.
fn operands<'a>(op: &BinaryMath, a: &'a Tensor, b: Operand<'a>) -> (Tensor, BinaryMath) {
    match b {
        Operand::Tensor(t) => (t.clone(), *op),
        Operand::Scalar(s) => {
            let dt = op.dtype_of(result_type(&[Operand::Tensor(a), Operand::Scalar(s)]));
            let op = BinaryMath {
                scalar_rhs: true,
                ..*op
            };
            (wrapped_scalar(s, dt), op)
        }
    }
}

/// Runs `a <kind> b`.
pub fn binary_math(kind: MathKind, a: &Tensor, b: Operand) -> Result<Tensor> {
    let op = BinaryMath {
        kind,
        scalar_rhs: false,
    };
    let (y, op) = operands(&op, a, b);
    call1(&op, &[a, &y])
}

/// Runs `a <kind>= b` in place; returns `a`.
pub fn binary_math_(kind: MathKind, a: &Tensor, b: Operand) -> Result<Tensor> {
    let op = BinaryMath {
        kind,
        scalar_rhs: false,
    };
    let (y, op) = operands(&op, a, b);
    call_out(&op, &[a, &y], &[a])?;
    Ok(a.clone())
}

/// Runs `scalar <kind> b` (`torch.remainder(2, x)`, `2 << x`): the scalar
/// becomes a 0-d tensor of the result dtype.
pub fn binary_math_scalar_lhs(kind: MathKind, a: Scalar, b: &Tensor) -> Result<Tensor> {
    let op = BinaryMath {
        kind,
        scalar_rhs: false,
    };
    let dt = op.dtype_of(result_type(&[Operand::Scalar(a), Operand::Tensor(b)]));
    call1(&op, &[&wrapped_scalar(a, dt), b])
}

macro_rules! math_methods {
    ($($(#[$doc:meta])* $method:ident, $inplace:ident, $kind:ident;)*) => {
        /// # More elementwise binary functions
        ///
        /// `atan2`, `hypot`, `logaddexp`, `copysign`, `remainder` (Python's
        /// `%`, also the `%` operator), `fmod`, and the bitwise ops and
        /// shifts (also `&`, `|`, `^`, `<<`, `>>` and `!` on integer and bool
        /// tensors), each with its in-place form; the other operand is a
        /// tensor (broadcast) or a scalar.
        ///
        /// ```
        /// use ferrotorch_core::Tensor;
        /// let a = Tensor::new([-3.0f32, 3.0])?;
        /// assert_eq!(a.remainder(2)?.to_vec::<f32>()?, [1.0, 1.0]);
        /// assert_eq!(a.fmod(2)?.to_vec::<f32>()?, [-1.0, 1.0]);
        /// let m = Tensor::new([0b1100i64, 0b1010])?;
        /// assert_eq!((&m & 0b0110).to_vec::<i64>()?, [0b0100, 0b0010]);
        /// assert_eq!((&m >> 2).to_vec::<i64>()?, [3, 2]);
        /// assert_eq!((!&m).to_vec::<i64>()?, [-13, -11]);
        /// # Ok::<(), ferrotorch_core::Error>(())
        /// ```
        impl Tensor {
            $(
                $(#[$doc])*
                pub fn $method<'a>(&self, other: impl IntoOperand<'a>) -> Result<Tensor> {
                    binary_math(MathKind::$kind, self, other.into_operand())
                }

                #[doc = concat!("In-place [`Tensor::", stringify!($method), "`]; returns `self`.")]
                pub fn $inplace<'a>(&self, other: impl IntoOperand<'a>) -> Result<Tensor> {
                    binary_math_(MathKind::$kind, self, other.into_operand())
                }
            )*

            /// `torch.remainder(scalar, other)`: Python's `scalar % other`.
            pub fn scalar_remainder(scalar: impl Into<Scalar>, other: &Tensor) -> Result<Tensor> {
                binary_math_scalar_lhs(MathKind::Remainder, scalar.into(), other)
            }

            /// Bitwise not (logical not for bools): `~x` in Python, `!x` here.
            /// Errors for float tensors.
            pub fn bitwise_not(&self) -> Result<Tensor> {
                call1(&BitwiseNot, &[self])
            }

            /// In-place [`Tensor::bitwise_not`]; returns `self`.
            pub fn bitwise_not_(&self) -> Result<Tensor> {
                call_out(&BitwiseNot, &[self], &[self])?;
                Ok(self.clone())
            }
        }
    };
}

math_methods! {
    /// `atan2(self, other)` elementwise, in radians; integers are promoted to float.
    atan2, atan2_, Atan2;
    /// `sqrt(self^2 + other^2)`, for float tensors.
    hypot, hypot_, Hypot;
    /// `log(e^self + e^other)`, for float tensors.
    logaddexp, logaddexp_, LogAddExp;
    /// `log2(2^self + 2^other)`, for float tensors.
    logaddexp2, logaddexp2_, LogAddExp2;
    /// `|self|` with the sign of `other` (including the sign of a zero).
    copysign, copysign_, Copysign;
    /// Python's modulus: `self - floor(self / other) * other`, with the sign
    /// of `other`. Errors on integer division by zero.
    remainder, remainder_, Remainder;
    /// C's `fmod`: the remainder with the sign of `self`. Errors on integer
    /// division by zero.
    fmod, fmod_, Fmod;
    /// Bitwise and of integer or bool tensors.
    bitwise_and, bitwise_and_, BitwiseAnd;
    /// Bitwise or of integer or bool tensors.
    bitwise_or, bitwise_or_, BitwiseOr;
    /// Bitwise exclusive or of integer or bool tensors.
    bitwise_xor, bitwise_xor_, BitwiseXor;
    /// `self << other` for integer tensors.
    bitwise_left_shift, bitwise_left_shift_, LeftShift;
    /// `self >> other` for integer tensors.
    bitwise_right_shift, bitwise_right_shift_, RightShift;
}

/// Dispatch table of `bitwise_not`.
pub static BITWISE_NOT: OpEntry = OpEntry::new("bitwise_not");

/// `~x`: bitwise not of an integer tensor, logical not of a bool tensor.
#[derive(Debug, Clone, Copy)]
pub struct BitwiseNot;

impl Op for BitwiseNot {
    fn entry(&self) -> &'static OpEntry {
        &BITWISE_NOT
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        if x.dtype().is_floating_point() {
            return Err(Error::dtype(
                "bitwise_not",
                x.dtype(),
                format!(
                    "\"bitwise_not_cpu\" not implemented for '{}'",
                    x.dtype().scalar_type_name()
                ),
            ));
        }
        Ok(smallvec::smallvec![same_layout_spec(x, x.dtype())])
    }

    fn alias_safe(&self) -> bool {
        true
    }
}
