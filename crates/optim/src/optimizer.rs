//! The [`Optimizer`] trait, parameter groups, and [`Optim`], the one
//! implementation every algorithm (SGD, Adam, ...) plugs into.
//!
//! As PyTorch's `torch.optim.Optimizer`: parameters come in groups, each
//! with its own hyperparameters (a group's options start as the
//! optimizer's defaults); state is kept per parameter and created on the
//! parameter's first step (Adagrad: at construction); a parameter without a
//! gradient is skipped. The state dict numbers the parameters 0, 1, ... over
//! all groups in order, as PyTorch's does.

use std::collections::BTreeMap;

use ferrotorch_core::Tensor;
use ferrotorch_nn::Parameter;

use crate::error::{Error, Result};
use crate::value::{Dict, Value};

/// PyTorch's `repr` of a Python float (`0.1`, `-1.0`, `1e-08`), for
/// messages that quote a hyperparameter as PyTorch's do.
pub(crate) fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // Shortest round-trip digits and the decimal exponent.
    let sci = format!("{:e}", x.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if x < 0.0 { "-" } else { "" };
    if !(-4..16).contains(&exp) {
        let mut m = digits[..1].to_string();
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{m}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    let s = if point <= 0 {
        format!("0.{}{}", "0".repeat((-point) as usize), digits)
    } else if point as usize >= digits.len() {
        format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
    } else {
        format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
    };
    format!("{sign}{s}")
}

/// The hyperparameters of one parameter group of an optimizer (its
/// options struct: [`SgdOptions`](crate::SgdOptions),
/// [`AdamOptions`](crate::AdamOptions), ...).
pub trait GroupOptions: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The learning rate.
    fn lr(&self) -> f64;
    /// Sets the learning rate (what LR schedulers do).
    fn set_lr(&mut self, lr: f64);
    /// Checks the values as PyTorch's constructor does (`Invalid learning
    /// rate: -0.1`, ...).
    fn validate(&self) -> Result<()>;
    /// PyTorch's param-group keys and values, in PyTorch's order (without
    /// `params`), including the keys ferrotorch fixes (`foreach: None`,
    /// `differentiable: False`, ...).
    fn to_dict(&self) -> Dict;
    /// Sets the hyperparameter `key` from a state dict or a scheduler:
    /// `Ok(false)` for a key these options do not have, an error for a
    /// value of the wrong kind.
    fn set(&mut self, key: &str, value: &Value) -> Result<bool>;
}

/// Reads a float hyperparameter value.
pub(crate) fn want_f64(key: &str, v: &Value) -> Result<f64> {
    v.as_f64()
        .ok_or_else(|| Error::key(key, format!("expected a float, got {v:?}")))
}

/// Reads a bool hyperparameter value.
pub(crate) fn want_bool(key: &str, v: &Value) -> Result<bool> {
    v.as_bool()
        .ok_or_else(|| Error::key(key, format!("expected a bool, got {v:?}")))
}

/// Reads a pair of floats (`betas`).
pub(crate) fn want_pair(key: &str, v: &Value) -> Result<(f64, f64)> {
    match v.as_f64_vec().as_deref() {
        Some([a, b]) => Ok((*a, *b)),
        _ => Err(Error::key(key, format!("expected a pair of floats, got {v:?}"))),
    }
}

/// Checks `0 <= x` (NaN fails), with PyTorch's message `Invalid {what} value: x`.
pub(crate) fn non_negative(name: &'static str, what: &str, x: f64) -> Result<()> {
    if x >= 0.0 {
        Ok(())
    } else {
        Err(Error::hyper(name, format!("Invalid {what}: {}", py_float(x))))
    }
}

/// One parameter group: its parameters and hyperparameters.
#[derive(Debug, Clone)]
pub struct ParamGroup<O> {
    params: Vec<Parameter>,
    /// The group's hyperparameters (change them freely between steps, as
    /// `group["lr"] = ...` in PyTorch).
    pub options: O,
    /// Keys of the group that are not hyperparameters of the optimizer
    /// (`initial_lr`, `max_lr`, ... that LR schedulers store), in the order
    /// they were added; they are saved in the state dict.
    pub extra: Dict,
}

impl<O> ParamGroup<O> {
    /// The group's parameters.
    pub fn params(&self) -> &[Parameter] {
        &self.params
    }
}

/// One group of [`OptimizerStateDict::param_groups`]: the hyperparameters
/// (PyTorch's keys and order) and the indices of the group's parameters.
#[derive(Debug, Clone, Default)]
pub struct ParamGroupState {
    /// Every key of the group but `params` (`lr`, `betas`, ..., and keys
    /// schedulers added such as `initial_lr`).
    pub options: Dict,
    /// The group's parameters as indices into the optimizer's parameters
    /// (0, 1, ... over all groups in order).
    pub params: Vec<usize>,
}

/// An optimizer's state in PyTorch's `optimizer.state_dict()` layout:
/// `{"state": {index: {"step": tensor, "exp_avg": tensor, ...}},
/// "param_groups": [{"lr": ..., ..., "params": [indices]}]}`.
///
/// The state tensors are the optimizer's own (as PyTorch's state dict
/// holds its live tensors): copy them before stepping again if the copy
/// must keep the values of now. `step` is a float32 0-d tensor, as in
/// PyTorch 2.x.
#[derive(Debug, Clone, Default)]
pub struct OptimizerStateDict {
    /// Per-parameter state, by parameter index; parameters that have not
    /// been stepped yet have no entry.
    pub state: BTreeMap<usize, Dict>,
    /// The parameter groups in order.
    pub param_groups: Vec<ParamGroupState>,
}

/// An optimization algorithm: its options, its per-parameter state and
/// its update. Implemented by [`SgdAlgorithm`](crate::sgd::SgdAlgorithm),
/// [`AdamAlgorithm`](crate::adam::AdamAlgorithm), ...; [`Optim`] supplies
/// the groups, validation, state dicts and the [`Optimizer`] trait.
pub trait Algorithm: Send + Sync + 'static {
    /// The hyperparameters of one group.
    type Options: GroupOptions;
    /// The state of one parameter.
    type State: Send + Sync + std::fmt::Debug;
    /// PyTorch's class name (`SGD`, `Adam`, ...), for messages.
    const NAME: &'static str;
    /// Whether a momentum-like hyperparameter exists for OneCycleLR:
    /// `"betas"` or `"momentum"` (`None`: neither).
    const MOMENTUM_KEY: Option<&'static str>;

    /// State created with the group, before any step (Adagrad's `sum`);
    /// `None` (the default) creates it at the first step.
    fn initial_state(_param: &Tensor, _options: &Self::Options) -> Result<Option<Self::State>> {
        Ok(None)
    }

    /// Updates `param` in place from `grad` (same shape) and the state.
    fn update(
        index: usize,
        options: &Self::Options,
        param: &Tensor,
        grad: &Tensor,
        state: &mut Option<Self::State>,
    ) -> Result<()>;

    /// The state as PyTorch's per-parameter dict (`step`, `exp_avg`, ...).
    fn state_to_dict(state: &Self::State) -> Dict;

    /// The state from a saved dict, for `param` (copies of the tensors, in
    /// the parameter's dtype; the shapes are checked).
    fn state_from_dict(index: usize, dict: &Dict, param: &Tensor, options: &Self::Options) -> Result<Self::State>;
}

/// What every optimizer offers, as an object-safe trait (`&mut dyn
/// Optimizer` is what the LR schedulers take).
pub trait Optimizer: Send + Sync {
    /// PyTorch's class name (`SGD`, `Adam`, `AdamW`, ...).
    fn name(&self) -> &'static str;

    /// One optimization step over every parameter that has a gradient.
    fn step(&mut self) -> Result<()>;

    /// Clears the gradients of all parameters (`zero_grad()`: PyTorch's
    /// default `set_to_none=True`).
    fn zero_grad(&mut self) -> Result<()> {
        self.zero_grad_with(true)
    }

    /// `zero_grad(set_to_none)`: with `false`, existing gradients are
    /// detached and filled with zeros in place instead of removed.
    fn zero_grad_with(&mut self, set_to_none: bool) -> Result<()>;

    /// The number of parameter groups.
    fn num_param_groups(&self) -> usize;

    /// The parameters of group `group` (empty for a group that does not exist).
    fn group_params(&self, group: usize) -> &[Parameter];

    /// Every group's learning rate, in group order.
    fn lrs(&self) -> Vec<f64>;

    /// Sets group `group`'s learning rate.
    fn set_lr(&mut self, group: usize, lr: f64) -> Result<()>;

    /// The value of `key` in group `group` (a hyperparameter such as
    /// `"lr"` or `"betas"`, or an extra key such as `"initial_lr"`).
    fn hyperparameter(&self, group: usize, key: &str) -> Option<Value>;

    /// Sets `key` in group `group`: a hyperparameter of the optimizer
    /// (type-checked), or any other key (kept in the group, as PyTorch's
    /// group dicts keep what schedulers write).
    fn set_hyperparameter(&mut self, group: usize, key: &str, value: Value) -> Result<()>;

    /// The optimizer's defaults as PyTorch's `optimizer.defaults` dict.
    fn defaults_dict(&self) -> Dict;

    /// The state in PyTorch's layout.
    fn state_dict(&self) -> OptimizerStateDict;

    /// Loads a state dict: every group's hyperparameters and every
    /// parameter's state. Checks first (group count, parameter counts,
    /// value kinds, state keys and shapes); on an error the optimizer is
    /// unchanged. As PyTorch, the loaded hyperparameters are not range-checked
    /// (a OneCycleLR run past its end leaves a negative `lr`).
    fn load_state_dict(&mut self, state_dict: &OptimizerStateDict) -> Result<()>;
}

/// An optimizer: parameter groups with their options, per-parameter state,
/// and the algorithm `A`'s update. [`SGD`](crate::SGD), [`Adam`](crate::Adam),
/// [`AdamW`](crate::AdamW), [`RMSprop`](crate::RMSprop) and
/// [`Adagrad`](crate::Adagrad) are this type with their algorithm.
#[derive(Debug)]
pub struct Optim<A: Algorithm> {
    defaults: A::Options,
    groups: Vec<ParamGroup<A::Options>>,
    /// `state[g][i]`: the state of parameter `i` of group `g`.
    state: Vec<Vec<Option<A::State>>>,
}

impl<A: Algorithm> Optim<A> {
    /// An optimizer over `params` (one group) with `options` as the
    /// defaults, as `torch.optim.X(params, **options)`.
    ///
    /// Errors: an empty parameter list, a parameter given twice, and
    /// options out of range (PyTorch's messages).
    pub fn new(params: impl IntoIterator<Item = Parameter>, options: A::Options) -> Result<Self> {
        let params: Vec<Parameter> = params.into_iter().collect();
        if params.is_empty() {
            return Err(Error::EmptyParameterList);
        }
        options.validate()?;
        let mut opt = Optim {
            defaults: options.clone(),
            groups: Vec::new(),
            state: Vec::new(),
        };
        opt.add_param_group(params, options)?;
        Ok(opt)
    }

    /// An optimizer over several groups, each with its own options (PyTorch's
    /// list of group dicts; write a group's options as
    /// `defaults.clone().lr(1e-2)`). `defaults` are what
    /// [`Optim::defaults`] reports and what later groups start from.
    pub fn with_groups(
        groups: impl IntoIterator<Item = (Vec<Parameter>, A::Options)>,
        defaults: A::Options,
    ) -> Result<Self> {
        defaults.validate()?;
        let mut opt = Optim {
            defaults,
            groups: Vec::new(),
            state: Vec::new(),
        };
        for (params, options) in groups {
            opt.add_param_group(params, options)?;
        }
        if opt.groups.iter().all(|g| g.params.is_empty()) {
            return Err(Error::EmptyParameterList);
        }
        Ok(opt)
    }

    /// Adds a group with its own options (`optimizer.add_param_group`),
    /// e.g. layers unfrozen while fine-tuning. Errors for a parameter
    /// already in the optimizer or given twice, and for invalid options.
    pub fn add_param_group(&mut self, params: impl IntoIterator<Item = Parameter>, options: A::Options) -> Result<()> {
        let params: Vec<Parameter> = params.into_iter().collect();
        options.validate()?;
        for (i, p) in params.iter().enumerate() {
            if params[..i].iter().any(|q| q.same_as(p)) {
                return Err(Error::DuplicateParameter(
                    "optimizer contains a parameter group with duplicate parameters",
                ));
            }
        }
        if params
            .iter()
            .any(|p| self.groups.iter().any(|g| g.params.iter().any(|q| q.same_as(p))))
        {
            return Err(Error::DuplicateParameter(
                "some parameters appear in more than one parameter group",
            ));
        }
        let mut state = Vec::with_capacity(params.len());
        for p in &params {
            state.push(A::initial_state(&p.tensor(), &options)?);
        }
        self.groups.push(ParamGroup {
            params,
            options,
            extra: Dict::new(),
        });
        self.state.push(state);
        Ok(())
    }

    /// The optimizer's defaults (the options it was built with).
    pub fn defaults(&self) -> &A::Options {
        &self.defaults
    }

    /// The parameter groups (`optimizer.param_groups`).
    pub fn param_groups(&self) -> &[ParamGroup<A::Options>] {
        &self.groups
    }

    /// The parameter groups for changing their options
    /// (`opt.param_groups_mut()[0].options.lr = 0.01`). The new values are
    /// not checked, as PyTorch does not check assignments to a group dict.
    pub fn param_groups_mut(&mut self) -> &mut [ParamGroup<A::Options>] {
        &mut self.groups
    }

    /// The state of parameter `index` (over all groups in order), `None`
    /// before its first step.
    pub fn state(&self, index: usize) -> Option<&A::State> {
        let mut i = index;
        for s in &self.state {
            if i < s.len() {
                return s[i].as_ref();
            }
            i -= s.len();
        }
        None
    }

    fn group(&self, group: usize) -> Result<&ParamGroup<A::Options>> {
        let len = self.groups.len();
        self.groups.get(group).ok_or(Error::NoSuchGroup { index: group, len })
    }

    fn group_mut(&mut self, group: usize) -> Result<&mut ParamGroup<A::Options>> {
        let len = self.groups.len();
        self.groups
            .get_mut(group)
            .ok_or(Error::NoSuchGroup { index: group, len })
    }
}

impl<A: Algorithm> Optimizer for Optim<A> {
    fn name(&self) -> &'static str {
        A::NAME
    }

    fn step(&mut self) -> Result<()> {
        let _guard = ferrotorch_core::autograd::no_grad_guard();
        let mut index = 0;
        for (group, states) in self.groups.iter().zip(self.state.iter_mut()) {
            for (p, state) in group.params.iter().zip(states.iter_mut()) {
                let t = p.tensor();
                if let Some(g) = crate::kernel::grad_of(&t)? {
                    A::update(index, &group.options, &t, &g, state)?;
                }
                index += 1;
            }
        }
        Ok(())
    }

    fn zero_grad_with(&mut self, set_to_none: bool) -> Result<()> {
        for group in &self.groups {
            for p in &group.params {
                let t = p.tensor();
                let Some(g) = t.grad_opt() else { continue };
                if set_to_none {
                    t.set_grad(None)?;
                } else {
                    let g = g.detach();
                    ferrotorch_core::autograd::no_grad(|| g.zero_())?;
                    t.set_grad(Some(g))?;
                }
            }
        }
        Ok(())
    }

    fn num_param_groups(&self) -> usize {
        self.groups.len()
    }

    fn group_params(&self, group: usize) -> &[Parameter] {
        self.groups.get(group).map_or(&[], |g| &g.params)
    }

    fn lrs(&self) -> Vec<f64> {
        self.groups.iter().map(|g| g.options.lr()).collect()
    }

    fn set_lr(&mut self, group: usize, lr: f64) -> Result<()> {
        self.group_mut(group)?.options.set_lr(lr);
        Ok(())
    }

    fn hyperparameter(&self, group: usize, key: &str) -> Option<Value> {
        let g = self.group(group).ok()?;
        g.options.to_dict().get(key).or_else(|| g.extra.get(key)).cloned()
    }

    fn set_hyperparameter(&mut self, group: usize, key: &str, value: Value) -> Result<()> {
        let g = self.group_mut(group)?;
        if key == "params" {
            return Err(Error::key(key, "the parameters of a group cannot be set this way"));
        }
        if !g.options.set(key, &value)? {
            g.extra.insert(key, value);
        }
        Ok(())
    }

    fn defaults_dict(&self) -> Dict {
        self.defaults.to_dict()
    }

    fn state_dict(&self) -> OptimizerStateDict {
        let mut out = OptimizerStateDict::default();
        let mut index = 0;
        for (group, states) in self.groups.iter().zip(&self.state) {
            let mut options = group.options.to_dict();
            for (k, v) in group.extra.iter() {
                options.insert(k, v.clone());
            }
            let start = index;
            for s in states {
                if let Some(s) = s {
                    out.state.insert(index, A::state_to_dict(s));
                }
                index += 1;
            }
            out.param_groups.push(ParamGroupState {
                options,
                params: (start..index).collect(),
            });
        }
        out
    }

    fn load_state_dict(&mut self, sd: &OptimizerStateDict) -> Result<()> {
        if sd.param_groups.len() != self.groups.len() {
            return Err(Error::StateDict(
                "loaded state dict has a different number of parameter groups".into(),
            ));
        }
        if sd
            .param_groups
            .iter()
            .zip(&self.groups)
            .any(|(s, g)| s.params.len() != g.params.len())
        {
            return Err(Error::StateDict(
                "loaded state dict contains a parameter group that doesn't match the size of optimizer's group".into(),
            ));
        }
        // Saved index -> (group, position): the saved groups' indices in order
        // map onto this optimizer's parameters in order, as PyTorch's id_map.
        let mut id_map = BTreeMap::new();
        for (g, s) in sd.param_groups.iter().enumerate() {
            for (i, &saved) in s.params.iter().enumerate() {
                if id_map.insert(saved, (g, i)).is_some() {
                    return Err(Error::StateDict(format!(
                        "loaded state dict lists parameter {saved} in more than one place"
                    )));
                }
            }
        }
        // New options, every value checked.
        let mut new_groups = Vec::with_capacity(self.groups.len());
        for (g, s) in self.groups.iter().zip(&sd.param_groups) {
            let mut options = g.options.clone();
            let mut extra = Dict::new();
            for (k, v) in s.options.iter() {
                if k == "params" {
                    continue;
                }
                if !options.set(k, v)? {
                    extra.insert(k, v.clone());
                }
            }
            new_groups.push((options, extra));
        }
        // New state, every tensor checked against its parameter.
        let mut new_state: Vec<Vec<Option<A::State>>> = self
            .groups
            .iter()
            .map(|g| g.params.iter().map(|_| None).collect())
            .collect();
        let total: usize = self.groups.iter().map(|g| g.params.len()).sum();
        for (&saved, dict) in &sd.state {
            let Some(&(g, i)) = id_map.get(&saved) else {
                return Err(Error::StateDict(format!(
                    "loaded state dict has state for parameter {saved}, which none of its param groups lists \
                     (the optimizer has {total} parameters)"
                )));
            };
            let index = self.groups[..g].iter().map(|g| g.params.len()).sum::<usize>() + i;
            let param = self.groups[g].params[i].tensor();
            new_state[g][i] = Some(A::state_from_dict(index, dict, &param, &new_groups[g].0)?);
        }
        for (group, (options, extra)) in self.groups.iter_mut().zip(new_groups) {
            group.options = options;
            group.extra = extra;
        }
        self.state = new_state;
        Ok(())
    }
}

/// Helpers for the algorithms' state dicts.
pub(crate) mod state_io {
    use ferrotorch_core::{DType, Tensor, TensorOptions};

    use crate::error::{Error, Result};
    use crate::value::{Dict, Value};

    /// `step` as PyTorch 2.x keeps it: a float32 0-d tensor.
    pub(crate) fn step_tensor(step: f32) -> Value {
        Value::Tensor(Tensor::scalar_tensor(f64::from(step).into(), DType::F32))
    }

    /// The saved `step` (a tensor or, from older checkpoints, a number).
    pub(crate) fn read_step(index: usize, d: &Dict) -> Result<f32> {
        let v = d
            .get("step")
            .ok_or_else(|| Error::StateDict(format!("state of parameter {index} has no \"step\"")))?;
        v.as_f64()
            .map(|s| s as f32)
            .ok_or_else(|| Error::StateDict(format!("state of parameter {index}: \"step\" is not a number")))
    }

    /// A copy of the saved tensor `key`, in `param`'s dtype, checked
    /// against `param`'s shape.
    pub(crate) fn read_tensor(index: usize, d: &Dict, key: &str, param: &Tensor) -> Result<Tensor> {
        let t = d
            .get(key)
            .ok_or_else(|| Error::StateDict(format!("state of parameter {index} has no \"{key}\"")))?
            .as_tensor()
            .ok_or_else(|| Error::StateDict(format!("state of parameter {index}: \"{key}\" is not a tensor")))?;
        if t.shape() != param.shape() {
            return Err(Error::StateDict(format!(
                "state of parameter {index}: \"{key}\" has shape {:?}, the parameter {:?}",
                t.shape(),
                param.shape()
            )));
        }
        let copy = t.detach().to_dtype(param.dtype())?;
        // A fresh contiguous tensor the optimizer owns alone.
        let owned = zeros_like(param)?;
        ferrotorch_core::autograd::no_grad(|| owned.copy_(&copy))?;
        Ok(owned)
    }

    /// A fresh zero tensor like `param` (contiguous, its dtype).
    pub(crate) fn zeros_like(param: &Tensor) -> Result<Tensor> {
        Ok(TensorOptions::like(param).zeros(param.shape())?)
    }

    /// A fresh tensor like `param` filled with `value`.
    pub(crate) fn full_like(param: &Tensor, value: f64) -> Result<Tensor> {
        Ok(TensorOptions::like(param).full(param.shape(), value)?)
    }
}

#[cfg(test)]
mod tests {
    use super::py_float;

    #[test]
    fn python_float_repr() {
        for (x, s) in [
            (0.1, "0.1"),
            (-1.0, "-1.0"),
            (1e-8, "1e-08"),
            (1e16, "1e+16"),
            (1234.5, "1234.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5e-7, "-2.5e-07"),
            (1e15, "1000000000000000.0"),
            (100.0, "100.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (-1e-8, "-1e-08"),
            (1.5e16, "1.5e+16"),
        ] {
            assert_eq!(py_float(x), s);
        }
    }
}
