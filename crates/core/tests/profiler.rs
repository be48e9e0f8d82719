//! The profiler as a dispatcher layer: what it records, how it groups and
//! prints events, the Chrome trace it writes, and its errors.

use ferrotorch_core::profiler::{self, EventKind, ProfileOptions, ProfilerActivity, SortBy};
use ferrotorch_core::{Error, Result, Tensor};

fn opts(shapes: bool, memory: bool) -> ProfileOptions {
    ProfileOptions {
        record_shapes: shapes,
        profile_memory: memory,
        ..Default::default()
    }
}

/// A small forward and backward inside a user scope.
fn step() -> Result<()> {
    let x = Tensor::randn([8, 4])?.requires_grad_(true)?;
    let w = Tensor::randn([4, 3])?;
    let _scope = profiler::record_function("my_step");
    let y = x.matmul(&w)?.relu()?.sum()?;
    y.backward()
}

#[test]
fn ops_scopes_and_backward_nodes_are_recorded_and_nested() -> Result<()> {
    let ((), prof) = profiler::profile(opts(true, false), step)?;
    let ev = prof.events();
    let names: Vec<&str> = ev.iter().map(|e| e.name.as_str()).collect();
    for want in [
        "my_step",
        "aten::mm",
        "aten::relu",
        "aten::sum",
        "MmBackward0",
        "ReluBackward0",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let scope = ev.iter().position(|e| e.name == "my_step").unwrap();
    assert_eq!(ev[scope].kind, EventKind::UserScope);
    assert_eq!(ev[scope].depth, 0);
    // Every event after the scope opened (ops and backward nodes) lies inside it.
    for (i, e) in ev.iter().enumerate().skip(scope + 1) {
        let mut p = e.parent;
        while let Some(q) = p.filter(|&q| q != scope) {
            p = ev[q].parent;
        }
        assert_eq!(p, Some(scope), "event {i} {} is outside the scope", e.name);
        let parent = &ev[e.parent.unwrap()];
        assert!(
            parent.start_ns <= e.start_ns && e.end_ns <= parent.end_ns,
            "{} escapes {}",
            e.name,
            parent.name
        );
        assert_eq!(e.depth, parent.depth + 1);
    }
    // A backward node holds the ops of its formula.
    let mm_bw = ev.iter().position(|e| e.name == "MmBackward0").unwrap();
    assert_eq!(ev[mm_bw].kind, EventKind::BackwardNode);
    assert!(ev.iter().any(|e| e.parent == Some(mm_bw) && e.kind == EventKind::Op));
    // Self time is total time less the children's.
    let child_ns: u64 = ev
        .iter()
        .filter(|e| e.parent == Some(scope))
        .map(|e| e.duration_ns())
        .sum();
    assert_eq!(ev[scope].self_ns, ev[scope].duration_ns() - child_ns);
    // Shapes and dtypes of the inputs.
    let mm = ev.iter().find(|e| e.name == "aten::mm").unwrap();
    assert_eq!(mm.input_shapes, vec![vec![8, 4], vec![4, 3]]);
    assert_eq!(mm.input_dtypes, vec!["float32", "float32"]);
    Ok(())
}

#[test]
fn nothing_is_recorded_without_a_profiler_or_on_other_threads() -> Result<()> {
    let guard = profiler::start(opts(false, false))?;
    assert!(profiler::is_profiling());
    std::thread::spawn(|| {
        assert!(!profiler::is_profiling());
        let a = Tensor::ones([3]).unwrap();
        let _ = &a + &a;
    })
    .join()
    .unwrap();
    let a = Tensor::ones([3])?;
    let _ = a.mul(&a)?;
    let prof = guard.stop();
    assert!(!profiler::is_profiling());
    let names: Vec<&str> = prof.events().iter().map(|e| e.name.as_str()).collect();
    assert!(names.contains(&"aten::mul"), "{names:?}");
    assert!(
        !names.contains(&"aten::add"),
        "another thread's op was recorded: {names:?}"
    );
    let _ = a.exp()?;
    assert!(!prof.events().iter().any(|e| e.name == "aten::exp"));
    // Shapes are only recorded when asked for.
    assert!(prof.events().iter().all(|e| e.input_shapes.is_empty()));
    Ok(())
}

#[test]
fn key_averages_count_and_the_table_has_pytorchs_columns() -> Result<()> {
    let ((), prof) = profiler::profile(opts(true, true), || {
        // One scope around everything: no group's total can exceed it.
        let _all = profiler::record_function("three_steps");
        for _ in 0..3 {
            step()?;
        }
        Ok(())
    })?;
    let avg = prof.key_averages();
    assert_eq!(avg.get("my_step").unwrap().count, 3);
    assert_eq!(
        avg.get("aten::mm").unwrap().count,
        3 + 3,
        "forward and MmBackward0's mm"
    );
    let mm = avg.get("aten::mm").unwrap();
    assert!(mm.self_cpu_time_total_ns <= mm.cpu_time_total_ns);
    let total: u64 = avg.rows().iter().map(|r| r.self_cpu_time_total_ns).sum();
    assert_eq!(total, avg.self_cpu_time_total_ns());
    let table = avg.table(SortBy::CpuTimeTotal, 5);
    let lines: Vec<&str> = table.lines().collect();
    for h in [
        "Name",
        "Self CPU %",
        "Self CPU",
        "CPU total %",
        "CPU total",
        "CPU time avg",
        "CPU Mem",
        "Self CPU Mem",
        "# of Calls",
    ] {
        assert!(lines[1].contains(h), "header {h} missing: {}", lines[1]);
    }
    // Separator, header, separator, 5 rows, separator, total.
    assert_eq!(lines.len(), 10, "{table}");
    assert!(lines[0].starts_with("----") && lines[2] == lines[0] && lines[8] == lines[0]);
    assert!(lines[9].starts_with("Self CPU time total: "));
    // Sorted by CPU total: the scope around everything first.
    assert!(lines[3].trim_start().starts_with("three_steps"), "{table}");
    let sorted = avg.sorted(SortBy::Count);
    assert!(sorted.windows(2).all(|w| w[0].count >= w[1].count));
    // Grouped by input shape: the two mm shapes of the backward are separate rows.
    let by_shape = prof.key_averages_by_input_shape();
    let mm_rows: Vec<_> = by_shape.rows().iter().filter(|r| r.name == "aten::mm").collect();
    assert!(mm_rows.len() >= 2, "{mm_rows:?}");
    assert!(by_shape.table(SortBy::SelfCpuTimeTotal, 100).contains("Input Shapes"));
    Ok(())
}

#[test]
fn memory_is_attributed_to_the_op_that_allocates() -> Result<()> {
    let x = Tensor::randn([256, 1024])?; // 1 MiB
    let ((), prof) = profiler::profile(opts(false, true), || {
        let y = x.exp()?; // +1 MiB, kept until the end of the closure
        let _scope = profiler::record_function("drop_it");
        drop(y);
        Ok(())
    })?;
    let exp = prof.events().iter().find(|e| e.name == "aten::exp").unwrap();
    assert!(exp.cpu_memory >= 1 << 20, "{}", exp.cpu_memory);
    assert_eq!(exp.self_cpu_memory, exp.cpu_memory);
    assert!(exp.allocated_after.unwrap() >= 2 << 20);
    let table = prof.key_averages().table(SortBy::CpuMemoryUsage, 10);
    assert!(table.contains("1.00 Mb"), "{table}");
    Ok(())
}

#[test]
fn the_chrome_trace_parses_and_its_events_nest() -> Result<()> {
    let ((), prof) = profiler::profile(opts(true, true), step)?;
    let dir = std::env::temp_dir().join(format!("ft_trace_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    prof.export_chrome_trace(&path)?;
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let mut complete: Vec<(f64, f64, String, u64)> = Vec::new();
    for e in events {
        match e["ph"].as_str().unwrap() {
            "X" => {
                let ts = e["ts"].as_f64().unwrap();
                let dur = e["dur"].as_f64().unwrap();
                assert!(ts >= 0.0 && dur >= 0.0);
                assert!(e["pid"].is_u64() && e["tid"].is_u64() && e["cat"].is_string());
                complete.push((
                    ts,
                    ts + dur,
                    e["name"].as_str().unwrap().to_string(),
                    e["tid"].as_u64().unwrap(),
                ));
            }
            "C" => assert!(e["args"]["Allocated"].is_u64()),
            "M" => {}
            other => panic!("unexpected phase {other}"),
        }
    }
    assert_eq!(complete.len(), prof.events().len());
    let mm = events.iter().find(|e| e["name"] == "aten::mm").unwrap();
    assert_eq!(mm["args"]["Input Dims"], serde_json::json!([[8, 4], [4, 3]]));
    assert_eq!(mm["args"]["Input type"], serde_json::json!(["float32", "float32"]));
    // Well nested per thread: sorted by start (longer first on ties), each
    // event ends before the enclosing one on the stack does.
    complete.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
    let mut stack: Vec<(f64, f64, String, u64)> = Vec::new();
    for e in complete {
        while stack.last().is_some_and(|s| s.1 <= e.0 && !(s.0 == e.0 && s.1 == e.1)) {
            stack.pop();
        }
        if let Some(s) = stack.last() {
            assert!(
                e.1 <= s.1,
                "{} [{}, {}] overlaps {} [{}, {}]",
                e.2,
                e.0,
                e.1,
                s.2,
                s.0,
                s.1
            );
        }
        stack.push(e);
    }
    // No temporary file is left beside it.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
    Ok(())
}

#[test]
fn bad_input_is_a_clear_error() -> Result<()> {
    // An unwritable path names the path.
    let ((), prof) = profiler::profile(opts(false, false), || Tensor::ones([2])?.exp().map(drop))?;
    let bad = std::path::Path::new("/nonexistent_dir_ft/trace.json");
    let e = prof.export_chrome_trace(bad).unwrap_err();
    assert!(e.to_string().contains("/nonexistent_dir_ft/trace.json"), "{e}");
    // One profiler per thread.
    let g = profiler::start(opts(false, false))?;
    let e = profiler::start(opts(false, false)).err().unwrap();
    assert!(e.to_string().contains("already running"), "{e}");
    drop(g);
    // CUDA activity needs the CUDA backend.
    let cuda = ProfileOptions {
        activities: vec![ProfilerActivity::Cpu, ProfilerActivity::Cuda],
        ..Default::default()
    };
    assert!(matches!(profiler::start(cuda), Err(Error::DeviceUnavailable { .. })));
    // An error inside the closure is returned as it is.
    let e = profiler::profile(opts(false, false), || Tensor::ones([2])?.add(&Tensor::ones([3])?))
        .err()
        .unwrap();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    assert!(!profiler::is_profiling());
    Ok(())
}

#[test]
fn a_panic_inside_leaves_nothing_open_and_nothing_written() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("ft_trace_panic_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.json");
    let p2 = path.clone();
    let r = std::panic::catch_unwind(move || {
        let guard = profiler::start(opts(false, false)).unwrap();
        let _ = Tensor::ones([2]).unwrap().exp().unwrap();
        if std::hint::black_box(true) {
            panic!("boom");
        }
        guard.stop().export_chrome_trace(&p2).unwrap();
    });
    assert!(r.is_err());
    assert!(!profiler::is_profiling());
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none(), "a file was written");
    // A new profiler starts cleanly and sees only its own events.
    let ((), prof) = profiler::profile(opts(false, false), || Tensor::ones([2])?.neg().map(drop))?;
    assert!(prof.events().iter().all(|e| e.name != "aten::exp"));
    std::fs::remove_dir_all(&dir).unwrap();
    Ok(())
}

#[inline(never)]
fn caller_of_tanh(x: &Tensor) -> Result<Tensor> {
    std::hint::black_box(x.tanh())
}

#[test]
fn stacks_name_the_callers_frames() -> Result<()> {
    let x = Tensor::ones([4])?;
    let opts = ProfileOptions {
        with_stack: true,
        ..Default::default()
    };
    let (_, prof) = profiler::profile(opts, || caller_of_tanh(&x))?;
    let tanh = prof.events().iter().find(|e| e.name == "aten::tanh").unwrap();
    assert!(!tanh.stack.is_empty());
    assert!(
        tanh.stack.iter().all(|f| !f.starts_with("ferrotorch_core::")),
        "{:?}",
        tanh.stack
    );
    assert!(
        tanh.stack.iter().any(|f| f.contains("caller_of_tanh")),
        "{:?}",
        tanh.stack
    );
    let by_stack = prof.key_averages_by_stack(1);
    assert!(by_stack.table(SortBy::Count, 10).contains("Source Location"));
    Ok(())
}
