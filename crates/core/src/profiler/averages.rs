//! `key_averages()`: events grouped by name (and optionally input shapes
//! or call stack), and PyTorch's table of them.

use std::collections::HashMap;

use super::{Profile, ProfilerEvent};

/// One group of events (`torch.autograd.profiler_util.FunctionEventAvg`).
#[derive(Debug, Clone, PartialEq)]
pub struct EventAverage {
    /// The events' name.
    pub name: String,
    /// How many events the group holds.
    pub count: usize,
    /// Their summed durations, children included, in nanoseconds.
    pub cpu_time_total_ns: u64,
    /// Their summed self times, in nanoseconds.
    pub self_cpu_time_total_ns: u64,
    /// Their summed memory (allocated minus freed), children included.
    pub cpu_memory: i64,
    /// Their summed memory without the children's.
    pub self_cpu_memory: i64,
    /// The input shapes, when grouped by them.
    pub input_shapes: Option<Vec<Vec<usize>>>,
    /// The innermost stack frames, when grouped by them.
    pub stack: Vec<String>,
}

impl EventAverage {
    /// Mean duration per call, children included, in nanoseconds.
    pub fn cpu_time_avg_ns(&self) -> f64 {
        self.cpu_time_total_ns as f64 / self.count.max(1) as f64
    }

    /// Mean self time per call, in nanoseconds.
    pub fn self_cpu_time_avg_ns(&self) -> f64 {
        self.self_cpu_time_total_ns as f64 / self.count.max(1) as f64
    }
}

/// The column a table is sorted by (descending), as PyTorch's `sort_by`
/// strings name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SortBy {
    /// `"cpu_time_total"`.
    CpuTimeTotal,
    /// `"self_cpu_time_total"`.
    SelfCpuTimeTotal,
    /// `"cpu_time"`: the mean time per call.
    CpuTimeAvg,
    /// `"self_cpu_time"`: the mean self time per call.
    SelfCpuTimeAvg,
    /// `"count"`.
    Count,
    /// `"cpu_memory_usage"`.
    CpuMemoryUsage,
    /// `"self_cpu_memory_usage"`.
    SelfCpuMemoryUsage,
}

impl SortBy {
    /// The key named by PyTorch's `sort_by` string; `None` for an unknown one.
    pub fn from_name(name: &str) -> Option<SortBy> {
        Some(match name {
            "cpu_time_total" => SortBy::CpuTimeTotal,
            "self_cpu_time_total" => SortBy::SelfCpuTimeTotal,
            "cpu_time" => SortBy::CpuTimeAvg,
            "self_cpu_time" => SortBy::SelfCpuTimeAvg,
            "count" => SortBy::Count,
            "cpu_memory_usage" => SortBy::CpuMemoryUsage,
            "self_cpu_memory_usage" => SortBy::SelfCpuMemoryUsage,
            _ => return None,
        })
    }

    fn key(self, a: &EventAverage) -> f64 {
        match self {
            SortBy::CpuTimeTotal => a.cpu_time_total_ns as f64,
            SortBy::SelfCpuTimeTotal => a.self_cpu_time_total_ns as f64,
            SortBy::CpuTimeAvg => a.cpu_time_avg_ns(),
            SortBy::SelfCpuTimeAvg => a.self_cpu_time_avg_ns(),
            SortBy::Count => a.count as f64,
            SortBy::CpuMemoryUsage => a.cpu_memory as f64,
            SortBy::SelfCpuMemoryUsage => a.self_cpu_memory as f64,
        }
    }
}

/// What events are grouped by: name, input shapes, stack frames.
type GroupKey = (String, Option<Vec<Vec<usize>>>, Vec<String>);

/// Events grouped by key, in the order each key first occurred.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyAverages {
    rows: Vec<EventAverage>,
    self_cpu_time_total_ns: u64,
    memory: bool,
    by_shape: bool,
    by_stack: bool,
}

impl KeyAverages {
    pub(super) fn new(profile: &Profile, by_shape: bool, stack_n: usize) -> KeyAverages {
        let mut index: HashMap<GroupKey, usize> = HashMap::new();
        let mut rows: Vec<EventAverage> = Vec::new();
        for e in profile.events() {
            let shapes = by_shape.then(|| e.input_shapes.clone());
            let stack: Vec<String> = e.stack.iter().take(stack_n).cloned().collect();
            let key = (e.name.clone(), shapes.clone(), stack.clone());
            let i = *index.entry(key).or_insert_with(|| {
                rows.push(EventAverage {
                    name: e.name.clone(),
                    count: 0,
                    cpu_time_total_ns: 0,
                    self_cpu_time_total_ns: 0,
                    cpu_memory: 0,
                    self_cpu_memory: 0,
                    input_shapes: shapes,
                    stack,
                });
                rows.len() - 1
            });
            add(&mut rows[i], e);
        }
        let opts = profile.options();
        KeyAverages {
            self_cpu_time_total_ns: profile.events().iter().map(|e| e.self_ns).sum(),
            rows,
            memory: opts.is_some_and(|o| o.profile_memory),
            by_shape,
            by_stack: stack_n > 0,
        }
    }

    /// The groups.
    pub fn rows(&self) -> &[EventAverage] {
        &self.rows
    }

    /// The group of `name` (the first, when grouped by shape or stack).
    pub fn get(&self, name: &str) -> Option<&EventAverage> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// The total self time of every event: the time profiled.
    pub fn self_cpu_time_total_ns(&self) -> u64 {
        self.self_cpu_time_total_ns
    }

    /// The groups sorted by `sort_by`, largest first (ties keep their order).
    pub fn sorted(&self, sort_by: SortBy) -> Vec<&EventAverage> {
        let mut rows: Vec<&EventAverage> = self.rows.iter().collect();
        rows.sort_by(|a, b| sort_by.key(b).total_cmp(&sort_by.key(a)));
        rows
    }

    /// PyTorch's table (`key_averages().table(sort_by=..., row_limit=...)`):
    /// Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg,
    /// CPU Mem and Self CPU Mem (with `profile_memory`), # of Calls, and
    /// Input Shapes or Source Location when grouped by them; sorted by
    /// `sort_by`, at most `row_limit` rows; the total self time last.
    pub fn table(&self, sort_by: SortBy, row_limit: usize) -> String {
        const NAME_MAX: usize = 55;
        const SHAPES_MAX: usize = 80;
        const COL: usize = 12;
        let rows: Vec<&EventAverage> = self.sorted(sort_by).into_iter().take(row_limit).collect();
        let name_w = (rows.iter().map(|r| r.name.chars().count()).max().unwrap_or(4) + 4).min(NAME_MAX);
        let shapes: Vec<String> = rows
            .iter()
            .map(|r| r.input_shapes.as_ref().map(|s| format!("{s:?}")).unwrap_or_default())
            .collect();
        let shapes_w = (shapes.iter().map(|s| s.chars().count()).max().unwrap_or(0) + 4).clamp(16, SHAPES_MAX);
        let stacks: Vec<String> = rows
            .iter()
            .map(|r| r.stack.first().cloned().unwrap_or_default())
            .collect();
        let stack_w = (stacks.iter().map(|s| s.chars().count()).max().unwrap_or(0) + 4).clamp(20, SHAPES_MAX);

        let mut widths = vec![name_w, COL, COL, COL, COL, COL];
        let mut headers = vec![
            "Name",
            "Self CPU %",
            "Self CPU",
            "CPU total %",
            "CPU total",
            "CPU time avg",
        ];
        if self.memory {
            widths.extend([COL, COL]);
            headers.extend(["CPU Mem", "Self CPU Mem"]);
        }
        widths.push(COL);
        headers.push("# of Calls");
        if self.by_shape {
            widths.push(shapes_w);
            headers.push("Input Shapes");
        }
        if self.by_stack {
            widths.push(stack_w);
            headers.push("Source Location");
        }
        let line = |cells: &[String]| -> String {
            let mut s = String::new();
            for (c, w) in cells.iter().zip(&widths) {
                s.push_str(&format!("{:>w$}  ", truncate(c, *w), w = *w));
            }
            s
        };
        let sep: String = widths.iter().map(|w| "-".repeat(*w) + "  ").collect();
        let total = self.self_cpu_time_total_ns;
        let mut out = vec![
            sep.clone(),
            line(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>()),
            sep.clone(),
        ];
        for (k, r) in rows.iter().enumerate() {
            let mut cells = vec![
                r.name.clone(),
                format_share(r.self_cpu_time_total_ns, total),
                format_time(r.self_cpu_time_total_ns as f64),
                format_share(r.cpu_time_total_ns, total),
                format_time(r.cpu_time_total_ns as f64),
                format_time(r.cpu_time_avg_ns()),
            ];
            if self.memory {
                cells.push(format_memory(r.cpu_memory));
                cells.push(format_memory(r.self_cpu_memory));
            }
            cells.push(r.count.to_string());
            if self.by_shape {
                cells.push(shapes[k].clone());
            }
            if self.by_stack {
                cells.push(stacks[k].clone());
            }
            out.push(line(&cells));
        }
        out.push(sep);
        out.push(format!("Self CPU time total: {}", format_time(total as f64)));
        let mut s = out.join("\n");
        s.push('\n');
        s
    }
}

fn add(row: &mut EventAverage, e: &ProfilerEvent) {
    row.count += 1;
    row.cpu_time_total_ns += e.duration_ns();
    row.self_cpu_time_total_ns += e.self_ns;
    row.cpu_memory += e.cpu_memory;
    row.self_cpu_memory += e.self_cpu_memory;
}

/// A cell cut to `w` characters with `...`, as PyTorch cuts long names.
fn truncate(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_string()
    } else {
        let keep: String = s.chars().take(w.saturating_sub(3)).collect();
        keep + "..."
    }
}

/// A time as PyTorch's `_format_time` writes it (from nanoseconds).
pub(crate) fn format_time(ns: f64) -> String {
    let us = ns / 1000.0;
    if us >= 1e6 {
        format!("{:.3}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.3}ms", us / 1e3)
    } else {
        format!("{us:.3}us")
    }
}

/// A share of the total as PyTorch's `_format_time_share` writes it.
fn format_share(ns: u64, total: u64) -> String {
    if total == 0 {
        return "NaN".into();
    }
    format!("{:.2}%", ns as f64 * 100.0 / total as f64)
}

/// Bytes as PyTorch's `_format_memory` writes them.
pub(crate) fn format_memory(n: i64) -> String {
    const KB: f64 = 1024.0;
    const MB: f64 = 1024.0 * KB;
    const GB: f64 = 1024.0 * MB;
    let x = n as f64;
    if x.abs() >= GB {
        format!("{:.2} Gb", x / GB)
    } else if x.abs() >= MB {
        format!("{:.2} Mb", x / MB)
    } else if x.abs() >= KB {
        format!("{:.2} Kb", x / KB)
    } else {
        format!("{n} b")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_memory_and_shares_are_formatted_as_pytorch() {
        assert_eq!(format_time(1_500.0), "1.500us");
        assert_eq!(format_time(2_345_000.0), "2.345ms");
        assert_eq!(format_time(3_000_000_000.0), "3.000s");
        assert_eq!(format_memory(512), "512 b");
        assert_eq!(format_memory(-2048), "-2.00 Kb");
        assert_eq!(format_memory(3 << 20), "3.00 Mb");
        assert_eq!(format_memory(5 << 30), "5.00 Gb");
        assert_eq!(format_share(1, 4), "25.00%");
        assert_eq!(truncate("abcdefgh", 6), "abc...");
        assert_eq!(SortBy::from_name("self_cpu_time_total"), Some(SortBy::SelfCpuTimeTotal));
        assert_eq!(SortBy::from_name("bogus"), None);
    }
}
