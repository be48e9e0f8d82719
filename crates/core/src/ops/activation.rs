//! Activation functions with hyperparameters, as PyTorch's operators:
//! `leaky_relu`, `elu` (also SELU's), `celu`, `hardtanh` (also ReLU6's),
//! `mish`, `hardswish`, `hardsigmoid`, `log_sigmoid`, `softshrink`,
//! `hardshrink`; and the fused derivatives PyTorch names
//! `<op>_backward` (`gelu_backward` included, for `gelu` and its tanh
//! approximation).
//!
//! Each forward records PyTorch's node (`LeakyReluBackward0`,
//! `EluBackward0`, `CeluBackward0`, ...), whose formula is one call of
//! the fused derivative `grad * f'(x)` ([`ActivationGrad`], a CPU
//! kernel). The fused derivatives are differentiable in turn (linear in
//! `grad`; `grad * gg * f''(x)` for the input, written in operators), so
//! every activation has higher derivatives.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpecs, call_out, call1};
use crate::ops::grad_util::grad0;
use crate::ops::unary::same_layout_spec;
use crate::{DType, Error, Result, Scalar, Tensor};

/// SELU's `alpha`.
pub const SELU_ALPHA: f64 = 1.673_263_242_354_377_2;
/// SELU's `scale`.
pub const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

macro_rules! entries {
    ($($entry:ident, $bwd:ident, $name:literal;)*) => {
        $(
            #[doc = concat!("Dispatch table of `", $name, "`.")]
            pub static $entry: OpEntry = OpEntry::differentiable($name);
            #[doc = concat!("Dispatch table of `", $name, "_backward`.")]
            pub static $bwd: OpEntry = OpEntry::differentiable(concat!($name, "_backward"));
        )*

        /// Every activation's forward and backward tables.
        pub static ALL_ENTRIES: &[(&OpEntry, &OpEntry)] = &[$((&$entry, &$bwd),)*];
    };
}

entries! {
    LEAKY_RELU, LEAKY_RELU_BACKWARD, "leaky_relu";
    ELU, ELU_BACKWARD, "elu";
    CELU, CELU_BACKWARD, "celu";
    HARDTANH, HARDTANH_BACKWARD, "hardtanh";
    MISH, MISH_BACKWARD, "mish";
    HARDSWISH, HARDSWISH_BACKWARD, "hardswish";
    HARDSIGMOID, HARDSIGMOID_BACKWARD, "hardsigmoid";
    LOG_SIGMOID, LOG_SIGMOID_BACKWARD, "log_sigmoid";
    SOFTSHRINK, SOFTSHRINK_BACKWARD, "softshrink";
    HARDSHRINK, HARDSHRINK_BACKWARD, "hardshrink";
}

/// Dispatch table of `gelu_backward` (both approximations).
pub static GELU_BACKWARD: OpEntry = OpEntry::differentiable("gelu_backward");

/// An activation and its hyperparameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Act {
    /// `x` where `x > 0`, else `slope * x`.
    LeakyRelu {
        /// `negative_slope`.
        slope: f64,
    },
    /// `scale * x` where `x > 0`, else `alpha * scale * (exp(x *
    /// input_scale) - 1)`; CELU is `alpha, 1, 1 / alpha` (`celu`: its own
    /// entry and node `CeluBackward0`), SELU fixed constants.
    Elu {
        /// `alpha`.
        alpha: f64,
        /// `scale`.
        scale: f64,
        /// `input_scale`.
        input_scale: f64,
        /// Called as `celu`.
        celu: bool,
    },
    /// `clamp(x, min, max)`, gradient zero outside `(min, max)`.
    Hardtanh {
        /// `min_val`.
        min: f64,
        /// `max_val`.
        max: f64,
    },
    /// `x * tanh(softplus(x))`.
    Mish,
    /// `x * relu6(x + 3) / 6`.
    Hardswish,
    /// `relu6(x + 3) / 6`.
    Hardsigmoid,
    /// `log(sigmoid(x))`, computed stably.
    LogSigmoid,
    /// `x - lambd` above `lambd`, `x + lambd` below `-lambd`, else 0.
    Softshrink {
        /// `lambd`.
        lambd: f64,
    },
    /// `x` where `|x| > lambd`, else 0.
    Hardshrink {
        /// `lambd`.
        lambd: f64,
    },
    /// GELU (only as [`ActivationGrad`]: the forward is a unary op).
    Gelu {
        /// The tanh approximation.
        tanh: bool,
    },
}

impl Act {
    /// The forward operator's name.
    pub fn name(self) -> &'static str {
        match self {
            Act::LeakyRelu { .. } => "leaky_relu",
            Act::Elu { celu: false, .. } => "elu",
            Act::Elu { celu: true, .. } => "celu",
            Act::Hardtanh { .. } => "hardtanh",
            Act::Mish => "mish",
            Act::Hardswish => "hardswish",
            Act::Hardsigmoid => "hardsigmoid",
            Act::LogSigmoid => "log_sigmoid",
            Act::Softshrink { .. } => "softshrink",
            Act::Hardshrink { .. } => "hardshrink",
            Act::Gelu { .. } => "gelu",
        }
    }

    fn entries(self) -> (&'static OpEntry, &'static OpEntry) {
        match self {
            Act::LeakyRelu { .. } => (&LEAKY_RELU, &LEAKY_RELU_BACKWARD),
            Act::Elu { celu: false, .. } => (&ELU, &ELU_BACKWARD),
            Act::Elu { celu: true, .. } => (&CELU, &CELU_BACKWARD),
            Act::Hardtanh { .. } => (&HARDTANH, &HARDTANH_BACKWARD),
            Act::Mish => (&MISH, &MISH_BACKWARD),
            Act::Hardswish => (&HARDSWISH, &HARDSWISH_BACKWARD),
            Act::Hardsigmoid => (&HARDSIGMOID, &HARDSIGMOID_BACKWARD),
            Act::LogSigmoid => (&LOG_SIGMOID, &LOG_SIGMOID_BACKWARD),
            Act::Softshrink { .. } => (&SOFTSHRINK, &SOFTSHRINK_BACKWARD),
            Act::Hardshrink { .. } => (&HARDSHRINK, &HARDSHRINK_BACKWARD),
            Act::Gelu { .. } => (&GELU_BACKWARD, &GELU_BACKWARD),
        }
    }

    /// The function on one element, in f64.
    pub fn f64(self, x: f64) -> f64 {
        match self {
            Act::LeakyRelu { slope } => {
                if x > 0.0 {
                    x
                } else {
                    x * slope
                }
            }
            Act::Elu {
                alpha,
                scale,
                input_scale,
                ..
            } => {
                if x > 0.0 {
                    x * scale
                } else {
                    (x * input_scale).exp_m1() * (alpha * scale)
                }
            }
            Act::Hardtanh { min, max } => {
                if x.is_nan() {
                    x
                } else {
                    x.max(min).min(max)
                }
            }
            Act::Mish => x * ((x.exp()).ln_1p()).tanh(),
            Act::Hardswish => x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
            Act::Hardsigmoid => (x + 3.0).clamp(0.0, 6.0) / 6.0,
            Act::LogSigmoid => x.min(0.0) - (-x.abs()).exp().ln_1p(),
            Act::Softshrink { lambd } => {
                if x > lambd {
                    x - lambd
                } else if x < -lambd {
                    x + lambd
                } else {
                    x * 0.0
                }
            }
            Act::Hardshrink { lambd } => {
                if x >= -lambd && x <= lambd {
                    0.0
                } else {
                    x
                }
            }
            Act::Gelu { .. } => f64::NAN,
        }
    }

    /// The derivative `f'(x)` times `g`, in f64 (PyTorch's `*_backward`).
    pub fn grad_f64(self, g: f64, x: f64) -> f64 {
        match self {
            Act::LeakyRelu { slope } => {
                if x > 0.0 {
                    g
                } else {
                    g * slope
                }
            }
            Act::Elu {
                alpha,
                scale,
                input_scale,
                ..
            } => {
                if x <= 0.0 {
                    g * input_scale * (alpha * scale) * (x * input_scale).exp()
                } else {
                    g * scale
                }
            }
            Act::Hardtanh { min, max } => {
                if x <= min || x >= max {
                    0.0
                } else {
                    g
                }
            }
            Act::Mish => {
                let s = 1.0 / (1.0 + (-x).exp());
                let t = x.exp().ln_1p().tanh();
                g * (t + x * s * (1.0 - t * t))
            }
            // PyTorch's hardswish_backward: 0 up to and at -3, 1 from 3.
            Act::Hardswish => {
                if x <= -3.0 {
                    0.0
                } else if x < 3.0 {
                    g * (x / 3.0 + 0.5)
                } else {
                    g
                }
            }
            // PyTorch's hardsigmoid_backward multiplies by an f32 `1/6`,
            // in every dtype.
            Act::Hardsigmoid => {
                if x > -3.0 && x < 3.0 {
                    g * f64::from(1.0f32 / 6.0)
                } else {
                    0.0
                }
            }
            Act::LogSigmoid => {
                let (max_deriv, sign) = if x < 0.0 { (1.0, 1.0) } else { (0.0, -1.0) };
                let z = (-x.abs()).exp();
                g * (max_deriv - sign * (z / (1.0 + z)))
            }
            Act::Softshrink { lambd } | Act::Hardshrink { lambd } => {
                if x >= -lambd && x <= lambd {
                    0.0
                } else {
                    g
                }
            }
            Act::Gelu { tanh: false } => {
                let cdf = 0.5 * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2));
                let pdf =
                    (-0.5 * x * x).exp() * (std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2 * 0.5);
                g * (cdf + x * pdf)
            }
            Act::Gelu { tanh: true } => {
                const BETA: f64 = std::f64::consts::SQRT_2 * std::f64::consts::FRAC_2_SQRT_PI * 0.5;
                const KAPPA: f64 = 0.044715;
                let x_sq = x * x;
                let x_cube = x_sq * x;
                let inner = BETA * (x + KAPPA * x_cube);
                let t = inner.tanh();
                let left = 0.5 * x;
                let right = 1.0 + t;
                let left_derivative = 0.5 * right;
                let right_derivative = left * (1.0 - t * t) * BETA * (1.0 + 3.0 * KAPPA * x_sq);
                g * (left_derivative + right_derivative)
            }
        }
    }

    /// The operators whose second derivative is zero (piecewise linear).
    fn piecewise_linear(self) -> bool {
        matches!(
            self,
            Act::LeakyRelu { .. }
                | Act::Hardtanh { .. }
                | Act::Hardsigmoid
                | Act::Softshrink { .. }
                | Act::Hardshrink { .. }
        )
    }
}

/// An activation operator (input `[x]`, output of its shape and dtype).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Activation(pub Act);

/// The fused derivative of an activation: inputs `[grad, x]` of one shape
/// and float dtype, output `grad * f'(x)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivationGrad(pub Act);

fn check_float(name: &'static str, x: &Tensor) -> Result<()> {
    if !x.dtype().is_floating_point() {
        return Err(Error::dtype(name, x.dtype(), "expects a floating-point input"));
    }
    Ok(())
}

impl Op for Activation {
    fn entry(&self) -> &'static OpEntry {
        self.0.entries().0
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        check_float(self.0.name(), x)?;
        Ok(smallvec::smallvec![same_layout_spec(x, x.dtype())])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn backward_name(&self) -> String {
        match self.0 {
            Act::LogSigmoid => "LogSigmoidBackward0".into(),
            Act::Hardswish => "HardswishBackward0".into(),
            Act::Hardsigmoid => "HardsigmoidBackward0".into(),
            Act::Hardtanh { .. } => "HardtanhBackward0".into(),
            Act::Softshrink { .. } => "SoftshrinkBackward0".into(),
            Act::Hardshrink { .. } => "HardshrinkBackward0".into(),
            _ => {
                let n = self.0.name();
                let mut s = String::new();
                for part in n.split('_') {
                    let mut c = part.chars();
                    if let Some(f) = c.next() {
                        s.extend(f.to_uppercase());
                        s.push_str(c.as_str());
                    }
                }
                s + "Backward0"
            }
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        Ok(vec![Some(call1(&ActivationGrad(self.0), &[&g, &ctx.input(0)?])?)])
    }
}

impl Op for ActivationGrad {
    fn entry(&self) -> &'static OpEntry {
        self.0.entries().1
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let name = self.entry().base_name();
        let (g, x) = (inputs[0], inputs[1]);
        if g.shape() != x.shape() {
            return Err(Error::shape(
                name,
                g.shape(),
                x.shape(),
                "grad and input must have one shape",
            ));
        }
        if g.dtype() != x.dtype() || !g.dtype().is_floating_point() {
            return Err(Error::dtype(
                name,
                g.dtype(),
                format!(
                    "grad and input must share one float dtype, got {} and {}",
                    g.dtype(),
                    x.dtype()
                ),
            ));
        }
        Ok(smallvec::smallvec![same_layout_spec(x, x.dtype())])
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let gg = grad0(grads)?;
        let (g, x) = (ctx.input(0)?, ctx.input(1)?);
        let d_grad = ctx.needs_grad(0).then(|| call1(self, &[&gg, &x])).transpose()?;
        let d_x = if !ctx.needs_grad(1) {
            None
        } else if self.0.piecewise_linear() {
            Some(gg.zeros_like()?)
        } else {
            Some(gg.mul(&g)?.mul(&second_derivative(self.0, &x)?)?)
        };
        Ok(vec![d_grad, d_x])
    }
}

/// `f''(x)` in operators (for the smooth activations).
fn second_derivative(act: Act, x: &Tensor) -> Result<Tensor> {
    match act {
        Act::Elu {
            alpha,
            scale,
            input_scale,
            ..
        } => {
            let neg = x.le(0.0)?.to_dtype(x.dtype())?;
            neg.mul(
                &x.mul(input_scale)?
                    .exp()?
                    .mul(input_scale * input_scale * alpha * scale)?,
            )
        }
        Act::Hardswish => {
            let inside = x.gt(-3.0)?.logical_and(&x.lt(3.0)?)?.to_dtype(x.dtype())?;
            inside.div(3.0)
        }
        Act::Mish => {
            // f' = t + x s (1 - t²) with t = tanh(softplus x), s = sigmoid x:
            // f'' = 2 s (1 - t²) + x s (1 - t²) (1 - s - 2 t s).
            let s = x.sigmoid()?;
            let t = x.softplus(1.0, 20.0)?.tanh()?;
            let sech2 = t.mul(&t)?.neg()?.add(1.0)?;
            let a = s.mul(&sech2)?;
            let inner = s.neg()?.add(1.0)?.sub(&t.mul(&s)?.mul(2.0)?)?;
            a.mul(2.0)?.add(&x.mul(&a)?.mul(&inner)?)
        }
        Act::LogSigmoid => {
            let s = x.sigmoid()?;
            s.mul(&s.neg()?.add(1.0)?)?.neg()
        }
        Act::Gelu { tanh: false } => {
            // gelu'' = pdf(x) (2 - x²).
            let pdf = x
                .mul(x)?
                .mul(-0.5)?
                .exp()?
                .mul(std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2 * 0.5)?;
            pdf.mul(&x.mul(x)?.neg()?.add(2.0)?)
        }
        Act::Gelu { tanh: true } => {
            // PyTorch's gelu_double_backward (tanh form).
            const BETA: f64 = std::f64::consts::SQRT_2 * std::f64::consts::FRAC_2_SQRT_PI * 0.5;
            const KAPPA: f64 = 0.044715;
            let inner = x.add(&x.pow(3)?.mul(KAPPA)?)?.mul(BETA)?;
            let t = inner.tanh()?;
            let f = x.mul(0.5)?;
            let g = t.mul(&t)?.neg()?.add(1.0)?;
            let h = x.mul(x)?.mul(3.0 * KAPPA)?.add(1.0)?.mul(BETA)?;
            let f_prime_gh = g.mul(&h)?.mul(0.5)?;
            // g' = -2 tanh sech² h.
            let g_prime = g.mul(&t)?.mul(-2.0)?.mul(&h)?;
            let g_prime_fh = f.mul(&h)?.mul(&g_prime)?;
            let h_prime_fg = f.mul(&g)?.mul(&x.mul(6.0 * KAPPA * BETA)?)?;
            f_prime_gh.mul(2.0)?.add(&g_prime_fh)?.add(&h_prime_fg)
        }
        _ => x.zeros_like(),
    }
}

fn activation(act: Act, x: &Tensor) -> Result<Tensor> {
    call1(&Activation(act), &[x])
}

/// The activation written into `x` (the operator's node, whose formula
/// reads the input as it was before the write).
fn activation_(act: Act, x: &Tensor) -> Result<Tensor> {
    call_out(&Activation(act), &[x], &[x])?;
    Ok(x.clone())
}

/// # Activations with hyperparameters
///
/// `F.leaky_relu`, `F.elu`, `F.hardtanh` & co.; each an operator with
/// PyTorch's node.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([-2.0f32, 0.5])?;
/// assert_eq!(x.leaky_relu(0.1)?.to_vec::<f32>()?, [-0.2, 0.5]);
/// assert_eq!(x.hardtanh(-1.0, 1.0)?.to_vec::<f32>()?, [-1.0, 0.5]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `x` where positive, `negative_slope * x` elsewhere (node
    /// `LeakyReluBackward0`). Errors for a non-float input.
    pub fn leaky_relu(&self, negative_slope: f64) -> Result<Tensor> {
        activation(Act::LeakyRelu { slope: negative_slope }, self)
    }

    /// In-place [`Tensor::leaky_relu`] (`F.leaky_relu_`).
    pub fn leaky_relu_(&self, negative_slope: f64) -> Result<Tensor> {
        activation_(Act::LeakyRelu { slope: negative_slope }, self)
    }

    /// In-place [`Tensor::elu`] (`F.elu_`).
    pub fn elu_(&self, alpha: f64, scale: f64, input_scale: f64) -> Result<Tensor> {
        activation_(
            Act::Elu {
                alpha,
                scale,
                input_scale,
                celu: false,
            },
            self,
        )
    }

    /// In-place [`Tensor::celu`] (`torch.celu_`); errors as `celu`.
    pub fn celu_(&self, alpha: f64) -> Result<Tensor> {
        if alpha == 0.0 {
            return Err(Error::invalid("celu", "ZeroDivisionError: alpha cannot be 0 for CELU"));
        }
        activation_(
            Act::Elu {
                alpha,
                scale: 1.0,
                input_scale: 1.0 / alpha,
                celu: true,
            },
            self,
        )
    }

    /// In-place [`Tensor::selu`] (`torch.selu_`).
    pub fn selu_(&self) -> Result<Tensor> {
        self.elu_(SELU_ALPHA, SELU_SCALE, 1.0)
    }

    /// In-place [`Tensor::hardtanh`] (`F.hardtanh_`); errors as `hardtanh`.
    pub fn hardtanh_(&self, min_val: f64, max_val: f64) -> Result<Tensor> {
        if min_val > max_val {
            return Err(Error::invalid("hardtanh", "min_val cannot be greater than max_val"));
        }
        if !self.dtype().is_floating_point() {
            if self.dtype() == DType::Bool {
                return Err(Error::dtype("hardtanh", self.dtype(), "not supported for bool tensors"));
            }
            return self.copy_(&self.hardtanh(min_val, max_val)?);
        }
        activation_(
            Act::Hardtanh {
                min: min_val,
                max: max_val,
            },
            self,
        )
    }

    /// In-place [`Tensor::relu6`] (`F.relu6(x, inplace=True)`).
    pub fn relu6_(&self) -> Result<Tensor> {
        self.hardtanh_(0.0, 6.0)
    }

    /// In-place [`Tensor::mish`] (`F.mish(x, inplace=True)`).
    pub fn mish_(&self) -> Result<Tensor> {
        activation_(Act::Mish, self)
    }

    /// In-place [`Tensor::hardswish`] (`F.hardswish(x, inplace=True)`).
    pub fn hardswish_(&self) -> Result<Tensor> {
        activation_(Act::Hardswish, self)
    }

    /// In-place [`Tensor::hardsigmoid`] (`F.hardsigmoid(x, inplace=True)`).
    pub fn hardsigmoid_(&self) -> Result<Tensor> {
        activation_(Act::Hardsigmoid, self)
    }

    /// `torch.nn.functional.elu` with PyTorch's full form (`scale`,
    /// `input_scale`): `scale * x` for `x > 0`, else `alpha * scale *
    /// (exp(x * input_scale) - 1)` (node `EluBackward0`). Errors for a
    /// non-float input.
    pub fn elu(&self, alpha: f64, scale: f64, input_scale: f64) -> Result<Tensor> {
        activation(
            Act::Elu {
                alpha,
                scale,
                input_scale,
                celu: false,
            },
            self,
        )
    }

    /// `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))` (node
    /// `CeluBackward0`). Errors for `alpha` 0 (PyTorch's
    /// "ZeroDivisionError: alpha cannot be 0 for CELU") and a non-float
    /// input.
    pub fn celu(&self, alpha: f64) -> Result<Tensor> {
        if alpha == 0.0 {
            return Err(Error::invalid("celu", "ZeroDivisionError: alpha cannot be 0 for CELU"));
        }
        activation(
            Act::Elu {
                alpha,
                scale: 1.0,
                input_scale: 1.0 / alpha,
                celu: true,
            },
            self,
        )
    }

    /// SELU: `elu` with PyTorch's constants [`SELU_ALPHA`] and
    /// [`SELU_SCALE`] (node `EluBackward0`). Errors for a non-float input.
    pub fn selu(&self) -> Result<Tensor> {
        self.elu(SELU_ALPHA, SELU_SCALE, 1.0)
    }

    /// `clamp(x, min_val, max_val)` with a zero gradient outside `(min_val,
    /// max_val)` (node `HardtanhBackward0`); integer inputs are clamped as
    /// PyTorch does. Errors: `min_val > max_val` (PyTorch's "min_val
    /// cannot be greater than max_val"), a bool input.
    pub fn hardtanh(&self, min_val: f64, max_val: f64) -> Result<Tensor> {
        if min_val > max_val {
            return Err(Error::invalid("hardtanh", "min_val cannot be greater than max_val"));
        }
        if !self.dtype().is_floating_point() {
            if self.dtype() == DType::Bool {
                return Err(Error::dtype("hardtanh", self.dtype(), "not supported for bool tensors"));
            }
            return self
                .clamp(Some(Scalar::Float(min_val)), Some(Scalar::Float(max_val)))?
                .to_dtype(self.dtype());
        }
        activation(
            Act::Hardtanh {
                min: min_val,
                max: max_val,
            },
            self,
        )
    }

    /// `hardtanh(x, 0, 6)`.
    pub fn relu6(&self) -> Result<Tensor> {
        self.hardtanh(0.0, 6.0)
    }

    /// Mish, `x * tanh(softplus(x))` (node `MishBackward0`). Errors for a
    /// non-float input.
    pub fn mish(&self) -> Result<Tensor> {
        activation(Act::Mish, self)
    }

    /// Hard swish, `x * relu6(x + 3) / 6` (node `HardswishBackward0`).
    /// Errors for a non-float input.
    pub fn hardswish(&self) -> Result<Tensor> {
        activation(Act::Hardswish, self)
    }

    /// Hard sigmoid, `relu6(x + 3) / 6` (node `HardsigmoidBackward0`).
    /// Errors for a non-float input.
    pub fn hardsigmoid(&self) -> Result<Tensor> {
        activation(Act::Hardsigmoid, self)
    }

    /// `log(sigmoid(x))`, stable for large `|x|` (node
    /// `LogSigmoidBackward0`). Errors for a non-float input.
    pub fn log_sigmoid(&self) -> Result<Tensor> {
        activation(Act::LogSigmoid, self)
    }

    /// Soft shrinkage: `x - lambd` above `lambd`, `x + lambd` below
    /// `-lambd`, else 0 (node `SoftshrinkBackward0`). Errors for a negative
    /// `lambd` (PyTorch's message) and a non-float input.
    pub fn softshrink(&self, lambd: f64) -> Result<Tensor> {
        if lambd < 0.0 {
            return Err(Error::invalid(
                "softshrink",
                format!("lambda must be greater or equal to 0, but found to be {lambd}."),
            ));
        }
        activation(Act::Softshrink { lambd }, self)
    }

    /// Hard shrinkage: `x` where `|x| > lambd`, else 0 (node
    /// `HardshrinkBackward0`). Errors for a non-float input.
    pub fn hardshrink(&self, lambd: f64) -> Result<Tensor> {
        activation(Act::Hardshrink { lambd }, self)
    }
}
