//! The graph node of a sampler with tensor parameters: PyTorch records one
//! (`BernoulliBackward0`, `NormalBackward1/2/3`, `PoissonBackward0`) whose
//! gradient is zero for every parameter, so the sample requires grad when a
//! parameter does. [`ZeroGradDraw`] attaches such a node to a sample that
//! was drawn with grad mode off.

use crate::autograd::Saves;
use crate::dispatch::{BackwardCtx, Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call1, downcast_op};
use crate::{Result, Tensor, TensorOptions};

/// Dispatch table of [`ZeroGradDraw`] (`bernoulli`, `normal`, `poisson`
/// with tensor parameters).
pub static ZERO_GRAD_DRAW: OpEntry = OpEntry::differentiable("ferrotorch::random_sample");

/// Passes a drawn sample (input 0) through and gives each further input
/// (the distribution's parameters) a zero gradient, under the node name
/// PyTorch uses for that sampler.
#[derive(Debug, Clone, Copy)]
pub struct ZeroGradDraw {
    /// The node's name (`NormalBackward3`).
    pub node: &'static str,
}

impl Op for ZeroGradDraw {
    fn entry(&self) -> &'static OpEntry {
        &ZERO_GRAD_DRAW
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        Ok(smallvec::smallvec![OutSpec::new(inputs[0].dims(), inputs[0].dtype())])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i > 0
    }

    fn saves(&self) -> Saves {
        Saves::NONE
    }

    fn backward_name(&self) -> String {
        self.node.to_string()
    }

    fn backward(&self, ctx: &BackwardCtx, _grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let mut out = vec![None];
        for i in 1..ctx.num_inputs() {
            let m = ctx.meta(i);
            let zeros = TensorOptions::new()
                .dtype(m.dtype)
                .device(m.device)
                .zeros(&m.shape[..])?;
            out.push(Some(zeros));
        }
        Ok(out)
    }
}

fn pass_through_kernel(call: &Call) -> Result<Tensors> {
    let _: &ZeroGradDraw = downcast_op(call.op)?;
    Ok(smallvec::smallvec![call.inputs[0].detach()])
}

/// `sample` with a zero-gradient node `node` over `params` when grad mode
/// is on and a parameter requires grad; `sample` itself otherwise.
pub(crate) fn attach_zero_grad(sample: Tensor, params: &[&Tensor], node: &'static str) -> Result<Tensor> {
    if !crate::autograd::is_grad_enabled() || !params.iter().any(|p| p.requires_grad()) {
        return Ok(sample);
    }
    let mut inputs = vec![&sample];
    inputs.extend_from_slice(params);
    call1(&ZeroGradDraw { node }, &inputs)
}

pub(crate) fn register() -> Result<()> {
    ZERO_GRAD_DRAW.register_builtin(Slot::AnyBackend, Kernel::Functional(pass_through_kernel))
}
