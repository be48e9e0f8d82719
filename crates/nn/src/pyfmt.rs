//! Python's spelling of values in module reprs: bools, floats, size
//! tuples, and `_addindent` for nested reprs.

/// PyTorch's `_addindent`: every line after the first indented by `n`.
pub(crate) fn add_indent(s: &str, n: usize) -> String {
    let mut lines = s.split('\n');
    let first = lines.next().unwrap_or_default().to_string();
    let pad = " ".repeat(n);
    lines.fold(first, |acc, l| format!("{acc}\n{pad}{l}"))
}

/// Python's spelling of a bool in reprs.
pub(crate) fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Python's `repr` of a float (`0.01`, `1.0`, `1e-05`).
pub(crate) fn py_float(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        // Python switches to exponent form: shortest digits, two-digit exponent.
        let s = format!("{v:e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mant}e{sign}{:02}", exp.abs());
    }
    let s = format!("{v}");
    if s.contains('.') { s } else { format!("{s}.0") }
}

/// Python's repr of a tuple of sizes: `(768,)`, `(3, 4)`.
pub(crate) fn py_tuple(s: &[usize]) -> String {
    match s {
        [one] => format!("({one},)"),
        _ => format!("({})", s.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    }
}
