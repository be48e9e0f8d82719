//! Loss parallel (`loss_parallel()`): the cross-entropy of logits whose
//! vocabulary is cut across the ranks (a column-parallel head's output),
//! from three small all-reduces instead of gathering the logits.

use std::sync::Arc;

use ferrotorch_core::autograd::no_grad;
use ferrotorch_core::{DType, Tensor};

use super::comm::{self, Comm};
use crate::device_mesh::DeviceMesh;
use crate::dtensor::chunk_range;
use crate::error::{DistError, Result};
use crate::reduce_op::ReduceOp;

/// The mean cross-entropy of `logits` (`[..., V_local]`, this rank's
/// columns of a vocabulary of `vocab` cut by `torch.chunk` over the 1-D
/// `mesh`) against `target` (`[...]` class ids of the whole vocabulary):
/// `cross_entropy(full_logits.view(-1, V), target.view(-1))`, with its
/// gradient, on every rank. Errors: a target whose shape is not the
/// logits' without the last dimension, logits whose last dimension is not
/// this rank's chunk of `vocab`, ids outside the vocabulary.
pub fn loss_parallel_cross_entropy(
    logits: &Tensor,
    target: &Tensor,
    vocab: usize,
    mesh: &Arc<DeviceMesh>,
) -> Result<Tensor> {
    let n = mesh.size(0)?;
    let (start, len) = chunk_range(vocab, n, mesh.get_local_rank(0)?);
    let shape = logits.shape();
    if shape.last() != Some(&len) || target.shape() != &shape[..shape.len() - 1] {
        return Err(DistError::InvalidArgument(format!(
            "loss_parallel_cross_entropy: logits {shape:?} (this rank's {len} of {vocab} classes last) and target {:?} \
             (the logits' shape without the classes) do not fit",
            target.shape()
        )));
    }
    let (lo, hi) = no_grad(|| -> Result<(i64, i64)> {
        let t = target.to_dtype(DType::I64)?;
        let (lo, hi) = (t.amin(Vec::<usize>::new(), false)?, t.amax(Vec::<usize>::new(), false)?);
        Ok((lo.item::<i64>()?, hi.item::<i64>()?))
    })
    .unwrap_or((0, 0));
    if target.numel() > 0 && (lo < 0 || hi >= vocab as i64) {
        return Err(DistError::InvalidArgument(format!(
            "loss_parallel_cross_entropy: target ids must lie in [0, {vocab}), got {lo}..={hi}"
        )));
    }
    // The largest logit over every rank (no gradient: the loss does not
    // depend on it), subtracted for a stable exp.
    let max = no_grad(|| -> Result<Tensor> {
        let m = logits.detach().amax(-1, true)?.contiguous()?;
        mesh.get_group(0)?.all_reduce(&m, ReduceOp::Max)?.wait()?;
        Ok(m)
    })?;
    let z = logits.sub(&max)?;
    let sum_exp = comm::apply(Comm::Reduce, &z.exp()?.sum_dim(-1, false)?, mesh, None)?;
    // The target's logit: from the rank that holds its column.
    let target = target.to_dtype(DType::I64)?;
    let off = target.lt(start as i64)?.logical_or(&target.ge((start + len) as i64)?)?;
    let local = target.sub(start as i64)?.masked_fill(&off, 0)?;
    let picked = z
        .gather(-1, &local.unsqueeze(-1)?)?
        .squeeze_dim(-1)?
        .masked_fill(&off, 0.0)?;
    let picked = comm::apply(Comm::Reduce, &picked, mesh, None)?;
    Ok(sum_exp.log()?.sub(&picked)?.mean()?)
}
