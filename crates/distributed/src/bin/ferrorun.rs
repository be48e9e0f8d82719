//! `ferrorun`: ferrotorch's torchrun. See the `launcher` module of
//! `ferrotorch-distributed` for the flags.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use ferrotorch_distributed::launcher::{LaunchConfig, run};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match LaunchConfig::parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("ferrorun: cannot watch signal {sig}: {e}");
        }
    }
    match run(&config, &stop) {
        Ok(None) => {}
        Ok(Some(failure)) => {
            eprint!("ferrorun: {failure}");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
