//! Order statistics: `kthvalue`, `median` / `nanmedian` (along a dim, with
//! indices, and over everything), and `mode`. The CPU kernels run
//! PyTorch's own algorithms (quickselect, `nth_element`, `sort`), so the
//! index picked among equal values is PyTorch's.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call1, call2};
use crate::layout::normalize_dim;
use crate::ops::grad_util::{SAVES_INDICES, grad0, picked_values_backward, values_and_indices};
use crate::ops::promote::Operand;
use crate::ops::reduce::reduced_shape;
use crate::{DType, Error, Result, Tensor};

/// Dispatch table of `kthvalue`.
pub static KTHVALUE: OpEntry = OpEntry::differentiable("kthvalue");
/// Dispatch table of `median.dim`.
pub static MEDIAN_DIM: OpEntry = OpEntry::differentiable("median.dim");
/// Dispatch table of `nanmedian.dim`.
pub static NANMEDIAN_DIM: OpEntry = OpEntry::differentiable("nanmedian.dim");
/// Dispatch table of `mode`.
pub static MODE: OpEntry = OpEntry::differentiable("mode");
/// Dispatch table of `median` (over every element).
pub static MEDIAN: OpEntry = OpEntry::differentiable("median");
/// Dispatch table of `nanmedian` (over every element).
pub static NANMEDIAN: OpEntry = OpEntry::differentiable("nanmedian");

/// Which order statistic a [`SelectDim`] takes along its dim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectKind {
    /// The `k`-th smallest (1-based; NaN above every number).
    Kth(usize),
    /// The lower median; NaN (the first one) if the line has one.
    Median,
    /// The lower median of the non-NaN elements.
    NanMedian,
    /// The most frequent value (the smallest among equally frequent ones).
    Mode,
}

/// An order statistic along `dim` with its index: outputs values and int64 indices.
#[derive(Debug, Clone, Copy)]
pub struct SelectDim {
    /// Which statistic.
    pub kind: SelectKind,
    /// The normalised dim (0 for a 0-d input).
    pub dim: usize,
    /// Keep the dim as size 1.
    pub keepdim: bool,
}

impl SelectKind {
    fn name(self) -> &'static str {
        match self {
            SelectKind::Kth(_) => "kthvalue",
            SelectKind::Median => "median",
            SelectKind::NanMedian => "nanmedian",
            SelectKind::Mode => "mode",
        }
    }
}

/// `op(): Expected reduction dim d to have non-zero size.`
fn check_nonempty(name: &'static str, x: &Tensor, dim: usize) -> Result<()> {
    if x.ndim() > 0 && x.shape()[dim] == 0 {
        return Err(Error::invalid(
            name,
            format!("{name}(): Expected reduction dim {dim} to have non-zero size."),
        ));
    }
    Ok(())
}

/// The error of PyTorch's kernels that have no bool version.
fn no_bool(name: &'static str, kernel: &str, dtype: DType) -> Result<()> {
    if dtype == DType::Bool {
        return Err(Error::dtype(
            name,
            dtype,
            format!("\"{kernel}\" not implemented for 'Bool'"),
        ));
    }
    Ok(())
}

impl Op for SelectDim {
    fn entry(&self) -> &'static OpEntry {
        match self.kind {
            SelectKind::Kth(_) => &KTHVALUE,
            SelectKind::Median => &MEDIAN_DIM,
            SelectKind::NanMedian => &NANMEDIAN_DIM,
            SelectKind::Mode => &MODE,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let name = self.kind.name();
        match self.kind {
            SelectKind::Kth(k) => {
                // PyTorch answers a 0-d input before its dtype dispatch.
                if x.ndim() > 0 {
                    no_bool(name, "kthvalue_cpu", x.dtype())?;
                }
                check_nonempty(name, x, self.dim)?;
                let size = if x.ndim() == 0 { 1 } else { x.shape()[self.dim] };
                if k == 0 || k > size {
                    return Err(Error::invalid(
                        name,
                        format!("kthvalue(): selected number k out of range for dimension {}", self.dim),
                    ));
                }
            }
            SelectKind::Median | SelectKind::NanMedian => {
                no_bool(name, "median_out", x.dtype())?;
                check_nonempty(name, x, self.dim)?;
            }
            SelectKind::Mode => check_nonempty(name, x, self.dim)?,
        }
        let dims = [self.dim];
        let shape = if x.ndim() == 0 {
            x.dims()
        } else {
            reduced_shape(x.shape(), Some(&dims), self.keepdim)
        };
        Ok(values_and_indices(shape, x.dtype()))
    }

    fn saves(&self) -> Saves {
        SAVES_INDICES
    }

    fn backward_name(&self) -> String {
        match self.kind {
            SelectKind::Kth(_) => "KthvalueBackward0",
            SelectKind::Median => "MedianBackward1",
            SelectKind::NanMedian => "NanmedianBackward1",
            SelectKind::Mode => "ModeBackward0",
        }
        .into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // PyTorch's value_selecting_reduction_backward: the gradient goes to
        // the selected element of each line.
        picked_values_backward(ctx, grads, self.dim, self.keepdim, false)
    }
}

/// The median of every element (a 0-d tensor, no index), NaN-propagating
/// (`median`) or NaN-ignoring (`nanmedian`).
#[derive(Debug, Clone, Copy)]
pub struct MedianAll {
    /// `nanmedian`: skip NaNs (NaN only when every element is NaN).
    pub ignore_nan: bool,
}

impl Op for MedianAll {
    fn entry(&self) -> &'static OpEntry {
        if self.ignore_nan { &NANMEDIAN } else { &MEDIAN }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        // An empty input is NaN (cast to the dtype) before any dtype check.
        if x.numel() > 0 {
            no_bool(self.entry().base_name(), "median_cpu", x.dtype())?;
        }
        Ok(smallvec::smallvec![OutSpec::new(crate::layout::Dims::new(), x.dtype())])
    }

    fn saves(&self) -> Saves {
        Saves { inputs: 1, outputs: 1 }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // PyTorch's evenly_distribute_backward: the gradient is shared by
        // the elements equal to the result (the NaNs, for a NaN result).
        let g = grad0(grads)?;
        let (x, y) = (ctx.input(0)?, ctx.output(0)?);
        let mask = if y.isnan()?.item::<bool>()? {
            x.isnan()?
        } else {
            x.eq(&y)?
        };
        let count = mask.sum()?;
        let share = g.div(&count)?;
        let zero = Tensor::scalar_tensor(crate::Scalar::Int(0), g.dtype());
        Ok(vec![Some(crate::ops::binary::where_(
            &mask,
            Operand::Tensor(&share),
            Operand::Tensor(&zero),
        )?)])
    }
}

/// # Order statistics
///
/// `kthvalue`, `median`, `nanmedian` and `mode`, with PyTorch's choice of
/// index among equal values.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([3.0f32, 1.0, 2.0, 1.0, 5.0])?;
/// let (v, i) = x.kthvalue(2, 0, false)?;
/// assert_eq!(v.item::<f32>()?, 1.0);
/// assert_eq!(x.median()?.item::<f32>()?, 2.0);
/// let (m, j) = x.median_dim(0, false)?;
/// assert_eq!((m.item::<f32>()?, j.item::<i64>()?), (2.0, 2));
/// assert_eq!(x.mode(0, false)?.0.item::<f32>()?, 1.0);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    fn select_dim(&self, kind: SelectKind, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let d = normalize_dim(kind.name(), dim, self.ndim())?;
        call2(&SelectDim { kind, dim: d, keepdim }, &[self])
    }

    /// The `k`-th smallest element (1-based) along `dim` and its index
    /// (`torch.kthvalue`; NaN counts as the largest). Errors when `k` is
    /// not in `1..=size`, the dim is empty, or the input is bool.
    pub fn kthvalue(&self, k: i64, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let k = usize::try_from(k).unwrap_or(0);
        self.select_dim(SelectKind::Kth(k), dim, keepdim)
    }

    /// The lower median of every element (NaN if any element is NaN; NaN,
    /// converted to the dtype, for an empty tensor), as a 0-d tensor.
    pub fn median(&self) -> Result<Tensor> {
        call1(&MedianAll { ignore_nan: false }, &[self])
    }

    /// The lower median along `dim` and its index (the first NaN, if the
    /// line has one).
    pub fn median_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.select_dim(SelectKind::Median, dim, keepdim)
    }

    /// The lower median of the non-NaN elements.
    pub fn nanmedian(&self) -> Result<Tensor> {
        call1(&MedianAll { ignore_nan: true }, &[self])
    }

    /// The lower median of the non-NaN elements along `dim`, and its index.
    pub fn nanmedian_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.select_dim(SelectKind::NanMedian, dim, keepdim)
    }

    /// The most frequent value along `dim` and an index where it occurs
    /// (`torch.mode`: the smallest value among equally frequent ones).
    pub fn mode(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.select_dim(SelectKind::Mode, dim, keepdim)
    }
}
