//! Tensors in and out of the bytes the collectives move: the input's
//! elements in row-major order (a copy), and received bytes written back
//! into a tensor in place (strided or not), outside autograd.

use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::{DType, Device, Tensor, TensorOptions};

use crate::error::{DistError, Result};

/// The elements of `t` in row-major order as little-endian bytes.
pub(crate) fn read(op: &str, t: &Tensor) -> Result<Vec<u8>> {
    check_cpu(op, t)?;
    let c = if t.is_contiguous() { t.clone() } else { t.contiguous()? };
    let start = c.storage_offset() * c.element_size();
    let len = c.numel() * c.element_size();
    let guard = c.storage().read();
    let cpu = guard.as_cpu().ok_or_else(|| not_cpu(op, t))?;
    cpu.bytes()
        .get(start..start + len)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| DistError::InvalidArgument(format!("{op}: the tensor lies outside its storage")))
}

/// Writes `bytes` (row-major elements of `t`'s dtype) into `t` in place:
/// straight into the storage when `t` is contiguous, else through a
/// strided copy. Outside autograd, as PyTorch's collectives write.
pub(crate) fn write(op: &str, t: &Tensor, bytes: &[u8]) -> Result<()> {
    let len = t.numel() * t.element_size();
    if bytes.len() != len {
        return Err(DistError::Protocol(format!(
            "{op}: received {} bytes for a tensor of {len} bytes",
            bytes.len()
        )));
    }
    if t.is_contiguous() {
        let start = t.storage_offset() * t.element_size();
        t.storage()
            .with_cpu_bytes_mut(|all| all.get_mut(start..start + len).map(|dst| dst.copy_from_slice(bytes)))?
            .ok_or_else(|| DistError::InvalidArgument(format!("{op}: the tensor lies outside its storage")))?;
        t.bump_version();
        return Ok(());
    }
    let src = from_bytes(t.dtype(), t.shape(), bytes)?;
    ferrotorch_core::autograd::no_grad(|| t.copy_(&src))?;
    Ok(())
}

/// A new contiguous CPU tensor of `dtype` and `shape` holding `bytes`.
pub(crate) fn from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor> {
    let t = TensorOptions::new().dtype(dtype).device(Device::Cpu).zeros(shape)?;
    write("collective", &t, bytes)?;
    Ok(t)
}

fn check_cpu(op: &str, t: &Tensor) -> Result<()> {
    if t.device() == Device::Cpu {
        Ok(())
    } else {
        Err(not_cpu(op, t))
    }
}

fn not_cpu(op: &str, t: &Tensor) -> DistError {
    DistError::InvalidArgument(format!(
        "{op}: the tensor is on {}; the tcp and mpi backends move CPU tensors",
        t.device()
    ))
}
