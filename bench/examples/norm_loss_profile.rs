//! Best-of-N timings of the layer norm, GELU and cross-entropy figures'
//! pieces (forward alone, fused backward alone, forward + backward), for
//! tuning their kernels on a busy machine where medians drift:
//! `cargo run --release -p ferrotorch-bench --example norm_loss_profile -- [threads] [filter]`
//! (lines whose name contains `filter`).

use std::hint::black_box;
use std::time::Instant;

use ferrotorch::autograd::{GradOptions, grad};
use ferrotorch::{Reduction, Result, Tensor};

/// The best time per call (ms) over `n` rounds of `inner` calls.
fn tmin(mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..30 {
        let t = Instant::now();
        for _ in 0..5 {
            f()?;
        }
        best = best.min(t.elapsed().as_secs_f64() / 5.0);
    }
    Ok(best * 1e3)
}

fn main() -> Result<()> {
    let threads: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let filter = std::env::args().nth(2).unwrap_or_default();
    let want = |name: &str| name.contains(filter.as_str());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    pool.install(|| -> Result<()> {
        let x = Tensor::randn([1024, 768])?.requires_grad_(true)?;
        let gy = Tensor::randn([1024, 768])?;
        let w = Tensor::randn([768])?.requires_grad_(true)?;
        let b = Tensor::randn([768])?.requires_grad_(true)?;
        let xd = x.detach();
        let go = [gy.clone()];
        let opts = || GradOptions {
            grad_outputs: Some(&go),
            ..Default::default()
        };
        if want("gelu fwd") {
            println!("gelu fwd {:.3}", tmin(|| xd.gelu().map(|t| drop(black_box(t))))?);
        }
        let gb = ferrotorch::ops::activation::ActivationGrad(ferrotorch::ops::activation::Act::Gelu { tanh: false });
        if want("gelu_backward") {
            println!(
                "gelu_backward {:.3}",
                tmin(|| ferrotorch::backend::dispatch::call1(&gb, &[&gy, &xd]).map(|t| drop(black_box(t))))?
            );
        }
        if want("mul (2 in, 1 out)") {
            println!(
                "mul (2 in, 1 out) {:.3}",
                tmin(|| gy.mul(&xd).map(|t| drop(black_box(t))))?
            );
        }
        if want("exp") {
            println!("exp {:.3}", tmin(|| xd.exp().map(|t| drop(black_box(t))))?);
        }
        if want("gelu fwd+bwd") {
            println!(
                "gelu fwd+bwd {:.3}",
                tmin(|| grad(&[&x.gelu()?], &[&x], opts()).map(|t| drop(black_box(t))))?
            );
        }
        let (wd, bd) = (w.detach(), b.detach());
        if want("ln fwd") {
            println!(
                "ln fwd {:.3}",
                tmin(|| xd
                    .layer_norm([768], Some(&wd), Some(&bd), 1e-5)
                    .map(|t| drop(black_box(t))))?
            );
        }
        if want("ln fwd+bwd") {
            println!(
                "ln fwd+bwd {:.3}",
                tmin(|| {
                    let y = x.layer_norm([768], Some(&w), Some(&b), 1e-5)?;
                    grad(&[&y], &[&x, &w, &b], opts()).map(|t| drop(black_box(t)))
                })?
            );
        }
        let xc = Tensor::randn([1024, 65])?.requires_grad_(true)?;
        let t = Tensor::randint(0, 65, [1024])?;
        let xcd = xc.detach();
        if want("ce fwd") {
            println!(
                "ce fwd {:.3}",
                tmin(|| xcd
                    .cross_entropy(&t, None, Reduction::Mean, -100, 0.0)
                    .map(|t| drop(black_box(t))))?
            );
        }
        if want("ce fwd+bwd") {
            println!(
                "ce fwd+bwd {:.3}",
                tmin(|| {
                    let l = xc.cross_entropy(&t, None, Reduction::Mean, -100, 0.0)?;
                    grad(&[&l], &[&xc], Default::default()).map(|t| drop(black_box(t)))
                })?
            );
        }
        Ok(())
    })
}
