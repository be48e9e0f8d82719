//! [`ModuleState`]: a module's training flag and its hooks, and
//! [`call_with_hooks`], which runs a forward between them (PyTorch's
//! `Module.__call__`).
//!
//! Hooks see a module's tensors as flat lists, whatever its forward takes
//! and returns: the inputs are the tensors passed positionally
//! (`[query, key, value]` for `MultiheadAttention`, `[input, h_0, c_0]` for
//! an LSTM given an initial state), the outputs every tensor the forward
//! returns, in order ([`ForwardOutput`]: `[output, h_n, c_n]` for an LSTM,
//! `[output, attn_weights]` for attention that returns its weights).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use ferrotorch_core::autograd::{Function, FunctionCtx, apply_function};
use ferrotorch_core::{Error, Result, Tensor, autograd};

use crate::Module;

/// A forward pre-hook (PyTorch's `hook(module, args)`): sees the inputs
/// before `forward`; `Some(inputs)` replaces them (as many as it was
/// given).
pub type ForwardPreHook = dyn Fn(&dyn Module, &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync;
/// A forward hook (PyTorch's `hook(module, args, output)`): sees the
/// inputs and every tensor output after `forward`; `Some(outputs)`
/// replaces the outputs (as many as it was given).
pub type ForwardHook = dyn Fn(&dyn Module, &[Tensor], &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync;
/// A full backward hook (PyTorch's `hook(module, grad_input,
/// grad_output)`): sees the gradients with respect to the module's inputs
/// (`None` for an input that does not require grad) and to each of its
/// outputs (`None` for an output that got no gradient), once per backward;
/// `Some(grads)` replaces the input gradients (one per input). Unlike
/// PyTorch's it is not passed the module: it runs after the forward has
/// returned, when the module is no longer borrowed (a hook that needs it
/// captures what it needs).
pub type BackwardHook =
    dyn Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync;

type List<F> = RwLock<Vec<(u64, Arc<F>)>>;

#[derive(Default)]
struct Hooks {
    next_id: AtomicU64,
    /// How many hooks of any kind are registered: 0 is the fast path.
    count: AtomicUsize,
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

fn copy_list<F: ?Sized>(l: &List<F>) -> List<F> {
    RwLock::new(l.read().unwrap_or_else(PoisonError::into_inner).clone())
}

impl Hooks {
    fn push<F: ?Sized>(&self, list: &List<F>, h: Arc<F>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        list.write().unwrap_or_else(PoisonError::into_inner).push((id, h));
        self.count.fetch_add(1, Ordering::Release);
        id
    }

    fn remove<F: ?Sized>(&self, list: &List<F>, id: u64) {
        let mut l = list.write().unwrap_or_else(PoisonError::into_inner);
        let before = l.len();
        l.retain(|(i, _)| *i != id);
        if l.len() < before {
            self.count.fetch_sub(1, Ordering::Release);
        }
    }

    /// A copy of the lists (the hooks themselves are shared).
    fn copy(&self) -> Hooks {
        Hooks {
            next_id: AtomicU64::new(self.next_id.load(Ordering::Relaxed)),
            count: AtomicUsize::new(self.count.load(Ordering::Acquire)),
            pre: copy_list(&self.pre),
            post: copy_list(&self.post),
            backward: copy_list(&self.backward),
        }
    }
}

/// A module's training flag (true when built, as in PyTorch) and its
/// forward, forward-pre and full backward hooks. Put one in a struct that
/// derives [`Module`] to give it `train()` / `eval()` state
/// and hooks; every layer of this crate has one.
pub struct ModuleState {
    training: AtomicBool,
    hooks: Arc<Hooks>,
    attachments: RwLock<Vec<(&'static str, Attachment)>>,
}

/// A value a wrapper keeps on a module (see [`ModuleState::attach`]).
pub type Attachment = Arc<dyn std::any::Any + Send + Sync>;

impl Default for ModuleState {
    fn default() -> Self {
        ModuleState {
            training: AtomicBool::new(true),
            hooks: Arc::default(),
            attachments: RwLock::default(),
        }
    }
}

impl std::fmt::Debug for ModuleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleState")
            .field("training", &self.is_training())
            .field("hooks", &self.hooks.count.load(Ordering::Relaxed))
            .finish()
    }
}

/// A copy has the same training flag and the same hooks, in lists of its
/// own, and none of the original's [attachments](ModuleState::attach) (PyTorch's `copy.deepcopy` copies the hook dicts and shares the
/// hook functions): hooks registered later on either module stay on that
/// module, and the handles returned for the original's hooks remove them
/// from the original only, as PyTorch's `RemovableHandle`s do.
impl Clone for ModuleState {
    fn clone(&self) -> Self {
        ModuleState {
            training: AtomicBool::new(self.is_training()),
            hooks: Arc::new(self.hooks.copy()),
            attachments: RwLock::default(),
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

    /// Keeps `value` on the module under `key`, as PyTorch's wrappers set
    /// attributes on a module (`fully_shard` keeps its state this way, so
    /// that an enclosing `fully_shard` or a state-dict function finds it
    /// by walking the modules). Errors when `key` is taken: a module is
    /// wrapped once.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use ferrotorch_nn::ModuleState;
    /// let st = ModuleState::default();
    /// st.attach("tag", Arc::new(7u32))?;
    /// assert_eq!(st.attachment("tag").and_then(|a| a.downcast::<u32>().ok()).as_deref(), Some(&7));
    /// assert!(st.attach("tag", Arc::new(8u32)).is_err() && st.attachment("other").is_none());
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn attach(&self, key: &'static str, value: Attachment) -> Result<()> {
        let mut list = self.attachments.write().unwrap_or_else(PoisonError::into_inner);
        if list.iter().any(|(k, _)| *k == key) {
            return Err(Error::invalid(
                "ModuleState::attach",
                format!("the module already has a {key:?} attachment (it was wrapped before)"),
            ));
        }
        list.push((key, value));
        Ok(())
    }

    /// The value kept under `key` by [`ModuleState::attach`], if any.
    pub fn attachment(&self, key: &str) -> Option<Attachment> {
        let list = self.attachments.read().unwrap_or_else(PoisonError::into_inner);
        list.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
    }

    /// Whether any hook is registered.
    pub fn has_hooks(&self) -> bool {
        self.hooks.count.load(Ordering::Acquire) != 0
    }

    fn handle(&self, id: u64, kind: HookKind) -> HookHandle {
        HookHandle {
            id,
            kind,
            hooks: Arc::downgrade(&self.hooks),
        }
    }

    /// Registers a forward pre-hook ([`ForwardPreHook`]); the handle
    /// removes it.
    pub fn register_forward_pre_hook(
        &self,
        hook: impl Fn(&dyn Module, &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync + 'static,
    ) -> HookHandle {
        let id = self.hooks.push(&self.hooks.pre, Arc::new(hook));
        self.handle(id, HookKind::Pre)
    }

    /// Registers a forward hook ([`ForwardHook`]); the handle removes it.
    pub fn register_forward_hook(
        &self,
        hook: impl Fn(&dyn Module, &[Tensor], &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync + 'static,
    ) -> HookHandle {
        let id = self.hooks.push(&self.hooks.post, Arc::new(hook));
        self.handle(id, HookKind::Post)
    }

    /// Registers a full backward hook ([`BackwardHook`]); the handle
    /// removes it.
    pub fn register_full_backward_hook(
        &self,
        hook: impl Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync + 'static,
    ) -> HookHandle {
        let id = self.hooks.push(&self.hooks.backward, Arc::new(hook));
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
                HookKind::Pre => h.remove(&h.pre, self.id),
                HookKind::Post => h.remove(&h.post, self.id),
                HookKind::Backward => h.remove(&h.backward, self.id),
            }
        }
    }
}

/// What a forward returns, as hooks see it: its tensors in order, and the
/// same value rebuilt around replacements. Implemented for `Tensor`,
/// `Option` (no tensor when `None`), `Vec` and tuples of up to four, so
/// `(Tensor, Option<Tensor>)` (attention) shows hooks one or two tensors
/// and `(Tensor, (Tensor, Tensor))` (LSTM) three.
pub trait ForwardOutput: Sized {
    /// Appends the tensors, in order, to `out`.
    fn collect_tensors(&self, out: &mut Vec<Tensor>);

    /// `self` with its tensors taken, in order, from `tensors`; an error if
    /// it runs out.
    fn rebuild(self, tensors: &mut std::vec::IntoIter<Tensor>) -> Result<Self>;
}

impl ForwardOutput for Tensor {
    fn collect_tensors(&self, out: &mut Vec<Tensor>) {
        out.push(self.clone());
    }

    fn rebuild(self, tensors: &mut std::vec::IntoIter<Tensor>) -> Result<Self> {
        tensors
            .next()
            .ok_or_else(|| Error::invalid("call_with_hooks", "too few tensors to rebuild the forward's output"))
    }
}

impl<T: ForwardOutput> ForwardOutput for Option<T> {
    fn collect_tensors(&self, out: &mut Vec<Tensor>) {
        if let Some(x) = self {
            x.collect_tensors(out);
        }
    }

    fn rebuild(self, tensors: &mut std::vec::IntoIter<Tensor>) -> Result<Self> {
        self.map(|x| x.rebuild(tensors)).transpose()
    }
}

impl<T: ForwardOutput> ForwardOutput for Vec<T> {
    fn collect_tensors(&self, out: &mut Vec<Tensor>) {
        for x in self {
            x.collect_tensors(out);
        }
    }

    fn rebuild(self, tensors: &mut std::vec::IntoIter<Tensor>) -> Result<Self> {
        self.into_iter().map(|x| x.rebuild(tensors)).collect()
    }
}

macro_rules! tuple_output {
    ($($t:ident $i:tt),+) => {
        impl<$($t: ForwardOutput),+> ForwardOutput for ($($t,)+) {
            fn collect_tensors(&self, out: &mut Vec<Tensor>) {
                $(self.$i.collect_tensors(out);)+
            }

            fn rebuild(self, tensors: &mut std::vec::IntoIter<Tensor>) -> Result<Self> {
                Ok(($(self.$i.rebuild(tensors)?,)+))
            }
        }
    };
}

tuple_output!(A 0, B 1);
tuple_output!(A 0, B 1, C 2);
tuple_output!(A 0, B 1, C 2, D 3);

/// Runs `forward` on `inputs` as PyTorch's `Module.__call__` does: the
/// forward pre-hooks (each may replace the inputs), then, when full
/// backward hooks are registered and grad mode is on, one identity node
/// over the inputs that require grad (`BackwardHookFunctionBackward`: its
/// gradients are the module's `grad_input`), then `forward`, the forward
/// hooks (each may replace the outputs), and one identity node over the
/// outputs that require grad (its gradients are `grad_output`). The
/// backward hooks run once per backward, when the input node runs, with
/// every input's and output's gradient (or, when no input requires grad,
/// at the output node with `grad_input` all `None`).
///
/// `inputs` are the tensors the module was called with, positionally;
/// `forward` gets them (replaced by the hooks) and returns any
/// [`ForwardOutput`]. A hook that returns a different number of tensors
/// than it was given is an error naming the module. Without hooks this is
/// `forward(inputs)`, with no allocation.
///
/// A module with two outputs, whose forward hook swaps them:
///
/// ```
/// use ferrotorch_core::{Result, Tensor};
/// use ferrotorch_nn::{Module, ModuleState, call_with_hooks};
///
/// #[derive(Module)]
/// # #[module(crate = ferrotorch_nn)] // (this crate's own doc test; users write `ferrotorch::nn`)
/// struct PosNeg {
///     state: ModuleState,
/// }
///
/// impl PosNeg {
///     fn forward(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
///         call_with_hooks(self, std::slice::from_ref(x), |a| Ok((a[0].relu()?, a[0].neg()?.relu()?)))
///     }
/// }
///
/// let m = PosNeg { state: ModuleState::default() };
/// let x = Tensor::new([1.0f32, -2.0])?;
/// let handle = m.register_forward_hook(|_, _, outs| Ok(Some(vec![outs[1].clone(), outs[0].clone()])))?;
/// let (pos, neg) = m.forward(&x)?;
/// assert_eq!((pos.to_vec::<f32>()?, neg.to_vec::<f32>()?), (vec![0.0, 2.0], vec![1.0, 0.0]));
/// handle.remove();
/// assert_eq!(m.forward(&x)?.0.to_vec::<f32>()?, [1.0, 0.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn call_with_hooks<O: ForwardOutput>(
    module: &dyn Module,
    inputs: &[Tensor],
    forward: impl FnOnce(&[Tensor]) -> Result<O>,
) -> Result<O> {
    match module.state() {
        Some(state) if state.has_hooks() => run_hooked(module, state, inputs, forward),
        _ => forward(inputs),
    }
}

fn count_error(module: &dyn Module, what: &str, got: usize, want: usize) -> Error {
    Error::module(
        module.type_name(),
        format!("{what} returned {got} tensors, expected {want} (one per tensor it was given)"),
    )
}

fn run_hooked<O: ForwardOutput>(
    module: &dyn Module,
    state: &ModuleState,
    inputs: &[Tensor],
    forward: impl FnOnce(&[Tensor]) -> Result<O>,
) -> Result<O> {
    let (pre, post, backward) = (
        read(&state.hooks.pre),
        read(&state.hooks.post),
        read(&state.hooks.backward),
    );
    let mut args: Vec<Tensor> = inputs.to_vec();
    for h in &pre {
        if let Some(new) = h(module, &args)? {
            if new.len() != args.len() {
                return Err(count_error(module, "a forward pre-hook", new.len(), args.len()));
            }
            args = new;
        }
    }
    let bw = if !backward.is_empty() && autograd::is_grad_enabled() {
        let (shared, hooked) = BackwardHookState::setup_inputs(backward, args)?;
        args = hooked;
        Some(shared)
    } else {
        None
    };
    let out = forward(&args)?;
    if post.is_empty() && bw.is_none() {
        return Ok(out);
    }
    let mut tensors = Vec::new();
    out.collect_tensors(&mut tensors);
    let n = tensors.len();
    let mut replaced = false;
    for h in &post {
        if let Some(new) = h(module, &args, &tensors)? {
            if new.len() != n {
                return Err(count_error(module, "a forward hook", new.len(), n));
            }
            tensors = new;
            replaced = true;
        }
    }
    if let Some(bw) = bw
        && let Some(new) = bw.setup_outputs(&tensors)?
    {
        tensors = new;
        replaced = true;
    }
    if replaced {
        out.rebuild(&mut tensors.into_iter())
    } else {
        Ok(out)
    }
}

/// What the two identity nodes of one hooked call share: the hooks, the
/// module's input count, which inputs require grad, and the output
/// gradients once they arrive.
struct BackwardHookState {
    hooks: Vec<Arc<BackwardHook>>,
    n_inputs: usize,
    tracked_inputs: Vec<usize>,
    n_outputs: AtomicUsize,
    grad_outputs: Mutex<Option<Vec<Option<Tensor>>>>,
}

/// PyTorch's `BackwardHookFunction`: the identity on the tensors it is
/// given, whose backward reports their gradients.
struct BackwardHookFunction {
    shared: Arc<BackwardHookState>,
    /// The positions of this node's tensors among the module's inputs (or
    /// outputs) and their count.
    positions: Vec<usize>,
    total: usize,
    is_input: bool,
}

impl BackwardHookState {
    /// The shared state and the inputs, those that require grad replaced
    /// by the input node's outputs.
    fn setup_inputs(hooks: Vec<Arc<BackwardHook>>, mut args: Vec<Tensor>) -> Result<(Arc<Self>, Vec<Tensor>)> {
        let tracked_inputs: Vec<usize> = (0..args.len()).filter(|&i| args[i].requires_grad()).collect();
        let shared = Arc::new(BackwardHookState {
            hooks,
            n_inputs: args.len(),
            tracked_inputs: tracked_inputs.clone(),
            n_outputs: AtomicUsize::new(0),
            grad_outputs: Mutex::new(None),
        });
        if !tracked_inputs.is_empty() {
            let f = BackwardHookFunction {
                shared: shared.clone(),
                positions: tracked_inputs.clone(),
                total: args.len(),
                is_input: true,
            };
            let refs: Vec<&Tensor> = tracked_inputs.iter().map(|&i| &args[i]).collect();
            let hooked = apply_function(f, &refs)?;
            for (&i, t) in tracked_inputs.iter().zip(hooked) {
                args[i] = t;
            }
        }
        Ok((shared, args))
    }

    /// The outputs through the output node, or `None` when none requires
    /// grad.
    fn setup_outputs(self: Arc<Self>, outputs: &[Tensor]) -> Result<Option<Vec<Tensor>>> {
        self.n_outputs.store(outputs.len(), Ordering::Relaxed);
        let positions: Vec<usize> = (0..outputs.len()).filter(|&i| outputs[i].requires_grad()).collect();
        if positions.is_empty() {
            return Ok(None);
        }
        let refs: Vec<&Tensor> = positions.iter().map(|&i| &outputs[i]).collect();
        let f = BackwardHookFunction {
            shared: self,
            positions: positions.clone(),
            total: outputs.len(),
            is_input: false,
        };
        let hooked = apply_function(f, &refs)?;
        let mut out = outputs.to_vec();
        for (&i, t) in positions.iter().zip(hooked) {
            out[i] = t;
        }
        Ok(Some(out))
    }
}

impl Function for BackwardHookFunction {
    fn name(&self) -> String {
        "BackwardHookFunctionBackward".into()
    }

    fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        Ok(inputs.to_vec())
    }

    fn backward(&self, _ctx: &FunctionCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // The engine passes no slot past the last output that got a gradient.
        let mut all: Vec<Option<Tensor>> = vec![None; self.total];
        for (k, &i) in self.positions.iter().enumerate() {
            all[i] = grads.get(k).cloned().flatten();
        }
        let s = &self.shared;
        if self.is_input {
            let grad_outputs = s
                .grad_outputs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .unwrap_or_else(|| vec![None; s.n_outputs.load(Ordering::Relaxed)]);
            for h in &s.hooks {
                if let Some(new) = h(&all, &grad_outputs)? {
                    if new.len() != self.total {
                        return Err(Error::invalid(
                            "backward hook",
                            format!(
                                "Backward hook returned an invalid number of grad_input, got {}, but expected {}",
                                new.len(),
                                self.total
                            ),
                        ));
                    }
                    all = new;
                }
            }
        } else if s.tracked_inputs.is_empty() {
            // No input node will run: the hooks run now, with no input gradients.
            let none = vec![None; s.n_inputs];
            for h in &s.hooks {
                if let Some(new) = h(&none, &all)?
                    && new.iter().any(Option::is_some)
                {
                    return Err(Error::invalid(
                        "backward hook",
                        "Backward hook for Modules where no input requires gradient should always return None or None for all gradients.",
                    ));
                }
            }
        } else {
            *s.grad_outputs.lock().unwrap_or_else(PoisonError::into_inner) = Some(all.clone());
        }
        Ok(self.positions.iter().map(|&i| all[i].clone()).collect())
    }
}
