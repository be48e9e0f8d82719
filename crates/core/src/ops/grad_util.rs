//! Small helpers shared by backward formulas.

use crate::{Result, Tensor};

/// The first output's gradient (always present for single-output ops).
pub(crate) fn grad0(grads: &[Option<Tensor>]) -> Result<Tensor> {
    grads
        .first()
        .cloned()
        .flatten()
        .ok_or_else(|| crate::Error::invalid("backward", "missing output gradient"))
}

/// Sums a broadcast gradient back to `shape` (the reverse of broadcasting).
pub(crate) fn sum_to(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if crate::layout::same_dims(g.shape(), shape) {
        return Ok(g.clone());
    }
    let lead = g.ndim() - shape.len();
    let mut dims: Vec<i64> = (0..lead as i64).collect();
    for (i, &s) in shape.iter().enumerate() {
        if s == 1 && g.shape()[lead + i] != 1 {
            dims.push((lead + i) as i64);
        }
    }
    let r = if dims.is_empty() {
        g.clone()
    } else {
        g.sum_dim(dims, true)?
    };
    r.reshape(shape)
}

/// The reduced dims as `i64` (all of `0..ndim` when `None`).
pub(crate) fn dims_i64(dims: Option<&[usize]>, ndim: usize) -> Vec<i64> {
    match dims {
        None => (0..ndim as i64).collect(),
        Some(d) => d.iter().map(|&x| x as i64).collect(),
    }
}

/// Re-inserts reduced dims (size 1) into a reduction's result or gradient
/// (a no-op with `keepdim` or for a 0-d full reduction, which broadcasts as
/// it is).
pub(crate) fn unsqueeze_reduced(g: &Tensor, ndim: usize, dims: Option<&[usize]>, keepdim: bool) -> Result<Tensor> {
    let mut g = g.clone();
    if !keepdim && g.ndim() > 0 {
        let mut ds = dims_i64(dims, ndim);
        ds.sort_unstable();
        for d in ds {
            g = g.unsqueeze(d)?;
        }
    }
    Ok(g)
}

/// Re-inserts reduced dims (size 1) into a reduction's gradient and
/// broadcasts it to the input shape.
pub(crate) fn expand_reduced(
    g: &Tensor,
    input_shape: &[usize],
    dims: Option<&[usize]>,
    keepdim: bool,
) -> Result<Tensor> {
    unsqueeze_reduced(g, input_shape.len(), dims, keepdim)?.expand(input_shape)
}

/// A 0/1 tensor of `dtype` from a bool mask (a constant in the graph).
pub(crate) fn mask(m: &Tensor, like: &Tensor) -> Result<Tensor> {
    m.to_dtype(like.dtype())
}

/// `g` where `full` holds, `g / 2` where `half` holds, else 0, selected
/// (not multiplied: a NaN or inf in `g` outside both masks gives 0), as
/// PyTorch's `where` / `masked_fill` formulas for maximum, minimum and clamp.
pub(crate) fn full_or_half(g: &Tensor, full: &Tensor, half: &Tensor) -> Result<Tensor> {
    use crate::ops::binary::where_;
    use crate::ops::promote::Operand;
    let zero = Tensor::scalar_tensor(crate::Scalar::Int(0), g.dtype());
    let halved = where_(half, Operand::Tensor(&g.mul(0.5)?), Operand::Tensor(&zero))?;
    where_(full, Operand::Tensor(g), Operand::Tensor(&halved))
}

/// The backward of an operator whose output 0 holds values picked along
/// `dim` at the indices of output 1 (sort, topk, kthvalue, median, mode,
/// cummax): the gradient sent back to the picked places (`accumulate`:
/// summed where an index repeats; `keepdim` false: `dim` was removed).
pub(crate) fn picked_values_backward(
    ctx: &crate::autograd::BackwardCtx,
    grads: &[Option<Tensor>],
    dim: usize,
    keepdim: bool,
    accumulate: bool,
) -> Result<Vec<Option<Tensor>>> {
    let Some(g) = grads.first().cloned().flatten() else {
        return Ok(vec![None]);
    };
    let shape = ctx.input_shape(0);
    if shape.is_empty() {
        return Ok(vec![Some(g.reshape(())?)]);
    }
    let d = dim as i64;
    let idx = ctx.output(1)?;
    let (g, idx) = if keepdim {
        (g, idx)
    } else {
        (g.unsqueeze(d)?, idx.unsqueeze(d)?)
    };
    let zeros = crate::TensorOptions::like(&g).zeros(shape)?;
    Ok(vec![Some(if accumulate {
        zeros.scatter_add(d, &idx, &g)?
    } else {
        zeros.scatter(d, &idx, &g)?
    })])
}

/// The outputs of a values-and-indices operator (sort, topk, kthvalue,
/// median, mode, cummax): values in `dtype` and int64 indices, both of `shape`.
pub(crate) fn values_and_indices(shape: crate::layout::Dims, dtype: crate::DType) -> crate::dispatch::OutSpecs {
    use crate::dispatch::OutSpec;
    smallvec::smallvec![
        OutSpec::new(shape.clone(), dtype),
        OutSpec::new(shape, crate::DType::I64)
    ]
}

/// What a values-and-indices operator saves for [`picked_values_backward`]:
/// its indices (output 1).
pub(crate) const SAVES_INDICES: crate::autograd::Saves = crate::autograd::Saves {
    inputs: 0,
    outputs: 0b10,
};
