//! `run_op` of `tests/oracle.rs` for the neural-network functionals of the
//! shared oracle (`conv_pool.json`, `higher_order.json`) and of
//! `tests/oracle_extra/nn.json` (written by `tests/gen_nn_oracle.py`):
//! convolutions and pooling. Also used by `tests/nn_ops.rs`, so it depends
//! on nothing of `oracle.rs`.
//!
//! A case may carry `"layouts": {"input": "channels_last"}`: that input is
//! given to the op as a permuted view (channels last in memory, as
//! `x.contiguous(memory_format=torch.channels_last)`; `"transposed"`: its
//! last two dims swapped in memory), built from the JSON value by
//! differentiable views, so its gradient is checked too.

#![allow(dead_code)]

use ferrotorch::{AvgPoolOptions, ConvOptions, ConvTransposeOptions, MaxPoolOptions, Padding, Tensor};
use serde_json::Value;

#[allow(unused_imports)]
pub use super::oracle_json::decode;
#[allow(unused_imports)]
use super::oracle_json::{input, kw, num};

/// The ops this module runs (names after `torch.nn.functional.`).
pub const OPS: &[&str] = &[
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "max_pool1d",
    "max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
];

/// An int-or-list kwarg as a list (`None` when absent).
fn ints(case: &Value, key: &str) -> Option<Vec<i64>> {
    kw(case, key).map(|v| match v {
        Value::Array(a) => a.iter().map(|x| x.as_i64().unwrap()).collect(),
        x => vec![x.as_i64().unwrap()],
    })
}

/// `x` as the view the case's `layouts` asks for (same values).
fn with_layout(case: &Value, name: &str, x: &Tensor) -> ferrotorch::Result<Tensor> {
    match case.get("layouts").and_then(|l| l.get(name)).and_then(Value::as_str) {
        None => Ok(x.clone()),
        Some("channels_last") => {
            let n = x.ndim() as i64;
            let mut to_last: Vec<i64> = vec![0];
            to_last.extend(2..n);
            to_last.push(1);
            let mut back: Vec<i64> = vec![0, n - 1];
            back.extend(1..n - 1);
            x.permute(to_last)?.contiguous()?.permute(back)
        }
        Some("transposed") => x.transpose(-1, -2)?.contiguous()?.transpose(-1, -2),
        Some(other) => panic!("unknown layout {other}"),
    }
}

fn conv_options(case: &Value) -> ConvOptions {
    let mut o = ConvOptions::new();
    if let Some(s) = ints(case, "stride") {
        o = o.stride(s);
    }
    if let Some(d) = ints(case, "dilation") {
        o = o.dilation(d);
    }
    if let Some(g) = kw(case, "groups").and_then(Value::as_i64) {
        o = o.groups(g);
    }
    match kw(case, "padding") {
        Some(Value::String(s)) if s == "same" => o.padding(Padding::Same),
        Some(Value::String(s)) if s == "valid" => o.padding(Padding::Valid),
        Some(_) => o.padding(ints(case, "padding").unwrap()),
        None => o,
    }
}

fn conv_transpose_options(case: &Value) -> ConvTransposeOptions {
    let mut o = ConvTransposeOptions::new();
    if let Some(s) = ints(case, "stride") {
        o = o.stride(s);
    }
    if let Some(p) = ints(case, "padding") {
        o = o.padding(p);
    }
    if let Some(p) = ints(case, "output_padding") {
        o = o.output_padding(p);
    }
    if let Some(d) = ints(case, "dilation") {
        o = o.dilation(d);
    }
    if let Some(g) = kw(case, "groups").and_then(Value::as_i64) {
        o = o.groups(g);
    }
    o
}

fn max_options(case: &Value) -> Option<MaxPoolOptions> {
    let mut o = MaxPoolOptions::new(ints(case, "kernel_size")?);
    if let Some(s) = ints(case, "stride") {
        o = o.stride(s);
    }
    if let Some(p) = ints(case, "padding") {
        o = o.padding(p);
    }
    if let Some(d) = ints(case, "dilation") {
        o = o.dilation(d);
    }
    Some(o.ceil_mode(kw(case, "ceil_mode").and_then(Value::as_bool).unwrap_or(false)))
}

fn avg_options(case: &Value) -> Option<AvgPoolOptions> {
    let mut o = AvgPoolOptions::new(ints(case, "kernel_size")?);
    if let Some(s) = ints(case, "stride") {
        o = o.stride(s);
    }
    if let Some(p) = ints(case, "padding") {
        o = o.padding(p);
    }
    if let Some(d) = kw(case, "divisor_override").and_then(Value::as_i64) {
        o = o.divisor_override(d);
    }
    Some(
        o.ceil_mode(kw(case, "ceil_mode").and_then(Value::as_bool).unwrap_or(false))
            .count_include_pad(kw(case, "count_include_pad").and_then(Value::as_bool).unwrap_or(true)),
    )
}

/// Runs the case's op if it is one of this module's; `None` otherwise.
pub fn run_op(short: &str, case: &Value, inputs: &[Tensor]) -> Option<ferrotorch::Result<Vec<Tensor>>> {
    if !OPS.contains(&short) {
        return None;
    }
    let run = || -> ferrotorch::Result<Vec<Tensor>> {
        let get = |name: &str| -> ferrotorch::Result<Option<Tensor>> {
            input(case, inputs, name)
                .map(|t| with_layout(case, name, t))
                .transpose()
        };
        let x = get("input")?.expect("an input");
        let (w, b) = (get("weight")?, get("bias")?);
        let indices = kw(case, "return_indices").and_then(Value::as_bool).unwrap_or(false);
        let pair = |(v, i): (Tensor, Tensor)| if indices { vec![v, i] } else { vec![v] };
        let out = |size: &str| ints(case, size).expect("output_size");
        Ok(match short {
            "conv1d" => vec![x.conv1d(&w.unwrap(), b.as_ref(), conv_options(case))?],
            "conv2d" => vec![x.conv2d(&w.unwrap(), b.as_ref(), conv_options(case))?],
            "conv_transpose1d" => vec![x.conv_transpose1d(&w.unwrap(), b.as_ref(), conv_transpose_options(case))?],
            "conv_transpose2d" => vec![x.conv_transpose2d(&w.unwrap(), b.as_ref(), conv_transpose_options(case))?],
            "max_pool1d" => pair(x.max_pool1d_with_indices(max_options(case).unwrap())?),
            "max_pool2d" => pair(x.max_pool2d_with_indices(max_options(case).unwrap())?),
            "avg_pool1d" => vec![x.avg_pool1d(avg_options(case).unwrap())?],
            "avg_pool2d" => vec![x.avg_pool2d(avg_options(case).unwrap())?],
            "adaptive_avg_pool1d" => vec![x.adaptive_avg_pool1d(out("output_size"))?],
            "adaptive_avg_pool2d" => vec![x.adaptive_avg_pool2d(out("output_size"))?],
            "adaptive_max_pool1d" => pair(x.adaptive_max_pool1d(out("output_size"))?),
            "adaptive_max_pool2d" => pair(x.adaptive_max_pool2d(out("output_size"))?),
            _ => unreachable!("checked above"),
        })
    };
    Some(run())
}
