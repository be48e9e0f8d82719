//! `MultiheadAttention` (PyTorch's parameters, initialisation and
//! `multi_head_attention_forward`), over
//! [`scaled_dot_product_attention`] (in [`crate::functional`]).

use ferrotorch_core::{DType, Error, Result, Tensor, TensorOptions};

pub use crate::functional::{SdpaOptions, scaled_dot_product_attention};
use crate::init;
use crate::layers::linear::LinearOptions;
use crate::pyfmt::py_bool;
use crate::state::call_with_hooks;
use crate::{Linear, Module, ModuleState, Parameter, functional as F};

/// Multi-head attention (PyTorch's `nn.MultiheadAttention`): an input
/// projection packed as `in_proj_weight` `[3E, E]` (or separate
/// `q/k/v_proj_weight` when `kdim`/`vdim` differ), `num_heads` heads of
/// scaled dot-product attention, and `out_proj`; PyTorch's names and
/// initialisation (xavier_uniform on the input projection, zero biases).
#[derive(Module)]
pub struct MultiheadAttention {
    /// `[3E, E]` when query, key and value have the embedding size.
    pub in_proj_weight: Option<Parameter>,
    /// `[E, E]` when `kdim` or `vdim` differs.
    pub q_proj_weight: Option<Parameter>,
    /// `[E, kdim]` when `kdim` or `vdim` differs.
    pub k_proj_weight: Option<Parameter>,
    /// `[E, vdim]` when `kdim` or `vdim` differs.
    pub v_proj_weight: Option<Parameter>,
    /// `[3E]`, if the layer has biases.
    pub in_proj_bias: Option<Parameter>,
    /// The output projection.
    pub out_proj: Linear,
    embed_dim: usize,
    num_heads: usize,
    kdim: usize,
    vdim: usize,
    dropout: f64,
    batch_first: bool,
    state: ModuleState,
}

/// The construction options of [`MultiheadAttention`] (PyTorch's keywords).
#[derive(Debug, Clone, Copy, PartialEq, crate::Options)]
pub struct MultiheadAttentionOptions {
    /// Dropout on the attention weights in training (default 0).
    pub(crate) dropout: f64,
    /// Biases on the projections (default true).
    pub(crate) bias: bool,
    /// The key's feature size (default: the embedding size).
    pub(crate) kdim: Option<usize>,
    /// The value's feature size (default: the embedding size).
    pub(crate) vdim: Option<usize>,
    /// Inputs are `[N, L, E]` instead of `[L, N, E]` (default false).
    pub(crate) batch_first: bool,
    /// The parameters' dtype (default: the default dtype).
    pub(crate) dtype: Option<DType>,
}

impl Default for MultiheadAttentionOptions {
    fn default() -> Self {
        MultiheadAttentionOptions {
            dropout: 0.0,
            bias: true,
            kdim: None,
            vdim: None,
            batch_first: false,
            dtype: None,
        }
    }
}

/// The call arguments of [`MultiheadAttention::call_with`] besides query,
/// key and value (PyTorch's keywords and defaults).
#[derive(Debug, Clone, Copy, crate::Options)]
pub struct MhaForwardOptions<'a> {
    /// `[N, S]`: true (or a float bias) for keys to ignore.
    pub(crate) key_padding_mask: Option<&'a Tensor>,
    /// Return the attention weights (default true).
    pub(crate) need_weights: bool,
    /// `[L, S]` or `[N * num_heads, L, S]`: true (or a float bias) where
    /// attention is not allowed.
    pub(crate) attn_mask: Option<&'a Tensor>,
    /// Average the returned weights over heads (default true).
    pub(crate) average_attn_weights: bool,
    /// Apply a causal mask when no `attn_mask` is given.
    pub(crate) is_causal: bool,
}

impl Default for MhaForwardOptions<'_> {
    fn default() -> Self {
        MhaForwardOptions {
            key_padding_mask: None,
            need_weights: true,
            attn_mask: None,
            average_attn_weights: true,
            is_causal: false,
        }
    }
}

impl MultiheadAttention {
    /// The layer with default options.
    pub fn new(embed_dim: usize, num_heads: usize) -> Result<Self> {
        Self::with_options(embed_dim, num_heads, MultiheadAttentionOptions::default())
    }

    /// The layer; errors when `embed_dim` is not divisible by `num_heads`.
    pub fn with_options(embed_dim: usize, num_heads: usize, o: MultiheadAttentionOptions) -> Result<Self> {
        if num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            return Err(Error::invalid(
                "MultiheadAttention",
                "embed_dim must be divisible by num_heads",
            ));
        }
        let (kdim, vdim) = (o.kdim.unwrap_or(embed_dim), o.vdim.unwrap_or(embed_dim));
        let topts = match o.dtype {
            Some(dt) => TensorOptions::new().dtype(dt),
            None => TensorOptions::new(),
        };
        // PyTorch builds out_proj (drawing its Linear init) before
        // _reset_parameters draws the input projection.
        let same = kdim == embed_dim && vdim == embed_dim;
        let empty = |r: usize, c: usize| topts.clone().empty([r, c]);
        let (in_w, q_w, k_w, v_w) = if same {
            (Some(empty(3 * embed_dim, embed_dim)?), None, None, None)
        } else {
            (
                None,
                Some(empty(embed_dim, embed_dim)?),
                Some(empty(embed_dim, kdim)?),
                Some(empty(embed_dim, vdim)?),
            )
        };
        let in_b = if o.bias {
            Some(topts.clone().empty([3 * embed_dim])?)
        } else {
            None
        };
        let out_proj = Linear::with_options(
            embed_dim,
            embed_dim,
            LinearOptions {
                bias: o.bias,
                dtype: o.dtype,
                ..Default::default()
            },
        )?
        .renamed("NonDynamicallyQuantizableLinear");
        for w in [&in_w, &q_w, &k_w, &v_w].into_iter().flatten() {
            init::xavier_uniform_(w, 1.0)?;
        }
        if let Some(b) = &in_b {
            init::zeros_(b)?;
            if let Some(ob) = &out_proj.bias {
                init::zeros_(&ob.tensor())?;
            }
        }
        let p = |t: Option<Tensor>| t.map(Parameter::new).transpose();
        Ok(MultiheadAttention {
            in_proj_weight: p(in_w)?,
            q_proj_weight: p(q_w)?,
            k_proj_weight: p(k_w)?,
            v_proj_weight: p(v_w)?,
            in_proj_bias: p(in_b)?,
            out_proj,
            embed_dim,
            num_heads,
            kdim,
            vdim,
            dropout: o.dropout,
            batch_first: o.batch_first,
            state: ModuleState::default(),
        })
    }

    /// Attention of `query` over `key`/`value` (`[L, N, E]`, or `[N, L, E]`
    /// with `batch_first`; unbatched `[L, E]` too). Returns the output and,
    /// with `need_weights`, the attention weights (`[N, L, S]` averaged
    /// over heads, or `[N, num_heads, L, S]`). Errors naming the layer and
    /// the shapes when they do not fit.
    ///
    /// Runs between the module's hooks (PyTorch's `mha(query, key, value,
    /// ...)`): they see the inputs `[query, key, value]` (the masks are
    /// keyword arguments, which PyTorch's hooks do not see either) and the
    /// outputs `[output]` or `[output, weights]`.
    pub fn call(&self, query: &Tensor, key: &Tensor, value: &Tensor) -> Result<(Tensor, Option<Tensor>)> {
        self.call_with(query, key, value, MhaForwardOptions::default())
    }

    /// [`MultiheadAttention::call`] with PyTorch's keyword arguments
    /// (`mha(q, k, v, key_padding_mask=m, need_weights=False)`:
    /// `mha.call_with(&q, &k, &v, MhaForwardOptions::new().key_padding_mask(&m).need_weights(false))`).
    pub fn call_with(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        opts: MhaForwardOptions,
    ) -> Result<(Tensor, Option<Tensor>)> {
        if !self.state.has_hooks() {
            return self.attend(query, key, value, &opts);
        }
        let args = [query.clone(), key.clone(), value.clone()];
        call_with_hooks(self, &args, |a| self.attend(&a[0], &a[1], &a[2], &opts))
    }

    /// [`MultiheadAttention::call`] without the hooks (`mha.forward(q, k, v)`).
    pub fn forward(&self, query: &Tensor, key: &Tensor, value: &Tensor) -> Result<(Tensor, Option<Tensor>)> {
        self.attend(query, key, value, &MhaForwardOptions::default())
    }

    /// [`MultiheadAttention::call_with`] without the hooks.
    pub fn forward_with(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        opts: MhaForwardOptions,
    ) -> Result<(Tensor, Option<Tensor>)> {
        self.attend(query, key, value, &opts)
    }

    /// The forward without hooks.
    fn attend(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        opts: &MhaForwardOptions,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let batched = query.ndim() == 3;
        // PyTorch's checks and messages (`_mha_shape_check`,
        // `multi_head_attention_forward`), in its order.
        let fail = |msg: String| Err(Error::module(self.repr_line(), msg));
        let (qn, kn, vn) = (query.ndim(), key.ndim(), value.ndim());
        if qn != 2 && qn != 3 {
            return fail(format!(
                "query should be unbatched 2D or batched 3D tensor but received {qn}-D query tensor"
            ));
        }
        if kn != qn || vn != qn {
            let kind = if batched { "batched (3-D)" } else { "unbatched (2-D)" };
            return fail(format!(
                "For {kind} `query`, expected `key` and `value` to be {qn}-D but found {kn}-D and {vn}-D tensors respectively"
            ));
        }
        let e = query.shape()[qn - 1];
        if e != self.embed_dim {
            return fail(format!(
                "was expecting embedding dimension of {}, but got {e}",
                self.embed_dim
            ));
        }
        // PyTorch compares them after giving unbatched inputs a batch of 1.
        let batch_of = |t: &Tensor| {
            let mut d = t.shape().to_vec();
            if !batched {
                d.insert(1, 1);
            }
            d
        };
        let (ks, vs) = (batch_of(key), batch_of(value));
        if self.kdim == self.embed_dim && self.vdim == self.embed_dim {
            if ks != vs {
                return fail(format!("key shape {ks:?} does not match value shape {vs:?}"));
            }
        } else if ks[..2] != vs[..2] {
            return fail(format!(
                "key's sequence and batch dims {:?} do not match value's {:?}",
                &ks[..2],
                &vs[..2]
            ));
        }
        if ks[2] != self.kdim || vs[2] != self.vdim {
            // PyTorch fails in the projection's matmul here.
            return fail(format!(
                "expected key [.., {}] and value [.., {}], got {ks:?} and {vs:?}",
                self.kdim, self.vdim
            ));
        }
        // To [L, N, E].
        let to_seq_first = |t: &Tensor| -> Result<Tensor> {
            match (batched, self.batch_first) {
                (false, _) => t.unsqueeze(1),
                (true, true) => t.transpose(0, 1),
                (true, false) => Ok(t.clone()),
            }
        };
        let (q, k, v) = (to_seq_first(query)?, to_seq_first(key)?, to_seq_first(value)?);
        let (l, n) = (q.shape()[0], q.shape()[1]);
        let s = k.shape()[0];
        if k.shape()[1] != n || v.shape()[..2] != k.shape()[..2] {
            return Err(Error::module(
                self.repr_line(),
                format!(
                    "key and value must have the query's batch size and the same length, got {:?}, {:?} and {:?}",
                    query.shape(),
                    key.shape(),
                    value.shape()
                ),
            ));
        }
        if opts.is_causal && opts.attn_mask.is_none() {
            return Err(Error::module(
                self.repr_line(),
                "Need attn_mask if specifying the is_causal hint. You may use the Transformer module method \
                 `generate_square_subsequent_mask` to create this mask.",
            ));
        }
        let (h, e) = (self.num_heads, self.embed_dim);
        let hd = e / h;
        // Input projections.
        let bias = self.in_proj_bias.as_ref().map(Parameter::tensor);
        let bias_chunk = |i: i64| -> Result<Option<Tensor>> {
            bias.as_ref().map(|b| b.narrow(0, i * e as i64, e as i64)).transpose()
        };
        let (wq, wk, wv) = match &self.in_proj_weight {
            Some(w) => {
                let w = w.tensor();
                (
                    w.narrow(0, 0, e as i64)?,
                    w.narrow(0, e as i64, e as i64)?,
                    w.narrow(0, 2 * e as i64, e as i64)?,
                )
            }
            None => {
                let get = |p: &Option<Parameter>| {
                    p.as_ref()
                        .map(Parameter::tensor)
                        .ok_or_else(|| Error::invalid("MultiheadAttention", "missing projection weight"))
                };
                (
                    get(&self.q_proj_weight)?,
                    get(&self.k_proj_weight)?,
                    get(&self.v_proj_weight)?,
                )
            }
        };
        let qp = F::linear(&q, &wq, bias_chunk(0)?.as_ref())?;
        let kp = F::linear(&k, &wk, bias_chunk(1)?.as_ref())?;
        let vp = F::linear(&v, &wv, bias_chunk(2)?.as_ref())?;
        // [L, N, E] -> [N, H, L, hd].
        let heads = |t: &Tensor, len: usize| -> Result<Tensor> {
            t.reshape([len as i64, (n * h) as i64, hd as i64])?
                .transpose(0, 1)?
                .reshape([n as i64, h as i64, len as i64, hd as i64])
        };
        let (qh, kh, vh) = (heads(&qp, l)?, heads(&kp, s)?, heads(&vp, s)?);
        // One additive mask [N or 1, H or 1, L, S] from attn_mask and key_padding_mask.
        let mask = self.merged_mask(opts, q.dtype(), n, l, s)?;
        let dropout = if self.state.is_training() { self.dropout } else { 0.0 };
        let (out, weights) = if opts.need_weights {
            // PyTorch: q * sqrt(1 / head_dim), then baddbmm with the mask.
            let scale = (1.0 / hd as f64).sqrt();
            let mut scores = qh.mul(scale)?.matmul(&kh.transpose(-2, -1)?)?;
            if let Some(m) = &mask {
                scores = scores.add(m)?;
            }
            let mut attn = scores.softmax(-1)?;
            if dropout > 0.0 {
                attn = F::dropout(&attn, dropout, true)?;
            }
            let w = if opts.average_attn_weights {
                attn.mean_dim([1], false)?
            } else {
                attn.clone()
            };
            (attn.matmul(&vh)?, Some(w))
        } else {
            let causal = opts.is_causal && opts.key_padding_mask.is_none();
            let o = scaled_dot_product_attention(
                &qh,
                &kh,
                &vh,
                &SdpaOptions {
                    attn_mask: mask.as_ref(),
                    dropout_p: dropout,
                    is_causal: causal,
                    scale: None,
                },
            )?;
            (o, None)
        };
        // [N, H, L, hd] -> [L * N, E], the output projection, -> [L, N, E].
        let out = out.permute([2, 0, 1, 3])?.reshape([(l * n) as i64, e as i64])?;
        let out = F::linear(
            &out,
            &self.out_proj.weight.tensor(),
            self.out_proj.bias.as_ref().map(Parameter::tensor).as_ref(),
        )?
        .view([l as i64, n as i64, e as i64])?;
        let out = match (batched, self.batch_first) {
            (false, _) => out.squeeze_dims([1])?,
            (true, true) => out.transpose(0, 1)?,
            (true, false) => out,
        };
        let weights = match (weights, batched) {
            (Some(w), false) => Some(w.squeeze_dims([0])?),
            (w, _) => w,
        };
        Ok((out, weights))
    }

    /// `attn_mask` and `key_padding_mask` as one float bias broadcasting
    /// to `[N, H, L, S]` (true in a boolean mask: not allowed).
    fn merged_mask(
        &self,
        opts: &MhaForwardOptions,
        dtype: DType,
        n: usize,
        l: usize,
        s: usize,
    ) -> Result<Option<Tensor>> {
        let as_bias = |m: &Tensor| -> Result<Tensor> {
            if m.dtype() == DType::Bool {
                TensorOptions::new()
                    .dtype(dtype)
                    .zeros(m.shape())?
                    .masked_fill(m, f64::NEG_INFINITY)
            } else {
                m.to_dtype(dtype)
            }
        };
        let h = self.num_heads;
        let mut total: Option<Tensor> = None;
        // With is_causal and nothing else to merge, the sdpa path applies
        // the causal mask itself (PyTorch drops attn_mask then).
        let attn_mask = if opts.is_causal && opts.key_padding_mask.is_none() && !opts.need_weights {
            None
        } else {
            opts.attn_mask.cloned()
        };
        if let Some(m) = &attn_mask {
            let b = as_bias(m)?;
            // PyTorch's checks and messages (`multi_head_attention_forward`).
            let b = match b.shape() {
                [a, c] if *a == l && *c == s => b,
                [nh, a, c] if *nh == n * h && *a == l && *c == s => {
                    b.reshape([n as i64, h as i64, l as i64, s as i64])?
                }
                other @ [_, _] => {
                    return Err(Error::module(
                        self.repr_line(),
                        format!("The shape of the 2D attn_mask is {other:?}, but should be [{l}, {s}]."),
                    ));
                }
                other @ [_, _, _] => {
                    return Err(Error::module(
                        self.repr_line(),
                        format!(
                            "The shape of the 3D attn_mask is {other:?}, but should be [{}, {l}, {s}].",
                            n * h
                        ),
                    ));
                }
                other => {
                    return Err(Error::module(
                        self.repr_line(),
                        format!("attn_mask's dimension {} is not supported", other.len()),
                    ));
                }
            };
            total = Some(b);
        }
        if let Some(kpm) = opts.key_padding_mask {
            if kpm.shape() != [n, s] {
                return Err(Error::module(
                    self.repr_line(),
                    format!("expected key_padding_mask of shape [{n}, {s}], got {:?}", kpm.shape()),
                ));
            }
            let b = as_bias(kpm)?.reshape([n as i64, 1, 1, s as i64])?;
            total = Some(match total {
                Some(t) => t.add(&b)?,
                None => b,
            });
        }
        Ok(total)
    }

    /// A copy with its own parameter storage (`copy.deepcopy`).
    pub(crate) fn deep_clone(&self) -> Result<Self> {
        use crate::parameter::copy_parameter;
        let c = |p: &Option<Parameter>| p.as_ref().map(copy_parameter).transpose();
        Ok(MultiheadAttention {
            in_proj_weight: c(&self.in_proj_weight)?,
            q_proj_weight: c(&self.q_proj_weight)?,
            k_proj_weight: c(&self.k_proj_weight)?,
            v_proj_weight: c(&self.v_proj_weight)?,
            in_proj_bias: c(&self.in_proj_bias)?,
            out_proj: self.out_proj.deep_clone()?,
            embed_dim: self.embed_dim,
            num_heads: self.num_heads,
            kdim: self.kdim,
            vdim: self.vdim,
            dropout: self.dropout,
            batch_first: self.batch_first,
            state: self.state.clone(),
        })
    }

    fn repr_line(&self) -> String {
        format!(
            "MultiheadAttention(embed_dim={}, num_heads={}, batch_first={})",
            self.embed_dim,
            self.num_heads,
            py_bool(self.batch_first)
        )
    }
}
