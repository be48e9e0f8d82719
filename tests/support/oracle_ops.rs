//! `run_op` of `tests/oracle.rs` for the ops of `tests/oracle_extra/ops.json`
//! (written by `tests/gen_ops_oracle.py`): elementwise math, bitwise ops,
//! clamp with tensor bounds, lerp, nan_to_num, float classification, ...

use ferrotorch::{Operand, Tensor, UniqueOptions};
use serde_json::Value;

use super::{Run, dims_of, input, kw, num, scalar_of};

/// An operand named `name`: the case input of that name, else the kwarg
/// scalar, else `None`.
fn operand<'a>(case: &Value, inputs: &'a [Tensor], name: &str) -> Option<Operand<'a>> {
    match input(case, inputs, name) {
        Some(t) => Some(Operand::Tensor(t)),
        None => kw(case, name).map(|v| Operand::Scalar(scalar_of(v))),
    }
}

/// Runs the case's op if it is one of this module's; `None` otherwise.
pub(super) fn run_op(short: &str, case: &Value, inputs: &[Tensor], x: &Tensor) -> Option<Run> {
    let one = |r: ferrotorch::Result<Tensor>| Some(r.map(|t| vec![t]));
    let other = || operand(case, inputs, "other");
    let keepdim = || kw(case, "keepdim").and_then(Value::as_bool).unwrap_or(false);
    let flag = |k: &str| kw(case, k).and_then(Value::as_bool).unwrap_or(false);
    let dim_list = || kw(case, "dim").map(dims_of);
    let pair = |r: ferrotorch::Result<(Tensor, Tensor)>| Some(r.map(|(a, b)| vec![a, b]));
    let r = match short {
        "atan2" => x.atan2(other()?),
        "hypot" => x.hypot(other()?),
        "logaddexp" => x.logaddexp(other()?),
        "logaddexp2" => x.logaddexp2(other()?),
        "copysign" => x.copysign(other()?),
        "remainder" => x.remainder(other()?),
        "fmod" => x.fmod(other()?),
        "bitwise_and" => x.bitwise_and(other()?),
        "bitwise_or" => x.bitwise_or(other()?),
        "bitwise_xor" => x.bitwise_xor(other()?),
        "bitwise_left_shift" => x.bitwise_left_shift(other()?),
        "bitwise_right_shift" => x.bitwise_right_shift(other()?),
        "bitwise_not" => x.bitwise_not(),
        "lerp" => x.lerp(input(case, inputs, "end")?, operand(case, inputs, "weight")?),
        "clamp" => x.clamp(operand(case, inputs, "min"), operand(case, inputs, "max")),
        "clamp_min" => x.clamp_min(operand(case, inputs, "min")?),
        "clamp_max" => x.clamp_max(operand(case, inputs, "max")?),
        "nan_to_num" => x.nan_to_num(
            kw(case, "nan").map(num).unwrap_or(0.0),
            kw(case, "posinf").map(num),
            kw(case, "neginf").map(num),
        ),
        "isnan" => x.isnan(),
        "isinf" => x.isinf(),
        "isposinf" => x.isposinf(),
        "isneginf" => x.isneginf(),
        "isfinite" => x.isfinite(),
        "kthvalue" => {
            let dim = kw(case, "dim").and_then(Value::as_i64).unwrap_or(-1);
            return pair(x.kthvalue(kw(case, "k")?.as_i64()?, dim, keepdim()));
        }
        "median" | "nanmedian" => {
            let nan = short == "nanmedian";
            return match kw(case, "dim").and_then(Value::as_i64) {
                Some(d) if nan => pair(x.nanmedian_dim(d, keepdim())),
                Some(d) => pair(x.median_dim(d, keepdim())),
                None if nan => one(x.nanmedian()),
                None => one(x.median()),
            };
        }
        "mode" => return pair(x.mode(kw(case, "dim").and_then(Value::as_i64).unwrap_or(-1), keepdim())),
        "unique" | "unique_consecutive" => {
            let opts = UniqueOptions {
                return_inverse: flag("return_inverse"),
                return_counts: flag("return_counts"),
                dim: kw(case, "dim").and_then(Value::as_i64),
            };
            let r = if short == "unique" {
                x.unique_with(opts)
            } else {
                x.unique_consecutive_with(opts)
            };
            return Some(r.map(|u| {
                let mut v = vec![u.values];
                v.extend(u.inverse);
                v.extend(u.counts);
                v
            }));
        }
        "nansum" => match dim_list() {
            Some(d) => x.nansum_dim(d, keepdim()),
            None => x.nansum(),
        },
        "nanmean" => match dim_list() {
            Some(d) => x.nanmean_dim(d, keepdim()),
            None => x.nanmean(),
        },
        "count_nonzero" => match dim_list() {
            Some(d) => x.count_nonzero_dim(d),
            None => x.count_nonzero(),
        },
        "aminmax" => return pair(x.aminmax(kw(case, "dim").and_then(Value::as_i64), keepdim())),
        "var_mean" | "std_mean" => {
            let c = kw(case, "correction").map(num).unwrap_or(1.0);
            let d = dim_list().unwrap_or_default();
            return pair(if short == "var_mean" {
                x.var_mean_dim(d, c, keepdim())
            } else {
                x.std_mean_dim(d, c, keepdim())
            });
        }
        "cummax" => return pair(x.cummax(kw(case, "dim")?.as_i64()?)),
        "cummin" => return pair(x.cummin(kw(case, "dim")?.as_i64()?)),
        "logcumsumexp" => x.logcumsumexp(kw(case, "dim")?.as_i64()?),
        "diff" => x.diff(
            kw(case, "n").and_then(Value::as_i64).unwrap_or(1),
            kw(case, "dim").and_then(Value::as_i64).unwrap_or(-1),
            input(case, inputs, "prepend"),
            input(case, inputs, "append"),
        ),
        _ => return None,
    };
    one(r)
}
