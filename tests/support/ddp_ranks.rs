//! Running an example's training code on two (or more) ranks in child processes:
//! the test binary starts itself again once per rank with torchrun's
//! variables (the child runs `test` with `child_var` set to the flags),
//! reaps both within a bounded time, and compares checkpoints leaf by
//! leaf. Shared by `tests/mnist_ddp.rs` and `tests/gpt_ddp.rs`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferrotorch::serialize::Value;

/// What one rank did: whether it exited successfully, and its stdout then
/// stderr.
pub struct RankRun {
    pub success: bool,
    pub output: String,
}

/// Runs test `test` of this binary as ranks 0 and 1 of a 2-rank job (one
/// thread each), with `child_var` = `flags` and the `extra` variables;
/// each child is killed after 300 s. Every rank's outcome, in rank order.
#[allow(dead_code)]
pub fn run_two_ranks(test: &str, child_var: &str, flags: &str, extra: &[(&str, &str)]) -> Vec<RankRun> {
    run_ranks(2, test, child_var, flags, extra)
}

/// [`run_two_ranks`] on `n` ranks.
pub fn run_ranks(n: usize, test: &str, child_var: &str, flags: &str, extra: &[(&str, &str)]) -> Vec<RankRun> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let children: Vec<_> = (0..n)
        .map(|r| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", test, "--nocapture"])
                .env(child_var, flags)
                .env("RANK", r.to_string())
                .env("LOCAL_RANK", r.to_string())
                .env("WORLD_SIZE", n.to_string())
                .env("LOCAL_WORLD_SIZE", n.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env("RAYON_NUM_THREADS", "1")
                .envs(extra.iter().copied())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    children
        .into_iter()
        .map(|mut c| {
            while c.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(300) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let out = c.wait_with_output().unwrap();
            RankRun {
                success: out.status.success(),
                output: String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
            }
        })
        .collect()
}

/// Every leaf of a checkpoint value, by path: tensors as their f64
/// values' bits, other values as written.
pub fn flatten(path: String, v: &Value, out: &mut Vec<(String, Vec<u64>, String)>) {
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
            out.push((path, bits, String::new()));
        }
        other => out.push((path, Vec::new(), format!("{other:?}"))),
    }
}

/// The leaves of entries `keys` of the checkpoint at `path` (a dict).
pub fn checkpoint_leaves(path: &std::path::Path, keys: &[&str]) -> Vec<(String, Vec<u64>, String)> {
    let Value::Dict(d) = ferrotorch::serialize::load(path).unwrap() else {
        panic!("a dict")
    };
    let mut out = Vec::new();
    for key in keys {
        flatten((*key).to_owned(), d.get_str(key).unwrap(), &mut out);
    }
    assert!(out.len() > 4, "{out:?}");
    out
}
