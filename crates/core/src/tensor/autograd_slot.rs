//! The autograd slot of a tensor (PyTorch's `autograd_meta_`): a flag read
//! on every operator call, and the autograd state behind a lock, typed
//! only by the autograd layer above (`autograd::graph::AutogradMeta`), as
//! c10's `TensorImpl` holds an `AutogradMetaInterface`.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// What the tensor layer knows of a tensor's autograd state.
pub(crate) trait AutogradMetaInterface: Any + Send {
    /// Called instead of dropping the box when its tensor goes: the
    /// autograd layer empties it and keeps it for the next tensor (graphs
    /// of small tensors make and free hundreds in a burst).
    fn recycle(self: Box<Self>);
}

/// The autograd state of a tensor, as the tensor layer sees it.
pub(crate) type ErasedMeta = Box<dyn AutogradMetaInterface>;

/// The autograd slot of a tensor: a fast flag plus the locked metadata.
#[derive(Default)]
pub(crate) struct AutogradSlot {
    flag: AtomicBool,
    meta: Mutex<Option<ErasedMeta>>,
}

impl AutogradSlot {
    /// The flag: whether the tensor requires grad by itself (a leaf that
    /// asked for it, or an output with a `grad_fn`).
    #[inline]
    pub(crate) fn flag(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    /// Sets the flag.
    #[inline]
    pub(crate) fn set_flag(&self, on: bool) {
        self.flag.store(on, Ordering::Relaxed);
    }

    /// The locked metadata (a poisoned lock is taken over: the state is
    /// plain data, valid after any panic).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<ErasedMeta>> {
        self.meta.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for AutogradSlot {
    fn drop(&mut self) {
        let meta = self.meta.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(m) = meta {
            m.recycle();
        }
    }
}
