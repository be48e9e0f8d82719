//! # ferrotorch-distributed
//!
//! PyTorch's `torch.distributed` for ferrotorch, in steps (issue 40):
//!
//! - the key-value [`store`]s the processes of a job meet through:
//!   [`TcpStore`] speaks PyTorch's c10d TCPStore wire protocol as client
//!   and as server, so a ferrotorch process and a PyTorch process share one
//!   store; [`FileStore`] writes PyTorch's file format; [`HashStore`] and
//!   [`PrefixStore`] complete the set;
//! - [`init_process_group`] (`env://`, `tcp://`, `file://`, ranks from
//!   torchrun's, mpirun's or Slurm's variables), [`new_group`],
//!   [`destroy_process_group`];
//! - the [`ProcessGroup`] with PyTorch's collectives and point-to-point
//!   calls, each returning a [`Work`], over a [`Backend`]; the embedded
//!   `tcp` backend ([`tcp::TcpBackend`]) runs ring and tree algorithms on
//!   connections between every pair of ranks, and fails every rank with
//!   a message naming the call, its sequence number and the ranks at fault
//!   when a peer dies, stalls or calls a different collective;
//! - PyTorch's object collectives ([`object`]: `all_gather_object`,
//!   `broadcast_object_list`, `gather_object`, `scatter_object_list`) on
//!   pickle values.
//!
//! The facade re-exports this crate as `ferrotorch::distributed`.
//!
//! ```
//! use std::sync::Arc;
//! use ferrotorch_core::Tensor;
//! use ferrotorch_distributed::{HashStore, InitOptions, ReduceOp, all_reduce, destroy_process_group, init_process_group};
//! // A world of one process (a test; real jobs start N with ferrorun or torchrun).
//! init_process_group(InitOptions::new("tcp").world_size(1).rank(0).store(Arc::new(HashStore::new())))?;
//! let t = Tensor::new([1.0f32, 2.0, 3.0])?;
//! all_reduce(&t, ReduceOp::Sum)?;
//! assert_eq!(t.to_vec::<f32>()?, [1.0, 2.0, 3.0]);
//! destroy_process_group();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod backend;
pub mod collective;
pub mod context_parallel;
pub mod ddp;
pub mod device_mesh;
pub mod dtensor;
pub mod env;
pub mod error;
pub mod fsdp;
pub mod group;
pub mod init;
pub mod launcher;
#[cfg(feature = "mpi")]
pub mod mpi_backend;
pub mod object;
pub mod pipelining;
pub mod reduce_op;
pub mod store;
pub mod tcp;
mod tensor_bytes;
pub mod tensor_parallel;
pub mod work;

pub use backend::Backend;
pub use collective::Collective;
pub use device_mesh::{DeviceMesh, init_device_mesh};
pub use env::{LaunchEnv, local_rank};
pub use error::{DistError, Result};
pub use group::{P2pOp, ProcessGroup};
pub use init::{
    DEFAULT_PG_TIMEOUT, InitOptions, all_gather, all_gather_into_tensor, all_reduce, all_to_all, all_to_all_single,
    barrier, batch_isend_irecv, broadcast, default_group, destroy_process_group, gather, get_backend, get_global_rank,
    get_group_rank, get_process_group_ranks, get_rank, get_world_size, init_process_group, irecv, is_available,
    is_initialized, isend, new_group, recv, reduce, reduce_scatter, reduce_scatter_tensor, scatter, send,
};
pub use object::{all_gather_object, broadcast_object_list, gather_object, scatter_object_list};
pub use reduce_op::ReduceOp;
pub use store::{FileStore, HashStore, PrefixStore, Store, TcpStore, TcpStoreOptions};
pub use work::Work;
