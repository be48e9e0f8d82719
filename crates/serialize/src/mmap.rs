//! Read-only memory maps of checkpoint files (the crate's one `unsafe`).

use std::fs::File;
use std::ops::Deref;
use std::path::Path;

use crate::error::{Error, Result};

/// A file's bytes, memory-mapped (or empty for an empty file, which cannot
/// be mapped).
pub(crate) struct Mapped {
    map: Option<memmap2::Mmap>,
}

impl Deref for Mapped {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// Maps `path` read-only, reading the whole file in up front (one
/// sequential pass instead of a page fault per page: for loading).
pub(crate) fn map_file(path: &Path) -> Result<Mapped> {
    map(path, true)
}

/// Maps `path` read-only without reading anything: only the pages that are
/// touched are read from the file (for looking at a header or a directory).
pub(crate) fn map_file_lazy(path: &Path) -> Result<Mapped> {
    map(path, false)
}

fn map(path: &Path, populate: bool) -> Result<Mapped> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        return Err(Error::io(path, std::io::ErrorKind::IsADirectory.into()));
    }
    let len = meta.len();
    if len == 0 {
        return Ok(Mapped { map: None });
    }
    let mut options = memmap2::MmapOptions::new();
    if populate {
        options.populate();
    }
    // As for every file map, another process truncating or rewriting the
    // file meanwhile would change the bytes underneath; checkpoints are
    // written atomically (temp file + rename), which leaves a mapped old
    // file intact.
    // SAFETY: the map is read-only, and its bytes are only read, through
    // `&[u8]` borrowed from the `Mapped`, while the map lives.
    let map = unsafe { options.map(&file) }.map_err(|e| Error::io(path, e))?;
    Ok(Mapped { map: Some(map) })
}
