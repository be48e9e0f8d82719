//! Memory maps of checkpoint files, and storages that borrow them (the
//! crate's only `unsafe`).
//!
//! A file is mapped private and copy-on-write: reading it costs no copy,
//! and a tensor written to gets private copies of the pages it writes (the
//! file never changes). Tensors loaded from it borrow the map (it lives as
//! long as any of them does) instead of copying their bytes out.

use std::fs::File;
use std::ops::{Deref, Range};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;

use ferrotorch_core::DType;
use ferrotorch_core::Device;
use ferrotorch_core::backend::storage::{Buffer, CpuBuffer, Storage};

use crate::error::{Error, Result};

/// A file's private mapping: its base address (taken once, from the
/// mutable map) and length.
struct PrivateMap {
    base: usize,
    len: usize,
    _map: memmap2::MmapMut,
}

/// A file's bytes, memory-mapped (or empty for an empty file, which cannot
/// be mapped).
pub(crate) struct Mapped {
    map: Option<Arc<PrivateMap>>,
}

impl Deref for Mapped {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // Storages borrowing the map are handed out only once loading
        // (which reads through this slice) is over; each then writes only
        // its own range, never read through this slice again.
        match &self.map {
            // SAFETY: `base..base + len` is the live mapping the Arc keeps,
            // and nothing writes to it while this slice is in use (above).
            Some(m) => unsafe { std::slice::from_raw_parts(m.base as *const u8, m.len) },
            None => &[],
        }
    }
}

/// Maps `path` private and copy-on-write, and asks the kernel to read it
/// ahead (for loading).
pub(crate) fn map_file(path: &Path) -> Result<Mapped> {
    map(path, true)
}

/// Maps `path` without reading anything ahead: only the pages that are
/// touched are read from the file (for looking at a header or a directory).
pub(crate) fn map_file_lazy(path: &Path) -> Result<Mapped> {
    map(path, false)
}

fn map(path: &Path, read_ahead: bool) -> Result<Mapped> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        return Err(Error::io(path, std::io::ErrorKind::IsADirectory.into()));
    }
    let len = meta.len();
    if len == 0 {
        return Ok(Mapped { map: None });
    }
    // As for every file map, another process truncating or rewriting the
    // file meanwhile would change the bytes underneath; checkpoints are
    // written atomically (temp file + rename), which leaves a mapped old
    // file intact.
    // SAFETY: the map is private (writes never reach the file) and its
    // memory is only accessed through `Mapped` (reads while loading) and
    // through the storages of `borrowed_storage` (disjoint ranges, each
    // under its storage's lock).
    let mut map = unsafe { memmap2::MmapOptions::new().map_copy(&file) }.map_err(|e| Error::io(path, e))?;
    #[cfg(unix)]
    if read_ahead {
        let _ = map.advise(memmap2::Advice::WillNeed);
    }
    let base = map.as_mut_ptr() as usize;
    Ok(Mapped {
        map: Some(Arc::new(PrivateMap {
            base,
            len: map.len(),
            _map: map,
        })),
    })
}

impl Mapped {
    /// A storage over `range` of the map (no copy), for tensors of `dtype`,
    /// keeping the map alive; `None` when the range cannot be borrowed: an
    /// empty file or range, a range outside the map, or a start not aligned
    /// for `dtype`. The caller never borrows overlapping ranges (two
    /// storages must not share bytes) and types bool storages itself.
    pub(crate) fn borrowed_storage(&self, range: Range<usize>, dtype: DType) -> Option<Storage> {
        let m = self.map.as_ref()?;
        if range.is_empty() || range.end > m.len {
            return None;
        }
        let addr = m.base.checked_add(range.start)?;
        if addr % dtype.element_size() != 0 {
            return None;
        }
        let ptr = NonNull::new(addr as *mut u8)?;
        let owner: Arc<dyn Send + Sync> = m.clone();
        // The caller borrows disjoint ranges only, and nothing reads this one
        // through `Mapped` once it is handed out; `addr` is aligned for `dtype`.
        // SAFETY: `range` lies inside the live private mapping: readable,
        // writable (copy-on-write), initialised, kept alive by `owner`.
        let buffer = unsafe { CpuBuffer::from_external(ptr, range.len(), owner) };
        Storage::new(Device::Cpu, range.len(), Buffer::Cpu(buffer)).ok()
    }
}
