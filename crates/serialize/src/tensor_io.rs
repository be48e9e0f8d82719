//! Tensors in and out of raw little-endian bytes: PyTorch's storage type
//! names, rebuilding a strided tensor on a (shared) storage, and reading a
//! storage's bytes back for writing.

use ferrotorch_core::backend::storage::{Buffer, Storage};
use ferrotorch_core::backend::{Layout, TensorExt};
use ferrotorch_core::{DType, Device, Dims, Tensor};

use crate::error::{Error, Result};

/// The legacy storage class name of `dtype` (`FloatStorage`, ...), as
/// `torch.save` writes it in a persistent id.
pub(crate) fn storage_type_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "BoolStorage",
        DType::U8 => "ByteStorage",
        DType::I32 => "IntStorage",
        DType::I64 => "LongStorage",
        DType::F16 => "HalfStorage",
        DType::BF16 => "BFloat16Storage",
        DType::F32 => "FloatStorage",
        DType::F64 => "DoubleStorage",
    }
}

/// The dtype of the storage class `name` (`FloatStorage` -> f32). PyTorch
/// storages of dtypes the core lacks are [`Error::Unsupported`], naming the
/// dtype; other names are [`Error::DisallowedGlobal`].
pub(crate) fn storage_dtype(name: &str) -> Result<DType> {
    Ok(match name {
        "BoolStorage" => DType::Bool,
        "ByteStorage" => DType::U8,
        "IntStorage" => DType::I32,
        "LongStorage" => DType::I64,
        "HalfStorage" => DType::F16,
        "BFloat16Storage" => DType::BF16,
        "FloatStorage" => DType::F32,
        "DoubleStorage" => DType::F64,
        _ => {
            let torch_dtype = match name {
                "CharStorage" => "torch.int8",
                "ShortStorage" => "torch.int16",
                "ComplexFloatStorage" => "torch.complex64",
                "ComplexDoubleStorage" => "torch.complex128",
                "QInt8Storage" => "torch.qint8",
                "QUInt8Storage" => "torch.quint8",
                "QInt32Storage" => "torch.qint32",
                "QUInt4x2Storage" => "torch.quint4x2",
                "QUInt2x4Storage" => "torch.quint2x4",
                _ => return Err(Error::DisallowedGlobal(format!("torch.{name}"))),
            };
            return Err(Error::Unsupported(format!(
                "a tensor of dtype {torch_dtype} (torch.{name}): the ferrotorch core has no such dtype"
            )));
        }
    })
}

/// A non-negative `i64` from the file as a `usize`, or an error naming `what`.
pub(crate) fn to_usize(v: i64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::tensor(format!("{what} is negative ({v})")))
}

/// The tensor `storage[offset]` with `size` and `stride` (in elements), as
/// `torch._utils._rebuild_tensor_v2` builds it: a strided tensor on the
/// shared storage (no copy), checked first to lie inside the storage with
/// checked arithmetic.
pub(crate) fn rebuild_tensor(
    storage: &Storage,
    dtype: DType,
    offset: usize,
    size: &[usize],
    stride: &[usize],
) -> Result<Tensor> {
    if size.len() != stride.len() {
        return Err(Error::tensor(format!(
            "size {size:?} and stride {stride:?} have different lengths"
        )));
    }
    let mut numel: usize = 1;
    for &s in size {
        numel = numel
            .checked_mul(s)
            .filter(|&n| i64::try_from(n).is_ok())
            .ok_or_else(|| Error::tensor(format!("the size {size:?} has more elements than an i64 counts")))?;
    }
    let storage_numel = storage.nbytes() / dtype.element_size();
    if numel > 0 {
        // The last element addressed: offset + sum((size_i - 1) * stride_i).
        let mut last = offset;
        for (&s, &st) in size.iter().zip(stride) {
            last = (s - 1)
                .checked_mul(st)
                .and_then(|x| last.checked_add(x))
                .ok_or_else(|| {
                    Error::tensor(format!(
                        "offset {offset} with size {size:?} and stride {stride:?} overflows"
                    ))
                })?;
        }
        if last >= storage_numel {
            return Err(Error::tensor(format!(
                "size {size:?}, stride {stride:?} and offset {offset} address element {last}, \
                 but the storage holds {storage_numel} elements of {}",
                dtype.name()
            )));
        }
    }
    let layout = Layout {
        shape: Dims::from_slice(size),
        strides: Dims::from_slice(stride),
        offset,
    };
    Ok(Tensor::from_parts(storage.clone(), layout, dtype)?)
}

/// A fresh CPU storage holding a copy of `bytes`, for tensors of `dtype`.
/// A bool storage is typed for bool here, while this is its only handle
/// (the core lets bool tensors live only on storages that no other dtype
/// sees); its bytes must all be 0 or 1.
pub(crate) fn storage_from_bytes(bytes: &[u8], dtype: DType) -> Result<Storage> {
    check_host_little_endian()?;
    let storage = Storage::cpu_from_bytes(bytes)?;
    if dtype != DType::Bool {
        return Ok(storage);
    }
    let t = Tensor::from_parts(storage, Layout::contiguous(&[bytes.len()]), DType::Bool)
        .map_err(|e| Error::tensor(format!("bool storage: {e}")))?;
    Ok(t.storage().clone())
}

/// A meta storage (no memory) of `nbytes` bytes, for tensors of `dtype`:
/// it stands in for a storage whose bytes are not read (typed for bool as
/// [`storage_from_bytes`] types a real one).
pub(crate) fn meta_storage(nbytes: usize, dtype: DType) -> Result<Storage> {
    let storage = Storage::new(Device::Meta, nbytes, Buffer::Meta)?;
    if dtype != DType::Bool {
        return Ok(storage);
    }
    let t = Tensor::from_parts(storage, Layout::contiguous(&[nbytes]), DType::Bool)
        .map_err(|e| Error::tensor(format!("bool storage: {e}")))?;
    Ok(t.storage().clone())
}

/// A contiguous tensor of `dtype` and `shape` holding a copy of `bytes`
/// (little-endian elements, row-major), which must be exactly
/// `numel * element_size` long.
pub(crate) fn tensor_from_bytes(bytes: &[u8], dtype: DType, shape: &[usize]) -> Result<Tensor> {
    let mut numel: usize = 1;
    for &s in shape {
        numel = numel
            .checked_mul(s)
            .ok_or_else(|| Error::tensor(format!("the shape {shape:?} overflows")))?;
    }
    let nbytes = numel
        .checked_mul(dtype.element_size())
        .ok_or_else(|| Error::tensor(format!("the shape {shape:?} overflows")))?;
    if nbytes != bytes.len() {
        return Err(Error::tensor(format!(
            "{} elements of {} need {nbytes} bytes, the data has {}",
            numel,
            dtype.name(),
            bytes.len()
        )));
    }
    check_host_little_endian()?;
    let storage = Storage::cpu_from_bytes(bytes)?;
    Ok(Tensor::from_parts(storage, Layout::contiguous(shape), dtype)?)
}

/// Runs `f` on the bytes of a CPU storage (under its read lock).
pub(crate) fn with_storage_bytes<R>(storage: &Storage, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
    check_host_little_endian()?;
    let guard = storage.read();
    let cpu = guard.as_cpu().ok_or_else(|| {
        Error::Unsupported(format!(
            "saving a tensor on device {}: move it to the CPU first",
            storage.device()
        ))
    })?;
    Ok(f(cpu.bytes()))
}

/// The bytes of `t`'s elements in row-major order, little-endian (a copy
/// for non-contiguous tensors).
pub(crate) fn contiguous_bytes(t: &Tensor) -> Result<Vec<u8>> {
    let c = if t.is_contiguous() { t.clone() } else { t.contiguous()? };
    let start = c
        .storage_offset()
        .checked_mul(c.element_size())
        .ok_or_else(|| Error::tensor("storage offset overflows"))?;
    let len = c.numel() * c.element_size();
    with_storage_bytes(c.storage(), |b| b.get(start..start + len).map(<[u8]>::to_vec))?
        .ok_or_else(|| Error::tensor("the tensor lies outside its storage"))
}

/// Checkpoints are little-endian, and so is every host ferrotorch builds
/// for; a big-endian host is refused rather than misread.
pub(crate) fn check_host_little_endian() -> Result<()> {
    if cfg!(target_endian = "big") {
        return Err(Error::Unsupported(
            "reading or writing checkpoints on a big-endian host".into(),
        ));
    }
    Ok(())
}
