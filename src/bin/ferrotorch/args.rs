//! A command's arguments: options (`--name`, `--name VALUE`,
//! `--name=VALUE`) anywhere, positionals, `--` ending the options.

use std::ffi::OsString;

use crate::failure::Failure;

/// An option a command accepts.
pub(crate) struct Spec {
    /// Its name, with the dashes (`--key`).
    pub(crate) name: &'static str,
    /// Whether it takes a value.
    pub(crate) takes_value: bool,
}

/// The parsed arguments of one command.
pub(crate) struct Parsed {
    /// The options given, by name, with their values (empty for flags).
    pub(crate) options: Vec<(&'static str, String)>,
    /// The other arguments, in order.
    pub(crate) positionals: Vec<OsString>,
    /// Whether `-h` / `--help` was given.
    pub(crate) help: bool,
}

impl Parsed {
    /// Whether the flag `name` was given.
    pub(crate) fn flag(&self, name: &str) -> bool {
        self.options.iter().any(|(n, _)| *n == name)
    }

    /// The value of the option `name` (the last one given).
    pub(crate) fn value(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses `argv` for the command `command` accepting `specs`.
pub(crate) fn parse(command: &str, argv: Vec<OsString>, specs: &[Spec]) -> Result<Parsed, Failure> {
    let mut parsed = Parsed {
        options: Vec::new(),
        positionals: Vec::new(),
        help: false,
    };
    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        let Some(text) = arg.to_str().filter(|t| t.starts_with('-') && t.len() > 1) else {
            parsed.positionals.push(arg);
            continue;
        };
        if text == "--" {
            parsed.positionals.extend(it);
            break;
        }
        if text == "-h" || text == "--help" {
            parsed.help = true;
            continue;
        }
        let (name, inline) = match text.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (text, None),
        };
        let spec = specs
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| Failure::Usage(format!("{command}: unknown option '{name}'")))?;
        let value = match (spec.takes_value, inline) {
            (false, None) => String::new(),
            (false, Some(_)) => return Err(Failure::Usage(format!("{command}: {name} takes no value"))),
            (true, Some(v)) => v,
            (true, None) => it
                .next()
                .and_then(|v| v.into_string().ok())
                .ok_or_else(|| Failure::Usage(format!("{command}: {name} needs a value")))?,
        };
        parsed.options.push((spec.name, value));
    }
    Ok(parsed)
}

/// Checks that exactly `names.len()` positionals were given.
pub(crate) fn expect_positionals(command: &str, parsed: &Parsed, names: &[&str]) -> Result<(), Failure> {
    let n = parsed.positionals.len();
    if n == names.len() {
        return Ok(());
    }
    let what = names.join(" ");
    Err(Failure::Usage(if n < names.len() {
        format!(
            "{command}: missing {} (usage: ferrotorch {command} ... {what})",
            names[n]
        )
    } else {
        format!(
            "{command}: unexpected argument '{}' (usage: ferrotorch {command} ... {what})",
            parsed.positionals[names.len()].to_string_lossy()
        )
    }))
}
