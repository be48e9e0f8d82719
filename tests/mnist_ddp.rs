//! The mnist example with `--ddp` on two processes (the example's own
//! training code, in child processes started with torchrun's variables):
//! both ranks train, rank 0 alone writes the checkpoint, whose state dict
//! has DDP's `module.` prefix and which the two ranks agree on (the
//! second run, resumed from it, continues on both).

#[path = "../examples/common/mod.rs"]
mod common;
#[path = "support/ddp_ranks.rs"]
mod ddp_ranks;
#[path = "../examples/mnist/train.rs"]
mod train;

use std::process::Command;
use std::time::Duration;

use clap::Parser;
use ferrotorch::serialize::{Value, load};

const CHILD: &str = "FERROTORCH_MNIST_DDP_CHILD";

fn child_main() -> bool {
    let Ok(flags) = std::env::var(CHILD) else {
        return false;
    };
    // The restart test: on its first attempt rank 1 stops at step 25 and
    // kills itself (kill -9), as a crashed node would.
    let rank = std::env::var("RANK").unwrap_or_default();
    let flags = match std::env::var("FERRO_KILL_RANK1_AT") {
        Ok(step) if rank == "1" => flags.replace("--stop-after 40", &format!("--stop-after {step}")),
        _ => flags,
    };
    let args = train::Args::parse_from(std::iter::once("mnist").chain(flags.split(' ')));
    if std::env::var("FERRO_KILL_RANK1_AT").is_ok() && rank == "1" {
        let _ = train::run(&args);
        let _ = Command::new("kill")
            .args(["-9", &std::process::id().to_string()])
            .status();
        std::thread::sleep(Duration::from_secs(30));
    }
    if let Err(e) = train::run(&args) {
        eprintln!("child run failed: {e}");
        std::process::exit(1);
    }
    true
}

/// Runs `flags` on 2 ranks; returns rank 0's output.
fn run_ddp(flags: &str) -> String {
    run_ddp_env(flags, &[], true)
}

/// Runs `flags` on 2 ranks with extra variables; with `must_pass`, every
/// rank must succeed. Returns rank 0's output.
fn run_ddp_env(flags: &str, env: &[(&str, &str)], must_pass: bool) -> String {
    let ranks = ddp_ranks::run_two_ranks("mnist_trains_on_two_ranks", CHILD, flags, env);
    if must_pass {
        for (r, run) in ranks.iter().enumerate() {
            assert!(run.success, "rank {r} of mnist {flags} failed:\n{}", run.output);
        }
        assert!(
            !ranks[1].output.contains("stopped after"),
            "rank 1 does not log: {}",
            ranks[1].output
        );
    }
    ranks.into_iter().next().map(|r| r.output).unwrap_or_default()
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

/// The model and optimizer state of a checkpoint.
fn state(path: &std::path::Path) -> Vec<(String, Vec<u64>, String)> {
    ddp_ranks::checkpoint_leaves(path, &["model_state_dict", "optimizer_state_dict"])
}

/// kill -9 of rank 1 mid-run: the other rank fails (its peer is gone);
/// restarted with `--resume auto` (what `ferrorun --max-restarts` does,
/// tested in crates/distributed/tests/launcher.rs), both ranks resume from
/// rank 0's last checkpoint and end with the parameters and optimizer
/// state of an uninterrupted run, bit for bit.
#[test]
fn a_killed_rank_resumes_to_the_uninterrupted_result() {
    if child_main() {
        return;
    }
    let flags = |dir: &std::path::Path| {
        format!(
            "--ddp --workers 0 --batch-size 64 --stop-after 40 --checkpoint-every 10 --resume auto --out-dir {}",
            dir.display()
        )
    };
    let straight = tempfile::tempdir().unwrap();
    run_ddp(&flags(straight.path()));
    let crashed = tempfile::tempdir().unwrap();
    let text = run_ddp_env(&flags(crashed.path()), &[("FERRO_KILL_RANK1_AT", "25")], false);
    assert!(
        !text.contains("stopped after 40"),
        "rank 0 cannot finish without rank 1: {text}"
    );
    let text = run_ddp(&flags(crashed.path()));
    assert!(text.contains("resumed from") && text.contains("step 20"), "{text}");
    let (a, b) = (
        state(&straight.path().join("ckpt_last.pt")),
        state(&crashed.path().join("ckpt_last.pt")),
    );
    assert!(
        a == b,
        "the resumed run's model and optimizer differ from the uninterrupted run's"
    );
}
