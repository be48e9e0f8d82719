//! Checks ferrotorch against values PyTorch computed (`tests/oracle/*.json`,
//! or the folder named by `ORACLE_DIR`).
//!
//! Every case of every file runs. A case whose operator ferrotorch does not
//! have yet is skipped by name (never silently); a case that runs and
//! disagrees fails the test. The test ends by printing one line per file:
//! `oracle unary.json: 57 passed, 2 skipped: name1, name2`.

use std::path::PathBuf;

use ferrotorch::{DType, Rounding, Tensor, TensorIndex};
use serde_json::Value;

/// What happened to one case.
enum Outcome {
    Pass,
    /// The operator (or case kind) is not implemented yet.
    Skip(String),
    Fail(String),
}

fn oracle_dir() -> PathBuf {
    match std::env::var_os("ORACLE_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oracle"),
    }
}

fn num(v: &Value) -> f64 {
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

fn tensor(v: &Value) -> Tensor {
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
        "int64" => Tensor::from_vec(data.iter().map(|x| x.as_i64().unwrap()).collect(), &shape).unwrap(),
        "bool" => Tensor::from_vec(data.iter().map(|x| x.as_bool().unwrap()).collect(), &shape).unwrap(),
        other => panic!("unsupported dtype {other}"),
    }
}

/// Tolerance family of an operator.
fn tolerance(op: &str) -> (f64, f64) {
    let reduce_like = [
        "sum",
        "mean",
        "var",
        "std",
        "logsumexp",
        "softmax",
        "log_softmax",
        "matmul",
        "mm",
        "bmm",
    ];
    let short = op.rsplit('.').next().unwrap();
    if reduce_like.contains(&short) {
        (1e-4, 1e-5)
    } else {
        (1e-5, 1e-6)
    }
}

fn compare(name: &str, got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!("{name}: shape {:?}, expected {:?}", got.shape(), want.shape()));
    }
    match want.dtype() {
        DType::I64 | DType::Bool => {
            if got.dtype() != want.dtype() {
                return Err(format!("{name}: dtype {}, expected {}", got.dtype(), want.dtype()));
            }
            let (g, w) = (got.to_vec::<i64>().unwrap(), want.to_vec::<i64>().unwrap());
            if g != w {
                return Err(format!("{name}: got {g:?}, expected {w:?}"));
            }
        }
        _ => {
            if !got.dtype().is_floating_point() {
                return Err(format!("{name}: dtype {}, expected a float", got.dtype()));
            }
            let (g, w) = (got.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
            for (i, (a, b)) in g.iter().zip(&w).enumerate() {
                let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
                if !ok {
                    return Err(format!(
                        "{name}: element {i}: got {a}, expected {b} (rtol {rtol}, atol {atol})"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn kw<'a>(case: &'a Value, key: &str) -> Option<&'a Value> {
    case["kwargs"].get(key).filter(|v| !v.is_null())
}

fn dims_of(v: &Value) -> Vec<i64> {
    match v {
        Value::Array(a) => a.iter().map(|x| x.as_i64().unwrap()).collect(),
        x => vec![x.as_i64().unwrap()],
    }
}

fn scalar_of(v: &Value) -> ferrotorch::Scalar {
    match v {
        Value::Number(n) if n.is_i64() => ferrotorch::Scalar::Int(n.as_i64().unwrap()),
        Value::Bool(b) => ferrotorch::Scalar::Bool(*b),
        other => ferrotorch::Scalar::Float(num(other)),
    }
}

/// The named input, from the `inputs` list.
fn input<'a>(case: &Value, inputs: &'a [Tensor], name: &str) -> Option<&'a Tensor> {
    let names = case["input_names"].as_array()?;
    let i = names.iter().position(|n| n.as_str() == Some(name))?;
    inputs.get(i)
}

fn index_items(v: &Value) -> Vec<TensorIndex> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|it| match it {
            Value::Null => TensorIndex::NewAxis,
            Value::String(s) if s == "..." => TensorIndex::Ellipsis,
            Value::Number(n) => TensorIndex::Int(n.as_i64().unwrap()),
            Value::Object(o) => {
                let s = o["slice"].as_array().unwrap();
                let opt = |x: &Value| x.as_i64();
                TensorIndex::slice(opt(&s[0]), opt(&s[1]), s[2].as_i64().unwrap_or(1))
            }
            other => panic!("unsupported index item {other}"),
        })
        .collect()
}

type Run = ferrotorch::Result<Vec<Tensor>>;

/// Runs the case's operator, or `None` when ferrotorch does not have it yet.
fn run_op(case: &Value, inputs: &[Tensor]) -> Option<Run> {
    let op = case["op"].as_str().unwrap();
    let x = || {
        input(case, inputs, "input")
            .or(input(case, inputs, "self"))
            .or(inputs.first())
            .unwrap()
    };
    let one = |r: ferrotorch::Result<Tensor>| Some(r.map(|t| vec![t]));
    let dims = |key: &str| kw(case, key).map(dims_of);
    let keepdim = kw(case, "keepdim").and_then(Value::as_bool).unwrap_or(false);
    let unary = |f: fn(&Tensor) -> ferrotorch::Result<Tensor>| one(f(x()));
    let other = || -> ferrotorch::Operand {
        match input(case, inputs, "other") {
            Some(t) => ferrotorch::Operand::Tensor(t),
            None => ferrotorch::Operand::Scalar(scalar_of(kw(case, "other").unwrap())),
        }
    };
    let short = op
        .strip_prefix("torch.nn.functional.")
        .or(op.strip_prefix("torch.Tensor."))
        .or(op.strip_prefix("torch."))
        .unwrap();
    match short {
        "exp" => unary(Tensor::exp),
        "log" => unary(Tensor::log),
        "sqrt" => unary(Tensor::sqrt),
        "tanh" => unary(Tensor::tanh),
        "sigmoid" => unary(Tensor::sigmoid),
        "relu" => unary(Tensor::relu),
        "neg" => unary(Tensor::neg),
        "abs" => unary(Tensor::abs),
        "sin" => unary(Tensor::sin),
        "cos" => unary(Tensor::cos),
        "silu" => unary(Tensor::silu),
        "gelu" => one(x().gelu_approx(kw(case, "approximate").and_then(Value::as_str).unwrap_or("none"))),
        "pow" => match (input(case, inputs, "input"), input(case, inputs, "exponent")) {
            (Some(b), Some(e)) => one(b.pow(e)),
            (Some(b), None) => one(b.pow(scalar_of(kw(case, "exponent").unwrap()))),
            (None, Some(e)) => one(Tensor::scalar_pow(scalar_of(kw(case, "self").unwrap()), e)),
            _ => None,
        },
        "add" | "sub" => {
            let alpha = kw(case, "alpha").map(scalar_of).unwrap_or(ferrotorch::Scalar::Int(1));
            if short == "add" {
                one(x().add_scaled(other(), alpha))
            } else {
                one(x().sub_scaled(other(), alpha))
            }
        }
        "mul" => one(x().mul(other())),
        "div" => {
            let mode = match kw(case, "rounding_mode").and_then(Value::as_str) {
                Some("trunc") => Rounding::Trunc,
                Some("floor") => Rounding::Floor,
                _ => Rounding::None,
            };
            one(x().div_rounding(other(), mode))
        }
        "maximum" => one(x().maximum(other())),
        "minimum" => one(x().minimum(other())),
        "sum" => one(match dims("dim") {
            Some(d) => x().sum_dim(d, keepdim),
            None => x().sum(),
        }),
        "mean" => one(match dims("dim") {
            Some(d) => x().mean_dim(d, keepdim),
            None => x().mean(),
        }),
        "max" | "min" => {
            let is_max = short == "max";
            match kw(case, "dim") {
                Some(d) => {
                    let d = d.as_i64().unwrap();
                    let r = if is_max {
                        x().max_dim(d, keepdim)
                    } else {
                        x().min_dim(d, keepdim)
                    };
                    Some(r.map(|(v, i)| vec![v, i]))
                }
                None => one(if is_max { x().max() } else { x().min() }),
            }
        }
        "amax" => one(x().amax(dims("dim").unwrap(), keepdim)),
        "amin" => one(x().amin(dims("dim").unwrap(), keepdim)),
        "var" | "std" => {
            let corr = kw(case, "correction").map(num).unwrap_or(1.0);
            let d = dims("dim");
            one(if short == "var" {
                x().var_dim(d, corr, keepdim)
            } else {
                x().std_dim(d, corr, keepdim)
            })
        }
        "logsumexp" => one(x().logsumexp(dims("dim").unwrap(), keepdim)),
        "argmax" => one(x().argmax(kw(case, "dim").and_then(Value::as_i64), keepdim)),
        "argmin" => one(x().argmin(kw(case, "dim").and_then(Value::as_i64), keepdim)),
        "softmax" => one(x().softmax(kw(case, "dim").unwrap().as_i64().unwrap())),
        "log_softmax" => one(x().log_softmax(kw(case, "dim").unwrap().as_i64().unwrap())),
        "matmul" => one(x().matmul(input(case, inputs, "other").unwrap())),
        "mm" => one(x().mm(input(case, inputs, "mat2").unwrap())),
        "bmm" => one(x().bmm(input(case, inputs, "mat2").unwrap())),
        "reshape" => one(x().reshape(&dims("shape").unwrap())),
        "permute" => one(x().permute(&dims("dims").unwrap())),
        "transpose" => one(x().transpose(kw(case, "dim0")?.as_i64()?, kw(case, "dim1")?.as_i64()?)),
        "flatten" => one(x().flatten(
            kw(case, "start_dim").and_then(Value::as_i64).unwrap_or(0),
            kw(case, "end_dim").and_then(Value::as_i64).unwrap_or(-1),
        )),
        "__getitem__" => one(x().get(&index_items(kw(case, "index").unwrap()))),
        "cat" | "stack" => {
            let refs: Vec<&Tensor> = inputs.iter().collect();
            let d = kw(case, "dim").and_then(Value::as_i64).unwrap_or(0);
            one(if short == "cat" {
                Tensor::cat(&refs, d)
            } else {
                Tensor::stack(&refs, d)
            })
        }
        "expand" => one(x().expand(&dims("size").unwrap())),
        "squeeze" => one(match kw(case, "dim") {
            Some(d) => x().squeeze_dims(&dims_of(d)),
            None => x().squeeze(),
        }),
        "unsqueeze" => one(x().unsqueeze(kw(case, "dim")?.as_i64()?)),
        "gather" => one(x().gather(kw(case, "dim")?.as_i64()?, input(case, inputs, "index")?)),
        "index_select" => one(x().index_select(kw(case, "dim")?.as_i64()?, input(case, inputs, "index")?)),
        "where" => {
            one(input(case, inputs, "input")?
                .where_cond(input(case, inputs, "condition")?, input(case, inputs, "other")?))
        }
        "masked_fill" => one(x().masked_fill(input(case, inputs, "mask")?, scalar_of(kw(case, "value")?))),
        "split" => {
            let d = kw(case, "dim").and_then(Value::as_i64).unwrap_or(0);
            let t = input(case, inputs, "tensor")?;
            Some(match kw(case, "split_size_or_sections")? {
                Value::Array(a) => {
                    t.split_sizes(&a.iter().map(|v| v.as_u64().unwrap() as usize).collect::<Vec<_>>(), d)
                }
                v => t.split(v.as_u64()? as usize, d),
            })
        }
        "chunk" => Some(x().chunk(
            kw(case, "chunks")?.as_u64()? as usize,
            kw(case, "dim").and_then(Value::as_i64).unwrap_or(0),
        )),
        "narrow" => one(x().narrow(
            kw(case, "dim")?.as_i64()?,
            kw(case, "start")?.as_i64()?,
            kw(case, "length")?.as_u64()? as usize,
        )),
        _ => None,
    }
}

fn run_case(case: &Value) -> Outcome {
    let name = case["name"].as_str().unwrap_or("?").to_string();
    let kind = case.get("kind").and_then(Value::as_str).unwrap_or("op");
    if kind != "op" {
        return Outcome::Skip(format!("{name} (kind {kind} needs autograd/optim)"));
    }
    let inputs: Vec<Tensor> = case["inputs"].as_array().unwrap().iter().map(tensor).collect();
    let Some(result) = run_op(case, &inputs) else {
        return Outcome::Skip(name);
    };
    let got = match result {
        Ok(g) => g,
        Err(e) => return Outcome::Fail(format!("{name}: error: {e}")),
    };
    let want: Vec<Tensor> = match &case["output"] {
        Value::Array(list) => list.iter().map(tensor).collect(),
        single => vec![tensor(single)],
    };
    if got.len() != want.len() {
        return Outcome::Fail(format!("{name}: {} outputs, expected {}", got.len(), want.len()));
    }
    let (rtol, atol) = tolerance(case["op"].as_str().unwrap());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = compare(&format!("{name}[{i}]"), g, w, rtol, atol) {
            return Outcome::Fail(e);
        }
    }
    Outcome::Pass
}

#[test]
fn oracle() {
    let dir = oracle_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read oracle dir {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no oracle files in {}", dir.display());
    let mut failures = Vec::new();
    let mut summary = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let fname = f.file_name().unwrap().to_string_lossy().to_string();
        let (mut passed, mut skipped) = (0, Vec::new());
        match doc.get("cases").and_then(Value::as_array) {
            Some(cases) => {
                for case in cases {
                    match run_case(case) {
                        Outcome::Pass => passed += 1,
                        Outcome::Skip(n) => skipped.push(n),
                        Outcome::Fail(msg) => failures.push(format!("{fname}: {msg}")),
                    }
                }
            }
            None => skipped.push("whole file (no `cases`: model-level reference, needs nn)".to_string()),
        }
        let line = if skipped.is_empty() {
            format!("oracle {fname}: {passed} passed, 0 skipped")
        } else {
            format!(
                "oracle {fname}: {passed} passed, {} skipped: {}",
                skipped.len(),
                skipped.join(", ")
            )
        };
        summary.push(line);
    }
    for l in &summary {
        println!("{l}");
    }
    println!("oracle: forward outputs are checked; `grads` entries wait for autograd");
    assert!(
        failures.is_empty(),
        "{} oracle mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
