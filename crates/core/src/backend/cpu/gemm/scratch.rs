//! The GEMM's packing buffers: kept per thread between calls (fresh memory
//! would be page-faulted and missed in cache on every call), 64-byte
//! aligned, and those of 256 KiB and more backed by transparent huge pages.
//!
//! Huge pages matter for more than TLB misses: a packed block of B sized
//! to half of L2 spans many 4 KiB pages, and which physical pages it gets
//! decides how its lines spread over L2's sets. On an Ice Lake Xeon the
//! same product ran at 100 or at 135 GFLOP/s from one process to the next
//! on 4 KiB pages; in one 2 MiB page the block is physically contiguous and
//! maps onto the sets evenly every time.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::cell::RefCell;
use std::ptr::NonNull;

/// Buffers at least this big are 2 MiB aligned and advised huge pages.
const HUGE_MIN: usize = 256 << 10;
/// A transparent huge page.
const HUGE_PAGE: usize = 2 << 20;

/// One aligned block of bytes from the system allocator.
struct Block {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a `Block` owns its allocation exclusively; moving it between threads moves that ownership.
unsafe impl Send for Block {}

impl Block {
    /// A zeroed block of at least `bytes`: 2 MiB aligned (whole huge pages,
    /// advised as such) from `HUGE_MIN`, else 64-byte aligned. Aborts as
    /// `Vec` does when the system has no memory for it.
    fn new(bytes: usize) -> Block {
        let (size, align) = if bytes >= HUGE_MIN {
            (bytes.next_multiple_of(HUGE_PAGE), HUGE_PAGE)
        } else {
            (bytes.max(64).next_multiple_of(64), 64)
        };
        let layout = Layout::from_size_align(size, align).unwrap_or_else(|_| handle_alloc_error(Layout::new::<u8>()));
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }).unwrap_or_else(|| handle_alloc_error(layout));
        if align == HUGE_PAGE {
            crate::backend::storage::advise_huge_pages(ptr.as_ptr(), size);
        }
        Block { ptr, layout }
    }

    fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `Block::new` with this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

thread_local! {
    /// This thread's buffers between calls (the largest few).
    static POOL: RefCell<Vec<Block>> = const { RefCell::new(Vec::new()) };
}

/// A scratch area of at least `n` elements of `T`, taken from this thread's
/// pool (a nested call on the same thread gets its own) and returned to it
/// when dropped.
pub(super) struct Scratch<T> {
    block: Option<Block>,
    _t: std::marker::PhantomData<T>,
}

impl<T> Scratch<T> {
    /// Scratch for `n` values of `T`.
    pub(super) fn new(n: usize) -> Self {
        let bytes = n.saturating_mul(std::mem::size_of::<T>()).max(1);
        let pooled = POOL.with(|p| {
            let mut pool = p.borrow_mut();
            let at = pool.iter().position(|b| b.len() >= bytes);
            at.map(|i| pool.swap_remove(i))
        });
        Scratch {
            block: Some(pooled.unwrap_or_else(|| Block::new(bytes))),
            _t: std::marker::PhantomData,
        }
    }

    /// The area's start (aligned to at least 64 bytes).
    pub(super) fn as_mut_ptr(&mut self) -> *mut T {
        self.block
            .as_ref()
            .map_or(std::ptr::null_mut(), |b| b.ptr.as_ptr() as *mut T)
    }
}

impl<T> Drop for Scratch<T> {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            POOL.with(|p| {
                let mut pool = p.borrow_mut();
                pool.push(block);
                // Keep the largest few buffers only.
                if pool.len() > 3 {
                    pool.sort_by_key(|b| std::cmp::Reverse(b.len()));
                    pool.truncate(3);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_is_aligned_sized_and_reused() {
        for n in [1, 100, 70_000, 300_000] {
            let mut s = Scratch::<f32>::new(n);
            let p = s.as_mut_ptr();
            let align = if n * 4 >= HUGE_MIN { HUGE_PAGE } else { 64 };
            assert_eq!(p as usize % align, 0, "n {n}");
            // SAFETY: the area holds n values.
            unsafe { std::ptr::write_bytes(p, 0, n) };
            drop(s);
            let mut again = Scratch::<f32>::new(n);
            assert_eq!(again.as_mut_ptr(), p, "a freed buffer is reused");
        }
    }
}
