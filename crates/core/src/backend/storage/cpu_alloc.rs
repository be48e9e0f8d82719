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
use std::cell::Cell;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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
pub(crate) fn advise_huge_pages(ptr: *mut u8, len: usize) {
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
///
/// Byte figures count whole size classes (a 20-byte request holds a
/// 32-byte block), as PyTorch's caching allocators count their blocks.
/// Memory borrowed from a file mapping is not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in live buffers (`torch.cuda.memory_allocated`'s figure).
    pub allocated: usize,
    /// Highest `allocated` since the last [`reset_peak_memory_stats`].
    pub peak_allocated: usize,
    /// Bytes held from the system: live buffers plus cached free blocks.
    pub reserved: usize,
    /// Highest `reserved` since the last [`reset_peak_memory_stats`].
    pub peak_reserved: usize,
    /// Bytes in cached free blocks.
    pub cached: usize,
    /// Number of allocations served.
    pub num_allocs: usize,
    /// Number of buffers freed.
    pub num_frees: usize,
    /// How many of the allocations were served from the cache.
    pub num_cache_hits: usize,
    /// Bytes allocated in total (every allocation's block, summed).
    pub total_allocated: u64,
    /// Bytes freed in total.
    pub total_freed: u64,
    /// Requests that failed for want of memory.
    pub num_ooms: usize,
}

impl MemoryStats {
    /// Buffers alive now (`num_allocs - num_frees`; buffers allocated
    /// before a thread's counters were read may make it lag by a few).
    pub fn active_allocs(&self) -> usize {
        self.num_allocs.saturating_sub(self.num_frees)
    }
}

struct Allocator {
    free: Mutex<BTreeMap<usize, Vec<usize>>>,
    allocated: AtomicUsize,
    peak: AtomicUsize,
    peak_reserved: AtomicUsize,
    cached: AtomicUsize,
    hits: AtomicUsize,
    ooms: AtomicUsize,
}

static ALLOC: Allocator = Allocator {
    free: Mutex::new(BTreeMap::new()),
    allocated: AtomicUsize::new(0),
    peak: AtomicUsize::new(0),
    peak_reserved: AtomicUsize::new(0),
    cached: AtomicUsize::new(0),
    hits: AtomicUsize::new(0),
    ooms: AtomicUsize::new(0),
};

/// Allocation counts and byte totals are kept per thread (shared counters
/// would be more read-modify-writes on every tensor) and added up by
/// `memory_stats`: the live threads' counters, plus what exited threads
/// counted.
struct AllocCounts {
    live: Mutex<Vec<Arc<ThreadCounters>>>,
    retired: ThreadCounters,
}

/// One thread's counters (only that thread writes them).
#[derive(Default)]
struct ThreadCounters {
    allocs: AtomicUsize,
    frees: AtomicUsize,
    bytes_allocated: AtomicU64,
    bytes_freed: AtomicU64,
}

impl ThreadCounters {
    const fn new() -> Self {
        ThreadCounters {
            allocs: AtomicUsize::new(0),
            frees: AtomicUsize::new(0),
            bytes_allocated: AtomicU64::new(0),
            bytes_freed: AtomicU64::new(0),
        }
    }

    /// Adds `other`'s counts with read-modify-writes (the exited threads' total).
    fn absorb(&self, other: &ThreadCounters) {
        self.allocs
            .fetch_add(other.allocs.load(Ordering::Relaxed), Ordering::Relaxed);
        self.frees
            .fetch_add(other.frees.load(Ordering::Relaxed), Ordering::Relaxed);
        self.bytes_allocated
            .fetch_add(other.bytes_allocated.load(Ordering::Relaxed), Ordering::Relaxed);
        self.bytes_freed
            .fetch_add(other.bytes_freed.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

static COUNTS: AllocCounts = AllocCounts {
    live: Mutex::new(Vec::new()),
    retired: ThreadCounters::new(),
};

/// This thread's counters, registered in [`COUNTS`] while it lives.
struct ThreadCount(Arc<ThreadCounters>);

impl ThreadCount {
    fn register() -> ThreadCount {
        let c = Arc::new(ThreadCounters::default());
        COUNTS.live.lock().unwrap_or_else(|e| e.into_inner()).push(c.clone());
        ThreadCount(c)
    }
}

impl Drop for ThreadCount {
    fn drop(&mut self) {
        // Under the lock, so a reader never sees the counts twice or not at all.
        let mut live = COUNTS.live.lock().unwrap_or_else(|e| e.into_inner());
        COUNTS.retired.absorb(&self.0);
        live.retain(|c| !Arc::ptr_eq(c, &self.0));
    }
}

thread_local! {
    static THREAD_COUNT: ThreadCount = ThreadCount::register();
    /// Whether this thread's allocations and frees are also added to
    /// [`TRACE_BYTES`] (while a profiler with `profile_memory` runs on it).
    static TRACE_ON: Cell<bool> = const { Cell::new(false) };
    /// Bytes allocated and freed on this thread while tracing was on.
    static TRACE_BYTES: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Counts one allocation of `class` bytes on this thread.
fn count_alloc(class: usize) {
    let counted = THREAD_COUNT.try_with(|c| {
        let c = &c.0;
        // Only this thread writes them: plain loads and stores, no locked instruction.
        c.allocs.store(c.allocs.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        c.bytes_allocated.store(
            c.bytes_allocated.load(Ordering::Relaxed) + class as u64,
            Ordering::Relaxed,
        );
    });
    if counted.is_err() {
        // At thread exit: straight into the exited threads' total.
        COUNTS.retired.allocs.fetch_add(1, Ordering::Relaxed);
        COUNTS
            .retired
            .bytes_allocated
            .fetch_add(class as u64, Ordering::Relaxed);
    }
    trace(class, true);
}

/// Counts one freed block of `class` bytes on this thread.
fn count_free(class: usize) {
    let counted = THREAD_COUNT.try_with(|c| {
        let c = &c.0;
        c.frees.store(c.frees.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        c.bytes_freed
            .store(c.bytes_freed.load(Ordering::Relaxed) + class as u64, Ordering::Relaxed);
    });
    if counted.is_err() {
        COUNTS.retired.frees.fetch_add(1, Ordering::Relaxed);
        COUNTS.retired.bytes_freed.fetch_add(class as u64, Ordering::Relaxed);
    }
    trace(class, false);
}

/// Adds a block to this thread's traced bytes when tracing is on.
#[inline]
fn trace(class: usize, allocated: bool) {
    if cfg!(not(ferrotorch_no_profiler)) && TRACE_ON.try_with(Cell::get).unwrap_or(false) {
        TRACE_BYTES.with(|t| {
            let (a, f) = t.get();
            t.set(if allocated {
                (a + class as u64, f)
            } else {
                (a, f + class as u64)
            });
        });
    }
}

/// Switches the tracing of this thread's allocated and freed bytes on or
/// off (the profiler's `profile_memory`); returns the previous setting.
pub(crate) fn set_thread_memory_tracing(on: bool) -> bool {
    TRACE_ON.with(|t| t.replace(on))
}

/// Bytes allocated and freed on this thread while tracing was on.
pub(crate) fn thread_traced_bytes() -> (u64, u64) {
    TRACE_BYTES.with(Cell::get)
}

/// The per-thread counters added up: (allocations, frees, bytes allocated, bytes freed).
fn counter_totals() -> (usize, usize, u64, u64) {
    let live = COUNTS.live.lock().unwrap_or_else(|e| e.into_inner());
    let r = &COUNTS.retired;
    let mut t = (
        r.allocs.load(Ordering::Relaxed),
        r.frees.load(Ordering::Relaxed),
        r.bytes_allocated.load(Ordering::Relaxed),
        r.bytes_freed.load(Ordering::Relaxed),
    );
    for c in live.iter() {
        t.0 += c.allocs.load(Ordering::Relaxed);
        t.1 += c.frees.load(Ordering::Relaxed);
        t.2 += c.bytes_allocated.load(Ordering::Relaxed);
        t.3 += c.bytes_freed.load(Ordering::Relaxed);
    }
    t
}

/// The size class of a request: whole pages from 64 KiB up, else a multiple
/// of 16 bytes (at least 16); `None` when rounding up overflows.
pub(crate) fn class_of(nbytes: usize) -> Option<usize> {
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
    ALLOC.ooms.fetch_add(1, Ordering::Relaxed);
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
        count_alloc(class);
        let now = ALLOC.allocated.fetch_add(class, Ordering::Relaxed) + class;
        // A plain load first: the read-modify-write only when a new peak is set.
        if now > ALLOC.peak.load(Ordering::Relaxed) {
            ALLOC.peak.fetch_max(now, Ordering::Relaxed);
        }
        let reserved = now + ALLOC.cached.load(Ordering::Relaxed);
        if reserved > ALLOC.peak_reserved.load(Ordering::Relaxed) {
            ALLOC.peak_reserved.fetch_max(reserved, Ordering::Relaxed);
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

    /// The bytes of the buffer, for writing. Crate-private: a bool
    /// storage's bytes must stay 0 or 1, which
    /// [`Storage::with_cpu_bytes_mut`](super::Storage::with_cpu_bytes_mut)
    /// restores before anyone else can read them.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `bytes`, and `&mut self` (the storage's write lock)
        // excludes every other reader and writer for the borrow; external
        // memory is valid for writes by `from_external`'s contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.nbytes) }
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
        count_free(self.class);
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
///
/// ```
/// use ferrotorch_core::{Tensor, memory_stats};
/// let before = memory_stats();
/// let t = Tensor::zeros([1024, 1024])?;
/// let after = memory_stats();
/// assert!(after.total_allocated >= before.total_allocated + 4 << 20);
/// assert!(after.peak_allocated >= 4 << 20);
/// # drop(t);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn memory_stats() -> MemoryStats {
    let allocated = ALLOC.allocated.load(Ordering::Relaxed);
    let cached = ALLOC.cached.load(Ordering::Relaxed);
    let (num_allocs, num_frees, total_allocated, total_freed) = counter_totals();
    MemoryStats {
        allocated,
        peak_allocated: ALLOC.peak.load(Ordering::Relaxed),
        reserved: allocated + cached,
        peak_reserved: ALLOC.peak_reserved.load(Ordering::Relaxed).max(allocated + cached),
        cached,
        num_allocs,
        num_frees,
        num_cache_hits: ALLOC.hits.load(Ordering::Relaxed),
        total_allocated,
        total_freed,
        num_ooms: ALLOC.ooms.load(Ordering::Relaxed),
    }
}

/// Bytes in live CPU buffers (`torch.cuda.memory_allocated`'s figure for
/// the CPU allocator).
pub fn memory_allocated() -> usize {
    ALLOC.allocated.load(Ordering::Relaxed)
}

/// The highest [`memory_allocated`] since the last [`reset_peak_memory_stats`].
pub fn max_memory_allocated() -> usize {
    ALLOC.peak.load(Ordering::Relaxed)
}

/// Bytes held from the system: live buffers plus cached free blocks.
pub fn memory_reserved() -> usize {
    ALLOC.allocated.load(Ordering::Relaxed) + ALLOC.cached.load(Ordering::Relaxed)
}

/// The highest [`memory_reserved`] since the last [`reset_peak_memory_stats`].
pub fn max_memory_reserved() -> usize {
    ALLOC.peak_reserved.load(Ordering::Relaxed).max(memory_reserved())
}

/// Resets `peak_allocated` and `peak_reserved` to the current figures.
pub fn reset_peak_memory_stats() {
    ALLOC
        .peak
        .store(ALLOC.allocated.load(Ordering::Relaxed), Ordering::Relaxed);
    ALLOC.peak_reserved.store(memory_reserved(), Ordering::Relaxed);
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
