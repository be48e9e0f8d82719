//! RMSprop (`torch.optim.RMSprop`).

use ferrotorch_core::Tensor;

use crate::error::Result;
use crate::kernel::{Float, update_param, with_flags};
use crate::optimizer::{Algorithm, GroupOptions, Optim, non_negative, state_io, want_bool, want_f64};
use crate::value::{Dict, Value};

/// `torch.optim.RMSprop`'s options, with its defaults.
///
/// ```
/// use ferrotorch::nn::{Linear, Module};
/// use ferrotorch::optim::{RMSprop, RmsPropOptions};
/// let model = Linear::new(4, 2)?;
/// let opt = RMSprop::new(model.parameters(), RmsPropOptions::new().centered(true))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, ferrotorch_nn::Options)]
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
fn body<T: RmsPropElem>(o: &RmsPropOptions) -> impl Fn(&mut [T], &[T], &mut [&mut [T]]) + Sync {
    let k = Consts {
        neg_lr: T::of(-o.lr),
        wd: T::of(o.weight_decay),
        alpha: T::of(o.alpha),
        w: T::of(1.0 - o.alpha),
        eps: T::of(o.eps),
        momentum: T::of(o.momentum),
        use_wd: o.weight_decay != 0.0,
        maximize: o.maximize,
    };
    let (centered, use_m) = (o.centered, o.momentum > 0.0);
    move |p, g, s| {
        let [sq, rest @ ..] = s else { return };
        let mut rest = rest.iter_mut().map(|x| &mut **x);
        let buf = if use_m { rest.next() } else { None };
        let grad_avg = if centered { rest.next() } else { None };
        T::rmsprop(p, g, sq, buf, grad_avg, &k);
    }
}

/// The update's constants in the element type, and its switches.
#[derive(Clone, Copy)]
pub(crate) struct Consts<T> {
    neg_lr: T,
    wd: T,
    alpha: T,
    /// `1 - alpha`.
    w: T,
    eps: T,
    momentum: T,
    use_wd: bool,
    maximize: bool,
}

/// One element: updates `square_avg` (and `grad_avg` when `CENTERED`) and
/// returns the gradient as used and `avg` (the denominator).
#[inline(always)]
fn moments<T: Float, const MAX: bool, const WD: bool, const CENTERED: bool>(
    k: &Consts<T>,
    p: T,
    g: T,
    sq: &mut T,
    ga: &mut T,
) -> (T, T) {
    let mut d = if MAX { -g } else { g };
    if WD {
        d = k.wd.fma(p, d);
    }
    let a = (k.w * d).fma(d, *sq * k.alpha);
    *sq = a;
    let avg = if CENTERED {
        let m = ga.lerp(d, k.w);
        *ga = m;
        (-m).fma(m, a).sqrt()
    } else {
        a.sqrt()
    } + k.eps;
    (d, avg)
}

/// Without momentum: `param = param + (-lr * grad) / avg`. `ga` is
/// `grad_avg` when `CENTERED`, else unused.
#[inline(always)]
fn plain_loop<T: Float, const MAX: bool, const WD: bool, const CENTERED: bool>(
    p: &mut [T],
    g: &[T],
    sq: &mut [T],
    ga: &mut [T],
    k: &Consts<T>,
) {
    if CENTERED {
        for (((p, &g), sq), ga) in p.iter_mut().zip(g).zip(sq.iter_mut()).zip(ga.iter_mut()) {
            let (d, avg) = moments::<T, MAX, WD, true>(k, *p, g, sq, ga);
            *p = *p + (k.neg_lr * d) / avg;
        }
    } else {
        let mut unused = T::of(0.0);
        for ((p, &g), sq) in p.iter_mut().zip(g).zip(sq.iter_mut()) {
            let (d, avg) = moments::<T, MAX, WD, false>(k, *p, g, sq, &mut unused);
            *p = *p + (k.neg_lr * d) / avg;
        }
    }
}

/// With momentum: `buf = buf * momentum + grad / avg` (two roundings),
/// `param = fma(-lr, buf, param)`.
#[inline(always)]
fn momentum_loop<T: Float, const MAX: bool, const WD: bool, const CENTERED: bool>(
    p: &mut [T],
    g: &[T],
    sq: &mut [T],
    ga: &mut [T],
    buf: &mut [T],
    k: &Consts<T>,
) {
    #[inline(always)]
    fn tail<T: Float>(k: &Consts<T>, p: &mut T, buf: &mut T, d: T, avg: T) {
        let nb = *buf * k.momentum + d / avg;
        *buf = nb;
        *p = k.neg_lr.fma(nb, *p);
    }
    if CENTERED {
        let it = p
            .iter_mut()
            .zip(g)
            .zip(sq.iter_mut())
            .zip(ga.iter_mut())
            .zip(buf.iter_mut());
        for ((((p, &g), sq), ga), buf) in it {
            let (d, avg) = moments::<T, MAX, WD, true>(k, *p, g, sq, ga);
            tail(k, p, buf, d, avg);
        }
    } else {
        let mut unused = T::of(0.0);
        for (((p, &g), sq), buf) in p.iter_mut().zip(g).zip(sq.iter_mut()).zip(buf.iter_mut()) {
            let (d, avg) = moments::<T, MAX, WD, false>(k, *p, g, sq, &mut unused);
            tail(k, p, buf, d, avg);
        }
    }
}

/// The loop over one chunk (`buf`: the momentum buffer, `grad_avg`: the
/// centered variant's average), the switches turned into separate loops;
/// inlined into each instruction set's version of [`rmsprop_f32`] /
/// [`rmsprop_f64`].
#[inline(always)]
fn rmsprop_loop<T: Float>(
    p: &mut [T],
    g: &[T],
    sq: &mut [T],
    buf: Option<&mut [T]>,
    grad_avg: Option<&mut [T]>,
    k: &Consts<T>,
) {
    let n = p.len();
    let (g, sq) = (&g[..n], &mut sq[..n]);
    let centered = grad_avg.is_some();
    let ga: &mut [T] = match grad_avg {
        Some(ga) => &mut ga[..n],
        None => &mut [],
    };
    match buf {
        None => with_flags!(plain_loop::<T>(p, g, sq, ga, k); [k.maximize, k.use_wd, centered]),
        Some(buf) => {
            let buf = &mut buf[..n];
            with_flags!(momentum_loop::<T>(p, g, sq, ga, buf, k); [k.maximize, k.use_wd, centered]);
        }
    }
}

ferrotorch_core::multiversion! {
    /// [`rmsprop_loop`] in f32, for the best instruction set of this CPU
    /// (the same bits on every one: each operation is rounded once).
    fn rmsprop_f32(p: &mut [f32], g: &[f32], sq: &mut [f32], buf: Option<&mut [f32]>, grad_avg: Option<&mut [f32]>, k: &Consts<f32>) {
        rmsprop_loop(p, g, sq, buf, grad_avg, k)
    }
}

ferrotorch_core::multiversion! {
    /// [`rmsprop_loop`] in f64.
    fn rmsprop_f64(p: &mut [f64], g: &[f64], sq: &mut [f64], buf: Option<&mut [f64]>, grad_avg: Option<&mut [f64]>, k: &Consts<f64>) {
        rmsprop_loop(p, g, sq, buf, grad_avg, k)
    }
}

/// The element types with a compiled RMSprop loop.
pub(crate) trait RmsPropElem: Float {
    /// Runs the loop over one chunk.
    fn rmsprop(
        p: &mut [Self],
        g: &[Self],
        sq: &mut [Self],
        buf: Option<&mut [Self]>,
        grad_avg: Option<&mut [Self]>,
        k: &Consts<Self>,
    );
}

impl RmsPropElem for f32 {
    fn rmsprop(
        p: &mut [f32],
        g: &[f32],
        sq: &mut [f32],
        buf: Option<&mut [f32]>,
        grad_avg: Option<&mut [f32]>,
        k: &Consts<f32>,
    ) {
        rmsprop_f32(p, g, sq, buf, grad_avg, k)
    }
}

impl RmsPropElem for f64 {
    fn rmsprop(
        p: &mut [f64],
        g: &[f64],
        sq: &mut [f64],
        buf: Option<&mut [f64]>,
        grad_avg: Option<&mut [f64]>,
        k: &Consts<f64>,
    ) {
        rmsprop_f64(p, g, sq, buf, grad_avg, k)
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
