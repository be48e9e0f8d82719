//! `Conv1d`, `Conv2d`, `ConvTranspose1d`, `ConvTranspose2d`: PyTorch's
//! parameters (`weight` `[out, in/groups, *k]`, transposed `[in,
//! out/groups, *k]`), initialisation (`kaiming_uniform_(a=sqrt(5))`, bias
//! U(-1/sqrt(fan_in), 1/sqrt(fan_in))), repr and checks, over the core's
//! convolution operator.

use ferrotorch_core::{
    ConvOptions, ConvTransposeOptions, DType, Error, Padding, Result, ShapeVec, Tensor, TensorOptions,
};

use crate::init::{self, FanMode, Nonlinearity};
use crate::pyfmt::py_bool;
use crate::{Forward, Module, ModuleState, Parameter};

/// The keyword arguments of the convolution layers (PyTorch's defaults:
/// stride 1, padding 0, dilation 1, groups 1, a bias, zero padding).
#[derive(Debug, Clone, PartialEq)]
pub struct ConvLayerOptions {
    /// Stride per spatial dim (one value: every dim).
    pub(crate) stride: ShapeVec,
    /// Padding: explicit per dim, `Same` or `Valid` (`Same`/`Valid` only
    /// for non-transposed convolutions).
    pub(crate) padding: Padding,
    /// Extra size on one side of a transposed convolution's output.
    pub(crate) output_padding: ShapeVec,
    /// Dilation per spatial dim.
    pub(crate) dilation: ShapeVec,
    /// Channel groups (both channel counts must divide by it).
    pub(crate) groups: i64,
    /// Whether the layer has a bias.
    pub(crate) bias: bool,
    /// The parameters' dtype (default: the default dtype).
    pub(crate) dtype: Option<DType>,
}

impl Default for ConvLayerOptions {
    fn default() -> Self {
        ConvLayerOptions {
            stride: smallvec(&[1]),
            padding: Padding::Explicit(smallvec(&[0])),
            output_padding: smallvec(&[0]),
            dilation: smallvec(&[1]),
            groups: 1,
            bias: true,
            dtype: None,
        }
    }
}

fn smallvec(v: &[i64]) -> ShapeVec {
    v.iter().copied().collect()
}

impl ConvLayerOptions {
    /// PyTorch's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the stride.
    pub fn stride(mut self, s: impl ferrotorch_core::IntoShape) -> Self {
        self.stride = s.into_shape();
        self
    }

    /// Sets the padding (a size, `Padding::Same` or `Padding::Valid`).
    pub fn padding(mut self, p: impl Into<Padding>) -> Self {
        self.padding = p.into();
        self
    }

    /// Sets the output padding (transposed layers).
    pub fn output_padding(mut self, p: impl ferrotorch_core::IntoShape) -> Self {
        self.output_padding = p.into_shape();
        self
    }

    /// Sets the dilation.
    pub fn dilation(mut self, d: impl ferrotorch_core::IntoShape) -> Self {
        self.dilation = d.into_shape();
        self
    }

    /// Sets the number of groups.
    pub fn groups(mut self, g: i64) -> Self {
        self.groups = g;
        self
    }

    /// With or without a bias.
    pub fn bias(mut self, on: bool) -> Self {
        self.bias = on;
        self
    }

    /// Sets the parameters' dtype.
    pub fn dtype(mut self, dtype: DType) -> Self {
        self.dtype = Some(dtype);
        self
    }
}

/// `v` with one entry per spatial dim (one value is repeated); errors
/// naming `what` otherwise.
fn per_dim(layer: &'static str, what: &str, v: &[i64], n: usize) -> Result<Vec<i64>> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v.to_vec()),
        _ => Err(Error::invalid(layer, format!("{what} must have {n} values, got {v:?}"))),
    }
}

fn tuple(v: &[i64]) -> String {
    if v.len() == 1 {
        format!("({},)", v[0])
    } else {
        format!("({})", v.iter().map(i64::to_string).collect::<Vec<_>>().join(", "))
    }
}

/// Shapes and hyperparameters shared by the convolution layers.
#[derive(Debug, Clone)]
struct ConvSpec {
    transposed: bool,
    in_channels: usize,
    out_channels: usize,
    kernel: Vec<i64>,
    stride: Vec<i64>,
    padding: Padding,
    output_padding: Vec<i64>,
    dilation: Vec<i64>,
    groups: i64,
}

impl ConvSpec {
    fn new(
        name: &'static str,
        transposed: bool,
        n: usize,
        cin: usize,
        cout: usize,
        kernel: &[i64],
        o: &ConvLayerOptions,
    ) -> Result<Self> {
        let kernel = per_dim(name, "kernel_size", kernel, n)?;
        let padding = match &o.padding {
            Padding::Explicit(p) => Padding::Explicit(per_dim(name, "padding", p, n)?.into_iter().collect()),
            other if transposed => {
                return Err(Error::invalid(
                    name,
                    format!("padding {other:?} is not supported for transposed convolutions"),
                ));
            }
            other => other.clone(),
        };
        let spec = ConvSpec {
            transposed,
            in_channels: cin,
            out_channels: cout,
            kernel,
            stride: per_dim(name, "stride", &o.stride, n)?,
            padding,
            output_padding: per_dim(name, "output_padding", &o.output_padding, n)?,
            dilation: per_dim(name, "dilation", &o.dilation, n)?,
            groups: o.groups,
        };
        if o.groups <= 0 {
            return Err(Error::invalid(name, "groups must be a positive integer"));
        }
        if cin as i64 % o.groups != 0 {
            return Err(Error::invalid(name, "in_channels must be divisible by groups"));
        }
        if cout as i64 % o.groups != 0 {
            return Err(Error::invalid(name, "out_channels must be divisible by groups"));
        }
        if spec.padding == Padding::Same && spec.stride.iter().any(|&s| s != 1) {
            return Err(Error::invalid(
                name,
                "padding='same' is not supported for strided convolutions",
            ));
        }
        Ok(spec)
    }

    /// The weight's shape.
    fn weight_shape(&self) -> Vec<usize> {
        let g = self.groups as usize;
        let mut s = if self.transposed {
            vec![self.in_channels, self.out_channels / g]
        } else {
            vec![self.out_channels, self.in_channels / g]
        };
        s.extend(self.kernel.iter().map(|&k| k as usize));
        s
    }

    fn params(&self, o: &ConvLayerOptions) -> Result<(Parameter, Option<Parameter>)> {
        let t = match o.dtype {
            Some(dt) => TensorOptions::new().dtype(dt),
            None => TensorOptions::new(),
        };
        let w = t.clone().empty(&self.weight_shape()[..])?;
        init::kaiming_uniform_(&w, FanMode::FanIn, Nonlinearity::LeakyRelu(Some(5f64.sqrt())))?;
        let bias = if o.bias {
            let b = t.empty([self.out_channels])?;
            let (fan_in, _) = init::calculate_fan_in_and_fan_out(&w)?;
            if fan_in != 0 {
                let bound = 1.0 / (fan_in as f64).sqrt();
                init::uniform_(&b, -bound, bound)?;
            }
            Some(Parameter::new(b)?)
        } else {
            None
        };
        Ok((Parameter::new(w)?, bias))
    }

    fn extra_repr(&self, bias: bool) -> String {
        let mut s = format!(
            "{}, {}, kernel_size={}, stride={}",
            self.in_channels,
            self.out_channels,
            tuple(&self.kernel),
            tuple(&self.stride)
        );
        match &self.padding {
            Padding::Explicit(p) if p.iter().any(|&v| v != 0) => s += &format!(", padding={}", tuple(p)),
            Padding::Explicit(_) => {}
            Padding::Same => s += ", padding=same",
            Padding::Valid => s += ", padding=valid",
        }
        if self.dilation.iter().any(|&d| d != 1) {
            s += &format!(", dilation={}", tuple(&self.dilation));
        }
        if self.output_padding.iter().any(|&d| d != 0) {
            s += &format!(", output_padding={}", tuple(&self.output_padding));
        }
        if self.groups != 1 {
            s += &format!(", groups={}", self.groups);
        }
        if !bias {
            s += &format!(", bias={}", py_bool(false));
        }
        s
    }

    /// Checks the input's rank and channels; the error names the layer and
    /// both shapes.
    fn check_input(&self, repr: String, x: &Tensor) -> Result<()> {
        let n = self.kernel.len();
        let spatial = ["L", "H, W", "D, H, W"][n - 1];
        let ok_rank = x.ndim() == n + 2 || x.ndim() == n + 1;
        let c = if x.ndim() == n + 2 {
            x.shape().get(1)
        } else {
            x.shape().first()
        };
        if !ok_rank || c != Some(&self.in_channels) {
            return Err(Error::module(
                repr,
                format!(
                    "expected input [N, {}, {spatial}], got {:?}",
                    self.in_channels,
                    x.shape()
                ),
            ));
        }
        Ok(())
    }

    fn run(&self, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
        let shape = |v: &[i64]| -> ShapeVec { v.iter().copied().collect() };
        if self.transposed {
            let o = ConvTransposeOptions {
                stride: shape(&self.stride),
                padding: match &self.padding {
                    Padding::Explicit(p) => p.clone(),
                    _ => smallvec(&[0]),
                },
                output_padding: shape(&self.output_padding),
                groups: self.groups,
                dilation: shape(&self.dilation),
            };
            match self.kernel.len() {
                1 => x.conv_transpose1d(w, b, o),
                _ => x.conv_transpose2d(w, b, o),
            }
        } else {
            let o = ConvOptions {
                stride: shape(&self.stride),
                padding: self.padding.clone(),
                dilation: shape(&self.dilation),
                groups: self.groups,
            };
            match self.kernel.len() {
                1 => x.conv1d(w, b, o),
                _ => x.conv2d(w, b, o),
            }
        }
    }
}

macro_rules! conv_layer {
    ($(#[$doc:meta])* $name:ident, $label:literal, $transposed:expr, $n:expr) => {
        $(#[$doc])*
        #[derive(Module)]
        #[module(extra_repr = extra_repr)]
        pub struct $name {
            /// The filters.
            pub weight: Parameter,
            /// `[out_channels]`, if the layer has a bias.
            pub bias: Option<Parameter>,
            spec: ConvSpec,
            state: ModuleState,
        }

        impl $name {
            /// The layer with PyTorch's defaults (stride 1, no padding, a bias).
            pub fn new(in_channels: usize, out_channels: usize, kernel_size: impl ferrotorch_core::IntoShape) -> Result<Self> {
                Self::with_options(in_channels, out_channels, kernel_size, ConvLayerOptions::default())
            }

            /// The layer with the given options. Errors when a size has the
            /// wrong number of values, channels do not divide by `groups`,
            /// or `padding='same'` is combined with a stride.
            pub fn with_options(
                in_channels: usize,
                out_channels: usize,
                kernel_size: impl ferrotorch_core::IntoShape,
                opts: ConvLayerOptions,
            ) -> Result<Self> {
                let spec = ConvSpec::new($label, $transposed, $n, in_channels, out_channels, &kernel_size.into_shape(), &opts)?;
                let (weight, bias) = spec.params(&opts)?;
                Ok($name { weight, bias, spec, state: ModuleState::default() })
            }

            fn extra_repr(&self) -> String {
                self.spec.extra_repr(self.bias.is_some())
            }
        }

        impl Forward for $name {
            /// Errors naming the layer and both shapes when the input's
            /// rank or channel count does not fit.
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                self.spec.check_input(self.repr(), x)?;
                let b = self.bias.as_ref().map(Parameter::tensor);
                self.spec.run(x, &self.weight.tensor(), b.as_ref())
            }
        }
    };
}

conv_layer!(
    /// 1-d convolution over `[N, C, L]` (PyTorch's `nn.Conv1d`).
    Conv1d, "Conv1d", false, 1
);
conv_layer!(
    /// 2-d convolution over `[N, C, H, W]` (PyTorch's `nn.Conv2d`).
    Conv2d, "Conv2d", false, 2
);
conv_layer!(
    /// 1-d transposed convolution (PyTorch's `nn.ConvTranspose1d`).
    ConvTranspose1d, "ConvTranspose1d", true, 1
);
conv_layer!(
    /// 2-d transposed convolution (PyTorch's `nn.ConvTranspose2d`).
    ConvTranspose2d, "ConvTranspose2d", true, 2
);
