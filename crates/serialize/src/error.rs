//! [`Error`]: everything that can go wrong reading or writing a checkpoint.

use std::path::PathBuf;

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failure to read or write a checkpoint. Bad input is always one of
/// these, never a panic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file system refused (open, read, write, rename, fsync).
    #[error("{path}: {source}", path = path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// The bytes are not a checkpoint of the expected format: wrong magic,
    /// a truncated file, a broken or incomplete zip archive, a missing
    /// entry.
    #[error("{0}")]
    Format(String),

    /// A file written by `torch.save(..., _use_new_zipfile_serialization=False)`
    /// or PyTorch before 1.6 (a bare pickle stream, not a zip archive).
    #[error(
        "legacy torch.save format (PyTorch < 1.6 or _use_new_zipfile_serialization=False) is not supported; \
         re-save it with a current PyTorch: torch.save(torch.load(path, weights_only=True), path)"
    )]
    LegacyFormat,

    /// The pickle stream is malformed (unknown opcode, stack underflow,
    /// truncated argument, bad memo reference, ...), or too deep or large.
    #[error("data.pkl, byte {offset}: {detail}")]
    Pickle {
        /// Position of the opcode in the pickle stream.
        offset: usize,
        /// What was wrong.
        detail: String,
    },

    /// The pickle names a global that `torch.load(weights_only=True)` does
    /// not allow: loading it would run arbitrary code in Python.
    #[error(
        "data.pkl references the global `{0}`, which torch.load(weights_only=True) does not allow; \
         nothing was executed and the file was not loaded"
    )]
    DisallowedGlobal(String),

    /// Something valid in PyTorch that ferrotorch cannot represent: a dtype
    /// the core lacks (int8, int16, complex, ...), a tensor subclass, a
    /// `torch.device` or dtype object as a value, a non-CPU layout.
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// A tensor's metadata does not fit its data (storage too short for
    /// size and stride, negative sizes, sizes whose product overflows, a
    /// storage length that is not a whole number of elements).
    #[error("invalid tensor: {0}")]
    InvalidTensor(String),

    /// The value does not have the structure asked for (a state dict whose
    /// values are not all tensors, an optimizer state dict without
    /// `param_groups`, ...).
    #[error("{0}")]
    Schema(String),

    /// An error of the tensor core (allocation, layout checks, dtype conversion).
    #[error(transparent)]
    Core(#[from] ferrotorch_core::Error),
}

impl Error {
    /// A [`Error::Format`] error.
    pub(crate) fn format(detail: impl Into<String>) -> Error {
        Error::Format(detail.into())
    }

    /// A [`Error::Schema`] error.
    pub(crate) fn schema(detail: impl Into<String>) -> Error {
        Error::Schema(detail.into())
    }

    /// A [`Error::InvalidTensor`] error.
    pub(crate) fn tensor(detail: impl Into<String>) -> Error {
        Error::InvalidTensor(detail.into())
    }

    /// An [`Error::Io`] error for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

impl From<Error> for ferrotorch_core::Error {
    /// Core errors come back as they were; every other error becomes an
    /// `InvalidArgument` of the op `serialize` with this error's message,
    /// so `?` works in code that returns the core's `Result`.
    fn from(e: Error) -> Self {
        match e {
            Error::Core(e) => e,
            other => ferrotorch_core::Error::InvalidArgument {
                op: "serialize",
                detail: other.to_string(),
            },
        }
    }
}
