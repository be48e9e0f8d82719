//! Key-value stores (`torch.distributed.Store`): how the processes of a job
//! find each other before any collective runs.
//!
//! Four stores share the [`Store`] trait, with PyTorch's semantics:
//! [`TcpStore`] (a server in one process, clients in all; PyTorch's c10d
//! wire protocol, so a PyTorch process and a ferrotorch process share one
//! store), [`FileStore`] (a file on a shared file system, in PyTorch's
//! record format), [`HashStore`] (in one process) and [`PrefixStore`]
//! (a namespace over another store).
//!
//! ```
//! use std::time::Duration;
//! use ferrotorch_distributed::store::{HashStore, PrefixStore, Store};
//! let store = std::sync::Arc::new(HashStore::new());
//! store.set("rank0/addr", b"127.0.0.1:29500")?;
//! assert_eq!(store.add("joined", 1)?, 1);
//! assert_eq!(store.add("joined", 2)?, 3);
//! assert_eq!(store.get("joined")?, b"3");
//! let group = PrefixStore::new("group1", store.clone());
//! group.set("x", b"1")?;
//! assert!(store.check(&["group1/x"])?);
//! let err = store.wait_timeout(&["never"], Duration::from_millis(20)).unwrap_err();
//! assert!(err.to_string().contains("never"));
//! # Ok::<(), ferrotorch_distributed::DistError>(())
//! ```

mod base;
mod file;
mod hash;
mod prefix;
pub mod tcp;

pub use base::{DEFAULT_TIMEOUT, Store};
pub(crate) use base::{add_to_counter, check_pairs, compare_set_outcome, deadline, key_list};
pub use file::FileStore;
pub use hash::HashStore;
pub use prefix::PrefixStore;
pub use tcp::{TcpStore, TcpStoreOptions, TcpStoreServer};
