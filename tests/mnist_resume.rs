//! Exact resume of the mnist example: training N steps straight, and the
//! same N steps in three processes (each resuming from the checkpoint the
//! one before wrote: mid-epoch, across an epoch's end, with other worker
//! counts) end in the same checkpoint: every parameter, optimizer and
//! scheduler value and random state bit for bit.
//!
//! The test runs the example's own training code (`examples/mnist/`) in
//! child processes: it starts its own executable again with the run's flags
//! in `FERROTORCH_MNIST_CHILD`.

#[path = "../examples/common/mod.rs"]
mod common;
#[path = "../examples/mnist/train.rs"]
mod train;

use std::path::Path;
use std::process::Command;

use clap::Parser;
use ferrotorch::serialize::{Value, load};

const CHILD: &str = "FERROTORCH_MNIST_CHILD";

/// In a child: train with the flags in `CHILD` and exit.
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

/// Trains in a fresh process with `flags`.
fn run(flags: &str) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "resumed_runs_equal_the_straight_run", "--nocapture"])
        .env(CHILD, flags)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mnist {flags} failed:\n{text}");
    assert!(
        text.contains("stopped after") || text.contains("Epoch"),
        "mnist {flags}:\n{text}"
    );
}

fn checkpoint(path: &Path) -> Value {
    load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn resumed_runs_equal_the_straight_run() {
    if child_main() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| dir.path().join(name);
    // Batch 256: 235 steps an epoch, so step 400 lies in the second epoch.
    let common = "--batch-size 256 --epochs 3 --seed 5 --data-dir data/mnist --out-dir";
    let straight = out("straight");
    run(&format!("{common} {} --stop-after 400 --workers 2", straight.display()));
    let (a, b, c) = (out("a"), out("b"), out("c"));
    // Stop mid-epoch 1; resume across the epoch's end to mid-epoch 2; resume to 400.
    run(&format!("{common} {} --stop-after 100 --workers 0", a.display()));
    let a_last = a.join("ckpt_last.pt");
    run(&format!(
        "{common} {} --stop-after 300 --workers 1 --resume {}",
        b.display(),
        a_last.display()
    ));
    let b_last = b.join("ckpt_last.pt");
    run(&format!(
        "{common} {} --stop-after 400 --workers 2 --resume {}",
        c.display(),
        b_last.display()
    ));

    let want = checkpoint(&straight.join("ckpt_last.pt"));
    let got = checkpoint(&c.join("ckpt_last.pt"));
    let (w, g) = (want.as_dict().unwrap(), got.as_dict().unwrap());
    assert_eq!(w.get_str("step").and_then(Value::as_i64), Some(400));
    assert_eq!(
        w.get_str("epoch").and_then(Value::as_i64),
        Some(1),
        "step 400 is in the second epoch"
    );
    for (key, value) in w.iter() {
        let other = g
            .get(key)
            .unwrap_or_else(|| panic!("the resumed checkpoint has no {key}"));
        assert!(
            value.same(other),
            "{key} differs between the straight and the resumed run"
        );
    }
    assert_eq!(w.len(), g.len());
    // The first epoch's checkpoint, written by the second process, equals the straight run's too.
    let ep1 = checkpoint(&straight.join("ckpt_ep1.pt"));
    assert!(ep1.same(&checkpoint(&b.join("ckpt_ep1.pt"))), "ckpt_ep1.pt differs");
    // And the mid-epoch one is really mid-epoch.
    let mid = checkpoint(&a_last);
    assert_eq!(
        mid.as_dict().unwrap().get_str("step_in_epoch").and_then(Value::as_i64),
        Some(100)
    );
}

#[test]
fn resuming_with_other_flags_is_an_error_naming_them() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let flags = |extra: &str| {
        let s = format!(
            "--batch-size 512 --epochs 1 --seed 1 --workers 0 --data-dir data/mnist --out-dir {} {extra}",
            dir.path().display()
        );
        train::Args::parse_from(std::iter::once("mnist").chain(s.split(' ')))
    };
    assert!(train::run(&flags("--stop-after 3")).unwrap().is_none());
    let last = dir.path().join("ckpt_last.pt");
    let resume = format!("--resume {} --stop-after 5", last.display());
    let err = train::run(&flags(&format!("{resume} --lr 0.5")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("other flags") && err.contains("--lr"), "{err}");
    let missing = format!("--resume {}", dir.path().join("nope.pt").display());
    let err = train::run(&flags(&missing)).unwrap_err().to_string();
    assert!(err.contains("nope.pt"), "{err}");
}
