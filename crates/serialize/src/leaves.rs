//! [`Value::leaves`]: a nested checkpoint as a flat list of dotted names.

use crate::value::MAX_DEPTH;
use crate::value::{Key, Value};

impl Value {
    /// The leaves of the value with their dotted paths, in order:
    /// non-empty dicts are entered (each item named by its key, integer
    /// keys in decimal), and so are lists and tuples that hold a tensor or
    /// a non-empty dict somewhere (each item named by its index); tensors
    /// and every other value (numbers, strings, `None`, empty dicts, lists
    /// of plain values) are leaves. A value that is itself a leaf has the
    /// empty path. Containers nested deeper than [`MAX_DEPTH`](crate::MAX_DEPTH)
    /// are leaves.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// use ferrotorch_serialize::{Dict, Value};
    ///
    /// let mut state = Dict::new();
    /// state.insert(0i64, Dict::from_iter([("exp_avg", Tensor::zeros(3)?)]));
    /// let mut opt = Dict::new();
    /// opt.insert("state", state);
    /// opt.insert("param_groups", Value::List(vec![Dict::from_iter([("lr", 0.001)]).into()]));
    /// let names: Vec<String> = Value::Dict(opt).leaves().into_iter().map(|(n, _)| n).collect();
    /// assert_eq!(names, ["state.0.exp_avg", "param_groups.0.lr"]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn leaves(&self) -> Vec<(String, &Value)> {
        let mut out = Vec::new();
        collect(self, String::new(), 0, &mut out);
        out
    }
}

/// Whether a list or tuple is entered: it holds a tensor or a non-empty
/// dict somewhere.
fn has_structure(v: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    match v {
        Value::Tensor(_) => true,
        Value::Dict(d) => !d.is_empty(),
        Value::List(items) | Value::Tuple(items) => items.iter().any(|i| has_structure(i, depth + 1)),
        _ => false,
    }
}

fn join(path: &str, part: &str) -> String {
    if path.is_empty() {
        part.to_string()
    } else {
        format!("{path}.{part}")
    }
}

fn collect<'a>(v: &'a Value, path: String, depth: usize, out: &mut Vec<(String, &'a Value)>) {
    if depth > MAX_DEPTH {
        out.push((path, v));
        return;
    }
    match v {
        Value::Dict(d) if !d.is_empty() => {
            for (k, item) in d.iter() {
                let part = match k {
                    Key::Str(s) => s.clone(),
                    Key::Int(i) => i.to_string(),
                };
                collect(item, join(&path, &part), depth + 1, out);
            }
        }
        Value::List(items) | Value::Tuple(items) if has_structure(v, depth) => {
            for (i, item) in items.iter().enumerate() {
                collect(item, join(&path, &i.to_string()), depth + 1, out);
            }
        }
        leaf => out.push((path, leaf)),
    }
}
