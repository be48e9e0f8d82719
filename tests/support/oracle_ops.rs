//! `run_op` of `tests/oracle.rs` for the ops of `tests/oracle_extra/ops.json`
//! (written by `tests/gen_ops_oracle.py`): elementwise math, bitwise ops,
//! clamp with tensor bounds, lerp, nan_to_num, float classification, ...

use ferrotorch::{Operand, Tensor};
use serde_json::Value;

use super::{Run, input, kw, num, scalar_of};

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
        _ => return None,
    };
    one(r)
}
