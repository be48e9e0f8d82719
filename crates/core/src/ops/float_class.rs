//! Float classification (`isnan`, `isinf`, `isposinf`, `isneginf`,
//! `isfinite`: bool results, composites of comparisons as in PyTorch) and
//! `nan_to_num` ([`NanToNum`], differentiable).

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpecs, call_out, call1};
use crate::ops::grad_util::{grad0, mask};
use crate::ops::unary::same_layout_spec;
use crate::{DType, Result, Tensor};

/// Dispatch table of `nan_to_num`.
pub static NAN_TO_NUM: OpEntry = OpEntry::differentiable("nan_to_num");

/// `nan_to_num(x, nan, posinf, neginf)`: NaN, +inf and -inf replaced by the
/// given values (converted to the dtype, as PyTorch's `static_cast`;
/// infinities default to the dtype's largest and lowest finite values).
/// Integer and bool inputs are copied unchanged.
#[derive(Debug, Clone, Copy)]
pub struct NanToNum {
    /// The value for NaN.
    pub nan: f64,
    /// The value for +inf (`None`: the dtype's largest finite value).
    pub posinf: Option<f64>,
    /// The value for -inf (`None`: the dtype's lowest finite value).
    pub neginf: Option<f64>,
}

impl Op for NanToNum {
    fn entry(&self) -> &'static OpEntry {
        &NAN_TO_NUM
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        Ok(smallvec::smallvec![same_layout_spec(x, x.dtype())])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let finite = ctx.input(0)?.isfinite()?;
        Ok(vec![Some(g.mul(&mask(&finite, &g)?)?)])
    }
}

/// The largest finite value of a float dtype (`None` for other dtypes).
pub(crate) fn float_max(dtype: DType) -> Option<f64> {
    match dtype {
        DType::F16 => Some(half::f16::MAX.to_f64()),
        DType::BF16 => Some(half::bf16::MAX.to_f64()),
        DType::F32 => Some(f32::MAX as f64),
        DType::F64 => Some(f64::MAX),
        DType::Bool | DType::U8 | DType::I32 | DType::I64 => None,
    }
}

/// # Float classification
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([1.0f32, f32::NAN, f32::INFINITY, f32::NEG_INFINITY])?;
/// assert_eq!(x.isnan()?.to_vec::<bool>()?, [false, true, false, false]);
/// assert_eq!(x.isfinite()?.to_vec::<bool>()?, [true, false, false, false]);
/// assert_eq!(x.nan_to_num(0.0, Some(9.0), None)?.to_vec::<f32>()?[..3], [1.0, 0.0, 9.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// Where the elements are NaN (all false for integer and bool tensors).
    pub fn isnan(&self) -> Result<Tensor> {
        self.ne(self)
    }

    /// Where the elements are +inf or -inf.
    pub fn isinf(&self) -> Result<Tensor> {
        if !self.is_floating_point() {
            return self.new_zeros(self.shape())?.to_dtype(DType::Bool);
        }
        self.eq(f64::INFINITY)?.logical_or(&self.eq(f64::NEG_INFINITY)?)
    }

    /// Where the elements are +inf.
    pub fn isposinf(&self) -> Result<Tensor> {
        if !self.is_floating_point() {
            return self.new_zeros(self.shape())?.to_dtype(DType::Bool);
        }
        self.eq(f64::INFINITY)
    }

    /// Where the elements are -inf.
    pub fn isneginf(&self) -> Result<Tensor> {
        if !self.is_floating_point() {
            return self.new_zeros(self.shape())?.to_dtype(DType::Bool);
        }
        self.eq(f64::NEG_INFINITY)
    }

    /// Where the elements are finite (neither NaN nor infinite; all true
    /// for integer and bool tensors).
    pub fn isfinite(&self) -> Result<Tensor> {
        if !self.is_floating_point() {
            return self.new_ones(self.shape())?.to_dtype(DType::Bool);
        }
        // x - x is 0 exactly for finite x, NaN otherwise.
        crate::autograd::no_grad(|| self.sub(self)?.eq(0.0))
    }

    /// `torch.nan_to_num(self, nan, posinf, neginf)`: NaN becomes `nan`,
    /// +inf `posinf` and -inf `neginf` (by default the dtype's largest and
    /// lowest finite values). Integer and bool tensors are returned as a copy.
    pub fn nan_to_num(&self, nan: f64, posinf: Option<f64>, neginf: Option<f64>) -> Result<Tensor> {
        call1(&NanToNum { nan, posinf, neginf }, &[self])
    }

    /// In-place [`Tensor::nan_to_num`]; returns `self`.
    pub fn nan_to_num_(&self, nan: f64, posinf: Option<f64>, neginf: Option<f64>) -> Result<Tensor> {
        call_out(&NanToNum { nan, posinf, neginf }, &[self], &[self])?;
        Ok(self.clone())
    }
}
