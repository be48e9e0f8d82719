//! `run_op` of `tests/oracle.rs` for the linear-algebra ops of
//! `tests/oracle_extra/linalg.json` (written by `tests/gen_linalg_oracle.py`):
//! the addmm family, einsum, tensordot, cross, kron, the norms and the
//! `torch.linalg` decompositions; the case field `post` (sign
//! normalisation of eigenvectors and singular vectors) and the tolerances
//! of these ops. Also used by `tests/linalg_ops.rs` (PyTorch's error
//! messages), so it depends on nothing of `oracle.rs`.

use ferrotorch::{DType, MatrixOrd, Result, Tensor};
use serde_json::Value;

#[allow(unused_imports)]
pub use super::oracle_json::decode;
#[allow(unused_imports)]
use super::oracle_json::{input, kw, num};

fn dims_of(v: &Value) -> Vec<i64> {
    match v {
        Value::Array(a) => a.iter().map(|x| x.as_i64().unwrap()).collect(),
        x => vec![x.as_i64().unwrap()],
    }
}

/// A matrix-norm order: `"fro"`, `"nuc"` (any other string is
/// `MatrixOrd`'s parse error) or a number.
fn matrix_ord(v: &Value) -> Result<MatrixOrd> {
    match v.as_str() {
        Some(s) if !matches!(s, "inf" | "-inf" | "nan") => s.parse(),
        _ => Ok(MatrixOrd::P(num(v))),
    }
}

/// The ops of this module (names without `torch.`).
pub const OPS: &[&str] = &[
    "addmm",
    "addmv",
    "addbmm",
    "baddbmm",
    "einsum",
    "tensordot",
    "linalg.cross",
    "cross",
    "kron",
    "linalg.vector_norm",
    "linalg.matrix_norm",
    "linalg.norm",
    "linalg.inv",
    "linalg.solve",
    "linalg.det",
    "linalg.slogdet",
    "linalg.cholesky",
    "linalg.qr",
    "linalg.eigh",
    "linalg.eigvalsh",
    "linalg.svd",
    "linalg.svdvals",
];

/// Tolerances `(rtol, atol)` of this module's ops by dtype (forward values
/// and gradients): decompositions and products accumulate rounding, and
/// LAPACK's algorithms are not ours, so f32 within 1e-4 and f64 within
/// 1e-10 (relative); integer results exactly (the caller compares them so).
#[allow(dead_code)]
pub fn tolerance(short: &str, dtype: DType) -> Option<(f64, f64)> {
    if !OPS.contains(&short) {
        return None;
    }
    Some(match dtype {
        DType::F64 => (1e-10, 1e-12),
        DType::F16 => (2e-3, 1e-3),
        DType::BF16 => (1e-2, 1e-2),
        _ => (1e-4, 1e-5),
    })
}

/// The outputs after the case's `post` (one entry per output: `null`,
/// `"sign_cols"` or `"sign_rows"`): each column (or row) times the sign of
/// its largest-magnitude component, a constant of the graph, so gradients
/// flow through the product as through PyTorch's.
#[allow(dead_code)]
pub fn apply_post(case: &Value, outs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    let Some(post) = case.get("post").and_then(Value::as_array) else {
        return Ok(outs);
    };
    outs.into_iter()
        .zip(post.iter().map(Value::as_str).chain(std::iter::repeat(None)))
        .map(|(t, p)| match p {
            None => Ok(t),
            Some("sign_cols") => sign_fix(&t, -2),
            Some("sign_rows") => sign_fix(&t, -1),
            Some(other) => panic!("unknown post {other}"),
        })
        .collect()
}

/// `t` times the sign of each vector's largest-|.| component (vectors along `dim`).
fn sign_fix(t: &Tensor, dim: i64) -> Result<Tensor> {
    if t.numel() == 0 {
        return Ok(t.clone());
    }
    let d = t.detach();
    let idx = d.abs()?.argmax(Some(dim), true)?;
    let s = d.gather(dim, &idx)?.sign()?;
    t.mul(&s)
}

/// Runs the case's op if it is one of this module's (`short`: the name
/// without `torch.`); `None` otherwise.
pub fn run_op(short: &str, case: &Value, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>>> {
    let one = |r: Result<Tensor>| Some(r.map(|t| vec![t]));
    let x = || {
        input(case, inputs, "input")
            .or(input(case, inputs, "self"))
            .or(input(case, inputs, "A"))
            .or(input(case, inputs, "x"))
            .or(inputs.first())
    };
    let named = |n: &str| input(case, inputs, n);
    let f = |k: &str, d: f64| kw(case, k).map(num).unwrap_or(d);
    let flag = |k: &str| kw(case, k).and_then(Value::as_bool).unwrap_or(false);
    let dtype = || kw(case, "dtype").and_then(|d| DType::from_name(d.as_str()?));
    let dim = |k: &str| kw(case, k).map(dims_of);
    match short {
        "addmm" => one(x()?.addmm(named("mat1")?, named("mat2")?, f("beta", 1.0), f("alpha", 1.0))),
        "addmv" => one(x()?.addmv(named("mat")?, named("vec")?, f("beta", 1.0), f("alpha", 1.0))),
        "addbmm" => one(x()?.addbmm(named("batch1")?, named("batch2")?, f("beta", 1.0), f("alpha", 1.0))),
        "baddbmm" => one(x()?.baddbmm(named("batch1")?, named("batch2")?, f("beta", 1.0), f("alpha", 1.0))),
        "einsum" => {
            let refs: Vec<&Tensor> = inputs.iter().collect();
            one(Tensor::einsum(kw(case, "equation")?.as_str()?, &refs))
        }
        "tensordot" => {
            let (a, b) = (named("a").or(x())?, named("b").or(inputs.get(1))?);
            match kw(case, "dims")? {
                Value::Array(l) => one(a.tensordot(b, &dims_of(&l[0]), &dims_of(&l[1]))),
                v => one(a.tensordot_n(b, v.as_u64()? as usize)),
            }
        }
        "linalg.cross" => one(x()?.linalg_cross(named("other")?, dim("dim").map_or(-1, |d| d[0]))),
        "cross" => one(x()?.cross(named("other")?, dim("dim").map(|d| d[0]))),
        "kron" => one(x()?.kron(named("other")?)),
        "linalg.vector_norm" => {
            one(x()?.linalg_vector_norm_with(f("ord", 2.0), dim("dim").as_deref(), flag("keepdim"), dtype()))
        }
        "linalg.matrix_norm" => {
            let ord = match kw(case, "ord").map(matrix_ord).transpose() {
                Ok(o) => o.unwrap_or(MatrixOrd::Fro),
                Err(e) => return Some(Err(e)),
            };
            let dims = dim("dim").unwrap_or(vec![-2, -1]);
            one(x()?.linalg_matrix_norm_with(ord, &dims, flag("keepdim"), dtype()))
        }
        "linalg.norm" => {
            let ord = match kw(case, "ord").map(matrix_ord).transpose() {
                Ok(o) => o,
                Err(e) => return Some(Err(e)),
            };
            one(x()?.linalg_norm(ord, dim("dim").as_deref(), flag("keepdim"), dtype()))
        }
        "linalg.inv" => one(x()?.linalg_inv()),
        "linalg.solve" => one(x()?.linalg_solve(named("B")?)),
        "linalg.det" => one(x()?.linalg_det()),
        "linalg.slogdet" => Some(x()?.linalg_slogdet().map(|(s, l)| vec![s, l])),
        "linalg.cholesky" => one(x()?.linalg_cholesky(flag("upper"))),
        "linalg.qr" => {
            let mode = kw(case, "mode").and_then(Value::as_str).unwrap_or("reduced");
            Some(x()?.linalg_qr(mode).map(|(q, r)| vec![q, r]))
        }
        "linalg.eigh" | "linalg.eigvalsh" => {
            let uplo = kw(case, "UPLO").and_then(Value::as_str).unwrap_or("L");
            if short == "linalg.eigh" {
                Some(x()?.linalg_eigh(uplo).map(|(w, v)| vec![w, v]))
            } else {
                one(x()?.linalg_eigvalsh(uplo))
            }
        }
        "linalg.svd" => {
            let full = kw(case, "full_matrices").and_then(Value::as_bool).unwrap_or(true);
            Some(x()?.linalg_svd(full).map(|(u, s, vh)| vec![u, s, vh]))
        }
        "linalg.svdvals" => one(x()?.linalg_svdvals()),
        _ => None,
    }
}
