//! `init_process_group` and the default group: the rendezvous
//! (`env://`, `tcp://host:port`, `file://path`, or a store given
//! directly), `new_group`, `destroy_process_group`, and the collective
//! calls on the default group, each waiting for its result.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferrotorch_core::Tensor;

use crate::backend::Backend;
use crate::collective::Collective;
use crate::env::LaunchEnv;
use crate::error::{DistError, Result};
use crate::group::ProcessGroup;
use crate::reduce_op::ReduceOp;
use crate::store::{FileStore, PrefixStore, Store, TcpStore, TcpStoreOptions};
use crate::tcp::TcpBackend;

/// PyTorch's default timeout of a process group (30 minutes).
pub const DEFAULT_PG_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The arguments of [`init_process_group`], as PyTorch's keywords.
#[derive(Clone)]
pub struct InitOptions {
    /// `"tcp"` (the embedded backend; `"gloo"` is accepted as its alias) or
    /// `"mpi"` (with the `mpi` feature).
    pub backend: String,
    /// `env://` (the default), `tcp://host:port` or `file:///path`.
    pub init_method: Option<String>,
    /// The number of processes (read from the launcher's variables when
    /// `None`).
    pub world_size: Option<usize>,
    /// This process's rank (read from the launcher's variables when `None`).
    pub rank: Option<usize>,
    /// How long a collective may go without progress before it fails.
    pub timeout: Duration,
    /// A store to meet through instead of `init_method`.
    pub store: Option<Arc<dyn Store>>,
}

impl std::fmt::Debug for InitOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InitOptions")
            .field("backend", &self.backend)
            .field("init_method", &self.init_method)
            .field("world_size", &self.world_size)
            .field("rank", &self.rank)
            .field("timeout", &self.timeout)
            .field("store", &self.store.is_some())
            .finish()
    }
}

impl InitOptions {
    /// `backend` with `init_method="env://"` and the default timeout.
    pub fn new(backend: &str) -> Self {
        InitOptions {
            backend: backend.to_owned(),
            init_method: None,
            world_size: None,
            rank: None,
            timeout: DEFAULT_PG_TIMEOUT,
            store: None,
        }
    }
    /// Sets `init_method`.
    pub fn init_method(mut self, m: &str) -> Self {
        self.init_method = Some(m.to_owned());
        self
    }
    /// Sets `world_size`.
    pub fn world_size(mut self, n: usize) -> Self {
        self.world_size = Some(n);
        self
    }
    /// Sets `rank`.
    pub fn rank(mut self, r: usize) -> Self {
        self.rank = Some(r);
        self
    }
    /// Sets `timeout`.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }
    /// Sets `store`.
    pub fn store(mut self, s: Arc<dyn Store>) -> Self {
        self.store = Some(s);
        self
    }
}

/// The default group and what new groups are made from.
struct World {
    group: Arc<ProcessGroup>,
    store: Arc<dyn Store>,
    backend: String,
    ip: IpAddr,
    timeout: Duration,
    rank: usize,
    size: usize,
    groups_made: usize,
    /// Every group made, destroyed with the default one.
    groups: Vec<Arc<ProcessGroup>>,
    /// The MPI world's backend, which `new_group` splits.
    #[cfg(feature = "mpi")]
    mpi: Option<Arc<crate::mpi_backend::MpiBackend>>,
}

static WORLD: Mutex<Option<World>> = Mutex::new(None);

fn world() -> MutexGuard<'static, Option<World>> {
    WORLD.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the default process group (`torch.distributed.init_process_group`).
///
/// The rank and world size come from the options, else from the
/// launcher's variables (torchrun / ferrorun, mpirun, Slurm); `env://` and
/// `tcp://` meet at a TCPStore whose server rank 0 runs (or torchrun's
/// agent, when it hands its store over), `file://` at a FileStore. Errors:
/// a second call, an unknown backend or scheme, a missing rank or address,
/// and any failure to reach the other ranks within the timeout.
pub fn init_process_group(opts: InitOptions) -> Result<()> {
    if world().is_some() {
        return Err(DistError::InvalidArgument(
            "init_process_group: the default process group is already initialized".into(),
        ));
    }
    if opts.backend == "mpi" {
        return init_mpi(&opts);
    }
    let launch = LaunchEnv::detect()?;
    let rank = opts.rank.or(launch.as_ref().map(|l| l.rank)).ok_or_else(|| {
        DistError::InvalidArgument(
            "init_process_group: no rank (pass one, or start the processes with ferrorun, torchrun, mpirun or srun)"
                .into(),
        )
    })?;
    let size = opts
        .world_size
        .or(launch.as_ref().map(|l| l.world_size))
        .ok_or_else(|| DistError::InvalidArgument("init_process_group: no world size".into()))?;
    if rank >= size {
        return Err(DistError::InvalidArgument(format!(
            "init_process_group: rank {rank} is not below the world size {size}"
        )));
    }
    let (store, ip) = match &opts.store {
        Some(s) => (s.clone(), socket_ip(None)?),
        None => rendezvous(&opts, launch.as_ref(), rank, size)?,
    };
    store.set_timeout(opts.timeout);
    let store: Arc<dyn Store> = Arc::new(PrefixStore::new("default_pg", store));
    let backend = make_backend(&opts.backend, &store, "0", rank, size, ip, opts.timeout)?;
    let group = Arc::new(ProcessGroup::new("0", backend, (0..size).collect()));
    let mut w = world();
    if w.is_some() {
        return Err(DistError::InvalidArgument(
            "init_process_group: the default process group is already initialized".into(),
        ));
    }
    *w = Some(World {
        group,
        store,
        backend: opts.backend.clone(),
        ip,
        timeout: opts.timeout,
        rank,
        size,
        groups_made: 0,
        groups: Vec::new(),
        #[cfg(feature = "mpi")]
        mpi: None,
    });
    Ok(())
}

/// `init_process_group("mpi")`: ranks and size from MPI (the options'
/// are ignored, as PyTorch ignores them for MPI); no store.
#[cfg(feature = "mpi")]
fn init_mpi(opts: &InitOptions) -> Result<()> {
    let b = Arc::new(crate::mpi_backend::MpiBackend::world()?);
    let (rank, size) = (b.rank(), b.size());
    let group = Arc::new(ProcessGroup::new("0", b.clone(), (0..size).collect()));
    let mut w = world();
    if w.is_some() {
        return Err(DistError::InvalidArgument(
            "init_process_group: the default process group is already initialized".into(),
        ));
    }
    *w = Some(World {
        group,
        store: Arc::new(crate::store::HashStore::new()),
        backend: "mpi".into(),
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        timeout: opts.timeout,
        rank,
        size,
        groups_made: 0,
        groups: Vec::new(),
        mpi: Some(b),
    });
    Ok(())
}

#[cfg(not(feature = "mpi"))]
fn init_mpi(_opts: &InitOptions) -> Result<()> {
    Err(DistError::InvalidArgument(
        "init_process_group: the mpi backend needs ferrotorch-distributed's `mpi` cargo feature \
         (and Open MPI: libopenmpi-dev, openmpi-bin, libclang-dev on Debian)"
            .into(),
    ))
}

fn make_backend(
    name: &str,
    store: &Arc<dyn Store>,
    group: &str,
    rank: usize,
    size: usize,
    ip: IpAddr,
    timeout: Duration,
) -> Result<Arc<dyn Backend>> {
    match name {
        "tcp" | "gloo" => {
            let prefixed = PrefixStore::new(group, store.clone());
            Ok(Arc::new(TcpBackend::new(&prefixed, group, rank, size, ip, timeout)?))
        }
        "mpi" => Err(DistError::InvalidArgument(
            "the mpi backend's groups come from MPI (init_process_group(\"mpi\"))".into(),
        )),
        other => Err(DistError::InvalidArgument(format!(
            "init_process_group: unknown backend {other:?} (tcp, gloo, mpi)"
        ))),
    }
}

/// The address this rank listens on for its peers: `FERROTORCH_SOCKET_IP`
/// when set, else the address it reached the store from, else loopback.
fn socket_ip(store_local: Option<IpAddr>) -> Result<IpAddr> {
    if let Ok(v) = std::env::var("FERROTORCH_SOCKET_IP") {
        return v
            .trim()
            .parse()
            .map_err(|_| DistError::InvalidArgument(format!("FERROTORCH_SOCKET_IP={v:?} is not an IP address")));
    }
    Ok(store_local.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)))
}

/// The store of `init_method`, and this rank's address for its peers.
fn rendezvous(
    opts: &InitOptions,
    launch: Option<&LaunchEnv>,
    rank: usize,
    size: usize,
) -> Result<(Arc<dyn Store>, IpAddr)> {
    let method = opts.init_method.clone().unwrap_or_else(|| "env://".into());
    if let Some(path) = method.strip_prefix("file://") {
        let store: Arc<dyn Store> = Arc::new(FileStore::new(path, Some(size)));
        return Ok((store, socket_ip(None)?));
    }
    let (host, port) = if let Some(rest) = method.strip_prefix("tcp://") {
        let (h, p) = rest
            .rsplit_once(':')
            .ok_or_else(|| DistError::InvalidArgument(format!("init_process_group: {method:?} has no port")))?;
        let p: u16 = p
            .trim_end_matches('/')
            .parse()
            .map_err(|_| DistError::InvalidArgument(format!("init_process_group: {method:?} has no valid port")))?;
        (h.trim_matches(['[', ']']).to_owned(), p)
    } else if method == "env://" {
        // mpirun / srun on one host need no address: the store runs on
        // this host at torchrun's default port.
        let one_host = launch.is_some_and(|l| l.single_host());
        let host = launch
            .and_then(|l| l.master_addr.clone())
            .or(one_host.then(|| "127.0.0.1".to_owned()));
        let port = launch.and_then(|l| l.master_port).or(one_host.then_some(29500));
        match (host, port) {
            (Some(h), Some(p)) => (h, p),
            _ => {
                return Err(DistError::InvalidArgument(
                    "init_process_group: env:// needs MASTER_ADDR and MASTER_PORT".into(),
                ));
            }
        }
    } else {
        return Err(DistError::InvalidArgument(format!(
            "init_process_group: unknown init_method {method:?} (env://, tcp://host:port, file://path)"
        )));
    };
    let topts = TcpStoreOptions::new().world_size(size).timeout(opts.timeout);
    let (store, local): (Arc<dyn Store>, Option<IpAddr>) =
        if let Some(attempt) = launch.and_then(|l| l.agent_store_attempt) {
            let s = TcpStore::new(&host, port, topts)?;
            let ip = s.local_ip();
            (
                Arc::new(PrefixStore::new(format!("/worker/attempt_{attempt}"), Arc::new(s))),
                ip,
            )
        } else {
            let s = TcpStore::new(&host, port, topts.is_master(rank == 0))?;
            let ip = s.local_ip();
            (Arc::new(s), ip)
        };
    Ok((store, socket_ip(local)?))
}

/// Whether the default group exists (`is_initialized`).
pub fn is_initialized() -> bool {
    world().is_some()
}

/// The default group (`group.WORLD`); an error before `init_process_group`.
pub fn default_group() -> Result<Arc<ProcessGroup>> {
    world().as_ref().map(|w| w.group.clone()).ok_or_else(not_initialized)
}

fn not_initialized() -> DistError {
    DistError::InvalidArgument(
        "Default process group has not been initialized, please make sure to call init_process_group.".into(),
    )
}

/// This process's global rank (`get_rank`).
pub fn get_rank() -> Result<usize> {
    world().as_ref().map(|w| w.rank).ok_or_else(not_initialized)
}

/// The number of processes (`get_world_size`).
pub fn get_world_size() -> Result<usize> {
    world().as_ref().map(|w| w.size).ok_or_else(not_initialized)
}

/// The default group's backend (`get_backend`).
pub fn get_backend() -> Result<String> {
    world().as_ref().map(|w| w.backend.clone()).ok_or_else(not_initialized)
}

/// A group of the global ranks `ranks` (`new_group`); every process of the
/// job must call it, in the same order as its other `new_group` calls.
/// Members get `Some(group)`, the others `None`.
pub fn new_group(ranks: &[usize]) -> Result<Option<Arc<ProcessGroup>>> {
    #[cfg(feature = "mpi")]
    {
        let mpi = world().as_ref().and_then(|w| w.mpi.clone());
        if let Some(mpi) = mpi {
            return new_mpi_group(&mpi, ranks);
        }
    }
    let (store, backend, ip, timeout, rank, size, name) = {
        let mut w = world();
        let w = w.as_mut().ok_or_else(not_initialized)?;
        w.groups_made += 1;
        (
            w.store.clone(),
            w.backend.clone(),
            w.ip,
            w.timeout,
            w.rank,
            w.size,
            w.groups_made.to_string(),
        )
    };
    let mut members: Vec<usize> = ranks.to_vec();
    if members.is_empty() {
        members = (0..size).collect();
    }
    members.sort_unstable();
    if members.windows(2).any(|w| w[0] == w[1]) || members.iter().any(|&r| r >= size) {
        return Err(DistError::InvalidArgument(format!(
            "new_group: ranks {ranks:?} must be distinct ranks below the world size {size}"
        )));
    }
    let Some(me) = members.iter().position(|&r| r == rank) else {
        return Ok(None);
    };
    let b = make_backend(&backend, &store, &name, me, members.len(), ip, timeout)?;
    let g = Arc::new(ProcessGroup::new(name, b, members));
    if let Some(w) = world().as_mut() {
        w.groups.push(g.clone());
    }
    Ok(Some(g))
}

#[cfg(feature = "mpi")]
fn new_mpi_group(mpi: &crate::mpi_backend::MpiBackend, ranks: &[usize]) -> Result<Option<Arc<ProcessGroup>>> {
    let size = mpi.size();
    let mut members: Vec<usize> = if ranks.is_empty() {
        (0..size).collect()
    } else {
        ranks.to_vec()
    };
    members.sort_unstable();
    if members.windows(2).any(|w| w[0] == w[1]) || members.iter().any(|&r| r >= size) {
        return Err(DistError::InvalidArgument(format!(
            "new_group: ranks {ranks:?} must be distinct ranks below the world size {size}"
        )));
    }
    let name = {
        let mut w = world();
        let w = w.as_mut().ok_or_else(not_initialized)?;
        w.groups_made += 1;
        w.groups_made.to_string()
    };
    let Some(b) = mpi.split(&members)? else {
        return Ok(None);
    };
    let g = Arc::new(ProcessGroup::new(name, Arc::new(b), members));
    if let Some(w) = world().as_mut() {
        w.groups.push(g.clone());
    }
    Ok(Some(g))
}

/// Destroys the default group and every group made from it
/// (`destroy_process_group`); later calls fail until the next
/// `init_process_group`.
pub fn destroy_process_group() {
    if let Some(w) = world().take() {
        for g in &w.groups {
            g.shutdown();
        }
        w.group.shutdown();
    }
}

macro_rules! on_world {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) => $call:expr) => {
        $(#[$doc])*
        pub fn $name($($arg: $ty),*) -> Result<()> {
            default_group()?.run($call)
        }
    };
}

on_world!(
    /// `dist.broadcast(tensor, src)` on the default group, waiting.
    broadcast(tensor: &Tensor, src: usize) => Collective::Broadcast { tensor: tensor.clone(), root: src });
on_world!(
    /// `dist.all_reduce(tensor, op)` on the default group, waiting.
    all_reduce(tensor: &Tensor, op: ReduceOp) => Collective::AllReduce { tensor: tensor.clone(), op });
on_world!(
    /// `dist.reduce(tensor, dst, op)` on the default group, waiting.
    reduce(tensor: &Tensor, dst: usize, op: ReduceOp) => Collective::Reduce { tensor: tensor.clone(), root: dst, op });
on_world!(
    /// `dist.all_gather(tensor_list, tensor)` on the default group, waiting.
    all_gather(outputs: &[Tensor], input: &Tensor) =>
        Collective::AllGather { outputs: outputs.to_vec(), input: input.clone() });
on_world!(
    /// `dist.all_gather_into_tensor(output, input)`, waiting.
    all_gather_into_tensor(output: &Tensor, input: &Tensor) =>
        Collective::AllGatherIntoTensor { output: output.clone(), input: input.clone() });
on_world!(
    /// `dist.reduce_scatter(output, input_list, op)`, waiting.
    reduce_scatter(output: &Tensor, inputs: &[Tensor], op: ReduceOp) =>
        Collective::ReduceScatter { output: output.clone(), inputs: inputs.to_vec(), op });
on_world!(
    /// `dist.reduce_scatter_tensor(output, input, op)`, waiting.
    reduce_scatter_tensor(output: &Tensor, input: &Tensor, op: ReduceOp) =>
        Collective::ReduceScatterTensor { output: output.clone(), input: input.clone(), op });
on_world!(
    /// `dist.gather(tensor, gather_list, dst)`, waiting.
    gather(input: &Tensor, outputs: &[Tensor], dst: usize) =>
        Collective::Gather { outputs: outputs.to_vec(), input: input.clone(), root: dst });
on_world!(
    /// `dist.scatter(tensor, scatter_list, src)`, waiting.
    scatter(output: &Tensor, inputs: &[Tensor], src: usize) =>
        Collective::Scatter { output: output.clone(), inputs: inputs.to_vec(), root: src });
on_world!(
    /// `dist.all_to_all(output_list, input_list)`, waiting.
    all_to_all(outputs: &[Tensor], inputs: &[Tensor]) =>
        Collective::AllToAll { outputs: outputs.to_vec(), inputs: inputs.to_vec() });
on_world!(
    /// `dist.send(tensor, dst, tag)`, waiting.
    send(tensor: &Tensor, dst: usize, tag: u64) => Collective::Send { tensor: tensor.clone(), dst, tag });
on_world!(
    /// `dist.recv(tensor, src, tag)`, waiting.
    recv(tensor: &Tensor, src: usize, tag: u64) => Collective::Recv { tensor: tensor.clone(), src, tag });

/// `dist.barrier()` on the default group, waiting.
pub fn barrier() -> Result<()> {
    default_group()?.run(Collective::Barrier)
}

/// `dist.all_to_all_single(output, input, output_split_sizes,
/// input_split_sizes)` on the default group, waiting (splits in rows;
/// empty for equal blocks).
pub fn all_to_all_single(
    output: &Tensor,
    input: &Tensor,
    output_splits: &[usize],
    input_splits: &[usize],
) -> Result<()> {
    default_group()?.run(Collective::AllToAllSingle {
        output: output.clone(),
        input: input.clone(),
        output_splits: output_splits.to_vec(),
        input_splits: input_splits.to_vec(),
    })
}

/// `dist.isend(tensor, dst, tag=tag)` on the default group: the send's
/// [`Work`](crate::Work), not waited for.
pub fn isend(tensor: &Tensor, dst: usize, tag: u64) -> Result<crate::Work> {
    default_group()?.send(tensor, dst, tag)
}

/// `dist.irecv(tensor, src, tag=tag)` on the default group: the receive's
/// [`Work`](crate::Work), not waited for.
pub fn irecv(tensor: &Tensor, src: usize, tag: u64) -> Result<crate::Work> {
    default_group()?.recv(tensor, src, tag)
}

/// `dist.batch_isend_irecv(p2p_op_list)` on the default group: one
/// [`Work`](crate::Work) per operation, in order.
pub fn batch_isend_irecv(ops: &[crate::group::P2pOp]) -> Result<Vec<crate::Work>> {
    default_group()?.batch_isend_irecv(ops)
}

/// `dist.is_available()`: whether this build has distributed support
/// (always: the `tcp` backend is built in).
pub fn is_available() -> bool {
    true
}

/// `dist.get_process_group_ranks(group)`: the global ranks of `group`'s
/// members, in group-rank order.
pub fn get_process_group_ranks(group: &ProcessGroup) -> Vec<usize> {
    group.members().to_vec()
}

/// `dist.get_global_rank(group, group_rank)`; an error when `group` has
/// no such rank.
pub fn get_global_rank(group: &ProcessGroup, group_rank: usize) -> Result<usize> {
    group.global_rank(group_rank).ok_or_else(|| {
        DistError::InvalidArgument(format!(
            "get_global_rank: group rank {group_rank} is not part of the group (it has {} ranks)",
            group.size()
        ))
    })
}

/// `dist.get_group_rank(group, global_rank)`; an error when global rank
/// `global_rank` is not a member of `group`.
pub fn get_group_rank(group: &ProcessGroup, global_rank: usize) -> Result<usize> {
    group.group_rank(global_rank).ok_or_else(|| {
        DistError::InvalidArgument(format!(
            "get_group_rank: global rank {global_rank} is not part of the group (its ranks are {:?})",
            group.members()
        ))
    })
}
