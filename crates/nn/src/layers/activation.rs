//! Activation layers: each a [`ModuleState`] and its arguments around a
//! [`functional`](crate::functional) call.

use ferrotorch_core::{Result, Tensor};

use crate::functional::{self as F, GeluApproximate};
use crate::pyfmt::py_float;
use crate::{Forward, Module, ModuleState};

macro_rules! simple_activation {
    ($(#[$doc:meta])* $name:ident => $f:expr) => {
        $(#[$doc])*
        #[derive(Module, Default)]
        pub struct $name {
            state: ModuleState,
        }

        impl $name {
            /// The layer.
            pub fn new() -> Self {
                Self::default()
            }
        }

        impl Forward for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                let f: fn(&Tensor) -> Result<Tensor> = $f;
                f(x)
            }
        }
    };
}

simple_activation!(
    /// `max(x, 0)` (PyTorch's `nn.ReLU`).
    ReLU => F::relu
);
simple_activation!(
    /// `x * sigmoid(x)` (PyTorch's `nn.SiLU`).
    SiLU => F::silu
);
simple_activation!(
    /// `tanh(x)` (PyTorch's `nn.Tanh`).
    Tanh => Tensor::tanh
);
simple_activation!(
    /// `1 / (1 + exp(-x))` (PyTorch's `nn.Sigmoid`).
    Sigmoid => Tensor::sigmoid
);

/// `x` where positive, `negative_slope * x` elsewhere (PyTorch's
/// `nn.LeakyReLU`, default slope 0.01).
#[derive(Module)]
#[module(extra_repr = extra_repr)]
pub struct LeakyReLU {
    negative_slope: f64,
    state: ModuleState,
}

impl Default for LeakyReLU {
    fn default() -> Self {
        Self::new(0.01)
    }
}

impl LeakyReLU {
    /// The layer with `negative_slope`.
    pub fn new(negative_slope: f64) -> Self {
        LeakyReLU {
            negative_slope,
            state: ModuleState::default(),
        }
    }

    fn extra_repr(&self) -> String {
        format!("negative_slope={}", py_float(self.negative_slope))
    }
}

impl Forward for LeakyReLU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::leaky_relu(x, self.negative_slope)
    }
}

/// GELU, exact or with the tanh approximation (PyTorch's `nn.GELU`).
#[derive(Module, Default)]
#[module(name = "GELU", extra_repr = extra_repr)]
pub struct Gelu {
    approximate: GeluApproximate,
    state: ModuleState,
}

/// PyTorch's spelling of the GELU layer's name.
pub type GELU = Gelu;

impl Gelu {
    /// The exact GELU.
    pub fn new() -> Self {
        Self::default()
    }

    /// GELU with the given approximation.
    pub fn with_approximate(approximate: GeluApproximate) -> Self {
        Gelu {
            approximate,
            state: ModuleState::default(),
        }
    }

    fn extra_repr(&self) -> String {
        format!("approximate='{}'", self.approximate.as_str())
    }
}

impl Forward for Gelu {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::gelu_with(x, self.approximate)
    }
}

macro_rules! dim_activation {
    ($(#[$doc:meta])* $name:ident => $f:path) => {
        $(#[$doc])*
        #[derive(Module)]
        #[module(extra_repr = extra_repr)]
        pub struct $name {
            dim: i64,
            state: ModuleState,
        }

        impl $name {
            /// The layer over `dim`.
            pub fn new(dim: i64) -> Self {
                $name {
                    dim,
                    state: ModuleState::default(),
                }
            }

            fn extra_repr(&self) -> String {
                format!("dim={}", self.dim)
            }
        }

        impl Forward for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                $f(x, self.dim)
            }
        }
    };
}

dim_activation!(
    /// Softmax over a dim (PyTorch's `nn.Softmax(dim)`).
    Softmax => F::softmax
);
dim_activation!(
    /// Log-softmax over a dim (PyTorch's `nn.LogSoftmax(dim)`).
    LogSoftmax => F::log_softmax
);
