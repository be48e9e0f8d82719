//! `DeviceMesh` (PyTorch's `torch.distributed.device_mesh`): the ranks of a
//! job laid out as an n-dimensional array, with a process group along each
//! dimension. FSDP shards over one dimension, tensor parallel over another,
//! HSDP replicates over one and shards over the other; DTensor places its
//! shards by mesh dimension.
//!
//! ```no_run
//! use ferrotorch_distributed::{self as dist, InitOptions};
//! use ferrotorch_distributed::device_mesh::init_device_mesh;
//! dist::init_process_group(InitOptions::new("tcp"))?;
//! // 4 ranks as 2 x 2: data parallel across rows, tensor parallel within.
//! let mesh = init_device_mesh("cpu", &[2, 2], Some(&["dp", "tp"]))?;
//! let tp = mesh.get_group("tp")?;            // this rank's row
//! let dp_mesh = mesh.submesh(&["dp"])?;      // a 1-D mesh over its column
//! assert_eq!(dp_mesh.size(None)?, 2);
//! # Ok::<(), ferrotorch_distributed::DistError>(())
//! ```

use std::sync::Arc;

use ferrotorch_core::Tensor;

use crate::error::{DistError, Result};
use crate::group::ProcessGroup;
use crate::init;

/// A mesh dimension, by index or by name (`mesh.get_group(0)`,
/// `mesh.get_group("tp")`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeshDim<'a> {
    /// The dimension's index.
    Index(usize),
    /// The dimension's name (`mesh_dim_names`).
    Name(&'a str),
}

impl From<usize> for MeshDim<'_> {
    fn from(i: usize) -> Self {
        MeshDim::Index(i)
    }
}

impl<'a> From<&'a str> for MeshDim<'a> {
    fn from(name: &'a str) -> Self {
        MeshDim::Name(name)
    }
}

/// What the `mesh_dim` arguments take, as PyTorch's `mesh_dim=None`: a
/// dimension's index or name, or `None` (the only dimension of a 1-D
/// mesh; for [`DeviceMesh::size`], the whole mesh).
pub trait OptionalMeshDim<'a> {
    /// The dimension, or `None`.
    fn mesh_dim(self) -> Option<MeshDim<'a>>;
}

impl<'a> OptionalMeshDim<'a> for usize {
    fn mesh_dim(self) -> Option<MeshDim<'a>> {
        Some(MeshDim::Index(self))
    }
}

impl<'a> OptionalMeshDim<'a> for &'a str {
    fn mesh_dim(self) -> Option<MeshDim<'a>> {
        Some(MeshDim::Name(self))
    }
}

impl<'a> OptionalMeshDim<'a> for MeshDim<'a> {
    fn mesh_dim(self) -> Option<MeshDim<'a>> {
        Some(self)
    }
}

impl<'a> OptionalMeshDim<'a> for Option<MeshDim<'a>> {
    fn mesh_dim(self) -> Option<MeshDim<'a>> {
        self
    }
}

/// The ranks of a job as an n-dimensional array (row-major), with this
/// rank's process group along each dimension.
#[derive(Debug, Clone)]
pub struct DeviceMesh {
    device_type: String,
    /// Global ranks, row-major over `shape`.
    ranks: Vec<usize>,
    shape: Vec<usize>,
    dim_names: Option<Vec<String>>,
    /// This rank's coordinates; `None` when it is not in the mesh.
    coordinate: Option<Vec<usize>>,
    /// This rank's group along each dimension (empty when it is not in
    /// the mesh).
    groups: Vec<Arc<ProcessGroup>>,
}

/// `init_device_mesh(device_type, mesh_shape, mesh_dim_names)`: every
/// rank of the job, laid out row-major over `mesh_shape` (whose product
/// must be the world size), with a process group along each dimension.
/// Every process calls it, in the same order as its other group-making
/// calls. Errors: no default group, a shape whose product is not the world
/// size, names that are not one per dimension or repeat, a device type
/// other than `"cpu"`.
pub fn init_device_mesh(
    device_type: &str,
    mesh_shape: &[usize],
    mesh_dim_names: Option<&[&str]>,
) -> Result<DeviceMesh> {
    let world = init::get_world_size()?;
    let numel = mesh_shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if mesh_shape.is_empty() || numel != Some(world) {
        return Err(DistError::InvalidArgument(format!(
            "init_device_mesh: a mesh of shape {mesh_shape:?} needs the world size to be the product of its sizes; \
             the world size is {world}"
        )));
    }
    DeviceMesh::new(device_type, (0..world).collect(), mesh_shape, mesh_dim_names)
}

impl DeviceMesh {
    /// `DeviceMesh(device_type, mesh)`: the global ranks `ranks` laid out
    /// row-major over `shape` (a subset of the job's ranks, each at most
    /// once). Every process of the job calls it (also those outside the
    /// mesh, whose `get_coordinate` is then `None`), in the same order as
    /// its other group-making calls: it makes a process group for every
    /// line of the mesh along every dimension.
    pub fn new(device_type: &str, ranks: Vec<usize>, shape: &[usize], dim_names: Option<&[&str]>) -> Result<Self> {
        if device_type != "cpu" {
            return Err(DistError::InvalidArgument(format!(
                "DeviceMesh: device type {device_type:?} has no backend here; the process groups move CPU tensors (\"cpu\")"
            )));
        }
        let world = init::get_world_size()?;
        let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if shape.is_empty() || shape.contains(&0) || numel != Some(ranks.len()) {
            return Err(DistError::InvalidArgument(format!(
                "DeviceMesh: {} ranks do not fill a mesh of shape {shape:?}",
                ranks.len()
            )));
        }
        let mut sorted = ranks.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) || sorted.last().is_some_and(|&r| r >= world) {
            return Err(DistError::InvalidArgument(format!(
                "DeviceMesh: the ranks {ranks:?} must be distinct ranks below the world size {world}"
            )));
        }
        let dim_names = match dim_names {
            None => None,
            Some(names) => {
                if names.len() != shape.len() {
                    return Err(DistError::InvalidArgument(format!(
                        "DeviceMesh: mesh_dim_names {names:?} must name each of the {} dimensions once",
                        shape.len()
                    )));
                }
                if names.iter().enumerate().any(|(i, n)| names[..i].contains(n)) {
                    return Err(DistError::InvalidArgument(format!(
                        "DeviceMesh: mesh_dim_names {names:?} must be unique"
                    )));
                }
                Some(names.iter().map(|n| (*n).to_owned()).collect())
            }
        };
        let me = init::get_rank()?;
        let coordinate = ranks.iter().position(|&r| r == me).map(|i| unravel(i, shape));
        // Every line along every dimension, in one order on every rank:
        // each process takes part in every new_group call.
        let mut groups = Vec::with_capacity(shape.len());
        for dim in 0..shape.len() {
            let mut mine = None;
            for line in lines(shape, dim) {
                let members: Vec<usize> = line.iter().map(|&i| ranks[i]).collect();
                let group = init::new_group(&members)?;
                if let Some(g) = group
                    && members.contains(&me)
                {
                    mine = Some(g);
                }
            }
            if coordinate.is_some() {
                groups.push(mine.ok_or_else(|| {
                    DistError::Collective(format!("DeviceMesh: rank {me} got no group along dimension {dim}"))
                })?);
            }
        }
        Ok(DeviceMesh {
            device_type: device_type.to_owned(),
            ranks,
            shape: shape.to_vec(),
            dim_names,
            coordinate,
            groups,
        })
    }

    /// The device type (`"cpu"`).
    pub fn device_type(&self) -> &str {
        &self.device_type
    }

    /// The mesh's sizes.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The dimensions' names, if given.
    pub fn mesh_dim_names(&self) -> Option<&[String]> {
        self.dim_names.as_deref()
    }

    /// The global ranks, row-major.
    pub fn ranks(&self) -> &[usize] {
        &self.ranks
    }

    /// The global ranks as an `i64` tensor of the mesh's shape
    /// (`device_mesh.mesh`).
    pub fn mesh(&self) -> Result<Tensor> {
        let v: Vec<i64> = self.ranks.iter().map(|&r| r as i64).collect();
        Ok(Tensor::from_vec(v, self.shape.as_slice())?)
    }

    /// The index of `dim`: an error naming the mesh's dimensions when it
    /// has no such dimension.
    pub fn dim_index<'a>(&self, dim: impl Into<MeshDim<'a>>) -> Result<usize> {
        match dim.into() {
            MeshDim::Index(i) if i < self.ndim() => Ok(i),
            MeshDim::Index(i) => Err(DistError::InvalidArgument(format!(
                "DeviceMesh: dimension {i} is out of range for a mesh of {} dimensions",
                self.ndim()
            ))),
            MeshDim::Name(name) => self
                .dim_names
                .as_ref()
                .and_then(|names| names.iter().position(|n| n == name))
                .ok_or_else(|| {
                    DistError::InvalidArgument(format!(
                        "DeviceMesh: no dimension named {name:?} (the mesh's dimension names: {:?})",
                        self.dim_names
                    ))
                }),
        }
    }

    /// The dimension `dim`, or the only one when `None`: an error on a
    /// mesh of several dimensions, as PyTorch's.
    fn dim_or_only(&self, dim: Option<MeshDim<'_>>) -> Result<usize> {
        match dim {
            Some(d) => self.dim_index(d),
            None if self.ndim() == 1 => Ok(0),
            None => Err(DistError::InvalidArgument(format!(
                "DeviceMesh: the mesh has {} dimensions; name the dimension (mesh_dim) to use",
                self.ndim()
            ))),
        }
    }

    /// This rank's coordinates in the mesh; `None` when it is not in it.
    pub fn get_coordinate(&self) -> Option<&[usize]> {
        self.coordinate.as_deref()
    }

    /// This process's global rank.
    pub fn get_rank(&self) -> Result<usize> {
        init::get_rank()
    }

    fn not_in_mesh(&self) -> DistError {
        DistError::InvalidArgument(format!(
            "DeviceMesh: this rank is not in the mesh {:?} of shape {:?}",
            self.ranks, self.shape
        ))
    }

    /// This rank's process group along `dim` (by index or name; `None`
    /// on a 1-D mesh). Errors: an unknown dimension, `None` on a mesh of
    /// several dimensions, a rank outside the mesh.
    pub fn get_group<'a>(&self, dim: impl OptionalMeshDim<'a>) -> Result<Arc<ProcessGroup>> {
        let d = self.dim_or_only(dim.mesh_dim())?;
        self.groups.get(d).cloned().ok_or_else(|| self.not_in_mesh())
    }

    /// This rank's groups, one per dimension.
    pub fn get_all_groups(&self) -> &[Arc<ProcessGroup>] {
        &self.groups
    }

    /// The size of dimension `dim`, or of the whole mesh when `None`.
    pub fn size<'a>(&self, dim: impl OptionalMeshDim<'a>) -> Result<usize> {
        match dim.mesh_dim() {
            None => Ok(self.ranks.len()),
            Some(d) => Ok(self.shape[self.dim_index(d)?]),
        }
    }

    /// This rank's index along `dim` (`None` on a 1-D mesh): its rank in
    /// that dimension's group.
    pub fn get_local_rank<'a>(&self, dim: impl OptionalMeshDim<'a>) -> Result<usize> {
        let d = self.dim_or_only(dim.mesh_dim())?;
        self.coordinate.as_ref().map(|c| c[d]).ok_or_else(|| self.not_in_mesh())
    }

    /// The global ranks along `dim` through this rank's coordinate, in
    /// coordinate order (the members of `get_group(dim)`, whose group ranks
    /// follow the global ranks' order instead). An error for a rank
    /// outside the mesh.
    pub fn line_ranks<'a>(&self, dim: impl Into<MeshDim<'a>>) -> Result<Vec<usize>> {
        let d = self.dim_index(dim)?;
        let coord = self.coordinate.as_ref().ok_or_else(|| self.not_in_mesh())?;
        Ok((0..self.shape[d])
            .map(|k| {
                let mut c = coord.clone();
                c[d] = k;
                self.ranks[ravel(&c, &self.shape)]
            })
            .collect())
    }

    /// The sub-mesh over the named dimensions (`mesh["dp"]`,
    /// `mesh["dp", "tp"]`), in the order given: the ranks that share this
    /// rank's coordinates on the other dimensions, with this mesh's groups
    /// (no new ones are made). Errors: a dimension named twice or unknown,
    /// a rank outside the mesh.
    pub fn submesh(&self, dims: &[&str]) -> Result<DeviceMesh> {
        let idx: Vec<usize> = dims.iter().map(|&d| self.dim_index(d)).collect::<Result<_>>()?;
        if dims.is_empty() || idx.iter().enumerate().any(|(i, d)| idx[..i].contains(d)) {
            return Err(DistError::InvalidArgument(format!(
                "DeviceMesh: a sub-mesh takes distinct dimensions, got {dims:?}"
            )));
        }
        let coord = self.coordinate.as_ref().ok_or_else(|| self.not_in_mesh())?;
        let shape: Vec<usize> = idx.iter().map(|&d| self.shape[d]).collect();
        let total: usize = shape.iter().product();
        let ranks = (0..total)
            .map(|flat| {
                let sub = unravel(flat, &shape);
                let mut full = coord.clone();
                for (k, &d) in idx.iter().enumerate() {
                    full[d] = sub[k];
                }
                self.ranks[ravel(&full, &self.shape)]
            })
            .collect();
        Ok(DeviceMesh {
            device_type: self.device_type.clone(),
            ranks,
            shape,
            dim_names: Some(dims.iter().map(|d| (*d).to_owned()).collect()),
            coordinate: Some(idx.iter().map(|&d| coord[d]).collect()),
            groups: idx.iter().map(|&d| self.groups[d].clone()).collect(),
        })
    }
}

/// Row-major coordinates of flat index `i` in `shape`.
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for (k, &s) in shape.iter().enumerate().rev() {
        c[k] = i % s;
        i /= s;
    }
    c
}

/// The flat row-major index of coordinates `c` in `shape`.
fn ravel(c: &[usize], shape: &[usize]) -> usize {
    c.iter().zip(shape).fold(0, |acc, (&x, &s)| acc * s + x)
}

/// Every line of `shape` along `dim`, as flat indices: for each setting of
/// the other coordinates (row-major), the indices as `dim` runs.
fn lines(shape: &[usize], dim: usize) -> Vec<Vec<usize>> {
    let total: usize = shape.iter().product();
    let mut out = Vec::new();
    for flat in 0..total {
        let c = unravel(flat, shape);
        if c[dim] != 0 {
            continue;
        }
        out.push(
            (0..shape[dim])
                .map(|k| {
                    let mut c = c.clone();
                    c[dim] = k;
                    ravel(&c, shape)
                })
                .collect(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_run_along_each_dimension() {
        // 2 x 3: rows along dim 1, columns along dim 0.
        assert_eq!(lines(&[2, 3], 1), vec![vec![0, 1, 2], vec![3, 4, 5]]);
        assert_eq!(lines(&[2, 3], 0), vec![vec![0, 3], vec![1, 4], vec![2, 5]]);
        assert_eq!(lines(&[4], 0), vec![vec![0, 1, 2, 3]]);
        // 2 x 2 x 2 along the middle dimension.
        assert_eq!(
            lines(&[2, 2, 2], 1),
            vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]
        );
    }

    #[test]
    fn ravel_inverts_unravel() {
        let shape = [3, 1, 4, 2];
        for i in 0..24 {
            assert_eq!(ravel(&unravel(i, &shape), &shape), i);
        }
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
    }
}
