//! The Rust half of `bench/check_pt_compat.py`: loads every checkpoint
//! PyTorch wrote into `DIR/from_torch/` and saves it again into
//! `DIR/from_rust/` under the same name (a round trip through this
//! crate's reader and writer), and writes `DIR/from_rust/rust_native.pt`
//! and `rust_native.safetensors`, built here, for PyTorch to check.
//!
//! `cargo run --release -p ferrotorch-serialize --example pt_compat -- DIR`

use std::collections::HashMap;
use std::path::PathBuf;

use ferrotorch::optim::lr_scheduler::{LrScheduler, MultiStepLR};
use ferrotorch::optim::{AdamW, AdamWOptions, Optimizer};
use ferrotorch_core::{DType, Tensor};
use ferrotorch_serialize::{
    Dict, StateDict, Value, load, load_safetensors, optimizer_state_dict_to_value, save, save_safetensors,
    scheduler_state_dict_to_value,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).ok_or("usage: pt_compat DIR")?);
    let src = dir.join("from_torch");
    let dst = dir.join("from_rust");
    std::fs::create_dir_all(&dst)?;
    let mut names: Vec<_> = std::fs::read_dir(&src)?.collect::<Result<Vec<_>, _>>()?;
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let name = e.file_name().to_string_lossy().to_string();
        if name.ends_with(".pt") {
            let v = load(e.path()).map_err(|err| format!("{name}: {err}"))?;
            save(&v, dst.join(&name))?;
            println!("round trip {name}");
        } else if name.ends_with(".safetensors") {
            let st = load_safetensors(e.path()).map_err(|err| format!("{name}: {err}"))?;
            save_safetensors(&st.tensors, Some(&st.metadata), dst.join(&name))?;
            println!("round trip {name}");
        }
    }
    save(&native()?, dst.join("rust_native.pt"))?;
    let mut sd = StateDict::new();
    for d in ferrotorch_core::ALL_DTYPES {
        sd.insert(d.name(), values(d)?);
    }
    let meta: HashMap<String, String> = [("format".to_string(), "pt".to_string())].into();
    save_safetensors(&sd, Some(&meta), dst.join("rust_native.safetensors"))?;
    println!("wrote rust_native.pt, rust_native.safetensors");
    Ok(())
}

/// `(arange(12) - 5) / 4` as a [3, 4] tensor of `dtype` (uint8:
/// `arange(12)`; bool: `arange(12) % 3 == 0`): the values the script expects.
fn values(dtype: DType) -> Result<Tensor, ferrotorch_core::Error> {
    let a = Tensor::arange(12)?;
    let t = match dtype {
        DType::Bool => a.remainder(3)?.eq(0)?,
        DType::U8 => a.to_dtype(DType::U8)?,
        d if d.is_floating_point() => a.sub(5)?.to_dtype(d)?.div(4)?,
        d => a.sub(5)?.to_dtype(d)?,
    };
    t.reshape([3, 4])
}

/// A checkpoint built in Rust: every dtype, views sharing one storage, and
/// the plain Python values of a training checkpoint.
fn native() -> Result<Value, Box<dyn std::error::Error>> {
    let mut dtypes = Dict::new();
    for d in ferrotorch_core::ALL_DTYPES {
        dtypes.insert(d.name(), values(d)?);
    }
    let base = Tensor::arange(24)?.to_dtype(DType::F32)?.reshape([4, 6])?;
    let mut views = Dict::new();
    views.insert("base", base.clone());
    views.insert("t", base.t()?);
    views.insert("narrow", base.narrow(1, 2, 3)?.narrow(0, 1, 3)?);
    views.insert("row", base.select(0, 2)?);
    let mut ck = Dict::new();
    ck.insert("epoch", 3i64);
    ck.insert("dtypes", dtypes);
    ck.insert("views", views);
    ck.insert("loss", 0.12);
    ck.insert("name", "run");
    ck.insert(
        "flags",
        Value::List(vec![Value::Bool(true), Value::Bool(false), Value::None]),
    );
    ck.insert("big", 1i64 << 40);
    ck.insert("neg", -70000i64);
    ck.insert("min", i64::MIN);
    ck.insert("bytes", Value::Bytes(vec![0, 255, b'a', b'b']));
    ck.insert(
        "tuple",
        Value::Tuple(vec![
            Value::Int(1),
            Value::Float(2.5),
            Value::Str("x".into()),
            Value::Int(4),
        ]),
    );
    let mut int_keys = Dict::new();
    int_keys.insert(0i64, "zero");
    int_keys.insert(7i64, "seven");
    ck.insert("int_keys", int_keys);
    ck.insert("grad", Tensor::from_vec(vec![1.0f32, 2.0], [2])?.requires_grad_(true)?);
    // A MultiStepLR after 3 steps (milestones 2 and 5), with its optimizer.
    let p = ferrotorch::nn::Parameter::new(Tensor::zeros([2])?)?;
    let mut opt = AdamW::new(vec![p], AdamWOptions::default())?;
    let mut sched = MultiStepLR::new(&mut opt, &[2, 5], 0.5)?;
    for _ in 0..3 {
        opt.step()?;
        sched.step(&mut opt)?;
    }
    ck.insert("scheduler", scheduler_state_dict_to_value(&sched.state_dict()));
    ck.insert("optimizer", optimizer_state_dict_to_value(&opt.state_dict()));
    Ok(Value::Dict(ck))
}
