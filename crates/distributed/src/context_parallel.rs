//! Context parallelism (`torch.distributed.tensor.experimental.context_parallel`):
//! the sequence cut across the ranks of a 1-D mesh, attention computed by
//! ring attention: each rank keeps its queries and passes its keys and
//! values around the ring, merging each block's partial attention by its
//! log-sum-exp, so no rank ever holds the whole sequence's keys.
//!
//! With a causal mask, the load-balanced layout (PyTorch's
//! `_cp_options.enable_load_balance`) cuts the sequence into `2N` chunks
//! and gives rank `r` chunks `r` and `2N - 1 - r`, so every rank has the
//! same share of the unmasked work; without it rank `r` holds chunk `r` of
//! `N`. Blocks entirely above the diagonal are skipped.
//!
//! The blocks are computed with the core's differentiable ops and the
//! ring's shifts are autograd functions (the gradients of the keys and
//! values travel the ring backwards), so backward comes from autograd:
//! per rank it keeps the scores of its queries against the whole sequence
//! (as non-fused attention on `T / N` queries does).
//!
//! ```no_run
//! use std::sync::Arc;
//! use ferrotorch_core::Tensor;
//! use ferrotorch_distributed::context_parallel::{RingAttentionOptions, context_shard, ring_attention};
//! use ferrotorch_distributed::{InitOptions, get_world_size, init_device_mesh, init_process_group};
//! init_process_group(InitOptions::new("tcp"))?; // under ferrorun / torchrun
//! let cp = Arc::new(init_device_mesh("cpu", &[get_world_size()?], None)?);
//! let opts = RingAttentionOptions { is_causal: true, ..Default::default() };
//! let q = Tensor::randn((1, 4, 64, 16))?; // [batch, heads, sequence, head dim], the same on every rank
//! let local = |t: &Tensor| context_shard(t, 2, &cp, &opts);
//! let out = ring_attention(&local(&q)?, &local(&q)?, &local(&q)?, &cp, &opts)?; // this rank's rows
//! # let _ = out;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use ferrotorch_core::autograd::{Function, FunctionCtx, apply_function};
use ferrotorch_core::{Tensor, TensorOptions};

use crate::device_mesh::DeviceMesh;
use crate::dtensor::redistribute::{self as rd, Line};
use crate::error::{DistError, Result};

/// Options of [`ring_attention`] and the layout of [`context_shard`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RingAttentionOptions {
    /// A causal mask (query `i` sees keys `<= i`).
    pub is_causal: bool,
    /// The score scale (`1 / sqrt(head dim)` when `None`).
    pub scale: Option<f64>,
    /// The load-balanced layout for causal attention (true, as PyTorch's
    /// default); ignored without a causal mask.
    pub load_balance: bool,
}

impl Default for RingAttentionOptions {
    fn default() -> Self {
        RingAttentionOptions {
            is_causal: false,
            scale: None,
            load_balance: true,
        }
    }
}

impl RingAttentionOptions {
    /// Which chunks of how many the rank at coordinate `r` of `n` holds.
    fn chunks(&self, r: usize, n: usize) -> (Vec<usize>, usize) {
        if self.is_causal && self.load_balance {
            (vec![r, 2 * n - 1 - r], 2 * n)
        } else {
            (vec![r], n)
        }
    }
}

/// This rank's part of `x` (the whole sequence, the same on every rank)
/// along `seq_dim`, in the layout `opts` gives. Errors: a sequence that
/// does not cut into the chunks evenly, a mesh of other than one dimension.
pub fn context_shard(
    x: &Tensor,
    seq_dim: usize,
    mesh: &Arc<DeviceMesh>,
    opts: &RingAttentionOptions,
) -> Result<Tensor> {
    let (n, r) = line_of(mesh)?;
    let (mine, count) = opts.chunks(r, n);
    let len = chunk_len(x, seq_dim, count)?;
    let parts: Vec<Tensor> = mine
        .iter()
        .map(|&c| x.narrow(seq_dim as i64, (c * len) as i64, len as i64))
        .collect::<ferrotorch_core::Result<_>>()?;
    Ok(Tensor::cat(&parts, seq_dim as i64)?)
}

/// The whole sequence from every rank's part of it ([`context_shard`]'s
/// inverse; an all-gather).
pub fn context_unshard(
    local: &Tensor,
    seq_dim: usize,
    mesh: &Arc<DeviceMesh>,
    opts: &RingAttentionOptions,
) -> Result<Tensor> {
    let (n, _) = line_of(mesh)?;
    let line = Line::new(mesh, 0)?;
    let whole = rd::gather(local, &line, seq_dim, local.shape()[seq_dim] * n)?;
    let (_, count) = opts.chunks(0, n);
    let len = chunk_len(&whole, seq_dim, count)?;
    // Rank k's chunks sit at [k * per, (k + 1) * per) of the gathered tensor.
    let per = count / n;
    let mut at = vec![0; count];
    for k in 0..n {
        for (j, c) in opts.chunks(k, n).0.into_iter().enumerate() {
            at[c] = k * per + j;
        }
    }
    let parts: Vec<Tensor> = at
        .iter()
        .map(|&p| whole.narrow(seq_dim as i64, (p * len) as i64, len as i64))
        .collect::<ferrotorch_core::Result<_>>()?;
    Ok(Tensor::cat(&parts, seq_dim as i64)?)
}

/// Attention of this rank's queries `q` over the whole sequence's keys
/// and values (`[batch, heads, seq_local, dim]` each, laid out by
/// [`context_shard`] with the same `opts`), on the ranks of the 1-D
/// `mesh`: `scaled_dot_product_attention` on the whole sequence, this
/// rank's rows of it, differentiable. Errors: inputs of other than 4
/// dimensions or different shapes, a local sequence that does not cut into
/// the rank's chunks, a mesh of other than one dimension.
pub fn ring_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mesh: &Arc<DeviceMesh>,
    opts: &RingAttentionOptions,
) -> Result<Tensor> {
    if q.dim() != 4 || k.shape() != q.shape() || v.shape() != q.shape() {
        return Err(DistError::InvalidArgument(format!(
            "ring_attention: q, k and v must be [batch, heads, seq, dim] of one shape, got {:?}, {:?} and {:?}",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    }
    let (n, r) = line_of(mesh)?;
    let scale = opts.scale.unwrap_or(1.0 / (q.shape()[3] as f64).sqrt());
    let (mine, _) = opts.chunks(r, n);
    let q_parts = q.chunk(mine.len() as i64, 2)?;
    if q_parts.len() != mine.len() || q_parts.iter().any(|p| p.shape() != q_parts[0].shape()) {
        return Err(DistError::InvalidArgument(format!(
            "ring_attention: a local sequence of {} does not cut into this rank's {} chunks",
            q.shape()[2],
            mine.len()
        )));
    }
    // Partial results (output, log-sum-exp) of each query chunk.
    let mut partial: Vec<Vec<(Tensor, Tensor)>> = vec![Vec::new(); mine.len()];
    let (mut k_cur, mut v_cur) = (k.clone(), v.clone());
    for step in 0..n {
        let owner = (r + n - step) % n;
        let (theirs, _) = opts.chunks(owner, n);
        let k_parts = k_cur.chunk(theirs.len() as i64, 2)?;
        let v_parts = v_cur.chunk(theirs.len() as i64, 2)?;
        for (a, qa) in q_parts.iter().enumerate() {
            for (b, (kb, vb)) in k_parts.iter().zip(&v_parts).enumerate() {
                let (qi, ki) = (mine[a], theirs[b]);
                if opts.is_causal && ki > qi {
                    continue;
                }
                partial[a].push(block(qa, kb, vb, scale, opts.is_causal && ki == qi)?);
            }
        }
        if step + 1 < n {
            (k_cur, v_cur) = ring_shift(&k_cur, &v_cur, mesh)?;
        }
    }
    let outs: Vec<Tensor> = partial.into_iter().map(|parts| merge(&parts)).collect::<Result<_>>()?;
    let out = Tensor::cat(&outs, 2)?;
    if n == 1 || !(k.requires_grad() || v.requires_grad()) {
        return Ok(out);
    }
    // Every rank's backward must pass the gradients around the whole ring,
    // also where its last blocks were all masked: the last keys and values
    // enter the output with weight zero, so their shift is in the graph.
    let touch = k_cur.sum()?.add(&v_cur.sum()?)?.mul(0.0)?;
    Ok(out.add(&touch)?)
}

/// Attention of `q` over one block of keys: the output and the rows'
/// log-sum-exp of scores (`[.., Tq, 1]`); `diagonal` masks keys after the
/// query (the block shares its positions).
fn block(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64, diagonal: bool) -> Result<(Tensor, Tensor)> {
    let mut s = q.matmul(&k.transpose(-2, -1)?)?.mul(scale)?;
    if diagonal {
        let t = q.shape()[2];
        let above = TensorOptions::new()
            .dtype(ferrotorch_core::DType::Bool)
            .ones([t, t])?
            .triu(1)?;
        s = s.masked_fill(&above, f64::NEG_INFINITY)?;
    }
    let lse = s.logsumexp(-1, true)?;
    let p = s.sub(&lse)?.exp()?;
    Ok((p.matmul(v)?, lse))
}

/// The attention of the union of the blocks from their partial results.
fn merge(parts: &[(Tensor, Tensor)]) -> Result<Tensor> {
    let lses: Vec<&Tensor> = parts.iter().map(|(_, l)| l).collect();
    let lse = Tensor::cat(&lses, -1)?.logsumexp(-1, true)?;
    let mut out: Option<Tensor> = None;
    for (o, l) in parts {
        let w = l.sub(&lse)?.exp()?.mul(o)?;
        out = Some(match out {
            Some(acc) => acc.add(&w)?,
            None => w,
        });
    }
    out.ok_or_else(|| DistError::InvalidArgument("ring_attention: a query chunk saw no key".into()))
}

/// The mesh's size and this rank's coordinate (1-D meshes only).
fn line_of(mesh: &DeviceMesh) -> Result<(usize, usize)> {
    if mesh.ndim() != 1 {
        return Err(DistError::InvalidArgument(format!(
            "context parallel: the mesh must have 1 dimension, got {}",
            mesh.ndim()
        )));
    }
    Ok((mesh.size(0)?, mesh.get_local_rank(0)?))
}

/// The length of each of `count` equal chunks of `x` along `dim`.
fn chunk_len(x: &Tensor, dim: usize, count: usize) -> Result<usize> {
    let t = x.shape().get(dim).copied().unwrap_or(0);
    if count == 0 || !t.is_multiple_of(count) {
        return Err(DistError::InvalidArgument(format!(
            "context parallel: a sequence of {t} does not cut into {count} equal chunks"
        )));
    }
    Ok(t / count)
}

/// `k` and `v` from the previous rank of the ring (this rank's go to the
/// next); backward sends their gradients the other way. One node for
/// both, so every rank's backward passes them in the same order.
fn ring_shift(k: &Tensor, v: &Tensor, mesh: &Arc<DeviceMesh>) -> Result<(Tensor, Tensor)> {
    let f = Shift { mesh: mesh.clone() };
    let mut out = apply_function(f, &[k, v])?;
    let v = out.remove(1);
    Ok((out.remove(0), v))
}

struct Shift {
    mesh: Arc<DeviceMesh>,
}

/// Tags of the ring's messages, clear of a user's.
const TAG: u64 = 0x5249_4E47 << 32;

impl Shift {
    /// Sends `xs` one place along the ring (to the next rank when
    /// `forward`, else to the previous) and returns what arrives from the
    /// other side.
    fn pass(&self, xs: &[Tensor], forward: bool) -> Result<Vec<Tensor>> {
        let (n, r) = line_of(&self.mesh)?;
        let group = self.mesh.get_group(0)?;
        let ranks = self.mesh.line_ranks(0)?;
        let to_group = |coord: usize| -> Result<usize> {
            group
                .group_rank(ranks[coord])
                .ok_or_else(|| DistError::Collective("ring_attention: a mesh rank is missing from its group".into()))
        };
        let (to, from) = if forward {
            ((r + 1) % n, (r + n - 1) % n)
        } else {
            ((r + n - 1) % n, (r + 1) % n)
        };
        let tag = TAG + u64::from(!forward);
        let data: Vec<Tensor> = xs
            .iter()
            .map(|x| x.detach().contiguous())
            .collect::<ferrotorch_core::Result<_>>()?;
        let sent = data
            .iter()
            .map(|d| group.send(d, to_group(to)?, tag))
            .collect::<Result<Vec<_>>>()?;
        let got = data
            .iter()
            .map(|d| {
                let g = d.zeros_like()?;
                group.recv(&g, to_group(from)?, tag)?.wait()?;
                Ok(g)
            })
            .collect::<Result<Vec<_>>>()?;
        for w in &sent {
            w.wait()?;
        }
        Ok(got)
    }
}

impl Function for Shift {
    fn name(&self) -> String {
        "RingShiftBackward".into()
    }

    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> ferrotorch_core::Result<Vec<Tensor>> {
        ctx.save_for_backward(&[&inputs[0], &inputs[1]]);
        Ok(self.pass(inputs, true)?)
    }

    fn backward(&self, ctx: &FunctionCtx, grads: &[Option<Tensor>]) -> ferrotorch_core::Result<Vec<Option<Tensor>>> {
        // A missing gradient travels as zeros: the peers wait for it.
        let saved = ctx.saved_tensors()?;
        let grads = grads
            .iter()
            .zip(&saved)
            .map(|(g, x)| match g {
                Some(g) => Ok(g.clone()),
                None => x.detach().zeros_like(),
            })
            .collect::<ferrotorch_core::Result<Vec<_>>>()?;
        Ok(self.pass(&grads, false)?.into_iter().map(Some).collect())
    }
}
