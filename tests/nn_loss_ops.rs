//! The normalisation, embedding, activation and loss operators as a
//! PyTorch user meets them: graph nodes (PyTorch 2.15's names, first and
//! second order), error messages, in-place running statistics and
//! renormalisation, the meta device, f16/bf16, and the functional front
//! ends' defaults. Values are checked against PyTorch in `tests/oracle.rs`
//! (`norm.json`, `loss.json`, `linear_embedding.json`,
//! `oracle_extra/nn_loss.json`).

use ferrotorch::nn::functional as F;
use ferrotorch::{DType, Device, Reduction, Result, Tensor, TensorOptions};

/// The node names of a graph, breadth first from `t`'s `grad_fn`
/// (AccumulateGrad included), as `/tmp/nodes.py`-style PyTorch walks print.
fn nodes(t: &Tensor, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut queue: std::collections::VecDeque<_> = t.grad_fn().into_iter().collect();
    while let Some(n) = queue.pop_front() {
        if out.len() == limit {
            break;
        }
        out.push(n.name());
        for e in n.next_edges().iter().flatten() {
            queue.push_back(e.node.clone());
        }
    }
    out
}

/// `names` with the scalar overloads' nodes of add, mul and div
/// (`AddBackward1`, which PyTorch's C++ composites record) written as the
/// tensor ones (`AddBackward0`): the core records `x + 2.0` as PyTorch's
/// Python front end does, whichever the caller.
fn unify(names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| match *n {
            "AddBackward1" => "AddBackward0".to_string(),
            "MulBackward1" => "MulBackward0".to_string(),
            "DivBackward1" => "DivBackward0".to_string(),
            n => n.to_string(),
        })
        .collect()
}

fn leaf(shape: &[usize], seed: u64) -> Tensor {
    let g = ferrotorch::Generator::new(seed);
    TensorOptions::new()
        .generator(&g)
        .randn(shape)
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

fn err(r: Result<Tensor>) -> String {
    r.expect_err("PyTorch raises here").to_string()
}

#[test]
fn graph_nodes_are_pytorchs() -> Result<()> {
    let x = leaf(&[4, 6], 1);
    let (w, b) = (leaf(&[6], 2), leaf(&[6], 3));
    let first = |t: &Tensor| nodes(t, 1)[0].clone();
    assert_eq!(
        first(&F::layer_norm(&x, &[6], Some(&w), Some(&b), 1e-5)?),
        "NativeLayerNormBackward0"
    );
    let x3 = leaf(&[2, 4, 3], 4);
    let c4 = leaf(&[4], 5);
    assert_eq!(
        first(&F::group_norm(&x3, 2, Some(&c4), None, 1e-5)?),
        "NativeGroupNormBackward0"
    );
    let bn = F::batch_norm(
        &x3,
        Some(&Tensor::zeros([4])?),
        Some(&Tensor::ones([4])?),
        Some(&c4),
        None,
        &F::BatchNormOptions::new().training(true),
    )?;
    assert_eq!(first(&bn), "NativeBatchNormBackward0");
    let e = leaf(&[10, 3], 6);
    let emb = F::embedding(&Tensor::new([1i64, 2])?, &e, &Default::default())?;
    assert_eq!(nodes(&emb, 2), ["EmbeddingBackward0", "AccumulateGrad"]);
    for (y, want) in [
        (F::leaky_relu(&x, 0.01)?, "LeakyReluBackward0"),
        (F::elu(&x, 1.0)?, "EluBackward0"),
        (F::celu(&x, 1.0)?, "CeluBackward0"),
        (F::selu(&x)?, "EluBackward0"),
        (F::hardtanh(&x, -1.0, 1.0)?, "HardtanhBackward0"),
        (F::relu6(&x)?, "HardtanhBackward0"),
        (F::mish(&x)?, "MishBackward0"),
        (F::hardswish(&x)?, "HardswishBackward0"),
        (F::hardsigmoid(&x)?, "HardsigmoidBackward0"),
        (F::logsigmoid(&x)?, "LogSigmoidBackward0"),
        (F::softshrink(&x, 0.5)?, "SoftshrinkBackward0"),
        (F::hardshrink(&x, 0.5)?, "HardshrinkBackward0"),
        (F::softplus(&x, 1.0, 20.0)?, "SoftplusBackward0"),
    ] {
        assert_eq!(first(&y), want);
    }
    // rms_norm is a composite on PyTorch 2.15's CPU.
    assert_eq!(
        nodes(&F::rms_norm(&x, &[6], Some(&w), None)?, 9),
        unify(&[
            "MulBackward0",
            "MulBackward0",
            "AccumulateGrad",
            "AccumulateGrad",
            "RsqrtBackward0",
            "AddBackward1",
            "MeanBackward1",
            "PowBackward0",
            "AccumulateGrad"
        ])
    );
    let t = Tensor::new([0i64, 5, 2, 1])?;
    let ce = |opts: &F::CrossEntropyOptions| F::cross_entropy(&x, &t, opts);
    assert_eq!(
        nodes(&ce(&Default::default())?, 3),
        ["NllLossBackward0", "LogSoftmaxBackward0", "AccumulateGrad"]
    );
    let smooth = ce(&F::CrossEntropyOptions::new().label_smoothing(0.1))?;
    assert_eq!(
        nodes(&smooth, 8),
        unify(&[
            "AddBackward0",
            "MulBackward1",
            "MulBackward1",
            "NllLossBackward0",
            "DivBackward0",
            "LogSoftmaxBackward0",
            "SumBackward0",
            "AccumulateGrad"
        ])
    );
    let probs = Tensor::ones([4, 6])?.div(6.0)?;
    assert_eq!(
        nodes(&F::cross_entropy(&x, &probs, &Default::default())?, 5),
        unify(&[
            "DivBackward1",
            "NegBackward0",
            "SumBackward0",
            "MulBackward0",
            "LogSoftmaxBackward0"
        ])
    );
    let xk = leaf(&[4, 6, 2], 7);
    let tk = Tensor::zeros_dtype([4, 2], DType::I64)?;
    assert_eq!(
        nodes(&F::cross_entropy(&xk, &tk, &Default::default())?, 3),
        ["NllLoss2DBackward0", "ViewBackward0", "LogSoftmaxBackward0"]
    );
    let x4 = leaf(&[2, 3, 2, 2], 8);
    let t4 = Tensor::zeros_dtype([2, 2, 2], DType::I64)?;
    assert_eq!(
        first(&F::nll_loss(&x4, &t4, &Default::default())?),
        "NllLoss2DBackward0"
    );
    let y = leaf(&[4, 6], 9);
    for (l, want) in [
        (F::mse_loss(&x, &y, Reduction::Mean)?, "MseLossBackward0"),
        (F::l1_loss(&x, &y, Reduction::Mean)?, "MeanBackward0"),
        (F::l1_loss(&x, &y, Reduction::None)?, "AbsBackward0"),
        (
            F::smooth_l1_loss(&x, &y, Reduction::Mean, 1.0)?,
            "SmoothL1LossBackward0",
        ),
        (F::smooth_l1_loss(&x, &y, Reduction::Mean, 0.0)?, "MeanBackward0"),
        (F::huber_loss(&x, &y, Reduction::Sum, 1.0)?, "HuberLossBackward0"),
        (
            F::binary_cross_entropy(&x.sigmoid()?, &y.sigmoid()?, None, Reduction::Mean)?,
            "BinaryCrossEntropyBackward0",
        ),
        (
            F::binary_cross_entropy_with_logits(&x, &y.sigmoid()?, &Default::default())?,
            "BinaryCrossEntropyWithLogitsBackward0",
        ),
        (
            F::kl_div(&x, &y.softmax(1)?, F::KlDivReduction::Mean, false)?,
            "MeanBackward0",
        ),
    ] {
        assert_eq!(first(&l), want);
    }
    Ok(())
}

#[test]
fn second_derivatives_are_recorded() -> Result<()> {
    use ferrotorch::autograd::{GradOptions, grad};
    let x = leaf(&[3, 5], 11);
    let w = leaf(&[5], 12);
    let y = F::layer_norm(&x, &[5], Some(&w), None, 1e-5)?.pow(3)?.sum()?;
    let g = grad(&[&y], &[&x], GradOptions::create_graph())?;
    let gx = g[0].clone();
    assert!(gx.requires_grad() && gx.grad_fn().is_some());
    let t = Tensor::new([0i64, 4, 2])?;
    let ce = F::cross_entropy(&x, &t, &Default::default())?;
    let g = grad(&[&ce], &[&x], GradOptions::create_graph())?[0].clone();
    // d/dx of log_softmax's derivative: its fused operator's own node.
    assert_eq!(nodes(&g, 1), ["LogSoftmaxBackwardDataBackward0"]);
    let gg = grad(&[&g.pow(2)?.sum()?], &[&x], Default::default())?[0].clone();
    assert_eq!(gg.shape(), [3, 5]);
    Ok(())
}

#[test]
fn errors_carry_pytorchs_messages() -> Result<()> {
    let x = leaf(&[3, 5], 20);
    let ce = |t: &Tensor| F::cross_entropy(&x, t, &Default::default());
    assert!(
        err(ce(&Tensor::new([0i64, 1, 2, 3])?))
            .contains("Expected input batch_size (3) to match target batch_size (4).")
    );
    let e = err(ce(&Tensor::new([0i64, 7, 2])?));
    assert!(e.contains("Target 7 is out of bounds.") && e.contains("[0, 5)"), "{e}");
    assert!(err(ce(&Tensor::new([0i64, -1, 2])?)).contains("Target -1 is out of bounds."));
    assert!(err(ce(&Tensor::new([0i32, 1, 2])?)).contains("expected target dtype to be Long or Byte, but got Int"));
    assert!(err(ce(&Tensor::new([0.0f32, 1.0, 2.0])?)).contains("but got Float"));
    let smooth = F::CrossEntropyOptions::new().label_smoothing(1.5);
    assert!(
        err(F::cross_entropy(&x, &Tensor::new([0i64, 1, 2])?, &smooth))
            .contains("label_smoothing must be between 0.0 and 1.0. Got: 1.5")
    );
    let ignore = F::CrossEntropyOptions::new().ignore_index(1);
    assert!(
        err(F::cross_entropy(&x, &Tensor::ones([3, 5])?, &ignore))
            .contains("ignore_index is not supported for floating point target")
    );
    assert!(
        Reduction::parse("avg")
            .unwrap_err()
            .to_string()
            .contains("avg is not a valid value for reduction")
    );
    let e = leaf(&[10, 3], 21);
    let emb = |i: Tensor| F::embedding(&i, &e, &Default::default());
    assert!(err(emb(Tensor::new([1i64, 10])?)).contains("index out of range in self"));
    assert!(err(emb(Tensor::new([-1i64])?)).contains("index out of range in self"));
    let pad = F::EmbeddingOptions::new().padding_idx(10);
    assert!(err(F::embedding(&Tensor::new([1i64])?, &e, &pad)).contains("Padding_idx must be within num_embeddings"));
    assert!(
        err(F::layer_norm(&x, &[4], None, None, 1e-5))
            .contains("Given normalized_shape=[4], expected input with shape [*, 4], but got input of size[3, 5]")
    );
    let g6 = leaf(&[2, 6, 3], 22);
    assert!(
        err(F::group_norm(&g6, 4, None, None, 1e-5))
            .contains("Expected number of channels in input to be divisible by num_groups")
    );
    let train = F::BatchNormOptions::new().training(true);
    let (rm, rv) = (Tensor::zeros([4])?, Tensor::ones([4])?);
    assert!(
        err(F::batch_norm(
            &leaf(&[1, 4], 23),
            Some(&rm),
            Some(&rv),
            None,
            None,
            &train
        ))
        .contains("Expected more than 1 value per channel when training, got input size [1, 4]")
    );
    assert!(
        err(F::batch_norm(
            &leaf(&[3, 4], 24),
            None,
            None,
            None,
            None,
            &Default::default()
        ))
        .contains("running_mean must be defined in evaluation mode")
    );
    assert!(
        err(F::batch_norm(
            &leaf(&[3, 4], 24),
            Some(&Tensor::zeros([3])?),
            Some(&rv),
            None,
            None,
            &train
        ))
        .contains("running_mean should contain 4 elements not 3")
    );
    assert!(err(F::hardtanh(&x, 1.0, -1.0)).contains("min_val cannot be greater than max_val"));
    assert!(err(F::leaky_relu(&Tensor::new([1i64])?, 0.1)).contains("floating-point"));
    assert!(
        err(F::binary_cross_entropy(
            &Tensor::new([1.5f32])?,
            &Tensor::new([1.0f32])?,
            None,
            Reduction::Mean
        ))
        .contains("all elements of input should be between 0 and 1")
    );
    assert!(
        err(F::smooth_l1_loss(&x, &x, Reduction::Mean, -1.0)).contains("does not support negative values for beta")
    );
    assert!(
        err(F::huber_loss(&x, &x, Reduction::Mean, 0.0)).contains("does not support non-positive values for delta")
    );
    Ok(())
}

/// f32 layer norm of rows with a large mean rounds as PyTorch's CPU kernel
/// (its Welford `RowwiseMoments` in f32): the worst error against the f64
/// result is PyTorch's on the same input (`torch.manual_seed(5);
/// x = torch.randn(8, 96) + 3000`: 3.9948423571045666e-4).
#[test]
fn layer_norm_rounds_as_pytorch_for_a_large_mean() -> Result<()> {
    let g = ferrotorch::Generator::new(5);
    let x = TensorOptions::new().generator(&g).randn([8, 96])?.add(3000.0)?;
    let got = x
        .layer_norm([96], None, None, 1e-5)?
        .to_dtype(DType::F64)?
        .to_vec::<f64>()?;
    let want = x
        .to_dtype(DType::F64)?
        .layer_norm([96], None, None, 1e-5)?
        .to_vec::<f64>()?;
    let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!((worst - 3.9948423571045666e-4).abs() < 1e-12, "worst error {worst}");
    Ok(())
}

#[test]
fn batch_norm_updates_running_statistics_in_place() -> Result<()> {
    let x = Tensor::new([[1.0f32, 2.0], [3.0, 6.0], [5.0, 10.0]])?;
    let (rm, rv) = (Tensor::zeros([2])?, Tensor::ones([2])?);
    let v0 = rm.version();
    let train = F::BatchNormOptions::new().training(true).momentum(0.5);
    F::batch_norm(&x, Some(&rm), Some(&rv), None, None, &train)?;
    assert!(rm.version() > v0);
    // mean (3, 6), unbiased variance (4, 16).
    assert_eq!(rm.to_vec::<f32>()?, [1.5, 3.0]);
    assert_eq!(rv.to_vec::<f32>()?, [2.5, 8.5]);
    // Non-contiguous statistics are updated too.
    let stats = Tensor::zeros([2, 2])?;
    let (rm2, rv2) = (stats.select(1, 0)?, Tensor::ones([2, 2])?.select(1, 1)?);
    F::batch_norm(&x, Some(&rm2), Some(&rv2), None, None, &train)?;
    assert_eq!(stats.to_vec::<f32>()?, [1.5, 0.0, 3.0, 0.0]);
    // Evaluation leaves them alone.
    F::batch_norm(&x, Some(&rm), Some(&rv), None, None, &Default::default())?;
    assert_eq!(rm.to_vec::<f32>()?, [1.5, 3.0]);
    Ok(())
}

#[test]
fn embedding_max_norm_renormalises_the_weight_in_place() -> Result<()> {
    let w = Tensor::new([[3.0f32, 4.0], [0.3, 0.4], [6.0, 8.0]])?.requires_grad_(true)?;
    let opts = F::EmbeddingOptions::new().max_norm(1.0);
    let y = F::embedding(&Tensor::new([0i64, 1, 0])?, &w, &opts)?;
    let got = w.detach().to_vec::<f32>()?;
    // Row 0 scaled to norm 1 (times 5 / (5 + 1e-7)), row 1 kept, row 2 not named.
    assert!((got[0] - 0.6).abs() < 1e-6 && (got[1] - 0.8).abs() < 1e-6);
    assert_eq!(&got[2..], [0.3, 0.4, 6.0, 8.0]);
    assert_eq!(y.shape(), [3, 2]);
    y.sum()?.backward()?;
    assert_eq!(w.grad()?.to_vec::<f32>()?, [2.0, 2.0, 1.0, 1.0, 0.0, 0.0]);
    Ok(())
}

#[test]
fn meta_device_runs_the_shape_rules() -> Result<()> {
    let m = TensorOptions::new().device(Device::Meta);
    let x = m.clone().zeros([4, 3, 5])?;
    let c = m.clone().zeros([3])?;
    assert_eq!(F::layer_norm(&x, &[5], None, None, 1e-5)?.shape(), [4, 3, 5]);
    let (y, mean, rstd) = x.native_layer_norm([3, 5], None, None, 1e-5)?;
    assert_eq!(
        (y.shape(), mean.shape(), rstd.shape()),
        ([4, 3, 5].as_slice(), [4, 1, 1].as_slice(), [4, 1, 1].as_slice())
    );
    assert_eq!(x.native_group_norm(3, Some(&c), Some(&c), 1e-5)?.1.shape(), [4, 3]);
    let (rm, rv) = (m.clone().zeros([3])?, m.clone().ones([3])?);
    let train = F::BatchNormOptions::new().training(true);
    assert_eq!(
        F::batch_norm(&x, Some(&rm), Some(&rv), None, None, &train)?.device(),
        Device::Meta
    );
    let t = m.clone().dtype(DType::I64).zeros([4, 5])?;
    let ce = F::cross_entropy(&x, &t, &Default::default())?;
    assert_eq!((ce.shape(), ce.device()), ([].as_slice(), Device::Meta));
    let none = F::CrossEntropyOptions::new().reduction(Reduction::None);
    assert_eq!(F::cross_entropy(&x, &t, &none)?.shape(), [4, 5]);
    assert_eq!(F::mse_loss(&x, &x, Reduction::None)?.shape(), [4, 3, 5]);
    assert_eq!(
        F::binary_cross_entropy(&x, &x, None, Reduction::Mean)?.shape(),
        [0usize; 0]
    );
    assert_eq!(F::leaky_relu(&x, 0.1)?.device(), Device::Meta);
    let w = m.clone().zeros([10, 4])?;
    let idx = m.dtype(DType::I64).zeros([2, 3])?;
    assert_eq!(F::embedding(&idx, &w, &Default::default())?.shape(), [2, 3, 4]);
    Ok(())
}

#[test]
fn half_precision_computes_in_f32() -> Result<()> {
    for dt in [DType::F16, DType::BF16] {
        let x = Tensor::new([[1.0f32, 2.0, 4.0], [-1.0, 0.5, 3.0]])?;
        let want = x.layer_norm([3], None, None, 1e-5)?.to_vec::<f32>()?;
        let h = x.to_dtype(dt)?.requires_grad_(true)?;
        let (y, mean, _) = h.native_layer_norm([3], None, None, 1e-5)?;
        assert_eq!((y.dtype(), mean.dtype()), (dt, DType::F32));
        for (a, b) in y.to_dtype(DType::F32)?.to_vec::<f32>()?.iter().zip(&want) {
            assert!((a - b).abs() < 2e-2, "{dt}: {a} vs {b}");
        }
        y.sum()?.backward()?;
        assert_eq!(h.grad()?.dtype(), dt);
        let t = Tensor::new([2i64, 0])?;
        let l = h.cross_entropy(&t, None, Reduction::Mean, -100, 0.0)?;
        assert_eq!(l.dtype(), dt);
    }
    Ok(())
}

#[test]
fn functional_defaults_are_pytorchs() {
    // The options' fields are set through their builders; their Debug
    // form shows the defaults.
    let has = |o: String, parts: &[&str]| {
        for p in parts {
            assert!(o.contains(p), "{o} lacks {p}");
        }
    };
    has(
        format!("{:?}", F::CrossEntropyOptions::new()),
        &[
            "weight: None",
            "ignore_index: -100",
            "reduction: Mean",
            "label_smoothing: 0.0",
        ],
    );
    has(
        format!("{:?}", F::BatchNormOptions::new()),
        &["training: false", "momentum: 0.1", "eps: 1e-5"],
    );
    has(
        format!("{:?}", F::EmbeddingOptions::new()),
        &[
            "padding_idx: None",
            "max_norm: None",
            "norm_type: 2.0",
            "scale_grad_by_freq: false",
        ],
    );
    has(format!("{:?}", F::NllLossOptions::new()), &["ignore_index: -100"]);
    has(format!("{:?}", F::BceWithLogitsOptions::new()), &["reduction: Mean"]);
    assert_eq!(F::KlDivReduction::default(), F::KlDivReduction::Mean);
    assert_eq!(Reduction::default().as_str(), "mean");
}

/// Checks and rounding the differential fuzzer's nn group found apart from
/// PyTorch 2.15: mse_loss's derivative scaled before the upstream gradient
/// (no overflow for a difference of 3e38), group_norm of groups of one
/// value refused, adaptive_avg_pool2d's kernel only for 3-d and 4-d inputs.
#[test]
fn fuzzer_found_nn_differences() -> Result<()> {
    // mse_loss([3e38, 1, 2, .5], [-1, 0, 0, 0]).backward(): x.grad[0] = 1.5e38.
    let x = Tensor::new([3e38f32, 1.0, 2.0, 0.5])?.requires_grad_(true)?;
    F::mse_loss(&x, &Tensor::new([-1.0f32, 0.0, 0.0, 0.0])?, Reduction::Mean)?.backward()?;
    assert_eq!(x.grad()?.to_vec::<f32>()?, [1.5e38, 0.5, 1.0, 0.25]);
    for (shape, groups, size) in [
        (&[1usize, 1][..], 1, "[1, 1]"),
        (&[1, 4], 4, "[1, 4]"),
        (&[1, 2, 1], 2, "[1, 2, 1]"),
    ] {
        let e = F::group_norm(&Tensor::ones(shape)?, groups, None, None, 1e-5)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "Expected more than 1 value per channel when training, got input size {size}"
            )),
            "{e}"
        );
    }
    assert!(F::group_norm(&Tensor::ones([2, 2])?, 2, None, None, 1e-5).is_ok());
    assert_eq!(F::adaptive_avg_pool2d(&Tensor::ones([3, 4])?, 1)?.shape(), [1, 1]);
    let e = F::adaptive_avg_pool2d(&Tensor::ones([3, 4])?, 2)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [3, 4]"),
        "{e}"
    );
    // sdpa's safe softmax on every math path: a row of -inf scores (here
    // from an infinite query) attends to nothing.
    let close = |t: &Tensor, want: &[f32]| -> Result<()> {
        let got = t.to_vec::<f32>()?;
        for (a, b) in got.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{got:?} vs {want:?}");
        }
        Ok(())
    };
    let q = Tensor::new([[f32::NEG_INFINITY, 1.0], [1.0, 1.0]])?;
    let k = Tensor::new([[1.0f32, 0.0], [2.0, 0.0]])?;
    let v = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]])?;
    let o = F::scaled_dot_product_attention(&q, &k, &v, &F::SdpaOptions::new())?;
    close(&o, &[0.0, 0.0, 2.339_522_8, 3.339_523])?;
    // ...and its derivative through a fully masked row is finite (PyTorch's
    // values for this mask).
    let q = Tensor::new([[1.0f32, 2.0], [0.5, -1.0]])?.requires_grad_(true)?;
    let k = Tensor::new([[1.0f32, 0.0], [2.0, 1.0]])?.requires_grad_(true)?;
    let v = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]])?.requires_grad_(true)?;
    let m = Tensor::new([[false, false], [true, true]])?;
    let o = F::scaled_dot_product_attention(&q, &k, &v, &F::SdpaOptions::new().attn_mask(&m))?;
    o.sum()?.backward()?;
    close(&o, &[0.0, 0.0, 1.825_041_9, 2.825_041_8])?;
    close(&q.grad()?, &[0.0, 0.0, 0.685_461_94, 0.685_462])?;
    close(&k.grad()?, &[-0.342_731, 0.685_462_06, 0.342_731, -0.685_462])?;
    close(&v.grad()?, &[0.587_479, 0.587_479, 0.412_521, 0.412_521])?;
    // Mixed precision: a bf16 input with f32 parameters and running
    // statistics is normalised in f32 and rounded once (PyTorch's CPU
    // mixed type); the running statistics stay f32.
    let x = Tensor::new([[0.5f32, -1.25, 2.0], [1.5, 0.25, -0.75]])?;
    let xb = x.to_dtype(DType::BF16)?;
    let (w, b) = (Tensor::new([1.5f32, -0.5, 2.0])?, Tensor::new([0.1f32, 0.2, -0.3])?);
    let want = xb
        .to_dtype(DType::F32)?
        .layer_norm([3], Some(&w), Some(&b), 1e-5)?
        .to_dtype(DType::BF16)?;
    let got = F::layer_norm(&xb, &[3], Some(&w), Some(&b), 1e-5)?;
    assert_eq!(
        (got.dtype(), got.to_vec::<f32>()?),
        (DType::BF16, want.to_vec::<f32>()?)
    );
    let (rm, rv) = (Tensor::zeros([3])?, Tensor::ones([3])?);
    let bn = F::batch_norm(
        &xb,
        Some(&rm),
        Some(&rv),
        Some(&w),
        Some(&b),
        &F::BatchNormOptions::new().training(true),
    )?;
    assert_eq!((bn.dtype(), rm.dtype()), (DType::BF16, DType::F32));
    assert!(rm.to_vec::<f32>()?.iter().any(|&m| m != 0.0));
    let gn = F::group_norm(&xb.reshape([2, 3, 1])?, 3, Some(&w), Some(&b), 1e-5)?;
    assert_eq!(gn.dtype(), DType::BF16);
    Ok(())
}

/// The losses' dtype rules against PyTorch (`nn_data/loss_dtypes.json`,
/// `tests/gen_loss_dtypes.py`): for every pair of input / target dtype
/// (f32, f64, bf16, i64, bool), a full or 0-d target and each reduction,
/// the result's dtype and values where PyTorch computes the loss, and an
/// error where it refuses (with its message where the loss itself
/// decides: "Found dtype ...", "result type ... can't be cast ...").
/// `broadcast_tensors` comes first (a 0-d f64 target makes an f64 mse
/// loss), huber writes into its input's dtype, bce_with_logits into its
/// target's, l1 works on integers.
#[test]
fn loss_dtype_rules_match_pytorch() -> Result<()> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/nn_data/loss_dtypes.json"))
        .expect("tests/nn_data/loss_dtypes.json");
    let data: serde_json::Value = serde_json::from_str(&text).expect("json");
    let cases = data["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 1050);
    let dtype = |v: &serde_json::Value| DType::from_name(v.as_str().expect("dtype")).expect("known dtype");
    let mut checked = 0;
    for c in cases {
        let xv: Vec<f64> = c["xv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let x = Tensor::from_vec(xv, [2])?.to_dtype(dtype(&c["x"]))?;
        let t = match &c["tv"] {
            serde_json::Value::Array(a) => {
                Tensor::from_vec(a.iter().map(|v| v.as_f64().unwrap()).collect::<Vec<_>>(), [2])?
            }
            v => Tensor::from_vec(vec![v.as_f64().unwrap()], ())?,
        }
        .to_dtype(dtype(&c["t"]))?;
        let red = Reduction::parse(c["reduction"].as_str().unwrap())?;
        let loss = c["loss"].as_str().unwrap();
        let got = match loss {
            "mse" => F::mse_loss(&x, &t, red),
            "l1" => F::l1_loss(&x, &t, red),
            "smooth_l1" => F::smooth_l1_loss(&x, &t, red, 1.0),
            "smooth_l1_beta0" => F::smooth_l1_loss(&x, &t, red, 0.0),
            "huber" => F::huber_loss(&x, &t, red, 1.0),
            "bce" => F::binary_cross_entropy(&x, &t, None, red),
            "bce_logits" => F::binary_cross_entropy_with_logits(&x, &t, &F::BceWithLogitsOptions::new().reduction(red)),
            other => panic!("unknown loss {other}"),
        };
        let what = format!("{c}");
        match (&c["error"], got) {
            (serde_json::Value::String(msg), Err(e)) => {
                for key in ["Found dtype", "can't be cast to the desired output type"] {
                    if msg.contains(key) {
                        assert!(e.to_string().contains(msg.as_str()), "{what}: ours {e}");
                    }
                }
            }
            (serde_json::Value::String(msg), Ok(y)) => panic!("{what}: PyTorch refuses ({msg}), ours gives {y:?}"),
            (_, Err(e)) => panic!("{what}: PyTorch computes it, ours: {e}"),
            (_, Ok(y)) => {
                assert_eq!(y.dtype(), dtype(&c["dtype"]), "{what}");
                let want: Vec<f64> = c["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect();
                let ours = y.to_dtype(DType::F64)?.reshape([-1])?.to_vec::<f64>()?;
                assert_eq!(ours.len(), want.len(), "{what}");
                let tol = if y.dtype() == DType::BF16 { 1e-2 } else { 1e-6 };
                for (a, b) in ours.iter().zip(&want) {
                    assert!((a - b).abs() <= tol * b.abs().max(1.0), "{what}: ours {ours:?}");
                }
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 1050);
    Ok(())
}

/// `F.scaled_dot_product_attention` with an empty query or key sequence is
/// PyTorch's `zeros([..., L, Ev]) + (q.sum() + k.sum() + v.sum()) * 0`
/// whatever the mask, dropout, scale or rank (PyTorch 2.15's graph:
/// `AddBackward0` over `MulBackward1`, here over `MulBackward0`, the
/// core having no `mul.Scalar`): zero gradients, batch dims
/// broadcast, and an infinite input makes every output NaN.
#[test]
fn sdpa_of_an_empty_sequence_is_zeros_plus_the_inputs_sums() -> Result<()> {
    let o = TensorOptions::new();
    let leaf = |s: &[usize]| o.randn(s).unwrap().requires_grad_(true).unwrap();
    let mask = TensorOptions::new().dtype(DType::Bool).ones([3, 0])?;
    let opts = [
        F::SdpaOptions::new(),
        F::SdpaOptions::new().dropout_p(0.5),
        F::SdpaOptions::new().attn_mask(&mask),
        F::SdpaOptions::new().is_causal(true),
        F::SdpaOptions::new().scale(0.3),
    ];
    // Query, key, value and output shapes.
    type Shapes = ([usize; 4], [usize; 4], [usize; 4], [usize; 4]);
    let shapes: [Shapes; 3] = [
        ([2, 2, 3, 4], [2, 2, 0, 4], [2, 2, 0, 5], [2, 2, 3, 5]),
        ([2, 2, 0, 4], [2, 2, 3, 4], [2, 2, 3, 5], [2, 2, 0, 5]),
        ([2, 2, 3, 4], [1, 2, 0, 4], [2, 1, 0, 5], [2, 2, 3, 5]),
    ];
    for (qs, ks, vs, want) in shapes {
        for opt in &opts {
            let (q, k, v) = (leaf(&qs), leaf(&ks), leaf(&vs));
            let out = F::scaled_dot_product_attention(&q, &k, &v, opt)?;
            assert_eq!(out.shape(), &want, "{qs:?} {ks:?} {vs:?} {opt:?}");
            assert_eq!(nodes(&out, 1), ["AddBackward0"]);
            assert!(out.to_vec::<f32>()?.iter().all(|x| *x == 0.0));
            out.sum()?.backward()?;
            for t in [&q, &k, &v] {
                assert!(t.grad()?.to_vec::<f32>()?.iter().all(|x| *x == 0.0));
            }
        }
    }
    // Unbatched and 3-d inputs alike.
    let (q, k, v) = (o.randn([3, 4])?, o.randn([0, 4])?, o.randn([0, 5])?);
    let out = F::scaled_dot_product_attention(&q, &k, &v, &F::SdpaOptions::new())?;
    assert_eq!(out.shape(), &[3, 5]);
    // An infinite query element reaches every output as inf * 0 = NaN.
    let q = Tensor::new([[f32::INFINITY, 1.0], [1.0, 1.0]])?;
    let (k, v) = (o.zeros([0, 2])?, o.zeros([0, 3])?);
    let out = F::scaled_dot_product_attention(&q, &k, &v, &F::SdpaOptions::new())?;
    assert_eq!(out.shape(), &[2, 3]);
    assert!(out.to_vec::<f32>()?.iter().all(|x| x.is_nan()));
    Ok(())
}
