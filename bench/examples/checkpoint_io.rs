//! The Rust side of `bench/checkpoint_io.py`: one checkpoint operation on
//! a large state dict, timed inside the process (the state dict is built
//! before the clock starts), printing `SECONDS <s>`.
//!
//! - `make DIR MB`: writes `DIR/ckpt.pt` and `DIR/ckpt.safetensors`, MB
//!   megabytes of float32 in 16 tensors;
//! - `save-pt PATH MB`: saves such a state dict as `.pt` (fsynced, as
//!   `torch.save` is not: the figure is against `dd conv=fsync`);
//! - `load-st PATH [touch]` / `load-pt PATH [touch]`: loads a file; with
//!   `touch`, then reads every element once (a sum per tensor), so the
//!   time includes bringing the bytes in, as `cat` and `torch.load` do.

use std::path::Path;
use std::time::Instant;

use ferrotorch::Tensor;
use ferrotorch::serialize::{
    LoadOptions, StateDict, load_safetensors, load_state_dict, save_safetensors, save_state_dict,
};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

fn state_dict(mb: usize) -> BoxResult<StateDict> {
    let per = mb * (1 << 20) / 4 / 16;
    let mut sd = StateDict::new();
    for i in 0..16 {
        sd.insert(format!("layers.{i}.weight"), Tensor::randn([per / 1024, 1024])?);
    }
    Ok(sd)
}

/// Reads every element of every tensor once.
fn touch(sd: &StateDict) -> BoxResult<f64> {
    let mut total = 0.0;
    for (_, t) in sd.iter() {
        total += t.sum()?.item::<f32>()? as f64;
    }
    Ok(total)
}

fn timed<T>(f: impl FnOnce() -> BoxResult<T>) -> BoxResult<T> {
    let t = Instant::now();
    let out = f()?;
    println!("SECONDS {:.6}", t.elapsed().as_secs_f64());
    Ok(out)
}

fn main() -> BoxResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> BoxResult<&str> {
        args.get(i).map(String::as_str).ok_or_else(|| {
            "usage: checkpoint_io make DIR MB | save-pt PATH MB | load-st PATH [touch] | load-pt PATH [touch]".into()
        })
    };
    let touching = args.get(2).is_some_and(|a| a == "touch");
    match arg(0)? {
        "make" => {
            let dir = Path::new(arg(1)?);
            let sd = state_dict(arg(2)?.parse()?)?;
            save_state_dict(&sd, dir.join("ckpt.pt"))?;
            save_safetensors(&sd, None, dir.join("ckpt.safetensors"))?;
        }
        "save-pt" => {
            let sd = state_dict(arg(2)?.parse()?)?;
            timed(|| Ok(save_state_dict(&sd, arg(1)?)?))?;
        }
        "load-st" => {
            let sd = timed(|| {
                let sd = load_safetensors(arg(1)?)?.tensors;
                if touching {
                    touch(&sd)?;
                }
                Ok(sd)
            })?;
            assert_eq!(sd.len(), 16);
        }
        "load-pt" => {
            let sd = timed(|| {
                let sd = load_state_dict(arg(1)?, &LoadOptions::new())?;
                if touching {
                    touch(&sd)?;
                }
                Ok(sd)
            })?;
            assert_eq!(sd.len(), 16);
        }
        other => return Err(format!("unknown command {other}").into()),
    }
    Ok(())
}
