//! The parameters of one `fully_shard` call: how they are cut across the
//! ranks, gathered for a forward or backward, freed again, and how their
//! gradients are reduce-scattered (PyTorch's `FSDPParamGroup`).
//!
//! Layout. Each parameter is cut along dimension 0 as `torch.chunk` cuts
//! it (rank `r` holds rows `chunk_range(rows, n, r)`), and each rank's
//! piece is padded to `ceil(rows / n)` rows. A rank's block of the flat
//! all-gather buffer is its padded pieces of every parameter one after the
//! other, so one `all_gather_into_tensor` gathers the whole group, and the
//! rank's own block of the output is where its pieces are written (no
//! input copy). The gathered parameter of each is a tensor of its own
//! whose memory is freed ([`Storage::release_cpu`]) whenever it is not
//! needed and brought back by the next gather, so that the tensors the
//! autograd graph saved from it stay valid handles.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use ferrotorch_core::autograd::{Function, FunctionCtx, apply_function, is_grad_enabled, no_grad};
use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::{DType, Tensor, TensorOptions};
use ferrotorch_nn::{Module, Parameter};

use super::options::FsdpOptions;
use crate::device_mesh::DeviceMesh;
use crate::dtensor::{Placement, chunk_range};
use crate::error::{DistError, Result};
use crate::group::ProcessGroup;
use crate::reduce_op::ReduceOp;
use crate::work::Work;

/// The key under which a sharded module keeps its group
/// ([`ferrotorch_nn::ModuleState::attach`]).
pub(crate) const STATE_KEY: &str = "fsdp";

/// The group of a module sharded by `fully_shard`, if it is one.
pub(crate) fn group_of(m: &dyn Module) -> Option<Arc<ParamGroup>> {
    m.state()?.attachment(STATE_KEY)?.downcast::<ParamGroup>().ok()
}

/// One sharded parameter.
pub(crate) struct FsdpParam {
    /// Its name inside the module `fully_shard` was called on.
    pub(crate) name: String,
    /// The module's handle: holds the local shard, except during the
    /// module's forward, when it holds the gathered parameter.
    pub(crate) param: Parameter,
    /// The unsharded shape.
    pub(crate) shape: Vec<usize>,
    /// Elements per row of dimension 0.
    row: usize,
    /// Offset of its padded piece in a rank's block (elements).
    offset: usize,
    /// The gathered parameter (in the group's parameter dtype), its memory
    /// released while sharded.
    unsharded: Tensor,
}

impl FsdpParam {
    /// This rank's rows (start, count) of a parameter of `rows` rows over `n` ranks.
    fn rows(&self, n: usize, r: usize) -> (usize, usize) {
        chunk_range(self.shape[0], n, r)
    }
}

/// What a group does between its hooks.
#[derive(Default)]
struct State {
    /// The shards swapped out of the parameters during a forward.
    shards: Option<Vec<Tensor>>,
    /// An all-gather started ahead of use (prefetch) and its output.
    pending: Option<(Work, Tensor)>,
    /// Whether this group was the outermost one of the current forward.
    pub(crate) is_root: bool,
    /// The outermost group of the current forward.
    root: Weak<ParamGroup>,
    /// Root only: the groups in the order their forwards began, this
    /// iteration and the one before (for prefetching).
    order: Vec<Weak<ParamGroup>>,
    prev_order: Vec<Weak<ParamGroup>>,
    /// Gradients of the gathered parameters summed over backwards run
    /// without gradient sync, added to the next synced backward's.
    held_grads: Option<Vec<Option<Tensor>>>,
    /// Whether backward reduce-scatters (false: `no_sync`).
    no_sync: bool,
}

/// The parameters of one `fully_shard` call and their collectives.
pub(crate) struct ParamGroup {
    pub(crate) mesh: Arc<DeviceMesh>,
    shard_group: Arc<ProcessGroup>,
    replicate_group: Option<Arc<ProcessGroup>>,
    pub(crate) params: Vec<FsdpParam>,
    /// Elements of one rank's block of the flat all-gather buffer.
    block: usize,
    /// The dtype parameters are gathered and computed in.
    param_dtype: DType,
    pub(crate) opts: FsdpOptions,
    state: Mutex<State>,
}

impl ParamGroup {
    /// Shards `named` (full tensors, the same on every rank) over `mesh`:
    /// each parameter's handle is given this rank's piece.
    pub(crate) fn new(named: Vec<(String, Parameter)>, mesh: Arc<DeviceMesh>, opts: FsdpOptions) -> Result<Self> {
        let (replicate_group, shard_group) = match mesh.ndim() {
            1 => (None, mesh.get_group(None)?),
            2 => (Some(mesh.get_group(0)?), mesh.get_group(1)?),
            d => {
                return Err(DistError::InvalidArgument(format!(
                    "fully_shard: the mesh must have 1 dimension (FSDP) or 2 (HSDP: replicate, shard), got {d}"
                )));
            }
        };
        let n = shard_group.size();
        let r = shard_group.rank();
        let mut param_dtype = opts.mp_policy.param_dtype;
        let mut params = Vec::with_capacity(named.len());
        let mut block = 0usize;
        for (name, param) in named {
            let full = param.tensor();
            if full.dim() == 0 {
                return Err(DistError::InvalidArgument(format!(
                    "fully_shard: parameter {name} is 0-dimensional; FSDP shards parameters on dimension 0"
                )));
            }
            if !full.is_floating_point() {
                return Err(DistError::InvalidArgument(format!(
                    "fully_shard: parameter {name} has dtype {}; only floating-point parameters are sharded",
                    full.dtype()
                )));
            }
            let dt = *param_dtype.get_or_insert(full.dtype());
            if opts.mp_policy.param_dtype.is_none() && dt != full.dtype() {
                return Err(DistError::InvalidArgument(format!(
                    "fully_shard: parameter {name} has dtype {} where the group's others have {dt}; one \
                     fully_shard call gathers one dtype (set mp_policy.param_dtype or shard them apart)",
                    full.dtype()
                )));
            }
            let shape = full.shape().to_vec();
            let row: usize = shape[1..].iter().product();
            let padded = shape[0].div_ceil(n);
            let unsharded = TensorOptions::new().dtype(dt).zeros(shape.as_slice())?;
            unsharded.storage().release_cpu()?;
            let p = FsdpParam {
                name,
                param,
                shape,
                row,
                offset: block,
                unsharded,
            };
            let (start, len) = p.rows(n, r);
            let shard = no_grad(|| full.detach().narrow(0, start as i64, len as i64)?.clone_tensor())?;
            p.param.set_tensor(shard)?;
            block = padded
                .checked_mul(row)
                .and_then(|b| b.checked_add(block))
                .ok_or_else(|| DistError::InvalidArgument("fully_shard: parameter sizes overflow".into()))?;
            params.push(p);
        }
        Ok(ParamGroup {
            mesh,
            shard_group,
            replicate_group,
            params,
            block,
            param_dtype: param_dtype.unwrap_or(DType::F32),
            opts,
            state: Mutex::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The placements of every sharded parameter.
    pub(crate) fn placements(&self) -> Vec<Placement> {
        match self.replicate_group {
            Some(_) => vec![Placement::Replicate, Placement::Shard(0)],
            None => vec![Placement::Shard(0)],
        }
    }

    /// The local shards (the handles' tensors, or the ones swapped out).
    pub(crate) fn shards(&self) -> Vec<Tensor> {
        match &self.lock().shards {
            Some(s) => s.clone(),
            None => self.params.iter().map(|p| p.param.tensor()).collect(),
        }
    }

    /// Whether the gathered parameters hold memory now.
    pub(crate) fn is_unsharded(&self) -> bool {
        self.params.iter().any(|p| !p.unsharded.storage().is_released())
    }

    /// Starts the all-gather of the group: this rank's pieces are written
    /// straight into its block of the output.
    fn start_all_gather(&self) -> Result<(Work, Tensor)> {
        let n = self.shard_group.size();
        let me = self.shard_group.rank();
        let out = TensorOptions::new().dtype(self.param_dtype).zeros([n * self.block])?;
        let mine = out.narrow(0, (me * self.block) as i64, self.block as i64)?;
        no_grad(|| -> Result<()> {
            for (p, shard) in self.params.iter().zip(self.shards()) {
                let (_, len) = p.rows(n, me);
                mine.narrow(0, p.offset as i64, (len * p.row) as i64)?
                    .copy_(&shard.reshape([len * p.row])?)?;
            }
            Ok(())
        })?;
        let work = self.shard_group.all_gather_into_tensor(&out, &mine)?;
        Ok((work, out))
    }

    /// Starts the group's all-gather ahead of its use, unless its
    /// parameters are gathered or a gather is under way.
    pub(crate) fn prefetch(&self) -> Result<()> {
        if self.params.is_empty() || self.is_unsharded() || self.lock().pending.is_some() {
            return Ok(());
        }
        let started = self.start_all_gather()?;
        self.lock().pending = Some(started);
        Ok(())
    }

    /// Drops a prefetched gather (after waiting for it): the shards may
    /// change before the next use.
    pub(crate) fn drop_prefetch(&self) -> Result<()> {
        let pending = self.lock().pending.take();
        match pending {
            Some((work, _)) => work.wait(),
            None => Ok(()),
        }
    }

    /// Gathers the parameters (waiting for a prefetched gather or running
    /// one) into their unsharded tensors; nothing when they are gathered.
    pub(crate) fn unshard(&self) -> Result<()> {
        if self.params.is_empty() || self.is_unsharded() {
            return self.drop_prefetch();
        }
        let pending = self.lock().pending.take();
        let (work, out) = match pending {
            Some(p) => p,
            None => self.start_all_gather()?,
        };
        work.wait()?;
        let n = self.shard_group.size();
        let es = self.param_dtype.element_size();
        let guard = out.storage().read();
        let bytes = guard
            .as_cpu()
            .ok_or_else(|| {
                DistError::InvalidArgument("fully_shard: the gathered parameters are not on the CPU".into())
            })?
            .bytes();
        for p in &self.params {
            p.unsharded.storage().restore_cpu(|dst| {
                for r in 0..n {
                    let (start, len) = p.rows(n, r);
                    let src = (r * self.block + p.offset) * es;
                    let count = len * p.row * es;
                    dst[start * p.row * es..][..count].copy_from_slice(&bytes[src..src + count]);
                }
            })?;
        }
        Ok(())
    }

    /// Frees the gathered parameters' memory.
    pub(crate) fn reshard(&self) -> Result<()> {
        for p in &self.params {
            p.unsharded.storage().release_cpu()?;
        }
        Ok(())
    }

    /// Puts the gathered parameters into the module's handles for its
    /// forward (outputs of one autograd node whose backward
    /// reduce-scatters their gradients), keeping the shards aside.
    pub(crate) fn swap_in(self: &Arc<Self>) -> Result<()> {
        if self.params.is_empty() {
            return Ok(());
        }
        let shards = self.shards();
        let gathered: Vec<Tensor> = self.params.iter().map(|p| p.unsharded.detach()).collect();
        let tracked = is_grad_enabled() && shards.iter().any(Tensor::requires_grad);
        let gathered = if tracked {
            let inputs: Vec<&Tensor> = shards.iter().collect();
            apply_function(
                Unshard {
                    group: Arc::downgrade(self),
                    outputs: gathered,
                },
                &inputs,
            )?
        } else {
            gathered
        };
        for (p, g) in self.params.iter().zip(gathered) {
            p.param.swap_tensor(g);
        }
        self.lock().shards = Some(shards);
        Ok(())
    }

    /// Gives the module's handles their shards back after its forward.
    pub(crate) fn swap_out(&self) {
        if let Some(shards) = self.lock().shards.take() {
            for (p, s) in self.params.iter().zip(shards) {
                p.param.swap_tensor(s);
            }
        }
    }

    /// Whether backward reduce-scatters the gradients (true) or keeps
    /// them whole on this rank until a backward that does
    /// (`set_requires_gradient_sync`).
    pub(crate) fn set_requires_gradient_sync(&self, sync: bool) {
        self.lock().no_sync = !sync;
    }

    /// The gradients of a backward: kept whole (summed with earlier ones)
    /// without gradient sync, else added to the kept ones and
    /// reduce-scattered.
    fn on_grads(&self, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let (no_sync, held) = {
            let mut st = self.lock();
            (st.no_sync, st.held_grads.take())
        };
        let summed: Vec<Option<Tensor>> = match held {
            None => grads.to_vec(),
            Some(held) => no_grad(|| {
                held.into_iter()
                    .zip(grads)
                    .map(|(h, g)| match (h, g) {
                        (Some(h), Some(g)) => Ok(Some(h.add(g)?)),
                        (h, g) => Ok(h.or_else(|| g.clone())),
                    })
                    .collect::<ferrotorch_core::Result<Vec<_>>>()
            })?,
        };
        if no_sync {
            self.lock().held_grads = Some(summed);
            return Ok(vec![None; grads.len()]);
        }
        self.reduce_grads(&summed)
    }

    /// Averages the gradients of the gathered parameters over the ranks
    /// and returns this rank's pieces, in the shards' dtypes.
    fn reduce_grads(&self, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let n = self.shard_group.size();
        let me = self.shard_group.rank();
        let replicas = self.replicate_group.as_ref().map_or(1, |g| g.size());
        let dt = self.opts.mp_policy.reduce_dtype.unwrap_or(self.param_dtype);
        let flat = TensorOptions::new().dtype(dt).zeros([n * self.block])?;
        let shards = self.shards();
        no_grad(|| -> Result<Vec<Option<Tensor>>> {
            for (p, g) in self.params.iter().zip(grads) {
                let Some(g) = g else { continue };
                let g = g.to_dtype(dt)?;
                for r in 0..n {
                    let (start, len) = p.rows(n, r);
                    let dst = flat.narrow(0, (r * self.block + p.offset) as i64, (len * p.row) as i64)?;
                    dst.copy_(&g.narrow(0, start as i64, len as i64)?.reshape([len * p.row])?)?;
                }
            }
            // As DDP: each rank's share first, then the sum, so both
            // average in the same arithmetic.
            flat.div_((n * replicas) as f64)?;
            let out = TensorOptions::new().dtype(dt).zeros([self.block])?;
            self.shard_group
                .reduce_scatter_tensor(&out, &flat, ReduceOp::Sum)?
                .wait()?;
            if let Some(rg) = &self.replicate_group {
                rg.all_reduce(&out, ReduceOp::Sum)?.wait()?;
            }
            self.params
                .iter()
                .zip(&shards)
                .map(|(p, s)| {
                    let (_, len) = p.rows(n, me);
                    let piece = out.narrow(0, p.offset as i64, (len * p.row) as i64)?;
                    Ok(Some(piece.reshape(s.shape())?.to_dtype(s.dtype())?.contiguous()?))
                })
                .collect()
        })
    }

    /// Records the start of this group's forward: whether it is the
    /// outermost one, which is the root, and the order of the groups.
    pub(crate) fn begin_forward(self: &Arc<Self>, root: Option<&Arc<ParamGroup>>) -> Result<()> {
        let me = Arc::downgrade(self);
        match root {
            None => {
                // A new iteration: what was prefetched may be stale.
                let stale = {
                    let mut st = self.lock();
                    st.is_root = true;
                    st.root = me.clone();
                    st.prev_order = std::mem::take(&mut st.order);
                    st.order.push(me);
                    st.prev_order.clone()
                };
                for g in stale.iter().filter_map(Weak::upgrade) {
                    g.drop_prefetch()?;
                }
            }
            Some(root) => {
                {
                    let mut st = self.lock();
                    st.is_root = false;
                    st.root = Arc::downgrade(root);
                }
                root.lock().order.push(me);
            }
        }
        Ok(())
    }

    /// Copies this rank's rows of `full` (the whole parameter `i`) into
    /// its shard. Errors on a shape other than the parameter's.
    pub(crate) fn load_full(&self, i: usize, full: &Tensor) -> Result<()> {
        let p = &self.params[i];
        if full.shape() != p.shape.as_slice() {
            return Err(DistError::InvalidArgument(format!(
                "load_full_state_dict: {} has shape {:?} in the state dict and {:?} in the model",
                p.name,
                full.shape(),
                p.shape
            )));
        }
        let (start, len) = p.rows(self.shard_group.size(), self.shard_group.rank());
        let shard = self.shards().swap_remove(i);
        no_grad(|| shard.copy_(&full.narrow(0, start as i64, len as i64)?))?;
        Ok(())
    }

    /// Whether this group was the outermost one of its last forward.
    pub(crate) fn is_root(&self) -> bool {
        self.lock().is_root
    }

    /// The group whose forward follows (`forward`) or precedes this one's
    /// in the root's order (the last iteration's order for the
    /// forward, this one's for the backward).
    pub(crate) fn neighbour(self: &Arc<Self>, forward: bool) -> Option<Arc<ParamGroup>> {
        let root = self.lock().root.upgrade()?;
        let order = {
            let st = root.lock();
            if forward {
                st.prev_order.clone()
            } else {
                st.order.clone()
            }
        };
        let i = order.iter().position(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(self)))?;
        let j = if forward { i.checked_add(1)? } else { i.checked_sub(1)? };
        order.get(j).and_then(Weak::upgrade)
    }
}

/// The node between the shards and the gathered parameters: forward
/// hands out the gathered tensors, backward reduce-scatters their
/// gradients into the shards' and frees the gathered memory.
struct Unshard {
    group: Weak<ParamGroup>,
    outputs: Vec<Tensor>,
}

impl Function for Unshard {
    fn name(&self) -> String {
        "FSDPUnshardBackward".into()
    }

    fn forward(&self, _ctx: &mut FunctionCtx, _inputs: &[Tensor]) -> ferrotorch_core::Result<Vec<Tensor>> {
        Ok(self.outputs.clone())
    }

    fn backward(&self, _ctx: &FunctionCtx, grads: &[Option<Tensor>]) -> ferrotorch_core::Result<Vec<Option<Tensor>>> {
        let group = self.group.upgrade().ok_or_else(|| {
            ferrotorch_core::Error::invalid("fully_shard", "the sharded module was dropped before backward")
        })?;
        let out = group.on_grads(grads)?;
        group.reshard()?;
        Ok(out)
    }
}
