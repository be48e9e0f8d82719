//! The mnist example's training (see `main.rs`): flags, the networks, the
//! loop, and its checkpoints. `tests/mnist_resume.rs` runs it too.

use crate::common::report::{repo_path, with_fix};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use ferrotorch::autograd::no_grad;
use ferrotorch::data::datasets::MNIST;
use ferrotorch::data::transforms::{Compose, Normalize, ToTensor};
use ferrotorch::data::{DataLoader, Dataset, DistributedSampler};
use ferrotorch::distributed::ddp::{DdpOptions, DistributedDataParallel};
use ferrotorch::distributed::{self as dist, InitOptions};
use ferrotorch::nn::{
    Conv2d, ConvLayerOptions, CrossEntropyLoss, Dropout, Flatten, Forward, Linear, MaxPool2d, Module, ModuleState,
    ReLU, Sequential,
};
use ferrotorch::optim::lr_scheduler::{CosineAnnealingLR, LrScheduler};
use ferrotorch::optim::{AdamW, AdamWOptions, GradScaler, Optimizer};
use ferrotorch::serialize::{Dict, Value};
use ferrotorch::{Generator, Tensor, get_rng_state, manual_seed, set_rng_state};
use indicatif::{ProgressBar, ProgressStyle};

use crate::common::amp::{Amp, backward_and_step, peak_mib};
use crate::common::{Checkpoint, LossLog};

pub type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Which network to train.
#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum Arch {
    /// Flatten, Linear(784, 256), ReLU, Dropout(0.1), Linear(256, 10).
    Mlp,
    /// Conv(1, 32, 3, p1)-ReLU-MaxPool2, Conv(32, 64, 3, p1)-ReLU-MaxPool2,
    /// Flatten, Linear(3136, 128), ReLU, Linear(128, 10).
    Cnn,
}

/// Flags (the seed script's constants: batch_size, lr, num_epochs).
#[derive(Parser, Debug)]
#[command(about = "Train an MLP or a CNN on MNIST (the seeds' script)")]
pub struct Args {
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
    /// Continue from a checkpoint this example wrote (`ckpt_last.pt`,
    /// `ckpt_epN.pt`): model, optimizer, scheduler, epoch and step, and the
    /// random states, so the run goes on as if it had never stopped.
    /// `--resume auto` continues from `OUT_DIR/ckpt_last.pt` when it exists
    /// and starts afresh otherwise (what a job restarted by
    /// `ferrorun --max-restarts` wants).
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Stop after this many optimizer steps in all (counting those before
    /// `--resume`), writing `ckpt_last.pt`; 0: no limit.
    #[arg(long, default_value_t = 0)]
    stop_after: usize,
    /// Also write `ckpt_last.pt` every this many steps (0: only at the end
    /// of each epoch and at `--stop-after`).
    #[arg(long, default_value_t = 0)]
    checkpoint_every: usize,
    /// Mixed precision: the forward pass and the loss in bf16 or f16 under
    /// autocast (f16 with a GradScaler).
    #[arg(long, value_enum, default_value_t = Amp::Off)]
    amp: Amp,
    /// Instead of training, predict the peak memory of one training step on
    /// the meta device and measure it on the CPU.
    #[arg(long)]
    predict_memory: bool,
    /// Profile a few training steps after warm-up instead of training:
    /// print the operators by self CPU time, write the Chrome trace here.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Data-parallel training on the processes a launcher started
    /// (`ferrorun --nproc-per-node N`, `torchrun --no-python`, `mpirun -np
    /// N`): DistributedDataParallel, a DistributedSampler giving each
    /// process `--batch-size` images per step, rank 0 alone logging and
    /// writing checkpoints.
    #[arg(long)]
    pub ddp: bool,
    /// The process group's backend with `--ddp`.
    #[arg(long, default_value = "tcp")]
    dist_backend: String,
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
fn evaluate<M: Forward>(model: &M, loader: &DataLoader<(Tensor, i64)>, n: usize, amp: Amp) -> BoxResult<(f64, f64)> {
    let criterion = CrossEntropyLoss::new();
    model.eval();
    let (mut loss_sum, mut correct) = (0.0, 0i64);
    no_grad(|| -> BoxResult<()> {
        for batch in loader.iter()? {
            let (images, labels) = batch?;
            let out = {
                let _region = amp.region()?;
                model.call(&images)?
            };
            // Summed over the batch, so the mean is over images, not batches.
            loss_sum += criterion.call(&out, &labels)?.item::<f32>()? as f64 * labels.shape()[0] as f64;
            correct += out.argmax(Some(1), false)?.eq(&labels)?.sum()?.item::<i64>()?;
        }
        Ok(())
    })?;
    model.train();
    Ok((loss_sum / n as f64, correct as f64 / n as f64 * 100.0))
}

/// Where training stands: what a checkpoint holds besides the model,
/// optimizer and scheduler state dicts.
#[derive(Clone, Debug, Default)]
struct Progress {
    /// The epoch under way (0-based); at an epoch's end, the next one.
    epoch: usize,
    /// Batches of `epoch` already trained on.
    step_in_epoch: usize,
    /// Optimizer steps in all.
    step: usize,
    /// The sum of `epoch`'s batch losses so far, and its images.
    loss_sum: f64,
    seen: usize,
    /// The shuffling generator's state when `epoch` began.
    loader_state: Option<Tensor>,
}

/// The flags a checkpoint must agree with to be resumed (they shape the
/// model, the batches or the schedule).
fn run_signature(args: &Args) -> Dict {
    let mut d = Dict::new();
    d.insert("model", format!("{:?}", args.model).to_lowercase());
    d.insert("epochs", args.epochs as i64);
    d.insert("batch_size", args.batch_size as i64);
    d.insert("lr", args.lr);
    d.insert("seed", args.seed as i64);
    d
}

/// Writes a training checkpoint as `torch.save` does, atomically: the
/// seed script's `{"epoch", "model_state_dict", "optimizer_state_dict",
/// "loss"}` plus what an exact resume needs (the scheduler, the step, the
/// global generator's state for dropout, the shuffling generator's state
/// at the epoch's start). PyTorch reads it with `torch.load`.
fn save_checkpoint<M: Module>(
    path: &Path,
    args: &Args,
    model: &M,
    (optimizer, scheduler, scaler): (&AdamW, &CosineAnnealingLR, &GradScaler),
    progress: &Progress,
    loss: f64,
) -> BoxResult<()> {
    let mut ckpt = Dict::new();
    ckpt.insert("epoch", progress.epoch as i64);
    ckpt.insert("step_in_epoch", progress.step_in_epoch as i64);
    ckpt.insert("step", progress.step as i64);
    ckpt.insert("model_state_dict", model.state_dict());
    ckpt.insert("optimizer_state_dict", optimizer.state_dict());
    ckpt.insert("scheduler_state_dict", scheduler.state_dict());
    // Empty unless --amp f16 scales the loss (PyTorch's disabled scaler saves {}).
    ckpt.insert("scaler_state_dict", scaler.state_dict());
    ckpt.insert("loss", loss);
    ckpt.insert("epoch_loss_sum", progress.loss_sum);
    ckpt.insert("epoch_seen", progress.seen as i64);
    ckpt.insert("rng_state", get_rng_state()?);
    let loader_state = progress.loader_state.clone().ok_or("no shuffling state to save")?;
    ckpt.insert("loader_rng_state", loader_state);
    ckpt.insert("args", run_signature(args));
    ferrotorch::serialize::save(&Value::Dict(ckpt), path)?;
    Ok(())
}

/// Restores a checkpoint of [`save_checkpoint`] into the model, optimizer,
/// scheduler, the global generator and the shuffling generator; returns
/// where training stood. Errors name what is missing or does not match.
fn load_checkpoint<M: Module>(
    path: &Path,
    args: &Args,
    model: &M,
    optimizer: &mut AdamW,
    scheduler: &mut CosineAnnealingLR,
    scaler: &mut GradScaler,
    shuffle: &Generator,
) -> BoxResult<Progress> {
    use ferrotorch::serialize::{value_to_optimizer_state_dict, value_to_scheduler_state_dict, value_to_state_dict};
    let ckpt = Checkpoint::load(
        path,
        "args",
        run_signature(args),
        "--model, --epochs, --batch-size, --lr and --seed",
    )?;
    let (get, int) = (|k: &str| ckpt.get(k), |k: &str| ckpt.int(k));
    let tensor = |k: &str| ckpt.tensor(k).cloned();
    model.load_state_dict(&value_to_state_dict(get("model_state_dict")?)?, true)?;
    optimizer.load_state_dict(&value_to_optimizer_state_dict(get("optimizer_state_dict")?)?)?;
    scheduler.load_state_dict(&value_to_scheduler_state_dict(get("scheduler_state_dict")?)?)?;
    if scaler.is_enabled() {
        scaler.load_state_dict(&value_to_scheduler_state_dict(get("scaler_state_dict")?)?)?;
    }
    set_rng_state(&tensor("rng_state")?)?;
    let loader_state = tensor("loader_rng_state")?;
    shuffle.set_state_tensor(&loader_state)?;
    Ok(Progress {
        epoch: int("epoch")?,
        step_in_epoch: int("step_in_epoch")?,
        step: int("step")?,
        loss_sum: get("epoch_loss_sum")?
            .as_f64()
            .ok_or("'epoch_loss_sum' is not a float")?,
        seen: int("epoch_seen")?,
        loader_state: Some(loader_state),
    })
}

/// Trains `model` as the seed script does (from `--resume`'s checkpoint
/// when given) and returns the final test accuracy (`None` when
/// `--stop-after` stopped it mid-epoch).
pub fn train<M: Forward>(model: &M, args: &Args) -> BoxResult<Option<f64>> {
    // transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    let transform = || Compose::new().then(ToTensor).then(Normalize::new([0.1307], [0.3081]));
    let data_dir = repo_path(&args.data_dir);
    let load = |train: bool| {
        MNIST::new(&data_dir, train).map_err(|e| {
            with_fix(
                e,
                "the MNIST files ship in data/mnist/ of the ferrotorch repository; pass --data-dir DIR for a \
                 folder holding train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and \
                 t10k-labels-idx1-ubyte (each may be .gz)",
            )
        })
    };
    let train_set = load(true)?.with_transform(transform());
    let test_set = load(false)?.with_transform(transform());
    let (n_train, n_test) = (train_set.len(), test_set.len());
    // With --ddp: this process's rank, and rank 0 alone logs and saves.
    let (rank, world) = if args.ddp {
        (dist::get_rank()?, dist::get_world_size()?)
    } else {
        (0, 1)
    };
    let main = rank == 0;
    // DataLoader(train_set, batch_size=batch_size, shuffle=True, num_workers=2)
    // (with --ddp: sampler=DistributedSampler(train_set, seed=seed))
    let shuffle = Generator::new(args.seed);
    let sampler = if args.ddp {
        Some(DistributedSampler::new(n_train, world, rank)?.seed(args.seed))
    } else {
        None
    };
    // The generator also seeds the workers (PyTorch's base seed), so a
    // resumed run draws what the uninterrupted one drew, with --ddp too.
    let builder = DataLoader::builder(train_set)
        .batch_size(args.batch_size)
        .generator(shuffle.clone());
    let builder = match &sampler {
        Some(s) => builder.sampler(s.clone()),
        None => builder.shuffle(true),
    };
    let train_loader = builder.num_workers(args.workers).build()?;
    let test_loader = DataLoader::builder(test_set)
        .batch_size(1000)
        .num_workers(args.workers)
        .build()?;
    let criterion = CrossEntropyLoss::new();
    let mut optimizer = AdamW::new(model.parameters(), AdamWOptions::new().lr(args.lr))?;
    let mut scheduler = CosineAnnealingLR::new(&mut optimizer, args.epochs as i64, 0.0)?;
    let mut scaler = args.amp.scaler()?;
    let resume = match &args.resume {
        Some(p) if p.as_os_str() == "auto" => Some(args.out_dir.join("ckpt_last.pt")).filter(|p| p.exists()),
        other => other.clone(),
    };
    let mut progress = match &resume {
        Some(path) => {
            let p = load_checkpoint(path, args, model, &mut optimizer, &mut scheduler, &mut scaler, &shuffle)?;
            if main {
                println!(
                    "resumed from {}: epoch {}, step {} ({} of the epoch's batches done)",
                    path.display(),
                    p.epoch + 1,
                    p.step,
                    p.step_in_epoch
                );
            }
            p
        }
        None => Progress::default(),
    };
    if let Some(path) = &args.profile {
        let mut batches = train_loader.iter()?;
        crate::common::profile::profile_steps(path, || {
            let (images, labels) = batches
                .next()
                .ok_or("--profile: the training set has too few batches")??;
            let loss = {
                let _region = args.amp.region()?;
                criterion.call(&model.call(&images)?, &labels)?
            };
            backward_and_step(&mut scaler, &mut optimizer, &loss)?;
            optimizer.zero_grad()?;
            Ok(())
        })?;
        return Ok(None);
    }
    let n_params: usize = model.parameters().iter().map(|p| p.tensor().numel()).sum();
    if main {
        println!(
            "{:?}: {n_params} parameters; {n_train} training and {n_test} test images; batch {}, {} workers{}",
            args.model,
            args.batch_size,
            args.workers,
            if args.ddp {
                format!("; DDP on {world} processes (global batch {})", args.batch_size * world)
            } else {
                String::new()
            }
        );
    }
    std::fs::create_dir_all(&args.out_dir)?;
    let last = args.out_dir.join("ckpt_last.pt");
    let mut log = LossLog::default();
    let batches = train_loader.len()?;
    let (mut data_wait, mut step_time) = (Duration::ZERO, Duration::ZERO);
    let mut accuracy = None;
    while progress.epoch < args.epochs {
        let epoch = progress.epoch;
        if progress.step_in_epoch == 0 {
            progress.loader_state = Some(shuffle.get_state_tensor()?);
        }
        if let Some(s) = &sampler {
            s.set_epoch(epoch as u64);
        }
        model.train();
        let bar = if main {
            ProgressBar::new(batches as u64)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(ProgressStyle::with_template(
            "epoch {prefix} {bar:30} {pos}/{len} {msg} [{elapsed_precise}<{eta_precise}]",
        )?);
        bar.set_prefix(format!("{}/{}", epoch + 1, args.epochs));
        let start = Instant::now();
        let (first, seen_before) = (progress.step_in_epoch, progress.seen);
        let mut waited = Instant::now();
        let mut stopped = false;
        for (i, batch) in (first..).zip(train_loader.iter_from(first)?) {
            let (images, labels) = batch?;
            let got = Instant::now();
            data_wait += got - waited;
            // loss = criterion(model(images), labels); loss.backward(); optimizer.step(); optimizer.zero_grad()
            // (the forward pass under autocast with --amp, backward outside it; a GradScaler with f16)
            let loss = {
                let _region = args.amp.region()?;
                criterion.call(&model.call(&images)?, &labels)?
            };
            backward_and_step(&mut scaler, &mut optimizer, &loss)?;
            optimizer.zero_grad()?;
            let l = loss.item::<f32>()? as f64;
            progress.loss_sum += l;
            progress.seen += labels.shape()[0];
            progress.step_in_epoch = i + 1;
            progress.step += 1;
            log.push("train (batch)", epoch as f64 + (i + 1) as f64 / batches as f64, l);
            waited = Instant::now();
            step_time += waited - got;
            if i % 10 == 0 || i + 1 == batches {
                bar.set_message(format!(
                    "loss {:.4} {:.0} samples/s",
                    progress.loss_sum / (i + 1) as f64,
                    ((progress.seen - seen_before) * world) as f64 / start.elapsed().as_secs_f64()
                ));
                bar.set_position(i as u64 + 1);
            }
            let at_limit = args.stop_after > 0 && progress.step >= args.stop_after;
            let periodic = args.checkpoint_every > 0 && progress.step % args.checkpoint_every == 0;
            if main && (at_limit || periodic) && i + 1 < batches {
                save_checkpoint(&last, args, model, (&optimizer, &scheduler, &scaler), &progress, l)?;
            }
            if at_limit {
                stopped = true;
                break;
            }
        }
        bar.finish_and_clear();
        if stopped && progress.step_in_epoch < batches {
            if !main {
                break;
            }
            println!(
                "stopped after {} steps (epoch {}, batch {}/{batches}); {} resumes",
                progress.step,
                epoch + 1,
                progress.step_in_epoch,
                last.display()
            );
            break;
        }
        scheduler.step(&mut optimizer)?;
        let train_loss = progress.loss_sum / batches as f64;
        if !main {
            // The replicas are the same bits: rank 0 alone evaluates and saves.
            progress = Progress {
                epoch: epoch + 1,
                step: progress.step,
                loader_state: Some(shuffle.get_state_tensor()?),
                ..Progress::default()
            };
            if stopped {
                break;
            }
            continue;
        }
        let (test_loss, acc) = evaluate(model, &test_loader, n_test, args.amp)?;
        accuracy = Some(acc);
        log.push("train (epoch mean)", epoch as f64 + 1.0, train_loss);
        log.push("test", epoch as f64 + 1.0, test_loss);
        println!(
            "Epoch {}/{} | Loss: {train_loss:.4} | Test loss: {test_loss:.4} | Acc: {acc:.2}% | {:.1} s, {:.0} samples/s",
            epoch + 1,
            args.epochs,
            start.elapsed().as_secs_f64(),
            ((progress.seen - seen_before) * world) as f64 / start.elapsed().as_secs_f64()
        );
        progress = Progress {
            epoch: epoch + 1,
            step: progress.step,
            // The next epoch starts from the generator as this one left it.
            loader_state: Some(shuffle.get_state_tensor()?),
            ..Progress::default()
        };
        let ckpt = args.out_dir.join(format!("ckpt_ep{}.pt", epoch + 1));
        let stepper = (&optimizer, &scheduler, &scaler);
        save_checkpoint(&ckpt, args, model, stepper, &progress, test_loss)?;
        std::fs::copy(&ckpt, &last)?;
        if stopped {
            println!(
                "stopped after {} steps, at the end of epoch {}",
                progress.step,
                epoch + 1
            );
            break;
        }
    }
    if !main {
        return Ok(None);
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
        "data wait {:.2} s = {data_share:.1}% of step time ({:.2} s); peak memory {:.1} MiB (amp {:?}); checkpoints, \
         loss.csv and loss.png in {}",
        data_wait.as_secs_f64(),
        step_time.as_secs_f64(),
        peak_mib(),
        args.amp,
        args.out_dir.display()
    );
    Ok(accuracy)
}

/// `--predict-memory`: one training step on a random batch (model and
/// optimizer built inside it), predicted on the meta device and measured.
fn predict_memory(args: &Args) -> BoxResult<()> {
    fn step<M: Forward>(model: M, args: &Args) -> ferrotorch::Result<()> {
        let mut optimizer = AdamW::new(model.parameters(), AdamWOptions::new().lr(args.lr))?;
        let images = Tensor::randn([args.batch_size, 1, 28, 28])?;
        let labels = Tensor::randint(0, 10, [args.batch_size])?;
        let loss = {
            let _region = args.amp.region()?;
            CrossEntropyLoss::new().call(&model.call(&images)?, &labels)?
        };
        loss.backward()?;
        optimizer.step()?;
        Ok(())
    }
    let what = format!(
        "{:?} training step, batch {}, amp {:?}",
        args.model, args.batch_size, args.amp
    );
    crate::common::plan::predict_and_measure(&what, || {
        manual_seed(args.seed);
        match args.model {
            Arch::Mlp => step(Mlp::new()?, args),
            Arch::Cnn => step(cnn()?, args),
        }
    })
}

/// Seeds the global generator, builds the network `args` names and trains
/// it; returns the final test accuracy (`None` when stopped mid-epoch).
pub fn run(args: &Args) -> BoxResult<Option<f64>> {
    if args.predict_memory {
        predict_memory(args)?;
        return Ok(None);
    }
    manual_seed(args.seed);
    if args.ddp {
        // init_process_group(backend) with the launcher's variables.
        dist::init_process_group(InitOptions::new(&args.dist_backend))?;
        let accuracy = match args.model {
            Arch::Mlp => train(&DistributedDataParallel::new(Mlp::new()?, DdpOptions::default())?, args),
            Arch::Cnn => train(&DistributedDataParallel::new(cnn()?, DdpOptions::default())?, args),
        };
        dist::destroy_process_group();
        return accuracy;
    }
    match args.model {
        Arch::Mlp => train(&Mlp::new()?, args),
        Arch::Cnn => train(&cnn()?, args),
    }
}
