//! Optimizer trajectories against PyTorch (`tests/data/trajectories.json`,
//! written by `tests/gen_optim.py`): every parameter after every step,
//! the final state and the state dict's param groups, bit for bit (the
//! generator gives PyTorch's optimizers a correctly rounded square root,
//! as PyTorch has on the shared oracle's machine; see its docstring).

mod common;

use common::{bitwise, data, fnv1a, same_value, tensor, value};
use ferrotorch::DType;
use ferrotorch::Tensor;
use ferrotorch::nn::Parameter;
use ferrotorch::optim::adagrad::AdagradAlgorithm;
use ferrotorch::optim::adam::{AdamAlgorithm, AdamWAlgorithm};
use ferrotorch::optim::rmsprop::RmsPropAlgorithm;
use ferrotorch::optim::sgd::SgdAlgorithm;
use ferrotorch::optim::{Algorithm, GroupOptions, Optim, Optimizer, OptimizerStateDict};
use serde_json::Value as Json;

/// Options from PyTorch keyword arguments over `base`.
fn options<O: GroupOptions>(base: &O, kwargs: &Json) -> O {
    let mut o = base.clone();
    for (k, v) in kwargs.as_object().unwrap() {
        assert!(o.set(k, &value(v)).unwrap(), "unknown option {k}");
    }
    o
}

/// The large cases' data (the generator's `formula`).
fn formula(n: usize, dtype: &str, seed: i64) -> Tensor {
    let x: Vec<f64> = (0..n as i64)
        .map(|i| ((i * 2654435761 + seed * 40503) % 4294967296) as f64 / 4294967296.0 - 0.5)
        .collect();
    let t = Tensor::from_vec(x, [n]).unwrap();
    match dtype {
        "float32" => t.to_dtype(ferrotorch::DType::F32).unwrap(),
        _ => t,
    }
}

/// Builds the case's optimizer over fresh parameters and runs its steps;
/// returns the parameters after each step and the optimizer.
fn run<A: Algorithm>(case: &Json) -> (Vec<Vec<Tensor>>, Optim<A>)
where
    A::Options: Default,
{
    let large = case.get("large").is_some();
    let dtype = case["dtype"].as_str().unwrap();
    let init: Vec<Tensor> = if large {
        case["shapes"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(k, s)| {
                let shape: Vec<usize> = s
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_u64().unwrap() as usize)
                    .collect();
                formula(shape.iter().product(), dtype, k as i64 + 1)
                    .reshape(&shape)
                    .unwrap()
            })
            .collect()
    } else {
        case["params"].as_array().unwrap().iter().map(tensor).collect()
    };
    let params: Vec<Parameter> = init.iter().map(|t| Parameter::new(t.clone()).unwrap()).collect();
    let defaults = options(&A::Options::default(), &case["defaults"]);
    let groups = case["groups"].as_array().unwrap().iter().map(|g| {
        let idx: Vec<Parameter> = g["params"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| params[i.as_u64().unwrap() as usize].clone())
            .collect();
        (idx, options(&defaults, &g["kwargs"]))
    });
    let mut opt = Optim::<A>::with_groups(groups.collect::<Vec<_>>(), defaults).unwrap();
    let missing: Vec<(u64, u64)> = case["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m[0].as_u64().unwrap(), m[1].as_u64().unwrap()))
        .collect();
    let steps = case["steps"].as_u64().unwrap();
    let mut outputs = Vec::new();
    for s in 0..steps {
        for (k, p) in params.iter().enumerate() {
            let g = if missing.contains(&(s, k as u64)) {
                None
            } else if large {
                let t = p.tensor();
                let g = formula(t.numel(), dtype, 100 * (s as i64 + 1) + k as i64);
                Some(g.mul(2.0).unwrap().reshape(t.shape()).unwrap())
            } else {
                Some(tensor(&case["grads"][s as usize][k]))
            };
            p.tensor().set_grad(g).unwrap();
        }
        opt.step().unwrap();
        outputs.push(
            params
                .iter()
                .map(|p| p.tensor().detach().clone_tensor().unwrap())
                .collect(),
        );
    }
    (outputs, opt)
}

/// Compares the state dict's param groups with PyTorch's.
fn check_groups(name: &str, sd: &OptimizerStateDict, want: &Json) -> Result<(), String> {
    let want = want.as_array().unwrap();
    if sd.param_groups.len() != want.len() {
        return Err(format!("{name}: {} groups, want {}", sd.param_groups.len(), want.len()));
    }
    for (g, (got, w)) in sd.param_groups.iter().zip(want).enumerate() {
        let w = w.as_object().unwrap();
        // serde_json's map is sorted: compare the key sets.
        let keys: Vec<&str> = w.keys().map(String::as_str).filter(|k| *k != "params").collect();
        let mut got_keys: Vec<&str> = got.options.keys().collect();
        got_keys.sort_unstable();
        if keys != got_keys {
            return Err(format!("{name}: group {g} keys {got_keys:?}, want {keys:?}"));
        }
        for k in keys {
            let (a, b) = (got.options.get(k).unwrap(), value(&w[k]));
            if !same_value(a, &b) {
                return Err(format!("{name}: group {g} {k}: {a:?}, want {b:?}"));
            }
        }
        let params: Vec<usize> = w["params"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as usize)
            .collect();
        if got.params != params {
            return Err(format!("{name}: group {g} params {:?}, want {params:?}", got.params));
        }
    }
    Ok(())
}

fn check<A: Algorithm>(case: &Json) -> Result<(), String>
where
    A::Options: Default,
{
    let name = case["name"].as_str().unwrap();

    let (outputs, opt) = run::<A>(case);
    let sd = opt.state_dict();
    check_groups(name, &sd, &case["param_groups"])?;
    if case.get("large").is_some() {
        for (s, (got, want)) in outputs
            .iter()
            .zip(case["output_hashes"].as_array().unwrap())
            .enumerate()
        {
            for (k, (t, h)) in got.iter().zip(want.as_array().unwrap()).enumerate() {
                if fnv1a(t) != h.as_str().unwrap() {
                    // Name the first differing sampled element.
                    let sample: Vec<f64> = t.to_vec::<f64>().unwrap().into_iter().step_by(97).collect();
                    let sample = Tensor::from_vec(sample, [t.numel().div_ceil(97)]).unwrap();
                    let want = tensor(&case["output_samples"][s][k]).to_dtype(DType::F64).unwrap();
                    bitwise(&format!("{name} step {s} param {k} (every 97th)"), &sample, &want)?;
                    return Err(format!("{name}: step {s} param {k}: hash differs"));
                }
            }
        }
        let want = case["state_hashes"].as_object().unwrap();
        if sd.state.len() != want.len() {
            return Err(format!(
                "{name}: state for {} params, want {}",
                sd.state.len(),
                want.len()
            ));
        }
        for (idx, entries) in want {
            let got = &sd.state[&idx.parse::<usize>().unwrap()];
            for (key, h) in entries.as_object().unwrap() {
                let t = got
                    .get(key)
                    .and_then(|v| v.as_tensor())
                    .ok_or(format!("{name}: no state {key}"))?;
                let ok = match h {
                    Json::String(h) => fnv1a(t) == *h,
                    n => t.item::<f64>().unwrap() == n.as_f64().unwrap(),
                };
                if !ok {
                    return Err(format!("{name}: state {idx} {key} differs"));
                }
            }
        }
        return Ok(());
    }
    for (s, (got, want)) in outputs.iter().zip(case["outputs"].as_array().unwrap()).enumerate() {
        for (k, (t, w)) in got.iter().zip(want.as_array().unwrap()).enumerate() {
            bitwise(&format!("{name} step {s} param {k}"), t, &tensor(w))?;
        }
    }
    let want = case["state"].as_object().unwrap();
    let got_idx: Vec<usize> = sd.state.keys().copied().collect();
    let want_idx: Vec<usize> = want.keys().map(|k| k.parse().unwrap()).collect();
    let mut want_sorted = want_idx.clone();
    want_sorted.sort();
    if got_idx != want_sorted {
        return Err(format!("{name}: state for params {got_idx:?}, want {want_sorted:?}"));
    }
    for (idx, entries) in want {
        let got = &sd.state[&idx.parse::<usize>().unwrap()];
        let keys: Vec<&str> = entries.as_object().unwrap().keys().map(String::as_str).collect();
        let mut got_keys: Vec<&str> = got.keys().collect();
        got_keys.sort_unstable();
        if keys != got_keys {
            return Err(format!("{name}: state {idx} keys {got_keys:?}, want {keys:?}"));
        }
        for (key, w) in entries.as_object().unwrap() {
            let t = got.get(key).and_then(|v| v.as_tensor()).unwrap();
            bitwise(&format!("{name} state {idx} {key}"), t, &tensor(w))?;
        }
    }
    Ok(())
}

#[test]
fn trajectories_match_pytorch_bitwise() {
    let file = data("trajectories.json");
    let mut failures = Vec::new();
    let cases = file["cases"].as_array().unwrap();
    for case in cases {
        let r = match case["optimizer"].as_str().unwrap() {
            "SGD" => check::<SgdAlgorithm>(case),
            "Adam" => check::<AdamAlgorithm>(case),
            "AdamW" => check::<AdamWAlgorithm>(case),
            "RMSprop" => check::<RmsPropAlgorithm>(case),
            "Adagrad" => check::<AdagradAlgorithm>(case),
            other => Err(format!("unknown optimizer {other}")),
        };
        if let Err(e) = r {
            failures.push(e);
        }
    }
    println!("trajectories: {} cases, {} differ", cases.len(), failures.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
