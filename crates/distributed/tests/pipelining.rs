//! Pipeline parallelism on real processes (2 and 4 ranks): an 8-layer
//! model split into stages gives the unsplit model's output, loss and
//! every gradient (rtol 1e-5) under GPipe, 1F1B and interleaved 1F1B (two
//! stages per rank), with 4 and 8 microbatches; and the errors.

use std::sync::Arc;
use std::time::Duration;

use dist::pipelining::{LossFn, PipelineSchedule, PipelineStage, ScheduleKind};
use ferrotorch_core::{Tensor, manual_seed};
use ferrotorch_distributed as dist;
use ferrotorch_nn::{Forward, Linear, Module, ModuleState};

mod common;
use common::{
    HostPair, assert_close, assert_lost_rank, join_as_child, kill_me, launch, launch_across, launch_with_dead,
};

const LAYERS: usize = 8;
const BATCH: usize = 8;

#[derive(Module)]
#[module(crate = ferrotorch_nn)]
struct Part {
    state: ModuleState,
    layers: Vec<Linear>,
}

impl Forward for Part {
    fn forward(&self, x: &Tensor) -> ferrotorch_core::Result<Tensor> {
        let mut h = x.clone();
        for l in &self.layers {
            h = l.call(&h)?.tanh()?;
        }
        Ok(h)
    }
}

/// The whole model's layers (the same on every rank).
fn layers() -> Vec<Linear> {
    manual_seed(11);
    (0..LAYERS).map(|_| Linear::new(6, 6).unwrap()).collect()
}

/// The layers of stage `s` of `n`, as a part of their own.
fn part(s: usize, n: usize) -> Part {
    let per = LAYERS / n;
    Part {
        state: ModuleState::default(),
        layers: layers().into_iter().skip(s * per).take(per).collect(),
    }
}

fn mse() -> LossFn {
    Arc::new(|y: &Tensor, t: &Tensor| y.sub(t)?.pow(2.0)?.mean())
}

#[test]
#[ignore = "the entry point of the child processes that the other tests start"]
fn child() {
    let case = join_as_child();
    match case.as_str() {
        "schedules" => {
            for kind in [
                ScheduleKind::GPipe,
                ScheduleKind::OneFOneB,
                ScheduleKind::Interleaved1F1B,
            ] {
                for m in [4, 8] {
                    schedule(kind, m);
                }
            }
        }
        "errors" => errors(),
        "killed" => {
            killed_mid_send();
            println!("CHILD OK");
            std::process::exit(0);
        }
        other => panic!("unknown case {other}"),
    }
    dist::destroy_process_group();
    println!("CHILD OK");
}

fn schedule(kind: ScheduleKind, m: usize) {
    let (rank, ranks) = (dist::get_rank().unwrap(), dist::get_world_size().unwrap());
    let per_rank = if kind == ScheduleKind::Interleaved1F1B { 2 } else { 1 };
    let n = ranks * per_rank;
    manual_seed(3);
    let x = Tensor::randn((BATCH, 6)).unwrap();
    let target = Tensor::randn((BATCH, 6)).unwrap();
    // The unsplit model on the whole batch, on every rank.
    let whole = Part {
        state: ModuleState::default(),
        layers: layers(),
    };
    let y0 = whole.call(&x).unwrap();
    let loss0 = y0.sub(&target).unwrap().pow(2.0).unwrap().mean().unwrap();
    loss0.backward().unwrap();
    // This rank's stages: s = v * ranks + rank.
    let group = dist::default_group().unwrap();
    let parts: Vec<(usize, Arc<Part>)> = (0..per_rank)
        .map(|v| {
            let s = v * ranks + rank;
            (s, Arc::new(part(s, n)))
        })
        .collect();
    let stages = parts
        .iter()
        .map(|(s, p)| PipelineStage::new(p.clone(), *s, n, group.clone()).unwrap())
        .collect();
    let sched = PipelineSchedule::new(kind, stages, m, Some(mse())).unwrap();
    let first = rank == 0;
    let last = (n - 1) % ranks == rank;
    let out = sched.step(first.then_some(&x), last.then_some(&target)).unwrap();
    let what = format!("{kind:?} on {ranks} ranks, {m} microbatches");
    if last {
        assert_close(
            out.output.as_ref().unwrap(),
            &y0.detach(),
            (1e-5, 1e-8),
            &format!("{what}: output"),
        );
        assert_eq!(out.losses.len(), m);
        let mean = Tensor::stack(&out.losses, 0).unwrap().mean().unwrap();
        assert_close(&mean, &loss0.detach(), (1e-5, 1e-8), &format!("{what}: loss"));
    } else {
        assert!(out.output.is_none() && out.losses.is_empty());
    }
    let per = LAYERS / n;
    for (s, p) in &parts {
        for (j, l) in p.layers.iter().enumerate() {
            let w = &whole.layers[s * per + j];
            assert_close(
                &l.weight.grad().unwrap(),
                &w.weight.grad().unwrap(),
                (1e-5, 1e-8),
                &format!("{what}: layer {} weight", s * per + j),
            );
            let (b, b0) = (l.bias.as_ref().unwrap(), w.bias.as_ref().unwrap());
            assert_close(
                &b.grad().unwrap(),
                &b0.grad().unwrap(),
                (1e-5, 1e-8),
                &format!("{what}: layer {} bias", s * per + j),
            );
        }
    }
    // Forward only (no grad): outputs still flow.
    let out = ferrotorch_core::autograd::no_grad(|| sched.step(first.then_some(&x), last.then_some(&target))).unwrap();
    if last {
        assert_close(
            out.output.as_ref().unwrap(),
            &y0.detach(),
            (1e-5, 1e-8),
            &format!("{what}: no-grad output"),
        );
    }
}

fn errors() {
    let (rank, ranks) = (dist::get_rank().unwrap(), dist::get_world_size().unwrap());
    let group = dist::default_group().unwrap();
    let p = Arc::new(part(0, ranks));
    let e = PipelineStage::new(p.clone(), (rank + 1) % ranks, ranks, group.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("belongs on rank"), "{e}");
    let e = PipelineStage::new(p.clone(), ranks, ranks, group.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&format!("stage {ranks} of {ranks}")), "{e}");
    let stage = || PipelineStage::new(p.clone(), rank, ranks, group.clone()).unwrap();
    let e = PipelineSchedule::new(ScheduleKind::Interleaved1F1B, vec![stage()], ranks + 1, Some(mse()))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&format!("is not a multiple of the {ranks} ranks")), "{e}");
    let e = PipelineSchedule::new(ScheduleKind::GPipe, vec![stage(), stage()], 4, Some(mse()))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("2 stages on this rank"), "{e}");
    let sched = PipelineSchedule::new(ScheduleKind::GPipe, vec![stage()], 3, Some(mse())).unwrap();
    let x = Tensor::randn((BATCH, 6)).unwrap();
    // (each rank fails before any message, so no peer waits)
    let e = match rank {
        0 => sched.step(None, None),
        r if r == ranks - 1 => sched.step(None, Some(&x)),
        _ => sched.step(Some(&x), None),
    }
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("needs the input")
            || e.contains("does not cut into 3 equal microbatches")
            || e.contains("an input given"),
        "{e}"
    );
}

/// The last stage's rank is killed (`kill -9`) in the middle of its
/// second step, with microbatch activations on their way to it: the first
/// stage must fail with an error naming it, within seconds.
fn killed_mid_send() {
    let (rank, ranks) = (dist::get_rank().unwrap(), dist::get_world_size().unwrap());
    let p = Arc::new(part(rank, ranks));
    if rank == ranks - 1 {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        p.register_forward_pre_hook(move |_, _| {
            if calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 5 {
                kill_me();
            }
            Ok(None)
        })
        .unwrap();
    }
    let stage = PipelineStage::new(p, rank, ranks, dist::default_group().unwrap()).unwrap();
    let sched = PipelineSchedule::new(ScheduleKind::OneFOneB, vec![stage], 4, Some(mse())).unwrap();
    let x = Tensor::randn((BATCH, 6)).unwrap();
    let start = std::time::Instant::now();
    for step in 0..5 {
        let r = sched.step((rank == 0).then_some(&x), (rank == ranks - 1).then_some(&x));
        if let Err(e) = r {
            assert_lost_rank(&e.to_string(), (step, 1), ranks - 1, start);
            return;
        }
    }
    panic!("rank {rank} ran on with the last stage gone");
}

const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn a_stage_killed_mid_step_fails_the_others() {
    launch_with_dead("killed", 2, LIMIT, &[1]);
}

#[test]
fn schedules_give_the_unsplit_models_gradients_on_2_ranks() {
    launch("schedules", 2, LIMIT);
}

#[test]
fn schedules_give_the_unsplit_models_gradients_on_4_ranks() {
    launch("schedules", 4, LIMIT);
}

#[test]
fn pipeline_errors() {
    launch("errors", 2, LIMIT);
}

/// Two hosts made of network namespaces, two ranks on each: stages 1 and
/// 2 talk across the "network".
#[test]
fn pipeline_across_two_hosts_in_network_namespaces() {
    let Some(hosts) = HostPair::create("p") else { return };
    launch_across("schedules", 4, LIMIT, &hosts, &[]);
}
