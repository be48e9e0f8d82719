//! The `Backend` trait (PyTorch's `c10d::Backend`): what a communication
//! library provides to a process group.

use std::sync::mpsc;
use std::time::Duration;

use crate::collective::Collective;
use crate::error::Result;
use crate::work::Work;

/// How long a backend's worker waits for a new call while receives are
/// pending, before it looks for their messages again.
pub(crate) const RECV_POLL: Duration = Duration::from_micros(100);

/// A worker's next call: waits for one when no receive is pending;
/// otherwise up to [`RECV_POLL`] (`Some(None)`: none came, look at the
/// receives). `None` once the queue is closed (the group was destroyed).
pub(crate) fn next_job<T>(rx: &mpsc::Receiver<T>, receives_pending: bool) -> Option<Option<T>> {
    if !receives_pending {
        return rx.recv().ok().map(Some);
    }
    match rx.recv_timeout(RECV_POLL) {
        Ok(job) => Some(Some(job)),
        Err(mpsc::RecvTimeoutError::Timeout) => Some(None),
        Err(mpsc::RecvTimeoutError::Disconnected) => None,
    }
}

/// A communication backend of one group: carries out [`Collective`]s,
/// each returning a [`Work`] at once and completing it later off the
/// calling thread (so a device backend such as NCCL fits: its work
/// completes when its stream has run the kernel).
///
/// Calls are carried out in the order they were submitted; every rank of
/// the group must submit the same collectives in the same order (their
/// sequence numbers are checked against each other).
pub trait Backend: Send + Sync {
    /// The backend's name (`"tcp"`, `"mpi"`).
    fn name(&self) -> &'static str;
    /// This process's rank in the group.
    fn rank(&self) -> usize;
    /// The number of ranks in the group.
    fn size(&self) -> usize;
    /// Starts `c` (already validated by the caller with
    /// [`Collective::validate`]) and returns its work handle.
    fn submit(&self, c: Collective) -> Result<Work>;
    /// Carries out `c` (validated as for [`Backend::submit`]) and waits
    /// for it: PyTorch's `async_op=False`. The default submits and waits;
    /// a backend may instead run the call on the calling thread when
    /// nothing submitted before it is still pending (the `mpi` backend
    /// does, saving the hand-off to its worker thread). The call's error,
    /// if it fails.
    fn run(&self, c: Collective) -> Result<()> {
        self.submit(c)?.wait()
    }
    /// Stops the backend: pending and later calls fail, connections close.
    fn shutdown(&self);
}
