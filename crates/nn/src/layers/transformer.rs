//! `TransformerEncoderLayer`, `TransformerDecoderLayer`,
//! `TransformerEncoder`, `TransformerDecoder` and `Transformer` (PyTorch's
//! submodules, names, order and initialisation; the math path of their
//! forwards).

use ferrotorch_core::{DType, Error, Result, Tensor, TensorOptions};

use super::linear::LinearOptions;
use super::norm::LayerNormOptions;
use crate::pyfmt::py_bool;
use crate::state::call_with_hooks;
use crate::{
    Dropout, Forward, LayerNorm, Linear, MhaForwardOptions, Module, ModuleState, MultiheadAttention,
    MultiheadAttentionOptions, functional as F, init,
};

/// The feed-forward activation of a transformer layer (PyTorch's
/// `activation="relu" | "gelu"`, applied as `F.relu` / `F.gelu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransformerActivation {
    /// `F.relu` (the default).
    #[default]
    Relu,
    /// `F.gelu` (exact).
    Gelu,
}

impl TransformerActivation {
    /// Parses PyTorch's spelling; any other string is PyTorch's error.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "relu" => Ok(TransformerActivation::Relu),
            "gelu" => Ok(TransformerActivation::Gelu),
            other => Err(Error::invalid(
                "TransformerEncoderLayer",
                format!("activation should be relu/gelu, not {other}"),
            )),
        }
    }

    fn apply(self, x: &Tensor) -> Result<Tensor> {
        match self {
            TransformerActivation::Relu => F::relu(x),
            TransformerActivation::Gelu => F::gelu(x),
        }
    }
}

/// The construction options of [`TransformerEncoderLayer`] and
/// [`TransformerDecoderLayer`] (PyTorch's keywords and defaults).
#[derive(Debug, Clone, Copy, PartialEq, crate::Options)]
pub struct TransformerLayerOptions {
    /// Hidden size of the feed-forward block (`2048`).
    pub(crate) dim_feedforward: usize,
    /// Dropout probability everywhere (`0.1`).
    pub(crate) dropout: f64,
    /// Feed-forward activation (`Relu`).
    pub(crate) activation: TransformerActivation,
    /// The layer norms' epsilon (`1e-5`).
    pub(crate) layer_norm_eps: f64,
    /// Inputs are `[N, S, E]` instead of `[S, N, E]` (`false`).
    pub(crate) batch_first: bool,
    /// Layer norm before each block instead of after the residual
    /// (`false`).
    pub(crate) norm_first: bool,
    /// Biases in the linear layers, attention and layer norms (`true`).
    pub(crate) bias: bool,
    /// The parameters' dtype (default: the default dtype).
    pub(crate) dtype: Option<DType>,
}

impl Default for TransformerLayerOptions {
    fn default() -> Self {
        TransformerLayerOptions {
            dim_feedforward: 2048,
            dropout: 0.1,
            activation: TransformerActivation::Relu,
            layer_norm_eps: 1e-5,
            batch_first: false,
            norm_first: false,
            bias: true,
            dtype: None,
        }
    }
}

/// PyTorch's `nn.Transformer.generate_square_subsequent_mask(sz)`: a float
/// `[sz, sz]` mask, `-inf` above the diagonal and 0 elsewhere.
pub fn generate_square_subsequent_mask(sz: usize, dtype: Option<DType>) -> Result<Tensor> {
    let o = match dtype {
        Some(dt) => TensorOptions::new().dtype(dt),
        None => TensorOptions::new(),
    };
    o.full([sz, sz], f64::NEG_INFINITY)?.triu(1)
}

/// The feed-forward block's and the norms' shared pieces.
fn mha(d_model: usize, nhead: usize, o: &TransformerLayerOptions) -> Result<MultiheadAttention> {
    MultiheadAttention::with_options(
        d_model,
        nhead,
        MultiheadAttentionOptions {
            dropout: o.dropout,
            bias: o.bias,
            batch_first: o.batch_first,
            dtype: o.dtype,
            ..Default::default()
        },
    )
}

fn linear(i: usize, out: usize, o: &TransformerLayerOptions) -> Result<Linear> {
    Linear::with_options(
        i,
        out,
        LinearOptions {
            bias: o.bias,
            dtype: o.dtype,
            ..Default::default()
        },
    )
}

fn layer_norm(d_model: usize, o: &TransformerLayerOptions) -> Result<LayerNorm> {
    LayerNorm::with_options(
        vec![d_model],
        LayerNormOptions {
            eps: o.layer_norm_eps,
            bias: o.bias,
            dtype: o.dtype,
            ..Default::default()
        },
    )
}

/// Errors unless `x` is `[S, N, E]` / `[N, S, E]` / `[S, E]` with `E =
/// d_model`, naming the layer and both shapes.
fn check_input(who: &str, what: &str, x: &Tensor, d_model: usize, batch_first: bool) -> Result<()> {
    if !(x.ndim() == 2 || x.ndim() == 3) || x.shape().last() != Some(&d_model) {
        let layout = if batch_first { "[N, S, {}]" } else { "[S, N, {}]" };
        return Err(Error::module(
            who,
            format!(
                "expected {what} {} (or unbatched [S, {d_model}]), got {:?}",
                layout.replace("{}", &d_model.to_string()),
                x.shape()
            ),
        ));
    }
    Ok(())
}

/// The call arguments of [`TransformerEncoderLayer::forward`] besides the
/// source (PyTorch's keywords and defaults).
#[derive(Debug, Clone, Copy, Default, crate::Options)]
pub struct EncoderLayerForwardOptions<'a> {
    /// `[S, S]` or `[N * nhead, S, S]`: a float bias, or true where
    /// attention is not allowed.
    pub(crate) src_mask: Option<&'a Tensor>,
    /// `[N, S]`: true (or a float bias) for padded positions.
    pub(crate) src_key_padding_mask: Option<&'a Tensor>,
    /// `src_mask` is the causal mask (a hint; the mask must be given).
    pub(crate) is_causal: bool,
}

/// Self-attention and a feed-forward block, each with a residual
/// connection and layer norm (PyTorch's `nn.TransformerEncoderLayer`).
#[derive(Module)]
pub struct TransformerEncoderLayer {
    /// Self-attention.
    pub self_attn: MultiheadAttention,
    /// `d_model -> dim_feedforward`.
    pub linear1: Linear,
    /// Dropout inside the feed-forward block.
    pub dropout: Dropout,
    /// `dim_feedforward -> d_model`.
    pub linear2: Linear,
    /// The norm of the attention block.
    pub norm1: LayerNorm,
    /// The norm of the feed-forward block.
    pub norm2: LayerNorm,
    /// Dropout on the attention block's output.
    pub dropout1: Dropout,
    /// Dropout on the feed-forward block's output.
    pub dropout2: Dropout,
    d_model: usize,
    nhead: usize,
    opts: TransformerLayerOptions,
    state: ModuleState,
}

impl TransformerEncoderLayer {
    /// The layer with PyTorch's defaults.
    pub fn new(d_model: usize, nhead: usize) -> Result<Self> {
        Self::with_options(d_model, nhead, TransformerLayerOptions::default())
    }

    /// The layer; builds (and draws the initial weights of) its submodules
    /// in PyTorch's order. Errors when `d_model` is not divisible by
    /// `nhead`, or for a dropout outside [0, 1].
    pub fn with_options(d_model: usize, nhead: usize, o: TransformerLayerOptions) -> Result<Self> {
        Ok(TransformerEncoderLayer {
            self_attn: mha(d_model, nhead, &o)?,
            linear1: linear(d_model, o.dim_feedforward, &o)?,
            dropout: Dropout::new(o.dropout)?,
            linear2: linear(o.dim_feedforward, d_model, &o)?,
            norm1: layer_norm(d_model, &o)?,
            norm2: layer_norm(d_model, &o)?,
            dropout1: Dropout::new(o.dropout)?,
            dropout2: Dropout::new(o.dropout)?,
            d_model,
            nhead,
            opts: o,
            state: ModuleState::default(),
        })
    }

    /// A copy with its own parameter storage (PyTorch's `copy.deepcopy`,
    /// which `TransformerEncoder` applies to its layer); the training flags
    /// and hooks are copied (see [`ModuleState`]'s `Clone`).
    pub fn deep_clone(&self) -> Result<Self> {
        Ok(TransformerEncoderLayer {
            self_attn: self.self_attn.deep_clone()?,
            linear1: self.linear1.deep_clone()?,
            dropout: self.dropout.deep_clone(),
            linear2: self.linear2.deep_clone()?,
            norm1: self.norm1.deep_clone()?,
            norm2: self.norm2.deep_clone()?,
            dropout1: self.dropout1.deep_clone(),
            dropout2: self.dropout2.deep_clone(),
            d_model: self.d_model,
            nhead: self.nhead,
            opts: self.opts,
            state: self.state.clone(),
        })
    }

    /// The construction options.
    pub fn options(&self) -> &TransformerLayerOptions {
        &self.opts
    }

    fn name(&self) -> String {
        format!(
            "TransformerEncoderLayer(d_model={}, nhead={}, dim_feedforward={}, batch_first={}, norm_first={})",
            self.d_model,
            self.nhead,
            self.opts.dim_feedforward,
            py_bool(self.opts.batch_first),
            py_bool(self.opts.norm_first)
        )
    }

    /// The layer on `src` (`[S, N, E]`, `[N, S, E]` with `batch_first`, or
    /// unbatched `[S, E]`), as PyTorch's math path:
    /// `norm1(x + sa(x))`, `norm2(x + ff(x))`, or with `norm_first`
    /// `x + sa(norm1(x))`, `x + ff(norm2(x))`. Runs between the module's
    /// hooks (inputs `[src]`; the masks are keyword arguments). Errors name
    /// the layer and the shapes. Without masks this is
    /// [`Forward::call`].
    pub fn call_with(&self, src: &Tensor, opts: EncoderLayerForwardOptions) -> Result<Tensor> {
        call_with_hooks(self, std::slice::from_ref(src), |a| self.encode(&a[0], &opts))
    }

    /// [`TransformerEncoderLayer::call_with`] without the hooks.
    pub fn forward_with(&self, src: &Tensor, opts: EncoderLayerForwardOptions) -> Result<Tensor> {
        self.encode(src, &opts)
    }

    /// The forward without hooks.
    fn encode(&self, x: &Tensor, opts: &EncoderLayerForwardOptions) -> Result<Tensor> {
        check_input(&self.name(), "src", x, self.d_model, self.opts.batch_first)?;
        let sa = |x: &Tensor| -> Result<Tensor> {
            let (y, _) = self.self_attn.call_with(
                x,
                x,
                x,
                MhaForwardOptions {
                    key_padding_mask: opts.src_key_padding_mask,
                    need_weights: false,
                    attn_mask: opts.src_mask,
                    average_attn_weights: true,
                    is_causal: opts.is_causal,
                },
            )?;
            self.dropout1.call(&y)
        };
        let ff = |x: &Tensor| -> Result<Tensor> {
            let h = self.opts.activation.apply(&self.linear1.call(x)?)?;
            self.dropout2.call(&self.linear2.call(&self.dropout.call(&h)?)?)
        };
        if self.opts.norm_first {
            let x = x.add(&sa(&self.norm1.call(x)?)?)?;
            x.add(&ff(&self.norm2.call(&x)?)?)
        } else {
            let x = self.norm1.call(&x.add(&sa(x)?)?)?;
            self.norm2.call(&x.add(&ff(&x)?)?)
        }
    }
}

/// The layer without masks (`layer(src)`), so it can sit in a
/// [`Sequential`](crate::Sequential); masks go through the inherent
/// [`TransformerEncoderLayer::forward`].
impl Forward for TransformerEncoderLayer {
    fn forward(&self, src: &Tensor) -> Result<Tensor> {
        self.encode(src, &EncoderLayerForwardOptions::default())
    }
}

/// The call arguments of [`TransformerDecoderLayer::forward`] besides the
/// target and the memory (PyTorch's keywords and defaults).
#[derive(Debug, Clone, Copy, Default, crate::Options)]
pub struct DecoderLayerForwardOptions<'a> {
    /// `[T, T]` mask of the self-attention.
    pub(crate) tgt_mask: Option<&'a Tensor>,
    /// `[T, S]` mask of the attention over the memory.
    pub(crate) memory_mask: Option<&'a Tensor>,
    /// `[N, T]`: padded target positions.
    pub(crate) tgt_key_padding_mask: Option<&'a Tensor>,
    /// `[N, S]`: padded memory positions.
    pub(crate) memory_key_padding_mask: Option<&'a Tensor>,
    /// `tgt_mask` is the causal mask (a hint).
    pub(crate) tgt_is_causal: bool,
    /// `memory_mask` is the causal mask (a hint).
    pub(crate) memory_is_causal: bool,
}

/// Self-attention, attention over the encoder's memory and a feed-forward
/// block, each with a residual connection and layer norm (PyTorch's
/// `nn.TransformerDecoderLayer`).
#[derive(Module)]
pub struct TransformerDecoderLayer {
    /// Self-attention over the target.
    pub self_attn: MultiheadAttention,
    /// Attention of the target over the memory.
    pub multihead_attn: MultiheadAttention,
    /// `d_model -> dim_feedforward`.
    pub linear1: Linear,
    /// Dropout inside the feed-forward block.
    pub dropout: Dropout,
    /// `dim_feedforward -> d_model`.
    pub linear2: Linear,
    /// The norm of the self-attention block.
    pub norm1: LayerNorm,
    /// The norm of the memory attention block.
    pub norm2: LayerNorm,
    /// The norm of the feed-forward block.
    pub norm3: LayerNorm,
    /// Dropout on the self-attention block's output.
    pub dropout1: Dropout,
    /// Dropout on the memory attention block's output.
    pub dropout2: Dropout,
    /// Dropout on the feed-forward block's output.
    pub dropout3: Dropout,
    d_model: usize,
    nhead: usize,
    opts: TransformerLayerOptions,
    state: ModuleState,
}

impl TransformerDecoderLayer {
    /// The layer with PyTorch's defaults.
    pub fn new(d_model: usize, nhead: usize) -> Result<Self> {
        Self::with_options(d_model, nhead, TransformerLayerOptions::default())
    }

    /// The layer; builds its submodules in PyTorch's order. Errors as
    /// [`TransformerEncoderLayer::with_options`].
    pub fn with_options(d_model: usize, nhead: usize, o: TransformerLayerOptions) -> Result<Self> {
        Ok(TransformerDecoderLayer {
            self_attn: mha(d_model, nhead, &o)?,
            multihead_attn: mha(d_model, nhead, &o)?,
            linear1: linear(d_model, o.dim_feedforward, &o)?,
            dropout: Dropout::new(o.dropout)?,
            linear2: linear(o.dim_feedforward, d_model, &o)?,
            norm1: layer_norm(d_model, &o)?,
            norm2: layer_norm(d_model, &o)?,
            norm3: layer_norm(d_model, &o)?,
            dropout1: Dropout::new(o.dropout)?,
            dropout2: Dropout::new(o.dropout)?,
            dropout3: Dropout::new(o.dropout)?,
            d_model,
            nhead,
            opts: o,
            state: ModuleState::default(),
        })
    }

    fn name(&self) -> String {
        format!(
            "TransformerDecoderLayer(d_model={}, nhead={}, dim_feedforward={}, batch_first={}, norm_first={})",
            self.d_model,
            self.nhead,
            self.opts.dim_feedforward,
            py_bool(self.opts.batch_first),
            py_bool(self.opts.norm_first)
        )
    }

    /// A copy with its own parameter storage (PyTorch's `copy.deepcopy`,
    /// which `TransformerDecoder` applies to its layer); the training flags
    /// and hooks are copied.
    pub fn deep_clone(&self) -> Result<Self> {
        Ok(TransformerDecoderLayer {
            self_attn: self.self_attn.deep_clone()?,
            multihead_attn: self.multihead_attn.deep_clone()?,
            linear1: self.linear1.deep_clone()?,
            dropout: self.dropout.deep_clone(),
            linear2: self.linear2.deep_clone()?,
            norm1: self.norm1.deep_clone()?,
            norm2: self.norm2.deep_clone()?,
            norm3: self.norm3.deep_clone()?,
            dropout1: self.dropout1.deep_clone(),
            dropout2: self.dropout2.deep_clone(),
            dropout3: self.dropout3.deep_clone(),
            d_model: self.d_model,
            nhead: self.nhead,
            opts: self.opts,
            state: self.state.clone(),
        })
    }

    /// The construction options.
    pub fn options(&self) -> &TransformerLayerOptions {
        &self.opts
    }

    /// The layer on `tgt` `[T, N, E]` and `memory` `[S, N, E]` (batch
    /// first with `batch_first`; unbatched `[T, E]`, `[S, E]`), as
    /// PyTorch's math path. Runs between the module's hooks (inputs `[tgt,
    /// memory]`). Errors name the layer and the shapes.
    pub fn call(&self, tgt: &Tensor, memory: &Tensor) -> Result<Tensor> {
        self.call_with(tgt, memory, DecoderLayerForwardOptions::default())
    }

    /// [`TransformerDecoderLayer::call`] with PyTorch's keyword arguments
    /// (the masks).
    pub fn call_with(&self, tgt: &Tensor, memory: &Tensor, opts: DecoderLayerForwardOptions) -> Result<Tensor> {
        let args = [tgt.clone(), memory.clone()];
        call_with_hooks(self, &args, |a| self.decode(&a[0], &a[1], &opts))
    }

    /// [`TransformerDecoderLayer::call`] without the hooks.
    pub fn forward(&self, tgt: &Tensor, memory: &Tensor) -> Result<Tensor> {
        self.decode(tgt, memory, &DecoderLayerForwardOptions::default())
    }

    /// [`TransformerDecoderLayer::call_with`] without the hooks.
    pub fn forward_with(&self, tgt: &Tensor, memory: &Tensor, opts: DecoderLayerForwardOptions) -> Result<Tensor> {
        self.decode(tgt, memory, &opts)
    }

    /// The forward without hooks.
    fn decode(&self, x: &Tensor, mem: &Tensor, opts: &DecoderLayerForwardOptions) -> Result<Tensor> {
        let name = self.name();
        check_input(&name, "tgt", x, self.d_model, self.opts.batch_first)?;
        check_input(&name, "memory", mem, self.d_model, self.opts.batch_first)?;
        if mem.ndim() != x.ndim() {
            return Err(Error::module(
                name,
                format!(
                    "tgt and memory must both be batched or both unbatched, got {:?} and {:?}",
                    x.shape(),
                    mem.shape()
                ),
            ));
        }
        let sa = |x: &Tensor| -> Result<Tensor> {
            let (y, _) = self.self_attn.call_with(
                x,
                x,
                x,
                MhaForwardOptions {
                    key_padding_mask: opts.tgt_key_padding_mask,
                    need_weights: false,
                    attn_mask: opts.tgt_mask,
                    average_attn_weights: true,
                    is_causal: opts.tgt_is_causal,
                },
            )?;
            self.dropout1.call(&y)
        };
        let ca = |x: &Tensor| -> Result<Tensor> {
            let (y, _) = self.multihead_attn.call_with(
                x,
                mem,
                mem,
                MhaForwardOptions {
                    key_padding_mask: opts.memory_key_padding_mask,
                    need_weights: false,
                    attn_mask: opts.memory_mask,
                    average_attn_weights: true,
                    is_causal: opts.memory_is_causal,
                },
            )?;
            self.dropout2.call(&y)
        };
        let ff = |x: &Tensor| -> Result<Tensor> {
            let h = self.opts.activation.apply(&self.linear1.call(x)?)?;
            self.dropout3.call(&self.linear2.call(&self.dropout.call(&h)?)?)
        };
        if self.opts.norm_first {
            let x = x.add(&sa(&self.norm1.call(x)?)?)?;
            let x = x.add(&ca(&self.norm2.call(&x)?)?)?;
            x.add(&ff(&self.norm3.call(&x)?)?)
        } else {
            let x = self.norm1.call(&x.add(&sa(x)?)?)?;
            let x = self.norm2.call(&x.add(&ca(&x)?)?)?;
            self.norm3.call(&x.add(&ff(&x)?)?)
        }
    }
}

/// The call arguments of [`TransformerEncoder::forward`] besides the
/// source (PyTorch's keywords and defaults).
#[derive(Debug, Clone, Copy, Default, crate::Options)]
pub struct EncoderForwardOptions<'a> {
    /// `[S, S]` or `[N * nhead, S, S]` attention mask for every layer.
    pub(crate) mask: Option<&'a Tensor>,
    /// `[N, S]`: padded positions.
    pub(crate) src_key_padding_mask: Option<&'a Tensor>,
    /// Whether `mask` is the causal mask; `None` (the default) detects it
    /// by comparing with [`generate_square_subsequent_mask`], as PyTorch.
    pub(crate) is_causal: Option<bool>,
}

/// A stack of `num_layers` copies of an encoder layer and an optional
/// final norm (PyTorch's `nn.TransformerEncoder`: the layer is deep-copied,
/// so every layer starts with the same weights).
#[derive(Module)]
pub struct TransformerEncoder {
    /// The layers (`layers.0`, `layers.1`, ...).
    pub layers: Vec<TransformerEncoderLayer>,
    /// The final norm.
    pub norm: Option<LayerNorm>,
    state: ModuleState,
}

impl TransformerEncoder {
    /// `num_layers` deep copies of `encoder_layer` (which is dropped, as
    /// PyTorch keeps only the copies), then `norm`.
    pub fn new(encoder_layer: TransformerEncoderLayer, num_layers: usize, norm: Option<LayerNorm>) -> Result<Self> {
        let layers = (0..num_layers)
            .map(|_| encoder_layer.deep_clone())
            .collect::<Result<Vec<_>>>()?;
        Ok(TransformerEncoder {
            layers,
            norm,
            state: ModuleState::default(),
        })
    }

    /// The number of layers.
    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Every layer in turn on `src`, then the norm (PyTorch's math path),
    /// between the module's hooks (inputs `[src]`). Errors as
    /// [`TransformerEncoderLayer::forward`].
    pub fn call_with(&self, src: &Tensor, opts: EncoderForwardOptions) -> Result<Tensor> {
        call_with_hooks(self, std::slice::from_ref(src), |a| self.encode(&a[0], &opts))
    }

    /// [`TransformerEncoder::call_with`] without the hooks.
    pub fn forward_with(&self, src: &Tensor, opts: EncoderForwardOptions) -> Result<Tensor> {
        self.encode(src, &opts)
    }

    /// The forward without hooks.
    fn encode(&self, src: &Tensor, opts: &EncoderForwardOptions) -> Result<Tensor> {
        let batch_first = self.layers.first().is_some_and(|l| l.opts.batch_first);
        let is_causal = detect_is_causal_mask(opts.mask, opts.is_causal, seq_len(src, batch_first))?;
        let mut x = src.clone();
        for layer in &self.layers {
            x = layer.call_with(
                &x,
                EncoderLayerForwardOptions {
                    src_mask: opts.mask,
                    src_key_padding_mask: opts.src_key_padding_mask,
                    is_causal,
                },
            )?;
        }
        match &self.norm {
            Some(n) => n.call(&x),
            None => Ok(x),
        }
    }
}

/// The encoder without masks (`encoder(src)`), so it can sit in a
/// [`Sequential`](crate::Sequential).
impl Forward for TransformerEncoder {
    fn forward(&self, src: &Tensor) -> Result<Tensor> {
        self.encode(src, &EncoderForwardOptions::default())
    }
}

/// PyTorch's `_get_seq_len`: the sequence length of `[S, E]`, `[S, N, E]`
/// or (batch first) `[N, S, E]`.
fn seq_len(x: &Tensor, batch_first: bool) -> usize {
    match (x.ndim(), batch_first) {
        (3, true) => x.shape()[1],
        _ => x.shape().first().copied().unwrap_or(0),
    }
}

/// PyTorch's `_detect_is_causal_mask`: `is_causal` when given, else
/// whether `mask` equals the causal mask of `size` (a boolean mask: true
/// above the diagonal).
fn detect_is_causal_mask(mask: Option<&Tensor>, is_causal: Option<bool>, size: usize) -> Result<bool> {
    let mask = match (is_causal, mask) {
        (Some(c), _) => return Ok(c),
        (None, None) => return Ok(false),
        (None, Some(m)) => m,
    };
    if mask.shape() != [size, size] {
        return Ok(false);
    }
    let causal = generate_square_subsequent_mask(size, Some(DType::F64))?;
    let m = if mask.dtype() == DType::Bool {
        TensorOptions::new()
            .dtype(DType::F64)
            .zeros([size, size])?
            .masked_fill(mask, f64::NEG_INFINITY)?
    } else {
        mask.to_dtype(DType::F64)?
    };
    Ok(m.to_vec::<f64>()? == causal.to_vec::<f64>()?)
}

/// The call arguments of [`TransformerDecoder::forward`] besides the
/// target and the memory (PyTorch's keywords and defaults).
#[derive(Debug, Clone, Copy, Default, crate::Options)]
pub struct DecoderForwardOptions<'a> {
    /// `[T, T]` or `[N * nhead, T, T]` mask of every layer's self-attention.
    pub(crate) tgt_mask: Option<&'a Tensor>,
    /// `[T, S]` mask of every layer's attention over the memory.
    pub(crate) memory_mask: Option<&'a Tensor>,
    /// `[N, T]`: padded target positions.
    pub(crate) tgt_key_padding_mask: Option<&'a Tensor>,
    /// `[N, S]`: padded memory positions.
    pub(crate) memory_key_padding_mask: Option<&'a Tensor>,
    /// Whether `tgt_mask` is the causal mask; `None` (the default) detects
    /// it by comparing with [`generate_square_subsequent_mask`], as
    /// PyTorch.
    pub(crate) tgt_is_causal: Option<bool>,
    /// `memory_mask` is the causal mask (a hint).
    pub(crate) memory_is_causal: bool,
}

/// A stack of `num_layers` copies of a decoder layer and an optional final
/// norm (PyTorch's `nn.TransformerDecoder`: the layer is deep-copied, so
/// every layer starts with the same weights).
#[derive(Module)]
pub struct TransformerDecoder {
    /// The layers (`layers.0`, `layers.1`, ...).
    pub layers: Vec<TransformerDecoderLayer>,
    /// The final norm.
    pub norm: Option<LayerNorm>,
    state: ModuleState,
}

impl TransformerDecoder {
    /// `num_layers` deep copies of `decoder_layer` (which is dropped, as
    /// PyTorch keeps only the copies), then `norm`.
    pub fn new(decoder_layer: TransformerDecoderLayer, num_layers: usize, norm: Option<LayerNorm>) -> Result<Self> {
        let layers = (0..num_layers)
            .map(|_| decoder_layer.deep_clone())
            .collect::<Result<Vec<_>>>()?;
        Ok(TransformerDecoder {
            layers,
            norm,
            state: ModuleState::default(),
        })
    }

    /// The number of layers.
    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Every layer in turn on `tgt` with `memory`, then the norm (PyTorch's
    /// math path), between the module's hooks (inputs `[tgt, memory]`).
    /// Errors as [`TransformerDecoderLayer::forward`].
    pub fn call(&self, tgt: &Tensor, memory: &Tensor) -> Result<Tensor> {
        self.call_with(tgt, memory, DecoderForwardOptions::default())
    }

    /// [`TransformerDecoder::call`] with PyTorch's keyword arguments (the
    /// masks).
    pub fn call_with(&self, tgt: &Tensor, memory: &Tensor, opts: DecoderForwardOptions) -> Result<Tensor> {
        let args = [tgt.clone(), memory.clone()];
        call_with_hooks(self, &args, |a| self.decode(&a[0], &a[1], &opts))
    }

    /// [`TransformerDecoder::call`] without the hooks.
    pub fn forward(&self, tgt: &Tensor, memory: &Tensor) -> Result<Tensor> {
        self.decode(tgt, memory, &DecoderForwardOptions::default())
    }

    /// [`TransformerDecoder::call_with`] without the hooks.
    pub fn forward_with(&self, tgt: &Tensor, memory: &Tensor, opts: DecoderForwardOptions) -> Result<Tensor> {
        self.decode(tgt, memory, &opts)
    }

    /// The forward without hooks.
    fn decode(&self, tgt: &Tensor, memory: &Tensor, opts: &DecoderForwardOptions) -> Result<Tensor> {
        let batch_first = self.layers.first().is_some_and(|l| l.opts.batch_first);
        let tgt_is_causal = detect_is_causal_mask(opts.tgt_mask, opts.tgt_is_causal, seq_len(tgt, batch_first))?;
        let mut x = tgt.clone();
        for layer in &self.layers {
            x = layer.call_with(
                &x,
                memory,
                DecoderLayerForwardOptions {
                    tgt_mask: opts.tgt_mask,
                    memory_mask: opts.memory_mask,
                    tgt_key_padding_mask: opts.tgt_key_padding_mask,
                    memory_key_padding_mask: opts.memory_key_padding_mask,
                    tgt_is_causal,
                    memory_is_causal: opts.memory_is_causal,
                },
            )?;
        }
        match &self.norm {
            Some(n) => n.call(&x),
            None => Ok(x),
        }
    }
}

/// The construction options of [`Transformer`] (PyTorch's keywords and
/// defaults).
#[derive(Debug, Clone, Copy, PartialEq, crate::Options)]
pub struct TransformerOptions {
    /// Encoder layers (`6`).
    pub(crate) num_encoder_layers: usize,
    /// Decoder layers (`6`).
    pub(crate) num_decoder_layers: usize,
    /// Every layer's options (`dim_feedforward`, `dropout`, `activation`,
    /// `layer_norm_eps`, `batch_first`, `norm_first`, `bias`, `dtype`),
    /// also used by the final norms (`layer_norm_eps`, `bias`, `dtype`).
    pub(crate) layer: TransformerLayerOptions,
}

impl Default for TransformerOptions {
    fn default() -> Self {
        TransformerOptions {
            num_encoder_layers: 6,
            num_decoder_layers: 6,
            layer: TransformerLayerOptions::default(),
        }
    }
}

/// The call arguments of [`Transformer::forward`] besides the source and
/// the target (PyTorch's keywords and defaults).
#[derive(Debug, Clone, Copy, Default, crate::Options)]
pub struct TransformerForwardOptions<'a> {
    /// `[S, S]` or `[N * nhead, S, S]` mask of the encoder's self-attention.
    pub(crate) src_mask: Option<&'a Tensor>,
    /// `[T, T]` or `[N * nhead, T, T]` mask of the decoder's self-attention.
    pub(crate) tgt_mask: Option<&'a Tensor>,
    /// `[T, S]` mask of the decoder's attention over the memory.
    pub(crate) memory_mask: Option<&'a Tensor>,
    /// `[N, S]`: padded source positions.
    pub(crate) src_key_padding_mask: Option<&'a Tensor>,
    /// `[N, T]`: padded target positions.
    pub(crate) tgt_key_padding_mask: Option<&'a Tensor>,
    /// `[N, S]`: padded memory positions.
    pub(crate) memory_key_padding_mask: Option<&'a Tensor>,
    /// Whether `src_mask` is the causal mask (`None`: detected).
    pub(crate) src_is_causal: Option<bool>,
    /// Whether `tgt_mask` is the causal mask (`None`: detected).
    pub(crate) tgt_is_causal: Option<bool>,
    /// `memory_mask` is the causal mask (a hint).
    pub(crate) memory_is_causal: bool,
}

/// An encoder-decoder transformer (PyTorch's `nn.Transformer`): a
/// [`TransformerEncoder`] and a [`TransformerDecoder`], each with a final
/// `LayerNorm`; after building them, every parameter of more than one
/// dim is re-drawn with `xavier_uniform_` in parameter order (PyTorch's
/// `_reset_parameters`), so a seed gives PyTorch's weights.
#[derive(Module)]
pub struct Transformer {
    /// The encoder (`encoder.layers.0.self_attn.in_proj_weight`, ...,
    /// `encoder.norm.weight`).
    pub encoder: TransformerEncoder,
    /// The decoder (`decoder.layers.0...`, `decoder.norm.weight`).
    pub decoder: TransformerDecoder,
    d_model: usize,
    nhead: usize,
    batch_first: bool,
    state: ModuleState,
}

impl Transformer {
    /// The model with PyTorch's defaults besides the sizes (6 encoder and 6
    /// decoder layers, `dim_feedforward` 2048, dropout 0.1, ReLU).
    pub fn new(d_model: usize, nhead: usize) -> Result<Self> {
        Self::with_options(d_model, nhead, TransformerOptions::default())
    }

    /// The model; builds its submodules in PyTorch's order, then
    /// re-initialises the matrices. Errors as
    /// [`TransformerEncoderLayer::with_options`].
    pub fn with_options(d_model: usize, nhead: usize, o: TransformerOptions) -> Result<Self> {
        let lo = &o.layer;
        let encoder_layer = TransformerEncoderLayer::with_options(d_model, nhead, *lo)?;
        let encoder = TransformerEncoder::new(encoder_layer, o.num_encoder_layers, Some(layer_norm(d_model, lo)?))?;
        let decoder_layer = TransformerDecoderLayer::with_options(d_model, nhead, *lo)?;
        let decoder = TransformerDecoder::new(decoder_layer, o.num_decoder_layers, Some(layer_norm(d_model, lo)?))?;
        let t = Transformer {
            encoder,
            decoder,
            d_model,
            nhead,
            batch_first: lo.batch_first,
            state: ModuleState::default(),
        };
        for p in t.parameters() {
            let w = p.tensor();
            if w.ndim() > 1 {
                init::xavier_uniform_(&w, 1.0)?;
            }
        }
        Ok(t)
    }

    /// PyTorch's `Transformer.generate_square_subsequent_mask`: see
    /// [`generate_square_subsequent_mask`].
    pub fn generate_square_subsequent_mask(sz: usize, dtype: Option<DType>) -> Result<Tensor> {
        generate_square_subsequent_mask(sz, dtype)
    }

    /// The model's width.
    pub fn d_model(&self) -> usize {
        self.d_model
    }

    /// The number of attention heads.
    pub fn nhead(&self) -> usize {
        self.nhead
    }

    fn name(&self) -> String {
        format!(
            "Transformer(d_model={}, nhead={}, batch_first={})",
            self.d_model,
            self.nhead,
            py_bool(self.batch_first)
        )
    }

    /// The encoder on `src` (`[S, N, E]`, `[N, S, E]` with `batch_first`,
    /// or unbatched `[S, E]`) and the decoder on `tgt` (`[T, N, E]`, ...)
    /// over the encoder's output; returns the decoder's output. Runs
    /// between the module's hooks (inputs `[src, tgt]`). Errors (naming the
    /// model and both shapes) when the batch sizes of `src` and `tgt` differ
    /// or their feature size is not `d_model`, and as the layers'
    /// forwards.
    pub fn call(&self, src: &Tensor, tgt: &Tensor) -> Result<Tensor> {
        self.call_with(src, tgt, TransformerForwardOptions::default())
    }

    /// [`Transformer::call`] with PyTorch's keyword arguments (the masks).
    pub fn call_with(&self, src: &Tensor, tgt: &Tensor, opts: TransformerForwardOptions) -> Result<Tensor> {
        let args = [src.clone(), tgt.clone()];
        call_with_hooks(self, &args, |a| self.run(&a[0], &a[1], &opts))
    }

    /// [`Transformer::call`] without the hooks.
    pub fn forward(&self, src: &Tensor, tgt: &Tensor) -> Result<Tensor> {
        self.run(src, tgt, &TransformerForwardOptions::default())
    }

    /// [`Transformer::call_with`] without the hooks.
    pub fn forward_with(&self, src: &Tensor, tgt: &Tensor, opts: TransformerForwardOptions) -> Result<Tensor> {
        self.run(src, tgt, &opts)
    }

    /// The forward without hooks.
    fn run(&self, src: &Tensor, tgt: &Tensor, opts: &TransformerForwardOptions) -> Result<Tensor> {
        let bad = |detail: &str| {
            Error::module(
                self.name(),
                format!("{detail}, got src {:?} and tgt {:?}", src.shape(), tgt.shape()),
            )
        };
        // PyTorch checks whenever src is batched, comparing tgt's same dim
        // (an unbatched tgt's feature size, say) with src's batch.
        if src.ndim() == 3 {
            let b = usize::from(!self.batch_first);
            if tgt.shape().get(b) != Some(&src.shape()[b]) {
                return Err(bad("the batch number of src and tgt must be equal"));
            }
        }
        if src.shape().last() != Some(&self.d_model) || tgt.shape().last() != Some(&self.d_model) {
            return Err(bad("the feature number of src and tgt must be equal to d_model"));
        }
        let memory = self.encoder.call_with(
            src,
            EncoderForwardOptions {
                mask: opts.src_mask,
                src_key_padding_mask: opts.src_key_padding_mask,
                is_causal: opts.src_is_causal,
            },
        )?;
        self.decoder.call_with(
            tgt,
            &memory,
            DecoderForwardOptions {
                tgt_mask: opts.tgt_mask,
                memory_mask: opts.memory_mask,
                tgt_key_padding_mask: opts.tgt_key_padding_mask,
                memory_key_padding_mask: opts.memory_key_padding_mask,
                tgt_is_causal: opts.tgt_is_causal,
                memory_is_causal: opts.memory_is_causal,
            },
        )
    }
}
