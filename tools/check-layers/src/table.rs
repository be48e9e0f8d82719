//! The layer tables of `docs/architecture.md`: under the heading
//! `## Layer tables`, one `### \`file\`` heading per target (its root file,
//! as `crates/core/src/lib.rs`), then a table whose first column is the
//! layer number (lower layers first) and whose second column lists the
//! modules of that layer in backticks (`crate` for the root file). A module
//! entry covers its submodules unless they have an entry of their own;
//! `crate` covers the root file only.

use std::collections::BTreeMap;

/// One module entry of a table.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The module path (`backend::dispatch`, or `crate`).
    pub module: String,
    /// Its layer.
    pub layer: i64,
    /// The line of the document it is on.
    pub line: usize,
}

/// The tables by target folder.
pub type Tables = BTreeMap<String, Vec<Entry>>;

/// Reads every table of the `## Layer tables` section of `doc`.
pub fn parse(doc: &str) -> Result<Tables, String> {
    let mut tables = Tables::new();
    let mut in_section = false;
    let mut current: Option<String> = None;
    for (i, line) in doc.lines().enumerate() {
        let lineno = i + 1;
        if let Some(h) = line.strip_prefix("## ") {
            in_section = h.trim_start().starts_with("Layer tables");
            current = None;
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some(h) = line.strip_prefix("### ") {
            let dir = backticked(h).into_iter().next().ok_or_else(|| {
                format!("docs line {lineno}: a layer table heading names its target's root file in backticks")
            })?;
            if tables.contains_key(&dir) {
                return Err(format!("docs line {lineno}: a second table for `{dir}`"));
            }
            tables.insert(dir.clone(), Vec::new());
            current = Some(dir);
            continue;
        }
        let Some(dir) = &current else { continue };
        let t = line.trim();
        if !t.starts_with('|') {
            continue;
        }
        let cells: Vec<&str> = t.trim_matches('|').split('|').map(str::trim).collect();
        let Some(Ok(layer)) = cells.first().map(|c| c.parse::<i64>()) else {
            continue; // the header and the separator row
        };
        let Some(mods) = cells.get(1) else {
            return Err(format!("docs line {lineno}: a layer row without modules"));
        };
        let entries = tables.get_mut(dir).expect("current table exists");
        if let Some(last) = entries.last()
            && last.layer > layer
        {
            return Err(format!(
                "docs line {lineno}: layer {layer} after layer {}: rows go from the lowest layer up",
                last.layer
            ));
        }
        let names = backticked(mods);
        if names.is_empty() {
            return Err(format!(
                "docs line {lineno}: a layer row names its modules in backticks"
            ));
        }
        for module in names {
            if entries.iter().any(|e| e.module == module) {
                return Err(format!("docs line {lineno}: `{module}` is in the table twice"));
            }
            entries.push(Entry {
                module,
                layer,
                line: lineno,
            });
        }
    }
    Ok(tables)
}

/// The texts between backticks.
fn backticked(s: &str) -> Vec<String> {
    s.split('`').skip(1).step_by(2).map(|t| t.trim().to_string()).collect()
}

/// The entry that covers `module`: its own, or its nearest ancestor's
/// (`crate` covers the root file only, so every top-level module needs an
/// entry of its own).
pub fn entry_for<'a>(entries: &'a [Entry], module: &str) -> Option<&'a Entry> {
    let mut m = module;
    loop {
        if let Some(e) = entries.iter().find(|e| e.module == m) {
            return Some(e);
        }
        m = &m[..m.rfind("::")?];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rows_in_the_section_only() {
        let doc = "## Other\n### `x`\n| 0 | `a` |\n## Layer tables\n### `crates/a/src`\n\
                   | layer | modules |\n|---|---|\n| 0 | `error`, `dtype` | base |\n| 1 | `ops` | ops |\n";
        let t = parse(doc).unwrap();
        assert_eq!(t.len(), 1);
        let e = &t["crates/a/src"];
        assert_eq!(
            e.iter().map(|e| (e.module.as_str(), e.layer)).collect::<Vec<_>>(),
            [("error", 0), ("dtype", 0), ("ops", 1)]
        );
        assert_eq!(entry_for(e, "ops::unary").unwrap().module, "ops");
        assert!(entry_for(e, "tensor").is_none());
    }

    #[test]
    fn refuses_descending_rows_and_duplicates() {
        let doc = "## Layer tables\n### `a`\n| 1 | `x` |\n| 0 | `y` |\n";
        assert!(parse(doc).unwrap_err().contains("lowest layer up"));
        let doc = "## Layer tables\n### `a`\n| 0 | `x` |\n| 1 | `x` |\n";
        assert!(parse(doc).unwrap_err().contains("twice"));
    }
}
