//! Stochastic gradient descent (`torch.optim.SGD`).

use ferrotorch_core::Tensor;

use crate::error::{Error, Result};
use crate::kernel::{Float, update_param};
use crate::optimizer::{Algorithm, GroupOptions, Optim, non_negative, py_float, state_io, want_bool, want_f64};
use crate::value::{Dict, Value};

/// `torch.optim.SGD`'s options, with its defaults.
///
/// ```
/// use ferrotorch::nn::{Linear, Module};
/// use ferrotorch::optim::{Optimizer, SGD, SgdOptions};
/// let model = Linear::new(4, 2)?;
/// let mut opt = SGD::new(model.parameters(), SgdOptions { lr: 0.1, momentum: 0.9, ..Default::default() })?;
/// opt.step()?; // parameters without gradients are skipped
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SgdOptions {
    /// Learning rate (`1e-3`).
    pub lr: f64,
    /// Momentum factor (`0`).
    pub momentum: f64,
    /// Dampening of the momentum (`0`).
    pub dampening: f64,
    /// L2 penalty added to the gradient (`0`).
    pub weight_decay: f64,
    /// Nesterov momentum (`false`; needs `momentum > 0` and no dampening).
    pub nesterov: bool,
    /// Maximize the objective instead of minimizing it (`false`).
    pub maximize: bool,
}

impl Default for SgdOptions {
    fn default() -> Self {
        SgdOptions {
            lr: 1e-3,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            maximize: false,
        }
    }
}

impl GroupOptions for SgdOptions {
    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    fn validate(&self) -> Result<()> {
        non_negative("lr", "learning rate", self.lr)?;
        non_negative("momentum", "momentum value", self.momentum)?;
        non_negative("weight_decay", "weight_decay value", self.weight_decay)?;
        if self.dampening.is_nan() {
            return Err(Error::hyper(
                "dampening",
                format!("Invalid dampening value: {}", py_float(self.dampening)),
            ));
        }
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(Error::Nesterov);
        }
        Ok(())
    }

    fn to_dict(&self) -> Dict {
        let mut d = Dict::new();
        d.insert("lr", self.lr);
        d.insert("momentum", self.momentum);
        d.insert("dampening", self.dampening);
        d.insert("weight_decay", self.weight_decay);
        d.insert("nesterov", self.nesterov);
        d.insert("maximize", self.maximize);
        d.insert("foreach", Value::None);
        d.insert("differentiable", false);
        d.insert("fused", Value::None);
        d
    }

    fn set(&mut self, key: &str, v: &Value) -> Result<bool> {
        match key {
            "lr" => self.lr = want_f64(key, v)?,
            "momentum" => self.momentum = want_f64(key, v)?,
            "dampening" => self.dampening = want_f64(key, v)?,
            "weight_decay" => self.weight_decay = want_f64(key, v)?,
            "nesterov" => self.nesterov = want_bool(key, v)?,
            "maximize" => self.maximize = want_bool(key, v)?,
            "foreach" | "differentiable" | "fused" => {}
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// SGD's per-parameter state: the momentum buffer (only with momentum).
#[derive(Debug)]
pub struct SgdState {
    /// `momentum_buffer`.
    pub momentum_buffer: Tensor,
}

/// The SGD algorithm (PyTorch's `_single_tensor_sgd`).
#[derive(Debug)]
pub struct SgdAlgorithm;

/// `torch.optim.SGD`.
pub type Sgd = Optim<SgdAlgorithm>;
/// PyTorch's spelling.
pub type SGD = Sgd;

/// The per-element update, rounding as ATen's kernels: `grad.add(param,
/// alpha=wd)` and `param.add_(grad, alpha=-lr)` are fused multiply-adds
/// (ATen's `add` with `alpha`), `buf.mul_(momentum)` is rounded before
/// `add_(grad, alpha=1 - dampening)`; the first step copies the gradient
/// into the buffer.
// The loops index several slices of one length in step.
#[allow(clippy::needless_range_loop)]
fn body<T: Float>(o: &SgdOptions, first: bool) -> impl Fn(&mut [T], &[T], &mut [&mut [T]]) + Sync {
    let (lr, wd, m, damp1) = (
        T::of(-o.lr),
        T::of(o.weight_decay),
        T::of(o.momentum),
        T::of(1.0 - o.dampening),
    );
    let (use_wd, nesterov, maximize) = (o.weight_decay != 0.0, o.nesterov, o.maximize);
    move |p, g, s| {
        let grad = |i: usize, p: T| {
            let d = if maximize { -g[i] } else { g[i] };
            if use_wd { wd.fma(p, d) } else { d }
        };
        match s.first_mut() {
            Some(buf) => {
                for i in 0..p.len() {
                    let d = grad(i, p[i]);
                    let b = if first { d } else { damp1.fma(d, buf[i] * m) };
                    buf[i] = b;
                    let d = if nesterov { m.fma(b, d) } else { b };
                    p[i] = lr.fma(d, p[i]);
                }
            }
            None => {
                for i in 0..p.len() {
                    p[i] = lr.fma(grad(i, p[i]), p[i]);
                }
            }
        }
    }
}

impl Algorithm for SgdAlgorithm {
    type Options = SgdOptions;
    type State = SgdState;
    const NAME: &'static str = "SGD";
    const MOMENTUM_KEY: Option<&'static str> = Some("momentum");

    fn update(index: usize, o: &SgdOptions, param: &Tensor, grad: &Tensor, state: &mut Option<SgdState>) -> Result<()> {
        if o.momentum == 0.0 {
            return update_param(
                Self::NAME,
                index,
                param,
                grad,
                &[],
                body::<f32>(o, false),
                body::<f64>(o, false),
            );
        }
        let first = state.is_none();
        if first {
            *state = Some(SgdState {
                momentum_buffer: state_io::zeros_like(param)?,
            });
        }
        let Some(st) = state.as_ref() else {
            return Ok(());
        };
        let buf = st.momentum_buffer.clone();
        let r = update_param(
            Self::NAME,
            index,
            param,
            grad,
            &[&buf],
            body::<f32>(o, first),
            body::<f64>(o, first),
        );
        if r.is_err() && first {
            *state = None;
        }
        r
    }

    fn state_to_dict(s: &SgdState) -> Dict {
        let mut d = Dict::new();
        d.insert("momentum_buffer", s.momentum_buffer.clone());
        d
    }

    fn state_from_dict(index: usize, d: &Dict, param: &Tensor, _o: &SgdOptions) -> Result<SgdState> {
        Ok(SgdState {
            momentum_buffer: state_io::read_tensor(index, d, "momentum_buffer", param)?,
        })
    }
}
