//! [`Parameter`] and [`Buffer`]: shared handles to a module's tensors.
//!
//! A handle has one identity: clones share it, so a module and an
//! optimizer built from `module.parameters()` see the same tensor, and a
//! weight tied between two layers (`head.weight = emb.weight.clone()`) is
//! one parameter. [`Module::to_dtype`](crate::Module::to_dtype) swaps the
//! tensor inside the handle, so handles taken earlier stay valid, as
//! PyTorch's `param.data = ...` keeps the `Parameter` object.

use std::sync::{Arc, PoisonError, RwLock};

use ferrotorch_core::{DType, Device, Error, Result, Tensor, TensorOptions, autograd};

/// The tensor cell behind a handle.
#[derive(Debug)]
struct Cell {
    tensor: RwLock<Tensor>,
}

impl Cell {
    fn new(t: Tensor) -> Arc<Self> {
        Arc::new(Cell { tensor: RwLock::new(t) })
    }

    fn get(&self) -> Tensor {
        self.tensor.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn set(&self, t: Tensor) {
        *self.tensor.write().unwrap_or_else(PoisonError::into_inner) = t;
    }
}

/// A learnable tensor of a module: a leaf that requires grad (PyTorch's
/// `nn.Parameter`).
///
/// ```
/// use ferrotorch_core::Tensor;
/// use ferrotorch_nn::Parameter;
/// let w = Parameter::new(Tensor::ones([2, 3])?)?;
/// assert!(w.tensor().requires_grad() && w.tensor().is_leaf());
/// assert_eq!((w.numel(), w.shape(), w.requires_grad()), (6, vec![2, 3], true));
/// assert_eq!(w.dtype(), ferrotorch_core::DType::F32);
/// assert!(!Parameter::frozen(Tensor::ones([2])?).requires_grad());
/// let tied = w.clone();
/// assert!(tied.same_as(&w));
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Parameter(Arc<Cell>);

impl Parameter {
    /// A parameter holding `t` detached from any graph and requiring grad.
    /// Errors for dtypes that cannot require grad (integers, bool).
    pub fn new(t: Tensor) -> Result<Self> {
        let t = t.detach().requires_grad_(true)?;
        Ok(Parameter(Cell::new(t)))
    }

    /// A parameter that does not require grad (`Parameter(t,
    /// requires_grad=False)`).
    pub fn frozen(t: Tensor) -> Self {
        Parameter(Cell::new(t.detach()))
    }

    /// The tensor (a cheap handle to the same storage and gradient).
    pub fn tensor(&self) -> Tensor {
        self.0.get()
    }

    /// The accumulated gradient, as [`Tensor::grad`]: an error
    /// ([`ferrotorch_core::Error::NoGrad`], saying why) before backward has
    /// written one.
    pub fn grad(&self) -> Result<Tensor> {
        self.tensor().grad()
    }

    /// The accumulated gradient, `None` before any (PyTorch's `p.grad is
    /// None`).
    pub fn grad_opt(&self) -> Option<Tensor> {
        self.tensor().grad().ok()
    }

    /// Replaces the tensor inside the handle (every clone of the handle
    /// sees the new one): `to(dtype)`, `load_state_dict` with `assign`.
    /// The new tensor keeps the old one's `requires_grad` flag. Errors for
    /// a tensor that cannot require grad when the parameter does (PyTorch's
    /// message for `param.data = t`), leaving the parameter as it was.
    pub fn set_tensor(&self, t: Tensor) -> Result<()> {
        let requires = self.tensor().requires_grad();
        if requires && !t.is_floating_point() {
            return Err(Error::invalid(
                "set_tensor",
                "data set to a tensor that requires gradients must be floating point or complex dtype",
            ));
        }
        self.0.set(t.detach().requires_grad_(requires)?);
        Ok(())
    }

    /// Puts `t` itself in the handle, graph and all (no detach, no
    /// `requires_grad` change), and returns the tensor it held. For
    /// wrappers that run a module on other tensors than its own for one
    /// forward, as FSDP runs it on gathered parameters (PyTorch's FSDP
    /// registers the unsharded parameter in the module the same way);
    /// they swap the old tensor back afterwards.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// use ferrotorch_nn::Parameter;
    /// let w = Parameter::new(Tensor::ones([2])?)?;
    /// let gathered = w.tensor().mul(2.0)?; // a non-leaf
    /// let own = w.swap_tensor(gathered);
    /// assert!(!w.tensor().is_leaf());
    /// w.swap_tensor(own);
    /// assert!(w.tensor().is_leaf());
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn swap_tensor(&self, t: Tensor) -> Tensor {
        let old = self.tensor();
        self.0.set(t);
        old
    }

    /// Its number of elements (`p.numel()`, as on the tensor: counting a
    /// model's parameters is `params.iter().map(Parameter::numel).sum()`).
    pub fn numel(&self) -> usize {
        self.tensor().numel()
    }

    /// Its shape (`p.shape`).
    pub fn shape(&self) -> Vec<usize> {
        self.tensor().shape().to_vec()
    }

    /// Its element type (`p.dtype`).
    pub fn dtype(&self) -> DType {
        self.tensor().dtype()
    }

    /// Whether it is learned (`p.requires_grad`).
    pub fn requires_grad(&self) -> bool {
        self.tensor().requires_grad()
    }

    /// Whether `self` and `other` are the same parameter (tied weights).
    pub fn same_as(&self, other: &Parameter) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// An address identifying the parameter (equal for clones).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

/// A tensor a module keeps that is not learned (BatchNorm's running
/// statistics). Persistent buffers are part of the state dict.
#[derive(Debug, Clone)]
pub struct Buffer {
    cell: Arc<Cell>,
    persistent: bool,
}

impl Buffer {
    /// A persistent buffer (saved in the state dict).
    pub fn new(t: Tensor) -> Self {
        Buffer {
            cell: Cell::new(t.detach()),
            persistent: true,
        }
    }

    /// A buffer left out of the state dict (`persistent=False`).
    pub fn non_persistent(t: Tensor) -> Self {
        Buffer {
            cell: Cell::new(t.detach()),
            persistent: false,
        }
    }

    /// The tensor.
    pub fn tensor(&self) -> Tensor {
        self.cell.get()
    }

    /// Replaces the tensor (every clone of the handle sees the new one).
    pub fn set_tensor(&self, t: Tensor) {
        self.cell.set(t.detach());
    }

    /// Whether the buffer is saved in the state dict.
    pub fn persistent(&self) -> bool {
        self.persistent
    }

    /// An address identifying the buffer (equal for clones).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.cell) as usize
    }
}

/// `TensorOptions` for a dtype and device.
pub(crate) fn tensor_options(dtype: Option<DType>, device: Device) -> TensorOptions {
    let o = TensorOptions::new().device(device);
    match dtype {
        Some(dt) => o.dtype(dt),
        None => o,
    }
}

/// A copy of a parameter with its own storage and `requires_grad` flag.
pub(crate) fn copy_parameter(p: &Parameter) -> Result<Parameter> {
    let t = p.tensor();
    let c = autograd::no_grad(|| t.detach().clone_tensor())?;
    if t.requires_grad() {
        Parameter::new(c)
    } else {
        Ok(Parameter::frozen(c))
    }
}
