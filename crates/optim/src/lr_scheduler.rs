//! Learning-rate schedulers (`torch.optim.lr_scheduler`).
//!
//! Each scheduler computes PyTorch's values with PyTorch's formulas in the
//! same order of operations (the chainable `get_lr` forms, which update the
//! optimizer's current learning rate step by step, and the closed forms
//! where PyTorch uses them), so the learning rates agree with PyTorch's to
//! the last bit.
//!
//! A scheduler does not hold its optimizer (the optimizer must stay free
//! for `step()`): it is built from `&mut opt` and stepped with it.
//! Building one sets the groups' `initial_lr` and takes PyTorch's initial
//! step, as constructing it does in PyTorch.
//!
//! ```
//! use ferrotorch::nn::{Linear, Module};
//! use ferrotorch::optim::lr_scheduler::{CosineAnnealingLR, LrScheduler};
//! use ferrotorch::optim::{Optimizer, SGD, SgdOptions};
//! let model = Linear::new(3, 1)?;
//! let mut opt = SGD::new(model.parameters(), SgdOptions { lr: 0.1, momentum: 0.9, ..Default::default() })?;
//! let mut sched = CosineAnnealingLR::new(&mut opt, 10, 0.0)?;
//! for _epoch in 0..10 {
//!     // ... forward, backward, opt.step()? ...
//!     sched.step(&mut opt)?;
//! }
//! assert!(sched.get_last_lr()[0] < 1e-12);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::error::{Error, Result};
use crate::optimizer::Optimizer;
use crate::value::{Dict, Value};

/// What every scheduler but [`ReduceLROnPlateau`] offers (PyTorch's
/// `LRScheduler`).
pub trait LrScheduler: Send {
    /// Advances one epoch (or iteration) and sets the optimizer's learning
    /// rates. Call it after `opt.step()`.
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()>;

    /// The learning rates the last step set, one per group.
    fn get_last_lr(&self) -> &[f64];

    /// The index of the last epoch (`last_epoch`: 0 after construction).
    fn last_epoch(&self) -> i64;

    /// The scheduler's state, as PyTorch's `scheduler.state_dict()`
    /// (PyTorch's keys; a `LambdaLR`'s functions are not saved).
    fn state_dict(&self) -> Dict;

    /// Restores a state from [`LrScheduler::state_dict`] (keys present in
    /// `state_dict` are set, as PyTorch's `__dict__.update`).
    fn load_state_dict(&mut self, state_dict: &Dict) -> Result<()>;

    /// PyTorch's `_initial_step`: resets the step count and takes the
    /// initial step (used by [`SequentialLR`]).
    fn initial_step(&mut self, opt: &mut dyn Optimizer) -> Result<()>;

    /// PyTorch's `_update_lr(epoch)`: sets `last_epoch` to `epoch` and the
    /// learning rates to the closed form where the scheduler has one (used
    /// by [`SequentialLR`] at its milestones).
    fn update_lr_at(&mut self, opt: &mut dyn Optimizer, epoch: i64) -> Result<()>;

    /// Moves `last_epoch` one back (PyTorch's `recursive_undo`, used by
    /// [`SequentialLR`]).
    fn undo_epoch(&mut self);
}

/// What a scheduler shares with all others (PyTorch's `LRScheduler`
/// attributes).
#[derive(Debug, Clone)]
pub struct SchedulerBase {
    /// `base_lrs`: each group's `initial_lr`.
    pub base_lrs: Vec<f64>,
    /// `last_epoch`.
    pub last_epoch: i64,
    /// `_step_count`.
    pub step_count: i64,
    /// `_is_initial`: true only during the initial step.
    pub is_initial: bool,
    /// `_last_lr`.
    pub last_lr: Vec<f64>,
}

impl SchedulerBase {
    /// Sets every group's `initial_lr` (unless present) and reads the base
    /// learning rates, as `LRScheduler.__init__` with `last_epoch=-1`.
    fn new(opt: &mut dyn Optimizer) -> Result<SchedulerBase> {
        let mut base_lrs = Vec::new();
        for (g, lr) in opt.lrs().into_iter().enumerate() {
            match opt.hyperparameter(g, "initial_lr").and_then(|v| v.as_f64()) {
                Some(initial) => base_lrs.push(initial),
                None => {
                    opt.set_hyperparameter(g, "initial_lr", Value::Float(lr))?;
                    base_lrs.push(lr);
                }
            }
        }
        Ok(SchedulerBase {
            base_lrs,
            last_epoch: -1,
            step_count: 0,
            is_initial: false,
            last_lr: Vec::new(),
        })
    }

    fn save(&self, d: &mut Dict) {
        d.insert("base_lrs", Value::floats(&self.base_lrs));
        d.insert("last_epoch", self.last_epoch);
        d.insert("_step_count", self.step_count);
        d.insert("_is_initial", false);
        d.insert("_get_lr_called_within_step", false);
        d.insert("_last_lr", Value::floats(&self.last_lr));
    }

    fn load(&mut self, d: &Dict) -> Result<()> {
        if let Some(v) = d.get("base_lrs") {
            self.base_lrs = floats(v, "base_lrs")?;
        }
        if let Some(v) = d.get("last_epoch") {
            self.last_epoch = int(v, "last_epoch")?;
        }
        if let Some(v) = d.get("_step_count") {
            self.step_count = int(v, "_step_count")?;
        }
        if let Some(v) = d.get("_last_lr") {
            self.last_lr = floats(v, "_last_lr")?;
        }
        Ok(())
    }
}

fn bad(key: &str, what: &str) -> Error {
    Error::Scheduler(format!("scheduler state dict: {key:?} is not {what}"))
}

fn floats(v: &Value, key: &str) -> Result<Vec<f64>> {
    v.as_f64_vec().ok_or_else(|| bad(key, "a list of floats"))
}

fn int(v: &Value, key: &str) -> Result<i64> {
    v.as_i64().ok_or_else(|| bad(key, "an int"))
}

fn float(v: &Value, key: &str) -> Result<f64> {
    v.as_f64().ok_or_else(|| bad(key, "a float"))
}

/// `_format_param`: one value per group.
fn per_group(name: &str, n: usize, v: &PerGroup) -> Result<Vec<f64>> {
    match v {
        PerGroup::All(x) => Ok(vec![*x; n]),
        PerGroup::Each(xs) if xs.len() == n => Ok(xs.clone()),
        PerGroup::Each(xs) => Err(Error::Scheduler(format!(
            "{name} must have the same length as optimizer.param_groups. {name} has {} values, param_groups has {n}.",
            xs.len()
        ))),
    }
}

/// A value for every group, or one value per group (PyTorch's float-or-list
/// arguments: `max_lr`, `min_lr`, ...).
#[derive(Debug, Clone, PartialEq)]
pub enum PerGroup {
    /// The same value for every group.
    All(f64),
    /// One value per group, in group order.
    Each(Vec<f64>),
}

impl From<f64> for PerGroup {
    fn from(x: f64) -> Self {
        PerGroup::All(x)
    }
}

impl From<Vec<f64>> for PerGroup {
    fn from(xs: Vec<f64>) -> Self {
        PerGroup::Each(xs)
    }
}

impl From<&[f64]> for PerGroup {
    fn from(xs: &[f64]) -> Self {
        PerGroup::Each(xs.to_vec())
    }
}

/// The rule of one scheduler: its `get_lr` (chainable form), its closed
/// form, and its own state-dict keys.
pub trait Rule: Send {
    /// `get_lr()`: the learning rates for `base.last_epoch`.
    fn get_lr(&mut self, base: &SchedulerBase, opt: &mut dyn Optimizer) -> Result<Vec<f64>>;
    /// `_get_closed_form_lr()`, where PyTorch has one.
    fn closed_form(&self, _base: &SchedulerBase) -> Option<Vec<f64>> {
        None
    }
    /// The rule's own keys, which PyTorch's state dict lists before the base's.
    fn save(&self, d: &mut Dict);
    /// Keys listed after the base's (LambdaLR's `lr_lambdas`).
    fn save_after(&self, _d: &mut Dict) {}
    /// Restores the rule's own keys.
    fn load(&mut self, d: &Dict) -> Result<()>;
}

/// A scheduler: the shared state and a [`Rule`]. [`StepLR`],
/// [`MultiStepLR`], [`ExponentialLR`], [`CosineAnnealingLR`], [`LinearLR`],
/// [`LambdaLR`] and [`OneCycleLR`] are this type with their rule.
pub struct Scheduler<R: Rule> {
    base: SchedulerBase,
    rule: R,
}

impl<R: Rule> std::fmt::Debug for Scheduler<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl<R: Rule> Scheduler<R> {
    /// A scheduler with `rule` over `opt`: sets `initial_lr` and takes the
    /// initial step.
    pub fn with_rule(opt: &mut dyn Optimizer, rule: R) -> Result<Self> {
        let base = SchedulerBase::new(opt)?;
        let mut s = Scheduler { base, rule };
        s.initial_step(opt)?;
        Ok(s)
    }

    /// The shared scheduler state.
    pub fn base(&self) -> &SchedulerBase {
        &self.base
    }

    /// The rule (its parameters).
    pub fn rule(&self) -> &R {
        &self.rule
    }

    fn apply(&mut self, opt: &mut dyn Optimizer, values: Vec<f64>) -> Result<()> {
        if values.len() != opt.num_param_groups() {
            return Err(Error::Scheduler(format!(
                "the scheduler has {} learning rates for an optimizer with {} param groups",
                values.len(),
                opt.num_param_groups()
            )));
        }
        for (g, lr) in values.into_iter().enumerate() {
            opt.set_lr(g, lr)?;
        }
        self.base.last_lr = opt.lrs();
        Ok(())
    }
}

impl<R: Rule> LrScheduler for Scheduler<R> {
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        self.base.step_count += 1;
        self.base.last_epoch += 1;
        let values = self.rule.get_lr(&self.base, opt)?;
        self.apply(opt, values)
    }

    fn get_last_lr(&self) -> &[f64] {
        &self.base.last_lr
    }

    fn last_epoch(&self) -> i64 {
        self.base.last_epoch
    }

    fn state_dict(&self) -> Dict {
        let mut d = Dict::new();
        self.rule.save(&mut d);
        self.base.save(&mut d);
        self.rule.save_after(&mut d);
        d
    }

    fn load_state_dict(&mut self, d: &Dict) -> Result<()> {
        let mut base = self.base.clone();
        base.load(d)?;
        self.rule.load(d)?;
        self.base = base;
        Ok(())
    }

    fn initial_step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        self.base.step_count = 0;
        self.base.is_initial = true;
        let r = self.step(opt);
        self.base.is_initial = false;
        r
    }

    fn update_lr_at(&mut self, opt: &mut dyn Optimizer, epoch: i64) -> Result<()> {
        self.base.last_epoch = epoch;
        let values = match self.rule.closed_form(&self.base) {
            Some(v) => v,
            None => self.rule.get_lr(&self.base, opt)?,
        };
        self.apply(opt, values)
    }

    fn undo_epoch(&mut self) {
        self.base.last_epoch -= 1;
    }
}

/// Python's `a // b` and `a % b` for a positive `b`.
fn floor_div(a: i64, b: i64) -> i64 {
    a.div_euclid(b)
}

/// StepLR's rule.
#[derive(Debug, Clone)]
pub struct StepRule {
    /// `step_size`.
    pub step_size: i64,
    /// `gamma`.
    pub gamma: f64,
}

impl Rule for StepRule {
    fn get_lr(&mut self, b: &SchedulerBase, opt: &mut dyn Optimizer) -> Result<Vec<f64>> {
        if b.last_epoch == 0 || b.last_epoch.rem_euclid(self.step_size) != 0 {
            return Ok(opt.lrs());
        }
        Ok(opt.lrs().into_iter().map(|lr| lr * self.gamma).collect())
    }

    fn closed_form(&self, b: &SchedulerBase) -> Option<Vec<f64>> {
        let k = floor_div(b.last_epoch, self.step_size) as f64;
        Some(b.base_lrs.iter().map(|lr| lr * self.gamma.powf(k)).collect())
    }

    fn save(&self, d: &mut Dict) {
        d.insert("step_size", self.step_size);
        d.insert("gamma", self.gamma);
    }

    fn load(&mut self, d: &Dict) -> Result<()> {
        if let Some(v) = d.get("step_size") {
            self.step_size = int(v, "step_size")?;
        }
        if let Some(v) = d.get("gamma") {
            self.gamma = float(v, "gamma")?;
        }
        Ok(())
    }
}

/// `torch.optim.lr_scheduler.StepLR`: multiplies the learning rate by
/// `gamma` every `step_size` epochs.
pub type StepLR = Scheduler<StepRule>;

impl StepLR {
    /// `StepLR(optimizer, step_size, gamma)` (PyTorch's default `gamma` is `0.1`).
    pub fn new(opt: &mut dyn Optimizer, step_size: i64, gamma: f64) -> Result<Self> {
        if step_size <= 0 {
            return Err(Error::Scheduler(format!(
                "StepLR: step_size must be positive, got {step_size}"
            )));
        }
        Scheduler::with_rule(opt, StepRule { step_size, gamma })
    }
}

/// MultiStepLR's rule.
#[derive(Debug, Clone)]
pub struct MultiStepRule {
    /// The milestones with their multiplicities, in order of first
    /// appearance (PyTorch's `Counter`).
    pub milestones: Vec<(i64, i64)>,
    /// `gamma`.
    pub gamma: f64,
}

impl Rule for MultiStepRule {
    fn get_lr(&mut self, b: &SchedulerBase, opt: &mut dyn Optimizer) -> Result<Vec<f64>> {
        match self.milestones.iter().find(|(m, _)| *m == b.last_epoch) {
            None => Ok(opt.lrs()),
            Some(&(_, count)) => Ok(opt
                .lrs()
                .into_iter()
                .map(|lr| lr * self.gamma.powf(count as f64))
                .collect()),
        }
    }

    fn closed_form(&self, b: &SchedulerBase) -> Option<Vec<f64>> {
        // bisect_right over the sorted milestones with repeats.
        let k: i64 = self
            .milestones
            .iter()
            .filter(|(m, _)| *m <= b.last_epoch)
            .map(|(_, c)| c)
            .sum();
        Some(b.base_lrs.iter().map(|lr| lr * self.gamma.powf(k as f64)).collect())
    }

    fn save(&self, d: &mut Dict) {
        d.insert(
            "milestones",
            Value::IntKeyDict(self.milestones.iter().map(|&(m, c)| (m, Value::Int(c))).collect()),
        );
        d.insert("gamma", self.gamma);
    }

    fn load(&mut self, d: &Dict) -> Result<()> {
        if let Some(v) = d.get("milestones") {
            self.milestones = match v {
                Value::IntKeyDict(items) => items
                    .iter()
                    .map(|(m, c)| c.as_i64().map(|c| (*m, c)))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad("milestones", "a milestone -> count dict"))?,
                _ => return Err(bad("milestones", "a milestone -> count dict")),
            };
        }
        if let Some(v) = d.get("gamma") {
            self.gamma = float(v, "gamma")?;
        }
        Ok(())
    }
}

/// `torch.optim.lr_scheduler.MultiStepLR`: multiplies the learning rate by
/// `gamma` at each milestone (a milestone listed twice, twice).
pub type MultiStepLR = Scheduler<MultiStepRule>;

impl MultiStepLR {
    /// `MultiStepLR(optimizer, milestones, gamma)` (PyTorch's default `gamma` is `0.1`).
    pub fn new(opt: &mut dyn Optimizer, milestones: &[i64], gamma: f64) -> Result<Self> {
        let mut counted: Vec<(i64, i64)> = Vec::new();
        for &m in milestones {
            match counted.iter_mut().find(|(x, _)| *x == m) {
                Some(e) => e.1 += 1,
                None => counted.push((m, 1)),
            }
        }
        Scheduler::with_rule(
            opt,
            MultiStepRule {
                milestones: counted,
                gamma,
            },
        )
    }
}

/// ExponentialLR's rule.
#[derive(Debug, Clone)]
pub struct ExponentialRule {
    /// `gamma`.
    pub gamma: f64,
}

impl Rule for ExponentialRule {
    fn get_lr(&mut self, b: &SchedulerBase, opt: &mut dyn Optimizer) -> Result<Vec<f64>> {
        if b.is_initial {
            return Ok(opt.lrs());
        }
        Ok(opt.lrs().into_iter().map(|lr| lr * self.gamma).collect())
    }

    fn closed_form(&self, b: &SchedulerBase) -> Option<Vec<f64>> {
        Some(
            b.base_lrs
                .iter()
                .map(|lr| lr * self.gamma.powf(b.last_epoch as f64))
                .collect(),
        )
    }

    fn save(&self, d: &mut Dict) {
        d.insert("gamma", self.gamma);
    }

    fn load(&mut self, d: &Dict) -> Result<()> {
        if let Some(v) = d.get("gamma") {
            self.gamma = float(v, "gamma")?;
        }
        Ok(())
    }
}

/// `torch.optim.lr_scheduler.ExponentialLR`: multiplies the learning rate
/// by `gamma` every epoch.
pub type ExponentialLR = Scheduler<ExponentialRule>;

impl ExponentialLR {
    /// `ExponentialLR(optimizer, gamma)`.
    pub fn new(opt: &mut dyn Optimizer, gamma: f64) -> Result<Self> {
        Scheduler::with_rule(opt, ExponentialRule { gamma })
    }
}

/// CosineAnnealingLR's rule.
#[derive(Debug, Clone)]
pub struct CosineAnnealingRule {
    /// `T_max`: half a period, in epochs.
    pub t_max: i64,
    /// `eta_min`: the lowest learning rate.
    pub eta_min: f64,
}

impl Rule for CosineAnnealingRule {
    fn get_lr(&mut self, b: &SchedulerBase, opt: &mut dyn Optimizer) -> Result<Vec<f64>> {
        let (e, t, eta) = (b.last_epoch, self.t_max, self.eta_min);
        let pi = std::f64::consts::PI;
        if b.is_initial {
            return Ok(opt.lrs());
        }
        if b.step_count == 1 && e > 0 {
            return Ok(b
                .base_lrs
                .iter()
                .map(|base| eta + (base - eta) * (1.0 + ((e as f64) * pi / t as f64).cos()) / 2.0)
                .collect());
        }
        if (e - 1 - t).rem_euclid(2 * t) == 0 {
            return Ok(opt
                .lrs()
                .into_iter()
                .zip(&b.base_lrs)
                .map(|(lr, base)| lr + (base - eta) * (1.0 - (pi / t as f64).cos()) / 2.0)
                .collect());
        }
        Ok(opt
            .lrs()
            .into_iter()
            .map(|lr| {
                (1.0 + (pi * e as f64 / t as f64).cos()) / (1.0 + (pi * (e - 1) as f64 / t as f64).cos()) * (lr - eta)
                    + eta
            })
            .collect())
    }

    fn closed_form(&self, b: &SchedulerBase) -> Option<Vec<f64>> {
        let pi = std::f64::consts::PI;
        let (e, t, eta) = (b.last_epoch, self.t_max, self.eta_min);
        Some(
            b.base_lrs
                .iter()
                .map(|base| eta + (base - eta) * (1.0 + (pi * e as f64 / t as f64).cos()) / 2.0)
                .collect(),
        )
    }

    fn save(&self, d: &mut Dict) {
        d.insert("T_max", self.t_max);
        d.insert("eta_min", self.eta_min);
    }

    fn load(&mut self, d: &Dict) -> Result<()> {
        if let Some(v) = d.get("T_max") {
            self.t_max = int(v, "T_max")?;
        }
        if let Some(v) = d.get("eta_min") {
            self.eta_min = float(v, "eta_min")?;
        }
        Ok(())
    }
}

/// `torch.optim.lr_scheduler.CosineAnnealingLR`: cosine annealing from the
/// initial learning rate down to `eta_min` over `T_max` epochs (and back
/// up, periodically, beyond), in PyTorch's recursive form.
pub type CosineAnnealingLR = Scheduler<CosineAnnealingRule>;

impl CosineAnnealingLR {
    /// `CosineAnnealingLR(optimizer, T_max, eta_min)` (PyTorch's default
    /// `eta_min` is `0.0`).
    pub fn new(opt: &mut dyn Optimizer, t_max: i64, eta_min: f64) -> Result<Self> {
        if t_max <= 0 {
            return Err(Error::Scheduler(format!(
                "CosineAnnealingLR: T_max must be positive, got {t_max}"
            )));
        }
        Scheduler::with_rule(opt, CosineAnnealingRule { t_max, eta_min })
    }
}

/// LinearLR's rule.
#[derive(Debug, Clone)]
pub struct LinearRule {
    /// `start_factor`.
    pub start_factor: f64,
    /// `end_factor`.
    pub end_factor: f64,
    /// `total_iters`.
    pub total_iters: i64,
}

impl Rule for LinearRule {
    fn get_lr(&mut self, b: &SchedulerBase, opt: &mut dyn Optimizer) -> Result<Vec<f64>> {
        let (s, e, n) = (self.start_factor, self.end_factor, self.total_iters);
        if b.last_epoch == 0 {
            return Ok(opt.lrs().into_iter().map(|lr| lr * s).collect());
        }
        if b.is_initial || b.last_epoch > n {
            return Ok(opt.lrs());
        }
        let f = 1.0 + (e - s) / (n as f64 * s + (b.last_epoch - 1) as f64 * (e - s));
        Ok(opt.lrs().into_iter().map(|lr| lr * f).collect())
    }

    fn closed_form(&self, b: &SchedulerBase) -> Option<Vec<f64>> {
        let (s, e, n) = (self.start_factor, self.end_factor, self.total_iters);
        let m = n.min(b.last_epoch) as f64;
        Some(b.base_lrs.iter().map(|lr| lr * (s + (e - s) * m / n as f64)).collect())
    }

    fn save(&self, d: &mut Dict) {
        d.insert("start_factor", self.start_factor);
        d.insert("end_factor", self.end_factor);
        d.insert("total_iters", self.total_iters);
    }

    fn load(&mut self, d: &Dict) -> Result<()> {
        if let Some(v) = d.get("start_factor") {
            self.start_factor = float(v, "start_factor")?;
        }
        if let Some(v) = d.get("end_factor") {
            self.end_factor = float(v, "end_factor")?;
        }
        if let Some(v) = d.get("total_iters") {
            self.total_iters = int(v, "total_iters")?;
        }
        Ok(())
    }
}

/// `torch.optim.lr_scheduler.LinearLR`: scales the learning rate by a
/// factor going linearly from `start_factor` to `end_factor` over
/// `total_iters` epochs.
pub type LinearLR = Scheduler<LinearRule>;

impl LinearLR {
    /// `LinearLR(optimizer, start_factor, end_factor, total_iters)`
    /// (PyTorch's defaults: `1/3`, `1.0`, `5`; see [`LinearLR::default_for`]).
    pub fn new(opt: &mut dyn Optimizer, start_factor: f64, end_factor: f64, total_iters: i64) -> Result<Self> {
        if start_factor > 1.0 || start_factor <= 0.0 || start_factor.is_nan() {
            return Err(Error::Scheduler(
                "Starting multiplicative factor expected to be greater than 0 and less or equal to 1.".into(),
            ));
        }
        if !(0.0..=1.0).contains(&end_factor) {
            return Err(Error::Scheduler(
                "Ending multiplicative factor expected to be between 0 and 1.".into(),
            ));
        }
        if total_iters <= 0 {
            return Err(Error::Scheduler(format!(
                "LinearLR: total_iters must be positive, got {total_iters}"
            )));
        }
        Scheduler::with_rule(
            opt,
            LinearRule {
                start_factor,
                end_factor,
                total_iters,
            },
        )
    }

    /// `LinearLR(optimizer)` with PyTorch's defaults (`1/3`, `1.0`, `5`).
    pub fn default_for(opt: &mut dyn Optimizer) -> Result<Self> {
        LinearLR::new(opt, 1.0 / 3.0, 1.0, 5)
    }
}

/// A `LambdaLR` factor function of the epoch.
pub type LrLambda = Box<dyn Fn(i64) -> f64 + Send>;

/// LambdaLR's rule.
pub struct LambdaRule {
    lambdas: Vec<LrLambda>,
}

impl Rule for LambdaRule {
    fn get_lr(&mut self, b: &SchedulerBase, _opt: &mut dyn Optimizer) -> Result<Vec<f64>> {
        Ok(self
            .lambdas
            .iter()
            .zip(&b.base_lrs)
            .map(|(f, base)| base * f(b.last_epoch))
            .collect())
    }

    fn save(&self, _d: &mut Dict) {}

    fn save_after(&self, d: &mut Dict) {
        d.insert("lr_lambdas", Value::List(vec![Value::None; self.lambdas.len()]));
    }

    fn load(&mut self, _d: &Dict) -> Result<()> {
        Ok(())
    }
}

/// `torch.optim.lr_scheduler.LambdaLR`: each group's learning rate is its
/// initial one times a function of the epoch.
pub type LambdaLR = Scheduler<LambdaRule>;

impl LambdaLR {
    /// `LambdaLR(optimizer, lr_lambda)`: one function for every group.
    pub fn new(opt: &mut dyn Optimizer, lr_lambda: impl Fn(i64) -> f64 + Send + Clone + 'static) -> Result<Self> {
        let lambdas = (0..opt.num_param_groups())
            .map(|_| Box::new(lr_lambda.clone()) as LrLambda)
            .collect();
        Scheduler::with_rule(opt, LambdaRule { lambdas })
    }

    /// `LambdaLR(optimizer, [f0, f1, ...])`: one function per group.
    pub fn per_group(opt: &mut dyn Optimizer, lr_lambdas: Vec<LrLambda>) -> Result<Self> {
        if lr_lambdas.len() != opt.num_param_groups() {
            return Err(Error::Scheduler(format!(
                "Expected {} lr_lambdas, but got {}",
                opt.num_param_groups(),
                lr_lambdas.len()
            )));
        }
        Scheduler::with_rule(opt, LambdaRule { lambdas: lr_lambdas })
    }
}

/// OneCycleLR's annealing strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnealStrategy {
    /// Cosine annealing (`"cos"`).
    Cos,
    /// Linear annealing (`"linear"`).
    Linear,
}

impl AnnealStrategy {
    fn name(self) -> &'static str {
        match self {
            AnnealStrategy::Cos => "cos",
            AnnealStrategy::Linear => "linear",
        }
    }

    fn apply(self, start: f64, end: f64, pct: f64) -> f64 {
        match self {
            AnnealStrategy::Cos => {
                let cos_out = (std::f64::consts::PI * pct).cos() + 1.0;
                end + (start - end) / 2.0 * cos_out
            }
            AnnealStrategy::Linear => (end - start) * pct + start,
        }
    }
}

/// `OneCycleLR`'s arguments, with PyTorch's defaults (give `max_lr` and
/// either `total_steps` or `epochs` and `steps_per_epoch`).
#[derive(Debug, Clone, ferrotorch_nn::Options)]
pub struct OneCycleLrOptions {
    /// The peak learning rate, for all groups or per group.
    pub max_lr: PerGroup,
    /// The number of steps of the cycle.
    pub total_steps: Option<i64>,
    /// With `steps_per_epoch`, gives `total_steps = epochs * steps_per_epoch`.
    pub epochs: Option<i64>,
    /// See `epochs`.
    pub steps_per_epoch: Option<i64>,
    /// The fraction of the cycle spent increasing the learning rate (`0.3`).
    pub pct_start: f64,
    /// `"cos"` or `"linear"` (`Cos`).
    pub anneal_strategy: AnnealStrategy,
    /// Cycle the momentum (SGD's `momentum`, Adam's `beta1`) inversely (`true`).
    pub cycle_momentum: bool,
    /// The lowest momentum (`0.85`).
    pub base_momentum: PerGroup,
    /// The highest momentum (`0.95`).
    pub max_momentum: PerGroup,
    /// `initial_lr = max_lr / div_factor` (`25`).
    pub div_factor: f64,
    /// `min_lr = initial_lr / final_div_factor` (`1e4`).
    pub final_div_factor: f64,
    /// Three phases (up, down to `initial_lr`, down to `min_lr`) instead of two (`false`).
    pub three_phase: bool,
}

impl Default for OneCycleLrOptions {
    fn default() -> Self {
        OneCycleLrOptions {
            max_lr: PerGroup::All(0.1),
            total_steps: None,
            epochs: None,
            steps_per_epoch: None,
            pct_start: 0.3,
            anneal_strategy: AnnealStrategy::Cos,
            cycle_momentum: true,
            base_momentum: PerGroup::All(0.85),
            max_momentum: PerGroup::All(0.95),
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: false,
        }
    }
}

/// One phase of a OneCycleLR schedule.
#[derive(Debug, Clone)]
struct Phase {
    /// The last step of the phase (a float for the first phases, an int
    /// for the last, as PyTorch stores them).
    end_step: Value,
    start_lr: &'static str,
    end_lr: &'static str,
    start_momentum: &'static str,
    end_momentum: &'static str,
}

/// OneCycleLR's rule.
#[derive(Debug, Clone)]
pub struct OneCycleRule {
    total_steps: i64,
    phases: Vec<Phase>,
    anneal: AnnealStrategy,
    cycle_momentum: bool,
    use_beta1: bool,
}

fn group_f64(opt: &dyn Optimizer, g: usize, key: &str) -> Result<f64> {
    opt.hyperparameter(g, key)
        .and_then(|v| v.as_f64())
        .ok_or_else(|| Error::Scheduler(format!("param group {g} has no float {key:?}")))
}

/// Sets the momentum of group `g` (`betas[0]` or `momentum`).
fn set_momentum(opt: &mut dyn Optimizer, g: usize, use_beta1: bool, m: f64) -> Result<()> {
    if use_beta1 {
        let betas = opt
            .hyperparameter(g, "betas")
            .and_then(|v| v.as_seq().map(<[Value]>::to_vec))
            .ok_or_else(|| Error::Scheduler(format!("param group {g} has no betas")))?;
        let mut new = vec![Value::Float(m)];
        new.extend(betas.into_iter().skip(1));
        opt.set_hyperparameter(g, "betas", Value::Tuple(new))
    } else {
        opt.set_hyperparameter(g, "momentum", Value::Float(m))
    }
}

impl Rule for OneCycleRule {
    fn get_lr(&mut self, b: &SchedulerBase, opt: &mut dyn Optimizer) -> Result<Vec<f64>> {
        let step_num = b.last_epoch;
        if step_num > self.total_steps {
            return Err(Error::Scheduler(format!(
                "Tried to step {step_num} times. The specified number of total steps is {}",
                self.total_steps
            )));
        }
        let mut lrs = Vec::new();
        for g in 0..opt.num_param_groups() {
            let mut start_step = 0.0;
            let mut computed = None;
            for (i, phase) in self.phases.iter().enumerate() {
                let end_step = phase.end_step.as_f64().unwrap_or(0.0);
                if step_num as f64 <= end_step || i == self.phases.len() - 1 {
                    let pct = (step_num as f64 - start_step) / (end_step - start_step);
                    let lr = self.anneal.apply(
                        group_f64(opt, g, phase.start_lr)?,
                        group_f64(opt, g, phase.end_lr)?,
                        pct,
                    );
                    let m = if self.cycle_momentum {
                        Some(self.anneal.apply(
                            group_f64(opt, g, phase.start_momentum)?,
                            group_f64(opt, g, phase.end_momentum)?,
                            pct,
                        ))
                    } else {
                        None
                    };
                    computed = Some((lr, m));
                    break;
                }
                start_step = end_step;
            }
            let Some((lr, m)) = computed else {
                return Err(Error::Scheduler("OneCycleLR: no phases".into()));
            };
            lrs.push(lr);
            if let Some(m) = m {
                set_momentum(opt, g, self.use_beta1, m)?;
            }
        }
        Ok(lrs)
    }

    fn save(&self, d: &mut Dict) {
        d.insert("total_steps", self.total_steps);
        let phases = self
            .phases
            .iter()
            .map(|p| {
                let mut pd = Dict::new();
                pd.insert("end_step", p.end_step.clone());
                pd.insert("start_lr", p.start_lr);
                pd.insert("end_lr", p.end_lr);
                pd.insert("start_momentum", p.start_momentum);
                pd.insert("end_momentum", p.end_momentum);
                Value::Dict(pd)
            })
            .collect();
        d.insert("_schedule_phases", Value::List(phases));
        d.insert("_anneal_func_type", self.anneal.name());
        d.insert("cycle_momentum", self.cycle_momentum);
        if self.cycle_momentum {
            d.insert("use_beta1", self.use_beta1);
        }
    }

    fn load(&mut self, d: &Dict) -> Result<()> {
        if let Some(v) = d.get("total_steps") {
            self.total_steps = int(v, "total_steps")?;
        }
        if let Some(v) = d.get("_anneal_func_type") {
            self.anneal = match v.as_str() {
                Some("cos") => AnnealStrategy::Cos,
                Some("linear") => AnnealStrategy::Linear,
                _ => return Err(bad("_anneal_func_type", "\"cos\" or \"linear\"")),
            };
        }
        if let Some(v) = d.get("cycle_momentum") {
            self.cycle_momentum = v.as_bool().ok_or_else(|| bad("cycle_momentum", "a bool"))?;
        }
        if let Some(v) = d.get("use_beta1") {
            self.use_beta1 = v.as_bool().ok_or_else(|| bad("use_beta1", "a bool"))?;
        }
        if let Some(v) = d.get("_schedule_phases") {
            let items = v.as_seq().ok_or_else(|| bad("_schedule_phases", "a list"))?;
            if items.len() != self.phases.len() {
                return Err(bad("_schedule_phases", "a list of this schedule's phases"));
            }
            for (p, item) in self.phases.iter_mut().zip(items) {
                let end = item
                    .as_dict()
                    .and_then(|d| d.get("end_step"))
                    .filter(|e| e.as_f64().is_some())
                    .ok_or_else(|| bad("_schedule_phases", "a list of phase dicts"))?;
                p.end_step = end.clone();
            }
        }
        Ok(())
    }
}

/// `torch.optim.lr_scheduler.OneCycleLR`: the 1cycle policy (learning rate
/// up from `max_lr / div_factor` to `max_lr`, then down to
/// `initial_lr / final_div_factor`, momentum the other way), stepped once
/// per batch.
pub type OneCycleLR = Scheduler<OneCycleRule>;

impl OneCycleLR {
    /// `OneCycleLR(optimizer, max_lr, total_steps, ...)`; writes
    /// `initial_lr`, `max_lr`, `min_lr` (and with `cycle_momentum`
    /// `max_momentum`, `base_momentum` and the momentum itself) into every
    /// group, as PyTorch does.
    ///
    /// Errors (PyTorch's messages): no `total_steps` nor `epochs` and
    /// `steps_per_epoch`, non-positive counts, `pct_start` outside `[0, 1]`,
    /// a per-group list of the wrong length, momentum cycling on an
    /// optimizer without momentum or betas.
    pub fn new(opt: &mut dyn Optimizer, o: OneCycleLrOptions) -> Result<Self> {
        let total_steps = match (o.total_steps, o.epochs, o.steps_per_epoch) {
            (Some(t), _, _) => {
                if t <= 0 {
                    return Err(Error::Scheduler(format!(
                        "Expected positive integer total_steps, but got {t}"
                    )));
                }
                t
            }
            (None, Some(e), Some(s)) => {
                if e <= 0 {
                    return Err(Error::Scheduler(format!(
                        "Expected positive integer epochs, but got {e}"
                    )));
                }
                if s <= 0 {
                    return Err(Error::Scheduler(format!(
                        "Expected positive integer steps_per_epoch, but got {s}"
                    )));
                }
                e * s
            }
            _ => {
                return Err(Error::Scheduler(
                    "You must define either total_steps OR (epochs AND steps_per_epoch)".into(),
                ));
            }
        };
        let pct = o.pct_start;
        let t = total_steps as f64;
        let phase = |end_step: Value, lr: (&'static str, &'static str), m: (&'static str, &'static str)| Phase {
            end_step,
            start_lr: lr.0,
            end_lr: lr.1,
            start_momentum: m.0,
            end_momentum: m.1,
        };
        let phases = if o.three_phase {
            vec![
                phase(
                    Value::Float(pct * t - 1.0),
                    ("initial_lr", "max_lr"),
                    ("max_momentum", "base_momentum"),
                ),
                phase(
                    Value::Float(2.0 * pct * t - 2.0),
                    ("max_lr", "initial_lr"),
                    ("base_momentum", "max_momentum"),
                ),
                phase(
                    Value::Int(total_steps - 1),
                    ("initial_lr", "min_lr"),
                    ("max_momentum", "max_momentum"),
                ),
            ]
        } else {
            vec![
                phase(
                    Value::Float(pct * t - 1.0),
                    ("initial_lr", "max_lr"),
                    ("max_momentum", "base_momentum"),
                ),
                phase(
                    Value::Int(total_steps - 1),
                    ("max_lr", "min_lr"),
                    ("base_momentum", "max_momentum"),
                ),
            ]
        };
        if !(0.0..=1.0).contains(&pct) {
            return Err(Error::Scheduler(format!(
                "Expected float between 0 and 1 pct_start, but got {}",
                crate::optimizer::py_float(pct)
            )));
        }
        let n = opt.num_param_groups();
        let max_lrs = per_group("max_lr", n, &o.max_lr)?;
        let mut use_beta1 = false;
        let mut momenta = None;
        if o.cycle_momentum {
            let defaults = opt.defaults_dict();
            if !defaults.contains_key("momentum") && !defaults.contains_key("betas") {
                return Err(Error::Scheduler(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option enabled".into(),
                ));
            }
            use_beta1 = defaults.contains_key("betas");
            momenta = Some((
                per_group("max_momentum", n, &o.max_momentum)?,
                per_group("base_momentum", n, &o.base_momentum)?,
            ));
        }
        for (g, max_lr) in max_lrs.iter().enumerate() {
            let initial = max_lr / o.div_factor;
            opt.set_hyperparameter(g, "initial_lr", Value::Float(initial))?;
            opt.set_hyperparameter(g, "max_lr", Value::Float(*max_lr))?;
            opt.set_hyperparameter(g, "min_lr", Value::Float(initial / o.final_div_factor))?;
        }
        if let Some((max_m, base_m)) = &momenta {
            for g in 0..n {
                set_momentum(opt, g, use_beta1, max_m[g])?;
                opt.set_hyperparameter(g, "max_momentum", Value::Float(max_m[g]))?;
                opt.set_hyperparameter(g, "base_momentum", Value::Float(base_m[g]))?;
            }
        }
        Scheduler::with_rule(
            opt,
            OneCycleRule {
                total_steps,
                phases,
                anneal: o.anneal_strategy,
                cycle_momentum: o.cycle_momentum,
                use_beta1,
            },
        )
    }
}

/// ReduceLROnPlateau's `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlateauMode {
    /// Lower is better (`"min"`).
    Min,
    /// Higher is better (`"max"`).
    Max,
}

/// ReduceLROnPlateau's `threshold_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdMode {
    /// Relative to the best value (`"rel"`).
    Rel,
    /// Absolute (`"abs"`).
    Abs,
}

/// `ReduceLROnPlateau`'s arguments, with PyTorch's defaults.
#[derive(Debug, Clone, ferrotorch_nn::Options)]
pub struct ReduceLrOnPlateauOptions {
    /// `Min` (`"min"`) or `Max`.
    pub mode: PlateauMode,
    /// The factor the learning rate is multiplied by (`0.1`; must be `< 1`).
    pub factor: f64,
    /// Epochs without improvement before reducing (`10`).
    pub patience: i64,
    /// What counts as an improvement (`1e-4`).
    pub threshold: f64,
    /// `Rel` (`"rel"`) or `Abs`.
    pub threshold_mode: ThresholdMode,
    /// Epochs to wait after a reduction (`0`).
    pub cooldown: i64,
    /// The lowest learning rate, for all groups or per group (`0`).
    pub min_lr: PerGroup,
    /// Smaller reductions are skipped (`1e-8`).
    pub eps: f64,
}

impl Default for ReduceLrOnPlateauOptions {
    fn default() -> Self {
        ReduceLrOnPlateauOptions {
            mode: PlateauMode::Min,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            threshold_mode: ThresholdMode::Rel,
            cooldown: 0,
            min_lr: PerGroup::All(0.0),
            eps: 1e-8,
        }
    }
}

/// `torch.optim.lr_scheduler.ReduceLROnPlateau`: reduces the learning rate
/// when a metric stops improving. Stepped with the metric:
/// `sched.step(&mut opt, val_loss)`.
#[derive(Debug, Clone)]
pub struct ReduceLROnPlateau {
    o: ReduceLrOnPlateauOptions,
    default_min_lr: Option<f64>,
    min_lrs: Vec<f64>,
    last_epoch: i64,
    last_lr: Vec<f64>,
    best: f64,
    cooldown_counter: i64,
    num_bad_epochs: i64,
}

impl ReduceLROnPlateau {
    /// `ReduceLROnPlateau(optimizer, ...)`. Errors: `factor >= 1`, a
    /// per-group `min_lr` of the wrong length (PyTorch's messages).
    pub fn new(opt: &mut dyn Optimizer, o: ReduceLrOnPlateauOptions) -> Result<Self> {
        if o.factor >= 1.0 || o.factor.is_nan() {
            return Err(Error::Scheduler("Factor should be < 1.0.".into()));
        }
        let n = opt.num_param_groups();
        let (default_min_lr, min_lrs) = match &o.min_lr {
            PerGroup::All(x) => (Some(*x), vec![*x; n]),
            PerGroup::Each(xs) if xs.len() == n => (None, xs.clone()),
            PerGroup::Each(xs) => {
                return Err(Error::Scheduler(format!("expected {n} min_lrs, got {}", xs.len())));
            }
        };
        let best = Self::worse(o.mode);
        Ok(ReduceLROnPlateau {
            o,
            default_min_lr,
            min_lrs,
            last_epoch: 0,
            last_lr: opt.lrs(),
            best,
            cooldown_counter: 0,
            num_bad_epochs: 0,
        })
    }

    fn worse(mode: PlateauMode) -> f64 {
        match mode {
            PlateauMode::Min => f64::INFINITY,
            PlateauMode::Max => f64::NEG_INFINITY,
        }
    }

    fn is_better(&self, a: f64, best: f64) -> bool {
        match (self.o.mode, self.o.threshold_mode) {
            (PlateauMode::Min, ThresholdMode::Rel) => a < best * (1.0 - self.o.threshold),
            (PlateauMode::Min, ThresholdMode::Abs) => a < best - self.o.threshold,
            (PlateauMode::Max, ThresholdMode::Rel) => a > best * (self.o.threshold + 1.0),
            (PlateauMode::Max, ThresholdMode::Abs) => a > best + self.o.threshold,
        }
    }

    /// One epoch with the metric's value: counts bad epochs and reduces
    /// every group's learning rate (not below its `min_lr`) after
    /// `patience` of them.
    pub fn step(&mut self, opt: &mut dyn Optimizer, metric: f64) -> Result<()> {
        let epoch = self.last_epoch + 1;
        self.last_epoch = epoch;
        if self.is_better(metric, self.best) {
            self.best = metric;
            self.num_bad_epochs = 0;
        } else {
            self.num_bad_epochs += 1;
        }
        if self.cooldown_counter > 0 {
            self.cooldown_counter -= 1;
            self.num_bad_epochs = 0;
        }
        if self.num_bad_epochs > self.o.patience {
            self.reduce_lr(opt)?;
            self.cooldown_counter = self.o.cooldown;
            self.num_bad_epochs = 0;
        }
        self.last_lr = opt.lrs();
        Ok(())
    }

    fn reduce_lr(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        let n = opt.num_param_groups();
        if n != self.min_lrs.len() {
            match self.default_min_lr {
                None => {
                    return Err(Error::Scheduler(format!(
                        "The number of param groups in the `optimizer` ({n}) differs from when \
                         `ReduceLROnPlateau` was initialized ({}), usually due to a new param group being \
                         added to the optimizer. Please modify the `min_lrs` field to match the length of the \
                         `optimizer` param groups.",
                        self.min_lrs.len()
                    )));
                }
                Some(m) => self.min_lrs = vec![m; n],
            }
        }
        for (g, old) in opt.lrs().into_iter().enumerate() {
            let new = (old * self.o.factor).max(self.min_lrs[g]);
            if old - new > self.o.eps {
                opt.set_lr(g, new)?;
            }
        }
        Ok(())
    }

    /// The learning rates after the last step.
    pub fn get_last_lr(&self) -> &[f64] {
        &self.last_lr
    }

    /// The number of epochs stepped.
    pub fn last_epoch(&self) -> i64 {
        self.last_epoch
    }

    /// The best metric value so far.
    pub fn best(&self) -> f64 {
        self.best
    }

    /// Epochs since the last improvement (`num_bad_epochs`).
    pub fn num_bad_epochs(&self) -> i64 {
        self.num_bad_epochs
    }

    /// PyTorch's state dict keys and values.
    pub fn state_dict(&self) -> Dict {
        let mut d = Dict::new();
        d.insert("factor", self.o.factor);
        d.insert("default_min_lr", self.default_min_lr.map_or(Value::None, Value::Float));
        d.insert("min_lrs", Value::floats(&self.min_lrs));
        d.insert("patience", self.o.patience);
        d.insert("cooldown", self.o.cooldown);
        d.insert("eps", self.o.eps);
        d.insert("last_epoch", self.last_epoch);
        d.insert("_last_lr", Value::floats(&self.last_lr));
        d.insert("mode_worse", Self::worse(self.o.mode));
        d.insert(
            "mode",
            match self.o.mode {
                PlateauMode::Min => "min",
                PlateauMode::Max => "max",
            },
        );
        d.insert("threshold", self.o.threshold);
        d.insert(
            "threshold_mode",
            match self.o.threshold_mode {
                ThresholdMode::Rel => "rel",
                ThresholdMode::Abs => "abs",
            },
        );
        d.insert("best", self.best);
        d.insert("cooldown_counter", self.cooldown_counter);
        d.insert("num_bad_epochs", self.num_bad_epochs);
        d
    }

    /// Restores a state from [`ReduceLROnPlateau::state_dict`].
    pub fn load_state_dict(&mut self, d: &Dict) -> Result<()> {
        let mut s = self.clone();
        for (k, v) in d.iter() {
            match k {
                "factor" => s.o.factor = float(v, k)?,
                "default_min_lr" => {
                    s.default_min_lr = if matches!(v, Value::None) {
                        None
                    } else {
                        Some(float(v, k)?)
                    }
                }
                "min_lrs" => s.min_lrs = floats(v, k)?,
                "patience" => s.o.patience = int(v, k)?,
                "cooldown" => s.o.cooldown = int(v, k)?,
                "eps" => s.o.eps = float(v, k)?,
                "last_epoch" => s.last_epoch = int(v, k)?,
                "_last_lr" => s.last_lr = floats(v, k)?,
                "mode" => {
                    s.o.mode = match v.as_str() {
                        Some("min") => PlateauMode::Min,
                        Some("max") => PlateauMode::Max,
                        _ => return Err(Error::Scheduler(format!("mode {v:?} is unknown!"))),
                    }
                }
                "threshold" => s.o.threshold = float(v, k)?,
                "threshold_mode" => {
                    s.o.threshold_mode = match v.as_str() {
                        Some("rel") => ThresholdMode::Rel,
                        Some("abs") => ThresholdMode::Abs,
                        _ => return Err(Error::Scheduler(format!("threshold mode {v:?} is unknown!"))),
                    }
                }
                "best" => s.best = float(v, k)?,
                "cooldown_counter" => s.cooldown_counter = int(v, k)?,
                "num_bad_epochs" => s.num_bad_epochs = int(v, k)?,
                _ => {}
            }
        }
        *self = s;
        Ok(())
    }
}

/// `torch.optim.lr_scheduler.SequentialLR`: runs one scheduler after
/// another, switching at the milestones.
///
/// ```
/// use ferrotorch::nn::{Linear, Module};
/// use ferrotorch::optim::lr_scheduler::{CosineAnnealingLR, LinearLR, LrScheduler, SequentialLR};
/// use ferrotorch::optim::{SGD, SgdOptions};
/// let model = Linear::new(3, 1)?;
/// let mut opt = SGD::new(model.parameters(), SgdOptions::new().lr(0.1))?;
/// let warmup = LinearLR::new(&mut opt, 0.1, 1.0, 5)?;
/// let cosine = CosineAnnealingLR::new(&mut opt, 95, 0.0)?;
/// let mut sched = SequentialLR::new(&mut opt, vec![Box::new(warmup), Box::new(cosine)], vec![5])?;
/// assert!((sched.get_last_lr()[0] - 0.01).abs() < 1e-15);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SequentialLR {
    schedulers: Vec<Box<dyn LrScheduler>>,
    milestones: Vec<i64>,
    last_epoch: i64,
    last_lr: Vec<f64>,
    /// An enclosing `SequentialLR` took this one's initial step (PyTorch's
    /// `_initial_step` then leaves `_step_count` and `_is_initial` in its
    /// state dict).
    initial_stepped: bool,
}

impl std::fmt::Debug for SequentialLR {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SequentialLR")
            .field("milestones", &self.milestones)
            .field("last_epoch", &self.last_epoch)
            .field("last_lr", &self.last_lr)
            .finish_non_exhaustive()
    }
}

impl SequentialLR {
    /// `SequentialLR(optimizer, schedulers, milestones)`: the schedulers
    /// must have been built on `opt`; resets the learning rates to the
    /// groups' `initial_lr` and takes the first scheduler's initial step.
    pub fn new(opt: &mut dyn Optimizer, schedulers: Vec<Box<dyn LrScheduler>>, milestones: Vec<i64>) -> Result<Self> {
        if schedulers.is_empty() {
            return Err(Error::Scheduler(
                "SequentialLR expects at least one scheduler, but got no scheduler.".into(),
            ));
        }
        if milestones.len() != schedulers.len() - 1 {
            return Err(Error::Scheduler(format!(
                "Sequential Schedulers expects number of schedulers provided to be one more than the number of \
                 milestone points, but got number of schedulers {} and the number of milestones to be equal to {}",
                schedulers.len(),
                milestones.len()
            )));
        }
        let mut s = SequentialLR {
            schedulers,
            milestones,
            last_epoch: 0,
            last_lr: Vec::new(),
            initial_stepped: false,
        };
        for g in 0..opt.num_param_groups() {
            let initial = group_f64(opt, g, "initial_lr")?;
            opt.set_lr(g, initial)?;
        }
        s.undo_epoch();
        let idx = s.index(0);
        s.schedulers[idx].initial_step(opt)?;
        s.last_lr = s.schedulers[idx].get_last_lr().to_vec();
        Ok(s)
    }

    /// `bisect_right(milestones, epoch)`.
    fn index(&self, epoch: i64) -> usize {
        self.milestones.iter().take_while(|&&m| m <= epoch).count()
    }
}

impl LrScheduler for SequentialLR {
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        self.last_epoch += 1;
        let idx = self.index(self.last_epoch);
        if idx > 0 && self.milestones[idx - 1] == self.last_epoch {
            self.schedulers[idx].update_lr_at(opt, 0)?;
        } else {
            self.schedulers[idx].step(opt)?;
        }
        self.last_lr = self.schedulers[idx].get_last_lr().to_vec();
        Ok(())
    }

    fn get_last_lr(&self) -> &[f64] {
        &self.last_lr
    }

    fn last_epoch(&self) -> i64 {
        self.last_epoch
    }

    fn state_dict(&self) -> Dict {
        let mut d = Dict::new();
        d.insert(
            "_milestones",
            Value::List(self.milestones.iter().map(|&m| Value::Int(m)).collect()),
        );
        d.insert("last_epoch", self.last_epoch);
        d.insert("_last_lr", Value::floats(&self.last_lr));
        d.insert(
            "_schedulers",
            Value::List(self.schedulers.iter().map(|s| Value::Dict(s.state_dict())).collect()),
        );
        if self.initial_stepped {
            // `SequentialLR.step` never counts steps: `_initial_step`'s 0 stays.
            d.insert("_step_count", 0i64);
            d.insert("_is_initial", false);
        }
        d
    }

    fn load_state_dict(&mut self, d: &Dict) -> Result<()> {
        if let Some(v) = d.get("_schedulers") {
            let items = v.as_seq().ok_or_else(|| bad("_schedulers", "a list"))?;
            if items.len() != self.schedulers.len() {
                return Err(bad("_schedulers", "a list with one state per scheduler"));
            }
            for (s, item) in self.schedulers.iter_mut().zip(items) {
                s.load_state_dict(item.as_dict().ok_or_else(|| bad("_schedulers", "a list of dicts"))?)?;
            }
        }
        if let Some(v) = d.get("_milestones") {
            self.milestones = v
                .as_seq()
                .and_then(|m| m.iter().map(Value::as_i64).collect())
                .ok_or_else(|| bad("_milestones", "a list of ints"))?;
        }
        if let Some(v) = d.get("last_epoch") {
            self.last_epoch = int(v, "last_epoch")?;
        }
        if let Some(v) = d.get("_last_lr") {
            self.last_lr = floats(v, "_last_lr")?;
        }
        if d.get("_step_count").is_some() {
            self.initial_stepped = true;
        }
        Ok(())
    }

    fn initial_step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        self.initial_stepped = true;
        self.step(opt)
    }

    /// A `SequentialLR` has no closed form to restart at: PyTorch's
    /// `_update_lr(0)` raises `NotImplementedError` when an enclosing
    /// `SequentialLR` reaches a milestone that starts this one; this says so.
    fn update_lr_at(&mut self, _opt: &mut dyn Optimizer, _epoch: i64) -> Result<()> {
        Err(Error::Scheduler(
            "a SequentialLR cannot be started at a milestone of an enclosing SequentialLR (it has no closed form \
             to restart at; PyTorch raises NotImplementedError here): put it first, or flatten the schedules into \
             one SequentialLR"
                .into(),
        ))
    }

    fn undo_epoch(&mut self) {
        for s in &mut self.schedulers {
            s.undo_epoch();
        }
    }
}
