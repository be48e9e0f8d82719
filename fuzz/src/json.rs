//! The program's values in JSON: numbers, dtypes, scalars and tensors
//! decoded and encoded, and the environment of named tensors a program
//! builds.

use std::collections::BTreeMap;

use ferrotorch_core::half::{bf16, f16};
use ferrotorch_core::{DType, Operand, Scalar, Tensor};
use serde_json::{Value, json};

pub(crate) type Res<T> = std::result::Result<T, String>;

/// Named values of a running program.
pub struct Env {
    pub(crate) vals: BTreeMap<String, Tensor>,
}

impl Env {
    pub(crate) fn get(&self, v: &Value) -> Res<Tensor> {
        let name = v.as_str().ok_or_else(|| format!("expected a value name, got {v}"))?;
        self.vals
            .get(name)
            .cloned()
            .ok_or_else(|| format!("no value named {name}"))
    }
}

pub(crate) fn num(v: &Value) -> Res<f64> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("bad number {n}")),
        Value::String(s) => match s.as_str() {
            "nan" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            o => Err(format!("bad number string {o}")),
        },
        Value::Bool(b) => Ok(*b as u8 as f64),
        o => Err(format!("not a number: {o}")),
    }
}

pub(crate) fn int(v: &Value) -> Res<i64> {
    v.as_i64().ok_or_else(|| format!("not an integer: {v}"))
}

pub(crate) fn float_json(x: f64) -> Value {
    if x.is_nan() {
        json!("nan")
    } else if x.is_infinite() {
        json!(if x > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(x)
    }
}

pub(crate) fn dtype_of(v: &Value) -> Res<DType> {
    let s = v.as_str().ok_or_else(|| format!("not a dtype: {v}"))?;
    DType::from_name(s).ok_or_else(|| format!("unknown dtype {s}"))
}

/// A scalar argument: `{"int": 3}`, `{"float": 2.5}` (or `"nan"`, `"inf"`, `"-inf"`), `{"bool": true}`.
pub(crate) fn scalar(v: &Value) -> Res<Scalar> {
    if let Some(i) = v.get("int") {
        return Ok(Scalar::Int(int(i)?));
    }
    if let Some(f) = v.get("float") {
        return Ok(Scalar::Float(num(f)?));
    }
    if let Some(b) = v.get("bool") {
        return Ok(Scalar::Bool(b.as_bool().ok_or("bad bool")?));
    }
    Err(format!("not a scalar: {v}"))
}

/// A tensor from its JSON form `{"dtype", "shape", "data"}`.
pub fn decode_tensor(v: &Value) -> Res<Tensor> {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .ok_or("tensor without shape")?
        .iter()
        .map(|d| d.as_u64().map(|d| d as usize).ok_or("bad dim"))
        .collect::<std::result::Result<_, _>>()?;
    let data = v["data"].as_array().ok_or("tensor without data")?;
    let fl = || data.iter().map(num).collect::<Res<Vec<f64>>>();
    let it = || data.iter().map(int).collect::<Res<Vec<i64>>>();
    let r = match dtype_of(&v["dtype"])? {
        DType::F64 => Tensor::from_vec(fl()?, &shape),
        DType::F32 => Tensor::from_vec(fl()?.into_iter().map(|x| x as f32).collect(), &shape),
        DType::F16 => Tensor::from_vec(fl()?.into_iter().map(f16::from_f64).collect(), &shape),
        DType::BF16 => Tensor::from_vec(fl()?.into_iter().map(bf16::from_f64).collect(), &shape),
        DType::I64 => Tensor::from_vec(it()?, &shape),
        DType::I32 => Tensor::from_vec(it()?.into_iter().map(|x| x as i32).collect(), &shape),
        DType::U8 => Tensor::from_vec(it()?.into_iter().map(|x| x as u8).collect(), &shape),
        DType::Bool => Tensor::from_vec(
            data.iter()
                .map(|b| b.as_bool().ok_or("bad bool"))
                .collect::<std::result::Result<Vec<bool>, _>>()?,
            &shape,
        ),
    };
    r.map_err(|e| e.to_string())
}

/// The JSON form of a tensor's values, dtype and shape (floats exactly, as f64).
pub fn encode_tensor(t: &Tensor) -> Res<Value> {
    let t = t.detach();
    let data: Vec<Value> = match t.dtype() {
        d if d.is_floating_point() => t
            .to_vec::<f64>()
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(float_json)
            .collect(),
        DType::Bool => t
            .to_vec::<bool>()
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(Value::from)
            .collect(),
        _ => t
            .to_vec::<i64>()
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(Value::from)
            .collect(),
    };
    Ok(json!({"dtype": t.dtype().name(), "shape": t.shape(), "data": data}))
}

pub(crate) fn ints(v: &Value) -> Res<Vec<i64>> {
    v.as_array().ok_or("expected a list")?.iter().map(int).collect()
}

pub(crate) fn operand<'a>(env: &Env, v: &Value, hold: &'a mut Option<Tensor>) -> Res<Operand<'a>> {
    if v.is_string() {
        *hold = Some(env.get(v)?);
        Ok(Operand::Tensor(hold.as_ref().unwrap()))
    } else {
        Ok(Operand::Scalar(scalar(v)?))
    }
}
