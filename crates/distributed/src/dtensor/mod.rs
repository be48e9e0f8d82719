//! DTensor (PyTorch's `torch.distributed.tensor`): a tensor laid over a
//! [`DeviceMesh`], each rank holding a local tensor, with one
//! [`Placement`] per mesh dimension saying how the local tensors make the
//! global one: `Shard(dim)`, `Replicate` or `Partial(op)`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ferrotorch_core::Tensor;
//! use ferrotorch_distributed::{self as dist, InitOptions};
//! use ferrotorch_distributed::device_mesh::init_device_mesh;
//! use ferrotorch_distributed::dtensor::{Placement, distribute_tensor};
//! dist::init_process_group(InitOptions::new("tcp"))?;
//! let mesh = Arc::new(init_device_mesh("cpu", &[2], None)?);
//! let x = Tensor::arange(8)?.view([4, 2])?;
//! // Rows 0-1 on rank 0, rows 2-3 on rank 1 (rank 0's tensor is the source).
//! let d = distribute_tensor(&x, &mesh, &[Placement::Shard(0)])?;
//! assert_eq!(d.to_local().shape(), [2, 2]);
//! let whole = d.full_tensor()?;                    // all-gather
//! let cols = d.redistribute(&[Placement::Shard(1)])?; // all-to-all
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Autograd runs through the local tensors: `redistribute` is a
//! differentiable function whose backward redistributes the gradient the
//! other way, and `from_local` / `to_local` pass gradients straight
//! through, as in PyTorch.

mod ops;
mod ops_shape;
pub mod placement;
pub(crate) mod redistribute;

use std::sync::Arc;

use ferrotorch_core::Tensor;

pub use placement::{Placement, chunk_range};

use crate::device_mesh::DeviceMesh;
use crate::error::{DistError, Result};

/// A distributed tensor: this rank's local tensor, the mesh, one
/// placement per mesh dimension and the global shape.
#[derive(Clone)]
pub struct DTensor {
    local: Tensor,
    mesh: Arc<DeviceMesh>,
    placements: Vec<Placement>,
    shape: Vec<usize>,
}

impl std::fmt::Debug for DTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let placements: Vec<String> = self.placements.iter().map(ToString::to_string).collect();
        f.debug_struct("DTensor")
            .field("shape", &self.shape)
            .field("placements", &placements)
            .field("mesh_shape", &self.mesh.shape())
            .field("local_shape", &self.local.shape())
            .finish()
    }
}

/// The shape of this rank's local tensor of a DTensor of `shape` with
/// `placements` on `mesh` (shards nested left to right, `torch.chunk`'s
/// sizes); an empty tensor's shape (dimension 0 of 0) for a rank outside
/// the mesh.
pub fn local_shape(mesh: &DeviceMesh, placements: &[Placement], shape: &[usize]) -> Result<Vec<usize>> {
    let mut local = shape.to_vec();
    if mesh.get_coordinate().is_none() {
        return Ok(vec![0]);
    }
    for (d, p) in placements.iter().enumerate() {
        if let Placement::Shard(dim) = p {
            local[*dim] = chunk_range(local[*dim], mesh.size(d)?, mesh.get_local_rank(d)?).1;
        }
    }
    Ok(local)
}

/// `distribute_tensor(tensor, mesh, placements)`: every rank passes a
/// tensor of the same shape; the rank at coordinate 0 of each mesh
/// dimension is the source of truth (scattered for `Shard`, broadcast for
/// `Replicate`), so the ranks end with their pieces of rank 0's tensor.
/// The result is a leaf that requires a gradient when `tensor` does.
/// Errors: a placement count other than the mesh's dimensions, a shard of
/// a dimension the tensor lacks, a `Partial` placement (only ops make
/// those), a rank outside the mesh.
pub fn distribute_tensor(tensor: &Tensor, mesh: &Arc<DeviceMesh>, placements: &[Placement]) -> Result<DTensor> {
    let shape = tensor.shape().to_vec();
    redistribute::check(mesh, placements, &shape, "distribute_tensor")?;
    if let Some(p) = placements.iter().find(|p| p.is_partial()) {
        return Err(DistError::InvalidArgument(format!(
            "distribute_tensor: {p} is not a placement to distribute a tensor with (use Shard or Replicate)"
        )));
    }
    if mesh.get_coordinate().is_none() {
        return Err(DistError::InvalidArgument(
            "distribute_tensor: this rank is not in the mesh".into(),
        ));
    }
    let mut x = tensor.detach().contiguous()?;
    for (d, p) in placements.iter().enumerate() {
        x = redistribute::from_source(&x, mesh, d, *p)?;
    }
    let local = x.detach().requires_grad_(tensor.requires_grad())?;
    Ok(DTensor {
        local,
        mesh: mesh.clone(),
        placements: placements.to_vec(),
        shape,
    })
}

impl DTensor {
    /// `DTensor.from_local(local, mesh, placements, shape=...)`: wraps
    /// this rank's `local` tensor, which stays in the autograd graph. The
    /// global shape is `shape` when given, else the local shape times the
    /// mesh dimensions' sizes along the sharded dimensions (even shards).
    /// Errors: as [`distribute_tensor`]'s, and a `shape` whose shards do not
    /// have `local`'s shape on this rank.
    pub fn from_local(
        local: &Tensor,
        mesh: &Arc<DeviceMesh>,
        placements: &[Placement],
        shape: Option<&[usize]>,
    ) -> Result<DTensor> {
        let shape = match shape {
            Some(s) => s.to_vec(),
            None => {
                let mut s = local.shape().to_vec();
                for (d, p) in placements.iter().enumerate() {
                    if let Placement::Shard(dim) = p
                        && let Some(len) = s.get_mut(*dim)
                    {
                        *len *= mesh.size(d)?;
                    }
                }
                s
            }
        };
        redistribute::check(mesh, placements, &shape, "DTensor.from_local")?;
        let want = local_shape(mesh, placements, &shape)?;
        if mesh.get_coordinate().is_some() && local.shape() != want.as_slice() {
            return Err(DistError::InvalidArgument(format!(
                "DTensor.from_local: a local tensor of shape {:?} on this rank, where placements [{}] of a global \
                 shape {shape:?} give {want:?}",
                local.shape(),
                placements
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(DTensor {
            local: local.clone(),
            mesh: mesh.clone(),
            placements: placements.to_vec(),
            shape,
        })
    }

    /// This rank's local tensor (`to_local()`), in the autograd graph.
    pub fn to_local(&self) -> Tensor {
        self.local.clone()
    }

    /// The global shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The placements, one per mesh dimension.
    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }

    /// The mesh.
    pub fn device_mesh(&self) -> &Arc<DeviceMesh> {
        &self.mesh
    }

    /// Whether the local tensor requires a gradient.
    pub fn requires_grad(&self) -> bool {
        self.local.requires_grad()
    }

    /// This DTensor with `placements`, moved there with the right
    /// collective per mesh dimension (see `redistribute.rs`);
    /// differentiable. Errors: a placement count other than the mesh's
    /// dimensions, a shard of a dimension the tensor lacks, a change
    /// `Replicate` -> `Partial(product)`.
    pub fn redistribute(&self, placements: &[Placement]) -> Result<DTensor> {
        redistribute::check(&self.mesh, placements, &self.shape, "redistribute")?;
        let local = redistribute::redistribute(&self.local, &self.mesh, &self.shape, &self.placements, placements)?;
        Ok(DTensor {
            local,
            mesh: self.mesh.clone(),
            placements: placements.to_vec(),
            shape: self.shape.clone(),
        })
    }

    /// The whole tensor on every rank (`full_tensor()`: redistributed to
    /// `Replicate` everywhere); differentiable.
    pub fn full_tensor(&self) -> Result<Tensor> {
        let all = vec![Placement::Replicate; self.mesh.ndim()];
        Ok(self.redistribute(&all)?.to_local())
    }
}
