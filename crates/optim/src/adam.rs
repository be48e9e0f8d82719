//! Adam and AdamW (`torch.optim.Adam`, `torch.optim.AdamW`: in PyTorch 2.x
//! AdamW is Adam with `decoupled_weight_decay=True`).

use ferrotorch_core::Tensor;

use crate::error::{Error, Result};
use crate::kernel::{Float, update_param, with_flags};
use crate::optimizer::{
    Algorithm, GroupOptions, Optim, non_negative, py_float, state_io, want_bool, want_f64, want_pair,
};
use crate::value::{Dict, Value};

/// `torch.optim.Adam`'s options, with its defaults.
///
/// ```
/// use ferrotorch::nn::{Linear, Module};
/// use ferrotorch::optim::{Adam, AdamOptions};
/// let model = Linear::new(4, 2)?;
/// let opt = Adam::new(model.parameters(), AdamOptions::new().lr(1e-2).amsgrad(true))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, ferrotorch_nn::Options)]
pub struct AdamOptions {
    /// Learning rate (`1e-3`).
    pub lr: f64,
    /// Decay rates of the first and second moment averages (`(0.9, 0.999)`).
    pub betas: (f64, f64),
    /// Added to the denominator (`1e-8`).
    pub eps: f64,
    /// Weight decay (`0`): an L2 penalty added to the gradient, or with
    /// `decoupled_weight_decay` the parameter shrunk by `lr * weight_decay`.
    pub weight_decay: f64,
    /// The AMSGrad variant (`false`).
    pub amsgrad: bool,
    /// Maximize the objective instead of minimizing it (`false`).
    pub maximize: bool,
    /// AdamW's decoupled weight decay (`false`).
    pub decoupled_weight_decay: bool,
}

impl Default for AdamOptions {
    fn default() -> Self {
        AdamOptions {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
            maximize: false,
            decoupled_weight_decay: false,
        }
    }
}

/// `torch.optim.AdamW`'s options, with its defaults (as Adam's, but
/// `weight_decay` `1e-2`, always decoupled).
///
/// ```
/// use ferrotorch::nn::{Linear, Module};
/// use ferrotorch::optim::{AdamW, AdamWOptions};
/// let model = Linear::new(4, 2)?;
/// let opt = AdamW::new(model.parameters(), AdamWOptions::new().lr(1e-3))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, ferrotorch_nn::Options)]
pub struct AdamWOptions {
    /// Learning rate (`1e-3`).
    pub lr: f64,
    /// Decay rates of the first and second moment averages (`(0.9, 0.999)`).
    pub betas: (f64, f64),
    /// Added to the denominator (`1e-8`).
    pub eps: f64,
    /// Decoupled weight decay: each step multiplies the parameter by
    /// `1 - lr * weight_decay` (`1e-2`).
    pub weight_decay: f64,
    /// The AMSGrad variant (`false`).
    pub amsgrad: bool,
    /// Maximize the objective instead of minimizing it (`false`).
    pub maximize: bool,
}

impl Default for AdamWOptions {
    fn default() -> Self {
        AdamWOptions {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 1e-2,
            amsgrad: false,
            maximize: false,
        }
    }
}

impl From<&AdamWOptions> for AdamOptions {
    fn from(o: &AdamWOptions) -> Self {
        AdamOptions {
            lr: o.lr,
            betas: o.betas,
            eps: o.eps,
            weight_decay: o.weight_decay,
            amsgrad: o.amsgrad,
            maximize: o.maximize,
            decoupled_weight_decay: true,
        }
    }
}

impl GroupOptions for AdamOptions {
    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    fn validate(&self) -> Result<()> {
        non_negative("lr", "learning rate", self.lr)?;
        non_negative("eps", "epsilon value", self.eps)?;
        for (i, b) in [self.betas.0, self.betas.1].into_iter().enumerate() {
            if !(0.0..1.0).contains(&b) {
                return Err(Error::hyper(
                    "betas",
                    format!("Invalid beta parameter at index {i}: {}", py_float(b)),
                ));
            }
        }
        non_negative("weight_decay", "weight_decay value", self.weight_decay)
    }

    fn to_dict(&self) -> Dict {
        let mut d = Dict::new();
        d.insert("lr", self.lr);
        d.insert(
            "betas",
            Value::Tuple(vec![Value::Float(self.betas.0), Value::Float(self.betas.1)]),
        );
        d.insert("eps", self.eps);
        d.insert("weight_decay", self.weight_decay);
        d.insert("amsgrad", self.amsgrad);
        d.insert("maximize", self.maximize);
        d.insert("foreach", Value::None);
        d.insert("capturable", false);
        d.insert("differentiable", false);
        d.insert("fused", Value::None);
        d.insert("decoupled_weight_decay", self.decoupled_weight_decay);
        d
    }

    fn set(&mut self, key: &str, v: &Value) -> Result<bool> {
        match key {
            "lr" => self.lr = want_f64(key, v)?,
            "betas" => self.betas = want_pair(key, v)?,
            "eps" => self.eps = want_f64(key, v)?,
            "weight_decay" => self.weight_decay = want_f64(key, v)?,
            "amsgrad" => self.amsgrad = want_bool(key, v)?,
            "maximize" => self.maximize = want_bool(key, v)?,
            "decoupled_weight_decay" => self.decoupled_weight_decay = want_bool(key, v)?,
            "foreach" | "capturable" | "differentiable" | "fused" => {}
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl GroupOptions for AdamWOptions {
    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    fn validate(&self) -> Result<()> {
        AdamOptions::from(self).validate()
    }

    fn to_dict(&self) -> Dict {
        AdamOptions::from(self).to_dict()
    }

    fn set(&mut self, key: &str, v: &Value) -> Result<bool> {
        let mut a = AdamOptions::from(&*self);
        let known = a.set(key, v)?;
        // AdamW's decay is always decoupled (PyTorch's `__setstate__` forces it).
        *self = AdamWOptions {
            lr: a.lr,
            betas: a.betas,
            eps: a.eps,
            weight_decay: a.weight_decay,
            amsgrad: a.amsgrad,
            maximize: a.maximize,
        };
        Ok(known)
    }
}

/// Adam's per-parameter state.
#[derive(Debug)]
pub struct AdamState {
    /// The number of steps taken (PyTorch keeps it in a float32 tensor, so
    /// it is counted in `f32`).
    pub step: f32,
    /// `exp_avg`: the first moment average.
    pub exp_avg: Tensor,
    /// `exp_avg_sq`: the second moment average.
    pub exp_avg_sq: Tensor,
    /// `max_exp_avg_sq` (AMSGrad only).
    pub max_exp_avg_sq: Option<Tensor>,
}

/// The Adam algorithm (PyTorch's `_single_tensor_adam`), with coupled or
/// decoupled weight decay.
#[derive(Debug)]
pub struct AdamAlgorithm;

/// The AdamW algorithm: Adam with decoupled weight decay.
#[derive(Debug)]
pub struct AdamWAlgorithm;

/// `torch.optim.Adam`.
pub type Adam = Optim<AdamAlgorithm>;

/// `torch.optim.AdamW`.
pub type AdamW = Optim<AdamWAlgorithm>;

/// The scalars of one step, computed in f64 as PyTorch's Python floats.
struct Scalars {
    lr: f64,
    wd: f64,
    decoupled: bool,
    one_minus_beta1: f64,
    beta2: f64,
    one_minus_beta2: f64,
    bias_correction2_sqrt: f64,
    step_size: f64,
    eps: f64,
    amsgrad: bool,
    maximize: bool,
}

impl Scalars {
    fn new(o: &AdamOptions, step: f32) -> Scalars {
        let step = f64::from(step);
        let (beta1, beta2) = o.betas;
        let bias_correction1 = 1.0 - beta1.powf(step);
        let bias_correction2 = 1.0 - beta2.powf(step);
        // Python's `bias_correction2**0.5` is libm's `pow`; kept a call
        // (a constant 0.5 would be folded into `sqrt`, which can differ).
        let half = std::hint::black_box(0.5);
        Scalars {
            lr: o.lr,
            wd: o.weight_decay,
            decoupled: o.decoupled_weight_decay,
            one_minus_beta1: 1.0 - beta1,
            beta2,
            one_minus_beta2: 1.0 - beta2,
            bias_correction2_sqrt: bias_correction2.powf(half),
            step_size: o.lr / bias_correction1,
            eps: o.eps,
            amsgrad: o.amsgrad,
            maximize: o.maximize,
        }
    }
}

/// The per-element update, each operation rounded as ATen's CPU kernels:
///
/// ```text
/// grad = -grad                       (maximize)
/// param.mul_(1 - lr * wd)            (decoupled)   | grad = fma(wd, param, grad)
/// exp_avg.lerp_(grad, 1 - beta1)     ATen's lerp: an fma from the nearer end
/// exp_avg_sq = fma((1 - beta2) * grad, grad, exp_avg_sq * beta2)
/// max_exp_avg_sq = maximum(max_exp_avg_sq, exp_avg_sq)   (amsgrad)
/// denom = sqrt(v) / bias_correction2_sqrt + eps
/// param = param + (-step_size * exp_avg) / denom
/// ```
///
/// with every Python float converted to the element type first.
fn body<T: AdamElem>(c: &Scalars) -> impl Fn(&mut [T], &[T], &mut [&mut [T]]) + Sync {
    let k = Consts {
        decay: T::of(1.0 - c.lr * c.wd),
        wd: T::of(c.wd),
        w1: T::of(c.one_minus_beta1),
        b2: T::of(c.beta2),
        w2: T::of(c.one_minus_beta2),
        bc2: T::of(c.bias_correction2_sqrt),
        eps: T::of(c.eps),
        neg_step: T::of(-c.step_size),
        l2: c.wd != 0.0 && !c.decoupled,
        decoupled: c.wd != 0.0 && c.decoupled,
        maximize: c.maximize,
    };
    let amsgrad = c.amsgrad;
    move |p, g, s| {
        let [m, v, rest @ ..] = s else { return };
        let vmax = if amsgrad {
            rest.first_mut().map(|x| &mut **x)
        } else {
            None
        };
        T::adam(p, g, m, v, vmax, &k);
    }
}

/// The update's constants in the element type, and its switches.
#[derive(Clone, Copy)]
pub(crate) struct Consts<T> {
    decay: T,
    wd: T,
    w1: T,
    b2: T,
    w2: T,
    bc2: T,
    eps: T,
    neg_step: T,
    /// Weight decay added to the gradient (Adam's L2 form).
    l2: bool,
    /// Weight decay applied to the parameter (AdamW's decoupled form).
    decoupled: bool,
    maximize: bool,
}

/// One element of the update. `second` maps the new exp_avg_sq to the
/// denominator's (itself, or AMSGrad's maximum); the switches are constants
/// (`MAX`: maximize, `L2`: weight decay on the gradient, `DEC`: decoupled
/// weight decay on the parameter), so each combination is its own loop.
#[inline(always)]
fn adam_one<T: Float, const MAX: bool, const L2: bool, const DEC: bool>(
    k: &Consts<T>,
    p: &mut T,
    g: T,
    m: &mut T,
    v: &mut T,
    second: impl FnOnce(T) -> T,
) {
    let mut d = if MAX { -g } else { g };
    let mut x = *p;
    if DEC {
        x = x * k.decay;
    }
    if L2 {
        d = k.wd.fma(x, d);
    }
    *m = m.lerp(d, k.w1);
    let sq = (k.w2 * d).fma(d, *v * k.b2);
    *v = sq;
    let denom = second(sq).sqrt() / k.bc2 + k.eps;
    *p = x + (k.neg_step * *m) / denom;
}

/// The loop over one chunk without AMSGrad.
#[inline(always)]
fn adam_plain<T: Float, const MAX: bool, const L2: bool, const DEC: bool>(
    p: &mut [T],
    g: &[T],
    m: &mut [T],
    v: &mut [T],
    k: &Consts<T>,
) {
    let n = p.len();
    let (g, m, v) = (&g[..n], &mut m[..n], &mut v[..n]);
    for i in 0..n {
        adam_one::<T, MAX, L2, DEC>(k, &mut p[i], g[i], &mut m[i], &mut v[i], |sq| sq);
    }
}

/// The loop over one chunk with AMSGrad's running maximum `mx`.
#[inline(always)]
fn adam_amsgrad<T: Float, const MAX: bool, const L2: bool, const DEC: bool>(
    p: &mut [T],
    g: &[T],
    m: &mut [T],
    v: &mut [T],
    mx: &mut [T],
    k: &Consts<T>,
) {
    let n = p.len();
    let (g, m, v, mx) = (&g[..n], &mut m[..n], &mut v[..n], &mut mx[..n]);
    for i in 0..n {
        adam_one::<T, MAX, L2, DEC>(k, &mut p[i], g[i], &mut m[i], &mut v[i], |sq| {
            mx[i] = mx[i].maximum(sq);
            mx[i]
        });
    }
}

/// The loop over one chunk (`vmax`: AMSGrad's running maximum), inlined
/// into each instruction set's version of [`adam_f32`] / [`adam_f64`].
#[inline(always)]
fn adam_loop<T: Float>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], vmax: Option<&mut [T]>, k: &Consts<T>) {
    match vmax {
        None => with_flags!(adam_plain::<T>(p, g, m, v, k); [k.maximize, k.l2, k.decoupled]),
        Some(mx) => with_flags!(adam_amsgrad::<T>(p, g, m, v, mx, k); [k.maximize, k.l2, k.decoupled]),
    }
}

ferrotorch_core::multiversion! {
    /// [`adam_loop`] in f32, for the best instruction set of this CPU (the
    /// same bits on every one: each operation is rounded once).
    fn adam_f32(p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], vmax: Option<&mut [f32]>, k: &Consts<f32>) {
        adam_loop(p, g, m, v, vmax, k)
    }
}

ferrotorch_core::multiversion! {
    /// [`adam_loop`] in f64.
    fn adam_f64(p: &mut [f64], g: &[f64], m: &mut [f64], v: &mut [f64], vmax: Option<&mut [f64]>, k: &Consts<f64>) {
        adam_loop(p, g, m, v, vmax, k)
    }
}

/// The element types with a compiled Adam loop.
pub(crate) trait AdamElem: Float {
    /// Runs the loop over one chunk.
    fn adam(p: &mut [Self], g: &[Self], m: &mut [Self], v: &mut [Self], vmax: Option<&mut [Self]>, k: &Consts<Self>);
}

impl AdamElem for f32 {
    fn adam(p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], vmax: Option<&mut [f32]>, k: &Consts<f32>) {
        adam_f32(p, g, m, v, vmax, k)
    }
}

impl AdamElem for f64 {
    fn adam(p: &mut [f64], g: &[f64], m: &mut [f64], v: &mut [f64], vmax: Option<&mut [f64]>, k: &Consts<f64>) {
        adam_f64(p, g, m, v, vmax, k)
    }
}

/// One Adam step on one parameter (shared by Adam and AdamW).
fn adam_update(
    name: &'static str,
    index: usize,
    o: &AdamOptions,
    param: &Tensor,
    grad: &Tensor,
    state: &mut Option<AdamState>,
) -> Result<()> {
    if state.is_none() {
        *state = Some(AdamState {
            step: 0.0,
            exp_avg: state_io::zeros_like(param)?,
            exp_avg_sq: state_io::zeros_like(param)?,
            max_exp_avg_sq: None,
        });
    }
    let Some(st) = state.as_mut() else { return Ok(()) };
    if o.amsgrad && st.max_exp_avg_sq.is_none() {
        st.max_exp_avg_sq = Some(state_io::zeros_like(param)?);
    }
    let step = st.step + 1.0;
    let c = Scalars::new(o, step);
    let mut states = vec![&st.exp_avg, &st.exp_avg_sq];
    if o.amsgrad {
        states.extend(st.max_exp_avg_sq.as_ref());
    }
    update_param(name, index, param, grad, &states, body::<f32>(&c), body::<f64>(&c))?;
    st.step = step;
    Ok(())
}

fn adam_state_to_dict(s: &AdamState) -> Dict {
    let mut d = Dict::new();
    d.insert("step", state_io::step_tensor(s.step));
    d.insert("exp_avg", s.exp_avg.clone());
    d.insert("exp_avg_sq", s.exp_avg_sq.clone());
    if let Some(m) = &s.max_exp_avg_sq {
        d.insert("max_exp_avg_sq", m.clone());
    }
    d
}

fn adam_state_from_dict(index: usize, d: &Dict, param: &Tensor, amsgrad: bool) -> Result<AdamState> {
    let max_exp_avg_sq = if amsgrad || d.contains_key("max_exp_avg_sq") {
        Some(state_io::read_tensor(index, d, "max_exp_avg_sq", param)?)
    } else {
        None
    };
    Ok(AdamState {
        step: state_io::read_step(index, d)?,
        exp_avg: state_io::read_tensor(index, d, "exp_avg", param)?,
        exp_avg_sq: state_io::read_tensor(index, d, "exp_avg_sq", param)?,
        max_exp_avg_sq,
    })
}

impl Algorithm for AdamAlgorithm {
    type Options = AdamOptions;
    type State = AdamState;
    const NAME: &'static str = "Adam";
    const MOMENTUM_KEY: Option<&'static str> = Some("betas");

    fn update(
        index: usize,
        o: &AdamOptions,
        param: &Tensor,
        grad: &Tensor,
        state: &mut Option<AdamState>,
    ) -> Result<()> {
        adam_update(Self::NAME, index, o, param, grad, state)
    }

    fn state_to_dict(s: &AdamState) -> Dict {
        adam_state_to_dict(s)
    }

    fn state_from_dict(index: usize, d: &Dict, param: &Tensor, o: &AdamOptions) -> Result<AdamState> {
        adam_state_from_dict(index, d, param, o.amsgrad)
    }
}

impl Algorithm for AdamWAlgorithm {
    type Options = AdamWOptions;
    type State = AdamState;
    const NAME: &'static str = "AdamW";
    const MOMENTUM_KEY: Option<&'static str> = Some("betas");

    fn update(
        index: usize,
        o: &AdamWOptions,
        param: &Tensor,
        grad: &Tensor,
        state: &mut Option<AdamState>,
    ) -> Result<()> {
        adam_update(Self::NAME, index, &AdamOptions::from(o), param, grad, state)
    }

    fn state_to_dict(s: &AdamState) -> Dict {
        adam_state_to_dict(s)
    }

    fn state_from_dict(index: usize, d: &Dict, param: &Tensor, o: &AdamWOptions) -> Result<AdamState> {
        adam_state_from_dict(index, d, param, o.amsgrad)
    }
}
