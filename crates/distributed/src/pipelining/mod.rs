//! Pipeline parallelism (`torch.distributed.pipelining`): a model split
//! into stages on different ranks, a batch cut into microbatches that flow
//! through the stages, forwards and backwards ordered by a schedule
//! (GPipe, 1F1B, interleaved 1F1B). The gradients are those of the whole
//! batch through the unsplit model: each microbatch's loss counts `1/M`
//! (PyTorch's `scale_grads=True`).
//!
//! ```no_run
//! use std::sync::Arc;
//! use ferrotorch_core::Tensor;
//! use ferrotorch_distributed::{InitOptions, default_group, get_rank, init_process_group};
//! use ferrotorch_distributed::pipelining::{PipelineSchedule, PipelineStage, ScheduleKind};
//! use ferrotorch_nn::{Linear, ReLU, Sequential};
//!
//! init_process_group(InitOptions::new("tcp"))?; // 2 ranks under ferrorun / torchrun
//! let rank = get_rank()?;
//! // This rank's half of the model.
//! let part = Sequential::new().push(Linear::new(16, 16)?).push(ReLU::new());
//! let stage = PipelineStage::new(Arc::new(part), rank, 2, default_group()?)?;
//! let mse = Arc::new(|y: &Tensor, t: &Tensor| y.sub(t)?.pow(2.0)?.mean());
//! let schedule = PipelineSchedule::new(ScheduleKind::OneFOneB, vec![stage], 4, Some(mse))?;
//! let (x, y) = (Tensor::randn((8, 16))?, Tensor::randn((8, 16))?);
//! let out = if rank == 0 { schedule.step(Some(&x), None)? } else { schedule.step(None, Some(&y))? };
//! // The last stage has the microbatches' losses; every stage its gradients.
//! # let _ = out;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod p2p;
mod schedule;

use std::sync::Arc;

use ferrotorch_core::Tensor;
use ferrotorch_core::autograd::is_grad_enabled;
use ferrotorch_nn::Forward;

use crate::error::{DistError, Result};
use crate::group::ProcessGroup;
use crate::work::Work;
pub use schedule::ScheduleKind;
use schedule::{Action, actions};

/// The loss of a microbatch's output against its target.
pub type LossFn = Arc<dyn Fn(&Tensor, &Tensor) -> ferrotorch_core::Result<Tensor> + Send + Sync>;

/// Tags of the pipeline's messages start here, clear of a user's.
const TAG_BASE: u64 = 0x5049_5045 << 32;

/// One stage of the model on this rank (`PipelineStage`): stage
/// `stage_index` of `num_stages`, placed on group rank `stage_index %
/// group.size()` (one stage per rank, or several round-robin for the
/// interleaved schedule).
pub struct PipelineStage {
    module: Arc<dyn Forward>,
    stage_index: usize,
    num_stages: usize,
    group: Arc<ProcessGroup>,
}

impl PipelineStage {
    /// Stage `stage_index` of `num_stages` running `module` on `group`.
    /// Errors: an index past the stages, a number of stages that is not a
    /// multiple of the group's size, a stage that belongs on another rank.
    pub fn new<M: Forward + 'static>(
        module: Arc<M>,
        stage_index: usize,
        num_stages: usize,
        group: Arc<ProcessGroup>,
    ) -> Result<Self> {
        let n = group.size();
        if stage_index >= num_stages || !num_stages.is_multiple_of(n) {
            return Err(DistError::InvalidArgument(format!(
                "PipelineStage: stage {stage_index} of {num_stages} on a group of {n} ranks (the stages must be a \
                 multiple of the ranks, the index below them)"
            )));
        }
        if stage_index % n != group.rank() {
            return Err(DistError::InvalidArgument(format!(
                "PipelineStage: stage {stage_index} belongs on rank {} (stage % {n}), not rank {}",
                stage_index % n,
                group.rank()
            )));
        }
        Ok(PipelineStage {
            module,
            stage_index,
            num_stages,
            group,
        })
    }

    /// Whether this is the first stage (it takes the batch).
    pub fn is_first(&self) -> bool {
        self.stage_index == 0
    }

    /// Whether this is the last stage (it computes the loss).
    pub fn is_last(&self) -> bool {
        self.stage_index + 1 == self.num_stages
    }
}

/// What a step leaves on this rank: on the rank of the last stage, the
/// output of the whole batch (microbatch outputs in order, detached) and
/// each microbatch's loss.
#[derive(Debug, Default)]
pub struct PipelineOutput {
    /// The last stage's output for the whole batch.
    pub output: Option<Tensor>,
    /// The loss of each microbatch (unscaled), on the last stage.
    pub losses: Vec<Tensor>,
}

/// A schedule over this rank's stages (`ScheduleGPipe`, `Schedule1F1B`,
/// `ScheduleInterleaved1F1B`).
pub struct PipelineSchedule {
    kind: ScheduleKind,
    stages: Vec<PipelineStage>,
    n_microbatches: usize,
    loss_fn: Option<LossFn>,
}

/// A microbatch's tensors on one local stage between its forward and
/// backward.
#[derive(Default, Clone)]
struct InFlight {
    input: Option<Tensor>,
    /// The stage's output, or on the last stage the scaled loss.
    output: Option<Tensor>,
}

impl PipelineSchedule {
    /// A schedule of `kind` over `stages` (this rank's, one for GPipe and
    /// 1F1B, `num_stages / ranks` for interleaved 1F1B, in any order), for
    /// `n_microbatches` microbatches, the last stage's loss `loss_fn`
    /// (without it a step runs forwards only). Errors: a wrong number of
    /// stages, stages of different groups or pipelines, no microbatches,
    /// interleaving with microbatches not a multiple of the ranks.
    pub fn new(
        kind: ScheduleKind,
        mut stages: Vec<PipelineStage>,
        n_microbatches: usize,
        loss_fn: Option<LossFn>,
    ) -> Result<Self> {
        let bad = |why: String| Err(DistError::InvalidArgument(format!("pipeline schedule {kind:?}: {why}")));
        let Some(first) = stages.first() else {
            return bad("no stage".into());
        };
        let (ranks, num_stages) = (first.group.size(), first.num_stages);
        let per_rank = num_stages / ranks;
        let want = if kind == ScheduleKind::Interleaved1F1B {
            per_rank
        } else {
            1
        };
        if stages.len() != want || per_rank != want {
            return bad(format!(
                "{} stages on this rank of a {num_stages}-stage pipeline over {ranks} ranks (it runs {})",
                stages.len(),
                if want == 1 {
                    "one stage per rank".to_string()
                } else {
                    format!("{want} per rank")
                }
            ));
        }
        if stages
            .iter()
            .any(|s| s.num_stages != num_stages || !Arc::ptr_eq(&s.group, &first.group))
        {
            return bad("the stages belong to different pipelines or groups".into());
        }
        if n_microbatches == 0 {
            return bad("no microbatches".into());
        }
        if kind == ScheduleKind::Interleaved1F1B && !n_microbatches.is_multiple_of(ranks) {
            return bad(format!(
                "{n_microbatches} microbatches is not a multiple of the {ranks} ranks"
            ));
        }
        stages.sort_by_key(|s| s.stage_index);
        Ok(PipelineSchedule {
            kind,
            stages,
            n_microbatches,
            loss_fn,
        })
    }

    /// Runs one step: the rank of the first stage passes the batch
    /// (`input`), the rank of the last the targets (`target`), others
    /// nothing. Cuts them into microbatches along dimension 0, runs the
    /// schedule, and (with a loss function and grad mode on) leaves every
    /// stage's parameters with the gradients of the mean microbatch loss.
    /// Errors: a missing or extra batch or target, a batch that does not
    /// cut into the microbatches evenly, and the first error of a stage,
    /// a loss or a peer.
    pub fn step(&self, input: Option<&Tensor>, target: Option<&Tensor>) -> Result<PipelineOutput> {
        let m = self.n_microbatches;
        let holds_first = self.stages.iter().any(PipelineStage::is_first);
        let holds_last = self.stages.iter().any(PipelineStage::is_last);
        let inputs = self.cut("input", input, holds_first)?;
        let wants_target = holds_last && self.loss_fn.is_some();
        let targets = self.cut("target", target, wants_target)?;
        let group = &self.stages[0].group;
        let ranks = group.size();
        let train = self.loss_fn.is_some() && is_grad_enabled();
        let program = actions(self.kind, group.rank(), ranks, self.stages.len(), m);
        let mut flight = vec![vec![InFlight::default(); m]; self.stages.len()];
        let mut sends: Vec<Work> = Vec::new();
        let mut out = PipelineOutput::default();
        let mut outputs = Vec::new();
        for action in program {
            match action {
                Action::Forward { local, mb } => {
                    let stage = &self.stages[local];
                    let s = stage.stage_index;
                    let x = match &inputs {
                        Some(xs) if s == 0 => xs[mb].clone(),
                        _ => {
                            let x = p2p::recv(group, (s - 1) % ranks, fwd_tag(s))?;
                            if train && x.is_floating_point() {
                                x.requires_grad_(true)?
                            } else {
                                x
                            }
                        }
                    };
                    let y = stage.module.call(&x)?;
                    let slot = &mut flight[local][mb];
                    if stage.is_last() {
                        outputs.push(y.detach());
                        if let (Some(loss_fn), Some(ts)) = (&self.loss_fn, &targets) {
                            let loss = loss_fn(&y, &ts[mb])?;
                            out.losses.push(loss.detach());
                            slot.output = Some(loss.div(m as f64)?);
                        }
                    } else {
                        sends.extend(p2p::send(group, &y, (s + 1) % ranks, fwd_tag(s + 1))?);
                        slot.output = Some(y);
                    }
                    slot.input = Some(x);
                }
                Action::Backward { local, mb } if train => {
                    let stage = &self.stages[local];
                    let s = stage.stage_index;
                    let InFlight { input, output } = std::mem::take(&mut flight[local][mb]);
                    let (Some(x), Some(y)) = (input, output) else {
                        return Err(DistError::Collective(format!(
                            "pipeline: backward of microbatch {mb} on stage {s} before its forward"
                        )));
                    };
                    if stage.is_last() {
                        y.backward()?;
                    } else {
                        let g = p2p::recv(group, (s + 1) % ranks, bwd_tag(s))?;
                        if y.requires_grad() {
                            y.backward_with(&g)?;
                        }
                    }
                    if s > 0 {
                        let g = match x.grad_opt() {
                            Some(g) => g,
                            None => x.detach().zeros_like()?,
                        };
                        sends.extend(p2p::send(group, &g, (s - 1) % ranks, bwd_tag(s - 1))?);
                    }
                }
                Action::Backward { .. } => {}
            }
        }
        for w in &sends {
            w.wait()?;
        }
        if holds_last {
            out.output = Some(Tensor::cat(&outputs, 0)?);
        }
        Ok(out)
    }

    /// `t` cut into the microbatches when this rank needs it (an error if
    /// it is missing, given where it is not needed, or uneven).
    fn cut(&self, what: &str, t: Option<&Tensor>, needed: bool) -> Result<Option<Vec<Tensor>>> {
        let m = self.n_microbatches;
        match (t, needed) {
            (None, false) => Ok(None),
            (Some(_), false) => Err(DistError::InvalidArgument(format!(
                "pipeline step: an {what} given on a rank whose stages do not take one"
            ))),
            (None, true) => Err(DistError::InvalidArgument(format!(
                "pipeline step: this rank holds the {} stage and needs the {what}",
                if what == "input" { "first" } else { "last" }
            ))),
            (Some(t), true) => {
                let rows = t.shape().first().copied().unwrap_or(0);
                if !rows.is_multiple_of(m) || rows == 0 {
                    return Err(DistError::InvalidArgument(format!(
                        "pipeline step: an {what} of {rows} rows does not cut into {m} equal microbatches"
                    )));
                }
                Ok(Some(t.chunk(m as i64, 0)?))
            }
        }
    }
}

/// The tag of activations into stage `s`.
fn fwd_tag(s: usize) -> u64 {
    TAG_BASE + 2 * s as u64
}

/// The tag of gradients into stage `s`.
fn bwd_tag(s: usize) -> u64 {
    TAG_BASE + 2 * s as u64 + 1
}
