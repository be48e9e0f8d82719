//! DDP's Reducer (PyTorch's `reducer.cpp`): gradient buckets, the
//! post-accumulate-grad hooks that fill them, bucket all-reduces launched
//! in bucket order as soon as each bucket is full (so communication
//! overlaps the rest of backward), and the finish that writes the averaged
//! gradients back.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ferrotorch_core::autograd::no_grad;
use ferrotorch_core::{DType, Tensor, TensorOptions};

use super::options::{CommHook, DdpOptions};
use crate::collective::Collective;
use crate::error::{DistError, Result};
use crate::group::ProcessGroup;
use crate::reduce_op::ReduceOp;
use crate::work::Work;

/// PyTorch's size of the first bucket (`dist._DEFAULT_FIRST_BUCKET_BYTES`).
pub(crate) const FIRST_BUCKET_BYTES: usize = 1024 * 1024;

/// One bucket: a flat buffer over some parameters' gradients.
struct Bucket {
    buffer: Tensor,
    /// Parameter indices, in the buffer's order.
    members: Vec<usize>,
    /// Element offset of each member.
    offsets: Vec<usize>,
    /// Members not ready yet this iteration.
    pending: usize,
    /// The launched reduction and, for compression hooks, the compressed
    /// tensor it reduces.
    work: Option<(Work, Option<Tensor>)>,
    /// When this iteration's reduction was launched, and when it completed
    /// (set by the backend's thread).
    launched: Option<Instant>,
    completed: Arc<Mutex<Option<Instant>>>,
    /// The reduction ran on this thread at backward's end (the last
    /// bucket, nothing else in flight), taking this long: all of it
    /// exposed.
    inline: Option<Duration>,
}

/// How DDP's gradient communication went, summed over the iterations so
/// far (PyTorch's DDP logging data: `avg_backward_comm_time` and what of it
/// overlapped backward's computation).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CommStats {
    /// Iterations whose gradients were reduced.
    pub iterations: u64,
    /// Time from each bucket's launch to its reduction's completion, summed
    /// over buckets.
    pub comm_time: Duration,
    /// Time the end of backward waited for reductions still running: the
    /// communication backward did not hide.
    pub exposed_time: Duration,
}

impl CommStats {
    /// The share of the communication hidden behind backward's computation,
    /// `1 - exposed / comm` (0 to 1; 0 before any communication).
    pub fn hidden_fraction(&self) -> f64 {
        if self.comm_time.is_zero() {
            return 0.0;
        }
        (1.0 - self.exposed_time.as_secs_f64() / self.comm_time.as_secs_f64()).clamp(0.0, 1.0)
    }
}

struct State {
    buckets: Vec<Bucket>,
    /// Parameter -> (bucket, member index).
    loc: Vec<(usize, usize)>,
    ready: Vec<bool>,
    used: Vec<bool>,
    next_bucket: usize,
    /// A reduction is expected this iteration (forward ran with grad
    /// enabled, outside `no_sync`).
    armed: bool,
    finished: bool,
    /// Parameters in the order they became ready (first iteration).
    arrival: Vec<usize>,
    rebuilt: bool,
    rebuild_order: Option<Vec<usize>>,
    /// A failure inside a hook, reported by the next call.
    error: Option<String>,
    sync: bool,
    hook: CommHook,
    static_unused: Option<Vec<bool>>,
    stats: CommStats,
}

/// The reducer of one DDP module.
pub(crate) struct Reducer {
    group: Arc<ProcessGroup>,
    params: Vec<Tensor>,
    names: Vec<String>,
    opts: DdpOptions,
    state: Mutex<State>,
}

impl Reducer {
    pub(crate) fn new(
        group: Arc<ProcessGroup>,
        params: Vec<Tensor>,
        names: Vec<String>,
        opts: DdpOptions,
    ) -> Result<Self> {
        let n = params.len();
        let order: Vec<usize> = (0..n).rev().collect();
        let (buckets, loc) = make_buckets(&params, &order, opts.bucket_cap_mb)?;
        Ok(Reducer {
            group,
            params,
            names,
            state: Mutex::new(State {
                buckets,
                loc,
                ready: vec![false; n],
                used: vec![false; n],
                next_bucket: 0,
                armed: false,
                finished: true,
                arrival: Vec::new(),
                rebuilt: false,
                rebuild_order: None,
                error: None,
                sync: true,
                hook: opts.comm_hook,
                static_unused: None,
                stats: CommStats::default(),
            }),
            opts,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn params(&self) -> &[Tensor] {
        &self.params
    }

    pub(crate) fn set_sync(&self, sync: bool) -> bool {
        std::mem::replace(&mut self.lock().sync, sync)
    }

    pub(crate) fn set_comm_hook(&self, hook: CommHook) {
        self.lock().hook = hook;
    }

    /// The parameter indices of each bucket, in bucket order.
    pub(crate) fn comm_stats(&self) -> CommStats {
        self.lock().stats
    }

    pub(crate) fn bucket_members(&self) -> Vec<Vec<usize>> {
        self.lock().buckets.iter().map(|b| b.members.clone()).collect()
    }

    /// Called at the end of each forward with its outputs: reports a
    /// failure of the previous iteration, rebuilds the buckets once, and
    /// arms the hooks; with `find_unused_parameters`, marks the parameters
    /// the outputs do not depend on as ready at once.
    pub(crate) fn prepare_for_backward(&self, outputs: &[Tensor]) -> Result<()> {
        let mut st = self.lock();
        if let Some(e) = st.error.take() {
            return Err(DistError::Collective(format!("DistributedDataParallel: {e}")));
        }
        if st.armed && !st.finished {
            let missing: Vec<String> = (0..self.params.len())
                .filter(|&i| !st.ready[i])
                .map(|i| format!("{i} ({})", self.names[i]))
                .collect();
            st.armed = false;
            return Err(DistError::Collective(format!(
                "Expected to have finished reduction in the prior iteration before starting a new one. \
                 This error indicates that your module has parameters that were not used in producing loss. \
                 You can enable unused parameter detection by passing find_unused_parameters(true) to \
                 DdpOptions, and by making sure all forward outputs participate in calculating loss. \
                 Parameter indices which did not receive grad for rank {}: {}",
                self.group.rank(),
                missing.join(", ")
            )));
        }
        if let Some(order) = st.rebuild_order.take() {
            let (buckets, loc) = make_buckets(&self.params, &order, self.opts.bucket_cap_mb)?;
            st.buckets = buckets;
            st.loc = loc;
        }
        let n = self.params.len();
        st.ready = vec![false; n];
        st.used = vec![false; n];
        st.next_bucket = 0;
        for b in &mut st.buckets {
            b.pending = b.members.len();
            b.work = None;
            b.inline = None;
        }
        if !st.rebuilt {
            st.arrival.clear();
        }
        st.finished = false;
        st.armed = ferrotorch_core::autograd::is_grad_enabled() && st.sync;
        if !st.armed {
            st.finished = true;
            return Ok(());
        }
        if self.opts.find_unused_parameters || self.opts.static_graph {
            let unused = match (&st.static_unused, self.opts.static_graph) {
                (Some(u), true) => u.clone(),
                _ => {
                    let reached = reachable_leaves(outputs);
                    let u: Vec<bool> = self
                        .params
                        .iter()
                        .map(|p| !reached.iter().any(|l| l.is_same(p)))
                        .collect();
                    if self.opts.static_graph {
                        st.static_unused = Some(u.clone());
                    }
                    u
                }
            };
            for (i, unused) in unused.into_iter().enumerate() {
                if unused {
                    self.mark_ready(&mut st, i, None);
                }
            }
        }
        Ok(())
    }

    /// The post-accumulate-grad hook of parameter `i`.
    pub(crate) fn on_grad(&self, i: usize) {
        let mut st = self.lock();
        if !st.armed || st.finished || st.error.is_some() {
            return;
        }
        if st.ready[i] {
            st.error = Some(format!(
                "parameter {i} ({}) was marked ready twice in one iteration (a parameter used in two \
                 backward passes, or reentrant checkpointing: use static_graph)",
                self.names[i]
            ));
            return;
        }
        let grad = self.params[i].grad_opt();
        self.mark_ready(&mut st, i, grad);
    }

    /// Copies parameter `i`'s gradient (zeros when `None`) into its bucket;
    /// launches every bucket that is full, in bucket order; finishes once
    /// the last one is launched.
    fn mark_ready(&self, st: &mut State, i: usize, grad: Option<Tensor>) {
        st.ready[i] = true;
        if !st.rebuilt {
            st.arrival.push(i);
        }
        st.used[i] = grad.is_some();
        let (b, m) = st.loc[i];
        let n = self.group.size();
        let copied = (|| -> Result<()> {
            let bucket = &st.buckets[b];
            let p = &self.params[i];
            let slot = bucket.buffer.narrow(0, bucket.offsets[m] as i64, p.numel() as i64)?;
            no_grad(|| -> Result<()> {
                match &grad {
                    Some(g) if g.is_same(&slot) => {}
                    Some(g) => {
                        // Straight into the slot in the parameter's shape: a
                        // strided gradient (a transposed product) is read
                        // once, with no contiguous copy on the way.
                        slot.view(p.shape())?.copy_(g)?;
                    }
                    None => {
                        slot.zero_()?;
                    }
                }
                // PyTorch's default: divide while filling the bucket; the
                // compression hooks divide the compressed tensor instead.
                // (On one rank the factor is 1: nothing to do.)
                if st.hook == CommHook::AllReduce && grad.is_some() && n > 1 {
                    slot.mul_(1.0 / n as f64)?;
                }
                Ok(())
            })
        })();
        if let Err(e) = copied {
            st.error = Some(format!("filling the bucket of parameter {i} ({}): {e}", self.names[i]));
            return;
        }
        st.buckets[b].pending -= 1;
        while st.next_bucket < st.buckets.len() && st.buckets[st.next_bucket].pending == 0 {
            let k = st.next_bucket;
            if let Err(e) = self.launch(st, k) {
                st.error = Some(format!("launching bucket {k}: {e}"));
                return;
            }
            st.next_bucket += 1;
        }
        if st.next_bucket == st.buckets.len()
            && let Err(e) = self.finish(st)
        {
            st.error = Some(e.to_string());
        }
    }

    fn launch(&self, st: &mut State, k: usize) -> Result<()> {
        let n = self.group.size() as f64;
        let hook = st.hook;
        // The last bucket, with every earlier one done: backward has no
        // more work to overlap, so the reduction runs here rather than
        // being handed to the backend's thread and waited for at once.
        let last = k + 1 == st.buckets.len()
            && st.buckets[..k]
                .iter()
                .all(|b| b.work.as_ref().is_none_or(|(w, _)| w.is_completed()));
        let bucket = &mut st.buckets[k];
        bucket.inline = None;
        if last && hook == CommHook::AllReduce {
            let start = Instant::now();
            self.group.run(Collective::AllReduce {
                tensor: bucket.buffer.clone(),
                op: ReduceOp::Sum,
            })?;
            bucket.inline = Some(start.elapsed());
            bucket.work = None;
            return Ok(());
        }
        let (work, compressed) = match hook {
            CommHook::AllReduce => (self.group.all_reduce(&bucket.buffer, ReduceOp::Sum)?, None),
            CommHook::Fp16Compress | CommHook::Bf16Compress => {
                let dtype = if hook == CommHook::Fp16Compress {
                    DType::F16
                } else {
                    DType::BF16
                };
                let c = no_grad(|| bucket.buffer.to_dtype(dtype)?.div_(n))?;
                (self.group.all_reduce(&c, ReduceOp::Sum)?, Some(c))
            }
        };
        bucket.launched = Some(Instant::now());
        let completed = bucket.completed.clone();
        *completed.lock().unwrap_or_else(|e| e.into_inner()) = None;
        work.then(move |_| *completed.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now()));
        bucket.work = Some((work, compressed));
        Ok(())
    }

    /// Waits for every bucket, writes the gradients, plans the one rebuild.
    fn finish(&self, st: &mut State) -> Result<()> {
        st.finished = true;
        st.armed = false;
        let (mut comm, mut exposed) = (Duration::ZERO, Duration::ZERO);
        for b in &st.buckets {
            if let Some(d) = b.inline {
                comm += d;
                exposed += d;
            }
            if let Some((work, compressed)) = &b.work {
                let already = work.is_completed();
                let waiting = Instant::now();
                work.wait()?;
                let seen = Instant::now();
                // Launch to completion: the time the backend's thread noted
                // (its callback runs just after the waiters wake, so it may
                // be missing or late); a wait, waking up included, is
                // exposed communication.
                let noted = *b.completed.lock().unwrap_or_else(|e| e.into_inner());
                let end = if already {
                    noted.map_or(waiting, |t| t.min(waiting))
                } else {
                    exposed += seen - waiting;
                    noted.map_or(seen, |t| t.max(seen))
                };
                if let Some(start) = b.launched {
                    comm += end.saturating_duration_since(start);
                }
                if let Some(c) = compressed {
                    no_grad(|| b.buffer.copy_(c))?;
                }
            }
        }
        st.stats.exposed_time += exposed;
        st.stats.iterations += 1;
        st.stats.comm_time += comm;
        let globally_used = if self.opts.find_unused_parameters {
            let map = TensorOptions::new().dtype(DType::I32).zeros([self.params.len()])?;
            let used: Vec<i32> = st.used.iter().map(|&u| i32::from(u)).collect();
            no_grad(|| map.copy_(&Tensor::new(used)?))?;
            self.group.all_reduce(&map, ReduceOp::Max)?.wait()?;
            Some(map.to_vec::<i32>()?)
        } else {
            None
        };
        for (i, p) in self.params.iter().enumerate() {
            if globally_used.as_ref().is_some_and(|u| u[i] == 0) {
                continue;
            }
            let (b, m) = st.loc[i];
            let bucket = &st.buckets[b];
            let view = bucket
                .buffer
                .narrow(0, bucket.offsets[m] as i64, p.numel() as i64)?
                .view(p.shape())?;
            no_grad(|| -> Result<()> {
                if self.opts.gradient_as_bucket_view {
                    if !p.grad_opt().is_some_and(|g| g.is_same(&view)) {
                        p.set_grad(Some(view))?;
                    }
                } else {
                    match p.grad_opt() {
                        Some(g) => {
                            g.copy_(&view)?;
                        }
                        None => p.set_grad(Some(view.clone_tensor()?))?,
                    }
                }
                Ok(())
            })?;
        }
        if !st.rebuilt {
            st.rebuilt = true;
            // Rank 0's arrival order, so every rank builds the same buckets.
            let n = self.params.len();
            let mut order = st.arrival.clone();
            let seen: HashSet<usize> = order.iter().copied().collect();
            order.extend((0..n).rev().filter(|i| !seen.contains(i)));
            let t = Tensor::new(order.iter().map(|&i| i as i64).collect::<Vec<_>>())?;
            self.group.broadcast(&t, 0)?.wait()?;
            let order: Vec<usize> = t.to_vec::<i64>()?.into_iter().map(|i| i as usize).collect();
            let valid = order.len() == n && order.iter().copied().collect::<HashSet<_>>().len() == n;
            if valid {
                st.rebuild_order = Some(order);
            }
        }
        Ok(())
    }
}

/// Buckets, and where each parameter lies in them (bucket, member).
type Layout = (Vec<Bucket>, Vec<(usize, usize)>);

/// Buckets over the parameters taken in `order`: one dtype per bucket,
/// the first up to 1 MiB, the others up to `cap_mb`.
fn make_buckets(params: &[Tensor], order: &[usize], cap_mb: f64) -> Result<Layout> {
    let cap = (cap_mb * 1024.0 * 1024.0) as usize;
    // dtype -> (members, bytes) of the bucket being filled.
    let mut open: Vec<(DType, Vec<usize>, usize)> = Vec::new();
    let mut groups: Vec<(DType, Vec<usize>)> = Vec::new();
    for &i in order {
        let p = &params[i];
        let dtype = p.dtype();
        let pos = match open.iter().position(|(d, _, _)| *d == dtype) {
            Some(pos) => pos,
            None => {
                open.push((dtype, Vec::new(), 0));
                open.len() - 1
            }
        };
        let limit = if groups.iter().any(|(d, _)| *d == dtype) {
            cap
        } else {
            FIRST_BUCKET_BYTES.min(cap)
        };
        let entry = &mut open[pos];
        entry.1.push(i);
        entry.2 += p.numel() * p.element_size();
        if entry.2 >= limit {
            groups.push((dtype, std::mem::take(&mut entry.1)));
            entry.2 = 0;
        }
    }
    for (d, members, _) in open {
        if !members.is_empty() {
            groups.push((d, members));
        }
    }
    let mut loc = vec![(0, 0); params.len()];
    let mut buckets = Vec::with_capacity(groups.len());
    for (b, (dtype, members)) in groups.into_iter().enumerate() {
        let mut offsets = Vec::with_capacity(members.len());
        let mut total = 0usize;
        for (m, &i) in members.iter().enumerate() {
            offsets.push(total);
            total += params[i].numel();
            loc[i] = (b, m);
        }
        let buffer = TensorOptions::new().dtype(dtype).zeros([total])?;
        buckets.push(Bucket {
            buffer,
            pending: members.len(),
            members,
            offsets,
            work: None,
            launched: None,
            completed: Arc::default(),
            inline: None,
        });
    }
    Ok((buckets, loc))
}

/// The leaves that `outputs` depend on through the autograd graph.
fn reachable_leaves(outputs: &[Tensor]) -> Vec<Tensor> {
    let mut seen = HashSet::new();
    let mut stack: Vec<_> = outputs.iter().filter_map(Tensor::grad_fn).collect();
    let mut leaves = Vec::new();
    while let Some(node) = stack.pop() {
        if !seen.insert(Arc::as_ptr(&node) as usize) {
            continue;
        }
        if let Some(leaf) = node.backward_fn().leaf() {
            leaves.push(leaf.clone());
        }
        for e in node.next_edges().iter().flatten() {
            stack.push(e.node.clone());
        }
    }
    leaves
}
