//! # ferrotorch-core
//!
//! The tensor core of ferrotorch: strided [`Tensor`]s with views and
//! PyTorch's operators, define-by-run [`autograd`], random numbers
//! ([`random`]) and the typed [`Error`]. Backend and operator authors find
//! the dispatcher, storage, layouts and CPU kernels in [`backend`]. See
//! `docs/architecture.md` for the map.
//!
//! ```
//! use ferrotorch_core::Tensor;
//! let x = Tensor::arange_step(0.0, 6.0, 1.0)?.reshape(&[2, 3])?;
//! let y = x.softmax(-1)?.sum_dim(-1, false)?;
//! assert!(y.to_vec::<f32>()?.iter().all(|v| (v - 1.0).abs() < 1e-6));
//! # Ok::<(), ferrotorch_core::Error>(())
//! ```

#![warn(missing_docs)]

pub mod amp;
pub mod autograd;
pub mod backend;
mod defaults;
mod device;
mod dtype;
mod error;
pub mod memory;
pub mod ops;
pub mod profiler;
pub mod random;
mod random_state;
mod scalar;
mod shape_arg;
mod spare;
mod tensor;

// The backend modules, at the crate root for the crate's own paths.
pub(crate) use backend::{cpu, dispatch, layout, storage};

pub use half;

pub use backend::layout::Dims;
pub use backend::storage::{MemoryStats, empty_cache, memory_stats, reset_peak_memory_stats};
pub use defaults::{DefaultDeviceScope, default_device, default_device_scope, default_dtype, set_default_dtype};
pub use device::Device;

pub use dtype::{ALL_DTYPES, DType, Element};
pub use error::{Error, Result};
pub use ops::bucket::SearchSortedOptions;
pub use ops::conv::{ConvOptions, ConvParams, ConvTransposeOptions, Padding};
pub use ops::linalg_norm::MatrixOrd;
pub use ops::loss::Reduction;
pub use ops::pool::{AvgPoolOptions, MaxPoolOptions};
pub use ops::shape_more::{Indexing, RepeatInterleaveOptions, Repeats};
pub use ops::unique::{UniqueOptions, UniqueOutput};
pub use ops::{FlattenDims, IntoOperand, Operand, Rounding, result_type};
pub use random::{Generator, manual_seed};
pub use random_state::{RNG_STATE_BYTES, get_rng_state, set_rng_state};
pub use scalar::Scalar;
pub use shape_arg::{IntoShape, ShapeInt, ShapeVec};
pub use tensor::display::{PrintOptions, set_print_options};
pub use tensor::index_op::{Ellipsis, IndexSpec, IntoTensorIndex, NewAxis, Step};
pub use tensor::{Tensor, TensorData, TensorIndex, TensorOptions, VersionCounter};
