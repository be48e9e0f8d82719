//! Atomic file writes: a temporary file in the destination's directory,
//! flushed to disk, then renamed over the destination, so that a reader
//! (or a crash) sees the old file or the new one, never half of one.

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
/// directory fsynced. On any error the temporary file is removed and
/// `path` is untouched.
pub(crate) fn write_atomic(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = temp_path(path)?;
    let result = write(&tmp).and_then(|()| {
        let f = File::options().write(true).open(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
        return result;
    }
    // Make the rename itself durable. Directories cannot be opened for
    // syncing on every platform; the data is already on disk then.
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
