//! Thread-local autograd switches: grad mode (`no_grad` / `enable_grad`),
//! inference mode and anomaly detection, each with a nestable guard.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
    static INFERENCE: Cell<bool> = const { Cell::new(false) };
    static ANOMALY: Cell<bool> = const { Cell::new(false) };
}

/// Whether operations on this thread record the autograd graph.
#[inline]
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Whether this thread is in inference mode.
pub fn is_inference_mode_enabled() -> bool {
    INFERENCE.with(Cell::get)
}

/// Whether anomaly detection is on for this thread.
pub fn is_anomaly_enabled() -> bool {
    ANOMALY.with(Cell::get)
}

/// Restores the previous grad mode when dropped (see [`no_grad`], [`enable_grad`]).
#[must_use = "the mode is restored when the guard is dropped"]
pub struct GradModeGuard {
    prev_grad: bool,
    prev_inference: bool,
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|c| c.set(self.prev_grad));
        INFERENCE.with(|c| c.set(self.prev_inference));
    }
}

fn set_modes(grad: bool, inference: Option<bool>) -> GradModeGuard {
    let g = GradModeGuard {
        prev_grad: is_grad_enabled(),
        prev_inference: is_inference_mode_enabled(),
    };
    GRAD_ENABLED.with(|c| c.set(grad));
    if let Some(i) = inference {
        INFERENCE.with(|c| c.set(i));
    }
    g
}

/// Disables graph recording on this thread until the guard drops
/// (`with torch.no_grad():`).
///
/// ```
/// use ferrotorch_core::{Tensor, autograd};
/// let x = Tensor::ones(&[2])?.requires_grad_(true)?;
/// let y = {
///     let _g = autograd::no_grad();
///     x.mul(2.0)?
/// };
/// assert!(!y.requires_grad());
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn no_grad() -> GradModeGuard {
    set_modes(false, None)
}

/// Enables graph recording until the guard drops (inside a `no_grad` block).
pub fn enable_grad() -> GradModeGuard {
    set_modes(true, None)
}

/// Sets grad mode explicitly until the guard drops.
pub fn set_grad_enabled(enabled: bool) -> GradModeGuard {
    set_modes(enabled, None)
}

/// Inference mode: like [`no_grad`] (nothing is recorded) and marks the
/// thread as in inference, until the guard drops.
pub fn inference_mode() -> GradModeGuard {
    set_modes(false, Some(true))
}

/// Restores anomaly detection when dropped.
#[must_use = "anomaly mode is restored when the guard is dropped"]
pub struct AnomalyGuard(bool);

impl Drop for AnomalyGuard {
    fn drop(&mut self) {
        ANOMALY.with(|c| c.set(self.0));
    }
}

/// Anomaly detection (`torch.autograd.detect_anomaly`) until the guard
/// drops: every backward node checks its results, and a NaN makes backward
/// fail with an error naming the forward operation whose backward produced it.
pub fn detect_anomaly() -> AnomalyGuard {
    let g = AnomalyGuard(is_anomaly_enabled());
    ANOMALY.with(|c| c.set(true));
    g
}
