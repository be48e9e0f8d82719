//! JSON helpers shared by the optimizer tests (PyTorch's reference data).

#![allow(dead_code)]

use ferrotorch::Tensor;
use ferrotorch::optim::{Dict, Value};
use serde_json::Value as Json;

/// A number, with PyTorch's non-finite strings.
pub fn num(v: &Json) -> f64 {
    match v {
        Json::Number(n) => n.as_f64().unwrap(),
        Json::String(s) => match s.as_str() {
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            "nan" => f64::NAN,
            other => panic!("unexpected number string {other}"),
        },
        other => panic!("not a number: {other}"),
    }
}

/// Whether a JSON object is a tensor (`shape`, `dtype`, `data`).
pub fn is_tensor(v: &Json) -> bool {
    v.get("shape").is_some() && v.get("data").is_some()
}

/// A tensor from `{"shape", "dtype", "data"}`.
pub fn tensor(v: &Json) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data = v["data"].as_array().unwrap();
    match v["dtype"].as_str().unwrap() {
        "float32" => Tensor::from_vec(data.iter().map(|x| num(x) as f32).collect(), &shape).unwrap(),
        "float64" => Tensor::from_vec(data.iter().map(num).collect(), &shape).unwrap(),
        other => panic!("dtype {other}"),
    }
}

/// A state-dict value from JSON (tuples are `{"tuple": [...]}`).
pub fn value(v: &Json) -> Value {
    match v {
        Json::Null => Value::None,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) if n.is_i64() => Value::Int(n.as_i64().unwrap()),
        Json::String(s) if !matches!(s.as_str(), "inf" | "-inf" | "nan") => Value::Str(s.clone()),
        Json::Number(_) | Json::String(_) => Value::Float(num(v)),
        Json::Array(a) => Value::List(a.iter().map(value).collect()),
        Json::Object(o) if o.contains_key("tuple") => {
            Value::Tuple(o["tuple"].as_array().unwrap().iter().map(value).collect())
        }
        Json::Object(_) if is_tensor(v) => Value::Tensor(tensor(v)),
        Json::Object(o) => Value::Dict(o.iter().map(|(k, v)| (k.clone(), value(v))).collect::<Dict>()),
    }
}

/// Bitwise equality of two float tensors' elements (NaN equal to NaN),
/// else the first difference.
pub fn bitwise(what: &str, got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.shape() != want.shape() || got.dtype() != want.dtype() {
        return Err(format!(
            "{what}: got {:?} {}, want {:?} {}",
            got.shape(),
            got.dtype(),
            want.shape(),
            want.dtype()
        ));
    }
    let g = got.to_vec::<f64>().unwrap();
    let w = want.to_vec::<f64>().unwrap();
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()) {
            let rel = (a - b).abs() / b.abs().max(1e-30);
            return Err(format!("{what}[{i}]: got {a:e}, want {b:e} (rel {rel:.1e})"));
        }
    }
    Ok(())
}

/// Numeric equality of two values (ints and floats compare as numbers).
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => a.as_f64() == b.as_f64(),
        (Value::Tuple(x), Value::Tuple(y)) | (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q))
        }
        _ => a.same(b),
    }
}

/// FNV-1a (64-bit) of a tensor's element bytes (little-endian), as the
/// generator hashes numpy's bytes.
pub fn fnv1a(t: &Tensor) -> String {
    let bytes: Vec<u8> = match t.dtype() {
        ferrotorch::DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        _ => t
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
    };
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

/// Reads a JSON file of `tests/data`.
pub fn data(file: &str) -> Json {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}
