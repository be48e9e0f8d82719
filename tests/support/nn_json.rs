//! The JSON helpers shared by the `nn` tests against PyTorch's summaries
//! in `tests/nn_data/` (`tests/nn_group_a.rs`, `tests/nn_group_b.rs`,
//! `tests/nn_group_c.rs`, each including this file as `nn_json`): reading
//! a data file, turning its tensor summaries (`{"shape", "dtype",
//! "data"}`) into tensors, comparing tensors with them, and the lock that
//! makes the tests drawing from the global generator run one at a time.
#![allow(dead_code)]

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use ferrotorch::{DType, Result, Tensor};
use serde_json::Value;

/// Tests that seed and draw from the global generator run one at a time.
static RNG: Mutex<()> = Mutex::new(());

pub fn rng_lock() -> MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `tests/nn_data/<file>`, parsed once: a test crate reads one data file.
pub fn data(file: &str) -> &'static Value {
    static DATA: OnceLock<(String, Value)> = OnceLock::new();
    let (read, value) = DATA.get_or_init(|| {
        let path = format!("{}/tests/nn_data/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        (file.to_string(), serde_json::from_str(&text).unwrap())
    });
    assert_eq!(read, file, "a test crate reads one data file");
    value
}

pub fn shape_of(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

/// A JSON number, or a non-finite value as Python spells it (`inf`, `nan`).
pub fn float(x: &Value) -> f64 {
    x.as_f64().unwrap_or_else(|| x.as_str().unwrap().parse().unwrap())
}

pub fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(float).collect()
}

pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The dtype of a summary.
pub fn dtype_of(v: &Value) -> DType {
    match v["dtype"].as_str().unwrap() {
        "float32" => DType::F32,
        "float64" => DType::F64,
        "int64" => DType::I64,
        "bool" => DType::Bool,
        other => panic!("dtype {other}"),
    }
}

/// The tensor a summary describes, in its dtype.
pub fn tensor_of(v: &Value) -> Tensor {
    Tensor::from_vec(floats(&v["data"]), shape_of(v))
        .unwrap()
        .to_dtype(dtype_of(v))
        .unwrap()
}

pub fn values(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().reshape([-1]).unwrap().to_vec().unwrap()
}

/// `got` has the shape and dtype of the summary `want`.
pub fn check_shape_dtype(what: &str, got: &Tensor, want: &Value) {
    assert_eq!(got.shape(), &shape_of(want)[..], "{what}: shape");
    assert_eq!(
        got.dtype().to_string(),
        want["dtype"].as_str().unwrap(),
        "{what}: dtype"
    );
}

/// Shape, dtype and every value within `rel` of PyTorch's relative to
/// `max(|want|, 1)` (0: bit for bit, the sign of zero included; NaN
/// matches NaN, an infinity the same infinity).
pub fn check(what: &str, got: &Tensor, want: &Value, rel: f64) {
    check_shape_dtype(what, got, want);
    for (i, (a, b)) in values(got).iter().zip(floats(&want["data"])).enumerate() {
        let ok = if rel == 0.0 {
            a.to_bits() == b.to_bits()
        } else {
            (a - b).abs() <= rel * b.abs().max(1.0) || *a == b
        } || (a.is_nan() && b.is_nan());
        assert!(ok, "{what}[{i}]: {a:?} vs PyTorch's {b:?}");
    }
}

/// The message of the error `r` must be.
pub fn err<T>(r: Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}
