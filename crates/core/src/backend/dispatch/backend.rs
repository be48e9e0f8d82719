//! Device backends: how memory of a device type is allocated and moved.
//!
//! Kernels are per operator (in each [`super::OpEntry`]); what is per device
//! type is memory: allocation and copies to and from the host. A new backend
//! implements [`Backend`], registers it with [`register_backend`] and adds
//! kernels to the operators it supports.

use std::sync::OnceLock;

use super::key::DispatchKey;
use crate::storage::{Buffer, CpuBuffer};
use crate::{Device, Error, Result};

/// Memory management of one device type.
pub trait Backend: Send + Sync + 'static {
    /// The device type's name (`cpu`, `cuda`, or the private-use name).
    fn name(&self) -> &'static str;

    /// Fails when `device` does not exist (e.g. a GPU index past the count).
    fn check_device(&self, device: Device) -> Result<()> {
        let _ = device;
        Ok(())
    }

    /// `nbytes` of uninitialised (or, with `zeroed`, zero) memory on `device`.
    fn allocate(&self, device: Device, nbytes: usize, zeroed: bool) -> Result<Buffer>;

    /// A new buffer on `device` holding a copy of `bytes`.
    fn copy_from_host(&self, device: Device, bytes: &[u8]) -> Result<Buffer>;

    /// Copies `out.len()` bytes starting at byte `offset` of `buf` into `out`.
    fn copy_to_host(&self, buf: &Buffer, offset: usize, out: &mut [u8]) -> Result<()>;
}

const NUM_BACKENDS: usize = DispatchKey::Autograd as usize;

static BACKENDS: [OnceLock<&'static dyn Backend>; NUM_BACKENDS] = [const { OnceLock::new() }; NUM_BACKENDS];

/// Registers the backend of a device type. `key` must be a backend key; each
/// key takes one backend. For `PrivateUse1`, the backend's name becomes the
/// device type's name (`Device::PrivateUse1(0)` prints as `name:0`).
///
/// The built-in backends (CPU, meta) are always present, so registering one
/// of their keys is an [`Error::Registration`].
pub fn register_backend(key: DispatchKey, backend: &'static dyn Backend) -> Result<()> {
    let refuse = |detail: String| Error::Registration {
        what: format!("backend {}", backend.name()),
        detail,
    };
    if !key.is_backend() {
        return Err(refuse(format!("{key} is not a backend key")));
    }
    if builtin(key).is_some() {
        return Err(refuse(format!("a backend is already registered for {key}")));
    }
    BACKENDS[key as usize]
        .set(backend)
        .map_err(|_| refuse(format!("a backend is already registered for {key}")))?;
    if key == DispatchKey::PrivateUse1 {
        crate::device::set_private_use1_name(backend.name());
    }
    Ok(())
}

/// The built-in backend of a key, if it has one.
fn builtin(key: DispatchKey) -> Option<&'static dyn Backend> {
    match key {
        DispatchKey::Cpu => Some(&CpuBackend),
        DispatchKey::Meta => Some(&MetaBackend),
        _ => None,
    }
}

/// The backend of `device`, or [`Error::DeviceUnavailable`].
pub fn backend_for(device: Device) -> Result<&'static dyn Backend> {
    let key = DispatchKey::for_device(device);
    match builtin(key).or_else(|| BACKENDS[key as usize].get().copied()) {
        Some(b) => {
            b.check_device(device)?;
            Ok(b)
        }
        None => Err(Error::DeviceUnavailable {
            device,
            reason: match device {
                Device::Cuda(_) => "ferrotorch was built without the `cuda` feature".into(),
                Device::PrivateUse1(_) => "no backend is registered for the private-use device type".into(),
                _ => "its backend is not registered".into(),
            },
        }),
    }
}

/// Host memory.
struct CpuBackend;

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    /// Host memory is always zeroed here: an uninitialised buffer could be
    /// read through the safe API (the dispatcher's own outputs are allocated
    /// uninitialised without this trait, for kernels that write them whole).
    fn allocate(&self, _device: Device, nbytes: usize, _zeroed: bool) -> Result<Buffer> {
        Ok(Buffer::Cpu(CpuBuffer::zeroed(nbytes)?))
    }

    fn copy_from_host(&self, _device: Device, bytes: &[u8]) -> Result<Buffer> {
        Ok(Buffer::Cpu(CpuBuffer::from_bytes(bytes)?))
    }

    fn copy_to_host(&self, buf: &Buffer, offset: usize, out: &mut [u8]) -> Result<()> {
        let b = buf
            .as_cpu()
            .ok_or_else(|| Error::invalid("to", "CPU backend got a buffer of another device"))?;
        let src = offset
            .checked_add(out.len())
            .and_then(|end| b.bytes().get(offset..end))
            .ok_or_else(|| {
                Error::invalid(
                    "to",
                    format!(
                        "reading {} bytes at offset {offset} from a buffer of {} bytes",
                        out.len(),
                        b.len()
                    ),
                )
            })?;
        out.copy_from_slice(src);
        Ok(())
    }
}

/// Shape-only tensors.
struct MetaBackend;

impl Backend for MetaBackend {
    fn name(&self) -> &'static str {
        "meta"
    }

    fn allocate(&self, _device: Device, _nbytes: usize, _zeroed: bool) -> Result<Buffer> {
        Ok(Buffer::Meta)
    }

    fn copy_from_host(&self, _device: Device, _bytes: &[u8]) -> Result<Buffer> {
        Ok(Buffer::Meta)
    }

    fn copy_to_host(&self, _buf: &Buffer, _offset: usize, _out: &mut [u8]) -> Result<()> {
        Err(Error::NoData {
            op: "to",
            device: Device::Meta,
        })
    }
}
