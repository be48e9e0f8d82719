//! Reverse-mode automatic differentiation, define-by-run.
//!
//! Every differentiable operator call on tensors that require grad goes
//! through the dispatcher's `Autograd` layer ([`layer`]), which records a
//! [`Node`] holding the operator's backward formula (declared with the
//! operator, [`crate::dispatch::Op::backward`]) and what it saved.
//! [`Tensor::backward`] and [`grad`] run the engine over that graph.
//!
//! ```
//! use ferrotorch_core::{Tensor, autograd};
//! let x = Tensor::scalar(2.0f32).requires_grad_(true)?;
//! let y = Tensor::scalar(3.0f32).requires_grad_(true)?;
//! let z = x.pow(2)?.add(&y.pow(3)?)?;
//! z.backward()?;
//! assert_eq!(x.grad().unwrap().item::<f32>()?, 4.0);
//! assert_eq!(y.grad().unwrap().item::<f32>()?, 27.0);
//! // Second derivative of x^3 at 2 is 12.
//! let x = Tensor::scalar(2.0f64).requires_grad_(true)?;
//! let dy = autograd::grad(&[&x.pow(3)?], &[&x], autograd::GradOptions::create_graph())?;
//! let d2 = autograd::grad(&[&dy[0]], &[&x], Default::default())?;
//! assert_eq!(d2[0].item::<f64>()?, 12.0);
//! # Ok::<(), ferrotorch_core::Error>(())
//! ```

mod checkpoint;
mod engine;
mod function;
mod gradcheck;
mod grads;
pub(crate) mod graph;
pub mod layer;
pub(crate) mod mode;
mod tensor_state;
pub(crate) mod view;

/// Re-exported from the dispatcher, where [`crate::dispatch::Op`]'s methods name them.
pub use crate::dispatch::{BackwardCtx, Saves, TensorMeta};
pub use checkpoint::checkpoint;
pub use function::{Function, FunctionCtx, apply_function};
pub use gradcheck::{GradcheckOptions, gradcheck, gradgradcheck};
pub use grads::Grads;
pub use graph::PostAccumulateHook;
pub(crate) use graph::ViewCreation;
pub use graph::{Backward, Edge, GradHook, Node};
pub use mode::{
    AnomalyGuard, GradModeGuard, detect_anomaly, enable_grad, enable_grad_guard, inference_mode, inference_mode_guard,
    is_anomaly_enabled, is_grad_enabled, is_inference_mode_enabled, no_grad, no_grad_guard, set_grad_enabled,
    set_grad_enabled_guard,
};
pub use tensor_state::HookHandle;

use crate::{Error, Result, Tensor, TensorOptions};

/// Options of [`Tensor::backward_opts`].
#[derive(Default, Clone, Copy)]
pub struct BackwardOptions<'a> {
    /// The gradient of the tensor (required unless it has one element).
    pub gradient: Option<&'a Tensor>,
    /// Keep the graph (and its saved tensors) for another backward.
    pub retain_graph: bool,
    /// Record the backward pass itself, for higher-order gradients.
    pub create_graph: bool,
}

/// Options of [`grad`].
#[derive(Default, Clone, Copy)]
pub struct GradOptions<'a> {
    /// Gradients of the outputs (required for outputs with more than one element).
    pub grad_outputs: Option<&'a [Tensor]>,
    /// Keep the graph; defaults to `create_graph`.
    pub retain_graph: Option<bool>,
    /// Make the returned gradients differentiable (higher-order gradients).
    pub create_graph: bool,
    /// Return `None` for inputs the outputs do not depend on instead of an error.
    pub allow_unused: bool,
}

impl GradOptions<'_> {
    /// Options with `create_graph` set.
    pub fn create_graph() -> Self {
        GradOptions {
            create_graph: true,
            ..Default::default()
        }
    }
}

fn root_grad(op: &'static str, t: &Tensor, g: Option<&Tensor>) -> Result<Tensor> {
    match g {
        Some(g) => {
            if g.shape() != t.shape() {
                return Err(Error::shape(
                    op,
                    g.shape(),
                    t.shape(),
                    "grad_output must have the output's shape",
                ));
            }
            Ok(g.clone())
        }
        // The usual root, a 0-d loss on the CPU: built directly, no kernel call.
        None if t.ndim() == 0 && t.device() == crate::Device::Cpu => {
            Ok(Tensor::scalar_tensor(crate::Scalar::Int(1), t.dtype()))
        }
        None if t.numel() == 1 => TensorOptions::like(t).ones(t.shape()),
        None => Err(Error::invalid(
            op,
            format!(
                "grad can be implicitly created only for scalar outputs (shape {:?})",
                t.shape()
            ),
        )),
    }
}

fn root_edge(op: &'static str, t: &Tensor) -> Result<Edge> {
    t.gradient_edge().ok_or_else(|| Error::NoGradFn {
        op,
        detail: "element 0 of tensors does not require grad and does not have a grad_fn".into(),
    })
}

/// Computes the gradients of `outputs` with respect to `inputs`
/// (`torch.autograd.grad`), without touching any `.grad`: one per input, in
/// order ([`Grads`]; `grads[i]` is input `i`'s). An input the outputs do
/// not depend on is [`Error::UnusedInput`] unless `opts.allow_unused`.
pub fn grad(outputs: &[&Tensor], inputs: &[&Tensor], opts: GradOptions) -> Result<Grads> {
    if let Some(go) = opts.grad_outputs
        && go.len() != outputs.len()
    {
        return Err(Error::invalid(
            "grad",
            format!("grad_outputs has {} tensors, outputs has {}", go.len(), outputs.len()),
        ));
    }
    let mut roots = Vec::new();
    for (i, o) in outputs.iter().enumerate() {
        let g = root_grad("grad", o, opts.grad_outputs.map(|go| &go[i]))?;
        roots.push((root_edge("grad", o)?, g));
    }
    let mut captures = Vec::new();
    for (i, x) in inputs.iter().enumerate() {
        captures.push(x.gradient_edge().ok_or_else(|| Error::NoGradFn {
            op: "grad",
            detail: format!("input {i} does not require grad and is not part of the graph"),
        })?);
    }
    let result = engine::execute(engine::Task {
        roots,
        captures: Some(captures),
        retain_graph: opts.retain_graph.unwrap_or(opts.create_graph),
        create_graph: opts.create_graph,
        allow_unused: opts.allow_unused,
    })?;
    if !opts.allow_unused
        && let Some(i) = result.iter().position(Option::is_none)
    {
        return Err(unused_input(i));
    }
    Ok(Grads::new(result))
}

/// Accumulates into the leaves' `.grad` the gradients of several tensors at
/// once (`torch.autograd.backward(tensors, grad_tensors)`): one pass over the
/// joint graph, so a tensor that also feeds another root gets both
/// contributions. `opts.grad_outputs` gives one gradient per tensor (needed
/// for those with more than one element); `retain_graph` defaults to
/// `create_graph`; `allow_unused` has no effect (nothing is captured).
///
/// Errors if a tensor does not require grad, or if the number or the shape
/// of the gradients does not match the tensors.
///
/// ```
/// use ferrotorch_core::{Tensor, autograd};
/// let x = Tensor::scalar(3.0f32).requires_grad_(true)?;
/// let y = x.mul(2.0)?;
/// let z = y.mul(&y)?;
/// // d/dx (y + z) = 2 + 2 y * 2 = 26
/// autograd::backward(&[&y, &z], Default::default())?;
/// assert_eq!(x.grad().unwrap().item::<f32>()?, 26.0);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn backward(tensors: &[&Tensor], opts: GradOptions) -> Result<()> {
    if let Some(go) = opts.grad_outputs
        && go.len() != tensors.len()
    {
        return Err(Error::invalid(
            "backward",
            format!("grad_tensors has {} tensors, tensors has {}", go.len(), tensors.len()),
        ));
    }
    let mut roots = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        let g = root_grad("backward", t, opts.grad_outputs.map(|go| &go[i]))?;
        let edge = t.gradient_edge().ok_or_else(|| Error::NoGradFn {
            op: "backward",
            detail: format!("element {i} of tensors does not require grad and does not have a grad_fn"),
        })?;
        roots.push((edge, g));
    }
    engine::execute(engine::Task {
        roots,
        captures: None,
        retain_graph: opts.retain_graph.unwrap_or(opts.create_graph),
        create_graph: opts.create_graph,
        allow_unused: true,
    })?;
    Ok(())
}

/// # Autograd: backward
///
/// Running the graph recorded since the leaves were marked
/// `requires_grad_(true)`; see [`autograd`](crate::autograd) for `grad`, graph
/// modes and custom functions.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([2.0f32, 3.0])?.requires_grad_(true)?;
/// let y = (&x * &x).sum()?;      // y = (x * x).sum()
/// y.backward()?;                 // y.backward()
/// assert_eq!(x.grad()?.to_vec::<f32>()?, [4.0, 6.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// Accumulates the gradient of this one-element tensor into the `.grad`
    /// of every leaf it depends on (`loss.backward()`); the graph is freed.
    pub fn backward(&self) -> Result<()> {
        self.backward_opts(BackwardOptions::default())
    }

    /// Backward from a tensor of any shape, given its gradient.
    pub fn backward_with(&self, gradient: &Tensor) -> Result<()> {
        self.backward_opts(BackwardOptions {
            gradient: Some(gradient),
            ..Default::default()
        })
    }

    /// Backward with all options (gradient, `retain_graph`, `create_graph`).
    pub fn backward_opts(&self, opts: BackwardOptions) -> Result<()> {
        let edge = root_edge("backward", self)?;
        let g = root_grad("backward", self, opts.gradient)?;
        engine::execute(engine::Task {
            roots: vec![(edge, g)],
            captures: None,
            retain_graph: opts.retain_graph || opts.create_graph,
            create_graph: opts.create_graph,
            allow_unused: true,
        })?;
        Ok(())
    }
}

/// [`Error::UnusedInput`] for input `index` of `autograd::grad`.
pub(crate) fn unused_input(index: usize) -> Error {
    Error::UnusedInput {
        index,
        detail: format!(
            "The differentiated Tensor at index {index} appears to not have been used in the graph. Set \
             allow_unused=True if this is the desired behavior."
        ),
    }
}
