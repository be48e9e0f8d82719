//! The error type every fallible call of ferrotorch returns.
//!
//! Each variant names the operator that failed and the offending shapes,
//! dims, dtypes or devices, so a message is enough to find the bad call.

use crate::{DType, Device};

/// Result alias used across ferrotorch.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in an operator call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two shapes that must agree (or broadcast) do not.
    #[error("{op}: shape mismatch: {lhs:?} and {rhs:?}{}", detail_suffix(.detail))]
    ShapeMismatch {
        /// The operator.
        op: &'static str,
        /// The first shape involved.
        lhs: Vec<usize>,
        /// The second shape involved.
        rhs: Vec<usize>,
        /// What the operator expected of them.
        detail: String,
    },
    /// A dimension index outside `[-ndim, ndim)` (PyTorch's message; a 0-d
    /// tensor takes -1 and 0).
    #[error(
        "{op}: Dimension out of range (expected to be in range of [{}, {}], but got {dim})",
        -(dim_range(*.ndim) as i64), dim_range(*.ndim) as i64 - 1
    )]
    DimOutOfRange {
        /// The operator.
        op: &'static str,
        /// The dimension the caller passed.
        dim: i64,
        /// The number of dimensions of the tensor.
        ndim: usize,
    },
    /// An element index outside a dimension.
    #[error("{op}: index {index} is out of bounds for dimension {dim} with size {size}")]
    IndexOutOfRange {
        /// The operator.
        op: &'static str,
        /// The index the caller passed.
        index: i64,
        /// The dimension indexed.
        dim: usize,
        /// The size of that dimension.
        size: usize,
    },
    /// The operator does not support this dtype.
    #[error("{op}: not implemented for dtype {dtype}{}", detail_suffix(.detail))]
    UnsupportedDType {
        /// The operator.
        op: &'static str,
        /// The dtype it was given.
        dtype: DType,
        /// Why, or what is accepted.
        detail: String,
    },
    /// Two dtypes that must agree do not, or a result cannot be cast back.
    #[error("{op}: dtype mismatch: {detail}")]
    DTypeMismatch {
        /// The operator.
        op: &'static str,
        /// The dtypes involved and what was expected.
        detail: String,
    },
    /// A view whose strides cannot express the requested shape.
    #[error(
        "{op}: view size is not compatible with input tensor's size {shape:?} and stride {strides:?} \
         (at least one dimension spans across two contiguous subspaces); use reshape instead"
    )]
    InvalidView {
        /// The operator.
        op: &'static str,
        /// Shape of the tensor being viewed.
        shape: Vec<usize>,
        /// Its strides.
        strides: Vec<usize>,
    },
    /// Tensors of one call live on different devices.
    #[error("{op}: expected all tensors to be on the same device, but found at least two devices, {a} and {b}")]
    DeviceMismatch {
        /// The operator.
        op: &'static str,
        /// One device.
        a: Device,
        /// Another device.
        b: Device,
    },
    /// The device's backend is not compiled in or not present on this machine.
    #[error("device {device} is not available: {reason}")]
    DeviceUnavailable {
        /// The device asked for.
        device: Device,
        /// Why it cannot be used.
        reason: String,
    },
    /// The dispatcher found no kernel for this operator and these inputs.
    #[error("{op}: no kernel registered for dispatch key {key} (keys of the call: {keys})")]
    NoKernel {
        /// The operator, by its full `name.overload` (as PyTorch's "could
        /// not run" error names it).
        op: &'static str,
        /// The dispatch key that was tried.
        key: String,
        /// All keys of the call.
        keys: String,
    },
    /// Registering an operator or kernel failed.
    #[error("registration of {what}: {detail}")]
    Registration {
        /// What was registered.
        what: String,
        /// Why it was refused.
        detail: String,
    },
    /// The tensor has no data to read (meta device) or is on a device that cannot be read.
    #[error("{op}: cannot access the data of a tensor on {device}")]
    NoData {
        /// The operator.
        op: &'static str,
        /// The device of the tensor.
        device: Device,
    },
    /// The tensor's host memory was released
    /// ([`Storage::release_cpu`](crate::backend::storage::Storage::release_cpu))
    /// and not restored since.
    #[error(
        "{op}: the tensor's memory was released (Storage::release_cpu: FSDP frees gathered parameters between \
         uses) and not restored"
    )]
    Released {
        /// The operator.
        op: &'static str,
    },
    /// A size computation (element count, byte count, stride, range length)
    /// does not fit the machine's sizes.
    #[error("{op}: size overflow: {detail}")]
    SizeOverflow {
        /// The operator.
        op: &'static str,
        /// The sizes involved.
        detail: String,
    },
    /// The allocator could not provide the memory.
    #[error("{op}: not enough memory: tried to allocate {nbytes} bytes on {device}")]
    OutOfMemory {
        /// The operator.
        op: &'static str,
        /// The bytes asked for.
        nbytes: usize,
        /// Where.
        device: Device,
    },
    /// Backward needs a tensor that was modified in place after it was
    /// saved (PyTorch's "one of the variables needed for gradient
    /// computation has been modified by an inplace operation"); the message
    /// names the tensor, the node that saved it and the versions.
    #[error("backward: {detail}")]
    SavedTensorModified {
        /// PyTorch's message.
        detail: String,
    },
    /// Backward through a part of the graph whose saved tensors an earlier
    /// backward freed (call that one with `retain_graph`).
    #[error("backward: {detail}")]
    GraphFreed {
        /// PyTorch's message, with the node.
        detail: String,
    },
    /// Backward from, or a gradient with respect to, a tensor that does
    /// not require grad (no `grad_fn`, not a leaf requiring grad).
    #[error("{op}: {detail}")]
    NoGradFn {
        /// `backward` or `grad`.
        op: &'static str,
        /// Which tensor.
        detail: String,
    },
    /// `tensor.grad()` of a tensor that has no gradient (none accumulated
    /// yet, or not a leaf: see `retain_grad`).
    #[error("grad: {detail}")]
    NoGrad {
        /// Why, as PyTorch's warning says it.
        detail: String,
    },
    /// `autograd::grad` with an input the outputs do not depend on (set
    /// `allow_unused` to get `None` for it).
    #[error("grad: {detail}")]
    UnusedInput {
        /// The input's position in `inputs`.
        index: usize,
        /// PyTorch's message.
        detail: String,
    },
    /// Any other invalid argument.
    #[error("{op}: {detail}")]
    InvalidArgument {
        /// The operator.
        op: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A layer (an `nn` module) was built with bad arguments or given an
    /// input it cannot take; `module` is its repr
    /// (`Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))`).
    #[error("{module}: {detail}")]
    Module {
        /// The module, as its repr names it.
        module: String,
        /// What was wrong (both shapes for a shape error).
        detail: String,
    },
    /// `load_state_dict` found keys that are missing, unexpected, or of
    /// the wrong shape; the message lists each by name, as PyTorch's.
    #[error("Error(s) in loading state_dict for {module}:{detail}")]
    StateDict {
        /// The module's type name.
        module: String,
        /// Keys the module has and the state dict lacks.
        missing: Vec<String>,
        /// Keys the state dict has and the module lacks.
        unexpected: Vec<String>,
        /// Keys present in both whose shapes differ.
        mismatched: Vec<String>,
        /// PyTorch's lines, one per kind of problem.
        detail: String,
    },
}

fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(" ({detail})")
    }
}

fn dim_range(ndim: usize) -> usize {
    ndim.max(1)
}

impl Error {
    /// Shorthand for [`Error::Module`].
    pub fn module(module: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::Module {
            module: module.into(),
            detail: detail.into(),
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(op: &'static str, detail: impl Into<String>) -> Self {
        Error::InvalidArgument {
            op,
            detail: detail.into(),
        }
    }

    /// Shorthand for [`Error::SizeOverflow`].
    pub fn overflow(op: &'static str, detail: impl Into<String>) -> Self {
        Error::SizeOverflow {
            op,
            detail: detail.into(),
        }
    }

    /// The same error attributed to `op` when it came from a generic helper
    /// (an allocation or size check that does not know the operator).
    pub fn in_op(self, op: &'static str) -> Self {
        match self {
            Error::OutOfMemory { nbytes, device, .. } => Error::OutOfMemory { op, nbytes, device },
            Error::SizeOverflow { detail, .. } => Error::SizeOverflow { op, detail },
            e => e,
        }
    }

    /// Shorthand for [`Error::ShapeMismatch`].
    pub fn shape(op: &'static str, lhs: &[usize], rhs: &[usize], detail: impl Into<String>) -> Self {
        Error::ShapeMismatch {
            op,
            lhs: lhs.to_vec(),
            rhs: rhs.to_vec(),
            detail: detail.into(),
        }
    }

    /// Shorthand for [`Error::UnsupportedDType`].
    pub fn dtype(op: &'static str, dtype: DType, detail: impl Into<String>) -> Self {
        Error::UnsupportedDType {
            op,
            dtype,
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_op_and_shapes() {
        let e = Error::shape("add", &[2, 3], &[4], "not broadcastable");
        assert_eq!(e.to_string(), "add: shape mismatch: [2, 3] and [4] (not broadcastable)");
        let e = Error::DimOutOfRange {
            op: "sum",
            dim: 3,
            ndim: 2,
        };
        assert_eq!(
            e.to_string(),
            "sum: Dimension out of range (expected to be in range of [-2, 1], but got 3)"
        );
    }
}
