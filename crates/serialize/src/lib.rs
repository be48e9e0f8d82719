//! # ferrotorch-serialize
//!
//! Checkpoint interop with PyTorch (re-exported as `ferrotorch::serialize`):
//!
//! - **`torch.save` files** (the zip format of PyTorch >= 1.6): [`load`]
//!   reads one as `torch.load(path, weights_only=True)` would, into a
//!   [`Value`]; [`save`] writes one that `torch.load(path,
//!   weights_only=True)` reads back. The pickle inside is interpreted, never
//!   executed: only the globals of PyTorch's weights-only allow-list are
//!   accepted, any other is an [`Error::DisallowedGlobal`] naming it.
//!   Tensors keep their strides and storage offsets, and tensors that share
//!   a storage in the file share one after loading (and are saved sharing it).
//! - **safetensors** files: [`load_safetensors`] (memory-mapped) and
//!   [`save_safetensors`], with the header's `__metadata__`.
//! - **State dicts**: conversions between [`Value`] and `nn`'s
//!   [`StateDict`] / `optim`'s [`OptimizerStateDict`] in PyTorch's
//!   layouts ([`state_dict_to_value`], [`value_to_optimizer_state_dict`],
//!   [`scheduler_state_dict_to_value`], ...), and [`load_state_dict`] / [`save_state_dict`] with
//!   [`LoadOptions`] (a sub-entry, the `module.` prefix, a dtype).
//! - **Inspection**: [`inspect`] lists a file's tensors (dotted name,
//!   dtype, shape, bytes) and other values without reading tensor data
//!   (the `ferrotorch inspect` command of the facade's binary).
//!
//! Writes are atomic (a temporary file beside the target, fsynced, then
//! renamed). Bad files are errors ([`Error`]), never panics, and what a
//! load allocates is at most a small multiple of the file's size.
//!
//! ```
//! use ferrotorch_core::Tensor;
//! use ferrotorch_serialize::{Dict, Value, load, save};
//!
//! let dir = std::env::temp_dir().join(format!("ferrotorch-serialize-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let path = dir.join("checkpoint.pt");
//! let mut ckpt = Dict::new();
//! ckpt.insert("epoch", 3i64);
//! ckpt.insert("weight", Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2])?);
//! ckpt.insert("loss", 0.12);
//! save(&Value::Dict(ckpt), &path)?;
//!
//! let back = load(&path)?;
//! let d = back.as_dict().unwrap();
//! assert_eq!(d.get_str("epoch").and_then(Value::as_i64), Some(3));
//! let w = d.get_str("weight").and_then(Value::as_tensor).unwrap();
//! assert_eq!(w.to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod atomic;
mod convert;
mod error;
mod inspect;
mod leaves;
mod mmap;
mod options;
mod pickle;
mod pt;
mod repr;
mod safetensors_format;
mod tensor_io;
mod value;

use std::collections::HashMap;
use std::io::{Cursor, Seek, Write};
use std::path::Path;

use tensor_io::Backing;

pub use convert::{
    optim_value_to_value, optimizer_state_dict_to_value, scheduler_state_dict_to_value, state_dict_to_value,
    value_to_optim_value, value_to_optimizer_state_dict, value_to_scheduler_state_dict, value_to_state_dict,
};
pub use error::{Error, Result};
pub use ferrotorch_nn::StateDict;
pub use ferrotorch_optim::OptimizerStateDict;
pub use inspect::{Entry, Format, Inspection, Item, Location, StorageInfo, TensorInfo};
pub use options::{LoadOptions, add_prefix, strip_prefix, to_dtype};
pub use safetensors_format::Safetensors;
pub use value::MAX_DEPTH;
pub use value::{Dict, DictKind, Key, Value};

/// Loads a `torch.save` checkpoint as `torch.load(path, weights_only=True)`
/// does (tensors on the CPU whatever device they were saved from).
///
/// The file is memory-mapped private and copy-on-write, and each storage
/// borrows its bytes there (no copy; writes copy the pages they touch and
/// never reach the file), or is copied out once where it is not aligned
/// for its dtype.
/// Legacy files (PyTorch < 1.6) are [`Error::LegacyFormat`].
pub fn load(path: impl AsRef<Path>) -> Result<Value> {
    let path = path.as_ref();
    let map = mmap::map_file(path)?;
    pt::read(Backing::mapped(&map)).map_err(|e| with_path(e, path))
}

/// [`load`] from the bytes of a whole checkpoint file.
pub fn load_from_bytes(bytes: &[u8]) -> Result<Value> {
    pt::read(Backing::copying(bytes))
}

/// Saves `value` as `torch.save(value, path)` does (zip format, pickle
/// protocol 2, storages stored uncompressed at 64-byte aligned offsets),
/// atomically.
pub fn save(value: &Value, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    atomic::write_atomic(path, |tmp| {
        let f = std::fs::File::create_new(tmp).map_err(|e| Error::io(tmp, e))?;
        let w = pt::write(value, std::io::BufWriter::new(f))?;
        w.into_inner()
            .map_err(|e| Error::io(tmp, e.into_error()))?
            .sync_all()
            .map_err(|e| Error::io(tmp, e))
    })
}

/// [`save`] into any seekable writer (returned when done).
pub fn save_to_writer<W: Write + Seek>(value: &Value, writer: W) -> Result<W> {
    pt::write(value, writer)
}

/// [`save`] into memory: the bytes of the checkpoint file.
pub fn save_to_bytes(value: &Value) -> Result<Vec<u8>> {
    Ok(pt::write(value, Cursor::new(Vec::new()))?.into_inner())
}

/// Loads a module state dict from a `torch.save` checkpoint or a
/// safetensors file (told apart by their first bytes), with `options`.
pub fn load_state_dict(path: impl AsRef<Path>, options: &LoadOptions) -> Result<StateDict> {
    let path = path.as_ref();
    let map = mmap::map_file(path)?;
    state_dict_from(Backing::mapped(&map), options).map_err(|e| with_path(e, path))
}

/// [`load_state_dict`] from a whole file's bytes.
pub fn load_state_dict_from_bytes(bytes: &[u8], options: &LoadOptions) -> Result<StateDict> {
    state_dict_from(Backing::copying(bytes), options)
}

fn state_dict_from(backing: Backing<'_>, options: &LoadOptions) -> Result<StateDict> {
    match pt::kind(backing.bytes) {
        pt::Kind::Safetensors => options.apply(safetensors_format::read(backing)?.tensors),
        _ => options.state_dict_from(&pt::read(backing)?),
    }
}

/// Saves a module state dict as `torch.save(model.state_dict(), path)`
/// does (an `OrderedDict`), atomically.
pub fn save_state_dict(sd: &StateDict, path: impl AsRef<Path>) -> Result<()> {
    save(&state_dict_to_value(sd), path)
}

/// Loads a safetensors file, memory-mapped: each tensor borrows the
/// file's private copy-on-write map (no copy; a write to a tensor copies
/// only the pages it touches, never changing the file) where its data is
/// aligned for its dtype, else is copied out once.
pub fn load_safetensors(path: impl AsRef<Path>) -> Result<Safetensors> {
    let path = path.as_ref();
    let map = mmap::map_file(path)?;
    safetensors_format::read(Backing::mapped(&map)).map_err(|e| with_path(e, path))
}

/// [`load_safetensors`] from a whole file's bytes.
pub fn load_safetensors_from_bytes(bytes: &[u8]) -> Result<Safetensors> {
    safetensors_format::read(Backing::copying(bytes))
}

/// Saves `tensors` as a safetensors file with the optional `__metadata__`,
/// atomically. Non-contiguous tensors are written contiguously; tensors
/// sharing a storage are written once each (the format has no sharing).
pub fn save_safetensors(
    tensors: &StateDict,
    metadata: Option<&HashMap<String, String>>,
    path: impl AsRef<Path>,
) -> Result<()> {
    atomic::write_atomic(path.as_ref(), |tmp| safetensors_format::write(tensors, metadata, tmp))
}

/// Lists the entries of a `torch.save` checkpoint or a safetensors file
/// (told apart by their first bytes) without reading the tensors' data:
/// each tensor's dotted name, dtype, shape and size, the values that are
/// not tensors, the storages of a `torch.save` file and the `__metadata__`
/// of a safetensors file.
///
/// For a `torch.save` file only the zip directory and the pickle are read
/// (through the same weights-only reader as [`load`], so a file that
/// inspects cleanly names only allowed globals); the storage entries are
/// never looked at, so their bytes are not checked either (a file whose
/// storages are damaged inspects, and fails to [`load`]). For a
/// safetensors file only the header is read, and checked against the
/// file's size.
///
/// ```
/// use ferrotorch_core::Tensor;
/// use ferrotorch_serialize::{Dict, Item, Value, inspect, save};
///
/// let dir = std::env::temp_dir().join(format!("ferrotorch-inspect-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("checkpoint.pt");
/// let mut model = Dict::ordered();
/// model.insert("fc.weight", Tensor::zeros([3, 4])?);
/// let mut ckpt = Dict::new();
/// ckpt.insert("epoch", 3i64);
/// ckpt.insert("model_state_dict", model);
/// save(&Value::Dict(ckpt), &path)?;
///
/// let info = inspect(&path)?;
/// let names: Vec<&str> = info.entries.iter().map(|e| e.name.as_str()).collect();
/// assert_eq!(names, ["epoch", "model_state_dict.fc.weight"]);
/// let Item::Tensor(w) = &info.entries[1].item else { panic!() };
/// assert_eq!((w.dtype.as_str(), w.shape.as_slice(), w.nbytes), ("float32", &[3, 4][..], 48));
/// assert_eq!(info.entries[0].item.to_string(), "3");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn inspect(path: impl AsRef<Path>) -> Result<Inspection> {
    let path = path.as_ref();
    let map = mmap::map_file_lazy(path)?;
    inspect::inspect_bytes(&map).map_err(|e| with_path(e, path))
}

/// [`inspect`] of the bytes of a whole file.
pub fn inspect_bytes(bytes: &[u8]) -> Result<Inspection> {
    inspect::inspect_bytes(bytes)
}

/// Prefixes format errors with the file's path (I/O errors carry it already).
fn with_path(e: Error, path: &Path) -> Error {
    match e {
        Error::Format(d) => Error::Format(format!("{}: {d}", path.display())),
        other => other,
    }
}
