//! Python's `repr` of a [`Value`]: `3`, `0.12`, `'run'`, `b'\x00\xffab'`,
//! `[True, False, None]`, `(1, 2.5)`, `{'a': 1}`, `OrderedDict({...})`.

use std::fmt::{self, Display, Formatter, Write};

use crate::value::MAX_DEPTH;
use crate::value::{DictKind, Value};

impl Display for Value {
    /// Python's `repr` of the value, as `print(repr(v))` shows it after
    /// `torch.load`; a tensor is shown without its elements, as
    /// `tensor(..., size=(2, 3), dtype=torch.float32)`. Values nested
    /// deeper than [`MAX_DEPTH`](crate::MAX_DEPTH) are shown as `...`.
    ///
    /// ```
    /// use ferrotorch_serialize::Value;
    /// let v = Value::List(vec![Value::Bool(true), Value::None, 0.12.into(), "run".into()]);
    /// assert_eq!(v.to_string(), "[True, None, 0.12, 'run']");
    /// ```
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_value(f, self, 0)
    }
}

fn write_value(f: &mut Formatter<'_>, v: &Value, depth: usize) -> fmt::Result {
    if depth > MAX_DEPTH {
        return f.write_str("...");
    }
    match v {
        Value::None => f.write_str("None"),
        Value::Bool(true) => f.write_str("True"),
        Value::Bool(false) => f.write_str("False"),
        Value::Int(i) => write!(f, "{i}"),
        Value::Float(x) => f.write_str(&python_float(*x)),
        Value::Str(s) => write_str(f, s),
        Value::Bytes(b) => write_bytes(f, b),
        Value::List(items) => {
            f.write_char('[')?;
            write_items(f, items, depth)?;
            f.write_char(']')
        }
        Value::Tuple(items) => {
            f.write_char('(')?;
            write_items(f, items, depth)?;
            if items.len() == 1 {
                f.write_char(',')?;
            }
            f.write_char(')')
        }
        Value::Dict(d) => {
            let class = match d.kind() {
                DictKind::Dict => None,
                DictKind::OrderedDict => Some("OrderedDict"),
                DictKind::Counter => Some("Counter"),
            };
            if let Some(c) = class {
                // Python 3.12: `OrderedDict()` / `Counter()` when empty.
                if d.is_empty() {
                    return write!(f, "{c}()");
                }
                write!(f, "{c}(")?;
            }
            f.write_char('{')?;
            for (i, (k, v)) in d.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{k}: ")?;
                write_value(f, v, depth + 1)?;
            }
            f.write_char('}')?;
            if class.is_some() {
                f.write_char(')')?;
            }
            Ok(())
        }
        Value::Tensor(t) => {
            f.write_str("tensor(..., size=(")?;
            for (i, s) in t.shape().iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{s}")?;
            }
            if t.shape().len() == 1 {
                f.write_char(',')?;
            }
            write!(f, "), dtype=torch.{})", t.dtype().name())
        }
    }
}

fn write_items(f: &mut Formatter<'_>, items: &[Value], depth: usize) -> fmt::Result {
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write_value(f, v, depth + 1)?;
    }
    Ok(())
}

/// Python's `repr` of a float: the shortest digits that read back to
/// `x` (as Rust's), exponents written `1e-05` / `1e+16`, `nan`, `inf`.
pub(crate) fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // Rust's Debug switches to exponents at the same magnitudes as Python
    // (below 1e-4, from 1e16 on) and prints a `.0` on whole numbers.
    let s = format!("{x:?}");
    match s.split_once('e') {
        None => s,
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            let mantissa = mantissa.strip_suffix(".0").unwrap_or(mantissa);
            format!("{mantissa}e{sign}{digits:0>2}")
        }
    }
}

/// The quote Python's repr picks: `'` unless the text has one and no `"`.
fn quote(has_single: bool, has_double: bool) -> char {
    if has_single && !has_double { '"' } else { '\'' }
}

fn write_str(f: &mut Formatter<'_>, s: &str) -> fmt::Result {
    let q = quote(s.contains('\''), s.contains('"'));
    f.write_char(q)?;
    for c in s.chars() {
        match c {
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if c == q => write!(f, "\\{c}")?,
            c if u32::from(c) < 0x20 || u32::from(c) == 0x7f => write!(f, "\\x{:02x}", u32::from(c))?,
            c => f.write_char(c)?,
        }
    }
    f.write_char(q)
}

fn write_bytes(f: &mut Formatter<'_>, b: &[u8]) -> fmt::Result {
    let q = quote(b.contains(&b'\''), b.contains(&b'"'));
    f.write_char('b')?;
    f.write_char(q)?;
    for &c in b {
        match c {
            b'\\' => f.write_str("\\\\")?,
            b'\n' => f.write_str("\\n")?,
            b'\r' => f.write_str("\\r")?,
            b'\t' => f.write_str("\\t")?,
            c if char::from(c) == q => write!(f, "\\{}", char::from(c))?,
            0x20..=0x7e => f.write_char(char::from(c))?,
            c => write!(f, "\\x{c:02x}")?,
        }
    }
    f.write_char(q)
}

#[cfg(test)]
mod tests {
    use super::python_float;
    use crate::value::{Dict, Value};

    #[test]
    fn floats_as_python() {
        for (x, want) in [
            (0.12, "0.12"),
            (3.0, "3.0"),
            (-0.0, "-0.0"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1.2345e200, "1.2345e+200"),
            (123456789012345.0, "123456789012345.0"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(python_float(x), want, "{x}");
        }
    }

    #[test]
    fn containers_and_strings_as_python() {
        let mut d = Dict::new();
        d.insert("a", Value::Tuple(vec![Value::Int(1)]));
        d.insert(7i64, Value::Bytes(b"\x00\xffa'b".to_vec()));
        d.insert("q", "it's");
        d.insert("e", Value::Tuple(vec![]));
        assert_eq!(
            Value::Dict(d).to_string(),
            r#"{'a': (1,), 7: b"\x00\xffa'b", 'q': "it's", 'e': ()}"#
        );
        let mut o = Dict::ordered();
        o.insert("x", Value::Str("tab\there\\".into()));
        assert_eq!(Value::Dict(o).to_string(), r"OrderedDict({'x': 'tab\there\\'})");
        assert_eq!(Value::Dict(Dict::ordered()).to_string(), "OrderedDict()");
    }
}
