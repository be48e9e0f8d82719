//! For backend and operator authors: the dispatcher, storage, layouts and
//! the CPU kernels, and the [`TensorExt`] methods that build tensors from
//! raw parts.
//!
//! A model or training loop needs none of this: [`Tensor`](crate::Tensor)'s
//! methods and the crate root cover it. An out-of-tree crate uses this
//! module to register an operator or a whole backend without editing the
//! core (`crates/dispatch-demo` does both):
//!
//! ```
//! use ferrotorch_core::backend::{Layout, TensorExt, storage::Storage};
//! use ferrotorch_core::{DType, Tensor};
//! let s = Storage::cpu_from_bytes(&2.5f32.to_le_bytes())?;
//! let t = Tensor::from_parts(s, Layout::contiguous(&[1]), DType::F32)?;
//! assert_eq!(t.to_vec::<f32>()?, [2.5]);
//! # Ok::<(), ferrotorch_core::Error>(())
//! ```

pub mod cpu;
pub mod dispatch;
pub mod layout;
pub mod storage;
mod tensor_ext;

pub use dispatch::{OutSpec, Tensors};
pub use layout::Layout;
pub use tensor_ext::TensorExt;
