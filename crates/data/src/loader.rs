//! [`DataLoader`] (`torch.utils.data.DataLoader`): batches of a dataset in
//! a sampler's order, loaded on the calling thread or on worker threads.

use std::any::Any;
use std::collections::HashMap;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrotorch_core::Generator;

use crate::collate::{CollateFn, DefaultCollate};
use crate::dataset::{Dataset, ItemIter, IterableDataset};
use crate::error::{DataError, Result};
use crate::sampler::{BatchSampler, BoxSampler, IndexIter, RandomSampler, Sampler, SequentialSampler, draw_seed};
use crate::worker::{Done, Pool, Reply, Source, StreamBatching, Task, fetch_batch, fetch_one, next_from_stream};

/// A boxed batch sampler.
pub type BoxBatchSampler = Box<dyn Sampler<Vec<usize>> + Send + Sync>;

/// What drives the loader: batches of indices, single indices, or a stream.
enum Indexing {
    Batches(BoxBatchSampler),
    Single(BoxSampler),
    Stream(StreamBatching),
}

/// Options of a [`DataLoader`], set one by one and checked by
/// [`build`](Self::build) (PyTorch's `DataLoader(...)` keyword arguments).
pub struct DataLoaderBuilder<T, C = DefaultCollate> {
    source: Source<T>,
    collate: C,
    batch_size: Option<usize>,
    batch_size_set: bool,
    shuffle: bool,
    sampler: Option<BoxSampler>,
    batch_sampler: Option<BoxBatchSampler>,
    drop_last: bool,
    generator: Option<Generator>,
    num_workers: usize,
    prefetch_factor: Option<usize>,
    persistent_workers: bool,
    timeout: Option<Duration>,
}

impl<T, C> DataLoaderBuilder<T, C> {
    /// Items per batch (default `Some(1)`, as PyTorch); `None` turns
    /// batching off: each item is converted on its own
    /// ([`CollateFn::convert`]). A batch size of 0 is an error of `build`.
    pub fn batch_size(mut self, batch_size: impl Into<Option<usize>>) -> Self {
        self.batch_size = batch_size.into();
        self.batch_size_set = true;
        self
    }

    /// Reshuffle the data every epoch (a [`RandomSampler`] drawing from the
    /// [`generator`](Self::generator), or seeded from the global generator
    /// each epoch).
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// The index order (exclusive with `shuffle`).
    pub fn sampler(mut self, sampler: impl Sampler + Send + Sync + 'static) -> Self {
        self.sampler = Some(Box::new(sampler));
        self
    }

    /// The batches of indices (exclusive with `batch_size`, `shuffle`,
    /// `sampler` and `drop_last`).
    pub fn batch_sampler(mut self, batch_sampler: impl Sampler<Vec<usize>> + Send + Sync + 'static) -> Self {
        self.batch_sampler = Some(Box::new(batch_sampler));
        self
    }

    /// Drop the last batch when it is short.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// The generator for the shuffle and for the workers' base seed
    /// (PyTorch's `generator=`); the global generator when not set.
    pub fn generator(mut self, generator: Generator) -> Self {
        self.generator = Some(generator);
        self
    }

    /// Worker threads loading batches in the background (default 0: load
    /// on the calling thread).
    pub fn num_workers(mut self, num_workers: usize) -> Self {
        self.num_workers = num_workers;
        self
    }

    /// Batches each worker loads ahead (default 2; only with workers).
    pub fn prefetch_factor(mut self, prefetch_factor: usize) -> Self {
        self.prefetch_factor = Some(prefetch_factor);
        self
    }

    /// Keep the workers between epochs (only with workers).
    pub fn persistent_workers(mut self, persistent_workers: bool) -> Self {
        self.persistent_workers = persistent_workers;
        self
    }

    /// The longest wait for one batch from the workers; past it the
    /// iterator returns an error (PyTorch's `timeout`). Default: no limit.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The collate function (PyTorch's `collate_fn`): a closure
    /// `Fn(Vec<Item>) -> Result<Batch>` or any [`CollateFn`].
    pub fn collate_fn<C2: CollateFn<T>>(self, collate: C2) -> DataLoaderBuilder<T, C2> {
        DataLoaderBuilder {
            source: self.source,
            collate,
            batch_size: self.batch_size,
            batch_size_set: self.batch_size_set,
            shuffle: self.shuffle,
            sampler: self.sampler,
            batch_sampler: self.batch_sampler,
            drop_last: self.drop_last,
            generator: self.generator,
            num_workers: self.num_workers,
            prefetch_factor: self.prefetch_factor,
            persistent_workers: self.persistent_workers,
            timeout: self.timeout,
        }
    }
}

impl<T, C> DataLoaderBuilder<T, C>
where
    T: Send + 'static,
    C: CollateFn<T> + Send + Sync + 'static,
    C::Output: Send + 'static,
{
    /// Checks the options and makes the loader. Errors, with PyTorch's
    /// messages: a batch size of 0; `sampler` with `shuffle`;
    /// `batch_sampler` with `batch_size`, `shuffle`, `sampler` or
    /// `drop_last`; no batching with `drop_last`; a stream with `shuffle`,
    /// `sampler` or `batch_sampler`; `prefetch_factor` or
    /// `persistent_workers` without workers, or a prefetch factor of 0;
    /// `shuffle` over an empty dataset.
    pub fn build(self) -> Result<DataLoader<T, C>> {
        let invalid = |d: &str| Err(DataError::invalid("DataLoader", d));
        if self.batch_size == Some(0) {
            return invalid("batch_size should be a positive integer value, but got batch_size=0");
        }
        if self.num_workers == 0 {
            if self.prefetch_factor.is_some() {
                return invalid(
                    "prefetch_factor option could only be specified in multiprocessing. let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.",
                );
            }
            if self.persistent_workers {
                return invalid("persistent_workers option needs num_workers > 0");
            }
        }
        if self.prefetch_factor == Some(0) {
            return invalid("prefetch_factor should be a positive integer value, but got prefetch_factor=0");
        }
        let batch_sampler_given = self.batch_sampler.is_some();
        let indexing = match &self.source {
            Source::Iterable(_) => {
                if self.shuffle {
                    return invalid(
                        "DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle=True",
                    );
                }
                if self.sampler.is_some() {
                    return invalid("DataLoader with IterableDataset: expected unspecified sampler option");
                }
                if self.batch_sampler.is_some() {
                    return invalid("DataLoader with IterableDataset: expected unspecified batch_sampler option");
                }
                if self.batch_size.is_none() && self.drop_last {
                    return invalid(
                        "batch_size=None option disables auto-batching and is mutually exclusive with drop_last",
                    );
                }
                Indexing::Stream(self.batch_size.map(|b| (b, self.drop_last)))
            }
            Source::Map(ds) => {
                if self.sampler.is_some() && self.shuffle {
                    return invalid("sampler option is mutually exclusive with shuffle");
                }
                if let Some(bs) = self.batch_sampler {
                    if (self.batch_size_set && self.batch_size != Some(1))
                        || self.shuffle
                        || self.sampler.is_some()
                        || self.drop_last
                    {
                        return invalid(
                            "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last",
                        );
                    }
                    Indexing::Batches(bs)
                } else {
                    let sampler: BoxSampler = match self.sampler {
                        Some(s) => s,
                        None if self.shuffle => Box::new(RandomSampler::with_options(
                            ds.len(),
                            false,
                            None,
                            self.generator.clone(),
                        )?),
                        None => Box::new(SequentialSampler::new(ds.len())),
                    };
                    match self.batch_size {
                        Some(b) => Indexing::Batches(Box::new(BatchSampler::new(sampler, b, self.drop_last)?)),
                        None if self.drop_last => {
                            return invalid(
                                "batch_size=None option disables auto-batching and is mutually exclusive with drop_last",
                            );
                        }
                        None => Indexing::Single(sampler),
                    }
                }
            }
        };
        Ok(DataLoader {
            source: self.source,
            collate: Arc::new(self.collate),
            indexing,
            batch_size: if batch_sampler_given { None } else { self.batch_size },
            drop_last: self.drop_last,
            generator: self.generator,
            num_workers: self.num_workers,
            prefetch_factor: self.prefetch_factor.unwrap_or(2),
            persistent_workers: self.persistent_workers,
            timeout: self.timeout,
            pool: Mutex::new(None),
        })
    }
}

/// Batches of a dataset (`torch.utils.data.DataLoader`).
///
/// A map-style [`Dataset`] is read in the order of a sampler (sequential,
/// shuffled, or one you give) and its items are collated into batches; an
/// [`IterableDataset`]'s stream is batched as it comes. Iteration yields a
/// `Result` per batch: an item that fails to load is an error naming its
/// index ([`DataError::Item`]), and the iterator goes on with the next
/// batch after it.
///
/// **Workers.** With `num_workers(k)`, `k` threads load and collate batches
/// in the background, at most `prefetch_factor` each ahead; batches arrive
/// in sampler order whichever worker finishes first. Dropping the iterator
/// mid-epoch stops and joins the workers (or, with `persistent_workers`,
/// keeps them for the next epoch); a worker that panics turns that batch
/// into [`DataError::WorkerPanicked`], never a hang.
///
/// **Randomness.** A seed gives PyTorch's order: with `shuffle(true)` each
/// epoch draws what PyTorch's does, from the loader's generator or the
/// global one (first the workers' base seed, then the sampler's seed), so
/// `manual_seed(s)` gives the batches of `torch.manual_seed(s)`, with or
/// without workers. A deterministic dataset gives the same bits with 0 or
/// 2 workers. Workers do not reseed the global generator (they are
/// threads, not processes); a random transform should draw from
/// [`WorkerInfo::generator`](crate::WorkerInfo::generator), seeded
/// `base_seed + worker_id` as PyTorch seeds its workers.
///
/// ```
/// use ferrotorch_core::{Tensor, manual_seed};
/// use ferrotorch_data::{DataLoader, TensorDataset};
/// manual_seed(0);
/// let x = Tensor::randn((10, 3))?;
/// let y = Tensor::arange(10)?;
/// let loader = DataLoader::builder(TensorDataset::new((x, y))?)
///     .batch_size(4)
///     .shuffle(true)
///     .num_workers(2)
///     .build()?;
/// assert_eq!(loader.len()?, 3);
/// for batch in loader.iter()? {
///     let (x, y) = batch?;                 // for x, y in loader:
///     assert_eq!(x.shape()[1], 3);
///     assert_eq!(x.shape()[0], y.shape()[0]);
/// }
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
pub struct DataLoader<T, C = DefaultCollate> {
    source: Source<T>,
    collate: Arc<C>,
    indexing: Indexing,
    batch_size: Option<usize>,
    drop_last: bool,
    generator: Option<Generator>,
    num_workers: usize,
    prefetch_factor: usize,
    persistent_workers: bool,
    timeout: Option<Duration>,
    /// The persistent workers between epochs (a `Pool<C::Output>`).
    pool: PoolSlot,
}

impl<T> DataLoader<T, DefaultCollate> {
    /// The options for a loader over a map-style dataset.
    pub fn builder<D>(dataset: D) -> DataLoaderBuilder<T, DefaultCollate>
    where
        D: Dataset<Item = T> + Send + Sync + 'static,
    {
        Self::builder_from(Source::Map(Arc::new(dataset)))
    }

    /// The options for a loader over a stream ([`IterableDataset`]).
    pub fn iterable<D>(dataset: D) -> DataLoaderBuilder<T, DefaultCollate>
    where
        D: IterableDataset<Item = T> + Send + Sync + 'static,
    {
        Self::builder_from(Source::Iterable(Arc::new(dataset)))
    }

    fn builder_from(source: Source<T>) -> DataLoaderBuilder<T, DefaultCollate> {
        DataLoaderBuilder {
            source,
            collate: DefaultCollate,
            batch_size: Some(1),
            batch_size_set: false,
            shuffle: false,
            sampler: None,
            batch_sampler: None,
            drop_last: false,
            generator: None,
            num_workers: 0,
            prefetch_factor: None,
            persistent_workers: false,
            timeout: None,
        }
    }
}

impl<T, C> DataLoader<T, C>
where
    T: Send + 'static,
    C: CollateFn<T> + Send + Sync + 'static,
    C::Output: Send + 'static,
{
    /// The number of batches of an epoch (`len(loader)`): the batch
    /// sampler's length, or for a stream its
    /// [`len_hint`](IterableDataset::len_hint) divided by the batch size (an error
    /// when the stream has none, as PyTorch's `TypeError`).
    pub fn len(&self) -> Result<usize> {
        match (&self.indexing, &self.source) {
            (Indexing::Batches(b), _) => Ok(b.len()),
            (Indexing::Single(s), _) => Ok(s.len()),
            (Indexing::Stream(batching), Source::Iterable(ds)) => {
                let n = ds.len_hint().ok_or_else(|| {
                    DataError::invalid("DataLoader", "len() of an IterableDataset without a len_hint")
                })?;
                Ok(match batching {
                    None => n,
                    Some((b, true)) => n / b,
                    Some((b, false)) => n.div_ceil(*b),
                })
            }
            (Indexing::Stream(_), Source::Map(_)) => unreachable!("streams come from iterable datasets"),
        }
    }

    /// Whether an epoch has no batches.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The batch size (`None` without batching or with a batch sampler).
    pub fn batch_size(&self) -> Option<usize> {
        self.batch_size
    }

    /// Whether a short last batch is dropped.
    pub fn drop_last(&self) -> bool {
        self.drop_last
    }

    /// The number of worker threads.
    pub fn num_workers(&self) -> usize {
        self.num_workers
    }

    /// One epoch (`iter(loader)`): draws the workers' base seed, starts the
    /// workers (or, with persistent workers, reuses them) and queues the
    /// first batches. Errors when a thread cannot be started.
    pub fn iter(&self) -> Result<DataLoaderIter<'_, T, C>> {
        self.iter_from(0)
    }

    /// The epoch [`iter`](Self::iter) starts, from its batch `start` on:
    /// the same random draws happen (base seed, shuffle), and the first
    /// `start` batches' indices are drawn from the sampler but their items
    /// are not loaded. With the generator's state from before the epoch
    /// began, this resumes an epoch mid-way exactly (torchdata's
    /// `StatefulDataLoader` fast-forward). An iterable dataset has no
    /// indices: its first `start` batches are loaded and dropped. A
    /// `start` past the epoch's end gives an empty epoch; a sampler error
    /// met while skipping is returned.
    ///
    /// ```
    /// use ferrotorch_core::{Generator, Tensor};
    /// use ferrotorch_data::{DataLoader, TensorDataset};
    ///
    /// let data = TensorDataset::new(vec![Tensor::arange(10)?])?;
    /// let g = Generator::new(0);
    /// let loader = DataLoader::builder(data).batch_size(3).shuffle(true).generator(g.clone()).build()?;
    /// let at_start = g.get_state();
    /// let all: Vec<_> = loader.iter()?.map(|b| b.unwrap()[0].to_vec::<i64>().unwrap()).collect();
    /// g.set_state(at_start);
    /// let rest: Vec<_> = loader.iter_from(2)?.map(|b| b.unwrap()[0].to_vec::<i64>().unwrap()).collect();
    /// assert_eq!(rest, all[2..]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter_from(&self, start: usize) -> Result<DataLoaderIter<'_, T, C>> {
        let mut it = self.start_epoch(start)?;
        if matches!(self.indexing, Indexing::Stream(_)) {
            for _ in 0..start {
                match it.next() {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e),
                    None => break,
                }
            }
        }
        Ok(it)
    }

    /// [`iter_from`](Self::iter_from) but for the stream skip.
    fn start_epoch(&self, start: usize) -> Result<DataLoaderIter<'_, T, C>> {
        let mut indices = match &self.indexing {
            Indexing::Batches(b) => Some(Indices::Batches(b.iter())),
            Indexing::Single(s) => Some(Indices::Single(s.iter())),
            Indexing::Stream(_) => None,
        };
        let stream_batching = match self.indexing {
            Indexing::Stream(b) => b,
            _ => None,
        };
        if self.num_workers == 0 {
            let _base_seed = draw_seed(self.generator.as_ref())?;
            skip(&mut indices, start)?;
            let inner = match (&self.source, indices) {
                (Source::Map(ds), Some(indices)) => Inner::Map { ds: &**ds, indices },
                (Source::Iterable(ds), None) => Inner::Stream {
                    it: Some(ds.iter()),
                    batching: stream_batching,
                },
                _ => unreachable!("map datasets have indices, streams none"),
            };
            return Ok(DataLoaderIter {
                loader: self,
                inner,
                collate: &*self.collate,
            });
        }
        let kept = if self.persistent_workers {
            let kept = self.pool.lock().unwrap_or_else(|e| e.into_inner()).take();
            kept.and_then(|p| p.downcast::<Pool<C::Output>>().ok()).map(|p| *p)
        } else {
            None
        };
        let mut pool = match kept {
            Some(pool) => pool,
            None => {
                let base_seed = draw_seed(self.generator.as_ref())?;
                Pool::start(
                    &self.source,
                    &self.collate,
                    self.num_workers,
                    base_seed,
                    stream_batching,
                )?
            }
        };
        // Skipped batches count as sent, so batch `k` still goes to worker
        // `k % n` (whose seed it is loaded with).
        let skipped = skip(&mut indices, start)?;
        pool.generation += 1;
        let n = pool.len();
        let mut w = Workers {
            pool: Some(pool),
            indices,
            sent: skipped,
            received: skipped,
            owner: HashMap::new(),
            ready: HashMap::new(),
            active: vec![true; n],
            next_worker: skipped % n,
            exhausted: false,
            failed: false,
            limit: self.prefetch_factor * n,
            keep: self
                .persistent_workers
                .then_some((&self.pool, |p: Pool<C::Output>| -> Box<dyn Any + Send> { Box::new(p) }
                    as fn(_) -> _)),
        };
        w.fill();
        Ok(DataLoaderIter {
            loader: self,
            inner: Inner::Workers(Box::new(w)),
            collate: &*self.collate,
        })
    }
}

impl<'a, T, C> IntoIterator for &'a DataLoader<T, C>
where
    T: Send + 'static,
    C: CollateFn<T> + Send + Sync + 'static,
    C::Output: Send + 'static,
{
    type Item = Result<C::Output>;
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<DataLoaderIterOrError<'a, T, C>>>;

    /// `for batch in &loader`: [`DataLoader::iter`], whose error (if any)
    /// comes as the only item.
    fn into_iter(self) -> Self::IntoIter {
        let it = match self.iter() {
            Ok(it) => DataLoaderIterOrError::Iter(it),
            Err(e) => DataLoaderIterOrError::Error(Some(e)),
        };
        vec![it].into_iter().flatten()
    }
}

/// The iterator of `for batch in &loader`: the epoch's batches, or the
/// error that kept it from starting.
pub enum DataLoaderIterOrError<'a, T, C: CollateFn<T>> {
    /// The epoch.
    Iter(DataLoaderIter<'a, T, C>),
    /// The start-up error, yielded once.
    Error(Option<DataError>),
}

impl<T, C> Iterator for DataLoaderIterOrError<'_, T, C>
where
    T: Send + 'static,
    C: CollateFn<T> + Send + Sync + 'static,
    C::Output: Send + 'static,
{
    type Item = Result<C::Output>;
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            DataLoaderIterOrError::Iter(it) => it.next(),
            DataLoaderIterOrError::Error(e) => e.take().map(Err),
        }
    }
}

/// Draws and drops the first `n` tasks' indices (nothing for a stream);
/// returns how many there were.
fn skip(indices: &mut Option<Indices<'_>>, n: usize) -> Result<usize> {
    let mut skipped = 0;
    if let Some(ix) = indices {
        while skipped < n {
            match ix.next() {
                Some(r) => drop(r?),
                None => break,
            }
            skipped += 1;
        }
    }
    Ok(skipped)
}

enum Indices<'a> {
    Batches(IndexIter<'a, Vec<usize>>),
    Single(IndexIter<'a>),
}

impl Indices<'_> {
    /// The next task's indices and whether they form a batch.
    fn next(&mut self) -> Option<Result<(Vec<usize>, bool)>> {
        match self {
            Indices::Batches(it) => it.next().map(|r| r.map(|b| (b, true))),
            Indices::Single(it) => it.next().map(|r| r.map(|i| (vec![i], false))),
        }
    }
}

enum Inner<'a, T, O> {
    Map {
        ds: &'a (dyn Dataset<Item = T> + Send + Sync),
        indices: Indices<'a>,
    },
    Stream {
        it: Option<ItemIter<'a, T>>,
        batching: StreamBatching,
    },
    Workers(Box<Workers<'a, O>>),
}

/// The main thread's side of a worker epoch.
struct Workers<'a, O> {
    pool: Option<Pool<O>>,
    /// The sampler's indices (`None` for streams).
    indices: Option<Indices<'a>>,
    /// Tasks sent (or settled locally) so far, and tasks yielded.
    sent: usize,
    received: usize,
    /// The worker of each outstanding task.
    owner: HashMap<usize, usize>,
    /// Replies that came before their turn.
    ready: HashMap<usize, Reply<O>>,
    /// Workers whose stream has not ended.
    active: Vec<bool>,
    next_worker: usize,
    /// No more tasks to send.
    exhausted: bool,
    /// A worker died: the epoch is over.
    failed: bool,
    /// Most tasks in flight.
    limit: usize,
    /// Where persistent workers go when the epoch ends, and how to box them.
    keep: Option<(&'a PoolSlot, StashPool<O>)>,
}

/// Boxes a pool for the loader's slot (made where `O: Send` is known).
type StashPool<O> = fn(Pool<O>) -> Box<dyn Any + Send>;

/// The loader's slot for its persistent workers (a boxed `Pool<Output>`).
type PoolSlot = Mutex<Option<Box<dyn Any + Send>>>;

impl<O> Workers<'_, O> {
    fn pool(&self) -> &Pool<O> {
        self.pool.as_ref().expect("the pool lives as long as the iterator")
    }

    /// Queues tasks up to the prefetch limit (PyTorch's `_try_put_index`).
    fn fill(&mut self) {
        while !self.exhausted && self.sent - self.received < self.limit {
            let n = self.active.len();
            let Some(worker) = (0..n).map(|k| (self.next_worker + k) % n).find(|&w| self.active[w]) else {
                self.exhausted = true;
                return;
            };
            let generation = self.pool().generation;
            let task = self.sent;
            let t = match &mut self.indices {
                None => Task::Stream { generation, task },
                Some(ix) => match ix.next() {
                    None => {
                        self.exhausted = true;
                        return;
                    }
                    Some(Err(e)) => {
                        // A sampler error takes its place in the order.
                        self.ready.insert(task, Reply::Batch(Err(e)));
                        self.sent += 1;
                        self.exhausted = true;
                        return;
                    }
                    Some(Ok((indices, batched))) => Task::Indices {
                        generation,
                        task,
                        indices,
                        batched,
                    },
                },
            };
            self.next_worker = (worker + 1) % n;
            if self.pool().send(worker, t) {
                self.owner.insert(task, worker);
            } else {
                self.ready.insert(
                    task,
                    Reply::Batch(Err(DataError::Worker {
                        worker,
                        detail: "the thread has stopped".into(),
                    })),
                );
            }
            self.sent += 1;
        }
    }

    fn next(&mut self, timeout: Option<Duration>) -> Option<Result<O>> {
        loop {
            if self.failed {
                return None;
            }
            self.fill();
            if self.received == self.sent {
                return None;
            }
            let task = self.received;
            let reply = match self.ready.remove(&task) {
                Some(r) => r,
                None => match self.wait_for(task, timeout) {
                    Ok(r) => r,
                    Err(e) => {
                        self.failed = true;
                        return Some(Err(e));
                    }
                },
            };
            self.received += 1;
            let worker = self.owner.remove(&task);
            match reply {
                Reply::Batch(r) => return Some(r),
                Reply::Exhausted => {
                    if let Some(w) = worker {
                        self.active[w] = false;
                    }
                }
            }
        }
    }

    /// Receives replies until `task`'s, keeping the others for later.
    fn wait_for(&mut self, task: usize, timeout: Option<Duration>) -> Result<Reply<O>> {
        let start = Instant::now();
        let worker = self.owner.get(&task).copied().unwrap_or(0);
        loop {
            let poll = Duration::from_millis(50);
            let generation = self.pool().generation;
            match self.pool().results.recv_timeout(poll) {
                Ok(Done {
                    generation: g,
                    task: t,
                    reply,
                }) => {
                    if g != generation {
                        continue; // a reply of an abandoned epoch
                    }
                    if t == task {
                        return Ok(reply);
                    }
                    self.ready.insert(t, reply);
                }
                Err(RecvTimeoutError::Timeout) => {
                    if self.pool().is_finished(worker) {
                        return Err(DataError::Worker {
                            worker,
                            detail: "the thread stopped without delivering its batch".into(),
                        });
                    }
                    if let Some(limit) = timeout
                        && start.elapsed() > limit
                    {
                        return Err(DataError::Worker {
                            worker,
                            detail: format!("DataLoader timed out after {:?}", limit),
                        });
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(DataError::Worker {
                        worker,
                        detail: "every worker thread has stopped".into(),
                    });
                }
            }
        }
    }
}

/// One epoch of a [`DataLoader`]: yields `Result<Batch>` in sampler order.
/// Dropping it mid-epoch stops the workers (or returns persistent ones to
/// the loader): each finishes the item it is loading and exits, and the
/// drop joins them, so a dataset `get` that never returns would block it
/// (threads cannot be killed as PyTorch kills worker processes).
pub struct DataLoaderIter<'a, T, C: CollateFn<T>> {
    loader: &'a DataLoader<T, C>,
    inner: Inner<'a, T, C::Output>,
    collate: &'a C,
}

impl<T, C> Iterator for DataLoaderIter<'_, T, C>
where
    T: Send + 'static,
    C: CollateFn<T> + Send + Sync + 'static,
    C::Output: Send + 'static,
{
    type Item = Result<C::Output>;

    fn next(&mut self) -> Option<Result<C::Output>> {
        match &mut self.inner {
            Inner::Map { ds, indices } => match indices.next()? {
                Err(e) => Some(Err(e)),
                Ok((idx, true)) => Some(fetch_batch(*ds, self.collate, &idx, None)),
                Ok((idx, false)) => Some(fetch_one(*ds, self.collate, idx[0])),
            },
            Inner::Stream { it, batching } => {
                let r = next_from_stream(it.as_mut()?, self.collate, *batching, None);
                if r.is_none() {
                    *it = None;
                }
                r
            }
            Inner::Workers(w) => w.next(self.loader.timeout),
        }
    }
}

impl<O> Drop for Workers<'_, O> {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            match self.keep {
                // Persistent workers go back to the loader for the next epoch.
                Some((home, stash)) => *home.lock().unwrap_or_else(|e| e.into_inner()) = Some(stash(pool)),
                None => drop(pool),
            }
        }
    }
}
