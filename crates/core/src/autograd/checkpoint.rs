//! Gradient checkpointing: keep only a segment's inputs, recompute the
//! segment in backward.

use std::sync::Arc;

use super::function::{Function, FunctionCtx, apply_function};
use super::graph::Edge;
use crate::random::{GeneratorState, default_generator};
use crate::{Error, Result, Tensor};

type Segment = Arc<dyn Fn(&[Tensor]) -> Result<Vec<Tensor>> + Send + Sync>;

struct Checkpoint {
    f: Segment,
    rng: GeneratorState,
}

impl Function for Checkpoint {
    fn name(&self) -> String {
        "CheckpointFunctionBackward".into()
    }

    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let refs: Vec<&Tensor> = inputs.iter().collect();
        ctx.save_for_backward(&refs);
        (self.f)(inputs)
    }

    fn backward(&self, ctx: &FunctionCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let saved = ctx.saved_tensors()?;
        let inputs: Vec<Tensor> = saved
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let d = t.detach();
                if ctx.needs_input_grad(i) {
                    d.requires_grad_(true)
                } else {
                    Ok(d)
                }
            })
            .collect::<Result<_>>()?;
        // Recompute with the generator state of the forward pass, so dropout
        // draws the same masks; then put the current state back.
        let generator = default_generator();
        let now = generator.get_state();
        generator.set_state(self.rng.clone());
        let outputs = {
            let _g = super::enable_grad_guard();
            (self.f)(&inputs)
        };
        generator.set_state(now);
        let outputs = outputs?;
        // Backward through the recomputed segment: this accumulates into the
        // parameters the segment uses and into the detached inputs.
        let mut roots = Vec::new();
        for (o, g) in outputs.iter().zip(grads) {
            if let (Some(g), true) = (g, o.requires_grad()) {
                let edge: Edge = o.gradient_edge().expect("requires grad");
                roots.push((edge, g.clone()));
            }
        }
        if !roots.is_empty() {
            super::engine::execute(super::engine::Task {
                roots,
                captures: None,
                retain_graph: false,
                create_graph: super::is_grad_enabled(),
                allow_unused: true,
            })?;
        }
        Ok(inputs.iter().map(|t| t.grad_opt()).collect())
    }
}

/// Runs `f` on `inputs` keeping only the inputs for backward, which
/// recomputes `f` (with the random generator restored to its state at the
/// forward call, so dropout matches). Gradients equal those of running `f`
/// directly; memory for the segment's activations is saved.
///
/// ```
/// use ferrotorch_core::{Tensor, autograd};
/// let x = Tensor::randn(&[4, 8])?.requires_grad_(true)?;
/// let w = Tensor::randn(&[8, 8])?.requires_grad_(true)?;
/// let w2 = w.clone();
/// let y = autograd::checkpoint(move |xs| Ok(vec![xs[0].matmul(&w2)?.tanh()?]), &[&x])?;
/// y[0].sum()?.backward()?;
/// assert!(x.grad_opt().is_some() && w.grad_opt().is_some());
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn checkpoint(
    f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>> + Send + Sync + 'static,
    inputs: &[&Tensor],
) -> Result<Vec<Tensor>> {
    if inputs.is_empty() {
        return Err(Error::invalid("checkpoint", "needs at least one input tensor"));
    }
    let rng = default_generator().get_state();
    apply_function(Checkpoint { f: Arc::new(f), rng }, inputs)
}
