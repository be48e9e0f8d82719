//! How the examples end on an error: its message as sentences (the error,
//! then each cause it does not already state), and the fix where one is
//! known (the flag or folder to use), never Rust's `Debug` form.
//!
//! Also where the examples find the files that ship with the repository
//! (`data/`) when run from another folder.

#![allow(dead_code)] // each example uses the part it needs

use std::error::Error;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// An error with the fix for it.
#[derive(Debug)]
pub struct WithFix {
    /// What went wrong.
    pub error: Box<dyn Error>,
    /// What to do about it (the flag or folder to use).
    pub fix: String,
}

impl fmt::Display for WithFix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl Error for WithFix {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.error.source()
    }
}

/// `error` with `fix` attached, for [`fail`] to print after it.
pub fn with_fix(error: impl Into<Box<dyn Error>>, fix: impl Into<String>) -> Box<dyn Error> {
    Box::new(WithFix {
        error: error.into(),
        fix: fix.into(),
    })
}

/// `error: <message>` and a `caused by: <cause>` line for each cause whose
/// text the lines before do not already hold.
pub fn describe(e: &(dyn Error + 'static)) -> String {
    let mut text = format!("error: {e}");
    let mut cause = e.source();
    while let Some(c) = cause {
        let line = c.to_string();
        if !text.contains(&line) {
            text.push_str(&format!("\n  caused by: {line}"));
        }
        cause = c.source();
    }
    text
}

/// Prints [`describe`] of `e`, and its fix if it carries one, to standard
/// error; returns exit status 1.
pub fn fail(e: &(dyn Error + 'static)) -> ExitCode {
    eprintln!("{}", describe(e));
    if let Some(w) = e.downcast_ref::<WithFix>() {
        eprintln!("  fix: {}", w.fix);
    }
    ExitCode::FAILURE
}

/// `path` as given when it exists or is absolute; otherwise, for a relative
/// path that exists in the repository these examples were built from (the
/// files of `data/` ship with it), that one, so an example finds its data
/// from any working folder.
pub fn repo_path(path: &Path) -> PathBuf {
    if path.is_absolute() || path.exists() {
        return path.to_path_buf();
    }
    let in_repo = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    if in_repo.exists() { in_repo } else { path.to_path_buf() }
}
