//! `torch.amp.GradScaler`: loss scaling for mixed-precision training.
//!
//! Small gradients of half-precision activations underflow; scaling the
//! loss by a large factor before `backward` keeps them representable. The
//! scaler then divides the gradients by the same factor before the
//! optimizer step (`unscale_`), skips the step when a gradient came out
//! infinite or NaN and lowers the scale, and raises the scale again after
//! `growth_interval` clean steps. The arithmetic is PyTorch's CPU kernels'
//! (`_amp_foreach_non_finite_check_and_unscale_`, `_amp_update_scale_`):
//! the scale is an f32, its inverse `1 / scale` is taken in f64 and rounded
//! to f32, and gradients are multiplied by it in their own dtype.
//!
//! ```
//! use ferrotorch_core::Tensor;
//! use ferrotorch_nn::{Forward, Linear, Module};
//! use ferrotorch_optim::{GradScaler, GradScalerOptions, Optimizer, Sgd, SgdOptions};
//! let model = Linear::new(4, 2)?;
//! let mut opt = Sgd::new(model.parameters(), SgdOptions { lr: 0.1, ..Default::default() })?;
//! let mut scaler = GradScaler::new(GradScalerOptions::default())?;
//! let loss = model.call(&Tensor::randn([8, 4])?)?.pow(2.0)?.mean()?;
//! opt.zero_grad()?;
//! scaler.scale(&loss)?.backward()?;
//! assert!(scaler.step(&mut opt)?); // unscaled, finite: stepped
//! scaler.update()?;
//! assert_eq!(scaler.get_scale(), 65536.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;

use ferrotorch_core::autograd::no_grad;
use ferrotorch_core::{DType, Tensor};

use crate::{Dict, Error, Optimizer, Result, Value};

/// The options of [`GradScaler::new`] (`GradScaler`'s keywords).
#[derive(Debug, Clone, Copy, PartialEq, ferrotorch_nn::Options)]
pub struct GradScalerOptions {
    /// The first scale (`2.0**16`).
    pub init_scale: f64,
    /// What the scale is multiplied by after `growth_interval` clean steps (2).
    pub growth_factor: f64,
    /// What the scale is multiplied by after a step with inf / NaN gradients (0.5).
    pub backoff_factor: f64,
    /// Clean steps before the scale grows (2000).
    pub growth_interval: i64,
    /// `false`: every method passes through (the loss is not scaled, `step`
    /// just steps), so one loop serves both precisions.
    pub enabled: bool,
}

impl Default for GradScalerOptions {
    fn default() -> Self {
        GradScalerOptions {
            init_scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            enabled: true,
        }
    }
}

/// Where an optimizer is in the scaler's step cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Ready,
    Unscaled,
    Stepped,
}

/// Loss scaling with dynamic scale updates (`torch.amp.GradScaler`).
#[derive(Debug, Clone)]
pub struct GradScaler {
    scale: f32,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: i64,
    growth_tracker: i64,
    enabled: bool,
    /// Per optimizer (by address) since the last `update`: its stage and
    /// whether its gradients held an inf or NaN.
    per_optimizer: HashMap<usize, (Stage, bool)>,
}

/// An optimizer's identity for the per-optimizer state (its address).
fn key_of(opt: &dyn Optimizer) -> usize {
    opt as *const dyn Optimizer as *const () as usize
}

impl GradScaler {
    /// A scaler; an error for a growth factor not above 1, a backoff factor
    /// outside (0, 1), a growth interval below 1, or a scale that is not a
    /// positive finite f32.
    pub fn new(options: GradScalerOptions) -> Result<GradScaler> {
        let bad = |m: String| Err(Error::GradScaler(m));
        if options.growth_factor.is_nan() || options.growth_factor <= 1.0 {
            return bad(format!(
                "The growth factor must be > 1.0, got {}.",
                options.growth_factor
            ));
        }
        if !(options.backoff_factor > 0.0 && options.backoff_factor < 1.0) {
            return bad(format!(
                "The backoff factor must be < 1.0 and > 0, got {}.",
                options.backoff_factor
            ));
        }
        if options.growth_interval <= 0 {
            return bad(format!(
                "The growth interval must be a positive integer, got {}.",
                options.growth_interval
            ));
        }
        let scale = options.init_scale as f32;
        if !(scale.is_finite() && scale > 0.0) {
            return bad(format!(
                "The initial scale must be a positive finite float32, got {}.",
                options.init_scale
            ));
        }
        Ok(GradScaler {
            scale,
            growth_factor: options.growth_factor,
            backoff_factor: options.backoff_factor,
            growth_interval: options.growth_interval,
            growth_tracker: 0,
            enabled: options.enabled,
            per_optimizer: HashMap::new(),
        })
    }

    /// Whether the scaler scales (`is_enabled()`).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The current scale (`get_scale()`; 1 when disabled).
    pub fn get_scale(&self) -> f64 {
        if self.enabled { self.scale as f64 } else { 1.0 }
    }

    /// The clean steps counted towards the next growth.
    pub fn growth_tracker(&self) -> i64 {
        self.growth_tracker
    }

    /// `loss * scale` (the loss itself when disabled): a 0-d f32 scale, so
    /// the product keeps the loss's dtype, as PyTorch's.
    pub fn scale(&self, loss: &Tensor) -> Result<Tensor> {
        if !self.enabled {
            return Ok(loss.clone());
        }
        let s = Tensor::scalar_tensor((self.scale as f64).into(), DType::F32);
        Ok(loss.mul(&s)?)
    }

    /// Divides the gradients of `optimizer`'s parameters by the scale in
    /// place and records whether any held an inf or NaN (`unscale_`), so
    /// they can be clipped before [`step`](Self::step). Once per optimizer
    /// between updates; f16 gradients are refused, as PyTorch refuses them.
    pub fn unscale_(&mut self, optimizer: &mut dyn Optimizer) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let key = key_of(optimizer);
        match self.per_optimizer.get(&key).map(|s| s.0) {
            Some(Stage::Unscaled) => {
                return Err(Error::GradScaler(
                    "unscale_() has already been called on this optimizer since the last update().".into(),
                ));
            }
            Some(Stage::Stepped) => {
                return Err(Error::GradScaler("unscale_() is being called after step().".into()));
            }
            _ => {}
        }
        // inv_scale = scale.double().reciprocal().float()
        let inv_scale = (1.0 / self.scale as f64) as f32;
        let mut found_inf = false;
        no_grad(|| -> Result<()> {
            for g in 0..optimizer.num_param_groups() {
                for p in optimizer.group_params(g) {
                    let Some(grad) = p.grad_opt() else { continue };
                    if grad.dtype() == DType::F16 {
                        return Err(Error::GradScaler("Attempting to unscale FP16 gradients.".into()));
                    }
                    if !grad.isfinite()?.all()?.item::<bool>()? {
                        found_inf = true;
                    }
                    if inv_scale != 1.0 {
                        grad.mul_(inv_scale as f64)?;
                    }
                }
            }
            Ok(())
        })?;
        self.per_optimizer.insert(key, (Stage::Unscaled, found_inf));
        Ok(())
    }

    /// Unscales the gradients if [`unscale_`](Self::unscale_) has not, then
    /// runs `optimizer.step()` unless a gradient held an inf or NaN.
    /// Returns whether the optimizer stepped. Once per optimizer between
    /// updates.
    pub fn step(&mut self, optimizer: &mut dyn Optimizer) -> Result<bool> {
        if !self.enabled {
            optimizer.step()?;
            return Ok(true);
        }
        let key = key_of(optimizer);
        if self.per_optimizer.get(&key).map(|s| s.0) == Some(Stage::Stepped) {
            return Err(Error::GradScaler(
                "step() has already been called since the last update().".into(),
            ));
        }
        if self.per_optimizer.get(&key).is_none_or(|s| s.0 == Stage::Ready) {
            self.unscale_(optimizer)?;
        }
        let found_inf = self.per_optimizer.get(&key).is_some_and(|s| s.1);
        if !found_inf {
            optimizer.step()?;
        }
        self.per_optimizer.insert(key, (Stage::Stepped, found_inf));
        Ok(!found_inf)
    }

    /// Updates the scale after the iteration's steps (`update()`): halved
    /// (times `backoff_factor`) when any optimizer saw an inf or NaN, grown
    /// by `growth_factor` after `growth_interval` clean steps in a row (if
    /// the grown scale is finite). An error if no optimizer was unscaled or
    /// stepped since the last update.
    pub fn update(&mut self) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if self.per_optimizer.is_empty() {
            return Err(Error::GradScaler("No inf checks were recorded prior to update.".into()));
        }
        let found_inf = self.per_optimizer.values().any(|s| s.1);
        if found_inf {
            self.scale *= self.backoff_factor as f32;
            self.growth_tracker = 0;
        } else {
            let successful = self.growth_tracker + 1;
            if successful == self.growth_interval {
                let grown = self.scale * self.growth_factor as f32;
                if grown.is_finite() {
                    self.scale = grown;
                }
                self.growth_tracker = 0;
            } else {
                self.growth_tracker = successful;
            }
        }
        self.per_optimizer.clear();
        Ok(())
    }

    /// Sets the scale directly (`update(new_scale)`), ending the iteration.
    pub fn update_to(&mut self, new_scale: f64) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let s = new_scale as f32;
        if !(s.is_finite() && s > 0.0) {
            return Err(Error::GradScaler(format!(
                "new_scale should be a positive finite float32, got {new_scale}"
            )));
        }
        self.scale = s;
        self.per_optimizer.clear();
        Ok(())
    }

    /// PyTorch's state dict: `scale`, `growth_factor`, `backoff_factor`,
    /// `growth_interval`, `_growth_tracker` (empty when disabled).
    pub fn state_dict(&self) -> Dict {
        let mut d = Dict::new();
        if self.enabled {
            d.insert("scale", self.scale as f64);
            d.insert("growth_factor", self.growth_factor);
            d.insert("backoff_factor", self.backoff_factor);
            d.insert("growth_interval", self.growth_interval);
            d.insert("_growth_tracker", self.growth_tracker);
        }
        d
    }

    /// Restores a [`state_dict`](Self::state_dict); an error (PyTorch's
    /// message) for an empty one, or one missing a key or holding a value
    /// of the wrong kind.
    pub fn load_state_dict(&mut self, state: &Dict) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if state.is_empty() {
            return Err(Error::GradScaler(
                "The source state dict is empty, possibly because it was saved from a disabled instance of \
                 GradScaler."
                    .into(),
            ));
        }
        let get = |k: &str| {
            state
                .get(k)
                .ok_or_else(|| Error::GradScaler(format!("GradScaler state dict: missing key {k:?}")))
        };
        let float = |k: &str| -> Result<f64> {
            get(k)?
                .as_f64()
                .ok_or_else(|| Error::GradScaler(format!("GradScaler state dict: {k:?} is not a float")))
        };
        let int = |k: &str| -> Result<i64> {
            match get(k)? {
                Value::Int(i) => Ok(*i),
                _ => Err(Error::GradScaler(format!("GradScaler state dict: {k:?} is not an int"))),
            }
        };
        let restored = GradScaler::new(GradScalerOptions {
            init_scale: float("scale")?,
            growth_factor: float("growth_factor")?,
            backoff_factor: float("backoff_factor")?,
            growth_interval: int("growth_interval")?,
            enabled: true,
        })?;
        *self = GradScaler {
            growth_tracker: int("_growth_tracker")?,
            ..restored
        };
        Ok(())
    }
}
