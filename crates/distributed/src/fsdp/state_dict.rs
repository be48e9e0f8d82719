//! State dicts of sharded models: the full tensors gathered on every rank
//! (`get_model_state_dict(..., full_state_dict=True)`), the shards as
//! DTensors (what `model.state_dict()` gives under FSDP2), and loading a
//! full state dict into the shards.

use std::sync::Arc;

use ferrotorch_core::Tensor;
use ferrotorch_core::autograd::no_grad;
use ferrotorch_nn::{Module, StateDict};

use super::param_group::{ParamGroup, group_of};
use crate::dtensor::{DTensor, Placement};
use crate::error::{DistError, Result};

/// Every sharded parameter of `module` by its full name: its group and
/// its index there.
fn sharded(module: &dyn Module) -> Vec<(String, Arc<ParamGroup>, usize)> {
    let mut out = Vec::new();
    for (prefix, m) in module.named_modules() {
        if let Some(g) = group_of(m) {
            for (i, p) in g.params.iter().enumerate() {
                let name = if prefix.is_empty() {
                    p.name.clone()
                } else {
                    format!("{prefix}.{}", p.name)
                };
                out.push((name, g.clone(), i));
            }
        }
    }
    out
}

/// The shard of parameter `i` of `g` as a DTensor.
fn dtensor_of(g: &ParamGroup, i: usize) -> Result<DTensor> {
    let shard = g.shards().swap_remove(i);
    DTensor::from_local(&shard.detach(), &g.mesh, &g.placements(), Some(&g.params[i].shape))
}

/// The model's state dict with every sharded parameter gathered whole, on
/// every rank, in the model's order: what an unsharded model's
/// `state_dict()` holds. A collective: every rank calls it.
pub fn full_state_dict<M: Module + ?Sized>(module: &M) -> Result<StateDict> {
    let mut sd = module.state_dict();
    for (name, g, i) in sharded(module.as_dyn()) {
        let full = dtensor_of(&g, i)?.full_tensor()?;
        sd.insert(name, full.detach());
    }
    Ok(sd)
}

/// The model's state dict with sharded parameters as DTensors (`Shard(0)`)
/// and the other entries as replicated DTensors on the mesh of the
/// outermost sharded module. Errors when no module of `module` is sharded.
pub fn sharded_state_dict<M: Module + ?Sized>(module: &M) -> Result<Vec<(String, DTensor)>> {
    let entries = sharded(module.as_dyn());
    let mesh = entries
        .first()
        .map(|(_, g, _)| g.mesh.clone())
        .ok_or_else(|| DistError::InvalidArgument("sharded_state_dict: no module of the model is sharded".into()))?;
    let replicate = vec![Placement::Replicate; mesh.ndim()];
    module
        .state_dict()
        .iter()
        .map(|(name, t)| {
            let d = match entries.iter().find(|(n, _, _)| n == name) {
                Some((_, g, i)) => dtensor_of(g, *i)?,
                None => DTensor::from_local(t, &mesh, &replicate, Some(t.shape()))?,
            };
            Ok((name.to_string(), d))
        })
        .collect()
}

/// Loads a full state dict (as [`full_state_dict`] gives, or an unsharded
/// model's) into a sharded model: each rank copies its rows of each
/// sharded parameter, and the other entries whole. Strict, as
/// `load_state_dict`: errors name a missing or unexpected key and a shape
/// that differs.
pub fn load_full_state_dict<M: Module + ?Sized>(module: &M, sd: &StateDict) -> Result<()> {
    let entries = sharded(module.as_dyn());
    let own = module.state_dict();
    if let Some(k) = sd.keys().find(|k| !own.contains_key(k)) {
        return Err(DistError::InvalidArgument(format!(
            "load_full_state_dict: unexpected key {k:?} in the state dict"
        )));
    }
    for (name, current) in own.iter() {
        let full = sd
            .get(name)
            .ok_or_else(|| DistError::InvalidArgument(format!("load_full_state_dict: missing key {name:?}")))?;
        match entries.iter().find(|(n, _, _)| n == name) {
            Some((_, g, i)) => g.load_full(*i, full)?,
            None => copy_whole(name, current, full)?,
        }
    }
    Ok(())
}

fn copy_whole(name: &str, current: &Tensor, full: &Tensor) -> Result<()> {
    if current.shape() != full.shape() {
        return Err(DistError::InvalidArgument(format!(
            "load_full_state_dict: {name} has shape {:?} in the state dict and {:?} in the model",
            full.shape(),
            current.shape()
        )));
    }
    no_grad(|| current.copy_(full))?;
    Ok(())
}
