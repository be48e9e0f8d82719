//! The seeds' MNIST training script (seed 003) in Rust, line for line:
//! `transforms.Compose([ToTensor(), Normalize((0.1307,), (0.3081,))])`,
//! DataLoaders with worker threads, the Flatten-Linear(784, 256)-ReLU-
//! Dropout(0.1)-Linear(256, 10) MLP (or, with `--model cnn`, a two-stage
//! CNN), CrossEntropyLoss, AdamW(lr=1e-3), CosineAnnealingLR(T_max=epochs)
//! stepped per epoch, test loss and accuracy after each epoch, and a
//! training checkpoint per epoch (a `torch.save` file PyTorch reads;
//! `--resume` continues from one exactly). A progress bar shows loss and
//! samples/s; the loss curves are written as CSV and PNG.
//!
//! `cargo run --release --example mnist` (the README's main job);
//! `-- --help` lists the flags.

#[path = "../common/mod.rs"]
mod common;
mod train;

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

fn main() -> ExitCode {
    let args = train::Args::parse();
    let start = Instant::now();
    match train::run(&args) {
        Ok(accuracy) => {
            // Under --ddp, rank 0 alone logs (as the training loop does).
            let logs = !args.ddp
                || ferrotorch::distributed::LaunchEnv::detect()
                    .ok()
                    .flatten()
                    .is_none_or(|env| env.rank == 0);
            if logs {
                println!("total time {:.1} s", start.elapsed().as_secs_f64());
            }
            if let Some(accuracy) = accuracy {
                println!("test accuracy: {accuracy:.2}%");
            }
            ExitCode::SUCCESS
        }
        Err(e) => common::report::fail(&*e),
    }
}
