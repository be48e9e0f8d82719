//! `AccumulateGrad`: the node through which a leaf receives its gradient.

use std::sync::Arc;

use super::meta::AutogradMeta;
use super::node::{Backward, Node};
use crate::{Result, Tensor};

/// Adds the incoming gradient to a leaf's `.grad` (running the leaf's hooks
/// first and its post-accumulate hooks after).
pub(crate) struct AccumulateGrad {
    leaf: Tensor,
}

impl AccumulateGrad {
    pub(crate) fn new(leaf: Tensor) -> Self {
        AccumulateGrad { leaf }
    }
}

/// Whether the incoming gradient `g` may become the leaf's `.grad` as it is
/// instead of a copy (PyTorch's AccumulateGrad "steals" it on the same
/// terms): nothing else holds it (the engine's buffer and this node's
/// handle are its only handles, and no other tensor shares its memory),
/// it is writable, and it is laid out as the leaf (so later in-place
/// accumulation and the optimizer see the leaf's layout).
///
/// A view whose base nothing else holds counts as unshared: a Linear's
/// weight gradient is the transpose of a transposed product, whose base
/// (the product) lives on only inside the view. The stolen gradient is
/// detached, so it keeps the memory without the base.
fn stealable(g: &Tensor, leaf: &Tensor) -> bool {
    let holders = match &g.0.base {
        None => 1,
        Some(base) if Arc::strong_count(&base.0) == 1 => 2,
        Some(_) => 0,
    };
    Arc::strong_count(&g.0) <= 2
        && g.storage().ref_count() == holders
        && !g.storage().is_read_only()
        && g.dtype() == leaf.dtype()
        && g.device() == leaf.device()
        && g.shape() == leaf.shape()
        && g.strides() == leaf.strides()
        && g.storage().nbytes() == g.numel() * g.dtype().element_size()
}

/// Adds `g` to the leaf's `.grad` as PyTorch's `AccumulateGrad` does:
/// with `create_graph` a new tensor that keeps the gradient's graph (the
/// first one a recorded copy, node `CopyBackwards`; later ones `old + g`);
/// without, the gradient itself when nothing else holds it, else a copy,
/// and later ones added in place into the existing `.grad` (whatever it
/// requires: a `.grad` left by an earlier `create_graph` pass is updated
/// in place too, and handles to it see the sum).
fn accumulate(m: &mut AutogradMeta, leaf: &Tensor, g: Tensor, create_graph: bool) -> Result<()> {
    m.grad = Some(match m.grad.take() {
        None if create_graph => {
            let copy = g.empty_like()?;
            copy.copy_(&g)?;
            copy
        }
        None if stealable(&g, leaf) => g.detach(),
        None => g.detach().clone_tensor()?,
        Some(old) if create_graph => old.add(&g)?,
        Some(old) => {
            let _ng = crate::autograd::mode::no_grad_guard();
            old.add_(&g)?
        }
    });
    Ok(())
}

impl Backward for AccumulateGrad {
    fn name(&self) -> String {
        "AccumulateGrad".into()
    }

    fn apply(&self, _node: &Arc<Node>, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let Some(mut g) = grads.first().cloned().flatten() else {
            return Ok(Vec::new());
        };
        let create_graph = crate::autograd::mode::is_grad_enabled();
        {
            // The common case, a leaf without hooks, under one lock.
            let mut meta = self.leaf.autograd_meta();
            let m = meta.get_or_insert_with(Default::default);
            if m.leaf_hooks.is_empty() && m.post_hooks.is_empty() {
                return accumulate(m, &self.leaf, g, create_graph).map(|()| Vec::new());
            }
        }
        for hook in self.leaf.leaf_hooks() {
            if let Some(r) = hook(&g)? {
                g = r;
            }
        }
        {
            let mut meta = self.leaf.autograd_meta();
            accumulate(meta.get_or_insert_with(Default::default), &self.leaf, g, create_graph)?;
        }
        for hook in self.leaf.post_hooks() {
            hook(&self.leaf);
        }
        Ok(Vec::new())
    }

    fn leaf(&self) -> Option<&Tensor> {
        Some(&self.leaf)
    }
}
