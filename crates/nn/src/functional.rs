//! `nn.functional`: the layers' computations as functions, with
//! PyTorch's keyword defaults. Each is written in core operators (so
//! autograd, the meta device and every backend run it).

use ferrotorch_core::{Error, Result, Tensor, autograd};

/// `x Wᵀ + b` (`F.linear`): `x` `[*, in]`, `weight` `[out, in]`, `bias`
/// `[out]`, composed as PyTorch's (see [`Tensor::linear`]: a 2-d input or
/// a contiguous one with a 1-d bias is one `addmm`, anything else a
/// `matmul` with the bias added in place).
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    x.linear(weight, bias)
}

/// `x1ᵀ A x2 + b` per output (`F.bilinear`): `x1` `[*, in1]`, `x2`
/// `[*, in2]`, `weight` `[out, in1, in2]`, `bias` `[out]`.
pub fn bilinear(x1: &Tensor, x2: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let y = Tensor::einsum("...i,oij,...j->...o", &[x1, weight, x2])?;
    match bias {
        Some(b) => y.add(b),
        None => Ok(y),
    }
}

mod attention;
mod conv_pool;
mod norm_loss;
pub use attention::{SdpaOptions, scaled_dot_product_attention};
pub use conv_pool::*;
pub use norm_loss::*;

/// `max(x, 0)`.
pub fn relu(x: &Tensor) -> Result<Tensor> {
    x.relu()
}

/// `x` where positive, `negative_slope * x` elsewhere (`F.leaky_relu`,
/// default slope 0.01; node `LeakyReluBackward0`). Errors for a non-float
/// input.
pub fn leaky_relu(x: &Tensor, negative_slope: f64) -> Result<Tensor> {
    x.leaky_relu(negative_slope)
}

/// GELU with PyTorch's default, the exact form (`F.gelu(x)`).
pub fn gelu(x: &Tensor) -> Result<Tensor> {
    x.gelu()
}

/// GELU: exact (`approximate='none'`) or the tanh approximation
/// (`F.gelu(x, approximate=...)`).
pub fn gelu_with(x: &Tensor, approximate: GeluApproximate) -> Result<Tensor> {
    match approximate {
        GeluApproximate::None => x.gelu(),
        GeluApproximate::Tanh => x.gelu_tanh(),
    }
}

/// GELU's `approximate` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GeluApproximate {
    /// `x Φ(x)` with the exact normal CDF (`'none'`, the default).
    #[default]
    None,
    /// The tanh approximation (`'tanh'`).
    Tanh,
}

impl GeluApproximate {
    /// PyTorch's spelling: `none` or `tanh`.
    pub fn as_str(self) -> &'static str {
        match self {
            GeluApproximate::None => "none",
            GeluApproximate::Tanh => "tanh",
        }
    }
}

/// `x * sigmoid(x)`.
pub fn silu(x: &Tensor) -> Result<Tensor> {
    x.silu()
}

/// Softmax over `dim`.
pub fn softmax(x: &Tensor, dim: i64) -> Result<Tensor> {
    x.softmax(dim)
}

/// Log-softmax over `dim`.
pub fn log_softmax(x: &Tensor, dim: i64) -> Result<Tensor> {
    x.log_softmax(dim)
}

/// `F.softmax(x, dim, dtype=dtype)`: `x` cast to `dtype` first.
pub fn softmax_dtype(x: &Tensor, dim: i64, dtype: ferrotorch_core::DType) -> Result<Tensor> {
    x.softmax_dtype(dim, dtype)
}

/// `F.log_softmax(x, dim, dtype=dtype)`: `x` cast to `dtype` first.
pub fn log_softmax_dtype(x: &Tensor, dim: i64, dtype: ferrotorch_core::DType) -> Result<Tensor> {
    x.log_softmax_dtype(dim, dtype)
}

/// Dropout (`F.dropout`): in training, zeroes each element with
/// probability `p` and scales the others by `1 / (1 - p)`, drawing the
/// mask as PyTorch's CPU kernel does (`bernoulli_(1 - p)` on a tensor like
/// `x`, then `div_(1 - p)`), so a seed gives PyTorch's mask; the identity
/// when not training or `p` is 0. Errors for `p` outside [0, 1].
pub fn dropout(x: &Tensor, p: f64, training: bool) -> Result<Tensor> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::invalid(
            "dropout",
            format!("dropout probability has to be between 0 and 1, but got {p}"),
        ));
    }
    if p == 0.0 || !training || x.numel() == 0 {
        return Ok(x.clone());
    }
    if p == 1.0 {
        return x.mul(&Tensor::zeros_dtype((), x.dtype())?);
    }
    let noise = autograd::no_grad(|| -> Result<Tensor> {
        let n = x.empty_like()?.bernoulli_(1.0 - p)?;
        n.div_(1.0 - p)?;
        Ok(n)
    })?;
    x.mul(&noise)
}
