//! The gpt example with `--ddp` on two processes (the example's own code,
//! in child processes started with torchrun's variables): a run stopped
//! half-way and resumed with `--resume auto` ends with the model and
//! optimizer state of an uninterrupted run, bit for bit, because the
//! checkpoint holds every rank's batch generator (each rank draws its own
//! windows); a checkpoint of two processes is refused by one.

#[path = "support/ddp_ranks.rs"]
mod ddp_ranks;
#[allow(dead_code)]
#[path = "../examples/gpt/main.rs"]
mod gpt;

use clap::Parser;

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
    let flags = format!("--ddp {flags}");
    let ranks = ddp_ranks::run_two_ranks("a_resumed_ddp_run_ends_as_an_uninterrupted_one", CHILD, &flags, &[]);
    for (r, run) in ranks.iter().enumerate() {
        assert!(run.success, "rank {r} of gpt {flags} failed:\n{}", run.output);
    }
    ranks.into_iter().next().map(|r| r.output).unwrap_or_default()
}

/// The checkpoint's model, optimizer, batch generators and step, leaf by
/// leaf (tensors as their values' bits).
fn state(path: &std::path::Path) -> Vec<(String, Vec<u64>, String)> {
    ddp_ranks::checkpoint_leaves(path, &["model", "optimizer", "batch_rng_states", "iter_num"])
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
    let rows = a.iter().find(|(k, _, _)| k.starts_with("batch_rng_states")).unwrap();
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
