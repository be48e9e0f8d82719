//! Evaluator of fuzzer programs: reads one JSON request per line on stdin
//! (`{"program": P, "expect": R?}`) and writes one JSON response per line on
//! stdout (`{"result": R, "findings": [...]}`), for as many lines as come.
//! Panics inside an op are caught and reported; `fuzz/driver.py` restarts
//! the process if it dies.

use std::io::{BufRead, Write};

fn main() {
    // Panics are reported in the response; keep stderr quiet.
    std::panic::set_hook(Box::new(|_| {}));
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let resp = ferrotorch_fuzz::handle_line(&line);
        if writeln!(out, "{resp}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
}
