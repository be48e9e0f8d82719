//! Fused backward formulas of activations, as operators of their own
//! (PyTorch's `tanh_backward` / `sigmoid_backward`; `sin_backward` /
//! `cos_backward`, which PyTorch composes from two or three ops; and
//! `square_backward` for `x * x`, whose two equal products PyTorch computes
//! and adds): one kernel
//! call instead of the pointwise ops the composite formula takes, which is
//! most of the backward cost on small tensors. Each gives the composite
//! formula's bits and is differentiable, so these functions keep their
//! higher derivatives.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call1};
use crate::ops::grad_util::grad0;
use crate::{Error, Result, Tensor};

/// Dispatch table of `tanh_backward`.
pub static TANH_BACKWARD: OpEntry = OpEntry::differentiable("tanh_backward");
/// Dispatch table of `sigmoid_backward`.
pub static SIGMOID_BACKWARD: OpEntry = OpEntry::differentiable("sigmoid_backward");
/// Dispatch table of `sin_backward`.
pub static SIN_BACKWARD: OpEntry = OpEntry::differentiable("sin_backward");
/// Dispatch table of `cos_backward`.
pub static COS_BACKWARD: OpEntry = OpEntry::differentiable("cos_backward");
/// Dispatch table of `square_backward`.
pub static SQUARE_BACKWARD: OpEntry = OpEntry::differentiable("square_backward");

/// Which activation's derivative an [`ActivationBackward`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivationKind {
    /// `grad * (1 - y * y)` for `y = tanh(x)`.
    Tanh,
    /// `grad * (1 - y) * y` for `y = sigmoid(x)` (PyTorch's evaluation order).
    Sigmoid,
    /// `grad * cos(x)` for `sin(x)`: the second input is `x`.
    Sin,
    /// `grad * -sin(x)` for `cos(x)`: the second input is `x`.
    Cos,
    /// `grad * x + grad * x` for `x * x` (both factors the same tensor):
    /// the second input is `x`.
    Square,
}

/// `grad` times the derivative of an activation, written in terms of the
/// activation's result `y` (tanh, sigmoid) or its input `x` (sin, cos,
/// square).
/// Inputs `[grad, y or x]` of one shape and float dtype; a shape or dtype
/// mismatch is an error naming both.
#[derive(Debug, Clone, Copy)]
pub struct ActivationBackward(pub ActivationKind);

impl ActivationBackward {
    /// The function on one element, in the arithmetic of `T` (f32 or f64).
    #[inline]
    pub(crate) fn apply<T>(self, g: T, y: T) -> T
    where
        T: Copy + From<f32> + std::ops::Mul<Output = T> + std::ops::Sub<Output = T>,
    {
        let one = T::from(1.0);
        match self.0 {
            ActivationKind::Tanh => g * (one - y * y),
            ActivationKind::Sigmoid => g * (one - y) * y,
            _ => unreachable!("sin/cos/square backward take `by_input`"),
        }
    }

    /// The formulas in terms of the input on one element: `grad` times
    /// cos(x), times -sin(x), or `grad * x` twice over, where `cos` and `sin`
    /// are the forward kernels' own and `round` rounds an intermediate to
    /// the dtype (the composite formulas round each op's result).
    #[inline]
    pub(crate) fn by_input<T>(self, g: T, x: T, sin: impl Fn(T) -> T, cos: impl Fn(T) -> T, round: impl Fn(T) -> T) -> T
    where
        T: Copy + std::ops::Mul<Output = T> + std::ops::Add<Output = T> + std::ops::Neg<Output = T>,
    {
        match self.0 {
            ActivationKind::Sin => g * cos(x),
            ActivationKind::Cos => g * -sin(x),
            ActivationKind::Square => {
                let p = round(g * x);
                p + p
            }
            ActivationKind::Tanh | ActivationKind::Sigmoid => unreachable!("tanh/sigmoid backward take `apply`"),
        }
    }
}

impl Op for ActivationBackward {
    fn entry(&self) -> &'static OpEntry {
        match self.0 {
            ActivationKind::Tanh => &TANH_BACKWARD,
            ActivationKind::Sigmoid => &SIGMOID_BACKWARD,
            ActivationKind::Sin => &SIN_BACKWARD,
            ActivationKind::Cos => &COS_BACKWARD,
            ActivationKind::Square => &SQUARE_BACKWARD,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let name = self.entry().name();
        let (g, y) = (inputs[0], inputs[1]);
        if g.shape() != y.shape() {
            return Err(Error::shape(
                name,
                g.shape(),
                y.shape(),
                "grad and result must have one shape",
            ));
        }
        if g.dtype() != y.dtype() || !g.dtype().is_floating_point() {
            return Err(Error::dtype(
                name,
                g.dtype(),
                format!(
                    "grad and result must share one float dtype, got {} and {}",
                    g.dtype(),
                    y.dtype()
                ),
            ));
        }
        Ok(smallvec::smallvec![OutSpec::new(g.dims(), g.dtype())])
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let gg = grad0(grads)?;
        let (g, y) = (ctx.input(0)?, ctx.input(1)?);
        let d_grad = ctx.needs_grad(0).then(|| call1(self, &[&gg, &y])).transpose()?;
        let d_y = if ctx.needs_grad(1) {
            // d/dy of g * (1 - y^2) is -2 g y; of g * (1 - y) * y it is g (1 - 2y).
            // d/dx of g * cos(x) is -g sin(x); of g * -sin(x), -g cos(x)
            // (in the order autograd takes through PyTorch's composite forms).
            Some(match self.0 {
                ActivationKind::Tanh => gg.mul(&g.mul(&y)?.mul(-2.0)?)?,
                ActivationKind::Sigmoid => gg.mul(&g.mul(&y.mul(-2.0)?.add(1.0)?)?)?,
                ActivationKind::Sin => gg.mul(&g)?.mul(&y.sin()?.neg()?)?,
                ActivationKind::Cos => gg.mul(&g)?.neg()?.mul(&y.cos()?)?,
                // d/dx of g x + g x: g gg twice over, summed.
                ActivationKind::Square => {
                    let t = gg.mul(&g)?;
                    t.add(&t)?
                }
            })
        } else {
            None
        };
        Ok(vec![d_grad, d_y])
    }
}
