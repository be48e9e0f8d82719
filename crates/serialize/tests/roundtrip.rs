//! Save and load again: every dtype, shared storages, nested training
//! checkpoints, safetensors with metadata, atomic writes, load options.

mod common;

use std::collections::HashMap;

use common::assert_tensor_eq;
use ferrotorch::nn::{Forward, Linear, Module};
use ferrotorch::optim::{AdamW, AdamWOptions, Optimizer};
use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::{ALL_DTYPES, DType, Tensor};
use ferrotorch_serialize::{
    Dict, Key, LoadOptions, StateDict, Value, load, load_from_bytes, load_safetensors, load_state_dict,
    optimizer_state_dict_to_value, save, save_safetensors, save_state_dict, save_to_bytes, state_dict_to_value,
    value_to_optimizer_state_dict, value_to_state_dict,
};

fn sample(dtype: DType) -> Tensor {
    let t = Tensor::arange_step(-7.5, 7.5, 1.25).unwrap().reshape([3, 4]).unwrap();
    match dtype {
        DType::Bool => t.gt(0.0).unwrap(),
        DType::U8 => t.abs().unwrap().mul(10).unwrap().to_dtype(DType::U8).unwrap(),
        d => t
            .mul(if d.is_floating_point() { 1 } else { 1000 })
            .unwrap()
            .to_dtype(d)
            .unwrap(),
    }
}

fn roundtrip(v: &Value) -> Value {
    load_from_bytes(&save_to_bytes(v).unwrap()).unwrap()
}

#[test]
fn dict_remove_keeps_the_order_and_every_other_key() {
    let mut d = Dict::new();
    for (i, k) in ["a", "b", "c", "d"].iter().enumerate() {
        d.insert(*k, i as i64);
    }
    assert_eq!(d.remove(&Key::Str("b".into())).and_then(|v| v.as_i64()), Some(1));
    assert!(d.remove(&Key::Str("b".into())).is_none());
    // The keys after the removed one are still found, in order.
    for (k, want) in [("a", 0), ("c", 2), ("d", 3)] {
        assert_eq!(d.get_str(k).and_then(Value::as_i64), Some(want), "{k}");
    }
    let keys: Vec<Key> = d.keys().cloned().collect();
    assert_eq!(keys, [Key::Str("a".into()), Key::Str("c".into()), Key::Str("d".into())]);
    // Inserting again appends; a later removal still finds everything.
    d.insert("b", 9i64);
    assert_eq!(d.remove(&Key::Str("c".into())).and_then(|v| v.as_i64()), Some(2));
    let rest: Vec<(Key, i64)> = d.iter().map(|(k, v)| (k.clone(), v.as_i64().unwrap())).collect();
    assert_eq!(
        rest,
        [
            (Key::Str("a".into()), 0),
            (Key::Str("d".into()), 3),
            (Key::Str("b".into()), 9)
        ]
    );
    assert_eq!(d.get_str("b").and_then(Value::as_i64), Some(9));
    assert_eq!(d.len(), 3);
}

#[test]
fn every_dtype_and_layout() {
    let mut d = Dict::new();
    for dt in ALL_DTYPES {
        let t = sample(dt);
        d.insert(dt.name(), t.clone());
        d.insert(format!("{}_t", dt.name()), t.t().unwrap());
        d.insert(
            format!("{}_0d", dt.name()),
            t.select(0, 1).unwrap().select(0, 2).unwrap(),
        );
        d.insert(format!("{}_empty", dt.name()), Tensor::zeros_dtype([0, 5], dt).unwrap());
    }
    let v = Value::Dict(d);
    let back = roundtrip(&v);
    assert!(back.same(&v));
    for (k, t) in back.as_dict().unwrap().iter() {
        let want = v.as_dict().unwrap().get(k).unwrap().as_tensor().unwrap();
        let got = t.as_tensor().unwrap();
        assert_eq!(
            (got.strides(), got.storage_offset()),
            (want.strides(), want.storage_offset()),
            "{k}"
        );
    }
}

#[test]
fn shared_storages_are_written_once_and_stay_shared() {
    let base = Tensor::arange(1000).unwrap().to_dtype(DType::F64).unwrap();
    let a = base.narrow(0, 10, 100).unwrap();
    let b = base.narrow(0, 500, 10).unwrap().unsqueeze(0).unwrap();
    let other = Tensor::ones([3]).unwrap();
    // An empty view at the very end of the storage.
    let end = base.narrow(0, 1000, 0).unwrap();
    let v = Value::List(vec![
        a.clone().into(),
        b.clone().into(),
        other.into(),
        a.into(),
        end.into(),
    ]);
    let bytes = save_to_bytes(&v).unwrap();
    // One storage of 8000 bytes and one of 12, not three copies.
    assert!(bytes.len() < 8000 + 2000, "{} bytes", bytes.len());
    let back = load_from_bytes(&bytes).unwrap();
    let items = back.as_seq().unwrap();
    let t = |i: usize| items[i].as_tensor().unwrap();
    assert!(t(0).storage().same(t(1).storage()) && t(0).storage().same(t(3).storage()));
    assert!(!t(0).storage().same(t(2).storage()));
    assert!(t(4).storage().same(t(0).storage()) && t(4).storage_offset() == 1000 && t(4).numel() == 0);
    assert_eq!(t(1).storage_offset(), 500);
    assert_eq!(t(1).to_vec::<f64>().unwrap()[0], 500.0);
    assert!(back.same(&v));
}

#[test]
fn nested_training_checkpoint() {
    let model = Linear::new(4, 3).unwrap();
    let mut opt = AdamW::new(model.parameters(), AdamWOptions::default()).unwrap();
    model
        .forward(&Tensor::randn([2, 4]).unwrap())
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    opt.step().unwrap();
    let mut ck = Dict::new();
    ck.insert("epoch", 3i64);
    ck.insert("model_state_dict", state_dict_to_value(&model.state_dict()));
    ck.insert("optimizer_state_dict", optimizer_state_dict_to_value(&opt.state_dict()));
    ck.insert("loss", 0.12);
    let v = Value::Dict(ck);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.pt");
    save(&v, &path).unwrap();
    // Atomic write: no temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["ck.pt"]);
    let back = load(&path).unwrap();
    assert!(back.same(&v));
    let e = load_state_dict(&path, &LoadOptions::new()).unwrap_err().to_string();
    assert!(e.contains("LoadOptions::entry(\"model_state_dict\")"), "{e}");
    let sd = load_state_dict(&path, &LoadOptions::new().entry("model_state_dict")).unwrap();
    assert_eq!(sd.keys().collect::<Vec<_>>(), ["weight", "bias"]);
    let d = back.as_dict().unwrap();
    assert_eq!(d.get_str("epoch").unwrap().as_i64(), Some(3));

    // Restore into fresh objects and continue identically.
    let model2 = Linear::new(4, 3).unwrap();
    model2
        .load_state_dict(
            &value_to_state_dict(d.get_str("model_state_dict").unwrap()).unwrap(),
            true,
        )
        .unwrap();
    let mut opt2 = AdamW::new(model2.parameters(), AdamWOptions::default()).unwrap();
    opt2.load_state_dict(&value_to_optimizer_state_dict(d.get_str("optimizer_state_dict").unwrap()).unwrap())
        .unwrap();
    let x = Tensor::randn([2, 4]).unwrap();
    for (m, o) in [(&model, &mut opt), (&model2, &mut opt2)] {
        o.zero_grad().unwrap();
        m.forward(&x).unwrap().sum().unwrap().backward().unwrap();
        o.step().unwrap();
    }
    for (k, t) in model.state_dict().iter() {
        assert_tensor_eq(k, model2.state_dict().get(k).unwrap(), t);
    }
}

#[test]
fn safetensors_roundtrip_with_metadata() {
    let mut sd = StateDict::new();
    for dt in ALL_DTYPES {
        sd.insert(dt.name(), sample(dt).t().unwrap());
    }
    let meta: HashMap<String, String> = [("format".to_string(), "pt".to_string())].into();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    save_safetensors(&sd, Some(&meta), &path).unwrap();
    let st = load_safetensors(&path).unwrap();
    assert_eq!(st.metadata, meta);
    assert_eq!(st.tensors.len(), sd.len());
    for (k, t) in sd.iter() {
        assert_tensor_eq(k, st.tensors.get(k).unwrap(), &t.contiguous().unwrap());
    }
}

#[test]
fn load_options() {
    let mut sd = StateDict::new();
    sd.insert("module.weight", Tensor::ones([2, 2]).unwrap());
    sd.insert("module.steps", Tensor::from_vec(vec![5i64], [1]).unwrap());
    sd.insert("head", Tensor::zeros([1]).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sd.pt");
    save_state_dict(&sd, &path).unwrap();
    assert!(load(&path).unwrap().as_dict().unwrap().is_ordered_dict());
    let opts = LoadOptions::new()
        .strip_prefix("module.")
        .add_prefix("net.")
        .dtype(DType::F64);
    let got = load_state_dict(&path, &opts).unwrap();
    assert_eq!(got.keys().collect::<Vec<_>>(), ["net.weight", "net.steps", "net.head"]);
    assert_eq!(got.get("net.weight").unwrap().dtype(), DType::F64);
    assert_eq!(
        got.get("net.steps").unwrap().dtype(),
        DType::I64,
        "integer tensors keep their dtype"
    );
    assert!(load_state_dict(&path, &LoadOptions::new().dtype(DType::I32)).is_err());
    assert!(load_state_dict(&path, &LoadOptions::new().entry("model")).is_err());
}

#[test]
fn plain_values_roundtrip() {
    let mut ints = Dict::new();
    for i in [
        0i64,
        1,
        255,
        256,
        65535,
        65536,
        -1,
        -129,
        i32::MAX as i64,
        i32::MIN as i64,
        1 << 40,
        i64::MAX,
        i64::MIN,
    ] {
        ints.insert(i, Value::Int(i));
    }
    let mut d = Dict::ordered();
    d.insert("ints", ints);
    d.insert(
        "floats",
        Value::List(vec![0.1.into(), (-0.0).into(), f64::NAN.into(), f64::INFINITY.into()]),
    );
    d.insert(
        "strs",
        Value::Tuple(vec!["".into(), "ünïcödé ✓".into(), "x".repeat(70000).into()]),
    );
    d.insert("bytes", Value::Bytes((0..=255).collect()));
    d.insert("empty", Value::Tuple(vec![]));
    d.insert(
        "tuples",
        Value::List((0..6).map(|n| Value::Tuple(vec![Value::None; n])).collect()),
    );
    d.insert("grad", Tensor::ones([2]).unwrap().requires_grad_(true).unwrap());
    let v = Value::Dict(d);
    let back = roundtrip(&v);
    assert!(back.same(&v));
    assert!(
        back.as_dict()
            .unwrap()
            .get_str("grad")
            .unwrap()
            .as_tensor()
            .unwrap()
            .requires_grad()
    );
}
