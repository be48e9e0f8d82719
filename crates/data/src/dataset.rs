//! Datasets (`torch.utils.data.Dataset` and friends): the map-style
//! [`Dataset`] trait, the stream-style [`IterableDataset`] trait,
//! [`TensorDataset`], [`Subset`], [`ConcatDataset`] and [`random_split`].

use std::sync::Arc;

use ferrotorch_core::{DType, Generator, Tensor, TensorOptions, random::default_generator};

use crate::error::{DataError, Result};

/// A map-style dataset (`torch.utils.data.Dataset`): `len` items, each
/// loaded by its index.
///
/// `get` returns a `Result`: a file that cannot be read or a transform that
/// fails is an error the [`DataLoader`](crate::DataLoader) hands on with
/// the index. A dataset used with worker threads must be `Send + Sync +
/// 'static` (the loader shares it through an `Arc`); `get` takes `&self`,
/// so several workers may call it at once.
///
/// ```
/// use ferrotorch_data::{Dataset, Result};
/// struct Squares(usize);
/// impl Dataset for Squares {
///     type Item = (i64, i64);
///     fn len(&self) -> usize { self.0 }
///     fn get(&self, index: usize) -> Result<(i64, i64)> {
///         let i = index as i64;
///         Ok((i, i * i))
///     }
/// }
/// assert_eq!(Squares(5).get(3)?, (3, 9));
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
pub trait Dataset {
    /// What one index loads (a tuple of tensors, a tensor and a label, ...).
    type Item;

    /// The number of items (`len(dataset)`).
    fn len(&self) -> usize;

    /// Whether the dataset has no items.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The item at `index` (`dataset[index]`); an error when `index` is
    /// out of range or the item cannot be loaded.
    fn get(&self, index: usize) -> Result<Self::Item>;
}

impl<D: Dataset + ?Sized> Dataset for Arc<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize) -> Result<D::Item> {
        (**self).get(index)
    }
}

impl<D: Dataset + ?Sized> Dataset for Box<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize) -> Result<D::Item> {
        (**self).get(index)
    }
}

impl<D: Dataset + ?Sized> Dataset for &D {
    type Item = D::Item;
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize) -> Result<D::Item> {
        (**self).get(index)
    }
}

/// The boxed iterator an [`IterableDataset`] returns.
pub type ItemIter<'a, T> = Box<dyn Iterator<Item = Result<T>> + Send + 'a>;

/// A stream-style dataset (`torch.utils.data.IterableDataset`): it makes an
/// iterator of items, and the [`DataLoader`](crate::DataLoader) batches
/// that stream.
///
/// With `num_workers > 0` every worker thread calls [`iter`](Self::iter)
/// and batches its own stream, as each PyTorch worker process iterates its
/// own copy of the dataset; without sharding, every item then comes once
/// per worker. To shard, read [`get_worker_info`](crate::get_worker_info)
/// inside `iter` (it runs on the worker's thread) and keep the items of
/// this worker only:
///
/// ```
/// use ferrotorch_data::{IterableDataset, ItemIter, get_worker_info};
/// struct Range(usize);
/// impl IterableDataset for Range {
///     type Item = i64;
///     fn iter(&self) -> ItemIter<'_, i64> {
///         let (id, n) = get_worker_info().map_or((0, 1), |w| (w.id, w.num_workers));
///         Box::new((0..self.0).skip(id).step_by(n).map(|i| Ok(i as i64)))
///     }
/// }
/// let all: Vec<i64> = Range(4).iter().collect::<Result<_, _>>()?;
/// assert_eq!(all, [0, 1, 2, 3]);
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
pub trait IterableDataset {
    /// What the stream yields.
    type Item;

    /// A fresh stream of items (`iter(dataset)`); the loader calls it once
    /// per epoch (per worker with workers).
    fn iter(&self) -> ItemIter<'_, Self::Item>;

    /// The number of items, when known (PyTorch's optional `__len__`):
    /// what [`DataLoader::len`](crate::DataLoader::len) reports for a
    /// stream.
    fn len_hint(&self) -> Option<usize> {
        None
    }
}

impl<D: IterableDataset + ?Sized> IterableDataset for Arc<D> {
    type Item = D::Item;
    fn iter(&self) -> ItemIter<'_, D::Item> {
        (**self).iter()
    }
    fn len_hint(&self) -> Option<usize> {
        (**self).len_hint()
    }
}

impl<D: IterableDataset + ?Sized> IterableDataset for Box<D> {
    type Item = D::Item;
    fn iter(&self) -> ItemIter<'_, D::Item> {
        (**self).iter()
    }
    fn len_hint(&self) -> Option<usize> {
        (**self).len_hint()
    }
}

/// The tensors of a [`TensorDataset`]: a `Vec<Tensor>` or a tuple of one
/// to four tensors. The dataset's item has the same form, with each tensor
/// indexed along dim 0.
pub trait TensorTuple: Sized {
    /// The tensors, in order.
    fn tensors(&self) -> Vec<&Tensor>;
    /// Row `index` of every tensor (`tensor[index]`, a view).
    fn select(&self, index: usize) -> Result<Self>;
}

impl TensorTuple for Vec<Tensor> {
    fn tensors(&self) -> Vec<&Tensor> {
        self.iter().collect()
    }
    fn select(&self, index: usize) -> Result<Self> {
        self.iter().map(|t| row(t, index)).collect()
    }
}

impl TensorTuple for Tensor {
    fn tensors(&self) -> Vec<&Tensor> {
        vec![self]
    }
    fn select(&self, index: usize) -> Result<Self> {
        row(self, index)
    }
}

macro_rules! tensor_tuple {
    ($($name:ident),+) => {
        impl TensorTuple for ($(tensor_tuple!(@ty $name),)+) {
            fn tensors(&self) -> Vec<&Tensor> {
                let ($($name,)+) = self;
                vec![$($name),+]
            }
            fn select(&self, index: usize) -> Result<Self> {
                let ($($name,)+) = self;
                Ok(($(row($name, index)?,)+))
            }
        }
    };
    (@ty $name:ident) => { Tensor };
}

tensor_tuple!(a);
tensor_tuple!(a, b);
tensor_tuple!(a, b, c);
tensor_tuple!(a, b, c, d);

fn row(t: &Tensor, index: usize) -> Result<Tensor> {
    let i = i64::try_from(index).map_err(|_| DataError::IndexOutOfRange {
        what: "TensorDataset",
        index,
        len: t.shape().first().copied().unwrap_or(0),
    })?;
    Ok(t.select(0, i)?)
}

/// Tensors sharing their first dimension, item `i` being row `i` of each
/// (`torch.utils.data.TensorDataset`).
///
/// ```
/// use ferrotorch_core::Tensor;
/// use ferrotorch_data::{Dataset, TensorDataset};
/// let x = Tensor::arange(6)?.reshape((3, 2))?;
/// let y = Tensor::new([10i64, 11, 12])?;
/// let ds = TensorDataset::new((x, y))?;
/// let (xi, yi) = ds.get(1)?;
/// assert_eq!((xi.to_vec::<i64>()?, yi.item::<i64>()?), (vec![2, 3], 11));
/// assert!(TensorDataset::new((Tensor::zeros(3)?, Tensor::zeros(4)?)).is_err());
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
#[derive(Clone, Debug)]
pub struct TensorDataset<T = Vec<Tensor>> {
    tensors: T,
    len: usize,
}

impl<T: TensorTuple> TensorDataset<T> {
    /// The dataset of `tensors`. Errors when there are none, when one is
    /// 0-d, or when their first dimensions differ (naming the tensors by
    /// position, as PyTorch's "Size mismatch between tensors").
    pub fn new(tensors: T) -> Result<Self> {
        let ts = tensors.tensors();
        let Some(first) = ts.first() else {
            return Err(DataError::invalid("TensorDataset", "needs at least one tensor"));
        };
        for (i, t) in ts.iter().enumerate() {
            if t.dim() == 0 {
                return Err(DataError::invalid(
                    "TensorDataset",
                    format!("tensor {i} is 0-d; every tensor needs a first dimension to index"),
                ));
            }
        }
        let len = first.shape()[0];
        for (i, t) in ts.iter().enumerate().skip(1) {
            if t.shape()[0] != len {
                return Err(DataError::invalid(
                    "TensorDataset",
                    format!(
                        "Size mismatch between tensors: tensor 0 has {len} rows (shape {:?}) but tensor {i} has {} (shape {:?})",
                        first.shape(),
                        t.shape()[0],
                        t.shape()
                    ),
                ));
            }
        }
        Ok(TensorDataset { tensors, len })
    }

    /// The tensors.
    pub fn tensors(&self) -> &T {
        &self.tensors
    }
}

impl<T: TensorTuple> Dataset for TensorDataset<T> {
    type Item = T;
    fn len(&self) -> usize {
        self.len
    }
    fn get(&self, index: usize) -> Result<T> {
        if index >= self.len {
            return Err(DataError::IndexOutOfRange {
                what: "TensorDataset",
                index,
                len: self.len,
            });
        }
        self.tensors.select(index)
    }
}

/// The items of `dataset` at `indices`, in that order
/// (`torch.utils.data.Subset`). `D` is usually a cheap handle: an `Arc`,
/// a [`TensorDataset`], an [`MNIST`](crate::datasets::MNIST).
#[derive(Clone, Debug)]
pub struct Subset<D> {
    dataset: D,
    indices: Arc<[usize]>,
}

impl<D: Dataset> Subset<D> {
    /// The subset of `dataset` at `indices` (checked when an item is loaded).
    pub fn new(dataset: D, indices: impl Into<Arc<[usize]>>) -> Self {
        Subset {
            dataset,
            indices: indices.into(),
        }
    }

    /// The indices into the full dataset.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }

    /// The full dataset.
    pub fn dataset(&self) -> &D {
        &self.dataset
    }
}

impl<D: Dataset> Dataset for Subset<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn get(&self, index: usize) -> Result<D::Item> {
        let &i = self.indices.get(index).ok_or(DataError::IndexOutOfRange {
            what: "Subset",
            index,
            len: self.indices.len(),
        })?;
        self.dataset.get(i)
    }
}

/// Datasets one after another (`torch.utils.data.ConcatDataset`). For
/// datasets of different types with one item type, box them:
/// `ConcatDataset<Box<dyn Dataset<Item = T> + Send + Sync>>`.
#[derive(Clone, Debug)]
pub struct ConcatDataset<D> {
    datasets: Vec<D>,
    cumulative_sizes: Vec<usize>,
}

impl<D: Dataset> ConcatDataset<D> {
    /// The concatenation of `datasets`; an error when there are none
    /// (PyTorch: "datasets should not be an empty iterable").
    pub fn new(datasets: Vec<D>) -> Result<Self> {
        if datasets.is_empty() {
            return Err(DataError::invalid(
                "ConcatDataset",
                "datasets should not be an empty iterable",
            ));
        }
        let mut total = 0usize;
        let cumulative_sizes = datasets
            .iter()
            .map(|d| {
                total += d.len();
                total
            })
            .collect();
        Ok(ConcatDataset {
            datasets,
            cumulative_sizes,
        })
    }

    /// The running totals of the lengths (`cumulative_sizes`).
    pub fn cumulative_sizes(&self) -> &[usize] {
        &self.cumulative_sizes
    }

    /// The datasets.
    pub fn datasets(&self) -> &[D] {
        &self.datasets
    }
}

impl<D: Dataset> Dataset for ConcatDataset<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        self.cumulative_sizes.last().copied().unwrap_or(0)
    }
    fn get(&self, index: usize) -> Result<D::Item> {
        let d = self.cumulative_sizes.partition_point(|&c| c <= index);
        if d == self.datasets.len() {
            return Err(DataError::IndexOutOfRange {
                what: "ConcatDataset",
                index,
                len: self.len(),
            });
        }
        let start = if d == 0 { 0 } else { self.cumulative_sizes[d - 1] };
        self.datasets[d].get(index - start)
    }
}

/// `torch.randperm(n, generator=generator).tolist()` (the global generator
/// when `None`).
pub(crate) fn randperm(n: usize, generator: Option<&Generator>) -> Result<Vec<usize>> {
    let n = i64::try_from(n).map_err(|_| DataError::invalid("randperm", format!("{n} items is too many")))?;
    let mut opts = TensorOptions::new().dtype(DType::I64);
    if let Some(g) = generator {
        opts = opts.generator(g);
    }
    Ok(opts
        .randperm(n)?
        .to_vec::<i64>()?
        .into_iter()
        .map(|i| i as usize)
        .collect())
}

/// Splits `dataset` into non-overlapping random subsets of the given
/// lengths (`torch.utils.data.random_split`): the subsets take consecutive
/// runs of `randperm(len(dataset), generator=generator)`, so a seed gives
/// PyTorch's subsets. The generator is the global one when `None`
/// (PyTorch's default, `default_generator`). Errors when the lengths do not
/// add up to the dataset's length.
///
/// As PyTorch, lengths that add up to exactly 1 are taken as fractions
/// (so `[0, 1]` splits any dataset into an empty subset and the whole);
/// fractions in general go through [`random_split_fractions`].
///
/// ```
/// use ferrotorch_core::{Generator, Tensor};
/// use ferrotorch_data::{Dataset, TensorDataset, random_split};
/// let ds = TensorDataset::new(Tensor::arange(10)?)?;
/// let g = Generator::new(42);
/// let parts = random_split(&ds, &[3, 7], Some(&g))?;
/// assert_eq!(parts[0].indices(), [2, 6, 1]);   // PyTorch's for seed 42
/// assert_eq!(parts[1].len(), 7);
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
pub fn random_split<D: Dataset + Clone>(
    dataset: &D,
    lengths: &[usize],
    generator: Option<&Generator>,
) -> Result<Vec<Subset<D>>> {
    if lengths.iter().sum::<usize>() == 1 {
        let fractions: Vec<f64> = lengths.iter().map(|&l| l as f64).collect();
        return random_split_fractions(dataset, &fractions, generator);
    }
    split_by_lengths(dataset, lengths.to_vec(), generator)
}

/// [`random_split`] with fractions that add up to 1: each subset gets
/// `floor(fraction * len(dataset))` items, and what is left is handed out
/// one item at a time to the subsets in turn from the first (PyTorch's
/// round-robin remainder rule), so `[0.5, 0.5]` of 11 items gives 6 and 5.
/// Errors when a fraction is outside `[0, 1]` or they do not add up to 1
/// (within PyTorch's `math.isclose`, and not above 1).
pub fn random_split_fractions<D: Dataset + Clone>(
    dataset: &D,
    fractions: &[f64],
    generator: Option<&Generator>,
) -> Result<Vec<Subset<D>>> {
    let sum: f64 = fractions.iter().sum();
    // math.isclose(sum, 1) with its default rel_tol = 1e-9, and sum <= 1.
    if !((sum - 1.0).abs() <= 1e-9 * sum.abs().max(1.0) && sum <= 1.0) {
        return Err(DataError::invalid(
            "random_split",
            format!("fractions {fractions:?} add up to {sum}, not 1"),
        ));
    }
    let n = dataset.len();
    let mut lengths = Vec::with_capacity(fractions.len());
    for (i, &frac) in fractions.iter().enumerate() {
        if !(0.0..=1.0).contains(&frac) {
            return Err(DataError::invalid(
                "random_split",
                format!("Fraction at index {i} is not between 0 and 1"),
            ));
        }
        lengths.push((n as f64 * frac).floor() as usize);
    }
    let remainder = n.saturating_sub(lengths.iter().sum());
    let k = lengths.len();
    for i in 0..remainder {
        lengths[i % k] += 1;
    }
    split_by_lengths(dataset, lengths, generator)
}

fn split_by_lengths<D: Dataset + Clone>(
    dataset: &D,
    lengths: Vec<usize>,
    generator: Option<&Generator>,
) -> Result<Vec<Subset<D>>> {
    let total: usize = lengths.iter().sum();
    if total != dataset.len() {
        return Err(DataError::invalid(
            "random_split",
            format!(
                "Sum of input lengths does not equal the length of the input dataset! (lengths {lengths:?} add up to {total}, the dataset has {})",
                dataset.len()
            ),
        ));
    }
    let g = generator.cloned().unwrap_or_else(default_generator);
    let perm = randperm(total, Some(&g))?;
    let mut out = Vec::with_capacity(lengths.len());
    let mut offset = 0;
    for len in lengths {
        out.push(Subset::new(dataset.clone(), &perm[offset..offset + len]));
        offset += len;
    }
    Ok(out)
}
