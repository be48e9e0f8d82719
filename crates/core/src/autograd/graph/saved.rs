//! Tensors saved for backward, with the version they had when saved.

use std::sync::Arc;

use super::node::Node;
use crate::{Error, Result, Tensor};

/// A tensor an operator saved for its backward formula.
///
/// An output of the node itself is kept detached (the node holding its own
/// output with the output's `grad_fn` would be a reference cycle) and gets
/// the node back as `grad_fn` when unpacked.
pub(crate) struct SavedTensor {
    tensor: Tensor,
    version: u64,
    output_nr: Option<usize>,
}

impl SavedTensor {
    /// Saves an input of the operation.
    pub(crate) fn input(t: &Tensor) -> Self {
        SavedTensor {
            tensor: t.clone(),
            version: t.version(),
            output_nr: None,
        }
    }

    /// Saves output `nr` of the operation.
    pub(crate) fn output(t: &Tensor, nr: usize) -> Self {
        SavedTensor {
            tensor: t.detach(),
            version: t.version(),
            output_nr: Some(nr),
        }
    }

    /// The tensor, checked against in-place changes since it was saved.
    pub(crate) fn unpack(&self, node: &Arc<Node>) -> Result<Tensor> {
        self.check_version(node)?;
        match self.output_nr {
            // With create_graph the output must lead back into the graph.
            Some(nr) if crate::autograd::mode::is_grad_enabled() => {
                let t = self.tensor.detach();
                t.set_grad_fn(node.clone(), nr);
                Ok(t)
            }
            _ => Ok(self.tensor.clone()),
        }
    }

    /// Errors (PyTorch's message) when the tensor was modified in place
    /// since it was saved.
    pub(crate) fn check_version(&self, node: &Arc<Node>) -> Result<()> {
        let now = self.tensor.version();
        if now != self.version {
            // As PyTorch: a saved output names the node that saved it; a
            // saved input, the node that now produces it (none for a leaf).
            let what = match self.output_nr {
                Some(nr) => Some((nr, node.name())),
                None => self
                    .tensor
                    .gradient_edge()
                    .filter(|e| e.node.backward_fn().leaf().is_none())
                    .map(|e| (e.input_nr, e.node.name())),
            };
            let which = what.map_or(String::new(), |(nr, name)| format!(", which is output {nr} of {name},"));
            return Err(Error::SavedTensorModified {
                detail: format!(
                    "one of the variables needed for gradient computation has been modified by an inplace operation: \
                     [torch.{}Tensor {:?}]{which} is at version {now}; expected version {} instead. Hint: the \
                     operation that failed to compute its gradient was {}",
                    self.tensor.dtype().scalar_type_name(),
                    self.tensor.shape(),
                    self.version,
                    node.name()
                ),
            });
        }
        Ok(())
    }
}
