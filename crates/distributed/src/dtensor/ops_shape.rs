//! More ops on DTensors by sharding rules: element-wise maps, softmax,
//! transposes, views and sums over a dimension. As in `ops.rs`, each op
//! redistributes only the mesh dimensions its rule cannot keep and runs
//! the plain op on the local tensors (autograd runs through).
//!
//! | op | per mesh dimension |
//! |---|---|
//! | linear maps (`neg`, `mul_scalar`) | every placement stays |
//! | other element-wise maps (`relu`, `gelu`, `tanh`, `exp`, `to_dtype`) | shards and replicas stay; a partial sum goes to `Replicate` |
//! | `softmax(d)`, `log_softmax(d)` | a shard of `d` and a partial sum go to `Replicate`; other shards stay |
//! | `transpose(d0, d1)` | shards of `d0` and `d1` swap; others stay |
//! | `view(shape)` | a shard of a dimension the view keeps (same size after the same number of elements) follows it; other shards go to `Replicate`; partial sums stay |
//! | `sum_dim(d)` | a shard of `d` becomes a partial sum; later shards move down one dimension (without `keepdim`); partial sums stay |

use ferrotorch_core::{DType, Tensor};

use super::{DTensor, Placement, local_shape};
use crate::error::{DistError, Result};

const PSUM: Placement = Placement::Partial(crate::reduce_op::ReduceOp::Sum);

/// The DTensor of `shape` and placements `out` from `self` moved to `moved`
/// and `f` applied to its local tensor.
fn apply(
    x: &DTensor,
    moved: &[Placement],
    out: Vec<Placement>,
    shape: Vec<usize>,
    f: impl FnOnce(&Tensor) -> ferrotorch_core::Result<Tensor>,
) -> Result<DTensor> {
    let local = f(&x.redistribute(moved)?.local)?;
    Ok(DTensor {
        local,
        mesh: x.mesh.clone(),
        placements: out,
        shape,
    })
}

/// `dim` of an `n`-dimensional tensor, negative counting from the end.
fn wrap(op: &str, dim: i64, n: usize) -> Result<usize> {
    let d = if dim < 0 { dim + n as i64 } else { dim };
    if d < 0 || d >= n as i64 {
        return Err(DistError::InvalidArgument(format!(
            "DTensor {op}: dimension {dim} is out of range for {n} dimensions"
        )));
    }
    Ok(d as usize)
}

impl DTensor {
    /// An element-wise map that is not linear: partial sums are summed
    /// first.
    fn map(&self, f: impl FnOnce(&Tensor) -> ferrotorch_core::Result<Tensor>) -> Result<DTensor> {
        let moved: Vec<Placement> = self
            .placements
            .iter()
            .map(|&p| if p.is_partial() { Placement::Replicate } else { p })
            .collect();
        apply(self, &moved, moved.clone(), self.shape.clone(), f)
    }

    /// A linear element-wise map: every placement stays.
    fn map_linear(&self, f: impl FnOnce(&Tensor) -> ferrotorch_core::Result<Tensor>) -> Result<DTensor> {
        let p = self.placements.clone();
        apply(self, &p, p.clone(), self.shape.clone(), f)
    }

    /// `-self`.
    pub fn neg(&self) -> Result<DTensor> {
        self.map_linear(Tensor::neg)
    }

    /// `self * s` for a number `s`.
    pub fn mul_scalar(&self, s: f64) -> Result<DTensor> {
        self.map_linear(|t| t.mul(s))
    }

    /// `relu(self)`.
    pub fn relu(&self) -> Result<DTensor> {
        self.map(Tensor::relu)
    }

    /// `gelu(self)` (the exact, erf form).
    pub fn gelu(&self) -> Result<DTensor> {
        self.map(Tensor::gelu)
    }

    /// `tanh(self)`.
    pub fn tanh(&self) -> Result<DTensor> {
        self.map(Tensor::tanh)
    }

    /// `exp(self)`.
    pub fn exp(&self) -> Result<DTensor> {
        self.map(Tensor::exp)
    }

    /// `self` in `dtype`.
    pub fn to_dtype(&self, dtype: DType) -> Result<DTensor> {
        self.map(|t| t.to_dtype(dtype))
    }

    /// The placements a reduction along `d` needs: `d` whole, partial
    /// sums summed.
    fn whole_along(&self, d: usize) -> Vec<Placement> {
        self.placements
            .iter()
            .map(|&p| match p {
                Placement::Shard(k) if k == d => Placement::Replicate,
                p if p.is_partial() => Placement::Replicate,
                p => p,
            })
            .collect()
    }

    /// `softmax(self, dim)`. Errors: a dimension out of range.
    pub fn softmax(&self, dim: i64) -> Result<DTensor> {
        let d = wrap("softmax", dim, self.shape.len())?;
        let moved = self.whole_along(d);
        apply(self, &moved, moved.clone(), self.shape.clone(), |t| t.softmax(d as i64))
    }

    /// `log_softmax(self, dim)`. Errors: a dimension out of range.
    pub fn log_softmax(&self, dim: i64) -> Result<DTensor> {
        let d = wrap("log_softmax", dim, self.shape.len())?;
        let moved = self.whole_along(d);
        apply(self, &moved, moved.clone(), self.shape.clone(), |t| {
            t.log_softmax(d as i64)
        })
    }

    /// `self.transpose(d0, d1)`. Errors: dimensions out of range.
    pub fn transpose(&self, d0: i64, d1: i64) -> Result<DTensor> {
        let n = self.shape.len();
        let (a, b) = (wrap("transpose", d0, n)?, wrap("transpose", d1, n)?);
        let out = self
            .placements
            .iter()
            .map(|&p| match p {
                Placement::Shard(k) if k == a => Placement::Shard(b),
                Placement::Shard(k) if k == b => Placement::Shard(a),
                p => p,
            })
            .collect();
        let mut shape = self.shape.clone();
        shape.swap(a, b);
        let p = self.placements.clone();
        apply(self, &p, out, shape, |t| t.transpose(a as i64, b as i64))
    }

    /// `self.view(shape)` (`-1` infers one size): a shard of a dimension
    /// the view keeps follows it; other shards are gathered first. Errors:
    /// a shape of another number of elements.
    pub fn view(&self, shape: &[i64]) -> Result<DTensor> {
        let numel: usize = self.shape.iter().product();
        let new = infer_shape(shape, numel)?;
        // Dimension k of the input is kept as dimension j of the view when
        // the same number of elements precede it and its size is equal.
        let before = |s: &[usize], k: usize| -> usize { s[..k].iter().product() };
        let kept = |k: usize| -> Option<usize> {
            (0..new.len()).find(|&j| new[j] == self.shape[k] && before(&new, j) == before(&self.shape, k))
        };
        let (mut moved, mut out) = (Vec::new(), Vec::new());
        for &p in &self.placements {
            match p {
                Placement::Shard(k) => match kept(k) {
                    Some(j) => {
                        moved.push(p);
                        out.push(Placement::Shard(j));
                    }
                    None => {
                        moved.push(Placement::Replicate);
                        out.push(Placement::Replicate);
                    }
                },
                p => {
                    moved.push(p);
                    out.push(p);
                }
            }
        }
        let local = local_shape(&self.mesh, &out, &new)?;
        apply(self, &moved, out, new, |t| t.contiguous()?.view(local.as_slice()))
    }

    /// The sum over dimension `dim` (kept as size 1 with `keepdim`): a
    /// shard of `dim` becomes a partial sum. Errors: a dimension out of
    /// range, a partial placement other than `Partial(sum)`.
    pub fn sum_dim(&self, dim: i64, keepdim: bool) -> Result<DTensor> {
        let d = wrap("sum_dim", dim, self.shape.len())?;
        let (mut moved, mut out) = (Vec::new(), Vec::new());
        for &p in &self.placements {
            let (m, o) = match p {
                Placement::Shard(k) if k == d => (p, PSUM),
                Placement::Shard(k) if k > d && !keepdim => (p, Placement::Shard(k - 1)),
                PSUM => (p, PSUM),
                p if p.is_partial() => (Placement::Replicate, Placement::Replicate),
                p => (p, p),
            };
            moved.push(m);
            out.push(o);
        }
        let mut shape = self.shape.clone();
        if keepdim {
            shape[d] = 1;
        } else {
            shape.remove(d);
        }
        apply(self, &moved, out, shape, |t| t.sum_dim([d], keepdim))
    }
}

/// `shape` with a `-1` inferred from `numel`; an error when the sizes do
/// not give `numel` elements.
fn infer_shape(shape: &[i64], numel: usize) -> Result<Vec<usize>> {
    let bad = || DistError::InvalidArgument(format!("DTensor view: shape {shape:?} is invalid for {numel} elements"));
    let known: i64 = shape.iter().filter(|&&s| s != -1).product();
    let unknown = shape.iter().filter(|&&s| s == -1).count();
    if unknown > 1 || shape.iter().any(|&s| s < -1) || known < 0 {
        return Err(bad());
    }
    let out: Vec<usize> = shape
        .iter()
        .map(|&s| {
            if s == -1 {
                if known == 0 { 0 } else { numel / known as usize }
            } else {
                s as usize
            }
        })
        .collect();
    if out.iter().product::<usize>() != numel {
        return Err(bad());
    }
    Ok(out)
}
