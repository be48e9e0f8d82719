//! `scaled_dot_product_attention`: where PyTorch's CPU dispatch picks its
//! fused kernel, the core's fused operator
//! `_scaled_dot_product_flash_attention_for_cpu`; otherwise PyTorch's math
//! path (the scale split as `sqrt(scale)` on the query and on the key, an
//! additive mask, a "safe" softmax that gives 0 for fully masked rows,
//! dropout).

use ferrotorch_core::backend::layout::broadcast_shapes;
use ferrotorch_core::{DType, Error, Result, Tensor, TensorOptions};

/// The keyword arguments of [`scaled_dot_product_attention`].
#[derive(Debug, Clone, Copy, Default, crate::Options)]
pub struct SdpaOptions<'a> {
    /// A boolean mask (true: attend) or a float mask added to the scores,
    /// broadcastable to `[..., L, S]`.
    pub(crate) attn_mask: Option<&'a Tensor>,
    /// Dropout probability on the attention weights (applied always, as
    /// PyTorch's functional form does).
    pub(crate) dropout_p: f64,
    /// Attend only to keys at or before the query's position (the top-left
    /// aligned lower triangle of `[L, S]`).
    pub(crate) is_causal: bool,
    /// The score scale (default `1 / sqrt(E)`).
    pub(crate) scale: Option<f64>,
}

/// `softmax(q kᵀ · scale + mask) v` over the last two dims (`F.scaled_dot_product_attention`):
/// `q` `[..., L, E]`, `k` `[..., S, E]`, `v` `[..., S, Ev]` (batch dims
/// broadcast) gives `[..., L, Ev]`. Errors for fewer than 2 dims,
/// mismatched dtypes or embedding sizes, a mask together with
/// `is_causal`, and `dropout_p` outside [0, 1].
pub fn scaled_dot_product_attention(q: &Tensor, k: &Tensor, v: &Tensor, opts: &SdpaOptions) -> Result<Tensor> {
    const OP: &str = "scaled_dot_product_attention";
    if q.ndim() < 2 || k.ndim() < 2 || v.ndim() < 2 {
        return Err(Error::invalid(
            OP,
            format!(
                "expected query, key and value of at least 2 dims, got {:?}, {:?} and {:?}",
                q.shape(),
                k.shape(),
                v.shape()
            ),
        ));
    }
    if q.dtype() != k.dtype() || q.dtype() != v.dtype() {
        return Err(Error::invalid(
            OP,
            format!(
                "Expected query, key, and value to have the same dtype, but got query.dtype: {} key.dtype: {} and value.dtype: {} instead.",
                q.dtype().cpp_type_name(),
                k.dtype().cpp_type_name(),
                v.dtype().cpp_type_name()
            ),
        ));
    }
    let (l, e) = (q.shape()[q.ndim() - 2], q.shape()[q.ndim() - 1]);
    let s = k.shape()[k.ndim() - 2];
    if k.shape()[k.ndim() - 1] != e || v.shape()[v.ndim() - 2] != s {
        return Err(Error::invalid(
            OP,
            format!(
                "query {:?}, key {:?} and value {:?} do not fit: key needs the query's last dim and value the key's length",
                q.shape(),
                k.shape(),
                v.shape()
            ),
        ));
    }
    if opts.is_causal && opts.attn_mask.is_some() {
        return Err(Error::invalid(
            OP,
            "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True",
        ));
    }
    if !(0.0..=1.0).contains(&opts.dropout_p) {
        return Err(Error::invalid(
            OP,
            format!(
                "dropout probability has to be between 0 and 1, but got {}",
                opts.dropout_p
            ),
        ));
    }
    if l == 0 || s == 0 {
        return empty_sequence_attention(q, k, v);
    }
    let scale = opts.scale.unwrap_or(1.0 / (e as f64).sqrt());
    if fused_applies(q, k, v, opts) {
        return Ok(q
            .scaled_dot_product_flash_attention(k, v, opts.is_causal, Some(scale))?
            .0);
    }
    let root = scale.abs().sqrt();
    let qs = q.mul(if scale < 0.0 { -root } else { root })?;
    // Scaled before the transpose (the same values): the multiply then runs
    // over k's own layout, not a transposed one.
    let scores = qs.matmul(&k.mul(root)?.transpose(-2, -1)?)?;
    let bias = if opts.is_causal {
        let keep = TensorOptions::new().dtype(DType::Bool).ones([l, s])?.tril(0)?;
        Some(bool_mask_to_bias(&keep, q.dtype())?)
    } else {
        match opts.attn_mask {
            Some(m) if m.dtype() == DType::Bool => Some(bool_mask_to_bias(m, q.dtype())?),
            Some(m) => Some(m.clone()),
            None => None,
        }
    };
    let scores = match &bias {
        Some(b) => scores.add(b)?,
        None => scores,
    };
    // PyTorch's math path uses _safe_softmax whatever the mask: a row
    // with every score -inf (masked out, or from infinite inputs) attends
    // to nothing.
    // Its derivative is softmax's at that result (0 on those rows), so the
    // dead rows are softmaxed as zeros (finite) and then zeroed: no NaN
    // reaches the gradients.
    let dead = scores.isneginf()?.all_dim([-1], true)?;
    let mut attn = if dead.any()?.item::<bool>()? {
        scores.masked_fill(&dead, 0.0)?.softmax(-1)?.masked_fill(&dead, 0.0)?
    } else {
        scores.softmax(-1)?
    };
    if opts.dropout_p > 0.0 {
        attn = super::dropout(&attn, opts.dropout_p, true)?;
    }
    attn.matmul(v)
}

/// PyTorch's result for an empty query or key sequence, whatever the
/// mask, dropout or scale: `zeros([..., L, Ev]) + (q.sum() + k.sum() +
/// v.sum()) * 0`, so the gradients are zeros and an infinite or NaN input
/// makes the output NaN, as in PyTorch.
fn empty_sequence_attention(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    const OP: &str = "scaled_dot_product_attention";
    let batch = |t: &Tensor| t.shape()[..t.ndim() - 2].to_vec();
    let qk = broadcast_shapes(OP, &batch(q), &batch(k))?;
    let mut shape = broadcast_shapes(OP, &qk, &batch(v))?.to_vec();
    shape.extend([q.shape()[q.ndim() - 2], v.shape()[v.ndim() - 1]]);
    let sums = q.sum()?.add(&k.sum()?)?.add(&v.sum()?)?.mul(0.0)?;
    q.new_zeros(shape)?.add(&sums)
}

/// Whether PyTorch's CPU dispatch would pick the fused (flash) kernel:
/// 4-d floating-point inputs with one batch size and head count, no mask,
/// no dropout, and one head dim for keys and values (empty sequences never
/// get here). Everything else takes the math path.
fn fused_applies(q: &Tensor, k: &Tensor, v: &Tensor, opts: &SdpaOptions) -> bool {
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    q.ndim() == 4
        && k.ndim() == 4
        && v.ndim() == 4
        && opts.attn_mask.is_none()
        && opts.dropout_p == 0.0
        && q.dtype().is_floating_point()
        && qs[..2] == ks[..2]
        && qs[..2] == vs[..2]
        && qs[3] == vs[3]
}

/// A boolean "attend" mask as an additive bias: 0 where true, -inf where false.
fn bool_mask_to_bias(mask: &Tensor, dtype: DType) -> Result<Tensor> {
    let zeros = TensorOptions::new().dtype(dtype).zeros(mask.shape())?;
    zeros.masked_fill(&mask.logical_not()?, f64::NEG_INFINITY)
}
