//! Stochastic gradient descent (`torch.optim.SGD`).

use ferrotorch_core::Tensor;

use crate::error::{Error, Result};
use crate::kernel::{Float, update_param, with_flags};
use crate::optimizer::{Algorithm, GroupOptions, Optim, non_negative, py_float, state_io, want_bool, want_f64};
use crate::value::{Dict, Value};

/// `torch.optim.SGD`'s options, with its defaults.
///
/// ```
/// use ferrotorch::nn::{Linear, Module};
/// use ferrotorch::optim::{Optimizer, SGD, SgdOptions};
/// let model = Linear::new(4, 2)?;
/// let mut opt = SGD::new(model.parameters(), SgdOptions::new().lr(0.1).momentum(0.9))?;
/// opt.step()?; // parameters without gradients are skipped
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, ferrotorch_nn::Options)]
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
fn body<T: SgdElem>(o: &SgdOptions, first: bool) -> impl Fn(&mut [T], &[T], &mut [&mut [T]]) + Sync {
    let k = Consts {
        neg_lr: T::of(-o.lr),
        wd: T::of(o.weight_decay),
        momentum: T::of(o.momentum),
        damp1: T::of(1.0 - o.dampening),
        use_wd: o.weight_decay != 0.0,
        maximize: o.maximize,
        nesterov: o.nesterov,
        first,
    };
    move |p, g, s| T::sgd(p, g, s.first_mut().map(|b| &mut **b), &k)
}

/// The update's constants in the element type, and its switches.
#[derive(Clone, Copy)]
pub(crate) struct Consts<T> {
    neg_lr: T,
    wd: T,
    momentum: T,
    damp1: T,
    use_wd: bool,
    maximize: bool,
    nesterov: bool,
    /// The momentum buffer's first step (it takes the gradient as it is).
    first: bool,
}

/// The gradient as the update uses it: negated (`maximize`), plus the
/// weight decay term (`WD`).
#[inline(always)]
fn grad<T: Float, const MAX: bool, const WD: bool>(k: &Consts<T>, g: T, p: T) -> T {
    let d = if MAX { -g } else { g };
    if WD { k.wd.fma(p, d) } else { d }
}

/// Without momentum: `param = fma(-lr, grad, param)`.
#[inline(always)]
fn plain_loop<T: Float, const MAX: bool, const WD: bool>(p: &mut [T], g: &[T], k: &Consts<T>) {
    for (p, &g) in p.iter_mut().zip(g) {
        *p = k.neg_lr.fma(grad::<T, MAX, WD>(k, g, *p), *p);
    }
}

/// With momentum: the buffer updated (or set, on its `FIRST` step), then
/// the parameter moved along it (`NESTEROV`: along `grad + momentum * buf`).
#[inline(always)]
fn momentum_loop<T: Float, const MAX: bool, const WD: bool, const FIRST: bool, const NESTEROV: bool>(
    p: &mut [T],
    g: &[T],
    buf: &mut [T],
    k: &Consts<T>,
) {
    for ((p, &g), buf) in p.iter_mut().zip(g).zip(buf.iter_mut()) {
        let d = grad::<T, MAX, WD>(k, g, *p);
        let b = if FIRST { d } else { k.damp1.fma(d, *buf * k.momentum) };
        *buf = b;
        let d = if NESTEROV { k.momentum.fma(b, d) } else { b };
        *p = k.neg_lr.fma(d, *p);
    }
}

/// The loop over one chunk, the switches turned into separate loops;
/// inlined into each instruction set's version of [`sgd_f32`] / [`sgd_f64`].
#[inline(always)]
fn sgd_loop<T: Float>(p: &mut [T], g: &[T], buf: Option<&mut [T]>, k: &Consts<T>) {
    let g = &g[..p.len()];
    match buf {
        None => with_flags!(plain_loop::<T>(p, g, k); [k.maximize, k.use_wd]),
        Some(buf) => {
            let buf = &mut buf[..p.len()];
            with_flags!(momentum_loop::<T>(p, g, buf, k); [k.maximize, k.use_wd, k.first, k.nesterov]);
        }
    }
}

ferrotorch_core::multiversion! {
    /// [`sgd_loop`] in f32, for the best instruction set of this CPU (the
    /// same bits on every one: each operation is rounded once).
    fn sgd_f32(p: &mut [f32], g: &[f32], buf: Option<&mut [f32]>, k: &Consts<f32>) {
        sgd_loop(p, g, buf, k)
    }
}

ferrotorch_core::multiversion! {
    /// [`sgd_loop`] in f64.
    fn sgd_f64(p: &mut [f64], g: &[f64], buf: Option<&mut [f64]>, k: &Consts<f64>) {
        sgd_loop(p, g, buf, k)
    }
}

/// The element types with a compiled SGD loop.
pub(crate) trait SgdElem: Float {
    /// Runs the loop over one chunk (`buf`: the momentum buffer's).
    fn sgd(p: &mut [Self], g: &[Self], buf: Option<&mut [Self]>, k: &Consts<Self>);
}

impl SgdElem for f32 {
    fn sgd(p: &mut [f32], g: &[f32], buf: Option<&mut [f32]>, k: &Consts<f32>) {
        sgd_f32(p, g, buf, k)
    }
}

impl SgdElem for f64 {
    fn sgd(p: &mut [f64], g: &[f64], buf: Option<&mut [f64]>, k: &Consts<f64>) {
        sgd_f64(p, g, buf, k)
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
