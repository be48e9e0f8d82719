//! Runs one small-tensor workload in a loop, for `perf record` / `perf stat`:
//! `cargo run --release -p ferrotorch-bench --example overhead_profile -- chain50 200000`.
//! Workloads: `add1` (1-element `a.add(&b)`), `add1_op` (the same as `&a + &b`),
//! `index1` / `index1_get` (`x[0, 1:3]` by `x.i(..)` / `x.get(..)`), `mul_sum` (`(a*b).sum().backward()`
//! on 16 elements), `chain50` (forward + backward of a 50-op chain),
//! `chain50_fwd` (its forward only), `chain50_nograd` (the forward without
//! autograd), `empty1` (creating a 1-element tensor),
//! `mlp` (forward + backward of the bench's 784-256-256-10 MLP at batch 128),
//! `index_add` (the bench's index_add_1e6_rows), `layer_norm` / `gelu` (their
//! forward + backward figures on [1024, 768]), `sdpa` (the causal attention figure), `train_mlp` / `train_cnn` /
//! `train_gpt` (the train_step_* figures), `embed` (the embed_minilm_b32
//! figure: the MiniLM example's pipeline on 32 sentences),
//! `module_mlp16` (the module-call-overhead figure: a `Sequential` of three
//! `Linear(16, 16)` with ReLUs, batch 1, no grad) and `module_mlp16_ops`
//! (the same operators without modules: the difference is the cost of the
//! module calls and their hook checks).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ferrotorch::{Result, Tensor, TensorIndex};
use ferrotorch_bench::{Mlp, chain50};

/// The system allocator, counting calls when `FT_COUNT_ALLOCS` is set
/// (allocations per iteration are then printed with the time).
struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static COUNTING: AtomicBool = AtomicBool::new(false);

fn count() {
    if COUNTING.load(Ordering::Relaxed) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's `layout` meets GlobalAlloc::alloc's contract, passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from System with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` came from System with `layout`; `new_size` meets realloc's contract (the caller's).
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() -> Result<()> {
    // As the bench binary: the work runs on a thread of the pool
    // (RAYON_NUM_THREADS sets its size).
    let pool = rayon::ThreadPoolBuilder::new().build().expect("thread pool");
    pool.install(run)
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map(String::as_str).unwrap_or("chain50");
    let iters: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    COUNTING.store(std::env::var_os("FT_COUNT_ALLOCS").is_some(), Ordering::Relaxed);
    // FT_PROFILE=1: the loop runs under a recording profiler (what
    // recording costs per op; bench/profiler_overhead.sh).
    let profiler = match std::env::var_os("FT_PROFILE") {
        Some(_) => Some(ferrotorch::profiler::start(Default::default())?),
        None => None,
    };
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let t0 = std::time::Instant::now();
    match which {
        "add1" => {
            let (a, b) = (Tensor::randn([1])?, Tensor::randn([1])?);
            for _ in 0..iters {
                std::hint::black_box(a.add(&b)?);
            }
        }
        "add1_op" => {
            // The operator form of add1: `&a + &b` (same kernel path).
            let (a, b) = (Tensor::randn([1])?, Tensor::randn([1])?);
            for _ in 0..iters {
                std::hint::black_box(&a + &b);
            }
        }
        "index1" => {
            // `x[0, 1:3]` through the tuple index trait.
            let x = Tensor::randn([4, 4])?;
            for _ in 0..iters {
                std::hint::black_box(x.i((0, 1..3))?);
            }
        }
        "index1_get" => {
            // The same view through the slice-of-items form.
            let x = Tensor::randn([4, 4])?;
            let idx = [TensorIndex::Int(0), TensorIndex::slice(Some(1), Some(3), 1)];
            for _ in 0..iters {
                std::hint::black_box(x.get(&idx)?);
            }
        }
        "empty1" => {
            for _ in 0..iters {
                std::hint::black_box(Tensor::empty([1])?);
            }
        }
        "chain50_nograd" => {
            let x = Tensor::randn([1])?;
            for _ in 0..iters {
                std::hint::black_box(chain50(&x)?);
            }
        }
        "chain50_fwd" => {
            let x = Tensor::randn([1])?.requires_grad_(true)?;
            for _ in 0..iters {
                std::hint::black_box(chain50(&x)?);
            }
        }
        "layer_norm" | "gelu" => {
            // The bench's layer_norm / gelu forward + backward on [1024, 768].
            let x = Tensor::randn([1024, 768])?.requires_grad_(true)?;
            let w = Tensor::randn([768])?.requires_grad_(true)?;
            let b = Tensor::randn([768])?.requires_grad_(true)?;
            let gy = [Tensor::randn([1024, 768])?];
            let opts = ferrotorch::autograd::GradOptions {
                grad_outputs: Some(&gy),
                ..Default::default()
            };
            for _ in 0..iters {
                if which == "gelu" {
                    std::hint::black_box(ferrotorch::autograd::grad(&[&x.gelu()?], &[&x], opts)?);
                } else {
                    let y = x.layer_norm([768], Some(&w), Some(&b), 1e-5)?;
                    std::hint::black_box(ferrotorch::autograd::grad(&[&y], &[&x, &w, &b], opts)?);
                }
            }
        }
        "sdpa" | "sdpa_math" => {
            // The bench's sdpa_causal_fwd_bwd_16x4x64x32 figure (`sdpa_math`:
            // the same as 3-d inputs [64, 64, 32], which take the math path).
            use ferrotorch::nn::functional::{SdpaOptions, scaled_dot_product_attention};
            let shape: &[usize] = if which == "sdpa" {
                &[16, 4, 64, 32]
            } else {
                &[64, 64, 32]
            };
            let qkv: Vec<Tensor> = (0..3)
                .map(|_| Tensor::randn(shape)?.requires_grad_(true))
                .collect::<Result<_>>()?;
            let gy = [Tensor::randn(shape)?];
            let opts = ferrotorch::autograd::GradOptions {
                grad_outputs: Some(&gy),
                ..Default::default()
            };
            let causal = SdpaOptions::new().is_causal(true);
            for _ in 0..iters {
                let y = scaled_dot_product_attention(&qkv[0], &qkv[1], &qkv[2], &causal)?;
                std::hint::black_box(ferrotorch::autograd::grad(&[&y], &[&qkv[0], &qkv[1], &qkv[2]], opts)?);
            }
        }
        "train_mlp" | "train_cnn" | "train_gpt" => {
            // The bench's train_step_* figures (forward, loss, backward, AdamW).
            use ferrotorch_bench::train_steps::{cnn_step, gpt_step, mlp_step};
            match which {
                "train_mlp" => {
                    let mut s = mlp_step()?;
                    for _ in 0..iters {
                        s.step()?;
                    }
                }
                "train_cnn" => {
                    let mut s = cnn_step()?;
                    for _ in 0..iters {
                        s.step()?;
                    }
                }
                _ => {
                    let mut s = gpt_step()?;
                    for _ in 0..iters {
                        s.step()?;
                    }
                }
            }
        }
        "embed" => {
            // The bench's embed_minilm_b32 figure (needs scripts/fetch_minilm.sh).
            let embed_err = |e: ferrotorch_bench::embed::EmbedError| ferrotorch::Error::invalid("embed", e.to_string());
            let s = ferrotorch_bench::embed::EmbedStep::new().map_err(embed_err)?;
            for _ in 0..iters {
                std::hint::black_box(s.step().map_err(embed_err)?);
            }
        }
        "index_add" => {
            // The bench's index_add_1e6_rows figure.
            let x = Tensor::zeros([10_000, 32])?;
            let idx = Tensor::randint(0, 10_000, [1_000_000])?;
            let src = Tensor::randn([1_000_000, 32])?;
            for _ in 0..iters {
                std::hint::black_box(x.index_add(0, &idx, &src, 1)?);
            }
        }
        "mlp" => {
            let mlp = Mlp::new()?;
            for _ in 0..iters {
                mlp.step()?;
            }
        }
        "mm_mlp" => {
            // The MLP's largest product alone: [128, 784] x [784, 256]^T.
            // FT_MM_ROWS changes the 128 rows (the batch).
            let rows = std::env::var("FT_MM_ROWS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(128);
            let x = Tensor::randn([rows, 784])?;
            let w = Tensor::randn([256, 784])?;
            for _ in 0..iters {
                std::hint::black_box(x.matmul(&w.t()?)?);
            }
        }
        "mm_shapes" => {
            // Each product of the MLP's step on its own.
            let x = Tensor::randn([128, 784])?;
            let w1 = Tensor::randn([256, 784])?;
            let w2 = Tensor::randn([256, 256])?;
            let h = Tensor::randn([128, 256])?;
            let g = Tensor::randn([128, 256])?;
            let cases: [(&str, &Tensor, Tensor); 5] = [
                ("fwd1 x@w1^T", &x, w1.t()?),
                ("fwd2 h@w2^T", &h, w2.t()?),
                ("dW1 g^T@x", &g, x.clone()),
                ("dW2 g^T@h", &g, h.clone()),
                ("dX2 g@w2", &g, w2.clone()),
            ];
            for (i, (name, a, b)) in cases.iter().enumerate() {
                let a = if i == 2 || i == 3 { a.t()? } else { (*a).clone() };
                let t = std::time::Instant::now();
                for _ in 0..iters {
                    std::hint::black_box(a.matmul(b)?);
                }
                println!("{name}: {:.1} us", t.elapsed().as_secs_f64() / iters as f64 * 1e6);
            }
        }
        "module_mlp16" | "module_mlp16_ops" => {
            use ferrotorch::nn::{Forward, Linear, Module, ReLU, Sequential, functional as F};
            let net = Sequential::new()
                .push(Linear::new(16, 16)?)
                .push(ReLU::new())
                .push(Linear::new(16, 16)?)
                .push(ReLU::new())
                .push(Linear::new(16, 16)?);
            let ps: Vec<Tensor> = net.parameters().iter().map(|p| p.tensor()).collect();
            let x = Tensor::randn([1, 16])?;
            let _g = ferrotorch::autograd::no_grad_guard();
            if which == "module_mlp16" {
                for _ in 0..iters {
                    std::hint::black_box(net.call(&x)?);
                }
            } else {
                for _ in 0..iters {
                    let h = F::linear(&x, &ps[0], Some(&ps[1]))?.relu()?;
                    let h = F::linear(&h, &ps[2], Some(&ps[3]))?.relu()?;
                    std::hint::black_box(F::linear(&h, &ps[4], Some(&ps[5]))?);
                }
            }
        }
        "mul_sum" => {
            let a = Tensor::randn([16])?.requires_grad_(true)?;
            let b = Tensor::randn([16])?.requires_grad_(true)?;
            for _ in 0..iters {
                a.mul(&b)?.sum()?.backward()?;
            }
        }
        _ => {
            let x = Tensor::randn([1])?.requires_grad_(true)?;
            for _ in 0..iters {
                chain50(&x)?.sum()?.backward()?;
            }
        }
    }
    let per = t0.elapsed().as_secs_f64() / iters as f64;
    if let Some(p) = profiler {
        eprintln!("{which}: {} events recorded", p.stop().events().len());
    }
    let allocs = (ALLOCS.load(Ordering::Relaxed) - a0) as f64 / iters as f64;
    if COUNTING.load(Ordering::Relaxed) {
        println!("{which}: {:.3} us per iteration, {allocs:.1} allocations", per * 1e6);
    } else {
        println!("{which}: {:.3} us per iteration", per * 1e6);
    }
    Ok(())
}
