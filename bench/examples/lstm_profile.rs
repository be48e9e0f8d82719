//! Best-of-N timings of the LSTM figure and its pieces (the recurrent
//! GEMM, its two backward GEMMs, forward alone, forward + backward), for
//! tuning: `cargo run --release -p ferrotorch-bench --example lstm_profile -- [threads]`.

use std::hint::black_box;
use std::time::Instant;

use ferrotorch::autograd::{GradOptions, grad, no_grad};
use ferrotorch::nn::{Lstm, Module, RnnOptions};
use ferrotorch::{Result, Tensor};

/// The best time per call (ms) over 10 rounds of 2 calls.
fn tmin(mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..10 {
        let t = Instant::now();
        for _ in 0..2 {
            f()?;
        }
        best = best.min(t.elapsed().as_secs_f64() / 2.0);
    }
    Ok(best * 1e3)
}

fn main() -> Result<()> {
    let threads: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| ferrotorch::Error::invalid("lstm_profile", e.to_string()))?;
    pool.install(|| -> Result<()> {
        let h = Tensor::randn([32, 256])?;
        let w = Tensor::randn([1024, 256])?;
        let g = Tensor::randn([32, 1024])?;
        let x = Tensor::randn([2048, 256])?;
        let per = |ms: f64, n: f64| format!("{ms:.3} ms ({:.1} GFLOP/s)", n / ms / 1e6);
        let mm = tmin(|| h.matmul(&w.t()?).map(|c| drop(black_box(c))))?;
        println!(
            "h @ w_hh^T [32,256]x[256,1024]: {}",
            per(mm, 2.0 * 32.0 * 256.0 * 1024.0)
        );
        let mm = tmin(|| g.matmul(&w).map(|c| drop(black_box(c))))?;
        println!(
            "dgates @ w_hh [32,1024]x[1024,256]: {}",
            per(mm, 2.0 * 32.0 * 256.0 * 1024.0)
        );
        let mm = tmin(|| g.t()?.matmul(&h).map(|c| drop(black_box(c))))?;
        println!(
            "dgates^T @ h [1024,32]x[32,256]: {}",
            per(mm, 2.0 * 32.0 * 256.0 * 1024.0)
        );
        let mm = tmin(|| x.matmul(&w.t()?).map(|c| drop(black_box(c))))?;
        println!(
            "x @ w_ih^T [2048,256]x[256,1024]: {}",
            per(mm, 2.0 * 2048.0 * 256.0 * 1024.0)
        );
        let lstm = Lstm::with_options(256, 256, RnnOptions::new().num_layers(2))?;
        let params: Vec<Tensor> = lstm.parameters().iter().map(|p| p.tensor()).collect();
        let x = Tensor::randn([64, 32, 256])?.requires_grad_(true)?;
        let gy = Tensor::randn([64, 32, 256])?;
        let fwd = tmin(|| no_grad(|| lstm.call(&x)).map(|c| drop(black_box(c))))?;
        println!("forward (no grad): {fwd:.2} ms");
        let fwd = tmin(|| lstm.call(&x).map(|c| drop(black_box(c))))?;
        println!("forward (graph): {fwd:.2} ms");
        let all = tmin(|| {
            let (y, _) = lstm.call(&x)?;
            let mut xs: Vec<&Tensor> = vec![&x];
            xs.extend(params.iter());
            let opts = GradOptions {
                grad_outputs: Some(std::slice::from_ref(&gy)),
                ..Default::default()
            };
            drop(black_box(grad(&[&y], &xs, opts)?));
            Ok(())
        })?;
        println!("forward + backward: {all:.2} ms");
        Ok(())
    })
}
