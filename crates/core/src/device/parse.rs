//! Parsing device strings (`"cuda:1"`): above [`crate::error`], whose
//! `Error` it returns, as the device type itself is below it.

use std::str::FromStr;

use super::{Device, private_use1_name};
use crate::error::Error;

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
            k if k == "privateuseone" || k == private_use1_name() => Ok(Device::PrivateUse1(index)),
            _ => Err(Error::invalid("device", format!("invalid device string '{s}'"))),
        }
    }
}
