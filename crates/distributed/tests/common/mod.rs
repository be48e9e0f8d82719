//! The multi-process harness of the tests: a parent test starts its own
//! test binary once per rank (the ignored `child` test of the file is the
//! entry point) with torchrun's variables, and reaps every child within a
//! bounded time.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port free at the time of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `case` on `n` processes; every one must print "CHILD OK" and exit
/// 0 within `limit` (what outlives it is killed).
#[allow(dead_code)]
pub fn launch(case: &str, n: usize, limit: Duration) {
    let port = free_port().to_string();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<Child> = (0..n)
        .map(|r| {
            Command::new(&exe)
                .args(["--exact", "child", "--ignored", "--nocapture", "--test-threads=1"])
                .env("FERRO_DIST_CASE", case)
                .env("RANK", r.to_string())
                .env("LOCAL_RANK", r.to_string())
                .env("WORLD_SIZE", n.to_string())
                .env("LOCAL_WORLD_SIZE", n.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    let mut failures = Vec::new();
    for (r, mut c) in children.into_iter().enumerate() {
        loop {
            if c.try_wait().unwrap().is_some() {
                break;
            }
            if start.elapsed() > limit {
                let _ = c.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = c.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() || !text.contains("CHILD OK") {
            failures.push(format!("rank {r} ({}):\n{text}", out.status));
        }
    }
    assert!(
        failures.is_empty(),
        "case {case} on {n} ranks:\n{}",
        failures.join("\n")
    );
}
