//! `ferrotorch convert IN OUT`: a state dict from a `.pt` file to a
//! safetensors file or back.
//!
//! A `.pt` input must hold a flat dict of tensors (what
//! `torch.save(model.state_dict(), path)` writes). For a training
//! checkpoint the conversion is refused, naming the entries that are not
//! tensors, unless `--key KEY` picks the top-level entry holding the state
//! dict or `--flatten` writes every tensor under its dotted name (and
//! drops the other values): silently dropping an optimizer's state or the
//! epoch is not done by default.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use ferrotorch::nn::StateDict;
use ferrotorch::serialize::{
    Format, Value, inspect, load, load_safetensors, save_safetensors, save_state_dict, value_to_state_dict,
};

use crate::args::{self, Spec};
use crate::failure::Failure;

const HELP: &str = "\
Usage: ferrotorch convert [--key KEY] [--flatten] [--to pt|safetensors] IN OUT

Converts a state dict between a torch.save file (.pt) and a safetensors
file, either way. IN's format is told from its first bytes, OUT's from its
extension (.safetensors, or .pt/.pth/.bin/.ckpt) unless --to says it.

A .pt input must be a flat dict of tensors (torch.save(model.state_dict())).
A training checkpoint is refused, naming its entries that are not tensors,
unless
  --key KEY   takes the state dict under the top-level entry KEY
              (such as model_state_dict), or
  --flatten   writes every tensor under its dotted name
              (optimizer_state_dict.state.0.exp_avg) and drops the values
              that are not tensors.
  --to FMT    the output format, pt or safetensors, whatever OUT's extension

A safetensors output keeps the input's __metadata__ (from a .pt input it is
{\"format\": \"pt\"}); a .pt output is an OrderedDict of the tensors, which
torch.load(path, weights_only=True) reads. OUT is written atomically.
";

/// How many names an error message lists.
const NAMES_SHOWN: usize = 6;

/// Runs the command.
pub(crate) fn run(argv: Vec<OsString>) -> Result<String, Failure> {
    let specs = [
        Spec {
            name: "--key",
            takes_value: true,
        },
        Spec {
            name: "--flatten",
            takes_value: false,
        },
        Spec {
            name: "--to",
            takes_value: true,
        },
    ];
    let parsed = args::parse("convert", argv, &specs)?;
    if parsed.help {
        return Ok(HELP.to_string());
    }
    args::expect_positionals("convert", &parsed, &["IN", "OUT"])?;
    let input = PathBuf::from(&parsed.positionals[0]);
    let output = PathBuf::from(&parsed.positionals[1]);
    let out_format = output_format(&output, parsed.value("--to"))?;
    let key = parsed.value("--key");
    let flatten = parsed.flag("--flatten");

    // The format from the first bytes, and a clear error for a file that
    // is neither, before anything is loaded.
    let in_format = inspect(&input)?.format;
    let mut notes = Vec::new();
    let (sd, metadata) = match in_format {
        Format::Safetensors => {
            if key.is_some() || flatten {
                return Err(Failure::Usage(format!(
                    "convert: {} is a safetensors file, already flat: --key and --flatten apply to .pt input",
                    input.display()
                )));
            }
            let st = load_safetensors(&input)?;
            (st.tensors, st.metadata)
        }
        Format::TorchSave => {
            let value = load(&input)?;
            let (value, what) = select(&value, key, &input)?;
            let sd = if flatten {
                flattened(value, &what, &mut notes)?
            } else {
                strict(value, &what)?
            };
            (sd, HashMap::from([("format".to_string(), "pt".to_string())]))
        }
    };
    let bytes: usize = sd.iter().map(|(_, t)| t.numel() * t.element_size()).sum();
    match out_format {
        Format::Safetensors => save_safetensors(&sd, Some(&metadata), &output)?,
        Format::TorchSave => {
            let only_format = metadata.len() == 1 && metadata.get("format").is_some_and(|f| f == "pt");
            if !metadata.is_empty() && !only_format {
                let mut keys: Vec<&str> = metadata.keys().map(String::as_str).collect();
                keys.sort_unstable();
                notes.push(format!(
                    "the __metadata__ of {} ({}) is not written: a .pt state dict has no place for it",
                    input.display(),
                    keys.join(", ")
                ));
            }
            save_state_dict(&sd, &output)?;
        }
    }
    let mut out = format!(
        "{} ({}) -> {} ({}): {} tensors, {bytes} bytes\n",
        input.display(),
        in_format.name(),
        output.display(),
        out_format.name(),
        sd.len()
    );
    for n in notes {
        out.push_str(&format!("note: {n}\n"));
    }
    Ok(out)
}

/// The output format: `--to`, else OUT's extension.
fn output_format(output: &Path, to: Option<&str>) -> Result<Format, Failure> {
    if let Some(to) = to {
        return match to {
            "pt" | "torch" => Ok(Format::TorchSave),
            "safetensors" => Ok(Format::Safetensors),
            other => Err(Failure::Usage(format!(
                "convert: --to {other}: the formats are pt and safetensors"
            ))),
        };
    }
    let ext = output.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("safetensors") => Ok(Format::Safetensors),
        Some("pt" | "pth" | "bin" | "ckpt") => Ok(Format::TorchSave),
        _ => Err(Failure::Usage(format!(
            "convert: cannot tell the format of {} from its extension: use .safetensors or .pt/.pth/.bin/.ckpt, \
             or --to pt|safetensors",
            output.display()
        ))),
    }
}

/// The value to convert: the whole file, or its top-level entry `key`;
/// with a description for messages.
fn select<'a>(value: &'a Value, key: Option<&str>, input: &Path) -> Result<(&'a Value, String), Failure> {
    let Some(key) = key else {
        return Ok((value, input.display().to_string()));
    };
    let Some(d) = value.as_dict() else {
        return Err(Failure::File(format!(
            "{} holds a {}, not a dict: --key {key} selects nothing",
            input.display(),
            value.type_name()
        )));
    };
    match d.get_str(key) {
        Some(v) => Ok((v, format!("entry '{key}' of {}", input.display()))),
        None => {
            let keys: Vec<String> = d.keys().map(ToString::to_string).collect();
            Err(Failure::File(format!(
                "{} has no top-level entry '{key}' (it has {})",
                input.display(),
                keys.join(", ")
            )))
        }
    }
}

/// `names` joined, at most [`NAMES_SHOWN`] of them and a count of the rest.
fn listed(names: &[String]) -> String {
    let mut s = names.iter().take(NAMES_SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > NAMES_SHOWN {
        s.push_str(&format!(" and {} more", names.len() - NAMES_SHOWN));
    }
    s
}

/// The state dict that `value` is (a dict of tensors with string keys),
/// or an error naming what is not a tensor and how to choose.
fn strict(value: &Value, what: &str) -> Result<StateDict, Failure> {
    let err = match value_to_state_dict(value) {
        Ok(sd) => return Ok(sd),
        Err(e) => e,
    };
    let Some(d) = value.as_dict() else {
        return Err(Failure::File(format!(
            "{what} holds a {}, not a state dict (a dict of tensors){}",
            value.type_name(),
            flatten_hint(value)
        )));
    };
    let not_tensors: Vec<String> = d
        .iter()
        .filter(|(_, v)| v.as_tensor().is_none())
        .map(|(k, v)| format!("{} ({})", key_name(k), v.type_name()))
        .collect();
    if not_tensors.is_empty() {
        // Every value is a tensor: a key is not a string.
        return Err(Failure::File(format!(
            "{what} is not a state dict: {err}{}",
            flatten_hint(value)
        )));
    }
    let candidates: Vec<String> = d
        .iter()
        .filter(|(_, v)| {
            v.as_dict()
                .is_some_and(|s| !s.is_empty() && value_to_state_dict(v).is_ok())
        })
        .map(|(k, _)| key_name(k))
        .collect();
    let mut msg = format!(
        "{what} is not a flat state dict (a dict of tensors): {} {} not {}",
        listed(&not_tensors),
        if not_tensors.len() == 1 { "is" } else { "are" },
        if not_tensors.len() == 1 { "a tensor" } else { "tensors" }
    );
    match candidates.as_slice() {
        [] => {}
        [one] => msg.push_str(&format!(
            ".\nThe state dict is probably '{one}': pick it with --key {one}"
        )),
        many => msg.push_str(&format!(
            ".\nThe entries {} are dicts of tensors: pick one with --key NAME",
            many.join(", ")
        )),
    }
    msg.push_str(&flatten_hint(value));
    Err(Failure::File(msg))
}

/// A dict key as a name (strings without quotes).
fn key_name(k: &ferrotorch::serialize::Key) -> String {
    match k {
        ferrotorch::serialize::Key::Str(s) => s.clone(),
        ferrotorch::serialize::Key::Int(i) => i.to_string(),
    }
}

/// The `--flatten` suggestion, when there are tensors to flatten.
fn flatten_hint(value: &Value) -> String {
    let leaves = value.leaves();
    let tensors = leaves.iter().filter(|(_, v)| v.as_tensor().is_some()).count();
    if tensors == 0 {
        return String::new();
    }
    format!(
        ".\nOr write all {tensors} tensors under their dotted names with --flatten (dropping {} other values).",
        leaves.len() - tensors
    )
}

/// Every tensor of `value` under its dotted name; the other values are
/// dropped (listed in a note).
fn flattened(value: &Value, what: &str, notes: &mut Vec<String>) -> Result<StateDict, Failure> {
    let mut sd = StateDict::new();
    let mut dropped = Vec::new();
    for (name, v) in value.leaves() {
        match v {
            Value::Tensor(t) => {
                if sd.get(&name).is_some() {
                    return Err(Failure::File(format!(
                        "{what}: two tensors flatten to the name '{name}'"
                    )));
                }
                sd.insert(name, t.clone());
            }
            _ => dropped.push(name),
        }
    }
    if sd.is_empty() {
        return Err(Failure::File(format!("{what} holds no tensor")));
    }
    if !dropped.is_empty() {
        notes.push(format!(
            "dropped {} values that are not tensors: {}",
            dropped.len(),
            listed(&dropped)
        ));
    }
    Ok(sd)
}
