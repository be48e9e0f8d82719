//! Runs one small-tensor workload in a loop, for `perf record` / `perf stat`:
//! `cargo run --release -p ferrotorch-bench --example overhead_profile -- chain50 200000`.
//! Workloads: `add1` (1-element `a + b`), `mul_sum` (`(a*b).sum().backward()`
//! on 16 elements), `chain50` (forward + backward of a 50-op chain).

use ferrotorch::{Result, Tensor};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map(String::as_str).unwrap_or("chain50");
    let iters: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let t0 = std::time::Instant::now();
    match which {
        "add1" => {
            let (a, b) = (Tensor::randn(&[1])?, Tensor::randn(&[1])?);
            for _ in 0..iters {
                std::hint::black_box(a.add(&b)?);
            }
        }
        "mul_sum" => {
            let a = Tensor::randn(&[16])?.requires_grad_(true)?;
            let b = Tensor::randn(&[16])?.requires_grad_(true)?;
            for _ in 0..iters {
                a.mul(&b)?.sum()?.backward()?;
            }
        }
        _ => {
            let x = Tensor::randn(&[1])?.requires_grad_(true)?;
            for _ in 0..iters {
                let mut y = x.clone();
                for i in 0..50 {
                    y = match i % 5 {
                        0 => y.mul(1.01)?,
                        1 => y.add(0.1)?,
                        2 => y.sin()?,
                        3 => y.mul(&y)?,
                        _ => y.tanh()?,
                    };
                }
                y.sum()?.backward()?;
            }
        }
    }
    let per = t0.elapsed().as_secs_f64() / iters as f64;
    println!("{which}: {:.3} us per iteration", per * 1e6);
    Ok(())
}
