//! DTensor on real processes (4 ranks): distribute_tensor on 1-D and 2-D
//! meshes with uneven shards, every redistribution between every pair of
//! placement lists of a 2 x 2 mesh (shards, replicas and partial sums,
//! nested shards of one dimension included) checked against the whole
//! tensor, autograd through redistributions, and the errors.

use std::sync::Arc;
use std::time::Duration;

mod common;
use common::{join_as_child, launch};
use ferrotorch_core::{DType, Tensor};
use ferrotorch_distributed as dist;
use ferrotorch_distributed::device_mesh::init_device_mesh;
use ferrotorch_distributed::dtensor::{DTensor, Placement, distribute_tensor, local_shape};

#[test]
#[ignore = "the entry point of the child processes that the other tests start"]
fn child() {
    let case = join_as_child();
    match case.as_str() {
        "dtensor" => dtensor(),
        "ops" => ops(),
        other => panic!("unknown case {other}"),
    }
    dist::destroy_process_group();
    println!("CHILD OK");
}

/// A 5 x 7 tensor of small integers (exact in every sum), the same on
/// every rank when `salt` is 0; other ranks' tensors differ otherwise, to
/// show that rank 0's is the source.
fn source(salt: usize) -> Tensor {
    let v: Vec<f32> = (0..35).map(|i| ((i * 3 + salt * 100) % 17) as f32).collect();
    Tensor::from_vec(v, [5, 7]).unwrap()
}

/// The expected local tensor: `x` cut left to right by the shards of
/// `placements`, at this rank's coordinates.
fn expected_local(x: &Tensor, mesh: &dist::DeviceMesh, placements: &[Placement]) -> Tensor {
    let mut x = x.clone();
    for (d, p) in placements.iter().enumerate() {
        if let Placement::Shard(dim) = p {
            let n = mesh.size(d).unwrap();
            let k = mesh.get_local_rank(d).unwrap();
            let (start, len) = dist::dtensor::chunk_range(x.shape()[*dim], n, k);
            x = x.narrow(*dim as i64, start as i64, len as i64).unwrap();
        }
    }
    x.contiguous().unwrap()
}

fn same(a: &Tensor, b: &Tensor) -> bool {
    a.shape() == b.shape() && a.to_vec::<f32>().unwrap() == b.to_vec::<f32>().unwrap()
}

fn dtensor() {
    let r = dist::get_rank().unwrap();
    let x = source(0);
    use Placement::{Replicate as R, Shard as S};
    let p = Placement::PARTIAL_SUM;

    // 1-D over 4 ranks: 5 rows in chunks 2, 2, 1, 0; 7 columns in 2, 2, 2, 1.
    let line = Arc::new(init_device_mesh("cpu", &[4], None).unwrap());
    for placement in [S(0), S(1), R] {
        // Every rank but 0 passes other values: rank 0's are the source.
        let d = distribute_tensor(&source(r), &line, &[placement]).unwrap();
        let want = expected_local(&x, &line, &[placement]);
        assert!(same(&d.to_local(), &want), "{placement} on rank {r}");
        assert_eq!(d.to_local().shape(), local_shape(&line, &[placement], &[5, 7]).unwrap());
        assert!(same(&d.full_tensor().unwrap(), &x), "{placement} gathered");
    }
    let rows = distribute_tensor(&x, &line, &[S(0)]).unwrap();
    assert_eq!(rows.to_local().shape(), [[2, 7], [2, 7], [1, 7], [0, 7]][r]);
    // Shard(0) -> Shard(1): an all-to-all with uneven pieces both ways.
    let cols = rows.redistribute(&[S(1)]).unwrap();
    assert!(same(&cols.to_local(), &expected_local(&x, &line, &[S(1)])));
    assert!(same(&cols.redistribute(&[S(0)]).unwrap().to_local(), &rows.to_local()));
    // Partial: a replica divided by 4 sums back to the whole.
    let part = distribute_tensor(&x, &line, &[R]).unwrap().redistribute(&[p]).unwrap();
    assert!(same(&part.to_local(), &x.div(4.0).unwrap()));
    assert!(same(
        &part.redistribute(&[S(1)]).unwrap().to_local(),
        &expected_local(&x, &line, &[S(1)])
    ));
    assert!(same(&part.full_tensor().unwrap(), &x));

    // 2 x 2: every placement list to every other.
    let mesh = Arc::new(init_device_mesh("cpu", &[2, 2], Some(&["dp", "tp"])).unwrap());
    let options = [S(0), S(1), R, p];
    let all: Vec<[Placement; 2]> = options
        .iter()
        .flat_map(|&a| options.iter().map(move |&b| [a, b]))
        .collect();
    let whole = distribute_tensor(&x, &mesh, &[R, R]).unwrap();
    let mut checked = 0;
    for from in &all {
        let src = whole.redistribute(from).unwrap();
        assert!(same(&src.full_tensor().unwrap(), &x), "{from:?} gathered");
        if !from.iter().any(Placement::is_partial) {
            assert!(
                same(&src.to_local(), &expected_local(&x, &mesh, from)),
                "{from:?} local"
            );
        }
        for to in &all {
            let dst = src.redistribute(to).unwrap();
            assert_eq!(dst.placements(), to);
            assert_eq!(
                dst.to_local().shape(),
                local_shape(&mesh, to, &[5, 7]).unwrap(),
                "{from:?} -> {to:?}"
            );
            if !to.iter().any(Placement::is_partial) {
                assert!(
                    same(&dst.to_local(), &expected_local(&x, &mesh, to)),
                    "{from:?} -> {to:?} on rank {r}"
                );
            }
            assert!(
                same(&dst.full_tensor().unwrap(), &x),
                "{from:?} -> {to:?} gathered on rank {r}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 256);

    // Autograd: the gradient of a sharded leaf through an all-to-all and
    // an all-gather is its chunk of the upstream gradient.
    let w = Tensor::from_vec((0..35).map(|i| (i % 5) as f32 - 2.0).collect::<Vec<_>>(), [5, 7]).unwrap();
    let leaf = distribute_tensor(&x.requires_grad_(true).unwrap(), &mesh, &[S(0), S(1)]).unwrap();
    assert!(leaf.requires_grad());
    let full = leaf.redistribute(&[S(1), R]).unwrap().full_tensor().unwrap();
    full.mul(&w).unwrap().sum().unwrap().backward().unwrap();
    let g = leaf.to_local().grad().unwrap();
    assert!(
        same(&g, &expected_local(&w, &mesh, &[S(0), S(1)])),
        "gradient on rank {r}"
    );
    // Through a partial sum: the gradient of the replica is the whole
    // upstream gradient (a partial value's gradient is replicated).
    let rep = distribute_tensor(&x.requires_grad_(true).unwrap(), &mesh, &[R, R]).unwrap();
    let full = rep.redistribute(&[p, S(0)]).unwrap().full_tensor().unwrap();
    full.mul(&w).unwrap().sum().unwrap().backward().unwrap();
    assert!(
        same(&rep.to_local().grad().unwrap(), &w),
        "partial gradient on rank {r}"
    );

    // from_local: even shards by default; uneven ones with the shape.
    let local = expected_local(&x, &mesh, &[S(0), S(1)]);
    let d = DTensor::from_local(&local, &mesh, &[S(0), S(1)], Some(&[5, 7])).unwrap();
    assert!(same(&d.full_tensor().unwrap(), &x));
    let even = Tensor::from_vec(vec![r as f32; 6], [2, 3]).unwrap();
    let d = DTensor::from_local(&even, &mesh, &[S(0), S(1)], None).unwrap();
    assert_eq!(d.shape(), [4, 6]);
    let want: Vec<f32> = (0..24).map(|i| ((i / 6) / 2 * 2 + (i % 6) / 3) as f32).collect();
    assert_eq!(d.full_tensor().unwrap().to_vec::<f32>().unwrap(), want);

    // Errors.
    let e = distribute_tensor(&x, &mesh, &[S(0)]).unwrap_err().to_string();
    assert!(e.contains("1 placements") && e.contains("2 dimensions"), "{e}");
    let e = distribute_tensor(&x, &mesh, &[S(2), R]).unwrap_err().to_string();
    assert!(e.contains("S(2)") && e.contains("[5, 7]"), "{e}");
    assert!(distribute_tensor(&x, &mesh, &[p, R]).is_err());
    let e = DTensor::from_local(&even, &mesh, &[S(0), S(1)], Some(&[6, 8]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("[2, 3]") && e.contains("[3, 4]"), "{e}");
    let ints = distribute_tensor(&Tensor::arange(8).unwrap().view([4, 2]).unwrap(), &mesh, &[S(0), R]).unwrap();
    assert_eq!(ints.to_local().dtype(), DType::I64);
    assert_eq!(
        ints.full_tensor().unwrap().to_vec::<i64>().unwrap(),
        (0..8).collect::<Vec<_>>()
    );
    assert!(
        ints.redistribute(&[Placement::Partial(dist::ReduceOp::Product), R])
            .is_err()
    );
}

/// A `rows x cols` tensor of small integers from `seed`.
fn ints(rows: usize, cols: usize, seed: usize) -> Tensor {
    let v: Vec<f32> = (0..rows * cols).map(|i| ((i * 7 + seed) % 9) as f32 - 4.0).collect();
    Tensor::from_vec(v, [rows, cols]).unwrap()
}

/// Ops by sharding rules give the plain ops on the full tensors, for
/// every placement list of the operands on a 2 x 2 mesh; and a
/// tensor-parallel MLP's gradients are the plain ones' shards.
fn ops() {
    use Placement::{Replicate as R, Shard as S};
    let p = Placement::PARTIAL_SUM;
    let mesh = Arc::new(init_device_mesh("cpu", &[2, 2], None).unwrap());
    let (a, b, c) = (ints(5, 6, 1), ints(6, 7, 2), ints(5, 6, 3));
    let options = [S(0), S(1), R, p];
    let all: Vec<[Placement; 2]> = options
        .iter()
        .flat_map(|&x| options.iter().map(move |&y| [x, y]))
        .collect();
    let whole = |t: &Tensor| distribute_tensor(t, &mesh, &[R, R]).unwrap();
    let (da, db, dc) = (whole(&a), whole(&b), whole(&c));
    let (mm, sum, prod) = (a.matmul(&b).unwrap(), a.add(&c).unwrap(), a.mul(&c).unwrap());
    for pa in &all {
        let xa = da.redistribute(pa).unwrap();
        let total = xa.sum().unwrap();
        assert_eq!(
            total.full_tensor().unwrap().item::<f32>().unwrap(),
            a.sum().unwrap().item::<f32>().unwrap()
        );
        for pb in &all {
            let y = xa.matmul(&db.redistribute(pb).unwrap()).unwrap();
            assert!(same(&y.full_tensor().unwrap(), &mm), "matmul {pa:?} {pb:?}");
            let xc = dc.redistribute(pb).unwrap();
            assert!(
                same(&xa.add(&xc).unwrap().full_tensor().unwrap(), &sum),
                "add {pa:?} {pb:?}"
            );
            assert!(
                same(&xa.mul(&xc).unwrap().full_tensor().unwrap(), &prod),
                "mul {pa:?} {pb:?}"
            );
            assert!(
                same(&xa.sub(&xc).unwrap().full_tensor().unwrap(), &a.sub(&c).unwrap()),
                "sub {pa:?} {pb:?}"
            );
        }
    }
    // Element-wise maps, softmax, transposes, views and sums over a
    // dimension, from every placement pair.
    let check = |x: &DTensor, want: &Tensor, what: &str| {
        let got = x.full_tensor().unwrap();
        assert!(
            same(&got, want),
            "{what}: {:?} vs {:?}",
            got.to_vec::<f32>(),
            want.to_vec::<f32>()
        );
    };
    for pa in &all {
        let x = da.redistribute(pa).unwrap();
        let shifted = x
            .sub(&whole(&Tensor::full([5, 6], 8.0).unwrap()).redistribute(pa).unwrap())
            .unwrap();
        check(
            &shifted.relu().unwrap(),
            &a.sub(8.0).unwrap().relu().unwrap(),
            &format!("relu {pa:?}"),
        );
        check(&x.neg().unwrap(), &a.neg().unwrap(), &format!("neg {pa:?}"));
        check(
            &x.mul_scalar(0.5).unwrap(),
            &a.mul(0.5).unwrap(),
            &format!("mul_scalar {pa:?}"),
        );
        check(&x.tanh().unwrap(), &a.tanh().unwrap(), &format!("tanh {pa:?}"));
        check(
            &x.softmax(1).unwrap(),
            &a.softmax(1).unwrap(),
            &format!("softmax {pa:?}"),
        );
        check(
            &x.log_softmax(0).unwrap(),
            &a.log_softmax(0).unwrap(),
            &format!("log_softmax {pa:?}"),
        );
        check(
            &x.transpose(0, 1).unwrap(),
            &a.transpose(0, 1).unwrap(),
            &format!("transpose {pa:?}"),
        );
        for shape in [&[5i64, 2, 3][..], &[30], &[-1, 3], &[1, 5, 6]] {
            check(
                &x.view(shape).unwrap(),
                &a.view(shape).unwrap(),
                &format!("view {shape:?} {pa:?}"),
            );
        }
        for (d, keep) in [(0, false), (1, false), (1, true), (-2, true)] {
            check(
                &x.sum_dim(d, keep).unwrap(),
                &a.sum_dim([d], keep).unwrap(),
                &format!("sum_dim {d} {keep} {pa:?}"),
            );
        }
    }
    // Their rules keep what they can: a shard of a kept dimension follows
    // the view, a transpose swaps shards, a sum over a shard is partial.
    let rows = da.redistribute(&[S(0), S(1)]).unwrap();
    assert_eq!(rows.view(&[5, 2, 3]).unwrap().placements(), [S(0), R]);
    assert_eq!(rows.view(&[1, 5, 6]).unwrap().placements(), [S(1), S(2)]);
    assert_eq!(rows.transpose(0, 1).unwrap().placements(), [S(1), S(0)]);
    assert_eq!(rows.sum_dim(0, false).unwrap().placements(), [p, S(0)]);
    assert_eq!(rows.softmax(1).unwrap().placements(), [S(0), R]);
    assert!(rows.view(&[7, 5]).is_err() && rows.softmax(2).is_err());

    // The rules' placements: no communication where none is needed.
    let cols = db.redistribute(&[R, S(1)]).unwrap();
    assert_eq!(da.matmul(&cols).unwrap().placements(), [R, S(1)]);
    let inner = da
        .redistribute(&[S(1), R])
        .unwrap()
        .matmul(&db.redistribute(&[S(0), R]).unwrap())
        .unwrap();
    assert_eq!(inner.placements(), [p, R]);
    assert_eq!(
        da.redistribute(&[S(0), S(1)]).unwrap().sum().unwrap().placements(),
        [p, p]
    );

    // Tensor parallel on mesh dimension 1: x replicated, w1 column-wise
    // (Shard(1)), w2 row-wise (Shard(0)); the loss's gradients are the
    // plain MLP's, sharded alike.
    let x = ints(4, 6, 5);
    let (w1, w2) = (ints(6, 8, 6), ints(8, 3, 7));
    let (g1, g2) = {
        let (w1, w2) = (w1.requires_grad_(true).unwrap(), w2.requires_grad_(true).unwrap());
        x.matmul(&w1)
            .unwrap()
            .relu()
            .unwrap()
            .matmul(&w2)
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        (w1.grad().unwrap(), w2.grad().unwrap())
    };
    let dx = distribute_tensor(&x, &mesh, &[R, R]).unwrap();
    let d1 = distribute_tensor(&w1.detach().requires_grad_(true).unwrap(), &mesh, &[R, S(1)]).unwrap();
    let d2 = distribute_tensor(&w2.detach().requires_grad_(true).unwrap(), &mesh, &[R, S(0)]).unwrap();
    let h = dx.matmul(&d1).unwrap();
    assert_eq!(h.placements(), [R, S(1)]);
    let h = DTensor::from_local(&h.to_local().relu().unwrap(), &mesh, h.placements(), Some(h.shape())).unwrap();
    let out = h.matmul(&d2).unwrap();
    assert_eq!(out.placements(), [R, p], "row-wise output: a partial sum");
    out.sum().unwrap().full_tensor().unwrap().backward().unwrap();
    assert!(same(
        &d1.to_local().grad().unwrap(),
        &expected_local(&g1, &mesh, &[R, S(1)])
    ));
    assert!(same(
        &d2.to_local().grad().unwrap(),
        &expected_local(&g2, &mesh, &[R, S(0)])
    ));

    // Errors.
    let e = da.matmul(&da).unwrap_err().to_string();
    assert!(e.contains("[5, 6]"), "{e}");
    assert!(da.add(&db).is_err());
}

#[test]
fn ops_by_sharding_rules_on_4_ranks() {
    launch("ops", 4, Duration::from_secs(180));
}

#[test]
fn distribute_redistribute_and_gradients_on_4_ranks() {
    launch("dtensor", 4, Duration::from_secs(180));
}
