//! The loader's worker threads: [`WorkerInfo`] / [`get_worker_info`] and
//! the pool that fetches and collates batches in the background.
//!
//! Each worker has its own task queue and gets tasks in turn (task `k` of
//! an epoch goes to worker `k % num_workers` while all are active, as
//! PyTorch's `_MultiProcessingDataLoaderIter` hands out indices), so which
//! worker loads which batch does not depend on timing. Results come back
//! on one channel tagged with their task number and the loader delivers
//! them in task order. Every task runs under `catch_unwind`: a panic
//! becomes [`DataError::WorkerPanicked`] for that batch and the worker
//! goes on.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

use ferrotorch_core::Generator;

use crate::collate::CollateFn;
use crate::dataset::{Dataset, ItemIter, IterableDataset};
use crate::error::{DataError, Result};

/// What a worker thread knows about itself (PyTorch's
/// `torch.utils.data.get_worker_info()`), for sharding an
/// [`IterableDataset`] and seeding random transforms.
#[derive(Clone, Debug)]
pub struct WorkerInfo {
    /// This worker's id, `0..num_workers`.
    pub id: usize,
    /// The loader's number of workers.
    pub num_workers: usize,
    /// `base_seed + id`, where `base_seed` is what the loader drew when its
    /// workers started (`torch.empty((), dtype=torch.int64).random_()` from
    /// the loader's generator, or the global one): the seed PyTorch gives
    /// `torch.manual_seed` in each worker process.
    pub seed: u64,
    generator: Generator,
}

impl WorkerInfo {
    /// This worker's generator, seeded with [`seed`](Self::seed) when the
    /// worker started and shared by everything the worker runs.
    ///
    /// Worker threads share the process's global generator (PyTorch's
    /// worker processes each have their own, seeded `base_seed + id`), so
    /// a dataset or transform that draws random numbers should draw from
    /// this one when it runs on a worker:
    /// `get_worker_info().map(|w| w.generator().clone())`. Then a seed
    /// (`manual_seed`, or the loader's generator) gives the same batches
    /// run after run for a given number of workers.
    pub fn generator(&self) -> &Generator {
        &self.generator
    }
}

thread_local! {
    static WORKER_INFO: RefCell<Option<WorkerInfo>> = const { RefCell::new(None) };
}

/// The [`WorkerInfo`] of the calling thread when it is a data-loader
/// worker, `None` on any other thread (including the loader's own thread
/// with `num_workers(0)`).
pub fn get_worker_info() -> Option<WorkerInfo> {
    WORKER_INFO.with(|w| w.borrow().clone())
}

/// A unit of work for one worker.
pub(crate) enum Task {
    /// Load these indices and collate them (`batched`), or convert the one
    /// index (unbatched).
    Indices {
        generation: u64,
        task: usize,
        indices: Vec<usize>,
        batched: bool,
    },
    /// Take the next batch from the worker's own stream.
    Stream { generation: u64, task: usize },
}

/// What a worker sends back.
pub(crate) enum Reply<O> {
    /// A batch, or the error loading it.
    Batch(Result<O>),
    /// The worker's stream has ended (iterable datasets).
    Exhausted,
}

/// A reply with its tags.
pub(crate) struct Done<O> {
    pub generation: u64,
    pub task: usize,
    pub reply: Reply<O>,
}

/// The dataset the workers read.
pub(crate) enum Source<T> {
    Map(Arc<dyn Dataset<Item = T> + Send + Sync>),
    Iterable(Arc<dyn IterableDataset<Item = T> + Send + Sync>),
}

impl<T> Clone for Source<T> {
    fn clone(&self) -> Self {
        match self {
            Source::Map(d) => Source::Map(d.clone()),
            Source::Iterable(d) => Source::Iterable(d.clone()),
        }
    }
}

/// How the workers batch a stream: `Some((batch_size, drop_last))`, or
/// `None` for one item at a time.
pub(crate) type StreamBatching = Option<(usize, bool)>;

/// Running worker threads, their task queues and the result channel.
/// Dropping it stops and joins them.
pub(crate) struct Pool<O> {
    tasks: Vec<Sender<Task>>,
    pub results: Receiver<Done<O>>,
    handles: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// The epoch counter: replies of an earlier epoch are discarded.
    pub generation: u64,
}

impl<O: Send + 'static> Pool<O> {
    /// Starts `num_workers` threads, worker `k` seeded `base_seed + k`.
    pub fn start<T, C>(
        source: &Source<T>,
        collate: &Arc<C>,
        num_workers: usize,
        base_seed: u64,
        stream_batching: StreamBatching,
    ) -> Result<Self>
    where
        T: Send + 'static,
        C: CollateFn<T, Output = O> + Send + Sync + 'static,
    {
        let (result_tx, results) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let mut pool = Pool {
            tasks: Vec::with_capacity(num_workers),
            results,
            handles: Vec::with_capacity(num_workers),
            stop: stop.clone(),
            generation: 0,
        };
        for id in 0..num_workers {
            let (task_tx, task_rx) = channel();
            let seed = base_seed.wrapping_add(id as u64);
            let info = WorkerInfo {
                id,
                num_workers,
                seed,
                generator: Generator::new(seed),
            };
            let ctx = WorkerCtx {
                source: source.clone(),
                collate: collate.clone(),
                tasks: task_rx,
                results: result_tx.clone(),
                stop: stop.clone(),
                stream_batching,
            };
            let handle = std::thread::Builder::new()
                .name(format!("ferrotorch-data-worker-{id}"))
                .spawn(move || {
                    WORKER_INFO.with(|w| *w.borrow_mut() = Some(info));
                    ctx.run(id);
                })
                .map_err(|e| DataError::Worker {
                    worker: id,
                    detail: format!("could not start the thread: {e}"),
                })?;
            pool.tasks.push(task_tx);
            pool.handles.push(handle);
        }
        Ok(pool)
    }
}

impl<O> Pool<O> {
    /// The number of workers.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Queues `task` for `worker`; false when that worker is gone.
    pub fn send(&self, worker: usize, task: Task) -> bool {
        self.tasks[worker].send(task).is_ok()
    }

    /// Whether `worker`'s thread has stopped.
    pub fn is_finished(&self, worker: usize) -> bool {
        self.handles[worker].is_finished()
    }
}

impl<O> Drop for Pool<O> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Closing the task queues ends each worker's `recv`; a worker in the
        // middle of a batch sees `stop` before its next item.
        self.tasks.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

struct WorkerCtx<T, C: CollateFn<T>> {
    source: Source<T>,
    collate: Arc<C>,
    tasks: Receiver<Task>,
    results: Sender<Done<C::Output>>,
    stop: Arc<AtomicBool>,
    stream_batching: StreamBatching,
}

/// The message of a caught panic.
pub(crate) fn panic_message(p: Box<dyn Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

impl<T, C: CollateFn<T>> WorkerCtx<T, C> {
    fn run(self, id: usize) {
        match &self.source {
            Source::Map(ds) => self.run_map(id, &**ds),
            Source::Iterable(ds) => self.run_stream(id, &**ds),
        }
    }

    fn run_map(&self, id: usize, ds: &(dyn Dataset<Item = T> + Send + Sync)) {
        while let Ok(task) = self.tasks.recv() {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let Task::Indices {
                generation,
                task,
                indices,
                batched,
            } = task
            else {
                continue;
            };
            let stop = &*self.stop;
            let collate = &*self.collate;
            let r = catch_unwind(AssertUnwindSafe(|| {
                if batched {
                    fetch_batch(ds, collate, &indices, Some(stop))
                } else {
                    fetch_one(ds, collate, indices[0])
                }
            }));
            let reply = Reply::Batch(r.unwrap_or_else(|p| {
                Err(DataError::WorkerPanicked {
                    worker: id,
                    message: panic_message(p),
                })
            }));
            if self
                .results
                .send(Done {
                    generation,
                    task,
                    reply,
                })
                .is_err()
            {
                return;
            }
        }
    }

    fn run_stream(&self, id: usize, ds: &(dyn IterableDataset<Item = T> + Send + Sync)) {
        // The stream of the current generation; `None` inside once it ended.
        let mut current: Option<(u64, Option<ItemIter<'_, T>>)> = None;
        while let Ok(task) = self.tasks.recv() {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let Task::Stream { generation, task } = task else {
                continue;
            };
            if current.as_ref().is_none_or(|(g, _)| *g != generation) {
                match catch_unwind(AssertUnwindSafe(|| ds.iter())) {
                    Ok(it) => current = Some((generation, Some(it))),
                    Err(p) => {
                        current = Some((generation, None));
                        let reply = Reply::Batch(Err(DataError::WorkerPanicked {
                            worker: id,
                            message: panic_message(p),
                        }));
                        if self.send(generation, task, reply).is_err() {
                            return;
                        }
                        continue;
                    }
                }
            }
            let slot = &mut current.as_mut().expect("set above").1;
            let reply = match slot {
                None => Reply::Exhausted,
                Some(it) => {
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        next_from_stream(it, &*self.collate, self.stream_batching, Some(&self.stop))
                    }));
                    match r {
                        Ok(Some(batch)) => Reply::Batch(batch),
                        Ok(None) => {
                            *slot = None;
                            Reply::Exhausted
                        }
                        Err(p) => {
                            *slot = None;
                            Reply::Batch(Err(DataError::WorkerPanicked {
                                worker: id,
                                message: panic_message(p),
                            }))
                        }
                    }
                }
            };
            if self.send(generation, task, reply).is_err() {
                return;
            }
        }
    }

    fn send(&self, generation: u64, task: usize, reply: Reply<C::Output>) -> Result<(), ()> {
        self.results
            .send(Done {
                generation,
                task,
                reply,
            })
            .map_err(|_| ())
    }
}

fn stopped(stop: Option<&AtomicBool>) -> Result<()> {
    if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
        return Err(DataError::msg("the DataLoader iterator was dropped"));
    }
    Ok(())
}

/// Loads `indices` and collates them; a failed item is an error with its
/// index.
pub(crate) fn fetch_batch<T, C: CollateFn<T> + ?Sized>(
    ds: &(dyn Dataset<Item = T> + Send + Sync),
    collate: &C,
    indices: &[usize],
    stop: Option<&AtomicBool>,
) -> Result<C::Output> {
    let mut items = Vec::with_capacity(indices.len());
    for &i in indices {
        stopped(stop)?;
        items.push(ds.get(i).map_err(|e| DataError::Item {
            index: i,
            source: Box::new(e),
        })?);
    }
    collate.collate(items)
}

/// Loads one index, unbatched.
pub(crate) fn fetch_one<T, C: CollateFn<T> + ?Sized>(
    ds: &(dyn Dataset<Item = T> + Send + Sync),
    collate: &C,
    index: usize,
) -> Result<C::Output> {
    let item = ds.get(index).map_err(|e| DataError::Item {
        index,
        source: Box::new(e),
    })?;
    collate.convert(item)
}

/// The next batch of a stream (PyTorch's `_IterableDatasetFetcher`): up to
/// `batch_size` items; `None` when the stream gave nothing, or, with
/// `drop_last`, fewer than `batch_size`.
pub(crate) fn next_from_stream<T, C: CollateFn<T> + ?Sized>(
    it: &mut ItemIter<'_, T>,
    collate: &C,
    batching: StreamBatching,
    stop: Option<&AtomicBool>,
) -> Option<Result<C::Output>> {
    match batching {
        None => it.next().map(|r| r.and_then(|item| collate.convert(item))),
        Some((batch_size, drop_last)) => {
            let mut items = Vec::with_capacity(batch_size);
            while items.len() < batch_size {
                if let Err(e) = stopped(stop) {
                    return Some(Err(e));
                }
                match it.next() {
                    Some(Ok(x)) => items.push(x),
                    Some(Err(e)) => return Some(Err(e)),
                    None => break,
                }
            }
            if items.is_empty() || (drop_last && items.len() < batch_size) {
                None
            } else {
                Some(collate.collate(items))
            }
        }
    }
}
