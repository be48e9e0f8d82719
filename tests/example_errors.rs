//! The examples' errors as a new user meets them: sentences with the fix,
//! never Rust's `Debug` form, and the data that ships with the repository
//! found from any working folder.

#[path = "../examples/common/mod.rs"]
mod common;
#[path = "../examples/mnist/train.rs"]
mod train;

use clap::Parser;
use common::report::{WithFix, describe, repo_path};

#[test]
fn a_missing_data_folder_is_a_sentence_with_the_flag_to_use() {
    let args = train::Args::parse_from(["mnist", "--data-dir", "/nonexistent/mnist", "--workers", "0"]);
    let e = train::run(&args).expect_err("no MNIST files there");
    let text = describe(&*e);
    assert!(text.starts_with("error: /nonexistent/mnist/"), "{text}");
    assert!(text.contains("MNIST file not found"), "{text}");
    for debug_form in ["Io {", "Custom {", "kind:", "Format {"] {
        assert!(!text.contains(debug_form), "{text}");
    }
    let fix = e.downcast_ref::<WithFix>().expect("the error carries its fix");
    assert!(fix.fix.contains("--data-dir DIR"), "{}", fix.fix);
}

#[test]
fn causes_already_in_the_message_are_not_repeated() {
    let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
    let e = common::report::with_fix(format!("data/x: {io}"), "pass --data-dir");
    assert_eq!(describe(&*e), "error: data/x: no such file");
    // A cause the message does not state gets a line of its own.
    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("loading the checkpoint failed")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let e = Outer(std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"));
    assert_eq!(
        describe(&e),
        "error: loading the checkpoint failed\n  caused by: no such file"
    );
}

#[test]
fn repository_data_is_found_from_another_folder() {
    let rel = std::path::Path::new("data/mnist");
    // This test's working folder is the repository; the path resolves to
    // the repository's copy whatever the folder.
    let found = repo_path(rel);
    assert!(found.join("t10k-labels-idx1-ubyte.gz").exists() || found.join("t10k-labels-idx1-ubyte").exists());
    let other = std::path::Path::new("no/such/folder");
    assert_eq!(repo_path(other), other);
    let absolute = std::path::Path::new("/nonexistent/mnist");
    assert_eq!(repo_path(absolute), absolute);
}
