//! [`Grads`]: what [`grad`](crate::autograd::grad) returns.

use std::ops::Index;

use crate::{Result, Tensor};

/// The gradients [`grad`](crate::autograd::grad) computed, one per input
/// and in the inputs' order (`torch.autograd.grad`'s tuple).
///
/// Index it to get a tensor: `grads[0]` is the first input's gradient.
/// Without `allow_unused` every input has one (an unused input is an
/// [`Error::UnusedInput`](crate::Error::UnusedInput) from `grad` itself);
/// with it, an unused input has none (PyTorch's `None`): [`Grads::get`]
/// returns `None` for it, and indexing it panics with a message naming the
/// input.
///
/// ```
/// use ferrotorch_core::{Tensor, autograd::{self, GradOptions}};
/// let x = Tensor::new(3.0f32)?.requires_grad_(true)?;
/// let g = autograd::grad(&[&x.pow(3)?], &[&x], GradOptions::create_graph())?;
/// let g2 = autograd::grad(&[&g[0]], &[&x], GradOptions::default())?;
/// assert_eq!((g[0].item::<f32>()?, g2[0].item::<f32>()?), (27.0, 18.0));
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Grads(Vec<Option<Tensor>>);

impl Grads {
    pub(crate) fn new(grads: Vec<Option<Tensor>>) -> Self {
        Grads(grads)
    }

    /// The gradient of input `i`; `None` for an unused input (only with
    /// `allow_unused`) or an `i` past the inputs.
    pub fn get(&self, i: usize) -> Option<&Tensor> {
        self.0.get(i).and_then(Option::as_ref)
    }

    /// The number of inputs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there were no inputs.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The gradients in order, `None` for unused inputs.
    pub fn iter(&self) -> impl Iterator<Item = Option<&Tensor>> {
        self.0.iter().map(Option::as_ref)
    }

    /// The gradients as PyTorch's tuple: `None` for unused inputs.
    pub fn into_vec(self) -> Vec<Option<Tensor>> {
        self.0
    }

    /// The gradients as tensors; [`Error::UnusedInput`](crate::Error::UnusedInput)
    /// naming the first input that has none.
    pub fn into_tensors(self) -> Result<Vec<Tensor>> {
        self.0
            .into_iter()
            .enumerate()
            .map(|(i, g)| g.ok_or_else(|| super::unused_input(i)))
            .collect()
    }
}

impl Index<usize> for Grads {
    type Output = Tensor;

    /// The gradient of input `i`.
    ///
    /// # Panics
    ///
    /// When input `i` was unused (only possible with `allow_unused`) or
    /// there are fewer inputs; [`Grads::get`] returns `None` instead.
    #[track_caller]
    fn index(&self, i: usize) -> &Tensor {
        match self.0.get(i) {
            Some(Some(g)) => g,
            Some(None) => panic!(
                "grad: input {i} was not used in the graph, so it has no gradient (allow_unused gives None; use Grads::get)"
            ),
            None => panic!("grad: index {i} out of range for {} inputs", self.0.len()),
        }
    }
}

impl IntoIterator for Grads {
    type Item = Option<Tensor>;
    type IntoIter = std::vec::IntoIter<Option<Tensor>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
