//! Tensors of unknown shape between pipeline stages: a fixed-size header
//! (rank count, sizes, dtype) and then the data, on one (peer, tag)
//! stream, so the receiver allocates what arrives.

use ferrotorch_core::autograd::no_grad;
use ferrotorch_core::{ALL_DTYPES, DType, Tensor, TensorOptions};

use crate::error::{DistError, Result};
use crate::group::ProcessGroup;
use crate::work::Work;

/// Dimensions a header carries at most.
const MAX_DIMS: usize = 8;

/// Starts sending `t` (detached, contiguous) to group rank `dst` with
/// `tag`; the works finish when the bytes are out.
pub(crate) fn send(group: &ProcessGroup, t: &Tensor, dst: usize, tag: u64) -> Result<Vec<Work>> {
    if t.dim() > MAX_DIMS {
        return Err(DistError::InvalidArgument(format!(
            "pipeline: a stage's output has {} dimensions; at most {MAX_DIMS} travel between stages",
            t.dim()
        )));
    }
    let code = i64::from(crate::collective::dtype_code(t.dtype()));
    let mut header = vec![t.dim() as i64, code];
    header.extend(t.shape().iter().map(|&s| s as i64));
    header.resize(MAX_DIMS + 2, 0);
    let header = Tensor::new(header)?;
    let data = no_grad(|| t.detach().contiguous())?;
    Ok(vec![group.send(&header, dst, tag)?, group.send(&data, dst, tag)?])
}

/// Receives a tensor [`send`] sent from group rank `src` with `tag`.
pub(crate) fn recv(group: &ProcessGroup, src: usize, tag: u64) -> Result<Tensor> {
    let header = TensorOptions::new().dtype(DType::I64).zeros([MAX_DIMS + 2])?;
    group.recv(&header, src, tag)?.wait()?;
    let h = header.to_vec::<i64>()?;
    let (ndim, code) = (h[0] as usize, h[1] as usize);
    let dtype = *ALL_DTYPES
        .get(code)
        .filter(|_| ndim <= MAX_DIMS)
        .ok_or_else(|| DistError::Collective(format!("pipeline: a malformed tensor header from rank {src}: {h:?}")))?;
    let shape: Vec<usize> = h[2..2 + ndim].iter().map(|&s| s as usize).collect();
    let t = TensorOptions::new().dtype(dtype).zeros(shape.as_slice())?;
    group.recv(&t, src, tag)?.wait()?;
    Ok(t)
}
