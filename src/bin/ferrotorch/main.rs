//! `ferrotorch`: checkpoint tools on the command line.
//!
//! - `ferrotorch inspect [--json] FILE` lists a `torch.save` or safetensors
//!   file's entries (name, dtype, shape, bytes) without reading tensor data.
//! - `ferrotorch convert [--key KEY] [--flatten] [--to FORMAT] IN OUT`
//!   converts a state dict between the two formats, either way.
//!
//! Exit status: 0 on success, 1 when a file cannot be read or written or
//! does not hold what the command needs, 2 for a usage error.

mod args;
mod convert;
mod failure;
mod inspect;
mod json;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use failure::Failure;

/// The help text.
const HELP: &str = "\
ferrotorch: checkpoint tools (torch.save .pt files and safetensors)

Usage:
  ferrotorch inspect [--json] FILE
  ferrotorch convert [--key KEY] [--flatten] [--to pt|safetensors] IN OUT
  ferrotorch --help | --version

Commands:
  inspect   List the entries of a .pt or .safetensors file: each tensor's
            dotted name, dtype, shape and bytes, and the other values
            (epoch, loss, ...), without reading tensor data. A .pt file's
            pickle is interpreted as torch.load(weights_only=True) does,
            never executed.
            --json      print JSON instead of a table
  convert   Convert a state dict between .pt and .safetensors, either way
            (the input's format from its first bytes, the output's from
            its extension: .safetensors, or .pt/.pth/.bin/.ckpt).
            A .pt input must be a flat dict of tensors, unless
            --key KEY   takes the state dict under the top-level entry KEY
                        (such as model_state_dict)
            --flatten   writes every tensor under its dotted name
                        (optimizer_state_dict.state.0.exp_avg) and drops
                        the values that are not tensors
            --to FMT    the output format (pt or safetensors), whatever
                        OUT's extension
            safetensors output gets the input's __metadata__ (from a .pt
            file: {\"format\": \"pt\"}); .pt output is an OrderedDict that
            torch.load(path, weights_only=True) reads. OUT is written
            atomically (a temporary file, then a rename).

Exit status: 0 success, 1 a file error, 2 a usage error.
";

fn run(mut argv: Vec<OsString>) -> Result<String, Failure> {
    if argv.is_empty() {
        return Err(Failure::Usage("no command given".into()));
    }
    let command = argv.remove(0);
    match command.to_str() {
        Some("inspect") => inspect::run(argv),
        Some("convert") => convert::run(argv),
        Some("-h" | "--help" | "help") => Ok(HELP.to_string()),
        Some("-V" | "--version") => Ok(format!("ferrotorch {}\n", env!("CARGO_PKG_VERSION"))),
        _ => Err(Failure::Usage(format!(
            "unknown command '{}' (the commands are inspect and convert)",
            command.to_string_lossy()
        ))),
    }
}

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    match run(argv) {
        Ok(out) => match std::io::stdout().lock().write_all(out.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            // `ferrotorch inspect big.pt | head`: the reader has all it wanted.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "ferrotorch: writing the output: {e}");
                ExitCode::from(1)
            }
        },
        Err(Failure::Usage(msg)) => {
            let _ = writeln!(
                std::io::stderr(),
                "ferrotorch: {msg}\n\nUsage:\n  ferrotorch inspect [--json] FILE\n  \
                 ferrotorch convert [--key KEY] [--flatten] [--to pt|safetensors] IN OUT\n\
                 Run `ferrotorch --help` for more."
            );
            ExitCode::from(2)
        }
        Err(Failure::File(msg)) => {
            let _ = writeln!(std::io::stderr(), "ferrotorch: {msg}");
            ExitCode::from(1)
        }
    }
}
