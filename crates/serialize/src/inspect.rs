//! Listing a checkpoint's entries without reading its tensor data: for a
//! `torch.save` file only the pickle is interpreted (each storage stands in
//! as a meta storage of the declared size, so no storage entry is read);
//! for a safetensors file only the header.

use std::collections::HashMap;
use std::fmt::{self, Display, Formatter};

use ferrotorch_core::DType;
use ferrotorch_core::backend::TensorExt;
use safetensors::tensor::{Dtype, SafeTensors};

use crate::error::{Error, Result};
use crate::pt;
use crate::value::Value;

/// The two checkpoint formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `torch.save`'s zip archive (PyTorch >= 1.6).
    TorchSave,
    /// A safetensors file.
    Safetensors,
}

impl Format {
    /// The format that a file starting with `head` (its first 9 bytes or
    /// more) has: a zip archive is taken for `torch.save`'s, 8 bytes of
    /// header length and `{` for safetensors; `None` otherwise (a legacy
    /// `torch.save` file included).
    pub fn detect(head: &[u8]) -> Option<Format> {
        match pt::kind(head) {
            pt::Kind::Zip => Some(Format::TorchSave),
            pt::Kind::Safetensors => Some(Format::Safetensors),
            pt::Kind::Legacy | pt::Kind::Unknown => None,
        }
    }

    /// A name for messages: `torch.save` or `safetensors`.
    pub fn name(self) -> &'static str {
        match self {
            Format::TorchSave => "torch.save",
            Format::Safetensors => "safetensors",
        }
    }
}

/// What a checkpoint holds, as [`inspect`](crate::inspect) lists it.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The file's format.
    pub format: Format,
    /// The tensors and other values, in the file's order, nested
    /// containers flattened (see [`Entry::name`]).
    pub entries: Vec<Entry>,
    /// The storages of a `torch.save` file, in the order the pickle first
    /// refers to them (empty for safetensors, which has none).
    pub storages: Vec<StorageInfo>,
    /// A safetensors file's `__metadata__`, sorted by key (empty for a
    /// `torch.save` file).
    pub metadata: Vec<(String, String)>,
}

/// One entry of an [`Inspection`].
#[derive(Debug, Clone)]
pub struct Entry {
    /// The dotted path to the entry through nested dicts (by key) and
    /// lists and tuples (by index): `model_state_dict.fc.weight`,
    /// `optimizer_state_dict.state.0.exp_avg`; empty when the file holds a
    /// single value.
    pub name: String,
    /// What is there.
    pub item: Item,
}

/// A tensor or another value.
#[derive(Debug, Clone)]
pub enum Item {
    /// A tensor, described (its data is not read).
    Tensor(TensorInfo),
    /// A value that is not a tensor: a number, string, bytes, `None`, an
    /// empty dict, or a list or tuple of such values (it holds no tensor).
    Value(Value),
}

/// A tensor's description.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// PyTorch's name of its dtype (`float32`, `bfloat16`, `int64`, ...; a
    /// safetensors dtype that PyTorch lacks keeps its safetensors name).
    pub dtype: String,
    /// The shape.
    pub shape: Vec<usize>,
    /// The bytes of its elements (number of elements times the element size).
    pub nbytes: u64,
    /// Whether it requires grad (an `nn.Parameter`); always false in
    /// safetensors files.
    pub requires_grad: bool,
    /// Where its data lies in the file.
    pub location: Location,
}

impl TensorInfo {
    /// The number of elements.
    pub fn numel(&self) -> u64 {
        self.shape.iter().fold(1u64, |n, &s| n.saturating_mul(s as u64))
    }

    /// The dtype as the core's, if the core has it.
    pub fn core_dtype(&self) -> Option<DType> {
        DType::from_name(&self.dtype)
    }
}

impl Display for TensorInfo {
    /// `float32 [3, 4]`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.dtype, self.shape)
    }
}

impl Display for Item {
    /// A tensor as `float32 [3, 4]`, another value as Python's `repr`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Item::Tensor(t) => t.fmt(f),
            Item::Value(v) => v.fmt(f),
        }
    }
}

/// Where a tensor's data lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// In the storage `data/<key>` of a `torch.save` archive, at `offset`
    /// elements with `stride` (in elements); several tensors can share one
    /// storage (views).
    Storage {
        /// The storage key (see [`Inspection::storages`]).
        key: String,
        /// The storage offset, in elements.
        offset: usize,
        /// The strides, in elements.
        stride: Vec<usize>,
    },
    /// Bytes `start..end` of a safetensors file's data section
    /// (contiguous, row-major).
    Range {
        /// First byte.
        start: u64,
        /// One past the last byte.
        end: u64,
    },
}

/// One storage of a `torch.save` archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageInfo {
    /// Its key: the entry `<archive>/data/<key>`.
    pub key: String,
    /// Its size in bytes, as the pickle declares it.
    pub nbytes: u64,
    /// How many tensors of the file lie on it.
    pub tensors: usize,
}

impl Inspection {
    /// The tensors with their names, in order.
    pub fn tensors(&self) -> impl Iterator<Item = (&str, &TensorInfo)> {
        self.entries.iter().filter_map(|e| match &e.item {
            Item::Tensor(t) => Some((e.name.as_str(), t)),
            Item::Value(_) => None,
        })
    }

    /// The bytes of all tensors' elements (shared storages counted once per tensor).
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors().map(|(_, t)| t.nbytes).sum()
    }

    /// The bytes of tensor data in the file: the storages' sizes for a
    /// `torch.save` file (each counted once, however many tensors view
    /// it), the tensors' for a safetensors file.
    pub fn data_bytes(&self) -> u64 {
        match self.format {
            Format::TorchSave => self.storages.iter().map(|s| s.nbytes).sum(),
            Format::Safetensors => self.tensor_bytes(),
        }
    }
}

/// [`inspect`](crate::inspect) of a file's bytes (pages of tensor data are
/// never touched).
pub(crate) fn inspect_bytes(bytes: &[u8]) -> Result<Inspection> {
    match pt::kind(bytes) {
        pt::Kind::Zip => inspect_pt(bytes),
        pt::Kind::Safetensors => inspect_safetensors(bytes),
        pt::Kind::Legacy => Err(Error::LegacyFormat),
        pt::Kind::Unknown if bytes.len() < 9 => Err(Error::format(format!(
            "not a checkpoint: the file has {} bytes (empty or truncated)",
            bytes.len()
        ))),
        pt::Kind::Unknown => Err(Error::format(format!(
            "neither a torch.save checkpoint (a zip archive, PK\\x03\\x04) nor a safetensors file: it starts with {:02x?}",
            &bytes[..8]
        ))),
    }
}

fn inspect_pt(bytes: &[u8]) -> Result<Inspection> {
    let (value, refs) = pt::read_pickle_only(bytes)?;
    let keys: HashMap<usize, usize> = refs.iter().enumerate().map(|(i, r)| (r.storage.id(), i)).collect();
    let mut storages: Vec<StorageInfo> = refs
        .iter()
        .map(|r| StorageInfo {
            key: r.key.clone(),
            nbytes: r.storage.nbytes() as u64,
            tensors: 0,
        })
        .collect();
    let entries = value
        .leaves()
        .into_iter()
        .map(|(name, v)| entry(name, v, &keys, &mut storages))
        .collect();
    Ok(Inspection {
        format: Format::TorchSave,
        entries,
        storages,
        metadata: Vec::new(),
    })
}

/// The entry of one leaf of the pickle's value.
fn entry(name: String, v: &Value, keys: &HashMap<usize, usize>, storages: &mut [StorageInfo]) -> Entry {
    let Value::Tensor(t) = v else {
        return Entry {
            name,
            item: Item::Value(v.clone()),
        };
    };
    let key = match keys.get(&t.storage().id()) {
        Some(&i) => {
            storages[i].tensors += 1;
            storages[i].key.clone()
        }
        None => String::new(),
    };
    let info = TensorInfo {
        dtype: t.dtype().name().to_string(),
        shape: t.shape().to_vec(),
        nbytes: (t.numel() as u64) * (t.element_size() as u64),
        requires_grad: t.requires_grad(),
        location: Location::Storage {
            key,
            offset: t.storage_offset(),
            stride: t.strides().to_vec(),
        },
    };
    Entry {
        name,
        item: Item::Tensor(info),
    }
}

/// PyTorch's name of a safetensors dtype (the safetensors name where
/// PyTorch has none).
fn torch_dtype_name(d: Dtype) -> String {
    let name = match d {
        Dtype::BOOL => "bool",
        Dtype::U8 => "uint8",
        Dtype::I8 => "int8",
        Dtype::I16 => "int16",
        Dtype::U16 => "uint16",
        Dtype::I32 => "int32",
        Dtype::U32 => "uint32",
        Dtype::I64 => "int64",
        Dtype::U64 => "uint64",
        Dtype::F16 => "float16",
        Dtype::BF16 => "bfloat16",
        Dtype::F32 => "float32",
        Dtype::F64 => "float64",
        Dtype::F8_E5M2 => "float8_e5m2",
        Dtype::F8_E4M3 => "float8_e4m3fn",
        Dtype::F8_E8M0 => "float8_e8m0fnu",
        other => return other.to_string(),
    };
    name.to_string()
}

fn inspect_safetensors(bytes: &[u8]) -> Result<Inspection> {
    // Reads the header only; checks that the data section has exactly the
    // size the header's offsets add up to.
    let (_, header) =
        SafeTensors::read_metadata(bytes).map_err(|e| Error::format(format!("not a valid safetensors file: {e}")))?;
    let mut entries = Vec::new();
    for name in header.offset_keys() {
        let Some(info) = header.info(&name) else { continue };
        let (start, end) = info.data_offsets;
        entries.push(Entry {
            name,
            item: Item::Tensor(TensorInfo {
                dtype: torch_dtype_name(info.dtype),
                shape: info.shape.clone(),
                nbytes: end.saturating_sub(start) as u64,
                requires_grad: false,
                location: Location::Range {
                    start: start as u64,
                    end: end as u64,
                },
            }),
        });
    }
    let mut metadata: Vec<(String, String)> = header.metadata().clone().unwrap_or_default().into_iter().collect();
    metadata.sort();
    Ok(Inspection {
        format: Format::Safetensors,
        entries,
        storages: Vec::new(),
        metadata,
    })
}
