//! `ferrotorch inspect [--json] FILE`: a checkpoint's entries as a table
//! or as JSON.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use ferrotorch::serialize::{Format, Inspection, Item, Location, TensorInfo, inspect};

use crate::args::{self, Spec};
use crate::failure::Failure;
use crate::json;

const HELP: &str = "\
Usage: ferrotorch inspect [--json] FILE

Lists the entries of a torch.save (.pt) or safetensors file without reading
tensor data: each tensor's dotted name, dtype, shape and bytes, the values
that are not tensors, a .pt file's storage sharing and a safetensors file's
__metadata__.

  --json    print JSON instead of a table
";

/// How many characters of a value's repr the table shows.
const VALUE_WIDTH: usize = 60;

/// Runs the command.
pub(crate) fn run(argv: Vec<OsString>) -> Result<String, Failure> {
    let specs = [Spec {
        name: "--json",
        takes_value: false,
    }];
    let parsed = args::parse("inspect", argv, &specs)?;
    if parsed.help {
        return Ok(HELP.to_string());
    }
    args::expect_positionals("inspect", &parsed, &["FILE"])?;
    let path = PathBuf::from(&parsed.positionals[0]);
    let info = inspect(&path)?;
    Ok(if parsed.flag("--json") {
        to_json(&path, &info)
    } else {
        table(&path, &info)
    })
}

/// `1 tensor`, `2 tensors`.
fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `12 bytes`, `1572864 bytes (1.5 MiB)`.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut x = n as f64 / 1024.0;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    format!("{n} bytes ({x:.1} {})", UNITS[unit])
}

fn shape(t: &TensorInfo) -> String {
    let dims: Vec<String> = t.shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(", "))
}

fn display_name(name: &str) -> &str {
    if name.is_empty() { "(the file's value)" } else { name }
}

/// The first `n` characters of `s`, with `...` when cut.
fn truncate(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// The notes on each tensor of a `torch.save` file: storage sharing and
/// `requires_grad`, by entry index.
fn notes(info: &Inspection) -> Vec<String> {
    let shared: HashMap<&str, usize> = info
        .storages
        .iter()
        .filter(|s| s.tensors > 1)
        .map(|s| (s.key.as_str(), s.tensors))
        .collect();
    let mut first: HashMap<&str, &str> = HashMap::new();
    info.entries
        .iter()
        .map(|e| {
            let Item::Tensor(t) = &e.item else { return String::new() };
            let mut parts = Vec::new();
            if let Location::Storage { key, .. } = &t.location
                && let Some(&n) = shared.get(key.as_str())
            {
                match first.get(key.as_str()) {
                    None => {
                        first.insert(key, display_name(&e.name));
                        parts.push(format!("storage {key}, shared by {n} tensors"));
                    }
                    Some(owner) => parts.push(format!("shares storage {key} with {owner}")),
                }
            }
            if t.requires_grad {
                parts.push("requires_grad".into());
            }
            parts.join(", ")
        })
        .collect()
}

/// The human-readable listing.
fn table(path: &Path, info: &Inspection) -> String {
    let mut out = String::new();
    let tensors = info.tensors().count();
    let others = info.entries.len() - tensors;
    let (kind, storages) = match info.format {
        Format::TorchSave => (
            "torch.save checkpoint",
            format!(" in {}", count(info.storages.len(), "storage")),
        ),
        Format::Safetensors => ("safetensors file", String::new()),
    };
    let _ = writeln!(
        out,
        "{}: {kind}, {}{storages}, {}",
        path.display(),
        count(tensors, "tensor"),
        count(others, "other value")
    );
    for (k, v) in &info.metadata {
        let _ = writeln!(out, "__metadata__ {k}: {v}");
    }
    let notes = notes(info);
    let any_note = notes.iter().any(|n| !n.is_empty());
    let mut rows = vec![[
        "NAME".to_string(),
        "DTYPE".to_string(),
        "SHAPE".to_string(),
        "BYTES".to_string(),
        if any_note { "NOTE" } else { "" }.to_string(),
    ]];
    for (e, note) in info.entries.iter().zip(notes) {
        let name = display_name(&e.name).to_string();
        rows.push(match &e.item {
            Item::Tensor(t) => [name, t.dtype.clone(), shape(t), t.nbytes.to_string(), note],
            Item::Value(v) => [
                name,
                v.type_name().to_string(),
                format!("= {}", truncate(&v.to_string(), VALUE_WIDTH)),
                String::new(),
                String::new(),
            ],
        });
    }
    let mut widths = [0usize; 5];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in &rows {
        let line = format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:>w3$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let total = info.tensor_bytes();
    let _ = write!(out, "total: {}, {}", count(tensors, "tensor"), bytes(total));
    if info.data_bytes() != total {
        let _ = write!(out, "; the storages hold {}", bytes(info.data_bytes()));
    }
    out.push('\n');
    out
}

/// The listing as one JSON object.
fn to_json(path: &Path, info: &Inspection) -> String {
    let entries = info.entries.iter().map(|e| {
        let name = json::string(&e.name);
        match &e.item {
            Item::Tensor(t) => {
                let dims = json::array(t.shape.iter().map(usize::to_string));
                let location = match &t.location {
                    Location::Storage { key, offset, stride } => format!(
                        "\"storage\": {}, \"storage_offset\": {offset}, \"stride\": {}",
                        json::string(key),
                        json::array(stride.iter().map(usize::to_string))
                    ),
                    Location::Range { start, end } => format!("\"data_offsets\": [{start}, {end}]"),
                };
                format!(
                    "{{\"name\": {name}, \"type\": \"tensor\", \"dtype\": {}, \"shape\": {dims}, \"bytes\": {}, \
                     \"requires_grad\": {}, {location}}}",
                    json::string(&t.dtype),
                    t.nbytes,
                    t.requires_grad
                )
            }
            Item::Value(v) => format!(
                "{{\"name\": {name}, \"type\": {}, \"value\": {}}}",
                json::string(v.type_name()),
                json::string(&v.to_string())
            ),
        }
    });
    let storages = info.storages.iter().map(|s| {
        format!(
            "{{\"key\": {}, \"bytes\": {}, \"tensors\": {}}}",
            json::string(&s.key),
            s.nbytes,
            s.tensors
        )
    });
    let metadata: Vec<String> = info
        .metadata
        .iter()
        .map(|(k, v)| format!("{}: {}", json::string(k), json::string(v)))
        .collect();
    format!(
        "{{\"file\": {}, \"format\": {}, \"entries\": {}, \"storages\": {}, \"metadata\": {{{}}}, \
         \"tensor_bytes\": {}, \"data_bytes\": {}}}\n",
        json::string(&path.to_string_lossy()),
        json::string(info.format.name()),
        json::array(entries),
        json::array(storages),
        metadata.join(", "),
        info.tensor_bytes(),
        info.data_bytes()
    )
}
