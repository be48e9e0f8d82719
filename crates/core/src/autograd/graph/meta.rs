//! The autograd state of a tensor (`requires_grad`, `.grad`, `grad_fn`,
//! hooks, how a view was made), kept in the tensor's type-erased slot, and
//! the typed access to it.

use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, MutexGuard, Weak};

use super::node::{GradHook, Node};
use crate::tensor::Tensor;
use crate::tensor::autograd_slot::{AutogradMetaInterface, AutogradSlot, ErasedMeta};

/// A hook run after a leaf's `.grad` was updated (data-parallel training
/// starts its all-reduce from these).
pub type PostAccumulateHook = Arc<dyn Fn(&Tensor) + Send + Sync>;

#[derive(Default)]
pub(crate) struct AutogradMeta {
    /// A leaf's own flag.
    pub requires_grad: bool,
    pub grad: Option<Tensor>,
    pub grad_fn: Option<Arc<Node>>,
    pub output_nr: usize,
    pub retains_grad: bool,
    pub grad_accumulator: Weak<Node>,
    pub leaf_hooks: Vec<(usize, GradHook)>,
    pub post_hooks: Vec<(usize, PostAccumulateHook)>,
    /// For views: the base's version when this view's `grad_fn` was set.
    pub view_version: Option<u64>,
    /// For views: how the view was made (which in-place writes into it are refused).
    pub view_creation: ViewCreation,
}

/// How a view was made, for the checks of in-place writes into it
/// (PyTorch's `CreationMeta`; views of such a view inherit it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum ViewCreation {
    /// An ordinary view.
    #[default]
    Default,
    /// An output of a multi-output view node (`split`, `unbind`): not to be
    /// written in place while autograd records, nor used after its base was.
    MultiOutput,
    /// Made while grad mode was off (`multi`: by a multi-output view op
    /// that recorded no node): not to be written in place with grad mode on.
    NoGrad {
        /// Made by a multi-output view op.
        multi: bool,
    },
}

/// The locked autograd state of a tensor, typed (what
/// [`AutogradSlot::lock`] holds is only ever an [`AutogradMeta`]).
pub(crate) struct MetaGuard<'a>(MutexGuard<'a, Option<ErasedMeta>>);

/// The state in an erased box (only this module puts boxes in the slot,
/// and only of [`AutogradMeta`]).
fn typed(b: &ErasedMeta) -> &AutogradMeta {
    let any: &dyn Any = &**b;
    any.downcast_ref().expect("an autograd slot holds an AutogradMeta")
}

fn typed_mut(b: &mut ErasedMeta) -> &mut AutogradMeta {
    let any: &mut dyn Any = &mut **b;
    any.downcast_mut().expect("an autograd slot holds an AutogradMeta")
}

thread_local! {
    /// Emptied state boxes of this thread's dead tensors, for its next ones
    /// (the boxes themselves are what is kept: they go into slots).
    #[allow(clippy::vec_box)]
    static SPARE: RefCell<Vec<Box<AutogradMeta>>> = const { RefCell::new(Vec::new()) };
}

/// How many emptied boxes a thread keeps.
const SPARE_BOXES: usize = 128;

impl AutogradMetaInterface for AutogradMeta {
    fn recycle(mut self: Box<Self>) {
        // Emptied before it is kept: dropping the contents (a gradient, a
        // node) may free more tensors, whose boxes come back here too.
        drop(std::mem::take(&mut *self));
        crate::spare::keep(&SPARE, self, SPARE_BOXES);
    }
}

/// A box holding `meta`: an emptied one of this thread's, or a new one.
fn boxed(meta: AutogradMeta) -> ErasedMeta {
    match crate::spare::take(&SPARE) {
        Some(mut b) => {
            *b = meta;
            b
        }
        None => Box::new(meta),
    }
}

impl MetaGuard<'_> {
    /// The state, if the tensor has any.
    pub(crate) fn as_ref(&self) -> Option<&AutogradMeta> {
        self.0.as_ref().map(typed)
    }

    /// The state, mutably, if the tensor has any.
    pub(crate) fn as_mut(&mut self) -> Option<&mut AutogradMeta> {
        self.0.as_mut().map(typed_mut)
    }

    /// The state, made with `f` if the tensor has none yet.
    pub(crate) fn get_or_insert_with(&mut self, f: impl FnOnce() -> AutogradMeta) -> &mut AutogradMeta {
        typed_mut(self.0.get_or_insert_with(|| boxed(f())))
    }

    /// Whether the tensor has no state yet.
    pub(crate) fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

/// Typed access to a tensor's autograd slot.
pub(crate) trait SlotExt {
    /// The locked state.
    fn meta(&self) -> MetaGuard<'_>;
}

impl SlotExt for AutogradSlot {
    fn meta(&self) -> MetaGuard<'_> {
        MetaGuard(self.lock())
    }
}

/// # Autograd state the graph's own code reads
impl Tensor {
    /// How this view was made ([`ViewCreation::Default`] for non-views).
    pub(crate) fn view_creation(&self) -> ViewCreation {
        if self.0.base.is_none() {
            return ViewCreation::Default;
        }
        self.0
            .autograd
            .meta()
            .as_ref()
            .map_or(ViewCreation::Default, |m| m.view_creation)
    }

    /// Records how this view was made (nothing for a non-view).
    pub(crate) fn set_view_creation(&self, creation: ViewCreation) {
        if self.0.base.is_none() {
            return;
        }
        let mut g = self.0.autograd.meta();
        if g.is_none() && creation == ViewCreation::Default {
            return;
        }
        g.get_or_insert_with(Default::default).view_creation = creation;
    }

    /// The locked autograd state.
    pub(crate) fn autograd_meta(&self) -> MetaGuard<'_> {
        self.0.autograd.meta()
    }
}

/// Records how `view`, just made from `x` by a single-output view op, was
/// made: in no-grad mode it is a no-grad view, else it inherits `x`'s kind
/// (a view of a split output is one too), as PyTorch's `CreationMeta`.
pub(crate) fn mark_view(x: &Tensor, view: &Tensor) {
    if !view.is_floating_point() {
        return;
    }
    if !crate::autograd::mode::is_grad_enabled() {
        view.set_view_creation(ViewCreation::NoGrad { multi: false });
    } else if x.base().is_some() {
        let inherited = x.view_creation();
        if inherited != ViewCreation::Default {
            view.set_view_creation(inherited);
        }
    }
}
