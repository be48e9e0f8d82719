//! The JSON helpers shared by the oracle's support modules
//! (`oracle_linalg.rs`, `oracle_nn.rs`, `oracle_random.rs`): every test
//! crate that includes one of them includes this file as `oracle_json`
//! too (and `tests/oracle.rs` uses them), so they depend on nothing of
//! `tests/oracle.rs`.
#![allow(dead_code)]

use ferrotorch::half::{bf16, f16};
use ferrotorch::{DType, Scalar, Tensor};
use serde_json::Value;

/// A keyword argument of a case, `None` when absent or null.
pub fn kw<'a>(case: &'a Value, key: &str) -> Option<&'a Value> {
    case["kwargs"].get(key).filter(|v| !v.is_null())
}

/// A number (`"nan"`, `"inf"`, `"-inf"` as strings).
pub fn num(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap(),
        Value::String(s) => match s.as_str() {
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            "nan" => f64::NAN,
            other => panic!("unexpected number string {other}"),
        },
        Value::Bool(b) => *b as u8 as f64,
        other => panic!("not a number: {other}"),
    }
}

/// The input of a case named `name`.
pub fn input<'a>(case: &Value, inputs: &'a [Tensor], name: &str) -> Option<&'a Tensor> {
    let names = case["input_names"].as_array()?;
    let i = names.iter().position(|n| n.as_str() == Some(name))?;
    inputs.get(i)
}

/// A tensor in the oracle's JSON form.
pub fn decode(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data = v["data"].as_array().unwrap();
    let ints = || data.iter().map(|x| x.as_i64().unwrap());
    match v["dtype"].as_str().unwrap() {
        "float32" => Tensor::from_vec(data.iter().map(|x| num(x) as f32).collect(), &shape),
        "float64" => Tensor::from_vec(data.iter().map(num).collect(), &shape),
        "float16" => Tensor::from_vec(data.iter().map(|x| f16::from_f64(num(x))).collect(), &shape),
        "bfloat16" => Tensor::from_vec(data.iter().map(|x| bf16::from_f64(num(x))).collect(), &shape),
        "int64" => Tensor::from_vec(ints().collect(), &shape),
        "int32" => Tensor::from_vec(ints().map(|x| i32::try_from(x).unwrap()).collect(), &shape),
        "uint8" => Tensor::from_vec(ints().map(|x| u8::try_from(x).unwrap()).collect(), &shape),
        "bool" => Tensor::from_vec(data.iter().map(|x| x.as_bool().unwrap()).collect(), &shape),
        other => panic!("unsupported dtype {other}"),
    }
    .unwrap()
}

/// What running a case's operator gives.
pub type Run = ferrotorch::Result<Vec<Tensor>>;

/// A dims argument: one integer or a list.
pub fn dims_of(v: &Value) -> Vec<i64> {
    match v {
        Value::Array(a) => a.iter().map(|x| x.as_i64().unwrap()).collect(),
        x => vec![x.as_i64().unwrap()],
    }
}

/// A Python scalar: an int, a bool or a float.
pub fn scalar_of(v: &Value) -> Scalar {
    match v {
        Value::Number(n) if n.is_i64() => Scalar::Int(n.as_i64().unwrap()),
        Value::Bool(b) => Scalar::Bool(*b),
        other => Scalar::Float(num(other)),
    }
}

/// A dtype by its PyTorch name (`None` if unknown).
pub fn dtype_of(v: &Value) -> Option<DType> {
    DType::from_name(v.as_str()?)
}
