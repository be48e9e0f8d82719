//! The [`Store`] trait and the semantics every store shares (counters,
//! compare-and-set, deadlines, error messages).

use std::time::Duration;

use crate::error::{DistError, Result};

/// PyTorch's default store timeout (`timedelta(seconds=300)`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// A key-value store shared by the processes of a job
/// (`torch.distributed.Store`).
///
/// Values are bytes; counters made by [`Store::add`] are decimal strings,
/// as PyTorch's. A timeout of `Duration::ZERO` waits forever (PyTorch's
/// `kNoTimeout`). Every method returns an error, never panics, when the
/// store cannot answer (a closed connection, an unreadable file).
pub trait Store: Send + Sync {
    /// Sets `key` to `value`, waking whoever waits for it.
    fn set(&self, key: &str, value: &[u8]) -> Result<()>;

    /// The value of `key`, waiting up to [`Store::timeout`] for it to be
    /// set; a [`DistError::Timeout`] naming the key if it never is.
    fn get(&self, key: &str) -> Result<Vec<u8>>;

    /// Adds `delta` to the counter `key` (missing counts as 0) and returns
    /// the new value; an error if the key holds something that is not a
    /// decimal integer.
    fn add(&self, key: &str, delta: i64) -> Result<i64>;

    /// Sets `key` to `desired` if it holds `expected` (or if it is missing
    /// and `expected` is empty) and returns the value it holds afterwards;
    /// for a missing key with a non-empty `expected`, returns `expected`
    /// and sets nothing (PyTorch's semantics).
    fn compare_set(&self, key: &str, expected: &[u8], desired: &[u8]) -> Result<Vec<u8>>;

    /// Waits until every key of `keys` is set, up to `timeout`; a
    /// [`DistError::Timeout`] naming the keys still missing otherwise.
    fn wait_timeout(&self, keys: &[&str], timeout: Duration) -> Result<()>;

    /// [`Store::wait_timeout`] with the store's own timeout.
    fn wait(&self, keys: &[&str]) -> Result<()> {
        self.wait_timeout(keys, self.timeout())
    }

    /// Whether every key of `keys` is set, without waiting.
    fn check(&self, keys: &[&str]) -> Result<bool>;

    /// Deletes `key`; whether it was there.
    fn delete_key(&self, key: &str) -> Result<bool>;

    /// The number of keys set.
    fn num_keys(&self) -> Result<i64>;

    /// Appends `value` to the bytes of `key` (sets it if missing).
    fn append(&self, key: &str, value: &[u8]) -> Result<()>;

    /// The values of `keys`, waiting for each as [`Store::get`] does.
    fn multi_get(&self, keys: &[&str]) -> Result<Vec<Vec<u8>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// Sets each key of `keys` to the value at the same index.
    fn multi_set(&self, keys: &[&str], values: &[&[u8]]) -> Result<()> {
        check_pairs(keys.len(), values.len())?;
        keys.iter().zip(values).try_for_each(|(k, v)| self.set(k, v))
    }

    /// The timeout [`Store::get`] and [`Store::wait`] use.
    fn timeout(&self) -> Duration;

    /// Changes the timeout [`Store::get`] and [`Store::wait`] use.
    fn set_timeout(&self, timeout: Duration);
}

/// `multi_set`'s check that keys and values pair up.
pub(crate) fn check_pairs(keys: usize, values: usize) -> Result<()> {
    if keys == values {
        Ok(())
    } else {
        Err(DistError::InvalidArgument(format!(
            "multi_set: {keys} keys but {values} values"
        )))
    }
}

/// The new value of a counter: `old` (a decimal integer, or absent) plus
/// `delta`, as PyTorch's stores compute it.
pub(crate) fn add_to_counter(key: &str, old: Option<&[u8]>, delta: i64) -> Result<i64> {
    let Some(old) = old else { return Ok(delta) };
    let text = std::str::from_utf8(old).ok();
    let value = text.and_then(|t| t.trim().parse::<i64>().ok()).ok_or_else(|| {
        DistError::InvalidArgument(format!(
            "add: key {key:?} holds {:?}, not a decimal integer",
            String::from_utf8_lossy(&old[..old.len().min(64)])
        ))
    })?;
    value
        .checked_add(delta)
        .ok_or_else(|| DistError::InvalidArgument(format!("add: key {key:?}: {value} + {delta} overflows i64")))
}

/// What `compare_set` leaves in the store and returns, from the current
/// value: `(new value to store, if any; value returned)`.
pub(crate) fn compare_set_outcome(
    current: Option<&[u8]>,
    expected: &[u8],
    desired: &[u8],
) -> (Option<Vec<u8>>, Vec<u8>) {
    match current {
        None if expected.is_empty() => (Some(desired.to_vec()), desired.to_vec()),
        None => (None, expected.to_vec()),
        Some(cur) if cur == expected => (Some(desired.to_vec()), desired.to_vec()),
        Some(cur) => (None, cur.to_vec()),
    }
}

/// The deadline of a wait of `timeout` from now (`None`: forever).
pub(crate) fn deadline(timeout: Duration) -> Option<std::time::Instant> {
    if timeout.is_zero() {
        None
    } else {
        std::time::Instant::now().checked_add(timeout)
    }
}

/// The keys of `keys` as a list for an error message.
pub(crate) fn key_list(keys: &[&str]) -> String {
    let shown: Vec<String> = keys.iter().take(8).map(|k| format!("{k:?}")).collect();
    if keys.len() > 8 {
        format!("keys [{}, ... {} in all]", shown.join(", "), keys.len())
    } else {
        format!("keys [{}]", shown.join(", "))
    }
}
