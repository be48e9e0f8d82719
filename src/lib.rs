//! # ferrotorch
//!
//! PyTorch's programming model in Rust. This facade re-exports the crates of
//! the workspace: the tensor core ([`ferrotorch_core`], at the root), `nn`
//! ([`ferrotorch_nn`]) and `optim` ([`ferrotorch_optim`]).
//!
//! ```
//! use ferrotorch::{Tensor, manual_seed};
//! manual_seed(0);
//! let a = Tensor::randn(&[2, 3])?;
//! let b = a.matmul(&a.t()?)?;
//! assert_eq!(b.shape(), &[2, 2]);
//! # Ok::<(), ferrotorch::Error>(())
//! ```

pub use ferrotorch_core::*;

/// Neural-network modules, layers, `functional` and `init`
/// (`torch.nn`): the [`ferrotorch_nn`] crate.
pub use ferrotorch_nn as nn;

/// Data loading (`torch.utils.data`): datasets, samplers, the
/// `DataLoader` with worker threads, MNIST and image transforms: the
/// [`ferrotorch_data`] crate.
pub use ferrotorch_data as data;
/// Optimizers, LR schedulers and gradient clipping (`torch.optim`): the
/// [`ferrotorch_optim`] crate.
pub use ferrotorch_optim as optim;

/// The README's Rust examples, compiled and run as doc tests so that the
/// quick start a new user copies keeps working.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
