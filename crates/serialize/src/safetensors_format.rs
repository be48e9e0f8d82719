//! safetensors files (the `safetensors` crate): a little-endian `u64`
//! header length, a JSON header (dtype, shape and byte range of each
//! tensor, and an optional `__metadata__` map of strings), then the data.
//!
//! Tensors loaded from a file borrow its (private, copy-on-write) memory
//! map where their data is aligned for their dtype, else are copied out
//! once; tensors read from a byte slice are copies.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use ferrotorch_core::{DType, Tensor};
use ferrotorch_nn::StateDict;
use safetensors::tensor::{Dtype, SafeTensors, View};

use crate::error::{Error, Result};
use crate::tensor_io::{Backing, contiguous_bytes, tensor_from_bytes};

/// The tensors and the `__metadata__` of a safetensors file.
#[derive(Debug, Clone, Default)]
pub struct Safetensors {
    /// The tensors by name, in the order of their data in the file.
    pub tensors: StateDict,
    /// The header's `__metadata__` (free-form strings; empty when absent).
    pub metadata: HashMap<String, String>,
}

fn to_core(dtype: Dtype) -> Result<DType> {
    Ok(match dtype {
        Dtype::BOOL => DType::Bool,
        Dtype::U8 => DType::U8,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        other => {
            return Err(Error::Unsupported(format!(
                "a safetensors tensor of dtype {other:?}: the ferrotorch core has no such dtype"
            )));
        }
    })
}

fn from_core(dtype: DType) -> Dtype {
    match dtype {
        DType::Bool => Dtype::BOOL,
        DType::U8 => Dtype::U8,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
    }
}

/// Parses a safetensors file (its tensors borrowing or copying the bytes,
/// as `backing` does).
pub(crate) fn read(mut backing: Backing<'_>) -> Result<Safetensors> {
    let bytes = backing.bytes;
    let st =
        SafeTensors::deserialize(bytes).map_err(|e| Error::format(format!("not a valid safetensors file: {e}")))?;
    let (_, header) =
        SafeTensors::read_metadata(bytes).map_err(|e| Error::format(format!("not a valid safetensors file: {e}")))?;
    let mut tensors = StateDict::new();
    for name in header.offset_keys() {
        let view = st
            .tensor(&name)
            .map_err(|e| Error::format(format!("safetensors tensor {name}: {e}")))?;
        let dtype = to_core(view.dtype())?;
        let t = tensor_from_bytes(&mut backing, view.data(), dtype, view.shape())
            .map_err(|e| Error::tensor(format!("safetensors tensor {name}: {e}")))?;
        tensors.insert(name, t);
    }
    let metadata = header.metadata().clone().unwrap_or_default();
    Ok(Safetensors { tensors, metadata })
}

/// One tensor as the `safetensors` crate's [`View`]; its bytes are made
/// contiguous when the writer asks for them, and a failure there is kept
/// in `error` (the trait cannot return one).
struct TensorView<'a> {
    tensor: &'a Tensor,
    dtype: Dtype,
    error: &'a RefCell<Option<Error>>,
}

impl View for TensorView<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }

    fn shape(&self) -> &[usize] {
        self.tensor.shape()
    }

    fn data(&self) -> Cow<'_, [u8]> {
        match contiguous_bytes(self.tensor) {
            Ok(b) => Cow::Owned(b),
            Err(e) => {
                self.error.borrow_mut().get_or_insert(e);
                Cow::Owned(Vec::new())
            }
        }
    }

    fn data_len(&self) -> usize {
        self.tensor.numel() * self.tensor.element_size()
    }
}

/// Writes `tensors` with `metadata` to `path` (not atomically: the caller
/// gives a temporary path).
pub(crate) fn write(tensors: &StateDict, metadata: Option<&HashMap<String, String>>, path: &Path) -> Result<()> {
    let error = RefCell::new(None);
    let views = tensors.iter().map(|(name, t)| {
        (
            name.to_string(),
            TensorView {
                tensor: t,
                dtype: from_core(t.dtype()),
                error: &error,
            },
        )
    });
    for (name, t) in tensors.iter() {
        if t.device() != ferrotorch_core::Device::Cpu {
            return Err(Error::Unsupported(format!(
                "saving tensor {name} on device {}: move it to the CPU first",
                t.device()
            )));
        }
    }
    let written = safetensors::serialize_to_file(views, metadata.cloned(), path);
    if let Some(e) = error.into_inner() {
        return Err(e);
    }
    written.map_err(|e| match e {
        safetensors::SafeTensorError::IoError(io) => Error::io(path, io),
        other => Error::format(format!("writing safetensors: {other}")),
    })
}
