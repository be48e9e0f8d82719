//! `ProcessGroup`: a set of ranks and the backend that connects them, with
//! PyTorch's collective calls. Each call checks its arguments, starts the
//! operation and returns its [`Work`] at once; `.wait()` blocks (the
//! module's free functions, such as [`all_reduce`](crate::all_reduce),
//! call and wait in one step on the default group).

use std::sync::Arc;

use ferrotorch_core::Tensor;

use crate::backend::Backend;
use crate::collective::Collective;
use crate::error::Result;
use crate::reduce_op::ReduceOp;
use crate::work::Work;

/// A process group (`torch.distributed.ProcessGroup`). Ranks passed to its
/// methods (roots, peers) are ranks *in the group*.
pub struct ProcessGroup {
    name: String,
    backend: Arc<dyn Backend>,
    /// The global rank of each group rank.
    members: Vec<usize>,
}

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessGroup")
            .field("name", &self.name)
            .field("backend", &self.backend.name())
            .field("rank", &self.rank())
            .field("size", &self.size())
            .finish()
    }
}

impl ProcessGroup {
    /// A group named `name` over `backend`, whose group rank `i` is global
    /// rank `members[i]`.
    pub fn new(name: impl Into<String>, backend: Arc<dyn Backend>, members: Vec<usize>) -> Self {
        ProcessGroup {
            name: name.into(),
            backend,
            members,
        }
    }

    /// The group's name (`"0"` for the default group, as PyTorch's).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The backend's name (`"tcp"`, `"mpi"`).
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// This process's rank in the group.
    pub fn rank(&self) -> usize {
        self.backend.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.backend.size()
    }

    /// The global ranks of the members, in group-rank order.
    pub fn members(&self) -> &[usize] {
        &self.members
    }

    /// The group rank of global rank `global`, if it is a member
    /// (`get_group_rank`).
    pub fn group_rank(&self, global: usize) -> Option<usize> {
        self.members.iter().position(|&g| g == global)
    }

    /// The global rank of group rank `rank` (`get_global_rank`).
    pub fn global_rank(&self, rank: usize) -> Option<usize> {
        self.members.get(rank).copied()
    }

    /// Checks and starts `c`.
    pub fn submit(&self, c: Collective) -> Result<Work> {
        c.validate(self.rank(), self.size())?;
        self.backend.submit(c)
    }

    /// Checks `c`, carries it out and waits for it (PyTorch's
    /// `async_op=False`; the module-level functions such as
    /// [`crate::all_reduce`] call this). The first error of the check or
    /// the call.
    pub fn run(&self, c: Collective) -> Result<()> {
        c.validate(self.rank(), self.size())?;
        self.backend.run(c)
    }

    /// Every rank's `tensor` becomes group rank `root`'s.
    pub fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<Work> {
        self.submit(Collective::Broadcast {
            tensor: tensor.clone(),
            root,
        })
    }

    /// Every rank's `tensor` becomes the reduction of all of them.
    pub fn all_reduce(&self, tensor: &Tensor, op: ReduceOp) -> Result<Work> {
        self.submit(Collective::AllReduce {
            tensor: tensor.clone(),
            op,
        })
    }

    /// `root`'s `tensor` becomes the reduction of every rank's.
    pub fn reduce(&self, tensor: &Tensor, root: usize, op: ReduceOp) -> Result<Work> {
        self.submit(Collective::Reduce {
            tensor: tensor.clone(),
            root,
            op,
        })
    }

    /// `outputs[r]` becomes rank `r`'s `input`.
    pub fn all_gather(&self, outputs: &[Tensor], input: &Tensor) -> Result<Work> {
        self.submit(Collective::AllGather {
            outputs: outputs.to_vec(),
            input: input.clone(),
        })
    }

    /// `output` becomes the ranks' `input`s one after the other.
    pub fn all_gather_into_tensor(&self, output: &Tensor, input: &Tensor) -> Result<Work> {
        self.submit(Collective::AllGatherIntoTensor {
            output: output.clone(),
            input: input.clone(),
        })
    }

    /// `output` becomes the reduction of every rank's `inputs[rank]`.
    pub fn reduce_scatter(&self, output: &Tensor, inputs: &[Tensor], op: ReduceOp) -> Result<Work> {
        self.submit(Collective::ReduceScatter {
            output: output.clone(),
            inputs: inputs.to_vec(),
            op,
        })
    }

    /// `output` becomes this rank's block of the reduction of every
    /// rank's `input`.
    pub fn reduce_scatter_tensor(&self, output: &Tensor, input: &Tensor, op: ReduceOp) -> Result<Work> {
        self.submit(Collective::ReduceScatterTensor {
            output: output.clone(),
            input: input.clone(),
            op,
        })
    }

    /// On `root`, `outputs[r]` becomes rank `r`'s `input`; other ranks pass
    /// no outputs.
    pub fn gather(&self, input: &Tensor, outputs: &[Tensor], root: usize) -> Result<Work> {
        self.submit(Collective::Gather {
            outputs: outputs.to_vec(),
            input: input.clone(),
            root,
        })
    }

    /// `output` becomes `root`'s `inputs[rank]`; other ranks pass no inputs.
    pub fn scatter(&self, output: &Tensor, inputs: &[Tensor], root: usize) -> Result<Work> {
        self.submit(Collective::Scatter {
            output: output.clone(),
            inputs: inputs.to_vec(),
            root,
        })
    }

    /// `outputs[r]` becomes rank `r`'s `inputs[rank]`.
    pub fn all_to_all(&self, outputs: &[Tensor], inputs: &[Tensor]) -> Result<Work> {
        self.submit(Collective::AllToAll {
            outputs: outputs.to_vec(),
            inputs: inputs.to_vec(),
        })
    }

    /// Row blocks of `input` to each rank, `output` from each (`splits`
    /// in rows; empty for equal blocks).
    pub fn all_to_all_single(
        &self,
        output: &Tensor,
        input: &Tensor,
        output_splits: &[usize],
        input_splits: &[usize],
    ) -> Result<Work> {
        self.submit(Collective::AllToAllSingle {
            output: output.clone(),
            input: input.clone(),
            output_splits: output_splits.to_vec(),
            input_splits: input_splits.to_vec(),
        })
    }

    /// Completes once every rank has called it.
    pub fn barrier(&self) -> Result<Work> {
        self.submit(Collective::Barrier)
    }

    /// Sends `tensor` to group rank `dst` (`isend`; wait for `send`).
    pub fn send(&self, tensor: &Tensor, dst: usize, tag: u64) -> Result<Work> {
        self.submit(Collective::Send {
            tensor: tensor.clone(),
            dst,
            tag,
        })
    }

    /// Receives into `tensor` from group rank `src` (`irecv`).
    pub fn recv(&self, tensor: &Tensor, src: usize, tag: u64) -> Result<Work> {
        self.submit(Collective::Recv {
            tensor: tensor.clone(),
            src,
            tag,
        })
    }

    /// Starts every send and receive of `ops` (`batch_isend_irecv`).
    pub fn batch_isend_irecv(&self, ops: &[P2pOp]) -> Result<Vec<Work>> {
        ops.iter()
            .map(|op| match op {
                P2pOp::Send { tensor, peer, tag } => self.send(tensor, *peer, *tag),
                P2pOp::Recv { tensor, peer, tag } => self.recv(tensor, *peer, *tag),
            })
            .collect()
    }

    /// Stops the backend: later calls fail.
    pub fn shutdown(&self) {
        self.backend.shutdown()
    }
}

/// One operation of [`ProcessGroup::batch_isend_irecv`] (`dist.P2POp`).
#[derive(Debug, Clone)]
pub enum P2pOp {
    /// `isend(tensor, peer, tag)`.
    Send {
        /// What to send.
        tensor: Tensor,
        /// The destination (group rank).
        peer: usize,
        /// The tag.
        tag: u64,
    },
    /// `irecv(tensor, peer, tag)`.
    Recv {
        /// Where to receive.
        tensor: Tensor,
        /// The source (group rank).
        peer: usize,
        /// The tag.
        tag: u64,
    },
}
