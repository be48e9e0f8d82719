//! The gpt example under FSDP, tensor and pipeline parallelism (the
//! example's own code, in child processes started with torchrun's
//! variables), dropout off: `--tp 2` and `--pp 2` (1F1B with 2 and 4
//! microbatches, GPipe, interleaved 1F1B) train as one process does, `--fsdp` on 2 processes as
//! `--ddp` on 2, and `--fsdp --tp 2` on 4 (a 2 x 2 mesh) as `--ddp` on 2;
//! the evaluated train and val losses agree at every evaluation. Flags
//! that do not combine are refused.

#[allow(dead_code)]
#[path = "support/ddp_ranks.rs"]
mod ddp_ranks;
#[allow(dead_code)]
#[path = "../examples/gpt/main.rs"]
mod gpt;

use clap::Parser;

const CHILD: &str = "FERROTORCH_GPT_PARALLEL_CHILD";
const TEST: &str = "sharded_and_tensor_parallel_runs_train_as_ddp_does";

fn flags(out: &std::path::Path, extra: &str) -> String {
    format!(
        "--max-iters 12 --eval-interval 6 --eval-iters 2 --batch-size 4 --block-size 16 --n-layer 2 --n-head 4 \
         --n-embd 32 --dropout 0 --warmup-iters 2 --generate 10 --out-dir {} {extra}",
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

/// Rank 0's output of the example on `n` ranks; every rank must succeed
/// (or, with `fail`, rank 0 must fail).
fn run(n: usize, extra: &str, fail: bool) -> String {
    let out = tempfile::tempdir().unwrap();
    let flags = flags(out.path(), extra);
    let ranks = ddp_ranks::run_ranks(n, TEST, CHILD, &flags, &[]);
    if !fail {
        for (r, run) in ranks.iter().enumerate() {
            assert!(run.success, "rank {r} of gpt {flags} failed:\n{}", run.output);
        }
    }
    let first = ranks.into_iter().next().unwrap();
    assert_eq!(first.success, !fail, "gpt {flags}:\n{}", first.output);
    first.output
}

/// The evaluated (train, val) losses, in order.
fn losses(text: &str) -> Vec<(f64, f64)> {
    let out: Vec<(f64, f64)> = text
        .lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("step")?;
            let (_, losses) = rest.split_once(": train loss ")?;
            let (train, val) = losses.split_once(", val loss ")?;
            Some((train.trim().parse().ok()?, val.trim().parse().ok()?))
        })
        .collect();
    assert_eq!(out.len(), 3, "three evaluations in:\n{text}");
    out
}

fn assert_same(a: &str, b: &str, what: &str) {
    for ((x, y), (u, v)) in losses(a).into_iter().zip(losses(b)) {
        assert!(
            (x - u).abs() <= 2e-4 && (y - v).abs() <= 2e-4,
            "{what}: ({x}, {y}) vs ({u}, {v})\n{a}\n{b}"
        );
    }
}

#[test]
fn sharded_and_tensor_parallel_runs_train_as_ddp_does() {
    if child_main() {
        return;
    }
    let single = run(1, "", false);
    let tp = run(2, "--tp 2", false);
    assert!(tp.contains("TP 2 on 2 processes") && tp.contains("--- sample"), "{tp}");
    assert_same(&tp, &single, "--tp 2 vs one process");
    for m in [2, 4] {
        let pp = run(2, &format!("--pp 2 --microbatches {m}"), false);
        assert!(
            pp.contains(&format!("PP 2 (1F1B, {m} microbatches) on 2 processes")),
            "{pp}"
        );
        assert_same(&pp, &single, "--pp 2 vs one process");
        // The sample too: the last stage's logits reach every process.
        let sample = |t: &str| {
            let after = t.split("--- sample").nth(1)?;
            after.split("\ntest ").next().map(str::to_owned)
        };
        assert_eq!(sample(&pp), sample(&single), "--pp 2 samples as one process");
    }
    let ddp = run(2, "--ddp", false);
    let fsdp = run(2, "--fsdp", false);
    assert!(fsdp.contains("FSDP on 2 processes"), "{fsdp}");
    assert_same(&fsdp, &ddp, "--fsdp vs --ddp on 2");
    let both = run(4, "--fsdp --tp 2", false);
    assert!(both.contains("FSDP x TP 2 on 4 processes: 8 windows"), "{both}");
    assert_same(&both, &ddp, "--fsdp --tp 2 on 4 vs --ddp on 2");
    let e = run(2, "--ddp --fsdp", true);
    assert!(e.contains("--ddp does not combine with --fsdp, --tp or --pp"), "{e}");
    let e = run(2, "--fsdp --resume ckpt.pt", true);
    assert!(e.contains("--resume with --fsdp / --tp / --pp"), "{e}");
    let e = run(2, "--pp 2 --fsdp", true);
    assert!(e.contains("--pp does not combine with --fsdp"), "{e}");
    let e = run(2, "--tp 3", true);
    assert!(e.contains("--tp 3 must divide --n-head 4"), "{e}");
}
