//! Fused backward formulas of activations, as operators of their own
//! (PyTorch's `tanh_backward` / `sigmoid_backward`): one kernel call instead
//! of the four pointwise ops the composite formula takes, which is most of
//! the backward cost on small tensors. Each is differentiable, so tanh and
//! sigmoid keep their higher derivatives.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call1};
use crate::ops::grad_util::grad0;
use crate::{Error, Result, Tensor};

/// Dispatch table of `tanh_backward`.
pub static TANH_BACKWARD: OpEntry = OpEntry::differentiable("tanh_backward");
/// Dispatch table of `sigmoid_backward`.
pub static SIGMOID_BACKWARD: OpEntry = OpEntry::differentiable("sigmoid_backward");

/// Which activation's derivative an [`ActivationBackward`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivationKind {
    /// `grad * (1 - y * y)` for `y = tanh(x)`.
    Tanh,
    /// `grad * (1 - y) * y` for `y = sigmoid(x)` (PyTorch's evaluation order).
    Sigmoid,
}

/// `grad` times the derivative of an activation, written in terms of the
/// activation's result `y`. Inputs `[grad, y]` of one shape and float dtype;
/// a shape or dtype mismatch is an error naming both.
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
        }
    }
}

impl Op for ActivationBackward {
    fn entry(&self) -> &'static OpEntry {
        match self.0 {
            ActivationKind::Tanh => &TANH_BACKWARD,
            ActivationKind::Sigmoid => &SIGMOID_BACKWARD,
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
            let dy = match self.0 {
                ActivationKind::Tanh => g.mul(&y)?.mul(-2.0)?,
                ActivationKind::Sigmoid => g.mul(&y.mul(-2.0)?.add(1.0)?)?,
            };
            Some(gg.mul(&dy)?)
        } else {
            None
        };
        Ok(vec![d_grad, d_y])
    }
}
