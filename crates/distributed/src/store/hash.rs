//! `HashStore`: a store inside one process (threads of one process, or a
//! world of size one).

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::{Store, add_to_counter, compare_set_outcome, deadline, key_list};
use crate::error::{DistError, Result};

/// An in-memory [`Store`] (`torch.distributed.HashStore`): a map behind a
/// lock, with waiters woken when keys arrive.
#[derive(Debug)]
pub struct HashStore {
    map: Mutex<HashMap<String, Vec<u8>>>,
    changed: Condvar,
    timeout_ms: std::sync::atomic::AtomicU64,
}

impl Default for HashStore {
    fn default() -> Self {
        Self::new()
    }
}

impl HashStore {
    /// An empty store with PyTorch's default timeout (300 s).
    pub fn new() -> Self {
        HashStore {
            map: Mutex::new(HashMap::new()),
            changed: Condvar::new(),
            timeout_ms: std::sync::atomic::AtomicU64::new(super::DEFAULT_TIMEOUT.as_millis() as u64),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Vec<u8>>> {
        // A panic while holding the lock leaves the map consistent (every
        // mutation is one insert or remove), so a poisoned lock is usable.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `ready(map)` holds or the deadline of `timeout` passes.
    fn wait_until<'a>(
        &'a self,
        op: &'static str,
        keys: &[&str],
        timeout: Duration,
    ) -> Result<MutexGuard<'a, HashMap<String, Vec<u8>>>> {
        let end = deadline(timeout);
        let mut map = self.lock();
        loop {
            if keys.iter().all(|k| map.contains_key(*k)) {
                return Ok(map);
            }
            map = match end {
                None => self.changed.wait(map).unwrap_or_else(|e| e.into_inner()),
                Some(end) => {
                    let now = std::time::Instant::now();
                    if now >= end {
                        let missing: Vec<&str> = keys.iter().copied().filter(|k| !map.contains_key(*k)).collect();
                        return Err(DistError::Timeout {
                            op,
                            what: key_list(&missing),
                            after: timeout,
                        });
                    }
                    self.changed
                        .wait_timeout(map, end - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }
}

impl Store for HashStore {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.lock().insert(key.to_owned(), value.to_vec());
        self.changed.notify_all();
        Ok(())
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        let map = self.wait_until("get", &[key], self.timeout())?;
        Ok(map[key].clone())
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let mut map = self.lock();
        let value = add_to_counter(key, map.get(key).map(Vec::as_slice), delta)?;
        map.insert(key.to_owned(), value.to_string().into_bytes());
        drop(map);
        self.changed.notify_all();
        Ok(value)
    }

    fn compare_set(&self, key: &str, expected: &[u8], desired: &[u8]) -> Result<Vec<u8>> {
        let mut map = self.lock();
        let (store, ret) = compare_set_outcome(map.get(key).map(Vec::as_slice), expected, desired);
        if let Some(v) = store {
            map.insert(key.to_owned(), v);
            drop(map);
            self.changed.notify_all();
        }
        Ok(ret)
    }

    fn wait_timeout(&self, keys: &[&str], timeout: Duration) -> Result<()> {
        self.wait_until("wait", keys, timeout).map(drop)
    }

    fn check(&self, keys: &[&str]) -> Result<bool> {
        let map = self.lock();
        Ok(keys.iter().all(|k| map.contains_key(*k)))
    }

    fn delete_key(&self, key: &str) -> Result<bool> {
        Ok(self.lock().remove(key).is_some())
    }

    fn num_keys(&self) -> Result<i64> {
        Ok(self.lock().len() as i64)
    }

    fn append(&self, key: &str, value: &[u8]) -> Result<()> {
        self.lock().entry(key.to_owned()).or_default().extend_from_slice(value);
        self.changed.notify_all();
        Ok(())
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn set_timeout(&self, timeout: Duration) {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.timeout_ms.store(ms, std::sync::atomic::Ordering::Relaxed);
    }
}
