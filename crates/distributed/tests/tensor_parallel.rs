//! Tensor parallelism on real processes (2 and 4 ranks): a column- then
//! row-parallel MLP, multi-head attention with its heads cut across the
//! ranks, and a sequence-parallel model (row-parallel embedding,
//! LayerNorms on sequence shards, column-parallel head and loss parallel)
//! give the plain layers' outputs and every gradient (rtol 1e-5), with
//! uneven shards; and the errors.

use std::sync::Arc;
use std::time::Duration;

use dist::DeviceMesh;
use dist::dtensor::{DTensor, Placement, chunk_range};
use dist::tensor_parallel::{
    ColwiseParallel, LAST, ParallelStyle, RowwiseParallel, SequenceParallel, loss_parallel_cross_entropy,
    parallelize_module,
};
use ferrotorch_core::{Tensor, manual_seed};
use ferrotorch_distributed as dist;
use ferrotorch_nn::functional::{CrossEntropyOptions, SdpaOptions, cross_entropy, scaled_dot_product_attention};
use ferrotorch_nn::{Embedding, Forward, LayerNorm, Linear, Module, ModuleState};

mod common;
use common::{HostPair, assert_close, join_as_child, launch, launch_across};

#[test]
#[ignore = "the entry point of the child processes that the other tests start"]
fn child() {
    let case = join_as_child();
    let n = dist::get_world_size().unwrap();
    let mesh = Arc::new(dist::init_device_mesh("cpu", &[n], None).unwrap());
    match case.as_str() {
        "mlp" => mlp(&mesh),
        "attention" => attention(&mesh),
        "sequence" => sequence(&mesh),
        "errors" => errors(&mesh),
        other => panic!("unknown case {other}"),
    }
    dist::destroy_process_group();
    println!("CHILD OK");
}

/// The whole gradient of a parameter cut along `dim` (`None`: whole).
fn full_grad(m: &dyn Module, name: &str, mesh: &Arc<DeviceMesh>, dim: Option<usize>, shape: &[usize]) -> Tensor {
    let p = m.named_parameters().into_iter().find(|(n, _)| n == name).unwrap().1;
    let g = p.grad().unwrap();
    match dim {
        None => g,
        Some(d) => DTensor::from_local(&g, mesh, &[Placement::Shard(d)], Some(shape))
            .unwrap()
            .full_tensor()
            .unwrap(),
    }
}

/// Compares every parameter's gradient with the plain model's: `cuts`
/// gives the dimension each parameter is cut along.
fn compare_grads(tp: &dyn Module, plain: &dyn Module, mesh: &Arc<DeviceMesh>, cuts: &[(&str, Option<usize>)]) {
    let named = plain.named_parameters();
    for (name, p) in named {
        let dim = cuts
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name}"))
            .1;
        let g = full_grad(tp, &name, mesh, dim, &p.shape());
        assert_close(&g, &p.grad().unwrap(), (1e-5, 1e-7), &format!("grad of {name}"));
    }
}

#[derive(Module)]
#[module(crate = ferrotorch_nn)]
struct Mlp {
    state: ModuleState,
    fc1: Linear,
    fc2: Linear,
}

impl Forward for Mlp {
    fn forward(&self, x: &Tensor) -> ferrotorch_core::Result<Tensor> {
        self.fc2.call(&self.fc1.call(x)?.tanh()?)
    }
}

fn make_mlp(seed: u64) -> Mlp {
    manual_seed(seed);
    Mlp {
        state: ModuleState::default(),
        // 10 hidden features: 5/5 on 2 ranks, 3/3/3/1 on 4.
        fc1: Linear::new(6, 10).unwrap(),
        fc2: Linear::new(10, 6).unwrap(),
    }
}

/// Runs `m` on `x` (with grad) and back from `sum(y * w)`; returns y, x.grad.
fn run(m: &dyn Forward, x: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    let x = x.detach().requires_grad_(true).unwrap();
    let y = m.call(&x).unwrap();
    y.mul(w).unwrap().sum().unwrap().backward().unwrap();
    (y.detach(), x.grad().unwrap())
}

fn mlp(mesh: &Arc<DeviceMesh>) {
    manual_seed(99);
    let x = Tensor::randn((4, 6)).unwrap();
    let w = Tensor::randn((4, 6)).unwrap();
    let plain = make_mlp(1);
    let (y0, gx0) = run(&plain, &x, &w);
    // Column- then row-parallel.
    let tp = make_mlp(1);
    parallelize_module(
        &tp,
        mesh,
        &[
            ("fc1", ColwiseParallel::default().into()),
            ("fc2", RowwiseParallel::default().into()),
        ],
    )
    .unwrap();
    let (r, n) = (mesh.get_local_rank(0).unwrap(), mesh.size(0).unwrap());
    assert_eq!(tp.fc1.weight.shape(), [chunk_range(10, n, r).1, 6]);
    assert_eq!(tp.fc2.weight.shape(), [6, chunk_range(10, n, r).1]);
    let (y, gx) = run(&tp, &x, &w);
    assert_close(&y, &y0, (1e-5, 1e-7), "colwise+rowwise output");
    assert_close(&gx, &gx0, (1e-5, 1e-7), "colwise+rowwise input grad");
    let cuts = [
        ("fc1.weight", Some(0)),
        ("fc1.bias", Some(0)),
        ("fc2.weight", Some(1)),
        ("fc2.bias", None),
    ];
    compare_grads(&tp, &plain, mesh, &cuts);
    // Gathered column-parallel output, and a row-parallel layer cutting a
    // whole input itself.
    let plain = make_mlp(2);
    let (y0, gx0) = run(&plain, &x, &w);
    let tp = make_mlp(2);
    let gathered = ColwiseParallel {
        output_layouts: Placement::Replicate,
        ..Default::default()
    };
    let cut_here = RowwiseParallel {
        input_layouts: Placement::Replicate,
        ..Default::default()
    };
    parallelize_module(&tp, mesh, &[("fc1", gathered.into()), ("fc2", cut_here.into())]).unwrap();
    let (y, gx) = run(&tp, &x, &w);
    assert_close(&y, &y0, (1e-5, 1e-7), "replicated layouts output");
    assert_close(&gx, &gx0, (1e-5, 1e-7), "replicated layouts input grad");
    compare_grads(&tp, &plain, mesh, &cuts);
}

/// Multi-head self-attention with separate projections; the number of
/// heads follows the width of q, so the same code runs cut or whole.
#[derive(Module)]
#[module(crate = ferrotorch_nn)]
struct Attention {
    state: ModuleState,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    head_dim: usize,
}

impl Forward for Attention {
    fn forward(&self, x: &Tensor) -> ferrotorch_core::Result<Tensor> {
        let (b, t) = (x.shape()[0], x.shape()[1]);
        let heads = |y: Tensor| -> ferrotorch_core::Result<Tensor> {
            let h = y.shape()[2] / self.head_dim;
            y.view([b, t, h, self.head_dim])?.transpose(1, 2)
        };
        let (q, k, v) = (
            heads(self.q.call(x)?)?,
            heads(self.k.call(x)?)?,
            heads(self.v.call(x)?)?,
        );
        let y = scaled_dot_product_attention(&q, &k, &v, &SdpaOptions::new().is_causal(true))?;
        let width = y.shape()[1] * self.head_dim;
        self.o.call(&y.transpose(1, 2)?.contiguous()?.view([b, t, width])?)
    }
}

fn make_attention(seed: u64) -> Attention {
    manual_seed(seed);
    let lin = || Linear::new(8, 8).unwrap();
    Attention {
        state: ModuleState::default(),
        q: lin(),
        k: lin(),
        v: lin(),
        o: lin(),
        head_dim: 2,
    }
}

/// nanoGPT's attention: one fused projection to q, k and v.
#[derive(Module)]
#[module(crate = ferrotorch_nn)]
struct FusedAttention {
    state: ModuleState,
    c_attn: Linear,
    c_proj: Linear,
    head_dim: usize,
}

impl Forward for FusedAttention {
    fn forward(&self, x: &Tensor) -> ferrotorch_core::Result<Tensor> {
        let (b, t) = (x.shape()[0], x.shape()[1]);
        let qkv = self.c_attn.call(x)?.chunk(3, 2)?;
        let heads = |y: &Tensor| -> ferrotorch_core::Result<Tensor> {
            let h = y.shape()[2] / self.head_dim;
            y.view([b, t, h, self.head_dim])?.transpose(1, 2)
        };
        let (q, k, v) = (heads(&qkv[0])?, heads(&qkv[1])?, heads(&qkv[2])?);
        let y = scaled_dot_product_attention(&q, &k, &v, &SdpaOptions::new().is_causal(true))?;
        let width = y.shape()[1] * self.head_dim;
        self.c_proj.call(&y.transpose(1, 2)?.contiguous()?.view([b, t, width])?)
    }
}

fn fused_attention(mesh: &Arc<DeviceMesh>, x: &Tensor, w: &Tensor) {
    let make = || {
        manual_seed(6);
        FusedAttention {
            state: ModuleState::default(),
            c_attn: Linear::new(8, 24).unwrap(),
            c_proj: Linear::new(8, 8).unwrap(),
            head_dim: 2,
        }
    };
    let plain = make();
    let (y0, gx0) = run(&plain, x, w);
    let tp = make();
    let fused = ColwiseParallel {
        fused: 3,
        ..Default::default()
    };
    parallelize_module(
        &tp,
        mesh,
        &[("c_attn", fused.into()), ("c_proj", RowwiseParallel::default().into())],
    )
    .unwrap();
    let (y, gx) = run(&tp, x, w);
    assert_close(&y, &y0, (1e-5, 1e-7), "fused attention output");
    assert_close(&gx, &gx0, (1e-5, 1e-7), "fused attention input grad");
    // The fused weight's gradient: each rank holds its rows of q, k and v.
    let (r, n) = (mesh.get_local_rank(0).unwrap(), mesh.size(0).unwrap());
    let (start, len) = chunk_range(8, n, r);
    let want: Vec<Tensor> = (0..3)
        .map(|j| {
            plain
                .c_attn
                .weight
                .grad()
                .unwrap()
                .narrow(0, (j * 8 + start) as i64, len as i64)
                .unwrap()
        })
        .collect();
    assert_close(
        &tp.c_attn.weight.grad().unwrap(),
        &Tensor::cat(&want, 0).unwrap(),
        (1e-5, 1e-7),
        "fused weight grad",
    );
    let e = parallelize_module(
        &make(),
        mesh,
        &[(
            "c_attn",
            ColwiseParallel {
                fused: 5,
                ..Default::default()
            }
            .into(),
        )],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("24 features are not 5 equal fused blocks"), "{e}");
}

fn attention(mesh: &Arc<DeviceMesh>) {
    manual_seed(5);
    let x = Tensor::randn((2, 5, 8)).unwrap();
    let w = Tensor::randn((2, 5, 8)).unwrap();
    let plain = make_attention(3);
    let (y0, gx0) = run(&plain, &x, &w);
    let tp = make_attention(3);
    let col = || ParallelStyle::from(ColwiseParallel::default());
    parallelize_module(
        &tp,
        mesh,
        &[
            ("q", col()),
            ("k", col()),
            ("v", col()),
            ("o", RowwiseParallel::default().into()),
        ],
    )
    .unwrap();
    let (y, gx) = run(&tp, &x, &w);
    assert_close(&y, &y0, (1e-5, 1e-7), "attention output");
    assert_close(&gx, &gx0, (1e-5, 1e-7), "attention input grad");
    let mut cuts = Vec::new();
    for l in ["q", "k", "v"] {
        cuts.push((format!("{l}.weight"), Some(0)));
        cuts.push((format!("{l}.bias"), Some(0)));
    }
    fused_attention(mesh, &x, &w);
    cuts.push(("o.weight".into(), Some(1)));
    cuts.push(("o.bias".into(), None));
    let cuts: Vec<(&str, Option<usize>)> = cuts.iter().map(|(n, d)| (n.as_str(), *d)).collect();
    compare_grads(&tp, &plain, mesh, &cuts);
}

/// Megatron's sequence-parallel layout: tokens -> row-parallel embedding
/// (summed and cut along the sequence) -> LayerNorm on the sequence shard
/// -> column-parallel fc1 (gathering the sequence) -> row-parallel fc2
/// (reduce-scattering it) + residual -> LayerNorm -> column-parallel head
/// -> loss parallel.
#[derive(Module)]
#[module(crate = ferrotorch_nn)]
struct SeqNet {
    state: ModuleState,
    emb: Embedding,
    ln: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    ln_f: LayerNorm,
    head: Linear,
}

impl SeqNet {
    /// With `tied`, the head's weight is the embedding's (nanoGPT's).
    fn new(seed: u64, tied: bool) -> SeqNet {
        manual_seed(seed);
        let mut net = SeqNet {
            state: ModuleState::default(),
            emb: Embedding::new(11, 8).unwrap(),
            ln: LayerNorm::new([8]).unwrap(),
            fc1: Linear::new(8, 12).unwrap(),
            fc2: Linear::new(12, 8).unwrap(),
            ln_f: LayerNorm::new([8]).unwrap(),
            head: Linear::new(8, 11).unwrap(),
        };
        if tied {
            net.head.weight = net.emb.weight.clone();
        }
        // Norm parameters away from 1 and 0, so their gradients show.
        for p in net.ln.parameters().iter().chain(&net.ln_f.parameters()) {
            ferrotorch_nn::init::normal_(&p.tensor(), 1.0, 0.3).unwrap();
        }
        net
    }

    fn logits(&self, ids: &Tensor) -> ferrotorch_core::Result<Tensor> {
        let h = self.emb.call(ids)?;
        let h = h.add(&self.fc2.call(&self.fc1.call(&self.ln.call(&h)?)?.tanh()?)?)?;
        self.head.call(&self.ln_f.call(&h)?)
    }
}

fn sequence(mesh: &Arc<DeviceMesh>) {
    sequence_with(mesh, false);
    sequence_with(mesh, true);
}

fn sequence_with(mesh: &Arc<DeviceMesh>, tied: bool) {
    let (b, t, vocab) = (2, 8, 11);
    manual_seed(8);
    let ids = Tensor::randint(0, vocab as i64, (b, t)).unwrap();
    let target = Tensor::randint(0, vocab as i64, (b, t)).unwrap();
    let plain = SeqNet::new(4, tied);
    let logits = plain.logits(&ids).unwrap();
    let loss0 = cross_entropy(
        &logits.view([b * t, vocab]).unwrap(),
        &target.view([b * t]).unwrap(),
        &CrossEntropyOptions::default(),
    )
    .unwrap();
    loss0.backward().unwrap();
    let tp = SeqNet::new(4, tied);
    let seq = Placement::Shard(1);
    parallelize_module(
        &tp,
        mesh,
        &[
            (
                "emb",
                RowwiseParallel {
                    input_layouts: Placement::Replicate,
                    output_layouts: seq,
                }
                .into(),
            ),
            ("ln", SequenceParallel::default().into()),
            (
                "fc1",
                ColwiseParallel {
                    input_layouts: seq,
                    ..Default::default()
                }
                .into(),
            ),
            (
                "fc2",
                RowwiseParallel {
                    output_layouts: seq,
                    ..Default::default()
                }
                .into(),
            ),
            ("ln_f", SequenceParallel::default().into()),
            (
                "head",
                ColwiseParallel {
                    input_layouts: seq,
                    output_layouts: Placement::Shard(LAST),
                    ..Default::default()
                }
                .into(),
            ),
        ],
    )
    .unwrap();
    let local_logits = tp.logits(&ids).unwrap();
    let (r, n) = (mesh.get_local_rank(0).unwrap(), mesh.size(0).unwrap());
    let (v0, vn) = chunk_range(vocab, n, r);
    assert_eq!(local_logits.shape(), [b, t, vn]);
    assert_close(
        &local_logits.detach(),
        &logits.detach().narrow(2, v0 as i64, vn as i64).unwrap(),
        (1e-5, 1e-7),
        "this rank's logits",
    );
    let loss = loss_parallel_cross_entropy(&local_logits, &target, vocab, mesh).unwrap();
    assert_close(&loss.detach(), &loss0.detach(), (1e-5, 1e-7), "loss parallel");
    loss.backward().unwrap();
    let cuts = [
        ("emb.weight", Some(0)),
        ("ln.weight", None),
        ("ln.bias", None),
        ("fc1.weight", Some(0)),
        ("fc1.bias", Some(0)),
        ("fc2.weight", Some(1)),
        ("fc2.bias", None),
        ("ln_f.weight", None),
        ("ln_f.bias", None),
        ("head.weight", Some(0)),
        ("head.bias", Some(0)),
    ];
    compare_grads(&tp, &plain, mesh, &cuts);
    // Bad targets are errors, not wrong losses.
    let bad = target.add(vocab as i64).unwrap();
    let e = loss_parallel_cross_entropy(&local_logits, &bad, vocab, mesh)
        .unwrap_err()
        .to_string();
    assert!(e.contains("target ids must lie in [0, 11)"), "{e}");
}

fn errors(mesh: &Arc<DeviceMesh>) {
    let m = make_mlp(1);
    let e = parallelize_module(&m, mesh, &[("fc3", ColwiseParallel::default().into())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("no submodule matches \"fc3\""), "{e}");
    let net = SeqNet::new(1, false);
    let e = parallelize_module(&net, mesh, &[("ln", ColwiseParallel::default().into())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("ColwiseParallel does not apply to ln (LayerNorm)"), "{e}");
    let bad = ColwiseParallel {
        input_layouts: Placement::Shard(0),
        ..Default::default()
    };
    let e = parallelize_module(&net, mesh, &[("fc1", bad.into())])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("input layout S(0) is not supported here (supported: R, S(1))"),
        "{e}"
    );
    let n = mesh.size(0).unwrap();
    let mesh2 = Arc::new(dist::init_device_mesh("cpu", &[1, n], None).unwrap());
    let e = parallelize_module(&net, &mesh2, &[("fc1", ColwiseParallel::default().into())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("must have 1 dimension"), "{e}");
}

const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn colwise_rowwise_mlp_on_2_and_4_ranks() {
    launch("mlp", 2, LIMIT);
    launch("mlp", 4, LIMIT);
}

#[test]
fn attention_heads_across_ranks() {
    launch("attention", 2, LIMIT);
    launch("attention", 4, LIMIT);
}

#[test]
fn sequence_parallel_with_loss_parallel() {
    launch("sequence", 2, LIMIT);
    launch("sequence", 4, LIMIT);
}

#[test]
fn tensor_parallel_errors() {
    launch("errors", 2, LIMIT);
}

/// Two hosts made of network namespaces, two ranks on each: the
/// tensor-parallel group crosses the "network".
#[test]
fn tensor_parallel_across_two_hosts_in_network_namespaces() {
    let Some(hosts) = HostPair::create("t") else { return };
    launch_across("mlp", 4, LIMIT, &hosts, &[]);
    launch_across("sequence", 4, LIMIT, &hosts, &[]);
}
