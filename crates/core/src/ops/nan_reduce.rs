//! Reductions users reach for beside sum and mean: `nansum` and `aminmax`
//! (operators with PyTorch's nodes, written in other operators), and
//! composites with PyTorch's values: `nanmean`, `count_nonzero`,
//! `var_mean` / `std_mean`, and the `dtype` forms of `mean`.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call1, call2, downcast_op};
use crate::layout::{Dims, normalize_dims};
use crate::ops::grad_util::{dims_i64, expand_reduced, grad0, mask};
use crate::ops::reduce::reduced_shape;
use crate::{DType, Error, IntoShape, Result, Tensor};

/// Dispatch table of `nansum`.
pub static NANSUM: OpEntry = OpEntry::differentiable("nansum");

/// `nansum`: the sum with NaNs counted as zero, over `dims` (all when
/// `None`), in `dtype` (default: int64 for integer and bool inputs).
#[derive(Debug, Clone)]
pub struct NanSum {
    /// Normalised dims, or `None` for all.
    pub dims: Option<Dims>,
    /// Keep reduced dims as size 1.
    pub keepdim: bool,
    /// The accumulation and output dtype.
    pub dtype: Option<DType>,
}

impl NanSum {
    fn out_dtype(&self, x: &Tensor) -> DType {
        self.dtype.unwrap_or(if x.dtype().is_integral(true) {
            DType::I64
        } else {
            x.dtype()
        })
    }
}

impl Op for NanSum {
    fn entry(&self) -> &'static OpEntry {
        &NANSUM
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let shape = reduced_shape(x.shape(), self.dims.as_deref(), self.keepdim);
        Ok(smallvec::smallvec![OutSpec::new(shape, self.out_dtype(x))])
    }

    fn saves(&self) -> Saves {
        Saves::inputs(1)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // PyTorch's nansum_backward: the expanded gradient where x is not NaN.
        let g = grad0(grads)?;
        let x = ctx.input(0)?;
        let ge = expand_reduced(&g.to_dtype(x.dtype())?, x.shape(), self.dims.as_deref(), self.keepdim)?;
        Ok(vec![Some(ge.mul(&mask(&x.eq(&x)?, &ge)?)?)])
    }
}

fn nansum_kernel(call: &Call) -> Result<Tensors> {
    let op: &NanSum = downcast_op(call.op)?;
    let x = call.inputs[0];
    let zeroed = if x.is_floating_point() {
        x.masked_fill(&x.isnan()?, 0.0)?
    } else {
        x.clone()
    };
    let dt = op.out_dtype(x);
    let r = match &op.dims {
        None => zeroed.sum_dtype(dt)?,
        Some(d) => zeroed.sum_dim_dtype(dims_i64(Some(d), x.ndim()), op.keepdim, dt)?,
    };
    Ok(smallvec::smallvec![r])
}

/// Dispatch table of `aminmax`.
pub static AMINMAX: OpEntry = OpEntry::differentiable("aminmax");

/// `aminmax`: the minimum and the maximum over one dim (all when `None`),
/// one node (`AminmaxBackward0`) whose gradient is amin's plus amax's.
#[derive(Debug, Clone, Copy)]
pub struct AminMax {
    /// The normalised dim, or `None` for every element.
    pub dim: Option<usize>,
    /// Keep reduced dims as size 1.
    pub keepdim: bool,
}

impl AminMax {
    /// The error of an empty reduction.
    fn check(&self, x: &Tensor) -> Result<()> {
        let dims = self.dims(x.ndim());
        if x.numel() == 0 && (self.dim.is_none() || dims.iter().any(|&d| x.shape()[d] == 0)) {
            return Err(Error::invalid(
                "aminmax",
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.",
            ));
        }
        Ok(())
    }

    fn dims(&self, ndim: usize) -> Dims {
        match self.dim {
            Some(d) if ndim > 0 => Dims::from_slice(&[d]),
            _ => (0..ndim).collect(),
        }
    }
}

impl Op for AminMax {
    fn entry(&self) -> &'static OpEntry {
        &AMINMAX
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let dims = self.dims(x.ndim());
        self.check(x)?;
        let shape = reduced_shape(x.shape(), Some(&dims), self.keepdim);
        Ok(smallvec::smallvec![
            OutSpec::new(shape.clone(), x.dtype()),
            OutSpec::new(shape, x.dtype())
        ])
    }

    fn saves(&self) -> Saves {
        Saves {
            inputs: 1,
            outputs: 0b11,
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // PyTorch's aminmax_backward: each extreme's gradient shared evenly
        // among the elements equal to it.
        let x = ctx.input(0)?;
        let dims = self.dims(x.ndim());
        let mut total: Option<Tensor> = None;
        for (k, g) in grads.iter().enumerate().take(2) {
            let Some(g) = g else { continue };
            let ge = expand_reduced(g, x.shape(), Some(&dims), self.keepdim)?;
            let ye = expand_reduced(&ctx.output(k)?, x.shape(), Some(&dims), self.keepdim)?;
            let m = mask(&ye.eq(&x)?, &ge)?;
            let count = m.sum_dim(dims_i64(Some(&dims), x.ndim()), true)?;
            let part = ge.div(&count)?.mul(&m)?;
            total = Some(match total {
                Some(t) => t.add(&part)?,
                None => part,
            });
        }
        Ok(vec![total])
    }
}

fn aminmax_kernel(call: &Call) -> Result<Tensors> {
    let op: &AminMax = downcast_op(call.op)?;
    let x = call.inputs[0];
    op.check(x)?;
    let dims = dims_i64(Some(&op.dims(x.ndim())), x.ndim());
    Ok(smallvec::smallvec![
        x.amin(dims.clone(), op.keepdim)?,
        x.amax(dims, op.keepdim)?
    ])
}

/// Registers the backend-independent kernels of `nansum` and `aminmax`.
pub(crate) fn register() -> Result<()> {
    NANSUM.register_builtin(Slot::AnyBackend, Kernel::Functional(nansum_kernel))?;
    AMINMAX.register_builtin(Slot::AnyBackend, Kernel::Functional(aminmax_kernel))
}

/// Normalised dims (`()`: all of them).
fn reduce_dims(op: &'static str, dims: &[i64], ndim: usize) -> Result<Dims> {
    if dims.is_empty() {
        return Ok((0..ndim).collect());
    }
    let d = normalize_dims(op, dims, ndim)?;
    Ok(if ndim == 0 { Dims::new() } else { d })
}

fn require_float(op: &'static str, x: &Tensor, detail: &str) -> Result<()> {
    if x.is_floating_point() {
        return Ok(());
    }
    Err(Error::dtype(
        op,
        x.dtype(),
        format!("{detail} but got {}", x.dtype().scalar_type_name()),
    ))
}

/// # NaN-aware and combined reductions
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([[1.0f32, f32::NAN], [3.0, 0.0]])?;
/// assert_eq!(x.nansum()?.item::<f32>()?, 4.0);
/// assert_eq!(x.nanmean_dim(1, false)?.to_vec::<f32>()?, [1.0, 1.5]);
/// assert_eq!(x.count_nonzero()?.item::<i64>()?, 3);
/// let (lo, hi) = Tensor::new([2, 7, -1])?.aminmax(None, false)?;
/// assert_eq!((lo.item::<i32>()?, hi.item::<i32>()?), (-1, 7));
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// The sum of every element, NaN counted as zero (integers sum to int64).
    pub fn nansum(&self) -> Result<Tensor> {
        call1(
            &NanSum {
                dims: None,
                keepdim: false,
                dtype: None,
            },
            &[self],
        )
    }

    /// `nansum` over `dims` (`()`: all).
    pub fn nansum_dim(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let dims = reduce_dims("nansum", &dims.into_shape(), self.ndim())?;
        call1(
            &NanSum {
                dims: Some(dims),
                keepdim,
                dtype: None,
            },
            &[self],
        )
    }

    /// The mean of the non-NaN elements (float tensors; NaN when all are NaN).
    pub fn nanmean(&self) -> Result<Tensor> {
        self.nanmean_dim((), false)
    }

    /// `nanmean` over `dims` (`()`: all): `nansum / count of non-NaN`.
    pub fn nanmean_dim(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        require_float(
            "nanmean",
            self,
            "nanmean(): expected input to have floating point or complex dtype",
        )?;
        let dims = dims.into_shape().to_vec();
        let count = self.isnan()?.logical_not()?.sum_dim(dims.clone(), keepdim)?;
        self.nansum_dim(dims, keepdim)?.div(&count)
    }

    /// How many elements are nonzero, as an int64 0-d tensor.
    pub fn count_nonzero(&self) -> Result<Tensor> {
        self.ne(0)?.sum()
    }

    /// How many elements are nonzero along `dims` (int64).
    pub fn count_nonzero_dim(&self, dims: impl IntoShape) -> Result<Tensor> {
        let dims = reduce_dims("count_nonzero", &dims.into_shape(), self.ndim())?;
        self.ne(0)?.sum_dim(dims_i64(Some(&dims), self.ndim()), false)
    }

    /// `torch.aminmax`: the minimum and the maximum, over everything
    /// (`dim` `None`) or along one dim. Errors on an empty reduction.
    pub fn aminmax(&self, dim: Option<i64>, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let dim = dim
            .map(|d| crate::layout::normalize_dim("aminmax", d, self.ndim()))
            .transpose()?;
        call2(&AminMax { dim, keepdim }, &[self])
    }

    /// `torch.var_mean`: the variance (with `correction`) and the mean of
    /// every element.
    pub fn var_mean(&self, correction: f64) -> Result<(Tensor, Tensor)> {
        self.var_mean_dim((), correction, false)
    }

    /// `torch.var_mean` over `dims` (`()`: all).
    pub fn var_mean_dim(&self, dims: impl IntoShape, correction: f64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        require_float(
            "var_mean",
            self,
            "var_mean only support floating point and complex dtypes",
        )?;
        self.spread_mean(false, dims.into_shape().to_vec(), correction, keepdim)
    }

    /// `torch.std_mean`: the standard deviation (with `correction`) and the
    /// mean of every element.
    pub fn std_mean(&self, correction: f64) -> Result<(Tensor, Tensor)> {
        self.std_mean_dim((), correction, false)
    }

    /// `torch.std_mean` over `dims` (`()`: all).
    pub fn std_mean_dim(&self, dims: impl IntoShape, correction: f64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        require_float(
            "std_mean",
            self,
            "std_mean only support floating point and complex dtypes",
        )?;
        self.spread_mean(true, dims.into_shape().to_vec(), correction, keepdim)
    }

    /// The mean of every element computed in `dtype` (`x.mean(dtype=...)`:
    /// integer tensors need a float `dtype`).
    pub fn mean_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.to_dtype(dtype)?.mean()
    }

    /// The mean over `dims` computed in `dtype`.
    pub fn mean_dim_dtype(&self, dims: impl IntoShape, keepdim: bool, dtype: DType) -> Result<Tensor> {
        self.to_dtype(dtype)?.mean_dim(dims, keepdim)
    }
}
