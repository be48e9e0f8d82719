//! The gpt example with `--ddp` on two processes (the example's own code,
//! in child processes started with torchrun's variables): a run stopped
//! half-way and resumed with `--resume auto` ends with the model and
//! optimizer state of an uninterrupted run, bit for bit, because the
//! checkpoint holds every rank's batch generator (each rank draws its own
//! windows); a checkpoint of two processes is refused by one.

#[allow(dead_code)]
#[path = "../examples/gpt/main.rs"]
mod gpt;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use ferrotorch::serialize::{Value, load};

const CHILD: &str = "FERROTORCH_GPT_DDP_CHILD";

/// A small model and run: 8 steps, a checkpoint and evaluation every 4,
/// dropout on (so the global generator matters too).
fn flags(out: &std::path::Path, extra: &str) -> String {
    format!(
        "--max-iters 8 --eval-interval 4 --eval-iters 2 --batch-size 4 --block-size 16 --n-layer 1 --n-head 2 \
         --n-embd 32 --dropout 0.1 --warmup-iters 2 --generate 10 --resume auto --out-dir {} {extra}",
        out.display()
    )
}

fn child_main() -> bool {
    let Ok(flags) = std::env::var(CHILD) else {
        return false;
    };
    let args = gpt::Args::parse_from(std::iter::once("gpt").chain(flags.split_whitespace()));
    if let Err(e) = gpt::run(args) {
        eprintln!("child run failed: {e}");
        std::process::exit(1);
    }
    true
}

/// Runs the example with `flags` on 2 ranks, each of which must succeed;
/// returns rank 0's output.
fn run_ddp(flags: &str) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let children: Vec<_> = (0..2)
        .map(|r| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "a_resumed_ddp_run_ends_as_an_uninterrupted_one",
                    "--nocapture",
                ])
                .env(CHILD, format!("--ddp {flags}"))
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
        assert!(out.status.success(), "rank {r} of gpt {flags} failed:\n{text}");
        if r == 0 {
            rank0 = text;
        }
    }
    rank0
}

/// The checkpoint's model, optimizer and batch generators, leaf by leaf
/// (tensors as their values' bits).
fn state(path: &std::path::Path) -> Vec<(String, Vec<u64>)> {
    let Value::Dict(d) = load(path).unwrap() else {
        panic!("a dict")
    };
    let mut out = Vec::new();
    for key in ["model", "optimizer", "batch_rng_states", "iter_num"] {
        flatten(key.to_owned(), d.get_str(key).unwrap(), &mut out);
    }
    assert!(out.len() > 8, "{out:?}");
    out
}

fn flatten(path: String, v: &Value, out: &mut Vec<(String, Vec<u64>)>) {
    match v {
        Value::Dict(d) => d.iter().for_each(|(k, x)| flatten(format!("{path}.{k:?}"), x, out)),
        Value::List(l) | Value::Tuple(l) => l
            .iter()
            .enumerate()
            .for_each(|(i, x)| flatten(format!("{path}[{i}]"), x, out)),
        Value::Tensor(t) => {
            let bits = t
                .to_dtype(ferrotorch::DType::F64)
                .unwrap()
                .to_vec::<f64>()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            out.push((path, bits));
        }
        other => out.push((format!("{path} = {other:?}"), Vec::new())),
    }
}

#[test]
fn a_resumed_ddp_run_ends_as_an_uninterrupted_one() {
    if child_main() {
        return;
    }
    let straight = tempfile::tempdir().unwrap();
    let text = run_ddp(&flags(straight.path(), ""));
    assert!(
        text.contains("DDP on 2 processes") && text.contains("trained 8 steps"),
        "{text}"
    );
    let stopped = tempfile::tempdir().unwrap();
    let text = run_ddp(&flags(stopped.path(), "--stop-after 4"));
    assert!(text.contains("stopped after 4 steps"), "{text}");
    let text = run_ddp(&flags(stopped.path(), ""));
    assert!(
        text.contains("resumed from") && text.contains("at step 4") && text.contains("trained 4 steps"),
        "{text}"
    );
    let (a, b) = (
        state(&straight.path().join("ckpt.pt")),
        state(&stopped.path().join("ckpt.pt")),
    );
    let rows = a.iter().find(|(k, _)| k.starts_with("batch_rng_states")).unwrap();
    assert!(!rows.1.is_empty(), "the ranks' generator states are saved");
    let first_diff = a.iter().zip(&b).find(|(x, y)| x != y).map(|(x, _)| x.0.clone());
    assert!(
        a.len() == b.len() && first_diff.is_none(),
        "the resumed run differs from the uninterrupted one at {first_diff:?}"
    );
    // One process cannot resume the checkpoint of two (its steps' batches
    // would be half as large): a clear error, naming the process count.
    let args = gpt::Args::parse_from(std::iter::once("gpt").chain(flags(stopped.path(), "").split_whitespace()));
    let err = gpt::run(args).unwrap_err().to_string();
    assert!(err.contains("world_size") && err.contains("process-count"), "{err}");
}
