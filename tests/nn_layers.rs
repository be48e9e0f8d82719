//! Normalisation, embedding, loss and transformer layers against PyTorch
//! (`tests/nn_data/layers.json`, written by `tests/gen_nn_layers.py`):
//! after the same `manual_seed`, the same repr, state-dict keys, shapes,
//! dtypes and initial values; the same outputs (eval mode unless noted)
//! and input / parameter gradients of `(out * r).sum()` within 1e-5;
//! BatchNorm's running statistics after training forwards; every loss
//! reduction. Then gradchecks in f64 (input and parameters, first and
//! second order) and the errors for bad input.

use ferrotorch::autograd::{self, GradOptions, GradcheckOptions};
use ferrotorch::nn::functional::{KlDivReduction, Reduction};
use ferrotorch::nn::{
    self, BCELoss, BCEWithLogitsLoss, BatchNorm1d, BatchNorm2d, BatchNorm3d, BatchNormLayerOptions, ClassLossOptions,
    CrossEntropyLoss, DecoderForwardOptions, DecoderLayerForwardOptions, Embedding, EmbeddingLayerOptions,
    EncoderForwardOptions, EncoderLayerForwardOptions, Forward, GroupNorm, GroupNormOptions, HuberLoss, KLDivLoss,
    L1Loss, LayerNorm, LayerNormOptions, MSELoss, Module, MultiheadAttention, NLLLoss, Parameter, RMSNorm,
    RmsNormOptions, Sequential, SmoothL1Loss, Transformer, TransformerActivation, TransformerDecoder,
    TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer, TransformerForwardOptions,
    TransformerLayerOptions, TransformerOptions,
};
use ferrotorch::{DType, Result, Tensor, manual_seed};
use serde_json::Value;

/// Tests that seed and draw from the global generator run one at a time.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn cases() -> &'static Vec<Value> {
    static CASES: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    CASES.get_or_init(|| {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/nn_data/layers.json")).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        v["cases"].as_array().unwrap().clone()
    })
}

fn case(name: &str) -> &'static Value {
    cases()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

fn shape_of(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

fn floats(v: &Value) -> Vec<f64> {
    // Non-finite values are strings (`-inf`, `inf`, `nan`).
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap_or_else(|| x.as_str().unwrap().parse().unwrap()))
        .collect()
}

/// The tensor a summary describes, in its dtype.
fn tensor_of(v: &Value) -> Tensor {
    let shape: Vec<i64> = shape_of(v).iter().map(|&d| d as i64).collect();
    let dtype = match v["dtype"].as_str().unwrap() {
        "float32" => DType::F32,
        "float64" => DType::F64,
        "int64" => DType::I64,
        "bool" => DType::Bool,
        other => panic!("dtype {other}"),
    };
    Tensor::from_slice(&floats(&v["data"]))
        .to_dtype(dtype)
        .unwrap()
        .reshape(shape)
        .unwrap()
}

/// `got` within 1e-5 (relative above 1) of PyTorch's values.
fn check_close(what: &str, got: &Tensor, want: &Value) {
    assert_eq!(got.shape(), &shape_of(want)[..], "{what}: shape");
    let g: Vec<f64> = got
        .to_dtype(DType::F64)
        .unwrap()
        .reshape([-1])
        .unwrap()
        .to_vec()
        .unwrap();
    for (i, (a, b)) in g.iter().zip(floats(&want["data"])).enumerate() {
        let ok = (a - b).abs() <= 1e-5 * b.abs().max(1.0) || (a.is_infinite() && a == &b) || (a.is_nan() && b.is_nan());
        assert!(ok, "{what}[{i}]: {a} vs {b}");
    }
}

/// Repr, state-dict keys / shapes / dtypes / values (exact), names.
fn check_described(name: &str, m: &dyn Module, c: &Value) {
    assert_eq!(m.repr(), c["repr"].as_str().unwrap(), "{name}: repr");
    let sd = m.state_dict();
    let got: Vec<Value> = sd
        .iter()
        .map(|(k, t)| serde_json::json!([k, t.shape(), t.dtype().to_string()]))
        .collect();
    assert_eq!(got, c["state_dict"].as_array().unwrap().clone(), "{name}: state_dict");
    for (k, t) in sd.iter() {
        let g: Vec<f64> = t.to_dtype(DType::F64).unwrap().reshape([-1]).unwrap().to_vec().unwrap();
        assert_eq!(g, floats(&c["values"][k]["data"]), "{name}: initial {k}");
    }
    let names = |v: Vec<String>| serde_json::json!(v);
    assert_eq!(
        names(m.named_parameters().into_iter().map(|(n, _)| n).collect()),
        c["named_parameters"],
        "{name}: named_parameters"
    );
    assert_eq!(
        names(m.named_buffers().into_iter().map(|(n, _)| n).collect()),
        c["named_buffers"],
        "{name}: named_buffers"
    );
    assert_eq!(
        names(m.named_modules().into_iter().map(|(n, _)| n).collect()),
        c["named_modules"],
        "{name}: named_modules"
    );
}

/// Builds after the case's seed, checks the description, runs `run` on
/// the case's inputs (float ones requiring grad) in eval (or training)
/// mode, and checks the output, the gradients of `(out * r).sum()` and the
/// state dict afterwards.
fn run_case<M: Module>(
    name: &str,
    build: impl FnOnce() -> Result<M>,
    train: bool,
    run: impl Fn(&M, &[Tensor]) -> Result<Tensor>,
) -> Result<M> {
    let c = case(name);
    manual_seed(c["seed"].as_u64().unwrap());
    let m = build()?;
    check_described(name, &m, c);
    if let Some(pre) = c.get("pre_inputs") {
        m.train();
        for x in pre.as_array().unwrap() {
            run(&m, &[tensor_of(x)])?;
        }
        for (k, t) in m.state_dict().iter() {
            check_close(&format!("{name}: running {k}"), t, &c["running"][k]);
        }
    }
    m.train_mode(train);
    let inputs: Vec<Tensor> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let t = tensor_of(v);
            if t.is_floating_point() {
                t.requires_grad_(true).unwrap()
            } else {
                t
            }
        })
        .collect();
    let out = run(&m, &inputs)?;
    check_close(&format!("{name}: output"), &out, &c["output"]);
    out.mul(&tensor_of(&c["r"]))?.sum()?.backward()?;
    for (i, (x, want)) in inputs.iter().zip(c["input_grads"].as_array().unwrap()).enumerate() {
        if !want.is_null() {
            check_close(&format!("{name}: input {i} grad"), &x.grad()?, want);
        }
    }
    for (k, p) in m.named_parameters() {
        check_close(&format!("{name}: {k}.grad"), &p.grad().unwrap(), &c["param_grads"][&k]);
    }
    for (k, t) in m.state_dict().iter() {
        check_close(&format!("{name}: {k} after"), t, &c["after"][k]);
    }
    Ok(m)
}

fn layer_opts(act: TransformerActivation, norm_first: bool) -> TransformerLayerOptions {
    TransformerLayerOptions::new()
        .dim_feedforward(32)
        .activation(act)
        .norm_first(norm_first)
}

#[test]
fn transformer_layers_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    for (act, a) in [
        (TransformerActivation::Relu, "relu"),
        (TransformerActivation::Gelu, "gelu"),
    ] {
        for (nf, n) in [(false, "post"), (true, "pre")] {
            let build = || TransformerEncoderLayer::with_options(16, 4, layer_opts(act, nf));
            run_case(&format!("enc_layer_{a}_{n}"), build, false, |m, x| m.call(&x[0]))?;
            run_case(&format!("enc_layer_{a}_{n}_masked"), build, false, |m, x| {
                let kpm = x[2].to_dtype(DType::Bool)?;
                m.call_with(
                    &x[0],
                    EncoderLayerForwardOptions::new()
                        .src_mask(&x[1])
                        .src_key_padding_mask(&kpm)
                        .is_causal(false),
                )
            })?;
        }
    }
    run_case(
        "enc_layer_batch_first_causal",
        || {
            TransformerEncoderLayer::with_options(
                16,
                4,
                TransformerLayerOptions::new()
                    .dim_feedforward(32)
                    .batch_first(true)
                    .layer_norm_eps(1e-6),
            )
        },
        false,
        |m, x| m.call_with(&x[0], EncoderLayerForwardOptions::new().src_mask(&x[1]).is_causal(true)),
    )?;
    let enc = run_case(
        "encoder_2_layers",
        || {
            let layer = TransformerEncoderLayer::with_options(16, 4, layer_opts(TransformerActivation::Relu, false))?;
            TransformerEncoder::new(layer, 2, Some(LayerNorm::new([16])?))
        },
        false,
        |m, x| {
            let kpm = x[2].to_dtype(DType::Bool)?;
            m.call_with(
                &x[0],
                EncoderForwardOptions::new().mask(&x[1]).src_key_padding_mask(&kpm),
            )
        },
    )?;
    // Deep copies: equal values, separate storage.
    assert!(!enc.layers[0].linear1.weight.same_as(&enc.layers[1].linear1.weight));
    assert_eq!(enc.num_layers(), 2);
    for (nf, n) in [(false, "post"), (true, "pre")] {
        run_case(
            &format!("dec_layer_{n}"),
            || TransformerDecoderLayer::with_options(16, 4, layer_opts(TransformerActivation::Relu, nf)),
            false,
            |m, x| {
                let mkp = x[3].to_dtype(DType::Bool)?;
                m.call_with(
                    &x[0],
                    &x[1],
                    DecoderLayerForwardOptions::new()
                        .tgt_mask(&x[2])
                        .memory_key_padding_mask(&mkp),
                )
            },
        )?;
    }
    let dec = run_case(
        "decoder_2_layers",
        || {
            let layer = TransformerDecoderLayer::with_options(16, 4, layer_opts(TransformerActivation::Relu, false))?;
            TransformerDecoder::new(layer, 2, Some(LayerNorm::new([16])?))
        },
        false,
        |m, x| {
            let mkp = x[3].to_dtype(DType::Bool)?;
            m.call_with(
                &x[0],
                &x[1],
                DecoderForwardOptions::new()
                    .tgt_mask(&x[2])
                    .memory_key_padding_mask(&mkp),
            )
        },
    )?;
    assert!(
        !dec.layers[0]
            .multihead_attn
            .out_proj
            .weight
            .same_as(&dec.layers[1].multihead_attn.out_proj.weight)
    );
    assert_eq!(dec.num_layers(), 2);
    run_case(
        "decoder_1_layer_no_norm",
        || {
            let layer = TransformerDecoderLayer::with_options(16, 4, layer_opts(TransformerActivation::Relu, true))?;
            TransformerDecoder::new(layer, 1, None)
        },
        false,
        |m, x| m.call(&x[0], &x[1]),
    )?;
    let t = run_case(
        "transformer_masked",
        || {
            Transformer::with_options(
                16,
                4,
                TransformerOptions::new()
                    .num_encoder_layers(2)
                    .num_decoder_layers(2)
                    .layer(layer_opts(TransformerActivation::Relu, false)),
            )
        },
        false,
        |m, x| {
            let kpm = x[3].to_dtype(DType::Bool)?;
            m.call_with(
                &x[0],
                &x[1],
                TransformerForwardOptions::new()
                    .tgt_mask(&x[2])
                    .src_key_padding_mask(&kpm)
                    .memory_key_padding_mask(&kpm),
            )
        },
    )?;
    assert_eq!((t.d_model(), t.nhead()), (16, 4));
    run_case(
        "transformer_batch_first_pre_gelu",
        || {
            Transformer::with_options(
                16,
                4,
                TransformerOptions::new()
                    .num_encoder_layers(1)
                    .num_decoder_layers(1)
                    .layer(
                        TransformerLayerOptions::new()
                            .dim_feedforward(24)
                            .activation(TransformerActivation::Gelu)
                            .batch_first(true)
                            .norm_first(true)
                            .layer_norm_eps(1e-6),
                    ),
            )
        },
        false,
        |m, x| m.call(&x[0], &x[1]),
    )?;
    // The causal mask helper is PyTorch's.
    assert_eq!(
        Transformer::generate_square_subsequent_mask(4, None)?.to_vec::<f32>()?,
        nn::generate_square_subsequent_mask(4, None)?.to_vec::<f32>()?
    );
    let m = nn::generate_square_subsequent_mask(3, None)?;
    let inf = f32::NEG_INFINITY;
    assert_eq!(m.to_vec::<f32>()?, [0.0, inf, inf, 0.0, 0.0, inf, 0.0, 0.0, 0.0]);
    Ok(())
}

#[test]
fn norm_and_embedding_layers_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let call = |m: &dyn Forward, x: &[Tensor]| m.call(&x[0]);
    run_case("batchnorm2d", || BatchNorm2d::new(4), false, |m, x| call(m, x))?;
    let cma = BatchNormLayerOptions::new().momentum(None);
    run_case(
        "batchnorm2d_cma",
        || BatchNorm2d::with_options(4, cma),
        false,
        |m, x| call(m, x),
    )?;
    let bn = run_case("batchnorm2d_train", || BatchNorm2d::new(4), true, |m, x| call(m, x))?;
    let nbt = bn.num_batches_tracked.as_ref().unwrap().tensor();
    assert_eq!((nbt.dtype(), nbt.ndim(), nbt.item::<i64>()?), (DType::I64, 0, 1));
    let no_stats = BatchNormLayerOptions::new().affine(false).track_running_stats(false);
    run_case(
        "batchnorm2d_no_stats",
        || BatchNorm2d::with_options(4, no_stats),
        false,
        |m, x| call(m, x),
    )?;
    let o = BatchNormLayerOptions::new().eps(1e-3).momentum(0.3);
    run_case(
        "batchnorm1d_3d_train",
        || BatchNorm1d::with_options(3, o),
        true,
        |m, x| call(m, x),
    )?;
    run_case("batchnorm1d_2d_train", || BatchNorm1d::new(3), true, |m, x| call(m, x))?;
    run_case("batchnorm3d", || BatchNorm3d::new(3), false, |m, x| call(m, x))?;
    let o = BatchNormLayerOptions::new().eps(1e-3).momentum(None);
    let bn3 = run_case(
        "batchnorm3d_cma_train",
        || BatchNorm3d::with_options(3, o),
        true,
        |m, x| call(m, x),
    )?;
    assert_eq!(bn3.num_batches_tracked.as_ref().unwrap().tensor().item::<i64>()?, 3);
    assert_eq!(bn3.num_features(), 3);
    let o = BatchNormLayerOptions::new().affine(false);
    run_case(
        "batchnorm3d_no_affine_train",
        || BatchNorm3d::with_options(3, o),
        true,
        |m, x| call(m, x),
    )?;

    run_case("layernorm", || LayerNorm::new([3, 4]), false, |m, x| call(m, x))?;
    let o = LayerNormOptions::new().eps(1e-3).bias(false);
    run_case(
        "layernorm_nobias",
        || LayerNorm::with_options([8], o),
        false,
        |m, x| call(m, x),
    )?;
    let o = LayerNormOptions::new().elementwise_affine(false);
    run_case(
        "layernorm_noaffine",
        || LayerNorm::with_options([8], o),
        false,
        |m, x| call(m, x),
    )?;
    run_case("groupnorm", || GroupNorm::new(2, 6), false, |m, x| call(m, x))?;
    let o = GroupNormOptions::new().eps(1e-3).affine(false);
    run_case(
        "groupnorm_noaffine",
        || GroupNorm::with_options(3, 6, o),
        false,
        |m, x| call(m, x),
    )?;
    run_case("rmsnorm", || RMSNorm::new([4]), false, |m, x| call(m, x))?;
    let o = RmsNormOptions::new().eps(1e-6);
    run_case(
        "rmsnorm_eps_2d",
        || RMSNorm::with_options([5, 4], o),
        false,
        |m, x| call(m, x),
    )?;
    let o = RmsNormOptions::new().elementwise_affine(false);
    run_case(
        "rmsnorm_noaffine",
        || RMSNorm::with_options([4], o),
        false,
        |m, x| call(m, x),
    )?;

    let o = EmbeddingLayerOptions::new().padding_idx(-2);
    let e = run_case(
        "embedding_padding",
        || Embedding::with_options(10, 4, o),
        false,
        |m, x| call(m, x),
    )?;
    assert_eq!(e.padding_idx(), Some(8));
    let o = EmbeddingLayerOptions::new().scale_grad_by_freq(true);
    run_case(
        "embedding_freq",
        || Embedding::with_options(10, 4, o),
        false,
        |m, x| call(m, x),
    )?;
    let o = EmbeddingLayerOptions::new().max_norm(1.0).norm_type(1.5);
    run_case(
        "embedding_max_norm",
        || Embedding::with_options(10, 4, o),
        false,
        |m, x| call(m, x),
    )?;

    // from_pretrained: the given rows, frozen by default, no row zeroed.
    let w = Tensor::new([[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]])?;
    let pad = EmbeddingLayerOptions::new().padding_idx(0);
    let e = Embedding::from_pretrained(&w, true, pad)?;
    assert!(!e.weight.tensor().requires_grad());
    assert_eq!(e.repr(), "Embedding(3, 2, padding_idx=0)");
    let y = e.call(&Tensor::new([2i64, 0])?)?;
    assert_eq!(y.to_vec::<f32>()?, [5.0, 6.0, 1.0, 2.0]);
    assert!(
        Embedding::from_pretrained(&w, false, EmbeddingLayerOptions::default())?
            .weight
            .tensor()
            .requires_grad()
    );
    Ok(())
}

fn reduction(s: &str) -> Reduction {
    Reduction::parse(s).unwrap()
}

/// Runs a loss case: output and the input's gradient of `(out * 1.5).sum()`.
fn loss_case(name: &str, m: &dyn Module, f: impl Fn(&Tensor, &Tensor) -> Result<Tensor>) -> Result<()> {
    let c = case(name);
    assert_eq!(m.repr(), c["repr"].as_str().unwrap(), "{name}: repr");
    let keys: Vec<String> = m.state_dict().keys().map(str::to_string).collect();
    let want: Vec<String> = c["state_dict"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[0].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys, want, "{name}: state_dict keys");
    let x = tensor_of(&c["input"]).requires_grad_(true)?;
    let out = f(&x, &tensor_of(&c["target"]))?;
    check_close(&format!("{name}: loss"), &out, &c["output"]);
    out.mul(1.5)?.sum()?.backward()?;
    check_close(&format!("{name}: input grad"), &x.grad()?, &c["input_grad"]);
    Ok(())
}

fn buffer_value(name: &str, key: &str) -> Tensor {
    tensor_of(&case(name)["values"][key])
}

#[test]
fn loss_modules_match_pytorch_for_every_reduction() -> Result<()> {
    for red in ["none", "mean", "sum"] {
        let r = reduction(red);
        let n = format!("ce_{red}");
        let ce = CrossEntropyLoss::with_options(
            ClassLossOptions::new()
                .weight(buffer_value(&n, "weight"))
                .ignore_index(1)
                .reduction(r)
                .label_smoothing(0.1),
        );
        loss_case(&n, &ce, |x, t| ce.forward(x, t))?;
        let ce = CrossEntropyLoss::with_options(ClassLossOptions::new().reduction(r));
        loss_case(&format!("ce_plain_{red}"), &ce, |x, t| ce.forward(x, t))?;
        loss_case(&format!("ce_3d_{red}"), &ce, |x, t| ce.forward(x, t))?;
        let n = format!("ce_probs_{red}");
        let ce =
            CrossEntropyLoss::with_options(ClassLossOptions::new().weight(buffer_value(&n, "weight")).reduction(r));
        loss_case(&n, &ce, |x, t| ce.forward(x, t))?;
        let n = format!("nll_{red}");
        let nll = NLLLoss::with_options(
            ClassLossOptions::new()
                .weight(buffer_value(&n, "weight"))
                .ignore_index(3)
                .reduction(r),
        );
        loss_case(&n, &nll, |x, t| nll.forward(x, t))?;
        let m = MSELoss::with_reduction(r);
        loss_case(&format!("mse_{red}"), &m, |x, t| m.forward(x, t))?;
        let m = L1Loss::with_reduction(r);
        loss_case(&format!("l1_{red}"), &m, |x, t| m.forward(x, t))?;
        let m = SmoothL1Loss::with_reduction(r).beta(0.5);
        loss_case(&format!("smooth_l1_{red}"), &m, |x, t| m.forward(x, t))?;
        let m = HuberLoss::with_reduction(r).delta(0.7);
        loss_case(&format!("huber_{red}"), &m, |x, t| m.forward(x, t))?;
        let n = format!("bce_{red}");
        let m = BCELoss::with_options(Some(buffer_value(&n, "weight")), r);
        loss_case(&n, &m, |x, t| m.forward(x, t))?;
        let n = format!("bce_logits_{red}");
        let m = BCEWithLogitsLoss::with_options(
            Some(buffer_value(&n, "weight")),
            r,
            Some(buffer_value(&n, "pos_weight")),
        );
        loss_case(&n, &m, |x, t| m.forward(x, t))?;
    }
    for red in ["none", "batchmean", "sum", "mean"] {
        for lt in [false, true] {
            let m = KLDivLoss::with_options(KlDivReduction::parse(red)?, lt);
            let name = format!("kl_{red}_{}", if lt { "True" } else { "False" });
            loss_case(&name, &m, |x, t| m.forward(x, t))?;
        }
    }
    Ok(())
}

/// A fixed, non-trivial weighting of an output.
fn weights_like(t: &Tensor) -> Result<Tensor> {
    let v: Vec<f64> = (0..t.numel())
        .map(|i| ((i * 7919 + 3) % 17) as f64 / 8.0 - 1.0)
        .collect();
    Tensor::from_vec(v, t.shape())?.to_dtype(t.dtype())
}

fn set_values(t: &Tensor, v: Vec<f64>) -> Result<()> {
    let new = Tensor::from_vec(v, t.shape())?;
    autograd::no_grad(|| t.detach().copy_(&new))?;
    Ok(())
}

/// Gradcheck of a module in f64 by central differences, for the inputs
/// that require grad and every parameter: the gradient of `L = sum(f(xs) *
/// w)` and (`second`) the derivative of `sum_i <dL/dθ_i, u_i>` (a
/// Hessian-vector product: double backward through the module).
fn module_gradcheck(
    what: &str,
    params: Vec<Parameter>,
    inputs: &[Tensor],
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    second: bool,
) -> Result<()> {
    let mut targets: Vec<Tensor> = inputs.iter().filter(|t| t.requires_grad()).cloned().collect();
    targets.extend(params.iter().map(Parameter::tensor));
    assert!(targets.iter().all(|t| t.dtype() == DType::F64), "{what}: f64 only");
    let w = weights_like(&f(inputs)?)?;
    let refs: Vec<&Tensor> = targets.iter().collect();
    let grads = |create_graph: bool| -> Result<(Tensor, Vec<Tensor>)> {
        let l = f(inputs)?.mul(&w)?.sum()?;
        let g = autograd::grad(
            &[&l],
            &refs,
            GradOptions {
                grad_outputs: None,
                retain_graph: Some(true),
                create_graph,
                allow_unused: true,
            },
        )?;
        let g = g
            .into_iter()
            .zip(&targets)
            .map(|(g, t)| g.map_or_else(|| t.zeros_like(), Ok))
            .collect::<Result<Vec<_>>>()?;
        Ok((l, g))
    };
    let us: Vec<Tensor> = targets.iter().map(weights_like).collect::<Result<_>>()?;
    let hvp_of = |g: &[Tensor]| -> Result<Tensor> {
        let mut s = Tensor::zeros_dtype((), DType::F64)?;
        for (gi, u) in g.iter().zip(&us) {
            s = s.add(&gi.mul(u)?.sum()?)?;
        }
        Ok(s)
    };
    let (_, g1) = grads(second)?;
    let g2 = if second {
        let s = hvp_of(&g1)?;
        let h = autograd::grad(
            &[&s],
            &refs,
            GradOptions {
                grad_outputs: None,
                retain_graph: Some(true),
                create_graph: false,
                allow_unused: true,
            },
        )?;
        Some(
            h.into_iter()
                .zip(&targets)
                .map(|(g, t)| g.map_or_else(|| t.zeros_like(), Ok))
                .collect::<Result<Vec<_>>>()?,
        )
    } else {
        None
    };
    let analytic1: Vec<Vec<f64>> = g1.iter().map(|g| g.detach().to_vec()).collect::<Result<_>>()?;
    let analytic2: Option<Vec<Vec<f64>>> = g2
        .map(|g| g.iter().map(|g| g.detach().to_vec()).collect::<Result<_>>())
        .transpose()?;
    let eps = 1e-6;
    for (ti, t) in targets.iter().enumerate() {
        let base: Vec<f64> = t.detach().to_vec()?;
        for k in 0..base.len() {
            let at = |d: f64| -> Result<(f64, f64)> {
                let mut v = base.clone();
                v[k] += d;
                set_values(t, v)?;
                let (l, g) = grads(false)?;
                let s = if second { hvp_of(&g)?.item::<f64>()? } else { 0.0 };
                Ok((l.item::<f64>()?, s))
            };
            let (hi, lo) = (at(eps)?, at(-eps)?);
            set_values(t, base.clone())?;
            let num = (hi.0 - lo.0) / (2.0 * eps);
            let ana = analytic1[ti][k];
            assert!(
                (num - ana).abs() <= 1e-5 + 1e-3 * num.abs(),
                "{what}: gradient of target {ti} element {k}: numerical {num}, analytical {ana}"
            );
            if let Some(a2) = &analytic2 {
                let num = (hi.1 - lo.1) / (2.0 * eps);
                let ana = a2[ti][k];
                assert!(
                    (num - ana).abs() <= 1e-5 + 1e-3 * num.abs(),
                    "{what}: second derivative of target {ti} element {k}: numerical {num}, analytical {ana}"
                );
            }
        }
    }
    Ok(())
}

fn randn64(shape: &[usize]) -> Result<Tensor> {
    Tensor::randn(shape)?.to_dtype(DType::F64)?.requires_grad_(true)
}

#[test]
fn layers_gradcheck_in_f64() -> Result<()> {
    let _rng = rng_lock();
    manual_seed(7);
    let gc = GradcheckOptions::default();
    // Normalisation: parameters perturbed away from ones / zeros first.
    let perturb = |m: &dyn Module| -> Result<()> {
        for p in m.parameters() {
            let t = p.tensor();
            let v: Vec<f64> = t.detach().to_vec()?;
            set_values(
                &t,
                v.iter()
                    .enumerate()
                    .map(|(i, x)| x + 0.3 * ((i % 5) as f64 - 2.0))
                    .collect(),
            )?;
        }
        Ok(())
    };
    let ln = LayerNorm::new([3, 4])?;
    ln.to_dtype(DType::F64)?;
    perturb(&ln)?;
    let x = randn64(&[2, 3, 4])?;
    let f = |xs: &[Tensor]| ln.call(&xs[0]);
    module_gradcheck("LayerNorm", ln.parameters(), std::slice::from_ref(&x), &f, true)?;
    autograd::gradcheck(&f, std::slice::from_ref(&x), gc)?;
    autograd::gradgradcheck(&f, std::slice::from_ref(&x), gc)?;

    let gn = GroupNorm::new(2, 4)?;
    gn.to_dtype(DType::F64)?;
    perturb(&gn)?;
    let x = randn64(&[2, 4, 3])?;
    let f = |xs: &[Tensor]| gn.call(&xs[0]);
    module_gradcheck("GroupNorm", gn.parameters(), std::slice::from_ref(&x), &f, true)?;

    let rms = RMSNorm::new([4])?;
    rms.to_dtype(DType::F64)?;
    perturb(&rms)?;
    let x = randn64(&[3, 4])?;
    let f = |xs: &[Tensor]| rms.call(&xs[0]);
    module_gradcheck("RMSNorm", rms.parameters(), std::slice::from_ref(&x), &f, true)?;

    for train in [true, false] {
        let bn3 = BatchNorm3d::new(2)?;
        bn3.to_dtype(DType::F64)?;
        perturb(&bn3)?;
        bn3.train_mode(train);
        let x = randn64(&[2, 2, 2, 2, 2])?;
        let f = |xs: &[Tensor]| bn3.call(&xs[0]);
        module_gradcheck("BatchNorm3d", bn3.parameters(), std::slice::from_ref(&x), &f, true)?;
        let bn = BatchNorm2d::new(3)?;
        bn.to_dtype(DType::F64)?;
        perturb(&bn)?;
        bn.train_mode(train);
        let x = randn64(&[2, 3, 2, 2])?;
        let f = |xs: &[Tensor]| bn.call(&xs[0]);
        module_gradcheck("BatchNorm2d", bn.parameters(), std::slice::from_ref(&x), &f, true)?;
        let bn1 = BatchNorm1d::new(3)?;
        bn1.to_dtype(DType::F64)?;
        perturb(&bn1)?;
        bn1.train_mode(train);
        let x = randn64(&[4, 3])?;
        let f = |xs: &[Tensor]| bn1.call(&xs[0]);
        module_gradcheck("BatchNorm1d", bn1.parameters(), std::slice::from_ref(&x), &f, true)?;
    }

    let emb = Embedding::with_options(
        6,
        3,
        EmbeddingLayerOptions::new().padding_idx(2).scale_grad_by_freq(true),
    )?;
    emb.to_dtype(DType::F64)?;
    let idx = Tensor::new([[0i64, 2, 5], [5, 1, 0]])?;
    let f = |xs: &[Tensor]| emb.call(&xs[0]).map(|y| y.mul(&y).unwrap());
    // The padding row gets no gradient: checked against differences of a
    // function that ignores it, so compare the scaled gradient directly.
    let y = f(std::slice::from_ref(&idx))?;
    y.sum()?.backward()?;
    let g: Vec<f64> = emb.weight.grad().unwrap().to_vec()?;
    assert!(g[6..9].iter().all(|&v| v == 0.0), "padding row gradient {g:?}");
    emb.zero_grad(true)?;
    let plain = Embedding::new(6, 3)?;
    plain.to_dtype(DType::F64)?;
    let fp = |xs: &[Tensor]| plain.call(&xs[0]).map(|y| y.mul(&y).unwrap());
    module_gradcheck("Embedding", plain.parameters(), std::slice::from_ref(&idx), &fp, true)?;

    // Transformers (small), eval mode.
    let o = TransformerLayerOptions::new().dim_feedforward(6);
    for (act, nf) in [
        (TransformerActivation::Relu, false),
        (TransformerActivation::Gelu, true),
    ] {
        let layer = TransformerEncoderLayer::with_options(4, 2, o.activation(act).norm_first(nf))?;
        layer.to_dtype(DType::F64)?;
        perturb(&layer)?;
        layer.eval();
        let src = randn64(&[3, 2, 4])?;
        let mask = nn::generate_square_subsequent_mask(3, Some(DType::F64))?;
        let f = |xs: &[Tensor]| layer.call_with(&xs[0], EncoderLayerForwardOptions::new().src_mask(&mask));
        module_gradcheck(
            "TransformerEncoderLayer",
            layer.parameters(),
            std::slice::from_ref(&src),
            &f,
            true,
        )?;
    }
    let enc = TransformerEncoder::new(
        TransformerEncoderLayer::with_options(4, 2, o)?,
        2,
        Some(LayerNorm::new([4])?),
    )?;
    enc.to_dtype(DType::F64)?;
    enc.eval();
    let src = randn64(&[3, 2, 4])?;
    let f = |xs: &[Tensor]| enc.call(&xs[0]);
    module_gradcheck(
        "TransformerEncoder",
        enc.parameters(),
        std::slice::from_ref(&src),
        &f,
        false,
    )?;
    let dec = TransformerDecoderLayer::with_options(4, 2, o)?;
    dec.to_dtype(DType::F64)?;
    perturb(&dec)?;
    dec.eval();
    let (tgt, mem) = (randn64(&[2, 2, 4])?, randn64(&[3, 2, 4])?);
    let f = |xs: &[Tensor]| dec.call(&xs[0], &xs[1]);
    module_gradcheck(
        "TransformerDecoderLayer",
        dec.parameters(),
        &[tgt.clone(), mem.clone()],
        &f,
        true,
    )?;
    let stack = TransformerDecoder::new(
        TransformerDecoderLayer::with_options(4, 2, o)?,
        2,
        Some(LayerNorm::new([4])?),
    )?;
    stack.to_dtype(DType::F64)?;
    perturb(&stack)?;
    stack.eval();
    let tgt_mask = nn::generate_square_subsequent_mask(2, Some(DType::F64))?;
    let f = |xs: &[Tensor]| stack.call_with(&xs[0], &xs[1], DecoderForwardOptions::new().tgt_mask(&tgt_mask));
    module_gradcheck(
        "TransformerDecoder",
        stack.parameters(),
        &[tgt.clone(), mem.clone()],
        &f,
        true,
    )?;
    let tr = Transformer::with_options(
        4,
        2,
        TransformerOptions::new()
            .num_encoder_layers(1)
            .num_decoder_layers(1)
            .layer(o.activation(TransformerActivation::Gelu)),
    )?;
    tr.to_dtype(DType::F64)?;
    perturb(&tr)?;
    tr.eval();
    let f = |xs: &[Tensor]| tr.call_with(&xs[0], &xs[1], TransformerForwardOptions::new().tgt_mask(&tgt_mask));
    module_gradcheck("Transformer", tr.parameters(), &[mem, tgt], &f, true)?;

    // Losses (no parameters: input gradients, first and second order).
    let x = randn64(&[3, 4])?;
    let t = Tensor::new([0i64, 3, 1])?;
    let w = Tensor::new([0.5f64, 1.0, 1.5, 2.0])?;
    let ce = CrossEntropyLoss::with_options(ClassLossOptions::new().weight(w.clone()).label_smoothing(0.2));
    let f = |xs: &[Tensor]| ce.forward(&xs[0], &t);
    autograd::gradcheck(&f, std::slice::from_ref(&x), gc)?;
    autograd::gradgradcheck(&f, std::slice::from_ref(&x), gc)?;
    let nll = NLLLoss::with_options(ClassLossOptions::new().weight(w.clone()).reduction(Reduction::Sum));
    let f = |xs: &[Tensor]| nll.forward(&xs[0].log_softmax(1)?, &t);
    autograd::gradcheck(&f, std::slice::from_ref(&x), gc)?;
    autograd::gradgradcheck(&f, std::slice::from_ref(&x), gc)?;
    let y = Tensor::randn([3, 4])?.to_dtype(DType::F64)?;
    let prob_t = Tensor::rand([3, 4])?.to_dtype(DType::F64)?;
    let mse = MSELoss::new();
    let l1 = L1Loss::new();
    let sl1 = SmoothL1Loss::new().beta(0.5);
    let hub = HuberLoss::new().delta(0.7);
    let bce = BCELoss::with_options(Some(prob_t.add(0.5)?), Reduction::Sum);
    let bcel = BCEWithLogitsLoss::with_options(None, Reduction::Mean, Some(w.clone()));
    let kl = KLDivLoss::with_options(KlDivReduction::BatchMean, false);
    let klt = KLDivLoss::with_options(KlDivReduction::Sum, true);
    type LossFn<'a> = Box<dyn Fn(&[Tensor]) -> Result<Tensor> + 'a>;
    let fs: Vec<(&str, LossFn)> = vec![
        ("MSELoss", Box::new(|xs: &[Tensor]| mse.forward(&xs[0], &y))),
        ("L1Loss", Box::new(|xs: &[Tensor]| l1.forward(&xs[0], &y))),
        ("SmoothL1Loss", Box::new(|xs: &[Tensor]| sl1.forward(&xs[0], &y))),
        ("HuberLoss", Box::new(|xs: &[Tensor]| hub.forward(&xs[0], &y))),
        (
            "BCELoss",
            Box::new(|xs: &[Tensor]| bce.forward(&xs[0].sigmoid()?, &prob_t)),
        ),
        (
            "BCEWithLogitsLoss",
            Box::new(|xs: &[Tensor]| bcel.forward(&xs[0], &prob_t)),
        ),
        (
            "KLDivLoss",
            Box::new(|xs: &[Tensor]| kl.forward(&xs[0].log_softmax(1)?, &prob_t)),
        ),
        (
            "KLDivLoss log_target",
            Box::new(|xs: &[Tensor]| klt.forward(&xs[0], &y)),
        ),
    ];
    for (name, f) in &fs {
        autograd::gradcheck(f.as_ref(), std::slice::from_ref(&x), gc).inspect_err(|_| eprintln!("{name}"))?;
        autograd::gradgradcheck(f.as_ref(), std::slice::from_ref(&x), gc)
            .inspect_err(|_| eprintln!("{name} (second order)"))?;
    }
    Ok(())
}

#[test]
fn bad_input_names_the_layer_and_both_shapes() -> Result<()> {
    let _rng = rng_lock();
    let ln = LayerNorm::new([768])?;
    let e = ln.call(&Tensor::ones([4, 10])?).unwrap_err().to_string();
    assert_eq!(
        e,
        "LayerNorm((768,), eps=1e-05, elementwise_affine=True, bias=True): expected input with trailing shape [768], got [4, 10]"
    );
    let gn = GroupNorm::new(2, 6)?;
    let e = gn.call(&Tensor::ones([3, 4, 5])?).unwrap_err().to_string();
    assert_eq!(
        e,
        "GroupNorm(2, 6, eps=1e-05, affine=True, bias=True): expected input [N, 6, *], got [3, 4, 5]"
    );
    let e = GroupNorm::new(4, 6).err().unwrap().to_string();
    assert!(
        e.contains("num_channels (6) must be divisible by num_groups (4)"),
        "{e}"
    );
    let rms = RMSNorm::new([4])?;
    let e = rms.call(&Tensor::ones([2, 5])?).unwrap_err().to_string();
    assert_eq!(
        e,
        "RMSNorm((4,), eps=None, elementwise_affine=True): expected input with trailing shape [4], got [2, 5]"
    );
    let bn = BatchNorm2d::new(4)?;
    let e = bn.call(&Tensor::ones([2, 4, 5])?).unwrap_err().to_string();
    assert!(e.contains("expected 4D input (got 3D input)"), "{e}");
    let e = bn.call(&Tensor::ones([2, 3, 5, 5])?).unwrap_err().to_string();
    assert_eq!(
        e,
        "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True): \
         expected input [N, 4, H, W], got [2, 3, 5, 5]"
    );
    let bn3 = BatchNorm3d::new(4)?;
    let e = bn3.call(&Tensor::ones([2, 4, 5, 5])?).unwrap_err().to_string();
    assert!(e.contains("expected 5D input (got 4D input)"), "{e}");
    let e = bn3.call(&Tensor::ones([2, 3, 2, 2, 2])?).unwrap_err().to_string();
    assert_eq!(
        e,
        "BatchNorm3d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True): \
         expected input [N, 4, D, H, W], got [2, 3, 2, 2, 2]"
    );
    let bn1 = BatchNorm1d::new(3)?;
    let e = bn1.call(&Tensor::ones([1, 3])?).unwrap_err().to_string();
    assert!(
        e.contains("Expected more than 1 value per channel when training"),
        "{e}"
    );
    let emb = Embedding::new(10, 4)?;
    let e = emb.call(&Tensor::new([3i64, 12])?).unwrap_err().to_string();
    assert!(e.starts_with("Embedding(10, 4): "), "{e}");
    assert!(
        e.contains("index out of range in self") && e.contains("12") && e.contains("10"),
        "{e}"
    );
    let e = Embedding::with_options(10, 4, EmbeddingLayerOptions::new().padding_idx(10))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("Padding_idx must be within num_embeddings"), "{e}");
    let ce = CrossEntropyLoss::new();
    let e = ce
        .forward(&Tensor::zeros([2, 5])?, &Tensor::new([1i64, 7])?)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("CrossEntropyLoss(): "), "{e}");
    assert!(e.contains("Target 7 is out of bounds") && e.contains("[0, 5)"), "{e}");
    let e = ce
        .forward(&Tensor::zeros([3, 5])?, &Tensor::new([1i64, 2])?)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Expected input batch_size (3) to match target batch_size (2)"),
        "{e}"
    );
    let layer = TransformerEncoderLayer::with_options(16, 4, TransformerLayerOptions::new().dim_feedforward(32))?;
    let e = layer.call(&Tensor::ones([5, 2, 8])?).unwrap_err().to_string();
    assert_eq!(
        e,
        "TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=False, norm_first=False): \
         expected src [S, N, 16] (or unbatched [S, 16]), got [5, 2, 8]"
    );
    // The same check on the one-tensor call, and in a stack.
    let e = layer.call(&Tensor::ones([5, 2, 8])?).unwrap_err().to_string();
    assert!(
        e.ends_with("expected src [S, N, 16] (or unbatched [S, 16]), got [5, 2, 8]"),
        "{e}"
    );
    let small = TransformerLayerOptions::new().dim_feedforward(8);
    let t = Transformer::with_options(
        8,
        2,
        TransformerOptions::new()
            .num_encoder_layers(1)
            .num_decoder_layers(1)
            .layer(small),
    )?;
    let e = t
        .call(&Tensor::ones([5, 2, 8])?, &Tensor::ones([4, 3, 8])?)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "Transformer(d_model=8, nhead=2, batch_first=False): the batch number of src and tgt must be equal, \
         got src [5, 2, 8] and tgt [4, 3, 8]"
    );
    let e = t
        .call(&Tensor::ones([5, 2, 8])?, &Tensor::ones([4, 2, 6])?)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "Transformer(d_model=8, nhead=2, batch_first=False): the feature number of src and tgt must be equal \
         to d_model, got src [5, 2, 8] and tgt [4, 2, 6]"
    );
    let dec = TransformerDecoder::new(TransformerDecoderLayer::with_options(8, 2, small)?, 1, None)?;
    let e = dec
        .call(&Tensor::ones([4, 2, 8])?, &Tensor::ones([5, 8])?)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=8, batch_first=False, norm_first=False): \
         tgt and memory must both be batched or both unbatched, got [4, 2, 8] and [5, 8]"
    );
    assert!(Transformer::new(10, 3).is_err());
    assert!(TransformerEncoderLayer::new(10, 3).is_err());
    assert!(TransformerActivation::parse("tanh").is_err());
    Ok(())
}

#[test]
fn batch_norm_counts_batches_and_eval_uses_running_stats() -> Result<()> {
    let _rng = rng_lock();
    let bn = BatchNorm1d::new(2)?;
    let x = Tensor::new([[1.0f32, 2.0], [3.0, 6.0]])?;
    bn.call(&x)?;
    bn.call(&x)?;
    let nbt = bn.num_batches_tracked.as_ref().unwrap().tensor();
    assert_eq!(nbt.item::<i64>()?, 2);
    bn.eval();
    bn.call(&x)?;
    assert_eq!(nbt.item::<i64>()?, 2);
    // Eval: (x - running_mean) / sqrt(running_var + eps).
    let rm: Vec<f32> = bn.running_mean.as_ref().unwrap().tensor().to_vec()?;
    assert!((rm[0] - 0.38).abs() < 1e-6 && (rm[1] - 0.76).abs() < 1e-6, "{rm:?}");
    // to_dtype keeps the counter int64.
    bn.to_dtype(DType::F64)?;
    assert_eq!(bn.num_batches_tracked.as_ref().unwrap().tensor().dtype(), DType::I64);
    Ok(())
}

/// The layers of the first nn step (linear, convolution, pooling,
/// recurrent, attention, activations, flatten) gradchecked in f64 through
/// the module: input and parameter gradients, and double backward.
#[test]
fn earlier_layers_gradcheck_in_f64() -> Result<()> {
    use ferrotorch::nn::functional::GeluApproximate;
    use ferrotorch::nn::{
        AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool2d, Bilinear, Conv1d, Conv2d, ConvLayerOptions, ConvTranspose1d,
        ConvTranspose2d, Flatten, GRU, Gelu, LSTM, LeakyReLU, Linear, LogSoftmax, MaxPool2d, MhaForwardOptions,
        MultiheadAttention, RnnOptions, SiLU, Sigmoid, Softmax, Tanh,
    };
    use ferrotorch::{AvgPoolOptions, MaxPoolOptions, Padding};
    let _rng = rng_lock();
    manual_seed(11);
    // Layers linear in their input without parameters (pooling, Flatten)
    // have no second derivative: their gradient graph ends at the input.
    let one = |what: &str, m: &dyn Module, shape: &[usize], f: &dyn Fn(&[Tensor]) -> Result<Tensor>| -> Result<()> {
        m.to_dtype(DType::F64)?;
        let x = randn64(shape)?;
        let second = !m.parameters().is_empty();
        module_gradcheck(what, m.parameters(), std::slice::from_ref(&x), f, second)
    };
    let lin = Linear::new(4, 3)?;
    one("Linear", &lin, &[2, 4], &|xs| lin.call(&xs[0]))?;
    let lin3 = Linear::new(4, 2)?;
    one("Linear 3-d", &lin3, &[2, 3, 4], &|xs| lin3.call(&xs[0]))?;
    let bil = Bilinear::new(3, 2, 2)?;
    bil.to_dtype(DType::F64)?;
    let (a, b) = (randn64(&[2, 3])?, randn64(&[2, 2])?);
    module_gradcheck(
        "Bilinear",
        bil.parameters(),
        &[a, b],
        &|xs| bil.forward(&xs[0], &xs[1]),
        true,
    )?;
    let c1 = Conv1d::with_options(4, 2, 3, ConvLayerOptions::new().stride(2).padding(1).groups(2))?;
    one("Conv1d", &c1, &[2, 4, 7], &|xs| c1.call(&xs[0]))?;
    let c2 = Conv2d::with_options(
        2,
        3,
        [2, 3],
        ConvLayerOptions::new().padding(Padding::Same).dilation([2, 1]),
    )?;
    one("Conv2d same", &c2, &[1, 2, 5, 4], &|xs| c2.call(&xs[0]))?;
    let ct1 = ConvTranspose1d::with_options(2, 3, 3, ConvLayerOptions::new().stride(2).output_padding(1))?;
    one("ConvTranspose1d", &ct1, &[2, 2, 4], &|xs| ct1.call(&xs[0]))?;
    let ct2 = ConvTranspose2d::with_options(4, 2, 2, ConvLayerOptions::new().stride(2).padding(1).groups(2))?;
    one("ConvTranspose2d", &ct2, &[1, 4, 3, 3], &|xs| ct2.call(&xs[0]))?;
    let mp = MaxPool2d::new(MaxPoolOptions::new(2).stride(1).padding(1).ceil_mode(true));
    one("MaxPool2d", &mp, &[1, 2, 4, 3], &|xs| mp.call(&xs[0]))?;
    let ap = AvgPool2d::new(AvgPoolOptions::new(3).stride(2).padding(1).count_include_pad(false));
    one("AvgPool2d", &ap, &[2, 1, 5, 5], &|xs| ap.call(&xs[0]))?;
    let aap = AdaptiveAvgPool2d::new([2, 3]);
    one("AdaptiveAvgPool2d", &aap, &[1, 2, 5, 4], &|xs| aap.call(&xs[0]))?;
    let amp = AdaptiveMaxPool2d::new([2, 2]);
    one("AdaptiveMaxPool2d", &amp, &[1, 2, 5, 4], &|xs| amp.call(&xs[0]))?;
    let lstm = LSTM::with_options(3, 2, RnnOptions::new().num_layers(2).bidirectional(true))?;
    one("LSTM", &lstm, &[4, 2, 3], &|xs| Ok(lstm.call(&xs[0])?.0))?;
    let gru = GRU::with_options(3, 2, RnnOptions::new().batch_first(true))?;
    one("GRU", &gru, &[2, 4, 3], &|xs| Ok(gru.call(&xs[0])?.0))?;
    let mha = MultiheadAttention::new(4, 2)?;
    mha.to_dtype(DType::F64)?;
    let (q, kv) = (randn64(&[3, 2, 4])?, randn64(&[5, 2, 4])?);
    let opts = MhaForwardOptions::new().need_weights(false);
    module_gradcheck(
        "MultiheadAttention",
        mha.parameters(),
        &[q, kv],
        &|xs| Ok(mha.call_with(&xs[0], &xs[1], &xs[1], opts)?.0),
        true,
    )?;
    let acts: Vec<(&str, Box<dyn Forward>)> = vec![
        ("GELU tanh", Box::new(Gelu::with_approximate(GeluApproximate::Tanh))),
        ("GELU", Box::new(Gelu::new())),
        ("LeakyReLU", Box::new(LeakyReLU::new(0.2))),
        ("SiLU", Box::new(SiLU::new())),
        ("Tanh", Box::new(Tanh::new())),
        ("Sigmoid", Box::new(Sigmoid::new())),
        ("Softmax", Box::new(Softmax::new(1))),
        ("LogSoftmax", Box::new(LogSoftmax::new(0))),
        ("Flatten", Box::new(Flatten::new())),
    ];
    for (what, m) in &acts {
        let x = randn64(&[3, 2, 2])?;
        let second = *what != "Flatten";
        module_gradcheck(what, Vec::new(), std::slice::from_ref(&x), &|xs| m.call(&xs[0]), second)?;
    }
    Ok(())
}

/// Hooks on a multi-input, multi-output module against PyTorch: a forward
/// pre-hook scales the query, a forward hook shifts the output (keeping
/// the weights), a full backward hook records `grad_input` (query, key,
/// value) and `grad_output` (output, weights) and halves the key's
/// gradient.
#[test]
fn multihead_attention_hooks_match_pytorch() -> Result<()> {
    use std::sync::{Arc, Mutex};
    let _rng = rng_lock();
    let c = case("mha_hooks");
    manual_seed(0);
    let m = MultiheadAttention::new(8, 2)?;
    check_described("mha_hooks", &m, c);
    let pre = m.register_forward_pre_hook(|_, a| Ok(Some(vec![a[0].mul(2.0)?, a[1].clone(), a[2].clone()])))?;
    let post = m.register_forward_hook(|_, _, out| Ok(Some(vec![out[0].add(1.0)?, out[1].clone()])))?;
    type Seen = Vec<(Vec<Option<Tensor>>, Vec<Option<Tensor>>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let log = seen.clone();
    let bw = m.register_full_backward_hook(move |gin, gout| {
        log.lock().unwrap().push((gin.to_vec(), gout.to_vec()));
        let half = gin[1].as_ref().map(|g| g.mul(0.5)).transpose()?;
        Ok(Some(vec![gin[0].clone(), half, gin[2].clone()]))
    })?;
    let inputs: Vec<Tensor> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| tensor_of(v).requires_grad_(true))
        .collect::<Result<_>>()?;
    let (out, w) = m.call(&inputs[0], &inputs[1], &inputs[2])?;
    let w = w.expect("need_weights gives the weights");
    check_close("mha_hooks: output", &out, &c["output"]);
    check_close("mha_hooks: weights", &w, &c["weights"]);
    out.mul(&tensor_of(&c["r"]))?
        .sum()?
        .add(&w.mul(&tensor_of(&c["rw"]))?.sum()?)?
        .backward()?;
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "the backward hook runs once per backward");
        let (gin, gout) = &seen[0];
        assert_eq!((gin.len(), gout.len()), (3, 2));
        for (i, g) in gin.iter().enumerate() {
            check_close(
                &format!("mha_hooks: grad_input {i}"),
                g.as_ref().unwrap(),
                &c["hook_grad_input"][i],
            );
        }
        for (i, g) in gout.iter().enumerate() {
            check_close(
                &format!("mha_hooks: grad_output {i}"),
                g.as_ref().unwrap(),
                &c["hook_grad_output"][i],
            );
        }
    }
    for (i, x) in inputs.iter().enumerate() {
        check_close(&format!("mha_hooks: input {i} grad"), &x.grad()?, &c["input_grads"][i]);
    }
    for (k, p) in m.named_parameters() {
        check_close(
            &format!("mha_hooks: {k}.grad"),
            &p.grad().unwrap(),
            &c["param_grads"][&k],
        );
    }
    // Removed, the hooks no longer run: the plain forward's output.
    for h in [pre, post, bw] {
        h.remove();
    }
    let x: Vec<Tensor> = inputs.iter().map(Tensor::detach).collect();
    let (plain, _) = m.call(&x[0], &x[1], &x[2])?;
    let (scaled, _) = m.call(&x[0].mul(2.0)?, &x[1], &x[2])?;
    assert_ne!(plain.to_vec::<f32>()?, scaled.add(1.0)?.to_vec::<f32>()?);
    plain.sum()?.backward()?;
    assert_eq!(seen.lock().unwrap().len(), 1);
    Ok(())
}

/// `TransformerEncoderLayer` and `TransformerEncoder` are one-tensor
/// modules: they sit in a `Sequential`, and their `call` is the maskless
/// forward between their hooks.
#[test]
fn encoder_layers_chain_in_sequential() -> Result<()> {
    let _rng = rng_lock();
    manual_seed(3);
    let o = TransformerLayerOptions::new().dim_feedforward(8);
    let layer = TransformerEncoderLayer::with_options(8, 2, o)?;
    let enc = TransformerEncoder::new(TransformerEncoderLayer::with_options(8, 2, o)?, 2, None)?;
    layer.eval();
    let x1 = Tensor::randn([3, 8])?;
    assert_eq!(layer.call(&x1)?.to_vec::<f32>()?, layer.call(&x1)?.to_vec::<f32>()?);
    let net = Sequential::new().push(layer).push(enc).push(nn::Linear::new(8, 3)?);
    net.eval();
    let keys: Vec<String> = net.state_dict().keys().map(str::to_string).collect();
    assert_eq!(keys[0], "0.self_attn.in_proj_weight");
    assert!(keys.contains(&"1.layers.1.norm2.bias".to_string()));
    assert_eq!(keys.last().unwrap(), "2.bias");
    let x = Tensor::randn([4, 2, 8])?;
    let y = net.call(&x)?;
    assert_eq!(y.shape(), &[4, 2, 3]);
    // Step by step through the layers' own forwards (eval: no dropout).
    let l0 = net.get(0).unwrap();
    let l1 = net.get(1).unwrap();
    let l2 = net.get(2).unwrap();
    let step = l2.forward(&l1.forward(&l0.forward(&x)?)?)?;
    assert_eq!(y.to_vec::<f32>()?, step.to_vec::<f32>()?);
    Ok(())
}
