//! The seeds' MNIST training script (seed 003) in Rust, line for line:
//! `transforms.Compose([ToTensor(), Normalize((0.1307,), (0.3081,))])`,
//! DataLoaders with worker threads, the Flatten-Linear(784, 256)-ReLU-
//! Dropout(0.1)-Linear(256, 10) MLP (or, with `--model cnn`, a two-stage
//! CNN), CrossEntropyLoss, AdamW(lr=1e-3), CosineAnnealingLR(T_max=epochs)
//! stepped per epoch, test loss and accuracy after each epoch, and a
//! checkpoint per epoch. A progress bar shows loss and samples/s; the loss
//! curves are written as CSV and PNG.
//!
//! `cargo run --release --example mnist` (the README's main job);
//! `-- --help` lists the flags.

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use ferrotorch::autograd::no_grad;
use ferrotorch::data::datasets::MNIST;
use ferrotorch::data::transforms::{Compose, Normalize, ToTensor};
use ferrotorch::data::{DataLoader, Dataset};
use ferrotorch::nn::{
    Conv2d, ConvLayerOptions, CrossEntropyLoss, Dropout, Flatten, Forward, Linear, MaxPool2d, Module, ModuleState,
    ReLU, Sequential,
};
use ferrotorch::optim::lr_scheduler::{CosineAnnealingLR, LrScheduler};
use ferrotorch::optim::{AdamW, AdamWOptions, Optimizer};
use ferrotorch::{Generator, Tensor, manual_seed};
use indicatif::{ProgressBar, ProgressStyle};

use common::LossLog;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Which network to train.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Arch {
    /// Flatten, Linear(784, 256), ReLU, Dropout(0.1), Linear(256, 10).
    Mlp,
    /// Conv(1, 32, 3, p1)-ReLU-MaxPool2, Conv(32, 64, 3, p1)-ReLU-MaxPool2,
    /// Flatten, Linear(3136, 128), ReLU, Linear(128, 10).
    Cnn,
}

/// Flags (the seed script's constants: batch_size, lr, num_epochs).
#[derive(Parser, Debug)]
#[command(about = "Train an MLP or a CNN on MNIST (the seeds' script)")]
struct Args {
    /// The network.
    #[arg(long, value_enum, default_value_t = Arch::Mlp)]
    model: Arch,
    /// Passes over the training set.
    #[arg(long, default_value_t = 5)]
    epochs: usize,
    /// Images per training batch.
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    /// AdamW's learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Seed of the weights, the shuffling and the dropout masks.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// DataLoader worker threads (0: load on the training thread).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Folder with the MNIST IDX files (gzip or raw).
    #[arg(long, default_value = "data/mnist")]
    data_dir: PathBuf,
    /// Where checkpoints, the loss CSV and the plot go.
    #[arg(long, default_value = "runs/mnist")]
    out_dir: PathBuf,
}

/// The seed's `MLP(nn.Module)`: `self.net = nn.Sequential(...)`.
#[derive(Module)]
struct Mlp {
    net: Sequential,
    state: ModuleState,
}

impl Mlp {
    fn new() -> ferrotorch::Result<Self> {
        Ok(Mlp {
            net: Sequential::new()
                .push(Flatten::new())
                .push(Linear::new(784, 256)?)
                .push(ReLU::new())
                .push(Dropout::new(0.1)?)
                .push(Linear::new(256, 10)?),
            state: ModuleState::default(),
        })
    }
}

impl Forward for Mlp {
    fn forward(&self, x: &Tensor) -> ferrotorch::Result<Tensor> {
        self.net.call(x)
    }
}

/// The CNN of `--model cnn`.
fn cnn() -> ferrotorch::Result<Sequential> {
    let conv = |i, o| Conv2d::with_options(i, o, 3, ConvLayerOptions::new().padding(1));
    Ok(Sequential::new()
        .push(conv(1, 32)?)
        .push(ReLU::new())
        .push(MaxPool2d::new(2))
        .push(conv(32, 64)?)
        .push(ReLU::new())
        .push(MaxPool2d::new(2))
        .push(Flatten::new())
        .push(Linear::new(3136, 128)?)
        .push(ReLU::new())
        .push(Linear::new(128, 10)?))
}

/// Mean test loss and accuracy (in %) of `model` over `loader`.
fn evaluate<M: Forward>(model: &M, loader: &DataLoader<(Tensor, i64)>, n: usize) -> BoxResult<(f64, f64)> {
    let criterion = CrossEntropyLoss::new();
    model.eval();
    let (mut loss_sum, mut correct) = (0.0, 0i64);
    no_grad(|| -> BoxResult<()> {
        for batch in loader.iter()? {
            let (images, labels) = batch?;
            let out = model.call(&images)?;
            // Summed over the batch, so the mean is over images, not batches.
            loss_sum += criterion.forward(&out, &labels)?.item::<f32>()? as f64 * labels.shape()[0] as f64;
            correct += out.argmax(Some(1), false)?.eq(&labels)?.sum()?.item::<i64>()?;
        }
        Ok(())
    })?;
    model.train(true);
    Ok((loss_sum / n as f64, correct as f64 / n as f64 * 100.0))
}

/// Writes the model's weights (its state_dict) as a safetensors file,
/// atomically, with the epoch and the test accuracy as metadata.
fn save_checkpoint<M: Module>(model: &M, path: &Path, epoch: usize, accuracy: f64) -> BoxResult<()> {
    let sd = model.state_dict();
    let mut owned: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, t) in sd.iter() {
        let bytes: Vec<u8> = t.to_vec::<f32>()?.iter().flat_map(|v| v.to_le_bytes()).collect();
        owned.push((name.to_string(), t.shape().to_vec(), bytes));
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = owned
        .iter()
        .map(|(n, s, b)| {
            Ok((
                n.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b)?,
            ))
        })
        .collect::<Result<_, safetensors::SafeTensorError>>()?;
    let meta = BTreeMap::from([
        ("epoch".to_string(), epoch.to_string()),
        ("test_accuracy".to_string(), format!("{accuracy:.2}")),
    ]);
    let bytes = safetensors::serialize(views, Some(meta.into_iter().collect()))?;
    common::write_atomic(path, &bytes)?;
    Ok(())
}

/// Trains `model` as the seed script does and returns the final test accuracy.
fn train<M: Forward>(model: &M, args: &Args) -> BoxResult<f64> {
    // transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    let transform = || Compose::new().then(ToTensor).then(Normalize::new([0.1307], [0.3081]));
    let train_set = MNIST::new(&args.data_dir, true)?.with_transform(transform());
    let test_set = MNIST::new(&args.data_dir, false)?.with_transform(transform());
    let (n_train, n_test) = (train_set.len(), test_set.len());
    // DataLoader(train_set, batch_size=batch_size, shuffle=True, num_workers=2)
    let train_loader = DataLoader::builder(train_set)
        .batch_size(args.batch_size)
        .shuffle(true)
        .generator(Generator::new(args.seed))
        .num_workers(args.workers)
        .build()?;
    let test_loader = DataLoader::builder(test_set)
        .batch_size(1000)
        .num_workers(args.workers)
        .build()?;
    let criterion = CrossEntropyLoss::new();
    let mut optimizer = AdamW::new(
        model.parameters(),
        AdamWOptions {
            lr: args.lr,
            ..Default::default()
        },
    )?;
    let mut scheduler = CosineAnnealingLR::new(&mut optimizer, args.epochs as i64, 0.0)?;
    let n_params: usize = model.parameters().iter().map(|p| p.tensor().numel()).sum();
    println!(
        "{:?}: {n_params} parameters; {n_train} training and {n_test} test images; batch {}, {} workers",
        args.model, args.batch_size, args.workers
    );
    let mut log = LossLog::default();
    let batches = train_loader.len()?;
    let (mut data_wait, mut step_time) = (Duration::ZERO, Duration::ZERO);
    let mut accuracy = 0.0;
    for epoch in 0..args.epochs {
        model.train(true);
        let bar = ProgressBar::new(batches as u64);
        bar.set_style(ProgressStyle::with_template(
            "epoch {prefix} {bar:30} {pos}/{len} {msg} [{elapsed_precise}<{eta_precise}]",
        )?);
        bar.set_prefix(format!("{}/{}", epoch + 1, args.epochs));
        let (mut total_loss, mut seen) = (0.0, 0usize);
        let start = Instant::now();
        let mut waited = Instant::now();
        for (i, batch) in train_loader.iter()?.enumerate() {
            let (images, labels) = batch?;
            let got = Instant::now();
            data_wait += got - waited;
            // loss = criterion(model(images), labels); loss.backward(); optimizer.step(); optimizer.zero_grad()
            let loss = criterion.forward(&model.call(&images)?, &labels)?;
            loss.backward()?;
            optimizer.step()?;
            optimizer.zero_grad()?;
            let l = loss.item::<f32>()? as f64;
            total_loss += l;
            seen += labels.shape()[0];
            log.push("train (batch)", epoch as f64 + (i + 1) as f64 / batches as f64, l);
            waited = Instant::now();
            step_time += waited - got;
            if i % 10 == 0 || i + 1 == batches {
                bar.set_message(format!(
                    "loss {:.4} {:.0} samples/s",
                    total_loss / (i + 1) as f64,
                    seen as f64 / start.elapsed().as_secs_f64()
                ));
                bar.set_position(i as u64 + 1);
            }
        }
        bar.finish_and_clear();
        scheduler.step(&mut optimizer)?;
        let train_loss = total_loss / batches as f64;
        let (test_loss, acc) = evaluate(model, &test_loader, n_test)?;
        accuracy = acc;
        log.push("train (epoch mean)", epoch as f64 + 1.0, train_loss);
        log.push("test", epoch as f64 + 1.0, test_loss);
        println!(
            "Epoch {}/{} | Loss: {train_loss:.4} | Test loss: {test_loss:.4} | Acc: {acc:.2}% | {:.1} s, {:.0} samples/s",
            epoch + 1,
            args.epochs,
            start.elapsed().as_secs_f64(),
            seen as f64 / start.elapsed().as_secs_f64()
        );
        save_checkpoint(
            model,
            &args.out_dir.join(format!("ckpt_ep{}.safetensors", epoch + 1)),
            epoch + 1,
            acc,
        )?;
    }
    log.write_csv(&args.out_dir.join("loss.csv"), "epoch")?;
    log.write_png(
        &args.out_dir.join("loss.png"),
        match args.model {
            Arch::Mlp => "MNIST, MLP",
            Arch::Cnn => "MNIST, CNN",
        },
        "epoch",
    )?;
    let data_share = data_wait.as_secs_f64() / step_time.as_secs_f64().max(1e-9) * 100.0;
    println!(
        "data wait {:.2} s = {data_share:.1}% of step time ({:.2} s); checkpoints, loss.csv and loss.png in {}",
        data_wait.as_secs_f64(),
        step_time.as_secs_f64(),
        args.out_dir.display()
    );
    Ok(accuracy)
}

fn main() -> BoxResult<()> {
    let args = Args::parse();
    manual_seed(args.seed);
    let start = Instant::now();
    let accuracy = match args.model {
        Arch::Mlp => train(&Mlp::new()?, &args)?,
        Arch::Cnn => train(&cnn()?, &args)?,
    };
    println!("total time {:.1} s", start.elapsed().as_secs_f64());
    println!("test accuracy: {accuracy:.2}%");
    Ok(())
}
