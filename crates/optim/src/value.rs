//! [`Value`] and [`Dict`]: the values of optimizer and scheduler state
//! dicts, as the Python objects PyTorch pickles (tensors, floats, ints,
//! bools, strings, tuples, lists, `None`, nested dicts).

use ferrotorch_core::Tensor;

/// One value of a state dict: what PyTorch's optimizer and scheduler
/// `state_dict()`s hold, so that a checkpoint writer can turn it into
/// Python's pickle objects one to one.
#[derive(Debug, Clone)]
pub enum Value {
    /// `None`.
    None,
    /// A Python `bool`.
    Bool(bool),
    /// A Python `int`.
    Int(i64),
    /// A Python `float`.
    Float(f64),
    /// A Python `str`.
    Str(String),
    /// A Python `tuple` (Adam's `betas`).
    Tuple(Vec<Value>),
    /// A Python `list` (a group's `params`, a scheduler's `base_lrs`).
    List(Vec<Value>),
    /// A Python `dict` with string keys.
    Dict(Dict),
    /// A Python `dict` with integer keys, in insertion order (MultiStepLR's
    /// `milestones`, a `collections.Counter` in PyTorch: milestone -> count).
    IntKeyDict(Vec<(i64, Value)>),
    /// A tensor (optimizer state: `step`, `exp_avg`, ...).
    Tensor(Tensor),
}

/// 2^63: the floats of magnitude below it are the whole floats an `i64`
/// holds (`-2^63` aside).
const I64_BOUND: f64 = 9_223_372_036_854_775_808.0;

impl Value {
    /// The number as an `f64` (`Float`, `Int`, a bool, or a one-element
    /// tensor), `None` for anything else.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(x) => Some(*x),
            Value::Int(i) => Some(*i as f64),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            Value::Tensor(t) if t.numel() == 1 => t.item::<f64>().ok(),
            _ => None,
        }
    }

    /// The integer (`Int`, a `Float` with an integer value, or a bool as
    /// Python counts it: `True` is 1).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Float(x) if x.fract() == 0.0 && x.abs() < I64_BOUND => Some(*x as i64),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The bool (`Bool`, or an `Int` 0 / 1).
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Int(0) => Some(false),
            Value::Int(1) => Some(true),
            _ => None,
        }
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The items of a tuple or a list.
    pub fn as_seq(&self) -> Option<&[Value]> {
        match self {
            Value::Tuple(v) | Value::List(v) => Some(v),
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

    /// The dict, if this is one.
    pub fn as_dict(&self) -> Option<&Dict> {
        match self {
            Value::Dict(d) => Some(d),
            _ => None,
        }
    }

    /// A list of floats.
    pub fn floats(values: &[f64]) -> Value {
        Value::List(values.iter().copied().map(Value::Float).collect())
    }

    /// The floats of a tuple or list of numbers.
    pub fn as_f64_vec(&self) -> Option<Vec<f64>> {
        self.as_seq()?.iter().map(Value::as_f64).collect()
    }

    /// Whether two values are equal: numbers by value, tensors by shape,
    /// dtype and elements.
    pub fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::None, Value::None) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a == b || (a.is_nan() && b.is_nan()),
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::Tuple(a), Value::Tuple(b)) | (Value::List(a), Value::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
            }
            (Value::Dict(a), Value::Dict(b)) => a.same(b),
            (Value::IntKeyDict(a), Value::IntKeyDict(b)) => {
                a.len() == b.len() && a.iter().all(|(k, v)| b.iter().any(|(l, w)| k == l && v.same(w)))
            }
            (Value::Tensor(a), Value::Tensor(b)) => {
                a.shape() == b.shape()
                    && a.dtype() == b.dtype()
                    && matches!((a.to_vec::<f64>(), b.to_vec::<f64>()), (Ok(x), Ok(y)) if x.iter().zip(&y).all(|(p, q)| p == q || (p.is_nan() && q.is_nan())))
            }
            _ => false,
        }
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Value::Float(x)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}

impl From<Dict> for Value {
    fn from(d: Dict) -> Self {
        Value::Dict(d)
    }
}

/// A Python dict with string keys, in insertion order (the order PyTorch's
/// dicts have, and so the order a pickle of them lists their items).
#[derive(Debug, Clone, Default)]
pub struct Dict(Vec<(String, Value)>);

impl Dict {
    /// An empty dict.
    pub fn new() -> Dict {
        Dict(Vec::new())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Sets `key` (in place when present, else appended, as Python's dict).
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        let key = key.into();
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(i).1)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    /// The items in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the dict has no items.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether both dicts have the same keys with [`Value::same`] values
    /// (in any order).
    pub fn same(&self, other: &Dict) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k).is_some_and(|w| v.same(w)))
    }
}

impl<K: Into<String>, V: Into<Value>> FromIterator<(K, V)> for Dict {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut d = Dict::new();
        for (k, v) in iter {
            d.insert(k, v);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::{Dict, Value};
    use ferrotorch_core::Tensor;

    /// The accessors read a state dict's numbers as Python does: a bool is
    /// an int (`True + 1 == 2`), a float counts as an int only when it is
    /// whole, an int is 0 / 1 as a bool; anything else is `None`.
    #[test]
    fn accessors_read_numbers_as_python() {
        assert_eq!(Value::Int(-3).as_i64(), Some(-3));
        assert_eq!(Value::Float(4.0).as_i64(), Some(4));
        assert_eq!(Value::Float(4.5).as_i64(), None);
        assert_eq!(Value::Float(1e19).as_i64(), None);
        // Python's `int(x)` of a whole float, as far as an i64 reaches.
        assert_eq!(Value::Float(9.2e18).as_i64(), Some(9_200_000_000_000_000_000));
        assert_eq!(Value::Float(-9.2e18).as_i64(), Some(-9_200_000_000_000_000_000));
        assert_eq!(
            Value::Float(9_223_372_036_854_774_784.0).as_i64(),
            Some(9_223_372_036_854_774_784)
        );
        assert_eq!(Value::Float(9_223_372_036_854_775_808.0).as_i64(), None);
        assert_eq!(Value::Float(f64::INFINITY).as_i64(), None);
        assert_eq!(Value::Float(f64::NAN).as_i64(), None);
        assert_eq!(Value::Bool(true).as_i64(), Some(1));
        assert_eq!(Value::Bool(false).as_i64(), Some(0));
        assert_eq!(Value::Str("1".into()).as_i64(), None);
        assert_eq!(Value::Bool(true).as_f64(), Some(1.0));
        assert_eq!(Value::Int(2).as_f64(), Some(2.0));
        assert_eq!(Value::Tensor(Tensor::from_slice(&[2.5f32])).as_f64(), Some(2.5));
        assert_eq!(Value::Tensor(Tensor::from_slice(&[1.0f32, 2.0])).as_f64(), None);
        assert_eq!(Value::None.as_f64(), None);
        assert_eq!(Value::Int(1).as_bool(), Some(true));
        assert_eq!(Value::Int(0).as_bool(), Some(false));
        assert_eq!(Value::Int(2).as_bool(), None);
        assert_eq!(Value::Float(1.0).as_bool(), None);
        assert_eq!(Value::Bool(true).as_bool(), Some(true));
        assert_eq!(Value::Bool(false).as_bool(), Some(false));
        assert_eq!(Value::Float(-2.5).as_f64(), Some(-2.5));
        assert_eq!(Value::Float(-7.0).as_i64(), Some(-7));
        assert_eq!(Value::Bool(false).as_f64(), Some(0.0));
        assert_eq!(Value::Str("x".into()).as_f64(), None);
    }

    /// The container accessors give the contents of their own kind only.
    #[test]
    fn container_accessors() {
        let t = Tensor::from_slice(&[1.0f32, 2.0]);
        let tv = Value::from(t);
        assert_eq!(tv.as_tensor().map(|t| t.to_vec::<f32>().unwrap()), Some(vec![1.0, 2.0]));
        assert!(Value::Float(1.0).as_tensor().is_none());
        let pair = Value::Tuple(vec![Value::Float(0.9), Value::Int(1)]);
        assert_eq!(pair.as_seq().map(<[Value]>::len), Some(2));
        assert_eq!(pair.as_f64_vec(), Some(vec![0.9, 1.0]));
        let list = Value::floats(&[0.5, -0.25]);
        assert!(matches!(&list, Value::List(v) if v.len() == 2));
        assert_eq!(list.as_f64_vec(), Some(vec![0.5, -0.25]));
        assert_eq!(Value::List(vec![]).as_f64_vec(), Some(vec![]));
        assert_eq!(Value::List(vec![Value::None]).as_f64_vec(), None);
        assert!(Value::Str("a".into()).as_seq().is_none());
        assert_eq!(Value::Float(1.0).as_f64_vec(), None);
        assert_eq!(Value::from("cos").as_str(), Some("cos"));
        assert_eq!(Value::Int(1).as_str(), None);
        let d: Dict = [("a", 1i64)].into_iter().collect();
        let dv = Value::from(d);
        assert_eq!(dv.as_dict().map(Dict::len), Some(1));
        assert!(Value::Int(1).as_dict().is_none());
        assert!(matches!(Value::from(2.5), Value::Float(x) if x == 2.5));
        assert!(matches!(Value::from(true), Value::Bool(true)));
        assert!(matches!(Value::from(-3i64), Value::Int(-3)));
    }

    /// `same`: equal kinds with equal contents (NaN equal to NaN; a tuple
    /// is not a list; dicts in any order; tensors by shape, dtype and
    /// elements).
    #[test]
    fn same_compares_kind_and_contents() {
        let f = |x: f64| Value::Float(x);
        let yes = [
            (Value::None, Value::None),
            (Value::Bool(true), Value::Bool(true)),
            (Value::Int(3), Value::Int(3)),
            (f(0.5), f(0.5)),
            (f(f64::NAN), f(f64::NAN)),
            (Value::from("a"), Value::from("a")),
            (
                Value::Tuple(vec![f(1.0), Value::Int(2)]),
                Value::Tuple(vec![f(1.0), Value::Int(2)]),
            ),
            (Value::List(vec![f(1.0)]), Value::List(vec![f(1.0)])),
            (
                Value::Dict([("a", 1i64), ("b", 2i64)].into_iter().collect()),
                Value::Dict([("b", 2i64), ("a", 1i64)].into_iter().collect()),
            ),
            (
                Value::IntKeyDict(vec![(1, Value::Int(2)), (5, Value::Int(1))]),
                Value::IntKeyDict(vec![(5, Value::Int(1)), (1, Value::Int(2))]),
            ),
            (
                Value::Tensor(Tensor::from_slice(&[1.0f32, f32::NAN])),
                Value::Tensor(Tensor::from_slice(&[1.0f32, f32::NAN])),
            ),
        ];
        for (a, b) in &yes {
            assert!(a.same(b), "{a:?} {b:?}");
        }
        let no = [
            (Value::None, Value::Int(0)),
            (Value::Bool(true), Value::Bool(false)),
            (Value::Int(3), Value::Int(4)),
            (Value::Int(1), f(1.0)),
            (f(0.5), f(0.25)),
            (f(f64::NAN), f(1.0)),
            (f(1.0), f(f64::NAN)),
            (Value::from("a"), Value::from("b")),
            (Value::Tuple(vec![f(1.0)]), Value::List(vec![f(1.0)])),
            (Value::Tuple(vec![f(1.0)]), Value::Tuple(vec![f(1.0), f(2.0)])),
            (Value::List(vec![f(1.0), f(2.0)]), Value::List(vec![f(1.0), f(3.0)])),
            (
                Value::Dict([("a", 1i64)].into_iter().collect()),
                Value::Dict([("a", 2i64)].into_iter().collect()),
            ),
            (
                Value::Dict([("a", 1i64)].into_iter().collect()),
                Value::Dict([("a", 1i64), ("b", 1i64)].into_iter().collect()),
            ),
            (
                Value::IntKeyDict(vec![(1, Value::Int(2))]),
                Value::IntKeyDict(vec![(1, Value::Int(2)), (2, Value::Int(1))]),
            ),
            (
                Value::IntKeyDict(vec![(1, Value::Int(2))]),
                Value::IntKeyDict(vec![(2, Value::Int(2))]),
            ),
            (
                Value::IntKeyDict(vec![(1, Value::Int(2))]),
                Value::IntKeyDict(vec![(1, Value::Int(3))]),
            ),
            (
                Value::Tensor(Tensor::from_slice(&[1.0f32, 2.0])),
                Value::Tensor(Tensor::from_slice(&[1.0f32, 3.0])),
            ),
            (
                Value::Tensor(Tensor::from_slice(&[1.0f32, 2.0])),
                Value::Tensor(Tensor::from_slice(&[1.0f64, 2.0])),
            ),
            (
                Value::Tensor(Tensor::from_slice(&[1.0f32, 2.0])),
                Value::Tensor(Tensor::from_vec(vec![1.0f32, 2.0], [1, 2]).unwrap()),
            ),
        ];
        for (a, b) in &no {
            assert!(!a.same(b), "{a:?} {b:?}");
        }
    }

    /// `Dict`: Python's dict in insertion order (a set key keeps its place).
    #[test]
    fn dict_is_an_insertion_ordered_python_dict() {
        let mut d = Dict::new();
        assert!(d.is_empty());
        assert_eq!(d.len(), 0);
        d.insert("lr", 0.1);
        d.insert("betas", Value::Tuple(vec![Value::Float(0.9), Value::Float(0.999)]));
        d.insert("step", 3i64);
        d.insert("lr", 0.2);
        assert!(!d.is_empty());
        assert_eq!(d.len(), 3);
        assert_eq!(d.keys().collect::<Vec<_>>(), ["lr", "betas", "step"]);
        let items: Vec<(&str, Option<f64>)> = d.iter().map(|(k, v)| (k, v.as_f64())).collect();
        assert_eq!(items, [("lr", Some(0.2)), ("betas", None), ("step", Some(3.0))]);
        assert_eq!(d.get("lr").and_then(Value::as_f64), Some(0.2));
        assert_eq!(d.get("step").and_then(Value::as_i64), Some(3));
        assert!(d.get("eps").is_none());
        assert!(d.contains_key("betas"));
        assert!(!d.contains_key("eps"));
        let other: Dict = [("step", Value::Int(3)), ("lr", Value::Float(0.2))]
            .into_iter()
            .collect();
        assert!(!d.same(&other));
        assert!(!other.same(&d));
        assert_eq!(d.remove("betas").and_then(|v| v.as_f64_vec()), Some(vec![0.9, 0.999]));
        assert!(d.remove("betas").is_none());
        assert_eq!(d.keys().collect::<Vec<_>>(), ["lr", "step"]);
        assert!(d.same(&other));
        assert!(other.same(&d));
        let changed: Dict = [("step", Value::Int(4)), ("lr", Value::Float(0.2))]
            .into_iter()
            .collect();
        assert!(!d.same(&changed));
        let renamed: Dict = [("steps", Value::Int(3)), ("lr", Value::Float(0.2))]
            .into_iter()
            .collect();
        assert!(!d.same(&renamed));
    }
}
