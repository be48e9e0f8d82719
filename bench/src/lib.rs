//! Workloads shared by the bench binary (`src/main.rs`) and the profiling
//! example (`examples/overhead_profile.rs`), so both time the same code.

use ferrotorch::{Result, Tensor};

pub mod peak;

/// The 50-op elementwise chain of the `chain50_backward_1elem` figure:
/// `* 1.01`, `+ 0.1`, `sin`, `y * y`, `tanh`, ten times over.
pub fn chain50(x: &Tensor) -> Result<Tensor> {
    let mut y = x.clone();
    for i in 0..50 {
        y = match i % 5 {
            0 => y.mul(1.01)?,
            1 => y.add(0.1)?,
            2 => y.sin()?,
            3 => y.mul(&y)?,
            _ => y.tanh()?,
        };
    }
    Ok(y)
}

/// The 784-256-256-10 ReLU MLP with a cross-entropy loss at batch 128 of the
/// `mlp_fwd_bwd_b128` figure (parameters and data from the global generator).
pub struct Mlp {
    params: [Tensor; 6],
    x: Tensor,
    y: Tensor,
}

impl Mlp {
    /// Random parameters (PyTorch-like scaling) and a random batch.
    pub fn new() -> Result<Mlp> {
        let layer = |o: usize, i: usize| -> Result<(Tensor, Tensor)> {
            let w = Tensor::randn([o, i])?
                .mul(1.0 / (i as f64).sqrt())?
                .requires_grad_(true)?;
            Ok((w, Tensor::zeros([o])?.requires_grad_(true)?))
        };
        let (w1, b1) = layer(256, 784)?;
        let (w2, b2) = layer(256, 256)?;
        let (w3, b3) = layer(10, 256)?;
        Ok(Mlp {
            params: [w1, b1, w2, b2, w3, b3],
            x: Tensor::randn([128, 784])?,
            y: Tensor::randint(0, 10, [128, 1])?,
        })
    }

    /// One forward and backward pass; the gradients are then reset to None.
    pub fn step(&self) -> Result<()> {
        let [w1, b1, w2, b2, w3, b3] = &self.params;
        let h = self.x.matmul(&w1.t()?)?.add(b1)?.relu()?;
        let h = h.matmul(&w2.t()?)?.add(b2)?.relu()?;
        let logits = h.matmul(&w3.t()?)?.add(b3)?;
        let loss = logits.log_softmax(1)?.gather(1, &self.y)?.neg()?.mean()?;
        loss.backward()?;
        for t in &self.params {
            t.set_grad(None)?;
        }
        Ok(())
    }
}
