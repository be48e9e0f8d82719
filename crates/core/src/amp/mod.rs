//! Automatic mixed precision (`torch.amp` / `torch.autocast`): inside an
//! [`autocast`] region the matrix products and convolutions run in bf16
//! (or f16) and the operators that need range or precision run in f32,
//! following the tables of [`crate::ops::autocast_lists`]. Parameters stay
//! f32 (the casts are recorded by autograd, so gradients arrive in the
//! parameters' dtype), and the cast of a weight is made once per region.
//!
//! Autocast is a layer of the dispatcher: while a region is active the
//! Autocast key joins every call's key set on this thread, and the listed
//! operators' Autocast kernels cast their inputs before redispatching.
//! Outside a region the key is absent and nothing is done.
//!
//! ```
//! use ferrotorch_core::{DType, Device, Tensor, amp};
//! let x = Tensor::randn([4, 8])?;
//! let w = Tensor::randn([8, 3])?.requires_grad_(true)?;
//! let (y, s) = {
//!     let _ac = amp::autocast(Device::Cpu, DType::BF16)?;
//!     let y = x.matmul(&w)?; // bf16
//!     (y.clone(), y.softmax(-1)?) // f32
//! };
//! assert_eq!((y.dtype(), s.dtype()), (DType::BF16, DType::F32));
//! s.sum()?.backward()?;
//! assert_eq!(w.grad()?.dtype(), DType::F32); // the parameter's dtype
//! # Ok::<(), ferrotorch_core::Error>(())
//! ```

mod layer;

use std::cell::{Cell, RefCell};

use crate::backend::dispatch::{DispatchKey, KeyGuard, set_key_enabled};
use crate::{DType, Device, Error, Result, Tensor};

/// The options of [`autocast_with`] (`torch.autocast`'s keywords).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutocastOptions {
    /// The lower-precision dtype; `None`: the device's default (bf16 on the CPU).
    pub dtype: Option<DType>,
    /// `false` switches autocast off inside the region (in a nested region,
    /// for code that must run in the inputs' dtypes).
    pub enabled: bool,
    /// Cache the casts of leaf tensors that require grad (the weights)
    /// within the region.
    pub cache_enabled: bool,
}

impl Default for AutocastOptions {
    fn default() -> Self {
        AutocastOptions {
            dtype: None,
            enabled: true,
            cache_enabled: true,
        }
    }
}

/// This thread's autocast settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct State {
    pub(crate) enabled: bool,
    pub(crate) dtype: DType,
    pub(crate) cache_enabled: bool,
    /// Enabled regions open on this thread (the cache is dropped when the
    /// outermost one closes).
    depth: u32,
}

thread_local! {
    static STATE: Cell<State> = const {
        Cell::new(State { enabled: false, dtype: DType::BF16, cache_enabled: true, depth: 0 })
    };
    /// Casts of weights made in the current outermost region: (source,
    /// target dtype, grad mode, cast).
    static CACHE: RefCell<Vec<(Tensor, DType, bool, Tensor)>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn state() -> State {
    STATE.with(Cell::get)
}

/// An autocast region; the previous settings come back when it drops.
#[must_use = "autocast ends when this guard is dropped"]
pub struct AutocastGuard {
    previous: State,
    _keys: KeyGuard,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        let closing = state();
        STATE.with(|s| s.set(self.previous));
        if closing.enabled && self.previous.depth == 0 {
            clear_autocast_cache();
        }
    }
}

/// Starts an autocast region on `device` in `dtype` (`with
/// torch.autocast(device_type, dtype=dtype):`), ending when the guard drops.
///
/// Errors: a device without autocast in this build (CUDA), or a dtype the
/// device cannot compute in: the CPU runs bf16 and f16; f32, f64 and
/// integer dtypes are refused here rather than deep in a kernel.
pub fn autocast(device: Device, dtype: DType) -> Result<AutocastGuard> {
    autocast_with(
        device,
        AutocastOptions {
            dtype: Some(dtype),
            ..Default::default()
        },
    )
}

/// [`autocast`] with all of `torch.autocast`'s options.
pub fn autocast_with(device: Device, options: AutocastOptions) -> Result<AutocastGuard> {
    crate::dispatch::ensure_init()?;
    match device {
        Device::Cpu => {}
        Device::Cuda(_) => {
            return Err(Error::DeviceUnavailable {
                device,
                reason: "autocast on CUDA needs the CUDA backend, which this build does not have".into(),
            });
        }
        d => {
            return Err(Error::invalid(
                "autocast",
                format!("autocast is not supported on device {d}; use Device::Cpu (meta tensors follow it)"),
            ));
        }
    }
    let dtype = options.dtype.unwrap_or(DType::BF16);
    if !matches!(dtype, DType::BF16 | DType::F16) {
        return Err(Error::dtype(
            "autocast",
            dtype,
            "CPU autocast runs in bfloat16 or float16 (the dtype is the lower precision the products run in)",
        ));
    }
    let previous = state();
    let depth = previous.depth + u32::from(options.enabled);
    STATE.with(|s| {
        s.set(State {
            enabled: options.enabled,
            dtype,
            cache_enabled: options.cache_enabled,
            depth,
        })
    });
    Ok(AutocastGuard {
        previous,
        _keys: set_key_enabled(DispatchKey::Autocast, options.enabled),
        _not_send: std::marker::PhantomData,
    })
}

/// Whether autocast is on for `device` on this thread
/// (`torch.is_autocast_enabled(device_type)`).
pub fn is_autocast_enabled(device: Device) -> bool {
    device == Device::Cpu && state().enabled
}

/// The dtype autocast casts to on `device` (`torch.get_autocast_dtype`).
pub fn get_autocast_dtype(device: Device) -> DType {
    let _ = device;
    state().dtype
}

/// Drops the casts cached in this thread's autocast region
/// (`torch.clear_autocast_cache`).
pub fn clear_autocast_cache() {
    let _ = CACHE.try_with(|c| c.borrow_mut().clear());
}

/// `t` cast to `dtype` for an autocast kernel: a weight's cast (a leaf
/// that requires grad, not a view, f32, cast to the lower dtype) is made
/// once per region and cached.
pub(crate) fn cached_cast(t: &Tensor, dtype: DType, st: State) -> Result<Tensor> {
    let cacheable = st.cache_enabled
        && dtype == st.dtype
        && t.dtype() == DType::F32
        && t.requires_grad()
        && t.base().is_none()
        && t.is_leaf();
    if !cacheable {
        return t.to_dtype(dtype);
    }
    let grad = crate::autograd::is_grad_enabled();
    let hit = CACHE.with(|c| {
        c.borrow()
            .iter()
            .find(|(src, d, g, _)| src.is_same(t) && *d == dtype && *g == grad)
            .map(|e| e.3.clone())
    });
    if let Some(c) = hit {
        return Ok(c);
    }
    let cast = t.to_dtype(dtype)?;
    CACHE.with(|c| c.borrow_mut().push((t.clone(), dtype, grad, cast.clone())));
    Ok(cast)
}
