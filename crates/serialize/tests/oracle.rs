//! PyTorch 2.15's own checkpoint files (`tests/data`, or
//! `$ORACLE_DIR/checkpoints`) load with the values of `checkpoints.json`,
//! and a model and optimizer restored from them continue as PyTorch did.

mod common;

use common::{assert_tensor_eq, json_tensor, oracle_json, read};
use ferrotorch::nn::{Forward, Linear, Module};
use ferrotorch::optim::{AdamW, AdamWOptions, Optimizer};
use ferrotorch_serialize::{
    Key, LoadOptions, Value, load_from_bytes, load_safetensors_from_bytes, load_state_dict_from_bytes,
    optimizer_state_dict_to_value, value_to_optim_value, value_to_optimizer_state_dict, value_to_state_dict,
};

fn check_weights(sd: &ferrotorch_serialize::StateDict, want: &serde_json::Value) {
    assert_eq!(sd.keys().collect::<Vec<_>>(), ["weight", "bias"]);
    for k in ["weight", "bias"] {
        assert_tensor_eq(k, sd.get(k).unwrap(), &json_tensor(&want[k]));
    }
}

/// Compares an optimizer state dict value with the JSON's state and param groups.
fn check_optimizer(v: &Value, json: &serde_json::Value) {
    let sd = value_to_optimizer_state_dict(v).unwrap();
    assert_eq!(sd.state.len(), 2);
    for (i, want) in json["optimizer_state"].as_object().unwrap() {
        let got = &sd.state[&i.parse::<usize>().unwrap()];
        assert_eq!(got.keys().collect::<Vec<_>>(), ["step", "exp_avg", "exp_avg_sq"]);
        for (k, w) in want.as_object().unwrap() {
            assert_tensor_eq(
                &format!("state {i} {k}"),
                got.get(k).unwrap().as_tensor().unwrap(),
                &json_tensor(w),
            );
        }
    }
    let groups = json["optimizer_param_groups"].as_array().unwrap();
    assert_eq!(sd.param_groups.len(), 1);
    let g = &sd.param_groups[0];
    assert_eq!(g.params, [0, 1]);
    let want = groups[0].as_object().unwrap();
    // PyTorch's order (the JSON object's keys come sorted).
    let keys: Vec<&str> = g.options.keys().collect();
    assert_eq!(
        keys,
        [
            "lr",
            "betas",
            "eps",
            "weight_decay",
            "amsgrad",
            "maximize",
            "foreach",
            "capturable",
            "differentiable",
            "fused",
            "decoupled_weight_decay"
        ]
    );
    assert_eq!(keys.len() + 1, want.len());
    for (k, w) in want {
        if k == "params" {
            continue;
        }
        let got = g.options.get(k).unwrap();
        use ferrotorch::optim::Value as O;
        match (got, w) {
            (O::Float(x), serde_json::Value::Number(n)) => assert_eq!(*x, n.as_f64().unwrap(), "{k}"),
            (O::Bool(b), serde_json::Value::Bool(c)) => assert_eq!(b, c, "{k}"),
            (O::None, serde_json::Value::Null) => {}
            (O::Tuple(items), serde_json::Value::Array(ws)) => {
                let xs: Vec<f64> = items.iter().map(|x| x.as_f64().unwrap()).collect();
                let ys: Vec<f64> = ws.iter().map(|x| x.as_f64().unwrap()).collect();
                assert_eq!(xs, ys, "{k}");
            }
            _ => panic!("{k}: {got:?} vs {w}"),
        }
    }
}

#[test]
fn linear_state_dict_pt() {
    let json = oracle_json();
    let v = load_from_bytes(&read("linear_state_dict.pt")).unwrap();
    let d = v.as_dict().unwrap();
    assert!(d.is_ordered_dict(), "Module.state_dict() is an OrderedDict");
    check_weights(&value_to_state_dict(&v).unwrap(), &json["weights_before_step"]);
    // The state dict's `_metadata` attribute is kept, and saved again.
    let meta = d.attributes().and_then(|a| a.get_str("_metadata")).unwrap();
    let version = meta
        .as_dict()
        .unwrap()
        .get_str("")
        .unwrap()
        .as_dict()
        .unwrap()
        .get_str("version");
    assert_eq!(version.and_then(Value::as_i64), Some(1));
    let again = load_from_bytes(&ferrotorch_serialize::save_to_bytes(&v).unwrap()).unwrap();
    let meta2 = again
        .as_dict()
        .unwrap()
        .attributes()
        .and_then(|a| a.get_str("_metadata"))
        .unwrap();
    assert!(meta2.same(meta) && again.same(&v));
    // Plain loads, not parameters: no grad.
    assert!(!d.get_str("weight").unwrap().as_tensor().unwrap().requires_grad());
}

#[test]
fn adamw_state_dict_pt() {
    let json = oracle_json();
    let v = load_from_bytes(&read("adamw_state_dict.pt")).unwrap();
    check_optimizer(&v, &json);
    // The step is a 0-d float32 tensor, as in PyTorch 2.x.
    let state = v.as_dict().unwrap().get_str("state").unwrap().as_dict().unwrap();
    let step = state.get_int(0).unwrap().as_dict().unwrap().get_str("step").unwrap();
    assert_eq!(step.as_tensor().unwrap().shape(), &[] as &[usize]);
}

#[test]
fn linear_and_adamw_pt() {
    let json = oracle_json();
    let bytes = read("linear_and_adamw.pt");
    let v = load_from_bytes(&bytes).unwrap();
    let d = v.as_dict().unwrap();
    assert_eq!(
        d.keys().cloned().collect::<Vec<_>>(),
        [Key::from("model"), Key::from("optimizer")]
    );
    // Saved after the optimizer step, with the optimizer's state.
    check_weights(
        &value_to_state_dict(d.get_str("model").unwrap()).unwrap(),
        &json["weights_after_step"],
    );
    check_optimizer(d.get_str("optimizer").unwrap(), &json);
    let sd = load_state_dict_from_bytes(&bytes, &LoadOptions::new().entry("model")).unwrap();
    check_weights(&sd, &json["weights_after_step"]);
}

#[test]
fn linear_safetensors() {
    let json = oracle_json();
    let st = load_safetensors_from_bytes(&read("linear.safetensors")).unwrap();
    let mut names: Vec<&str> = st.tensors.keys().collect();
    names.sort_unstable();
    assert_eq!(names, ["bias", "weight"]);
    for k in ["weight", "bias"] {
        assert_tensor_eq(
            k,
            st.tensors.get(k).unwrap(),
            &json_tensor(&json["weights_before_step"][k]),
        );
    }
    // The same through the format-sniffing loader.
    let sd = load_state_dict_from_bytes(&read("linear.safetensors"), &LoadOptions::new()).unwrap();
    assert_eq!(sd.len(), 2);
}

/// A Linear(4, 3) loaded from PyTorch's file and a fresh AdamW take the
/// step PyTorch took: the weights after it and the optimizer's state dict
/// equal PyTorch's (checkpoints.json and adamw_state_dict.pt) bit for bit.
#[test]
fn restored_model_steps_as_pytorch() {
    let json = oracle_json();
    let model = Linear::new(4, 3).unwrap();
    let sd = load_state_dict_from_bytes(&read("linear_state_dict.pt"), &LoadOptions::new()).unwrap();
    model.load_state_dict(&sd, true).unwrap();
    let mut opt = AdamW::new(model.parameters(), AdamWOptions::new().lr(1e-3)).unwrap();
    let x = json_tensor(&json["input"]);
    model.forward(&x).unwrap().sum().unwrap().backward().unwrap();
    opt.step().unwrap();
    let after = model.state_dict();
    for k in ["weight", "bias"] {
        assert_tensor_eq(k, after.get(k).unwrap(), &json_tensor(&json["weights_after_step"][k]));
    }
    let ours = optimizer_state_dict_to_value(&opt.state_dict());
    let theirs = load_from_bytes(&read("adamw_state_dict.pt")).unwrap();
    assert!(ours.same(&theirs), "ours: {ours:?}\ntheirs: {theirs:?}");
    // And PyTorch's state loads into our optimizer.
    let mut fresh = AdamW::new(model.parameters(), AdamWOptions::default()).unwrap();
    fresh
        .load_state_dict(&value_to_optimizer_state_dict(&theirs).unwrap())
        .unwrap();
    assert_eq!(fresh.lrs(), [1e-3]);
    // A param group (string keys) converts to optim's value and back.
    let group = &theirs
        .as_dict()
        .unwrap()
        .get_str("param_groups")
        .unwrap()
        .as_seq()
        .unwrap()[0];
    let v = value_to_optim_value(group).unwrap();
    assert!(ferrotorch_serialize::optim_value_to_value(&v).same(group));
}
