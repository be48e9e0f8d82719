//! Workloads shared by the bench binary (`src/main.rs`) and the profiling
//! example (`examples/overhead_profile.rs`), so both time the same code.

use ferrotorch::{Result, Tensor};

pub mod cpu_report;
pub mod embed;
pub mod peak;
pub mod train_steps;

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

/// One conv2d layer's forward and backward of the `conv2d_*` figures:
/// input `[n, c, h, w]` (requiring grad when `input_grad`: a layer after
/// the first), a `k x k` kernel with padding `k / 2`, a bias, and a fixed
/// random output gradient.
pub struct ConvLayer {
    x: Tensor,
    w: Tensor,
    b: Tensor,
    gy: Tensor,
}

impl ConvLayer {
    /// Random input, PyTorch-like weights and bias, and output gradient.
    pub fn new(n: usize, c: usize, hw: usize, out: usize, k: usize, input_grad: bool) -> Result<ConvLayer> {
        let fan_in = (c * k * k) as f64;
        let x = Tensor::randn([n, c, hw, hw])?.requires_grad_(input_grad)?;
        let w = Tensor::randn([out, c, k, k])?
            .mul(1.0 / fan_in.sqrt())?
            .requires_grad_(true)?;
        let b = Tensor::zeros([out])?.requires_grad_(true)?;
        let gy = Tensor::randn([n, out, hw, hw])?;
        Ok(ConvLayer { x, w, b, gy })
    }

    /// `conv2d(x, w, b, padding=k/2)`, its backward with the fixed output
    /// gradient, then the gradients reset to None.
    pub fn step(&self) -> Result<()> {
        let k = self.w.shape()[2];
        let y = self
            .x
            .conv2d(&self.w, Some(&self.b), ferrotorch::ConvOptions::new().padding(k / 2))?;
        y.backward_with(&self.gy)?;
        for t in [&self.x, &self.w, &self.b] {
            t.set_grad(None)?;
        }
        Ok(())
    }
}
