//! Same inputs, same bits: every result is identical for thread pools of 1,
//! 2, 3 and 8 threads and from run to run (a promise PyTorch does not make).

use ferrotorch::autograd::{GradOptions, grad};
use ferrotorch::{ConvOptions, ConvTransposeOptions, Generator, MaxPoolOptions, Result, Tensor, TensorOptions};

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_vec::<f64>().unwrap().into_iter().map(f64::to_bits).collect()
}

/// Runs every workload and returns the bit patterns of all results.
fn workloads() -> Result<Vec<(String, Vec<u64>)>> {
    let g = Generator::new(1234);
    let o = TensorOptions::new().generator(&g);
    let big = o.randn([1 << 22])?; // 4M elements: many reduction chunks
    let m = o.randn([777, 1031])?;
    let a = o.randn([301, 517])?;
    let b = o.randn([517, 403])?;
    let ba = o.randn([6, 65, 130])?;
    let bb = o.randn([6, 130, 97])?;
    let c = o.randn([3, 100_003])?;
    let mut out = Vec::new();
    let mut push = |name: &str, t: Tensor| out.push((name.to_string(), bits(&t)));
    push("sum_all", big.sum()?);
    push("sum_rows", m.sum_dim(1, false)?);
    push("sum_cols", m.sum_dim(0, false)?);
    push("sum_transposed", m.t()?.sum_dim(1, false)?);
    push("mean_all", big.mean()?);
    push("mean_dims", m.mean_dim([0, 1], true)?);
    push("var_all", big.var(1.0)?);
    push("var_rows", m.var_dim(vec![1], 1.0, false)?);
    push("std_cols", m.std_dim(vec![0], 0.0, false)?);
    push("logsumexp", m.logsumexp(1, false)?);
    push("norm", big.norm(2.0)?);
    push("prod", c.mul(1e-3)?.add(1.0)?.prod_dim(1, false)?);
    push("softmax_rows", m.softmax(1)?);
    push("softmax_cols", m.softmax(0)?);
    push("log_softmax", m.log_softmax(-1)?);
    push("matmul", a.matmul(&b)?);
    push("matmul_transposed", b.t()?.matmul(&a.t()?)?);
    push("bmm", ba.bmm(&bb)?);
    push("matmul_big", o.randn([1100, 700])?.matmul(&o.randn([700, 900])?)?);
    // Fewer row panels than threads (the columns are split) and two column blocks of B.
    push("matmul_few_rows", o.randn([5, 300])?.matmul(&o.randn([300, 4500])?)?);
    // Linear algebra: blocked LU with parallel trailing updates and
    // right-hand sides solved in column chunks; the decompositions.
    let sq = o.randn([301, 301])?.to_dtype(ferrotorch::DType::F64)?;
    push(
        "solve",
        sq.linalg_solve(&o.randn([301, 203])?.to_dtype(ferrotorch::DType::F64)?)?,
    );
    push("inv", sq.linalg_inv()?);
    push("det", sq.mul(0.5)?.linalg_det()?);
    let sym = sq.narrow(0, 0, 97)?.narrow(1, 0, 97)?;
    push("eigh", sym.add(&sym.t()?)?.linalg_eigh("L")?.1);
    let (u, s, vh) = sq.narrow(0, 0, 90)?.narrow(1, 0, 70)?.linalg_svd(false)?;
    push("svd", u.mul(&s)?.matmul(&vh)?);
    push("qr", sq.narrow(1, 0, 120)?.linalg_qr("reduced")?.0);
    push(
        "addmm",
        o.randn([301])?
            .addmm(&o.randn([200, 150])?, &o.randn([150, 301])?, 0.5, 2.0)?,
    );
    push("cumsum_long", big.cumsum(0)?);
    push("cumsum_rows", m.cumsum(1)?);
    push("cumsum_cols", m.cumsum(0)?);
    push("exp_add", big.exp()?.add(&big)?);
    push("amax", m.amax(1, false)?);
    // Random samplers draw sequentially: the same numbers for any pool.
    push(
        "uniform_transposed",
        Tensor::zeros([300, 200])?.t()?.uniform_with_(-1.0, 1.0, &g)?,
    );
    push("normal_", Tensor::zeros([100_003])?.normal_with_(0.0, 1.0, &g)?);
    push("exponential_", Tensor::zeros([5000])?.exponential_with_(2.0, &g)?);
    push(
        "bernoulli_tensor",
        Tensor::zeros([40, 500])?.bernoulli_with_(&o.rand([500])?, &g)?,
    );
    push("randperm", o.randperm(100_000)?);
    push("multinomial", o.rand([8, 1000])?.multinomial_with(100, false, &g)?);
    push(
        "multinomial_replacement",
        o.rand([8, 1000])?.multinomial_with(100, true, &g)?,
    );
    push("poisson", o.rand([5000])?.mul(30.0)?.poisson_with(&g)?);
    push(
        "normal_tensor",
        Tensor::normal_tensor_with(&o.randn([3000])?, &o.rand([3000])?, &g)?,
    );
    // Convolutions: forward and every gradient. The weight gradient sums
    // over the batch (37 samples: 16 uneven chunks; 2 samples: fewer chunks
    // than threads, so the GEMM splits).
    for (n, name) in [(37usize, "conv2d_b37"), (2, "conv2d_b2")] {
        let x = o.randn([n, 8, 15, 13])?.requires_grad_(true)?;
        let w = o.randn([16, 4, 3, 3])?.requires_grad_(true)?;
        let b = o.randn([16])?.requires_grad_(true)?;
        let y = x.conv2d(&w, Some(&b), ConvOptions::new().padding(1).groups(2).stride((1, 2)))?;
        let gy = o.randn(y.shape())?;
        let gs = grad(
            &[&y],
            &[&x, &w, &b],
            GradOptions {
                grad_outputs: Some(&[gy]),
                ..Default::default()
            },
        )?;
        push(name, y.detach());
        for (k, g) in gs.iter().enumerate() {
            push(&format!("{name}_grad{k}"), g.unwrap().clone());
        }
    }
    // "Same" convolutions (the column matrix packed from the input with
    // plain loads; the input gradient by masked col2im adds, or, with more
    // input than output channels, as the flipped convolution).
    for (c, oc, name) in [(16usize, 24usize, "conv2d_same_widen"), (24, 16, "conv2d_same_narrow")] {
        let x = o.randn([6, c, 10, 12])?.requires_grad_(true)?;
        let w = o.randn([oc, c, 3, 3])?.requires_grad_(true)?;
        let y = x.conv2d(&w, None, ConvOptions::new().padding(1))?;
        let gy = o.randn(y.shape())?;
        let gs = grad(
            &[&y],
            &[&x, &w],
            GradOptions {
                grad_outputs: Some(&[gy]),
                ..Default::default()
            },
        )?;
        push(name, y.detach());
        for (k, g) in gs.iter().enumerate() {
            push(&format!("{name}_grad{k}"), g.unwrap().clone());
        }
    }
    let x = o.randn([9, 6, 7, 8])?.requires_grad_(true)?;
    let w = o.randn([6, 5, 3, 3])?.requires_grad_(true)?;
    let y = x.conv_transpose2d(
        &w,
        None,
        ConvTransposeOptions::new().stride(2).padding(1).output_padding(1),
    )?;
    let gy = o.randn(y.shape())?;
    let gs = grad(
        &[&y],
        &[&x, &w],
        GradOptions {
            grad_outputs: Some(&[gy]),
            ..Default::default()
        },
    )?;
    push("conv_transpose2d", y.detach());
    push("conv_transpose2d_grad_weight", gs[1].clone());
    let x = o.randn([16, 32, 28, 28])?.requires_grad_(true)?;
    for (name, y) in [
        ("max_pool2d", x.max_pool2d(MaxPoolOptions::new(3).stride(2).padding(1))?),
        ("avg_pool2d", x.avg_pool2d(2)?),
        ("adaptive_avg_pool2d", x.adaptive_avg_pool2d([5, 3])?),
    ] {
        let gy = o.randn(y.shape())?;
        let gs = grad(
            &[&y],
            &[&x],
            GradOptions {
                grad_outputs: Some(&[gy]),
                ..Default::default()
            },
        )?;
        push(name, y.detach());
        push(&format!("{name}_grad"), gs[0].clone());
    }
    // Normalisations, activations and losses with their fused derivatives.
    let grads = |y: &Tensor, xs: &[&Tensor]| -> Result<Vec<Tensor>> {
        let gy = TensorOptions::new().generator(&Generator::new(7)).randn(y.shape())?;
        let g = grad(
            &[y],
            xs,
            GradOptions {
                grad_outputs: Some(&[gy]),
                ..Default::default()
            },
        )?;
        Ok(g.into_vec().into_iter().flatten().collect())
    };
    let x = o.randn([1500, 300])?.requires_grad_(true)?;
    let w = o.randn([300])?.requires_grad_(true)?;
    let bias = o.randn([300])?.requires_grad_(true)?;
    let ln = x.layer_norm([300], Some(&w), Some(&bias), 1e-5)?;
    push("layer_norm", ln.detach());
    for (k, gr) in grads(&ln, &[&x, &w, &bias])?.into_iter().enumerate() {
        push(&format!("layer_norm_grad{k}"), gr);
    }
    let x4 = o.randn([8, 12, 30, 31])?.requires_grad_(true)?;
    let w12 = o.randn([12])?.requires_grad_(true)?;
    let gn = x4.group_norm(4, Some(&w12), None, 1e-5)?;
    for (k, gr) in grads(&gn, &[&x4, &w12])?.into_iter().enumerate() {
        push(&format!("group_norm_grad{k}"), gr);
    }
    let bn = x4.batch_norm(None, None, Some(&w12), None, true, 0.1, 1e-5)?;
    for (k, gr) in grads(&bn, &[&x4, &w12])?.into_iter().enumerate() {
        push(&format!("batch_norm_grad{k}"), gr);
    }
    let ge = x.gelu()?;
    push("gelu_backward", grads(&ge, &[&x])?.remove(0));
    let logits = o.randn([3000, 65])?.requires_grad_(true)?;
    let target = o.randint(0, 65, [3000])?;
    let ce = logits.cross_entropy(&target, None, ferrotorch::Reduction::Mean, -100, 0.0)?;
    push("cross_entropy", ce.detach());
    push("cross_entropy_grad", grads(&ce, &[&logits])?.remove(0));
    let table = o.randn([1000, 64])?.requires_grad_(true)?;
    let emb = table.embedding(&o.randint(0, 1000, [20_000])?, None, false)?;
    push("embedding_grad", grads(&emb, &[&table])?.remove(0));
    // A whole LSTM layer, both directions: parallel cell rows, packed recurrent products, the
    // weight gradient over all steps and the bias gradient's column sums.
    let xw = o.randn([12, 48, 256])?.requires_grad_(true)?;
    let w_hh = o.randn([256, 64])?.mul(0.1)?.requires_grad_(true)?;
    let b_hh = o.randn([256])?.requires_grad_(true)?;
    let (h0, c0) = (o.randn([48, 64])?, o.randn([48, 64])?);
    for reverse in [false, true] {
        let (out, _, c_n) = xw.lstm_layer(&w_hh, Some(&b_hh), &h0, &c0, reverse)?;
        push(&format!("lstm_layer_{reverse}"), out.detach());
        let mut g = grads(&out.sum()?.add(&c_n.sum()?)?, &[&xw, &w_hh, &b_hh])?;
        push(&format!("lstm_layer_{reverse}_dxw"), g.remove(0));
        push(&format!("lstm_layer_{reverse}_dw"), g.remove(0));
        push(&format!("lstm_layer_{reverse}_db"), g.remove(0));
    }
    // index_add: many entries per output row, in index order on every path.
    let rows = o.randint(0, 3000, [200_000])?;
    let src = o.randn([200_000, 16])?;
    push("index_add", o.randn([3000, 16])?.index_add(0, &rows, &src, 1)?);
    push("index_add_alpha", o.randn([3000, 16])?.index_add(0, &rows, &src, -0.5)?);
    // unique through the counting path (narrow span) and the sort path.
    let opts = ferrotorch::UniqueOptions {
        return_inverse: true,
        return_counts: true,
        dim: None,
    };
    for (name, x) in [
        ("unique_narrow", o.randint(-5000, 5000, [300_000])?),
        ("unique_wide", o.randint(-(1 << 40), 1 << 40, [300_000])?),
    ] {
        let u = x.unique_with(opts)?;
        push(name, u.values);
        push(&format!("{name}_inverse"), u.inverse.expect("asked for"));
        push(&format!("{name}_counts"), u.counts.expect("asked for"));
    }
    Ok(out)
}

fn in_pool(threads: usize) -> Vec<(String, Vec<u64>)> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(workloads)
        .unwrap()
}

#[test]
fn bitwise_identical_for_any_thread_count() {
    let reference = in_pool(1);
    assert!(reference.iter().all(|(_, b)| !b.is_empty()));
    for threads in [2, 3, 8, 1, 2] {
        let got = in_pool(threads);
        for ((name, want), (_, have)) in reference.iter().zip(&got) {
            assert!(
                want == have,
                "{name}: results differ between 1 and {threads} threads ({} of {} elements)",
                want.iter().zip(have).filter(|(a, b)| a != b).count(),
                want.len()
            );
        }
    }
}
