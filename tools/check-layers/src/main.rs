//! `check-layers [REPO]`: checks the layering of every crate of the
//! workspace at REPO (default: the current folder) against the layer tables
//! of REPO/docs/architecture.md. Prints every broken rule and exits with 1,
//! or prints a one-line summary and exits with 0; 2 when it cannot run.
//! `--edges` first prints every reference between two files.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<_> = std::env::args_os().skip(1).collect();
    let show_edges = args.iter().any(|a| a == "--edges");
    args.retain(|a| a != "--edges");
    let repo = args.first().map_or_else(|| PathBuf::from("."), PathBuf::from);
    let doc_path = repo.join("docs/architecture.md");
    let doc = match std::fs::read_to_string(&doc_path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("check_layers: cannot read {}: {e}", doc_path.display());
            return ExitCode::from(2);
        }
    };
    let result = ferrotorch_check_layers::check_repo(&repo, &doc);
    if show_edges && let Ok(report) = &result {
        for e in &report.edge_list {
            println!("{e}");
        }
    }
    match result {
        Err(e) => {
            eprintln!("check_layers: {e}");
            ExitCode::from(2)
        }
        Ok(report) if report.violations.is_empty() => {
            println!(
                "check_layers: {} targets, {} files, {} references between files: every reference goes down its layer table, no cycle between modules",
                report.targets, report.files, report.edges
            );
            ExitCode::SUCCESS
        }
        Ok(report) => {
            for v in &report.violations {
                eprintln!("check_layers: {v}");
            }
            eprintln!("check_layers: {} problems", report.violations.len());
            ExitCode::FAILURE
        }
    }
}
