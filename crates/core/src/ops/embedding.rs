//! `embedding` (`EmbeddingBackward0`; a CPU kernel copying rows, indices
//! checked with PyTorch's "index out of range in self") and
//! `embedding_renorm_` (rows of the weight that an index names rescaled in
//! place to a maximum norm, as PyTorch's).
//!
//! The derivative is PyTorch's `embedding_dense_backward` written in
//! operators: the output's gradient rows, divided by their index's count
//! with `scale_grad_by_freq`, zeroed for `padding_idx`, summed into the
//! weight's rows by `index_add` (whose kernel sums each row in index
//! order, the same for any thread count); so it has higher derivatives.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call_out, call1, downcast_op};
use crate::layout::Dims;
use crate::ops::grad_util::grad0;
use crate::{DType, Error, Result, Tensor, TensorOptions};

/// Dispatch table of `embedding`.
pub static EMBEDDING: OpEntry = OpEntry::differentiable("embedding");
/// Dispatch table of `embedding_renorm_`.
pub static EMBEDDING_RENORM: OpEntry = OpEntry::new("embedding_renorm_");

/// `weight[indices]`: inputs `[weight [V, D], indices (int64 or int32)]`,
/// output `[*indices.shape, D]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Embedding {
    /// The row that gets no gradient (normalised to `0..V`).
    pub padding_idx: Option<usize>,
    /// Divide each row's gradient by how often its index occurs.
    pub scale_grad_by_freq: bool,
}

fn check_args(name: &'static str, weight: &Tensor, indices: &Tensor) -> Result<()> {
    if weight.ndim() != 2 {
        return Err(Error::invalid(name, "'weight' must be 2-D"));
    }
    if !matches!(indices.dtype(), DType::I64 | DType::I32) {
        return Err(Error::dtype(
            name,
            indices.dtype(),
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int",
        ));
    }
    Ok(())
}

impl Op for Embedding {
    fn entry(&self) -> &'static OpEntry {
        &EMBEDDING
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (w, idx) = (inputs[0], inputs[1]);
        check_args("embedding", w, idx)?;
        let mut shape: Dims = idx.dims();
        shape.push(w.shape()[1]);
        Ok(smallvec::smallvec![OutSpec::new(shape, w.dtype())])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        i == 0
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b10)
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let indices = ctx.input(1)?;
        let (v, d) = (ctx.input_shape(0)[0], ctx.input_shape(0)[1]);
        let idx = indices.reshape([-1])?.to_dtype(DType::I64)?;
        let mut g2 = g.reshape([idx.numel() as i64, d as i64])?;
        if self.scale_grad_by_freq {
            let counts = idx.bincount(None, v)?.index_select(0, &idx)?.to_dtype(g.dtype())?;
            g2 = g2.div(&counts.unsqueeze(1)?)?;
        }
        if let Some(p) = self.padding_idx {
            g2 = g2.masked_fill(&idx.eq(p as i64)?.unsqueeze(1)?, 0.0)?;
        }
        let zeros = TensorOptions::like(&g).zeros([v, d])?;
        Ok(vec![Some(zeros.index_add(0, &idx, &g2, 1)?), None])
    }
}

/// Rescales in place the rows of `weight` that `indices` names whose
/// `norm_type`-norm exceeds `max_norm` (to `max_norm / (norm + 1e-7)`
/// times themselves): inputs `[weight, indices]`, output `weight`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmbeddingRenorm {
    /// The largest norm a row keeps.
    pub max_norm: f64,
    /// The `p` of the norm.
    pub norm_type: f64,
}

impl Op for EmbeddingRenorm {
    fn entry(&self) -> &'static OpEntry {
        &EMBEDDING_RENORM
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (w, idx) = (inputs[0], inputs[1]);
        check_args("embedding_renorm_", w, idx)?;
        if !w.dtype().is_floating_point() {
            return Err(Error::dtype(
                "embedding_renorm_",
                w.dtype(),
                "expects a floating-point weight",
            ));
        }
        Ok(smallvec::smallvec![OutSpec::new(w.dims(), w.dtype())])
    }

    fn alias_safe(&self) -> bool {
        true
    }
}

/// The indices as int64, each checked against `rows` (PyTorch's "index out
/// of range in self").
pub(crate) fn checked_indices(name: &'static str, indices: &Tensor, rows: usize) -> Result<Vec<i64>> {
    let v = indices.to_dtype(DType::I64)?.contiguous()?.to_vec::<i64>()?;
    if let Some(bad) = v.iter().find(|&&i| !(0..rows as i64).contains(&i)) {
        return Err(Error::invalid(
            name,
            format!("index out of range in self (index {bad}, {rows} rows)"),
        ));
    }
    Ok(v)
}

/// The composite forward (backends without a kernel): `index_select`.
fn embedding_composite_kernel(call: &Call) -> Result<Tensors> {
    let op: &Embedding = downcast_op(call.op)?;
    let spec = op.infer(call.inputs)?;
    let (w, idx) = (call.inputs[0], call.inputs[1]);
    let rows = w.index_select(0, &idx.reshape([-1])?)?;
    Ok(smallvec::smallvec![rows.reshape(spec[0].shape.as_slice())?])
}

/// Registers the composite forward.
pub(crate) fn register() -> Result<()> {
    EMBEDDING.register_builtin(Slot::AnyBackend, Kernel::Functional(embedding_composite_kernel))
}

/// # Embeddings
///
/// `F.embedding`'s operators.
///
/// ```
/// use ferrotorch_core::Tensor;
/// let w = Tensor::new([[0.0f32, 1.0], [2.0, 3.0], [4.0, 5.0]])?;
/// let e = w.embedding(&Tensor::new([2i64, 0])?, None, false)?;
/// assert_eq!(e.to_vec::<f32>()?, [4.0, 5.0, 0.0, 1.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// The rows of this weight `[V, D]` that `indices` (int64 or int32, any
    /// shape) names, shape `[*indices.shape, D]` (`torch.embedding`; node
    /// `EmbeddingBackward0`). Row `padding_idx` (negative counts from the
    /// end) gets no gradient; with `scale_grad_by_freq` each row's gradient
    /// is divided by how often its index occurs. Errors: a weight that is
    /// not 2-D, indices of another dtype, an index outside `[0, V)`
    /// ("index out of range in self"), `padding_idx` outside `[-V, V)`
    /// ("Padding_idx must be within num_embeddings").
    pub fn embedding(&self, indices: &Tensor, padding_idx: Option<i64>, scale_grad_by_freq: bool) -> Result<Tensor> {
        check_args("embedding", self, indices)?;
        let v = self.shape()[0] as i64;
        let padding_idx = match padding_idx {
            None => None,
            Some(p) if (-v..v).contains(&p) => Some((if p < 0 { p + v } else { p }) as usize),
            Some(_) => return Err(Error::invalid("embedding", "Padding_idx must be within num_embeddings")),
        };
        call1(
            &Embedding {
                padding_idx,
                scale_grad_by_freq,
            },
            &[self, indices],
        )
    }

    /// Rescales in place (`torch.embedding_renorm_`) each row of this weight
    /// `[V, D]` named in `indices` whose `norm_type`-norm exceeds
    /// `max_norm` to norm `max_norm` (times `norm / (norm + 1e-7)`, as
    /// PyTorch); returns `self`. `F.embedding` calls it without gradient
    /// recording on the detached weight. Errors as
    /// [`Tensor::embedding`], and for a non-float weight.
    pub fn embedding_renorm_(&self, indices: &Tensor, max_norm: f64, norm_type: f64) -> Result<Tensor> {
        call_out(&EmbeddingRenorm { max_norm, norm_type }, &[self, indices], &[self])?;
        Ok(self.clone())
    }
}
