//! The small public pieces of `nn` against PyTorch
//! (`tests/nn_data/public_api.json`, written by
//! `tests/gen_nn_public_api.py`), each as a PyTorch user writes it:
//! `init::calculate_gain` for every nonlinearity name and its error,
//! `constant_` / `ones_` / `eye_`, `utils::get_total_norm` and
//! `clip_grads_with_norm_` (every norm type, mixed dtypes, non-finite
//! totals), the sizes of `Embedding` and `Linear` and `LayerNorm::eps`,
//! LSTM / GRU `flat_weights_names`, max pooling with indices,
//! `gelu_with`, `log_softmax_dtype`, `one_hot_with`,
//! `Parameter::set_tensor` (`param.data = t`), `ModuleState::set_training`
//! (`module.training = False`), `call_with_hooks`, `forward_with` (no
//! hooks) against `call_with` (hooks), and `Sequential::push_named` /
//! `push_boxed` against `nn.Sequential(OrderedDict(...))`.

use std::sync::{Arc, Mutex};

use ferrotorch::nn::functional::{self as F, GeluApproximate};
use ferrotorch::nn::init::{self, Nonlinearity};
use ferrotorch::nn::utils::{clip_grads_with_norm_, get_total_norm};
use ferrotorch::nn::{
    AdaptiveAvgPool2d, AdaptiveMaxPool2d, DecoderForwardOptions, DecoderLayerForwardOptions, Dropout, Embedding,
    EmbeddingLayerOptions, EncoderForwardOptions, EncoderLayerForwardOptions, Forward, GRU, LSTM, LayerNorm,
    LayerNormOptions, Linear, LinearOptions, MaxPool1d, MaxPool2d, MhaForwardOptions, Module, ModuleState,
    MultiheadAttention, Parameter, ReLU, RnnOptions, Sequential, Tanh, Transformer, TransformerDecoder,
    TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer, TransformerForwardOptions,
    TransformerLayerOptions, TransformerOptions, call_with_hooks, generate_square_subsequent_mask,
};
use ferrotorch::{DType, MaxPoolOptions, Result, Tensor, autograd, manual_seed};
use serde_json::Value;

/// Tests that seed and draw from the global generator run one at a time.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn data() -> &'static Value {
    static DATA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    DATA.get_or_init(|| {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/nn_data/public_api.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    })
}

fn shape_of(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

/// A JSON number, or a non-finite value as Python spells it (`inf`, `nan`).
fn float(x: &Value) -> f64 {
    x.as_f64().unwrap_or_else(|| x.as_str().unwrap().parse().unwrap())
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(float).collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn dtype_of(name: &str) -> DType {
    match name {
        "float32" => DType::F32,
        "float64" => DType::F64,
        "float16" => DType::F16,
        "bfloat16" => DType::BF16,
        "int64" => DType::I64,
        "bool" => DType::Bool,
        other => panic!("dtype {other}"),
    }
}

/// The tensor a summary describes, in its dtype.
fn tensor_of(v: &Value) -> Tensor {
    let shape: Vec<i64> = shape_of(v).iter().map(|&d| d as i64).collect();
    Tensor::from_slice(&floats(&v["data"]))
        .to_dtype(dtype_of(v["dtype"].as_str().unwrap()))
        .unwrap()
        .reshape(shape)
        .unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().reshape([-1]).unwrap().to_vec().unwrap()
}

/// Shape, dtype and every value bit for bit (the sign of zero included;
/// NaN matches NaN).
fn check_exact(what: &str, got: &Tensor, want: &Value) {
    assert_eq!(got.shape(), &shape_of(want)[..], "{what}: shape");
    assert_eq!(
        got.dtype().to_string(),
        want["dtype"].as_str().unwrap(),
        "{what}: dtype"
    );
    let w = floats(&want["data"]);
    for (i, (a, b)) in values(got).iter().zip(&w).enumerate() {
        let ok = a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        assert!(ok, "{what}[{i}]: {a:?} vs PyTorch's {b:?}");
    }
}

/// Shape, dtype and every value within `tol` (relative above 1).
fn check_close(what: &str, got: &Tensor, want: &Value, tol: f64) {
    assert_eq!(got.shape(), &shape_of(want)[..], "{what}: shape");
    assert_eq!(
        got.dtype().to_string(),
        want["dtype"].as_str().unwrap(),
        "{what}: dtype"
    );
    for (i, (a, b)) in values(got).iter().zip(floats(&want["data"])).enumerate() {
        let ok = (a - b).abs() <= tol * b.abs().max(1.0) || (a.is_infinite() && *a == b) || (a.is_nan() && b.is_nan());
        assert!(ok, "{what}[{i}]: {a} vs PyTorch's {b}");
    }
}

/// Shape, dtype and every value within `rel` of PyTorch's, relatively
/// (infinities and NaN as they are).
fn check_rel(what: &str, got: &Tensor, want: &Value, rel: f64) {
    assert_eq!(got.shape(), &shape_of(want)[..], "{what}: shape");
    assert_eq!(
        got.dtype().to_string(),
        want["dtype"].as_str().unwrap(),
        "{what}: dtype"
    );
    for (i, (a, b)) in values(got).iter().zip(floats(&want["data"])).enumerate() {
        let ok = (a - b).abs() <= rel * b.abs() || a == &b || (a.is_nan() && b.is_nan());
        assert!(ok, "{what}[{i}]: {a:?} vs PyTorch's {b:?}");
    }
}

/// The distance in units in the last place between two floats of `dtype`
/// (f32 or f64); 0 for two NaNs, 1 between -0 and +0.
fn ulps(a: f64, b: f64, dtype: DType) -> u128 {
    if a.is_nan() && b.is_nan() {
        return 0;
    }
    // The bits as integers that order as the floats do.
    let key = |x: f64| -> i128 {
        let (bits, sign) = match dtype {
            DType::F32 => (u64::from((x as f32).to_bits()), 1u64 << 31),
            DType::F64 => (x.to_bits(), 1u64 << 63),
            other => panic!("ulps in {other}"),
        };
        if bits & sign != 0 {
            -i128::from(bits & !sign) - 1
        } else {
            i128::from(bits)
        }
    };
    key(a).abs_diff(key(b))
}

/// Shape, dtype and every value within `max` units in the last place of
/// the dtype (for results whose rounding depends on a summation order
/// that PyTorch's vectorised CPU kernels pick per machine).
fn check_ulps(what: &str, got: &Tensor, want: &Value, max: u128) {
    assert_eq!(got.shape(), &shape_of(want)[..], "{what}: shape");
    assert_eq!(
        got.dtype().to_string(),
        want["dtype"].as_str().unwrap(),
        "{what}: dtype"
    );
    for (i, (a, b)) in values(got).iter().zip(floats(&want["data"])).enumerate() {
        let d = ulps(*a, b, got.dtype());
        assert!(d <= max, "{what}[{i}]: {a:?} vs PyTorch's {b:?} ({d} ulps)");
    }
}

/// PyTorch's error message (its first line).
fn message(e: &Value) -> &str {
    e["message"].as_str().unwrap()
}

#[test]
fn calculate_gain_matches_pytorch_for_every_nonlinearity() -> Result<()> {
    let d = data();
    let cases = d["calculate_gain"].as_array().unwrap();
    assert_eq!(cases.len(), 23);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let param = c["param"].as_f64();
        let gain = init::calculate_gain(Nonlinearity::from_name(name, param)?);
        assert_eq!(gain, c["gain"].as_f64().unwrap(), "calculate_gain({name:?}, {param:?})");
    }
    // The enum as written directly.
    assert_eq!(init::calculate_gain(Nonlinearity::Tanh), 5.0 / 3.0);
    assert_eq!(
        init::calculate_gain(Nonlinearity::LeakyRelu(None)),
        (2.0f64 / 1.0001).sqrt()
    );
    for c in d["calculate_gain_errors"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let e = Nonlinearity::from_name(name, None).unwrap_err().to_string();
        assert_eq!(e, format!("calculate_gain: {}", message(&c["error"])), "{name:?}");
    }
    Ok(())
}

#[test]
fn constant_ones_eye_fill_in_place_as_pytorch() -> Result<()> {
    let d = data();
    let cases = d["init"].as_array().unwrap();
    assert_eq!(cases.len(), 10);
    for (i, c) in cases.iter().enumerate() {
        let want = &c["result"];
        let dtype = dtype_of(want["dtype"].as_str().unwrap());
        let t = Tensor::full(shape_of(want), 9.0)?.to_dtype(dtype)?;
        let f = c["fn"].as_str().unwrap();
        let out = match f {
            "constant_" => init::constant_(&t, c["value"].as_f64().unwrap())?,
            "ones_" => init::ones_(&t)?,
            "eye_" => init::eye_(&t)?,
            other => panic!("{other}"),
        };
        // In place: the tensor passed and the one returned hold the result.
        check_exact(&format!("{f} case {i} (returned)"), &out, want);
        check_exact(&format!("{f} case {i} (in place)"), &t, want);
    }
    for c in d["eye_errors"].as_array().unwrap() {
        let t = Tensor::zeros(shape_of(c))?;
        let e = init::eye_(&t).unwrap_err().to_string();
        assert_eq!(e, format!("eye_: {}", message(&c["error"])), "eye_ on {:?}", t.shape());
    }
    // A parameter stays a leaf that requires grad.
    let c = &d["init_parameter"];
    let p = Parameter::new(Tensor::full([2, 3], 9.0)?)?;
    let out = init::eye_(&p.tensor())?;
    check_exact("eye_ on a parameter", &p.tensor(), &c["result"]);
    assert_eq!(p.tensor().requires_grad(), c["requires_grad"].as_bool().unwrap());
    assert_eq!(p.tensor().is_leaf(), c["is_leaf"].as_bool().unwrap());
    assert!(out.grad_fn().is_none() && out.requires_grad());
    Ok(())
}

/// Parameters with the case's shapes and dtypes and its gradients (none
/// where the case has none).
fn params_with_grads(case: &Value) -> Result<Vec<Parameter>> {
    case["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|spec| {
            let dtype = dtype_of(spec["dtype"].as_str().unwrap());
            let p = Parameter::new(Tensor::zeros_dtype(shape_of(spec), dtype)?)?;
            if !spec["grad"].is_null() {
                p.tensor().set_grad(Some(tensor_of(&spec["grad"])))?;
            }
            Ok(p)
        })
        .collect()
}

#[test]
fn get_total_norm_and_clip_grads_with_norm_match_pytorch() -> Result<()> {
    let d = data();
    let cases = d["clip"].as_array().unwrap();
    assert_eq!(cases.len(), 7);
    let mut checked = 0;
    for c in cases {
        let name = c["name"].as_str().unwrap();
        for n in c["norms"].as_array().unwrap() {
            let nt = float(&n["norm_type"]);
            let params = params_with_grads(c)?;
            // PyTorch sums an f32 gradient's powers in f32 lanes (how many
            // depends on the machine's vector width), ferrotorch in f64
            // rounded once: within 2 f32 ulps. Over f64 gradients alone,
            // bit for bit.
            let rel = if name == "f64_first" {
                0.0
            } else {
                2.0 * f64::from(f32::EPSILON)
            };
            let total = get_total_norm(&params, nt, false)?;
            check_rel(&format!("{name}: total norm {nt}"), &total, &n["total"], rel);
            // Finite: the same with error_if_nonfinite.
            let again = get_total_norm(params.iter(), nt, true)?;
            assert_eq!(
                values(&again),
                values(&total),
                "{name}: total norm {nt} (error_if_nonfinite)"
            );
            // The gradients are not touched.
            for (p, spec) in params.iter().zip(c["params"].as_array().unwrap()) {
                if !spec["grad"].is_null() {
                    check_exact(&format!("{name}: grad after the norm"), &p.grad()?, &spec["grad"]);
                }
            }
            for clipped in n["clipped"].as_array().unwrap() {
                let max_norm = clipped["max_norm"].as_f64().unwrap();
                let params = params_with_grads(c)?;
                clip_grads_with_norm_(&params, max_norm, &tensor_of(&n["total"]))?;
                for (i, (p, want)) in params.iter().zip(clipped["grads"].as_array().unwrap()).enumerate() {
                    let what = format!("{name}: norm {nt}, max_norm {max_norm}, grad {i}");
                    if want.is_null() {
                        assert!(p.grad_opt().is_none(), "{what}: no gradient");
                    } else {
                        check_exact(&what, &p.grad()?, want);
                    }
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 33);

    // A total norm given by the caller, in f32, f64 or infinite.
    let g = &d["clip_given_total"];
    let max_norm = g["max_norm"].as_f64().unwrap();
    for (i, c) in g["cases"].as_array().unwrap().iter().enumerate() {
        let grads: Vec<Tensor> = g["grads"].as_array().unwrap().iter().map(tensor_of).collect();
        let params = grads
            .iter()
            .map(|t| {
                let p = Parameter::new(t.zeros_like()?)?;
                p.tensor().set_grad(Some(t.clone()))?;
                Ok(p)
            })
            .collect::<Result<Vec<_>>>()?;
        clip_grads_with_norm_(params.iter(), max_norm, &tensor_of(&c["total"]))?;
        for (j, (p, want)) in params.iter().zip(c["grads"].as_array().unwrap()).enumerate() {
            check_exact(&format!("given total {i}: grad {j}"), &p.grad()?, want);
        }
    }

    // No gradient at all: a float32 zero, and nothing to clip.
    let none = vec![Parameter::new(Tensor::ones([2])?)?];
    check_exact(
        "no gradients",
        &get_total_norm(&none, 2.0, true)?,
        &d["total_norm_empty"],
    );
    check_exact(
        "no parameters",
        &get_total_norm(Vec::<Parameter>::new(), 1.0, false)?,
        &d["total_norm_empty"],
    );
    clip_grads_with_norm_(&none, 1.0, &Tensor::scalar_tensor(5.0.into(), DType::F32))?;
    assert!(none[0].grad_opt().is_none());

    // Non-finite totals: returned as they are, or PyTorch's error.
    for c in d["total_norm_nonfinite"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let nt = float(&c["norm_type"]);
        let params = c["grads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                let t = tensor_of(g);
                let p = Parameter::new(t.zeros_like()?)?;
                p.tensor().set_grad(Some(t))?;
                Ok(p)
            })
            .collect::<Result<Vec<_>>>()?;
        check_exact(
            &format!("{name}: total"),
            &get_total_norm(&params, nt, false)?,
            &c["total"],
        );
        let e = get_total_norm(&params, nt, true).unwrap_err().to_string();
        assert!(e.ends_with(message(&c["error"])), "{name}: {e}");
    }
    let c = &d["total_norm_finite_large"];
    let p = Parameter::new(Tensor::zeros([2])?)?;
    p.tensor().set_grad(Some(tensor_of(&c["grads"][0])))?;
    check_exact("large finite total", &get_total_norm([&p], 2.0, true)?, &c["total"]);
    Ok(())
}

#[test]
fn layer_sizes_and_eps_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let s = &data()["sizes"];
    let embeddings = [
        Embedding::new(10, 3)?,
        Embedding::with_options(7, 4, EmbeddingLayerOptions::new().padding_idx(-2))?,
        Embedding::from_pretrained(&Tensor::zeros([4, 5])?, true, EmbeddingLayerOptions::new())?,
    ];
    let got: Vec<Vec<usize>> = embeddings
        .iter()
        .map(|e| vec![e.num_embeddings(), e.embedding_dim()])
        .collect();
    assert_eq!(serde_json::json!(got), s["embedding"]);
    let linears = [
        Linear::new(5, 3)?,
        Linear::with_options(2, 7, LinearOptions::new().bias(false))?,
    ];
    let got: Vec<Vec<usize>> = linears
        .iter()
        .map(|l| vec![l.in_features(), l.out_features()])
        .collect();
    assert_eq!(serde_json::json!(got), s["linear"]);
    let norms = [
        LayerNorm::new(4)?,
        LayerNorm::with_options([2, 3], LayerNormOptions::new().eps(1e-3))?,
        LayerNorm::with_options(5, LayerNormOptions::new().eps(0.25).elementwise_affine(false))?,
    ];
    let got: Vec<f64> = norms.iter().map(LayerNorm::eps).collect();
    assert_eq!(got, floats(&s["layer_norm_eps"]));
    Ok(())
}

#[test]
fn rnn_flat_weights_names_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let cases = data()["flat_weights_names"].as_array().unwrap();
    assert_eq!(cases.len(), 5);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let (names, params): (Vec<String>, Vec<String>) = match name {
            "lstm" | "lstm_2_bi" | "lstm_3_nobias" => {
                let opts = match name {
                    "lstm" => RnnOptions::new(),
                    "lstm_2_bi" => RnnOptions::new().num_layers(2).bidirectional(true),
                    _ => RnnOptions::new().num_layers(3).bias(false),
                };
                let m = LSTM::with_options(3, 4, opts)?;
                let names = m.flat_weights_names().into_iter().map(String::from).collect();
                (names, m.named_parameters().into_iter().map(|(n, _)| n).collect())
            }
            "gru" | "gru_2_bi_nobias" => {
                let opts = match name {
                    "gru" => RnnOptions::new(),
                    _ => RnnOptions::new().num_layers(2).bidirectional(true).bias(false),
                };
                let m = GRU::with_options(2, 5, opts)?;
                let names = m.flat_weights_names().into_iter().map(String::from).collect();
                (names, m.named_parameters().into_iter().map(|(n, _)| n).collect())
            }
            other => panic!("{other}"),
        };
        assert_eq!(names, strings(&c["names"]), "{name}: flat_weights_names");
        assert_eq!(params, strings(&c["named_parameters"]), "{name}: named_parameters");
    }
    Ok(())
}

#[test]
fn max_pool_forward_with_indices_matches_return_indices() -> Result<()> {
    let cases = data()["max_pool"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let x = tensor_of(&c["input"]);
        let (plain, (y, i)) = match name {
            "pool1d_k3" => {
                let m = MaxPool1d::new(3);
                (m.call(&x)?, m.forward_with_indices(&x)?)
            }
            "pool1d_k3_s2_p1_d2_ceil" => {
                let m = MaxPool1d::new(MaxPoolOptions::new(3).stride(2).padding(1).dilation(2).ceil_mode(true));
                (m.call(&x)?, m.forward_with_indices(&x)?)
            }
            "pool2d_k2" => {
                let m = MaxPool2d::new(2);
                (m.call(&x)?, m.forward_with_indices(&x)?)
            }
            "pool2d_k23_s12_p1_ceil" => {
                let m = MaxPool2d::new(MaxPoolOptions::new((2, 3)).stride((1, 2)).padding(1).ceil_mode(true));
                (m.call(&x)?, m.forward_with_indices(&x)?)
            }
            "pool2d_k3_s2_p1_d2" => {
                let m = MaxPool2d::new(MaxPoolOptions::new(3).stride(2).padding(1).dilation(2));
                (m.call(&x)?, m.forward_with_indices(&x)?)
            }
            "pool2d_unbatched_f64" => {
                let m = MaxPool2d::new(MaxPoolOptions::new(2).stride(1));
                (m.call(&x)?, m.forward_with_indices(&x)?)
            }
            "adaptive_pool2d_2x3" => {
                let m = AdaptiveMaxPool2d::new((2, 3));
                (m.call(&x)?, m.forward_with_indices(&x)?)
            }
            "adaptive_pool2d_4" => {
                let m = AdaptiveMaxPool2d::new(4);
                (m.call(&x)?, m.forward_with_indices(&x)?)
            }
            other => panic!("{other}"),
        };
        check_exact(&format!("{name}: values"), &y, &c["output"]);
        check_exact(&format!("{name}: indices"), &i, &c["indices"]);
        check_exact(&format!("{name}: forward"), &plain, &c["output"]);
    }
    Ok(())
}

#[test]
fn gelu_with_matches_both_approximations() -> Result<()> {
    let cases = data()["gelu"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for c in cases {
        let x = tensor_of(&c["input"]);
        let approx = match c["approximate"].as_str().unwrap() {
            "none" => GeluApproximate::None,
            "tanh" => GeluApproximate::Tanh,
            other => panic!("{other}"),
        };
        let y = F::gelu_with(&x, approx)?;
        let want = &c["output"];
        let what = format!("gelu {} {}", c["dtype"], approx.as_str());
        assert_eq!(y.shape(), &shape_of(want)[..], "{what}: shape");
        assert_eq!(y.dtype().to_string(), want["dtype"].as_str().unwrap(), "{what}: dtype");
        // Within a few epsilons times |x|: the f32 erf form is the
        // Abramowitz-Stegun approximation of PyTorch's vectorised kernel
        // (each within 0.75e-7·|x| of the exact value, so 1.5e-7·|x| apart,
        // plus the rounding of the result); the others differ in rounding
        // only. The two forms differ by 1e-4 and more for |x| near 2.
        let tol = match (x.dtype(), approx) {
            (DType::F32, GeluApproximate::None) => 1.5e-7 + f64::from(f32::EPSILON) / 4.0,
            (DType::F32, GeluApproximate::Tanh) => 2.0 * f64::from(f32::EPSILON),
            _ => 2.0 * f64::EPSILON,
        };
        for (i, ((a, b), x)) in values(&y).iter().zip(floats(&want["data"])).zip(values(&x)).enumerate() {
            let ok = (a - b).abs() <= tol * x.abs() || a == &b || (a.is_nan() && b.is_nan());
            assert!(ok, "{what}[{i}]: gelu({x}) = {a:?} vs PyTorch's {b:?}");
        }
    }
    Ok(())
}

#[test]
fn log_softmax_dtype_casts_first_as_pytorch() -> Result<()> {
    let cases = data()["log_softmax_dtype"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for c in cases {
        let x = tensor_of(&c["input"]);
        let dim = c["dim"].as_i64().unwrap();
        let dtype = dtype_of(c["dtype"].as_str().unwrap());
        let what = format!("log_softmax({dim}, dtype={dtype})");
        // The sum of exponentials in another order than PyTorch's lanes.
        check_ulps(&what, &F::log_softmax_dtype(&x, dim, dtype)?, &c["output"], 2);
    }
    Ok(())
}

#[test]
fn one_hot_with_matches_pytorch_and_its_errors() -> Result<()> {
    let c = &data()["one_hot"];
    let x = tensor_of(&c["input"]);
    for case in c["cases"].as_array().unwrap() {
        let n = case["num_classes"].as_i64().unwrap();
        check_exact(&format!("one_hot(x, {n})"), &F::one_hot_with(&x, n)?, &case["output"]);
    }
    let empty = Tensor::zeros_dtype([0], DType::I64)?;
    let n = c["empty"]["num_classes"].as_i64().unwrap();
    check_exact("one_hot(empty, 3)", &F::one_hot_with(&empty, n)?, &c["empty"]["output"]);
    for case in c["errors"].as_array().unwrap() {
        let n = case["num_classes"].as_i64().unwrap();
        let x = tensor_of(&case["input"]);
        let e = F::one_hot_with(&x, n).unwrap_err().to_string();
        let want = message(&case["error"]);
        assert!(
            e.ends_with(want),
            "one_hot({:?}, {n}): {e} (PyTorch: {want})",
            x.shape()
        );
    }
    let e = F::one_hot_with(&Tensor::new([1.0f32, 2.0])?, 3)
        .unwrap_err()
        .to_string();
    assert!(e.contains(message(&c["float_error"])), "{e}");
    Ok(())
}

#[test]
fn parameter_set_tensor_is_assigning_data() -> Result<()> {
    let c = &data()["set_data"];
    let p = Parameter::new(Tensor::ones([2, 3])?)?;
    let alias = p.clone();
    let x = Tensor::arange(6)?
        .to_dtype(DType::F32)?
        .reshape([3, 2])?
        .requires_grad_(true)?;
    let y = x.mul(2.0)?.add(1.0)?;
    assert!(!y.is_leaf());
    p.set_tensor(y.clone())?;
    let t = alias.tensor();
    check_exact("param.data = y", &t, &c["values"]);
    assert_eq!(t.requires_grad(), c["requires_grad"].as_bool().unwrap());
    assert_eq!(t.is_leaf(), c["is_leaf"].as_bool().unwrap());
    assert!(t.grad_fn().is_none());
    assert!(p.same_as(&alias));
    // The parameter shares y's storage.
    autograd::no_grad(|| y.add_(10.0))?;
    check_exact("after y.add_(10)", &alias.tensor(), &c["after_source_add"]);

    // A frozen parameter stays frozen, and takes the new dtype.
    let f = &c["frozen"];
    let frozen = Parameter::frozen(Tensor::ones([2])?);
    frozen.set_tensor(Tensor::new([3.0f64, 4.0])?)?;
    check_exact("frozen.data = t", &frozen.tensor(), &f["values"]);
    assert_eq!(frozen.tensor().requires_grad(), f["requires_grad"].as_bool().unwrap());
    assert_eq!(frozen.tensor().dtype().to_string(), f["dtype"].as_str().unwrap());

    // An integer tensor cannot hold data that requires grad; the parameter
    // keeps its tensor.
    let q = Parameter::new(Tensor::ones([2])?)?;
    let e = q.set_tensor(Tensor::new([1i64, 2])?).unwrap_err().to_string();
    assert!(e.ends_with(message(&c["int_error"])), "{e}");
    assert_eq!(q.tensor().dtype(), DType::F32);
    assert_eq!(q.tensor().to_vec::<f32>()?, [1.0, 1.0]);
    Ok(())
}

#[test]
fn set_training_sets_that_module_only() -> Result<()> {
    let _rng = rng_lock();
    let c = &data()["training_flags"];
    manual_seed(23);
    let seq = Sequential::new()
        .push(Linear::new(4, 4)?)
        .push(Dropout::new(0.5)?)
        .push(Sequential::new().push(Dropout::new(0.5)?));
    let names: Vec<String> = seq.named_modules().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, strings(&c["modules"]));
    let flags = |m: &Sequential| -> Vec<bool> { m.named_modules().into_iter().map(|(_, m)| m.is_training()).collect() };
    let state = |i: usize| seq.named_modules()[i].1.state().unwrap();
    let steps = c["steps"].as_array().unwrap();
    let want = |i: usize| -> Vec<bool> {
        steps[i]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_bool().unwrap())
            .collect()
    };
    let x = Tensor::ones([100])?;
    // `seq.training = False`: the dropout below still drops.
    state(0).set_training(false);
    assert_eq!(flags(&seq), want(0));
    let dropout = seq.get(1).unwrap();
    assert!(dropout.call(&x)?.eq(&x)?.logical_not()?.any()?.item::<bool>()?);
    // `seq[1].training = False`: that dropout is the identity.
    state(2).set_training(false);
    assert_eq!(flags(&seq), want(1));
    assert_eq!(values(&dropout.call(&x)?), values(&x));
    seq.train();
    assert_eq!(flags(&seq), want(2));
    state(3).set_training(false);
    assert_eq!(flags(&seq), want(3));
    Ok(())
}

/// A module with two outputs, called through `call_with_hooks`.
#[derive(ferrotorch::nn::Module)]
struct PosNeg {
    state: ModuleState,
}

impl PosNeg {
    fn raw(x: &Tensor) -> Result<(Tensor, Tensor)> {
        Ok((x.relu()?, x.neg()?.relu()?))
    }

    fn call(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        call_with_hooks(self, std::slice::from_ref(x), |a| Self::raw(&a[0]))
    }
}

type Seen = Vec<(Vec<Option<Tensor>>, Vec<Option<Tensor>>)>;

#[test]
fn call_with_hooks_runs_the_hooks_as_module_call() -> Result<()> {
    let c = &data()["hooked_call"];
    let x0 = tensor_of(&c["x"]);
    let (r0, r1) = (tensor_of(&c["r"][0]), tensor_of(&c["r"][1]));
    let m = PosNeg {
        state: ModuleState::default(),
    };
    // No hook: the forward itself.
    let (a, b) = m.call(&x0)?;
    check_exact("no hooks: output 0", &a, &c["forward"][0]);
    check_exact("no hooks: output 1", &b, &c["forward"][1]);

    let post_args: Arc<Mutex<Vec<Tensor>>> = Arc::default();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let pre = m.register_forward_pre_hook(|_, args| Ok(Some(vec![args[0].mul(2.0)?])))?;
    let log = post_args.clone();
    let _post = m.register_forward_hook(move |_, args, outs| {
        log.lock().unwrap().push(args[0].clone());
        Ok(Some(vec![outs[1].clone(), outs[0].add(&args[0])?]))
    })?;
    let log = seen.clone();
    let _bw = m.register_full_backward_hook(move |gin, gout| {
        log.lock().unwrap().push((gin.to_vec(), gout.to_vec()));
        Ok(Some(vec![gin[0].as_ref().map(|g| g.mul(3.0)).transpose()?]))
    })?;
    let run = |what: &str, want: &Value| -> Result<()> {
        let x = x0.detach().requires_grad_(true)?;
        let (a, b) = m.call(&x)?;
        check_exact(&format!("{what}: output 0"), &a, &want["outputs"][0]);
        check_exact(&format!("{what}: output 1"), &b, &want["outputs"][1]);
        a.mul(&r0)?.sum()?.add(&b.mul(&r1)?.sum()?)?.backward()?;
        check_exact(&format!("{what}: x.grad"), &x.grad()?, &want["x_grad"]);
        let mut seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "{what}: the backward hook runs once");
        let (gin, gout) = seen.pop().unwrap();
        assert_eq!((gin.len(), gout.len()), (1, 2), "{what}");
        check_exact(
            &format!("{what}: grad_input"),
            gin[0].as_ref().unwrap(),
            &want["grad_input"][0],
        );
        for (i, g) in gout.iter().enumerate() {
            check_exact(
                &format!("{what}: grad_output {i}"),
                g.as_ref().unwrap(),
                &want["grad_output"][i],
            );
        }
        Ok(())
    };
    run("hooked", c)?;
    // The forward hook saw the input the pre-hook made.
    check_exact("forward hook's args", &post_args.lock().unwrap()[0], &c["post_args"]);
    pre.remove();
    run("pre-hook removed", &c["removed_pre"])?;

    // A hook must give back as many tensors as it was given.
    let bad = m.register_forward_hook(|_, _, outs| Ok(Some(vec![outs[0].clone()])))?;
    let e = m.call(&x0).unwrap_err().to_string();
    assert!(e.contains("a forward hook returned 1 tensors, expected 2"), "{e}");
    bad.remove();
    Ok(())
}

/// Registers a forward hook doubling the first output (the generator's
/// `double_first`).
fn double_first(m: &dyn Module) -> Result<()> {
    m.state().unwrap().register_forward_hook(|_, _, outs| {
        let mut v = outs.to_vec();
        v[0] = v[0].mul(2.0)?;
        Ok(Some(v))
    });
    Ok(())
}

fn check_all(what: &str, got: &[Tensor], want: &Value) {
    let want = want.as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{what}: outputs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        check_close(&format!("{what} {i}"), g, w, 1e-5);
    }
}

#[test]
fn forward_with_skips_the_hooks_call_with_runs_them() -> Result<()> {
    let _rng = rng_lock();
    let cases = data()["forward_vs_call"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    let causal = |n: usize| generate_square_subsequent_mask(n, None);
    let layer = || TransformerLayerOptions::new().dim_feedforward(32);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let ins: Vec<Tensor> = c["inputs"].as_array().unwrap().iter().map(tensor_of).collect();
        manual_seed(c["seed"].as_u64().unwrap());
        // (forward_with outputs, call_with outputs after the hook, forward_with again)
        let (plain, hooked, again) = match name {
            "lstm" => {
                let m = LSTM::with_options(3, 4, RnnOptions::new().num_layers(2).bidirectional(true))?;
                m.eval();
                let f = |o: (Tensor, (Tensor, Tensor))| vec![o.0, o.1.0, o.1.1];
                let plain = f(m.forward_with(&ins[0], (&ins[1], &ins[2]))?);
                double_first(&m)?;
                let hooked = f(m.call_with(&ins[0], (&ins[1], &ins[2]))?);
                (plain, hooked, f(m.forward_with(&ins[0], (&ins[1], &ins[2]))?))
            }
            "gru" => {
                let m = GRU::with_options(3, 4, RnnOptions::new().num_layers(2).batch_first(true))?;
                m.eval();
                let f = |o: (Tensor, Tensor)| vec![o.0, o.1];
                let plain = f(m.forward_with(&ins[0], &ins[1])?);
                double_first(&m)?;
                let hooked = f(m.call_with(&ins[0], &ins[1])?);
                (plain, hooked, f(m.forward_with(&ins[0], &ins[1])?))
            }
            "mha" => {
                let m = MultiheadAttention::new(8, 2)?;
                m.eval();
                let mask = Tensor::new([false, true, false, false])?.expand([3, 4])?;
                let opts = MhaForwardOptions::new().attn_mask(&mask).average_attn_weights(false);
                let f = |o: (Tensor, Option<Tensor>)| vec![o.0, o.1.unwrap()];
                let plain = f(m.forward_with(&ins[0], &ins[1], &ins[2], opts)?);
                double_first(&m)?;
                let hooked = f(m.call_with(&ins[0], &ins[1], &ins[2], opts)?);
                (plain, hooked, f(m.forward_with(&ins[0], &ins[1], &ins[2], opts)?))
            }
            "encoder_layer" => {
                let m = TransformerEncoderLayer::with_options(16, 4, layer())?;
                m.eval();
                let mask = causal(5)?;
                let opts = || EncoderLayerForwardOptions::new().src_mask(&mask).is_causal(true);
                let plain = vec![m.forward_with(&ins[0], opts())?];
                double_first(&m)?;
                let hooked = vec![m.call_with(&ins[0], opts())?];
                (plain, hooked, vec![m.forward_with(&ins[0], opts())?])
            }
            "decoder_layer" => {
                let m = TransformerDecoderLayer::with_options(16, 4, layer())?;
                m.eval();
                let mask = causal(4)?;
                let opts = || DecoderLayerForwardOptions::new().tgt_mask(&mask);
                let plain = vec![m.forward_with(&ins[0], &ins[1], opts())?];
                double_first(&m)?;
                let hooked = vec![m.call_with(&ins[0], &ins[1], opts())?];
                (plain, hooked, vec![m.forward_with(&ins[0], &ins[1], opts())?])
            }
            "encoder" => {
                let l = TransformerEncoderLayer::with_options(16, 4, layer())?;
                let m = TransformerEncoder::new(l, 2, Some(LayerNorm::new(16)?))?;
                m.eval();
                let mask = causal(5)?;
                let opts = || EncoderForwardOptions::new().mask(&mask);
                let plain = vec![m.forward_with(&ins[0], opts())?];
                double_first(&m)?;
                let hooked = vec![m.call_with(&ins[0], opts())?];
                (plain, hooked, vec![m.forward_with(&ins[0], opts())?])
            }
            "decoder" => {
                let l = TransformerDecoderLayer::with_options(16, 4, layer())?;
                let m = TransformerDecoder::new(l, 2, None)?;
                m.eval();
                let mask = causal(4)?;
                let opts = || DecoderForwardOptions::new().tgt_mask(&mask);
                let plain = vec![m.forward_with(&ins[0], &ins[1], opts())?];
                double_first(&m)?;
                let hooked = vec![m.call_with(&ins[0], &ins[1], opts())?];
                (plain, hooked, vec![m.forward_with(&ins[0], &ins[1], opts())?])
            }
            "transformer" => {
                let o = TransformerOptions::new()
                    .num_encoder_layers(1)
                    .num_decoder_layers(1)
                    .layer(layer());
                let m = Transformer::with_options(16, 4, o)?;
                m.eval();
                let mask = causal(4)?;
                let opts = || TransformerForwardOptions::new().tgt_mask(&mask);
                let plain = vec![m.forward_with(&ins[0], &ins[1], opts())?];
                double_first(&m)?;
                let hooked = vec![m.call_with(&ins[0], &ins[1], opts())?];
                (plain, hooked, vec![m.forward_with(&ins[0], &ins[1], opts())?])
            }
            other => panic!("{other}"),
        };
        check_all(&format!("{name}: forward_with"), &plain, &c["forward"]);
        check_all(&format!("{name}: call_with (hooked)"), &hooked, &c["call"]);
        check_all(&format!("{name}: forward_with after the hook"), &again, &c["forward"]);
    }
    Ok(())
}

/// Repr, state-dict keys and values (exact) against PyTorch's.
fn check_sequential(what: &str, m: &Sequential, want: &Value) {
    assert_eq!(m.repr(), want["repr"].as_str().unwrap(), "{what}: repr");
    let sd = m.state_dict();
    let keys: Vec<&str> = sd.keys().collect();
    let want_sd = want["state_dict"].as_array().unwrap();
    let want_keys: Vec<&str> = want_sd.iter().map(|e| e[0].as_str().unwrap()).collect();
    assert_eq!(keys, want_keys, "{what}: state_dict keys");
    for ((k, t), e) in sd.iter().zip(want_sd) {
        check_exact(&format!("{what}: {k}"), t, &e[1]);
    }
}

#[test]
fn sequential_push_named_and_push_boxed_match_ordered_dict() -> Result<()> {
    let _rng = rng_lock();
    let d = data();
    let c = &d["sequential_named"];
    manual_seed(c["seed"].as_u64().unwrap());
    let seq = Sequential::new()
        .push_named("fc1", Linear::new(3, 4)?)
        .push_named("act", ReLU::new())
        .push_boxed(Box::new(Linear::new(4, 5)?))
        .push_named("out", Linear::new(5, 2)?)
        .push_boxed(Box::new(Tanh::new()));
    check_sequential("named", &seq, c);
    let names: Vec<String> = seq.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, strings(&c["named_parameters"]));
    let names: Vec<String> = seq.named_modules().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, strings(&c["named_modules"]));
    check_close("named: output", &seq.call(&tensor_of(&c["input"]))?, &c["output"], 1e-6);

    let c = &d["sequential_boxed"];
    manual_seed(c["seed"].as_u64().unwrap());
    let layers: Vec<Box<dyn Forward>> = vec![
        Box::new(Linear::new(2, 3)?),
        Box::new(ReLU::new()),
        Box::new(Linear::new(3, 1)?),
    ];
    let seq = layers.into_iter().fold(Sequential::new(), Sequential::push_boxed);
    check_sequential("boxed", &seq, c);
    check_close("boxed: output", &seq.call(&tensor_of(&c["input"]))?, &c["output"], 1e-6);

    // A name already taken: the new layer replaces the old one in place
    // (`add_module` on a taken name).
    let c = &d["sequential_duplicate"];
    manual_seed(c["seed"].as_u64().unwrap());
    let seq = Sequential::new()
        .push_named("a", Linear::new(2, 3)?)
        .push_named("b", ReLU::new())
        .push_named("a", Linear::new(2, 2)?);
    check_sequential("duplicate", &seq, c);
    assert_eq!(seq.len(), 2);
    // `append` names a layer by the count, "1" here: taken, so replaced.
    let seq = Sequential::new()
        .push_named("1", Linear::new(2, 2)?)
        .push(Linear::new(2, 3)?);
    check_sequential("appended", &seq, &c["appended"]);
    assert_eq!(seq.len(), 1);
    Ok(())
}

/// A boxed module (`Box<dyn Module>`, as `Sequential::push_boxed` holds
/// them) answers every `Module` method as the module inside: its type
/// name, its `extra_repr` and its repr are PyTorch's for that layer.
#[test]
fn boxed_modules_describe_themselves_as_the_module_inside() -> Result<()> {
    // Draws from the global generator: not while a seeded test runs.
    let _rng = rng_lock();
    let boxed: Box<dyn Module> = Box::new(Linear::new(3, 2)?);
    assert_eq!(<Box<dyn Module> as Module>::type_name(&boxed), "Linear");
    assert_eq!(
        <Box<dyn Module> as Module>::extra_repr(&boxed),
        "in_features=3, out_features=2, bias=True"
    );
    assert_eq!(
        <Box<dyn Module> as Module>::repr(&boxed),
        "Linear(in_features=3, out_features=2, bias=True)"
    );
    let boxed: Box<Dropout> = Box::new(Dropout::new(0.25)?);
    assert_eq!(<Box<Dropout> as Module>::extra_repr(&boxed), "p=0.25, inplace=False");
    Ok(())
}

/// `F.adaptive_avg_pool2d` / `F.adaptive_max_pool2d` (and their modules)
/// as PyTorch 2.15's functional forms: a pair of output sizes needs an
/// input of at least 3 dims (`ValueError: Input dimension should be at
/// least 3`), while a single size 1 averages any input of 2 dims or more.
#[test]
fn adaptive_pools_check_a_pair_of_sizes_as_the_functional_form() -> Result<()> {
    // Draws from the global generator: not while a seeded test runs.
    let _rng = rng_lock();
    let x = Tensor::randn([4, 6])?;
    let want = "Input dimension should be at least 3";
    let e = F::adaptive_avg_pool2d(&x, [1, 1]).unwrap_err().to_string();
    assert!(e.contains(want), "{e}");
    let e = F::adaptive_max_pool2d(&x, [2, 2]).unwrap_err().to_string();
    assert!(e.contains(want), "{e}");
    let e = AdaptiveAvgPool2d::new([1, 1]).forward(&x).unwrap_err().to_string();
    assert!(e.contains(want), "{e}");
    let e = AdaptiveMaxPool2d::new([1, 2]).forward(&x).unwrap_err().to_string();
    assert!(e.contains(want), "{e}");
    // One size: the operator decides (the mean for 1, PyTorch's 3-d/4-d
    // message otherwise).
    let m = F::adaptive_avg_pool2d(&x, 1)?;
    assert_eq!(m.shape(), [1, 1]);
    assert!((m.item::<f32>()? - x.mean()?.item::<f32>()?).abs() < 1e-6);
    let e = F::adaptive_avg_pool2d(&x, 2).unwrap_err().to_string();
    assert!(e.contains("Expected 3D or 4D tensor, but got [4, 6]"), "{e}");
    // 3-d and 4-d inputs take a pair as before.
    assert_eq!(
        F::adaptive_avg_pool2d(&Tensor::randn([2, 4, 6])?, [2, 3])?.shape(),
        [2, 2, 3]
    );
    assert_eq!(
        AdaptiveMaxPool2d::new([2, 3])
            .forward(&Tensor::randn([1, 2, 4, 6])?)?
            .shape(),
        [1, 2, 2, 3]
    );
    Ok(())
}

/// `F.linear` composes as PyTorch 2.15's: the graph's top nodes for every
/// rank, contiguity and bias rank (from PyTorch), the dtype of the
/// in-place bias add (the product's), and `addmm`'s dtype refusal on the
/// fused path.
#[test]
fn linear_takes_pytorchs_path_for_each_input() -> Result<()> {
    // Draws from the global generator: not while a seeded test runs.
    let _rng = rng_lock();
    fn top(t: &Tensor, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        let mut node = t.grad_fn();
        while let Some(f) = node {
            if out.len() == n {
                break;
            }
            out.push(f.name());
            node = f.next_edges().iter().flatten().next().map(|e| e.node.clone());
        }
        out
    }
    let w = Tensor::randn([3, 4])?.requires_grad_(true)?;
    let b = Tensor::randn([3])?.requires_grad_(true)?;
    let leaf = |s: &[usize]| Tensor::randn(s).unwrap().requires_grad_(true).unwrap();
    let cases: [(Tensor, Option<Tensor>, [&str; 2]); 9] = [
        (leaf(&[4]), Some(b.clone()), ["UnsafeViewBackward0", "AddmmBackward0"]),
        (leaf(&[2, 4]), Some(b.clone()), ["AddmmBackward0", "AccumulateGrad"]),
        (
            leaf(&[2, 5, 4]),
            Some(b.clone()),
            ["UnsafeViewBackward0", "AddmmBackward0"],
        ),
        (
            leaf(&[2, 2, 5, 4]),
            Some(b.clone()),
            ["UnsafeViewBackward0", "AddmmBackward0"],
        ),
        (leaf(&[2, 5, 4]), None, ["UnsafeViewBackward0", "MmBackward0"]),
        (
            leaf(&[4, 2]).t()?,
            Some(b.clone()),
            ["AddmmBackward0", "AccumulateGrad"],
        ),
        (
            leaf(&[5, 2, 4]).transpose(0, 1)?,
            Some(b.clone()),
            ["AddBackward0", "UnsafeViewBackward0"],
        ),
        (
            leaf(&[2, 5, 4]),
            Some(leaf(&[5, 3])),
            ["AddBackward0", "UnsafeViewBackward0"],
        ),
        (leaf(&[4]), Some(leaf(&[])), ["AddBackward0", "SqueezeBackward4"]),
    ];
    for (x, bias, want) in cases {
        let y = F::linear(&x, &w, bias.as_ref())?;
        let mut shape = x.shape()[..x.ndim() - 1].to_vec();
        shape.push(3);
        assert_eq!(y.shape(), shape);
        assert_eq!(
            top(&y, 2),
            want,
            "input {:?} bias {:?}",
            x.shape(),
            bias.map(|b| b.shape().to_vec())
        );
    }
    // The in-place add keeps the product's dtype (bf16 with an f64 bias)...
    let (wb, b64) = (w.detach().to_dtype(DType::BF16)?, b.detach().to_dtype(DType::F64)?);
    let x = Tensor::randn([5, 2, 4])?.to_dtype(DType::BF16)?.transpose(0, 1)?;
    assert_eq!(F::linear(&x, &wb, Some(&b64))?.dtype(), DType::BF16);
    // ...while the fused path is addmm's, which refuses mixed dtypes.
    for x in [Tensor::randn([2, 4])?, Tensor::randn([2, 5, 4])?] {
        let e = F::linear(&x.to_dtype(DType::BF16)?, &wb, Some(&b64))
            .unwrap_err()
            .to_string();
        assert!(e.contains("must have the same dtype"), "{e}");
    }
    // Empty inputs, as PyTorch: a zero inner size gives the bias, a zero
    // batch an empty result.
    let y = F::linear(&Tensor::zeros([2, 5, 0])?, &Tensor::zeros([3, 0])?, Some(&b.detach()))?;
    assert_eq!(y.shape(), [2, 5, 3]);
    assert_eq!(y.to_vec::<f32>()?[..3], b.to_vec::<f32>()?[..]);
    assert_eq!(F::linear(&Tensor::zeros([0, 5, 4])?, &w, Some(&b))?.shape(), [0, 5, 3]);
    // 0-d arguments are refused with PyTorch's message.
    let e = F::linear(&Tensor::scalar_tensor(1.0.into(), DType::F32), &w, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("both arguments to linear need to be at least 1D, but they are 0D and 2D"),
        "{e}"
    );
    Ok(())
}

/// `nn.ConvTranspose1d/2d` pass their `padding` (and the rest) to the
/// functional form: the output size is PyTorch's `(H - 1) * stride - 2 *
/// padding + dilation * (k - 1) + output_padding + 1`, the values those of
/// `F.conv_transpose*d` with the layer's parameters.
#[test]
fn conv_transpose_layers_pass_their_options_on() -> Result<()> {
    // Draws from the global generator: not while a seeded test runs.
    let _rng = rng_lock();
    use ferrotorch::ConvTransposeOptions;
    use ferrotorch::nn::{ConvLayerOptions, ConvTranspose1d, ConvTranspose2d};
    let ct2 = ConvTranspose2d::with_options(4, 2, 3, ConvLayerOptions::new().stride(2).padding(1).output_padding(1))?;
    let x = Tensor::randn([1, 4, 3, 5])?;
    let y = ct2.call(&x)?;
    // H: (3 - 1) * 2 - 2 + 2 + 1 + 1 = 6; W: (5 - 1) * 2 - 2 + 2 + 1 + 1 = 10.
    assert_eq!(y.shape(), [1, 2, 6, 10]);
    let opts = ConvTransposeOptions::new().stride(2).padding(1).output_padding(1);
    let want = F::conv_transpose2d(
        &x,
        &ct2.weight.tensor(),
        ct2.bias.as_ref().map(|b| b.tensor()).as_ref(),
        opts,
    )?;
    assert_eq!(y.to_vec::<f32>()?, want.to_vec::<f32>()?);
    let ct1 = ConvTranspose1d::with_options(2, 3, 4, ConvLayerOptions::new().padding(2).dilation(2))?;
    let x = Tensor::randn([2, 2, 7])?;
    let y = ct1.call(&x)?;
    // (7 - 1) - 4 + 2 * 3 + 1 = 9.
    assert_eq!(y.shape(), [2, 3, 9]);
    let opts = ConvTransposeOptions::new().padding(2).dilation(2);
    let want = F::conv_transpose1d(
        &x,
        &ct1.weight.tensor(),
        ct1.bias.as_ref().map(|b| b.tensor()).as_ref(),
        opts,
    )?;
    assert_eq!(y.to_vec::<f32>()?, want.to_vec::<f32>()?);
    Ok(())
}

/// Transformer layers built with `bias=False` have no bias anywhere (the
/// attention blocks' projections, the feed-forward block, the norms):
/// PyTorch 2.15's state-dict keys.
#[test]
fn transformer_layers_without_bias_have_pytorchs_keys() -> Result<()> {
    // Draws from the global generator: not while a seeded test runs.
    let _rng = rng_lock();
    let o = TransformerLayerOptions::new().dim_feedforward(16).bias(false);
    let keys = |m: &dyn Module| -> Vec<String> { m.state_dict().keys().map(str::to_owned).collect() };
    assert_eq!(
        keys(&TransformerEncoderLayer::with_options(8, 2, o)?),
        [
            "self_attn.in_proj_weight",
            "self_attn.out_proj.weight",
            "linear1.weight",
            "linear2.weight",
            "norm1.weight",
            "norm2.weight"
        ]
    );
    assert_eq!(
        keys(&TransformerDecoderLayer::with_options(8, 2, o)?),
        [
            "self_attn.in_proj_weight",
            "self_attn.out_proj.weight",
            "multihead_attn.in_proj_weight",
            "multihead_attn.out_proj.weight",
            "linear1.weight",
            "linear2.weight",
            "norm1.weight",
            "norm2.weight",
            "norm3.weight"
        ]
    );
    Ok(())
}
