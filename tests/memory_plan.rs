//! `memory::predict_peak_memory` against the measured peak: one training
//! step (building the model and optimizer, a batch, forward, loss,
//! backward, AdamW step) of the mnist MLP, the mnist CNN and the gpt
//! example's model, in f32 and under bf16 autocast, run once on the meta
//! device and once on the CPU with the allocator's statistics. One test
//! in its own binary, so no other test allocates while it measures.

#[path = "../examples/gpt/model.rs"]
#[allow(dead_code)]
mod gpt_model;

use ferrotorch::amp::autocast;
use ferrotorch::memory;
use ferrotorch::nn::{Conv2d, ConvLayerOptions, Flatten, Forward, Linear, MaxPool2d, ReLU, Sequential};
use ferrotorch::optim::{AdamW, AdamWOptions, Optimizer};
use ferrotorch::{DType, Device, Reduction, Result, Tensor, manual_seed};
use gpt_model::{Gpt, GptConfig};

#[derive(Clone, Copy, Debug)]
enum Model {
    Mlp,
    Cnn,
    Gpt,
}

fn train_step<M: Forward>(model: M, x: Tensor, y: Tensor, amp: bool) -> Result<()> {
    let mut opt = AdamW::new(model.parameters(), AdamWOptions::default())?;
    let loss = {
        let _region = amp.then(|| autocast(Device::Cpu, DType::BF16)).transpose()?;
        let out = model.call(&x)?;
        let classes = *out.shape().last().unwrap_or(&1) as i64;
        out.view([-1, classes])?
            .cross_entropy(&y.view([-1])?, None, Reduction::Mean, -100, 0.0)?
    };
    opt.zero_grad()?;
    loss.backward()?;
    opt.step()?;
    Ok(())
}

/// One whole step, model creation included.
fn step(model: Model, amp: bool) -> Result<()> {
    manual_seed(0);
    match model {
        Model::Mlp => {
            let net = Sequential::new()
                .push(Flatten::new())
                .push(Linear::new(784, 256)?)
                .push(ReLU::new())
                .push(Linear::new(256, 10)?);
            train_step(
                net,
                Tensor::randn([128, 1, 28, 28])?,
                Tensor::randint(0, 10, [128])?,
                amp,
            )
        }
        Model::Cnn => {
            let pad1 = || ConvLayerOptions::new().padding(1);
            let net = Sequential::new()
                .push(Conv2d::with_options(1, 32, 3, pad1())?)
                .push(ReLU::new())
                .push(MaxPool2d::new(2))
                .push(Conv2d::with_options(32, 64, 3, pad1())?)
                .push(ReLU::new())
                .push(MaxPool2d::new(2))
                .push(Flatten::new())
                .push(Linear::new(3136, 128)?)
                .push(ReLU::new())
                .push(Linear::new(128, 10)?);
            train_step(net, Tensor::randn([64, 1, 28, 28])?, Tensor::randint(0, 10, [64])?, amp)
        }
        Model::Gpt => {
            let config = GptConfig {
                vocab_size: 65,
                block_size: 64,
                n_layer: 4,
                n_head: 4,
                n_embd: 128,
                dropout: 0.0,
            };
            let net = Gpt::new(&config)?;
            train_step(
                net,
                Tensor::randint(0, 65, [16, 64])?,
                Tensor::randint(0, 65, [16, 64])?,
                amp,
            )
        }
    }
}

#[test]
fn predicted_peaks_are_within_5_percent_of_the_measured_ones() -> Result<()> {
    let mut report = Vec::new();
    for model in [Model::Mlp, Model::Cnn, Model::Gpt] {
        for amp in [false, true] {
            let ((), predicted) = memory::predict_peak_memory(|| step(model, amp))?;
            let base = memory::memory_allocated();
            memory::reset_peak_memory_stats();
            step(model, amp)?;
            let measured = memory::max_memory_allocated() - base;
            let error = (predicted.peak_bytes as f64 - measured as f64) / measured as f64;
            report.push(format!(
                "{model:?} {}: predicted {} B, measured {} B ({:+.2}%), peak at {}",
                if amp { "bf16" } else { "f32" },
                predicted.peak_bytes,
                measured,
                error * 100.0,
                predicted.peak_op
            ));
            assert!(!predicted.timeline.is_empty());
            assert_eq!(predicted.final_bytes, 0, "everything the step made was freed");
        }
    }
    println!("{}", report.join("\n"));
    for line in &report {
        let pct: f64 = line
            .split('(')
            .nth(1)
            .unwrap()
            .split('%')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(pct.abs() <= 5.0, "{line}\n{}", report.join("\n"));
    }
    Ok(())
}
