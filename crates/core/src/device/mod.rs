//! [`Device`]: where a tensor's storage lives.

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// A device, as `torch.device`.
///
/// `Cpu` is always present. `Cuda(i)` needs the `cuda` feature and a GPU.
/// `Meta` tensors have shapes and dtypes but no data: every operator with a
/// shape rule runs on them, which makes shape inference free.
/// `PrivateUse1(i)` is the slot for an out-of-tree backend registered with
/// [`crate::dispatch::register_backend`] (PyTorch's `privateuse1`).
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
            Device::PrivateUse1(_) => crate::dispatch::private_use1_name(),
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

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu | Device::Meta => f.write_str(self.type_name()),
            Device::Cuda(i) | Device::PrivateUse1(i) => write!(f, "{}:{i}", self.type_name()),
        }
    }
}

impl FromStr for Device {
    type Err = Error;

    /// Parses `cpu`, `meta`, `cuda`, `cuda:1`, `privateuseone:0` (or the
    /// registered private-use name).
    fn from_str(s: &str) -> Result<Self, Error> {
        let (kind, index) = match s.split_once(':') {
            Some((k, i)) => {
                let i = i
                    .parse::<usize>()
                    .map_err(|_| Error::invalid("device", format!("invalid device string '{s}'")))?;
                (k, i)
            }
            None => (s, 0),
        };
        match kind {
            "cpu" => Ok(Device::Cpu),
            "meta" => Ok(Device::Meta),
            "cuda" => Ok(Device::Cuda(index)),
            k if k == "privateuseone" || k == crate::dispatch::private_use1_name() => Ok(Device::PrivateUse1(index)),
            _ => Err(Error::invalid("device", format!("invalid device string '{s}'"))),
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
