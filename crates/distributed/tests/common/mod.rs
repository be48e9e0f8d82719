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
    launch_in(case, n, limit, "127.0.0.1", |_| Vec::new());
}

/// [`launch`] with extra environment variables for every rank.
#[allow(dead_code)]
pub fn launch_with_env(case: &str, n: usize, limit: Duration, env: &[(&str, &str)]) {
    launch_ranks(case, n, limit, ("127.0.0.1", |_| Vec::new()), env, &[]);
}

/// [`launch`] with rank `r` started under the command `prefix(r)` (such
/// as `ip netns exec NS`), its store at `master_addr`.
#[allow(dead_code)]
pub fn launch_in(case: &str, n: usize, limit: Duration, master_addr: &str, prefix: impl Fn(usize) -> Vec<String>) {
    launch_ranks(case, n, limit, (master_addr, prefix), &[], &[]);
}

/// [`launch`] where the ranks in `dead` kill themselves (`kill -9`): they
/// must die by a signal, every other rank must print "CHILD OK" and exit 0.
#[allow(dead_code)]
pub fn launch_with_dead(case: &str, n: usize, limit: Duration, dead: &[usize]) {
    launch_ranks(case, n, limit, ("127.0.0.1", |_| Vec::new()), &[], dead);
}

/// The case this child process runs (`FERRO_DIST_CASE`, set by the
/// parent test), after it joined the job's tcp group (60 s timeout).
#[allow(dead_code)]
pub fn join_as_child() -> String {
    let case = std::env::var("FERRO_DIST_CASE").expect("started by a parent test");
    let opts = ferrotorch_distributed::InitOptions::new("tcp").timeout(Duration::from_secs(60));
    ferrotorch_distributed::init_process_group(opts).unwrap();
    case
}

/// Checks the error of a step that lost rank `lost`: at step `want`
/// (`step` is where it came), naming the rank, within 30 s of `start`.
#[allow(dead_code)]
pub fn assert_lost_rank(e: &str, (step, want): (usize, usize), lost: usize, start: Instant) {
    assert_eq!(step, want, "failed at step {step}: {e}");
    assert!(
        e.contains(&format!("rank {lost}")),
        "the error names the lost rank: {e}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "failed only after {:?}",
        start.elapsed()
    );
}

/// Kills this process with SIGKILL (a rank lost mid-step).
#[allow(dead_code)]
pub fn kill_me() -> ! {
    let _ = Command::new("kill")
        .args(["-9", &std::process::id().to_string()])
        .status();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// [`launch`] on two hosts of `hosts`: the first half of the ranks on
/// host a (whose address the store takes), the rest on b, with the `env`
/// variables.
#[allow(dead_code)]
pub fn launch_across(case: &str, n: usize, limit: Duration, hosts: &HostPair, env: &[(&str, &str)]) {
    launch_ranks(case, n, limit, (&hosts.ip_a, |r| hosts.exec(r < n / 2)), env, &[]);
}

/// Starts the ranks (rank `r` under the command `prefix(r)`, the store at
/// `master_addr`) and checks them: the ranks in `dead` must die by
/// SIGKILL, the others print "CHILD OK" and exit 0, all within `limit`.
fn launch_ranks(
    case: &str,
    n: usize,
    limit: Duration,
    (master_addr, prefix): (&str, impl Fn(usize) -> Vec<String>),
    env: &[(&str, &str)],
    dead: &[usize],
) {
    let port = free_port().to_string();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<Child> = (0..n)
        .map(|r| {
            let pre = prefix(r);
            let mut cmd = match pre.split_first() {
                Some((first, rest)) => {
                    let mut c = Command::new(first);
                    c.args(rest).arg(&exe);
                    c
                }
                None => Command::new(&exe),
            };
            cmd.args(["--exact", "child", "--ignored", "--nocapture", "--test-threads=1"])
                .env("FERRO_DIST_CASE", case)
                .env("RANK", r.to_string())
                .env("LOCAL_RANK", r.to_string())
                .env("WORLD_SIZE", n.to_string())
                .env("LOCAL_WORLD_SIZE", n.to_string())
                .env("MASTER_ADDR", master_addr)
                .env("MASTER_PORT", &port)
                .envs(env.iter().copied())
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
        let ok = if dead.contains(&r) {
            std::os::unix::process::ExitStatusExt::signal(&out.status) == Some(9)
        } else {
            out.status.success() && text.contains("CHILD OK")
        };
        if !ok {
            failures.push(format!("rank {r} ({}):\n{text}", out.status));
        }
    }
    assert!(
        failures.is_empty(),
        "case {case} on {n} ranks:\n{}",
        failures.join("\n")
    );
}

/// `|a - b| <= rtol * (|b| + max |b|) + atol` element by element (any
/// floating dtype, compared in f32), shapes equal; `what` names the
/// failure. The tensor's largest entry sets the scale: sums in another
/// order move small entries (from cancelling terms) by the tensor's
/// rounding, not their own.
#[allow(dead_code)]
pub fn assert_close(a: &ferrotorch_core::Tensor, b: &ferrotorch_core::Tensor, (rtol, atol): (f32, f32), what: &str) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes");
    let values = |t: &ferrotorch_core::Tensor| {
        t.to_dtype(ferrotorch_core::DType::F32)
            .and_then(|t| t.contiguous())
            .and_then(|t| t.to_vec::<f32>())
            .unwrap()
    };
    let (x, y) = (values(a), values(b));
    let scale = y.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (i, (u, v)) in x.iter().zip(&y).enumerate() {
        assert!(
            (u - v).abs() <= rtol * (v.abs() + scale) + atol,
            "{what}[{i}]: {u} vs {v} (rtol {rtol}, atol {atol})"
        );
    }
}

/// Two network namespaces joined by a veth pair, made by the test and
/// removed when dropped: hosts `a` (`ip_a`) and `b` (`ip_b`) on a /24 of
/// 10.231.0.0/16 chosen from the process id. Traffic stays between them.
#[allow(dead_code)]
pub struct HostPair {
    pub a: String,
    pub b: String,
    pub ip_a: String,
    pub ip_b: String,
}

#[allow(dead_code)]
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[allow(dead_code)]
impl HostPair {
    /// The namespaces, or why they cannot be made here (not root, no `ip`,
    /// no namespaces); with FERROTORCH_REQUIRE_NETNS set that is a panic.
    pub fn create(tag: &str) -> Option<HostPair> {
        let id = std::process::id();
        let net = 1 + id % 250;
        let pair = HostPair {
            a: format!("ft{tag}a{id}"),
            b: format!("ft{tag}b{id}"),
            ip_a: format!("10.231.{net}.1"),
            ip_b: format!("10.231.{net}.2"),
        };
        match pair.setup() {
            Ok(()) => Some(pair),
            Err(why) => {
                drop(pair);
                assert!(
                    std::env::var_os("FERROTORCH_REQUIRE_NETNS").is_none(),
                    "FERROTORCH_REQUIRE_NETNS is set but network namespaces cannot be made: {why}"
                );
                eprintln!("skipped: network namespaces cannot be made here (needs root and iproute2): {why}");
                None
            }
        }
    }

    fn setup(&self) -> Result<(), String> {
        let (va, vb) = (format!("{}v", self.a), format!("{}v", self.b));
        ip(&["netns", "add", &self.a])?;
        ip(&["netns", "add", &self.b])?;
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
        ip(&["link", "set", &va, "netns", &self.a])?;
        ip(&["link", "set", &vb, "netns", &self.b])?;
        for (ns, dev, addr) in [(&self.a, &va, &self.ip_a), (&self.b, &vb, &self.ip_b)] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    /// `ip netns exec NS` for host `a` (`true`) or `b`.
    pub fn exec(&self, on_a: bool) -> Vec<String> {
        let ns = if on_a { &self.a } else { &self.b };
        ["ip", "netns", "exec", ns].iter().map(|s| s.to_string()).collect()
    }
}

impl Drop for HostPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth pair, and so both.
        let _ = ip(&["netns", "delete", &self.a]);
        let _ = ip(&["netns", "delete", &self.b]);
    }
}

/// The bench venv's `torchrun`, or `None` (after saying why) when absent;
/// with FERROTORCH_REQUIRE_TORCH set (CI) its absence is a panic.
#[allow(dead_code)]
pub fn torchrun() -> Option<std::path::PathBuf> {
    let torchrun = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/.venv/bin/torchrun");
    if torchrun.exists() {
        return Some(torchrun);
    }
    assert!(
        std::env::var_os("FERROTORCH_REQUIRE_TORCH").is_none(),
        "FERROTORCH_REQUIRE_TORCH is set but {} is missing",
        torchrun.display()
    );
    eprintln!(
        "skipped: no torchrun at {} (bash bench/setup_venv.sh)",
        torchrun.display()
    );
    None
}
