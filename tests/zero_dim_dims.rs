//! Every op with a dim argument on a 0-d tensor, against PyTorch
//! (`tests/zero_dim_dims.json`, written by `tests/gen_zero_dim_dims.py`):
//! PyTorch wraps the dims of a 0-d tensor as if it had one dim, so -1 and 0
//! are valid and anything else is its "Dimension out of range" error. Each
//! case must give PyTorch's result (dtype, shape, values) or an error with
//! PyTorch's message, and never a panic.

use std::panic::{AssertUnwindSafe, catch_unwind};

use ferrotorch::{DType, Result, Tensor};
use serde_json::Value;

/// What an op gave: tensors, or an integer (`size`, `stride`).
enum Got {
    Tensors(Vec<Tensor>),
    Int(i64),
}

fn t(r: Result<Tensor>) -> Result<Got> {
    r.map(|t| Got::Tensors(vec![t]))
}

fn t2(r: Result<(Tensor, Tensor)>) -> Result<Got> {
    r.map(|(a, b)| Got::Tensors(vec![a, b]))
}

fn ts(r: Result<Vec<Tensor>>) -> Result<Got> {
    r.map(Got::Tensors)
}

fn run(op: &str, d: i64) -> Option<Result<Got>> {
    let x = Tensor::scalar(2.5f32);
    let idx = Tensor::scalar(0i64);
    let idx1 = Tensor::new([0i64]).ok()?;
    let seven = Tensor::scalar(7.0f32);
    Some(match op {
        "sum_dim" => t(x.sum_dim(d, false)),
        "sum_dim_keep" => t(x.sum_dim(d, true)),
        "mean_dim" => t(x.mean_dim(d, false)),
        "prod_dim" => t(x.prod_dim(d, false)),
        "amax" => t(x.amax(d, false)),
        "amin" => t(x.amin(d, false)),
        "all_dim" => t(x.all_dim(d, false)),
        "any_dim" => t(x.any_dim(d, false)),
        "logsumexp" => t(x.logsumexp(d, false)),
        "var_dim" => t(x.var_dim(d, 1.0, false)),
        "std_dim" => t(x.std_dim(d, 1.0, false)),
        "var_mean" => t2(x.var_mean_dim(d, 1.0, false)),
        "std_mean" => t2(x.std_mean_dim(d, 1.0, false)),
        "nansum_dim" => t(x.nansum_dim(d, false)),
        "nanmean_dim" => t(x.nanmean_dim(d, false)),
        "count_nonzero" => t(x.count_nonzero_dim(d)),
        "norm_dim" => t(x.norm_dim(2.0, d, false)),
        "vector_norm" => t(x.linalg_vector_norm(2.0, d, false)),
        "argmax" => t(x.argmax(Some(d), false)),
        "argmin" => t(x.argmin(Some(d), false)),
        "max_dim" => t2(x.max_dim(d, false)),
        "min_dim" => t2(x.min_dim(d, false)),
        "aminmax" => t2(x.aminmax(Some(d), false)),
        "median_dim" => t2(x.median_dim(d, false)),
        "nanmedian_dim" => t2(x.nanmedian_dim(d, false)),
        "mode" => t2(x.mode(d, false)),
        "kthvalue" => t2(x.kthvalue(1, d, false)),
        "sort" => t2(x.sort(d, false)),
        "argsort" => t(x.argsort(d, false)),
        "topk" => t2(x.topk(1, d, true)),
        "cumsum" => t(x.cumsum(d)),
        "cumprod" => t(x.cumprod(d)),
        "cummax" => t2(x.cummax(d)),
        "cummin" => t2(x.cummin(d)),
        "logcumsumexp" => t(x.logcumsumexp(d)),
        "softmax" => t(x.softmax(d)),
        "log_softmax" => t(x.log_softmax(d)),
        "squeeze_dim" => t(x.squeeze_dim(d)),
        "squeeze_dims" => t(x.squeeze_dims([d])),
        "unsqueeze" => t(x.unsqueeze(d)),
        "flatten" => t(x.flatten((d, d))),
        "transpose" => t(x.transpose(d, d)),
        "swapdims" => t(x.swapdims(d, 0)),
        "diagonal" => t(x.diagonal(0, d, d + 1)),
        "diag_embed" => t(x.diag_embed(0, d, d + 1)),
        "cross" => t(x.linalg_cross(&x, d)),
        "unique_dim" => x
            .unique_with(ferrotorch::UniqueOptions {
                dim: Some(d),
                ..Default::default()
            })
            .map(|u| Got::Tensors(vec![u.values])),
        "split_sizes" => ts(x.split_sizes([1], d)),
        "select" => t(x.select(d, 0)),
        "narrow" => t(x.narrow(d, 0, 1)),
        "index_select" => t(x.index_select(d, &idx)),
        "gather" => t(x.gather(d, &idx)),
        "scatter" => t(x.scatter(d, &idx, &seven)),
        "scatter_add" => t(x.scatter_add(d, &idx, &seven)),
        "index_add" => t(x.index_add(d, &idx1, &seven, 1)),
        "index_copy" => t(x.index_copy(d, &idx1, &seven)),
        "index_fill" => t(x.index_fill(d, &idx1, 7.0)),
        "chunk" => ts(x.chunk(1, d)),
        "split" => ts(x.split(1, d)),
        "unbind" => ts(x.unbind(d)),
        "cat" => t(Tensor::cat(&[&x, &x], d)),
        "stack" => t(Tensor::stack(&[&x, &x], d)),
        "flip" => t(x.flip([d])),
        "roll" => t(x.roll([1], [d])),
        "movedim" => t(x.movedim([d], [0])),
        "diff" => t(x.diff(1, d, None, None)),
        "repeat_interleave" => t(x.repeat_interleave(2, Some(d))),
        "take_along_dim" => t(x.take_along_dim(&idx, Some(d))),
        "unflatten" => t(x.unflatten(d, [1])),
        "unfold" => t(x.unfold(d, 1, 1)),
        "size" => x.size(d).map(|s| Got::Int(s as i64)),
        "stride" => x.stride(d).map(|s| Got::Int(s as i64)),
        "permute" => t(x.permute([d])),
        "sum_dtype" => t(x.sum_dim_dtype(d, false, DType::F64)),
        "cumsum_dtype" => t(x.cumsum_dtype(d, DType::F64)),
        "mean_dtype" => t(x.mean_dim_dtype(d, false, DType::F64)),
        _ => return None,
    })
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64)
        .and_then(|t| t.reshape([-1]))
        .and_then(|t| t.to_vec())
        .expect("values")
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

fn check(case: &Value) -> std::result::Result<(), String> {
    let op = case["op"].as_str().expect("op");
    let d = case["dim"].as_i64().expect("dim");
    let got = catch_unwind(AssertUnwindSafe(|| run(op, d))).map_err(|_| format!("{op}({d}): panicked"))?;
    let got = got.ok_or_else(|| format!("{op}: not in the Rust table"))?;
    match (case.get("error").and_then(Value::as_str), got) {
        (Some(want), Ok(_)) => Err(format!("{op}({d}): succeeded; PyTorch: {want}")),
        (Some(want), Err(e)) => {
            let msg = e.to_string();
            // PyTorch's permute names the sparse layout for every tensor.
            let want = want.replace("permute(sparse_coo): ", "");
            if msg.contains(&want) {
                Ok(())
            } else {
                Err(format!("{op}({d}): \"{msg}\" lacks PyTorch's \"{want}\""))
            }
        }
        (None, Err(e)) => Err(format!("{op}({d}): {e}; PyTorch succeeds")),
        (None, Ok(Got::Int(v))) => {
            let want = case["ok"][0]["int"].as_i64();
            (want == Some(v))
                .then_some(())
                .ok_or_else(|| format!("{op}({d}): {v}, PyTorch {want:?}"))
        }
        (None, Ok(Got::Tensors(ts))) => {
            let want = case["ok"].as_array().expect("results");
            if want.len() != ts.len() {
                return Err(format!("{op}({d}): {} results, PyTorch {}", ts.len(), want.len()));
            }
            for (t, w) in ts.iter().zip(want) {
                let shape: Vec<usize> = w["shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as usize)
                    .collect();
                let dtype = DType::from_name(w["dtype"].as_str().unwrap()).expect("a dtype");
                let data: Vec<f64> = w["data"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| {
                        v.as_f64()
                            .or_else(|| v.as_bool().map(f64::from))
                            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                            .expect("a number")
                    })
                    .collect();
                let vals = values(t);
                if t.shape() != shape
                    || t.dtype() != dtype
                    || vals.len() != data.len()
                    || !vals.iter().zip(&data).all(|(a, b)| same(*a, *b))
                {
                    return Err(format!(
                        "{op}({d}): {:?} {:?} {vals:?}, PyTorch {shape:?} {dtype:?} {data:?}",
                        t.shape(),
                        t.dtype()
                    ));
                }
            }
            Ok(())
        }
    }
}

#[test]
fn dims_of_zero_dim_tensors_follow_pytorch() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/zero_dim_dims.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("the oracle file")).expect("JSON");
    let cases = doc["cases"].as_array().expect("cases");
    let wrong: Vec<String> = cases.iter().filter_map(|c| check(c).err()).collect();
    assert!(cases.len() > 250, "{}", cases.len());
    assert!(
        wrong.is_empty(),
        "{} of {} cases differ:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}
