//! PyTorch's module repr (`print(model)`).

use crate::Module;
use crate::module::members;

/// PyTorch's `_addindent`: every line after the first indented by `n`.
pub(crate) fn add_indent(s: &str, n: usize) -> String {
    let mut lines = s.split('\n');
    let first = lines.next().unwrap_or_default().to_string();
    let pad = " ".repeat(n);
    lines.fold(first, |acc, l| format!("{acc}\n{pad}{l}"))
}

/// `Name(extra)` for a leaf, or the extra lines and `(name): child` lines
/// indented inside `Name(` ... `)`, as `nn.Module.__repr__`.
pub(crate) fn default_repr(m: &dyn Module) -> String {
    let extra = m.extra_repr();
    let extra_lines: Vec<String> = if extra.is_empty() {
        Vec::new()
    } else {
        extra.split('\n').map(str::to_string).collect()
    };
    let child_lines: Vec<String> = members(m)
        .children
        .into_iter()
        .map(|(name, c)| format!("({name}): {}", add_indent(&c.repr(), 2)))
        .collect();
    let mut s = format!("{}(", m.type_name());
    if extra_lines.len() == 1 && child_lines.is_empty() {
        s.push_str(&extra_lines[0]);
    } else if !extra_lines.is_empty() || !child_lines.is_empty() {
        let lines: Vec<String> = extra_lines.into_iter().chain(child_lines).collect();
        s.push_str("\n  ");
        s.push_str(&lines.join("\n  "));
        s.push('\n');
    }
    s.push(')');
    s
}

/// The repr of `m` (what `Display` of a derived module prints).
pub fn repr<M: Module + ?Sized>(m: &M) -> String {
    m.repr()
}
