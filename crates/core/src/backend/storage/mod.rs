//! Storage: the bytes behind tensors, shared by every view of them.

mod cpu_alloc;
pub(crate) mod meta_ledger;

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

pub use cpu_alloc::{
    CpuBuffer, MemoryStats, empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated, memory_reserved,
    memory_stats, reset_peak_memory_stats,
};
pub(crate) use cpu_alloc::{advise_huge_pages, set_thread_memory_tracing, thread_traced_bytes};

use crate::{DType, Device, Error, Result};

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
    /// Whether bool tensors live on this storage. Bool kernels read bytes as
    /// Rust `bool`s, for which any byte but 0 and 1 is undefined behaviour,
    /// so a storage holds either bool tensors only (whose writes keep every
    /// byte 0 or 1) or no bool tensor at all.
    bool_typed: bool,
    /// Whether in-place writes are refused (the per-thread cached scalars
    /// that every `x * 2.0` shares).
    read_only: bool,
    /// The version counter of every tensor on this storage.
    version: AtomicU64,
    data: RwLock<Buffer>,
    /// Bytes this meta storage charged to a memory prediction running on
    /// its thread (`memory::predict_peak_memory`); 0 otherwise.
    meta_charge: usize,
}

impl Drop for StorageImpl {
    fn drop(&mut self) {
        if self.meta_charge > 0 {
            meta_ledger::release(self.meta_charge);
        }
    }
}

/// Reference-counted bytes on one device. Cloning a `Storage` shares it.
///
/// Readers and writers go through a lock, so concurrent use from several
/// threads is safe; kernels take the locks of all operands of one call in a
/// fixed order (see `cpu::access`), so calls never deadlock each other.
#[derive(Clone)]
pub struct Storage(Arc<StorageImpl>);

impl Storage {
    /// Wraps a buffer of `nbytes` bytes on `device`. A CPU or device buffer
    /// must hold exactly `nbytes` bytes (an [`Error::InvalidArgument`]
    /// otherwise: kernels trust the size); a meta buffer holds none.
    pub fn new(device: Device, nbytes: usize, buffer: Buffer) -> Result<Storage> {
        let held = match &buffer {
            Buffer::Cpu(b) => Some(b.len()),
            Buffer::Device(b) => Some(b.len()),
            Buffer::Meta => None,
        };
        if let Some(held) = held
            && held != nbytes
        {
            return Err(Error::invalid(
                "Storage::new",
                format!("the buffer holds {held} bytes, but the storage was declared with {nbytes}"),
            ));
        }
        if matches!(buffer, Buffer::Cpu(_)) != (device == Device::Cpu) {
            return Err(Error::invalid(
                "Storage::new",
                format!("host memory must be on the cpu device and only there, got {device}"),
            ));
        }
        Ok(Storage::wrap(device, nbytes, buffer, false))
    }

    /// [`Storage::new`] for a buffer the crate allocated itself (so of the
    /// right size), typed for `dtype`'s tensors.
    pub(crate) fn new_for(device: Device, nbytes: usize, buffer: Buffer, dtype: DType) -> Storage {
        Storage::wrap(device, nbytes, buffer, dtype == DType::Bool)
    }

    fn wrap(device: Device, nbytes: usize, buffer: Buffer, bool_typed: bool) -> Storage {
        let meta_charge = if device == Device::Meta {
            meta_ledger::charge(nbytes)
        } else {
            0
        };
        Storage(Arc::new(StorageImpl {
            device,
            nbytes,
            bool_typed,
            read_only: false,
            version: AtomicU64::new(0),
            data: RwLock::new(buffer),
            meta_charge,
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

    /// Fresh zeroed host memory of `nbytes` ([`Error::OutOfMemory`] when the
    /// system cannot provide it).
    pub fn cpu(nbytes: usize) -> Result<Storage> {
        Ok(Storage::wrap(
            Device::Cpu,
            nbytes,
            Buffer::Cpu(CpuBuffer::zeroed(nbytes)?),
            false,
        ))
    }

    /// Fresh uninitialised host memory of `nbytes` for `dtype`'s tensors.
    ///
    /// # Safety
    ///
    /// Every byte must be written before anything reads the storage (see
    /// [`CpuBuffer`]); for bool, with 0 or 1.
    pub(crate) unsafe fn cpu_uninit(nbytes: usize, dtype: DType) -> Result<Storage> {
        // SAFETY: the caller writes every byte before reading (this function's contract).
        let buf = unsafe { CpuBuffer::uninit(nbytes)? };
        Ok(Storage::wrap(
            Device::Cpu,
            nbytes,
            Buffer::Cpu(buf),
            dtype == DType::Bool,
        ))
    }

    /// Host memory holding a copy of `bytes` ([`Error::OutOfMemory`] when it
    /// cannot be allocated).
    pub fn cpu_from_bytes(bytes: &[u8]) -> Result<Storage> {
        let buf = CpuBuffer::from_bytes(bytes)?;
        Ok(Storage::wrap(Device::Cpu, bytes.len(), Buffer::Cpu(buf), false))
    }

    /// Host memory holding a copy of the elements of `data`, typed for
    /// `T`'s tensors (no check needed: a `&[bool]` holds only 0 and 1).
    pub(crate) fn cpu_from_elems<T: crate::Element>(data: &[T]) -> Result<Storage> {
        // SAFETY: `Element` types are plain data without padding (numbers,
        // f16/bf16, bool), so all size_of_val(data) bytes of the slice are
        // initialised and may be read as bytes while `data` is borrowed.
        let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) };
        let buf = CpuBuffer::from_bytes(bytes)?;
        Ok(Storage::wrap(
            Device::Cpu,
            bytes.len(),
            Buffer::Cpu(buf),
            T::DTYPE == DType::Bool,
        ))
    }

    /// `storage`, made by the caller a moment ago (holding only 0 and 1 if
    /// `dtype` is bool), typed for `dtype`'s tensors and refusing in-place
    /// writes when `read_only`.
    pub(crate) fn with_flags(mut storage: Storage, dtype: DType, read_only: bool) -> Storage {
        if let Some(st) = unique_mut(&mut storage.0) {
            st.bool_typed = dtype == DType::Bool;
            st.read_only = read_only;
        }
        storage
    }

    /// Whether in-place writes to this storage are refused (shared cached
    /// constants).
    pub fn is_read_only(&self) -> bool {
        self.0.read_only
    }

    /// Runs `f` on the bytes of host memory under the write lock, for
    /// code that fills a tensor from raw bytes (a collective's received
    /// data); bumps the version. On a bool storage every byte `f` left
    /// other than 0 becomes 1 before the lock is released, so bool tensors
    /// never see another byte (also when `f` panics; the panic goes on).
    /// An error for memory of another device and for read-only storage.
    ///
    /// ```
    /// use ferrotorch_core::{DType, Tensor};
    /// use ferrotorch_core::backend::TensorExt;
    /// let t = Tensor::new([false, false])?;
    /// t.storage().with_cpu_bytes_mut(|b| b.copy_from_slice(&[7, 0]))?;
    /// assert_eq!(t.to_vec::<bool>()?, [true, false]); // 7 became 1
    /// # let _ = DType::Bool;
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn with_cpu_bytes_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        if self.0.read_only {
            return Err(Error::InvalidArgument {
                op: "with_cpu_bytes_mut",
                detail: "the storage is read-only (a shared constant)".into(),
            });
        }
        let mut guard = self.write();
        let Buffer::Cpu(buf) = &mut *guard else {
            return Err(Error::InvalidArgument {
                op: "with_cpu_bytes_mut",
                detail: format!("the storage is on {}, not the CPU", self.0.device),
            });
        };
        let bytes = buf.bytes_mut();
        // Normalised even when `f` panics: the lock is taken over poison,
        // so the bytes stay readable after an unwind.
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut *bytes)));
        if self.0.bool_typed {
            bytes.iter_mut().for_each(|b| *b = u8::from(*b != 0));
        }
        drop(guard);
        self.bump_version();
        match out {
            Ok(out) => Ok(out),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Whether bool tensors live on this storage (bool and non-bool tensors
    /// never share one: see [`TensorExt::from_parts`](crate::backend::TensorExt::from_parts)).
    pub fn is_bool_typed(&self) -> bool {
        self.0.bool_typed
    }

    /// Checks that a tensor of `dtype` may live on this storage, typing it
    /// for bool when nothing else holds it. A bool tensor needs storage
    /// whose bytes are all 0 or 1 and on which no tensor of another dtype
    /// can write (any other byte in a Rust `bool` is undefined behaviour);
    /// so bool and non-bool tensors never share a storage. Errors name `op`.
    pub(crate) fn claim_for(&mut self, op: &'static str, dtype: DType) -> Result<()> {
        let want_bool = dtype == DType::Bool;
        if self.0.bool_typed == want_bool {
            return Ok(());
        }
        if want_bool && let Some(bad) = self.first_non_bool_byte() {
            return Err(Error::invalid(
                op,
                format!("a bool tensor's bytes must be 0 or 1, but byte {bad} of its storage is not"),
            ));
        }
        match unique_mut(&mut self.0) {
            Some(st) => {
                st.bool_typed = want_bool;
                Ok(())
            }
            None => Err(Error::invalid(
                op,
                format!(
                    "a {dtype} tensor cannot share a storage with tensors of {} (bool tensors must never see \
                     bytes other than 0 and 1); copy with to_dtype instead",
                    if want_bool { "other dtypes" } else { "dtype bool" }
                ),
            )),
        }
    }

    /// The index of the first byte that is neither 0 nor 1 (host memory only).
    fn first_non_bool_byte(&self) -> Option<usize> {
        let g = self.read();
        g.as_cpu()?.bytes().iter().position(|&b| b > 1)
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
    /// memory of `nbytes` (uninitialised) for `dtype`'s tensors and version
    /// 0, as [`Storage::cpu_uninit`] would. Returns false (nothing done) if
    /// the storage is shared.
    ///
    /// # Safety
    ///
    /// As for [`Storage::cpu_uninit`]: every byte is written before it is read.
    pub(crate) unsafe fn refill_cpu(&mut self, nbytes: usize, dtype: DType) -> Result<bool> {
        let Some(st) = unique_mut(&mut self.0) else {
            return Ok(false);
        };
        debug_assert!(st.device == Device::Cpu);
        // SAFETY: the caller writes every byte before reading (this function's contract).
        let buf = unsafe { CpuBuffer::uninit(nbytes)? };
        st.nbytes = nbytes;
        st.bool_typed = dtype == DType::Bool;
        st.read_only = false;
        *st.version.get_mut() = 0;
        *st.data.get_mut().unwrap_or_else(|e| e.into_inner()) = Buffer::Cpu(buf);
        Ok(true)
    }

    /// Frees the host memory of this storage while every tensor and view
    /// on it stays valid as a handle (PyTorch's
    /// `untyped_storage().resize_(0)`, which FSDP uses for gathered
    /// parameters that the autograd graph still refers to). Until
    /// [`Storage::restore_cpu`] gives it memory again, every read or write
    /// of a tensor on it fails with [`Error::Released`]. The version is kept.
    /// Releasing released storage does nothing; an error for memory that is
    /// not the CPU's and for read-only storage.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// use ferrotorch_core::backend::TensorExt;
    /// let w = Tensor::new([1.0f32, 2.0])?;
    /// let view = w.mul(1.0)?; // (a new tensor; `w` itself is released below)
    /// w.storage().release_cpu()?;
    /// assert!(w.storage().is_released() && w.to_vec::<f32>().is_err());
    /// let bytes: Vec<u8> = [3.0f32, 4.0].iter().flat_map(|x| x.to_ne_bytes()).collect();
    /// w.storage().restore_cpu(|b| b.copy_from_slice(&bytes))?;
    /// assert_eq!(w.to_vec::<f32>()?, [3.0, 4.0]);
    /// # let _ = view;
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn release_cpu(&self) -> Result<()> {
        self.check_host_writable("release_cpu")?;
        let mut guard = self.write();
        if matches!(*guard, Buffer::Cpu(_)) {
            // Drops the CpuBuffer, returning its memory to the allocator.
            *guard = Buffer::Meta;
        }
        Ok(())
    }

    /// Whether this host storage's memory was freed by
    /// [`Storage::release_cpu`] (and not restored since).
    pub fn is_released(&self) -> bool {
        self.0.device == Device::Cpu && matches!(*self.read(), Buffer::Meta)
    }

    /// Gives storage freed by [`Storage::release_cpu`] fresh memory of its
    /// size, zeroed, then filled by `f`, without a new version: it brings
    /// back the same contents, so tensors saved for backward before the
    /// release still pass autograd's in-place check. On bool storage every
    /// byte `f` left other than 0 becomes 1. Errors when the storage is not
    /// released ([`Storage::with_cpu_bytes_mut`] writes live memory) and
    /// with [`Error::OutOfMemory`] when the memory cannot be had.
    pub fn restore_cpu(&self, f: impl FnOnce(&mut [u8])) -> Result<()> {
        self.check_host_writable("restore_cpu")?;
        let mut buf = CpuBuffer::zeroed(self.0.nbytes)?;
        let bytes = buf.bytes_mut();
        f(&mut *bytes);
        if self.0.bool_typed {
            bytes.iter_mut().for_each(|b| *b = u8::from(*b != 0));
        }
        let mut guard = self.write();
        if !matches!(*guard, Buffer::Meta) {
            return Err(Error::invalid(
                "restore_cpu",
                "the storage holds memory (only storage freed by release_cpu can be restored)",
            ));
        }
        *guard = Buffer::Cpu(buf);
        Ok(())
    }

    fn check_host_writable(&self, op: &'static str) -> Result<()> {
        if self.0.device != Device::Cpu {
            return Err(Error::invalid(
                op,
                format!("the storage is on {}, not the CPU", self.0.device),
            ));
        }
        if self.0.read_only {
            return Err(Error::invalid(op, "the storage is read-only (a shared constant)"));
        }
        Ok(())
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
