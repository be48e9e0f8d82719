//! Fused backward formulas of activations, as operators of their own
//! (PyTorch's `tanh_backward` / `sigmoid_backward`; `sin_backward` /
//! `cos_backward`, which PyTorch composes from two or three ops; and
//! `square_backward` for `x * x`, whose two equal products PyTorch computes
//! and adds): one kernel
//! call instead of the pointwise ops the composite formula takes, which is
//! most of the backward cost on small tensors. Each gives the composite
//! formula's bits and is differentiable, so these functions keep their
//! higher derivatives.
//!
//! The fused kernels are the CPU backend's; every other backend runs the
//! composite formulas (`register` puts them in the `AnyBackend` slot), so a
//! backend with kernels for the pointwise ops they use (mul, add, neg, sin,
//! cos) differentiates tanh, sigmoid, sin, cos and `x * x` without kernels
//! of its own for these operators.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call1, downcast_op};
use crate::ops::grad_util::grad0;
use crate::{DType, Error, Result, Tensor};

/// Dispatch table of `tanh_backward`.
pub static TANH_BACKWARD: OpEntry = OpEntry::differentiable("tanh_backward");
/// Dispatch table of `sigmoid_backward`.
pub static SIGMOID_BACKWARD: OpEntry = OpEntry::differentiable("sigmoid_backward");
/// Dispatch table of `ferrotorch::sin_backward` (not a PyTorch operator:
/// PyTorch composes `grad * cos(x)`).
pub static SIN_BACKWARD: OpEntry = OpEntry::differentiable("ferrotorch::sin_backward");
/// Dispatch table of `ferrotorch::cos_backward` (not a PyTorch operator:
/// PyTorch composes `grad * -sin(x)`).
pub static COS_BACKWARD: OpEntry = OpEntry::differentiable("ferrotorch::cos_backward");
/// Dispatch table of `ferrotorch::square_backward` (not a PyTorch operator:
/// PyTorch adds the two products of `x * x`'s formula).
pub static SQUARE_BACKWARD: OpEntry = OpEntry::differentiable("ferrotorch::square_backward");

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
        grad_pair_spec(self.entry().base_name(), inputs[0], inputs[1], "result")
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

/// The composite formula of an [`ActivationBackward`] call, in the ops the
/// fused CPU kernels reproduce bit for bit: `g * (1 - y * y)`,
/// `g * (1 - y) * y` (for f16 and bf16 computed in f32 and rounded once,
/// as PyTorch's fused `tanh_backward` / `sigmoid_backward`), `g * cos(x)`,
/// `g * -sin(x)`, and `g * x + g * x` (each op rounded to the dtype, as
/// PyTorch's composite formulas).
fn composite_kernel(call: &Call) -> Result<Tensors> {
    let op: &ActivationBackward = downcast_op(call.op)?;
    op.infer(call.inputs)?;
    let (g, v) = (call.inputs[0], call.inputs[1]);
    let dtype = g.dtype();
    let in_f32 = |t: &Tensor| {
        if matches!(dtype, DType::F16 | DType::BF16) {
            t.to_dtype(DType::F32)
        } else {
            Ok(t.clone())
        }
    };
    let out = match op.0 {
        ActivationKind::Tanh => {
            let (g, y) = (in_f32(g)?, in_f32(v)?);
            g.mul(&y.mul(&y)?.neg()?.add(1.0)?)?.to_dtype(dtype)?
        }
        ActivationKind::Sigmoid => {
            let (g, y) = (in_f32(g)?, in_f32(v)?);
            g.mul(&y.neg()?.add(1.0)?)?.mul(&y)?.to_dtype(dtype)?
        }
        ActivationKind::Sin => g.mul(&v.cos()?)?,
        ActivationKind::Cos => g.mul(&v.sin()?.neg()?)?,
        ActivationKind::Square => {
            let p = g.mul(v)?;
            p.add(&p)?
        }
    };
    Ok(smallvec::smallvec![out])
}

/// Registers the composite formulas for every backend without a fused kernel.
pub(crate) fn register() -> Result<()> {
    for e in [
        &TANH_BACKWARD,
        &SIGMOID_BACKWARD,
        &SIN_BACKWARD,
        &COS_BACKWARD,
        &SQUARE_BACKWARD,
    ] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(composite_kernel))?;
    }
    Ok(())
}

/// The output spec of a backward operator taking `[grad, y]` (`y` the
/// forward's `what`, "result" or "output"): both one shape and one float
/// dtype, else an error naming the operator.
pub(crate) fn grad_pair_spec(name: &'static str, g: &Tensor, y: &Tensor, what: &str) -> Result<OutSpecs> {
    if g.shape() != y.shape() {
        return Err(Error::shape(
            name,
            g.shape(),
            y.shape(),
            format!("grad and {what} must have one shape"),
        ));
    }
    if g.dtype() != y.dtype() || !g.dtype().is_floating_point() {
        return Err(Error::dtype(
            name,
            g.dtype(),
            format!(
                "grad and {what} must share one float dtype, got {} and {}",
                g.dtype(),
                y.dtype()
            ),
        ));
    }
    Ok(smallvec::smallvec![OutSpec::new(g.dims(), g.dtype())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TensorOptions;

    /// The composite formulas (other backends) give the fused CPU kernels' bits.
    #[test]
    fn composite_formulas_match_fused_kernels_bitwise() {
        let kinds = [
            ActivationKind::Tanh,
            ActivationKind::Sigmoid,
            ActivationKind::Sin,
            ActivationKind::Cos,
            ActivationKind::Square,
        ];
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let o = TensorOptions::new().dtype(dtype);
            let g = o.randn([257]).unwrap();
            let v = o.rand([257]).unwrap().mul(1.8).unwrap().add(-0.9).unwrap();
            for kind in kinds {
                let op = ActivationBackward(kind);
                let fused = call1(&op, &[&g, &v]).unwrap();
                let call = Call {
                    op: &op,
                    inputs: &[&g, &v],
                    out: None,
                };
                let composite = composite_kernel(&call).unwrap().remove(0);
                let bits = |t: &Tensor| t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
                let (f, c) = (bits(&fused), bits(&composite));
                assert!(
                    f.iter().zip(&c).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{kind:?} {dtype}: fused {f:?} vs composite {c:?}"
                );
            }
        }
    }
}
