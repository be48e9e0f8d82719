//! `nn.init`: in-place initialisers with PyTorch's formulas, drawing from
//! the global generator in PyTorch's order, so `manual_seed(0)` then
//! `Linear::new(784, 256)` gives PyTorch's very weights. Each writes under
//! `no_grad` and returns the tensor; the scale arithmetic is Python's
//! (f64, same operation order).

use ferrotorch_core::{Error, Result, Tensor, autograd};

/// The nonlinearities [`calculate_gain`] knows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Nonlinearity {
    /// `linear` (also the conv and conv-transpose names): gain 1.
    Linear,
    /// `sigmoid`: gain 1.
    Sigmoid,
    /// `tanh`: 5/3.
    Tanh,
    /// `relu`: sqrt(2).
    Relu,
    /// `leaky_relu` with its negative slope (`None`: 0.01).
    LeakyRelu(Option<f64>),
    /// `selu`: 3/4.
    Selu,
}

impl Nonlinearity {
    /// PyTorch's name for the nonlinearity (`"leaky_relu"`); `conv1d`,
    /// `conv_transpose2d` and the like are [`Nonlinearity::Linear`].
    /// Errors for an unknown name with PyTorch's message.
    pub fn from_name(name: &str, param: Option<f64>) -> Result<Self> {
        Ok(match name {
            "linear" | "conv1d" | "conv2d" | "conv3d" | "conv_transpose1d" | "conv_transpose2d"
            | "conv_transpose3d" => Nonlinearity::Linear,
            "sigmoid" => Nonlinearity::Sigmoid,
            "tanh" => Nonlinearity::Tanh,
            "relu" => Nonlinearity::Relu,
            "leaky_relu" => Nonlinearity::LeakyRelu(param),
            "selu" => Nonlinearity::Selu,
            _ => {
                return Err(Error::invalid(
                    "calculate_gain",
                    format!("Unsupported nonlinearity {name}"),
                ));
            }
        })
    }
}

/// The recommended gain for `nonlinearity` (`nn.init.calculate_gain`).
pub fn calculate_gain(nonlinearity: Nonlinearity) -> f64 {
    match nonlinearity {
        Nonlinearity::Linear | Nonlinearity::Sigmoid => 1.0,
        Nonlinearity::Tanh => 5.0 / 3.0,
        Nonlinearity::Relu => 2f64.sqrt(),
        Nonlinearity::LeakyRelu(slope) => {
            let s = slope.unwrap_or(0.01);
            (2.0 / (1.0 + s * s)).sqrt()
        }
        Nonlinearity::Selu => 3.0 / 4.0,
    }
}

/// Which fan [`kaiming_uniform_`] / [`kaiming_normal_`] keep the variance of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FanMode {
    /// The forward pass (the default).
    #[default]
    FanIn,
    /// The backward pass.
    FanOut,
}

/// `(fan_in, fan_out)` of a weight: `size(1)` and `size(0)` times the
/// receptive field (the product of the dims after the second). Errors for
/// fewer than 2 dims, with PyTorch's message.
pub fn calculate_fan_in_and_fan_out(t: &Tensor) -> Result<(usize, usize)> {
    let s = t.shape();
    if s.len() < 2 {
        return Err(Error::invalid(
            "init",
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions",
        ));
    }
    let receptive: usize = s[2..].iter().product();
    Ok((s[1] * receptive, s[0] * receptive))
}

fn fan(t: &Tensor, mode: FanMode) -> Result<usize> {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(t)?;
    Ok(match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
    })
}

fn in_place(t: &Tensor, f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
    autograd::no_grad(|| f(&t.detach()))?;
    Ok(t.clone())
}

/// Fills `t` with U(a, b).
pub fn uniform_(t: &Tensor, a: f64, b: f64) -> Result<Tensor> {
    in_place(t, |d| d.uniform_(a, b))
}

/// Fills `t` with N(mean, std²).
pub fn normal_(t: &Tensor, mean: f64, std: f64) -> Result<Tensor> {
    in_place(t, |d| d.normal_(mean, std))
}

/// Fills `t` with `value`.
pub fn constant_(t: &Tensor, value: f64) -> Result<Tensor> {
    in_place(t, |d| d.fill_(value))
}

/// Fills `t` with zeros.
pub fn zeros_(t: &Tensor) -> Result<Tensor> {
    in_place(t, Tensor::zero_)
}

/// Fills `t` with ones.
pub fn ones_(t: &Tensor) -> Result<Tensor> {
    in_place(t, |d| d.fill_(1.0))
}

/// Fills a 2-D `t` with the identity matrix; errors for other ranks.
pub fn eye_(t: &Tensor) -> Result<Tensor> {
    if t.ndim() != 2 {
        return Err(Error::invalid("eye_", "Only tensors with 2 dimensions are supported"));
    }
    let (n, m) = (t.shape()[0], t.shape()[1]);
    in_place(t, |d| {
        d.copy_(&ferrotorch_core::TensorOptions::like(d).eye(n as i64, m as i64)?)
    })
}

/// Xavier/Glorot uniform: U(-a, a) with `a = gain * sqrt(6 / (fan_in + fan_out))`.
pub fn xavier_uniform_(t: &Tensor, gain: f64) -> Result<Tensor> {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(t)?;
    let std = gain * (2.0 / (fan_in + fan_out) as f64).sqrt();
    let a = 3f64.sqrt() * std;
    uniform_(t, -a, a)
}

/// Xavier/Glorot normal: N(0, std²) with `std = gain * sqrt(2 / (fan_in + fan_out))`.
pub fn xavier_normal_(t: &Tensor, gain: f64) -> Result<Tensor> {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(t)?;
    let std = gain * (2.0 / (fan_in + fan_out) as f64).sqrt();
    normal_(t, 0.0, std)
}

/// Kaiming/He uniform: U(-bound, bound) with `bound = gain * sqrt(3 / fan)`
/// (PyTorch's `a` is the slope inside `nonlinearity`, e.g.
/// `Nonlinearity::LeakyRelu(Some(5f64.sqrt()))` for `Linear`). A tensor
/// with a zero-sized dim is left as it is, as in PyTorch.
pub fn kaiming_uniform_(t: &Tensor, mode: FanMode, nonlinearity: Nonlinearity) -> Result<Tensor> {
    if t.shape().contains(&0) {
        return Ok(t.clone());
    }
    let std = calculate_gain(nonlinearity) / (fan(t, mode)? as f64).sqrt();
    let bound = 3f64.sqrt() * std;
    uniform_(t, -bound, bound)
}

/// Kaiming/He normal: N(0, std²) with `std = gain / sqrt(fan)`.
pub fn kaiming_normal_(t: &Tensor, mode: FanMode, nonlinearity: Nonlinearity) -> Result<Tensor> {
    if t.shape().contains(&0) {
        return Ok(t.clone());
    }
    let std = calculate_gain(nonlinearity) / (fan(t, mode)? as f64).sqrt();
    normal_(t, 0.0, std)
}

/// Normal N(mean, std²) truncated to [a, b], by PyTorch 2.15's rejection
/// sampling (same draws, same order): when the interval holds more than
/// 30% of the mass, normal samples redrawn where they fall outside;
/// otherwise uniform candidates on [a, b] accepted with probability
/// `pdf / peak`, rejected ones redrawn.
pub fn trunc_normal_(t: &Tensor, mean: f64, std: f64, a: f64, b: f64) -> Result<Tensor> {
    let norm_cdf = |x: f64| (1.0 + libm::erf(x / 2f64.sqrt())) / 2.0;
    let p = norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std);
    let d = t.detach();
    autograd::no_grad(|| -> Result<()> {
        if p > 0.3 {
            // The bounds as the tensor's dtype represents them.
            let lo = Tensor::scalar_tensor(a.into(), d.dtype()).item::<f64>()?;
            let hi = Tensor::scalar_tensor(b.into(), d.dtype()).item::<f64>()?;
            let mut result = d.normal_(mean, std)?;
            loop {
                let mask = result.lt(lo)?.logical_or(&result.gt(hi)?)?;
                if !mask.any()?.item::<bool>()? {
                    break;
                }
                let fresh = result.empty_like()?.normal_(mean, std)?;
                result = fresh.where_cond(&mask, &result)?;
            }
            d.copy_(&result)?;
        } else {
            let mode = a.max(mean.min(b));
            let log_peak = -0.5 * ((mode - mean) / std).powi(2);
            let candidates = d.empty_like()?;
            let accept = d.empty_like()?;
            let log_pdf = |c: &Tensor| -> Result<()> {
                c.sub_(mean)?.div_(std)?.pow_(2)?.mul_(-0.5)?.sub_(log_peak)?;
                Ok(())
            };
            d.uniform_(a, b)?;
            candidates.copy_(&d)?;
            log_pdf(&candidates)?;
            let mut pending = accept.uniform_(0.0, 1.0)?.log_()?.gt(&candidates)?;
            if pending.any()?.item::<bool>()? {
                let mut result = d.clone();
                loop {
                    candidates.uniform_(a, b)?;
                    result = candidates.where_cond(&pending, &result)?;
                    log_pdf(&candidates)?;
                    let redraw = accept.uniform_(0.0, 1.0)?.log_()?.gt(&candidates)?;
                    pending = redraw.where_cond(&pending, &pending)?;
                    if !pending.any()?.item::<bool>()? {
                        break;
                    }
                }
                d.copy_(&result)?;
            }
        }
        Ok(())
    })?;
    Ok(t.clone())
}

/// A (semi-)orthogonal matrix, scaled by `gain`, as PyTorch's
/// `orthogonal_`: the Q of the QR decomposition of a standard normal
/// matrix, with R's diagonal signs folded in. `t` needs at least 2 dims
/// (trailing dims are flattened).
pub fn orthogonal_(t: &Tensor, gain: f64) -> Result<Tensor> {
    if t.ndim() < 2 {
        return Err(Error::invalid(
            "orthogonal_",
            "Only tensors with 2 or more dimensions are supported",
        ));
    }
    if t.numel() == 0 {
        return Ok(t.clone());
    }
    let rows = t.shape()[0];
    let cols = t.numel() / rows;
    autograd::no_grad(|| -> Result<()> {
        let mut flat = t.new_empty([rows, cols])?.normal_(0.0, 1.0)?;
        if rows < cols {
            flat = flat.t()?;
        }
        let (q, r) = flat.linalg_qr("reduced")?;
        let ph = r.diag(0)?.sign()?;
        let mut q = q.mul(&ph)?;
        if rows < cols {
            q = q.t()?;
        }
        let d = t.detach();
        d.view_as(&q)?.copy_(&q)?;
        d.mul_(gain)?;
        Ok(())
    })?;
    Ok(t.clone())
}
