//! Times ferrotorch on the workloads of `bench/torch_ref.py`, the same way:
//! warm-up, then the median of at least 5 blocks of at least 0.1 s each.
//! Prints one line per figure: `figure<TAB>threads<TAB>seconds_per_iteration`.
//!
//! Usage: `ferrotorch-bench --threads N [--filter SUBSTRING[,SUBSTRING...]]`
//! (figures whose name contains any of the substrings), or
//! `ferrotorch-bench --peak`: one line `fma_peak_gflops<TAB>1<TAB>GFLOP/s`,
//! one core's measured fp32 FMA peak (see `peak.rs`), or
//! `ferrotorch-bench --serve --threads N`: the block server that
//! `bench/interleave.py` drives (see [`serve`]).

use std::hint::black_box;
use std::time::Instant;

use ferrotorch::{Result, Tensor, manual_seed};
use ferrotorch_bench::{ConvLayer, Mlp, chain50};

/// Calls `f` for at least 0.2 s (warm-up).
fn warm_up(f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
    let warm = Instant::now();
    while warm.elapsed().as_secs_f64() < 0.2 {
        f()?;
    }
    Ok(())
}

/// Seconds per call of `f` over one block of at least 0.1 s.
fn block(f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    let start = Instant::now();
    let mut iters = 0u64;
    while start.elapsed().as_secs_f64() < 0.1 {
        f()?;
        iters += 1;
    }
    Ok(start.elapsed().as_secs_f64() / iters as f64)
}

/// Median seconds per call of `f`: warm-up, then >= 5 blocks of >= 0.1 s.
fn time_it(f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    warm_up(f)?;
    let mut blocks = (0..5).map(|_| block(f)).collect::<Result<Vec<_>>>()?;
    blocks.sort_by(f64::total_cmp);
    Ok(blocks[blocks.len() / 2])
}

/// The timed closure of a figure.
type Workload = Box<dyn FnMut() -> Result<()>>;
/// One figure: its name and a setup that returns the timed closure.
type Figure = (String, Box<dyn Fn() -> Result<Workload>>);

fn figure<F>(name: &str, setup: F) -> Figure
where
    F: Fn() -> Result<Workload> + 'static,
{
    (name.to_string(), Box::new(setup))
}

fn figures() -> Vec<Figure> {
    let mut v = Vec::new();
    for n in [256usize, 512, 1024, 2048] {
        v.push(figure(&format!("sgemm_{n}"), move || {
            let (a, b) = (Tensor::randn([n, n])?, Tensor::randn([n, n])?);
            Ok(Box::new(move || a.mm(&b).map(|c| drop(black_box(c)))))
        }));
    }
    let n = 10_000_000;
    let pair = move || -> Result<(Tensor, Tensor)> { Ok((Tensor::randn([n])?, Tensor::randn([n])?)) };
    v.push(figure("add_1e7", move || {
        let (a, b) = pair()?;
        Ok(Box::new(move || a.add(&b).map(|c| drop(black_box(c)))))
    }));
    v.push(figure("mul_1e7", move || {
        let (a, b) = pair()?;
        Ok(Box::new(move || a.mul(&b).map(|c| drop(black_box(c)))))
    }));
    v.push(figure("exp_1e7", move || {
        let (a, _) = pair()?;
        Ok(Box::new(move || a.exp().map(|c| drop(black_box(c)))))
    }));
    let side = 3163;
    v.push(figure("add_transposed_1e7", move || {
        let (x, y) = (Tensor::randn([side, side])?, Tensor::randn([side, side])?);
        Ok(Box::new(move || x.t()?.add(&y).map(|c| drop(black_box(c)))))
    }));
    v.push(figure("exp_transposed_1e7", move || {
        let x = Tensor::randn([side, side])?;
        Ok(Box::new(move || x.t()?.exp().map(|c| drop(black_box(c)))))
    }));
    v.push(figure("sum_rows_4096", || {
        let m = Tensor::randn([4096, 4096])?;
        Ok(Box::new(move || m.sum_dim(1, false).map(|c| drop(black_box(c)))))
    }));
    v.push(figure("softmax_rows_4096", || {
        let m = Tensor::randn([4096, 4096])?;
        Ok(Box::new(move || m.softmax(1).map(|c| drop(black_box(c)))))
    }));
    v.push(figure("mul_sum_backward_16", || {
        let a = Tensor::randn([16])?.requires_grad_(true)?;
        let b = Tensor::randn([16])?.requires_grad_(true)?;
        Ok(Box::new(move || a.mul(&b)?.sum()?.backward()))
    }));
    v.push(figure("chain50_backward_1elem", || {
        let x = Tensor::randn([1])?.requires_grad_(true)?;
        Ok(Box::new(move || chain50(&x)?.sum()?.backward()))
    }));
    v.push(figure("mlp_fwd_bwd_b128", || {
        let mlp = Mlp::new()?;
        Ok(Box::new(move || mlp.step()))
    }));
    v.push(figure("unique_1e6_int64", || {
        let x = Tensor::randint(0, 100_000, [1_000_000])?;
        Ok(Box::new(move || x.unique().map(|c| drop(black_box(c)))))
    }));
    v.push(figure("unique_inverse_counts_1e6_int64", || {
        let x = Tensor::randint(0, 100_000, [1_000_000])?;
        let opts = ferrotorch::UniqueOptions {
            return_inverse: true,
            return_counts: true,
            dim: None,
        };
        Ok(Box::new(move || x.unique_with(opts).map(|c| drop(black_box(c)))))
    }));
    v.push(figure("index_add_1e6_rows", || {
        let x = Tensor::zeros([10_000, 32])?;
        let idx = Tensor::randint(0, 10_000, [1_000_000])?;
        let src = Tensor::randn([1_000_000, 32])?;
        Ok(Box::new(move || {
            x.index_add(0, &idx, &src, 1).map(|c| drop(black_box(c)))
        }))
    }));
    v.push(figure("einsum_attention_16x4x64x32", || {
        let (q, k) = (Tensor::randn([16, 4, 64, 32])?, Tensor::randn([16, 4, 64, 32])?);
        Ok(Box::new(move || {
            Tensor::einsum("bhqd,bhkd->bhqk", &[&q, &k]).map(|c| drop(black_box(c)))
        }))
    }));
    v.push(figure("solve_512_f64", || {
        let opts = ferrotorch::TensorOptions::new().dtype(ferrotorch::DType::F64);
        let a = opts.clone().randn([512, 512])?;
        let b = opts.randn([512, 512])?;
        Ok(Box::new(move || a.linalg_solve(&b).map(|c| drop(black_box(c)))))
    }));
    v.push(figure("eigh_256_f64", || {
        let opts = ferrotorch::TensorOptions::new().dtype(ferrotorch::DType::F64);
        let a = opts.randn([256, 256])?;
        let a = a.add(&a.t()?)?;
        Ok(Box::new(move || a.linalg_eigh("L").map(|c| drop(black_box(c)))))
    }));
    v.push(figure("svd_256_f64", || {
        let opts = ferrotorch::TensorOptions::new().dtype(ferrotorch::DType::F64);
        let a = opts.randn([256, 256])?;
        Ok(Box::new(move || a.linalg_svd(false).map(|c| drop(black_box(c)))))
    }));
    // A CNN's first layer (the input is data) and a later one (its input
    // requires grad): forward and backward with a fixed output gradient.
    v.push(figure("conv2d_fwd_bwd_64x1x28x28_to32", || {
        let layer = ConvLayer::new(64, 1, 28, 32, 3, false)?;
        Ok(Box::new(move || layer.step()))
    }));
    v.push(figure("conv2d_fwd_bwd_64x32x14x14_to64", || {
        let layer = ConvLayer::new(64, 32, 14, 64, 3, true)?;
        Ok(Box::new(move || layer.step()))
    }));
    v.push(figure("max_pool2d_fwd_bwd_64x32x28x28", || {
        let x = Tensor::randn([64, 32, 28, 28])?.requires_grad_(true)?;
        let gy = Tensor::randn([64, 32, 14, 14])?;
        Ok(Box::new(move || {
            x.max_pool2d(2)?.backward_with(&gy)?;
            x.set_grad(None)
        }))
    }));
    v.push(figure("add_1elem_overhead", || {
        let (a, b) = (Tensor::randn([1])?, Tensor::randn([1])?);
        Ok(Box::new(move || a.add(&b).map(|c| drop(black_box(c)))))
    }));
    // Forward + backward (gradients of every input, from a fixed output
    // gradient, none accumulated), as `torch.autograd.grad` in torch_ref.py.
    let fwd_bwd = |y: &Tensor, xs: &[&Tensor], gy: Option<&Tensor>| -> Result<()> {
        let go: Vec<Tensor> = gy.into_iter().cloned().collect();
        let opts = ferrotorch::autograd::GradOptions {
            grad_outputs: gy.map(|_| go.as_slice()),
            ..Default::default()
        };
        drop(black_box(ferrotorch::autograd::grad(&[y], xs, opts)?));
        Ok(())
    };
    v.push(figure("layer_norm_fwd_bwd_1024x768", move || {
        let x = Tensor::randn([1024, 768])?.requires_grad_(true)?;
        let w = Tensor::randn([768])?.requires_grad_(true)?;
        let b = Tensor::randn([768])?.requires_grad_(true)?;
        let gy = Tensor::randn([1024, 768])?;
        Ok(Box::new(move || {
            let y = x.layer_norm([768], Some(&w), Some(&b), 1e-5)?;
            fwd_bwd(&y, &[&x, &w, &b], Some(&gy))
        }))
    }));
    v.push(figure("gelu_fwd_bwd_1024x768", move || {
        let x = Tensor::randn([1024, 768])?.requires_grad_(true)?;
        let gy = Tensor::randn([1024, 768])?;
        Ok(Box::new(move || fwd_bwd(&x.gelu()?, &[&x], Some(&gy))))
    }));
    v.push(figure("cross_entropy_fwd_bwd_1024x65", move || {
        let x = Tensor::randn([1024, 65])?.requires_grad_(true)?;
        let t = Tensor::randint(0, 65, [1024])?;
        Ok(Box::new(move || {
            let loss = x.cross_entropy(&t, None, ferrotorch::Reduction::Mean, -100, 0.0)?;
            fwd_bwd(&loss, &[&x], None)
        }))
    }));
    v.push(figure("sdpa_causal_fwd_bwd_16x4x64x32", move || {
        use ferrotorch::nn::functional::{SdpaOptions, scaled_dot_product_attention};
        let q = Tensor::randn([16, 4, 64, 32])?.requires_grad_(true)?;
        let k = Tensor::randn([16, 4, 64, 32])?.requires_grad_(true)?;
        let v = Tensor::randn([16, 4, 64, 32])?.requires_grad_(true)?;
        let gy = Tensor::randn([16, 4, 64, 32])?;
        Ok(Box::new(move || {
            let opts = SdpaOptions::new().is_causal(true);
            let y = scaled_dot_product_attention(&q, &k, &v, &opts)?;
            fwd_bwd(&y, &[&q, &k, &v], Some(&gy))
        }))
    }));
    v.push(figure("train_step_mnist_mlp_b128", || {
        let mut s = ferrotorch_bench::train_steps::mlp_step()?;
        Ok(Box::new(move || s.step()))
    }));
    v.push(figure("train_step_mnist_cnn_b64", || {
        let mut s = ferrotorch_bench::train_steps::cnn_step()?;
        Ok(Box::new(move || s.step()))
    }));
    v.push(figure("train_step_gpt_4x128_ctx64_b16", || {
        let mut s = ferrotorch_bench::train_steps::gpt_step()?;
        Ok(Box::new(move || s.step()))
    }));
    v.push(figure("train_step_mnist_mlp_b128_amp_bf16", || {
        let mut s = ferrotorch_bench::train_steps::mlp_step()?.with_autocast(ferrotorch::DType::BF16);
        Ok(Box::new(move || s.step()))
    }));
    v.push(figure("train_step_gpt_4x128_ctx64_b16_amp_bf16", || {
        let mut s = ferrotorch_bench::train_steps::gpt_step()?.with_autocast(ferrotorch::DType::BF16);
        Ok(Box::new(move || s.step()))
    }));
    v.push(figure("lstm_2x256_seq64_b32_fwd_bwd", move || {
        use ferrotorch::nn::{Lstm, Module, RnnOptions};
        let lstm = Lstm::with_options(256, 256, RnnOptions::new().num_layers(2))?;
        let params: Vec<Tensor> = lstm.parameters().iter().map(|p| p.tensor()).collect();
        let x = Tensor::randn([64, 32, 256])?.requires_grad_(true)?;
        let gy = Tensor::randn([64, 32, 256])?;
        Ok(Box::new(move || {
            let (y, _) = lstm.call(&x)?;
            let mut xs: Vec<&Tensor> = vec![&x];
            xs.extend(params.iter());
            fwd_bwd(&y, &xs, Some(&gy))
        }))
    }));
    v.push(figure("embed_minilm_b32", || {
        let step = ferrotorch_bench::embed::EmbedStep::new()
            .map_err(|e| ferrotorch::Error::invalid("embed_minilm_b32", e.to_string()))?;
        Ok(Box::new(move || {
            let e = step
                .step()
                .map_err(|e| ferrotorch::Error::invalid("embed_minilm_b32", e.to_string()))?;
            drop(black_box(e));
            Ok(())
        }))
    }));
    v.push(figure("module_mlp16_b1_forward", || {
        use ferrotorch::nn::{Forward, Linear, ReLU, Sequential};
        let net = Sequential::new()
            .push(Linear::new(16, 16)?)
            .push(ReLU::new())
            .push(Linear::new(16, 16)?)
            .push(ReLU::new())
            .push(Linear::new(16, 16)?);
        let x = Tensor::randn([1, 16])?;
        Ok(Box::new(move || {
            ferrotorch::autograd::no_grad(|| net.call(&x)).map(|c| drop(black_box(c)))
        }))
    }));
    v
}

fn workloads(filter: &str, threads: usize) -> Result<()> {
    manual_seed(0);
    for (name, setup) in figures() {
        if filter.split(',').any(|f| name.contains(f)) {
            let mut f = setup()?;
            let s = time_it(&mut *f)?;
            println!("{name}\t{threads}\t{s:.9e}");
        }
    }
    Ok(())
}

/// The block server driven by `bench/interleave.py`, which alternates
/// blocks of this process and of `torch_ref.py --serve` so that both sides
/// are timed in the same moments of a shared machine. One command per line
/// on stdin, one reply line on stdout:
/// - `list`: the figure names, tab-separated;
/// - `setup NAME`: builds the figure's workload and warms it up (0.2 s);
///   replies `ok`, or `unknown` for a name this side lacks;
/// - `block`: one untimed call (caches warm again after the other side's
///   block), then one block of at least 0.1 s; replies its seconds per call;
/// - `quit` (or end of input): exits.
fn serve() -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use std::io::{BufRead, Write};
    let figs = figures();
    let mut current: Option<Workload> = None;
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let mut words = line.split_whitespace();
        let reply = match (words.next(), words.next()) {
            (Some("list"), _) => figs.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join("\t"),
            (Some("setup"), Some(name)) => {
                current = None;
                manual_seed(0);
                match figs.iter().find(|f| f.0 == name) {
                    Some((_, setup)) => {
                        let mut f = setup()?;
                        warm_up(&mut *f)?;
                        current = Some(f);
                        "ok".to_string()
                    }
                    None => "unknown".to_string(),
                }
            }
            (Some("block"), _) => match current.as_mut() {
                Some(f) => {
                    f()?;
                    format!("{:.9e}", block(&mut **f)?)
                }
                None => "error: block before setup".to_string(),
            },
            (Some("quit"), _) => break,
            _ => format!("error: unknown command {line:?}"),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    if args.iter().any(|a| a == "--peak") {
        println!("fma_peak_gflops\t1\t{:.3}", ferrotorch_bench::peak::fma_peak_gflops());
        let cpu = ferrotorch_bench::cpu_report::cpu_line(ferrotorch::backend::cpu::cpu_info::cpu_info());
        println!("cpu\t1\t{cpu}");
        return Ok(());
    }
    if args.iter().any(|a| a == "--cpu") {
        ferrotorch_bench::cpu_report::report()?;
        return Ok(());
    }
    let threads: usize = arg("--threads").and_then(|s| s.parse().ok()).unwrap_or(1);
    let filter = arg("--filter").unwrap_or_default();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool");
    if args.iter().any(|a| a == "--serve") {
        pool.install(serve)
    } else {
        Ok(pool.install(|| workloads(&filter, threads))?)
    }
}
