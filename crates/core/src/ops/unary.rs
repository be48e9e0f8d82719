//! Unary pointwise operators: declarations and front ends.
//!
//! Each [`UnaryKind`] is one operator with its own dispatch table; the
//! output has the input's shape, dtype and (for dense inputs) strides.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call_out, call1};
use crate::ops::activation_backward::{ActivationBackward, ActivationKind};
use crate::ops::grad_util::{grad0, mask};
use crate::{DType, Error, Result, Scalar, Tensor};

const FRAC_2_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// Which values an operator accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// Floating point; integer and bool inputs are promoted to the default float dtype.
    Float,
    /// Any number; bool is rejected.
    Numeric,
}

macro_rules! unary_kinds {
    ($($(#[$doc:meta])* $kind:ident, $entry:ident, $name:literal, $method:ident, $inplace:ident, $domain:ident;)*) => {
        /// The unary pointwise operators.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum UnaryKind {
            $($(#[$doc])* $kind,)*
        }

        $(
            #[doc = concat!("Dispatch table of `", $name, "`.")]
            pub static $entry: OpEntry = OpEntry::differentiable($name);
        )*

        /// Every unary kind.
        pub const ALL_UNARY: &[UnaryKind] = &[$(UnaryKind::$kind,)*];

        impl UnaryKind {
            /// The operator's dispatch table.
            pub fn entry(self) -> &'static OpEntry {
                match self {
                    $(UnaryKind::$kind => &$entry,)*
                }
            }

            /// Which inputs the operator accepts.
            pub fn domain(self) -> Domain {
                match self {
                    $(UnaryKind::$kind => Domain::$domain,)*
                }
            }
        }

        impl Tensor {
            $(
                $(#[$doc])*
                pub fn $method(&self) -> Result<Tensor> {
                    unary(UnaryKind::$kind, self)
                }

                #[doc = concat!("In-place [`Tensor::", stringify!($method), "`]; returns `self`.")]
                pub fn $inplace(&self) -> Result<Tensor> {
                    unary_(UnaryKind::$kind, self)
                }
            )*
        }
    };
}

unary_kinds! {
    /// `-x`.
    Neg, NEG, "neg", neg, neg_, Numeric;
    /// `|x|`.
    Abs, ABS, "abs", abs, abs_, Numeric;
    /// `e^x`.
    Exp, EXP, "exp", exp, exp_, Float;
    /// Natural logarithm.
    Log, LOG, "log", log, log_, Float;
    /// `ln(1 + x)`, accurate near 0.
    Log1p, LOG1P, "log1p", log1p, log1p_, Float;
    /// `e^x - 1`, accurate near 0.
    Expm1, EXPM1, "expm1", expm1, expm1_, Float;
    /// Square root.
    Sqrt, SQRT, "sqrt", sqrt, sqrt_, Float;
    /// `1 / sqrt(x)`.
    Rsqrt, RSQRT, "rsqrt", rsqrt, rsqrt_, Float;
    /// `1 / x`.
    Reciprocal, RECIPROCAL, "reciprocal", reciprocal, reciprocal_, Float;
    /// Sine.
    Sin, SIN, "sin", sin, sin_, Float;
    /// Cosine.
    Cos, COS, "cos", cos, cos_, Float;
    /// Hyperbolic tangent.
    Tanh, TANH, "tanh", tanh, tanh_, Float;
    /// Logistic sigmoid `1 / (1 + e^-x)`.
    Sigmoid, SIGMOID, "sigmoid", sigmoid, sigmoid_, Float;
    /// The error function.
    Erf, ERF, "erf", erf, erf_, Float;
    /// The inverse error function (NaN outside [-1, 1]).
    Erfinv, ERFINV, "erfinv", erfinv, erfinv_, Float;
    /// `max(x, 0)`.
    Relu, RELU, "relu", relu, relu_, Numeric;
    /// GELU with the exact erf form, `x * Φ(x)`.
    Gelu, GELU, "gelu", gelu, gelu_, Float;
    /// GELU with the tanh approximation (`approximate='tanh'`; not an
    /// operator of its own in PyTorch, where `gelu` takes the approximation
    /// as an argument, hence the `ferrotorch::` namespace).
    GeluTanh, GELU_TANH, "ferrotorch::gelu_tanh", gelu_tanh, gelu_tanh_, Float;
    /// SiLU (swish), `x * sigmoid(x)`.
    Silu, SILU, "silu", silu, silu_, Float;
    /// Rounds down.
    Floor, FLOOR, "floor", floor, floor_, Numeric;
    /// Rounds up.
    Ceil, CEIL, "ceil", ceil, ceil_, Numeric;
    /// Rounds half to even, as `torch.round`.
    Round, ROUND, "round", round, round_, Numeric;
    /// Rounds toward zero.
    Trunc, TRUNC, "trunc", trunc, trunc_, Numeric;
    /// -1, 0 or 1 (0 for zero and NaN, as PyTorch's CPU kernel).
    Sign, SIGN, "sign", sign, sign_, Numeric;
}

/// A unary pointwise operator instance.
#[derive(Debug, Clone, Copy)]
pub struct Unary(pub UnaryKind);

impl Op for Unary {
    fn entry(&self) -> &'static OpEntry {
        self.0.entry()
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        check_domain(self.0, x.dtype())?;
        Ok(smallvec::smallvec![same_layout_spec(x, x.dtype())])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn saves(&self) -> Saves {
        use UnaryKind::*;
        match self.0 {
            Neg | Floor | Ceil | Round | Trunc | Sign => Saves::NONE,
            Exp | Expm1 | Sqrt | Rsqrt | Reciprocal | Tanh | Sigmoid | Relu | Erfinv => Saves::OUTPUT,
            Abs | Log | Log1p | Sin | Cos | Erf | Gelu | GeluTanh | Silu => Saves::INPUTS,
        }
    }

    fn backward_name(&self) -> String {
        match self.0 {
            UnaryKind::GeluTanh => "GeluBackward0".into(),
            UnaryKind::Sign => "SignBackward0".into(),
            UnaryKind::Log1p => "Log1PBackward0".into(),
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
        use UnaryKind::*;
        let g = grad0(grads)?;
        let r = match self.0 {
            Neg => g.neg()?,
            Floor | Ceil | Round | Trunc | Sign => g.zeros_like()?,
            Abs => g.mul(&ctx.input(0)?.sign()?)?,
            Exp => g.mul(&ctx.output(0)?)?,
            Log => g.div(&ctx.input(0)?)?,
            Log1p => g.div(&ctx.input(0)?.add(1.0)?)?,
            Expm1 => g.mul(&ctx.output(0)?.add(1.0)?)?,
            Sqrt => g.div(&ctx.output(0)?.mul(2.0)?)?,
            Rsqrt => g.mul(&ctx.output(0)?.pow(3)?)?.mul(-0.5)?,
            Reciprocal => g.mul(&ctx.output(0)?.pow(2)?)?.neg()?,
            Sin => call1(&ActivationBackward(ActivationKind::Sin), &[&g, &ctx.input(0)?])?,
            Cos => call1(&ActivationBackward(ActivationKind::Cos), &[&g, &ctx.input(0)?])?,
            Tanh => call1(&ActivationBackward(ActivationKind::Tanh), &[&g, &ctx.output(0)?])?,
            Sigmoid => call1(&ActivationBackward(ActivationKind::Sigmoid), &[&g, &ctx.output(0)?])?,
            Erf => {
                let x = ctx.input(0)?;
                g.mul(&x.mul(&x)?.neg()?.exp()?.mul(FRAC_2_SQRT_PI)?)?
            }
            // PyTorch: 0.5 * sqrt(pi) * exp(erfinv(x)^2) * grad.
            Erfinv => {
                let y = ctx.output(0)?;
                y.pow(2)?.exp()?.mul(0.5 * std::f64::consts::PI.sqrt())?.mul(&g)?
            }
            Relu => call1(&ThresholdBackward, &[&g, &ctx.output(0)?])?,
            Gelu => call1(
                &crate::ops::activation::ActivationGrad(crate::ops::activation::Act::Gelu { tanh: false }),
                &[&g, &ctx.input(0)?],
            )?,
            GeluTanh => call1(
                &crate::ops::activation::ActivationGrad(crate::ops::activation::Act::Gelu { tanh: true }),
                &[&g, &ctx.input(0)?],
            )?,
            Silu => {
                let x = ctx.input(0)?;
                let s = x.sigmoid()?;
                g.mul(&s.mul(&x.mul(&s.neg()?.add(1.0)?)?.add(1.0)?)?)?
            }
        };
        Ok(vec![Some(r)])
    }
}

/// Output spec of a pointwise op: the input's shape, and its strides when it
/// is dense but not contiguous (so `exp(x.t())` stays transposed, as in PyTorch).
pub(crate) fn same_layout_spec(x: &Tensor, dtype: DType) -> OutSpec {
    let permuted = !x.is_contiguous() && x.layout().is_non_overlapping_and_dense();
    // Built in one go (no spec moved and patched: this runs on every op).
    OutSpec {
        shape: x.dims(),
        dtype,
        strides: permuted.then(|| crate::layout::dims_of(x.strides())),
    }
}

impl UnaryKind {
    /// The operator's name in error messages: the base name of its entry,
    /// except `gelu` for [`UnaryKind::GeluTanh`] (PyTorch's
    /// `gelu(approximate='tanh')`, an operator of the core's own here).
    pub fn error_name(self) -> &'static str {
        match self {
            UnaryKind::GeluTanh => "gelu",
            k => k.entry().base_name(),
        }
    }
}

fn check_domain(kind: UnaryKind, dtype: DType) -> Result<()> {
    let name = kind.error_name();
    match kind.domain() {
        Domain::Float if !dtype.is_floating_point() => Err(Error::dtype(name, dtype, "expects a floating-point input")),
        // sign(bool) is the identity, as in PyTorch.
        Domain::Numeric if dtype == DType::Bool && kind != UnaryKind::Sign => {
            Err(Error::dtype(name, dtype, "not supported for bool tensors"))
        }
        _ => Ok(()),
    }
}

fn promoted(kind: UnaryKind, x: &Tensor) -> Result<Tensor> {
    // PyTorch's activation kernels have no integer or bool versions (unlike
    // exp or sin, whose integer inputs are promoted).
    if matches!(kind, UnaryKind::Gelu | UnaryKind::GeluTanh | UnaryKind::Silu) && !x.is_floating_point() {
        return Err(Error::dtype(
            kind.error_name(),
            x.dtype(),
            "activations take floating-point inputs",
        ));
    }
    if kind.domain() == Domain::Float && !x.dtype().is_floating_point() {
        x.to_dtype(crate::default_dtype())
    } else {
        Ok(x.clone())
    }
}

/// Runs a unary operator (integer inputs of float operators are promoted).
pub fn unary(kind: UnaryKind, x: &Tensor) -> Result<Tensor> {
    let xp = promoted(kind, x)?;
    call1(&Unary(kind), &[&xp])
}

/// Runs a unary operator in place.
pub fn unary_(kind: UnaryKind, x: &Tensor) -> Result<Tensor> {
    let xp = promoted(kind, x)?;
    call_out(&Unary(kind), &[&xp], &[x])?;
    Ok(x.clone())
}

/// Dispatch table of `threshold_backward`.
pub static THRESHOLD_BACKWARD: OpEntry = OpEntry::differentiable("threshold_backward");

/// The backward of relu as an operator of its own, `grad` where
/// `result > 0` (NaN passes, as in PyTorch) and 0 elsewhere; its own
/// derivative with respect to `result` is zero, so relu has (zero) second
/// derivatives as in PyTorch. Inputs `[grad, result]`.
#[derive(Debug, Clone, Copy)]
pub struct ThresholdBackward;

impl Op for ThresholdBackward {
    fn entry(&self) -> &'static OpEntry {
        &THRESHOLD_BACKWARD
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (g, y) = (inputs[0], inputs[1]);
        if !crate::layout::same_dims(g.shape(), y.shape()) || g.dtype() != y.dtype() {
            return Err(Error::shape(
                "threshold_backward",
                g.shape(),
                y.shape(),
                "grad and result must agree",
            ));
        }
        Ok(smallvec::smallvec![OutSpec::new(g.dims(), g.dtype())])
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b10)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let gg = grad0(grads)?;
        Ok(vec![Some(call1(self, &[&gg, &ctx.input(1)?])?), Some(gg.zeros_like()?)])
    }
}

fn threshold_backward_kernel(call: &crate::dispatch::Call) -> Result<crate::dispatch::Tensors> {
    let (g, y) = (call.inputs[0], call.inputs[1]);
    let zero = Tensor::scalar_tensor(Scalar::Int(0), g.dtype());
    let out = crate::ops::binary::where_(&y.le(0.0)?, (&zero).into(), g.into())?;
    Ok(smallvec::smallvec![out])
}

pub(crate) fn register() -> Result<()> {
    THRESHOLD_BACKWARD.register_builtin(
        crate::dispatch::Slot::AnyBackend,
        crate::dispatch::Kernel::Functional(threshold_backward_kernel),
    )
}

/// Dispatch table of `pow.Tensor_Scalar` (a scalar exponent).
pub static POW_SCALAR: OpEntry = OpEntry::differentiable("pow.Tensor_Scalar");
/// Dispatch table of `clamp`.
pub static CLAMP: OpEntry = OpEntry::differentiable("clamp");
/// Dispatch table of `softplus`.
pub static SOFTPLUS: OpEntry = OpEntry::differentiable("softplus");

/// `x ^ exponent` for a scalar exponent. Exponents 0, 0.5, 1, 2, 3, -0.5,
/// -1, -2 take exact special cases, as in PyTorch.
#[derive(Debug, Clone, Copy)]
pub struct PowScalar {
    /// The exponent.
    pub exponent: Scalar,
}

impl Op for PowScalar {
    fn entry(&self) -> &'static OpEntry {
        &POW_SCALAR
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        // As PyTorch's kernel: exponents 0 and 1 are a fill and a copy;
        // f32/f64 take the exponent as a double (no range check), bf16's
        // sqrt/rsqrt/reciprocal shortcuts too; otherwise it is converted to
        // the input's dtype, with PyTorch's overflow check.
        let e = self.exponent.to_f64();
        let shortcut = match x.dtype() {
            DType::F32 | DType::F64 => true,
            DType::BF16 => matches!(e, 0.5 | -0.5 | -1.0),
            _ => false,
        };
        if !(shortcut || e == 0.0 || e == 1.0) {
            self.exponent.check_fits("pow", x.dtype())?;
        }
        if !x.dtype().is_floating_point() && self.exponent.is_float() {
            return Err(Error::dtype(
                "pow",
                x.dtype(),
                "a float exponent needs a floating-point input",
            ));
        }
        if !x.dtype().is_floating_point() && self.exponent.to_i64() < 0 {
            return Err(Error::invalid(
                "pow",
                "integers to negative integer powers are not allowed",
            ));
        }
        Ok(smallvec::smallvec![same_layout_spec(x, x.dtype())])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn backward_name(&self) -> String {
        "PowBackward0".into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let e = self.exponent.to_f64();
        // PyTorch's `exponent.equal(0.0)` is false for a boolean `False`:
        // the formula then gives `0 * x^-1`, NaN at 0.
        if e == 0.0 && !matches!(self.exponent, Scalar::Bool(_)) {
            return Ok(vec![Some(g.zeros_like()?)]);
        }
        let x = ctx.input(0)?;
        let d = if e == 1.0 {
            x.ones_like()?
        } else {
            x.pow(e - 1.0)?.mul(e)?
        };
        Ok(vec![Some(g.mul(&d)?)])
    }
}

/// Clamps into `[min, max]` (either bound optional; NaN stays NaN; with
/// `min > max` every element becomes `max`, as in PyTorch).
#[derive(Debug, Clone, Copy)]
pub struct Clamp {
    /// Lower bound.
    pub min: Option<Scalar>,
    /// Upper bound.
    pub max: Option<Scalar>,
    /// Called as `clamp_min` / `clamp_max` (nodes `ClampMinBackward0` /
    /// `ClampMaxBackward0`) rather than `clamp` (`ClampBackward1`).
    pub one_sided: bool,
}

impl Op for Clamp {
    fn entry(&self) -> &'static OpEntry {
        &CLAMP
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        if self.min.is_none() && self.max.is_none() {
            return Err(Error::invalid(
                "clamp",
                "at least one of 'min' or 'max' must not be None",
            ));
        }
        if x.dtype() == DType::Bool {
            return Err(Error::dtype("clamp", x.dtype(), "not supported for bool tensors"));
        }
        // As PyTorch: float bounds are converted to the input's dtype (and
        // must fit); an integer bound beyond the dtype's range is a no-op on
        // its own side and an error on the other (`max` below the minimum).
        if x.dtype().is_floating_point() {
            for b in [self.min, self.max].into_iter().flatten() {
                b.check_fits("clamp", x.dtype())?;
            }
        } else {
            for (b, is_max) in [(self.min, false), (self.max, true)] {
                // The dtype's own range (uint8: 0..=255; a fill's -1 wraps,
                // a clamp bound of -1 does not).
                let outside = |b: Scalar| match (b, x.dtype()) {
                    (Scalar::Int(i), DType::U8) => !(0..=255).contains(&i),
                    _ => b.check_fits("clamp", x.dtype()).is_err(),
                };
                if let Some(b) = b
                    && outside(b)
                {
                    let v = b.to_f64();
                    if (is_max && v < 0.0) || (!is_max && v > 0.0) {
                        return Err(Error::invalid(
                            "clamp",
                            format!(
                                "Clamp {} value {v} is outside the representable range of {}",
                                if is_max { "max" } else { "min" },
                                x.dtype()
                            ),
                        ));
                    }
                }
            }
        }
        Ok(smallvec::smallvec![same_layout_spec(x, x.dtype())])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn backward_name(&self) -> String {
        match (self.one_sided, self.min, self.max) {
            (true, Some(_), None) => "ClampMinBackward0",
            (true, None, Some(_)) => "ClampMaxBackward0",
            _ => "ClampBackward1",
        }
        .into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let x = ctx.input(0)?;
        let mut keep = x.eq(&x)?;
        if let Some(lo) = self.min {
            keep = keep.logical_and(&x.gt(lo)?)?;
        }
        if let Some(hi) = self.max {
            keep = keep.logical_and(&x.lt(hi)?)?;
        }
        // PyTorch's `where(mask, grad, 0)`: a clamped element's gradient is
        // 0 even where the incoming one is NaN or inf.
        Ok(vec![Some(g.where_cond(&keep, 0.0)?)])
    }
}

/// `log(1 + e^(beta x)) / beta`, linear above `threshold` (as `F.softplus`).
#[derive(Debug, Clone, Copy)]
pub struct Softplus {
    /// Sharpness.
    pub beta: f64,
    /// Above `beta * x > threshold` the function is the identity.
    pub threshold: f64,
}

impl Op for Softplus {
    fn entry(&self) -> &'static OpEntry {
        &SOFTPLUS
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        if !x.dtype().is_floating_point() {
            return Err(Error::dtype("softplus", x.dtype(), "expects a floating-point input"));
        }
        Ok(smallvec::smallvec![same_layout_spec(x, x.dtype())])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let z = ctx.input(0)?.mul(self.beta)?;
        let linear = mask(&z.gt(self.threshold)?, &g)?;
        let s = z.sigmoid()?;
        // d/dx = sigmoid(beta x) below the threshold, 1 above.
        let d = s.add(&linear.mul(&s.neg()?.add(1.0)?)?)?;
        Ok(vec![Some(g.mul(&d)?)])
    }
}

fn pow_dtype(x: &Tensor, e: Scalar) -> DType {
    crate::ops::result_type(&[crate::ops::Operand::Tensor(x), crate::ops::Operand::Scalar(e)])
}

/// # Elementwise functions
///
/// Math, activations and rounding, one element at a time.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([-1.0f32, 0.0, 2.0])?;
/// assert_eq!(x.relu()?.to_vec::<f32>()?, [0.0, 0.0, 2.0]);
/// assert_eq!(x.abs()?.to_vec::<f32>()?, [1.0, 0.0, 2.0]);
/// assert_eq!(x.pow(2)?.to_vec::<f32>()?, [1.0, 0.0, 4.0]);
/// assert_eq!(x.exp()?.to_vec::<f32>()?[1], 1.0);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `self ^ exponent` where the exponent is a tensor or a scalar
    /// (`x.pow(2)`, `x.pow(0.5)`, `x.pow(&e)`), broadcasting and promoting.
    pub fn pow<'a>(&self, exponent: impl crate::ops::IntoOperand<'a>) -> Result<Tensor> {
        match exponent.into_operand() {
            crate::ops::Operand::Scalar(e) => {
                let x = self.to_dtype(pow_dtype(self, e))?;
                call1(&PowScalar { exponent: e }, &[&x])
            }
            crate::ops::Operand::Tensor(t) => crate::ops::binary::binary(crate::ops::BinaryKind::Pow, self, t.into()),
        }
    }

    /// In-place [`Tensor::pow`].
    pub fn pow_<'a>(&self, exponent: impl crate::ops::IntoOperand<'a>) -> Result<Tensor> {
        match exponent.into_operand() {
            crate::ops::Operand::Scalar(e) => {
                let x = self.to_dtype(pow_dtype(self, e))?;
                call_out(&PowScalar { exponent: e }, &[&x], &[self])?;
                Ok(self.clone())
            }
            crate::ops::Operand::Tensor(t) => crate::ops::binary::binary_(crate::ops::BinaryKind::Pow, self, t.into()),
        }
    }

    /// `base ^ self` for a scalar base (`torch.pow(2.0, x)`).
    pub fn scalar_pow(base: impl Into<Scalar>, exponent: &Tensor) -> Result<Tensor> {
        crate::ops::binary::binary_scalar_lhs(crate::ops::BinaryKind::Pow, base.into(), exponent)
    }

    /// `F.softplus(x, beta, threshold)`.
    pub fn softplus(&self, beta: f64, threshold: f64) -> Result<Tensor> {
        if !self.is_floating_point() {
            return Err(Error::dtype(
                "softplus",
                self.dtype(),
                "activations take floating-point inputs",
            ));
        }
        let x = self.clone();
        call1(&Softplus { beta, threshold }, &[&x])
    }

    /// `F.gelu(x, approximate)` with `approximate` `"none"` or `"tanh"`.
    pub fn gelu_approx(&self, approximate: &str) -> Result<Tensor> {
        match approximate {
            "none" => self.gelu(),
            "tanh" => self.gelu_tanh(),
            other => Err(Error::invalid(
                "gelu",
                format!("approximate must be 'none' or 'tanh', got '{other}'"),
            )),
        }
    }

    /// `x * x`.
    pub fn square(&self) -> Result<Tensor> {
        self.pow(2)
    }
}

/// The clamp operator for these bounds (`one_sided` for `clamp_min` /
/// `clamp_max`) and `x` converted to the bounds' result type.
pub(crate) fn clamp_args(
    x: &Tensor,
    min: Option<Scalar>,
    max: Option<Scalar>,
    one_sided: bool,
) -> Result<(Clamp, Tensor)> {
    let mut ops = vec![crate::ops::Operand::Tensor(x)];
    ops.extend(min.map(crate::ops::Operand::Scalar));
    ops.extend(max.map(crate::ops::Operand::Scalar));
    let dt = crate::ops::result_type(&ops);
    Ok((Clamp { min, max, one_sided }, x.to_dtype(dt)?))
}
