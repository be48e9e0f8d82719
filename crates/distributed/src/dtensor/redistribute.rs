//! Moving a DTensor's local tensor from one list of placements to another
//! with the right collective for each mesh dimension (PyTorch's
//! `_redistribute.py`):
//!
//! | from | to | collective |
//! |---|---|---|
//! | `Shard(i)` | `Replicate` | all-gather |
//! | `Partial` | `Replicate` | all-reduce |
//! | `Partial` | `Shard(i)` | reduce-scatter |
//! | `Shard(i)` | `Shard(j)` | all-to-all |
//! | `Replicate` | `Shard(i)` | none (a local chunk) |
//! | `Replicate` | `Partial(sum)` | none (a division by the mesh dimension's size) |
//!
//! Shards of one tensor dimension over several mesh dimensions nest left
//! to right (mesh dimension 0 cuts first, the next cuts its chunk), so a
//! plan takes shards apart right to left and puts them together left to
//! right; a direct change (all-to-all, reduce-scatter) is used when no
//! other mesh dimension shards the tensor dimensions involved, else the
//! change goes through `Replicate`. Uneven chunks (`torch.chunk`'s) are
//! padded for the collectives and cut back after.
//!
//! As an autograd function, a redistribution's backward redistributes the
//! gradient the other way, a partial placement's gradient being
//! replicated (PyTorch's convention).

use std::sync::Arc;

use ferrotorch_core::autograd::{Function, FunctionCtx, apply_function};
use ferrotorch_core::{Tensor, TensorOptions};

use super::placement::{Placement, chunk_range, full_chunk};
use crate::device_mesh::DeviceMesh;
use crate::error::{DistError, Result};
use crate::group::ProcessGroup;
use crate::reduce_op::ReduceOp;

/// The group along mesh dimension `d`, its size, this rank's coordinate
/// on it, and the group rank of each coordinate.
pub(crate) struct Line {
    group: Arc<ProcessGroup>,
    pub(crate) n: usize,
    pub(crate) me: usize,
    group_rank: Vec<usize>,
}

impl Line {
    pub(crate) fn new(mesh: &DeviceMesh, d: usize) -> Result<Line> {
        let group = mesh.get_group(d)?;
        let ranks = mesh.line_ranks(d)?;
        let group_rank = ranks
            .iter()
            .map(|&g| {
                group.group_rank(g).ok_or_else(|| {
                    DistError::Collective(format!("DTensor: rank {g} is missing from mesh dimension {d}'s group"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let me = mesh.get_local_rank(d)?;
        Ok(Line {
            n: ranks.len(),
            group,
            me,
            group_rank,
        })
    }

    /// The coordinate of each group rank.
    fn coordinate_of(&self) -> Vec<usize> {
        let mut c = vec![0; self.n];
        for (k, &g) in self.group_rank.iter().enumerate() {
            c[g] = k;
        }
        c
    }
}

/// `x` with dimension `dim` grown to `len` by zeros at its end.
fn pad(x: &Tensor, dim: usize, len: usize) -> Result<Tensor> {
    let have = x.shape()[dim];
    if have >= len {
        return Ok(x.contiguous()?);
    }
    let mut shape = x.shape().to_vec();
    shape[dim] = len - have;
    let zeros = TensorOptions::new().dtype(x.dtype()).zeros(shape.as_slice())?;
    Ok(Tensor::cat(&[x.clone(), zeros], dim as i64)?)
}

/// Chunk `k` of `n` of `x` along `dim` (`torch.chunk`), as a view.
pub(crate) fn chunk(x: &Tensor, dim: usize, n: usize, k: usize) -> Result<Tensor> {
    let (start, len) = chunk_range(x.shape()[dim], n, k);
    Ok(x.narrow(dim as i64, start as i64, len as i64)?)
}

/// `Shard(dim)` -> `Replicate` along `line`: the chunks of a dimension of
/// `logical` elements gathered in coordinate order.
pub(crate) fn gather(x: &Tensor, line: &Line, dim: usize, logical: usize) -> Result<Tensor> {
    let full = full_chunk(logical, line.n);
    let mine = pad(x, dim, full)?;
    let outs: Vec<Tensor> = (0..line.n)
        .map(|_| mine.empty_like())
        .collect::<std::result::Result<_, _>>()?;
    line.group.all_gather(&outs, &mine)?.wait()?;
    let parts: Vec<Tensor> = (0..line.n)
        .map(|k| {
            let (_, len) = chunk_range(logical, line.n, k);
            outs[line.group_rank[k]].narrow(dim as i64, 0, len as i64)
        })
        .collect::<std::result::Result<_, _>>()?;
    Ok(Tensor::cat(&parts, dim as i64)?)
}

/// `Partial(op)` -> `Replicate`: the all-reduce of a copy.
pub(crate) fn reduce(x: &Tensor, line: &Line, op: ReduceOp) -> Result<Tensor> {
    let y = x.contiguous()?.clone_tensor()?;
    line.group.all_reduce(&y, op)?.wait()?;
    Ok(y)
}

/// `Partial(op)` -> `Shard(dim)`: the reduce-scatter of the chunks.
pub(crate) fn reduce_scatter(x: &Tensor, line: &Line, op: ReduceOp, dim: usize) -> Result<Tensor> {
    let full = full_chunk(x.shape()[dim], line.n);
    let coordinate = line.coordinate_of();
    let inputs: Vec<Tensor> = (0..line.n)
        .map(|g| pad(&chunk(x, dim, line.n, coordinate[g])?, dim, full))
        .collect::<Result<_>>()?;
    let out = inputs[0].empty_like()?;
    line.group.reduce_scatter(&out, &inputs, op)?.wait()?;
    let (_, len) = chunk_range(x.shape()[dim], line.n, line.me);
    Ok(out.narrow(dim as i64, 0, len as i64)?.contiguous()?)
}

/// `Shard(from)` -> `Shard(to)`: the all-to-all of the chunks along `to`,
/// put together along `from` (of `logical` elements).
fn all_to_all(x: &Tensor, line: &Line, from: usize, to: usize, logical: usize) -> Result<Tensor> {
    let coordinate = line.coordinate_of();
    let inputs: Vec<Tensor> = (0..line.n)
        .map(|g| Ok(chunk(x, to, line.n, coordinate[g])?.contiguous()?))
        .collect::<Result<_>>()?;
    let (_, mine_to) = chunk_range(x.shape()[to], line.n, line.me);
    let outputs: Vec<Tensor> = (0..line.n)
        .map(|g| {
            let mut shape = x.shape().to_vec();
            shape[from] = chunk_range(logical, line.n, coordinate[g]).1;
            shape[to] = mine_to;
            TensorOptions::new().dtype(x.dtype()).zeros(shape.as_slice())
        })
        .collect::<std::result::Result<_, _>>()?;
    line.group.all_to_all(&outputs, &inputs)?.wait()?;
    let parts: Vec<Tensor> = (0..line.n).map(|k| outputs[line.group_rank[k]].clone()).collect();
    Ok(Tensor::cat(&parts, from as i64)?)
}

/// `Replicate` -> `target` on one mesh dimension, locally.
fn from_replicate(x: &Tensor, line: &Line, target: Placement) -> Result<Tensor> {
    match target {
        Placement::Replicate => Ok(x.clone()),
        Placement::Shard(dim) => Ok(chunk(x, dim, line.n, line.me)?.contiguous()?),
        Placement::Partial(ReduceOp::Sum) => Ok(x.div(line.n as f64)?),
        // The reduction of n equal values is the value.
        Placement::Partial(ReduceOp::Avg | ReduceOp::Max | ReduceOp::Min) => Ok(x.clone()),
        Placement::Partial(op) => Err(DistError::InvalidArgument(format!(
            "DTensor: a replicated tensor cannot become Partial({op:?}); sum, avg, max and min can"
        ))),
    }
}

/// `distribute_tensor`'s step on mesh dimension `d`: the rank at
/// coordinate 0 holds the source `x`; `Shard(dim)` scatters its chunks,
/// `Replicate` broadcasts it.
pub(crate) fn from_source(x: &Tensor, mesh: &DeviceMesh, d: usize, p: Placement) -> Result<Tensor> {
    let line = Line::new(mesh, d)?;
    let root = line.group_rank[0];
    match p {
        Placement::Replicate => {
            let y = x.contiguous()?.clone_tensor()?;
            line.group.broadcast(&y, root)?.wait()?;
            Ok(y)
        }
        Placement::Shard(dim) => {
            let len = x.shape()[dim];
            let full = full_chunk(len, line.n);
            let mut shape = x.shape().to_vec();
            shape[dim] = full;
            let out = TensorOptions::new().dtype(x.dtype()).zeros(shape.as_slice())?;
            let inputs: Vec<Tensor> = if line.me == 0 {
                let coordinate = line.coordinate_of();
                (0..line.n)
                    .map(|g| pad(&chunk(x, dim, line.n, coordinate[g])?, dim, full))
                    .collect::<Result<_>>()?
            } else {
                Vec::new()
            };
            line.group.scatter(&out, &inputs, root)?.wait()?;
            let (_, mine) = chunk_range(len, line.n, line.me);
            Ok(out.narrow(dim as i64, 0, mine as i64)?.contiguous()?)
        }
        Placement::Partial(_) => Err(DistError::InvalidArgument(
            "distribute_tensor: Partial is not a placement to distribute with".into(),
        )),
    }
}

/// The size of tensor dimension `dim` at mesh dimension `d` on this rank:
/// the global size cut by the mesh dimensions before `d` that shard it.
fn logical(global: &[usize], placements: &[Placement], mesh: &DeviceMesh, d: usize, dim: usize) -> Result<usize> {
    let mut len = global[dim];
    for (e, p) in placements.iter().enumerate().take(d) {
        if *p == Placement::Shard(dim) {
            len = chunk_range(len, mesh.size(e)?, mesh.get_local_rank(e)?).1;
        }
    }
    Ok(len)
}

/// Checks `placements` against a mesh and a global shape.
pub(crate) fn check(mesh: &DeviceMesh, placements: &[Placement], shape: &[usize], op: &str) -> Result<()> {
    if placements.len() != mesh.ndim() {
        return Err(DistError::InvalidArgument(format!(
            "{op}: {} placements for a mesh of {} dimensions (one per mesh dimension)",
            placements.len(),
            mesh.ndim()
        )));
    }
    for p in placements {
        if let Placement::Shard(d) = p
            && *d >= shape.len()
        {
            return Err(DistError::InvalidArgument(format!(
                "{op}: {p} shards dimension {d} of a tensor of shape {shape:?}"
            )));
        }
    }
    Ok(())
}

/// Moves `x` (this rank's local tensor of a DTensor of `global` shape)
/// from placements `from` to `to` on `mesh`; outside autograd.
pub(crate) fn transform(
    x: &Tensor,
    mesh: &DeviceMesh,
    global: &[usize],
    from: &[Placement],
    to: &[Placement],
) -> Result<Tensor> {
    let m = mesh.ndim();
    let mut cur = from.to_vec();
    // Which mesh dimensions change directly (all-to-all, reduce-scatter,
    // or a straight gather / reduce / local step) and which go through
    // Replicate.
    let shards = |d: usize, dim: usize| {
        (0..m).any(|e| e != d && (from[e] == Placement::Shard(dim) || to[e] == Placement::Shard(dim)))
    };
    let mut via = vec![false; m];
    for d in 0..m {
        via[d] = match (from[d], to[d]) {
            (a, b) if a == b => false,
            (Placement::Shard(i), Placement::Shard(j)) => shards(d, i) || shards(d, j),
            (Placement::Partial(_), Placement::Shard(j)) => shards(d, j),
            (Placement::Shard(_), Placement::Partial(_)) | (Placement::Partial(_), Placement::Partial(_)) => true,
            _ => false,
        };
    }
    // A mesh dimension that changes a tensor dimension's sharding needs
    // the later mesh dimensions that shard it taken apart first (they cut
    // inside its chunks).
    let mut changed = true;
    while changed {
        changed = false;
        for d in 0..m {
            let moves = from[d] != to[d] || via[d];
            let dims: Vec<usize> = [from[d], to[d]]
                .iter()
                .filter_map(|p| if let Placement::Shard(i) = p { Some(*i) } else { None })
                .collect();
            if !moves || dims.is_empty() {
                continue;
            }
            for e in d + 1..m {
                if !via[e] && dims.iter().any(|&i| from[e] == Placement::Shard(i)) {
                    via[e] = true;
                    changed = true;
                }
            }
        }
    }
    let mut x = x.clone();
    // Taking apart, right to left.
    for d in (0..m).rev() {
        if cur[d] == to[d] && !via[d] {
            continue;
        }
        let line = Line::new(mesh, d)?;
        let target = if via[d] { Placement::Replicate } else { to[d] };
        x = match (cur[d], target) {
            (a, b) if a == b => x,
            (Placement::Shard(i), Placement::Replicate) => gather(&x, &line, i, logical(global, &cur, mesh, d, i)?)?,
            (Placement::Partial(op), Placement::Replicate) => reduce(&x, &line, op)?,
            (Placement::Partial(op), Placement::Shard(j)) => reduce_scatter(&x, &line, op, j)?,
            (Placement::Shard(i), Placement::Shard(j)) => {
                all_to_all(&x, &line, i, j, logical(global, &cur, mesh, d, i)?)?
            }
            // From Replicate: left for the second pass.
            (Placement::Replicate, _) => continue,
            (a, b) => {
                return Err(DistError::InvalidArgument(format!(
                    "DTensor: no direct change from {a} to {b} (internal plan error)"
                )));
            }
        };
        cur[d] = target;
    }
    // Putting together, left to right.
    for d in 0..m {
        if cur[d] != to[d] {
            debug_assert!(cur[d].is_replicate());
            x = from_replicate(&x, &Line::new(mesh, d)?, to[d])?;
            cur[d] = to[d];
        }
    }
    Ok(x)
}

/// [`transform`] as an autograd function: its backward moves the gradient
/// from `to` back to `from` (partial placements' gradients replicated).
struct Redistribute {
    mesh: Arc<DeviceMesh>,
    shape: Vec<usize>,
    from: Vec<Placement>,
    to: Vec<Placement>,
}

impl Function for Redistribute {
    fn name(&self) -> String {
        "RedistributeBackward".into()
    }

    fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[Tensor]) -> ferrotorch_core::Result<Vec<Tensor>> {
        Ok(vec![transform(
            &inputs[0],
            &self.mesh,
            &self.shape,
            &self.from,
            &self.to,
        )?])
    }

    fn backward(&self, _ctx: &FunctionCtx, grads: &[Option<Tensor>]) -> ferrotorch_core::Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else { return Ok(vec![None]) };
        let from: Vec<Placement> = self.to.iter().map(|p| p.of_gradient()).collect();
        let to: Vec<Placement> = self.from.iter().map(|p| p.of_gradient()).collect();
        let g = transform(g, &self.mesh, &self.shape, &from, &to)?;
        Ok(vec![Some(g)])
    }
}

/// Redistributes `x` from `from` to `to`, recorded for autograd when `x`
/// requires a gradient.
pub(crate) fn redistribute(
    x: &Tensor,
    mesh: &Arc<DeviceMesh>,
    shape: &[usize],
    from: &[Placement],
    to: &[Placement],
) -> Result<Tensor> {
    if from == to {
        return Ok(x.clone());
    }
    let f = Redistribute {
        mesh: mesh.clone(),
        shape: shape.to_vec(),
        from: from.to_vec(),
        to: to.to_vec(),
    };
    Ok(apply_function(f, &[x])?.remove(0))
}
