//! [`Device`]: where a tensor's storage lives.

mod parse;

use std::fmt;
use std::sync::OnceLock;

/// A device, as `torch.device`.
///
/// `Cpu` is always present. `Cuda(i)` needs the `cuda` feature and a GPU.
/// `Meta` tensors have shapes and dtypes but no data: every operator with a
/// shape rule runs on them, which makes shape inference free.
/// `PrivateUse1(i)` is the slot for an out-of-tree backend registered with
/// `dispatch::register_backend` (PyTorch's `privateuse1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// Host memory.
    #[default]
    Cpu,
    /// The i-th CUDA GPU.
    Cuda(usize),
    /// Shape-only tensors without storage.
    Meta,
    /// An out-of-tree backend's i-th device.
    PrivateUse1(usize),
}

impl Device {
    /// The device type's name: `cpu`, `cuda`, `meta`, or the registered
    /// name of the private-use backend (default `privateuseone`).
    pub fn type_name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda(_) => "cuda",
            Device::Meta => "meta",
            Device::PrivateUse1(_) => private_use1_name(),
        }
    }

    /// The device index (0 for CPU and meta).
    pub fn index(self) -> usize {
        match self {
            Device::Cpu | Device::Meta => 0,
            Device::Cuda(i) | Device::PrivateUse1(i) => i,
        }
    }

    /// True for the CPU.
    pub fn is_cpu(self) -> bool {
        self == Device::Cpu
    }
}

/// The name the private-use backend registered under (set once, by
/// `dispatch::register_backend` for the `PrivateUse1` key).
static PRIVATE_USE1_NAME: OnceLock<&'static str> = OnceLock::new();

/// The name of the private-use device type (`privateuseone` until a backend registers).
pub fn private_use1_name() -> &'static str {
    PRIVATE_USE1_NAME.get().copied().unwrap_or("privateuseone")
}

/// Records the private-use backend's name (the first registration's wins;
/// the dispatcher allows only one).
pub(crate) fn set_private_use1_name(name: &'static str) {
    let _ = PRIVATE_USE1_NAME.set(name);
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu | Device::Meta => f.write_str(self.type_name()),
            Device::Cuda(i) | Device::PrivateUse1(i) => write!(f, "{}:{i}", self.type_name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display() {
        assert_eq!("cuda:1".parse::<Device>().unwrap(), Device::Cuda(1));
        assert_eq!("cpu".parse::<Device>().unwrap(), Device::Cpu);
        assert_eq!(Device::Cuda(0).to_string(), "cuda:0");
        assert!("tpu".parse::<Device>().is_err());
    }
}
