//! `ferrorun` (and PyTorch's own `torchrun --no-python`) starting real
//! workers: the variables they get, a failed worker reported with its
//! rank, status and stderr while the others are stopped, a kill -9, and
//! `--max-restarts` restarting the group.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use dist::launcher::LaunchConfig;
use dist::{InitOptions, ReduceOp};
use ferrotorch_core::Tensor;
use ferrotorch_distributed as dist;

mod common;
use common::free_port;

fn ferrorun(flags: &[&str], case: &str) -> (Output, Duration) {
    let exe = std::env::current_exe().unwrap();
    let port = free_port().to_string();
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_ferrorun"))
        .args(flags)
        .args(["--master-port", &port, "--"])
        .arg(exe)
        .args(["--exact", "child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("FERRO_DIST_CASE", case)
        .output()
        .unwrap();
    (out, t0.elapsed())
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
#[ignore = "the entry point of the workers that the other tests start"]
fn child() {
    let case = std::env::var("FERRO_DIST_CASE").expect("started by a parent test");
    let rank: usize = std::env::var("RANK").unwrap().parse().unwrap();
    let restart: u32 = std::env::var("TORCHELASTIC_RESTART_COUNT").map_or(0, |v| v.parse().unwrap());
    assert!(std::env::var("LOCAL_RANK").is_ok() && std::env::var("LOCAL_WORLD_SIZE").is_ok());
    dist::init_process_group(InitOptions::new("tcp").timeout(Duration::from_secs(30))).unwrap();
    let n = dist::get_world_size().unwrap();
    assert_eq!(dist::get_rank().unwrap(), rank);
    assert_eq!(dist::local_rank(), rank, "one node: local rank = rank");
    let x = Tensor::new([rank as f32]).unwrap();
    dist::all_reduce(&x, ReduceOp::Sum).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [(n * (n - 1) / 2) as f32]);
    let fail = match case.as_str() {
        "env" => false,
        "fail" => rank == 1,
        "fail_first" => rank == 1 && restart == 0,
        "kill" => {
            if rank == 1 {
                let _ = Command::new("kill")
                    .args(["-9", &std::process::id().to_string()])
                    .status();
                std::thread::sleep(Duration::from_secs(30));
            }
            false
        }
        other => panic!("unknown case {other}"),
    };
    if fail {
        eprintln!("boom: rank {rank} fails on purpose");
        std::process::exit(3);
    }
    // The others wait here for the failed rank, until stopped.
    dist::barrier().unwrap();
    println!("CHILD OK rank {rank} restart {restart}");
    dist::destroy_process_group();
}

#[test]
fn workers_get_torchruns_variables() {
    let (out, _) = ferrorun(&["--nproc-per-node", "3"], "env");
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    assert_eq!(so.matches("CHILD OK").count(), 3, "{so}");
}

#[test]
fn a_failed_worker_is_reported_and_the_rest_stopped() {
    let (out, took) = ferrorun(&["--nproc-per-node", "3", "--monitor-interval", "0.05"], "fail");
    let (so, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{so}\n{se}");
    assert!(se.contains("worker rank 1 (local rank 1) failed: exit code 3"), "{se}");
    assert!(
        se.contains("last lines of its stderr") && se.contains("boom: rank 1"),
        "{se}"
    );
    assert!(!so.contains("CHILD OK"), "the others were stopped: {so}");
    assert!(took < Duration::from_secs(20), "stopped promptly: {took:?}");
}

#[test]
fn a_killed_worker_is_named_with_its_signal() {
    let (out, _) = ferrorun(&["--nproc-per-node", "2"], "kill");
    let (so, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{so}\n{se}");
    assert!(
        se.contains("worker rank 1 (local rank 1) failed: signal 9 (SIGKILL)"),
        "{se}"
    );
}

#[test]
fn max_restarts_restarts_the_group() {
    let (out, _) = ferrorun(&["--nproc-per-node", "2", "--max-restarts", "2"], "fail_first");
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    assert!(se.contains("restarting the workers (1 of 2 restarts)"), "{se}");
    assert_eq!(
        so.matches("restart 1").count(),
        2,
        "both ranks finished on the restart: {so}"
    );
}

#[test]
fn pytorchs_torchrun_starts_our_binaries() {
    let Some(torchrun) = common::torchrun() else { return };
    let port = free_port().to_string();
    let out = Command::new(&torchrun)
        .args(["--nproc-per-node", "2", "--master-port", &port, "--no-python"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("FERRO_DIST_CASE", "env")
        .output()
        .unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    assert_eq!(so.matches("CHILD OK").count(), 2, "{so}\n{se}");
}

#[test]
fn flags_parse_as_torchruns() {
    let args = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let c = LaunchConfig::parse(&args(
        "--nproc_per_node=4 --nnodes 2:2 --node-rank 1 --rdzv-endpoint 10.0.0.1:1234 --max-restarts 3 prog -x",
    ))
    .unwrap();
    assert_eq!((c.nproc_per_node, c.nnodes, c.node_rank, c.world_size()), (4, 2, 1, 8));
    assert_eq!(
        (c.master_addr.as_str(), c.master_port, c.max_restarts),
        ("10.0.0.1", 1234, 3)
    );
    assert_eq!(c.program, ["prog", "-x"]);
    for bad in [
        "--nnodes 1:4 p",
        "--node-rank 2 --nnodes 2 p",
        "--nproc-per-node x p",
        "--bogus p",
        "--nproc-per-node 2",
    ] {
        let err = LaunchConfig::parse(&args(bad)).unwrap_err().to_string();
        assert!(err.contains("ferrorun:") && err.contains("usage"), "{bad}: {err}");
    }
}
