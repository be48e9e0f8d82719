//! BERT's encoder as Hugging Face's `BertModel` lays it out, built from
//! ferrotorch's nn layers: embeddings (word + token type + position, then
//! LayerNorm), `num_hidden_layers` post-norm layers of multi-head
//! self-attention with a padding mask and an exact-GELU MLP, and the
//! pooler. Field names follow `BertModel`'s, so a checkpoint's keys
//! (`embeddings.word_embeddings.weight`,
//! `encoder.layer.0.attention.self.query.weight`, ...) load as they are.
//! Inference only: the dropout layers, identity in eval mode, are left out.

use ferrotorch::nn::functional::{SdpaOptions, scaled_dot_product_attention};
use ferrotorch::nn::{Embedding, Forward, GELU, LayerNorm, LayerNormOptions, Linear, Module, ModuleState};
use ferrotorch::{Error, Result, Tensor};
use serde_json::Value;

/// The sizes of a BERT model (the fields of its `config.json` that shape it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BertConfig {
    /// Tokens in the vocabulary.
    pub vocab_size: usize,
    /// Width of every hidden state.
    pub hidden_size: usize,
    /// Encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer (dividing `hidden_size`).
    pub num_attention_heads: usize,
    /// Width of each layer's MLP.
    pub intermediate_size: usize,
    /// Longest input, in tokens.
    pub max_position_embeddings: usize,
    /// Token types (segments).
    pub type_vocab_size: usize,
    /// Epsilon of every LayerNorm.
    pub layer_norm_eps: f64,
}

impl BertConfig {
    /// Reads a Hugging Face `config.json`; errors name the missing or
    /// unsupported field (only `hidden_act: "gelu"` and absolute position
    /// embeddings are built here).
    pub fn from_json(text: &str) -> std::result::Result<BertConfig, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let size = |key: &str| -> std::result::Result<usize, String> {
            v.get(key)
                .and_then(Value::as_u64)
                .filter(|&n| n > 0)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("`{key}` missing or not a positive integer"))
        };
        let text_field =
            |key: &str, default: &str| -> String { v.get(key).and_then(Value::as_str).unwrap_or(default).to_string() };
        let act = text_field("hidden_act", "gelu");
        if act != "gelu" {
            return Err(format!("`hidden_act` {act:?} is not supported (only \"gelu\")"));
        }
        let pos = text_field("position_embedding_type", "absolute");
        if pos != "absolute" {
            return Err(format!(
                "`position_embedding_type` {pos:?} is not supported (only \"absolute\")"
            ));
        }
        let c = BertConfig {
            vocab_size: size("vocab_size")?,
            hidden_size: size("hidden_size")?,
            num_hidden_layers: size("num_hidden_layers")?,
            num_attention_heads: size("num_attention_heads")?,
            intermediate_size: size("intermediate_size")?,
            max_position_embeddings: size("max_position_embeddings")?,
            type_vocab_size: size("type_vocab_size")?,
            layer_norm_eps: v.get("layer_norm_eps").and_then(Value::as_f64).unwrap_or(1e-12),
        };
        if !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            return Err(format!(
                "`hidden_size` {} is not a multiple of `num_attention_heads` {}",
                c.hidden_size, c.num_attention_heads
            ));
        }
        Ok(c)
    }
}

fn layer_norm(c: &BertConfig) -> Result<LayerNorm> {
    LayerNorm::with_options([c.hidden_size], LayerNormOptions::new().eps(c.layer_norm_eps))
}

/// Word, position and token-type embeddings, summed, then LayerNorm.
#[derive(Module)]
pub struct BertEmbeddings {
    word_embeddings: Embedding,
    position_embeddings: Embedding,
    token_type_embeddings: Embedding,
    #[module(name = "LayerNorm")]
    layer_norm: LayerNorm,
    state: ModuleState,
}

impl BertEmbeddings {
    fn new(c: &BertConfig) -> Result<Self> {
        Ok(BertEmbeddings {
            word_embeddings: Embedding::new(c.vocab_size, c.hidden_size)?,
            position_embeddings: Embedding::new(c.max_position_embeddings, c.hidden_size)?,
            token_type_embeddings: Embedding::new(c.type_vocab_size, c.hidden_size)?,
            layer_norm: layer_norm(c)?,
            state: ModuleState::default(),
        })
    }
}

impl Forward for BertEmbeddings {
    /// `input_ids` `[B, T]` (int64, every sentence of token type 0) gives
    /// `[B, T, hidden]`; errors for T beyond `max_position_embeddings`.
    fn forward(&self, input_ids: &Tensor) -> Result<Tensor> {
        let t = input_ids.shape().get(1).copied().unwrap_or(0);
        let max = self.position_embeddings.num_embeddings();
        if t > max {
            return Err(Error::invalid(
                "BertEmbeddings",
                format!("{t} tokens, more than the {max} position embeddings"),
            ));
        }
        // BertModel's order: words + token types, then + positions.
        let words = self.word_embeddings.call(input_ids)?;
        let token_type = self.token_type_embeddings.weight.tensor().narrow(0, 0, 1)?;
        let positions = self.position_embeddings.weight.tensor().narrow(0, 0, t as i64)?;
        self.layer_norm.call(&((words + token_type) + positions))
    }
}

/// Multi-head self-attention: query, key and value projections, then
/// scaled dot-product attention of each head over the unmasked tokens.
#[derive(Module)]
pub struct BertSelfAttention {
    query: Linear,
    key: Linear,
    value: Linear,
    num_heads: usize,
    state: ModuleState,
}

impl BertSelfAttention {
    /// `x` `[B, T, hidden]`, `mask` the additive padding mask `[B, 1, 1, T]`:
    /// the heads' outputs side by side, `[B, T, hidden]`.
    fn forward(&self, x: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (b, t, h) = (x.shape()[0], x.shape()[1], x.shape()[2]);
        let heads = |y: Tensor| y.view([b, t, self.num_heads, h / self.num_heads])?.transpose(1, 2);
        let q = heads(self.query.call(x)?)?;
        let k = heads(self.key.call(x)?)?;
        let v = heads(self.value.call(x)?)?;
        let opts = SdpaOptions::new().attn_mask(mask);
        let y = scaled_dot_product_attention(&q, &k, &v, &opts)?;
        y.transpose(1, 2)?.contiguous()?.view([b, t, h])
    }
}

/// A residual sublayer's end: `LayerNorm(dense(h) + input)`.
#[derive(Module)]
pub struct BertResidual {
    dense: Linear,
    #[module(name = "LayerNorm")]
    layer_norm: LayerNorm,
    state: ModuleState,
}

impl BertResidual {
    fn new(c: &BertConfig, from: usize) -> Result<Self> {
        Ok(BertResidual {
            dense: Linear::new(from, c.hidden_size)?,
            layer_norm: layer_norm(c)?,
            state: ModuleState::default(),
        })
    }

    fn forward(&self, h: &Tensor, input: &Tensor) -> Result<Tensor> {
        self.layer_norm.call(&(self.dense.call(h)? + input))
    }
}

/// Self-attention and its residual sublayer (`attention.self`, `attention.output`).
#[derive(Module)]
pub struct BertAttention {
    #[module(name = "self")]
    self_attn: BertSelfAttention,
    output: BertResidual,
    state: ModuleState,
}

/// The MLP's widening projection and its exact GELU.
#[derive(Module)]
pub struct BertIntermediate {
    dense: Linear,
    gelu: GELU,
    state: ModuleState,
}

/// One encoder layer: attention, then the MLP, each with a residual and a LayerNorm.
#[derive(Module)]
pub struct BertLayer {
    attention: BertAttention,
    intermediate: BertIntermediate,
    output: BertResidual,
    state: ModuleState,
}

impl BertLayer {
    fn new(c: &BertConfig) -> Result<Self> {
        Ok(BertLayer {
            attention: BertAttention {
                self_attn: BertSelfAttention {
                    query: Linear::new(c.hidden_size, c.hidden_size)?,
                    key: Linear::new(c.hidden_size, c.hidden_size)?,
                    value: Linear::new(c.hidden_size, c.hidden_size)?,
                    num_heads: c.num_attention_heads,
                    state: ModuleState::default(),
                },
                output: BertResidual::new(c, c.hidden_size)?,
                state: ModuleState::default(),
            },
            intermediate: BertIntermediate {
                dense: Linear::new(c.hidden_size, c.intermediate_size)?,
                gelu: GELU::new(),
                state: ModuleState::default(),
            },
            output: BertResidual::new(c, c.intermediate_size)?,
            state: ModuleState::default(),
        })
    }

    fn forward(&self, x: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let attn = self.attention.self_attn.forward(x, mask)?;
        let x = self.attention.output.forward(&attn, x)?;
        let wide = self.intermediate.gelu.call(&self.intermediate.dense.call(&x)?)?;
        self.output.forward(&wide, &x)
    }
}

/// The stack of encoder layers.
#[derive(Module)]
pub struct BertEncoder {
    layer: Vec<BertLayer>,
    state: ModuleState,
}

/// BertModel's pooler (`tanh(dense(h[:, 0]))`, a summary of the first
/// token): its weights are in the checkpoint, but mean pooling does not
/// use it.
#[derive(Module)]
pub struct BertPooler {
    dense: Linear,
    state: ModuleState,
}

/// Hugging Face's `BertModel`: embeddings, encoder and pooler.
#[derive(Module)]
pub struct BertModel {
    embeddings: BertEmbeddings,
    encoder: BertEncoder,
    pooler: BertPooler,
    state: ModuleState,
}

impl BertModel {
    /// A model of `config`'s sizes with PyTorch's default initialisation
    /// of each layer (load a checkpoint into it with `load_state_dict`).
    pub fn new(config: &BertConfig) -> Result<Self> {
        Ok(BertModel {
            embeddings: BertEmbeddings::new(config)?,
            encoder: BertEncoder {
                layer: (0..config.num_hidden_layers)
                    .map(|_| BertLayer::new(config))
                    .collect::<Result<_>>()?,
                state: ModuleState::default(),
            },
            pooler: BertPooler {
                dense: Linear::new(config.hidden_size, config.hidden_size)?,
                state: ModuleState::default(),
            },
            state: ModuleState::default(),
        })
    }

    /// The last hidden state `[B, T, hidden]` of `input_ids` `[B, T]`
    /// (int64) where `attention_mask` `[B, T]` (int64, 1: token, 0:
    /// padding) is 1; padding tokens are attended to by no token.
    pub fn forward(&self, input_ids: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
        if input_ids.ndim() != 2 || attention_mask.shape() != input_ids.shape() {
            return Err(Error::invalid(
                "BertModel",
                format!(
                    "expected input_ids [B, T] and an attention_mask of the same shape, got {:?} and {:?}",
                    input_ids.shape(),
                    attention_mask.shape()
                ),
            ));
        }
        let (b, t) = (input_ids.shape()[0], input_ids.shape()[1]);
        let mut x = self.embeddings.call(input_ids)?;
        // BertModel's extended mask: 0 for tokens, the dtype's lowest value for padding.
        let mask = attention_mask
            .to_dtype(x.dtype())?
            .sub(1.0)?
            .mul(f64::from(f32::MAX))?
            .view([b, 1, 1, t])?;
        for layer in &self.encoder.layer {
            x = layer.forward(&x, &mask)?;
        }
        Ok(x)
    }
}

/// Sentence embeddings from a last hidden state `[B, T, hidden]`: the mean
/// over the tokens where `attention_mask` `[B, T]` is 1, L2-normalised
/// (sentence-transformers' mean pooling and `Normalize`).
pub fn mean_pool_normalize(hidden: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
    let m = attention_mask.to_dtype(hidden.dtype())?.unsqueeze(-1)?;
    let sum = hidden.mul(&m)?.sum_dim(1, false)?;
    let count = m.sum_dim(1, false)?.clamp_min(1e-9)?;
    let mean = sum.div(&count)?;
    let norm = mean.norm_dim(2.0, 1, true)?.clamp_min(1e-12)?;
    mean.div(&norm)
}

/// Cosine similarities `[N, N]` of rows that have unit length: `e eᵀ`.
pub fn cosine_matrix(embeddings: &Tensor) -> Result<Tensor> {
    embeddings.matmul(&embeddings.t()?)
}
