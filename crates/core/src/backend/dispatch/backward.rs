//! What an operator's backward formula names: which tensors it reads
//! ([`Saves`]), the metadata of its inputs ([`TensorMeta`]) and its view of a
//! recorded call ([`BackwardCtx`]).
//!
//! These types sit next to [`Op`](super::Op), whose methods name them; the
//! autograd layer builds them when it records a call and runs a node. The context reaches the saved tensors only through
//! [`SavedValues`], which autograd implements, so this module (like the rest
//! of the dispatcher) depends on nothing above it.

use crate::layout::Dims;
use crate::{DType, Device, Result, Tensor};

/// Which inputs and outputs an operator's backward formula reads (bit `i`
/// for input / output `i`; inputs past 63 are never saved).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Saves {
    /// Bit mask of saved inputs.
    pub inputs: u64,
    /// Bit mask of saved outputs.
    pub outputs: u64,
}

impl Saves {
    /// Nothing saved.
    pub const NONE: Saves = Saves { inputs: 0, outputs: 0 };
    /// All inputs (up to 64).
    pub const INPUTS: Saves = Saves {
        inputs: u64::MAX,
        outputs: 0,
    };
    /// The first output.
    pub const OUTPUT: Saves = Saves { inputs: 0, outputs: 1 };

    /// Saves the given inputs.
    pub const fn inputs(mask: u64) -> Saves {
        Saves {
            inputs: mask,
            outputs: 0,
        }
    }

    /// What a product of two factors saves given which inputs need a
    /// gradient (`needs`, bit `i`: input `i`): each factor only when the
    /// other needs its gradient, which reads it (`g * b` for `a`, `g * a` for `b`).
    pub const fn cross(needs: u64) -> Saves {
        Saves::inputs((needs >> 1 & 1) | (needs & 1) << 1)
    }

    /// Whether input `i` is saved.
    pub(crate) fn input(&self, i: usize) -> bool {
        i < 64 && self.inputs >> i & 1 == 1
    }

    /// Whether output `i` is saved.
    pub(crate) fn output(&self, i: usize) -> bool {
        i < 64 && self.outputs >> i & 1 == 1
    }
}

/// Shape, dtype and device of an operator input, kept for backward.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorMeta {
    /// Shape.
    pub shape: Dims,
    /// Dtype.
    pub dtype: DType,
    /// Device.
    pub device: Device,
    /// A 2-D column-major input (a transposed view of a contiguous matrix,
    /// such as a Linear's `weight.t()`): the matrix products lay out its
    /// gradient to match (PyTorch keeps its strides for the same reason).
    pub column_major: bool,
}

impl TensorMeta {
    /// The metadata of `t`.
    pub(crate) fn of(t: &Tensor) -> Self {
        let s = t.shape();
        let column_major = s.len() == 2 && s[0] > 1 && s[1] > 1 && t.strides()[0] == 1 && t.strides()[1] == s[0];
        TensorMeta {
            shape: t.dims(),
            dtype: t.dtype(),
            device: t.device(),
            column_major,
        }
    }
}

/// What a recorded call kept for its backward formula, as the autograd layer
/// stores it: the saved tensors (unpacked with their in-place version
/// checks) and where the inputs' gradients go. Implemented by the autograd
/// layer's node function; [`BackwardCtx`] reads the saved state only
/// through it.
pub(crate) trait SavedValues {
    /// Saved input `i`, or an error naming the node when it was not saved
    /// or was changed in place since.
    fn input(&self, i: usize) -> Result<Tensor>;

    /// Saved output `i`, with the same checks.
    fn output(&self, i: usize) -> Result<Tensor>;

    /// Whether the gradients of inputs `i` and `j` flow into the same place.
    fn same_edge(&self, i: usize, j: usize) -> bool;
}

/// What an operator's backward formula sees: its saved tensors (checked
/// against in-place changes) and the metadata of its inputs.
pub struct BackwardCtx<'a> {
    saved: &'a dyn SavedValues,
    meta: &'a [TensorMeta],
    needs: &'a [bool],
}

impl<'a> BackwardCtx<'a> {
    /// A context over `saved`, with one `meta` and one `needs` entry per
    /// input of the call.
    pub(crate) fn new(saved: &'a dyn SavedValues, meta: &'a [TensorMeta], needs: &'a [bool]) -> Self {
        BackwardCtx { saved, meta, needs }
    }

    /// Saved input `i` (the operator must list it in
    /// [`Op::saves`](super::Op::saves)).
    pub fn input(&self, i: usize) -> Result<Tensor> {
        self.saved.input(i)
    }

    /// Saved output `i`.
    pub fn output(&self, i: usize) -> Result<Tensor> {
        self.saved.output(i)
    }

    /// Metadata of input `i`.
    pub fn meta(&self, i: usize) -> &TensorMeta {
        &self.meta[i]
    }

    /// Shape of input `i`.
    pub fn input_shape(&self, i: usize) -> &[usize] {
        &self.meta[i].shape
    }

    /// Whether input `i` needs a gradient (formulas may skip the others).
    pub fn needs_grad(&self, i: usize) -> bool {
        self.needs.get(i).copied().unwrap_or(false)
    }

    /// Whether the gradients of inputs `i` and `j` flow into the same place
    /// (one tensor passed twice, as in `x * x`).
    pub fn same_edge(&self, i: usize, j: usize) -> bool {
        self.saved.same_edge(i, j)
    }

    /// Number of inputs of the operation.
    pub fn num_inputs(&self) -> usize {
        self.meta.len()
    }
}
