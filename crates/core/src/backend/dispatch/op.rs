//! Operators: the [`Op`] trait, their dispatch tables ([`OpEntry`]) and kernels.

use std::any::Any;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use smallvec::SmallVec;

use super::backward::{BackwardCtx, Saves};
use super::key::{DispatchKey, DispatchKeySet, NUM_KEYS};
use super::spec::OutSpecs;
use crate::{Device, Error, Result, Tensor};

/// The outputs of one operator call (most ops have one or two).
pub type Tensors = SmallVec<[Tensor; 2]>;

/// An operator instance: which operator, with which non-tensor arguments.
///
/// One struct per operator holds its attributes (`Sum { dims, keepdim }`)
/// and declares, in one place, its dispatch table ([`Op::entry`]), its shape
/// and dtype rule ([`Op::infer`]) and (with autograd) its backward formula.
/// Kernels receive the instance as `&dyn Op` and downcast it with
/// [`downcast_op`] to read the attributes.
pub trait Op: OpClone + Any + Send + Sync + fmt::Debug {
    /// The operator's dispatch table (shared by all instances).
    fn entry(&self) -> &'static OpEntry;

    /// Validates the inputs and returns the shape and dtype of each output.
    /// Structured kernels (and the meta backend) rely on it; inputs reaching
    /// it have already been type-promoted by the operator's front end.
    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let _ = inputs;
        Err(Error::invalid(
            self.entry().base_name(),
            "this operator has no shape rule",
        ))
    }

    /// The device of a factory op (one without tensor inputs).
    fn device(&self) -> Option<Device> {
        None
    }

    /// True if the kernel may write an output that is also an input (pointwise
    /// ops); otherwise in-place calls compute into a temporary first.
    fn alias_safe(&self) -> bool {
        false
    }

    /// True if the kernel may write an output that is input `i` itself
    /// (same layout): by default [`Op::alias_safe`] for every input; an op
    /// that first copies one input into its output and then reads only the
    /// others (`index_put_`) says so for that input alone.
    fn alias_safe_input(&self, i: usize) -> bool {
        let _ = i;
        self.alias_safe()
    }

    /// True if an in-place call may write a tensor whose elements overlap
    /// (an expanded view): only for ops writing one value everywhere (fill).
    fn allows_overlapping_out(&self) -> bool {
        false
    }

    /// False for an operator whose outputs PyTorch declares not
    /// differentiable (`output_differentiability: [False]`, the logical
    /// ops): its in-place form writes into a tensor that requires grad
    /// without a check and without a node (the tensor keeps its history).
    /// Other non-differentiable operators refuse such a write.
    fn output_differentiable(&self) -> bool {
        true
    }

    /// Whether input `i` receives a gradient (floating-point data inputs;
    /// not indices or masks).
    fn differentiable_input(&self, i: usize) -> bool {
        let _ = i;
        true
    }

    /// The tensors the backward formula reads.
    fn saves(&self) -> Saves {
        Saves::NONE
    }

    /// The tensors the backward formula reads when only the inputs in
    /// `needs` (bit `i`: input `i`) require a gradient; [`Op::saves`] unless
    /// the operator says more. Saving only what the needed gradients read
    /// (as PyTorch's derivative formulas do) means an in-place change to a
    /// tensor none of them reads does not fail backward: for `y = a * c`
    /// with only `a` requiring grad, `a` is not saved.
    fn saves_for(&self, needs: u64) -> Saves {
        let _ = needs;
        self.saves()
    }

    /// The backward formula: gradients of the inputs (one per input, `None`
    /// where none) from the gradients of the outputs. Written with
    /// differentiable operators, so it can itself be differentiated.
    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let _ = (ctx, grads);
        Err(Error::invalid(self.entry().base_name(), "has no backward formula"))
    }

    /// The name of the graph node this operator records (`MulBackward0`):
    /// by default the base name without namespace or overload, in camel case.
    fn backward_name(&self) -> String {
        let base = self.entry().base_name();
        let unqualified = base.rsplit_once("::").map_or(base, |(_, name)| name);
        let mut s = String::new();
        for part in unqualified.trim_start_matches('_').split('_') {
            let mut c = part.chars();
            if let Some(f) = c.next() {
                s.extend(f.to_uppercase());
                s.push_str(c.as_str());
            }
        }
        s + "Backward0"
    }
}

/// Object-safe cloning of operator instances (implemented for every `Op + Clone`).
pub trait OpClone {
    /// A boxed copy of the instance.
    fn clone_op(&self) -> Box<dyn Op>;
}

impl<T: Op + Clone> OpClone for T {
    fn clone_op(&self) -> Box<dyn Op> {
        Box::new(self.clone())
    }
}

/// Downcasts an operator instance to its concrete type.
pub fn downcast_op<T: Op>(op: &dyn Op) -> Result<&T> {
    (op as &dyn Any).downcast_ref::<T>().ok_or_else(|| {
        Error::invalid(
            op.entry().base_name(),
            "kernel received an instance of another operator",
        )
    })
}

/// One operator call as it travels through the dispatcher.
#[derive(Clone, Copy)]
pub struct Call<'a> {
    /// The operator instance.
    pub op: &'a dyn Op,
    /// Tensor inputs.
    pub inputs: &'a [&'a Tensor],
    /// Tensors to write the results into (in-place and `out=` calls).
    pub out: Option<&'a [&'a Tensor]>,
}

/// A kernel that writes into outputs already allocated from [`Op::infer`].
pub type StructuredFn = fn(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()>;
/// A kernel that produces its outputs itself (views, decompositions).
pub type FunctionalFn = fn(call: &Call) -> Result<Tensors>;
/// A layer kernel (autograd, autocast, profiler): does its work around a
/// redispatch to `keys` (the keys below its own).
pub type LayerFn = fn(call: &Call, keys: DispatchKeySet) -> Result<Tensors>;

/// A kernel in a dispatch table.
#[derive(Clone, Copy, Debug)]
pub enum Kernel {
    /// Writes into preallocated outputs (PyTorch's structured kernels).
    Structured(StructuredFn),
    /// Returns its outputs.
    Functional(FunctionalFn),
    /// Wraps the keys below it.
    Layer(LayerFn),
}

/// Where in a dispatch table a kernel is registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// For one dispatch key.
    Key(DispatchKey),
    /// For every backend that has no kernel of its own (PyTorch's
    /// CompositeExplicitAutograd): view ops and ops written in terms of
    /// other ops that still have their own backward formula.
    AnyBackend,
    /// A decomposition into other ops, used for every key including
    /// autograd, which then differentiates through the decomposition
    /// (PyTorch's CompositeImplicitAutograd).
    Decomposition,
}

const NUM_SLOTS: usize = NUM_KEYS + 2;

impl Slot {
    fn index(self) -> usize {
        match self {
            Slot::Key(k) => k as usize,
            Slot::AnyBackend => NUM_KEYS,
            Slot::Decomposition => NUM_KEYS + 1,
        }
    }
}

/// The dispatch table of one operator: its name and a kernel slot per
/// dispatch key. Declared once per operator as a `static`; kernels are added
/// with [`OpEntry::register`], also from other crates.
///
/// The name is PyTorch's schema name, `name.overload` as
/// `torch._C._jit_get_all_schemas()` and `native_functions.yaml` spell it
/// (`add.Tensor`, `max.dim`, `sum.dim_IntList`; just `name` for an
/// operator's default overload, `relu`), without the `aten::` namespace.
/// Operators outside PyTorch's set carry a namespace (`demo::scaled_square`;
/// the core's own are `ferrotorch::...`). [`find_op`] looks them up by it.
pub struct OpEntry {
    name: &'static str,
    /// Length of the base name (`name` up to its first `.`), computed once
    /// at compile time: `base_name` runs on every call.
    base_len: usize,
    differentiable: bool,
    slots: [OnceLock<Kernel>; NUM_SLOTS],
    /// Kernels registered over a built-in one (looked up first).
    overrides: [OnceLock<Kernel>; NUM_SLOTS],
    listed: OnceLock<()>,
}

static REGISTRY: Mutex<Vec<&'static OpEntry>> = Mutex::new(Vec::new());

/// The index of the first `.` in `name`, or its length.
const fn base_len(name: &str) -> usize {
    let b = name.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'.' {
            return i;
        }
        i += 1;
    }
    b.len()
}

/// Whether `s` is a non-empty identifier (ASCII letters, digits, `_`).
fn is_ident(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether `name` has the form `[namespace::]name[.overload]`.
fn is_op_name(name: &str) -> bool {
    let unqualified = match name.split_once("::") {
        Some((ns, rest)) if is_ident(ns) => rest,
        Some(_) => return false,
        None => name,
    };
    match unqualified.split_once('.') {
        Some((base, overload)) => is_ident(base) && is_ident(overload),
        None => is_ident(unqualified),
    }
}

impl OpEntry {
    /// An empty table for the operator `name` (PyTorch's `name.overload`,
    /// e.g. `"eq.Tensor"`, or `"mylib::foo"` for an operator of one's own),
    /// an operator without gradients (comparisons, indices, factories).
    pub const fn new(name: &'static str) -> Self {
        OpEntry {
            name,
            base_len: base_len(name),
            differentiable: false,
            slots: [const { OnceLock::new() }; NUM_SLOTS],
            overrides: [const { OnceLock::new() }; NUM_SLOTS],
            listed: OnceLock::new(),
        }
    }

    /// An empty table for a differentiable operator: its `Op` implements
    /// `backward`, and autograd records it.
    pub const fn differentiable(name: &'static str) -> Self {
        OpEntry {
            name,
            base_len: base_len(name),
            differentiable: true,
            slots: [const { OnceLock::new() }; NUM_SLOTS],
            overrides: [const { OnceLock::new() }; NUM_SLOTS],
            listed: OnceLock::new(),
        }
    }

    /// Whether autograd records this operator.
    pub fn is_differentiable(&self) -> bool {
        self.differentiable
    }

    /// The operator's full name, `name.overload` (`"add.Tensor"`), or
    /// `name` for a default overload (`"relu"`), with the namespace of an
    /// operator outside PyTorch's set (`"demo::scaled_square"`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The name without the overload (`"add"` for `add.Tensor`, with the
    /// namespace if any): how PyTorch's error messages name an operator,
    /// and what this crate's errors say.
    pub fn base_name(&self) -> &'static str {
        // `base_len` is the index of an ASCII '.' or the length: a char boundary.
        self.name.get(..self.base_len).unwrap_or(self.name)
    }

    /// The overload name (`"Tensor"` for `add.Tensor`); empty for an
    /// operator's default overload.
    pub fn overload_name(&self) -> &'static str {
        self.name.get(self.base_len + 1..).unwrap_or("")
    }

    /// Lists the entry in the registry (once), refusing a malformed name
    /// or one another entry already has.
    fn list(&'static self) -> Result<()> {
        if self.listed.get().is_some() {
            return Ok(());
        }
        let refuse = |detail: &str| Error::Registration {
            what: format!("operator {}", self.name),
            detail: detail.into(),
        };
        if !is_op_name(self.name) {
            return Err(refuse(
                "operator names have the form `name`, `name.overload` or `namespace::name.overload` \
                 (letters, digits and `_`)",
            ));
        }
        let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        // Another thread may have listed it since the check above.
        if self.listed.get().is_some() {
            return Ok(());
        }
        if registry.iter().any(|e| e.name == self.name) {
            return Err(refuse("another operator with this name is registered"));
        }
        registry.push(self);
        let _ = self.listed.set(());
        Ok(())
    }

    /// Adds a kernel. The built-in kernels are registered first (whenever
    /// this is called), so an out-of-tree crate may replace a built-in
    /// kernel: the new one wins and a warning is printed, as `torch.library`
    /// does. A slot takes one kernel of its own and one replacement;
    /// registering more is an [`Error::Registration`].
    pub fn register(&'static self, slot: Slot, kernel: Kernel) -> Result<()> {
        super::ensure_init()?;
        self.register_impl(slot, kernel, false)
    }

    /// Registers a built-in kernel (during start-up registration, which
    /// `register` would wait for).
    pub(crate) fn register_builtin(&'static self, slot: Slot, kernel: Kernel) -> Result<()> {
        self.register_impl(slot, kernel, true)
    }

    fn register_impl(&'static self, slot: Slot, kernel: Kernel, builtin: bool) -> Result<()> {
        let what = || format!("{} at {slot:?}", self.name);
        if matches!(kernel, Kernel::Layer(_)) != matches!(slot, Slot::Key(k) if !k.is_backend()) {
            return Err(Error::Registration {
                what: what(),
                detail: "layer kernels go to layer keys, compute kernels to backend keys".into(),
            });
        }
        self.list()?;
        let i = slot.index();
        if self.slots[i].set(kernel).is_err() {
            if builtin || self.overrides[i].set(kernel).is_err() {
                return Err(Error::Registration {
                    what: what(),
                    detail: "a kernel is already registered there".into(),
                });
            }
            eprintln!(
                "ferrotorch warning: overriding a previously registered kernel for the same operator and the same \
                 dispatch key: {}",
                what()
            );
        }
        Ok(())
    }

    /// The kernel in `slot`, if registered (a replacement before the
    /// built-in one).
    #[inline]
    pub fn kernel(&self, slot: Slot) -> Option<Kernel> {
        let i = slot.index();
        self.overrides[i].get().or_else(|| self.slots[i].get()).copied()
    }

    /// Whether any kernel is registered for `slot`.
    pub fn has_kernel(&self, slot: Slot) -> bool {
        self.kernel(slot).is_some()
    }
}

impl fmt::Debug for OpEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpEntry({})", self.name)
    }
}

/// Every operator that has at least one kernel registered, in registration
/// order (the built-in ones first; should start-up registration have
/// failed, those it registered: the failure itself is reported by every
/// call and registration).
pub fn registered_ops() -> Vec<&'static OpEntry> {
    // Ignoring the error is deliberate: this lists what is registered.
    let _ = super::ensure_init();
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The registered operator named `name`: its full `name.overload`
/// (`"max.dim"`), or a bare `name` when that is the full name of an
/// operator's default overload or exactly one overload of it is registered.
/// An `aten::` prefix is accepted (PyTorch's namespace, left out of the
/// names here). `None` when no operator matches, or a bare name matches
/// several overloads.
///
/// ```
/// use ferrotorch_core::backend::dispatch::find_op;
/// let max = find_op("max.dim").expect("max.dim is built in");
/// assert_eq!((max.base_name(), max.overload_name()), ("max", "dim"));
/// // `add` has one overload here, `add.Tensor`; `pow` has two.
/// assert_eq!(find_op("add").map(|e| e.name()), Some("add.Tensor"));
/// assert_eq!(find_op("aten::relu").map(|e| e.name()), Some("relu"));
/// assert!(find_op("pow").is_none());
/// assert!(find_op("pow.Tensor_Scalar").is_some());
/// assert!(find_op("no_such_op").is_none());
/// ```
pub fn find_op(name: &str) -> Option<&'static OpEntry> {
    let _ = super::ensure_init();
    find_op_builtin(name)
}

/// [`find_op`] during start-up registration (which `find_op` would wait for):
/// finds the operators registered so far.
pub(crate) fn find_op_builtin(name: &str) -> Option<&'static OpEntry> {
    let name = name.strip_prefix("aten::").unwrap_or(name);
    let registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = registry.iter().find(|e| e.name == name) {
        return Some(*e);
    }
    if name.contains('.') {
        return None;
    }
    let mut overloads = registry.iter().filter(|e| e.base_name() == name);
    match (overloads.next(), overloads.next()) {
        (Some(e), None) => Some(*e),
        _ => None,
    }
}
