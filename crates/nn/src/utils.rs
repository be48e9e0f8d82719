//! `torch.nn.utils`: gradient clipping.
//!
//! [`clip_grad_norm_`] and [`clip_grad_value_`] follow
//! `torch/nn/utils/clip_grad.py` step for step (the CPU path: one
//! `linalg.vector_norm` per gradient, grouped by dtype as PyTorch groups
//! them, then the norm of the stacked norms; the coefficient
//! `max_norm * (1 / (total_norm + 1e-6))` clamped to 1 and multiplied into
//! every gradient in place), so the total norm and the clipped gradients
//! are PyTorch's. The optimizer crate re-exports them as
//! `ferrotorch::optim::clip`.

use std::borrow::Borrow;

use ferrotorch_core::autograd::no_grad;
use ferrotorch_core::{DType, Error, Result, Tensor};

use crate::Parameter;

/// The gradients of `params` that exist, in order.
fn grads<P: Borrow<Parameter>>(params: impl IntoIterator<Item = P>) -> Vec<Tensor> {
    params.into_iter().filter_map(|p| p.borrow().grad_opt()).collect()
}

/// The dtype two floating dtypes promote to.
fn wider(a: DType, b: DType) -> DType {
    let rank = |d: DType| match d {
        DType::F64 => 3,
        DType::F32 => 2,
        _ => 1,
    };
    if a == b {
        a
    } else if rank(a) == 1 && rank(b) == 1 {
        DType::F32
    } else if rank(a) >= rank(b) {
        a
    } else {
        b
    }
}

/// `torch.nn.utils.get_total_norm` over the gradients of `params`: the
/// `norm_type` norm of the per-gradient norms (a float32 zero when no
/// parameter has a gradient). `norm_type` may be `f64::INFINITY`.
///
/// Errors: with `error_if_nonfinite`, a NaN or infinite total (PyTorch's
/// message); an integer gradient.
pub fn get_total_norm<P: Borrow<Parameter>>(
    params: impl IntoIterator<Item = P>,
    norm_type: f64,
    error_if_nonfinite: bool,
) -> Result<Tensor> {
    total_norm_of(&grads(params), norm_type, error_if_nonfinite)
}

fn total_norm_of(grads: &[Tensor], norm_type: f64, error_if_nonfinite: bool) -> Result<Tensor> {
    if grads.is_empty() {
        return Ok(Tensor::scalar_tensor(0.0.into(), DType::F32));
    }
    no_grad(|| {
        // Grouped by dtype in order of first appearance, as
        // `_group_tensors_by_device_and_dtype`.
        let mut dtypes: Vec<DType> = Vec::new();
        for g in grads {
            if !dtypes.contains(&g.dtype()) {
                dtypes.push(g.dtype());
            }
        }
        let mut norms = Vec::with_capacity(grads.len());
        for d in &dtypes {
            for g in grads.iter().filter(|g| g.dtype() == *d) {
                norms.push(g.linalg_vector_norm(norm_type, (), false)?);
            }
        }
        let common = norms.iter().map(Tensor::dtype).reduce(wider).unwrap_or(DType::F32);
        let norms = norms
            .into_iter()
            .map(|n| n.to_dtype(common))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = norms.iter().collect();
        let total = Tensor::stack(&refs, 0)?.linalg_vector_norm(norm_type, (), false)?;
        if error_if_nonfinite && !total.item::<f64>()?.is_finite() {
            return Err(Error::InvalidArgument {
                op: "clip_grad_norm_",
                detail: format!(
                    "The total norm of order {norm_type:?} for gradients from `parameters` is non-finite, so it \
                     cannot be clipped. To disable this error and scale the gradients by the non-finite norm \
                     anyway, set `error_if_nonfinite=False`"
                ),
            });
        }
        Ok(total)
    })
}

/// `torch.nn.utils.clip_grads_with_norm_`: scales every gradient of
/// `params` by `min(1, max_norm / (total_norm + 1e-6))`, computed as
/// PyTorch computes it (`total_norm.add(1e-6).reciprocal().mul(max_norm)`,
/// clamped).
pub fn clip_grads_with_norm_<P: Borrow<Parameter>>(
    params: impl IntoIterator<Item = P>,
    max_norm: f64,
    total_norm: &Tensor,
) -> Result<()> {
    scale(&grads(params), max_norm, total_norm)
}

fn scale(grads: &[Tensor], max_norm: f64, total_norm: &Tensor) -> Result<()> {
    if grads.is_empty() {
        return Ok(());
    }
    no_grad(|| {
        // `max_norm / (total_norm + 1e-6)` is `Tensor.__rtruediv__`:
        // `(total_norm + 1e-6).reciprocal() * max_norm`.
        let coef = total_norm.add(1e-6)?.reciprocal()?.mul(max_norm)?;
        let coef = coef.clamp_max(1.0)?;
        for g in grads {
            g.mul_(&coef)?;
        }
        Ok(())
    })
}

/// `torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type,
/// error_if_nonfinite)`: clips the gradients of `params` in place so that
/// their total `norm_type` norm (as one vector) is at most `max_norm`, and
/// returns the total norm before clipping (a 0-d tensor).
///
/// ```
/// use ferrotorch_core::Tensor;
/// use ferrotorch_nn::Parameter;
/// use ferrotorch_nn::utils::clip_grad_norm_;
/// let p = Parameter::new(Tensor::zeros([2])?)?;
/// p.tensor().set_grad(Some(Tensor::new([3.0f32, 4.0])?))?;
/// let total = clip_grad_norm_([&p], 1.0, 2.0, false)?;
/// assert_eq!(total.item::<f32>()?, 5.0);
/// let g = p.grad().unwrap().to_vec::<f32>()?;
/// assert!((g[0] - 0.6).abs() < 1e-6 && (g[1] - 0.8).abs() < 1e-6);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
///
/// Errors: with `error_if_nonfinite`, a total norm that is NaN or
/// infinite (the gradients are left as they were).
pub fn clip_grad_norm_<P: Borrow<Parameter>>(
    params: impl IntoIterator<Item = P>,
    max_norm: f64,
    norm_type: f64,
    error_if_nonfinite: bool,
) -> Result<Tensor> {
    let grads = grads(params);
    let total = total_norm_of(&grads, norm_type, error_if_nonfinite)?;
    scale(&grads, max_norm, &total)?;
    Ok(total)
}

/// `torch.nn.utils.clip_grad_value_(parameters, clip_value)`: clamps every
/// gradient of `params` into `[-clip_value, clip_value]` in place.
///
/// ```
/// use ferrotorch_core::Tensor;
/// use ferrotorch_nn::Parameter;
/// use ferrotorch_nn::utils::clip_grad_value_;
/// let p = Parameter::new(Tensor::zeros([3])?)?;
/// p.tensor().set_grad(Some(Tensor::new([-3.0f32, 0.5, 2.0])?))?;
/// clip_grad_value_([&p], 1.0)?;
/// assert_eq!(p.grad().unwrap().to_vec::<f32>()?, [-1.0, 0.5, 1.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn clip_grad_value_<P: Borrow<Parameter>>(params: impl IntoIterator<Item = P>, clip_value: f64) -> Result<()> {
    no_grad(|| {
        for g in grads(params) {
            g.clamp_min_(-clip_value)?;
            g.clamp_max_(clip_value)?;
        }
        Ok(())
    })
}
