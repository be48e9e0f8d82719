//! `FileStore`: a store in one file that every process opens (a shared
//! file system across hosts), in PyTorch's record format, so PyTorch's
//! `FileStore` and ours share a file.
//!
//! The file is a log of records, each a key and a value, each written as
//! a little-endian `u32` length and the bytes. Keys are stored as `/key`;
//! a record `-/key` deletes `key`; `cleanup/` counts the processes that
//! have closed the store, and the last of `world_size` removes the file.
//! Writers hold an exclusive `flock`, readers a shared one.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Store, add_to_counter, compare_set_outcome, deadline, key_list};
use crate::error::{DistError, Result};

const REGULAR_PREFIX: &str = "/";
const DELETE_PREFIX: &str = "-";
const CLEANUP_KEY: &str = "cleanup/";
const POLL: Duration = Duration::from_millis(10);

/// A [`Store`] kept in a file (`torch.distributed.FileStore`).
#[derive(Debug)]
pub struct FileStore {
    path: PathBuf,
    world_size: Option<usize>,
    state: Mutex<Cache>,
    timeout_ms: std::sync::atomic::AtomicU64,
}

/// What this process has read of the log: the keys' values and how far.
#[derive(Debug, Default)]
struct Cache {
    values: HashMap<String, Vec<u8>>,
    pos: u64,
}

impl FileStore {
    /// A store in the file at `path` (created on first write), shared by
    /// `world_size` processes (`None`: unknown, the file is never
    /// removed). PyTorch's default timeout (300 s).
    pub fn new(path: impl AsRef<Path>, world_size: Option<usize>) -> Self {
        FileStore {
            path: path.as_ref().to_path_buf(),
            world_size,
            state: Mutex::new(Cache::default()),
            timeout_ms: std::sync::atomic::AtomicU64::new(super::DEFAULT_TIMEOUT.as_millis() as u64),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn io(&self, what: &str, e: std::io::Error) -> DistError {
        DistError::io(format!("FileStore {}: {what}", self.path.display()), e)
    }

    /// Opens the file for writing (creating it), under an exclusive lock.
    fn open_write(&self) -> Result<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)
            .map_err(|e| self.io("open", e))?;
        file.lock().map_err(|e| self.io("lock", e))?;
        Ok(file)
    }

    /// Opens the file for reading under a shared lock, waiting for another
    /// process to create it; `None` if it does not exist yet.
    fn open_read(&self) -> Result<Option<File>> {
        match File::open(&self.path) {
            Ok(file) => {
                file.lock_shared().map_err(|e| self.io("lock", e))?;
                Ok(Some(file))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io("open", e)),
        }
    }

    /// Reads the records past `cache.pos` into the cache.
    fn refresh(&self, file: &mut File, cache: &mut Cache) -> Result<()> {
        let size = file.seek(SeekFrom::End(0)).map_err(|e| self.io("seek", e))?;
        if size == cache.pos {
            return Ok(());
        }
        if size < cache.pos {
            return Err(DistError::Protocol(format!(
                "FileStore {}: the file shrank from {} to {size} bytes (another job reused it?)",
                self.path.display(),
                cache.pos
            )));
        }
        file.seek(SeekFrom::Start(cache.pos)).map_err(|e| self.io("seek", e))?;
        let mut bytes = Vec::new();
        file.take(size - cache.pos)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io("read", e))?;
        let mut at = 0usize;
        while at < bytes.len() {
            let key = self.field(&bytes, &mut at, cache.pos)?;
            let value = self.field(&bytes, &mut at, cache.pos)?;
            let key = String::from_utf8_lossy(key).into_owned();
            if let Some(deleted) = key.strip_prefix(DELETE_PREFIX) {
                cache.values.remove(deleted);
            } else {
                cache.values.insert(key, value.to_vec());
            }
        }
        cache.pos = size;
        Ok(())
    }

    /// One length-prefixed field of the log at `*at`.
    fn field<'b>(&self, bytes: &'b [u8], at: &mut usize, base: u64) -> Result<&'b [u8]> {
        let truncated = |at: usize| {
            DistError::Protocol(format!(
                "FileStore {}: truncated record at byte {} of the file",
                self.path.display(),
                base + at as u64
            ))
        };
        let len_bytes = bytes.get(*at..*at + 4).ok_or_else(|| truncated(*at))?;
        let len = u32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
        let start = *at + 4;
        let end = start.checked_add(len as usize).ok_or_else(|| truncated(*at))?;
        let field = bytes.get(start..end).ok_or_else(|| truncated(*at))?;
        *at = end;
        Ok(field)
    }

    fn append_record(&self, file: &mut File, key: &str, value: &[u8]) -> Result<()> {
        let len = |n: usize| {
            u32::try_from(n).map_err(|_| {
                DistError::InvalidArgument(format!(
                    "FileStore: a key or value of {n} bytes is past the format's 4 GiB limit"
                ))
            })
        };
        let mut record = Vec::with_capacity(8 + key.len() + value.len());
        record.extend_from_slice(&len(key.len())?.to_le_bytes());
        record.extend_from_slice(key.as_bytes());
        record.extend_from_slice(&len(value.len())?.to_le_bytes());
        record.extend_from_slice(value);
        file.seek(SeekFrom::End(0)).map_err(|e| self.io("seek", e))?;
        file.write_all(&record).map_err(|e| self.io("write", e))
    }

    /// `add` on a raw (unprefixed) key.
    fn add_raw(&self, key: &str, delta: i64) -> Result<i64> {
        let mut cache = self.cache();
        let mut file = self.open_write()?;
        self.refresh(&mut file, &mut cache)?;
        let value = add_to_counter(key, cache.values.get(key).map(Vec::as_slice), delta)?;
        self.append_record(&mut file, key, value.to_string().as_bytes())?;
        Ok(value)
    }

    /// Refreshes and tests `ready` until it holds or `timeout` passes.
    fn poll<T>(
        &self,
        op: &'static str,
        keys: &[&str],
        timeout: Duration,
        mut ready: impl FnMut(&Cache) -> Option<T>,
    ) -> Result<T> {
        let end = deadline(timeout);
        loop {
            {
                let mut cache = self.cache();
                if let Some(mut file) = self.open_read()? {
                    self.refresh(&mut file, &mut cache)?;
                }
                if let Some(v) = ready(&cache) {
                    return Ok(v);
                }
                if end.is_some_and(|end| Instant::now() >= end) {
                    let missing: Vec<&str> = keys
                        .iter()
                        .copied()
                        .filter(|k| !cache.values.contains_key(&regular(k)))
                        .collect();
                    return Err(DistError::Timeout {
                        op,
                        what: key_list(&missing),
                        after: timeout,
                    });
                }
            }
            std::thread::sleep(POLL);
        }
    }
}

fn regular(key: &str) -> String {
    format!("{REGULAR_PREFIX}{key}")
}

impl Drop for FileStore {
    /// Counts this process out; the last of `world_size` removes the file.
    fn drop(&mut self) {
        if !self.path.exists() {
            return;
        }
        if let Ok(done) = self.add_raw(CLEANUP_KEY, 1)
            && self.world_size.is_some_and(|n| done == n as i64)
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Store for FileStore {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let _cache = self.cache();
        let mut file = self.open_write()?;
        self.append_record(&mut file, &regular(key), value)
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        let reg = regular(key);
        self.poll("get", &[key], self.timeout(), |c| c.values.get(&reg).cloned())
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64> {
        self.add_raw(&regular(key), delta)
    }

    fn compare_set(&self, key: &str, expected: &[u8], desired: &[u8]) -> Result<Vec<u8>> {
        let reg = regular(key);
        let mut cache = self.cache();
        let mut file = self.open_write()?;
        self.refresh(&mut file, &mut cache)?;
        let current = cache.values.get(&reg).map(Vec::as_slice);
        let (store, ret) = compare_set_outcome(current, expected, desired);
        if let Some(v) = store {
            self.append_record(&mut file, &reg, &v)?;
        }
        Ok(ret)
    }

    fn wait_timeout(&self, keys: &[&str], timeout: Duration) -> Result<()> {
        let regs: Vec<String> = keys.iter().map(|k| regular(k)).collect();
        self.poll("wait", keys, timeout, |c| {
            regs.iter().all(|k| c.values.contains_key(k)).then_some(())
        })
    }

    fn check(&self, keys: &[&str]) -> Result<bool> {
        let mut cache = self.cache();
        if let Some(mut file) = self.open_read()? {
            self.refresh(&mut file, &mut cache)?;
        }
        Ok(keys.iter().all(|k| cache.values.contains_key(&regular(k))))
    }

    fn delete_key(&self, key: &str) -> Result<bool> {
        let _cache = self.cache();
        let mut file = self.open_write()?;
        self.append_record(&mut file, &format!("{DELETE_PREFIX}{}", regular(key)), &[])?;
        Ok(true)
    }

    /// The keys in the file, the `cleanup/` counter included once a
    /// process has closed the store (as PyTorch counts).
    fn num_keys(&self) -> Result<i64> {
        let mut cache = self.cache();
        if let Some(mut file) = self.open_read()? {
            self.refresh(&mut file, &mut cache)?;
        }
        Ok(cache.values.len() as i64)
    }

    fn append(&self, key: &str, value: &[u8]) -> Result<()> {
        let reg = regular(key);
        let mut cache = self.cache();
        let mut file = self.open_write()?;
        self.refresh(&mut file, &mut cache)?;
        let mut joined = cache.values.get(&reg).cloned().unwrap_or_default();
        joined.extend_from_slice(value);
        self.append_record(&mut file, &reg, &joined)
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn set_timeout(&self, timeout: Duration) {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.timeout_ms.store(ms, std::sync::atomic::Ordering::Relaxed);
    }
}
