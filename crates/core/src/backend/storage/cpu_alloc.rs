//! The CPU caching allocator.
//!
//! Fresh large allocations are page-faulted in by the kernel on first touch,
//! which costs more than an elementwise op over them. Freed blocks of 64 KiB
//! and more are therefore kept in per-size free lists and handed out again
//! (PyTorch's CUDA allocator does the same; its CPU allocator does not, which
//! is why its allocating `a + b` pays the page faults). Blocks of up to
//! 256 bytes (small tensors, scalars, gradients of biases) are kept in short
//! per-thread free lists: a graph of small tensors allocates and frees
//! hundreds of them per step, more than the system allocator's thread cache
//! holds. Other blocks go straight to the system allocator.
//!
//! Fresh blocks of 4 MiB and more ask the kernel for transparent huge pages
//! (`madvise`, where THP is set to `madvise` or `always`): streaming through a
//! large tensor then takes far fewer TLB misses (a row sum of a 64 MiB matrix
//! runs about 5% faster).
//!
//! Statistics (`allocated`, `reserved`, peaks, counts) are kept for every
//! block; allocation counts per thread, added up when read.

use std::alloc::{self, Layout as AllocLayout};
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::{Device, Error, Result};

/// Alignment of CPU buffers of 64 KiB and more (one cache line; enough for AVX-512 loads).
pub const ALIGN: usize = 64;
/// Alignment of blocks below the cache threshold (enough for every dtype).
const SMALL_ALIGN: usize = 16;
/// Blocks at least this big are cached after being freed.
const CACHE_MIN: usize = 64 * 1024;
/// Granularity of cached sizes.
const PAGE: usize = 4096;
/// The cache holds at most this many bytes of free blocks.
const CACHE_LIMIT: usize = 2 << 30;

/// Blocks of at most this many bytes are reused through per-thread free lists.
const POOL_MAX: usize = 256;
/// Most free blocks a thread keeps per size class.
const POOL_DEPTH: usize = 64;

/// Per-thread free lists of small blocks, one per 16-byte size class.
struct SmallPool {
    lists: [Vec<usize>; POOL_MAX / SMALL_ALIGN],
}

impl Drop for SmallPool {
    fn drop(&mut self) {
        for (i, list) in self.lists.iter().enumerate() {
            for &addr in list {
                // SAFETY: the block was allocated with this class's layout in
                // `CpuBuffer::allocate`, and the pool was its only owner.
                unsafe { alloc::dealloc(addr as *mut u8, layout_of_allocated((i + 1) * SMALL_ALIGN)) };
            }
        }
    }
}

thread_local! {
    static POOL: std::cell::RefCell<SmallPool> = const {
        std::cell::RefCell::new(SmallPool { lists: [const { Vec::new() }; POOL_MAX / SMALL_ALIGN] })
    };
}

/// A free block of `class` bytes from this thread's pool.
fn pool_take(class: usize) -> Option<NonNull<u8>> {
    POOL.try_with(|p| p.borrow_mut().lists[class / SMALL_ALIGN - 1].pop())
        .ok()
        .flatten()
        .and_then(|a| NonNull::new(a as *mut u8))
}

/// Keeps a freed block of `class` bytes in this thread's pool; false when
/// the pool is full (or gone, at thread exit).
fn pool_put(class: usize, ptr: NonNull<u8>) -> bool {
    POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        let list = &mut p.lists[class / SMALL_ALIGN - 1];
        if list.len() < POOL_DEPTH {
            list.push(ptr.as_ptr() as usize);
            true
        } else {
            false
        }
    })
    .unwrap_or(false)
}

/// A cached free block of `class` bytes (64 KiB and more), counted as a cache hit.
fn cache_take(class: usize) -> Option<NonNull<u8>> {
    let addr = ALLOC.free.lock().unwrap().get_mut(&class).and_then(|v| v.pop())?;
    ALLOC.cached.fetch_sub(class, Ordering::Relaxed);
    ALLOC.hits.fetch_add(1, Ordering::Relaxed);
    NonNull::new(addr as *mut u8)
}

/// Fresh blocks at least this big ask the kernel for transparent huge pages.
const HUGE_MIN: usize = 4 << 20;

/// Asks for transparent huge pages over the whole pages of a block (fewer
/// TLB misses when streaming through it; a no-op where THP is off).
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        let start = (ptr as usize).next_multiple_of(PAGE);
        let end = (ptr as usize + len) / PAGE * PAGE;
        if end > start {
            // SAFETY: [start, end) lies inside the block just allocated (start is
            // rounded up, end down, to pages within [ptr, ptr + len)); the
            // advice changes no contents and no mapping we rely on.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

/// Counters of the CPU allocator (bytes unless named otherwise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in live buffers.
    pub allocated: usize,
    /// Highest `allocated` since the last [`reset_peak_memory_stats`].
    pub peak_allocated: usize,
    /// Bytes held from the system: live buffers plus cached free blocks.
    pub reserved: usize,
    /// Bytes in cached free blocks.
    pub cached: usize,
    /// Number of allocations served.
    pub num_allocs: usize,
    /// How many of them were served from the cache.
    pub num_cache_hits: usize,
}

struct Allocator {
    free: Mutex<BTreeMap<usize, Vec<usize>>>,
    allocated: AtomicUsize,
    peak: AtomicUsize,
    cached: AtomicUsize,
    hits: AtomicUsize,
}

static ALLOC: Allocator = Allocator {
    free: Mutex::new(BTreeMap::new()),
    allocated: AtomicUsize::new(0),
    peak: AtomicUsize::new(0),
    cached: AtomicUsize::new(0),
    hits: AtomicUsize::new(0),
};

/// Allocation counts are kept per thread (one shared counter would be one
/// more read-modify-write on every tensor) and added up by `memory_stats`:
/// the live threads' counters, plus what exited threads counted.
struct AllocCounts {
    live: Mutex<Vec<Arc<AtomicUsize>>>,
    retired: AtomicUsize,
}

static COUNTS: AllocCounts = AllocCounts {
    live: Mutex::new(Vec::new()),
    retired: AtomicUsize::new(0),
};

/// This thread's allocation counter, registered in [`COUNTS`] while it lives.
struct ThreadCount(Arc<AtomicUsize>);

impl ThreadCount {
    fn register() -> ThreadCount {
        let c = Arc::new(AtomicUsize::new(0));
        COUNTS.live.lock().unwrap_or_else(|e| e.into_inner()).push(c.clone());
        ThreadCount(c)
    }
}

impl Drop for ThreadCount {
    fn drop(&mut self) {
        // Under the lock, so a reader never sees the count twice or not at all.
        let mut live = COUNTS.live.lock().unwrap_or_else(|e| e.into_inner());
        COUNTS
            .retired
            .fetch_add(self.0.load(Ordering::Relaxed), Ordering::Relaxed);
        live.retain(|c| !Arc::ptr_eq(c, &self.0));
    }
}

thread_local! {
    static THREAD_COUNT: ThreadCount = ThreadCount::register();
}

/// Counts one allocation on this thread's counter (only this thread writes
/// it: a plain load and store, no locked instruction).
fn count_alloc() {
    let counted = THREAD_COUNT.try_with(|c| c.0.store(c.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed));
    if counted.is_err() {
        // At thread exit: straight into the exited threads' total.
        COUNTS.retired.fetch_add(1, Ordering::Relaxed);
    }
}

/// Allocations served so far, on every thread.
fn num_allocs() -> usize {
    let live = COUNTS.live.lock().unwrap_or_else(|e| e.into_inner());
    live.iter().map(|c| c.load(Ordering::Relaxed)).sum::<usize>() + COUNTS.retired.load(Ordering::Relaxed)
}

/// The size class of a request: whole pages from 64 KiB up, else a multiple
/// of 16 bytes (at least 16); `None` when rounding up overflows.
fn class_of(nbytes: usize) -> Option<usize> {
    if nbytes >= CACHE_MIN {
        nbytes.div_ceil(PAGE).checked_mul(PAGE)
    } else {
        // At least the alignment: smaller requests would take the system
        // allocator's slow aligned path.
        Some(nbytes.max(1).next_multiple_of(SMALL_ALIGN))
    }
}

/// Small blocks take the system allocator's natural 16-byte alignment (its
/// fast thread-cached path; over-aligning them costs a slow `memalign` per
/// tensor); cached blocks are 64-byte aligned for whole cache lines. `None`
/// for a size the allocator cannot describe (over `isize::MAX` bytes).
fn layout_of(class: usize) -> Option<AllocLayout> {
    let align = if class >= CACHE_MIN { ALIGN } else { SMALL_ALIGN };
    AllocLayout::from_size_align(class, align).ok()
}

/// The layout of a class that was allocated before (so it is valid).
fn layout_of_allocated(class: usize) -> AllocLayout {
    layout_of(class).expect("a class that was allocated has a valid layout")
}

/// The error for a request the allocator cannot serve.
fn out_of_memory(nbytes: usize) -> Error {
    Error::OutOfMemory {
        op: "allocate",
        nbytes,
        device: Device::Cpu,
    }
}

/// A block of host memory from the caching allocator; returned to it on drop.
///
/// Every byte of a `CpuBuffer` is initialised: the public constructors zero
/// or copy, and the crate's kernels write every byte of the uninitialised
/// output buffers they are given before anything reads them.
pub struct CpuBuffer {
    ptr: NonNull<u8>,
    nbytes: usize,
    class: usize,
    /// For memory the allocator does not own (a file's private mapping):
    /// what keeps it alive. Such a buffer is not counted in the memory
    /// statistics and is not returned to the allocator.
    owner: Option<Arc<dyn Send + Sync>>,
}

// The owner of external memory is itself Send + Sync.
// SAFETY: the buffer owns its block exclusively (for external memory, by
// `from_external`'s contract), and every access to the bytes goes through
// the owning storage's RwLock, so moving it across threads cannot race.
unsafe impl Send for CpuBuffer {}
// SAFETY: as for Send: shared references only read, under the storage's lock.
unsafe impl Sync for CpuBuffer {}

impl CpuBuffer {
    /// `nbytes` of zeroed memory, or [`Error::OutOfMemory`] (with the byte
    /// count) when the system cannot provide them.
    ///
    /// ```
    /// use ferrotorch_core::backend::storage::CpuBuffer;
    /// assert_eq!(CpuBuffer::zeroed(8)?.bytes(), &[0u8; 8]);
    /// assert!(CpuBuffer::zeroed(usize::MAX).is_err());
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn zeroed(nbytes: usize) -> Result<CpuBuffer> {
        CpuBuffer::allocate(nbytes, true)
    }

    /// A buffer holding a copy of `bytes` ([`Error::OutOfMemory`] when it cannot be allocated).
    pub fn from_bytes(bytes: &[u8]) -> Result<CpuBuffer> {
        let buf = CpuBuffer::allocate(bytes.len(), false)?;
        // SAFETY: the fresh block holds at least bytes.len() bytes and cannot
        // overlap `bytes`, which is borrowed memory that was allocated before.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.as_ptr(), bytes.len()) };
        Ok(buf)
    }

    /// `nbytes` of uninitialised memory for an output a kernel is about to write.
    ///
    /// # Safety
    ///
    /// Every one of the `nbytes` bytes must be written before the buffer is
    /// read ([`CpuBuffer::bytes`], or a tensor over it read by a kernel).
    pub(crate) unsafe fn uninit(nbytes: usize) -> Result<CpuBuffer> {
        CpuBuffer::allocate(nbytes, false)
    }

    /// A block of `nbytes`, zeroed when `zeroed`, from the free lists or the
    /// system allocator; the error when neither has it.
    fn allocate(nbytes: usize, zeroed: bool) -> Result<CpuBuffer> {
        let class = class_of(nbytes).ok_or_else(|| out_of_memory(nbytes))?;
        let reused = if class >= CACHE_MIN {
            cache_take(class)
        } else if class <= POOL_MAX {
            pool_take(class)
        } else {
            None
        };
        let ptr = match reused {
            Some(ptr) => {
                if zeroed {
                    // SAFETY: a cached block of this class holds `class >= nbytes` bytes.
                    unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, nbytes) };
                }
                ptr
            }
            None => {
                let layout = layout_of(class).ok_or_else(|| out_of_memory(nbytes))?;
                // SAFETY: `layout` has a non-zero size (classes are at least 16 bytes).
                let raw = unsafe {
                    if zeroed {
                        alloc::alloc_zeroed(layout)
                    } else {
                        alloc::alloc(layout)
                    }
                };
                let ptr = NonNull::new(raw).ok_or_else(|| out_of_memory(nbytes))?;
                if class >= HUGE_MIN {
                    advise_huge_pages(raw, class);
                }
                ptr
            }
        };
        count_alloc();
        let now = ALLOC.allocated.fetch_add(class, Ordering::Relaxed) + class;
        // A plain load first: the read-modify-write only when a new peak is set.
        if now > ALLOC.peak.load(Ordering::Relaxed) {
            ALLOC.peak.fetch_max(now, Ordering::Relaxed);
        }
        Ok(CpuBuffer {
            ptr,
            nbytes,
            class,
            owner: None,
        })
    }

    /// A buffer over `nbytes` of memory the allocator does not own, kept
    /// alive by `owner` (dropped with the buffer): how a tensor borrows a
    /// checkpoint file's memory map instead of copying it. The memory is
    /// not counted in [`memory_stats`].
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for reads and writes of `nbytes` initialised
    /// bytes for as long as `owner` lives (a private, copy-on-write file
    /// mapping is: writes go to private pages, never to the file), and
    /// nothing else may read or write those bytes while the buffer exists
    /// (the owning storage's lock then orders every access). Tensors of a
    /// dtype must find its alignment there: `ptr` aligned to the element
    /// size of every dtype that will view the buffer.
    pub unsafe fn from_external(ptr: NonNull<u8>, nbytes: usize, owner: Arc<dyn Send + Sync>) -> CpuBuffer {
        CpuBuffer {
            ptr,
            nbytes,
            class: 0,
            owner: Some(owner),
        }
    }

    /// Whether the memory belongs to something else (see
    /// [`from_external`](Self::from_external)).
    pub fn is_external(&self) -> bool {
        self.owner.is_some()
    }

    /// Size in bytes as requested.
    pub fn len(&self) -> usize {
        self.nbytes
    }

    /// True for a zero-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.nbytes == 0
    }

    /// Start of the block.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The bytes of the buffer.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the block holds `nbytes` bytes, all initialised (see the
        // type's documentation: public constructors zero or copy, and
        // `uninit`'s contract has kernels write every byte first); the
        // borrow of `self` keeps the block alive.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.nbytes) }
    }
}

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        if self.owner.is_some() {
            // Borrowed memory: the owner frees it when its last user goes.
            return;
        }
        ALLOC.allocated.fetch_sub(self.class, Ordering::Relaxed);
        if self.class >= CACHE_MIN && ALLOC.cached.load(Ordering::Relaxed) + self.class <= CACHE_LIMIT {
            ALLOC.cached.fetch_add(self.class, Ordering::Relaxed);
            ALLOC
                .free
                .lock()
                .unwrap()
                .entry(self.class)
                .or_default()
                .push(self.ptr.as_ptr() as usize);
            return;
        }
        if self.class <= POOL_MAX && pool_put(self.class, self.ptr) {
            return;
        }
        // SAFETY: the block was allocated with this class's layout in
        // `allocate` and is owned by this buffer alone; it is freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout_of_allocated(self.class)) };
    }
}

/// Current CPU allocator statistics.
pub fn memory_stats() -> MemoryStats {
    let allocated = ALLOC.allocated.load(Ordering::Relaxed);
    let cached = ALLOC.cached.load(Ordering::Relaxed);
    MemoryStats {
        allocated,
        peak_allocated: ALLOC.peak.load(Ordering::Relaxed),
        reserved: allocated + cached,
        cached,
        num_allocs: num_allocs(),
        num_cache_hits: ALLOC.hits.load(Ordering::Relaxed),
    }
}

/// Resets `peak_allocated` to the current `allocated`.
pub fn reset_peak_memory_stats() {
    ALLOC
        .peak
        .store(ALLOC.allocated.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// Returns every cached free block to the system.
pub fn empty_cache() {
    let blocks: Vec<(usize, Vec<usize>)> = std::mem::take(&mut *ALLOC.free.lock().unwrap()).into_iter().collect();
    for (class, addrs) in blocks {
        for a in addrs {
            ALLOC.cached.fetch_sub(class, Ordering::Relaxed);
            // SAFETY: every cached block was allocated with its class's layout,
            // and taking it out of the free lists made this its only owner.
            unsafe { alloc::dealloc(a as *mut u8, layout_of_allocated(class)) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_reused_and_zeroed_on_request() {
        let a = CpuBuffer::zeroed(1 << 20).unwrap();
        let addr = a.as_ptr() as usize;
        // SAFETY: the buffer holds 1 << 20 bytes and no one else uses it.
        unsafe { std::ptr::write_bytes(a.as_ptr(), 7, 1 << 20) };
        drop(a);
        let b = CpuBuffer::zeroed(1 << 20).unwrap();
        // Another test thread may have taken the block; only check contents.
        assert!(b.bytes().iter().all(|&x| x == 0));
        let _ = addr;
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
    }

    /// Counts taken on other threads, live or exited, are in the total.
    #[test]
    fn allocation_counts_add_up_across_threads() {
        let before = memory_stats().num_allocs;
        std::thread::spawn(|| {
            for _ in 0..100 {
                drop(CpuBuffer::zeroed(8).unwrap());
            }
        })
        .join()
        .expect("allocating thread");
        for _ in 0..10 {
            drop(CpuBuffer::zeroed(8).unwrap());
        }
        // Other tests may allocate meanwhile: at least ours are counted.
        assert!(memory_stats().num_allocs >= before + 110);
    }

    #[test]
    fn small_blocks_are_reused_per_thread_and_zeroed_on_request() {
        let a = CpuBuffer::zeroed(20).unwrap();
        let addr = a.as_ptr() as usize;
        // SAFETY: the buffer holds 20 bytes and no one else uses it.
        unsafe { std::ptr::write_bytes(a.as_ptr(), 7, 20) };
        drop(a);
        // The pool is this thread's: the block comes straight back.
        let b = CpuBuffer::zeroed(24).unwrap();
        assert_eq!(b.as_ptr() as usize, addr);
        assert!(b.bytes().iter().all(|&x| x == 0));
        assert_eq!(b.len(), 24);
        assert_eq!(b.as_ptr() as usize % SMALL_ALIGN, 0);
        // Blocks of another size class are not handed out for it.
        drop(b);
        let c = CpuBuffer::zeroed(40).unwrap();
        assert_ne!(c.as_ptr() as usize, addr);
    }

    /// Requests no system can serve are errors with the byte count, not aborts.
    #[test]
    fn impossible_requests_are_out_of_memory_errors() {
        let before = memory_stats();
        for nbytes in [usize::MAX, isize::MAX as usize, 1 << 47, (1 << 47) + 3] {
            match CpuBuffer::zeroed(nbytes) {
                Err(Error::OutOfMemory { nbytes: n, .. }) => assert_eq!(n, nbytes),
                Err(e) => panic!("{nbytes} bytes: unexpected error {e}"),
                Ok(_) => panic!("{nbytes} bytes were allocated"),
            }
        }
        let e = CpuBuffer::zeroed(1 << 47).err().expect("an error");
        assert_eq!(
            e.to_string(),
            "allocate: not enough memory: tried to allocate 140737488355328 bytes on cpu"
        );
        // Failed requests are not counted as allocated.
        assert!(memory_stats().allocated <= before.allocated + (1 << 30));
    }
}
