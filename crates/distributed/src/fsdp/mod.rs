//! Fully sharded data parallel (PyTorch 2's `fully_shard`, FSDP2): each
//! parameter of a module is cut along dimension 0 across the ranks of a
//! mesh, so a rank holds about 1/N of the parameters, gradients and
//! optimizer state. A sharded module gathers its parameters before its
//! forward and frees them after it, gathers them again for its backward,
//! and reduce-scatters their gradients once its backward is done.
//!
//! As in PyTorch, call it on each block first and on the whole model last;
//! each call makes one group gathered by one all-gather, and the next
//! group's gather is started ahead of use (prefetch) in forward and
//! backward. Build the optimizer after sharding: it works on the shards.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ferrotorch_core::Tensor;
//! use ferrotorch_distributed::{InitOptions, init_device_mesh, init_process_group};
//! use ferrotorch_distributed::fsdp::{FsdpOptions, fully_shard};
//! use ferrotorch_nn::{Forward, Linear, Module, ModuleState};
//!
//! #[derive(Module)]
//! # #[module(crate = ferrotorch_nn)] // (users of the facade crate leave this out)
//! struct Net { state: ModuleState, fc1: Linear, fc2: Linear }
//! impl Forward for Net {
//!     fn forward(&self, x: &Tensor) -> ferrotorch_core::Result<Tensor> {
//!         self.fc2.call(&self.fc1.call(x)?.relu()?)
//!     }
//! }
//!
//! init_process_group(InitOptions::new("tcp"))?; // under ferrorun / torchrun
//! let mesh = Arc::new(init_device_mesh("cpu", &[ferrotorch_distributed::get_world_size()?], None)?);
//! let net = Net { state: ModuleState::default(), fc1: Linear::new(8, 64)?, fc2: Linear::new(64, 2)? };
//! fully_shard(&net.fc1, &mesh, FsdpOptions::default())?;
//! fully_shard(&net, &mesh, FsdpOptions::default())?;
//! let loss = net.call(&Tensor::randn((4, 8))?)?.pow(2.0)?.mean()?;
//! loss.backward()?; // each rank now holds its piece of the averaged gradients
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod options;
mod param_group;
mod state_dict;

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::{Arc, Weak};

use ferrotorch_core::autograd::is_grad_enabled;
use ferrotorch_core::{DType, Tensor};
use ferrotorch_nn::{Module, ModuleState};

use crate::device_mesh::DeviceMesh;
use crate::dtensor::DTensor;
use crate::error::{DistError, Result};
pub use options::{FsdpOptions, MixedPrecisionPolicy};
use param_group::{ParamGroup, STATE_KEY, group_of};
pub use state_dict::{full_state_dict, load_full_state_dict, sharded_state_dict};

/// The handle [`fully_shard`] returns (PyTorch's `FSDPModule` methods).
/// The module stays sharded when it is dropped.
#[derive(Clone)]
pub struct FsdpModule {
    group: Arc<ParamGroup>,
}

impl FsdpModule {
    /// Gathers the group's parameters now (`unshard()`); they stay gathered
    /// until [`FsdpModule::reshard`] or the end of the module's backward.
    pub fn unshard(&self) -> Result<()> {
        self.group.unshard()
    }

    /// Frees the gathered parameters (`reshard()`).
    pub fn reshard(&self) -> Result<()> {
        self.group.reshard()
    }

    /// Whether the group's parameters are gathered now.
    pub fn is_unsharded(&self) -> bool {
        self.group.is_unsharded()
    }

    /// The group's parameters as `Shard(0)` DTensors (`[Replicate, Shard(0)]`
    /// on an HSDP mesh), with their names inside the sharded module.
    pub fn sharded_parameters(&self) -> Result<Vec<(String, DTensor)>> {
        let shards = self.group.shards();
        let placements = self.group.placements();
        self.group
            .params
            .iter()
            .zip(shards)
            .map(|(p, s)| {
                Ok((
                    p.name.clone(),
                    DTensor::from_local(&s, &self.group.mesh, &placements, Some(&p.shape))?,
                ))
            })
            .collect()
    }

    /// Whether this group's backward reduce-scatters its gradients
    /// (`set_requires_gradient_sync(requires, recurse=False)`). Without,
    /// each backward adds the gradients of the whole parameters on this
    /// rank (memory: one unsharded gradient) and the shards' gradients stay
    /// as they were; the next backward with sync reduce-scatters the sum.
    /// [`set_requires_gradient_sync`] sets it on every sharded module of a
    /// model, as gradient accumulation wants.
    pub fn set_requires_gradient_sync(&self, requires: bool) {
        self.group.set_requires_gradient_sync(requires);
    }

    /// The mesh the parameters are sharded over.
    pub fn mesh(&self) -> &Arc<DeviceMesh> {
        &self.group.mesh
    }
}

/// [`FsdpModule::set_requires_gradient_sync`] on every sharded module of
/// `module` (PyTorch's default `recurse=True`): gradient accumulation
/// without communication, then one reduce-scatter of the sum.
pub fn set_requires_gradient_sync<M: Module + ?Sized>(module: &M, requires: bool) {
    for (_, m) in module.named_modules() {
        if let Some(g) = group_of(m) {
            g.set_requires_gradient_sync(requires);
        }
    }
}

thread_local! {
    /// The sharded modules whose forward is running on this thread,
    /// outermost first.
    static ACTIVE: RefCell<Vec<Weak<ParamGroup>>> = const { RefCell::new(Vec::new()) };
}

/// Shards `module`'s parameters over `mesh` (1-D: FSDP; 2-D: HSDP,
/// replicated along dimension 0 and sharded along dimension 1), except
/// those of submodules sharded before, and installs the hooks that gather
/// them around its forward and backward. Every rank must pass the same
/// parameters (same seed or a loaded checkpoint): nothing is broadcast, as
/// in PyTorch. Errors: a module without a [`ferrotorch_nn::ModuleState`]
/// (it carries the hooks), a module sharded before, 0-dimensional or
/// non-floating-point parameters, parameters of different dtypes in one
/// group without `mp_policy.param_dtype`, and meshes of other ranks.
pub fn fully_shard<M: Module + ?Sized>(module: &M, mesh: &Arc<DeviceMesh>, opts: FsdpOptions) -> Result<FsdpModule> {
    let Some(state) = module.state() else {
        return Err(DistError::InvalidArgument(format!(
            "fully_shard: {} has no ModuleState (add a `ModuleState` field to the struct: it carries the hooks)",
            module.type_name()
        )));
    };
    if state.attachment(STATE_KEY).is_some() {
        return Err(DistError::InvalidArgument(format!(
            "fully_shard: this {} is sharded already",
            module.type_name()
        )));
    }
    if mesh.get_coordinate().is_none() {
        return Err(DistError::InvalidArgument(
            "fully_shard: this rank is not in the mesh".into(),
        ));
    }
    let managed: HashSet<usize> = module
        .named_modules()
        .into_iter()
        .filter(|(name, _)| !name.is_empty())
        .filter_map(|(_, m)| group_of(m))
        .flat_map(|g| g.params.iter().map(|p| p.param.id()).collect::<Vec<_>>())
        .collect();
    let named = module
        .named_parameters()
        .into_iter()
        .filter(|(_, p)| !managed.contains(&p.id()))
        .collect();
    let group = Arc::new(ParamGroup::new(named, mesh.clone(), opts)?);
    state.attach(STATE_KEY, group.clone())?;
    install_hooks(state, &group);
    Ok(FsdpModule { group })
}

/// The forward pre-hook and forward hook of a sharded module (kept for
/// the module's life, as the sharding is).
fn install_hooks(state: &ModuleState, group: &Arc<ParamGroup>) {
    let g = group.clone();
    state.register_forward_pre_hook(move |_, inputs| Ok(pre_forward(&g, inputs)?));
    let g = group.clone();
    state.register_forward_hook(move |_, _, outputs| Ok(post_forward(&g, outputs)?));
}

/// Before the module's forward: finds the root, gathers the parameters,
/// starts the next module's gather, puts the gathered parameters in.
fn pre_forward(group: &Arc<ParamGroup>, inputs: &[Tensor]) -> Result<Option<Vec<Tensor>>> {
    let root = ACTIVE.with(|a| {
        let mut a = a.borrow_mut();
        // A forward that failed left its entries: start afresh.
        if a.iter().any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(group))) {
            a.clear();
        }
        let root = a.first().and_then(Weak::upgrade);
        a.push(Arc::downgrade(group));
        root
    });
    group.begin_forward(root.as_ref())?;
    group.unshard()?;
    if let Some(next) = group.neighbour(true) {
        next.prefetch()?;
    }
    group.swap_in()?;
    let mp = group.opts.mp_policy;
    match mp.param_dtype {
        Some(dt) if mp.cast_forward_inputs => Ok(Some(cast_floats(inputs, dt)?)),
        _ => Ok(None),
    }
}

/// After the module's forward: the shards go back, the gathered
/// parameters are freed (unless backward needs them next), and the
/// outputs get the hook that gathers them again for backward.
fn post_forward(group: &Arc<ParamGroup>, outputs: &[Tensor]) -> Result<Option<Vec<Tensor>>> {
    group.swap_out();
    ACTIVE.with(|a| {
        let mut a = a.borrow_mut();
        if let Some(i) = a.iter().position(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(group))) {
            a.truncate(i);
        }
    });
    let tracked: Vec<&Tensor> = outputs.iter().filter(|t| t.requires_grad()).collect();
    if !is_grad_enabled() || tracked.is_empty() {
        group.reshard()?;
    } else {
        if group.opts.reshard_after_forward && !group.is_root() {
            group.reshard()?;
        }
        for t in tracked {
            let weak = Arc::downgrade(group);
            t.register_fallible_hook(move |_| {
                if let Some(g) = weak.upgrade() {
                    pre_backward(&g)?;
                }
                Ok(None)
            })?;
        }
    }
    match group.opts.mp_policy.output_dtype {
        Some(dt) => Ok(Some(cast_floats(outputs, dt)?)),
        None => Ok(None),
    }
}

/// When the first gradient of the module's outputs arrives: gathers the
/// parameters again and starts the gather of the module whose backward
/// comes next.
fn pre_backward(group: &Arc<ParamGroup>) -> Result<()> {
    group.unshard()?;
    if let Some(prev) = group.neighbour(false) {
        prev.prefetch()?;
    }
    Ok(())
}

/// `tensors` with the floating-point ones cast to `dt`.
fn cast_floats(tensors: &[Tensor], dt: DType) -> Result<Vec<Tensor>> {
    Ok(tensors
        .iter()
        .map(|t| {
            if t.is_floating_point() {
                t.to_dtype(dt)
            } else {
                Ok(t.clone())
            }
        })
        .collect::<ferrotorch_core::Result<_>>()?)
}
