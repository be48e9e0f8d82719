//! `--pp N`: the model cut into pipeline stages by blocks, trained over
//! `--microbatches` microbatches with `--pp-schedule`: GPipe or 1F1B
//! (one stage per process), or interleaved 1F1B (two stages per
//! process, placed round-robin). Every process builds the whole model (same seed) and runs
//! its stage; the weight the embedding (first stage) and the head (last
//! stage) share gets the sum of both stages' gradients, as Megatron-LM's
//! embedding group does.

use std::borrow::Cow;
use std::sync::Arc;

use ferrotorch::autograd::no_grad;
use ferrotorch::distributed::pipelining::{LossFn, PipelineSchedule, PipelineStage, ScheduleKind};
use ferrotorch::distributed::{self as dist, ProcessGroup, ReduceOp};
use ferrotorch::nn::{Forward, Module, Visitor};
use ferrotorch::{Reduction, Result, Tensor, TensorOptions};

use super::model::Gpt;

type BoxResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// One stage of the model: `Gpt::forward_stage` on the shared model.
struct GptStage {
    gpt: Arc<Gpt>,
    stage: usize,
    stages: usize,
}

impl Module for GptStage {
    fn visit<'a>(&'a self, visitor: &mut dyn Visitor<'a>) {
        visitor.module("gpt", self.gpt.as_dyn());
    }

    fn type_name(&self) -> Cow<'static, str> {
        Cow::Borrowed("GptStage")
    }

    fn as_dyn(&self) -> &dyn Module {
        self
    }
}

impl Forward for GptStage {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.gpt.forward_stage(x, self.stage, self.stages)
    }
}

/// The pipeline of this process: a training schedule and a one-microbatch
/// one for sampling.
pub struct Pipeline {
    gpt: Arc<Gpt>,
    train: PipelineSchedule,
    infer: PipelineSchedule,
    rank: usize,
    ranks: usize,
    /// The first and last stages' group, for the tied weight's gradient.
    ends: Option<Arc<ProcessGroup>>,
    vocab: usize,
    /// Whether sampling repeats its input once per process (interleaved).
    infer_repeats: bool,
}

impl Pipeline {
    /// This process's stages of `gpt` (`kind`'s placement over the
    /// world's processes).
    pub fn new(gpt: Gpt, kind: ScheduleKind, microbatches: usize, vocab: usize) -> BoxResult<Pipeline> {
        let gpt = Arc::new(gpt);
        let group = dist::default_group()?;
        let (rank, ranks) = (group.rank(), group.size());
        let per_rank = if kind == ScheduleKind::Interleaved1F1B { 2 } else { 1 };
        let stages = ranks * per_rank;
        let mine = || -> BoxResult<Vec<PipelineStage>> {
            (0..per_rank)
                .map(|v| {
                    let s = v * ranks + rank;
                    let part = GptStage {
                        gpt: gpt.clone(),
                        stage: s,
                        stages,
                    };
                    Ok(PipelineStage::new(Arc::new(part), s, stages, group.clone())?)
                })
                .collect()
        };
        let ce: LossFn = Arc::new(move |logits: &Tensor, y: &Tensor| {
            logits
                .view([-1, vocab as i64])?
                .cross_entropy(&y.view([-1])?, None, Reduction::Mean, -100, 0.0)
        });
        let train = PipelineSchedule::new(kind, mine()?, microbatches, Some(ce))?;
        let infer_kind = if per_rank == 1 { ScheduleKind::GPipe } else { kind };
        let infer = PipelineSchedule::new(infer_kind, mine()?, if per_rank == 1 { 1 } else { ranks }, None)?;
        // The first stage is on rank 0, the last on the last rank. Every
        // process takes part in making the group (new_group).
        let ends = dist::new_group(&[0, ranks - 1])?;
        Ok(Pipeline {
            gpt,
            train,
            infer,
            rank,
            ranks,
            ends,
            vocab,
            infer_repeats: per_rank > 1,
        })
    }

    /// The whole model (its parameters, for the optimizer and sampling).
    pub fn model(&self) -> &Gpt {
        &self.gpt
    }

    /// Whether this process holds the last stage (the last rank does).
    fn is_last(&self) -> bool {
        self.rank + 1 == self.ranks
    }

    /// One step's forwards and backwards; the mean microbatch loss, on
    /// every process. Under `no_grad`, forwards only (evaluation).
    pub fn loss(&self, x: &Tensor, y: &Tensor) -> BoxResult<f32> {
        let first = self.rank == 0;
        let out = self.train.step(first.then_some(x), self.is_last().then_some(y))?;
        if ferrotorch::autograd::is_grad_enabled()
            && let Some(ends) = &self.ends
            && ends.size() > 1
        {
            let w = self.gpt.tied_weight();
            let g = match w.grad_opt() {
                Some(g) => g,
                None => {
                    let z = w.tensor().detach().zeros_like()?;
                    w.tensor().set_grad(Some(z.clone()))?;
                    z
                }
            };
            ends.all_reduce(&g, ReduceOp::Sum)?.wait()?;
        }
        let mean = if out.losses.is_empty() {
            0.0
        } else {
            Tensor::stack(&out.losses, 0)?.mean()?.item::<f32>()?
        };
        let t = Tensor::new([mean])?;
        dist::all_reduce(&t, ReduceOp::Sum)?;
        Ok(t.item::<f32>()?)
    }

    /// The logits of `x` (`[1, t]`), on every process. (The interleaved
    /// schedule needs a microbatch per process: `x` is repeated.)
    pub fn logits(&self, x: &Tensor) -> BoxResult<Tensor> {
        let copies = if self.infer_repeats { self.ranks } else { 1 };
        let xs = x.repeat([copies, 1])?;
        let out = no_grad(|| self.infer.step((self.rank == 0).then_some(&xs), None))?;
        let logits = match out.output {
            Some(l) => l.narrow(0, 0, x.shape()[0] as i64)?.contiguous()?,
            None => TensorOptions::new().zeros([x.shape()[0], x.shape()[1], self.vocab])?,
        };
        dist::broadcast(&logits, self.ranks - 1)?;
        Ok(logits)
    }
}
