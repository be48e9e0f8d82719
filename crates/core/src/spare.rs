//! Per-thread lists of spare allocations: boxes emptied when their owner
//! died, kept for the next owner of the same kind (graphs of small tensors
//! free hundreds of them in a burst, more than the system allocator's small
//! per-size caches absorb).

use std::cell::RefCell;
use std::thread::LocalKey;

/// A thread-local list of spare `T`s.
pub(crate) type SpareList<T> = LocalKey<RefCell<Vec<T>>>;

/// Keeps `item` in this thread's `list` while it holds fewer than
/// `capacity`; drops it otherwise (or at thread exit, when the list is gone).
#[inline]
pub(crate) fn keep<T: 'static>(list: &'static SpareList<T>, item: T, capacity: usize) {
    let rejected = list
        .try_with(|l| {
            let mut l = l.borrow_mut();
            if l.len() < capacity {
                l.push(item);
                None
            } else {
                Some(item)
            }
        })
        .ok()
        .flatten();
    // Dropped outside the borrow (a drop may reach this list again).
    drop(rejected);
}

/// The most recently kept item of this thread's `list`, if any.
#[inline]
pub(crate) fn take<T: 'static>(list: &'static SpareList<T>) -> Option<T> {
    list.try_with(|l| l.borrow_mut().pop()).ok().flatten()
}
