//! Times saving and loading a large state dict: `MB` megabytes of float32
//! in 16 tensors (default 256), as `.pt` and as safetensors, in `DIR`
//! (default the system's temp dir).
//!
//! `cargo run --release -p ferrotorch-serialize --example checkpoint_time -- [MB] [DIR]`

use std::time::Instant;

use ferrotorch_core::Tensor;
use ferrotorch_serialize::{
    LoadOptions, StateDict, load_safetensors, load_state_dict, save_safetensors, save_state_dict,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mb: usize = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(256);
    let dir = std::env::args()
        .nth(2)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let per = mb * (1 << 20) / 4 / 16;
    let mut sd = StateDict::new();
    for i in 0..16 {
        sd.insert(format!("layer{i}.weight"), Tensor::randn([per])?);
    }
    let pt = dir.join("checkpoint_time.pt");
    let st = dir.join("checkpoint_time.safetensors");
    let t = Instant::now();
    save_state_dict(&sd, &pt)?;
    let save_pt = t.elapsed();
    let t = Instant::now();
    let back = load_state_dict(&pt, &LoadOptions::new())?;
    let load_pt = t.elapsed();
    assert_eq!(back.len(), 16);
    let t = Instant::now();
    save_safetensors(&sd, None, &st)?;
    let save_st = t.elapsed();
    let t = Instant::now();
    let back = load_safetensors(&st)?;
    let load_st = t.elapsed();
    assert_eq!(back.tensors.len(), 16);
    println!("{mb} MB: .pt save {save_pt:.2?} load {load_pt:.2?}; safetensors save {save_st:.2?} load {load_st:.2?}");
    std::fs::remove_file(pt)?;
    std::fs::remove_file(st)?;
    Ok(())
}
