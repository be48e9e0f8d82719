//! A per-thread cache of dead tensors' allocations.
//!
//! Every op creates a tensor (an `Arc<TensorImpl>` and an `Arc` of its
//! storage: two heap blocks) and graphs of small tensors free them in bursts
//! of hundreds, which glibc's small per-size caches do not absorb. When the
//! last handle of a tensor that owns its host storage alone goes away, its
//! data and autograd state are freed at once, as before, but the two blocks
//! are kept here and reused for the next op's output.

use std::cell::RefCell;
use std::sync::Arc;

use super::TensorImpl;
use crate::storage::unique_mut;

/// Most emptied tensors kept per thread.
const CAPACITY: usize = 128;

thread_local! {
    static EMPTIED: RefCell<Vec<Arc<TensorImpl>>> = const { RefCell::new(Vec::new()) };
}

/// Drops one handle of a tensor; the last handle of a tensor owning its CPU
/// storage alone (no views, no weak references) keeps the allocations.
pub(super) fn release(mut arc: Arc<TensorImpl>) {
    let Some(imp) = unique_mut(&mut arc) else {
        return;
    };
    if imp.base.is_some() || !imp.storage.empty_if_unique() {
        return;
    }
    // May drop other tensors (a grad, a graph): nothing is borrowed here.
    imp.autograd = Default::default();
    crate::spare::keep(&EMPTIED, arc, CAPACITY);
}

/// An emptied tensor from the cache (unique, on the CPU, no base, no
/// autograd state; its storage holds no memory), or `None`.
pub(super) fn take() -> Option<Arc<TensorImpl>> {
    crate::spare::take(&EMPTIED)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::Tensor;

    /// The next op output reuses the last emptied tensor, and nothing of
    /// the dead tensor shows through: values, version, autograd state.
    #[test]
    fn a_reused_tensor_is_fresh() -> crate::Result<()> {
        let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]);
        let a = x.mul(2.0)?;
        a.add_(1.0)?;
        a.requires_grad_(true)?;
        assert_eq!(a.version(), 1);
        let addr = Arc::as_ptr(&a.0);
        drop(a);
        let b = x.add(&x)?;
        assert_eq!(Arc::as_ptr(&b.0), addr, "the emptied tensor was reused");
        assert_eq!(b.version(), 0);
        assert!(!b.requires_grad() && b.grad_fn().is_none() && b.grad_opt().is_none());
        assert_eq!(b.to_vec::<f32>()?, [2.0, 4.0, 6.0, 8.0]);
        assert_eq!(b.storage().nbytes(), 16);
        Ok(())
    }

    /// Storages watched through a weak reference, or shared with a view,
    /// are not kept: they are freed when their last handle goes.
    #[test]
    fn watched_and_shared_storages_are_freed() -> crate::Result<()> {
        let x = Tensor::from_slice(&[1.0f32, 2.0]);
        let a = x.mul(3.0)?;
        let watch = a.storage().downgrade();
        drop(a);
        assert!(!watch.is_alive());
        let b = x.mul(3.0)?;
        let view = b.narrow(0, 0, 1)?;
        let watch = b.storage().downgrade();
        drop(b);
        assert!(watch.is_alive(), "the view still holds the storage");
        drop(view);
        assert!(!watch.is_alive());
        Ok(())
    }
}
