//! The optimizer crate's error type.
//!
//! Messages are PyTorch's where PyTorch has one (`Invalid learning rate:
//! -0.1`, `loaded state dict has a different number of parameter groups`);
//! the variant says what kind of mistake it was, so code can match on it.

/// What went wrong in an optimizer, a learning-rate scheduler or a
/// gradient-clipping call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A hyperparameter outside its range (`lr < 0`, a beta outside
    /// `[0, 1)`, a negative `eps`, `weight_decay` or `momentum`); the
    /// message is PyTorch's (`Invalid learning rate: -0.1`).
    #[error("{message}")]
    InvalidHyperparameter {
        /// The hyperparameter (`lr`, `betas`, `eps`, ...).
        name: &'static str,
        /// PyTorch's message.
        message: String,
    },
    /// Nesterov momentum with no momentum or with dampening.
    #[error("Nesterov momentum requires a momentum and zero dampening")]
    Nesterov,
    /// A parameter given twice, within one group or across groups.
    #[error("{0}")]
    DuplicateParameter(&'static str),
    /// An optimizer built without parameters.
    #[error("optimizer got an empty parameter list")]
    EmptyParameterList,
    /// A hyperparameter key the optimizer does not know, or a value of the
    /// wrong kind for it (`set_hyperparameter`, `load_state_dict`).
    #[error("param group key {key:?}: {detail}")]
    ParamGroupKey {
        /// The key.
        key: String,
        /// What was wrong.
        detail: String,
    },
    /// A parameter group index past the last group.
    #[error("param group {index} does not exist (the optimizer has {len})")]
    NoSuchGroup {
        /// The index asked for.
        index: usize,
        /// The number of groups.
        len: usize,
    },
    /// A parameter or its gradient the update cannot take: a dtype other
    /// than float32 / float64, a gradient of another shape or dtype, a
    /// tensor that is not on the CPU.
    #[error("{optimizer}: parameter {index}: {detail}")]
    Parameter {
        /// The optimizer (`Adam`, `SGD`, ...).
        optimizer: &'static str,
        /// The parameter's index in the optimizer (over all groups).
        index: usize,
        /// What was wrong.
        detail: String,
    },
    /// `load_state_dict` was given a state dict that does not fit the
    /// optimizer (group count, parameter counts, state shapes or keys).
    #[error("{0}")]
    StateDict(String),
    /// A learning-rate scheduler's bad argument or use (PyTorch's message).
    #[error("{0}")]
    Scheduler(String),
    /// A `GradScaler` used out of order or given bad options (PyTorch's
    /// message: `unscale_() has already been called on this optimizer
    /// since the last update().`).
    #[error("{0}")]
    GradScaler(String),
    /// An error of a tensor operation.
    #[error(transparent)]
    Tensor(#[from] ferrotorch_core::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn hyper(name: &'static str, message: String) -> Error {
        Error::InvalidHyperparameter { name, message }
    }

    pub(crate) fn key(key: &str, detail: impl Into<String>) -> Error {
        Error::ParamGroupKey {
            key: key.to_string(),
            detail: detail.into(),
        }
    }
}

/// An optimizer error inside code that returns the tensor crate's
/// [`ferrotorch_core::Result`]: a tensor error comes back as it was, any
/// other as [`ferrotorch_core::Error::InvalidArgument`] with the message
/// (`op` `"optim"`), so `?` works in a training loop returning
/// `ferrotorch::Result`.
impl From<Error> for ferrotorch_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Tensor(e) => e,
            other => ferrotorch_core::Error::InvalidArgument {
                op: "optim",
                detail: other.to_string(),
            },
        }
    }
}
