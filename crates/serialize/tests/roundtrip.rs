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
    Dict, DictKind, Key, LoadOptions, StateDict, Value, load, load_from_bytes, load_safetensors, load_state_dict,
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
    assert_eq!(got.keys().collect::<Vec<_>>(), ["net.head", "net.weight", "net.steps"]);
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

/// Whether `what` occurs in `bytes` (a `torch.save` archive stores its
/// pickle uncompressed, so the pickle's bytes are in the file as they are).
fn contains(bytes: &[u8], what: &[u8]) -> bool {
    bytes.windows(what.len()).any(|w| w == what)
}

/// A safetensors file written by hand with `tensors` (name, safetensors
/// dtype, shape, element size).
fn safetensors_file(tensors: &[(&str, &str, &[usize], usize)]) -> Vec<u8> {
    let mut header = Vec::new();
    let mut off = 0;
    for (name, dtype, shape, size) in tensors {
        let n = shape.iter().product::<usize>() * size;
        header.push(format!(
            "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data_offsets\":[{off},{}]}}",
            off + n
        ));
        off += n;
    }
    let mut json = format!("{{{}}}", header.join(",")).into_bytes();
    while json.len() % 8 != 0 {
        json.push(b' ');
    }
    let mut file = (json.len() as u64).to_le_bytes().to_vec();
    file.extend(json);
    file.extend(vec![0u8; off]);
    file
}

#[test]
fn format_detect_knows_each_format_and_nothing_else() {
    use ferrotorch_serialize::Format;
    let saved = save_to_bytes(&Value::Int(1)).unwrap();
    assert_eq!(Format::detect(&saved), Some(Format::TorchSave));
    let torch_saved = std::fs::read(format!(
        "{}/tests/data/torch_written/checkpoint.pt",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    assert_eq!(Format::detect(&torch_saved[..9]), Some(Format::TorchSave));
    // A zip's local file header is enough.
    assert_eq!(Format::detect(b"PK\x03\x04"), Some(Format::TorchSave));
    let st = common::read_local("linear.safetensors");
    assert_eq!(Format::detect(&st), Some(Format::Safetensors));
    assert_eq!(Format::detect(&st[..9]), Some(Format::Safetensors));
    assert_eq!(
        Format::detect(&safetensors_file(&[("a", "F32", &[2], 4)])),
        Some(Format::Safetensors)
    );
    // 8 bytes of header length, then `{`.
    assert_eq!(Format::detect(b"\x02\0\0\0\0\0\0\0{}"), Some(Format::Safetensors));
    assert_eq!(Format::detect(b"\x02\0\0\0\0\0\0\0{"), Some(Format::Safetensors));
    // A legacy torch.save file (PyTorch 2.15's first bytes of
    // `torch.save({"a": 1}, f, _use_new_zipfile_serialization=False)`).
    assert_eq!(
        Format::detect(b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.\x80\x02}"),
        None
    );
    for garbage in [
        &b""[..],
        b"P",
        b"PK\x03",
        b"PK\x05\x06\0\0\0\0",   // an empty zip's end record
        b"\x02\0\0\0\0\0\0\0",   // a header length and nothing else
        b"\x02\0\0\0\0\0\0\0[]", // not a JSON object
        b"{\"a\": 1}",           // JSON without the header length
        b"hello world, not a checkpoint",
    ] {
        assert_eq!(Format::detect(garbage), None, "{garbage:?}");
    }
    assert_eq!(Format::TorchSave.name(), "torch.save");
    assert_eq!(Format::Safetensors.name(), "safetensors");
}

#[test]
fn inspected_dtypes_as_the_cores() {
    use ferrotorch_serialize::{Item, inspect_bytes};
    let mut d = Dict::new();
    for dt in ALL_DTYPES {
        d.insert(dt.name(), sample(dt));
    }
    let found = inspect_bytes(&save_to_bytes(&Value::Dict(d)).unwrap()).unwrap();
    let got: Vec<(String, Option<DType>)> = found
        .entries
        .iter()
        .map(|e| match &e.item {
            Item::Tensor(t) => (e.name.clone(), t.core_dtype()),
            other => panic!("{}: {other}", e.name),
        })
        .collect();
    let want: Vec<(String, Option<DType>)> = ALL_DTYPES.iter().map(|&dt| (dt.name().to_string(), Some(dt))).collect();
    assert_eq!(got, want);
    // Safetensors dtypes: PyTorch's names; those the core lacks are None.
    let st = safetensors_file(&[
        ("a", "I8", &[2], 1),
        ("b", "U16", &[3], 2),
        ("c", "F8_E4M3", &[1], 1),
        ("d", "BF16", &[2, 2], 2),
        ("e", "I64", &[1], 8),
    ]);
    let found = inspect_bytes(&st).unwrap();
    let got: Vec<(String, String, Option<DType>)> = found
        .entries
        .iter()
        .map(|e| match &e.item {
            Item::Tensor(t) => (e.name.clone(), t.dtype.clone(), t.core_dtype()),
            other => panic!("{}: {other}", e.name),
        })
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        got,
        [
            (s("a"), s("int8"), None),
            (s("b"), s("uint16"), None),
            (s("c"), s("float8_e4m3fn"), None),
            (s("d"), s("bfloat16"), Some(DType::BF16)),
            (s("e"), s("int64"), Some(DType::I64)),
        ]
    );
}

/// `save_to_writer` writes the bytes `save` writes to a file (PyTorch
/// 2.15's `torch.load` reads them: an `OrderedDict` with its `_metadata`),
/// and hands the writer back at the end of them.
#[test]
fn save_to_writer_writes_what_save_writes() {
    use std::io::{Cursor, Seek, SeekFrom, Write};
    let mut d = Dict::ordered();
    d.insert("weight", sample(DType::F32));
    d.insert("steps", sample(DType::I64).t().unwrap());
    d.insert("note", "x");
    let v = Value::Dict(d);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.pt");
    save(&v, &path).unwrap();
    let file = std::fs::read(&path).unwrap();

    let cursor = ferrotorch_serialize::save_to_writer(&v, Cursor::new(Vec::new())).unwrap();
    assert_eq!(cursor.position(), file.len() as u64);
    let bytes = cursor.into_inner();
    assert!(bytes == file, "save_to_writer and save differ");
    assert!(load_from_bytes(&bytes).unwrap().same(&v));

    // Into a file, then more after it through the returned writer.
    let other = dir.path().join("w.pt");
    let mut f = ferrotorch_serialize::save_to_writer(&v, std::fs::File::create(&other).unwrap()).unwrap();
    assert_eq!(f.stream_position().unwrap(), file.len() as u64);
    f.seek(SeekFrom::End(0)).unwrap();
    f.flush().unwrap();
    drop(f);
    assert!(std::fs::read(&other).unwrap() == file);
    assert!(load(&other).unwrap().same(&v));
}

/// A state dict's `_metadata` as PyTorch keeps it: `{"_metadata":
/// OrderedDict([("", {"version": 1})])}` (a `Linear`'s).
fn linear_metadata() -> Dict {
    let mut version = Dict::new();
    version.insert("version", 1i64);
    let mut meta = Dict::with_kind(DictKind::OrderedDict);
    meta.insert("", version);
    let mut attrs = Dict::new();
    attrs.insert("_metadata", meta);
    attrs
}

fn same_dict(a: &Dict, b: &Dict) -> bool {
    Value::Dict(a.clone()).same(&Value::Dict(b.clone()))
}

/// `Dict::with_kind`, `set_kind` and `set_attributes` choose the Python
/// class a dict is written as, and its attributes: what PyTorch 2.15
/// wrote in `torch_written/checkpoint.pt` (a `Linear`'s state dict, an
/// `OrderedDict` with `_metadata`; MultiStepLR's `milestones`, a
/// `Counter`) is rebuilt from scratch. `torch.load` of the files written
/// here gives an `OrderedDict` whose `__dict__` is the `_metadata`, a
/// plain `dict` (no attributes), and a `Counter`.
#[test]
fn dict_kinds_and_attributes_are_pythons() {
    let torch = load(format!(
        "{}/tests/data/torch_written/checkpoint.pt",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let top = torch.as_dict().unwrap();
    let theirs = top.get_str("model_state_dict").unwrap().as_dict().unwrap();
    assert_eq!(theirs.kind(), DictKind::OrderedDict);
    assert!(same_dict(theirs.attributes().unwrap(), &linear_metadata()));

    let mut ours = Dict::with_kind(DictKind::OrderedDict);
    assert!(ours.is_ordered_dict() && ours.is_empty() && ours.attributes().is_none());
    for (k, v) in theirs.iter() {
        ours.insert(k.clone(), v.clone());
    }
    ours.set_attributes(Some(linear_metadata()));
    assert!(same_dict(&ours, theirs));
    assert!(same_dict(ours.attributes().unwrap(), &linear_metadata()));
    let bytes = save_to_bytes(&Value::Dict(ours.clone())).unwrap();
    // The pickle starts (after PROTO 2) with the class, as PyTorch's.
    assert!(contains(&bytes, b"\x80\x02ccollections\nOrderedDict\n"));
    assert!(contains(&bytes, b"_metadata"));
    let back = load_from_bytes(&bytes).unwrap();
    let back = back.as_dict().unwrap();
    assert_eq!((back.kind(), back.len()), (DictKind::OrderedDict, 2));
    assert!(same_dict(back.attributes().unwrap(), &linear_metadata()));
    assert_eq!(Value::Dict(back.clone()).type_name(), "OrderedDict");

    // As a plain dict: no class, and no attributes (a dict has none).
    let mut plain = ours.clone();
    plain.set_kind(DictKind::Dict);
    assert_eq!(plain.kind(), DictKind::Dict);
    assert!(!plain.is_ordered_dict());
    let bytes = save_to_bytes(&Value::Dict(plain)).unwrap();
    assert!(contains(&bytes, b"\x80\x02}") && !contains(&bytes, b"_metadata"));
    let back = load_from_bytes(&bytes).unwrap();
    let back = back.as_dict().unwrap();
    assert_eq!((back.kind(), back.len()), (DictKind::Dict, 2));
    assert!(back.attributes().is_none());

    // A plain dict made an OrderedDict; attributes taken away again.
    let mut d = Dict::new();
    d.insert("a", 1i64);
    d.set_kind(DictKind::OrderedDict);
    d.set_attributes(Some(linear_metadata()));
    d.set_attributes(None);
    assert!(d.attributes().is_none());
    let bytes = save_to_bytes(&Value::Dict(d)).unwrap();
    assert!(contains(&bytes, b"\x80\x02ccollections\nOrderedDict\n") && !contains(&bytes, b"_metadata"));
    let back = load_from_bytes(&bytes).unwrap();
    assert_eq!(back.as_dict().unwrap().kind(), DictKind::OrderedDict);
    assert!(back.as_dict().unwrap().attributes().is_none());

    // A Counter, as MultiStepLR's milestones.
    let milestones = top
        .get_str("scheduler_state_dict")
        .unwrap()
        .as_dict()
        .unwrap()
        .get_str("milestones")
        .unwrap();
    let mut counter = Dict::with_kind(DictKind::Counter);
    assert_eq!(counter.kind(), DictKind::Counter);
    counter.insert(30i64, 1i64);
    counter.insert(80i64, 1i64);
    assert!(Value::Dict(counter.clone()).same(milestones));
    let bytes = save_to_bytes(&Value::Dict(counter.clone())).unwrap();
    assert!(contains(&bytes, b"\x80\x02ccollections\nCounter\n"));
    let back = load_from_bytes(&bytes).unwrap();
    assert!(back.same(milestones));
    assert_eq!(back.type_name(), "Counter");
    assert!(!Value::Dict(Dict::with_kind(DictKind::Dict)).same(&Value::Dict(Dict::with_kind(DictKind::Counter))));
}

/// `LoadOptions::state_dict_from`: the state dict under `entry` of a
/// loaded checkpoint (or the top level), with the prefix and dtype options.
#[test]
fn load_options_state_dict_from_a_value() {
    let mut model = Dict::ordered();
    model.insert("module.weight", sample(DType::F32));
    model.insert("module.steps", Tensor::from_vec(vec![5i64], [1]).unwrap());
    model.insert("head", sample(DType::F16));
    let mut ck = Dict::new();
    ck.insert("epoch", 3i64);
    ck.insert("model", model.clone());
    let ck = Value::Dict(ck);

    let sd = LoadOptions::new().entry("model").state_dict_from(&ck).unwrap();
    assert_eq!(sd.keys().collect::<Vec<_>>(), ["module.weight", "module.steps", "head"]);
    assert_tensor_eq("weight", sd.get("module.weight").unwrap(), &sample(DType::F32));
    assert_tensor_eq("head", sd.get("head").unwrap(), &sample(DType::F16));

    let opts = LoadOptions::new()
        .entry("model")
        .strip_prefix("module.")
        .add_prefix("net.")
        .dtype(DType::F64);
    let sd = opts.state_dict_from(&ck).unwrap();
    assert_eq!(sd.keys().collect::<Vec<_>>(), ["net.head", "net.weight", "net.steps"]);
    assert_tensor_eq(
        "net.weight",
        sd.get("net.weight").unwrap(),
        &sample(DType::F32).to_dtype(DType::F64).unwrap(),
    );
    assert_eq!(sd.get("net.steps").unwrap().dtype(), DType::I64);

    // Without `entry` the top level is the state dict.
    let top = LoadOptions::new().state_dict_from(&Value::Dict(model)).unwrap();
    assert_eq!(
        top.keys().collect::<Vec<_>>(),
        ["module.weight", "module.steps", "head"]
    );
    let e = LoadOptions::new().state_dict_from(&ck).unwrap_err().to_string();
    assert!(
        e.starts_with("state dict entry 'epoch' is a Python int, not a tensor"),
        "{e}"
    );

    for (v, key) in [
        (&ck, "missing"),
        (&Value::List(vec![]), "model"),
        (&Value::Int(1), "model"),
    ] {
        assert_eq!(
            LoadOptions::new()
                .entry(key)
                .state_dict_from(v)
                .unwrap_err()
                .to_string(),
            format!("the checkpoint has no top-level entry '{key}'")
        );
    }
}

/// `Value::same` is Python's `==` for these objects, each arm both ways:
/// NaN equals NaN and 0.0 equals -0.0 (a round trip compares equal), list
/// and tuple differ, dicts compare kind and items in order, tensors by
/// dtype, shape and elements; unlike Python, `1`, `1.0` and `True` differ.
#[test]
fn value_same_is_pythons_equality() {
    let f = |x: f64| Value::Float(x);
    let t = |v: &[f32]| Value::Tensor(Tensor::from_slice(v));
    let dict = |kind: DictKind, items: &[(&str, i64)]| {
        let mut d = Dict::with_kind(kind);
        for (k, v) in items {
            d.insert(*k, Value::Int(*v));
        }
        Value::Dict(d)
    };
    let equal = [
        (Value::None, Value::None),
        (Value::Bool(true), Value::Bool(true)),
        (Value::Int(-3), Value::Int(-3)),
        (f(1.5), f(1.5)),
        (f(f64::NAN), f(-f64::NAN)),
        (f(0.0), f(-0.0)),
        (f(f64::INFINITY), f(f64::INFINITY)),
        (Value::Str("a".into()), Value::Str("a".into())),
        (Value::Bytes(vec![1, 2]), Value::Bytes(vec![1, 2])),
        (
            Value::List(vec![Value::Int(1), f(2.0)]),
            Value::List(vec![Value::Int(1), f(2.0)]),
        ),
        (Value::Tuple(vec![]), Value::Tuple(vec![])),
        (
            dict(DictKind::OrderedDict, &[("a", 1), ("b", 2)]),
            dict(DictKind::OrderedDict, &[("a", 1), ("b", 2)]),
        ),
        (t(&[1.0, f32::NAN]), t(&[1.0, f32::NAN])),
    ];
    for (a, b) in &equal {
        assert!(a.same(b) && b.same(a), "{a:?} == {b:?}");
    }
    let different = [
        (Value::None, Value::Bool(false)),
        (Value::Bool(true), Value::Bool(false)),
        (Value::Int(1), Value::Int(2)),
        (Value::Int(1), f(1.0)),
        (Value::Bool(true), Value::Int(1)),
        (f(1.0), f(1.0000000000000002)),
        (f(f64::NAN), f(0.0)),
        (f(f64::INFINITY), f(f64::NEG_INFINITY)),
        (Value::Str("a".into()), Value::Str("b".into())),
        (Value::Bytes(vec![1]), Value::Bytes(vec![1, 2])),
        (Value::List(vec![Value::Int(1)]), Value::Tuple(vec![Value::Int(1)])),
        (
            Value::List(vec![Value::Int(1)]),
            Value::List(vec![Value::Int(1), Value::Int(1)]),
        ),
        (Value::List(vec![Value::Int(1)]), Value::List(vec![Value::Int(2)])),
        (
            dict(DictKind::Dict, &[("a", 1)]),
            dict(DictKind::OrderedDict, &[("a", 1)]),
        ),
        (
            dict(DictKind::Dict, &[("a", 1), ("b", 2)]),
            dict(DictKind::Dict, &[("b", 2), ("a", 1)]),
        ),
        (dict(DictKind::Dict, &[("a", 1)]), dict(DictKind::Dict, &[("a", 2)])),
        (
            dict(DictKind::Dict, &[("a", 1)]),
            dict(DictKind::Dict, &[("a", 1), ("b", 2)]),
        ),
        (t(&[1.0, 2.0]), t(&[1.0, 3.0])),
        (t(&[1.0, 2.0]), t(&[1.0])),
        (t(&[1.0]), Value::Tensor(Tensor::from_slice(&[1.0f64]))),
    ];
    for (a, b) in &different {
        assert!(!a.same(b) && !b.same(a), "{a:?} != {b:?}");
    }
}
