//! `nn`'s functional forms, initialisers, reprs and state-dict handling
//! against PyTorch (`tests/nn_data/group_a.json`, written by
//! `tests/gen_nn_group_a.py`): every `nn::functional` wrapper with
//! non-default keyword arguments (conv stride / padding / dilation /
//! groups, pooling `ceil_mode` / `count_include_pad` / `divisor_override`
//! / indices, loss weights, `ignore_index`, `label_smoothing`,
//! `pos_weight`, reductions, `kl_div`'s `batchmean` and `log_target`),
//! `F.dropout`'s mask, the cases it leaves the input alone (drawing
//! nothing from the generator) and its errors, `F.group_norm`'s "more
//! than 1 value per channel" check, `nn.init`'s fillers (`uniform_`,
//! `normal_`, `zeros_`, xavier / kaiming with other gains, modes and
//! nonlinearities, `trunc_normal_` on both sides of its switch between
//! samplers, `orthogonal_` of a square or empty matrix and its 1-d error),
//! each followed by the next draw of the generator, Python's repr of
//! floats (`1e-05`, `1e+20`, `inf`, `-0.0`) and of a nested `Sequential`,
//! and `StateDict` as an `OrderedDict` with `load_state_dict`'s strict and
//! non-strict key reports and messages.

use ferrotorch::nn::functional::{
    self as F, BatchNormOptions, BceWithLogitsOptions, CrossEntropyOptions, EmbeddingOptions, GeluApproximate,
    KlDivReduction, NllLossOptions, Reduction,
};
use ferrotorch::nn::init::{self, FanMode, Nonlinearity};
use ferrotorch::nn::state_dict::StateDict;
use ferrotorch::nn::{
    Buffer, Embedding, EmbeddingLayerOptions, Forward, LayerNorm, LeakyReLU, Linear, LinearOptions, Module, Parameter,
    ReLU, Sequential,
};
use ferrotorch::{
    AvgPoolOptions, ConvOptions, ConvTransposeOptions, DType, MaxPoolOptions, Result, Tensor, manual_seed,
};
use serde_json::Value;

#[path = "support/nn_json.rs"]
mod nn_json;

use nn_json::{check, float, floats, rng_lock, shape_of, strings, tensor_of, values};

fn data() -> &'static Value {
    nn_json::data("group_a.json")
}

/// Runs `F::<name>` on the case's inputs with the keyword arguments the
/// generator passed.
fn run_functional(name: &str, i: &[Tensor]) -> Result<Vec<Tensor>> {
    let one = |t: Tensor| Ok(vec![t]);
    let two = |(a, b): (Tensor, Tensor)| Ok(vec![a, b]);
    match name {
        "linear" => one(F::linear(&i[0], &i[1], Some(&i[2]))?),
        "linear_nobias" => one(F::linear(&i[0], &i[1], None)?),
        "bilinear" => one(F::bilinear(&i[0], &i[1], &i[2], Some(&i[3]))?),
        "bilinear_nobias" => one(F::bilinear(&i[0], &i[1], &i[2], None)?),
        "relu" => one(F::relu(&i[0])?),
        "leaky_relu" => one(F::leaky_relu(&i[0], 0.2)?),
        "gelu" => one(F::gelu(&i[0])?),
        "gelu_tanh" => one(F::gelu_with(&i[0], GeluApproximate::Tanh)?),
        "gelu_none" => one(F::gelu_with(&i[0], GeluApproximate::None)?),
        "silu" => one(F::silu(&i[0])?),
        "softmax" => one(F::softmax(&i[0], 0)?),
        "log_softmax" => one(F::log_softmax(&i[0], -1)?),
        "softmax_dtype" => one(F::softmax_dtype(&i[0], 1, DType::F64)?),
        "log_softmax_dtype" => one(F::log_softmax_dtype(&i[0], 0, DType::F64)?),
        "elu" => one(F::elu(&i[0], 0.7)?),
        "celu" => one(F::celu(&i[0], 1.3)?),
        "selu" => one(F::selu(&i[0])?),
        "hardtanh" => one(F::hardtanh(&i[0], -0.5, 2.0)?),
        "relu6" => one(F::relu6(&i[0])?),
        "mish" => one(F::mish(&i[0])?),
        "hardswish" => one(F::hardswish(&i[0])?),
        "hardsigmoid" => one(F::hardsigmoid(&i[0])?),
        "logsigmoid" => one(F::logsigmoid(&i[0])?),
        "softplus" => one(F::softplus(&i[0], 2.0, 3.0)?),
        "softshrink" => one(F::softshrink(&i[0], 0.8)?),
        "hardshrink" => one(F::hardshrink(&i[0], 0.8)?),
        "conv1d" => one(F::conv1d(
            &i[0],
            &i[1],
            Some(&i[2]),
            ConvOptions::new().stride(2).padding(1).dilation(2).groups(2),
        )?),
        "conv2d" => one(F::conv2d(
            &i[0],
            &i[1],
            Some(&i[2]),
            ConvOptions::new().stride([2, 1]).padding([1, 2]).dilation([1, 2]),
        )?),
        "conv2d_nobias" => one(F::conv2d(&i[0], &i[1], None, ConvOptions::new())?),
        "conv_transpose1d" => one(F::conv_transpose1d(
            &i[0],
            &i[1],
            Some(&i[2]),
            ConvTransposeOptions::new()
                .stride(2)
                .padding(1)
                .output_padding(1)
                .dilation(1),
        )?),
        "conv_transpose2d" => one(F::conv_transpose2d(
            &i[0],
            &i[1],
            Some(&i[2]),
            ConvTransposeOptions::new()
                .stride([2, 3])
                .padding([1, 0])
                .output_padding([1, 2])
                .groups(2),
        )?),
        "max_pool1d" => one(F::max_pool1d(
            &i[0],
            MaxPoolOptions::new(3).stride(2).padding(1).dilation(2).ceil_mode(true),
        )?),
        "max_pool2d" => one(F::max_pool2d(
            &i[0],
            MaxPoolOptions::new([3, 2]).stride([2, 3]).padding(1).ceil_mode(true),
        )?),
        "max_pool2d_with_indices" => two(F::max_pool2d_with_indices(
            &i[0],
            MaxPoolOptions::new(2).stride(1).dilation([2, 1]),
        )?),
        "avg_pool1d" => one(F::avg_pool1d(
            &i[0],
            AvgPoolOptions::new(4)
                .stride(3)
                .padding(2)
                .ceil_mode(true)
                .count_include_pad(false),
        )?),
        "avg_pool2d" => one(F::avg_pool2d(
            &i[0],
            AvgPoolOptions::new([3, 2])
                .stride(2)
                .padding(1)
                .count_include_pad(false),
        )?),
        "avg_pool2d_divisor" => one(F::avg_pool2d(
            &i[0],
            AvgPoolOptions::new(3)
                .stride([2, 3])
                .padding(1)
                .ceil_mode(true)
                .divisor_override(5),
        )?),
        "adaptive_avg_pool1d" => one(F::adaptive_avg_pool1d(&i[0], 4)?),
        "adaptive_avg_pool2d" => one(F::adaptive_avg_pool2d(&i[0], [4, 3])?),
        "adaptive_max_pool1d" => two(F::adaptive_max_pool1d(&i[0], 4)?),
        "adaptive_max_pool2d" => two(F::adaptive_max_pool2d(&i[0], [4, 3])?),
        "one_hot" => one(F::one_hot(&i[0])?),
        "one_hot_with" => one(F::one_hot_with(&i[0], 6)?),
        "layer_norm" => one(F::layer_norm(&i[0], &[4, 5], Some(&i[1]), Some(&i[2]), 0.5)?),
        "layer_norm_plain" => one(F::layer_norm(&i[0], &[5], None, None, 1e-5)?),
        "rms_norm" => one(F::rms_norm(&i[0], &[5], Some(&i[1]), Some(0.25))?),
        "rms_norm_default_eps" => one(F::rms_norm(&i[0], &[4, 5], None, None)?),
        "group_norm" => one(F::group_norm(&i[0], 3, Some(&i[1]), Some(&i[2]), 0.1)?),
        "group_norm_3x3" => one(F::group_norm(&i[0], 2, None, None, 1e-5)?),
        "batch_norm_train" => {
            let y = F::batch_norm(
                &i[0],
                Some(&i[1]),
                Some(&i[2]),
                Some(&i[3]),
                Some(&i[4]),
                &BatchNormOptions::new().training(true).momentum(0.3).eps(0.01),
            )?;
            Ok(vec![y, i[1].clone(), i[2].clone()])
        }
        "batch_norm_eval" => one(F::batch_norm(
            &i[0],
            Some(&i[1]),
            Some(&i[2]),
            Some(&i[3]),
            Some(&i[4]),
            &BatchNormOptions::new().eps(0.2),
        )?),
        "embedding_max_norm" => {
            let opts = EmbeddingOptions::new().padding_idx(0).max_norm(1.5).norm_type(1.0);
            let y = F::embedding(&i[0], &i[1], &opts)?;
            Ok(vec![y, i[1].clone()])
        }
        "embedding" => one(F::embedding(&i[0], &i[1], &EmbeddingOptions::new())?),
        "cross_entropy" => one(F::cross_entropy(&i[0], &i[1], &CrossEntropyOptions::new())?),
        "cross_entropy_opts" => one(F::cross_entropy(
            &i[0],
            &i[1],
            &CrossEntropyOptions::new()
                .weight(&i[2])
                .ignore_index(3)
                .reduction(Reduction::Sum)
                .label_smoothing(0.2),
        )?),
        "cross_entropy_none" => one(F::cross_entropy(
            &i[0],
            &i[1],
            &CrossEntropyOptions::new()
                .reduction(Reduction::None)
                .label_smoothing(0.1),
        )?),
        "nll_loss" => one(F::nll_loss(&i[0], &i[1], &NllLossOptions::new())?),
        "nll_loss_opts" => one(F::nll_loss(
            &i[0],
            &i[1],
            &NllLossOptions::new()
                .weight(&i[2])
                .ignore_index(0)
                .reduction(Reduction::Mean),
        )?),
        "nll_loss_none" => one(F::nll_loss(
            &i[0],
            &i[1],
            &NllLossOptions::new().reduction(Reduction::None),
        )?),
        "mse_loss" => one(F::mse_loss(&i[0], &i[1], Reduction::Sum)?),
        "l1_loss" => one(F::l1_loss(&i[0], &i[1], Reduction::None)?),
        "smooth_l1_loss" => one(F::smooth_l1_loss(&i[0], &i[1], Reduction::None, 0.7)?),
        "huber_loss" => one(F::huber_loss(&i[0], &i[1], Reduction::Sum, 0.6)?),
        "binary_cross_entropy" => one(F::binary_cross_entropy(&i[0], &i[1], Some(&i[2]), Reduction::Sum)?),
        "bce_with_logits" => one(F::binary_cross_entropy_with_logits(
            &i[0],
            &i[1],
            &BceWithLogitsOptions::new()
                .pos_weight(&i[2])
                .weight(&i[3])
                .reduction(Reduction::None),
        )?),
        "kl_div_batchmean_log_target" => one(F::kl_div(&i[0], &i[1], KlDivReduction::BatchMean, true)?),
        "kl_div_batchmean_0d" => one(F::kl_div(&i[0], &i[1], KlDivReduction::parse("batchmean")?, false)?),
        other => {
            let red = other.strip_prefix("kl_div_").unwrap_or_else(|| panic!("case {other}"));
            one(F::kl_div(&i[0], &i[1], KlDivReduction::parse(red)?, false)?)
        }
    }
}

/// Every functional wrapper with PyTorch's keyword arguments gives
/// PyTorch's values (the running statistics of a training batch norm and
/// an embedding's renormalised weight included).
#[test]
fn functional_forms_match_pytorch() -> Result<()> {
    for c in data()["functional"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let ins: Vec<Tensor> = c["inputs"].as_array().unwrap().iter().map(tensor_of).collect();
        let outs = run_functional(name, &ins)?;
        let want = c["outputs"].as_array().unwrap();
        assert_eq!(outs.len(), want.len(), "{name}: outputs");
        for (k, (o, w)) in outs.iter().zip(want).enumerate() {
            let rel = if o.dtype() == DType::F32 { 4e-6 } else { 1e-12 };
            check(&format!("{name}[{k}]"), o, w, rel);
        }
    }
    Ok(())
}

/// `Box<dyn Forward>` forwards `forward` and `call` to the module inside
/// (`F.leaky_relu(x, 0.2)`'s values).
#[test]
fn boxed_modules_forward_and_call() -> Result<()> {
    let c = data()["functional"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "leaky_relu")
        .unwrap();
    let x = tensor_of(&c["inputs"][0]);
    let boxed: Box<dyn Forward> = Box::new(LeakyReLU::new(0.2));
    check("boxed forward", &boxed.forward(&x)?, &c["outputs"][0], 0.0);
    check("boxed call", &boxed.call(&x)?, &c["outputs"][0], 0.0);
    check("call", &LeakyReLU::new(0.2).call(&x)?, &c["outputs"][0], 0.0);
    Ok(())
}

/// `KlDivReduction::parse` rejects what PyTorch rejects, and
/// `GeluApproximate` spells its values as `nn.GELU(approximate=...)`.
#[test]
fn kl_div_reduction_and_gelu_spellings() {
    let e = KlDivReduction::parse("batch").unwrap_err().to_string();
    let want = data()["kl_div_reduction_error"]["message"].as_str().unwrap();
    assert!(e.contains(want), "{e}");
    let spellings = strings(&data()["gelu_approximate"]);
    assert_eq!(GeluApproximate::None.as_str(), spellings[0]);
    assert_eq!(GeluApproximate::Tanh.as_str(), spellings[1]);
}

/// `F.group_norm` refuses groups of one value each with PyTorch's message
/// (the size it checked), and errors for no groups and 1-d inputs.
#[test]
fn group_norm_checks_values_per_group() {
    let d = data();
    let x = tensor_of(&d["group_norm_one_value"]["input"]);
    let e = F::group_norm(&x, 2, None, None, 1e-5).unwrap_err().to_string();
    let want = d["group_norm_one_value"]["error"]["message"].as_str().unwrap();
    assert!(e.contains(want), "{e}");
    let e = F::group_norm(&Tensor::ones([1, 3, 1]).unwrap(), 3, None, None, 1e-5)
        .unwrap_err()
        .to_string();
    let want = d["group_norm_one_value_3d"]["message"].as_str().unwrap();
    assert!(e.contains(want), "{e}");
    // PyTorch: ZeroDivisionError and "Expected at least 2 dimensions".
    assert_eq!(d["group_norm_zero_groups"]["type"], "ZeroDivisionError");
    assert!(F::group_norm(&Tensor::ones([2, 4]).unwrap(), 0, None, None, 1e-5).is_err());
    let e = F::group_norm(&Tensor::ones([4]).unwrap(), 2, None, None, 1e-5)
        .unwrap_err()
        .to_string();
    let want = d["group_norm_1d"]["message"].as_str().unwrap();
    assert!(e.contains(want), "{e}");
}

/// A single output size on a 1-d input is the operator's error, not the
/// "Input dimension should be at least" check of a pair of sizes.
#[test]
fn adaptive_pool2d_single_size_on_1d_input() {
    let x = Tensor::ones([5]).unwrap();
    let e = F::adaptive_max_pool2d(&x, 1).unwrap_err().to_string();
    let want = data()["adaptive_max_pool2d_1d"]["message"].as_str().unwrap();
    assert!(e.contains(want), "{e}");
    let e = F::adaptive_avg_pool2d(&x, 1).unwrap_err().to_string();
    let want = data()["adaptive_avg_pool2d_1d"]["message"].as_str().unwrap();
    assert!(e.contains(want), "{e}");
}

/// `F.dropout`: PyTorch's mask for a seed, zeros for `p = 1`, the input
/// itself (no draw from the generator) for `p = 0`, in evaluation and for
/// an empty input, PyTorch's message for `p` outside [0, 1].
#[test]
fn dropout_masks_identities_and_errors() -> Result<()> {
    let _rng = rng_lock();
    let d = &data()["dropout"];
    let x = tensor_of(&d["x"]);
    let seed = d["seed"].as_u64().unwrap();
    let cases: [(&str, f64, bool, Tensor); 5] = [
        ("p03", 0.3, true, x.clone()),
        ("p1", 1.0, true, x.clone()),
        ("p0", 0.0, true, x.clone()),
        ("eval", 0.4, false, x.clone()),
        ("empty", 0.4, true, Tensor::ones([0, 3])?),
    ];
    for (name, p, training, input) in cases {
        manual_seed(seed);
        let y = F::dropout(&input, p, training)?;
        check(name, &y, &d[name], 0.0);
        check(
            &format!("{name}: next draw"),
            &Tensor::rand(3)?,
            &d[&format!("{name}_next")],
            0.0,
        );
    }
    for e in d["errors"].as_array().unwrap() {
        let p = e["p"].as_f64().unwrap();
        let got = F::dropout(&x, p, true).unwrap_err().to_string();
        let want = e["error"]["message"].as_str().unwrap();
        assert!(got.contains(want), "{got}");
    }
    Ok(())
}

/// The `nn.init` fillers give PyTorch's values for its seed, and leave the
/// generator where PyTorch leaves it (the next draw is PyTorch's).
#[test]
fn init_functions_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    for c in data()["init"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        manual_seed(c["seed"].as_u64().unwrap());
        let t = Tensor::empty(&shape_of(c)[..])?;
        // Not zero before `zeros_`.
        init::ones_(&t)?;
        // trunc_normal_'s arguments from their bits (its switch compares
        // the mass with 0.3 exactly).
        let arg = |i: usize| f64::from_bits(c["bits"][i].as_str().unwrap().parse().unwrap());
        let out = match name {
            "uniform" => init::uniform_(&t, -0.5, 2.0)?,
            "normal" => init::normal_(&t, 1.5, 0.25)?,
            "zeros" => init::zeros_(&t)?,
            "xavier_uniform_gain" => init::xavier_uniform_(&t, 0.5)?,
            "xavier_normal_4d" => init::xavier_normal_(&t, 2.0)?,
            "kaiming_uniform_fan_out_tanh" => init::kaiming_uniform_(&t, FanMode::FanOut, Nonlinearity::Tanh)?,
            "kaiming_normal_fan_in_selu" => init::kaiming_normal_(&t, FanMode::FanIn, Nonlinearity::Selu)?,
            "kaiming_normal_leaky_default" => {
                init::kaiming_normal_(&t, FanMode::default(), Nonlinearity::LeakyRelu(Some(0.0)))?
            }
            "orthogonal_square" | "orthogonal_empty_rows" | "orthogonal_empty_cols" => {
                init::orthogonal_(&t, if name == "orthogonal_square" { 0.5 } else { 1.0 })?
            }
            _ => init::trunc_normal_(&t, arg(0), arg(1), arg(2), arg(3))?,
        };
        // QR by another algorithm than LAPACK's: equal up to rounding.
        let rel = if name == "orthogonal_square" { 1e-5 } else { 0.0 };
        check(name, &t, &c["output"], rel);
        check(&format!("{name}: returned"), &out, &c["output"], rel);
        check(&format!("{name}: next draw"), &Tensor::rand(2)?, &c["next"], 0.0);
    }
    let e = init::orthogonal_(&Tensor::empty([4])?, 1.0).unwrap_err().to_string();
    let want = data()["orthogonal_1d_error"]["message"].as_str().unwrap();
    assert!(e.contains(want), "{e}");
    Ok(())
}

/// Floats in reprs are Python's `repr` of a float.
#[test]
fn reprs_spell_floats_as_python() {
    for c in data()["leaky_relu_reprs"].as_array().unwrap() {
        let slope = float(&c["slope"]);
        assert_eq!(
            ferrotorch::nn::repr(&LeakyReLU::new(slope)),
            c["repr"].as_str().unwrap(),
            "{slope:?}"
        );
    }
}

/// A nested `Sequential` prints as PyTorch's, children indented.
#[test]
fn nested_sequential_repr() -> Result<()> {
    let _rng = rng_lock();
    let inner = Sequential::new().push(LeakyReLU::new(1e-5)).push(LayerNorm::new(3)?);
    let net = Sequential::new()
        .push(Linear::new(2, 3)?)
        .push(inner)
        .push(Linear::with_options(3, 1, LinearOptions::new().bias(false))?);
    assert_eq!(ferrotorch::nn::repr(&net), data()["nested_repr"].as_str().unwrap());
    assert_eq!(net.to_string(), data()["nested_repr"].as_str().unwrap());
    Ok(())
}

/// A layer made in float64 draws its weight in that dtype, as PyTorch's
/// `nn.Embedding(4, 3, dtype=torch.float64)`.
#[test]
fn layer_dtype_option() -> Result<()> {
    let _rng = rng_lock();
    manual_seed(70);
    let e = Embedding::with_options(4, 3, EmbeddingLayerOptions::new().dtype(DType::F64))?;
    check(
        "embedding f64 weight",
        e.state_dict().get("weight").unwrap(),
        &data()["embedding_f64_weight"],
        0.0,
    );
    Ok(())
}

fn scalar(v: f64) -> Tensor {
    Tensor::full([1], v).unwrap()
}

/// `StateDict` keeps `OrderedDict`'s order: a re-inserted key keeps its
/// place, a removed one shifts the later keys.
#[test]
fn state_dict_is_an_ordered_dict() -> Result<()> {
    let want = &data()["ordered_dict"];
    let mut sd: StateDict = ["a", "b", "c", "d", "e"]
        .iter()
        .enumerate()
        .map(|(i, k)| (k.to_string(), scalar(i as f64)))
        .collect();
    assert_eq!(sd.len(), 5);
    sd.insert("b", scalar(10.0));
    assert_eq!(sd.len(), 5);
    assert_eq!(sd.remove("b").unwrap().item::<f32>()?, 10.0);
    assert!(sd.remove("b").is_none());
    sd.insert("f", scalar(5.0));
    assert_eq!(sd.remove("a").unwrap().item::<f32>()?, 0.0);
    let keys = strings(&want["keys"]);
    let vals = floats(&want["values"]);
    assert_eq!(sd.keys().collect::<Vec<_>>(), keys);
    assert_eq!(sd.len(), keys.len());
    assert!(!sd.is_empty() && StateDict::new().is_empty());
    assert!(sd.contains_key("c") && !sd.contains_key("a") && !sd.contains_key("b"));
    for (k, v) in keys.iter().zip(&vals) {
        assert_eq!(sd.get(k).unwrap().item::<f32>()? as f64, *v, "{k}");
    }
    let pairs: Vec<(String, f64)> = sd
        .iter()
        .map(|(k, t)| (k.to_string(), t.item::<f32>().unwrap() as f64))
        .collect();
    let mut looped = Vec::new();
    for (k, t) in &sd {
        looped.push((k.to_string(), t.item::<f32>()? as f64));
    }
    let expected: Vec<(String, f64)> = keys.iter().cloned().zip(vals.iter().copied()).collect();
    assert_eq!(pairs, expected);
    assert_eq!(looped, expected);
    assert!(sd.get("a").is_none());

    // `consume_prefix_in_state_dict_if_present`: PyTorch's keys in
    // PyTorch's order (each prefixed key popped and its stripped name set,
    // so it moves to the end), and the values where stripped names collide.
    let pre: StateDict = ["module.0.weight", "head.bias", "module.module.x"]
        .iter()
        .map(|k| (k.to_string(), scalar(0.0)))
        .collect();
    let stripped = pre.strip_prefix("module.");
    let got: Vec<&str> = stripped.keys().collect();
    assert_eq!(got, strings(&data()["strip_prefix"]));
    for case in data()["strip_prefix_cases"].as_array().unwrap() {
        let sd: StateDict = strings(&case["keys"])
            .into_iter()
            .enumerate()
            .map(|(i, k)| (k, scalar(i as f64)))
            .collect();
        let prefix = case["prefix"].as_str().unwrap();
        let got: Vec<(String, f64)> = sd
            .strip_prefix(prefix)
            .iter()
            .map(|(k, t)| Ok((k.to_string(), t.item::<f32>()? as f64)))
            .collect::<Result<_>>()?;
        let want: Vec<(String, f64)> = case["out"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_f64().unwrap()))
            .collect();
        assert_eq!(got, want, "strip_prefix({prefix:?}) of {:?}", case["keys"]);
    }
    Ok(())
}

fn mlp() -> Result<Sequential> {
    Ok(Sequential::new()
        .push(Linear::new(2, 3)?)
        .push(ReLU::new())
        .push(Linear::new(3, 2)?))
}

fn full_error(v: &Value) -> &str {
    v["full"].as_str().unwrap()
}

/// `load_state_dict`: strict reports of missing and unexpected keys (each
/// alone and together), the non-strict report, and size mismatches, which
/// are errors even when not strict, with PyTorch's messages.
#[test]
fn load_state_dict_reports_as_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let want = &data()["load_state_dict"];
    let net = mlp()?;
    let sd = net.state_dict();
    let mut missing: StateDict = sd
        .iter()
        .filter(|(k, _)| !["0.bias", "2.weight"].contains(k))
        .map(|(k, t)| (k.to_string(), t.add(1.0).unwrap()))
        .collect();
    missing.insert("x.y", Tensor::zeros([1])?);
    missing.insert("z", Tensor::zeros([2])?);
    let e = net.load_state_dict(&missing, true).unwrap_err().to_string();
    assert_eq!(e, full_error(&want["strict_error"]));
    let r = net.load_state_dict(&missing, false)?;
    assert_eq!(r.missing_keys, strings(&want["non_strict"]["missing"]));
    assert_eq!(r.unexpected_keys, strings(&want["non_strict"]["unexpected"]));
    // The keys that match were copied.
    let now = net.state_dict();
    assert_eq!(
        values(now.get("0.weight").unwrap()),
        values(missing.get("0.weight").unwrap())
    );
    assert_eq!(
        values(now.get("2.bias").unwrap()),
        values(missing.get("2.bias").unwrap())
    );

    let mut only_missing = net.state_dict();
    only_missing.remove("2.bias");
    let e = net.load_state_dict(&only_missing, true).unwrap_err().to_string();
    assert_eq!(e, full_error(&want["only_missing"]));

    let mut only_unexpected = net.state_dict();
    only_unexpected.insert("extra", Tensor::zeros([1])?);
    let e = net.load_state_dict(&only_unexpected, true).unwrap_err().to_string();
    assert_eq!(e, full_error(&want["only_unexpected"]));
    let r = net.load_state_dict(&only_unexpected, false)?;
    assert!(r.missing_keys.is_empty());
    assert_eq!(r.unexpected_keys, ["extra"]);

    let mut bad = net.state_dict();
    bad.insert("0.bias", Tensor::zeros([4])?);
    bad.insert("2.weight", Tensor::zeros([3, 2])?);
    bad.insert("extra", Tensor::zeros([1])?);
    let e = net.load_state_dict(&bad, false).unwrap_err().to_string();
    assert_eq!(e, full_error(&want["size_mismatch_non_strict"]));
    Ok(())
}

/// Parameter and buffer handles: clones are the same tensor (PyTorch's
/// `is`), distinct ones are not; `persistent=False` buffers say so; a
/// frozen parameter does not require grad and has no gradient yet.
#[test]
fn parameter_and_buffer_handles() -> Result<()> {
    let p = Parameter::new(Tensor::ones([2])?)?;
    let q = Parameter::new(Tensor::ones([2])?)?;
    let tied = p.clone();
    assert!(tied.same_as(&p) && !q.same_as(&p));
    assert_eq!(tied.id(), p.id());
    assert_ne!(q.id(), p.id());
    assert!(p.grad_opt().is_none() && p.grad().is_err());
    let f = Parameter::frozen(Tensor::full([3], 2.0)?);
    assert!(!f.tensor().requires_grad());
    assert_eq!(f.tensor().to_vec::<f32>()?, [2.0, 2.0, 2.0]);
    f.set_tensor(Tensor::zeros([3])?)?;
    assert_eq!(f.tensor().to_vec::<f32>()?, [0.0, 0.0, 0.0]);
    // `param.data = t` keeps `requires_grad`; an integer tensor is refused.
    tied.set_tensor(Tensor::full([2], 4.0)?)?;
    assert!(p.tensor().requires_grad());
    assert_eq!(p.tensor().to_vec::<f32>()?, [4.0, 4.0]);
    let e = p
        .set_tensor(Tensor::zeros_dtype([2], DType::I64)?)
        .unwrap_err()
        .to_string();
    let want = data()["set_data_int_error"]["message"].as_str().unwrap();
    assert!(e.contains(want), "{e}");
    assert_eq!(p.tensor().to_vec::<f32>()?, [4.0, 4.0]);

    let b = Buffer::new(Tensor::ones([2])?);
    let n = Buffer::non_persistent(Tensor::zeros([2])?);
    assert!(b.persistent() && !n.persistent());
    assert_eq!(n.tensor().to_vec::<f32>()?, [0.0, 0.0]);
    let b2 = b.clone();
    assert_eq!(b2.id(), b.id());
    assert_ne!(n.id(), b.id());
    b2.set_tensor(Tensor::full([2], 3.0)?);
    assert_eq!(b.tensor().to_vec::<f32>()?, [3.0, 3.0]);
    Ok(())
}
