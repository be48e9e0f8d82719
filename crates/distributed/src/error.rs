//! The error type of `ferrotorch-distributed`.

use std::time::Duration;

/// What a store, a process group or the launcher reports instead of
/// panicking or hanging.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// A wait ran past its timeout: `op` is the operation (`"wait"`,
    /// `"get"`, `"connect"` ...), `what` names what did not arrive.
    #[error("{op}: timed out after {after:?} waiting for {what}")]
    Timeout {
        /// The operation that waited.
        op: &'static str,
        /// What it waited for (keys, a peer, an address).
        what: String,
        /// How long it waited.
        after: Duration,
    },
    /// A system call failed (connect, read, write, open ...).
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the address or path.
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The peer closed the connection in the middle of an exchange.
    #[error("{0}: the peer closed the connection")]
    Closed(String),
    /// Bytes that break the wire protocol (a bad command, a length past
    /// the limit, an unexpected reply).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A collective or point-to-point operation failed: the message names
    /// the operation, its group and sequence number, and why (a timeout
    /// naming the ranks that did not arrive, a dead peer, ranks that called
    /// different collectives).
    #[error("{0}")]
    Collective(String),
    /// An error of the tensor core (reading or writing a tensor).
    #[error(transparent)]
    Core(#[from] ferrotorch_core::Error),
    /// A bad argument (an oversized key, a malformed address, a counter
    /// that is not a number).
    #[error("{0}")]
    InvalidArgument(String),
}

impl DistError {
    /// An [`DistError::Io`] with its context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        DistError::Io {
            context: context.into(),
            source,
        }
    }
}

/// `Result` with [`DistError`].
pub type Result<T> = std::result::Result<T, DistError>;

impl From<DistError> for ferrotorch_core::Error {
    /// Core errors come back as they were; every other distributed error becomes an `InvalidArgument` of the op
    /// `distributed` with this error's message, so `?` works in code that
    /// returns the core's `Result`.
    fn from(e: DistError) -> Self {
        match e {
            DistError::Core(e) => e,
            other => ferrotorch_core::Error::InvalidArgument {
                op: "distributed",
                detail: other.to_string(),
            },
        }
    }
}
