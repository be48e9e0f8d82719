//! `AccumulateGrad`: the node through which a leaf receives its gradient.

use std::sync::Arc;

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

impl Backward for AccumulateGrad {
    fn name(&self) -> String {
        "AccumulateGrad".into()
    }

    fn apply(&self, _node: &Arc<Node>, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let Some(mut g) = grads.first().cloned().flatten() else {
            return Ok(Vec::new());
        };
        for hook in self.leaf.leaf_hooks() {
            if let Some(r) = hook(&g) {
                g = r;
            }
        }
        let create_graph = super::is_grad_enabled();
        {
            let mut meta = self.leaf.autograd_meta();
            let m = meta.get_or_insert_with(Default::default);
            m.grad = Some(match m.grad.take() {
                // Keep the graph of the gradient only with create_graph.
                None if create_graph => g,
                None => g.detach().clone_tensor()?,
                Some(old) if create_graph || old.requires_grad() => old.add(&g)?,
                Some(old) => {
                    let _ng = super::no_grad();
                    old.add_(&g)?
                }
            });
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
