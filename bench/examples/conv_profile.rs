//! Times the convolution primitives of the bench's conv figures one by one
//! (forward, input gradient, weight gradient, bias gradient) and the max
//! pool's forward and backward, single-threaded unless `RAYON_NUM_THREADS`
//! says otherwise, with the GFLOP/s of each product; or runs one of them in
//! a loop for `perf record`:
//! `cargo run --release -p ferrotorch-bench --example conv_profile [-- NAME ITERS]`
//! (NAME: `fwd`, `input`, `weight`, `pool_fwd`, `pool_bwd`, of the second layer).
//! `FT_LAYER=n,c,hw,o` times (or profiles) a 3x3, padding 1 layer of that
//! shape instead.

use std::time::Instant;

use ferrotorch::backend::dispatch::call;
use ferrotorch::ops::conv::{ConvParams, ConvolutionBackward};
use ferrotorch::{ConvOptions, Result, Tensor};

fn time(label: &str, flops: f64, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
    for _ in 0..3 {
        f()?;
    }
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        let mut n = 0;
        while t.elapsed().as_secs_f64() < 0.2 {
            f()?;
            n += 1;
        }
        best = best.min(t.elapsed().as_secs_f64() / n as f64);
    }
    let rate = if flops > 0.0 {
        format!("{:6.1} GFLOP/s", flops / best / 1e9)
    } else {
        String::new()
    };
    println!("{label:<40} {:8.3} ms {rate}", best * 1e3);
    Ok(())
}

fn layer(n: usize, c: usize, hw: usize, o: usize, profile: Option<(&str, usize)>) -> Result<()> {
    let x = Tensor::randn([n, c, hw, hw])?;
    let w = Tensor::randn([o, c, 3, 3])?;
    let b = Tensor::randn([o])?;
    let gy = Tensor::randn([n, o, hw, hw])?;
    let p = ConvParams {
        stride: [1, 1].into_iter().collect(),
        padding: [1, 1].into_iter().collect(),
        dilation: [1, 1].into_iter().collect(),
        transposed: false,
        output_padding: [0, 0].into_iter().collect(),
        groups: 1,
    };
    let bwd = |mask: [bool; 3]| ConvolutionBackward {
        params: p.clone(),
        output_mask: mask,
    };
    let flops = 2.0 * (n * o * c * 9 * hw * hw) as f64;
    let mut fwd = || x.conv2d(&w, Some(&b), ConvOptions::new().padding(1)).map(drop);
    let mut input = || call(&bwd([true, false, false]), &[&gy, &x, &w]).map(drop);
    let mut weight = || call(&bwd([false, true, false]), &[&gy, &x, &w]).map(drop);
    let mut bias = || call(&bwd([false, false, true]), &[&gy, &x, &w]).map(drop);
    if let Some((name, iters)) = profile {
        let f: &mut dyn FnMut() -> Result<()> = match name {
            "fwd" => &mut fwd,
            "input" => &mut input,
            "weight" => &mut weight,
            _ => return Ok(()),
        };
        for _ in 0..iters {
            f()?;
        }
        return Ok(());
    }
    let tag = format!("{n}x{c}x{hw}x{hw}->{o}");
    time(&format!("{tag} forward"), flops, &mut fwd)?;
    time(&format!("{tag} input grad"), flops, &mut input)?;
    time(&format!("{tag} weight grad"), flops, &mut weight)?;
    time(&format!("{tag} bias grad"), 0.0, &mut bias)?;
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let profile = args
        .get(1)
        .map(|n| (n.as_str(), args.get(2).and_then(|i| i.parse().ok()).unwrap_or(100)));
    if let Some((name, iters)) = profile
        && name.starts_with("pool")
    {
        let x = Tensor::randn([64, 32, 28, 28])?;
        let (_, idx) = x.max_pool2d_with_indices(2)?;
        let gy = Tensor::randn([64, 32, 14, 14])?;
        let p = ferrotorch::ops::pool::MaxPool2dBackward {
            params: ferrotorch::ops::pool::Pool2dParams {
                kernel: [2, 2],
                stride: [2, 2],
                padding: [0, 0],
                dilation: [1, 1],
                ceil_mode: false,
            },
        };
        for _ in 0..iters {
            if name == "pool_fwd" {
                drop(x.max_pool2d_with_indices(2)?);
            } else {
                drop(call(&p, &[&gy, &x, &idx])?);
            }
        }
        return Ok(());
    }
    if let Ok(spec) = std::env::var("FT_LAYER") {
        let v: Vec<usize> = spec.split(',').map(|x| x.parse().unwrap()).collect();
        return layer(v[0], v[1], v[2], v[3], profile);
    }
    if profile.is_none() {
        layer(64, 1, 28, 32, None)?;
    }
    layer(64, 32, 14, 64, profile)?;
    if profile.is_none() {
        let x = Tensor::randn([64, 32, 28, 28])?.requires_grad_(true)?;
        let gy = Tensor::randn([64, 32, 14, 14])?;
        time("max_pool2d 2x2 forward", 0.0, &mut || {
            x.detach().max_pool2d_with_indices(2).map(drop)
        })?;
        time("max_pool2d 2x2 forward + backward", 0.0, &mut || {
            x.max_pool2d(2)?.backward_with(&gy)?;
            x.set_grad(None)
        })?;
    }
    Ok(())
}
