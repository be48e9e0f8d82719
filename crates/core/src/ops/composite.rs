//! Operators written in other operators but recorded as one graph node with
//! PyTorch's name and derivative formula (PyTorch's
//! CompositeExplicitAutograd ops): `masked_fill`, `tril` / `triu`, `dot`,
//! `mv` and `stack`. The forward runs below autograd in the `AnyBackend`
//! slot, so a backend with the pieces runs them; the front ends validate
//! the arguments and promote dtypes first.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call1, downcast_op};
use crate::ops::binary::{Where, where_};
use crate::ops::grad_util::grad0;
use crate::ops::{Cat, Operand};
use crate::{DType, Result, Scalar, Tensor};

/// Dispatch table of `masked_fill.Scalar`.
pub static MASKED_FILL: OpEntry = OpEntry::differentiable("masked_fill.Scalar");
/// Dispatch table of `tril`.
pub static TRIL: OpEntry = OpEntry::differentiable("tril");
/// Dispatch table of `triu`.
pub static TRIU: OpEntry = OpEntry::differentiable("triu");
/// Dispatch table of `dot`.
pub static DOT: OpEntry = OpEntry::differentiable("dot");
/// Dispatch table of `mv`.
pub static MV: OpEntry = OpEntry::differentiable("mv");
/// Dispatch table of `stack`.
pub static STACK: OpEntry = OpEntry::differentiable("stack");

/// Which composite operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CompositeOp {
    /// `masked_fill(x, mask, value)`: inputs `[x, mask]`, `mask` broadcast to x.
    MaskedFill {
        /// The value written where the mask is true (fits x's dtype).
        value: Scalar,
    },
    /// `tril(x, diagonal)` (`upper == false`) or `triu(x, diagonal)`.
    Triangle {
        /// Diagonal offset.
        diagonal: i64,
        /// Upper (`triu`) or lower (`tril`) triangle.
        upper: bool,
    },
    /// `dot(a, b)` of two 1-D tensors of one size and dtype.
    Dot,
    /// `mv(matrix, vector)`.
    Mv,
    /// `stack(tensors, dim)` of tensors of one shape and dtype (`dim` normalised).
    Stack {
        /// Position of the new dim.
        dim: usize,
    },
}

impl Op for CompositeOp {
    fn entry(&self) -> &'static OpEntry {
        match self {
            CompositeOp::MaskedFill { .. } => &MASKED_FILL,
            CompositeOp::Triangle { upper: false, .. } => &TRIL,
            CompositeOp::Triangle { upper: true, .. } => &TRIU,
            CompositeOp::Dot => &DOT,
            CompositeOp::Mv => &MV,
            CompositeOp::Stack { .. } => &STACK,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let shape: Vec<usize> = match self {
            CompositeOp::MaskedFill { .. } => {
                crate::layout::broadcast_shapes("masked_fill", x.shape(), inputs[1].shape())?.to_vec()
            }
            CompositeOp::Triangle { .. } => x.shape().to_vec(),
            CompositeOp::Dot => Vec::new(),
            CompositeOp::Mv => vec![x.shape()[0]],
            CompositeOp::Stack { dim } => {
                let mut s = x.shape().to_vec();
                s.insert(*dim, inputs.len());
                s
            }
        };
        Ok(smallvec::smallvec![OutSpec::new(shape, x.dtype())])
    }

    fn differentiable_input(&self, i: usize) -> bool {
        !matches!(self, CompositeOp::MaskedFill { .. }) || i == 0
    }

    fn saves(&self) -> Saves {
        self.saves_for(u64::MAX)
    }

    fn saves_for(&self, needs: u64) -> Saves {
        match self {
            CompositeOp::MaskedFill { .. } => Saves::inputs(0b10),
            CompositeOp::Triangle { .. } | CompositeOp::Stack { .. } => Saves::NONE,
            // Each factor's gradient reads the other factor.
            CompositeOp::Dot | CompositeOp::Mv => Saves::cross(needs),
        }
    }

    fn backward_name(&self) -> String {
        match self {
            CompositeOp::MaskedFill { .. } => "MaskedFillBackward0",
            CompositeOp::Triangle { upper: false, .. } => "TrilBackward0",
            CompositeOp::Triangle { upper: true, .. } => "TriuBackward0",
            CompositeOp::Dot => "DotBackward0",
            CompositeOp::Mv => "MvBackward0",
            CompositeOp::Stack { .. } => "StackBackward0",
        }
        .into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        Ok(match self {
            // The result may have the broadcast shape of x and the mask.
            CompositeOp::MaskedFill { .. } => vec![
                Some(crate::ops::grad_util::sum_to(
                    &g.masked_fill(&ctx.input(1)?, 0)?,
                    ctx.input_shape(0),
                )?),
                None,
            ],
            CompositeOp::Triangle { diagonal, upper } => {
                vec![Some(if *upper { g.triu(*diagonal)? } else { g.tril(*diagonal)? })]
            }
            CompositeOp::Dot => vec![
                ctx.needs_grad(0).then(|| ctx.input(1)?.mul(&g)).transpose()?,
                ctx.needs_grad(1).then(|| ctx.input(0)?.mul(&g)).transpose()?,
            ],
            CompositeOp::Mv => vec![
                ctx.needs_grad(0).then(|| g.outer(&ctx.input(1)?)).transpose()?,
                ctx.needs_grad(1).then(|| ctx.input(0)?.t()?.mv(&g)).transpose()?,
            ],
            CompositeOp::Stack { dim } => (0..ctx.num_inputs())
                .map(|i| ctx.needs_grad(i).then(|| g.select(*dim as i64, i as i64)).transpose())
                .collect::<Result<_>>()?,
        })
    }
}

/// The forward of every composite operator.
fn composite_kernel(call: &Call) -> Result<Tensors> {
    let op: &CompositeOp = downcast_op(call.op)?;
    let x = call.inputs[0];
    let r = match *op {
        CompositeOp::MaskedFill { value } => {
            let v = Tensor::scalar_tensor(value, x.dtype());
            call1(&Where, &[call.inputs[1], &v, x])?
        }
        CompositeOp::Triangle { diagonal, upper } => {
            let (n, m) = (x.shape()[x.ndim() - 2] as i64, x.shape()[x.ndim() - 1] as i64);
            let opts = crate::TensorOptions::new().dtype(DType::I64).device(x.device());
            let rows = opts.arange(0, n, 1)?.unsqueeze(1)?;
            let cols = opts.arange(0, m, 1)?.unsqueeze(0)?;
            let diff = cols.sub(&rows)?;
            let keep = if upper { diff.ge(diagonal)? } else { diff.le(diagonal)? };
            let zero = Tensor::scalar_tensor(Scalar::Int(0), x.dtype());
            // PyTorch's tril/triu write a contiguous result whatever the
            // input's strides (`empty_like(.., LEGACY_CONTIGUOUS_MEMORY_FORMAT)`).
            where_(&keep, Operand::Tensor(x), Operand::Tensor(&zero))?.contiguous()?
        }
        CompositeOp::Dot => x.unsqueeze(0)?.mm(&call.inputs[1].unsqueeze(1)?)?.reshape(())?,
        CompositeOp::Mv => x.mm(&call.inputs[1].unsqueeze(1)?)?.squeeze_dim(1)?,
        CompositeOp::Stack { dim } => {
            let unsq: Vec<Tensor> = call
                .inputs
                .iter()
                .map(|t| t.unsqueeze(dim as i64))
                .collect::<Result<_>>()?;
            let refs: Vec<&Tensor> = unsq.iter().collect();
            call1(&Cat { dim }, &refs)?
        }
    };
    // dot and mv end in a view of the product (never a view for autograd).
    Ok(smallvec::smallvec![r.into_result(call.inputs)?])
}

pub(crate) fn register() -> Result<()> {
    for e in [&MASKED_FILL, &TRIL, &TRIU, &DOT, &MV, &STACK] {
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(composite_kernel))?;
    }
    Ok(())
}
