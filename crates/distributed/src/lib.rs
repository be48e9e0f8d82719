//! # ferrotorch-distributed
//!
//! PyTorch's `torch.distributed` for ferrotorch. This first part holds the
//! key-value [`store`]s the processes of a job meet through:
//! [`TcpStore`] speaks PyTorch's c10d TCPStore wire
//! protocol as client and as server, so a ferrotorch process and a PyTorch
//! process share one store; [`FileStore`] writes
//! PyTorch's file format; [`HashStore`] and
//! [`PrefixStore`] complete the set.
//!
//! The facade re-exports this crate as `ferrotorch::distributed`.

pub mod error;
pub mod store;

pub use error::{DistError, Result};
pub use store::{FileStore, HashStore, PrefixStore, Store, TcpStore, TcpStoreOptions};
