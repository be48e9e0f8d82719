//! The `tcp` backend: ferrotorch's embedded communication library (no
//! system package). Connections between every pair of ranks (`mesh.rs`),
//! ring and tree algorithms (`algorithms.rs`), and one worker thread per
//! group that carries out the calls in submission order and completes
//! their [`Work`]s, so calls return at once and communication overlaps
//! the caller's computation.
//!
//! A failure (a timeout, a dead peer, a mismatched collective) fails the
//! call, is sent to every other rank so they fail at once too, and leaves
//! the group unusable: later calls fail with the first error, as an
//! aborted NCCL communicator does.

mod algorithms;
mod cma;
mod cross_memory;
mod mesh;
mod shm;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrotorch_core::Tensor;
use ferrotorch_core::backend::TensorExt;

use crate::backend::{Backend, next_job};
use crate::collective::Collective;
use crate::error::{DistError, Result};
use crate::reduce_op::{ReduceOp, finish_avg};
use crate::store::Store;
use crate::tensor_bytes;
use crate::work::Work;
use algorithms::{Fail, Step, even_blocks};
use mesh::{Mesh, P2P_SEQ};

/// One submitted call.
struct Job {
    call: Collective,
    seq: u64,
    work: Work,
}

/// What carrying out calls remembers from one call to the next: the
/// failure that made the group unusable, the point-to-point counters and
/// the receives waiting for their message. The worker thread holds it
/// while it runs a call, and so does a call run on its caller's thread.
#[derive(Default)]
struct Runner {
    broken: Option<String>,
    p2p: P2pCounters,
    pending: Vec<PendingRecv>,
}

/// The `tcp` backend of one group.
pub struct TcpBackend {
    rank: usize,
    size: usize,
    /// The worker's queue; sequence numbers are taken under its lock, so
    /// calls reach the worker in sequence order.
    queue: Mutex<Option<mpsc::Sender<Job>>>,
    next_seq: AtomicU64,
    /// Calls submitted and not finished yet (receives included).
    outstanding: Arc<AtomicUsize>,
    runner: Arc<Mutex<Runner>>,
    mesh: Arc<Mesh>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for TcpBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpBackend")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl TcpBackend {
    /// Connects rank `rank` of the `size` ranks of group `group_name`
    /// through `store` (each rank listens on `ip`, which the others must
    /// reach), and starts the group's worker thread. Collectives fail
    /// after `timeout` without progress.
    pub fn new(
        store: &dyn Store,
        group_name: &str,
        rank: usize,
        size: usize,
        ip: std::net::IpAddr,
        timeout: Duration,
    ) -> Result<Self> {
        if rank >= size {
            return Err(DistError::InvalidArgument(format!("rank {rank} of a group of {size}")));
        }
        let mesh = Arc::new(Mesh::connect(store, group_name, rank, size, ip, timeout)?);
        let (tx, rx) = mpsc::channel::<Job>();
        let outstanding = Arc::new(AtomicUsize::new(0));
        let runner = Arc::new(Mutex::new(Runner::default()));
        let worker = {
            let (mesh, outstanding, runner) = (mesh.clone(), outstanding.clone(), runner.clone());
            std::thread::Builder::new()
                .name(format!("ferro-dist-{group_name}-r{rank}"))
                .spawn(move || worker_loop(&mesh, &rx, &runner, &outstanding))
                .map_err(|e| DistError::io("spawn the group's worker", e))?
        };
        Ok(TcpBackend {
            rank,
            size,
            queue: Mutex::new(Some(tx)),
            next_seq: AtomicU64::new(1),
            outstanding,
            runner,
            mesh,
            worker: Mutex::new(Some(worker)),
        })
    }
}

impl Backend for TcpBackend {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn submit(&self, call: Collective) -> Result<Work> {
        let queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = queue.as_ref() else {
            return Err(destroyed(&call));
        };
        let seq = self.seq_of(&call);
        let work = Work::new(call.name(), seq);
        self.outstanding.fetch_add(1, Ordering::SeqCst);
        tx.send(Job {
            call,
            seq,
            work: work.clone(),
        })
        .map_err(|_| {
            self.outstanding.fetch_sub(1, Ordering::SeqCst);
            DistError::Collective("the process group's worker has stopped".into())
        })?;
        Ok(work)
    }

    /// On the calling thread when nothing submitted is outstanding (checked
    /// under the queue's lock, with the runner taken before the lock goes,
    /// so a call submitted meanwhile gets a later sequence number and waits
    /// for this one): no hand-off to the worker and back. Otherwise
    /// submitted and waited for. Receives always wait in the worker.
    fn run(&self, call: Collective) -> Result<()> {
        if !matches!(call, Collective::Recv { .. }) {
            let queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            if queue.is_none() {
                return Err(destroyed(&call));
            }
            if self.outstanding.load(Ordering::SeqCst) == 0
                && let Ok(mut runner) = self.runner.try_lock()
            {
                let seq = self.seq_of(&call);
                drop(queue);
                let job = Job {
                    work: Work::new(call.name(), seq),
                    call,
                    seq,
                };
                let result = carry_out(&self.mesh, &mut runner, &job);
                drop(runner);
                job.work.finish(result);
                return job.work.wait();
            }
        }
        self.submit(call)?.wait()
    }

    fn shutdown(&self) {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
        self.mesh.shutdown();
    }
}

impl TcpBackend {
    /// The call's sequence number (0 for point-to-point calls, which count
    /// per peer and tag); taken under the queue's lock.
    fn seq_of(&self, call: &Collective) -> u64 {
        if call.is_p2p() {
            0
        } else {
            self.next_seq.fetch_add(1, Ordering::SeqCst)
        }
    }
}

fn destroyed(call: &Collective) -> DistError {
    DistError::Collective(format!("{}: the process group was destroyed", call.name()))
}

impl Drop for TcpBackend {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A receive waiting for its message: the call, its point-to-point
/// sequence number, and when it times out.
struct PendingRecv {
    job: Job,
    seq: u64,
    deadline: Instant,
}

/// Carries out the jobs in order; after the first failure, fails the rest.
///
/// A receive does not hold up the calls after it: it waits aside (in
/// `pending`) while the worker goes on, and completes when its message
/// comes, so `irecv` then `isend` (the peer doing the same) cannot
/// deadlock, as in PyTorch. Sends never wait for a receiver (shared-memory
/// slots or the socket's buffer, see `mesh.rs`).
fn worker_loop(mesh: &Mesh, rx: &mpsc::Receiver<Job>, runner: &Mutex<Runner>, outstanding: &AtomicUsize) {
    let lock = || runner.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let waiting = !lock().pending.is_empty();
        let Some(job) = next_job(rx, waiting) else { break };
        // Works finished in this round, completed once the runner is
        // released: a completion callback may make a blocking call on the
        // group, which then runs on this thread's caller or is queued.
        let mut done: Vec<(Work, std::result::Result<Vec<Tensor>, Fail>)> = Vec::new();
        {
            let mut runner = lock();
            if let Some(job) = job {
                if let Collective::Recv { src, tag, .. } = &job.call
                    && runner.broken.is_none()
                {
                    let seq = next(&mut runner.p2p.received, (*src, *tag));
                    let deadline = Instant::now() + mesh.timeout();
                    runner.pending.push(PendingRecv { job, seq, deadline });
                } else {
                    let result = carry_out(mesh, &mut runner, &job);
                    done.push((job.work, result));
                }
            }
            // The pending receives whose message came, or whose time ran
            // out, in the order they were called.
            let mut i = 0;
            while i < runner.pending.len() {
                let outcome = match &runner.broken {
                    Some(why) => Some(Err(format!(
                        "recv: the process group is unusable after an earlier failure: {why}"
                    ))),
                    None => poll_recv(mesh, &runner.pending[i]),
                };
                let Some(result) = outcome else {
                    i += 1;
                    continue;
                };
                let received = runner.pending.remove(i);
                if let (Err(why), None) = (&result, &runner.broken) {
                    mesh.abort_all(why);
                    runner.broken = Some(why.clone());
                }
                done.push((received.job.work, result));
            }
        }
        for (work, result) in done {
            outstanding.fetch_sub(1, Ordering::SeqCst);
            work.finish(result);
        }
    }
    for p in std::mem::take(&mut lock().pending) {
        p.job.work.finish(Err(
            "recv: the process group was destroyed while the receive waited".into()
        ));
    }
}

/// Carries out `job` (not a receive), or fails it at once when the group
/// broke earlier; a failure breaks the group (every rank is told). The
/// caller completes the job's work with the result.
fn carry_out(mesh: &Mesh, runner: &mut Runner, job: &Job) -> std::result::Result<Vec<Tensor>, Fail> {
    if let Some(why) = &runner.broken {
        return Err(format!(
            "{}: the process group is unusable after an earlier failure: {why}",
            job.call.name()
        ));
    }
    let result = run(mesh, job, &mut runner.p2p);
    if !job.call.is_p2p() {
        mesh.finished_below(job.seq + 1);
    }
    if let Err(why) = &result {
        mesh.abort_all(why);
        runner.broken = Some(why.clone());
    }
    result
}

/// The outcome of the pending receive `p` now: its tensor filled, or why
/// it failed (the peer died, its time ran out: as a blocking receive
/// reports it); `None` while its message has not come in time.
fn poll_recv(mesh: &Mesh, p: &PendingRecv) -> Option<std::result::Result<Vec<Tensor>, Fail>> {
    let Collective::Recv { tensor, src, tag } = &p.job.call else {
        return Some(Err("internal error: a pending receive that is not a receive".into()));
    };
    let op = p.job.call.name();
    let fingerprint = p.job.call.fingerprint();
    let now = Instant::now();
    // The failure in the words of a blocking receive.
    let st = Step {
        mesh,
        seq: p.seq,
        fingerprint,
        op,
        deadline: now,
        grace: Duration::ZERO,
    };
    let got = match mesh.recv(*src, p.seq, *tag, fingerprint, now) {
        Ok(m) => Ok(m),
        Err(mesh::NoMessage::Deadline) if now < p.deadline => return None,
        Err(_) => st.recv(*src, *tag),
    };
    Some(got.and_then(|m| {
        tensor_bytes::write(op, tensor, &m).map_err(tensor_err(op))?;
        Ok(vec![tensor.clone()])
    }))
}

/// How many messages went to / came from each (peer, tag): the sequence
/// numbers that match sends with receives in order.
#[derive(Default)]
struct P2pCounters {
    sent: HashMap<(usize, u64), u64>,
    received: HashMap<(usize, u64), u64>,
}

fn next(map: &mut HashMap<(usize, u64), u64>, key: (usize, u64)) -> u64 {
    let c = map.entry(key).or_insert(0);
    *c += 1;
    P2P_SEQ | *c
}

fn tensor_err(op: &str) -> impl Fn(DistError) -> Fail + '_ {
    move |e| format!("{op}: {e}")
}

fn run(mesh: &Mesh, job: &Job, p2p: &mut P2pCounters) -> std::result::Result<Vec<Tensor>, Fail> {
    let op = job.call.name();
    let timeout = mesh.timeout();
    let grace = (timeout / 5).min(Duration::from_secs(2));
    let mut st = Step {
        mesh,
        seq: job.seq,
        fingerprint: job.call.fingerprint(),
        op,
        deadline: Instant::now() + timeout.saturating_sub(grace),
        grace,
    };
    let (r, n) = (mesh.rank(), mesh.size());
    let read = |t: &Tensor| tensor_bytes::read(op, t).map_err(tensor_err(op));
    let write = |t: &Tensor, b: &[u8]| tensor_bytes::write(op, t, b).map_err(tensor_err(op));
    match &job.call {
        Collective::Broadcast { tensor, root } => {
            if n > 1 {
                let mut buf = read(tensor)?;
                algorithms::broadcast(&st, &mut buf, *root)?;
                if r != *root {
                    write(tensor, &buf)?;
                }
            }
            Ok(vec![tensor.clone()])
        }
        // One rank: the tensor is its own sum, minimum, ... and mean.
        Collective::AllReduce { tensor, .. } if n == 1 => Ok(vec![tensor.clone()]),
        Collective::AllReduce { tensor, op: rop } if tensor.is_contiguous() => {
            // In place in the tensor's memory: no copy in or out.
            let es = tensor.element_size();
            let range = tensor.storage_offset() * es..(tensor.storage_offset() + tensor.numel()) * es;
            tensor
                .storage()
                .with_cpu_bytes_mut(|all| all_reduce(&st, &mut all[range], tensor.dtype(), *rop))
                .map_err(|e| format!("{op}: {e}"))??;
            Ok(vec![tensor.clone()])
        }
        Collective::AllReduce { tensor, op: rop } => {
            let mut buf = read(tensor)?;
            all_reduce(&st, &mut buf, tensor.dtype(), *rop)?;
            write(tensor, &buf)?;
            Ok(vec![tensor.clone()])
        }
        Collective::Reduce { tensor, root, op: rop } => {
            let mut buf = read(tensor)?;
            algorithms::reduce(&st, &mut buf, *root, tensor.dtype(), *rop)?;
            if r == *root {
                write(tensor, &buf)?;
            }
            Ok(vec![tensor.clone()])
        }
        Collective::AllGather { outputs, input } => {
            let buf = gather_all(&st, &read(input)?, input.element_size())?;
            let blocks = even_blocks(buf.len() / input.element_size(), n, input.element_size());
            for (o, b) in outputs.iter().zip(blocks) {
                write(o, &buf[b])?;
            }
            Ok(outputs.clone())
        }
        Collective::AllGatherIntoTensor { output, input } if output.is_contiguous() => {
            // Straight into the output's memory. An input that is this
            // rank's block of the output (FSDP's flat parameter) is already
            // in place; any other input is copied in first.
            let es = output.element_size();
            let at = output.storage_offset() * es;
            let range = at..at + output.numel() * es;
            let block = range.len() / n;
            let own = at + r * block..at + (r + 1) * block;
            let in_place = input.is_contiguous()
                && input.storage().same(output.storage())
                && input.storage_offset() * es == own.start
                && input.numel() * es == block;
            let mine = if in_place { None } else { Some(read(input)?) };
            output
                .storage()
                .with_cpu_bytes_mut(|all| {
                    let out = &mut all[range];
                    if let Some(mine) = &mine {
                        out[r * block..(r + 1) * block].copy_from_slice(mine);
                    }
                    gather_in_place(&st, out, es)
                })
                .map_err(|e| format!("{op}: {e}"))??;
            Ok(vec![output.clone()])
        }
        Collective::AllGatherIntoTensor { output, input } => {
            let buf = gather_all(&st, &read(input)?, input.element_size())?;
            write(output, &buf)?;
            Ok(vec![output.clone()])
        }
        Collective::ReduceScatter {
            output,
            inputs,
            op: rop,
        } => {
            let mut buf = Vec::new();
            for i in inputs {
                buf.extend_from_slice(&read(i)?);
            }
            let mine = scatter_reduce(&st, &mut buf, output.dtype(), *rop)?;
            write(output, &mine)?;
            Ok(vec![output.clone()])
        }
        Collective::ReduceScatterTensor { output, input, op: rop } => {
            let mut buf = read(input)?;
            let mine = scatter_reduce(&st, &mut buf, output.dtype(), *rop)?;
            write(output, &mine)?;
            Ok(vec![output.clone()])
        }
        Collective::Gather { outputs, input, root } => {
            let mine = read(input)?;
            if r == *root {
                for (p, o) in outputs.iter().enumerate() {
                    if p == r {
                        write(o, &mine)?;
                    } else {
                        write(o, &st.recv(p, 0)?)?;
                    }
                }
            } else {
                st.send(*root, 0, &mine)?;
            }
            Ok(outputs.clone())
        }
        Collective::Scatter { output, inputs, root } => {
            if r == *root {
                for (p, i) in inputs.iter().enumerate() {
                    let b = read(i)?;
                    if p == r {
                        write(output, &b)?;
                    } else {
                        st.send(p, 0, &b)?;
                    }
                }
            } else {
                write(output, &st.recv(*root, 0)?)?;
            }
            Ok(vec![output.clone()])
        }
        Collective::AllToAll { outputs, inputs } => {
            for p in (0..n).filter(|&p| p != r) {
                st.send(p, 0, &read(&inputs[p])?)?;
            }
            write(&outputs[r], &read(&inputs[r])?)?;
            for p in (0..n).filter(|&p| p != r) {
                write(&outputs[p], &st.recv(p, 0)?)?;
            }
            Ok(outputs.clone())
        }
        Collective::AllToAllSingle {
            output,
            input,
            output_splits,
            input_splits,
        } => {
            let inb = read(input)?;
            let ins = row_blocks(input, input_splits, n);
            let outs = row_blocks(output, output_splits, n);
            let mut outb = vec![0u8; output.numel() * output.element_size()];
            for p in (0..n).filter(|&p| p != r) {
                st.send(p, 0, &inb[ins[p].clone()])?;
            }
            if outs[r].len() != ins[r].len() {
                return Err(format!(
                    "{op}: rank {r} keeps {} bytes of its input but expects {} in its output",
                    ins[r].len(),
                    outs[r].len()
                ));
            }
            outb[outs[r].clone()].copy_from_slice(&inb[ins[r].clone()]);
            for p in (0..n).filter(|&p| p != r) {
                let m = st.recv(p, 0)?;
                if m.len() != outs[p].len() {
                    return Err(format!(
                        "{op}: rank {p} sent {} bytes where the output split expects {}",
                        m.len(),
                        outs[p].len()
                    ));
                }
                outb[outs[p].clone()].copy_from_slice(&m);
            }
            write(output, &outb)?;
            Ok(vec![output.clone()])
        }
        Collective::Barrier => {
            if n > 1 {
                let mut one = vec![1u8];
                algorithms::all_reduce(&st, &mut one, ferrotorch_core::DType::U8, ReduceOp::Max)?;
            }
            Ok(vec![])
        }
        Collective::Send { tensor, dst, tag } => {
            st.seq = next(&mut p2p.sent, (*dst, *tag));
            st.send(*dst, *tag, &read(tensor)?)?;
            Ok(vec![tensor.clone()])
        }
        // Receives wait aside in the worker loop (`poll_recv`).
        Collective::Recv { .. } => Err(format!("internal error: {op} reached the call runner")),
    }
}

/// All-reduce of `buf` in place: by single-copy reads from
/// [`cma::MIN_BYTES`] up when the group can (every rank on this host,
/// cross-memory attach allowed), else the ring.
fn all_reduce(
    st: &Step<'_>,
    buf: &mut [u8],
    dtype: ferrotorch_core::DType,
    op: ReduceOp,
) -> std::result::Result<(), Fail> {
    match st.mesh.cma_pids() {
        Some(pids) if buf.len() >= cma::MIN_BYTES => cma::all_reduce(st, pids, buf, dtype, op),
        _ => algorithms::all_reduce(st, buf, dtype, op),
    }
}

/// All-gather of every rank's `mine` (equal sizes) into a new buffer.
fn gather_all(st: &Step<'_>, mine: &[u8], es: usize) -> std::result::Result<Vec<u8>, Fail> {
    let r = st.mesh.rank();
    let mut buf = vec![0u8; mine.len() * st.mesh.size()];
    buf[r * mine.len()..(r + 1) * mine.len()].copy_from_slice(mine);
    gather_in_place(st, &mut buf, es)?;
    Ok(buf)
}

/// All-gather within `out` (one equal block per rank, this rank's in
/// place): by single-copy reads from [`cma::MIN_BYTES`] up where the group
/// can, else the ring.
fn gather_in_place(st: &Step<'_>, out: &mut [u8], es: usize) -> std::result::Result<(), Fail> {
    let n = st.mesh.size();
    match st.mesh.cma_pids() {
        Some(pids) if out.len() >= cma::MIN_BYTES => cma::all_gather(st, pids, out),
        _ if n > 1 => {
            let blocks = even_blocks(out.len() / es, n, es);
            algorithms::ring_all_gather(st, out, &blocks, 0, es)
        }
        _ => Ok(()),
    }
}

/// Reduce-scatter of `buf` (n equal blocks); this rank's block. By
/// single-copy reads from [`cma::MIN_BYTES`] up where the group can, else
/// the ring.
fn scatter_reduce(
    st: &Step<'_>,
    buf: &mut [u8],
    dtype: ferrotorch_core::DType,
    op: ReduceOp,
) -> std::result::Result<Vec<u8>, Fail> {
    let (r, n) = (st.mesh.rank(), st.mesh.size());
    let es = dtype.element_size();
    let blocks = even_blocks(buf.len() / es, n, es);
    match st.mesh.cma_pids() {
        Some(pids) if buf.len() >= cma::MIN_BYTES => cma::reduce_scatter(st, pids, buf, dtype, op)?,
        _ if n > 1 => {
            let own = algorithms::ring_reduce_scatter(st, buf, &blocks, n as isize - 1, dtype, op)?;
            debug_assert_eq!(own, r);
        }
        _ => {}
    }
    let mut mine = buf[blocks[r].clone()].to_vec();
    if op == ReduceOp::Avg {
        finish_avg(dtype, &mut mine, n);
    }
    Ok(mine)
}

/// Byte ranges of the row blocks of `t` (`splits` rows each, or equal).
fn row_blocks(t: &Tensor, splits: &[usize], n: usize) -> Vec<std::ops::Range<usize>> {
    let mut at = 0;
    crate::collective::row_block_bytes(t, splits, n)
        .into_iter()
        .map(|len| {
            let r = at..at + len;
            at += len;
            r
        })
        .collect()
}
