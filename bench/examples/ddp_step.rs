//! One training step of the mnist MLP (batch 128) or the gpt figure's model
//! (batch 16 x 64 tokens) with AdamW, on one process or, under a launcher
//! (`ferrorun`), in DistributedDataParallel over the `tcp` backend; the same
//! per-rank batch either way. `bench/ddp_overlap.sh` runs it beside
//! `bench/ddp_step.py` (PyTorch DDP over Gloo).
//!
//! Usage: `ddp_step --model mlp|gpt [--steps 40] [--threads 1]`. Rank 0
//! prints `step_ms MEDIAN` and, in DDP, `comm_ms MEDIAN` (the all-reduces of
//! DDP's buckets alone, the same sizes back to back), `ddp_comm_ms` (per
//! step, each bucket's launch to completion inside DDP) and `hidden_pct`
//! (the share of that which backward's computation hid:
//! `DistributedDataParallel::comm_stats`).

use std::time::Instant;

use ferrotorch::distributed::ddp::{DdpOptions, DistributedDataParallel};
use ferrotorch::distributed::{self as dist, InitOptions, ReduceOp};
use ferrotorch::nn::Forward;
use ferrotorch::{Result, Tensor, TensorOptions};
use ferrotorch_bench::train_steps::{TrainStep, gpt_model, mnist_mlp};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median milliseconds of `steps` calls of `f` after 5 warm-up calls.
fn time_steps(steps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..5 {
        f()?;
    }
    let mut times = Vec::with_capacity(steps);
    for _ in 0..steps {
        let t0 = Instant::now();
        f()?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(times))
}

fn run<M: Forward>(model: M, x: Tensor, y: Tensor, steps: usize, ddp: bool) -> Result<()> {
    let rank = if ddp { dist::get_rank()? } else { 0 };
    if !ddp {
        let mut step = TrainStep::new(model, x, y)?;
        let ms = time_steps(steps, || step.step())?;
        println!("step_ms {ms:.3}");
        return Ok(());
    }
    let ddp = DistributedDataParallel::new(model, DdpOptions::default())?;
    let sizes: Vec<usize> = {
        let params = ddp.module().parameters();
        ddp.bucket_members()
            .iter()
            .map(|b| b.iter().map(|&i| params[i].numel()).sum())
            .collect()
    };
    let mut step = TrainStep::new(ddp, x, y)?;
    let ms = time_steps(steps, || step.step())?;
    let stats = step.model().comm_stats();
    dist::barrier()?;
    // The buckets' all-reduces alone, in DDP's order, each waited for.
    let buckets: Vec<Tensor> = sizes
        .iter()
        .map(|&n| TensorOptions::new().zeros([n]))
        .collect::<Result<_>>()?;
    let comm = time_steps(steps, || {
        for b in &buckets {
            dist::all_reduce(b, ReduceOp::Sum)?;
        }
        Ok(())
    })?;
    if rank == 0 {
        println!("step_ms {ms:.3}");
        println!("comm_ms {comm:.3}");
        println!(
            "ddp_comm_ms {:.3}",
            stats.comm_time.as_secs_f64() * 1e3 / stats.iterations.max(1) as f64
        );
        println!("hidden_pct {:.1}", 100.0 * stats.hidden_fraction());
        println!("buckets {sizes:?}");
    }
    Ok(())
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let model = arg("--model", "mlp");
    let steps: usize = arg("--steps", "40").parse()?;
    let threads: usize = arg("--threads", "1").parse()?;
    let ddp = std::env::var_os("WORLD_SIZE").is_some();
    if ddp {
        dist::init_process_group(InitOptions::new("tcp"))?;
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    pool.install(|| -> Result<()> {
        ferrotorch::manual_seed(0);
        match model.as_str() {
            "gpt" => run(
                gpt_model()?,
                Tensor::randint(0, 65, [16, 64])?,
                Tensor::randint(0, 65, [16, 64])?,
                steps,
                ddp,
            ),
            _ => run(
                mnist_mlp()?,
                Tensor::randn([128, 1, 28, 28])?,
                Tensor::randint(0, 10, [128])?,
                steps,
                ddp,
            ),
        }
    })?;
    if ddp {
        dist::destroy_process_group();
    }
    Ok(())
}
