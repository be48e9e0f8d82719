//! `ferrorun`, torchrun's role: starts `--nproc-per-node` workers on this
//! node with torchrun's variables, watches them, and when one fails stops
//! the rest and says which rank failed, how, and the end of its stderr;
//! `--max-restarts` restarts the whole group (the workers see
//! TORCHELASTIC_RESTART_COUNT and resume from their checkpoints).
//!
//! Flags (torchrun's, `-` or `_` spelled): `--nproc-per-node N`,
//! `--nnodes N` (or `N:N`), `--node-rank R`, `--master-addr A`,
//! `--master-port P`, `--rdzv-endpoint A:P`, `--max-restarts K`,
//! `--monitor-interval SECONDS`, `--standalone` (one node, a free port),
//! `--no-python` (accepted: workers are programs), `--run-id ID`, then
//! the program and its arguments (after an optional `--`).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{DistError, Result};

/// Lines of a failed worker's stderr shown in the report.
const TAIL_LINES: usize = 20;
/// How long workers get to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The launcher's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchConfig {
    /// Workers on this node.
    pub nproc_per_node: usize,
    /// Nodes in the job.
    pub nnodes: usize,
    /// This node's index.
    pub node_rank: usize,
    /// The store's host (rank 0's node).
    pub master_addr: String,
    /// The store's port.
    pub master_port: u16,
    /// Restarts of the whole group allowed after a failure.
    pub max_restarts: u32,
    /// How often the workers are checked.
    pub monitor_interval: Duration,
    /// The job's id (TORCHELASTIC_RUN_ID).
    pub run_id: String,
    /// The program and its arguments.
    pub program: Vec<String>,
}

fn usage() -> String {
    "usage: ferrorun [--nproc-per-node N] [--nnodes N] [--node-rank R] [--master-addr A] \
     [--master-port P] [--rdzv-endpoint A:P] [--max-restarts K] [--monitor-interval S] \
     [--standalone] [--no-python] [--run-id ID] [--] PROGRAM [ARGS...]"
        .to_owned()
}

impl LaunchConfig {
    /// Parses torchrun-style arguments (without the program name).
    pub fn parse(args: &[String]) -> Result<LaunchConfig> {
        let mut c = LaunchConfig {
            nproc_per_node: 1,
            nnodes: 1,
            node_rank: 0,
            master_addr: "127.0.0.1".into(),
            master_port: 29500,
            max_restarts: 0,
            monitor_interval: Duration::from_millis(100),
            run_id: "none".into(),
            program: Vec::new(),
        };
        let bad = |msg: String| DistError::InvalidArgument(format!("ferrorun: {msg}\n{}", usage()));
        let mut i = 0;
        while i < args.len() {
            let arg = args[i].as_str();
            if arg == "--" {
                c.program = args[i + 1..].to_vec();
                break;
            }
            if !arg.starts_with("--") {
                c.program = args[i..].to_vec();
                break;
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) => (f.replace('_', "-"), Some(v.to_owned())),
                None => (arg.replace('_', "-"), None),
            };
            let mut value = || -> Result<String> {
                if let Some(v) = &inline {
                    return Ok(v.clone());
                }
                i += 1;
                args.get(i).cloned().ok_or_else(|| bad(format!("{flag} needs a value")))
            };
            let number = |v: String, what: &str| -> Result<u64> {
                v.parse::<u64>()
                    .map_err(|_| bad(format!("{what} {v:?} is not a number")))
            };
            match flag.as_str() {
                "--nproc-per-node" => c.nproc_per_node = number(value()?, "--nproc-per-node")? as usize,
                "--nnodes" => {
                    let v = value()?;
                    let (lo, hi) = v.split_once(':').unwrap_or((&v, &v));
                    if lo != hi {
                        return Err(bad(format!("--nnodes {v}: elastic node counts are not supported")));
                    }
                    c.nnodes = number(hi.to_owned(), "--nnodes")? as usize;
                }
                "--node-rank" => c.node_rank = number(value()?, "--node-rank")? as usize,
                "--master-addr" => c.master_addr = value()?,
                "--master-port" => {
                    let v = value()?;
                    c.master_port = v
                        .parse()
                        .map_err(|_| bad(format!("--master-port {v:?} is not a port")))?;
                }
                "--rdzv-endpoint" => {
                    let v = value()?;
                    let (h, p) = v
                        .rsplit_once(':')
                        .ok_or_else(|| bad(format!("--rdzv-endpoint {v:?} has no port")))?;
                    c.master_addr = h.trim_matches(['[', ']']).to_owned();
                    c.master_port = p
                        .parse()
                        .map_err(|_| bad(format!("--rdzv-endpoint {v:?} has no valid port")))?;
                }
                "--max-restarts" => c.max_restarts = number(value()?, "--max-restarts")? as u32,
                "--monitor-interval" => {
                    let v = value()?;
                    let s: f64 = v
                        .parse()
                        .map_err(|_| bad(format!("--monitor-interval {v:?} is not a number")))?;
                    if !(s.is_finite() && s > 0.0) {
                        return Err(bad(format!("--monitor-interval {v} must be positive")));
                    }
                    c.monitor_interval = Duration::from_secs_f64(s);
                }
                "--run-id" | "--rdzv-id" => c.run_id = value()?,
                "--standalone" => {
                    c.nnodes = 1;
                    c.node_rank = 0;
                    c.master_addr = "127.0.0.1".into();
                    c.master_port = std::net::TcpListener::bind("127.0.0.1:0")
                        .and_then(|l| l.local_addr())
                        .map(|a| a.port())
                        .map_err(|e| DistError::io("ferrorun --standalone: a free port", e))?;
                }
                "--no-python" | "--no-py" => {}
                "--rdzv-backend" => {
                    let v = value()?;
                    if v != "static" && v != "c10d" {
                        return Err(bad(format!(
                            "--rdzv-backend {v}: only static and c10d endpoints are supported"
                        )));
                    }
                }
                "--help" | "-h" => return Err(bad("help".into())),
                other => return Err(bad(format!("unknown flag {other}"))),
            }
            i += 1;
        }
        if c.program.is_empty() {
            return Err(bad("no program to run".into()));
        }
        if c.nproc_per_node == 0 || c.nnodes == 0 {
            return Err(bad("--nproc-per-node and --nnodes must be at least 1".into()));
        }
        if c.node_rank >= c.nnodes {
            return Err(bad(format!(
                "--node-rank {} is not below --nnodes {}",
                c.node_rank, c.nnodes
            )));
        }
        Ok(c)
    }

    /// The number of workers in the job.
    pub fn world_size(&self) -> usize {
        self.nnodes * self.nproc_per_node
    }
}

/// One running worker.
struct Worker {
    rank: usize,
    local_rank: usize,
    child: Child,
    tail: Arc<Mutex<VecDeque<String>>>,
    echo: Option<std::thread::JoinHandle<()>>,
}

/// How a worker ended.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Its global rank (`usize::MAX` when ferrorun itself was interrupted).
    pub rank: usize,
    /// Its local rank.
    pub local_rank: usize,
    /// How it ended: `exit code 3` or `signal 9 (SIGKILL)`.
    pub how: String,
    /// The last lines of its stderr.
    pub stderr_tail: Vec<String>,
    /// Other workers seen failed at the same check (rank, how): usually
    /// the consequence (they lost their peer).
    pub also: Vec<(usize, String)>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.rank == usize::MAX {
            return writeln!(f, "{}", self.how);
        }
        writeln!(
            f,
            "worker rank {} (local rank {}) failed: {}",
            self.rank, self.local_rank, self.how
        )?;
        if !self.stderr_tail.is_empty() {
            writeln!(f, "last lines of its stderr:")?;
            for l in &self.stderr_tail {
                writeln!(f, "  {l}")?;
            }
        }
        for (rank, how) in &self.also {
            writeln!(f, "also failed at the same time: worker rank {rank}: {how}")?;
        }
        Ok(())
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => {
            let name = match s {
                1 => " (SIGHUP)",
                2 => " (SIGINT)",
                6 => " (SIGABRT)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                15 => " (SIGTERM)",
                _ => "",
            };
            format!("signal {s}{name}")
        }
        _ => "an unknown status".into(),
    }
}

/// Runs the job: starts the workers, watches them, restarts the group up
/// to `max_restarts` times after a failure. Returns the failure that ended
/// the job (after the restarts ran out), or `None` when every worker
/// exited 0. `stop` (set by SIGINT / SIGTERM) stops the workers.
pub fn run(c: &LaunchConfig, stop: &AtomicBool) -> Result<Option<Failure>> {
    let mut restart = 0u32;
    loop {
        let mut workers = spawn_all(c, restart)?;
        let outcome = watch(c, &mut workers, stop);
        stop_all(&mut workers);
        match outcome {
            Ok(()) => return Ok(None),
            Err(f) => {
                if stop.load(Ordering::SeqCst) || restart >= c.max_restarts {
                    return Ok(Some(f));
                }
                restart += 1;
                eprint!("ferrorun: {f}");
                eprintln!(
                    "ferrorun: restarting the workers ({restart} of {} restarts)",
                    c.max_restarts
                );
            }
        }
    }
}

fn spawn_all(c: &LaunchConfig, restart: u32) -> Result<Vec<Worker>> {
    let world = c.world_size();
    let threads_set = std::env::var_os("OMP_NUM_THREADS").is_some();
    let mut workers = Vec::with_capacity(c.nproc_per_node);
    for local in 0..c.nproc_per_node {
        let rank = c.node_rank * c.nproc_per_node + local;
        let mut cmd = Command::new(&c.program[0]);
        cmd.args(&c.program[1..])
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", local.to_string())
            .env("WORLD_SIZE", world.to_string())
            .env("LOCAL_WORLD_SIZE", c.nproc_per_node.to_string())
            .env("GROUP_RANK", c.node_rank.to_string())
            .env("ROLE_RANK", rank.to_string())
            .env("ROLE_WORLD_SIZE", world.to_string())
            .env("ROLE_NAME", "default")
            .env("MASTER_ADDR", &c.master_addr)
            .env("MASTER_PORT", c.master_port.to_string())
            .env("TORCHELASTIC_RESTART_COUNT", restart.to_string())
            .env("TORCHELASTIC_MAX_RESTARTS", c.max_restarts.to_string())
            .env("TORCHELASTIC_RUN_ID", &c.run_id)
            .stdin(Stdio::null())
            .stderr(Stdio::piped());
        if !threads_set && c.nproc_per_node > 1 {
            // torchrun's default: one thread per worker, so N workers do
            // not fight over the cores.
            cmd.env("OMP_NUM_THREADS", "1");
            if std::env::var_os("RAYON_NUM_THREADS").is_none() {
                cmd.env("RAYON_NUM_THREADS", "1");
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| DistError::io(format!("ferrorun: start {}", c.program[0]), e))?;
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_LINES)));
        let echo = child.stderr.take().map(|err| {
            let tail = tail.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    let _ = writeln!(std::io::stderr(), "{line}");
                    let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                    if t.len() == TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            })
        });
        workers.push(Worker {
            rank,
            local_rank: local,
            child,
            tail,
            echo,
        });
    }
    Ok(workers)
}

/// Polls until every worker exited 0, one failed, or `stop` is set.
fn watch(c: &LaunchConfig, workers: &mut [Worker], stop: &AtomicBool) -> std::result::Result<(), Failure> {
    let mut done = vec![false; workers.len()];
    loop {
        if stop.load(Ordering::SeqCst) {
            return Err(Failure {
                rank: usize::MAX,
                local_rank: usize::MAX,
                how: "ferrorun was interrupted (the signal was forwarded to the workers)".into(),
                stderr_tail: Vec::new(),
                also: Vec::new(),
            });
        }
        // Every worker that failed since the last check; the first named
        // is the one killed by a signal, else the lowest rank: the others
        // usually failed because they lost it.
        let mut failed: Vec<(usize, ExitStatus)> = Vec::new();
        for (k, w) in workers.iter_mut().enumerate() {
            if done[k] {
                continue;
            }
            match w.child.try_wait() {
                Ok(Some(status)) if status.success() => done[k] = true,
                Ok(Some(status)) => failed.push((k, status)),
                Ok(None) => {}
                Err(e) => {
                    return Err(Failure {
                        rank: w.rank,
                        local_rank: w.local_rank,
                        how: format!("could not be watched: {e}"),
                        stderr_tail: Vec::new(),
                        also: Vec::new(),
                    });
                }
            }
        }
        if !failed.is_empty() {
            use std::os::unix::process::ExitStatusExt;
            failed.sort_by_key(|(k, st)| (st.signal().is_none(), *k));
            let (k, status) = failed[0];
            let w = &mut workers[k];
            if let Some(h) = w.echo.take() {
                let _ = h.join();
            }
            let tail = w
                .tail
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned()
                .collect();
            return Err(Failure {
                rank: w.rank,
                local_rank: w.local_rank,
                how: describe(status),
                stderr_tail: tail,
                also: failed[1..]
                    .iter()
                    .map(|(k, st)| (workers[*k].rank, describe(*st)))
                    .collect(),
            });
        }
        if done.iter().all(|&d| d) {
            return Ok(());
        }
        std::thread::sleep(c.monitor_interval);
    }
}

/// SIGTERM to every live worker, SIGKILL after the grace; reaps them all.
fn stop_all(workers: &mut [Worker]) {
    for w in workers.iter_mut() {
        if let Ok(None) = w.child.try_wait()
            && let Some(pid) = rustix::process::Pid::from_raw(w.child.id() as i32)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
    let start = Instant::now();
    for w in workers.iter_mut() {
        loop {
            match w.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if start.elapsed() > STOP_GRACE => {
                    let _ = w.child.kill();
                    let _ = w.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        if let Some(h) = w.echo.take() {
            let _ = h.join();
        }
    }
}
