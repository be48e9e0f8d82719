//! Replays every case of `fuzz/cases/fixed.jsonl` (programs the fuzzer once
//! generated, with PyTorch's stored result) through the evaluator and fails
//! on any difference. No PyTorch needed. Cases where ferrotorch still
//! differs live in `fuzz/cases/open.jsonl` and are replayed by
//! `fuzz/driver.py --replay open`, not here.

use std::path::PathBuf;

use ferrotorch_fuzz::{Exactness, compare, run_program};
use serde_json::Value;

fn cases(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cases").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: bad line: {e}", path.display())))
        .collect()
}

#[test]
fn fixed_cases_agree_with_pytorch() {
    let fixed = cases("fixed.jsonl");
    assert!(!fixed.is_empty(), "fuzz/cases/fixed.jsonl has no cases");
    let mut failures = Vec::new();
    for case in &fixed {
        let prog = &case["program"];
        let ours = run_program(prog);
        let findings = compare(prog, &case["expect"], &ours, &mut Exactness::default());
        if let Some(f) = findings.first() {
            failures.push(format!(
                "{} ({}): {} {}: {}",
                prog["id"], case["op"], f.class, f.op, f.detail
            ));
        }
    }
    println!(
        "{} fixed cases replayed; {} open cases not replayed (fuzz/driver.py --replay open)",
        fixed.len(),
        cases("open.jsonl").len()
    );
    assert!(
        failures.is_empty(),
        "{} fixed cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn open_cases_parse() {
    for case in cases("open.jsonl") {
        assert!(case["program"]["ops"].is_array() && case["expect"]["status"].is_string());
    }
}
