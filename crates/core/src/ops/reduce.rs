//! Reductions: sum, prod, amax/amin, all/any, max/min with indices,
//! argmax/argmin, cumsum/cumprod, and the front ends of the composites
//! built on them (mean, var/std, logsumexp, norm: `reduce_composite`).

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call, call1};
use crate::layout::{Dims, normalize_dim, normalize_dims};
use crate::ops::grad_util::{dims_i64, expand_reduced, grad0, mask};
use crate::ops::promote::Operand;
use crate::ops::reduce_composite::{CompositeKind, CompositeReduce};
use crate::{DType, Error, IntoShape, Result, Scalar, Tensor, TensorOptions};

/// The reductions with an identity (or none needed) over any set of dims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Maximum (NaN propagates).
    Amax,
    /// Minimum (NaN propagates).
    Amin,
    /// All elements nonzero.
    All,
    /// Any element nonzero.
    Any,
}

/// Dispatch table of `sum.dim_IntList` (optional dims, keepdim, dtype),
/// which also runs the full reduction, PyTorch's `sum`.
pub static SUM: OpEntry = OpEntry::differentiable("sum.dim_IntList");
/// Dispatch table of `prod.dim_int`, which also runs the full reduction,
/// PyTorch's `prod` (dims `None`).
pub static PROD: OpEntry = OpEntry::differentiable("prod.dim_int");
/// Dispatch table of `amax`, which also runs `max()` over everything.
pub static AMAX: OpEntry = OpEntry::differentiable("amax");
/// Dispatch table of `amin`, which also runs `min()` over everything.
pub static AMIN: OpEntry = OpEntry::differentiable("amin");
/// Dispatch table of `all.dims` (optional dims), which also runs PyTorch's
/// `all` and `all.dim`.
pub static ALL: OpEntry = OpEntry::new("all.dims");
/// Dispatch table of `any.dims` (optional dims), which also runs PyTorch's
/// `any` and `any.dim`.
pub static ANY: OpEntry = OpEntry::new("any.dims");

/// A reduction over `dims` (all dims when `None`).
#[derive(Debug, Clone)]
pub struct Reduce {
    /// Which reduction.
    pub kind: ReduceKind,
    /// Normalised dims, or `None` for all.
    pub dims: Option<Dims>,
    /// Keep reduced dims as size 1.
    pub keepdim: bool,
    /// Output dtype for sum/prod (default: i64 for integer inputs, else the input's).
    pub dtype: Option<DType>,
}

/// Output shape of reducing `shape` over `dims` (all when `None`).
pub(crate) fn reduced_shape(shape: &[usize], dims: Option<&[usize]>, keepdim: bool) -> Dims {
    let mut out = Dims::new();
    for (d, &s) in shape.iter().enumerate() {
        let reduced = dims.is_none_or(|ds| ds.contains(&d));
        if !reduced {
            out.push(s);
        } else if keepdim {
            out.push(1);
        }
    }
    out
}

impl Op for Reduce {
    fn entry(&self) -> &'static OpEntry {
        match self.kind {
            ReduceKind::Sum => &SUM,
            ReduceKind::Prod => &PROD,
            ReduceKind::Amax => &AMAX,
            ReduceKind::Amin => &AMIN,
            ReduceKind::All => &ALL,
            ReduceKind::Any => &ANY,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let name = self.entry().base_name();
        let dt = match self.kind {
            ReduceKind::Sum | ReduceKind::Prod => self.dtype.unwrap_or(if x.dtype().is_integral(true) {
                DType::I64
            } else {
                x.dtype()
            }),
            ReduceKind::Amax | ReduceKind::Amin => x.dtype(),
            ReduceKind::All | ReduceKind::Any => DType::Bool,
        };
        if self.dtype.is_some() && x.dtype() != dt {
            return Err(Error::DTypeMismatch {
                op: name,
                detail: format!(
                    "kernel input must already have the output dtype {dt}, got {}",
                    x.dtype()
                ),
            });
        }
        let shape = reduced_shape(x.shape(), self.dims.as_deref(), self.keepdim);
        if matches!(self.kind, ReduceKind::Amax | ReduceKind::Amin) && x.numel() == 0 {
            let empty_reduced = match &self.dims {
                None => true,
                Some(ds) => ds.iter().any(|&d| x.shape()[d] == 0),
            };
            if empty_reduced {
                return Err(Error::invalid(
                    name,
                    "cannot reduce over a zero-size dimension: the operation has no identity",
                ));
            }
        }
        Ok(smallvec::smallvec![OutSpec::new(shape, dt)])
    }

    fn saves(&self) -> Saves {
        match self.kind {
            ReduceKind::Sum => Saves::NONE,
            _ => Saves { inputs: 1, outputs: 1 },
        }
    }

    fn backward_name(&self) -> String {
        let n = match self.kind {
            ReduceKind::Sum => "Sum",
            ReduceKind::Prod => "Prod",
            ReduceKind::Amax => "Amax",
            ReduceKind::Amin => "Amin",
            ReduceKind::All => "All",
            ReduceKind::Any => "Any",
        };
        let v = match (self.kind, &self.dims) {
            // `max()` / `min()` over everything: PyTorch's MaxBackward1 / MinBackward1.
            (ReduceKind::Amax, None) => return "MaxBackward1".into(),
            (ReduceKind::Amin, None) => return "MinBackward1".into(),
            (ReduceKind::Amax | ReduceKind::Amin, _) | (_, None) => 0,
            _ => 1,
        };
        format!("{n}Backward{v}")
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let shape = ctx.input_shape(0).to_vec();
        let dims = self.dims.as_deref();
        let ge = expand_reduced(&g, &shape, dims, self.keepdim)?;
        let r = match self.kind {
            ReduceKind::Sum => ge.to_dtype(ctx.meta(0).dtype)?,
            ReduceKind::Amax | ReduceKind::Amin if dims.is_none() => {
                // PyTorch's evenly_distribute_backward (max() / min()): the
                // gradient shared among the elements equal to the result, or
                // among the NaNs when the result is NaN; zeros elsewhere.
                let (x, y) = (ctx.input(0)?, ctx.output(0)?);
                let picked = if y.isnan()?.item::<bool>()? {
                    x.isnan()?
                } else {
                    x.eq(&y)?
                };
                let share = g.div(&picked.sum()?)?;
                crate::ops::binary::where_(&picked, Operand::Tensor(&share), Operand::Scalar(Scalar::Int(0)))?
            }
            ReduceKind::Amax | ReduceKind::Amin => {
                // The gradient is shared evenly among tied extrema.
                let (x, y) = (ctx.input(0)?, ctx.output(0)?);
                let ye = expand_reduced(&y, &shape, dims, self.keepdim)?;
                let m = mask(&x.eq(&ye)?, &g)?;
                let count = expand_reduced(
                    &m.sum_dim(dims_i64(dims, shape.len()), self.keepdim)?,
                    &shape,
                    dims,
                    self.keepdim,
                )?;
                ge.mul(&m)?.div(&count)?
            }
            ReduceKind::Prod => {
                let (x, y) = (ctx.input(0)?, ctx.output(0)?);
                let ye = expand_reduced(&y, &shape, dims, self.keepdim)?;
                prod_backward(&ge, &x, &ye, dims)?
            }
            ReduceKind::All | ReduceKind::Any => {
                return Err(Error::invalid(self.entry().base_name(), "is not differentiable"));
            }
        };
        Ok(vec![Some(r)])
    }
}

/// Normalises optional dims (an empty list means all dims, as in PyTorch).
fn norm_dims(op: &'static str, dims: Option<Vec<i64>>, ndim: usize) -> Result<Option<Dims>> {
    match dims {
        None => Ok(None),
        // An explicit empty list reduces every dim, as the list form
        // (`sum.dim_IntList`, node `SumBackward1`).
        Some(d) if d.is_empty() => Ok(Some((0..ndim).collect())),
        Some(d) => {
            let nd = normalize_dims(op, &d, ndim)?;
            Ok(if ndim == 0 { Some(Dims::new()) } else { Some(nd) })
        }
    }
}

fn reduce(x: &Tensor, kind: ReduceKind, dims: Option<Vec<i64>>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
    let op = Reduce {
        kind,
        dims: None,
        keepdim,
        dtype,
    };
    let dims = norm_dims(op.entry().base_name(), dims, x.ndim())?;
    if let Some(d) = dtype
        && !d.is_floating_point()
        && x.requires_grad()
        && crate::autograd::is_grad_enabled()
    {
        // As PyTorch: the result would be an integer tensor with a history.
        return Err(crate::autograd::graph::autograd_dtype_error(op.entry().base_name(), d));
    }
    let x = match dtype {
        Some(d) => x.to_dtype(d)?,
        None => x.clone(),
    };
    let r = call1(&Reduce { dims, ..op }, &[&x])?;
    if matches!(kind, ReduceKind::All | ReduceKind::Any) && x.dtype() == DType::U8 {
        // PyTorch keeps uint8 for all/any of a uint8 tensor (legacy behaviour).
        return r.to_dtype(DType::U8);
    }
    Ok(r)
}

/// Dispatch table of `max.dim`.
pub static MAX_DIM: OpEntry = OpEntry::differentiable("max.dim");
/// Dispatch table of `min.dim`.
pub static MIN_DIM: OpEntry = OpEntry::differentiable("min.dim");
/// Dispatch table of `argmax`.
pub static ARGMAX: OpEntry = OpEntry::new("argmax");
/// Dispatch table of `argmin`.
pub static ARGMIN: OpEntry = OpEntry::new("argmin");

/// Max/min along one dim with the index where it occurs (the first one on
/// ties; a NaN counts as the maximum and the minimum).
#[derive(Debug, Clone)]
pub struct IndexReduce {
    /// True for max, false for min.
    pub max: bool,
    /// Return the values too (`max(dim)`) or only the indices (`argmax`).
    pub with_values: bool,
    /// The dim, or `None` for the flattened tensor (argmax only).
    pub dim: Option<usize>,
    /// Keep the dim as size 1.
    pub keepdim: bool,
}

impl Op for IndexReduce {
    fn entry(&self) -> &'static OpEntry {
        match (self.max, self.with_values) {
            (true, true) => &MAX_DIM,
            (false, true) => &MIN_DIM,
            (true, false) => &ARGMAX,
            (false, false) => &ARGMIN,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let name = self.entry().base_name();
        if x.dtype() == DType::Bool && !self.with_values {
            return Err(Error::dtype(name, x.dtype(), "not implemented for bool"));
        }
        let shape = match self.dim {
            // A 0-d tensor: its one element, index 0.
            Some(_) if x.ndim() == 0 => Dims::new(),
            Some(d) => {
                if x.shape()[d] == 0 {
                    return Err(Error::invalid(
                        name,
                        format!("expected reduction dim {d} to have non-zero size"),
                    ));
                }
                reduced_shape(x.shape(), Some(&[d]), self.keepdim)
            }
            None => {
                if x.numel() == 0 {
                    return Err(Error::invalid(name, "expected a non-empty tensor"));
                }
                reduced_shape(x.shape(), None, self.keepdim)
            }
        };
        let mut specs: OutSpecs = smallvec::smallvec![];
        if self.with_values {
            specs.push(OutSpec::new(shape.clone(), x.dtype()));
        }
        specs.push(OutSpec::new(shape, DType::I64));
        Ok(specs)
    }

    fn saves(&self) -> Saves {
        Saves {
            inputs: 0,
            outputs: 0b10,
        }
    }

    fn backward_name(&self) -> String {
        if self.max {
            "MaxBackward0".into()
        } else {
            "MinBackward0".into()
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = grads.first().cloned().flatten() else {
            return Ok(vec![None]);
        };
        let d = self.dim.expect("max/min with values always have a dim");
        if ctx.input_shape(0).is_empty() {
            // A 0-d input is its own maximum.
            return Ok(vec![Some(g)]);
        }
        let idx = ctx.output(1)?;
        let (g, idx) = if self.keepdim {
            (g, idx)
        } else {
            (g.unsqueeze(d as i64)?, idx.unsqueeze(d as i64)?)
        };
        let zeros = crate::TensorOptions::like(&g).zeros(ctx.input_shape(0))?;
        Ok(vec![Some(zeros.scatter(d as i64, &idx, &g)?)])
    }
}

/// Dispatch table of `cumsum`.
pub static CUMSUM: OpEntry = OpEntry::differentiable("cumsum");
/// Dispatch table of `cumprod`.
pub static CUMPROD: OpEntry = OpEntry::differentiable("cumprod");

/// Running sum or product along one dim (floats accumulate in f64, as PyTorch's CPU kernel).
#[derive(Debug, Clone)]
pub struct Scan {
    /// True for cumprod, false for cumsum.
    pub prod: bool,
    /// The normalised dim.
    pub dim: usize,
    /// The accumulation and output dtype when given (`dtype=`); else int64
    /// for integer and bool inputs and the input's for floats.
    pub dtype: Option<DType>,
}

impl Op for Scan {
    fn entry(&self) -> &'static OpEntry {
        if self.prod { &CUMPROD } else { &CUMSUM }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let dt = self.dtype.unwrap_or(if x.dtype().is_integral(true) {
            DType::I64
        } else {
            x.dtype()
        });
        // With `dtype=` the kernel casts the input (as PyTorch's, so the node
        // sees the input's dtype); otherwise it must already be `dt`.
        if x.dtype() != dt && self.dtype.is_none() {
            return Err(Error::DTypeMismatch {
                op: self.entry().base_name(),
                detail: format!("kernel input must already be {dt}"),
            });
        }
        Ok(smallvec::smallvec![OutSpec::new(x.dims(), dt)])
    }

    fn saves(&self) -> Saves {
        if self.prod {
            Saves { inputs: 1, outputs: 1 }
        } else {
            Saves::NONE
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // PyTorch's formulas take the gradient in the input's dtype first
        // (`grad.to(self.scalar_type())`), whatever `dtype=` computed in.
        let g = grad0(grads)?.to_dtype(ctx.meta(0).dtype)?;
        let d = self.dim as i64;
        // sum_{j >= i} v_j: the reversed cumulative sum, PyTorch's
        // `flip(cumsum(flip))` (no subtraction: infinities stay).
        let rev_cumsum = |v: &Tensor| -> Result<Tensor> { v.flip(d)?.cumsum(d)?.flip(d) };
        // PyTorch's cumsum_backward / cumprod_backward return the gradient
        // itself for one element or a dim of size 1.
        if g.numel() <= 1 || g.shape().get(self.dim).copied().unwrap_or(1) == 1 {
            return Ok(vec![Some(g)]);
        }
        let r = if self.prod {
            // d y_j / d x_i = y_j / x_i for j >= i.
            let (x, y) = (ctx.input(0)?, ctx.output(0)?);
            let zero = x.eq(0.0)?;
            if !zero.any()?.item::<bool>()? {
                rev_cumsum(&y.mul(&g)?)?.div(&x)?
            } else if !crate::autograd::is_grad_enabled() {
                // PyTorch's first-order formula with zeros, step for step:
                // before the first zero z1 the masked reversed cumsum over x;
                // at z1 the products after it (up to the second zero) times
                // the output just before it (in the output's dtype).
                let w = y.mul(&g)?;
                let seen = zero.to_dtype(crate::DType::I64)?.cumsum(d)?;
                let before = seen.eq(0)?;
                let part = rev_cumsum(&w.masked_fill(&before.logical_not()?, 0.0)?)?.div(&x)?;
                let zeros = TensorOptions::like(&g).zeros(g.shape())?;
                let grad_in = crate::ops::binary::where_(&before, Operand::Tensor(&part), Operand::Tensor(&zeros))?;
                let run = seen.eq(1)?;
                let first = run.max_dim(d, true)?.1;
                let first_mask = run.logical_and(
                    &TensorOptions::like(&run)
                        .zeros(run.shape())?
                        .scatter_value(d, &first, true)?,
                )?;
                let inside = run.logical_and(&first_mask.logical_not()?)?;
                let prefix = y
                    .gather(d, &first.sub(1)?.clamp_min(0)?)?
                    .masked_fill(&first.eq(0)?, 1.0)?;
                let at_first = x
                    .masked_fill(&inside.logical_not()?, 1.0)?
                    .cumprod(d)?
                    .mul(&g.masked_fill(&seen.ne(1)?, 0.0)?)?
                    .sum_dim(d, true)?
                    .mul(&prefix)?;
                crate::ops::binary::where_(&first_mask, Operand::Tensor(&at_first), Operand::Tensor(&grad_in))?
            } else {
                // With zeros. At a nonzero x_j the formula above holds (its
                // value past the line's first zero z1 is 0, its derivative is
                // not). At z1 the derivative is sum_{k >= z1} g_k *
                // prod_{i <= k, i != z1} x_i: the cumprod with x_z1 set to 1.
                // At the second zero z2 it is x_z1 times the same with x_z1
                // and x_z2 set to 1 (0, with the right derivative in x_z1);
                // past that, 0 to second order.
                let seen = zero.to_dtype(crate::DType::I64)?.cumsum(d)?;
                let first = zero.logical_and(&seen.eq(1)?)?;
                let second = zero.logical_and(&seen.eq(2)?)?;
                let x_safe = x.masked_fill(&zero, 1.0)?;
                let nonzero_part = rev_cumsum(&g.mul(&y)?)?.div(&x_safe)?.masked_fill(&zero, 0.0)?;
                let x1 = x.masked_fill(&first, 1.0)?;
                let at_first = rev_cumsum(&g.mul(&x1.cumprod(d)?)?)?.masked_fill(&first.logical_not()?, 0.0)?;
                let x12 = x1.masked_fill(&second, 1.0)?;
                let x_z1 = x.masked_fill(&first.logical_not()?, 0.0)?.sum_dim(d, true)?;
                let at_second = rev_cumsum(&g.mul(&x12.cumprod(d)?)?)?
                    .mul(&x_z1)?
                    .masked_fill(&second.logical_not()?, 0.0)?;
                nonzero_part.add(&at_first)?.add(&at_second)?
            }
        } else {
            rev_cumsum(&g)?
        };
        Ok(vec![Some(r)])
    }
}

fn float_input(op: &'static str, x: &Tensor) -> Result<()> {
    if x.dtype().is_floating_point() {
        Ok(())
    } else {
        Err(Error::dtype(
            op,
            x.dtype(),
            "could not infer output dtype: input dtype must be floating point",
        ))
    }
}

/// # Reductions
///
/// Over all elements or over some dims (`keepdim` as PyTorch's).
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([[1.0f32, 5.0], [3.0, 2.0]])?;
/// assert_eq!(x.sum()?.item::<f32>()?, 11.0);
/// assert_eq!(x.sum_dim(0, false)?.to_vec::<f32>()?, [4.0, 7.0]);
/// assert_eq!(x.mean_dim(-1, true)?.shape(), [2, 1]);
/// let (values, indices) = x.max_dim(1, false)?;
/// assert_eq!((values.to_vec::<f32>()?, indices.to_vec::<i64>()?), (vec![5.0, 3.0], vec![1, 0]));
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// Sum of all elements (integers sum to i64).
    pub fn sum(&self) -> Result<Tensor> {
        reduce(self, ReduceKind::Sum, None, false, None)
    }

    /// Sum over `dims`.
    pub fn sum_dim(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        reduce(self, ReduceKind::Sum, Some(dims.into_shape().to_vec()), keepdim, None)
    }

    /// Sum of all elements computed in `dtype` (`x.sum(dtype=...)`).
    pub fn sum_dtype(&self, dtype: DType) -> Result<Tensor> {
        reduce(self, ReduceKind::Sum, None, false, Some(dtype))
    }

    /// Sum over `dims` computed in `dtype` (`x.sum(dims, keepdim, dtype=...)`).
    pub fn sum_dim_dtype(&self, dims: impl IntoShape, keepdim: bool, dtype: DType) -> Result<Tensor> {
        reduce(
            self,
            ReduceKind::Sum,
            Some(dims.into_shape().to_vec()),
            keepdim,
            Some(dtype),
        )
    }

    /// Product of all elements.
    pub fn prod(&self) -> Result<Tensor> {
        reduce(self, ReduceKind::Prod, None, false, None)
    }

    /// Product over `dims`.
    pub fn prod_dim(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        reduce(self, ReduceKind::Prod, Some(dims.into_shape().to_vec()), keepdim, None)
    }

    /// Maximum over `dims` (the gradient is shared among ties).
    pub fn amax(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        reduce(
            self,
            ReduceKind::Amax,
            Some(self.all_if_empty(dims.into_shape().to_vec())),
            keepdim,
            None,
        )
    }

    /// Minimum over `dims`.
    pub fn amin(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        reduce(
            self,
            ReduceKind::Amin,
            Some(self.all_if_empty(dims.into_shape().to_vec())),
            keepdim,
            None,
        )
    }

    /// The largest element (`torch.max(x)`).
    pub fn max(&self) -> Result<Tensor> {
        reduce(self, ReduceKind::Amax, None, false, None)
    }

    /// The smallest element (`torch.min(x)`).
    pub fn min(&self) -> Result<Tensor> {
        reduce(self, ReduceKind::Amin, None, false, None)
    }

    /// Whether every element is nonzero (bool; uint8 for a uint8 input, as PyTorch).
    pub fn all(&self) -> Result<Tensor> {
        reduce(self, ReduceKind::All, None, false, None)
    }

    /// `all` over `dims`.
    /// An empty list of dims reduces nothing (PyTorch: `all(x, dim=())` is
    /// `x != 0` elementwise, unlike `sum(x, dim=())`).
    pub fn all_dim(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let dims = dims.into_shape().to_vec();
        if dims.is_empty() {
            return self.truthiness();
        }
        reduce(self, ReduceKind::All, Some(dims), keepdim, None)
    }

    /// Every dim for an empty list: `amax(())` names its dims, so that a
    /// `Reduce` over `None` dims is `max()` (MaxBackward1, not AmaxBackward0).
    fn all_if_empty(&self, dims: Vec<i64>) -> Vec<i64> {
        if dims.is_empty() {
            (0..self.ndim() as i64).collect()
        } else {
            dims
        }
    }

    /// `x != 0` as bool (uint8 for a uint8 input, as `all`/`any` return).
    fn truthiness(&self) -> Result<Tensor> {
        let t = self.ne(0)?;
        if self.dtype() == DType::U8 {
            t.to_dtype(DType::U8)
        } else {
            Ok(t)
        }
    }

    /// Whether some element is nonzero (bool; uint8 for a uint8 input, as PyTorch).
    pub fn any(&self) -> Result<Tensor> {
        reduce(self, ReduceKind::Any, None, false, None)
    }

    /// `any` over `dims`.
    /// An empty list of dims reduces nothing, as for [`Tensor::all_dim`].
    pub fn any_dim(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let dims = dims.into_shape().to_vec();
        if dims.is_empty() {
            return self.truthiness();
        }
        reduce(self, ReduceKind::Any, Some(dims), keepdim, None)
    }

    fn index_reduce(&self, max: bool, with_values: bool, dim: Option<i64>, keepdim: bool) -> Result<Vec<Tensor>> {
        let op = IndexReduce {
            max,
            with_values,
            dim: None,
            keepdim,
        };
        let dim = match dim {
            Some(d) => {
                let nd = normalize_dim(op.entry().base_name(), d, self.ndim())?;
                // argmax/argmin of a 0-d tensor: index 0, below; max/min
                // of one run the operator (node MaxBackward0, as PyTorch).
                Some(if self.ndim() == 0 && !with_values {
                    usize::MAX
                } else {
                    nd
                })
            }
            None => None,
        };
        if dim == Some(usize::MAX) {
            if self.dtype() == DType::Bool && !with_values {
                return Err(Error::dtype(
                    op.entry().base_name(),
                    DType::Bool,
                    "not implemented for bool",
                ));
            }
            // 0-d: index 0.
            let idx = Tensor::scalar_tensor(Scalar::Int(0), DType::I64).to_device(self.device())?;
            return Ok(vec![idx]);
        }
        Ok(call(&IndexReduce { dim, ..op }, &[self])?.into_vec())
    }

    /// Maximum along `dim` and its index (`torch.max(x, dim)`); the first
    /// index on ties.
    pub fn max_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let mut v = self.index_reduce(true, true, Some(dim), keepdim)?.into_iter();
        match (v.next(), v.next()) {
            (Some(values), Some(indices)) => Ok((values, indices)),
            _ => Err(Error::invalid("max", "operator returned fewer than two outputs")),
        }
    }

    /// Minimum along `dim` and its index.
    pub fn min_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let mut v = self.index_reduce(false, true, Some(dim), keepdim)?.into_iter();
        match (v.next(), v.next()) {
            (Some(values), Some(indices)) => Ok((values, indices)),
            _ => Err(Error::invalid("min", "operator returned fewer than two outputs")),
        }
    }

    /// Index of the maximum along `dim`, or in the flattened tensor when `None`.
    pub fn argmax(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        Ok(self.index_reduce(true, false, dim, keepdim)?.remove(0))
    }

    /// Index of the minimum along `dim`, or in the flattened tensor when `None`.
    pub fn argmin(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        Ok(self.index_reduce(false, false, dim, keepdim)?.remove(0))
    }

    /// Running sum along `dim` (integers accumulate in i64).
    pub fn cumsum(&self, dim: i64) -> Result<Tensor> {
        self.scan(false, dim)
    }

    /// Running product along `dim`.
    pub fn cumprod(&self, dim: i64) -> Result<Tensor> {
        self.scan(true, dim)
    }

    fn scan(&self, prod: bool, dim: i64) -> Result<Tensor> {
        self.scan_dtype(prod, dim, None)
    }

    /// cumsum / cumprod along `dim`, in `dtype` when given.
    pub(crate) fn scan_dtype(&self, prod: bool, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        let name = if prod { "cumprod" } else { "cumsum" };
        let d = normalize_dim(name, dim, self.ndim())?;
        let target = dtype.unwrap_or(if self.dtype().is_integral(true) {
            DType::I64
        } else {
            self.dtype()
        });
        if let Some(dt) = dtype {
            // PyTorch fills a 0-d result and zeroes an empty one before its
            // dtype dispatch (which has no bool scan).
            if dt == DType::Bool && self.ndim() > 0 && self.numel() > 0 {
                return Err(Error::dtype(
                    name,
                    dt,
                    format!("\"{name}_out_cpu\" not implemented for 'Bool'"),
                ));
            }
            if !dt.is_floating_point() && self.requires_grad() && crate::autograd::is_grad_enabled() {
                // As PyTorch: the result would be an integer tensor with a history.
                return Err(crate::autograd::graph::autograd_dtype_error(name, dt));
            }
            // The kernel casts: one node (CumsumBackward0) whose input is `self`.
            return call1(&Scan { prod, dim: d, dtype }, &[self]);
        }
        let x = self.to_dtype(target)?;
        call1(&Scan { prod, dim: d, dtype }, &[&x])
    }

    /// Product over `dim` computed in `dtype` (`x.prod(dim, dtype=...)`;
    /// an integer `dtype` keeps that integer type).
    pub fn prod_dim_dtype(&self, dim: i64, keepdim: bool, dtype: DType) -> Result<Tensor> {
        reduce(self, ReduceKind::Prod, Some(vec![dim]), keepdim, Some(dtype))
    }

    /// Product of every element computed in `dtype` (`x.prod(dtype=...)`).
    pub fn prod_dtype(&self, dtype: DType) -> Result<Tensor> {
        reduce(self, ReduceKind::Prod, None, false, Some(dtype))
    }

    /// Mean of all elements (floating point only).
    pub fn mean(&self) -> Result<Tensor> {
        self.composite("mean", CompositeKind::Mean, None, false)
    }

    /// Mean over `dims`.
    pub fn mean_dim(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        self.composite("mean", CompositeKind::Mean, Some(dims.into_shape().to_vec()), keepdim)
    }

    /// Variance of all elements with Bessel's `correction` (1 = unbiased).
    pub fn var(&self, correction: f64) -> Result<Tensor> {
        self.composite("var", CompositeKind::Var { correction }, None, false)
    }

    /// Variance over `dims` (`()` reduces every dim, as PyTorch's `dim=[]`)
    /// with `correction`. f16/bf16 inputs are computed in f32, as PyTorch does.
    pub fn var_dim(&self, dims: impl IntoShape, correction: f64, keepdim: bool) -> Result<Tensor> {
        let dims = Some(dims.into_shape().to_vec());
        self.composite("var", CompositeKind::Var { correction }, dims, keepdim)
    }

    /// Standard deviation of all elements with `correction`.
    pub fn std(&self, correction: f64) -> Result<Tensor> {
        self.composite("std", CompositeKind::Std { correction }, None, false)
    }

    /// Standard deviation over `dims` (`()` reduces every dim) with `correction`.
    pub fn std_dim(&self, dims: impl IntoShape, correction: f64, keepdim: bool) -> Result<Tensor> {
        let dims = Some(dims.into_shape().to_vec());
        self.composite("std", CompositeKind::Std { correction }, dims, keepdim)
    }

    /// `log(sum(exp(x)))` over `dims`, computed stably (integer inputs in
    /// the default float dtype).
    pub fn logsumexp(&self, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let x = if self.is_floating_point() {
            self.clone()
        } else {
            self.to_dtype(crate::default_dtype())?
        };
        // An empty list reduces every dim (as PyTorch's keepdim form does;
        // without keepdim PyTorch 2.15 fails on its own output shape).
        x.composite(
            "logsumexp",
            CompositeKind::LogSumExp,
            Some(dims.into_shape().to_vec()),
            keepdim,
        )
    }

    /// The `p`-norm of all elements (`p` = 2 is the Euclidean norm; inf and
    /// -inf give max/min of |x|; 0 counts nonzeros).
    pub fn norm(&self, p: f64) -> Result<Tensor> {
        self.composite("norm", CompositeKind::Norm { p }, None, false)
    }

    /// The `p`-norm over `dims` (`()` reduces every dim), PyTorch's
    /// `linalg.vector_norm`.
    pub fn norm_dim(&self, p: f64, dims: impl IntoShape, keepdim: bool) -> Result<Tensor> {
        let dims = Some(dims.into_shape().to_vec());
        self.composite("norm", CompositeKind::Norm { p }, dims, keepdim)
    }

    /// Runs a composite reduction over normalised `dims` of a float tensor.
    fn composite(
        &self,
        name: &'static str,
        kind: CompositeKind,
        dims: Option<Vec<i64>>,
        keepdim: bool,
    ) -> Result<Tensor> {
        float_input(name, self)?;
        let dims = norm_dims(name, dims, self.ndim())?.map(|mut d| {
            d.sort_unstable();
            d
        });
        call1(
            &CompositeReduce {
                kind,
                dims,
                keepdim,
                dtype: None,
            },
            &[self],
        )
    }

    /// `mean(dims, keepdim, dtype=dtype)`: one node (`MeanBackward0/1`)
    /// reading the input as `dtype` (integer dtypes are PyTorch's error).
    pub(crate) fn mean_with_dtype(&self, dims: Option<Vec<i64>>, keepdim: bool, dtype: DType) -> Result<Tensor> {
        if !dtype.is_floating_point() {
            // PyTorch's error for an integer dtype (that of an integer mean).
            return self
                .to_dtype(dtype)?
                .composite("mean", CompositeKind::Mean, dims, keepdim);
        }
        let dims = norm_dims("mean", dims, self.ndim())?.map(|mut d| {
            d.sort_unstable();
            d
        });
        let op = CompositeReduce {
            kind: CompositeKind::Mean,
            dims,
            keepdim,
            dtype: Some(dtype),
        };
        call1(&op, &[self])
    }
}

/// PyTorch's `prod_backward`: without a zero in the whole input,
/// `grad * (result / input)`; with zeros, the product of the others as
/// exclusive cumulative products from both ends (`prod_safe_zeros_backward`),
/// or, for a full reduction with several zeros outside `create_graph`,
/// zeros. `ge` and `ye` are the gradient and the result expanded to the
/// input; `dims` the reduced dims (`None`: all).
fn prod_backward(ge: &Tensor, x: &Tensor, ye: &Tensor, dims: Option<&[usize]>) -> Result<Tensor> {
    if x.ndim() == 0 {
        return Ok(ge.clone());
    }
    let zeros = x.eq(0.0)?.sum()?.item::<i64>()?;
    if zeros == 0 {
        return ge.mul(&ye.div(x)?);
    }
    let full = dims.is_none_or(|d| d.len() == x.ndim());
    if full && zeros > 1 && !crate::autograd::is_grad_enabled() {
        return x.zeros_like();
    }
    // The reduced dims moved last and flattened into one (PyTorch's prod
    // reduces one dim or all).
    let nd = x.ndim();
    let reduced: Vec<usize> = match dims {
        Some(d) => d.to_vec(),
        None => (0..nd).collect(),
    };
    let kept: Vec<usize> = (0..nd).filter(|d| !reduced.contains(d)).collect();
    let perm: Vec<i64> = kept.iter().chain(&reduced).map(|&d| d as i64).collect();
    let mut flat: Vec<i64> = kept.iter().map(|&d| x.shape()[d] as i64).collect();
    flat.push(-1);
    let xp = x.permute(&perm)?.reshape(&flat)?;
    let gp = ge.permute(&perm)?.reshape(&flat)?;
    let d = prod_safe_zeros_backward(&gp, &xp)?;
    let permuted: Vec<i64> = perm.iter().map(|&p| x.shape()[p as usize] as i64).collect();
    let mut inverse = vec![0i64; nd];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p as usize] = i as i64;
    }
    d.reshape(&permuted)?.permute(&inverse)
}

/// `grad * (exclusive cumprod from the start * exclusive cumprod from the
/// end)` along the last dim (PyTorch's `prod_safe_zeros_backward`).
fn prod_safe_zeros_backward(grad: &Tensor, x: &Tensor) -> Result<Tensor> {
    if x.numel() == 0 {
        return Ok(grad.clone());
    }
    let last = x.ndim() as i64 - 1;
    let n = x.shape()[x.ndim() - 1] as i64;
    let mut ones_shape: Vec<usize> = x.shape().to_vec();
    *ones_shape.last_mut().expect("at least one dim") = 1;
    let ones = crate::TensorOptions::like(x).ones(&ones_shape[..])?;
    let normal = Tensor::cat(&[&ones, &x.narrow(last, 0, n - 1)?], last)?.cumprod(last)?;
    let reverse = Tensor::cat(&[&ones, &x.narrow(last, 1, n - 1)?.flip([last])?], last)?
        .cumprod(last)?
        .flip([last])?;
    grad.mul(&normal.mul(&reverse)?)
}
