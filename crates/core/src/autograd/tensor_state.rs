//! Autograd state of a tensor: `requires_grad`, `.grad`, `grad_fn`, hooks,
//! and the tensor-facing API (`requires_grad_`, `detach`, `retain_grad`, ...).

use std::sync::{Arc, Weak};

use super::graph::{AccumulateGrad, Edge, GradHook, Node, PostAccumulateHook, SlotExt, next_hook_id};
use crate::tensor::TensorImpl;
use crate::{Error, Result, Tensor};

/// Removes a registered hook when [`HookHandle::remove`] is called.
pub struct HookHandle {
    id: usize,
    target: HookTarget,
}

enum HookTarget {
    Node(Weak<Node>),
    Leaf(Weak<TensorImpl>),
    Post(Weak<TensorImpl>),
}

impl HookHandle {
    /// Unregisters the hook (a no-op if its tensor or node is gone).
    pub fn remove(self) {
        match &self.target {
            HookTarget::Node(n) => {
                if let Some(n) = n.upgrade() {
                    n.hooks().retain(|h| h.1 != self.id);
                }
            }
            HookTarget::Leaf(t) | HookTarget::Post(t) => {
                if let Some(t) = t.upgrade() {
                    let mut g = t.autograd.meta();
                    if let Some(m) = g.as_mut() {
                        m.leaf_hooks.retain(|h| h.0 != self.id);
                        m.post_hooks.retain(|h| h.0 != self.id);
                    }
                }
            }
        }
    }
}

/// # Autograd: state
///
/// `requires_grad`, `.grad`, `grad_fn`, `retain_grad`, `detach` and hooks.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([1.0f32])?.requires_grad_(true)?;
/// let y = &x * 2;
/// assert!(x.is_leaf() && !y.is_leaf());
/// assert_eq!(y.grad_fn().unwrap().name(), "MulBackward0");
/// assert!(x.grad().is_err());    // no gradient yet (PyTorch: None)
/// assert!(!y.detach().requires_grad());
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// Whether gradients flow to or through this tensor (a leaf that asked
    /// for them, or the result of an operation on such tensors).
    #[inline]
    pub fn requires_grad(&self) -> bool {
        self.0.autograd.flag() || self.0.base.as_ref().is_some_and(|b| self.gains_history(b))
    }

    /// A view of a base that did not require grad when the view was made,
    /// and that an in-place write through another view has since given a
    /// history (`CopySlices`): the view takes its part of that history
    /// now (`as_strided` of the base), as PyTorch regenerates a view's
    /// `grad_fn` when its base's version changed. Returns whether it did.
    #[cold]
    #[inline(never)]
    fn gains_history(&self, base: &Tensor) -> bool {
        if !base.requires_grad() || !self.is_floating_point() || base.version() == self.0.base_version {
            return false;
        }
        super::view::take_base_history(self, base)
    }

    /// Sets `requires_grad` on a leaf (`tensor.requires_grad_()`); only
    /// floating-point tensors can require gradients. Returns `self`.
    pub fn requires_grad_(&self, requires_grad: bool) -> Result<Tensor> {
        if !self.is_leaf() {
            return Err(Error::invalid(
                "requires_grad_",
                "you can only change requires_grad flags of leaf variables; use detach() to get a tensor that does not require grad",
            ));
        }
        if requires_grad && !self.dtype().is_floating_point() {
            return Err(Error::dtype(
                "requires_grad_",
                self.dtype(),
                "only Tensors of floating point dtype can require gradients",
            ));
        }
        let mut g = self.0.autograd.meta();
        g.get_or_insert_with(Default::default).requires_grad = requires_grad;
        self.0.autograd.set_flag(requires_grad);
        Ok(self.clone())
    }

    /// True for tensors not produced by a recorded operation (their
    /// gradient is accumulated into `.grad`).
    pub fn is_leaf(&self) -> bool {
        if self.0.base.is_some() {
            // A stale view takes its history first (see `gains_history`).
            self.requires_grad();
        }
        self.0.autograd.meta().as_ref().is_none_or(|m| m.grad_fn.is_none())
    }

    /// The accumulated gradient (`tensor.grad`), ready to use:
    /// `w.sub_(&(w.grad()? * lr))?`. [`Error::NoGrad`] when there is none
    /// (no backward reached this tensor yet, or it is not a leaf and did
    /// not [`retain_grad`](Tensor::retain_grad)); [`Tensor::grad_opt`] is
    /// PyTorch's `None` check (`if p.grad is None: continue`).
    ///
    /// ```
    /// use ferrotorch_core::{Error, Tensor};
    /// let w = Tensor::ones(&[2])?.requires_grad_(true)?;
    /// assert!(matches!(w.grad(), Err(Error::NoGrad { .. })));
    /// (&w * 3.0).sum()?.backward()?;
    /// assert_eq!(w.grad()?.to_vec::<f32>()?, [3.0, 3.0]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn grad(&self) -> Result<Tensor> {
        self.grad_opt().ok_or_else(|| Error::NoGrad {
            detail: if !self.requires_grad() {
                "the tensor does not require grad, so it gets no gradient".into()
            } else if self.is_leaf() {
                "no gradient has been accumulated into this tensor yet (run backward first)".into()
            } else {
                "the .grad of a tensor that is not a leaf is not populated during backward; call retain_grad() on \
                 it first, or take the gradient of the leaf"
                    .into()
            },
        })
    }

    /// The accumulated gradient, `None` where PyTorch's `tensor.grad` is
    /// `None` (see [`Tensor::grad`]).
    pub fn grad_opt(&self) -> Option<Tensor> {
        self.0.autograd.meta().as_ref().and_then(|m| m.grad.clone())
    }

    /// Replaces (or with `None` clears) the accumulated gradient. As
    /// PyTorch's `x.grad = g`: an error unless `g` has this tensor's shape,
    /// dtype and device.
    pub fn set_grad(&self, grad: Option<Tensor>) -> Result<()> {
        if let Some(g) = &grad {
            if g.shape() != self.shape() {
                return Err(Error::shape(
                    "set_grad",
                    self.shape(),
                    g.shape(),
                    "assigned grad has a different shape",
                ));
            }
            if g.dtype() != self.dtype() {
                return Err(Error::DTypeMismatch {
                    op: "set_grad",
                    detail: format!(
                        "attempting to assign a gradient with dtype {} to a tensor of dtype {}",
                        g.dtype(),
                        self.dtype()
                    ),
                });
            }
            if g.device() != self.device() {
                return Err(Error::invalid(
                    "set_grad",
                    format!(
                        "attempting to assign a gradient on {} to a tensor on {}; the gradient and the tensor \
                         must be on the same device",
                        g.device(),
                        self.device()
                    ),
                ));
            }
        }
        self.0.autograd.meta().get_or_insert_with(Default::default).grad = grad;
        Ok(())
    }

    /// The node that produced this tensor (`tensor.grad_fn`), `None` for leaves.
    pub fn grad_fn(&self) -> Option<Arc<Node>> {
        self.gradient_edge().and_then(|e| {
            if e.node.backward_fn().leaf().is_some() {
                None
            } else {
                Some(e.node)
            }
        })
    }

    /// Keeps `.grad` for this non-leaf tensor in backward (`retain_grad()`).
    pub fn retain_grad(&self) -> Result<()> {
        if !self.requires_grad() {
            return Err(Error::invalid(
                "retain_grad",
                "can't retain_grad on Tensor that has requires_grad=False",
            ));
        }
        if self.is_leaf() || self.retains_grad() {
            return Ok(());
        }
        let edge = self.gradient_edge().expect("a non-leaf has a grad_fn");
        let weak = Arc::downgrade(&self.0);
        edge.node.add_hook(
            edge.input_nr,
            Arc::new(move |g: &Tensor| {
                if let Some(t) = weak.upgrade() {
                    let mut m = t.autograd.meta();
                    if let Some(m) = m.as_mut() {
                        // A failed accumulation (a `.grad` set on another
                        // device) ends backward with its error; `.grad`
                        // keeps its old value.
                        let acc = match &m.grad {
                            Some(old) => old.add(g)?,
                            None => g.detach(),
                        };
                        m.grad = Some(acc);
                    }
                }
                Ok(None)
            }),
        );
        self.0.autograd.meta().get_or_insert_with(Default::default).retains_grad = true;
        Ok(())
    }

    /// Whether `retain_grad()` was called on this non-leaf.
    pub fn retains_grad(&self) -> bool {
        self.0.autograd.meta().as_ref().is_some_and(|m| m.retains_grad)
    }

    /// A tensor sharing this one's data and version counter but outside the
    /// graph (`detach()`).
    pub fn detach(&self) -> Tensor {
        Tensor::wrap(TensorImpl::arc(
            self.0.storage.clone(),
            self.0.layout.clone(),
            self.0.dtype,
            None,
        ))
    }

    /// Detaches in place: `self` becomes a leaf that does not require grad.
    pub fn detach_(&self) -> Result<Tensor> {
        if self.0.base.is_some() && self.requires_grad() {
            return Err(Error::invalid(
                "detach_",
                "can't detach views in-place; use detach() instead",
            ));
        }
        let mut g = self.0.autograd.meta();
        if let Some(m) = g.as_mut() {
            m.grad_fn = None;
            m.requires_grad = false;
        }
        self.0.autograd.set_flag(false);
        Ok(self.clone())
    }

    /// Registers a hook on this tensor's gradient; it may return a
    /// replacement (`Some`). Returns a handle that removes it. A hook that
    /// computes its replacement with fallible operations is better written
    /// with [`Tensor::register_fallible_hook`], whose errors end backward.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use ferrotorch_core::Tensor;
    /// let x = Tensor::ones(&[2])?.requires_grad_(true)?;
    /// let calls = Arc::new(AtomicUsize::new(0));
    /// let seen = calls.clone();
    /// let _h = x.register_hook(move |_g| {
    ///     seen.fetch_add(1, Ordering::Relaxed);
    ///     None
    /// })?;
    /// x.mul(3.0)?.sum()?.backward()?;
    /// assert_eq!(calls.load(Ordering::Relaxed), 1);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn register_hook(
        &self,
        hook: impl Fn(&Tensor) -> Option<Tensor> + Send + Sync + 'static,
    ) -> Result<HookHandle> {
        self.register_fallible_hook(move |g| Ok(hook(g)))
    }

    /// Registers a hook on this tensor's gradient that may fail: `Ok(Some(g))`
    /// replaces the gradient, `Ok(None)` leaves it, and an error ends the
    /// backward pass, which returns it. Returns a handle that removes it.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// let x = Tensor::ones(&[2])?.requires_grad_(true)?;
    /// let _h = x.register_fallible_hook(|g| Ok(Some(g.mul(2.0)?)))?;
    /// x.mul(3.0)?.sum()?.backward()?;
    /// assert_eq!(x.grad()?.to_vec::<f32>()?, [6.0, 6.0]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn register_fallible_hook(
        &self,
        hook: impl Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync + 'static,
    ) -> Result<HookHandle> {
        if !self.requires_grad() {
            return Err(Error::invalid(
                "register_hook",
                "cannot register a hook on a tensor that doesn't require gradient",
            ));
        }
        let hook: GradHook = Arc::new(hook);
        if self.is_leaf() {
            let id = next_hook_id();
            self.0
                .autograd
                .meta()
                .get_or_insert_with(Default::default)
                .leaf_hooks
                .push((id, hook));
            return Ok(HookHandle {
                id,
                target: HookTarget::Leaf(Arc::downgrade(&self.0)),
            });
        }
        let edge = self.gradient_edge().expect("a non-leaf has a grad_fn");
        let id = edge.node.add_hook(edge.input_nr, hook);
        Ok(HookHandle {
            id,
            target: HookTarget::Node(Arc::downgrade(&edge.node)),
        })
    }

    /// Registers a hook run after this leaf's `.grad` has been updated in
    /// backward (`register_post_accumulate_grad_hook`).
    pub fn register_post_accumulate_grad_hook(
        &self,
        hook: impl Fn(&Tensor) + Send + Sync + 'static,
    ) -> Result<HookHandle> {
        if !self.is_leaf() || !self.requires_grad() {
            return Err(Error::invalid(
                "register_post_accumulate_grad_hook",
                "post accumulate grad hooks can only be registered on leaf tensors that require grad",
            ));
        }
        let id = next_hook_id();
        self.0
            .autograd
            .meta()
            .get_or_insert_with(Default::default)
            .post_hooks
            .push((id, Arc::new(hook)));
        Ok(HookHandle {
            id,
            target: HookTarget::Post(Arc::downgrade(&self.0)),
        })
    }

    /// Where this tensor's gradient goes: its `grad_fn` and output number, or
    /// for a leaf that requires grad, its `AccumulateGrad` node.
    pub(crate) fn gradient_edge(&self) -> Option<Edge> {
        if !self.requires_grad() {
            return None;
        }
        if let Some(base) = &self.0.base {
            super::view::refresh_view_grad_fn(self, base);
        }
        let mut g = self.0.autograd.meta();
        let m = g.get_or_insert_with(Default::default);
        if let Some(f) = &m.grad_fn {
            return Some(Edge {
                node: f.clone(),
                input_nr: m.output_nr,
            });
        }
        let acc = match m.grad_accumulator.upgrade() {
            Some(a) => a,
            None => {
                let a = Node::new(Box::new(AccumulateGrad::new(self.clone())), Vec::new(), "leaf");
                m.grad_accumulator = Arc::downgrade(&a);
                a
            }
        };
        Some(Edge { node: acc, input_nr: 0 })
    }

    /// Makes `node` (output `output_nr`) this tensor's history.
    pub(crate) fn set_grad_fn(&self, node: Arc<Node>, output_nr: usize) {
        let version = self.0.base.as_ref().map(|b| b.version());
        let mut g = self.0.autograd.meta();
        let m = g.get_or_insert_with(Default::default);
        m.grad_fn = Some(node);
        m.output_nr = output_nr;
        m.view_version = version;
        self.0.autograd.set_flag(true);
    }

    /// The base of a view (`tensor._base`), `None` for tensors that own their data.
    pub fn base(&self) -> Option<&Tensor> {
        self.0.base.as_ref()
    }

    pub(crate) fn leaf_hooks(&self) -> Vec<GradHook> {
        self.0
            .autograd
            .meta()
            .as_ref()
            .map(|m| m.leaf_hooks.iter().map(|h| h.1.clone()).collect())
            .unwrap_or_default()
    }

    pub(crate) fn post_hooks(&self) -> Vec<PostAccumulateHook> {
        self.0
            .autograd
            .meta()
            .as_ref()
            .map(|m| m.post_hooks.iter().map(|h| h.1.clone()).collect())
            .unwrap_or_default()
    }

    pub(crate) fn view_version(&self) -> Option<u64> {
        self.0.autograd.meta().as_ref().and_then(|m| m.view_version)
    }
}

#[cfg(test)]
mod tests {
    use crate::autograd::graph::SlotExt;
    use crate::{Device, Error, Result, Tensor, TensorOptions};

    /// retain_grad's hook adds each gradient to the retained `.grad`; when
    /// that addition fails (here a `.grad` on the meta device, which
    /// `set_grad` refuses, so it is written directly), backward returns the
    /// error instead of silently replacing `.grad`.
    #[test]
    fn a_failing_retain_grad_accumulation_is_an_error_of_backward() -> Result<()> {
        let x = Tensor::from_slice(&[1.0f32, 2.0]).requires_grad_(true)?;
        let y = x.mul(2.0)?;
        y.retain_grad()?;
        let loss = y.sum()?;
        loss.backward_opts(crate::autograd::BackwardOptions {
            retain_graph: true,
            ..Default::default()
        })?;
        let meta = TensorOptions::new().device(Device::Meta).zeros([2])?;
        y.0.autograd.meta().get_or_insert_with(Default::default).grad = Some(meta);
        let e = loss.backward().unwrap_err();
        assert!(matches!(e, Error::DeviceMismatch { .. }), "{e}");
        // The assigned .grad is kept as it was.
        assert_eq!(y.grad().unwrap().device(), Device::Meta);
        Ok(())
    }
}
