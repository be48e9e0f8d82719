//! Tensors are freed when dropped: the allocated bytes of a training loop
//! are the same after every step once the first step has created the
//! gradients and the optimizer state. One test in its own binary, so no
//! other test allocates while it measures.

use ferrotorch::memory;
use ferrotorch::nn::{CrossEntropyLoss, Flatten, Forward, Linear, Module, ReLU, Sequential};
use ferrotorch::optim::{AdamW, AdamWOptions, Optimizer};
use ferrotorch::{Result, Tensor, manual_seed};

#[test]
fn allocated_bytes_are_flat_after_the_first_step() -> Result<()> {
    manual_seed(0);
    let model = Sequential::new()
        .push(Flatten::new())
        .push(Linear::new(784, 256)?)
        .push(ReLU::new())
        .push(Linear::new(256, 10)?);
    let mut opt = AdamW::new(model.parameters(), AdamWOptions::new().lr(1e-3))?;
    let loss_fn = CrossEntropyLoss::new();
    let x = Tensor::randn([128, 1, 28, 28])?;
    let y = Tensor::randint(0, 10, [128])?;
    let params: usize = model.parameters().iter().map(|p| p.tensor().numel() * 4).sum();
    let before = memory::memory_allocated();
    let mut after_step = Vec::new();
    let mut peaks = Vec::new();
    for _ in 0..6 {
        memory::reset_peak_memory_stats();
        opt.zero_grad()?;
        let loss = loss_fn.call(&model.call(&x)?, &y)?;
        loss.backward()?;
        opt.step()?;
        drop(loss);
        after_step.push(memory::memory_allocated());
        peaks.push(memory::max_memory_allocated());
    }
    // The first step adds the gradients (zeroed to None next step) and
    // AdamW's two moments: at least twice the parameters' bytes.
    assert!(after_step[0] >= before + 2 * params, "{before} -> {after_step:?}");
    // From then on nothing accumulates: same bytes, same peak, every step.
    assert!(after_step[1..].iter().all(|&a| a == after_step[1]), "{after_step:?}");
    assert!(peaks[2..].iter().all(|&p| p == peaks[2]), "{peaks:?}");
    let stats = memory::memory_stats();
    assert!(stats.total_freed > 0 && stats.num_frees > 0);
    assert!(memory::memory_summary().contains("Allocated memory"));
    Ok(())
}
