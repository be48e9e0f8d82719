//! [`Failure`]: why a command failed, and the exit status it gives.

/// Why a command failed.
pub(crate) enum Failure {
    /// The command line is wrong (exit status 2).
    Usage(String),
    /// A file could not be read or written, or holds the wrong thing (exit status 1).
    File(String),
}

impl From<ferrotorch::serialize::Error> for Failure {
    fn from(e: ferrotorch::serialize::Error) -> Self {
        Failure::File(e.to_string())
    }
}
