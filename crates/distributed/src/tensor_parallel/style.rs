//! The parallel styles (`torch.distributed.tensor.parallel.style`): how a
//! layer's parameters are cut across a 1-D mesh and what its forward's
//! inputs and outputs go through.
//!
//! Modules keep plain local tensors: the layer computes on its shards,
//! and the hooks put the collectives of [`super::comm`] around it. So an
//! output is always the local tensor (PyTorch's `use_local_output=True`),
//! laid out as the style's `output_layouts` says.

use std::sync::{Arc, Mutex};

use ferrotorch_core::Tensor;
use ferrotorch_core::autograd::no_grad;
use ferrotorch_nn::{Module, ModuleState, Parameter};

use super::comm::{self, Comm};
use crate::device_mesh::DeviceMesh;
use crate::dtensor::{Placement, chunk_range, distribute_tensor};
use crate::error::{DistError, Result};

/// The last dimension in a placement: `Placement::Shard(LAST)` is
/// PyTorch's `Shard(-1)`.
pub const LAST: usize = usize::MAX;

/// Column-wise parallel (`ColwiseParallel`): a `Linear`'s output features
/// (its weight's rows and its bias) or an `Embedding`'s embedding
/// dimension are cut across the ranks. Input layouts: `Replicate` (the
/// default) or `Shard(1)` (sequence parallel: the input's sequence
/// dimension is gathered first). Output layouts: `Shard(LAST)` (PyTorch's `Shard(-1)`, the default:
/// each rank keeps its features, for a row-wise layer or loss parallel
/// next) or `Replicate` (gathered).
///
/// Beyond PyTorch, `fused` cuts a fused projection (nanoGPT's `c_attn`,
/// whose outputs are q, k and v one after the other: `fused: 3`) block by
/// block: each rank's output is its chunk of every block, in order, so
/// the layer's forward can split it as the whole one's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColwiseParallel {
    /// How the input arrives.
    pub input_layouts: Placement,
    /// How the output leaves.
    pub output_layouts: Placement,
    /// The number of equal blocks the output features consist of (1).
    pub fused: usize,
}

impl Default for ColwiseParallel {
    fn default() -> Self {
        ColwiseParallel {
            input_layouts: Placement::Replicate,
            output_layouts: Placement::Shard(LAST),
            fused: 1,
        }
    }
}

/// Row-wise parallel (`RowwiseParallel`): a `Linear`'s input features
/// (its weight's columns; the bias stays whole) or an `Embedding`'s rows
/// (the vocabulary) are cut across the ranks, and the partial outputs are
/// summed. Input layouts: `Shard(LAST)` (the default, a column-wise layer's
/// output) or `Replicate` (cut here). Output layouts: `Replicate` (the
/// default: all-reduce) or `Shard(1)` (sequence parallel: reduce-scatter
/// along the sequence).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowwiseParallel {
    /// How the input arrives.
    pub input_layouts: Placement,
    /// How the output leaves.
    pub output_layouts: Placement,
}

impl Default for RowwiseParallel {
    fn default() -> Self {
        RowwiseParallel {
            input_layouts: Placement::Shard(LAST),
            output_layouts: Placement::Replicate,
        }
    }
}

/// Sequence parallel (`SequenceParallel`): a layer that works on each
/// position alone (LayerNorm, RMSNorm, Dropout) runs on this rank's part of
/// the sequence (dimension `sequence_dim` of its input, 1 by default). Its
/// parameters stay whole on every rank, and their gradients are summed
/// over the ranks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SequenceParallel {
    /// The sequence dimension of the input.
    pub sequence_dim: usize,
}

impl Default for SequenceParallel {
    fn default() -> Self {
        SequenceParallel { sequence_dim: 1 }
    }
}

/// One entry of a parallelize plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParallelStyle {
    /// [`ColwiseParallel`].
    Colwise(ColwiseParallel),
    /// [`RowwiseParallel`].
    Rowwise(RowwiseParallel),
    /// [`SequenceParallel`].
    Sequence(SequenceParallel),
}

impl From<ColwiseParallel> for ParallelStyle {
    fn from(s: ColwiseParallel) -> Self {
        ParallelStyle::Colwise(s)
    }
}

impl From<RowwiseParallel> for ParallelStyle {
    fn from(s: RowwiseParallel) -> Self {
        ParallelStyle::Rowwise(s)
    }
}

impl From<SequenceParallel> for ParallelStyle {
    fn from(s: SequenceParallel) -> Self {
        ParallelStyle::Sequence(s)
    }
}

/// Whether `p` is `Shard(LAST)`.
fn is_last(p: Placement) -> bool {
    p == Placement::Shard(LAST)
}

/// What a style needs of the module: its kind, hooks and parameters.
struct Target<'a> {
    fqn: &'a str,
    kind: String,
    state: &'a ModuleState,
    weight: Parameter,
    bias: Option<Parameter>,
}

impl<'a> Target<'a> {
    fn of(fqn: &'a str, m: &'a dyn Module) -> Result<Target<'a>> {
        let kind = m.type_name().into_owned();
        let state = m.state().ok_or_else(|| {
            DistError::InvalidArgument(format!("parallelize_module: {fqn} ({kind}) has no ModuleState"))
        })?;
        let own: Vec<(String, Parameter)> = m
            .named_parameters()
            .into_iter()
            .filter(|(n, _)| !n.contains('.'))
            .collect();
        let get = |name: &str| own.iter().find(|(n, _)| n == name).map(|(_, p)| p.clone());
        let weight = get("weight")
            .ok_or_else(|| DistError::InvalidArgument(format!("parallelize_module: {fqn} ({kind}) has no weight")))?;
        Ok(Target {
            fqn,
            kind,
            state,
            bias: get("bias"),
            weight,
        })
    }

    fn unsupported(&self, style: &str) -> DistError {
        DistError::InvalidArgument(format!(
            "parallelize_module: {style} does not apply to {} ({}): it shards Linear and Embedding",
            self.fqn, self.kind
        ))
    }
}

/// The parameters one `parallelize_module` call has cut so far (a tied
/// weight is met twice): id, dimension (`None`: whole) and blocks.
#[derive(Default)]
pub(crate) struct Done(Vec<(usize, Option<usize>, usize)>);

impl Done {
    /// Cuts `p` along `dim` from rank 0's values (`distribute_tensor`),
    /// each of its `parts` equal blocks alike, or makes rank 0's whole
    /// value every rank's (`None`); nothing for a parameter cut the same
    /// way before, an error for one cut another way.
    fn shard(
        &mut self,
        fqn: &str,
        p: &Parameter,
        mesh: &Arc<DeviceMesh>,
        dim: Option<usize>,
        parts: usize,
    ) -> Result<()> {
        if let Some(&(_, d, k)) = self.0.iter().find(|(id, _, _)| *id == p.id()) {
            if (d, k) == (dim, parts) {
                return Ok(());
            }
            return Err(DistError::InvalidArgument(format!(
                "parallelize_module: {fqn} shares a parameter with a layer that cut it another way (along {d:?}, not \
                 {dim:?})"
            )));
        }
        let full = p.tensor().detach();
        let local = match dim {
            None => no_grad(|| distribute_tensor(&full, mesh, &[Placement::Replicate]))?.to_local(),
            Some(d) => {
                let len = full.shape()[d];
                if parts == 0 || !len.is_multiple_of(parts) {
                    return Err(DistError::InvalidArgument(format!(
                        "parallelize_module: {fqn}: {len} features are not {parts} equal fused blocks"
                    )));
                }
                let blocks: Vec<Tensor> = (0..parts)
                    .map(|j| {
                        let block = full.narrow(d as i64, (j * len / parts) as i64, (len / parts) as i64)?;
                        Ok(
                            no_grad(|| distribute_tensor(&block.contiguous()?, mesh, &[Placement::Shard(d)]))?
                                .to_local(),
                        )
                    })
                    .collect::<Result<_>>()?;
                Tensor::cat(&blocks, d as i64)?
            }
        };
        p.set_tensor(local.detach())?;
        self.0.push((p.id(), dim, parts));
        Ok(())
    }
}

/// The layouts a style accepts, checked.
fn check_layout(fqn: &str, what: &str, got: Placement, allowed: &[Placement]) -> Result<()> {
    if allowed.contains(&got) {
        return Ok(());
    }
    let show = |p: &Placement| {
        if is_last(*p) {
            "S(-1)".to_string()
        } else {
            p.to_string()
        }
    };
    Err(DistError::InvalidArgument(format!(
        "parallelize_module: {fqn}: {what} {} is not supported here (supported: {})",
        show(&got),
        allowed.iter().map(show).collect::<Vec<_>>().join(", ")
    )))
}

/// Applies `style` to the module `m` (named `fqn`) over the 1-D `mesh`.
pub(crate) fn apply(
    fqn: &str,
    m: &dyn Module,
    mesh: &Arc<DeviceMesh>,
    style: ParallelStyle,
    done: &mut Done,
) -> Result<()> {
    match style {
        ParallelStyle::Colwise(s) => colwise(&Target::of(fqn, m)?, mesh, s, done),
        ParallelStyle::Rowwise(s) => rowwise(&Target::of(fqn, m)?, mesh, s, done),
        ParallelStyle::Sequence(s) => sequence(fqn, m, mesh, s, done),
    }
}

fn colwise(t: &Target, mesh: &Arc<DeviceMesh>, s: ColwiseParallel, done: &mut Done) -> Result<()> {
    let seq = Placement::Shard(1);
    check_layout(t.fqn, "input layout", s.input_layouts, &[Placement::Replicate, seq])?;
    check_layout(
        t.fqn,
        "output layout",
        s.output_layouts,
        &[Placement::Shard(LAST), Placement::Replicate],
    )?;
    // Linear: weight [out, in] by rows, bias by rows; Embedding: weight
    // [vocab, dim] by columns.
    let (dim, features) = match t.kind.as_str() {
        "Linear" => (0, t.weight.shape()[0]),
        "Embedding" => (1, t.weight.shape()[1]),
        _ => return Err(t.unsupported("ColwiseParallel")),
    };
    if s.fused != 1 && (t.kind != "Linear" || s.output_layouts == Placement::Replicate) {
        return Err(DistError::InvalidArgument(format!(
            "parallelize_module: {}: fused blocks apply to a Linear whose output stays cut",
            t.fqn
        )));
    }
    done.shard(t.fqn, &t.weight, mesh, Some(dim), s.fused)?;
    if let Some(b) = &t.bias {
        done.shard(t.fqn, b, mesh, Some(0), s.fused)?;
    }
    let input = match (t.kind.as_str(), s.input_layouts) {
        ("Embedding", Placement::Replicate) => None,
        ("Embedding", _) => {
            return Err(DistError::InvalidArgument(format!(
                "parallelize_module: {}: an Embedding's token ids arrive whole (input layout Replicate)",
                t.fqn
            )));
        }
        (_, Placement::Replicate) => Some(Comm::Copy),
        _ => Some(Comm::Gather(1)),
    };
    let m = mesh.clone();
    t.state.register_forward_pre_hook(move |_, inputs| match input {
        Some(c) => Ok(Some(map_first(inputs, |x| comm::apply(c, x, &m, None))?)),
        None => Ok(None),
    });
    if s.output_layouts == Placement::Replicate {
        let m = mesh.clone();
        t.state.register_forward_hook(move |_, _, outputs| {
            Ok(Some(map_first(outputs, |y| {
                comm::apply(Comm::GatherWhole(y.dim().saturating_sub(1)), y, &m, Some(features))
            })?))
        });
    }
    Ok(())
}

fn rowwise(t: &Target, mesh: &Arc<DeviceMesh>, s: RowwiseParallel, done: &mut Done) -> Result<()> {
    check_layout(
        t.fqn,
        "input layout",
        s.input_layouts,
        &[Placement::Shard(LAST), Placement::Replicate],
    )?;
    check_layout(
        t.fqn,
        "output layout",
        s.output_layouts,
        &[Placement::Replicate, Placement::Shard(1)],
    )?;
    let out = match s.output_layouts {
        Placement::Replicate => Comm::Reduce,
        _ => Comm::ReduceScatter(1),
    };
    match t.kind.as_str() {
        "Linear" => {
            let in_features = t.weight.shape()[1];
            done.shard(t.fqn, &t.weight, mesh, Some(1), 1)?;
            if let Some(b) = &t.bias {
                done.shard(t.fqn, b, mesh, None, 1)?;
            }
            // The bias is added once, after the partial outputs are summed:
            // the layer runs with a zero bias in its place.
            let bias = t.bias.clone();
            let aside: Arc<Mutex<Option<Tensor>>> = Arc::default();
            let (m, keep) = (mesh.clone(), aside.clone());
            let cut = s.input_layouts == Placement::Replicate;
            t.state.register_forward_pre_hook(move |_, inputs| {
                if let Some(b) = &bias {
                    let zeros = b.tensor().detach().zeros_like()?;
                    *keep.lock().unwrap_or_else(|e| e.into_inner()) = Some(b.swap_tensor(zeros));
                }
                if cut {
                    let d = inputs.first().map_or(0, |x| x.dim().saturating_sub(1));
                    return Ok(Some(map_first(inputs, |x| {
                        comm::apply(Comm::Chunk(d), x, &m, Some(in_features))
                    })?));
                }
                Ok(None)
            });
            let (m, bias) = (mesh.clone(), t.bias.clone());
            t.state.register_forward_hook(move |_, _, outputs| {
                let real = aside.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let (Some(b), Some(real)) = (&bias, &real) {
                    b.swap_tensor(real.clone());
                }
                Ok(Some(map_first(outputs, |y| {
                    let y = comm::apply(out, y, &m, None)?;
                    match &real {
                        // On a sequence shard each rank sees part of the
                        // bias's gradient: summed over the ranks.
                        Some(b) if out != Comm::Reduce => Ok(y.add(&comm::apply(Comm::Copy, b, &m, None)?)?),
                        Some(b) => Ok(y.add(b)?),
                        None => Ok(y),
                    }
                })?))
            });
        }
        "Embedding" => {
            if s.input_layouts != Placement::Replicate && !is_last(s.input_layouts) {
                return Err(t.unsupported("RowwiseParallel"));
            }
            let vocab = t.weight.shape()[0];
            let n = mesh.size(0)?;
            let (start, len) = chunk_range(vocab, n, mesh.get_local_rank(0)?);
            done.shard(t.fqn, &t.weight, mesh, Some(0), 1)?;
            // Ids outside this rank's rows look up row 0 and are zeroed.
            let outside: Arc<Mutex<Option<Tensor>>> = Arc::default();
            let keep = outside.clone();
            t.state.register_forward_pre_hook(move |_, inputs| {
                Ok(Some(map_first(inputs, |ids| {
                    let off = ids.lt(start as i64)?.logical_or(&ids.ge((start + len) as i64)?)?;
                    let local = ids.sub(start as i64)?.masked_fill(&off, 0)?;
                    *keep.lock().unwrap_or_else(|e| e.into_inner()) = Some(off);
                    Ok(local)
                })?))
            });
            let m = mesh.clone();
            t.state.register_forward_hook(move |_, _, outputs| {
                let off = outside.lock().unwrap_or_else(|e| e.into_inner()).take();
                Ok(Some(map_first(outputs, |y| {
                    let y = match &off {
                        Some(off) => y.masked_fill(&off.unsqueeze(-1)?, 0.0)?,
                        None => y.clone(),
                    };
                    comm::apply(out, &y, &m, None)
                })?))
            });
        }
        _ => return Err(t.unsupported("RowwiseParallel")),
    }
    Ok(())
}

fn sequence(fqn: &str, m: &dyn Module, mesh: &Arc<DeviceMesh>, s: SequenceParallel, done: &mut Done) -> Result<()> {
    if s.sequence_dim == 0 {
        return Err(DistError::InvalidArgument(format!(
            "parallelize_module: {fqn}: SequenceParallel's sequence dimension must follow the batch's (got 0)"
        )));
    }
    let state = m
        .state()
        .ok_or_else(|| DistError::InvalidArgument(format!("parallelize_module: {fqn} has no ModuleState")))?;
    let params: Vec<Parameter> = m.parameters();
    for p in &params {
        done.shard(fqn, p, mesh, None, 1)?;
    }
    if params.is_empty() {
        return Ok(());
    }
    // During the forward each parameter is seen through `Copy`, whose
    // backward sums the gradients of the sequence shards.
    let aside: Arc<Mutex<Vec<Tensor>>> = Arc::default();
    let (keep, mesh, ps) = (aside.clone(), mesh.clone(), params.clone());
    state.register_forward_pre_hook(move |_, _| {
        let mut own = Vec::with_capacity(ps.len());
        for p in &ps {
            let t = p.tensor();
            let seen = if t.requires_grad() {
                comm::apply(Comm::Copy, &t, &mesh, None)?
            } else {
                t.clone()
            };
            own.push(p.swap_tensor(seen));
        }
        *keep.lock().unwrap_or_else(|e| e.into_inner()) = own;
        Ok(None)
    });
    state.register_forward_hook(move |_, _, _| {
        let own = std::mem::take(&mut *aside.lock().unwrap_or_else(|e| e.into_inner()));
        for (p, t) in params.iter().zip(own) {
            p.swap_tensor(t);
        }
        Ok(None)
    });
    Ok(())
}

/// `tensors` with the first one replaced by `f` of it.
fn map_first(tensors: &[Tensor], f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Vec<Tensor>> {
    let mut out = tensors.to_vec();
    if let Some(first) = out.first_mut() {
        *first = f(first)?;
    }
    Ok(out)
}
