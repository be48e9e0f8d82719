//! `--predict-memory` of the training examples: one training step (model,
//! optimizer, a batch, forward, backward, step) run on the meta device to
//! predict its peak memory, then on the CPU to measure it.

use std::error::Error;

use ferrotorch::memory;

/// Predicts the peak of `step` on the meta device, measures it on the CPU,
/// and prints both with the operator at the predicted peak.
pub fn predict_and_measure(what: &str, step: impl Fn() -> ferrotorch::Result<()>) -> Result<(), Box<dyn Error>> {
    let ((), predicted) = memory::predict_peak_memory(&step)?;
    let base = memory::memory_allocated();
    memory::reset_peak_memory_stats();
    step()?;
    let measured = memory::max_memory_allocated().saturating_sub(base);
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    println!(
        "{what}: predicted peak {:.2} MiB (at {}, {} allocations and frees), measured {:.2} MiB ({:+.2}%)",
        mib(predicted.peak_bytes),
        predicted.peak_op,
        predicted.timeline.len(),
        mib(measured),
        (predicted.peak_bytes as f64 / measured.max(1) as f64 - 1.0) * 100.0
    );
    Ok(())
}
