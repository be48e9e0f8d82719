//! Ops on DTensors by sharding rules (PyTorch's `_ops/`): each op looks at
//! its inputs' placements mesh dimension by mesh dimension, picks the
//! placement of its output, redistributes an input only where the rule
//! needs it, and runs the plain op on the local tensors, so autograd runs
//! through it. The result equals the plain op on the full tensors.
//!
//! | op | per mesh dimension |
//! |---|---|
//! | `add`, `sub` | equal placements stay (`Partial(sum)` too); otherwise both go to `Replicate` |
//! | `mul` | equal shards and replicas stay; `Partial(sum)` times `Replicate` stays partial; otherwise `Replicate` |
//! | `matmul` (2-D) | `S(0)·R -> S(0)`, `R·S(1) -> S(1)`, `S(1)·S(0) -> P(sum)`, `R·R -> R`, `P·R -> P`, `R·P -> P`; otherwise `Replicate` |
//! | `sum` (all) | `Shard -> P(sum)`, `P(sum)` stays, `R` stays |

use ferrotorch_core::Tensor;

use super::{DTensor, Placement};
use crate::error::{DistError, Result};
use crate::reduce_op::ReduceOp;

const PSUM: Placement = Placement::Partial(ReduceOp::Sum);

/// Checks that two DTensors share a mesh and a shape (`what` names the op).
fn same_layout(a: &DTensor, b: &DTensor, what: &str, same_shape: bool) -> Result<()> {
    if !std::sync::Arc::ptr_eq(&a.mesh, &b.mesh) && a.mesh.ranks() != b.mesh.ranks() {
        return Err(DistError::InvalidArgument(format!(
            "DTensor {what}: the operands live on different meshes ({:?} and {:?})",
            a.mesh.ranks(),
            b.mesh.ranks()
        )));
    }
    if same_shape && a.shape != b.shape {
        return Err(DistError::InvalidArgument(format!(
            "DTensor {what}: shapes {:?} and {:?} differ (broadcasting between DTensors is not supported)",
            a.shape, b.shape
        )));
    }
    Ok(())
}

/// Runs `f` on the local tensors of `a` and `b` moved to `pa` / `pb`,
/// giving a DTensor of `shape` with placements `out`.
fn binary(
    a: &DTensor,
    b: &DTensor,
    pa: Vec<Placement>,
    pb: Vec<Placement>,
    out: Vec<Placement>,
    shape: Vec<usize>,
    f: impl Fn(&Tensor, &Tensor) -> ferrotorch_core::Result<Tensor>,
) -> Result<DTensor> {
    let la = a.redistribute(&pa)?.local;
    let lb = b.redistribute(&pb)?.local;
    Ok(DTensor {
        local: f(&la, &lb)?,
        mesh: a.mesh.clone(),
        placements: out,
        shape,
    })
}

/// The per-mesh-dimension rule of an element-wise op: the placements the
/// inputs take and the output's.
fn pointwise(
    a: &DTensor,
    b: &DTensor,
    partial_ok: impl Fn(Placement, Placement) -> Option<Placement>,
) -> [Vec<Placement>; 3] {
    let (mut pa, mut pb, mut out) = (Vec::new(), Vec::new(), Vec::new());
    for (&x, &y) in a.placements.iter().zip(&b.placements) {
        let (i, j, o) = match partial_ok(x, y) {
            Some(o) => (x, y, o),
            None => (Placement::Replicate, Placement::Replicate, Placement::Replicate),
        };
        pa.push(i);
        pb.push(j);
        out.push(o);
    }
    [pa, pb, out]
}

/// The rule of `add` and `sub`: equal placements stay (a partial sum
/// too, as sums of partial sums add); anything else goes to `Replicate`.
fn additive(x: Placement, y: Placement) -> Option<Placement> {
    (x == y && (!x.is_partial() || x == PSUM)).then_some(x)
}

impl DTensor {
    /// `self + other` (same shape): see the module's rules.
    pub fn add(&self, other: &DTensor) -> Result<DTensor> {
        same_layout(self, other, "add", true)?;
        let [pa, pb, out] = pointwise(self, other, additive);
        binary(self, other, pa, pb, out, self.shape.clone(), |a, b| a.add(b))
    }

    /// `self - other` (same shape): see the module's rules.
    pub fn sub(&self, other: &DTensor) -> Result<DTensor> {
        same_layout(self, other, "sub", true)?;
        let [pa, pb, out] = pointwise(self, other, additive);
        binary(self, other, pa, pb, out, self.shape.clone(), |a, b| a.sub(b))
    }

    /// `self * other` (same shape): see the module's rules.
    pub fn mul(&self, other: &DTensor) -> Result<DTensor> {
        same_layout(self, other, "mul", true)?;
        let [pa, pb, out] = pointwise(self, other, |x, y| match (x, y) {
            (PSUM, Placement::Replicate) | (Placement::Replicate, PSUM) => Some(PSUM),
            (x, y) if x == y && !x.is_partial() => Some(x),
            _ => None,
        });
        binary(self, other, pa, pb, out, self.shape.clone(), |a, b| a.mul(b))
    }

    /// The matrix product of two 2-D DTensors: see the module's rules.
    /// Errors: operands that are not 2-D or whose inner sizes differ,
    /// different meshes.
    pub fn matmul(&self, other: &DTensor) -> Result<DTensor> {
        same_layout(self, other, "matmul", false)?;
        let (a, b) = (&self.shape, &other.shape);
        if a.len() != 2 || b.len() != 2 || a[1] != b[0] {
            return Err(DistError::InvalidArgument(format!(
                "DTensor matmul: shapes {a:?} and {b:?} (2-D, inner sizes equal)"
            )));
        }
        use Placement::{Replicate as R, Shard as S};
        let [pa, pb, out] = pointwise(self, other, |x, y| match (x, y) {
            (S(0), R) => Some(S(0)),
            (R, S(1)) => Some(S(1)),
            (S(1), S(0)) | (PSUM, R) | (R, PSUM) => Some(PSUM),
            (R, R) => Some(R),
            _ => None,
        });
        binary(self, other, pa, pb, out, vec![a[0], b[1]], |x, y| x.matmul(y))
    }

    /// The sum of every element, a 0-D DTensor: shards become partial
    /// sums. Errors: a partial placement other than `Partial(sum)`.
    pub fn sum(&self) -> Result<DTensor> {
        let mut out = Vec::with_capacity(self.placements.len());
        let mut moved = Vec::with_capacity(self.placements.len());
        for &p in &self.placements {
            let (m, o) = match p {
                Placement::Shard(_) => (p, PSUM),
                Placement::Replicate => (p, p),
                PSUM => (p, PSUM),
                Placement::Partial(_) => (Placement::Replicate, Placement::Replicate),
            };
            moved.push(m);
            out.push(o);
        }
        let local = self.redistribute(&moved)?.local.sum()?;
        Ok(DTensor {
            local,
            mesh: self.mesh.clone(),
            placements: out,
            shape: Vec::new(),
        })
    }
}
