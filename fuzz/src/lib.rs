//! Differential fuzzing of ferrotorch against PyTorch.
//!
//! `fuzz/driver.py` generates small random programs, runs them in PyTorch
//! and sends each one (with PyTorch's result) as a JSON line to the
//! `ferrotorch-fuzz-eval` binary, which runs it here ([`run_program`]) and
//! compares ([`compare`]). `tests/regressions.rs` replays stored cases with
//! the same code. The program and result formats are described in
//! `fuzz/README.md`.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use ferrotorch_core::ops::binary::binary_scalar_lhs;
use ferrotorch_core::ops::{BinaryKind, MathKind};
use ferrotorch_core::{Rounding, Tensor};
use serde_json::{Map, Value, json};

mod json;
mod ops;
mod ops_cov;
mod ops_nn;

pub use json::{Env, decode_tensor, encode_tensor};
use json::{Res, int, ints, num, operand, scalar};

fn panic_msg(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".into()
    }
}

/// Runs `f`, turning an error into `("error", msg)` and a panic into `("panic", msg)`.
fn guarded<T>(f: impl FnOnce() -> Res<T>) -> std::result::Result<T, (&'static str, String)> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(("error", e)),
        Err(p) => Err(("panic", panic_msg(p))),
    }
}

fn apply_view(t: &Tensor, v: &Value) -> Res<Tensor> {
    let a = v.as_array().ok_or("bad view")?;
    let e = |r: ferrotorch_core::Result<Tensor>| r.map_err(|e| e.to_string());
    match a[0].as_str().unwrap_or("") {
        "t" => e(t.transpose(int(&a[1])?, int(&a[2])?)),
        "slice" => e(t.slice(int(&a[1])?, Some(int(&a[2])?), Some(int(&a[3])?), int(&a[4])?)),
        "expand" => e(t.expand(&ints(&a[1])?)),
        "permute" => e(t.permute(&ints(&a[1])?)),
        o => Err(format!("unknown view {o}")),
    }
}

fn binary_kind(name: &str) -> Option<BinaryKind> {
    use BinaryKind::*;
    Some(match name {
        "add" => Add,
        "sub" => Sub,
        "mul" => Mul,
        "div" => Div,
        "pow" => Pow,
        "maximum" => Maximum,
        "minimum" => Minimum,
        "eq" => Eq,
        "ne" => Ne,
        "lt" => Lt,
        "le" => Le,
        "gt" => Gt,
        "ge" => Ge,
        "logical_and" => LogicalAnd,
        "logical_or" => LogicalOr,
        "logical_xor" => LogicalXor,
        _ => return None,
    })
}

fn math_kind(name: &str) -> Option<MathKind> {
    use MathKind::*;
    Some(match name {
        "atan2" => Atan2,
        "hypot" => Hypot,
        "logaddexp" => LogAddExp,
        "logaddexp2" => LogAddExp2,
        "copysign" => Copysign,
        "remainder" => Remainder,
        "fmod" => Fmod,
        "bitwise_and" => BitwiseAnd,
        "bitwise_or" => BitwiseOr,
        "bitwise_xor" => BitwiseXor,
        "bitwise_left_shift" => LeftShift,
        "bitwise_right_shift" => RightShift,
        _ => return None,
    })
}

fn rounding(v: &Value) -> Res<Rounding> {
    Ok(match v.as_str() {
        None => Rounding::None,
        Some("trunc") => Rounding::Trunc,
        Some("floor") => Rounding::Floor,
        Some(o) => return Err(format!("bad rounding mode {o}")),
    })
}

/// Runs one op: its outputs, in order.
fn run_op(env: &Env, op: &Value) -> Res<Vec<Tensor>> {
    let name = op["op"].as_str().ok_or("op without name")?;
    let empty = vec![];
    let a = op["args"].as_array().unwrap_or(&empty);
    if let Some(r) = ops::unary(name, env, a)? {
        return Ok(vec![r]);
    }
    let e = |r: ferrotorch_core::Result<Tensor>| r.map(|t| vec![t]).map_err(|e| e.to_string());
    // Binary operators, tensor first: [x, other, extra].
    let (base, inplace) = match name.strip_suffix('_') {
        Some(b) => (b, true),
        None => (name, false),
    };
    if let Some(kind) = binary_kind(base) {
        let x = env.get(&a[0])?;
        let mut hold = None;
        let y = operand(env, &a[1], &mut hold)?;
        let extra = a.get(2).cloned().unwrap_or(Value::Null);
        return match (kind, &extra) {
            (BinaryKind::Add, Value::Object(_)) if inplace => e(x.add_scaled_(y, scalar(&extra)?)),
            (BinaryKind::Add, Value::Object(_)) => e(x.add_scaled(y, scalar(&extra)?)),
            (BinaryKind::Sub, Value::Object(_)) if inplace => {
                // No in-place sub_scaled: x.sub_(y, alpha) = x.add_(y, -alpha)
                Err("sub_ with alpha is not mapped".into())
            }
            (BinaryKind::Sub, Value::Object(_)) => e(x.sub_scaled(y, scalar(&extra)?)),
            (BinaryKind::Div, Value::String(_)) if inplace => e(x.div_rounding_(y, rounding(&extra)?)),
            (BinaryKind::Div, Value::String(_)) => e(x.div_rounding(y, rounding(&extra)?)),
            (BinaryKind::Pow, _) if inplace => e(x.pow_(y)),
            (BinaryKind::Pow, _) => e(x.pow(y)),
            _ if inplace => e(ferrotorch_core::ops::binary::binary_(kind, &x, y)),
            _ => e(ferrotorch_core::ops::binary::binary(kind, &x, y)),
        };
    }
    if let Some(kind) = math_kind(base) {
        let x = env.get(&a[0])?;
        let mut hold = None;
        let y = operand(env, &a[1], &mut hold)?;
        return if inplace {
            e(ferrotorch_core::ops::binary_math::binary_math_(kind, &x, y))
        } else {
            e(ferrotorch_core::ops::binary_math::binary_math(kind, &x, y))
        };
    }
    // Scalar first: ["r" + name, scalar, x].
    if let Some(kind) = name.strip_prefix('r').and_then(binary_kind) {
        let s = scalar(&a[0])?;
        let x = env.get(&a[1])?;
        return e(binary_scalar_lhs(kind, s, &x));
    }
    ops::other(name, env, a)
}

/// A tensor's encoding with `rg` (requires_grad) and `grad_fn` (the node's name).
fn snapshot(t: &Tensor) -> Value {
    match guarded(|| encode_tensor(t)) {
        Ok(mut v) => {
            v["rg"] = json!(t.requires_grad());
            v["grad_fn"] = match t.grad_fn() {
                Some(n) => json!(n.name()),
                None => Value::Null,
            };
            v
        }
        Err((kind, msg)) => json!({ kind: msg }),
    }
}

/// Runs a program; the result in the same JSON form as the driver's
/// PyTorch result (`status`, `step`, `msg`, `values`, `bwd`, `grads`).
pub fn run_program(prog: &Value) -> Value {
    let mut env = Env { vals: BTreeMap::new() };
    let mut leaves: Vec<(String, Tensor)> = Vec::new();
    let mut out = Map::new();
    let fail = |out: &mut Map<String, Value>, step: i64, (kind, msg): (&str, String)| {
        out.insert("status".into(), json!(kind));
        out.insert("step".into(), json!(step));
        out.insert("msg".into(), json!(msg));
    };
    // Inputs (step -1).
    let empty = vec![];
    for inp in prog["inputs"].as_array().unwrap_or(&empty) {
        let name = inp["name"].as_str().unwrap_or("?").to_string();
        let r = guarded(|| {
            let base = decode_tensor(inp)?;
            if inp["rg"].as_bool().unwrap_or(false) {
                base.requires_grad_(true).map_err(|e| e.to_string())?;
            }
            let mut t = base.clone();
            for v in inp["views"].as_array().unwrap_or(&vec![]) {
                t = apply_view(&t, v)?;
            }
            Ok((base, t))
        });
        match r {
            Ok((base, t)) => {
                if base.requires_grad() {
                    leaves.push((name.clone(), base.clone()));
                }
                if !inp["views"].as_array().is_none_or(|v| v.is_empty()) {
                    env.vals.insert(format!("{name}.b"), base);
                }
                env.vals.insert(name, t);
            }
            Err(f) => {
                fail(&mut out, -1, f);
                return Value::Object(out);
            }
        }
    }
    let ops = prog["ops"].as_array().unwrap_or(&empty);
    let mut steps = Vec::new();
    for (k, op) in ops.iter().enumerate() {
        match guarded(|| run_op(&env, op)) {
            Ok(ts) => {
                let prefix = out_prefix(op, k);
                let mut snap = Map::new();
                for (j, t) in ts.into_iter().enumerate() {
                    let name = format!("{prefix}.{j}");
                    snap.insert(name.clone(), snapshot(&t));
                    env.vals.insert(name, t);
                }
                steps.push(Value::Object(snap));
            }
            Err(f) => {
                fail(&mut out, k as i64, f);
                out.insert("steps".into(), Value::Array(steps));
                return Value::Object(out);
            }
        }
    }
    out.insert("status".into(), json!("ok"));
    out.insert("steps".into(), Value::Array(steps));
    let values: Map<String, Value> = env.vals.iter().map(|(n, t)| (n.clone(), snapshot(t))).collect();
    out.insert("values".into(), Value::Object(values));
    if let Some(target) = prog["backward"].as_str() {
        let r = guarded(|| {
            let t = env.get(&json!(target))?;
            t.sum().and_then(|s| s.backward()).map_err(|e| e.to_string())
        });
        match r {
            Ok(()) => {
                out.insert("bwd".into(), json!("ok"));
                let mut grads = Map::new();
                for (name, leaf) in &leaves {
                    let g = match leaf.grad_opt() {
                        Some(g) => encode_tensor(&g).unwrap_or_else(|e| json!({ "error": e })),
                        None => Value::Null,
                    };
                    grads.insert(name.clone(), g);
                }
                out.insert("grads".into(), Value::Object(grads));
            }
            Err((kind, msg)) => {
                out.insert("bwd".into(), json!(kind));
                out.insert("bwd_msg".into(), json!(msg));
            }
        }
    }
    Value::Object(out)
}

/// One difference between PyTorch's result and ours.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The class: `value`, `dtype`, `shape`, `error_vs_ok` (PyTorch errors,
    /// ferrotorch does not), `ok_vs_error`, `panic`, `grad_fn`,
    /// `requires_grad`, `missing`, `bwd_error_vs_ok`, `bwd_ok_vs_error`,
    /// `bwd_panic`, `grad_value`, `grad_dtype`, `grad_shape`, `grad_none`,
    /// `value_cascade` and `grad_cascade` (after an earlier merely-close float).
    pub class: String,
    /// The op the difference is attributed to.
    pub op: String,
    /// Human-readable detail.
    pub detail: String,
}

impl Finding {
    /// As JSON.
    pub fn to_json(&self) -> Value {
        json!({"class": self.class, "op": self.op, "detail": self.detail})
    }
}

/// Agreement statistics of floating-point values: how many compared tensors
/// were bitwise identical and how many merely within tolerance.
#[derive(Debug, Default, Clone, Copy)]
pub struct Exactness {
    /// Bitwise identical float tensors.
    pub exact: u64,
    /// Float tensors within tolerance but not identical.
    pub close: u64,
}

/// Tolerance `(rtol, atol)` of a dtype.
fn tolerance(dtype: &str, op: &str) -> (f64, f64) {
    let reduce = matches!(
        op,
        "sum"
            | "sum_dim"
            | "sum_dtype"
            | "mean"
            | "mean_dim"
            | "var"
            | "var_dim"
            | "std"
            | "std_dim"
            | "logsumexp"
            | "norm"
            | "norm_dim"
            | "prod"
            | "prod_dim"
            | "cumsum"
            | "cumprod"
            | "softmax"
            | "log_softmax"
            | "mm"
            | "bmm"
            | "mv"
            | "dot"
            | "matmul"
            | "backward"
            | "nanmean"
            | "nanmean_dim"
            | "var_mean"
            | "std_mean"
            | "mean_dtype"
            | "cumsum_dtype"
            | "cumprod_dtype"
            | "trace"
            | "addmm"
            | "addmv"
            | "addbmm"
            | "baddbmm"
            | "einsum"
            | "tensordot"
            | "matrix_norm"
            | "inv"
            | "det"
            | "slogdet"
            | "solve"
            | "cholesky"
            | "eigvalsh"
            | "svdvals"
            | "qr_abs"
    );
    let k = if reduce || ops_nn::REDUCING.contains(&op) {
        10.0
    } else {
        1.0
    };
    match dtype {
        "float64" => (1e-12 * k, 1e-12 * k),
        "float32" => (1e-6 * k, 1e-6 * k),
        "float16" => (1e-2, 1e-3 * k),
        "bfloat16" => (2e-2, 1e-2 * k),
        _ => (0.0, 0.0),
    }
}

/// Compares two encoded tensors; `Err((class, detail))` on a difference,
/// `Ok(Some(exact))` for float tensors, `Ok(None)` otherwise.
fn compare_tensor(
    exp: &Value,
    got: &Value,
    op: &str,
    prefix: &str,
) -> std::result::Result<Option<bool>, (String, String)> {
    if exp["dtype"] != got["dtype"] {
        return Err((
            format!("{prefix}dtype"),
            format!("dtype: torch {} vs ours {}", exp["dtype"], got["dtype"]),
        ));
    }
    if exp["shape"] != got["shape"] {
        return Err((
            format!("{prefix}shape"),
            format!("shape: torch {} vs ours {}", exp["shape"], got["shape"]),
        ));
    }
    let (e, g) = match (exp["data"].as_array(), got["data"].as_array()) {
        (Some(e), Some(g)) if e.len() == g.len() => (e, g),
        _ => return Err((format!("{prefix}value"), "data length differs".into())),
    };
    let dtype = exp["dtype"].as_str().unwrap_or("");
    let is_float = matches!(dtype, "float64" | "float32" | "float16" | "bfloat16");
    if !is_float {
        return match e.iter().zip(g).position(|(a, b)| a != b) {
            None => Ok(None),
            Some(i) => Err((
                format!("{prefix}value"),
                format!("at flat index {i}: torch {} vs ours {}", e[i], g[i]),
            )),
        };
    }
    let (rtol, atol) = tolerance(dtype, op);
    let mut exact = true;
    for (i, (a, b)) in e.iter().zip(g).enumerate() {
        let (x, y) = (num(a).unwrap_or(f64::NAN), num(b).unwrap_or(f64::NAN));
        if x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) {
            continue;
        }
        exact = false;
        let ok = x.is_finite() && y.is_finite() && (x - y).abs() <= atol + rtol * x.abs().max(y.abs());
        if !ok {
            return Err((
                format!("{prefix}value"),
                format!("at flat index {i}: torch {a} vs ours {b}"),
            ));
        }
    }
    Ok(Some(exact))
}

/// The name prefix of an op's outputs: `out`, or `r<k>` for the k-th op.
fn out_prefix(op: &Value, k: usize) -> String {
    op["out"].as_str().map_or_else(|| format!("r{k}"), str::to_string)
}

/// The index of the op producing value `name`.
fn producer(prog: &Value, name: &str) -> Option<usize> {
    let prefix = name.split('.').next()?;
    prog["ops"]
        .as_array()?
        .iter()
        .enumerate()
        .position(|(k, op)| out_prefix(op, k) == prefix)
}

fn op_name(prog: &Value, step: i64) -> String {
    if step < 0 {
        return "input".into();
    }
    prog["ops"][step as usize]["op"].as_str().unwrap_or("?").to_string()
}

/// The op a value is attributed to: its producer, or for an input (mutated
/// in place, or through a view) the last in-place op of the program.
fn value_op(prog: &Value, name: &str) -> String {
    if let Some(k) = producer(prog, name) {
        return op_name(prog, k as i64);
    }
    let empty = vec![];
    let ops = prog["ops"].as_array().unwrap_or(&empty);
    ops.iter()
        .rev()
        .filter_map(|o| o["op"].as_str())
        .find(|n| n.ends_with('_'))
        .unwrap_or("input")
        .to_string()
}

/// Rank of a finding class: the primary finding of a program is the one of
/// lowest rank (then the earliest).
fn severity(class: &str) -> u8 {
    match class {
        "crash" | "hang" => 0,
        "panic" | "bwd_panic" => 1,
        "error_vs_ok" | "ok_vs_error" => 2,
        "dtype" | "shape" | "missing" => 3,
        "value" => 4,
        "requires_grad" => 5,
        "bwd_error_vs_ok" | "bwd_ok_vs_error" => 6,
        "grad_none" | "grad_dtype" | "grad_shape" => 7,
        "grad_value" => 8,
        "value_cascade" | "grad_cascade" => 9,
        _ => 10,
    }
}

/// Compares two snapshots of value `name`, adding findings; returns false
/// when a float tensor was not bitwise identical (later differences may be
/// its consequences).
fn compare_value(
    (name, op): (&str, &str),
    e: &Value,
    g: &Value,
    tainted: bool,
    check_grad_fn: bool,
    out: &mut Vec<Finding>,
    stats: &mut Exactness,
) -> bool {
    let f = |class: &str, detail: String| Finding {
        class: class.into(),
        op: op.into(),
        detail: format!("{name}: {detail}"),
    };
    if let Some(p) = g.get("panic") {
        out.push(f("panic", format!("reading the value panicked: {p}")));
        return false;
    }
    let mut exact = true;
    match compare_tensor(e, g, op, "") {
        Err((class, detail)) => {
            let class = if class == "value" && tainted {
                "value_cascade".into()
            } else {
                class
            };
            out.push(f(&class, detail));
            exact = false;
        }
        Ok(Some(true)) => stats.exact += 1,
        Ok(Some(false)) => {
            stats.close += 1;
            exact = false;
        }
        Ok(None) => {}
    }
    if e["rg"] != g["rg"] {
        out.push(f(
            "requires_grad",
            format!("requires_grad torch {} vs ours {}", e["rg"], g["rg"]),
        ));
    } else if check_grad_fn && e["grad_fn"] != g["grad_fn"] {
        out.push(f(
            "grad_fn",
            format!("grad_fn torch {} vs ours {}", e["grad_fn"], g["grad_fn"]),
        ));
    }
    exact
}

/// Compares PyTorch's result `exp` with ours `got` for program `prog`:
/// every difference, the primary one (see `severity`) first.
///
/// Each op's outputs are compared as they were right after the op, then
/// every value's final state (in-place ops and writes through views), then
/// the gradients. A value difference after some float result was merely
/// close (not bitwise identical) is a `value_cascade`, not a `value`.
pub fn compare(prog: &Value, exp: &Value, got: &Value, stats: &mut Exactness) -> Vec<Finding> {
    let mut out = Vec::new();
    let f = |class: &str, op: String, detail: String| Finding {
        class: class.into(),
        op,
        detail,
    };
    let es = exp["status"].as_str().unwrap_or("?");
    let gs = got["status"].as_str().unwrap_or("?");
    let step = |v: &Value| v["step"].as_i64().unwrap_or(i64::MAX);
    let ek = if es == "ok" { i64::MAX } else { step(exp) };
    let gk = if gs == "ok" { i64::MAX } else { step(got) };
    if gs == "panic" && gk <= ek {
        out.push(f("panic", op_name(prog, gk), got["msg"].as_str().unwrap_or("").into()));
    } else if ek < gk {
        let msg = format!("torch: {}", exp["msg"].as_str().unwrap_or(""));
        out.push(f("error_vs_ok", op_name(prog, ek), msg));
    } else if gk < ek {
        let msg = format!("ours: {}", got["msg"].as_str().unwrap_or(""));
        out.push(f("ok_vs_error", op_name(prog, gk), msg));
    }
    // Outputs of the steps both sides ran.
    let empty_vec = vec![];
    let empty = Map::new();
    let esteps = exp["steps"].as_array().unwrap_or(&empty_vec);
    let gsteps = got["steps"].as_array().unwrap_or(&empty_vec);
    let mut tainted = false;
    let mut differs = std::collections::HashSet::new();
    for (k, (e, g)) in esteps.iter().zip(gsteps).enumerate() {
        let op = op_name(prog, k as i64);
        let (e, g) = (e.as_object().unwrap_or(&empty), g.as_object().unwrap_or(&empty));
        if e.len() != g.len() {
            let d = format!("{} outputs in torch vs {} in ours", e.len(), g.len());
            out.push(f("shape", op.clone(), d));
        }
        let mut step_exact = true;
        for (name, ev) in e {
            let Some(gv) = g.get(name) else { continue };
            let n = out.len();
            step_exact &= compare_value((name, &op), ev, gv, tainted, true, &mut out, stats);
            if out.len() > n {
                differs.insert(name.clone());
            }
        }
        tainted |= !step_exact;
    }
    if es == "ok" && gs == "ok" {
        // Final states.
        let ev = exp["values"].as_object().unwrap_or(&empty);
        let gv = got["values"].as_object().unwrap_or(&empty);
        let mut names: Vec<&String> = ev.keys().chain(gv.keys()).collect();
        names.sort_by_key(|n| value_order(prog, n));
        names.dedup();
        for name in names {
            if differs.contains(name.as_str()) {
                continue;
            }
            let op = value_op(prog, name);
            match (ev.get(name), gv.get(name)) {
                (Some(e), Some(g)) => {
                    let mut scratch = Exactness::default();
                    compare_value((name, &op), e, g, tainted, false, &mut out, &mut scratch);
                }
                _ => out.push(f("missing", op, format!("{name} exists on one side only"))),
            }
        }
        // Backward.
        let (eb, gb) = (exp["bwd"].as_str(), got["bwd"].as_str());
        let last = prog["ops"].as_array().map_or(0, |o| o.len() as i64) - 1;
        let bop = op_name(prog, last);
        match (eb, gb) {
            (_, Some("panic")) => out.push(f("bwd_panic", bop, got["bwd_msg"].to_string())),
            (Some("ok"), Some("ok")) => {
                let eg = exp["grads"].as_object().unwrap_or(&empty);
                let gg = got["grads"].as_object().unwrap_or(&empty);
                for (name, e) in eg {
                    let g = gg.get(name).unwrap_or(&Value::Null);
                    if e.is_null() != g.is_null() {
                        let d = format!("grad of {name} is None: torch {} vs ours {}", e.is_null(), g.is_null());
                        out.push(f("grad_none", bop.clone(), d));
                    } else if !e.is_null()
                        && let Err((class, detail)) = compare_tensor(e, g, "backward", "grad_")
                    {
                        let class = if class == "grad_value" && tainted {
                            "grad_cascade".into()
                        } else {
                            class
                        };
                        out.push(f(&class, bop.clone(), format!("grad of {name}: {detail}")));
                    }
                }
            }
            (Some("ok"), Some(_)) => out.push(f("bwd_ok_vs_error", bop, got["bwd_msg"].to_string())),
            (Some(_), Some("ok")) => out.push(f("bwd_error_vs_ok", bop, exp["bwd_msg"].to_string())),
            _ => {}
        }
    }
    out.sort_by_key(|x| severity(&x.class));
    out
}

/// Orders value names by their producing step (inputs last: they only
/// change through in-place ops).
fn value_order(prog: &Value, name: &str) -> (usize, String) {
    (producer(prog, name).unwrap_or(usize::MAX), name.to_string())
}

/// Handles one input line of the evaluator: `{"program": P, "expect": R?}`
/// gives `{"result": ours, "findings": [...], "exact": n, "close": n}`.
pub fn handle_line(line: &str) -> Value {
    let req: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return json!({"fatal": format!("bad JSON: {e}")}),
    };
    let prog = &req["program"];
    let result = run_program(prog);
    let mut resp = json!({ "result": result });
    if !req["expect"].is_null() {
        let mut stats = Exactness::default();
        let findings = compare(prog, &req["expect"], &result, &mut stats);
        resp["findings"] = Value::Array(findings.iter().map(Finding::to_json).collect());
        resp["exact"] = json!(stats.exact);
        resp["close"] = json!(stats.close);
    }
    resp
}
