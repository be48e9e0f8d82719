//! Misuse the type system catches: each file under `tests/ui/` must fail
//! to compile with the error recorded beside it (`TRYBUILD=overwrite cargo
//! test --test compile_fail` rewrites the expected errors after a compiler
//! upgrade; review the diff).

#[test]
fn misuse_does_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
