//! [`OutSpec`]: the shape, dtype and strides of an operator's output, as
//! its shape rule computes them and as tensors are allocated from them
//! (below the tensor, which allocates from one).

use smallvec::SmallVec;

use crate::backend::layout::Dims;
use crate::dtype::DType;

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
