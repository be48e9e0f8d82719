//! Memory statistics of the CPU allocator, as `torch.cuda`'s memory
//! functions report them for the CUDA caching allocator: bytes allocated and
//! reserved now and at their peak, totals, allocation counts, and
//! [`memory_summary`], a table laid out like PyTorch's `memory_summary()`.
//!
//! [`predict_peak_memory`] predicts the peak of a closure (a training
//! step) by running it on the meta device.
//!
//! ```
//! use ferrotorch_core::{Tensor, memory};
//! memory::reset_peak_memory_stats();
//! let x = Tensor::zeros([256, 1024])?; // 1 MiB
//! assert!(memory::max_memory_allocated() >= 1 << 20);
//! drop(x);
//! let table = memory::memory_summary();
//! assert!(table.contains("Allocated memory"));
//! # Ok::<(), ferrotorch_core::Error>(())
//! ```

pub(crate) mod plan;

pub use plan::{MemoryPrediction, TimelineEntry, predict_peak_memory};

pub use crate::backend::storage::{
    MemoryStats, empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated, memory_reserved,
    memory_stats, reset_peak_memory_stats,
};

/// Width of the table between its outer bars.
const WIDTH: usize = 75;

/// `n` scaled down by `step` while `pref` (scaled alongside) reaches
/// `limit`, with the unit reached: PyTorch's summary picks units this way.
fn scaled(mut n: u64, pref: u64, step: u64, limit: f64, units: &[&'static str]) -> (u64, &'static str) {
    let mut unit = units[0];
    let mut pref = pref as f64;
    for u in &units[1..] {
        if pref < limit {
            break;
        }
        unit = u;
        n /= step;
        pref /= step as f64;
    }
    (n, unit)
}

/// A byte count as PyTorch's summary writes it: six digits and a binary
/// unit, the unit chosen by `pref` (in PyTorch, the column's first sub-row,
/// so that sub-rows share it).
fn format_size(n: u64, pref: u64) -> String {
    let (n, unit) = scaled(
        n,
        pref,
        1024,
        768.0 * 1024.0,
        &["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"],
    );
    format!("{n:6} {unit}")
}

/// A count as PyTorch's summary writes it: seven digits and a decimal unit.
fn format_count(n: u64, pref: u64) -> String {
    let (n, unit) = scaled(n, pref, 1000, 750.0 * 1000.0, &[" ", "K", "M"]);
    format!("{n:7} {unit} ")
}

/// One cell of a row; `None` for a figure the CPU allocator does not keep.
fn cell(v: Option<u64>, pref: u64, count: bool) -> String {
    match v {
        Some(v) if count => format_count(v, pref),
        Some(v) => format_size(v, pref),
        None => format!("{:>10}", "-"),
    }
}

/// A row: a metric's name and its current, peak, total-allocated and
/// total-freed figures.
fn row(name: &str, values: [Option<u64>; 4], count: bool) -> String {
    // PyTorch picks each column's unit from that column's first sub-row
    // ("all"); with one sub-row, from the figure itself.
    let c: Vec<String> = values.iter().map(|v| cell(*v, v.unwrap_or(0), count)).collect();
    format!("| {name:<21} | {} | {} | {} | {} |", c[0], c[1], c[2], c[3])
}

/// A line of `c` across the table.
fn rule(c: char) -> String {
    format!("|{}|", c.to_string().repeat(WIDTH))
}

/// Text centred in the table.
fn centred(text: &str) -> String {
    format!("|{text:^WIDTH$}|")
}

/// The CPU allocator's statistics as a table laid out like PyTorch's
/// `torch.cuda.memory_summary()`: current, peak, total allocated and total
/// freed bytes of live buffers; reserved and cached bytes; allocation and
/// free counts. Figures the CPU allocator does not keep are shown as `-`.
pub fn memory_summary() -> String {
    summary_of(&memory_stats())
}

/// [`memory_summary`] of given statistics.
fn summary_of(s: &MemoryStats) -> String {
    let half = WIDTH / 2;
    let lines = [
        rule('='),
        centred("ferrotorch CPU memory summary"),
        rule('-'),
        format!(
            "|{:^half$}|{:^rest$}|",
            format!("OOMs: {}", s.num_ooms),
            format!("cache hits: {}", s.num_cache_hits),
            rest = WIDTH - half - 1
        ),
        rule('='),
        format!(
            "| {:^21} | {:^10} | {:^10} | {:^10} | {:^10} |",
            "Metric", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"
        ),
        rule('-'),
        row(
            "Allocated memory",
            [
                Some(s.allocated as u64),
                Some(s.peak_allocated as u64),
                Some(s.total_allocated),
                Some(s.total_freed),
            ],
            false,
        ),
        rule('-'),
        row(
            "Reserved memory",
            [Some(s.reserved as u64), Some(s.peak_reserved as u64), None, None],
            false,
        ),
        rule('-'),
        row("Cached free memory", [Some(s.cached as u64), None, None, None], false),
        rule('-'),
        row(
            "Allocations",
            [
                Some(s.active_allocs() as u64),
                None,
                Some(s.num_allocs as u64),
                Some(s.num_frees as u64),
            ],
            true,
        ),
        rule('='),
    ];
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_counts_use_pytorchs_units() {
        assert_eq!(format_size(0, 0), "     0 B  ");
        assert_eq!(format_size(700 * 1024, 700 * 1024), "716800 B  ");
        assert_eq!(format_size(800 * 1024, 800 * 1024), "   800 KiB");
        assert_eq!(format_size(3 << 30, 3 << 30), "  3072 MiB");
        // The unit follows the row's first figure.
        assert_eq!(format_size(5 << 20, 800 * 1024), "  5120 KiB");
        assert_eq!(format_count(12, 12), "     12   ");
        assert_eq!(format_count(2_000_000, 2_000_000), "   2000 K ");
    }

    #[test]
    fn the_table_has_every_row_at_one_width() {
        let s = MemoryStats {
            allocated: 3 << 20,
            peak_allocated: 5 << 20,
            reserved: 4 << 20,
            peak_reserved: 6 << 20,
            cached: 1 << 20,
            num_allocs: 120,
            num_frees: 100,
            num_cache_hits: 7,
            total_allocated: 40 << 20,
            total_freed: 37 << 20,
            num_ooms: 0,
        };
        let t = summary_of(&s);
        for line in t.lines() {
            assert_eq!(line.chars().count(), WIDTH + 2, "{line:?}");
        }
        assert!(t.contains("| Allocated memory      |   3072 KiB |   5120 KiB |  40960 KiB |  37888 KiB |"));
        assert!(t.contains("| Allocations           |      20    |          - |     120    |     100    |"));
        assert!(t.contains("cache hits: 7"));
    }
}
