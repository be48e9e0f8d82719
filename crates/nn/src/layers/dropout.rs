//! `Dropout`.

use ferrotorch_core::{Error, Result, Tensor};

use crate::pyfmt::py_float;
use crate::{Forward, Module, ModuleState, functional as F};

/// Zeroes elements with probability `p` in training and scales the rest
/// by `1 / (1 - p)`; the identity in eval mode (PyTorch's `nn.Dropout`,
/// PyTorch's mask for the same seed).
#[derive(Module)]
#[module(extra_repr = extra_repr)]
pub struct Dropout {
    p: f64,
    state: ModuleState,
}

impl Dropout {
    /// The layer; errors for `p` outside [0, 1] with PyTorch's message.
    pub fn new(p: f64) -> Result<Self> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::invalid(
                "Dropout",
                format!("dropout probability has to be between 0 and 1, but got {p}"),
            ));
        }
        Ok(Dropout {
            p,
            state: ModuleState::default(),
        })
    }

    /// The drop probability.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// A copy (`copy.deepcopy`).
    pub(crate) fn deep_clone(&self) -> Self {
        Dropout {
            p: self.p,
            state: self.state.clone(),
        }
    }

    fn extra_repr(&self) -> String {
        format!("p={}, inplace=False", py_float(self.p))
    }
}

impl Forward for Dropout {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::dropout(x, self.p, self.state.is_training())
    }
}
