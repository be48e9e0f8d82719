//! `run_op` of `tests/oracle.rs` for the ops of `tests/oracle_extra/ops.json`
//! (written by `tests/gen_ops_oracle.py`): elementwise math, bitwise ops,
//! clamp with tensor bounds, lerp, nan_to_num, float classification, ...

use ferrotorch::{Indexing, Operand, SearchSortedOptions, Tensor, UniqueOptions};
use serde_json::Value;

use super::oracle_json::{Run, dims_of, input, kw, num, scalar_of};

/// An operand named `name`: the case input of that name, else the kwarg
/// scalar, else `None`.
fn operand<'a>(case: &Value, inputs: &'a [Tensor], name: &str) -> Option<Operand<'a>> {
    match input(case, inputs, name) {
        Some(t) => Some(Operand::Tensor(t)),
        None => kw(case, name).map(|v| Operand::Scalar(scalar_of(v))),
    }
}

/// Runs the case's op if it is one of this module's; `None` otherwise.
pub(super) fn run_op(short: &str, case: &Value, inputs: &[Tensor], x: Option<&Tensor>) -> Option<Run> {
    let one = |r: ferrotorch::Result<Tensor>| Some(r.map(|t| vec![t]));
    let int = |k: &str| kw(case, k).and_then(Value::as_i64);
    match short {
        "tril_indices" => {
            return one(Tensor::tril_indices(
                int("row")?,
                int("col")?,
                int("offset").unwrap_or(0),
            ));
        }
        "triu_indices" => {
            return one(Tensor::triu_indices(
                int("row")?,
                int("col")?,
                int("offset").unwrap_or(0),
            ));
        }
        _ => {}
    }
    let x = x?;
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let many = |r: ferrotorch::Result<Vec<Tensor>>| Some(r);
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
        "erfinv" => x.erfinv(),
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
        "tile" => x.tile(dims_of(kw(case, "dims")?)),
        "searchsorted" => {
            let mut opts = SearchSortedOptions::new()
                .right(flag("right"))
                .out_int32(flag("out_int32"));
            if let Some(side) = kw(case, "side").and_then(Value::as_str) {
                opts = opts.side(side);
            }
            if let Some(s) = input(case, inputs, "sorter") {
                opts = opts.sorter(s);
            }
            input(case, inputs, "sorted_sequence")?.searchsorted_with(input(case, inputs, "input")?, opts)
        }
        "bucketize" => input(case, inputs, "input")?.bucketize(input(case, inputs, "boundaries")?, flag("right")),
        "bincount" => x.bincount(input(case, inputs, "weights"), int("minlength").unwrap_or(0) as usize),
        "histc" => x.histc(
            int("bins").unwrap_or(100),
            kw(case, "min").map(num).unwrap_or(0.0),
            kw(case, "max").map(num).unwrap_or(0.0),
        ),
        "repeat_interleave" => {
            let dim = int("dim");
            match input(case, inputs, "repeats") {
                Some(r) => x.repeat_interleave_tensor(r, dim),
                None => x.repeat_interleave(int("repeats")?, dim),
            }
        }
        "movedim" | "moveaxis" => x.movedim(dims_of(kw(case, "source")?), dims_of(kw(case, "destination")?)),
        "swapaxes" => x.swapaxes(int("axis0")?, int("axis1")?),
        "take_along_dim" => x.take_along_dim(input(case, inputs, "indices")?, int("dim")),
        "argwhere" => x.argwhere(),
        "nonzero" if flag("as_tuple") => return many(x.nonzero_tuple()),
        "meshgrid" => {
            let ij = kw(case, "indexing").and_then(Value::as_str) != Some("xy");
            let indexing = if ij { Indexing::Ij } else { Indexing::Xy };
            return many(Tensor::meshgrid(&refs, indexing));
        }
        "cartesian_prod" => Tensor::cartesian_prod(&refs),
        "broadcast_tensors" => return many(Tensor::broadcast_tensors(&refs)),
        "atleast_1d" => x.atleast_1d(),
        "atleast_2d" => x.atleast_2d(),
        "atleast_3d" => x.atleast_3d(),
        "roll" => x.roll(
            dims_of(kw(case, "shifts")?),
            kw(case, "dims").map(dims_of).unwrap_or_default(),
        ),
        "diagonal" => x.diagonal(
            int("offset").unwrap_or(0),
            int("dim1").unwrap_or(0),
            int("dim2").unwrap_or(1),
        ),
        "diag_embed" => x.diag_embed(
            int("offset").unwrap_or(0),
            int("dim1").unwrap_or(-2),
            int("dim2").unwrap_or(-1),
        ),
        "diag" => x.diag(int("diagonal").unwrap_or(0)),
        "trace" => x.trace(),
        "block_diag" => Tensor::block_diag(&refs),
        "unfold" => x.unfold(int("dimension")?, int("size")?, int("step")?),
        "masked_select" => x.masked_select(input(case, inputs, "mask")?),
        "masked_scatter" => x.masked_scatter(input(case, inputs, "mask")?, input(case, inputs, "source")?),
        "take" => x.take(input(case, inputs, "index")?),
        "index_add" => x.index_add(
            int("dim")?,
            input(case, inputs, "index")?,
            input(case, inputs, "source")?,
            kw(case, "alpha").map(scalar_of).unwrap_or(ferrotorch::Scalar::Int(1)),
        ),
        "index_copy" => x.index_copy(
            int("dim")?,
            input(case, inputs, "index")?,
            input(case, inputs, "source")?,
        ),
        "index_fill" => x.index_fill(
            int("dim")?,
            input(case, inputs, "index")?,
            scalar_of(kw(case, "value")?),
        ),
        _ => return None,
    };
    one(r)
}
