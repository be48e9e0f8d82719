//! Python-style indexing: `x[2, 1:4, ..., None, idx]` as [`Tensor::get`].

use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo};

use crate::{DType, Error, Result, Tensor};

/// One item of an index expression.
#[derive(Debug, Clone)]
pub enum TensorIndex {
    /// `x[i]`: selects and removes a dim (negative counts from the end).
    Int(i64),
    /// `x[start:end:step]`.
    Slice {
        /// Start (negative counts from the end).
        start: Option<i64>,
        /// End, exclusive.
        end: Option<i64>,
        /// Step, positive.
        step: i64,
    },
    /// `None` / `np.newaxis`: inserts a size-1 dim.
    NewAxis,
    /// `...`: as many `:` as needed.
    Ellipsis,
    /// An integer or bool tensor (advanced indexing).
    Tensor(Tensor),
}

impl TensorIndex {
    /// `start:end:step` with optional bounds.
    pub fn slice(start: Option<i64>, end: Option<i64>, step: i64) -> Self {
        TensorIndex::Slice { start, end, step }
    }

    /// `:`.
    pub fn full() -> Self {
        TensorIndex::Slice {
            start: None,
            end: None,
            step: 1,
        }
    }
}

impl From<i64> for TensorIndex {
    fn from(i: i64) -> Self {
        TensorIndex::Int(i)
    }
}

impl From<i32> for TensorIndex {
    fn from(i: i32) -> Self {
        TensorIndex::Int(i as i64)
    }
}

impl From<Range<i64>> for TensorIndex {
    fn from(r: Range<i64>) -> Self {
        TensorIndex::slice(Some(r.start), Some(r.end), 1)
    }
}

impl From<RangeInclusive<i64>> for TensorIndex {
    fn from(r: RangeInclusive<i64>) -> Self {
        TensorIndex::slice(Some(*r.start()), Some(*r.end() + 1), 1)
    }
}

impl From<RangeFrom<i64>> for TensorIndex {
    fn from(r: RangeFrom<i64>) -> Self {
        TensorIndex::slice(Some(r.start), None, 1)
    }
}

impl From<RangeTo<i64>> for TensorIndex {
    fn from(r: RangeTo<i64>) -> Self {
        TensorIndex::slice(None, Some(r.end), 1)
    }
}

impl From<RangeFull> for TensorIndex {
    fn from(_: RangeFull) -> Self {
        TensorIndex::full()
    }
}

impl From<&Tensor> for TensorIndex {
    fn from(t: &Tensor) -> Self {
        TensorIndex::Tensor(t.clone())
    }
}

impl From<Tensor> for TensorIndex {
    fn from(t: Tensor) -> Self {
        TensorIndex::Tensor(t)
    }
}

/// # Indexing with a list of items
///
/// [`Tensor::get`] takes the items as a slice; [`Tensor::i`] is the shorter
/// tuple form.
///
/// ```
/// use ferrotorch_core::Tensor;
/// use ferrotorch_core::TensorIndex as I;
/// let x = Tensor::arange(12)?.reshape((3, 4))?;
/// let y = x.get(&[I::full(), I::Int(1)])?;                  // x[:, 1]
/// assert_eq!(y.to_vec::<i64>()?, [1, 5, 9]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `self[index...]` with PyTorch's semantics: ints, slices, `NewAxis`
    /// and `Ellipsis` give views; integer or bool tensors then index the
    /// resulting dims (a copy), as `aten::index`.
    ///
    /// ```
    /// use ferrotorch_core::{Tensor, TensorIndex as I};
    /// let x = Tensor::arange(24)?.reshape(&[2, 3, 4])?;
    /// let y = x.get(&[I::Int(1), (1..3).into(), I::Ellipsis, I::slice(None, None, 2)])?;
    /// assert_eq!(y.to_vec::<i64>()?, vec![16, 18, 20, 22]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn get(&self, index: &[TensorIndex]) -> Result<Tensor> {
        match self.split_index(index)? {
            (x, Some(advanced)) => x.index(&advanced),
            (x, None) if x.is_same(self) => self.alias(),
            (x, None) => Ok(x),
        }
    }

    /// Applies the basic items of `index` (ints, slices, `NewAxis`,
    /// `Ellipsis`, 0-d integer tensors) as views, as PyTorch's
    /// `applySlicing` does, and returns that view with the advanced
    /// (tensor) items as an `aten::index` list over its dims (`None` when
    /// there are none). The view is `self` itself when nothing was applied.
    pub(crate) fn split_index(&self, index: &[TensorIndex]) -> Result<(Tensor, Option<Vec<Option<Tensor>>>)> {
        let consumed: usize = index
            .iter()
            .map(|i| match i {
                TensorIndex::Int(_) | TensorIndex::Slice { .. } => 1,
                TensorIndex::Tensor(t) if t.dtype() == DType::Bool || t.dtype() == DType::U8 => t.ndim(),
                TensorIndex::Tensor(_) => 1,
                TensorIndex::NewAxis | TensorIndex::Ellipsis => 0,
            })
            .sum();
        if consumed > self.ndim() {
            return Err(Error::invalid(
                "index",
                format!("too many indices for tensor of dimension {}", self.ndim()),
            ));
        }
        if index.iter().filter(|i| matches!(i, TensorIndex::Ellipsis)).count() > 1 {
            return Err(Error::invalid(
                "index",
                "an index can only have a single ellipsis ('...')",
            ));
        }
        let mut x = self.clone();
        let mut d = 0usize;
        // The dim of `self` the next item indexes (for error messages).
        let mut orig = 0usize;
        let mut advanced: Vec<(usize, Tensor)> = Vec::new();
        for item in index {
            match item {
                TensorIndex::Int(i) => {
                    // As PyTorch, an index out of range names the dim of
                    // `self`, not of the partly indexed view.
                    x = x.select(d as i64, *i).map_err(|e| match e {
                        Error::IndexOutOfRange { index, size, .. } => Error::IndexOutOfRange {
                            op: "index",
                            index,
                            dim: orig,
                            size,
                        },
                        e => e,
                    })?;
                    orig += 1;
                }
                TensorIndex::Slice { start, end, step } => {
                    x = x.slice(d as i64, *start, *end, *step)?;
                    d += 1;
                    orig += 1;
                }
                TensorIndex::NewAxis => {
                    x = x.unsqueeze(d as i64)?;
                    d += 1;
                }
                TensorIndex::Ellipsis => {
                    d += self.ndim() - consumed;
                    orig += self.ndim() - consumed;
                }
                // A 0-d integer tensor selects like an int; a 0-d bool (or
                // uint8) tensor adds a dim of size 1 (true) or 0 (false), as
                // PyTorch's indexing does.
                TensorIndex::Tensor(t) if t.ndim() == 0 && t.dtype().is_integral(true) => {
                    let v = t.item::<i64>()?;
                    if t.dtype() == DType::Bool || t.dtype() == DType::U8 {
                        x = x.unsqueeze(d as i64)?;
                        let keep = if v != 0 { vec![0i64] } else { Vec::new() };
                        let n = keep.len();
                        advanced.push((d, Tensor::from_vec(keep, [n])?.to_device(x.device())?));
                        d += 1;
                    } else {
                        x = x.select(d as i64, v)?;
                        orig += 1;
                    }
                }
                TensorIndex::Tensor(t) => {
                    let width = if t.dtype() == DType::Bool || t.dtype() == DType::U8 {
                        t.ndim()
                    } else {
                        1
                    };
                    advanced.push((d, t.clone()));
                    d += width;
                    orig += width;
                }
            }
        }
        if advanced.is_empty() {
            return Ok((x, None));
        }
        let mut list: Vec<Option<Tensor>> = vec![None; x.ndim()];
        let mut trimmed = 0;
        for (pos, t) in advanced {
            list[pos] = Some(t);
            trimmed = trimmed.max(pos + 1);
        }
        list.truncate(trimmed);
        // A bool mask covers several dims: drop the placeholders it spans.
        let mut compact: Vec<Option<Tensor>> = Vec::new();
        let mut skip = 0;
        for item in list {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            if let Some(t) = &item
                && (t.dtype() == DType::Bool || t.dtype() == DType::U8)
            {
                skip = t.ndim().saturating_sub(1);
            }
            compact.push(item);
        }
        Ok((x, Some(compact)))
    }
}
