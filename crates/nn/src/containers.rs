//! Containers: [`Sequential`], `ModuleList` (any `Vec` of modules) and
//! [`ModuleDict`].

use std::borrow::Cow;

use ferrotorch_core::{Result, Tensor};

use crate::pyfmt::add_indent;
use crate::{Forward, Module, ModuleState, Visitor};

impl<M: Module + ?Sized> Module for Box<M> {
    fn visit<'a>(&'a self, visitor: &mut dyn Visitor<'a>) {
        (**self).visit(visitor);
    }

    fn type_name(&self) -> Cow<'static, str> {
        (**self).type_name()
    }

    fn as_dyn(&self) -> &dyn Module {
        (**self).as_dyn()
    }

    fn extra_repr(&self) -> String {
        (**self).extra_repr()
    }

    fn state(&self) -> Option<&ModuleState> {
        (**self).state()
    }

    fn repr(&self) -> String {
        (**self).repr()
    }
}

/// A `Vec` of modules is PyTorch's `ModuleList`: children named `0`, `1`,
/// ..., and its repr groups repeated identical layers (`(0-5): 6 x
/// TransformerEncoderLayer(...)`).
impl<M: Module> Module for Vec<M> {
    fn visit<'a>(&'a self, visitor: &mut dyn Visitor<'a>) {
        for (i, m) in self.iter().enumerate() {
            visitor.module(&i.to_string(), m);
        }
    }

    fn type_name(&self) -> Cow<'static, str> {
        Cow::Borrowed("ModuleList")
    }

    fn as_dyn(&self) -> &dyn Module {
        self
    }

    fn repr(&self) -> String {
        if self.is_empty() {
            return "ModuleList()".into();
        }
        let reprs: Vec<String> = self.iter().map(|m| m.repr()).collect();
        let mut groups: Vec<(usize, usize, &str)> = Vec::new();
        for (i, r) in reprs.iter().enumerate() {
            match groups.last_mut() {
                Some((_, end, last)) if *last == r.as_str() => *end = i,
                _ => groups.push((i, i, r)),
            }
        }
        let lines: Vec<String> = groups
            .into_iter()
            .map(|(start, end, r)| {
                let local = if start == end {
                    format!("({start}): {r}")
                } else {
                    format!("({start}-{end}): {} x {r}", end - start + 1)
                };
                add_indent(&local, 2)
            })
            .collect();
        format!("ModuleList(\n  {}\n)", lines.join("\n  "))
    }
}

/// Layers applied one after the other (PyTorch's `nn.Sequential`); its
/// children are named `0`, `1`, ... or by the names given to
/// [`Sequential::push_named`].
///
/// ```
/// use ferrotorch_core::Tensor;
/// use ferrotorch_nn::{Forward, Linear, Module, ReLU, Sequential};
/// let net = Sequential::new()
///     .push(Linear::new(4, 8)?)
///     .push(ReLU::new())
///     .push(Linear::new(8, 2)?);
/// let names: Vec<_> = net.state_dict().keys().map(String::from).collect();
/// assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
/// assert_eq!(net.call(&Tensor::ones([1, 4])?)?.shape(), &[1, 2]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
#[derive(Default)]
pub struct Sequential {
    layers: Vec<(String, Box<dyn Forward>)>,
    state: ModuleState,
}

impl Sequential {
    /// An empty sequence (its forward is the identity).
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `layer` under the next index (`str(len(self))`, as
    /// PyTorch's `append`).
    pub fn push(self, layer: impl Forward + 'static) -> Self {
        self.push_boxed(Box::new(layer))
    }

    /// Appends `layer` under `name` (PyTorch's `Sequential(OrderedDict(...))`).
    /// A name already taken has its layer replaced in place, as PyTorch's
    /// `add_module`.
    pub fn push_named(self, name: impl Into<String>, layer: impl Forward + 'static) -> Self {
        self.add(name.into(), Box::new(layer))
    }

    /// Appends an already boxed layer under the next index.
    pub fn push_boxed(self, layer: Box<dyn Forward>) -> Self {
        let name = self.layers.len().to_string();
        self.add(name, layer)
    }

    /// `add_module(name, layer)`: appended, or in the place of the layer of
    /// that name (so that names, and state-dict keys, stay unique).
    fn add(mut self, name: String, layer: Box<dyn Forward>) -> Self {
        match self.layers.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = layer,
            None => self.layers.push((name, layer)),
        }
        self
    }

    /// The layer at `index`.
    pub fn get(&self, index: usize) -> Option<&dyn Forward> {
        self.layers.get(index).map(|(_, l)| l.as_ref())
    }

    /// The number of layers.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether there are no layers.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl Module for Sequential {
    fn visit<'a>(&'a self, visitor: &mut dyn Visitor<'a>) {
        for (name, l) in &self.layers {
            visitor.module(name, l.as_dyn());
        }
    }

    fn type_name(&self) -> Cow<'static, str> {
        Cow::Borrowed("Sequential")
    }

    fn as_dyn(&self) -> &dyn Module {
        self
    }

    fn state(&self) -> Option<&ModuleState> {
        Some(&self.state)
    }
}

impl Forward for Sequential {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        for (_, l) in &self.layers {
            y = l.call(&y)?;
        }
        Ok(y)
    }
}

impl std::fmt::Display for Sequential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.repr())
    }
}

/// Modules by name in insertion order (PyTorch's `nn.ModuleDict`).
pub struct ModuleDict<M: Module = Box<dyn Module>> {
    entries: Vec<(String, M)>,
}

impl<M: Module> Default for ModuleDict<M> {
    fn default() -> Self {
        ModuleDict { entries: Vec::new() }
    }
}

impl<M: Module> ModuleDict<M> {
    /// An empty dict.
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts `module` under `name` (replacing, in place, one of the same
    /// name).
    pub fn insert(&mut self, name: impl Into<String>, module: M) {
        let name = name.into();
        match self.entries.iter_mut().find(|(k, _)| *k == name) {
            Some((_, m)) => *m = module,
            None => self.entries.push((name, module)),
        }
    }

    /// The module under `name`.
    pub fn get(&self, name: &str) -> Option<&M> {
        self.entries.iter().find(|(k, _)| k == name).map(|(_, m)| m)
    }

    /// The names in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<M: Module> Module for ModuleDict<M> {
    fn visit<'a>(&'a self, visitor: &mut dyn Visitor<'a>) {
        for (name, m) in &self.entries {
            visitor.module(name, m);
        }
    }

    fn type_name(&self) -> Cow<'static, str> {
        Cow::Borrowed("ModuleDict")
    }

    fn as_dyn(&self) -> &dyn Module {
        self
    }
}
