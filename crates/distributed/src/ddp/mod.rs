//! `DistributedDataParallel` (`torch.nn.parallel.DistributedDataParallel`):
//! each rank trains a replica on its own batch; gradients are averaged
//! across ranks during backward, bucket by bucket, so every replica takes
//! the same optimizer step and ends with the same bits as the others.
//!
//! ```no_run
//! use ferrotorch_core::Tensor;
//! use ferrotorch_distributed::{InitOptions, init_process_group};
//! use ferrotorch_distributed::ddp::{DdpOptions, DistributedDataParallel};
//! use ferrotorch_nn::{Forward, Linear, Module};
//! init_process_group(InitOptions::new("tcp"))?; // under ferrorun / torchrun
//! let model = DistributedDataParallel::new(Linear::new(4, 2)?, DdpOptions::default())?;
//! let loss = model.call(&Tensor::randn((8, 4))?)?.pow(2.0)?.mean()?;
//! loss.backward()?; // gradients averaged over the ranks here
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod options;
mod reducer;

use std::borrow::Cow;
use std::sync::{Arc, Weak};

use ferrotorch_core::Tensor;
use ferrotorch_core::autograd::{HookHandle, no_grad};
use ferrotorch_nn::{Forward, ForwardOutput, Module, ModuleState, Visitor};

use crate::error::{DistError, Result};
use crate::group::ProcessGroup;
pub use options::{CommHook, DdpOptions};
pub use reducer::CommStats;
use reducer::Reducer;

/// A module whose gradients are averaged across the ranks of a group
/// during backward. Its state dict has PyTorch's `module.` prefix.
pub struct DistributedDataParallel<M: Module> {
    module: M,
    group: Arc<ProcessGroup>,
    reducer: Arc<Reducer>,
    opts: DdpOptions,
    hooks: Vec<HookHandle>,
    state: ModuleState,
}

impl<M: Module> DistributedDataParallel<M> {
    /// Wraps `module` on the default group: checks that every rank has the
    /// same parameter shapes, broadcasts rank 0's parameters and buffers,
    /// and installs the gradient hooks.
    pub fn new(module: M, opts: DdpOptions) -> Result<Self> {
        Self::with_group(module, crate::init::default_group()?, opts)
    }

    /// [`DistributedDataParallel::new`] on `group`.
    pub fn with_group(module: M, group: Arc<ProcessGroup>, opts: DdpOptions) -> Result<Self> {
        if opts.bucket_cap_mb.is_nan() || opts.bucket_cap_mb <= 0.0 {
            return Err(DistError::InvalidArgument(format!(
                "DistributedDataParallel: bucket_cap_mb must be positive, got {}",
                opts.bucket_cap_mb
            )));
        }
        let named: Vec<(String, Tensor)> = module
            .named_parameters()
            .into_iter()
            .map(|(n, p)| (n, p.tensor()))
            .filter(|(_, t)| t.requires_grad())
            .collect();
        verify_shapes(&group, &named)?;
        // Rank 0's parameters and buffers everywhere.
        let mut states: Vec<Tensor> = module.parameters().iter().map(|p| p.tensor()).collect();
        states.extend(module.buffers().iter().map(|b| b.tensor()));
        broadcast_all(&group, &states)?;
        let (names, params): (Vec<String>, Vec<Tensor>) = named.into_iter().unzip();
        let reducer = Arc::new(Reducer::new(group.clone(), params, names, opts)?);
        let mut hooks = Vec::with_capacity(reducer.params().len());
        for (i, p) in reducer.params().iter().enumerate() {
            let weak: Weak<Reducer> = Arc::downgrade(&reducer);
            hooks.push(p.register_post_accumulate_grad_hook(move |_| {
                if let Some(r) = weak.upgrade() {
                    r.on_grad(i);
                }
            })?);
        }
        Ok(DistributedDataParallel {
            module,
            group,
            reducer,
            opts,
            hooks,
            state: ModuleState::default(),
        })
    }

    /// The wrapped module (`ddp.module`).
    pub fn module(&self) -> &M {
        &self.module
    }

    /// The group the gradients are averaged over.
    pub fn process_group(&self) -> &Arc<ProcessGroup> {
        &self.group
    }

    /// Runs a forward of the wrapped module through `f` (for modules whose
    /// forward takes other arguments than one tensor), then prepares the
    /// reduction of the coming backward.
    pub fn forward_with<R: ForwardOutput>(&self, f: impl FnOnce(&M) -> ferrotorch_core::Result<R>) -> Result<R> {
        if self.opts.broadcast_buffers && self.group.size() > 1 {
            let buffers: Vec<Tensor> = self.module.buffers().iter().map(|b| b.tensor()).collect();
            broadcast_all(&self.group, &buffers)?;
        }
        let out = f(&self.module)?;
        let mut tensors = Vec::new();
        out.collect_tensors(&mut tensors);
        self.reducer.prepare_for_backward(&tensors)?;
        Ok(out)
    }

    /// Gradients accumulate locally until the guard drops (`no_sync()`):
    /// the first backward after it averages the accumulated gradients.
    pub fn no_sync(&self) -> NoSync<'_> {
        let before = self.reducer.set_sync(false);
        NoSync {
            reducer: &self.reducer,
            before,
        }
    }

    /// Replaces how buckets are communicated (`register_comm_hook`).
    pub fn register_comm_hook(&self, hook: CommHook) {
        self.reducer.set_comm_hook(hook);
    }

    /// How the gradient communication went so far: the time from each
    /// bucket's launch to its completion, and the part backward's end
    /// still had to wait for (`hidden_fraction()` is the rest's share).
    pub fn comm_stats(&self) -> CommStats {
        self.reducer.comm_stats()
    }

    /// The parameter indices of each gradient bucket, in launch order
    /// (rebuilt after the first iteration in the order gradients arrived).
    pub fn bucket_members(&self) -> Vec<Vec<usize>> {
        self.reducer.bucket_members()
    }

    /// The wrapped module, unwrapped (its hooks removed). Dropping the
    /// wrapper instead leaves hooks that do nothing (they hold the reducer
    /// weakly).
    pub fn into_inner(mut self) -> M {
        for h in self.hooks.drain(..) {
            h.remove();
        }
        self.module
    }
}

/// The guard of [`DistributedDataParallel::no_sync`].
pub struct NoSync<'a> {
    reducer: &'a Reducer,
    before: bool,
}

impl Drop for NoSync<'_> {
    fn drop(&mut self) {
        self.reducer.set_sync(self.before);
    }
}

impl<M: Module> Module for DistributedDataParallel<M> {
    fn visit<'a>(&'a self, visitor: &mut dyn Visitor<'a>) {
        visitor.module("module", self.module.as_dyn());
    }

    fn type_name(&self) -> Cow<'static, str> {
        Cow::Borrowed("DistributedDataParallel")
    }

    fn as_dyn(&self) -> &dyn Module {
        self
    }

    fn state(&self) -> Option<&ModuleState> {
        Some(&self.state)
    }
}

impl<M: Forward> Forward for DistributedDataParallel<M> {
    fn forward(&self, x: &Tensor) -> ferrotorch_core::Result<Tensor> {
        Ok(self.forward_with(|m| m.call(x))?)
    }
}

/// Broadcasts `tensors` from rank 0, all started before any is waited for.
fn broadcast_all(group: &ProcessGroup, tensors: &[Tensor]) -> Result<()> {
    if group.size() == 1 {
        return Ok(());
    }
    let works = no_grad(|| {
        tensors
            .iter()
            .map(|t| group.broadcast(&t.detach(), 0))
            .collect::<Result<Vec<_>>>()
    })?;
    works.iter().try_for_each(crate::work::Work::wait)
}

/// Every rank must hold the same parameters (count, shapes, dtypes):
/// compares a digest of them across ranks and names the first difference.
fn verify_shapes(group: &ProcessGroup, named: &[(String, Tensor)]) -> Result<()> {
    let n = group.size();
    if n == 1 {
        return Ok(());
    }
    let mut digest = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |x: u64| digest = (digest ^ x).wrapping_mul(0x0100_0000_01b3);
    for (_, t) in named {
        eat(t.dim() as u64);
        t.shape().iter().for_each(|&s| eat(s as u64));
        eat(crate::collective::dtype_code(t.dtype()) as u64);
    }
    let mine = Tensor::new(vec![named.len() as i64, digest as i64])?;
    let all: Vec<Tensor> = (0..n)
        .map(|_| mine.zeros_like())
        .collect::<ferrotorch_core::Result<_>>()?;
    group.all_gather(&all, &mine)?.wait()?;
    for (r, t) in all.iter().enumerate() {
        let v = t.to_vec::<i64>()?;
        if v[0] != named.len() as i64 || v[1] != digest as i64 {
            return Err(DistError::InvalidArgument(format!(
                "DistributedDataParallel: rank {r} has {} parameters with other shapes or dtypes than rank {}'s {} \
                 (every rank must build the same model)",
                v[0],
                group.rank(),
                named.len()
            )));
        }
    }
    Ok(())
}
