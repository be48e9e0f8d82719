//! Training steps of the examples (forward, loss, backward, AdamW step),
//! as `bench/torch_ref.py`'s `train_step_*` figures: the mnist MLP at
//! batch 128, the mnist CNN at batch 64, and the gpt example's model
//! (4 layers, width 128, 4 heads, context 64, vocabulary 65) at batch 16;
//! each also with the forward pass under bf16 autocast.

use ferrotorch::amp::autocast;
use ferrotorch::nn::{Conv2d, ConvLayerOptions, Dropout, Flatten, Forward, Linear, MaxPool2d, ReLU, Sequential};
use ferrotorch::optim::{AdamW, AdamWOptions, Optimizer};
use ferrotorch::{DType, Device, Reduction, Result, Tensor};

#[path = "../../examples/gpt/model.rs"]
#[allow(dead_code)]
mod gpt_model;

pub use gpt_model::{Gpt, GptConfig};

/// A model, its AdamW (lr 1e-3) and one fixed batch.
pub struct TrainStep<M> {
    model: M,
    opt: AdamW,
    x: Tensor,
    y: Tensor,
    /// The forward pass and the loss under CPU autocast in this dtype.
    autocast: Option<DType>,
}

impl<M: Forward> TrainStep<M> {
    /// `model`'s step on the batch `x`, `y` with AdamW (lr 1e-3).
    pub fn new(model: M, x: Tensor, y: Tensor) -> Result<Self> {
        let opt = AdamW::new(model.parameters(), AdamWOptions::default())?;
        Ok(TrainStep {
            model,
            opt,
            x,
            y,
            autocast: None,
        })
    }

    /// The model being trained.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The same step with the forward pass and the loss under
    /// `autocast(Device::Cpu, dtype)` (the `*_amp_bf16` figures).
    pub fn with_autocast(mut self, dtype: DType) -> Self {
        self.autocast = Some(dtype);
        self
    }

    /// `opt.zero_grad(); loss = cross_entropy(model(x), y); loss.backward(); opt.step()`.
    pub fn step(&mut self) -> Result<()> {
        self.opt.zero_grad()?;
        let loss = {
            let _region = self.autocast.map(|d| autocast(Device::Cpu, d)).transpose()?;
            let out = self.model.call(&self.x)?;
            let classes = *out.shape().last().unwrap_or(&1) as i64;
            out.view([-1, classes])?
                .cross_entropy(&self.y.view([-1])?, None, Reduction::Mean, -100, 0.0)?
        };
        loss.backward()?;
        self.opt.step()?;
        Ok(())
    }
}

/// The mnist example's MLP: Flatten, Linear(784, 256), ReLU, Dropout(0.1), Linear(256, 10).
pub fn mnist_mlp() -> Result<Sequential> {
    Ok(Sequential::new()
        .push(Flatten::new())
        .push(Linear::new(784, 256)?)
        .push(ReLU::new())
        .push(Dropout::new(0.1)?)
        .push(Linear::new(256, 10)?))
}

/// The mnist example's CNN: two conv-ReLU-maxpool stages (32 and 64
/// channels), then Linear(3136, 128), ReLU, Linear(128, 10).
pub fn mnist_cnn() -> Result<Sequential> {
    let pad1 = || ConvLayerOptions::new().padding(1);
    Ok(Sequential::new()
        .push(Conv2d::with_options(1, 32, 3, pad1())?)
        .push(ReLU::new())
        .push(MaxPool2d::new(2))
        .push(Conv2d::with_options(32, 64, 3, pad1())?)
        .push(ReLU::new())
        .push(MaxPool2d::new(2))
        .push(Flatten::new())
        .push(Linear::new(3136, 128)?)
        .push(ReLU::new())
        .push(Linear::new(128, 10)?))
}

/// The mnist MLP's step on a random batch of 128.
pub fn mlp_step() -> Result<TrainStep<Sequential>> {
    TrainStep::new(
        mnist_mlp()?,
        Tensor::randn([128, 1, 28, 28])?,
        Tensor::randint(0, 10, [128])?,
    )
}

/// The mnist CNN's step on a random batch of 64.
pub fn cnn_step() -> Result<TrainStep<Sequential>> {
    TrainStep::new(
        mnist_cnn()?,
        Tensor::randn([64, 1, 28, 28])?,
        Tensor::randint(0, 10, [64])?,
    )
}

/// The gpt figure's model: 4 layers, width 128, 4 heads, context 64,
/// vocabulary 65.
pub fn gpt_model() -> Result<Gpt> {
    Gpt::new(&GptConfig {
        vocab_size: 65,
        block_size: 64,
        n_layer: 4,
        n_head: 4,
        n_embd: 128,
        dropout: 0.0,
    })
}

/// The gpt figure's step: 16 random sequences of 64 tokens.
pub fn gpt_step() -> Result<TrainStep<Gpt>> {
    TrainStep::new(
        gpt_model()?,
        Tensor::randint(0, 65, [16, 64])?,
        Tensor::randint(0, 65, [16, 64])?,
    )
}
