//! [`ModuleState`]: a module's training flag and its hooks, and
//! [`call_with_hooks`], which runs a forward between them (PyTorch's
//! `Module.__call__`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use ferrotorch_core::{Result, Tensor, autograd};

use crate::Module;

/// A forward pre-hook: sees the inputs before `forward`; `Some(inputs)`
/// replaces them.
pub type ForwardPreHook = dyn Fn(&dyn Module, &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync;
/// A forward hook: sees the inputs and the output after `forward`;
/// `Some(output)` replaces the output.
pub type ForwardHook = dyn Fn(&dyn Module, &[Tensor], &Tensor) -> Result<Option<Tensor>> + Send + Sync;
/// A full backward hook: sees the gradients with respect to the module's
/// inputs (`None` for an input that does not require grad) and to its
/// output; `Some(grads)` replaces the input gradients. Unlike PyTorch's it
/// is not passed the module: it runs after the forward has returned, when
/// the module is no longer borrowed (a hook that needs it captures what it
/// needs).
pub type BackwardHook =
    dyn Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync;

type List<F> = RwLock<Vec<(u64, Arc<F>)>>;

#[derive(Default)]
struct Hooks {
    next_id: AtomicU64,
    pre: List<ForwardPreHook>,
    post: List<ForwardHook>,
    backward: List<BackwardHook>,
}

fn read<F: ?Sized>(l: &List<F>) -> Vec<Arc<F>> {
    l.read()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|(_, h)| h.clone())
        .collect()
}

fn push<F: ?Sized>(l: &List<F>, id: u64, h: Arc<F>) {
    l.write().unwrap_or_else(PoisonError::into_inner).push((id, h));
}

fn remove<F: ?Sized>(l: &List<F>, id: u64) {
    l.write()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|(i, _)| *i != id);
}

/// A module's training flag (true when built, as in PyTorch) and its
/// forward, forward-pre and full backward hooks. Put one in a struct that
/// derives [`Module`] to give it `train()` / `eval()` state
/// and hooks; every layer of this crate has one.
pub struct ModuleState {
    training: AtomicBool,
    hooks: Arc<Hooks>,
}

impl Default for ModuleState {
    fn default() -> Self {
        ModuleState {
            training: AtomicBool::new(true),
            hooks: Arc::default(),
        }
    }
}

impl std::fmt::Debug for ModuleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleState")
            .field("training", &self.is_training())
            .finish_non_exhaustive()
    }
}

/// A copy has the same training flag and no hooks (PyTorch's
/// `copy.deepcopy` keeps hooks; closures cannot be copied here).
impl Clone for ModuleState {
    fn clone(&self) -> Self {
        ModuleState {
            training: AtomicBool::new(self.is_training()),
            hooks: Arc::default(),
        }
    }
}

impl ModuleState {
    /// Whether the module is in training mode.
    pub fn is_training(&self) -> bool {
        self.training.load(Ordering::Relaxed)
    }

    /// Sets the training flag of this module only.
    pub fn set_training(&self, mode: bool) {
        self.training.store(mode, Ordering::Relaxed);
    }

    fn id(&self) -> u64 {
        self.hooks.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn handle(&self, id: u64, kind: HookKind) -> HookHandle {
        HookHandle {
            id,
            kind,
            hooks: Arc::downgrade(&self.hooks),
        }
    }

    /// Registers a forward pre-hook; the handle removes it.
    pub fn register_forward_pre_hook(
        &self,
        hook: impl Fn(&dyn Module, &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync + 'static,
    ) -> HookHandle {
        let id = self.id();
        push(&self.hooks.pre, id, Arc::new(hook));
        self.handle(id, HookKind::Pre)
    }

    /// Registers a forward hook; the handle removes it.
    pub fn register_forward_hook(
        &self,
        hook: impl Fn(&dyn Module, &[Tensor], &Tensor) -> Result<Option<Tensor>> + Send + Sync + 'static,
    ) -> HookHandle {
        let id = self.id();
        push(&self.hooks.post, id, Arc::new(hook));
        self.handle(id, HookKind::Post)
    }

    /// Registers a full backward hook; the handle removes it.
    pub fn register_full_backward_hook(
        &self,
        hook: impl Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync + 'static,
    ) -> HookHandle {
        let id = self.id();
        push(&self.hooks.backward, id, Arc::new(hook));
        self.handle(id, HookKind::Backward)
    }
}

#[derive(Debug, Clone, Copy)]
enum HookKind {
    Pre,
    Post,
    Backward,
}

/// Removes the hook it was returned for (`handle.remove()`); dropping the
/// handle keeps the hook, as in PyTorch.
#[derive(Debug)]
pub struct HookHandle {
    id: u64,
    kind: HookKind,
    hooks: Weak<Hooks>,
}

impl HookHandle {
    /// Removes the hook (nothing if the module is gone or it was removed).
    pub fn remove(&self) {
        if let Some(h) = self.hooks.upgrade() {
            match self.kind {
                HookKind::Pre => remove(&h.pre, self.id),
                HookKind::Post => remove(&h.post, self.id),
                HookKind::Backward => remove(&h.backward, self.id),
            }
        }
    }
}

/// Runs `forward` on `inputs` as PyTorch's `Module.__call__` does: the
/// forward pre-hooks, then (when full backward hooks are registered and
/// grad mode is on) identity nodes on the inputs and the output that
/// collect their gradients for the backward hooks, then the forward hooks.
/// Without hooks this is `forward(inputs)`.
pub fn call_with_hooks(
    module: &dyn Module,
    inputs: &[Tensor],
    forward: impl FnOnce(&[Tensor]) -> Result<Tensor>,
) -> Result<Tensor> {
    let Some(state) = module.state() else {
        return forward(inputs);
    };
    let (pre, post, backward) = (
        read(&state.hooks.pre),
        read(&state.hooks.post),
        read(&state.hooks.backward),
    );
    if pre.is_empty() && post.is_empty() && backward.is_empty() {
        return forward(inputs);
    }
    let mut args: Vec<Tensor> = inputs.to_vec();
    for h in &pre {
        if let Some(new) = h(module, &args)? {
            args = new;
        }
    }
    let tracked = !backward.is_empty() && autograd::is_grad_enabled();
    let grad_out: Arc<Mutex<Option<Tensor>>> = Arc::default();
    let mut input_slots = Vec::new();
    if tracked {
        // Identity nodes whose gradients are the module's grad_input.
        for a in args.iter_mut() {
            if a.requires_grad() {
                *a = a.alias()?;
                input_slots.push(Some(a.clone()));
            } else {
                input_slots.push(None);
            }
        }
    }
    let mut out = forward(&args)?;
    for h in &post {
        if let Some(new) = h(module, &args, &out)? {
            out = new;
        }
    }
    if tracked && out.requires_grad() {
        out = out.alias()?;
        let n_inputs = input_slots.len();
        let first_grad_input = input_slots.iter().position(Option::is_some);
        let hooks = backward.clone();
        let slot = grad_out.clone();
        // The output's gradient arrives first: keep it for the input hook, or
        // (no input requires grad) run the hooks now with grad_input None.
        out.register_fallible_hook(move |g| {
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(g.clone());
            if first_grad_input.is_none() {
                let none = vec![None; n_inputs];
                for h in &hooks {
                    h(&none, std::slice::from_ref(&Some(g.clone())))?;
                }
            }
            Ok(None)
        })?;
        for (i, t) in input_slots.iter().enumerate() {
            let Some(t) = t else { continue };
            let hooks = backward.clone();
            let slot = grad_out.clone();
            // One hook call per backward, with every input's gradient; with
            // several inputs this reports input i's gradient and None for
            // the others whose gradients arrive separately.
            t.register_fallible_hook(move |g| {
                let go = slot.lock().unwrap_or_else(PoisonError::into_inner).clone();
                let mut grads: Vec<Option<Tensor>> = vec![None; n_inputs];
                grads[i] = Some(g.clone());
                let mut replaced = None;
                for h in &hooks {
                    if let Some(new) = h(&grads, std::slice::from_ref(&go))? {
                        grads = new;
                        replaced = grads.get(i).cloned().flatten();
                    }
                }
                Ok(replaced)
            })?;
        }
    }
    Ok(out)
}
