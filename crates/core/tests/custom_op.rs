//! An out-of-tree operator declared differentiable but without a backward
//! formula: its forward runs and records a graph node, and backward through
//! it is an error naming the operator (never a silently missing gradient).

use ferrotorch_core::autograd::Saves;
use ferrotorch_core::backend::dispatch::{DispatchKey, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, call1};
use ferrotorch_core::{Result, Tensor};

static TWICE: OpEntry = OpEntry::differentiable("test::twice");

/// `2 x`, with no `backward` of its own.
#[derive(Debug, Clone)]
struct Twice;

impl Op for Twice {
    fn entry(&self) -> &'static OpEntry {
        &TWICE
    }
    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        Ok([OutSpec::new(inputs[0].dims(), inputs[0].dtype())]
            .into_iter()
            .collect())
    }
    fn saves(&self) -> Saves {
        Saves::INPUTS
    }
}

fn twice_cpu(_op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    outputs[0].copy_(&inputs[0].mul(2.0)?).map(|_| ())
}

#[test]
fn backward_through_an_op_without_a_formula_names_it() -> Result<()> {
    TWICE.register(Slot::Key(DispatchKey::Cpu), Kernel::Structured(twice_cpu))?;
    let x = Tensor::from_slice(&[1.0f32, -3.0]).requires_grad_(true)?;
    let y = call1(&Twice, &[&x])?;
    assert_eq!(y.to_vec::<f32>()?, [2.0, -6.0]);
    assert!(y.requires_grad());
    let e = y.sum()?.backward().unwrap_err().to_string();
    assert!(
        e.contains("test::twice") && e.contains("has no backward formula"),
        "{e}"
    );
    assert!(x.grad_opt().is_none(), "a gradient was accumulated");
    Ok(())
}
