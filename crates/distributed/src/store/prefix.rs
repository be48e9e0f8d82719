//! `PrefixStore`: a namespace inside another store.

use std::sync::Arc;
use std::time::Duration;

use super::Store;
use crate::error::Result;

/// A [`Store`] that puts `prefix/` before every key of another store
/// (`torch.distributed.PrefixStore`): each process group keeps its keys
/// apart this way.
#[derive(Clone)]
pub struct PrefixStore {
    prefix: String,
    inner: Arc<dyn Store>,
}

impl std::fmt::Debug for PrefixStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefixStore")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl PrefixStore {
    /// Keys `k` of the new store are `prefix/k` in `inner`.
    pub fn new(prefix: impl Into<String>, inner: Arc<dyn Store>) -> Self {
        PrefixStore {
            prefix: prefix.into(),
            inner,
        }
    }

    /// The prefix (without the `/`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The store underneath.
    pub fn underlying_store(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    fn key(&self, key: &str) -> String {
        format!("{}/{}", self.prefix, key)
    }

    fn keys(&self, keys: &[&str]) -> Vec<String> {
        keys.iter().map(|k| self.key(k)).collect()
    }
}

fn refs(keys: &[String]) -> Vec<&str> {
    keys.iter().map(String::as_str).collect()
}

impl Store for PrefixStore {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.inner.set(&self.key(key), value)
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        self.inner.get(&self.key(key))
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64> {
        self.inner.add(&self.key(key), delta)
    }

    fn compare_set(&self, key: &str, expected: &[u8], desired: &[u8]) -> Result<Vec<u8>> {
        self.inner.compare_set(&self.key(key), expected, desired)
    }

    fn wait_timeout(&self, keys: &[&str], timeout: Duration) -> Result<()> {
        self.inner.wait_timeout(&refs(&self.keys(keys)), timeout)
    }

    fn check(&self, keys: &[&str]) -> Result<bool> {
        self.inner.check(&refs(&self.keys(keys)))
    }

    fn delete_key(&self, key: &str) -> Result<bool> {
        self.inner.delete_key(&self.key(key))
    }

    /// The number of keys of the whole underlying store, as PyTorch's
    /// `PrefixStore.num_keys` counts.
    fn num_keys(&self) -> Result<i64> {
        self.inner.num_keys()
    }

    fn append(&self, key: &str, value: &[u8]) -> Result<()> {
        self.inner.append(&self.key(key), value)
    }

    fn multi_get(&self, keys: &[&str]) -> Result<Vec<Vec<u8>>> {
        self.inner.multi_get(&refs(&self.keys(keys)))
    }

    fn multi_set(&self, keys: &[&str], values: &[&[u8]]) -> Result<()> {
        self.inner.multi_set(&refs(&self.keys(keys)), values)
    }

    fn timeout(&self) -> Duration {
        self.inner.timeout()
    }

    fn set_timeout(&self, timeout: Duration) {
        self.inner.set_timeout(timeout)
    }
}
