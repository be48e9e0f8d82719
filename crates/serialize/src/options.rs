//! Loading conveniences: choosing the state dict inside a larger
//! checkpoint, the `module.` prefix of `DataParallel` checkpoints, and a
//! dtype to convert floating-point tensors to.

use ferrotorch_core::DType;
use ferrotorch_nn::StateDict;

use crate::convert::value_to_state_dict;
use crate::error::{Error, Result};
use crate::value::Value;

/// How [`load_state_dict`](crate::load_state_dict) turns a file into a
/// module state dict. The default takes the file's top-level dict as it is.
///
/// ```
/// use ferrotorch_serialize::LoadOptions;
/// let opts = LoadOptions::new().entry("model_state_dict").strip_prefix("module.");
/// assert_eq!(opts.entry.as_deref(), Some("model_state_dict"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Take the state dict under this key of the top-level dict (as
    /// `torch.load(path)["model_state_dict"]`); `None`: the top level is
    /// the state dict. Ignored for safetensors files.
    pub entry: Option<String>,
    /// Remove this prefix from every key that has it (PyTorch's
    /// `consume_prefix_in_state_dict_if_present`, typically `"module."`).
    pub strip_prefix: Option<String>,
    /// Put this prefix before every key (after `strip_prefix`).
    pub add_prefix: Option<String>,
    /// Convert every floating-point tensor to this (floating-point) dtype,
    /// as `module.to(dtype)` does; integer and bool tensors are kept.
    pub dtype: Option<DType>,
}

impl LoadOptions {
    /// The default options.
    pub fn new() -> LoadOptions {
        LoadOptions::default()
    }

    /// Sets [`LoadOptions::entry`].
    pub fn entry(mut self, key: impl Into<String>) -> LoadOptions {
        self.entry = Some(key.into());
        self
    }

    /// Sets [`LoadOptions::strip_prefix`].
    pub fn strip_prefix(mut self, prefix: impl Into<String>) -> LoadOptions {
        self.strip_prefix = Some(prefix.into());
        self
    }

    /// Sets [`LoadOptions::add_prefix`].
    pub fn add_prefix(mut self, prefix: impl Into<String>) -> LoadOptions {
        self.add_prefix = Some(prefix.into());
        self
    }

    /// Sets [`LoadOptions::dtype`].
    pub fn dtype(mut self, dtype: DType) -> LoadOptions {
        self.dtype = Some(dtype);
        self
    }

    /// The module state dict of a loaded checkpoint `value`, with these
    /// options applied.
    pub fn state_dict_from(&self, value: &Value) -> Result<StateDict> {
        let v = match &self.entry {
            None => value,
            Some(key) => value
                .as_dict()
                .and_then(|d| d.get_str(key))
                .ok_or_else(|| Error::schema(format!("the checkpoint has no top-level entry '{key}'")))?,
        };
        self.apply(value_to_state_dict(v)?)
    }

    /// Applies the prefix and dtype options to `sd`.
    pub fn apply(&self, sd: StateDict) -> Result<StateDict> {
        let mut sd = match &self.strip_prefix {
            Some(p) => strip_prefix(&sd, p),
            None => sd,
        };
        if let Some(p) = &self.add_prefix {
            sd = add_prefix(&sd, p);
        }
        if let Some(d) = self.dtype {
            sd = to_dtype(&sd, d)?;
        }
        Ok(sd)
    }
}

/// `sd` with `prefix` removed from each key that starts with it, other keys
/// unchanged (PyTorch's `consume_prefix_in_state_dict_if_present`).
pub fn strip_prefix(sd: &StateDict, prefix: &str) -> StateDict {
    sd.strip_prefix(prefix)
}

/// `sd` with `prefix` before every key (to load a bare model's weights
/// into a wrapper, such as a `DataParallel`'s `module.`).
pub fn add_prefix(sd: &StateDict, prefix: &str) -> StateDict {
    sd.iter().map(|(k, t)| (format!("{prefix}{k}"), t.clone())).collect()
}

/// `sd` with every floating-point tensor converted to `dtype` (a copy
/// where the dtype changes); integer and bool tensors (`num_batches_tracked`,
/// masks) are kept, as `Module.to(dtype)` keeps them.
pub fn to_dtype(sd: &StateDict, dtype: DType) -> Result<StateDict> {
    if !dtype.is_floating_point() {
        return Err(Error::schema(format!(
            "loading with dtype {}: only floating-point dtypes convert a state dict (as Module.to)",
            dtype.name()
        )));
    }
    let mut out = StateDict::new();
    for (k, t) in sd.iter() {
        let t = if t.is_floating_point() && t.dtype() != dtype {
            t.detach().to_dtype(dtype)?
        } else {
            t.clone()
        };
        out.insert(k, t);
    }
    Ok(out)
}
