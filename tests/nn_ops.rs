//! The convolution and pooling operators beyond their values (which
//! `tests/oracle.rs` checks against `tests/oracle/conv_pool.json` and
//! `tests/oracle_extra/nn.json`): PyTorch's error messages for every error
//! case of `nn.json`, PyTorch's graph node names (first and second order),
//! the meta device, unbatched inputs, and gradients of empty batches.

#[path = "support/oracle_json.rs"]
mod oracle_json;
#[path = "support/oracle_nn.rs"]
mod oracle_nn;

use ferrotorch::autograd::{GradOptions, grad};
use ferrotorch::{
    AvgPoolOptions, ConvOptions, ConvTransposeOptions, DType, Device, MaxPoolOptions, Padding, Result, Tensor,
    TensorOptions,
};
use serde_json::Value;

/// Lower case, whitespace collapsed: PyTorch's messages up to spacing and capitals.
fn normalised(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Every error case of `nn.json` fails with PyTorch's message.
#[test]
fn errors_carry_pytorchs_messages() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle_extra/nn.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (mut checked, mut wrong) = (0, Vec::new());
    for case in doc["cases"].as_array().unwrap() {
        if case.get("kind").and_then(Value::as_str) != Some("error") {
            continue;
        }
        let name = case["name"].as_str().unwrap();
        let inputs: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(oracle_nn::decode)
            .collect();
        let op = case["op"].as_str().unwrap();
        let short = op.rsplit('.').next().unwrap();
        let want = case["error"].as_str().unwrap();
        match oracle_nn::run_op(short, case, &inputs) {
            None => wrong.push(format!("{name}: op {op} not run")),
            Some(Ok(_)) => wrong.push(format!("{name}: succeeded; PyTorch raises \"{want}\"")),
            Some(Err(e)) => {
                let got = e.to_string();
                if !normalised(&got).contains(&normalised(want)) {
                    wrong.push(format!("{name}: \"{got}\" lacks PyTorch's \"{want}\""));
                }
            }
        }
        checked += 1;
    }
    assert!(checked > 60, "only {checked} error cases");
    assert!(wrong.is_empty(), "{} of {checked}:\n{}", wrong.len(), wrong.join("\n"));
}

fn node(t: &Tensor) -> String {
    t.grad_fn().map(|n| n.name()).unwrap_or_default()
}

/// The first derivative of `y` with respect to `x` (with a graph) and its node.
fn first(y: &Tensor, x: &Tensor) -> Result<Tensor> {
    let g = grad(&[&y.sum()?], &[x], GradOptions::create_graph())?;
    Ok(g[0].clone())
}

#[test]
fn nodes_have_pytorchs_names() -> Result<()> {
    let x = Tensor::randn([2, 3, 6, 6])?.requires_grad_(true)?;
    let w = Tensor::randn([4, 3, 3, 3])?.requires_grad_(true)?;
    let y = x.conv2d(&w, None, ConvOptions::new().padding(1))?;
    assert_eq!(node(&y), "ConvolutionBackward0");
    assert_eq!(node(&first(&y, &w)?), "ConvolutionBackwardBackward0");
    let wt = Tensor::randn([3, 2, 3, 3])?.requires_grad_(true)?;
    assert_eq!(
        node(&x.conv_transpose2d(&wt, None, ConvTransposeOptions::new())?),
        "ConvolutionBackward0"
    );
    let cases: [(Tensor, &str, &str); 4] = [
        (
            x.max_pool2d(2)?,
            "MaxPool2DWithIndicesBackward0",
            "MaxPool2DWithIndicesBackwardBackward0",
        ),
        (x.avg_pool2d(2)?, "AvgPool2DBackward0", "AvgPool2DBackwardBackward0"),
        (
            x.adaptive_avg_pool2d([2, 3])?,
            "AdaptiveAvgPool2DBackward0",
            "AdaptiveAvgPool2DBackwardBackward0",
        ),
        (
            x.adaptive_max_pool2d([2, 3])?.0,
            "AdaptiveMaxPool2DBackward0",
            "AdaptiveMaxPool2DBackwardBackward0",
        ),
    ];
    // As PyTorch, a 1x1 adaptive average is a mean.
    assert_eq!(node(&x.adaptive_avg_pool2d(1)?), "MeanBackward1");
    for (y, n1, n2) in cases {
        assert_eq!(node(&y), n1);
        assert_eq!(node(&first(&y, &x)?), n2, "{n1}");
    }
    // The 1-d pools are 2-d pools of a height-1 view.
    let x1 = Tensor::randn([2, 3, 8])?.requires_grad_(true)?;
    let y = x1.max_pool1d(2)?;
    assert_eq!(node(&y), "SqueezeBackward1");
    assert_eq!(y.grad_fn().unwrap().next_edges().len(), 1);
    Ok(())
}

#[test]
fn the_meta_device_runs_the_shape_rules() -> Result<()> {
    let meta = TensorOptions::new().device(Device::Meta);
    let x = meta.clone().zeros([8, 6, 28, 27])?;
    let w = meta.clone().zeros([12, 3, 3, 5])?;
    let b = meta.clone().zeros([12])?;
    let y = x.conv2d(&w, Some(&b), ConvOptions::new().stride(2).padding((1, 2)).groups(2))?;
    assert_eq!((y.shape(), y.device()), (&[8usize, 12, 14, 14][..], Device::Meta));
    let same = x.conv2d(
        &meta.clone().zeros([4, 6, 2, 4])?,
        None,
        ConvOptions::new().padding(Padding::Same),
    )?;
    assert_eq!(same.shape(), &[8, 4, 28, 27]);
    let wt = meta.clone().zeros([6, 2, 3, 3])?;
    let t = x.conv_transpose2d(
        &wt,
        None,
        ConvTransposeOptions::new().stride(2).output_padding(1).groups(3),
    )?;
    assert_eq!(t.shape(), &[8, 6, 58, 56]);
    let c1 = meta
        .clone()
        .zeros([2, 4, 10])?
        .conv1d(&meta.clone().zeros([5, 4, 3])?, None, ConvOptions::new())?;
    assert_eq!(c1.shape(), &[2, 5, 8]);
    let (v, i) = x.max_pool2d_with_indices(MaxPoolOptions::new(3).stride(2).padding(1).ceil_mode(true))?;
    assert_eq!((v.shape(), i.dtype()), (&[8usize, 6, 15, 14][..], DType::I64));
    assert_eq!(x.avg_pool2d(AvgPoolOptions::new(2))?.shape(), &[8, 6, 14, 13]);
    assert_eq!(x.adaptive_avg_pool2d([5, 7])?.shape(), &[8, 6, 5, 7]);
    assert_eq!(x.adaptive_max_pool2d(4)?.1.shape(), &[8, 6, 4, 4]);
    // Errors come from the shape rules, on the meta device too.
    let e = x
        .conv2d(&meta.clone().zeros([4, 5, 3, 3])?, None, ConvOptions::new())
        .unwrap_err();
    assert!(
        e.to_string().contains("to have 5 channels, but got 6 channels instead"),
        "{e}"
    );
    assert!(x.max_pool2d(MaxPoolOptions::new(2).padding(2)).is_err());
    Ok(())
}

#[test]
fn unbatched_inputs_give_the_batched_result_without_the_batch_dim() -> Result<()> {
    let x = Tensor::randn([3, 7, 6])?;
    let w = Tensor::randn([4, 3, 3, 2])?;
    let b = Tensor::randn([4])?;
    let o = ConvOptions::new().padding(1).stride((2, 1));
    let un = x.conv2d(&w, Some(&b), o.clone())?;
    let ba = x.unsqueeze(0)?.conv2d(&w, Some(&b), o)?.squeeze_dim(0)?;
    assert_eq!(un.to_vec::<f32>()?, ba.to_vec::<f32>()?);
    assert_eq!(x.max_pool2d(2)?.shape(), &[3, 3, 3]);
    assert_eq!(x.avg_pool1d(2)?.shape(), &[3, 7, 3]);
    Ok(())
}

#[test]
fn empty_batches_have_empty_outputs_and_zero_weight_gradients() -> Result<()> {
    let x = Tensor::zeros([0, 3, 5, 5])?.requires_grad_(true)?;
    let w = Tensor::randn([2, 3, 3, 3])?.requires_grad_(true)?;
    let b = Tensor::randn([2])?.requires_grad_(true)?;
    let y = x.conv2d(&w, Some(&b), ConvOptions::new())?;
    assert_eq!(y.shape(), &[0, 2, 3, 3]);
    y.sum()?.backward()?;
    assert_eq!(w.grad()?.to_vec::<f32>()?, vec![0.0; 54]);
    assert_eq!(b.grad()?.to_vec::<f32>()?, vec![0.0; 2]);
    assert_eq!(x.grad()?.shape(), &[0, 3, 5, 5]);
    Ok(())
}

/// A 3x3, padding 1 convolution and its input and weight gradients as
/// direct sums in f64: `(y, gx, gw)` for `x` `[n, c, h, w]`, `wt` `[o, c,
/// 3, 3]` and the output gradient `gy`.
fn direct_conv(x: &[f64], wt: &[f64], gy: &[f64], [n, c, h, w, o]: [usize; 5]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut y, mut gx, mut gw) = (vec![0.0; n * o * h * w], vec![0.0; x.len()], vec![0.0; wt.len()]);
    for b in 0..n {
        for oc in 0..o {
            for r in 0..h {
                for q in 0..w {
                    let yi = ((b * o + oc) * h + r) * w + q;
                    for ci in 0..c {
                        for i in 0..3 {
                            for j in 0..3 {
                                let (ih, iw) = (r + i, q + j);
                                if ih < 1 || iw < 1 || ih > h || iw > w {
                                    continue;
                                }
                                let xi = ((b * c + ci) * h + ih - 1) * w + iw - 1;
                                let wi = ((oc * c + ci) * 3 + i) * 3 + j;
                                y[yi] += x[xi] * wt[wi];
                                gx[xi] += gy[yi] * wt[wi];
                                gw[wi] += gy[yi] * x[xi];
                            }
                        }
                    }
                }
            }
        }
    }
    (y, gx, gw)
}

/// "Same" convolutions through each of the kernels' paths (fewer input
/// than output channels: the input gradient by col2im; more: as the flipped
/// convolution; one channel: the first layer of a CNN; outputs that fill
/// the GEMM's panels badly: several samples per product, the last group
/// short), with and without a bias, in f32 and f64, against direct sums.
#[test]
fn same_convolutions_match_direct_sums() -> Result<()> {
    for ([n, c, h, w, o], with_bias) in [
        ([3, 16, 7, 9, 24], false),
        ([3, 24, 7, 9, 16], true),
        ([4, 1, 12, 10, 8], false),
        ([2, 32, 14, 14, 64], true),
        ([10, 8, 7, 7, 16], true),
        ([9, 32, 14, 14, 64], false),
    ] {
        let x = Tensor::randn([n, c, h, w])?.to_dtype(DType::F64)?;
        let wt = Tensor::randn([o, c, 3, 3])?.to_dtype(DType::F64)?;
        let b = Tensor::randn([o])?.to_dtype(DType::F64)?;
        let gy = Tensor::randn([n, o, h, w])?.to_dtype(DType::F64)?;
        let mut want = direct_conv(&x.to_vec()?, &wt.to_vec()?, &gy.to_vec()?, [n, c, h, w, o]);
        let (bv, gyv) = (b.to_vec::<f64>()?, gy.to_vec::<f64>()?);
        let mut gb = vec![0.0; o];
        for (i, (y, g)) in want.0.iter_mut().zip(&gyv).enumerate() {
            let oc = i / (h * w) % o;
            if with_bias {
                *y += bv[oc];
            }
            gb[oc] += g;
        }
        for (dt, tol) in [(DType::F64, 1e-10), (DType::F32, 1e-4)] {
            let x = x.to_dtype(dt)?.detach().requires_grad_(true)?;
            let wt = wt.to_dtype(dt)?.detach().requires_grad_(true)?;
            let b = b.to_dtype(dt)?.detach().requires_grad_(true)?;
            let y = x.conv2d(&wt, with_bias.then_some(&b), ConvOptions::new().padding(1))?;
            let inputs: Vec<&Tensor> = if with_bias { vec![&x, &wt, &b] } else { vec![&x, &wt] };
            let gs = grad(
                &[&y],
                &inputs,
                GradOptions {
                    grad_outputs: Some(&[gy.to_dtype(dt)?]),
                    ..Default::default()
                },
            )?;
            let mut got = vec![y.to_vec::<f64>()?, gs[0].to_vec::<f64>()?, gs[1].to_vec::<f64>()?];
            let mut expect = vec![&want.0, &want.1, &want.2];
            if with_bias {
                got.push(gs[2].to_vec::<f64>()?);
                expect.push(&gb);
            }
            for (k, (g, e)) in got.iter().zip(expect).enumerate() {
                let scale = e.iter().fold(1.0f64, |m, v| m.max(v.abs()));
                let err = g.iter().zip(e).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
                assert!(
                    err <= tol * scale,
                    "{:?} {dt:?} result {k}: error {err}",
                    [n, c, h, w, o]
                );
            }
        }
    }
    Ok(())
}

/// The max pool's backward against a plain scatter-add: indices from the
/// pool itself (each in its own 2x2 block, odd planes leaving a last row and
/// column untouched), indices shared between outputs (sums), and negative
/// zero gradients (zero plus the gradient, as PyTorch).
#[test]
fn max_pool_backward_matches_a_scatter_add() -> Result<()> {
    use ferrotorch::backend::dispatch::call1;
    use ferrotorch::ops::pool::{MaxPool2dBackward, Pool2dParams};
    let params = Pool2dParams {
        kernel: [2, 2],
        stride: [2, 2],
        padding: [0, 0],
        dilation: [1, 1],
        ceil_mode: false,
    };
    for dt in [ferrotorch::DType::F32, ferrotorch::DType::F64] {
        let x = Tensor::randn([3, 2, 7, 9])?.to_dtype(dt)?;
        let (_, own) = x.max_pool2d_with_indices(2)?;
        let mut g = Tensor::randn([3, 2, 3, 4])?.to_dtype(dt)?.to_vec::<f64>()?;
        g[5] = -0.0;
        let g = Tensor::from_vec(g, [3, 2, 3, 4])?.to_dtype(dt)?;
        let mut shared = own.to_vec::<i64>()?;
        // Plane 1: two outputs at the first element; plane 4: one index outside its block.
        shared[12] = 0;
        shared[13] = 0;
        shared[4 * 12 + 7] = 62;
        let shared = Tensor::from_vec(shared, [3, 2, 3, 4])?;
        for idx in [&own, &shared] {
            let got = call1(&MaxPool2dBackward { params }, &[&g, &x, idx])?.to_vec::<f64>()?;
            let (gv, iv) = (g.to_vec::<f64>()?, idx.to_vec::<i64>()?);
            let mut want = vec![0.0f64; 3 * 2 * 7 * 9];
            for (k, (&v, &i)) in gv.iter().zip(&iv).enumerate() {
                let w = &mut want[k / 12 * 63 + i as usize];
                *w = if dt == ferrotorch::DType::F32 {
                    (*w as f32 + v as f32) as f64
                } else {
                    *w + v
                };
            }
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{dt:?}");
        }
    }
    Ok(())
}

#[test]
fn backward_operators_reject_inconsistent_arguments() -> Result<()> {
    use ferrotorch::backend::dispatch::call1;
    use ferrotorch::ops::pool::{MaxPool2dBackward, Pool2dParams};
    let params = Pool2dParams {
        kernel: [2, 2],
        stride: [2, 2],
        padding: [0, 0],
        dilation: [1, 1],
        ceil_mode: false,
    };
    let x = Tensor::randn([1, 1, 4, 4])?;
    let g = Tensor::randn([1, 1, 2, 2])?;
    // An index outside the 4 x 4 plane is an error, never a write out of bounds.
    let bad = Tensor::from_vec(vec![0i64, 5, 16, 3], [1, 1, 2, 2])?;
    let e = call1(&MaxPool2dBackward { params }, &[&g, &x, &bad]).unwrap_err();
    assert!(e.to_string().contains("outside the input plane"), "{e}");
    let wrong = Tensor::randn([1, 1, 3, 2])?;
    assert!(call1(&MaxPool2dBackward { params }, &[&wrong, &x, &bad]).is_err());
    Ok(())
}
