//! Tensors in and out of raw little-endian bytes: PyTorch's storage type
//! names, rebuilding a strided tensor on a (shared) storage, and reading a
//! storage's bytes back for writing.

use std::collections::BTreeMap;

use ferrotorch_core::backend::storage::{Buffer, Storage};
use ferrotorch_core::backend::{Layout, TensorExt};
use ferrotorch_core::{DType, Device, Dims, Tensor};

use crate::error::{Error, Result};
use crate::mmap::Mapped;

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

/// Where a load gets its storages from: the file's map, borrowed without a
/// copy where it can be, else copies of the bytes.
pub(crate) struct Backing<'a> {
    /// The whole file.
    pub bytes: &'a [u8],
    map: Option<&'a Mapped>,
    /// Ranges of the file already borrowed (start -> end), so no two
    /// storages share bytes (a crafted zip can point two entries at one).
    borrowed: BTreeMap<usize, usize>,
}

impl<'a> Backing<'a> {
    /// Storages copied out of `bytes`.
    pub(crate) fn copying(bytes: &'a [u8]) -> Self {
        Backing {
            bytes,
            map: None,
            borrowed: BTreeMap::new(),
        }
    }

    /// Storages borrowing `map` where they can.
    pub(crate) fn mapped(map: &'a Mapped) -> Self {
        Backing {
            bytes: map,
            map: Some(map),
            borrowed: BTreeMap::new(),
        }
    }

    /// A storage with the bytes of `raw` (a slice of [`Self::bytes`]) for
    /// tensors of `dtype`: borrowed from the map when `raw` is aligned for
    /// `dtype` and overlaps nothing borrowed before, else a copy. A bool
    /// storage's bytes must all be 0 or 1.
    pub(crate) fn storage(&mut self, raw: &[u8], dtype: DType) -> Result<Storage> {
        let start = (raw.as_ptr() as usize).wrapping_sub(self.bytes.as_ptr() as usize);
        let inside = start <= self.bytes.len() && raw.len() <= self.bytes.len() - start;
        if let Some(map) = self.map
            && inside
            && !raw.is_empty()
        {
            let end = start + raw.len();
            let before = self.borrowed.range(..end).next_back();
            let free = before.is_none_or(|(_, &e)| e <= start);
            if free && let Some(storage) = map.borrowed_storage(start..end, dtype) {
                self.borrowed.insert(start, end);
                return type_for(storage, dtype, raw.len());
            }
        }
        storage_from_bytes(raw, dtype)
    }
}

/// `storage` typed for bool tensors when `dtype` is bool (its bytes must
/// all be 0 or 1).
fn type_for(storage: Storage, dtype: DType, nbytes: usize) -> Result<Storage> {
    if dtype != DType::Bool {
        return Ok(storage);
    }
    let t = Tensor::from_parts(storage, Layout::contiguous(&[nbytes]), DType::Bool)
        .map_err(|e| Error::tensor(format!("bool storage: {e}")))?;
    Ok(t.storage().clone())
}

/// A fresh CPU storage holding a copy of `bytes`, for tensors of `dtype`.
/// A bool storage is typed for bool here, while this is its only handle
/// (the core lets bool tensors live only on storages that no other dtype
/// sees); its bytes must all be 0 or 1.
pub(crate) fn storage_from_bytes(bytes: &[u8], dtype: DType) -> Result<Storage> {
    check_host_little_endian()?;
    type_for(Storage::cpu_from_bytes(bytes)?, dtype, bytes.len())
}

/// A meta storage (no memory) of `nbytes` bytes, for tensors of `dtype`:
/// it stands in for a storage whose bytes are not read (typed for bool as
/// [`storage_from_bytes`] types a real one).
pub(crate) fn meta_storage(nbytes: usize, dtype: DType) -> Result<Storage> {
    type_for(Storage::new(Device::Meta, nbytes, Buffer::Meta)?, dtype, nbytes)
}

/// A contiguous tensor of `dtype` and `shape` over `bytes` (a slice of
/// `backing`'s file: little-endian elements, row-major), which must be
/// exactly `numel * element_size` long; borrowed or copied as
/// [`Backing::storage`] decides.
pub(crate) fn tensor_from_bytes(
    backing: &mut Backing<'_>,
    bytes: &[u8],
    dtype: DType,
    shape: &[usize],
) -> Result<Tensor> {
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
    let storage = backing.storage(bytes, dtype)?;
    Ok(Tensor::from_parts(storage, Layout::contiguous(shape), dtype)?)
}

/// Runs `f` on the bytes of a CPU storage (under its read lock).
pub(crate) fn with_storage_bytes<R>(storage: &Storage, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
    check_host_little_endian()?;
    let guard = storage.read();
    let released = storage.device() == ferrotorch_core::Device::Cpu;
    let cpu = guard.as_cpu().ok_or_else(|| {
        if released {
            // Host storage without memory: freed by release_cpu.
            return Error::Core(ferrotorch_core::Error::Released { op: "save" });
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn external(s: &Storage) -> bool {
        s.read().as_cpu().is_some_and(|b| b.is_external())
    }

    #[test]
    fn overlapping_ranges_are_never_borrowed_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        std::fs::write(&path, (0u8..64).collect::<Vec<_>>()).unwrap();
        let map = crate::mmap::map_file(&path).unwrap();
        let mut backing = Backing::mapped(&map);
        let bytes = backing.bytes;
        let a = backing.storage(&bytes[16..32], DType::F32).unwrap();
        let overlapping = [(8, 24), (24, 40), (16, 32), (0, 64), (20, 28)];
        let b: Vec<Storage> = overlapping
            .iter()
            .map(|&(s, e)| backing.storage(&bytes[s..e], DType::F32).unwrap())
            .collect();
        let c = backing.storage(&bytes[32..48], DType::F32).unwrap();
        let d = backing.storage(&bytes[0..16], DType::U8).unwrap();
        let misaligned = backing.storage(&bytes[50..58], DType::F64).unwrap();
        assert!(external(&a) && external(&c) && external(&d));
        assert!(b.iter().all(|s| !external(s)), "an overlapping range was borrowed");
        assert!(!external(&misaligned));
        for (s, &(lo, hi)) in b.iter().zip(&overlapping) {
            let got = s.read().as_cpu().unwrap().bytes().to_vec();
            assert_eq!(got, (lo as u8..hi as u8).collect::<Vec<_>>());
        }
        // Bytes of the copying backing are always copies.
        let mut copying = Backing::copying(bytes);
        assert!(!external(&copying.storage(&bytes[0..8], DType::U8).unwrap()));
    }
}
