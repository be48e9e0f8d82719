//! The autograd graph's types, below the operators that record into it and
//! the engine that runs it: [`Node`] and [`Edge`], the [`Backward`] trait of
//! a node's formula, saved tensors, a leaf's gradient accumulator, and a
//! tensor's autograd state ([`AutogradMeta`], kept in the tensor's slot).

mod accumulate;
mod meta;
mod node;
mod saved;

pub(crate) use accumulate::AccumulateGrad;
pub use meta::PostAccumulateHook;
pub(crate) use meta::{SlotExt, ViewCreation, mark_view};
pub use node::{Backward, Edge, GradHook, Node};
pub(crate) use node::{Edges, next_hook_id};
pub(crate) use saved::SavedTensor;

use crate::dtype::DType;
use crate::error::Error;

/// PyTorch's error for an operation that would give an integer or bool
/// result a history ("Autograd not support dtype: Long").
pub(crate) fn autograd_dtype_error(op: &'static str, dtype: DType) -> Error {
    let torch_name = dtype.scalar_type_name();
    Error::invalid(op, format!("Autograd not support dtype: {torch_name}"))
}
