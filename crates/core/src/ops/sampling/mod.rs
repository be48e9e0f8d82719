//! Random sampling beyond the factories of [`crate::TensorOptions`]: the
//! in-place fills (`uniform_`, `normal_`, `bernoulli_`, `random_`,
//! `exponential_`, `geometric_`, `cauchy_`, `log_normal_`), `randperm`,
//! `multinomial`, `poisson`, `bernoulli` with a probability tensor and
//! `normal` with tensor mean / std.
//!
//! Every sampler draws the numbers PyTorch's CPU generator draws for the same
//! seed, for every dtype: the same MT19937 outputs, consumed in the same
//! order (the output's memory order), through the same transforms, with
//! PyTorch's fused multiply-adds. Results do not depend on the number of
//! threads (draws are sequential, under the generator's lock).
//!
//! # Generators
//!
//! Each sampler draws from the global generator ([`crate::manual_seed`]);
//! its twin with `_with` in the name takes the generator as its last
//! argument (`x.uniform_(0.0, 1.0)` / `x.uniform_with_(0.0, 1.0, &g)`,
//! `p.multinomial(3, false)` / `p.multinomial_with(3, false, &g)`).
//! Factories take theirs from [`crate::TensorOptions::generator`].
//!
//! # Autograd
//!
//! The samplers are not differentiable. As in PyTorch, `bernoulli`,
//! `poisson` and `normal` with a tensor argument that requires grad give a
//! result that requires grad, through a node whose gradient is zero
//! ([`ZeroGradDraw`]); the other results do not require grad, and an in-place fill of a leaf that requires grad is refused, as in
//! PyTorch ("a leaf Variable that requires grad is being used in an
//! in-place operation"). Unlike PyTorch, an in-place fill of a non-leaf
//! that requires grad is refused too (PyTorch records a node whose
//! gradient is zero).

mod checks;
mod fills;
mod samplers;
mod zero_grad;

pub(crate) use checks::{IntDraw, check_distribution, int_draw};
pub use samplers::{BERNOULLI_TENSOR, BernoulliTensor, MULTINOMIAL, Multinomial, POISSON, Poisson, RANDPERM, Randperm};
pub(crate) use zero_grad::register;
pub use zero_grad::{ZERO_GRAD_DRAW, ZeroGradDraw};
