//! The communication of tensor parallelism as autograd functions on local
//! tensors (Megatron-LM's conjugate pairs): what a forward does along the
//! mesh, and the backward that makes the gradients right.
//!
//! | function | forward | backward |
//! |---|---|---|
//! | `Comm::Copy` | identity | all-reduce (sum) |
//! | `Comm::Reduce` | all-reduce (sum) | identity |
//! | `Comm::Gather(d)` | all-gather along `d` | reduce-scatter along `d` |
//! | `Comm::ReduceScatter(d)` | reduce-scatter along `d` | all-gather along `d` |
//! | `Comm::GatherWhole(d)` | all-gather along `d` | this rank's chunk |
//! | `Comm::Chunk(d)` | this rank's chunk along `d` | all-gather along `d` |
//!
//! `Copy` enters a region whose ranks each compute a part of the input's
//! gradient (a column-parallel layer on a replicated input); `Reduce`
//! leaves a region that computed partial sums (a row-parallel layer). The
//! `d`-variants do the same for sequence parallelism. Chunks follow
//! `torch.chunk`; a gather whose length is not given assumes even chunks.

use std::sync::Arc;

use ferrotorch_core::Tensor;
use ferrotorch_core::autograd::{Function, FunctionCtx, apply_function};

use crate::device_mesh::DeviceMesh;
use crate::dtensor::redistribute::{self as rd, Line};
use crate::error::Result;
use crate::reduce_op::ReduceOp;

/// One communication pattern (see the module's table).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Comm {
    Copy,
    Reduce,
    Gather(usize),
    ReduceScatter(usize),
    GatherWhole(usize),
    Chunk(usize),
}

/// Runs `comm` on `x` along the 1-D `mesh`, in the autograd graph.
/// `len` is the whole length along the dimension gathered (forward or
/// backward), when the chunks may be uneven.
pub(crate) fn apply(comm: Comm, x: &Tensor, mesh: &Arc<DeviceMesh>, len: Option<usize>) -> Result<Tensor> {
    let f = TpComm {
        comm,
        mesh: mesh.clone(),
        len: len.unwrap_or(match comm {
            Comm::Gather(d) | Comm::GatherWhole(d) => x.shape().get(d).copied().unwrap_or(0) * mesh.size(0)?,
            Comm::ReduceScatter(d) | Comm::Chunk(d) => x.shape().get(d).copied().unwrap_or(0),
            Comm::Copy | Comm::Reduce => 0,
        }),
    };
    Ok(apply_function(f, &[x])?.remove(0))
}

struct TpComm {
    comm: Comm,
    mesh: Arc<DeviceMesh>,
    /// The whole length of the dimension that is gathered or cut.
    len: usize,
}

impl TpComm {
    fn run(&self, x: &Tensor, forward: bool) -> Result<Tensor> {
        let line = Line::new(&self.mesh, 0)?;
        let op = match (self.comm, forward) {
            (Comm::Copy, true) | (Comm::Reduce, false) => return Ok(x.clone()),
            (c, true) => c,
            (Comm::Copy, false) => Comm::Reduce,
            (Comm::Gather(d), false) => Comm::ReduceScatter(d),
            (Comm::ReduceScatter(d), false) | (Comm::Chunk(d), false) => Comm::GatherWhole(d),
            (Comm::GatherWhole(d), false) => Comm::Chunk(d),
        };
        match op {
            Comm::Reduce => rd::reduce(x, &line, ReduceOp::Sum),
            Comm::Gather(d) | Comm::GatherWhole(d) => rd::gather(x, &line, d, self.len),
            Comm::ReduceScatter(d) => rd::reduce_scatter(x, &line, ReduceOp::Sum, d),
            Comm::Chunk(d) => Ok(rd::chunk(x, d, line.n, line.me)?.contiguous()?),
            Comm::Copy => Ok(x.clone()),
        }
    }
}

impl Function for TpComm {
    fn name(&self) -> String {
        format!("TensorParallel{:?}Backward", self.comm)
    }

    fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[Tensor]) -> ferrotorch_core::Result<Vec<Tensor>> {
        let y = self.run(&inputs[0], true)?;
        // An output must not be the input itself (identity forward).
        Ok(vec![if y.is_same(&inputs[0]) { y.detach() } else { y }])
    }

    fn backward(&self, _ctx: &FunctionCtx, grads: &[Option<Tensor>]) -> ferrotorch_core::Result<Vec<Option<Tensor>>> {
        Ok(vec![match &grads[0] {
            Some(g) => Some(self.run(g, false)?),
            None => None,
        }])
    }
}
