//! Operators: the [`Op`] trait, their dispatch tables ([`OpEntry`]) and kernels.

use std::any::Any;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use smallvec::SmallVec;

use super::backward::{BackwardCtx, Saves};
use super::key::{DispatchKey, DispatchKeySet, NUM_KEYS};
use crate::layout::Dims;
use crate::{DType, Device, Error, Result, Tensor};

/// The outputs of one operator call (most ops have one or two).
pub type Tensors = SmallVec<[Tensor; 2]>;

/// Shape, dtype and (optionally) strides of one output, as computed by an
/// operator's shape rule.
#[derive(Debug, Clone, PartialEq)]
pub struct OutSpec {
    /// Output shape.
    pub shape: Dims,
    /// Output dtype.
    pub dtype: DType,
    /// Output strides; `None` means contiguous.
    pub strides: Option<Dims>,
}

impl OutSpec {
    /// A contiguous output.
    pub fn new(shape: impl Into<Dims>, dtype: DType) -> Self {
        OutSpec {
            shape: shape.into(),
            dtype,
            strides: None,
        }
    }
}

/// The output specs of one call.
pub type OutSpecs = SmallVec<[OutSpec; 1]>;

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
        Err(Error::invalid(self.entry().name(), "this operator has no shape rule"))
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

    /// True if an in-place call may write a tensor whose elements overlap
    /// (an expanded view): only for ops writing one value everywhere (fill).
    fn allows_overlapping_out(&self) -> bool {
        false
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
        Err(Error::invalid(self.entry().name(), "has no backward formula"))
    }

    /// The name of the graph node this operator records (`MulBackward0`).
    fn backward_name(&self) -> String {
        let mut s = String::new();
        for part in self.entry().name().trim_start_matches('_').split('_') {
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
    (op as &dyn Any)
        .downcast_ref::<T>()
        .ok_or_else(|| Error::invalid(op.entry().name(), "kernel received an instance of another operator"))
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
pub struct OpEntry {
    name: &'static str,
    differentiable: bool,
    slots: [OnceLock<Kernel>; NUM_SLOTS],
    /// Kernels registered over a built-in one (looked up first).
    overrides: [OnceLock<Kernel>; NUM_SLOTS],
    listed: OnceLock<()>,
}

static REGISTRY: Mutex<Vec<&'static OpEntry>> = Mutex::new(Vec::new());

impl OpEntry {
    /// An empty table for the operator `name` (e.g. `"add"`, `"mylib::foo"`),
    /// an operator without gradients (comparisons, indices, factories).
    pub const fn new(name: &'static str) -> Self {
        OpEntry {
            name,
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

    /// The operator's name.
    pub fn name(&self) -> &'static str {
        self.name
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
        self.listed
            .get_or_init(|| REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).push(self));
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
