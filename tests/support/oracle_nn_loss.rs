//! `run_op` of `tests/oracle.rs` for `torch.nn.functional`'s
//! normalisations, embedding, linear, activations and losses (the shared
//! oracle's `norm.json`, `loss.json`, `linear_embedding.json` and the
//! `higher_order.json` cases over them, and `tests/oracle_extra/nn_loss.json`
//! written by `tests/gen_nn_loss_oracle.py`).

use ferrotorch::Tensor;
use ferrotorch::nn::functional as F;
use serde_json::Value;

use super::oracle_json::{Run, dims_of, input, kw, num};

/// The ops this module runs (names after `torch.nn.functional.`).
pub(super) const OPS: &[&str] = &[
    "layer_norm",
    "rms_norm",
    "group_norm",
    "batch_norm",
    "embedding",
    "linear",
    "leaky_relu",
    "elu",
    "celu",
    "selu",
    "hardtanh",
    "relu6",
    "mish",
    "hardswish",
    "hardsigmoid",
    "logsigmoid",
    "softshrink",
    "hardshrink",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
];

fn reduction(case: &Value) -> ferrotorch::Result<F::Reduction> {
    F::Reduction::parse(kw(case, "reduction").and_then(Value::as_str).unwrap_or("mean"))
}

fn sizes(v: &Value) -> Vec<usize> {
    dims_of(v).iter().map(|&d| d as usize).collect()
}

/// Runs the case's op if it is one of [`OPS`].
pub(super) fn run_op(short: &str, case: &Value, inputs: &[Tensor]) -> Option<Run> {
    let t = |n: &str| input(case, inputs, n);
    let x = || t("input").or(inputs.first()).expect("an input");
    let f = |k: &str, d: f64| kw(case, k).map(num).unwrap_or(d);
    let flag = |k: &str| kw(case, k).and_then(Value::as_bool).unwrap_or(false);
    let int = |k: &str| kw(case, k).and_then(Value::as_i64);
    let one = |r: ferrotorch::Result<Tensor>| Some(r.map(|t| vec![t]));
    let r = match short {
        "layer_norm" => F::layer_norm(
            x(),
            &sizes(kw(case, "normalized_shape")?),
            t("weight"),
            t("bias"),
            f("eps", 1e-5),
        ),
        "rms_norm" => F::rms_norm(
            x(),
            &sizes(kw(case, "normalized_shape")?),
            t("weight"),
            kw(case, "eps").map(num),
        ),
        "group_norm" => F::group_norm(x(), int("num_groups")? as usize, t("weight"), t("bias"), f("eps", 1e-5)),
        "batch_norm" => F::batch_norm(
            x(),
            t("running_mean"),
            t("running_var"),
            t("weight"),
            t("bias"),
            &F::BatchNormOptions::new()
                .training(flag("training"))
                .momentum(f("momentum", 0.1))
                .eps(f("eps", 1e-5)),
        ),
        "embedding" => F::embedding(
            x(),
            t("weight")?,
            &some(
                some(
                    F::EmbeddingOptions::new()
                        .norm_type(f("norm_type", 2.0))
                        .scale_grad_by_freq(flag("scale_grad_by_freq")),
                    int("padding_idx"),
                    F::EmbeddingOptions::padding_idx,
                ),
                kw(case, "max_norm").map(num),
                F::EmbeddingOptions::max_norm,
            ),
        ),
        "linear" => F::linear(x(), t("weight")?, t("bias")),
        "leaky_relu" => F::leaky_relu(x(), f("negative_slope", 0.01)),
        "elu" => F::elu(x(), f("alpha", 1.0)),
        "celu" => F::celu(x(), f("alpha", 1.0)),
        "selu" => F::selu(x()),
        "hardtanh" => F::hardtanh(x(), f("min_val", -1.0), f("max_val", 1.0)),
        "relu6" => F::relu6(x()),
        "mish" => F::mish(x()),
        "hardswish" => F::hardswish(x()),
        "hardsigmoid" => F::hardsigmoid(x()),
        "logsigmoid" => F::logsigmoid(x()),
        "softshrink" => F::softshrink(x(), f("lambd", 0.5)),
        "hardshrink" => F::hardshrink(x(), f("lambd", 0.5)),
        "cross_entropy"
        | "nll_loss"
        | "mse_loss"
        | "l1_loss"
        | "smooth_l1_loss"
        | "huber_loss"
        | "binary_cross_entropy"
        | "binary_cross_entropy_with_logits" => {
            let target = t("target")?;
            reduction(case).and_then(|reduction| match short {
                "cross_entropy" => F::cross_entropy(
                    x(),
                    target,
                    &some(
                        F::CrossEntropyOptions::new()
                            .ignore_index(int("ignore_index").unwrap_or(-100))
                            .reduction(reduction)
                            .label_smoothing(f("label_smoothing", 0.0)),
                        t("weight"),
                        F::CrossEntropyOptions::weight,
                    ),
                ),
                "nll_loss" => F::nll_loss(
                    x(),
                    target,
                    &some(
                        F::NllLossOptions::new()
                            .ignore_index(int("ignore_index").unwrap_or(-100))
                            .reduction(reduction),
                        t("weight"),
                        F::NllLossOptions::weight,
                    ),
                ),
                "mse_loss" => F::mse_loss(x(), target, reduction),
                "l1_loss" => F::l1_loss(x(), target, reduction),
                "smooth_l1_loss" => F::smooth_l1_loss(x(), target, reduction, f("beta", 1.0)),
                "huber_loss" => F::huber_loss(x(), target, reduction, f("delta", 1.0)),
                "binary_cross_entropy" => F::binary_cross_entropy(x(), target, t("weight"), reduction),
                _ => F::binary_cross_entropy_with_logits(
                    x(),
                    target,
                    &some(
                        some(
                            F::BceWithLogitsOptions::new().reduction(reduction),
                            t("weight"),
                            F::BceWithLogitsOptions::weight,
                        ),
                        t("pos_weight"),
                        F::BceWithLogitsOptions::pos_weight,
                    ),
                ),
            })
        }
        "kl_div" => {
            let target = t("target")?;
            F::KlDivReduction::parse(kw(case, "reduction").and_then(Value::as_str).unwrap_or("mean"))
                .and_then(|r| F::kl_div(x(), target, r, flag("log_target")))
        }
        _ => return None,
    };
    one(r)
}

/// `opts` with the keyword `set` applied when the case gives a value.
pub fn some<O, V>(opts: O, value: Option<V>, set: impl FnOnce(O, V) -> O) -> O {
    match value {
        Some(v) => set(opts, v),
        None => opts,
    }
}
