//! Operator declarations and front ends.
//!
//! One module per family. Each operator is declared once: a struct (its
//! attributes) implementing [`crate::dispatch::Op`] with its dispatch table and
//! shape/dtype rule, plus its `Tensor` methods. Kernels live per backend
//! (`crate::cpu` for the CPU); backend-independent kernels (views, `cat`,
//! device copies) are registered here.

pub mod activation;
pub mod activation_backward;
pub mod addmm;
pub mod attention;
pub mod autocast_lists;
pub mod binary;
pub mod binary_math;
pub mod bucket;
pub mod clamp_lerp;
pub mod composite;
pub mod conv;
pub mod copy;
pub mod decomp;
pub mod einsum;
pub mod embedding;
pub mod factory;
pub mod float_class;
pub(crate) mod grad_util;
pub mod index;
pub mod index_more;
pub mod join;
pub mod linalg;
pub mod linalg_ext;
pub mod linalg_norm;
pub mod linear;
pub mod loss;
pub mod nan_reduce;
pub mod norm;
mod overloads;
pub mod pool;
pub mod promote;
pub mod rearrange;
pub mod reduce;
pub mod reduce_composite;
pub mod rnn_cell;
pub mod rnn_layer;
pub mod sampling;
pub mod scans;
pub mod select;
pub mod shape_more;
pub mod softmax;
pub mod sort;
pub mod split;
pub mod unary;
pub mod unique;
pub mod view;

pub use binary::{ALL_BINARY, Binary, BinaryKind, Rounding, Where};
pub use binary_math::{ALL_MATH, BinaryMath, BitwiseNot, MathKind};
pub use clamp_lerp::{ClampTensor, Lerp};
pub use composite::CompositeOp;
pub use copy::{Cast, CopyInplace, Fill, FillInplace, ToDevice};
pub use factory::{Arange, Distribution, Linspace, Random};
pub use float_class::NanToNum;
pub use index::{Gather, IndexPut, IndexSelect, IndexTensors, Nonzero, Scatter};
pub use join::Cat;
pub use linalg::{MatMul, Mm};
pub use overloads::OverloadScalar;
pub use promote::{IntoOperand, Operand, result_type};
pub use reduce::{IndexReduce, Reduce, ReduceKind, Scan};
pub use reduce_composite::{CompositeKind, CompositeReduce};
pub use softmax::Softmax;
pub use sort::{Sort, TopK};
pub use split::{Split, SplitKind};
pub use unary::{ALL_UNARY, Clamp, Domain, PowScalar, Softplus, Unary, UnaryKind};
pub use view::{FlattenDims, ViewKind, ViewOp, ViewScatter};

inventory::submit! {
    crate::dispatch::registration::Registration {
        stage: crate::dispatch::registration::Stage::Composites,
        what: "composite ops",
        run: register_composites,
    }
}

/// Registers the backend-independent kernels (at start-up).
fn register_composites() -> crate::Result<()> {
    view::register()?;
    split::register()?;
    unary::register()?;
    activation_backward::register()?;
    join::register()?;
    copy::register()?;
    reduce_composite::register()?;
    composite::register()?;
    nan_reduce::register()?;
    index_more::register()?;
    rearrange::register()?;
    shape_more::register()?;
    norm::register()?;
    rnn_cell::register()?;
    rnn_layer::register()?;
    attention::register()?;
    softmax::register()?;
    loss::register()?;
    embedding::register()?;
    sampling::register()?;
    addmm::register()?;
    linalg_ext::register()?;
    Ok(())
}
