//! Tensor parallelism (`torch.distributed.tensor.parallel`): layers cut
//! across the ranks of a 1-D mesh, each rank computing its part, with
//! the collectives that make the outputs and gradients those of the whole
//! layer. [`parallelize_module`] applies a plan of
//! [`ColwiseParallel`], [`RowwiseParallel`] and [`SequenceParallel`] to
//! submodules by name; [`loss_parallel_cross_entropy`] takes the
//! cross-entropy of logits whose vocabulary is cut across the ranks,
//! without gathering them.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ferrotorch_core::Tensor;
//! use ferrotorch_distributed::{InitOptions, get_world_size, init_device_mesh, init_process_group};
//! use ferrotorch_distributed::tensor_parallel::{ColwiseParallel, RowwiseParallel, parallelize_module};
//! use ferrotorch_nn::{Forward, Linear, Module, ModuleState};
//!
//! #[derive(Module)]
//! # #[module(crate = ferrotorch_nn)] // (users of the facade crate leave this out)
//! struct Mlp { state: ModuleState, fc1: Linear, fc2: Linear }
//! impl Forward for Mlp {
//!     fn forward(&self, x: &Tensor) -> ferrotorch_core::Result<Tensor> {
//!         self.fc2.call(&self.fc1.call(x)?.relu()?)
//!     }
//! }
//!
//! init_process_group(InitOptions::new("tcp"))?; // under ferrorun / torchrun
//! let tp = Arc::new(init_device_mesh("cpu", &[get_world_size()?], None)?);
//! let mlp = Mlp { state: ModuleState::default(), fc1: Linear::new(16, 64)?, fc2: Linear::new(64, 16)? };
//! parallelize_module(&mlp, &tp, &[
//!     ("fc1", ColwiseParallel::default().into()),
//!     ("fc2", RowwiseParallel::default().into()),
//! ])?;
//! let y = mlp.call(&Tensor::randn((4, 16))?)?; // the whole MLP's output on every rank
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod comm;
mod loss;
mod style;

use std::sync::Arc;

use ferrotorch_nn::Module;

use crate::device_mesh::DeviceMesh;
use crate::error::{DistError, Result};
pub use loss::loss_parallel_cross_entropy;
pub use style::{ColwiseParallel, LAST, ParallelStyle, RowwiseParallel, SequenceParallel};

/// Applies each `(pattern, style)` of `plan` to the submodules of
/// `module` whose name matches the pattern (dot-separated; `*` matches one
/// name, as in `h.*.mlp.c_fc`), over the 1-D `mesh`. Parameters are cut
/// from rank 0's values (or copied from them, for whole ones), as
/// `distribute_tensor` does; a parameter two layers share (a tied
/// embedding and head) is cut once. Errors: a mesh of other than one dimension, a
/// pattern that matches no module, a style on a layer it does not apply
/// to, an unsupported layout, a shared parameter cut two ways.
pub fn parallelize_module<M: Module + ?Sized>(
    module: &M,
    mesh: &Arc<DeviceMesh>,
    plan: &[(&str, ParallelStyle)],
) -> Result<()> {
    if mesh.ndim() != 1 {
        return Err(DistError::InvalidArgument(format!(
            "parallelize_module: the mesh must have 1 dimension (pass the tensor-parallel one of a larger mesh), \
             got {}",
            mesh.ndim()
        )));
    }
    let modules = module.named_modules();
    let mut done = style::Done::default();
    for (pattern, style) in plan {
        let mut hit = false;
        for (name, m) in &modules {
            if matches(pattern, name) {
                style::apply(name, *m, mesh, *style, &mut done)?;
                hit = true;
            }
        }
        if !hit {
            return Err(DistError::InvalidArgument(format!(
                "parallelize_module: no submodule matches {pattern:?}"
            )));
        }
    }
    Ok(())
}

/// Whether the dotted `name` matches `pattern` (`*` stands for one part).
fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), name.split('.').collect());
    p.len() == n.len() && p.iter().zip(&n).all(|(a, b)| *a == "*" || a == b)
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns_match_one_part_per_star() {
        assert!(super::matches("h.*.mlp.c_fc", "h.3.mlp.c_fc"));
        assert!(!super::matches("h.*.mlp.c_fc", "h.3.mlp"));
        assert!(!super::matches("h.*", "h.3.mlp"));
        assert!(super::matches("fc1", "fc1") && !super::matches("fc1", "fc10"));
    }
}
