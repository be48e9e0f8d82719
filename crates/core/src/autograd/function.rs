//! Custom differentiable functions (`torch.autograd.Function`).

use std::sync::{Arc, Mutex};

use super::graph::SavedTensor;
use super::graph::{Backward, Edge, Node};
use crate::{Error, Result, Tensor};

/// A function with a hand-written backward, usable like any operator.
///
/// ```
/// use ferrotorch_core::{Result, Tensor};
/// use ferrotorch_core::autograd::{Function, FunctionCtx, apply_function};
///
/// /// y = x^3, dy/dx = 3x^2.
/// struct Cube;
/// impl Function for Cube {
///     fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
///         ctx.save_for_backward(&[&inputs[0]]);
///         Ok(vec![inputs[0].pow(3)?])
///     }
///     fn backward(&self, ctx: &FunctionCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
///         let x = &ctx.saved_tensors()?[0];
///         Ok(vec![Some(grads[0].as_ref().unwrap().mul(&x.pow(2)?.mul(3.0)?)?)])
///     }
/// }
/// let x = Tensor::scalar(2.0f32).requires_grad_(true)?;
/// let y = apply_function(Cube, &[&x])?.remove(0);
/// y.backward()?;
/// assert_eq!(x.grad().unwrap().item::<f32>()?, 12.0);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub trait Function: Send + Sync + 'static {
    /// The node's name (`grad_fn` prints it).
    fn name(&self) -> String {
        let full = std::any::type_name::<Self>();
        format!("{}Backward", full.rsplit("::").next().unwrap_or(full))
    }

    /// Computes the outputs (graph recording is off inside).
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>>;

    /// Gradients of the inputs (one per input, `None` for none) from the
    /// gradients of the outputs.
    fn backward(&self, ctx: &FunctionCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>>;
}

/// State shared between a [`Function`]'s forward and backward.
#[derive(Default)]
pub struct FunctionCtx {
    to_save: Vec<Tensor>,
    saved: Vec<SavedTensor>,
    non_differentiable: Vec<Tensor>,
    needs_input_grad: Vec<bool>,
    node: Option<std::sync::Weak<Node>>,
}

impl FunctionCtx {
    /// Saves tensors (inputs or outputs) for backward; in-place changes to
    /// them before backward are detected.
    pub fn save_for_backward(&mut self, tensors: &[&Tensor]) {
        self.to_save.extend(tensors.iter().map(|t| (*t).clone()));
    }

    /// The saved tensors, in the order saved.
    pub fn saved_tensors(&self) -> Result<Vec<Tensor>> {
        let node = self
            .node
            .as_ref()
            .and_then(|w| w.upgrade())
            .ok_or_else(|| Error::invalid("saved_tensors", "only available in backward"))?;
        self.saved.iter().map(|s| s.unpack(&node)).collect()
    }

    /// Marks outputs that get no gradient (e.g. integer indices).
    pub fn mark_non_differentiable(&mut self, outputs: &[&Tensor]) {
        self.non_differentiable.extend(outputs.iter().map(|t| (*t).clone()));
    }

    /// Whether input `i` requires a gradient.
    pub fn needs_input_grad(&self, i: usize) -> bool {
        self.needs_input_grad.get(i).copied().unwrap_or(false)
    }
}

struct FunctionNode<F: Function> {
    func: F,
    ctx: Mutex<FunctionCtx>,
    shapes: Vec<Vec<usize>>,
}

impl<F: Function> Backward for FunctionNode<F> {
    fn name(&self) -> String {
        self.func.name()
    }

    fn apply(&self, node: &Arc<Node>, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let mut ctx = self.ctx.lock().unwrap_or_else(|e| e.into_inner());
        ctx.node = Some(Arc::downgrade(node));
        let mut out = self.func.backward(&ctx, grads)?;
        if out.len() != self.shapes.len() {
            return Err(Error::invalid(
                "backward",
                format!(
                    "function {} returned {} gradients, expected {} (one per input)",
                    self.func.name(),
                    out.len(),
                    self.shapes.len()
                ),
            ));
        }
        for (i, g) in out.iter_mut().enumerate() {
            if !ctx.needs_input_grad(i) {
                *g = None;
            }
        }
        Ok(out)
    }

    fn release(&self) {
        self.ctx.lock().unwrap_or_else(|e| e.into_inner()).saved.clear();
    }

    fn input_shape(&self, i: usize) -> Option<&[usize]> {
        self.shapes.get(i).map(Vec::as_slice)
    }
}

/// Runs a custom [`Function`] on `inputs`, recording it in the graph when
/// grad mode is on and some input requires grad.
pub fn apply_function<F: Function>(func: F, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    let track = super::is_grad_enabled() && inputs.iter().any(|t| t.requires_grad());
    let mut ctx = FunctionCtx {
        needs_input_grad: inputs.iter().map(|t| t.requires_grad()).collect(),
        ..Default::default()
    };
    let owned: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
    let outputs = {
        let _g = super::no_grad_guard();
        func.forward(&mut ctx, &owned)?
    };
    if !track {
        return Ok(outputs);
    }
    // An output that is an input gets its own handle, so the input keeps its history.
    let outputs: Vec<Tensor> = outputs
        .into_iter()
        .map(|o| {
            if inputs.iter().any(|i| i.is_same(&o)) {
                o.detach()
            } else {
                o
            }
        })
        .collect();
    let to_save = std::mem::take(&mut ctx.to_save);
    ctx.saved = to_save
        .iter()
        .map(|t| match outputs.iter().position(|o| o.is_same(t)) {
            Some(nr) => SavedTensor::output(t, nr),
            None => SavedTensor::input(t),
        })
        .collect();
    let non_diff = std::mem::take(&mut ctx.non_differentiable);
    let edges: Vec<Option<Edge>> = inputs.iter().map(|t| t.gradient_edge()).collect();
    let shapes = inputs.iter().map(|t| t.shape().to_vec()).collect();
    let name = func.name();
    let node = Node::new(
        Box::new(FunctionNode {
            func,
            ctx: Mutex::new(ctx),
            shapes,
        }),
        edges,
        name,
    );
    for (i, o) in outputs.iter().enumerate() {
        if o.is_floating_point() && !non_diff.iter().any(|n| n.is_same(o)) {
            o.set_grad_fn(node.clone(), i);
        }
    }
    Ok(outputs)
}
