//! all_reduce bandwidth of a process group, as nccl-tests report it: for
//! each size (f32), the time of one all_reduce and the bus bandwidth
//! `bytes / time * 2 (n - 1) / n`; with `--op all_gather` or
//! `--op reduce_scatter` the same for `all_gather_into_tensor` and
//! `reduce_scatter_tensor` (size: the whole tensor; bus bandwidth
//! `bytes / time * (n - 1) / n`). Run under a launcher:
//!
//! `ferrorun --nproc-per-node 2 target/release/examples/allreduce_bw [--backend tcp] [--op all_reduce] [--min-bytes 4096] [--max-bytes 268435456] [--iters N]`
//! (`--iters`: calls per timed loop; by default about 1 GB moved, 5 to 200 calls)
//!
//! Rank 0 prints one line per size: `size_bytes time_us busbw_GB/s`
//! (and, with `--memcpy`, first the one-core memcpy bandwidth).
//! `bench/allreduce.sh` runs it beside the same loop in PyTorch's Gloo.

use std::time::Instant;

use ferrotorch_core::{Tensor, TensorOptions};
use ferrotorch_distributed::{self as dist, InitOptions, ReduceOp};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = arg("--backend", "tcp");
    let min: usize = arg("--min-bytes", "4096").parse()?;
    let max: usize = arg("--max-bytes", "268435456").parse()?;
    let op = arg("--op", "all_reduce");
    dist::init_process_group(InitOptions::new(&backend))?;
    let (rank, n) = (dist::get_rank()?, dist::get_world_size()?);
    if rank == 0 && std::env::args().any(|a| a == "--memcpy") {
        // The machine's limit beside the figures: one core copying 256 MiB.
        let src = vec![1u8; 256 << 20];
        let mut dst = vec![0u8; 256 << 20];
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t0 = Instant::now();
            dst.copy_from_slice(&src);
            best = best.min(t0.elapsed().as_secs_f64());
        }
        std::hint::black_box(&dst);
        println!("memcpy {:.2} GB/s", (256 << 20) as f64 / best / 1e9);
    }
    let mut size = min;
    while size <= max {
        let x = TensorOptions::new().zeros([size / 4])?.add(&Tensor::new(1.0f32)?)?;
        let part = TensorOptions::new().zeros([size / 4 / n])?.add(&Tensor::new(1.0f32)?)?;
        let call = || -> Result<(), dist::DistError> {
            match op.as_str() {
                "all_gather" => dist::all_gather_into_tensor(&x, &part),
                "reduce_scatter" => dist::reduce_scatter_tensor(&part, &x, ReduceOp::Sum),
                _ => dist::all_reduce(&x, ReduceOp::Sum),
            }
        };
        // About 1 GB moved per measurement, 5 to 200 calls.
        let iters = match arg("--iters", "").parse::<usize>() {
            Ok(n) => n.max(1),
            Err(_) => (1usize << 30).div_ceil(size).clamp(5, 200),
        };
        for _ in 0..2 {
            call()?;
        }
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            dist::barrier()?;
            let t0 = Instant::now();
            for _ in 0..iters {
                call()?;
            }
            best = best.min(t0.elapsed().as_secs_f64() / iters as f64);
        }
        if rank == 0 {
            let factor = if op == "all_reduce" { 2.0 } else { 1.0 };
            let busbw = size as f64 / best * factor * (n - 1) as f64 / n as f64 / 1e9;
            println!("{size} {:.1} {busbw:.3}", best * 1e6);
        }
        size *= 4;
    }
    dist::destroy_process_group();
    Ok(())
}
