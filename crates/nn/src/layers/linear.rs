//! `Linear`, `Bilinear` and `Identity`.

use ferrotorch_core::{DType, Device, Error, Result, Tensor, TensorOptions};

use crate::init::{self, FanMode, Nonlinearity};
use crate::pyfmt::py_bool;
use crate::{Forward, Module, ModuleState, Parameter, functional as F};

/// Dtype, device and bias of a layer's parameters (PyTorch's `bias=`,
/// `dtype=`, `device=` keywords).
#[derive(Debug, Clone, Copy, PartialEq, crate::Options)]
pub struct LinearOptions {
    /// Whether the layer has a bias (default true).
    pub(crate) bias: bool,
    /// The parameters' dtype (default: the default dtype).
    pub(crate) dtype: Option<DType>,
    /// The parameters' device (default: [`ferrotorch_core::default_device`], the CPU
    /// unless a `default_device_scope` is open).
    pub(crate) device: Device,
}

impl Default for LinearOptions {
    fn default() -> Self {
        LinearOptions {
            bias: true,
            dtype: None,
            device: ferrotorch_core::default_device(),
        }
    }
}

impl LinearOptions {
    pub(crate) fn tensor_options(&self) -> TensorOptions {
        let o = TensorOptions::new().device(self.device);
        match self.dtype {
            Some(dt) => o.dtype(dt),
            None => o,
        }
    }
}

/// PyTorch's `Linear.reset_parameters`: `kaiming_uniform_(a=sqrt(5))` for
/// the weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias.
fn init_linear(weight: &Tensor, bias: Option<&Tensor>) -> Result<()> {
    init::kaiming_uniform_(weight, FanMode::FanIn, Nonlinearity::LeakyRelu(Some(5f64.sqrt())))?;
    if let Some(b) = bias {
        let (fan_in, _) = init::calculate_fan_in_and_fan_out(weight)?;
        let bound = if fan_in > 0 { 1.0 / (fan_in as f64).sqrt() } else { 0.0 };
        init::uniform_(b, -bound, bound)?;
    }
    Ok(())
}

/// `y = x Wᵀ + b` over the last dim (PyTorch's `nn.Linear`): weight
/// `[out_features, in_features]`, initialised as PyTorch's
/// (`kaiming_uniform_(a=sqrt(5))`, bias U(-1/sqrt(in), 1/sqrt(in))).
#[derive(Module)]
#[module(extra_repr = extra_repr, type_name = kind)]
pub struct Linear {
    /// `[out_features, in_features]`.
    pub weight: Parameter,
    /// `[out_features]`, if the layer has a bias.
    pub bias: Option<Parameter>,
    in_features: usize,
    out_features: usize,
    kind: &'static str,
    state: ModuleState,
}

impl Linear {
    /// A layer with a bias, in the default dtype.
    pub fn new(in_features: usize, out_features: usize) -> Result<Self> {
        Self::with_options(in_features, out_features, LinearOptions::default())
    }

    /// Initialises the weight and bias again as the constructor does
    /// (`reset_parameters()`): after `to_empty`, or to start over.
    pub fn reset_parameters(&self) -> Result<()> {
        let bias = self.bias.as_ref().map(Parameter::tensor);
        ferrotorch_core::autograd::no_grad(|| init_linear(&self.weight.tensor(), bias.as_ref()))
    }

    /// A layer with the given bias, dtype and device.
    pub fn with_options(in_features: usize, out_features: usize, opts: LinearOptions) -> Result<Self> {
        let o = opts.tensor_options();
        let weight = o.empty([out_features, in_features])?;
        let bias = if opts.bias {
            Some(o.empty([out_features])?)
        } else {
            None
        };
        init_linear(&weight, bias.as_ref())?;
        Ok(Linear {
            weight: Parameter::new(weight)?,
            bias: bias.map(Parameter::new).transpose()?,
            in_features,
            out_features,
            kind: "Linear",
            state: ModuleState::default(),
        })
    }

    /// The same layer shown under another type name in reprs
    /// (`MultiheadAttention`'s `NonDynamicallyQuantizableLinear`).
    pub fn renamed(mut self, type_name: &'static str) -> Self {
        self.kind = type_name;
        self
    }

    /// A copy with its own parameter storage (`copy.deepcopy`).
    pub(crate) fn deep_clone(&self) -> Result<Self> {
        use crate::parameter::copy_parameter;
        Ok(Linear {
            weight: copy_parameter(&self.weight)?,
            bias: self.bias.as_ref().map(copy_parameter).transpose()?,
            in_features: self.in_features,
            out_features: self.out_features,
            kind: self.kind,
            state: self.state.clone(),
        })
    }

    fn kind(&self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed(self.kind)
    }

    /// The input size.
    pub fn in_features(&self) -> usize {
        self.in_features
    }

    /// The output size.
    pub fn out_features(&self) -> usize {
        self.out_features
    }

    fn extra_repr(&self) -> String {
        format!(
            "in_features={}, out_features={}, bias={}",
            self.in_features,
            self.out_features,
            py_bool(self.bias.is_some())
        )
    }
}

impl Forward for Linear {
    /// Errors when the last dim of `x` is not the weight's (`in_features`,
    /// or this rank's part of it in a row-parallel layer), naming the
    /// layer and both shapes.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let w = self.weight.tensor();
        let inputs = w.shape().get(1).copied().unwrap_or(self.in_features);
        if x.shape().last() != Some(&inputs) {
            return Err(Error::module(
                self.repr(),
                format!("expected input [*, {inputs}], got {:?}", x.shape()),
            ));
        }
        F::linear(x, &w, self.bias.as_ref().map(Parameter::tensor).as_ref())
    }
}

/// `y = x1ᵀ A x2 + b` (PyTorch's `nn.Bilinear`): weight `[out, in1, in2]`,
/// all parameters U(-1/sqrt(in1), 1/sqrt(in1)).
#[derive(Module)]
#[module(extra_repr = extra_repr)]
pub struct Bilinear {
    /// `[out_features, in1_features, in2_features]`.
    pub weight: Parameter,
    /// `[out_features]`, if the layer has a bias.
    pub bias: Option<Parameter>,
    in1_features: usize,
    in2_features: usize,
    out_features: usize,
    state: ModuleState,
}

impl Bilinear {
    /// A layer with a bias, in the default dtype.
    pub fn new(in1_features: usize, in2_features: usize, out_features: usize) -> Result<Self> {
        Self::with_options(in1_features, in2_features, out_features, LinearOptions::default())
    }

    /// A layer with the given bias, dtype and device.
    pub fn with_options(in1: usize, in2: usize, out: usize, opts: LinearOptions) -> Result<Self> {
        let o = opts.tensor_options();
        let bound = 1.0 / (in1 as f64).sqrt();
        let weight = init::uniform_(&o.empty([out, in1, in2])?, -bound, bound)?;
        let bias = if opts.bias {
            Some(Parameter::new(init::uniform_(&o.empty([out])?, -bound, bound)?)?)
        } else {
            None
        };
        Ok(Bilinear {
            weight: Parameter::new(weight)?,
            bias,
            in1_features: in1,
            in2_features: in2,
            out_features: out,
            state: ModuleState::default(),
        })
    }

    /// The layer on `x1` `[*, in1]` and `x2` `[*, in2]` between the
    /// module's hooks (PyTorch's `bilinear(x1, x2)`; they see `[x1, x2]`);
    /// errors naming the layer and the shapes when they do not fit.
    pub fn call(&self, x1: &Tensor, x2: &Tensor) -> Result<Tensor> {
        self.check(x1, x2)?;
        let args = [x1.clone(), x2.clone()];
        crate::state::call_with_hooks(self, &args, |a| self.apply(&a[0], &a[1]))
    }

    /// [`Bilinear::call`] without the hooks (`bilinear.forward(x1, x2)`).
    pub fn forward(&self, x1: &Tensor, x2: &Tensor) -> Result<Tensor> {
        self.check(x1, x2)?;
        self.apply(x1, x2)
    }

    fn apply(&self, x1: &Tensor, x2: &Tensor) -> Result<Tensor> {
        F::bilinear(
            x1,
            x2,
            &self.weight.tensor(),
            self.bias.as_ref().map(Parameter::tensor).as_ref(),
        )
    }

    fn check(&self, x1: &Tensor, x2: &Tensor) -> Result<()> {
        if x1.shape().last() != Some(&self.in1_features)
            || x2.shape().last() != Some(&self.in2_features)
            || x1.shape()[..x1.ndim() - 1] != x2.shape()[..x2.ndim() - 1]
        {
            return Err(Error::module(
                self.repr(),
                format!(
                    "expected inputs [*, {}] and [*, {}], got {:?} and {:?}",
                    self.in1_features,
                    self.in2_features,
                    x1.shape(),
                    x2.shape()
                ),
            ));
        }
        Ok(())
    }

    fn extra_repr(&self) -> String {
        format!(
            "in1_features={}, in2_features={}, out_features={}, bias={}",
            self.in1_features,
            self.in2_features,
            self.out_features,
            py_bool(self.bias.is_some())
        )
    }
}

/// Returns its input (PyTorch's `nn.Identity`).
#[derive(Module, Default)]
pub struct Identity {
    state: ModuleState,
}

impl Identity {
    /// The identity layer.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Forward for Identity {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }
}
