//! [`StateDict`]: tensors by name in insertion order (PyTorch's
//! `OrderedDict`), and loading one into a module's tensors.

use std::collections::HashMap;

use ferrotorch_core::{Error, Result, Tensor, autograd};

/// A module's (or a checkpoint's) tensors by name, in insertion order.
#[derive(Debug, Clone, Default)]
pub struct StateDict {
    entries: Vec<(String, Tensor)>,
    index: HashMap<String, usize>,
}

impl StateDict {
    /// An empty state dict.
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts `tensor` under `key`; an existing key keeps its position
    /// and gets the new tensor, as a Python dict.
    pub fn insert(&mut self, key: impl Into<String>, tensor: Tensor) {
        let key = key.into();
        match self.index.get(&key) {
            Some(&i) => self.entries[i].1 = tensor,
            None => {
                self.index.insert(key.clone(), self.entries.len());
                self.entries.push((key, tensor));
            }
        }
    }

    /// The tensor under `key`.
    pub fn get(&self, key: &str) -> Option<&Tensor> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// Removes and returns the tensor under `key`.
    pub fn remove(&mut self, key: &str) -> Option<Tensor> {
        let i = self.index.remove(key)?;
        let (_, t) = self.entries.remove(i);
        for v in self.index.values_mut() {
            if *v > i {
                *v -= 1;
            }
        }
        Some(t)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.entries.iter().map(|(k, t)| (k.as_str(), t))
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A copy with `prefix` removed from every key that starts with it
    /// (the `module.` of a checkpoint saved from `DataParallel`), other
    /// keys unchanged, in PyTorch's order: as
    /// `consume_prefix_in_state_dict_if_present`, each prefixed key in turn
    /// is popped and its stripped name set, so it moves to the end (or
    /// replaces the value of a key already there, in place).
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// use ferrotorch_nn::StateDict;
    /// let mut sd = StateDict::new();
    /// for k in ["module.0.weight", "head.bias", "module.module.x"] {
    ///     sd.insert(k, Tensor::zeros([1])?);
    /// }
    /// let keys: Vec<_> = sd.strip_prefix("module.").keys().map(String::from).collect();
    /// assert_eq!(keys, ["head.bias", "0.weight", "module.x"]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn strip_prefix(&self, prefix: &str) -> StateDict {
        let mut out = self.clone();
        for (k, _) in &self.entries {
            // Each original key is still there at its turn: only its own
            // turn removes it (an insert of a stripped name never does).
            if let Some(stripped) = k.strip_prefix(prefix)
                && let Some(t) = out.remove(k)
            {
                out.insert(stripped, t);
            }
        }
        out
    }
}

impl FromIterator<(String, Tensor)> for StateDict {
    fn from_iter<I: IntoIterator<Item = (String, Tensor)>>(iter: I) -> Self {
        let mut sd = StateDict::new();
        for (k, t) in iter {
            sd.insert(k, t);
        }
        sd
    }
}

impl<'a> IntoIterator for &'a StateDict {
    type Item = (&'a str, &'a Tensor);
    type IntoIter = Box<dyn Iterator<Item = (&'a str, &'a Tensor)> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

/// What `load_state_dict` did not match (PyTorch's `_IncompatibleKeys`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IncompatibleKeys {
    /// Keys of the module the state dict lacks.
    pub missing_keys: Vec<String>,
    /// Keys of the state dict the module lacks.
    pub unexpected_keys: Vec<String>,
}

fn torch_size(s: &[usize]) -> String {
    let inner: Vec<String> = s.iter().map(usize::to_string).collect();
    format!("torch.Size([{}])", inner.join(", "))
}

fn quoted(keys: &[String]) -> String {
    keys.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ")
}

/// Copies `sd`'s tensors into `targets` (name, the module's tensor) as
/// PyTorch's `load_state_dict`: every matching key is copied, then the
/// problems are reported together.
pub(crate) fn load_into(
    module: &str,
    targets: &[(String, Tensor)],
    sd: &StateDict,
    strict: bool,
) -> Result<IncompatibleKeys> {
    let mut missing = Vec::new();
    let mut mismatched = Vec::new();
    let mut msgs = Vec::new();
    autograd::no_grad(|| -> Result<()> {
        for (key, target) in targets {
            let Some(src) = sd.get(key) else {
                missing.push(key.clone());
                continue;
            };
            if src.shape() != target.shape() {
                msgs.push(format!(
                    "size mismatch for {key}: copying a param with shape {} from checkpoint, the shape in current model is {}.",
                    torch_size(src.shape()),
                    torch_size(target.shape())
                ));
                mismatched.push(key.clone());
                continue;
            }
            target
                .detach()
                .copy_(src)
                .map_err(|e| Error::module(module.to_string(), format!("load_state_dict: copying {key}: {e}")))?;
        }
        Ok(())
    })?;
    let expected: std::collections::HashSet<&str> = targets.iter().map(|(k, _)| k.as_str()).collect();
    let unexpected: Vec<String> = sd
        .keys()
        .filter(|k| !expected.contains(k))
        .map(str::to_string)
        .collect();
    if strict {
        if !unexpected.is_empty() {
            msgs.insert(0, format!("Unexpected key(s) in state_dict: {}. ", quoted(&unexpected)));
        }
        if !missing.is_empty() {
            msgs.insert(0, format!("Missing key(s) in state_dict: {}. ", quoted(&missing)));
        }
    }
    if !msgs.is_empty() {
        return Err(Error::StateDict {
            module: module.to_string(),
            missing: if strict { missing } else { Vec::new() },
            unexpected: if strict { unexpected } else { Vec::new() },
            mismatched,
            detail: format!("\n\t{}", msgs.join("\n\t")),
        });
    }
    Ok(IncompatibleKeys {
        missing_keys: missing,
        unexpected_keys: unexpected,
    })
}
