//! The error type of the data crate.

use std::path::PathBuf;

/// Result alias of the data crate.
pub type Result<T, E = DataError> = std::result::Result<T, E>;

/// What went wrong while building or iterating a dataset, sampler or loader.
///
/// Tensor errors of the core pass through as [`DataError::Tensor`]; `?` on
/// a core call converts them, so a [`Dataset`](crate::Dataset) written with
/// tensor operations needs no mapping.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] ferrotorch_core::Error),
    /// An argument is out of its range or options contradict each other
    /// (PyTorch's `ValueError`s, with its messages).
    #[error("{what}: {detail}")]
    Invalid {
        /// The function, type or option that refused the argument.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// An index past the end of a dataset or index list.
    #[error("{what}: index {index} is out of range for length {len}")]
    IndexOutOfRange {
        /// The dataset or sampler indexed.
        what: &'static str,
        /// The index asked for.
        index: usize,
        /// The length.
        len: usize,
    },
    /// Loading one item of a dataset failed (the data loader wraps the
    /// dataset's error with the index it asked for).
    #[error("loading item {index} of the dataset: {source}")]
    Item {
        /// The dataset index.
        index: usize,
        /// The dataset's error.
        source: Box<DataError>,
    },
    /// A data-loader worker thread panicked while loading a batch; the
    /// panic was caught and the worker goes on with the next batch.
    #[error("DataLoader worker {worker} panicked: {message}")]
    WorkerPanicked {
        /// The worker id (`0..num_workers`).
        worker: usize,
        /// The panic's message.
        message: String,
    },
    /// A data-loader worker thread stopped without delivering a batch, or
    /// took longer than the loader's timeout.
    #[error("DataLoader worker {worker}: {detail}")]
    Worker {
        /// The worker id.
        worker: usize,
        /// What happened.
        detail: String,
    },
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// A file was read but its content is not what it should be (bad
    /// magic number, truncated data, a count that does not match, a bad
    /// gzip stream).
    #[error("{}: {detail}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// An error of a user's dataset, sampler or collate function.
    #[error("{0}")]
    Message(String),
}

impl DataError {
    /// A [`DataError::Invalid`] error.
    pub fn invalid(what: &'static str, detail: impl Into<String>) -> Self {
        DataError::Invalid {
            what,
            detail: detail.into(),
        }
    }

    /// A [`DataError::Message`] error, for datasets and collate functions
    /// written outside the crate.
    pub fn msg(message: impl Into<String>) -> Self {
        DataError::Message(message.into())
    }
}

/// A data error inside code that returns the tensor crate's
/// [`ferrotorch_core::Result`]: a tensor error comes back as it was, any
/// other as [`ferrotorch_core::Error::InvalidArgument`] with the message
/// (`op` `"data"`), so `?` on a batch works in a training loop returning
/// `ferrotorch::Result` (as `?` on an optimizer call does).
impl From<DataError> for ferrotorch_core::Error {
    fn from(e: DataError) -> Self {
        match e {
            DataError::Tensor(e) => e,
            other => ferrotorch_core::Error::InvalidArgument {
                op: "data",
                detail: other.to_string(),
            },
        }
    }
}
