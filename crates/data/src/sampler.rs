//! Samplers (`torch.utils.data.sampler` and `DistributedSampler`): the
//! orders in which a [`DataLoader`](crate::DataLoader) visits a dataset.
//!
//! Every random sampler draws exactly what PyTorch's draws, from the same
//! generator and in the same order, so a seed gives PyTorch's indices
//! (`crates/data/tests/reference.rs` checks them against PyTorch 2.15).
//! Iteration is lazy as PyTorch's generator functions are: a sampler
//! without a generator takes its seed from the global generator when the
//! first index is asked for, not when `iter` is called.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ferrotorch_core::{DType, Generator, Tensor, TensorOptions};

use crate::dataset::randperm;
use crate::error::{DataError, Result};

/// The boxed iterator a [`Sampler`] returns: indices (or index batches),
/// each a `Result` since drawing them may fail.
pub type IndexIter<'a, T = usize> = Box<dyn Iterator<Item = Result<T>> + Send + 'a>;

/// An order of dataset indices (`torch.utils.data.Sampler`); `T` is
/// `usize` for index samplers and `Vec<usize>` for batch samplers.
///
/// `iter` takes `&self`: a sampler's state between epochs (the epoch of a
/// [`DistributedSampler`], the state of a shared [`Generator`]) lives in
/// shared handles, so the loader and the user can both hold it.
///
/// ```
/// use ferrotorch_data::{IndexIter, Sampler};
/// struct Reversed(usize);
/// impl Sampler for Reversed {
///     fn len(&self) -> usize { self.0 }
///     fn iter(&self) -> IndexIter<'_> { Box::new((0..self.0).rev().map(Ok)) }
/// }
/// let order: Vec<usize> = Reversed(3).iter().collect::<Result<_, _>>()?;
/// assert_eq!(order, [2, 1, 0]);
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
pub trait Sampler<T = usize> {
    /// The number of indices (or batches) one iteration yields.
    fn len(&self) -> usize;

    /// Whether one iteration yields nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One pass over the indices (one epoch).
    fn iter(&self) -> IndexIter<'_, T>;
}

impl<T, S: Sampler<T> + ?Sized> Sampler<T> for Arc<S> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn iter(&self) -> IndexIter<'_, T> {
        (**self).iter()
    }
}

impl<T, S: Sampler<T> + ?Sized> Sampler<T> for Box<S> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn iter(&self) -> IndexIter<'_, T> {
        (**self).iter()
    }
}

impl<T, S: Sampler<T> + ?Sized> Sampler<T> for &S {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn iter(&self) -> IndexIter<'_, T> {
        (**self).iter()
    }
}

/// A boxed index sampler, as the loader keeps one.
pub type BoxSampler = Box<dyn Sampler + Send + Sync>;

/// An iterator that asks `next_chunk` for runs of values as it needs them
/// (a chunk at a time, as PyTorch's `yield from` loops draw), fused: after
/// `None` or an error it yields nothing more.
struct Chunks<F> {
    next_chunk: F,
    buf: std::vec::IntoIter<usize>,
    done: bool,
}

impl<F: FnMut() -> Result<Option<Vec<usize>>>> Chunks<F> {
    fn new(next_chunk: F) -> Self {
        Chunks {
            next_chunk,
            buf: Vec::new().into_iter(),
            done: false,
        }
    }
}

impl<F: FnMut() -> Result<Option<Vec<usize>>>> Iterator for Chunks<F> {
    type Item = Result<usize>;
    fn next(&mut self) -> Option<Result<usize>> {
        loop {
            if let Some(i) = self.buf.next() {
                return Some(Ok(i));
            }
            if self.done {
                return None;
            }
            match (self.next_chunk)() {
                Ok(Some(v)) => self.buf = v.into_iter(),
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// `int(torch.empty((), dtype=torch.int64).random_(generator=g).item())`:
/// a seed in `[0, 2^63)` from `generator` or the global one.
pub(crate) fn draw_seed(generator: Option<&Generator>) -> Result<u64> {
    let t = Tensor::zeros_dtype((), DType::I64)?;
    let t = match generator {
        Some(g) => t.random_with_(g)?,
        None => t.random_()?,
    };
    Ok(t.item::<i64>()? as u64)
}

fn randint(high: usize, count: usize, generator: &Generator) -> Result<Vec<usize>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let t = TensorOptions::new()
        .dtype(DType::I64)
        .generator(generator)
        .randint(0, high as i64, [count])?;
    Ok(t.to_vec::<i64>()?.into_iter().map(|i| i as usize).collect())
}

/// `0, 1, ..., n - 1` (`SequentialSampler`; PyTorch takes the dataset,
/// this takes its length).
#[derive(Clone, Debug)]
pub struct SequentialSampler {
    n: usize,
}

impl SequentialSampler {
    /// The sampler over `n` items.
    pub fn new(n: usize) -> Self {
        SequentialSampler { n }
    }
}

impl Sampler for SequentialSampler {
    fn len(&self) -> usize {
        self.n
    }
    fn iter(&self) -> IndexIter<'_> {
        Box::new((0..self.n).map(Ok))
    }
}

/// Random indices into `n` items (`RandomSampler`): a shuffle without
/// replacement, or `num_samples` independent draws with it.
///
/// As PyTorch's: without a generator, each epoch draws a seed from the
/// global generator (`torch.empty((), dtype=torch.int64).random_()`) and
/// seeds a fresh generator with it; with one, it draws from that
/// generator. Without replacement it yields `num_samples / n` full
/// `randperm(n)`s and then the first `num_samples % n` of one more
/// (drawn even when that is none); with replacement `randint(0, n)` in
/// chunks of 32.
///
/// ```
/// use ferrotorch_core::manual_seed;
/// use ferrotorch_data::{RandomSampler, Sampler};
/// manual_seed(0);
/// let s = RandomSampler::new(10)?;
/// let order: Vec<usize> = s.iter().collect::<Result<_, _>>()?;
/// assert_eq!(order, [6, 9, 0, 7, 3, 5, 4, 2, 1, 8]); // PyTorch's after torch.manual_seed(0)
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
#[derive(Clone, Debug)]
pub struct RandomSampler {
    n: usize,
    replacement: bool,
    num_samples: usize,
    generator: Option<Generator>,
}

impl RandomSampler {
    /// A shuffle of `n` items drawn from the global generator; an error
    /// when `n` is 0 (PyTorch: "num_samples should be a positive integer
    /// value").
    pub fn new(n: usize) -> Result<Self> {
        Self::with_options(n, false, None, None)
    }

    /// `RandomSampler(data_source, replacement, num_samples, generator)`:
    /// `num_samples` defaults to `n`; an error when it is 0.
    pub fn with_options(
        n: usize,
        replacement: bool,
        num_samples: Option<usize>,
        generator: Option<Generator>,
    ) -> Result<Self> {
        let num_samples = num_samples.unwrap_or(n);
        if num_samples == 0 {
            return Err(DataError::invalid(
                "RandomSampler",
                "num_samples should be a positive integer value, but got num_samples=0",
            ));
        }
        Ok(RandomSampler {
            n,
            replacement,
            num_samples,
            generator,
        })
    }

    /// The number of indices per epoch.
    pub fn num_samples(&self) -> usize {
        self.num_samples
    }
}

impl Sampler for RandomSampler {
    fn len(&self) -> usize {
        self.num_samples
    }

    fn iter(&self) -> IndexIter<'_> {
        let (n, num_samples, replacement) = (self.n, self.num_samples, self.replacement);
        let mut generator = self.generator.clone();
        let mut step = 0usize;
        Box::new(Chunks::new(move || {
            if n == 0 {
                return Err(DataError::invalid(
                    "RandomSampler",
                    "cannot sample indices of an empty dataset",
                ));
            }
            let g = match &generator {
                Some(g) => g.clone(),
                None => {
                    let g = Generator::new(draw_seed(None)?);
                    generator = Some(g.clone());
                    g
                }
            };
            let (full, tail, chunk) = if replacement {
                (num_samples / 32, num_samples % 32, 32)
            } else {
                (num_samples / n, num_samples % n, n)
            };
            step += 1;
            if step > full + 1 {
                return Ok(None);
            }
            let take = if step <= full { chunk } else { tail };
            Ok(Some(if replacement {
                randint(n, take, &g)?
            } else {
                let mut p = randperm(n, Some(&g))?;
                p.truncate(take);
                p
            }))
        }))
    }
}

/// The given indices in a random order, a fresh `randperm` each epoch
/// (`SubsetRandomSampler`; from the global generator when `None`).
#[derive(Clone, Debug)]
pub struct SubsetRandomSampler {
    indices: Arc<[usize]>,
    generator: Option<Generator>,
}

impl SubsetRandomSampler {
    /// The sampler over `indices`.
    pub fn new(indices: impl Into<Arc<[usize]>>, generator: Option<Generator>) -> Self {
        SubsetRandomSampler {
            indices: indices.into(),
            generator,
        }
    }
}

impl Sampler for SubsetRandomSampler {
    fn len(&self) -> usize {
        self.indices.len()
    }

    fn iter(&self) -> IndexIter<'_> {
        let mut drawn = false;
        Box::new(Chunks::new(move || {
            if drawn {
                return Ok(None);
            }
            drawn = true;
            let p = randperm(self.indices.len(), self.generator.as_ref())?;
            Ok(Some(p.into_iter().map(|i| self.indices[i]).collect()))
        }))
    }
}

/// Indices `0..weights.len()` drawn with probabilities proportional to
/// `weights` (`WeightedRandomSampler`): one
/// `torch.multinomial(weights, num_samples, replacement, generator)` per
/// epoch, the weights as float64.
#[derive(Clone, Debug)]
pub struct WeightedRandomSampler {
    weights: Tensor,
    num_samples: usize,
    replacement: bool,
    generator: Option<Generator>,
}

impl WeightedRandomSampler {
    /// The sampler; an error when `num_samples` is 0. Bad weights
    /// (negative, not finite, all zero) and `num_samples` above the number
    /// of weights without replacement are errors of the first epoch, as in
    /// PyTorch.
    pub fn new(weights: &[f64], num_samples: usize, replacement: bool, generator: Option<Generator>) -> Result<Self> {
        if num_samples == 0 {
            return Err(DataError::invalid(
                "WeightedRandomSampler",
                "num_samples should be a positive integer value, but got num_samples=0",
            ));
        }
        Ok(WeightedRandomSampler {
            weights: Tensor::from_slice(weights),
            num_samples,
            replacement,
            generator,
        })
    }
}

impl Sampler for WeightedRandomSampler {
    fn len(&self) -> usize {
        self.num_samples
    }

    fn iter(&self) -> IndexIter<'_> {
        let mut drawn = false;
        Box::new(Chunks::new(move || {
            if drawn {
                return Ok(None);
            }
            drawn = true;
            let t = match &self.generator {
                Some(g) => self
                    .weights
                    .multinomial_with(self.num_samples as i64, self.replacement, g)?,
                None => self.weights.multinomial(self.num_samples as i64, self.replacement)?,
            };
            Ok(Some(t.to_vec::<i64>()?.into_iter().map(|i| i as usize).collect()))
        }))
    }
}

/// Groups another sampler's indices into batches of `batch_size`
/// (`BatchSampler`); the last batch is shorter, or dropped with
/// `drop_last`.
///
/// ```
/// use ferrotorch_data::{BatchSampler, Sampler, SequentialSampler};
/// let b = BatchSampler::new(SequentialSampler::new(10), 3, false)?;
/// let batches: Vec<Vec<usize>> = b.iter().collect::<Result<_, _>>()?;
/// assert_eq!(batches, [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9]]);
/// assert_eq!(BatchSampler::new(SequentialSampler::new(10), 3, true)?.len(), 3);
/// assert!(BatchSampler::new(SequentialSampler::new(10), 0, false).is_err());
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
#[derive(Clone, Debug)]
pub struct BatchSampler<S = BoxSampler> {
    sampler: S,
    batch_size: usize,
    drop_last: bool,
}

impl<S: Sampler> BatchSampler<S> {
    /// Batches of `sampler`'s indices; an error when `batch_size` is 0.
    pub fn new(sampler: S, batch_size: usize, drop_last: bool) -> Result<Self> {
        if batch_size == 0 {
            return Err(DataError::invalid(
                "BatchSampler",
                "batch_size should be a positive integer value, but got batch_size=0",
            ));
        }
        Ok(BatchSampler {
            sampler,
            batch_size,
            drop_last,
        })
    }

    /// The inner index sampler.
    pub fn sampler(&self) -> &S {
        &self.sampler
    }

    /// The batch size.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }
}

impl<S: Sampler> Sampler<Vec<usize>> for BatchSampler<S> {
    fn len(&self) -> usize {
        let n = self.sampler.len();
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }

    fn iter(&self) -> IndexIter<'_, Vec<usize>> {
        let mut inner = self.sampler.iter();
        let (batch_size, drop_last) = (self.batch_size, self.drop_last);
        let mut done = false;
        Box::new(std::iter::from_fn(move || {
            if done {
                return None;
            }
            let mut batch = Vec::with_capacity(batch_size);
            while batch.len() < batch_size {
                match inner.next() {
                    Some(Ok(i)) => batch.push(i),
                    Some(Err(e)) => {
                        done = true;
                        return Some(Err(e));
                    }
                    None => {
                        done = true;
                        break;
                    }
                }
            }
            if batch.is_empty() || (drop_last && batch.len() < batch_size) {
                None
            } else {
                Some(Ok(batch))
            }
        }))
    }
}

/// The share of one process (`rank` of `num_replicas`) of a dataset of
/// `n` items (`torch.utils.data.distributed.DistributedSampler`).
///
/// With `shuffle` (the default) the order is `randperm(n)` from a fresh
/// generator seeded with `seed + epoch`; without `drop_last` it is padded
/// to a multiple of `num_replicas` by repeating indices from its start,
/// with it cut to one; then this rank takes every `num_replicas`-th index
/// from position `rank`. Clones share the epoch, so a clone given to a
/// [`DataLoader`](crate::DataLoader) follows [`set_epoch`](Self::set_epoch)
/// calls on the original:
///
/// ```
/// use ferrotorch_data::{DistributedSampler, Sampler};
/// let s = DistributedSampler::new(10, 3, 1)?.shuffle(false);
/// let mine: Vec<usize> = s.iter().collect::<Result<_, _>>()?;
/// assert_eq!(mine, [1, 4, 7, 0]); // padded with index 0
/// let shuffled = DistributedSampler::new(10, 3, 1)?;
/// let loader_copy = shuffled.clone();
/// shuffled.set_epoch(1);
/// assert_eq!(loader_copy.epoch(), 1);
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
#[derive(Clone, Debug)]
pub struct DistributedSampler {
    n: usize,
    num_replicas: usize,
    rank: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
    epoch: Arc<AtomicU64>,
}

impl DistributedSampler {
    /// The sampler for `rank` of `num_replicas` (shuffled, seed 0, no
    /// `drop_last`, epoch 0). Errors when `rank >= num_replicas` (PyTorch:
    /// "Invalid rank").
    pub fn new(n: usize, num_replicas: usize, rank: usize) -> Result<Self> {
        if rank >= num_replicas {
            return Err(DataError::invalid(
                "DistributedSampler",
                format!(
                    "Invalid rank {rank}, rank should be in the interval [0, {}]",
                    num_replicas as i64 - 1
                ),
            ));
        }
        Ok(DistributedSampler {
            n,
            num_replicas,
            rank,
            shuffle: true,
            seed: 0,
            drop_last: false,
            epoch: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Whether to shuffle (default `true`).
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// The seed every replica shares (default 0).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Drop the tail that does not divide evenly instead of padding.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Sets the epoch, which reseeds the shuffle (`set_epoch`); seen by
    /// every clone.
    pub fn set_epoch(&self, epoch: u64) {
        self.epoch.store(epoch, Ordering::Relaxed);
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// The total over all replicas (`total_size`).
    pub fn total_size(&self) -> usize {
        self.len() * self.num_replicas
    }

    /// This rank's indices for the current epoch.
    pub fn indices(&self) -> Result<Vec<usize>> {
        let mut indices = if self.shuffle {
            let g = Generator::new(self.seed.wrapping_add(self.epoch()));
            randperm(self.n, Some(&g))?
        } else {
            (0..self.n).collect()
        };
        let total = self.total_size();
        if self.drop_last {
            indices.truncate(total);
        } else {
            let len = indices.len();
            for i in 0..total - len {
                indices.push(indices[i % len]);
            }
        }
        Ok(indices.into_iter().skip(self.rank).step_by(self.num_replicas).collect())
    }
}

impl Sampler for DistributedSampler {
    /// `num_samples`: `n / num_replicas` rounded up, or down with
    /// `drop_last`.
    fn len(&self) -> usize {
        if self.drop_last {
            self.n / self.num_replicas
        } else {
            self.n.div_ceil(self.num_replicas)
        }
    }

    fn iter(&self) -> IndexIter<'_> {
        match self.indices() {
            Ok(v) => Box::new(v.into_iter().map(Ok)),
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }
}
