//! Training end to end: an MNIST MLP trained for 100 steps with the
//! DataLoader, AdamW and CosineAnnealingLR ends where PyTorch's run ends
//! (`tests/nn_data/train_ref.json`, written by `tests/gen_train_ref.py`);
//! and a run with dropout and shuffling gives the same bits with 0 or 2
//! loader workers and 1 or 2 rayon threads.

use std::error::Error;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ferrotorch::data::DataLoader;
use ferrotorch::data::datasets::MNIST;
use ferrotorch::data::transforms::{Compose, Normalize, ToTensor};
use ferrotorch::nn::{CrossEntropyLoss, Dropout, Flatten, Forward, Linear, Module, ReLU, Sequential};
use ferrotorch::optim::lr_scheduler::{CosineAnnealingLR, LrScheduler};
use ferrotorch::optim::{AdamW, AdamWOptions, Optimizer};
use ferrotorch::{Generator, Tensor, manual_seed};
use serde_json::Value;

type TestResult<T = ()> = Result<T, Box<dyn Error + Send + Sync>>;

/// Tests that seed and draw from the global generator run one at a time.
static RNG: Mutex<()> = Mutex::new(());

fn rng_lock() -> MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(PoisonError::into_inner)
}

fn reference() -> TestResult<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/nn_data/train_ref.json");
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

/// The MNIST training split through ToTensor + Normalize((0.1307,), (0.3081,)).
fn mnist() -> TestResult<MNIST> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/data/mnist");
    Ok(MNIST::new(root, true)?.with_transform(Compose::new().then(ToTensor).then(Normalize::new([0.1307], [0.3081]))))
}

/// `nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
/// [nn.Dropout(p),] nn.Linear(256, 10))`.
fn mlp(dropout: Option<f64>) -> TestResult<Sequential> {
    let mut net = Sequential::new()
        .push(Flatten::new())
        .push(Linear::new(784, 256)?)
        .push(ReLU::new());
    if let Some(p) = dropout {
        net = net.push(Dropout::new(p)?);
    }
    Ok(net.push(Linear::new(256, 10)?))
}

/// sum over i of bits(w[i]) * (i + 1), wrapping: the generator's exact checksum.
fn bits_checksum(t: &Tensor) -> TestResult<u64> {
    let v = t.contiguous()?.to_vec::<f32>()?;
    Ok(v.iter().zip(1u64..).fold(0u64, |acc, (x, k)| {
        acc.wrapping_add(u64::from(x.to_bits()).wrapping_mul(k))
    }))
}

/// The float64 sum and sum of absolute values.
fn sums(t: &Tensor) -> TestResult<(f64, f64)> {
    let v = t.contiguous()?.to_vec::<f32>()?;
    Ok(v.iter()
        .fold((0.0, 0.0), |(s, a), &x| (s + f64::from(x), a + f64::from(x).abs())))
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(f64::MIN_POSITIVE)
}

/// What a training run recorded.
struct Run {
    losses: Vec<f32>,
    lrs: Vec<f64>,
    /// Step 0's logits and gradients (in `parameters()` order).
    step0: Option<(Tensor, Vec<Tensor>)>,
}

/// `steps` steps of AdamW(lr=1e-3) with CosineAnnealingLR(T_max=100) and
/// CrossEntropyLoss over the loader's first batches: the PyTorch loop
/// `for x, y in loader: opt.zero_grad(); loss = loss_fn(model(x), y);
/// loss.backward(); opt.step(); sched.step()`.
fn train(model: &Sequential, loader: &DataLoader<(Tensor, i64)>, steps: usize) -> TestResult<Run> {
    let mut opt = AdamW::new(model.parameters(), AdamWOptions::new().lr(1e-3))?;
    let mut sched = CosineAnnealingLR::new(&mut opt, 100, 0.0)?;
    let loss_fn = CrossEntropyLoss::new();
    let mut run = Run {
        losses: Vec::with_capacity(steps),
        lrs: Vec::with_capacity(steps),
        step0: None,
    };
    for (step, batch) in loader.iter()?.take(steps).enumerate() {
        let (x, y) = batch?;
        opt.zero_grad()?;
        let out = model.call(&x)?;
        let loss = loss_fn.call(&out, &y)?;
        loss.backward()?;
        if step == 0 {
            let grads = model
                .parameters()
                .iter()
                .map(|p| p.grad_opt())
                .collect::<Option<Vec<_>>>();
            run.step0 = Some((out.detach(), grads.ok_or("a parameter without a gradient")?));
        }
        opt.step()?;
        sched.step(&mut opt)?;
        run.losses.push(loss.item::<f32>()?);
        run.lrs.push(sched.get_last_lr()[0]);
    }
    if run.losses.len() != steps {
        return Err(format!("the loader gave {} batches, not {steps}", run.losses.len()).into());
    }
    Ok(run)
}

fn u64s(v: &Value) -> TestResult<Vec<u64>> {
    v.as_array()
        .ok_or("not a list")?
        .iter()
        .map(|x| x.as_u64().ok_or_else(|| "not an integer".into()))
        .collect()
}

fn f64s(v: &Value) -> TestResult<Vec<f64>> {
    v.as_array()
        .ok_or("not a list")?
        .iter()
        .map(|x| x.as_f64().ok_or_else(|| "not a number".into()))
        .collect()
}

#[test]
fn mnist_mlp_adamw_cosine_matches_pytorch() -> TestResult {
    let _g = rng_lock();
    let r = reference()?;
    let steps = r["steps"].as_u64().ok_or("steps")? as usize;
    let batch = r["batch"].as_u64().ok_or("batch")? as usize;

    manual_seed(0);
    let model = mlp(None)?;
    // manual_seed(0) then Linear::new draws PyTorch's exact weights.
    let initial = model
        .parameters()
        .iter()
        .map(|p| bits_checksum(&p.tensor()))
        .collect::<TestResult<Vec<_>>>()?;
    assert_eq!(
        initial,
        u64s(&r["initial_bits"])?,
        "initial weights differ from PyTorch's"
    );
    let initial_weights = model
        .parameters()
        .iter()
        .map(|p| p.tensor().detach().clone_tensor())
        .collect::<ferrotorch::Result<Vec<_>>>()?;

    let loader = DataLoader::builder(mnist()?).batch_size(batch).build()?;
    let run = train(&model, &loader, steps)?;

    // The scheduler's learning rates are PyTorch's bits.
    assert_eq!(run.lrs, f64s(&r["lrs"])?);

    // Step 0 (same weights, same batch): logits and gradients.
    let s0 = &r["step0"];
    let (logits, grads) = run.step0.as_ref().ok_or("no step 0")?;
    // The first layer's output (`addmm`) on step 0's batch.
    let (x0, _) = DataLoader::builder(mnist()?)
        .batch_size(batch)
        .build()?
        .iter()?
        .next()
        .ok_or("no batch")??;
    let hidden =
        ferrotorch::nn::functional::linear(&x0.flatten((1, -1))?, &initial_weights[0], Some(&initial_weights[1]))?;
    // The data pipeline (ToTensor, Normalize, collation) gives PyTorch's bits.
    assert_eq!(
        bits_checksum(&x0)?,
        s0["input_bits"].as_u64().ok_or("input_bits")?,
        "step 0's batch differs"
    );
    let hidden_bitwise = bits_checksum(&hidden)? == s0["hidden_bits"].as_u64().ok_or("hidden_bits")?;
    let logits_bitwise = bits_checksum(logits)? == s0["logits_bits"].as_u64().ok_or("logits_bits")?;
    let logits_rel = rel(sums(logits)?.1, s0["logits"]["abs_sum"].as_f64().ok_or("logits")?);
    let grad_bits = u64s(&s0["grads_bits"])?;
    let mut grads_bitwise = Vec::new();
    for (k, g) in grads.iter().enumerate() {
        grads_bitwise.push(bits_checksum(g)? == grad_bits[k]);
        let want = s0["grads"][k]["abs_sum"].as_f64().ok_or("grads")?;
        let d = rel(sums(g)?.1, want);
        assert!(
            d < 1e-4,
            "step 0: gradient {k}'s sum of |g| differs by {d:e} (relative)"
        );
    }
    assert!(
        logits_rel < 1e-5,
        "step 0: logits' sum of |x| differs by {logits_rel:e}"
    );

    // Every step's loss within 1e-4 (relative) of PyTorch's.
    let want = f64s(&r["losses"])?;
    let mut max_rel = 0.0f64;
    let mut first_diff = None;
    for (i, (&got, &w)) in run.losses.iter().zip(&want).enumerate() {
        let d = rel(f64::from(got), w);
        if got != w as f32 && first_diff.is_none() {
            first_diff = Some(i);
        }
        max_rel = max_rel.max(d);
        assert!(
            d < 1e-4,
            "step {i}: loss {got} vs PyTorch's {w} (relative difference {d:e})"
        );
    }

    // The final weights.
    let final_bits = u64s(&r["final_bits"])?;
    let mut weights_bitwise = Vec::new();
    let mut weights_rel = 0.0f64;
    for (k, p) in model.parameters().iter().enumerate() {
        let t = p.tensor();
        weights_bitwise.push(bits_checksum(&t)? == final_bits[k]);
        let want = r["final"][k]["abs_sum"].as_f64().ok_or("final")?;
        let d = rel(sums(&t)?.1, want);
        weights_rel = weights_rel.max(d);
        assert!(d < 1e-4, "final parameter {k}: sum of |w| differs by {d:e} (relative)");
    }
    eprintln!(
        "vs PyTorch: max relative loss difference {max_rel:e} (first differing step {first_diff:?}); \
         step 0 first layer bitwise {hidden_bitwise}, logits bitwise {logits_bitwise} (relative sum difference {logits_rel:e}), gradients bitwise \
         {grads_bitwise:?}; final weights bitwise {weights_bitwise:?} (max relative sum difference {weights_rel:e})"
    );
    Ok(())
}

/// 30 steps with Dropout(0.1), shuffled by a seeded loader generator, on
/// `workers` loader threads inside a rayon pool of `threads`.
fn dropout_run(data: &MNIST, workers: usize, threads: usize) -> TestResult<(Vec<f32>, Vec<u64>)> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    pool.install(|| -> TestResult<(Vec<f32>, Vec<u64>)> {
        manual_seed(0);
        let model = mlp(Some(0.1))?;
        let loader = DataLoader::builder(data.clone())
            .batch_size(128)
            .shuffle(true)
            .generator(Generator::new(7))
            .num_workers(workers)
            .build()?;
        let run = train(&model, &loader, 30)?;
        let weights = model
            .parameters()
            .iter()
            .map(|p| bits_checksum(&p.tensor()))
            .collect::<TestResult<_>>()?;
        Ok((run.losses, weights))
    })
}

#[test]
fn training_is_deterministic_across_workers_and_threads() -> TestResult {
    let _g = rng_lock();
    let data = mnist()?;
    let base = dropout_run(&data, 0, 1)?;
    assert!(
        base.0.iter().all(|l| l.is_finite()) && base.0[29] < base.0[0],
        "{:?}",
        base.0
    );
    for (workers, threads) in [(2, 1), (0, 2), (2, 2)] {
        let other = dropout_run(&data, workers, threads)?;
        assert_eq!(
            other.0, base.0,
            "losses with {workers} workers and {threads} threads differ from 0 workers and 1 thread"
        );
        assert_eq!(
            other.1, base.1,
            "final weights with {workers} workers and {threads} threads differ"
        );
    }
    // Dropout is on: the same run without it gives other losses.
    manual_seed(0);
    let plain = mlp(None)?;
    let loader = DataLoader::builder(data.clone())
        .batch_size(128)
        .shuffle(true)
        .generator(Generator::new(7))
        .build()?;
    assert_ne!(train(&plain, &loader, 30)?.losses, base.0);
    Ok(())
}
