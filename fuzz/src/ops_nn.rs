//! The `nn` op group: `torch.nn.functional`'s poolings, convolutions,
//! normalisations, embedding, losses and activations, each fuzzer op name
//! and its positional arguments mapped to a call of
//! `ferrotorch::nn::functional` (or, where that has no function, the
//! core's). `exec_nn` in `fuzz/driver.py` is the PyTorch side.

use ferrotorch::nn::functional as F;
use ferrotorch::{AvgPoolOptions, ConvOptions, ConvTransposeOptions, MaxPoolOptions, Padding, Reduction, Tensor};
use serde_json::Value;

use crate::json::{Env, Res, int, ints, num};

/// The ops of this table: their results are sums (windows, dot products,
/// statistics, losses), compared with the reductions' tolerance.
pub(crate) const REDUCING: &[&str] = &[
    "avg_pool1d",
    "avg_pool2d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "linear",
    "layer_norm",
    "rms_norm",
    "group_norm",
    "batch_norm",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "bce_with_logits",
    "kl_div",
    "sdpa",
];

fn e1(r: ferrotorch::Result<Tensor>) -> Res<Vec<Tensor>> {
    r.map(|t| vec![t]).map_err(|e| e.to_string())
}

fn e2(r: ferrotorch::Result<(Tensor, Tensor)>) -> Res<Vec<Tensor>> {
    r.map(|(a, b)| vec![a, b]).map_err(|e| e.to_string())
}

fn flag(v: &Value) -> Res<bool> {
    v.as_bool().ok_or_else(|| format!("not a bool: {v}"))
}

/// An int or a list of ints (PyTorch's int-or-tuple arguments).
fn int_or_ints(v: &Value) -> Res<Vec<i64>> {
    if v.is_array() { ints(v) } else { int(v).map(|i| vec![i]) }
}

fn opt_num(v: &Value) -> Res<Option<f64>> {
    if v.is_null() { Ok(None) } else { num(v).map(Some) }
}

fn reduction(v: &Value) -> Res<Reduction> {
    Reduction::parse(v.as_str().ok_or("reduction: not a string")?).map_err(|e| e.to_string())
}

/// Sizes: PyTorch's `int[]` arguments refuse negative entries before ferrotorch sees them.
fn sizes(v: &Value) -> Res<Vec<usize>> {
    ints(v)?
        .into_iter()
        .map(|s| usize::try_from(s).map_err(|_| format!("negative size {s}")))
        .collect()
}

/// Runs op `name` if it is one of this table's; `None` otherwise.
pub(crate) fn nn(name: &str, env: &Env, a: &[Value]) -> Option<Res<Vec<Tensor>>> {
    run(name, env, a).transpose()
}

fn run(name: &str, env: &Env, a: &[Value]) -> Res<Option<Vec<Tensor>>> {
    let x = || env.get(&a[0]);
    let t = |k: usize| env.get(&a[k]);
    let opt_t = |k: usize| {
        if a[k].is_null() {
            Ok(None)
        } else {
            env.get(&a[k]).map(Some)
        }
    };
    let b = |k: usize| flag(&a[k]);
    let f = |k: usize| num(&a[k]);
    let max_opts = || -> Res<MaxPoolOptions> {
        let mut o = MaxPoolOptions::new(int_or_ints(&a[1])?)
            .padding(int_or_ints(&a[3])?)
            .dilation(int_or_ints(&a[4])?)
            .ceil_mode(b(5)?);
        if !a[2].is_null() {
            o = o.stride(int_or_ints(&a[2])?);
        }
        Ok(o)
    };
    let avg_opts = || -> Res<AvgPoolOptions> {
        let mut o = AvgPoolOptions::new(int_or_ints(&a[1])?)
            .padding(int_or_ints(&a[3])?)
            .ceil_mode(b(4)?)
            .count_include_pad(b(5)?);
        if !a[2].is_null() {
            o = o.stride(int_or_ints(&a[2])?);
        }
        if let Some(d) = a.get(6).filter(|v| !v.is_null()) {
            o = o.divisor_override(int(d)?);
        }
        Ok(o)
    };
    let r = match name {
        // ---- pooling
        "max_pool1d" => e1(F::max_pool1d(&x()?, max_opts()?)),
        "max_pool2d" => e1(F::max_pool2d(&x()?, max_opts()?)),
        // F has no max_pool1d_with_indices: the core's.
        "max_pool1d_idx" => e2(x()?.max_pool1d_with_indices(max_opts()?)),
        "max_pool2d_idx" => e2(F::max_pool2d_with_indices(&x()?, max_opts()?)),
        "avg_pool1d" => e1(F::avg_pool1d(&x()?, avg_opts()?)),
        "avg_pool2d" => e1(F::avg_pool2d(&x()?, avg_opts()?)),
        "adaptive_avg_pool1d" => e1(F::adaptive_avg_pool1d(&x()?, int_or_ints(&a[1])?)),
        "adaptive_avg_pool2d" => e1(F::adaptive_avg_pool2d(&x()?, int_or_ints(&a[1])?)),
        "adaptive_max_pool1d" => e2(F::adaptive_max_pool1d(&x()?, int_or_ints(&a[1])?)),
        "adaptive_max_pool2d" => e2(F::adaptive_max_pool2d(&x()?, int_or_ints(&a[1])?)),
        // ---- convolution
        "conv1d" | "conv2d" => {
            let padding = match a[4].as_str() {
                Some("same") => Padding::Same,
                Some("valid") => Padding::Valid,
                Some(o) => return Err(format!("bad padding {o}")),
                None => Padding::from(int_or_ints(&a[4])?),
            };
            let opts = ConvOptions::new()
                .stride(int_or_ints(&a[3])?)
                .padding(padding)
                .dilation(int_or_ints(&a[5])?)
                .groups(int(&a[6])?);
            let bias = opt_t(2)?;
            if name == "conv1d" {
                e1(F::conv1d(&x()?, &t(1)?, bias.as_ref(), opts))
            } else {
                e1(F::conv2d(&x()?, &t(1)?, bias.as_ref(), opts))
            }
        }
        "conv_transpose1d" | "conv_transpose2d" => {
            let opts = ConvTransposeOptions::new()
                .stride(int_or_ints(&a[3])?)
                .padding(int_or_ints(&a[4])?)
                .output_padding(int_or_ints(&a[5])?)
                .groups(int(&a[6])?)
                .dilation(int_or_ints(&a[7])?);
            let bias = opt_t(2)?;
            if name == "conv_transpose1d" {
                e1(F::conv_transpose1d(&x()?, &t(1)?, bias.as_ref(), opts))
            } else {
                e1(F::conv_transpose2d(&x()?, &t(1)?, bias.as_ref(), opts))
            }
        }
        "linear" => e1(F::linear(&x()?, &t(1)?, opt_t(2)?.as_ref())),
        // ---- normalisation
        "layer_norm" => {
            let (w, bias) = (opt_t(2)?, opt_t(3)?);
            e1(F::layer_norm(&x()?, &sizes(&a[1])?, w.as_ref(), bias.as_ref(), f(4)?))
        }
        "rms_norm" => {
            let w = opt_t(2)?;
            e1(F::rms_norm(&x()?, &sizes(&a[1])?, w.as_ref(), opt_num(&a[3])?))
        }
        "group_norm" => {
            let (w, bias) = (opt_t(2)?, opt_t(3)?);
            let g = usize::try_from(int(&a[1])?).map_err(|_| "negative num_groups".to_string())?;
            e1(F::group_norm(&x()?, g, w.as_ref(), bias.as_ref(), f(4)?))
        }
        "batch_norm" => {
            let (rm, rv, w, bias) = (opt_t(1)?, opt_t(2)?, opt_t(3)?, opt_t(4)?);
            let opts = F::BatchNormOptions::new().training(b(5)?).momentum(f(6)?).eps(f(7)?);
            e1(F::batch_norm(
                &x()?,
                rm.as_ref(),
                rv.as_ref(),
                w.as_ref(),
                bias.as_ref(),
                &opts,
            ))
        }
        "embedding" => {
            let mut opts = F::EmbeddingOptions::new().norm_type(f(4)?).scale_grad_by_freq(b(5)?);
            if !a[2].is_null() {
                opts = opts.padding_idx(int(&a[2])?);
            }
            if let Some(m) = opt_num(&a[3])? {
                opts = opts.max_norm(m);
            }
            e1(F::embedding(&x()?, &t(1)?, &opts))
        }
        // ---- losses
        "cross_entropy" => {
            let w = opt_t(2)?;
            let mut opts = F::CrossEntropyOptions::new()
                .ignore_index(int(&a[3])?)
                .reduction(reduction(&a[4])?)
                .label_smoothing(f(5)?);
            if let Some(w) = w.as_ref() {
                opts = opts.weight(w);
            }
            e1(F::cross_entropy(&x()?, &t(1)?, &opts))
        }
        "nll_loss" => {
            let w = opt_t(2)?;
            let mut opts = F::NllLossOptions::new()
                .ignore_index(int(&a[3])?)
                .reduction(reduction(&a[4])?);
            if let Some(w) = w.as_ref() {
                opts = opts.weight(w);
            }
            e1(F::nll_loss(&x()?, &t(1)?, &opts))
        }
        "mse_loss" => e1(F::mse_loss(&x()?, &t(1)?, reduction(&a[2])?)),
        "l1_loss" => e1(F::l1_loss(&x()?, &t(1)?, reduction(&a[2])?)),
        "smooth_l1_loss" => e1(F::smooth_l1_loss(&x()?, &t(1)?, reduction(&a[2])?, f(3)?)),
        "huber_loss" => e1(F::huber_loss(&x()?, &t(1)?, reduction(&a[2])?, f(3)?)),
        "binary_cross_entropy" => {
            let w = opt_t(2)?;
            e1(F::binary_cross_entropy(&x()?, &t(1)?, w.as_ref(), reduction(&a[3])?))
        }
        "bce_with_logits" => {
            let (w, pw) = (opt_t(2)?, opt_t(3)?);
            let mut opts = F::BceWithLogitsOptions::new().reduction(reduction(&a[4])?);
            if let Some(w) = w.as_ref() {
                opts = opts.weight(w);
            }
            if let Some(pw) = pw.as_ref() {
                opts = opts.pos_weight(pw);
            }
            e1(F::binary_cross_entropy_with_logits(&x()?, &t(1)?, &opts))
        }
        "kl_div" => {
            let red = F::KlDivReduction::parse(a[2].as_str().ok_or("kl_div: reduction")?).map_err(|e| e.to_string())?;
            e1(F::kl_div(&x()?, &t(1)?, red, b(3)?))
        }
        // ---- attention
        "sdpa" => {
            let mask = opt_t(3)?;
            let mut opts = F::SdpaOptions::new().is_causal(b(4)?);
            if let Some(m) = mask.as_ref() {
                opts = opts.attn_mask(m);
            }
            if let Some(s) = opt_num(&a[5])? {
                opts = opts.scale(s);
            }
            e1(F::scaled_dot_product_attention(&x()?, &t(1)?, &t(2)?, &opts))
        }
        // ---- activations
        "leaky_relu" => e1(F::leaky_relu(&x()?, f(1)?)),
        "elu" => e1(F::elu(&x()?, f(1)?)),
        "celu" => e1(F::celu(&x()?, f(1)?)),
        "selu" => e1(F::selu(&x()?)),
        "hardtanh" => e1(F::hardtanh(&x()?, f(1)?, f(2)?)),
        "relu6" => e1(F::relu6(&x()?)),
        "mish" => e1(F::mish(&x()?)),
        "hardswish" => e1(F::hardswish(&x()?)),
        "hardsigmoid" => e1(F::hardsigmoid(&x()?)),
        "logsigmoid" => e1(F::logsigmoid(&x()?)),
        "softshrink" => e1(F::softshrink(&x()?, f(1)?)),
        "hardshrink" => e1(F::hardshrink(&x()?, f(1)?)),
        _ => return Ok(None),
    };
    r.map(Some)
}
