//! Normalisation layers: `LayerNorm`, `GroupNorm`, `RMSNorm`,
//! `BatchNorm1d`, `BatchNorm2d` and `BatchNorm3d`, with PyTorch's parameters, buffers,
//! defaults and reprs.

use ferrotorch_core::{DType, Device, Error, IntoShape, Result, Tensor, TensorOptions, autograd};

use crate::functional::{self as F, BatchNormOptions};
use crate::parameter::{copy_parameter, tensor_options};
use crate::pyfmt::py_bool;
use crate::pyfmt::py_float;
use crate::{Buffer, Forward, Module, ModuleState, Parameter};

/// The options of [`LayerNorm`] (PyTorch's keywords and defaults).
#[derive(Debug, Clone, Copy, PartialEq, crate::Options)]
pub struct LayerNormOptions {
    /// Added to the variance (`1e-5`).
    pub(crate) eps: f64,
    /// Learnable per-element `weight` (and `bias`) (`true`).
    pub(crate) elementwise_affine: bool,
    /// A learnable `bias` when `elementwise_affine` (`true`).
    pub(crate) bias: bool,
    /// The parameters' dtype (default: the default dtype).
    pub(crate) dtype: Option<DType>,
    /// The parameters' device (the CPU).
    pub(crate) device: Device,
}

impl Default for LayerNormOptions {
    fn default() -> Self {
        LayerNormOptions {
            eps: 1e-5,
            elementwise_affine: true,
            bias: true,
            dtype: None,
            device: ferrotorch_core::default_device(),
        }
    }
}

/// Layer normalisation over the trailing dims `normalized_shape`
/// (PyTorch's `nn.LayerNorm`): `weight` ones and `bias` zeros of shape
/// `normalized_shape`.
#[derive(Module)]
#[module(extra_repr = extra_repr)]
pub struct LayerNorm {
    /// `normalized_shape`, with `elementwise_affine`.
    pub weight: Option<Parameter>,
    /// `normalized_shape`, with `elementwise_affine` and `bias`.
    pub bias: Option<Parameter>,
    normalized_shape: Vec<usize>,
    eps: f64,
    elementwise_affine: bool,
    state: ModuleState,
}

impl LayerNorm {
    /// The layer with PyTorch's defaults (`LayerNorm(normalized_shape)`).
    pub fn new(normalized_shape: impl IntoShape) -> Result<Self> {
        Self::with_options(normalized_shape, LayerNormOptions::default())
    }

    /// The layer with the given options. `normalized_shape` is one size
    /// (`LayerNorm::new(7)`, PyTorch's `int`) or several. Errors for an
    /// empty or negative `normalized_shape`.
    pub fn with_options(normalized_shape: impl IntoShape, opts: LayerNormOptions) -> Result<Self> {
        let normalized_shape = sizes("LayerNorm", normalized_shape)?;
        if normalized_shape.is_empty() {
            return Err(Error::invalid("LayerNorm", "normalized_shape must not be empty"));
        }
        let o = tensor_options(opts.dtype, opts.device);
        let (weight, bias) = if opts.elementwise_affine {
            let w = Parameter::new(o.clone().ones(&normalized_shape[..])?)?;
            let b = if opts.bias {
                Some(Parameter::new(o.zeros(&normalized_shape[..])?)?)
            } else {
                None
            };
            (Some(w), b)
        } else {
            (None, None)
        };
        Ok(LayerNorm {
            weight,
            bias,
            normalized_shape,
            eps: opts.eps,
            elementwise_affine: opts.elementwise_affine,
            state: ModuleState::default(),
        })
    }

    /// The normalised trailing shape.
    pub fn normalized_shape(&self) -> &[usize] {
        &self.normalized_shape
    }

    /// The epsilon.
    pub fn eps(&self) -> f64 {
        self.eps
    }

    pub(crate) fn deep_clone(&self) -> Result<Self> {
        Ok(LayerNorm {
            weight: self.weight.as_ref().map(copy_parameter).transpose()?,
            bias: self.bias.as_ref().map(copy_parameter).transpose()?,
            normalized_shape: self.normalized_shape.clone(),
            eps: self.eps,
            elementwise_affine: self.elementwise_affine,
            state: self.state.clone(),
        })
    }

    fn extra_repr(&self) -> String {
        format!(
            "{}, eps={}, elementwise_affine={}, bias={}",
            crate::pyfmt::py_tuple(&self.normalized_shape),
            py_float(self.eps),
            py_bool(self.elementwise_affine),
            py_bool(self.bias.is_some())
        )
    }
}

/// Errors unless `x` ends in `trailing`, naming the layer and both shapes.
fn check_trailing(m: &dyn Module, x: &Tensor, trailing: &[usize]) -> Result<()> {
    let s = x.shape();
    if s.len() < trailing.len() || s[s.len() - trailing.len()..] != *trailing {
        return Err(Error::module(
            m.repr(),
            format!("expected input with trailing shape {trailing:?}, got {s:?}"),
        ));
    }
    Ok(())
}

impl Forward for LayerNorm {
    /// Errors when `x` does not end in `normalized_shape`, naming the layer
    /// and both shapes.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        check_trailing(self, x, &self.normalized_shape)?;
        F::layer_norm(
            x,
            &self.normalized_shape,
            self.weight.as_ref().map(Parameter::tensor).as_ref(),
            self.bias.as_ref().map(Parameter::tensor).as_ref(),
            self.eps,
        )
    }
}

/// The options of [`GroupNorm`] (PyTorch's keywords and defaults).
#[derive(Debug, Clone, Copy, PartialEq, crate::Options)]
pub struct GroupNormOptions {
    /// Added to the variance (`1e-5`).
    pub(crate) eps: f64,
    /// Learnable per-channel `weight` and `bias` (`true`).
    pub(crate) affine: bool,
    /// A learnable `bias` when `affine` (`true`).
    pub(crate) bias: bool,
    /// The parameters' dtype (default: the default dtype).
    pub(crate) dtype: Option<DType>,
    /// The parameters' device (the CPU).
    pub(crate) device: Device,
}

impl Default for GroupNormOptions {
    fn default() -> Self {
        GroupNormOptions {
            eps: 1e-5,
            affine: true,
            bias: true,
            dtype: None,
            device: ferrotorch_core::default_device(),
        }
    }
}

/// Group normalisation of `[N, C, *]` (PyTorch's `nn.GroupNorm`):
/// `weight` ones and `bias` zeros of size `num_channels`.
#[derive(Module)]
#[module(extra_repr = extra_repr)]
pub struct GroupNorm {
    /// `[num_channels]`, with `affine`.
    pub weight: Option<Parameter>,
    /// `[num_channels]`, with `affine` and `bias`.
    pub bias: Option<Parameter>,
    num_groups: usize,
    num_channels: usize,
    eps: f64,
    affine: bool,
    state: ModuleState,
}

impl GroupNorm {
    /// The layer with PyTorch's defaults.
    pub fn new(num_groups: usize, num_channels: usize) -> Result<Self> {
        Self::with_options(num_groups, num_channels, GroupNormOptions::default())
    }

    /// The layer; errors (PyTorch's message) when `num_channels` is not
    /// divisible by `num_groups`.
    pub fn with_options(num_groups: usize, num_channels: usize, opts: GroupNormOptions) -> Result<Self> {
        if num_groups == 0 || !num_channels.is_multiple_of(num_groups) {
            return Err(Error::invalid(
                "GroupNorm",
                format!("num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"),
            ));
        }
        let o = tensor_options(opts.dtype, opts.device);
        let (weight, bias) = if opts.affine {
            let w = Parameter::new(o.clone().ones([num_channels])?)?;
            let b = if opts.bias {
                Some(Parameter::new(o.zeros([num_channels])?)?)
            } else {
                None
            };
            (Some(w), b)
        } else {
            (None, None)
        };
        Ok(GroupNorm {
            weight,
            bias,
            num_groups,
            num_channels,
            eps: opts.eps,
            affine: opts.affine,
            state: ModuleState::default(),
        })
    }

    fn extra_repr(&self) -> String {
        format!(
            "{}, {}, eps={}, affine={}, bias={}",
            self.num_groups,
            self.num_channels,
            py_float(self.eps),
            py_bool(self.affine),
            py_bool(self.bias.is_some())
        )
    }
}

impl Forward for GroupNorm {
    /// Errors for an input that is not `[N, num_channels, *]`, naming the
    /// layer and both shapes.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.ndim() < 2 || x.shape()[1] != self.num_channels {
            return Err(Error::module(
                self.repr(),
                format!("expected input [N, {}, *], got {:?}", self.num_channels, x.shape()),
            ));
        }
        F::group_norm(
            x,
            self.num_groups,
            self.weight.as_ref().map(Parameter::tensor).as_ref(),
            self.bias.as_ref().map(Parameter::tensor).as_ref(),
            self.eps,
        )
    }
}

/// The options of [`RMSNorm`] (PyTorch's keywords and defaults).
#[derive(Debug, Clone, Copy, PartialEq, crate::Options)]
pub struct RmsNormOptions {
    /// Added to the mean square; `None` is the input dtype's machine
    /// epsilon (`None`).
    pub(crate) eps: Option<f64>,
    /// A learnable per-element `weight` (`true`).
    pub(crate) elementwise_affine: bool,
    /// The parameters' dtype (default: the default dtype).
    pub(crate) dtype: Option<DType>,
    /// The parameters' device (the CPU).
    pub(crate) device: Device,
}

impl Default for RmsNormOptions {
    fn default() -> Self {
        RmsNormOptions {
            eps: None,
            elementwise_affine: true,
            dtype: None,
            device: ferrotorch_core::default_device(),
        }
    }
}

/// Root-mean-square normalisation over the trailing dims (PyTorch's
/// `nn.RMSNorm`): `weight` ones of shape `normalized_shape`.
#[derive(Module)]
#[module(extra_repr = extra_repr)]
pub struct RMSNorm {
    /// `normalized_shape`, with `elementwise_affine`.
    pub weight: Option<Parameter>,
    normalized_shape: Vec<usize>,
    eps: Option<f64>,
    elementwise_affine: bool,
    state: ModuleState,
}

/// The Rust-style alias of [`RMSNorm`].
pub type RmsNorm = RMSNorm;

impl RMSNorm {
    /// The layer with PyTorch's defaults.
    pub fn new(normalized_shape: impl IntoShape) -> Result<Self> {
        Self::with_options(normalized_shape, RmsNormOptions::default())
    }

    /// The layer with the given options. `normalized_shape` is one size
    /// (`LayerNorm::new(7)`, PyTorch's `int`) or several. Errors for an
    /// empty or negative `normalized_shape`.
    pub fn with_options(normalized_shape: impl IntoShape, opts: RmsNormOptions) -> Result<Self> {
        let normalized_shape = sizes("RMSNorm", normalized_shape)?;
        if normalized_shape.is_empty() {
            return Err(Error::invalid("RMSNorm", "normalized_shape must not be empty"));
        }
        let weight = if opts.elementwise_affine {
            Some(Parameter::new(
                tensor_options(opts.dtype, opts.device).ones(&normalized_shape[..])?,
            )?)
        } else {
            None
        };
        Ok(RMSNorm {
            weight,
            normalized_shape,
            eps: opts.eps,
            elementwise_affine: opts.elementwise_affine,
            state: ModuleState::default(),
        })
    }

    fn extra_repr(&self) -> String {
        format!(
            "{}, eps={}, elementwise_affine={}",
            crate::pyfmt::py_tuple(&self.normalized_shape),
            self.eps.map_or_else(|| "None".to_string(), py_float),
            py_bool(self.elementwise_affine)
        )
    }
}

impl Forward for RMSNorm {
    /// Errors when `x` does not end in `normalized_shape`, naming the layer
    /// and both shapes.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        check_trailing(self, x, &self.normalized_shape)?;
        F::rms_norm(
            x,
            &self.normalized_shape,
            self.weight.as_ref().map(Parameter::tensor).as_ref(),
            self.eps,
        )
    }
}

/// The options of [`BatchNorm1d`], [`BatchNorm2d`] and [`BatchNorm3d`] (PyTorch's keywords
/// and defaults).
#[derive(Debug, Clone, Copy, PartialEq, crate::Options)]
pub struct BatchNormLayerOptions {
    /// Added to the variance (`1e-5`).
    pub(crate) eps: f64,
    /// Weight of a batch's statistics in the running ones (`Some(0.1)`);
    /// `None` is the cumulative moving average (`1 / num_batches_tracked`).
    #[options(nullable)]
    pub(crate) momentum: Option<f64>,
    /// Learnable per-channel `weight` and `bias` (`true`).
    pub(crate) affine: bool,
    /// A learnable `bias` when `affine` (`true`).
    pub(crate) bias: bool,
    /// Keep `running_mean`, `running_var` and `num_batches_tracked`
    /// buffers (`true`); without them evaluation uses the batch's
    /// statistics.
    pub(crate) track_running_stats: bool,
    /// The parameters' and statistics' dtype (default: the default dtype).
    pub(crate) dtype: Option<DType>,
    /// Their device (the CPU).
    pub(crate) device: Device,
}

impl Default for BatchNormLayerOptions {
    fn default() -> Self {
        BatchNormLayerOptions {
            eps: 1e-5,
            momentum: Some(0.1),
            affine: true,
            bias: true,
            track_running_stats: true,
            dtype: None,
            device: ferrotorch_core::default_device(),
        }
    }
}

/// The members of the `BatchNorm*d` layers (PyTorch's `_BatchNorm`).
struct BatchNormMembers {
    weight: Option<Parameter>,
    bias: Option<Parameter>,
    running_mean: Option<Buffer>,
    running_var: Option<Buffer>,
    num_batches_tracked: Option<Buffer>,
}

impl BatchNormMembers {
    fn new(num_features: usize, opts: &BatchNormLayerOptions) -> Result<Self> {
        let o = tensor_options(opts.dtype, opts.device);
        let (weight, bias) = if opts.affine {
            let w = Parameter::new(o.clone().ones([num_features])?)?;
            let b = if opts.bias {
                Some(Parameter::new(o.clone().zeros([num_features])?)?)
            } else {
                None
            };
            (Some(w), b)
        } else {
            (None, None)
        };
        let (rm, rv, nbt) = if opts.track_running_stats {
            (
                Some(Buffer::new(o.clone().zeros([num_features])?)),
                Some(Buffer::new(o.ones([num_features])?)),
                Some(Buffer::new(
                    TensorOptions::new().device(opts.device).dtype(DType::I64).zeros(())?,
                )),
            )
        } else {
            (None, None, None)
        };
        Ok(BatchNormMembers {
            weight,
            bias,
            running_mean: rm,
            running_var: rv,
            num_batches_tracked: nbt,
        })
    }

    fn extra_repr(&self, num_features: usize, opts: &BatchNormLayerOptions) -> String {
        format!(
            "{}, eps={}, momentum={}, affine={}, bias={}, track_running_stats={}",
            num_features,
            py_float(opts.eps),
            opts.momentum.map_or_else(|| "None".to_string(), py_float),
            py_bool(opts.affine),
            py_bool(self.bias.is_some()),
            py_bool(opts.track_running_stats)
        )
    }

    /// PyTorch's `_BatchNorm.forward`: counts the batch and updates the
    /// running statistics in training (momentum, or `1 / count` for the
    /// cumulative average); evaluation uses them when tracked.
    fn forward(&self, x: &Tensor, training: bool, opts: &BatchNormLayerOptions) -> Result<Tensor> {
        let mut factor = opts.momentum.unwrap_or(0.0);
        if training
            && opts.track_running_stats
            && let Some(nbt) = &self.num_batches_tracked
        {
            let t = nbt.tensor();
            let n = t.item::<i64>()? + 1;
            autograd::no_grad(|| t.fill_(n))?;
            if opts.momentum.is_none() {
                factor = 1.0 / n as f64;
            }
        }
        let bn_training = training || (self.running_mean.is_none() && self.running_var.is_none());
        let use_stats = !training || opts.track_running_stats;
        let (rm, rv) = if use_stats {
            (
                self.running_mean.as_ref().map(Buffer::tensor),
                self.running_var.as_ref().map(Buffer::tensor),
            )
        } else {
            (None, None)
        };
        let (w, b) = (
            self.weight.as_ref().map(Parameter::tensor),
            self.bias.as_ref().map(Parameter::tensor),
        );
        F::batch_norm(
            x,
            rm.as_ref(),
            rv.as_ref(),
            w.as_ref(),
            b.as_ref(),
            &BatchNormOptions {
                training: bn_training,
                momentum: factor,
                eps: opts.eps,
            },
        )
    }
}

macro_rules! batch_norm_layer {
    ($(#[$doc:meta])* $name:ident, $dims:expr, $expect:expr, $shape:expr) => {
        $(#[$doc])*
        #[derive(Module)]
        #[module(extra_repr = extra_repr)]
        pub struct $name {
            /// `[num_features]`, with `affine`.
            pub weight: Option<Parameter>,
            /// `[num_features]`, with `affine` and `bias`.
            pub bias: Option<Parameter>,
            /// `[num_features]`, with `track_running_stats`.
            pub running_mean: Option<Buffer>,
            /// `[num_features]`, with `track_running_stats`.
            pub running_var: Option<Buffer>,
            /// int64, 0-d: training forwards so far, with
            /// `track_running_stats`.
            pub num_batches_tracked: Option<Buffer>,
            num_features: usize,
            opts: BatchNormLayerOptions,
            state: ModuleState,
        }

        impl $name {
            /// The layer with PyTorch's defaults.
            pub fn new(num_features: usize) -> Result<Self> {
                Self::with_options(num_features, BatchNormLayerOptions::default())
            }

            /// The layer with the given options.
            pub fn with_options(num_features: usize, opts: BatchNormLayerOptions) -> Result<Self> {
                let m = BatchNormMembers::new(num_features, &opts)?;
                Ok($name {
                    weight: m.weight,
                    bias: m.bias,
                    running_mean: m.running_mean,
                    running_var: m.running_var,
                    num_batches_tracked: m.num_batches_tracked,
                    num_features,
                    opts,
                    state: ModuleState::default(),
                })
            }

            /// The number of channels.
            pub fn num_features(&self) -> usize {
                self.num_features
            }

            /// The members as one struct (handles shared with `self`).
            fn members(&self) -> BatchNormMembers {
                BatchNormMembers {
                    weight: self.weight.clone(),
                    bias: self.bias.clone(),
                    running_mean: self.running_mean.clone(),
                    running_var: self.running_var.clone(),
                    num_batches_tracked: self.num_batches_tracked.clone(),
                }
            }

            fn extra_repr(&self) -> String {
                self.members().extra_repr(self.num_features, &self.opts)
            }
        }

        impl Forward for $name {
            /// Normalises with the batch's statistics in training (updating
            /// the running ones) and with the running statistics in eval
            /// mode. Errors for an input of another rank (PyTorch's message)
            /// or channel count, naming the layer and both shapes.
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                let dims: &[usize] = &$dims;
                if !dims.contains(&x.ndim()) {
                    return Err(Error::module(
                        self.repr(),
                        format!("expected {} input (got {}D input)", $expect, x.ndim()),
                    ));
                }
                if x.shape()[1] != self.num_features {
                    return Err(Error::module(
                        self.repr(),
                        format!(
                            "expected input {}, got {:?}",
                            format!($shape, self.num_features),
                            x.shape()
                        ),
                    ));
                }
                self.members().forward(x, self.state.is_training(), &self.opts)
            }
        }
    };
}

batch_norm_layer!(
    /// Batch normalisation of `[N, C]` or `[N, C, L]` per channel
    /// (PyTorch's `nn.BatchNorm1d`).
    BatchNorm1d,
    [2, 3],
    "2D or 3D",
    "[N, {}] or [N, {0}, L]"
);
batch_norm_layer!(
    /// Batch normalisation of `[N, C, H, W]` per channel (PyTorch's
    /// `nn.BatchNorm2d`).
    BatchNorm2d,
    [4],
    "4D",
    "[N, {}, H, W]"
);
batch_norm_layer!(
    /// Batch normalisation of `[N, C, D, H, W]` per channel (PyTorch's
    /// `nn.BatchNorm3d`).
    BatchNorm3d,
    [5],
    "5D",
    "[N, {}, D, H, W]"
);

/// A normalized shape as sizes: one size or several (PyTorch's `int` or
/// list); errors for a negative size.
fn sizes(layer: &'static str, shape: impl IntoShape) -> Result<Vec<usize>> {
    shape
        .into_shape()
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| Error::invalid(layer, format!("normalized_shape has a negative size {d}")))
        })
        .collect()
}
