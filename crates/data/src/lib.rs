//! # ferrotorch-data
//!
//! PyTorch's `torch.utils.data` for ferrotorch, with its names and
//! semantics: the [`Dataset`] and [`IterableDataset`] traits,
//! [`TensorDataset`], [`Subset`], [`ConcatDataset`], [`random_split`],
//! the samplers ([`SequentialSampler`], [`RandomSampler`],
//! [`SubsetRandomSampler`], [`WeightedRandomSampler`], [`BatchSampler`],
//! [`DistributedSampler`]), default collation ([`Collate`],
//! [`DefaultCollate`]) and the [`DataLoader`] with worker threads; plus
//! [`datasets::MNIST`] and the image [`transforms`].
//!
//! Random samplers draw exactly what PyTorch's draw, so a seed gives
//! PyTorch's indices, split and batch order.
//!
//! The facade re-exports this crate as `ferrotorch::data`.
//!
//! ```
//! use ferrotorch_core::{Generator, Tensor};
//! use ferrotorch_data::{DataLoader, Dataset, TensorDataset, random_split};
//! let x = Tensor::randn((100, 4))?;
//! let y = Tensor::arange(100)?;
//! let ds = TensorDataset::new((x, y))?;
//! let g = Generator::new(0);
//! let parts = random_split(&ds, &[80, 20], Some(&g))?;
//! let train = DataLoader::builder(parts[0].clone()).batch_size(32).shuffle(true).build()?;
//! let mut seen = 0;
//! for batch in train.iter()? {
//!     let (xb, yb) = batch?;
//!     seen += yb.shape()[0];
//!     assert_eq!(xb.shape()[1], 4);
//! }
//! assert_eq!((seen, parts[1].len()), (80, 20));
//! # Ok::<(), ferrotorch_data::DataError>(())
//! ```

pub mod collate;
pub mod dataset;
pub mod datasets;
pub mod error;
pub mod loader;
pub mod sampler;
pub mod transforms;
pub mod worker;

pub use collate::{Collate, CollateFn, DefaultCollate};
pub use dataset::{
    ConcatDataset, Dataset, ItemIter, IterableDataset, Subset, TensorDataset, TensorTuple, random_split,
    random_split_fractions,
};
pub use error::{DataError, Result};
pub use loader::{BoxBatchSampler, DataLoader, DataLoaderBuilder, DataLoaderIter, DataLoaderIterOrError};
pub use sampler::{
    BatchSampler, BoxSampler, DistributedSampler, IndexIter, RandomSampler, Sampler, SequentialSampler,
    SubsetRandomSampler, WeightedRandomSampler,
};
pub use worker::{WorkerInfo, get_worker_info};
