//! Storage: the bytes behind tensors, shared by every view of them.

mod cpu_alloc;

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

pub use cpu_alloc::{CpuBuffer, MemoryStats, empty_cache, memory_stats, reset_peak_memory_stats};

use crate::Device;

/// Memory owned by a non-CPU backend (a CUDA allocation, a toy device's Vec).
pub trait DeviceBuffer: Any + Send + Sync {
    /// Size in bytes.
    fn len(&self) -> usize;
    /// True for a zero-byte buffer.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// For downcasting in the backend's kernels.
    fn as_any(&self) -> &dyn Any;
    /// For downcasting in the backend's kernels.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// The memory of one storage.
pub enum Buffer {
    /// Host memory.
    Cpu(CpuBuffer),
    /// No memory at all (meta tensors).
    Meta,
    /// Memory of another backend.
    Device(Box<dyn DeviceBuffer>),
}

impl Buffer {
    /// The CPU buffer, if this is host memory.
    pub fn as_cpu(&self) -> Option<&CpuBuffer> {
        match self {
            Buffer::Cpu(b) => Some(b),
            _ => None,
        }
    }

    /// The backend buffer downcast to `T`, if it is one.
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        match self {
            Buffer::Device(b) => b.as_any().downcast_ref(),
            _ => None,
        }
    }

    /// The backend buffer downcast to `T`, mutably.
    pub fn downcast_mut<T: 'static>(&mut self) -> Option<&mut T> {
        match self {
            Buffer::Device(b) => b.as_any_mut().downcast_mut(),
            _ => None,
        }
    }
}

/// The contents of `arc` for writing when no other handle, strong or weak,
/// exists; `None` otherwise. A plain load of the strong count first turns
/// away shared handles without a locked instruction; the last handle then
/// pays `Arc::get_mut`'s compare-and-swap, which also excludes a weak
/// handle upgrading at the same moment.
pub(crate) fn unique_mut<T>(arc: &mut Arc<T>) -> Option<&mut T> {
    if Arc::strong_count(arc) != 1 {
        return None;
    }
    Arc::get_mut(arc)
}

struct StorageImpl {
    device: Device,
    nbytes: usize,
    /// The version counter of every tensor on this storage.
    version: AtomicU64,
    data: RwLock<Buffer>,
}

/// Reference-counted bytes on one device. Cloning a `Storage` shares it.
///
/// Readers and writers go through a lock, so concurrent use from several
/// threads is safe; kernels take the locks of all operands of one call in a
/// fixed order (see `cpu::access`), so calls never deadlock each other.
#[derive(Clone)]
pub struct Storage(Arc<StorageImpl>);

impl Storage {
    /// Wraps a buffer of `nbytes` bytes on `device`.
    pub fn new(device: Device, nbytes: usize, buffer: Buffer) -> Storage {
        Storage(Arc::new(StorageImpl {
            device,
            nbytes,
            version: AtomicU64::new(0),
            data: RwLock::new(buffer),
        }))
    }

    /// The version of the data: the number of in-place writes so far.
    pub fn version(&self) -> u64 {
        self.0.version.load(Ordering::Relaxed)
    }

    /// Records one in-place write.
    pub fn bump_version(&self) {
        self.0.version.fetch_add(1, Ordering::Relaxed);
    }

    /// Fresh host memory of `nbytes`, zeroed when `zeroed`.
    pub fn cpu(nbytes: usize, zeroed: bool) -> Storage {
        Storage::new(Device::Cpu, nbytes, Buffer::Cpu(CpuBuffer::new(nbytes, zeroed)))
    }

    /// Host memory holding a copy of `bytes`.
    pub fn cpu_from_bytes(bytes: &[u8]) -> Storage {
        let buf = CpuBuffer::new(bytes.len(), false);
        // SAFETY: the new buffer has exactly bytes.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.as_ptr(), bytes.len()) };
        Storage::new(Device::Cpu, bytes.len(), Buffer::Cpu(buf))
    }

    /// The device of the memory.
    pub fn device(&self) -> Device {
        self.0.device
    }

    /// Size in bytes.
    pub fn nbytes(&self) -> usize {
        self.0.nbytes
    }

    /// Shared access to the buffer.
    pub fn read(&self) -> RwLockReadGuard<'_, Buffer> {
        self.0.data.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Exclusive access to the buffer.
    pub fn write(&self) -> RwLockWriteGuard<'_, Buffer> {
        self.0.data.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Shared access if it is free now (`None` when a writer holds or waits
    /// for the lock).
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, Buffer>> {
        match self.0.data.try_read() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Exclusive access if it is free now (`None` when anyone holds the lock).
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, Buffer>> {
        match self.0.data.try_write() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Frees the memory of host storage that no one else holds (no other
    /// handle, no weak reference), keeping the storage itself for
    /// [`Storage::refill_cpu`]. Returns false (nothing done) otherwise.
    pub(crate) fn empty_if_unique(&mut self) -> bool {
        match unique_mut(&mut self.0) {
            Some(st) if st.device == Device::Cpu => {
                *st.data.get_mut().unwrap_or_else(|e| e.into_inner()) = Buffer::Meta;
                true
            }
            _ => false,
        }
    }

    /// Gives a storage emptied by [`Storage::empty_if_unique`] fresh host
    /// memory of `nbytes` (uninitialised) and version 0, as [`Storage::cpu`]
    /// would. Returns false (nothing done) if the storage is shared.
    pub(crate) fn refill_cpu(&mut self, nbytes: usize) -> bool {
        let Some(st) = unique_mut(&mut self.0) else {
            return false;
        };
        debug_assert!(st.device == Device::Cpu);
        st.nbytes = nbytes;
        *st.version.get_mut() = 0;
        *st.data.get_mut().unwrap_or_else(|e| e.into_inner()) = Buffer::Cpu(CpuBuffer::new(nbytes, false));
        true
    }

    /// True when both handles share the same memory.
    pub fn same(&self, other: &Storage) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// An address identifying this storage (for lock ordering and alias checks).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Number of handles (tensors and views) sharing the storage.
    pub fn ref_count(&self) -> usize {
        Arc::strong_count(&self.0)
    }

    /// A weak reference that does not keep the memory alive.
    pub fn downgrade(&self) -> WeakStorage {
        WeakStorage(Arc::downgrade(&self.0))
    }
}

/// A weak reference to a [`Storage`] (to observe when memory is freed).
#[derive(Clone)]
pub struct WeakStorage(std::sync::Weak<StorageImpl>);

impl WeakStorage {
    /// Whether the storage still exists.
    pub fn is_alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Storage({} bytes on {})", self.nbytes(), self.device())
    }
}
