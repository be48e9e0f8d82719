//! `memory::predict_peak_memory` against the measured peak: one training
//! step (building the model and optimizer, a batch, forward, loss,
//! backward, AdamW step) of the mnist MLP, the mnist CNN and the gpt
//! example's model, in f32 and under bf16 autocast, run once on the meta
//! device and once on the CPU with the allocator's statistics. One test
//! in its own binary, so no other test allocates while it measures.

// The bench's training steps (the examples' models at the bench's sizes).
#[path = "../bench/src/train_steps.rs"]
#[allow(dead_code)]
mod train_steps;

use ferrotorch::memory;
use ferrotorch::{DType, Result, manual_seed};
use train_steps::TrainStep;

#[derive(Clone, Copy, Debug)]
enum Model {
    Mlp,
    Cnn,
    Gpt,
}

/// Runs a step, under bf16 autocast with `amp`.
fn run<M: ferrotorch::nn::Forward>(s: TrainStep<M>, amp: bool) -> Result<()> {
    let mut s = if amp { s.with_autocast(DType::BF16) } else { s };
    s.step()
}

/// One whole step, model creation included.
fn step(model: Model, amp: bool) -> Result<()> {
    manual_seed(0);
    match model {
        Model::Mlp => run(train_steps::mlp_step()?, amp),
        Model::Cnn => run(train_steps::cnn_step()?, amp),
        Model::Gpt => run(train_steps::gpt_step()?, amp),
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
