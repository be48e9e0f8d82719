//! A character-level GPT trained on Shakespeare, nanoGPT-style: AdamW
//! with linear warmup and cosine decay, train/val loss printed as it
//! goes, a training checkpoint (`ckpt.pt`, a `torch.save` file) at each
//! evaluation that `--resume` continues from exactly, the loss curves
//! written as CSV and PNG, and text generated at the end (temperature,
//! top-k).
//!
//! `cargo run --release --example gpt` (the defaults take about two
//! minutes on 2 cores); `-- --help` lists the flags.

mod model;
mod pipeline;

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use ferrotorch::autograd::no_grad;
use ferrotorch::distributed::ddp::{DdpOptions, DistributedDataParallel};
use ferrotorch::distributed::dtensor::{DTensor, Placement};
use ferrotorch::distributed::pipelining::ScheduleKind;
use ferrotorch::distributed::tensor_parallel::loss_parallel_cross_entropy;
use ferrotorch::distributed::{self as dist, DeviceMesh, InitOptions};
use ferrotorch::nn::{Forward, Module};
use ferrotorch::optim::lr_scheduler::{LambdaLR, LrScheduler};
use ferrotorch::optim::{AdamW, AdamWOptions, GradScaler, Optimizer};
use ferrotorch::serialize::{
    Dict, Value, value_to_optimizer_state_dict, value_to_scheduler_state_dict, value_to_state_dict,
};
use ferrotorch::{Generator, Reduction, Tensor, TensorOptions, get_rng_state, manual_seed, set_rng_state};
use indicatif::{ProgressBar, ProgressStyle};

use common::amp::{Amp, backward_and_step, peak_mib};
use common::{Checkpoint, LossLog};
use model::{Gpt, GptConfig};
use pipeline::Pipeline;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Flags (nanoGPT's names where it has them).
#[derive(Parser, Debug)]
#[command(about = "Train a character-level GPT on Shakespeare")]
pub(crate) struct Args {
    /// The training text (ASCII).
    #[arg(long, default_value = "data/text/shakespeare_8plays.txt")]
    data: PathBuf,
    /// Where the checkpoint, the loss CSV and plot go.
    #[arg(long, default_value = "runs/gpt")]
    out_dir: PathBuf,
    /// Continue from a checkpoint this example wrote (`ckpt.pt`): model,
    /// optimizer, schedule, step and random states (with `--ddp`, every
    /// rank's batch generator), so the run goes on as if it had never
    /// stopped. `--resume auto` continues from `OUT_DIR/ckpt.pt` when it
    /// exists and starts afresh otherwise (what a job restarted by
    /// `ferrorun --max-restarts` wants).
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Stop after this many steps (before `--max-iters`), writing
    /// `ckpt.pt`; 0: run to the end.
    #[arg(long, default_value_t = 0)]
    stop_after: usize,
    /// Optimizer steps.
    #[arg(long, default_value_t = 1500)]
    max_iters: usize,
    /// Sequences per step.
    #[arg(long, default_value_t = 16)]
    batch_size: usize,
    /// Context length.
    #[arg(long, default_value_t = 64)]
    block_size: usize,
    /// Transformer blocks.
    #[arg(long, default_value_t = 4)]
    n_layer: usize,
    /// Attention heads.
    #[arg(long, default_value_t = 4)]
    n_head: usize,
    /// Embedding width.
    #[arg(long, default_value_t = 128)]
    n_embd: usize,
    /// Dropout probability.
    #[arg(long, default_value_t = 0.0)]
    dropout: f64,
    /// Peak learning rate.
    #[arg(long, default_value_t = 3e-3)]
    learning_rate: f64,
    /// Linear warmup steps.
    #[arg(long, default_value_t = 50)]
    warmup_iters: usize,
    /// The learning rate reached at the end of the cosine decay.
    #[arg(long, default_value_t = 3e-4)]
    min_lr: f64,
    /// AdamW's weight decay (on weight matrices and embeddings only).
    #[arg(long, default_value_t = 0.1)]
    weight_decay: f64,
    /// Steps between evaluations.
    #[arg(long, default_value_t = 250)]
    eval_interval: usize,
    /// Batches per evaluation.
    #[arg(long, default_value_t = 10)]
    eval_iters: usize,
    /// Seed of the weights, the batches, and the sampling.
    #[arg(long, default_value_t = 1337)]
    seed: u64,
    /// Characters to generate at the end.
    #[arg(long, default_value_t = 300)]
    generate: usize,
    /// Sampling temperature.
    #[arg(long, default_value_t = 0.8)]
    temperature: f64,
    /// Sample among the k most likely characters only (0: all).
    #[arg(long, default_value_t = 20)]
    top_k: usize,
    /// Mixed precision: the forward pass in bf16 or f16 under autocast
    /// (f16 with a GradScaler).
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
    /// (`ferrorun --nproc-per-node N`, `torchrun --no-python`): each rank
    /// draws its own `--batch-size` windows (batch generator seeded with
    /// seed + rank, as nanoGPT's `seed_offset`), gradients are averaged by
    /// DistributedDataParallel, rank 0 alone evaluates, logs, saves and
    /// samples (the unwrapped model's state dict, as nanoGPT's `raw_model`).
    #[arg(long)]
    ddp: bool,
    /// Fully sharded data parallel (FSDP2's `fully_shard`) on the
    /// processes a launcher started: each block's parameters, gradients and
    /// optimizer state cut across the data-parallel ranks. Every rank
    /// evaluates and samples with the others (the forwards are collective);
    /// rank 0 prints.
    #[arg(long)]
    fsdp: bool,
    /// Tensor parallelism over groups of this many processes (Megatron's
    /// layout: attention heads and MLP features cut across them, loss
    /// parallel on the vocabulary); with `--fsdp`, the processes form a
    /// data-parallel x tensor-parallel mesh (`--fsdp --tp 2` on 4: 2 x 2).
    #[arg(long, default_value_t = 1)]
    tp: usize,
    /// Pipeline parallelism: the blocks cut into this many stages, one per
    /// process (the launcher's), trained with the 1F1B schedule over
    /// `--microbatches` microbatches of `--batch-size`.
    #[arg(long, default_value_t = 1)]
    pp: usize,
    /// Microbatches per step with `--pp`.
    #[arg(long, default_value_t = 4)]
    microbatches: usize,
    /// The pipeline schedule with `--pp`: `1f1b`, `gpipe`, or
    /// `interleaved` (interleaved 1F1B, two stages per process; the
    /// microbatches a multiple of the processes).
    #[arg(long, value_enum, default_value_t = PpSchedule::OneFOneB)]
    pp_schedule: PpSchedule,
    /// The process group's backend with `--ddp`, `--fsdp` or `--tp`.
    #[arg(long, default_value = "tcp")]
    dist_backend: String,
}

/// The pipeline schedules of `--pp-schedule`.
#[derive(Clone, Copy, Debug, PartialEq, clap::ValueEnum)]
pub(crate) enum PpSchedule {
    /// 1F1B.
    #[value(name = "1f1b")]
    OneFOneB,
    /// GPipe: every forward, then every backward.
    Gpipe,
    /// Interleaved 1F1B over two stages per process.
    Interleaved,
}

impl PpSchedule {
    /// Its name in the log.
    fn label(self) -> &'static str {
        match self {
            PpSchedule::OneFOneB => "1F1B",
            PpSchedule::Gpipe => "GPipe",
            PpSchedule::Interleaved => "interleaved 1F1B",
        }
    }

    fn kind(self) -> ScheduleKind {
        match self {
            PpSchedule::OneFOneB => ScheduleKind::OneFOneB,
            PpSchedule::Gpipe => ScheduleKind::GPipe,
            PpSchedule::Interleaved => ScheduleKind::Interleaved1F1B,
        }
    }
}

/// The model, alone (or sharded in place by `--fsdp` / `--tp`) or
/// wrapped for data-parallel training.
enum Net {
    Plain(Gpt),
    Ddp(DistributedDataParallel<Gpt>),
    Pipelined(Pipeline),
}

impl Net {
    /// The model itself (nanoGPT's `raw_model`).
    fn raw(&self) -> &Gpt {
        match self {
            Net::Plain(m) => m,
            Net::Ddp(d) => d.module(),
            Net::Pipelined(p) => p.model(),
        }
    }

    /// What training steps call: the wrapper under DDP (a pipeline's
    /// steps go through [`Net::pipeline`]).
    fn trained(&self) -> &dyn Forward {
        match self {
            Net::Plain(m) => m,
            Net::Ddp(d) => d,
            Net::Pipelined(p) => p.model(),
        }
    }

    /// The pipeline under `--pp`.
    fn pipeline(&self) -> Option<&Pipeline> {
        match self {
            Net::Pipelined(p) => Some(p),
            _ => None,
        }
    }
}

/// How the processes share the work: data parallel (`--ddp`), sharded
/// (`--fsdp`, `--tp`) or one process.
struct Parallel {
    rank: usize,
    world: usize,
    /// This process's data-parallel rank and their number (ranks of one
    /// tensor-parallel group draw the same batches).
    dp_rank: usize,
    dp: usize,
    /// The tensor-parallel mesh (`--tp` above 1): loss parallel over it.
    tp: Option<Arc<DeviceMesh>>,
    /// The data-parallel mesh `--fsdp` shards over.
    dp_mesh: Option<Arc<DeviceMesh>>,
    /// Whether forwards are collective (`--fsdp`, `--tp`): every rank
    /// evaluates and samples.
    sharded: bool,
    distributed: bool,
}

impl Parallel {
    /// Joins the process group the flags ask for and lays out the mesh.
    fn init(args: &Args) -> BoxResult<Parallel> {
        let sharded = args.fsdp || args.tp > 1 || args.pp > 1;
        if args.ddp && sharded {
            return Err("--ddp does not combine with --fsdp, --tp or --pp (use --fsdp --tp N)".into());
        }
        if args.pp > 1 && (args.fsdp || args.tp > 1 || args.amp != Amp::Off) {
            return Err("--pp does not combine with --fsdp, --tp or --amp yet".into());
        }
        if args.pp == 0 || args.microbatches == 0 || !args.batch_size.is_multiple_of(args.microbatches) {
            return Err(format!(
                "--pp {} with --microbatches {}: both positive, and the microbatches must divide --batch-size {}",
                args.pp, args.microbatches, args.batch_size
            )
            .into());
        }
        if args.tp == 0 || !args.n_head.is_multiple_of(args.tp) {
            return Err(format!("--tp {} must divide --n-head {}", args.tp, args.n_head).into());
        }
        if !(args.ddp || sharded) {
            return Ok(Parallel {
                rank: 0,
                world: 1,
                dp_rank: 0,
                dp: 1,
                tp: None,
                dp_mesh: None,
                sharded: false,
                distributed: false,
            });
        }
        // init_process_group(backend) with the launcher's variables.
        dist::init_process_group(InitOptions::new(&args.dist_backend))?;
        let (rank, world) = (dist::get_rank()?, dist::get_world_size()?);
        if !world.is_multiple_of(args.tp) {
            return Err(format!("--tp {} must divide the {world} processes", args.tp).into());
        }
        if args.pp > 1 && world != args.pp {
            return Err(format!("--pp {} needs as many processes, not {world}", args.pp).into());
        }
        // The stages of a pipeline, like the ranks of a tensor-parallel
        // group, work on one batch.
        let group = args.tp * args.pp;
        let mut p = Parallel {
            rank,
            world,
            dp_rank: rank / group,
            dp: world / group,
            tp: None,
            dp_mesh: None,
            sharded,
            distributed: true,
        };
        // One mesh (one set of groups) for both dimensions.
        if args.tp > 1 {
            let mesh = dist::init_device_mesh("cpu", &[p.dp, args.tp], Some(&["dp", "tp"]))?;
            p.tp = Some(Arc::new(mesh.submesh(&["tp"])?));
            if args.fsdp {
                p.dp_mesh = Some(Arc::new(mesh.submesh(&["dp"])?));
            }
        } else if args.fsdp {
            p.dp_mesh = Some(Arc::new(dist::init_device_mesh("cpu", &[world], None)?));
        }
        Ok(p)
    }

    /// The model as the flags want it: wrapped by DDP, cut by `--tp`,
    /// sharded by `--fsdp` over the data-parallel ranks.
    fn model(&self, args: &Args, config: &GptConfig) -> BoxResult<Net> {
        let model = Gpt::new(config)?;
        if args.pp > 1 {
            let kind = args.pp_schedule.kind();
            return Ok(Net::Pipelined(Pipeline::new(
                model,
                kind,
                args.microbatches,
                config.vocab_size,
            )?));
        }
        if args.ddp {
            return Ok(Net::Ddp(DistributedDataParallel::new(model, DdpOptions::default())?));
        }
        if let Some(tp) = &self.tp {
            model.parallelize(tp)?;
        }
        if let Some(dp) = &self.dp_mesh {
            model.fully_shard(dp)?;
        }
        Ok(Net::Plain(model))
    }
}

/// The corpus as token ids, with its alphabet.
struct Corpus {
    chars: Vec<char>,
    train: Tensor,
    val: Tensor,
}

impl Corpus {
    /// Reads `path`; the alphabet is its sorted distinct characters; the
    /// first 90% trains, the rest validates.
    fn load(path: &std::path::Path) -> BoxResult<Corpus> {
        let text = std::fs::read_to_string(common::report::repo_path(path)).map_err(|e| {
            common::report::with_fix(
                format!("{}: {e}", path.display()),
                "the Shakespeare text ships in data/text/ of the ferrotorch repository; pass --data FILE for another \
                 ASCII text",
            )
        })?;
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        let ids: Vec<i64> = text
            .chars()
            .map(|c| chars.binary_search(&c).unwrap_or(0) as i64)
            .collect();
        if ids.len() < 1000 {
            return Err(format!("{}: only {} characters, too few to train on", path.display(), ids.len()).into());
        }
        let n = ids.len() * 9 / 10;
        Ok(Corpus {
            chars,
            train: Tensor::from_vec(ids[..n].to_vec(), [n])?,
            val: Tensor::from_vec(ids[n..].to_vec(), [ids.len() - n])?,
        })
    }

    /// A batch of `b` random windows: inputs `[b, t]` and the next
    /// characters `[b, t]` as targets.
    fn batch(&self, val: bool, b: usize, t: usize, g: &Generator) -> ferrotorch::Result<(Tensor, Tensor)> {
        let data = if val { &self.val } else { &self.train };
        let starts = TensorOptions::new()
            .generator(g)
            .randint(0, (data.numel() - t - 1) as i64, [b])?;
        let starts = starts.to_vec::<i64>()?;
        let window = |off: i64| -> ferrotorch::Result<Vec<Tensor>> {
            starts.iter().map(|&s| data.narrow(0, s + off, t as i64)).collect()
        };
        let (xs, ys) = (window(0)?, window(1)?);
        let stack = |v: &[Tensor]| Tensor::stack(&v.iter().collect::<Vec<_>>(), 0);
        Ok((stack(&xs)?, stack(&ys)?))
    }
}

/// The mean cross-entropy of next-character prediction (of `vocab`
/// classes; under tensor parallelism over `tp`, from logits whose classes
/// are cut across its ranks: loss parallel).
fn loss_of(model: &dyn Forward, x: &Tensor, y: &Tensor, amp: Amp, tp: Tp) -> ferrotorch::Result<Tensor> {
    // The forward pass and the loss under autocast (with `--amp`); the
    // backward pass runs outside the region, as PyTorch recommends.
    let _region = amp.region()?;
    let logits = model.call(x)?;
    let v = logits.shape()[2];
    if let Some((mesh, vocab)) = tp {
        let logits = logits.to_dtype(ferrotorch::DType::F32)?;
        return Ok(loss_parallel_cross_entropy(&logits, y, vocab, mesh)?);
    }
    logits
        .view([-1, v as i64])?
        .cross_entropy(&y.view([-1])?, None, Reduction::Mean, -100, 0.0)
}

/// The tensor-parallel mesh and the vocabulary size, under `--tp`.
type Tp<'a> = Option<(&'a Arc<DeviceMesh>, usize)>;

/// One optimizer step on the batch `(x, y)`; its loss (under `--pp`, the
/// mean of the microbatches').
fn train_step(
    net: &Net,
    (x, y): (&Tensor, &Tensor),
    args: &Args,
    tp: Tp,
    (scaler, opt): (&mut GradScaler, &mut AdamW),
) -> BoxResult<f64> {
    if let Some(p) = net.pipeline() {
        opt.zero_grad()?;
        let l = p.loss(x, y)?;
        opt.step()?;
        return Ok(l as f64);
    }
    let loss = loss_of(net.trained(), x, y, args.amp, tp)?;
    opt.zero_grad()?;
    backward_and_step(scaler, opt, &loss)?;
    Ok(loss.item::<f32>()? as f64)
}

/// Mean train and val loss over `iters` batches each, in eval mode.
fn estimate_loss(net: &Net, corpus: &Corpus, args: &Args, g: &Generator, tp: Tp) -> BoxResult<(f64, f64)> {
    let model = net.raw();
    model.eval();
    let mut out = [0.0; 2];
    no_grad(|| -> BoxResult<()> {
        for (k, val) in [false, true].into_iter().enumerate() {
            for _ in 0..args.eval_iters {
                let (x, y) = corpus.batch(val, args.batch_size, args.block_size, g)?;
                let loss = match net.pipeline() {
                    Some(p) => p.loss(&x, &y)?,
                    None => loss_of(model, &x, &y, args.amp, tp)?.item::<f32>()?,
                };
                out[k] += loss as f64 / args.eval_iters as f64;
            }
        }
        Ok(())
    })?;
    model.train();
    Ok((out[0], out[1]))
}

/// `n` characters continuing `context`, sampled with `temperature` among
/// the `top_k` most likely.
fn generate(
    net: &Net,
    corpus: &Corpus,
    context: &str,
    n: usize,
    (args, g): (&Args, &Generator),
    tp: Tp,
) -> BoxResult<String> {
    let model = net.raw();
    model.eval();
    let mut ids: Vec<i64> = context
        .chars()
        .map(|c| corpus.chars.binary_search(&c).unwrap_or(0) as i64)
        .collect();
    no_grad(|| -> BoxResult<()> {
        for _ in 0..n {
            let from = ids.len().saturating_sub(model.block_size());
            let x = Tensor::from_vec(ids[from..].to_vec(), [1, ids.len() - from])?;
            let mut logits = match net.pipeline() {
                Some(p) => p.logits(&x)?,
                None => model.call(&x)?,
            };
            if let Some((mesh, vocab)) = tp {
                // This rank's classes: every rank samples from all of them.
                let shape = [logits.shape()[0], logits.shape()[1], vocab];
                logits = DTensor::from_local(&logits, mesh, &[Placement::Shard(2)], Some(&shape))?.full_tensor()?;
            }
            let last = logits.select(1, -1)?.div(args.temperature)?;
            let last = if args.top_k > 0 && args.top_k < corpus.chars.len() {
                // logits[logits < v[:, [-1]]] = -inf
                let (v, _) = last.topk(args.top_k as i64, -1, true)?;
                let kth = v.narrow(1, args.top_k as i64 - 1, 1)?;
                last.masked_fill(&last.lt(&kth)?, f64::NEG_INFINITY)?
            } else {
                last
            };
            let probs = last.softmax(-1)?;
            ids.push(probs.multinomial_with(1, false, g)?.item::<i64>()?);
        }
        Ok(())
    })?;
    model.train();
    Ok(ids.iter().map(|&i| corpus.chars[i as usize]).collect())
}

/// The flags a checkpoint must agree with to be resumed (they shape the
/// model, the batches or the schedule), and with `--ddp` on more than one
/// process the number of processes (which sets the batch of a step).
fn run_signature(args: &Args, world: usize) -> Dict {
    let mut d = Dict::new();
    if world > 1 {
        d.insert("world_size", world as i64);
    }
    for (k, v) in [
        ("max_iters", args.max_iters),
        ("batch_size", args.batch_size),
        ("block_size", args.block_size),
        ("n_layer", args.n_layer),
        ("n_head", args.n_head),
        ("n_embd", args.n_embd),
        ("warmup_iters", args.warmup_iters),
        ("eval_interval", args.eval_interval),
        ("eval_iters", args.eval_iters),
    ] {
        d.insert(k, v as i64);
    }
    for (k, v) in [
        ("dropout", args.dropout),
        ("learning_rate", args.learning_rate),
        ("min_lr", args.min_lr),
        ("weight_decay", args.weight_decay),
    ] {
        d.insert(k, v);
    }
    d.insert("seed", args.seed as i64);
    d
}

/// Every rank's batch-generator state, rank by rank: `[world, n]` bytes
/// (`[1, n]` on one process). Under `--ddp` every rank calls it at the same
/// steps (an all-gather).
fn batch_states(g: &Generator, world: usize) -> BoxResult<Tensor> {
    let mine = g.get_state_tensor()?;
    if world == 1 {
        return Ok(mine.unsqueeze(0)?);
    }
    let all = (0..world)
        .map(|_| mine.zeros_like())
        .collect::<ferrotorch::Result<Vec<_>>>()?;
    dist::all_gather(&all, &mine)?;
    Ok(Tensor::stack(&all, 0)?)
}

/// Writes nanoGPT's `ckpt.pt` (model, optimizer, `iter_num`, the run's
/// flags) plus the schedule and the random states (global: dropout, the
/// same on every rank; `batch_rng_state`: rank 0's batches and sampling;
/// `batch_rng_states`: every rank's, from [`batch_states`]), atomically,
/// as `torch.save` does.
fn save_checkpoint(
    path: &Path,
    args: &Args,
    model: &Gpt,
    opt: &AdamW,
    sched: &LambdaLR,
    step: usize,
    states: Tensor,
) -> BoxResult<()> {
    let world = states.shape()[0];
    let mut ckpt = Dict::new();
    ckpt.insert("model", model.state_dict());
    ckpt.insert("optimizer", opt.state_dict());
    ckpt.insert("scheduler", sched.state_dict());
    ckpt.insert("iter_num", step as i64);
    ckpt.insert("config", run_signature(args, world));
    ckpt.insert("rng_state", get_rng_state()?);
    ckpt.insert("batch_rng_state", states.select(0, 0)?.contiguous()?);
    ckpt.insert("batch_rng_states", states);
    ferrotorch::serialize::save(&Value::Dict(ckpt), path)?;
    Ok(())
}

/// Restores a checkpoint of [`save_checkpoint`] on rank `rank` of `world`
/// (its own batch generator's state); returns its step. A checkpoint
/// written by a run on another number of processes is refused (the
/// signature holds it).
fn load_checkpoint(
    path: &Path,
    args: &Args,
    model: &Gpt,
    opt: &mut AdamW,
    sched: &mut LambdaLR,
    g: &Generator,
    (rank, world): (usize, usize),
) -> BoxResult<usize> {
    let ckpt = Checkpoint::load(
        path,
        "config",
        run_signature(args, world),
        "model, batch, schedule, seed and process-count flags",
    )?;
    let (get, tensor) = (|k: &str| ckpt.get(k), |k: &str| ckpt.tensor(k));
    model.load_state_dict(&value_to_state_dict(get("model")?)?, true)?;
    opt.load_state_dict(&value_to_optimizer_state_dict(get("optimizer")?)?)?;
    sched.load_state_dict(&value_to_scheduler_state_dict(get("scheduler")?)?)?;
    set_rng_state(tensor("rng_state")?)?;
    if world == 1 {
        g.set_state_tensor(tensor("batch_rng_state")?)?;
    } else {
        let states = tensor("batch_rng_states")?;
        if states.ndim() != 2 || states.shape()[0] != world {
            return Err(format!(
                "{}: batch_rng_states has shape {:?}, not one row per process of {world}",
                path.display(),
                states.shape()
            )
            .into());
        }
        g.set_state_tensor(&states.select(0, rank as i64)?.contiguous()?)?;
    }
    ckpt.int("iter_num")
}

fn main() -> std::process::ExitCode {
    match run(Args::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => common::report::fail(&*e),
    }
}

/// Trains (or, with `--predict-memory` / `--profile`, measures) as the
/// flags say; the first error.
pub(crate) fn run(args: Args) -> BoxResult<()> {
    manual_seed(args.seed);
    let corpus = Corpus::load(&args.data)?;
    let config = GptConfig {
        vocab_size: corpus.chars.len(),
        block_size: args.block_size,
        n_layer: args.n_layer,
        n_head: args.n_head,
        n_embd: args.n_embd,
        dropout: args.dropout,
    };
    if args.n_head == 0 || !args.n_embd.is_multiple_of(args.n_head) {
        return Err(format!("--n-embd {} is not a multiple of --n-head {}", args.n_embd, args.n_head).into());
    }
    if args.predict_memory {
        let what = format!(
            "gpt training step, batch {} x {}, amp {:?}",
            args.batch_size, args.block_size, args.amp
        );
        return common::plan::predict_and_measure(&what, || {
            manual_seed(args.seed);
            let model = Gpt::new(&config)?;
            let mut opt = AdamW::new(model.parameters(), AdamWOptions::default())?;
            let x = Tensor::randint(0, config.vocab_size as i64, [args.batch_size, args.block_size])?;
            let y = Tensor::randint(0, config.vocab_size as i64, [args.batch_size, args.block_size])?;
            loss_of(&model, &x, &y, args.amp, None)?.backward()?;
            opt.step()?;
            Ok(())
        });
    }
    let par = Parallel::init(&args)?;
    let (rank, world) = (par.rank, par.world);
    let main = rank == 0;
    let net = par.model(&args, &config)?;
    let model = net.raw();
    let tp: Tp = par.tp.as_ref().map(|m| (m, config.vocab_size));
    // (this rank's share under --fsdp / --tp)
    let n_params: usize = model.parameters().iter().map(|p| p.tensor().numel()).sum();
    if main {
        println!(
            "{} characters ({} train, {} val), vocabulary {}, model {:.2}M parameters{}",
            corpus.train.numel() + corpus.val.numel(),
            corpus.train.numel(),
            corpus.val.numel(),
            corpus.chars.len(),
            n_params as f64 / 1e6,
            if par.sharded { " on rank 0" } else { "" }
        );
    }
    if main && par.distributed {
        let how = match (args.ddp, args.fsdp, args.tp) {
            _ if args.pp > 1 => format!(
                "PP {} ({}, {} microbatches)",
                args.pp,
                args.pp_schedule.label(),
                args.microbatches
            ),
            (true, _, _) => "DDP".to_string(),
            (_, true, 1) => "FSDP".to_string(),
            (_, true, t) => format!("FSDP x TP {t}"),
            (_, false, t) => format!("TP {t}"),
        };
        println!(
            "{how} on {world} processes: {} windows per step in all",
            args.batch_size * par.dp
        );
    }
    // nanoGPT's groups: weight decay on matrices and embeddings, none on
    // biases and norm weights.
    let (decay, no_decay): (Vec<_>, Vec<_>) = model.parameters().into_iter().partition(|p| p.tensor().ndim() >= 2);
    let opts = |wd: f64| {
        AdamWOptions::new()
            .lr(args.learning_rate)
            .betas((0.9, 0.99))
            .weight_decay(wd)
    };
    let mut opt = AdamW::with_groups([(decay, opts(args.weight_decay)), (no_decay, opts(0.0))], opts(0.0))?;
    // Linear warmup, then cosine decay to min_lr (as a factor of the peak).
    let (warmup, total, floor) = (
        args.warmup_iters as f64,
        args.max_iters as f64,
        args.min_lr / args.learning_rate,
    );
    let mut sched = LambdaLR::new(&mut opt, move |step| {
        let s = step as f64;
        if s < warmup {
            (s + 1.0) / (warmup + 1.0)
        } else {
            let progress = ((s - warmup) / (total - warmup).max(1.0)).min(1.0);
            floor + (1.0 - floor) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
        }
    })?;

    // One batch stream per data-parallel rank (seed + rank, as nanoGPT's
    // seed_offset); the ranks of a tensor-parallel group share theirs.
    let g = Generator::new(args.seed + par.dp_rank as u64);
    let mut scaler = args.amp.scaler()?;
    if let Some(path) = &args.profile {
        return common::profile::profile_steps(path, || {
            let (x, y) = corpus.batch(false, args.batch_size, args.block_size, &g)?;
            train_step(&net, (&x, &y), &args, tp, (&mut scaler, &mut opt))?;
            sched.step(&mut opt)?;
            Ok(())
        });
    }
    let ckpt = args.out_dir.join("ckpt.pt");
    let resume = match &args.resume {
        Some(p) if p.as_os_str() == "auto" => Some(ckpt.clone()).filter(|p| p.exists()),
        other => other.clone(),
    };
    if par.sharded && resume.is_some() {
        return Err(
            "--resume with --fsdp / --tp / --pp: their checkpoints (distributed, each rank its shards) are not \
                    written yet"
                .into(),
        );
    }
    let first = match &resume {
        Some(path) => {
            let step = load_checkpoint(path, &args, model, &mut opt, &mut sched, &g, (rank, world))?;
            if main {
                println!("resumed from {} at step {step}", path.display());
            }
            step
        }
        None => 0,
    };
    std::fs::create_dir_all(&args.out_dir)?;
    let mut log = LossLog::default();
    let bar = if main {
        ProgressBar::new(args.max_iters as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(ProgressStyle::with_template(
        "{bar:30} {pos}/{len} {msg} [{elapsed_precise}<{eta_precise}]",
    )?);
    bar.set_position(first as u64);
    let start = Instant::now();
    for step in first..=args.max_iters {
        // The checkpoint of step `step` holds the state after `step` steps,
        // before that step's evaluation (which draws batches from `g`).
        let stop = args.stop_after > 0 && step == args.stop_after && step < args.max_iters;
        if !par.sharded && step > first && (step % args.eval_interval == 0 || step == args.max_iters || stop) {
            // Every rank hands its batch generator's state to the save.
            let states = batch_states(&g, world)?;
            if main {
                save_checkpoint(&ckpt, &args, model, &opt, &sched, step, states)?;
            }
        }
        if stop {
            if main {
                bar.suspend(|| println!("stopped after {step} steps; --resume {} continues", ckpt.display()));
            }
            return finish(par.distributed);
        }
        // Under --fsdp / --tp every rank evaluates (the forwards are
        // collective); rank 0 alone otherwise.
        if (main || par.sharded) && (step % args.eval_interval == 0 || step == args.max_iters) {
            // Data-parallel ranks but the first evaluate from a copy of
            // their batch stream, so they train on a DDP run's batches.
            let kept = (par.dp_rank != 0).then(|| g.get_state());
            let (train, val) = estimate_loss(&net, &corpus, &args, &g, tp)?;
            if let Some(state) = kept {
                g.set_state(state);
            }
            log.push("train (eval)", step as f64, train);
            log.push("val", step as f64, val);
            if main {
                bar.suspend(|| println!("step {step:>5}: train loss {train:.4}, val loss {val:.4}"));
            }
        }
        if step == args.max_iters {
            break;
        }
        let (x, y) = corpus.batch(false, args.batch_size, args.block_size, &g)?;
        let l = train_step(&net, (&x, &y), &args, tp, (&mut scaler, &mut opt))?;
        sched.step(&mut opt)?;
        log.push("train (batch)", step as f64, l);
        let tokens = ((step + 1 - first) * args.batch_size * args.block_size * par.dp) as f64;
        bar.set_message(format!(
            "loss {l:.4} lr {:.2e} {:.0} tok/s",
            sched.get_last_lr()[0],
            tokens / start.elapsed().as_secs_f64()
        ));
        bar.inc(1);
    }
    bar.finish_and_clear();
    if !main && !par.sharded {
        return finish(par.distributed);
    }
    let elapsed = start.elapsed().as_secs_f64();
    if par.sharded {
        let text = generate(&net, &corpus, "\n", args.generate, (&args, &g), tp)?;
        if main {
            println!(
                "trained {} steps in {elapsed:.1} s ({:.1} ms/step, amp {:?}, peak memory of rank 0 {:.1} MiB); no \
                 checkpoint under --fsdp / --tp / --pp yet",
                args.max_iters - first,
                elapsed * 1e3 / (args.max_iters - first).max(1) as f64,
                args.amp,
                peak_mib(),
            );
            log.write_csv(&args.out_dir.join("loss.csv"), "step")?;
            log.write_png(&args.out_dir.join("loss.png"), "char-level GPT on Shakespeare", "step")?;
            println!("loss curves: {} and loss.png", args.out_dir.join("loss.csv").display());
            println!(
                "--- sample (temperature {}, top-k {}) ---{text}",
                args.temperature, args.top_k
            );
        }
        return finish(true);
    }
    println!(
        "trained {} steps in {elapsed:.1} s ({:.1} ms/step, amp {:?}, peak memory {:.1} MiB); checkpoint {}",
        args.max_iters - first,
        elapsed * 1e3 / (args.max_iters - first).max(1) as f64,
        args.amp,
        peak_mib(),
        ckpt.display()
    );
    log.write_csv(&args.out_dir.join("loss.csv"), "step")?;
    log.write_png(&args.out_dir.join("loss.png"), "char-level GPT on Shakespeare", "step")?;
    println!("loss curves: {} and loss.png", args.out_dir.join("loss.csv").display());
    let text = generate(&net, &corpus, "\n", args.generate, (&args, &g), None)?;
    println!(
        "--- sample (temperature {}, top-k {}) ---{text}",
        args.temperature, args.top_k
    );
    finish(par.distributed)
}

/// Leaves the process group (`destroy_process_group`) when there is one.
fn finish(distributed: bool) -> BoxResult<()> {
    if distributed {
        dist::destroy_process_group();
    }
    Ok(())
}
