//! Fused scaled dot-product attention (PyTorch's
//! `_scaled_dot_product_flash_attention_for_cpu`): `softmax(q kᵀ · scale)
//! v`, causal or not, without materialising the attention matrix as a
//! tensor.
//!
//! Inputs `[q, k, v]`: `q` `[*B, L, E]`, `k` `[*B, S, E]`, `v` `[*B, S,
//! Ev]` with the same batch dims `*B` (any strides). Outputs the result
//! `[*B, L, Ev]` and the log-sum-exp of every score row `[*B, L]` (f32 for
//! f16 / bf16 inputs), which the derivative reads to recompute the
//! probabilities. `is_causal` keeps, for query row `i`, the keys `j <= i`
//! (the top-left aligned lower triangle, as PyTorch). A row with no key
//! (`S = 0`) gives zeros and a log-sum-exp of -inf.
//!
//! The CPU kernel works on blocks of query rows: one product by the keys
//! into a scratch block (only the keys a causal block can see), the
//! softmax of its rows, one product by the values. The derivative
//! (`_scaled_dot_product_flash_attention_for_cpu_backward`) recomputes a
//! block's probabilities from the saved log-sum-exp and gets the three
//! gradients with four products per block, the keys' and values'
//! gradients accumulated over the blocks in order (so results do not
//! depend on the thread count). With `create_graph` the derivative is
//! written in differentiable operators (the math path's formulas); other
//! backends run both forms through operators (`AnyBackend`).

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call, downcast_op};
use crate::layout::Dims;
use crate::{DType, Error, Result, Tensor, TensorOptions};

/// Dispatch table of `_scaled_dot_product_flash_attention_for_cpu`.
pub static SDPA_FLASH: OpEntry = OpEntry::differentiable("_scaled_dot_product_flash_attention_for_cpu");
/// Dispatch table of `_scaled_dot_product_flash_attention_for_cpu_backward`.
pub static SDPA_FLASH_BACKWARD: OpEntry = OpEntry::new("_scaled_dot_product_flash_attention_for_cpu_backward");

const NAME: &str = "scaled_dot_product_attention";

/// Fused attention (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SdpaFlash {
    /// Keep only keys at or before each query's position.
    pub causal: bool,
    /// The factor on `q kᵀ`.
    pub scale: f64,
}

/// The dtype of the log-sum-exp of a `dtype` input.
fn lse_dtype(dtype: DType) -> DType {
    if matches!(dtype, DType::F16 | DType::BF16) {
        DType::F32
    } else {
        dtype
    }
}

/// Checks `q`, `k`, `v` and returns `(batch dims, L, S, E, Ev)`.
pub(crate) fn attention_dims(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<(Dims, usize, usize, usize, usize)> {
    if q.ndim() < 2 || q.ndim() != k.ndim() || q.ndim() != v.ndim() {
        return Err(Error::invalid(
            NAME,
            format!(
                "expected query, key and value with one number of dims (at least 2), got {:?}, {:?} and {:?}",
                q.shape(),
                k.shape(),
                v.shape()
            ),
        ));
    }
    if q.dtype() != k.dtype() || q.dtype() != v.dtype() {
        return Err(Error::invalid(
            NAME,
            format!(
                "Expected query, key, and value to have the same dtype, but got query.dtype: {} key.dtype: {} and \
                 value.dtype: {} instead.",
                q.dtype(),
                k.dtype(),
                v.dtype()
            ),
        ));
    }
    if !q.dtype().is_floating_point() {
        return Err(Error::dtype(
            NAME,
            q.dtype(),
            "expects floating-point query, key and value",
        ));
    }
    let nd = q.ndim();
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if qs[..nd - 2] != ks[..nd - 2] || qs[..nd - 2] != vs[..nd - 2] {
        return Err(Error::invalid(
            NAME,
            format!(
                "the fused kernel needs query, key and value with the same batch dims, got {qs:?}, {ks:?} and {vs:?}"
            ),
        ));
    }
    let (l, e, s, ev) = (qs[nd - 2], qs[nd - 1], ks[nd - 2], vs[nd - 1]);
    if ks[nd - 1] != e || vs[nd - 2] != s {
        return Err(Error::invalid(
            NAME,
            format!(
                "query {qs:?}, key {ks:?} and value {vs:?} do not fit: key needs the query's last dim and value the \
                 key's length"
            ),
        ));
    }
    Ok((Dims::from_slice(&qs[..nd - 2]), l, s, e, ev))
}

impl Op for SdpaFlash {
    fn entry(&self) -> &'static OpEntry {
        &SDPA_FLASH
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
        let (batch, l, _, _, ev) = attention_dims(q, k, v)?;
        let mut out: Dims = batch.clone();
        out.extend([l, ev]);
        let mut lse = batch;
        lse.push(l);
        let strides = strides_like(&out, q.strides());
        Ok(smallvec::smallvec![
            OutSpec {
                shape: out,
                dtype: q.dtype(),
                strides: Some(strides),
            },
            OutSpec::new(lse, lse_dtype(q.dtype())),
        ])
    }

    fn saves(&self) -> Saves {
        Saves {
            inputs: 0b111,
            outputs: 0b11,
        }
    }

    fn backward_name(&self) -> String {
        "ScaledDotProductFlashAttentionForCpuBackward0".into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        if grads.get(1).is_some_and(|g| g.is_some()) {
            return Err(Error::invalid(
                NAME,
                "the log-sum-exp output is not differentiable (as in PyTorch); use the result only",
            ));
        }
        let Some(g) = grads.first().cloned().flatten() else {
            return Ok(vec![None, None, None]);
        };
        let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        let mask = [ctx.needs_grad(0), ctx.needs_grad(1), ctx.needs_grad(2)];
        let (dq, dk, dv) = if crate::autograd::is_grad_enabled() {
            composite_backward(self, &g, &q, &k, &v)?
        } else {
            let (out, lse) = (ctx.output(0)?, ctx.output(1)?);
            let op = SdpaFlashBackward {
                causal: self.causal,
                scale: self.scale,
            };
            let mut r = call(&op, &[&g, &q, &k, &v, &out, &lse])?.into_iter();
            match (r.next(), r.next(), r.next()) {
                (Some(a), Some(b), Some(c)) => (a, b, c),
                _ => {
                    return Err(Error::invalid(
                        NAME,
                        "the derivative returned fewer than three gradients",
                    ));
                }
            }
        };
        Ok(vec![
            mask[0].then_some(dq),
            mask[1].then_some(dk),
            mask[2].then_some(dv),
        ])
    }
}

/// The fused first derivative of [`SdpaFlash`]: inputs `[grad_out, q, k,
/// v, out, logsumexp]`, outputs the gradients of `q`, `k` and `v`. Not
/// differentiable: the forward's backward calls it only when the gradient
/// is not recorded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SdpaFlashBackward {
    /// As the forward's.
    pub causal: bool,
    /// As the forward's.
    pub scale: f64,
}

impl Op for SdpaFlashBackward {
    fn entry(&self) -> &'static OpEntry {
        &SDPA_FLASH_BACKWARD
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        if inputs.len() != 6 {
            return Err(Error::invalid(
                SDPA_FLASH_BACKWARD.base_name(),
                "expected [grad_out, query, key, value, out, logsumexp]",
            ));
        }
        let (g, q, k, v, o, lse) = (inputs[0], inputs[1], inputs[2], inputs[3], inputs[4], inputs[5]);
        let (batch, l, _, _, ev) = attention_dims(q, k, v)?;
        let mut want: Dims = batch.clone();
        want.extend([l, ev]);
        for (what, t) in [("grad_out", g), ("out", o)] {
            if t.shape() != want.as_slice() || t.dtype() != q.dtype() {
                return Err(Error::shape(
                    SDPA_FLASH_BACKWARD.base_name(),
                    t.shape(),
                    &want,
                    format!("{what} must have the result's shape and the query's dtype"),
                ));
            }
        }
        let mut want_lse = batch;
        want_lse.push(l);
        if lse.shape() != want_lse.as_slice() || lse.dtype() != lse_dtype(q.dtype()) {
            return Err(Error::shape(
                SDPA_FLASH_BACKWARD.base_name(),
                lse.shape(),
                &want_lse,
                "logsumexp must be the forward's",
            ));
        }
        let like = |t: &Tensor| OutSpec {
            shape: t.dims(),
            dtype: t.dtype(),
            strides: Some(strides_like(t.shape(), t.strides())),
        };
        Ok(smallvec::smallvec![like(q), like(k), like(v)])
    }
}

/// Dense strides for a tensor of `shape` that lays out its batch and row
/// dims in the order of `like`'s strides (largest first, ties in dim
/// order) and its last dim innermost. The result follows the query's
/// layout, and each gradient its input's: for heads split off a wider
/// tensor (`x.view(B, T, H, D).transpose(1, 2)`) the `[B, T, H, D]` order,
/// so the transpose back and the view to `[B, T, H·D]` copy nothing (a
/// contiguous query gives contiguous results).
fn strides_like(shape: &[usize], like: &[usize]) -> Dims {
    let nd = shape.len();
    let mut order: Vec<usize> = (0..nd.saturating_sub(1)).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(like[d]));
    order.extend(nd.checked_sub(1));
    let mut strides: Dims = smallvec::smallvec![0; nd];
    let mut step = 1usize;
    for &d in order.iter().rev() {
        strides[d] = step;
        step = step.saturating_mul(shape[d].max(1));
    }
    strides
}

/// `q kᵀ · scale`, with -inf above the causal diagonal, in the operators.
fn scores(op: &SdpaFlash, q: &Tensor, k: &Tensor) -> Result<Tensor> {
    let s = q.matmul(&k.transpose(-2, -1)?)?.mul(op.scale)?;
    if !op.causal {
        return Ok(s);
    }
    let (l, n) = (q.shape()[q.ndim() - 2], k.shape()[k.ndim() - 2]);
    let keep = TensorOptions::new().dtype(DType::Bool).ones([l, n])?.tril(0)?;
    s.masked_fill(&keep.logical_not()?, f64::NEG_INFINITY)
}

/// The forward in operators: result and log-sum-exp.
fn composite_forward(op: &SdpaFlash, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensors> {
    let dt = q.dtype();
    let wide = lse_dtype(dt);
    let (qf, kf, vf) = (q.to_dtype(wide)?, k.to_dtype(wide)?, v.to_dtype(wide)?);
    let s = scores(op, &qf, &kf)?;
    let lse = s.logsumexp([-1], false)?;
    let n = k.shape()[k.ndim() - 2];
    let out = if n == 0 {
        let mut shape = q.shape().to_vec();
        *shape.last_mut().expect("at least 2 dims") = v.shape()[v.ndim() - 1];
        TensorOptions::like(q).dtype(wide).zeros(shape)?
    } else {
        s.sub(&lse.unsqueeze(-1)?)?.exp()?.matmul(&vf)?
    };
    Ok(smallvec::smallvec![out.to_dtype(dt)?, lse])
}

/// The first derivative in differentiable operators (the probabilities
/// recomputed from the inputs).
fn composite_backward(
    op: &SdpaFlash,
    g: &Tensor,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    if k.shape()[k.ndim() - 2] == 0 {
        return Ok((q.zeros_like()?, k.zeros_like()?, v.zeros_like()?));
    }
    let p = scores(op, q, k)?.softmax(-1)?;
    let dv = p.transpose(-2, -1)?.matmul(g)?;
    let dp = g.matmul(&v.transpose(-2, -1)?)?;
    let ds = p.mul(&dp.sub(&dp.mul(&p)?.sum_dim(-1, true)?)?)?.mul(op.scale)?;
    let dq = ds.matmul(k)?;
    let dk = ds.transpose(-2, -1)?.matmul(q)?;
    Ok((dq, dk, dv))
}

/// The `AnyBackend` kernel of the forward.
fn forward_composite_kernel(c: &Call) -> Result<Tensors> {
    let op: &SdpaFlash = downcast_op(c.op)?;
    op.infer(c.inputs)?;
    composite_forward(op, c.inputs[0], c.inputs[1], c.inputs[2])
}

/// The `AnyBackend` kernel of the derivative.
fn backward_composite_kernel(c: &Call) -> Result<Tensors> {
    let op: &SdpaFlashBackward = downcast_op(c.op)?;
    op.infer(c.inputs)?;
    let fwd = SdpaFlash {
        causal: op.causal,
        scale: op.scale,
    };
    let (dq, dk, dv) = composite_backward(&fwd, c.inputs[0], c.inputs[1], c.inputs[2], c.inputs[3])?;
    Ok(smallvec::smallvec![dq, dk, dv])
}

/// Registers the composite kernels for backends without their own.
pub(crate) fn register() -> Result<()> {
    SDPA_FLASH.register_builtin(Slot::AnyBackend, Kernel::Functional(forward_composite_kernel))?;
    SDPA_FLASH_BACKWARD.register_builtin(Slot::AnyBackend, Kernel::Functional(backward_composite_kernel))?;
    Ok(())
}

/// # Fused attention
impl Tensor {
    /// `softmax(self kᵀ · scale) v` as one operator (PyTorch's
    /// `torch._scaled_dot_product_flash_attention_for_cpu`, what
    /// `F.scaled_dot_product_attention` runs on the CPU without a mask or
    /// dropout): `self` `[*B, L, E]`, `k` `[*B, S, E]`, `v` `[*B, S, Ev]`;
    /// returns the result `[*B, L, Ev]` and the log-sum-exp of each score
    /// row `[*B, L]`. `scale` defaults to `1 / sqrt(E)`; `is_causal` keeps
    /// the keys at or before each query's position. Errors: fewer than 2
    /// dims, different batch dims or dtypes, a key without the query's
    /// last dim or a value without the key's length, integer inputs.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// let q = Tensor::randn([2, 3, 5, 4])?;
    /// let (k, v) = (Tensor::randn([2, 3, 6, 4])?, Tensor::randn([2, 3, 6, 8])?);
    /// let (out, lse) = q.scaled_dot_product_flash_attention(&k, &v, true, None)?;
    /// assert_eq!(out.shape(), &[2, 3, 5, 8]);
    /// assert_eq!(lse.shape(), &[2, 3, 5]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn scaled_dot_product_flash_attention(
        &self,
        k: &Tensor,
        v: &Tensor,
        is_causal: bool,
        scale: Option<f64>,
    ) -> Result<(Tensor, Tensor)> {
        let e = self.shape().last().copied().unwrap_or(0);
        let op = SdpaFlash {
            causal: is_causal,
            scale: scale.unwrap_or(1.0 / (e as f64).sqrt()),
        };
        let mut r = call(&op, &[self, k, v])?.into_iter();
        match (r.next(), r.next()) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => Err(Error::invalid(NAME, "returned fewer than two outputs")),
        }
    }
}
