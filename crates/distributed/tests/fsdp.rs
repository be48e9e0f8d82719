//! fully_shard on real processes: 50 AdamW steps of a sharded model give
//! DDP's parameters and losses (2 and 4 ranks, uneven and empty shards,
//! with and without resharding after forward, HSDP on a 2 x 2 mesh);
//! gathered parameters are freed when they should be; bf16 parameters
//! with f32 reduction; full and sharded state dicts; the errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dist::ddp::{DdpOptions, DistributedDataParallel};
use dist::dtensor::Placement;
use dist::fsdp::{FsdpModule, FsdpOptions, MixedPrecisionPolicy, full_state_dict, fully_shard, load_full_state_dict};
use ferrotorch_core::autograd::no_grad;
use ferrotorch_core::{DType, Tensor, manual_seed};
use ferrotorch_distributed as dist;
use ferrotorch_nn::{Forward, Linear, Module, ModuleState, Parameter, StateDict};
use ferrotorch_optim::{AdamW, AdamWOptions, Optimizer};

mod common;
use common::{
    HostPair, assert_close, assert_lost_rank, join_as_child, kill_me, launch, launch_across, launch_with_dead,
    launch_with_env,
};

const B: usize = 4;
const STEPS: u64 = 50;

#[derive(Module)]
#[module(crate = ferrotorch_nn)]
struct Block {
    state: ModuleState,
    fc1: Linear,
    fc2: Linear,
}

impl Forward for Block {
    fn forward(&self, x: &Tensor) -> ferrotorch_core::Result<Tensor> {
        x.add(&self.fc2.call(&self.fc1.call(x)?.tanh()?)?)
    }
}

#[derive(Module)]
#[module(crate = ferrotorch_nn)]
struct Net {
    state: ModuleState,
    inp: Linear,
    blocks: Vec<Block>,
    head: Linear,
}

impl Forward for Net {
    fn forward(&self, x: &Tensor) -> ferrotorch_core::Result<Tensor> {
        let mut h = self.inp.call(x)?;
        for b in &self.blocks {
            h = b.call(&h)?;
        }
        self.head.call(&h)
    }
}

/// In 6, hidden 10, out 3: on 4 ranks the hidden rows split 3/3/3/1 and
/// the head's 1/1/1/0 (an empty shard).
fn net(seed: u64) -> Net {
    manual_seed(seed);
    let block = || Block {
        state: ModuleState::default(),
        fc1: Linear::new(10, 10).unwrap(),
        fc2: Linear::new(10, 10).unwrap(),
    };
    Net {
        state: ModuleState::default(),
        inp: Linear::new(6, 10).unwrap(),
        blocks: vec![block(), block()],
        head: Linear::new(10, 3).unwrap(),
    }
}

/// Shards each block, then the whole model.
fn shard(net: &Net, mesh: &Arc<dist::DeviceMesh>, opts: FsdpOptions) -> (Vec<FsdpModule>, FsdpModule) {
    let blocks = net.blocks.iter().map(|b| fully_shard(b, mesh, opts).unwrap()).collect();
    (blocks, fully_shard(net, mesh, opts).unwrap())
}

/// This rank's batch of step `step` (of the global batch of `n` ranks).
fn batch(step: u64, n: usize, r: usize) -> (Tensor, Tensor) {
    manual_seed(1000 + step);
    let x = Tensor::randn((n * B, 6)).unwrap();
    let y = Tensor::randn((n * B, 3)).unwrap();
    let rows = |t: &Tensor| t.narrow(0, (r * B) as i64, B as i64).unwrap();
    (rows(&x), rows(&y))
}

fn mse(out: &Tensor, y: &Tensor) -> Tensor {
    out.sub(y).unwrap().pow(2.0).unwrap().mean().unwrap()
}

fn assert_state_close(a: &StateDict, b: &StateDict, rtol: f32, what: &str) {
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{what}: keys"
    );
    for (k, t) in a.iter() {
        assert_close(t, b.get(k).unwrap(), (rtol, 0.0), &format!("{what} {k}"));
    }
}

#[test]
#[ignore = "the entry point of the child processes that the other tests start"]
fn child() {
    let case = join_as_child();
    match case.as_str() {
        "vs_ddp" => vs_ddp(&std::env::var("FERRO_FSDP_MODE").unwrap()),
        "mixed" => mixed_precision(),
        "state" => state_dicts_and_errors(),
        "killed" => {
            killed_mid_step();
            // (the group cannot be left cleanly with a rank gone)
            println!("CHILD OK");
            std::process::exit(0);
        }
        other => panic!("unknown case {other}"),
    }
    dist::destroy_process_group();
    println!("CHILD OK");
}

fn vs_ddp(mode: &str) {
    let n = dist::get_world_size().unwrap();
    let r = dist::get_rank().unwrap();
    let mesh = Arc::new(match mode {
        "hsdp" => dist::init_device_mesh("cpu", &[2, n / 2], Some(&["replicate", "shard"])).unwrap(),
        _ => dist::init_device_mesh("cpu", &[n], None).unwrap(),
    });
    let opts = FsdpOptions {
        reshard_after_forward: mode != "keep",
        ..Default::default()
    };
    let ddp = DistributedDataParallel::new(net(7), DdpOptions::default()).unwrap();
    let sharded = net(7);
    let (blocks, root) = shard(&sharded, &mesh, opts);
    assert_state_close(
        &full_state_dict(&sharded).unwrap(),
        &ddp.module().state_dict(),
        0.0,
        "after sharding",
    );
    let adam = || AdamWOptions::new().lr(1e-2);
    let mut ddp_opt = AdamW::new(ddp.parameters(), adam()).unwrap();
    let mut opt = AdamW::new(sharded.parameters(), adam()).unwrap();
    let gathers = Arc::new(AtomicUsize::new(0));
    let seen = gathers.clone();
    let watched = blocks[0].clone();
    sharded.blocks[1]
        .register_forward_pre_hook(move |_, _| {
            // Block 0's forward is over when block 1's starts.
            if !watched.is_unsharded() {
                seen.fetch_add(1, Ordering::Relaxed);
            }
            Ok(None)
        })
        .unwrap();
    for step in 0..STEPS {
        let (x, y) = batch(step, n, r);
        ddp_opt.zero_grad().unwrap();
        let ddp_loss = mse(&ddp.call(&x).unwrap(), &y);
        ddp_loss.backward().unwrap();
        ddp_opt.step().unwrap();

        opt.zero_grad().unwrap();
        let loss = mse(&sharded.call(&x).unwrap(), &y);
        // Between forward and backward: the root keeps its parameters
        // gathered, the blocks only without resharding.
        assert!(root.is_unsharded());
        assert_eq!(blocks[1].is_unsharded(), mode == "keep");
        loss.backward().unwrap();
        assert!(!root.is_unsharded() && blocks.iter().all(|b| !b.is_unsharded()));
        for p in sharded.parameters() {
            assert_eq!(p.grad().unwrap().shape(), p.shape().as_slice(), "a shard's gradient");
        }
        opt.step().unwrap();
        assert_close(&loss, &ddp_loss, (1e-5, 0.0), &format!("loss at step {step}"));
    }
    let want = if mode == "keep" { 0 } else { STEPS as usize };
    assert_eq!(gathers.load(Ordering::Relaxed), want, "block 0 freed after its forward");
    assert_state_close(
        &full_state_dict(&sharded).unwrap(),
        &ddp.module().state_dict(),
        1e-5,
        &format!("{mode} after {STEPS} steps"),
    );
    // Each rank holds its rows only: about 1/N of the parameters.
    let held: usize = sharded.parameters().iter().map(Parameter::numel).sum();
    let total: usize = ddp.parameters().iter().map(Parameter::numel).sum();
    let shard_n = mesh.size(mesh.ndim() - 1).unwrap();
    assert!(
        held <= total.div_ceil(shard_n) + 3 * 10,
        "{held} of {total} held on one of {shard_n}"
    );
    // An evaluation forward frees everything it gathered.
    no_grad(|| sharded.call(&batch(0, n, r).0)).unwrap();
    assert!(!root.is_unsharded() && blocks.iter().all(|b| !b.is_unsharded()));
}

fn mixed_precision() {
    let n = dist::get_world_size().unwrap();
    let r = dist::get_rank().unwrap();
    let mesh = Arc::new(dist::init_device_mesh("cpu", &[n], None).unwrap());
    let plain = net(3);
    shard(&plain, &mesh, FsdpOptions::default());
    let bf16 = net(3);
    let mp = FsdpOptions {
        mp_policy: MixedPrecisionPolicy {
            param_dtype: Some(DType::BF16),
            reduce_dtype: Some(DType::F32),
            ..Default::default()
        },
        ..Default::default()
    };
    shard(&bf16, &mesh, mp);
    let computed_in = Arc::new(AtomicUsize::new(0));
    let c = computed_in.clone();
    bf16.blocks[0]
        .fc1
        .register_forward_hook(move |m, inputs, outputs| {
            assert_eq!(m.parameters()[0].dtype(), DType::BF16, "gathered in bf16");
            assert_eq!((inputs[0].dtype(), outputs[0].dtype()), (DType::BF16, DType::BF16));
            c.fetch_add(1, Ordering::Relaxed);
            Ok(None)
        })
        .unwrap();
    let mut opt = AdamW::new(plain.parameters(), AdamWOptions::new().lr(1e-2)).unwrap();
    let mut opt16 = AdamW::new(bf16.parameters(), AdamWOptions::new().lr(1e-2)).unwrap();
    let (mut first, mut last) = (0.0, 0.0);
    for step in 0..20 {
        let (x, y) = batch(step, n, r);
        opt.zero_grad().unwrap();
        opt16.zero_grad().unwrap();
        let loss = mse(&plain.call(&x).unwrap(), &y);
        loss.backward().unwrap();
        let loss16 = mse(&bf16.call(&x).unwrap().to_dtype(DType::F32).unwrap(), &y);
        loss16.backward().unwrap();
        for p in bf16.parameters() {
            assert_eq!(
                (p.dtype(), p.grad().unwrap().dtype()),
                (DType::F32, DType::F32),
                "f32 shards and grads"
            );
        }
        opt.step().unwrap();
        opt16.step().unwrap();
        let (a, b) = (loss.item::<f32>().unwrap(), loss16.item::<f32>().unwrap());
        assert!(
            (a - b).abs() <= 0.05 * a.abs() + 1e-3,
            "step {step}: bf16 loss {b} vs f32 {a}"
        );
        if step == 0 {
            first = b;
        }
        last = b;
    }
    assert!(last < first, "bf16 training lowers the loss: {first} -> {last}");
    assert_eq!(computed_in.load(Ordering::Relaxed), 20);
}

#[derive(Module)]
#[module(crate = ferrotorch_nn)]
struct NoState {
    fc: Linear,
}

#[derive(Module)]
#[module(crate = ferrotorch_nn)]
struct WithScalar {
    state: ModuleState,
    scale: Parameter,
}

fn state_dicts_and_errors() {
    let n = dist::get_world_size().unwrap();
    let r = dist::get_rank().unwrap();
    let mesh = Arc::new(dist::init_device_mesh("cpu", &[n], None).unwrap());
    let reference = net(5).state_dict();
    let sharded = net(5);
    let (_, root) = shard(&sharded, &mesh, FsdpOptions::default());
    // Bitwise: gathering moves bytes only.
    assert_state_close(&full_state_dict(&sharded).unwrap(), &reference, 0.0, "full state dict");
    let params = root.sharded_parameters().unwrap();
    let names: Vec<&str> = params.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["inp.weight", "inp.bias", "head.weight", "head.bias"]);
    let (_, head_w) = &params[2];
    assert_eq!(
        (head_w.shape(), head_w.placements()),
        (&[3usize, 10][..], &[Placement::Shard(0)][..])
    );
    let rows = dist::dtensor::chunk_range(3, n, r).1;
    assert_eq!(head_w.to_local().shape(), &[rows, 10]);
    let sd = dist::fsdp::sharded_state_dict(&sharded).unwrap();
    assert_eq!(sd.len(), reference.len());
    assert_eq!(sd[2].0, "blocks.0.fc1.weight");
    assert_eq!(sd[2].1.full_tensor().unwrap().shape(), &[10, 10]);
    // Loading a full state dict reshards it.
    let mut shifted = StateDict::new();
    for (k, t) in reference.iter() {
        shifted.insert(k, t.add(1.0).unwrap());
    }
    load_full_state_dict(&sharded, &shifted).unwrap();
    assert_state_close(&full_state_dict(&sharded).unwrap(), &shifted, 0.0, "loaded");
    let mut bad = shifted.clone();
    bad.insert("head.weight", Tensor::zeros([2, 10]).unwrap());
    let e = load_full_state_dict(&sharded, &bad).unwrap_err().to_string();
    assert!(e.contains("head.weight") && e.contains("[2, 10]"), "{e}");
    bad.remove("head.weight");
    let e = load_full_state_dict(&sharded, &bad).unwrap_err().to_string();
    assert!(e.contains("missing key \"head.weight\""), "{e}");
    // Gradient accumulation without communication: a backward without
    // sync and one with it give the shards the gradients of both losses'
    // sum in one backward.
    let accumulated = net(6);
    shard(&accumulated, &mesh, FsdpOptions::default());
    let at_once = net(6);
    shard(&at_once, &mesh, FsdpOptions::default());
    let ((x1, y1), (x2, y2)) = (batch(1, n, r), batch(2, n, r));
    dist::fsdp::set_requires_gradient_sync(&accumulated, false);
    mse(&accumulated.call(&x1).unwrap(), &y1).backward().unwrap();
    assert!(
        accumulated.parameters().iter().all(|p| p.grad_opt().is_none()),
        "no shard gradient without sync"
    );
    dist::fsdp::set_requires_gradient_sync(&accumulated, true);
    mse(&accumulated.call(&x2).unwrap(), &y2).backward().unwrap();
    let both = mse(&at_once.call(&x1).unwrap(), &y1)
        .add(&mse(&at_once.call(&x2).unwrap(), &y2))
        .unwrap();
    both.backward().unwrap();
    for (a, b) in accumulated.parameters().iter().zip(at_once.parameters()) {
        assert_close(
            &a.grad().unwrap(),
            &b.grad().unwrap(),
            (1e-5, 1e-7),
            "accumulated without sync",
        );
    }
    // Errors.
    let e = fully_shard(&sharded, &mesh, FsdpOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("sharded already"), "{e}");
    let plain = NoState {
        fc: Linear::new(2, 2).unwrap(),
    };
    let e = fully_shard(&plain, &mesh, FsdpOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("NoState has no ModuleState"), "{e}");
    let scalar = WithScalar {
        state: ModuleState::default(),
        scale: Parameter::new(Tensor::scalar(1.0f32)).unwrap(),
    };
    let e = fully_shard(&scalar, &mesh, FsdpOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("scale is 0-dimensional"), "{e}");
    let mesh3 = Arc::new(dist::init_device_mesh("cpu", &[1, 1, n], None).unwrap());
    let e = fully_shard(&net(1), &mesh3, FsdpOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("got 3"), "{e}");
}

/// Rank 1 is killed (`kill -9`) as block 1 starts its forward at step 3,
/// so the other ranks wait in block 1's all-gather: they must fail with
/// an error naming the lost rank, within seconds, not hang.
fn killed_mid_step() {
    let n = dist::get_world_size().unwrap();
    let r = dist::get_rank().unwrap();
    let mesh = Arc::new(dist::init_device_mesh("cpu", &[n], None).unwrap());
    let model = net(9);
    shard(&model, &mesh, FsdpOptions::default());
    let step = Arc::new(AtomicUsize::new(0));
    let at = step.clone();
    model.blocks[1]
        .register_forward_pre_hook(move |_, _| {
            if r == 1 && at.load(Ordering::Relaxed) == 3 {
                kill_me();
            }
            Ok(None)
        })
        .unwrap();
    let mut opt = AdamW::new(model.parameters(), AdamWOptions::new()).unwrap();
    let start = std::time::Instant::now();
    for s in 0..10 {
        step.store(s, Ordering::Relaxed);
        let (x, y) = batch(s as u64, n, r);
        let result = (|| -> ferrotorch_core::Result<()> {
            opt.zero_grad()?;
            let out = model.call(&x)?;
            out.sub(&y)?.pow(2.0)?.mean()?.backward()?;
            opt.step()?;
            Ok(())
        })();
        if let Err(e) = result {
            assert_lost_rank(&e.to_string(), (s, 3), 1, start);
            return;
        }
    }
    panic!("rank {r} trained on with rank 1 gone");
}

const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn a_rank_killed_mid_all_gather_fails_the_others() {
    launch_with_dead("killed", 3, LIMIT, &[1]);
}

#[test]
fn fsdp_matches_ddp_on_2_ranks() {
    launch_with_env("vs_ddp", 2, LIMIT, &[("FERRO_FSDP_MODE", "reshard")]);
}

#[test]
fn fsdp_matches_ddp_on_4_ranks() {
    launch_with_env("vs_ddp", 4, LIMIT, &[("FERRO_FSDP_MODE", "reshard")]);
}

#[test]
fn fsdp_without_resharding_matches_ddp() {
    launch_with_env("vs_ddp", 2, LIMIT, &[("FERRO_FSDP_MODE", "keep")]);
}

#[test]
fn hsdp_on_a_2x2_mesh_matches_ddp() {
    launch_with_env("vs_ddp", 4, LIMIT, &[("FERRO_FSDP_MODE", "hsdp")]);
}

#[test]
fn bf16_parameters_with_f32_reduction() {
    launch("mixed", 2, LIMIT);
}

#[test]
fn state_dicts_and_errors_on_4_ranks() {
    launch("state", 4, LIMIT);
}

/// Two hosts made of network namespaces, two ranks on each: FSDP over
/// all four, and HSDP replicated across the hosts and sharded within each.
#[test]
fn fsdp_and_hsdp_across_two_hosts_in_network_namespaces() {
    let Some(hosts) = HostPair::create("f") else { return };
    launch_across("vs_ddp", 4, LIMIT, &hosts, &[("FERRO_FSDP_MODE", "reshard")]);
    launch_across("vs_ddp", 4, LIMIT, &hosts, &[("FERRO_FSDP_MODE", "hsdp")]);
}
