//! The character-level GPT of the `gpt` example, nanoGPT's model: token
//! and position embeddings, pre-norm blocks of causal multi-head
//! self-attention and a GELU MLP, a final LayerNorm and a head whose
//! weight is the token embedding's (weight tying).

use std::sync::Arc;

use ferrotorch::distributed::DeviceMesh;
use ferrotorch::distributed::dtensor::Placement;
use ferrotorch::distributed::fsdp::{FsdpOptions, fully_shard};
use ferrotorch::distributed::tensor_parallel::{ColwiseParallel, LAST, RowwiseParallel, parallelize_module};
use ferrotorch::nn::functional::{SdpaOptions, scaled_dot_product_attention};
use ferrotorch::nn::{Dropout, Embedding, Forward, GELU, LayerNorm, Linear, LinearOptions, Module, ModuleState, init};
use ferrotorch::{Result, Tensor};

/// The model's sizes.
#[derive(Clone, Copy, Debug)]
pub struct GptConfig {
    /// Distinct tokens (characters).
    pub vocab_size: usize,
    /// Longest context, in tokens.
    pub block_size: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Attention heads per block.
    pub n_head: usize,
    /// Embedding width.
    pub n_embd: usize,
    /// Dropout probability (embeddings, attention output, MLP output).
    pub dropout: f64,
}

/// Causal multi-head self-attention: one projection to q, k, v, the
/// attention of each head over earlier positions, an output projection.
#[derive(Module)]
pub struct CausalSelfAttention {
    c_attn: Linear,
    c_proj: Linear,
    resid_dropout: Dropout,
    head_size: usize,
    dropout: f64,
    state: ModuleState,
}

impl CausalSelfAttention {
    fn new(c: &GptConfig) -> Result<Self> {
        Ok(CausalSelfAttention {
            c_attn: Linear::new(c.n_embd, 3 * c.n_embd)?,
            c_proj: Linear::new(c.n_embd, c.n_embd)?,
            resid_dropout: Dropout::new(c.dropout)?,
            head_size: c.n_embd / c.n_head,
            dropout: c.dropout,
            state: ModuleState::default(),
        })
    }
}

impl Forward for CausalSelfAttention {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (b, t, hs) = (x.shape()[0], x.shape()[1], self.head_size);
        // q, k, v = self.c_attn(x).split(n_embd, dim=2), each [B, nh, T, hs]
        // (under tensor parallelism, this rank's heads of each)
        let qkv = self.c_attn.call(x)?.chunk(3, 2)?;
        let (nh, c) = (qkv[0].shape()[2] / hs, qkv[0].shape()[2]);
        let heads = |t_: &Tensor| t_.view([b, t, nh, hs])?.transpose(1, 2);
        let (q, k, v) = (heads(&qkv[0])?, heads(&qkv[1])?, heads(&qkv[2])?);
        let opts = SdpaOptions::new()
            .is_causal(true)
            .dropout_p(if self.is_training() { self.dropout } else { 0.0 });
        let y = scaled_dot_product_attention(&q, &k, &v, &opts)?;
        let y = y.transpose(1, 2)?.contiguous()?.view([b, t, c])?;
        self.resid_dropout.call(&self.c_proj.call(&y)?)
    }
}

/// The block's MLP: widen 4x, GELU, project back.
#[derive(Module)]
pub struct Mlp {
    c_fc: Linear,
    gelu: GELU,
    c_proj: Linear,
    dropout: Dropout,
    state: ModuleState,
}

impl Forward for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.gelu.call(&self.c_fc.call(x)?)?;
        self.dropout.call(&self.c_proj.call(&h)?)
    }
}

/// A pre-norm transformer block: `x + attn(ln_1(x))`, then `x + mlp(ln_2(x))`.
#[derive(Module)]
pub struct Block {
    ln_1: LayerNorm,
    attn: CausalSelfAttention,
    ln_2: LayerNorm,
    mlp: Mlp,
    state: ModuleState,
}

impl Block {
    fn new(c: &GptConfig) -> Result<Self> {
        Ok(Block {
            ln_1: LayerNorm::new([c.n_embd])?,
            attn: CausalSelfAttention::new(c)?,
            ln_2: LayerNorm::new([c.n_embd])?,
            mlp: Mlp {
                c_fc: Linear::new(c.n_embd, 4 * c.n_embd)?,
                gelu: GELU::new(),
                c_proj: Linear::new(4 * c.n_embd, c.n_embd)?,
                dropout: Dropout::new(c.dropout)?,
                state: ModuleState::default(),
            },
            state: ModuleState::default(),
        })
    }
}

impl Forward for Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x + self.attn.call(&self.ln_1.call(x)?)?;
        let mlp = self.mlp.call(&self.ln_2.call(&x)?)?;
        Ok(x + mlp)
    }
}

/// The whole model: `logits = lm_head(ln_f(blocks(wte(idx) + wpe(pos))))`.
#[derive(Module)]
pub struct Gpt {
    wte: Embedding,
    wpe: Embedding,
    drop: Dropout,
    h: Vec<Block>,
    ln_f: LayerNorm,
    lm_head: Linear,
    config_block_size: usize,
    state: ModuleState,
}

impl Gpt {
    /// A model with PyTorch's default initialisation of each layer, the
    /// head tied to the token embedding.
    pub fn new(c: &GptConfig) -> Result<Self> {
        let wte = Embedding::new(c.vocab_size, c.n_embd)?;
        let mut lm_head = Linear::with_options(c.n_embd, c.vocab_size, LinearOptions::new().bias(false))?;
        // self.lm_head.weight = self.transformer.wte.weight
        lm_head.weight = wte.weight.clone();
        let model = Gpt {
            wte,
            wpe: Embedding::new(c.block_size, c.n_embd)?,
            drop: Dropout::new(c.dropout)?,
            h: (0..c.n_layer).map(|_| Block::new(c)).collect::<Result<_>>()?,
            ln_f: LayerNorm::new([c.n_embd])?,
            lm_head,
            config_block_size: c.block_size,
            state: ModuleState::default(),
        };
        model.init_weights(c.n_layer)?;
        Ok(model)
    }

    /// nanoGPT's initialisation: weights N(0, 0.02) (the residual output
    /// projections N(0, 0.02 / sqrt(2 n_layer))), biases zero; LayerNorms
    /// keep ones and zeros. The tied embedding/head weight is visited once.
    fn init_weights(&self, n_layer: usize) -> Result<()> {
        for (name, p) in self.named_parameters() {
            let t = p.tensor();
            if name.contains("ln_") {
                continue;
            }
            if name.ends_with("bias") {
                init::zeros_(&t)?;
            } else if name.ends_with("c_proj.weight") {
                init::normal_(&t, 0.0, 0.02 / (2.0 * n_layer as f64).sqrt())?;
            } else {
                init::normal_(&t, 0.0, 0.02)?;
            }
        }
        Ok(())
    }

    /// Tensor parallelism over the 1-D `tp` mesh, Megatron's layout: each
    /// rank computes its heads of every attention (the fused q, k, v
    /// projection cut block by block, the output projection by rows) and
    /// its part of every MLP's hidden features; the token embedding is cut
    /// by vocabulary rows, and so is the head tied to it, whose logits stay
    /// cut for loss parallel. Position embedding and norms stay whole.
    pub fn parallelize(&self, tp: &Arc<DeviceMesh>) -> Result<()> {
        let fused = ColwiseParallel {
            fused: 3,
            ..Default::default()
        };
        let whole = RowwiseParallel {
            input_layouts: Placement::Replicate,
            output_layouts: Placement::Replicate,
        };
        let cut_logits = ColwiseParallel {
            output_layouts: Placement::Shard(LAST),
            ..Default::default()
        };
        let plan = [
            ("wte", whole.into()),
            ("h.*.attn.c_attn", fused.into()),
            ("h.*.attn.c_proj", RowwiseParallel::default().into()),
            ("h.*.mlp.c_fc", ColwiseParallel::default().into()),
            ("h.*.mlp.c_proj", RowwiseParallel::default().into()),
            ("lm_head", cut_logits.into()),
        ];
        Ok(parallelize_module(self, tp, &plan)?)
    }

    /// FSDP over the 1-D `dp` mesh: each block a group of its own, the
    /// embeddings, final norm and head the root's.
    pub fn fully_shard(&self, dp: &Arc<DeviceMesh>) -> Result<()> {
        for block in &self.h {
            fully_shard(block, dp, FsdpOptions::default())?;
        }
        fully_shard(self, dp, FsdpOptions::default())?;
        Ok(())
    }

    /// The longest context the position embedding covers.
    pub fn block_size(&self) -> usize {
        self.config_block_size
    }
}

impl Gpt {
    /// Stage `stage` of the model cut into `stages` pipeline stages by
    /// blocks: the first takes token ids through the embeddings, the last
    /// ends with the final norm and the head; each runs its share of the
    /// blocks. Stage 0 of 1 is the whole forward.
    pub fn forward_stage(&self, x: &Tensor, stage: usize, stages: usize) -> Result<Tensor> {
        let n = self.h.len();
        let mut h = if stage == 0 {
            let pos = Tensor::arange(x.shape()[1] as i64)?;
            self.drop.call(&(self.wte.call(x)? + self.wpe.call(&pos)?))?
        } else {
            x.clone()
        };
        for block in &self.h[stage * n / stages..(stage + 1) * n / stages] {
            h = block.call(&h)?;
        }
        if stage + 1 == stages {
            self.lm_head.call(&self.ln_f.call(&h)?)
        } else {
            Ok(h)
        }
    }

    /// The parameter the token embedding and the head share (on the first
    /// and the last pipeline stage).
    pub fn tied_weight(&self) -> &ferrotorch::nn::Parameter {
        &self.wte.weight
    }
}

impl Forward for Gpt {
    /// `idx`: token ids `[B, T]` (int64), T at most the block size;
    /// returns the logits `[B, T, vocab]`.
    fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        self.forward_stage(idx, 0, 1)
    }
}
