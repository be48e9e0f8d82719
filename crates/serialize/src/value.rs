//! [`Value`], [`Key`] and [`Dict`]: the Python objects a `torch.save`
//! checkpoint holds, as far as `torch.load(weights_only=True)` builds them.

use std::collections::HashMap;

use ferrotorch_core::Tensor;

/// How deep containers may nest in a checkpoint (the pickle reader and
/// writer, and every walk over a [`Value`], stop there).
pub const MAX_DEPTH: usize = 256;

/// One object of a checkpoint: what `torch.save` pickles and
/// `torch.load(weights_only=True)` gives back.
///
/// Tensors are ferrotorch tensors; two tensors that shared a storage in
/// the file share one here (and are written back sharing it).
#[derive(Debug, Clone)]
pub enum Value {
    /// `None`.
    None,
    /// A Python `bool`.
    Bool(bool),
    /// A Python `int` that fits an `i64` (larger ones are an error on load).
    Int(i64),
    /// A Python `float`.
    Float(f64),
    /// A Python `str`.
    Str(String),
    /// A Python `bytes` (or `bytearray`).
    Bytes(Vec<u8>),
    /// A Python `list`.
    List(Vec<Value>),
    /// A Python `tuple` (also what a `torch.Size` loads as).
    Tuple(Vec<Value>),
    /// A Python `dict`, `collections.OrderedDict` or `collections.Counter`
    /// (see [`Dict::kind`]).
    Dict(Dict),
    /// A tensor (or an `nn.Parameter`: then it requires grad).
    Tensor(Tensor),
}

impl Value {
    /// The Python type name, for messages (`dict`, `Tensor`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(d) => match d.kind() {
                DictKind::Dict => "dict",
                DictKind::OrderedDict => "OrderedDict",
                DictKind::Counter => "Counter",
            },
            Value::Tensor(_) => "Tensor",
        }
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The dict, if this is one.
    pub fn as_dict(&self) -> Option<&Dict> {
        match self {
            Value::Dict(d) => Some(d),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is an `Int`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The number as an `f64` (`Float`, or `Int` converted).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(x) => Some(*x),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// The items of a list or a tuple.
    pub fn as_seq(&self) -> Option<&[Value]> {
        match self {
            Value::List(v) | Value::Tuple(v) => Some(v),
            _ => None,
        }
    }

    /// Whether two values are equal as Python's `==` would say for these
    /// objects, with tensors compared by dtype, shape and elements (NaN
    /// equal to NaN, so that a round trip compares equal); list and tuple
    /// are different types, dict and OrderedDict compare by items in order.
    /// Unlike Python, values of two types are never the same (`1`, `1.0`
    /// and `True` differ), so that a round trip that changed a type fails.
    pub fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::None, Value::None) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits() || a == b || (a.is_nan() && b.is_nan()),
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::Bytes(a), Value::Bytes(b)) => a == b,
            (Value::List(a), Value::List(b)) | (Value::Tuple(a), Value::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
            }
            (Value::Dict(a), Value::Dict(b)) => {
                a.kind() == b.kind()
                    && a.len() == b.len()
                    && a.iter()
                        .zip(b.iter())
                        .all(|((ka, va), (kb, vb))| ka == kb && va.same(vb))
            }
            (Value::Tensor(a), Value::Tensor(b)) => tensors_equal(a, b),
            _ => false,
        }
    }
}

/// Whether two tensors have the same dtype, shape and elements (compared
/// as f64, which holds every value of every core dtype exactly; NaN equals
/// NaN).
pub(crate) fn tensors_equal(a: &Tensor, b: &Tensor) -> bool {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return false;
    }
    match (a.to_vec::<f64>(), b.to_vec::<f64>()) {
        (Ok(x), Ok(y)) => x
            .iter()
            .zip(&y)
            .all(|(p, q)| p.to_bits() == q.to_bits() || p == q || (p.is_nan() && q.is_nan())),
        _ => false,
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Value::Float(x)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl From<Dict> for Value {
    fn from(d: Dict) -> Self {
        Value::Dict(d)
    }
}

/// A dict key: PyTorch's checkpoints key dicts by strings (state dicts,
/// param groups) or integers (optimizer state by parameter index).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// A Python `str` key.
    Str(String),
    /// A Python `int` key.
    Int(i64),
}

impl std::fmt::Display for Key {
    /// As Python's `repr` of the key (`'weight'`, `0`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Str(s) => write!(f, "'{s}'"),
            Key::Int(i) => write!(f, "{i}"),
        }
    }
}

impl From<&str> for Key {
    fn from(s: &str) -> Self {
        Key::Str(s.to_string())
    }
}

impl From<String> for Key {
    fn from(s: String) -> Self {
        Key::Str(s)
    }
}

impl From<i64> for Key {
    fn from(i: i64) -> Self {
        Key::Int(i)
    }
}

/// Which Python class a [`Dict`] is (and is written back as).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum DictKind {
    /// A plain `dict` (optimizer state dicts, training checkpoints).
    #[default]
    Dict,
    /// A `collections.OrderedDict` (what `Module.state_dict()` returns).
    OrderedDict,
    /// A `collections.Counter` (MultiStepLR's `milestones`).
    Counter,
}

/// A Python dict in insertion order, keyed by strings or integers.
///
/// [`Dict::kind`] records whether it was (or is to be written as) a plain
/// `dict`, a `collections.OrderedDict` (the type of `Module.state_dict()`)
/// or a `collections.Counter`. [`Dict::attributes`] are the Python
/// attributes of an `OrderedDict` or `Counter` (a state dict's
/// `_metadata`: per-module versions), kept from load to save.
#[derive(Debug, Clone, Default)]
pub struct Dict {
    entries: Vec<(Key, Value)>,
    index: HashMap<Key, usize>,
    kind: DictKind,
    attributes: Option<Box<Dict>>,
}

impl Dict {
    /// An empty plain `dict`.
    pub fn new() -> Dict {
        Dict::default()
    }

    /// An empty `collections.OrderedDict`.
    pub fn ordered() -> Dict {
        Dict::with_kind(DictKind::OrderedDict)
    }

    /// An empty dict of the class `kind`.
    pub fn with_kind(kind: DictKind) -> Dict {
        Dict {
            kind,
            ..Dict::default()
        }
    }

    /// The Python class of the dict.
    pub fn kind(&self) -> DictKind {
        self.kind
    }

    /// Changes the Python class the dict is written as.
    pub fn set_kind(&mut self, kind: DictKind) {
        self.kind = kind;
    }

    /// The object's Python attributes (its `__dict__`, string keys), if
    /// it has any: a state dict's `{"_metadata": ...}`.
    pub fn attributes(&self) -> Option<&Dict> {
        self.attributes.as_deref()
    }

    /// Sets the object's Python attributes; they are written only for an
    /// `OrderedDict` or a `Counter` (a plain dict has none in Python).
    pub fn set_attributes(&mut self, attributes: Option<Dict>) {
        self.attributes = attributes.map(Box::new);
    }

    /// Whether this is a `collections.OrderedDict`.
    pub fn is_ordered_dict(&self) -> bool {
        self.kind == DictKind::OrderedDict
    }

    /// Sets `key` (in place when present, else appended, as Python's dict).
    pub fn insert(&mut self, key: impl Into<Key>, value: impl Into<Value>) {
        let key = key.into();
        let value = value.into();
        match self.index.get(&key) {
            Some(&i) => self.entries[i].1 = value,
            None => {
                self.index.insert(key.clone(), self.entries.len());
                self.entries.push((key, value));
            }
        }
    }

    /// The value under `key`.
    pub fn get(&self, key: &Key) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// The value under the string key `key`.
    pub fn get_str(&self, key: &str) -> Option<&Value> {
        self.get(&Key::Str(key.to_string()))
    }

    /// The value under the integer key `key`.
    pub fn get_int(&self, key: i64) -> Option<&Value> {
        self.get(&Key::Int(key))
    }

    /// Removes `key`, returning its value (later items keep their order).
    pub fn remove(&mut self, key: &Key) -> Option<Value> {
        let i = self.index.remove(key)?;
        let (_, v) = self.entries.remove(i);
        for slot in self.index.values_mut() {
            if *slot > i {
                *slot -= 1;
            }
        }
        Some(v)
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The items in order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the dict has no items.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl IntoIterator for Dict {
    type Item = (Key, Value);
    type IntoIter = std::vec::IntoIter<(Key, Value)>;

    /// The items in order, by value.
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<K: Into<Key>, V: Into<Value>> FromIterator<(K, V)> for Dict {
    /// A plain `dict` of the items (later duplicates overwrite earlier ones in place).
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut d = Dict::new();
        for (k, v) in iter {
            d.insert(k, v);
        }
        d
    }
}
