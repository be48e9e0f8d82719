//! Adagrad (`torch.optim.Adagrad`).

use ferrotorch_core::Tensor;

use crate::error::Result;
use crate::kernel::{Float, update_param, with_flags};
use crate::optimizer::{Algorithm, GroupOptions, Optim, non_negative, state_io, want_bool, want_f64};
use crate::value::{Dict, Value};

/// `torch.optim.Adagrad`'s options, with its defaults.
///
/// ```
/// use ferrotorch::nn::{Linear, Module};
/// use ferrotorch::optim::{Adagrad, AdagradOptions};
/// let model = Linear::new(4, 2)?;
/// let opt = Adagrad::new(model.parameters(), AdagradOptions::new().lr_decay(1e-3))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, ferrotorch_nn::Options)]
pub struct AdagradOptions {
    /// Learning rate (`1e-2`).
    pub lr: f64,
    /// Learning-rate decay: step `t` uses `lr / (1 + (t - 1) * lr_decay)` (`0`).
    pub lr_decay: f64,
    /// L2 penalty added to the gradient (`0`).
    pub weight_decay: f64,
    /// The starting value of the sum of squared gradients (`0`).
    pub initial_accumulator_value: f64,
    /// Added to the denominator (`1e-10`).
    pub eps: f64,
    /// Maximize the objective instead of minimizing it (`false`).
    pub maximize: bool,
}

impl Default for AdagradOptions {
    fn default() -> Self {
        AdagradOptions {
            lr: 1e-2,
            lr_decay: 0.0,
            weight_decay: 0.0,
            initial_accumulator_value: 0.0,
            eps: 1e-10,
            maximize: false,
        }
    }
}

impl GroupOptions for AdagradOptions {
    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    fn validate(&self) -> Result<()> {
        non_negative("lr", "learning rate", self.lr)?;
        non_negative("lr_decay", "lr_decay value", self.lr_decay)?;
        non_negative("weight_decay", "weight_decay value", self.weight_decay)?;
        non_negative(
            "initial_accumulator_value",
            "initial_accumulator_value value",
            self.initial_accumulator_value,
        )?;
        non_negative("eps", "epsilon value", self.eps)
    }

    fn to_dict(&self) -> Dict {
        let mut d = Dict::new();
        d.insert("lr", self.lr);
        d.insert("lr_decay", self.lr_decay);
        d.insert("eps", self.eps);
        d.insert("weight_decay", self.weight_decay);
        d.insert("initial_accumulator_value", self.initial_accumulator_value);
        d.insert("foreach", Value::None);
        d.insert("maximize", self.maximize);
        d.insert("differentiable", false);
        d.insert("fused", Value::None);
        d
    }

    fn set(&mut self, key: &str, v: &Value) -> Result<bool> {
        match key {
            "lr" => self.lr = want_f64(key, v)?,
            "lr_decay" => self.lr_decay = want_f64(key, v)?,
            "eps" => self.eps = want_f64(key, v)?,
            "weight_decay" => self.weight_decay = want_f64(key, v)?,
            "initial_accumulator_value" => self.initial_accumulator_value = want_f64(key, v)?,
            "maximize" => self.maximize = want_bool(key, v)?,
            "foreach" | "differentiable" | "fused" => {}
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Adagrad's per-parameter state (created with the optimizer, as PyTorch's).
#[derive(Debug)]
pub struct AdagradState {
    /// The number of steps taken (a float32 count, as PyTorch's tensor).
    pub step: f32,
    /// `sum`: the sum of squared gradients.
    pub sum: Tensor,
}

/// The Adagrad algorithm (PyTorch's `_single_tensor_adagrad`, dense gradients).
#[derive(Debug)]
pub struct AdagradAlgorithm;

/// `torch.optim.Adagrad`.
pub type Adagrad = Optim<AdagradAlgorithm>;

/// The per-element update, rounded as ATen's kernels:
///
/// ```text
/// grad = fma(wd, param, grad)          (weight decay)
/// sum = fma(grad, grad, sum)
/// param = param + (-clr * grad) / (sqrt(sum) + eps)
/// ```
fn body<T: AdagradElem>(o: &AdagradOptions, clr: f64) -> impl Fn(&mut [T], &[T], &mut [&mut [T]]) + Sync {
    let k = Consts {
        wd: T::of(o.weight_decay),
        eps: T::of(o.eps),
        neg_clr: T::of(-clr),
        use_wd: o.weight_decay != 0.0,
        maximize: o.maximize,
    };
    move |p, g, s| {
        let [sum, ..] = s else { return };
        T::adagrad(p, g, sum, &k);
    }
}

/// The update's constants in the element type, and its switches.
#[derive(Clone, Copy)]
pub(crate) struct Consts<T> {
    wd: T,
    eps: T,
    neg_clr: T,
    use_wd: bool,
    maximize: bool,
}

/// The loop for one combination of the switches.
#[inline(always)]
fn flagged_loop<T: Float, const MAX: bool, const WD: bool>(p: &mut [T], g: &[T], sum: &mut [T], k: &Consts<T>) {
    for ((p, &g), sum) in p.iter_mut().zip(g).zip(sum.iter_mut()) {
        let mut d = if MAX { -g } else { g };
        if WD {
            d = k.wd.fma(*p, d);
        }
        let acc = d.fma(d, *sum);
        *sum = acc;
        *p = *p + (k.neg_clr * d) / (acc.sqrt() + k.eps);
    }
}

/// The loop over one chunk; inlined into each instruction set's version of
/// [`adagrad_f32`] / [`adagrad_f64`].
#[inline(always)]
fn adagrad_loop<T: Float>(p: &mut [T], g: &[T], sum: &mut [T], k: &Consts<T>) {
    let n = p.len();
    let (g, sum) = (&g[..n], &mut sum[..n]);
    with_flags!(flagged_loop::<T>(p, g, sum, k); [k.maximize, k.use_wd]);
}

ferrotorch_core::multiversion! {
    /// [`adagrad_loop`] in f32, for the best instruction set of this CPU
    /// (the same bits on every one: each operation is rounded once).
    fn adagrad_f32(p: &mut [f32], g: &[f32], sum: &mut [f32], k: &Consts<f32>) {
        adagrad_loop(p, g, sum, k)
    }
}

ferrotorch_core::multiversion! {
    /// [`adagrad_loop`] in f64.
    fn adagrad_f64(p: &mut [f64], g: &[f64], sum: &mut [f64], k: &Consts<f64>) {
        adagrad_loop(p, g, sum, k)
    }
}

/// The element types with a compiled Adagrad loop.
pub(crate) trait AdagradElem: Float {
    /// Runs the loop over one chunk.
    fn adagrad(p: &mut [Self], g: &[Self], sum: &mut [Self], k: &Consts<Self>);
}

impl AdagradElem for f32 {
    fn adagrad(p: &mut [f32], g: &[f32], sum: &mut [f32], k: &Consts<f32>) {
        adagrad_f32(p, g, sum, k)
    }
}

impl AdagradElem for f64 {
    fn adagrad(p: &mut [f64], g: &[f64], sum: &mut [f64], k: &Consts<f64>) {
        adagrad_f64(p, g, sum, k)
    }
}

impl Algorithm for AdagradAlgorithm {
    type Options = AdagradOptions;
    type State = AdagradState;
    const NAME: &'static str = "Adagrad";
    const MOMENTUM_KEY: Option<&'static str> = None;

    fn initial_state(param: &Tensor, o: &AdagradOptions) -> Result<Option<AdagradState>> {
        Ok(Some(AdagradState {
            step: 0.0,
            sum: state_io::full_like(param, o.initial_accumulator_value)?,
        }))
    }

    fn update(
        index: usize,
        o: &AdagradOptions,
        param: &Tensor,
        grad: &Tensor,
        state: &mut Option<AdagradState>,
    ) -> Result<()> {
        if state.is_none() {
            *state = Self::initial_state(param, o)?;
        }
        let Some(st) = state.as_mut() else { return Ok(()) };
        let step = st.step + 1.0;
        let clr = o.lr / (1.0 + (f64::from(step) - 1.0) * o.lr_decay);
        update_param(
            Self::NAME,
            index,
            param,
            grad,
            &[&st.sum],
            body::<f32>(o, clr),
            body::<f64>(o, clr),
        )?;
        st.step = step;
        Ok(())
    }

    fn state_to_dict(s: &AdagradState) -> Dict {
        let mut d = Dict::new();
        d.insert("step", state_io::step_tensor(s.step));
        d.insert("sum", s.sum.clone());
        d
    }

    fn state_from_dict(index: usize, d: &Dict, param: &Tensor, _o: &AdagradOptions) -> Result<AdagradState> {
        Ok(AdagradState {
            step: state_io::read_step(index, d)?,
            sum: state_io::read_tensor(index, d, "sum", param)?,
        })
    }
}
