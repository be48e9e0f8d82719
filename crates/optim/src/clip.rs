//! Gradient clipping, as PyTorch users find it in `torch.nn.utils`.
//!
//! The functions live in the nn crate (`ferrotorch::nn::utils`, PyTorch's
//! place for them; the nn crate does not depend on this one) and are
//! re-exported here so that a training loop needs only `ferrotorch::optim`.
//! They return the tensor crate's `Result`.

pub use ferrotorch_nn::utils::{clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm};
