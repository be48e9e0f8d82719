//! Pooling layers: `MaxPool1d/2d`, `AvgPool1d/2d`, `AdaptiveAvgPool1d/2d`,
//! `AdaptiveMaxPool2d`, over the core's pooling operators, with PyTorch's
//! reprs (sizes shown as given: `kernel_size=2` or `kernel_size=(2, 3)`).

use ferrotorch_core::{AvgPoolOptions, MaxPoolOptions, Result, ShapeVec, Tensor};

use crate::pyfmt::py_bool;
use crate::{Forward, Module, ModuleState};

/// A size as the user gave it: `2` or `(2, 3)`.
fn given(v: &[i64]) -> String {
    if v.len() == 1 {
        v[0].to_string()
    } else {
        format!("({})", v.iter().map(i64::to_string).collect::<Vec<_>>().join(", "))
    }
}

macro_rules! max_pool {
    ($(#[$doc:meta])* $name:ident, $f:ident, $fi:ident) => {
        $(#[$doc])*
        #[derive(Module)]
        #[module(extra_repr = extra_repr)]
        pub struct $name {
            opts: MaxPoolOptions,
            state: ModuleState,
        }

        impl $name {
            /// The layer; `opts` is a kernel size or a [`MaxPoolOptions`]
            /// (stride, padding, dilation, ceil_mode).
            pub fn new(opts: impl Into<MaxPoolOptions>) -> Self {
                let mut opts = opts.into();
                if opts.stride.is_none() {
                    opts.stride = Some(opts.kernel_size.clone());
                }
                $name { opts, state: ModuleState::default() }
            }

            /// The pooled values and the flat indices of the maxima
            /// (`return_indices=True`).
            pub fn forward_with_indices(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
                x.$fi(self.opts.clone())
            }

            fn extra_repr(&self) -> String {
                let o = &self.opts;
                let stride: ShapeVec = o.stride.clone().unwrap_or_else(|| o.kernel_size.clone());
                format!(
                    "kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}",
                    given(&o.kernel_size),
                    given(&stride),
                    given(&o.padding),
                    given(&o.dilation),
                    py_bool(o.ceil_mode)
                )
            }
        }

        impl Forward for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                x.$f(self.opts.clone())
            }
        }
    };
}

max_pool!(
    /// Max pooling over `[N, C, L]` (PyTorch's `nn.MaxPool1d`).
    MaxPool1d, max_pool1d, max_pool1d_with_indices
);
max_pool!(
    /// Max pooling over `[N, C, H, W]` (PyTorch's `nn.MaxPool2d`).
    MaxPool2d, max_pool2d, max_pool2d_with_indices
);

/// A size as `AvgPool1d` shows it (PyTorch's `_single`): `(2,)`.
fn single(v: &[i64]) -> String {
    if v.len() == 1 { format!("({},)", v[0]) } else { given(v) }
}

macro_rules! avg_pool {
    ($(#[$doc:meta])* $name:ident, $f:ident, $fmt:ident) => {
        $(#[$doc])*
        #[derive(Module)]
        #[module(extra_repr = extra_repr)]
        pub struct $name {
            opts: AvgPoolOptions,
            state: ModuleState,
        }

        impl $name {
            /// The layer; `opts` is a kernel size or an [`AvgPoolOptions`]
            /// (stride, padding, ceil_mode, count_include_pad, divisor_override).
            pub fn new(opts: impl Into<AvgPoolOptions>) -> Self {
                let mut opts = opts.into();
                if opts.stride.is_none() {
                    opts.stride = Some(opts.kernel_size.clone());
                }
                $name { opts, state: ModuleState::default() }
            }

            fn extra_repr(&self) -> String {
                let o = &self.opts;
                let stride: ShapeVec = o.stride.clone().unwrap_or_else(|| o.kernel_size.clone());
                format!("kernel_size={}, stride={}, padding={}", $fmt(&o.kernel_size), $fmt(&stride), $fmt(&o.padding))
            }
        }

        impl Forward for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                x.$f(self.opts.clone())
            }
        }
    };
}

avg_pool!(
    /// Average pooling over `[N, C, L]` (PyTorch's `nn.AvgPool1d`).
    AvgPool1d, avg_pool1d, single
);
avg_pool!(
    /// Average pooling over `[N, C, H, W]` (PyTorch's `nn.AvgPool2d`).
    AvgPool2d, avg_pool2d, given
);

/// Average pooling to a fixed output size (PyTorch's `nn.AdaptiveAvgPool2d`).
#[derive(Module)]
#[module(extra_repr = extra_repr)]
pub struct AdaptiveAvgPool2d {
    output_size: ShapeVec,
    state: ModuleState,
}

impl AdaptiveAvgPool2d {
    /// The layer for `output_size` (one size or `(H, W)`).
    pub fn new(output_size: impl ferrotorch_core::IntoShape) -> Self {
        AdaptiveAvgPool2d {
            output_size: output_size.into_shape(),
            state: ModuleState::default(),
        }
    }

    fn extra_repr(&self) -> String {
        format!("output_size={}", given(&self.output_size))
    }
}

impl Forward for AdaptiveAvgPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::functional::adaptive_avg_pool2d(x, self.output_size.clone())
    }
}

/// Max pooling to a fixed output size (PyTorch's `nn.AdaptiveMaxPool2d`).
#[derive(Module)]
#[module(extra_repr = extra_repr)]
pub struct AdaptiveMaxPool2d {
    output_size: ShapeVec,
    state: ModuleState,
}

impl AdaptiveMaxPool2d {
    /// The layer for `output_size` (one size or `(H, W)`).
    pub fn new(output_size: impl ferrotorch_core::IntoShape) -> Self {
        AdaptiveMaxPool2d {
            output_size: output_size.into_shape(),
            state: ModuleState::default(),
        }
    }

    /// The pooled values and the flat indices of the maxima.
    pub fn forward_with_indices(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        crate::functional::adaptive_max_pool2d(x, self.output_size.clone())
    }

    fn extra_repr(&self) -> String {
        format!("output_size={}", given(&self.output_size))
    }
}

impl Forward for AdaptiveMaxPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_with_indices(x)?.0)
    }
}
