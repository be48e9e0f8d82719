//! Counting and bucketing: `searchsorted` / `bucketize`, `bincount` and
//! `histc`, with PyTorch's comparisons (NaN included), dtypes and checks.
//! Not differentiable (`bincount`'s weights give a result that requires
//! grad, as PyTorch's, whose backward is PyTorch's "not implemented"
//! error); the CPU kernel (`backend/cpu/bucket.rs`) is functional
//! (`bincount`'s output size depends on the data).

use crate::autograd::BackwardCtx;
use crate::dispatch::{Op, OpEntry, call1};
use crate::ops::promote::{IntoOperand, Operand, result_type};
use crate::{DType, Error, Result, Tensor};

/// Dispatch table of `searchsorted.Tensor`.
pub static SEARCHSORTED: OpEntry = OpEntry::new("searchsorted.Tensor");
/// Dispatch table of `bincount`.
pub static BINCOUNT: OpEntry = OpEntry::differentiable("bincount");
/// Dispatch table of `histc`.
pub static HISTC: OpEntry = OpEntry::new("histc");

/// One of the counting operators.
#[derive(Debug, Clone)]
pub enum Bucket {
    /// `searchsorted(sorted_sequence, values)`: inputs `[sequence, values]`
    /// or `[sequence, values, sorter]`, both in their common dtype.
    SearchSorted {
        /// Upper bound (`side="right"`) instead of lower.
        right: bool,
        /// int32 output instead of int64.
        out_int32: bool,
    },
    /// `bincount(input, weights, minlength)`: inputs `[x]` or `[x, weights]`.
    Bincount {
        /// The least output length.
        minlength: usize,
    },
    /// `histc(input, bins, min, max)`.
    Histc {
        /// Number of bins.
        bins: usize,
        /// Lower edge (with `max`, 0 and 0: the data's range).
        min: f64,
        /// Upper edge.
        max: f64,
    },
}

impl Op for Bucket {
    fn entry(&self) -> &'static OpEntry {
        match self {
            Bucket::SearchSorted { .. } => &SEARCHSORTED,
            Bucket::Bincount { .. } => &BINCOUNT,
            Bucket::Histc { .. } => &HISTC,
        }
    }

    fn differentiable_input(&self, i: usize) -> bool {
        // Only bincount's weights (PyTorch records a NotImplemented node).
        i == 1
    }

    fn backward_name(&self) -> String {
        "NotImplemented".into()
    }

    fn backward(&self, _ctx: &BackwardCtx, _grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        Err(Error::invalid(
            "bincount",
            "derivative for aten::bincount is not implemented",
        ))
    }
}

/// Options of [`Tensor::searchsorted_with`] (PyTorch's keywords).
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchSortedOptions<'a> {
    /// Return the last insertion point among equal elements
    /// (`right=True` / `side="right"`).
    pub right: bool,
    /// Return int32 indices (`out_int32=True`).
    pub out_int32: bool,
    /// Indices that sort an unsorted sequence (`sorter`).
    pub sorter: Option<&'a Tensor>,
    /// `side="left"` or `"right"`: `"right"` is `right=true`; `"left"`
    /// with `right` set is PyTorch's error, and so is any other string.
    pub side: Option<&'a str>,
}

impl<'a> SearchSortedOptions<'a> {
    /// PyTorch's defaults: the first insertion point, int64 indices, a
    /// sorted sequence.
    pub fn new() -> Self {
        Self::default()
    }

    /// `right=`.
    pub fn right(mut self, right: bool) -> Self {
        self.right = right;
        self
    }

    /// `out_int32=`.
    pub fn out_int32(mut self, out_int32: bool) -> Self {
        self.out_int32 = out_int32;
        self
    }

    /// `sorter=`: indices that sort the sequence.
    pub fn sorter(mut self, sorter: &'a Tensor) -> Self {
        self.sorter = Some(sorter);
        self
    }

    /// `side=`: `"left"` or `"right"`.
    pub fn side(mut self, side: &'a str) -> Self {
        self.side = Some(side);
        self
    }
}

/// # Searching, counting and histograms
///
/// ```
/// use ferrotorch_core::Tensor;
/// let edges = Tensor::new([1.0f32, 3.0, 5.0, 7.0])?;
/// let v = Tensor::new([3.0f32, 6.0, 9.0])?;
/// assert_eq!(edges.searchsorted(&v, false)?.to_vec::<i64>()?, [1, 3, 4]);
/// assert_eq!(v.bucketize(&edges, true)?.to_vec::<i64>()?, [2, 3, 4]);
/// assert_eq!(Tensor::new([0i64, 1, 1, 3])?.bincount(None, 0)?.to_vec::<i64>()?, [1, 2, 0, 1]);
/// assert_eq!(Tensor::new([1.0f32, 2.0, 1.0, 4.0])?.histc(4, 0.0, 4.0)?.to_vec::<f32>()?, [0.0, 2.0, 1.0, 1.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `torch.searchsorted(self, values, right=right)`: where each value
    /// would be inserted into the sorted innermost rows of `self` (1-d, or
    /// with leading dims matching `values`'), as int64.
    pub fn searchsorted<'a>(&self, values: impl IntoOperand<'a>, right: bool) -> Result<Tensor> {
        self.searchsorted_with(
            values,
            SearchSortedOptions {
                right,
                ..Default::default()
            },
        )
    }

    /// `torch.searchsorted` with every keyword ([`SearchSortedOptions`]).
    pub fn searchsorted_with<'a>(&self, values: impl IntoOperand<'a>, opts: SearchSortedOptions) -> Result<Tensor> {
        let name = "searchsorted";
        let right = match opts.side {
            None => opts.right,
            Some("right") => true,
            Some("left") if opts.right => {
                return Err(Error::invalid(
                    name,
                    "torch.searchsorted(): side and right can't be set to opposites, got side of left while right \
                     was True",
                ));
            }
            Some("left") => false,
            Some(other) => {
                return Err(Error::invalid(
                    name,
                    format!("torch.searchsorted(): side can only be 'left' or 'right' but got {other}"),
                ));
            }
        };
        let values = values.into_operand();
        let dt = result_type(&[Operand::Tensor(self), values.clone()]);
        let vals = values.to_tensor(dt)?;
        if self.ndim() > 1
            && (self.ndim() != vals.ndim() || self.shape()[..self.ndim() - 1] != vals.shape()[..vals.ndim() - 1])
        {
            return Err(Error::invalid(
                name,
                format!(
                    "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of \
                     boundaries tensor and input value tensor must match, but we got boundaries tensor {:?} and \
                     input value tensor {:?}",
                    self.shape(),
                    vals.shape()
                ),
            ));
        }
        if let Some(s) = opts.sorter
            && s.shape() != self.shape()
        {
            return Err(Error::invalid(
                name,
                format!(
                    "torch.searchsorted(): boundary and sorter must have the same size, but got boundary tensor \
                     {:?}and got sorter tensor {:?}",
                    self.shape(),
                    s.shape()
                ),
            ));
        }
        // PyTorch returns an empty result before its dtype dispatch.
        if dt == DType::Bool && vals.numel() > 0 {
            return Err(Error::dtype(
                name,
                dt,
                "\"searchsorted_out_cpu\" not implemented for 'Bool'",
            ));
        }
        if let Some(s) = opts.sorter
            && s.dtype() != DType::I64
        {
            return Err(Error::dtype(
                name,
                s.dtype(),
                format!(
                    "torch.searchsorted(): sorter must be a tensor of long dtype but got dtype {}",
                    s.dtype().scalar_type_name()
                ),
            ));
        }
        let seq = self.to_dtype(dt)?;
        let op = Bucket::SearchSorted {
            right,
            out_int32: opts.out_int32,
        };
        let mut inputs = vec![&seq, &vals];
        inputs.extend(opts.sorter);
        call1(&op, &inputs)
    }

    /// `torch.bucketize(self, boundaries, right=right)`: the index of the
    /// bucket of each element among 1-d sorted `boundaries`.
    pub fn bucketize(&self, boundaries: &Tensor, right: bool) -> Result<Tensor> {
        self.bucketize_with(boundaries, right, false)
    }

    /// `torch.bucketize(self, boundaries, right=right, out_int32=out_int32)`:
    /// [`Tensor::bucketize`] with int32 indices when `out_int32`.
    pub fn bucketize_with(&self, boundaries: &Tensor, right: bool, out_int32: bool) -> Result<Tensor> {
        if boundaries.ndim() != 1 {
            return Err(Error::invalid(
                "bucketize",
                format!(
                    "boundaries tensor must be 1 dimension, but got dim({})",
                    boundaries.ndim()
                ),
            ));
        }
        boundaries.searchsorted_with(self, SearchSortedOptions::new().right(right).out_int32(out_int32))
    }

    /// `torch.bincount(self, weights, minlength)`: how often each value of
    /// a 1-d non-negative integer tensor occurs (or the sum of its
    /// `weights`: float32 weights sum in float32, others in float64).
    pub fn bincount(&self, weights: Option<&Tensor>, minlength: usize) -> Result<Tensor> {
        // PyTorch's order: the input dtype, an empty input (int64 zeros
        // whatever the weights), the rank and signs, the largest value,
        // then the weights' shape.
        if !self.dtype().is_integral(false) {
            return Err(Error::dtype(
                "bincount",
                self.dtype(),
                format!(
                    "\"bincount_cpu\" not implemented for '{}'",
                    self.dtype().scalar_type_name()
                ),
            ));
        }
        if self.ndim() == 1 && self.numel() == 0 {
            return crate::TensorOptions::new()
                .dtype(DType::I64)
                .device(self.device())
                .zeros([minlength]);
        }
        if self.ndim() != 1 || self.amin(0, false)?.item::<i64>()? < 0 {
            return Err(Error::invalid(
                "bincount",
                "bincount only supports 1-d non-negative integral inputs.",
            ));
        }
        let max = self.amax(0, false)?.item::<i64>()?;
        if max == i64::MAX {
            return Err(Error::invalid(
                "bincount",
                format!(
                    "maximum value of input overflowed, it should be < {} but got {max}",
                    i64::MAX
                ),
            ));
        }
        if let Some(w) = weights
            && (w.ndim() != 1 || w.numel() != self.numel())
        {
            return Err(Error::invalid(
                "bincount",
                "weights should be 1-d and have the same length as input",
            ));
        }
        let mut inputs = vec![self];
        inputs.extend(weights);
        call1(&Bucket::Bincount { minlength }, &inputs)
    }

    /// `torch.histc(self, bins, min, max)`: counts in `bins` equal bins of
    /// `[min, max]` (the data's range when both are equal; elements outside
    /// and NaN are ignored), as a float tensor of `self`'s dtype.
    pub fn histc(&self, bins: i64, min: f64, max: f64) -> Result<Tensor> {
        if !self.is_floating_point() {
            return Err(Error::dtype(
                "histc",
                self.dtype(),
                format!(
                    "\"histogram_cpu\" not implemented for '{}'",
                    self.dtype().scalar_type_name()
                ),
            ));
        }
        let bins = match usize::try_from(bins) {
            Ok(b) if b > 0 => b,
            _ => {
                return Err(Error::invalid(
                    "histc",
                    format!("torch.histogram(): bins must be > 0, but got {bins} for dimension 0"),
                ));
            }
        };
        if min > max {
            return Err(Error::invalid("histc", "torch.histc: max must be larger than min"));
        }
        call1(&Bucket::Histc { bins, min, max }, &[self])
    }
}
