//! Binary pointwise operators (arithmetic, comparisons, logical) and `where`.
//!
//! Front ends broadcast nothing themselves: they promote both operands to
//! the common dtype (`torch.result_type`) and dispatch; the shape rule
//! broadcasts, and kernels see inputs of one dtype.

use std::borrow::Cow;

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call_out, call1};
use crate::layout::{broadcast_shapes, dims_of};
use crate::ops::activation_backward::{ActivationBackward, ActivationKind};
use crate::ops::grad_util::{full_or_half, grad0, sum_to};
use crate::ops::promote::{IntoOperand, Operand, result_type, wrapped_scalar};
use crate::{DType, Error, Result, Scalar, Tensor};

/// How `div` rounds (`rounding_mode` of `torch.div`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rounding {
    /// True division; integers are promoted to float.
    #[default]
    None,
    /// Rounds the quotient toward zero (C-style integer division).
    Trunc,
    /// Rounds the quotient down (Python's `//`).
    Floor,
}

macro_rules! binary_kinds {
    ($($(#[$doc:meta])* $kind:ident, $entry:ident, $name:literal;)*) => {
        /// The binary pointwise operators.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum BinaryKind {
            $($(#[$doc])* $kind,)*
        }

        $(
            #[doc = concat!("Dispatch table of `", $name, "`.")]
            pub static $entry: OpEntry = if binary_differentiable($name) {
                OpEntry::differentiable($name)
            } else {
                OpEntry::new($name)
            };
        )*

        /// Every binary kind.
        pub const ALL_BINARY: &[BinaryKind] = &[$(BinaryKind::$kind,)*];

        impl BinaryKind {
            /// The operator's dispatch table.
            pub fn entry(self) -> &'static OpEntry {
                match self {
                    $(BinaryKind::$kind => &$entry,)*
                }
            }
        }
    };
}

binary_kinds! {
    /// `a + alpha * b`.
    Add, ADD, "add.Tensor";
    /// `a - alpha * b`.
    Sub, SUB, "sub.Tensor";
    /// `a * b`.
    Mul, MUL, "mul.Tensor";
    /// `a / b` with a rounding mode (`div.Tensor_mode`, which also runs
    /// PyTorch's `div.Tensor`, no rounding).
    Div, DIV, "div.Tensor_mode";
    /// `a ^ b` (a scalar exponent is [`crate::ops::PowScalar`]).
    Pow, POW, "pow.Tensor_Tensor";
    /// Elementwise maximum (NaN propagates).
    Maximum, MAXIMUM, "maximum";
    /// Elementwise minimum (NaN propagates).
    Minimum, MINIMUM, "minimum";
    /// `a == b`.
    Eq, EQ, "eq.Tensor";
    /// `a != b`.
    Ne, NE, "ne.Tensor";
    /// `a < b`.
    Lt, LT, "lt.Tensor";
    /// `a <= b`.
    Le, LE, "le.Tensor";
    /// `a > b`.
    Gt, GT, "gt.Tensor";
    /// `a >= b`.
    Ge, GE, "ge.Tensor";
    /// Both nonzero.
    LogicalAnd, LOGICAL_AND, "logical_and";
    /// Either nonzero.
    LogicalOr, LOGICAL_OR, "logical_or";
    /// Exactly one nonzero.
    LogicalXor, LOGICAL_XOR, "logical_xor";
}

const fn binary_differentiable(name: &str) -> bool {
    matches!(
        name.as_bytes(),
        b"add.Tensor"
            | b"sub.Tensor"
            | b"mul.Tensor"
            | b"div.Tensor_mode"
            | b"pow.Tensor_Tensor"
            | b"maximum"
            | b"minimum"
            // Comparisons have zero gradients (PyTorch's `eq_: self:
            // zeros_like(self)`): only their in-place forms on a float
            // tensor that requires grad record a node.
            | b"eq.Tensor"
            | b"ne.Tensor"
            | b"lt.Tensor"
            | b"le.Tensor"
            | b"gt.Tensor"
            | b"ge.Tensor"
    )
}

impl BinaryKind {
    /// Whether the result is bool whatever the inputs.
    pub fn is_predicate(self) -> bool {
        use BinaryKind::*;
        matches!(self, Eq | Ne | Lt | Le | Gt | Ge | LogicalAnd | LogicalOr | LogicalXor)
    }

    fn is_logical(self) -> bool {
        matches!(
            self,
            BinaryKind::LogicalAnd | BinaryKind::LogicalOr | BinaryKind::LogicalXor
        )
    }
}

/// A binary pointwise operator instance.
#[derive(Debug, Clone, Copy)]
pub struct Binary {
    /// Which operator.
    pub kind: BinaryKind,
    /// Multiplier of the second operand (add and sub).
    pub alpha: Scalar,
    /// Rounding of div.
    pub rounding: Rounding,
    /// The first operand is a wrapped Python scalar (`2 - x` is PyTorch's
    /// `rsub`, node `RsubBackward1`; `2 ** x` is `pow.Scalar`, node
    /// `PowBackward2`).
    pub scalar_lhs: bool,
    /// The second operand is a wrapped Python scalar (the `.Scalar`
    /// overloads: `x.gt_(2)` records `GtBackward0`, `x.gt_(t)` `GtBackward1`).
    pub scalar_rhs: bool,
    /// The first operand's value when it is a wrapped Python scalar:
    /// `pow.Scalar`'s backward takes the log of the scalar itself, in
    /// double precision, as PyTorch does.
    pub lhs_value: Option<Scalar>,
    /// `(compute, result)` dtypes when the kernel computes in a dtype other
    /// than the result's (`None`: the operands' result type, computed in).
    /// An f16/bf16 tensor times a Python scalar computes in f32 with the
    /// scalar unrounded, as PyTorch's CPU kernels do.
    pub compute: Option<(DType, DType)>,
}

impl Binary {
    /// The operator with default attributes.
    pub fn new(kind: BinaryKind) -> Self {
        Binary {
            kind,
            alpha: Scalar::Int(1),
            rounding: Rounding::None,
            scalar_lhs: false,
            scalar_rhs: false,
            lhs_value: None,
            compute: None,
        }
    }

    /// The dtypes of a call on `a` and `b`: `(compute, result)`. The
    /// operands may have any dtypes: the kernel converts each element to the
    /// compute dtype as it reads it (PyTorch's TensorIterator casts), so a
    /// mixed-dtype call needs no casting copy and records one node.
    pub fn dtypes(&self, a: &Tensor, b: &Tensor) -> (DType, DType) {
        if let Some((compute, result)) = self.compute {
            return (compute, if self.kind.is_predicate() { DType::Bool } else { result });
        }
        let common = if a.dtype() == b.dtype() {
            a.dtype()
        } else {
            result_type(&[Operand::Tensor(a), Operand::Tensor(b)])
        };
        let result = if self.kind.is_logical() {
            common
        } else {
            compute_dtype(self, common)
        };
        (result, if self.kind.is_predicate() { DType::Bool } else { result })
    }
}

impl Op for Binary {
    fn entry(&self) -> &'static OpEntry {
        self.kind.entry()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (a, b) = (inputs[0], inputs[1]);
        let name = self.kind.entry().base_name();
        let (dt, out_dt) = self.dtypes(a, b);
        // alpha is converted to the computation's dtype, as in PyTorch.
        if matches!(self.kind, BinaryKind::Add | BinaryKind::Sub) && self.alpha != Scalar::Int(1) {
            // PyTorch's alpha_check, against the computation's dtype.
            if matches!(self.alpha, Scalar::Bool(_)) && dt != DType::Bool {
                return Err(Error::invalid(name, "Boolean alpha only supported for Boolean results"));
            }
            if self.alpha.is_float() && !dt.is_floating_point() {
                return Err(Error::invalid(
                    name,
                    "for integral input tensors, argument alpha must not be a floating point number",
                ));
            }
            self.alpha.check_fits(name, dt)?;
        }
        match self.kind {
            BinaryKind::Sub if dt == DType::Bool => {
                return Err(Error::dtype(
                    name,
                    dt,
                    "subtraction with two bool tensors is not supported; use logical_xor",
                ));
            }
            BinaryKind::Div | BinaryKind::Pow if dt == DType::Bool => {
                return Err(Error::dtype(name, dt, "not supported for bool tensors"));
            }
            _ => {}
        }
        // Equal shapes and scalar operands (most calls) need no broadcasting.
        let spec = if crate::layout::same_dims(a.shape(), b.shape()) || b.ndim() == 0 {
            broadcast_spec(a.shape(), &[a, b], out_dt)
        } else if a.ndim() == 0 {
            broadcast_spec(b.shape(), &[a, b], out_dt)
        } else {
            broadcast_spec(&broadcast_shapes(name, a.shape(), b.shape())?, &[a, b], out_dt)
        };
        Ok(smallvec::smallvec![spec])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn output_differentiable(&self) -> bool {
        !self.kind.is_logical()
    }

    fn saves(&self) -> Saves {
        self.saves_for(0b11)
    }

    fn saves_for(&self, needs: u64) -> Saves {
        let need_b = needs >> 1 & 1;
        match self.kind {
            BinaryKind::Add | BinaryKind::Sub => Saves::NONE,
            k if k.is_predicate() => Saves::NONE,
            BinaryKind::Div if self.rounding != Rounding::None => Saves::NONE,
            // grad_a = g * b, grad_b = g * a.
            BinaryKind::Mul => Saves::cross(needs),
            // grad_a = g / b, grad_b = -g * a / b^2.
            BinaryKind::Div => Saves::inputs(need_b | 0b10),
            // PyTorch's pow_backward_self reads a and b, pow_backward_exponent
            // the result too; PyTorch saves outputs whatever is needed.
            BinaryKind::Pow => Saves {
                inputs: 0b11,
                outputs: 1,
            },
            _ => Saves::inputs(0b11),
        }
    }

    fn backward_name(&self) -> String {
        match self.kind {
            BinaryKind::Pow if self.scalar_lhs => "PowBackward2".into(),
            BinaryKind::Sub if self.scalar_lhs => "RsubBackward1".into(),
            BinaryKind::Pow => "PowBackward1".into(),
            BinaryKind::Div if self.rounding != Rounding::None => "DivBackward2".into(),
            // `x.gt_(2)` is `gt_.Scalar` (GtBackward0), `x.gt_(t)` `gt_.Tensor` (GtBackward1).
            k if k.is_predicate() => {
                let n = k.entry().base_name();
                format!(
                    "{}{}Backward{}",
                    n[..1].to_uppercase(),
                    &n[1..],
                    u8::from(!self.scalar_rhs)
                )
            }
            k => {
                let n = k.entry().base_name();
                let mut c = n.chars();
                let first = c
                    .next()
                    .map(|f| f.to_uppercase().collect::<String>())
                    .unwrap_or_default();
                format!("{first}{}Backward0", c.as_str())
            }
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let (sa, sb) = (ctx.input_shape(0), ctx.input_shape(1));
        let alpha = self.alpha.to_f64();
        let (ga, gb) = match self.kind {
            BinaryKind::Add | BinaryKind::Sub => {
                let scale = if self.kind == BinaryKind::Add { alpha } else { -alpha };
                let gb = if !ctx.needs_grad(1) {
                    None
                } else if scale == 1.0 {
                    Some(g.clone())
                } else {
                    Some(g.mul(scale)?)
                };
                (Some(g), gb)
            }
            BinaryKind::Mul if ctx.needs_grad(0) && ctx.needs_grad(1) => {
                let (a, b) = (ctx.input(0)?, ctx.input(1)?);
                let same = a.storage().same(b.storage()) && a.dtype() == b.dtype() && a.layout() == b.layout();
                if same {
                    // `x * x`: both gradients are `g * x`. With both going to
                    // one place (one tensor), their sum `g*x + g*x` comes
                    // from one fused kernel, the bits of the two products
                    // the engine would add; else the product is made once.
                    // With create_graph, the two products as PyTorch records
                    // them (the gradient's node is AddBackward0 of two
                    // MulBackward0).
                    if ctx.same_edge(0, 1) && g.shape() == a.shape() && !crate::autograd::mode::is_grad_enabled() {
                        let kind = ActivationKind::Square;
                        return Ok(vec![Some(call1(&ActivationBackward(kind), &[&g, &a])?), None]);
                    }
                    let gx = sum_to(&g.mul(&a)?, sa)?;
                    return Ok(vec![Some(gx.clone()), Some(gx)]);
                }
                (Some(g.mul(&b)?), Some(g.mul(&a)?))
            }
            // One gradient: only the other factor was saved.
            BinaryKind::Mul => (
                ctx.needs_grad(0).then(|| g.mul(&ctx.input(1)?)).transpose()?,
                ctx.needs_grad(1).then(|| g.mul(&ctx.input(0)?)).transpose()?,
            ),
            BinaryKind::Div if self.rounding != Rounding::None => (Some(g.zeros_like()?), Some(g.zeros_like()?)),
            BinaryKind::Div => {
                let b = ctx.input(1)?;
                let ga = g.div(&b)?;
                // PyTorch's div_tensor_other_backward: -g * ((a / b) / b).
                let gb = if ctx.needs_grad(1) {
                    Some(g.neg()?.mul(&ctx.input(0)?.div(&b)?.div(&b)?)?)
                } else {
                    None
                };
                (Some(ga), gb)
            }
            BinaryKind::Pow => {
                let (a, b) = (ctx.input(0)?, ctx.input(1)?);
                // PyTorch's pow_backward_self: where(b == 0, 0, g * b * a^(b-1)).
                let ga = if ctx.needs_grad(0) && self.lhs_value.is_none() {
                    let d = g.mul(&b.mul(&a.pow(&b.sub(1.0)?)?)?)?;
                    Some(d.masked_fill(&b.eq(0.0)?, 0.0)?)
                } else {
                    None
                };
                let gb = if ctx.needs_grad(1) {
                    Some(pow_backward_exponent(&g, &a, &b, &ctx.output(0)?, self.lhs_value)?)
                } else {
                    None
                };
                (ga, gb)
            }
            BinaryKind::Maximum | BinaryKind::Minimum => {
                let (a, b) = (ctx.input(0)?, ctx.input(1)?);
                let (a_loses, b_loses) = if self.kind == BinaryKind::Maximum {
                    (a.lt(&b)?, a.gt(&b)?)
                } else {
                    (a.gt(&b)?, a.lt(&b)?)
                };
                // As PyTorch (`where(a == b, g / 2, g).masked_fill_(a < b,
                // 0)`): ties share the gradient equally, and where a NaN is
                // involved (no comparison holds) both get all of it.
                let tie = a.eq(&b)?;
                let (ga, gb) = (
                    full_or_half(&g, &a_loses.logical_or(&tie)?.logical_not()?, &tie)?,
                    full_or_half(&g, &b_loses.logical_or(&tie)?.logical_not()?, &tie)?,
                );
                (Some(ga), Some(gb))
            }
            k if k.is_predicate() && !k.is_logical() => (Some(g.zeros_like()?), Some(g.zeros_like()?)),
            _ => return Err(Error::invalid(self.kind.entry().base_name(), "is not differentiable")),
        };
        // Inputs that need no gradient get none (skipping their reduction).
        Ok(vec![
            ga.filter(|_| ctx.needs_grad(0)).map(|t| sum_to(&t, sa)).transpose()?,
            gb.filter(|_| ctx.needs_grad(1)).map(|t| sum_to(&t, sb)).transpose()?,
        ])
    }
}

/// Output spec of a broadcasting pointwise op: contiguous unless the first
/// input with the full shape is dense but permuted, whose memory order the
/// output then follows (as PyTorch's TensorIterator does).
pub(crate) fn broadcast_spec(shape: &[usize], inputs: &[&Tensor], dtype: DType) -> OutSpec {
    let strides = inputs
        .iter()
        .find(|t| crate::layout::same_dims(t.shape(), shape))
        .filter(|t| !t.is_contiguous() && t.layout().is_non_overlapping_and_dense())
        .map(|t| dims_of(t.strides()));
    // Built in one go (no spec moved and patched: this runs on every op).
    OutSpec {
        shape: dims_of(shape),
        dtype,
        strides,
    }
}

/// The dtype a binary op computes in, from the promoted dtype of its operands.
fn compute_dtype(op: &Binary, promoted: DType) -> DType {
    match op.kind {
        BinaryKind::Div if op.rounding == Rounding::None && !promoted.is_floating_point() => crate::default_dtype(),
        _ => promoted,
    }
}

/// The kernel inputs of `a <op> b`: tensors as they are (the kernel
/// converts them to the compute dtype in its loop), Python scalars wrapped
/// as 0-d tensors of the common dtype; and `op` with its compute dtype set
/// where it is not the result's.
fn prepare<'a>(op: Binary, a: Operand<'a>, b: Operand<'a>) -> Result<(Cow<'a, Tensor>, Cow<'a, Tensor>, Binary)> {
    let input = |o: &Operand<'a>, dt: DType| -> Cow<'a, Tensor> {
        match *o {
            Operand::Tensor(t) => Cow::Borrowed(t),
            Operand::Scalar(s) => Cow::Owned(wrapped_scalar(s, dt)),
        }
    };
    if op.kind.is_logical() {
        // Logical ops look at truth values, of the operands converted to
        // their common dtype first (1e-8 is false next to an f16 tensor):
        // the kernel computes in the common dtype.
        let dt = result_type(&[a.clone(), b.clone()]);
        return Ok((input(&a, dt), input(&b, dt), op));
    }
    let is_bool = |o: &Operand| match o {
        Operand::Tensor(t) => t.dtype() == DType::Bool,
        Operand::Scalar(s) => matches!(s, Scalar::Bool(_)),
    };
    if op.kind == BinaryKind::Sub && (is_bool(&a) || is_bool(&b)) {
        return Err(Error::dtype(
            "sub",
            DType::Bool,
            "subtraction, the `-` operator, with a bool tensor is not supported; use `~` or logical_not() instead",
        ));
    }
    let dt = compute_dtype(&op, result_type(&[a.clone(), b.clone()]));
    // As PyTorch's CPU mul/div kernels for f16/bf16: a one-element second
    // operand of another dtype (a Python scalar, a 0-d or one-element tensor)
    // keeps its value in f32 instead of being rounded to 16 bits first. A
    // first operand is rounded, as are the operands of add and sub.
    let wide_scalar = match &b {
        Operand::Tensor(t) => t.numel() == 1 && t.dtype() != dt,
        Operand::Scalar(_) => true,
    };
    let arith = matches!(op.kind, BinaryKind::Mul | BinaryKind::Div);
    if arith && matches!(dt, DType::F16 | DType::BF16) && wide_scalar {
        let op = Binary {
            compute: Some((DType::F32, dt)),
            ..op
        };
        return Ok((input(&a, dt), input(&b, DType::F32), op));
    }
    Ok((input(&a, dt), input(&b, dt), op))
}

/// Runs `a <kind> b`.
pub fn binary(kind: BinaryKind, a: &Tensor, b: Operand) -> Result<Tensor> {
    binary_op(Binary::new(kind), a, b)
}

/// The second kernel input of the common case, which needs no promotion:
/// an f32/f64 tensor with a tensor of its own dtype, or with a number
/// (`None` for every other case, which goes through [`prepare`]).
fn unpromoted_input<'a>(op: &Binary, a: &Tensor, b: &Operand<'a>) -> Option<Cow<'a, Tensor>> {
    if op.kind.is_logical() || !matches!(a.dtype(), DType::F32 | DType::F64) {
        return None;
    }
    match *b {
        Operand::Tensor(t) if t.dtype() == a.dtype() => Some(Cow::Borrowed(t)),
        Operand::Scalar(Scalar::Float(_) | Scalar::Int(_)) => b.to_input(a.dtype()).ok().map(Cow::Owned),
        _ => None,
    }
}

fn binary_op(op: Binary, a: &Tensor, b: Operand) -> Result<Tensor> {
    if let Some(y) = unpromoted_input(&op, a, &b) {
        return call1(&op, &[a, &y]);
    }
    let (x, y, op) = prepare(op, Operand::Tensor(a), b)?;
    call1(&op, &[&x, &y])
}

/// PyTorch's pow_backward_exponent: `g * where(a == 0 & b >= 0, 0, result *
/// log(a))`, the log taken in the operands' promoted dtype (an in-place
/// result may be narrower); for a scalar base (`2 **
/// x`), of the scalar itself in double precision, masked only when it is a
/// numeric 0 (PyTorch's `Scalar::equal(0.0)` is false for `False`, whose
/// gradient is then `0 * log(0)`, NaN).
fn pow_backward_exponent(g: &Tensor, a: &Tensor, b: &Tensor, result: &Tensor, lhs: Option<Scalar>) -> Result<Tensor> {
    let (d, zero_where) = match lhs {
        Some(base) => {
            let v = base.to_f64();
            let d = result.mul(v.ln())?;
            let numeric_zero = v == 0.0 && !matches!(base, Scalar::Bool(_));
            (d, numeric_zero.then(|| b.ge(0.0)).transpose()?)
        }
        None => {
            let promoted = result_type(&[Operand::Tensor(a), Operand::Tensor(b)]);
            let d = result.mul(&a.to_dtype(promoted)?.log()?)?;
            (d, Some(a.eq(0.0)?.logical_and(&b.ge(0.0)?)?))
        }
    };
    let d = match zero_where {
        Some(m) => d.masked_fill(&m, 0.0)?,
        None => d,
    };
    g.mul(&d)
}

/// Runs `scalar <kind> b` (e.g. `2 ** x`) as Python's reflected operators
/// do: `s / x` is `x.reciprocal() * s` (`__rtruediv__`, node `MulBackward0`,
/// and its rounding), `s - x` is `rsub` and `s ** x` is `pow.Scalar`.
pub fn binary_scalar_lhs(kind: BinaryKind, a: Scalar, b: &Tensor) -> Result<Tensor> {
    match kind {
        BinaryKind::Div => return b.reciprocal()?.mul(a),
        // `__radd__` / `__rmul__`: the tensor is the first operand (which
        // decides, e.g., that a Python scalar keeps f32 in an f16 product).
        BinaryKind::Add | BinaryKind::Mul => return binary(kind, b, Operand::Scalar(a)),
        _ => {}
    }
    let op = Binary {
        scalar_lhs: true,
        lhs_value: Some(a),
        ..Binary::new(kind)
    };
    let (x, y, op) = prepare(op, Operand::Scalar(a), Operand::Tensor(b))?;
    call1(&op, &[&x, &y])
}

/// Runs `a <kind>= b` in place.
pub fn binary_(kind: BinaryKind, a: &Tensor, b: Operand) -> Result<Tensor> {
    binary_op_(Binary::new(kind), a, b)
}

fn binary_op_(op: Binary, a: &Tensor, b: Operand) -> Result<Tensor> {
    let op = Binary {
        scalar_rhs: matches!(b, Operand::Scalar(_)),
        ..op
    };
    if let Some(y) = unpromoted_input(&op, a, &b) {
        call_out(&op, &[a, &y], &[a])?;
        return Ok(a.clone());
    }
    let (x, y, op) = prepare(op, Operand::Tensor(a), b)?;
    call_out(&op, &[&x, &y], &[a])?;
    Ok(a.clone())
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Tensor(t)
    }
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $method:ident, $inplace:ident, $kind:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                pub fn $method<'a>(&self, other: impl IntoOperand<'a>) -> Result<Tensor> {
                    binary(BinaryKind::$kind, self, other.into_operand())
                }

                #[doc = concat!("In-place `", stringify!($method), "`; returns `self`.")]
                pub fn $inplace<'a>(&self, other: impl IntoOperand<'a>) -> Result<Tensor> {
                    binary_(BinaryKind::$kind, self, other.into_operand())
                }
            )*
        }
    };
}

binary_methods! {
    /// `self + other` (a tensor or a scalar), broadcasting and promoting.
    add, add_, Add;
    /// `self - other`.
    sub, sub_, Sub;
    /// `self * other`.
    mul, mul_, Mul;
    /// `self / other` (true division; integers give floats).
    div, div_, Div;
    /// Elementwise maximum; NaN propagates.
    maximum, maximum_, Maximum;
    /// Elementwise minimum; NaN propagates.
    minimum, minimum_, Minimum;
    /// `self == other` as bool.
    eq, eq_, Eq;
    /// `self != other` as bool.
    ne, ne_, Ne;
    /// `self < other` as bool.
    lt, lt_, Lt;
    /// `self <= other` as bool.
    le, le_, Le;
    /// `self > other` as bool.
    gt, gt_, Gt;
    /// `self >= other` as bool.
    ge, ge_, Ge;
    /// Elementwise logical and of truth values.
    logical_and, logical_and_, LogicalAnd;
    /// Elementwise logical or of truth values.
    logical_or, logical_or_, LogicalOr;
    /// Elementwise logical xor of truth values.
    logical_xor, logical_xor_, LogicalXor;
}

/// # Arithmetic and comparisons
///
/// Broadcasting binary ops with PyTorch's type promotion. The operators
/// (`&a + &b`, `x * 2`, `w -= &g`) panic on error and point at the caller's
/// line; these methods are their `Result` twins.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let a = Tensor::new([1.0f32, 2.0])?;
/// let b = Tensor::new([3.0f32, 4.0])?;
/// assert_eq!((&a + &b).to_vec::<f32>()?, [4.0, 6.0]);
/// assert_eq!(a.mul(&b)?.to_vec::<f32>()?, [3.0, 8.0]);
/// assert_eq!(a.lt(&b)?.to_vec::<bool>()?, [true, true]);
/// assert_eq!(a.maximum(&b)?.to_vec::<f32>()?, [3.0, 4.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `self + alpha * other` (`torch.add(input, other, alpha=alpha)`).
    pub fn add_scaled<'a>(&self, other: impl IntoOperand<'a>, alpha: impl Into<Scalar>) -> Result<Tensor> {
        binary_op(alpha_op(BinaryKind::Add, alpha.into()), self, other.into_operand())
    }

    /// In-place [`Tensor::add_scaled`].
    pub fn add_scaled_<'a>(&self, other: impl IntoOperand<'a>, alpha: impl Into<Scalar>) -> Result<Tensor> {
        binary_op_(alpha_op(BinaryKind::Add, alpha.into()), self, other.into_operand())
    }

    /// `self - alpha * other`.
    pub fn sub_scaled<'a>(&self, other: impl IntoOperand<'a>, alpha: impl Into<Scalar>) -> Result<Tensor> {
        binary_op(alpha_op(BinaryKind::Sub, alpha.into()), self, other.into_operand())
    }

    /// `self / other` rounded as `rounding` says (`torch.div(..., rounding_mode=...)`).
    pub fn div_rounding<'a>(&self, other: impl IntoOperand<'a>, rounding: Rounding) -> Result<Tensor> {
        let op = Binary {
            rounding,
            ..Binary::new(BinaryKind::Div)
        };
        binary_op(op, self, other.into_operand())
    }

    /// In-place [`Tensor::div_rounding`].
    pub fn div_rounding_<'a>(&self, other: impl IntoOperand<'a>, rounding: Rounding) -> Result<Tensor> {
        let op = Binary {
            rounding,
            ..Binary::new(BinaryKind::Div)
        };
        binary_op_(op, self, other.into_operand())
    }

    /// Elementwise logical not, as bool.
    pub fn logical_not(&self) -> Result<Tensor> {
        self.eq(Scalar::Int(0))
    }

    /// In-place [`Tensor::logical_not`]: 1 where `self` is 0, else 0, in
    /// `self`'s dtype (`x.logical_not_()`); returns `self`.
    pub fn logical_not_(&self) -> Result<Tensor> {
        self.eq_(Scalar::Int(0))
    }

    /// `where(condition, self, other)`: `self` where `condition` holds, else `other`.
    pub fn where_cond<'a>(&self, condition: &Tensor, other: impl IntoOperand<'a>) -> Result<Tensor> {
        where_(condition, Operand::Tensor(self), other.into_operand())
    }

    /// Fills the elements where `mask` holds with `value` (`masked_fill`);
    /// `mask` broadcasts to `self`.
    pub fn masked_fill(&self, mask: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let value = value.into();
        check_masked_fill(self, mask, value, false)?;
        call1(&crate::ops::composite::CompositeOp::MaskedFill { value }, &[self, mask])
    }

    /// In-place [`Tensor::masked_fill`] (node `MaskedFillBackward0`).
    ///
    /// On an expanded tensor (dims of stride 0) it fills, as PyTorch's kernel
    /// (which writes only where the mask holds), every element that one of
    /// its positions where `mask` holds refers to.
    pub fn masked_fill_(&self, mask: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let value = value.into();
        check_masked_fill(self, mask, value, true)?;
        if self.layout().has_internal_overlap() {
            let expanded: Vec<usize> = (0..self.ndim())
                .filter(|&d| self.shape()[d] > 1 && self.strides()[d] == 0)
                .collect();
            let mut base = self.clone();
            for &d in &expanded {
                base = base.narrow(d as i64, 0, 1)?;
            }
            let dims: Vec<i64> = expanded.iter().map(|&d| d as i64).collect();
            let any = mask.expand(self.shape())?.any_dim(dims.as_slice(), true)?;
            base.masked_fill_(&any, value)?;
            return Ok(self.clone());
        }
        call_out(
            &crate::ops::composite::CompositeOp::MaskedFill { value },
            &[self, mask],
            &[self],
        )?;
        Ok(self.clone())
    }
}

/// `masked_fill`'s checks: a bool mask that broadcasts with `x` (to `x`'s
/// shape when it is written in place; else the result has the broadcast
/// shape, as PyTorch's), a value that fits x's dtype.
fn check_masked_fill(x: &Tensor, mask: &Tensor, value: Scalar, inplace: bool) -> Result<()> {
    if mask.dtype() != DType::Bool {
        return Err(Error::dtype("masked_fill", mask.dtype(), "mask must be a bool tensor"));
    }
    let shape = broadcast_shapes("masked_fill", x.shape(), mask.shape())?;
    if inplace && shape.as_slice() != x.shape() {
        return Err(Error::shape(
            "masked_fill",
            x.shape(),
            mask.shape(),
            "mask must broadcast to the input",
        ));
    }
    value.check_fits("masked_fill", x.dtype())
}

/// `kind` with `alpha` (checked against the computation's dtype by `infer`).
fn alpha_op(kind: BinaryKind, alpha: Scalar) -> Binary {
    Binary {
        alpha,
        ..Binary::new(kind)
    }
}

/// Dispatch table of `where.self`.
pub static WHERE: OpEntry = OpEntry::differentiable("where.self");

/// `where(condition, x, y)`, with inputs `[condition, x, y]`.
#[derive(Debug, Clone, Copy)]
pub struct Where;

impl Op for Where {
    fn entry(&self) -> &'static OpEntry {
        &WHERE
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (c, x, y) = (inputs[0], inputs[1], inputs[2]);
        // PyTorch also takes a uint8 condition (deprecated there): nonzero
        // is true, converted as the kernel reads it.
        if !matches!(c.dtype(), DType::Bool | DType::U8) {
            return Err(Error::dtype(
                "where",
                c.dtype(),
                "expected condition to be a boolean tensor",
            ));
        }
        let s = broadcast_shapes("where", c.shape(), x.shape())?;
        let s = broadcast_shapes("where", &s, y.shape())?;
        Ok(smallvec::smallvec![broadcast_spec(&s, &[x, y], where_dtype(x, y))])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i > 0
    }

    fn saves(&self) -> Saves {
        Saves::inputs(1)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let c = ctx.input(0)?;
        let zero = Tensor::scalar_tensor(Scalar::Int(0), g.dtype());
        let gx = where_(&c, Operand::Tensor(&g), Operand::Tensor(&zero))?;
        let gy = where_(&c, Operand::Tensor(&zero), Operand::Tensor(&g))?;
        Ok(vec![
            None,
            Some(sum_to(&gx, ctx.input_shape(1))?),
            Some(sum_to(&gy, ctx.input_shape(2))?),
        ])
    }
}

/// The result dtype of `where` on tensors `x` and `y` (which the kernel
/// converts to it as it reads them).
pub(crate) fn where_dtype(x: &Tensor, y: &Tensor) -> DType {
    if x.dtype() == y.dtype() {
        x.dtype()
    } else {
        result_type(&[Operand::Tensor(x), Operand::Tensor(y)])
    }
}

/// `torch.where(condition, x, y)`: elements of `x` where `condition`, else of `y`.
pub fn where_(condition: &Tensor, x: Operand, y: Operand) -> Result<Tensor> {
    let dt = result_type(&[x.clone(), y.clone()]);
    // Tensors go in as they are (one WhereBackward0 node, no casting copy);
    // scalars as 0-d tensors of the result dtype.
    let input = |o: &Operand<'_>| -> Result<Tensor> {
        match o {
            Operand::Tensor(t) => Ok((*t).clone()),
            Operand::Scalar(s) => Ok(wrapped_scalar(*s, dt)),
        }
    };
    let (xt, yt) = (input(&x)?, input(&y)?);
    call1(&Where, &[condition, &xt, &yt])
}
