//! Atomic file writes: a temporary file in the destination's directory,
//! flushed to disk, then renamed over the destination, and the directory
//! flushed, so that a reader (or a crash, or a killed process) sees the old
//! file or the new one, never half of one.
//!
//! A process killed while writing leaves its temporary file
//! (`.<name>.tmp-<pid>-<n>`) behind: nothing survives to remove it, and a
//! later save cannot tell it from another process's save in progress. The
//! destination is intact either way (`tests/atomic_kill.rs`).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temporary path beside `path` (`.<name>.tmp-<pid>-<n>`).
fn temp_path(path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| Error::format(format!("{}: not a file path", path.display())))?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}-{n}", std::process::id()));
    Ok(path.with_file_name(tmp_name))
}

/// Writes `path` atomically: `write` fills the temporary file at the path
/// it is given; then the file is fsynced, renamed to `path`, and the
/// directory fsynced. On any error before the rename the temporary file is
/// removed and `path` is untouched; an error syncing the directory comes
/// after the rename (the new file is in place, but a power cut could still
/// undo the rename).
pub(crate) fn write_atomic(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = temp_path(path)?;
    let result = write(&tmp).and_then(|()| {
        // fsync flushes the file, whichever descriptor asks: the data
        // `write` wrote through its own handle is on disk after this.
        let f = File::options().write(true).open(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
        return result;
    }
    sync_dir(path)
}

/// Flushes the directory holding `path`, which makes a rename in it durable.
#[cfg(unix)]
fn sync_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let d = File::open(dir).map_err(|e| Error::io(dir, e))?;
    match d.sync_all() {
        Ok(()) => Ok(()),
        // File systems that cannot sync a directory say EINVAL (or that it
        // is unsupported): there is nothing more to do on them.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::Unsupported
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(Error::io(dir, e)),
    }
}

/// Directories cannot be opened for syncing here (Windows): the rename is
/// as durable as the platform makes it.
#[cfg(not(unix))]
fn sync_dir(_path: &Path) -> Result<()> {
    Ok(())
}
