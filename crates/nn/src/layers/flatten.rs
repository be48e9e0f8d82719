//! `Flatten` and `Unflatten`.

use ferrotorch_core::{Result, Tensor};

use crate::{Forward, Module, ModuleState};

/// Flattens dims `start_dim..=end_dim` into one (PyTorch's `nn.Flatten`,
/// default `start_dim=1, end_dim=-1`: everything but the batch dim).
#[derive(Module)]
#[module(extra_repr = extra_repr)]
pub struct Flatten {
    start_dim: i64,
    end_dim: i64,
    state: ModuleState,
}

impl Default for Flatten {
    fn default() -> Self {
        Self::with_dims(1, -1)
    }
}

impl Flatten {
    /// `Flatten()`: dims 1 to the last.
    pub fn new() -> Self {
        Self::default()
    }

    /// `Flatten(start_dim, end_dim)`.
    pub fn with_dims(start_dim: i64, end_dim: i64) -> Self {
        Flatten {
            start_dim,
            end_dim,
            state: ModuleState::default(),
        }
    }

    fn extra_repr(&self) -> String {
        format!("start_dim={}, end_dim={}", self.start_dim, self.end_dim)
    }
}

impl Forward for Flatten {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.flatten((self.start_dim, self.end_dim))
    }
}

/// Splits dim `dim` into `sizes` (PyTorch's `nn.Unflatten`).
#[derive(Module)]
#[module(extra_repr = extra_repr)]
pub struct Unflatten {
    dim: i64,
    sizes: Vec<i64>,
    state: ModuleState,
}

impl Unflatten {
    /// `Unflatten(dim, unflattened_size)`.
    pub fn new(dim: i64, sizes: impl Into<Vec<i64>>) -> Self {
        Unflatten {
            dim,
            sizes: sizes.into(),
            state: ModuleState::default(),
        }
    }

    fn extra_repr(&self) -> String {
        let s: Vec<String> = self.sizes.iter().map(i64::to_string).collect();
        let tuple = if s.len() == 1 {
            format!("({},)", s[0])
        } else {
            format!("({})", s.join(", "))
        };
        format!("dim={}, unflattened_size={tuple}", self.dim)
    }
}

impl Forward for Unflatten {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.unflatten(self.dim, self.sizes.clone())
    }
}
