//! Saves are atomic even when the saving process is SIGKILLed: a child
//! process (this test binary again, running the hidden `child_saver` test)
//! saves a 32 MB checkpoint over and over to one path, each save with the
//! next generation number; the parent kills it at a random moment (seeded,
//! spread over a save's duration), 50 times, alternating `save` (a
//! `torch.save` file) and `save_safetensors`. After each kill the file must
//! be a complete checkpoint of the last generation the child finished, or
//! of the one it was renaming into place, every byte as written.
//!
//! A kill during a save leaves the child's temporary file
//! (`.<name>.tmp-<pid>-<n>`): nothing survives to remove it. The test
//! checks that nothing else is left and removes those.
//!
//! `FERROTORCH_KILL_SEED=n` replays another sequence of delays.

#![cfg(unix)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ferrotorch_core::{DType, Tensor};
use ferrotorch_serialize::{Dict, Key, StateDict, Value, load, load_safetensors, save, save_safetensors};

/// Set in the child: `<pt|safetensors> <first generation> <path>`.
const CHILD_ENV: &str = "FERROTORCH_ATOMIC_KILL_CHILD";
const KILLS: usize = 50;

/// Elements of each tensor: 16 MB of f32, 8 MB of i64, 4 MB of bf16, 4 MB of u8.
const N_F32: usize = 2048 * 2048;
const N_I64: usize = 1 << 20;
const N_BF16: usize = 1024 * 2048;
const N_U8: usize = 4 << 20;

fn f32_at(g: u64, i: usize) -> f32 {
    ((i as u64 * 7 + g * 13) % 65521) as f32
}
fn i64_at(g: u64, i: usize) -> i64 {
    ((g << 32) | i as u64) as i64
}
/// Whole numbers up to 255: exact in bf16.
fn bf16_at(g: u64, i: usize) -> f32 {
    ((i as u64 + g) % 256) as f32
}
fn u8_at(g: u64, i: usize) -> u8 {
    (i as u64).wrapping_add(g * 3) as u8
}

/// The tensors of generation `g`.
fn tensors(g: u64) -> StateDict {
    let mut sd = StateDict::new();
    let w: Vec<f32> = (0..N_F32).map(|i| f32_at(g, i)).collect();
    sd.insert("weight", Tensor::from_vec(w, [2048, 2048]).unwrap());
    let ids: Vec<i64> = (0..N_I64).map(|i| i64_at(g, i)).collect();
    sd.insert("ids", Tensor::from_vec(ids, [N_I64]).unwrap());
    let h: Vec<f32> = (0..N_BF16).map(|i| bf16_at(g, i)).collect();
    let h = Tensor::from_vec(h, [1024, 2048])
        .unwrap()
        .to_dtype(DType::BF16)
        .unwrap();
    sd.insert("half", h);
    let b: Vec<u8> = (0..N_U8).map(|i| u8_at(g, i)).collect();
    sd.insert("bytes", Tensor::from_vec(b, [N_U8]).unwrap());
    sd
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    Pt,
    Safetensors,
}

/// Saves generation `g` to `path` in `format`.
fn save_generation(format: Format, g: u64, sd: &StateDict, path: &Path) {
    match format {
        Format::Pt => {
            let mut model = Dict::ordered();
            for (k, t) in sd.iter() {
                model.insert(k, t.clone());
            }
            let mut ckpt = Dict::new();
            ckpt.insert("generation", g as i64);
            ckpt.insert("model", model);
            save(&Value::Dict(ckpt), path).unwrap();
        }
        Format::Safetensors => {
            let meta = HashMap::from([("generation".to_string(), g.to_string())]);
            save_safetensors(sd, Some(&meta), path).unwrap();
        }
    }
}

/// Loads `path`, checks every element against its generation's values,
/// and returns the generation.
fn check_file(format: Format, path: &Path) -> Result<u64, String> {
    let (g, sd) = match format {
        Format::Pt => {
            let v = load(path).map_err(|e| format!("load: {e}"))?;
            let d = v.as_dict().ok_or("not a dict")?;
            let g = d.get_str("generation").and_then(Value::as_i64).ok_or("no generation")?;
            let model = d.get_str("model").and_then(Value::as_dict).ok_or("no model")?;
            let mut sd = StateDict::new();
            for (k, t) in model.iter() {
                let Key::Str(k) = k else {
                    return Err("an integer key".into());
                };
                sd.insert(k.clone(), t.as_tensor().ok_or("not a tensor")?.clone());
            }
            (g as u64, sd)
        }
        Format::Safetensors => {
            let st = load_safetensors(path).map_err(|e| format!("load_safetensors: {e}"))?;
            let g = st
                .metadata
                .get("generation")
                .and_then(|g| g.parse().ok())
                .ok_or("no generation")?;
            (g, st.tensors)
        }
    };
    let get = |name: &str| sd.get(name).ok_or_else(|| format!("generation {g}: no tensor {name}"));
    let first_bad = |name: &str, bad: Option<usize>| match bad {
        None => Ok(()),
        Some(i) => Err(format!("generation {g}: {name}[{i}] differs")),
    };
    let w = get("weight")?.to_vec::<f32>().map_err(|e| e.to_string())?;
    if w.len() != N_F32 {
        return Err(format!("generation {g}: weight has {} elements", w.len()));
    }
    first_bad(
        "weight",
        w.iter()
            .enumerate()
            .position(|(i, x)| x.to_bits() != f32_at(g, i).to_bits()),
    )?;
    let ids = get("ids")?.to_vec::<i64>().map_err(|e| e.to_string())?;
    first_bad("ids", (ids.len() != N_I64).then_some(0))?;
    first_bad("ids", ids.iter().enumerate().position(|(i, &x)| x != i64_at(g, i)))?;
    let h = get("half")?;
    first_bad("half", (h.dtype() != DType::BF16 || h.numel() != N_BF16).then_some(0))?;
    let h = h.to_vec::<f32>().map_err(|e| e.to_string())?;
    first_bad("half", h.iter().enumerate().position(|(i, &x)| x != bf16_at(g, i)))?;
    let b = get("bytes")?.to_vec::<u8>().map_err(|e| e.to_string())?;
    first_bad("bytes", (b.len() != N_U8).then_some(0))?;
    first_bad("bytes", b.iter().enumerate().position(|(i, &x)| x != u8_at(g, i)))?;
    Ok(g)
}

/// The child: saves generations `first, first + 1, ...` until killed,
/// announcing each on stdout. Not a test on its own (returns at once
/// without the variable); it stops by itself after a minute or when its
/// parent is gone, so that a failed parent leaves nothing running.
#[test]
fn child_saver() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let mut parts = spec.splitn(3, ' ');
    let format = match parts.next() {
        Some("pt") => Format::Pt,
        _ => Format::Safetensors,
    };
    let first: u64 = parts.next().unwrap().parse().unwrap();
    let path = PathBuf::from(parts.next().unwrap());
    let parent = std::os::unix::process::parent_id();
    let start = Instant::now();
    for g in first.. {
        if std::os::unix::process::parent_id() != parent || start.elapsed() > Duration::from_secs(60) {
            return;
        }
        let sd = tensors(g);
        println!("start {g}");
        save_generation(format, g, &sd, &path);
        println!("saved {g}");
    }
}

/// A child process killed when dropped (a failing parent leaves none).
struct Saver(Child);

impl Drop for Saver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `start 3` or `saved 3` at the end of a line of the child's output (the
/// test harness writes `test child_saver ... ` before the first).
fn event(line: &str) -> Option<(&str, u64)> {
    let mut words = line.split_whitespace().rev();
    let g = words.next()?.parse().ok()?;
    let what = words.next().filter(|w| *w == "start" || *w == "saved")?;
    Some((what, g))
}

/// What the child said before it died.
#[derive(Default)]
struct Said {
    last_started: Option<u64>,
    last_saved: Option<u64>,
}

/// Per format: the target, the generation it holds, the next one to
/// save, and a save's duration.
struct Target {
    format: Format,
    path: PathBuf,
    generation: u64,
    next: u64,
    save_time: Duration,
}

#[test]
fn sigkill_during_save_leaves_the_previous_or_the_new_checkpoint() {
    let seed = std::env::var("FERROTORCH_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64);
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let mut targets: Vec<Target> = [(Format::Pt, "ckpt.pt"), (Format::Safetensors, "ckpt.safetensors")]
        .into_iter()
        .map(|(format, name)| {
            let path = dir.path().join(name);
            let sd = tensors(0);
            // The second save is timed (the first also warms up allocator and page cache).
            save_generation(format, 0, &sd, &path);
            let t0 = Instant::now();
            save_generation(format, 0, &sd, &path);
            let save_time = t0.elapsed();
            assert_eq!(check_file(format, &path), Ok(0));
            Target {
                format,
                path,
                generation: 0,
                next: 1,
                save_time,
            }
        })
        .collect();
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng(seed);
    let (mut mid_save, mut advanced) = (0, 0);
    for kill in 0..KILLS {
        let t = &mut targets[kill % 2];
        let first = t.next;
        let spec = format!(
            "{} {first} {}",
            if t.format == Format::Pt { "pt" } else { "safetensors" },
            t.path.display()
        );
        let mut child = Saver(
            Command::new(&exe)
                .args(["--exact", "child_saver", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, spec)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let pid = child.0.id();
        let stdout = child.0.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // The first save has begun: kill it somewhere in the next 1.5 saves.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|e| panic!("kill {kill}: the child never started saving ({e})"));
            if event(&line) == Some(("start", first)) {
                break;
            }
        }
        let delay = t.save_time.mul_f64(1.5 * rng.unit());
        std::thread::sleep(delay);
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        reader.join().unwrap();
        let mut said = Said {
            last_started: Some(first),
            ..Said::default()
        };
        for line in rx.try_iter() {
            match event(&line) {
                Some(("start", g)) => said.last_started = Some(g),
                Some(("saved", g)) => said.last_saved = Some(g),
                _ => {}
            }
        }

        let held = check_file(t.format, &t.path)
            .unwrap_or_else(|e| panic!("kill {kill} (seed {seed}, after {delay:?}): {}: {e}", t.path.display()));
        let finished = said.last_saved.unwrap_or(t.generation);
        let renaming = said.last_started.filter(|&s| Some(s) != said.last_saved);
        assert!(
            held == finished || Some(held) == renaming,
            "kill {kill} (seed {seed}): the file holds generation {held}; the child finished {finished} \
             and was saving {renaming:?}"
        );
        if held != t.generation {
            advanced += 1;
        }
        t.generation = held;
        t.next = said.last_started.unwrap_or(first).max(held) + 1;

        // Besides the two targets, only this child's temporary file may be left.
        let prefix = format!(".{}.tmp-{pid}-", t.path.file_name().unwrap().to_string_lossy());
        let mut left = 0;
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "ckpt.pt" || name == "ckpt.safetensors" {
                continue;
            }
            assert!(name.starts_with(&prefix), "kill {kill}: unexpected file {name}");
            std::fs::remove_file(entry.path()).unwrap();
            left += 1;
        }
        assert!(left <= 1, "kill {kill}: {left} temporary files");
        mid_save += left;
    }
    eprintln!(
        "{KILLS} kills (seed {seed}) in {:.1?}: {mid_save} during a save (a temporary file left), \
         {advanced} after the child had renamed a new generation into place; \
         a save took {:?} (.pt) and {:?} (safetensors)",
        started.elapsed(),
        targets[0].save_time,
        targets[1].save_time
    );
    // The kills must land inside saves (else the test shows nothing).
    assert!(
        mid_save >= KILLS / 5,
        "only {mid_save} of {KILLS} kills landed during a save"
    );
}
