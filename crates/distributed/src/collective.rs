//! What a collective or point-to-point call asks for ([`Collective`]),
//! checked once here for every backend: the tensors' count, shapes, dtypes
//! and devices, the roots and peers, the reduce op. Errors name the call
//! and the shapes.

use ferrotorch_core::{DType, Device, Tensor};

use crate::error::{DistError, Result};
use crate::reduce_op::ReduceOp;

/// One call on a process group, with group ranks. Outputs are written in
/// place, as PyTorch's collectives write them.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum Collective {
    /// Every rank's `tensor` becomes `root`'s.
    Broadcast { tensor: Tensor, root: usize },
    /// Every rank's `tensor` becomes the reduction of all of them.
    AllReduce { tensor: Tensor, op: ReduceOp },
    /// `root`'s `tensor` becomes the reduction (the others' are left as
    /// they are, as Gloo leaves them).
    Reduce { tensor: Tensor, root: usize, op: ReduceOp },
    /// `outputs[r]` becomes rank `r`'s `input`.
    AllGather { outputs: Vec<Tensor>, input: Tensor },
    /// `output` (world size times `input`'s first dimension) becomes the
    /// ranks' inputs stacked along dimension 0.
    AllGatherIntoTensor { output: Tensor, input: Tensor },
    /// `output` becomes the reduction of every rank's `inputs[rank]`.
    ReduceScatter {
        output: Tensor,
        inputs: Vec<Tensor>,
        op: ReduceOp,
    },
    /// `output` becomes this rank's block (along dimension 0) of the
    /// reduction of every rank's `input`.
    ReduceScatterTensor {
        output: Tensor,
        input: Tensor,
        op: ReduceOp,
    },
    /// On `root`, `outputs[r]` becomes rank `r`'s `input` (`outputs` is
    /// empty elsewhere).
    Gather {
        outputs: Vec<Tensor>,
        input: Tensor,
        root: usize,
    },
    /// `output` becomes `root`'s `inputs[rank]` (`inputs` is empty
    /// elsewhere).
    Scatter {
        output: Tensor,
        inputs: Vec<Tensor>,
        root: usize,
    },
    /// `outputs[r]` becomes rank `r`'s `inputs[rank]`.
    AllToAll { outputs: Vec<Tensor>, inputs: Vec<Tensor> },
    /// Blocks of dimension 0 of `input` go to the ranks in order, with
    /// `input_splits` rows each (equal blocks when empty); `output`
    /// receives every rank's block for this rank, with `output_splits`.
    AllToAllSingle {
        output: Tensor,
        input: Tensor,
        output_splits: Vec<usize>,
        input_splits: Vec<usize>,
    },
    /// Returns once every rank has called it.
    Barrier,
    /// Sends `tensor` to `dst`, matched by `dst`'s `Recv` with the same tag.
    Send { tensor: Tensor, dst: usize, tag: u64 },
    /// Receives into `tensor` from `src`.
    Recv { tensor: Tensor, src: usize, tag: u64 },
}

/// The wire code of each kind of call (collective fingerprints).
pub(crate) mod code {
    pub const BROADCAST: u8 = 1;
    pub const ALL_REDUCE: u8 = 2;
    pub const REDUCE: u8 = 3;
    pub const ALL_GATHER: u8 = 4;
    pub const REDUCE_SCATTER: u8 = 5;
    pub const GATHER: u8 = 6;
    pub const SCATTER: u8 = 7;
    pub const ALL_TO_ALL: u8 = 8;
    pub const BARRIER: u8 = 9;
    pub const P2P: u8 = 10;
}

impl Collective {
    /// PyTorch's name of the call.
    pub fn name(&self) -> &'static str {
        match self {
            Collective::Broadcast { .. } => "broadcast",
            Collective::AllReduce { .. } => "all_reduce",
            Collective::Reduce { .. } => "reduce",
            Collective::AllGather { .. } => "all_gather",
            Collective::AllGatherIntoTensor { .. } => "all_gather_into_tensor",
            Collective::ReduceScatter { .. } => "reduce_scatter",
            Collective::ReduceScatterTensor { .. } => "reduce_scatter_tensor",
            Collective::Gather { .. } => "gather",
            Collective::Scatter { .. } => "scatter",
            Collective::AllToAll { .. } => "all_to_all",
            Collective::AllToAllSingle { .. } => "all_to_all_single",
            Collective::Barrier => "barrier",
            Collective::Send { .. } => "send",
            Collective::Recv { .. } => "recv",
        }
    }

    /// Whether this is a point-to-point call (no group sequence number).
    pub fn is_p2p(&self) -> bool {
        matches!(self, Collective::Send { .. } | Collective::Recv { .. })
    }

    /// What every rank must agree on: the kind, the dtype, the reduce op
    /// and the size of the per-rank block, packed in one number that
    /// travels with every message (the DETAIL check of
    /// TORCH_DISTRIBUTED_DEBUG, always on).
    pub(crate) fn fingerprint(&self) -> u64 {
        let (kind, dtype, op, numel): (u8, Option<DType>, Option<ReduceOp>, usize) = match self {
            Collective::Broadcast { tensor, .. } => (code::BROADCAST, Some(tensor.dtype()), None, tensor.numel()),
            Collective::AllReduce { tensor, op } => (code::ALL_REDUCE, Some(tensor.dtype()), Some(*op), tensor.numel()),
            Collective::Reduce { tensor, op, .. } => (code::REDUCE, Some(tensor.dtype()), Some(*op), tensor.numel()),
            Collective::AllGather { input, .. } | Collective::AllGatherIntoTensor { input, .. } => {
                (code::ALL_GATHER, Some(input.dtype()), None, input.numel())
            }
            Collective::ReduceScatter { output, op, .. } | Collective::ReduceScatterTensor { output, op, .. } => {
                (code::REDUCE_SCATTER, Some(output.dtype()), Some(*op), output.numel())
            }
            Collective::Gather { input, .. } => (code::GATHER, Some(input.dtype()), None, input.numel()),
            Collective::Scatter { output, .. } => (code::SCATTER, Some(output.dtype()), None, output.numel()),
            // Block sizes may differ per pair: only the kind and dtype agree.
            Collective::AllToAll { inputs, .. } => (code::ALL_TO_ALL, inputs.first().map(Tensor::dtype), None, 0),
            Collective::AllToAllSingle { input, .. } => (code::ALL_TO_ALL, Some(input.dtype()), None, 0),
            Collective::Barrier => (code::BARRIER, None, None, 0),
            Collective::Send { tensor, .. } | Collective::Recv { tensor, .. } => {
                (code::P2P, Some(tensor.dtype()), None, tensor.numel())
            }
        };
        let dtype = dtype.map_or(0xFF, dtype_code);
        let op = op.map_or(0xFF, ReduceOp::code);
        (u64::from(kind) << 56) | (u64::from(dtype) << 48) | (u64::from(op) << 40) | (numel as u64 & 0xFF_FFFF_FFFF)
    }

    /// Checks the call on a group of `size` ranks where this one is `rank`.
    pub fn validate(&self, rank: usize, size: usize) -> Result<()> {
        let op = self.name();
        let root_ok = |root: usize, what: &str| {
            if root < size {
                Ok(())
            } else {
                Err(DistError::InvalidArgument(format!(
                    "{op}: {what} {root} is not a rank of a group of {size}"
                )))
            }
        };
        match self {
            Collective::Broadcast { tensor, root } => {
                root_ok(*root, "root")?;
                cpu(op, tensor)
            }
            Collective::AllReduce { tensor, op: r } => {
                cpu(op, tensor)?;
                r.check(op, tensor.dtype())
            }
            Collective::Reduce { tensor, root, op: r } => {
                root_ok(*root, "root")?;
                cpu(op, tensor)?;
                r.check(op, tensor.dtype())
            }
            Collective::AllGather { outputs, input } => {
                count(op, "output tensors", outputs.len(), size)?;
                cpu(op, input)?;
                outputs.iter().try_for_each(|o| same(op, o, input))
            }
            Collective::AllGatherIntoTensor { output, input } => {
                cpu(op, input)?;
                cpu(op, output)?;
                stacked(op, output, input, size)
            }
            Collective::ReduceScatter { output, inputs, op: r } => {
                count(op, "input tensors", inputs.len(), size)?;
                cpu(op, output)?;
                r.check(op, output.dtype())?;
                inputs.iter().try_for_each(|i| same(op, i, output))
            }
            Collective::ReduceScatterTensor { output, input, op: r } => {
                cpu(op, input)?;
                cpu(op, output)?;
                r.check(op, output.dtype())?;
                stacked(op, input, output, size)
            }
            Collective::Gather { outputs, input, root } => {
                root_ok(*root, "root")?;
                cpu(op, input)?;
                if rank == *root {
                    count(op, "output tensors on the root", outputs.len(), size)?;
                    outputs.iter().try_for_each(|o| same(op, o, input))
                } else if outputs.is_empty() {
                    Ok(())
                } else {
                    Err(DistError::InvalidArgument(format!(
                        "{op}: only the root (rank {root}) passes output tensors; rank {rank} passed {}",
                        outputs.len()
                    )))
                }
            }
            Collective::Scatter { output, inputs, root } => {
                root_ok(*root, "root")?;
                cpu(op, output)?;
                if rank == *root {
                    count(op, "input tensors on the root", inputs.len(), size)?;
                    inputs.iter().try_for_each(|i| same(op, i, output))
                } else if inputs.is_empty() {
                    Ok(())
                } else {
                    Err(DistError::InvalidArgument(format!(
                        "{op}: only the root (rank {root}) passes input tensors; rank {rank} passed {}",
                        inputs.len()
                    )))
                }
            }
            Collective::AllToAll { outputs, inputs } => {
                count(op, "output tensors", outputs.len(), size)?;
                count(op, "input tensors", inputs.len(), size)?;
                let dtype = inputs[0].dtype();
                for t in outputs.iter().chain(inputs) {
                    cpu(op, t)?;
                    if t.dtype() != dtype {
                        return Err(DistError::InvalidArgument(format!(
                            "{op}: tensors of dtypes {} and {} in one call",
                            dtype.name(),
                            t.dtype().name()
                        )));
                    }
                }
                Ok(())
            }
            Collective::AllToAllSingle {
                output,
                input,
                output_splits,
                input_splits,
            } => {
                cpu(op, input)?;
                cpu(op, output)?;
                if input.dtype() != output.dtype() {
                    return Err(DistError::InvalidArgument(format!(
                        "{op}: input of dtype {} and output of dtype {}",
                        input.dtype().name(),
                        output.dtype().name()
                    )));
                }
                splits(op, "input", input, input_splits, size)?;
                splits(op, "output", output, output_splits, size)
            }
            Collective::Barrier => Ok(()),
            Collective::Send { tensor, dst, .. } => {
                root_ok(*dst, "destination")?;
                if *dst == rank {
                    return Err(DistError::InvalidArgument(format!("{op}: rank {rank} sends to itself")));
                }
                cpu(op, tensor)
            }
            Collective::Recv { tensor, src, .. } => {
                root_ok(*src, "source")?;
                if *src == rank {
                    return Err(DistError::InvalidArgument(format!(
                        "{op}: rank {rank} receives from itself"
                    )));
                }
                cpu(op, tensor)
            }
        }
    }
}

/// The dtype's wire code.
pub(crate) fn dtype_code(d: DType) -> u8 {
    ferrotorch_core::ALL_DTYPES.iter().position(|x| *x == d).unwrap_or(0xFE) as u8
}

fn cpu(op: &str, t: &Tensor) -> Result<()> {
    if t.device() == Device::Cpu {
        Ok(())
    } else {
        Err(DistError::InvalidArgument(format!(
            "{op}: a tensor on {}; the tcp and mpi backends move CPU tensors",
            t.device()
        )))
    }
}

fn count(op: &str, what: &str, got: usize, size: usize) -> Result<()> {
    if got == size {
        Ok(())
    } else {
        Err(DistError::InvalidArgument(format!(
            "{op}: {got} {what} for a group of {size} ranks (one per rank)"
        )))
    }
}

fn same(op: &str, t: &Tensor, like: &Tensor) -> Result<()> {
    cpu(op, t)?;
    if t.shape() != like.shape() || t.dtype() != like.dtype() {
        return Err(DistError::InvalidArgument(format!(
            "{op}: a tensor of shape {:?} and dtype {} where {:?} and {} were expected",
            t.shape(),
            t.dtype().name(),
            like.shape(),
            like.dtype().name()
        )));
    }
    Ok(())
}

/// `big` must hold `size` blocks of `small`'s elements.
fn stacked(op: &str, big: &Tensor, small: &Tensor, size: usize) -> Result<()> {
    if big.dtype() != small.dtype() || big.numel() != small.numel() * size {
        return Err(DistError::InvalidArgument(format!(
            "{op}: a tensor of shape {:?} ({}) must hold {size} blocks of shape {:?} ({})",
            big.shape(),
            big.dtype().name(),
            small.shape(),
            small.dtype().name()
        )));
    }
    Ok(())
}

fn splits(op: &str, what: &str, t: &Tensor, s: &[usize], size: usize) -> Result<()> {
    let rows = t.shape().first().copied().unwrap_or(1);
    if s.is_empty() {
        if rows % size != 0 {
            return Err(DistError::InvalidArgument(format!(
                "{op}: the {what}'s {rows} rows do not split evenly among {size} ranks"
            )));
        }
        return Ok(());
    }
    count(op, &format!("{what} split sizes"), s.len(), size)?;
    if s.iter().sum::<usize>() != rows {
        return Err(DistError::InvalidArgument(format!(
            "{op}: {what} split sizes {s:?} add up to {}, the tensor has {rows} rows",
            s.iter().sum::<usize>()
        )));
    }
    Ok(())
}

/// The byte length of each rank's row block of `t` in an
/// `all_to_all_single`: `splits` rows each, or equal blocks when empty.
pub(crate) fn row_block_bytes(t: &Tensor, splits: &[usize], n: usize) -> Vec<usize> {
    let rows = t.shape().first().copied().unwrap_or(1);
    let row_bytes = (t.numel() * t.element_size()).checked_div(rows).unwrap_or(0);
    if splits.is_empty() {
        vec![rows / n * row_bytes; n]
    } else {
        splits.iter().map(|s| s * row_bytes).collect()
    }
}
