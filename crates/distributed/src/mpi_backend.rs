//! The `mpi` backend (cargo feature `mpi`): the collectives of a group run
//! by the MPI library the cluster already has (Open MPI, through rsmpi),
//! so `mpirun -np N` or Slurm's `srun` start ferrotorch programs unchanged
//! (PyTorch's `ProcessGroupMPI`).
//!
//! One worker thread initialises MPI (`MPI_Init_thread`, serialized) and
//! makes the MPI calls of submitted work, for the world and for the groups
//! split from it, in submission order; calls return a [`Work`] at once. A
//! blocking call ([`Backend::run`], what `dist::all_reduce` and the other
//! module-level functions use) runs on the calling thread instead when no
//! submitted work is pending, as a C program calls MPI: the hand-off to
//! the worker and back costs more than a small all-reduce itself. The
//! communicators sit behind one lock, so calls stay serialized (what
//! `MPI_THREAD_SERIALIZED` asks); where the library grants less, every
//! call goes through the worker. Ranks and sizes
//! come from MPI, not from the options. Half types are reduced in f32,
//! bool as 0/1 bytes. MPI cannot be initialised twice in a process, so
//! after `destroy_process_group` a new `mpi` group cannot be made, and a
//! dead or stalled rank is MPI's to handle (mpirun ends the job); the
//! `tcp` backend's watchdog does not apply.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::{DType, Tensor};
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::request::StaticScope;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use crate::backend::{Backend, next_job};
use crate::collective::Collective;
use crate::error::{DistError, Result};
use crate::reduce_op::ReduceOp;
use crate::tensor_bytes;
use crate::work::Work;

/// A split's answer: for members, (communicator index, rank, size).
type SplitReply = std::result::Result<Option<(usize, usize, usize)>, String>;

enum Job {
    Call {
        comm: usize,
        call: Collective,
        work: Work,
    },
    Split {
        ranks: Vec<usize>,
        reply: mpsc::Sender<SplitReply>,
    },
}

/// The communicators: the world's at index 0, then the split groups'.
/// Emptied when the worker stops, before MPI is finalised.
struct Comms(Vec<SimpleCommunicator>);

// SAFETY: a communicator is a handle valid in every thread of the process;
// MPI asks only that calls be serialized (MPI_THREAD_SERIALIZED, checked
// before any thread but the worker calls), which the mutex around `Comms`
// guarantees: every MPI call on them is made while holding it.
unsafe impl Send for Comms {}

struct Shared {
    queue: Mutex<Option<mpsc::Sender<Job>>>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    comms: Mutex<Comms>,
    /// Jobs sent to the worker and not yet carried out.
    pending: AtomicUsize,
    /// Whether MPI granted at least MPI_THREAD_SERIALIZED, so threads other
    /// than the worker may call it.
    inline_ok: AtomicBool,
}

/// A receive waiting for its message: its communicator, the call, its work.
type Waiting = (usize, Collective, Work);

/// A submitted send (`isend`) whose bytes MPI may still be reading: its
/// request (`MPI_Isend`) and the copy of the tensor it reads, leaked from a
/// box and freed once the request completes. Its Work completed when the
/// send was posted (the tensor may change from then on, as with the tcp
/// backend); the worker tests it between calls, which also lets MPI make
/// progress on it.
struct InFlight {
    request: mpi::request::Request<'static, [u8], StaticScope>,
    data: &'static [u8],
}

impl InFlight {
    /// Posts the send of `tensor`'s bytes to `dst` with `tag`.
    fn post(comm: &SimpleCommunicator, tensor: &Tensor, dst: usize, tag: u64) -> std::result::Result<Self, String> {
        let tag = tag_of(tag)?;
        let data: &'static [u8] = Box::leak(bytes("send", tensor)?.into_boxed_slice());
        let request = comm
            .process_at_rank(dst as i32)
            .immediate_send_with_tag(StaticScope, data, tag);
        Ok(InFlight { request, data })
    }

    /// Whether MPI is done with the send (its copy freed then); `Err` gives
    /// it back while it is not.
    fn test(self) -> std::result::Result<(), Self> {
        match self.request.test() {
            Ok(_) => {
                let raw = std::ptr::from_ref::<[u8]>(self.data).cast_mut();
                // SAFETY: `data` came from `Box::leak` in `post` and is
                // referenced only by the request, which has completed (MPI
                // reads it no more): the box is rebuilt once and dropped.
                drop(unsafe { Box::from_raw(raw) });
                Ok(())
            }
            Err(request) => Err(InFlight {
                request,
                data: self.data,
            }),
        }
    }
}

impl Shared {
    fn comms(&self) -> std::sync::MutexGuard<'_, Comms> {
        self.comms.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Frees the sends MPI is done with and completes the waiting
    /// receives whose message has come (in the order they were called),
    /// outside the communicators' lock.
    fn finish_arrived(&self, waiting: &mut Vec<Waiting>, sends: &mut Vec<InFlight>) {
        if waiting.is_empty() && sends.is_empty() {
            return;
        }
        let comms = self.comms();
        for send in std::mem::take(sends) {
            if let Err(still) = send.test() {
                sends.push(still);
            }
        }
        let mut done = Vec::new();
        let mut i = 0;
        while i < waiting.len() {
            let (comm, call, _) = &waiting[i];
            match poll_recv(&comms.0[*comm], call) {
                None => i += 1,
                Some(result) => {
                    let (_, _, work) = waiting.remove(i);
                    done.push((work, result));
                }
            }
        }
        drop(comms);
        for (work, result) in done {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            work.finish(result);
        }
    }
}

/// A group's handle on the MPI worker: which communicator, its rank and
/// size.
pub struct MpiBackend {
    comm: usize,
    rank: usize,
    size: usize,
    next_seq: AtomicU64,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MpiBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiBackend")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl MpiBackend {
    /// Initialises MPI on the backend's thread: the world communicator's
    /// backend. An error when MPI was initialised before in this process.
    pub fn world() -> Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            queue: Mutex::new(Some(tx)),
            worker: Mutex::new(None),
            comms: Mutex::new(Comms(Vec::new())),
            pending: AtomicUsize::new(0),
            inline_ok: AtomicBool::new(false),
        });
        let on_worker = shared.clone();
        let worker = std::thread::Builder::new()
            .name("ferro-dist-mpi".into())
            .spawn(move || {
                let shared = on_worker;
                let Some((universe, granted)) = mpi::initialize_with_threading(mpi::Threading::Serialized) else {
                    let _ = ready_tx.send(Err(
                        "MPI was already initialized (or finalized) in this process".to_owned()
                    ));
                    return;
                };
                let serialized = matches!(granted, mpi::Threading::Serialized | mpi::Threading::Multiple);
                shared.inline_ok.store(serialized, Ordering::SeqCst);
                let world = universe.world();
                let info = (world.rank() as usize, world.size() as usize);
                shared.comms().0.push(world);
                let _ = ready_tx.send(Ok(info));
                // Receives waiting for their message (an `irecv` must not
                // hold up the `isend` after it: see `poll_recv`).
                let mut waiting: Vec<Waiting> = Vec::new();
                // Sends posted and not finished by MPI: never waited for
                // here, so two ranks that each `isend` a large tensor
                // before their `irecv` do not deadlock (a blocking
                // MPI_Send of a large message waits for the receiver).
                let mut sends: Vec<InFlight> = Vec::new();
                while let Some(job) = next_job(&rx, !waiting.is_empty() || !sends.is_empty()) {
                    shared.finish_arrived(&mut waiting, &mut sends);
                    let Some(job) = job else { continue };
                    let mut comms = shared.comms();
                    match job {
                        Job::Call {
                            comm,
                            call: Collective::Send { tensor, dst, tag },
                            work,
                        } => {
                            let result = InFlight::post(&comms.0[comm], &tensor, dst, tag).map(|f| {
                                sends.push(f);
                                vec![tensor.clone()]
                            });
                            drop(comms);
                            shared.pending.fetch_sub(1, Ordering::SeqCst);
                            work.finish(result);
                        }
                        Job::Call {
                            comm,
                            call: call @ Collective::Recv { .. },
                            work,
                        } => {
                            drop(comms);
                            waiting.push((comm, call, work));
                        }
                        Job::Call { comm, call, work } => {
                            let result = run(&comms.0[comm], &call);
                            drop(comms);
                            shared.pending.fetch_sub(1, Ordering::SeqCst);
                            // Outside the lock: a completion callback may
                            // make a blocking call.
                            work.finish(result);
                        }
                        Job::Split { ranks, reply } => {
                            let world = &comms.0[0];
                            let members: Vec<i32> = ranks.iter().map(|&r| r as i32).collect();
                            let group = world.group().include(&members);
                            let sub = world.split_by_subgroup_collective(&group);
                            let answer = sub.map(|c| {
                                let info = (comms.0.len(), c.rank() as usize, c.size() as usize);
                                comms.0.push(c);
                                info
                            });
                            drop(comms);
                            shared.pending.fetch_sub(1, Ordering::SeqCst);
                            let _ = reply.send(Ok(answer));
                        }
                    }
                }
                for (_, _, work) in waiting {
                    shared.pending.fetch_sub(1, Ordering::SeqCst);
                    work.finish(Err(
                        "recv: the process group was destroyed while the receive waited".into()
                    ));
                }
                // Sends no receiver took: their requests and copies are
                // left to the process's end (a request may not be dropped
                // while MPI can still read its buffer).
                let comms = shared.comms();
                for send in sends {
                    if let Err(still) = send.test() {
                        std::mem::forget(still.request);
                    }
                }
                drop(comms);
                // Communicators are freed before MPI_Finalize; later calls
                // find none and fail.
                shared.comms().0.clear();
                drop(universe); // MPI_Finalize
            })
            .map_err(|e| DistError::io("spawn the MPI worker", e))?;
        *shared.worker.lock().unwrap_or_else(|e| e.into_inner()) = Some(worker);
        let (rank, size) = ready_rx
            .recv()
            .map_err(|_| DistError::Collective("the MPI worker stopped while starting".into()))?
            .map_err(DistError::Collective)?;
        Ok(MpiBackend {
            comm: 0,
            rank,
            size,
            next_seq: AtomicU64::new(1),
            shared,
        })
    }

    /// The backend of a group of the world ranks `ranks` (every world rank
    /// calls it); `None` for the ranks outside it.
    pub fn split(&self, ranks: &[usize]) -> Result<Option<MpiBackend>> {
        let (reply, answer) = mpsc::channel();
        self.send(Job::Split {
            ranks: ranks.to_vec(),
            reply,
        })?;
        let got = answer
            .recv()
            .map_err(|_| DistError::Collective("the MPI worker stopped".into()))?
            .map_err(DistError::Collective)?;
        Ok(got.map(|(comm, rank, size)| MpiBackend {
            comm,
            rank,
            size,
            next_seq: AtomicU64::new(1),
            shared: self.shared.clone(),
        }))
    }

    fn send(&self, job: Job) -> Result<()> {
        let queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        let tx = queue
            .as_ref()
            .ok_or_else(|| DistError::Collective("the mpi process group was destroyed".into()))?;
        self.shared.pending.fetch_add(1, Ordering::SeqCst);
        tx.send(job).map_err(|_| {
            self.shared.pending.fetch_sub(1, Ordering::SeqCst);
            DistError::Collective("the MPI worker has stopped".into())
        })
    }

    /// The call's sequence number (0 for point-to-point calls).
    fn seq_of(&self, call: &Collective) -> u64 {
        if call.is_p2p() {
            0
        } else {
            self.next_seq.fetch_add(1, Ordering::SeqCst)
        }
    }
}

impl Backend for MpiBackend {
    fn name(&self) -> &'static str {
        "mpi"
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn submit(&self, call: Collective) -> Result<Work> {
        let work = Work::new(call.name(), self.seq_of(&call));
        self.send(Job::Call {
            comm: self.comm,
            call,
            work: work.clone(),
        })?;
        Ok(work)
    }

    /// On the calling thread when MPI allows it and no submitted call is
    /// pending (checked under the communicators' lock, so nothing
    /// submitted earlier can still be waiting to run); otherwise submitted
    /// and waited for.
    fn run(&self, call: Collective) -> Result<()> {
        if self.shared.inline_ok.load(Ordering::SeqCst) {
            let comms = self.shared.comms();
            if self.shared.pending.load(Ordering::SeqCst) == 0 {
                let Some(comm) = comms.0.get(self.comm) else {
                    return Err(DistError::Collective("the mpi process group was destroyed".into()));
                };
                // The sequence number is taken as a submit would; no Work
                // is made for a result nobody else can wait on (the error
                // is what its wait would return).
                self.seq_of(&call);
                return run(comm, &call).map(drop).map_err(DistError::Collective);
            }
        }
        self.submit(call)?.wait()
    }

    /// Stops the worker (finalising MPI) when the world's backend is shut
    /// down; a split group's shutdown only stops its own use.
    fn shutdown(&self) {
        if self.comm != 0 {
            return;
        }
        self.shared.queue.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = self.shared.worker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}

/// The dtype reductions travel in: f32 for half types, bytes for bool.
fn wire_dtype(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        DType::Bool => DType::U8,
        other => other,
    }
}

fn system_op(op: ReduceOp, dtype: DType) -> SystemOperation {
    if dtype == DType::Bool {
        return match op {
            ReduceOp::Sum | ReduceOp::Avg | ReduceOp::Max | ReduceOp::Bor => SystemOperation::max(),
            ReduceOp::Product | ReduceOp::Min | ReduceOp::Band => SystemOperation::min(),
            ReduceOp::Bxor => SystemOperation::bitwise_xor(),
        };
    }
    match op {
        ReduceOp::Sum | ReduceOp::Avg => SystemOperation::sum(),
        ReduceOp::Product => SystemOperation::product(),
        ReduceOp::Min => SystemOperation::min(),
        ReduceOp::Max => SystemOperation::max(),
        ReduceOp::Band => SystemOperation::bitwise_and(),
        ReduceOp::Bor => SystemOperation::bitwise_or(),
        ReduceOp::Bxor => SystemOperation::bitwise_xor(),
    }
}

/// The kinds of reduction MPI runs here.
#[derive(Clone, Copy)]
enum Reduction {
    All,
    To(usize),
    ScatterBlock,
}

/// Reduces `input` (in its wire dtype) over the communicator; the result
/// in `dtype`'s wire bytes (for `ScatterBlock`, this rank's block).
fn reduce_bytes(
    comm: &SimpleCommunicator,
    input: &Tensor,
    op: ReduceOp,
    how: Reduction,
) -> std::result::Result<Option<Tensor>, String> {
    let dtype = input.dtype();
    let wire = wire_dtype(dtype);
    let x = input
        .to_dtype(wire)
        .map_err(|e| e.to_string())?
        .contiguous()
        .map_err(|e| e.to_string())?;
    let n = comm.size() as usize;
    let out_len = match how {
        Reduction::ScatterBlock => x.numel() / n,
        _ => x.numel(),
    };
    let mop = system_op(op, dtype);
    macro_rules! typed {
        ($t:ty) => {{
            let send = x.to_vec::<$t>().map_err(|e| e.to_string())?;
            let mut recv = vec![<$t>::default(); out_len];
            let root_result = match how {
                Reduction::All => {
                    comm.all_reduce_into(&send[..], &mut recv[..], mop);
                    true
                }
                Reduction::ScatterBlock => {
                    comm.reduce_scatter_block_into(&send[..], &mut recv[..], mop);
                    true
                }
                Reduction::To(root) => {
                    let p = comm.process_at_rank(root as i32);
                    if comm.rank() as usize == root {
                        p.reduce_into_root(&send[..], &mut recv[..], mop);
                        true
                    } else {
                        p.reduce_into(&send[..], mop);
                        false
                    }
                }
            };
            if !root_result {
                return Ok(None);
            }
            Tensor::from_vec(recv, [out_len]).map_err(|e| e.to_string())?
        }};
    }
    let reduced = match wire {
        DType::U8 => typed!(u8),
        DType::I32 => typed!(i32),
        DType::I64 => typed!(i64),
        DType::F32 => typed!(f32),
        DType::F64 => typed!(f64),
        other => return Err(format!("no MPI type for {}", other.name())),
    };
    let reduced = if op == ReduceOp::Avg {
        reduced
            .div(
                &Tensor::new(n as f64)
                    .map_err(|e| e.to_string())?
                    .to_dtype(wire)
                    .map_err(|e| e.to_string())?,
            )
            .map_err(|e| e.to_string())?
    } else {
        reduced
    };
    Ok(Some(reduced.to_dtype(dtype).map_err(|e| e.to_string())?))
}

/// Writes `src` (any shape, same element count and dtype) into `dst`.
/// MPI's datatype for the elements of `dtype`, where MPI reduces them as
/// the core does (not half types or bool).
fn raw_datatype(dtype: DType) -> Option<mpi::ffi::MPI_Datatype> {
    Some(match dtype {
        DType::F32 => f32::equivalent_datatype().as_raw(),
        DType::F64 => f64::equivalent_datatype().as_raw(),
        DType::I32 => i32::equivalent_datatype().as_raw(),
        DType::I64 => i64::equivalent_datatype().as_raw(),
        DType::U8 => u8::equivalent_datatype().as_raw(),
        _ => return None,
    })
}

unsafe extern "C" {
    /// The library's `MPI_IN_PLACE` (src/mpi_in_place.c).
    fn ferrotorch_mpi_in_place() -> *mut std::ffi::c_void;
}

/// `MPI_Allreduce(MPI_IN_PLACE, buf, ...)` over the elements of `dtype` in
/// `buf`; an error naming MPI's code if the call fails, or when `buf`
/// holds more elements than MPI's `int` count can say.
fn all_reduce_in_place(
    comm: &SimpleCommunicator,
    buf: &mut [u8],
    dtype: DType,
    op: SystemOperation,
) -> std::result::Result<(), String> {
    let datatype = raw_datatype(dtype).ok_or_else(|| format!("no MPI type for {}", dtype.name()))?;
    let count = std::ffi::c_int::try_from(buf.len() / dtype.element_size()).map_err(|_| {
        format!(
            "{} elements are more than one MPI call can take",
            buf.len() / dtype.element_size()
        )
    })?;
    // `buf` holds `count` whole elements of `datatype` (it matches `dtype`);
    // the handles come from live rsmpi objects.
    // SAFETY: MPI (a blocking call) touches only `buf`, exclusively borrowed
    // until it returns; the send buffer is the library's own MPI_IN_PLACE.
    let rc = unsafe {
        mpi::ffi::MPI_Allreduce(
            ferrotorch_mpi_in_place(),
            buf.as_mut_ptr().cast(),
            count,
            datatype,
            op.as_raw(),
            comm.as_raw(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("MPI_Allreduce failed with MPI error code {rc}"))
    }
}

fn put(op: &str, dst: &Tensor, src: &Tensor) -> std::result::Result<(), String> {
    let bytes = tensor_bytes::read(op, src).map_err(|e| e.to_string())?;
    tensor_bytes::write(op, dst, &bytes).map_err(|e| format!("{op}: {e}"))
}

fn bytes(op: &str, t: &Tensor) -> std::result::Result<Vec<u8>, String> {
    tensor_bytes::read(op, t).map_err(|e| format!("{op}: {e}"))
}

fn write(op: &str, t: &Tensor, b: &[u8]) -> std::result::Result<(), String> {
    tensor_bytes::write(op, t, b).map_err(|e| format!("{op}: {e}"))
}

fn nbytes(t: &Tensor) -> usize {
    t.numel() * t.element_size()
}

fn run(comm: &SimpleCommunicator, call: &Collective) -> std::result::Result<Vec<Tensor>, String> {
    let op = call.name();
    let (r, n) = (comm.rank() as usize, comm.size() as usize);
    match call {
        Collective::Broadcast { tensor, root } => {
            let mut b = bytes(op, tensor)?;
            comm.process_at_rank(*root as i32).broadcast_into(&mut b[..]);
            if r != *root {
                write(op, tensor, &b)?;
            }
            Ok(vec![tensor.clone()])
        }
        Collective::AllReduce { tensor, op: rop }
            if tensor.is_contiguous() && raw_datatype(tensor.dtype()).is_some() =>
        {
            // In place in the tensor's memory (MPI_IN_PLACE): no copy in or
            // out, as a C program calls it.
            let dtype = tensor.dtype();
            let es = tensor.element_size();
            let range = tensor.storage_offset() * es..(tensor.storage_offset() + tensor.numel()) * es;
            tensor
                .storage()
                .with_cpu_bytes_mut(|all| {
                    let buf = &mut all[range];
                    all_reduce_in_place(comm, buf, dtype, system_op(*rop, dtype))?;
                    if *rop == ReduceOp::Avg {
                        crate::reduce_op::finish_avg(dtype, buf, n);
                    }
                    Ok::<(), String>(())
                })
                .map_err(|e| format!("{op}: {e}"))?
                .map_err(|e| format!("{op}: {e}"))?;
            Ok(vec![tensor.clone()])
        }
        Collective::AllReduce { tensor, op: rop } => {
            let out = reduce_bytes(comm, tensor, *rop, Reduction::All)?.expect("every rank gets the result");
            put(op, tensor, &out)?;
            Ok(vec![tensor.clone()])
        }
        Collective::Reduce { tensor, root, op: rop } => {
            if let Some(out) = reduce_bytes(comm, tensor, *rop, Reduction::To(*root))? {
                put(op, tensor, &out)?;
            }
            Ok(vec![tensor.clone()])
        }
        Collective::AllGather { outputs, input } => {
            let send = bytes(op, input)?;
            let mut recv = vec![0u8; send.len() * n];
            comm.all_gather_into(&send[..], &mut recv[..]);
            for (o, chunk) in outputs.iter().zip(recv.chunks(send.len().max(1))) {
                write(op, o, chunk)?;
            }
            Ok(outputs.clone())
        }
        Collective::AllGatherIntoTensor { output, input } => {
            let send = bytes(op, input)?;
            let mut recv = vec![0u8; nbytes(output)];
            comm.all_gather_into(&send[..], &mut recv[..]);
            write(op, output, &recv)?;
            Ok(vec![output.clone()])
        }
        Collective::ReduceScatter {
            output,
            inputs,
            op: rop,
        } => {
            let refs: Vec<&Tensor> = inputs.iter().collect();
            let flat = Tensor::cat(
                &refs
                    .iter()
                    .map(|t| t.reshape([-1]))
                    .collect::<ferrotorch_core::Result<Vec<_>>>()
                    .map_err(|e| e.to_string())?
                    .iter()
                    .collect::<Vec<_>>(),
                0,
            )
            .map_err(|e| e.to_string())?;
            let out = reduce_bytes(comm, &flat, *rop, Reduction::ScatterBlock)?.expect("every rank gets a block");
            put(op, output, &out)?;
            Ok(vec![output.clone()])
        }
        Collective::ReduceScatterTensor { output, input, op: rop } => {
            let out = reduce_bytes(comm, input, *rop, Reduction::ScatterBlock)?.expect("every rank gets a block");
            put(op, output, &out)?;
            Ok(vec![output.clone()])
        }
        Collective::Gather { outputs, input, root } => {
            let send = bytes(op, input)?;
            let p = comm.process_at_rank(*root as i32);
            if r == *root {
                let mut recv = vec![0u8; send.len() * n];
                p.gather_into_root(&send[..], &mut recv[..]);
                for (o, chunk) in outputs.iter().zip(recv.chunks(send.len().max(1))) {
                    write(op, o, chunk)?;
                }
            } else {
                p.gather_into(&send[..]);
            }
            Ok(outputs.clone())
        }
        Collective::Scatter { output, inputs, root } => {
            let mut recv = vec![0u8; nbytes(output)];
            let p = comm.process_at_rank(*root as i32);
            if r == *root {
                let mut send = Vec::with_capacity(recv.len() * n);
                for i in inputs {
                    send.extend_from_slice(&bytes(op, i)?);
                }
                p.scatter_into_root(&send[..], &mut recv[..]);
            } else {
                p.scatter_into(&mut recv[..]);
            }
            write(op, output, &recv)?;
            Ok(vec![output.clone()])
        }
        Collective::AllToAll { outputs, inputs } => {
            let mut send = Vec::new();
            let mut send_counts = Vec::with_capacity(n);
            for i in inputs {
                let b = bytes(op, i)?;
                send_counts.push(b.len() as i32);
                send.extend_from_slice(&b);
            }
            let recv_counts: Vec<i32> = outputs.iter().map(|o| nbytes(o) as i32).collect();
            alltoallv(comm, &send, &send_counts, &recv_counts, |recv, displs| {
                for (k, o) in outputs.iter().enumerate() {
                    let a = displs[k] as usize;
                    write(op, o, &recv[a..a + recv_counts[k] as usize])?;
                }
                Ok(())
            })?;
            Ok(outputs.clone())
        }
        Collective::AllToAllSingle {
            output,
            input,
            output_splits,
            input_splits,
        } => {
            let counts = |t: &Tensor, s: &[usize]| -> Vec<i32> {
                crate::collective::row_block_bytes(t, s, n)
                    .into_iter()
                    .map(|b| b as i32)
                    .collect()
            };
            let send = bytes(op, input)?;
            alltoallv(
                comm,
                &send,
                &counts(input, input_splits),
                &counts(output, output_splits),
                |recv, _| write(op, output, recv),
            )?;
            Ok(vec![output.clone()])
        }
        Collective::Barrier => {
            comm.barrier();
            Ok(vec![])
        }
        Collective::Send { tensor, dst, tag } => {
            let b = bytes(op, tensor)?;
            comm.process_at_rank(*dst as i32).send_with_tag(&b[..], tag_of(*tag)?);
            Ok(vec![tensor.clone()])
        }
        Collective::Recv { tensor, src, tag } => {
            let mut b = vec![0u8; nbytes(tensor)];
            comm.process_at_rank(*src as i32)
                .receive_into_with_tag(&mut b[..], tag_of(*tag)?);
            write(op, tensor, &b)?;
            Ok(vec![tensor.clone()])
        }
    }
}

/// A receive submitted to the worker: its tensor filled when its message
/// has come (`MPI_Iprobe`, then the receive, which then does not block),
/// `None` while it has not. The worker goes on with later calls meanwhile,
/// so `irecv` then `isend` on two ranks does not deadlock. (A submitted
/// send is `MPI_Isend`, tested between calls: see `InFlight`.)
fn poll_recv(comm: &SimpleCommunicator, call: &Collective) -> Option<std::result::Result<Vec<Tensor>, String>> {
    let Collective::Recv { tensor, src, tag } = call else {
        return Some(Err("internal error: a waiting receive that is not a receive".into()));
    };
    let tag = match tag_of(*tag) {
        Ok(t) => t,
        Err(e) => return Some(Err(e)),
    };
    let peer = comm.process_at_rank(*src as i32);
    let status = peer.immediate_probe_with_tag(tag)?;
    let got = usize::try_from(status.count(u8::equivalent_datatype())).unwrap_or(0);
    let want = nbytes(tensor);
    let mut b = vec![0u8; got];
    peer.receive_into_with_tag(&mut b[..], tag);
    if got != want {
        return Some(Err(format!(
            "recv: rank {src} sent {got} bytes with tag {tag}; the tensor holds {want}"
        )));
    }
    Some(write("recv", tensor, &b).map(|()| vec![tensor.clone()]))
}

fn tag_of(tag: u64) -> std::result::Result<i32, String> {
    i32::try_from(tag).map_err(|_| format!("the tag {tag} does not fit MPI's int tags"))
}

/// MPI_Alltoallv on bytes; `done(recv, displs)` takes the result.
fn alltoallv(
    comm: &SimpleCommunicator,
    send: &[u8],
    send_counts: &[i32],
    recv_counts: &[i32],
    done: impl FnOnce(&[u8], &[i32]) -> std::result::Result<(), String>,
) -> std::result::Result<(), String> {
    let displs = |c: &[i32]| -> Vec<i32> {
        c.iter()
            .scan(0i32, |at, &k| {
                let d = *at;
                *at += k;
                Some(d)
            })
            .collect()
    };
    let (sd, rd) = (displs(send_counts), displs(recv_counts));
    let total: i32 = recv_counts.iter().sum();
    let mut recv = vec![0u8; total as usize];
    {
        let s = Partition::new(send, send_counts, &sd[..]);
        let mut r = PartitionMut::new(&mut recv[..], recv_counts, &rd[..]);
        comm.all_to_all_varcount_into(&s, &mut r);
    }
    done(&recv, &rd)
}
