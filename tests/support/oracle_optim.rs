//! The shared oracle's optimizer cases (kind "optim", `optim.json`): five
//! steps of `torch.optim.SGD` / `Adam` / `AdamW` from fixed gradients, run
//! through `ferrotorch::optim`. Every step's parameters and the final
//! state are compared within `rtol 1e-5`; cases equal bit for bit are
//! counted ([`bitwise_count`]).

use std::sync::atomic::{AtomicUsize, Ordering};

use ferrotorch::Tensor;
use ferrotorch::nn::Parameter;
use ferrotorch::optim::adam::{AdamAlgorithm, AdamWAlgorithm};
use ferrotorch::optim::sgd::SgdAlgorithm;
use ferrotorch::optim::{Algorithm, GroupOptions, Optim, Optimizer, Value};
use serde_json::Value as Json;

static CASES: AtomicUsize = AtomicUsize::new(0);
static BITWISE: AtomicUsize = AtomicUsize::new(0);

/// `(bitwise, total)` over the optimizer cases run so far.
pub fn bitwise_count() -> (usize, usize) {
    (BITWISE.load(Ordering::Relaxed), CASES.load(Ordering::Relaxed))
}

fn value(v: &Json) -> Value {
    match v {
        Json::Bool(b) => Value::Bool(*b),
        Json::Array(a) => Value::Tuple(a.iter().map(value).collect()),
        Json::Null => Value::None,
        other => Value::Float(super::oracle_json::num(other)),
    }
}

/// Compares within rtol 1e-5 / atol 1e-6; `Ok(true)` when bit for bit equal.
fn close(what: &str, got: &Tensor, want: &Tensor) -> Result<bool, String> {
    if got.shape() != want.shape() {
        return Err(format!("{what}: shape {:?}, expected {:?}", got.shape(), want.shape()));
    }
    let (g, w) = (got.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
    let mut exact = true;
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if a.to_bits() != b.to_bits() {
            exact = false;
        }
        let within = (a - b).abs() <= 1e-6 + 1e-5 * b.abs();
        if !within {
            return Err(format!("{what}: element {i}: got {a}, expected {b} (rtol 1e-5)"));
        }
    }
    Ok(exact)
}

fn run<A: Algorithm>(name: &str, case: &Json) -> Result<bool, String>
where
    A::Options: Default,
{
    let mut o = A::Options::default();
    for (k, v) in case["kwargs"].as_object().unwrap() {
        if !o.set(k, &value(v)).map_err(|e| format!("{name}: {e}"))? {
            return Err(format!("{name}: unknown option {k}"));
        }
    }
    let params: Vec<Parameter> = case["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| Parameter::new(super::oracle_json::decode(t)).unwrap())
        .collect();
    let mut opt = Optim::<A>::new(params.clone(), o).map_err(|e| format!("{name}: {e}"))?;
    let mut exact = true;
    let outputs = case["output"].as_array().unwrap();
    for (s, grads) in case["grad_sequence"].as_array().unwrap().iter().enumerate() {
        for (p, g) in params.iter().zip(grads.as_array().unwrap()) {
            p.tensor().set_grad(Some(super::oracle_json::decode(g))).unwrap();
        }
        opt.step().map_err(|e| format!("{name}: step {s}: {e}"))?;
        for (i, (p, w)) in params.iter().zip(outputs[s].as_array().unwrap()).enumerate() {
            exact &= close(
                &format!("{name} step {s} param {i}"),
                &p.tensor(),
                &super::oracle_json::decode(w),
            )?;
        }
    }
    let sd = opt.state_dict();
    for (i, want) in case["state_after"].as_array().unwrap().iter().enumerate() {
        let want = want.as_object().unwrap();
        let got = sd.state.get(&i);
        // serde_json's map is sorted: compare the key sets.
        let mut got_keys: Vec<&str> = got.map(|d| d.keys().collect()).unwrap_or_default();
        got_keys.sort_unstable();
        let want_keys: Vec<&str> = want.keys().map(String::as_str).collect();
        if got_keys != want_keys {
            return Err(format!("{name}: state {i} keys {got_keys:?}, expected {want_keys:?}"));
        }
        for (k, w) in want {
            let t = got.and_then(|d| d.get(k)).and_then(Value::as_tensor).unwrap();
            if w.is_number() {
                if t.item::<f64>().unwrap() != w.as_f64().unwrap() {
                    return Err(format!("{name}: state {i} {k}: {t}, expected {w}"));
                }
            } else {
                exact &= close(&format!("{name} state {i} {k}"), t, &super::oracle_json::decode(w))?;
            }
        }
    }
    Ok(exact)
}

/// Runs one optimizer case: `Ok(())` when it agrees with PyTorch.
pub fn check(case: &Json, name: &str) -> Result<(), String> {
    let r = match case["op"].as_str().unwrap_or("") {
        "torch.optim.SGD" => run::<SgdAlgorithm>(name, case),
        "torch.optim.Adam" => run::<AdamAlgorithm>(name, case),
        "torch.optim.AdamW" => run::<AdamWAlgorithm>(name, case),
        other => Err(format!("{name}: unknown optimizer {other}")),
    }?;
    CASES.fetch_add(1, Ordering::Relaxed);
    if r {
        BITWISE.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}
