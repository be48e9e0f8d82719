//! The mnist example with `--ddp` on two processes (the example's own
//! training code, in child processes started with torchrun's variables):
//! both ranks train, rank 0 alone writes the checkpoint, whose state dict
//! has DDP's `module.` prefix and which the two ranks agree on (the
//! second run, resumed from it, continues on both).

#[path = "../examples/common/mod.rs"]
mod common;
#[path = "../examples/mnist/train.rs"]
mod train;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use ferrotorch::serialize::{Value, load};

const CHILD: &str = "FERROTORCH_MNIST_DDP_CHILD";

fn child_main() -> bool {
    let Ok(flags) = std::env::var(CHILD) else {
        return false;
    };
    let args = train::Args::parse_from(std::iter::once("mnist").chain(flags.split(' ')));
    if let Err(e) = train::run(&args) {
        eprintln!("child run failed: {e}");
        std::process::exit(1);
    }
    true
}

/// Runs `flags` on 2 ranks; returns rank 0's output.
fn run_ddp(flags: &str) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let children: Vec<_> = (0..2)
        .map(|r| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "mnist_trains_on_two_ranks", "--nocapture"])
                .env(CHILD, flags)
                .env("RANK", r.to_string())
                .env("LOCAL_RANK", r.to_string())
                .env("WORLD_SIZE", "2")
                .env("LOCAL_WORLD_SIZE", "2")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env("RAYON_NUM_THREADS", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    let mut rank0 = String::new();
    for (r, mut c) in children.into_iter().enumerate() {
        while c.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(300) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "rank {r} of mnist {flags} failed:\n{text}");
        if r == 0 {
            rank0 = text;
        } else {
            assert!(!text.contains("stopped after"), "rank 1 does not log: {text}");
        }
    }
    rank0
}

#[test]
fn mnist_trains_on_two_ranks() {
    if child_main() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let text = run_ddp(&format!(
        "--ddp --workers 0 --batch-size 64 --stop-after 30 --out-dir {out}"
    ));
    assert!(
        text.contains("DDP on 2 processes (global batch 128)") && text.contains("stopped after 30 steps"),
        "{text}"
    );
    let ckpt = load(dir.path().join("ckpt_last.pt")).unwrap();
    let Value::Dict(d) = ckpt else { panic!("a dict") };
    let Some(Value::Dict(sd)) = d.get_str("model_state_dict") else {
        panic!("model_state_dict")
    };
    let keys: Vec<String> = sd.iter().map(|(k, _)| format!("{k:?}")).collect();
    assert!(keys.iter().all(|k| k.contains("module.net.")), "{keys:?}");
    // Both ranks resume from rank 0's checkpoint and go on.
    let last = dir.path().join("ckpt_last.pt").display().to_string();
    let text = run_ddp(&format!(
        "--ddp --workers 0 --batch-size 64 --stop-after 40 --out-dir {out} --resume {last}"
    ));
    assert!(
        text.contains("resumed from") && text.contains("stopped after 40 steps"),
        "{text}"
    );
}
