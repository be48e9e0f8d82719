//! RMSprop (`torch.optim.RMSprop`).

use ferrotorch_core::Tensor;

use crate::error::Result;
use crate::kernel::{Float, update_param};
use crate::optimizer::{Algorithm, GroupOptions, Optim, non_negative, state_io, want_bool, want_f64};
use crate::value::{Dict, Value};

/// `torch.optim.RMSprop`'s options, with its defaults.
///
/// ```
/// use ferrotorch::nn::{Linear, Module};
/// use ferrotorch::optim::{RMSprop, RmsPropOptions};
/// let model = Linear::new(4, 2)?;
/// let opt = RMSprop::new(model.parameters(), RmsPropOptions { centered: true, ..Default::default() })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RmsPropOptions {
    /// Learning rate (`1e-2`).
    pub lr: f64,
    /// Smoothing constant of the squared-gradient average (`0.99`).
    pub alpha: f64,
    /// Added to the denominator (`1e-8`).
    pub eps: f64,
    /// L2 penalty added to the gradient (`0`).
    pub weight_decay: f64,
    /// Momentum factor (`0`).
    pub momentum: f64,
    /// Normalise by the estimated variance of the gradient (`false`).
    pub centered: bool,
    /// Maximize the objective instead of minimizing it (`false`).
    pub maximize: bool,
}

impl Default for RmsPropOptions {
    fn default() -> Self {
        RmsPropOptions {
            lr: 1e-2,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
            maximize: false,
        }
    }
}

impl GroupOptions for RmsPropOptions {
    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    fn validate(&self) -> Result<()> {
        non_negative("lr", "learning rate", self.lr)?;
        non_negative("eps", "epsilon value", self.eps)?;
        non_negative("momentum", "momentum value", self.momentum)?;
        non_negative("weight_decay", "weight_decay value", self.weight_decay)?;
        non_negative("alpha", "alpha value", self.alpha)
    }

    fn to_dict(&self) -> Dict {
        let mut d = Dict::new();
        d.insert("lr", self.lr);
        d.insert("momentum", self.momentum);
        d.insert("alpha", self.alpha);
        d.insert("eps", self.eps);
        d.insert("centered", self.centered);
        d.insert("weight_decay", self.weight_decay);
        d.insert("capturable", false);
        d.insert("foreach", Value::None);
        d.insert("maximize", self.maximize);
        d.insert("differentiable", false);
        d
    }

    fn set(&mut self, key: &str, v: &Value) -> Result<bool> {
        match key {
            "lr" => self.lr = want_f64(key, v)?,
            "momentum" => self.momentum = want_f64(key, v)?,
            "alpha" => self.alpha = want_f64(key, v)?,
            "eps" => self.eps = want_f64(key, v)?,
            "centered" => self.centered = want_bool(key, v)?,
            "weight_decay" => self.weight_decay = want_f64(key, v)?,
            "maximize" => self.maximize = want_bool(key, v)?,
            "capturable" | "foreach" | "differentiable" => {}
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// RMSprop's per-parameter state.
#[derive(Debug)]
pub struct RmsPropState {
    /// The number of steps taken (a float32 count, as PyTorch's tensor).
    pub step: f32,
    /// `square_avg`: the average of squared gradients.
    pub square_avg: Tensor,
    /// `momentum_buffer` (with `momentum > 0`).
    pub momentum_buffer: Option<Tensor>,
    /// `grad_avg` (centered only).
    pub grad_avg: Option<Tensor>,
}

/// The RMSprop algorithm (PyTorch's `_single_tensor_rmsprop`).
#[derive(Debug)]
pub struct RmsPropAlgorithm;

/// `torch.optim.RMSprop`.
pub type RmsProp = Optim<RmsPropAlgorithm>;
/// PyTorch's spelling.
pub type RMSprop = RmsProp;

/// The per-element update, rounded as ATen's kernels:
///
/// ```text
/// grad = fma(wd, param, grad)                          (weight decay)
/// square_avg = fma((1 - alpha) * grad, grad, square_avg * alpha)
/// grad_avg.lerp_(grad, 1 - alpha);  avg = sqrt(fma(-grad_avg, grad_avg, square_avg))   (centered)
/// avg = sqrt(square_avg)                               (otherwise)
/// avg = avg + eps
/// buf = buf * momentum + grad / avg;  param = fma(-lr, buf, param)   (momentum)
/// param = param + (-lr * grad) / avg                   (otherwise)
/// ```
// The loops index several slices of one length in step.
#[allow(clippy::needless_range_loop)]
fn body<T: Float>(o: &RmsPropOptions) -> impl Fn(&mut [T], &[T], &mut [&mut [T]]) + Sync {
    let (lr, wd, alpha, w, eps, mom) = (
        T::of(-o.lr),
        T::of(o.weight_decay),
        T::of(o.alpha),
        T::of(1.0 - o.alpha),
        T::of(o.eps),
        T::of(o.momentum),
    );
    let (use_wd, maximize, centered, use_m) = (o.weight_decay != 0.0, o.maximize, o.centered, o.momentum > 0.0);
    move |p, g, s| {
        let [sq, rest @ ..] = s else { return };
        let (mut buf, mut ga) = (None, None);
        let mut rest = rest.iter_mut();
        if use_m {
            buf = rest.next();
        }
        if centered {
            ga = rest.next();
        }
        for i in 0..p.len() {
            let mut d = if maximize { -g[i] } else { g[i] };
            if use_wd {
                d = wd.fma(p[i], d);
            }
            let a = (w * d).fma(d, sq[i] * alpha);
            sq[i] = a;
            let avg = match ga.as_deref_mut() {
                Some(ga) => {
                    let m = ga[i].lerp(d, w);
                    ga[i] = m;
                    (-m).fma(m, a).sqrt()
                }
                None => a.sqrt(),
            } + eps;
            match buf.as_deref_mut() {
                Some(b) => {
                    let nb = b[i] * mom + d / avg;
                    b[i] = nb;
                    p[i] = lr.fma(nb, p[i]);
                }
                None => p[i] = p[i] + (lr * d) / avg,
            }
        }
    }
}

impl Algorithm for RmsPropAlgorithm {
    type Options = RmsPropOptions;
    type State = RmsPropState;
    const NAME: &'static str = "RMSprop";
    const MOMENTUM_KEY: Option<&'static str> = Some("momentum");

    fn update(
        index: usize,
        o: &RmsPropOptions,
        param: &Tensor,
        grad: &Tensor,
        state: &mut Option<RmsPropState>,
    ) -> Result<()> {
        if state.is_none() {
            *state = Some(RmsPropState {
                step: 0.0,
                square_avg: state_io::zeros_like(param)?,
                momentum_buffer: None,
                grad_avg: None,
            });
        }
        let Some(st) = state.as_mut() else { return Ok(()) };
        if o.momentum > 0.0 && st.momentum_buffer.is_none() {
            st.momentum_buffer = Some(state_io::zeros_like(param)?);
        }
        if o.centered && st.grad_avg.is_none() {
            st.grad_avg = Some(state_io::zeros_like(param)?);
        }
        let mut states = vec![&st.square_avg];
        if o.momentum > 0.0 {
            states.extend(st.momentum_buffer.as_ref());
        }
        if o.centered {
            states.extend(st.grad_avg.as_ref());
        }
        update_param(Self::NAME, index, param, grad, &states, body::<f32>(o), body::<f64>(o))?;
        st.step += 1.0;
        Ok(())
    }

    fn state_to_dict(s: &RmsPropState) -> Dict {
        let mut d = Dict::new();
        d.insert("step", state_io::step_tensor(s.step));
        d.insert("square_avg", s.square_avg.clone());
        if let Some(b) = &s.momentum_buffer {
            d.insert("momentum_buffer", b.clone());
        }
        if let Some(g) = &s.grad_avg {
            d.insert("grad_avg", g.clone());
        }
        d
    }

    fn state_from_dict(index: usize, d: &Dict, param: &Tensor, o: &RmsPropOptions) -> Result<RmsPropState> {
        let opt = |key: &str, needed: bool| -> Result<Option<Tensor>> {
            if needed || d.contains_key(key) {
                state_io::read_tensor(index, d, key, param).map(Some)
            } else {
                Ok(None)
            }
        };
        Ok(RmsPropState {
            step: state_io::read_step(index, d)?,
            square_avg: state_io::read_tensor(index, d, "square_avg", param)?,
            momentum_buffer: opt("momentum_buffer", o.momentum > 0.0)?,
            grad_avg: opt("grad_avg", o.centered)?,
        })
    }
}
