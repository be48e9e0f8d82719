//! How a DTensor lies on one mesh dimension (PyTorch's `Shard`,
//! `Replicate`, `Partial`), and `torch.chunk`'s arithmetic, which decides
//! the shards' sizes.

use crate::reduce_op::ReduceOp;

/// A DTensor's placement on one mesh dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// `Shard(dim)`: each rank along the mesh dimension holds one chunk of
    /// tensor dimension `dim`, as `torch.chunk` cuts it (the last chunks
    /// may be shorter, or empty).
    Shard(usize),
    /// `Replicate()`: every rank along the mesh dimension holds the whole.
    Replicate,
    /// `Partial(op)`: the value is the reduction by `op` of the ranks'
    /// tensors along the mesh dimension (pending a reduction).
    Partial(ReduceOp),
}

impl Placement {
    /// `Partial("sum")`, the partial placement ops produce.
    pub const PARTIAL_SUM: Placement = Placement::Partial(ReduceOp::Sum);

    /// Whether this is `Shard`, on `dim` when given.
    pub fn is_shard(&self, dim: Option<usize>) -> bool {
        matches!(self, Placement::Shard(d) if dim.is_none_or(|x| x == *d))
    }

    /// Whether this is `Replicate`.
    pub fn is_replicate(&self) -> bool {
        *self == Placement::Replicate
    }

    /// Whether this is `Partial`.
    pub fn is_partial(&self) -> bool {
        matches!(self, Placement::Partial(_))
    }

    /// The placement of this one's gradient: a partial value's gradient is
    /// the same on every rank (`Replicate`); the others keep theirs.
    pub(crate) fn of_gradient(self) -> Placement {
        match self {
            Placement::Partial(_) => Placement::Replicate,
            p => p,
        }
    }
}

impl std::fmt::Display for Placement {
    /// PyTorch's short form: `S(0)`, `R`, `P(sum)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Placement::Shard(d) => write!(f, "S({d})"),
            Placement::Replicate => write!(f, "R"),
            Placement::Partial(op) => write!(f, "P({})", format!("{op:?}").to_lowercase()),
        }
    }
}

/// The chunk of a dimension of `len` elements that coordinate `k` of `n`
/// holds, as `torch.chunk(n)` cuts it: (start, length). Every chunk but
/// the last non-empty ones has `ceil(len / n)` elements; chunks past the
/// end are empty.
pub fn chunk_range(len: usize, n: usize, k: usize) -> (usize, usize) {
    let full = len.div_ceil(n.max(1));
    let start = (full * k).min(len);
    (start, full.min(len - start))
}

/// The padded length of every chunk in a collective: `ceil(len / n)`.
pub(crate) fn full_chunk(len: usize, n: usize) -> usize {
    len.div_ceil(n.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_follow_torch_chunk() {
        // torch.chunk(arange(7), 4) -> [0,1] [2,3] [4,5] [6]
        let got: Vec<_> = (0..4).map(|k| chunk_range(7, 4, k)).collect();
        assert_eq!(got, [(0, 2), (2, 2), (4, 2), (6, 1)]);
        // torch.chunk(arange(5), 4) -> [0,1] [2,3] [4] and an empty one
        let got: Vec<_> = (0..4).map(|k| chunk_range(5, 4, k)).collect();
        assert_eq!(got, [(0, 2), (2, 2), (4, 1), (5, 0)]);
        // Fewer elements than chunks.
        let got: Vec<_> = (0..3).map(|k| chunk_range(1, 3, k)).collect();
        assert_eq!(got, [(0, 1), (1, 0), (1, 0)]);
        assert_eq!(chunk_range(0, 2, 1), (0, 0));
        assert_eq!(full_chunk(7, 4), 2);
    }

    #[test]
    fn placements_print_as_pytorch() {
        assert_eq!(Placement::Shard(1).to_string(), "S(1)");
        assert_eq!(Placement::Replicate.to_string(), "R");
        assert_eq!(Placement::PARTIAL_SUM.to_string(), "P(sum)");
        assert!(Placement::Shard(0).is_shard(None) && !Placement::Shard(0).is_shard(Some(1)));
        assert_eq!(Placement::PARTIAL_SUM.of_gradient(), Placement::Replicate);
    }
}
