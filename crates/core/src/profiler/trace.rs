//! Chrome trace export (the JSON `chrome://tracing` and Perfetto read) and
//! the call-stack frames of events recorded `with_stack`.

use std::backtrace::Backtrace;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use super::{EventKind, Profile};
use crate::{Error, Result};

/// A string as a JSON string literal.
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Nanoseconds as microseconds with three exact decimals (the trace's unit).
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// The trace as JSON: one complete event ("ph": "X") per event, with its
/// input dims and types when shapes were recorded and its call stack when
/// stacks were; with `profile_memory`, a counter ("ph": "C") of the live
/// CPU bytes after each event.
pub(super) fn to_json(p: &Profile) -> String {
    let pid = std::process::id();
    let mut events: Vec<String> = vec![format!(
        "{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {pid}, \"tid\": 0, \"args\": {{\"name\": \"ferrotorch\"}}}}"
    )];
    let mut threads: Vec<u64> = p.events().iter().map(|e| e.thread).collect();
    threads.sort_unstable();
    threads.dedup();
    for t in threads {
        events.push(format!(
            "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {pid}, \"tid\": {t}, \"args\": {{\"name\": \"thread {t}\"}}}}"
        ));
    }
    for e in p.events() {
        let cat = match e.kind {
            EventKind::Op | EventKind::BackwardNode => "cpu_op",
            EventKind::UserScope => "user_annotation",
        };
        let mut args: Vec<String> = Vec::new();
        if !e.input_shapes.is_empty() || !e.input_dtypes.is_empty() {
            args.push(format!("\"Input Dims\": {:?}", e.input_shapes));
            let types: Vec<String> = e.input_dtypes.iter().map(|d| json_str(d)).collect();
            args.push(format!("\"Input type\": [{}]", types.join(", ")));
        }
        if p.options().is_some_and(|o| o.profile_memory) {
            args.push(format!("\"CPU Mem\": {}", e.cpu_memory));
            args.push(format!("\"Self CPU Mem\": {}", e.self_cpu_memory));
        }
        if !e.stack.is_empty() {
            let frames: Vec<String> = e.stack.iter().map(|f| json_str(f)).collect();
            args.push(format!("\"Call stack\": [{}]", frames.join(", ")));
        }
        events.push(format!(
            "{{\"ph\": \"X\", \"cat\": \"{cat}\", \"name\": {}, \"pid\": {pid}, \"tid\": {}, \"ts\": {}, \"dur\": {}, \"args\": {{{}}}}}",
            json_str(&e.name),
            e.thread,
            us(e.start_ns),
            us(e.duration_ns()),
            args.join(", ")
        ));
        if let Some(bytes) = e.allocated_after {
            events.push(format!(
                "{{\"ph\": \"C\", \"name\": \"CPU memory\", \"pid\": {pid}, \"tid\": {}, \"ts\": {}, \"args\": {{\"Allocated\": {bytes}}}}}",
                e.thread,
                us(e.end_ns)
            ));
        }
    }
    let mut out = String::from("{\n  \"schemaVersion\": 1,\n  \"displayTimeUnit\": \"ms\",\n  \"traceEvents\": [\n");
    out.push_str(
        &events
            .iter()
            .map(|e| format!("    {e}"))
            .collect::<Vec<_>>()
            .join(",\n"),
    );
    out.push_str("\n  ]\n}\n");
    out
}

/// Writes the trace to `path` through a temporary file beside it, renamed
/// over `path` once complete; an error names the path.
pub(super) fn export(p: &Profile, path: &Path) -> Result<()> {
    let fail = |what: &str, e: std::io::Error| {
        Error::invalid("export_chrome_trace", format!("cannot {what} {}: {e}", path.display()))
    };
    let json = to_json(p);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| Error::invalid("export_chrome_trace", format!("{} is not a file path", path.display())))?;
    let tmp = dir.join(format!(".{}.tmp{}", file_name.to_string_lossy(), std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(json.as_bytes())?;
        f.sync_all()
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail("write", e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail("write", e)
    })
}

/// The frames of a backtrace outside the profiler, the dispatcher, the
/// core's plumbing and the standard library, innermost first, each as
/// `function (file:line:column)`.
pub(super) fn user_frames(b: &Backtrace) -> Vec<String> {
    let text = b.to_string();
    let mut frames: Vec<(String, Option<String>)> = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(loc) = t.strip_prefix("at ") {
            if let Some(last) = frames.last_mut()
                && last.1.is_none()
            {
                last.1 = Some(loc.to_string());
            }
        } else if let Some((num, sym)) = t.split_once(": ")
            && num.chars().all(|c| c.is_ascii_digit())
        {
            frames.push((sym.to_string(), None));
        }
    }
    const SKIP: [&str; 8] = [
        "ferrotorch_core::",
        "std::",
        "core::",
        "alloc::",
        "rayon",
        "__rust",
        "__libc",
        "_start",
    ];
    frames
        .into_iter()
        .filter(|(sym, _)| {
            let s = sym.trim_start_matches('<');
            !SKIP.iter().any(|p| s.starts_with(p)) && !s.starts_with("clone") && !s.is_empty()
        })
        .map(|(sym, loc)| match loc {
            Some(l) => format!("{sym} ({l})"),
            None => sym,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_and_times_exact() {
        assert_eq!(json_str("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
        assert_eq!(us(1_234_567), "1234.567");
        assert_eq!(us(5), "0.005");
    }
}
