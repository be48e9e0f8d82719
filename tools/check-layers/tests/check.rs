//! The layering check on small crates written for each rule, and on a copy
//! of the real core with an upward reference added.

use std::fs;
use std::path::{Path, PathBuf};

use ferrotorch_check_layers::{Report, Target, check_targets};

/// Writes `files` (path, text) under a fresh folder.
fn crate_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp folder");
    for (path, text) in files {
        let p = dir.path().join(path);
        fs::create_dir_all(p.parent().expect("a parent")).expect("folders");
        fs::write(p, text).expect("a file");
    }
    dir
}

fn lib() -> Vec<Target> {
    vec![Target {
        kind: "lib".into(),
        name: "demo".into(),
        root: PathBuf::from("src/lib.rs"),
    }]
}

const TABLE: &str = "## Layer tables\n\n### `src/lib.rs`\n\n| layer | modules | what |\n|---|---|---|\n\
                     | 0 | `base`, `other` | x |\n| 1 | `top` | y |\n| 2 | `crate` | z |\n";

fn check(dir: &Path, doc: &str) -> Report {
    check_targets(dir, doc, &lib()).expect("the check runs")
}

const BASE: &str = "pub struct Base;\npub fn helper() {}\n";
const TOP: &str = "use crate::base::{Base, helper};\npub fn top(_: Base) { helper() }\n";
const ROOT: &str = "pub mod base;\npub mod other;\npub mod top;\npub use base::Base;\n";

#[test]
fn downward_references_pass() {
    let dir = crate_with(&[
        ("src/lib.rs", ROOT),
        ("src/base.rs", BASE),
        ("src/other.rs", ""),
        ("src/top.rs", TOP),
    ]);
    let r = check(dir.path(), TABLE);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.files, 4);
    assert!(r.edges >= 2, "{}", r.edges);
}

#[test]
fn an_upward_reference_fails_naming_both_files_and_the_name() {
    // Every form of naming: a use-tree group, a path in code, a path in a
    // macro's tokens, through a re-export.
    for base in [
        "use crate::{top::top as t};\npub struct Base;\npub fn helper() {}\n",
        "pub struct Base;\npub fn helper() { let _ = crate::top::top; }\n",
        "pub struct Base;\npub fn helper() { println!(\"{:?}\", crate::top::top as fn(Base)); }\n",
        "pub struct Base;\npub fn helper() {}\npub fn up() -> crate::TopAlias { unreachable!() }\n",
    ] {
        let root = format!("{ROOT}pub use top::top as TopAlias;\n");
        let dir = crate_with(&[
            ("src/lib.rs", &root),
            ("src/base.rs", base),
            ("src/other.rs", ""),
            ("src/top.rs", TOP),
        ]);
        let r = check(dir.path(), TABLE);
        let up: Vec<&String> = r.violations.iter().filter(|v| v.contains("a higher layer")).collect();
        assert!(!up.is_empty(), "{base}: {:?}", r.violations);
        assert!(
            up[0].contains("src/base.rs") && up[0].contains("src/top.rs"),
            "{}",
            up[0]
        );
        assert!(up[0].contains("top"), "{}", up[0]);
    }
}

#[test]
fn a_cycle_between_entries_of_one_layer_fails() {
    let dir = crate_with(&[
        ("src/lib.rs", ROOT),
        (
            "src/base.rs",
            "use super::other::O;\npub struct Base(pub O);\npub fn helper() {}\n",
        ),
        ("src/other.rs", "pub struct O;\npub fn f(_: crate::base::Base) {}\n"),
        ("src/top.rs", TOP),
    ]);
    let r = check(dir.path(), TABLE);
    let cycle: Vec<&String> = r.violations.iter().filter(|v| v.contains("a cycle")).collect();
    assert_eq!(cycle.len(), 1, "{:?}", r.violations);
    assert!(
        cycle[0].contains("`base`") && cycle[0].contains("`other`"),
        "{}",
        cycle[0]
    );
    assert!(cycle[0].contains("src/base.rs -> src/other.rs"), "{}", cycle[0]);
    assert!(cycle[0].contains("back:"), "{}", cycle[0]);
}

#[test]
fn files_of_one_entry_may_use_each_other() {
    let table = "## Layer tables\n### `src/lib.rs`\n| 0 | `m` | x |\n| 1 | `crate` | y |\n";
    let dir = crate_with(&[
        ("src/lib.rs", "mod m;\n"),
        ("src/m/mod.rs", "mod a;\nmod b;\npub use a::A;\n"),
        ("src/m/a.rs", "pub struct A(pub super::b::B);\n"),
        ("src/m/b.rs", "pub struct B(pub Option<Box<super::A>>);\n"),
    ]);
    let r = check(dir.path(), table);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

#[test]
fn test_code_and_visibilities_are_not_references() {
    let base = "pub struct Base;\npub(crate) fn helper() {}\n#[cfg(test)]\nmod tests {\n    use crate::top::top;\n}\n\
                #[cfg(test)]\nfn only_in_tests() { crate::top::top(crate::base::Base) }\n";
    let dir = crate_with(&[
        ("src/lib.rs", ROOT),
        ("src/base.rs", base),
        ("src/other.rs", ""),
        ("src/top.rs", TOP),
    ]);
    let r = check(dir.path(), TABLE);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

#[test]
fn glob_imports_resolve_the_names_used() {
    let top = "pub fn top() {}\n";
    let base = "use crate::top::*;\npub fn helper() { top() }\n";
    let dir = crate_with(&[
        ("src/lib.rs", ROOT),
        ("src/base.rs", base),
        ("src/other.rs", ""),
        ("src/top.rs", top),
    ]);
    let r = check(dir.path(), TABLE);
    assert!(
        r.violations
            .iter()
            .any(|v| v.contains("src/base.rs") && v.contains("a higher layer")),
        "{:?}",
        r.violations
    );
}

#[test]
fn the_table_must_cover_every_module_and_name_only_modules() {
    let table = "## Layer tables\n### `src/lib.rs`\n| 0 | `base`, `gone` | x |\n| 2 | `crate` | z |\n";
    let dir = crate_with(&[
        ("src/lib.rs", ROOT),
        ("src/base.rs", BASE),
        ("src/other.rs", ""),
        ("src/top.rs", TOP),
    ]);
    let r = check(dir.path(), table);
    let text = r.violations.join("\n");
    assert!(text.contains("module `other` has no layer"), "{text}");
    assert!(text.contains("module `top` has no layer"), "{text}");
    assert!(text.contains("`gone` in the table"), "{text}");
}

#[test]
fn a_library_without_a_table_fails() {
    let dir = crate_with(&[("src/lib.rs", "pub fn f() {}\n")]);
    let r = check(dir.path(), "## Layer tables\n");
    assert!(
        r.violations.iter().any(|v| v.contains("has no layer table")),
        "{:?}",
        r.violations
    );
}

/// The repository this test runs in.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tools/check-layers is two folders down")
        .to_path_buf()
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("a folder");
    for e in fs::read_dir(from).expect("a folder") {
        let e = e.expect("an entry");
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            fs::copy(&src, &dst).expect("a copy");
        }
    }
}

/// The real core against the real table: passes as it is, and fails, naming
/// the file and the name, once the dispatcher names an operator.
#[test]
fn the_core_fails_when_the_dispatcher_names_an_operator() {
    let repo = repo();
    let doc = fs::read_to_string(repo.join("docs/architecture.md")).expect("the architecture doc");
    let tmp = tempfile::tempdir().expect("a temp folder");
    copy_dir(&repo.join("crates/core/src"), &tmp.path().join("crates/core/src"));
    let core = vec![Target {
        kind: "lib".into(),
        name: "ferrotorch_core".into(),
        root: PathBuf::from("crates/core/src/lib.rs"),
    }];
    // Only the core is checked: the other tables name no target here.
    let unrelated = |v: &&String| !v.contains("is the root file of no target");
    let r = check_targets(tmp.path(), &doc, &core).expect("the check runs");
    let problems: Vec<&String> = r.violations.iter().filter(unrelated).collect();
    assert!(problems.is_empty(), "{problems:?}");
    assert!(r.files > 100, "{}", r.files);

    let key = tmp.path().join("crates/core/src/backend/dispatch/key.rs");
    let text = fs::read_to_string(&key).expect("key.rs");
    fs::write(
        &key,
        format!("{text}\n#[allow(unused_imports)]\nuse crate::ops::unary::Unary;\n"),
    )
    .expect("written");
    let r = check_targets(tmp.path(), &doc, &core).expect("the check runs");
    let problems: Vec<&String> = r.violations.iter().filter(unrelated).collect();
    assert!(
        problems
            .iter()
            .any(|v| v.contains("crates/core/src/backend/dispatch/key.rs")
                && v.contains("crate::ops::unary::Unary")
                && v.contains("crates/core/src/ops/unary.rs")
                && v.contains("a reference to a higher layer")),
        "{problems:?}"
    );
}
