//! Times optimizer steps, for comparing update loops and for `perf record`:
//! `cargo run --release -p ferrotorch-optim --example step_profile -- [which] [numel] [steps]`.
//!
//! `which` is one of `sgd`, `sgd_momentum`, `sgd_nesterov_wd`, `adam`,
//! `adamw`, `adam_amsgrad`, `rmsprop`, `rmsprop_centered_momentum`,
//! `adagrad`, `clip` (`clip_grad_norm_` of the parameters' gradients) or
//! `all` (the default); `numel` defaults to the 784-256-10 MLP's 203530
//! parameters (as two tensors, 784*256+256 and 256*10+10), `steps` to 2000.
//! Prints microseconds per step. `FERROTORCH_ISA=scalar|avx2` picks the
//! loops' instruction set as for the core's kernels.

use std::time::Instant;

use ferrotorch::nn::Parameter;
use ferrotorch::nn::utils::clip_grad_norm_;
use ferrotorch::optim::{
    Adagrad, AdagradOptions, Adam, AdamOptions, AdamW, AdamWOptions, Optimizer, RMSprop, RmsPropOptions, SGD,
    SgdOptions,
};
use ferrotorch::{Result, Tensor};

const KINDS: [&str; 10] = [
    "sgd",
    "sgd_momentum",
    "sgd_nesterov_wd",
    "adam",
    "adamw",
    "adam_amsgrad",
    "rmsprop",
    "rmsprop_centered_momentum",
    "adagrad",
    "clip",
];

/// Parameters holding `numel` elements in two tensors (the MLP's split when
/// `numel` is its size), with fixed gradients.
fn params(numel: usize) -> Result<Vec<Parameter>> {
    let first = if numel == 203_530 { 784 * 256 + 256 } else { numel / 2 };
    let mut out = Vec::new();
    for n in [first, numel - first] {
        let p = Parameter::new(Tensor::randn([n])?.mul(0.1)?)?;
        p.tensor().set_grad(Some(Tensor::randn([n])?.mul(0.01)?))?;
        out.push(p);
    }
    Ok(out)
}

fn optimizer(kind: &str, ps: Vec<Parameter>) -> Result<Box<dyn Optimizer>> {
    let sgd = |o: SgdOptions| -> Result<Box<dyn Optimizer>> { Ok(Box::new(SGD::new(ps.clone(), o)?)) };
    Ok(match kind {
        "sgd" => sgd(SgdOptions::new().lr(1e-2))?,
        "sgd_momentum" => sgd(SgdOptions::new().lr(1e-2).momentum(0.9))?,
        "sgd_nesterov_wd" => sgd(SgdOptions::new()
            .lr(1e-2)
            .momentum(0.9)
            .nesterov(true)
            .weight_decay(1e-4))?,
        "adam" => Box::new(Adam::new(ps, AdamOptions::default())?),
        "adamw" => Box::new(AdamW::new(ps, AdamWOptions::default())?),
        "adam_amsgrad" => Box::new(Adam::new(ps, AdamOptions::new().amsgrad(true))?),
        "rmsprop" => Box::new(RMSprop::new(ps, RmsPropOptions::default())?),
        "rmsprop_centered_momentum" => Box::new(RMSprop::new(ps, RmsPropOptions::new().centered(true).momentum(0.9))?),
        "adagrad" => Box::new(Adagrad::new(ps, AdagradOptions::default())?),
        other => {
            return Err(ferrotorch::Error::invalid(
                "step_profile",
                format!("unknown optimizer {other}"),
            ));
        }
    })
}

fn time(kind: &str, numel: usize, steps: usize) -> Result<f64> {
    let ps = params(numel)?;
    let start;
    if kind == "clip" {
        clip_grad_norm_(&ps, 1.0, 2.0, false)?;
        start = Instant::now();
        for _ in 0..steps {
            clip_grad_norm_(&ps, 1e9, 2.0, false)?;
        }
    } else {
        let mut opt = optimizer(kind, ps)?;
        opt.step()?;
        start = Instant::now();
        for _ in 0..steps {
            opt.step()?;
        }
    }
    Ok(start.elapsed().as_secs_f64() * 1e6 / steps as f64)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args.first().map_or("all", String::as_str);
    let numel: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(203_530);
    let steps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let kinds: Vec<&str> = if which == "all" { KINDS.to_vec() } else { vec![which] };
    for kind in kinds {
        let us = time(kind, numel, steps)?;
        println!("{kind:<28} {numel} elements: {us:9.1} us/step");
    }
    Ok(())
}
