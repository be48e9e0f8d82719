//! `--profile PATH` of the training examples: a few training steps after
//! warm-up under the profiler; the table of operators by self CPU time is
//! printed and the Chrome trace written to PATH.

use std::error::Error;
use std::path::Path;

use ferrotorch::profiler::{self, ProfileOptions, SortBy};

/// Steps run before the profiler starts (first-touch allocations, caches).
pub const WARMUP_STEPS: usize = 5;
/// Steps profiled, each inside a `train_step` scope.
pub const PROFILED_STEPS: usize = 5;

/// Runs `step` [`WARMUP_STEPS`] times, then [`PROFILED_STEPS`] times under
/// a profiler recording shapes and memory; prints the key averages sorted
/// by self CPU time and writes the trace to `path`.
pub fn profile_steps(path: &Path, mut step: impl FnMut() -> Result<(), Box<dyn Error>>) -> Result<(), Box<dyn Error>> {
    for _ in 0..WARMUP_STEPS {
        step()?;
    }
    let options = ProfileOptions {
        record_shapes: true,
        profile_memory: true,
        ..Default::default()
    };
    let guard = profiler::start(options)?;
    for _ in 0..PROFILED_STEPS {
        let _scope = profiler::record_function("train_step");
        step()?;
    }
    let prof = guard.stop();
    println!("{}", prof.key_averages().table(SortBy::SelfCpuTimeTotal, 25));
    prof.export_chrome_trace(path)?;
    println!(
        "{PROFILED_STEPS} steps profiled after {WARMUP_STEPS} of warm-up; Chrome trace written to {} (open it in https://ui.perfetto.dev)",
        path.display()
    );
    Ok(())
}
