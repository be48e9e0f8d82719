//! Conversions between checkpoint [`Value`]s and the state dicts of `nn`
//! ([`StateDict`]) and `optim` ([`OptimizerStateDict`]), in PyTorch's
//! layouts: a module's state dict is an `OrderedDict` of name -> tensor;
//! an optimizer's is `{"state": {index: {...}}, "param_groups": [{...,
//! "params": [indices]}]}`.

use std::collections::BTreeMap;

use ferrotorch_nn::StateDict;
use ferrotorch_optim::{Dict as OptimDict, OptimizerStateDict, ParamGroupState, Value as OptimValue};

use crate::error::{Error, Result};
use crate::value::MAX_DEPTH;
use crate::value::{Dict, DictKind, Key, Value};

/// A module state dict as PyTorch's `Module.state_dict()`: an
/// `OrderedDict` of the tensors, in order.
pub fn state_dict_to_value(sd: &StateDict) -> Value {
    let mut d = Dict::ordered();
    for (k, t) in sd.iter() {
        d.insert(k, t.clone());
    }
    Value::Dict(d)
}

/// The module state dict in `value`: a dict (plain or ordered) whose keys
/// are strings and whose values are all tensors. An error names the first
/// entry that is not (PyTorch's `_extra_state` entries, for instance).
pub fn value_to_state_dict(value: &Value) -> Result<StateDict> {
    let d = value
        .as_dict()
        .ok_or_else(|| Error::schema(format!("a state dict must be a dict, this is a {}", value.type_name())))?;
    let mut sd = StateDict::new();
    for (k, v) in d.iter() {
        let Key::Str(name) = k else {
            return Err(Error::schema(format!("state dict key {k} is not a string")));
        };
        let t = v.as_tensor().ok_or_else(|| {
            // A training checkpoint: name the dicts in it that could be the state dict.
            let dicts: Vec<String> = d
                .iter()
                .filter(|(_, v)| v.as_dict().is_some())
                .map(|(k, _)| k.to_string())
                .collect();
            let hint = match dicts.first() {
                Some(first) => format!(
                    " (a checkpoint holding the dicts {}? LoadOptions::entry({}) picks one)",
                    dicts.join(", "),
                    first.replace('\'', "\"")
                ),
                None => String::new(),
            };
            Error::schema(format!(
                "state dict entry '{name}' is a Python {}, not a tensor{hint}",
                v.type_name()
            ))
        })?;
        sd.insert(name.clone(), t.clone());
    }
    Ok(sd)
}

/// An optimizer's or scheduler's value (as `optim` holds it) as a
/// checkpoint value; an integer-keyed dict (`IntKeyDict`) becomes a
/// `collections.Counter`, the only thing `optim` uses it for.
pub fn optim_value_to_value(v: &OptimValue) -> Value {
    match v {
        OptimValue::None => Value::None,
        OptimValue::Bool(b) => Value::Bool(*b),
        OptimValue::Int(i) => Value::Int(*i),
        OptimValue::Float(x) => Value::Float(*x),
        OptimValue::Str(s) => Value::Str(s.clone()),
        OptimValue::Tuple(items) => Value::Tuple(items.iter().map(optim_value_to_value).collect()),
        OptimValue::List(items) => Value::List(items.iter().map(optim_value_to_value).collect()),
        OptimValue::Dict(d) => Value::Dict(optim_dict_to_dict(d)),
        // optim's integer-keyed dicts are PyTorch's Counters (MultiStepLR's
        // milestones), and must load as one: a plain dict fails on epochs
        // that are not milestones.
        OptimValue::IntKeyDict(items) => {
            let mut d = Dict::with_kind(DictKind::Counter);
            for (k, v) in items {
                d.insert(*k, optim_value_to_value(v));
            }
            Value::Dict(d)
        }
        OptimValue::Tensor(t) => Value::Tensor(t.clone()),
    }
}

fn optim_dict_to_dict(d: &OptimDict) -> Dict {
    let mut out = Dict::new();
    for (k, v) in d.iter() {
        out.insert(k, optim_value_to_value(v));
    }
    out
}

/// A checkpoint value as `optim`'s value: dicts with string keys become
/// `Dict`, dicts with integer keys `IntKeyDict`; bytes and dicts that mix
/// key types have no `optim` form (an error naming `path`).
pub fn value_to_optim_value(v: &Value) -> Result<OptimValue> {
    to_optim(v, "value", 0)
}

fn to_optim(v: &Value, path: &str, depth: usize) -> Result<OptimValue> {
    if depth > MAX_DEPTH {
        return Err(Error::schema(format!("{path} nests deeper than {MAX_DEPTH} levels")));
    }
    Ok(match v {
        Value::None => OptimValue::None,
        Value::Bool(b) => OptimValue::Bool(*b),
        Value::Int(i) => OptimValue::Int(*i),
        Value::Float(x) => OptimValue::Float(*x),
        Value::Str(s) => OptimValue::Str(s.clone()),
        Value::Bytes(_) => {
            return Err(Error::schema(format!(
                "{path} is bytes, which optimizer state cannot hold"
            )));
        }
        Value::List(items) => OptimValue::List(seq(items, path, depth)?),
        Value::Tuple(items) => OptimValue::Tuple(seq(items, path, depth)?),
        Value::Dict(d) => {
            if d.keys().all(|k| matches!(k, Key::Str(_))) {
                OptimValue::Dict(to_optim_dict(d, path, depth)?)
            } else if d.keys().all(|k| matches!(k, Key::Int(_))) {
                let mut items = Vec::with_capacity(d.len());
                for (k, v) in d.iter() {
                    let Key::Int(i) = k else { continue };
                    items.push((*i, to_optim(v, &format!("{path}[{i}]"), depth + 1)?));
                }
                OptimValue::IntKeyDict(items)
            } else {
                return Err(Error::schema(format!("{path} mixes string and integer keys")));
            }
        }
        Value::Tensor(t) => OptimValue::Tensor(t.clone()),
    })
}

fn seq(items: &[Value], path: &str, depth: usize) -> Result<Vec<OptimValue>> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| to_optim(v, &format!("{path}[{i}]"), depth + 1))
        .collect()
}

fn to_optim_dict(d: &Dict, path: &str, depth: usize) -> Result<OptimDict> {
    let mut out = OptimDict::new();
    for (k, v) in d.iter() {
        let Key::Str(name) = k else {
            return Err(Error::schema(format!("{path} has the non-string key {k}")));
        };
        out.insert(name.clone(), to_optim(v, &format!("{path}['{name}']"), depth + 1)?);
    }
    Ok(out)
}

/// An LR scheduler's state dict (`LrScheduler::state_dict()`) as
/// PyTorch's `scheduler.state_dict()`: a dict with PyTorch's keys,
/// MultiStepLR's `milestones` a `collections.Counter`.
pub fn scheduler_state_dict_to_value(sd: &OptimDict) -> Value {
    Value::Dict(optim_dict_to_dict(sd))
}

/// The LR scheduler state dict in `value` (a dict with string keys), for
/// `LrScheduler::load_state_dict`.
pub fn value_to_scheduler_state_dict(value: &Value) -> Result<OptimDict> {
    let d = value.as_dict().ok_or_else(|| {
        Error::schema(format!(
            "a scheduler state dict must be a dict, this is a {}",
            value.type_name()
        ))
    })?;
    to_optim_dict(d, "scheduler state", 0)
}

/// An optimizer state dict as PyTorch's `optimizer.state_dict()`:
/// `{"state": {index: {"step": ..., ...}}, "param_groups": [{"lr": ...,
/// ..., "params": [indices]}]}` (`params` last, as PyTorch writes it).
pub fn optimizer_state_dict_to_value(sd: &OptimizerStateDict) -> Value {
    let mut state = Dict::new();
    for (&i, d) in &sd.state {
        state.insert(i as i64, Value::Dict(optim_dict_to_dict(d)));
    }
    let groups = sd
        .param_groups
        .iter()
        .map(|g| {
            let mut d = optim_dict_to_dict(&g.options);
            d.insert(
                "params",
                Value::List(g.params.iter().map(|&p| Value::Int(p as i64)).collect()),
            );
            Value::Dict(d)
        })
        .collect();
    let mut out = Dict::new();
    out.insert("state", state);
    out.insert("param_groups", Value::List(groups));
    Value::Dict(out)
}

fn index(v: i64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::schema(format!("{what} {v} is negative")))
}

/// The optimizer state dict in `value` (PyTorch's layout: see
/// [`optimizer_state_dict_to_value`]). Keys other than `state` and
/// `param_groups` are an error; hyperparameters are not checked here
/// (the optimizer's `load_state_dict` checks them).
pub fn value_to_optimizer_state_dict(value: &Value) -> Result<OptimizerStateDict> {
    let d = value.as_dict().ok_or_else(|| {
        Error::schema(format!(
            "an optimizer state dict must be a dict, this is a {}",
            value.type_name()
        ))
    })?;
    for k in d.keys() {
        if !matches!(k, Key::Str(s) if s == "state" || s == "param_groups") {
            return Err(Error::schema(format!(
                "unexpected key {k} in an optimizer state dict (expected 'state' and 'param_groups')"
            )));
        }
    }
    let mut state = BTreeMap::new();
    let st = d
        .get_str("state")
        .ok_or_else(|| Error::schema("the optimizer state dict has no 'state'"))?;
    let st = st
        .as_dict()
        .ok_or_else(|| Error::schema(format!("optimizer 'state' is a {}, not a dict", st.type_name())))?;
    for (k, v) in st.iter() {
        let Key::Int(i) = k else {
            return Err(Error::schema(format!(
                "optimizer state key {k} is not a parameter index"
            )));
        };
        let i = index(*i, "optimizer state index")?;
        let path = format!("state[{i}]");
        let entry = v
            .as_dict()
            .ok_or_else(|| Error::schema(format!("{path} is a {}, not a dict", v.type_name())))?;
        state.insert(i, to_optim_dict(entry, &path, 1)?);
    }
    let groups = d
        .get_str("param_groups")
        .ok_or_else(|| Error::schema("the optimizer state dict has no 'param_groups'"))?;
    let Value::List(groups) = groups else {
        return Err(Error::schema(format!(
            "optimizer 'param_groups' is a {}, not a list",
            groups.type_name()
        )));
    };
    let mut param_groups = Vec::with_capacity(groups.len());
    for (gi, g) in groups.iter().enumerate() {
        let path = format!("param_groups[{gi}]");
        let g = g
            .as_dict()
            .ok_or_else(|| Error::schema(format!("{path} is a {}, not a dict", g.type_name())))?;
        let mut options = OptimDict::new();
        let mut params = None;
        for (k, v) in g.iter() {
            let Key::Str(name) = k else {
                return Err(Error::schema(format!("{path} has the non-string key {k}")));
            };
            if name == "params" {
                let items = v
                    .as_seq()
                    .ok_or_else(|| Error::schema(format!("{path}['params'] is a {}, not a list", v.type_name())))?;
                let ids = items
                    .iter()
                    .map(|p| {
                        p.as_i64()
                            .ok_or_else(|| Error::schema(format!("{path}['params'] holds a {}", p.type_name())))
                            .and_then(|i| index(i, "parameter index"))
                    })
                    .collect::<Result<Vec<usize>>>()?;
                params = Some(ids);
            } else {
                options.insert(name.clone(), to_optim(v, &format!("{path}['{name}']"), 2)?);
            }
        }
        let params = params.ok_or_else(|| Error::schema(format!("{path} has no 'params'")))?;
        param_groups.push(ParamGroupState { options, params });
    }
    Ok(OptimizerStateDict { state, param_groups })
}

/// `ckpt.insert("model_state_dict", model.state_dict())`: as
/// [`state_dict_to_value`].
impl From<StateDict> for Value {
    fn from(sd: StateDict) -> Value {
        state_dict_to_value(&sd)
    }
}

/// `ckpt.insert("optimizer_state_dict", optimizer.state_dict())`: as
/// [`optimizer_state_dict_to_value`].
impl From<OptimizerStateDict> for Value {
    fn from(sd: OptimizerStateDict) -> Value {
        optimizer_state_dict_to_value(&sd)
    }
}

/// `ckpt.insert("scheduler_state_dict", scheduler.state_dict())`: as
/// [`scheduler_state_dict_to_value`].
impl From<OptimDict> for Value {
    fn from(sd: OptimDict) -> Value {
        scheduler_state_dict_to_value(&sd)
    }
}
