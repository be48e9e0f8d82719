//! `--amp` of the training examples: the forward pass and the loss under
//! autocast, and, for f16, a GradScaler around backward and the step.

use clap::ValueEnum;
use ferrotorch::amp::{AutocastGuard, autocast};
use ferrotorch::optim::{GradScaler, GradScalerOptions, Optimizer};
use ferrotorch::{DType, Device, Tensor};

/// The precision of the forward pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Amp {
    /// Everything in f32.
    #[default]
    Off,
    /// Products in bf16 under autocast (no loss scaling needed: bf16 has
    /// f32's range).
    Bf16,
    /// Products in f16 under autocast, with a GradScaler.
    F16,
}

impl Amp {
    /// The autocast region of one forward pass (`None` when off).
    pub fn region(self) -> ferrotorch::Result<Option<AutocastGuard>> {
        Ok(match self {
            Amp::Off => None,
            Amp::Bf16 => Some(autocast(Device::Cpu, DType::BF16)?),
            Amp::F16 => Some(autocast(Device::Cpu, DType::F16)?),
        })
    }

    /// The loss scaler: enabled for f16 only (it passes through otherwise).
    pub fn scaler(self) -> Result<GradScaler, ferrotorch::optim::Error> {
        GradScaler::new(GradScalerOptions::new().enabled(self == Amp::F16))
    }
}

/// `scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()`:
/// the backward pass and the step of a training loop with `--amp` (a
/// disabled scaler makes it `loss.backward(); optimizer.step()`).
pub fn backward_and_step(
    scaler: &mut GradScaler,
    optimizer: &mut dyn Optimizer,
    loss: &Tensor,
) -> Result<(), Box<dyn std::error::Error>> {
    scaler.scale(loss)?.backward()?;
    scaler.step(optimizer)?;
    scaler.update()?;
    Ok(())
}

/// The allocator's peak since the process started, in MiB.
pub fn peak_mib() -> f64 {
    ferrotorch::memory::max_memory_allocated() as f64 / (1 << 20) as f64
}
