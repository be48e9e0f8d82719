//! `--pp N`: the model cut into N pipeline stages by blocks, one per
//! process, trained with the 1F1B schedule over `--microbatches`
//! microbatches. Every process builds the whole model (same seed) and runs
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
    stages: usize,
    /// The first and last stages' group, for the tied weight's gradient.
    ends: Option<Arc<ProcessGroup>>,
    vocab: usize,
}

impl Pipeline {
    /// Stage `rank` of `stages` (the world's size) of `gpt`.
    pub fn new(gpt: Gpt, microbatches: usize, vocab: usize) -> BoxResult<Pipeline> {
        let gpt = Arc::new(gpt);
        let group = dist::default_group()?;
        let (rank, stages) = (group.rank(), group.size());
        let stage = || -> BoxResult<PipelineStage> {
            let part = GptStage {
                gpt: gpt.clone(),
                stage: rank,
                stages,
            };
            Ok(PipelineStage::new(Arc::new(part), rank, stages, group.clone())?)
        };
        let ce: LossFn = Arc::new(move |logits: &Tensor, y: &Tensor| {
            logits
                .view([-1, vocab as i64])?
                .cross_entropy(&y.view([-1])?, None, Reduction::Mean, -100, 0.0)
        });
        let train = PipelineSchedule::new(ScheduleKind::OneFOneB, vec![stage()?], microbatches, Some(ce))?;
        let infer = PipelineSchedule::new(ScheduleKind::GPipe, vec![stage()?], 1, None)?;
        // Every process takes part in making the group (new_group).
        let ends = dist::new_group(&[0, stages - 1])?;
        Ok(Pipeline {
            gpt,
            train,
            infer,
            rank,
            stages,
            ends,
            vocab,
        })
    }

    /// The whole model (its parameters, for the optimizer and sampling).
    pub fn model(&self) -> &Gpt {
        &self.gpt
    }

    fn is_last(&self) -> bool {
        self.rank + 1 == self.stages
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

    /// The logits of `x` (`[1, t]`), on every process.
    pub fn logits(&self, x: &Tensor) -> BoxResult<Tensor> {
        let out = no_grad(|| self.infer.step((self.rank == 0).then_some(x), None))?;
        let logits = match out.output {
            Some(l) => l.contiguous()?,
            None => TensorOptions::new().zeros([x.shape()[0], x.shape()[1], self.vocab])?,
        };
        dist::broadcast(&logits, self.stages - 1)?;
        Ok(logits)
    }
}
