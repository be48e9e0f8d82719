//! The [`Module`] trait: a struct's parameters, buffers and child modules,
//! visited in declaration order, and everything PyTorch's `nn.Module`
//! derives from them (named parameters, train / eval, `to`, state dicts).
//!
//! Implementations come from `#[derive(Module)]`, which visits each field;
//! names are the field names, joined by the walker's path stack
//! (`encoder.layers.1.self_attn.in_proj_weight`), never stored by hand.
//! Members are reached through shared references: parameters and buffers
//! are handles with interior mutability ([`Parameter`], [`Buffer`]) and the
//! training flag is atomic ([`ModuleState`]), so a model is `Send + Sync`
//! and `train()`, `to_dtype()` or `load_state_dict()` work on `&model`.

pub mod state;

use std::borrow::Cow;
use std::collections::HashSet;

use ferrotorch_core::{DType, Device, Error, Result, Tensor, autograd};

use crate::pyfmt::add_indent;
use crate::state_dict::{IncompatibleKeys, StateDict, load_into};
use crate::{Buffer, HookHandle, ModuleState, Parameter};

/// What a module shows a [`Visitor`]: its own members, in declaration order.
pub trait Visitor<'a> {
    /// A parameter registered under `name`.
    fn parameter(&mut self, name: &str, p: &'a Parameter);
    /// A buffer registered under `name`.
    fn buffer(&mut self, name: &str, b: &'a Buffer);
    /// A child module registered under `name`.
    fn module(&mut self, name: &str, m: &'a dyn Module);
}

/// A neural-network module (PyTorch's `nn.Module`): derive it with
/// `#[derive(Module)]` and write `forward` as an inherent method (or
/// implement [`Forward`](crate::Forward) for one-tensor layers).
///
/// ```
/// use ferrotorch_core::{Result, Tensor};
/// use ferrotorch_nn::{Forward, Linear, Module};
///
/// #[derive(Module)]
/// # #[module(crate = ferrotorch_nn)] // (this crate's own doc test; users write `ferrotorch::nn`)
/// struct Mlp {
///     fc1: Linear,
///     fc2: Linear,
/// }
///
/// impl Forward for Mlp {
///     fn forward(&self, x: &Tensor) -> Result<Tensor> {
///         self.fc2.call(&self.fc1.call(x)?.relu()?)
///     }
/// }
///
/// let net = Mlp { fc1: Linear::new(4, 8)?, fc2: Linear::new(8, 2)? };
/// let names: Vec<String> = net.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
/// assert_eq!(net.call(&Tensor::ones([3, 4])?)?.shape(), &[3, 2]);
/// println!("{net}"); // Mlp(\n  (fc1): Linear(in_features=4, out_features=8, bias=True) ...
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub trait Module: Send + Sync {
    /// Shows the module's own parameters, buffers and children to
    /// `visitor`, in declaration order (derived).
    fn visit<'a>(&'a self, visitor: &mut dyn Visitor<'a>);

    /// The type name shown by the repr (`Linear`).
    fn type_name(&self) -> Cow<'static, str>;

    /// `self` as a trait object (derived).
    fn as_dyn(&self) -> &dyn Module;

    /// The text inside the repr's parentheses (PyTorch's `extra_repr`:
    /// `in_features=784, out_features=256, bias=True`).
    fn extra_repr(&self) -> String {
        String::new()
    }

    /// The module's training flag and hooks, if it has a [`ModuleState`].
    fn state(&self) -> Option<&ModuleState> {
        None
    }

    /// PyTorch's repr of the module and its children.
    fn repr(&self) -> String {
        default_repr(self.as_dyn())
    }

    /// Every parameter, each once (a tied weight is listed where it first
    /// appears), in PyTorch's order: a module's own parameters, then its
    /// children's, depth first.
    fn parameters(&self) -> Vec<Parameter> {
        self.named_parameters().into_iter().map(|(_, p)| p).collect()
    }

    /// [`Module::parameters`] with their hierarchical names (`0.weight`,
    /// `encoder.layers.1.linear1.bias`).
    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        walk(self.as_dyn(), "", &mut |prefix, m| {
            for (name, p) in m.params {
                if seen.insert(p.id()) {
                    out.push((join(prefix, &name), p.clone()));
                }
            }
        });
        out
    }

    /// Every buffer, each once, in the order of [`Module::parameters`].
    fn buffers(&self) -> Vec<Buffer> {
        self.named_buffers().into_iter().map(|(_, b)| b).collect()
    }

    /// [`Module::buffers`] with their names (`bn.running_mean`).
    fn named_buffers(&self) -> Vec<(String, Buffer)> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        walk(self.as_dyn(), "", &mut |prefix, m| {
            for (name, b) in m.buffers {
                if seen.insert(b.id()) {
                    out.push((join(prefix, &name), b.clone()));
                }
            }
        });
        out
    }

    /// The direct children with their names.
    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        members(self.as_dyn()).children
    }

    /// The direct children.
    fn children(&self) -> Vec<&dyn Module> {
        members(self.as_dyn()).children.into_iter().map(|(_, m)| m).collect()
    }

    /// The module and every descendant, depth first, with their names (the
    /// module itself is `""`), each once.
    fn named_modules(&self) -> Vec<(String, &dyn Module)> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        collect_modules(self.as_dyn(), String::new(), &mut seen, &mut out);
        out
    }

    /// The module and every descendant.
    fn modules(&self) -> Vec<&dyn Module> {
        self.named_modules().into_iter().map(|(_, m)| m).collect()
    }

    /// Whether the module is in training mode: its own flag, or for a
    /// module without a [`ModuleState`], its first descendant's (true when
    /// none has one).
    fn is_training(&self) -> bool {
        if let Some(s) = self.state() {
            return s.is_training();
        }
        self.named_modules()
            .into_iter()
            .find_map(|(_, m)| m.state().map(ModuleState::is_training))
            .unwrap_or(true)
    }

    /// Training mode on the module and every descendant (`model.train()`).
    fn train(&self) {
        self.train_mode(true)
    }

    /// Sets training mode (`mode` true) or evaluation mode on the module and
    /// every descendant (`model.train(mode)`).
    fn train_mode(&self, mode: bool) {
        for m in self.modules() {
            if let Some(s) = m.state() {
                s.set_training(mode);
            }
        }
    }

    /// Evaluation mode (`model.eval()`): `train_mode(false)`.
    fn eval(&self) {
        self.train_mode(false);
    }

    /// Clears the parameters' gradients: drops them (`set_to_none`, the
    /// default in PyTorch) or fills them with zeros.
    fn zero_grad(&self, set_to_none: bool) -> Result<()> {
        for p in self.parameters() {
            let t = p.tensor();
            match t.grad_opt() {
                Some(g) if !set_to_none => {
                    autograd::no_grad(|| g.detach().zero_())?;
                }
                Some(_) => t.set_grad(None)?,
                None => {}
            }
        }
        Ok(())
    }

    /// Sets `requires_grad` on every parameter (freezing with `false`).
    fn requires_grad_(&self, requires_grad: bool) -> Result<()> {
        for p in self.parameters() {
            p.tensor().requires_grad_(requires_grad)?;
        }
        Ok(())
    }

    /// Casts the floating-point parameters and buffers to `dtype` (a float
    /// dtype), swapping the tensors inside their handles so optimizers
    /// built earlier stay valid; gradients are cast with them. Integer
    /// buffers keep their dtype, as in PyTorch. Errors for a non-float
    /// `dtype`.
    fn to_dtype(&self, dtype: DType) -> Result<()> {
        if !dtype.is_floating_point() {
            return Err(Error::module(
                self.type_name(),
                format!("to(): nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}"),
            ));
        }
        convert(self.as_dyn(), &|t| {
            if t.is_floating_point() {
                t.to_dtype(dtype).map(Some)
            } else {
                Ok(None)
            }
        })
    }

    /// Moves every parameter and buffer to `device`.
    fn to_device(&self, device: Device) -> Result<()> {
        convert(self.as_dyn(), &|t| t.to_device(device).map(Some))
    }

    /// Replaces every parameter and buffer (and gradient) with an
    /// uninitialised tensor of the same shape and dtype on `device`
    /// (`module.to_empty(device=...)`), inside the existing handles: how a
    /// model built on the meta device (under
    /// `ferrotorch_core::default_device_scope(Device::Meta)`) gets memory.
    /// Initialise it afterwards (`reset_parameters`, or `apply` with
    /// `nn::init`); the values are unspecified until then.
    fn to_empty(&self, device: Device) -> Result<()> {
        convert(self.as_dyn(), &|t| {
            ferrotorch_core::TensorOptions::like(t)
                .device(device)
                .empty(t.shape())
                .map(Some)
        })
    }

    /// Calls `f` on every descendant, children first, then on the module
    /// itself (`model.apply(init_weights)`); stops at the first error.
    fn apply(&self, f: &mut dyn FnMut(&dyn Module) -> Result<()>) -> Result<()> {
        for c in self.children() {
            c.apply(f)?;
        }
        f(self.as_dyn())
    }

    /// The parameters and persistent buffers by name, in PyTorch's order
    /// (each module's parameters, then its buffers, then its children's); a
    /// tied weight appears under each of its names, as in PyTorch. The
    /// tensors are detached handles to the module's storage.
    fn state_dict(&self) -> StateDict {
        let mut sd = StateDict::new();
        walk(self.as_dyn(), "", &mut |prefix, m| {
            for (name, p) in m.params {
                sd.insert(join(prefix, &name), p.tensor().detach());
            }
            for (name, b) in m.buffers {
                if b.persistent() {
                    sd.insert(join(prefix, &name), b.tensor().detach());
                }
            }
        });
        sd
    }

    /// Copies `state_dict`'s tensors into the parameters and persistent
    /// buffers of the same names, in place and without recording a graph.
    /// With `strict`, missing or unexpected keys are an error naming them;
    /// a key whose shape differs is always an error naming the key and both
    /// shapes (the other keys are still copied, as in PyTorch). Returns the
    /// missing and unexpected keys.
    fn load_state_dict(&self, state_dict: &StateDict, strict: bool) -> Result<IncompatibleKeys> {
        let mut targets = Vec::new();
        walk(self.as_dyn(), "", &mut |prefix, m| {
            for (name, p) in m.params {
                targets.push((join(prefix, &name), p.tensor()));
            }
            for (name, b) in m.buffers {
                if b.persistent() {
                    targets.push((join(prefix, &name), b.tensor()));
                }
            }
        });
        load_into(&self.type_name(), &targets, state_dict, strict)
    }

    /// Registers a forward pre-hook ([`ForwardPreHook`](crate::ForwardPreHook):
    /// `hook(module, inputs)`, `Some(inputs)` replaces the inputs); an
    /// error for a module without a `ModuleState` field.
    fn register_forward_pre_hook(
        &self,
        hook: impl Fn(&dyn Module, &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync + 'static,
    ) -> Result<HookHandle>
    where
        Self: Sized,
    {
        Ok(hook_state(self)?.register_forward_pre_hook(hook))
    }

    /// Registers a forward hook ([`ForwardHook`](crate::ForwardHook):
    /// `hook(module, inputs, outputs)` with every tensor the forward
    /// returned, `Some(outputs)` replaces them); an error for a module
    /// without a `ModuleState` field.
    fn register_forward_hook(
        &self,
        hook: impl Fn(&dyn Module, &[Tensor], &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync + 'static,
    ) -> Result<HookHandle>
    where
        Self: Sized,
    {
        Ok(hook_state(self)?.register_forward_hook(hook))
    }

    /// Registers a full backward hook ([`BackwardHook`](crate::BackwardHook):
    /// `hook(grad_input, grad_output)` over every tensor input and output,
    /// once per backward; `Some(grads)` replaces the input gradients); an
    /// error for a module without a `ModuleState` field.
    fn register_full_backward_hook(
        &self,
        hook: impl Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync + 'static,
    ) -> Result<HookHandle>
    where
        Self: Sized,
    {
        Ok(hook_state(self)?.register_full_backward_hook(hook))
    }
}

fn hook_state<M: Module>(m: &M) -> Result<&ModuleState> {
    m.state().ok_or_else(|| {
        Error::module(
            m.type_name(),
            "this module has no hooks: add a `ModuleState` field to the struct to register hooks",
        )
    })
}

/// A module's own members, as its `visit` shows them.
pub(crate) struct Members<'a> {
    pub(crate) params: Vec<(String, &'a Parameter)>,
    pub(crate) buffers: Vec<(String, &'a Buffer)>,
    pub(crate) children: Vec<(String, &'a dyn Module)>,
}

impl<'a> Visitor<'a> for Members<'a> {
    fn parameter(&mut self, name: &str, p: &'a Parameter) {
        self.params.push((name.to_string(), p));
    }

    fn buffer(&mut self, name: &str, b: &'a Buffer) {
        self.buffers.push((name.to_string(), b));
    }

    fn module(&mut self, name: &str, m: &'a dyn Module) {
        self.children.push((name.to_string(), m));
    }
}

/// The own members of `m`.
pub(crate) fn members(m: &dyn Module) -> Members<'_> {
    let mut v = Members {
        params: Vec::new(),
        buffers: Vec::new(),
        children: Vec::new(),
    };
    m.visit(&mut v);
    v
}

/// `prefix.name`, or `name` at the root.
pub(crate) fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Calls `f(prefix, members)` for `m` and every descendant, depth first
/// (PyTorch's `named_modules` order, duplicates included).
fn walk<'a>(m: &'a dyn Module, prefix: &str, f: &mut dyn FnMut(&str, Members<'a>)) {
    let ms = members(m);
    let children = ms.children.clone();
    f(prefix, ms);
    for (name, c) in children {
        walk(c, &join(prefix, &name), f);
    }
}

fn collect_modules<'a>(
    m: &'a dyn Module,
    prefix: String,
    seen: &mut HashSet<(usize, Cow<'static, str>)>,
    out: &mut Vec<(String, &'a dyn Module)>,
) {
    // A struct and its first field may share an address: the type tells
    // them apart (a module is shared only through a handle).
    let addr = m as *const dyn Module as *const () as usize;
    if !seen.insert((addr, m.type_name())) {
        return;
    }
    let children = members(m).children;
    out.push((prefix.clone(), m));
    for (name, c) in children {
        collect_modules(c, join(&prefix, &name), seen, out);
    }
}

/// Replaces every parameter and buffer tensor `t` by `f(t)` when it gives
/// one (no graph recorded); parameter gradients are converted too.
fn convert(m: &dyn Module, f: &dyn Fn(&Tensor) -> Result<Option<Tensor>>) -> Result<()> {
    autograd::no_grad(|| {
        let mut seen = HashSet::new();
        for (_, sub) in {
            let mut all = Vec::new();
            collect_modules(m, String::new(), &mut seen, &mut all);
            all
        } {
            let ms = members(sub);
            for (_, p) in ms.params {
                let t = p.tensor();
                if let Some(new) = f(&t)? {
                    let grad = t.grad_opt().map(|g| f(&g)).transpose()?.flatten();
                    p.set_tensor(new)?;
                    p.tensor().set_grad(grad)?;
                }
            }
            for (_, b) in ms.buffers {
                if let Some(new) = f(&b.tensor())? {
                    b.set_tensor(new);
                }
            }
        }
        Ok(())
    })
}

/// Field visiting for `#[derive(Module)]`: what a field of each type shows
/// a [`Visitor`].
pub trait Visitable {
    /// Shows `self`, registered under `name`, to `visitor`.
    fn visit_as<'a>(&'a self, name: &str, visitor: &mut dyn Visitor<'a>);
}

impl Visitable for Parameter {
    fn visit_as<'a>(&'a self, name: &str, visitor: &mut dyn Visitor<'a>) {
        visitor.parameter(name, self);
    }
}

impl Visitable for Buffer {
    fn visit_as<'a>(&'a self, name: &str, visitor: &mut dyn Visitor<'a>) {
        visitor.buffer(name, self);
    }
}

impl<M: Module> Visitable for M {
    fn visit_as<'a>(&'a self, name: &str, visitor: &mut dyn Visitor<'a>) {
        visitor.module(name, self);
    }
}

impl<T: Visitable> Visitable for Option<T> {
    fn visit_as<'a>(&'a self, name: &str, visitor: &mut dyn Visitor<'a>) {
        if let Some(x) = self {
            x.visit_as(name, visitor);
        }
    }
}

/// What `#[derive(Module)]` expands to; not part of the API.
#[doc(hidden)]
pub mod __private {
    use super::{Visitable, Visitor};

    /// A field being visited.
    pub struct Field<'f, T>(pub &'f T);

    /// Fields whose type is [`Visitable`]: shown to the visitor.
    pub trait ViaVisitable<'f> {
        fn __visit(&self, name: &str, visitor: &mut dyn Visitor<'f>);
    }

    impl<'f, T: Visitable> ViaVisitable<'f> for Field<'f, T> {
        fn __visit(&self, name: &str, visitor: &mut dyn Visitor<'f>) {
            self.0.visit_as(name, visitor);
        }
    }

    /// Every other field (sizes, flags, closures): skipped. Chosen by
    /// method resolution only when the field is not `Visitable`.
    pub trait ViaOther<'f> {
        fn __visit(&self, name: &str, visitor: &mut dyn Visitor<'f>);
    }

    impl<'f, T> ViaOther<'f> for &Field<'f, T> {
        fn __visit(&self, _name: &str, _visitor: &mut dyn Visitor<'f>) {}
    }
}

/// `Name(extra)` for a leaf, or the extra lines and `(name): child` lines
/// indented inside `Name(` ... `)`, as `nn.Module.__repr__`.
pub(crate) fn default_repr(m: &dyn Module) -> String {
    let extra = m.extra_repr();
    let extra_lines: Vec<String> = if extra.is_empty() {
        Vec::new()
    } else {
        extra.split('\n').map(str::to_string).collect()
    };
    let child_lines: Vec<String> = members(m)
        .children
        .into_iter()
        .map(|(name, c)| format!("({name}): {}", add_indent(&c.repr(), 2)))
        .collect();
    let mut s = format!("{}(", m.type_name());
    if extra_lines.len() == 1 && child_lines.is_empty() {
        s.push_str(&extra_lines[0]);
    } else if !extra_lines.is_empty() || !child_lines.is_empty() {
        let lines: Vec<String> = extra_lines.into_iter().chain(child_lines).collect();
        s.push_str("\n  ");
        s.push_str(&lines.join("\n  "));
        s.push('\n');
    }
    s.push(')');
    s
}
