//! # ferrotorch-optim
//!
//! PyTorch's `torch.optim` for ferrotorch: [`SGD`], [`Adam`], [`AdamW`],
//! [`RMSprop`] and [`Adagrad`] with PyTorch's hyperparameters, defaults,
//! checks and messages; parameter groups; state dicts in PyTorch's layout
//! ([`OptimizerStateDict`]); learning-rate schedulers ([`lr_scheduler`]);
//! and gradient clipping ([`clip`], also `ferrotorch::nn::utils`).
//!
//! The facade re-exports this crate as `ferrotorch::optim`.
//!
//! ```
//! use ferrotorch::nn::{Forward, Linear, Module};
//! use ferrotorch::optim::{AdamW, AdamWOptions, Optimizer};
//! use ferrotorch::optim::lr_scheduler::{LrScheduler, StepLR};
//! use ferrotorch::Tensor;
//!
//! let model = Linear::new(4, 1)?;
//! let mut opt = AdamW::new(model.parameters(), AdamWOptions { lr: 1e-3, ..Default::default() })?;
//! let mut sched = StepLR::new(&mut opt, 10, 0.5)?;
//! let x = Tensor::randn([8, 4])?;
//! for _ in 0..3 {
//!     opt.zero_grad()?;
//!     let loss = model.forward(&x)?.pow(2.0)?.mean()?;
//!     loss.backward()?;
//!     opt.step()?;
//!     sched.step(&mut opt)?;
//! }
//! assert_eq!(sched.get_last_lr(), [1e-3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Numbers
//!
//! Each update is one fused pass over a parameter's elements (no temporary
//! tensors), computing PyTorch's single-tensor (`foreach=False`) formulas
//! with the same rounding: hyperparameter arithmetic in f64 as Python's
//! floats, each tensor operation rounded to the parameter's dtype, and
//! fused multiply-adds exactly where ATen's CPU kernels have them (`add`
//! with `alpha`, `addcmul`, `lerp`). float32 and float64 parameters are
//! supported; results match PyTorch's bit for bit on its reference cases.
//!
//! ## Design
//!
//! [`Optim<A>`] holds the groups and the state; an [`Algorithm`] gives the
//! options type, the per-parameter state and the update, so `SGD`, `Adam`,
//! ... are type aliases (`Optim<AdamAlgorithm>`). The object-safe
//! [`Optimizer`] trait is what schedulers and training loops use. Every
//! failure is an [`Error`] (hyperparameters out of range, duplicate
//! parameters, a state dict that does not fit), never a panic; it converts
//! into `ferrotorch::Error` for `?` in code that returns that.

pub mod adagrad;
pub mod adam;
pub mod clip;
pub mod error;
pub mod grad_scaler;
mod kernel;
pub mod lr_scheduler;
pub mod optimizer;
pub mod rmsprop;
pub mod sgd;
pub mod value;

pub use adagrad::{Adagrad, AdagradOptions};
pub use adam::{Adam, AdamOptions, AdamW, AdamWOptions};
pub use clip::{clip_grad_norm_, clip_grad_value_};
pub use error::{Error, Result};
pub use grad_scaler::{GradScaler, GradScalerOptions};
pub use optimizer::{Algorithm, GroupOptions, Optim, Optimizer, OptimizerStateDict, ParamGroup, ParamGroupState};
pub use rmsprop::{RMSprop, RmsProp, RmsPropOptions};
pub use sgd::{SGD, Sgd, SgdOptions};
pub use value::{Dict, Value};
