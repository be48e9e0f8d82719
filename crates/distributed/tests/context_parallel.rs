//! Ring attention on real processes (2 and 4 ranks): each rank's rows of
//! the output and its parts of the gradients of q, k and v equal
//! `scaled_dot_product_attention` on the whole sequence (rtol 1e-5),
//! causal with the load-balanced layout, causal without it, and without a
//! mask; the layout round-trips; the errors.

use std::sync::Arc;
use std::time::Duration;

use dist::context_parallel::{RingAttentionOptions, context_shard, context_unshard, ring_attention};
use ferrotorch_core::{Tensor, manual_seed};
use ferrotorch_distributed as dist;
use ferrotorch_nn::functional::{SdpaOptions, scaled_dot_product_attention};

mod common;
use common::{HostPair, assert_close, join_as_child, launch, launch_across};

#[test]
#[ignore = "the entry point of the child processes that the other tests start"]
fn child() {
    let case = join_as_child();
    let n = dist::get_world_size().unwrap();
    let mesh = Arc::new(dist::init_device_mesh("cpu", &[n], None).unwrap());
    match case.as_str() {
        "ring" => {
            for (causal, balance) in [(true, true), (true, false), (false, true)] {
                let opts = RingAttentionOptions {
                    is_causal: causal,
                    load_balance: balance,
                    ..Default::default()
                };
                ring(&mesh, &opts);
            }
        }
        "errors" => errors(&mesh),
        other => panic!("unknown case {other}"),
    }
    dist::destroy_process_group();
    println!("CHILD OK");
}

fn ring(mesh: &Arc<dist::DeviceMesh>, opts: &RingAttentionOptions) {
    manual_seed(21);
    let (b, h, t, d) = (2, 3, 16, 4);
    let leaf = || Tensor::randn((b, h, t, d)).unwrap().requires_grad_(true).unwrap();
    let (q, k, v) = (leaf(), leaf(), leaf());
    let w = Tensor::randn((b, h, t, d)).unwrap();
    let whole = scaled_dot_product_attention(&q, &k, &v, &SdpaOptions::new().is_causal(opts.is_causal)).unwrap();
    whole.mul(&w).unwrap().sum().unwrap().backward().unwrap();
    let shard = |x: &Tensor| context_shard(&x.detach(), 2, mesh, opts).unwrap();
    let local = |x: &Tensor| shard(x).requires_grad_(true).unwrap();
    let (ql, kl, vl) = (local(&q), local(&k), local(&v));
    let out = ring_attention(&ql, &kl, &vl, mesh, opts).unwrap();
    let what = format!("{opts:?} on {} ranks", mesh.size(0).unwrap());
    assert_close(&out.detach(), &shard(&whole), (1e-5, 1e-7), &format!("{what}: output"));
    assert_close(
        &context_unshard(&out.detach(), 2, mesh, opts).unwrap(),
        &whole.detach(),
        (1e-5, 1e-7),
        &format!("{what}: gathered"),
    );
    out.mul(&shard(&w)).unwrap().sum().unwrap().backward().unwrap();
    for (name, l, g) in [("q", &ql, &q), ("k", &kl, &k), ("v", &vl, &v)] {
        assert_close(
            &l.grad().unwrap(),
            &shard(&g.grad().unwrap()),
            (1e-5, 1e-7),
            &format!("{what}: grad of {name}"),
        );
    }
}

fn errors(mesh: &Arc<dist::DeviceMesh>) {
    let opts = RingAttentionOptions {
        is_causal: true,
        ..Default::default()
    };
    let n = mesh.size(0).unwrap();
    let x = Tensor::randn((1, 1, 4 * n + 1, 2)).unwrap();
    let e = context_shard(&x, 2, mesh, &opts).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "a sequence of {} does not cut into {} equal chunks",
            4 * n + 1,
            2 * n
        )),
        "{e}"
    );
    let q = Tensor::randn((1, 4, 2)).unwrap();
    let e = ring_attention(&q, &q, &q, mesh, &opts).unwrap_err().to_string();
    assert!(e.contains("[batch, heads, seq, dim]"), "{e}");
}

const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn ring_attention_matches_sdpa_on_2_and_4_ranks() {
    launch("ring", 2, LIMIT);
    launch("ring", 4, LIMIT);
}

#[test]
fn context_parallel_errors() {
    launch("errors", 2, LIMIT);
}

/// Two hosts made of network namespaces, two ranks on each: the ring
/// crosses the "network" twice.
#[test]
fn ring_attention_across_two_hosts_in_network_namespaces() {
    let Some(hosts) = HostPair::create("r") else { return };
    launch_across("ring", 4, LIMIT, &hosts, &[]);
}
