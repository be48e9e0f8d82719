//! Behaviour the other tests leave loose, checked against what Python 3 and
//! PyTorch 2.15 write and read (`tests/data/mutation_gaps/gen.py`): every
//! pickle opcode Python's protocols 1-5 write and hand-made ones Python's
//! unpickler reads, each compared with the value's Python repr; the exact
//! protocol-2 bytes Python's pickler writes; torch.save files with every
//! dtype, views with offsets and strides, parameters and a state dict with
//! its `_metadata`; and the exact errors of malformed input.

mod common;

use std::io::{Cursor, Read, Write};
use std::path::PathBuf;

use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::{DType, Tensor};
use ferrotorch_serialize::MAX_DEPTH;
use ferrotorch_serialize::{Dict, DictKind, Error, Value, load, load_from_bytes, save, save_to_bytes};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/mutation_gaps")
}

fn cases() -> serde_json::Value {
    let p = data_dir().join("cases.json");
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

use common::pt;

/// The `data.pkl` entry of an archive.
fn data_pkl(archive: &[u8]) -> Vec<u8> {
    let mut z = zip::ZipArchive::new(Cursor::new(archive)).unwrap();
    let name = "archive/data.pkl";
    let mut out = Vec::new();
    z.by_name(name).unwrap().read_to_end(&mut out).unwrap();
    out
}

fn err(pkl: &[u8]) -> Error {
    match load_from_bytes(&pt(pkl, &[])) {
        Ok(v) => panic!("{pkl:?} loaded {v:?}"),
        Err(e) => e,
    }
}

/// Asserts the error of `pkl` is a pickle error at `offset` whose message
/// is `detail`.
fn pickle_err(pkl: &[u8], offset: usize, detail: &str) {
    match err(pkl) {
        Error::Pickle { offset: o, detail: d } => {
            assert_eq!((o, d.as_str()), (offset, detail), "{pkl:?}");
        }
        e => panic!("{pkl:?}: {e:?}"),
    }
}

/// Every pickle Python writes (protocols 1-5 where no text opcode is
/// needed; protocol 0 where none is) and every hand-made one reads back as
/// the value Python reads, compared through Python's repr.
#[test]
fn python_pickles_read_as_python_reads_them() {
    let c = cases();
    let read = c["read"].as_array().unwrap();
    assert!(read.len() > 150);
    for case in read {
        let name = case["name"].as_str().unwrap();
        let pkl = unhex(case["pkl"].as_str().unwrap());
        if case.get("torch_refuses").is_some() {
            // PyTorch's weights-only unpickler refuses `builtins.bytes`.
            let e = err(&pkl);
            assert!(
                matches!(&e, Error::DisallowedGlobal(g) if g == "builtins.bytes"),
                "{name}: {e:?}"
            );
            continue;
        }
        let v = load_from_bytes(&pt(&pkl, &[])).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(v.to_string(), case["repr"].as_str().unwrap(), "{name}");
    }
}

/// What ferrotorch writes is, byte for byte, Python's protocol-2 pickle of
/// the same value (memo PUTs nobody reads removed).
#[test]
fn written_pickles_are_pythons_bytes() {
    let c = cases();
    let write = c["write"].as_array().unwrap();
    assert!(write.len() >= 10);
    for case in write {
        let name = case["name"].as_str().unwrap();
        let pkl = unhex(case["pkl"].as_str().unwrap());
        let v = load_from_bytes(&pt(&pkl, &[])).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(v.to_string(), case["repr"].as_str().unwrap(), "{name}");
        let ours = data_pkl(&save_to_bytes(&v).unwrap());
        assert_eq!(ours, pkl, "{name}");
    }
}

/// The value at `path` (`/key/key`, `""` for the root) of nested dicts.
fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('/').skip(1).fold(v, |v, k| {
        let d = v.as_dict().unwrap_or_else(|| panic!("{path}: not a dict at {k}"));
        d.get_str(k)
            .or_else(|| k.parse().ok().and_then(|i| d.get_int(i)))
            .unwrap_or_else(|| panic!("{path}: no {k}"))
    })
}

fn check_tensor(name: &str, t: &Tensor, want: &serde_json::Value) {
    let path = want["path"].as_str().unwrap();
    let what = format!("{name}{path}");
    let usizes = |k: &str| -> Vec<usize> {
        want[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as usize)
            .collect()
    };
    assert_eq!(
        t.dtype(),
        DType::from_name(want["dtype"].as_str().unwrap()).unwrap(),
        "{what}"
    );
    assert_eq!(t.shape(), usizes("shape").as_slice(), "{what} shape");
    assert_eq!(t.strides(), usizes("strides").as_slice(), "{what} strides");
    assert_eq!(
        t.storage_offset(),
        want["offset"].as_u64().unwrap() as usize,
        "{what} offset"
    );
    assert_eq!(
        t.requires_grad(),
        want["requires_grad"].as_bool().unwrap(),
        "{what} requires_grad"
    );
    assert_eq!(
        t.storage().nbytes() / t.element_size(),
        want["storage_numel"].as_u64().unwrap() as usize,
        "{what} storage size"
    );
    let data = want["data"].as_array().unwrap();
    if t.dtype() == DType::I64 {
        let got = t.to_vec::<i64>().unwrap();
        let exp: Vec<i64> = data.iter().map(|x| x.as_i64().unwrap()).collect();
        assert_eq!(got, exp, "{what}");
    } else {
        let got = t.to_vec::<f64>().unwrap();
        let exp: Vec<f64> = data.iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(got.len(), exp.len(), "{what}");
        for (i, (a, b)) in got.iter().zip(&exp).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "{what}[{i}]: {a} vs {b}");
        }
    }
}

/// torch.save files read as PyTorch wrote them: every dtype (with extreme
/// elements and storage offsets), views sharing a storage, parameters,
/// requires_grad, a state dict's `_metadata`; and a single tensor written
/// back is PyTorch's own `data.pkl` and storage bytes.
#[test]
fn torch_files_read_and_write_as_pytorch() {
    let c = cases();
    let files = c["torch"].as_array().unwrap();
    assert!(files.len() >= 9);
    for case in files {
        let name = case["name"].as_str().unwrap();
        let path = data_dir().join(format!("{name}.pt"));
        let bytes = std::fs::read(&path).unwrap();
        let from_path = load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let v = load_from_bytes(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(v.same(&from_path), "{name}");
        let tensors = case["tensors"].as_array().unwrap();
        let mut seen: Vec<(u64, Tensor)> = Vec::new();
        for want in tensors {
            let t = at(&v, want["path"].as_str().unwrap()).as_tensor().unwrap();
            check_tensor(name, t, want);
            let t2 = at(&from_path, want["path"].as_str().unwrap()).as_tensor().unwrap();
            check_tensor(name, t2, want);
            let key = want["storage"].as_u64().unwrap();
            for (k, other) in &seen {
                assert_eq!(
                    *k == key,
                    t.storage().same(other.storage()),
                    "{name}{}: storage sharing",
                    want["path"]
                );
            }
            seen.push((key, t.clone()));
        }
        if let Some(meta) = case["metadata"].as_object() {
            let d = v.as_dict().unwrap();
            assert!(d.is_ordered_dict(), "{name}");
            let attrs = d.attributes().unwrap().get_str("_metadata").unwrap().as_dict().unwrap();
            assert_eq!(attrs.len(), meta.len(), "{name}");
            for (k, m) in meta {
                let got = attrs.get_str(k).unwrap().as_dict().unwrap();
                assert_eq!(
                    got.get_str("version").unwrap().as_i64(),
                    m["version"].as_i64(),
                    "{name} {k}"
                );
            }
        }
        // Written back: the same values (and PyTorch's bytes where its
        // pickle has no shared memo entries).
        let ours = save_to_bytes(&v).unwrap();
        let again = load_from_bytes(&ours).unwrap();
        assert!(again.same(&v), "{name}");
        for want in tensors {
            let t = at(&again, want["path"].as_str().unwrap()).as_tensor().unwrap();
            check_tensor(name, t, want);
        }
        if case["exact"].as_bool().unwrap() {
            assert_eq!(data_pkl(&ours), unhex(case["pkl"].as_str().unwrap()), "{name}");
            let mut z = zip::ZipArchive::new(Cursor::new(&ours)).unwrap();
            for (entry, hex) in case["entries"].as_object().unwrap() {
                let mut got = Vec::new();
                z.by_name(&format!("archive/{entry}"))
                    .unwrap()
                    .read_to_end(&mut got)
                    .unwrap();
                assert_eq!(got, unhex(hex.as_str().unwrap()), "{name} {entry}");
            }
        }
        // Through a file as well.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("again.pt");
        save(&v, &file).unwrap();
        assert!(load(&file).unwrap().same(&v), "{name}");
    }
}

/// Errors name the opcode's offset and what was wrong, including the kind
/// of object the opcode met.
#[test]
fn malformed_pickles_exact_errors() {
    pickle_err(b"\x80\x02K\x01K\x02a.", 6, "APPEND to a int (only lists are allowed)");
    pickle_err(
        b"\x80\x02]K\x01K\x02s.",
        7,
        "SETITEM on a list (only dicts are allowed)",
    );
    pickle_err(b"\x80\x02N)R.", 4, "REDUCE on a None (not a global)");
    pickle_err(
        b"\x80\x02G?\xf0\x00\x00\x00\x00\x00\x00)R.",
        12,
        "REDUCE on a float (not a global)",
    );
    pickle_err(b"\x80\x02]}b.", 4, "BUILD on a list (only OrderedDict and Tensor)");
    pickle_err(b"\x80\x02\x88}b.", 4, "BUILD on a bool (only OrderedDict and Tensor)");
    pickle_err(
        b"\x80\x03C\x01a}b.",
        6,
        "BUILD on a bytes (only OrderedDict and Tensor)",
    );
    pickle_err(
        b"\x80\x02X\x01\x00\x00\x00a}b.",
        9,
        "BUILD on a str (only OrderedDict and Tensor)",
    );
    pickle_err(b"\x80\x02)}b.", 4, "BUILD on a tuple (only OrderedDict and Tensor)");
    pickle_err(b"\x80\x02}}b.", 4, "BUILD on a dict (only OrderedDict and Tensor)");
    pickle_err(
        b"\x80\x02ccollections\nOrderedDict\n}b.",
        28,
        "BUILD on a global (only OrderedDict and Tensor)",
    );
    pickle_err(
        b"\x80\x02X\x05\x00\x00\x00abc.",
        2,
        "length 5 runs past the end of the data (4 bytes left)",
    );
    pickle_err(b"\x80\x02J\x01\x00", 2, "truncated: needs 4 more bytes, 2 left");
    pickle_err(b"\x80\x02cfoo", 2, "truncated: GLOBAL without a newline");
    pickle_err(b"\x80\x02K\x01K\x02(00t.", 9, "MARK above the stack top");
    pickle_err(b"\x80\x02K\x01\x86.", 4, "stack underflow");
    pickle_err(b"\x80\x02\x85.", 2, "stack underflow");
    pickle_err(b"\x80\x02K\x01K\x02K\x03d.", 8, "no MARK on the stack");
    pickle_err(b"\x80\x02(K\x01d.", 5, "odd number of items for a dict");
    pickle_err(
        b"\x80\x02X\x01\x00\x00\x00aK\x01\x93.",
        10,
        "STACK_GLOBAL needs two strings",
    );
    pickle_err(
        b"\x80\x02ctorch\nSize\n(K\x01K\x02tR.",
        20,
        "torch.Size takes one argument",
    );
    // Integers past 64 bits (9-byte LONG1s whose top bytes are not a sign
    // extension; Python reads them as 2**63, 2**64 - 1 and -2**63 - 1).
    for bytes in [
        &b"\x00\x00\x00\x00\x00\x00\x00\x80\x00"[..],
        b"\xff\xff\xff\xff\xff\xff\xff\xff\x00",
        b"\xff\xff\xff\xff\xff\xff\xff\x7f\xff",
    ] {
        let mut p = b"\x80\x02\x8a\x09".to_vec();
        p.extend(bytes);
        p.push(b'.');
        pickle_err(&p, 2, "integer does not fit 64 bits");
    }
}

/// `_rebuild_tensor_v2` of storage `0` (three float32s) as `(3,)`, with
/// `requires_grad` given by the opcodes `rg`; no PROTO and no STOP.
fn tensor_call(rg: &[u8]) -> Vec<u8> {
    let mut p = b"ctorch._utils\n_rebuild_tensor_v2\n(".to_vec();
    p.extend(b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x03tQ");
    p.extend(b"K\x00K\x03\x85K\x01\x85");
    p.extend(rg);
    p.extend(b"ccollections\nOrderedDict\n)RtR");
    p
}

fn storage0() -> Vec<u8> {
    [1.0f32, 2.0, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn load_tensor_pkl(body: &[u8]) -> ferrotorch_serialize::Result<Value> {
    let mut p = b"\x80\x02".to_vec();
    p.extend(body);
    p.push(b'.');
    load_from_bytes(&pt(&p, &[("0", &storage0())]))
}

/// `requires_grad` given as an int is Python's truth value of it (what
/// `tensor.requires_grad = 1` does); a tensor's BUILD state must be empty;
/// `_rebuild_parameter_with_state` takes a `(dict, slots)` state of empties
/// (what `torch._utils._get_obj_state` returns for a plain Parameter).
#[test]
fn tensor_flags_and_states() {
    for (rg, want) in [
        (&b"K\x00"[..], false),
        (b"K\x01", true),
        (b"K\x02", true),
        (b"\x89", false),
        (b"\x88", true),
    ] {
        let v = load_tensor_pkl(&tensor_call(rg)).unwrap();
        let t = v.as_tensor().unwrap();
        assert_eq!(t.requires_grad(), want, "{rg:?}");
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    }
    let mut built = tensor_call(b"\x89");
    built.extend(b"}b");
    assert_eq!(load_tensor_pkl(&built).unwrap().as_tensor().unwrap().shape(), [3]);
    let mut attrs = tensor_call(b"\x89");
    attrs.extend(b"}X\x01\x00\x00\x00aK\x01sb");
    let e = load_tensor_pkl(&attrs).unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported(m) if m == "a tensor with Python attributes"),
        "{e:?}"
    );

    let with_state = |state: &[u8]| {
        let mut p = b"ctorch._utils\n_rebuild_parameter_with_state\n(".to_vec();
        p.extend(tensor_call(b"\x89"));
        p.extend(b"\x88ccollections\nOrderedDict\n)R");
        p.extend(state);
        p.extend(b"tR");
        load_tensor_pkl(&p)
    };
    for empty in [&b"(}Nt"[..], b"}", b"N", b")", b"((}t}t"] {
        let v = with_state(empty).unwrap_or_else(|e| panic!("{empty:?}: {e}"));
        let t = v.as_tensor().unwrap();
        assert!(t.requires_grad() && t.is_leaf(), "{empty:?}");
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    }
    for full in [
        &b"(}X\x01\x00\x00\x00aK\x01sNt"[..],
        b"}X\x01\x00\x00\x00aK\x01s",
        b"(NK\x01t",
    ] {
        let e = with_state(full).unwrap_err();
        assert!(
            matches!(&e, Error::Unsupported(m) if m == "a parameter with Python attributes"),
            "{full:?}: {e:?}"
        );
    }
}

/// An OrderedDict's BUILD state is kept as its attributes when its keys
/// are strings (as a state dict's `_metadata`), dropped otherwise.
#[test]
fn ordered_dict_attributes_from_build() {
    let v = load_from_bytes(&pt(
        b"\x80\x02ccollections\nOrderedDict\n)RX\x01\x00\x00\x00kK\x05s}X\x01\x00\x00\x00aK\x01sb.",
        &[],
    ))
    .unwrap();
    let d = v.as_dict().unwrap();
    assert_eq!(d.get_str("k").and_then(Value::as_i64), Some(5));
    let a = d.attributes().unwrap();
    assert_eq!((a.len(), a.get_str("a").and_then(Value::as_i64)), (1, Some(1)));
    let v = load_from_bytes(&pt(b"\x80\x02ccollections\nOrderedDict\n)R}K\x01K\x02sb.", &[])).unwrap();
    assert!(v.as_dict().unwrap().attributes().is_none());
    // A (dict, slots) state is dropped.
    let v = load_from_bytes(&pt(b"\x80\x02ccollections\nOrderedDict\n)R}N\x86b.", &[])).unwrap();
    assert!(v.as_dict().unwrap().attributes().is_none());
}

/// `n` lists around `inner`, as opcodes: `]]...inner a a ...`.
fn nest_lists(n: usize, inner: &[u8]) -> Vec<u8> {
    let mut p = b"\x80\x02".to_vec();
    p.extend(std::iter::repeat_n(b']', n));
    p.extend(inner);
    p.extend(std::iter::repeat_n(b'a', n));
    p.push(b'.');
    p
}

type Wrap = fn(Value) -> Value;

fn nested(n: usize, inner: Value, wrap: impl Fn(Value) -> Value) -> Value {
    (0..n).fold(inner, |v, _| wrap(v))
}

/// Values may nest exactly `MAX_DEPTH` levels (the root is level 0) when
/// read, written and shown; one more is an error (or `...` when shown). An
/// OrderedDict's attributes are one level below it.
#[test]
fn nesting_limit_is_exact() {
    // Reading: MAX_DEPTH dicts below the root load, one more does not.
    for (n, ok) in [(MAX_DEPTH, true), (MAX_DEPTH + 1, false)] {
        let mut p = b"\x80\x02".to_vec();
        for _ in 0..n {
            p.extend(b"}K\x00");
        }
        p.push(b'}');
        p.extend(std::iter::repeat_n(b's', n));
        p.push(b'.');
        match load_from_bytes(&pt(&p, &[])) {
            Ok(mut v) => {
                assert!(ok, "{n}");
                let mut levels = 0;
                while let Some(inner) = v.as_dict().and_then(|d| d.get_int(0)).cloned() {
                    v = inner;
                    levels += 1;
                }
                assert_eq!(levels, n);
            }
            Err(e) => {
                assert!(!ok, "{n}: {e}");
                assert!(e.to_string().contains("deeper than 256"), "{e}");
            }
        }
        let l = load_from_bytes(&pt(&nest_lists(n, b"N"), &[]));
        assert_eq!(l.is_ok(), ok, "{n} lists");
    }
    // An OrderedDict with attributes at level MAX_DEPTH - 1: the attribute
    // dict is at MAX_DEPTH and its value one below: too deep.
    let od = b"ccollections\nOrderedDict\n)R}X\x01\x00\x00\x00aK\x01sb";
    assert!(load_from_bytes(&pt(&nest_lists(MAX_DEPTH - 1, od), &[])).is_err());
    let mut v = load_from_bytes(&pt(&nest_lists(MAX_DEPTH - 2, od), &[])).unwrap();
    for _ in 0..MAX_DEPTH - 2 {
        v = v.as_seq().unwrap()[0].clone();
    }
    let a = v.as_dict().unwrap().attributes().unwrap().clone();
    assert_eq!(a.get_str("a").and_then(Value::as_i64), Some(1));
    // An empty attribute dict at level MAX_DEPTH + 1.
    let od_empty = b"ccollections\nOrderedDict\n)R}b";
    assert!(load_from_bytes(&pt(&nest_lists(MAX_DEPTH, od_empty), &[])).is_err());
    assert!(load_from_bytes(&pt(&nest_lists(MAX_DEPTH - 1, od_empty), &[])).is_ok());

    // Writing and showing: every kind of container counts a level.
    let wraps: [(&str, Wrap); 4] = [
        ("list", |v| Value::List(vec![v])),
        ("tuple1", |v| Value::Tuple(vec![v])),
        ("tuple4", |v| {
            Value::Tuple(vec![Value::None, Value::None, Value::None, v])
        }),
        ("dict", |v| {
            let mut d = Dict::new();
            d.insert("k", v);
            Value::Dict(d)
        }),
    ];
    for (name, wrap) in wraps {
        let ok = nested(MAX_DEPTH, Value::Int(1), wrap);
        let bytes = save_to_bytes(&ok).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(load_from_bytes(&bytes).unwrap().same(&ok), "{name}");
        let shown = ok.to_string();
        assert!(!shown.contains("...") && shown.contains('1'), "{name}");
        let deep = nested(MAX_DEPTH + 1, Value::Int(1), wrap);
        let e = save_to_bytes(&deep).unwrap_err();
        assert!(e.to_string().contains("deeper than 256"), "{name}: {e}");
        let shown = deep.to_string();
        assert!(shown.contains("...") && !shown.contains('1'), "{name}");
    }
    let lists = nested(MAX_DEPTH + 1, Value::Int(1), |v| Value::List(vec![v]));
    let want = format!("{}...{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    assert_eq!(lists.to_string(), want);
    // An OrderedDict's attributes are written one level below it.
    let mut attrs = Dict::new();
    attrs.insert("a", 1i64);
    let mut od = Dict::ordered();
    od.set_attributes(Some(attrs));
    let od = Value::Dict(od);
    let wrap = |v| Value::List(vec![v]);
    assert!(save_to_bytes(&nested(MAX_DEPTH - 1, od.clone(), wrap)).is_err());
    let fits = nested(MAX_DEPTH - 2, od, wrap);
    assert!(load_from_bytes(&save_to_bytes(&fits).unwrap()).unwrap().same(&fits));
}

/// A plain dict has no attributes in Python, so none are written; an
/// OrderedDict with an empty attribute dict is written as Python writes
/// one without attributes.
#[test]
fn written_attributes() {
    let mut attrs = Dict::new();
    attrs.insert("a", 1i64);
    let mut d = Dict::new();
    d.insert("k", 2i64);
    d.set_attributes(Some(attrs));
    let back = load_from_bytes(&save_to_bytes(&Value::Dict(d)).unwrap()).unwrap();
    let back = back.as_dict().unwrap();
    assert_eq!((back.kind(), back.len()), (DictKind::Dict, 1));
    assert!(back.attributes().is_none());

    let c = cases();
    let case = c["write"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "ordered")
        .unwrap();
    let pkl = unhex(case["pkl"].as_str().unwrap());
    let mut v = load_from_bytes(&pt(&pkl, &[])).unwrap();
    let Value::Dict(d) = &mut v else { panic!() };
    d.set_attributes(Some(Dict::new()));
    assert_eq!(data_pkl(&save_to_bytes(&v).unwrap()), pkl);
}

/// A tensor is shown with its size as a Python tuple and its dtype.
#[test]
fn tensor_repr() {
    let t0 = Tensor::from_vec(vec![7i64], Vec::<usize>::new()).unwrap();
    let t1 = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], vec![3]).unwrap();
    let t2 = Tensor::from_vec(vec![1.0f64; 6], vec![2, 3]).unwrap();
    let t3 = Tensor::from_vec(vec![1u8; 24], vec![2, 3, 4]).unwrap();
    let v = Value::List(vec![t0.into(), t1.into(), t2.into(), t3.into()]);
    assert_eq!(
        v.to_string(),
        "[tensor(..., size=(), dtype=torch.int64), tensor(..., size=(3,), dtype=torch.float32), \
         tensor(..., size=(2, 3), dtype=torch.float64), tensor(..., size=(2, 3, 4), dtype=torch.uint8)]"
    );
}

fn list(v: &[i64]) -> Value {
    Value::List(v.iter().map(|&i| Value::Int(i)).collect())
}

fn dict(kind: DictKind, items: &[(&str, i64)]) -> Value {
    let mut d = Dict::with_kind(kind);
    for &(k, v) in items {
        d.insert(k, v);
    }
    Value::Dict(d)
}

fn tensor<T: ferrotorch_core::Element>(v: Vec<T>, shape: &[usize]) -> Value {
    Value::Tensor(Tensor::from_vec(v, shape.to_vec()).unwrap())
}

/// `Value::same` is Python's `==` on values of one type (with NaN equal to
/// NaN), and false across types.
#[test]
fn same_is_pythons_equality_within_a_type() {
    use DictKind::{Counter, Dict as Plain, OrderedDict};
    let f = Value::Float;
    let s = |x: &str| Value::Str(x.into());
    let b = |x: &[u8]| Value::Bytes(x.to_vec());
    let equal: Vec<(Value, Value)> = vec![
        (Value::None, Value::None),
        (Value::Bool(true), Value::Bool(true)),
        (Value::Bool(false), Value::Bool(false)),
        (Value::Int(-3), Value::Int(-3)),
        (f(0.5), f(0.5)),
        (f(0.0), f(-0.0)),
        (f(f64::NAN), f(-f64::NAN)),
        (s("ab"), s("ab")),
        (b(b"\x00a"), b(b"\x00a")),
        (list(&[1, 2]), list(&[1, 2])),
        (Value::Tuple(vec![Value::Int(1)]), Value::Tuple(vec![Value::Int(1)])),
        (dict(Plain, &[("a", 1), ("b", 2)]), dict(Plain, &[("a", 1), ("b", 2)])),
        (dict(OrderedDict, &[("a", 1)]), dict(OrderedDict, &[("a", 1)])),
        (
            tensor(vec![1.0f32, f32::NAN], &[2]),
            tensor(vec![1.0f32, f32::NAN], &[2]),
        ),
        (tensor(vec![0.0f64, 2.0], &[2]), tensor(vec![-0.0f64, 2.0], &[2])),
        (
            tensor(vec![1i64, 2, 3, 4], &[2, 2]),
            tensor(vec![1i64, 2, 3, 4], &[2, 2]),
        ),
    ];
    for (a, b) in &equal {
        assert!(a.same(b) && b.same(a), "{a:?} == {b:?}");
    }
    let unequal: Vec<(Value, Value)> = vec![
        (Value::None, Value::Bool(false)),
        (Value::Bool(true), Value::Bool(false)),
        (Value::Bool(true), Value::Int(1)),
        (Value::Int(1), Value::Int(2)),
        (Value::Int(1), f(1.0)),
        (f(0.5), f(0.25)),
        (f(1.0), f(f64::NAN)),
        (s("ab"), s("ac")),
        (s("ab"), b(b"ab")),
        (b(b"ab"), b(b"ac")),
        (list(&[1, 2]), list(&[1])),
        (list(&[1, 2]), list(&[1, 3])),
        (list(&[1, 2]), Value::Tuple(vec![Value::Int(1), Value::Int(2)])),
        (Value::Tuple(vec![Value::Int(1)]), Value::Tuple(vec![Value::Int(2)])),
        (dict(Plain, &[("a", 1)]), dict(OrderedDict, &[("a", 1)])),
        (dict(Counter, &[("a", 1)]), dict(Plain, &[("a", 1)])),
        (dict(Plain, &[("a", 1)]), dict(Plain, &[("a", 1), ("b", 2)])),
        (dict(Plain, &[("a", 1)]), dict(Plain, &[("b", 1)])),
        (dict(Plain, &[("a", 1)]), dict(Plain, &[("a", 2)])),
        (dict(Plain, &[("a", 1), ("b", 2)]), dict(Plain, &[("b", 2), ("a", 1)])),
        (tensor(vec![1.0f32, 2.0], &[2]), tensor(vec![1.0f64, 2.0], &[2])),
        (
            tensor(vec![1.0f32, 2.0, 3.0, 4.0], &[4]),
            tensor(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]),
        ),
        (tensor(vec![1.0f32, 2.0], &[2]), tensor(vec![1.0f32, 2.5], &[2])),
        (tensor(vec![1.0f32, 2.0], &[2]), tensor(vec![1.0f32, f32::NAN], &[2])),
        (tensor(vec![1.0f32], &[1]), Value::Float(1.0)),
    ];
    for (a, b) in &unequal {
        assert!(!a.same(b) && !b.same(a), "{a:?} != {b:?}");
    }
}

/// Python's type names, the accessors and the dict's insertion-ordered
/// mapping (`remove` keeps later items reachable, as `del d[k]`).
#[test]
fn value_and_dict_accessors() {
    let names = [
        (Value::None, "NoneType"),
        (Value::Bool(true), "bool"),
        (Value::Int(1), "int"),
        (Value::Float(1.0), "float"),
        (Value::Str("a".into()), "str"),
        (Value::Bytes(vec![]), "bytes"),
        (Value::List(vec![]), "list"),
        (Value::Tuple(vec![]), "tuple"),
        (Value::Dict(Dict::new()), "dict"),
        (Value::Dict(Dict::ordered()), "OrderedDict"),
        (Value::Dict(Dict::with_kind(DictKind::Counter)), "Counter"),
        (tensor(vec![1.0f32], &[1]), "Tensor"),
    ];
    for (v, n) in &names {
        assert_eq!(v.type_name(), *n);
    }
    assert_eq!(Dict::with_kind(DictKind::Counter).kind(), DictKind::Counter);
    assert_eq!(Value::from(2.5).as_f64(), Some(2.5));
    assert_eq!(Value::Int(-7).as_f64(), Some(-7.0));
    assert_eq!(Value::Bool(true).as_f64(), None);
    assert_eq!(Value::from(-9i64).as_i64(), Some(-9));
    assert_eq!(Value::from(true).as_i64(), None);
    assert_eq!(Value::from("xy").as_str(), Some("xy"));
    assert_eq!(Value::from(String::from("z")).as_str(), Some("z"));
    assert_eq!(Value::Int(1).as_str(), None);
    assert_eq!(Value::Tuple(vec![Value::Int(4)]).as_seq().map(<[Value]>::len), Some(1));
    assert!(Value::Int(1).as_seq().is_none() && Value::Int(1).as_dict().is_none());
    assert!(Value::Int(1).as_tensor().is_none());

    let mut d: Dict = [("a", 1i64), ("b", 2), ("c", 3), ("d", 4)].into_iter().collect();
    assert_eq!(d.kind(), DictKind::Dict);
    d.insert(7i64, "seven");
    d.insert("b", 20i64);
    assert_eq!(d.len(), 5);
    assert_eq!(d.remove(&"b".into()).and_then(|v| v.as_i64()), Some(20));
    assert!(d.remove(&"b".into()).is_none());
    assert_eq!(d.get_str("c").and_then(Value::as_i64), Some(3));
    assert_eq!(d.get_str("d").and_then(Value::as_i64), Some(4));
    assert_eq!(d.get_int(7).and_then(Value::as_str), Some("seven"));
    assert_eq!(d.get_str("a").and_then(Value::as_i64), Some(1));
    d.insert("c", 30i64);
    let keys: Vec<String> = d.keys().map(ToString::to_string).collect();
    assert_eq!(keys, ["'a'", "'c'", "'d'", "7"]);
    assert_eq!(
        Value::Dict(d.clone()).to_string(),
        "{'a': 1, 'c': 30, 'd': 4, 7: 'seven'}"
    );
    let items: Vec<(ferrotorch_serialize::Key, String)> = d.into_iter().map(|(k, v)| (k, v.to_string())).collect();
    assert_eq!(items.len(), 4);
    assert_eq!(items[3], (7i64.into(), "'seven'".to_string()));
    let mut o = Dict::ordered();
    assert!(o.is_ordered_dict() && !Dict::new().is_ordered_dict() && o.is_empty());
    o.set_kind(DictKind::Counter);
    assert_eq!(Value::Dict(o).type_name(), "Counter");
}

/// A global PyTorch's weights-only unpickler allows is read (and, alone,
/// is no value: unsupported); one it refuses is a disallowed global.
#[test]
fn globals_allowed_as_pytorch_allows_them() {
    let c = cases();
    let globals = c["globals"].as_array().unwrap();
    assert!(globals.len() > 50);
    for g in globals {
        let (module, name) = (g["module"].as_str().unwrap(), g["name"].as_str().unwrap());
        let py3 = match module {
            "__builtin__" => "builtins",
            "copy_reg" => "copyreg",
            m => m,
        };
        let full = format!("{py3}.{name}");
        let mut p = b"\x80\x02".to_vec();
        p.extend(format!("c{module}\n{name}\n.").bytes());
        let e = err(&p);
        if g["torch_allows"].as_bool().unwrap() {
            assert!(
                matches!(&e, Error::Unsupported(m) if m.contains(&full)),
                "{full}: {e:?}"
            );
        } else {
            assert!(matches!(&e, Error::DisallowedGlobal(n) if n == &full), "{full}: {e:?}");
        }
    }
    // The globals ferrotorch interprets, alone, name themselves.
    for (pkl, name) in [
        (&b"\x80\x02ccollections\nOrderedDict\n."[..], "collections.OrderedDict"),
        (b"\x80\x02c__builtin__\nbytearray\n.", "builtins.bytearray"),
        (b"\x80\x02ctorch\nBFloat16Storage\n.", "torch.BFloat16Storage"),
        (
            b"\x80\x02ctorch._utils\n_rebuild_parameter\n.",
            "torch._utils._rebuild_parameter",
        ),
    ] {
        let e = err(pkl);
        assert!(
            matches!(&e, Error::Unsupported(m) if m == &format!("the object {name} as a value")),
            "{name}: {e:?}"
        );
    }
}

fn paths(v: &Value) -> Vec<(String, String)> {
    v.leaves().into_iter().map(|(p, l)| (p, l.to_string())).collect()
}

/// `Value::leaves` as documented: non-empty dicts are entered, lists and
/// tuples only when they hold a tensor or a non-empty dict somewhere; the
/// nesting limit makes deeper containers leaves.
#[test]
fn leaves_as_documented() {
    let t = || tensor(vec![1.0f32, 2.0], &[2]);
    assert_eq!(paths(&Value::Int(3)), [(String::new(), "3".to_string())]);
    let mut x = Dict::new();
    x.insert("x", 2i64);
    let mut d = Dict::new();
    d.insert("a", Dict::new());
    d.insert("b", list(&[1, 2]));
    d.insert("c", Value::List(vec![list(&[1]), Value::Dict(x)]));
    d.insert("d", Value::Tuple(vec![t()]));
    d.insert("e", Value::List(vec![Value::List(vec![t()])]));
    d.insert(5i64, "five");
    d.insert("f", Value::List(vec![Value::Dict(Dict::new())]));
    let got = paths(&Value::Dict(d));
    let tr = "tensor(..., size=(2,), dtype=torch.float32)";
    let want = [
        ("a", "{}"),
        ("b", "[1, 2]"),
        ("c.0", "[1]"),
        ("c.1.x", "2"),
        ("d.0", tr),
        ("e.0.0", tr),
        ("5", "'five'"),
        ("f", "[{}]"),
    ];
    let want: Vec<(String, String)> = want.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    assert_eq!(got, want);

    // Dicts MAX_DEPTH + 2 deep: the dict at level MAX_DEPTH + 1 is a leaf.
    let chain = nested(MAX_DEPTH + 2, Value::Int(1), |v| {
        let mut d = Dict::new();
        d.insert("k", v);
        Value::Dict(d)
    });
    let l = paths(&chain);
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].0, vec!["k"; MAX_DEPTH + 1].join("."));
    assert_eq!(l[0].1, "{'k': 1}");
    // A tensor MAX_DEPTH lists deep is found; one level deeper it is not.
    let lists = nested(MAX_DEPTH, t(), |v| Value::List(vec![v]));
    let l = paths(&lists);
    assert_eq!(l.len(), 1);
    assert_eq!(
        (l[0].0.as_str(), l[0].1.as_str()),
        (vec!["0"; MAX_DEPTH].join(".").as_str(), tr)
    );
    let lists = nested(MAX_DEPTH + 1, t(), |v| Value::List(vec![v]));
    let l = lists.leaves();
    assert_eq!(l.len(), 1);
    assert!(l[0].0.is_empty() && l[0].1.same(&lists));
}

/// `inspect` of the torch.save files: each leaf's dtype, shape, bytes,
/// requires_grad, storage key, offset and stride, and each storage's size
/// and number of tensors; of a safetensors file: its header's tensors in
/// data order with PyTorch's dtype names, and its metadata.
#[test]
fn inspect_as_pytorch_wrote_them() {
    use ferrotorch_serialize::{Format, Item, Location, inspect, inspect_bytes};
    let c = cases();
    for case in c["torch"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let path = data_dir().join(format!("{name}.pt"));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(Format::detect(&bytes), Some(Format::TorchSave));
        let info = inspect_bytes(&bytes).unwrap();
        let again = inspect(&path).unwrap();
        assert_eq!(again.entries.len(), info.entries.len());
        assert_eq!((info.format, info.format.name()), (Format::TorchSave, "torch.save"));
        let tensors = case["tensors"].as_array().unwrap();
        let found: Vec<_> = info.tensors().collect();
        assert_eq!(found.len(), tensors.len(), "{name}");
        let mut per_storage: std::collections::BTreeMap<u64, (u64, usize)> = Default::default();
        let mut tensor_bytes = 0;
        for ((got_name, got), want) in found.iter().zip(tensors) {
            let usizes = |k: &str| -> Vec<usize> {
                want[k]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap() as usize)
                    .collect()
            };
            let p = want["path"].as_str().unwrap();
            assert_eq!(*got_name, p.trim_start_matches('/').replace('/', "."), "{name}");
            assert_eq!(got.dtype, want["dtype"].as_str().unwrap(), "{name}{p}");
            assert_eq!(got.core_dtype().map(DType::name), Some(got.dtype.as_str()), "{name}{p}");
            assert_eq!(got.shape, usizes("shape"), "{name}{p}");
            let numel = usizes("shape").iter().product::<usize>() as u64;
            assert_eq!(got.numel(), numel, "{name}{p}");
            let es = DType::from_name(&got.dtype).unwrap().element_size() as u64;
            assert_eq!(got.nbytes, numel * es, "{name}{p}");
            assert_eq!(got.requires_grad, want["requires_grad"].as_bool().unwrap(), "{name}{p}");
            let key = want["storage"].as_u64().unwrap().to_string();
            assert_eq!(
                got.location,
                Location::Storage {
                    key: key.clone(),
                    offset: want["offset"].as_u64().unwrap() as usize,
                    stride: usizes("strides"),
                },
                "{name}{p}"
            );
            let shape: Vec<String> = usizes("shape").iter().map(ToString::to_string).collect();
            assert_eq!(got.to_string(), format!("{} [{}]", got.dtype, shape.join(", ")));
            let e = per_storage.entry(want["storage"].as_u64().unwrap()).or_default();
            e.0 = want["storage_numel"].as_u64().unwrap() * es;
            e.1 += 1;
            tensor_bytes += numel * es;
        }
        let storages: Vec<(String, (u64, usize))> = info
            .storages
            .iter()
            .map(|s| (s.key.clone(), (s.nbytes, s.tensors)))
            .collect();
        let want_storages: Vec<(String, (u64, usize))> = per_storage.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(storages, want_storages, "{name}");
        assert_eq!(info.tensor_bytes(), tensor_bytes, "{name}");
        assert_eq!(
            info.data_bytes(),
            per_storage.values().map(|s| s.0).sum::<u64>(),
            "{name}"
        );
        // The other leaves are values (the state dict has none).
        for e in &info.entries {
            if let Item::Value(v) = &e.item {
                assert_eq!(e.item.to_string(), v.to_string());
            }
        }
    }
    // A leaf that is no tensor.
    let mut d = Dict::new();
    d.insert("epoch", 3i64);
    d.insert("w", Tensor::from_vec(vec![1.0f32; 4], vec![2, 2]).unwrap());
    let info = inspect_bytes(&save_to_bytes(&Value::Dict(d)).unwrap()).unwrap();
    assert_eq!(info.entries.len(), 2);
    assert_eq!(
        (info.entries[0].name.as_str(), info.entries[0].item.to_string()),
        ("epoch", "3".to_string())
    );
    assert_eq!(info.entries[1].item.to_string(), "float32 [2, 2]");

    let st = &c["safetensors"];
    let bytes = std::fs::read(data_dir().join("inspect.safetensors")).unwrap();
    assert_eq!(Format::detect(&bytes), Some(Format::Safetensors));
    let info = inspect_bytes(&bytes).unwrap();
    assert_eq!((info.format, info.format.name()), (Format::Safetensors, "safetensors"));
    assert!(info.storages.is_empty());
    let want = st["tensors"].as_array().unwrap();
    let found: Vec<_> = info.tensors().collect();
    assert_eq!(found.len(), want.len());
    let mut total = 0;
    for ((n, t), w) in found.iter().zip(want) {
        assert_eq!(*n, w["name"].as_str().unwrap());
        assert_eq!(t.dtype, w["dtype"].as_str().unwrap(), "{n}");
        let shape: Vec<usize> = w["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(t.shape, shape, "{n}");
        let (start, end) = (w["start"].as_u64().unwrap(), w["end"].as_u64().unwrap());
        assert_eq!(t.location, Location::Range { start, end }, "{n}");
        assert_eq!(t.nbytes, end - start, "{n}");
        assert!(!t.requires_grad);
        total += end - start;
    }
    assert_eq!((info.tensor_bytes(), info.data_bytes()), (total, total));
    let meta: Vec<(String, String)> = st["metadata"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(info.metadata, meta);
    // Too short to be anything, and not a checkpoint.
    for n in [0, 1, 8] {
        let e = inspect_bytes(&b"abcdefgh"[..n]).unwrap_err();
        assert!(e.to_string().contains(&format!("the file has {n} bytes")), "{e}");
    }
    let e = inspect_bytes(b"abcdefghi").unwrap_err();
    assert!(e.to_string().contains("neither a torch.save"), "{e}");
}

/// A zip archive of the given entries, in order, stored.
fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, b) in entries {
        z.start_file(*name, opts).unwrap();
        z.write_all(b).unwrap();
    }
    z.finish().unwrap().into_inner()
}

/// The archive's folder may have any name and its entries any order (as
/// torch.load reads them); `byteorder` must be `little`; `version` files
/// must be numbers; a storage key must be a plain name.
#[test]
fn archive_layout() {
    let pkl: &[u8] = b"\x80\x02K\x07.";
    let ok = zip_of(&[
        ("ckpt/byteorder", b"little"),
        ("ckpt/.data/version", b"3\n"),
        ("ckpt/data.pkl", pkl),
        ("ckpt/version", b"3\n"),
    ]);
    assert_eq!(load_from_bytes(&ok).unwrap().as_i64(), Some(7));
    let e = load_from_bytes(&zip_of(&[("ckpt/data.pkl", pkl), ("ckpt/byteorder", b"big")])).unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported(m) if m == "a big-endian checkpoint (byteorder = big)"),
        "{e:?}"
    );
    let e = load_from_bytes(&zip_of(&[("ckpt/data.pkl", pkl), ("ckpt/byteorder", b"middle")])).unwrap_err();
    assert!(e.to_string().contains("byteorder entry holds \"middle\""), "{e}");
    for v in ["ckpt/version", "ckpt/.data/version"] {
        let e = load_from_bytes(&zip_of(&[("ckpt/data.pkl", pkl), (v, b"three")])).unwrap_err();
        assert!(e.to_string().contains(&format!("{v} is not a version number")), "{e}");
    }
    for (names, torchscript) in [
        (&["m/constants.pkl"][..], true),
        (&["m/code/__torch__.py"], true),
        (&["m/other.pkl", "m/x/data.pkl"], false),
    ] {
        let entries: Vec<(&str, &[u8])> = names.iter().map(|n| (*n, pkl)).collect();
        let e = load_from_bytes(&zip_of(&entries)).unwrap_err();
        let want = if torchscript {
            "TorchScript"
        } else {
            "no <name>/data.pkl"
        };
        assert!(e.to_string().contains(want), "{names:?}: {e}");
    }
    // Storage keys.
    let call = |key: &str| {
        let mut p =
            b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX".to_vec();
        p.extend((key.len() as u32).to_le_bytes());
        p.extend(key.as_bytes());
        p.extend(b"X\x03\x00\x00\x00cpuK\x03tQK\x00K\x03\x85K\x01\x85\x89ccollections\nOrderedDict\n)RtR.");
        p
    };
    for key in ["a_1", "7", "Z"] {
        let v = load_from_bytes(&pt(&call(key), &[(key, &storage0())])).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(v.as_tensor().unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    }
    for key in ["", "a-b", "../0", "a b"] {
        let e = load_from_bytes(&pt(&call(key), &[(key, &storage0())])).unwrap_err();
        assert!(e.to_string().contains("is not a plain name"), "{key:?}: {e}");
    }
}

/// Converting to optimizer values: the nesting limit is exact for every
/// container kind, errors name the path, parameter indices are kept.
#[test]
fn optimizer_values() {
    use ferrotorch_serialize::{value_to_optim_value, value_to_optimizer_state_dict};
    let wraps: [(&str, Wrap); 4] = [
        ("list", |v| Value::List(vec![v])),
        ("tuple", |v| Value::Tuple(vec![v])),
        ("str-keyed", |v| {
            let mut d = Dict::new();
            d.insert("k", v);
            Value::Dict(d)
        }),
        ("int-keyed", |v| {
            let mut d = Dict::new();
            d.insert(3i64, v);
            Value::Dict(d)
        }),
    ];
    for (name, wrap) in wraps {
        assert!(
            value_to_optim_value(&nested(MAX_DEPTH, Value::Int(1), wrap)).is_ok(),
            "{name}"
        );
        let e = value_to_optim_value(&nested(MAX_DEPTH + 1, Value::Int(1), wrap)).unwrap_err();
        assert!(e.to_string().contains("nests deeper than 256"), "{name}: {e}");
    }
    let mut inner = Dict::new();
    inner.insert("a", Value::Bytes(vec![1]));
    let e = value_to_optim_value(&Value::List(vec![Value::None, Value::Dict(inner)])).unwrap_err();
    assert!(e.to_string().contains("value[1]['a'] is bytes"), "{e}");
    let mut by_int = Dict::new();
    by_int.insert(4i64, Value::Tuple(vec![Value::Bytes(vec![])]));
    let e = value_to_optim_value(&Value::Dict(by_int)).unwrap_err();
    assert!(e.to_string().contains("value[4][0] is bytes"), "{e}");

    let osd = |index: i64, param: i64, extra: Option<&str>| {
        let mut step = Dict::new();
        step.insert("step", 5i64);
        let mut state = Dict::new();
        state.insert(index, step);
        let mut group = Dict::new();
        group.insert("lr", 0.1);
        group.insert("params", list(&[param, 7]));
        let mut d = Dict::new();
        d.insert("state", state);
        d.insert("param_groups", Value::List(vec![group.into()]));
        if let Some(k) = extra {
            d.insert(k, 1i64);
        }
        Value::Dict(d)
    };
    let sd = value_to_optimizer_state_dict(&osd(2, 2, None)).unwrap();
    assert_eq!(sd.state.keys().copied().collect::<Vec<_>>(), [2]);
    assert_eq!(sd.param_groups[0].params, [2, 7]);
    let e = value_to_optimizer_state_dict(&osd(-1, 2, None)).unwrap_err();
    assert!(e.to_string().contains("optimizer state index -1 is negative"), "{e}");
    let e = value_to_optimizer_state_dict(&osd(2, -3, None)).unwrap_err();
    assert!(e.to_string().contains("parameter index -3 is negative"), "{e}");
    let e = value_to_optimizer_state_dict(&osd(2, 2, Some("extra"))).unwrap_err();
    assert!(e.to_string().contains("unexpected key 'extra'"), "{e}");
}

/// The tensors of the views and dtypes files (non-contiguous views, storage
/// offsets, every dtype) saved as safetensors are, byte for byte, what the
/// Python `safetensors` package writes for them; its files read back as
/// PyTorch's tensors.
#[test]
fn safetensors_as_python_writes_them() {
    use ferrotorch_serialize::{StateDict, load_safetensors, load_safetensors_from_bytes, save_safetensors};
    let c = cases();
    let dir = tempfile::tempdir().unwrap();
    for name in ["views", "dtypes"] {
        let case = c["torch"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap();
        let v = load(data_dir().join(format!("{name}.pt"))).unwrap();
        let mut sd = StateDict::new();
        for (k, t) in v.as_dict().unwrap().iter() {
            sd.insert(k.to_string().trim_matches('\''), t.as_tensor().unwrap().clone());
        }
        let meta: std::collections::HashMap<String, String> = [("from".to_string(), name.to_string())].into();
        let ours = dir.path().join(format!("{name}.safetensors"));
        save_safetensors(&sd, Some(&meta), &ours).unwrap();
        let theirs_path = data_dir().join(format!("{name}.safetensors"));
        let theirs = std::fs::read(&theirs_path).unwrap();
        assert_eq!(std::fs::read(&ours).unwrap(), theirs, "{name}");
        for st in [
            load_safetensors(&theirs_path).unwrap(),
            load_safetensors_from_bytes(&theirs).unwrap(),
        ] {
            assert_eq!(st.metadata, meta);
            let tensors = case["tensors"].as_array().unwrap();
            assert_eq!(st.tensors.len(), tensors.len());
            for want in tensors {
                let key = want["path"].as_str().unwrap().trim_start_matches('/');
                let t = st.tensors.get(key).unwrap();
                assert_eq!(t.dtype().name(), want["dtype"].as_str().unwrap(), "{name} {key}");
                let shape: Vec<usize> = want["shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap() as usize)
                    .collect();
                assert_eq!(t.shape(), shape.as_slice(), "{name} {key}");
                assert!(t.is_contiguous() && t.storage_offset() == 0, "{name} {key}");
                let data = want["data"].as_array().unwrap();
                if t.dtype() == DType::I64 {
                    let exp: Vec<i64> = data.iter().map(|x| x.as_i64().unwrap()).collect();
                    assert_eq!(t.to_vec::<i64>().unwrap(), exp, "{name} {key}");
                } else {
                    let exp: Vec<u64> = data.iter().map(|x| x.as_f64().unwrap().to_bits()).collect();
                    let got: Vec<u64> = t.to_vec::<f64>().unwrap().iter().map(|x| x.to_bits()).collect();
                    assert_eq!(got, exp, "{name} {key}");
                }
            }
        }
    }
    // A dtype the core lacks is unsupported, naming it.
    let e = load_safetensors(data_dir().join("inspect.safetensors")).unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported(m) if m.contains("no such dtype")),
        "{e:?}"
    );
}

/// Loading a state dict with a dtype converts the floating-point tensors
/// only (as `Module.to(torch.float16)`: `num_batches_tracked` stays int64),
/// after the prefixes are applied; an integer dtype is refused.
#[test]
fn load_options_as_module_to() {
    use ferrotorch_serialize::{LoadOptions, load_state_dict, load_state_dict_from_bytes};
    let c = cases();
    let case = c["torch"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "state_dict")
        .unwrap();
    let path = data_dir().join("state_dict.pt");
    let opts = LoadOptions::new().dtype(DType::F16).add_prefix("m.");
    let sd = load_state_dict(&path, &opts).unwrap();
    let tensors = case["tensors"].as_array().unwrap();
    assert_eq!(sd.len(), tensors.len());
    for want in tensors {
        let key = want["path"].as_str().unwrap().trim_start_matches('/');
        let t = sd.get(&format!("m.{key}")).unwrap_or_else(|| panic!("m.{key}"));
        let dtype = DType::from_name(want["dtype"].as_str().unwrap()).unwrap();
        let expect = if dtype.is_floating_point() { DType::F16 } else { dtype };
        assert_eq!(t.dtype(), expect, "{key}");
    }
    // Already the dtype asked for: unchanged.
    let sd32 = load_state_dict(&path, &LoadOptions::new().dtype(DType::F32)).unwrap();
    assert_eq!(sd32.get("0.weight").unwrap().dtype(), DType::F32);
    let e = load_state_dict(&path, &LoadOptions::new().dtype(DType::I64)).unwrap_err();
    assert!(e.to_string().contains("only floating-point dtypes"), "{e}");
    // A nested entry.
    let mut outer = Dict::new();
    outer.insert("model", load(&path).unwrap());
    outer.insert("epoch", 1i64);
    let bytes = save_to_bytes(&Value::Dict(outer)).unwrap();
    let sd = load_state_dict_from_bytes(&bytes, &LoadOptions::new().entry("model")).unwrap();
    assert_eq!(sd.len(), tensors.len());
    let e = load_state_dict_from_bytes(&bytes, &LoadOptions::new().entry("nope")).unwrap_err();
    assert!(e.to_string().contains("no top-level entry 'nope'"), "{e}");
}
