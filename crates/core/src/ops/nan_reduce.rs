//! Reductions users reach for beside sum and mean: `nansum` and `aminmax`
//! (operators with PyTorch's nodes, written in other operators), and
//! composites with PyTorch's values: `nanmean`, `count_nonzero`,
//! `var_mean` / `std_mean`, and the `dtype` forms of `mean`.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call1, call2, downcast_op};
use crate::layout::{Dims, normalize_dims};
use crate::ops::grad_util::{dims_i64, expand_reduced, grad0, mask};
use crate::ops::reduce::reduced_shape;
use crate::ops::reduce_composite::{CompositeKind, CompositeReduce};
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
/// Dispatch table of `var_mean.correction`.
pub static VAR_MEAN: OpEntry = OpEntry::differentiable("var_mean.correction");
/// Dispatch table of `std_mean.correction`.
pub static STD_MEAN: OpEntry = OpEntry::differentiable("std_mean.correction");

/// `var_mean` / `std_mean`: the variance (or standard deviation) and the
/// mean over `dims` from one pass of Welford's algorithm in f64, visiting
/// the elements in TensorIterator's order, as PyTorch's CPU kernel (so an
/// infinite element gives the NaN mean PyTorch's gives); one node
/// (`VarMeanBackward0` / `StdMeanBackward0`).
#[derive(Debug, Clone)]
pub struct VarMean {
    /// Normalised dims, sorted; `None` for all.
    pub dims: Option<Dims>,
    /// Subtracted from the element count in the divisor.
    pub correction: f64,
    /// Keep reduced dims as size 1.
    pub keepdim: bool,
    /// The standard deviation instead of the variance.
    pub take_sqrt: bool,
}

impl VarMean {
    fn reduced(&self, ndim: usize) -> Vec<usize> {
        match &self.dims {
            None => (0..ndim).collect(),
            Some(d) => d.to_vec(),
        }
    }

    /// The var (or std) composite sharing `dims`, for its backward formula.
    fn as_composite(&self) -> CompositeReduce {
        CompositeReduce {
            kind: CompositeKind::Var {
                correction: self.correction,
            },
            dims: self.dims.clone(),
            keepdim: self.keepdim,
            dtype: None,
        }
    }
}

impl Op for VarMean {
    fn entry(&self) -> &'static OpEntry {
        if self.take_sqrt { &STD_MEAN } else { &VAR_MEAN }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let shape = reduced_shape(x.shape(), self.dims.as_deref(), self.keepdim);
        let spec = OutSpec::new(shape, x.dtype());
        Ok(smallvec::smallvec![spec.clone(), spec])
    }

    fn saves(&self) -> Saves {
        Saves {
            inputs: 1,
            outputs: if self.take_sqrt { 1 } else { 0 },
        }
    }

    fn backward_name(&self) -> String {
        if self.take_sqrt {
            "StdMeanBackward0"
        } else {
            "VarMeanBackward0"
        }
        .into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // PyTorch's var_mean_backward / std_mean_backward: the var (or std)
        // gradient plus the mean's, each when its output has a gradient.
        let x = ctx.input(0)?;
        let mut gself: Option<Tensor> = None;
        if let Some(g) = &grads[0] {
            let gv = if self.take_sqrt {
                let y = ctx.output(0)?;
                g.div(&y.mul(2.0)?)?.masked_fill(&y.eq(0.0)?, 0.0)?
            } else {
                g.clone()
            };
            gself = Some(self.as_composite().var_backward(&gv, &x, self.correction)?);
        }
        if let Some(g) = grads.get(1).and_then(|g| g.as_ref()) {
            let n: usize = self.reduced(x.ndim()).iter().map(|&d| x.shape()[d]).product();
            let gm = expand_reduced(g, x.shape(), self.dims.as_deref(), self.keepdim)?.div(n as f64)?;
            gself = Some(match gself {
                Some(a) => a.add(&gm)?,
                None => gm,
            });
        }
        Ok(vec![gself])
    }
}

/// The order TensorIterator visits the reduced dims of a tensor of
/// `shape` and `strides` in (the first the fastest): its insertion sort by
/// stride, where a broadcast (stride 0) dim compares as a tie.
fn reduce_order(shape: &[usize], strides: &[usize], reduced: &[usize]) -> Vec<usize> {
    let mut perm: Vec<usize> = reduced.iter().rev().copied().collect();
    let should_swap = |d0: usize, d1: usize| -> i32 {
        let (s0, s1) = (strides[d0], strides[d1]);
        if s0 == 0 || s1 == 0 {
            0
        } else if s0 != s1 {
            if s0 < s1 { -1 } else { 1 }
        } else {
            i32::from(shape[d0] > shape[d1])
        }
    };
    for i in 1..perm.len() {
        let mut dim1 = i;
        for dim0 in (0..i).rev() {
            match should_swap(perm[dim0], perm[dim1]) {
                c if c > 0 => {
                    perm.swap(dim0, dim1);
                    dim1 = dim0;
                }
                c if c < 0 => break,
                _ => {}
            }
        }
    }
    perm
}

fn var_mean_kernel(call: &Call) -> Result<Tensors> {
    let op: &VarMean = downcast_op(call.op)?;
    let x = call.inputs[0];
    let shape = x.shape().to_vec();
    let reduced = op.reduced(x.ndim());
    let out_shape = reduced_shape(&shape, op.dims.as_deref(), op.keepdim);
    let n_out: usize = out_shape.iter().product();
    let (mut var, mut mean) = (vec![f64::NAN; n_out], vec![f64::NAN; n_out]);
    if x.numel() > 0 {
        let data = x.to_dtype(DType::F64)?.contiguous()?.to_vec::<f64>()?;
        let mut row_strides = vec![1usize; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            row_strides[d] = row_strides[d + 1] * shape[d + 1];
        }
        let order = reduce_order(&shape, &x.layout().strides, &reduced);
        let kept: Vec<usize> = (0..shape.len()).filter(|d| !reduced.contains(d)).collect();
        let count: usize = reduced.iter().map(|&d| shape[d]).product();
        for (o, (v_out, m_out)) in var.iter_mut().zip(mean.iter_mut()).enumerate() {
            // The first element of output `o` (kept dims in row-major order).
            let (mut rest, mut base) = (o, 0usize);
            for &d in kept.iter().rev() {
                base += (rest % shape[d]) * row_strides[d];
                rest /= shape[d];
            }
            let (mut m, mut m2, mut idx) = (0.0f64, 0.0f64, vec![0usize; order.len()]);
            for k in 0..count {
                let at = base + order.iter().zip(&idx).map(|(&d, &i)| i * row_strides[d]).sum::<usize>();
                let e = data[at];
                let nf = (k + 1) as f64;
                let delta = e - m;
                m += delta / nf;
                m2 += delta * (e - m);
                for (j, &d) in order.iter().enumerate() {
                    idx[j] += 1;
                    if idx[j] < shape[d] {
                        break;
                    }
                    idx[j] = 0;
                }
            }
            let nf = count as f64;
            let divisor = if nf > op.correction { nf - op.correction } else { 0.0 };
            let v = m2 / divisor;
            *v_out = if op.take_sqrt { v.sqrt() } else { v };
            *m_out = m;
        }
    }
    let dt = x.dtype();
    let out = |v: Vec<f64>| -> Result<Tensor> {
        Tensor::from_vec(v, out_shape.as_slice())?
            .to_device(x.device())?
            .to_dtype(dt)
    };
    Ok(smallvec::smallvec![out(var)?, out(mean)?])
}

pub(crate) fn register() -> Result<()> {
    NANSUM.register_builtin(Slot::AnyBackend, Kernel::Functional(nansum_kernel))?;
    AMINMAX.register_builtin(Slot::AnyBackend, Kernel::Functional(aminmax_kernel))?;
    for e in [&VAR_MEAN, &STD_MEAN] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(var_mean_kernel))?;
    }
    Ok(())
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

    /// `torch.nansum(self, dtype=dtype)`: the input cast to `dtype` first,
    /// then summed with NaN as 0.
    pub fn nansum_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.nansum_dim_dtype((), false, dtype)
    }

    /// `torch.nansum(self, dims, keepdim, dtype=dtype)` (`()`: all dims).
    pub fn nansum_dim_dtype(&self, dims: impl IntoShape, keepdim: bool, dtype: DType) -> Result<Tensor> {
        let dims = reduce_dims("nansum", &dims.into_shape(), self.ndim())?;
        call1(
            &NanSum {
                dims: Some(dims),
                keepdim,
                dtype: Some(dtype),
            },
            &[self],
        )
    }

    /// `torch.nanmean(self, dtype=dtype)`: the mean of the non-NaN
    /// elements, summed in `dtype`. Errors (PyTorch's messages) for a
    /// non-float input or a non-float `dtype`.
    pub fn nanmean_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.nanmean_dim_dtype((), false, dtype)
    }

    /// `torch.nanmean(self, dims, keepdim, dtype=dtype)` (`()`: all dims).
    pub fn nanmean_dim_dtype(&self, dims: impl IntoShape, keepdim: bool, dtype: DType) -> Result<Tensor> {
        require_float(
            "nanmean",
            self,
            "nanmean(): expected input to have floating point or complex dtype",
        )?;
        if !dtype.is_floating_point() {
            return Err(Error::dtype(
                "nanmean",
                dtype,
                format!(
                    "nanmean(): could not infer output dtype. Optional dtype must be either a floating point or \
                     complex dtype. Got: {}",
                    dtype.scalar_type_name()
                ),
            ));
        }
        let dims = dims.into_shape().to_vec();
        let count = self.isnan()?.logical_not()?.sum_dim(dims.clone(), keepdim)?;
        self.nansum_dim_dtype(dims, keepdim, dtype)?.div(&count)
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
        self.var_mean_op("var_mean", &dims.into_shape(), correction, keepdim, false)
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
        self.var_mean_op("std_mean", &dims.into_shape(), correction, keepdim, true)
    }

    fn var_mean_op(
        &self,
        name: &'static str,
        dims: &[i64],
        correction: f64,
        keepdim: bool,
        take_sqrt: bool,
    ) -> Result<(Tensor, Tensor)> {
        // An empty list reduces every dim, differentiated as the full
        // reduction (PyTorch's backward treats `dim=[]` as reducing one element).
        let dims = if dims.is_empty() {
            None
        } else {
            let mut d = reduce_dims(name, dims, self.ndim())?;
            d.sort_unstable();
            Some(d)
        };
        let op = VarMean {
            dims,
            correction,
            keepdim,
            take_sqrt,
        };
        call2(&op, &[self])
    }

    /// The mean of every element computed in `dtype` (`x.mean(dtype=...)`:
    /// integer tensors need a float `dtype`).
    pub fn mean_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.mean_with_dtype(None, false, dtype)
    }

    /// The mean over `dims` computed in `dtype` (f16 and bf16: summed in
    /// f32, divided, then rounded once, as PyTorch's CPU `mean`).
    pub fn mean_dim_dtype(&self, dims: impl IntoShape, keepdim: bool, dtype: DType) -> Result<Tensor> {
        self.mean_with_dtype(Some(dims.into_shape().to_vec()), keepdim, dtype)
    }
}
