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

/// Adds `g` to the leaf's `.grad` (in place when the graph of the gradient
/// is not kept, as PyTorch does).
fn accumulate(m: &mut AutogradMeta, g: Tensor, create_graph: bool) -> Result<()> {
    m.grad = Some(match m.grad.take() {
        // Keep the graph of the gradient only with create_graph.
        None if create_graph => g,
        None => g.detach().clone_tensor()?,
        Some(old) if create_graph || old.requires_grad() => old.add(&g)?,
        Some(old) => {
            let _ng = super::no_grad_guard();
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
        let create_graph = super::is_grad_enabled();
        {
            // The common case, a leaf without hooks, under one lock.
            let mut meta = self.leaf.autograd_meta();
            let m = meta.get_or_insert_with(Default::default);
            if m.leaf_hooks.is_empty() && m.post_hooks.is_empty() {
                return accumulate(m, g, create_graph).map(|()| Vec::new());
            }
        }
        for hook in self.leaf.leaf_hooks() {
            if let Some(r) = hook(&g)? {
                g = r;
            }
        }
        {
            let mut meta = self.leaf.autograd_meta();
            accumulate(meta.get_or_insert_with(Default::default), g, create_graph)?;
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
