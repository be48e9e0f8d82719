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

/// Restores the previous grad mode when dropped (see [`no_grad_guard`],
/// [`enable_grad_guard`]).
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

/// Runs `f` without recording the graph (`with torch.no_grad():`),
/// restoring the previous mode afterwards (also if `f` panics).
///
/// ```
/// use ferrotorch_core::{Tensor, autograd::no_grad};
/// let w = Tensor::ones(&[2])?.requires_grad_(true)?;
/// w.mul(3.0)?.sum()?.backward()?;
/// no_grad(|| w.sub_(&(w.grad()? * 0.1)))?;
/// assert_eq!(w.to_vec::<f32>()?, [0.7, 0.7]);
/// assert!(w.requires_grad() && w.is_leaf());
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
///
/// The block form [`no_grad!`](crate::no_grad!) lets `?` leave the
/// enclosing function; `no_grad!()` alone covers the rest of the scope.
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _g = no_grad_guard();
    f()
}

/// Runs `f` recording the graph (`with torch.enable_grad():`, inside a
/// no-grad region), restoring the previous mode afterwards.
pub fn enable_grad<R>(f: impl FnOnce() -> R) -> R {
    let _g = enable_grad_guard();
    f()
}

/// Runs `f` with grad mode set to `enabled` (`with
/// torch.set_grad_enabled(enabled):`), restoring the previous mode after.
pub fn set_grad_enabled<R>(enabled: bool, f: impl FnOnce() -> R) -> R {
    let _g = set_grad_enabled_guard(enabled);
    f()
}

/// Runs `f` in inference mode (`with torch.inference_mode():`): nothing
/// is recorded, as under [`no_grad`], and the thread is marked as in
/// inference; the previous modes are restored afterwards.
pub fn inference_mode<R>(f: impl FnOnce() -> R) -> R {
    let _g = inference_mode_guard();
    f()
}

/// Disables graph recording until the returned guard drops. Bind it to a
/// name (`let _g = no_grad_guard();`): `let _ = no_grad_guard();` drops it
/// at once. [`no_grad!()`](crate::no_grad!) cannot be misused that way.
///
/// ```
/// use ferrotorch_core::{Tensor, autograd};
/// let x = Tensor::ones(&[2])?.requires_grad_(true)?;
/// let y = {
///     let _g = autograd::no_grad_guard();
///     x.mul(2.0)?
/// };
/// assert!(!y.requires_grad());
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn no_grad_guard() -> GradModeGuard {
    set_modes(false, None)
}

/// Enables graph recording until the guard drops (see [`no_grad_guard`]).
pub fn enable_grad_guard() -> GradModeGuard {
    set_modes(true, None)
}

/// Sets grad mode explicitly until the guard drops (see [`no_grad_guard`]).
pub fn set_grad_enabled_guard(enabled: bool) -> GradModeGuard {
    set_modes(enabled, None)
}

/// Inference mode until the guard drops (see [`inference_mode`],
/// [`no_grad_guard`]).
pub fn inference_mode_guard() -> GradModeGuard {
    set_modes(false, Some(true))
}

/// No-grad mode for a block or the rest of the scope, lint-proof (the
/// guard is bound for you, so it cannot be dropped early):
///
/// - `no_grad! { ... }` runs the block without recording the graph and
///   yields its value; `?` inside leaves the enclosing function, as in the
///   body of a `with torch.no_grad():`;
/// - `no_grad!();` turns recording off until the end of the enclosing
///   scope.
///
/// ```
/// use ferrotorch_core::{Tensor, no_grad};
/// # fn main() -> ferrotorch_core::Result<()> {
/// let w = Tensor::ones(&[2])?.requires_grad_(true)?;
/// w.sum()?.backward()?;
/// let g = w.grad()?;
/// no_grad! {
///     w.sub_(&(&g * 0.5))?;
/// }
/// assert_eq!(w.to_vec::<f32>()?, [0.5, 0.5]);
/// {
///     no_grad!();
///     assert!(!w.mul(2.0)?.requires_grad());
/// }
/// assert!(w.mul(2.0)?.requires_grad());
/// # Ok(())
/// # }
/// ```
#[macro_export]
macro_rules! no_grad {
    () => {
        let _ferrotorch_grad_mode_guard = $crate::autograd::no_grad_guard();
    };
    ($($body:tt)+) => {{
        let _ferrotorch_grad_mode_guard = $crate::autograd::no_grad_guard();
        $($body)+
    }};
}

/// [`no_grad!`](crate::no_grad!)'s counterpart recording the graph: `enable_grad! { ... }`
/// or `enable_grad!();` for the rest of the scope.
#[macro_export]
macro_rules! enable_grad {
    () => {
        let _ferrotorch_grad_mode_guard = $crate::autograd::enable_grad_guard();
    };
    ($($body:tt)+) => {{
        let _ferrotorch_grad_mode_guard = $crate::autograd::enable_grad_guard();
        $($body)+
    }};
}

/// [`no_grad!`](crate::no_grad!) for inference mode: `inference_mode! { ... }` or
/// `inference_mode!();` for the rest of the scope.
#[macro_export]
macro_rules! inference_mode {
    () => {
        let _ferrotorch_grad_mode_guard = $crate::autograd::inference_mode_guard();
    };
    ($($body:tt)+) => {{
        let _ferrotorch_grad_mode_guard = $crate::autograd::inference_mode_guard();
        $($body)+
    }};
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
