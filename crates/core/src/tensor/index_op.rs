//! Python's indexing in one call: `x.i((.., 1))` is `x[:, 1]`,
//! `x.i_set((.., 0), &v)` is `x[:, 0] = v`.
//!
//! An index is one item or a tuple of items (up to 8). Items: integers
//! (negative count from the end), ranges of `i64`, `i32` or `usize`
//! (`2..5`, `..3`, `1..`, `..`, `1..=3`), a range with a step
//! (`(1..).step(2)` is `1::2`), [`NewAxis`] (Python's `None`),
//! [`Ellipsis`] (`...`), and integer or bool tensors (advanced indexing).

use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

use smallvec::SmallVec;

use super::index::TensorIndex;
use crate::{DType, IntoOperand, Operand, Result, Tensor};

/// Python's `None` in an index (`x[None]`): inserts a dim of size 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewAxis;

/// Python's `...` in an index: as many `:` as the other items leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ellipsis;

/// One item of an index ([`Tensor::i`]).
pub trait IntoTensorIndex {
    /// The item.
    fn into_tensor_index(self) -> TensorIndex;
}

/// An index: one item or a tuple of items ([`Tensor::i`]).
pub trait IndexSpec {
    /// The items, in order.
    fn into_indices(self) -> SmallVec<[TensorIndex; 4]>;
}

/// A step for a range in an index: `(1..).step(2)` is Python's `1::2`.
pub trait Step {
    /// The range taking every `step`-th element (`step` must be positive).
    fn step(self, step: i64) -> TensorIndex;
}

impl IntoTensorIndex for TensorIndex {
    fn into_tensor_index(self) -> TensorIndex {
        self
    }
}

impl IntoTensorIndex for NewAxis {
    fn into_tensor_index(self) -> TensorIndex {
        TensorIndex::NewAxis
    }
}

impl IntoTensorIndex for Ellipsis {
    fn into_tensor_index(self) -> TensorIndex {
        TensorIndex::Ellipsis
    }
}

impl IntoTensorIndex for RangeFull {
    fn into_tensor_index(self) -> TensorIndex {
        TensorIndex::full()
    }
}

impl IntoTensorIndex for &Tensor {
    fn into_tensor_index(self) -> TensorIndex {
        TensorIndex::Tensor(self.clone())
    }
}

impl IntoTensorIndex for Tensor {
    fn into_tensor_index(self) -> TensorIndex {
        TensorIndex::Tensor(self)
    }
}

impl Step for RangeFull {
    fn step(self, step: i64) -> TensorIndex {
        TensorIndex::slice(None, None, step)
    }
}

/// `usize` bounds past `i64::MAX` saturate (they are past any dim's end).
fn bound<T: TryInto<i64>>(v: T) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

macro_rules! int_index {
    ($($t:ty),*) => {$(
        impl IntoTensorIndex for $t {
            fn into_tensor_index(self) -> TensorIndex {
                TensorIndex::Int(bound(self))
            }
        }

        impl IntoTensorIndex for Range<$t> {
            fn into_tensor_index(self) -> TensorIndex {
                self.step(1)
            }
        }

        impl IntoTensorIndex for RangeFrom<$t> {
            fn into_tensor_index(self) -> TensorIndex {
                self.step(1)
            }
        }

        impl IntoTensorIndex for RangeTo<$t> {
            fn into_tensor_index(self) -> TensorIndex {
                self.step(1)
            }
        }

        impl IntoTensorIndex for RangeInclusive<$t> {
            fn into_tensor_index(self) -> TensorIndex {
                self.step(1)
            }
        }

        impl IntoTensorIndex for RangeToInclusive<$t> {
            fn into_tensor_index(self) -> TensorIndex {
                self.step(1)
            }
        }

        impl Step for Range<$t> {
            fn step(self, step: i64) -> TensorIndex {
                TensorIndex::slice(Some(bound(self.start)), Some(bound(self.end)), step)
            }
        }

        impl Step for RangeFrom<$t> {
            fn step(self, step: i64) -> TensorIndex {
                TensorIndex::slice(Some(bound(self.start)), None, step)
            }
        }

        impl Step for RangeTo<$t> {
            fn step(self, step: i64) -> TensorIndex {
                TensorIndex::slice(None, Some(bound(self.end)), step)
            }
        }

        impl Step for RangeInclusive<$t> {
            fn step(self, step: i64) -> TensorIndex {
                // `a..=-1` runs to the end, as Python's `a:` would.
                let end = bound(*self.end()).checked_add(1).filter(|&e| e != 0);
                TensorIndex::slice(Some(bound(*self.start())), end, step)
            }
        }

        impl Step for RangeToInclusive<$t> {
            fn step(self, step: i64) -> TensorIndex {
                let end = bound(self.end).checked_add(1).filter(|&e| e != 0);
                TensorIndex::slice(None, end, step)
            }
        }
    )*};
}
int_index!(i64, i32, usize);

impl<T: IntoTensorIndex> IndexSpec for T {
    fn into_indices(self) -> SmallVec<[TensorIndex; 4]> {
        smallvec::smallvec![self.into_tensor_index()]
    }
}

macro_rules! tuple_index {
    ($($name:ident),+) => {
        impl<$($name: IntoTensorIndex),+> IndexSpec for ($($name,)+) {
            #[allow(non_snake_case)]
            fn into_indices(self) -> SmallVec<[TensorIndex; 4]> {
                let ($($name,)+) = self;
                smallvec::smallvec![$($name.into_tensor_index()),+]
            }
        }
    };
}
tuple_index!(A);
tuple_index!(A, B);
tuple_index!(A, B, C);
tuple_index!(A, B, C, D);
tuple_index!(A, B, C, D, E);
tuple_index!(A, B, C, D, E, F);
tuple_index!(A, B, C, D, E, F, G);
tuple_index!(A, B, C, D, E, F, G, H);

/// # Indexing
///
/// Python's `x[...]` and `x[...] = v`: ranges, steps, negative indices,
/// [`NewAxis`](crate::NewAxis), [`Ellipsis`](crate::Ellipsis), integer-tensor and mask indices.
///
/// ```
/// use ferrotorch_core::{Step, Tensor};
/// let x = Tensor::arange(12)?.reshape((3, 4))?;
/// assert_eq!(x.i((.., 1))?.to_vec::<i64>()?, [1, 5, 9]);           // x[:, 1]
/// assert_eq!(x.i((-1, (..).step(2)))?.to_vec::<i64>()?, [8, 10]); // x[-1, ::2]
/// assert_eq!(x.i(&x.gt(9)?)?.to_vec::<i64>()?, [10, 11]);          // x[x > 9]
/// x.i_set((.., 0), 0)?;                                            // x[:, 0] = 0
/// assert_eq!(x.i((.., 0))?.to_vec::<i64>()?, [0, 0, 0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `self[index]` as Python writes it: `x.i((.., 1))` is `x[:, 1]`. The
    /// index is one item or a tuple of up to 8 ([`IndexSpec`]): integers,
    /// ranges (`1..3`, `..`, `(1..).step(2)` for `1::2`, see [`Step`]),
    /// [`NewAxis`], [`Ellipsis`], integer or bool tensors. Integers, ranges,
    /// [`NewAxis`] and [`Ellipsis`] give a view; tensor indices a copy, as
    /// in PyTorch. Errors: an index out of range (naming the dim and its
    /// size), too many indices, more than one ellipsis, a step that is not
    /// positive.
    ///
    /// ```
    /// use ferrotorch_core::{Ellipsis, NewAxis, Step, Tensor};
    /// let x = Tensor::arange(24)?.reshape(&[2, 3, 4])?;
    /// assert_eq!(x.i((.., 1))?.shape(), [2, 4]);                  // x[:, 1]
    /// assert_eq!(x.i((0, 1..3, ..))?.to_vec::<i64>()?, (4..12).collect::<Vec<_>>());
    /// assert_eq!(x.i((-1, -1, -1))?.item::<i64>()?, 23);          // x[-1, -1, -1]
    /// assert_eq!(x.i((Ellipsis, (..).step(2)))?.shape(), [2, 3, 2]); // x[..., ::2]
    /// assert_eq!(x.i((NewAxis, 0))?.shape(), [1, 3, 4]);          // x[None, 0]
    /// let idx = Tensor::from_slice(&[2i64, 0]);
    /// assert_eq!(x.i((0, 0, &idx))?.to_vec::<i64>()?, [2, 0]);    // x[0, 0, idx]
    /// let mask = x.gt(20)?;
    /// assert_eq!(x.i(&mask)?.to_vec::<i64>()?, [21, 22, 23]);     // x[x > 20]
    ///
    /// let y = Tensor::zeros(&[2, 3])?;
    /// y.i_set((.., 0), 1.0)?;                                      // y[:, 0] = 1
    /// y.i_set((1, 1..), &Tensor::from_slice(&[5.0f32, 6.0]))?;     // y[1, 1:] = [5, 6]
    /// assert_eq!(y.to_vec::<f32>()?, [1.0, 0.0, 0.0, 1.0, 5.0, 6.0]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn i(&self, index: impl IndexSpec) -> Result<Tensor> {
        self.get(&index.into_indices())
    }

    /// `self[index] = value` (Python's index assignment) with a tensor that
    /// broadcasts to the indexed part, or a scalar. Recorded by autograd as
    /// PyTorch records it: an in-place write into a view of `self`
    /// (`CopySlices`), so gradients flow to `value` and to the rest of
    /// `self`; with tensor indices it is `index_put_` (`IndexPutBackward0`;
    /// duplicate positions: the last one wins). Returns `self`.
    pub fn i_set<'a>(&self, index: impl IndexSpec, value: impl IntoOperand<'a>) -> Result<Tensor> {
        let items = index.into_indices();
        let value = value.into_operand();
        // PyTorch's fast path: `x[mask] = scalar` is `masked_fill_`, the
        // mask covering the leading dims (size-1 dims appended for the rest).
        if let ([TensorIndex::Tensor(mask)], Operand::Scalar(s)) = (items.as_slice(), &value)
            && mask.dtype() == DType::Bool
            && mask.ndim() > 0
            && mask.ndim() <= self.ndim()
            && mask.shape() == &self.shape()[..mask.ndim()]
            && mask.device() == self.device()
        {
            let mut shape = mask.shape().to_vec();
            shape.resize(self.ndim(), 1);
            self.masked_fill_(&mask.view(shape)?, *s)?;
            return Ok(self.clone());
        }
        // The basic items give a view; tensor items then put into it.
        let (part, advanced) = self.split_index(&items)?;
        match (advanced, value) {
            (None, Operand::Tensor(v)) => {
                part.copy_(v)?;
            }
            (None, Operand::Scalar(s)) => {
                part.fill_(s)?;
            }
            (Some(advanced), value) => {
                if let Operand::Scalar(s) = value {
                    s.check_fits("index_put_", part.dtype())?;
                }
                part.index_put_(&advanced, &value.to_tensor(part.dtype())?, false)?;
            }
        }
        Ok(self.clone())
    }
}
