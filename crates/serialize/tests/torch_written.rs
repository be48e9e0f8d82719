//! Files PyTorch 2.15 wrote (`tests/data/torch_written`, made by
//! `bench/check_pt_compat.py`): every dtype, views sharing a storage, a
//! training checkpoint's plain values, a Parameter, empty tensors, a
//! protocol-4 pickle and a safetensors file.

mod common;

use common::assert_tensor_eq;
use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::{ALL_DTYPES, DType, Tensor};
use ferrotorch_serialize::{Value, load, load_safetensors, save_to_bytes, value_to_optimizer_state_dict};

fn file(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/torch_written")
        .join(name)
}

/// The values `check_pt_compat.py` writes for `dtype`.
fn values(dtype: DType) -> Tensor {
    let a = Tensor::arange(12).unwrap();
    let t = match dtype {
        DType::Bool => a.remainder(3).unwrap().eq(0).unwrap(),
        DType::U8 => a.to_dtype(DType::U8).unwrap(),
        d if d.is_floating_point() => a.sub(5).unwrap().to_dtype(d).unwrap().div(4).unwrap(),
        d => a.sub(5).unwrap().to_dtype(d).unwrap(),
    };
    t.reshape([3, 4]).unwrap()
}

fn get<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.as_dict()
        .unwrap()
        .get_str(key)
        .unwrap_or_else(|| panic!("no key {key}"))
}

#[test]
fn every_dtype() {
    let v = load(file("dtypes.pt")).unwrap();
    assert_eq!(v.as_dict().unwrap().len(), ALL_DTYPES.len());
    for d in ALL_DTYPES {
        assert_tensor_eq(d.name(), get(&v, d.name()).as_tensor().unwrap(), &values(d));
    }
}

#[test]
fn views_share_one_storage_with_strides_and_offsets() {
    let v = load(file("views.pt")).unwrap();
    let t = |k: &str| get(&v, k).as_tensor().unwrap().clone();
    let base = Tensor::arange(24)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap()
        .reshape([4, 6])
        .unwrap();
    let cases = [
        ("base", base.clone(), vec![6, 1], 0),
        ("t", base.t().unwrap(), vec![1, 6], 0),
        (
            "slice",
            base.narrow(0, 1, 3).unwrap().narrow(1, 2, 3).unwrap(),
            vec![6, 1],
            8,
        ),
        ("row", base.select(0, 2).unwrap(), vec![1], 12),
        ("scalar", base.select(0, 1).unwrap().select(0, 1).unwrap(), vec![], 7),
    ];
    for (k, want, strides, offset) in cases {
        let got = t(k);
        assert_tensor_eq(k, &got, &want.contiguous().unwrap());
        assert_eq!(got.strides(), strides.as_slice(), "{k} strides");
        assert_eq!(got.storage_offset(), offset, "{k} offset");
        assert!(got.storage().same(t("base").storage()), "{k} shares the base's storage");
    }
    assert_eq!(t("strided").strides(), &[6, 2]);
    // A write through one view is seen through the others, as in PyTorch.
    t("base").select(0, 2).unwrap().fill_(-1.0).unwrap();
    assert_eq!(t("row").to_vec::<f32>().unwrap(), [-1.0; 6]);
    // Saved again, they stay one storage.
    let again = ferrotorch_serialize::load_from_bytes(&save_to_bytes(&v).unwrap()).unwrap();
    let s0 = get(&again, "base").as_tensor().unwrap().storage().clone();
    for k in ["t", "slice", "row", "strided", "scalar"] {
        assert!(get(&again, k).as_tensor().unwrap().storage().same(&s0), "{k}");
    }
}

#[test]
fn training_checkpoint_plain_values() {
    let v = load(file("checkpoint.pt")).unwrap();
    let d = v.as_dict().unwrap();
    assert!(!d.is_ordered_dict());
    assert_eq!(get(&v, "epoch").as_i64(), Some(3));
    assert_eq!(get(&v, "loss").as_f64(), Some(0.12));
    assert_eq!(get(&v, "name").as_str(), Some("run"));
    assert!(get(&v, "flags").same(&Value::List(vec![Value::Bool(true), Value::Bool(false), Value::None])));
    assert!(
        get(&v, "size").same(&Value::Tuple(vec![Value::Int(2), Value::Int(3)])),
        "torch.Size loads as a tuple"
    );
    assert!(get(&v, "bytes").same(&Value::Bytes(vec![0, 255, b'a', b'b'])));
    assert_eq!(get(&v, "big").as_i64(), Some(1 << 40));
    assert_eq!(get(&v, "neg").as_i64(), Some(-70000));
    assert_eq!(get(&v, "min").as_i64(), Some(i64::MIN));
    assert!(get(&v, "nan").as_f64().unwrap().is_nan());
    assert_eq!(get(&v, "inf").as_f64(), Some(f64::NEG_INFINITY));
    let tuple = Value::Tuple(vec![
        Value::Int(1),
        Value::Float(2.5),
        Value::Str("x".into()),
        Value::Int(4),
    ]);
    assert!(get(&v, "tuple").same(&tuple));
    let c = get(get(get(&v, "nested"), "a"), "b").as_seq().unwrap();
    assert_eq!(c[0].as_i64(), Some(1));
    assert_eq!(c[1].as_dict().unwrap().get_str("c").and_then(Value::as_i64), Some(2));
    let model = ferrotorch_serialize::value_to_state_dict(get(&v, "model_state_dict")).unwrap();
    assert_eq!(model.keys().collect::<Vec<_>>(), ["weight", "bias"]);
    // MultiStepLR's milestones are a collections.Counter.
    let milestones = get(get(&v, "scheduler_state_dict"), "milestones").as_dict().unwrap();
    assert_eq!(milestones.kind(), ferrotorch_serialize::DictKind::Counter);
    assert_eq!(milestones.get_int(30).and_then(Value::as_i64), Some(1));
    let again = ferrotorch_serialize::load_from_bytes(&save_to_bytes(&v).unwrap()).unwrap();
    assert!(again.same(&v));
    let opt = value_to_optimizer_state_dict(get(&v, "optimizer_state_dict")).unwrap();
    assert_eq!(opt.state.len(), 2);
    assert_eq!(opt.param_groups[0].params, [0, 1]);
}

#[test]
fn parameter_requires_grad() {
    let v = load(file("parameter.pt")).unwrap();
    let p = get(&v, "p").as_tensor().unwrap();
    assert!(p.requires_grad() && p.is_leaf());
    assert_eq!(p.shape(), &[2, 2]);
}

#[test]
fn empty_and_special_values() {
    let v = load(file("empty.pt")).unwrap();
    assert_eq!(get(&v, "e").as_tensor().unwrap().shape(), &[0, 3]);
    assert_eq!(get(&v, "z").as_tensor().unwrap().shape(), &[] as &[usize]);
    let s = get(&v, "specials").as_tensor().unwrap().to_vec::<f32>().unwrap();
    assert!(s[0].is_nan() && s[1] == 0.0 && s[1].is_sign_negative() && s[2] == f32::INFINITY);
}

#[test]
fn protocol_4_pickle() {
    let v = load(file("proto4.pt")).unwrap();
    assert_eq!(get(&v, "text").as_str(), Some("protocol 4"));
    assert!(get(&v, "bytes").same(&Value::Bytes(b"xyz".to_vec())));
    let w = get(&v, "w").as_tensor().unwrap();
    assert_eq!((w.shape(), w.strides()), (&[2, 3][..], &[1, 2][..]));
}

#[test]
fn safetensors_with_metadata() {
    let st = load_safetensors(file("st.safetensors")).unwrap();
    assert_eq!(st.metadata.get("note").map(String::as_str), Some("by hand"));
    assert_tensor_eq("a", st.tensors.get("a").unwrap(), &values(DType::F32));
    assert_tensor_eq("b", st.tensors.get("b").unwrap(), &values(DType::I64));
    assert_tensor_eq("c", st.tensors.get("c").unwrap(), &values(DType::BF16));
}

/// PyTorch's MultiStepLR state dict (in checkpoint.pt: milestones [30, 80],
/// one step taken) loads into ferrotorch's MultiStepLR, and ferrotorch's
/// state dict converts back with the milestones as a Counter.
#[test]
fn scheduler_state_dict_both_ways() {
    use ferrotorch::optim::lr_scheduler::{LrScheduler, MultiStepLR};
    use ferrotorch::optim::{AdamW, AdamWOptions};
    use ferrotorch_serialize::{DictKind, scheduler_state_dict_to_value, value_to_scheduler_state_dict};

    let v = load(file("checkpoint.pt")).unwrap();
    let theirs = get(&v, "scheduler_state_dict");
    let p = ferrotorch::nn::Parameter::new(Tensor::zeros([2]).unwrap()).unwrap();
    let mut opt = AdamW::new(vec![p], AdamWOptions::default()).unwrap();
    let mut sched = MultiStepLR::new(&mut opt, &[5], 0.5).unwrap();
    sched
        .load_state_dict(&value_to_scheduler_state_dict(theirs).unwrap())
        .unwrap();
    assert_eq!(sched.last_epoch(), 1);
    let ours = scheduler_state_dict_to_value(&sched.state_dict());
    let m = get(&ours, "milestones").as_dict().unwrap();
    assert_eq!(m.kind(), DictKind::Counter);
    assert_eq!(m.keys().cloned().collect::<Vec<_>>(), [30i64.into(), 80i64.into()]);
    for k in ["milestones", "gamma", "last_epoch", "base_lrs", "_last_lr"] {
        assert!(
            get(&ours, k).same(get(theirs, k)),
            "{k}: {:?} vs {:?}",
            get(&ours, k),
            get(theirs, k)
        );
    }
}
