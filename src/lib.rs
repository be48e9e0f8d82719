//! # ferrotorch
//!
//! PyTorch's programming model in Rust. This facade re-exports the crates of
//! the workspace: the tensor core ([`ferrotorch_core`], at the root), `nn`
//! ([`ferrotorch_nn`]), `optim` ([`ferrotorch_optim`]), `data`
//! ([`ferrotorch_data`]), `serialize` ([`ferrotorch_serialize`]) and
//! `distributed` ([`ferrotorch_distributed`]).
//!
//! ```
//! use ferrotorch::{Tensor, manual_seed};
//! manual_seed(0);
//! let a = Tensor::randn(&[2, 3])?;
//! let b = a.matmul(&a.t()?)?;
//! assert_eq!(b.shape(), &[2, 2]);
//! # Ok::<(), ferrotorch::Error>(())
//! ```
//!
//! A training loop, as PyTorch's: a `DataLoader`, a model, AdamW and a
//! cosine learning-rate schedule stepped once per batch. Errors of every
//! crate convert into [`Error`] with `?`.
//!
//! ```
//! use ferrotorch::data::{DataLoader, TensorDataset};
//! use ferrotorch::nn::{CrossEntropyLoss, Forward, Linear, Module, ReLU, Sequential};
//! use ferrotorch::optim::lr_scheduler::{CosineAnnealingLR, LrScheduler};
//! use ferrotorch::optim::{AdamW, AdamWOptions, Optimizer};
//! use ferrotorch::{Generator, Tensor, manual_seed};
//!
//! manual_seed(0);
//! let x = Tensor::randn((256, 8))?;
//! let y = x.sum_dim(1, false)?.gt(0.0)?.to_dtype(ferrotorch::DType::I64)?;
//! let loader = DataLoader::builder(TensorDataset::new((x, y))?)
//!     .batch_size(32)
//!     .shuffle(true)
//!     .generator(Generator::new(0))
//!     .build()?;
//! let model = Sequential::new().push(Linear::new(8, 16)?).push(ReLU::new()).push(Linear::new(16, 2)?);
//! let mut opt = AdamW::new(model.parameters(), AdamWOptions::new().lr(1e-2))?;
//! let epochs = 3;
//! let mut sched = CosineAnnealingLR::new(&mut opt, epochs * loader.len()? as i64, 0.0)?;
//! let loss_fn = CrossEntropyLoss::new();
//! let mut last = f32::INFINITY;
//! for _epoch in 0..epochs {
//!     for batch in loader.iter()? {
//!         let (xb, yb) = batch?;
//!         opt.zero_grad()?;
//!         let loss = loss_fn.call(&model.call(&xb)?, &yb)?;
//!         loss.backward()?;
//!         opt.step()?;
//!         sched.step(&mut opt)?;
//!         last = loss.item::<f32>()?;
//!     }
//! }
//! assert!(last < 0.5 && sched.get_last_lr()[0] < 1e-12);
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
/// Checkpoints: `torch.save` files (read as `torch.load(weights_only=True)`
/// does, and written so that it reads them), safetensors, and state-dict
/// conversions: the [`ferrotorch_serialize`] crate.
pub use ferrotorch_serialize as serialize;

/// Distributed training (`torch.distributed`): key-value stores that
/// PyTorch's processes share (TCPStore in its wire protocol, FileStore,
/// HashStore, PrefixStore): the [`ferrotorch_distributed`] crate.
pub use ferrotorch_distributed as distributed;

/// The README's Rust examples, compiled and run as doc tests so that the
/// quick start a new user copies keeps working.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
